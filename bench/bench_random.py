"""Random sampling: reftorch (PyTorch's streams, vectorized NumPy) vs PyTorch, with NumPy's
own generator as the baseline (different numbers, same work). Run with `make bench`;
`bench/report.py` prints the ratios."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

_NUMPY = np.random.default_rng(0)
CASES = {}
for _n in (1_000, 1_000_000):
    CASES[f"rand float32 n={_n}"] = {
        "reftorch": lambda n=_n: reftorch.rand(n), "torch": lambda n=_n: torch.rand(n),
        "numpy": lambda n=_n: _NUMPY.random(n, dtype=np.float32)}
    CASES[f"randn float32 n={_n}"] = {
        "reftorch": lambda n=_n: reftorch.randn(n), "torch": lambda n=_n: torch.randn(n),
        "numpy": lambda n=_n: _NUMPY.standard_normal(n, dtype=np.float32)}
    CASES[f"randn float64 n={_n}"] = {
        "reftorch": lambda n=_n: reftorch.randn(n, dtype=reftorch.float64),
        "torch": lambda n=_n: torch.randn(n, dtype=torch.float64),
        "numpy": lambda n=_n: _NUMPY.standard_normal(n)}
    CASES[f"randint int64 n={_n}"] = {
        "reftorch": lambda n=_n: reftorch.randint(0, 1000, (n,)),
        "torch": lambda n=_n: torch.randint(0, 1000, (n,)),
        "numpy": lambda n=_n: _NUMPY.integers(0, 1000, n)}
    CASES[f"randperm n={_n}"] = {
        "reftorch": lambda n=_n: reftorch.randperm(n), "torch": lambda n=_n: torch.randperm(n),
        "numpy": lambda n=_n: _NUMPY.permutation(n)}
    CASES[f"bernoulli_ 0.5 float32 n={_n}"] = {
        "reftorch": lambda n=_n: reftorch.empty(n).bernoulli_(0.5),
        "torch": lambda n=_n: torch.empty(n).bernoulli_(0.5),
        "numpy": lambda n=_n: (_NUMPY.random(n) < 0.5).astype(np.float32)}
_W = np.random.default_rng(1).random((64, 1000)).astype(np.float32)
CASES["multinomial 64x1000 draw 100 with replacement"] = {
    "reftorch": lambda w=reftorch.from_numpy(_W): reftorch.multinomial(w, 100, True),
    "torch": lambda w=torch.from_numpy(_W): torch.multinomial(w, 100, True)}

test_random = as_tests(CASES)
