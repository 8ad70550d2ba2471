"""The C plugin's matrix products and 2-D convolution (reftorch_cpu.gemm, src/gemm.c):
reftorch with the plugin vs reftorch on its NumPy reference kernels vs PyTorch vs NumPy
(OpenBLAS), at the sizes issue 11 names (GEMM float32 64^3, 256^3, 1024^3; conv2d 3x3
N=8 64->64 56x56). Thread counts are the libraries' defaults (all cores).

`bench/report.py` prints the ratios from CASES; nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, float32_inputs, inputs

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)


def _reference_only(fn):
    """fn run on reftorch's reference kernels (the plugin ignored)."""
    def run():
        with reftorch.plugins.use_reference_kernels():
            return fn()
    return run


def _case(ref_fn, torch_fn, numpy_fn=None):
    case = {"reftorch": ref_fn, "reftorch-reference-only": _reference_only(ref_fn),
            "torch": torch_fn}
    if numpy_fn is not None:
        case["numpy"] = numpy_fn
    return case


CASES = {}
for _n in (64, 256, 1024):
    (_ra, _ta, _aa), (_rb, _tb, _ab) = float32_inputs((_n, _n), _RNG), float32_inputs((_n, _n), _RNG)
    CASES[f"mm float32 {_n}^3 n={_n * _n}"] = _case(
        lambda a=_ra, b=_rb: reftorch.mm(a, b), lambda a=_ta, b=_tb: torch.mm(a, b),
        lambda a=_aa, b=_ab: a @ b)

(_ra, _ta, _aa), (_rb, _tb, _ab) = float32_inputs((512, 512), _RNG), float32_inputs((512, 512), _RNG)
CASES["mm float32 512^3 transposed operand n=262144"] = _case(
    lambda: reftorch.mm(_ra, _rb.t()), lambda: torch.mm(_ta, _tb.t()), lambda: _aa @ _ab.T)
_rc, _tc, _ac = float32_inputs((512,), _RNG)
CASES["addmm float32 512^3 bias beta=0.5 alpha=2 n=262144"] = _case(
    lambda: reftorch.addmm(_rc, _ra, _rb, beta=0.5, alpha=2.0),
    lambda: torch.addmm(_tc, _ta, _tb, beta=0.5, alpha=2.0),
    lambda: 0.5 * _ac + 2.0 * (_aa @ _ab))

_rd, _td, _ad = inputs(_RNG.standard_normal((512, 512)))
CASES["mm float64 512^3 n=262144"] = _case(
    lambda: reftorch.mm(_rd, _rd), lambda: torch.mm(_td, _td), lambda: _ad @ _ad)

(_rx, _tx, _ax), (_ry, _ty, _ay) = (float32_inputs((32, 64, 64), _RNG),
                                    float32_inputs((32, 64, 64), _RNG))
CASES["bmm float32 32x64x64 n=131072"] = _case(
    lambda: reftorch.bmm(_rx, _ry), lambda: torch.bmm(_tx, _ty), lambda: np.matmul(_ax, _ay))

_rxc, _txc, _ = float32_inputs((8, 64, 56, 56), _RNG)
_rwc, _twc, _ = float32_inputs((64, 64, 3, 3), _RNG)
CASES["conv2d float32 8x64x56x56 w=64x64x3x3 pad=1"] = _case(
    lambda: reftorch.conv2d(_rxc, _rwc, padding=1), lambda: torch.conv2d(_txc, _twc, padding=1))

test_plugin_gemm = as_tests(CASES)
