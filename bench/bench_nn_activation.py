"""Activations and dropout: reftorch vs PyTorch vs NumPy on 1e6 float32 elements.

`bench/report.py` prints the ratios from CASES; nothing here asserts a time.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import reftorch
from cases import as_tests, float32_inputs

torch = pytest.importorskip("torch")

N = 1_000_000
_r, _t, _a = float32_inputs((N,), np.random.default_rng(0))
_r2, _t2, _a2 = float32_inputs((1000, 1000), np.random.default_rng(1))


def _np_softmax(a):
    shifted = np.exp(a - a.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _np_gelu_tanh(a):
    return 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))


def _np_dropout(a, p=0.5, rng=np.random.default_rng(2)):
    return a * (rng.random(a.shape) >= p) / np.float32(1 - p)


CASES = {
    f"relu float32 n={N}": {
        "reftorch": lambda: reftorch.relu(_r), "torch": lambda: torch.relu(_t),
        "numpy": lambda: np.maximum(_a, 0)},
    "softmax float32 (1000, 1000) dim=-1": {
        "reftorch": lambda: reftorch.softmax(_r2, -1), "torch": lambda: torch.softmax(_t2, -1),
        "numpy": lambda: _np_softmax(_a2)},
    f"gelu float32 n={N}": {
        "reftorch": lambda: reftorch.nn.functional.gelu(_r),
        "torch": lambda: torch.nn.functional.gelu(_t)},
    f"gelu tanh float32 n={N}": {
        "reftorch": lambda: reftorch.nn.functional.gelu(_r, approximate="tanh"),
        "torch": lambda: torch.nn.functional.gelu(_t, approximate="tanh"),
        "numpy": lambda: _np_gelu_tanh(_a)},
    f"dropout p=0.5 float32 n={N}": {
        "reftorch": lambda: reftorch.nn.functional.dropout(_r, 0.5),
        "torch": lambda: torch.nn.functional.dropout(_t, 0.5),
        "numpy": lambda: _np_dropout(_a)},
}

test_nn_activation = as_tests(CASES)
