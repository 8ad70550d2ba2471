"""Losses: cross_entropy (256 x 1000 classes) forward and forward+backward, mse_loss on 1e6
elements, ctc_loss forward+backward; reftorch vs PyTorch (and NumPy where it has a direct
equivalent). Inputs are built once at import; nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, float32_inputs, inputs

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)

_LOGITS_R, _LOGITS_T, _LOGITS_N = float32_inputs((256, 1000), _RNG)
_CLASSES = _RNG.integers(0, 1000, 256)
_CLASSES_R, _CLASSES_T, _ = inputs(_CLASSES)
_PRED_R, _PRED_T, _PRED_N = float32_inputs((1_000_000,), _RNG)
_TARGET_R, _TARGET_T, _TARGET_N = float32_inputs((1_000_000,), _RNG)

_CTC_LOGITS = _RNG.standard_normal((50, 16, 20)).astype(np.float32)
_CTC_TARGETS = _RNG.integers(1, 20, (16, 10))
_CTC_INPUT_LENGTHS = np.full(16, 50)
_CTC_TARGET_LENGTHS = _RNG.integers(5, 11, 16)


def _numpy_cross_entropy():
    shifted = _LOGITS_N - _LOGITS_N.max(1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    return -log_probs[np.arange(256), _CLASSES].mean()


def _cross_entropy_backward(module, logits, classes):
    x = logits.detach().requires_grad_()
    module.nn.functional.cross_entropy(x, classes).backward()
    return x.grad


def _ctc(module):
    logits = module.from_numpy(_CTC_LOGITS.copy()).requires_grad_()
    loss = module.nn.functional.ctc_loss(
        logits.log_softmax(2),
        module.from_numpy(_CTC_TARGETS.copy()), module.from_numpy(_CTC_INPUT_LENGTHS.copy()),
        module.from_numpy(_CTC_TARGET_LENGTHS.copy()))
    loss.backward()
    return logits.grad


CASES = {
    "cross_entropy float32 256x1000": {
        "reftorch": lambda: reftorch.nn.functional.cross_entropy(_LOGITS_R, _CLASSES_R),
        "torch": lambda: torch.nn.functional.cross_entropy(_LOGITS_T, _CLASSES_T),
        "numpy": _numpy_cross_entropy},
    "cross_entropy backward float32 256x1000": {
        "reftorch": lambda: _cross_entropy_backward(reftorch, _LOGITS_R, _CLASSES_R),
        "torch": lambda: _cross_entropy_backward(torch, _LOGITS_T, _CLASSES_T)},
    "mse_loss float32 n=1000000": {
        "reftorch": lambda: reftorch.nn.functional.mse_loss(_PRED_R, _TARGET_R),
        "torch": lambda: torch.nn.functional.mse_loss(_PRED_T, _TARGET_T),
        "numpy": lambda: np.mean((_PRED_N - _TARGET_N) ** 2)},
    "ctc_loss backward float32 T=50 N=16 C=20 S=10": {
        "reftorch": lambda: _ctc(reftorch), "torch": lambda: _ctc(torch)},
}

test_nn_loss = as_tests(CASES)
