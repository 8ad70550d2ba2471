"""The rest of the scatter family on cuda (kernels/scatter.cu, built on index.cu):

  scatter_value         scatter(dim, index, value=number): any dtype of 1 to 16 bytes
  scatter_reduce_two_   scatter(..., reduce="add" | "multiply") with a tensor source or a
                        number: float32, float64, float16, bfloat16, int32, int64
  scatter_reduce        scatter_reduce(..., reduce="sum" | "prod" | "mean" | "amax" | "amin",
                        include_self=True | False): the same six dtypes

int64 indices. A number is converted to the tensor's dtype on the host exactly as the
reference converts it (NumPy's astype); values an integer dtype cannot hold (NaN, infinities,
out of range) and complex numbers decline.

Numerical contract: one thread per column walks the indexed dim in order (index.cu's scatter
order), so each output element receives its contributions in the order of the reference's
np.ufunc.at: assignments (the last repeated index wins), sums and products equal the
reference bit for bit, integers wrapping as NumPy's; the mean divides the same sum by the same
count (floats: correctly rounded as the reference's float64 division cast back; integers:
floor division). amax/amin equal the reference's values, NaN where a NaN took part (the
reference's np.nan), except that a tie between -0.0 and +0.0 keeps the element's earlier value
(NumPy's fmax/fmin.at does not treat that tie alike across dtypes).

Bounds errors are device-side, as for scatter and scatter_add (see ops_index): a bad index is
skipped, the first by position is recorded, and the next synchronisation raises the
reference's RuntimeError "index 7 is out of bounds for dimension 0 with size 5".
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from reftorch import _dtype as D
from reftorch._tensor import Tensor
from reftorch.autograd.grad_mode import no_grad
from reftorch_plugins.geometry import coalesce

from . import ops_index
from .kernel_base import (WORDS, Program, geometry_struct, max_dims, on_one_cuda_device,
                          pointer)
from .ops_index import ADDED_TYPES, _row_major, _without
from .ops_join import WORD_CTYPES

REDUCE_TWO = {"add": "AddOp", "multiply": "MulOp"}
REDUCTIONS = {"sum": "ReduceSum", "prod": "ReduceProd", "mean": "ReduceMean",
              "amax": "ReduceAmax", "amin": "ReduceAmin"}
INDEX_TYPE = ops_index.INDEX_TYPES["int64"]


def scalar_expression(dtype, op):
    """scatter_scalar_kernel: assignment moves bits (by width); add/multiply compute."""
    if op == "AssignOp":
        return f"scatter_scalar_kernel<{WORDS[dtype.itemsize]}, {INDEX_TYPE}, AssignOp>"
    return f"scatter_scalar_kernel<{ADDED_TYPES[dtype.name]}, {INDEX_TYPE}, {op}>"


def tensor_expression(dtype, op):
    return f"scatter_kernel<{ADDED_TYPES[dtype.name]}, {INDEX_TYPE}, {op}>"


def reduce_expression(dtype, reduction):
    return f"scatter_reduce_kernel<{ADDED_TYPES[dtype.name]}, {INDEX_TYPE}, {reduction}>"


_ADDED = [D.by_name(name) for name in ADDED_TYPES]
SCATTER = Program("scatter.cu", tuple(
    [f"scatter_scalar_kernel<{WORDS[width]}, {INDEX_TYPE}, AssignOp>" for width in WORDS]
    + [scalar_expression(d, op) for d in _ADDED for op in REDUCE_TWO.values()]
    + [tensor_expression(d, "MulOp") for d in _ADDED]
    + [reduce_expression(d, r) for d in _ADDED for r in REDUCTIONS.values()]),
    includes=("index.cu",))
PROGRAMS = (SCATTER,)


# --- checks and the launch --------------------------------------------------------------------

def _index_ok(index, a):
    return isinstance(index, Tensor) and index.dtype is D.int64 and index.ndim == a.ndim and \
        a.ndim > 0 and on_one_cuda_device((a, index))


def _scalar(value, dtype):
    """A Python number as one element of `dtype`, converted as the reference converts it, in
    a ctypes word of the element's width; None to decline."""
    if isinstance(value, Tensor) or isinstance(value, complex) and not dtype.is_complex:
        return None
    if not isinstance(value, (bool, int, float, complex)):
        return None
    if not dtype.is_floating_point and not dtype.is_complex:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if dtype is not D.bool:
            info = np.iinfo(dtype.numpy_dtype)
            if not info.min <= value <= info.max:
                return None
    with np.errstate(all="ignore"):
        element = np.asarray(value).astype(dtype.numpy_dtype).reshape(1)
    return WORD_CTYPES[dtype.itemsize].from_buffer_copy(element.tobytes())


def _walk(a, index, dim, result, src=None):
    """(geometry of the columns, n, position step, src/index steps) for index's shape: the
    walk of index.cu's scatter_kernel (operands out, src, index, error position), or None
    when it has too many dims."""
    i_shape = list(index._shape)
    positions = _row_major(i_shape)
    src_strides = list(src._strides) if src is not None else [0] * a.ndim
    walk, strides = coalesce(_without(i_shape, dim), [
        _without(result._strides, dim), _without(src_strides, dim),
        _without(index._strides, dim), _without(positions, dim)])
    if len(walk) > max_dims():
        return None
    return (geometry_struct(walk, strides), i_shape[dim], src_strides[dim],
            index._strides[dim], positions[dim], math.prod(walk))


def _copy_of(a):
    result = Tensor._empty(a._shape, a.dtype, a.device)
    with no_grad():  # kernels never record autograd history
        result.copy_(a)
    return result


def _launch(expression, columns, t, args, dim, size):
    storage = t._storage
    check = ops_index.errors_of(storage._driver).arm(storage._index, "scatter", size, dim)
    storage._driver.launch(storage._index, SCATTER, expression, columns, (*args, check))


def _empty_walk(index):
    return index.numel() == 0


# --- the kernels ------------------------------------------------------------------------------

def scatter_value_kernel(out, inputs, dtypes, params):
    """A copy of `a` with the number `value` written at p with p[dim] replaced by index[p]."""
    a, index, value = inputs
    if out is not None or params.get("reduce") is not None or not _index_ok(index, a):
        return NotImplemented
    return _scalar_scatter(a, index, value, params["dim"], "AssignOp")


def scatter_reduce_two_kernel(out, inputs, dtypes, params):
    """scatter with reduce="add" / "multiply": src (a tensor of a's rank, or a number) added
    to / multiplied into a copy of `a` at the indexed positions, in the reference's order."""
    a, index, src = inputs
    op = REDUCE_TWO.get(params.get("reduce"))
    if out is not None or op is None or a.dtype.name not in ADDED_TYPES or \
            not _index_ok(index, a):
        return NotImplemented
    dim = params["dim"]
    if not isinstance(src, Tensor):
        return _scalar_scatter(a, index, src, dim, op)
    if src.dtype is not a.dtype or src.ndim != a.ndim or not on_one_cuda_device((a, src)):
        return NotImplemented
    if op == "AddOp":  # index.cu's scatter_add instantiation is this very kernel
        return ops_index.scatter_kernel("scatter_add")(None, (a, index, src), dtypes,
                                                       {"dim": dim})
    result = _copy_of(a)
    if _empty_walk(index):
        return result
    walk = _walk(a, index, dim, result, src)
    if walk is None:
        return NotImplemented
    geometry, n, src_step, index_step, position_step, columns = walk
    args = (geometry, ctypes.c_int64(n), ctypes.c_int64(result._strides[dim]),
            ctypes.c_int64(src_step), ctypes.c_int64(index_step),
            ctypes.c_int64(position_step), pointer(result), pointer(src), pointer(index),
            ctypes.c_double(1.0))
    _launch(tensor_expression(a.dtype, op), columns, result, args, dim, a._shape[dim])
    return result


def _scalar_scatter(a, index, value, dim, op):
    if op != "AssignOp" and a.dtype.name not in ADDED_TYPES:
        return NotImplemented
    if op == "AssignOp" and a.dtype.itemsize not in WORDS:
        return NotImplemented
    bits = _scalar(value, a.dtype)
    if bits is None:
        return NotImplemented
    result = _copy_of(a)
    if _empty_walk(index):
        return result
    walk = _walk(a, index, dim, result)
    if walk is None:
        return NotImplemented
    geometry, n, _src_step, index_step, position_step, columns = walk
    args = (geometry, ctypes.c_int64(n), ctypes.c_int64(result._strides[dim]),
            ctypes.c_int64(index_step), ctypes.c_int64(position_step), pointer(result), bits,
            pointer(index))
    _launch(scalar_expression(a.dtype, op), columns, result, args, dim, a._shape[dim])
    return result


def scatter_reduce_kernel(out, inputs, dtypes, params):
    """scatter_reduce: src reduced into a copy of `a` at the indexed positions (sum, prod,
    mean, amax, amin), a's own value taking part when include_self."""
    a, index, src = inputs
    reduction = REDUCTIONS.get(params.get("reduce"))
    if out is not None or reduction is None or a.dtype.name not in ADDED_TYPES or \
            not _index_ok(index, a) or not isinstance(src, Tensor) or \
            src.dtype is not a.dtype or src.ndim != a.ndim or not on_one_cuda_device((a, src)):
        return NotImplemented
    dim = params["dim"]
    result = _copy_of(a)
    if _empty_walk(index):
        return result
    walk = _walk(a, index, dim, result, src)
    if walk is None:
        return NotImplemented
    geometry, n, src_step, index_step, position_step, columns = walk
    counts = None
    if reduction == "ReduceMean":   # hits per element, in result's (contiguous) layout
        counts = Tensor._empty(a._shape, D.int64, a.device)
        storage = counts._storage
        storage._driver.zero(storage._index, counts.data_ptr(), 8 * counts.numel())
    args = (geometry, ctypes.c_int64(n), ctypes.c_int64(result._strides[dim]),
            ctypes.c_int64(src_step), ctypes.c_int64(index_step),
            ctypes.c_int64(position_step), pointer(result), pointer(src), pointer(index),
            pointer(counts) if counts is not None else ctypes.c_uint64(0),
            ctypes.c_int32(1 if params.get("include_self", True) else 0))
    _launch(reduce_expression(a.dtype, reduction), columns, result, args, dim, a._shape[dim])
    return result


scatter_value_kernel.__name__ = "cuda_scatter_value"
scatter_reduce_two_kernel.__name__ = "cuda_scatter_reduce_two_"
scatter_reduce_kernel.__name__ = "cuda_scatter_reduce"


def register_kernels(registrar):
    by_width = [d for d in D.ALL_DTYPES if d.itemsize in WORDS]
    registrar.kernel("scatter_value", "cuda", by_width, scatter_value_kernel)
    registrar.kernel("scatter_reduce_two_", "cuda", _ADDED, scatter_reduce_two_kernel)
    registrar.kernel("scatter_reduce", "cuda", _ADDED, scatter_reduce_kernel)
