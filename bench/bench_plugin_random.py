"""The C plugin's random group (issues 5 and 11) at the issue's size, 4M elements: rand and
randn in float32, randint into int64, plus rand/randn in float64 and bernoulli_(p). Every
implementation but NumPy's gives PyTorch's numbers for the same seed.

Implementations: "reftorch" (plugins loaded: mt19937 and the transforms in C),
"reftorch-reference-only" (the same call inside `reftorch.plugins.use_reference_kernels()`:
NumPy's MT19937 words, transformed by vectorized NumPy), "torch", and "numpy" (NumPy's own
generator: different numbers, the same work). float64 randn on the reference rounds
log/sin/cos correctly through extended precision and takes seconds at 4M elements: its
reference-only timing is taken at 256 Ki elements instead. Run with `make bench`;
bench/report.py prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")
torch.set_num_threads(2)  # the issue compares on 2 threads
reftorch.set_num_threads(2)

_N = 4 * 1024 * 1024
_SMALL = 256 * 1024
_NUMPY = np.random.default_rng(0)


def _reference_only(fn):
    def run():
        with reftorch.plugins.use_reference_kernels():
            return fn()
    return run


def _case(ours, theirs, numpy, reference=True):
    case = {"reftorch": ours, "torch": theirs, "numpy": numpy}
    if reference:
        case["reftorch-reference-only"] = _reference_only(ours)
    return case


_T32 = torch.empty(_N)
_R32 = reftorch.empty(_N)

CASES = {
    f"rand float32 n={_N}": _case(
        lambda: reftorch.rand(_N), lambda: torch.rand(_N),
        lambda: _NUMPY.random(_N, dtype=np.float32)),
    f"randn float32 n={_N}": _case(
        lambda: reftorch.randn(_N), lambda: torch.randn(_N),
        lambda: _NUMPY.standard_normal(_N, dtype=np.float32)),
    f"randint int64 n={_N}": _case(
        lambda: reftorch.randint(0, 1000, (_N,)), lambda: torch.randint(0, 1000, (_N,)),
        lambda: _NUMPY.integers(0, 1000, _N)),
    f"uniform_(-2, 3) float32 n={_N}": _case(
        lambda: _R32.uniform_(-2, 3), lambda: _T32.uniform_(-2, 3),
        lambda: _NUMPY.uniform(-2, 3, _N).astype(np.float32)),
    f"bernoulli_(0.3) float32 n={_N}": _case(
        lambda: _R32.bernoulli_(0.3), lambda: _T32.bernoulli_(0.3),
        lambda: (_NUMPY.random(_N) < 0.3).astype(np.float32)),
    f"rand float64 n={_N}": _case(
        lambda: reftorch.rand(_N, dtype=reftorch.float64),
        lambda: torch.rand(_N, dtype=torch.float64), lambda: _NUMPY.random(_N)),
    f"randn float64 n={_N}": _case(
        lambda: reftorch.randn(_N, dtype=reftorch.float64),
        lambda: torch.randn(_N, dtype=torch.float64), lambda: _NUMPY.standard_normal(_N),
        reference=False),
    f"randn float64 n={_SMALL}": _case(
        lambda: reftorch.randn(_SMALL, dtype=reftorch.float64),
        lambda: torch.randn(_SMALL, dtype=torch.float64),
        lambda: _NUMPY.standard_normal(_SMALL)),
    "rand float32 n=1000": _case(
        lambda: reftorch.rand(1000), lambda: torch.rand(1000),
        lambda: _NUMPY.random(1000, dtype=np.float32)),
}

test_plugin_random = as_tests(CASES)
