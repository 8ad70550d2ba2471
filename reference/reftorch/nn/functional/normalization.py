"""torch.nn.functional: normalization (F's signatures and checks over the torch-level ops)."""
from __future__ import annotations

import math

from ..._ops import nn_normalization as N

__all__ = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm",
           "local_response_norm", "normalize"]


def _verify_batch_size(size):
    """Training statistics need more than one value per channel."""
    if size[0] * math.prod(size[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {size}")


def _verify_spatial_size(size):
    if math.prod(size[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {size}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    if training:
        _verify_batch_size(input.size())
    return N.batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                        eps)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    if use_input_stats:
        _verify_spatial_size(input.size())
    return N.instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                           momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return N.layer_norm(input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return N.rms_norm(input, normalized_shape, weight, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    _verify_batch_size([input.size(0) * input.size(1) // num_groups, num_groups]
                       + list(input.size()[2:]))
    return N.group_norm(input, num_groups, weight, bias, eps)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of squares over `size` neighbouring channels) ** beta.

    The window over channels c - size//2 .. c + (size-1)//2 is zero-padded at both ends and
    always divided by `size`, as PyTorch's (an average pool over the channel dim)."""
    import reftorch
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    squares = input.mul(input)
    channels = input.size(1)
    before = reftorch.zeros((input.size(0), size // 2) + tuple(input.shape[2:]),
                            dtype=input.dtype, device=input.device)
    after = reftorch.zeros((input.size(0), (size - 1) // 2) + tuple(input.shape[2:]),
                           dtype=input.dtype, device=input.device)
    padded = reftorch.cat([before, squares, after], 1)
    # the sum of `size` consecutive channels, as a sum of shifted slices
    window = padded.narrow(1, 0, channels)
    for shift in range(1, size):
        window = window + padded.narrow(1, shift, channels)
    div = (window / size).mul(alpha).add(k).pow(beta)
    return input / div


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p along dim, eps)."""
    import reftorch
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is None:
        return input / denom
    return reftorch.div(input, denom, out=out)
