"""The plugin's sampler kernels (plugin_cpu: reftorch_cpu.random over src/random.c): with the
plugin serving rand/uniform_, randn/normal_, randint/random_ and bernoulli_, the same seed
still gives PyTorch's numbers bit for bit, calls served by the plugin and by the reference
continue one stream (PyTorch's: the same 5056-byte state afterwards), generator objects work,
and the results depend on neither the thread count, the instruction set, nor how the words
are drawn. The C entry points reject bad arguments with Python exceptions.

Comparisons with the reference run the same code twice from one seed: once with the plugin,
once inside `reftorch.plugins.use_reference_kernels()`. `_random.calls()` tells whether the C
code really ran.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

import reftorch

try:
    import reftorch_cpu
    from reftorch_cpu import _random
    from reftorch_cpu import random as plugin_random
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

torch = pytest.importorskip("torch")

SEEDS = (0, 1, 2024)
SIZES = (1, 15, 16, 17, 1000, 100003, 1_000_000)
FLOATS = ("float32", "float64", "float16", "bfloat16")
INTEGERS = ("int64", "int32", "int16", "int8", "uint8", "bool")


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":")[1].split() for line in f if line.startswith("flags")),
                        [])
    except OSError:
        return []


# PyTorch's float32 normal kernel is the Cephes AVX2 one only on x86-64 CPUs with AVX2 and FMA
needs_avx2_oracle = pytest.mark.skipif(
    not {"avx2", "fma"} <= set(_cpu_flags()),
    reason="PyTorch's float32 normal kernel differs on CPUs without AVX2/FMA")


# ---------------------------------------------------------------------------------------------
# Helpers

def host(t):
    """A tensor of either library as a NumPy array (bfloat16 as its bits)."""
    if isinstance(t, torch.Tensor):
        return t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
    return t._np.view(np.int16) if t.dtype is reftorch.bfloat16 else t.numpy()


def assert_bits_equal(actual, expected):
    """Same dtype, shape and bytes in every element."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    as_bytes = lambda a: np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(  # noqa: E731
        a.size, a.itemsize)
    differ = np.flatnonzero((as_bytes(actual) != as_bytes(expected)).any(1))
    assert differ.size == 0, (f"{differ.size} of {actual.size} values differ, first at "
                              f"{differ[0]}: {actual.flat[differ[0]]!r} vs "
                              f"{expected.flat[differ[0]]!r}")


def with_torch(fn, seed):
    """fn(module) after manual_seed(seed) in PyTorch and reftorch: (expected, actual, C calls
    made, PyTorch's state afterwards, reftorch's)."""
    torch.manual_seed(seed)
    reftorch.manual_seed(seed)
    expected = host(fn(torch))
    before = _random.calls()
    actual = host(fn(reftorch))
    return (expected, actual, _random.calls() - before, torch.get_rng_state().numpy(),
            reftorch.get_rng_state().numpy())


def with_reference(fn, seed):
    """fn(module, generator) from one seed with the plugin and on the reference: (plugin's
    results, the reference's, C calls made, both generators' states afterwards)."""
    gen = reftorch.Generator().manual_seed(seed)
    before = _random.calls()
    got = [np.array(host(t)) for t in fn(reftorch, gen)]
    ran = _random.calls() - before
    got_state = gen.get_state().numpy()
    gen = reftorch.Generator().manual_seed(seed)
    with reftorch.plugins.use_reference_kernels():
        want = [np.array(host(t)) for t in fn(reftorch, gen)]
    return got, want, ran, got_state, gen.get_state().numpy()


# ---------------------------------------------------------------------------------------------
# PyTorch's numbers, bit for bit, with the plugin serving

SAMPLERS = {
    "rand": lambda m, n: m.rand(n),
    "uniform_": lambda m, n: m.empty(n).uniform_(-2.3, 5.1),
    "randn": lambda m, n: m.randn(n),
    "randint": lambda m, n: m.randint(-3, 100, (n,)),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_same_numbers_as_pytorch(sampler, n, seed):
    if sampler == "randn" and not {"avx2", "fma"} <= set(_cpu_flags()):
        pytest.skip("PyTorch's float32 normal kernel differs on CPUs without AVX2/FMA")
    expected, actual, ran, torch_state, state = with_torch(
        lambda m: SAMPLERS[sampler](m, n), seed)
    assert_bits_equal(actual, expected)
    assert ran == 1
    # the one-at-a-time normal path (randn of fewer than 16) caches its float64 sine normal
    # in the state: computed with the C library's log1p/cos/sin, PyTorch's bits too
    assert_bits_equal(state, torch_state)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bounds", [(0, 1), (-2.3, 5.1), (-1e-3, 1e-3), (3, 7), (2.5, 2.5)],
                         ids=str)
def test_uniform_every_float_dtype_like_pytorch(dtype, bounds):
    expected, actual, ran, torch_state, state = with_torch(
        lambda m: m.empty(40003, dtype=getattr(m, dtype)).uniform_(*bounds), 3)
    assert_bits_equal(actual, expected)
    assert ran == 1
    assert_bits_equal(state, torch_state)


@pytest.mark.parametrize("dtype", INTEGERS + ("float32", "float64"))
@pytest.mark.parametrize("bounds", [(), (2,), (3, 7), (-5, 5), "from only"], ids=str)
def test_random_every_dtype_like_pytorch(dtype, bounds):
    if bounds == "from only":
        bounds = (0 if dtype == "bool" else 3, None)
    elif dtype == "bool" and bounds not in ((), (2,)):
        bounds = (0, 2)
    elif dtype == "uint8" and bounds == (-5, 5):
        bounds = (0, 5)
    _assert_random_like_pytorch(dtype, bounds)


# Ranges of 2**28 or more (64-bit draws), in the dtypes that can hold them.
@pytest.mark.parametrize("dtype,bounds", [("int64", (-(2 ** 40), 2 ** 40)),
                                          ("float64", (-(2 ** 40), 2 ** 40)),
                                          ("int32", (-(2 ** 30), 2 ** 30))], ids=str)
def test_random_wide_ranges_like_pytorch(dtype, bounds):
    _assert_random_like_pytorch(dtype, bounds)


def _assert_random_like_pytorch(dtype, bounds):
    expected, actual, ran, torch_state, state = with_torch(
        lambda m: m.empty(20011, dtype=getattr(m, dtype)).random_(*bounds), 7)
    assert_bits_equal(actual, expected)
    assert ran == 1
    assert_bits_equal(state, torch_state)


@pytest.mark.parametrize("low,high", [(0, 2), (-(2 ** 40), 2 ** 40), (0, 2 ** 32 + 5),
                                      (-(2 ** 63), 2 ** 63 - 1), (5, 2 ** 28)])
def test_randint_wide_ranges_like_pytorch(low, high):
    expected, actual, ran, torch_state, state = with_torch(
        lambda m: m.randint(low, high, (30000,)), 5)
    assert_bits_equal(actual, expected)
    assert ran == 1
    assert_bits_equal(state, torch_state)


@pytest.mark.parametrize("dtype", ("float32", "float64", "float16", "bfloat16", "int64",
                                   "int32", "uint8", "bool"))
@pytest.mark.parametrize("p", (0.0, 0.3, 1.0))
def test_bernoulli_scalar_p_like_pytorch(dtype, p):
    expected, actual, ran, torch_state, state = with_torch(
        lambda m: m.empty(3, 3001, dtype=getattr(m, dtype)).bernoulli_(p), 11)
    assert_bits_equal(actual, expected)
    assert ran == 1
    assert_bits_equal(state, torch_state)


@needs_avx2_oracle
@pytest.mark.parametrize("mean_std", [(0, 1), (1.5, 0.3), (-2, 7)])
@pytest.mark.parametrize("n", (16, 17, 1000, 100003))
def test_normal_float32_mean_std_like_pytorch(n, mean_std):
    expected, actual, ran, torch_state, state = with_torch(
        lambda m: m.empty(n).normal_(*mean_std), 4)
    assert_bits_equal(actual, expected)
    assert ran == 1
    assert_bits_equal(state, torch_state)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", (16, 17, 1000, 100003))
def test_normal_float64_is_pytorchs_and_near_the_reference(n, seed):
    # The plugin calls the C library's log, cos and sin as PyTorch and the reference do:
    # PyTorch's bits, and the reference's.
    expected, actual, ran, torch_state, state = with_torch(
        lambda m: m.randn(n, dtype=m.float64), seed)
    assert_bits_equal(actual, expected)
    assert ran == 1
    assert_bits_equal(state, torch_state)
    got, want, _, got_state, want_state = with_reference(
        lambda m, g: [m.empty(n, dtype=m.float64).normal_(0.0, 2.0, generator=g)], seed)
    assert_bits_equal(got[0], want[0])
    assert_bits_equal(got_state, want_state)


# ---------------------------------------------------------------------------------------------
# One stream: plugin-served and reference-served calls interleave

def _mixed_calls(m, gen=None):
    """Calls on every sampler path, alternating; the one-at-a-time normals (fewer than 16
    elements or non-contiguous) cache a value in the generator for the next such call."""
    kw = {} if gen is None else {"generator": gen}
    return [
        m.randn(5, **kw),                            # one at a time: caches a second normal
        m.rand(3001, **kw),
        m.randn(7, dtype=m.float64, **kw),           # one at a time: uses the cached normal
        m.randint(0, 10, (20000,), **kw),
        m.empty(40, 30).t().normal_(**kw),           # one at a time: non-contiguous
        m.randn(1000, **kw),                         # the 16-block path
        m.rand(3, **kw),
        m.empty(9, dtype=m.float64).log_normal_(**kw),
        m.randn(2, dtype=m.float64, **kw),
        m.empty(500, dtype=m.float64).uniform_(**kw),
        m.empty(700, dtype=m.float64).exponential_(**kw),
    ]


@needs_avx2_oracle
def test_interleaved_calls_follow_pytorchs_stream_and_state():
    """All served by the plugin: PyTorch's values and state (its cached normal included),
    bit for bit."""
    torch.manual_seed(31)
    reftorch.manual_seed(31)
    expected = [host(t) for t in _mixed_calls(torch)]
    before = _random.calls()
    actual = [host(t) for t in _mixed_calls(reftorch)]
    assert _random.calls() - before == len(expected)
    for a, e in zip(actual, expected):
        assert_bits_equal(a, e)
    assert_bits_equal(reftorch.get_rng_state().numpy(), torch.get_rng_state().numpy())
    # and a last plugin call continues the stream from the restored PyTorch state
    reftorch.set_rng_state(reftorch.tensor(torch.get_rng_state().numpy()))
    assert_bits_equal(host(reftorch.rand(5000)), host(torch.rand(5000)))
    assert_bits_equal(reftorch.get_rng_state().numpy(), torch.get_rng_state().numpy())


def test_switching_between_plugin_and_reference_keeps_one_stream():
    """Every call alternately served by the plugin and by the reference gives the values and
    the final state of the reference alone, bit for bit."""
    calls = [lambda m, g: m.rand(2049, generator=g),
             lambda m, g: m.randn(1000, generator=g),
             lambda m, g: m.randint(-7, 7, (999,), generator=g),
             lambda m, g: m.empty(333, dtype=m.float64).uniform_(-1, 1, generator=g),
             lambda m, g: m.empty(777).bernoulli_(0.25, generator=g),
             lambda m, g: m.randn(31, generator=g)]
    for plugin_first in (True, False):
        gen = reftorch.Generator().manual_seed(8)
        mixed = []
        for i, call in enumerate(calls * 2):
            if (i % 2 == 0) == plugin_first:
                mixed.append(host(call(reftorch, gen)))
            else:
                with reftorch.plugins.use_reference_kernels():
                    mixed.append(host(call(reftorch, gen)))
        mixed_state = gen.get_state().numpy()
        gen = reftorch.Generator().manual_seed(8)
        with reftorch.plugins.use_reference_kernels():
            alone = [host(call(reftorch, gen)) for call in calls * 2]
        for a, b in zip(mixed, alone):
            assert_bits_equal(a, b)
        assert_bits_equal(mixed_state, gen.get_state().numpy())


@needs_avx2_oracle
def test_generator_objects_like_pytorch():
    default_before = reftorch.get_rng_state().numpy()
    mine, theirs = reftorch.Generator().manual_seed(99), torch.Generator().manual_seed(99)
    before = _random.calls()
    for fn in (lambda m, g: m.rand(5000, generator=g),
               lambda m, g: m.randn(4096, generator=g),
               lambda m, g: m.randint(0, 1000, (777,), generator=g),
               lambda m, g: m.empty(100, 17).uniform_(2, 3, generator=g)):
        assert_bits_equal(host(fn(reftorch, mine)), host(fn(torch, theirs)))
    assert _random.calls() - before == 4
    assert_bits_equal(mine.get_state().numpy(), theirs.get_state().numpy())
    assert_bits_equal(reftorch.get_rng_state().numpy(), default_before)  # untouched


def test_fresh_generator_state_after_an_empty_call():
    # drawing nothing leaves PyTorch's "next = 0" of a freshly seeded generator
    for m in (torch, reftorch):
        m.manual_seed(4)
        m.rand(0)
        m.empty(0, dtype=m.int64).random_(0, 5)
    assert_bits_equal(reftorch.get_rng_state().numpy(), torch.get_rng_state().numpy())


# ---------------------------------------------------------------------------------------------
# Plugin against the reference: every registered (op, dtype), layouts, declines

def _layouts(m, dtype, gen_shape=(70, 90)):
    """Targets of one dtype (zero-filled, so that elements left alone compare equal):
    contiguous, transposed and permuted (dense), a slice with a storage offset, a non-dense
    strided view (declined), a 0-dim tensor, an empty one (declined)."""
    r, c = gen_shape
    return {
        "contiguous": lambda: m.zeros(5003, dtype=dtype),
        "transposed": lambda: m.zeros(r, c, dtype=dtype).t(),
        "permuted": lambda: m.zeros(4, r, c, dtype=dtype).permute(2, 0, 1),
        "offset": lambda: m.zeros(r * c + 13, dtype=dtype)[13:].view(r, c),
        "strided": lambda: m.zeros(r, 2 * c, dtype=dtype)[:, ::2],
        "0-dim": lambda: m.zeros((), dtype=dtype),
        "empty": lambda: m.zeros(0, 3, dtype=dtype),
    }


DECLINED_LAYOUTS = ("strided", "empty")


def _check_against_reference(make_call, dtype, layout, declined=False):
    def case(m, g):
        target = _layouts(m, dtype)[layout]()
        base = target._base if target._base is not None else target
        result = make_call(target, g)
        assert result is target
        return [base, target.contiguous()]
    got, want, ran, got_state, want_state = with_reference(case, 6)
    assert ran == (0 if declined or layout in DECLINED_LAYOUTS else 1)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)
    assert_bits_equal(got_state, want_state)


@pytest.mark.parametrize("layout", list(_layouts(reftorch, reftorch.float32)))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bounds", [(0, 1), (-2.3, 5.1), (-1, 1e30)], ids=str)
def test_uniform_matches_reference(bounds, dtype, layout):
    # (-1, 1e30): float16 declines bounds past its range (the reference then runs)
    dt = getattr(reftorch, dtype)
    declined = dtype == "float16" and bounds == (-1, 1e30)
    _check_against_reference(lambda t, g: t.uniform_(*bounds, generator=g), dt, layout,
                             declined=declined)


@pytest.mark.parametrize("layout", list(_layouts(reftorch, reftorch.float32)))
@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_normal_matches_reference(dtype, layout):
    # contiguous tensors of 16 or more elements take PyTorch's block path, other dense ones
    # the one-at-a-time path (the C library's float64 log1p/cos/sin, which the reference
    # calls too): bit for bit either way, the cached second normal in the state included
    _check_against_reference(lambda t, g: t.normal_(-1.5, 3.0, generator=g),
                             getattr(reftorch, dtype), layout)


@pytest.mark.parametrize("layout", ("contiguous", "transposed", "strided", "0-dim"))
@pytest.mark.parametrize("dtype", INTEGERS + ("float32", "float64"))
@pytest.mark.parametrize("bounds", [(), (9,), (1, 50), (0, 2 ** 31 - 1), "from only"], ids=str)
def test_random_matches_reference(bounds, dtype, layout):
    dt = getattr(reftorch, dtype)
    if bounds == "from only":
        bounds = (0 if dtype == "bool" else 1, None)
    elif dtype == "bool" and bounds:
        bounds = (0, 2)
    elif dtype in ("int8", "int16", "uint8", "float32") and bounds == (0, 2 ** 31 - 1):
        bounds = (0, 100)
    _check_against_reference(lambda t, g: t.random_(*bounds, generator=g), dt, layout)


@pytest.mark.parametrize("layout", ("contiguous", "permuted", "strided", "0-dim", "empty"))
@pytest.mark.parametrize("dtype", FLOATS + INTEGERS)
def test_bernoulli_matches_reference(dtype, layout):
    dt = getattr(reftorch, dtype)
    _check_against_reference(lambda t, g: t.bernoulli_(0.4, generator=g), dt, layout)


def test_complex_and_tensor_p_samplers_are_unchanged():
    def case(m, g):
        p = m.linspace(0, 1, 600)
        return [m.rand(40, 60, dtype=m.complex64, generator=g),
                m.empty(600).bernoulli_(p, generator=g),
                m.randn(8, 9, dtype=m.complex128, generator=g)]
    got, want, _, got_state, want_state = with_reference(case, 2)
    assert_bits_equal(got[0], want[0])
    assert_bits_equal(got[1], want[1])
    assert_bits_equal(got[2], want[2])
    assert_bits_equal(got_state, want_state)


def test_autograd_and_version_like_the_reference():
    leaf = reftorch.ones(3000, requires_grad=True)
    state = reftorch.get_rng_state().numpy()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf.uniform_()
    assert_bits_equal(reftorch.get_rng_state().numpy(), state)   # nothing drawn
    x = reftorch.ones(3000, requires_grad=True)
    y = x * 2
    version = y._version
    before = _random.calls()
    y.normal_()
    assert _random.calls() - before == 1 and y._version == version + 1
    assert type(y.grad_fn).__name__ == "NormalBackward0"
    y.sum().backward()
    assert not x.grad.any().item()


def test_errors_are_the_references():
    t = reftorch.empty(5000)
    with pytest.raises(RuntimeError):
        t.uniform_(2, 1)
    with pytest.raises(RuntimeError):
        t.normal_(0, -1)
    with pytest.raises(RuntimeError):
        t.random_(5, 5)
    with pytest.raises(RuntimeError):
        t.bernoulli_(1.5)
    with pytest.raises(RuntimeError, match="more than one element"):
        reftorch.empty(1, 3000).expand(4, 3000).uniform_()


# ---------------------------------------------------------------------------------------------
# Independent of threads, instruction set and drawing mode

def _big_draws(gen):
    return [host(reftorch.randn(200003, generator=gen)),
            host(reftorch.randn(100003, dtype=reftorch.float64, generator=gen)),
            host(reftorch.rand(70001, generator=gen)),
            host(reftorch.empty(5001, dtype=reftorch.bfloat16).uniform_(-3, 3, generator=gen)),
            host(reftorch.randint(3, 2 ** 40, (9999,), generator=gen)),
            gen.get_state().numpy()]


def _assert_all_equal(a, b):
    for x, y in zip(a, b):
        assert_bits_equal(x, y)


def test_results_do_not_depend_on_the_thread_count():
    # both normal transforms in _big_draws are big enough to run on several threads
    assert 200003 >= _random.NORMAL_PARALLEL_MIN_F32
    assert 100003 >= _random.NORMAL_PARALLEL_MIN_F64
    results = []
    previous = _random.set_num_threads(1)
    try:
        for threads in (1, 2, 3):
            _random.set_num_threads(threads)
            results.append(_big_draws(reftorch.Generator().manual_seed(12)))
    finally:
        _random.set_num_threads(previous)
    _assert_all_equal(results[0], results[1])
    _assert_all_equal(results[0], results[2])


@pytest.mark.parametrize("isa", _random.supported_isas())
def test_results_do_not_depend_on_the_instruction_set(isa):
    best = _big_draws(reftorch.Generator().manual_seed(13))
    previous = _random.set_isa(isa)
    try:
        _assert_all_equal(_big_draws(reftorch.Generator().manual_seed(13)), best)
    finally:
        _random.set_isa(previous)


def test_direct_mode_is_enabled_and_equals_next_uint32():
    # NumPy's MT19937 keeps the layout the C code checks for at import
    assert plugin_random.DIRECT
    direct = _big_draws(reftorch.Generator().manual_seed(14))
    previous = _random.set_direct(False)
    try:
        through_numpy = _big_draws(reftorch.Generator().manual_seed(14))
    finally:
        _random.set_direct(previous)
    _assert_all_equal(direct, through_numpy)


@pytest.mark.parametrize("direct", (True, False))
@pytest.mark.parametrize("skip", (0, 1, 623, 624, 625, 5000))
def test_raw_words_are_numpys(direct, skip):
    engine = np.random.MT19937(2 ** 32 - 5)
    engine._legacy_seeding(77)       # pos 624: the first draw twists
    engine.random_raw(skip)
    twin = np.random.MT19937()
    twin.state = engine.state
    words = np.empty(3001, np.uint32)
    previous = _random.set_direct(direct)
    try:
        _random.draw(engine, words)
    finally:
        _random.set_direct(previous)
    assert np.array_equal(words, twin.random_raw(3001).astype(np.uint32))
    assert np.array_equal(engine.state["state"]["key"], twin.state["state"]["key"])
    assert engine.state["state"]["pos"] == twin.state["state"]["pos"]


def test_forked_child_gets_the_same_numbers():
    """libgomp's thread pool does not survive fork(): the child transforms on one thread."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork() on this platform")
    reftorch.randn(100000)        # the parent has used its OpenMP threads
    expected = host(reftorch.randn(100000, generator=reftorch.Generator().manual_seed(3)))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: exit 0 only if the numbers are the parent's
        try:
            got = host(reftorch.randn(100000, generator=reftorch.Generator().manual_seed(3)))
            ok = np.array_equal(got.view(np.uint32), expected.view(np.uint32))
        finally:
            os._exit(0 if ok else 1)
    os.close(read_end)
    os.close(write_end)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung in a parallel kernel")


# ---------------------------------------------------------------------------------------------
# The C entry points check their arguments

_ENGINE = np.random.MT19937(1)      # alive for the whole module: it owns the state


def test_c_entry_points_reject_bad_arguments():
    out = np.zeros(100, np.float32)
    engine = np.random.MT19937(1)
    state = engine.state["state"]
    with pytest.raises(TypeError, match="bit generator"):
        _random.uniform(object(), _random.F32, out, 0, 10, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(TypeError, match="bit generator"):
        _random.uniform(engine.capsule, _random.F32, out, 0, 10, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="type"):
        _random.uniform(engine, 99, out, 0, 10, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="outside"):
        _random.uniform(engine, _random.F32, out, 95, 10, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="start"):
        _random.uniform(engine, _random.F32, out, -1, 10, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(TypeError, match="4-byte|needs"):
        _random.uniform(engine, _random.F64, out, 0, 10, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="finite"):
        _random.uniform(engine, _random.F32, out, 0, 10, 0.0, float("inf"), 1.0, 0.0)
    with pytest.raises(TypeError):
        _random.uniform(engine, _random.F32, out, 0, 10, 0.0, 1.0, 1.0)
    read_only = np.zeros(100, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        _random.uniform(engine, _random.F32, read_only, 0, 10, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="16 or more"):
        _random.normal(engine, _random.F32, out, 0, 15, 0.0, 1.0)
    with pytest.raises(ValueError, match="uniform"):
        _random.uniform(engine, _random.I32, np.zeros(10, np.int32), 0, 10, 0.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="span"):
        _random.integers(engine, _random.I64, np.zeros(10, np.int64), 0, 10, 0, 0, 32)
    with pytest.raises(ValueError, match="draw_bits"):
        _random.integers(engine, _random.I64, np.zeros(10, np.int64), 0, 10, 0, 5, 16)
    with pytest.raises(OverflowError):
        _random.integers(engine, _random.I64, np.zeros(10, np.int64), 0, 10, 0, 2 ** 64, 32)
    with pytest.raises(TypeError):
        _random.draw(engine, np.zeros(10, np.float64))
    with pytest.raises(TypeError):
        _random.state_matches(engine, "not bytes", 0)
    with pytest.raises(TypeError, match="MT19937"):
        _random.state_matches(np.random.PCG64(1), b"", 0)
    with pytest.raises(ValueError, match="kind"):
        _random.transform(engine, _random.F32, out, 0, 10, 7, 1.0, 0.0)
    with pytest.raises(ValueError, match="floating"):
        _random.scalar_normal(engine, _random.I32, np.zeros(10, np.int32), 0, 10, 0.0, 1.0,
                              False, None)
    with pytest.raises(TypeError):
        _random.scalar_normal(engine, _random.F32, out, 0, 10, 0.0, 1.0, False, "cached")
    with pytest.raises(ValueError, match="p must"):
        _random.transform(engine, _random.F32, out, 0, 10, _random.GEOMETRIC, 1.0, 0.0)
    with pytest.raises(ValueError, match="floating"):
        _random.transform(engine, _random.I64, np.zeros(10, np.int64), 0, 10,
                          _random.EXPONENTIAL, -1.0, 0.0)
    with pytest.raises(ValueError, match="outside"):
        _random.transform(engine, _random.F32, out, 95, 10, _random.CAUCHY, 1.0, 0.0)
    # nothing was drawn by the rejected calls
    assert np.array_equal(engine.state["state"]["key"], state["key"])
    assert engine.state["state"]["pos"] == state["pos"]


def test_c_entry_points_write_only_their_elements():
    out = np.full(40, -1.0, np.float32)
    _random.uniform(_ENGINE, _random.F32, out, 7, 20, 0.0, 1.0, 1.0, 0.0)
    assert (out[:7] == -1).all() and (out[27:] == -1).all()
    assert ((out[7:27] >= 0) & (out[7:27] < 1)).all()
    out = np.full(40, -1.0, np.float64)
    _random.normal(_ENGINE, _random.F64, out, 3, 17, 0.0, 1.0)
    assert (out[:3] == -1).all() and (out[20:] == -1).all()


def test_other_bit_generators_are_drawn_through_numpys_interface():
    # direct mode applies to NumPy's MT19937 only; any other engine goes through next_uint32
    words = {}
    for direct in (True, False):
        previous = _random.set_direct(direct)
        try:
            words[direct] = np.empty(2000, np.uint32)
            _random.draw(np.random.PCG64(5), words[direct])
        finally:
            _random.set_direct(previous)
    assert np.array_equal(words[True], words[False])
    assert len(np.unique(words[True])) > 1990


# ---------------------------------------------------------------------------------------------
# exponential_, cauchy_, geometric_: float64 uniforms through the C library, as PyTorch

TRANSFORMS = {
    "exponential_": [(), (2.5,), (1e-3,)],
    "cauchy_": [(), (0.5, 2.0), (-3.0, 1e-4)],
    "geometric_": [(0.3,), (1e-6,), (0.999,)],
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("sampler,numbers", [(s, n) for s, ns in TRANSFORMS.items() for n in ns],
                         ids=str)
@pytest.mark.parametrize("n", (1, 17, 100003))
def test_float64_transform_samplers_are_pytorchs(sampler, numbers, dtype, n):
    """Bit for bit PyTorch's values and generator state, every float dtype."""
    def fill(m):
        return getattr(m.empty(n, dtype=getattr(m, dtype)), sampler)(*numbers)
    expected, actual, ran, torch_state, state = with_torch(fill, 11)
    assert ran == 1
    assert_bits_equal(actual, expected)
    assert_bits_equal(state, torch_state)


@pytest.mark.parametrize("layout", ("contiguous", "transposed", "offset", "strided", "0-dim",
                                    "empty"))
@pytest.mark.parametrize("sampler", list(TRANSFORMS))
def test_float64_transform_samplers_against_the_reference(sampler, layout):
    """The reference's values bit for bit (both call the C library's log1p/tan/log) and the
    same state after; non-dense and empty targets declined, integer ones (geometric_) too."""
    numbers = TRANSFORMS[sampler][1 if sampler != "geometric_" else 0]

    def case(m, g):
        target = _layouts(m, m.float64)[layout]()
        base = target._base if target._base is not None else target
        assert getattr(target, sampler)(*numbers, generator=g) is target
        return [base]
    (got,), (want,), ran, got_state, want_state = with_reference(case, 6)
    assert ran == (0 if layout in DECLINED_LAYOUTS else 1)
    assert_bits_equal(got_state, want_state)
    assert_bits_equal(got, want)
    if sampler == "geometric_":
        _check_against_reference(lambda t, g: t.geometric_(0.3, generator=g), reftorch.int64,
                                 layout, declined=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mean_std", [(1, 2), (0, 1), (-0.5, 0.25)], ids=str)
@pytest.mark.parametrize("n", (1, 2, 17, 10001))
def test_log_normal_is_pytorchs(n, mean_std, dtype):
    """log_normal_ (the one-at-a-time normals, exp of them): PyTorch's values and state,
    its cached normal included, for every float dtype; a second call uses the cache."""
    def fill(m):
        first = m.empty(n, dtype=getattr(m, dtype)).log_normal_(*mean_std)
        second = m.empty(3, dtype=getattr(m, dtype)).log_normal_(*mean_std)
        return m.cat([first, second])
    expected, actual, ran, torch_state, state = with_torch(fill, 5)
    assert ran == 2
    assert_bits_equal(actual, expected)
    assert_bits_equal(state, torch_state)


# ---------------------------------------------------------------------------------------------
# randperm: its Fisher-Yates shuffle (_randperm_) in C

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", (1, 2, 3, 1000, 100003, 1_000_000))
def test_randperm_is_pytorchs(n, seed):
    expected, actual, ran, torch_state, state = with_torch(lambda m: m.randperm(n), seed)
    assert_bits_equal(actual, expected)
    assert ran == (n > 1)                   # one element draws nothing: the reference's
    assert_bits_equal(state, torch_state)   # n - 1 words drawn, as PyTorch draws them


@pytest.mark.parametrize("dtype", ("int64", "int32", "float32", "float64", "int16"))
def test_randperm_matches_the_reference_in_every_dtype_and_continues_its_stream(dtype):
    def fn(m, gen):
        first = m.randperm(5000, generator=gen, dtype=getattr(m, dtype))
        return [first, m.rand(10, generator=gen), m.randperm(7, generator=gen)]
    got, want, ran, got_state, want_state = with_reference(fn, 11)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)
    assert ran == 3
    assert_bits_equal(got_state, want_state)
    assert np.array_equal(np.sort(got[0].astype(np.int64)), np.arange(5000))


def test_randperm_of_zero_draws_nothing_and_out_is_written():
    gen = reftorch.Generator().manual_seed(5)
    before, state = _random.calls(), gen.get_state().numpy()
    assert reftorch.randperm(0, generator=gen).shape == (0,)
    assert _random.calls() == before                  # empty: declined, nothing drawn
    assert_bits_equal(gen.get_state().numpy(), state)
    out = reftorch.empty(3, dtype=reftorch.int64)
    reftorch.manual_seed(4)
    torch.manual_seed(4)
    reftorch.randperm(6000, out=out)
    assert_bits_equal(out.numpy(), torch.randperm(6000).numpy())


def test_randperm_entry_point_rejects_bad_arguments():
    engine = np.random.MT19937(1)
    state = engine.state["state"]
    with pytest.raises(ValueError, match="int64"):
        _random.randperm(engine, _random.I32, np.zeros(10, np.int32), 0, 10)
    with pytest.raises(ValueError, match="outside"):
        _random.randperm(engine, _random.I64, np.zeros(10, np.int64), 5, 10)
    with pytest.raises(TypeError, match="bit generator"):
        _random.randperm(object(), _random.I64, np.zeros(10, np.int64), 0, 10)
    assert np.array_equal(engine.state["state"]["key"], state["key"])
    out = np.full(12, -1, np.int64)
    _random.randperm(engine, _random.I64, out, 2, 8)        # writes only elements 2 .. 9
    assert (out[:2] == -1).all() and (out[10:] == -1).all()
    assert sorted(out[2:10]) == list(range(8))
