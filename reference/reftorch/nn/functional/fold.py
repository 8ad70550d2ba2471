"""torch.nn.functional: fold.

unfold (im2col) extracts every sliding kernel-sized block of a (N, C, H, W) input as a column;
fold (col2im) is its adjoint: it adds columns back into an image, summing where blocks
overlap. Both accept an unbatched input too.
"""
from __future__ import annotations

from ..._ops.nn_convolution import _col2im, _im2col

__all__ = ["fold", "unfold"]


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C, H, W) -> (N, C*prod(kernel_size), L), L the number of blocks."""
    return _im2col(input, kernel_size, dilation, padding, stride)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C*prod(kernel_size), L) -> (N, C, *output_size), overlapping values summed."""
    return _col2im(input, output_size, kernel_size, dilation, padding, stride)
