"""convolution (1-D, 2-D and 3-D; plain and transposed, any stride, padding, dilation and
groups, optional bias) and convolution_backward_weight on cuda (kernels/conv.cu), for float32,
float64, float16 and bfloat16.

Every problem goes to the kernels as a 3-D one, (depth, height, width): a 2-D convolution has
a unit depth (kernel 1, stride 1, padding 0, dilation 1, stride 0 in memory) and a 1-D one a
unit height too, so one code path serves all three; a unit dim adds no term and the kernels
skip its index division, so 1-D/2-D results and speed are what a 2-D-only kernel gives.

Each is an implicit GEMM through gemm.cu's product bodies: per image and group, the output is
weight (Og x Cg*KD*KH*KW) times the image's im2col matrix (Cg*KD*KH*KW x OD*OH*OW), whose
elements the tile loader computes from the image on the fly (zeros in the padding), so no
im2col matrix is built. A transposed convolution (how autograd's input gradient of a
convolution arrives) gathers, for each output position and tap, the one input element that
reaches it (zero where the stride leaves a gap). The weight gradient is, per group, the output
gradient (Og x N*OD*OH*OW) times the image's windows (N*OD*OH*OW x Cg*KD*KH*KW). Operands are
read through their strides (non-contiguous inputs need no copy); results are new contiguous
tensors.

Numerical contract: float32/float64 outputs are each one fused multiply-add chain over
(c, kd, kh, kw) (weight gradient: over (n, od, oy, ox)) in that row-major order from +0, then
+ bias once; the result depends on the shapes alone. 16-bit types: float32 tensor-core sums,
+ bias in float32, rounded once (as the reference computes in float32). The reference sums
in NumPy's (BLAS's) order, so results agree within a rounding bound of K = Cg*KD*KH*KW
(weight gradient: N*OD*OH*OW) terms, and bit for bit on small-integer data. One difference:
the GEMM multiplies every weight tap by a loaded zero where a transposed convolution's tap
reaches no input element (a stride gap or past the border), so an infinite or NaN weight
gives NaN at those outputs too, where the reference (which adds only the products that
exist) keeps them finite. Plain convolutions and the weight gradient multiply padding zeros
in the reference as well, so they agree on non-finite values.

Declined (the reference runs through the counted fallback): more than 3 spatial dims, mixed
dtypes or devices, negative strides, problems with an index of 2**31 or more, a 16-bit
transposed convolution whose output_padding reaches the stride (the reference then rounds
every product to 16 bits), float16/bfloat16 below sm_80, and a weight gradient whose
gradient has more positions than the windows.
"""
from __future__ import annotations

import ctypes
import math
import struct

from reftorch._tensor import Tensor

from .kernel_base import FLOAT_DTYPES, FLOAT_TYPES, Program, on_one_cuda_device, pointer
from .ops_gemm import MAX_GRID_YZ, TENSOR_CORE, THREADS, TILES, _has_mma

KINDS = ("ConvForward", "ConvTransposed", "ConvWeightGrad")
SPATIAL = 3      # every problem is 3-D: (depth, height, width), unit dims added in front
# ConvArgs: int64 batch, m, n, k, groups, group_in, group_out, in_size[3], out_size[3],
# kernel[3], stride[3], pad[3], dil[3], x_strides[5], f_strides[5], out_strides[5],
# bias_stride; int32 has_bias, unused.
CONV_ARGS = struct.Struct("=41q2i")
INDEX_LIMIT = 2 ** 31   # the kernels split indices in 32-bit arithmetic


def expression(kind, dtype_name):
    return f"conv_kernel<{FLOAT_TYPES[dtype_name]}, {kind}>"


CONV = Program("conv.cu", tuple(expression(kind, name) for kind in KINDS for name in FLOAT_TYPES),
               includes=("gemm.cu",))
PROGRAMS = (CONV,)


class _Args(ctypes.Structure):
    """ConvArgs as one opaque, 8-aligned block of bytes (the launch copies it)."""
    _fields_ = [("raw", ctypes.c_int64 * (CONV_ARGS.size // 8))]


def conv_args(product, groups, group_in, group_out, in_size, out_size, kernel, stride, padding,
              dilation, x_strides, f_strides, out_strides, bias_stride, has_bias):
    """The ConvArgs bytes; spatial arguments are (depth, height, width) triples, strides
    (n, c, d, h, w)."""
    raw = CONV_ARGS.pack(*product, groups, group_in, group_out, *in_size, *out_size, *kernel,
                         *stride, *padding, *dilation, *x_strides, *f_strides, *out_strides,
                         bias_stride, int(has_bias), 0)
    return _Args.from_buffer_copy(raw)


def _as_3d(t):
    """(shape, strides) of a 5-D tensor, or of a 4-D / 3-D one as 5-D with unit depth (and
    height), stride 0 along the added dims."""
    missing = SPATIAL + 2 - t.ndim
    shape, strides = tuple(t._shape), tuple(t._strides)
    return shape[:2] + (1,) * missing + shape[2:], strides[:2] + (0,) * missing + strides[2:]


def _triple(values, unit):
    """A per-dim parameter of an nd-D convolution as a (depth, height, width) triple."""
    values = tuple(values)
    return (unit,) * (SPATIAL - len(values)) + values


def _spatial(params):
    """stride, padding, dilation as triples (unit dims: stride 1, padding 0, dilation 1)."""
    return tuple(_triple(params[name], unit)
                 for name, unit in (("stride", 1), ("padding", 0), ("dilation", 1)))


def _fits(*values):
    return max(values) < INDEX_LIMIT


def _coordinates_fit(in_size, out_size, kernel, stride, padding, dilation):
    """Every row/column coordinate the kernels form (window starts, taps, gaps) is below
    2**31 in magnitude."""
    return all(_fits(o * s + i + 2 * p + d * k + s)
               for i, o, k, s, p, d in zip(in_size, out_size, kernel, stride, padding, dilation))


def _usable(tensors, dtype):
    return all(t.dtype is dtype and min(t._strides, default=0) >= 0 for t in tensors) and \
        on_one_cuda_device(tensors) and \
        (dtype.name not in TENSOR_CORE or _has_mma(tensors[0]._storage))


def _launch(kind, dtype, result, product, args, x, f, bias):
    batch, m, n, _k = product
    tile_m, tile_n = TILES[dtype.name]
    grid = (-(-n // tile_n), -(-m // tile_m), min(batch, MAX_GRID_YZ))
    storage = result._storage
    storage._driver.launch_grid(storage._index, CONV, expression(kind, dtype.name), grid,
                                (THREADS, 1, 1), 0,
                                (args, pointer(result), pointer(x), pointer(f),
                                 pointer(bias) if bias is not None else ctypes.c_uint64(0)))


def _shapes_match(nd, *tensors_and_params):
    return all(len(tuple(v)) == nd for v in tensors_and_params)


def convolution_kernel(out, inputs, dtypes, params):
    """convolution: plain or transposed, 1-D, 2-D or 3-D, or NotImplemented."""
    if len(inputs) != 3:
        return NotImplemented
    x, weight, bias = inputs
    dtype = x.dtype
    if dtype.name not in FLOAT_TYPES or x.ndim not in (3, 4, 5) or weight.ndim != x.ndim:
        return NotImplemented
    if bias is not None and bias.ndim != 1:
        return NotImplemented
    if not _usable((x, weight) if bias is None else (x, weight, bias), dtype):
        return NotImplemented
    nd, groups = x.ndim - 2, params.get("groups", 1)
    transposed = bool(params.get("transposed"))
    per_dim = [params[name] for name in ("stride", "padding", "dilation")] + \
        ([params["output_padding"]] if transposed else [])
    if not _shapes_match(nd, *per_dim):
        return NotImplemented
    stride, padding, dilation = _spatial(params)
    (n, c, *in_size), x_strides = _as_3d(x)
    w_shape, w_strides = _as_3d(weight)
    kernel = w_shape[2:]
    if transposed:
        output_padding = _triple(params["output_padding"], 0)
        if dtype.name in TENSOR_CORE and any(op >= s for op, s in zip(output_padding, stride)):
            return NotImplemented      # the reference rounds each product to 16 bits there
        kind, group_in, group_out = "ConvTransposed", c // groups, w_shape[1]
        out_size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                         zip(in_size, stride, padding, dilation, kernel, output_padding))
    else:
        kind, group_in, group_out = "ConvForward", w_shape[1], w_shape[0] // groups
        out_size = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                         zip(in_size, stride, padding, dilation, kernel))
    shape = (n, group_out * groups) + out_size[SPATIAL - nd:]
    product = (n * groups, group_out, math.prod(out_size), group_in * math.prod(kernel))
    if not (_fits(*product[1:], c, *in_size) and
            _coordinates_fit(in_size, out_size, kernel, stride, padding, dilation)):
        return NotImplemented
    result = Tensor._empty(shape, dtype, x.device)
    if result.numel() == 0:
        return result
    _, out_strides = _as_3d(result)
    args = conv_args(product, groups, group_in, group_out, in_size, out_size, kernel, stride,
                     padding, dilation, x_strides, w_strides, out_strides,
                     0 if bias is None else bias._strides[0], bias is not None)
    _launch(kind, dtype, result, product, args, x, weight, bias)
    return result


convolution_kernel.__name__ = convolution_kernel.__qualname__ = "cuda_convolution"


def weight_grad_kernel(out, inputs, dtypes, params):
    """convolution_backward_weight of a 1-D, 2-D or 3-D convolution, or NotImplemented."""
    if len(inputs) != 2:
        return NotImplemented
    x, grad = inputs
    dtype, weight_shape = x.dtype, tuple(params["weight_shape"])
    if dtype.name not in FLOAT_TYPES or x.ndim not in (3, 4, 5) or grad.ndim != x.ndim or \
            len(weight_shape) != x.ndim or not _usable((x, grad), dtype):
        return NotImplemented
    nd, groups = x.ndim - 2, params.get("groups", 1)
    if not _shapes_match(nd, *(params[name] for name in ("stride", "padding", "dilation"))):
        return NotImplemented
    stride, padding, dilation = _spatial(params)
    (n, c, *in_size), x_strides = _as_3d(x)
    (_, o, *grad_size), grad_strides = _as_3d(grad)
    kernel = _triple(weight_shape[2:], 1)
    windows = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                    zip(in_size, stride, padding, dilation, kernel))
    group_in = weight_shape[1]
    if o != weight_shape[0] or c != group_in * groups or \
            any(g > w for g, w in zip(grad_size, windows)):
        return NotImplemented
    product = (groups, o // groups, group_in * math.prod(kernel), n * math.prod(grad_size))
    if not (_fits(*product[1:], c, *in_size) and
            _coordinates_fit(in_size, grad_size, kernel, stride, padding, dilation)):
        return NotImplemented
    result = Tensor._empty(weight_shape, dtype, x.device)
    if result.numel() == 0:
        return result
    _, out_strides = _as_3d(result)
    args = conv_args(product, groups, group_in, o // groups, in_size, grad_size, kernel,
                     stride, padding, dilation, x_strides, grad_strides, out_strides, 0, False)
    _launch("ConvWeightGrad", dtype, result, product, args, x, grad, None)
    return result


weight_grad_kernel.__name__ = weight_grad_kernel.__qualname__ = "cuda_convolution_backward_weight"


def register_kernels(registrar):
    registrar.kernel("convolution", "cuda", FLOAT_DTYPES, convolution_kernel)
    registrar.kernel("convolution_backward_weight", "cuda", FLOAT_DTYPES, weight_grad_kernel)
