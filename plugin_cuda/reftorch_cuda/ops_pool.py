"""2-d pooling on cuda for the four float dtypes (kernels/pool.cu):

    max_pool2d_with_indices            (values, int64 flat in-plane indices)
    max_pool2d_with_indices_backward   (grad_output, indices), the input's shape a param
    avg_pool2d, avg_pool2d_backward    (count_include_pad, ceil_mode, divisor_override)
    adaptive_avg_pool2d, adaptive_avg_pool2d_backward

Served: (C, H, W) or (N, C, H, W) operands at any strides (transposed, sliced,
channels-last, expanded gradients), an empty batch included; results are new contiguous
tensors, as the reference's. The 1-d torch forms run the 2-d ops on an unsqueezed input, so
they are served too.

Numerical contract: bit for bit the reference's, for every op and dtype. Each result element
is computed by one thread (one warp per plane for the max-pool backward) in the reference's
order: max pooling keeps its first-wins tie rule and lets a later NaN win; average sums run
in float (double for float64) in the window's order and divide in double, as NumPy divides by
the int64 divisors; the backward sums run in double in the reference's order (the offset order
of its `+=` over strided slices, np.bincount's for adaptive pooling, np.add.at's output order
in the gradient's dtype for max pooling), then are rounded once to the dtype (bfloat16
through float, as ml_dtypes rounds). No atomics: results depend on the shapes only.

Declined (the reference runs): other dtypes, 3-d pooling, an `indices` of another dtype or
shape, parameters that are not Python ints in range, an adaptive backward to a 0-size output.
A max-pool backward index outside its plane is skipped: the forward makes one only for a
window of nothing but padding (dilation with padding), where the reference's NumPy raises
IndexError and PyTorch writes out of bounds; here the gradient of that output is dropped.
"""
from __future__ import annotations

import ctypes
import math

from reftorch import _dtype as D
from reftorch._ops.nn_pooling import pooling_output_size
from reftorch._tensor import Tensor

from .kernel_base import FLOAT_DTYPES, FLOAT_TYPES, Program, on_one_cuda_device, pointer

KERNELS = ("max_pool2d_kernel", "max_pool2d_backward_kernel", "avg_pool2d_kernel",
           "avg_pool2d_backward_kernel", "adaptive_avg_pool2d_kernel",
           "adaptive_avg_pool2d_backward_kernel")
LIMIT = 1 << 31          # every size and parameter stays below this (64-bit products fit)
WARP_BLOCK = 256         # the max-pool backward's block: 8 warps, one plane each
MAX_WARP_BLOCKS = 65535


def expression(kernel, dtype_name):
    return f"{kernel}<{FLOAT_TYPES[dtype_name]}>"


POOL = Program("pool.cu", tuple(expression(k, name) for k in KERNELS for name in FLOAT_TYPES))
PROGRAMS = (POOL,)


class PlaneStrides(ctypes.Structure):
    """struct PlaneStrides of pool.cu."""
    _fields_ = [(name, ctypes.c_int64) for name in ("n", "c", "h", "w")]


class Pool2d(ctypes.Structure):
    """struct Pool2d of pool.cu: in_* the pooled plane, out_* the pooled output plane, src
    the strides of the operand read."""
    _fields_ = [*((name, ctypes.c_int64) for name in ("batch", "channels", "in_h", "in_w",
                                                      "out_h", "out_w")),
                ("src", PlaneStrides),
                *((name, ctypes.c_int64) for name in ("kernel_h", "kernel_w", "step_h",
                                                      "step_w", "pad_h", "pad_w", "dil_h",
                                                      "dil_w"))]


# --- checks -----------------------------------------------------------------------------------

def _pool_operand(t):
    """A float (C, H, W) or (N, C, H, W) tensor whose sizes the kernels' arithmetic takes."""
    return isinstance(t, Tensor) and t.dtype.name in FLOAT_TYPES and t.ndim in (3, 4) and \
        all(s < LIMIT for s in t._shape)


def _single(out, inputs):
    if out is not None or len(inputs) != 1 or not _pool_operand(inputs[0]) or \
            not on_one_cuda_device(inputs):
        return None
    return inputs[0]


def _pairs(*values, minimum=0):
    """Every value a pair of Python ints in [minimum, LIMIT)."""
    return all(isinstance(v, (tuple, list)) and len(v) == 2 and
               all(type(e) is int and minimum <= e < LIMIT for e in v) for v in values)


def _input_shape(shape, grad):
    """The forward input's shape of a backward op: ints of grad's rank, same leading dims."""
    return isinstance(shape, (tuple, list)) and len(shape) == grad.ndim and \
        all(type(s) is int and 0 <= s < LIMIT for s in shape) and \
        tuple(shape[:-2]) == tuple(grad._shape[:-2]) and min(shape[-2:]) > 0


def _divisor_override(params):
    """0 for none (the kernels' code), the int, or None when the kernel does not take it."""
    value = params.get("divisor_override")
    if value is None:
        return 0
    if type(value) is not int or value == 0 or not -LIMIT < value < LIMIT:
        return None
    return value


# --- geometry and launches ----------------------------------------------------------------------

def _planes(t):
    """(batch, channels) and the (n, c, h, w) strides: an unbatched tensor is one batch."""
    if t.ndim == 3:
        return (1, t._shape[0]), PlaneStrides(0, *t._strides)
    return tuple(t._shape[:2]), PlaneStrides(*t._strides)


def _geometry(src, in_size, out_size, window=(1, 1, 1, 1, 0, 0, 1, 1)):
    """A Pool2d reading `src`; window: (kernel, step, pad, dilation) pairs, flattened."""
    (batch, channels), strides = _planes(src)
    return Pool2d(batch, channels, *in_size, *out_size, strides, *window)


def _window(kernel, stride, padding, dilation=(1, 1)):
    return (*kernel, *stride, *padding, *dilation)


def _launch(kernel, t, args, numel):
    storage = t._storage
    if numel:
        storage._driver.launch(storage._index, POOL, expression(kernel, t.dtype.name), numel,
                               args)


def _output(shape, dtype, like):
    return Tensor._empty(tuple(shape), dtype, like.device)


# --- kernels ----------------------------------------------------------------------------------

def max_pool2d_kernel(out, inputs, dtypes, params):
    """(values, indices) of a 2-d max pool."""
    x = _single(out, inputs)
    window = [params.get(k) for k in ("kernel_size", "stride", "padding", "dilation")]
    if x is None or not _pairs(*window) or not _pairs(window[0], window[1], window[3],
                                                      minimum=1):
        return NotImplemented
    kernel, stride, padding, dilation = window
    ceil_mode = bool(params.get("ceil_mode", False))
    out_size = tuple(pooling_output_size(*a, ceil_mode) for a in
                     zip(x._shape[-2:], kernel, stride, padding, dilation))
    if min(out_size) < 1:
        return NotImplemented
    shape = tuple(x._shape[:-2]) + out_size
    values, indices = _output(shape, x.dtype, x), _output(shape, D.int64, x)
    geometry = _geometry(x, x._shape[-2:], out_size, _window(kernel, stride, padding, dilation))
    _launch("max_pool2d_kernel", x,
            (geometry, pointer(values), pointer(indices), pointer(x)), values.numel())
    return values, indices


def max_pool2d_backward_kernel(out, inputs, dtypes, params):
    """The max-pool gradient: zeros of the input's shape plus each output's gradient added at
    its index, in output order."""
    if out is not None or len(inputs) != 2:
        return NotImplemented
    grad, indices = inputs
    input_shape = params.get("input_shape")
    if not _pool_operand(grad) or not isinstance(indices, Tensor) or \
            indices.dtype is not D.int64 or indices._shape != grad._shape or \
            not _input_shape(input_shape, grad) or not on_one_cuda_device(inputs):
        return NotImplemented
    result = _output(input_shape, grad.dtype, grad)
    planes = math.prod(input_shape[:-2])
    if result.numel():
        geometry = _geometry(grad, input_shape[-2:], grad._shape[-2:])
        args = (geometry, _planes(indices)[1], pointer(result), pointer(grad),
                pointer(indices))
        warps = WARP_BLOCK // 32
        blocks = min((planes + warps - 1) // warps, MAX_WARP_BLOCKS)
        storage = grad._storage
        storage._driver.launch_grid(storage._index, POOL,
                                    expression("max_pool2d_backward_kernel", grad.dtype.name),
                                    (blocks, 1, 1), (WARP_BLOCK, 1, 1), 0, args)
    return result


def _avg_params(params):
    """(window, ceil_mode, divisor_override code, count_include_pad), or None."""
    kernel, stride, padding = (params.get(k) for k in ("kernel_size", "stride", "padding"))
    override = _divisor_override(params)
    if not _pairs(kernel, stride, padding) or not _pairs(kernel, stride, minimum=1) or \
            override is None:
        return None
    return (kernel, stride, padding), bool(params.get("ceil_mode", False)), override, \
        bool(params.get("count_include_pad", True))


def _avg_out_size(in_size, window, ceil_mode):
    return tuple(pooling_output_size(s, k, st, p, 1, ceil_mode)
                 for s, k, st, p in zip(in_size, *window))


def avg_pool2d_kernel(out, inputs, dtypes, params):
    x = _single(out, inputs)
    avg = _avg_params(params)
    if x is None or avg is None:
        return NotImplemented
    window, ceil_mode, override, include_pad = avg
    out_size = _avg_out_size(x._shape[-2:], window, ceil_mode)
    if min(out_size) < 1:
        return NotImplemented
    result = _output(tuple(x._shape[:-2]) + out_size, x.dtype, x)
    args = (_geometry(x, x._shape[-2:], out_size, _window(*window)),
            ctypes.c_int64(override), ctypes.c_int32(include_pad), pointer(result), pointer(x))
    _launch("avg_pool2d_kernel", x, args, result.numel())
    return result


def avg_pool2d_backward_kernel(out, inputs, dtypes, params):
    grad = _single(out, inputs)
    avg = _avg_params(params)
    input_shape = params.get("input_shape")
    if grad is None or avg is None or not _input_shape(input_shape, grad):
        return NotImplemented
    window, ceil_mode, override, include_pad = avg
    if _avg_out_size(input_shape[-2:], window, ceil_mode) != tuple(grad._shape[-2:]):
        return NotImplemented
    result = _output(input_shape, grad.dtype, grad)
    args = (_geometry(grad, input_shape[-2:], grad._shape[-2:], _window(*window)),
            ctypes.c_int64(override), ctypes.c_int32(include_pad), pointer(result),
            pointer(grad))
    _launch("avg_pool2d_backward_kernel", grad, args, result.numel())
    return result


def adaptive_avg_pool2d_kernel(out, inputs, dtypes, params):
    x = _single(out, inputs)
    size = params.get("output_size")
    if x is None or not _pairs(size) or min(x._shape[-2:]) < 1:
        return NotImplemented
    result = _output(tuple(x._shape[:-2]) + tuple(size), x.dtype, x)
    _launch("adaptive_avg_pool2d_kernel", x,
            (_geometry(x, x._shape[-2:], size), pointer(result), pointer(x)), result.numel())
    return result


def adaptive_avg_pool2d_backward_kernel(out, inputs, dtypes, params):
    grad = _single(out, inputs)
    input_shape, size = params.get("input_shape"), params.get("output_size")
    if grad is None or not _pairs(size, minimum=1) or not _input_shape(input_shape, grad) or \
            tuple(grad._shape[-2:]) != tuple(size):
        return NotImplemented
    result = _output(input_shape, grad.dtype, grad)
    _launch("adaptive_avg_pool2d_backward_kernel", grad,
            (_geometry(grad, input_shape[-2:], size), pointer(result), pointer(grad)),
            result.numel())
    return result


OPS = {"max_pool2d_with_indices": max_pool2d_kernel,
       "max_pool2d_with_indices_backward": max_pool2d_backward_kernel,
       "avg_pool2d": avg_pool2d_kernel, "avg_pool2d_backward": avg_pool2d_backward_kernel,
       "adaptive_avg_pool2d": adaptive_avg_pool2d_kernel,
       "adaptive_avg_pool2d_backward": adaptive_avg_pool2d_backward_kernel}
for _name, _kernel in OPS.items():
    _kernel.__name__ = _kernel.__qualname__ = f"cuda_{_name}"


def register_kernels(registrar):
    for op_name, kernel in OPS.items():
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, kernel)
