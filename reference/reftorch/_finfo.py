"""finfo and iinfo: numerical properties of floating and integer dtypes."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from . import _dtype as D


class finfo:
    """Machine limits of a floating (or complex: its real part's) dtype."""

    def __init__(self, type=None):  # noqa: A002 (PyTorch's argument name)
        dtype = D.get_default_dtype() if type is None else type
        if not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"torch.finfo() requires a floating point input type. Use "
                            f"torch.iinfo to handle '{dtype}'")
        self.dtype = dtype.to_real().name
        info = (ml_dtypes.finfo(dtype.to_real().numpy_dtype) if dtype.to_real() is D.bfloat16
                else np.finfo(dtype.to_real().numpy_dtype))
        self.bits = info.bits
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        # Resolution is the power of ten matching the decimal digits of precision.
        self.resolution = 10.0 ** -int(np.floor(-np.log10(self.eps)))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:
    """Limits of an integer (or bool) dtype."""

    def __init__(self, type):  # noqa: A002
        if type.is_floating_point or type.is_complex:
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo "
                            f"to handle '{type}'")
        self.dtype = type.name
        if type is D.bool:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            info = np.iinfo(type.numpy_dtype)
            self.bits, self.min, self.max = info.bits, int(info.min), int(info.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
