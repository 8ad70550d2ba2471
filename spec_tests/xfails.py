"""Known differences from PyTorch, each with its reason. Runners consult this table only."""

# (op, lhs dtype, rhs dtype, rhs shape) -> reason
MIXED_DTYPE_XFAILS = {
    (op, "float16", rhs, ()): "reftorch has no complex32: float16 with a 0-dim complex tensor "
                              "gives complex64 here, complex32 (ComplexHalf) in PyTorch"
    for op in ("add", "sub", "mul", "div", "pow", "eq", "ne")
    for rhs in ("complex64", "complex128")
}

MIXED_DTYPE_XFAILS[("remainder", "bfloat16", "float32", ())] = (
    "PyTorch's bfloat16 remainder with a 0-dim float32 operand rounds intermediate results; "
    "the reference rounds once")

MIXED_DTYPE_XFAILS[("fmod", "bfloat16", "float32", ())] = (
    "PyTorch's bfloat16 fmod with a 0-dim float32 operand rounds intermediate results; the "
    "reference rounds once")
for _op in ("logical_and", "logical_or", "logical_xor", "logaddexp", "ldexp", "float_power",
            "xlogy", "copysign", "atan2", "maximum", "minimum", "fmax", "fmin", "hypot",
            "logaddexp2", "heaviside", "nextafter", "fmod", "clamp_min", "clamp_max"):
    for _rhs in ("complex64", "complex128"):
        MIXED_DTYPE_XFAILS.setdefault((_op, "float16", _rhs, ()), (
            "reftorch has no complex32: float16 with a 0-dim complex tensor promotes to "
            "complex64 here, to ComplexHalf (often unsupported) in PyTorch"))
for _a, _b in (("float16", "bfloat16"), ("bfloat16", "float16")):
    for _shape in ((3,), ()):
        MIXED_DTYPE_XFAILS[("ldexp", _a, _b, _shape)] = (
            "PyTorch rounds 2**other to the exponent's own half type before multiplying; the "
            "reference computes 2**other in float32")

# (op, dtype) -> reason: special float values (inf, nan, -0.0) that differ for a known reason.
SPECIAL_VALUE_XFAILS = {
    ("signbit", "bfloat16"): "the sample's nan converts to bfloat16 as -nan in PyTorch's "
                             "float32->bfloat16 cast and as +nan in reftorch's (ml_dtypes)",
    ("copysign", "bfloat16"): "copysign(x, nan) takes the nan's sign bit, which PyTorch's "
                              "float32->bfloat16 cast sets and reftorch's (ml_dtypes) does not",
}
for _a in ("float16", "bfloat16"):
    for _shape in ((3,), ()):
        MIXED_DTYPE_XFAILS[("ldexp", _a, "bool", _shape)] = (
            "PyTorch's half-type ldexp has no kernel for a bool exponent; reftorch computes it")
from .opdb import DTYPE_NAMES as _DTYPES  # noqa: E402
for _a in _DTYPES:
    for _b in ("float16", "bfloat16", "bool"):
        for _shape in ((3,), ()):
            MIXED_DTYPE_XFAILS.setdefault(("ldexp", _a, _b, _shape), (
                "PyTorch computes 2**other in the exponent's own dtype (rounding for half "
                "types, no kernel for bool); reftorch computes it in the result's precision"))
