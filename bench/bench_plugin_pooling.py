"""The C plugin's pooling and normalization kernels (issue 11) on a ResNet-stage activation,
float32 (16, 64, 56, 56): max_pool2d 2x2 forward and forward+backward, avg_pool2d 2x2 and
3x3/stride 2/padding 1 (forward+backward), global adaptive_avg_pool2d on (64, 512, 7, 7),
batch_norm in training mode (batch statistics and the running-stat update) forward and
forward+backward, group_norm with 32 groups; adaptive_max_pool2d to 7x7 and max_pool3d.

The issue names N = 64; at (64, 64, 56, 56) the reference-only max pool alone takes about
a second, so the batch is 16 to keep every case well under a second.

Implementations: "reftorch" (plugins loaded), "reftorch-reference-only" (the same call inside
`reftorch.plugins.use_reference_kernels()`), "torch", "numpy" (where a plain NumPy
formulation exists). forward+backward cases call backward with a fixed gradient of the
output's shape. Run with `make bench`; bench/report.py prints the ratios. Nothing here
asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, float32_inputs

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)
SHAPE = (16, 64, 56, 56)
_X = dict(zip(("reftorch", "torch", "numpy"), float32_inputs(SHAPE, _RNG)))
_POOLED = dict(zip(("reftorch", "torch", "numpy"), float32_inputs((16, 64, 28, 28), _RNG)))
_HEAD = dict(zip(("reftorch", "torch", "numpy"), float32_inputs((64, 512, 7, 7), _RNG)))
_GLOBAL = dict(zip(("reftorch", "torch", "numpy"), float32_inputs((64, 512, 1, 1), _RNG)))
_GRAD = dict(zip(("reftorch", "torch", "numpy"), float32_inputs(SHAPE, _RNG)))
_X3 = dict(zip(("reftorch", "torch", "numpy"), float32_inputs((4, 32, 16, 32, 32), _RNG)))
_LIBS = {"reftorch": reftorch, "torch": torch}
_PARAMS = {name: {"weight": lib.ones(64), "bias": lib.zeros(64),
                  "running_mean": lib.zeros(64), "running_var": lib.ones(64)}
           for name, lib in _LIBS.items()}


def _reference_only(fn):
    def run():
        with reftorch.plugins.use_reference_kernels():
            return fn()
    return run


def _case(make, numpy_fn=None):
    """make(lib_name) -> zero-argument callable; the reference-only variant reruns it."""
    case = {"reftorch": make("reftorch"), "reftorch-reference-only": _reference_only(
        make("reftorch")), "torch": make("torch")}
    if numpy_fn is not None:
        case["numpy"] = numpy_fn
    return case


def _forward(op, x=_X):
    return lambda name: (lambda: op(_LIBS[name], x[name], name))


def _forward_backward(op, grad, x=_X):
    """op's forward, then backward with a fixed gradient `grad` of the output's shape."""
    def make(name):
        lib = _LIBS[name]

        def run():
            leaf = x[name].detach().requires_grad_()
            op(lib, leaf, name).backward(grad[name])
            return leaf.grad
        return run
    return make


def _max_pool(lib, x, name):
    return lib.nn.functional.max_pool2d(x, 2)


def _avg_pool(lib, x, name):
    return lib.nn.functional.avg_pool2d(x, 2)


def _avg_pool_3x3(lib, x, name):
    return lib.nn.functional.avg_pool2d(x, 3, 2, 1)


def _global_pool(lib, x, name):
    return lib.nn.functional.adaptive_avg_pool2d(x, 1)


def _batch_norm(lib, x, name):
    p = _PARAMS[name]
    return lib.nn.functional.batch_norm(x, p["running_mean"], p["running_var"], p["weight"],
                                        p["bias"], training=True)


def _group_norm(lib, x, name):
    p = _PARAMS[name]
    return lib.nn.functional.group_norm(x, 32, p["weight"], p["bias"])


_N = _X["numpy"]


def _np_max_pool():
    return _N.reshape(16, 64, 28, 2, 28, 2).max(axis=(3, 5))


def _np_avg_pool():
    return _N.reshape(16, 64, 28, 2, 28, 2).mean(axis=(3, 5))


def _np_batch_norm():
    mean = _N.mean(axis=(0, 2, 3), keepdims=True)
    var = _N.var(axis=(0, 2, 3), keepdims=True)
    return (_N - mean) / np.sqrt(var + 1e-5)


def _np_group_norm():
    grouped = _N.reshape(16, 32, -1)
    mean = grouped.mean(-1, keepdims=True)
    var = grouped.var(-1, keepdims=True)
    return ((grouped - mean) / np.sqrt(var + 1e-5)).reshape(SHAPE)


_S = "float32 (16,64,56,56)"
CASES = {
    f"max_pool2d 2x2 {_S}": _case(_forward(_max_pool), _np_max_pool),
    f"max_pool2d 2x2 fwd+bwd {_S}": _case(_forward_backward(_max_pool, _POOLED)),
    f"avg_pool2d 2x2 {_S}": _case(_forward(_avg_pool), _np_avg_pool),
    f"avg_pool2d 2x2 fwd+bwd {_S}": _case(_forward_backward(_avg_pool, _POOLED)),
    f"avg_pool2d 3x3 s2 p1 fwd+bwd {_S}": _case(_forward_backward(_avg_pool_3x3, _POOLED)),
    "adaptive_avg_pool2d global fwd+bwd float32 (64,512,7,7)": _case(
        _forward_backward(_global_pool, _GLOBAL, _HEAD)),
    f"batch_norm train {_S}": _case(_forward(_batch_norm), _np_batch_norm),
    f"batch_norm train fwd+bwd {_S}": _case(_forward_backward(_batch_norm, _GRAD)),
    f"group_norm 32 groups {_S}": _case(_forward(_group_norm), _np_group_norm),
    f"adaptive_max_pool2d to 7x7 {_S}": _case(_forward(
        lambda lib, x, name: lib.nn.functional.adaptive_max_pool2d(x, 7))),
    "max_pool3d 2x2x2 float32 (4,32,16,32,32)": _case(_forward(
        lambda lib, x, name: lib.nn.functional.max_pool3d(x, 2), _X3)),
}

test_plugin_pooling = as_tests(CASES)
