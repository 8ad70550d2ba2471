"""The view gradient pair (_view_scatter / _view_gather in reftorch/_ops/gradient_ops.py).

Their specification is slot by slot: every view element's gradient is added into the storage
slot it reads, then the viewed tensor's elements are read back (and the adjoint). Where no two
elements of the written geometry share a slot the reference writes through strided NumPy
views instead of index arrays; these tests hold that path to the slot-by-slot formula, bit
for bit, over many geometries (offsets, steps, permuted and size-1 dims, -0.0 and NaN), and
check that overlapping geometries (expand, unfold) still accumulate.
"""
from __future__ import annotations

import numpy as np
import pytest

from reftorch._ops import gradient_ops as G


def _slot_by_slot_scatter(grad, self_geometry, view_geometry):
    self_slots, view_slots = G._slots(self_geometry), G._slots(view_geometry)
    size = max((int(s.max()) + 1 if s.size else 0) for s in (self_slots, view_slots))
    storage = np.zeros(size, grad.dtype)
    np.add.at(storage, view_slots, grad)
    return storage[self_slots]


def _slot_by_slot_gather(grad, self_geometry, view_geometry):
    self_slots, view_slots = G._slots(self_geometry), G._slots(view_geometry)
    size = max((int(s.max()) + 1 if s.size else 0) for s in (self_slots, view_slots))
    storage = np.zeros(size, grad.dtype)
    storage[self_slots] = grad
    return storage[view_slots]


def _contiguous(shape, offset=0):
    strides, step = [], 1
    for n in reversed(shape):
        strides.insert(0, step)
        step *= n
    return tuple(shape), tuple(strides), offset


def _geometries(rng):
    """(self geometry, view geometry) pairs: a tensor and a view of it, as the view ops make."""
    base = (4, 5, 6)
    whole = _contiguous(base)
    yield whole, ((5, 6), (6, 1), 2 * 30)                       # select(0, 2)
    yield whole, ((4, 2, 6), (30, 6, 1), 6)                     # narrow(1, 1, 2)
    yield whole, ((4, 5, 3), (30, 6, 2), 1)                     # [..., 1::2]
    yield whole, ((6, 4), (1, 30), 12)                          # a permuted select
    yield whole, ((4,), (36,), 0)                               # a diagonal
    yield whole, ((0, 6), (6, 1), 0)                            # empty
    yield ((3, 4), (12, 2), 5), ((3, 2), (12, 4), 5)            # a view of a strided view
    yield ((3, 1, 4), (4, 99, 1), 7), ((3, 1), (4, 99), 8)      # size-1 dims, any stride
    for _ in range(20):                                         # random steps and offsets
        shape = tuple(int(n) for n in rng.integers(1, 5, 3))
        self_geometry = _contiguous(shape, int(rng.integers(0, 4)))
        dims = list(rng.permutation(3))[:int(rng.integers(1, 4))]
        view_shape = tuple(max(1, shape[d] // 2) for d in dims)
        view_strides = tuple(self_geometry[1][d] * (2 if shape[d] > 1 else 1) for d in dims)
        yield self_geometry, (view_shape, view_strides, self_geometry[2] + int(rng.integers(0, 2)))


def _grad(shape, dtype, rng):
    g = rng.standard_normal(shape).astype(dtype)
    flat = g.reshape(-1)
    if flat.size > 2:
        flat[0], flat[1] = -0.0, np.nan
    return g


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_strided_path_equals_the_slot_by_slot_formula(dtype):
    rng = np.random.default_rng(0)
    for self_geometry, view_geometry in _geometries(rng):
        assert not G._overlapping(view_geometry)
        grad = _grad(view_geometry[0], dtype, rng)
        got = G.view_scatter(grad, self_geometry, view_geometry)
        want = _slot_by_slot_scatter(grad, self_geometry, view_geometry)
        assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
        assert got.tobytes() == want.tobytes(), (self_geometry, view_geometry)
        back = _grad(self_geometry[0], dtype, rng)
        got = G.view_gather(back, self_geometry, view_geometry)
        want = _slot_by_slot_gather(back, self_geometry, view_geometry)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()


def test_overlapping_views_still_accumulate():
    """expand (stride 0) and unfold (windows share elements) add every view element in."""
    whole = _contiguous((6,))
    expanded = ((3, 6), (0, 1), 0)
    windows = ((4, 3), (1, 1), 0)
    for view in (expanded, windows):
        assert G._overlapping(view)
        grad = np.arange(np.prod(view[0]), dtype=np.float64).reshape(view[0])
        np.testing.assert_array_equal(G.view_scatter(grad, whole, view),
                                      _slot_by_slot_scatter(grad, whole, view))
    np.testing.assert_array_equal(G.view_scatter(np.ones((3, 6)), whole, expanded), [3.0] * 6)


def test_the_usual_base_is_returned_without_a_copy():
    """A contiguous tensor at offset 0 that is all of the buffer is the buffer, shaped."""
    grad = np.ones((5, 6), np.float32)
    result = G.view_scatter(grad, _contiguous((4, 5, 6)), ((5, 6), (6, 1), 60))
    assert result.base is None and result.shape == (4, 5, 6)
    assert result[2].sum() == 30 and result.sum() == 30
