"""Derivative rows: views."""
from __future__ import annotations

from ._table import derivative, torch


# A view's gradient is its base's gradient seen through the inverse geometry.

@derivative("view", "ViewBackward0", saves=("self_shape",))
def _view(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("reshape_alias", "ReshapeAliasBackward0", saves=("self_shape",))
def _reshape_alias(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("unsafe_view", "UnsafeViewBackward0", saves=("self_shape",))
def _unsafe_view(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("squeeze", lambda inputs, params: "SqueezeBackward0" if params.get("dim") is None
            else "SqueezeBackward1" if isinstance(params["dim"], int) else "SqueezeBackward2",
            saves=("self_shape",))
def _squeeze(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("unsqueeze", "UnsqueezeBackward0", saves=("dim",))
def _unsqueeze(ctx, grad):
    return grad.squeeze(ctx.dim)


@derivative("transpose", "TransposeBackward0", saves=("dim0", "dim1"))
def _transpose(ctx, grad):
    return grad.transpose(ctx.dim0, ctx.dim1)


@derivative("t", "TBackward0")
def _t(ctx, grad):
    return grad.t()


@derivative("permute", "PermuteBackward0", saves=("dims",))
def _permute(ctx, grad):
    inverse = [0] * len(ctx.dims)
    for i, d in enumerate(ctx.dims):
        inverse[d] = i
    return grad.permute(inverse)


@derivative("expand", "ExpandBackward0", saves=("self_shape",))
def _expand(ctx, grad):
    return grad.sum_to_size(ctx.self_shape)


@derivative("alias", "AliasBackward0")
def _alias(ctx, grad):
    return grad


# Views that pick elements (select, slicing, narrow, diagonal, unfold, as_strided) share one
# formula: scatter the view's gradient into the storage slots the view reads, then read the
# input's slots back. It is exact for overlapping views too (an unfolded window counts twice).
def _geometric_view(op, node):
    @derivative(op, node, saves=("self_geometry", "view_geometry"))
    def _(ctx, grad):
        return torch._view_scatter(grad, ctx.self_geometry, ctx.view_geometry)


for _op, _node in (("select", "SelectBackward0"), ("slice", "SliceBackward0"),
                   ("diagonal", "DiagonalBackward0"),
                   ("unfold", "UnfoldBackward0"), ("as_strided", "AsStridedBackward0")):
    _geometric_view(_op, _node)


@derivative("_view_scatter", "ViewScatterBackward0", saves=("self_geometry", "view_geometry"))
def _view_scatter(ctx, grad):
    return torch._view_gather(grad, ctx.self_geometry, ctx.view_geometry)


@derivative("_view_gather", "ViewGatherBackward0", saves=("self_geometry", "view_geometry"))
def _view_gather(ctx, grad):
    return torch._view_scatter(grad, ctx.self_geometry, ctx.view_geometry)


# Ops that return several views (split, split_with_sizes, unbind) have one node with an
# output per piece; its backward puts the pieces' gradients back side by side (zeros for a
# piece that got none).

def _joined(ctx, grads, sizes, stacked):
    pieces = []
    for i, size in enumerate(sizes):
        g = grads[i] if i < len(grads) else None
        if g is None:
            shape = list(ctx.self_shape)
            if stacked:
                del shape[ctx.dim]
            else:
                shape[ctx.dim] = size
            g = torch.zeros(shape, dtype=ctx.dtype(0), device=ctx.device(0))
        pieces.append(g)
    return torch.stack(pieces, ctx.dim) if stacked else torch.cat(pieces, ctx.dim)


@derivative("split", "SplitBackward0", saves=("dim", "self_shape", "split_size"))
def _split(ctx, *grads):
    from ..._ops.joining import split_sizes
    return _joined(ctx, grads, split_sizes(ctx.self_shape[ctx.dim], ctx.split_size), False)


@derivative("split_with_sizes", "SplitWithSizesBackward0",
            saves=("dim", "self_shape", "split_sizes"))
def _split_with_sizes(ctx, *grads):
    return _joined(ctx, grads, ctx.split_sizes, False)


@derivative("unbind", "UnbindBackward0", saves=("dim", "self_shape"))
def _unbind(ctx, *grads):
    return _joined(ctx, grads, [1] * ctx.self_shape[ctx.dim], True)
