"""Derivative rows: losses with dedicated kernels (the composite losses need no rows).

The formulas are written with reftorch ops, so they are themselves differentiable (double
backward) — except CTC, whose gradient is a NumPy kernel as in PyTorch. `reduction` is the
integer enum: 0 none, 1 mean, 2 sum. For 'none' the incoming gradient has the loss's shape;
otherwise it is 0-dim and broadcasts.
"""
from __future__ import annotations

from ._table import derivative, not_differentiable, op_module, torch  # noqa: F401

_NONE, _MEAN = 0, 1


def _scaled(grad, reduction, count):
    """The incoming gradient, divided by the element count for 'mean'."""
    return grad / count if reduction == _MEAN else grad


@derivative("mse_loss", "MseLossBackward0", inputs=("self", "target"),
            saves=("self", "target", "reduction"))
def _mse_loss(ctx, grad):
    # 2 (x - t) g with the 2 joining the (for 'mean' and 'sum' 0-dim) gradient first: one
    # pass over the inputs instead of two, and the same bits (doubling is exact)
    diff = ctx.self - ctx.target
    g = diff * (_scaled(grad, ctx.reduction, diff.numel()) * 2)
    return g, (-g if ctx.needs_input_grad[1] else None)


@derivative("smooth_l1_loss", "SmoothL1LossBackward0", inputs=("self", "target"),
            saves=("self", "target", "reduction", "beta"))
def _smooth_l1_loss(ctx, grad):
    diff = ctx.self - ctx.target
    slope = torch.where(diff.abs() < ctx.beta, diff / ctx.beta, diff.sign())
    g = slope * _scaled(grad, ctx.reduction, diff.numel())
    return g, -g


@derivative("huber_loss", "HuberLossBackward0", inputs=("self", "target"),
            saves=("self", "target", "reduction", "delta"))
def _huber_loss(ctx, grad):
    diff = ctx.self - ctx.target
    slope = torch.where(diff.abs() < ctx.delta, diff, ctx.delta * diff.sign())
    g = slope * _scaled(grad, ctx.reduction, diff.numel())
    return g, -g


@derivative("soft_margin_loss", "SoftMarginLossBackward0", inputs=("self", "target"),
            saves=("self", "target", "reduction"))
def _soft_margin_loss(ctx, grad):
    x, y = ctx.self, ctx.target
    g = -y * torch.sigmoid(-y * x) * _scaled(grad, ctx.reduction, x.numel())
    return g, None


def _clamped_log(x):
    return torch.clamp_min(torch.log(x), -100)


@derivative("binary_cross_entropy", "BinaryCrossEntropyBackward0",
            inputs=("self", "target", "weight"), saves=("self", "target", "weight", "reduction"))
def _binary_cross_entropy(ctx, grad):
    x, t = ctx.self, ctx.target
    g = _scaled(grad, ctx.reduction, x.numel())
    if ctx.weight is not None:
        g = g * ctx.weight
    # d/dx: (x - t) / (x (1 - x)), the denominator kept >= 1e-12 like PyTorch's kernel
    grad_input = (x - t) / torch.clamp_min((1 - x) * x, 1e-12) * g
    grad_target = (_clamped_log(1 - x) - _clamped_log(x)) * g
    return grad_input, grad_target, None


def _log_sigmoid(x):
    return torch.clamp_max(x, 0) - torch.log1p(torch.exp(-x.abs()))


@derivative("binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0",
            inputs=("self", "target", "weight", "pos_weight"),
            saves=("self", "target", "weight", "pos_weight", "reduction"))
def _binary_cross_entropy_with_logits(ctx, grad):
    x, t, pos_weight = ctx.self, ctx.target, ctx.pos_weight
    g = _scaled(grad, ctx.reduction, x.numel())
    if ctx.weight is not None:
        g = g * ctx.weight
    if pos_weight is None:
        grad_input = torch.sigmoid(x) - t
        grad_target = -x
    else:
        # loss = (1 - t) x - (1 + (pw - 1) t) log sigmoid(x)
        grad_input = (1 - t) - ((pos_weight - 1) * t + 1) * torch.sigmoid(-x)
        grad_target = -x - (pos_weight - 1) * _log_sigmoid(x)
    return grad_input * g, grad_target * g, None, None


def _nll_node(inputs, params):
    return "NllLoss2DBackward0" if inputs[0].dim() == 4 else "NllLossBackward0"


@derivative("nll_loss", _nll_node, inputs=("self", "target", "weight"),
            outputs=("result", "total_weight"), nondifferentiable_outputs=(1,),
            saves=("self", "target", "weight", "reduction", "ignore_index", "total_weight"))
def _nll_loss(ctx, grad, _total_weight_grad):
    """PyTorch's nll_loss_backward (one op, which a plugin may fuse): -weight[target] * grad at
    each target's class, 0 elsewhere and for ignored targets; 'mean' divides by the total
    weight."""
    return _loss_ops().nll_loss_backward(grad, ctx.self, ctx.target, ctx.weight, ctx.reduction,
                                         ctx.ignore_index, ctx.total_weight), None, None


def _nll_backward_node(inputs, params):
    return "NllLoss2DBackwardBackward0" if inputs[1].dim() == 4 else "NllLossBackwardBackward0"


def _nll_loss_backward(ctx, gg):
    """nll_loss_backward is linear in grad_output: its own gradient for grad_output is
    nll_loss of the incoming gradient (which has self's shape); none for self (zeros, as
    PyTorch's), target, weight or total_weight."""
    grad_g = _loss_ops().nll_loss(gg, ctx.target, ctx.weight, ctx.reduction, ctx.ignore_index)
    return grad_g, torch.zeros_like(gg), None, None, None


for _op in ("nll_loss_backward", "nll_loss2d_backward"):
    derivative(_op, _nll_backward_node,
               inputs=("grad_output", "self", "target", "weight", "total_weight"),
               saves=("target", "weight", "reduction", "ignore_index"))(_nll_loss_backward)


def _loss_ops():
    return op_module("nn_loss")


def _per_sample(grad, reduction, batch):
    """The gradient of each sample's loss: (N, 1) for 'none', else the shared 0-dim value."""
    if reduction == _NONE:
        return grad.reshape(-1, 1)
    return _scaled(grad, reduction, batch)


@derivative("multi_margin_loss", "MultiMarginLossBackward0", inputs=("self", "target", "weight"),
            saves=("self", "target", "weight", "p", "margin", "reduction"))
def _multi_margin_loss(ctx, grad):
    x = ctx.self
    classes = x.shape[-1] if x.dim() else 1
    x2 = x.reshape(-1, classes)
    target = ctx.target.reshape(-1, 1)
    z = ctx.margin - x2.gather(1, target) + x2
    is_target = torch.arange(classes).view(1, classes) == target
    coef = ((z > 0) & ~is_target).to(x.dtype)
    if ctx.p == 2:
        coef = 2 * z * coef
    if ctx.weight is not None:
        coef = coef * ctx.weight.gather(0, target.reshape(-1)).unsqueeze(1)
    spread = coef / classes * _per_sample(grad, ctx.reduction, x2.shape[0])
    # each active margin raises x[i] and lowers x[y] by the same amount
    grad_input = spread - is_target.to(x.dtype) * spread.sum(1, keepdim=True)
    return grad_input.reshape(x.shape), None, None


@derivative("multilabel_margin_loss", "MultilabelMarginLossBackward0",
            inputs=("self", "target"), outputs=("result", "is_target"),
            nondifferentiable_outputs=(1,), saves=("self", "target", "reduction"))
def _multilabel_margin_loss(ctx, grad, _is_target_grad):
    x = ctx.self
    classes = x.shape[-1] if x.dim() else 1
    x2 = x.reshape(-1, classes)
    target = ctx.target.reshape(x2.shape)
    valid = torch.cumprod((target >= 0).to(torch.int64), 1).bool()     # slots before the -1
    safe = torch.where(valid, target, torch.zeros_like(target))
    slot_class = (safe.unsqueeze(2) == torch.arange(classes).view(1, 1, classes)) \
        & valid.unsqueeze(2)                                            # (N, J, C)
    is_target = slot_class.any(1)                                       # (N, C)
    z = 1 - x2.gather(1, safe).unsqueeze(2) + x2.unsqueeze(1)           # (N, J, C)
    counted = valid.unsqueeze(2) & ~is_target.unsqueeze(1) & (z > 0)
    per_sample = _per_sample(grad, ctx.reduction, x2.shape[0])
    if ctx.reduction == _NONE:
        per_sample = per_sample.unsqueeze(2)
    spread = counted.to(x.dtype) / classes * per_sample                 # (N, J, C)
    lowered = (spread.sum(2, keepdim=True) * slot_class.to(x.dtype)).sum(1)
    return (spread.sum(1) - lowered).reshape(x.shape), None


@derivative("ctc_loss", "CtcLossBackward0",
            inputs=("log_probs", "targets", "input_lengths", "target_lengths"),
            outputs=("result", "log_alpha"), nondifferentiable_outputs=(1,),
            saves=("log_probs", "targets", "input_lengths", "target_lengths", "log_alpha",
                   "blank", "zero_infinity"))
def _ctc_loss(ctx, grad, _alpha_grad):
    from ..._ops.nn_loss import ctc_loss_backward
    return (ctc_loss_backward(grad, ctx.log_probs, ctx.targets, ctx.input_lengths,
                              ctx.target_lengths, ctx.log_alpha, ctx.blank, ctx.zero_infinity),
            None, None, None)
