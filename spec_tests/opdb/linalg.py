"""Op-database entries: linalg (see core.py for the entry format).

Matrices are built in NumPy inside the recipes so that they suit the op: well-conditioned
general matrices (a random matrix plus a multiple of the identity), Hermitian positive-
definite ones (B B^H + n I) and their Cholesky factors, triangular ones with a dominant
diagonal, valid LU pivots. Functions PyTorch removed (solve, gels, symeig, eig, potrf, ...)
cannot be compared here (torch raises); spec_tests/test_linalg.py checks them against the
modern functions instead, with invariants where the result is not unique.

Ops whose forward reads one triangle of its input (cholesky, cholesky_inverse, ...) get
PyTorch's gradient, which is not the finite-difference derivative with respect to the
unread triangle; those entries are compared with torch only (gradcheck=False), and a second
entry builds the structured matrix from a free input inside `call`, which gradcheck accepts.
"""
from __future__ import annotations

import numpy as np

from .core import OpInfo, Sample, TensorArg, function, method

LINALG = ("float32", "float64", "complex64", "complex128")
REAL = ("float32", "float64")
WITH_ERRORS = LINALG + ("int64", "float16")  # other dtypes: torch raises, and so must we


def _random(shape, dt, rng):
    v = rng.standard_normal(shape)
    if dt.startswith("complex"):
        v = v + 1j * rng.standard_normal(shape)
    return v


def _general(shape, dt, rng, layout="contiguous", shift=2.0):
    """A random square matrix (batch) made well-conditioned by a shifted diagonal."""
    n = shape[-1]
    return TensorArg(_random(shape, dt, rng) + shift * np.eye(n), dt, layout)


def _rect(shape, dt, rng, layout="contiguous"):
    return TensorArg(_random(shape, dt, rng), dt, layout)


def _spd_array(shape, dt, rng):
    b = _random(shape, dt, rng)
    a = b @ np.conj(np.swapaxes(b, -1, -2)) + shape[-1] * np.eye(shape[-1])
    return (a + np.conj(np.swapaxes(a, -1, -2))) / 2


def _spd(shape, dt, rng, layout="contiguous"):
    return TensorArg(_spd_array(shape, dt, rng), dt, layout)


def _factor(shape, dt, rng, upper=False, layout="contiguous"):
    low = np.linalg.cholesky(_spd_array(shape, dt, rng))
    return TensorArg(np.conj(np.swapaxes(low, -1, -2)) if upper else low, dt, layout)


def _triangular(shape, dt, rng, upper=True, layout="contiguous"):
    n = shape[-1]
    a = _random(shape, dt, rng) + 3 * np.eye(n)
    return TensorArg(np.triu(a) if upper else np.tril(a), dt, layout)


def _pivots(batch, m, k, rng):
    """Valid 1-based LAPACK row swaps: step j exchanges row j with a row at or below it."""
    pivots = np.stack([rng.integers(j + 1, m + 1, size=batch) for j in range(k)], -1)
    return TensorArg(pivots.reshape(batch + (k,)), "int32", requires_grad=False)


def _lapack_only(samples):
    """Samples for dtypes LAPACK lacks: torch accepts empty matrices of any dtype (nothing
    to compute), an accident reftorch does not copy; the other samples must raise."""
    def wrapped(dt, rng):
        for sample in samples(dt, rng):
            if dt in LINALG or "empty" not in sample.label:
                yield sample
    return wrapped


def _no_out(samples):
    """The Tensor-method forms take no out=."""
    return lambda dt, rng: (s for s in samples(dt, rng) if "out=" not in s.label)


def _sym(module, a):
    """(A + A^H) / 2 for gradient checks of ops that read one triangle."""
    at = a.transpose(-1, -2)
    return (a + (at.conj() if a.is_complex() else at)) / 2


def _triangle(module, a, upper):
    return module.triu(a) if upper else module.tril(a)


# --- samples ---------------------------------------------------------------------------------

def _cholesky_samples(dt, rng):
    yield Sample((_spd((3, 3), dt, rng),), {}, "lower")
    yield Sample((_spd((3, 3), dt, rng, "transposed"),), {"upper": True}, "upper transposed")
    yield Sample((_spd((2, 3, 3), dt, rng),), {}, "batched")
    yield Sample((_spd((2, 2, 4, 4), dt, rng, "transposed"), True), {}, "batched upper")
    yield Sample((_spd((1, 1), dt, rng),), {}, "1x1")
    yield Sample((_spd((0, 0), dt, rng),), {}, "empty")
    yield Sample((_spd((2, 0, 0), dt, rng),), {}, "empty batch")
    yield Sample((_rect((2, 3), dt, rng),), {}, "error not square")
    yield Sample((_rect((3,), dt, rng),), {}, "error 1-d")
    yield Sample((_spd((3, 3), dt, rng),), {"out": _rect((1,), dt, rng)}, "out=")


def _cholesky_inverse_samples(dt, rng):
    yield Sample((_factor((3, 3), dt, rng),), {}, "lower")
    yield Sample((_factor((3, 3), dt, rng, upper=True),), {"upper": True}, "upper")
    yield Sample((_factor((2, 3, 3), dt, rng, layout="transposed"),), {}, "batched transposed")
    yield Sample((_factor((2, 4, 4), dt, rng, upper=True), True), {}, "batched upper")
    yield Sample((_factor((0, 0), dt, rng),), {}, "empty")
    yield Sample((_rect((2, 3), dt, rng),), {}, "error not square")
    yield Sample((_factor((3, 3), dt, rng),), {"out": _rect((2,), dt, rng)}, "out=")


def _cholesky_solve_samples(dt, rng):
    yield Sample((_rect((3, 2), dt, rng), _factor((3, 3), dt, rng)), {}, "lower")
    yield Sample((_rect((3, 2), dt, rng, "transposed"), _factor((3, 3), dt, rng, True)),
                 {"upper": True}, "upper")
    yield Sample((_rect((2, 3, 1), dt, rng), _factor((2, 3, 3), dt, rng)), {}, "batched")
    yield Sample((_rect((2, 1, 3, 2), dt, rng), _factor((3, 3, 3), dt, rng, True), True), {},
                 "broadcast")
    yield Sample((_rect((0, 2), dt, rng), _factor((0, 0), dt, rng)), {}, "empty")
    yield Sample((_rect((4, 2), dt, rng), _factor((3, 3), dt, rng)), {}, "error sizes")
    yield Sample((_rect((3,), dt, rng), _factor((3, 3), dt, rng)), {}, "error 1-d b")
    yield Sample((_rect((3, 2), dt, rng), _factor((3, 3), dt, rng)),
                 {"out": _rect((1,), dt, rng)}, "out=")


def _inverse_samples(dt, rng):
    yield Sample((_general((3, 3), dt, rng),), {}, "3x3")
    yield Sample((_general((4, 4), dt, rng, "transposed"),), {}, "transposed")
    yield Sample((_general((2, 3, 3), dt, rng, "strided"),), {}, "batched strided")
    yield Sample((_general((2, 1, 2, 2), dt, rng),), {}, "4-d")
    yield Sample((_general((1, 1), dt, rng),), {}, "1x1")
    yield Sample((_general((0, 0), dt, rng),), {}, "empty")
    yield Sample((_general((2, 0, 0), dt, rng),), {}, "empty batch")
    yield Sample((_rect((2, 3), dt, rng),), {}, "error not square")
    yield Sample((_rect((3,), dt, rng),), {}, "error 1-d")
    yield Sample((_general((3, 3), dt, rng),), {"out": _rect((1,), dt, rng)}, "out=")


def _det_samples(dt, rng):
    swap = _general((3, 3), dt, rng).array[[1, 0, 2]]   # a row exchange: negative det likely
    yield Sample((_general((3, 3), dt, rng),), {}, "3x3")
    yield Sample((TensorArg(swap, dt),), {}, "row swap")
    yield Sample((_general((4, 4), dt, rng, "transposed"),), {}, "transposed")
    yield Sample((_general((2, 3, 3), dt, rng, "strided"),), {}, "batched")
    yield Sample((_general((1, 1), dt, rng),), {}, "1x1")
    yield Sample((_general((0, 0), dt, rng),), {}, "empty")
    yield Sample((_general((2, 0, 0), dt, rng),), {}, "empty batch")
    yield Sample((_rect((2, 3), dt, rng),), {}, "error not square")


def _qr_samples(dt, rng):
    yield Sample((_rect((4, 3), dt, rng),), {}, "tall")
    yield Sample((_rect((3, 3), dt, rng, "transposed"),), {}, "square transposed")
    yield Sample((_rect((2, 5), dt, rng),), {}, "wide")
    yield Sample((_rect((2, 4, 3), dt, rng, "strided"),), {}, "batched")
    yield Sample((_rect((4, 2), dt, rng),), {"some": False}, "complete tall")
    yield Sample((_rect((2, 3), dt, rng),), {"some": False}, "complete wide")
    yield Sample((_rect((0, 3), dt, rng),), {}, "empty")
    yield Sample((_rect((3,), dt, rng),), {}, "error 1-d")


def _svd_samples(dt, rng):
    yield Sample((_rect((4, 3), dt, rng),), {}, "tall")
    yield Sample((_rect((3, 3), dt, rng, "transposed"),), {}, "square transposed")
    yield Sample((_rect((2, 4), dt, rng),), {}, "wide")
    yield Sample((_rect((2, 3, 2), dt, rng, "strided"),), {}, "batched")
    yield Sample((_rect((4, 2), dt, rng),), {"some": False}, "full tall")
    yield Sample((_rect((2, 3), dt, rng), False), {}, "full wide")
    yield Sample((_rect((3, 2), dt, rng),), {"compute_uv": False}, "no uv")
    yield Sample((_rect((0, 3), dt, rng),), {}, "empty")
    yield Sample((_rect((3,), dt, rng),), {}, "error 1-d")


def _pinverse_samples(dt, rng):
    yield Sample((_rect((4, 3), dt, rng),), {}, "tall")
    yield Sample((_rect((2, 4), dt, rng, "transposed"),), {}, "wide transposed")
    yield Sample((_general((3, 3), dt, rng),), {"rcond": 1e-5}, "square rcond")
    yield Sample((_rect((2, 3, 2), dt, rng, "strided"),), {}, "batched")
    rank_one = np.outer(np.arange(1.0, 4.0), np.arange(1.0, 3.0))
    yield Sample((TensorArg(rank_one, dt),), {"rcond": 1e-4}, "rank one")
    yield Sample((_rect((0, 3), dt, rng),), {}, "empty")
    yield Sample((_rect((3,), dt, rng),), {}, "error 1-d")


def _triangular_solve_samples(dt, rng):
    yield Sample((_rect((3, 2), dt, rng), _triangular((3, 3), dt, rng)), {}, "upper")
    yield Sample((_rect((3, 2), dt, rng), _triangular((3, 3), dt, rng, False)),
                 {"upper": False}, "lower")
    yield Sample((_rect((3, 2), dt, rng, "transposed"), _triangular((3, 3), dt, rng)),
                 {"transpose": True}, "transpose")
    yield Sample((_rect((3, 1), dt, rng), _triangular((3, 3), dt, rng, False), False, True),
                 {}, "lower transpose")
    yield Sample((_rect((3, 2), dt, rng), _general((3, 3), dt, rng)),
                 {"unitriangular": True}, "unit, full matrix")
    yield Sample((_rect((2, 1, 3, 2), dt, rng), _triangular((4, 3, 3), dt, rng)), {},
                 "broadcast")
    yield Sample((_rect((0, 2), dt, rng), _triangular((0, 0), dt, rng)), {}, "empty")
    yield Sample((_rect((4, 2), dt, rng), _triangular((3, 3), dt, rng)), {}, "error sizes")


def _geqrf_samples(dt, rng):
    yield Sample((_rect((4, 3), dt, rng),), {}, "tall")
    yield Sample((_rect((3, 3), dt, rng, "transposed"),), {}, "square")
    yield Sample((_rect((2, 4), dt, rng),), {}, "wide")
    yield Sample((_rect((2, 3, 2), dt, rng),), {}, "batched")
    yield Sample((_rect((3,), dt, rng),), {}, "error 1-d")


def _householder(shape, dt, rng):
    """(a, tau) as geqrf returns them: valid reflectors (tau in [1, 2] for real)."""
    a = _random(shape, dt, rng)
    k = min(shape[-2:])
    tau = 1 + rng.uniform(0, 1, shape[:-2] + (k,))
    if dt.startswith("complex"):
        tau = tau + 0.3j * rng.standard_normal(tau.shape)
    return TensorArg(a, dt), TensorArg(tau, dt)


def _orgqr_samples(dt, rng):
    yield Sample(_householder((4, 3), dt, rng), {}, "tall")
    yield Sample(_householder((3, 3), dt, rng), {}, "square")
    yield Sample(_householder((2, 4, 2), dt, rng), {}, "batched")
    a, tau = _householder((4, 3), dt, rng)
    yield Sample((a, TensorArg(tau.array[:2], dt)), {}, "fewer reflectors")
    yield Sample(_householder((2, 4), dt, rng), {}, "error wide")


def _ormqr_samples(dt, rng):
    a, tau = _householder((4, 3), dt, rng)
    yield Sample((a, tau, _rect((4, 2), dt, rng)), {}, "left")
    yield Sample((a, tau, _rect((4, 2), dt, rng)), {"transpose": True}, "left transpose")
    yield Sample((a, tau, _rect((2, 4), dt, rng)), {"left": False}, "right")
    yield Sample((a, tau, _rect((2, 4), dt, rng), False, True), {}, "right transpose")
    b, btau = _householder((2, 3, 3), dt, rng)
    yield Sample((b, btau, _rect((2, 3, 2), dt, rng, "transposed")), {}, "batched")
    yield Sample((a, tau, _rect((3, 2), dt, rng)), {}, "error sizes")


def _lu_samples(dt, rng):
    yield Sample((_rect((3, 3), dt, rng),), {}, "square")
    yield Sample((_rect((4, 4), dt, rng, "transposed"),), {"get_infos": True}, "infos")
    yield Sample((_rect((2, 3, 3), dt, rng, "strided"),), {}, "batched")
    yield Sample((_rect((4, 3), dt, rng),), {}, "tall")
    yield Sample((_rect((2, 4), dt, rng),), {"get_infos": True}, "wide")
    yield Sample((_rect((2, 3, 5), dt, rng, "transposed"),), {}, "batched wide")
    singular = np.ones((3, 3))
    yield Sample((TensorArg(singular, dt),), {"get_infos": True}, "singular")
    yield Sample((_rect((0, 0), dt, rng),), {}, "empty")
    yield Sample((_rect((3,), dt, rng),), {}, "error 1-d")


def _lu_unpack_samples(dt, rng):
    yield Sample((_rect((3, 3), dt, rng), _pivots((), 3, 3, rng)), {}, "square")
    yield Sample((_rect((2, 4, 4), dt, rng, "transposed"), _pivots((2,), 4, 4, rng)), {},
                 "batched")
    yield Sample((_rect((4, 2), dt, rng), _pivots((), 4, 2, rng)), {}, "tall")
    yield Sample((_rect((2, 4), dt, rng), _pivots((), 2, 2, rng)), {}, "wide")
    yield Sample((_rect((3, 3), dt, rng), _pivots((), 3, 3, rng)), {"unpack_data": False},
                 "pivots only")
    yield Sample((_rect((3, 3), dt, rng), _pivots((), 3, 3, rng), True, False), {},
                 "data only")
    wrong = TensorArg(_pivots((), 3, 3, rng).array, "int64", requires_grad=False)
    yield Sample((_rect((3, 3), dt, rng), wrong), {}, "error int64 pivots")


def _lu_solve_samples(dt, rng):
    yield Sample((_rect((3, 2), dt, rng), _general((3, 3), dt, rng), _pivots((), 3, 3, rng)),
                 {}, "square")
    yield Sample((_rect((2, 3, 1), dt, rng, "transposed"), _general((2, 3, 3), dt, rng),
                  _pivots((2,), 3, 3, rng)), {}, "batched")
    yield Sample((_rect((2, 1, 3, 2), dt, rng), _general((1, 3, 3), dt, rng),
                  _pivots((1,), 3, 3, rng)), {}, "broadcast b")
    yield Sample((_rect((3, 2), dt, rng), _general((4, 4), dt, rng), _pivots((), 4, 4, rng)),
                 {}, "error sizes")
    wrong = TensorArg(_pivots((), 3, 3, rng).array, "int64", requires_grad=False)
    yield Sample((_rect((3, 2), dt, rng), _general((3, 3), dt, rng), wrong), {},
                 "error int64 pivots")


# --- gauge-invariant views of results that are unique only up to signs or phases -------------

def _svd_invariants(module, a, *args, **kwargs):
    return _invariants_of(module, module.svd(a, *args, **kwargs))


def _invariants_of(module, usv):
    """S, |U|, |V| and U V^H over the first min(m, n) columns (each pair of singular vectors
    is fixed only up to a common sign or phase)."""
    u, s, v = usv
    k = s.shape[-1]
    u, v = u[..., :k], v[..., :k]
    vh = v.transpose(-1, -2)
    vh = vh.conj() if vh.is_complex() else vh
    return s, u.abs(), v.abs(), module.matmul(u, vh)


# --- entries -----------------------------------------------------------------------------------

def _spd_call(name):
    """call building a Hermitian matrix from a free input (for gradcheck)."""
    return lambda m, a, *args, **kw: getattr(m, name)(_sym(m, a), *args, **kw)


def _triangle_call(name, position):
    """call keeping only the triangle the op reads of argument `position` (for gradcheck)."""
    def call(m, *args, **kwargs):
        upper = kwargs.get("upper", args[position + 1] if len(args) > position + 1 else False)
        args = list(args)
        args[position] = _triangle(m, args[position], upper)
        return getattr(m, name)(*args, **kwargs)
    return call


OPS = [
    OpInfo("cholesky", function("cholesky"), _lapack_only(_cholesky_samples),
           dtypes=WITH_ERRORS, gradcheck=False),
    OpInfo("cholesky (Hermitian input)", _spd_call("cholesky"), _cholesky_samples,
           dtypes=("float64",)),
    OpInfo("Tensor.cholesky", method("cholesky"), _no_out(_cholesky_samples), dtypes=REAL,
           differentiable=False),
    OpInfo("cholesky_inverse", function("cholesky_inverse"),
           _lapack_only(_cholesky_inverse_samples),
           dtypes=WITH_ERRORS, gradcheck=False),
    OpInfo("cholesky_inverse (triangle)", _triangle_call("cholesky_inverse", 0),
           _cholesky_inverse_samples, dtypes=("float64",)),
    OpInfo("cholesky_solve", function("cholesky_solve"), _cholesky_solve_samples,
           dtypes=LINALG, gradcheck=False),
    OpInfo("cholesky_solve (triangle)", _triangle_call("cholesky_solve", 1),
           _cholesky_solve_samples, dtypes=("float64",)),
    OpInfo("Tensor.cholesky_solve", method("cholesky_solve"), _no_out(_cholesky_solve_samples),
           dtypes=REAL, differentiable=False),
    OpInfo("inverse", function("inverse"), _lapack_only(_inverse_samples), dtypes=WITH_ERRORS),
    OpInfo("Tensor.inverse", method("inverse"), _no_out(_inverse_samples), dtypes=REAL,
           differentiable=False),
    OpInfo("det", function("det"), _lapack_only(_det_samples), dtypes=WITH_ERRORS),
    OpInfo("Tensor.det", method("det"), _det_samples, dtypes=REAL, differentiable=False),
    OpInfo("logdet", function("logdet"), _det_samples, dtypes=LINALG),
    OpInfo("Tensor.logdet", method("logdet"), _det_samples, dtypes=REAL,
           differentiable=False),
    OpInfo("slogdet", function("slogdet"), _lapack_only(_det_samples), dtypes=WITH_ERRORS,
           grad_dtypes=("float64", "complex128")),
    OpInfo("Tensor.slogdet", method("slogdet"), _det_samples, dtypes=REAL,
           differentiable=False),
    OpInfo("triangular_solve", function("triangular_solve"), _triangular_solve_samples,
           dtypes=LINALG, gradcheck=False, grad_dtypes=("float64", "complex128")),
    OpInfo("triangular_solve (triangle)", lambda m, b, a, *args, **kw: m.triangular_solve(
        b, _triangle(m, a, kw.get("upper", args[0] if args else True)), *args, **kw),
        lambda dt, rng: (s for s in _triangular_solve_samples(dt, rng)
                         if "unit" not in s.label), dtypes=("float64",)),
    OpInfo("Tensor.triangular_solve", method("triangular_solve"), _triangular_solve_samples,
           dtypes=REAL, differentiable=False),
    # Complete QR of a tall matrix has no derivative (torch raises in backward, which the
    # gradient runner cannot compare): gradients use the other samples.
    OpInfo("qr", function("qr"), _qr_samples, dtypes=LINALG, differentiable=False),
    OpInfo("qr (differentiable samples)", function("qr"), lambda dt, rng: (
        s for s in _qr_samples(dt, rng) if s.label != "complete tall"),
        dtypes=("float64", "complex128"), grad_dtypes=("float64", "complex128")),
    OpInfo("Tensor.qr", method("qr"), _qr_samples, dtypes=REAL, differentiable=False),
    OpInfo("svd", _svd_invariants, _svd_samples, dtypes=LINALG,
           grad_dtypes=("float64", "complex128")),
    OpInfo("Tensor.svd", lambda m, a, *args, **kw: _invariants_of(m, a.svd(*args, **kw)),
           _svd_samples, dtypes=REAL, differentiable=False),
    OpInfo("pinverse", function("pinverse"), _pinverse_samples, dtypes=LINALG),
    OpInfo("Tensor.pinverse", method("pinverse"), _pinverse_samples, dtypes=REAL,
           differentiable=False),
    OpInfo("geqrf", function("geqrf"), _geqrf_samples, dtypes=LINALG, differentiable=False),
    OpInfo("Tensor.geqrf", method("geqrf"), _geqrf_samples, dtypes=REAL,
           differentiable=False),
    OpInfo("orgqr", function("orgqr"), _orgqr_samples, dtypes=LINALG),
    OpInfo("Tensor.orgqr", method("orgqr"), _orgqr_samples, dtypes=REAL,
           differentiable=False),
    OpInfo("ormqr", function("ormqr"), _ormqr_samples, dtypes=LINALG),
    OpInfo("Tensor.ormqr", method("ormqr"), _ormqr_samples, dtypes=REAL,
           differentiable=False),
    # Gradients: square matrices only (reftorch's LU backward), in the next entry.
    OpInfo("lu", function("lu"), _lu_samples, dtypes=LINALG, differentiable=False),
    # Gradients of full-rank LU, square and rectangular (tall and wide).
    OpInfo("lu (full rank)", function("lu"), lambda dt, rng: (
        s for s in _lu_samples(dt, rng) if s.label in ("square", "batched", "infos", "tall",
                                                        "wide", "batched wide")),
        dtypes=("float64", "complex128")),
    OpInfo("Tensor.lu", method("lu"), _lu_samples, dtypes=REAL, differentiable=False),
    # torch's backward fails on the empty L and U of unpack_data=False: no gradient sample.
    OpInfo("lu_unpack", function("lu_unpack"), _lu_unpack_samples, dtypes=LINALG,
           differentiable=False),
    OpInfo("lu_unpack (data)", function("lu_unpack"), lambda dt, rng: (
        s for s in _lu_unpack_samples(dt, rng) if s.label != "pivots only"),
        dtypes=("float64",)),
    OpInfo("lu_solve", function("lu_solve"), _lu_solve_samples, dtypes=LINALG),
    OpInfo("Tensor.lu_solve", method("lu_solve"), _lu_solve_samples, dtypes=REAL,
           differentiable=False),
]
