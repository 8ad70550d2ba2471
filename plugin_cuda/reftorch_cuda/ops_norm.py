"""layer_norm forward on cuda (native_layer_norm -> output, mean, rstd; kernels/norm.cu) for
the four float dtypes, weight and bias optional.

Served when the normalized dims of the input coalesce to one strided dim (a contiguous tail,
or any layout whose normalized part is evenly strided), and weight/bias (when given) have the
input's dtype and coalesce likewise; a float16/bfloat16 input with float32 parameters (the
reference's mixed-type path, float32 statistics) declines.
"""
from __future__ import annotations

import ctypes
import math

from reftorch import _dtype as D
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_TYPES, Program, geometry_struct, launch_blocks, max_dims,
                          on_one_cuda_device, pointer)


def layer_norm_expression(dtype_name):
    return f"layer_norm_kernel<{FLOAT_TYPES[dtype_name]}>"


NORM = Program("norm.cu", tuple(layer_norm_expression(name) for name in FLOAT_TYPES))
PROGRAMS = (NORM,)


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


def register_kernels(registrar):
    registrar.kernel("native_layer_norm", "cuda", [D.by_name(n) for n in FLOAT_TYPES],
                     layer_norm_kernel)
