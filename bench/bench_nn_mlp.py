"""A 3-layer MLP (784-512-512-10, batch 256): forward, backward and an SGD step, on the
reference kernels alone, with the installed plugins, and in PyTorch (issue: nn foundations).

Run with `make bench`; bench/report.py prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

BATCH, SIZES = 256, (784, 512, 512, 10)


def _training_step(lib, use_reference=False):
    """One step's closure over a freshly built model, its optimizer and one batch."""
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(SIZES[0], SIZES[1]), nn.ReLU(),
                          nn.Linear(SIZES[1], SIZES[2]), nn.ReLU(),
                          nn.Linear(SIZES[2], SIZES[3]))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = lib.from_numpy(rng.standard_normal((BATCH, SIZES[0])).astype(np.float32))
    target = lib.from_numpy(rng.integers(0, SIZES[-1], BATCH))
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
}

test_mlp = as_tests(CASES)
