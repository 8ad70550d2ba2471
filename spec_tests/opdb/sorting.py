"""Op-database entries: sorting, selection and comparison (see core.py for the entry format).

Values for sort/argsort/msort repeat on purpose (small integers, NaN, infinities), so that
stability and NaN placement are checked. topk and kthvalue get distinct values along the
searched dim: PyTorch does not specify which of several equal elements they report, so
only tie-free samples can compare indices (tests/test_sorting.py checks ties by value).
"""
from __future__ import annotations

import numpy as np

from . import COMPLEX, FLOATING, INTEGRAL
from .core import OpInfo, Sample, TensorArg, function, method
from .samples import layouts

ORDERED = ("bool",) + INTEGRAL + FLOATING      # every dtype sorting supports
SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4)]


def repeated(shape, dtype, rng, layout="contiguous", nan=True, requires_grad=True):
    """Small integers with repeats; floats also get NaN and infinities when `nan`."""
    if dtype == "bool":
        v = rng.integers(0, 2, size=shape).astype(float)
    else:
        v = rng.integers(0 if dtype == "uint8" else -3, 4, size=shape).astype(float)
    if dtype in FLOATING + COMPLEX and nan and v.size >= 4:
        flat = v.reshape(-1)
        spots = rng.choice(flat.size, size=3, replace=False)
        flat[spots] = [np.nan, np.inf, np.nan if flat.size > 6 else -np.inf]
    return TensorArg(v, dtype, layout, requires_grad)


def distinct(shape, dtype, rng, layout="contiguous", nan=True):
    """Distinct values (one NaN among floats): tie-free input for topk and kthvalue."""
    n = int(np.prod(shape, dtype=np.int64))
    v = rng.permutation(n).astype(float)
    if dtype not in ("uint8", "bool"):
        v -= n // 2
    if dtype in FLOATING:
        v = v * 0.5
        if nan and n >= 2:
            v[rng.integers(n)] = np.nan
    if dtype == "bool":
        v = v % 2
    return TensorArg(v.reshape(shape), dtype, layout)


def empty_out(dtype):
    return TensorArg(np.zeros(0), dtype, requires_grad=False)


def _layout_samples(make, dtype, rng, shapes, **kwargs):
    """One sample per (shape, layout), e.g. sort along the last dim of each."""
    for shape in shapes:
        for layout in layouts(shape):
            yield Sample((make(shape, dtype, rng, layout),), dict(kwargs), f"{shape} {layout}")


# --- sort, argsort, msort --------------------------------------------------------------------

def sort_samples(dtype, rng):
    yield from _layout_samples(repeated, dtype, rng, SHAPES[:4])
    yield Sample((repeated((3, 4), dtype, rng),), {"dim": 0, "descending": True}, "dim0 desc")
    yield Sample((repeated((3, 4), dtype, rng, "transposed"),),
                 {"descending": True, "stable": True}, "desc stable transposed")
    yield Sample((repeated((2, 3, 4), dtype, rng, "strided"),), {"dim": 1}, "3d dim1 strided")
    yield Sample((repeated((2, 3, 4), dtype, rng),), {"dim": -3, "descending": True},
                 "3d dim-3 desc")
    yield Sample((repeated((2, 3), dtype, rng), 1, False), {"stable": True}, "positional")
    yield Sample((repeated((), dtype, rng),), {"dim": -1, "descending": True}, "0-dim desc")
    yield Sample((repeated((2, 0, 3), dtype, rng),), {"dim": 1}, "empty dim")
    yield Sample((repeated((5,), dtype, rng),), {"dim": 1}, "dim out of range")
    yield Sample((repeated((2, 3, 4), dtype, rng),), {"dim": -4}, "dim -4 out of range")


def sort_out_samples(dtype, rng):
    yield Sample((repeated((3, 4), dtype, rng),),
                 {"dim": 0, "out": (empty_out(dtype), empty_out("int64"))}, "out=")
    yield Sample((repeated((3, 4), dtype, rng),),
                 {"out": (empty_out(dtype), empty_out("int32"))}, "out= int32 indices")


def argsort_samples(dtype, rng):
    for s in sort_samples(dtype, rng):
        if s.label != "positional":
            yield s
    yield Sample((repeated((3, 4), dtype, rng),),
                 {"stable": True, "out": empty_out("int64")}, "out=")


def msort_samples(dtype, rng):
    yield from _layout_samples(repeated, dtype, rng, [(), (5,), (3, 4), (2, 3, 4)])
    yield Sample((repeated((0, 3), dtype, rng),), {}, "empty")


# --- topk, kthvalue --------------------------------------------------------------------------

def topk_samples(dtype, rng):
    yield Sample((distinct((5,), dtype, rng), 2), {}, "1d k=2")
    yield Sample((distinct((3, 4), dtype, rng), 3), {"dim": 0}, "dim0 k=3")
    yield Sample((distinct((3, 4), dtype, rng, "transposed"), 2), {"largest": False},
                 "smallest transposed")
    yield Sample((distinct((2, 3, 4), dtype, rng, "strided"), 2, 1), {}, "3d dim1 strided")
    yield Sample((distinct((2, 3, 4), dtype, rng), 4, -1, False, True), {}, "positional all")
    yield Sample((distinct((3, 4), dtype, rng), 0), {}, "k=0")
    yield Sample((distinct((), dtype, rng), 1), {}, "0-dim")
    yield Sample((distinct((0,), dtype, rng), 0), {}, "empty k=0")
    yield Sample((distinct((5,), dtype, rng), 6), {}, "k too large")
    yield Sample((distinct((5,), dtype, rng), -1), {}, "k negative")
    yield Sample((distinct((5,), dtype, rng), 2), {"dim": 1}, "dim out of range")
    yield Sample((distinct((3, 4), dtype, rng), 2),
                 {"out": (empty_out(dtype), empty_out("int64"))}, "out=")


def kthvalue_samples(dtype, rng):
    yield Sample((distinct((5,), dtype, rng), 3), {}, "1d k=3")
    yield Sample((distinct((3, 4), dtype, rng), 2), {"dim": 0, "keepdim": True},
                 "dim0 keepdim")
    yield Sample((distinct((3, 4), dtype, rng, "transposed"), 4), {}, "transposed k=4")
    yield Sample((distinct((2, 3, 4), dtype, rng, "strided"), 1, 1, False), {},
                 "3d positional strided")
    yield Sample((distinct((), dtype, rng), 1), {"keepdim": True}, "0-dim")
    yield Sample((distinct((2, 0), dtype, rng), 1), {"dim": 0}, "empty result")
    yield Sample((distinct((5,), dtype, rng), 0), {}, "k=0")
    yield Sample((distinct((5,), dtype, rng), 6), {}, "k too large")
    yield Sample((distinct((0, 3), dtype, rng), 1), {"dim": 0}, "empty dim")
    yield Sample((distinct((5,), dtype, rng), 1), {"dim": -2}, "dim out of range")
    yield Sample((distinct((3, 4), dtype, rng), 2),
                 {"dim": 0, "out": (empty_out(dtype), empty_out("int64"))}, "out=")


# --- comparisons -----------------------------------------------------------------------------

def near(arg, rng, spread=1e-6):
    """Values close to `arg`'s: some equal, some within tolerance, some far off."""
    v = np.array(arg.array, dtype=float)
    if arg.dtype in INTEGRAL + ("bool",):
        step = rng.integers(-1, 2, size=v.shape) * rng.integers(0, 2, size=v.shape)
        w = np.clip(v + step, 0 if arg.dtype in ("uint8", "bool") else -128,
                    1 if arg.dtype == "bool" else 127)
    else:
        w = v * (1 + spread * rng.choice([0, 0.5, 2, 1e4], size=v.shape))
    return TensorArg(w, arg.dtype, arg.layout, arg.requires_grad)


def isclose_samples(dtype, rng):
    a = repeated((3, 4), dtype, rng)
    yield Sample((a, near(a, rng)), {}, "default")
    yield Sample((a, near(a, rng, 1e-2)), {"rtol": 1e-2, "atol": 0.5}, "loose")
    yield Sample((a, a), {"equal_nan": True}, "equal_nan")
    yield Sample((a, a), {"rtol": 0, "atol": 0}, "zero tolerance")
    b = repeated((2, 3, 4), dtype, rng, "transposed")
    yield Sample((b, near(b, rng)), {"rtol": 0.1, "atol": 1}, "3d transposed")
    c = repeated((4,), dtype, rng)
    yield Sample((repeated((3, 4), dtype, rng, "strided"), c), {"atol": 1}, "broadcast")
    yield Sample((repeated((), dtype, rng), repeated((), dtype, rng)), {}, "0-dim")
    yield Sample((repeated((0,), dtype, rng), repeated((0,), dtype, rng)), {}, "empty")
    other = "float64" if dtype != "float64" else "float32"
    yield Sample((a, repeated((3, 4), other, rng)), {}, "dtype mismatch")
    yield Sample((a, a), {"rtol": -1.0}, "negative rtol")
    yield Sample((repeated((3,), dtype, rng), repeated((4,), dtype, rng)), {}, "bad shapes")


def equal_samples(dtype, rng):
    a = repeated((3, 4), dtype, rng)
    yield Sample((a, a), {}, "same")
    yield Sample((a, near(a, rng, 1e-1)), {}, "nearly")
    yield Sample((a, TensorArg(a.array, dtype, "transposed")), {}, "other layout")
    yield Sample((a, TensorArg(a.array[:1], dtype)), {}, "other shape")
    yield Sample((a, TensorArg(a.array, "float64" if dtype != "float64" else "int32")),
                 {}, "other dtype")
    yield Sample((repeated((), dtype, rng), repeated((1,), dtype, rng)), {}, "0-dim vs 1")
    yield Sample((repeated((0,), dtype, rng), repeated((0,), dtype, rng)), {}, "empty")
    yield Sample((a, 3), {}, "not a tensor")


def isin_samples(dtype, rng):
    yield Sample((repeated((3, 4), dtype, rng, nan=False), repeated((5,), dtype, rng)), {},
                 "2d in 1d")
    yield Sample((repeated((2, 3, 4), dtype, rng, "strided"),
                  repeated((2, 3), dtype, rng)), {"invert": True},
                 "invert, test elements 2d")
    yield Sample((repeated((5,), dtype, rng), repeated((3,), "int64", rng)),
                 {"assume_unique": True}, "other dtype")
    yield Sample((repeated((6,), dtype, rng), repeated((4,), dtype, rng)), {}, "with NaN")
    yield Sample((repeated((3, 4), dtype, rng), 2), {}, "scalar test element")
    yield Sample((2, repeated((4,), dtype, rng)), {}, "scalar element")
    yield Sample((repeated((4,), dtype, rng), 1.5), {}, "float scalar")
    yield Sample((repeated((0,), dtype, rng), repeated((3,), dtype, rng)), {}, "empty")
    yield Sample((repeated((), dtype, rng), repeated((3,), dtype, rng)), {}, "0-dim")
    yield Sample((repeated((4,), dtype, rng), repeated((3,), dtype, rng)),
                 {"out": empty_out("bool")}, "out=")


def sorted_rows(shape, dtype, rng, layout="contiguous", nan=False):
    """Boundaries: sorted along the last dim, with repeats (NaN sorted last when `nan`)."""
    arg = repeated(shape, dtype, rng, layout, nan=nan)
    arg.array = np.sort(arg.array, axis=-1)
    return arg


def searchsorted_samples(dtype, rng):
    bounds = sorted_rows((6,), dtype, rng)
    yield Sample((bounds, repeated((3, 4), dtype, rng, nan=False)), {}, "1d boundaries")
    yield Sample((bounds, repeated((3, 4), dtype, rng, "transposed", nan=False)),
                 {"right": True}, "right")
    yield Sample((bounds, repeated((7,), dtype, rng, nan=False)), {"side": "right",
                                                                   "out_int32": True},
                 "side right int32")
    yield Sample((sorted_rows((2, 5), dtype, rng, "strided"), repeated((2, 3), dtype, rng)),
                 {}, "rows")
    yield Sample((sorted_rows((6,), dtype, rng, nan=True), repeated((8,), dtype, rng)), {},
                 "NaN boundaries")
    unsorted = repeated((5,), dtype, rng, nan=False)
    order = TensorArg(np.argsort(unsorted.array, kind="stable"), "int64", requires_grad=False)
    yield Sample((unsorted, repeated((4,), dtype, rng, nan=False)), {"sorter": order},
                 "sorter")
    yield Sample((bounds, 2), {}, "scalar value")
    yield Sample((bounds, repeated((4,), "int64", rng)), {}, "other dtype")
    yield Sample((bounds, repeated((0,), dtype, rng)), {}, "no values")
    yield Sample((bounds, repeated((3,), dtype, rng)), {"side": "middle"}, "bad side")
    yield Sample((bounds, repeated((3,), dtype, rng)), {"side": "left", "right": True},
                 "side and right disagree")
    yield Sample((sorted_rows((2, 5), dtype, rng), repeated((3, 2), dtype, rng)), {},
                 "rows mismatch")
    yield Sample((bounds, repeated((3,), dtype, rng)), {"out": empty_out("int64")}, "out=")


def bucketize_samples(dtype, rng):
    bounds = sorted_rows((6,), dtype, rng)
    yield Sample((repeated((3, 4), dtype, rng, nan=False), bounds), {}, "2d")
    yield Sample((repeated((2, 3, 4), dtype, rng, "strided"), bounds),
                 {"right": True, "out_int32": True}, "right int32 strided")
    yield Sample((repeated((), dtype, rng), bounds), {}, "0-dim")
    yield Sample((3, bounds), {}, "scalar input")
    yield Sample((repeated((5,), dtype, rng), sorted_rows((2, 3), dtype, rng)), {},
                 "2d boundaries")
    yield Sample((repeated((5,), dtype, rng), bounds),
                 {"out": empty_out("int32"), "out_int32": True}, "out=")


OPS = [
    OpInfo("sort", function("sort"), sort_samples),
    OpInfo("sort(out=)", function("sort"), sort_out_samples, differentiable=False),
    OpInfo("Tensor.sort", method("sort"), sort_samples, dtypes=ORDERED + COMPLEX),
    OpInfo("argsort", function("argsort"), argsort_samples, differentiable=False),
    OpInfo("msort", function("msort"), msort_samples),
    OpInfo("Tensor.msort", method("msort"), msort_samples, differentiable=False),
    OpInfo("topk", function("topk"), topk_samples),
    OpInfo("Tensor.topk", method("topk"), topk_samples, differentiable=False),
    OpInfo("kthvalue", function("kthvalue"), kthvalue_samples),
    OpInfo("Tensor.kthvalue", method("kthvalue"), kthvalue_samples, differentiable=False),
    OpInfo("isclose", function("isclose"), isclose_samples, differentiable=False),
    OpInfo("Tensor.isclose", method("isclose"), isclose_samples, differentiable=False),
    OpInfo("allclose", function("allclose"), isclose_samples, differentiable=False),
    OpInfo("Tensor.allclose", method("allclose"), isclose_samples, differentiable=False),
    OpInfo("equal", function("equal"), equal_samples, differentiable=False),
    OpInfo("Tensor.equal", method("equal"), equal_samples, differentiable=False),
    OpInfo("isin", function("isin"), isin_samples, differentiable=False),
    OpInfo("searchsorted", function("searchsorted"), searchsorted_samples, differentiable=False),
    OpInfo("bucketize", function("bucketize"), bucketize_samples, differentiable=False),
]
