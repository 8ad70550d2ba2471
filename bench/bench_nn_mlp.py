"""End-to-end training steps (forward, backward and an SGD-with-momentum step) on the
reference kernels alone, with the installed plugins, and in PyTorch: a 3-layer MLP
(784-512-512-10, batch 256) and a LeNet-style CNN (batch 64 of 1x28x28: two 5x5
convolutions with ReLU and 2x2 max pooling, then 256-120-84-10), the end-to-end goals of
the CPU plugin's issue.

Run with `make bench`; bench/report.py prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

BATCH, SIZES = 256, (784, 512, 512, 10)


def _mlp(nn):
    return nn.Sequential(nn.Linear(SIZES[0], SIZES[1]), nn.ReLU(),
                         nn.Linear(SIZES[1], SIZES[2]), nn.ReLU(),
                         nn.Linear(SIZES[2], SIZES[3]))


def _lenet(nn):
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 4 * 4, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def _training_step(lib, use_reference=False, build=_mlp, input_shape=(BATCH, SIZES[0])):
    """One step's closure over a freshly built model, its optimizer and one batch."""
    lib.manual_seed(0)
    nn = lib.nn
    model = build(nn)
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = lib.from_numpy(rng.standard_normal(input_shape).astype(np.float32))
    target = lib.from_numpy(rng.integers(0, 10, input_shape[0]))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        optimizer.step()

    if not use_reference:
        return step

    def reference_step():
        with reftorch.plugins.use_reference_kernels():
            step()
    return reference_step


CASES = {
    "MLP 784-512-512-10 batch 256 train step": {
        "reftorch": _training_step(reftorch),
        "reftorch-reference-only": _training_step(reftorch, use_reference=True),
        "torch": _training_step(torch),
    },
    "LeNet-style CNN batch 64 1x28x28 train step": {
        impl: _training_step(lib, reference, _lenet, (64, 1, 28, 28))
        for impl, lib, reference in (("reftorch", reftorch, False),
                                     ("reftorch-reference-only", reftorch, True),
                                     ("torch", torch, False))
    },
}

test_mlp = as_tests(CASES)
