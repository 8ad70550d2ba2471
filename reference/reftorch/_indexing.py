"""Tensor indexing: `t[...]` and `t[...] = value`.

An index is split in two steps, as PyTorch does:
1. basic indices (ints, 0-dim integer tensors, slices, None, Ellipsis) make a view with
   PyTorch's strides; a dim that an advanced index will read is kept whole in that view;
2. advanced indices (integer/bool tensors, lists) then go through the `index` op
   (IndexBackward0) or, for assignment, `index_put_` (IndexPutBackward0).
Because ints are applied first as selects, `x[0, :, [0, 1]]` has shape (3, 2) for x of shape
(2, 3, 4) in PyTorch, where NumPy would give (2, 3). Among the advanced indices themselves
NumPy's placement rule is PyTorch's: adjacent ones replace their dims in place, separated ones
put the broadcast index dims first.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from . import _dtype as D
from ._tensor import Tensor


def _is_basic(index):
    return index is None or index is Ellipsis or isinstance(index, (builtins.int, np.integer,
                                                                    slice)) and \
        not isinstance(index, builtins.bool)


def _as_tuple(index):
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and not all(isinstance(i, (builtins.int, builtins.bool))
                                           for i in index):
        # A list holding slices, None, lists or tensors is read as a tuple of indices
        # (NumPy's old rule, deprecated in PyTorch but still applied).
        if any(isinstance(i, (slice, type(None), type(Ellipsis), list, Tensor)) for i in index):
            return tuple(index)
    return (index,)


def _to_index(index):
    """Lists, nested tuples, NumPy arrays and Python bools become tensors; 0-dim integer
    tensors become ints (PyTorch applies them as a select, giving a view)."""
    if isinstance(index, Tensor):
        if index.ndim == 0 and index.dtype.category is D.Category.INTEGER and \
                index.dtype is not D.uint8:
            return builtins.int(index.item())
        if index.dtype.category > D.Category.INTEGER:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return index
    if isinstance(index, builtins.bool):
        return Tensor._from_array(np.array(index))
    if isinstance(index, (list, tuple, np.ndarray)):
        array = np.asarray(index)
        if array.dtype == object or array.dtype.kind not in "biu":
            if array.size == 0:
                array = array.astype(np.int64)
            else:
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
        if array.dtype.kind in "iu":
            array = array.astype(np.int64)
        return Tensor._from_array(np.ascontiguousarray(array))
    if _is_basic(index):
        return index
    raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                     "Variables are valid indices (got " + type(index).__name__ + ")")


def _dims_consumed(index):
    if index is None or index is Ellipsis:
        return 0
    if isinstance(index, Tensor) and index.dtype in (D.bool, D.uint8):
        return index.ndim
    return 1


def _expand_ellipsis(indices, ndim):
    if builtins.sum(1 for i in indices if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = builtins.sum(_dims_consumed(i) for i in indices)
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    out = []
    for i in indices:
        if i is Ellipsis:
            out.extend([slice(None)] * (ndim - consumed))
        else:
            out.append(i)
    return out


def _split(t, index):
    """(basic indices for the view, advanced entries for the `index` op over the view's dims).

    Each advanced entry is None (dim taken whole) or a tensor; a bool mask covers as many dims
    as it has. A 0-dim bool (or a Python bool) adds a new dim of size 1 that it indexes.
    """
    indices = _expand_ellipsis([_to_index(i) for i in _as_tuple(index)], t.ndim)
    basic, advanced = [], []
    for i in indices:
        if isinstance(i, Tensor):
            if i.ndim == 0:  # a 0-dim mask: a new dim, kept (True) or emptied (False)
                basic.append(None)
                keep = np.arange(1 if i.item() else 0, dtype=np.int64)
                advanced.append(Tensor._from_array(keep))
                continue
            span = i.ndim if i.dtype in (D.bool, D.uint8) else 1
            basic.extend([slice(None)] * span)
            advanced.append(i)
        elif isinstance(i, slice) or i is None:
            basic.append(i)
            advanced.append(None)
        else:
            basic.append(i)  # an int: its dim disappears from the view
    while advanced and advanced[-1] is None:
        advanced.pop()
    return basic, advanced


def _basic_view(t, indices):
    """Apply ints, slices and None; returns the view."""
    shape, strides = [], []
    offset = t._offset
    dim = 0
    for index in indices:
        if index is None:
            # A new dim of size 1; its stride follows the next dim, as unsqueeze does.
            shape.append(1)
            strides.append(t._strides[dim] * t._shape[dim] if dim < t.ndim else 1)
            continue
        size, stride = t._shape[dim], t._strides[dim]
        if isinstance(index, slice):
            start, stop, step = _slice_bounds(index, size)
            length = max(0, (stop - start + step - 1) // step)
            offset += start * stride if length else 0
            shape.append(length)
            strides.append(stride * step)
        else:
            i = operator.index(index)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size "
                                 f"{size}")
            offset += (i % size) * stride
        dim += 1
    shape += t._shape[dim:]
    strides += t._strides[dim:]
    return t._view(shape, strides, offset, op="slice",
                   replay=lambda stand_in: _basic_view(stand_in, indices))


def _slice_bounds(index, size):
    step = 1 if index.step is None else operator.index(index.step)
    if step <= 0:
        raise ValueError("step must be greater than zero")
    start = 0 if index.start is None else operator.index(index.start)
    stop = size if index.stop is None else operator.index(index.stop)
    start = min(max(start + size if start < 0 else start, 0), size)
    stop = min(max(stop + size if stop < 0 else stop, 0), size)
    return start, max(stop, start), step


def _is_identity(t, basic):
    """True when the basic indices leave `t` as it is (only whole-dim slices)."""
    return all(isinstance(i, slice) and i == slice(None) for i in basic)


def getitem(t, index):
    basic, advanced = _split(t, index)
    view = t if advanced and _is_identity(t, basic) else _basic_view(t, basic)
    if not advanced:
        return view
    return _joining.index(view, advanced)


def setitem(t, index, value):
    basic, advanced = _split(t, index)
    target = t if advanced and _is_identity(t, basic) else _basic_view(t, basic)
    if not advanced:
        if isinstance(value, Tensor):
            # Extra leading size-1 dims of the value are dropped, as PyTorch does.
            while value.ndim > target.ndim and value._shape[0] == 1:
                value = value.squeeze(0)
            target.copy_(value)
        else:
            target.fill_(value)
        return
    values = _as_values(value, t)
    _joining.index_put_(target, advanced, values)


def _as_values(value, t):
    """The assigned value as a tensor of t's dtype and device (numbers wrap like a C cast)."""
    if isinstance(value, Tensor):
        # A tensor keeps its dtype: index_put_ then refuses a mismatch, as PyTorch does.
        return value if value.device == t.device else value.to(t.device)
    if isinstance(value, (list, tuple, np.ndarray)):
        return _creation.tensor(value, dtype=t.dtype, device=t.device)
    return _elementwise.scalar_tensor(value, t.dtype, t.device)


# Imported last, as modules: they import this one (a function-level `from .x import y` costs
# 0.5-0.8 us a call, and every x[i] ran one).
from ._ops import creation as _creation, elementwise as _elementwise  # noqa: E402
from ._ops import joining as _joining  # noqa: E402
