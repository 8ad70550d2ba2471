"""reftorch-cuda's kernels/reduce_more.cu against the cpu reference: logsumexp, prod (floats,
and bool / integers into int64) and the vector norms p = 0 and whole p from 3 to MAX_WHOLE_P.

Launch tests run on a real GPU when there is one and on the emulated driver (see
test_plugin_cuda_kernels). What each comparison holds, in both modes:
  - prod of floats: bit for bit where the rule keeps one thread per output (the kernel
    multiplies in the reference's lane order, over the elements' logical order; few long
    products take the block tree, tested in test_plugin_cuda_reduce_paths);
    bool / integer prods: exact int64, wrapping.
  - norm p = 0: bit for bit (an exact count, rounded once to the dtype as the reference's).
  - logsumexp: the block-order sum of exp against NumPy's pairwise one, CUDA's expf / logf
    (within 2 / 1 ulp; exp / log 1 / 1) against NumPy's (within 3): see
    assert_logsumexp_close. NaN, +-inf rows: exactly the reference's NaN / inf.
  - norm whole p >= 3: repeated products (p - 1 roundings) against NumPy's power (one, within
    a few ulp), both sums' rounding, then the 1/p power (CUDA's powf / pow within 4 / 2 ulp):
    see assert_power_norm_close.
Every test also checks what fell back to the cpu (nothing, or exactly the declined call).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import reftorch
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda.ops_reduce import MAX_WHOLE_P, PROD_FEW_OUTPUTS, PROD_LONG  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_kernels import assert_close, finfo  # noqa: E402
from spec_tests.test_plugin_cuda_reductions import (  # noqa: E402
    INTS, LONG_REDUCE_CASES, REDUCE_CASES, accumulator_eps, assert_same, finite_values,
    _reduced)

# The launch fixtures and value helpers of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, host, reference = base.FLOATS, base.host, base.reference


def all_cases(base_x, long_x):
    """(name, arrange, source, dims, keepdim): REDUCE_CASES on a (6, 5, 300) tensor (layouts,
    keepdim, 0-dim, empty) and LONG_REDUCE_CASES on a (2, 3, 20000) one (more than CHUNK
    elements per output: the chunked launches)."""
    cases = [(case, arrange, base_x, dims, keepdim)
             for case, (arrange, dims, keepdim) in REDUCE_CASES.items()]
    cases += [(f"long {case}", arrange, long_x, dims, False)
              for case, (arrange, dims) in LONG_REDUCE_CASES.items()]
    return cases


def sum_steps(n):
    """The additions in sequence of either order (the kernel: n / 256 per thread and an 8-level
    tree; NumPy: pairwise, log2(n) levels): each sum is within steps eps of its exact value
    (relative to the sum of the magnitudes)."""
    return n / 256 + 8 + np.log2(n + 1) + 1


# --- logsumexp --------------------------------------------------------------------------------

def assert_logsumexp_close(got, expected, x, dims, err_msg):
    """Both sides compute log(S) + m with m the row's largest element and S the sum of
    exp(x - m) >= 1 (all terms positive). Each S is within (steps + 3) eps of the exact one
    relative (its sum's bound, and exp within 3 ulp on either side), so the logs differ by
    at most 2 (steps + 3) eps absolutely; log's rounding (1-3 ulp of |log S| <= |e| + |m|)
    and the addition add 4 eps (|e| + |m|); a 16-bit output then rounds (1 ulp each side)."""
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    a, axes, n = _reduced(x, dims)
    largest = np.max(a, axis=axes).reshape(e.shape) if a.size else np.zeros(e.shape)
    eps = accumulator_eps(got.dtype.name)
    allowed = 2 * (sum_steps(n) + 3) * eps + 4 * eps * (np.abs(e) + np.abs(largest))
    allowed = allowed + 2 * float(finfo(got.dtype.name).eps) * np.abs(e)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    infinite = np.isinf(e)
    np.testing.assert_array_equal(g[infinite], e[infinite], err_msg=err_msg)
    finite = np.isfinite(e)
    assert np.all(np.abs(g - e)[finite] <= allowed[finite]), (
        err_msg, np.max((np.abs(g - e) / allowed)[finite]))


def logsumexp(x, dims, keepdim):
    return reftorch.logsumexp(x, () if dims is None else dims, keepdim)


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_logsumexp_matches_the_cpu_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for case, arrange, source, dims, keepdim in all_cases(
            finite_values((6, 5, 300), dtype_name, 51),
            finite_values((2, 3, 20000), dtype_name, 52)):
        x = arrange(source)
        expected = reference(logsumexp, x, dims, keepdim)
        got = logsumexp(arrange(source.cuda()), dims, keepdim)
        assert_logsumexp_close(got, expected, x, dims, case)
    if device_kind is not None:
        assert any(k.startswith("logsumexp_chunks_kernel") for k in device_kind.launches)
    assert plugins.fallbacks() == {}


# rows that exercise the reference's shift rule (each also appended to a long row)
LOGSUMEXP_ROWS = {
    "nan": [1.0, float("nan"), 2.0, float("inf")],
    "plus_inf": [1.0, float("inf"), -3.0, float("-inf")],
    "all_minus_inf": [float("-inf")] * 4,
    "one_minus_inf": [1.0, float("-inf"), 2.0, 0.5],
    "huge": [1e30, 1e30 - 1e24, -1e30, 3.0],
    "tiny": [-1e30, -1e30, -1e30, -1e30],
}


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_logsumexp_rows_of_nan_and_infinities(device_kind, dtype_name):
    """A NaN row gives NaN, a row with +inf gives inf, a row of -inf gives -inf (shift 0 for a
    shift that is not finite), as the reference; short rows in one launch, long ones (the
    same values then 20000 finite ones) through the chunked shift."""
    dtype = getattr(reftorch, dtype_name)
    rows = np.array(list(LOGSUMEXP_ROWS.values()))
    filler = np.random.default_rng(53).standard_normal((len(rows), 20000))
    filler[2] = -np.inf   # the all -inf row stays all -inf
    plugins.reset_fallbacks()
    for case, array in (("short", rows), ("long", np.concatenate([rows, filler], 1))):
        x = reftorch.tensor(array, dtype=dtype)
        expected = reference(lambda t: reftorch.logsumexp(t, 1), x)
        got = reftorch.logsumexp(x.cuda(), 1)
        assert_logsumexp_close(got, expected, x, (1,), case)
        e = host(expected)
        assert np.isnan(e[0]) and e[1] == np.inf and e[2] == -np.inf, case   # the rules hold
    assert plugins.fallbacks() == {}


def test_logsumexp_of_empty_tensors_and_another_dtype(device_kind):
    """An empty reduction is log(0) = -inf (the kernel's shift rule gives it, as the
    reference); an empty result launches nothing; an integer input (a float result) declines."""
    x = finite_values((4, 0, 3), "float32", 54)
    plugins.reset_fallbacks()
    for dims in ((1,), (0, 1), (2,)):
        expected = reference(lambda t: reftorch.logsumexp(t, dims), x)
        assert_close(reftorch.logsumexp(x.cuda(), dims), expected, False, err_msg=str(dims))
    assert plugins.fallbacks() == {}
    ints = reftorch.tensor(np.arange(12).reshape(3, 4))
    got = reftorch.logsumexp(ints.cuda(), 1)
    np.testing.assert_array_equal(host(got), host(reference(
        lambda t: reftorch.logsumexp(t, 1), ints)))
    assert plugins.fallbacks() == {("logsumexp", "cuda", reftorch.int64): 1}


# --- prod -------------------------------------------------------------------------------------

def near_one(shape, dtype_name, seed):
    """Values close to 1, so that long products neither overflow nor underflow and their
    rounding depends on the order (0.02 steps of 1.0 give different bits in another order)."""
    rng = np.random.default_rng(seed)
    return reftorch.tensor((1 + rng.standard_normal(shape) * 0.02).astype(np.float32)).to(
        getattr(reftorch, dtype_name))


def prod(x, dims, keepdim):
    if dims is None:
        return x.prod()
    return x.prod(dims[0], keepdim=keepdim)


# (layout of a (6, 5, 60) tensor, dims (None or one dim), keepdim): 1800 elements, so the
# products over every dim are at most PROD_LONG long (one thread, the reference's order)
PROD_CASES = {
    "all": (lambda x: x, None, False),
    "all_transposed": (lambda x: x.transpose(0, 2), None, False),   # a dense copy first
    "all_permuted": (lambda x: x.permute(1, 2, 0), None, False),
    "all_strided": (lambda x: x[::2, 1:, ::3], None, False),
    "all_broadcast": (lambda x: x[:, :1].expand(6, 5, x.shape[2]), None, False),  # stride 0 inner
    "last_dim": (lambda x: x, (2,), False),
    "first_dim_keepdim": (lambda x: x, (0,), True),
    "middle_dim": (lambda x: x, (1,), False),
    "transposed_dim": (lambda x: x.transpose(0, 2), (0,), False),
    "broadcast_dim": (lambda x: x[:, :1].expand(6, 5, x.shape[2]), (1,), True),
    "zero_dim": (lambda x: x[1, 2, 3], None, False),
    "zero_dim_dim0": (lambda x: x[1, 2, 3], (0,), True),
    "empty_reduced": (lambda x: x[:, :0], (1,), False),   # the empty product: 1
    "empty_kept": (lambda x: x[:0], (2,), False),
    "empty_all": (lambda x: x[:0], None, False),
}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_float_prod_is_bit_equal_to_the_reference(device_kind, dtype_name):
    """Every layout, over every dim and over one, 0-dim, empty: the reference's bits on the
    emulator and on a GPU. Also more outputs than one block of threads, and long products
    with PROD_FEW_OUTPUTS outputs (one thread each still). Fewer long products take the block
    tree: test_plugin_cuda_reduce_paths."""
    base_x = near_one((6, 5, 60), dtype_name, 55)
    assert base_x.numel() <= PROD_LONG
    cases = [(case, arrange, base_x, dims, keepdim)
             for case, (arrange, dims, keepdim) in PROD_CASES.items()]
    long_x = near_one((3, 20000), dtype_name, 56)
    wide_x = near_one((PROD_FEW_OUTPUTS, 2100), dtype_name, 56)
    cases += [("many outputs", lambda x: x, long_x, (0,), False),
              ("long products, many outputs", lambda x: x, wide_x, (1,), False),
              ("long columns, many outputs", lambda x: x.t(), wide_x, (0,), False)]
    plugins.reset_fallbacks()
    for case, arrange, source, dims, keepdim in cases:
        expected = reference(prod, arrange(source), dims, keepdim)
        assert_close(prod(arrange(source.cuda()), dims, keepdim), expected, False,
                     err_msg=case)
    assert plugins.fallbacks() == {}


def test_prod_over_every_dim_takes_the_logical_order():
    """The premise of the all-dims cases: the reference multiplies the elements in their
    logical (C) order, whatever the layout, so a permuted input must be reduced in that order
    (the host copies it dense first), and its memory order would give other bits (the test
    would not tell them apart otherwise)."""
    from reftorch._ops.reduction import _lane_product
    x = near_one((6, 5, 300), "float32", 57).permute(1, 2, 0)
    logical = _lane_product(np.ascontiguousarray(x._np), None)
    in_memory = _lane_product(x._np.transpose(2, 0, 1), None)   # the (6, 5, 300) base's order
    expected = host(reference(lambda t: t.prod(), x))
    assert logical == expected and in_memory != expected


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_prod_of_special_values(device_kind, dtype_name):
    """NaN, +-inf, signed zeros, 0 * inf: IEEE products in order, as the reference's."""
    rows = np.array([[2.0, float("nan"), 0.5, 1.0], [float("inf"), 0.0, 1.0, 2.0],
                     [-0.0, 3.0, 1.0, 1.0], [float("-inf"), -2.0, 1.0, 0.5],
                     [1e30, 1e30, 1e-30, 1e-30], [-1.0, -0.0, -1.0, 1.0]])
    x = reftorch.tensor(rows, dtype=getattr(reftorch, dtype_name))
    plugins.reset_fallbacks()
    for fn in (lambda t: t.prod(1), lambda t: t.t().prod(0, keepdim=True),
               lambda t: t[4:].prod()):
        assert_close(fn(x.cuda()), reference(fn, x), False)
    assert plugins.fallbacks() == {}


def odd_values(shape, dtype_name, seed):
    """Odd integers (and bool): their int64 products never become 0, so wrapping shows."""
    rng = np.random.default_rng(seed)
    if dtype_name == "bool":
        return reftorch.tensor(rng.random(shape) < 0.9)
    dtype = getattr(reftorch, dtype_name)
    low = 0 if dtype_name == "uint8" else -60
    return reftorch.tensor((rng.integers(low, 60, shape) * 2 + 1).astype(dtype.numpy_dtype))


@pytest.mark.parametrize("dtype_name", INTS)
def test_integer_prod_is_exact_int64(device_kind, dtype_name):
    base_x = odd_values((6, 5, 300), dtype_name, 58)
    long_x = odd_values((2, 3, 20000), dtype_name, 59)
    plugins.reset_fallbacks()
    for case, (arrange, dims, keepdim) in PROD_CASES.items():
        expected = reference(prod, arrange(base_x), dims, keepdim)
        assert_same(prod(arrange(base_x.cuda()), dims, keepdim), expected, case)
    for case, dims in (("long all", None), ("long dim", (2,))):
        expected = reference(prod, long_x, dims, False)
        assert_same(prod(long_x.cuda(), dims, False), expected, case)
    assert plugins.fallbacks() == {}


def test_prod_with_another_dtype_declines(device_kind):
    x = near_one((4, 5), "float32", 60)
    ints = odd_values((4, 5), "int32", 61)
    plugins.reset_fallbacks()
    for t, dtype in ((x, reftorch.float64), (ints, reftorch.int32)):
        got = t.cuda().prod(1, dtype=dtype)
        expected = reference(lambda v: v.prod(1, dtype=dtype), t)
        np.testing.assert_array_equal(host(got), host(expected))
    assert plugins.fallbacks() == {("prod", "cuda", reftorch.float32): 1,
                                   ("prod", "cuda", reftorch.int32): 1}


# --- norm p = 0 and whole p >= 3 ---------------------------------------------------------------

POWER_NORMS = [0, 3, 4, 8]


def assert_power_norm_close(got, expected, x, dims, p, err_msg):
    """p = 0: bit for bit. Whole p >= 3: each term |x|^p within (p - 1) / 2 + 4 ulp of the
    reference's (p - 1 roundings against one power within 4 ulp), each sum within its steps
    of the exact one (all terms positive), so the sums S differ by (2 steps + p / 2 + 4) eps
    relative; S^(1/p) divides that by p, and the two roots' own errors (4 ulp each) and the
    output's rounding add on top."""
    if p == 0:
        assert_close(got, expected, False, err_msg=err_msg)
        return
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    n = _reduced(x, dims)[2]
    eps = accumulator_eps(got.dtype.name)
    relative = (2 * sum_steps(n) + p / 2 + 4) / p * eps + 8 * eps
    allowed = (relative + 2 * float(finfo(got.dtype.name).eps)) * np.abs(e)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    np.testing.assert_array_equal(g[np.isinf(e)], e[np.isinf(e)], err_msg=err_msg)
    finite = np.isfinite(e)
    assert np.all(np.abs(g - e)[finite] <= allowed[finite]), (
        err_msg, np.max((np.abs(g - e) / np.maximum(allowed, 1e-300))[finite]))


@pytest.mark.parametrize("p", POWER_NORMS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_power_norms_match_the_cpu_reference(device_kind, dtype_name, p):
    base_x = finite_values((6, 5, 300), dtype_name, 62)
    base_x[:, :, ::7] = 0.0   # zeros for the count (and -0.0: also not counted)
    base_x[:, :, 3::11] = -0.0
    long_x = finite_values((2, 3, 20000), dtype_name, 63)
    long_x[:, :, ::5] = 0.0

    def fn(x, dims, keepdim):
        return reftorch.linalg.vector_norm(x, p, dims, keepdim)
    plugins.reset_fallbacks()
    for case, arrange, source, dims, keepdim in all_cases(base_x, long_x):
        x = arrange(source)
        expected = reference(fn, x, dims, keepdim)
        got = fn(arrange(source.cuda()), dims, keepdim)
        assert_power_norm_close(got, expected, x, dims, p, case)
    if device_kind is not None:
        assert any(k.startswith("norm_power_chunks_kernel") for k in device_kind.launches)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_nonzero_counts_round_as_the_reference(device_kind, dtype_name):
    """A count above the 16-bit types' exact integers (2049 and up for float16, 257 for
    bfloat16) rounds once, from float, as the reference's int64 -> float32 -> 16-bit cast."""
    x = finite_values((3, 6001), dtype_name, 64)
    x[1, :2] = 0.0
    x[2, ::2] = 0.0
    plugins.reset_fallbacks()
    for fn in (lambda t: t.norm(0, 1), lambda t: t.norm(0)):
        expected = reference(fn, x)
        assert_close(fn(x.cuda()), expected, False)
    assert plugins.fallbacks() == {}


def test_power_norms_of_nan_inf_and_declined_p(device_kind):
    """NaN and inf count as nonzeros (p = 0); p = 3 propagates NaN and inf; a fractional,
    negative or larger whole p declines, each once."""
    x = finite_values((4, 600), "float32", 65)
    x[1, 377] = float("nan")
    x[2, 5] = float("-inf")
    x[3, :] = 0.0
    plugins.reset_fallbacks()
    for order in (0, 3, 5):
        got, expected = x.cuda().norm(order, 1), reference(lambda t: t.norm(order, 1), x)
        assert_power_norm_close(got, expected, x, (1,), order, f"p = {order}")
    assert plugins.fallbacks() == {}
    for order in (2.5, -1, MAX_WHOLE_P + 1, 0.5):
        got = x.cuda().norm(order, 1)
        np.testing.assert_array_equal(host(got), host(reference(lambda t: t.norm(order, 1), x)))
    assert plugins.fallbacks() == {("norm", "cuda", reftorch.float32): 4}

