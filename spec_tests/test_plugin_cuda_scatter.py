"""reftorch-cuda's scatter_value, scatter_reduce_two_ (scatter's reduce="add"/"multiply") and
scatter_reduce (sum, prod, mean, amax, amin; include_self) from kernels/scatter.cu, against
the cpu reference, and their device-side bounds checks.

Every launch test runs on a real GPU when there is one and on the emulated driver. One thread
per column applies the column's entries in index order, the order of the reference's
np.ufunc.at, so results equal the reference bit for bit, with repeated indices (sums and
products rounded step by step as there), signed zeros and NaN included, except amax/amin's tie
between -0.0 and +0.0 (compared as numbers; NaN payloads aside everywhere).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda import ops_scatter as X  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_index import (  # noqa: E402
    MOVED, _cuda, _guarded_result, check_error_at_synchronisation, indices, sample)
from spec_tests.test_plugin_cuda_kernels import assert_same_values, plain  # noqa: E402

# The launch fixtures of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, reference = base.FLOATS, base.reference
COMPUTED = FLOATS + ["int64", "int32"]
REDUCTIONS = ["sum", "prod", "mean", "amax", "amin"]


def quietly(fn):
    """fn with the reference's deprecation warning for scatter(reduce=) with a tensor src
    silenced (both devices give it)."""
    def run(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return fn(*args)
    return run


def assert_matches(fn, *cpu_args, signed_zeros=True):
    expected = reference(quietly(fn), *cpu_args)
    got = quietly(fn)(*(a.cuda() if isinstance(a, reftorch.Tensor) else a for a in cpu_args))
    assert got.device.type == "cuda"
    if signed_zeros:
        assert_same_values(got, expected)
    else:  # equal as numbers, NaN where the reference has NaN
        assert got.shape == expected.shape and got.dtype is expected.dtype
        np.testing.assert_array_equal(plain(got), plain(expected))


# Layouts of a (6, 5) tensor, applied the same way on cpu and cuda.
LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.t(),
    "sliced": lambda x: x[1::2, 1:],
}


def index_for(a, dim, seed, rows=None):
    """An int64 index for `a` along `dim` with many repeats (fewer or more entries along dim
    than a has), transposed every other seed."""
    shape = list(a.shape)
    shape[dim] = rows if rows is not None else a.shape[dim] + 2
    for d in range(a.ndim):
        if d != dim:
            shape[d] = max(1, shape[d] - 1)
    index = indices(a.shape[dim], tuple(shape), seed)
    return index.t().contiguous().t() if seed % 2 and index.ndim == 2 else index


def small_values(shape, dtype_name, seed):
    """Values whose long products stay finite (a few specials still mixed in for floats)."""
    if dtype_name in FLOATS:
        x = sample(shape, dtype_name, seed)
        return reftorch.where(x.abs() > 4, x / 8, x) if x.numel() else x
    return reftorch.tensor(np.random.default_rng(seed).integers(-3, 4, shape)).to(
        getattr(reftorch, dtype_name))


# --- scatter_value ----------------------------------------------------------------------------

VALUES = {"float32": -2.5, "float64": 0.1, "float16": 0.1, "bfloat16": 3.3, "int64": -7,
          "int32": 2**31 - 1, "bool": True, "complex64": 1.5}


@pytest.mark.parametrize("dtype_name", MOVED)
def test_scatter_value_matches_the_reference(device_kind, dtype_name):
    value = VALUES[dtype_name]
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        a = arrange(sample((6, 5), dtype_name, seed))
        for dim in (0, 1):
            index = index_for(a, dim, seed + dim)
            assert_matches(lambda t, i: reftorch.scatter(t, dim, i, value=value), a, index)
            assert_matches(lambda t, i: t.clone().scatter_(dim, i, value), a, index)
    a = sample((6, 5), dtype_name, 7)
    assert_matches(lambda t, i: reftorch.scatter(t, 0, i, value=value), a,
                   reftorch.zeros((0, 5), dtype=reftorch.int64))
    if dtype_name in ("float32", "int64"):  # a float value into an integer tensor: astype
        assert_matches(lambda t, i: reftorch.scatter(t, 1, i, value=-3.75), a,
                       index_for(a, 1, 8))
    assert plugins.fallbacks() == {}


def test_scatter_value_backward_runs_on_the_device(device_kind):
    """ScatterBackward1 is grad.scatter(dim, index, 0): scatter_value again."""
    a = sample((4, 6), "float32", 1).nan_to_num()
    index = indices(6, (4, 3), 2)
    grads = []
    for device in ("cpu", "cuda"):
        leaf = a.to(device).detach().requires_grad_()
        plugins.reset_fallbacks()
        (reftorch.scatter(leaf, 1, index.to(device), value=2.0) ** 2).sum().backward()
        if device == "cuda":
            assert plugins.fallbacks() == {}
        grads.append(leaf.grad)
    assert_same_values(grads[1], grads[0])


# --- scatter(reduce="add" / "multiply") -------------------------------------------------------

@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("dtype_name", COMPUTED)
def test_scatter_with_reduce_matches_the_reference(device_kind, dtype_name, reduce):
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        a = arrange(small_values((6, 5), dtype_name, seed))
        src = arrange(small_values((8, 7), dtype_name, seed + 10)[:6, :5])  # a strided src
        value = 1.25 if dtype_name in FLOATS else -3
        for dim in (0, 1):
            index = index_for(a, dim, seed + dim)
            src_for = small_values(tuple(index.shape), dtype_name, seed + 20)
            assert_matches(lambda t, i, s: reftorch.scatter(t, dim, i, s, reduce=reduce),
                           a, index, src_for)
            assert_matches(lambda t, i: reftorch.scatter(t, dim, i, value=value,
                                                         reduce=reduce), a, index)
            assert_matches(lambda t, i, s: t.clone().scatter_(dim, i, s, reduce=reduce),
                           a, index_for(a, dim, seed, rows=a.shape[dim] - 1), src)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", ["int32", "int64"])
def test_integer_products_wrap_around_as_numpy_s(device_kind, dtype_name):
    dtype = getattr(reftorch, dtype_name)
    top = int(np.iinfo(dtype_name).max)
    a = reftorch.tensor([top, -top, 5], dtype=dtype)
    index = reftorch.tensor([0, 0, 1, 2, 0])
    src = reftorch.tensor([3, top, -2, 7, 11], dtype=dtype)
    assert_matches(lambda t, i, s: reftorch.scatter(t, 0, i, s, reduce="multiply"), a, index,
                   src)
    assert_matches(lambda t, i: reftorch.scatter(t, 0, i, value=top, reduce="multiply"), a,
                   index)


# --- scatter_reduce ---------------------------------------------------------------------------

@pytest.mark.parametrize("include_self", [True, False], ids=["include_self", "exclude_self"])
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("dtype_name", COMPUTED)
def test_scatter_reduce_matches_the_reference(device_kind, dtype_name, reduce, include_self):
    exact_zeros = reduce not in ("amax", "amin")
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        a = arrange(small_values((6, 5), dtype_name, seed))
        for dim in (0, 1):
            index = index_for(a, dim, seed + dim)
            src = small_values(tuple(index.shape), dtype_name, seed + 30)
            assert_matches(lambda t, i, s: reftorch.scatter_reduce(
                t, dim, i, s, reduce, include_self=include_self), a, index, src,
                signed_zeros=exact_zeros)
            assert_matches(lambda t, i, s: t.clone().scatter_reduce_(
                dim, i, s.t(), reduce, include_self=include_self), a, index,
                small_values(tuple(index.shape[::-1]), dtype_name, seed + 40),
                signed_zeros=exact_zeros)
    a = small_values((6, 5), dtype_name, 9)
    assert_matches(lambda t, i, s: reftorch.scatter_reduce(t, 0, i, s, reduce,
                                                           include_self=include_self),
                   a, reftorch.zeros((0, 5), dtype=reftorch.int64), a)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_on_large_inputs(device_kind, reduce):
    """Many columns (more than a block) and long columns with heavy repetition, so sums and
    products are long chains in index order; float32 accumulation order matters here."""
    a = small_values((300, 40), "float32", 50)
    index = indices(40, (300, 200), 51)                     # 300 columns of 200 entries
    src = small_values((300, 200), "float32", 52)
    for include_self in (True, False):
        assert_matches(lambda t, i, s: reftorch.scatter_reduce(
            t, 1, i, s, reduce, include_self=include_self), a, index, src,
            signed_zeros=reduce not in ("amax", "amin"))
    tall = small_values((1000, 3), "float64", 53)
    assert_matches(lambda t, i, s: reftorch.scatter_reduce(t, 0, i, s, reduce), tall,
                   indices(7, (1000, 3), 54), small_values((1000, 3), "float64", 55),
                   signed_zeros=reduce not in ("amax", "amin"))


def test_scatter_reduce_amax_propagates_nan(device_kind):
    a = reftorch.tensor([[1.0, np.nan, 3.0], [0.5, 2.0, -1.0]])
    index = reftorch.tensor([[0, 1, 1], [1, 1, 0]])
    src = reftorch.tensor([[np.nan, 5.0, 1.0], [4.0, -2.0, 8.0]])
    for reduce in ("amax", "amin"):
        for include_self in (True, False):
            assert_matches(lambda t, i, s: reftorch.scatter_reduce(
                t, 0, i, s, reduce, include_self=include_self), a, index, src)


def test_kernels_decline_what_they_do_not_handle(device_kind):
    f32 = reftorch.float32
    a, i = sample((3, 2), "float32", 1).cuda(), reftorch.tensor([[0], [1]]).cuda()
    assert X.scatter_value_kernel(None, (a, i, 1.0), (f32,) * 3, {"dim": 0, "reduce": "add"}) \
        is NotImplemented                                   # reduce: scatter_reduce_two_'s
    assert X.scatter_value_kernel(None, (a, i, 1j), (f32,) * 3, {"dim": 0, "reduce": None}) \
        is NotImplemented                                   # complex into float
    ints = a.to(reftorch.int32)
    i32 = reftorch.int32
    for bad in (float("nan"), 2.0**40):
        assert X.scatter_value_kernel(None, (ints, i, bad), (i32,) * 3,
                                      {"dim": 0, "reduce": None}) is NotImplemented
    assert X.scatter_reduce_kernel(None, (a, i.int(), a), (f32,) * 3,
                                   {"dim": 0, "reduce": "sum"}) is NotImplemented  # int32 index
    assert X.scatter_reduce_kernel(None, (a.cpu(), i.cpu(), a.cpu()), (f32,) * 3,
                                   {"dim": 0, "reduce": "sum"}) is NotImplemented


# --- bounds errors ----------------------------------------------------------------------------

BAD = {  # op -> (fn, cpu args whose first bad index by position is neither largest nor least)
    "scatter_value": (lambda a, i: reftorch.scatter(a, 0, i, value=2.0),
                      lambda: (sample((5, 3), "float32", 0),
                               reftorch.tensor([[0, 7, 1], [2, -1, 12]]))),
    "scatter_add_value": (lambda a, i: reftorch.scatter(a, 0, i, value=2.0, reduce="add"),
                          lambda: (sample((5, 3), "float32", 0),
                                   reftorch.tensor([[0, 1, 1], [6, -4, 12]]))),
    "scatter_multiply": (quietly(lambda a, i, s: reftorch.scatter(a, 0, i, s,
                                                                  reduce="multiply")),
                         lambda: (sample((5, 3), "float32", 0),
                                  reftorch.tensor([[0, 1, 1], [6, -4, 12]]),
                                  sample((2, 3), "float32", 1))),
    "scatter_reduce_mean": (lambda a, i, s: reftorch.scatter_reduce(a, 0, i, s, "mean"),
                            lambda: (sample((5, 3), "float32", 0),
                                     reftorch.tensor([[0, 1, 1], [9, -4, 5]]),
                                     sample((2, 3), "float32", 1))),
    "scatter_reduce_exclude_self": (
        lambda a, i, s: reftorch.scatter_reduce(a, 1, i, s, "amax", include_self=False),
        lambda: (sample((2, 4), "float32", 0), reftorch.tensor([[0, 3, 4], [-1, 2, 8]]),
                 sample((2, 3), "float32", 1))),
}


@pytest.mark.parametrize("op", BAD)
def test_bad_index_is_raised_at_the_next_synchronisation(device_kind, op):
    check_error_at_synchronisation(*BAD[op])


@pytest.mark.parametrize("op", BAD)
def test_bad_indices_write_nothing_outside_the_result(device_kind, op):
    fn, make = BAD[op]
    args = make()
    result, raw = _guarded_result(fn, _cuda(args))
    assert (raw[result.numel() * 4:] == 0x5A).all()
