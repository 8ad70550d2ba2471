"""Autograd overhead: forward vs backward of a chain of 1,000 small ops, reftorch vs PyTorch.

The chain `x = x * 1.0001 + 0.0001` (2,000 recorded nodes on a 10-element tensor) measures
per-node cost, not arithmetic. "backward/forward ratio" cases time forward+backward against
forward alone, so report.py's torch/ours column reads forward / (forward+backward). Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

STEPS = 1000
N = 10


def _chain_forward(module):
    leaf = module.ones(N, dtype=module.float32, requires_grad=True)
    cotangent = module.ones(N, dtype=module.float32)

    def forward():
        x = leaf
        for _ in range(STEPS):
            x = x * 1.0001 + 0.0001
        return x

    def forward_backward():
        forward().backward(cotangent)
        leaf.grad = None

    return forward, forward_backward


def _numpy_chain():
    x0 = np.ones(N, np.float32)

    def forward():
        x = x0
        for _ in range(STEPS):
            x = x * np.float32(1.0001) + np.float32(0.0001)
        return x
    return forward


_R_FWD, _R_FWD_BWD = _chain_forward(reftorch)
_T_FWD, _T_FWD_BWD = _chain_forward(torch)
_NP_FWD = _numpy_chain()

CASES = {
    f"autograd chain forward float32 n={N} steps={STEPS}":
        {"reftorch": _R_FWD, "torch": _T_FWD, "numpy": _NP_FWD},
    f"autograd chain forward+backward float32 n={N} steps={STEPS}":
        {"reftorch": _R_FWD_BWD, "torch": _T_FWD_BWD},
    # Same library in both columns: report.py's torch/ours is forward / (forward+backward).
    f"backward/forward ratio (fwd+bwd vs fwd) reftorch n={N} steps={STEPS}":
        {"reftorch": _R_FWD_BWD, "torch": _R_FWD},
    f"backward/forward ratio (fwd+bwd vs fwd) torch n={N} steps={STEPS}":
        {"reftorch": _T_FWD_BWD, "torch": _T_FWD},
}


test_autograd_chain = as_tests(CASES)
