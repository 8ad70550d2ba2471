"""The host-side shortcuts of reftorch-cuda stay correct: what a small op saves on its way to
the driver must never change what runs where.

  * the current context is set only when it changes, remembered per thread and per driver;
    `set_device` always sets it (for code that switched it behind reftorch's back);
  * marker events (non-blocking copies, the allocator's record_stream waits) are reused from
    a pool, but only once they have completed;
  * Python-number operands become device constants made once per (exact value, dtype,
    device, stream), never handed out again after something wrote to them;
  * the allocator's counters stay exact through many small allocations.

All on the emulated driver (its current context is per thread, as the driver's is), counting
the driver calls each case makes.
"""
from __future__ import annotations

import collections
import gc
import threading

import numpy as np
import pytest

import reftorch
import reftorch.cuda as cuda
from reftorch import _dispatch

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed "
                    "(pip install ./plugin_cuda)")
from reftorch_cuda import device as cuda_device  # noqa: E402
from spec_tests import test_plugin_cuda as _shared  # noqa: E402

plugin, kernel_cache_dir, compiled = _shared.plugin, _shared.kernel_cache_dir, _shared.compiled
emulated = _shared.emulated


@pytest.fixture
def calls(emulated, monkeypatch):
    """A Counter of the emulated driver's calls by name, from now on."""
    counter = collections.Counter()
    for name in [n for n in dir(type(emulated)) if n.startswith("cu") and n[2:3].isupper()]:
        original = getattr(emulated, name)

        def counted(*args, _name=name, _original=original):
            counter[_name] += 1
            return _original(*args)
        monkeypatch.setattr(emulated, name, counted)
    return counter


def backend():
    return cuda._backend()


def on_cuda(values, device="cuda"):
    return reftorch.tensor(values, dtype=reftorch.float32).to(device)


# --- the current context ----------------------------------------------------------------------

def test_context_is_set_only_when_the_device_changes(emulated, calls):
    a, b = on_cuda([1.0, 2.0]), on_cuda([3.0, 4.0])
    c, d = on_cuda([1.0], "cuda:1"), on_cuda([2.0], "cuda:1")
    a + b
    calls.clear()
    for _ in range(5):
        a + b
    assert calls["cuCtxSetCurrent"] == 0 and calls["cuLaunchKernel"] == 5
    c + d                                       # device 1: one switch...
    a + b                                       # ...and one back
    assert calls["cuCtxSetCurrent"] == 2
    assert emulated.launch_devices[-2:] == [1, 0]
    np.testing.assert_array_equal((c + d).cpu()._np, [3.0])


def test_set_device_always_sets_the_context(emulated, calls):
    a = on_cuda([1.0, 2.0])
    a + a
    emulated.cuCtxSetCurrent(("context", 1))    # another library switched it behind our back
    cuda.set_device(0)
    assert emulated.current == ("context", 0)
    a + a
    assert emulated.launch_devices[-1] == 0
    with cuda.device(1):                        # the device context manager switches...
        x = reftorch.ones(3, device="cuda")
        x + x
        assert emulated.owner_of(x.data_ptr()) == 1 and emulated.launch_devices[-1] == 1
    a + a                                       # ...and back
    assert emulated.launch_devices[-1] == 0 and cuda.current_device() == 0


def test_each_thread_has_its_own_current_context(emulated):
    a = on_cuda([1.0, 2.0])
    a + a                                       # device 0 is current on this thread
    seen = {}

    def on_device_1():
        cuda.set_device(1)
        x = on_cuda([5.0], "cuda")
        seen["result"] = (x + x).cpu()._np
        seen["device"] = emulated.launch_devices[-1]

    worker = threading.Thread(target=on_device_1)
    worker.start()
    worker.join()
    assert seen["device"] == 1 and seen["result"].tolist() == [10.0]
    assert emulated.current == ("context", 0)   # untouched here by the other thread
    np.testing.assert_array_equal((a + a).cpu()._np, [2.0, 4.0])
    assert emulated.launch_devices[-1] == 0

    def first_use():                            # a new thread has no context current yet
        seen["sum"] = (a + a).cpu()._np
        seen["device"] = emulated.launch_devices[-1]
    worker = threading.Thread(target=first_use)
    worker.start()
    worker.join()
    assert seen["device"] == 0 and seen["sum"].tolist() == [2.0, 4.0]


def test_failed_context_switch_is_not_remembered(emulated, monkeypatch):
    a = on_cuda([1.0])
    c = on_cuda([1.0], "cuda:1")
    a + a
    real = emulated.cuCtxSetCurrent
    monkeypatch.setattr(emulated, "cuCtxSetCurrent",
                        lambda ctx: (emulated.CUresult.CUDA_ERROR_INVALID_CONTEXT,))
    with pytest.raises(RuntimeError, match="cuCtxSetCurrent"):
        c + c
    monkeypatch.setattr(emulated, "cuCtxSetCurrent", real)
    c + c                                       # tried again, not skipped
    assert emulated.launch_devices[-1] == 1


# --- marker events ----------------------------------------------------------------------------

def test_non_blocking_copies_reuse_completed_markers(emulated, calls):
    reftorch.ones(4).cuda(non_blocking=True)    # the first marker is created
    calls.clear()
    for _ in range(3):
        reftorch.ones(4).cuda(non_blocking=True)
    assert calls["cuEventCreate"] == 0 and calls["cuEventDestroy"] == 0
    assert calls["cuEventRecord"] == 3


def test_a_marker_is_reused_only_after_it_completed(emulated, calls):
    emulated.deferred = True
    streams = backend()._init().streams
    s = cuda.Stream()
    with cuda.stream(s):
        x = reftorch.arange(4.0).cuda(non_blocking=True)    # its copy stays queued on s
        y = reftorch.arange(4.0).cuda(non_blocking=True)
    first, second = (event for event, _ in streams._keep)
    assert first is not second and not streams.event_query(first)
    assert calls["cuEventCreate"] == 2          # the pending marker was not handed out again
    s.synchronize()                             # both complete: back to the pool
    assert streams.pending_buffers() == 0
    with cuda.stream(s):
        z = reftorch.arange(4.0).cuda(non_blocking=True)
    assert calls["cuEventCreate"] == 2 and streams._keep[0][0] in (first, second)
    s.synchronize()
    with cuda.stream(s):
        for t in (x, y, z):
            np.testing.assert_array_equal(t.cpu()._np, np.arange(4.0))


def test_record_stream_markers_return_to_the_pool_after_the_wait(emulated):
    emulated.deferred = True
    streams = backend()._init().streams
    s = cuda.Stream()
    x = reftorch.empty(1000, device="cuda")
    with cuda.stream(s):
        x.copy_(reftorch.zeros(1000), non_blocking=True)
    x.record_stream(s)
    del x
    gc.collect()
    reftorch.empty(8, device="cuda")            # takes the block back: it waits on a marker
    pooled = len(streams._markers[0])
    s.synchronize()
    reftorch.empty(8, device="cuda")            # the wait is over: its marker is pooled
    assert len(streams._markers[0]) > pooled


# --- Python-number operands -------------------------------------------------------------------

def test_number_operand_is_copied_to_the_device_once(emulated, calls):
    a = on_cuda([1.0, -2.0, 3.0])
    a * 0.5
    calls.clear()
    for _ in range(4):
        r = a * 0.5
        a.mul_(1.0)
    assert calls["cuMemcpyHtoDAsync"] == 1      # only 1.0 is new
    assert calls["cuEventCreate"] == 0
    np.testing.assert_array_equal(r.cpu()._np, [0.5, -1.0, 1.5])


def test_constants_tell_apart_every_value_a_conversion_can(emulated):
    a = on_cuda([1.0, 2.0])
    plus, minus = (a * 0.0).cpu()._np, (a * -0.0).cpu()._np
    assert not np.signbit(plus).any() and np.signbit(minus).all()
    assert (a + 1).cpu()._np.tolist() == [2.0, 3.0]
    assert (a + True).cpu()._np.tolist() == [2.0, 3.0]
    assert (a + 1.5).cpu()._np.tolist() == [2.5, 3.5]
    assert np.isnan((a * float("nan")).cpu()._np).all()
    h = a.to(reftorch.float16)
    assert (h + 1e-4).cpu()._np.tolist() == (h.cpu() + 1e-4)._np.tolist()
    keys = {key[:2] for key in backend()._constants.entries}
    assert len(keys) == len(backend()._constants.entries)


def test_constant_written_to_is_never_handed_out_again(emulated):
    a = on_cuda([1.0, 2.0])
    seen = []
    remove = _dispatch.add_hook(lambda op, inputs, params, result: seen.extend(inputs))
    try:
        a * 3.0
    finally:
        remove()
    constant = next(t for t in seen if t.ndim == 0)
    constant.fill_(100.0)                       # user code got hold of it and wrote to it
    np.testing.assert_array_equal((a * 3.0).cpu()._np, [3.0, 6.0])
    constant.requires_grad_(True)
    fresh = a * 3.0
    np.testing.assert_array_equal(fresh.cpu()._np, [3.0, 6.0])
    assert not fresh.requires_grad


def test_constants_belong_to_the_stream_their_copy_ran_on(emulated):
    emulated.deferred = True
    a = on_cuda([1.0, 2.0])
    a * 7.0                                     # a constant on the default stream
    s = cuda.Stream()
    a.record_stream(s)
    with cuda.stream(s):
        doubled = a * 7.0                       # s gets its own, queued on s before the kernel
        s.synchronize()
        np.testing.assert_array_equal(doubled.cpu()._np, [7.0, 14.0])
    streams = {key[3] for key in backend()._constants.entries}
    assert len(streams) == 2


def test_constants_are_bounded_and_dropped_by_empty_cache(emulated):
    a = on_cuda([1.0])
    gc.collect()
    cuda.empty_cache()
    base = cuda.memory_allocated()
    for i in range(cuda_device.SCALAR_CONSTANTS + 20):
        a + float(i)
    assert len(backend()._constants.entries) == cuda_device.SCALAR_CONSTANTS
    assert (a + 1.0).cpu()._np.tolist() == [2.0]
    cuda.empty_cache()
    gc.collect()
    assert backend()._constants.entries == {} and cuda.memory_allocated() == base


def test_number_operands_on_autograd_tensors(emulated):
    w = on_cuda([1.0, -2.0]).requires_grad_(True)
    for _ in range(2):
        (w * 3.0 + 1.0).sum().backward()
    np.testing.assert_array_equal(w.grad.cpu()._np, [6.0, 6.0])


# --- the allocator ----------------------------------------------------------------------------

def test_counters_stay_exact_through_many_small_ops(emulated):
    a = on_cuda(np.arange(100.0))
    gc.collect()
    cuda.reset_peak_memory_stats()
    before = cuda.memory_stats()
    kept = [a + a for _ in range(10)]           # ten 512-byte results alive together
    for _ in range(50):
        a.relu()                                 # each freed before the next
    stats = cuda.memory_stats()
    assert stats["allocation.all.current"] == before["allocation.all.current"] + 10
    assert stats["allocated_bytes.all.current"] == before["allocated_bytes.all.current"] + 5120
    assert stats["requested_bytes.all.current"] == before["requested_bytes.all.current"] + 4000
    assert stats["allocated_bytes.all.peak"] == stats["allocated_bytes.all.current"] + 512
    del kept
    gc.collect()
    assert cuda.memory_stats()["allocated_bytes.all.current"] == \
        before["allocated_bytes.all.current"]


def test_resize_gives_the_old_block_back(emulated):
    x = reftorch.zeros(10, device="cuda")
    gc.collect()
    allocated = cuda.memory_allocated()
    x.resize_(1000)
    assert cuda.memory_allocated() == allocated - 512 + 4096
    np.testing.assert_array_equal(x.cpu()._np[:10], np.zeros(10))
    del x
    gc.collect()
    assert cuda.memory_allocated() == allocated - 512


def test_emulated_driver_names_exist_in_the_real_bindings():
    """The emulator stands in for cuda.bindings.driver, so each function and constant it
    offers must be one the real module has, with the same value: code written against a name
    the emulator invented passes every emulated test and fails on the first GPU."""
    if _shared.NO_BINDINGS is not None:
        pytest.skip(_shared.NO_BINDINGS)
    from cuda.bindings import driver as real
    from spec_tests.cuda_emulator import EmulatedDriver
    for name in dir(EmulatedDriver):
        if name.startswith("cu") and callable(getattr(EmulatedDriver, name)):
            assert hasattr(real, name), name
    for enum_name in ("CUresult", "CUdevice_attribute", "CUstream_flags", "CUevent_flags"):
        real_enum = getattr(real, enum_name)
        for member in getattr(EmulatedDriver, enum_name):
            assert hasattr(real_enum, member.name), f"{enum_name}.{member.name}"
            assert int(getattr(real_enum, member.name)) == member.value, \
                f"{enum_name}.{member.name}"
