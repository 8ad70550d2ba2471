"""sort, argsort, topk and kthvalue along any dim on cuda (kernels/sort.cu), for float32,
float64, float16, bfloat16, int64, int32, int16, int8, uint8 and bool (topk and kthvalue
never see bool: the reference refuses it first).

Contract: results equal the reference's bit for bit, values and int64 indices. The reference
sorts stably whatever `stable=` says (NaN above +inf, -0.0 tied with +0.0, ties in index
order in both directions); the kernel sorts each row by distinct (key, index) pairs, so it
produces that one order (see sort.cu). topk is the first k of that order (sorted=False gets the
sorted order too, as in the reference), kthvalue the k-th of the ascending order. Values are
copied from the input, so NaN payloads and the sign of zero are kept.

Results are new contiguous tensors (as the cpu plugin's). Any input strides are read
directly. Declined (the reference runs, through the counted fallback): rows longer than
MAX_ROW elements (one block sorts a row in shared memory; there is no multi-pass merge yet),
other dtypes, inputs not on one cuda device, and geometries of more than RT_MAX_DIMS dims
after coalescing. Empty results launch nothing.
"""
from __future__ import annotations

import ctypes
import functools
import math
import re

from reftorch import _dtype as D
from reftorch._shape import contiguous_strides
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_TYPES, INT_TYPES, MAX_GRID, Program, _read_source,
                          geometry_struct, max_dims, on_one_cuda_device, pointer)

# Storage type per dtype. bool sorts as its bytes (0 < 1), so it shares uint8's kernel.
SORT_TYPES = {**FLOAT_TYPES, **{name: INT_TYPES[name] for name in
                                ("int64", "int32", "int16", "int8", "uint8")},
              "bool": INT_TYPES["uint8"]}
WIDE_KEYS = ("double", "long long")         # sorted by 64-bit keys, the rest by 32-bit ones
SORT_DTYPES = tuple(D.by_name(name) for name in SORT_TYPES)
MAX_THREADS = 1024
MIN_THREADS = 32


def sort_expression(dtype_name):
    return f"sort_rows_kernel<{SORT_TYPES[dtype_name]}>"


SORT = Program("sort.cu", tuple(dict.fromkeys(sort_expression(n) for n in SORT_TYPES)))
PROGRAMS = (SORT,)


@functools.lru_cache(maxsize=None)
def max_row():
    """RT_SORT_MAX_ROW, read from the kernel so the two sides cannot disagree."""
    return int(re.search(r"#define RT_SORT_MAX_ROW (\d+)", _read_source("sort.cu")).group(1))


def launch_shape(n, dtype_name):
    """(padded row, threads per block, dynamic shared bytes) for rows of n elements: the
    network sorts the next power of two; each thread takes one pair of a step when it can."""
    padded = 1 << max(n - 1, 0).bit_length()
    threads = min(MAX_THREADS, max(MIN_THREADS, padded // 2))
    key_bytes = 8 if SORT_TYPES[dtype_name] in WIDE_KEYS else 4
    return padded, threads, padded * (key_bytes + 2)


# --- kernels ----------------------------------------------------------------------------------

def sort_kernel(out, inputs, dtypes, params):
    """(values, indices) of the stable sort along params['dim']."""
    x = _input(out, inputs)
    if x is None:
        return NotImplemented
    n = _length(x, params["dim"])
    return _select(x, params["dim"], params["descending"], 0, n)


def argsort_kernel(out, inputs, dtypes, params):
    """The indices of the stable sort (the kernel writes no values)."""
    x = _input(out, inputs)
    if x is None:
        return NotImplemented
    n = _length(x, params["dim"])
    result = _select(x, params["dim"], params["descending"], 0, n, values=False)
    return result if result is NotImplemented else result[1]


def topk_kernel(out, inputs, dtypes, params):
    """The first k of the stable descending (largest) or ascending order. A 0-dim input is its
    own top element (the reference returns it for k = 0 too)."""
    x = _input(out, inputs)
    if x is None:
        return NotImplemented
    k = params["k"] if x.ndim else 1
    return _select(x, params["dim"], params["largest"], 0, k)


def kthvalue_kernel(out, inputs, dtypes, params):
    """The k-th (from 1) of the stable ascending order, keepdim or not."""
    x = _input(out, inputs)
    if x is None:
        return NotImplemented
    k = params["k"] if x.ndim else 1
    return _select(x, params["dim"], False, k - 1, 1, keepdim=params["keepdim"] or not x.ndim)


# --- shared helpers ---------------------------------------------------------------------------

def _input(out, inputs):
    if out is not None or len(inputs) != 1 or not isinstance(inputs[0], Tensor):
        return None
    x = inputs[0]
    if x.dtype.name not in SORT_TYPES or not on_one_cuda_device((x,)):
        return None
    return x


def _length(x, dim):
    return x._shape[dim] if x.ndim else 1


def _select(x, dim, descending, first, count, keepdim=True, values=True):
    """(values or None, indices): ranks first..first+count-1 of each row's stable order along
    dim, in new contiguous tensors (keepdim=False drops dim, for kthvalue)."""
    if x.ndim:
        shape, strides = tuple(x._shape), tuple(x._strides)
    else:                                   # one row of one element
        shape, strides, dim = (1,), (0,), 0
    if shape[dim] > max_row():
        return NotImplemented
    kept = shape[:dim] + (count,) + shape[dim + 1:]
    if not x.ndim:
        result_shape = ()
    elif keepdim:
        result_shape = kept
    else:
        result_shape = shape[:dim] + shape[dim + 1:]
    value = Tensor._empty(result_shape, x.dtype, x.device) if values else None
    index = Tensor._empty(result_shape, D.int64, x.device)
    # The results' strides as seen along `kept` (a dropped dim put back with size 1).
    out_strides = contiguous_strides(kept)
    if math.prod(kept) and not _launch(x, shape, strides, dim, descending, first, count,
                                       out_strides, value, index):
        return NotImplemented
    return value, index


def _launch(x, shape, strides, dim, descending, first, count, out_strides, value, index):
    """Launch the row sort; False when the rows do not fit the kernel geometry."""
    other = [d for d in range(len(shape)) if d != dim]
    rows_shape, rows_strides = coalesce([shape[d] for d in other],
                                        [[out_strides[d] for d in other]] * 2
                                        + [[strides[d] for d in other]])
    if len(rows_shape) > max_dims():
        return False
    n = shape[dim]
    padded, threads, shared = launch_shape(n, x.dtype.name)
    args = (geometry_struct(rows_shape, rows_strides), ctypes.c_int64(n),
            ctypes.c_int64(first), ctypes.c_int64(count), ctypes.c_int32(padded),
            ctypes.c_int32(1 if descending else 0),
            ctypes.c_int64(out_strides[dim]), ctypes.c_int64(out_strides[dim]),
            ctypes.c_int64(strides[dim]),
            ctypes.c_uint64(0) if value is None else pointer(value), pointer(index),
            pointer(x))
    storage = x._storage
    rows = math.prod(rows_shape)
    storage._driver.launch_grid(storage._index, SORT, sort_expression(x.dtype.name),
                                (min(rows, MAX_GRID), 1, 1), (threads, 1, 1), shared, args)
    return True


def register_kernels(registrar):
    registrar.kernel("sort", "cuda", SORT_DTYPES, sort_kernel)
    registrar.kernel("argsort", "cuda", SORT_DTYPES, argsort_kernel)
    ordered = tuple(d for d in SORT_DTYPES if d is not D.bool)
    registrar.kernel("topk", "cuda", ordered, topk_kernel)
    registrar.kernel("kthvalue", "cuda", ordered, kthvalue_kernel)
