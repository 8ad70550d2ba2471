"""Sorting and selection cases the op database cannot express: stability on long inputs with
many ties, NaN placement, tie handling of topk/kthvalue, exact binary-search behaviour,
autograd node names and double backward, and how results print. All compared with torch.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from .oracle import compare_values, host

torch = pytest.importorskip("torch")


def pair(array, dtype="float64"):
    array = np.asarray(array)
    return (reftorch.tensor(array, dtype=getattr(reftorch, dtype)),
            torch.tensor(array, dtype=getattr(torch, dtype)))


def agree(got, expected):
    msg = compare_values(got, expected)
    assert msg is None, msg


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("descending", [False, True])
def test_long_stable_sort_with_many_ties_matches_torch(dtype, descending):
    r, t = pair(_many_ties(dtype), dtype)
    agree(reftorch.sort(r, descending=descending, stable=True),
          torch.sort(t, descending=descending, stable=True))
    agree(reftorch.argsort(r, dim=0, descending=descending, stable=True),
          torch.argsort(t, dim=0, descending=descending, stable=True))


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_default_sort_agrees_on_values_and_is_a_valid_permutation(dtype):
    # Without stable=True PyTorch leaves the order of ties unspecified (its CPU kernel is
    # stable only up to 16 elements); ours is always stable, which is one valid answer.
    r, t = pair(_many_ties(dtype), dtype)
    got, expected = reftorch.sort(r, descending=True), torch.sort(t, descending=True)
    agree(got.values, expected.values)
    assert np.array_equal(np.take_along_axis(host(r), host(got.indices), -1),
                          host(got.values), equal_nan=True)
    assert all(sorted(row) == list(range(700)) for row in host(got.indices).tolist())


def _many_ties(dtype):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2 if dtype == "bool" else 5, size=(3, 700)).astype(float)
    if dtype.startswith(("float", "bfloat")):
        values[rng.random(values.shape) < 0.05] = np.nan
        values[rng.random(values.shape) < 0.05] = -0.0   # -0.0 and 0.0 are ties
    return values


def test_nan_is_largest_and_infinities_order():
    values = [np.nan, 1.0, -np.inf, np.inf, np.nan, -1.0, np.inf]
    r, t = pair(values, "float32")
    for descending in (False, True):
        agree(reftorch.sort(r, descending=descending), torch.sort(t, descending=descending))
    agree(reftorch.topk(r, 4).values, torch.topk(t, 4).values)   # two NaNs tie: values only
    agree(reftorch.topk(r, 2, largest=False), torch.topk(t, 2, largest=False))
    agree(reftorch.kthvalue(r, 7).values, torch.kthvalue(t, 7).values)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_and_kthvalue_with_ties_pick_equal_values(largest):
    # Which of several equal elements is reported is unspecified: values must agree with
    # torch, and every index must point at an element with the reported value.
    rng = np.random.default_rng(1)
    r, t = pair(rng.integers(0, 3, size=(4, 9)), "int64")
    got, expected = reftorch.topk(r, 4, largest=largest), torch.topk(t, 4, largest=largest)
    agree(got.values, expected.values)
    picked = np.take_along_axis(host(r), host(got.indices), axis=-1)
    assert np.array_equal(picked, host(got.values))
    got, expected = reftorch.kthvalue(r, 5, dim=1), torch.kthvalue(t, 5, dim=1)
    agree(got.values, expected.values)
    assert np.array_equal(host(r)[np.arange(4), host(got.indices)], host(got.values))


def test_searchsorted_and_bucketize_into_empty_boundaries_give_zeros():
    for boundaries, values in (((0,), (3,)), ((2, 0), (2, 3))):
        rb, tb = pair(np.zeros(boundaries))
        rv, tv = pair(np.ones(values))
        agree(reftorch.searchsorted(rb, rv), torch.searchsorted(tb, tv))
        agree(reftorch.searchsorted(rb, rv, right=True), torch.searchsorted(tb, tv, right=True))
    rb, tb = pair(np.zeros(0))
    rv, tv = pair(np.ones((2, 2)))
    agree(reftorch.bucketize(rv, rb), torch.bucketize(tv, tb))


def test_topk_unsorted_returns_the_same_elements():
    rng = np.random.default_rng(2)
    r, t = pair(rng.permutation(20).reshape(4, 5), "float32")
    got, expected = reftorch.topk(r, 3, sorted=False), torch.topk(t, 3, sorted=False)
    assert np.array_equal(np.sort(host(got.values), -1), np.sort(host(expected.values), -1))


def test_searchsorted_matches_torch_binary_search_on_unsorted_and_nan_boundaries():
    # Not a valid input, but PyTorch's answer is deterministic: its binary search's.
    rng = np.random.default_rng(3)
    boundaries = rng.integers(-5, 5, size=(4, 11)).astype(float)
    boundaries[rng.random(boundaries.shape) < 0.2] = np.nan
    values = rng.integers(-6, 6, size=(4, 7)).astype(float)
    values[0, :2] = np.nan
    rb, tb = pair(boundaries)
    rv, tv = pair(values)
    for right in (False, True):
        agree(reftorch.searchsorted(rb, rv, right=right),
              torch.searchsorted(tb, tv, right=right))
        agree(reftorch.bucketize(rv, rb[0], right=right),
              torch.bucketize(tv, tb[0], right=right))


def test_isclose_integers_do_not_wrap_around():
    r_a, t_a = pair([10, 200, 0, 255], "uint8")
    r_b, t_b = pair([11, 95, 255, 0], "uint8")
    for rtol, atol in ((0, 1.5), (0.06, 0), (0.5, 3)):
        agree(reftorch.isclose(r_a, r_b, rtol=rtol, atol=atol),
              torch.isclose(t_a, t_b, rtol=rtol, atol=atol))


def test_complex_isclose_and_nan():
    values = [1 + 1j, complex(np.nan, 0), complex(np.inf, 1), 2j]
    others = [1 + 1.000001j, complex(0, np.nan), complex(np.inf, 1), 2.1j]
    r_a, t_a = pair(values, "complex128")
    r_b, t_b = pair(others, "complex128")
    for equal_nan in (False, True):
        agree(reftorch.isclose(r_a, r_b, equal_nan=equal_nan),
              torch.isclose(t_a, t_b, equal_nan=equal_nan))


def test_result_types_and_dtypes():
    r, t = pair([[3, 1, 2]], "int16")
    for name in ("sort", "topk", "kthvalue"):
        args = (2,) if name != "sort" else ()
        got, expected = getattr(reftorch, name)(r, *args), getattr(torch, name)(t, *args)
        assert type(got).__name__ == type(expected).__name__ == name
        assert got.values.dtype == reftorch.int16 and got.indices.dtype == reftorch.int64
        assert repr(got) == repr(expected)
    out = (reftorch.empty(0, dtype=reftorch.int16), reftorch.empty(0, dtype=reftorch.int64))
    result = reftorch.sort(r, out=out)
    assert type(result).__name__ == type(torch.sort(t, out=(torch.empty(0, dtype=torch.int16),
                                                             torch.empty(0, dtype=torch.long)
                                                             ))).__name__
    assert result.values is out[0] and result.indices is out[1]
    assert reftorch.searchsorted(r[0].sort().values, r, out_int32=True).dtype == reftorch.int32
    assert isinstance(reftorch.allclose(r, r), bool) and isinstance(reftorch.equal(r, r), bool)


def test_autograd_node_names_and_nondifferentiable_outputs():
    rng = np.random.default_rng(4)
    data = rng.standard_normal((3, 4))
    r = reftorch.tensor(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    for fn in (lambda m, x: m.sort(x).values, lambda m, x: m.topk(x, 2).values,
               lambda m, x: m.kthvalue(x, 2).values, lambda m, x: m.msort(x)):
        assert fn(reftorch, r).grad_fn.name() == fn(torch, t).grad_fn.name()
    for fn in (lambda m, x: m.sort(x).indices, lambda m, x: m.argsort(x),
               lambda m, x: m.isclose(x, x), lambda m, x: m.searchsorted(x.detach(), x)):
        got, expected = fn(reftorch, r), fn(torch, t)
        assert got.requires_grad == expected.requires_grad is False
        assert got.grad_fn is None


@pytest.mark.parametrize("op", ["sort", "topk", "kthvalue"])
def test_double_backward(op):
    rng = np.random.default_rng(5)
    data, v, w = rng.permutation(12).reshape(3, 4) * 0.5, rng.standard_normal(
        (3, 2)), rng.standard_normal((3, 4))
    call = {"sort": lambda m, x: m.sort(x, dim=0).values[:, :2],
            "topk": lambda m, x: m.topk(x, 2).values,
            "kthvalue": lambda m, x: m.kthvalue(x, 2, dim=1, keepdim=True).values.expand(3, 2)}
    results = []
    for m in (reftorch, torch):
        x = m.tensor(data, requires_grad=True)
        cot = m.tensor(v, requires_grad=True)
        y = call[op](m, x)
        g, = m.autograd.grad(y, x, cot, create_graph=True)
        gg, = m.autograd.grad((g * m.tensor(w)).sum(), cot)
        results.append((g.detach(), gg))
    agree(results[0][0], results[1][0])
    agree(results[0][1], results[1][1])
