"""Every plugin kernel against the reference on operands in random memory layouts.

The conformance kit (test_plugin_conformance.py) runs each registered (op, device, dtype) on
the op database's samples, whose tensors are contiguous, transposed or stepped along the last
dim. A plugin's geometry code — merging dims, choosing a fast path for contiguous runs,
computing offsets — fails on layouts those three do not show. Here Hypothesis draws, for each
tensor of a sample, the order its dims are stored in, a step per dim (every other element)
and an offset into the storage; the values stay the sample's, so an op's domain (valid
indices, positive inputs) still holds; binary pointwise ops also get the op database's
Python numbers as right operands. Each example runs with the plugins and on the
reference kernels, built with the same layouts, and must agree as in the kit (exactly for
integers and bool, within the dtype's tolerance for floats, the same exception type).

Hypothesis is derandomized (the same examples on every run, so CI is reproducible) and runs
EXAMPLES examples per row ($REFTORCH_LAYOUT_EXAMPLES, default 6); a failure shows the shrunk
layouts. Like the kit, it runs under `plugins.all_sizes()`, and a row fails when its kernel
declined every example. Samplers are left to the kit, which checks them on strided views bit
for bit.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reftorch
from reftorch import plugins
from .opdb.core import Sample, TensorArg, build, tensor
from .test_plugin_conformance import (ENTRIES, RANDOM, _available, _differ, _gradients,
                                      _registered, _run, counting, emulated_cuda,
                                      entries_reaching, every_size)

# Examples per row: a few in CI; REFTORCH_LAYOUT_EXAMPLES=200 searches harder.
EXAMPLES = int(os.environ.get("REFTORCH_LAYOUT_EXAMPLES", "6"))

__all__ = ["emulated_cuda", "every_size"]  # the kit's fixtures, used here too


def _rows():
    return [row for row in _registered() if row.values[1] not in RANDOM]


@pytest.mark.parametrize("plugin,op,device_type,dtype", _rows())
def test_plugin_kernel_matches_reference_in_any_layout(plugin, op, device_type, dtype,
                                                       request):
    if device_type == "cuda" and plugin == "cuda" and not reftorch.cuda.is_available():
        request.getfixturevalue("emulated_cuda")
    if not _available(device_type):
        pytest.skip(f"no {device_type} device on this machine")
    entries, backward = entries_reaching(op)
    samples = [sample for entry in entries if dtype.name in entry.dtypes
               for sample in _samples(entry, dtype)]
    if not samples:
        pytest.skip(f"the op database has no {dtype.name} samples for {op}")
    with counting(plugin, op, device_type, dtype) as accepted:
        _check_layouts(samples, device_type, backward)
    assert accepted[0], (f"{plugin}'s {op} kernel for {device_type} {dtype.name} declined "
                         f"every example, so none of it was checked")


def _samples(entry, dtype):
    rng = np.random.default_rng(0)
    samples = [(entry, sample) for sample in entry.samples(dtype.name, rng)]
    pointwise = ENTRIES.get(entry.name)
    if getattr(pointwise, "arity", 1) == 2:   # a binary pointwise op: also tensor (op) number
        samples += [(entry, Sample((tensor((6, 5), dtype.name, rng, domain=pointwise.domain),
                                    number), dict(pointwise.kwargs[0]), f"(6, 5) {number!r}"))
                    for number in pointwise.scalars]
    return samples


def _check_layouts(samples, device_type, backward):
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        entry, sample = data.draw(st.sampled_from(samples), label="sample")
        tensors = [arg for arg in _tensor_args((sample.args, sample.kwargs))]
        layouts = [data.draw(_layout(arg.array.ndim), label=f"layout of {arg.array.shape}")
                   for arg in tensors]
        got = _run_arranged(entry, sample, dict(zip(map(id, tensors), layouts)), device_type,
                            backward)
        with plugins.use_reference_kernels():
            expected = _run_arranged(entry, sample, dict(zip(map(id, tensors), layouts)),
                                     "cpu", backward)
        message = _differ(got, expected)
        assert message is None, f"{sample.label} {sample.kwargs}: {message}"
    check()


def _layout(ndim):
    """(storage order of the dims, a step per stored dim, a storage offset)."""
    return st.tuples(st.permutations(range(ndim)),
                     st.lists(st.sampled_from((1, 2)), min_size=ndim, max_size=ndim),
                     st.integers(0, 3))


def _tensor_args(value):
    if isinstance(value, TensorArg):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensor_args(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensor_args(v)


def _run_arranged(entry, sample, layouts, device_type, backward):
    args = tuple(_build(a, layouts, device_type, backward) for a in sample.args)
    kwargs = {k: _build(v, layouts, device_type, backward) for k, v in sample.kwargs.items()}
    if not backward:
        return _run(lambda: entry.call(reftorch, *args, **kwargs))
    return _run(lambda: _gradients(entry.call(reftorch, *args, **kwargs), args, kwargs))


def _build(arg, layouts, device_type, backward):
    """A sample argument with each tensor in its drawn layout on `device_type` (with
    `backward`, differentiable floating tensors are leaves that require grad)."""
    if isinstance(arg, TensorArg):
        x = arranged(arg.array, arg.dtype, *layouts[id(arg)], device_type)
        if backward and arg.requires_grad and x.dtype.is_floating_point:
            x = x.detach().requires_grad_()
        return x
    if isinstance(arg, (tuple, list)):
        return type(arg)(_build(a, layouts, device_type, backward) for a in arg)
    return build(arg, reftorch)


def arranged(values, dtype_name, order, steps, offset, device_type):
    """A tensor holding `values` whose dims are stored in `order` (outermost first), each
    stepping over `steps[i]` elements of its stored dim, from element `offset` of a storage
    made on `device_type` (so the layout is the device's too, not a copy's)."""
    values = np.asarray(values)
    stored = np.transpose(values, order)
    spread = [n * k for n, k in zip(stored.shape, steps)]
    every = tuple(slice(None, None, k) for k in steps)
    flat = np.zeros(offset + math.prod(spread), dtype=values.dtype)
    flat[offset:].reshape(spread)[every] = stored
    storage = _tensor(flat, dtype_name).to(device_type)
    if values.ndim == 0:
        return storage[offset]
    return storage[offset:].view(spread)[every].permute(*np.argsort(order).tolist())


def _tensor(array, dtype_name):
    if dtype_name == "bfloat16":   # NumPy has no bfloat16 cast from float64: via float32
        return reftorch.tensor(array.astype(np.float32)).to(reftorch.bfloat16)
    return reftorch.tensor(array.astype(dtype_name), dtype=getattr(reftorch, dtype_name))
