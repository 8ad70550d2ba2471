"""torch.linalg: the modern linear-algebra namespace.

Every function here is a thin layer over the implementations that already exist for the
torch.* names (reftorch/_ops/linalg.py for the LAPACK routines, _ops/blas.py for products,
_ops/reduction.py for vector norms, _ops/other_ops.py for cross and vander): argument
conventions differ (linalg.solve(A, B) vs solve(B, A), Vh instead of V, UPLO='L' by default,
mode strings), the kernels and derivative rows do not. Matrix norms, condition numbers,
ranks and tensorinv/tensorsolve are compositions of those, so autograd flows through them.
"""
from __future__ import annotations

import math

import numpy as np

from . import _dtype as D
from . import return_types
from ._ops import blas as _blas
from ._ops import linalg as _L
from ._ops import other_ops as _other
from ._ops import reduction as _reduction
from ._ops import structured as _structured
from ._shape import wrap_dim

__all__ = [
    "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
    "householder_product", "inv", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matrix_norm",
    "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
    "solve_triangular", "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot",
    "vector_norm", "LinAlgError",
]

LinAlgError = _L.LinAlgError


def _torch():
    import reftorch
    return reftorch


def _named(name, values):
    return return_types.named(name, tuple(values))


def _finish(result, out):
    """Copy into out= (a tensor or a tuple of tensors) when given."""
    if out is None:
        return result
    return _structured.write_out(out, result)


# --- inverses, determinants, solvers ---------------------------------------------------------

def inv(A, *, out=None):
    """A^{-1}; a singular matrix raises LinAlgError."""
    return _L.inverse(A, out=out)


def det(A, *, out=None):
    return _finish(_L.det(A), out)


def slogdet(A, *, out=None):
    sign, logabsdet = _L.slogdet(A)
    return _named("linalg_slogdet", _finish((sign, logabsdet), out))


def _is_vector_rhs(A, B):
    """linalg.solve treats B as a (batch of) vector(s) when B.ndim == 1, or when B has one
    dimension less than A and B.shape == A.shape[:-1]."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A, B, *, left=True, out=None):
    """X with A X = B (X A = B when left=False); batch dimensions broadcast."""
    _L._check_matrix(A, "linalg.solve")
    if not left:   # X A = B  <=>  A^T X^T = B^T
        return _finish(solve(A.mT, B.mT).mT, out)
    if _is_vector_rhs(A, B):
        return _finish(_L._solve(B.unsqueeze(-1), A, "linalg.solve").solution.squeeze(-1), out)
    return _finish(_L._solve(B, A, "linalg.solve").solution, out)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (X A = B when left=False) for triangular A (one triangle is read)."""
    if left:
        x = _L.triangular_solve(B, A, upper, False, unitriangular).solution
    else:          # X A = B  <=>  A^T X^T = B^T, A^T triangular the other way round
        x = _L.triangular_solve(B.mT, A, upper, True, unitriangular).solution.mT
    return _finish(x, out)


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """(LU, pivots, info) of LAPACK's getrf (see torch.lu); info k > 0: U[k-1, k-1] == 0."""
    _L._check_matrix(A, "torch.linalg.lu_factor_ex", square=False)
    factors, pivots, info = _L.lu(A, pivot, get_infos=True)
    if check_errors:
        _raise_zero_pivot(info, A, "torch.linalg.lu_factor_ex")
    return _named("linalg_lu_factor_ex", _finish((factors, pivots, info), out))


def _raise_zero_pivot(info, A, fn):
    flat = info.detach()._host_array().reshape(-1)
    if (flat > 0).any():
        index = int(np.argmax(flat > 0))
        k = int(flat[index])
        raise RuntimeError(f"{fn}: {_L._batch_prefix(A, index)}U[{k},{k}] is zero and using "
                           f"it on lu_solve would result in a division by zero. If you still "
                           f"want to perform the factorization, consider calling "
                           f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots) of LAPACK's getrf; an exactly singular matrix raises (use
    lu_factor_ex to get its factors)."""
    _L._check_matrix(A, "torch.linalg.lu_factor", square=False)
    factors, pivots, info = _L.lu(A, pivot, get_infos=True)
    _raise_zero_pivot(info, A, "torch.linalg.lu_factor")
    return _named("linalg_lu_factor", _finish((factors, pivots), out))


def lu(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U."""
    p, low, up = _L.lu_unpack(*_L.lu(A, pivot))
    return _named("linalg_lu", _finish((p, low, up), out))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B, A^H X = B (adjoint), X A = B or X A^H = B (left=False), A = P L U."""
    if not left:   # X op(A) = B  <=>  op(A)^H X^H = B^H
        return _finish(_H(lu_solve(LU, pivots, _H(B), adjoint=not adjoint)), out)
    if not adjoint:
        return _finish(_L.lu_solve(B, LU, pivots), out)
    # A^H = U^H L^H P^T:  X = P L^{-H} U^{-H} B. triangular_solve reads one triangle of the
    # packed factors; transpose=True of the conjugate is the conjugate transpose.
    conj_lu = LU.conj() if LU.is_complex() else LU
    y = _L.triangular_solve(B, conj_lu, upper=True, transpose=True).solution
    w = _L.triangular_solve(y, conj_lu, upper=False, transpose=True,
                            unitriangular=True).solution
    p = _L.lu_unpack(LU, pivots, unpack_data=False).P
    return _finish(_torch().matmul(p, w), out)


def _H(t):
    return t.mT.conj() if t.is_complex() else t.mT


# --- factorizations and spectra --------------------------------------------------------------

def cholesky(A, *, upper=False, out=None):
    return _L.cholesky(A, upper, out=out)


def eigh(A, UPLO="L", *, out=None):
    """(eigenvalues ascending, orthonormal eigenvectors) of a Hermitian matrix read from its
    lower (UPLO='L', the default here) or upper triangle."""
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    _L._check_matrix(A, "linalg.eigh")
    values, vectors = _L._run(_L.SYMEIG, (A,), {"upper": UPLO == "U"})
    return _named("linalg_eigh", _finish((values, vectors), out))


def eigvalsh(A, UPLO="L", *, out=None):
    return _finish(eigh(A, UPLO).eigenvalues, out)


def eig(A, *, out=None):
    """Complex eigenvalues and eigenvectors (unit norm, as LAPACK's geev) of a square matrix."""
    _L._check_matrix(A, "linalg.eig")
    values, vectors = _L._run(_L.LINALG_EIG, (A,), {})
    return _named("linalg_eig", _finish((values, vectors), out))


def eigvals(A, *, out=None):
    return _finish(eig(A).eigenvalues, out)


def svd(A, full_matrices=True, *, driver=None, out=None):
    """(U, S, Vh) with A = U diag(S) Vh (note: Vh, where torch.svd returns V)."""
    u, s, v = _L.svd(A, some=not full_matrices)
    return _named("linalg_svd", _finish((u, s, _H(v)), out))


def svdvals(A, *, driver=None, out=None):
    return _finish(_L.svd(A).S, out)


def qr(A, mode="reduced", *, out=None):
    """(Q, R); mode 'reduced', 'complete' or 'r' (Q is then an empty tensor)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")
    q, r = _L.qr(A, some=mode != "complete")
    if mode == "r":
        q = _torch().empty(0, dtype=A.dtype)
        r = _WithoutQ.apply(r) if r.requires_grad else r
    return _named("linalg_qr", _finish((q, r), out))


def _without_q_class():
    from .autograd import Function

    class WithoutQ(Function):
        """R of mode='r': PyTorch refuses to differentiate it (Q is not computed)."""
        @staticmethod
        def forward(ctx, r):
            return r.clone()

        @staticmethod
        def backward(ctx, grad):
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not "
                               "computed when mode='r'. Please use linalg.qr(A, "
                               "mode='reduced') if you are going to differentiate through "
                               "linalg.qr.")
    return WithoutQ


_WithoutQ = _without_q_class()


def householder_product(A, tau, *, out=None):
    return _finish(_L.orgqr(A, tau), out)


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """Pseudo-inverse; singular values at or below max(atol, rtol * largest) count as zero
    (default rtol: eps * max(m, n) when neither is given)."""
    if atol not in (None, 0) or isinstance(rtol, _torch().Tensor):
        raise NotImplementedError("reftorch's linalg.pinv supports a float rtol only")
    if rtol is None:
        rtol = 0.0 if atol is not None else _default_rtol(A)
    return _finish(_L.pinverse(A, float(rtol)), out)


def _default_rtol(A):
    return float(np.finfo(np.dtype(A.dtype.numpy_dtype)).eps) * max(A.shape[-2:], default=1)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """Number of singular values (|eigenvalues| when hermitian) above
    max(atol, rtol * largest); default rtol eps * max(m, n) when neither is given."""
    torch = _torch()
    _L._check_matrix(A, "linalg.matrix_rank", square=False)
    values = eigvalsh(A).abs() if hermitian else svdvals(A)
    if rtol is None:
        rtol = 0.0 if atol is not None and (not isinstance(atol, (int, float)) or atol > 0) \
            else _default_rtol(A)
    atol = 0.0 if atol is None else atol
    largest = values.amax(-1, keepdim=True) if values.shape[-1] else \
        torch.zeros(tuple(values.shape[:-1]) + (1,), dtype=values.dtype)
    tol = torch.maximum(torch.as_tensor(atol, dtype=values.dtype), rtol * largest)
    return _finish((values > tol).sum(-1), out)


def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B||.

    The solution is the minimum-norm one, A^+ B with singular values below rcond times the
    largest treated as zero (through pinverse, so it is differentiable); PyTorch's CPU
    drivers agree on it wherever A is well determined ('gels' assumes full rank and returns
    arbitrary values otherwise). What else is reported depends on the driver, as in PyTorch:
    the rank for all but 'gels'; the singular values for the SVD-based 'gelsd' and 'gelss';
    the residuals (squared column norms of A X - B) for tall A when the driver is not
    'gelsy' and every matrix has full column rank ('gels' assumes it).

    Not reproduced: PyTorch 2.13's 'gelsy' can underestimate the rank of a wide matrix with
    dependent columns (rank 2 for a 3 x 6 matrix of rank 3) and then returns a solution that
    does not solve the system; 'gels' on an m x 0 matrix reports zero residuals."""
    torch = _torch()
    if driver not in (None, "gelsy", "gelsd", "gelss", "gels"):
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    driver = driver or "gelsy"
    _L._check_matrix(A, "torch.linalg.lstsq", square=False)
    vector = B.ndim == A.ndim - 1
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    rcond = _default_rtol(A) if rcond is None or rcond < 0 else float(rcond)
    solution = torch.matmul(_L.pinverse(A, rcond), rhs)
    singular = svdvals(A.detach())
    empty = torch.empty(0, dtype=singular.dtype)
    rank = (singular > rcond * singular.amax(-1, keepdim=True)).sum(-1) \
        if singular.shape[-1] else torch.zeros(A.shape[:-2], dtype=D.int64)
    m, n = A.shape[-2:]
    residuals = empty
    if m > n and driver != "gelsy" and (driver == "gels" or bool((rank == n).all())):
        residuals = (torch.matmul(A, solution) - rhs).abs().pow(2).sum(-2)
    if vector:
        solution = solution.squeeze(-1)
    return _named("linalg_lstsq", (
        solution, residuals,
        rank if driver != "gels" else torch.empty(0, dtype=D.int64),
        singular if driver in ("gelsd", "gelss") else empty))


# --- products ----------------------------------------------------------------------------------

def matrix_power(A, n, *, out=None):
    return _blas.matrix_power(A, n, out=out)


def multi_dot(tensors, *, out=None):
    """The product of a list of matrices (the first may be a 1-D row vector, the last a 1-D
    column vector), multiplied in the cheapest order."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got "
                           f"{len(tensors)}")
    first_vector, last_vector = tensors[0].ndim == 1, tensors[-1].ndim == 1
    matrices = [tensors[0].unsqueeze(0) if first_vector else tensors[0]] + tensors[1:-1] + \
        [tensors[-1].unsqueeze(-1) if last_vector else tensors[-1]]
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {m.ndim}D")
    order = _blas._chain_order([m.shape[0] for m in matrices] + [matrices[-1].shape[1]])
    result = _blas._multiply_in_order(matrices, order, 0, len(matrices) - 1)
    if last_vector:
        result = result.squeeze(-1)
    if first_vector:
        result = result.squeeze(0)
    return _finish(result, out)


def cross(input, other, *, dim=-1, out=None):
    return _other.cross(input, other, dim=dim, out=out)


def vecdot(x, y, *, dim=-1, out=None):
    """sum(conj(x) * y) over `dim` (batch dims broadcast)."""
    product = (x.conj() if x.is_complex() else x) * y
    return _finish(product.sum(dim), out)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return _torch().diagonal(A, offset, dim1, dim2)


def vander(x, *, N=None):
    """Columns x^0, x^1, ..., x^(N-1) (increasing powers, unlike torch.vander), built by
    repeated multiplication so the gradient is finite at 0."""
    torch = _torch()
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension.")
    count = x.shape[-1] if N is None else N
    if N is not None and N <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = [torch.ones_like(x)]
    for _ in range(count - 1):       # a loop over the number of columns
        powers.append(powers[-1] * x)
    return torch.stack(powers[:count], -1)


# --- tensor inverse and solve ---------------------------------------------------------------

def tensorinv(A, ind=2, *, out=None):
    """X with tensordot(X, A, ind) = identity: A reshaped to a square matrix and inverted."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement "
                           f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got "
                           f"{math.prod(cols)} != {math.prod(rows)}")
    square = A.reshape(math.prod(rows), math.prod(cols))
    return _finish(inv(square).reshape(cols + rows), out)


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) = B; `dims` of A move to the end first."""
    if dims is not None:
        dims = [wrap_dim(d, A.ndim) for d in dims]
        rest = [d for d in range(A.ndim) if d not in dims]
        A = A.permute(rest + dims)
    result_shape = tuple(A.shape[B.ndim:])
    count = math.prod(result_shape)
    if math.prod(A.shape[:B.ndim]) != count or tuple(A.shape[:B.ndim]) != tuple(B.shape):
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other."
                           "ndim:]) == prod(self.shape[:other.ndim]), but got "
                           f"{count} != {math.prod(A.shape[:B.ndim])}")
    x = solve(A.reshape(count, count), B.reshape(count))
    return _finish(x.reshape(result_shape), out)


# --- norms -------------------------------------------------------------------------------------

def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    if isinstance(dim, int):
        dim = (dim,)
    return _reduction.norm(x, ord, dim, keepdim, out=out, dtype=dtype)


def _check_norm_input(A, fn):
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. "
                           f"Got {A.dtype.scalar_name}")


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """'fro', 'nuc', 2, -2 (largest / smallest singular value), 1, -1 (max / min column
    abs-sum), inf, -inf (max / min row abs-sum) over the two dims `dim`."""
    torch = _torch()
    _check_norm_input(A, "linalg.matrix_norm")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    if dtype is not None:
        A = A.to(dtype)
    rows, cols = (wrap_dim(d, A.ndim) for d in dim)
    if rows == cols:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, "
                           f"{dim[1]})")
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim, out=out)
    if ord not in ("nuc", 2, -2, 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    moved = torch.movedim(A, (rows, cols), (-2, -1))
    if ord in ("nuc", 2, -2):
        s = svdvals(moved)
        value = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
    else:
        summed_dim = -2 if abs(ord) == 1 else -1      # column sums for 1, row sums for inf
        sums = moved.abs().sum(summed_dim)
        value = sums.amax(-1) if ord > 0 else sums.amin(-1)
    if keepdim:
        for d in sorted((rows, cols)):
            value = value.unsqueeze(d)
    return _finish(value, out)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """Vector norm when dim is an int or ord is None with dim None (the flattened tensor),
    matrix norm when dim is a pair or A is 2-D with a given ord."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and A.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else dim,
                           keepdim, dtype=dtype, out=out)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                           f"Got {dim}")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)


def cond(A, p=None, *, out=None):
    """Condition number: ratio of extreme singular values for p in (None, 2, -2), else
    matrix_norm(A, p) * matrix_norm(inv(A), p)."""
    _L._check_matrix(A, "linalg.cond", square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = svdvals(A)
        value = s.amax(-1) / s.amin(-1) if p != -2 else s.amin(-1) / s.amax(-1)
        return _finish(value, out)
    return _finish(matrix_norm(A, p) * matrix_norm(inv(A), p), out)
