"""Data types: the twelve dtypes, their aliases, and the default dtype.

Each dtype maps to one NumPy dtype (bfloat16 comes from ml_dtypes). The promotion
lattice between them lives in `_promotion.py`, not here.
"""
from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class Category(enum.IntEnum):
    """The four kinds that type promotion orders: bool < integer < floating < complex."""
    BOOL = 0
    INTEGER = 1
    FLOATING = 2
    COMPLEX = 3


_FLOATING, _COMPLEX = Category.FLOATING, Category.COMPLEX


class dtype:
    """A tensor element type, e.g. `reftorch.float32`. Instances are singletons."""

    __slots__ = ("name", "itemsize", "category", "is_signed", "numpy_dtype",
                 "scalar_name", "legacy_prefix", "__weakref__")

    def __init__(self, name, numpy_dtype, category, is_signed, scalar_name, legacy_prefix):
        self.name = name
        self.numpy_dtype = np.dtype(numpy_dtype)
        self.itemsize = self.numpy_dtype.itemsize
        self.category = category
        self.is_signed = is_signed
        # PyTorch's C++ ScalarType name ("Float", "Long"), used in error messages.
        self.scalar_name = scalar_name
        # Prefix of the legacy tensor/storage classes (FloatTensor, FloatStorage).
        self.legacy_prefix = legacy_prefix

    # (against module constants: reading an enum member from its class costs ~70 ns, and
    # these two run in nearly every op)
    @property
    def is_floating_point(self):
        return self.category is _FLOATING

    @property
    def is_complex(self):
        return self.category is _COMPLEX

    def to_real(self):
        return _COMPLEX_TO_REAL.get(self, self)

    def to_complex(self):
        if self.is_complex:
            return self
        if self not in _REAL_TO_COMPLEX:
            raise RuntimeError(f"to_complex is not supported for {self}")
        return _REAL_TO_COMPLEX[self]

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return self.name  # pickles as the module-level singleton of that name


float16 = dtype("float16", np.float16, Category.FLOATING, True, "Half", "Half")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, Category.FLOATING, True, "BFloat16", "BFloat16")
float32 = dtype("float32", np.float32, Category.FLOATING, True, "Float", "Float")
float64 = dtype("float64", np.float64, Category.FLOATING, True, "Double", "Double")
complex64 = dtype("complex64", np.complex64, Category.COMPLEX, True, "ComplexFloat", "ComplexFloat")
complex128 = dtype("complex128", np.complex128, Category.COMPLEX, True, "ComplexDouble", "ComplexDouble")
uint8 = dtype("uint8", np.uint8, Category.INTEGER, False, "Byte", "Byte")
int8 = dtype("int8", np.int8, Category.INTEGER, True, "Char", "Char")
int16 = dtype("int16", np.int16, Category.INTEGER, True, "Short", "Short")
int32 = dtype("int32", np.int32, Category.INTEGER, True, "Int", "Int")
int64 = dtype("int64", np.int64, Category.INTEGER, True, "Long", "Long")
bool = dtype("bool", np.bool_, Category.BOOL, False, "Bool", "Bool")  # noqa: A001 (torch.bool)

# Aliases, as PyTorch spells them.
half = float16
float = float32  # noqa: A001
double = float64
cfloat = complex64
cdouble = complex128
short = int16
int = int32  # noqa: A001
long = int64

ALL_DTYPES = (bool, uint8, int8, int16, int32, int64,
              float16, bfloat16, float32, float64, complex64, complex128)

_COMPLEX_TO_REAL = {complex64: float32, complex128: float64}
_REAL_TO_COMPLEX = {float32: complex64, float64: complex128, float16: complex64,
                    bfloat16: complex64}
_BY_NUMPY = {d.numpy_dtype: d for d in ALL_DTYPES}
_BY_NAME = {d.name: d for d in ALL_DTYPES}


def from_numpy_dtype(np_dtype):
    """The reftorch dtype for a NumPy dtype, or TypeError naming the supported ones."""
    found = _BY_NUMPY.get(np.dtype(np_dtype))
    if found is None:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{np.dtype(np_dtype).name}. The only supported "
            "types are: float64, float32, float16, complex64, complex128, int64, int32, int16, "
            "int8, uint8, and bool.")
    return found


def by_name(name):
    return _BY_NAME[name]


# ---------------------------------------------------------------------------------------------
# The default dtype: what Python floats become, and what tensor()/zeros() use without dtype=.

_default = float32


def get_default_dtype():
    """The dtype that Python floats and factory functions produce when none is given."""
    return _default


def set_default_dtype(d):
    """Set the default floating dtype (float16, bfloat16, float32 or float64)."""
    global _default
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default = d


def default_complex_dtype():
    """Python complex numbers become the complex type matching the default float dtype."""
    return complex128 if _default is float64 else complex64
