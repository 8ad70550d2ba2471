"""Tensor indexing: `t[...]` and `t[...] = value`.

Basic indices (ints, slices, None, Ellipsis) give views with PyTorch's strides. Advanced
indices (integer or bool tensors, lists) give copies, with NumPy's rules for where the
indexed dims go, which are PyTorch's rules too.
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
        # A list holding slices or None is read as a tuple of indices (NumPy's old rule).
        if any(isinstance(i, (slice, type(None), type(Ellipsis), list, Tensor)) for i in index):
            return tuple(index)
    return (index,)


def _expand_ellipsis(indices, ndim):
    consumed = builtins.sum(1 for i in indices if i is not None and i is not Ellipsis
                            and not (isinstance(i, Tensor) and i.dtype is D.bool)) + \
        builtins.sum(i.ndim for i in indices if isinstance(i, Tensor) and i.dtype is D.bool)
    if builtins.sum(1 for i in indices if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    out = []
    for i in indices:
        if i is Ellipsis:
            out.extend([slice(None)] * (ndim - consumed))
        else:
            out.append(i)
    return out


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
    return t._view(shape, strides, offset, op="slice")


def _slice_bounds(index, size):
    step = 1 if index.step is None else operator.index(index.step)
    if step <= 0:
        raise ValueError("step must be greater than zero")
    start = 0 if index.start is None else operator.index(index.start)
    stop = size if index.stop is None else operator.index(index.stop)
    start = min(max(start + size if start < 0 else start, 0), size)
    stop = min(max(stop + size if stop < 0 else stop, 0), size)
    return start, max(stop, start), step


def _numpy_index(index):
    if isinstance(index, Tensor):
        if index.dtype.category > D.Category.INTEGER:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return index._host_array()
    if isinstance(index, list):
        return np.asarray(index)
    return index


def getitem(t, index):
    indices = _expand_ellipsis(list(_as_tuple(index)), t.ndim)
    if all(_is_basic(i) for i in indices):
        return _basic_view(t, indices)
    array = t._host_array()[tuple(_numpy_index(i) for i in indices)]
    result = Tensor._from_array(np.array(array), t.dtype)
    return result if t.device.type == "cpu" else result.to(t.device)


def setitem(t, index, value):
    indices = _expand_ellipsis(list(_as_tuple(index)), t.ndim)
    if all(_is_basic(i) for i in indices):
        target = _basic_view(t, indices)
        if isinstance(value, Tensor):
            target.copy_(value)
        else:
            target.fill_(value)
        return
    if t.device.type != "cpu":
        raise NotImplementedError("advanced-index assignment on plugin devices")
    source = value._host_array() if isinstance(value, Tensor) else value
    t._np[tuple(_numpy_index(i) for i in indices)] = source
    t._bump_version()
