"""The indexing kernels: index_select, embedding, gather, take (one C gather loop) and
scatter, scatter_add, index_add, put (one C scatter loop), for float32, float64, int64 and
int32 values with int64 (and, where the op accepts them, int32) indices.

Each kernel here checks what the C code must not be handed wrongly, builds the walk (one
shape and per-operand strides, see src/index.c) and declines (returns NotImplemented, so the
reference kernel runs) what it does not handle: other dtypes, 0-dim or mismatched-rank
operands the reference special-cases, more dims than the C walk takes, and small calls.

The C loop checks every index before using it, as it goes (the result may be partly filled
when it stops; it is a fresh tensor, dropped). A bad index raises the op's own error, the
reference's type and message: IndexError "index out of range in self" (index_select,
embedding), IndexError "out of range: tried to access index ..." (take, put), RuntimeError
"index 7 is out of bounds for dimension 0 with size 5" (gather, scatter, scatter_add,
index_add). take and put wrap negative indices (counted from the end of the flat tensor) in
the C loop, and their public functions leave the values to the kernel that runs; the other
public functions check indices before dispatching too, and the C check is what keeps a
direct kernel call from ever touching memory outside a tensor.

Scatter results never depend on the thread count and equal the reference's bit for bit: every
output element receives its contributions in row-major order of the walk, which is the order
`np.add.at` (and NumPy's fancy assignment, last write wins) uses; src/index.c explains the
collision-free thread split that keeps that order.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from reftorch import _dtype as D
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold
from reftorch_plugins.geometry import broadcast_strides, coalesce

from . import _C, _index
from .kernels import _can_write_in_place, _on_cpu_as, copy_kernel

# Calls walking fewer positions than this go to the reference kernel. A plugin call costs
# about 6-10 us of Python (checks, geometry, allocating the result) before the C loop runs;
# the reference's NumPy fancy indexing for small inputs costs about as much. Measured on a
# 2-core x86-64, best of many runs (see bench/bench_plugin_indexing.py for the large sizes):
# float32 gather (1-D) at 1,024 positions plugin 9.6 us vs reference 12 us, at 256
# 8.7 vs 10; index_select rows and scatter_add cross over earlier still. 512 keeps the
# plugin off the calls where both are within noise of each other.
MIN_POSITIONS = 512

VALUE_DTYPES = (D.float32, D.float64, D.int64, D.int32)
INDEX_DTYPES = (D.int64, D.int32)


def register(registrar):
    """Register every indexing kernel with reftorch (called by reftorch_cpu.register)."""
    # take is served since the gather loop went vector (AVX-512 index runs): 2-core x86-64,
    # float32 op times, plugin vs reference (np.take): 512 of 1,000 elements 9.8 vs 11.8 us,
    # 65,536 of 100,000 85 vs 243 us, 262,144 of 1M 0.54 vs 1.8 ms. index_select, float32
    # rows, 2 threads, plugin vs reference: 1,024 x 16 of 1,000 13 vs 19 us, 4,096 x 16 36 vs
    # 56 us, 1,024 x 64 32 vs 44 us, 65,536 x 1 74 vs 269 us, 1M x 16 13.8 vs 30.7 ms (it
    # lost mid-sized calls while OpenMP threads slept between kernels: see
    # reftorch_cpu.SPIN_COUNT). put: the C loop wraps negative indices and checks them as it
    # goes, where the reference makes NumPy passes for both; op times, float32, one thread,
    # plugin vs reference: 512 writes into 1,000 elements 9.0 vs 17.6 us, 65,536 into
    # 100,000 385 vs 537 us, 1M into 1M 6.8 vs 9.2 ms (the random writes themselves cost
    # about as much in either).
    registrar.kernel("index_select", "cpu", VALUE_DTYPES, index_select_kernel)
    registrar.kernel("take", "cpu", VALUE_DTYPES, take_kernel)
    registrar.kernel("embedding", "cpu", (D.float32, D.float64), embedding_kernel)
    registrar.kernel("gather", "cpu", VALUE_DTYPES, gather_kernel)
    for name in ("scatter", "scatter_value", "scatter_reduce_two_", "scatter_add"):
        registrar.kernel(name, "cpu", VALUE_DTYPES, scatter_kernel)
    registrar.kernel("index_add", "cpu", VALUE_DTYPES, index_add_kernel)
    registrar.kernel("index_copy", "cpu", VALUE_DTYPES, _slice_write_kernel(fill=False))
    registrar.kernel("index_fill", "cpu", VALUE_DTYPES, _slice_write_kernel(fill=True))
    registrar.kernel("embedding_dense_backward", "cpu", (D.float32, D.float64),
                     embedding_dense_backward_kernel)
    registrar.kernel("put", "cpu", VALUE_DTYPES, put_kernel)
    registrar.kernel("index_put", "cpu", VALUE_DTYPES, index_put_kernel)


# --- errors: the reference's type and message for each op ------------------------------------

def _out_of_range_in_self(value, size, dim):
    return IndexError("index out of range in self")


def _out_of_bounds_for_dim(value, size, dim):
    return RuntimeError(f"index {value} is out of bounds for dimension {dim} with size {size}")


def _take_out_of_range(value, size, dim):
    return IndexError(f"out of range: tried to access index {value} on a tensor of {size} "
                      f"elements.")


# --- the gather family ------------------------------------------------------------------------

def index_select_kernel(out, inputs, dtypes, params):
    """out = a.index_select(dim, index): the slices of `a` along dim at each index."""
    a, index = inputs
    if out is not None or not _values_ok(a, dtypes) or not _index_ok(index, INDEX_DTYPES) or \
            a.ndim == 0 or index.ndim > 1:
        return NotImplemented
    dim = params["dim"]
    shape = list(a._shape)
    shape[dim] = index.numel()
    if math.prod(shape) < size_threshold(MIN_POSITIONS):
        return NotImplemented
    src_strides = list(a._strides)
    src_strides[dim] = 0
    index_strides = [0] * a.ndim
    index_strides[dim] = index._strides[0] if index.ndim else 0
    return _gather(shape, a, src_strides, a._strides[dim], a._shape[dim], index, index_strides,
                   False, _out_of_range_in_self, dim)


def embedding_kernel(out, inputs, dtypes, params):
    """out = weight[indices]: one row of the 2-D weight per index (padding_idx and the other
    parameters only change the gradient)."""
    weight, indices = inputs
    if out is not None or not _values_ok(weight, dtypes) or weight.ndim != 2 or \
            not _index_ok(indices, INDEX_DTYPES):
        return NotImplemented
    shape = list(indices._shape) + [weight._shape[1]]
    if math.prod(shape) < size_threshold(MIN_POSITIONS):
        return NotImplemented
    src_strides = [0] * indices.ndim + [weight._strides[1]]
    index_strides = list(indices._strides) + [0]
    return _gather(shape, weight, src_strides, weight._strides[0], weight._shape[0], indices,
                   index_strides, False, _out_of_range_in_self, 0)


def gather_kernel(out, inputs, dtypes, params):
    """out[p] = a[p with p[dim] replaced by index[p]], over index's shape."""
    a, index = inputs
    if out is not None or not _values_ok(a, dtypes) or not _index_ok(index, (D.int64,)) or \
            a.ndim == 0 or index.ndim != a.ndim or index.numel() < size_threshold(MIN_POSITIONS):
        return NotImplemented
    dim = params["dim"]
    src_strides = list(a._strides)
    src_strides[dim] = 0
    return _gather(list(index._shape), a, src_strides, a._strides[dim], a._shape[dim], index,
                   index._strides, False, _out_of_bounds_for_dim, dim)


def take_kernel(out, inputs, dtypes, params):
    """out = a.reshape(-1)[index] (negative indices count from the end)."""
    a, index = inputs
    if out is not None or not _values_ok(a, dtypes) or not _index_ok(index, (D.int64,)) or \
            index.numel() < size_threshold(MIN_POSITIONS):
        return NotImplemented
    if not a.is_contiguous():
        a = a.contiguous()  # the flat order is the row-major one
    return _gather(list(index._shape), a, [0] * index.ndim, 1, a.numel(), index,
                   index._strides, True, _take_out_of_range, 0)


@functools.lru_cache(maxsize=4096)
def _walk(shape, operand_strides):
    """The gather and scatter loops' merged walk: coalesce() of a shape and its operands'
    strides (tuples), remembered per call geometry (merging was a fifth of a mid-sized
    index_select's Python). Tuples, shared between calls."""
    merged, strides = coalesce(list(shape), [list(s) for s in operand_strides])
    return tuple(merged), tuple(map(tuple, strides))


def _gather(shape, src, src_strides, index_stride, index_size, index, index_strides, wrap,
            error, dim):
    """A new contiguous tensor of `shape` filled by the C gather loop."""
    if len(shape) > _index.MAX_NDIM:
        return NotImplemented
    result = Tensor._empty(tuple(shape), src.dtype)
    walk, (out_strides, src_strides, index_strides) = _walk(
        tuple(shape), (result._strides, tuple(src_strides), tuple(index_strides)))
    try:
        _index.gather(walk, result._storage.array, result._offset, out_strides,
                      src._storage.array, src._offset, src_strides, index_stride, index_size,
                      index._storage.array, index._offset, index_strides, wrap)
    except _index.IndexOutOfBounds as exc:
        raise error(exc.args[1], index_size, dim) from None
    return result


# --- the scatter family -----------------------------------------------------------------------

_MODES = {None: _index.ASSIGN, "add": _index.ADD, "sum": _index.ADD,
          "multiply": _index.MULTIPLY}


def scatter_kernel(out, inputs, dtypes, params):
    """scatter (src tensor or value, reduce None/add/multiply) and scatter_add: a copy of `a`
    with src[p] written (or added, multiplied) at p with p[dim] replaced by index[p]."""
    a, index, src = inputs
    if (out is not None and out is not a) or not _values_ok(a, dtypes) or \
            not _index_ok(index, (D.int64,)) or a.ndim == 0 or index.ndim != a.ndim or \
            index.numel() < size_threshold(MIN_POSITIONS):
        return NotImplemented
    # scatter_add has no reduce param (it always adds); scatter's reduce is None or a name
    reduce = params["reduce"] if "reduce" in params else "add"
    if reduce not in _MODES:
        return NotImplemented
    if isinstance(src, Tensor) and src.ndim:
        if src.dtype is not a.dtype or not _on_cpu_as(src, a.dtype) or src.ndim != a.ndim:
            return NotImplemented
        src_array, src_offset, src_strides = src._storage.array, src._offset, src._strides
    else:
        # A value (or 0-dim src) is converted as the reference converts it: astype.
        value = src._np if isinstance(src, Tensor) else src
        with np.errstate(all="ignore"):
            src_array = np.asarray(value).astype(a.dtype.numpy_dtype).reshape(1)
        src_offset, src_strides = 0, (0,) * a.ndim
    dim = params["dim"]
    return _scatter(a, list(index._shape), dim, src_array, src_offset, src_strides, index,
                    index._strides, _MODES[reduce], 1, in_place=out is a)


scatter_kernel.writes_in_place = True   # scatter_ and scatter_add_ write `a` itself


def index_add_kernel(out, inputs, dtypes, params):
    """A copy of `a` with alpha * source[.., i, ..] added to the slice at index[i] along dim
    (repeated indices accumulate in index order)."""
    a, index, source = inputs
    if (out is not None and out is not a) or not _values_ok(a, dtypes) or \
            not _index_ok(index, INDEX_DTYPES) or a.ndim == 0 or index.ndim > 1 or \
            source.dtype is not a.dtype or not _on_cpu_as(source, a.dtype):
        return NotImplemented
    dim = params["dim"]
    shape = list(a._shape)
    shape[dim] = index.numel()
    if tuple(shape) != source._shape or math.prod(shape) < size_threshold(MIN_POSITIONS):
        return NotImplemented
    alpha = _alpha(params.get("alpha", 1), a.dtype)
    if alpha is None:
        return NotImplemented
    index_strides = [0] * a.ndim
    index_strides[dim] = index._strides[0] if index.ndim else 0
    return _scatter(a, shape, dim, source._storage.array, source._offset, source._strides,
                    index, index_strides, _index.ADD, alpha, in_place=out is a)


index_add_kernel.writes_in_place = True


def _slice_write_kernel(fill):
    """index_copy (fill False: source's slices) / index_fill (fill True: one value): the
    slices of `a` along dim at `index` written by the C scatter loop in index order (the
    last write wins on a repeated index, as the reference's assignment); negative indices
    count from the end. A bad index declines, so that the reference raises its IndexError."""
    def kernel(out, inputs, dtypes, params):
        a, index, source = inputs
        if (out is not None and out is not a) or not _values_ok(a, dtypes) or \
                not _index_ok(index, INDEX_DTYPES) or a.ndim == 0 or index.ndim > 1:
            return NotImplemented
        dim = params["dim"]
        size, shape = a._shape[dim], list(a._shape)
        shape[dim] = index.numel()
        positions = index._np
        if math.prod(shape) < size_threshold(MIN_POSITIONS) or \
                (positions.size and not -size <= positions.min() <= positions.max() < size):
            return NotImplemented
        if fill:
            value = source._np if isinstance(source, Tensor) else source
            with np.errstate(all="ignore"):
                src_array = np.asarray(value).astype(a.dtype.numpy_dtype).reshape(1)
            src_offset, src_strides = 0, (0,) * a.ndim
        else:
            if source.dtype is not a.dtype or not _on_cpu_as(source, a.dtype) or \
                    tuple(shape) != source._shape:
                return NotImplemented
            src_array, src_offset, src_strides = (source._storage.array, source._offset,
                                                  source._strides)
        index_strides = [0] * a.ndim
        index_strides[dim] = index._strides[0] if index.ndim else 0
        return _scatter(a, shape, dim, src_array, src_offset, src_strides, index,
                        index_strides, _index.ASSIGN, 1, in_place=out is a, wrap=True)
    kernel.__name__ = "index_fill_kernel" if fill else "index_copy_kernel"
    kernel.writes_in_place = True
    return kernel


def _scatter(a, shape, dim, src_array, src_offset, src_strides, index, index_strides, mode,
             alpha, in_place=False, wrap=False):
    """A contiguous copy of `a` updated by the C scatter loop over the walk `shape`; with
    `in_place`, `a` itself (for `Tensor.op_`), or NotImplemented where that is not safe.
    `wrap`: negative indices count from the end of dim."""
    if len(shape) > _index.MAX_NDIM:
        return NotImplemented
    if in_place:
        size = a._shape[dim]
        if not _writable_in_place(a, (src_array, index._storage.array), index, size,
                                  low=-size if wrap else 0):
            return NotImplemented
        return _scatter_into(a, shape, dim, src_array, src_offset, src_strides, index,
                             index_strides, mode, alpha, wrap)
    return _scatter_into(_contiguous_copy(a), shape, dim, src_array, src_offset, src_strides,
                         index, index_strides, mode, alpha, wrap)


def _writable_in_place(a, others, index, size, low=0):
    """Whether the C loop may write `a` in place: contiguous and writable, sharing no memory
    with the arrays it reads (`others`), and every index in [low, size) -- checked before
    anything is written, so a bad index leaves `a` as it was (the reference then raises)."""
    if not _can_write_in_place(a, others):
        return False
    values = index._np
    return values.size == 0 or (low <= values.min() and values.max() < size)


def _scatter_into(result, shape, dim, src_array, src_offset, src_strides, index,
                  index_strides, mode, alpha, wrap=False):
    """`result` (contiguous) updated in place by the C scatter loop over the walk `shape`."""
    out_strides = list(result._strides)
    index_stride = out_strides[dim]
    out_strides[dim] = 0  # along dim the output moves by the index, not by the position
    walk, (out_strides, src_strides, index_strides) = _walk(
        tuple(shape), (tuple(out_strides), tuple(src_strides), tuple(index_strides)))
    size = result._shape[dim]
    try:
        _index.scatter(walk, result._storage.array, result._offset, out_strides, index_stride,
                       size, src_array, src_offset, src_strides, index._storage.array,
                       index._offset, index_strides, mode, alpha, wrap)
    except _index.IndexOutOfBounds as exc:
        raise _out_of_bounds_for_dim(exc.args[1], size, dim) from None
    return result


def embedding_dense_backward_kernel(out, inputs, dtypes, params):
    """embedding_dense_backward: a new zero (num_weights, D) gradient (zeroed by the parallel C
    copy of a zero), then each index's gradient row added in by the C scatter loop in index
    order, as index_add adds them: the reference's bits. padding_idx rows are zeroed first
    (the reference's product by 0 or 1, through the elementwise C loop); scale_grad_by_freq
    declines."""
    grad, flat = inputs
    num_weights, padding_idx = params["num_weights"], params["padding_idx"]
    dtype = dtypes[0]
    if out is not None or params["scale_grad_by_freq"] or not _values_ok(grad, dtypes) or \
            not _index_ok(flat, (D.int64,)) or flat.ndim != 1 or grad.ndim == 0:
        return NotImplemented
    n, width = flat._shape[0], grad._shape[-1]
    if math.prod(grad._shape) != n * width or n * width < size_threshold(MIN_POSITIONS) or \
            num_weights * width == 0:
        return NotImplemented
    rows = grad.reshape(n, width)
    if padding_idx >= 0:
        rows = rows * (flat != padding_idx).to(dtype).unsqueeze(1)
    result = Tensor._empty((num_weights, width), dtype)
    zero = np.zeros(1, dtype.numpy_dtype)
    _C.copy((num_weights * width,), result._storage.array, 0, (1,), zero, 0, (0,))
    return _scatter_into(result, (n, width), 0, rows._storage.array, rows._offset,
                         rows._strides, flat, (flat._strides[0], 0), _index.ADD,
                         _alpha(1, dtype))


def index_put_kernel(out, inputs, dtypes, params):
    """index_put with one int64 index vector on the first dim (x[idx] = v; x[idx] += v with
    accumulate): v broadcast over the selected slices, written (or added) slice after slice
    in index order by the C scatter loop, as the reference's assignment and np.add.at do;
    negative indices count from the end. In place for index_put_ where that is safe."""
    a, values = inputs
    indices = params["indices"]
    if (out is not None and out is not a) or not _values_ok(a, dtypes) or a.ndim == 0 or \
            len(indices) != 1 or indices[0] is None:
        return NotImplemented
    index = indices[0]
    if not _index_ok(index, (D.int64,)) or index.ndim != 1 or \
            not isinstance(values, Tensor) or values.dtype is not a.dtype or \
            not _on_cpu_as(values, a.dtype):
        return NotImplemented
    walk = (index._shape[0],) + tuple(a._shape[1:])
    if math.prod(walk) < size_threshold(MIN_POSITIONS):
        return NotImplemented
    v_shape, v_strides = values._shape, values._strides
    while v_shape and v_shape[0] == 1:      # the reference strips leading ones first
        v_shape, v_strides = v_shape[1:], v_strides[1:]
    tail = walk[len(walk) - len(v_shape):] if v_shape else ()
    if len(v_shape) > len(walk) or any(v not in (1, w) for v, w in zip(v_shape, tail)):
        return NotImplemented           # not broadcastable: the reference raises
    src_strides = broadcast_strides(walk, v_shape, v_strides)
    index_strides = (index._strides[0],) + (0,) * (a.ndim - 1)
    mode = _index.ADD if params.get("accumulate", False) else _index.ASSIGN
    return _scatter(a, walk, 0, values._storage.array, values._offset, src_strides, index,
                    index_strides, mode, 1, in_place=out is a, wrap=True)


index_put_kernel.writes_in_place = True


def _contiguous_copy(a):
    """A new contiguous tensor holding a's values: through the parallel C copy where it
    serves (float32 / float64, large enough), else NumPy's. (A 50,000 x 128 float32 gradient,
    `zeros(...).index_add(...)`: 2 ms through np.array, one thread.)"""
    dtype = a._storage.dtype
    if dtype in (D.float32, D.float64):
        result = Tensor._empty(a._shape, dtype)
        if copy_kernel(result, (a,), (dtype, dtype, dtype), {}) is not NotImplemented:
            return result
    return Tensor._from_array(np.array(a._np, order="C"))


def put_kernel(out, inputs, dtypes, params):
    """A copy of `a` with source's elements (in row-major order) written at the flat
    positions `index` of a's row-major order, or added there with accumulate (repeated
    indices in index order). Negative indices count from the end."""
    a, index, source = inputs
    if (out is not None and out is not a) or not _values_ok(a, dtypes) or \
            not _index_ok(index, (D.int64,)) or source.dtype is not a.dtype or \
            not _on_cpu_as(source, a.dtype) or source.numel() != index.numel() or \
            index.numel() < size_threshold(MIN_POSITIONS):
        return NotImplemented
    n = a.numel()
    positions = np.ascontiguousarray(index._np).reshape(-1)
    values = np.ascontiguousarray(source._np).reshape(-1)
    if out is a:   # put_: a's flat positions are its memory order (contiguous)
        if not _writable_in_place(a, (values, positions), index, n, low=-n):
            return NotImplemented
        result = a
    else:
        result = _contiguous_copy(a)
    mode = _index.ADD if params.get("accumulate", False) else _index.ASSIGN
    try:
        _index.scatter([positions.size], result._storage.array, result._offset, [0], 1, n,
                       values, 0, [1], positions, 0, [1], mode, 1, True)
    except _index.IndexOutOfBounds as exc:
        raise _take_out_of_range(exc.args[1], n, 0) from None
    return result


put_kernel.writes_in_place = True


# --- checks -----------------------------------------------------------------------------------

def _values_ok(t, dtypes):
    dtype = dtypes[0]
    return dtype in VALUE_DTYPES and t.dtype is dtype and _on_cpu_as(t, dtype)


def _index_ok(t, allowed):
    return isinstance(t, Tensor) and t.dtype in allowed and _on_cpu_as(t, t.dtype)


def _alpha(alpha, dtype):
    """index_add's alpha as the C loop takes it, or None to decline. The reference computes
    `source * alpha` in source's dtype (NumPy's rule for a Python scalar), so a float alpha is
    rounded to the dtype first; integer dtypes need an int alpha that fits them."""
    if type(alpha) is bool:
        alpha = int(alpha)
    if dtype.is_floating_point:
        if type(alpha) not in (int, float) or (type(alpha) is int and abs(alpha) > 2**24):
            return None
        return float(np.asarray(alpha).astype(dtype.numpy_dtype))
    if type(alpha) is not int:
        return None
    info = np.iinfo(dtype.numpy_dtype)
    return alpha if info.min <= alpha <= info.max else None

