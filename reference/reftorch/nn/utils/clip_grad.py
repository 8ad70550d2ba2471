"""Gradient clipping: scale gradients so their joint norm stays under a bound, or clamp them."""
from __future__ import annotations

import math

from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _vector_norm(t, norm_type):
    """The p-norm of all of `t`'s elements (max |x| for p = inf), as a 0-dim tensor."""
    if math.isinf(norm_type):
        return t.abs().max() if norm_type > 0 else t.abs().min()
    return t.norm(norm_type)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms: equal to the norm of all elements taken together."""
    import reftorch
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return reftorch.tensor(0.0)
    with no_grad():
        total = _vector_norm(reftorch.stack([_vector_norm(t, norm_type) for t in tensors]),
                             norm_type)
    if error_if_nonfinite and bool(total.isnan() | total.isinf()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
            "by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Multiply every gradient by min(1, max_norm / (total_norm + 1e-6))."""
    import reftorch
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        # Clamping instead of branching keeps the step free of a data-dependent condition.
        coefficient = reftorch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coefficient)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale the gradients of `parameters` in place so their total norm is at most
    `max_norm`; returns the total norm before clipping."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
