"""Reductions: special cases that the op-database samples do not reach, each against torch.

NaN and infinity propagation, integer overflow, tie-breaking of the index results, half-type
accumulation, degrees of freedom <= 0, the named tuples (`out=` variants and printing), the
autograd node names, and second derivatives.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import reftorch
from .oracle import compare, compare_values

torch = pytest.importorskip("torch")

NAN, INF = math.nan, math.inf
WITH_NAN = [[1.0, NAN, 3.0, -2.0], [4.0, 5.0, -1.0, 0.5], [NAN, NAN, NAN, NAN]]
WITH_INF = [[1.0, INF, -INF, 2.0], [-INF, -INF, 0.0, 1.0], [INF, 3.0, INF, 0.0]]


def both(values, dtype="float64"):
    array = np.array(values)
    return (reftorch.tensor(array, dtype=getattr(reftorch, dtype)),
            torch.tensor(array, dtype=getattr(torch, dtype)))


def check(fn, values, dtype="float64"):
    r, t = both(values, dtype)
    msg = compare(lambda: fn(reftorch, r), lambda: fn(torch, t))
    assert msg is None, msg


NAN_CASES = {
    "max": lambda m, x: m.max(x), "min": lambda m, x: m.min(x),
    "max dim": lambda m, x: m.max(x, 1), "min dim": lambda m, x: m.min(x, 0),
    "amax": lambda m, x: m.amax(x, 1), "amin": lambda m, x: m.amin(x, (0, 1)),
    "aminmax": lambda m, x: m.aminmax(x, dim=1),
    "argmax": lambda m, x: m.argmax(x, 1), "argmin": lambda m, x: m.argmin(x),
    "argmin dim": lambda m, x: m.argmin(x, 1),
    "sum": lambda m, x: m.sum(x, 1), "nansum": lambda m, x: m.nansum(x, 1),
    "mean": lambda m, x: m.mean(x, 0), "nanmean": lambda m, x: m.nanmean(x, 1),
    "median": lambda m, x: m.median(x), "median dim": lambda m, x: m.median(x, 1),
    "nanmedian": lambda m, x: m.nanmedian(x),
    # values only: the index torch reports for an all-NaN row is whatever its nth_element
    # leaves there (unspecified)
    "nanmedian dim": lambda m, x: m.nanmedian(x, 1).values,
    "cummax": lambda m, x: m.cummax(x, 1), "cummin": lambda m, x: m.cummin(x, 0),
    "cumsum": lambda m, x: m.cumsum(x, 1), "logsumexp": lambda m, x: m.logsumexp(x, 1),
    "logcumsumexp": lambda m, x: m.logcumsumexp(x, 1),
    "quantile": lambda m, x: m.quantile(x, 0.4, dim=1),
    "nanquantile": lambda m, x: m.nanquantile(x, 0.4, dim=1),
    "nanquantile full": lambda m, x: m.nanquantile(x, 0.75),
    "var": lambda m, x: m.var(x, 1), "std": lambda m, x: m.std(x, 0),
    "norm": lambda m, x: m.norm(x, 2, 1), "prod": lambda m, x: m.prod(x, 1),
}


@pytest.mark.parametrize("name", list(NAN_CASES))
@pytest.mark.parametrize("values", [WITH_NAN, WITH_INF], ids=["nan", "inf"])
def test_nan_and_inf_propagation(name, values):
    if name.startswith(("argmax", "argmin", "max", "min", "aminmax", "cummax", "cummin",
                        "median", "nanmedian")) and values is WITH_INF:
        values = np.where(np.isnan(WITH_INF), 0, WITH_INF)  # plain infinities
    check(NAN_CASES[name], values)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_nan_max_in_low_precision(dtype):
    check(lambda m, x: (m.max(x, 1), m.amax(x), m.argmax(x, 0)), WITH_NAN, dtype)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
def test_integer_overflow_wraps(dtype):
    big = {"int64": 2 ** 62, "int32": 2 ** 30, "int8": 100, "uint8": 200}[dtype]
    values = [big, big, big, 3]
    check(lambda m, x: m.sum(x), values, dtype)
    check(lambda m, x: m.prod(x), values, dtype)
    check(lambda m, x: m.cumsum(x, 0), values, dtype)
    check(lambda m, x: m.cumprod(x, 0), values, dtype)
    check(lambda m, x: m.sum(x, dtype=getattr(m, dtype)), values, dtype)
    check(lambda m, x: m.cumsum(x, 0, dtype=getattr(m, dtype)), values, dtype)


def test_half_types_accumulate_in_float32():
    # 3000 copies of 1.1 summed in float16 steps would stall at 2048 + rounding; PyTorch
    # accumulates in float32 and rounds once.
    values = np.full(3000, 1.1)
    for dtype in ("float16", "bfloat16"):
        check(lambda m, x: (m.sum(x), m.mean(x), m.cumsum(x, 0)[-1], m.var(x)), values, dtype)


TIES = [[2, 5, 5, 1, 5], [3, 3, 1, 1, 0], [7, 7, 7, 7, 7]]


@pytest.mark.parametrize("dtype", ["int64", "float32", "uint8", "bool"])
def test_ties_pick_the_indices_torch_picks(dtype):
    check(lambda m, x: (m.argmax(x, 1), m.argmin(x, 1), m.argmax(x), m.argmin(x)), TIES, dtype)
    check(lambda m, x: (m.max(x, 1), m.min(x, 1), m.cummax(x, 1), m.cummin(x, 1)), TIES, dtype)
    check(lambda m, x: (m.mode(x, 1), m.mode(x, 0)), TIES, dtype)
    check(lambda m, x: m.unique(x, return_inverse=True, return_counts=True), TIES, dtype)
    check(lambda m, x: m.unique_consecutive(x, return_counts=True), TIES, dtype)


def test_median_is_the_lower_median():
    check(lambda m, x: (m.median(x), m.median(x, 1).values, m.nanmedian(x, 0).values),
          [[4.0, 1.0, 3.0, 2.0], [0.5, -1.0, 8.0, 7.0]])


def test_empty_reductions():
    r, t = both(np.zeros((2, 0)))
    for fn in (lambda m, x: m.sum(x), lambda m, x: m.prod(x), lambda m, x: m.mean(x, 1),
               lambda m, x: m.sum(x, 1), lambda m, x: m.prod(x, 1),
               lambda m, x: m.all(x), lambda m, x: m.any(x, 1), lambda m, x: m.var(x, 1),
               lambda m, x: m.logsumexp(x, 1), lambda m, x: m.norm(x),
               lambda m, x: m.count_nonzero(x, 0), lambda m, x: m.max(x, 0),
               lambda m, x: m.amax(x, 0), lambda m, x: m.argmax(x, 0)):
        msg = compare(lambda: fn(reftorch, r), lambda: fn(torch, t))
        assert msg is None, msg
    for fn, error in ((lambda m, x: m.max(x), RuntimeError),
                      (lambda m, x: m.argmax(x), IndexError),
                      (lambda m, x: m.amax(x, 1), IndexError),
                      (lambda m, x: m.max(x, 1), IndexError),
                      (lambda m, x: m.quantile(x, 0.5), RuntimeError)):
        with pytest.raises(error):
            fn(torch, t)
        with pytest.raises(error):
            fn(reftorch, r)


def test_degrees_of_freedom_at_most_zero():
    check(lambda m, x: (m.var(x), m.std(x, correction=3), m.var_mean(x, 0, correction=2)),
          [[1.0, 2.0]])


@pytest.mark.parametrize("dtype", ["uint8", "int8", "bool", "float32", "complex64"])
def test_all_any_result_dtype(dtype):
    check(lambda m, x: (m.all(x), m.any(x, 0), m.all(x, (0, 1), keepdim=True)),
          [[0, 1, 2], [3, 4, 5]], dtype)


def test_mean_of_integers_is_refused():
    r, t = both([1, 2], "int64")
    for x in (r, t):
        with pytest.raises(RuntimeError, match="mean"):
            x.mean()
    check(lambda m, x: m.mean(x, dtype=m.float64), [1, 2], "int64")


def test_out_variants_resize_and_name_their_tuple():
    r, t = both([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])

    def call(m, x):
        values, indices = m.empty(0, dtype=x.dtype), m.empty(7, dtype=m.int64)
        result = m.max(x, 1, out=(values, indices))
        return (result, type(result).__name__, values, indices,
                m.sum(x, 0, out=m.empty(1, dtype=x.dtype)),
                m.cumsum(x, 1, out=m.empty(0, dtype=x.dtype)))
    msg = compare(lambda: call(reftorch, r), lambda: call(torch, t))
    assert msg is None, msg


def test_return_types_print_like_torch():
    r, t = both([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    for fn in (lambda m, x: m.max(x, 1), lambda m, x: m.aminmax(x),
               lambda m, x: m.cummin(x, 0), lambda m, x: m.median(x, 0, keepdim=True)):
        assert repr(fn(reftorch, r)) == repr(fn(torch, t))
    values = reftorch.mode(r, 1)
    assert values.values is values[0] and values.indices is values[1]


def test_nuclear_norm_needs_linalg():
    r, _ = both([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(NotImplementedError, match="linalg"):
        reftorch.norm(r, "nuc")


NODE_CASES = {
    "sum": lambda m, x: m.sum(x), "sum dim": lambda m, x: x.sum(0),
    "sum dim=None": lambda m, x: m.sum(x, dim=None), "nansum": lambda m, x: x.nansum(),
    "mean": lambda m, x: x.mean(), "mean dim": lambda m, x: x.mean(-1),
    "nanmean": lambda m, x: x.nanmean(), "prod": lambda m, x: x.prod(),
    "prod dim": lambda m, x: x.prod(1), "std": lambda m, x: x.std(0),
    "var": lambda m, x: x.var(), "std_mean": lambda m, x: m.std_mean(x)[0],
    "var_mean": lambda m, x: m.var_mean(x, 1)[1], "norm": lambda m, x: x.norm(3, 1),
    "dist": lambda m, x: m.dist(x, x * 2), "logsumexp": lambda m, x: x.logsumexp(0),
    "cumsum": lambda m, x: x.cumsum(0), "cumprod": lambda m, x: x.cumprod(1),
    "cummax": lambda m, x: x.cummax(0).values, "cummin": lambda m, x: x.cummin(1)[0],
    "logcumsumexp": lambda m, x: x.logcumsumexp(0), "max": lambda m, x: x.max(),
    "max dim": lambda m, x: x.max(1).values, "min": lambda m, x: x.min(),
    "min dim": lambda m, x: x.min(0)[0], "amax": lambda m, x: x.amax(),
    "amin": lambda m, x: x.amin(1), "aminmax": lambda m, x: m.aminmax(x).min,
    "median": lambda m, x: x.median(), "median dim": lambda m, x: x.median(0).values,
    "nanmedian": lambda m, x: x.nanmedian(), "nanmedian dim": lambda m, x: x.nanmedian(1)[0],
    "mode": lambda m, x: x.mode(0).values,
}


@pytest.mark.parametrize("name", list(NODE_CASES))
def test_node_names(name):
    r, t = both([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    got = NODE_CASES[name](reftorch, r.requires_grad_())
    expected = NODE_CASES[name](torch, t.requires_grad_())
    assert type(got.grad_fn).__name__ == type(expected.grad_fn).__name__


def test_index_results_do_not_require_grad():
    r, _ = both([[1.0, 5.0], [4.0, 2.0]])
    r.requires_grad_()
    for result in (r.max(1), r.cummax(0), r.median(0), r.mode(1)):
        assert result.values.requires_grad and not result.indices.requires_grad
    assert not r.argmax().requires_grad and not r.unique().requires_grad


SECOND_ORDER = {
    "prod with a zero": (lambda m, x: m.prod(x, 1), [[1.5, 0.0, 2.0], [1.0, -2.0, 3.0]]),
    "cumprod": (lambda m, x: m.cumprod(x, 1), [[1.5, 0.5, 2.0], [1.0, -2.0, 3.0]]),
    "std": (lambda m, x: m.std(x, 0), [[1.5, 0.5, 2.0], [1.0, -2.0, 3.0]]),
    "norm 3": (lambda m, x: m.norm(x, 3), [[1.5, 0.5, 2.0], [1.0, -2.0, 3.0]]),
    "logsumexp": (lambda m, x: m.logsumexp(x, 1), [[1.5, 0.5, 2.0], [1.0, -2.0, 3.0]]),
    "logcumsumexp": (lambda m, x: m.logcumsumexp(x, 1), [[1.5, 0.5, 2.0], [1.0, -2.0, 3.0]]),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_derivatives_match_torch(name):
    fn, values = SECOND_ORDER[name]

    def hessian_vector(m, x):
        x = x.requires_grad_()
        y = fn(m, x)
        (g,) = m.autograd.grad((y * y).sum(), x, create_graph=True)
        (h,) = m.autograd.grad((g * g).sum(), x)
        return h
    r, t = both(values)
    msg = compare_values(hessian_vector(reftorch, r), hessian_vector(torch, t))
    assert msg is None, msg
