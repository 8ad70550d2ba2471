"""Derivative rows: neural-network ops (embedding).

Both gradients are written with reftorch ops (index_select, index_add, ...), so they are
differentiable themselves. The indices, offsets and the helper outputs of embedding_bag are
integer tensors without gradients.
"""
from __future__ import annotations

from ._table import derivative, not_differentiable, op_module, torch


def _ops():
    return op_module("nn_embedding")


# Called only in a first-order backward (grad mode off); create_graph uses the composition.
not_differentiable("embedding_dense_backward")


@derivative("embedding", "EmbeddingBackward0", inputs=("weight", "indices"),
            saves=("indices", "padding_idx", "scale_grad_by_freq"))
def _embedding(ctx, grad):
    return _ops().embedding_dense_backward(grad, ctx.indices, ctx.shape(0)[0], ctx.padding_idx,
                                           ctx.scale_grad_by_freq), None


@derivative("embedding_bag", "EmbeddingBagBackward0",
            inputs=("weight", "indices", "offsets", "per_sample_weights"),
            saves=("weight", "indices", "per_sample_weights", "result1", "result2", "result3",
                   "mode", "padding_idx", "scale_grad_by_freq"),
            outputs=("result0", "result1", "result2", "result3"),
            nondifferentiable_outputs=(1, 2, 3))
def _embedding_bag(ctx, grad, *_unused):
    weight, flat = ctx.weight, ctx.indices.reshape(-1).long()
    num_weights, dim = weight.shape
    bag_size = ctx.result2
    if ctx.mode == 2:     # max: each output element came from one weight element
        winners = ctx.result3
        has_winner = (bag_size > 0).unsqueeze(1).to(grad.dtype)
        positions = winners * dim + torch.arange(dim, device=grad.device)
        total = torch.zeros(num_weights * dim, dtype=grad.dtype, device=grad.device)
        grad_weight = total.index_add(0, positions.reshape(-1),
                                      (grad * has_winner).reshape(-1)).reshape(num_weights, dim)
        return grad_weight, None, None, None
    entry_grad = grad.index_select(0, ctx.result1)                      # (n, D)
    scale = (flat != ctx.padding_idx).to(grad.dtype)
    if ctx.mode == 1:
        sizes = bag_size.clamp(min=1).to(grad.dtype)
        scale = scale / sizes.index_select(0, ctx.result1)
    psw = ctx.per_sample_weights
    grad_psw = None
    if psw is not None:
        picked = weight.index_select(0, flat)
        grad_psw = ((picked * entry_grad).sum(1) * scale).reshape(psw.shape)
        scale = scale * psw.reshape(-1)
    if ctx.scale_grad_by_freq:
        counts = torch.bincount(flat, minlength=num_weights).to(grad.dtype)
        scale = scale / counts.index_select(0, flat)
    rows = entry_grad * scale.unsqueeze(1)
    grad_weight = _ops().embedding_dense_backward(rows, flat, num_weights, -1, False)
    return grad_weight, None, None, grad_psw

