"""Every kernel a loaded plugin registered agrees with the reference (the conformance kit).

For each registered (op, device, dtype) the op database's samples run twice: once normally
(the plugin kernel serves, or declines) and once under `use_reference_kernels()`; results must
agree exactly for integers and within the dtype's tolerance for floats. Binary pointwise ops
run over broadcasting shape pairs and layouts; every other op over its op-database samples
(for ops such as reductions and softmax, whose OpInfo has the kernel's name).

On a machine without a GPU the cuda rows of reftorch-cuda run on its emulated driver
(spec_tests/cuda_emulator.py: the plugin's host side for real, each kernel as a NumPy model
of it), so every registered cuda kernel's dispatch, geometry and argument packing meet the
op database's samples; with a GPU they run on the device.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch import plugins
from .opdb import BY_NAME, structured_ops
from .opdb.core import OpInfo, build_sample
from .opdb.samples import BINARY_SHAPES
from .oracle import compare_values


def _entries():
    """Op name -> its op-database entry (pointwise OpEntry or OpInfo)."""
    entries = {entry.name: entry for entry in structured_ops()}
    entries.update(BY_NAME)
    return entries


ENTRIES = _entries()


def _registered():
    cases = []
    for name, info in sorted(plugins.loaded().items()):
        for op, device_type, dtype in info.kernels:
            if op in ENTRIES:
                cases.append(pytest.param(name, op, device_type, dtype,
                                          id=f"{name}-{op}-{device_type}-{dtype.name}"))
    return cases or [pytest.param(None, None, None, None, marks=pytest.mark.skip(
        reason="no plugin kernels for op-database ops are loaded"))]


def _available(device_type):
    if device_type == "cpu":
        return True
    if device_type == "cuda":
        return reftorch.cuda.is_available()
    return False


def _inputs(shape, dtype, device, rng, layout):
    n = int(np.prod(shape)) if shape else 1
    values = rng.standard_normal(n * 2).reshape(-1)[:n].reshape(shape) * 3 + 0.5
    t = reftorch.tensor(values, dtype=dtype)
    if layout == "transposed" and len(shape) >= 2:
        t = reftorch.tensor(np.swapaxes(values, -1, -2).copy(), dtype=dtype).transpose(-1, -2)
    return t.to(device)


@pytest.fixture(scope="module")
def emulated_cuda():
    """reftorch-cuda's backend on the emulated driver for this module (restored after)."""
    from reftorch import _storage
    from spec_tests import test_plugin_cuda as cuda_tests   # skips without the plugin
    if cuda_tests.NO_BINDINGS is not None:
        pytest.skip(cuda_tests.NO_BINDINGS)
    previous = _storage._BACKENDS["cuda"]
    _storage._BACKENDS["cuda"], _ = cuda_tests.emulated_backend()
    yield
    _storage._BACKENDS["cuda"] = previous


@pytest.mark.parametrize("plugin,op,device_type,dtype", _registered())
def test_plugin_kernel_matches_reference(plugin, op, device_type, dtype, request):
    if device_type == "cuda" and plugin == "cuda" and not reftorch.cuda.is_available():
        request.getfixturevalue("emulated_cuda")
    if not _available(device_type):
        pytest.skip(f"no {device_type} device on this machine")
    entry = ENTRIES[op]
    if isinstance(entry, OpInfo):
        return _check_samples(entry, device_type, dtype)
    rng = np.random.default_rng(0)
    device = reftorch.device(device_type)
    shapes = BINARY_SHAPES + [((257, 129), (257, 129)), ((1000, 100), (100,))]
    failures = []
    for (sa, sb) in shapes:
        for layout in ("contiguous", "transposed"):
            a = _inputs(sa, dtype, device, rng, layout)
            b = _inputs(sb, dtype, device, rng, layout)
            for kwargs in entry.kwargs:
                got = _run(lambda: entry.call(reftorch, a, b, **kwargs))
                with plugins.use_reference_kernels():
                    expected = _run(lambda: entry.call(reftorch, a.cpu(), b.cpu(), **kwargs))
                message = _differ(got, expected)
                if message:
                    failures.append(f"{sa}{layout} {sb} {kwargs}: {message}")
            inplace_target = a.clone()
            if entry.inplace and tuple(inplace_target.shape) == \
                    reftorch.broadcast_shapes(sa, sb):
                got = _run(lambda: entry.inplace(inplace_target, b))
                with plugins.use_reference_kernels():
                    expected = _run(lambda: entry.inplace(a.cpu().clone(), b.cpu()))
                message = _differ(got, expected)
                if message:
                    failures.append(f"{sa}{layout} {sb} in-place: {message}")
    assert not failures, "\n".join(failures[:5])


def _check_samples(entry, device_type, dtype):
    """An OpInfo's own samples for this dtype, with the plugin and on the reference."""
    if dtype.name not in entry.dtypes:
        pytest.skip(f"the op database has no {dtype.name} samples for {entry.name}")
    failures = []
    for sample in entry.samples(dtype.name, np.random.default_rng(0)):
        # Each run builds its own tensors from the sample, so an out= tensor or an in-place
        # op's input written by the first run cannot feed (or be) the second run's.
        args, kwargs = _moved(build_sample(sample, reftorch), device_type)
        got = _run(lambda: entry.call(reftorch, *args, **kwargs))
        with plugins.use_reference_kernels():
            cpu_args, cpu_kwargs = build_sample(sample, reftorch)
            expected = _run(lambda: entry.call(reftorch, *cpu_args, **cpu_kwargs))
        message = _differ(got, expected)
        if message:
            failures.append(f"{sample.label} {kwargs}: {message}")
    assert not failures, "\n".join(failures[:5])


def _moved(value, device_type):
    """`value` with every tensor in it (positional, keyword such as out= or clamp's min=,
    inside tuples and lists) on `device_type`."""
    if isinstance(value, reftorch.Tensor):
        return value.to(device_type)
    if isinstance(value, (tuple, list)):
        return type(value)(_moved(v, device_type) for v in value)
    if isinstance(value, dict):
        return {k: _moved(v, device_type) for k, v in value.items()}
    return value


def _run(fn):
    try:
        result = fn()
        # A device may report a kernel's error at the next copy to the host (cuda's index
        # bounds checks, as PyTorch's device-side asserts): that copy belongs to this call.
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, reftorch.Tensor) and t.device.type != "cpu":
                t.cpu()
        return result
    except Exception as exc:  # noqa: BLE001
        return exc


def _differ(got, expected):
    if isinstance(expected, Exception) or isinstance(got, Exception):
        if type(got) is type(expected):
            return None
        return f"{got!r} vs {expected!r}"
    if isinstance(expected, (tuple, list)):
        return compare_values(tuple(_host(g) for g in got), tuple(expected))
    return compare_values(_host(got), expected)


def _host(value):
    return value.cpu() if isinstance(value, reftorch.Tensor) else value
