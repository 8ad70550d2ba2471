"""Per-op overhead: `a + b` on 10-element float32 tensors, reftorch vs PyTorch vs NumPy.

Run with `make bench`; `bench/report.py` prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")

SIZES = [10, 100_000]


@pytest.mark.parametrize("n", SIZES)
def test_add_reftorch(benchmark, n):
    a, b = reftorch.ones(n), reftorch.ones(n)
    benchmark.group = f"add float32 n={n}"
    benchmark(lambda: a + b)


@pytest.mark.parametrize("n", SIZES)
def test_add_reftorch_reference_only(benchmark, n):
    a, b = reftorch.ones(n), reftorch.ones(n)
    benchmark.group = f"add float32 n={n}"
    with reftorch.plugins.use_reference_kernels():
        benchmark(lambda: a + b)


@pytest.mark.parametrize("n", SIZES)
def test_add_torch(benchmark, n):
    a, b = torch.ones(n), torch.ones(n)
    benchmark.group = f"add float32 n={n}"
    benchmark(lambda: a + b)


@pytest.mark.parametrize("n", SIZES)
def test_add_numpy(benchmark, n):
    a, b = np.ones(n, np.float32), np.ones(n, np.float32)
    benchmark.group = f"add float32 n={n}"
    benchmark(lambda: a + b)
