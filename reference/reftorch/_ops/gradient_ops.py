"""Ops that derivative formulas are built from: `sum_to_size` and the view scatter/gather pair.

Every view reads some slots of its base's storage. `_view_scatter` carries a gradient from a
view back to the tensor it was taken from: each view element's gradient is added into the
storage slot it reads, then the input's elements are read back from those slots.
`_view_gather` is its adjoint (the view applied to a gradient laid out like the input), so
the pair differentiates each other and views support any order of derivatives.
"""
from __future__ import annotations

import numpy as np

from .._shape import is_expandable
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


def view_scatter(grad, self_geometry, view_geometry):
    """Gradient of a view (`grad`, shaped like the view) with respect to the viewed tensor."""
    self_slots, view_slots, storage = _shared_storage(self_geometry, view_geometry, grad.dtype)
    np.add.at(storage, view_slots, grad)
    return storage[self_slots]


def view_gather(grad, self_geometry, view_geometry):
    """The view applied to `grad` (shaped like the viewed tensor): the adjoint of the above."""
    self_slots, view_slots, storage = _shared_storage(self_geometry, view_geometry, grad.dtype)
    storage[self_slots] = grad
    return storage[view_slots]


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
