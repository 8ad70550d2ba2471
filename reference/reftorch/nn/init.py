"""torch.nn.init: fill a tensor in place with values from an initialisation scheme.

Every function runs without recording autograd history and draws from reftorch's generator
with the same calls PyTorch makes (`uniform_`, `normal_`, ...), so with the same seed a layer
gets PyTorch's exact initial weights.
"""
from __future__ import annotations

import math
import warnings

from ..autograd.grad_mode import no_grad

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_", "uniform", "normal", "constant",
           "eye", "dirac", "xavier_uniform", "xavier_normal", "kaiming_uniform",
           "kaiming_normal", "orthogonal", "sparse"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d")


def calculate_gain(nonlinearity, param=None):
    """The factor by which a nonlinearity scales the standard deviation of its input, so that
    initialisations can keep activations' variance constant through the layers."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4     # chosen empirically in PyTorch for self-normalizing networks
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


# --- fills -----------------------------------------------------------------------------------
def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) values restricted to [a, b], by rejection sampling as PyTorch 2.x
    does (so a seeded call gives its values): when the interval holds more than 30% of the
    mass, redraw the normal values that fall outside it; otherwise propose uniform values on
    [a, b] and accept each with probability pdf(x) / pdf(mode)."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    with no_grad():
        if _normal_cdf((b - mean) / std) - _normal_cdf((a - mean) / std) > 0.3:
            _redraw_outside(tensor, mean, std, a, b, generator)
        else:
            _accept_uniform_proposals(tensor, mean, std, a, b, generator)
    return tensor


def _normal_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def _redraw_outside(tensor, mean, std, a, b, generator):
    from .. import empty_like, tensor as new_tensor, where
    # The bounds as the tensor's dtype represents them, so the test agrees with the values.
    low = new_tensor(a, dtype=tensor.dtype).item()
    high = new_tensor(b, dtype=tensor.dtype).item()
    result = tensor.normal_(mean, std, generator=generator)
    while True:
        outside = (result < low) | (result > high)
        if not outside.any():
            break
        result = where(outside, empty_like(result).normal_(mean, std, generator=generator),
                       result)
    if result is not tensor:
        tensor.copy_(result)


def _accept_uniform_proposals(tensor, mean, std, a, b, generator):
    from .. import empty_like, where
    log_peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2
    proposals = empty_like(tensor)
    uniforms = empty_like(tensor)

    def rejected(candidates):
        # log u > log pdf(x) - log pdf(mode) rejects x (unnormalised log densities).
        log_ratio = candidates.sub(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
        return uniforms.uniform_(generator=generator).log_().gt(log_ratio)

    result = tensor.uniform_(a, b, generator=generator)
    pending = rejected(result)
    while pending.any():
        proposals.uniform_(a, b, generator=generator)
        result = where(pending, proposals, result)
        pending = where(pending, rejected(proposals), pending)
    if result is not tensor:
        tensor.copy_(result)


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    with no_grad():
        return tensor.fill_(1)


def zeros_(tensor):
    with no_grad():
        return tensor.zero_()


def eye_(tensor):
    """The identity matrix in a 2-D tensor (ones on the main diagonal of a non-square one)."""
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from .._ops.creation import eye
    with no_grad():
        tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))
    return tensor


def dirac_(tensor, groups=1):
    """A 3-, 4- or 5-D convolution weight that passes each input channel (per group) through
    unchanged: a one at the kernel's centre for output channel i, input channel i."""
    dims = tensor.ndimension()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.size()
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    channels = min(out_per_group, sizes[1])
    from .._ops.creation import arange
    with no_grad():
        tensor.zero_()
        i = arange(channels)
        centre = tuple(size // 2 for size in sizes[2:])
        for g in range(groups):
            tensor[(g * out_per_group + i, i) + centre] = 1
    return tensor


# --- fan-based schemes -----------------------------------------------------------------------
def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight laid out (out, in, *kernel) as Linear and Conv use."""
    dims = tensor.dim()
    if dims < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive_field = 1
    for size in tensor.shape[2:]:
        receptive_field *= size
    return tensor.size(1) * receptive_field, tensor.size(0) * receptive_field


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std       # a uniform on [-b, b] has standard deviation b/sqrt(3)
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


# --- structured schemes ----------------------------------------------------------------------
def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal sample, the signs of
    R's diagonal folded into Q so the result is uniformly distributed."""
    if tensor.ndimension() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    from .._ops.creation import empty
    from .._ops.linalg import qr
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    flattened = empty((rows, cols), dtype=tensor.dtype).normal_(0, 1, generator=generator)
    if rows < cols:
        flattened = flattened.t()
    q, r = qr(flattened)
    q = q * r.diagonal().sign()
    if rows < cols:
        q = q.t()
    with no_grad():
        tensor.view_as(q).copy_(q)
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D matrix with normal(0, std) values and, in each column, a random `sparsity`
    fraction of its rows set to zero."""
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from .._ops.sampling import randperm
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):    # one permutation per column, drawn in PyTorch's order
            zero_rows = randperm(rows, generator=generator)[:num_zeros]
            tensor[zero_rows, col] = 0
    return tensor


# --- deprecated spellings without the trailing underscore ------------------------------------
def _deprecated(new):
    old_name = new.__name__[:-1]

    def old(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new.__name__}`.", FutureWarning, stacklevel=2)
        return new(*args, **kwargs)
    old.__name__ = old.__qualname__ = old_name
    old.__doc__ = f"Deprecated alias of `{new.__name__}`."
    return old


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)

