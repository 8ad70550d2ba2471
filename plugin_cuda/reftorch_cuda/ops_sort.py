"""sort, argsort, topk and kthvalue along any dim on cuda (kernels/sort.cu), for float32,
float64, float16, bfloat16, int64, int32, int16, int8, uint8 and bool (topk and kthvalue
never see bool: the reference refuses it first).

Contract: results equal the reference's bit for bit, values and int64 indices. The reference
sorts stably whatever `stable=` says (NaN above +inf, -0.0 tied with +0.0, ties in index
order in both directions); the kernel sorts each row by distinct (key, index) pairs, so it
produces that one order (see sort.cu). topk is the first k of that order (sorted=False gets the
sorted order too, as in the reference), kthvalue the k-th of the ascending order. Values are
copied from the input, so NaN payloads and the sign of zero are kept.

Rows of up to tile() (4096) elements are sorted by one block each in shared memory, in one
launch. Longer rows take 2 + ceil(log2(n / 4096)) launches: tiles sorted into runs in a
scratch buffer, the runs merged pairwise, the ranks asked for written; the scratch holds two
copies of every row's (key, int32 position) pairs (16 or 24 bytes an element).

topk and kthvalue select instead of sorting when `selects` says so (the size rule: rows
longer than a tile, and k <= n / 8 for topk; kthvalue always): select_rows_kernel finds the
key of rank k by a radix select (4 digit passes over the row, 8 for 64-bit keys) and writes
the elements before it plus the ties it needs, in index order (so exactly the first k of the
stable order, as a set); kthvalue's one element is the answer, topk's k are then sorted (by the
kernels above, on k elements) with their positions mapped back to the row's indices. The
result is the same as the full sort's, bit for bit. One block per row walks the whole row:
the (B, vocabulary) rows of a batch fill the GPU, but one very long row runs on one SM (still
without the sort's scratch and merge passes); a split of long rows over several blocks is not
done. Above n / 8 the sort of the k chosen costs nearly what the full sort does, so those
keep it; rows of a tile or less are sorted whole by one launch, which leaves little to save.
The rule is a judgement, not yet measured on a GPU.

Results are new contiguous tensors (as the cpu plugin's). Any input strides are read
directly. Declined (the reference runs, through the counted fallback): rows of 2**31
elements or more (int32 positions), other dtypes, inputs not on one cuda device, and
geometries of more than RT_MAX_DIMS dims after coalescing. Empty results launch nothing.
"""
from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass

from reftorch import _dtype as D
from reftorch._shape import contiguous_strides
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_TYPES, INT_TYPES, MAX_GRID, Program, geometry_struct,
                          max_dims, on_one_cuda_device, pointer, source_constant)

# Storage type per dtype. bool sorts as its bytes (0 < 1), so it shares uint8's kernel.
SORT_TYPES = {**FLOAT_TYPES, **{name: INT_TYPES[name] for name in
                                ("int64", "int32", "int16", "int8", "uint8")},
              "bool": INT_TYPES["uint8"]}
WIDE_KEYS = ("double", "long long")         # sorted by 64-bit keys, the rest by 32-bit ones
SORT_DTYPES = tuple(D.by_name(name) for name in SORT_TYPES)
MAX_THREADS = 1024
MIN_THREADS = 32
MAX_ROW = 2**31 - 1                         # positions are int32 in the long-row passes


def sort_expression(dtype_name, kernel="sort_rows_kernel"):
    """kernel: sort_rows_kernel, sort_tiles_kernel, write_ranks_kernel or
    select_rows_kernel."""
    return f"{kernel}<{SORT_TYPES[dtype_name]}>"


def key_type(dtype_name):
    return "unsigned long long" if SORT_TYPES[dtype_name] in WIDE_KEYS else "unsigned int"


def merge_expression(dtype_name):
    return f"merge_runs_kernel<{key_type(dtype_name)}>"


SORT = Program("sort.cu", tuple(dict.fromkeys(
    [sort_expression(name, kernel) for kernel in ("sort_rows_kernel", "sort_tiles_kernel",
                                                  "write_ranks_kernel", "select_rows_kernel")
     for name in SORT_TYPES]
    + [merge_expression(name) for name in SORT_TYPES])))
PROGRAMS = (SORT,)


@functools.lru_cache(maxsize=None)
def tile():
    """RT_SORT_TILE: the longest row one block sorts in shared memory (and the tile of the
    long-row passes)."""
    return source_constant("RT_SORT_TILE", "sort.cu")


def launch_shape(n, dtype_name):
    """(padded row, threads per block, dynamic shared bytes) for rows of n elements: the
    network sorts the next power of two; each thread takes one pair of a step when it can."""
    padded = 1 << max(n - 1, 0).bit_length()
    threads = min(MAX_THREADS, max(MIN_THREADS, padded // 2))
    return padded, threads, padded * (key_bytes(dtype_name) + 2)


def key_bytes(dtype_name):
    return 8 if SORT_TYPES[dtype_name] in WIDE_KEYS else 4


@functools.lru_cache(maxsize=None)
def select_threads():
    """RT_SELECT_THREADS: select_rows_kernel's block size."""
    return source_constant("RT_SELECT_THREADS", "sort.cu")


SELECT_FRACTION = 8   # topk selects when k <= n / SELECT_FRACTION (see selects)


def selects(n, first, count):
    """Whether ranks first..first+count-1 of rows of n are found by selection (the size rule):
    rows longer than one tile (shorter ones are sorted whole in shared memory by one launch,
    which leaves little to save), and at most n / SELECT_FRACTION elements to sort afterwards
    (kthvalue's one element: none), for topk (first == 0) and kthvalue (count == 1), the two
    shapes of request select_rows_kernel serves."""
    return n > tile() and (first == 0 or count == 1) and count * SELECT_FRACTION <= n


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
    if shape[dim] > MAX_ROW:
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
    rows = Rows(geometry_struct(rows_shape, rows_strides), math.prod(rows_shape), shape[dim],
                strides[dim], out_strides[dim])
    if selects(rows.n, first, count):
        # the chosen elements, laid out as the results, as the input of their sort
        sorted_rows = count > 1 and Rows(geometry_struct(rows_shape, [rows_strides[0]] * 3),
                                         rows.count, count, rows.out_step, rows.out_step)
        _select_rows(x, rows, sorted_rows, descending, first, count, value, index)
    else:
        _sort_rows(x, rows, descending, first, count, value, index)
    return True


def _sort_rows(x, rows, descending, first, count, value, index, index_map=None):
    """Ranks first..first+count-1 of each row's stable order, by the full sort (index_map:
    see _select_rows)."""
    if rows.n <= tile():
        _sort_short_rows(x, rows, descending, first, count, value, index, index_map)
    else:
        _sort_long_rows(x, rows, descending, first, count, value, index, index_map)


@dataclass(frozen=True)
class Rows:
    """The rows along the sorted dim: geometry over the other dims (operands: values out,
    indices out, input), how many, their length and the steps along the dim."""
    geometry: ctypes.Structure
    count: int
    n: int
    in_step: int
    out_step: int


def _select_rows(x, rows, sorted_rows, descending, first, count, value, index):
    """select_rows_kernel writes the elements of ranks first..first+count-1 in index order:
    the answer when count is 1, else into scratch results of the results' layout
    (`sorted_rows`: the written rows as a sort's input), which are then sorted, their positions
    mapped back to the row's indices through the written ones."""
    chosen_value, chosen_index = value, index
    if count > 1:
        chosen_value = Tensor._empty(value._shape, x.dtype, x.device)
        chosen_index = Tensor._empty(value._shape, D.int64, x.device)
    args = (rows.geometry, ctypes.c_int64(rows.n), ctypes.c_int64(first),
            ctypes.c_int64(count), ctypes.c_int32(int(descending)),
            ctypes.c_int64(rows.out_step), ctypes.c_int64(rows.out_step),
            ctypes.c_int64(rows.in_step), pointer(chosen_value), pointer(chosen_index),
            pointer(x))
    storage = x._storage
    storage._driver.launch_grid(storage._index, SORT,
                                sort_expression(x.dtype.name, "select_rows_kernel"),
                                (min(rows.count, MAX_GRID), 1, 1), (select_threads(), 1, 1), 0,
                                args)
    if count > 1:
        _sort_rows(chosen_value, sorted_rows, descending, 0, count, value, index, chosen_index)


def _sort_short_rows(x, rows, descending, first, count, value, index, index_map=None):
    """One launch, one block per row (sort_rows_kernel)."""
    padded, threads, shared = launch_shape(rows.n, x.dtype.name)
    args = (rows.geometry, ctypes.c_int64(rows.n), ctypes.c_int64(first),
            ctypes.c_int64(count), ctypes.c_int32(padded), ctypes.c_int32(int(descending)),
            ctypes.c_int64(rows.out_step), ctypes.c_int64(rows.out_step),
            ctypes.c_int64(rows.in_step), _maybe_pointer(value), pointer(index), pointer(x),
            _maybe_pointer(index_map))
    storage = x._storage
    storage._driver.launch_grid(storage._index, SORT, sort_expression(x.dtype.name),
                                (min(rows.count, MAX_GRID), 1, 1), (threads, 1, 1), shared,
                                args)


def _sort_long_rows(x, rows, descending, first, count, value, index, index_map=None):
    """Tiles sorted into runs, runs merged pairwise until each row is one, ranks written."""
    name = x.dtype.name
    driver, device = x._storage._driver, x._storage._index
    total = rows.count * rows.n
    key_dtype = D.int64 if key_bytes(name) == 8 else D.int32     # unsigned bits, by width
    keys = [Tensor._empty((total,), key_dtype, x.device) for _ in range(2)]
    positions = [Tensor._empty((total,), D.int32, x.device) for _ in range(2)]
    padded, threads, shared = launch_shape(tile(), name)
    tiles = rows.count * -(-rows.n // tile())
    driver.launch_grid(device, SORT, sort_expression(name, "sort_tiles_kernel"),
                       (min(tiles, MAX_GRID), 1, 1), (threads, 1, 1), shared,
                       (rows.geometry, ctypes.c_int64(rows.n), ctypes.c_int32(int(descending)),
                        ctypes.c_int64(rows.in_step), pointer(x), pointer(keys[0]),
                        pointer(positions[0])))
    current, width = 0, tile()
    while width < rows.n:
        driver.launch(device, SORT, merge_expression(name), total,
                      (ctypes.c_int64(total), ctypes.c_int64(rows.n), ctypes.c_int64(width),
                       pointer(keys[current]), pointer(positions[current]),
                       pointer(keys[1 - current]), pointer(positions[1 - current])))
        current, width = 1 - current, 2 * width
    driver.launch(device, SORT, sort_expression(name, "write_ranks_kernel"), rows.count * count,
                  (rows.geometry, ctypes.c_int64(rows.n), ctypes.c_int64(first),
                   ctypes.c_int64(count), ctypes.c_int64(rows.out_step),
                   ctypes.c_int64(rows.out_step), ctypes.c_int64(rows.in_step),
                   pointer(positions[current]), _maybe_pointer(value), pointer(index),
                   pointer(x), _maybe_pointer(index_map)))


def _maybe_pointer(t):
    """A tensor's device address, or a null pointer for no tensor (argsort's values, a sort's
    index map)."""
    return ctypes.c_uint64(0) if t is None else pointer(t)


def register_kernels(registrar):
    registrar.kernel("sort", "cuda", SORT_DTYPES, sort_kernel)
    registrar.kernel("argsort", "cuda", SORT_DTYPES, argsort_kernel)
    ordered = tuple(d for d in SORT_DTYPES if d is not D.bool)
    registrar.kernel("topk", "cuda", ordered, topk_kernel)
    registrar.kernel("kthvalue", "cuda", ordered, kthvalue_kernel)
