"""2-d and 3-d pooling on cuda for the four float dtypes (kernels/pool.cu):

    max_pool{2,3}d_with_indices            (values, int64 flat in-plane/in-volume indices)
    max_pool{2,3}d_with_indices_backward   (grad_output, indices), the input's shape a param
    avg_pool{2,3}d, avg_pool{2,3}d_backward    (count_include_pad, ceil_mode, divisor_override)
    adaptive_avg_pool{2,3}d, adaptive_avg_pool{2,3}d_backward

One kernel per op serves both ranks: a 2-d call is a 3-d one with a unit depth (kernel 1,
step 1, no padding, depth stride 0), whose depth loops run once.

Served: (C, *spatial) or (N, C, *spatial) operands at any strides (transposed, sliced,
channels-last, expanded gradients), an empty batch included; results are new contiguous
tensors, as the reference's. The 1-d torch forms run the 2-d ops on an unsqueezed input, so
they are served too.

Numerical contract: bit for bit the reference's, for every op and dtype. Each result element
is computed by one thread (one warp per volume for the max-pool backward) in the reference's
order: max pooling keeps its first-wins tie rule and lets a later NaN win; average sums run
in float (double for float64) in the window's order and divide in double, as NumPy divides by
the int64 divisors; the backward sums run in double in the reference's order (the offset order
of its `+=` over strided slices, np.bincount's for adaptive pooling, np.add.at's output order
in the gradient's dtype for max pooling), then are rounded once to the dtype (bfloat16
through float, as ml_dtypes rounds). No atomics: results depend on the shapes only.

Declined (the reference runs): other dtypes, an `indices` of another dtype or shape,
parameters that are not Python ints in range, an adaptive backward to a 0-size output.
A max-pool backward index outside its plane (volume) is skipped: the forward makes one only
for a window of nothing but padding (dilation with padding), where the reference's NumPy
raises IndexError and PyTorch writes out of bounds; here the gradient of that output is
dropped.
"""
from __future__ import annotations

import ctypes
import math

from reftorch import _dtype as D
from reftorch._ops.nn_pooling import pooling_output_size
from reftorch._tensor import Tensor

from .kernel_base import FLOAT_DTYPES, FLOAT_TYPES, Program, on_one_cuda_device, pointer

KERNELS = ("max_pool_kernel", "max_pool_backward_kernel", "avg_pool_kernel",
           "avg_pool_backward_kernel", "adaptive_avg_pool_kernel",
           "adaptive_avg_pool_backward_kernel")
LIMIT = 1 << 31          # every size and parameter stays below this (64-bit products fit)
WARP_BLOCK = 256         # the max-pool backward's block: 8 warps, one volume each
MAX_WARP_BLOCKS = 65535
RANKS = (2, 3)           # spatial dims served


def expression(kernel, dtype_name):
    return f"{kernel}<{FLOAT_TYPES[dtype_name]}>"


POOL = Program("pool.cu", tuple(expression(k, name) for k in KERNELS for name in FLOAT_TYPES))
PROGRAMS = (POOL,)


class VolumeStrides(ctypes.Structure):
    """struct VolumeStrides of pool.cu."""
    _fields_ = [(name, ctypes.c_int64) for name in ("n", "c", "d", "h", "w")]


class PoolAxis(ctypes.Structure):
    """struct PoolAxis of pool.cu: one spatial dim."""
    _fields_ = [(name, ctypes.c_int64) for name in ("in_", "out", "kernel", "step", "pad",
                                                    "dil")]


class Pool3d(ctypes.Structure):
    """struct Pool3d of pool.cu: per dim (depth, height, width) the pooled size `in_`, the
    output size and the window; src the strides of the operand read."""
    _fields_ = [("batch", ctypes.c_int64), ("channels", ctypes.c_int64), ("d", PoolAxis),
                ("h", PoolAxis), ("w", PoolAxis), ("src", VolumeStrides)]


# --- checks -----------------------------------------------------------------------------------

def _pool_operand(t, n):
    """A float (C, *spatial) or (N, C, *spatial) tensor of n spatial dims whose sizes the
    kernels' arithmetic takes."""
    return isinstance(t, Tensor) and t.dtype.name in FLOAT_TYPES and t.ndim in (n + 1, n + 2) \
        and all(s < LIMIT for s in t._shape)


def _single(out, inputs, n):
    if out is not None or len(inputs) != 1 or not _pool_operand(inputs[0], n) or \
            not on_one_cuda_device(inputs):
        return None
    return inputs[0]


def _tuples(n, *values, minimum=0):
    """Every value a sequence of n Python ints in [minimum, LIMIT)."""
    return all(isinstance(v, (tuple, list)) and len(v) == n and
               all(type(e) is int and minimum <= e < LIMIT for e in v) for v in values)


def _input_shape(shape, grad, n):
    """The forward input's shape of a backward op: ints of grad's rank, same leading dims."""
    return isinstance(shape, (tuple, list)) and len(shape) == grad.ndim and \
        all(type(s) is int and 0 <= s < LIMIT for s in shape) and \
        tuple(shape[:-n]) == tuple(grad._shape[:-n]) and min(shape[-n:]) > 0


def _divisor_override(params):
    """0 for none (the kernels' code), the int, or None when the kernel does not take it."""
    value = params.get("divisor_override")
    if value is None:
        return 0
    if type(value) is not int or value == 0 or not -LIMIT < value < LIMIT:
        return None
    return value


# --- geometry and launches ----------------------------------------------------------------------

def _volumes(t, n):
    """(batch, channels) and the (n, c, d, h, w) strides: an unbatched tensor is one batch,
    a 2-d one has depth stride 0."""
    strides = tuple(t._strides)
    if t.ndim == n + 1:
        lead, strides = (1, t._shape[0]), (0,) + strides
    else:
        lead = tuple(t._shape[:2])
    return lead, VolumeStrides(*strides[:2], *(0,) * (3 - n), *strides[2:])


def _geometry(src, n, in_size, out_size, window=None):
    """A Pool3d reading `src` (n spatial dims); window: (kernel, step, pad, dilation) tuples
    of n each, or None for adaptive pooling. A 2-d call gets a unit depth axis."""
    (batch, channels), strides = _volumes(src, n)
    window = window or ((1,) * n, (1,) * n, (0,) * n, (1,) * n)
    axes = [(1, 1, 1, 1, 0, 1)] * (3 - n) + \
        [(i, o, k, s, p, d) for i, o, k, s, p, d in zip(in_size, out_size, *window)]
    return Pool3d(batch, channels, *(PoolAxis(*a) for a in axes), strides)


def _launch(kernel, t, args, numel):
    storage = t._storage
    if numel:
        storage._driver.launch(storage._index, POOL, expression(kernel, t.dtype.name), numel,
                               args)


def _output(shape, dtype, like):
    return Tensor._empty(tuple(shape), dtype, like.device)


# --- kernels ----------------------------------------------------------------------------------

def max_pool_kernel(n, out, inputs, params):
    """(values, indices) of an n-d max pool."""
    x = _single(out, inputs, n)
    window = [params.get(k) for k in ("kernel_size", "stride", "padding", "dilation")]
    if x is None or not _tuples(n, *window) or not _tuples(n, window[0], window[1], window[3],
                                                           minimum=1):
        return NotImplemented
    kernel, stride, padding, dilation = window
    ceil_mode = bool(params.get("ceil_mode", False))
    out_size = tuple(pooling_output_size(*a, ceil_mode) for a in
                     zip(x._shape[-n:], kernel, stride, padding, dilation))
    if min(out_size) < 1:
        return NotImplemented
    shape = tuple(x._shape[:-n]) + out_size
    values, indices = _output(shape, x.dtype, x), _output(shape, D.int64, x)
    geometry = _geometry(x, n, x._shape[-n:], out_size, window)
    _launch("max_pool_kernel", x,
            (geometry, pointer(values), pointer(indices), pointer(x)), values.numel())
    return values, indices


def max_pool_backward_kernel(n, out, inputs, params):
    """The max-pool gradient: zeros of the input's shape plus each output's gradient added at
    its index, in output order."""
    if out is not None or len(inputs) != 2:
        return NotImplemented
    grad, indices = inputs
    input_shape = params.get("input_shape")
    if not _pool_operand(grad, n) or not isinstance(indices, Tensor) or \
            indices.dtype is not D.int64 or indices._shape != grad._shape or \
            not _input_shape(input_shape, grad, n) or not on_one_cuda_device(inputs):
        return NotImplemented
    result = _output(input_shape, grad.dtype, grad)
    volumes = math.prod(input_shape[:-n])
    if result.numel():
        geometry = _geometry(grad, n, input_shape[-n:], grad._shape[-n:])
        args = (geometry, _volumes(indices, n)[1], pointer(result), pointer(grad),
                pointer(indices))
        warps = WARP_BLOCK // 32
        blocks = min((volumes + warps - 1) // warps, MAX_WARP_BLOCKS)
        storage = grad._storage
        storage._driver.launch_grid(storage._index, POOL,
                                    expression("max_pool_backward_kernel", grad.dtype.name),
                                    (blocks, 1, 1), (WARP_BLOCK, 1, 1), 0, args)
    return result


def _avg_params(n, params):
    """(window, ceil_mode, divisor_override code, count_include_pad), or None."""
    kernel, stride, padding = (params.get(k) for k in ("kernel_size", "stride", "padding"))
    override = _divisor_override(params)
    if not _tuples(n, kernel, stride, padding) or not _tuples(n, kernel, stride, minimum=1) \
            or override is None:
        return None
    return (kernel, stride, padding, (1,) * n), bool(params.get("ceil_mode", False)), \
        override, bool(params.get("count_include_pad", True))


def _avg_out_size(in_size, window, ceil_mode):
    return tuple(pooling_output_size(s, k, st, p, 1, ceil_mode)
                 for s, k, st, p in zip(in_size, *window[:3]))


def avg_pool_kernel(n, out, inputs, params):
    x = _single(out, inputs, n)
    avg = _avg_params(n, params)
    if x is None or avg is None:
        return NotImplemented
    window, ceil_mode, override, include_pad = avg
    out_size = _avg_out_size(x._shape[-n:], window, ceil_mode)
    if min(out_size) < 1:
        return NotImplemented
    result = _output(tuple(x._shape[:-n]) + out_size, x.dtype, x)
    args = (_geometry(x, n, x._shape[-n:], out_size, window),
            ctypes.c_int64(override), ctypes.c_int32(include_pad), pointer(result), pointer(x))
    _launch("avg_pool_kernel", x, args, result.numel())
    return result


def avg_pool_backward_kernel(n, out, inputs, params):
    grad = _single(out, inputs, n)
    avg = _avg_params(n, params)
    input_shape = params.get("input_shape")
    if grad is None or avg is None or not _input_shape(input_shape, grad, n):
        return NotImplemented
    window, ceil_mode, override, include_pad = avg
    if _avg_out_size(input_shape[-n:], window, ceil_mode) != tuple(grad._shape[-n:]):
        return NotImplemented
    result = _output(input_shape, grad.dtype, grad)
    args = (_geometry(grad, n, input_shape[-n:], grad._shape[-n:], window),
            ctypes.c_int64(override), ctypes.c_int32(include_pad), pointer(result),
            pointer(grad))
    _launch("avg_pool_backward_kernel", grad, args, result.numel())
    return result


def adaptive_avg_pool_kernel(n, out, inputs, params):
    x = _single(out, inputs, n)
    size = params.get("output_size")
    if x is None or not _tuples(n, size) or min(x._shape[-n:]) < 1:
        return NotImplemented
    result = _output(tuple(x._shape[:-n]) + tuple(size), x.dtype, x)
    _launch("adaptive_avg_pool_kernel", x,
            (_geometry(x, n, x._shape[-n:], size), pointer(result), pointer(x)),
            result.numel())
    return result


def adaptive_avg_pool_backward_kernel(n, out, inputs, params):
    grad = _single(out, inputs, n)
    input_shape, size = params.get("input_shape"), params.get("output_size")
    if grad is None or not _tuples(n, size, minimum=1) or \
            not _input_shape(input_shape, grad, n) or tuple(grad._shape[-n:]) != tuple(size):
        return NotImplemented
    result = _output(input_shape, grad.dtype, grad)
    _launch("adaptive_avg_pool_backward_kernel", grad,
            (_geometry(grad, n, input_shape[-n:], size), pointer(result), pointer(grad)),
            result.numel())
    return result


def _of_rank(body, n, op_name):
    """The dispatcher's kernel(out, inputs, dtypes, params) for `body` at n spatial dims."""
    def kernel(out, inputs, dtypes, params):
        return body(n, out, inputs, params)
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


BODIES = {"max_pool{}d_with_indices": max_pool_kernel,
          "max_pool{}d_with_indices_backward": max_pool_backward_kernel,
          "avg_pool{}d": avg_pool_kernel, "avg_pool{}d_backward": avg_pool_backward_kernel,
          "adaptive_avg_pool{}d": adaptive_avg_pool_kernel,
          "adaptive_avg_pool{}d_backward": adaptive_avg_pool_backward_kernel}
OPS = {pattern.format(n): _of_rank(body, n, pattern.format(n))
       for n in RANKS for pattern, body in BODIES.items()}


def register_kernels(registrar):
    for op_name, kernel in OPS.items():
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, kernel)
