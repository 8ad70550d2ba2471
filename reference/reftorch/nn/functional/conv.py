"""torch.nn.functional: conv.

The functional convolutions are the torch-level ones (in PyTorch they are the same builtins):
conv{1,2,3}d accept batched or unbatched input and padding as ints, 'same' or 'valid';
conv_transpose{1,2,3}d take output_padding and put groups before dilation.
"""
from __future__ import annotations

from ..._ops.nn_convolution import (conv1d, conv2d, conv3d, conv_transpose1d,  # noqa: F401
                                    conv_transpose2d, conv_transpose3d)

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]
