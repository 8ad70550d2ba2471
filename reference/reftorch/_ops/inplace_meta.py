"""In-place changes of a tensor's geometry (resize_, t_, set_) and fills (fill_, zero_)."""
from __future__ import annotations

import warnings

import numpy as np

from .. import _dtype as D
from .._promotion import check_scalar_fits
from .._shape import contiguous_strides
from .._tensor import Tensor
from .copy import copy_


def resize_(self, *sizes, memory_format=None):
    """Give self a new contiguous shape, growing its storage if needed (values kept in order)."""
    from .._tensor import _shape_arg
    shape = tuple(int(s) for s in _shape_arg(sizes))
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: "
                           f"{list(shape)}")
    numel = int(np.prod(shape, dtype=np.int64))
    needed = self._offset + numel
    if needed > len(self._storage):
        self._storage.resize_(needed)
    self._set_geometry(self._storage, self._offset, shape, contiguous_strides(shape))
    return self


def resize_output(out, shape):
    """Give an `out=` tensor the result's shape. As PyTorch's resize_output does, a tensor that
    held elements and had another shape is resized with a UserWarning (a deprecated use: a
    caller reusing `out` should empty it first with out.resize_(0)); an empty one silently."""
    shape = tuple(shape)
    if out._shape == shape:
        return out
    if out.numel() != 0:
        warnings.warn(f"An output with one or more elements was resized since it had shape "
                      f"{list(out._shape)}, which does not match the required output shape "
                      f"{list(shape)}. Resizing a non-empty out= tensor is deprecated; resize "
                      f"it to zero elements first (out.resize_(0)) to reuse it.", UserWarning,
                      stacklevel=3)
    return resize_(out, shape)


def resize_as_(self, other, memory_format=None):
    return resize_(self, other._shape)


def fill_(self, value):
    """Fill self with one value (a number or a 0-dim tensor)."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {value.ndim} dimensions.")
        value = value.item()      # a tensor's value is converted unchecked, as in PyTorch
    else:
        check_scalar_fits(value, fill_check_dtype(self.numel(), self.dtype))
    return copy_(self, _elementwise.scalar_tensor(value, self.dtype, self.device))


def fill_check_dtype(numel, dtype):
    """The dtype a fill value is checked against. PyTorch fills a one-element float16 or
    bfloat16 tensor through a double, so there the value only has to fit a double (70000
    becomes inf), while for more elements it must fit the 16-bit type."""
    return D.float64 if numel == 1 and dtype in (D.float16, D.bfloat16) else dtype


def zero_(self):
    return fill_(self, 0)


def _become(self, view, node):
    """Give self the geometry of `view` (a view of self just made); with autograd, self's
    history continues through the view's node, under PyTorch's name for the in-place form."""
    from ..autograd.graph import check_inplace, node_class
    if self.requires_grad:
        check_inplace(self)
    self._set_geometry(self._storage, view._offset, view._shape, view._strides)
    if view.grad_fn is not None:
        view.grad_fn.__class__ = node_class(node)
        self.grad_fn = view.grad_fn
    return self


def t_(self):
    return _become(self, self.t(), "TBackward1")


def transpose_(self, dim0, dim1):
    return _become(self, self.transpose(dim0, dim1), "TransposeBackward1")


def squeeze_(self, dim=None):
    node = "SqueezeBackward3" if dim is None else \
        "SqueezeBackward4" if isinstance(dim, int) else "SqueezeBackward5"
    return _become(self, self.squeeze(dim), node)


def unsqueeze_(self, dim):
    return _become(self, self.unsqueeze(dim), "UnsqueezeBackward1")


def as_strided_(self, size, stride, storage_offset=None):
    return _become(self, self.as_strided(size, stride, storage_offset), "AsStridedBackward1")


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """Make self view `source` (a tensor or storage), or become empty."""
    if source is None:
        from .._storage import allocate
        self._set_geometry(allocate(0, self.dtype, self.device), 0, (0,), (1,))
    elif isinstance(source, Tensor):
        self._set_geometry(source._storage, source._offset, source._shape, source._strides)
    else:
        storage = getattr(source, "_untyped", source)
        size = (len(storage),) if size is None else tuple(size)
        stride = contiguous_strides(size) if stride is None else tuple(stride)
        self._set_geometry(storage, storage_offset, size, stride)
    return self


# Imported last: elementwise imports this module (a function-level import costs ~0.6 us a call).
from . import elementwise as _elementwise  # noqa: E402
