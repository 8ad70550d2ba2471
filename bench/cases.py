"""What every bench file shares: its CASES dict turned into pytest-benchmark tests, and
float32 inputs made identical for reftorch, PyTorch and NumPy."""
from __future__ import annotations

import numpy as np
import pytest


def as_tests(cases):
    """A test benchmarking every implementation each case has, grouped by case (so
    pytest-benchmark compares reftorch, torch and numpy side by side)."""
    params = [(case, impl) for case, fns in cases.items() for impl in sorted(fns)]

    @pytest.mark.parametrize("case,impl", params, ids=[f"{c} {i}" for c, i in params])
    def test(benchmark, case, impl):
        benchmark.group = case
        benchmark(cases[case][impl])
    return test


def inputs(array):
    """The same values as a reftorch tensor, a torch tensor and a NumPy array (own copies)."""
    import reftorch
    import torch
    return reftorch.from_numpy(array.copy()), torch.from_numpy(array.copy()), array


def float32_inputs(shape, rng):
    return inputs(rng.standard_normal(shape).astype(np.float32))
