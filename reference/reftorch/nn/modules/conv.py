"""torch.nn modules: conv.

Conv{1,2,3}d hold a weight (out_channels, in_channels/groups, *kernel_size) and
ConvTranspose{1,2,3}d one of shape (in_channels, out_channels/groups, *kernel_size); both
initialise it with kaiming_uniform_(a=sqrt(5)) and the bias with U(-1/sqrt(fan_in),
1/sqrt(fan_in)), where fan_in comes from the weight's shape as stored (so for a transposed
convolution it counts out_channels/groups, as PyTorch's does).

A padding_mode other than 'zeros' pads explicitly with F.pad before a convolution without
padding; padding='same' keeps the output size (stride 1 only).
"""
from __future__ import annotations

import math
from collections.abc import Iterable

from ... import _ops
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]


def _ntuple(n):
    """x -> (x,)*n for a single value, tuple(x) for an iterable (PyTorch's _single/_pair/...)."""
    def parse(x):
        if isinstance(x, Iterable):
            return tuple(x)
        return (x,) * n
    return parse


_VALID_PADDING_STRINGS = {"same", "valid"}
_VALID_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


class _ConvNd(Module):
    """What every convolution layer shares: checks, parameters, initialisation, repr."""

    def __init__(self, nd, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None,
                 dtype=None):
        super().__init__()
        tup = _ntuple(nd)
        kernel_size, stride, dilation = tup(kernel_size), tup(stride), tup(dilation)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in _VALID_PADDING_STRINGS:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{_VALID_PADDING_STRINGS}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = tup(padding)
        if padding_mode not in _VALID_PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_VALID_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = tup(output_padding)
        self.groups = groups
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = self._explicit_padding()
        if transposed:
            shape = (in_channels, out_channels // groups) + kernel_size
        else:
            shape = (out_channels, in_channels // groups) + kernel_size
        self.weight = Parameter(_ops.creation.empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(_ops.creation.empty((out_channels,), device=device,
                                                      dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _explicit_padding(self):
        """F.pad's amounts (last dim first, both sides) for a non-'zeros' padding_mode;
        'same' splits d*(k-1) with the odd element at the end."""
        amounts = []
        if isinstance(self.padding, str):
            if self.padding == "same":
                for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                    total = d * (k - 1)
                    amounts += [total // 2, total - total // 2]
            else:
                amounts = [0] * (2 * len(self.kernel_size))
        else:
            for p in reversed(self.padding):
                amounts += [p, p]
        return amounts

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        nd = len(self.kernel_size)
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"


class _Conv(_ConvNd):
    _nd = 0
    _conv = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__(self._nd, in_channels, out_channels, kernel_size, stride, padding,
                         dilation, False, 0, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        conv = type(self)._conv
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) or (C_in, L) input."""
    _nd = 1
    _conv = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W) input."""
    _nd = 2
    _conv = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W) input."""
    _nd = 3
    _conv = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    _nd = 0
    _conv = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{self.__class__.__name__}')
        # Like PyTorch, a transposed convolution takes no padding strings: a string is
        # split into its characters here (and rejected by the functional form later).
        padding = _ntuple(self._nd)(padding) if isinstance(padding, str) else padding
        super().__init__(self._nd, in_channels, out_channels, kernel_size, stride, padding,
                         dilation, True, output_padding, groups, bias, padding_mode, device,
                         dtype)

    def _output_padding(self, input, output_size, stride, padding, kernel_size,
                        num_spatial_dims, dilation=None):
        """The output_padding that makes the output `output_size` (PyTorch's rule)."""
        if output_size is None:
            return _ntuple(num_spatial_dims)(self.output_padding)
        has_batch_dim = input.dim() == num_spatial_dims + 2
        num_non_spatial = 2 if has_batch_dim else 1
        output_size = list(output_size)
        if len(output_size) == num_non_spatial + num_spatial_dims:
            output_size = output_size[num_non_spatial:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, "
                             f"output_size must have {num_spatial_dims} or "
                             f"{num_non_spatial + num_spatial_dims} elements (got "
                             f"{len(output_size)})")
        min_sizes, max_sizes = [], []
        for d in range(num_spatial_dims):
            dil = 1 if dilation is None else dilation[d]
            size = ((input.size(d + num_non_spatial) - 1) * stride[d] - 2 * padding[d]
                    + dil * (kernel_size[d] - 1) + 1)
            min_sizes.append(size)
            max_sizes.append(size + stride[d] - 1)
        for size, low, high in zip(output_size, min_sizes, max_sizes):
            if size < low or size > high:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {min_sizes} to {max_sizes} (for an input of "
                                 f"{input.size()[num_non_spatial:]})")
        return [size - low for size, low in zip(output_size, min_sizes)]

    def forward(self, input, output_size=None):
        if self.padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{self.__class__.__name__}')
        nd = self._nd
        output_padding = self._output_padding(input, output_size, self.stride, self.padding,
                                              self.kernel_size, nd, self.dilation)
        return type(self)._conv(input, self.weight, self.bias, self.stride, self.padding,
                                output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution (the gradient of Conv1d with respect to its input)."""
    _nd = 1
    _conv = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution (the gradient of Conv2d with respect to its input)."""
    _nd = 2
    _conv = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution (the gradient of Conv3d with respect to its input)."""
    _nd = 3
    _conv = staticmethod(F.conv_transpose3d)
