"""The C plugin's unary group (issue 11) at the issue's size, 4M float32 elements: exp, tanh,
sigmoid, gelu (both forms), erf, silu, log, sqrt, relu, neg, clamp, where, and the float32 <->
float64 / float16 / bfloat16 and uint8 / bool -> float32 conversions; exp and tanh also in float64; the backward ops of tanh,
sigmoid, relu (threshold_backward), gelu (both forms) and silu. And at an MLP layer's size,
(256, 512) float32: exp, sigmoid, relu, x * 0.5, x + bias, x ** 2, clamp and sum(0).

Implementations: "reftorch" (plugins loaded), "reftorch-reference-only" (the same call inside
`reftorch.plugins.use_reference_kernels()`), "torch", "numpy". gelu(approximate='none') on
the reference takes seconds at 4M elements (its erf is a chain of NumPy calls), so its
reference-only timing (and erf's, gelu_backward's) is taken at 256 Ki elements instead. Run
with `make bench`; bench/report.py prints the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import reftorch
import reftorch.nn.functional as F
from cases import as_tests, float32_inputs, inputs

torch = pytest.importorskip("torch")
torch.set_num_threads(2)  # the issue compares on 2 threads
reftorch.set_num_threads(2)
TF = torch.nn.functional

_RNG = np.random.default_rng(0)
_N = 4 * 1024 * 1024
_X_R, _X_T, _X_N = float32_inputs((_N,), _RNG)
_S_R, _S_T, _S_N = float32_inputs((256 * 1024,), _RNG)
_P_R, _P_T, _P_N = inputs(np.abs(_X_N) + np.float32(0.5))           # positive, for log/sqrt
_D_R, _D_T, _D_N = inputs(_X_N.astype(np.float64))
_M_R, _M_T, _M_N = inputs(_X_N > 0)
_Y_R, _Y_T, _Y_N = float32_inputs((_N,), _RNG)
_F16_R, _F16_T, _F16_N = inputs(_X_N.astype(np.float16))
_BF16_R, _BF16_T = _X_R.bfloat16(), _X_T.bfloat16()
_U8_R, _U8_T, _U8_N = inputs(_RNG.integers(0, 256, _N, dtype=np.uint8))


def _reference_only(fn):
    def run():
        with reftorch.plugins.use_reference_kernels():
            return fn()
    return run


def _np_gelu(a):
    erf = np.vectorize(math.erf, otypes=[np.float64])  # too slow at 4M: small size only
    return (0.5 * a * (1 + erf(a.astype(np.float64) / math.sqrt(2)))).astype(a.dtype)


def _np_gelu_tanh(a):
    return 0.5 * a * (1 + np.tanh(np.float32(math.sqrt(2 / math.pi)) *
                                  (a + np.float32(0.044715) * a * a * a)))


def _case(ours, theirs, numpy=None, reference=True):
    case = {"reftorch": ours, "torch": theirs}
    if reference:
        case["reftorch-reference-only"] = _reference_only(ours)
    if numpy is not None:
        case["numpy"] = numpy
    return case


CASES = {
    "exp float32 n=4M": _case(lambda: reftorch.exp(_X_R), lambda: torch.exp(_X_T),
                              lambda: np.exp(_X_N)),
    "tanh float32 n=4M": _case(lambda: reftorch.tanh(_X_R), lambda: torch.tanh(_X_T),
                               lambda: np.tanh(_X_N)),
    "sigmoid float32 n=4M": _case(lambda: reftorch.sigmoid(_X_R), lambda: torch.sigmoid(_X_T),
                                  lambda: 1 / (1 + np.exp(-_X_N))),
    "gelu float32 n=4M": _case(lambda: F.gelu(_X_R), lambda: TF.gelu(_X_T), reference=False),
    "gelu float32 n=256Ki": _case(lambda: F.gelu(_S_R), lambda: TF.gelu(_S_T),
                                  lambda: _np_gelu(_S_N)),
    "gelu tanh float32 n=4M": _case(lambda: F.gelu(_X_R, approximate="tanh"),
                                    lambda: TF.gelu(_X_T, approximate="tanh"),
                                    lambda: _np_gelu_tanh(_X_N)),
    "erf float32 n=256Ki": _case(lambda: reftorch.erf(_S_R), lambda: torch.erf(_S_T),
                                 lambda: np.vectorize(math.erf, otypes=[np.float32])(_S_N)),
    "silu float32 n=4M": _case(lambda: F.silu(_X_R), lambda: TF.silu(_X_T),
                               lambda: _X_N / (1 + np.exp(-_X_N))),
    "log float32 n=4M": _case(lambda: reftorch.log(_P_R), lambda: torch.log(_P_T),
                              lambda: np.log(_P_N)),
    "sqrt float32 n=4M": _case(lambda: reftorch.sqrt(_P_R), lambda: torch.sqrt(_P_T),
                               lambda: np.sqrt(_P_N)),
    "relu float32 n=4M": _case(lambda: reftorch.relu(_X_R), lambda: torch.relu(_X_T),
                               lambda: np.maximum(_X_N, np.float32(0))),
    "neg float32 n=4M": _case(lambda: reftorch.neg(_X_R), lambda: torch.neg(_X_T),
                              lambda: np.negative(_X_N)),
    "clamp float32 n=4M": _case(lambda: reftorch.clamp(_X_R, -0.5, 0.5),
                                lambda: torch.clamp(_X_T, -0.5, 0.5),
                                lambda: np.clip(_X_N, -0.5, 0.5)),
    "where float32 n=4M": _case(lambda: reftorch.where(_M_R, _X_R, _Y_R),
                                lambda: torch.where(_M_T, _X_T, _Y_T),
                                lambda: np.where(_M_N, _X_N, _Y_N)),
    "float32->float64 n=4M": _case(lambda: _X_R.double(), lambda: _X_T.double(),
                                   lambda: _X_N.astype(np.float64)),
    "float64->float32 n=4M": _case(lambda: _D_R.float(), lambda: _D_T.float(),
                                   lambda: _D_N.astype(np.float32)),
    "float32->float16 n=4M": _case(lambda: _X_R.half(), lambda: _X_T.half(),
                                   lambda: _X_N.astype(np.float16)),
    "float16->float32 n=4M": _case(lambda: _F16_R.float(), lambda: _F16_T.float(),
                                   lambda: _F16_N.astype(np.float32)),
    "float32->bfloat16 n=4M": _case(lambda: _X_R.bfloat16(), lambda: _X_T.bfloat16()),
    "bfloat16->float32 n=4M": _case(lambda: _BF16_R.float(), lambda: _BF16_T.float()),
    "uint8->float32 n=4M": _case(lambda: _U8_R.float(), lambda: _U8_T.float(),
                                 lambda: _U8_N.astype(np.float32)),
    "bool->float32 n=4M": _case(lambda: _M_R.float(), lambda: _M_T.float(),
                                lambda: _M_N.astype(np.float32)),
    "exp float64 n=4M": _case(lambda: reftorch.exp(_D_R), lambda: torch.exp(_D_T),
                              lambda: np.exp(_D_N)),
    "tanh float64 n=4M": _case(lambda: reftorch.tanh(_D_R), lambda: torch.tanh(_D_T),
                               lambda: np.tanh(_D_N)),
}

# The backward ops the derivative rows call, (grad_output, output or input) at 4M float32;
# torch's numbers are the same aten ops (torch.ops.aten.tanh_backward(g, y), ...).
_G_R, _G_T, _G_N = float32_inputs((_N,), _RNG)
_TY_R, _TY_T, _TY_N = inputs(np.tanh(_X_N))
_SY_R, _SY_T, _SY_N = inputs((1 / (1 + np.exp(-_X_N))).astype(np.float32))
_GS_R, _GS_T, _GS_N = float32_inputs((256 * 1024,), _RNG)
_A = torch.ops.aten


def _ours(name):
    from reftorch._ops import nn_activation
    return getattr(nn_activation, name)


CASES.update({
    "tanh_backward float32 n=4M": _case(
        lambda: _ours("tanh_backward")(_G_R, _TY_R), lambda: _A.tanh_backward(_G_T, _TY_T),
        lambda: _G_N * (1 - _TY_N * _TY_N)),
    "sigmoid_backward float32 n=4M": _case(
        lambda: _ours("sigmoid_backward")(_G_R, _SY_R),
        lambda: _A.sigmoid_backward(_G_T, _SY_T), lambda: _G_N * (_SY_N * (1 - _SY_N))),
    "threshold_backward (relu) float32 n=4M": _case(
        lambda: _ours("threshold_backward")(_G_R, _X_R, 0),
        lambda: _A.threshold_backward(_G_T, _X_T, 0),
        lambda: np.where(_X_N <= 0, np.float32(0), _G_N)),
    "gelu_backward float32 n=4M": _case(
        lambda: _ours("gelu_backward")(_G_R, _X_R), lambda: _A.gelu_backward(_G_T, _X_T),
        reference=False),
    "gelu_backward float32 n=256Ki": _case(
        lambda: _ours("gelu_backward")(_GS_R, _S_R), lambda: _A.gelu_backward(_GS_T, _S_T)),
    "gelu_backward tanh float32 n=4M": _case(
        lambda: _ours("gelu_backward")(_G_R, _X_R, approximate="tanh"),
        lambda: _A.gelu_backward(_G_T, _X_T, approximate="tanh")),
    "silu_backward float32 n=4M": _case(
        lambda: _ours("silu_backward")(_G_R, _X_R), lambda: _A.silu_backward(_G_T, _X_T)),
})

# An MLP layer's activations, (256, 512) float32 (128 Ki elements, in L2): here the Python
# around each call and the kernels' per-vector work count, not memory bandwidth.
_H_R, _H_T, _H_N = float32_inputs((256, 512), _RNG)
_B_R, _B_T, _B_N = float32_inputs((512,), _RNG)
_H = "float32 256x512"
CASES.update({
    f"exp {_H}": _case(lambda: reftorch.exp(_H_R), lambda: torch.exp(_H_T),
                       lambda: np.exp(_H_N)),
    f"sigmoid {_H}": _case(lambda: reftorch.sigmoid(_H_R), lambda: torch.sigmoid(_H_T),
                           lambda: 1 / (1 + np.exp(-_H_N))),
    f"relu {_H}": _case(lambda: reftorch.relu(_H_R), lambda: torch.relu(_H_T),
                        lambda: np.maximum(_H_N, np.float32(0))),
    f"x * 0.5 {_H}": _case(lambda: _H_R * 0.5, lambda: _H_T * 0.5, lambda: _H_N * 0.5),
    f"x + bias {_H}": _case(lambda: _H_R + _B_R, lambda: _H_T + _B_T, lambda: _H_N + _B_N),
    f"x ** 2 {_H}": _case(lambda: _H_R ** 2, lambda: _H_T ** 2, lambda: _H_N ** 2),
    f"clamp {_H}": _case(lambda: _H_R.clamp(-1, 1), lambda: _H_T.clamp(-1, 1),
                         lambda: np.clip(_H_N, -1, 1)),
    f"sum(0) {_H}": _case(lambda: _H_R.sum(0), lambda: _H_T.sum(0), lambda: _H_N.sum(0)),
})

test_plugin_unary = as_tests(CASES)
