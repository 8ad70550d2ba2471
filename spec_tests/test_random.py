"""Random sampling against real PyTorch: the same seed must give the same numbers.

Exact-equality tables over seeds x sizes x dtypes for every sampler that PyTorch derives
from uniform draws; for the samplers whose last bits depend on PyTorch's math library
(float64 log1p/tan, float16/bfloat16 Box-Muller) the documented bound in
units in the last place, and the share of bit-identical values. Then statistics, generator
state (exchanged with PyTorch in both directions), independence, errors and autograd.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import reftorch
from reftorch._ops.sampling import shuffle_by_swaps

torch = pytest.importorskip("torch")

SEEDS = (0, 1, 2024)
SIZES = (1, 15, 16, 17, 1000, 100003)
FLOATS = ("float32", "float64", "float16", "bfloat16")


def _same_seed(fn, seed):
    """fn(module) under manual_seed(seed) for PyTorch and reftorch, as NumPy arrays."""
    torch.manual_seed(seed)
    reftorch.manual_seed(seed)
    expected, actual = fn(torch), fn(reftorch)
    return _host(expected), _host(actual)


def _host(t):
    if isinstance(t, torch.Tensor):
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    if t.dtype is reftorch.bfloat16:
        t = t.float()
    return t.numpy()


def assert_identical(fn, seed):
    expected, actual = _same_seed(fn, seed)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    both_nan = np.isnan(expected) & np.isnan(actual) if expected.dtype.kind == "f" else False
    mismatched = np.flatnonzero(~((expected == actual) | both_nan))
    assert mismatched.size == 0, (
        f"{mismatched.size} of {expected.size} values differ, first at {mismatched[0]}: "
        f"{expected.flat[mismatched[0]]!r} vs {actual.flat[mismatched[0]]!r}")


def ulp_distance(expected, actual):
    """Units in the last place between two float arrays of the same dtype."""
    signed = {2: np.int16, 4: np.int32, 8: np.int64}[expected.dtype.itemsize]

    def ordered(a):
        bits = a.view(signed).astype(np.int64)
        return np.where(bits < 0, np.iinfo(signed).min - bits, bits)
    return np.abs(ordered(expected) - ordered(actual))


def assert_close_in_ulp(fn, seed, max_ulp, min_identical):
    expected, actual = _same_seed(fn, seed)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    distance = ulp_distance(expected, actual)
    assert distance.max() <= max_ulp, f"{distance.max()} ulp apart"
    assert (distance == 0).mean() >= min_identical


# --- bit-identical streams ----------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_rand(seed, n, dtype):
    assert_identical(lambda m: m.rand(n, dtype=getattr(m, dtype)), seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
def test_randn_float64(seed, n):
    # float64 Box-Muller calls the C library's log1p (under 16 elements) or log, sin and cos
    # (16 and more); reftorch calls the same functions, so the bits are PyTorch's even where
    # the library's result is not the nearest float64.
    assert_identical(lambda m: m.randn(n, dtype=m.float64), seed)


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":")[1].split() for line in f if line.startswith("flags")),
                        [])
    except OSError:
        return []


# reftorch specifies the float32 16-block normal kernel PyTorch runs on x86-64 with AVX2 and FMA
needs_avx2_oracle = pytest.mark.skipif(
    not {"avx2", "fma"} <= set(_cpu_flags()),
    reason="PyTorch's float32 normal kernel differs on CPUs without AVX2/FMA")


@needs_avx2_oracle
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("mean_std", [(0, 1), (1.5, 0.3), (-2, 7)])
def test_normal_float32(seed, n, mean_std):
    # under 16 elements the float64 one-at-a-time path; from 16 the Cephes float32 kernel
    assert_identical(lambda m: m.empty(n).normal_(*mean_std), seed)
    assert_identical(lambda m: m.randn(n, dtype=m.float32), seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_randn_half_precision(seed, n, dtype):
    # float16/bfloat16 16-blocks: a few values per 100,000 are 1 ulp of the dtype apart
    # (calling the C library's float32 logf/cosf/sinf instead does not remove them; the cause
    # is not known yet).
    if n < 16:
        assert_identical(lambda m: m.randn(n, dtype=getattr(m, dtype)), seed)
    else:
        assert_close_in_ulp(lambda m: m.randn(n, dtype=getattr(m, dtype)), seed,
                            max_ulp=1, min_identical=0.99)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ("int64", "int32", "int16", "uint8", "float32", "float64"))
def test_randint(seed, n, dtype):
    assert_identical(lambda m: m.randint(-3 if dtype != "uint8" else 0, 100, (n,),
                                         dtype=getattr(m, dtype)), seed)


@pytest.mark.parametrize("low,high", [(0, 2), (-(2 ** 40), 2 ** 40), (0, 2 ** 32 + 5),
                                      (-(2 ** 63), 2 ** 63 - 1)])
def test_randint_wide_ranges_use_64_bit_draws(low, high):
    assert_identical(lambda m: m.randint(low, high, (1000,)), 5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
def test_randperm(seed, n):
    assert_identical(lambda m: m.randperm(n), seed)


@pytest.mark.parametrize("dtype", ("float32", "float64", "int32"))
def test_randperm_dtypes(dtype):
    assert_identical(lambda m: m.randperm(300, dtype=getattr(m, dtype)), 9)


ALL_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
              "uint8", "bool")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("bounds", [(), (2,), (3, 7), (-5, 5)], ids=str)
def test_random_(dtype, bounds):
    if dtype == "bool" and bounds and bounds != (2,):
        bounds = (0, 2)
    if dtype == "uint8" and bounds == (-5, 5):
        bounds = (0, 5)
    assert_identical(lambda m: m.empty(1003, dtype=getattr(m, dtype)).random_(*bounds), 7)


@pytest.mark.parametrize("dtype", ("int64", "int32", "float32", "float64", "uint8"))
def test_random_from_only(dtype):
    assert_identical(lambda m: m.empty(500, dtype=getattr(m, dtype)).random_(3, None), 8)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bounds", [(0, 1), (-2.3, 5.1), (-1e-3, 1e-3)], ids=str)
def test_uniform_(dtype, bounds):
    # PyTorch computes fma(u, to - from, from): one rounding (checked in float64 too)
    assert_identical(lambda m: m.empty(4003, dtype=getattr(m, dtype)).uniform_(*bounds), 3)


@pytest.mark.parametrize("layout", ["transposed", "strided", "permuted"])
def test_samplers_fill_non_contiguous_tensors_in_memory_order(layout):
    def view(m):
        base = m.empty(6, 40, 30, dtype=m.float64)
        return {"transposed": base[0].t(), "strided": base[::2, 1::3, ::2],
                "permuted": base.permute(2, 0, 1)}[layout]
    assert_identical(lambda m: view(m).uniform_(), 4)
    assert_identical(lambda m: view(m).random_(0, 1000), 4)
    # non-contiguous: the one-at-a-time normal path (log1p, see test_randn_float64)
    assert_identical(lambda m: view(m).normal_(), 4)


@pytest.mark.parametrize("self_dtype", ("float32", "float64", "int64", "bool"))
def test_bernoulli_scalar_p(self_dtype):
    assert_identical(lambda m: m.empty(2000, dtype=getattr(m, self_dtype)).bernoulli_(0.3), 11)


@pytest.mark.parametrize("p_dtype", ("float32", "float64", "float16"))
@pytest.mark.parametrize("self_dtype", ("float32", "float64", "int64"))
def test_bernoulli_tensor_p(p_dtype, self_dtype):
    # float64 probabilities meet float64 uniforms; others float32 ones
    assert_identical(lambda m: m.empty(3, 500, dtype=getattr(m, self_dtype)).bernoulli_(
        m.linspace(0, 1, 500, dtype=getattr(m, p_dtype))), 11)
    assert_identical(lambda m: m.bernoulli(m.linspace(0, 1, 500, dtype=getattr(m, p_dtype))),
                     12)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("method,args", [("exponential_", (1.7,)), ("cauchy_", (0.5, 2.0)),
                                         ("log_normal_", (0.5, 0.7)), ("geometric_", (0.2,))],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_float64_derived_samplers(method, args, dtype, n, seed):
    # computed in float64 through the C library's log1p, tan, log and exp (whose results are
    # not always the nearest float64: about 6% of exponential_'s log1p values here), which
    # reftorch calls too, then rounded to the dtype; log_normal_ uses the one-at-a-time
    # normals with their cached second value
    assert_identical(lambda m: getattr(m.empty(n, dtype=getattr(m, dtype)), method)(*args),
                     seed)


@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("replacement", (False, True))
@pytest.mark.parametrize("num_samples", (1, 7))
def test_multinomial(dtype, replacement, num_samples):
    weights = np.random.default_rng(0).random((4, 30)) * (np.arange(30) % 5 != 0)

    def draw(m):
        w = m.tensor(weights, dtype=getattr(m, dtype))
        return m.cat([m.multinomial(w, num_samples, replacement).flatten(),
                      m.multinomial(w[0], num_samples, replacement)])
    assert_identical(draw, 6)


def test_multinomial_with_replacement_many_samples():
    w = np.random.default_rng(1).random(1000)
    assert_identical(lambda m: m.multinomial(m.tensor(w), 5000, True), 3)


@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_normal_overloads(dtype):
    def draws(m):
        dt = getattr(m, dtype)
        mean, std = m.arange(100, dtype=dt), m.arange(100, dtype=dt) / 10
        return m.cat([m.normal(mean, std), m.normal(mean[:10], 2.0), m.normal(2.0, std[:10]),
                      m.normal(2.0, 3.0, (10,), dtype=dt), m.normal(mean[:5], std[:5])])
    if dtype == "float64" or {"avx2", "fma"} <= set(_cpu_flags()):
        assert_identical(draws, 4)
    else:
        expected, actual = _same_seed(draws, 4)
        np.testing.assert_allclose(actual, expected, rtol=4e-7, atol=4e-6)


def test_normal_scalar_path_caches_the_second_value():
    # three one-at-a-time calls share pairs: the 3rd value of the first call's pair feeds
    # the next call, in PyTorch's state too
    def draws(m):
        return m.cat([m.randn(3, dtype=m.float64), m.randn(1, dtype=m.float64),
                      m.randn(2, dtype=m.float64)])
    assert_identical(draws, 0)
    torch.manual_seed(0)
    reftorch.manual_seed(0)
    torch.randn(3, dtype=torch.float64)
    reftorch.randn(3, dtype=reftorch.float64)
    assert np.array_equal(torch.get_rng_state().numpy()[:-40],
                          reftorch.get_rng_state().numpy()[:-40])


def test_complex_samplers():
    expected, actual = _same_seed(lambda m: m.rand(4, 6, dtype=m.complex64), 1)
    assert np.array_equal(expected, actual)
    assert_identical(lambda m: m.randn(5, dtype=m.complex128), 1)


# --- generator state ----------------------------------------------------------------------

def test_default_seed_and_state_layout():
    assert reftorch.Generator().initial_seed() == torch.Generator().initial_seed()
    torch.manual_seed(123)
    reftorch.manual_seed(123)
    assert np.array_equal(torch.get_rng_state().numpy(), reftorch.get_rng_state().numpy())
    torch.rand(700)
    reftorch.rand(700)
    torch.randn(5, dtype=torch.float64)        # leaves a cached normal in the state
    reftorch.randn(5, dtype=reftorch.float64)
    expected, actual = torch.get_rng_state().numpy(), reftorch.get_rng_state().numpy()
    assert actual.dtype == np.uint8 and actual.size == 5056
    assert np.array_equal(expected[:-40], actual[:-40])
    assert expected[-40:].view(np.float64)[1] == pytest.approx(actual[-40:].view(np.float64)[1],
                                                               rel=3e-16)


def test_states_exchange_with_pytorch_both_ways():
    torch.manual_seed(77)
    torch.rand(1234)
    state = torch.get_rng_state()
    reftorch.set_rng_state(reftorch.tensor(state.numpy()))
    assert np.array_equal(torch.rand(100).numpy(), reftorch.rand(100).numpy())
    reftorch.manual_seed(78)
    reftorch.randint(0, 10, (999,))
    torch.set_rng_state(torch.from_numpy(reftorch.get_rng_state().numpy()))
    assert np.array_equal(torch.randperm(50).numpy(), reftorch.randperm(50).numpy())


def test_save_and_restore_reproduces_the_stream():
    g = reftorch.Generator().manual_seed(5)
    g_state = g.get_state()
    first = reftorch.randn(40, generator=g)
    g.set_state(g_state)
    assert reftorch.equal(first, reftorch.randn(40, generator=g))
    with reftorch.random.fork_rng():
        inside = reftorch.rand(10)
    assert reftorch.equal(inside, reftorch.rand(10))


def test_generators_are_independent():
    a, b = reftorch.Generator().manual_seed(1), reftorch.Generator().manual_seed(1)
    reftorch.manual_seed(2)
    first = reftorch.rand(5, generator=a)
    reftorch.rand(100)                     # the default generator moves; b does not
    assert reftorch.equal(first, reftorch.rand(5, generator=b))
    torch_generator = torch.Generator().manual_seed(1)
    assert np.array_equal(torch.rand(5, generator=torch_generator).numpy(), first.numpy())


def test_seed_values_like_pytorch():
    for seed in (-1, 2 ** 64 - 1, 2 ** 32 + 7, 3):
        torch.manual_seed(seed)
        reftorch.manual_seed(seed)
        assert reftorch.initial_seed() == torch.initial_seed()
        assert np.array_equal(torch.rand(3).numpy(), reftorch.rand(3).numpy())
    with pytest.raises(ValueError):
        reftorch.manual_seed(2 ** 64)
    assert isinstance(reftorch.seed(), int)


def test_bad_states_raise_like_pytorch():
    with pytest.raises(RuntimeError, match="5056"):
        reftorch.set_rng_state(reftorch.zeros(10, dtype=reftorch.uint8))
    with pytest.raises(TypeError):
        reftorch.set_rng_state(reftorch.zeros(5056))
    with pytest.raises(TypeError):
        reftorch.set_rng_state([1, 2])


# --- randperm's vectorized shuffle equals the swaps it replaces ----------------------------

def _swap_loop(targets):
    a = np.arange(targets.size)
    for i, j in enumerate(targets):
        a[i], a[j] = a[j], a[i]
    return a


@pytest.mark.parametrize("n", [1, 2, 3, 10, 257])
def test_shuffle_by_swaps_equals_the_loop(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        targets = np.arange(n) + (rng.integers(0, 2 ** 32, n) % np.arange(n, 0, -1))
        assert np.array_equal(shuffle_by_swaps(targets), _swap_loop(targets))


# --- statistics ---------------------------------------------------------------------------

def _ks_statistic(samples, cdf):
    x = np.sort(samples)
    n = x.size
    f = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


_KS_LIMIT = 1.95 / math.sqrt(20000)   # about the 0.1% critical value


@pytest.mark.parametrize("name,sample,cdf", [
    ("uniform", lambda g: reftorch.empty(20000, dtype=reftorch.float64).uniform_(-1, 3,
                                                                                 generator=g),
     lambda x: (x + 1) / 4),
    ("normal", lambda g: reftorch.empty(20000, dtype=reftorch.float64).normal_(1, 2,
                                                                               generator=g),
     lambda x: 0.5 * (1 + np.vectorize(math.erf)((x - 1) / (2 * math.sqrt(2))))),
    ("exponential", lambda g: reftorch.empty(20000, dtype=reftorch.float64).exponential_(
        3, generator=g), lambda x: 1 - np.exp(-3 * x)),
    ("cauchy", lambda g: reftorch.empty(20000, dtype=reftorch.float64).cauchy_(
        1, 0.5, generator=g), lambda x: 0.5 + np.arctan((x - 1) / 0.5) / math.pi),
    ("log_normal", lambda g: reftorch.empty(20000, dtype=reftorch.float64).log_normal_(
        0, 0.5, generator=g),
     lambda x: 0.5 * (1 + np.vectorize(math.erf)(np.log(x) / (0.5 * math.sqrt(2))))),
])
def test_distribution_shapes(name, sample, cdf):
    values = sample(reftorch.Generator().manual_seed(99)).numpy()
    assert _ks_statistic(values, cdf) < _KS_LIMIT


def test_discrete_distribution_moments():
    g = reftorch.Generator().manual_seed(3)
    geometric = reftorch.empty(20000, dtype=reftorch.float64).geometric_(0.25, generator=g)
    assert geometric.min().item() >= 1
    assert abs(geometric.mean().item() - 4) < 0.1                     # mean 1/p
    bernoulli = reftorch.empty(20000).bernoulli_(0.3, generator=g)
    assert abs(bernoulli.mean().item() - 0.3) < 0.015
    ints = reftorch.randint(3, 10, (20000,), generator=g).numpy()
    counts = np.bincount(ints, minlength=10)[3:]
    assert ints.min() == 3 and ints.max() == 9 and counts.min() > 2500
    perm = reftorch.randperm(1000, generator=g).numpy()
    assert np.array_equal(np.sort(perm), np.arange(1000))
    weights = reftorch.tensor([1.0, 0.0, 3.0])
    picks = reftorch.multinomial(weights, 20000, True, generator=g).numpy()
    assert not (picks == 1).any() and abs((picks == 2).mean() - 0.75) < 0.015
    assert sorted(reftorch.multinomial(weights, 2, generator=g).tolist()) == [0, 2]


# --- errors and autograd ------------------------------------------------------------------

ERRORS = [
    lambda m: m.empty(3, dtype=m.int64).uniform_(),
    lambda m: m.empty(3).uniform_(2, 1),
    lambda m: m.empty(3).normal_(0, -1),
    lambda m: m.empty(3, dtype=m.int32).normal_(),
    lambda m: m.empty(3).bernoulli_(1.5),
    lambda m: m.empty(3).geometric_(0),
    lambda m: m.empty(3).exponential_(-1),
    lambda m: m.empty(3).random_(5, 5),
    lambda m: m.empty(3, dtype=m.uint8).random_(0, 300),
    lambda m: m.multinomial(m.tensor([1.0, -1.0]), 1),
    lambda m: m.multinomial(m.tensor([1.0, 2.0]), 3),
    lambda m: m.multinomial(m.zeros(2, 2, 2), 1),
    lambda m: m.randperm(-1),
    lambda m: m.randint(5, 5, (3,)),
    lambda m: m.normal(m.zeros(3), m.tensor([1.0, -1.0, 1.0])),
    lambda m: m.rand(3, dtype=m.int64),
    lambda m: m.empty(3).expand(2, 3).uniform_(),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_bad_arguments_raise_like_pytorch(index):
    with pytest.raises(Exception) as expected:
        ERRORS[index](torch)
    with pytest.raises(Exception) as actual:
        ERRORS[index](reftorch)
    assert type(actual.value) is type(expected.value), (expected.value, actual.value)


def test_in_place_samplers_in_autograd_graphs():
    for m in (torch, reftorch):
        x = m.ones(4, requires_grad=True)
        with pytest.raises(RuntimeError):
            x.uniform_()
    names = []
    for m in (torch, reftorch):
        x = m.ones(4, requires_grad=True)
        nodes = []
        for method, args in (("uniform_", ()), ("normal_", ()), ("random_", ()),
                             ("random_", (5,)), ("random_", (1, 5)), ("bernoulli_", (0.5,)),
                             ("bernoulli_", (m.full((4,), 0.5),)), ("exponential_", ()),
                             ("geometric_", (0.5,)), ("cauchy_", ()), ("log_normal_", ())):
            y = x * 2
            getattr(y, method)(*args)
            nodes.append(y.grad_fn.name())
            y.sum().backward()
            assert x.grad.abs().sum().item() == 0   # the old values got no gradient
            x.grad = None
        names.append(nodes)
    assert names[0] == names[1]


def test_normal_with_tensor_parameters_gets_zero_gradients_like_pytorch():
    grads = []
    for m in (torch, reftorch):
        m.manual_seed(0)
        mean = m.arange(20, dtype=m.float64).requires_grad_()
        std = (m.arange(20, dtype=m.float64) / 10 + 1).requires_grad_()
        sample = m.normal(mean, std)
        assert sample.grad_fn.name() == "NormalBackward3"
        sample.sum().backward()
        grads.append((mean.grad.numpy(), std.grad.numpy()))
    np.testing.assert_array_equal(grads[1][0], grads[0][0])
    np.testing.assert_array_equal(grads[1][1], grads[0][1])


def test_checkpoint_replays_the_random_draws():
    from reftorch.utils.checkpoint import checkpoint

    def noisy(x):
        return x * (reftorch.rand(x.shape) > 0.5) * reftorch.randn(x.shape)

    grads = []
    for use_checkpoint in (False, True):
        reftorch.manual_seed(0)
        x = reftorch.ones(50, requires_grad=True)
        y = checkpoint(noisy, x, use_reentrant=True) if use_checkpoint else noisy(x)
        y.sum().backward()
        grads.append(x.grad.numpy())
    assert np.array_equal(grads[0], grads[1]) and grads[0].any()
