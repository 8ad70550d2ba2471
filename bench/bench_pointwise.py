"""Pointwise math: reftorch vs PyTorch vs NumPy on a few representative ops.

`bench/report.py` prints the ratios from CASES; nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(0)
_INPUTS = {n: (_rng.uniform(0.1, 2.0, n).astype(np.float32),
               _rng.uniform(0.1, 2.0, n).astype(np.float32),
               _rng.uniform(0.1, 2.0, n).astype(np.float32)) for n in (1_000, 100_000)}


def _cases():
    cases = {}
    for n, arrays in _INPUTS.items():
        r = [reftorch.from_numpy(a) for a in arrays]
        t = [torch.from_numpy(a) for a in arrays]
        a, b, c = arrays
        cases[f"sin float32 n={n}"] = {
            "reftorch": lambda r=r: reftorch.sin(r[0]), "torch": lambda t=t: torch.sin(t[0]),
            "numpy": lambda a=a: np.sin(a)}
        cases[f"clamp float32 n={n}"] = {
            "reftorch": lambda r=r: reftorch.clamp(r[0], 0.5, 1.5),
            "torch": lambda t=t: torch.clamp(t[0], 0.5, 1.5),
            "numpy": lambda a=a: np.clip(a, 0.5, 1.5)}
        cases[f"where float32 n={n}"] = {
            "reftorch": lambda r=r: reftorch.where(r[0] > 1, r[1], r[2]),
            "torch": lambda t=t: torch.where(t[0] > 1, t[1], t[2]),
            "numpy": lambda a=a, b=b, c=c: np.where(a > 1, b, c)}
        cases[f"addcmul float32 n={n}"] = {
            "reftorch": lambda r=r: reftorch.addcmul(r[0], r[1], r[2], value=0.5),
            "torch": lambda t=t: torch.addcmul(t[0], t[1], t[2], value=0.5),
            "numpy": lambda a=a, b=b, c=c: a + np.float32(0.5) * b * c}
    return cases


CASES = _cases()


test_pointwise = as_tests(CASES)
