"""The C plugin's upsampling (reftorch_cpu.upsampling over _gather) against the reference.

Every mode runs the reference's own per-axis indices and weights: nearest modes gather,
linear and cubic ones add each output's tap products in the reference's order. So every
result must be the reference's bit for bit (compared as bytes), in the reference's layout,
for each mode, dtype, layout and size, on 1 and several threads; the C call counter tells
whether C really ran.
"""
import numpy as np
import pytest

import reftorch
import reftorch.nn.functional as F

try:
    from reftorch_cpu import _gather
    # the masked tests' plugin fixture and values (NaN and -0 among the floats); the
    # padding tests' bit-for-bit comparison against the reference through _gather
    from .test_plugin_cpu_masked import plugin_loaded, values
    from .test_plugin_cpu_padding import as_bytes, assert_same, run_both
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

__all__ = ["plugin_loaded"]  # the masked tests' autouse fixture, used here too

FLOATING = [reftorch.float32, reftorch.float64, reftorch.float16, reftorch.bfloat16]
CASES = [   # (mode, input shape, interpolate's keywords, C passes)
    ("nearest", (2, 3, 10, 12), {"scale_factor": 2}, 1),
    ("nearest", (2, 3, 10, 12), {"size": (7, 19)}, 1),
    ("nearest-exact", (2, 3, 10, 12), {"size": (7, 29)}, 1),
    ("nearest", (2, 3, 4, 5, 6), {"scale_factor": (2, 1.5, 3)}, 1),
    ("linear", (2, 3, 30), {"size": 71}, 1),
    ("linear", (2, 3, 30), {"size": 11, "align_corners": True}, 1),
    ("bilinear", (2, 3, 10, 12), {"scale_factor": 2}, 2),
    ("bilinear", (2, 3, 10, 12), {"size": (7, 19), "align_corners": True}, 2),
    ("bilinear", (1, 2, 10, 12), {"scale_factor": (0.5, 3.3)}, 2),
    ("bicubic", (2, 3, 10, 12), {"size": (23, 9)}, 2),
    ("bicubic", (2, 3, 10, 12), {"scale_factor": 2, "align_corners": True}, 2),
    ("trilinear", (2, 3, 4, 5, 6), {"scale_factor": 1.7}, 3),
]


@pytest.mark.parametrize("mode,shape,kw,passes", CASES)
@pytest.mark.parametrize("dtype", FLOATING)
def test_every_mode_gives_the_references_bits(mode, shape, kw, passes, dtype):
    x = values(shape, dtype, 1)
    got, want, ran = run_both(lambda: F.interpolate(x, mode=mode, **kw))
    assert ran == passes
    assert_same(got, want)


@pytest.mark.parametrize("layout", ["channels_last", "transposed", "strided", "offset"])
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_any_input_layout(layout, mode):
    x = values((3, 4, 11, 13), reftorch.float32, 2)
    x = {"channels_last": lambda: x.contiguous(memory_format=reftorch.channels_last),
         "transposed": lambda: x.transpose(2, 3).contiguous().transpose(2, 3),
         "strided": lambda: x[:, ::2],
         "offset": lambda: reftorch.cat([x.reshape(-1)[:3], x.reshape(-1)])[3:].reshape(
             x.shape)}[layout]()
    got, want, ran = run_both(lambda: F.interpolate(x, scale_factor=2, mode=mode))
    assert ran >= 1
    assert_same(got, want)


def test_nearest_moves_uint8_and_empty_batches_stay_empty():
    x = values((2, 3, 10, 12), reftorch.float32, 3).abs().to(reftorch.uint8)
    got, want, ran = run_both(lambda: F.interpolate(x, scale_factor=3))
    assert ran == 1
    assert_same(got, want)
    empty = values((0, 2, 3, 3), reftorch.float32, 4)
    got, want, _ = run_both(lambda: F.interpolate(empty, size=4, mode="bilinear"))
    assert_same(got, want)


def _input_gradient(x, mode, kw):
    x = x.detach().requires_grad_()
    y = F.interpolate(x, mode=mode, **kw)
    y.backward(values(tuple(y.shape), x.dtype, 9))
    return x.grad


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_results_do_not_depend_on_the_thread_count(direction):
    x = values((8, 32, 40, 40), reftorch.float32, 5)
    run = {"forward": lambda mode: F.interpolate(x, scale_factor=2, mode=mode),
           "backward": lambda mode: _input_gradient(x, mode, {"scale_factor": 2})}[direction]
    previous = _gather.set_num_threads(1)
    try:
        outs = {}
        for threads in (1, 2, 3):
            _gather.set_num_threads(threads)
            outs[threads] = [as_bytes(run(mode)) for mode in ("nearest", "bilinear", "bicubic")]
    finally:
        _gather.set_num_threads(previous)
    for threads in (2, 3):
        assert all(np.array_equal(a, b) for a, b in zip(outs[threads], outs[1]))


def test_taps_checks_its_arguments():
    a = np.arange(2 * 3 * 4, dtype=np.float32)
    out = np.empty(2 * 2 * 4, np.float32)
    index = np.array([[0, 1], [2, 1]], np.int64)
    weights = np.array([[0.5, 0.5], [1.0, 2.0]], np.float32)
    _gather.taps(out, a, 2, 3, 2, 4, index, weights)
    rows = a.reshape(2, 3, 4)
    np.testing.assert_array_equal(out.reshape(2, 2, 4)[:, 0], rows[:, 0] * 0.5 + rows[:, 1] * 0.5)
    np.testing.assert_array_equal(out.reshape(2, 2, 4)[:, 1], rows[:, 2] + rows[:, 1] * 2)
    with pytest.raises(IndexError, match="out of range"):
        _gather.taps(out, a, 2, 3, 2, 4, np.array([[0, 3], [2, 1]], np.int64), weights)
    with pytest.raises(ValueError, match="buffer holds"):
        _gather.taps(out, a[:-1], 2, 3, 2, 4, index, weights)
    with pytest.raises(ValueError, match=r"\(n, T\)"):
        _gather.taps(out, a, 2, 3, 2, 4, index, weights[:1])
    with pytest.raises(TypeError):
        _gather.taps(out, a, 2, 3, 2, 4, index, weights.astype(np.float64))


@pytest.mark.parametrize("mode,shape,kw,passes", CASES)
@pytest.mark.parametrize("dtype", FLOATING)
def test_every_modes_backward_gives_the_references_bits(mode, shape, kw, passes, dtype):
    """upsample_*_backward: one weighted index_add per spatial axis, the reference's
    np.add.at in its order (after the forward's passes, also in C)."""
    x = values(shape, dtype, 1)
    got, want, ran = run_both(lambda: _input_gradient(x, mode, kw))
    assert ran == passes + len(shape) - 2
    assert_same(got, want)


def test_weighted_index_add_checks_its_arguments():
    a = np.arange(2 * 2 * 4, dtype=np.float32)          # (outer 2, n 2, inner 4)
    out = np.full(2 * 3 * 4, np.nan, np.float32)        # (outer 2, size 3, inner 4)
    index = np.array([[0, 1], [2, 1]], np.int64)
    weights = np.array([[0.5, 0.25], [1.0, 2.0]], np.float32)
    _gather.index_add(out, a, 2, 3, 4, index.reshape(-1), weights.reshape(-1), 2)
    rows, got = a.reshape(2, 2, 4), out.reshape(2, 3, 4)
    np.testing.assert_array_equal(got[:, 0], rows[:, 0] * np.float32(0.5))
    np.testing.assert_array_equal(got[:, 1], rows[:, 0] * np.float32(0.25) + rows[:, 1] * 2)
    np.testing.assert_array_equal(got[:, 2], rows[:, 1])
    with pytest.raises(IndexError, match="out of range"):
        _gather.index_add(out, a, 2, 3, 4, np.array([0, 3, 2, 1]), weights.reshape(-1), 2)
    with pytest.raises(ValueError, match=r"\(n, taps\)"):
        _gather.index_add(out, a, 2, 3, 4, index.reshape(-1), weights.reshape(-1)[:3], 2)
    with pytest.raises(ValueError, match=r"\(n, taps\)"):
        _gather.index_add(out, a, 2, 3, 4, index.reshape(-1), weights.reshape(-1), 3)
    with pytest.raises(ValueError, match="buffer holds"):
        _gather.index_add(out, a[:-1], 2, 3, 4, index.reshape(-1), weights.reshape(-1), 2)
    with pytest.raises(TypeError):
        _gather.index_add(out, a, 2, 3, 4, index.reshape(-1),
                          weights.reshape(-1).astype(np.float64), 2)
