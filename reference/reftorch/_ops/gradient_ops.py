"""Ops that derivative formulas are built from: `sum_to_size` and the view scatter/gather pair.

Every view reads some slots of its base's storage. `_view_scatter` carries a gradient from a
view back to the tensor it was taken from: each view element's gradient is added into the
storage slot it reads, then the input's elements are read back from those slots.
`_view_gather` is its adjoint (the view applied to a gradient laid out like the input), so
the pair differentiates each other and views support any order of derivatives.
"""
from __future__ import annotations

import math

import numpy as np

from .._shape import contiguous_strides, is_expandable
from .._tensor import Tensor
from . import structured


def _slots(geometry):
    """The storage index of every element of a tensor with this (shape, strides, offset)."""
    shape, strides, offset = geometry
    index = np.full(shape, offset, dtype=np.int64)
    for dim, (size, stride) in enumerate(zip(shape, strides)):
        step = np.arange(size, dtype=np.int64) * stride
        index = index + step.reshape((size,) + (1,) * (len(shape) - dim - 1))
    return index


def _shared_storage(self_geometry, view_geometry, dtype):
    """Both tensors' storage indices, and a zero buffer long enough for both."""
    self_slots, view_slots = _slots(self_geometry), _slots(view_geometry)
    size = max((int(slots.max()) + 1 if slots.size else 0) for slots in (self_slots, view_slots))
    return self_slots, view_slots, np.zeros(size, dtype=dtype)


def _overlapping(geometry):
    """Whether two elements of this geometry may read one storage slot (an expanded tensor,
    unfold's windows; a negative stride counts too). "No" is certain: taken by increasing
    stride, each dim's stride passes the farthest slot the smaller dims reach."""
    shape, strides, _ = geometry
    reach = 0
    for stride, size in sorted((s, n) for n, s in zip(shape, strides) if n > 1):
        if stride <= reach:
            return True
        reach += (size - 1) * stride
    return False


def _extent(geometry):
    """One past the last storage slot a tensor of this geometry reads (0 when empty)."""
    shape, strides, offset = geometry
    if 0 in shape:
        return 0
    return offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1


def _strided(storage, geometry):
    """The elements of `storage` that a tensor of this geometry reads, as a NumPy view."""
    shape, strides, offset = geometry
    return np.lib.stride_tricks.as_strided(storage[offset:], shape,
                                           [s * storage.itemsize for s in strides])


def _storage_for(self_geometry, view_geometry, dtype):
    """A zero buffer long enough for both geometries, and what `self`'s elements read from
    it: the buffer itself, shaped, when self is all of it in row-major order (the usual base
    of a view), else None (read them with _strided)."""
    shape, strides, offset = self_geometry
    size = max(_extent(self_geometry), _extent(view_geometry))
    if offset == 0 and size == math.prod(shape) and strides == contiguous_strides(shape):
        whole = np.zeros(shape, dtype=dtype)
        return whole.reshape(-1), whole
    return np.zeros(size, dtype=dtype), None


# Where no two elements of the written geometry share a slot, the slots are written through
# strided views of the buffer instead of index arrays: the same sums (0 + g) and the same
# reads, without building an index per element (an LSTM's backward selects every time step
# of its input: 25x faster).

def view_scatter(grad, self_geometry, view_geometry):
    """Gradient of a view (`grad`, shaped like the view) with respect to the viewed tensor."""
    if _overlapping(view_geometry):
        self_slots, view_slots, storage = _shared_storage(self_geometry, view_geometry,
                                                          grad.dtype)
        np.add.at(storage, view_slots, grad)
        return storage[self_slots]
    storage, whole = _storage_for(self_geometry, view_geometry, grad.dtype)
    region = _strided(storage, view_geometry)
    np.add(region, grad, out=region)
    return whole if whole is not None else _strided(storage, self_geometry).copy()


def view_gather(grad, self_geometry, view_geometry):
    """The view applied to `grad` (shaped like the viewed tensor): the adjoint of the above."""
    if _overlapping(self_geometry):
        self_slots, view_slots, storage = _shared_storage(self_geometry, view_geometry,
                                                          grad.dtype)
        storage[self_slots] = grad
        return storage[view_slots]
    storage, _ = _storage_for(self_geometry, view_geometry, grad.dtype)
    _strided(storage, self_geometry)[...] = grad
    return _strided(storage, view_geometry).copy()


def sum_to_size(a, size):
    """Sum `a` over the leading and size-1 dims so that it has shape `size`."""
    lead = a.ndim - len(size)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(size)
                                      if s == 1 and a.shape[lead + i] != 1)
    return np.sum(a, axis=axes, keepdims=True).reshape(size) if axes else a.copy()


VIEW_SCATTER = structured.declare("_view_scatter", view_scatter, family="autograd",
                                  params={"self_geometry": None, "view_geometry": None})
VIEW_GATHER = structured.declare("_view_gather", view_gather, family="autograd",
                                 params={"self_geometry": None, "view_geometry": None})
SUM_TO_SIZE = structured.declare("sum_to_size", sum_to_size, family="reduction",
                                 params={"size": None})


def _view_scatter(grad, self_geometry, view_geometry):
    return structured.run(VIEW_SCATTER, (grad,), {"self_geometry": self_geometry,
                                                  "view_geometry": view_geometry})


def _view_gather(grad, self_geometry, view_geometry):
    return structured.run(VIEW_GATHER, (grad,), {"self_geometry": self_geometry,
                                                 "view_geometry": view_geometry})


def tensor_sum_to_size(self, *size):
    """`Tensor.sum_to_size(*size)`: sum broadcast dims away so the result has `size`."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    if tuple(size) == self._shape:
        return self
    if not is_expandable(size, self._shape):
        raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                           f"{{{', '.join(map(str, self._shape))}}}.")
    return structured.run(SUM_TO_SIZE, (self,), {"size": tuple(size)})


Tensor.sum_to_size = tensor_sum_to_size
