"""Vision and embedding ops: reftorch vs PyTorch. Run with `make bench`; nothing here asserts
a time (bench/report.py prints the ratios)."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, float32_inputs, inputs

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(0)
_x, _xt, _ = float32_inputs((8, 64, 56, 56), _rng)
_g, _gt, _ = float32_inputs((8, 64, 112, 112), _rng)
_xg = _x.detach().requires_grad_()
_xgt = _xt.detach().requires_grad_()
_grid, _gridt, _ = inputs(_rng.uniform(-1, 1, (8, 56, 56, 2)).astype(np.float32))
_w, _wt, _wn = float32_inputs((50_000, 128), _rng)
_idx_np = _rng.integers(0, 50_000, size=(64, 128))
_idx, _idxt = reftorch.from_numpy(_idx_np.copy()), torch.from_numpy(_idx_np.copy())
_flat, _flatt = _idx.reshape(-1), _idxt.reshape(-1)
_offs, _offst = reftorch.arange(0, 64 * 128, 128), torch.arange(0, 64 * 128, 128)


def _interp_backward(module, x, grad):
    out = module.nn.functional.interpolate(x, size=(112, 112), mode="bilinear",
                                           align_corners=False)
    out.backward(grad)
    x.grad = None


CASES = {
    "interpolate bilinear float32 8x64x56x56->112x112": {
        "reftorch": lambda: reftorch.nn.functional.interpolate(
            _x, size=(112, 112), mode="bilinear", align_corners=False),
        "torch": lambda: torch.nn.functional.interpolate(
            _xt, size=(112, 112), mode="bilinear", align_corners=False)},
    "interpolate bilinear fwd+bwd float32 8x64x56x56->112x112": {
        "reftorch": lambda: _interp_backward(reftorch, _xg, _g),
        "torch": lambda: _interp_backward(torch, _xgt, _gt)},
    "interpolate nearest float32 8x64x56x56 x2": {
        "reftorch": lambda: reftorch.nn.functional.interpolate(_x, scale_factor=2),
        "torch": lambda: torch.nn.functional.interpolate(_xt, scale_factor=2)},
    "grid_sample bilinear float32 8x64x56x56": {
        "reftorch": lambda: reftorch.nn.functional.grid_sample(_x, _grid, align_corners=False),
        "torch": lambda: torch.nn.functional.grid_sample(_xt, _gridt, align_corners=False)},
    "embedding float32 50000x128 lookup 64x128": {
        "reftorch": lambda: reftorch.nn.functional.embedding(_idx, _w),
        "torch": lambda: torch.nn.functional.embedding(_idxt, _wt),
        "numpy": lambda: np.take(_wn, _idx_np, axis=0)},
    "embedding_bag mean float32 50000x128 64 bags of 128": {
        "reftorch": lambda: reftorch.nn.functional.embedding_bag(_flat, _w, _offs),
        "torch": lambda: torch.nn.functional.embedding_bag(_flatt, _wt, _offst)},
}

test_nn_vision = as_tests(CASES)
