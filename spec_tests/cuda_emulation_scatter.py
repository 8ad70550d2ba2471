"""NumPy emulations of kernels/scatter.cu (scatter_scalar_kernel, scatter_reduce_kernel) for
the emulated driver; its tensor-source multiply is index.cu's scatter_kernel with MulOp,
emulated in cuda_emulation_index.

Parameters are decoded from the raw bytes with scatter.cu's C layouts, independently of
reftorch_cuda.ops_scatter. As the kernels, the emulations walk each column's entries in order
j = 0 .. n-1 (vectorised over the columns: within one j they touch distinct elements), check
every index before using it, record the first bad one by position in the device's error
record, and run scatter_reduce's passes (identity, combine with hit counts, the mean's
division) on device memory, the hit counts included.
"""
from __future__ import annotations

import ctypes

import numpy as np

from spec_tests.cuda_emulation_index import (SCATTER_OPS, _check, _checked, _offsets,
                                             _span_view)
from spec_tests.cuda_kernel_emulation import (INTS, STORAGE, WORDS, compute_type, emulates,
                                              geometry, grid_stride, int32, int64, pointer,
                                              slots)


def _storage(name):
    return np.dtype((np.void, WORDS[name])) if name in WORDS else {**STORAGE, **INTS}[name]


def _entries(driver, columns, strides, n, index_address, index_type, index_step,
             position_step, check):
    """(element numbers k, good mask, per-column bases) of every (column, j) entry."""
    j = np.arange(n, dtype=np.int64)
    base = [_offsets(columns, s)[..., None] for s in strides]  # (columns..., 1) each
    index_view, index_at = _span_view(driver, index_address, index_type,
                                      base[2] + j * index_step)
    k, good = _checked(index_view[index_at].astype(np.int64), base[3] + j * position_step,
                       check, driver)
    return k, good, base


def _targets(driver, address, storage, offsets, good):
    """A view over the good entries' elements and every entry's position in it (0 for bad
    ones)."""
    view, at = _span_view(driver, address, storage, offsets[good])
    every = np.zeros(good.shape, np.int64)
    every[good] = at
    return view, every


@emulates(r"scatter_scalar_kernel<(.+), (long long|int), (\w+)>")
def scatter_scalar(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    # (geometry, n, out_step, index_step, position_step, out, value, index, check)
    p = slots(params, 9)
    columns, strides = geometry(p[0], 4)
    n, out_step, index_step, position_step = (int64(p[k]) for k in range(1, 5))
    storage = _storage(match.group(1))
    value = np.frombuffer(ctypes.string_at(p[6], np.dtype(storage).itemsize), storage)
    check = _check(p[8])
    assert n >= 1
    k, good, base = _entries(driver, columns, strides, n, pointer(p[7]),
                             INTS[match.group(2)], index_step, position_step, check)
    if not good.any():
        return
    out, out_at = _targets(driver, pointer(p[5]), storage, base[0] + k * out_step, good)
    apply = SCATTER_OPS[match.group(3)]
    with np.errstate(all="ignore"):
        for step in range(n):
            ok = good[..., step]
            at = out_at[..., step][ok]
            out[at] = apply(out[at], np.repeat(value, at.size), 1.0)


def _quiet_nan(c):
    return c(np.nan)


def _amax(a, b):
    nan = np.isnan(a) | np.isnan(b) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    picked = np.where(b > a, b, a)
    return np.where(nan, _quiet_nan(a.dtype.type), picked) if nan.any() else picked


def _amin(a, b):
    nan = np.isnan(a) | np.isnan(b) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    picked = np.where(b < a, b, a)
    return np.where(nan, _quiet_nan(a.dtype.type), picked) if nan.any() else picked


# reduction -> (identity for floats, for integers (given iinfo), combine)
REDUCTIONS = {
    "ReduceSum": (0.0, lambda info: 0, np.add),
    "ReduceMean": (0.0, lambda info: 0, np.add),
    "ReduceProd": (1.0, lambda info: 1, np.multiply),
    "ReduceAmax": (-np.inf, lambda info: info.min, _amax),
    "ReduceAmin": (np.inf, lambda info: info.max, _amin),
}


def _mean(total, hits):
    """scatter.cu's rt_mean: floats divided in double and rounded to the computation type;
    integers floor-divided (the wrapped sum sign-extended to int64)."""
    if total.dtype.kind == "i":
        return (total.astype(np.int64) // hits).astype(total.dtype)
    return (total.astype(np.float64) / hits.astype(np.float64)).astype(total.dtype)


@emulates(r"scatter_reduce_kernel<(.+), (long long|int), (\w+)>")
def scatter_reduce(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    # (geometry, n, out_step, src_step, index_step, position_step, out, src, index, counts,
    #  int include_self, check)
    p = slots(params, 12)
    columns, strides = geometry(p[0], 4)
    n, out_step, src_step, index_step, position_step = (int64(p[k]) for k in range(1, 6))
    include_self = int32(p[10])
    assert include_self in (0, 1) and n >= 1
    check = _check(p[11])
    storage = _storage(match.group(1))
    reduction = match.group(3)
    integer = np.dtype(storage).kind == "i"
    c = storage if integer else compute_type(storage)
    float_identity, int_identity, combine = REDUCTIONS[reduction]
    identity = c(int_identity(np.iinfo(storage))) if integer else c(float_identity)
    k, good, base = _entries(driver, columns, strides, n, pointer(p[8]),
                             INTS[match.group(2)], index_step, position_step, check)
    if not good.any():
        return
    out_offsets = base[0] + k * out_step
    out, out_at = _targets(driver, pointer(p[6]), storage, out_offsets, good)
    src, src_at = _targets(driver, pointer(p[7]), storage, base[1] + np.arange(n) * src_step,
                           good)
    mean = reduction == "ReduceMean"
    if mean:
        counts, counts_at = _targets(driver, pointer(p[9]), np.int64, out_offsets, good)
    with np.errstate(all="ignore"):
        if not include_self:
            for step in range(n):
                at = out_at[..., step][good[..., step]]
                out[at] = np.full(at.shape, identity, c).astype(storage)
        for step in range(n):
            ok = good[..., step]
            at = out_at[..., step][ok]
            values = src[src_at[..., step][ok]]
            out[at] = combine(out[at].astype(c), values.astype(c)).astype(storage)
            if mean:
                counts[counts_at[..., step][ok]] += 1
        if mean:
            for step in range(n):
                ok = good[..., step]
                at, counted = out_at[..., step][ok], counts_at[..., step][ok]
                hits = counts[counted]
                todo = hits > 0
                out[at[todo]] = _mean(out[at[todo]].astype(c), hits[todo] + include_self
                                      ).astype(storage)
                counts[counted[todo]] = 0
