"""Convolution, its backward, F.pad and F.unfold: reftorch vs PyTorch (CPU).

The headline case is a ResNet-style layer: conv2d of an 8x64x56x56 float32 batch with 64
3x3 filters, padding 1. `bench/report.py` prints the ratios from CASES; nothing here asserts
a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, float32_inputs

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)

CASES = {}

_xr, _xt, _ = float32_inputs((8, 64, 56, 56), _RNG)
_wr, _wt, _ = float32_inputs((64, 64, 3, 3), _RNG)
CASES["conv2d float32 8x64x56x56 w=64x64x3x3 pad=1"] = {
    "reftorch": lambda: reftorch.conv2d(_xr, _wr, padding=1),
    "torch": lambda: torch.conv2d(_xt, _wt, padding=1)}


def _conv_input_weight_backward(module, x, w, grad):
    x, w = (t.detach().requires_grad_() for t in (x, w))
    return module.autograd.grad(module.conv2d(x, w, padding=1), (x, w), grad)


# The same layer's backward (input and weight gradients; the forward is part of the time).
_g8r, _g8t, _ = float32_inputs((8, 64, 56, 56), _RNG)
CASES["conv2d forward+backward float32 8x64x56x56 w=64x64x3x3 pad=1"] = {
    "reftorch": lambda: _conv_input_weight_backward(reftorch, _xr, _wr, _g8r),
    "torch": lambda: _conv_input_weight_backward(torch, _xt, _wt, _g8t)}

# Backward of a smaller layer (input, weight and bias gradients).
_sr, _st, _ = float32_inputs((4, 32, 28, 28), _RNG)
_swr, _swt, _ = float32_inputs((32, 32, 3, 3), _RNG)
_sbr, _sbt, _ = float32_inputs((32,), _RNG)
_gr, _gt, _ = float32_inputs((4, 32, 28, 28), _RNG)


def _conv_backward(module, x, w, b, grad):
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    out = module.conv2d(x, w, b, padding=1)
    return module.autograd.grad(out, (x, w, b), grad)


CASES["conv2d backward float32 4x32x28x28 w=32x32x3x3"] = {
    "reftorch": lambda: _conv_backward(reftorch, _sr, _swr, _sbr, _gr),
    "torch": lambda: _conv_backward(torch, _st, _swt, _sbt, _gt)}

_tr, _tt, _ = float32_inputs((4, 32, 14, 14), _RNG)
_twr, _twt, _ = float32_inputs((32, 16, 4, 4), _RNG)
CASES["conv_transpose2d float32 4x32x14x14 w=32x16x4x4 stride=2"] = {
    "reftorch": lambda: reftorch.conv_transpose2d(_tr, _twr, stride=2, padding=1),
    "torch": lambda: torch.conv_transpose2d(_tt, _twt, stride=2, padding=1)}

# Convolutions the 2-D path serves by reduction: 1-D, 3-D, grouped and depthwise.
for _label, _xs, _ws, _kw, _fn in (
        ("conv1d float32 8x64x1024 w=64x64x3 pad=1", (8, 64, 1024), (64, 64, 3), {}, "conv1d"),
        ("conv3d float32 2x16x16x32x32 w=16x16x3x3x3 pad=1", (2, 16, 16, 32, 32),
         (16, 16, 3, 3, 3), {}, "conv3d"),
        ("conv2d groups=2 float32 8x64x56x56 w=64x32x3x3 pad=1", (8, 64, 56, 56),
         (64, 32, 3, 3), {"groups": 2}, "conv2d"),
        ("conv2d depthwise float32 8x64x56x56 w=64x1x3x3 pad=1", (8, 64, 56, 56),
         (64, 1, 3, 3), {"groups": 64}, "conv2d")):
    (_ixr, _ixt, _), (_iwr, _iwt, _) = float32_inputs(_xs, _RNG), float32_inputs(_ws, _RNG)
    CASES[_label] = {
        "reftorch": lambda x=_ixr, w=_iwr, kw=_kw, f=_fn: getattr(reftorch, f)(x, w, padding=1,
                                                                              **kw),
        "torch": lambda x=_ixt, w=_iwt, kw=_kw, f=_fn: getattr(torch, f)(x, w, padding=1,
                                                                        **kw)}

_dxr, _dxt, _ = float32_inputs((8, 64, 56, 56), _RNG)
_dwr, _dwt, _ = float32_inputs((64, 1, 3, 3), _RNG)


def _depthwise_step(module, x, w, stride):
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    out = module.conv2d(x, w, padding=1, groups=64, stride=stride)
    return module.autograd.grad(out, (x, w), module.ones_like(out))


for _stride in (1, 2):
    CASES[f"conv2d depthwise forward+backward stride={_stride} float32 8x64x56x56"] = {
        "reftorch": lambda s=_stride: _depthwise_step(reftorch, _dxr, _dwr, s),
        "torch": lambda s=_stride: _depthwise_step(torch, _dxt, _dwt, s)}

_pr, _pt, _pa = float32_inputs((8, 64, 56, 56), _RNG)
for _mode in ("constant", "reflect", "replicate", "circular"):
    CASES[f"F.pad {_mode} float32 8x64x56x56 pad=2"] = {
        "reftorch": lambda m=_mode: reftorch.nn.functional.pad(_pr, (2, 2, 2, 2), m),
        "torch": lambda m=_mode: torch.nn.functional.pad(_pt, (2, 2, 2, 2), m)}
CASES["F.pad constant float32 8x64x56x56 pad=2"]["numpy"] = \
    lambda: np.pad(_pa, ((0, 0), (0, 0), (2, 2), (2, 2)))
_pgr, _pgt, _ = float32_inputs((8, 64, 60, 60), _RNG)


def _pad_backward(module, x, grad, mode):
    leaf = x.detach().requires_grad_()
    module.nn.functional.pad(leaf, (2, 2, 2, 2), mode).backward(grad)
    return leaf.grad


for _mode in ("reflect", "replicate"):
    CASES[f"F.pad {_mode} forward+backward float32 8x64x56x56 pad=2"] = {
        "reftorch": lambda m=_mode: _pad_backward(reftorch, _pr, _pgr, m),
        "torch": lambda m=_mode: _pad_backward(torch, _pt, _pgt, m)}

_vr, _vt, _ = float32_inputs((4, 64, 56, 56), _RNG)
for _mode in ("nearest", "bilinear", "bicubic"):
    CASES[f"F.interpolate {_mode} x2 float32 4x64x56x56"] = {
        "reftorch": lambda m=_mode: reftorch.nn.functional.interpolate(_vr, scale_factor=2,
                                                                       mode=m),
        "torch": lambda m=_mode: torch.nn.functional.interpolate(_vt, scale_factor=2, mode=m)}

_ur, _ut, _ = float32_inputs((8, 16, 32, 32), _RNG)
CASES["F.unfold float32 8x16x32x32 k=3 pad=1"] = {
    "reftorch": lambda: reftorch.nn.functional.unfold(_ur, 3, padding=1),
    "torch": lambda: torch.nn.functional.unfold(_ut, 3, padding=1)}

test_nn_conv = as_tests(CASES)
