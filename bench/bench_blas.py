"""Matrix products (mm, bmm, matmul with broadcasting, addmm): reftorch vs PyTorch vs NumPy.

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
for _side in (64, 512):  # about 4e3 and 2.6e5 elements per operand
    _r, _t, _a = _inputs((_side, _side))
    CASES[f"mm float32 {_side}x{_side} n={_side * _side}"] = {
        "reftorch": lambda r=_r: reftorch.mm(r, r),
        "torch": lambda t=_t: torch.mm(t, t),
        "numpy": lambda a=_a: a @ a}
    _rc, _tc, _ac = _inputs((_side, _side))
    CASES[f"addmm float32 {_side}x{_side} n={_side * _side}"] = {
        "reftorch": lambda r=_r, c=_rc: reftorch.addmm(c, r, r, beta=0.5, alpha=2.0),
        "torch": lambda t=_t, c=_tc: torch.addmm(c, t, t, beta=0.5, alpha=2.0),
        "numpy": lambda a=_a, c=_ac: 0.5 * c + 2.0 * (a @ a)}

_r, _t, _a = _inputs((32, 64, 64))  # a batch of 32 matrices: 1.3e5 elements
CASES["bmm float32 32x64x64 n=131072"] = {
    "reftorch": lambda r=_r: reftorch.bmm(r, r),
    "torch": lambda t=_t: torch.bmm(t, t),
    "numpy": lambda a=_a: np.matmul(a, a)}

# Broadcasting: (8, 1, 64, 64) @ (16, 64, 64) -> (8, 16, 64, 64).
_r1, _t1, _a1 = _inputs((8, 1, 64, 64))
_r2, _t2, _a2 = _inputs((16, 64, 64))
CASES["matmul broadcast float32 (8,1,64,64)@(16,64,64) n=32768"] = {
    "reftorch": lambda r1=_r1, r2=_r2: reftorch.matmul(r1, r2),
    "torch": lambda t1=_t1, t2=_t2: torch.matmul(t1, t2),
    "numpy": lambda a1=_a1, a2=_a2: np.matmul(a1, a2)}

# Batch folded into rows: (32, 64, 64) @ (64, 64), one mm in both libraries.
_r3, _t3, _a3 = _inputs((64, 64))
CASES["matmul batch@matrix float32 (32,64,64)@(64,64) n=131072"] = {
    "reftorch": lambda r=_r, r3=_r3: reftorch.matmul(r, r3),
    "torch": lambda t=_t, t3=_t3: torch.matmul(t, t3),
    "numpy": lambda a=_a, a3=_a3: np.matmul(a, a3)}


test_blas = as_tests(CASES)
