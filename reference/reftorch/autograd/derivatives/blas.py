"""Derivative rows: matrix products (BLAS)."""
from __future__ import annotations

from ._table import _conj, derivative, torch
from .arithmetic import _conj_scalar


# Rows for the primitive products; matmul, inner, outer/ger, chain_matmul and matrix_power are
# compositions of these (and views), so their graphs show these nodes. Complex gradients use
# conjugates: d(A @ B) gives grad @ B^H for A and A^H @ grad for B.

def _mH(t):
    """The conjugate transpose of the last two dims."""
    return _conj(t).transpose(-2, -1)


def _scaled(grad, factor):
    """grad * conj(factor), skipping the multiply for a factor of 1."""
    return grad if factor == 1 else grad * _conj_scalar(factor)


def _column_major(matrix):
    """Whether a matrix is stored column by column, as nn.Linear's weight.t() is."""
    return matrix.stride() == (1, matrix.shape[0])


# The two gradients of a product, each in its input's layout: a column-major input gets its
# gradient computed as the transposed product and handed back transposed (same values), as
# PyTorch does. The parameter's .grad then shares its layout, so the optimizer's updates walk
# both in memory order instead of one of them across it.

def _mat1_grad(grad, mat1, mat2):
    """d(mat1 @ mat2) / d(mat1): grad @ mat2^H."""
    if _column_major(mat1):
        return torch.mm(_conj(mat2), grad.t()).t()
    return torch.mm(grad, _mH(mat2))


def _mat2_grad(grad, mat1, mat2):
    """d(mat1 @ mat2) / d(mat2): mat1^H @ grad."""
    if _column_major(mat2):
        return torch.mm(grad.t(), _conj(mat1)).t()
    return torch.mm(_mH(mat1), grad)


@derivative("mm", "MmBackward0", inputs=("self", "mat2"), saves=("self", "mat2"))
def _mm(ctx, grad):
    needs = ctx.needs_input_grad
    return (_mat1_grad(grad, ctx.self, ctx.mat2) if needs[0] else None,
            _mat2_grad(grad, ctx.self, ctx.mat2) if needs[1] else None)


@derivative("bmm", "BmmBackward0", inputs=("self", "mat2"), saves=("self", "mat2"))
def _bmm(ctx, grad):
    needs = ctx.needs_input_grad
    return (torch.bmm(grad, _mH(ctx.mat2)) if needs[0] else None,
            torch.bmm(_mH(ctx.self), grad) if needs[1] else None)


@derivative("mv", "MvBackward0", inputs=("self", "vec"), saves=("self", "vec"))
def _mv(ctx, grad):
    needs = ctx.needs_input_grad
    return (torch.outer(grad, _conj(ctx.vec)) if needs[0] else None,
            torch.mv(_mH(ctx.self), grad) if needs[1] else None)


@derivative("dot", "DotBackward0", inputs=("self", "tensor"), saves=("self", "tensor"))
def _dot(ctx, grad):
    needs = ctx.needs_input_grad
    return (grad * _conj(ctx.tensor) if needs[0] else None,
            grad * _conj(ctx.self) if needs[1] else None)


@derivative("vdot", "VdotBackward0", inputs=("self", "other"), saves=("self", "other"))
def _vdot(ctx, grad):
    # vdot(a, b) = sum(conj(a) * b): a's gradient is conjugated once more.
    needs = ctx.needs_input_grad
    return (_conj(grad) * ctx.other if needs[0] else None,
            grad * ctx.self if needs[1] else None)


@derivative("addmm", "AddmmBackward0", inputs=("self", "mat1", "mat2"),
            saves=("mat1", "mat2", "beta", "alpha"))
def _addmm(ctx, grad):
    needs = ctx.needs_input_grad
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(_mat1_grad(grad, ctx.mat1, ctx.mat2), ctx.alpha) if needs[1] else None,
            _scaled(_mat2_grad(grad, ctx.mat1, ctx.mat2), ctx.alpha) if needs[2] else None)


@derivative("baddbmm", "BaddbmmBackward0", inputs=("self", "batch1", "batch2"),
            saves=("batch1", "batch2", "beta", "alpha"))
def _baddbmm(ctx, grad):
    needs = ctx.needs_input_grad
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.bmm(grad, _mH(ctx.batch2)), ctx.alpha) if needs[1] else None,
            _scaled(torch.bmm(_mH(ctx.batch1), grad), ctx.alpha) if needs[2] else None)


@derivative("addbmm", "AddbmmBackward0", inputs=("self", "batch1", "batch2"),
            saves=("batch1", "batch2", "beta", "alpha"))
def _addbmm(ctx, grad):
    # Every matrix of the batch received the same gradient (the sum's).
    needs = ctx.needs_input_grad
    batch = ctx.shape(1)[0]
    repeated = grad.unsqueeze(0).expand(batch, *grad.shape)
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.bmm(repeated, _mH(ctx.batch2)), ctx.alpha) if needs[1] else None,
            _scaled(torch.bmm(_mH(ctx.batch1), repeated), ctx.alpha) if needs[2] else None)


@derivative("addmv", "AddmvBackward0", inputs=("self", "mat", "vec"),
            saves=("mat", "vec", "beta", "alpha"))
def _addmv(ctx, grad):
    needs = ctx.needs_input_grad
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.outer(grad, _conj(ctx.vec)), ctx.alpha) if needs[1] else None,
            _scaled(torch.mv(_mH(ctx.mat), grad), ctx.alpha) if needs[2] else None)


@derivative("addr", "AddrBackward0", inputs=("self", "vec1", "vec2"),
            saves=("vec1", "vec2", "beta", "alpha"))
def _addr(ctx, grad):
    # addr promotes its operands, so the saved vectors are brought to the gradient's dtype.
    needs = ctx.needs_input_grad
    vec1, vec2 = (_conj(v).to(grad.dtype) for v in (ctx.vec1, ctx.vec2))
    return (_scaled(grad, ctx.beta) if needs[0] else None,
            _scaled(torch.mv(grad, vec2), ctx.alpha) if needs[1] else None,
            _scaled(torch.mv(grad.t(), vec1), ctx.alpha) if needs[2] else None)


@derivative("_matrix_power_inverse", "LinalgInvExBackward0", saves=("result",))
def _matrix_power_inverse(ctx, grad):
    # d(A^-1) = -A^-1 dA A^-1, so A's gradient is -A^-H grad A^-H.
    inverse_h = _mH(ctx.result)
    return -torch.matmul(torch.matmul(inverse_h, grad), inverse_h)
