"""The C plugin's reductions and fused nn rows (issue 11) at the issue's sizes: sum / mean /
max over all and over the last dim of 4M float32, argmax, var, logsumexp, cumsum, prod and
norm (p = 2, 1, inf, 3); softmax,
log_softmax and layer_norm on 4096 x 1024 float32; cross_entropy forward and
forward+backward on 256 x 1000.

Implementations: "reftorch" (plugins loaded), "reftorch-reference-only" (the same call inside
`reftorch.plugins.use_reference_kernels()`), "torch", "numpy". Run with `make bench`;
bench/report.py prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, float32_inputs, inputs

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)
_X_R, _X_T, _X_N = float32_inputs((4096, 1024), _RNG)   # 4M elements
_W_R, _W_T, _W_N = float32_inputs((1024,), _RNG)
_B_R, _B_T, _B_N = float32_inputs((1024,), _RNG)
_LOGITS_R, _LOGITS_T, _LOGITS_N = float32_inputs((256, 1000), _RNG)
_P_R, _P_T, _P_N = inputs((1 + _RNG.standard_normal((4096, 1024)) * 1e-3).astype(np.float32))
_CLASSES = _RNG.integers(0, 1000, 256)
_CLASSES_R, _CLASSES_T, _ = inputs(_CLASSES)


def _reference_only(fn):
    def run():
        with reftorch.plugins.use_reference_kernels():
            return fn()
    return run


def _np_softmax(a, log=False):
    shifted = a - a.max(-1, keepdims=True)
    if log:
        return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    e = np.exp(shifted)
    return e / e.sum(-1, keepdims=True)


def _np_layer_norm(a):
    mean = a.mean(-1, keepdims=True)
    centered = a - mean
    var = (centered * centered).mean(-1, keepdims=True)
    return centered / np.sqrt(var + 1e-5) * _W_N + _B_N


def _np_cross_entropy():
    log_probs = _np_softmax(_LOGITS_N, log=True)
    return -log_probs[np.arange(256), _CLASSES].mean()


def _cross_entropy_backward(module, logits, classes):
    x = logits.detach().requires_grad_()
    module.nn.functional.cross_entropy(x, classes).backward()
    return x.grad


def _case(r, t, n=None):
    case = {"reftorch": r, "reftorch-reference-only": _reference_only(r), "torch": t}
    if n is not None:
        case["numpy"] = n
    return case


_M = "float32 4096x1024"
CASES = {
    f"sum all {_M}": _case(lambda: reftorch.sum(_X_R), lambda: torch.sum(_X_T),
                           lambda: np.sum(_X_N)),
    f"mean all {_M}": _case(lambda: reftorch.mean(_X_R), lambda: torch.mean(_X_T),
                            lambda: np.mean(_X_N)),
    f"max all {_M}": _case(lambda: reftorch.max(_X_R), lambda: torch.max(_X_T),
                           lambda: np.max(_X_N)),
    f"sum dim=-1 {_M}": _case(lambda: reftorch.sum(_X_R, -1), lambda: torch.sum(_X_T, -1),
                              lambda: np.sum(_X_N, -1)),
    f"mean dim=-1 {_M}": _case(lambda: reftorch.mean(_X_R, -1), lambda: torch.mean(_X_T, -1),
                               lambda: np.mean(_X_N, -1)),
    f"max dim=-1 {_M}": _case(lambda: reftorch.max(_X_R, -1), lambda: torch.max(_X_T, -1),
                              lambda: (np.max(_X_N, -1), np.argmax(_X_N, -1))),
    f"amax dim=-1 {_M}": _case(lambda: reftorch.amax(_X_R, -1), lambda: torch.amax(_X_T, -1),
                               lambda: np.max(_X_N, -1)),
    f"argmax dim=-1 {_M}": _case(lambda: reftorch.argmax(_X_R, -1),
                                 lambda: torch.argmax(_X_T, -1), lambda: np.argmax(_X_N, -1)),
    f"sum dim=0 {_M}": _case(lambda: reftorch.sum(_X_R, 0), lambda: torch.sum(_X_T, 0),
                             lambda: np.sum(_X_N, 0)),
    f"var dim=-1 {_M}": _case(lambda: reftorch.var(_X_R, -1), lambda: torch.var(_X_T, -1),
                              lambda: np.var(_X_N, -1, ddof=1)),
    f"logsumexp dim=-1 {_M}": _case(lambda: reftorch.logsumexp(_X_R, -1),
                                    lambda: torch.logsumexp(_X_T, -1)),
    f"cumsum dim=-1 {_M}": _case(lambda: reftorch.cumsum(_X_R, -1),
                                 lambda: torch.cumsum(_X_T, -1), lambda: np.cumsum(_X_N, -1)),
    # prod of factors near 1 (finite products): sequential in each row, as the reference
    f"prod dim=-1 {_M}": _case(lambda: reftorch.prod(_P_R, -1), lambda: torch.prod(_P_T, -1),
                               lambda: np.prod(_P_N, -1)),
    f"prod all {_M}": _case(lambda: reftorch.prod(_P_R), lambda: torch.prod(_P_T),
                            lambda: np.prod(_P_N)),
    f"norm all {_M}": _case(lambda: reftorch.norm(_X_R), lambda: torch.norm(_X_T),
                            lambda: np.linalg.norm(_X_N.reshape(-1))),
    f"norm p=2 dim=-1 {_M}": _case(lambda: reftorch.norm(_X_R, 2, -1),
                                   lambda: torch.norm(_X_T, 2, -1),
                                   lambda: np.linalg.norm(_X_N, axis=-1)),
    f"norm p=1 dim=-1 {_M}": _case(lambda: reftorch.norm(_X_R, 1, -1),
                                   lambda: torch.norm(_X_T, 1, -1),
                                   lambda: np.linalg.norm(_X_N, 1, axis=-1)),
    f"norm p=inf dim=0 {_M}": _case(lambda: reftorch.norm(_X_R, float("inf"), 0),
                                    lambda: torch.norm(_X_T, float("inf"), 0),
                                    lambda: np.linalg.norm(_X_N, np.inf, axis=0)),
    f"norm p=3 dim=-1 {_M}": _case(lambda: reftorch.norm(_X_R, 3, -1),
                                   lambda: torch.norm(_X_T, 3, -1),
                                   lambda: np.linalg.norm(_X_N, 3, axis=-1)),
    f"softmax dim=-1 {_M}": _case(lambda: reftorch.softmax(_X_R, -1),
                                  lambda: torch.softmax(_X_T, -1), lambda: _np_softmax(_X_N)),
    f"log_softmax dim=-1 {_M}": _case(lambda: reftorch.log_softmax(_X_R, -1),
                                      lambda: torch.log_softmax(_X_T, -1),
                                      lambda: _np_softmax(_X_N, log=True)),
    f"layer_norm {_M}": _case(
        lambda: reftorch.nn.functional.layer_norm(_X_R, (1024,), _W_R, _B_R),
        lambda: torch.nn.functional.layer_norm(_X_T, (1024,), _W_T, _B_T),
        lambda: _np_layer_norm(_X_N)),
    "cross_entropy float32 256x1000": _case(
        lambda: reftorch.nn.functional.cross_entropy(_LOGITS_R, _CLASSES_R),
        lambda: torch.nn.functional.cross_entropy(_LOGITS_T, _CLASSES_T), _np_cross_entropy),
    "cross_entropy fwd+bwd float32 256x1000": _case(
        lambda: _cross_entropy_backward(reftorch, _LOGITS_R, _CLASSES_R),
        lambda: _cross_entropy_backward(torch, _LOGITS_T, _CLASSES_T)),
}

test_plugin_reductions = as_tests(CASES)
