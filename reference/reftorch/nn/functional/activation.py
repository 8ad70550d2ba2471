"""torch.nn.functional: non-linear activations (relu, elu, gelu, softmax, ...).

Most forms call the torch-level ops in reftorch._ops.nn_activation; a few are compositions
in PyTorch too (softsign, tanhshrink, softmin, gumbel_softmax) and are written the same way.
"""
from __future__ import annotations

import warnings

from ..._ops import nn_activation as _act

__all__ = ["threshold", "threshold_", "relu", "relu_", "hardtanh", "hardtanh_", "relu6",
           "elu", "elu_", "selu", "selu_", "celu", "celu_", "leaky_relu", "leaky_relu_",
           "prelu", "rrelu", "rrelu_", "glu", "gelu", "logsigmoid", "hardshrink", "tanhshrink",
           "softsign", "softplus", "softmin", "softmax", "softshrink", "gumbel_softmax",
           "log_softmax", "tanh", "sigmoid", "hardsigmoid", "silu", "mish", "hardswish"]


def threshold(input, threshold, value, inplace=False):
    """input where input > threshold, else value."""
    if inplace:
        return _act.threshold_(input, threshold, value)
    return _act.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return _act.threshold_(input, threshold, value)


def relu(input, inplace=False):
    return _act.relu_(input) if inplace else _act.relu(input)


def relu_(input):
    return _act.relu_(input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """input clamped to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _act.hardtanh(input, min_val, max_val, inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """min(max(0, x), 6): a hardtanh with bounds 0 and 6."""
    return _act.hardtanh(input, 0.0, 6.0, inplace)


def elu(input, alpha=1.0, inplace=False):
    return _act.elu(input, alpha, inplace=inplace)


def elu_(input, alpha=1.0):
    return _act.elu(input, alpha, inplace=True)


def selu(input, inplace=False):
    return _act.selu_(input) if inplace else _act.selu(input)


def selu_(input):
    return _act.selu_(input)


def celu(input, alpha=1.0, inplace=False):
    return _act.celu_(input, alpha) if inplace else _act.celu(input, alpha)


def celu_(input, alpha=1.0):
    return _act.celu_(input, alpha)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _act.leaky_relu(input, negative_slope, inplace)


def leaky_relu_(input, negative_slope=0.01):
    return _act.leaky_relu(input, negative_slope, inplace=True)


def prelu(input, weight):
    return _act.prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    if inplace:
        return _act.rrelu_(input, lower, upper, training)
    return _act.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return _act.rrelu_(input, lower, upper, training)


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of input along dim."""
    return _act.glu(input, dim)


def gelu(input, approximate="none"):
    return _act.gelu(input, approximate)


def logsigmoid(input):
    return _act.log_sigmoid(input)


def hardshrink(input, lambd=0.5):
    return _act.hardshrink(input, lambd)


def tanhshrink(input):
    return input - input.tanh()


def softsign(input):
    return input / (input.abs() + 1)


def softplus(input, beta=1.0, threshold=20.0):
    return _act.softplus(input, beta, threshold)


def softshrink(input, lambd=0.5):
    return _act.softshrink(input, lambd)


def _get_softmax_dim(name, ndim, stacklevel):
    """The dim an implicit (legacy) softmax call uses: 0 for 0-, 1- and 3-dim input, else 1."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input)."""
    if dim is None:
        dim = _get_softmax_dim("softmin", input.dim(), _stacklevel)
    return (-input).softmax(dim, dtype=dtype)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim("softmax", input.dim(), _stacklevel)
    return input.softmax(dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim("log_softmax", input.dim(), _stacklevel)
    return input.log_softmax(dim, dtype=dtype)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample from the Gumbel-softmax distribution: softmax((logits + g) / tau) with
    g = -log(Exponential(1)) noise; `hard` returns the one-hot argmax in the forward pass
    with the soft sample's gradient (straight-through)."""
    from ..._ops.creation import empty, zeros_like
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    if not logits.dtype.is_floating_point:
        raise RuntimeError(f"Exponential distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified "
                           f"{logits.dtype.scalar_name}")
    noise = empty(tuple(logits.shape), dtype=logits.dtype, device=logits.device)
    gumbels = -noise.exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def hardsigmoid(input, inplace=False):
    return _act.hardsigmoid(input, inplace)


def silu(input, inplace=False):
    """x * sigmoid(x)."""
    return _act.silu(input, inplace)


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return _act.mish(input, inplace)


def hardswish(input, inplace=False):
    return _act.hardswish(input, inplace)

