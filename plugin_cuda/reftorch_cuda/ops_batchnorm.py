"""native_batch_norm (training and evaluation) on cuda for the four float dtypes, and
native_batch_norm_backward (training) for float32 and float64, the dtypes the reference
declares it for (kernels/batchnorm.cu).

Served: an (N, C, ...) input whose spatial dims coalesce to one strided dim (NCHW contiguous,
channels-last, a 2-D (N, C) input) with at least one element per channel; weight, bias and
the running statistics 1-D of C elements of the input's dtype, any stride, on the input's
device. Training updates running_mean / running_var in place, as the reference does; they must
be distinct storages from every other operand. Mixed dtypes (a 16-bit input with float32
parameters) decline.

Order and accuracy: one block per channel; the channel's sums run in block_reduce's fixed
order, so the statistics, the running-stat update and the gradients' sums differ from the
reference's NumPy sums by rounding only; every other step is the reference's formula, in
float for the 16-bit dtypes (whose running-stat update the reference partly computes in the
16-bit type: (1 - momentum) * running_mean is rounded once more there, a 16-bit ulp).
"""
from __future__ import annotations

import ctypes

from reftorch import _dtype as D
from reftorch._ops.copy import empty_like_layout
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from .kernel_base import FLOAT_TYPES, Program, launch_blocks, on_one_cuda_device, pointer

DTYPES = tuple(FLOAT_TYPES)            # the forward's
BACKWARD_DTYPES = ("float32", "float64")


def forward_expression(dtype_name):
    return f"batch_norm_kernel<{FLOAT_TYPES[dtype_name]}>"


def backward_expression(dtype_name):
    return f"batch_norm_backward_kernel<{FLOAT_TYPES[dtype_name]}>"


BATCHNORM = Program("batchnorm.cu", tuple(forward_expression(n) for n in DTYPES)
                    + tuple(backward_expression(n) for n in BACKWARD_DTYPES),
                    includes=("plane_stats.cuh",))
PROGRAMS = (BATCHNORM,)


def _planes(t):
    """((batch, channels, inner), (batch, channel, inner) strides) of an (N, C, ...) tensor,
    or None when its spatial dims do not coalesce to one strided dim."""
    inner, (inner_strides,) = coalesce(list(t._shape[2:]), [list(t._strides[2:])])
    if len(inner) != 1:
        return None
    return (t._shape[0], t._shape[1], inner[0]), (t._strides[0], t._strides[1], inner_strides[0])


def _channel_parameter(p, x):
    """An optional per-channel operand the kernels can read: 1-D, C elements, x's dtype."""
    return p is None or (p.dtype is x.dtype and p.ndim == 1 and p._shape[0] == x._shape[1])


def _served_input(x, dtypes=DTYPES):
    return x.dtype.name in dtypes and x.ndim >= 2 and x._shape[0] * x._shape[1] > 0 and \
        x.numel() > 0


def _stride(p):
    return 0 if p is None else p._strides[0]


def _null_or(t):
    return pointer(t) if t is not None else ctypes.c_uint64(0)


def _ints(values):
    return tuple(ctypes.c_int64(v) for v in values)


def _updatable(running, others):
    """The running statistics can be written in place: storages of their own."""
    storages = [r._storage for r in running]
    if storages[0] is storages[1]:
        return False
    return all(t is None or t._storage not in storages for t in others)


def batch_norm_kernel(out, inputs, dtypes, params):
    """native_batch_norm: (output, save_mean, save_invstd); save_* are empty in evaluation,
    as the reference's."""
    if out is not None or len(inputs) != 5:
        return NotImplemented
    x, weight, bias, running_mean, running_var = inputs
    training = bool(params["training"])
    if not _served_input(x) or not all(_channel_parameter(p, x) for p in inputs[1:]):
        return NotImplemented
    if (running_mean is None) != (running_var is None) or \
            (not training and running_mean is None):
        return NotImplemented
    if not on_one_cuda_device([t for t in inputs if t is not None]):
        return NotImplemented
    if training and running_mean is not None and \
            not _updatable((running_mean, running_var), (x, weight, bias)):
        return NotImplemented
    result = empty_like_layout(x)
    x_planes, out_planes = _planes(x), _planes(result)
    if x_planes is None or out_planes is None:
        return NotImplemented
    (batch, channels, inner), x_strides = x_planes
    stats = channels if training else 0
    save_mean, save_rstd = (Tensor._empty((stats,), x.dtype, x.device) for _ in range(2))
    args = (*_ints((batch, channels, inner, *x_strides, *out_planes[1])),
            *_ints(_stride(p) for p in inputs[1:]), ctypes.c_int(int(training)),
            ctypes.c_double(float(params["momentum"])), ctypes.c_double(float(params["eps"])),
            pointer(result), _null_or(save_mean if training else None),
            _null_or(save_rstd if training else None), pointer(x),
            *(_null_or(p) for p in inputs[1:]))
    launch_blocks(BATCHNORM, forward_expression(x.dtype.name), channels, x, args)
    return result, save_mean, save_rstd


def batch_norm_backward_kernel(out, inputs, dtypes, params):
    """native_batch_norm_backward (training): (grad_input, grad_weight, grad_bias), None
    where output_mask says so."""
    if out is not None or len(inputs) != 5:
        return NotImplemented
    grad, x, weight, mean, rstd = inputs
    if not _served_input(x, BACKWARD_DTYPES) or grad.dtype is not x.dtype or \
            grad._shape != x._shape:
        return NotImplemented
    if mean is None or rstd is None or not all(_channel_parameter(p, x)
                                               for p in (weight, mean, rstd)):
        return NotImplemented
    if any(s._shape[0] > 1 and s._strides[0] != 1 for s in (mean, rstd)):
        return NotImplemented   # the kernel reads the saved statistics contiguously
    if not on_one_cuda_device([t for t in inputs if t is not None]):
        return NotImplemented
    mask = tuple(params.get("output_mask", (True, True, True)))
    grad_input = empty_like_layout(x) if mask[0] else None
    planes = [_planes(t) for t in (grad, x, grad_input if mask[0] else x)]
    if None in planes:
        return NotImplemented
    channels = x._shape[1]
    grad_weight, grad_bias = (Tensor._empty((channels,), x.dtype, x.device) if wanted else None
                              for wanted in mask[1:])
    args = (*_ints(planes[1][0]), *_ints(planes[0][1]), *_ints(planes[1][1]),
            *_ints(planes[2][1]), ctypes.c_int64(_stride(weight)),
            *(_null_or(t) for t in (grad_input, grad_weight, grad_bias)), pointer(grad),
            pointer(x), _null_or(weight), pointer(mean), pointer(rstd))
    launch_blocks(BATCHNORM, backward_expression(x.dtype.name), channels, x, args)
    return grad_input, grad_weight, grad_bias


batch_norm_kernel.__name__ = "cuda_native_batch_norm"
batch_norm_backward_kernel.__name__ = "cuda_native_batch_norm_backward"


def register_kernels(registrar):
    registrar.kernel("native_batch_norm", "cuda", [D.by_name(n) for n in DTYPES],
                     batch_norm_kernel)
    registrar.kernel("native_batch_norm_backward", "cuda",
                     [D.by_name(n) for n in BACKWARD_DTYPES], batch_norm_backward_kernel)
