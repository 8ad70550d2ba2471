"""Derivative rows: sparse COO tensors.

Arithmetic, transposes, clone, to() and mm on sparse tensors reuse the dense rows (their
formulas work on sparse gradients); the rows here are the sparse-only ops. As in PyTorch, the
gradient of a sparse input is sparse, on the input's (coalesced) indices.
"""
from __future__ import annotations

from ._table import derivative, torch


def _sparse():
    from ...sparse import _coo
    return _coo


def values_at(grad, indices):
    """grad's values at `indices` (sparse_dim, nnz): a dense (nnz, *dense dims) tensor.
    A dense grad is indexed (differentiably); a sparse one is looked up after coalescing."""
    if grad.is_sparse:
        grad = grad.to_dense()
    if indices.shape[0] == 0:
        return grad.unsqueeze(0).expand(indices.shape[1], *grad.shape)
    return grad[tuple(indices[d] for d in range(indices.shape[0]))]


def _coalesced_indices(s):
    """The indices of `s` after coalescing (sorted, unique), without summing any values."""
    if s.is_coalesced():
        return s._indices()
    return s.detach().coalesce()._indices()


def _on_indices_of(grad, s):
    """A sparse gradient for sparse input `s`: grad's values at s's coalesced indices."""
    indices = _coalesced_indices(s)
    return torch.sparse_coo_tensor(indices, values_at(grad, indices), s.shape,
                                   is_coalesced=False)


@derivative("sparse_coo_tensor", "SparseCooTensorWithDimsAndTensorsBackward0",
            inputs=("values",), saves=("indices",))
def _sparse_coo_tensor(ctx, grad):
    return values_at(grad, ctx.indices)


@derivative("to_dense", "ToDenseBackward0", saves=("self",))
def _to_dense(ctx, grad):
    return _on_indices_of(grad, ctx.self)


@derivative("to_sparse", lambda inputs, params: "ToSparseBackward0"
            if params.get("sparse_dim_given") else "ToSparseBackward1")
def _to_sparse(ctx, grad):
    return grad.to_dense() if grad.is_sparse else grad


@derivative("coalesce", "CoalesceBackward0")
def _coalesce(ctx, grad):
    return grad


@derivative("values", "ValuesBackward0", saves=("self",))
def _values(ctx, grad):
    s = ctx.self
    return torch.sparse_coo_tensor(s._indices(), grad, s.shape, is_coalesced=True)


@derivative("sparse_mask", "SparseMaskBackward0", saves=("self_layout_is_sparse",))
def _sparse_mask(ctx, grad):
    # The gradient flows to the masked entries only; a dense input gets it densified.
    return grad if ctx.self_layout_is_sparse else grad.to_dense()


def _sum_backward(ctx, grad):
    """Each entry of the input gets the gradient of the entry it was summed into."""
    s, dims = ctx.self, ctx.dim
    dense = grad.to_dense() if grad.is_sparse else grad
    if not ctx.keepdim:
        for d in dims:  # sorted, so each unsqueeze lands where the dim was
            dense = dense.unsqueeze(d)
    return _on_indices_of(dense.expand(s.shape), s)


derivative("_sparse_sum", "SparseSumBackward0", saves=("self", "dim", "keepdim"))(
    _sum_backward)
derivative("_sparse_sum_dim", "SumBackward1", saves=("self", "dim", "keepdim"))(
    _sum_backward)


@derivative("_sparse_sum_all", "SumBackward0")
def _sparse_sum_all(ctx, grad):
    return grad.expand(ctx.shape(0))  # a dense gradient, as PyTorch's


@derivative("_sparse_addmm", "SparseAddmmBackward0", inputs=("self", "mat1", "mat2"),
            saves=("mat1", "mat2", "beta", "alpha"))
def _sparse_addmm(ctx, grad):
    needs = ctx.needs_input_grad
    mat1, mat2, alpha = ctx.mat1, ctx.mat2, ctx.alpha
    grad_self = grad * ctx.beta if needs[0] else None
    grad_mat1 = _on_indices_of(torch.mm(grad, mat2.t()) * alpha, mat1) if needs[1] else None
    grad_mat2 = torch.mm(mat1.t(), grad) * alpha if needs[2] else None
    return grad_self, grad_mat1, grad_mat2


@derivative("_sparse_sparse_matmul", "SparseSparseMatmulBackward0", inputs=("self", "mat2"),
            saves=("self", "mat2"))
def _sparse_sparse_matmul(ctx, grad):
    needs = ctx.needs_input_grad
    a, b = ctx.self, ctx.mat2
    return (_on_indices_of(torch.mm(grad, b.t()), a) if needs[0] else None,
            _on_indices_of(torch.mm(a.t(), grad), b) if needs[1] else None)


@derivative("narrow_copy_sparse", "NarrowCopyBackward0", saves=("dim", "start", "length"))
def _narrow_copy(ctx, grad):
    # Put the gradient back at its place in a zero tensor of the input's shape.
    dense = grad.to_dense() if grad.is_sparse else grad
    shape, dim = ctx.shape(0), ctx.dim
    before = torch.zeros(_with(shape, dim, ctx.start), dtype=dense.dtype, device=dense.device)
    after = torch.zeros(_with(shape, dim, shape[dim] - ctx.start - ctx.length),
                        dtype=dense.dtype, device=dense.device)
    result = torch.cat([before, dense, after], dim)
    return result.to_sparse(grad.sparse_dim()) if grad.is_sparse else result


def _with(shape, dim, size):
    shape = list(shape)
    shape[dim] = size
    return shape


def _not_implemented(op):
    @derivative(op, "NotImplemented", inputs=("self", "mat2"))
    def _(ctx, grad):
        raise RuntimeError(f"the derivative for '{op}' is not implemented.")


for _op in ("hspmm", "smm"):
    _not_implemented(_op)


@derivative("sspaddmm", "NotImplemented", inputs=("self", "mat1", "mat2"))
def _sspaddmm(ctx, grad):
    raise RuntimeError("the derivative for 'sspaddmm' is not implemented.")
