"""softmax and log_softmax along any dim, and their backward ops (_softmax_backward_data,
_log_softmax_backward_data), on cuda for the four float dtypes (kernels/softmax.cu).

One block per row; row maxima and sums in the fixed block order, so results differ from the
reference's NumPy sums by rounding only. The forward kernels keep a row of up to
ROW_CACHE_BYTES (in the computation type) in shared memory, so it is read and exponentiated
once. The backward ops decline an `input_dtype` other than the gradient's (the reference then
decides).
"""
from __future__ import annotations

import ctypes

from reftorch._ops.copy import empty_like_layout
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_DTYPES, FLOAT_TYPES, Program, all_of_dtype, geometry_struct,
                          launch_blocks, max_dims, on_one_cuda_device, pointer)

FORWARD = {"softmax": False, "log_softmax": True}             # op -> Log
BACKWARD = {"_softmax_backward_data": False, "_log_softmax_backward_data": True}
# The most dynamic shared memory a launch may take without opting in (cuFuncSetAttribute).
ROW_CACHE_BYTES = 48 * 1024


def forward_expression(log, dtype_name):
    return f"softmax_kernel<{FLOAT_TYPES[dtype_name]}, {'true' if log else 'false'}>"


def backward_expression(log, dtype_name):
    return f"softmax_backward_kernel<{FLOAT_TYPES[dtype_name]}, {'true' if log else 'false'}>"


SOFTMAX = Program("softmax.cu", tuple(
    [forward_expression(log, name) for log in (False, True) for name in FLOAT_TYPES]
    + [backward_expression(log, name) for log in (False, True) for name in FLOAT_TYPES]))
PROGRAMS = (SOFTMAX,)


def _rows(tensors, dim):
    """(row geometry over every dim but `dim`, row length, each tensor's step along `dim`),
    or None when the geometry has too many dims. A 0-dim tensor is one row of one element."""
    if tensors[0].ndim == 0:
        return geometry_struct([1], [[0]] * len(tensors)), 1, [0] * len(tensors)
    dim %= tensors[0].ndim
    other = [d for d in range(tensors[0].ndim) if d != dim]
    shape, strides = coalesce([tensors[0]._shape[d] for d in other],
                              [[t._strides[d] for d in other] for t in tensors])
    if len(shape) > max_dims():
        return None
    return geometry_struct(shape, strides), tensors[0]._shape[dim], [t._strides[dim]
                                                                      for t in tensors]


def _launch(expression, result, inputs, dim, cache_row=False):
    """Run a row kernel writing `result` from `inputs` (all of one shape); NotImplemented when
    the rows do not fit the geometry. `cache_row`: give the block a row of the computation
    type in shared memory when it fits ROW_CACHE_BYTES."""
    rows = _rows((result, *inputs), dim)
    if rows is None:
        return NotImplemented
    geometry, n, steps = rows
    if result.numel():
        args = (geometry, ctypes.c_int64(n), *(ctypes.c_int64(s) for s in steps),
                pointer(result), *(pointer(t) for t in inputs))
        row_bytes = n * (8 if result.dtype.name == "float64" else 4)
        shared = row_bytes if cache_row and row_bytes <= ROW_CACHE_BYTES else 0
        launch_blocks(SOFTMAX, expression, result.numel() // n, result, args, shared)
    return result


def _served(out, inputs, count):
    if out is not None or len(inputs) != count:
        return None
    dtype = inputs[0].dtype
    if dtype.name not in FLOAT_TYPES or not all_of_dtype(inputs, dtype):
        return None
    if any(t._shape != inputs[0]._shape for t in inputs) or not on_one_cuda_device(inputs):
        return None
    return dtype


def forward_kernel(op_name):
    log = FORWARD[op_name]

    def kernel(out, inputs, dtypes, params):
        dtype = _served(out, inputs, 1)
        if dtype is None:
            return NotImplemented
        x = inputs[0]
        return _launch(forward_expression(log, dtype.name), empty_like_layout(x), (x,),
                       params["dim"], cache_row=True)
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def backward_kernel(op_name):
    log = BACKWARD[op_name]

    def kernel(out, inputs, dtypes, params):
        dtype = _served(out, inputs, 2)
        if dtype is None or params.get("input_dtype", dtype) not in (None, dtype):
            return NotImplemented
        grad, y = inputs
        return _launch(backward_expression(log, dtype.name), empty_like_layout(y), (grad, y),
                       params["dim"])
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def register_kernels(registrar):
    for op_name in FORWARD:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, forward_kernel(op_name))
    for op_name in BACKWARD:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, backward_kernel(op_name))
