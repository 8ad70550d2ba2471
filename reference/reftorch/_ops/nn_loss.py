"""Loss functions at the torch level: dedicated kernels, compositions, and the torch.X forms.

PyTorch implements some losses with their own kernels (and autograd nodes such as
MseLossBackward0, NllLossBackward0, CtcLossBackward0); those are structured ops here with
NumPy reference kernels. The others are compositions of ordinary ops in PyTorch too (l1,
kl_div, poisson/gaussian NLL, the margin and embedding losses), and are written the same way
here, so their autograd graphs look like PyTorch's.

`reduction` at this level is the integer enum PyTorch's C++ ops take: 0 none, 1 mean, 2 sum.
The functional forms in nn/functional/loss.py translate the strings. The public torch.X
forms (torch.kl_div, torch.ctc_loss, ...) default to 0 when called without it, as PyTorch's
do.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd.grad_mode import is_grad_enabled
from . import structured

__all__ = ["binary_cross_entropy_with_logits", "cosine_embedding_loss", "ctc_loss",
           "hinge_embedding_loss", "kl_div", "margin_ranking_loss", "poisson_nll_loss",
           "triplet_margin_loss"]

NONE, MEAN, SUM = 0, 1, 2


class _Torch:
    """The public API, resolved at call time (this module is imported while reftorch loads)."""
    def __getattr__(self, name):
        import reftorch
        return getattr(reftorch, name)


torch = _Torch()


# --- shared helpers ---------------------------------------------------------------------------

def _reduce_array(loss, reduction):
    """Apply a reduction to a NumPy loss array (mean of nothing is NaN, like PyTorch)."""
    if reduction == MEAN:
        return np.asarray(loss.sum(dtype=loss.dtype) / loss.dtype.type(loss.size))
    if reduction == SUM:
        return np.asarray(loss.sum(dtype=loss.dtype))
    return loss


def apply_reduction(loss, reduction):
    """The same for a tensor (composite losses): none, mean or sum."""
    if reduction == MEAN:
        return loss.mean()
    if reduction == SUM:
        return loss.sum()
    return loss


def _compute_dtype(dtype):
    """PyTorch's CPU loss kernels compute half and bfloat16 in float32 and round the result."""
    return np.float32 if dtype in (np.float16, D.bfloat16.numpy_dtype) else dtype


def _is_floating(a):
    return isinstance(a, np.ndarray) and (a.dtype.kind == "f" or
                                          a.dtype == D.bfloat16.numpy_dtype)


def _floating_kernel(fn):
    """Wrap `fn(*arrays, **params)` so reduced-precision inputs are computed in float32; the
    floating results come back in the inputs' (promoted) floating dtype."""
    def kernel(*arrays, **params):
        floating = [a.dtype for a in arrays if _is_floating(a)]
        out_dtype = np.result_type(*floating)
        work = _compute_dtype(out_dtype)
        cast = [a.astype(work, copy=False) if _is_floating(a) else a for a in arrays]
        result = fn(*cast, **params)
        if isinstance(result, tuple):
            return tuple(np.asarray(r).astype(out_dtype, copy=False) for r in result)
        return np.asarray(result).astype(out_dtype, copy=False)
    kernel.__name__ = fn.__name__
    kernel.__doc__ = fn.__doc__
    return kernel


def _require_floating(x, kernel_name):
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for "
                                  f"'{x.dtype.scalar_name}'")


def refuse_grad(fn_name, arg_name, tensor):
    """PyTorch has no derivative for some arguments (class weights): refuse them at once."""
    if tensor is not None and is_grad_enabled() and tensor.requires_grad:
        raise RuntimeError(f"The function '{fn_name}' is not differentiable with respect to "
                           f"argument '{arg_name}'. This input cannot have requires_grad True.")


def _same_dtype(expected, other):
    if other is not None and other.dtype != expected.dtype:
        raise RuntimeError(f"expected scalar type {expected.dtype.scalar_name} but found "
                           f"{other.dtype.scalar_name}")


# --- pointwise-difference losses: mse, smooth L1, huber, soft margin --------------------------

def _mse_kernel(x, t, reduction=MEAN):
    diff = x - t
    return _reduce_array(diff * diff, reduction)


def _smooth_l1_kernel(x, t, reduction=MEAN, beta=1.0):
    # Quadratic within `beta` of the target (scaled so the pieces meet), linear outside.
    diff = np.abs(x - t)
    loss = np.where(diff < beta, 0.5 * diff * diff / beta if beta else diff, diff - 0.5 * beta)
    return _reduce_array(loss.astype(diff.dtype), reduction)


def _huber_kernel(x, t, reduction=MEAN, delta=1.0):
    # Huber is smooth L1 scaled by delta: 0.5 d^2 near the target, delta (|d| - delta/2) beyond.
    diff = np.abs(x - t)
    loss = np.where(diff < delta, 0.5 * diff * diff, delta * (diff - 0.5 * delta))
    return _reduce_array(loss.astype(diff.dtype), reduction)


def _soft_margin_kernel(x, t, reduction=MEAN):
    # log(1 + exp(-y x)), evaluated without overflow for large |y x|.
    z = -t * x
    loss = np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z)))
    return _reduce_array(loss.astype(z.dtype), reduction)


MSE = structured.declare("mse_loss", _floating_kernel(_mse_kernel), family="nn",
                         params={"reduction": MEAN})
SMOOTH_L1 = structured.declare("smooth_l1_loss", _floating_kernel(_smooth_l1_kernel),
                               family="nn", params={"reduction": MEAN, "beta": 1.0})
HUBER = structured.declare("huber_loss", _floating_kernel(_huber_kernel), family="nn",
                           params={"reduction": MEAN, "delta": 1.0})
SOFT_MARGIN = structured.declare("soft_margin_loss", _floating_kernel(_soft_margin_kernel),
                                 family="nn", params={"reduction": MEAN})


def _pointwise_loss(op, kernel_name, input, target, params):
    """Run a two-operand loss kernel: floating input; an integer target is taken as input's
    dtype (mixed floating dtypes promote, as for any pointwise op)."""
    _require_floating(input, kernel_name)
    if not target.dtype.is_floating_point:
        target = target.to(input.dtype)
    return structured.run(op, (input, target), params)


def mse_loss(input, target, reduction=MEAN):
    """torch._C._nn.mse_loss: (input - target)^2, reduced."""
    return _pointwise_loss(MSE, "mse_cpu", input, target, {"reduction": reduction})


def l1_loss(input, target, reduction=MEAN):
    """|input - target|, reduced (a composition in PyTorch 2.x too: AbsBackward0, MeanBackward0)."""
    return apply_reduction(torch.abs(input - target), reduction)


def smooth_l1_loss(input, target, reduction=MEAN, beta=1.0):
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return _pointwise_loss(SMOOTH_L1, "smooth_l1_cpu", input, target,
                           {"reduction": reduction, "beta": float(beta)})


def huber_loss(input, target, reduction=MEAN, delta=1.0):
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise_loss(HUBER, "huber_cpu", input, target,
                           {"reduction": reduction, "delta": float(delta)})


def soft_margin_loss(input, target, reduction=MEAN):
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{input.dtype.scalar_name}")
    refuse_grad("soft_margin_loss", "target", target)
    input, target = torch.broadcast_tensors(input, target)
    return _pointwise_loss(SOFT_MARGIN, "soft_margin_loss", input, target,
                           {"reduction": reduction})


# --- binary cross entropy ---------------------------------------------------------------------

def _bce_kernel(x, t, w, reduction=MEAN):
    # PyTorch clamps each log at -100 so that a confident wrong prediction costs 100, not inf.
    log_x = np.maximum(np.log(x), -100)
    log_1mx = np.maximum(np.log1p(-x), -100)
    loss = -(t * log_x + (1 - t) * log_1mx)
    if w is not None:
        loss = loss * w
    return _reduce_array(loss.astype(x.dtype), reduction)


def _log_sigmoid(x):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): no overflow for either sign."""
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def _bce_logits_kernel(x, t, w, pos_weight, reduction=MEAN):
    # -[pw t log s(x) + (1 - t) log(1 - s(x))] = (1 - t) x - (1 + (pw - 1) t) log s(x).
    log_sig = _log_sigmoid(x)
    if pos_weight is not None:
        log_sig = log_sig * ((pos_weight - 1) * t + 1)
    loss = (1 - t) * x - log_sig
    if w is not None:
        loss = loss * w
    return _reduce_array(np.asarray(loss).astype(np.result_type(x, t)), reduction)


BCE = structured.declare("binary_cross_entropy", _floating_kernel(_bce_kernel), family="nn",
                         params={"reduction": MEAN})
BCE_LOGITS = structured.declare("binary_cross_entropy_with_logits",
                                _floating_kernel(_bce_logits_kernel), family="nn",
                                params={"reduction": MEAN})


def binary_cross_entropy(input, target, weight=None, reduction=MEAN):
    """torch._C._nn.binary_cross_entropy: input holds probabilities in [0, 1]."""
    _require_floating(input, "binary_cross_entropy")
    for other in (target, weight):
        if other is not None and other.dtype != input.dtype:
            raise RuntimeError(f"Found dtype {other.dtype.scalar_name} but expected "
                               f"{input.dtype.scalar_name}")
    refuse_grad("binary_cross_entropy", "weight", weight)
    values = input.detach()._host_array()
    if not ((values >= 0) & (values <= 1)).all():
        raise RuntimeError("all elements of input should be between 0 and 1")
    return structured.run(BCE, (input, target, weight), {"reduction": reduction})


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=NONE):
    """torch.binary_cross_entropy_with_logits: BCE of sigmoid(input), computed stably."""
    _require_floating(input, "binary_cross_entropy_with_logits")
    refuse_grad("binary_cross_entropy_with_logits", "weight", weight)
    refuse_grad("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{target.dtype.scalar_name}")
    shape = torch.broadcast_shapes(input.shape, target.shape,
                                   *(w.shape for w in (weight, pos_weight) if w is not None))
    input, target = input.expand(shape), target.expand(shape)
    weight = None if weight is None else weight.expand(shape)
    pos_weight = None if pos_weight is None else pos_weight.expand(shape)
    return structured.run(BCE_LOGITS, (input, target, weight, pos_weight),
                          {"reduction": reduction})


# --- negative log likelihood ------------------------------------------------------------------

def _nll_kernel(x, target, weight, reduction=MEAN, ignore_index=-100):
    """Returns (loss, total_weight). x is (N, C, ...) or (C,); target is x without dim C."""
    class_dim = 0 if x.ndim == 1 else 1
    num_classes = x.shape[class_dim]
    target = target.astype(np.int64)
    ignored = target == ignore_index
    safe = np.where(ignored, 0, target)
    bad = ~ignored & ((target < 0) | (target >= num_classes))
    if bad.any():
        raise IndexError(f"Target {int(target[bad].flat[0])} is out of bounds.")
    picked = np.take_along_axis(x, np.expand_dims(safe, class_dim), class_dim)
    picked = np.squeeze(picked, class_dim)
    w = np.ones(num_classes, x.dtype) if weight is None else weight
    w_target = np.where(ignored, 0, w[safe]).astype(x.dtype)
    loss = -picked * w_target
    total_weight = np.asarray(w_target.sum(dtype=x.dtype))
    if reduction == NONE:
        return loss, total_weight
    if reduction == SUM:
        return np.asarray(loss.sum(dtype=x.dtype)), total_weight
    # mean: divide by the summed weight of the targets that count (NaN if none does)
    return np.asarray(loss.sum(dtype=x.dtype) / total_weight), total_weight


NLL = structured.declare("nll_loss", _floating_kernel(_nll_kernel), family="nn",
                         params={"reduction": MEAN, "ignore_index": -100})


def _nll_backward_kernel(grad, x, target, weight, total_weight, reduction=MEAN,
                         ignore_index=-100):
    """The gradient of nll_loss for x: 0 everywhere but -(weight[t] * g) at each sample's
    target class t (0 for ignored targets), where g is the sample's incoming gradient, or the
    shared one divided by total_weight for 'mean'. A one-hot comparison places the values
    without an index scatter."""
    class_dim = 0 if x.ndim == 1 else 1
    num_classes = x.shape[class_dim]
    target = np.expand_dims(target.astype(np.int64), class_dim)
    bad = (target != ignore_index) & ((target < 0) | (target >= num_classes))
    if bad.any():
        raise IndexError(f"Target {int(target[bad].flat[0])} is out of bounds.")
    along_classes = [num_classes if d == class_dim else 1 for d in range(x.ndim)]
    classes = np.arange(num_classes).reshape(along_classes)
    picked = (target == classes) & (target != ignore_index)
    coef = picked.astype(x.dtype)
    if weight is not None:
        coef = coef * weight.reshape(along_classes)
    if reduction == NONE and x.ndim > 1:
        grad = np.expand_dims(grad, class_dim)
    else:  # one loss value: its gradient is one number, whatever its shape
        if grad.size != 1:
            raise RuntimeError(f"Expected a single element grad_output tensor, but got: "
                               f"[{', '.join(map(str, grad.shape))}]")
        grad = grad.reshape(())
        if reduction == MEAN:
            grad = grad / total_weight.reshape(())
    # a select, not a product: with every target ignored the mean's 0/0 must not leak a NaN
    return np.where(picked, -coef * grad, 0)


def _check_nll_args(input, target, weight):
    if target.dtype not in (D.int64, D.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{target.dtype.scalar_name}")
    _require_floating(input, "nll_loss_out_frame")
    if weight is not None:
        num_classes = input.shape[0 if input.dim() == 1 else 1]
        if weight.dim() != 1 or weight.numel() != num_classes:
            raise RuntimeError(f"weight tensor should be defined either for all {num_classes} "
                               f"classes or no classes but got weight tensor of shape: "
                               f"[{', '.join(map(str, weight.shape))}]")
        _same_dtype(input, weight)
    refuse_grad("nll_loss_forward", "weight", weight)


# nll_loss's gradient as one op (PyTorch's nll_loss_backward, and nll_loss2d_backward for the
# 4-D form), so a plugin can fuse it. Inputs (grad_output, self, target, weight, total_weight).
NLL_BACKWARD = structured.declare("nll_loss_backward", _floating_kernel(_nll_backward_kernel),
                                  family="nn", params={"reduction": MEAN, "ignore_index": -100})
NLL2D_BACKWARD = structured.declare("nll_loss2d_backward",
                                    _floating_kernel(_nll_backward_kernel), family="nn",
                                    params={"reduction": MEAN, "ignore_index": -100})


def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """PyTorch's nll_loss_backward (nll_loss2d_backward for a 4-D self): the gradient of
    nll_loss(self, target, weight, reduction, ignore_index) given the loss's gradient and the
    forward's total_weight."""
    op = NLL2D_BACKWARD if self.dim() == 4 else NLL_BACKWARD
    return structured.run(op, (grad_output, self, target, weight, total_weight),
                          {"reduction": reduction, "ignore_index": int(ignore_index)})


def nll_loss(input, target, weight=None, reduction=MEAN, ignore_index=-100):
    """torch._C._nn.nll_loss_nd: -input[target] (weighted), over inputs (C,), (N, C) or
    (N, C, d1, ...). Like PyTorch, inputs of 3 or more than 4 dims are viewed as 4-D, so the
    node is NllLoss2DBackward0 for every input with spatial dims."""
    # (the shape tuples, read once: .dim() and .shape on every check were a fifth of a
    # small loss's time)
    dims, target_shape = len(input._shape), target._shape
    if dims < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {dims})")
    target_batch = target_shape[0] if target_shape else 1
    if dims != 1 and input._shape[0] != target_batch:
        raise ValueError(f"Expected input batch_size ({input._shape[0]}) to match target "
                         f"batch_size ({target_batch}).")
    _check_nll_args(input, target, weight)
    params = {"reduction": reduction, "ignore_index": int(ignore_index)}
    if dims <= 2:
        if len(target_shape) > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        return structured.run(NLL, (input, target, weight), params)[0]
    if dims == 4:
        if tuple(target.shape) != (input.shape[0],) + tuple(input.shape[2:]):
            raise RuntimeError(f"size mismatch (got input: [{', '.join(map(str, input.shape))}]"
                               f" , target: [{', '.join(map(str, target.shape))}]")
        return structured.run(NLL, (input, target, weight), params)[0]
    batch, classes = input.shape[0], input.shape[1]
    out_size = (batch,) + tuple(input.shape[2:])
    if tuple(target.shape) != out_size:
        raise RuntimeError(f"Expected target size [{', '.join(map(str, out_size))}], got "
                           f"[{', '.join(map(str, target.shape))}]")
    spatial = (1, -1) if input.numel() > 0 else (0, 0)
    flat_input = input.contiguous().view(batch, classes, *spatial)
    flat_target = target.contiguous().view(batch, *(spatial if target.numel() > 0 else (0, 0)))
    loss = structured.run(NLL, (flat_input, flat_target, weight), params)[0]
    return loss.view(out_size) if reduction == NONE else loss


# --- cross entropy (log_softmax + nll, label smoothing, class probabilities) -----------------

def _class_view(weight, ndim, class_dim):
    """A (C,) class weight shaped to broadcast along `class_dim` of an ndim-dim tensor."""
    shape = [1] * ndim
    shape[class_dim] = weight.shape[0]
    return weight.view(shape)


def cross_entropy_loss(input, target, weight=None, reduction=MEAN, ignore_index=-100,
                       label_smoothing=0.0):
    """torch._C._nn.cross_entropy_loss: class-index or class-probability targets."""
    dims = len(input._shape)
    class_dim = 0 if dims == 1 else 1
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing:g}")
    float_target = target.dtype.is_floating_point
    if dims >= 1 and float_target and target._shape == input._shape:
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        return _cross_entropy_probabilities(input, target, weight, reduction, class_dim,
                                            label_smoothing)
    if dims < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {dims})")
    if float_target and dims <= 2 and len(target._shape) > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"log_softmax_lastdim_kernel_impl\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    log_probs = torch.log_softmax(input, class_dim)
    if label_smoothing > 0.0:
        return _cross_entropy_smoothed(log_probs, target, weight, reduction, ignore_index,
                                       label_smoothing, class_dim)
    return nll_loss(log_probs, target, weight, reduction, ignore_index)


def _cross_entropy_probabilities(input, target, weight, reduction, class_dim, smoothing):
    num_classes = input.shape[class_dim]
    if smoothing > 0:
        target = target * (1 - smoothing) + smoothing / num_classes
    log_probs = torch.log_softmax(input, class_dim)
    terms = log_probs * target
    if weight is not None:
        terms = terms * _class_view(weight, input.dim(), class_dim)
    if reduction == MEAN:
        if input.numel() == 0:
            return -terms.sum() * float("nan")
        return -terms.sum() / (input.numel() / num_classes)
    if reduction == SUM:
        return -terms.sum()
    return -terms.sum(class_dim)


def _cross_entropy_smoothed(log_probs, target, weight, reduction, ignore_index, smoothing,
                            class_dim):
    """(1 - eps) * nll + eps * (the loss against the uniform distribution), where the
    uniform part skips ignored targets and, for 'mean', is normalised like nll's mean."""
    num_classes = log_probs.shape[class_dim]
    nll = nll_loss(log_probs, target, weight, reduction, ignore_index)
    ignored = target == ignore_index
    if weight is not None:
        smooth = -(log_probs * _class_view(weight, log_probs.dim(), class_dim)).sum(class_dim)
    else:
        smooth = -log_probs.sum(class_dim)
    smooth = smooth.masked_fill(ignored, 0.0)
    if reduction == MEAN:
        if weight is not None:
            kept = target[~ignored].flatten()
            smooth = smooth.sum() / weight.gather(0, kept).sum()
        else:
            smooth = smooth.sum() / (~ignored).sum()
    elif reduction == SUM:
        smooth = smooth.sum()
    return (1 - smoothing) * nll + smooth * (smoothing / num_classes)


# --- margin losses with class-index targets ---------------------------------------------------

def _margins(x, target, margin):
    """(N, C) margins `margin - x[n, y_n] + x[n, i]`, and the mask of i != y_n."""
    picked = np.take_along_axis(x, target[:, None], 1)
    others = np.arange(x.shape[1])[None, :] != target[:, None]
    return margin - picked + x, others


def _multi_margin_kernel(x, target, weight, p=1, margin=1.0, reduction=MEAN):
    """sum over i != y of max(0, margin - x[y] + x[i])^p * w[y], divided by C."""
    unbatched = x.ndim <= 1
    x2 = x.reshape(1 if unbatched else x.shape[0], -1)
    t2 = target.reshape(-1).astype(np.int64)
    z, others = _margins(x2, t2, margin)
    hinge = np.where(others & (z > 0), z, 0).astype(x.dtype)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight[t2][:, None]
    loss = (hinge.sum(1) / x.dtype.type(x2.shape[1])).astype(x.dtype)
    if unbatched and reduction == NONE:
        loss = loss.reshape(())
    return _reduce_array(loss, reduction)


MULTI_MARGIN = structured.declare("multi_margin_loss", _multi_margin_kernel, family="nn",
                                  params={"p": 1, "margin": 1.0, "reduction": MEAN},
                                  dtypes={D.float32, D.float64})


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction=MEAN):
    """torch._C._nn.multi_margin_loss (p in {1, 2} is checked by the functional form)."""
    if input.dim() > 2 or (input.dim() == 2 and input.shape[1] == 0) or \
            (input.dim() == 1 and input.numel() == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: [{', '.join(map(str, input.shape))}]")
    num_classes = input.shape[-1] if input.dim() else 1
    batch = input.shape[0] if input.dim() == 2 else 1
    if target.dtype != D.int64:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.scalar_name}")
    if target.numel() != batch or target.dim() > 1:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal "
                           f"to the number of input samples (batch size). Expected target "
                           f"size [{batch}], but got [{', '.join(map(str, target.shape))}]. "
                           f"Input shape: [{', '.join(map(str, input.shape))}].")
    if weight is not None:
        if weight.numel() != num_classes:
            raise RuntimeError(f"inconsistent weight size, expected {num_classes} but got "
                               f"[{', '.join(map(str, weight.shape))}]")
        _same_dtype(input, weight)
    refuse_grad("multi_margin_loss", "weight", weight)
    values = target.detach()._host_array()
    if ((values < 0) | (values >= num_classes)).any():
        raise RuntimeError("target out of range")
    if input.dtype.is_floating_point and input.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"\"multi_margin_loss_cpu_kernel\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    return structured.run(MULTI_MARGIN, (input, target, weight),
                          {"p": int(p), "margin": float(margin), "reduction": reduction})


def _multilabel_masks(target):
    """(valid target slots, is-target class) masks: a row's targets end at its first -1."""
    before_end = np.cumprod(target >= 0, axis=-1).astype(bool)
    is_target = np.zeros(target.shape, bool)
    rows = np.broadcast_to(np.arange(target.shape[0])[:, None], target.shape)
    is_target[rows[before_end], target[before_end]] = True
    return before_end, is_target


def multilabel_hinges(x, target):
    """(N, J, C) hinge terms max(0, 1 - (x[y_j] - x[i])) for valid slots j, non-target i."""
    valid, is_target = _multilabel_masks(target)
    safe = np.where(valid, target, 0)
    picked = np.take_along_axis(x, safe, 1)                          # (N, J)
    z = 1 - picked[:, :, None] + x[:, None, :]                       # (N, J, C)
    counted = valid[:, :, None] & ~is_target[:, None, :] & (z > 0)
    return np.where(counted, z, 0).astype(x.dtype), counted, is_target


def _multilabel_margin_kernel(x, target, reduction=MEAN):
    unbatched = x.ndim <= 1
    x2 = x.reshape(1 if unbatched else x.shape[0], -1)
    t2 = target.reshape(x2.shape).astype(np.int64)
    hinges, _, is_target = multilabel_hinges(x2, t2)
    loss = (hinges.sum((1, 2)) / x.dtype.type(max(x2.shape[1], 1))).astype(x.dtype)
    if unbatched:
        loss = loss.reshape(())
    return _reduce_array(loss, reduction), is_target.reshape(x.shape).astype(x.dtype)


MULTILABEL_MARGIN = structured.declare("multilabel_margin_loss", _multilabel_margin_kernel,
                                       family="nn", params={"reduction": MEAN},
                                       dtypes={D.float32, D.float64})


def multilabel_margin_loss(input, target, reduction=MEAN):
    if target.dtype != D.int64:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.scalar_name}")
    if input.dim() > 2 or tuple(target.shape) != tuple(input.shape) or \
            (input.dim() == 2 and input.shape[1] == 0):
        raise RuntimeError(f"inconsistent target size: [{', '.join(map(str, target.shape))}] "
                           f"for input of size: [{', '.join(map(str, input.shape))}]")
    num_classes = input.shape[-1] if input.dim() else 1
    values = target.detach()._host_array()
    if ((values < -1) | (values >= num_classes)).any():
        raise RuntimeError("argument #2 'target' is out of range")
    if input.dtype.is_floating_point and input.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"\"multilabel_margin_loss_forward_out_frame\" not "
                                  f"implemented for '{input.dtype.scalar_name}'")
    return structured.run(MULTILABEL_MARGIN, (input, target), {"reduction": reduction})[0]


# --- connectionist temporal classification ----------------------------------------------------

NEG_INF = -np.inf


def _logsumexp_stack(*terms):
    """Elementwise log(sum(exp(terms))) that keeps -inf (no path) without NaNs."""
    stacked = np.stack(terms)
    top = stacked.max(0)
    safe_top = np.where(np.isfinite(top), top, 0)
    return np.log(np.exp(stacked - safe_top).sum(0)) + safe_top


def _extended_labels(targets, target_lengths, blank):
    """The blank-interleaved label sequences l' (N, 2S+1), their lengths, and which positions
    may be reached by skipping the blank before them (a label differing from l'[s-2])."""
    batch, max_len = targets.shape
    width = 2 * max_len + 1
    ext = np.full((batch, width), blank, np.int64)
    ext[:, 1::2] = targets
    positions = np.arange(width)
    valid = positions[None, :] < (2 * target_lengths[:, None] + 1)
    can_skip = np.zeros((batch, width), bool)
    can_skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    return ext, valid, can_skip


def _padded_targets(targets, target_lengths):
    """Targets as padded (N, S): from (N, S) already, or from one concatenated 1-D tensor."""
    if targets.ndim == 2:
        return targets.astype(np.int64)
    max_len = int(target_lengths.max()) if target_lengths.size else 0
    starts = np.concatenate([[0], np.cumsum(target_lengths)[:-1]]).astype(np.int64)
    offsets = np.arange(max_len)[None, :]
    index = np.minimum(starts[:, None] + offsets, max(targets.size - 1, 0))
    padded = targets[index] if targets.size else np.zeros((len(target_lengths), max_len))
    return np.where(offsets < target_lengths[:, None], padded, 0).astype(np.int64)


def _ctc_alpha(log_probs, ext, valid, can_skip, input_lengths):
    """Forward variables log alpha (N, T, 2S+1): a loop over time, vectorized over the batch
    and label positions. Steps past an element's input length are -inf (never read)."""
    steps, batch, _ = log_probs.shape
    width = ext.shape[1]
    emit = np.take_along_axis(log_probs.transpose(1, 0, 2), ext[:, None, :], 2)  # (N, T, W)
    alpha = np.full((batch, steps, width), NEG_INF, log_probs.dtype)
    if steps == 0:
        return alpha, emit
    start = np.full((batch, width), NEG_INF, log_probs.dtype)
    start[:, :2] = emit[:, 0, :2]
    alpha[:, 0] = np.where(valid, start, NEG_INF)
    for t in range(1, steps):
        prev = alpha[:, t - 1]
        shift1 = np.concatenate([np.full((batch, 1), NEG_INF), prev[:, :-1]], 1)
        shift2 = np.concatenate([np.full((batch, 2), NEG_INF), prev[:, :-2]], 1)
        shift2 = np.where(can_skip, shift2, NEG_INF)
        step = _logsumexp_stack(prev, shift1, shift2) + emit[:, t]
        alpha[:, t] = np.where(valid & (t < input_lengths)[:, None], step, NEG_INF)
    return alpha, emit


def _ctc_end_positions(target_lengths):
    """The last two positions of l' (final blank, final label); the label is absent if L=0."""
    return 2 * target_lengths, np.maximum(2 * target_lengths - 1, 0)


def _ctc_setup(log_probs, targets, input_lengths, target_lengths, blank):
    """Lengths as int64, extended labels and their masks, and each label's log probability."""
    input_lengths = input_lengths.astype(np.int64)
    target_lengths = target_lengths.astype(np.int64)
    padded = _padded_targets(targets, target_lengths)
    ext, valid, can_skip = _extended_labels(padded, target_lengths, blank)
    return input_lengths, target_lengths, ext, valid, can_skip


def _ctc_nll_from_alpha(alpha, input_lengths, target_lengths):
    """-log p(target): the paths that end, at the last input step, on the final blank or the
    final label. No input step leaves only the empty target possible."""
    batch = np.arange(alpha.shape[0])
    final = alpha[batch, np.maximum(input_lengths - 1, 0)]                  # (N, W)
    blank_end, label_end = _ctc_end_positions(target_lengths)
    ends = np.stack([final[batch, blank_end],
                     np.where(target_lengths > 0, final[batch, label_end], NEG_INF)])
    nll = -_logsumexp_stack(*ends)
    return np.where(input_lengths > 0, nll, np.where(target_lengths > 0, np.inf, 0))


def _ctc_kernel(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """Returns (negative log likelihood (N,), log alpha (N, T, 2S+1))."""
    input_lengths, target_lengths, ext, valid, can_skip = _ctc_setup(
        log_probs, targets, input_lengths, target_lengths, blank)
    alpha, _ = _ctc_alpha(log_probs, ext, valid, can_skip, input_lengths)
    nll = _ctc_nll_from_alpha(alpha, input_lengths, target_lengths)
    if zero_infinity:
        nll = np.where(np.isinf(nll), 0, nll)
    return nll.astype(log_probs.dtype), alpha


def _ctc_beta(log_probs, ext, valid, can_skip, input_lengths, target_lengths, emit):
    """Backward variables log beta (N, T, 2S+1), starting at each element's last input step."""
    steps, batch, _ = log_probs.shape
    width = ext.shape[1]
    beta = np.full((batch, steps, width), NEG_INF, log_probs.dtype)
    blank_end, label_end = _ctc_end_positions(target_lengths)
    positions = np.arange(width)[None, :]
    is_end = (positions == blank_end[:, None]) | \
        ((positions == label_end[:, None]) & (target_lengths[:, None] > 0))
    skip_from = np.concatenate([can_skip[:, 2:], np.zeros((batch, 2), bool)], 1)
    for t in range(steps - 1, -1, -1):
        later = beta[:, t + 1] if t + 1 < steps else np.full((batch, width), NEG_INF)
        shift1 = np.concatenate([later[:, 1:], np.full((batch, 1), NEG_INF)], 1)
        shift2 = np.concatenate([later[:, 2:], np.full((batch, 2), NEG_INF)], 1)
        shift2 = np.where(skip_from, shift2, NEG_INF)
        step = _logsumexp_stack(later, shift1, shift2) + emit[:, t]
        last = (t == input_lengths - 1)[:, None]
        start = np.where(is_end, emit[:, t], NEG_INF)
        value = np.where(last, start, step)
        beta[:, t] = np.where(valid & (t < input_lengths)[:, None], value, NEG_INF)
    return beta


def _ctc_backward_kernel(grad, log_probs, targets, input_lengths, target_lengths, alpha,
                         blank=0, zero_infinity=False):
    """PyTorch's CTC gradient: exp(log_probs) - (posterior of each class at each step), times
    the incoming gradient; zero past an element's input length, and zero for impossible
    alignments under zero_infinity. (This is the gradient with respect to the logits of the
    log_softmax that produced log_probs, which is how PyTorch defines it.)"""
    input_lengths, target_lengths, ext, valid, can_skip = _ctc_setup(
        log_probs, targets, input_lengths, target_lengths, blank)
    steps, batch, classes = log_probs.shape
    emit = np.take_along_axis(log_probs.transpose(1, 0, 2), ext[:, None, :], 2)  # (N, T, W)
    beta = _ctc_beta(log_probs, ext, valid, can_skip, input_lengths, target_lengths, emit)
    nll = _ctc_nll_from_alpha(alpha, input_lengths, target_lengths)
    # Posterior of being at position s at step t: alpha * beta / (p(target) * y_t(l'_s)).
    log_post = alpha + beta + nll[:, None, None] - emit
    post = np.exp(np.where(np.isfinite(alpha + beta), log_post, NEG_INF))
    class_post = np.zeros((batch, steps, classes), log_probs.dtype)
    n_idx, t_idx, _ = np.indices(post.shape, sparse=True)
    np.add.at(class_post, (n_idx, t_idx, ext[:, None, :]), post)
    result = np.exp(log_probs) - class_post.transpose(1, 0, 2)                   # (T, N, C)
    # no alignment at all: NaN gradient, or 0 under zero_infinity (as PyTorch)
    result = np.where(np.isinf(nll)[None, :, None], 0 if zero_infinity else np.nan, result)
    live = np.arange(steps)[:, None] < input_lengths[None, :]
    result = np.where(live[:, :, None], result, 0) * grad[None, :, None]
    return result.astype(log_probs.dtype)


CTC = structured.declare("ctc_loss", _ctc_kernel, family="nn",
                         params={"blank": 0, "zero_infinity": False},
                         dtypes={D.float32, D.float64})
CTC_BACKWARD = structured.declare("_ctc_loss_backward", _ctc_backward_kernel, family="nn",
                                  params={"blank": 0, "zero_infinity": False})


def _lengths(lengths, name):
    """Lengths as an int64 tensor, from a tensor of integers or a sequence of ints."""
    if isinstance(lengths, Tensor):
        if lengths.dtype.is_floating_point or lengths.dtype.is_complex:
            raise RuntimeError(f"{name} must be integral")
        return lengths.to(D.int64).reshape(-1)
    return torch.tensor(list(lengths) if isinstance(lengths, (list, tuple)) else [lengths],
                        dtype=D.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=NONE,
             zero_infinity=False):
    """torch.ctc_loss: -log p(target | log_probs) summed over all CTC alignments.

    log_probs (T, N, C) or unbatched (T, C); targets padded (N, S) or concatenated 1-D
    (unbatched: (S,)); lengths as tensors or sequences of ints. Reduction 'mean' divides
    each loss by its target length (at least 1) before averaging over the batch."""
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0)
    if targets.dtype not in (D.int64, D.int32):
        targets = targets.to(D.int64)        # PyTorch reads other numeric targets as integers
    input_lengths = _lengths(input_lengths, "input_lengths")
    target_lengths = _lengths(target_lengths, "target_lengths")
    _check_ctc_args(log_probs, targets, input_lengths, target_lengths, blank)
    nll = structured.run(CTC, (log_probs, targets, input_lengths, target_lengths),
                         {"blank": int(blank), "zero_infinity": bool(zero_infinity)})[0]
    if unbatched:
        nll = nll.squeeze(0)
    if reduction == MEAN:
        return (nll / target_lengths.clamp_min(1).to(nll.dtype).reshape(nll.shape)).mean()
    if reduction == SUM:
        return nll.sum()
    return nll


def _check_ctc_args(log_probs, targets, input_lengths, target_lengths, blank):
    """PyTorch's checks (targets of any numeric dtype are read as integers)."""
    if log_probs.dim() != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {log_probs.dim()}-"
                           f"dimensional tensor for argument #1 'log_probs' (while checking "
                           f"arguments for ctc_loss_allocate_outputs)")
    steps, batch, classes = log_probs.shape
    if log_probs.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"\"ctc_loss_cpu\" not implemented for "
                                  f"'{log_probs.dtype.scalar_name}'")
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    for lengths, name in ((input_lengths, "input_lengths"), (target_lengths, "target_lengths")):
        if lengths.numel() != batch:
            raise RuntimeError(f"{name} must be of size batch_size")
    where = "(while checking arguments for ctc_loss_allocate_outputs)"
    in_len = input_lengths.detach()._host_array()
    tg_len = target_lengths.detach()._host_array()
    for values, name in ((in_len, "input_lengths"), (tg_len, "target_lengths")):
        if (values < 0).any():
            raise RuntimeError(f"Expected {name} to have value at least 0, but got value "
                               f"{int(values.min())} {where}")
    if (in_len > steps).any():
        raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got "
                           f"value {int(in_len.max())} {where}")
    if targets.dim() == 2 and (tg_len > targets.shape[1]).any():
        raise RuntimeError(f"Expected tensor to have size at least {int(tg_len.max())} at "
                           f"dimension 1, but got size {targets.shape[1]} for argument #2 "
                           f"'targets' {where}")
    if targets.dim() == 1 and tg_len.sum() != targets.numel():
        raise RuntimeError(f"Expected tensor to have size {int(tg_len.sum())} at dimension 0, "
                           f"but got size {targets.numel()} for argument #2 'targets' {where}")


def ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, alpha, blank,
                      zero_infinity):
    """The CtcLossBackward0 formula (a NumPy kernel: no double backward, as in PyTorch)."""
    return structured.run(CTC_BACKWARD, (grad, log_probs, targets, input_lengths,
                                         target_lengths, alpha),
                          {"blank": blank, "zero_infinity": zero_infinity})


# --- composite losses (compositions in PyTorch as well) ---------------------------------------

def kl_div(input, target, reduction=NONE, *, log_target=False):
    """torch.kl_div: pointwise target * (log target - input), input holding log-probabilities."""
    if not input.dtype.is_floating_point and not target.dtype.is_floating_point:
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        loss = torch.exp(target) * (target - input)
    else:
        loss = torch.xlogy(target, target) - target * input
    return apply_reduction(loss, reduction)


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """torch.poisson_nll_loss: exp(input) - target * input (log_input) or
    input - target * log(input + eps); `full` adds Stirling's term for targets above 1."""
    if log_input:
        loss = torch.exp(input) - target * input
    else:
        loss = input - target * torch.log(input + eps)
    if full:
        stirling = target * torch.log(target) - target + 0.5 * torch.log(2 * math.pi * target)
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return apply_reduction(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction=NONE):
    """torch.hinge_embedding_loss: x where target is 1, max(0, margin - x) where it is -1."""
    zeros = torch.zeros_like(input)
    margin_part = torch.where(target != 1, (margin - input).clamp_min(0), zeros)
    self_part = torch.where(target != -1, input, zeros)
    return apply_reduction(margin_part + self_part, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=NONE):
    """torch.margin_ranking_loss: max(0, -target * (input1 - input2) + margin)."""
    loss = (-target * (input1 - input2) + margin).clamp_min(0)
    return apply_reduction(loss, reduction)


_COSINE_EPS = 1e-12   # keeps the cosine's denominator away from zero, as PyTorch does


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=NONE):
    """torch.cosine_embedding_loss: 1 - cos for target 1, max(0, cos - margin) for -1."""
    if target.dim() not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    expected = 2 if target.dim() == 1 else 1
    if input1.dim() != expected or input2.dim() != expected:
        raise RuntimeError(f"{target.dim()}D target tensor expects {expected}D input tensors, "
                           f"but found inputs with sizes [{', '.join(map(str, input1.shape))}]"
                           f" and [{', '.join(map(str, input2.shape))}].")
    dim = target.dim()
    dot = (input1 * input2).sum(dim)
    norms = ((input1 * input1).sum(dim) + _COSINE_EPS) * ((input2 * input2).sum(dim)
                                                            + _COSINE_EPS)
    cos = dot / norms.sqrt()
    zeros = torch.zeros_like(cos)
    positive = torch.where(target == 1, 1 - cos, zeros)
    negative = torch.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return apply_reduction(positive + negative, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction=NONE):
    """torch.triplet_margin_loss: max(0, margin + d(a, p) - d(a, n)) with p-norm distances."""
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {dims[0]}D, "
                           f"positive {dims[1]}D, and negative {dims[2]}D inputs")
    dist_pos = torch.pairwise_distance(anchor, positive, p, eps)
    dist_neg = torch.pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = torch.minimum(dist_neg, torch.pairwise_distance(positive, negative, p, eps))
    return apply_reduction((margin + dist_pos - dist_neg).clamp_min(0), reduction)
