"""The C plugin's constant, reflection and replication padding (reftorch_cpu.padding over _gather)
against the reference kernels.

The forward moves elements, so it must give the reference's result bit for bit (compared as
bytes: NaN payloads and -0 included), in the reference's layout, for every dtype it
registers, over 1-3 padded dims, cropping amounts, fill values, contiguous / channels-last /
transposed / strided / offset inputs, and sizes on either side of the C loop's thread
threshold. The backward must be bit for bit too: the
same sums in the same order as the reference's np.add.at passes. Each comparison runs the
same call with the plugin and inside `reftorch.plugins.use_reference_kernels()`; the C call
counter tells whether C really ran.
"""
import numpy as np
import pytest

import reftorch
import reftorch.nn.functional as F

try:
    from reftorch_cpu import _gather
    # the masked tests' plugin fixture and values (NaN and -0 among the floats)
    from .test_plugin_cpu_masked import plugin_loaded, values
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

__all__ = ["plugin_loaded"]  # the masked tests' autouse fixture, used here too

DTYPES = [reftorch.float32, reftorch.float64, reftorch.int64, reftorch.int32, reftorch.int16,
          reftorch.int8, reftorch.uint8, reftorch.float16, reftorch.bfloat16, reftorch.complex64]
MODES = ["reflect", "replicate"]


def as_bytes(t):
    return np.ascontiguousarray(t.detach().numpy()).view(np.uint8)


def run_both(fn):
    """fn() with the plugin (its size threshold off) and on the reference kernels, and how
    many C calls ran."""
    before = _gather.calls()
    with reftorch.plugins.all_sizes():
        got = fn()
    ran = _gather.calls() - before
    with reftorch.plugins.use_reference_kernels():
        want = fn()
    return got, want, ran


def assert_same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride()
    assert np.array_equal(as_bytes(got), as_bytes(want))


LAYOUTS = {
    "contiguous": lambda t: t,
    "channels_last": lambda t: t.contiguous(memory_format=reftorch.channels_last)
    if t.dim() == 4 else t,
    "transposed": lambda t: t.transpose(-1, -2).contiguous().transpose(-1, -2),
    "batch transposed": lambda t: t.transpose(0, 1).contiguous().transpose(0, 1),
    "strided": lambda t: t[:, :, ::2] if t.shape[2] > 2 else t,
    "offset": lambda t: reftorch.cat([t.reshape(-1)[:5], t.reshape(-1)])[5:].reshape(t.shape),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_is_the_references_bits_for_every_dtype(mode, dtype):
    x = values((2, 3, 40, 50), dtype, 1)
    got, want, ran = run_both(lambda: F.pad(x, (3, 2, 1, 4), mode))
    assert ran == 1
    assert_same(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_forward_in_every_layout(mode, layout):
    x = LAYOUTS[layout](values((4, 6, 30, 24), reftorch.float32, 2))
    got, want, ran = run_both(lambda: F.pad(x, (2, 3, 3, 1), mode))
    assert ran == 1
    assert_same(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad", [
    ((4, 8, 300), (5, 7)),                          # 1-d
    ((8, 300), (0, 4)),                             # 1-d, unbatched
    ((2, 3, 9, 20, 30), (1, 2, 3, 0, 2, 1)),        # 3-d
    ((3, 9, 20, 30), (4, 4, 1, 1, 0, 8)),           # 3-d, unbatched
    ((16, 64, 56, 56), (2, 2, 2, 2)),               # past the thread threshold
])
def test_forward_over_one_to_three_dims(mode, shape, pad):
    x = values(shape, reftorch.float32, 3)
    got, want, ran = run_both(lambda: F.pad(x, pad, mode))
    assert ran == 1
    assert_same(got, want)


def test_replicate_crops_like_the_reference():
    x = values((4, 5, 40, 30), reftorch.float64, 4)
    got, want, ran = run_both(lambda: [F.pad(x, (-3, 2, 4, -5), "replicate"),
                                       F.pad(x, (-30, 1, 0, 0), "replicate")])
    assert ran == 2
    for g, w in zip(got, want):
        assert_same(g, w)


def test_small_calls_go_to_the_reference():
    x = values((2, 3, 5, 6), reftorch.float32, 5)
    before = _gather.calls()
    got = F.pad(x, (2, 2, 2, 2), "reflect")
    assert _gather.calls() == before
    with reftorch.plugins.use_reference_kernels():
        assert_same(got, F.pad(x, (2, 2, 2, 2), "reflect"))


@pytest.mark.parametrize("dtype", DTYPES + [reftorch.bool])
def test_constant_pad_is_the_references_bits_for_every_dtype(dtype):
    x = values((2, 3, 40, 50), dtype, 10)
    if dtype.is_floating_point or dtype.is_complex:
        fills = [0, 1.5, -2.7, float("nan"), True]
    elif dtype is reftorch.bool:
        fills = [0, True, 2.5]
    else:
        fills = [0, 1, 2.7, True]      # (truncated; a negative value would not fit uint8)
    got, want, ran = run_both(lambda: [F.pad(x, (3, 2, 1, 4), value=v) for v in fills])
    assert ran == len(fills)
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_constant_pad_in_every_layout_and_its_memory_format(layout):
    """The result is laid out in the format the input suggests (channels-last stays so),
    written that way by the C loop itself."""
    x = LAYOUTS[layout](values((4, 6, 30, 24), reftorch.float32, 11))
    got, want, ran = run_both(lambda: [F.pad(x, (2, 3, 3, 1), value=0.5),
                                       F.pad(x, (-2, 3, 1, -4, 0, 1), value=-1.0)])
    assert ran == 2
    for g, w in zip(got, want):
        assert_same(g, w)


def test_constant_pad_crops_and_pads_any_dims():
    x = values((3, 5, 7, 9, 11), reftorch.float64, 12).contiguous(
        memory_format=reftorch.channels_last_3d)
    got, want, ran = run_both(lambda: [F.pad(x, (1, -2, -3, 2, 0, 1, 2, 2)),
                                       F.pad(x, (-11, 1)), F.pad(x, (0, 0, 0, 0))])
    assert ran == 3
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [reftorch.float32, reftorch.float64])
@pytest.mark.parametrize("shape,pad", [((4, 8, 300), (5, 7)),
                                       ((4, 6, 30, 24), (2, 3, 3, 1)),
                                       ((2, 3, 9, 20, 30), (1, 2, 3, 0, 2, 1))])
def test_backward_is_the_references_bits(mode, dtype, shape, pad):
    x = values(shape, dtype, 6).nan_to_num()
    grad = values(tuple(F.pad(x, pad, mode).shape), dtype, 7).nan_to_num()

    def input_grad():
        leaf = x.clone().requires_grad_()
        F.pad(leaf, pad, mode).backward(grad)
        return leaf.grad
    got, want, ran = run_both(input_grad)
    assert ran == 1 + len(pad) // 2    # the forward, then one pass per padded dim
    assert_same(got, want)


def test_results_do_not_depend_on_the_thread_count():
    x = values((16, 64, 56, 56), reftorch.float32, 8)
    grad = values((16, 64, 60, 60), reftorch.float32, 9).nan_to_num()
    previous = _gather.set_num_threads(1)
    try:
        outs = {}
        for threads in (1, 2, 3):
            _gather.set_num_threads(threads)
            leaf = x.clone().requires_grad_()
            y = F.pad(leaf, (2, 2, 2, 2), "reflect")
            y.backward(grad)
            outs[threads] = (as_bytes(y), as_bytes(leaf.grad))
    finally:
        _gather.set_num_threads(previous)
    for threads in (2, 3):
        assert all(np.array_equal(a, b) for a, b in zip(outs[threads], outs[1]))


# ---------------------------------------------------------------------------------------------
# The raw C entry points refuse what would read or write outside a buffer

def test_gather_checks_its_arguments():
    a = np.arange(24, dtype=np.float32)
    out = np.empty(2 * 5, np.float32)
    ok = (None, np.array([1, 0, 1, 2, 1], np.int64))
    _gather.gather(out, a, 0, (12, 1), (2, 3), ok, None)
    assert out.tolist() == [1, 0, 1, 2, 1, 13, 12, 13, 14, 13]
    fill = np.array([-7.0], np.float32)
    _gather.gather(out, a, 0, (12, 1), (2, 3), (np.array([1, -1]), ok[1] - 1), fill)
    assert out.tolist() == [12, -7, 12, 13, 12] + [-7] * 5
    with pytest.raises(IndexError, match="out of range"):
        _gather.gather(out, a, 0, (12, 1), (2, 3), (None, np.array([0, 1, 3, 1, 0])), None)
    with pytest.raises(IndexError, match="out of range"):    # -1 only with a fill value
        _gather.gather(out, a, 0, (12, 1), (2, 3), (None, np.array([0, -1, 1, 1, 0])), None)
    with pytest.raises(IndexError, match="out of range"):
        _gather.gather(out, a, 0, (12, 1), (2, 3), (None, np.array([0, -2, 1, 1, 0])), fill)
    with pytest.raises(ValueError, match="buffer holds"):      # a's view past its end
        _gather.gather(out, a, 20, (12, 1), (2, 3), ok, None)
    with pytest.raises(ValueError, match="buffer holds"):      # a's strides reach past it
        _gather.gather(out, a, 0, (13, 6), (2, 3), ok, None)
    with pytest.raises(ValueError, match="buffer holds"):      # out too small
        _gather.gather(np.empty(9, np.float32), a, 0, (12, 1), (2, 3), ok, None)
    with pytest.raises(TypeError, match="width"):
        _gather.gather(np.empty(10, np.float64), a, 0, (12, 1), (2, 3), ok, None)
    with pytest.raises(TypeError, match="fill"):
        _gather.gather(out, a, 0, (12, 1), (2, 3), ok, np.zeros(1, np.float64))
    with pytest.raises(TypeError, match="fill"):
        _gather.gather(out, a, 0, (12, 1), (2, 3), ok, np.zeros(0, np.float32))
    with pytest.raises(TypeError, match="int64"):
        _gather.gather(out, a, 0, (12, 1), (2, 3), (None, ok[1].astype(np.int32)), None)
    with pytest.raises(ValueError, match="per dim"):
        _gather.gather(out, a, 0, (12, 1), (2, 3), ok[1:], None)
    with pytest.raises(ValueError, match="at least one dim"):
        _gather.gather(out, a, 0, (), (), (), None)


def test_index_add_checks_its_arguments():
    a = np.ones(2 * 5, np.float64)
    out = np.full(2 * 3, np.nan)
    index = np.array([1, 0, 1, 2, 1], np.int64)
    _gather.index_add(out, a, 2, 3, 1, index)
    assert out.tolist() == [1.0, 3.0, 1.0] * 2
    with pytest.raises(IndexError, match="out of range"):
        _gather.index_add(out, a, 2, 3, 1, np.array([1, 0, 3, 2, 1], np.int64))
    with pytest.raises(ValueError, match="buffer holds"):
        _gather.index_add(np.empty(5), a, 2, 3, 1, index)
    with pytest.raises(ValueError, match="buffer holds"):
        _gather.index_add(out, np.ones(9), 2, 3, 1, index)
    with pytest.raises(TypeError):
        _gather.index_add(out, a.astype(np.float32), 2, 3, 1, index)
    with pytest.raises(TypeError):
        _gather.index_add(out.astype(np.int64), a.astype(np.int64), 2, 3, 1, index)
