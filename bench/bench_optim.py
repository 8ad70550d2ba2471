"""Optimizer steps (torch.optim): one step over 10M float32 parameters (10 tensors of 1M),
reftorch vs PyTorch vs a hand-written NumPy update doing the same in-place operations.

`bench/report.py` prints the ratios from CASES; nothing here asserts a time. Each call is
one more step of the same optimizer (the state keeps evolving, as in training).
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
import reftorch.optim
from cases import inputs, as_tests

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)
_TENSORS, _SIZE = 10, 1_000_000


def _parameters():
    """Per library: 10 parameters of 1M float32 elements, each with a fixed gradient."""
    ref, tor, arrays = [], [], []
    for _ in range(_TENSORS):
        r, t, a = inputs(_RNG.standard_normal(_SIZE).astype(np.float32))
        gr, gt, ga = inputs(_RNG.standard_normal(_SIZE).astype(np.float32))
        r.requires_grad_()
        t.requires_grad_()
        r.grad, t.grad = gr, gt
        ref.append(r)
        tor.append(t)
        arrays.append((a, ga))
    return ref, tor, arrays


def _numpy_sgd_momentum(arrays, lr=0.01, momentum=0.9):
    buffers = [None] * len(arrays)

    def step():
        for i, (p, g) in enumerate(arrays):
            if buffers[i] is None:
                buffers[i] = g.copy()
            else:
                buffers[i] *= momentum
                buffers[i] += g
            p -= np.float32(lr) * buffers[i]
    return step


def _numpy_adam(arrays, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    m = [np.zeros_like(p) for p, _ in arrays]
    v = [np.zeros_like(p) for p, _ in arrays]
    t = [0]

    def step():
        t[0] += 1
        step_size = lr / (1 - beta1 ** t[0])
        correction2_sqrt = (1 - beta2 ** t[0]) ** 0.5
        for (p, g), m_i, v_i in zip(arrays, m, v):
            m_i += np.float32(1 - beta1) * (g - m_i)
            v_i *= np.float32(beta2)
            v_i += np.float32(1 - beta2) * g * g
            p -= np.float32(step_size) * (m_i / (np.sqrt(v_i) / np.float32(correction2_sqrt)
                                                 + np.float32(eps)))
    return step


CASES = {}
for _name, _make, _numpy in (
        ("SGD momentum=0.9", lambda lib, ps: lib.optim.SGD(ps, lr=0.01, momentum=0.9),
         _numpy_sgd_momentum),
        ("Adam", lambda lib, ps: lib.optim.Adam(ps, lr=1e-3), _numpy_adam)):
    _ref, _tor, _arrays = _parameters()
    CASES[f"{_name} step float32 n=10x1000000"] = {
        "reftorch": _make(reftorch, _ref).step,
        "torch": _make(torch, _tor).step,
        "numpy": _numpy(_arrays)}

test_optim = as_tests(CASES)
