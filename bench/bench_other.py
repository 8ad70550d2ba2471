"""Other operations (flip, tril, einsum, cdist): reftorch vs PyTorch vs NumPy.

`bench/report.py` prints the ratios from CASES; nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, float32_inputs

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)


def _inputs(shape):
    return float32_inputs(shape, _RNG)


CASES = {}
for _side in (32, 1000):  # 1e3 and 1e6 elements
    _r, _t, _a = _inputs((_side, _side))
    _n = _side * _side
    CASES[f"flip float32 n={_n}"] = {
        "reftorch": lambda r=_r: reftorch.flip(r, [0, 1]),
        "torch": lambda t=_t: torch.flip(t, [0, 1]),
        "numpy": lambda a=_a: np.flip(a, (0, 1)).copy()}
    CASES[f"tril float32 n={_n}"] = {
        "reftorch": lambda r=_r: reftorch.tril(r),
        "torch": lambda t=_t: torch.tril(t),
        "numpy": lambda a=_a: np.tril(a)}
for _side in (32, 320):  # matmul by einsum: 1e3 and 1e5 elements per operand
    _r, _t, _a = _inputs((_side, _side))
    CASES[f"einsum ij,jk->ik float32 n={_side * _side}"] = {
        "reftorch": lambda r=_r: reftorch.einsum("ij,jk->ik", r, r),
        "torch": lambda t=_t: torch.einsum("ij,jk->ik", t, t),
        "numpy": lambda a=_a: np.einsum("ij,jk->ik", a, a, optimize=True)}
for _rows in (30, 300):  # 30x30 and 300x300 distances over 32 features
    _r, _t, _a = _inputs((_rows, 32))
    CASES[f"cdist float32 n={_rows * 32}"] = {
        "reftorch": lambda r=_r: reftorch.cdist(r, r),
        "torch": lambda t=_t: torch.cdist(t, t),
        "numpy": lambda a=_a: np.sqrt(((a[:, None, :] - a[None, :, :]) ** 2).sum(-1))}


test_other = as_tests(CASES)
