"""The public forms of an op, derived from its one declaration.

`functional(op)` gives `reftorch.add(input, other, *, alpha=1, out=None)`;
`method(op)` gives `Tensor.add`; `inplace(op)` gives `Tensor.add_`; `reflected(op)` gives
`Tensor.__radd__`. No op writes these by hand.
"""
from __future__ import annotations

from .. import _dtype as D
from .._tensor import Tensor
from .elementwise import apply, as_operand


def _params(op, given):
    if not given:
        return given  # the common call passes no keyword: nothing to check
    unknown = set(given) - set(op.params)
    if unknown:
        raise TypeError(f"{op.name}() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    return given


def _self_tensor(op, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op.name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def identity(op):
    """`reftorch.<op>(input)` and `Tensor.<op>()` for an op whose PyTorch result is the input
    itself (positive: no copy, no autograd node): the op's argument check, then `input`."""
    def identity_fn(input):
        input = _self_tensor(op, input)
        if op.check is not None:
            op.check(input.dtype, {}, (input,), False)
        return input
    identity_fn.__name__ = op.name
    identity_fn.__doc__ = op.numpy_fn.__doc__
    return identity_fn


def functional(op, arity=2, scalar_self=False):
    """`reftorch.<op>(input[, other], *, out=None, **params)`."""
    if arity == 1:
        def unary_fn(input, *, out=None, **params):
            return apply(op, (_self_tensor(op, input),), out=out, params=_params(op, params))
        unary_fn.__name__ = op.name
        unary_fn.__doc__ = op.numpy_fn.__doc__
        return unary_fn

    def binary_fn(input, other, *, out=None, **params):
        if scalar_self and not isinstance(input, Tensor):
            input = as_operand(input, op.name)
        else:
            input = _self_tensor(op, input)
        return apply(op, (input, as_operand(other, op.name)), out=out,
                     params=_params(op, params))
    binary_fn.__name__ = op.name
    binary_fn.__doc__ = op.numpy_fn.__doc__
    return binary_fn


def method(op, arity=2):
    """`Tensor.<op>(self[, other], **params)`."""
    if arity == 1:
        def unary_method(self, **params):
            return apply(op, (self,), params=_params(op, params))
        unary_method.__name__ = op.name
        return unary_method

    def binary_method(self, other, **params):
        return apply(op, (self, as_operand(other, op.name)), params=_params(op, params))
    binary_method.__name__ = op.name
    return binary_method


def inplace(op, arity=2):
    """`Tensor.<op>_(self[, other], **params)`: writes into self, keeping its dtype and shape."""
    if arity == 1:
        def unary_inplace(self, **params):
            return apply(op, (self,), out=self, inplace=True, params=_params(op, params))
        unary_inplace.__name__ = op.name + "_"
        return unary_inplace

    def binary_inplace(self, other, **params):
        return apply(op, (self, as_operand(other, op.name)), out=self, inplace=True,
                     params=_params(op, params))
    binary_inplace.__name__ = op.name + "_"
    return binary_inplace


def reflected(op):
    """`Tensor.__r<op>__(self, other)`: computes `other <op> self`."""
    def reflected_method(self, other):
        try:
            other = as_operand(other, op.name)
        except TypeError:
            return NotImplemented
        return apply(op, (other, self))
    reflected_method.__name__ = f"__r{op.name}__"
    return reflected_method


def operator(op):
    """A binary dunder (`__add__`): like the method, but unknown operands give NotImplemented."""
    def operator_method(self, other):
        if type(other) is not Tensor:  # a Tensor is an operand as it is (as_operand's rule)
            try:
                other = as_operand(other, op.name)
            except TypeError:
                return NotImplemented
        return apply(op, (self, other))
    operator_method.__name__ = f"__{op.name}__"
    return operator_method


def invert_operator(op):
    """`~t`: Python's invert is defined for integer and bool tensors only (a TypeError)."""
    def invert(self):
        if self.dtype.category > D.Category.INTEGER:
            raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                            "tensors")
        return apply(op, (self,))
    invert.__name__ = "__invert__"
    return invert
