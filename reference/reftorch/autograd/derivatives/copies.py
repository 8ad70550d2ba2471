"""Derivative rows: copies and conversions."""
from __future__ import annotations

from ._table import _real_if, derivative


@derivative("clone", "CloneBackward0")
def _clone(ctx, grad):
    return grad


@derivative("_to_copy", "ToCopyBackward0")
def _to_copy(ctx, grad):
    return _real_if(grad, ctx.dtype(0)).to(device=ctx.device(0), dtype=ctx.dtype(0))


@derivative("copy_", "CopyBackwards", inputs=("self", "src"))
def _copy(ctx, grad):
    grad_src = _real_if(grad, ctx.dtype(1)).to(device=ctx.device(1), dtype=ctx.dtype(1)) \
        if ctx.needs_input_grad[1] else None
    return grad * 0 if ctx.needs_input_grad[0] else None, grad_src


@derivative("sum_to_size", "SumToSizeBackward0")
def _sum_to_size(ctx, grad):
    return grad.expand(ctx.shape(0))
