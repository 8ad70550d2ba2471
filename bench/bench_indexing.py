"""Indexing and joining ops: reftorch vs PyTorch vs NumPy. Run with `make bench`; nothing
here asserts a time (bench/report.py prints the ratios)."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

CASES = {}

for _n in (1_000, 100_000):
    _a = np.random.default_rng(0).standard_normal((_n // 100 or 1, 100)).astype(np.float32)
    _idx = np.random.default_rng(1).integers(0, _a.shape[0], size=_a.shape[0])
    _r, _t = reftorch.from_numpy(_a), torch.from_numpy(_a)
    _ri, _ti = reftorch.from_numpy(_idx), torch.from_numpy(_idx)
    _rm, _tm = _r > 0, _t > 0
    CASES[f"cat float32 n={_n}"] = {
        "reftorch": lambda r=_r: reftorch.cat([r, r]),
        "torch": lambda t=_t: torch.cat([t, t]),
        "numpy": lambda a=_a: np.concatenate([a, a])}
    CASES[f"index_select float32 n={_n}"] = {
        "reftorch": lambda r=_r, i=_ri: r.index_select(0, i),
        "torch": lambda t=_t, i=_ti: t.index_select(0, i),
        "numpy": lambda a=_a, i=_idx: np.take(a, i, axis=0)}
    CASES[f"getitem advanced float32 n={_n}"] = {
        "reftorch": lambda r=_r, i=_ri: r[i],
        "torch": lambda t=_t, i=_ti: t[i],
        "numpy": lambda a=_a, i=_idx: a[i]}
    CASES[f"masked_fill float32 n={_n}"] = {
        "reftorch": lambda r=_r, m=_rm: r.masked_fill(m, 0.0),
        "torch": lambda t=_t, m=_tm: t.masked_fill(m, 0.0),
        "numpy": lambda a=_a: np.where(a > 0, np.float32(0), a)}


test_indexing = as_tests(CASES)
