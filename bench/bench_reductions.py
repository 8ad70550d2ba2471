"""Reductions: sum, mean, var, amax, argmax, cumsum, sum backward; reftorch vs PyTorch vs NumPy.

Inputs are built once at import (float32 normal values, as a (n/100, 100) matrix for the
reductions along a dim); each case is a zero-argument call. Run with `make bench`;
`bench/report.py` prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

SIZES = [1_000, 1_000_000]
_RNG = np.random.default_rng(0)
_DATA = {n: _RNG.standard_normal(n).astype(np.float32) for n in SIZES}


def _sum_backward(module, x):
    x = x.detach().requires_grad_()
    module.sum(x * 1).backward()
    return x.grad


def _cases(n):
    data = _DATA[n]
    matrix = data.reshape(-1, 100)
    r, t = reftorch.from_numpy(data.copy()), torch.from_numpy(data.copy())
    rm, tm = reftorch.from_numpy(matrix.copy()), torch.from_numpy(matrix.copy())
    return {
        f"sum float32 n={n}": {
            "reftorch": lambda: reftorch.sum(r), "torch": lambda: torch.sum(t),
            "numpy": lambda: np.sum(data)},
        f"mean dim=1 float32 n={n}": {
            "reftorch": lambda: reftorch.mean(rm, 1), "torch": lambda: torch.mean(tm, 1),
            "numpy": lambda: np.mean(matrix, axis=1)},
        f"var float32 n={n}": {
            "reftorch": lambda: reftorch.var(r), "torch": lambda: torch.var(t),
            "numpy": lambda: np.var(data, ddof=1)},
        f"max dim=1 float32 n={n}": {
            "reftorch": lambda: reftorch.max(rm, 1), "torch": lambda: torch.max(tm, 1),
            "numpy": lambda: (np.max(matrix, axis=1), np.argmax(matrix, axis=1))},
        f"argmax float32 n={n}": {
            "reftorch": lambda: reftorch.argmax(r), "torch": lambda: torch.argmax(t),
            "numpy": lambda: np.argmax(data)},
        f"cumsum float32 n={n}": {
            "reftorch": lambda: reftorch.cumsum(r, 0), "torch": lambda: torch.cumsum(t, 0),
            "numpy": lambda: np.cumsum(data)},
        f"sum backward float32 n={n}": {
            "reftorch": lambda: _sum_backward(reftorch, r),
            "torch": lambda: _sum_backward(torch, t),
            "numpy": lambda: np.ones_like(data)},
    }


CASES = {name: impls for n in SIZES for name, impls in _cases(n).items()}


test_reduction = as_tests(CASES)
