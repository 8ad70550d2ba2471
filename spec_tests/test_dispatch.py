"""The dispatcher and plugin registry: lookup order, declining, oracle mode, broken plugins,
REFTORCH_PLUGINS, and the copy-to-cpu fallback on a device with no kernels."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import reftorch
from reftorch import _dispatch, plugins
from reftorch._storage import DeviceBackend, _BACKENDS

from .fake_device import HostBackedStorage


def test_every_op_is_declared_once_with_a_reference_kernel():
    ops = _dispatch.all_ops()
    assert {"add", "sub", "mul", "div", "eq", "bitwise_and", "copy_"} <= set(ops)
    assert all(callable(op.reference) for op in ops.values())
    with pytest.raises(RuntimeError):
        _dispatch.declare(_dispatch.Op(name="add", family="pointwise", reference=None))


def test_plugin_kernel_runs_first_and_may_decline():
    calls = []

    def doubling_add(out, inputs, dtypes, params):
        calls.append(inputs[0].numel())
        if inputs[0].numel() < 3:
            return NotImplemented  # declines small inputs; the reference runs
        return reftorch.full(inputs[0].shape, 99.0)

    info = plugins.load("test-plugin", lambda r: r.kernel("add", "cpu", [reftorch.float64],
                                                          doubling_add))
    try:
        assert info.kernels == [("add", "cpu", reftorch.float64)]
        assert plugins.serving("add", "cpu", reftorch.float64) == "test-plugin"
        big = reftorch.ones(4, dtype=reftorch.float64)
        assert (big + big).tolist() == [99.0] * 4
        small = reftorch.ones(2, dtype=reftorch.float64)
        assert (small + small).tolist() == [2.0, 2.0]
        with plugins.use_reference_kernels():
            assert plugins.serving("add", "cpu", reftorch.float64) == "reference"
            assert (big + big).tolist() == [2.0] * 4
        assert calls == [4, 2]
        assert (reftorch.ones(4) + reftorch.ones(4)).tolist() == [2.0] * 4  # float32 untouched
    finally:
        plugins.unload("test-plugin")
    assert plugins.serving("add", "cpu", reftorch.float64) in ("reference", "cpu")


def test_in_place_ops_ask_only_kernels_that_write_in_place():
    """Tensor.op_ offers the target (out=target) to kernels marked writes_in_place; others
    get the out-of-place call, whose result is then copied in."""
    seen = []

    def out_of_place(out, inputs, dtypes, params):
        seen.append(("new", out))
        return inputs[0] + 1          # (a wrong index_add: shows which kernel ran)

    def in_place(out, inputs, dtypes, params):
        seen.append(("in place", out is inputs[0]))
        if out is None:
            return NotImplemented
        out.fill_(7.0)
        return out
    in_place.writes_in_place = True
    index, source = reftorch.tensor([0]), reftorch.ones(1, 2, dtype=reftorch.float64)
    for kernel, expected in ((out_of_place, [2.0, 2.0]), (in_place, [7.0, 7.0])):
        seen.clear()
        info = plugins.load("test-plugin", lambda r: r.kernel("index_add", "cpu",
                                                              [reftorch.float64], kernel))
        try:
            x = reftorch.ones(3, 2, dtype=reftorch.float64)
            version = x._version
            assert x.index_add_(0, index, source) is x
            assert x[0].tolist() == expected and x._version > version
            assert seen == ([("new", None)] if kernel is out_of_place else [("in place", True)])
        finally:
            plugins.unload("test-plugin")


def test_kernel_with_min_numel_is_skipped_for_smaller_elementwise_results():
    calls = []

    def big_only_add(out, inputs, dtypes, params):
        calls.append(inputs[0].numel())
        return reftorch.full(inputs[0].shape, 99.0, dtype=reftorch.float64)

    plugins.load("test-plugin", lambda r: r.kernel("add", "cpu", [reftorch.float64],
                                                   big_only_add, min_numel=4))
    try:
        small, big = (reftorch.ones(n, dtype=reftorch.float64) for n in (3, 4))
        assert (small + small).tolist() == [2.0] * 3           # skipped: the reference ran
        assert (small + big[:1]).tolist() == [2.0] * 3          # the broadcast result counts
        assert (big + big).tolist() == [99.0] * 4
        assert (big[:1] + small.view(3, 1)).tolist() == [[2.0]] * 3
        assert calls == [4]
    finally:
        plugins.unload("test-plugin")


def test_all_sizes_turns_size_thresholds_off_and_restores_them():
    calls = []

    def big_only_add(out, inputs, dtypes, params):
        # A kernel's own threshold goes through size_threshold, as plugins are told to.
        if inputs[0].numel() < plugins.size_threshold(3):
            return NotImplemented
        calls.append(inputs[0].numel())
        return reftorch.full(inputs[0].shape, 99.0, dtype=reftorch.float64)

    plugins.load("test-plugin", lambda r: r.kernel("add", "cpu", [reftorch.float64],
                                                   big_only_add, min_numel=4))
    try:
        one, three = (reftorch.ones(n, dtype=reftorch.float64) for n in (1, 3))
        assert plugins.size_threshold(3) == 3
        assert (three + three).tolist() == [2.0] * 3        # min_numel=4 skips it
        with plugins.all_sizes():
            assert plugins.size_threshold(3) == 0
            assert (three + three).tolist() == [99.0] * 3   # registered threshold off
            assert (one + one).tolist() == [99.0]           # and the kernel's own
            with plugins.all_sizes():
                pass
            assert (one + one).tolist() == [99.0]           # nested blocks keep it off
        assert plugins.size_threshold(3) == 3
        assert (three + three).tolist() == [2.0] * 3        # restored, chains rebuilt
        assert calls == [3, 1, 1]
    finally:
        plugins.unload("test-plugin")


def test_broken_plugin_warns_once_and_reftorch_keeps_working():
    def broken(registrar):
        registrar.kernel("add", "cpu", [reftorch.int64], lambda *a: NotImplemented)
        raise ImportError("libfoo.so not found")

    with pytest.warns(RuntimeWarning, match="broken-plugin.*libfoo"):
        assert plugins.load("broken-plugin", broken) is None
    assert "broken-plugin" in plugins.failed()
    assert plugins.kernels("add").get(("cpu", reftorch.int64)) is None  # rolled back
    assert (reftorch.tensor([1]) + 1).tolist() == [2]


def test_plugins_follow_set_num_threads_until_unloaded():
    previous = reftorch.get_num_threads()
    seen = []
    reftorch.set_num_threads(3)
    plugins.load("test-plugin", lambda r: r.on_set_num_threads(seen.append))
    try:
        assert seen == [3]                  # told the count already set when it loads
        reftorch.set_num_threads(1)
        assert seen == [3, 1]
    finally:
        plugins.unload("test-plugin")
        reftorch.set_num_threads(previous)
    assert seen == [3, 1]                   # not told after unloading


def test_a_broken_plugins_thread_listener_is_rolled_back():
    seen = []

    def broken(registrar):
        registrar.on_set_num_threads(seen.append)
        raise ImportError("libfoo.so not found")

    previous = reftorch.get_num_threads()
    reftorch.set_num_threads(previous)
    with pytest.warns(RuntimeWarning, match="broken-plugin"):
        plugins.load("broken-plugin", broken)
    try:
        reftorch.set_num_threads(1)
    finally:
        reftorch.set_num_threads(previous)
    assert seen == [previous]               # told at load, never after the failure


def test_registering_an_unsupported_dtype_is_an_error():
    with pytest.raises(ValueError):
        _dispatch.register_kernel("bitwise_and", "cpu", [reftorch.float32],
                                  lambda *a: NotImplemented, plugin="x")


@pytest.mark.parametrize("choice", ["none", "all"])
def test_reftorch_plugins_environment_variable(choice):
    code = "import reftorch; print(sorted(reftorch.plugins.loaded()))"
    env = dict(os.environ, REFTORCH_PLUGINS=choice)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    if choice == "none":
        assert out == "[]"
    else:
        from importlib import metadata
        installed = sorted(ep.name for ep in metadata.entry_points(group="reftorch.plugins"))
        assert out == str([n for n in installed if n not in plugins.failed()])


# --- a device type with no kernels: every op falls back to cpu and is counted ---------------

class FakeBackend(DeviceBackend):
    type_name = "meta"  # a name PyTorch's device parser knows; no real meta semantics

    def allocate(self, size, dtype, device):
        return HostBackedStorage(size, dtype, device)


@pytest.fixture
def fake_device():
    _BACKENDS["meta"] = FakeBackend()
    plugins.reset_fallbacks()
    yield reftorch.device("meta:0")
    del _BACKENDS["meta"]


def test_fallback_runs_the_reference_and_counts(fake_device):
    a = reftorch.arange(6.0).view(2, 3).to(fake_device)
    b = reftorch.tensor([1.0, 2.0, 3.0], device=fake_device)
    assert a.device == fake_device and plugins.serving("add", "meta", reftorch.float32) == \
        "fallback"
    c = a + b
    assert c.device == fake_device
    assert c.cpu().tolist() == [[1.0, 3.0, 5.0], [4.0, 6.0, 8.0]]
    a.t().mul_(2)  # in-place through a non-contiguous view on the device
    assert a.cpu().tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    counts = plugins.fallbacks()
    assert counts[("add", "meta", reftorch.float32)] == 1
    assert counts[("mul", "meta", reftorch.float32)] == 1


def test_mixing_devices_is_an_error(fake_device):
    with pytest.raises(RuntimeError, match="same device"):
        reftorch.ones(2, device=fake_device) + reftorch.ones(2)
    # 0-dim cpu tensors act as scalars on any device, as in PyTorch.
    result = reftorch.ones(2, device=fake_device) + reftorch.tensor(1.0)
    assert result.device == fake_device and result.cpu().tolist() == [2.0, 2.0]


def test_unknown_backend_gives_a_clear_error():
    with pytest.raises(RuntimeError, match="no backend"):
        reftorch.zeros(2, device="xpu")


def test_hooks_see_every_dispatched_op():
    seen = []
    remove = plugins.add_hook(lambda op, inputs, params, result: seen.append(op.name))
    try:
        (reftorch.ones(2) * 3).neg()
    finally:
        remove()
    assert seen == ["mul", "neg"]


@pytest.mark.parametrize("number", [True, 3, 2.5, 1 + 2j])
@pytest.mark.parametrize("zero_dim", [False, True])
def test_one_tensor_and_a_number_promote_as_result_type(number, zero_dim):
    """apply's shortcut for one tensor and numbers no higher in kind than its dtype must give
    result_type's answer for every dtype, under either default float dtype."""
    from reftorch._promotion import result_dtype
    previous = reftorch.get_default_dtype()
    try:
        for default in (reftorch.float32, reftorch.float64):
            reftorch.set_default_dtype(default)
            for dtype in (reftorch.bool, reftorch.uint8, reftorch.int8, reftorch.int32,
                          reftorch.int64, reftorch.float16, reftorch.bfloat16, reftorch.float32,
                          reftorch.float64, reftorch.complex64):
                t = reftorch.zeros(() if zero_dim else (2,), dtype=dtype)
                expected = result_dtype((t, number))
                assert reftorch.mul(t, number).dtype is expected, (dtype, default)
                assert (number * t).dtype is expected, (dtype, default)
    finally:
        reftorch.set_default_dtype(previous)


# --- Python-number operands on cpu: made once (reftorch._storage.ScalarConstants) -------------

def _number_operands(fn):
    """The 0-dim operands the dispatcher handed to kernels while fn ran."""
    seen = []
    remove = _dispatch.add_hook(lambda op, inputs, params, result: seen.extend(
        x for x in inputs if isinstance(x, reftorch.Tensor) and x.ndim == 0))
    try:
        fn()
    finally:
        remove()
    return seen


def test_a_cpu_number_operand_is_made_once_per_value_and_dtype():
    a = reftorch.tensor([1.0, 2.0])
    first, again = _number_operands(lambda: a * 0.25), _number_operands(lambda: a * 0.25)
    assert first and first[0] is again[0]
    as_double = _number_operands(lambda: a.double() * 0.25)
    assert as_double[0] is not first[0] and as_double[0].dtype is reftorch.float64


def test_cpu_number_constants_tell_apart_every_value_a_conversion_can():
    a = reftorch.tensor([1.0, 2.0])
    plus, minus = (a * 0.0).numpy(), (a * -0.0).numpy()
    assert not np.signbit(plus).any() and np.signbit(minus).all()
    assert (a + 1).tolist() == [2.0, 3.0] and (a + True).tolist() == [2.0, 3.0]
    assert (a + 1.5).tolist() == [2.5, 3.5]
    assert np.isnan((a * float("nan")).numpy()).all()
    assert (a * 0.0).tolist() == [0.0, 0.0]    # after NaN: 0.0 is not NaN's constant
    h = a.to(reftorch.float16)
    np.testing.assert_array_equal((h + 1e-4).numpy(), np.float16([1.0, 2.0]) + np.float16(1e-4))
    i = reftorch.tensor([250], dtype=reftorch.uint8)
    assert (i + 10).tolist() == [4] and (i + 10.0).tolist() == [260.0]


def test_a_cpu_number_constant_written_to_is_never_handed_out_again():
    a = reftorch.tensor([1.0, 2.0])
    constant = _number_operands(lambda: a * 3.0)[0]
    constant.fill_(100.0)                       # user code got hold of it and wrote to it
    assert (a * 3.0).tolist() == [3.0, 6.0]
    constant = _number_operands(lambda: a * 3.0)[0]
    constant.requires_grad_(True)
    fresh = a * 3.0
    assert fresh.tolist() == [3.0, 6.0] and not fresh.requires_grad


def test_cpu_number_constants_are_bounded():
    from reftorch._storage import SCALAR_CONSTANTS, backend_for
    a = reftorch.tensor([1.0])
    for i in range(SCALAR_CONSTANTS + 20):
        assert (a + float(i)).tolist() == [1.0 + i]
    assert len(backend_for(a.device).constants.entries) == SCALAR_CONSTANTS
