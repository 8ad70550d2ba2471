"""Pooling and normalization on an (8, 64, 56, 56) float32 activation (a ResNet stage):
max_pool2d and avg_pool2d with a 3x3 window, stride 2, padding 1, and batch_norm in training
mode (batch statistics plus the running-stat update)."""
from __future__ import annotations

import numpy as np
import pytest

from cases import as_tests, float32_inputs

torch = pytest.importorskip("torch")

import reftorch  # noqa: E402
import reftorch.nn.functional as RF  # noqa: E402

_rng = np.random.default_rng(0)
SHAPE = (8, 64, 56, 56)
_r, _t, _n = float32_inputs(SHAPE, _rng)
_stats = {lib: (lib.zeros(64), lib.ones(64)) for lib in (reftorch, torch)}
_weight = {lib: (lib.ones(64), lib.zeros(64)) for lib in (reftorch, torch)}


def _batch_norm(lib, x):
    mean, var = _stats[lib]
    weight, bias = _weight[lib]
    return lambda: lib.nn.functional.batch_norm(x, mean, var, weight, bias, training=True)


def _numpy_batch_norm():
    mean = _n.mean(axis=(0, 2, 3), keepdims=True)
    var = _n.var(axis=(0, 2, 3), keepdims=True)
    return (_n - mean) / np.sqrt(var + 1e-5)


CASES = {
    "max_pool2d k3 s2 p1 float32 (8,64,56,56)": {
        "reftorch": lambda: RF.max_pool2d(_r, 3, 2, 1),
        "torch": lambda: torch.nn.functional.max_pool2d(_t, 3, 2, 1),
    },
    "avg_pool2d k3 s2 p1 float32 (8,64,56,56)": {
        "reftorch": lambda: RF.avg_pool2d(_r, 3, 2, 1),
        "torch": lambda: torch.nn.functional.avg_pool2d(_t, 3, 2, 1),
    },
    "batch_norm train float32 (8,64,56,56)": {
        "reftorch": _batch_norm(reftorch, _r),
        "torch": _batch_norm(torch, _t),
        "numpy": _numpy_batch_norm,
    },
}

test_nn_pool_norm = as_tests(CASES)
