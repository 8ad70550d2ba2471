"""mm, bmm, addmm and baddbmm on cuda (kernels/gemm.cu): float32 and float64 on the CUDA cores
(a tiled product, each element one fixed-order FMA chain over k), float16 and bfloat16 on the
tensor cores (mma.sync m16n8k16, float32 accumulation, rounded once).

Every kernel computes `out[b] = alpha * (a[b] @ b[b]) + beta * input[b]` into a new contiguous
result (as the reference's is; `out=` is copied by the dispatcher). Operands are read through
their (batch, row, col) strides: transposed, sliced and batch-broadcast views need no copy.
alpha and beta are applied as the reference applies them (product * alpha, then + input * beta;
beta == 0 never reads the input, so its NaN does not propagate). When the reference skips the
product (addmm with alpha == 0 in float32/float64: `skip_zero_alpha`), the kernel runs with
K = 0, so a and b are not read either and the product is zeros.

Rounding: the reference is NumPy's matmul, whose summation order differs, so results agree
within a rounding bound (a few eps times K times |a| @ |b|), not bit for bit.

Declined (the reference runs through the counted fallback): other dtypes, mixed dtypes,
tensors on other devices, complex alpha/beta, negative strides, more than 65535 row tiles
(the grid's y limit), and float16/bfloat16 on GPUs older than sm_80 (no mma.sync m16n8k16).
"""
from __future__ import annotations

import ctypes
import re
import struct

from reftorch._tensor import Tensor
from reftorch_plugins.geometry import broadcast_strides

from .kernel_base import FLOAT_DTYPES, FLOAT_TYPES, Program, on_one_cuda_device, pointer

THREADS = 256                      # RT_GEMM_THREADS
MAX_GRID_YZ = 65535
# Block tiles (rows, cols) by dtype, as gemm.cu's SimtTile and RT_MMA_BM/BN define them.
TILES = {"float32": (128, 128), "float64": (64, 64), "float16": (128, 128),
         "bfloat16": (128, 128)}
TENSOR_CORE = ("float16", "bfloat16")

# GemmArgs: int64 batch, m, n, k; int64 strides[4][3] (out, a, b, input); double alpha, beta;
# int32 has_input, int32 unused.
GEMM_ARGS = struct.Struct("=4q12q2d2i")


def expression(dtype_name):
    kernel = "mma_gemm_kernel" if dtype_name in TENSOR_CORE else "gemm_kernel"
    return f"{kernel}<{FLOAT_TYPES[dtype_name]}>"


GEMM = Program("gemm.cu", tuple(expression(name) for name in FLOAT_TYPES))
PROGRAMS = (GEMM,)


class _Args(ctypes.Structure):
    """GemmArgs as one opaque, 8-aligned block of bytes (the launch copies it)."""
    _fields_ = [("raw", ctypes.c_int64 * (GEMM_ARGS.size // 8))]


def gemm_args(batch, m, n, k, strides, alpha, beta, has_input):
    raw = GEMM_ARGS.pack(batch, m, n, k, *(s for operand in strides for s in operand),
                         alpha, beta, int(has_input), 0)
    return _Args.from_buffer_copy(raw)


def _batched(strides):
    """(batch, row, col) strides: a matrix is a batch of one."""
    return tuple(strides) if len(strides) == 3 else (0,) + tuple(strides)


def _has_mma(storage):
    """Whether the tensor's GPU runs mma.sync m16n8k16 with f16/bf16 inputs (sm_80 and later;
    gemm.cu compiles the tensor-core kernel to a trap for older archs)."""
    arch = storage._driver.arch(storage._index)
    return int(re.search(r"\d+", arch).group()) >= 80


def product(a, b, input, alpha, beta, skip_product=False):
    """beta * input + alpha * (a @ b) for two 2-D or two 3-D cuda tensors (input None: no
    addition), or NotImplemented. skip_product: a and b are not read (the kernel runs with
    K = 0, so the product is zeros)."""
    dtype = a.dtype
    if dtype.name not in FLOAT_TYPES or b.dtype is not dtype or a.ndim != b.ndim:
        return NotImplemented
    uses_input = input is not None and beta != 0
    if uses_input and input.dtype is not dtype:
        return NotImplemented
    if not on_one_cuda_device((a, b, input) if uses_input else (a, b)):
        return NotImplemented
    if a.ndim == 2:
        batch, (m, k), n = 1, a._shape, b._shape[1]
        shape = (m, n)
    elif a.ndim == 3:
        (batch, m, k), n = a._shape, b._shape[2]
        shape = (batch, m, n)
    else:
        return NotImplemented
    strides = [_batched(a._strides), _batched(b._strides)]
    if uses_input:
        strides.append(_batched(broadcast_strides(shape, input._shape, input._strides)))
    else:
        strides.append((0, 0, 0))
    tile_m, tile_n = TILES[dtype.name]
    if min(min(s) for s in strides) < 0 or -(-m // tile_m) > MAX_GRID_YZ:
        return NotImplemented
    if dtype.name in TENSOR_CORE and not _has_mma(a._storage):
        return NotImplemented
    if skip_product:
        k = 0
    result = Tensor._empty(shape, dtype, a.device)
    if result.numel() == 0:
        return result
    out_strides = _batched(result._strides)
    args = (gemm_args(batch, m, n, k, [out_strides, *strides[:2], strides[2]], alpha, beta,
                      uses_input),
            pointer(result), pointer(a), pointer(b),
            pointer(input) if uses_input else ctypes.c_uint64(0))
    grid = (-(-n // tile_n), -(-m // tile_m), min(batch, MAX_GRID_YZ))
    storage = result._storage
    storage._driver.launch_grid(storage._index, GEMM, expression(dtype.name), grid,
                                (THREADS, 1, 1), 0, args)
    return result


def mm_kernel(out, inputs, dtypes, params):
    """mm / bmm: a @ b, or NotImplemented."""
    if len(inputs) != 2:
        return NotImplemented
    return product(inputs[0], inputs[1], None, 1.0, 0.0)


mm_kernel.__name__ = mm_kernel.__qualname__ = "cuda_mm"


def addmm_kernel(out, inputs, dtypes, params):
    """addmm / baddbmm: beta * input + alpha * (a @ b), or NotImplemented."""
    if len(inputs) != 3:
        return NotImplemented
    input, a, b = inputs
    alpha, beta = params.get("alpha", 1), params.get("beta", 1)
    if type(alpha) not in (int, float) or type(beta) not in (int, float):
        return NotImplemented
    # alpha == 0 with skip_zero_alpha: the reference does not read a and b (BLAS's rule).
    skip = alpha == 0 and bool(params.get("skip_zero_alpha"))
    return product(a, b, input, float(alpha), float(beta), skip)


addmm_kernel.__name__ = addmm_kernel.__qualname__ = "cuda_addmm"


def register_kernels(registrar):
    for op_name in ("mm", "bmm"):
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, mm_kernel)
    for op_name in ("addmm", "baddbmm"):
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, addmm_kernel)
