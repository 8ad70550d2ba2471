"""Sorting kernels over the C module `_sort` (src/sort.c), float32, float64, int64 and int32
on cpu:

    sort, argsort   along one dim, ascending or descending
    topk            the k largest or smallest along one dim (sorted or not)
    kthvalue        the k-th smallest along one dim (keepdim or not)
    searchsorted,   insertion points into sorted rows (the reference's binary search:
    bucketize       exact integers, so the reference's results)

Results are the reference's bit for bit, values and indices: the reference sorts stably
whatever `stable=` says (NaN above +inf, -0.0 tied with 0.0, ties in their original order
in both directions), and its topk / kthvalue are the first k / the k-th of that stable order
(sorted=False returns the sorted order too). src/sort.c explains how the C code gets the one
stable order with any algorithm (distinct (key, index) integers) and why results never
depend on the thread count.

Any input strides are read directly (transposed, sliced, expanded); the results are new
contiguous tensors, as the reference's are. Declined (the reference runs): other dtypes
(float16, bfloat16, bool, int8, int16, uint8, ...), 0-dim and empty inputs (fewer than
MIN_NUMEL elements), more than _sort.MAX_NDIM dims, and rows of 2**32 elements or more.
"""
from __future__ import annotations

import math

from reftorch import _dtype as D
from reftorch._shape import contiguous_strides
from reftorch._storage import CPUStorage
from reftorch._tensor import Tensor

from . import _sort
from .kernels import _dense_elements, _on_cpu_as

# Calls reading fewer elements than this go to the reference kernel. There is no crossover
# to speak of: the reference's stable sort costs several NumPy calls (flip, argsort, take)
# even for a handful of elements, more than a plugin call's Python side (checks, allocating
# two results). Measured on a 2-core x86-64 that other jobs kept busy (best of 400, plugin /
# reference us): float32 sort of 2 elements 16.6 / 25.2, 8: 13.9 / 24.0, 64: 15.2 / 18.6,
# 256: 19.4 / 31.6; argsort of 2: 8.2 / 13.2; topk(k=4) of 8: 14.2 / 42.4; kthvalue of 8:
# 14.3 / 30.3; int64 sort of 2: 10.8 / 16.9, of 256: 13.0 / 21.3. So only empty inputs
# (and 0-dim ones, below) decline.
MIN_NUMEL = 1

DTYPES = (D.float32, D.float64, D.int64, D.int32)


def register(registrar):
    """Register the sorting kernels with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("sort", "cpu", DTYPES, sort_kernel)
    registrar.kernel("argsort", "cpu", DTYPES, argsort_kernel)
    registrar.kernel("topk", "cpu", DTYPES, topk_kernel)
    registrar.kernel("kthvalue", "cpu", DTYPES, kthvalue_kernel)
    registrar.kernel("searchsorted", "cpu", DTYPES, search_kernel)
    registrar.kernel("bucketize", "cpu", DTYPES, search_kernel)


# --- kernels ----------------------------------------------------------------------------------

def search_kernel(out, inputs, dtypes, params):
    """searchsorted / bucketize: the insertion point of every value into the innermost dim of
    the boundaries (1-D: one row for all values; N-D: row by row). Declined: a `sorter`, a
    number as the values, empty boundaries, values or boundaries of another dtype than the
    one searched in (float16 and bfloat16 search in float32: declined too)."""
    boundaries, values, sorter = inputs
    dtype = dtypes[0]
    if sorter is not None or out is not None or not isinstance(values, Tensor) or \
            params["compute"] != dtype.numpy_dtype or \
            not (_on_cpu_as(boundaries, dtype) and _on_cpu_as(values, dtype)):
        return NotImplemented
    n, numel = boundaries._shape[-1], math.prod(values._shape)
    if n == 0 or numel == 0:
        return NotImplemented
    rows = math.prod(boundaries._shape[:-1])
    result = Tensor._empty(values._shape, D.int32 if params["out_int32"] else D.int64)
    _sort.search(_dense_elements(boundaries), rows, n, _dense_elements(values), numel // rows,
                 bool(params["right"]), result._storage.array)
    return result


def sort_kernel(out, inputs, dtypes, params):
    """(values, indices) of the stable sort along params['dim']."""
    x = _input(out, inputs, params["dim"])
    if x is None:
        return NotImplemented
    return _select(x, params["dim"], params["descending"], x._shape[params["dim"]])


def argsort_kernel(out, inputs, dtypes, params):
    """The indices of the stable sort along params['dim'] (no values written)."""
    x = _input(out, inputs, params["dim"])
    if x is None:
        return NotImplemented
    return _select(x, params["dim"], params["descending"], x._shape[params["dim"]],
                   values=False)[1]


def topk_kernel(out, inputs, dtypes, params):
    """The first k of the stable descending (largest) or ascending order along dim; with
    sorted=False the reference returns that same order."""
    x = _input(out, inputs, params["dim"])
    if x is None:
        return NotImplemented
    return _select(x, params["dim"], params["largest"], params["k"])


def kthvalue_kernel(out, inputs, dtypes, params):
    """The k-th (from 1) element of the stable ascending order along dim, and its index."""
    x = _input(out, inputs, params["dim"])
    if x is None:
        return NotImplemented
    return _select(x, params["dim"], False, params["k"], kth_only=True,
                   keepdim=params["keepdim"])


# --- shared helpers ---------------------------------------------------------------------------

def _input(out, inputs, dim):
    """The one input if C takes it: a cpu tensor of a handled dtype, 1 to MAX_NDIM dims, at
    least MIN_NUMEL elements, rows shorter than 2**32."""
    if out is not None or len(inputs) != 1:
        return None
    x = inputs[0]
    if not isinstance(x, Tensor) or type(x._storage) is not CPUStorage or \
            x._storage.dtype not in DTYPES:
        return None
    shape = x._shape
    if not 1 <= len(shape) <= _sort.MAX_NDIM or not isinstance(dim, int) or \
            not 0 <= dim < len(shape):
        return None
    if math.prod(shape) < MIN_NUMEL or shape[dim] >= 2**32:
        return None
    return x


def _select(x, dim, descending, k, kth_only=False, keepdim=True, values=True):
    """(values or None, int64 indices): the first k of each row's order along dim (only
    the k-th with kth_only; keepdim=False drops dim from the results)."""
    shape = tuple(x._shape)
    kept = 1 if kth_only else k
    full_shape = shape[:dim] + (kept,) + shape[dim + 1:]
    result_shape = full_shape if keepdim else shape[:dim] + shape[dim + 1:]
    # Results are contiguous in result_shape; without keepdim the C code sees them with
    # the dropped dim put back (size 1, any stride).
    strides = contiguous_strides(result_shape)
    if not keepdim:
        strides = strides[:dim] + (0,) + strides[dim:]
    value = Tensor._empty(result_shape, x._storage.dtype) if values else None
    index = Tensor._empty(result_shape, D.int64)
    _sort.select(x._storage.array, x._offset, shape, tuple(x._strides), dim, bool(descending),
                 k, kth_only,
                 None if value is None else value._storage.array, 0, strides,
                 index._storage.array, 0, strides)
    return value, index
