"""Derivative rows: pointwise math."""
from __future__ import annotations

from ._table import _conj, derivative, not_differentiable, op_module, torch
from .arithmetic import _conj_scalar, _conj_value


# Unary functions f(x): the gradient is grad * conj(f'(x)) (PyTorch's complex convention).

def _unary_derivative(op, node, saves, slope):
    """Row for a unary op whose derivative is `slope(ctx)` (a tensor, before conjugation)."""
    @derivative(op, node, saves=saves)
    def _(ctx, grad):
        return grad * _conj_value(slope(ctx))
    return _


_LN2, _LN10 = 0.6931471805599453, 2.302585092994046
for _op, _node, _saves, _slope in (
        ("sin", "SinBackward0", ("self",), lambda c: c.self.cos()),
        ("cos", "CosBackward0", ("self",), lambda c: -c.self.sin()),
        ("tan", "TanBackward0", ("result",), lambda c: 1 + c.result * c.result),
        ("sinh", "SinhBackward0", ("self",), lambda c: c.self.cosh()),
        ("cosh", "CoshBackward0", ("self",), lambda c: c.self.sinh()),
        ("asin", "AsinBackward0", ("self",), lambda c: (1 - c.self * c.self).rsqrt()),
        ("acos", "AcosBackward0", ("self",), lambda c: -(1 - c.self * c.self).rsqrt()),
        ("atan", "AtanBackward0", ("self",), lambda c: (1 + c.self * c.self).reciprocal()),
        ("asinh", "AsinhBackward0", ("self",), lambda c: (c.self * c.self + 1).rsqrt()),
        ("acosh", "AcoshBackward0", ("self",), lambda c: (c.self * c.self - 1).rsqrt()),
        ("atanh", "AtanhBackward0", ("self",), lambda c: (1 - c.self * c.self).reciprocal()),
        ("exp", "ExpBackward0", ("result",), lambda c: c.result),
        ("exp2", "Exp2Backward0", ("result",), lambda c: c.result * _LN2),
        ("expm1", "Expm1Backward0", ("result",), lambda c: c.result + 1),
        ("log", "LogBackward0", ("self",), lambda c: c.self.reciprocal()),
        ("log2", "Log2Backward0", ("self",), lambda c: (c.self * _LN2).reciprocal()),
        ("log10", "Log10Backward0", ("self",), lambda c: (c.self * _LN10).reciprocal()),
        ("log1p", "Log1PBackward0", ("self",), lambda c: (c.self + 1).reciprocal()),
        ("reciprocal", "ReciprocalBackward0", ("result",), lambda c: -c.result * c.result),
        ("rsqrt", "RsqrtBackward0", ("result",), lambda c: -0.5 * c.result ** 3),
        ("sqrt", "SqrtBackward0", ("result",), lambda c: (2 * c.result).reciprocal()),
        ("deg2rad", "Deg2RadBackward0", (), lambda c: 0.017453292519943295),
        ("rad2deg", "Rad2DegBackward0", (), lambda c: 57.29577951308232),
        ("frac", "FracBackward0", (), lambda c: 1)):
    _unary_derivative(_op, _node, _saves, _slope)


# tanh and sigmoid: their gradients are the fused backward ops tanh_backward and
# sigmoid_backward (PyTorch's), which have rows of their own for double backward. With
# f(g, y) = g * conj(h(y)) (h(y) = 1 - y^2 or y (1 - y)): d/dg is gg * h(y), i.e. the same op
# at conj(y), and the gradient for y is conj(gg) * g * conj(h'(y)), as PyTorch computes it.

def _activation_ops():
    return op_module("nn_activation")


@derivative("tanh", "TanhBackward0", saves=("result",))
def _tanh(ctx, grad):
    return _activation_ops().tanh_backward(grad, ctx.result)


@derivative("sigmoid", "SigmoidBackward0", saves=("result",))
def _sigmoid(ctx, grad):
    return _activation_ops().sigmoid_backward(grad, ctx.result)


@derivative("tanh_backward", "TanhBackwardBackward0", inputs=("grad_output", "output"),
            saves=("grad_output", "output"))
def _tanh_backward(ctx, gg):
    g, y = ctx.grad_output, ctx.output
    grad_g = _activation_ops().tanh_backward(gg, _conj(y))
    grad_y = _conj(gg) * g * _conj(-2 * y)
    return grad_g, grad_y


@derivative("sigmoid_backward", "SigmoidBackwardBackward0", inputs=("grad_output", "output"),
            saves=("grad_output", "output"))
def _sigmoid_backward(ctx, gg):
    g, y = ctx.grad_output, ctx.output
    grad_g = _activation_ops().sigmoid_backward(gg, _conj(y))
    grad_y = _conj(gg) * g * _conj(1 - 2 * y)
    return grad_g, grad_y


def _zero_derivative(op, node):
    """Piecewise-constant functions: zero gradient almost everywhere."""
    @derivative(op, node)
    def _(ctx, grad):
        return grad * 0
    return _


for _op, _node in (("ceil", "CeilBackward0"), ("floor", "FloorBackward0"),
                   ("trunc", "TruncBackward0"), ("sign", "SignBackward0")):
    _zero_derivative(_op, _node)


@derivative("round", lambda inputs, params: "RoundBackward0" if not params.get("decimals")
            else "RoundBackward1")
def _round(ctx, grad):
    return grad * 0


@derivative("logit", "LogitBackward0", saves=("self", "eps"))
def _logit(ctx, grad):
    x, eps = ctx.self, ctx.eps
    slope = grad / (x * (1 - x))
    if eps is None:  # outside [0, 1] the function is nan, and so is its slope
        return torch.where((x < 0) | (x > 1), slope * float("nan"), slope)
    return torch.where((x < eps) | (x > 1 - eps), slope * 0, slope)


@derivative("sgn", "SgnBackward0", saves=("self", "result"))
def _sgn(ctx, grad):
    if not ctx.self.is_complex():
        return grad * 0
    # d(z/|z|): (g - sgn^2 conj(g)) / (2|z|), and 0 at z == 0.
    magnitude = ctx.self.abs()
    value = (grad - ctx.result * ctx.result * grad.conj()) / (2 * magnitude)
    return torch.where(magnitude == 0, value * 0, value)


@derivative("angle", "AngleBackward0", saves=("self",))
def _angle(ctx, grad):
    x = ctx.self
    if not x.is_complex():
        return grad * 0
    value = grad * x / (x.abs() ** 2) * 1j
    return torch.where(x == 0, value * 0, value)


@derivative("conj_physical", "ConjPhysicalBackward0")
def _conj_physical(ctx, grad):
    return _conj(grad)


@derivative("real", "RealBackward0")
def _real(ctx, grad):
    return grad


@derivative("imag", "ImagBackward0")
def _imag(ctx, grad):
    return grad * 1j


@derivative("view_as_real", "ViewAsRealBackward0")
def _view_as_real(ctx, grad):
    return torch.view_as_complex(grad.contiguous())


@derivative("view_as_complex", "ViewAsComplexBackward0")
def _view_as_complex(ctx, grad):
    return torch.view_as_real(grad.contiguous())


@derivative("nan_to_num", "NanToNumBackward0", saves=("self",))
def _nan_to_num(ctx, grad):
    return grad * torch.isfinite(ctx.self)


# Binary functions: each gradient only where that input needs one.

@derivative("atan2", "Atan2Backward0", inputs=("self", "other"), saves=("self", "other"))
def _atan2(ctx, grad):
    denominator = ctx.self * ctx.self + ctx.other * ctx.other
    return grad * ctx.other / denominator, grad * -ctx.self / denominator


@derivative("hypot", "HypotBackward0", inputs=("self", "other"),
            saves=("self", "other", "result"))
def _hypot(ctx, grad):
    return grad * ctx.self / ctx.result, grad * ctx.other / ctx.result


@derivative("logaddexp", "LogaddexpBackward0", inputs=("self", "other"),
            saves=("self", "other"))
def _logaddexp(ctx, grad):
    return (grad / (1 + torch.exp(ctx.other - ctx.self)),
            grad / (1 + torch.exp(ctx.self - ctx.other)))


@derivative("logaddexp2", "Logaddexp2Backward0", inputs=("self", "other"),
            saves=("self", "other"))
def _logaddexp2(ctx, grad):
    return (grad / (1 + torch.exp2(ctx.other - ctx.self)),
            grad / (1 + torch.exp2(ctx.self - ctx.other)))


@derivative("copysign", lambda inputs, params: "CopysignBackward0" if hasattr(inputs[1], "_shape")
            else "CopysignBackward1", inputs=("self", "other"), saves=("self", "result"))
def _copysign(ctx, grad):
    # d/dx copysign(x, y) = result / x, taken as 0 at x == 0; y gets no gradient.
    ratio = ctx.result / ctx.self
    grad_other = grad * 0 if ctx.needs_input_grad[1] else None
    return grad * torch.where(ctx.self == 0, ratio * 0, ratio), grad_other


def _max_min_derivative(op, node, self_wins):
    """maximum/minimum: the gradient goes to the chosen input, split evenly on ties."""
    @derivative(op, node, inputs=("self", "other"), saves=("self", "other"))
    def _(ctx, grad):
        x, y = ctx.self, ctx.other
        half = grad / 2
        tie = x == y
        return (torch.where(tie, half, torch.where(self_wins(x, y), grad, grad * 0)),
                torch.where(tie, half, torch.where(self_wins(y, x), grad, grad * 0)))
    return _


_max_min_derivative("maximum", "MaximumBackward0", lambda a, b: a > b)
_max_min_derivative("minimum", "MinimumBackward0", lambda a, b: a < b)


def _fmax_fmin_derivative(op, node, self_chosen):
    """fmax/fmin: the whole gradient goes to the input the result came from (self on ties)."""
    @derivative(op, node, inputs=("self", "other"), saves=("self", "other"))
    def _(ctx, grad):
        to_self = self_chosen(ctx.self, ctx.other) | torch.isnan(ctx.other)
        return torch.where(to_self, grad, grad * 0), torch.where(to_self, grad * 0, grad)
    return _


_fmax_fmin_derivative("fmax", "FmaxBackward0", lambda a, b: a >= b)
_fmax_fmin_derivative("fmin", "FminBackward0", lambda a, b: a <= b)


@derivative("xlogy", lambda inputs, params: "XlogyBackward0" if all(
    hasattr(x, "_shape") for x in inputs) else "XlogyBackward1" if hasattr(inputs[1], "_shape")
    else "XlogyBackward2", inputs=("self", "other"), saves=("self", "other"))
def _xlogy(ctx, grad):
    x, y = ctx.self, ctx.other
    needs = ctx.needs_input_grad
    grad_self = grad_other = None
    if needs[0]:
        grad_self = torch.xlogy(grad, y)
        grad_self = torch.where((x == 0) & (y <= 0), grad_self * 0, grad_self)
    if needs[1]:
        grad_other = grad * x / y
    return grad_self, grad_other


@derivative("ldexp", "LdexpBackward0", inputs=("self", "other"), saves=("self", "other",
                                                                       "result"))
def _ldexp(ctx, grad):
    return grad * torch.exp2(ctx.other), grad * ctx.result * _LN2


@derivative("fmod", lambda inputs, params: "FmodBackward1" if hasattr(inputs[1], "_shape")
            else "FmodBackward0", inputs=("self", "other"), saves=("self", "other"))
def _fmod(ctx, grad):
    grad_other = None
    if ctx.needs_input_grad[1]:
        grad_other = -grad * torch.trunc(ctx.self / ctx.other)
    return grad, grad_other


# Ternary functions.

@derivative("clamp", lambda inputs, params: "ClampBackward0" if hasattr(inputs[1], "_shape")
            else "ClampBackward1", inputs=("self", "min", "max"), saves=("self", "min", "max"))
def _clamp(ctx, grad):
    x, low, high = ctx.self, ctx.min, ctx.max
    inside = (x >= low) & (x <= high)
    needs = ctx.needs_input_grad
    zero = grad * 0
    grad_low = grad_high = None
    if needs[1]:  # low is the result where x < low <= high
        grad_low = torch.where((x < low) & (low <= high), grad, zero)
    if needs[2]:  # high is the result where x > high, and wherever low > high
        grad_high = torch.where((x > high) | (low > high), grad, zero)
    return torch.where(inside, grad, zero), grad_low, grad_high


@derivative("clamp_min", lambda inputs, params: "ClampMinBackward1" if hasattr(
    inputs[1], "_shape") else "ClampMinBackward0", inputs=("self", "min"), saves=("self", "min"))
def _clamp_min(ctx, grad):
    keep = ctx.self >= ctx.min
    grad_low = torch.where(keep, grad * 0, grad) if ctx.needs_input_grad[1] else None
    return torch.where(keep, grad, grad * 0), grad_low


@derivative("clamp_max", lambda inputs, params: "ClampMaxBackward1" if hasattr(
    inputs[1], "_shape") else "ClampMaxBackward0", inputs=("self", "max"), saves=("self", "max"))
def _clamp_max(ctx, grad):
    keep = ctx.self <= ctx.max
    grad_high = torch.where(keep, grad * 0, grad) if ctx.needs_input_grad[1] else None
    return torch.where(keep, grad, grad * 0), grad_high


@derivative("lerp", lambda inputs, params: "LerpBackward1" if hasattr(inputs[2], "_shape")
            else "LerpBackward0", inputs=("self", "end", "weight"),
            saves=("self", "end", "weight"))
def _lerp(ctx, grad):
    weight = _conj_value(ctx.weight)
    grad_weight = None
    if ctx.needs_input_grad[2]:
        grad_weight = grad * _conj(ctx.end - ctx.self)
    return grad * (1 - weight), grad * weight, grad_weight


@derivative("addcmul", "AddcmulBackward0", inputs=("self", "tensor1", "tensor2"),
            saves=("tensor1", "tensor2", "value"))
def _addcmul(ctx, grad):
    value = _conj_scalar(ctx.value)
    needs = ctx.needs_input_grad
    return (grad,
            grad * _conj(ctx.tensor2) * value if needs[1] else None,
            grad * _conj(ctx.tensor1) * value if needs[2] else None)


@derivative("addcdiv", "AddcdivBackward0", inputs=("self", "tensor1", "tensor2"),
            saves=("tensor1", "tensor2", "value"))
def _addcdiv(ctx, grad):
    value = _conj_scalar(ctx.value)
    t1, t2 = _conj(ctx.tensor1), _conj(ctx.tensor2)
    needs = ctx.needs_input_grad
    return (grad,
            grad * value / t2 if needs[1] else None,
            -grad * value * t1 / (t2 * t2) if needs[2] else None)


@derivative("where", "WhereBackward0", inputs=("condition", "self", "other"),
            saves=("condition",))
def _where(ctx, grad):
    zero = grad * 0
    needs = ctx.needs_input_grad
    return (None,
            torch.where(ctx.condition, grad, zero) if needs[1] else None,
            torch.where(ctx.condition, zero, grad) if needs[2] else None)


not_differentiable("signbit", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal",
                   "logical_not", "logical_and", "logical_or", "logical_xor", "heaviside",
                   "nextafter", "gcd", "lcm")
