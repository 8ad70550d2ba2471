"""Derivative rows: arithmetic."""
from __future__ import annotations

from ._table import _conj, derivative, not_differentiable, torch


@derivative("add", "AddBackward0", inputs=("self", "other"), saves=("alpha",))
def _add(ctx, grad):
    return grad, _maybe_scale(grad, ctx.alpha)


@derivative("sub", "SubBackward0", inputs=("self", "other"), saves=("alpha",))
def _sub(ctx, grad):
    return grad, -_maybe_scale(grad, ctx.alpha)


def _maybe_scale(grad, alpha):
    return grad if alpha == 1 else grad * _conj_scalar(alpha)


def _conj_scalar(x):
    return x.conjugate() if isinstance(x, complex) else x


@derivative("mul", "MulBackward0", inputs=("self", "other"), saves=("self", "other"))
def _mul(ctx, grad):
    needs = ctx.needs_input_grad
    return (grad * _conj_value(ctx.other) if needs[0] else None,
            grad * _conj_value(ctx.self) if needs[1] else None)


def _conj_value(x):
    return _conj(x) if hasattr(x, "_shape") else _conj_scalar(x)


@derivative("div", lambda inputs, params: "DivBackward0" if params.get("rounding_mode") is None
            else "DivBackward1", inputs=("self", "other"),
            saves=("self", "other", "rounding_mode"))
def _div(ctx, grad):
    if ctx.rounding_mode is not None:  # piecewise constant: zero almost everywhere
        return grad * 0, grad * 0 if hasattr(ctx.other, "_shape") else None
    needs = ctx.needs_input_grad
    other = _conj_value(ctx.other)
    grad_self = grad / other if needs[0] else None
    grad_other = -grad * _conj_value(ctx.self) / (other * other) if needs[1] else None
    return grad_self, grad_other


@derivative("pow", lambda inputs, params: "PowBackward1" if hasattr(inputs[1], "_shape") and
            hasattr(inputs[0], "_shape") else "PowBackward0" if hasattr(inputs[0], "_shape")
            else "PowBackward2",
            inputs=("self", "exponent"), saves=("self", "exponent", "result"))
def _pow(ctx, grad):
    base, exponent = ctx.self, ctx.exponent
    needs = ctx.needs_input_grad
    grad_base = grad_exponent = None
    if needs[0]:
        if not hasattr(exponent, "_shape") and exponent == 0:
            grad_base = grad * 0
        else:
            grad_base = grad * _conj_value(exponent * base ** (exponent - 1))
    if needs[1]:
        # d/dy x**y = x**y log x, taken as 0 where x == 0 and y >= 0 (PyTorch's convention).
        result = ctx.result
        log_base = torch.log(base) if hasattr(base, "_shape") else _log_scalar(base)
        value = result * log_base
        if hasattr(base, "_shape"):
            value = torch.where((base == 0) & (exponent >= 0), value * 0, value)
        grad_exponent = grad * _conj(value)
    return grad_base, grad_exponent


def _log_scalar(x):
    import cmath
    import math
    return cmath.log(x) if isinstance(x, complex) or x < 0 else (
        math.log(x) if x > 0 else float("-inf"))


@derivative("neg", "NegBackward0")
def _neg(ctx, grad):
    return -grad


@derivative("positive", "AliasBackward0")
def _positive(ctx, grad):
    return grad


@derivative("abs", "AbsBackward0", saves=("self",))
def _abs(ctx, grad):
    return grad * torch.sgn(ctx.self)


@derivative("remainder", lambda inputs, params: "RemainderBackward0" if not hasattr(
    inputs[1], "_shape") else "RemainderBackward1", inputs=("self", "other"),
    saves=("self", "other"))
def _remainder(ctx, grad):
    needs = ctx.needs_input_grad
    grad_other = None
    if needs[1]:
        grad_other = -grad * torch.floor_divide(ctx.self, ctx.other)
    return grad, grad_other


not_differentiable("eq", "ne", "lt", "le", "gt", "ge", "floor_divide", "bitwise_and",
                   "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
                   "bitwise_right_shift")
