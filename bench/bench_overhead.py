"""Per-op overhead: `a + b` on float32 tensors, reftorch vs PyTorch vs NumPy.

Run with `make bench`; `bench/report.py` prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import reftorch

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
