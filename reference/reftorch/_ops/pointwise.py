"""Pointwise arithmetic, comparison and bitwise ops: reference kernels and declarations.

Each reference kernel is a NumPy function over arrays already cast to the op's computation
dtype (see elementwise.py); a comment marks every place PyTorch departs from NumPy.
"""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._promotion import Promotion
from .elementwise import declare

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
    from .._promotion import scalar_dtype
    return [x.dtype if hasattr(x, "dtype") else scalar_dtype(x) for x in operands]


def _check_alpha(common, params, operands=(), inplace=False):
    alpha = params.get("alpha", 1)
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


# --- declarations: the one place each op is named --------------------------------------------

ADD = declare("add", add, params={"alpha": 1}, check=_check_alpha)
SUB = declare("sub", sub, params={"alpha": 1}, check=_check_sub)
MUL = declare("mul", mul)
DIV = declare("div", div, promotion=Promotion.INT_TO_FLOAT, params={"rounding_mode": None},
              promotion_rule=_div_promotion, check=_check_div)
FLOOR_DIVIDE = declare("floor_divide", floor_divide, dtypes=REAL - {D.bool})
REMAINDER = declare("remainder", remainder, dtypes=REAL - {D.bool})
POW = declare("pow", pow, check=_check_pow)
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
