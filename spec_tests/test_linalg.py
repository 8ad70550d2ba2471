"""Linear algebra beyond the op database: functions PyTorch removed (checked against their
modern replacements), results that are unique only up to signs (checked by invariants),
errors for singular and non-positive-definite input, legacy result layouts, and the
derivative rows (node names, gradients of gauge-invariant losses, gradgradcheck).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch
from reftorch._ops.linalg import LinAlgError
from reftorch.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(20240611)


def both(array, dtype="float64", requires_grad=False):
    """The same values as a reftorch and a torch tensor."""
    array = np.asarray(array)
    r = reftorch.tensor(array, dtype=getattr(reftorch, dtype))
    t = torch.tensor(array, dtype=getattr(torch, dtype))
    if requires_grad:
        r.requires_grad_(True)
        t.requires_grad_(True)
    return r, t


def arr(t):
    if isinstance(t, np.ndarray):
        return t
    t = t.detach()
    return t._host_array() if hasattr(t, "_host_array") else t.resolve_conj().numpy()


def close(got, expected, rtol=1e-7, atol=1e-8):
    got, expected = arr(got) if hasattr(got, "shape") else got, \
        arr(expected) if hasattr(expected, "shape") else expected
    assert np.shape(got) == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def general(n, batch=(), shift=2.0):
    return RNG.standard_normal(batch + (n, n)) + shift * np.eye(n)


def spd(n, batch=(), complex_=False):
    b = RNG.standard_normal(batch + (n, n))
    if complex_:
        b = b + 1j * RNG.standard_normal(batch + (n, n))
    a = b @ np.conj(np.swapaxes(b, -1, -2)) + n * np.eye(n)
    return (a + np.conj(np.swapaxes(a, -1, -2))) / 2


def legacy(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return fn(*args, **kwargs)


# --- deprecation warnings ------------------------------------------------------------------

def _legacy_calls():
    a = reftorch.tensor(spd(3))
    u = reftorch.tensor(np.linalg.cholesky(spd(3)).T)
    b = reftorch.tensor(RNG.standard_normal((3, 2)))
    lu = legacy(reftorch.btrifact, reftorch.tensor(general(3)))
    return [
        ("potrf", lambda: reftorch.potrf(a), "torch.linalg.cholesky"),
        ("potri", lambda: reftorch.potri(u), "torch.cholesky_inverse"),
        ("potrs", lambda: reftorch.potrs(b, u), "torch.cholesky_solve"),
        ("pstrf", lambda: reftorch.pstrf(a), "torch.linalg.cholesky"),
        ("solve", lambda: reftorch.solve(b, a), "torch.linalg.solve"),
        ("gesv", lambda: reftorch.gesv(b, a), "torch.linalg.solve"),
        ("gels", lambda: reftorch.gels(b, a), "torch.linalg.lstsq"),
        ("symeig", lambda: reftorch.symeig(a), "torch.linalg.eigh"),
        ("eig", lambda: reftorch.eig(a), "torch.linalg.eig"),
        ("matrix_rank", lambda: reftorch.matrix_rank(a), "torch.linalg.matrix_rank"),
        ("btrifact", lambda: reftorch.btrifact(a), "torch.linalg.lu_factor"),
        ("btrifact_with_info", lambda: reftorch.btrifact_with_info(a),
         "torch.linalg.lu_factor_ex"),
        ("btrisolve", lambda: reftorch.btrisolve(b, *lu), "torch.linalg.lu_solve"),
        ("btriunpack", lambda: reftorch.btriunpack(*lu), "torch.lu_unpack"),
        ("trtrs", lambda: reftorch.trtrs(b, u), "torch.linalg.solve_triangular"),
        ("Tensor.potrf", lambda: a.potrf(), "torch.linalg.cholesky"),
        ("Tensor.gesv", lambda: b.gesv(a), "torch.linalg.solve"),
        ("Tensor.symeig", lambda: a.symeig(True), "torch.linalg.eigh"),
    ]


@pytest.mark.parametrize("name,call,modern", _legacy_calls(),
                         ids=[c[0] for c in _legacy_calls()])
def test_removed_functions_warn_naming_the_modern_route(name, call, modern):
    with pytest.warns(DeprecationWarning, match=modern.replace(".", r"\.")):
        call()


# --- Cholesky legacy names (upper=True by default) -------------------------------------------

def test_potrf_potri_potrs_default_to_the_upper_factor():
    a, ta = both(spd(4))
    b, tb = both(RNG.standard_normal((4, 2)))
    u = legacy(reftorch.potrf, a)
    tu = torch.linalg.cholesky(ta).mH
    close(u, tu)
    close(legacy(a.potrf, False), torch.linalg.cholesky(ta))
    close(legacy(reftorch.potri, u), torch.cholesky_inverse(tu, upper=True))
    close(legacy(u.potri), torch.linalg.inv(ta))
    close(legacy(reftorch.potrs, b, u), torch.cholesky_solve(tb, tu, upper=True))
    close(legacy(b.potrs, u), torch.linalg.solve(ta, tb))


def test_cholesky_reads_only_the_stated_triangle():
    a = spd(3)
    garbage = a + np.triu(RNG.standard_normal((3, 3)), 1) * 10  # upper part made wrong
    r, t = both(garbage)
    close(reftorch.cholesky(r), torch.linalg.cholesky(t))
    lower_garbage = a + np.tril(RNG.standard_normal((3, 3)), -1) * 10
    r, t = both(lower_garbage)
    close(reftorch.cholesky(r, upper=True), torch.linalg.cholesky(t, upper=True))


# --- pstrf (pivoted Cholesky; PyTorch has none any more) --------------------------------------

def test_pstrf_documented_example():
    a = reftorch.tensor([[3.5405, -0.4577, 0.8342], [-0.4577, 1.8244, -0.1996],
                         [0.8342, -0.1996, 3.7493]])
    u, piv = legacy(reftorch.pstrf, a)
    assert piv.dtype == reftorch.int32 and piv.tolist() == [2, 0, 1]
    close(u, np.array([[1.9363, 0.4308, -0.1031], [0.0, 1.8316, -0.2256],
                       [0.0, 0.0, 1.3277]]), atol=1e-4, rtol=0)


@pytest.mark.parametrize("upper", [True, False])
def test_pstrf_is_cholesky_of_the_pivoted_matrix(upper):
    a, ta = both(spd(5))
    result = legacy(reftorch.pstrf, a, upper)
    factor, piv = result
    assert result.u is factor and result.pivot is piv
    p = torch.tensor(arr(piv).astype(np.int64))
    assert int(p[0]) == int(torch.argmax(torch.diagonal(ta)))
    lower = torch.linalg.cholesky(ta[p][:, p])
    close(factor, lower.mH if upper else lower)
    diagonal = np.diagonal(arr(factor))
    assert (np.diff(diagonal) <= 1e-12).all()  # greedy pivots: a non-increasing diagonal


def test_pstrf_rank_deficient_stops_at_the_rank():
    b = RNG.standard_normal((5, 2))
    a, ta = both(b @ b.T)
    u, piv = legacy(reftorch.pstrf, a)
    p = arr(piv).astype(np.int64)
    u = arr(u)
    assert np.abs(u[2:]).max() == 0
    np.testing.assert_allclose(u.T @ u, arr(ta)[p][:, p], atol=1e-10)


# --- legacy solve / gesv ---------------------------------------------------------------------

def test_solve_returns_solution_and_lu_like_modern_torch():
    a, ta = both(general(4, (2, 1)))
    b, tb = both(RNG.standard_normal((3, 4, 2)))
    result = legacy(reftorch.solve, b, a)
    assert type(result).__name__ == "solve" and result.solution is result[0]
    close(result.solution, torch.linalg.solve(ta, tb))
    close(result.LU, torch.linalg.lu_factor(ta.expand(2, 3, 4, 4)).LU)
    x, lu = legacy(b.solve, a)
    close(x, torch.linalg.solve(ta, tb))
    x, lu = legacy(reftorch.gesv, b, a)
    close(x, torch.linalg.solve(ta, tb))


def test_solve_documented_example_residual():
    a = reftorch.tensor([[6.80, -2.11, 5.66, 5.97, 8.23], [-6.05, -3.30, 5.36, -4.44, 1.08],
                         [-0.45, 2.58, -2.70, 0.27, 9.04], [8.32, 2.71, 4.35, -7.17, 2.14],
                         [-9.67, -5.14, -7.26, 6.08, -6.87]]).t()
    b = reftorch.tensor([[4.02, 6.19, -8.22, -7.57, -3.03], [-1.56, 4.00, -8.67, 1.75, 2.86],
                         [9.81, -4.09, -4.57, -8.61, 8.99]]).t()
    x, _ = legacy(reftorch.solve, b, a)
    assert float(reftorch.dist(b, reftorch.mm(a, x))) < 1e-4


def test_solve_gradient_matches_linalg_solve():
    a, ta = both(general(3), requires_grad=True)
    b, tb = both(RNG.standard_normal((3, 2)), requires_grad=True)
    w = RNG.standard_normal((3, 2))
    x = legacy(reftorch.solve, b, a).solution
    assert x.grad_fn.name() == torch.linalg.solve(ta, tb).grad_fn.name()
    got = reftorch.autograd.grad((x * reftorch.tensor(w)).sum(), (a, b))
    expected = torch.autograd.grad((torch.linalg.solve(ta, tb) * torch.tensor(w)).sum(), (ta, tb))
    for g, e in zip(got, expected):
        close(g, e)


# --- gels (least squares / least norm) --------------------------------------------------------

def test_gels_documented_example():
    a = reftorch.tensor([[1., 1, 1], [2, 3, 4], [3, 5, 2], [4, 2, 5], [5, 4, 3]])
    b = reftorch.tensor([[-10., -3], [12, 14], [14, 12], [16, 16], [18, 16]])
    x, _ = legacy(reftorch.gels, b, a)
    expected = [[2.0, 1.0], [1.0, 1.0], [1.0, 2.0], [10.9635, 4.8501], [8.9332, 5.2418]]
    close(x, np.array(expected), atol=2e-4, rtol=0)


def test_gels_tall_matches_lstsq_and_geqrf():
    a, ta = both(RNG.standard_normal((6, 3)))
    b, tb = both(RNG.standard_normal((6, 2)))
    x, qr = legacy(reftorch.gels, b, a)
    assert tuple(x.shape) == (6, 2)
    close(x[:3], torch.linalg.lstsq(ta, tb).solution)
    residual = ((ta @ torch.linalg.lstsq(ta, tb).solution - tb) ** 2).sum(0)
    close((x[3:] ** 2).sum(0), residual)
    close(qr, torch.geqrf(ta).a)
    x1, _ = legacy(reftorch.gels, b[:, 0], a)   # a vector right-hand side
    close(x1[:3, 0], torch.linalg.lstsq(ta, tb[:, :1]).solution[:, 0])


def test_gels_wide_gives_the_minimum_norm_solution():
    a, ta = both(RNG.standard_normal((2, 4)))
    b, tb = both(RNG.standard_normal((2, 3)))
    x, lq = legacy(reftorch.gels, b, a)
    assert tuple(x.shape) == (4, 3)
    close(x, torch.linalg.pinv(ta) @ tb)
    close(lq.tril()[:, :2] @ lq.tril()[:, :2].t(), ta @ ta.T, rtol=1e-7)  # L L^T = A A^T


# --- symeig -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
@pytest.mark.parametrize("upper", [True, False])
def test_symeig_matches_eigh_up_to_signs(dtype, upper):
    h = spd(4, (2,), complex_=dtype.startswith("complex")) - 5 * np.eye(4)
    a, ta = both(h, dtype)
    values, vectors = legacy(reftorch.symeig, a, eigenvectors=True, upper=upper)
    e, v = torch.linalg.eigh(ta, UPLO="U" if upper else "L")
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else {}
    close(values, e, **tol)
    assert (np.diff(arr(values), axis=-1) >= 0).all()      # ascending
    close(vectors.abs(), v.abs(), **tol)                     # columns fixed up to sign/phase
    vh = arr(vectors)
    np.testing.assert_allclose(vh @ (arr(values)[..., None] * np.conj(np.swapaxes(vh, -1, -2))),
                               arr(ta), atol=1e-4 if dtype == "float32" else 1e-10)


def test_symeig_without_eigenvectors_returns_zeros_and_reads_the_triangle():
    h = spd(3)
    lower_garbage = h + np.tril(RNG.standard_normal((3, 3)), -1)
    a, ta = both(lower_garbage)
    result = legacy(reftorch.symeig, a)
    assert type(result).__name__ == "symeig"
    close(result.eigenvalues, torch.linalg.eigvalsh(ta, UPLO="U"))
    assert tuple(result.eigenvectors.shape) == (3, 3) and not arr(result.eigenvectors).any()
    close(legacy(reftorch.symeig, a, False, False).eigenvalues,
          torch.linalg.eigvalsh(ta, UPLO="L"))


def test_symeig_gradient_matches_eigh():
    a, ta = both(spd(4) - 4 * np.eye(4), requires_grad=True)
    w = RNG.standard_normal((4, 4))
    values, vectors = legacy(reftorch.symeig, a, True)
    loss = (values * reftorch.arange(1.0, 5.0, dtype=reftorch.float64)).sum() + \
        (vectors * vectors * reftorch.tensor(w)).sum()      # squares: sign-invariant
    tv, tvec = torch.linalg.eigh(ta, UPLO="U")
    tloss = (tv * torch.arange(1.0, 5.0, dtype=torch.float64)).sum() + \
        (tvec * tvec * torch.tensor(w)).sum()
    assert vectors.grad_fn.name() == tvec.grad_fn.name()
    close(reftorch.autograd.grad(loss, a)[0], torch.autograd.grad(tloss, ta)[0], atol=1e-7)
    # Eigenvalues only (eigenvectors not returned) still differentiate.
    values, _ = legacy(reftorch.symeig, a)
    close(reftorch.autograd.grad(values.sum() * 2, a)[0], 2 * np.eye(4), atol=1e-10)


# --- eig (legacy real layout) -----------------------------------------------------------------

def _sorted_pairs(pairs):
    pairs = np.asarray(pairs)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def test_eig_layout_matches_linalg_eig():
    a, ta = both(RNG.standard_normal((5, 5)))
    values, vectors = legacy(reftorch.eig, a, True)
    assert tuple(values.shape) == (5, 2) and values.dtype == reftorch.float64
    tvals = torch.linalg.eigvals(ta)
    close(_sorted_pairs(arr(values)), _sorted_pairs(arr(torch.view_as_real(tvals))))
    # Rebuild complex eigenvectors from the real layout; check A v = lambda v, |v| = 1.
    lam = arr(values)[:, 0] + 1j * arr(values)[:, 1]
    raw = arr(vectors)
    complex_vectors = raw.astype(complex)
    for j in np.nonzero(lam.imag > 0)[0]:
        complex_vectors[:, j] = raw[:, j] + 1j * raw[:, j + 1]
        complex_vectors[:, j + 1] = raw[:, j] - 1j * raw[:, j + 1]
    np.testing.assert_allclose(arr(ta) @ complex_vectors, complex_vectors * lam, atol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(complex_vectors, axis=0), 1, atol=1e-12)
    empty = legacy(reftorch.eig, a).eigenvectors
    assert tuple(empty.shape) == (0,)


def _real_spectrum_matrix(n):
    s = general(n)
    return s @ np.diag(np.arange(1.0, n + 1)) @ np.linalg.inv(s)


def test_eig_gradient_for_real_eigenvalues_matches_linalg_eig():
    a, ta = both(_real_spectrum_matrix(4), requires_grad=True)
    w = RNG.standard_normal((4, 4))
    values, vectors = legacy(reftorch.eig, a, True)
    tvals, tvecs = torch.linalg.eig(ta)
    order = np.argsort(arr(values)[:, 0])
    torder = torch.tensor(np.argsort(arr(tvals.real)))
    weights = np.arange(1.0, 5.0)
    loss = (values[:, 0][reftorch.tensor(order)] * reftorch.tensor(weights)).sum() + \
        ((vectors * vectors)[:, reftorch.tensor(order)] * reftorch.tensor(w)).sum()
    tloss = (tvals.real[torder] * torch.tensor(weights)).sum() + \
        ((tvecs.abs() ** 2)[:, torder] * torch.tensor(w)).sum()
    assert values.grad_fn.name() == tvals.grad_fn.name()
    close(reftorch.autograd.grad(loss, a)[0], torch.autograd.grad(tloss, ta)[0], atol=1e-7)


def test_eig_rejects_what_it_does_not_support():
    rotation = reftorch.tensor([[0.0, -1.0], [1.0, 0.0]], requires_grad=True)
    values, _ = legacy(reftorch.eig, rotation, True)
    with pytest.raises(RuntimeError):
        values.sum().backward()          # complex eigenvalues: no derivative
    with pytest.raises(RuntimeError):
        legacy(reftorch.eig, reftorch.ones(2, 3, 3))
    with pytest.raises(RuntimeError):
        legacy(reftorch.eig, reftorch.ones(2, 3))


# --- matrix_rank -----------------------------------------------------------------------------

def test_matrix_rank_documented_examples():
    a = reftorch.eye(10)
    assert legacy(reftorch.matrix_rank, a).item() == 10
    a[0, 0] = 0
    rank = legacy(reftorch.matrix_rank, a)
    assert rank.item() == 9 and rank.dtype == reftorch.int64 and rank.ndim == 0


@pytest.mark.parametrize("symmetric", [False, True])
def test_matrix_rank_matches_linalg_matrix_rank(symmetric):
    b = RNG.standard_normal((6, 3))
    a, ta = both(b @ b.T if symmetric else b @ RNG.standard_normal((3, 5)))
    assert legacy(reftorch.matrix_rank, a, symmetric=symmetric).item() == \
        torch.linalg.matrix_rank(ta, hermitian=symmetric).item() == 3
    assert legacy(reftorch.matrix_rank, a, 1e3, symmetric).item() == \
        torch.linalg.matrix_rank(ta, atol=1e3, rtol=0, hermitian=symmetric).item()
    with pytest.raises(RuntimeError):
        legacy(reftorch.matrix_rank, reftorch.ones(2, 3, 3))


# --- btri* and lu ------------------------------------------------------------------------------

def test_btrifact_family_matches_lu_factor():
    a, ta = both(RNG.standard_normal((2, 4, 4)))
    lu_data, pivots = legacy(reftorch.btrifact, a)
    tlu, tpiv = torch.linalg.lu_factor(ta)
    close(lu_data, tlu)
    assert pivots.dtype == reftorch.int32 and arr(pivots).tolist() == tpiv.tolist()
    _, _, infos = legacy(a.btrifact_with_info)
    assert infos.dtype == reftorch.int32 and not arr(infos).any()
    p, low, up = legacy(reftorch.btriunpack, lu_data, pivots)
    tp, tl, tu = torch.lu_unpack(tlu, tpiv)
    close(p, tp), close(low, tl), close(up, tu)
    close(reftorch.matmul(p, reftorch.matmul(low, up)), ta)


def test_btrisolve_takes_a_batch_of_vectors_as_documented():
    a, ta = both(RNG.standard_normal((2, 3, 3)))
    b, tb = both(RNG.standard_normal((2, 3)))
    x = legacy(reftorch.btrisolve, b, *legacy(reftorch.btrifact, a))
    assert tuple(x.shape) == (2, 3)
    close(x, torch.linalg.solve(ta, tb))
    x = legacy(b.unsqueeze(-1).btrisolve, *legacy(reftorch.btrifact, a))
    close(x[..., 0], torch.linalg.solve(ta, tb))


def test_lu_infos_report_the_first_zero_pivot():
    a = np.array([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]])
    r, t = both(a)
    lu_data, piv, info = reftorch.lu(r, get_infos=True)
    tlu, tpiv, tinfo = torch.linalg.lu_factor_ex(t)
    assert info.item() == tinfo.item() and arr(piv).tolist() == tpiv.tolist()
    close(lu_data, tlu)


def test_lu_without_pivoting_factorizes_in_place_order():
    # PyTorch's CPU backend refuses pivot=False (CUDA only); the factorization is checked by
    # its definition: A = L U with unit-lower L and pivots 1..n.
    a, ta = both(general(4, (2,), shift=5.0))
    lu_data, piv = reftorch.lu(a, pivot=False)
    assert arr(piv).tolist() == [[1, 2, 3, 4]] * 2
    p, low, up = reftorch.lu_unpack(lu_data, piv)
    close(p, np.broadcast_to(np.eye(4), (2, 4, 4)))
    close(reftorch.matmul(low, up), ta)


def test_complex_lu_pivots_like_lapack():
    """LAPACK picks the pivot by |Re| + |Im| (not the modulus): here they disagree."""
    a = np.array([[0.9 + 0.9j, 1.0], [1.25 + 0j, 1.0]])   # |.|: 1.27 vs 1.25; |Re|+|Im|: 1.8
    r, t = both(a, "complex128")
    assert arr(reftorch.lu(r)[1]).tolist() == torch.linalg.lu_factor(t).pivots.tolist()


# --- trtrs / triangular_solve -----------------------------------------------------------------

@pytest.mark.parametrize("upper,transpose,unit", [(True, False, False), (False, True, False),
                                                  (True, True, True)])
def test_trtrs_matches_solve_triangular(upper, transpose, unit):
    tri = np.triu if upper else np.tril
    a, ta = both(tri(general(4, shift=3.0)))
    b, tb = both(RNG.standard_normal((4, 2)))
    x, clone = legacy(reftorch.trtrs, b, a, upper, transpose, unit)
    lhs = ta.mT if transpose else ta
    close(x, torch.linalg.solve_triangular(lhs, tb, upper=upper != transpose,
                                           unitriangular=unit))
    close(clone, ta)
    x2, _ = legacy(b.trtrs, a, upper, transpose, unit)
    close(x2, x)


# --- errors ------------------------------------------------------------------------------------

def _messages(fn_r, fn_t):
    with pytest.raises(Exception) as r_info:
        fn_r()
    with pytest.raises(Exception) as t_info:
        fn_t()
    return r_info.value, t_info.value


@pytest.mark.parametrize("batched", [False, True])
def test_singular_inverse_raises_linalg_error_like_torch(batched):
    a = np.stack([np.eye(3), np.diag([1.0, 0.0, 1.0])]) if batched else np.diag([1.0, 0.0, 1.0])
    r, t = both(a)
    got, expected = _messages(lambda: reftorch.inverse(r), lambda: torch.inverse(t))
    assert isinstance(expected, torch.linalg.LinAlgError)
    assert isinstance(got, LinAlgError) and isinstance(got, RuntimeError)
    assert str(got) == str(expected)


@pytest.mark.parametrize("batched", [False, True])
def test_not_positive_definite_cholesky_raises_linalg_error_like_torch(batched):
    bad = np.diag([1.0, 2.0, -1.0])
    a = np.stack([spd(3), bad]) if batched else bad
    r, t = both(a)
    got, expected = _messages(lambda: reftorch.cholesky(r), lambda: torch.linalg.cholesky(t))
    assert isinstance(got, LinAlgError)
    assert str(got) == str(expected).replace("linalg.cholesky", "cholesky")


def test_singular_cholesky_inverse_and_solve_raise_linalg_error():
    r, t = both(np.diag([1.0, 0.0, 2.0]))
    got, expected = _messages(lambda: reftorch.cholesky_inverse(r),
                              lambda: torch.cholesky_inverse(t))
    assert isinstance(got, LinAlgError) and str(got) == str(expected)
    b, tb = both(np.ones((3, 1)))
    got, expected = _messages(lambda: legacy(reftorch.solve, b, r),
                              lambda: torch.linalg.solve(t, tb))
    assert isinstance(got, LinAlgError) and isinstance(expected, torch.linalg.LinAlgError)


def test_non_square_and_bad_dtypes_raise_runtime_error():
    for fn in (reftorch.inverse, reftorch.det, reftorch.cholesky, reftorch.slogdet):
        with pytest.raises(RuntimeError):
            fn(reftorch.ones(2, 3))
    with pytest.raises(RuntimeError):
        legacy(reftorch.solve, reftorch.ones(3, 1), reftorch.ones(3, 3, dtype=reftorch.int64))
    with pytest.raises(RuntimeError):
        legacy(reftorch.symeig, reftorch.ones(2, 3))


# --- logdet / slogdet special values ---------------------------------------------------------

def test_logdet_nan_for_negative_and_minus_inf_for_singular():
    for a in (np.diag([1.0, -2.0, 3.0]), np.diag([1.0, 0.0, 3.0]), general(3)):
        r, t = both(a)
        close(reftorch.logdet(r), torch.logdet(t))
        sign, logabs = reftorch.slogdet(r)
        tsign, tlogabs = torch.slogdet(t)
        close(sign, tsign), close(logabs, tlogabs)
        close(reftorch.det(r), torch.det(t))


# --- QR and SVD invariants -------------------------------------------------------------------

@pytest.mark.parametrize("shape,some", [((5, 3), True), ((5, 3), False), ((3, 5), True),
                                        ((2, 4, 4), True)])
def test_qr_invariants(shape, some):
    a, ta = both(RNG.standard_normal(shape))
    q, r = reftorch.qr(a, some=some)
    qa, ra = arr(q), arr(r)
    np.testing.assert_allclose(qa @ ra, arr(ta), atol=1e-12)
    k = qa.shape[-1]
    np.testing.assert_allclose(np.swapaxes(qa, -1, -2) @ qa,
                               np.broadcast_to(np.eye(k), qa.shape[:-2] + (k, k)), atol=1e-12)
    np.testing.assert_array_equal(ra, np.triu(ra))
    tq, tr = torch.linalg.qr(ta, mode="reduced" if some else "complete")
    close(q, tq), close(r, tr)   # same Householder sign convention as LAPACK


def test_complete_qr_of_tall_matrix_has_no_derivative():
    a = reftorch.tensor(RNG.standard_normal((4, 2)), requires_grad=True)
    q, r = reftorch.qr(a, some=False)
    with pytest.raises(RuntimeError, match="not differentiable"):
        (q.sum() + r.sum()).backward()


@pytest.mark.parametrize("shape,some", [((5, 3), True), ((5, 3), False), ((3, 5), False),
                                        ((2, 3, 3), True)])
def test_svd_invariants(shape, some):
    a, ta = both(RNG.standard_normal(shape))
    u, s, v = reftorch.svd(a, some=some)
    ua, sa, va = arr(u), arr(s), arr(v)
    k = sa.shape[-1]
    rebuilt = (ua[..., :, :k] * sa[..., None, :]) @ np.swapaxes(va[..., :, :k], -1, -2)
    np.testing.assert_allclose(rebuilt, arr(ta), atol=1e-12)
    for m in (ua, va):
        k = m.shape[-1]
        np.testing.assert_allclose(np.swapaxes(m, -1, -2) @ m,
                                   np.broadcast_to(np.eye(k), m.shape[:-2] + (k, k)),
                                   atol=1e-12)
    assert (np.diff(sa, axis=-1) <= 0).all() and (sa >= 0).all()
    close(s, torch.linalg.svdvals(ta))


def test_svd_without_uv_returns_zero_factors_and_differentiable_s():
    a, ta = both(RNG.standard_normal((4, 3)), requires_grad=True)
    u, s, v = reftorch.svd(a, compute_uv=False)
    tu, ts, tv = torch.svd(ta, compute_uv=False)
    assert tuple(u.shape) == (4, 4) and tuple(v.shape) == (3, 3)
    assert not arr(u).any() and not arr(v).any()
    close(reftorch.autograd.grad(s.sum(), a)[0], torch.autograd.grad(ts.sum(), ta)[0])


# --- derivative rows -------------------------------------------------------------------------

def _node_cases(m):
    a = m.tensor(general(3), requires_grad=True)
    h = m.tensor(spd(3), requires_grad=True)
    low = m.tensor(np.linalg.cholesky(spd(3)), requires_grad=True)
    b = m.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    lu_data, piv = m.lu(a)
    return {
        "cholesky": m.cholesky(h), "cholesky_inverse": m.cholesky_inverse(low),
        "cholesky_solve": m.cholesky_solve(b, low), "inverse": m.inverse(a), "det": m.det(a),
        "logdet": m.logdet(h), "slogdet": m.slogdet(a)[1],
        "triangular_solve": m.triangular_solve(b, low, upper=False)[0], "qr": m.qr(a)[0],
        "svd": m.svd(a)[1], "pinverse": m.pinverse(a), "lu": lu_data,
        "lu_unpack": m.lu_unpack(lu_data, piv)[1], "lu_solve": m.lu_solve(b, lu_data, piv),
        "orgqr": m.orgqr(*m.geqrf(a)), "ormqr": m.ormqr(*m.geqrf(a), b),
    }


def test_grad_fn_names_match_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = _node_cases(reftorch)
        theirs = _node_cases(torch)
    for name in theirs:
        assert ours[name].grad_fn.name() == theirs[name].grad_fn.name(), name


def test_geqrf_backward_is_not_implemented_like_torch():
    a = reftorch.tensor(general(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        reftorch.geqrf(a)[0].sum().backward()


def _x(array):
    return reftorch.tensor(array, dtype=reftorch.float64, requires_grad=True)


def _sym(a):
    return (a + a.mT) / 2


GRADGRAD = {
    "inverse": (lambda a: reftorch.inverse(a), general(3)),
    "det": (lambda a: reftorch.det(a), general(3)),
    "slogdet": (lambda a: reftorch.slogdet(a)[1], general(3)),
    "cholesky": (lambda a: reftorch.cholesky(_sym(a)), spd(3)),
    "solve": (lambda a: legacy(reftorch.solve, a[:, :1], a).solution, general(3)),
    "qr": (lambda a: reftorch.qr(a)[1], RNG.standard_normal((3, 2))),
    "svd": (lambda a: reftorch.svd(a)[1], RNG.standard_normal((3, 2))),
    "pinverse": (lambda a: reftorch.pinverse(a), RNG.standard_normal((3, 2))),
    "symeig": (lambda a: legacy(reftorch.symeig, _sym(a), True)[0], spd(3)),
}


@pytest.mark.parametrize("name", sorted(GRADGRAD))
def test_double_backward(name):
    fn, value = GRADGRAD[name]
    assert gradgradcheck(fn, (_x(value),), atol=1e-5, rtol=1e-3)


def test_gradcheck_of_removed_functions():
    a = _x(general(3))
    assert gradcheck(lambda a: legacy(reftorch.solve, a[:, :2], a).solution, (a,))
    assert gradcheck(lambda a: legacy(reftorch.symeig, _sym(a), True)[0], (_x(spd(3)),))
    assert gradcheck(lambda a: legacy(reftorch.eig, a, True)[0][:, 0],
                     (_x(_real_spectrum_matrix(3)),))
    assert gradcheck(lambda a: (lambda v: v * v)(legacy(reftorch.eig, a, True)[1]),
                     (_x(_real_spectrum_matrix(3)),))
