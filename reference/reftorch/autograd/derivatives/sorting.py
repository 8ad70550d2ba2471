"""Derivative rows: sorting, selection and comparison."""
from __future__ import annotations

from ._table import derivative, not_differentiable, op_module


# Sorting and selection pick elements by index: the gradient goes back to the picked places
# (`_scatter_along_dim`), whose own derivative reads them again (`_gather_along_dim`).

def _sorting_ops():
    return op_module("sorting")


@derivative("sort", "SortBackward0", saves=("indices", "dim"), outputs=("values", "indices"),
            nondifferentiable_outputs=(1,))
def _sort(ctx, grad_values, grad_indices=None):
    return _sorting_ops()._scatter_along_dim(grad_values, ctx.indices, ctx.dim, ctx.shape(0))


@derivative("topk", "TopkBackward0", saves=("indices", "dim"), outputs=("values", "indices"),
            nondifferentiable_outputs=(1,))
def _topk(ctx, grad_values, grad_indices=None):
    return _sorting_ops()._scatter_along_dim(grad_values, ctx.indices, ctx.dim, ctx.shape(0))


@derivative("kthvalue", "KthvalueBackward0", saves=("indices", "dim", "keepdim"),
            outputs=("values", "indices"), nondifferentiable_outputs=(1,))
def _kthvalue(ctx, grad_values, grad_indices=None):
    indices = ctx.indices
    if not ctx.keepdim and len(ctx.shape(0)) > 0:  # put back the reduced dim
        grad_values, indices = grad_values.unsqueeze(ctx.dim), indices.unsqueeze(ctx.dim)
    return _sorting_ops()._scatter_along_dim(grad_values, indices, ctx.dim, ctx.shape(0))


@derivative("_scatter_along_dim", "ScatterAlongDimBackward0", inputs=("self", "indices"),
            saves=("indices", "dim"))
def _scatter_along_dim(ctx, grad):
    return _sorting_ops()._gather_along_dim(grad, ctx.indices, ctx.dim), None


@derivative("_gather_along_dim", "GatherAlongDimBackward0", inputs=("self", "indices"),
            saves=("indices", "dim"))
def _gather_along_dim(ctx, grad):
    return _sorting_ops()._scatter_along_dim(grad, ctx.indices, ctx.dim, ctx.shape(0)), None


not_differentiable("argsort", "isclose", "equal", "isin", "searchsorted", "bucketize")
