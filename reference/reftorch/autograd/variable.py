"""`Variable`: the pre-0.4 wrapper, now a deprecated alias that returns plain tensors."""
from __future__ import annotations

import warnings


from .._tensor import Tensor


class _VariableMeta(type):
    """Makes `isinstance(t, Variable)` true for every Tensor, as in PyTorch."""

    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(Tensor, metaclass=_VariableMeta):
    """`Variable(tensor, requires_grad=False, volatile=False)` returns `tensor` itself; the
    documented Variable members (backward, grad, detach, ...) are the Tensor's."""

    def __new__(cls, data=None, requires_grad=False, volatile=None):
        if volatile is not None:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)
        if data is None:
            import reftorch
            data = reftorch.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if requires_grad:
            data.requires_grad_(True)
        return data
