"""The C plugin's indexing kernels (issue 11) at 1M indices: reftorch with the plugin,
reftorch on its reference kernels only, PyTorch and NumPy. Nothing here asserts a time
(bench/report.py prints the ratios). The goal: embedding, gather and index_add at least as
fast as PyTorch on 2 threads (set below for both)."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, inputs

torch = pytest.importorskip("torch")
torch.set_num_threads(2)
reftorch.set_num_threads(2)

N = 1_000_000
_rng = np.random.default_rng(0)


def _reference_only(fn):
    def run():
        with reftorch.plugins.use_reference_kernels():
            return fn()
    return run


def _case(reftorch_fn, torch_fn, numpy_fn):
    return {"reftorch": reftorch_fn, "reftorch-reference-only": _reference_only(reftorch_fn),
            "torch": torch_fn, "numpy": numpy_fn}


CASES = {}

# embedding: 1M lookups of 16-float rows from a 100,000-row table
_w = inputs(_rng.standard_normal((100_000, 16)).astype(np.float32))
_i = inputs(_rng.integers(0, 100_000, N))
CASES["embedding float32 1M x 16"] = _case(
    lambda: reftorch.nn.functional.embedding(_i[0], _w[0]),
    lambda: torch.nn.functional.embedding(_i[1], _w[1]),
    lambda: _w[2][_i[2]])
CASES["index_select float32 1M rows x 16"] = _case(
    lambda: _w[0].index_select(0, _i[0]), lambda: _w[1].index_select(0, _i[1]),
    lambda: np.take(_w[2], _i[2], axis=0))

# gather: 1M indices into a 1000 x 1000 matrix, along each dim
_a = inputs(_rng.standard_normal((1000, 1000)).astype(np.float32))
_g = inputs(_rng.integers(0, 1000, (1000, 1000)))
CASES["gather float32 dim=1 1M"] = _case(
    lambda: _a[0].gather(1, _g[0]), lambda: _a[1].gather(1, _g[1]),
    lambda: np.take_along_axis(_a[2], _g[2], axis=1))
CASES["gather float32 dim=0 1M"] = _case(
    lambda: _a[0].gather(0, _g[0]), lambda: _a[1].gather(0, _g[1]),
    lambda: np.take_along_axis(_a[2], _g[2], axis=0))
CASES["take float32 1M"] = _case(
    lambda: reftorch.take(_a[0], _g[0]), lambda: torch.take(_a[1], _g[1]),
    lambda: _a[2].reshape(-1)[_g[2]])

# index_add: 1M source rows of 16 floats into 10,000 rows (about 100 repeats per row)
_o = inputs(np.zeros((10_000, 16), np.float32))
_s = inputs(_rng.standard_normal((N, 16)).astype(np.float32))
_j = inputs(_rng.integers(0, 10_000, N))


def _numpy_index_add():
    out = _o[2].copy()
    np.add.at(out, _j[2], _s[2])
    return out


CASES["index_add float32 1M x 16"] = _case(
    lambda: _o[0].index_add(0, _j[0], _s[0]), lambda: _o[1].index_add(0, _j[1], _s[1]),
    _numpy_index_add)

# index_add of 1M scalars into 100,000 elements (the embedding-backward shape with 1 column)
_o1 = inputs(np.zeros(100_000, np.float32))
_s1 = inputs(_rng.standard_normal(N).astype(np.float32))
_j1 = inputs(_rng.integers(0, 100_000, N))


def _numpy_index_add_1d():
    out = _o1[2].copy()
    np.add.at(out, _j1[2], _s1[2])
    return out


CASES["index_add float32 1-D 1M"] = _case(
    lambda: _o1[0].index_add(0, _j1[0], _s1[0]), lambda: _o1[1].index_add(0, _j1[1], _s1[1]),
    _numpy_index_add_1d)
CASES["scatter_add float32 dim=1 1M"] = _case(
    lambda: _a[0].scatter_add(1, _g[0], _a[0]), lambda: _a[1].scatter_add(1, _g[1], _a[1]),
    None)
del CASES["scatter_add float32 dim=1 1M"]["numpy"]

# masked ops on 4M float32 elements with a random half-true mask (and the mask broadcast as
# one row of 1024)
_x = inputs(_rng.standard_normal((4096, 1024)).astype(np.float32))
_m = inputs(_rng.random((4096, 1024)) < 0.5)
_mrow = inputs(_rng.random(1024) < 0.5)
_src = inputs(_rng.standard_normal(4096 * 1024).astype(np.float32))


def _numpy_masked_scatter():
    out = _x[2].copy()
    out[_m[2]] = _src[2][:int(_m[2].sum())]
    return out


CASES["masked_fill float32 4M"] = _case(
    lambda: _x[0].masked_fill(_m[0], 0.5), lambda: _x[1].masked_fill(_m[1], 0.5),
    lambda: np.where(_m[2], np.float32(0.5), _x[2]))
CASES["masked_fill float32 4M row mask"] = _case(
    lambda: _x[0].masked_fill(_mrow[0], 0.5), lambda: _x[1].masked_fill(_mrow[1], 0.5),
    lambda: np.where(_mrow[2], np.float32(0.5), _x[2]))
CASES["masked_select float32 4M"] = _case(
    lambda: _x[0].masked_select(_m[0]), lambda: _x[1].masked_select(_m[1]),
    lambda: _x[2][_m[2]])
CASES["masked_scatter float32 4M"] = _case(
    lambda: _x[0].masked_scatter(_m[0], _src[0]), lambda: _x[1].masked_scatter(_m[1], _src[1]),
    _numpy_masked_scatter)

test_plugin_indexing = as_tests(CASES)
