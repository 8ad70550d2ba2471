"""The caches on reftorch-cuda's small-op path give exactly what working it out again gives:

  * an elementwise pass's plan (broadcast shape, the new result's strides, the coalesced
    geometry), cached by the operands' shapes and strides: a hit computes what a miss does;
    operands of other shapes, strides or dtypes, `out=` and in-place calls never share an
    entry; the cache stays within its bound;
  * add/sub/mul/div's instantiation, cached by (dtypes, operand dtypes): each dtype mix keeps
    its own kernel, and a mix the kernels lack still declines to the counted fallback;
  * a reduction's result comes from the same allocator as before (memory counters exact).

All on the emulated driver, against the reference on cpu.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
import reftorch.cuda as cuda
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed "
                    "(pip install ./plugin_cuda)")
from reftorch._ops.copy import empty_like_layout  # noqa: E402
from reftorch_cuda import kernel_base  # noqa: E402
from spec_tests import test_plugin_cuda as _shared  # noqa: E402

plugin, kernel_cache_dir, compiled = _shared.plugin, _shared.kernel_cache_dir, _shared.compiled
emulated = _shared.emulated


def cpu_values(shape, dtype=reftorch.float32, seed=0):
    rng = np.random.default_rng(seed)
    return reftorch.tensor(rng.standard_normal(shape).astype(np.float32)).to(dtype)


def same(cuda_result, cpu_result):
    assert cuda_result.dtype is cpu_result.dtype
    assert tuple(cuda_result.shape) == tuple(cpu_result.shape)
    np.testing.assert_array_equal(cuda_result.cpu()._np, cpu_result._np)


@pytest.fixture
def passes(monkeypatch):
    """The elementwise plan cache, empty at the start of the test."""
    monkeypatch.setattr(kernel_base, "_PASSES", {})
    return kernel_base._PASSES


def test_a_cached_pass_gives_what_a_new_one_gives(emulated, passes):
    a, b = cpu_values((4, 6), seed=1), cpu_values((4, 6), seed=2)
    x, y = a.cuda(), b.cuda()
    first = x + y                               # miss
    assert len(passes) == 1
    second = x + y                              # hit
    assert len(passes) == 1
    same(first, a + b)
    same(second, a + b)
    assert first.data_ptr() != second.data_ptr()   # each call has its own result


@pytest.mark.parametrize("make", [
    lambda t: t.t().contiguous().t(),           # dense, column-major
    lambda t: t[:, ::2],                        # strided
    lambda t: t[:1],                            # broadcast against (4, 6)
    lambda t: t.reshape(24),                    # another shape, same memory
])
def test_layouts_never_share_a_pass(emulated, passes, make):
    a, b = cpu_values((4, 6), seed=3), cpu_values((4, 6), seed=4)
    x, y = a.cuda(), b.cuda()
    x + y                                        # the plain layout's entry
    other = make(b)
    mine = make(y)
    first = a.reshape(24) if other.dim() == 1 else a[:, :other.shape[1]]
    on_device = first.cuda()
    result = on_device + mine
    assert len(passes) == 2
    same(result, first + other)
    # the result keeps the layout the uncached path gives: the first full-shape input's
    # strides when they are dense
    full = on_device if on_device._shape == result._shape else mine
    assert result._strides == empty_like_layout(full)._strides


def test_column_major_result_keeps_its_strides_on_a_hit(emulated, passes):
    a = cpu_values((3, 5), seed=5).t().contiguous().t()
    x = a.cuda()
    for _ in range(2):
        result = x.relu()
        assert result._strides == x._strides
        same(result, a.relu())


def test_dtypes_share_the_pass_but_not_the_kernel(emulated, passes):
    """A layout's plan serves every dtype (strides are in elements), each with its own
    instantiation: the results are each dtype's."""
    for dtype in (reftorch.float32, reftorch.float64, reftorch.float16, reftorch.bfloat16):
        a, b = cpu_values((5,), dtype, 6), cpu_values((5,), dtype, 7)
        same(a.cuda() * b.cuda(), a * b)
        same(a.cuda() * 0.5, a * 0.5)           # a float32 number operand of a 16-bit op
    assert emulated.launches[-1].startswith("binary_kernel<rt_bfloat16, MulOp")


def test_out_and_in_place_calls_have_their_own_pass(emulated, passes):
    a, b = cpu_values((2, 3), seed=8), cpu_values((2, 3), seed=9)
    x, y = a.cuda(), b.cuda()
    x + y
    out = reftorch.empty((3, 2)).cuda().t()      # a column-major out
    reftorch.add(x, y, out=out)
    same(out, a + b)
    assert len(passes) == 2
    x.add_(y)                                    # out is x: a layout of its own again
    same(x, a + b)
    assert len(passes) == 3


def test_an_overlapping_out_still_declines_on_a_hit(emulated, passes):
    """writable() depends on which storage `out` shares, not on layouts: checked each call."""
    base = cpu_values((7,), seed=10)
    for _ in range(2):
        plugins.reset_fallbacks()
        x = base.cuda()
        reftorch.add(x[:6], x[1:], out=x[1:])    # overlapping: the copy-to-cpu fallback
        assert plugins.fallbacks()
        expected = base.clone()
        reftorch.add(expected[:6], expected[1:], out=expected[1:])
        same(x, expected)


def test_a_mismatched_out_is_not_served_from_a_cached_pass(emulated, passes):
    x, y = cpu_values((3,), seed=11).cuda(), cpu_values((3,), seed=12).cuda()
    out = reftorch.empty((3,), dtype=reftorch.float64).cuda()
    plugins.reset_fallbacks()
    for _ in range(2):
        reftorch.add(x, y, out=out)               # result float32 into float64: declines
    same(out, (x.cpu() + y.cpu()).to(reftorch.float64))
    assert plugins.fallbacks()


def test_pass_cache_is_bounded(emulated, passes, monkeypatch):
    monkeypatch.setattr(kernel_base, "PASSES", 3)
    for n in range(1, 9):
        a = cpu_values((n,), seed=n)
        same(a.cuda().relu(), a.relu())
        assert len(passes) <= 3


def test_alpha_is_never_taken_from_another_call(emulated):
    a, b = cpu_values((6,), seed=13), cpu_values((6,), seed=14)
    x, y = a.cuda(), b.cuda()
    for alpha in (1, 2.5, 1.0, -0.0, -3, 1):
        same(x.add(y, alpha=alpha), a.add(b, alpha=alpha))
        same(x.sub(y, alpha=alpha), a.sub(b, alpha=alpha))


def test_an_unserved_dtype_mix_still_takes_the_counted_fallback(emulated):
    """The cached decision 'decline' stays a decline (float16 tensor + float64 0-dim tensor
    promotes to float16, which the kernels take only with a float32 operand)."""
    a = cpu_values((4,), reftorch.float16, 15)
    s = reftorch.tensor(0.25, dtype=reftorch.float64)
    for _ in range(2):
        plugins.reset_fallbacks()
        same(a.cuda() + s.cuda(), a + s)
        assert plugins.fallbacks()


def test_number_operands_and_autograd_on_the_short_path(emulated):
    """One tensor and a number: the tensor's dtype unless the number's kind is higher."""
    i = reftorch.tensor([1, 2, 3], dtype=reftorch.int32)
    assert (i.cuda() * 2).dtype is reftorch.int32
    assert (i.cuda() * 2.5).dtype is reftorch.get_default_dtype()
    w = cpu_values((3,), seed=16).cuda().requires_grad_()
    y = w * 3.0
    assert y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.cpu()._np, np.full(3, 3.0, np.float32))


def test_memory_counters_stay_exact_with_kernel_allocated_results(emulated):
    x = cpu_values((300,), seed=17).cuda()
    x.mul(2.0)                                   # the number's device constant, kept
    cuda.reset_peak_memory_stats()
    before = cuda.memory_stats()
    kept = [x + x, x.relu(), x.sum(), x.mul(2.0)]
    stats = cuda.memory_stats()
    assert stats["allocation.all.current"] == before["allocation.all.current"] + 4
    assert stats["requested_bytes.all.current"] == \
        before["requested_bytes.all.current"] + 3 * 300 * 4 + 4
    del kept
    assert cuda.memory_stats()["requested_bytes.all.current"] == \
        before["requested_bytes.all.current"]


def test_a_freed_block_handed_straight_back_keeps_the_counters_exact(emulated):
    """The allocator gives a result's freed block to the next request of its size at once;
    the counters and peaks are what caching it and taking it again would give."""
    x = cpu_values((120,), seed=18).cuda()
    x.relu()
    cuda.reset_peak_memory_stats()
    before = cuda.memory_stats()
    y = x[:100].relu()                           # 400 bytes in a 512-byte block
    ptr = y.data_ptr()
    del y
    z = x.relu()                                 # 480 bytes: the same block
    assert z.data_ptr() == ptr
    stats = cuda.memory_stats()
    for name, grown in (("requested_bytes", 480), ("allocated_bytes", 512), ("allocation", 1)):
        assert stats[f"{name}.all.current"] == before[f"{name}.all.current"] + grown
        assert stats[f"{name}.all.peak"] == before[f"{name}.all.current"] + grown
    assert stats["reserved_bytes.all.current"] == before["reserved_bytes.all.current"]
    same(z, x.cpu().relu())


def test_param_buffer_layout_puts_the_addresses_after_the_slots():
    from reftorch_cuda.device import ParamBuffer
    buffer = ParamBuffer()
    packer, slots = buffer.layout(1, 3, 1)      # geometry, out, a, b, alpha
    assert packer.size == 8 * (5 + 3)
    assert slots == (buffer.address + 40, buffer.address + 48, buffer.address + 56)
    assert buffer.layout(1, 3, 1) is buffer.layout(1, 3, 1)
    assert buffer.layout(2, 2, 0)[1] == (buffer.address + 32, buffer.address + 40)
    with pytest.raises(ValueError, match="do not fit"):
        buffer.layout(1, ParamBuffer.BYTES // 16, 0)


def test_threads_launch_through_their_own_parameter_buffers(emulated):
    """Each thread packs its launches' parameters into its own buffer: concurrent small ops
    on four threads all compute their own operands' results."""
    import threading
    pairs = [(cpu_values((9,), seed=20 + i), cpu_values((9,), seed=40 + i)) for i in range(4)]
    sums = [a.cuda().sum().cpu() for a, _ in pairs]   # the kernel's order, one thread
    errors, buffers = [], set()

    def work(a, b, total):
        try:
            x, y = a.cuda(), b.cuda()
            for _ in range(50):
                same(x + y, a + b)
                same(x.sum(), total)
            buffers.add(id(x._storage._driver._local.params))
        except BaseException as exc:   # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(*pair, total))
               for pair, total in zip(pairs, sums)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    assert len(buffers) == 4
