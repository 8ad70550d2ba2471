"""Recurrent layers and attention: LSTM(256, 512, 2 layers) on 50 steps x batch 32 forward and
forward+backward, GRU forward, MultiheadAttention forward, against PyTorch (float32)."""
from __future__ import annotations

import numpy as np
import pytest

from cases import as_tests, float32_inputs

torch = pytest.importorskip("torch")

import reftorch  # noqa: E402
from reftorch.nn.modules.attention import MultiheadAttention  # noqa: E402
from reftorch.nn.modules.rnn import GRU, LSTM  # noqa: E402

_rng = np.random.default_rng(0)


def _pair(ours_cls, torch_cls, *args, **kwargs):
    theirs = torch_cls(*args, **kwargs)
    ours = ours_cls(*args, **kwargs)
    ours.load_state_dict({k: reftorch.from_numpy(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})
    return ours, theirs


_lstm, _lstm_t = _pair(LSTM, torch.nn.LSTM, 256, 512, num_layers=2)
_gru, _gru_t = _pair(GRU, torch.nn.GRU, 256, 512)
_x, _x_t, _ = float32_inputs((50, 32, 256), _rng)
_xg, _xg_t = _x.clone().requires_grad_(), _x_t.clone().requires_grad_()

_mha, _mha_t = _pair(MultiheadAttention, torch.nn.MultiheadAttention, 256, 8)
_q, _q_t, _ = float32_inputs((64, 16, 256), _rng)


def _forward_backward(module, x):
    out, (h, c) = module(x)
    (out.sum() + h.sum() + c.sum()).backward()


def _no_grad(module, *args, framework):
    with framework.no_grad():
        return module(*args)


CASES = {
    "LSTM(256,512,2) fwd seq50 b32 float32": {
        "reftorch": lambda: _no_grad(_lstm, _x, framework=reftorch),
        "torch": lambda: _no_grad(_lstm_t, _x_t, framework=torch),
    },
    "LSTM(256,512,2) fwd+bwd seq50 b32 float32": {
        "reftorch": lambda: _forward_backward(_lstm, _xg),
        "torch": lambda: _forward_backward(_lstm_t, _xg_t),
    },
    "GRU(256,512) fwd seq50 b32 float32": {
        "reftorch": lambda: _no_grad(_gru, _x, framework=reftorch),
        "torch": lambda: _no_grad(_gru_t, _x_t, framework=torch),
    },
    "MultiheadAttention(256,8) fwd L64 b16 float32": {
        "reftorch": lambda: _no_grad(_mha, _q, _q, _q, framework=reftorch),
        "torch": lambda: _no_grad(_mha_t, _q_t, _q_t, _q_t, framework=torch),
    },
}

test_nn_rnn = as_tests(CASES)
