"""The derivative table: one row per differentiable op, every formula written with reftorch ops.

Because formulas are ordinary reftorch code, running them with grad mode on records a graph
of their own (double backward), and plugin kernels speed them up like any forward code.

A row is written as

    @derivative("mul", "MulBackward0", inputs=("self", "other"), saves=("self", "other"))
    def _(ctx, grad):
        return grad * ctx.other.conj(), grad * ctx.self.conj()

`inputs` names the op's inputs in the order the op records them; `saves` lists the inputs,
outputs (`result`, or the names in `outputs`) and parameters the formula reads through `ctx`;
`ctx.shape(i)` and `ctx.dtype(i)` give input i's shape and dtype without saving the tensor.
A formula receives one gradient per output (None for outputs nobody used) and returns one
gradient per input (None where there is none). The engine then sums each gradient to its
input's shape (broadcasting) and converts it to the input's dtype, as PyTorch's engine does.
Complex gradients follow PyTorch's convention (the conjugate Wirtinger derivative).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .._dispatch import find_op

_ROWS = {}


@dataclass(eq=False)
class Row:
    op: str
    node: object                       # the node name, or fn(inputs, params) -> name
    backward_fn: object
    inputs: tuple = ("self",)
    saves: tuple = ()
    outputs: tuple = ("result",)
    nondifferentiable_outputs: frozenset = field(default_factory=frozenset)
    differentiable: bool = True

    def node_name(self, inputs, params):
        return self.node if isinstance(self.node, str) else self.node(inputs, params)

    def values_to_save(self, inputs, results, params, replaced=None):
        """(name, value) for each name in `saves`: an input (or its replacement), an output,
        or a parameter (the op's declared default when the caller left it out)."""
        names = dict(zip(self.inputs, inputs))
        if replaced:
            names.update(replaced)
        names.update(zip(self.outputs, results))
        for key in self.saves:
            if key in names:
                yield key, names[key]
            elif key in params:
                yield key, params[key]
            else:
                yield key, _default(self.op, key)

    def backward(self, ctx, *grads):
        result = self.backward_fn(ctx, *grads)
        return result if isinstance(result, tuple) else (result,)


def _default(op, key):
    """A parameter the caller left out has the op's declared default."""
    declared = find_op(op)
    return None if declared is None else declared.params.get(key)


def derivative(op, node, inputs=("self",), saves=(), outputs=("result",),
               nondifferentiable_outputs=()):
    """Register the derivative row of `op` (decorates the formula)."""
    def register(fn):
        if op in _ROWS:
            raise RuntimeError(f"derivative of '{op}' is registered twice")
        _ROWS[op] = Row(op, node, fn, tuple(inputs), tuple(saves), tuple(outputs),
                        frozenset(nondifferentiable_outputs))
        return fn
    return register


def not_differentiable(*ops):
    """Ops whose outputs never require grad (comparisons, indices, bit operations)."""
    for op in ops:
        _ROWS[op] = Row(op, None, None, differentiable=False)


def row_for(op):
    return _ROWS.get(op)


def all_rows():
    return dict(_ROWS)


# The formulas use the public API; importing it lazily keeps this table importable first.
class _Torch:
    def __getattr__(self, name):
        import reftorch
        return getattr(reftorch, name)


torch = _Torch()


def _conj(t):
    return t.conj() if t.is_complex() else t


def _real_if(grad, dtype):
    """A gradient for a real input of an op with a complex result keeps only the real part."""
    return grad.real if grad.is_complex() and not dtype.is_complex else grad


# --- arithmetic ------------------------------------------------------------------------------

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


# --- copies and conversions ------------------------------------------------------------------

@derivative("clone", "CloneBackward0")
def _clone(ctx, grad):
    return grad


@derivative("_to_copy", "ToCopyBackward0")
def _to_copy(ctx, grad):
    return _real_if(grad, ctx.dtype(0)).to(device=ctx.device(0), dtype=ctx.dtype(0))


@derivative("copy_", "CopyBackwards", inputs=("self", "src"))
def _copy(ctx, grad):
    grad_src = _real_if(grad, ctx.dtype(1)).to(device=ctx.device(1), dtype=ctx.dtype(1)) \
        if ctx.needs_input_grad[1] else None
    return grad * 0 if ctx.needs_input_grad[0] else None, grad_src


@derivative("sum_to_size", "SumToSizeBackward0")
def _sum_to_size(ctx, grad):
    return grad.expand(ctx.shape(0))


# --- views -----------------------------------------------------------------------------------
# A view's gradient is its base's gradient seen through the inverse geometry.

@derivative("view", "ViewBackward0", saves=("self_shape",))
def _view(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("reshape_alias", "ReshapeAliasBackward0", saves=("self_shape",))
def _reshape_alias(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("unsafe_view", "UnsafeViewBackward0", saves=("self_shape",))
def _unsafe_view(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("squeeze", lambda inputs, params: "SqueezeBackward0" if params.get("dim") is None
            else "SqueezeBackward1" if isinstance(params["dim"], int) else "SqueezeBackward2",
            saves=("self_shape",))
def _squeeze(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("unsqueeze", "UnsqueezeBackward0", saves=("dim",))
def _unsqueeze(ctx, grad):
    return grad.squeeze(ctx.dim)


@derivative("transpose", "TransposeBackward0", saves=("dim0", "dim1"))
def _transpose(ctx, grad):
    return grad.transpose(ctx.dim0, ctx.dim1)


@derivative("t", "TBackward0")
def _t(ctx, grad):
    return grad.t()


@derivative("permute", "PermuteBackward0", saves=("dims",))
def _permute(ctx, grad):
    inverse = [0] * len(ctx.dims)
    for i, d in enumerate(ctx.dims):
        inverse[d] = i
    return grad.permute(inverse)


@derivative("expand", "ExpandBackward0", saves=("self_shape",))
def _expand(ctx, grad):
    return grad.sum_to_size(ctx.self_shape)


@derivative("alias", "AliasBackward0")
def _alias(ctx, grad):
    return grad


# Views that pick elements (select, slicing, narrow, diagonal, unfold, as_strided) share one
# formula: scatter the view's gradient into the storage slots the view reads, then read the
# input's slots back. It is exact for overlapping views too (an unfolded window counts twice).
def _geometric_view(op, node):
    @derivative(op, node, saves=("self_geometry", "view_geometry"))
    def _(ctx, grad):
        return torch._view_scatter(grad, ctx.self_geometry, ctx.view_geometry)


for _op, _node in (("select", "SelectBackward0"), ("slice", "SliceBackward0"),
                   ("narrow", "NarrowBackward0"), ("diagonal", "DiagonalBackward0"),
                   ("unfold", "UnfoldBackward0"), ("as_strided", "AsStridedBackward0")):
    _geometric_view(_op, _node)


@derivative("_view_scatter", "ViewScatterBackward0", saves=("self_geometry", "view_geometry"))
def _view_scatter(ctx, grad):
    return torch._view_gather(grad, ctx.self_geometry, ctx.view_geometry)


@derivative("_view_gather", "ViewGatherBackward0", saves=("self_geometry", "view_geometry"))
def _view_gather(ctx, grad):
    return torch._view_scatter(grad, ctx.self_geometry, ctx.view_geometry)


# --- pointwise math -------------------------------------------------------------------------
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
        ("tanh", "TanhBackward0", ("result",), lambda c: 1 - c.result * c.result),
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
        ("sigmoid", "SigmoidBackward0", ("result",), lambda c: c.result * (1 - c.result)),
        ("reciprocal", "ReciprocalBackward0", ("result",), lambda c: -c.result * c.result),
        ("rsqrt", "RsqrtBackward0", ("result",), lambda c: -0.5 * c.result ** 3),
        ("sqrt", "SqrtBackward0", ("result",), lambda c: (2 * c.result).reciprocal()),
        ("deg2rad", "Deg2RadBackward0", (), lambda c: 0.017453292519943295),
        ("rad2deg", "Rad2DegBackward0", (), lambda c: 57.29577951308232),
        ("frac", "FracBackward0", (), lambda c: 1)):
    _unary_derivative(_op, _node, _saves, _slope)


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


# --- special functions ----------------------------------------------------------------------

_TWO_OVER_SQRT_PI = 1.1283791670955126  # 2 / sqrt(pi)
_PI = 3.141592653589793
_SQRT_2PI = 2.5066282746310002


@derivative("erf", "ErfBackward0", saves=("self",))
def _erf(ctx, grad):
    return grad * (_TWO_OVER_SQRT_PI * torch.exp(-ctx.self * ctx.self))


@derivative("erfc", "ErfcBackward0", saves=("self",))
def _erfc(ctx, grad):
    return grad * (-_TWO_OVER_SQRT_PI * torch.exp(-ctx.self * ctx.self))


@derivative("erfinv", "ErfinvBackward0", saves=("result",))
def _erfinv(ctx, grad):
    return grad * (torch.exp(ctx.result * ctx.result) / _TWO_OVER_SQRT_PI)


@derivative("lgamma", "LgammaBackward0", saves=("self",))
def _lgamma(ctx, grad):
    return grad * torch.digamma(ctx.self)


@derivative("digamma", "DigammaBackward0", saves=("self",))
def _digamma(ctx, grad):
    return grad * torch.polygamma(1, ctx.self)


@derivative("polygamma", "PolygammaBackward0", saves=("self", "n"))
def _polygamma(ctx, grad):
    return grad * torch.polygamma(ctx.n + 1, ctx.self)


@derivative("mvlgamma", "MvlgammaBackward0", saves=("self", "p"))
def _mvlgamma(ctx, grad):
    # d/dx sum_j lgamma(x - j/2) = sum_j digamma(x - j/2)
    total = torch.digamma(ctx.self)
    for j in range(1, ctx.p):
        total = total + torch.digamma(ctx.self - j / 2)
    return grad * total


@derivative("i0", "I0Backward0", saves=("self",))
def _i0(ctx, grad):
    return grad * torch.special.i1(ctx.self)


@derivative("special_i0e", "SpecialI0EBackward0", saves=("self", "result"))
def _i0e(ctx, grad):
    return grad * (torch.special.i1e(ctx.self) - torch.sgn(ctx.self) * ctx.result)


@derivative("special_i1", "SpecialI1Backward0", saves=("self", "result"))
def _i1(ctx, grad):
    # i1'(x) = i0(x) - i1(x) / x, with the limit 1/2 at x = 0.
    x = ctx.self
    return grad * torch.where(x == 0, 0.5, torch.i0(x) - ctx.result / x)


@derivative("special_i1e", "SpecialI1EBackward0", saves=("self", "result"))
def _i1e(ctx, grad):
    x = ctx.self
    slope = torch.special.i0e(x) - ctx.result * (torch.sgn(x) + 1 / x)
    return grad * torch.where(x == 0, 0.5, slope)


@derivative("sinc", "SincBackward0", saves=("self",))
def _sinc(ctx, grad):
    # (pi x cos(pi x) - sin(pi x)) / (pi x^2), and 0 at x = 0.
    x = ctx.self
    pi_x = _PI * x
    slope = (pi_x * torch.cos(pi_x) - torch.sin(pi_x)) / (pi_x * x)
    return grad * _conj(torch.where(x == 0, 0.0, slope))


@derivative("special_erfcx", "SpecialErfcxBackward0", saves=("self", "result"))
def _erfcx(ctx, grad):
    return grad * (2 * ctx.self * ctx.result - _TWO_OVER_SQRT_PI)


@derivative("special_ndtri", "SpecialNdtriBackward0", saves=("result",))
def _ndtri(ctx, grad):
    return grad * (_SQRT_2PI * torch.exp(ctx.result * ctx.result * 0.5))


@derivative("special_log_ndtr", "SpecialLogNdtrBackward0", saves=("self", "result"))
def _log_ndtr(ctx, grad):
    x = ctx.self
    return grad * (torch.exp(-(ctx.result + x * x * 0.5)) / _SQRT_2PI)


@derivative("special_entr", "SpecialEntrBackward0", saves=("self",))
def _entr(ctx, grad):
    return grad * -(1 + torch.log(ctx.self))


@derivative("special_xlog1py", "SpecialXlog1PyBackward0", inputs=("self", "other"),
            saves=("self", "other"))
def _xlog1py(ctx, grad):
    x, y = ctx.self, ctx.other
    needs = ctx.needs_input_grad
    grad_self = grad_other = None
    if needs[0]:
        # log1p(other), taken as 0 where self == 0 and other <= -1 (PyTorch's convention).
        grad_self = torch.special.xlog1py(grad, y)
        if hasattr(x, "_shape"):
            grad_self = torch.where((x == 0) & (y <= -1), 0.0, grad_self)
    if needs[1]:
        grad_other = grad * x / (y + 1)
    return grad_self, grad_other



# --- reductions -----------------------------------------------------------------------------

def _red_restore(grad, shape, dims, keepdim):
    """A reduction's gradient (or result) with its reduced dims put back as size 1."""
    if not keepdim and len(shape) > 0:
        for d in (range(len(shape)) if dims is None else sorted(dims)):
            grad = grad.unsqueeze(d)
    return grad


def _red_expand(grad, shape, dims, keepdim):
    return _red_restore(grad, shape, dims, keepdim).expand(shape)


def _red_count(shape, dims):
    """How many input elements feed each output element."""
    import math
    if dims is None or len(shape) == 0:
        return math.prod(shape)
    return math.prod(shape[d] for d in dims)


def _red_dims_arg(dims):
    return None if dims is None else list(dims)


def _red_evenly(grad, x, result, dims, keepdim):
    """Gradient of a full max/min/median: split evenly among the elements equal to the result
    (NaN results: among the NaN elements), as PyTorch's evenly_distribute_backward does."""
    value = _red_restore(result, x.shape, dims, keepdim)
    mask = (x == value) | ((x != x) & (value != value))
    mask = mask.to(grad.dtype)
    count = torch.sum(mask, _red_dims_arg(dims), keepdim=True)
    return _red_restore(grad, x.shape, dims, keepdim) * mask / count


def _red_scatter_index(grad, indices, dim, shape):
    """grad_input[.., i, ..] = sum of grad[.., j, ..] over the j with indices[.., j, ..] == i.

    A one-hot comparison with an arange does the scatter with ordinary (differentiable) ops.
    """
    if len(shape) == 0:
        return grad
    positions = torch.arange(shape[dim]).unsqueeze(-1)                  # (n, 1)
    onehot = (indices.transpose(dim, -1).unsqueeze(-2) == positions)    # (..., n, m)
    spread = grad.transpose(dim, -1).unsqueeze(-2) * onehot.to(grad.dtype)
    return torch.sum(spread, -1).transpose(dim, -1)


def _red_select(grad, indices, shape, dim, keepdim):
    """Gradient of a reduction along `dim` that picked the element at `indices`."""
    if len(shape) == 0:
        return grad
    if not keepdim:
        grad, indices = grad.unsqueeze(dim), indices.unsqueeze(dim)
    return _red_scatter_index(grad, indices, dim, shape)


def _red_triangle(n, relation):
    """(n, n) bool matrix [k, j] of `relation(k, j)` over positions 0..n-1."""
    positions = torch.arange(n)
    return relation(positions.unsqueeze(1), positions.unsqueeze(0))


@derivative("sum", lambda inputs, params: "SumBackward0" if params.get("overload") == 0
            else "SumBackward1", saves=("dim", "keepdim"))
def _sum(ctx, grad):
    return _red_expand(grad, ctx.shape(0), ctx.dim, ctx.keepdim)


@derivative("nansum", "NansumBackward0", saves=("self", "dim", "keepdim"))
def _nansum(ctx, grad):
    x = ctx.self
    return _red_expand(grad, x.shape, ctx.dim, ctx.keepdim) * (x == x).to(grad.dtype)


@derivative("mean", lambda inputs, params: "MeanBackward0" if params.get("overload") == 0
            else "MeanBackward1", saves=("dim", "keepdim"))
def _mean(ctx, grad):
    shape = ctx.shape(0)
    count = max(_red_count(shape, ctx.dim), 1)  # an empty reduction has an empty gradient
    return _red_expand(grad, shape, ctx.dim, ctx.keepdim) / count


@derivative("prod", lambda inputs, params: "ProdBackward0" if params.get("dim") is None
            else "ProdBackward1", saves=("self", "dim", "keepdim"))
def _prod(ctx, grad):
    # d prod / d x_k is the product of the other elements. Dividing the result by x_k fails
    # at zeros, so: with no zero in the slice it is prod / x_k; with exactly one zero only
    # that element gets the product of the nonzeros; with two or more zeros all are zero.
    x, dims = ctx.self, ctx.dim
    zero = x == 0
    ones_for_zeros = x + zero.to(x.dtype)
    if dims is None:
        product_of_nonzeros = torch.prod(ones_for_zeros)
        zeros = torch.sum(zero)
    else:
        product_of_nonzeros = torch.prod(ones_for_zeros, dims[0], keepdim=True)
        zeros = torch.sum(zero, dims[0], keepdim=True)
    no_zero = (zeros == 0).to(x.dtype)
    one_zero = (zeros == 1).to(x.dtype)
    others = (no_zero * product_of_nonzeros / ones_for_zeros
              + one_zero * zero.to(x.dtype) * product_of_nonzeros)
    return _red_restore(grad, x.shape, dims, ctx.keepdim) * _conj(others)


def _var_backward(grad, x, dims, keepdim, correction):
    dof = _red_count(x.shape, dims) - correction
    scale = 2.0 / dof if dof > 0 else float("inf")
    centred = x - torch.mean(x, _red_dims_arg(dims), keepdim=True)
    return _red_restore(grad, x.shape, dims, keepdim) * centred * scale


def _std_to_var_grad(grad, std):
    """d std = d var / (2 std); PyTorch takes it as 0 where std == 0."""
    zero = (std == 0).to(std.dtype)
    return grad / (std * 2 + zero) * (1 - zero)


@derivative("var", "VarBackward0", saves=("self", "dim", "keepdim", "correction"))
def _var(ctx, grad):
    return _var_backward(grad, ctx.self, ctx.dim, ctx.keepdim, ctx.correction)


@derivative("std", "StdBackward0", saves=("self", "result", "dim", "keepdim", "correction"))
def _std(ctx, grad):
    return _var_backward(_std_to_var_grad(grad, ctx.result), ctx.self, ctx.dim, ctx.keepdim,
                         ctx.correction)


def _spread_mean(grad_mean, x, dims, keepdim):
    return _red_expand(grad_mean, x.shape, dims, keepdim) / max(_red_count(x.shape, dims), 1)


@derivative("var_mean", "VarMeanBackward0", outputs=("var", "mean"),
            saves=("self", "dim", "keepdim", "correction"))
def _var_mean(ctx, grad_var, grad_mean):
    x, total = ctx.self, None
    if grad_var is not None:
        total = _var_backward(grad_var, x, ctx.dim, ctx.keepdim, ctx.correction)
    if grad_mean is not None:
        part = _spread_mean(grad_mean, x, ctx.dim, ctx.keepdim)
        total = part if total is None else total + part
    return total


@derivative("std_mean", "StdMeanBackward0", outputs=("std", "mean"),
            saves=("self", "std", "dim", "keepdim", "correction"))
def _std_mean(ctx, grad_std, grad_mean):
    x, total = ctx.self, None
    if grad_std is not None:
        total = _var_backward(_std_to_var_grad(grad_std, ctx.std), x, ctx.dim, ctx.keepdim,
                              ctx.correction)
    if grad_mean is not None:
        part = _spread_mean(grad_mean, x, ctx.dim, ctx.keepdim)
        total = part if total is None else total + part
    return total


def _norm_backward(grad, x, result, p, dims, keepdim):
    """Gradient of the vector p-norm (PyTorch's conventions at zeros and for complex x)."""
    g = _red_restore(grad, x.shape, dims, keepdim)
    norm_ = _red_restore(result, x.shape, dims, keepdim)
    if p == 0:
        return g.expand(x.shape) * 0
    magnitude = torch.abs(x)
    sign = x / (magnitude + (x == 0).to(magnitude.dtype))       # sgn(x), 0 at 0
    if p == 1:
        return g * sign
    if p in (float("inf"), float("-inf")):
        mask = (magnitude == norm_).to(magnitude.dtype)
        count = torch.sum(mask, _red_dims_arg(dims), keepdim=True)
        return g * sign * mask / count
    zero_norm = (norm_ == 0).to(norm_.dtype)
    if p == 2:
        return g * x / (norm_ + zero_norm)
    return g * sign * magnitude ** (p - 1) / (norm_ ** (p - 1) + zero_norm)


@derivative("norm", "LinalgVectorNormBackward0", saves=("self", "result", "p", "dim",
                                                        "keepdim"))
def _norm(ctx, grad):
    return _norm_backward(grad, ctx.self, ctx.result, ctx.p, ctx.dim, ctx.keepdim)


@derivative("dist", "DistBackward0", inputs=("self", "other"),
            saves=("self", "other", "result", "p"))
def _dist(ctx, grad):
    difference = _norm_backward(grad, ctx.self - ctx.other, ctx.result, ctx.p, None, False)
    return difference, -difference


@derivative("logsumexp", "LogsumexpBackward0", saves=("self", "result", "dim", "keepdim"))
def _logsumexp(ctx, grad):
    x = ctx.self
    value = _red_restore(ctx.result, x.shape, ctx.dim, ctx.keepdim)
    return _red_restore(grad, x.shape, ctx.dim, ctx.keepdim) * _conj(torch.exp(x - value))


@derivative("cumsum", "CumsumBackward0", saves=("dim",))
def _cumsum(ctx, grad):
    if grad.ndim == 0:
        return grad
    # The reversed running sum: sum over j >= k of grad_j.
    return torch.sum(grad, ctx.dim, keepdim=True) - torch.cumsum(grad, ctx.dim) + grad


@derivative("cumprod", "CumprodBackward0", saves=("self", "dim"))
def _cumprod(ctx, grad):
    # d out_j / d x_k = prod_{i<k} x_i * prod_{k<i<=j} x_i for j >= k. Both products are
    # built from the inputs (not out / x_k), so zeros are handled and double backward works.
    x, d = ctx.self, ctx.dim
    if x.ndim == 0 or x.numel() == 0:
        return grad
    rows = x.transpose(d, -1).unsqueeze(-2)                       # (..., 1, n)
    n = x.shape[d]
    before = _red_triangle(n, lambda k, i: i < k).to(x.dtype)
    after = _red_triangle(n, lambda k, i: i > k).to(x.dtype)
    prefix = torch.prod(rows * before + (1 - before), -1)        # (..., n_k)
    partial = torch.cumprod(rows * after + (1 - after), -1)      # (..., n_k, n_j)
    reach = _red_triangle(n, lambda k, j: j >= k).to(x.dtype)
    weights = prefix.unsqueeze(-1) * partial * reach
    spread = grad.transpose(d, -1).unsqueeze(-2) * _conj(weights)
    return torch.sum(spread, -1).transpose(d, -1)


@derivative("logcumsumexp", "LogcumsumexpBackward0", saves=("self", "result", "dim"))
def _logcumsumexp(ctx, grad):
    # d out_j / d x_k = exp(x_k - out_j) for j >= k (masked pairs with j < k are dropped).
    x, d = ctx.self, ctx.dim
    if x.ndim == 0 or x.numel() == 0:
        return grad
    n = x.shape[d]
    xs, outs = x.transpose(d, -1), ctx.result.transpose(d, -1)
    reach = _red_triangle(n, lambda k, j: j >= k).to(x.dtype)
    weights = torch.exp((xs.unsqueeze(-1) - outs.unsqueeze(-2)) * reach) * reach
    spread = grad.transpose(d, -1).unsqueeze(-2) * weights
    return torch.sum(spread, -1).transpose(d, -1)


def _cumulative_extreme_row(op, node):
    @derivative(op, node, outputs=("values", "indices"), saves=("indices", "dim"),
                nondifferentiable_outputs=(1,))
    def _(ctx, grad, grad_indices=None):
        if grad is None:
            return None
        return _red_scatter_index(grad, ctx.indices, ctx.dim, ctx.shape(0))


_cumulative_extreme_row("cummax", "CummaxBackward0")
_cumulative_extreme_row("cummin", "CumminBackward0")


def _evenly_row(op, node):
    @derivative(op, node, saves=("self", "result", "dim", "keepdim"))
    def _(ctx, grad):
        return _red_evenly(grad, ctx.self, ctx.result, ctx.dim, ctx.keepdim)


for _op, _node in (("max", "MaxBackward1"), ("min", "MinBackward1"), ("amax", "AmaxBackward0"),
                   ("amin", "AminBackward0"), ("median", "MedianBackward0"),
                   ("nanmedian", "NanmedianBackward0")):
    _evenly_row(_op, _node)


def _selecting_row(op, node):
    @derivative(op, node, outputs=("values", "indices"), saves=("indices", "dim", "keepdim"),
                nondifferentiable_outputs=(1,))
    def _(ctx, grad, grad_indices=None):
        if grad is None:
            return None
        return _red_select(grad, ctx.indices, ctx.shape(0), ctx.dim, ctx.keepdim)


for _op, _node in (("max.dim", "MaxBackward0"), ("min.dim", "MinBackward0"),
                   ("median.dim", "MedianBackward1"), ("nanmedian.dim", "NanmedianBackward1"),
                   ("mode", "ModeBackward0")):
    _selecting_row(_op, _node)


@derivative("aminmax", "AminmaxBackward0", outputs=("min", "max"),
            saves=("self", "min", "max", "dim", "keepdim"))
def _aminmax(ctx, grad_min, grad_max):
    total = None
    for grad, value in ((grad_min, ctx.min), (grad_max, ctx.max)):
        if grad is not None:
            part = _red_evenly(grad, ctx.self, value, ctx.dim, ctx.keepdim)
            total = part if total is None else total + part
    return total


not_differentiable("argmax", "argmin", "all", "any", "count_nonzero", "unique",
                   "unique_consecutive")


def _quantile_row(op, ignore_nan):
    # PyTorch builds quantile from sort and gather (its node is the final squeeze); here the
    # op is one node whose gradient sends each output's gradient to the one or two order
    # statistics it interpolates, with the interpolation weights.
    @derivative(op, "QuantileBackward0" if not ignore_nan else "NanquantileBackward0",
                inputs=("self", "q"), saves=("self", "q", "dim", "keepdim", "interpolation"))
    def _(ctx, grad):
        from .._ops import structured
        from .._ops.reduction import QUANTILE_WEIGHTS
        x, q, dim, keepdim = ctx.self, ctx.q, ctx.dim, ctx.keepdim
        with torch.no_grad():
            weights = structured.run(QUANTILE_WEIGHTS, (x.detach(), q), {
                "dim": dim, "keepdim": keepdim, "interpolation": ctx.interpolation,
                "ignore_nan": ignore_nan})                 # (len(q), *x.shape)
        if not isinstance(q, tuple):
            grad = grad.unsqueeze(0)                       # one row per quantile
        dims = None if dim is None else (dim,)
        if not keepdim:
            for d in (range(x.ndim) if dims is None else dims):
                grad = grad.unsqueeze(d + 1)
        return torch.sum(grad * weights, 0), None


_quantile_row("quantile", False)
_quantile_row("nanquantile", True)



# --- indexing, slicing, joining, mutating ---------------------------------------------------
# Formulas pair each op with its adjoint (gather <-> scatter_add, index_select <-> index_add,
# index <-> index_put accumulate, take <-> put accumulate), so double backward works.

def _zeros_for(ctx, i, grad):
    return torch.zeros(ctx.shape(i), dtype=grad.dtype, device=grad.device)


def _sum_all(t):
    return t.sum_to_size(())


@derivative("cat", "CatBackward0", saves=("dim",))
def _cat(ctx, grad):
    grads, start = [], 0
    for i in range(len(ctx.needs_input_grad)):
        shape = ctx.shape(i)
        if shape == (0,) and grad.ndim != 1:  # skipped by cat (legacy empty tensor)
            grads.append(torch.zeros(shape, dtype=grad.dtype, device=grad.device))
            continue
        grads.append(grad.narrow(ctx.dim, start, shape[ctx.dim]))
        start += shape[ctx.dim]
    return tuple(grads)


@derivative("stack", "StackBackward0", saves=("dim",))
def _stack(ctx, grad):
    return grad.unbind(ctx.dim)


@derivative("gather", "GatherBackward0", inputs=("self", "index"), saves=("index", "dim"))
def _gather(ctx, grad):
    if ctx.shape(0) == () and grad.ndim == 0:
        return grad, None
    grad_self = _zeros_for(ctx, 0, grad).scatter_add(ctx.dim, ctx.index, grad)
    return grad_self, None


def _grad_src(grad, ctx):
    """gather(grad) laid into src's shape: src elements beyond the index's shape get 0."""
    picked = grad.gather(ctx.dim, ctx.index)
    shape = ctx.shape(2)
    if tuple(picked.shape) == tuple(shape) or not shape:
        return picked
    padded = torch.zeros(shape, dtype=grad.dtype, device=grad.device)
    padded[tuple(slice(0, n) for n in picked.shape)] = picked
    return padded


@derivative("scatter", "ScatterBackward0", inputs=("self", "index", "src"),
            saves=("index", "dim"))
def _scatter(ctx, grad):
    needs = ctx.needs_input_grad
    return (grad.scatter(ctx.dim, ctx.index, 0) if needs[0] else None, None,
            _grad_src(grad, ctx) if needs[2] else None)


@derivative("scatter_value", "ScatterBackward1", inputs=("self", "index", "value"),
            saves=("index", "dim"))
def _scatter_value(ctx, grad):
    return grad.scatter(ctx.dim, ctx.index, 0), None, None


@derivative("scatter_add", "ScatterAddBackward0", inputs=("self", "index", "src"),
            saves=("index", "dim"))
def _scatter_add(ctx, grad):
    needs = ctx.needs_input_grad
    return grad, None, _grad_src(grad, ctx) if needs[2] else None


@derivative("scatter_reduce", "ScatterReduceBackward0", inputs=("self", "index", "src"),
            saves=("self", "index", "src", "result", "dim", "reduce", "include_self"))
def _scatter_reduce(ctx, grad):
    dim, index, reduce = ctx.dim, ctx.index, ctx.reduce
    self, src, result = ctx.self, ctx.src, ctx.result
    hit = torch.zeros(ctx.shape(0), dtype=torch.bool, device=grad.device).scatter(
        dim, index, True) if not ctx.include_self else None
    if reduce == "sum":
        grad_self, grad_src = grad, grad.gather(dim, index)
    elif reduce == "mean":
        ones = torch.ones(ctx.shape(0), dtype=grad.dtype, device=grad.device)
        count = ones.scatter_add(dim, index, torch.ones_like(src))
        if not ctx.include_self:
            count = count - ones.masked_fill(~hit, 0)
        count = count.masked_fill(count == 0, 1)
        grad_self = grad / count
        grad_src = grad_self.gather(dim, index)
    elif reduce == "prod":
        # Every factor's derivative is the product of the others: result / factor
        # (inputs with zeros are not handled specially here).
        grad_self = grad * result / self
        grad_src = (grad * result).gather(dim, index) / src
    else:  # amax / amin: the gradient is shared equally by every element that attains it
        self_hit = (self == result).to(grad.dtype)
        if not ctx.include_self:
            self_hit = self_hit.masked_fill(hit, 0)
        src_hit = (src == result.gather(dim, index)).to(grad.dtype)
        count = self_hit.scatter_add(dim, index, src_hit)
        share = grad / count.masked_fill(count == 0, 1)
        grad_self = share * self_hit
        grad_src = share.gather(dim, index) * src_hit
    if not ctx.include_self:
        grad_self = grad_self.masked_fill(hit, 0)
    return grad_self, None, grad_src


@derivative("index_select", "IndexSelectBackward0", inputs=("self", "index"),
            saves=("index", "dim"))
def _index_select(ctx, grad):
    if ctx.shape(0) == ():
        return grad.sum_to_size(()), None
    return _zeros_for(ctx, 0, grad).index_add(ctx.dim, ctx.index, grad), None


@derivative("index_add", "IndexAddBackward0", inputs=("self", "index", "source"),
            saves=("index", "dim", "alpha"))
def _index_add(ctx, grad):
    grad_source = None
    if ctx.needs_input_grad[2]:
        grad_source = _selected(grad, ctx.dim, ctx.index, ctx.shape(2))
        if ctx.alpha != 1:
            grad_source = grad_source * ctx.alpha
    return grad, None, grad_source


def _selected(grad, dim, index, source_shape):
    """grad's slices at `index` along dim, shaped like the op's source."""
    if grad.ndim == 0:
        return grad.reshape(source_shape)
    return grad.index_select(dim, index).reshape(source_shape)


@derivative("index_copy", "IndexCopyBackward0", inputs=("self", "index", "source"),
            saves=("index", "dim"))
def _index_copy(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = grad.index_fill(ctx.dim, ctx.index, 0) if needs[0] else None
    grad_source = _selected(grad, ctx.dim, ctx.index, ctx.shape(2)) if needs[2] else None
    return grad_self, None, grad_source


@derivative("index_fill", lambda inputs, params: "IndexFillBackward1"
            if hasattr(inputs[2], "_shape") else "IndexFillBackward0",
            inputs=("self", "index", "value"), saves=("index", "dim"))
def _index_fill(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = grad.index_fill(ctx.dim, ctx.index, 0) if needs[0] else None
    grad_value = None
    if len(needs) > 2 and needs[2]:
        # Repeated indices fill a slot once: sum the filled slots, each counted once.
        grad_value = _sum_all(grad - grad.index_fill(ctx.dim, ctx.index, 0))
    return grad_self, None, grad_value


@derivative("index", "IndexBackward0", saves=("indices",))
def _index(ctx, grad):
    return _zeros_for(ctx, 0, grad).index_put(ctx.indices, grad, accumulate=True)


@derivative("index_put", "IndexPutBackward0", inputs=("self", "values"),
            saves=("indices", "accumulate"))
def _index_put(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = None
    if needs[0]:
        grad_self = grad if ctx.accumulate else grad.index_put(
            ctx.indices, torch.zeros((), dtype=grad.dtype, device=grad.device))
    grad_values = None
    if needs[1]:
        from reftorch._ops.joining import index as index_op
        grad_values = index_op(grad, list(ctx.indices))
        if grad_values.numel() == _numel(ctx.shape(1)):  # values had extra leading 1s
            grad_values = grad_values.reshape(ctx.shape(1))
    return grad_self, grad_values


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@derivative("masked_fill", lambda inputs, params: "MaskedFillBackward1"
            if hasattr(inputs[2], "_shape") else "MaskedFillBackward0",
            inputs=("self", "mask", "value"), saves=("mask",))
def _masked_fill(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = grad.masked_fill(ctx.mask, 0) if needs[0] else None
    grad_value = None
    if len(needs) > 2 and needs[2]:
        grad_value = _sum_all(grad.masked_select(ctx.mask))
    return grad_self, None, grad_value


@derivative("masked_select", "MaskedSelectBackward0", inputs=("self", "mask"),
            saves=("mask",))
def _masked_select(ctx, grad):
    shape = torch.broadcast_shapes(ctx.shape(0), ctx.mask.shape)
    zeros = torch.zeros(shape, dtype=grad.dtype, device=grad.device)
    return zeros.masked_scatter(ctx.mask, grad), None


@derivative("masked_scatter", "MaskedScatterBackward0", inputs=("self", "mask", "source"),
            saves=("mask",))
def _masked_scatter(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = grad.masked_fill(ctx.mask, 0) if needs[0] else None
    grad_source = None
    if needs[2]:
        picked = grad.masked_select(ctx.mask)
        numel = 1
        for s in ctx.shape(2):
            numel *= s
        rest = torch.zeros(numel - picked.numel(), dtype=grad.dtype, device=grad.device)
        grad_source = torch.cat([picked, rest]).reshape(ctx.shape(2))
    return grad_self, None, grad_source


@derivative("take", "TakeBackward0", inputs=("self", "index"), saves=("index",))
def _take(ctx, grad):
    return _zeros_for(ctx, 0, grad).put(ctx.index, grad, accumulate=True), None


@derivative("put", "PutBackward0", inputs=("self", "index", "source"),
            saves=("index", "accumulate"))
def _put(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = None
    if needs[0]:
        grad_self = grad if ctx.accumulate else grad.put(
            ctx.index, torch.zeros(ctx.shape(2), dtype=grad.dtype, device=grad.device))
    grad_source = grad.take(ctx.index).reshape(ctx.shape(2)) if needs[2] else None
    return grad_self, None, grad_source


@derivative("repeat", "RepeatBackward0", saves=("repeats",))
def _repeat(ctx, grad):
    repeats = ctx.repeats
    shape = (1,) * (len(repeats) - len(ctx.shape(0))) + tuple(ctx.shape(0))
    # Split each dim into (repeat, size), move the repeat axes first, and sum them away.
    split = [n for pair in zip(repeats, shape) for n in pair]
    order = list(range(0, 2 * len(shape), 2)) + list(range(1, 2 * len(shape), 2))
    summed = grad.reshape(split).permute(order).sum_to_size(shape)
    return summed.reshape(ctx.shape(0))


def _scatter_row(kind, node):
    @derivative(f"{kind}_scatter", node, inputs=("self", "src"),
                saves=("dim", "index", "start", "end", "step", "offset", "dim1", "dim2"))
    def _(ctx, grad):
        params = {k: getattr(ctx, k) for k in ("dim", "index", "start", "end", "step",
                                                 "offset", "dim1", "dim2")}
        from reftorch._ops.joining import _region
        needs = ctx.needs_input_grad
        grad_src = _region(grad, kind, params) if needs[1] else None
        grad_self = None
        if needs[0]:
            zeros = torch.zeros(ctx.shape(1), dtype=grad.dtype, device=grad.device)
            grad_self = getattr(torch, f"{kind}_scatter")(grad, zeros, **{
                k: v for k, v in params.items() if k in _SCATTER_PARAMS[kind]})
        return grad_self, grad_src


_SCATTER_PARAMS = {"select": ("dim", "index"), "slice": ("dim", "start", "end", "step"),
                   "diagonal": ("offset", "dim1", "dim2")}
for _kind, _node in (("select", "SelectScatterBackward0"), ("slice", "SliceScatterBackward0"),
                     ("diagonal", "DiagonalScatterBackward0")):
    _scatter_row(_kind, _node)

not_differentiable("nonzero", "scatter_reduce_two_")



# --- sorting, selection and comparison ------------------------------------------------------

# Sorting and selection pick elements by index: the gradient goes back to the picked places
# (`_scatter_along_dim`), whose own derivative reads them again (`_gather_along_dim`).

def _sorting_ops():
    from .._ops import sorting
    return sorting


@derivative("sort", "SortBackward0", saves=("indices", "dim"), outputs=("values", "indices"),
            nondifferentiable_outputs=(1,))
def _sort(ctx, grad_values, grad_indices=None):
    return _sorting_ops()._scatter_along_dim(grad_values, ctx.indices, ctx.dim, ctx.shape(0))


@derivative("topk", "TopkBackward0", saves=("indices", "dim"), outputs=("values", "indices"),
            nondifferentiable_outputs=(1,))
def _topk(ctx, grad_values, grad_indices=None):
    return _sorting_ops()._scatter_along_dim(grad_values, ctx.indices, ctx.dim, ctx.shape(0))


@derivative("kthvalue", "KthvalueBackward0", saves=("indices", "dim", "keepdim"),
            outputs=("values", "indices"), nondifferentiable_outputs=(1,))
def _kthvalue(ctx, grad_values, grad_indices=None):
    indices = ctx.indices
    if not ctx.keepdim and len(ctx.shape(0)) > 0:  # put back the reduced dim
        grad_values, indices = grad_values.unsqueeze(ctx.dim), indices.unsqueeze(ctx.dim)
    return _sorting_ops()._scatter_along_dim(grad_values, indices, ctx.dim, ctx.shape(0))


@derivative("_scatter_along_dim", "ScatterAlongDimBackward0", inputs=("self", "indices"),
            saves=("indices", "dim"))
def _scatter_along_dim(ctx, grad):
    return _sorting_ops()._gather_along_dim(grad, ctx.indices, ctx.dim), None


@derivative("_gather_along_dim", "GatherAlongDimBackward0", inputs=("self", "indices"),
            saves=("indices", "dim"))
def _gather_along_dim(ctx, grad):
    return _sorting_ops()._scatter_along_dim(grad, ctx.indices, ctx.dim, ctx.shape(0)), None


not_differentiable("argsort", "isclose", "equal", "isin", "searchsorted", "bucketize")



# --- other operations -----------------------------------------------------------------------

@derivative("flip", "FlipBackward0", saves=("dims",))
def _flip(ctx, grad):
    return torch.flip(grad, list(ctx.dims))


@derivative("roll", "RollBackward0", saves=("shifts", "dims"))
def _roll(ctx, grad):
    return torch.roll(grad, [-s for s in ctx.shifts], ctx.dims)


@derivative("rot90", "Rot90Backward0", saves=("k", "dims"))
def _rot90(ctx, grad):
    return torch.rot90(grad, -ctx.k, ctx.dims)


@derivative("tril", "TrilBackward0", saves=("diagonal",))
def _tril(ctx, grad):
    return torch.tril(grad, ctx.diagonal)


@derivative("triu", "TriuBackward0", saves=("diagonal",))
def _triu(ctx, grad):
    return torch.triu(grad, ctx.diagonal)


@derivative("diag_embed", "DiagEmbedBackward0", saves=("offset", "dim1", "dim2"))
def _diag_embed(ctx, grad):
    return grad.diagonal(ctx.offset, ctx.dim1, ctx.dim2)


@derivative("trace", "TraceBackward0")
def _trace(ctx, grad):
    rows, cols = ctx.shape(0)
    return grad * torch.eye(rows, cols, dtype=grad.dtype, device=grad.device)


@derivative("cross", "LinalgCrossBackward0", inputs=("self", "other"),
            saves=("self", "other", "dim"))
def _cross(ctx, grad):
    needs = ctx.needs_input_grad
    return (torch.cross(_conj(ctx.other), grad, dim=ctx.dim) if needs[0] else None,
            torch.cross(grad, _conj(ctx.self), dim=ctx.dim) if needs[1] else None)


# einsum: PyTorch decomposes einsum into permutes, views and bmm, so its graph shows those
# nodes; reftorch records one node, named "EinsumBackward0". Operands are variadic: the row
# names up to 52 of them (one per einsum label, the most an equation can use).
_EINSUM_INPUTS = tuple(f"operand{i}" for i in range(52))


@derivative("einsum", "EinsumBackward0", inputs=_EINSUM_INPUTS,
            saves=_EINSUM_INPUTS + ("equation",))
def _einsum(ctx, grad):
    from .._ops.other_ops import einsum_gradient
    count = len(ctx.needs_input_grad)
    operands = [getattr(ctx, name) for name in _EINSUM_INPUTS[:count]]
    return tuple(einsum_gradient(ctx.equation, operands, grad, k, ctx.shape(k))
                 if ctx.needs_input_grad[k] else None for k in range(count))


@derivative("block_diag", "BlockDiagBackward0", inputs=_EINSUM_INPUTS)
def _block_diag(ctx, grad):
    from .._ops.other_ops import block_diag_gradient
    count = len(ctx.needs_input_grad)
    return block_diag_gradient(grad, [ctx.shape(i) for i in range(count)])


# cdist, renorm and vander differentiate through NumPy kernels of their own (as PyTorch's
# _cdist_backward), so they support first derivatives only.
@derivative("cdist", "CdistBackward0", inputs=("x1", "x2"), saves=("x1", "x2", "result", "p"))
def _cdist(ctx, grad):
    from .._ops.other_ops import cdist_gradient
    return cdist_gradient(grad, ctx.x1, ctx.x2, ctx.result, ctx.p)


@derivative("renorm", "RenormBackward0", saves=("self", "p", "dim", "maxnorm"))
def _renorm(ctx, grad):
    from .._ops.other_ops import renorm_gradient
    return renorm_gradient(grad, ctx.self, ctx.p, ctx.dim, ctx.maxnorm)


@derivative("vander", "VanderBackward0", saves=("self", "N", "increasing"))
def _vander(ctx, grad):
    from .._ops.other_ops import vander_gradient
    return vander_gradient(grad, ctx.self, ctx.N, ctx.increasing)


not_differentiable("bincount", "histc", "histogram", "_cdist_backward", "_renorm_backward",
                   "_vander_backward")


# --- matrix products (BLAS) -----------------------------------------------------------------
# Rows for the primitive products; matmul, inner, outer/ger, chain_matmul and matrix_power are
# compositions of these (and views), so their graphs show these nodes. Complex gradients use
# conjugates: d(A @ B) gives grad @ B^H for A and A^H @ grad for B.

def _mH(t):
    """The conjugate transpose of the last two dims."""
    return _conj(t).transpose(-2, -1)


def _scaled(grad, factor):
    """grad * conj(factor), skipping the multiply for a factor of 1."""
    return grad if factor == 1 else grad * _conj_scalar(factor)


@derivative("mm", "MmBackward0", inputs=("self", "mat2"), saves=("self", "mat2"))
def _mm(ctx, grad):
    needs = ctx.needs_input_grad
    return (torch.mm(grad, _mH(ctx.mat2)) if needs[0] else None,
            torch.mm(_mH(ctx.self), grad) if needs[1] else None)


@derivative("bmm", "BmmBackward0", inputs=("self", "mat2"), saves=("self", "mat2"))
def _bmm(ctx, grad):
    needs = ctx.needs_input_grad
    return (torch.bmm(grad, _mH(ctx.mat2)) if needs[0] else None,
            torch.bmm(_mH(ctx.self), grad) if needs[1] else None)


@derivative("mv", "MvBackward0", inputs=("self", "vec"), saves=("self", "vec"))
def _mv(ctx, grad):
    needs = ctx.needs_input_grad
    return (torch.outer(grad, _conj(ctx.vec)) if needs[0] else None,
            torch.mv(_mH(ctx.self), grad) if needs[1] else None)


@derivative("dot", "DotBackward0", inputs=("self", "tensor"), saves=("self", "tensor"))
def _dot(ctx, grad):
    needs = ctx.needs_input_grad
    return (grad * _conj(ctx.tensor) if needs[0] else None,
            grad * _conj(ctx.self) if needs[1] else None)


@derivative("vdot", "VdotBackward0", inputs=("self", "other"), saves=("self", "other"))
def _vdot(ctx, grad):
    # vdot(a, b) = sum(conj(a) * b): a's gradient is conjugated once more.
    needs = ctx.needs_input_grad
    return (_conj(grad) * ctx.other if needs[0] else None,
            grad * ctx.self if needs[1] else None)


@derivative("addmm", "AddmmBackward0", inputs=("self", "mat1", "mat2"),
            saves=("mat1", "mat2", "beta", "alpha"))
def _addmm(ctx, grad):
    needs = ctx.needs_input_grad
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.mm(grad, _mH(ctx.mat2)), ctx.alpha) if needs[1] else None,
            _scaled(torch.mm(_mH(ctx.mat1), grad), ctx.alpha) if needs[2] else None)


@derivative("baddbmm", "BaddbmmBackward0", inputs=("self", "batch1", "batch2"),
            saves=("batch1", "batch2", "beta", "alpha"))
def _baddbmm(ctx, grad):
    needs = ctx.needs_input_grad
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.bmm(grad, _mH(ctx.batch2)), ctx.alpha) if needs[1] else None,
            _scaled(torch.bmm(_mH(ctx.batch1), grad), ctx.alpha) if needs[2] else None)


@derivative("addbmm", "AddbmmBackward0", inputs=("self", "batch1", "batch2"),
            saves=("batch1", "batch2", "beta", "alpha"))
def _addbmm(ctx, grad):
    # Every matrix of the batch received the same gradient (the sum's).
    needs = ctx.needs_input_grad
    batch = ctx.shape(1)[0]
    repeated = grad.unsqueeze(0).expand(batch, *grad.shape)
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.bmm(repeated, _mH(ctx.batch2)), ctx.alpha) if needs[1] else None,
            _scaled(torch.bmm(_mH(ctx.batch1), repeated), ctx.alpha) if needs[2] else None)


@derivative("addmv", "AddmvBackward0", inputs=("self", "mat", "vec"),
            saves=("mat", "vec", "beta", "alpha"))
def _addmv(ctx, grad):
    needs = ctx.needs_input_grad
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.outer(grad, _conj(ctx.vec)), ctx.alpha) if needs[1] else None,
            _scaled(torch.mv(_mH(ctx.mat), grad), ctx.alpha) if needs[2] else None)


@derivative("addr", "AddrBackward0", inputs=("self", "vec1", "vec2"),
            saves=("vec1", "vec2", "beta", "alpha"))
def _addr(ctx, grad):
    # addr promotes its operands, so the saved vectors are brought to the gradient's dtype.
    needs = ctx.needs_input_grad
    vec1, vec2 = (_conj(v).to(grad.dtype) for v in (ctx.vec1, ctx.vec2))
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.mv(grad, vec2), ctx.alpha) if needs[1] else None,
            _scaled(torch.mv(grad.t(), vec1), ctx.alpha) if needs[2] else None)


@derivative("_matrix_power_inverse", "LinalgInvExBackward0", saves=("result",))
def _matrix_power_inverse(ctx, grad):
    # d(A^-1) = -A^-1 dA A^-1, so A's gradient is -A^-H grad A^-H.
    inverse_h = _mH(ctx.result)
    return -torch.matmul(torch.matmul(inverse_h, grad), inverse_h)



# --- linear algebra (LAPACK) ----------------------------------------------------------------

# The formulas live next to the kernels (reftorch/_ops/linalg.py, `*_gradient`), written with
# reftorch ops so that they differentiate again.
def _la():
    from .._ops import linalg
    return linalg


@derivative("cholesky", "CholeskyBackward0", saves=("result", "upper"))
def _cholesky(ctx, grad):
    return _la().cholesky_gradient(grad, ctx.result, ctx.upper)


@derivative("cholesky_inverse", "CholeskyInverseBackward0", saves=("self", "result", "upper"))
def _cholesky_inverse(ctx, grad):
    return _la().cholesky_inverse_gradient(grad, ctx.self, ctx.result, ctx.upper)


@derivative("cholesky_solve", "CholeskySolveBackward0", inputs=("self", "input2"),
            saves=("input2", "result", "upper"))
def _cholesky_solve(ctx, grad):
    return _la().cholesky_solve_gradient(grad, ctx.input2, ctx.result, ctx.upper,
                                         ctx.needs_input_grad)


@derivative("inverse", "LinalgInvExBackward0", saves=("result",))
def _inverse(ctx, grad):
    return _la().inverse_gradient(grad, ctx.result)


@derivative("det", "LinalgDetBackward0", saves=("self", "result"))
def _det(ctx, grad):
    return _la().det_gradient(grad, ctx.self, ctx.result)


@derivative("slogdet", "LinalgSlogdetBackward0", outputs=("sign", "logabsdet"),
            saves=("self", "sign"))
def _slogdet(ctx, grad_sign, grad_logabsdet):
    return _la().slogdet_gradient(grad_sign, grad_logabsdet, ctx.self, ctx.sign)


@derivative("solve", "LinalgSolveExBackward0", inputs=("self", "A"), outputs=("solution", "LU"),
            saves=("A", "solution"), nondifferentiable_outputs=(1,))
def _solve(ctx, grad, _grad_lu):
    return _la().solve_gradient(grad, ctx.A, ctx.solution, ctx.needs_input_grad)


@derivative("triangular_solve", "TriangularSolveBackward0", inputs=("self", "A"),
            outputs=("solution", "cloned_coefficient"),
            saves=("A", "solution", "upper", "transpose", "unitriangular"))
def _triangular_solve(ctx, grad_x, grad_m):
    return _la().triangular_solve_gradient(grad_x, grad_m, ctx.A, ctx.solution, ctx.upper,
                                           ctx.transpose, ctx.unitriangular)


@derivative("qr", "LinalgQrBackward0", outputs=("Q", "R"), saves=("Q", "R", "some"))
def _qr(ctx, grad_q, grad_r):
    return _la().qr_gradient(grad_q, grad_r, ctx.shape(0), ctx.Q, ctx.R, ctx.some)


@derivative("svd", "LinalgSvdBackward0", outputs=("U", "S", "V"), saves=("U", "S", "V", "some"))
def _svd(ctx, grad_u, grad_s, grad_v):
    return _la().svd_gradient(grad_u, grad_s, grad_v, ctx.shape(0), ctx.U, ctx.S, ctx.V,
                              ctx.some)


# symeig and eig are gone from PyTorch: their rows carry the modern functions' node names.
@derivative("symeig", "LinalgEighBackward0", outputs=("eigenvalues", "eigenvectors"),
            saves=("eigenvalues", "eigenvectors"))
def _symeig(ctx, grad_values, grad_vectors):
    return _la().eigh_gradient(grad_values, grad_vectors, ctx.eigenvalues, ctx.eigenvectors)


@derivative("eig", "LinalgEigBackward0", outputs=("eigenvalues", "eigenvectors"),
            saves=("eigenvalues", "eigenvectors"))
def _eig(ctx, grad_values, grad_vectors):
    return _la().eig_gradient(grad_values, grad_vectors, ctx.eigenvalues, ctx.eigenvectors)


@derivative("pinverse", "LinalgPinvBackward0", saves=("self", "result"))
def _pinverse(ctx, grad):
    return _la().pinverse_gradient(grad, ctx.self, ctx.result)


@derivative("lu", "LinalgLuFactorExBackward0", outputs=("LU", "pivots", "infos"),
            saves=("LU", "pivots"), nondifferentiable_outputs=(1, 2))
def _lu(ctx, grad, _grad_pivots, _grad_infos):
    return _la().lu_gradient(grad, ctx.LU, ctx.pivots)


@derivative("lu_unpack", "LuUnpackBackward0", inputs=("LU_data", "LU_pivots"),
            outputs=("P", "L", "U"), nondifferentiable_outputs=(0,))
def _lu_unpack(ctx, _grad_p, grad_l, grad_u):
    return _la().lu_unpack_gradient(grad_l, grad_u, ctx.shape(0)), None


@derivative("lu_solve", "LinalgLuSolveBackward0", inputs=("self", "LU_data", "LU_pivots"),
            saves=("LU_data", "LU_pivots", "result"))
def _lu_solve(ctx, grad):
    return _la().lu_solve_gradient(grad, ctx.LU_data, ctx.LU_pivots, ctx.result,
                                   ctx.needs_input_grad)


@derivative("orgqr", "LinalgHouseholderProductBackward0", inputs=("self", "input2"),
            saves=("self", "input2"))
def _orgqr(ctx, grad):
    return _la().orgqr_gradient(grad, ctx.self, ctx.input2)


@derivative("ormqr", "OrmqrBackward0", inputs=("self", "input2", "input3"),
            saves=("self", "input2", "input3", "left", "transpose"))
def _ormqr(ctx, grad):
    return _la().ormqr_gradient(grad, ctx.self, ctx.input2, ctx.input3, ctx.left,
                                ctx.transpose)


@derivative("geqrf", "GeqrfBackward0", outputs=("a", "tau"))
def _geqrf(ctx, grad_a, grad_tau):
    raise RuntimeError("The derivative for 'geqrf' is not implemented.")


not_differentiable("gels", "pstrf", "matrix_rank")


# --- spectral ops ---------------------------------------------------------------------------

# Every transform scales by 1, 1/sqrt(n) or 1/n whatever its direction, so the adjoint of a
# transform is the transform in the other direction with the same scale: c2c <-> c2c, and
# r2c <-> c2r with the bookkeeping of the dropped half (zeros for r2c's adjoint; the bins
# that stand for two bins of the full spectrum count twice in c2r's adjoint).

@derivative("_fft_c2c", "FftC2CBackward0", saves=("dim", "normalization", "forward"))
def _fft_c2c(ctx, grad):
    from .._ops.spectral import fft_c2c
    return fft_c2c(grad, ctx.dim, ctx.normalization, not ctx.forward)


@derivative("_fft_r2c", "FftR2CBackward0", saves=("dim", "normalization", "onesided"))
def _fft_r2c(ctx, grad):
    from .._ops.spectral import fft_c2c, pad_with_zeros
    if ctx.onesided:
        last = ctx.dim[-1]
        grad = pad_with_zeros(grad, last, ctx.shape(0)[last])
    return fft_c2c(grad, ctx.dim, ctx.normalization, False).real


@derivative("_fft_c2r", "FftC2RBackward0", saves=("dim", "normalization", "last_dim_size"))
def _fft_c2r(ctx, grad):
    from .._ops.spectral import double_mirrored_bins, fft_r2c
    half = fft_r2c(grad, ctx.dim, ctx.normalization, True)
    return double_mirrored_bins(half, ctx.dim[-1], ctx.last_dim_size)


def _fft_with_size_node(inputs, params):
    if params["complex_input"] and params["complex_output"]:
        return "FftC2CBackward0"
    return "FftR2CBackward0" if params["complex_output"] else "FftC2RBackward0"


@derivative("_fft_with_size", _fft_with_size_node,
            saves=("signal_ndim", "complex_input", "complex_output", "inverse", "normalization",
                   "output_sizes"))
def _fft_with_size(ctx, grad):
    """The legacy real-pair transforms (torch.fft/ifft/rfft/irfft): the same adjoints, with
    the signal's last dim at -2 of a real-pair tensor."""
    from .._ops.spectral import double_mirrored_bins, fft_with_size, pad_with_zeros
    ndim, norm = ctx.signal_ndim, ctx.normalization
    if ctx.complex_input and ctx.complex_output:
        return fft_with_size(grad, ndim, True, True, not ctx.inverse, norm, False, ())
    if ctx.complex_output:          # rfft
        grad = pad_with_zeros(grad, grad.ndim - 2, ctx.shape(0)[-1])
        return fft_with_size(grad, ndim, True, True, True, norm, False, ()).select(-1, 0)
    half = fft_with_size(grad, ndim, False, True, False, norm, True, ())   # irfft
    half = double_mirrored_bins(half, half.ndim - 2, ctx.output_sizes[-1])
    return pad_with_zeros(half, half.ndim - 2, ctx.shape(0)[-2])



# --- random sampling ------------------------------------------------------------------------
# An in-place sampler overwrites its tensor: nothing flows back to the old values.
def _sampler_row(op, node):
    @derivative(op, node, inputs=("self",))
    def _(ctx, grad):
        return torch.zeros_like(grad)


for _op, _node in (("uniform_", "UniformBackward0"), ("normal_", "NormalBackward0"),
                   ("exponential_", "ExponentialBackward0"),
                   ("geometric_", "GeometricBackward0"), ("cauchy_", "CauchyBackward0"),
                   ("log_normal_", "LogNormalBackward0")):
    _sampler_row(_op, _node)


@derivative("random_", lambda inputs, params: f"RandomBackward{params.get('form', 0)}")
def _random(ctx, grad):
    return torch.zeros_like(grad)


@derivative("bernoulli_", lambda inputs, params: "BernoulliBackward1"
            if params.get("p_tensor") else "BernoulliBackward2")
def _bernoulli_inplace(ctx, grad):
    return torch.zeros_like(grad)


@derivative("bernoulli", "BernoulliBackward0")
def _bernoulli(ctx, grad):
    return torch.zeros_like(grad)


def _normal_node(inputs, params):
    mean_is_tensor, std_is_tensor = (hasattr(x, "_shape") for x in inputs)
    return "NormalBackward" + ("3" if mean_is_tensor and std_is_tensor else
                               "1" if mean_is_tensor else "2")


# PyTorch treats the samples as constants of mean and std (no reparameterization): zero
# gradients. Write mean + std * randn(...) for the reparameterized form.
@derivative("normal", _normal_node, inputs=("mean", "std"))
def _normal(ctx, grad):
    return tuple(torch.zeros(ctx.shape(i), dtype=ctx.dtype(i)) if needed else None
                 for i, needed in enumerate(ctx.needs_input_grad))


not_differentiable("randperm")
