"""Every kernel a loaded plugin registered agrees with the reference (the conformance kit).

For each registered (op, device, dtype) the op database's samples run twice: once normally
(the plugin kernel serves, or declines) and once under `use_reference_kernels()`; results must
agree exactly for integers and within the dtype's tolerance for floats.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch import plugins
from .opdb import BY_NAME
from .opdb.samples import BINARY_SHAPES
from .oracle import compare_values


def _registered():
    cases = []
    for name, info in sorted(plugins.loaded().items()):
        for op, device_type, dtype in info.kernels:
            if op in BY_NAME:
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


@pytest.mark.parametrize("plugin,op,device_type,dtype", _registered())
def test_plugin_kernel_matches_reference(plugin, op, device_type, dtype):
    if not _available(device_type):
        pytest.skip(f"no {device_type} device on this machine")
    entry = BY_NAME[op]
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


def _run(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return exc


def _differ(got, expected):
    if isinstance(expected, Exception) or isinstance(got, Exception):
        if type(got) is type(expected):
            return None
        return f"{got!r} vs {expected!r}"
    return compare_values(got.cpu(), expected)
