"""Derivative rows: neural-network ops (normalization).

Batch, layer and group norm share one formula. With x_hat = (x - mean) * rstd over the
normalized axes and g_hat the gradient reaching x_hat (the output gradient times the weight),

    dx = rstd * (g_hat - mean(g_hat) - x_hat * mean(g_hat * x_hat)),

the two means accounting for the statistics' own dependence on x. Weight and bias gradients
are sums of g * x_hat and g over everything but the parameter's axes. Batch norm in
evaluation mode normalizes with the running statistics, constants: dx = g_hat * rstd.

First-order backward reads the statistics the forward op saved (batch norm in training mode,
layer norm and group norm run as their own ops there, `native_batch_norm_backward`,
`native_layer_norm_backward` and `native_group_norm_backward`, which a plugin can serve). When the backward itself is
being differentiated (grad mode on: create_graph=True) it recomputes them from x with
differentiable reftorch ops, so that double backward sees how they depend on x.
"""
from __future__ import annotations

from ._table import derivative, not_differentiable, op_module, torch


def _compute(t):
    """Half types are differentiated in float32, like PyTorch's CPU kernels."""
    if t is not None and t.dtype in (torch.float16, torch.bfloat16):
        return t.float()
    return t


def _statistics(x, dims, eps, saved_mean, saved_rstd, shape):
    if torch.is_grad_enabled():
        mean = x.mean(dims, keepdim=True)
        return mean, torch.rsqrt(x.var(dims, correction=0, keepdim=True) + eps)
    return _compute(saved_mean).reshape(shape), _compute(saved_rstd).reshape(shape)


def normalized_input_grad(g_hat, x_hat, rstd, dims):
    """Gradient through x_hat = (x - mean(x)) * rstd(x) given g_hat = dL/dx_hat."""
    return rstd * (g_hat - g_hat.mean(dims, keepdim=True)
                   - x_hat * (g_hat * x_hat).mean(dims, keepdim=True))


def _sum_over(t, dims):
    return t.sum(dims) if dims else t


# Called only in a first-order backward (grad mode off); create_graph uses the composition.
not_differentiable("native_batch_norm_backward")
not_differentiable("native_layer_norm_backward")
not_differentiable("native_group_norm_backward")


@derivative("native_batch_norm", "NativeBatchNormBackward0",
            inputs=("input", "weight", "bias", "running_mean", "running_var"),
            saves=("input", "weight", "running_mean", "running_var", "result1", "result2",
                   "training", "eps"),
            outputs=("result0", "result1", "result2"), nondifferentiable_outputs=(1, 2))
def _batch_norm(ctx, grad, _mean_grad=None, _rstd_grad=None):
    needs = ctx.needs_input_grad
    if ctx.training and not torch.is_grad_enabled() and \
            ctx.input.dtype in (torch.float32, torch.float64) and grad.dtype is ctx.input.dtype:
        # a first-order backward: the one op (which a plugin serves in one pass)
        grads = op_module("nn_normalization").batch_norm_backward(
            grad, ctx.input, ctx.weight, ctx.result1, ctx.result2, needs[:3])
        return grads + (None, None)
    x, g, weight = _compute(ctx.input), _compute(grad), _compute(ctx.weight)
    dims = [0] + list(range(2, x.dim()))
    channel = (1, -1) + (1,) * (x.dim() - 2)
    if ctx.training:
        mean, rstd = _statistics(x, dims, ctx.eps, ctx.result1, ctx.result2, channel)
    else:
        mean = _compute(ctx.running_mean).reshape(channel)
        rstd = torch.rsqrt(_compute(ctx.running_var) + ctx.eps).reshape(channel)
    x_hat = (x - mean) * rstd
    g_hat = g if weight is None else g * weight.reshape(channel)
    grad_input = None
    if needs[0]:
        grad_input = normalized_input_grad(g_hat, x_hat, rstd, dims) if ctx.training \
            else g_hat * rstd
    grad_weight = (g * x_hat).sum(dims) if needs[1] else None
    grad_bias = g.sum(dims) if needs[2] else None
    return grad_input, grad_weight, grad_bias, None, None


@derivative("native_layer_norm", "NativeLayerNormBackward0", inputs=("input", "weight", "bias"),
            saves=("input", "weight", "result1", "result2", "normalized_shape", "eps"),
            outputs=("result0", "result1", "result2"), nondifferentiable_outputs=(1, 2))
def _layer_norm(ctx, grad, _mean_grad=None, _rstd_grad=None):
    if not torch.is_grad_enabled() and ctx.input.dtype in (torch.float32, torch.float64) \
            and grad.dtype is ctx.input.dtype:
        # a first-order backward: the one op (which a plugin serves in one pass per row)
        return op_module("nn_normalization").layer_norm_backward(
            grad, ctx.input, ctx.result1, ctx.result2, ctx.weight, len(ctx.normalized_shape),
            ctx.needs_input_grad[:3])
    x, g, weight = _compute(ctx.input), _compute(grad), _compute(ctx.weight)
    axis = x.dim() - len(ctx.normalized_shape)
    dims = list(range(axis, x.dim()))
    stats_shape = tuple(x.shape[:axis]) + (1,) * len(dims)
    mean, rstd = _statistics(x, dims, ctx.eps, ctx.result1, ctx.result2, stats_shape)
    return layer_norm_grads(x, g, weight, mean, rstd, dims, ctx.needs_input_grad)


def layer_norm_grads(x, g, weight, mean, rstd, dims, needs):
    """(grad_input, grad_weight, grad_bias) of layer norm over `dims` (the last ones) given its
    statistics (shaped to broadcast), in reftorch ops; None where `needs` says so. (The cuda
    plugin's native_layer_norm_backward runs this on the device.)"""
    leading = list(range(dims[0]))
    x_hat = (x - mean) * rstd
    g_hat = g if weight is None else g * weight
    grad_input = normalized_input_grad(g_hat, x_hat, rstd, dims) if needs[0] else None
    grad_weight = _sum_over(g * x_hat, leading) if needs[1] else None
    grad_bias = _sum_over(g, leading) if needs[2] else None
    return grad_input, grad_weight, grad_bias


@derivative("native_group_norm", "NativeGroupNormBackward0", inputs=("input", "weight", "bias"),
            saves=("input", "weight", "result1", "result2", "N", "group", "eps"),
            outputs=("result0", "result1", "result2"), nondifferentiable_outputs=(1, 2))
def _group_norm(ctx, grad, _mean_grad=None, _rstd_grad=None):
    x = ctx.input
    if not torch.is_grad_enabled() and x.dtype in (torch.float32, torch.float64) and \
            grad.dtype is x.dtype:
        # a first-order backward: the one op (which a plugin serves)
        group_norm_backward = op_module("nn_normalization").group_norm_backward
        C = x.shape[1] if x.dim() > 1 else 0
        return group_norm_backward(grad, x, ctx.result1, ctx.result2, ctx.weight, ctx.N, C,
                                   x.numel() // max(ctx.N * C, 1), ctx.group,
                                   ctx.needs_input_grad[:3])
    x, g, weight = _compute(x), _compute(grad), _compute(ctx.weight)
    groups = (ctx.N, ctx.group, x.numel() // max(ctx.N * ctx.group, 1))   # N may be 0
    mean, rstd = _statistics(x.reshape(groups), [2], ctx.eps, ctx.result1, ctx.result2,
                             (ctx.N, ctx.group, 1))
    return group_norm_grads(x, g, weight, mean, rstd, ctx.group, ctx.needs_input_grad)


def group_norm_grads(x, g, weight, mean, rstd, group, needs):
    """(grad_input, grad_weight, grad_bias) of group norm of an (N, C, ...) x in `group`
    groups given its statistics (N, group, 1), in reftorch ops; None where `needs` says so.
    (The cuda plugin's native_group_norm_backward runs this on the device.)"""
    N = x.shape[0]
    groups = (N, group, x.numel() // max(N * group, 1))
    channel = (1, -1) + (1,) * (x.dim() - 2)
    x_hat = ((x.reshape(groups) - mean) * rstd).reshape(x.shape)
    g_hat = g if weight is None else g * weight.reshape(channel)
    grad_input = None
    if needs[0]:
        grad_input = normalized_input_grad(g_hat.reshape(groups), x_hat.reshape(groups), rstd,
                                           [2]).reshape(x.shape)
    dims = [0] + list(range(2, x.dim()))
    grad_weight = (g * x_hat).sum(dims) if needs[1] else None
    grad_bias = g.sum(dims) if needs[2] else None
    return grad_input, grad_weight, grad_bias
