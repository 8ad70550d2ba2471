"""Special functions against real PyTorch: wide float64 ranges, poles, infinities, errors.

The op-database runners already compare every dtype and layout on ordinary samples; this file
checks accuracy over wide ranges (PyTorch's float64 kernels are accurate to ~1e-13 there) and
the edge values where special functions are easy to get wrong.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from .oracle import compare, host

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(1234)
_WIDE = np.concatenate([_RNG.uniform(-30, 30, 400), _RNG.uniform(-6, 6, 400),
                        np.sign(_RNG.standard_normal(200)) * 10 ** _RNG.uniform(-300, 300, 200)])
_UNIT = np.concatenate([_RNG.uniform(-1, 1, 400), 1 - 10 ** _RNG.uniform(-16, -1, 100),
                        -1 + 10 ** _RNG.uniform(-16, -1, 100)])
_PROB = np.concatenate([_RNG.uniform(0, 1, 300), 10 ** _RNG.uniform(-300, -1, 100)])

# (label, function of a module and a tensor, inputs, relative tolerance, absolute tolerance)
ACCURACY = [
    ("erf", lambda m, x: m.erf(x), _WIDE, 1e-14, 0),
    ("erfc", lambda m, x: m.erfc(x), _WIDE, 1e-13, 0),
    ("erfcx", lambda m, x: m.special.erfcx(x), _WIDE[np.abs(_WIDE) < 1e5], 1e-12, 0),
    ("erfinv", lambda m, x: m.erfinv(x), _UNIT, 1e-13, 0),
    ("ndtri", lambda m, x: m.special.ndtri(x), _PROB, 1e-13, 0),
    # PyTorch's own upper tail of log_ndtr is off by ~1e-13 relative (checked with mpmath).
    ("log_ndtr", lambda m, x: m.special.log_ndtr(x), _WIDE[np.abs(_WIDE) < 1e100], 1e-12, 0),
    ("lgamma", lambda m, x: m.lgamma(x), _WIDE, 1e-12, 1e-14),
    ("digamma", lambda m, x: m.digamma(x), _WIDE, 1e-12, 1e-14),
    ("trigamma", lambda m, x: m.polygamma(1, x), _WIDE[np.abs(_WIDE) < 1e8], 1e-9, 1e-12),
    ("polygamma 2", lambda m, x: m.polygamma(2, x), _WIDE[np.abs(_WIDE) < 1e8], 1e-11, 1e-14),
    ("polygamma 5", lambda m, x: m.polygamma(5, x), _WIDE[np.abs(_WIDE) < 1e8], 1e-11, 1e-14),
    ("mvlgamma", lambda m, x: m.mvlgamma(x.abs() + 2, p=4), _WIDE, 1e-12, 1e-13),
    ("i0", lambda m, x: m.i0(x), _WIDE, 1e-13, 0),
    ("i0e", lambda m, x: m.special.i0e(x), _WIDE, 1e-13, 0),
    ("i1", lambda m, x: m.special.i1(x), _WIDE, 1e-13, 0),
    ("i1e", lambda m, x: m.special.i1e(x), _WIDE, 1e-13, 0),
    ("sinc", lambda m, x: m.sinc(x), _WIDE, 1e-13, 1e-16),
    ("entr", lambda m, x: m.special.entr(x), _WIDE, 1e-14, 0),
    # ndtr is (1 + erf(x / sqrt 2)) / 2 in both: one ulp of erf near -1 is 5.6e-17 here.
    ("ndtr", lambda m, x: m.special.ndtr(x), _WIDE, 1e-14, 1e-16),
]


@pytest.mark.parametrize("case", ACCURACY, ids=[c[0] for c in ACCURACY])
def test_float64_accuracy_over_wide_ranges(case):
    label, fn, values, rtol, atol = case
    got = host(fn(reftorch, reftorch.tensor(values, dtype=reftorch.float64)))
    expected = host(fn(torch, torch.tensor(values, dtype=torch.float64)))
    finite = np.isfinite(expected)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), label
    assert np.array_equal(got[~finite & ~np.isnan(expected)],
                          expected[~finite & ~np.isnan(expected)]), label
    bad = ~np.isclose(got[finite], expected[finite], rtol=rtol, atol=atol)
    assert not bad.any(), (label, values[finite][bad][:5], got[finite][bad][:5],
                           expected[finite][bad][:5])


EDGES = np.array([0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -2.5, 0.5, np.inf, -np.inf, np.nan, 1e30,
                  -1e30, 1e-300, -1e-30, 710.0, 40.0, 1e17, 4.5e15 + 0.5])
EDGE_FNS = {
    "lgamma": lambda m, x: m.lgamma(x), "digamma": lambda m, x: m.digamma(x),
    "trigamma": lambda m, x: m.polygamma(1, x), "polygamma2": lambda m, x: m.polygamma(2, x),
    "polygamma3": lambda m, x: m.polygamma(3, x), "erfinv": lambda m, x: m.erfinv(x),
    "i0": lambda m, x: m.i0(x), "i1e": lambda m, x: m.special.i1e(x),
    "erfcx": lambda m, x: m.special.erfcx(x), "log_ndtr": lambda m, x: m.special.log_ndtr(x),
    "ndtri": lambda m, x: m.special.ndtri(x), "entr": lambda m, x: m.special.entr(x),
    "sinc": lambda m, x: m.sinc(x), "mvlgamma": lambda m, x: m.mvlgamma(x, p=2),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(EDGE_FNS))
def test_poles_infinities_and_nan_match_torch(name, dtype):
    fn = EDGE_FNS[name]
    msg = compare(lambda: fn(reftorch, reftorch.tensor(EDGES, dtype=getattr(reftorch, dtype))),
                  lambda: fn(torch, torch.tensor(EDGES, dtype=getattr(torch, dtype))))
    assert msg is None, msg
    # Signed zeros and infinities must agree exactly (digamma(+-0) = -+inf).
    got = host(fn(reftorch, reftorch.tensor(EDGES, dtype=getattr(reftorch, dtype))))
    expected = host(fn(torch, torch.tensor(EDGES, dtype=getattr(torch, dtype))))
    assert np.array_equal(np.signbit(got[got == 0]), np.signbit(expected[expected == 0]))


def test_xlog1py_zero_rules_match_torch():
    x = [0.0, 0.0, 0.0, 1.0, 0.0, 2.0, -1.0]
    y = [np.nan, -1.0, -2.0, -1.0, np.inf, 3.0, 0.5]
    msg = compare(lambda: reftorch.special.xlog1py(reftorch.tensor(x), reftorch.tensor(y)),
                  lambda: torch.special.xlog1py(torch.tensor(x), torch.tensor(y)))
    assert msg is None, msg
    for a, b in ((2, [0.5, -1.0]), ([0.0, 1.0], 3)):
        def call(m, a=a, b=b):
            wrap = (lambda v: m.tensor(v) if isinstance(v, list) else v)
            return m.special.xlog1py(wrap(a), wrap(b))
        msg = compare(lambda: call(reftorch), lambda: call(torch))
        assert msg is None, msg


@pytest.mark.parametrize("call", [
    lambda m: m.polygamma(-1, m.tensor([1.0])),
    lambda m: m.polygamma(1.0, m.tensor([1.0])),
    lambda m: m.mvlgamma(m.tensor([3.0]), p=0),
    lambda m: m.mvlgamma(m.tensor([3.0]), p=1.5),
    lambda m: m.mvlgamma(m.tensor([True]), p=1),
    lambda m: m.mvlgamma(m.tensor([0.2, 3.0]), p=3),
    lambda m: m.erf(m.tensor([1j])),
    lambda m: m.special.ndtri(m.tensor([0.5], dtype=m.float16)),
    lambda m: m.tensor([1, 2]).lgamma_(),
    lambda m: m.tensor([1.0, 2.0]).polygamma_(2),
], ids=["polygamma-negative-n", "polygamma-float-n", "mvlgamma-p0", "mvlgamma-float-p",
        "mvlgamma-bool", "mvlgamma-below-domain", "erf-complex", "ndtri-half",
        "lgamma_-int", "polygamma_"])
def test_errors_and_forms_match_torch(call):
    msg = compare(lambda: call(reftorch), lambda: call(torch))
    assert msg is None, msg


@pytest.mark.parametrize("fn", [
    lambda m, x: m.erf(x), lambda m, x: m.erfc(x), lambda m, x: m.erfinv(x / 10),
    lambda m, x: m.lgamma(x), lambda m, x: m.digamma(x), lambda m, x: m.polygamma(2, x),
    lambda m, x: m.mvlgamma(x + 3, p=2), lambda m, x: m.i0(x), lambda m, x: m.sinc(x),
    lambda m, x: m.special.i0e(x), lambda m, x: m.special.i1(x), lambda m, x: m.special.i1e(x),
    lambda m, x: m.special.erfcx(x), lambda m, x: m.special.ndtri(x / 10 + 0.5),
    lambda m, x: m.special.log_ndtr(x), lambda m, x: m.special.entr(x + 3),
    lambda m, x: m.special.xlog1py(x, x + 3),
])
def test_backward_node_names_match_torch(fn):
    def name(m):
        x = m.tensor([0.3, 1.7], dtype=m.float64, requires_grad=True)
        return fn(m, x).grad_fn.name()
    assert name(reftorch) == name(torch)


def test_erf_erfc_at_huge_arguments():
    """The split of y*y inside erfc overflowed for |x| > 1.6e307 and gave NaN."""
    import reftorch
    import torch
    x = [1.7e307, -1e308, 27.0, 27.5, 30.0, float("inf"), -float("inf"), 5.0]
    for name in ("erf", "erfc"):
        ours = getattr(reftorch, name)(reftorch.tensor(x, dtype=reftorch.float64)).tolist()
        theirs = getattr(torch, name)(torch.tensor(x, dtype=torch.float64)).tolist()
        assert ours == theirs
