"""Derivative rows: other operations."""
from __future__ import annotations

from ._table import _conj, derivative, not_differentiable, torch


@derivative("flip", "FlipBackward0", saves=("dims",))
def _flip(ctx, grad):
    return torch.flip(grad, list(ctx.dims))


@derivative("roll", "RollBackward0", saves=("shifts", "dims"))
def _roll(ctx, grad):
    return torch.roll(grad, [-s for s in ctx.shifts], ctx.dims)


@derivative("rot90", "Rot90Backward0", saves=("k", "dims"))
def _rot90(ctx, grad):
    return torch.rot90(grad, -ctx.k, ctx.dims)


@derivative("tril", "TrilBackward0", saves=("diagonal",))
def _tril(ctx, grad):
    return torch.tril(grad, ctx.diagonal)


@derivative("triu", "TriuBackward0", saves=("diagonal",))
def _triu(ctx, grad):
    return torch.triu(grad, ctx.diagonal)


@derivative("diag_embed", "DiagEmbedBackward0", saves=("offset", "dim1", "dim2"))
def _diag_embed(ctx, grad):
    return grad.diagonal(ctx.offset, ctx.dim1, ctx.dim2)


@derivative("trace", "TraceBackward0")
def _trace(ctx, grad):
    rows, cols = ctx.shape(0)
    return grad * torch.eye(rows, cols, dtype=grad.dtype, device=grad.device)


@derivative("cross", "LinalgCrossBackward0", inputs=("self", "other"),
            saves=("self", "other", "dim"))
def _cross(ctx, grad):
    needs = ctx.needs_input_grad
    return (torch.cross(_conj(ctx.other), grad, dim=ctx.dim) if needs[0] else None,
            torch.cross(grad, _conj(ctx.self), dim=ctx.dim) if needs[1] else None)


# einsum: PyTorch decomposes einsum into permutes, views and bmm, so its graph shows those
# nodes; reftorch records one node, named "EinsumBackward0". Operands are variadic: the row
# names up to 52 of them (one per einsum label, the most an equation can use).
_EINSUM_INPUTS = tuple(f"operand{i}" for i in range(52))


@derivative("einsum", "EinsumBackward0", inputs=_EINSUM_INPUTS,
            saves=_EINSUM_INPUTS + ("equation",))
def _einsum(ctx, grad):
    from ..._ops.other_ops import einsum_gradient
    count = len(ctx.needs_input_grad)
    operands = [getattr(ctx, name) for name in _EINSUM_INPUTS[:count]]
    return tuple(einsum_gradient(ctx.equation, operands, grad, k, ctx.shape(k))
                 if ctx.needs_input_grad[k] else None for k in range(count))


@derivative("block_diag", "BlockDiagBackward0", inputs=_EINSUM_INPUTS)
def _block_diag(ctx, grad):
    from ..._ops.other_ops import block_diag_gradient
    count = len(ctx.needs_input_grad)
    return block_diag_gradient(grad, [ctx.shape(i) for i in range(count)])


# cdist, renorm and vander differentiate through NumPy kernels of their own (as PyTorch's
# _cdist_backward), so they support first derivatives only.
@derivative("cdist", "CdistBackward0", inputs=("x1", "x2"), saves=("x1", "x2", "result", "p"))
def _cdist(ctx, grad):
    from ..._ops.other_ops import cdist_gradient
    return cdist_gradient(grad, ctx.x1, ctx.x2, ctx.result, ctx.p)


@derivative("renorm", "RenormBackward0", saves=("self", "p", "dim", "maxnorm"))
def _renorm(ctx, grad):
    from ..._ops.other_ops import renorm_gradient
    return renorm_gradient(grad, ctx.self, ctx.p, ctx.dim, ctx.maxnorm)


@derivative("vander", "VanderBackward0", saves=("self", "N", "increasing"))
def _vander(ctx, grad):
    from ..._ops.other_ops import vander_gradient
    return vander_gradient(grad, ctx.self, ctx.N, ctx.increasing)


not_differentiable("bincount", "histc", "histogram", "_cdist_backward", "_renorm_backward",
                   "_vander_backward")
