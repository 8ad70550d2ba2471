"""layer_norm and group_norm forward on cuda (native_layer_norm and native_group_norm ->
output, mean, rstd; kernels/norm.cu and kernels/group_norm.cu) for the four float dtypes,
weight and bias optional; the backward ops native_layer_norm_backward and
native_group_norm_backward (float32, float64) as the autograd rows' compositions of device ops.

layer_norm is served when the normalized dims of the input coalesce to one strided dim (a
contiguous tail, or any layout whose normalized part is evenly strided), and weight/bias (when
given) have the input's dtype and coalesce likewise. group_norm is served for an (N, C, ...)
input whose spatial dims coalesce to one strided dim (contiguous, channels-last, sliced along
N or C, a 2-D (N, C) input) with at least one element per group; weight/bias 1-D of C
elements, any stride. Its output is a new contiguous tensor and mean/rstd are (N, group), as
the reference's. A float16/bfloat16 input with float32 parameters (the reference's mixed-type
path, float32 statistics) declines for both.

Numerical contract (both): one block per row, the reference's two passes (mean, then the
biased variance of the centred values) in the computation type (double for float64, float
otherwise, rounded once when stored), with the sums in block_reduce's fixed order instead of
NumPy's pairwise order. mean agrees with the reference within the two summation orders'
rounding bound on sum |x| / count; rstd and the output within a few ulp of the computation
type relative to the row's largest value (the tests state 16), plus one ulp of a 16-bit
output. Results depend on the shape alone.
"""
from __future__ import annotations

import ctypes
import math

from reftorch import _dtype as D
from reftorch._tensor import Tensor
from reftorch.autograd.derivatives.nn_normalization import group_norm_grads, layer_norm_grads
from reftorch.autograd.grad_mode import no_grad
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_TYPES, Program, geometry_struct, launch_blocks, max_dims,
                          on_one_cuda_device, pointer)


def layer_norm_expression(dtype_name):
    return f"layer_norm_kernel<{FLOAT_TYPES[dtype_name]}>"


def group_norm_expression(dtype_name):
    return f"group_norm_kernel<{FLOAT_TYPES[dtype_name]}>"


NORM = Program("norm.cu", tuple(layer_norm_expression(name) for name in FLOAT_TYPES))
GROUP_NORM = Program("group_norm.cu", tuple(group_norm_expression(n) for n in FLOAT_TYPES),
                     includes=("plane_stats.cuh",))
PROGRAMS = (NORM, GROUP_NORM)


def _step(t, normalized):
    """The one stride along the last len(normalized) dims of `t`, or None when they do not
    coalesce to one dim."""
    tail = list(t._strides[t.ndim - len(normalized):])
    shape, (strides,) = coalesce(list(normalized), [tail])
    return strides[0] if len(shape) == 1 else None


def layer_norm_kernel(out, inputs, dtypes, params):
    if out is not None or len(inputs) != 3:
        return NotImplemented
    x, weight, bias = inputs
    dtype, normalized = x.dtype, tuple(params["normalized_shape"])
    n = math.prod(normalized)
    if dtype.name not in FLOAT_TYPES or n == 0:
        return NotImplemented
    parameters = [p for p in (weight, bias) if p is not None]
    if any(p.dtype is not dtype for p in parameters) or not on_one_cuda_device((x, *parameters)):
        return NotImplemented
    steps = [_step(t, normalized) for t in (x, *parameters)]
    if None in steps:
        return NotImplemented
    axis = x.ndim - len(normalized)
    result = Tensor._empty(x._shape, dtype, x.device)
    stats_shape = tuple(x._shape[:axis]) + (1,) * len(normalized)
    mean, rstd = (Tensor._empty(stats_shape, dtype, x.device) for _ in range(2))
    rows = coalesce(list(x._shape[:axis]), [list(result._strides[:axis]),
                                            list(x._strides[:axis])])
    if len(rows[0]) > max_dims():
        return NotImplemented
    if result.numel():
        x_step, *parameter_steps = steps
        weight_step = parameter_steps.pop(0) if weight is not None else 0
        bias_step = parameter_steps.pop(0) if bias is not None else 0
        null = ctypes.c_uint64(0)
        args = (geometry_struct(*rows), ctypes.c_int64(n), ctypes.c_int64(1),
                ctypes.c_int64(x_step), ctypes.c_int64(weight_step), ctypes.c_int64(bias_step),
                ctypes.c_double(float(params["eps"])), pointer(result), pointer(mean),
                pointer(rstd), pointer(x), pointer(weight) if weight is not None else null,
                pointer(bias) if bias is not None else null)
        launch_blocks(NORM, layer_norm_expression(dtype.name), result.numel() // n, x, args)
    return result, mean, rstd


layer_norm_kernel.__name__ = "cuda_native_layer_norm"


def layer_norm_backward_kernel(out, inputs, dtypes, params):
    """native_layer_norm_backward: the autograd row's formula (layer_norm_grads), each of
    its ops a kernel of this plugin, so the gradients never leave the device."""
    grad, x, mean, rstd, weight = inputs
    if out is not None or not on_one_cuda_device(
            tuple(t for t in inputs if t is not None)):
        return NotImplemented
    axis = x.ndim - params["normalized_ndim"]
    stats_shape = tuple(x._shape[:axis]) + (1,) * params["normalized_ndim"]
    with no_grad():
        return layer_norm_grads(x, grad, weight, mean.reshape(stats_shape),
                                rstd.reshape(stats_shape), list(range(axis, x.ndim)),
                                params["output_mask"])


layer_norm_backward_kernel.__name__ = "cuda_native_layer_norm_backward"


def group_norm_backward_kernel(out, inputs, dtypes, params):
    """native_group_norm_backward: the autograd row's formula (group_norm_grads) on the
    device."""
    grad, x, mean, rstd, weight = inputs
    if out is not None or x.ndim < 2 or not on_one_cuda_device(
            tuple(t for t in inputs if t is not None)):
        return NotImplemented
    N, group = params["N"], params["group"]
    with no_grad():
        return group_norm_grads(x, grad, weight, mean.reshape(N, group, 1),
                                rstd.reshape(N, group, 1), group, params["output_mask"])


group_norm_backward_kernel.__name__ = "cuda_native_group_norm_backward"


def _planes(x):
    """((batch, channels, inner), (batch, channel, inner) strides) of an (N, C, ...) tensor
    (inner 1 for a 2-D one), or None when its spatial dims do not coalesce to one dim."""
    inner, (inner_strides,) = coalesce(list(x._shape[2:]) or [1], [list(x._strides[2:]) or [0]])
    if len(inner) != 1:
        return None
    return (x._shape[0], x._shape[1], inner[0]), (x._strides[0], x._strides[1],
                                                  inner_strides[0])


def _channel_parameter(p, x, channels):
    """An optional per-channel operand group_norm_kernel can read: 1-D, C elements, x's
    dtype, on x's device."""
    return p is None or (p.dtype is x.dtype and p.ndim == 1 and p._shape[0] == channels and
                         on_one_cuda_device((x, p)))


def _ints(values):
    return tuple(ctypes.c_int64(v) for v in values)


def group_norm_kernel(out, inputs, dtypes, params):
    """native_group_norm: (output, mean (N, group), rstd (N, group))."""
    if out is not None or len(inputs) != 3:
        return NotImplemented
    x, weight, bias = inputs
    N, C, HxW, group = (params.get(k) for k in ("N", "C", "HxW", "group"))
    if x.dtype.name not in FLOAT_TYPES or not on_one_cuda_device((x,)) or x.ndim < 2 or \
            not all(type(v) is int for v in (N, C, HxW, group)) or x._shape[:2] != (N, C) or \
            math.prod(x._shape[2:]) != HxW or group < 1 or C % group or \
            N * (C // group) * HxW == 0:   # empty: the reference decides (it raises for N = 0)
        return NotImplemented
    if not (_channel_parameter(weight, x, C) and _channel_parameter(bias, x, C)):
        return NotImplemented
    planes = _planes(x)
    if planes is None:
        return NotImplemented
    (batch, channels, inner), x_strides = planes
    result = Tensor._empty(x._shape, x.dtype, x.device)    # contiguous, as the reference's
    mean, rstd = (Tensor._empty((N, group), x.dtype, x.device) for _ in range(2))
    null = ctypes.c_uint64(0)
    args = (*_ints((batch, channels, inner, group, *x_strides,
                    weight._strides[0] if weight is not None else 0,
                    bias._strides[0] if bias is not None else 0)),
            ctypes.c_double(float(params["eps"])), pointer(result), pointer(mean),
            pointer(rstd), pointer(x), pointer(weight) if weight is not None else null,
            pointer(bias) if bias is not None else null)
    launch_blocks(GROUP_NORM, group_norm_expression(x.dtype.name), N * group, x, args)
    return result, mean, rstd


group_norm_kernel.__name__ = "cuda_native_group_norm"


def register_kernels(registrar):
    registrar.kernel("native_layer_norm", "cuda", [D.by_name(n) for n in FLOAT_TYPES],
                     layer_norm_kernel)
    registrar.kernel("native_group_norm", "cuda", [D.by_name(n) for n in FLOAT_TYPES],
                     group_norm_kernel)
    registrar.kernel("native_layer_norm_backward", "cuda", (D.float32, D.float64),
                     layer_norm_backward_kernel)
    registrar.kernel("native_group_norm_backward", "cuda", (D.float32, D.float64),
                     group_norm_backward_kernel)
