"""Per-op overhead: `a + b` on float32 tensors, reftorch vs PyTorch vs NumPy, and the other
common small calls (mul, sum, relu, view, cat) on 10-element tensors, where the time is
almost all Python overhead.

Run with `make bench`; `bench/report.py` prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

SIZES = [10, 100_000]

# name -> (make a float32 vector of n ones, context the timed loop runs in)
IMPLEMENTATIONS = {
    "reftorch": (reftorch.ones, contextlib.nullcontext),
    "reftorch-reference-only": (reftorch.ones, reftorch.plugins.use_reference_kernels),
    "torch": (torch.ones, contextlib.nullcontext),
    "numpy": (lambda n: np.ones(n, np.float32), contextlib.nullcontext),
}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("impl", sorted(IMPLEMENTATIONS))
def test_add(benchmark, impl, n):
    make, context = IMPLEMENTATIONS[impl]
    a, b = make(n), make(n)
    benchmark.group = f"add float32 n={n}"
    with context():
        benchmark(lambda: a + b)


def _small_call_cases(n=10):
    """One case per common call, each on float32 vectors of n elements (all ones)."""
    ra, rb = reftorch.ones(n), reftorch.ones(n)
    ta, tb = torch.ones(n), torch.ones(n)
    na, nb = np.ones(n, np.float32), np.ones(n, np.float32)
    # case -> (the call on reftorch or torch, given the module; the NumPy equivalent)
    calls = {
        "mul": (lambda m, a, b: a * b, lambda a, b: a * b),
        "sum": (lambda m, a, b: a.sum(), lambda a, b: a.sum()),
        "relu": (lambda m, a, b: m.relu(a), lambda a, b: np.maximum(a, 0)),
        "view": (lambda m, a, b: a.view(2, n // 2), lambda a, b: a.reshape(2, n // 2)),
        "cat": (lambda m, a, b: m.cat([a, b]), lambda a, b: np.concatenate([a, b])),
    }
    return {f"{name} float32 n={n}": {
        "reftorch": lambda call=call: call(reftorch, ra, rb),
        "torch": lambda call=call: call(torch, ta, tb),
        "numpy": lambda np_call=np_call: np_call(na, nb)}
        for name, (call, np_call) in calls.items()}


CASES = _small_call_cases()


test_small_calls = as_tests(CASES)
