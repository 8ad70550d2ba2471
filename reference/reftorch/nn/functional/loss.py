"""torch.nn.functional: loss functions.

Each function checks its arguments the way torch.nn.functional does, turns the `reduction`
string (or the deprecated `size_average`/`reduce` pair) into the enum the torch-level op
takes, and calls that op in reftorch/_ops/nn_loss.py.
"""
from __future__ import annotations

import math
import warnings

from ..._ops import nn_loss as _L
from ..._ops.other_ops import broadcast_tensors
from .. import _reduction
from .activation import logsigmoid

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
           "cross_entropy", "ctc_loss", "gaussian_nll_loss", "hinge_embedding_loss", "huber_loss",
           "kl_div", "l1_loss", "margin_ranking_loss", "mse_loss", "multi_margin_loss",
           "multilabel_margin_loss", "multilabel_soft_margin_loss", "nll_loss",
           "poisson_nll_loss", "smooth_l1_loss", "soft_margin_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss"]


def _enum(size_average, reduce, reduction):
    """The reduction enum, from the legacy pair when either is given (with its warning)."""
    if size_average is not None or reduce is not None:
        reduction = _reduction.legacy_get_string(size_average, reduce)
    return _reduction.get_enum(reduction)


def _string(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return _reduction.legacy_get_string(size_average, reduce)
    return reduction


def _warn_size_mismatch(input, target):
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.size()}) that is different to the input "
                      f"size ({input.size()}). This will likely lead to incorrect results due to "
                      f"broadcasting. Please ensure they have the same size.", stacklevel=3)


def _weighted_reduction(loss, weight, input, reduction):
    """l1/mse with per-element weights: 'mean' is the weighted average."""
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / weight.sum()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', "
                     f"'sum'.")


def _broadcast(input, target):
    return broadcast_tensors(input, target)


# --- regression losses ------------------------------------------------------------------------

def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or sum) absolute difference; `weight` gives per-element weights."""
    _warn_size_mismatch(input, target)
    reduction = _string(size_average, reduce, reduction)
    input, target = _broadcast(input, target)
    if weight is not None:
        return _weighted_reduction((input - target).abs(), weight, input, reduction)
    return _L.l1_loss(input, target, _reduction.get_enum(reduction))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or sum) squared difference; `weight` gives per-element weights."""
    _warn_size_mismatch(input, target)
    reduction = _string(size_average, reduce, reduction)
    expanded_input, expanded_target = _broadcast(input, target)
    if weight is not None:
        return _weighted_reduction((expanded_input - expanded_target) ** 2, weight, input,
                                   reduction)
    return _L.mse_loss(expanded_input, expanded_target, _reduction.get_enum(reduction))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Squared error below `beta` (divided by beta), absolute error above; beta=0 is L1."""
    _warn_size_mismatch(input, target)
    reduction = _string(size_average, reduce, reduction)
    input, target = _broadcast(input, target)
    if beta == 0.0:
        return _L.l1_loss(input, target, _reduction.get_enum(reduction))
    return _L.smooth_l1_loss(input, target, _reduction.get_enum(reduction), beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Squared error below `delta`, delta-scaled absolute error above it."""
    _warn_size_mismatch(input, target)
    input, target = _broadcast(input, target)
    if weight is None:
        return _L.huber_loss(input, target, _reduction.get_enum(reduction), delta)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = _L.huber_loss(input, target, _reduction.get_enum("none"), delta) * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', "
                     f"'sum'.")


# --- classification losses --------------------------------------------------------------------

def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log likelihood of class-index targets given log-probabilities."""
    return _L.nll_loss(input, target, weight, _enum(size_average, reduce, reduction),
                       ignore_index)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over the class dim followed by nll_loss, or the cross entropy against
    class probabilities when target is floating and shaped like input."""
    return _L.cross_entropy_loss(input, target, weight, _enum(size_average, reduce, reduction),
                                 ignore_index, label_smoothing)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)) for probabilities x, each log clamped at -100."""
    reduction_enum = _enum(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.size()}) that is different to the "
                         f"input size ({input.size()}) is deprecated. Please ensure they have "
                         f"the same size.")
    if weight is not None:
        from ... import broadcast_shapes
        weight = weight.expand(broadcast_shapes(target.shape, weight.shape))
    return _L.binary_cross_entropy(input, target, weight, reduction_enum)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """binary_cross_entropy of sigmoid(input), in a numerically stable form."""
    reduction_enum = _enum(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.size()}) must be the same as input size "
                         f"({input.size()})")
    return _L.binary_cross_entropy_with_logits(input, target, weight, pos_weight,
                                               reduction_enum)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Negative log likelihood of a Poisson target with rate exp(input) (or input)."""
    reduction = _string(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    return _L.poisson_nll_loss(input, target, log_input, full, eps,
                               _reduction.get_enum(reduction))


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Negative log likelihood of target under N(input, var); var is clamped at eps (without
    gradient through the clamp, like PyTorch) and may omit the last dim or be a float."""
    from ... import no_grad, ones_like, unsqueeze
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ones_like(input)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = unsqueeze(var, -1)
        elif input.dim() == var.dim() and \
                sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1:
            pass  # one dim of size 1 that broadcasts (homoscedastic over it)
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence of target from input (input: log-probabilities).
    'batchmean' divides the sum by the batch size, which is the mathematical KL."""
    if size_average is not None or reduce is not None:
        reduction_enum = _enum(size_average, reduce, reduction)
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                          "the support size.'batchmean' divides only by the batch size, and "
                          "aligns with the KL div math definition.'mean' will be changed to "
                          "behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
        reduction_enum = _reduction.get_enum("sum" if reduction == "batchmean" else reduction)
    reduced = _L.kl_div(input, target, reduction_enum, log_target=log_target)
    if reduction == "batchmean" and input.dim() != 0:
        reduced = reduced / input.shape[0]
    return reduced


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per-class logistic losses averaged over the classes (last dim), then reduced."""
    reduction = _string(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(dim=class_dim) / input.shape[class_dim]
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(reduction + " is not valid")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist Temporal Classification loss (see reftorch.ctc_loss)."""
    return _L.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                       _reduction.get_enum(reduction), zero_infinity)


# --- margin and embedding losses --------------------------------------------------------------

def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    reduction_enum = _enum(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {input1.size()}, input2: {input2.size()}, "
                           f"target: {target.size()} ")
    return _L.margin_ranking_loss(input1, input2, target, margin, reduction_enum)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where target is -1."""
    return _L.hinge_embedding_loss(input, target, margin, _enum(size_average, reduce, reduction))


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Hinge loss between every target class and every non-target class (targets: class
    indices, ended by the first -1)."""
    return _L.multilabel_margin_loss(input, target, _enum(size_average, reduce, reduction))


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)): two-class logistic loss with targets +-1."""
    return _L.soft_margin_loss(input, target, _enum(size_average, reduce, reduction))


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1."""
    return _L.cosine_embedding_loss(input1, input2, target, margin,
                                    _enum(size_average, reduce, reduction))


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge loss: sum over wrong classes of max(0, margin - x[y] + x[i])^p / C."""
    reduction_enum = _enum(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    return _L.multi_margin_loss(input, target, p, margin, weight, reduction_enum)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the p-norm distance."""
    reduction_enum = _enum(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return _L.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                  reduction_enum)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """The triplet loss with any distance function (default: pairwise_distance)."""
    from ... import clamp_min, minimum, pairwise_distance
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {dims[0]}D, "
                           f"positive {dims[1]}D, and negative {dims[2]}D inputs")
    if distance_function is None:
        distance_function = pairwise_distance
    dist_pos = distance_function(anchor, positive)
    dist_neg = distance_function(anchor, negative)
    if swap:
        dist_neg = minimum(dist_neg, distance_function(positive, negative))
    loss = clamp_min(margin + dist_pos - dist_neg, 0)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    return loss
