"""Parameter: a Tensor that a Module registers as one of its learnable parameters."""
from __future__ import annotations

from .._tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that requires grad by default and that `Module.__setattr__` registers.

    It shares storage with the `data` it wraps (as PyTorch's does); results of operations on
    a Parameter are ordinary Tensors.
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from .._ops.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, not {type(data).__name__}")
        p = cls._make(data._storage, data._offset, data._shape, data._strides)
        p.requires_grad = bool(requires_grad)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            from .._ops.creation import empty
            data = empty(0)
        b = cls._make(data._storage, data._offset, data._shape, data._strides)
        b.persistent = persistent
        return b

    def __init__(self, data=None, *, persistent=True):
        pass

