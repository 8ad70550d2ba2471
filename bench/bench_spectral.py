"""Spectral ops (fft, rfft, stft, windows): reftorch vs PyTorch vs NumPy.

`bench/report.py` prints the ratios from CASES; nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)


def _both(array):
    return reftorch.from_numpy(array.copy()), torch.from_numpy(array.copy())


CASES = {}

_c = (_RNG.standard_normal(4096) + 1j * _RNG.standard_normal(4096)).astype(np.complex64)
_rc, _tc = _both(_c)
CASES["fft.fft complex64 n=4096"] = {
    "reftorch": lambda: reftorch.fft.fft(_rc),
    "torch": lambda: torch.fft.fft(_tc),
    "numpy": lambda: np.fft.fft(_c)}

for _n in (1024, 2 ** 16):
    _x = _RNG.standard_normal(_n).astype(np.float32)
    _rx, _tx = _both(_x)
    CASES[f"fft.rfft float32 n={_n}"] = {
        "reftorch": lambda r=_rx: reftorch.fft.rfft(r),
        "torch": lambda t=_tx: torch.fft.rfft(t),
        "numpy": lambda a=_x: np.fft.rfft(a)}

_s = _RNG.standard_normal(16000).astype(np.float32)
_rs, _ts = _both(_s)
_rw, _tw = reftorch.hann_window(512), torch.hann_window(512)
_w = np.hanning(513)[:-1].astype(np.float32)


def _numpy_stft(signal, n_fft=512, hop=128):
    padded = np.pad(signal, n_fft // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop]
    return np.fft.rfft(frames * _w, axis=-1).T


CASES["stft float32 n=16000 n_fft=512"] = {
    "reftorch": lambda: reftorch.stft(_rs, 512, window=_rw, return_complex=True),
    "torch": lambda: torch.stft(_ts, 512, window=_tw, return_complex=True),
    "numpy": lambda: _numpy_stft(_s)}

CASES["hann_window float32 n=1024"] = {
    "reftorch": lambda: reftorch.hann_window(1024),
    "torch": lambda: torch.hann_window(1024),
    "numpy": lambda: np.hanning(1025)[:-1].astype(np.float32)}


test_spectral = as_tests(CASES)
