"""Derivative rows: linear algebra (LAPACK)."""
from __future__ import annotations

from ._table import derivative, not_differentiable, op_module


# The formulas live next to the kernels (reftorch/_ops/linalg.py, `*_gradient`), written with
# reftorch ops so that they differentiate again.
def _la():
    return op_module("linalg")


@derivative("cholesky", "CholeskyBackward0", saves=("result", "upper"))
def _cholesky(ctx, grad):
    return _la().cholesky_gradient(grad, ctx.result, ctx.upper)


@derivative("cholesky_inverse", "CholeskyInverseBackward0", saves=("self", "result", "upper"))
def _cholesky_inverse(ctx, grad):
    return _la().cholesky_inverse_gradient(grad, ctx.self, ctx.result, ctx.upper)


@derivative("cholesky_solve", "CholeskySolveBackward0", inputs=("self", "input2"),
            saves=("input2", "result", "upper"))
def _cholesky_solve(ctx, grad):
    return _la().cholesky_solve_gradient(grad, ctx.input2, ctx.result, ctx.upper,
                                         ctx.needs_input_grad)


@derivative("inverse", "LinalgInvExBackward0", saves=("result",))
def _inverse(ctx, grad):
    return _la().inverse_gradient(grad, ctx.result)


@derivative("det", "LinalgDetBackward0", saves=("self", "result"))
def _det(ctx, grad):
    return _la().det_gradient(grad, ctx.self, ctx.result)


@derivative("slogdet", "LinalgSlogdetBackward0", outputs=("sign", "logabsdet"),
            saves=("self", "sign"))
def _slogdet(ctx, grad_sign, grad_logabsdet):
    return _la().slogdet_gradient(grad_sign, grad_logabsdet, ctx.self, ctx.sign)


@derivative("solve", "LinalgSolveExBackward0", inputs=("self", "A"), outputs=("solution", "LU"),
            saves=("A", "solution"), nondifferentiable_outputs=(1,))
def _solve(ctx, grad, _grad_lu):
    return _la().solve_gradient(grad, ctx.A, ctx.solution, ctx.needs_input_grad)


@derivative("triangular_solve", "TriangularSolveBackward0", inputs=("self", "A"),
            outputs=("solution", "cloned_coefficient"),
            saves=("A", "solution", "upper", "transpose", "unitriangular"))
def _triangular_solve(ctx, grad_x, grad_m):
    return _la().triangular_solve_gradient(grad_x, grad_m, ctx.A, ctx.solution, ctx.upper,
                                           ctx.transpose, ctx.unitriangular)


@derivative("qr", "LinalgQrBackward0", outputs=("Q", "R"), saves=("Q", "R", "some"))
def _qr(ctx, grad_q, grad_r):
    return _la().qr_gradient(grad_q, grad_r, ctx.shape(0), ctx.Q, ctx.R, ctx.some)


@derivative("svd", "LinalgSvdBackward0", outputs=("U", "S", "V"), saves=("U", "S", "V", "some"))
def _svd(ctx, grad_u, grad_s, grad_v):
    return _la().svd_gradient(grad_u, grad_s, grad_v, ctx.shape(0), ctx.U, ctx.S, ctx.V,
                              ctx.some)


# symeig and eig are gone from PyTorch: their rows carry the modern functions' node names.
@derivative("symeig", "LinalgEighBackward0", outputs=("eigenvalues", "eigenvectors"),
            saves=("eigenvalues", "eigenvectors"))
def _symeig(ctx, grad_values, grad_vectors):
    return _la().eigh_gradient(grad_values, grad_vectors, ctx.eigenvalues, ctx.eigenvectors)


@derivative("eig", "LinalgEigBackward0", outputs=("eigenvalues", "eigenvectors"),
            saves=("eigenvalues", "eigenvectors"))
def _eig(ctx, grad_values, grad_vectors):
    return _la().eig_gradient(grad_values, grad_vectors, ctx.eigenvalues, ctx.eigenvectors)


@derivative("linalg_eig", "LinalgEigBackward0", outputs=("eigenvalues", "eigenvectors"),
            saves=("self", "eigenvalues", "eigenvectors"))
def _linalg_eig(ctx, grad_values, grad_vectors):
    return _la().linalg_eig_gradient(grad_values, grad_vectors, ctx.self, ctx.eigenvalues,
                                     ctx.eigenvectors)


@derivative("pinverse", "LinalgPinvBackward0", saves=("self", "result"))
def _pinverse(ctx, grad):
    return _la().pinverse_gradient(grad, ctx.self, ctx.result)


@derivative("lu", "LinalgLuFactorExBackward0", outputs=("LU", "pivots", "infos"),
            saves=("LU", "pivots"), nondifferentiable_outputs=(1, 2))
def _lu(ctx, grad, _grad_pivots, _grad_infos):
    return _la().lu_gradient(grad, ctx.LU, ctx.pivots)


@derivative("lu_unpack", "LuUnpackBackward0", inputs=("LU_data", "LU_pivots"),
            outputs=("P", "L", "U"), nondifferentiable_outputs=(0,))
def _lu_unpack(ctx, _grad_p, grad_l, grad_u):
    return _la().lu_unpack_gradient(grad_l, grad_u, ctx.shape(0)), None


@derivative("lu_solve", "LinalgLuSolveBackward0", inputs=("self", "LU_data", "LU_pivots"),
            saves=("LU_data", "LU_pivots", "result"))
def _lu_solve(ctx, grad):
    return _la().lu_solve_gradient(grad, ctx.LU_data, ctx.LU_pivots, ctx.result,
                                   ctx.needs_input_grad)


@derivative("orgqr", "LinalgHouseholderProductBackward0", inputs=("self", "input2"),
            saves=("self", "input2"))
def _orgqr(ctx, grad):
    return _la().orgqr_gradient(grad, ctx.self, ctx.input2)


@derivative("ormqr", "OrmqrBackward0", inputs=("self", "input2", "input3"),
            saves=("self", "input2", "input3", "left", "transpose"))
def _ormqr(ctx, grad):
    return _la().ormqr_gradient(grad, ctx.self, ctx.input2, ctx.input3, ctx.left,
                                ctx.transpose)


@derivative("geqrf", "GeqrfBackward0", outputs=("a", "tau"))
def _geqrf(ctx, grad_a, grad_tau):
    raise RuntimeError("The derivative for 'geqrf' is not implemented.")


not_differentiable("gels", "pstrf", "matrix_rank")
