"""reftorch.cuda's API on reftorch-cuda: caching allocator, streams and events, devices, RNG,
legacy types, nvtx and comm.

Tests taking `device_kind` run on a real GPU (skipped without one) and on the emulated driver
(spec_tests/cuda_emulator.py, 2 devices); tests taking `emulated` use what only the emulator
can show (exact driver calls, memory capacity, work left queued on a stream with
`deferred`). Deferred streams run their queued copies late, so a missing stream dependency
reads wrong bytes: the stream tests check values, not only calls.
"""
from __future__ import annotations

import gc

import numpy as np
import pytest

import reftorch
import reftorch.cuda as cuda
from reftorch.cuda import random as cuda_random

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed "
                    "(pip install ./plugin_cuda)")
from spec_tests import test_plugin_cuda as _shared  # noqa: E402

# The fixtures of the plugin's test module: the loaded plugin, a fresh kernel cache, the
# compiled programs, the emulated driver and the gpu/emulated parametrisation.
plugin, kernel_cache_dir, compiled = _shared.plugin, _shared.kernel_cache_dir, _shared.compiled
emulated, device_kind = _shared.emulated, _shared.device_kind

MiB = 1 << 20


@pytest.fixture(autouse=True)
def fresh_cuda_rng():
    """Each test starts with no cuda generator made and no seeding queued."""
    cuda_random._generators.clear()
    cuda_random._queued.clear()
    yield
    cuda_random._generators.clear()
    cuda_random._queued.clear()


def collect():
    gc.collect()


def settled():
    """Synchronise and empty the cache: a known starting point on a real GPU too."""
    collect()
    cuda.synchronize()
    cuda.empty_cache()
    cuda.reset_peak_memory_stats()


def on_cuda(values, dtype=reftorch.float32, device="cuda"):
    return reftorch.tensor(values, dtype=dtype).to(device)


# --- caching allocator ------------------------------------------------------------------------

def test_freed_block_is_cached_and_reused(device_kind):
    cuda.init()
    settled()
    base = cuda.memory_allocated()
    x = reftorch.empty(1000, device="cuda")          # 4000 bytes -> one 4096-byte block
    assert cuda.memory_allocated() == base + 4096
    assert cuda.memory_reserved() >= cuda.memory_allocated()
    ptr = x.data_ptr()
    del x
    collect()
    assert cuda.memory_allocated() == base
    assert cuda.max_memory_allocated() == base + 4096
    reserved = cuda.memory_reserved()
    y = reftorch.empty(900, device="cuda")           # 3600 bytes: the same block fits
    assert y.data_ptr() == ptr
    assert cuda.memory_reserved() == reserved        # nothing new asked of the driver
    z = reftorch.empty(100, device="cuda")           # far smaller: not given the big block
    assert z.data_ptr() != ptr
    stats = cuda.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "reserved_bytes.all.current", "reserved_bytes.all.peak"):
        assert key in stats
    assert stats["allocated_bytes.all.current"] == cuda.memory_allocated()


def test_cache_avoids_driver_calls_and_empty_cache_returns_blocks(emulated):
    xs = [reftorch.ones(2000, device="cuda") for _ in range(3)]
    assert emulated.calls.count("cuMemAlloc") == 3
    del xs
    collect()
    assert len(emulated.memory) == 3 and cuda.memory_allocated() == 0
    assert cuda.memory_reserved() == cuda.memory_cached() == 3 * 8192
    again = [reftorch.zeros(2000, device="cuda") for _ in range(3)]
    assert emulated.calls.count("cuMemAlloc") == 3      # all three from the cache
    assert all((t.cpu()._np == 0).all() for t in again)
    del again[0]
    collect()
    cuda.empty_cache()                                   # the one unused block goes back
    assert emulated.calls.count("cuMemFree") == 1 and len(emulated.memory) == 2
    assert cuda.memory_reserved() == cuda.memory_allocated() == 2 * 8192
    assert cuda.max_memory_reserved() == cuda.max_memory_cached() == 3 * 8192


def test_peaks_reset(device_kind):
    cuda.init()
    settled()
    base = cuda.memory_allocated()
    big = reftorch.empty(MiB // 4, device="cuda")        # 1 MiB
    del big
    collect()
    assert cuda.max_memory_allocated() >= base + MiB
    cuda.reset_max_memory_allocated()
    assert cuda.max_memory_allocated() == cuda.memory_allocated() == base
    assert cuda.max_memory_cached() >= MiB
    cuda.reset_max_memory_cached()
    assert cuda.max_memory_cached() == cuda.memory_cached()
    small = reftorch.empty(10, device="cuda")
    assert cuda.max_memory_allocated() == base + 512
    cuda.reset_peak_memory_stats()
    assert cuda.memory_stats()["allocated_bytes.all.peak"] == base + 512
    del small


def test_stats_are_per_device(emulated):
    x = reftorch.empty(256, device="cuda:1")
    assert cuda.memory_allocated(1) == 1024 and cuda.memory_allocated("cuda:1") == 1024
    assert cuda.memory_allocated(0) == 0
    with cuda.device(1):
        assert cuda.memory_allocated() == 1024
    del x


def test_statistics_before_initialisation_do_not_start_the_driver(emulated):
    assert cuda.memory_allocated() == 0 and cuda.max_memory_reserved() == 0
    assert cuda.memory_stats() == {}
    cuda.empty_cache()
    cuda.reset_peak_memory_stats()
    assert not cuda.is_initialized()


def test_out_of_memory_empties_the_cache_then_raises(emulated):
    emulated.capacity = 64 * 1024
    a = reftorch.empty(8 * 1024, device="cuda")          # 32 KiB
    del a
    collect()
    b = reftorch.empty(12 * 1024, device="cuda")         # 48 KiB: fits once the cache is freed
    assert emulated.calls.count("cuMemFree") == 1
    assert cuda.memory_stats()["num_alloc_retries"] == 1
    with pytest.raises(cuda.OutOfMemoryError) as info:
        reftorch.empty(12 * 1024, device="cuda")
    assert isinstance(info.value, RuntimeError)
    message = str(info.value)
    assert message.startswith("CUDA out of memory. Tried to allocate 48.00 KiB. GPU 0 ")
    assert "total capacity of 64.00 KiB of which 16.00 KiB is free" in message
    assert cuda.memory_stats()["num_ooms"] == 1
    assert cuda.mem_get_info() == (16 * 1024, 64 * 1024)
    del b
    collect()
    assert reftorch.empty(12 * 1024, device="cuda").data_ptr()  # the freed block serves it


def test_block_is_reused_only_on_the_stream_it_was_freed_on(emulated):
    s = cuda.Stream()
    with cuda.stream(s):
        x = reftorch.empty(1000, device="cuda")
    ptr = x.data_ptr()
    del x
    collect()
    other = reftorch.empty(1000, device="cuda")       # default stream: a new block
    assert other.data_ptr() != ptr
    with cuda.stream(s):
        same = reftorch.empty(1000, device="cuda")
    assert same.data_ptr() == ptr


def test_record_stream_holds_the_block_until_that_stream_is_done(emulated):
    emulated.deferred = True
    s = cuda.Stream()
    x = reftorch.empty(1000, device="cuda")
    ptr = x.data_ptr()
    with cuda.stream(s):
        x.copy_(reftorch.zeros(1000), non_blocking=True)   # a copy left queued on s
    assert not s.query()
    x.record_stream(s)
    del x
    collect()
    y = reftorch.empty(1000, device="cuda")
    assert y.data_ptr() != ptr                        # s still has work on the old block
    s.synchronize()
    del y
    collect()
    z = reftorch.empty(1000, device="cuda")
    w = reftorch.empty(1000, device="cuda")
    assert ptr in (z.data_ptr(), w.data_ptr())
    with pytest.raises(RuntimeError, match="cuda tensor"):
        reftorch.ones(2).record_stream(s)


# --- streams and events -----------------------------------------------------------------------

def test_current_and_default_streams(device_kind):
    cuda.init()
    default = cuda.default_stream()
    assert cuda.current_stream() == default and default.cuda_stream == 0
    assert default.device == reftorch.device("cuda", 0)
    s = cuda.Stream()
    assert s != default and s.device_index == 0 and s.cuda_stream != 0
    with cuda.stream(s) as chosen:
        assert chosen is s and cuda.current_stream() == s
        assert cuda.current_stream(0) == s
    assert cuda.current_stream() == default
    with cuda.stream(None):
        assert cuda.current_stream() == default
    cuda.set_stream(s)
    try:
        assert cuda.current_stream() == s
    finally:
        cuda.set_stream(default)
    assert len({s, cuda.Stream._wrap(s._handle), default}) == 2


def test_current_stream_is_per_thread(emulated):
    import threading
    s = cuda.Stream()
    seen = {}

    def other_thread():
        seen["stream"] = cuda.current_stream()
        x = reftorch.ones(4).cuda()
        x + x
        seen["launch"] = emulated.launch_streams[-1]

    with cuda.stream(s):
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        assert cuda.current_stream() == s
    assert seen["stream"] == cuda.default_stream() and seen["launch"] is None


def test_stream_on_another_device_switches_the_device(emulated):
    s1 = cuda.Stream(device=1)
    assert s1.device == reftorch.device("cuda", 1)
    assert cuda.Stream("cuda:1").device_index == 1 and cuda.Stream(-1).device_index == 0
    with cuda.stream(s1):
        assert cuda.current_device() == 1 and cuda.current_stream() == s1
        x = reftorch.ones(3, device="cuda")
        assert x.device.index == 1
        assert emulated.streams[s1._handle.raw].device == 1
    assert cuda.current_device() == 0
    assert cuda.current_stream(1) == cuda.default_stream(1)


def test_dead_streams_and_events_are_destroyed_later(emulated):
    s = cuda.Stream()
    raw = s._handle.raw
    events = [s.record_event() for _ in range(5)]
    assert len(emulated.events) == 5
    del s, events
    collect()
    assert raw in emulated.streams                    # finalizers make no driver calls...
    cuda.Stream()
    cuda.synchronize()                                # ...the next stream calls do
    assert raw not in emulated.streams and emulated.events == set()


def test_priority_is_clamped_to_the_device_range(emulated):
    assert cuda.Stream(priority=-100).priority == -5
    assert cuda.Stream(priority=3).priority == 0
    assert cuda.Stream(priority=-1).priority == -1


def test_kernels_and_copies_run_on_the_current_stream(emulated):
    x = on_cuda([1.0, 2.0, 3.0])
    s = cuda.Stream()
    x + x
    assert emulated.launch_streams[-1] is None                     # the default stream
    with cuda.stream(s):
        y = x + x
    assert emulated.launch_streams[-1] is emulated.streams[s._handle.raw]
    np.testing.assert_array_equal(y.cpu()._np, [2, 4, 6])


def test_wait_stream_orders_work_across_streams(emulated):
    emulated.deferred = True
    s = cuda.Stream()
    with cuda.stream(s):
        x = reftorch.arange(6.0).cuda(non_blocking=True)   # its copy waits, queued on s
        x.record_stream(cuda.default_stream())
    assert not s.query()
    cuda.current_stream().wait_stream(s)              # the default stream waits for s
    assert s.query()
    np.testing.assert_array_equal((x * 2).cpu()._np, np.arange(6.0) * 2)


def test_missing_wait_is_visible_on_the_emulator(emulated):
    """The control for the test above: without the wait, the kernel on the default stream
    runs before s's copy and reads the uninitialised bytes."""
    emulated.deferred = True
    s = cuda.Stream()
    with cuda.stream(s):
        x = reftorch.ones(6).cuda(non_blocking=True)  # allocation and copy both on s
    assert not s.query()
    doubled = (x * 2).cpu()._np
    assert not np.array_equal(doubled, np.full(6, 2.0))
    s.synchronize()
    np.testing.assert_array_equal((x * 2).cpu()._np, np.full(6, 2.0))


def test_events_record_wait_query_and_time(device_kind):
    cuda.init()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    assert start.query()                              # never recorded: nothing to wait for
    start.record()
    x = reftorch.ones(1 << 16, device="cuda")
    for _ in range(3):
        x = x + x
    end.record()
    end.synchronize()
    assert end.query()
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float) and elapsed >= 0
    s = cuda.Stream()
    recorded = s.record_event()
    assert isinstance(recorded, cuda.Event) and recorded.device == reftorch.device("cuda", 0)
    s.wait_event(end)
    end.wait(s)
    s.synchronize()
    assert s.query() and recorded.query()


def test_elapsed_time_errors(device_kind):
    cuda.init()
    plain, timed = cuda.Event(), cuda.Event(enable_timing=True)
    plain.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        plain.elapsed_time(timed)
    other = cuda.Event(enable_timing=True)
    timed.record()
    with pytest.raises(ValueError, match="must be recorded"):
        timed.elapsed_time(other)


def test_elapsed_time_needs_completed_events(emulated):
    emulated.deferred = True
    s = cuda.Stream()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record(s)
    end.record(s)
    assert not end.query()
    with pytest.raises(RuntimeError, match="must be completed"):
        start.elapsed_time(end)
    end.synchronize()
    assert start.elapsed_time(end) >= 0


def test_event_records_only_on_its_device(emulated):
    event = cuda.Event()
    event.record(cuda.Stream(device=1))
    assert event.device == reftorch.device("cuda", 1)
    with pytest.raises(RuntimeError, match="Event device 1 does not match recording "
                                           "stream's device 0"):
        event.record(cuda.current_stream(0))
    event.wait(cuda.current_stream(0))                # any device may wait on it


def test_event_ipc_handle_opens_the_same_event(emulated):
    emulated.deferred = True
    event = cuda.Event(interprocess=True)
    handle = event.ipc_handle()                       # not recorded: made on this device now
    assert isinstance(handle, bytes) and len(handle) == 64
    assert event.device == reftorch.device("cuda", 0)
    s = cuda.Stream()
    with cuda.stream(s):
        reftorch.zeros(4).cuda(non_blocking=True)
    event.record(s)
    opened = cuda.Event.from_ipc_handle(0, handle)
    assert not opened.query() and not opened.enable_timing
    opened.synchronize()
    assert event.query() and s.query()
    with pytest.raises(RuntimeError, match="cuIpcGetEventHandle"):
        cuda.Event().ipc_handle()                     # not an interprocess event
    with pytest.raises(RuntimeError, match="64 bytes"):
        cuda.Event.from_ipc_handle(0, b"short")


def test_event_ipc_handle_in_another_process():
    if _shared.NO_BINDINGS is not None or not cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")
    import subprocess
    import sys
    event = cuda.Event(interprocess=True)
    x = reftorch.ones(1 << 20, device="cuda")
    (x * 2).sum()
    event.record()
    code = ("import sys, reftorch, reftorch.cuda as c\n"
            "e = c.Event.from_ipc_handle(0, bytes.fromhex(sys.argv[1]))\n"
            "e.synchronize(); print(e.query())\n")
    run = subprocess.run([sys.executable, "-c", code, event.ipc_handle().hex()],
                         capture_output=True, text=True, env=_shared._subprocess_env(),
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"


def test_synchronize_waits_for_every_stream(emulated):
    emulated.deferred = True
    streams = [cuda.Stream(), cuda.Stream()]
    for s in streams:
        with cuda.stream(s):
            reftorch.zeros(10).cuda(non_blocking=True)
    assert not any(s.query() for s in streams)
    cuda.synchronize()
    assert all(s.query() for s in streams)


def test_non_blocking_copy_keeps_the_host_buffer_until_done(emulated):
    emulated.deferred = True
    s = cuda.Stream()
    values = np.arange(50000, dtype=np.float32)
    with cuda.stream(s):
        x = reftorch.from_numpy(values.copy()).cuda(non_blocking=True)
    driver = cuda._backend()._driver
    assert driver.streams.pending_buffers() == 1      # the host copy is held...
    collect()
    junk = [np.full(50000, -1.0, np.float32) for _ in range(4)]  # reuse freed host memory
    s.synchronize()
    assert driver.streams.pending_buffers() == 0      # ...until the copy has run
    with cuda.stream(s):
        np.testing.assert_array_equal(x.cpu()._np, values)
    del junk


def test_pinned_memory(device_kind):
    cuda.init()
    values = np.arange(12.0).reshape(3, 4)
    host = reftorch.tensor(values)
    pinned = host.pin_memory()
    assert pinned.is_pinned() and not host.is_pinned()
    assert pinned.pin_memory() is pinned and pinned.device.type == "cpu"
    np.testing.assert_array_equal(pinned._np, values)
    on_device = pinned.cuda(non_blocking=True)
    cuda.synchronize()
    np.testing.assert_array_equal(on_device.cpu()._np, values)
    assert not on_device.is_pinned()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        on_device.pin_memory()


def test_non_blocking_copy_from_pinned_memory_reads_it_in_place(emulated):
    emulated.deferred = True
    pinned = reftorch.arange(6.0).pin_memory()
    assert emulated.calls.count("cuMemHostAlloc") == 1
    s = cuda.Stream()
    with cuda.stream(s):
        x = pinned.cuda(non_blocking=True)
    pinned.fill_(-1.0)             # the copy has not run: it reads the pinned memory later
    s.synchronize()
    np.testing.assert_array_equal(x.cpu()._np, np.full(6, -1.0))
    del pinned
    collect()
    cuda.synchronize()             # the pinned memory goes back once no array uses it
    assert emulated.host_memory == {} and emulated.calls.count("cuMemFreeHost") == 1


def test_blocking_copies_return_finished(device_kind):
    cuda.init()
    s = cuda.Stream()
    with cuda.stream(s):
        x = reftorch.arange(10.0).to("cuda", non_blocking=False)
        assert s.query()
        np.testing.assert_array_equal(x.cpu()._np, np.arange(10.0))
    y = reftorch.arange(5.0).cuda(non_blocking=True)
    cuda.synchronize()
    np.testing.assert_array_equal(y.cpu()._np, np.arange(5.0))


# --- devices ----------------------------------------------------------------------------------

def test_device_of_and_device_objects(emulated):
    x1 = reftorch.ones(2, device="cuda:1")
    with cuda.device_of(x1):
        assert cuda.current_device() == 1
    assert cuda.current_device() == 0
    with cuda.device_of(reftorch.ones(2)):            # a cpu tensor: nothing changes
        assert cuda.current_device() == 0
    with cuda.device_of(x1.storage()):
        assert cuda.current_device() == 1
    for spec in (1, "cuda:1", reftorch.device("cuda", 1)):
        with cuda.device(spec):
            assert cuda.current_device() == 1
    assert x1.get_device() == 1 and reftorch.ones(1).get_device() == -1


def test_device_properties_and_memory_info(device_kind):
    cuda.init()
    props = cuda.get_device_properties(0)
    assert props.name == cuda.get_device_name(0)
    assert (props.major, props.minor) == cuda.get_device_capability(0)
    assert props.total_memory > 0 and props.multi_processor_count > 0
    assert "multi_processor_count" in repr(props)
    free, total = cuda.mem_get_info()
    assert 0 <= free <= total <= props.total_memory   # a context may see less than the device


def test_cuda_and_to_choose_the_device(emulated):
    x = reftorch.arange(6.0)
    assert x.cuda().device == reftorch.device("cuda", 0)
    assert x.cuda(1).device == reftorch.device("cuda", 1)
    assert x.cuda("cuda:1").device == reftorch.device("cuda", 1)
    assert x.cuda(reftorch.device("cuda", 1)).get_device() == 1
    with cuda.device(1):
        assert x.cuda().get_device() == 1


def test_copies_between_devices_are_peer_copies(device_kind):
    cuda.init()
    if cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    x = reftorch.arange(12.0).reshape(3, 4).cuda(0)
    y = x.to("cuda:1")
    assert y.device == reftorch.device("cuda", 1)
    np.testing.assert_array_equal(y.cpu()._np, x.cpu()._np)
    if device_kind is not None:
        assert device_kind.calls.count("cuMemcpyPeerAsync") == 1
    back = y.t().to("cuda:0")          # strided source: made dense on cuda:1 first
    np.testing.assert_array_equal(back.cpu()._np, x.cpu()._np.T)
    target = reftorch.zeros(4, 3, device="cuda:1").t()   # strided destination
    target.copy_(x[:, :1])                               # broadcast source
    np.testing.assert_array_equal(target.cpu()._np, np.repeat(x.cpu()._np[:, :1], 4, 1))
    converted = x.to("cuda:1", reftorch.float64)         # a dtype change: through the host
    np.testing.assert_array_equal(converted.cpu()._np, x.cpu()._np)
    if device_kind is not None:
        assert device_kind.calls.count("cuMemcpyPeerAsync") == 3


# --- random numbers ---------------------------------------------------------------------------

def test_seeding_before_initialisation_is_queued(emulated):
    cuda.manual_seed(1234)
    assert not cuda.is_initialized()
    expected = reftorch.randn(5, generator=reftorch.Generator().manual_seed(1234))
    cpu_state = reftorch.get_rng_state()
    got = reftorch.randn(5, device="cuda")
    assert cuda.is_initialized()
    np.testing.assert_array_equal(got.cpu()._np, expected._np)
    assert reftorch.equal(reftorch.get_rng_state(), cpu_state)   # the CPU stream untouched
    assert cuda.initial_seed() == 1234


def test_queued_seeding_keeps_the_latest_call_of_each_kind(emulated):
    for value in range(100):
        reftorch.manual_seed(value)                   # seeds every GPU: queued
    cuda.manual_seed(5)                               # the current device, after that
    assert len(cuda_random._queued) == 2
    cuda.init()
    assert cuda.initial_seed() == 5
    assert cuda.default_generators[1].initial_seed() == 99
    cuda.manual_seed_all(4)
    assert [g.initial_seed() for g in cuda.default_generators] == [4, 4]


def test_devices_have_their_own_generators(emulated):
    cuda.init()
    cuda.manual_seed_all(7)
    a0 = reftorch.rand(4, device="cuda:0")
    a1 = reftorch.rand(4, device="cuda:1")
    np.testing.assert_array_equal(a0.cpu()._np, a1.cpu()._np)   # one seed, two streams
    cuda.manual_seed(8)                                          # the current device only
    assert cuda.initial_seed() == 8
    assert cuda.default_generators[1].initial_seed() == 7
    assert len(cuda.default_generators) == 2
    assert cuda.default_generators[0].device == reftorch.device("cuda", 0)
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator"):
        reftorch.rand(2, device="cuda", generator=reftorch.Generator())


def test_rng_state_round_trip(emulated):
    cuda.manual_seed_all(3)
    state = cuda.get_rng_state()
    first = reftorch.randn(6, device="cuda").cpu()._np
    cuda.set_rng_state(state)
    np.testing.assert_array_equal(reftorch.randn(6, device="cuda").cpu()._np, first)
    states = cuda.get_rng_state_all()
    assert len(states) == 2 and states[0].dtype is reftorch.uint8
    reftorch.randn(6, device="cuda:1")
    cuda.set_rng_state_all(states)
    assert reftorch.equal(cuda.get_rng_state(1), states[1])
    cuda.seed()
    seeded = cuda.initial_seed()
    cuda.seed_all()
    assert cuda.default_generators[0].initial_seed() == cuda.default_generators[1].initial_seed()
    assert isinstance(seeded, int)


def test_torch_manual_seed_seeds_the_gpus_too(emulated):
    reftorch.manual_seed(99)
    assert not cuda.is_initialized()
    a = reftorch.randn(3, device="cuda").cpu()._np
    reftorch.manual_seed(99)
    np.testing.assert_array_equal(reftorch.randn(3, device="cuda").cpu()._np, a)


def test_fork_rng_restores_the_gpu_generators(emulated):
    with reftorch.random.fork_rng():                  # before initialisation: cpu only
        pass
    assert not cuda.is_initialized()
    cuda.manual_seed_all(11)
    first = reftorch.rand(3, device="cuda:1").cpu()._np
    cuda.manual_seed_all(11)
    with reftorch.random.fork_rng():
        reftorch.rand(3, device="cuda:1")
    with reftorch.random.fork_rng(devices=[1]):
        reftorch.rand(3, device="cuda:1")
    np.testing.assert_array_equal(reftorch.rand(3, device="cuda:1").cpu()._np, first)


def test_seeding_without_a_backend_is_ignored(monkeypatch):
    from reftorch import _storage
    monkeypatch.delitem(_storage._BACKENDS, "cuda")
    cuda.manual_seed(1)
    cuda.manual_seed_all(1)
    cuda.seed()
    cuda.seed_all()
    assert cuda_random._queued == {}


# --- legacy types -----------------------------------------------------------------------------

def test_legacy_cuda_tensor_types(emulated):
    x = cuda.FloatTensor(2, 3)
    assert x.shape == (2, 3) and x.is_cuda and x.dtype is reftorch.float32
    assert isinstance(x, cuda.FloatTensor) and not isinstance(x, reftorch.FloatTensor)
    assert not isinstance(x.cpu(), cuda.FloatTensor)
    assert x.type() == "torch.cuda.FloatTensor"
    longs = cuda.LongTensor([1, 2, 3])
    assert longs.dtype is reftorch.int64 and longs.is_cuda
    np.testing.assert_array_equal(longs.cpu()._np, [1, 2, 3])
    moved = reftorch.ones(2).type("torch.cuda.DoubleTensor")
    assert moved.is_cuda and moved.dtype is reftorch.float64
    assert isinstance(moved, cuda.DoubleTensor)
    assert moved.type(reftorch.FloatTensor).device.type == "cpu"
    for name, dtype in (("HalfTensor", reftorch.float16), ("BFloat16Tensor", reftorch.bfloat16),
                        ("IntTensor", reftorch.int32), ("ShortTensor", reftorch.int16),
                        ("CharTensor", reftorch.int8), ("ByteTensor", reftorch.uint8),
                        ("BoolTensor", reftorch.bool)):
        cls = getattr(cuda, name)
        assert cls.dtype is dtype and repr(cls) == f"<class 'torch.cuda.{name}'>"
        assert isinstance(reftorch.zeros(1, dtype=dtype, device="cuda"), cls)


# --- nvtx -------------------------------------------------------------------------------------

def test_nvtx_ranges_nest_and_report_depth():
    nvtx = cuda.nvtx
    assert nvtx.range_push("outer") == 0
    assert nvtx.range_push("inner") == 1
    nvtx.mark("a point")
    assert nvtx.range_pop() == 1
    assert nvtx.range_pop() == 0
    assert nvtx.range_pop() == -1                     # nothing open

    @nvtx.range("call {}", 1)
    def annotated():
        depth = nvtx.range_push("probe")
        nvtx.range_pop()
        return depth

    assert annotated() == 1 and nvtx.range_pop() == -1
    with nvtx.range("block"):
        assert nvtx.range_push("probe") == 1
        nvtx.range_pop()
    assert nvtx.range_pop() == -1
    nvtx.range_end(nvtx.range_start("free range"))
    with pytest.raises(TypeError):
        nvtx.mark(3)


# --- comm -------------------------------------------------------------------------------------

def test_broadcast_and_broadcast_coalesced(emulated):
    x = on_cuda([[1.0, 2.0], [3.0, 4.0]])
    copies = cuda.comm.broadcast(x, (0, 1))
    assert copies[0] is x and copies[1].device == reftorch.device("cuda", 1)
    np.testing.assert_array_equal(copies[1].cpu()._np, x.cpu()._np)
    out = [reftorch.empty(2, 2, device="cuda:1")]
    assert cuda.comm.broadcast(x, out=out)[0] is out[0]
    np.testing.assert_array_equal(out[0].cpu()._np, x.cpu()._np)
    with pytest.raises(RuntimeError, match="Exactly one"):
        cuda.comm.broadcast(x)
    y = on_cuda([5, 6, 7], dtype=reftorch.int64)
    (on0, on1) = cuda.comm.broadcast_coalesced([x, y], [0, 1])
    assert on0[0] is x and on0[1] is y
    assert [t.get_device() for t in on1] == [1, 1] and on1[1].dtype is reftorch.int64
    np.testing.assert_array_equal(on1[1].cpu()._np, [5, 6, 7])


def test_reduce_add(emulated):
    a, b = on_cuda([1.0, 2.0], device="cuda:0"), on_cuda([10.0, 20.0], device="cuda:1")
    total = cuda.comm.reduce_add([a, b], destination=1)
    assert total.get_device() == 1
    np.testing.assert_array_equal(total.cpu()._np, [11, 22])
    assert cuda.comm.reduce_add([a, b]).get_device() == 0
    np.testing.assert_array_equal(a.cpu()._np, [1, 2])          # inputs untouched
    with pytest.raises(ValueError, match="input 1 has invalid size: got 3, but expected 2"):
        cuda.comm.reduce_add([a, on_cuda([1.0, 2.0, 3.0], device="cuda:1")])
    with pytest.raises(RuntimeError, match="same GPU"):
        cuda.comm.reduce_add([b], destination=0)


def test_scatter_and_gather(emulated):
    x = reftorch.arange(10.0).reshape(5, 2)
    pieces = cuda.comm.scatter(x, [0, 1])
    assert [p.get_device() for p in pieces] == [0, 1]
    assert [tuple(p.shape) for p in pieces] == [(3, 2), (2, 2)]
    sized = cuda.comm.scatter(x, [1, 0], chunk_sizes=[1, 4], dim=0,
                              streams=[cuda.Stream(1), cuda.Stream(0)])
    assert [tuple(p.shape) for p in sized] == [(1, 2), (4, 2)]
    np.testing.assert_array_equal(sized[1].cpu()._np, x._np[1:])
    with pytest.raises(RuntimeError, match="sum to 3, but expected 5"):
        cuda.comm.scatter(x, [0, 1], chunk_sizes=[1, 2])
    by_column = cuda.comm.scatter(x, [0, 1], dim=1)
    gathered = cuda.comm.gather(by_column, dim=1)
    assert gathered.get_device() == 0
    np.testing.assert_array_equal(gathered.cpu()._np, x._np)
    on_host = cuda.comm.gather(pieces, destination=-1)
    assert on_host.device.type == "cpu"
    np.testing.assert_array_equal(on_host._np, x._np)
    assert cuda.comm.gather(pieces, destination=1).get_device() == 1
    with pytest.raises(RuntimeError, match="same sizes except in dimension 0"):
        cuda.comm.gather([pieces[0], by_column[0]])
