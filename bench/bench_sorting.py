"""Sorting and selection: sort, topk, searchsorted, isin, reftorch vs PyTorch vs NumPy.

Inputs are built once at import (float32 normal values); each case is a zero-argument call.
Run with `make bench`; `bench/report.py` prints the ratios. Nothing here asserts a time.
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
_QUERIES = _RNG.standard_normal(10_000).astype(np.float32)


def _cases(n):
    data = _DATA[n]
    r, t = reftorch.from_numpy(data.copy()), torch.from_numpy(data.copy())
    sorted_np = np.sort(data)
    r_sorted, t_sorted = reftorch.from_numpy(sorted_np.copy()), torch.from_numpy(sorted_np.copy())
    r_q, t_q = reftorch.from_numpy(_QUERIES.copy()), torch.from_numpy(_QUERIES.copy())
    tests = data[:100].copy()
    r_tests, t_tests = reftorch.from_numpy(tests.copy()), torch.from_numpy(tests.copy())
    k = max(n // 100, 1)
    return {
        f"sort float32 n={n}": {
            "reftorch": lambda: reftorch.sort(r), "torch": lambda: torch.sort(t),
            "numpy": lambda: np.argsort(data, kind="stable")},
        f"topk float32 n={n} k={k}": {
            "reftorch": lambda: reftorch.topk(r, k), "torch": lambda: torch.topk(t, k),
            "numpy": lambda: np.argpartition(data, -k)[-k:]},
        f"searchsorted float32 n={n} queries=10000": {
            "reftorch": lambda: reftorch.searchsorted(r_sorted, r_q),
            "torch": lambda: torch.searchsorted(t_sorted, t_q),
            "numpy": lambda: np.searchsorted(sorted_np, _QUERIES)},
        f"isin float32 n={n} tests=100": {
            "reftorch": lambda: reftorch.isin(r, r_tests),
            "torch": lambda: torch.isin(t, t_tests),
            "numpy": lambda: np.isin(data, tests)},
    }


CASES = {name: impls for n in SIZES for name, impls in _cases(n).items()}


test_sorting = as_tests(CASES)
