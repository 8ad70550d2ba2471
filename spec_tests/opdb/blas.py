"""Op-database entries: matrix products (BLAS) (see core.py for the entry format).

Samples cover the shapes each product accepts (matmul: every ndim combination and batch
broadcasting), empty contractions (which give zeros), non-contiguous operands, beta/alpha
(including beta=0 over NaN input, which must not propagate), the deprecated positional
beta/alpha overloads, out=, and the errors (shape, ndim and dtype mismatches).
"""
from __future__ import annotations

import numpy as np

from .core import OpInfo, Sample, TensorArg, function, inplace, method, tensor

FLOAT_COMPLEX = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
INVERTIBLE = ("float32", "float64", "complex64", "complex128")
# Gradients are compared with torch in float64 and complex128 (conjugates in every formula).
GRAD = ("float64", "complex128")
# The method entries check the Tensor.X spellings on a few representative dtypes.
METHOD_DTYPES = ("int64", "float32", "float64", "complex128")


def _t(shape, dt, rng, layout="contiguous", **kw):
    return tensor(shape, dt, rng, layout, **kw)


def _other_dtype(dt):
    """A dtype different from `dt`, for the 'operands must share a dtype' errors (complex
    for complex `dt`: torch's addr backward fails for real operands promoted to complex)."""
    if dt.startswith("complex"):
        return "complex64" if dt == "complex128" else "complex128"
    return "float32" if dt == "float64" else "float64"


def _out(dt, shape=(0,)):
    """An out= tensor (resized by the op); it never requires grad."""
    return TensorArg(np.zeros(shape), dt, requires_grad=False)


def _nan(shape, dt):
    """A NaN-filled input for the beta=0 samples (floating dtypes only)."""
    return TensorArg(np.full(shape, np.nan), dt, requires_grad=False)


def _is_float(dt):
    return dt in FLOAT_COMPLEX


def _scalars(dt):
    """(beta, alpha) suited to the dtype (PyTorch truncates floats for integer tensors)."""
    if dt == "bool":
        return True, False
    if dt.startswith("complex"):
        return 0.5 - 1j, 2 + 0.5j
    return 0.5, 2.5


# --- mm, bmm, mv, dot, vdot ------------------------------------------------------------------

def _mm_samples(dt, rng):
    yield Sample((_t((2, 3), dt, rng), _t((3, 4), dt, rng)), {}, "2x3 @ 3x4")
    yield Sample((_t((3, 4), dt, rng, "transposed"), _t((4, 2), dt, rng, "strided")), {},
                 "transposed @ strided")
    yield Sample((_t((1, 1), dt, rng), _t((1, 1), dt, rng)), {}, "1x1")
    yield Sample((_t((2, 0), dt, rng), _t((0, 3), dt, rng)), {}, "empty contraction")
    yield Sample((_t((0, 3), dt, rng), _t((3, 2), dt, rng)), {}, "no rows")
    yield Sample((_t((2, 3), dt, rng), _t((3, 4), dt, rng)), {"out": _out(dt)}, "out")
    yield Sample((_t((2, 3), dt, rng), _t((3, 4), dt, rng)),
                 {"out": _out(_other_dtype(dt))}, "error out dtype")
    yield Sample((_t((2, 3), dt, rng), _t((4, 5), dt, rng)), {}, "error shapes")
    yield Sample((_t((3,), dt, rng), _t((3, 2), dt, rng)), {}, "error 1-d")
    yield Sample((_t((2, 3), dt, rng), _t((3, 4), _other_dtype(dt), rng)), {}, "error dtypes")


def _bmm_samples(dt, rng):
    yield Sample((_t((2, 2, 3), dt, rng), _t((2, 3, 4), dt, rng)), {}, "batch 2")
    yield Sample((_t((3, 4, 2), dt, rng, "transposed"), _t((3, 4, 2), dt, rng, "strided")),
                 {}, "transposed @ strided")
    yield Sample((_t((0, 2, 3), dt, rng), _t((0, 3, 4), dt, rng)), {}, "empty batch")
    yield Sample((_t((2, 2, 0), dt, rng), _t((2, 0, 3), dt, rng)), {}, "empty contraction")
    yield Sample((_t((1, 2, 3), dt, rng), _t((1, 3, 2), dt, rng)), {"out": _out(dt)}, "out")
    yield Sample((_t((2, 2, 3), dt, rng), _t((2, 4, 3), dt, rng)), {}, "error shapes")
    yield Sample((_t((2, 2, 3), dt, rng), _t((3, 3, 2), dt, rng)), {}, "error batch")
    yield Sample((_t((2, 3), dt, rng), _t((3, 2), dt, rng)), {}, "error 2-d")
    yield Sample((_t((1, 2, 3), dt, rng), _t((1, 3, 2), _other_dtype(dt), rng)), {},
                 "error dtypes")


def _mv_samples(dt, rng):
    yield Sample((_t((2, 3), dt, rng), _t((3,), dt, rng)), {}, "2x3 @ 3")
    yield Sample((_t((4, 3), dt, rng, "transposed"), _t((3,), dt, rng, "strided")), {},
                 "transposed @ strided")
    yield Sample((_t((2, 0), dt, rng), _t((0,), dt, rng)), {}, "empty contraction")
    yield Sample((_t((0, 3), dt, rng), _t((3,), dt, rng)), {}, "no rows")
    yield Sample((_t((2, 3), dt, rng), _t((3,), dt, rng)), {"out": _out(dt)}, "out")
    yield Sample((_t((2, 3), dt, rng), _t((4,), dt, rng)), {}, "error size")
    yield Sample((_t((3,), dt, rng), _t((3,), dt, rng)), {}, "error 1-d matrix")
    yield Sample((_t((2, 3), dt, rng), _t((3,), _other_dtype(dt), rng)), {}, "error dtypes")


def _dot_samples(dt, rng):
    yield Sample((_t((3,), dt, rng), _t((3,), dt, rng)), {}, "length 3")
    yield Sample((_t((5,), dt, rng, "strided"), _t((5,), dt, rng)), {}, "strided")
    yield Sample((_t((1,), dt, rng), _t((1,), dt, rng)), {}, "length 1")
    yield Sample((_t((0,), dt, rng), _t((0,), dt, rng)), {}, "empty")
    yield Sample((_t((3,), dt, rng), _t((3,), dt, rng)), {"out": _out(dt)}, "out")
    yield Sample((_t((3,), dt, rng), _t((3,), dt, rng)), {"out": _out(_other_dtype(dt))},
                 "error out dtype")
    yield Sample((_t((2,), dt, rng), _t((3,), dt, rng)), {}, "error lengths")
    yield Sample((_t((2, 2), dt, rng), _t((2, 2), dt, rng)), {}, "error 2-d")
    yield Sample((_t((), dt, rng), _t((), dt, rng)), {}, "error 0-dim")
    yield Sample((_t((3,), dt, rng), _t((3,), _other_dtype(dt), rng)), {}, "error dtypes")


# --- matmul, inner, outer --------------------------------------------------------------------

def _matmul_samples(dt, rng):
    cases = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
             ((2, 2, 3), (3,)), ((3,), (2, 3, 4)), ((2, 2, 3), (3, 4)), ((2, 3), (2, 3, 4)),
             ((2, 2, 3), (2, 3, 2)), ((2, 1, 2, 3), (3, 3, 2)), ((2, 1, 2, 3), (3,)),
             ((0, 2, 3), (3, 2)), ((2, 0), (0, 3))]
    for a, b in cases:
        yield Sample((_t(a, dt, rng), _t(b, dt, rng)), {}, f"{a} @ {b}")
    yield Sample((_t((2, 4, 3), dt, rng, "transposed"), _t((2, 4, 2), dt, rng, "strided")),
                 {}, "transposed @ strided")
    yield Sample((_t((2, 2, 3), dt, rng), _t((3, 2), dt, rng)), {"out": _out(dt)}, "out")
    yield Sample((_t((3,), dt, rng), _t((3,), dt, rng)), {"out": _out(dt)}, "out 1-d")
    yield Sample((_t((), dt, rng), _t((3,), dt, rng)), {}, "error 0-dim")
    yield Sample((_t((2,), dt, rng), _t((3,), dt, rng)), {}, "error 1-d lengths")
    yield Sample((_t((2, 2), dt, rng), _t((3, 4), dt, rng)), {}, "error shapes")
    yield Sample((_t((5, 2, 3), dt, rng), _t((4, 3, 4), dt, rng)), {}, "error batch")
    yield Sample((_t((2, 3), dt, rng), _t((3, 4), _other_dtype(dt), rng)), {}, "error dtypes")


def _inner_samples(dt, rng):
    yield Sample((_t((3,), dt, rng), _t((3,), dt, rng)), {}, "vectors")
    yield Sample((_t((2, 3), dt, rng, "transposed"), _t((4, 3), dt, rng)), {}, "matrices")
    yield Sample((_t((2, 1, 3), dt, rng), _t((2, 3), dt, rng, "strided")), {}, "3-d and 2-d")
    yield Sample((_t((), dt, rng), _t((2, 3), dt, rng)), {}, "0-dim")
    yield Sample((_t((2, 0), dt, rng), _t((3, 0), dt, rng)), {}, "empty contraction")
    yield Sample((_t((2, 3), dt, rng), _t((4, 3), dt, rng)), {"out": _out(dt)}, "out")
    yield Sample((_t((2, 3), dt, rng), _t((2, 4), dt, rng)), {}, "error last dims")
    yield Sample((_t((2, 3), dt, rng), _t((2, 3), _other_dtype(dt), rng)), {}, "error dtypes")


def _outer_samples(dt, rng):
    yield Sample((_t((2,), dt, rng), _t((3,), dt, rng)), {}, "2 x 3")
    yield Sample((_t((4,), dt, rng, "strided"), _t((1,), dt, rng)), {}, "strided")
    yield Sample((_t((0,), dt, rng), _t((3,), dt, rng)), {}, "empty")
    yield Sample((_t((2,), dt, rng), _t((3,), "float64", rng)), {}, "promotes")
    yield Sample((_t((2,), dt, rng), _t((3,), dt, rng)), {"out": _out("complex128")},
                 "out wider")
    yield Sample((_t((2, 2), dt, rng), _t((3,), dt, rng)), {}, "error 2-d")
    yield Sample((_t((2,), dt, rng), _t((), dt, rng)), {}, "error 0-dim")


# --- beta * input + alpha * product ----------------------------------------------------------

def _scaled_samples(shapes, dt, rng, input_shapes, legacy=True):
    """Samples shared by addmm / addbmm / baddbmm / addmv / addr: `shapes` are the two
    operands' shapes, `input_shapes` the input's full shape and broadcastable ones."""
    x, y = shapes
    full, *broadcast = input_shapes
    beta, alpha = _scalars(dt)
    yield Sample((_t(full, dt, rng), _t(x, dt, rng), _t(y, dt, rng)), {}, "defaults")
    yield Sample((_t(full, dt, rng, "transposed" if len(full) > 1 else "strided"),
                  _t(x, dt, rng, "transposed" if len(x) > 1 else "strided"),
                  _t(y, dt, rng, "strided")), {"beta": beta, "alpha": alpha},
                 "beta alpha, non-contiguous")
    for shape in broadcast:
        yield Sample((_t(shape, dt, rng), _t(x, dt, rng), _t(y, dt, rng)), {"alpha": alpha},
                     f"input {shape} broadcasts")
    if dt not in ("bool",):
        yield Sample((_t(full, dt, rng), _t(x, dt, rng), _t(y, dt, rng)),
                     {"beta": 2, "alpha": -1}, "integer scalars")
    if _is_float(dt):
        yield Sample((_nan(full, dt), _t(x, dt, rng), _t(y, dt, rng)), {"beta": 0},
                     "beta=0 ignores NaN input")
    yield Sample((_t(full, dt, rng), _t(x, dt, rng), _t(y, dt, rng)), {"out": _out(dt)},
                 "out")
    if legacy:
        yield Sample((beta, _t(full, dt, rng), alpha, _t(x, dt, rng), _t(y, dt, rng)), {},
                     "deprecated (beta, input, alpha, x, y)")
        yield Sample((beta, _t(full, dt, rng), _t(x, dt, rng), _t(y, dt, rng)), {},
                     "deprecated (beta, input, x, y)")
    wrong = tuple(s + 1 for s in full)
    yield Sample((_t(wrong, dt, rng), _t(x, dt, rng), _t(y, dt, rng)), {}, "error input shape")
    yield Sample((_t(full, _other_dtype(dt), rng), _t(x, dt, rng), _t(y, dt, rng)), {},
                 "input of another dtype")


def _addmm_samples(dt, rng):
    yield from _scaled_samples(((2, 3), (3, 4)), dt, rng, ((2, 4), (4,), ()))
    yield Sample((_t((2, 3), dt, rng), _t((2, 0), dt, rng), _t((0, 3), dt, rng)),
                 {"beta": 2}, "empty contraction")
    yield Sample((_t((2, 4), dt, rng), _t((2, 3), dt, rng), _t((2, 4), dt, rng)), {},
                 "error shapes")


def _addbmm_samples(dt, rng):
    yield from _scaled_samples(((2, 2, 3), (2, 3, 2)), dt, rng, ((2, 2), (1, 2)))
    yield Sample((_t((2, 4), dt, rng), _t((3, 2, 3), dt, rng), _t((2, 3, 4), dt, rng)), {},
                 "error batches")
    yield Sample((_t((2, 4), dt, rng), _t((0, 2, 3), dt, rng), _t((0, 3, 4), dt, rng)),
                 {"beta": 2}, "empty batch")


def _baddbmm_samples(dt, rng):
    yield from _scaled_samples(((2, 2, 3), (2, 3, 4)), dt, rng, ((2, 2, 4), (2, 4), ()))
    yield Sample((_t((0, 2, 4), dt, rng), _t((0, 2, 3), dt, rng), _t((0, 3, 4), dt, rng)), {},
                 "empty batch")
    yield Sample((_t((2, 2, 4), dt, rng), _t((2, 2, 3), dt, rng), _t((2, 4, 4), dt, rng)), {},
                 "error shapes")


def _addmv_samples(dt, rng):
    yield from _scaled_samples(((2, 3), (3,)), dt, rng, ((2,), (1,), ()))
    yield Sample((_t((2,), dt, rng), _t((2, 0), dt, rng), _t((0,), dt, rng)), {},
                 "empty contraction")
    yield Sample((_t((2,), dt, rng), _t((2, 3), dt, rng), _t((4,), dt, rng)), {}, "error size")


def _addr_samples(dt, rng):
    yield from _scaled_samples(((2,), (3,)), dt, rng, ((2, 3), (3,), ()))
    # (Complex samples promote within complex types: PyTorch's own addr backward fails
    # for a real vector that was promoted to complex.)
    wider = "complex128" if dt.startswith("complex") else "float64"
    yield Sample((_t((2, 3), dt, rng), _t((2,), dt, rng), _t((3,), wider, rng)), {},
                 "promotes")
    yield Sample((_t((2, 3), dt, rng), _t((2,), dt, rng), _t((3,), dt, rng)),
                 {"beta": 0.5}, "float beta")
    yield Sample((_t((2, 3), dt, rng), _t((2, 1), dt, rng), _t((3,), dt, rng)), {},
                 "error 2-d vector")


def _method_samples(samples):
    """The function samples without the deprecated function-only overloads."""
    def method_samples(dt, rng):
        for s in samples(dt, rng):
            if not s.label.startswith("deprecated") and "out" not in s.kwargs:
                yield s
    return method_samples


def _legacy_method_samples(dt, rng):
    beta, alpha = _scalars(dt)
    yield Sample((_t((2, 4), dt, rng), beta, alpha, _t((2, 3), dt, rng), _t((3, 4), dt, rng)),
                 {}, "deprecated Tensor.addmm(beta, alpha, x, y)")
    yield Sample((_t((2, 4), dt, rng), beta, _t((2, 3), dt, rng), _t((3, 4), dt, rng)), {},
                 "deprecated Tensor.addmm(beta, x, y)")


# --- chain_matmul, matrix_power --------------------------------------------------------------

def _chain_matmul_samples(dt, rng):
    yield Sample((_t((2, 3), dt, rng),), {}, "one matrix")
    yield Sample((_t((2, 3), dt, rng), _t((3, 4), dt, rng, "transposed")), {}, "two")
    yield Sample((_t((2, 5), dt, rng), _t((5, 1), dt, rng), _t((1, 4), dt, rng),
                  _t((4, 3), dt, rng, "strided")), {}, "four")
    yield Sample((_t((4, 1), dt, rng), _t((1, 5), dt, rng), _t((5, 2), dt, rng)), {},
                 "three")
    yield Sample((_t((2, 0), dt, rng), _t((0, 3), dt, rng), _t((3, 2), dt, rng)), {},
                 "empty contraction")
    yield Sample((), {}, "error no matrices")
    yield Sample((_t((3,), dt, rng), _t((3, 2), dt, rng)), {}, "error 1-d")
    yield Sample((_t((2, 3), dt, rng), _t((2, 3), dt, rng)), {}, "error shapes")
    yield Sample((_t((2, 3), dt, rng), _t((3, 2), _other_dtype(dt), rng)), {}, "error dtypes")


def _well_conditioned(shape, dt, rng):
    """Diagonally dominant matrices: invertible, with small condition numbers."""
    n = shape[-1]
    values = rng.uniform(-1, 1, size=shape) + 4 * np.eye(n)
    if dt.startswith("complex"):
        values = values + 0.5j * rng.uniform(-1, 1, size=shape)
    return TensorArg(values, dt)


def _matrix_power_samples(dt, rng):
    unit = dict(domain=(-1, 1))          # bounded values keep high powers in range
    # (n=-1 comes early: the gradcheck runner checks the first small samples only.)
    yield Sample((_t((3, 3), dt, rng, **unit), 2), {}, "n=2")
    yield Sample((_well_conditioned((3, 3), dt, rng), -1), {}, "n=-1")
    for n in (3, 5):
        yield Sample((_t((3, 3), dt, rng, **unit), n), {}, f"n={n}")
    yield Sample((_t((2, 3, 3), dt, rng, "transposed", **unit), 4), {}, "batched n=4")
    yield Sample((_t((3, 3), dt, rng, "strided", **unit), 1), {}, "n=1")
    yield Sample((_t((2, 3, 3), dt, rng, **unit), 0), {}, "n=0")
    yield Sample((_t((0, 0), dt, rng), 3), {}, "empty")
    yield Sample((_well_conditioned((2, 3, 3), dt, rng), -3), {}, "batched n=-3")
    yield Sample((_t((3, 3), dt, rng, **unit), 2), {"out": _out(dt)}, "out")
    yield Sample((_t((2, 3), dt, rng), 2), {}, "error not square")
    yield Sample((_t((3,), dt, rng), 2), {}, "error 1-d")


def _forms(name, samples, inplace_form=False):
    """torch.<name> (differentiable, with its in-place form) and Tensor.<name>."""
    return [OpInfo(name, function(name), samples, grad_dtypes=GRAD,
                   inplace_call=inplace(name) if inplace_form else None),
            OpInfo(f"Tensor.{name}", method(name), _method_samples(samples),
                   dtypes=METHOD_DTYPES, differentiable=False)]


OPS = [
    *_forms("mm", _mm_samples),
    *_forms("bmm", _bmm_samples),
    *_forms("mv", _mv_samples),
    *_forms("dot", _dot_samples),
    *_forms("vdot", _dot_samples),
    *_forms("matmul", _matmul_samples),
    OpInfo("Tensor.__matmul__", method("__matmul__"), _method_samples(_matmul_samples),
           dtypes=METHOD_DTYPES),
    OpInfo("Tensor.__rmatmul__", method("__rmatmul__"), _method_samples(_matmul_samples),
           dtypes=METHOD_DTYPES, differentiable=False),
    *_forms("inner", _inner_samples),
    *_forms("outer", _outer_samples),
    OpInfo("ger", function("ger"), _outer_samples, differentiable=False),
    OpInfo("Tensor.ger", method("ger"), _method_samples(_outer_samples), dtypes=METHOD_DTYPES,
           differentiable=False),
    *_forms("addmm", _addmm_samples, inplace_form=True),
    OpInfo("Tensor.addmm deprecated", method("addmm"), _legacy_method_samples,
           dtypes=METHOD_DTYPES, differentiable=False, inplace_call=inplace("addmm")),
    *_forms("addbmm", _addbmm_samples, inplace_form=True),
    *_forms("baddbmm", _baddbmm_samples, inplace_form=True),
    *_forms("addmv", _addmv_samples, inplace_form=True),
    *_forms("addr", _addr_samples, inplace_form=True),
    OpInfo("chain_matmul", function("chain_matmul"), _chain_matmul_samples, grad_dtypes=GRAD),
    *_forms("matrix_power", _matrix_power_samples),
]
