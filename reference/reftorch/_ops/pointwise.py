"""Pointwise arithmetic, comparison and bitwise ops: reference kernels and declarations.

Each reference kernel is a NumPy function over arrays already cast to the op's computation
dtype (see elementwise.py); a comment marks every place PyTorch departs from NumPy.
"""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._promotion import Promotion, scalar_dtype
from .._tensor import Tensor
from .elementwise import apply, as_operand, declare

INTEGRAL = {D.uint8, D.int8, D.int16, D.int32, D.int64}
INTEGRAL_AND_BOOL = INTEGRAL | {D.bool}
REAL = INTEGRAL_AND_BOOL | {D.float16, D.bfloat16, D.float32, D.float64}
NON_BOOL = set(D.ALL_DTYPES) - {D.bool}
NUMERIC = set(D.ALL_DTYPES)


def _is_integral(a):
    return a.dtype.kind in "iub"


def _check_no_integer_division_by_zero(b):
    # PyTorch raises where NumPy would warn and return 0.
    if _is_integral(b) and not b.all():
        raise RuntimeError("ZeroDivisionError")


# --- arithmetic -------------------------------------------------------------------------------

def add(a, b, alpha=1):
    """input + alpha * other."""
    return a + b if alpha == 1 else a + _scaled(b, alpha)


def sub(a, b, alpha=1):
    """input - alpha * other."""
    return a - b if alpha == 1 else a - _scaled(b, alpha)


def _scaled(b, alpha):
    # alpha is cast to the computation dtype first, as PyTorch does.
    return b * np.asarray(alpha).astype(b.dtype)


def mul(a, b):
    """input * other; for bool inputs this is logical and."""
    return np.logical_and(a, b) if a.dtype == np.bool_ else a * b


def div(a, b, rounding_mode=None):
    """True division, or rounded toward zero ('trunc') or toward -inf ('floor')."""
    if rounding_mode is None:
        return np.true_divide(a, b)
    if rounding_mode == "trunc":
        if _is_integral(a):
            _check_no_integer_division_by_zero(b)
            quotient = np.floor_divide(a, b)
            # floor and trunc differ when the signs differ and the division is inexact.
            return quotient + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))
        return np.trunc(np.true_divide(a, b))
    if rounding_mode == "floor":
        return floor_divide(a, b)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                       f"found '{rounding_mode}'")


def _div_promotion(params):
    mode = params.get("rounding_mode")
    if mode is None:
        return Promotion.INT_TO_FLOAT
    # PyTorch rounds a half-type quotient to its dtype before truncating it.
    return Promotion.NO_OPMATH if mode == "trunc" else Promotion.DEFAULT


def floor_divide(a, b):
    """Division rounded toward -inf (Python's //)."""
    _check_no_integer_division_by_zero(b)
    return np.floor_divide(a, b)


def remainder(a, b):
    """Python's %: the result takes the sign of the divisor."""
    _check_no_integer_division_by_zero(b)
    return np.remainder(a, b)


def pow(a, b):  # noqa: A001
    """input ** exponent."""
    if _is_integral(a) and a.dtype != np.bool_:
        return _integer_pow(a, b)
    return np.power(a, b)


def _integer_pow(a, b):
    # NumPy refuses negative integer exponents; PyTorch gives 1 for base 1, +-1 for base -1,
    # and 0 for every other base (the exact result truncated toward zero).
    negative = b < 0
    if not negative.any():
        return np.power(a, b)
    safe = np.power(a, np.where(negative, 0, b))
    odd = (b % 2) != 0
    small = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(a.dtype)
    return np.where(negative, small, safe)


def neg(a):
    """-input."""
    return np.negative(a)


def positive(a):
    """+input: the input itself (reftorch.positive returns the tensor, not a copy)."""
    return a


def abs(a):  # noqa: A001
    """|input|; the magnitude for complex input."""
    return np.abs(a)


# --- comparison -------------------------------------------------------------------------------

def eq(a, b):
    return np.equal(a, b)


def ne(a, b):
    return np.not_equal(a, b)


def lt(a, b):
    return np.less(a, b)


def le(a, b):
    return np.less_equal(a, b)


def gt(a, b):
    return np.greater(a, b)


def ge(a, b):
    return np.greater_equal(a, b)


# --- bitwise ----------------------------------------------------------------------------------

def bitwise_and(a, b):
    return np.bitwise_and(a, b)


def bitwise_or(a, b):
    return np.bitwise_or(a, b)


def bitwise_xor(a, b):
    return np.bitwise_xor(a, b)


def bitwise_not(a):
    return np.logical_not(a) if a.dtype == np.bool_ else np.invert(a)


def bitwise_left_shift(a, b):
    # Shifting by the bit width or more, or by a negative amount, gives 0 in PyTorch.
    bits = a.dtype.itemsize * 8
    in_range = (b >= 0) & (b < bits)
    shifted = np.left_shift(a, np.where(in_range, b, 0).astype(a.dtype))
    return np.where(in_range, shifted, 0).astype(a.dtype)


def bitwise_right_shift(a, b):
    # Too-large shifts fill with the sign bit (arithmetic shift), as PyTorch does.
    bits = a.dtype.itemsize * 8
    amount = np.where((b < 0) | (b >= bits), bits - 1, b).astype(a.dtype)
    shifted = np.right_shift(a, amount)
    if a.dtype.kind == "u":
        shifted = np.where((b < 0) | (b >= bits), 0, shifted).astype(a.dtype)
    return shifted


# --- argument rules PyTorch enforces before computing -----------------------------------------

def _operand_dtypes(operands):
    return [x.dtype if hasattr(x, "dtype") else scalar_dtype(x) for x in operands]


def _check_alpha(common, params, operands=(), inplace=False):
    if "alpha" not in params:       # the default alpha=1 suits every dtype
        return
    alpha = params["alpha"]
    if common.category <= D.Category.INTEGER and isinstance(alpha, float):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")
    if isinstance(alpha, bool) and common is not D.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")


def _check_sub(common, params, operands, inplace):
    kinds = _operand_dtypes(operands)
    if all(d is D.bool for d in kinds):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if any(d is D.bool for d in kinds):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not "
                           "supported. If you are trying to invert a mask, use the `~` or "
                           "`logical_not()` operator instead.")
    _check_alpha(common, params)


def _check_neg(common, params, operands, inplace):
    if common is D.bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If "
                           "you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")


def _check_positive(common, params, operands, inplace):
    if common is D.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")


def _check_div(common, params, operands, inplace):
    mode = params.get("rounding_mode")
    if mode is not None and (common is D.bool or common.is_complex):
        raise NotImplementedError(f"\"div_{mode}_cpu\" not implemented for "
                                  f"'{common.scalar_name}'")


def _check_abs(common, params, operands, inplace):
    if inplace and common.is_complex:
        raise RuntimeError("In-place abs is not supported for complex tensors.")


def _check_pow(common, params, operands, inplace):
    # A bool base works only with a Python-number exponent (PyTorch's tensor-scalar path).
    if common is D.bool and all(hasattr(x, "dtype") for x in operands):
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    # An integer result with a negative Python-int exponent is refused outright; a tensor of
    # negative exponents instead gives 0 or +-1 per element (see _integer_pow).
    exponent = operands[1]
    if common.category <= D.Category.INTEGER and type(exponent) is int and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")


# --- declarations: the one place each op is named --------------------------------------------

ADD = declare("add", add, params={"alpha": 1}, check=_check_alpha)
SUB = declare("sub", sub, params={"alpha": 1}, check=_check_sub)
MUL = declare("mul", mul)
DIV = declare("div", div, promotion=Promotion.INT_TO_FLOAT, params={"rounding_mode": None},
              promotion_rule=_div_promotion, check=_check_div)
FLOOR_DIVIDE = declare("floor_divide", floor_divide, dtypes=REAL - {D.bool})
REMAINDER = declare("remainder", remainder, dtypes=REAL - {D.bool})
POW = declare("pow", pow, check=_check_pow, number_params=(1,))
NEG = declare("neg", neg, check=_check_neg)
POSITIVE = declare("positive", positive, check=_check_positive)
ABS = declare("abs", abs, promotion=Promotion.COMPLEX_TO_FLOAT, dtypes=NON_BOOL,
              check=_check_abs)
EQ = declare("eq", eq, promotion=Promotion.ALWAYS_BOOL)
NE = declare("ne", ne, promotion=Promotion.ALWAYS_BOOL)
LT = declare("lt", lt, promotion=Promotion.ALWAYS_BOOL, dtypes=REAL)
LE = declare("le", le, promotion=Promotion.ALWAYS_BOOL, dtypes=REAL)
GT = declare("gt", gt, promotion=Promotion.ALWAYS_BOOL, dtypes=REAL)
GE = declare("ge", ge, promotion=Promotion.ALWAYS_BOOL, dtypes=REAL)
BITWISE_AND = declare("bitwise_and", bitwise_and, dtypes=INTEGRAL_AND_BOOL)
BITWISE_OR = declare("bitwise_or", bitwise_or, dtypes=INTEGRAL_AND_BOOL)
BITWISE_XOR = declare("bitwise_xor", bitwise_xor, dtypes=INTEGRAL_AND_BOOL)
BITWISE_NOT = declare("bitwise_not", bitwise_not, dtypes=INTEGRAL_AND_BOOL)
BITWISE_LEFT_SHIFT = declare("bitwise_left_shift", bitwise_left_shift, dtypes=INTEGRAL)
BITWISE_RIGHT_SHIFT = declare("bitwise_right_shift", bitwise_right_shift, dtypes=INTEGRAL)


# =============================================================================================
# Pointwise math: the rest of the documentation's "Pointwise Ops" section.
# =============================================================================================

FLOATING = {D.float16, D.bfloat16, D.float32, D.float64}
COMPLEX = {D.complex64, D.complex128}
FLOATING_AND_COMPLEX = FLOATING | COMPLEX
REAL_NON_BOOL = REAL - {D.bool}


def _unless_integral(fn):
    """Rounding leaves integers as they are (a copy); NumPy would return floats."""
    def rounded(a, **params):
        return a.copy() if _is_integral(a) else fn(a, **params)
    rounded.__name__ = fn.__name__
    rounded.__doc__ = fn.__doc__
    return rounded


# --- unary floating functions (integer input computes in the default float dtype) ----------

def sigmoid(a):
    """1 / (1 + exp(-x)); exp overflowing to inf gives exactly 0, as in PyTorch."""
    return 1 / (1 + np.exp(-a))


def tanh_backward(grad, y):
    """The gradient of tanh from its output y: grad * (1 - y^2), conjugated for complex
    (PyTorch's tanh_backward; TanhBackward0 calls it)."""
    return grad * _conj_if_complex(1 - y * y)


def sigmoid_backward(grad, y):
    """The gradient of sigmoid from its output y: grad * (y (1 - y)), conjugated for complex
    (PyTorch's sigmoid_backward; SigmoidBackward0 calls it)."""
    return grad * _conj_if_complex(y * (1 - y))


def _conj_if_complex(a):
    return np.conj(a) if a.dtype.kind == "c" else a


def logit(a, eps=None):
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    if eps is not None:
        a = np.clip(a, eps, 1 - eps)
    return np.log(a / (1 - a))


def rsqrt(a):
    return 1 / np.sqrt(a)


def reciprocal(a):
    return 1 / a


def deg2rad(a):
    return a * (np.pi / 180)


def rad2deg(a):
    return a * (180 / np.pi)


def angle(a):
    """The argument of a complex number; for real input 0 (x >= 0), pi (x < 0), nan (nan)."""
    if a.dtype.kind == "c":
        return np.angle(a)
    return np.where(np.isnan(a), a, np.where(a < 0, np.pi, 0.0)).astype(a.dtype)


# --- rounding ----------------------------------------------------------------------------

ceil = _unless_integral(np.ceil)
floor = _unless_integral(np.floor)
trunc = _unless_integral(np.trunc)


def round(a, decimals=0):  # noqa: A001
    """Round half to even; with decimals, scale by 10**decimals first (as PyTorch does)."""
    if decimals == 0:
        return np.rint(a)
    # PyTorch multiplies by ten_pow for decimals > 0 and divides for decimals < 0, so that
    # the scale factor itself is exact.
    scale = np.asarray(10.0 ** builtins_abs(decimals), dtype=a.dtype)
    if decimals > 0:
        return np.rint(a * scale) / scale
    return np.rint(a / scale) * scale


def builtins_abs(x):
    return x if x >= 0 else -x


def frac(a):
    """x - trunc(x), keeping the sign of x."""
    return a - np.trunc(a)


def sign(a):
    """-1, 0 or 1; PyTorch's sign of nan is 0 (NumPy's is nan)."""
    if a.dtype == np.bool_:
        return a.copy()
    if a.dtype.kind == "f":
        return np.where(np.isnan(a), 0, np.sign(a)).astype(a.dtype)
    return np.sign(a)


def sgn(a):
    """x / |x| for complex x (0 at 0); sign(x) for real x."""
    if a.dtype.kind != "c":
        return sign(a)
    magnitude = np.abs(a)
    return np.where(magnitude == 0, 0, a / np.where(magnitude == 0, 1, magnitude))


def signbit(a):
    """True where the sign bit is set: -0.0 and negative nan included."""
    if _is_integral(a):
        return a < 0
    return np.signbit(a)


def conj_physical(a):
    return np.conj(a) if a.dtype.kind == "c" else a.copy()


def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    """Replace nan, +inf and -inf; infinities default to the dtype's largest finite values."""
    if a.dtype.kind in "iub":
        return a.copy()
    if a.dtype.kind == "c":
        parts = [nan_to_num(p, nan, posinf, neginf) for p in (a.real, a.imag)]
        return parts[0] + 1j * parts[1]
    big = _finfo(a.dtype).max
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    out = np.where(np.isnan(a), np.asarray(nan).astype(a.dtype), a)
    out = np.where(np.isposinf(a), np.asarray(posinf).astype(a.dtype), out)
    return np.where(np.isneginf(a), np.asarray(neginf).astype(a.dtype), out).astype(a.dtype)


def _finfo(numpy_dtype):
    try:
        return np.finfo(numpy_dtype)
    except ValueError:  # bfloat16 lives in ml_dtypes
        import ml_dtypes
        return ml_dtypes.finfo(numpy_dtype)


# --- classification and logic (bool results) -----------------------------------------------

def isnan(a):
    return np.isnan(a) if a.dtype.kind in "fc" else np.zeros(a.shape, bool)


def isinf(a):
    return np.isinf(a) if a.dtype.kind in "fc" else np.zeros(a.shape, bool)


def isposinf(a):
    return np.isposinf(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)


def isneginf(a):
    return np.isneginf(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)


def isfinite(a):
    return np.isfinite(a) if a.dtype.kind in "fc" else np.ones(a.shape, bool)


def isreal(a):
    """True where the imaginary part is 0 (always, for real dtypes)."""
    return a.imag == 0 if a.dtype.kind == "c" else np.ones(a.shape, bool)


def logical_not(a):
    return np.logical_not(a)


def logical_and(a, b):
    return np.logical_and(a, b)


def logical_or(a, b):
    return np.logical_or(a, b)


def logical_xor(a, b):
    return np.logical_xor(a, b)


# --- binary math ---------------------------------------------------------------------------

def atan2(a, b):
    return np.arctan2(a, b)


def hypot(a, b):
    return np.hypot(a, b)


def logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow; complex input uses the same shifted form."""
    if a.dtype.kind != "c":
        return np.logaddexp(a, b)
    a, b = np.broadcast_arrays(a, b)
    larger = np.where(a.real >= b.real, a, b)
    smaller = np.where(a.real >= b.real, b, a)
    return larger + np.log1p(np.exp(smaller - larger))


def logaddexp2(a, b):
    return np.logaddexp2(a, b)


def copysign(a, b):
    return np.copysign(a, b)


def heaviside(a, values):
    """0 for x < 0, `values` at x == 0, 1 for x > 0 (nan counts as not positive)."""
    return np.where(a == 0, values, a > 0).astype(np.result_type(a, values))


def maximum(a, b):
    return np.maximum(a, b)  # propagates nan, as PyTorch does


def minimum(a, b):
    return np.minimum(a, b)


def fmax(a, b):
    return np.fmax(a, b)  # prefers the number over nan


def fmin(a, b):
    return np.fmin(a, b)


def xlogy(a, b):
    """a * log(b), defined as 0 where a == 0 (unless b is nan)."""
    product = a * np.log(b)
    return np.where((a == 0) & ~np.isnan(b), 0, product).astype(product.dtype)


def ldexp(a, b):
    """a * 2 ** b."""
    return a * np.exp2(b)


def nextafter(a, b):
    return np.nextafter(a, b)


def fmod(a, b):
    """C's fmod: the remainder takes the sign of the dividend (remainder's takes the divisor's)."""
    _check_no_integer_division_by_zero(b)
    return np.fmod(a, b)


def gcd(a, b):
    return np.gcd(a, b)


def lcm(a, b):
    return np.lcm(a, b)


# --- ternary -------------------------------------------------------------------------------

def clamp(a, low, high):
    """min(max(x, low), high): nan in any operand gives nan; low > high gives high."""
    return np.minimum(np.maximum(a, low), high)


def clamp_min(a, low):
    return np.maximum(a, low)


def clamp_max(a, high):
    return np.minimum(a, high)


def lerp(a, end, weight):
    """a + weight * (end - a), computed from the nearer end for accuracy (PyTorch's form)."""
    difference = end - a
    if np.ndim(weight) == 0:       # one weight (the common case): compute only its branch
        return a + weight * difference if abs(weight) < 0.5 else \
            end - difference * (1 - weight)
    near_start = np.abs(weight) < 0.5
    return np.where(near_start, a + weight * difference, end - difference * (1 - weight))


def addcmul(a, t1, t2, value=1):
    """input + value * tensor1 * tensor2, value cast to the computation dtype first."""
    return a + np.asarray(value).astype(t1.dtype) * t1 * t2


def addcdiv(a, t1, t2, value=1):
    return a + np.asarray(value).astype(t1.dtype) * (t1 / t2)


def where(condition, a, b):
    return np.where(condition != 0, a, b)


# --- argument rules ------------------------------------------------------------------------

def _tensors_only(argument):
    """Overloads that take no Python number for `argument` (PyTorch: a TypeError)."""
    def check(common, params, operands, inplace):
        for i, x in enumerate(operands):
            if not hasattr(x, "_shape"):
                raise TypeError(f"argument '{argument}' (position {i + 1}) must be Tensor, "
                                f"not {type(x).__name__}")
    return check


def _check_no_complex(what):
    def check(common, params, operands, inplace):
        if common.is_complex:
            raise RuntimeError(f"{what} is not supported for complex tensors.")
    return check


def _all_checks(*checks):
    def check(common, params, operands, inplace):
        for c in checks:
            c(common, params, operands, inplace)
    return check


def _check_heaviside(common, params, operands, inplace):
    _tensors_only("values")(common, params, operands, inplace)
    if common.is_complex:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if operands[0].dtype is not operands[1].dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different "
                           "dtypes.")


def _check_no_complex_max(common, params, operands, inplace):
    _tensors_only("other")(common, params, operands, inplace)
    if common.is_complex:
        raise RuntimeError("maximum/minimum not implemented for complex tensors.")


def _check_clamp(common, params, operands, inplace):
    if common.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    # Bool bounds work only as tensors given to clamp_min/clamp_max (PyTorch's kernels).
    if common is D.bool and (len(operands) == 3 or not hasattr(operands[1], "_shape")):
        raise NotImplementedError("\"clamp_cpu\" not implemented for 'Bool'")


def _check_lerp(common, params, operands, inplace):
    base = operands[0].dtype
    if base not in FLOATING_AND_COMPLEX:
        raise NotImplementedError(f"\"lerp_kernel_scalar\" not implemented for "
                                  f"'{base.scalar_name}'")
    for name, x in zip(("end", "weight"), operands[1:]):
        if hasattr(x, "_shape") and x.dtype is not base:
            raise RuntimeError(f"expected dtype {base.name} for `{name}` but got dtype "
                               f"{x.dtype.name}")


def _check_addcmul(common, params, operands, inplace):
    value = params.get("value", 1)
    # A float value with integer tensors is accepted and truncated (PyTorch casts it).
    if isinstance(value, complex) and not common.is_complex:
        raise RuntimeError("value cannot be converted to type without overflow")


def _check_addcdiv(common, params, operands, inplace):
    if all(x.dtype.category <= D.Category.INTEGER for x in operands[1:]):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a "
                           "future  release addcdiv will perform a true division of tensor1 "
                           "and tensor2. The historic addcdiv behavior can be implemented as "
                           "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) "
                           "for integer inputs and as (input + value * tensor1 / tensor2) for "
                           "float inputs. The future addcdiv behavior is just the latter "
                           "implementation: (input + value * tensor1 / tensor2), for all "
                           "dtypes.")


def _check_round(common, params, operands, inplace):
    if params.get("decimals", 0) != 0 and common.category <= D.Category.INTEGER:
        raise NotImplementedError(f"\"round_cpu\" not implemented for "
                                  f"'{common.scalar_name}'")


def _check_where(common, params, operands, inplace):
    condition = operands[0]
    if condition.dtype is not D.bool:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {condition.dtype.scalar_name}")


# --- declarations --------------------------------------------------------------------------

def _float_unary(name, fn, dtypes=NUMERIC, check=None, like_input=False):
    """A unary function of the reals/complex: integer and bool input give the default float."""
    return declare(name, fn, promotion=Promotion.INT_TO_FLOAT, dtypes=dtypes, check=check,
                   like_input=like_input)


ACOS = _float_unary("acos", np.arccos)
ASIN = _float_unary("asin", np.arcsin)
ATAN = _float_unary("atan", np.arctan)
ACOSH = _float_unary("acosh", np.arccosh)
ASINH = _float_unary("asinh", np.arcsinh)
ATANH = _float_unary("atanh", np.arctanh)
COS = _float_unary("cos", np.cos)
COSH = _float_unary("cosh", np.cosh)
SIN = _float_unary("sin", np.sin)
SINH = _float_unary("sinh", np.sinh)
TAN = _float_unary("tan", np.tan)
TANH = _float_unary("tanh", np.tanh)
EXP = _float_unary("exp", np.exp)
EXP2 = _float_unary("exp2", np.exp2)
EXPM1 = _float_unary("expm1", np.expm1)
LOG = _float_unary("log", np.log)
LOG10 = _float_unary("log10", np.log10)
LOG1P = _float_unary("log1p", np.log1p)
LOG2 = _float_unary("log2", np.log2)
SIGMOID = _float_unary("sigmoid", sigmoid)
# The backward ops of tanh and sigmoid (PyTorch's names): one op, so a plugin can fuse it.
# Half types compute in float32 and round once, as PyTorch's kernels do.
TANH_BACKWARD = declare("tanh_backward", tanh_backward, dtypes=FLOATING_AND_COMPLEX)
SIGMOID_BACKWARD = declare("sigmoid_backward", sigmoid_backward, dtypes=FLOATING_AND_COMPLEX)
RECIPROCAL = _float_unary("reciprocal", reciprocal)
RSQRT = _float_unary("rsqrt", rsqrt)
SQRT = _float_unary("sqrt", np.sqrt)
LOGIT = declare("logit", logit, promotion=Promotion.INT_TO_FLOAT, params={"eps": None},
                dtypes=REAL)
DEG2RAD = _float_unary("deg2rad", deg2rad, check=_check_no_complex("deg2rad"), like_input=True)
RAD2DEG = _float_unary("rad2deg", rad2deg, check=_check_no_complex("rad2deg"), like_input=True)
# angle of integer input is a float (the public function converts it first); of complex
# input, the real type.
ANGLE = declare("angle", angle, promotion=Promotion.COMPLEX_TO_FLOAT)

CEIL = declare("ceil", ceil, dtypes=REAL_NON_BOOL)
FLOOR = declare("floor", floor, dtypes=REAL_NON_BOOL)
TRUNC = declare("trunc", trunc, dtypes=REAL_NON_BOOL)
ROUND = declare("round", _unless_integral(round), params={"decimals": 0},
                dtypes=REAL_NON_BOOL, check=_check_round)
FRAC = declare("frac", frac, dtypes=FLOATING)
SIGN = declare("sign", sign, dtypes=REAL)
SGN = declare("sgn", sgn)
SIGNBIT = declare("signbit", signbit, promotion=Promotion.ALWAYS_BOOL, dtypes=REAL)
CONJ_PHYSICAL = declare("conj_physical", conj_physical)
# nan_to_num replaces infinities with the largest finite value of the result dtype itself,
# so half types must not compute in float32.
NAN_TO_NUM = declare("nan_to_num", nan_to_num, promotion=Promotion.NO_OPMATH,
                     params={"nan": 0.0, "posinf": None, "neginf": None}, like_input=True)

ISNAN = declare("isnan", isnan, promotion=Promotion.ALWAYS_BOOL)
ISINF = declare("isinf", isinf, promotion=Promotion.ALWAYS_BOOL)
ISPOSINF = declare("isposinf", isposinf, promotion=Promotion.ALWAYS_BOOL,
                   check=_check_no_complex("isposinf"))
ISNEGINF = declare("isneginf", isneginf, promotion=Promotion.ALWAYS_BOOL,
                   check=_check_no_complex("isneginf"))
ISFINITE = declare("isfinite", isfinite, promotion=Promotion.ALWAYS_BOOL)
ISREAL = declare("isreal", isreal, promotion=Promotion.ALWAYS_BOOL)
LOGICAL_NOT = declare("logical_not", logical_not, promotion=Promotion.ALWAYS_BOOL)
LOGICAL_AND = declare("logical_and", logical_and, promotion=Promotion.ALWAYS_BOOL,
                      check=_tensors_only("other"))
LOGICAL_OR = declare("logical_or", logical_or, promotion=Promotion.ALWAYS_BOOL,
                     check=_tensors_only("other"))
LOGICAL_XOR = declare("logical_xor", logical_xor, promotion=Promotion.ALWAYS_BOOL,
                      check=_tensors_only("other"))

ATAN2 = declare("atan2", atan2, promotion=Promotion.INT_TO_FLOAT, dtypes=REAL,
                check=_tensors_only("other"))
HYPOT = declare("hypot", hypot, dtypes=FLOATING, check=_tensors_only("other"))
LOGADDEXP = declare("logaddexp", logaddexp, dtypes=FLOATING_AND_COMPLEX,
                    check=_tensors_only("other"))
LOGADDEXP2 = declare("logaddexp2", logaddexp2, dtypes=FLOATING, check=_tensors_only("other"))
COPYSIGN = declare("copysign", copysign, promotion=Promotion.INT_TO_FLOAT, dtypes=REAL)
HEAVISIDE = declare("heaviside", heaviside, check=_check_heaviside)
MAXIMUM = declare("maximum", maximum, check=_check_no_complex_max)
MINIMUM = declare("minimum", minimum, check=_check_no_complex_max)
FMAX = declare("fmax", fmax, check=_check_no_complex_max)
FMIN = declare("fmin", fmin, check=_check_no_complex_max)
XLOGY = declare("xlogy", xlogy, promotion=Promotion.INT_TO_FLOAT, dtypes=REAL)
LDEXP = declare("ldexp", ldexp, promotion=Promotion.INT_TO_FLOAT, check=_tensors_only("other"))
# The next representable value must be taken in the dtype itself, not in float32.
NEXTAFTER = declare("nextafter", nextafter, promotion=Promotion.NO_OPMATH, dtypes=FLOATING,
                    check=_tensors_only("other"))
FMOD = declare("fmod", fmod, dtypes=REAL_NON_BOOL)
GCD = declare("gcd", gcd, dtypes=INTEGRAL, check=_tensors_only("other"))
LCM = declare("lcm", lcm, dtypes=INTEGRAL, check=_tensors_only("other"))

CLAMP = declare("clamp", clamp, check=_check_clamp, number_params=(1, 2))
CLAMP_MIN = declare("clamp_min", clamp_min, check=_check_clamp, number_params=(1,))
CLAMP_MAX = declare("clamp_max", clamp_max, check=_check_clamp, number_params=(1,))
LERP = declare("lerp", lerp, dtypes=FLOATING_AND_COMPLEX, check=_check_lerp,
               number_params=(2,))
ADDCMUL = declare("addcmul", addcmul, params={"value": 1}, dtypes=NON_BOOL,
                  check=_check_addcmul)
ADDCDIV = declare("addcdiv", addcdiv, params={"value": 1}, dtypes=NON_BOOL,
                  check=_check_addcdiv)
WHERE = declare("where", where, check=_check_where)


# =============================================================================================
# Public forms that need argument parsing beyond `variants` (overloads, optional operands)
# =============================================================================================

def _tensor_arg(fn_name, x, name="input", position=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn_name}(): argument '{name}' (position {position}) must be Tensor, "
                        f"not {type(x).__name__}")
    return x


def _number_or_tensor(fn_name, x, name):
    try:
        return as_operand(x, fn_name)
    except TypeError:
        raise TypeError(f"{fn_name}(): argument '{name}' must be Number or Tensor, not "
                        f"{type(x).__name__}") from None


def logit_fn(input, eps=None, *, out=None):
    return apply(LOGIT, (_tensor_arg("logit", input),), out=out, params={"eps": eps})


def logit_method(self, eps=None):
    return apply(LOGIT, (self,), params={"eps": eps})


def logit_inplace(self, eps=None):
    return apply(LOGIT, (self,), out=self, inplace=True, params={"eps": eps})


def nan_to_num_fn(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    params = {"nan": nan, "posinf": posinf, "neginf": neginf}
    return apply(NAN_TO_NUM, (_tensor_arg("nan_to_num", input),), out=out, params=params)


def nan_to_num_method(self, nan=0.0, posinf=None, neginf=None):
    return nan_to_num_fn(self, nan, posinf, neginf)


def nan_to_num_inplace(self, nan=0.0, posinf=None, neginf=None):
    params = {"nan": nan, "posinf": posinf, "neginf": neginf}
    return apply(NAN_TO_NUM, (self,), out=self, inplace=True, params=params)


def round_fn(input, *, decimals=0, out=None):
    return apply(ROUND, (_tensor_arg("round", input),), out=out,
                  params={"decimals": decimals})


def round_method(self, decimals=0):
    return apply(ROUND, (self,), params={"decimals": decimals})


def round_inplace(self, decimals=0):
    return apply(ROUND, (self,), out=self, inplace=True, params={"decimals": decimals})


def angle_fn(input, *, out=None):
    """The angle of integer input is a float: convert first, since for complex input the
    result is the real type (two different promotions)."""
    input = _tensor_arg("angle", input)
    if input.dtype.category <= D.Category.INTEGER:
        input = input.to(D.get_default_dtype())
    return apply(ANGLE, (input,), out=out)


def angle_method(self):
    return angle_fn(self)


def conj(input):
    """The complex conjugate. PyTorch returns a lazily conjugated view of complex input;
    reftorch has no conjugate bit, so complex input gets a conjugated copy. Real input is
    returned as is (also in PyTorch)."""
    input = _tensor_arg("conj", input)
    return apply(CONJ_PHYSICAL, (input,)) if input.is_complex() else input


def is_conj(input):
    """Always False: reftorch conjugates eagerly (no lazy conjugate bit)."""
    return False


def resolve_conj(input):
    return input


def real(input):
    """The real part: for complex input a view of the interleaved storage (PyTorch's layout);
    real input is returned as is."""
    input = _tensor_arg("real", input)
    return _complex_part(input, 0) if input.is_complex() else input


def imag(input):
    input = _tensor_arg("imag", input)
    if not input.is_complex():
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _complex_part(input, 1)


def _complex_part(t, part):
    """The real (0) or imaginary (1) part of a complex tensor as a strided view sharing its
    memory: element i of a complex tensor is floats 2i and 2i+1 of the same storage."""
    from .._storage import CPUStorage
    if not isinstance(t._storage, CPUStorage):
        return _complex_part(t.cpu(), part).to(t.device)  # other devices: a copy
    return _reinterpret(t, t.dtype.to_real(), t._shape, tuple(2 * s for s in t._strides),
                        2 * t._offset + part, "real" if part == 0 else "imag")


def view_as_real(input):
    """A complex tensor's storage seen as real pairs: a trailing dim of 2 (real, imaginary),
    every stride doubled, sharing memory."""
    input = _tensor_arg("view_as_real", input)
    if not input.is_complex():
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return _reinterpret(input, input.dtype.to_real(), input._shape + (2,),
                        tuple(2 * s for s in input._strides) + (1,), 2 * input._offset,
                        "view_as_real")


def view_as_complex(input):
    """Real pairs along a last dim of size 2 (stride 1) seen as complex numbers: the inverse
    of view_as_real; every other stride and the offset must be even."""
    from .. import _dtype as D
    input = _tensor_arg("view_as_complex", input)
    complex_of = {D.float16: None, D.float32: D.complex64, D.float64: D.complex128}
    if input.dtype not in complex_of:
        raise RuntimeError("view_as_complex is only supported for half, float and double "
                           f"tensors, but got a tensor of scalar type: {input.dtype.scalar_name}")
    if complex_of[input.dtype] is None:
        raise RuntimeError("view_as_complex: reftorch has no complex32 dtype for half input")
    if not input._shape or input._shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if input._strides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in input._strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if input._offset % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return _reinterpret(input, complex_of[input.dtype], input._shape[:-1],
                        tuple(s // 2 for s in input._strides[:-1]), input._offset // 2,
                        "view_as_complex")


def _reinterpret(t, dtype, shape, strides, offset, op):
    """A view of `t`'s memory as another dtype (a new storage object over the same bytes,
    starting at the same version)."""
    from .._storage import CPUStorage
    from ..autograd.graph import record
    if not isinstance(t._storage, CPUStorage):
        raise RuntimeError(f"{op}: only cpu tensors can be reinterpreted")
    array = t._storage.array
    if array.nbytes % dtype.itemsize:
        array = array[:array.nbytes // dtype.itemsize * dtype.itemsize // array.itemsize]
    storage = CPUStorage(array.view(dtype.numpy_dtype), dtype)
    storage._version = t._storage._version
    view = Tensor._make(storage, offset, tuple(shape), tuple(strides))
    view._base = t if t._base is None else t._base
    if t.requires_grad:
        record(op, (t,), view, {})
    return view


def square(input, *, out=None):
    """input ** 2 (through pow: bool input gives int64, as in PyTorch)."""
    from . import variants  # noqa: F401
    return apply(POW, (_tensor_arg("square", input), 2), out=out)


def square_method(self):
    return apply(POW, (self, 2))


def square_inplace(self):
    return apply(POW, (self, 2), out=self, inplace=True)


def float_power(input, exponent, *, out=None):
    """pow computed in double precision: float64, or complex128 if any operand is complex."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError("float_power(): argument 'input' must be Tensor")
    dtype = _float_power_dtype(input, exponent)
    if out is not None and out.dtype is not dtype:
        raise RuntimeError(f"the output given to float_power has dtype {out.dtype.scalar_name} "
                           f"but the operation's result requires dtype {dtype.scalar_name}")
    operands = [x.to(dtype) if isinstance(x, Tensor) else _number_or_tensor(
        "float_power", x, "exponent") for x in (input, exponent)]
    return apply(POW, tuple(operands), out=out)


def _float_power_dtype(*operands):
    complex_ = any((x.is_complex() if hasattr(x, "is_complex") else isinstance(x, complex))
                   for x in operands)
    return D.complex128 if complex_ else D.float64


def float_power_method(self, exponent):
    return float_power(self, exponent)


def float_power_inplace(self, exponent):
    dtype = _float_power_dtype(self, exponent)
    if self.dtype is not dtype:
        raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype.scalar_name} "
                           f"but the operation's result requires dtype {dtype.scalar_name}")
    other = exponent.to(dtype) if hasattr(exponent, "_shape") else exponent
    return apply(POW, (self, other), out=self, inplace=True)


# --- clamp ---------------------------------------------------------------------------------

def _clamp_operands(name, min, max):
    if min is None and max is None:
        raise RuntimeError(f"torch.{name}: At least one of 'min' or 'max' must not be None")
    given = [x for x in (min, max) if x is not None]
    if any(isinstance(x, Tensor) for x in given) and not all(isinstance(x, Tensor)
                                                            for x in given):
        raise TypeError(f"{name}() received an invalid combination of arguments: min and max "
                        f"must both be Tensors or both be Numbers")
    return [None if x is None else _number_or_tensor(name, x, "min") for x in (min, max)]


def clamp_fn(input, min=None, max=None, *, out=None):
    """Limit input to [min, max]; either bound may be None, a Number or a Tensor."""
    input = _tensor_arg("clamp", input)
    low, high = _clamp_operands("clamp", min, max)
    return _clamp(input, low, high, out=out)


def _clamp(input, low, high, out=None, inplace=False):
    if high is None:
        return apply(CLAMP_MIN, (input, low), out=out, inplace=inplace)
    if low is None:
        return apply(CLAMP_MAX, (input, high), out=out, inplace=inplace)
    return apply(CLAMP, (input, low, high), out=out, inplace=inplace)


def clamp_method(self, min=None, max=None):
    return clamp_fn(self, min, max)


def clamp_inplace(self, min=None, max=None):
    low, high = _clamp_operands("clamp_", min, max)
    return _clamp(self, low, high, out=self, inplace=True)


# --- lerp, addcmul, addcdiv, where ---------------------------------------------------------

def lerp_fn(input, end, weight, *, out=None):
    input = _tensor_arg("lerp", input)
    end = _tensor_arg("lerp", end, "end", 2)
    return apply(LERP, (input, end, _number_or_tensor("lerp", weight, "weight")), out=out)


def lerp_method(self, end, weight):
    return lerp_fn(self, end, weight)


def lerp_inplace(self, end, weight):
    end = _tensor_arg("lerp_", end, "end", 1)
    return apply(LERP, (self, end, _number_or_tensor("lerp_", weight, "weight")), out=self,
                  inplace=True)


def _addc(op):
    name = op.name

    def functional(input, tensor1, tensor2, *, value=1, out=None):
        operands = (_tensor_arg(name, input), _tensor_arg(name, tensor1, "tensor1", 2),
                    _tensor_arg(name, tensor2, "tensor2", 3))
        return apply(op, operands, out=out, params={"value": value})

    def method(self, tensor1, tensor2, *, value=1):
        return functional(self, tensor1, tensor2, value=value)

    def inplace(self, tensor1, tensor2, *, value=1):
        operands = (self, _tensor_arg(name, tensor1, "tensor1", 1),
                    _tensor_arg(name, tensor2, "tensor2", 2))
        return apply(op, operands, out=self, inplace=True, params={"value": value})
    functional.__name__, method.__name__, inplace.__name__ = name, name, name + "_"
    return functional, method, inplace


addcmul_fn, addcmul_method, addcmul_inplace = _addc(ADDCMUL)
addcdiv_fn, addcdiv_method, addcdiv_inplace = _addc(ADDCDIV)


def where_fn(condition, input=None, other=None, *, out=None):
    """Elementwise choice: input where condition holds, else other (numbers allowed).

    `where(condition)` alone is `nonzero(condition, as_tuple=True)`."""
    condition = _tensor_arg("where", condition, "condition")
    if input is None and other is None:
        import reftorch
        return reftorch.nonzero(condition, as_tuple=True)
    if condition.dtype is D.uint8:
        condition = condition.to(D.bool)  # accepted (deprecated) by PyTorch; bool drives it
    operands = (condition, _number_or_tensor("where", input, "input"),
                _number_or_tensor("where", other, "other"))
    return apply(WHERE, operands, out=out)


def where_method(self, condition, y):
    return where_fn(condition, self, y)


# --- binary ops whose `other` must be a Tensor (no Number overload in PyTorch) --------------

def tensor_other_forms(op, has_inplace=True):
    """(functional, method, inplace) for an op that refuses a Python number as `other`."""
    from . import variants as V
    forms = [V.functional(op), V.method(op)] + ([V.inplace(op)] if has_inplace else [None])
    positions = (2, 1, 1)

    def guard(fn, position):
        if fn is None:
            return None

        def guarded(input, other, *args, **kwargs):
            _tensor_arg(fn.__name__, other, "other", position)
            return fn(input, other, *args, **kwargs)
        guarded.__name__, guarded.__doc__ = fn.__name__, fn.__doc__
        return guarded
    return tuple(guard(fn, p) for fn, p in zip(forms, positions))


def heaviside_fn(input, values, *, out=None):
    """0 below zero, 1 above, `values` at zero; input, values (and out) share one dtype."""
    from . import variants as V
    _tensor_arg("heaviside", values, "values", 2)
    if out is not None and out.dtype is not input.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different "
                           "dtypes.")
    return V.functional(HEAVISIDE)(input, values, out=out)


TENSOR_OTHER_FORMS = {op.name: tensor_other_forms(op, has_inplace) for op, has_inplace in (
    (LOGICAL_AND, True), (LOGICAL_OR, True), (LOGICAL_XOR, True), (ATAN2, True), (HYPOT, True),
    (LOGADDEXP, False), (LOGADDEXP2, False), (HEAVISIDE, True), (MAXIMUM, False),
    (MINIMUM, False), (FMAX, False), (FMIN, False), (LDEXP, True), (NEXTAFTER, True),
    (GCD, True), (LCM, True))}
