"""Linear algebra (inverse, svd, cholesky, lu): reftorch vs PyTorch vs NumPy, float64.

One 64x64 matrix and a batch of 32 matrices of 32x32; the LU also on one 512x512 matrix. `bench/report.py` prints the ratios
from CASES; nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, inputs

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)


def _inputs(shape, spd=False):
    n = shape[-1]
    array = _RNG.standard_normal(shape) + 2 * np.sqrt(n) * np.eye(n)
    if spd:
        array = array @ np.swapaxes(array, -1, -2)
    return inputs(array)


def _lu_numpy(a):
    """NumPy has no LU: the nearest is the solve that uses one."""
    return np.linalg.solve(a, np.eye(a.shape[-1]))


CASES = {}
for _shape in ((64, 64), (32, 32, 32), (512, 512)):
    _label = "x".join(map(str, _shape))
    _r, _t, _a = _inputs(_shape)
    _rs, _ts, _as = _inputs(_shape, spd=True)
    CASES[f"inverse float64 {_label}"] = {
        "reftorch": lambda r=_r: reftorch.inverse(r),
        "torch": lambda t=_t: torch.inverse(t),
        "numpy": lambda a=_a: np.linalg.inv(a)}
    CASES[f"svd float64 {_label}"] = {
        "reftorch": lambda r=_r: reftorch.svd(r),
        "torch": lambda t=_t: torch.svd(t),
        "numpy": lambda a=_a: np.linalg.svd(a, full_matrices=False)}
    CASES[f"cholesky float64 {_label}"] = {
        "reftorch": lambda r=_rs: reftorch.cholesky(r),
        "torch": lambda t=_ts: torch.linalg.cholesky(t),
        "numpy": lambda a=_as: np.linalg.cholesky(a)}
    if _shape == (512, 512):   # only the LU at this size: the others are LAPACK already
        del CASES[f"inverse float64 {_label}"], CASES[f"svd float64 {_label}"], \
            CASES[f"cholesky float64 {_label}"]
    # reftorch's LU is a blocked NumPy LU (panels of 32 columns, trailing update by matmul;
    # NumPy has no LU); numpy column: LAPACK gesv, which factorizes then solves.
    CASES[f"lu float64 {_label}"] = {
        "reftorch": lambda r=_r: reftorch.lu(r),
        "torch": lambda t=_t: torch.linalg.lu_factor(t),
        "numpy": lambda a=_a: _lu_numpy(a)}


test_linalg = as_tests(CASES)
