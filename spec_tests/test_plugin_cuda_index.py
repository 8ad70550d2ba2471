"""reftorch-cuda's index ops (kernels/index.cu) against the cpu reference, and their
device-side bounds checks.

Every launch test runs on a real GPU when there is one and on the emulated driver (the
`device_kind` fixture of test_plugin_cuda). Gathers move elements and the scatter kernel
applies each output element's contributions in the reference's order, so results must equal
the reference bit for bit on both (NaN payloads aside).

A bad index is asynchronous: the call returns, the next synchronisation (`.cpu()`, `.item()`,
`reftorch.cuda.synchronize()`) raises the reference's exception, and the record is cleared.
The guard tests check that nothing outside the result was written: the result is placed in a
freed block filled with a sentinel (the caching allocator hands that block to the next
allocation of its size), and the block's bytes past the result must still hold it.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
import reftorch.nn.functional as F
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda import ops_index as X  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_kernels import assert_same_values  # noqa: E402

# The launch fixtures of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, reference = base.FLOATS, base.reference
MOVED = FLOATS + ["int64", "int32", "bool", "complex64"]   # gathers move any element width
INDEX_NAMES = ["int64", "int32"]
ADDED = FLOATS + ["int64", "int32"]                      # scatter_add and index_add


def sample(shape, dtype_name, seed):
    """A cpu tensor of `dtype_name`: base.values' specials (NaN, -0.0, inf) for floats."""
    if dtype_name in FLOATS:
        return base.values(shape, dtype_name, seed)
    rng = np.random.default_rng(seed)
    if dtype_name == "bool":
        return reftorch.tensor(rng.random(shape) > 0.5)
    if dtype_name == "complex64":
        a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        return reftorch.tensor(a.astype(np.complex64))
    return reftorch.tensor(rng.integers(-1000, 1000, shape)).to(getattr(reftorch, dtype_name))


def indices(high, shape, seed, dtype_name="int64", low=0):
    rng = np.random.default_rng(seed)
    return reftorch.tensor(rng.integers(low, high, shape)).to(getattr(reftorch, dtype_name))


def assert_matches(fn, *cpu_args):
    """fn on cuda copies of the cpu tensors equals fn on the reference."""
    expected = reference(fn, *cpu_args)
    got = fn(*(a.cuda() if isinstance(a, reftorch.Tensor) else a for a in cpu_args))
    assert got.device.type == "cuda"
    assert_same_values(got, expected)


# Layouts of a (6, 5) source, applied the same way on cpu and cuda.
LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.t(),
    "sliced": lambda x: x[1::2, 1:],
}


# --- the gather family ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype_name", MOVED)
def test_gather_matches_the_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        x = arrange(sample((6, 5), dtype_name, seed))
        for dim in (0, 1, -1):
            rows, cols = x.shape
            shape = (4, cols - 1) if dim == 0 else (rows - 1, 7)
            index = indices(x.shape[dim], shape, 10 * seed + dim + 1)
            for idx in (index, index.t().contiguous().t()):  # and a transposed index
                assert_matches(lambda a, i: reftorch.gather(a, dim, i), x, idx)
    empty = reftorch.zeros((0, 3), dtype=reftorch.int64)
    x = sample((6, 5), dtype_name, 9)
    assert_matches(lambda a, i: reftorch.gather(a, 1, i), x, empty)
    zero_dim = sample((), dtype_name, 3)
    assert_matches(lambda a, i: reftorch.gather(a, 0, i), zero_dim,
                   reftorch.tensor(0))
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("index_name", INDEX_NAMES)
@pytest.mark.parametrize("dtype_name", MOVED)
def test_index_select_matches_the_reference(device_kind, dtype_name, index_name):
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        x = arrange(sample((6, 5), dtype_name, seed))
        for dim in (0, 1):
            index = indices(x.shape[dim], (7,), seed, index_name)  # with repeats
            assert_matches(lambda a, i: reftorch.index_select(a, dim, i), x, index)
            assert_matches(lambda a, i: reftorch.index_select(a, dim, i), x, index[::2])
    x = sample((6, 5), dtype_name, 4)
    for index in (indices(6, (0,), 1, index_name), indices(6, (), 2, index_name)):
        assert_matches(lambda a, i: reftorch.index_select(a, 0, i), x, index)
    assert_matches(lambda a, i: reftorch.index_select(a, 0, i), sample((), dtype_name, 5),
                   indices(1, (1,), 0, index_name))
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("index_name", INDEX_NAMES)
@pytest.mark.parametrize("dtype_name", MOVED)
def test_embedding_matches_the_reference(device_kind, dtype_name, index_name):
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        weight = arrange(sample((6, 5), dtype_name, seed))
        for shape in ((3, 4), (7,), (), (0,), (2, 0)):
            ids = indices(weight.shape[0], shape, seed, index_name)
            assert_matches(reftorch.embedding, weight, ids)
            assert_matches(reftorch.embedding, weight, ids.t() if len(shape) == 2 else ids)
    assert plugins.fallbacks() == {}


def test_embedding_module_forward_runs_on_cuda(device_kind):
    plugins.reset_fallbacks()
    weight = sample((10, 3), "float32", 1)
    ids = indices(10, (2, 5), 2)
    expected = reference(F.embedding, ids, weight)
    with reftorch.no_grad():
        got = F.embedding(ids.cuda(), weight.cuda(), padding_idx=0)
    assert_same_values(got, expected)
    assert plugins.fallbacks() == {}


def test_embedding_and_gather_gradients_use_index_add_and_scatter_add(device_kind):
    """Their backward formulas are index_add (embedding) and scatter_add (gather): on cuda
    they run there, with repeated indices summed in the reference's order."""
    weight = sample((6, 4), "float32", 1).nan_to_num()
    ids = indices(6, (3, 5), 2)
    grads = []
    for device in ("cpu", "cuda"):
        w = weight.to(device).detach().requires_grad_()
        out = reftorch.embedding(w, ids.to(device))
        picked = reftorch.gather(out, 1, ids.to(device).clamp(0, 3).unsqueeze(-1).expand(3, 5, 2))
        (picked * picked).sum().backward()
        grads.append(w.grad)
    assert_same_values(grads[1], grads[0])
    if device_kind is not None:  # the emulator lists its launches
        launched = " ".join(device_kind.launches)
        assert "AddScaledOp>" in launched and "AddOp>" in launched


@pytest.mark.parametrize("dtype_name", MOVED)
def test_take_matches_the_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        x = arrange(sample((6, 5), dtype_name, seed))
        n = x.numel()
        for index in (indices(n, (4, 3), seed, low=-n), indices(n, (9,), seed + 1, low=-n),
                      indices(n, (), seed + 2, low=-n), indices(n, (0,), seed)):
            assert_matches(reftorch.take, x, index)
    assert_matches(reftorch.take, sample((), dtype_name, 6), reftorch.tensor([0, -1, 0]))
    # a non-contiguous input is made contiguous first: one copy kernel, no fallback
    assert plugins.fallbacks() == {}


# --- the scatter family -----------------------------------------------------------------------

def _permutation_index(shape, dim, size, seed):
    """An int64 index of `shape` whose entries along `dim` are distinct (no duplicates)."""
    rng = np.random.default_rng(seed)
    moved = list(shape)
    moved[dim], moved[-1] = moved[-1], moved[dim]
    keys = rng.random(tuple(moved[:-1]) + (size,))
    picks = np.argsort(keys, axis=-1)[..., :shape[dim]]
    return reftorch.tensor(np.swapaxes(picks, dim, -1).copy())


@pytest.mark.parametrize("dtype_name", MOVED)
def test_scatter_without_duplicates_matches_the_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        a = arrange(sample((6, 5), dtype_name, seed))
        src = arrange(sample((6, 5), dtype_name, seed + 10))
        for dim in (0, 1):
            shape = (min(4, a.shape[0]), a.shape[1] - 1) if dim == 0 else (a.shape[0] - 1, 3)
            index = _permutation_index(shape, dim, a.shape[dim], seed)
            assert_matches(lambda t, i, s: reftorch.scatter(t, dim, i, s), a, index, src)
            assert_matches(lambda t, i, s: t.clone().scatter_(dim, i, s), a, index.t().contiguous().t(), src)
    a = sample((6, 5), dtype_name, 1)
    assert_matches(lambda t, i, s: reftorch.scatter(t, 0, i, s), a,
                   reftorch.zeros((0, 5), dtype=reftorch.int64), a)
    assert plugins.fallbacks() == {}


def test_scatter_with_duplicates_keeps_the_last_write(device_kind):
    """PyTorch leaves this unspecified; the kernel's order (one thread per column, entries in
    index order) makes it the reference's: the last repeated index wins."""
    a = sample((4, 3), "float32", 0)
    src = sample((5, 3), "float32", 1)
    index = reftorch.tensor([[1, 0, 3], [1, 2, 3], [0, 0, 3], [1, 2, 0], [2, 2, 3]])
    assert_matches(lambda t, i, s: reftorch.scatter(t, 0, i, s), a, index, src)


@pytest.mark.parametrize("dtype_name", ADDED)
def test_scatter_add_matches_the_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        a = arrange(sample((6, 5), dtype_name, seed))
        src = arrange(sample((6, 5), dtype_name, seed + 10))
        for dim in (0, 1):
            rows, cols = a.shape
            shape = (rows, cols - 1) if dim == 0 else (rows - 1, cols)
            index = indices(a.shape[dim], shape, seed + dim)  # many repeats
            assert_matches(lambda t, i, s: reftorch.scatter_add(t, dim, i, s), a, index, src)
            assert_matches(lambda t, i, s: t.clone().scatter_add_(dim, i, s), a, index, src)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("index_name", INDEX_NAMES)
@pytest.mark.parametrize("dtype_name", ADDED)
def test_index_add_matches_the_reference(device_kind, dtype_name, index_name):
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        a = arrange(sample((6, 5), dtype_name, seed))
        for dim in (0, 1):
            shape = list(a.shape)
            shape[dim] = 7
            source = sample(tuple(shape), dtype_name, seed + 20)
            index = indices(a.shape[dim], (7,), seed, index_name)   # repeats accumulate
            for alpha in (1, 0.3 if dtype_name in FLOATS else 3, -2):
                assert_matches(lambda t, i, s: reftorch.index_add(t, dim, i, s, alpha=alpha),
                               a, index, source)
            assert_matches(lambda t, i, s: t.clone().index_add_(dim, i, s.t().contiguous().t()),
                           a, index, source)
    a = sample((6, 5), dtype_name, 3)
    assert_matches(lambda t, i, s: reftorch.index_add(t, 0, i, s), a,
                   indices(6, (0,), 0, index_name), sample((0, 5), dtype_name, 1))
    assert_matches(lambda t, i, s: reftorch.index_add(t, 1, i, s), a,
                   indices(5, (), 0, index_name), sample((6, 1), dtype_name, 2))
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", ["int32", "int64"])
def test_integer_sums_wrap_around_as_numpy_s(device_kind, dtype_name):
    dtype = getattr(reftorch, dtype_name)
    top = int(np.iinfo(dtype_name).max)
    a = reftorch.tensor([top, -top, 5], dtype=dtype)
    index = reftorch.tensor([0, 0, 1, 2])
    source = reftorch.tensor([1, top, -2, 7], dtype=dtype)
    assert_matches(lambda t, i, s: reftorch.index_add(t, 0, i, s, alpha=3), a, index, source)
    assert_matches(lambda t, i, s: reftorch.scatter_add(t, 0, i, s), a, index, source)


def test_kernels_decline_what_they_do_not_handle():
    f32 = reftorch.float32
    a, i = reftorch.ones(3, 2), reftorch.tensor([0, 1])
    assert X.gather_kernel(None, (a, i.reshape(2, 1)), (f32,) * 3, {"dim": 0}) \
        is NotImplemented                                           # not on cuda
    scatter = X.scatter_kernel("scatter")
    assert scatter(None, (a, i.reshape(2, 1), a), (f32,) * 3, {"dim": 0, "reduce": "add"}) \
        is NotImplemented                                           # reduce= goes elsewhere
    assert X._alpha(1j, f32) is None and X._alpha(2**30, f32) is None
    assert X._alpha(0.1, reftorch.float16) == float(np.float16(0.1))
    assert X._alpha(0.5, reftorch.int64) is None and X._alpha(2**31, reftorch.int32) is None
    assert X._alpha(-3, reftorch.int32) == -3.0


# --- bounds errors ----------------------------------------------------------------------------

def reference_error(fn, *cpu_args):
    with pytest.raises((IndexError, RuntimeError)) as info:
        reference(fn, *cpu_args)
    return info.type, str(info.value)


BAD = {  # op -> (fn, cpu args with bad indices; the first bad one by position is not the
         #        largest or the smallest)
    "gather": (lambda a, i: reftorch.gather(a, 0, i),
               lambda: (sample((5, 3), "float32", 0),
                        reftorch.tensor([[0, 9, 1], [-3, 2, 11], [4, 4, 4]]))),
    "gather_negative": (lambda a, i: reftorch.gather(a, 1, i),   # gather does not wrap
                        lambda: (sample((5, 3), "float32", 0), reftorch.tensor([[0], [-1]]))),
    "take": (reftorch.take,
             lambda: (sample((2, 3), "float32", 0), reftorch.tensor([[0, -1, 9], [-8, 2, 12]]))),
    "embedding": (reftorch.embedding,
                  lambda: (sample((5, 3), "float32", 0), reftorch.tensor([[0, 7], [-1, 9]]))),
    "index_add": (lambda a, i, s: reftorch.index_add(a, 0, i, s),
                  lambda: (sample((5, 3), "float32", 0), reftorch.tensor([1, 6, 0, -2, 9]),
                           sample((5, 3), "float32", 1))),
    "scatter": (lambda a, i, s: reftorch.scatter(a, 0, i, s),
                lambda: (sample((5, 3), "float32", 0), reftorch.tensor([[0, 7, 1], [2, -1, 12]]),
                         sample((2, 3), "float32", 1))),
    "scatter_add": (lambda a, i, s: reftorch.scatter_add(a, 0, i, s),
                    lambda: (sample((5, 3), "float32", 0),
                             reftorch.tensor([[0, 1, 1], [6, -4, 12]]),
                             sample((2, 3), "float32", 1))),
}


def _cuda(args):
    return tuple(a.cuda() for a in args)


@pytest.mark.parametrize("op", BAD)
def test_bad_index_is_raised_at_the_next_synchronisation(device_kind, op):
    check_error_at_synchronisation(*BAD[op])


def check_error_at_synchronisation(fn, make):
    """fn on the device with make()'s bad indices returns; the reference's error is raised by
    the next synchronisation, then cleared, and fn works again with the indices clamped."""
    args = make()
    error_type, message = reference_error(fn, *args)
    result = fn(*_cuda(args))           # returns: the error is on the device
    assert result.device.type == "cuda"
    with pytest.raises(error_type) as info:
        reftorch.cuda.synchronize()
    assert str(info.value) == message
    reftorch.cuda.synchronize()         # cleared: nothing to report any more
    # ...and the op works again (indices clamped into range)
    good = tuple(a.clamp(0, 1) if a.dtype is reftorch.int64 else a for a in args)
    assert_same_values(fn(*_cuda(good)), reference(fn, *good))


@pytest.mark.parametrize("how", ["cpu", "item", "tolist"])
def test_any_copy_to_the_host_reports_the_error(device_kind, how):
    fn, make = BAD["gather"]
    args = make()
    _, message = reference_error(fn, *args)
    fn(*_cuda(args))
    unrelated = reftorch.ones(1).cuda()
    with pytest.raises(RuntimeError, match=message):
        {"cpu": unrelated.cpu, "item": unrelated.item, "tolist": unrelated.tolist}[how]()
    assert unrelated.item() == 1.0      # reported once


def test_the_first_failing_launch_is_reported(device_kind):
    gather, gather_args = BAD["gather"][0], BAD["gather"][1]()
    take, take_args = BAD["take"][0], BAD["take"][1]()
    _, first = reference_error(gather, *gather_args)
    gather(*_cuda(gather_args))
    take(*_cuda(take_args))             # fails too, later: not reported
    with pytest.raises(RuntimeError) as info:
        reftorch.cuda.synchronize()
    assert str(info.value) == first
    reftorch.cuda.synchronize()


def test_index_select_checks_its_indices_on_the_device(device_kind):
    """A bad index of a cuda index_select is reported at the next synchronisation, as its
    other index ops' are: the call itself does not read the indices back (that would wait
    for the device at every call)."""
    a, index = sample((5, 3), "float32", 0).cuda(), reftorch.tensor([1, 5, 0]).cuda()
    plugins.reset_fallbacks()
    got = reftorch.index_select(a, 0, index)
    assert got.shape == (3, 3) and plugins.fallbacks() == {}
    with pytest.raises(IndexError, match="index out of range in self"):
        got.cpu()
    reftorch.cuda.synchronize()
    with pytest.raises(IndexError, match="index out of range in self"):
        reftorch.index_select(a.cpu(), 0, index.cpu())    # on the cpu, at the call


def _guarded_result(fn, cuda_args):
    """fn's result (<= 512 bytes) placed in a freed 512-byte block of 0x5A bytes; returns
    (result, the block's bytes after fn and after the synchronisation that reports the bad
    index)."""
    guard = reftorch.full((512,), 0x5A, dtype=reftorch.uint8).cuda()
    ptr = guard.data_ptr()
    del guard                                       # its block waits in the cache
    result = fn(*cuda_args)
    assert result.data_ptr() == ptr, "the result did not get the guard block"
    with pytest.raises((IndexError, RuntimeError)):
        reftorch.cuda.synchronize()
    raw = np.empty(512, np.uint8)
    storage = result._storage
    storage._driver.to_host(storage._index, raw.ctypes.data, ptr, 512)
    return result, raw


@pytest.mark.parametrize("op", ["index_add", "scatter", "scatter_add"])
def test_bad_scatter_indices_write_nothing_outside_the_result(device_kind, op):
    fn, make = BAD[op]
    a, index, src = make()
    result, raw = _guarded_result(fn, _cuda((a, index, src)))
    nbytes = result.numel() * result.element_size()
    assert (raw[nbytes:] == 0x5A).all()             # index 6, 7, 9, 12 would land here
    # ...and the good entries were all applied
    ok = (index >= 0) & (index < a.shape[0])
    if op == "index_add":
        expected = reference(lambda t, i, s: t.index_add(0, i[ok], s[ok]), a, index, src)
    elif op == "scatter_add":  # a bad entry adds -0.0 to row 0 instead: x + -0.0 is x
        expected = reference(lambda t, i, s: reftorch.scatter_add(
            t, 0, reftorch.where(ok, i, 0), reftorch.where(ok, s[:i.shape[0]], -0.0)),
            a, index, src)
    else:  # rows a good entry writes: src's; the others: a's
        expected = reference(lambda t, i, s: reftorch.scatter(
            t, 0, reftorch.where(ok, i, 0), reftorch.where(ok, s[:i.shape[0]], t[:1])),
            a, index, src)
    assert_same_values(result, expected)


@pytest.mark.parametrize("op", ["gather", "take", "embedding"])
def test_bad_gather_indices_leave_their_outputs_unwritten(device_kind, op):
    fn, make = BAD[op]
    args = make()
    result, raw = _guarded_result(fn, _cuda(args))
    a, index = args
    n = a.numel() if op == "take" else a.shape[0]
    low = -n if op == "take" else 0
    ok = ((index >= low) & (index < n))._np
    values = raw[:result.numel() * 4].view(np.float32).reshape(result.shape)
    expected = reference(fn, a, reftorch.where(reftorch.tensor(ok), index, 0))._np
    if op == "embedding":
        ok = np.repeat(ok[..., None], a.shape[1], axis=-1)
    np.testing.assert_array_equal(values[ok], expected[ok])
    assert (raw[:result.numel() * 4].reshape(-1, 4)[~ok.reshape(-1)] == 0x5A).all()
    assert (raw[result.numel() * 4:] == 0x5A).all()


def test_each_device_has_its_own_record(emulated):
    fn, make = BAD["gather"]
    args = make()
    _, message = reference_error(fn, *args)
    fn(*(a.to("cuda:1") for a in args))
    reftorch.cuda.synchronize(0)                     # device 0 has nothing to report
    reftorch.ones(2).cuda().cpu()
    with pytest.raises(RuntimeError, match=message):
        reftorch.ones(2).to("cuda:1").cpu()
    reftorch.cuda.synchronize(1)


# --- the error record's cost ------------------------------------------------------------------

def test_the_record_is_read_only_after_index_launches(emulated):
    x = reftorch.arange(6.0).cuda()
    x.cpu()                                          # no index launch yet: no record
    driver = x._storage._driver
    before = len(emulated.launches)
    reftorch.take(x, reftorch.tensor([1, 2]).cuda())
    errors = X.errors_of(driver)
    assert errors.pending[0] and len(emulated.launches) == before + 1
    x.cpu()                                          # reads the record, once
    assert not errors.pending[0]
    calls = []
    original = errors.check
    driver.sync_hooks[driver.sync_hooks.index(original)] = \
        lambda index, stream: calls.append(stream) or original(index, stream)
    x.cpu()
    reftorch.cuda.synchronize()
    assert len(calls) == 2 and not errors.pending[0]  # hooks ran; nothing pending to read
