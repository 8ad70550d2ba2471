"""The C plugin on a classifier's loss (issue 11): cross_entropy forward + backward over float32
logits (N, C) = (256, 1000) and (4096, 1024), mean reduction, int64 targets.

With the plugin the step runs as four fused C kernels: log_softmax and nll_loss forward, then
nll_loss_backward and _log_softmax_backward_data (the ops the derivative rows call); then
reftorch's engine copies the gradient into x.grad (PyTorch's AccumulateGrad takes the buffer
without a copy when nothing else holds it). Also the forward alone and nll_loss_backward alone
(PyTorch's `torch.ops.aten.nll_loss_backward`).

Implementations: "reftorch" (plugins loaded), "reftorch-reference-only" (the same call inside
`reftorch.plugins.use_reference_kernels()`), "torch" (2 threads, as the plugin's
OMP_NUM_THREADS=2). Run with `make bench`; bench/report.py prints the ratios. Nothing here
asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
import reftorch.nn.functional as F
from cases import as_tests, inputs

torch = pytest.importorskip("torch")
torch.set_num_threads(2)
reftorch.set_num_threads(2)
TF = torch.nn.functional

_RNG = np.random.default_rng(0)
SHAPES = [(256, 1000), (4096, 1024)]


def _reference_only(fn):
    def run():
        with reftorch.plugins.use_reference_kernels():
            return fn()
    return run


def _step_reftorch(logits, target):
    def run():
        x = logits.detach().requires_grad_()
        F.cross_entropy(x, target).backward()
        return x.grad
    return run


def _step_torch(logits, target):
    def run():
        x = logits.detach().requires_grad_()
        TF.cross_entropy(x, target).backward()
        return x.grad
    return run


def _cases():
    from reftorch._ops.nn_loss import nll_loss_backward
    cases = {}
    for n, c in SHAPES:
        x_r, x_t, _ = inputs((_RNG.standard_normal((n, c)) * 3).astype(np.float32))
        t_r, t_t, _ = inputs(_RNG.integers(0, c, n).astype(np.int64))
        label = f"float32 ({n}, {c})"
        step = _step_reftorch(x_r, t_r)
        cases[f"cross_entropy forward+backward {label}"] = {
            "reftorch": step, "reftorch-reference-only": _reference_only(step),
            "torch": _step_torch(x_t, t_t)}
        forward = (lambda x, t: lambda: F.cross_entropy(x, t))(x_r, t_r)
        cases[f"cross_entropy forward {label}"] = {
            "reftorch": forward, "reftorch-reference-only": _reference_only(forward),
            "torch": (lambda x, t: lambda: TF.cross_entropy(x, t))(x_t, t_t)}
        # nll_loss_backward alone, on log-probabilities, for 'mean' (reduction 1)
        lp_r, lp_t = F.log_softmax(x_r, 1), TF.log_softmax(x_t, 1)
        g_r, g_t, _ = inputs(np.array(1.0, np.float32))
        w_r, w_t, _ = inputs(np.array(float(n), np.float32))
        backward = (lambda lp, t, g, w: lambda: nll_loss_backward(g, lp, t, None, 1, -100, w))(
            lp_r, t_r, g_r, w_r)
        cases[f"nll_loss_backward {label}"] = {
            "reftorch": backward, "reftorch-reference-only": _reference_only(backward),
            "torch": (lambda lp, t, g, w: lambda: torch.ops.aten.nll_loss_backward(
                g, lp, t, None, 1, -100, w))(lp_t, t_t, g_t, w_t)}
    return cases


CASES = _cases()

test_plugin_loss = as_tests(CASES)
