"""torch.nn modules: padding.

Each layer stores `padding` as a tuple of 2, 4 or 6 amounts (last dim first: left, right,
top, bottom, front, back; a single int is used for every side) and calls F.pad with its mode.
"""
from __future__ import annotations

from .. import functional as F
from .conv import _ntuple
from .module import Module

__all__ = ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d",
           "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
           "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
           "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]


class _PadNd(Module):
    _nd = 0
    _mode = ""

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(2 * self._nd)(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input):
        # Unlike F.pad, the layer checks the rank itself (ValueError).
        if input.dim() not in (self._nd + 1, self._nd + 2):
            raise ValueError(f"expected {self._nd + 1}D or {self._nd + 2}D input (got "
                             f"{input.dim()}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    _nd = 1


class CircularPad2d(_CircularPadNd):
    _nd = 2


class CircularPad3d(_CircularPadNd):
    _nd = 3


class _ReflectionPadNd(_PadNd):
    _mode = "reflect"


class ReflectionPad1d(_ReflectionPadNd):
    _nd = 1


class ReflectionPad2d(_ReflectionPadNd):
    _nd = 2


class ReflectionPad3d(_ReflectionPadNd):
    _nd = 3


class _ReplicationPadNd(_PadNd):
    _mode = "replicate"


class ReplicationPad1d(_ReplicationPadNd):
    _nd = 1


class ReplicationPad2d(_ReplicationPadNd):
    _nd = 2


class ReplicationPad3d(_ReplicationPadNd):
    _nd = 3


class _ConstantPadNd(_PadNd):
    _mode = "constant"

    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    _nd = 3


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"
