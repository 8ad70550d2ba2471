"""Derivative rows: neural-network ops (activations, softmax, glu, pdist).

Formulas use reftorch ops only, so each is itself differentiable (double backward). Masks
follow PyTorch's conventions at the kinks (relu' (0) = 0, hardtanh passes the gradient only
strictly inside its bounds, ...). In-place forms get PyTorch's "...Backward1" node names.
"""
from __future__ import annotations

import math

import numpy as np

from ..grad_mode import is_grad_enabled
from ._table import _conj, derivative, op_module, torch


def _node(name):
    """Backward0 for the out-of-place op, Backward1 for its in-place form (`inplace` param)."""
    return lambda inputs, params: name + ("Backward1" if params.get("inplace") else "Backward0")


def _mask(condition, like):
    return condition.to(like.dtype)


@derivative("relu", "ReluBackward0", saves=("result",))
def _relu(ctx, grad):
    return _ops().threshold_backward(grad, ctx.result, 0)


@derivative("hardtanh", "HardtanhBackward0", saves=("self", "min_val", "max_val"))
def _hardtanh(ctx, grad):
    x = ctx.self
    return grad * _mask((x > ctx.min_val) & (x < ctx.max_val), grad)


def _elu_backward(grad, x, alpha, scale, input_scale):
    # exp only sees the non-positive part, so a large positive x cannot overflow into 0 * inf
    negative = torch.exp(x.clamp(max=0) * input_scale) * (input_scale * scale * alpha)
    return grad * torch.where(x > 0, torch.full_like(x, scale), negative)


@derivative("elu", _node("Elu"), saves=("self", "alpha", "scale", "input_scale"))
def _elu(ctx, grad):
    return _elu_backward(grad, ctx.self, ctx.alpha, ctx.scale, ctx.input_scale)


@derivative("celu", _node("Celu"), saves=("self", "alpha"))
def _celu(ctx, grad):
    # PyTorch's formula takes 1 / alpha with alpha rounded to float32 first (alpha.toFloat())
    input_scale = 1.0 / float(np.float32(ctx.alpha))
    return _elu_backward(grad, ctx.self, ctx.alpha, 1.0, input_scale)


@derivative("leaky_relu", _node("LeakyRelu"), saves=("self", "negative_slope"))
def _leaky_relu(ctx, grad):
    slope = torch.where(ctx.self > 0, torch.ones_like(grad),
                        torch.full_like(grad, ctx.negative_slope))
    return grad * slope


@derivative("rrelu_with_noise", _node("RreluWithNoise"), inputs=("self", "noise"),
            saves=("self", "noise", "lower", "upper", "training"))
def _rrelu_with_noise(ctx, grad):
    if ctx.training and ctx.upper - ctx.lower > 1e-6:
        return grad * ctx.noise.to(grad.dtype), None
    slope = (ctx.lower + ctx.upper) / 2
    factor = torch.where(ctx.self > 0, torch.ones_like(grad), torch.full_like(grad, slope))
    return grad * factor, None


@derivative("threshold", _node("Threshold"), saves=("self", "threshold"))
def _threshold(ctx, grad):
    return _ops().threshold_backward(grad, ctx.self, ctx.threshold)


# threshold_backward(g, x, t) selects g or 0, so it is linear in g (the same select applies to
# the incoming gradient) and piecewise constant in x.
@derivative("threshold_backward", "ThresholdBackwardBackward0", inputs=("grad_output", "self"),
            saves=("self", "threshold"))
def _threshold_backward(ctx, gg):
    return _ops().threshold_backward(gg, ctx.self, ctx.threshold), torch.zeros_like(gg)


def _outside(x, lambd, grad):
    """1 where |x| > lambd (NaN included, as PyTorch's `!(inside)` test), else 0."""
    return _mask(~((x >= -lambd) & (x <= lambd)), grad)


@derivative("hardshrink", "HardshrinkBackward0", saves=("self", "lambd"))
def _hardshrink(ctx, grad):
    return grad * _outside(ctx.self, ctx.lambd, grad)


@derivative("softshrink", "SoftshrinkBackward0", saves=("self", "lambd"))
def _softshrink(ctx, grad):
    return grad * _outside(ctx.self, ctx.lambd, grad)


@derivative("hardsigmoid", "HardsigmoidBackward0", saves=("self",))
def _hardsigmoid(ctx, grad):
    x = ctx.self
    # PyTorch multiplies by 1/6 rounded to float32, even for float64 gradients
    return grad * _mask((x > -3) & (x < 3), grad) * _ONE_SIXTH_FLOAT32


_ONE_SIXTH_FLOAT32 = float(np.float32(1.0) / np.float32(6.0))


@derivative("hardswish", "HardswishBackward0", saves=("self",))
def _hardswish(ctx, grad):
    x = ctx.self
    middle = x / 3 + 0.5
    slope = torch.where(x < -3, torch.zeros_like(x),
                        torch.where(x <= 3, middle, torch.ones_like(x)))
    return grad * slope


@derivative("log_sigmoid", "LogSigmoidBackward0", saves=("self",))
def _log_sigmoid(ctx, grad):
    return grad * torch.sigmoid(-ctx.self)


@derivative("gelu", "GeluBackward0", saves=("self", "approximate"))
def _gelu(ctx, grad):
    return _ops().gelu_backward(grad, ctx.self, ctx.approximate)


def _gelu_second_derivative(x, approximate):
    """gelu''(x). 'none': phi(x) (2 - x^2) with phi the normal density. 'tanh': with
    u = k (x + c x^3) and t = tanh(u), (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2)."""
    if approximate == "tanh":
        k, c = math.sqrt(2 / math.pi), 0.044715
        t = torch.tanh(k * (x + c * x * x * x))
        du = k * (1 + 3 * c * x * x)
        d2u = (6 * k * c) * x
        return (1 - t * t) * (du + 0.5 * x * (d2u - 2 * t * du * du))
    pdf = torch.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
    return pdf * (2 - x * x)


# gelu_backward(g, x) = g * gelu'(x): linear in g, and g * gelu''(x) for x.
@derivative("gelu_backward", "GeluBackwardBackward0", inputs=("grad_output", "self"),
            saves=("grad_output", "self", "approximate"))
def _gelu_backward(ctx, gg):
    x = ctx.self
    grad_g = _ops().gelu_backward(gg, x, ctx.approximate)
    grad_x = gg * ctx.grad_output * _gelu_second_derivative(x, ctx.approximate)
    return grad_g, grad_x


@derivative("silu", "SiluBackward0", saves=("self",))
def _silu(ctx, grad):
    x = ctx.self
    if not is_grad_enabled() and not x.is_complex():  # a first-order backward: the fused op
        return _ops().silu_backward(grad, x)
    # differentiating the gradient (create_graph): the composition, as PyTorch does, so the
    # graph is built of ordinary ops (MulBackward0, ...). Complex input (which PyTorch refuses
    # to differentiate) also takes it: the gradient conjugates the slope, silu_backward not.
    s = torch.sigmoid(x)
    return grad * _conj(s * (1 + x * (1 - s)))


# silu_backward(g, x) = g * silu'(x) (holomorphic in both), silu'' = s (1 - s) (2 + x (1 - 2 s)).
# PyTorch has no derivative for silu_backward itself (it raises); this row gives the true one.
@derivative("silu_backward", "SiluBackwardBackward0", inputs=("grad_output", "self"),
            saves=("grad_output", "self"))
def _silu_backward(ctx, gg):
    x = ctx.self
    s = torch.sigmoid(x)
    grad_g = _ops().silu_backward(gg, _conj(x))
    grad_x = gg * _conj(ctx.grad_output * (s * (1 - s) * (2 + x * (1 - 2 * s))))
    return grad_g, grad_x


@derivative("mish", "MishBackward0", saves=("self",))
def _mish(ctx, grad):
    x = ctx.self
    t = torch.tanh(torch.nn.functional.softplus(x))
    return grad * (t + x * torch.sigmoid(x) * (1 - t * t))


@derivative("softplus", "SoftplusBackward0", saves=("self", "beta", "threshold"))
def _softplus(ctx, grad):
    x = ctx.self
    linear = x * ctx.beta > ctx.threshold
    return grad * torch.where(linear, torch.ones_like(x), torch.sigmoid(x * ctx.beta))


@derivative("_prelu_kernel", "PreluKernelBackward0", inputs=("self", "weight"),
            saves=("self", "weight"))
def _prelu(ctx, grad):
    x, w = ctx.self, ctx.weight
    positive = x > 0
    grad_x = grad * torch.where(positive, torch.ones_like(x), w.expand_as(x))
    grad_w = grad * torch.where(positive, torch.zeros_like(x), x)
    return grad_x, grad_w


# --- along a dimension ----------------------------------------------------------------------

@derivative("softmax", "SoftmaxBackward0", saves=("result", "dim"))
def _softmax(ctx, grad):
    y = ctx.result
    if y.ndim == 0:
        return grad * 0
    return _ops().softmax_backward_data(grad, y, ctx.dim, y.dtype)


@derivative("log_softmax", "LogSoftmaxBackward0", saves=("result", "dim"))
def _log_softmax(ctx, grad):
    y = ctx.result
    if y.ndim == 0:
        return grad * 0
    return _ops().log_softmax_backward_data(grad, y, ctx.dim, y.dtype)


# f(g, y) = y * (g - s) with s = sum(g * y): df/dg is the same op applied to the incoming
# gradient, and df/dy = gg * (g - s) - g * sum(gg * y).
@derivative("_softmax_backward_data", "SoftmaxBackwardDataBackward0",
            inputs=("grad_output", "output"), saves=("grad_output", "output", "dim"))
def _softmax_backward_data(ctx, gg):
    g, y, dim = ctx.grad_output, ctx.output, ctx.dim
    grad_g = _ops().softmax_backward_data(gg, y, dim, y.dtype)
    grad_y = gg * (g - torch.sum(g * y, dim, keepdim=True)) - \
        g * torch.sum(gg * y, dim, keepdim=True)
    return grad_g, grad_y


# f(g, y) = g - exp(y) * sum(g): df/dg = gg - sum(gg * exp(y)), df/dy = -gg * exp(y) * sum(g).
@derivative("_log_softmax_backward_data", "LogSoftmaxBackwardDataBackward0",
            inputs=("grad_output", "output"), saves=("grad_output", "output", "dim"))
def _log_softmax_backward_data(ctx, gg):
    g, y, dim = ctx.grad_output, ctx.output, ctx.dim
    e = torch.exp(y)
    grad_g = gg - torch.sum(gg * e, dim, keepdim=True)
    grad_y = -gg * e * torch.sum(g, dim, keepdim=True)
    return grad_g, grad_y


def _ops():
    return op_module("nn_activation")


@derivative("glu", "GluBackward0", saves=("self", "dim"))
def _glu(ctx, grad):
    first, second = ctx.self.chunk(2, ctx.dim)
    gate = torch.sigmoid(second)
    return torch.cat([grad * gate, grad * first * gate * (1 - gate)], ctx.dim)


@derivative("_pdist_forward", "PdistBackward0", saves=("self", "result", "p"))
def _pdist(ctx, grad):
    # Each pair's difference is a row of D = E @ x, where E has +1 at row i and -1 at row j:
    # the gradient is E^T @ (the vector-norm gradient of each difference).
    from .reductions import _norm_backward
    x = ctx.self
    n = x.shape[0]
    if grad.numel() == 0:
        return torch.zeros_like(x)
    rows, cols = torch.triu_indices(n, n, 1)
    pairs = torch.arange(rows.numel())
    signs = torch.zeros(rows.numel(), n, dtype=x.dtype)
    signs[pairs, rows] = 1
    signs[pairs, cols] = -1
    differences = signs @ x
    grad_differences = _norm_backward(grad, differences, ctx.result, ctx.p, (1,), False)
    return signs.t() @ grad_differences
