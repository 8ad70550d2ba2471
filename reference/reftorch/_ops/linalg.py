"""Linear algebra (LAPACK): factorizations, solvers, inverses and determinants, with PyTorch's
legacy names.

NumPy's `numpy.linalg` is the engine wherever it has the routine (inv, det, slogdet, solve,
cholesky, qr, svd, eigh, eig, pinv, matrix_rank), all batched. NumPy has no LU factorization,
no triangular solve and no access to Householder reflectors beyond `qr(mode="raw")`, so those
are written here: each is a loop over the columns (or rows) of the matrix whose body is
vectorized over the batch and the remaining rows, which is how LAPACK's unblocked routines
(getf2, trsv, org2r) are organised too.

Legacy functions (potrf, gesv, gels, btrifact, symeig, eig, ...) keep their documented
behaviour and warn with a DeprecationWarning that names the modern route. The gradient
formulas (the `*_gradient` functions at the end) are written with reftorch ops, so they can
themselves be differentiated; autograd/derivatives/linalg.py calls them.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import _dtype as D
from .. import return_types
from .._promotion import broadcast_shapes
from .._tensor import Tensor
from . import structured

__all__ = [
    "btrifact", "btrifact_with_info", "btrisolve", "btriunpack", "cholesky",
    "cholesky_inverse", "cholesky_solve", "det", "eig", "gels", "geqrf", "gesv", "inverse",
    "logdet", "lu", "lu_solve", "lu_unpack", "matrix_rank", "orgqr", "ormqr", "pinverse",
    "potrf", "potri", "potrs", "pstrf", "qr", "slogdet", "solve", "svd", "symeig",
    "triangular_solve", "trtrs",
]

LINALG_DTYPES = frozenset({D.float32, D.float64, D.complex64, D.complex128})


class LinAlgError(RuntimeError):
    """A matrix that the factorization cannot handle (singular, not positive-definite):
    PyTorch's `torch.linalg.LinAlgError`, a RuntimeError."""


def _reftorch():
    import reftorch
    return reftorch


def _deprecated(old, modern):
    warnings.warn(f"torch.{old} is deprecated (removed from modern PyTorch); use {modern} "
                  f"instead.", DeprecationWarning, stacklevel=3)


# --- argument checks --------------------------------------------------------------------------

def _check_dtype(a, fn, error=RuntimeError):
    """LAPACK routines exist for float, double, cfloat and cdouble only."""
    if a.dtype not in LINALG_DTYPES:
        if error is NotImplementedError:
            raise NotImplementedError(f"\"{fn}_cpu\" not implemented for "
                                      f"'{a.dtype.scalar_name}'")
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. "
                           f"Got {a.dtype.scalar_name}")


def _check_matrix(a, fn, square=True, error=RuntimeError):
    """At least 2-d (and square when `square`), with a LAPACK dtype."""
    if a.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    _check_dtype(a, fn, error)
    if square and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{fn}: A must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")


def _check_same_dtype(b, a, fn, names=("b", "A")):
    if b.dtype != a.dtype:
        raise RuntimeError(f"{fn}: Expected {names[0]} and {names[1]} to have the same dtype, "
                           f"but found {names[0]} of type {b.dtype.scalar_name} and "
                           f"{names[1]} of type {a.dtype.scalar_name} instead.")


def _check_rhs(b, a, fn):
    """b: (*, n, k) right-hand sides for the (*, n, n) matrices `a` (batch dims broadcast)."""
    if b.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    _check_same_dtype(b, a, fn)
    if b.shape[-2] != a.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for {fn}: each A matrix is "
                           f"{a.shape[-2]} by {a.shape[-1]} but each b matrix is "
                           f"{b.shape[-2]} by {b.shape[-1]}")
    broadcast_shapes(tuple(b.shape[:-2]), tuple(a.shape[:-2]))


def _batch_prefix(a, index):
    """PyTorch names the failing matrix of a batch: "(Batch element 3): "."""
    return f"(Batch element {index}): " if a.ndim > 2 else ""


def _run(op, inputs, params, out=None):
    return structured.run(op, tuple(inputs), params, out=out)


def _named(name, values):
    return return_types.named(name, values)


# --- NumPy building blocks ---------------------------------------------------------------------

def _mT(a):
    return np.swapaxes(a, -1, -2)


def _mH(a):
    return np.conj(_mT(a)) if np.iscomplexobj(a) else _mT(a)


def _broadcast_batch(*arrays):
    """The arrays with their batch (all but the last two) dims broadcast together."""
    batch = np.broadcast_shapes(*(x.shape[:-2] for x in arrays))
    return [np.broadcast_to(x, batch + x.shape[-2:]) for x in arrays]


def _pivot_measure(x):
    """LAPACK's i?amax: |x| for real, |Re x| + |Im x| for complex (not the modulus)."""
    return np.abs(x.real) + np.abs(x.imag) if x.dtype.kind == "c" else np.abs(x)


LU_BLOCK = 32   # columns per panel of the blocked LU


def _factor_panel(panel, pivot, first_column):
    """Unblocked LU (LAPACK's getf2) of a (count, rows, width) panel, in place.

    Column j picks the first row (at or below j) of largest |a| as pivot, swaps it up,
    scales the column below by the reciprocal of the pivot and updates the rest of the
    panel. A zero pivot leaves the column unscaled, as LAPACK does. Returns the panel's
    row order (row i of the factored panel is input row order[i]), the 0-based local pivot
    rows (count, width) and `info` (columns numbered from `first_column`)."""
    count, rows, width = panel.shape
    # The row numbers ride along in an extra last column, so one swap moves both.
    work = np.concatenate([panel, np.broadcast_to(np.arange(rows, dtype=panel.dtype)[:, None],
                                                  (count, rows, 1))], axis=-1)
    batch = np.arange(count)
    local_pivots = np.tile(np.arange(width), (count, 1))
    for j in range(min(rows, width)):
        if pivot:
            p = j + np.argmax(_pivot_measure(work[:, j:, j]), axis=1)
            local_pivots[:, j] = p
            row_j = work[batch, j].copy()
            work[batch, j] = work[batch, p]
            work[batch, p] = row_j
        d = work[:, j, j]
        if d.all():
            work[:, j + 1:, j] *= (1 / d)[:, None]
        else:
            work[:, j + 1:, j] *= (1 / np.where(d == 0, 1, d))[:, None]
        work[:, j + 1:, j + 1:width] -= work[:, j + 1:, j, None] * work[:, None, j, j + 1:width]
    panel[...] = work[..., :width]
    order = work[..., width].real.astype(np.int64)
    # A zero pivot stays on the diagonal: info is the first one (1-based), 0 if none.
    diagonal = np.arange(min(rows, width))
    zero = panel[:, diagonal, diagonal] == 0
    info = np.where(zero.any(axis=1), first_column + 1 + np.argmax(zero, axis=1), 0)
    return order, local_pivots, info.astype(np.int32)


def _unit_lower_solve(low, b):
    """L^{-1} b for unit lower-triangular L (the U12 block of blocked LU)."""
    n = low.shape[-1]
    unit_low = np.tril(low, -1) + np.eye(n, dtype=low.dtype)
    try:    # gesv on a unit lower-triangular matrix is forward substitution, in LAPACK
        return np.linalg.solve(unit_low, b)
    except np.linalg.LinAlgError:  # (nan or inf inside): substitution row by row instead
        return solve_triangular(unit_low, b, upper=False, unitriangular=True)


def _upper_solve(up, b):
    """U^{-1} b for the upper triangle U of `up`. LAPACK's gesv on an upper-triangular
    matrix keeps every pivot on the diagonal and eliminates nothing, so it is back
    substitution; a singular U (NumPy raises) gets inf/nan by substitution, as trsm."""
    triangle = np.triu(up)
    try:
        return np.linalg.solve(triangle, b)
    except np.linalg.LinAlgError:
        with np.errstate(divide="ignore", invalid="ignore"):
            return solve_triangular(triangle, b, upper=True)


def lu_factor(a, pivot=True):
    """Batched LU with partial pivoting, as LAPACK's getrf: (LU, pivots, info).

    Right-looking blocked LU: for each panel of LU_BLOCK columns, factor the panel column by
    column (`_factor_panel`), apply its row swaps to the columns left and right of it (laswp),
    solve for the block row of U (U12 = L11^{-1} A12) and update the trailing matrix with one
    matrix product (A22 -= L21 U12), where almost all the arithmetic happens. Pivots are the
    same rows as the unblocked algorithm picks (largest |a| in the column, first on ties);
    `info` is the 1-based column of the first exactly-zero pivot (0 if none); pivots are
    1-based int32.
    """
    lu = np.array(a, copy=True, order="C")   # C order, so that reshape below is a view
    *batch, m, n = lu.shape
    k = min(m, n)
    count = int(np.prod(batch, dtype=np.int64))
    flat = lu.reshape(count, m, n)        # a view: the updates land in `lu`
    batch_index = np.arange(count)[:, None]
    pivots = np.zeros((count, k), dtype=np.int32)
    info = np.zeros(count, dtype=np.int32)
    for start in range(0, k, LU_BLOCK):
        stop = min(start + LU_BLOCK, k)
        panel = flat[:, start:, start:stop].copy()
        order, local_pivots, panel_info = _factor_panel(panel, pivot, start)
        flat[:, start:, start:stop] = panel
        pivots[:, start:stop] = start + local_pivots
        info = np.where(info == 0, panel_info, info)
        # laswp: the same row exchanges for the columns outside the panel.
        rows = start + order
        for columns in (slice(0, start), slice(stop, n)):
            flat[:, start:, columns] = flat[batch_index, rows, columns]
        if stop < n:
            u12 = _unit_lower_solve(flat[:, start:stop, start:stop], flat[:, start:stop, stop:])
            flat[:, start:stop, stop:] = u12
            # (contiguous operands: NumPy hands those to BLAS gemm, strided ones it does not)
            flat[:, stop:, stop:] -= np.ascontiguousarray(flat[:, stop:, start:stop]) @ u12
    return lu, (pivots + 1).reshape(*batch, k), info.reshape(batch)


def _permutation(pivots, m):
    """perm with (P^T A)[i] = A[perm[i]] for the 1-based LAPACK row swaps `pivots` (*, k)."""
    batch = pivots.shape[:-1]
    count = int(np.prod(batch, dtype=np.int64))
    flat = pivots.reshape(count, pivots.shape[-1]).astype(np.int64) - 1
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        top = perm[rows, j].copy()
        perm[rows, j] = perm[rows, p]
        perm[rows, p] = top
    return perm.reshape(batch + (m,))


def solve_triangular(a, b, upper, unitriangular=False):
    """x with a @ x = b for triangular `a` (only its upper or lower triangle is read).

    Substitution one row at a time, vectorized over the batch and the right-hand sides;
    a zero diagonal gives inf/nan as BLAS trsm does (no error)."""
    a, b = _broadcast_batch(a, b)
    n = a.shape[-1]
    x = np.zeros(b.shape, dtype=np.result_type(a, b))
    for i in (range(n - 1, -1, -1) if upper else range(n)):
        known = slice(i + 1, n) if upper else slice(0, i)
        r = b[..., i, :] - (a[..., i, None, known] @ x[..., known, :])[..., 0, :]
        x[..., i, :] = r if unitriangular else r / a[..., i, i, None]
    return x


def _eye_like(a):
    return np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)


# --- error messages -------------------------------------------------------------------------

def _singular_error(fn, a):
    """The LinAlgError PyTorch raises for a singular matrix: the first zero pivot of its LU."""
    _, _, info = lu_factor(a)
    flat = info.reshape(-1)
    index = int(np.argmax(flat > 0)) if flat.size and (flat > 0).any() else 0
    element = int(flat[index]) if flat.size and flat[index] > 0 else 1
    return LinAlgError(f"{fn}: {_batch_prefix(a, index)}The diagonal element {element} is "
                       f"zero, the inversion could not be completed because the input matrix "
                       f"is singular.")


def _not_positive_definite_error(fn, a):
    """The first batch element and the order of its first leading minor that is not
    positive-definite (checked through the signs of the leading minors' determinants)."""
    n = a.shape[-1]
    flat = a.reshape((-1, n, n))
    bad = np.zeros((flat.shape[0], n), dtype=bool)
    for k in range(1, n + 1):
        sign, _ = np.linalg.slogdet(flat[:, :k, :k])
        bad[:, k - 1] = ~(np.real(sign) > 0)
    index = int(np.argmax(bad.any(axis=1)))
    order = int(np.argmax(bad[index])) + 1
    return LinAlgError(f"{fn}: {_batch_prefix(a, index)}The factorization could not be "
                       f"completed because the input is not positive-definite (the leading "
                       f"minor of order {order} is not positive-definite).")


# --- Cholesky family ------------------------------------------------------------------------

def _cholesky_kernel(a, upper):
    # LAPACK's potrf reads one triangle; NumPy's cholesky reads the lower one, so for the
    # upper factor it is given A^H (whose lower triangle is A's upper triangle, conjugated).
    source = _mH(a) if upper else a
    try:
        low = np.linalg.cholesky(source)
    except np.linalg.LinAlgError:
        raise _not_positive_definite_error("cholesky", source) from None
    return _mH(low) if upper else low


CHOLESKY = structured.declare("cholesky", _cholesky_kernel, family="other",
                              params={"upper": False}, dtypes=LINALG_DTYPES)


def cholesky(input, upper=False, *, out=None):
    """Cholesky factor of (batches of) Hermitian positive-definite matrices:
    A = L L^H (lower, default) or A = U^H U (upper=True)."""
    _check_matrix(input, "cholesky", error=NotImplementedError)
    return _run(CHOLESKY, (input,), {"upper": bool(upper)}, out)


def _cholesky_inverse_kernel(u, upper):
    triangle = np.triu(u) if upper else np.tril(u)
    if (np.diagonal(triangle, axis1=-2, axis2=-1) == 0).any():
        raise _singular_error("cholesky_inverse", triangle)
    inv = solve_triangular(triangle, _eye_like(triangle), upper)
    # (U^H U)^{-1} = U^{-1} U^{-H};  (L L^H)^{-1} = L^{-H} L^{-1}
    return inv @ _mH(inv) if upper else _mH(inv) @ inv


CHOLESKY_INVERSE = structured.declare("cholesky_inverse", _cholesky_inverse_kernel,
                                      family="other", params={"upper": False},
                                      dtypes=LINALG_DTYPES)


def cholesky_inverse(input, upper=False, *, out=None):
    """Inverse of A from its Cholesky factor: (L L^H)^{-1}, or (U^H U)^{-1} when upper."""
    _check_matrix(input, "cholesky_inverse", error=NotImplementedError)
    return _run(CHOLESKY_INVERSE, (input,), {"upper": bool(upper)}, out)


def _cholesky_solve_kernel(b, u, upper):
    # A = U^H U: solve U^H y = b, then U x = y (lower: L y = b, then L^H x = y).
    triangle = np.triu(u) if upper else np.tril(u)
    first = _mH(triangle) if upper else triangle
    y = solve_triangular(first, b, upper=False)
    return solve_triangular(_mH(first), y, upper=True)


CHOLESKY_SOLVE = structured.declare("cholesky_solve", _cholesky_solve_kernel, family="other",
                                    params={"upper": False}, dtypes=LINALG_DTYPES)


def cholesky_solve(input, input2, upper=False, *, out=None):
    """x with A x = b, where A = L L^H (or U^H U) is given by its Cholesky factor `input2`."""
    _check_matrix(input2, "cholesky_solve", error=NotImplementedError)
    if input.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {input.ndim} "
                           f"dimensions instead")
    if input.dtype != input2.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{input.dtype.scalar_name} and A of type "
                           f"{input2.dtype.scalar_name} instead.")
    _check_rhs(input, input2, "cholesky_solve")
    return _run(CHOLESKY_SOLVE, (input, input2), {"upper": bool(upper)}, out)


def potrf(a, upper=True, *, out=None):
    """Legacy name of cholesky, whose `upper` defaulted to True."""
    _deprecated("potrf", "torch.linalg.cholesky (torch.cholesky; note upper=False there)")
    return cholesky(a, upper, out=out)


def potri(u, upper=True, *, out=None):
    """Legacy name of cholesky_inverse (upper by default)."""
    _deprecated("potri", "torch.cholesky_inverse")
    return cholesky_inverse(u, upper, out=out)


def potrs(b, u, upper=True, *, out=None):
    """Legacy name of cholesky_solve (upper by default)."""
    _deprecated("potrs", "torch.cholesky_solve")
    return cholesky_solve(b, u, upper, out=out)


def _pstrf_kernel(a, upper, tol):
    """Pivoted Cholesky (LAPACK pstrf): U^H U = A[piv][:, piv], pivots chosen greedily as the
    largest remaining diagonal; stops when that falls to `tol` (rank-deficient A), leaving
    the remaining rows zero. One step per pivot; each step updates a whole row and the
    trailing Schur complement at once."""
    n = a.shape[-1]
    work = np.array(_mH(a) if not upper else a, copy=True)  # read the stated triangle
    work = np.triu(work) + _mH(np.triu(work, 1))           # the Hermitian matrix it defines
    diag = np.real(np.diagonal(work)).copy()
    if tol < 0:
        tol = n * np.finfo(work.dtype).eps * (diag.max() if n else 0)
    perm = np.arange(n)
    factor = np.zeros_like(work)
    for k in range(n):
        p = k + int(np.argmax(diag[k:]))
        if diag[p] <= tol:
            break
        for arr in (perm, diag):
            arr[[k, p]] = arr[[p, k]]
        work[[k, p], :] = work[[p, k], :]
        work[:, [k, p]] = work[:, [p, k]]
        factor[:k, [k, p]] = factor[:k, [p, k]]
        pivot = np.sqrt(diag[k])
        factor[k, k] = pivot
        # Row k of U: the Schur complement's row k divided by the pivot.
        schur_row = work[k, k + 1:] - _mH(factor[:k, k:k + 1])[0] @ factor[:k, k + 1:]
        factor[k, k + 1:] = schur_row / pivot
        diag[k + 1:] -= np.abs(factor[k, k + 1:]) ** 2
    u = factor
    return (u if upper else _mH(u)), perm.astype(np.int32)


PSTRF = structured.declare("pstrf", _pstrf_kernel, family="other",
                           params={"upper": True, "tol": -1.0}, dtypes=LINALG_DTYPES)


def pstrf(a, upper=True, tol=-1, *, out=None):
    """Legacy pivoted Cholesky: (u, pivot) with u^H u = a[pivot][:, pivot] (upper) or
    u u^H = a[pivot][:, pivot] (lower); `pivot` is 0-based int32. 2-D input only."""
    _deprecated("pstrf", "torch.linalg.cholesky (modern PyTorch has no pivoted Cholesky)")
    _check_matrix(a, "pstrf")
    if a.ndim != 2:
        raise RuntimeError(f"pstrf: expected a 2-D matrix, got {a.ndim} dimensions")
    return _named("pstrf", _run(PSTRF, (a,), {"upper": bool(upper), "tol": float(tol)}, out))


# --- inverse and determinants ----------------------------------------------------------------

def _inverse_kernel(a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular_error("linalg.inv", a) from None


INVERSE = structured.declare("inverse", _inverse_kernel, family="other", dtypes=LINALG_DTYPES)


def inverse(input, *, out=None):
    """Inverse of (batches of) square matrices; a singular one raises LinAlgError."""
    if input.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"linalg.inv: Low precision dtypes not supported. Got "
                           f"{input.dtype.scalar_name}")
    _check_matrix(input, "linalg.inv")
    return _run(INVERSE, (input,), {}, out)


DET = structured.declare("det", lambda a: np.linalg.det(a), family="other",
                         dtypes=LINALG_DTYPES)


def det(input):
    """Determinant of (batches of) square matrices (1 for 0x0 matrices)."""
    _check_matrix(input, "linalg.det", error=NotImplementedError if input.dtype in (
        D.float16, D.bfloat16) else RuntimeError)
    return _run(DET, (input,), {})


def _slogdet_kernel(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return sign.astype(a.dtype), logabsdet.astype(np.finfo(a.dtype).dtype)


SLOGDET = structured.declare("slogdet", _slogdet_kernel, family="other", dtypes=LINALG_DTYPES)


def slogdet(input):
    """(sign, log|det|): sign is ±1 (a unit complex number for complex input), or 0 with
    logabsdet -inf for a singular matrix."""
    _check_matrix(input, "linalg.slogdet", error=NotImplementedError if input.dtype in (
        D.float16, D.bfloat16) else RuntimeError)
    return _named("slogdet", _run(SLOGDET, (input,), {}))


def logdet(input):
    """log(det(A)): nan for a negative determinant, -inf for a singular matrix.

    As in PyTorch this is slogdet followed by a `where` (real) or log(sign) + logabsdet
    (complex), so its gradient flows through slogdet."""
    torch = _reftorch()
    sign, logabsdet = slogdet(input)
    if input.is_complex():
        return torch.log(sign) + logabsdet
    nan = torch.tensor(float("nan"), dtype=input.dtype)
    return torch.where(sign == -1, nan, logabsdet)


# --- solvers ----------------------------------------------------------------------------------

def _solve_kernel(b, a):
    b, a = _broadcast_batch(b, a)
    factors, _, info = lu_factor(a)
    if (info > 0).any():
        raise LinAlgError("linalg.solve: The solver failed because the input matrix is "
                          "singular.")
    return np.linalg.solve(a, b), factors


SOLVE = structured.declare("solve", _solve_kernel, family="other", dtypes=LINALG_DTYPES)


def _solve(input, A, fn="solve", out=None):
    _check_matrix(A, fn)
    _check_rhs(input, A, fn)
    return _named("solve", _run(SOLVE, (input, A), {}, out))


def solve(input, A, *, out=None):
    """Legacy solve(B, A): (solution X of A X = B, packed LU factorization of A); batch
    dimensions broadcast."""
    _deprecated("solve", "torch.linalg.solve (arguments reversed; torch.linalg.lu_factor for "
                "the LU factorization)")
    return _solve(input, A, out=out)


def gesv(b, A, *, out=None):
    """Older legacy name of solve(B, A)."""
    _deprecated("gesv", "torch.linalg.solve (arguments reversed)")
    return _solve(b, A, "gesv", out)


def _triangular_solve_kernel(b, a, upper, transpose, unitriangular):
    b, a = _broadcast_batch(b, a)
    triangle = np.triu(a) if upper else np.tril(a)
    if transpose:  # solve A^T x = b: A^T is triangular the other way round
        x = solve_triangular(_mT(triangle), b, not upper, unitriangular)
    else:
        x = solve_triangular(triangle, b, upper, unitriangular)
    return x, np.array(a)


TRIANGULAR_SOLVE = structured.declare("triangular_solve", _triangular_solve_kernel,
                                      family="other", params={"upper": True,
                                                              "transpose": False,
                                                              "unitriangular": False},
                                      dtypes=LINALG_DTYPES)


def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """(X, clone of A) with A X = b (A^T X = b with transpose=True) for triangular A; batch
    dimensions broadcast."""
    _check_matrix(A, "triangular_solve")
    _check_rhs(input, A, "triangular_solve")
    params = {"upper": bool(upper), "transpose": bool(transpose),
              "unitriangular": bool(unitriangular)}
    return _named("triangular_solve", _run(TRIANGULAR_SOLVE, (input, A), params, out))


def trtrs(b, A, upper=True, transpose=False, unitriangular=False):
    """Legacy name of triangular_solve."""
    _deprecated("trtrs", "torch.linalg.solve_triangular (arguments reversed)")
    return triangular_solve(b, A, upper, transpose, unitriangular)


# --- Householder QR: geqrf, orgqr, ormqr, qr, gels --------------------------------------------

def _geqrf_kernel(a):
    # NumPy's raw mode returns LAPACK's geqrf output in Fortran order, i.e. transposed.
    if a.shape[-1] == 0 or a.shape[-2] == 0:
        return np.array(a), np.zeros(a.shape[:-2] + (0,), dtype=a.dtype)
    h, tau = np.linalg.qr(a, mode="raw")
    return np.ascontiguousarray(_mT(h)), tau.astype(a.dtype)


GEQRF = structured.declare("geqrf", _geqrf_kernel, family="other", dtypes=LINALG_DTYPES)


def geqrf(input, *, out=None):
    """LAPACK geqrf: R in the upper triangle, the Householder vectors below it, and tau."""
    _check_matrix(input, "geqrf", square=False)
    return _named("geqrf", _run(GEQRF, (input,), {}, out))


def _reflector(a, i):
    """The i-th Householder vector v (*, m): zeros above i, 1 at i, a[i+1:, i] below."""
    v = np.zeros(a.shape[:-1], dtype=a.dtype)
    v[..., i] = 1
    v[..., i + 1:] = a[..., i + 1:, i]
    return v


def apply_householder(a, tau, c, adjoint=False):
    """Q @ c (or Q^H @ c) with Q = H_0 H_1 ... H_{k-1}, H_i = I - tau_i v_i v_i^H, the
    reflectors stored LAPACK-style in `a` (*, m, n) and `tau` (*, k). One reflector per step,
    each applied to all of c's columns and batches at once."""
    k = tau.shape[-1]
    c = np.array(c, copy=True)
    order = range(k) if adjoint else range(k - 1, -1, -1)
    for i in order:
        v = _reflector(a, i)[..., :, None]                     # (*, m, 1)
        t = np.conj(tau[..., i]) if adjoint else tau[..., i]
        c -= t[..., None, None] * (v @ (_mH(v) @ c))
    return c


def _orgqr_kernel(a, tau):
    m, n = a.shape[-2:]
    identity = np.broadcast_to(np.eye(m, n, dtype=a.dtype), a.shape)
    return apply_householder(a, tau, identity)


ORGQR = structured.declare("orgqr", _orgqr_kernel, family="other", dtypes=LINALG_DTYPES)


def _check_householder(a, tau, fn):
    _check_matrix(a, fn, square=False)
    _check_same_dtype(tau, a, fn, ("tau", "input"))
    if tau.ndim != a.ndim - 1 or tuple(tau.shape[:-1]) != tuple(a.shape[:-2]):
        raise RuntimeError(f"{fn}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {tuple(tau.shape[:-1])}")
    if tau.shape[-1] > a.shape[-1]:
        raise RuntimeError(f"{fn}: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1]")


def orgqr(input, tau):
    """The m x n matrix Q (orthonormal columns) of the reflectors from geqrf."""
    _check_householder(input, tau, "orgqr")
    if input.shape[-2] < input.shape[-1]:
        raise RuntimeError("orgqr: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    return _run(ORGQR, (input, tau), {})


def _ormqr_kernel(a, tau, c, left, transpose):
    if left:
        return apply_householder(a, tau, c, adjoint=transpose)
    # c Q = (Q^H c^H)^H and c Q^H = (Q c^H)^H
    return _mH(apply_householder(a, tau, _mH(c), adjoint=not transpose))


ORMQR = structured.declare("ormqr", _ormqr_kernel, family="other",
                           params={"left": True, "transpose": False}, dtypes=LINALG_DTYPES)


def ormqr(input, input2, input3, left=True, transpose=False, *, out=None):
    """Q @ C, Q^H @ C (transpose), C @ Q or C @ Q^H (left=False) with Q from geqrf's
    reflectors, without forming Q."""
    _check_householder(input, input2, "ormqr")
    c = input3
    _check_same_dtype(c, input, "ormqr", ("other", "input"))
    if c.ndim != input.ndim or tuple(c.shape[:-2]) != tuple(input.shape[:-2]):
        raise RuntimeError("ormqr: Expected batch dimensions of other to be equal to "
                           "input.shape[:-2]")
    size = c.shape[-2] if left else c.shape[-1]
    if size != input.shape[-2]:
        raise RuntimeError(f"ormqr: Expected other.shape[{-2 if left else -1}] to be equal "
                           f"to input.shape[-2], but got {size}")
    return _run(ORMQR, (input, input2, c), {"left": bool(left), "transpose": bool(transpose)},
                out)


def _qr_kernel(a, some):
    q, r = np.linalg.qr(a, mode="reduced" if some else "complete")
    return q, r


QR = structured.declare("qr", _qr_kernel, family="other", params={"some": True},
                        dtypes=LINALG_DTYPES)


def qr(input, some=True, *, out=None):
    """(Q, R) with input = Q R, Q with orthonormal columns, R upper-triangular; reduced
    (some=True) or complete. Signs as LAPACK's Householder QR gives them."""
    _check_matrix(input, "linalg.qr", square=False)
    return _named("qr", _run(QR, (input,), {"some": bool(some)}, out))


def _gels_kernel(b, a):
    """LAPACK gels: least squares (m >= n) through A = QR, least norm (m < n) through A = LQ;
    X has max(m, n) rows (residual information below the solution when m > n)."""
    m, n = a.shape
    if m >= n:
        h, tau = _geqrf_kernel(a)
        qtb = apply_householder(h, tau, b, adjoint=True)
        x = qtb.copy()
        x[:n] = solve_triangular(np.triu(h[:n]), qtb[:n], upper=True)
        return x, h
    ht, tau = _geqrf_kernel(_mH(a))             # A^H = Q R, so A = R^H Q^H = L Q^H
    y = solve_triangular(_mH(np.triu(ht[:m])), b, upper=False)
    padded = np.concatenate([y, np.zeros((n - m, b.shape[1]), dtype=y.dtype)])
    return apply_householder(ht, tau, padded), _mH(ht)


GELS = structured.declare("gels", _gels_kernel, family="other", dtypes=LINALG_DTYPES)


def gels(input, A, *, out=None):
    """Legacy gels(B, A): (X, QR) for a full-rank m x n matrix A and m x k matrix B."""
    _deprecated("gels", "torch.linalg.lstsq (arguments reversed)")
    if A.ndim != 2 or input.ndim not in (1, 2):
        raise RuntimeError("gels: expected A to be a 2-D matrix and B a 1-D or 2-D matrix")
    _check_dtype(A, "gels")
    _check_same_dtype(input, A, "gels", ("B", "A"))
    b = input.unsqueeze(-1) if input.ndim == 1 else input
    if b.shape[0] != A.shape[0]:
        raise RuntimeError(f"gels: A and B must have the same number of rows, got "
                           f"{A.shape[0]} and {b.shape[0]}")
    return _named("gels", _run(GELS, (b, A), {}, out))


# --- SVD, eigenvalues, pseudo-inverse, rank ---------------------------------------------------

def _svd_kernel(a, some):
    u, s, vh = np.linalg.svd(a, full_matrices=not some)
    return u, s.astype(np.finfo(a.dtype).dtype), np.ascontiguousarray(_mH(vh))


SVD = structured.declare("svd", _svd_kernel, family="other", params={"some": True},
                         dtypes=LINALG_DTYPES)


def svd(input, some=True, compute_uv=True, *, out=None):
    """(U, S, V) with input = U diag(S) V^H (V, not V^H). compute_uv=False returns zero
    U (m x m) and V (n x n); S stays differentiable (the factors are computed anyway)."""
    _check_matrix(input, "linalg.svd", square=False)
    u, s, v = _run(SVD, (input,), {"some": bool(some) or not compute_uv})
    if not compute_uv:
        m, n = input.shape[-2:]
        torch = _reftorch()
        u = torch.zeros(tuple(input.shape[:-2]) + (m, m), dtype=input.dtype)
        v = torch.zeros(tuple(input.shape[:-2]) + (n, n), dtype=input.dtype)
    result = (u, s, v)
    if out is not None:
        result = structured.write_out(out, result)
    return _named("svd", result)


def _eigh_kernel(a, upper):
    values, vectors = np.linalg.eigh(a, UPLO="U" if upper else "L")
    return values.astype(np.finfo(a.dtype).dtype), vectors


SYMEIG = structured.declare("symeig", _eigh_kernel, family="other", params={"upper": True},
                            dtypes=LINALG_DTYPES)


def symeig(input, eigenvectors=False, upper=True, *, out=None):
    """Legacy symeig: (eigenvalues ascending, eigenvectors) of a Hermitian matrix read from
    its upper (default) or lower triangle; eigenvectors are zeros when not requested."""
    _deprecated("symeig", "torch.linalg.eigh (or torch.linalg.eigvalsh; note its UPLO "
                "defaults to 'L')")
    _check_matrix(input, "symeig")
    values, vectors = _run(SYMEIG, (input,), {"upper": bool(upper)})
    if not eigenvectors:
        vectors = _reftorch().zeros_like(input)
    result = (values, vectors)
    if out is not None:
        result = structured.write_out(out, result)
    return _named("symeig", result)


def _eig_kernel(a):
    """LAPACK geev's real layout: eigenvalues as (real, imaginary) rows; for a conjugate
    pair j, j+1 the eigenvector columns hold the real and imaginary parts of vector j."""
    values, vectors = np.linalg.eig(a)
    values = values.astype(np.result_type(values, 1j))
    pairs = np.stack([values.real, values.imag], axis=-1).astype(a.dtype)
    vectors = vectors.astype(values.dtype)
    real = vectors.real.astype(a.dtype)
    first_of_pair = np.nonzero(values.imag > 0)[0]
    real[:, first_of_pair + 1] = vectors[:, first_of_pair].imag
    return pairs, real


EIG = structured.declare("eig", _eig_kernel, family="other",
                         dtypes=frozenset({D.float32, D.float64}))


def eig(input, eigenvectors=False, *, out=None):
    """Legacy eig of a real square matrix: eigenvalues as an (n, 2) tensor of (real, imag)
    rows, and eigenvectors in LAPACK's real layout (an empty tensor unless requested)."""
    _deprecated("eig", "torch.linalg.eig (complex results)")
    _check_matrix(input, "eig")
    if input.ndim != 2:
        raise RuntimeError(f"eig: input should be 2 dimensional, got {input.ndim}")
    if input.is_complex():
        raise RuntimeError("eig: expected a real (float or double) matrix; use "
                           "torch.linalg.eig for complex input")
    values, vectors = _run(EIG, (input,), {})
    if not eigenvectors:  # (computed anyway: the eigenvalues' gradient needs them)
        vectors = _reftorch().zeros(0, dtype=input.dtype)
    result = (values, vectors)
    if out is not None:
        result = structured.write_out(out, result)
    return _named("eig", result)


def _linalg_eig_kernel(a):
    """torch.linalg.eig: complex eigenvalues and unit-norm eigenvectors (LAPACK geev, as
    NumPy's eig), in the complex dtype of `a`'s precision."""
    complex_dtype = np.result_type(a.dtype, np.complex64)
    values, vectors = np.linalg.eig(a)
    return values.astype(complex_dtype), vectors.astype(complex_dtype)


LINALG_EIG = structured.declare("linalg_eig", _linalg_eig_kernel, family="other",
                                dtypes=LINALG_DTYPES)


def _pinverse_kernel(a, rcond):
    if a.size == 0:
        return np.zeros(_mT(a).shape, dtype=a.dtype)
    return np.linalg.pinv(a, rcond=rcond).astype(a.dtype)


PINVERSE = structured.declare("pinverse", _pinverse_kernel, family="other",
                              params={"rcond": 1e-15}, dtypes=LINALG_DTYPES)


def pinverse(input, rcond=1e-15):
    """Moore-Penrose pseudo-inverse through the SVD: singular values at or below
    rcond * (largest singular value) count as zero."""
    if input.ndim < 2 or input.dtype not in LINALG_DTYPES:
        raise RuntimeError(f"linalg.pinv({input.dtype.scalar_name}{{{list(input.shape)}}}): "
                           f"expected a tensor with 2 or more dimensions of float, double, "
                           f"cfloat or cdouble types")
    return _run(PINVERSE, (input,), {"rcond": float(rcond)})


def _matrix_rank_kernel(a, tol, symmetric):
    if a.size == 0:
        return np.zeros((), dtype=np.int64)
    return np.asarray(np.linalg.matrix_rank(a, tol=tol, hermitian=symmetric), dtype=np.int64)


MATRIX_RANK = structured.declare("matrix_rank", _matrix_rank_kernel, family="other",
                                 params={"tol": None, "symmetric": False},
                                 dtypes=LINALG_DTYPES)


def matrix_rank(input, tol=None, symmetric=False):
    """Legacy numerical rank of a 2-D matrix: singular values (|eigenvalues| when
    symmetric) above tol, by default S.max() * max(m, n) * eps."""
    _deprecated("matrix_rank", "torch.linalg.matrix_rank ('symmetric' is called 'hermitian' "
                "there)")
    _check_dtype(input, "matrix_rank")
    if input.ndim != 2:
        raise RuntimeError(f"matrix_rank: expected a 2-D tensor, but got {input.ndim}-D")
    return _run(MATRIX_RANK, (input,), {"tol": None if tol is None else float(tol),
                                        "symmetric": bool(symmetric)})


# --- LU family --------------------------------------------------------------------------------

def _lu_kernel(a, pivot):
    return lu_factor(a, pivot)


LU = structured.declare("lu", _lu_kernel, family="other", params={"pivot": True},
                        dtypes=LINALG_DTYPES)


def lu(A, pivot=True, get_infos=False, *, out=None):
    """(LU, pivots) — or (LU, pivots, infos) — of LAPACK's getrf: L (unit diagonal, below)
    and U packed in one tensor, 1-based int32 row swaps, and per-matrix info (k > 0: U[k-1,
    k-1] is exactly zero). pivot=False factorizes without row exchanges."""
    _check_matrix(A, "linalg.lu_factor", square=False)
    factors, pivots, infos = _run(LU, (A,), {"pivot": bool(pivot)})
    result = (factors, pivots, infos) if get_infos else (factors, pivots)
    if out is not None:
        return structured.write_out(out, result)
    return _named("_lu_with_info", result) if get_infos else result


def btrifact(A, pivot=True):
    """Legacy batched LU: (A_LU, pivots)."""
    _deprecated("btrifact", "torch.linalg.lu_factor")
    return lu(A, pivot)


def btrifact_with_info(A, pivot=True):
    """Legacy batched LU with info: (A_LU, pivots, infos)."""
    _deprecated("btrifact_with_info", "torch.linalg.lu_factor_ex")
    return tuple(lu(A, pivot, get_infos=True))


def _lu_unpack_kernel(factors, pivots, unpack_data, unpack_pivots):
    m, n = factors.shape[-2:]
    k = min(m, n)
    empty = np.zeros((0,), dtype=factors.dtype)
    if unpack_data:
        low = np.tril(factors[..., :, :k], -1) + np.eye(m, k, dtype=factors.dtype)
        up = np.triu(factors[..., :k, :])
    else:
        low = up = empty
    if unpack_pivots:
        perm = _permutation(pivots, m)
        # A = P L U with P[perm[i], i] = 1 (row i of L U is row perm[i] of A)
        p = (perm[..., :, None] == np.arange(m)).swapaxes(-1, -2).astype(factors.dtype)
    else:
        p = empty
    return p, low, up


LU_UNPACK = structured.declare("lu_unpack", _lu_unpack_kernel, family="other",
                               params={"unpack_data": True, "unpack_pivots": True},
                               dtypes=LINALG_DTYPES)


def _check_pivots(LU_data, LU_pivots, fn):
    if LU_pivots.dtype != D.int32:
        raise RuntimeError(f"{fn}: pivots should be a Tensor of scalar type torch.int32")
    k = min(LU_data.shape[-2:]) if LU_data.ndim >= 2 else 0
    if LU_pivots.ndim < 1 or LU_pivots.shape[-1] != k or \
            tuple(LU_pivots.shape[:-1]) != tuple(LU_data.shape[:-2]):
        raise RuntimeError(f"{fn}: Expected LU_pivots of shape "
                           f"{tuple(LU_data.shape[:-2]) + (k,)}, got {tuple(LU_pivots.shape)}")
    m = LU_data.shape[-2]
    if LU_pivots.numel() and bool(((LU_pivots._np < 1) | (LU_pivots._np > m)).any()):
        raise RuntimeError(f"{fn}: pivots out of range [1, {m}]")


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) with A = P L U from lu()'s output; an unrequested part is an empty tensor."""
    _check_matrix(LU_data, "lu_unpack", square=False)
    _check_pivots(LU_data, LU_pivots, "lu_unpack")
    params = {"unpack_data": bool(unpack_data), "unpack_pivots": bool(unpack_pivots)}
    return _named("lu_unpack", _run(LU_UNPACK, (LU_data, LU_pivots), params, out))


def btriunpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """Legacy name of lu_unpack: (P, L, U)."""
    _deprecated("btriunpack", "torch.lu_unpack")
    return tuple(lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots))


def _lu_solve_kernel(b, factors, pivots):
    b, factors = _broadcast_batch(b, factors)
    n = factors.shape[-1]
    perm = np.broadcast_to(_permutation(pivots, n), b.shape[:-1])
    permuted = np.take_along_axis(b, perm[..., None], axis=-2)   # P^T b
    y = _unit_lower_solve(factors, permuted)
    return _upper_solve(factors, y)


LU_SOLVE = structured.declare("lu_solve", _lu_solve_kernel, family="other",
                              dtypes=LINALG_DTYPES)


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """x with A x = b, A given by lu()'s (LU_data, LU_pivots); batch dims broadcast."""
    _check_matrix(LU_data, "linalg.lu_solve")
    _check_pivots(LU_data, LU_pivots, "linalg.lu_solve")
    if b.ndim < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 "
                           "dimensions.")
    if b.dtype != LU_data.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but "
                           f"found LU of type {LU_data.dtype.scalar_name} and B of type "
                           f"{b.dtype.scalar_name} instead")
    _check_rhs(b, LU_data, "linalg.lu_solve")
    return _run(LU_SOLVE, (b, LU_data, LU_pivots), {}, out)


def btrisolve(b, LU_data, LU_pivots):
    """Legacy batched LU solve; b may be a batch of vectors (B, n) as documented."""
    _deprecated("btrisolve", "torch.linalg.lu_solve")
    if b.ndim == LU_data.ndim - 1:
        return lu_solve(b.unsqueeze(-1), LU_data, LU_pivots).squeeze(-1)
    return lu_solve(b, LU_data, LU_pivots)


# --- gradient formulas (called by autograd/derivatives/linalg.py) -----------------------------------
#
# Written with reftorch ops so that they differentiate again (double backward). `_H` is the
# conjugate transpose of the last two dims; gradients follow PyTorch's convention for
# complex inputs (the conjugate Wirtinger derivative).

def _mm(a, b):
    return _reftorch().matmul(a, b)


def _H(t):
    return t.mT.conj() if t.is_complex() else t.mT


def _eye(n, like):
    return _reftorch().eye(n, dtype=like.dtype)


def _off_diagonal_reciprocal(differences):
    """1 / differences off the diagonal, 0 on it (the diagonal is never divided)."""
    n = differences.shape[-1]
    eye = _eye(n, differences)
    return (1 - eye) / (differences + eye)


def _solve_upper_right(x, r):
    """x @ R^{-H} for upper-triangular R, as (R^{-1} x^H)^H."""
    return _H(triangular_solve(_H(x), r, upper=True).solution)


def inverse_gradient(grad, result):
    return -_mm(_mm(_H(result), grad), _H(result))


def _host(t):
    return np.asarray(t.detach()._host_array())


def _lu_adjoint_solve(factors, pivots, rhs):
    """X with A^H X = rhs from A's packed LU (A = P L U): X = P L^{-H} U^{-H} rhs. A zero
    pivot gives inf/nan, as LAPACK's getrs does (no error)."""
    n = factors.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = solve_triangular(_mH(np.triu(factors)), rhs, upper=False)
        y = solve_triangular(_mH(np.tril(factors, -1) + np.eye(n, dtype=factors.dtype)), z,
                             upper=True, unitriangular=True)
    # Row i of P y is row perm^{-1}[i] of y.
    inverse_perm = np.argsort(_permutation(pivots, n), axis=-1)
    inverse_perm = np.broadcast_to(inverse_perm, y.shape[:-1])
    return np.take_along_axis(y, inverse_perm[..., None], axis=-2)


def _scaled_identity(values, n):
    """(*, n, n) matrices values[..., None, None] * I."""
    return values[..., None, None] * np.eye(n, dtype=values.dtype)


def _det_gradient_first_order(grad, a, result):
    """PyTorch's first-order det backward: solve A^H X = (grad conj(det)) I with A's LU, where
    exactly-zero pivots are replaced by eps (det is C^1, so a nearby invertible matrix gives
    the limit). For an exactly singular matrix (det == 0) this is 0, as in PyTorch.

    det is taken from the same LU as the solve (as PyTorch's forward and backward share one
    getrf): near a singular matrix the huge 1/u_nn of the solve then cancels exactly with
    the u_nn inside det, leaving the cofactor matrix to working precision."""
    array = _host(a)
    n = array.shape[-1]
    factors, pivots, _ = lu_factor(array)
    diagonal = np.arange(n)
    pivot_values = factors[..., diagonal, diagonal]
    swaps = np.count_nonzero(pivots != np.arange(1, min(array.shape[-2:]) + 1), axis=-1)
    det_lu = np.where(swaps % 2, -1, 1) * np.prod(pivot_values, axis=-1)
    coefficient = (_host(grad) * np.conj(det_lu)).astype(array.dtype)
    eps = np.finfo(array.dtype).eps
    factors[..., diagonal, diagonal] = np.where(pivot_values == 0, eps, pivot_values)
    x = _lu_adjoint_solve(factors, pivots, _scaled_identity(coefficient, n))
    return Tensor._from_array(np.ascontiguousarray(x), a.dtype)


def _products_of_the_others(s):
    """(*, n) -> (*, n): entry i is the product of all entries but i, by prefix and suffix
    products (no division, so zeros are fine and it differentiates again)."""
    torch = _reftorch()
    n = s.shape[-1]
    ones = torch.ones(tuple(s.shape[:-1]) + (1,), dtype=s.dtype)
    prefix, suffix = [ones], [ones]
    for i in range(n - 1):          # a loop over the matrix order, not over elements
        prefix.append(prefix[-1] * s[..., i:i + 1])
        suffix.append(suffix[-1] * s[..., n - 1 - i:n - i])
    return torch.cat(prefix, -1) * torch.cat(suffix[::-1], -1)


def _det_gradient_singular(grad, a):
    """Cofactor matrix through the SVD A = U S V^H, valid at singular A: det = det(U)
    det(V^H) prod(S), so gA = U diag(grad conj(det U det V^H) prod_{j != i} S_j) V^H (for
    rank n-1 the adjugate transpose, for lower rank 0)."""
    u, s, v = svd(a)
    vh = _H(v)
    alpha = det(u) * det(vh)
    alpha = alpha.conj() if alpha.is_complex() else alpha
    scale = (grad * alpha).unsqueeze(-1) * _products_of_the_others(s).to(u.dtype)
    return _mm(u * scale.unsqueeze(-2), vh)


def _det_gradient_invertible(grad, a, result):
    coefficient = grad * (result.conj() if result.is_complex() else result)
    return coefficient.unsqueeze(-1).unsqueeze(-1) * _H(inverse(a))


def det_gradient(grad, a, result):
    """d det(A) = det(A) tr(A^{-1} dA), so gA = conj(det) grad A^{-H} for invertible A.

    As in PyTorch: the first derivative (no graph) is a regularised LU solve; when the
    gradient must differentiate again, matrices with |det| < 100 eps take the SVD formula
    (exact at singular matrices), the others the inverse."""
    torch = _reftorch()
    if not torch.is_grad_enabled():
        return _det_gradient_first_order(grad, a, result)
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    eps = np.finfo(np.dtype(a.dtype.numpy_dtype)).eps
    flat_a = a.reshape((-1, n, n))
    flat_grad = grad.expand(batch).reshape(-1)
    flat_det = result.reshape(-1)
    singular = np.abs(_host(flat_det)) < 100 * eps
    if not singular.any():
        return _det_gradient_invertible(grad, a, result)
    chosen = np.nonzero(singular)[0]
    rest = np.nonzero(~singular)[0]
    parts = [_det_gradient_singular(flat_grad[chosen], flat_a[chosen])]
    if rest.size:
        parts.append(_det_gradient_invertible(flat_grad[rest], flat_a[rest], flat_det[rest]))
    # Put the batch elements back in their order.
    order = torch.from_numpy(np.argsort(np.concatenate([chosen, rest])))
    return torch.cat(parts, 0)[order].reshape(batch + (n, n))


def slogdet_gradient(grad_sign, grad_logabsdet, a, sign):
    """log|det| has gradient A^{-H}; a complex sign = det/|det| moves with the imaginary part
    of tr(A^{-1} dA), which gives the i * c term (a real sign is locally constant).

    As in PyTorch, the first derivative solves with A's LU without checking it: a singular
    matrix gives inf/nan instead of an error (only double backward inverts A)."""
    torch = _reftorch()
    real = torch.zeros(sign.shape, dtype=D.float64 if a.dtype in (D.float64, D.complex128)
                       else D.float32) if grad_logabsdet is None else grad_logabsdet
    coefficient = real
    if a.is_complex():
        coefficient = real.to(a.dtype)
        if grad_sign is not None:
            c = -(grad_sign.conj() * sign).imag
            coefficient = coefficient + c.to(a.dtype) * 1j
    if not torch.is_grad_enabled():
        array = _host(a)
        factors, pivots, _ = lu_factor(array)
        rhs = _scaled_identity(np.broadcast_to(_host(coefficient), array.shape[:-2])
                               .astype(array.dtype), array.shape[-1])
        x = _lu_adjoint_solve(factors, pivots, rhs)
        return Tensor._from_array(np.ascontiguousarray(x), a.dtype)
    return coefficient.unsqueeze(-1).unsqueeze(-1) * _H(inverse(a))


def cholesky_gradient(grad, factor, upper):
    """A = L L^H: gA = sym(L^{-H} Phi(L^H gL) L^{-1}), Phi = lower triangle, diagonal halved."""
    torch = _reftorch()
    low, grad = (_H(factor), _H(grad)) if upper else (factor, grad)
    phi = _mm(_H(low), grad)
    phi = torch.tril(phi, -1) + 0.5 * torch.diag_embed(phi.diagonal(0, -2, -1))
    x = triangular_solve(phi, _H(low), upper=True).solution           # L^{-H} Phi
    grad_a = _H(triangular_solve(_H(x), _H(low), upper=True).solution)  # ... L^{-1}
    return 0.5 * (grad_a + _H(grad_a))


def cholesky_inverse_gradient(grad, factor, result, upper):
    """R = (L L^H)^{-1}: gL = -R (gR + gR^H) R L  (upper: -U R (gR + gR^H) R)."""
    common = _mm(_mm(result, grad + _H(grad)), result)
    return -_mm(factor, common) if upper else -_mm(common, factor)


def cholesky_solve_gradient(grad, factor, result, upper, needs):
    grad_b = cholesky_solve(grad, factor, upper)
    grad_factor = None
    if needs[1]:
        common = _mm(grad_b, _H(result))
        common = common + _H(common)
        grad_factor = -_mm(factor, common) if upper else -_mm(common, factor)
    return grad_b, grad_factor


def triangular_solve_gradient(grad_x, grad_m, a, x, upper, transpose, unitriangular):
    """op(A) X = B: gB = op(A)^{-H} gX and gA = -gB X^H (for A^T X = B: gA = -conj(X) gB^T),
    kept on the triangle that was read; the cloned coefficient passes its gradient to A."""
    torch = _reftorch()
    grad_b = grad_a = None
    if grad_x is not None:
        conj_a = a.conj() if a.is_complex() else a
        grad_b = triangular_solve(grad_x, conj_a, upper, not transpose, unitriangular).solution
        if transpose:
            grad_a = -_mm(x.conj() if x.is_complex() else x, grad_b.mT)
        else:
            grad_a = -_mm(grad_b, _H(x))
        grad_a = torch.triu(grad_a, int(unitriangular)) if upper else \
            torch.tril(grad_a, -int(unitriangular))
    if grad_m is not None:
        grad_a = grad_m if grad_a is None else grad_a + grad_m
    return grad_b, grad_a


def _qr_tall_gradient(grad_q, grad_r, q, r):
    """A = QR with m >= n (Q m x n): gA = (gQ + Q copyltu(M)) R^{-H}, M = R gR^H - gQ^H Q,
    where copyltu mirrors the strictly lower triangle onto the upper one."""
    torch = _reftorch()
    m = _mm(r, _H(grad_r)) - _mm(_H(grad_q), q)
    lower = torch.tril(m, -1)
    diagonal = m.diagonal(0, -2, -1)
    if m.is_complex():
        diagonal = diagonal.real.to(m.dtype)
    mirrored = lower + _H(lower) + torch.diag_embed(diagonal)
    return _solve_upper_right(grad_q + _mm(q, mirrored), r)


def qr_gradient(grad_q, grad_r, a_shape, q, r, some):
    torch = _reftorch()
    rows, cols = a_shape[-2:]
    if not some and rows > cols:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                           "and nrows > ncols.")
    grad_q = torch.zeros_like(q) if grad_q is None else grad_q
    grad_r = torch.zeros_like(r) if grad_r is None else grad_r
    if rows >= cols:
        return _qr_tall_gradient(grad_q, grad_r, q, r)
    # Wide A = [X | Y] = Q [U | V]: X = QU is square; Y = QV adds Y gV^H to Q's gradient.
    u, v = r[..., :, :rows], r[..., :, rows:]
    grad_u, grad_v = grad_r[..., :, :rows], grad_r[..., :, rows:]
    y = _mm(q, v)
    grad_x = _qr_tall_gradient(grad_q + _mm(y, _H(grad_v)), grad_u, q, u)
    return torch.cat([grad_x, _mm(q, grad_v)], -1)


def svd_gradient(grad_u, grad_s, grad_v, a_shape, u, s, v, some):
    """A = U diag(S) V^H (Townsend's formula; V, not V^H, is the output):
    gA = U [J S + S K + diag(gS)] V^H + (I - UU^H) gU S^{-1} V^H + U S^{-1} gV^H (I - VV^H),
    J = F o (U^H gU - gU^H U), K = F o (V^H gV - gV^H V), F_ij = 1 / (s_j^2 - s_i^2).
    With complete factors only the first min(m, n) columns count (the rest is arbitrary)."""
    torch = _reftorch()
    rows, cols = a_shape[-2:]
    k = min(rows, cols)
    if not some:
        u, v = u[..., :k], v[..., :k]
        grad_u = None if grad_u is None else grad_u[..., :k]
        grad_v = None if grad_v is None else grad_v[..., :k]
    if grad_s is None:
        grad_s = torch.zeros_like(s)
    if grad_u is None and grad_v is None:
        return _mm(u * grad_s.unsqueeze(-2), _H(v))
    f = _off_diagonal_reciprocal((s * s).unsqueeze(-2) - (s * s).unsqueeze(-1))
    inner = torch.diag_embed(grad_s).to(u.dtype)
    uh_gu = vh_gv = None
    if grad_u is not None:
        uh_gu = _mm(_H(u), grad_u)
        inner = inner + (f * (uh_gu - _H(uh_gu))) * s.unsqueeze(-2)
        if u.is_complex():  # the phase of each singular pair: i Im(diag(U^H gU)) / S
            inner = inner + torch.diag_embed((uh_gu.diagonal(0, -2, -1).imag / s).to(
                u.dtype) * 1j)
    if grad_v is not None:
        vh_gv = _mm(_H(v), grad_v)
        inner = inner + s.unsqueeze(-1) * (f * (vh_gv - _H(vh_gv)))
    grad_a = _mm(_mm(u, inner), _H(v))
    if grad_u is not None and rows > k:
        grad_a = grad_a + _mm((grad_u - _mm(u, uh_gu)) / s.unsqueeze(-2), _H(v))
    if grad_v is not None and cols > k:
        grad_a = grad_a + _mm(u, _H((grad_v - _mm(v, vh_gv)) / s.unsqueeze(-2)))
    return grad_a


def eigh_gradient(grad_values, grad_vectors, values, vectors):
    """A = V diag(L) V^H: gA = V (diag(gL) + F o skew(V^H gV)) V^H, F_ij = 1 / (L_j - L_i),
    skew(X) = (X - X^H) / 2 (a Hermitian gradient, as PyTorch's)."""
    torch = _reftorch()
    if grad_values is None:
        grad_values = torch.zeros_like(values)
    inner = torch.diag_embed(grad_values).to(vectors.dtype)
    if grad_vectors is not None:
        # Only the skew-Hermitian part of V^H gV moves orthonormal eigenvectors.
        f = _off_diagonal_reciprocal(values.unsqueeze(-2) - values.unsqueeze(-1))
        vh_gv = _mm(_H(vectors), grad_vectors)
        inner = inner + f * (0.5 * (vh_gv - _H(vh_gv)))
    return _mm(_mm(vectors, inner), _H(vectors))


def eig_gradient(grad_pairs, grad_vectors, pairs, vectors):
    """Legacy eig with real eigenvalues L and unit eigenvectors V (A V = V diag(L)):
    gA = V^{-T} (diag(gL) + F o (V^T gV - V^T V diag(V^T gV))) V^T, F_ij = 1 / (L_j - L_i)."""
    torch = _reftorch()
    if bool((pairs[..., 1] != 0).any()):
        raise RuntimeError("eig_backward: the backward of eig is only supported for real "
                           "eigenvalues; this matrix has complex ones")
    values = pairs[..., 0]
    grad_values = torch.zeros_like(values) if grad_pairs is None else grad_pairs[..., 0]
    inner = torch.diag_embed(grad_values)
    if grad_vectors is not None:
        vt_gv = _mm(vectors.mT, grad_vectors)
        normalisation = _mm(vectors.mT, vectors) * vt_gv.diagonal(0, -2, -1).unsqueeze(-2)
        f = _off_diagonal_reciprocal(values.unsqueeze(-2) - values.unsqueeze(-1))
        inner = inner + f * (vt_gv - normalisation)
    return _mm(_mm(inverse(vectors).mT, inner), vectors.mT)


def linalg_eig_gradient(grad_values, grad_vectors, a, values, vectors):
    """A V = V diag(L), columns of V of unit norm. With E_ij = L_j - L_i:
    gA = V^{-H} (diag(gL) + (V^H gV - V^H V diag(Re diag(V^H gV))) / conj(E)) V^H, the
    second term off the diagonal only; the real part is kept for real A. The phase of each
    eigenvector is arbitrary, so a loss depending on it (Im diag(V^H gV) != 0) is refused."""
    torch = _reftorch()
    inner = torch.zeros_like(vectors) if grad_values is None else \
        torch.diag_embed(grad_values)
    if grad_vectors is not None:
        vh_gv = _mm(_H(vectors), grad_vectors)
        diagonal = vh_gv.diagonal(0, -2, -1)
        if bool((diagonal.imag.abs() > 1e-6 * (1 + diagonal.abs())).any()):
            raise RuntimeError("linalg_eig_backward: The eigenvectors in the complex case are "
                               "specified up to multiplication by e^{i phi}. The specified "
                               "loss function depends on this quantity, so it is ill-defined.")
        projected = vh_gv - _mm(_H(vectors), vectors) * diagonal.real.to(
            vectors.dtype).unsqueeze(-2)
        differences = (values.unsqueeze(-2) - values.unsqueeze(-1)).conj()
        inner = inner + _off_diagonal_reciprocal(differences) * projected
    grad_a = _solve(_mm(inner, _H(vectors)), _H(vectors)).solution
    return grad_a if a.is_complex() else grad_a.real


def pinverse_gradient(grad, a, result):
    """P = A^+: gA = -P^H gP P^H + (I - A P) gP^H P P^H + P^H P gP^H (I - P A)."""
    p, ph, gh = result, _H(result), _H(grad)
    term1 = -_mm(_mm(ph, grad), ph)
    term2 = _mm(_mm(gh - _mm(_mm(a, p), gh), p), ph)
    term3 = _mm(_mm(ph, p), gh - _mm(gh, _mm(p, a)))
    return term1 + term2 + term3


def _apply_householder_composed(a, tau, c, adjoint):
    """apply_householder written with reftorch ops (differentiable in a, tau and c)."""
    torch = _reftorch()
    rows, k = a.shape[-2], tau.shape[-1]
    vectors = torch.tril(a[..., :, :k], -1) + torch.eye(rows, k, dtype=a.dtype)
    for i in (range(k) if adjoint else range(k - 1, -1, -1)):
        v = vectors[..., :, i:i + 1]
        t = tau[..., i:i + 1].unsqueeze(-1)
        t = t.conj() if adjoint and t.is_complex() else t
        c = c - t * _mm(v, _mm(_H(v), c))
    return c


def householder_gradient(grads, inputs, forward):
    """Gradients of orgqr/ormqr: the reflectors are re-applied with differentiable reftorch
    ops and differentiated by autograd (first derivatives only, as for cdist)."""
    torch = _reftorch()
    with torch.enable_grad():
        leaves = [x.detach().requires_grad_(x.dtype in LINALG_DTYPES) for x in inputs]
        result = forward(*leaves)
    wanted = [x for x in leaves if x.requires_grad]
    found = iter(torch.autograd.grad(result, wanted, grads, allow_unused=True))
    return tuple(next(found) if x.requires_grad else None for x in leaves)


def orgqr_gradient(grad, a, tau):
    def forward(a, tau):
        rows, cols = a.shape[-2:]
        identity = _reftorch().eye(rows, cols, dtype=a.dtype).expand(a.shape)
        return _apply_householder_composed(a, tau, identity, False)
    return householder_gradient(grad, (a, tau), forward)


def ormqr_gradient(grad, a, tau, c, left, transpose):
    def forward(a, tau, c):
        if left:
            return _apply_householder_composed(a, tau, c, transpose)
        return _H(_apply_householder_composed(a, tau, _H(c), not transpose))
    return householder_gradient(grad, (a, tau, c), forward)


def _unpacked(factors, pivots):
    p, low, up = lu_unpack(factors, pivots)
    return p.detach(), low, up


def _lu_square_gradient(low, up, grad_l, grad_u):
    """P^T A = L U (square): L^{-1} P^T dA U^{-1} = L^{-1} dL + dU U^{-1}, strictly lower plus
    upper, so P^T gA = L^{-H} (tril(L^H gL, -1) + triu(gU U^H)) U^{-H}."""
    torch = _reftorch()
    phi = torch.tril(_mm(_H(low), grad_l), -1) + torch.triu(_mm(grad_u, _H(up)))
    x = triangular_solve(phi, _H(low), upper=True, unitriangular=True).solution
    return _solve_upper_right(x, up)


def lu_gradient(grad, factors, pivots):
    """A = P L U from the packed m x n factors, A of full rank.

    Wide (m < n): A = P L [U1 | U2]; the square part P L U1 is differentiated as above, and
    U2 = L^{-1} P^T A2 sends gU2 to A2 as L^{-H} gU2 and to L as -L^{-H} gU2 U2^H.
    Tall (m > n): P^T A = [L1; L2] U; L2 = A2 U^{-1} sends gL2 to A2 as gL2 U^{-H} and to
    U as -L2^H gL2 U^{-H}."""
    torch = _reftorch()
    rows, cols = factors.shape[-2:]
    p, low, up = _unpacked(factors, pivots)
    if rows == cols:
        return _mm(p, _lu_square_gradient(low, up, torch.tril(grad, -1), torch.triu(grad)))
    if rows < cols:
        u1, u2 = up[..., :rows], up[..., rows:]
        grad_u1, grad_u2 = torch.triu(grad[..., :rows]), grad[..., rows:]
        grad_l = torch.tril(grad[..., :rows], -1)
        grad_u2_to_l = triangular_solve(_mm(grad_u2, _H(u2)), _H(low), upper=True,
                                        unitriangular=True).solution
        grad_l = torch.tril(grad_l - grad_u2_to_l, -1)
        grad_a1 = _lu_square_gradient(low, u1, grad_l, grad_u1)
        grad_a2 = triangular_solve(grad_u2, _H(low), upper=True, unitriangular=True).solution
        return _mm(p, torch.cat([grad_a1, grad_a2], -1))
    l1, l2 = low[..., :cols, :], low[..., cols:, :]
    grad_l1, grad_l2 = torch.tril(grad[..., :cols, :], -1), grad[..., cols:, :]
    grad_u = torch.triu(grad[..., :cols, :] - _solve_upper_right(_mm(_H(l2), grad_l2), up))
    grad_a1 = _lu_square_gradient(l1, up, grad_l1, grad_u)
    grad_a2 = _solve_upper_right(grad_l2, up)
    return _mm(p, torch.cat([grad_a1, grad_a2], -2))


def lu_unpack_gradient(grad_l, grad_u, shape):
    """L (m x k) and U (k x n) sit in the lower and upper parts of the m x n LU tensor."""
    torch = _reftorch()
    rows, cols = shape[-2:]
    k = min(rows, cols)
    total = None
    if grad_l is not None and grad_l.ndim >= 2:   # (unpack_data=False: empty L and U)
        part = torch.tril(grad_l, -1)
        if cols > k:
            part = torch.cat([part, part.new_zeros(tuple(part.shape[:-1]) + (cols - k,))], -1)
        total = part
    if grad_u is not None and grad_u.ndim >= 2:
        part = torch.triu(grad_u)
        if rows > k:
            part = torch.cat([part, part.new_zeros(tuple(part.shape[:-2]) + (rows - k, cols))],
                             -2)
        total = part if total is None else total + part
    return total


def lu_solve_gradient(grad, factors, pivots, result, needs):
    """x = A^{-1} b with A = P L U: gb = A^{-H} gx = P L^{-H} U^{-H} gx; gA = -gb x^H, carried
    to the packed factors: gL = tril(P^T gA U^H, -1), gU = triu(L^H P^T gA)."""
    torch = _reftorch()
    p, low, up = _unpacked(factors, pivots)
    z = triangular_solve(grad, _H(up), upper=False).solution
    grad_b = _mm(p, triangular_solve(z, _H(low), upper=True, unitriangular=True).solution)
    grad_factors = None
    if needs[1]:
        pt_ga = -_mm(p.mT, _mm(grad_b, _H(result)))
        grad_factors = torch.tril(_mm(pt_ga, _H(up)), -1) + torch.triu(_mm(_H(low), pt_ga))
    return grad_b, grad_factors, None


def solve_gradient(grad, a, solution, needs):
    """A X = B: gB = A^{-H} gX, gA = -gB X^H."""
    grad_b = _solve(grad, _H(a)).solution
    grad_a = -_mm(grad_b, _H(solution)) if needs[1] else None
    return grad_b, grad_a


# --- Tensor methods -------------------------------------------------------------------------

for _name in ("cholesky", "cholesky_inverse", "cholesky_solve", "inverse", "det", "logdet",
              "slogdet", "geqrf", "orgqr", "ormqr", "qr", "svd", "pinverse", "lu",
              "lu_solve", "triangular_solve", "symeig", "eig", "solve", "gesv", "gels",
              "potrf", "potri", "potrs", "pstrf", "btrifact", "btrifact_with_info",
              "btrisolve", "trtrs"):
    setattr(Tensor, _name, globals()[_name])
del _name
