"""Special functions: reftorch (vectorized NumPy series) vs PyTorch, NumPy baseline where one
exists (np.sinc, np.i0). Run with `make bench`; `bench/report.py` prints the ratios."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests
import reftorch.special  # noqa: F401

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)
CASES = {}
for _n in (1_000, 100_000):
    _x = (_RNG.standard_normal(_n) * 3).astype(np.float32)
    _r, _t = reftorch.from_numpy(_x.copy()), torch.from_numpy(_x.copy())
    CASES[f"erf float32 n={_n}"] = {"reftorch": lambda r=_r: reftorch.erf(r),
                                    "torch": lambda t=_t: torch.erf(t)}
    CASES[f"lgamma float32 n={_n}"] = {"reftorch": lambda r=_r: reftorch.lgamma(r),
                                       "torch": lambda t=_t: torch.lgamma(t)}
    CASES[f"digamma float32 n={_n}"] = {"reftorch": lambda r=_r: reftorch.digamma(r),
                                        "torch": lambda t=_t: torch.digamma(t)}
    CASES[f"i0 float32 n={_n}"] = {"reftorch": lambda r=_r: reftorch.i0(r),
                                   "torch": lambda t=_t: torch.i0(t),
                                   "numpy": lambda x=_x: np.i0(x)}
    CASES[f"sinc float32 n={_n}"] = {"reftorch": lambda r=_r: reftorch.sinc(r),
                                     "torch": lambda t=_t: torch.sinc(t),
                                     "numpy": lambda x=_x: np.sinc(x)}
    CASES[f"erfinv float32 n={_n}"] = {"reftorch": lambda r=_r / 10: reftorch.erfinv(r),
                                       "torch": lambda t=_t / 10: torch.erfinv(t)}

test_special = as_tests(CASES)
