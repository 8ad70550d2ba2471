"""The C plugin's sorting kernels (issue 11): reftorch with the plugin, reftorch on its
reference kernels only, PyTorch and NumPy. Nothing here asserts a time (bench/report.py
prints the ratios). Cases: a 1M-element float32 row, 1024 rows of 1024 along the last dim,
argsort of the same, and topk(k=10) of 1024 rows of 4096. PyTorch runs on 2 threads, as the
plugin does with OMP_NUM_THREADS=2.

NumPy's stand-ins: np.argsort(kind="stable") for sort/argsort (indices only: the values
would cost one more gather) and np.argpartition + a sort of the k for topk (not stable, so
not the same answer on ties; a cost reference only).
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, inputs

torch = pytest.importorskip("torch")
torch.set_num_threads(2)
reftorch.set_num_threads(2)

_rng = np.random.default_rng(0)


def _reference_only(fn):
    def run():
        with reftorch.plugins.use_reference_kernels():
            return fn()
    return run


def _case(reftorch_fn, torch_fn, numpy_fn):
    return {"reftorch": reftorch_fn, "reftorch-reference-only": _reference_only(reftorch_fn),
            "torch": torch_fn, "numpy": numpy_fn}


def _numpy_topk(a, k):
    part = np.argpartition(-a, k, axis=-1)[..., :k]
    order = np.argsort(-np.take_along_axis(a, part, -1), axis=-1, kind="stable")
    return np.take_along_axis(part, order, -1)


CASES = {}

_row = inputs(_rng.standard_normal(1 << 20).astype(np.float32))
CASES["sort float32 1M (one row)"] = _case(
    lambda: reftorch.sort(_row[0]), lambda: torch.sort(_row[1]),
    lambda: np.argsort(_row[2], kind="stable"))

_square = inputs(_rng.standard_normal((1024, 1024)).astype(np.float32))
CASES["sort float32 (1024, 1024) dim=-1"] = _case(
    lambda: reftorch.sort(_square[0]), lambda: torch.sort(_square[1]),
    lambda: np.argsort(_square[2], axis=-1, kind="stable"))
CASES["argsort float32 (1024, 1024) dim=-1"] = _case(
    lambda: reftorch.argsort(_square[0]), lambda: torch.argsort(_square[1]),
    lambda: np.argsort(_square[2], axis=-1, kind="stable"))
CASES["argsort float32 1M (one row) descending"] = _case(
    lambda: reftorch.argsort(_row[0], descending=True),
    lambda: torch.argsort(_row[1], descending=True),
    lambda: np.argsort(-_row[2], kind="stable"))

_wide = inputs(_rng.standard_normal((1024, 4096)).astype(np.float32))
CASES["topk float32 (1024, 4096) k=10"] = _case(
    lambda: reftorch.topk(_wide[0], 10), lambda: torch.topk(_wide[1], 10),
    lambda: _numpy_topk(_wide[2], 10))

test_plugin_sorting = as_tests(CASES)
