"""Type promotion and broadcasting: the one place where result dtypes and shapes are decided.

Every op asks here; no kernel casts or broadcasts on its own.
"""
from __future__ import annotations

import builtins
import enum
from functools import lru_cache

from . import _dtype as D
from ._dtype import Category

# ---------------------------------------------------------------------------------------------
# promote_types: PyTorch's lattice, written out. Row and column order is _ORDER.

_ORDER = (D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64,
          D.float16, D.bfloat16, D.float32, D.float64, D.complex64, D.complex128)
_CODE = {"b1": D.bool, "u1": D.uint8, "i1": D.int8, "i2": D.int16, "i4": D.int32,
         "i8": D.int64, "f2": D.float16, "bf": D.bfloat16, "f4": D.float32, "f8": D.float64,
         "c4": D.complex64, "c8": D.complex128}
_TABLE = """
     b1 u1 i1 i2 i4 i8 f2 bf f4 f8 c4 c8
b1   b1 u1 i1 i2 i4 i8 f2 bf f4 f8 c4 c8
u1   u1 u1 i2 i2 i4 i8 f2 bf f4 f8 c4 c8
i1   i1 i2 i1 i2 i4 i8 f2 bf f4 f8 c4 c8
i2   i2 i2 i2 i2 i4 i8 f2 bf f4 f8 c4 c8
i4   i4 i4 i4 i4 i4 i8 f2 bf f4 f8 c4 c8
i8   i8 i8 i8 i8 i8 i8 f2 bf f4 f8 c4 c8
f2   f2 f2 f2 f2 f2 f2 f2 f4 f4 f8 c4 c8
bf   bf bf bf bf bf bf f4 bf f4 f8 c4 c8
f4   f4 f4 f4 f4 f4 f4 f4 f4 f4 f8 c4 c8
f8   f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 c8 c8
c4   c4 c4 c4 c4 c4 c4 c4 c4 c4 c8 c4 c8
c8   c8 c8 c8 c8 c8 c8 c8 c8 c8 c8 c8 c8
"""


def _parse_table(text):
    rows = [line.split() for line in text.strip().splitlines()]
    columns = [_CODE[c] for c in rows[0]]
    return {(_CODE[row[0]], col): _CODE[cell]
            for row in rows[1:] for col, cell in zip(columns, row[1:])}


_PROMOTE = _parse_table(_TABLE)


def promote_types(type1, type2):
    """The smallest dtype to which both `type1` and `type2` convert without losing category."""
    return _PROMOTE[(type1, type2)]


def can_cast(from_, to):
    """Whether a cast is allowed by promotion rules: never to a lower category."""
    if from_.category > to.category:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# result_type: tensors with dimensions decide the dtype; 0-dim tensors and Python scalars may
# only raise its category (e.g. int32 tensor + 2.5 -> float32, float16 tensor + 1e10 -> float16).

def scalar_dtype(value):
    """The dtype a Python number stands for: bool, int64, the default float, default complex."""
    if isinstance(value, builtins.bool):
        return D.bool
    if isinstance(value, builtins.int):
        return D.int64
    if isinstance(value, builtins.float):
        return D.get_default_dtype()
    if isinstance(value, builtins.complex):
        return D.default_complex_dtype()
    raise TypeError(f"unsupported scalar type {type(value).__name__}")


# The category each Python number type stands for (that of scalar_dtype's dtype).
_NUMBER_CATEGORY = {builtins.bool: Category.BOOL, builtins.int: Category.INTEGER,
                    builtins.float: Category.FLOATING, builtins.complex: Category.COMPLEX}


def numbers_within(operands, tensor, category):
    """Whether every operand but `tensor` (the only tensor among them, of dtype category
    `category`) is a Python number of that category or a lower one: such numbers leave the
    tensor's dtype as the result dtype (result_dtype decides the same)."""
    for x in operands:
        if x is not tensor:
            found = _NUMBER_CATEGORY.get(type(x))
            if found is None or found > category:
                return False
    return True


def _combine_categories(higher, lower):
    """Join the dtype of a stronger operand group with a weaker one, as PyTorch does."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:
        # A floating operand keeps its precision but becomes complex.
        return higher.to_complex() if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is D.bool or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def _promote_optional(current, new):
    return new if current is None else promote_types(current, new)


def result_dtype(operands):
    """The dtype of an elementwise op over `operands` (tensors and Python numbers)."""
    dim_result = zero_dim_result = scalar_result = None
    for x in operands:
        if hasattr(x, "dtype") and hasattr(x, "ndim"):
            if x.ndim > 0:
                dim_result = _promote_optional(dim_result, x.dtype)
            else:
                zero_dim_result = _promote_optional(zero_dim_result, x.dtype)
        else:
            scalar_result = _promote_optional(scalar_result, scalar_dtype(x))
    return _combine_categories(dim_result, _combine_categories(zero_dim_result, scalar_result))


def result_type(tensor1, tensor2):
    """Public `torch.result_type`: the dtype an arithmetic op on the two would produce."""
    return result_dtype((tensor1, tensor2))


class Promotion(enum.Enum):
    """How an op turns the promoted input dtype into its computation and result dtypes."""
    DEFAULT = "default"              # result = promoted dtype (add, mul, ...)
    INT_TO_FLOAT = "int_to_float"    # bool/int inputs give the default float (true div, sqrt)
    ALWAYS_BOOL = "always_bool"      # result is bool (comparisons, isnan)
    COMPLEX_TO_FLOAT = "complex_to_float"  # complex inputs give their real type (abs)
    NO_OPMATH = "no_opmath"          # compute in the result dtype itself, even for half


def computation_dtype(d):
    """Half-precision types are computed in float32 ("opmath"), then rounded once."""
    return D.float32 if d is D.float16 or d is D.bfloat16 else d


def promoted_dtypes(promoted, kind):
    """(common, computation, result) dtypes for an op of promotion `kind`.

    `common` is the dtype inputs are converted to before computing (PyTorch's common dtype:
    int inputs of true division become the default float); `computation` widens half types to
    float32; `result` is the output dtype.
    """
    common = promoted
    if kind is Promotion.INT_TO_FLOAT and common.category <= Category.INTEGER:
        common = D.get_default_dtype()
    if kind is Promotion.ALWAYS_BOOL:
        return common, computation_dtype(common), D.bool
    if kind is Promotion.COMPLEX_TO_FLOAT and common.is_complex:
        return common, common, common.to_real()
    if kind is Promotion.NO_OPMATH:
        return common, common, common
    return common, computation_dtype(common), common


# ---------------------------------------------------------------------------------------------
# Broadcasting

@lru_cache(maxsize=4096)
def broadcast_shapes2(a, b):
    """The broadcast of two shapes, with PyTorch's error message when they do not agree."""
    if a == b:
        return a
    ndim = max(len(a), len(b))
    a_full = (1,) * (ndim - len(a)) + tuple(a)
    b_full = (1,) * (ndim - len(b)) + tuple(b)
    out = []
    for dim, (x, y) in enumerate(zip(a_full, b_full)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise RuntimeError(
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                f"at non-singleton dimension {dim}")
    return tuple(out)


def broadcast_shapes(*shapes):
    """`torch.broadcast_shapes`: the shape all `shapes` broadcast to."""
    result = ()
    for shape in shapes:
        if isinstance(shape, builtins.int):
            shape = (shape,)
        result = broadcast_shapes2(result, tuple(shape))
    return result


def check_inplace_shape(self_shape, broadcast_shape):
    """An in-place op may not change the shape of the tensor it writes into."""
    if tuple(self_shape) != tuple(broadcast_shape):
        raise RuntimeError(
            f"output with shape {list(self_shape)} doesn't match the broadcast shape "
            f"{list(broadcast_shape)}")


def check_output_cast(result, out_dtype):
    """Writing an op's result into an existing tensor must not lower its category."""
    if not can_cast(result, out_dtype):
        raise RuntimeError(
            f"result type {result.scalar_name} can't be cast to the desired output type "
            f"{out_dtype.scalar_name}")


# --- storing one Python number into a dtype ---------------------------------------------------

# The element type names PyTorch's message uses (its C++ types).
_CPP_NAMES = {D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t", D.int32: "int",
              D.int64: "int64_t", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
              D.float32: "float", D.float64: "double", D.complex64: "c10::complex<float>",
              D.complex128: "c10::complex<double>"}
_FLOAT_MAX = {D.float16: 65504.0, D.bfloat16: 3.3895313892515355e38,
              D.float32: 3.4028234663852886e38, D.complex64: 3.4028234663852886e38}


def check_scalar_fits(value, dtype):
    """Raise PyTorch's RuntimeError when the number `value` cannot be stored in `dtype` (the
    check of fill_, full, masked_fill and index_fill): an integer dtype takes integers in its
    range (an unsigned one also takes negatives down to -max, which wrap) and floats in its
    range (not NaN or an infinity); a float dtype takes finite values up to its max (compared
    before rounding: 65519 does not fit float16) and NaN and the infinities; a real dtype
    takes a complex value only with a zero imaginary part. bool and float64 take every
    number."""
    if dtype is D.bool:
        return
    parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
    if dtype.is_complex:
        fits = all(_fits_float(p, dtype) for p in parts)
    elif len(parts) == 2 and parts[1] != 0:
        fits = False
    elif dtype.is_floating_point:
        fits = _fits_float(parts[0], dtype)
    else:
        fits = _fits_integer(parts[0], dtype)
    if not fits:
        raise RuntimeError(f"value cannot be converted to type {_CPP_NAMES[dtype]} without "
                           f"overflow")


def _fits_float(x, dtype):
    limit = _FLOAT_MAX.get(dtype)
    return limit is None or x != x or abs(x) == float("inf") or abs(x) <= limit


def _fits_integer(x, dtype):
    low, high = _INT_RANGES[dtype]
    if isinstance(x, float) and x != x:
        return False
    if isinstance(x, int) and low == 0:
        return -high <= x <= high     # unsigned: a negative integer wraps (-1 -> 255)
    return low <= x <= high           # exact comparison of Python numbers (inf fails)


_INT_RANGES = {D.uint8: (0, 255), D.int8: (-128, 127), D.int16: (-2 ** 15, 2 ** 15 - 1),
               D.int32: (-2 ** 31, 2 ** 31 - 1), D.int64: (-2 ** 63, 2 ** 63 - 1)}
