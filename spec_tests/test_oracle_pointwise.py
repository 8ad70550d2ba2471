"""Reference vs real PyTorch for every pointwise op in the op database.

Each test covers one (op, dtype) over the shape groups, layouts, keyword variants, Python
scalar operands, the in-place form and `out=`; a failure lists every disagreeing case.
"""
from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

import reftorch
from .opdb import DTYPE_NAMES, OPERATORS, POINTWISE
from .opdb.samples import BINARY_SHAPES, UNARY_SHAPES, layouts, make_pair, values
from .oracle import compare
from .xfails import MIXED_DTYPE_XFAILS, SPECIAL_VALUE_XFAILS

torch = pytest.importorskip("torch")


def _cases_binary(entry, dtype_name, rng):
    for (sa, sb), kwargs in itertools.product(BINARY_SHAPES, entry.kwargs):
        va = values(sa, dtype_name, rng, domain=entry.domain)
        vb = values(sb, dtype_name, rng, nonzero=entry.nonzero_rhs, small=entry.small_rhs,
                    domain=entry.domain)
        for la, lb in zip(layouts(sa), itertools.cycle(layouts(sb))):
            ra, ta = make_pair(va, dtype_name, la, reftorch, torch)
            rb, tb = make_pair(vb, dtype_name, lb, reftorch, torch)
            yield f"{sa}{la} {sb}{lb} {kwargs}", ra, rb, ta, tb, kwargs


def _failures_binary(entry, dtype_name):
    rng = np.random.default_rng(zlib.crc32(f"{entry.name} {dtype_name}".encode()))
    failures = []
    for label, ra, rb, ta, tb, kwargs in _cases_binary(entry, dtype_name, rng):
        failures.append((label, compare(lambda: entry.call(reftorch, ra, rb, **kwargs),
                                        lambda: entry.call(torch, ta, tb, **kwargs))))
        if entry.inplace is None:
            continue
        failures.append((label + " inplace", compare(
            lambda: entry.inplace(ra.clone(), rb, **kwargs),
            lambda: entry.inplace(ta.clone(), tb, **kwargs))))
    va = values((2, 3), dtype_name, rng)
    ra, ta = make_pair(va, dtype_name, "contiguous", reftorch, torch)
    for scalar in entry.scalars:
        failures.append((f"scalar {scalar!r}", compare(lambda: entry.call(reftorch, ra, scalar),
                                                       lambda: entry.call(torch, ta, scalar))))
        if entry.inplace is not None:
            failures.append((f"inplace scalar {scalar!r}", compare(
                lambda: entry.inplace(ra.clone(), scalar),
                lambda: entry.inplace(ta.clone(), scalar))))
    return [(label, msg) for label, msg in failures if msg]


def _failures_unary(entry, dtype_name):
    rng = np.random.default_rng(zlib.crc32(f"{entry.name} {dtype_name}".encode()))
    failures = []
    for shape, kwargs in itertools.product(UNARY_SHAPES, entry.kwargs):
        v = values(shape, dtype_name, rng, domain=entry.domain)
        for layout in layouts(shape):
            r, t = make_pair(v, dtype_name, layout, reftorch, torch)
            label = f"{shape}{layout} {kwargs}"
            failures.append((label, compare(lambda: entry.call(reftorch, r, **kwargs),
                                            lambda: entry.call(torch, t, **kwargs))))
            if entry.inplace:
                failures.append((f"{label} inplace", compare(
                    lambda: entry.inplace(r.clone(), **kwargs),
                    lambda: entry.inplace(t.clone(), **kwargs))))
    return [(label, msg) for label, msg in failures if msg]


@pytest.mark.parametrize("dtype_name", DTYPE_NAMES)
@pytest.mark.parametrize("entry", POINTWISE, ids=lambda e: e.name)
def test_pointwise_matches_torch(entry, dtype_name):
    failures = (_failures_binary if entry.arity == 2 else _failures_unary)(entry, dtype_name)
    assert not failures, "\n".join(f"{label}: {msg}" for label, msg in failures[:5])


@pytest.mark.parametrize("entry", [e for e in POINTWISE if e.arity == 2], ids=lambda e: e.name)
def test_mixed_dtypes_match_torch(entry):
    """Every dtype pair, as tensor-tensor and as tensor with a 0-dim tensor (category rule)."""
    rng = np.random.default_rng(7)
    failures = []
    for da, db in itertools.product(DTYPE_NAMES, repeat=2):
        for sb in ((3,), ()):
            va = values((2, 3), da, rng, domain=entry.domain)
            vb = values(sb, db, rng, nonzero=entry.nonzero_rhs, small=entry.small_rhs,
                        domain=entry.domain)
            ra, ta = make_pair(va, da, "contiguous", reftorch, torch)
            rb, tb = make_pair(vb, db, "contiguous", reftorch, torch)
            msg = compare(lambda: entry.call(reftorch, ra, rb), lambda: entry.call(torch, ta, tb))
            if msg and (entry.name, da, db, sb) not in MIXED_DTYPE_XFAILS:
                failures.append(f"{da} {db}{sb}: {msg}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:6])


@pytest.mark.parametrize("symbol", sorted(OPERATORS))
def test_python_operators_match_torch(symbol):
    """`a <op> b`, `scalar <op> b` and `a <op>= b` agree with torch for every dtype."""
    rng = np.random.default_rng(11)
    entry = next(e for e in POINTWISE if e.name == OPERATORS[symbol])
    binary = eval(f"lambda a, b: a {symbol} b")  # noqa: S307 - fixed operator table
    reflected = eval(f"lambda a, b: b {symbol} a")  # noqa: S307
    failures = []
    for dtype_name in DTYPE_NAMES:
        va = values((2, 3), dtype_name, rng)
        vb = values((3,), dtype_name, rng, nonzero=entry.nonzero_rhs, small=entry.small_rhs)
        ra, ta = make_pair(va, dtype_name, "contiguous", reftorch, torch)
        rb, tb = make_pair(vb, dtype_name, "contiguous", reftorch, torch)
        checks = [("tensor", lambda: binary(ra, rb), lambda: binary(ta, tb)),
                  ("reflected 2", lambda: reflected(rb, 2), lambda: reflected(tb, 2))]
        for label, ref_fn, torch_fn in checks:
            msg = compare(ref_fn, torch_fn)
            if msg:
                failures.append(f"{dtype_name} {label}: {msg}")
    assert not failures, "\n".join(failures[:6])


def test_unary_operators_match_torch():
    rng = np.random.default_rng(3)
    failures = []
    for dtype_name in DTYPE_NAMES:
        ra, ta = make_pair(values((4,), dtype_name, rng), dtype_name, "contiguous",
                           reftorch, torch)
        for label, fn in (("-", lambda x: -x), ("abs", lambda x: abs(x)), ("~", lambda x: ~x),
                          ("+", lambda x: +x)):
            msg = compare(lambda: fn(ra), lambda: fn(ta))
            if msg:
                failures.append(f"{dtype_name} {label}: {msg}")
    assert not failures, "\n".join(failures[:6])


@pytest.mark.parametrize("entry", [e for e in POINTWISE if e.arity == 2], ids=lambda e: e.name)
def test_out_argument_matches_torch(entry):
    """`out=` of the result dtype, of a wider dtype, of a lower category, and of wrong shape."""
    rng = np.random.default_rng(5)
    ra, ta = make_pair(values((2, 3), "float32", rng), "float32", "contiguous", reftorch, torch)
    rb, tb = make_pair(values((3,), "float32", rng, nonzero=True, small=entry.small_rhs),
                       "float32", "contiguous", reftorch, torch)
    failures = []
    for out_dtype, out_shape in (("float32", (2, 3)), ("float64", (2, 3)), ("int64", (2, 3)),
                                 ("bool", (2, 3)), ("float32", (0,))):
        def run(m, a, b):
            out = m.zeros(out_shape, dtype=getattr(m, out_dtype))
            result = entry.call(m, a, b, out=out)
            assert result is out
            return out
        msg = compare(lambda: run(reftorch, ra, rb), lambda: run(torch, ta, tb))
        if msg:
            failures.append(f"out {out_dtype}{out_shape}: {msg}")
    assert not failures, "\n".join(failures)


def test_integer_division_by_zero_raises_like_torch():
    for op in ("floor_divide", "remainder"):
        msg = compare(lambda: getattr(reftorch, op)(reftorch.tensor([1, 2]), 0),
                      lambda: getattr(torch, op)(torch.tensor([1, 2]), 0))
        assert msg is None, msg
    msg = compare(lambda: reftorch.div(reftorch.tensor([5]), reftorch.tensor([0]),
                                       rounding_mode="trunc"),
                  lambda: torch.div(torch.tensor([5]), torch.tensor([0]), rounding_mode="trunc"))
    assert msg is None, msg


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "float32", "float64"])
def test_special_float_values_match_torch(dtype_name):
    v = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e30, -1e-30])
    failures = []
    for entry in POINTWISE:
        if (entry.name, dtype_name) in SPECIAL_VALUE_XFAILS:
            continue
        for rhs in (np.roll(v, 1), v):
            ra, ta = make_pair(v, dtype_name, "contiguous", reftorch, torch)
            rb, tb = make_pair(rhs, dtype_name, "contiguous", reftorch, torch)
            args_r, args_t = ((ra, rb), (ta, tb)) if entry.arity == 2 else ((ra,), (ta,))
            msg = compare(lambda: entry.call(reftorch, *args_r), lambda: entry.call(torch, *args_t))
            if msg:
                failures.append(f"{entry.name}: {msg}")
    assert not failures, "\n".join(failures[:6])
