"""NumPy emulations of kernels/index.cu (gather_kernel, scatter_kernel) for the emulated driver.

Parameters are decoded from the raw bytes with index.cu's C layouts, written out here
independently of reftorch_cuda.ops_index. Like the kernels, the emulations check every index
before using it, never touch memory through a bad one (every read and write goes through a
bounds-checked NumPy view of device memory, over the good elements only), and write the
device's error record exactly as index.cu leaves it: the first bad index by position of the
first launch that found one.
"""
from __future__ import annotations

import ctypes
import struct

import numpy as np

from spec_tests.cuda_kernel_emulation import (INTS, STORAGE, WORDS, compute_type, double,
                                              emulates, geometry, grid_stride, int64, pointer,
                                              slots)

# struct IndexCheck { IndexErrorRecord* record; u64 launch; i64 size; int op, dim, wrap,
# unused; } and struct IndexErrorRecord { u64 position, launch; i64 value, size; int op, dim;
# u32 lock, unused; }
CHECK = struct.Struct("<QQqiiii")
RECORD = struct.Struct("<QQqqiiII")
NO_POSITION = (1 << 64) - 1


def _check(address):
    record, launch, size, op, dim, wrap, _ = CHECK.unpack(ctypes.string_at(address,
                                                                            CHECK.size))
    assert record and launch and size >= 0 and wrap in (0, 1)
    return dict(record=record, launch=launch, size=size, op=op, dim=dim, wrap=wrap)


def _checked(indices, positions, check, driver):
    """(element numbers, good mask) of int64 `indices` as index.cu's checked_index gives them,
    recording the smallest bad position (of `positions`) in the device's error record."""
    size = check["size"]
    k = np.where((indices < 0) & bool(check["wrap"]), indices + size, indices)
    good = (k >= 0) & (k < size)
    if not good.all():
        first = np.argmin(np.where(good, np.iinfo(np.int64).max, positions))
        _report(driver, check, int(positions.flat[first]), int(indices.flat[first]))
    return np.where(good, k, 0), good


def _report(driver, check, position, value):
    """report_bad_index for the launch's smallest bad position."""
    view = driver.view(check["record"], np.uint8, (RECORD.size,), (1,))
    fields = list(RECORD.unpack(view.tobytes()))
    assert fields[6] == 0, "the record's lock is held between launches"
    if fields[1] not in (0, check["launch"]) or fields[0] <= position:
        return  # another launch's error, or a smaller position, stands
    fields[:6] = [position, check["launch"], value, check["size"], check["op"], check["dim"]]
    view[...] = np.frombuffer(RECORD.pack(*fields), np.uint8)


def _span_view(driver, address, dtype, offsets):
    """A 1-D view of the device elements from the smallest to the largest of `offsets`
    (relative to `address`), and the offsets relative to it."""
    low, high = int(offsets.min()), int(offsets.max())
    itemsize = np.dtype(dtype).itemsize
    return driver.view(address + low * itemsize, dtype, (high - low + 1,), (1,)), offsets - low


def _offsets(shape, strides):
    """Element offsets of every position of `shape` (row-major) for `strides`."""
    grids = np.indices(shape, sparse=True) if shape else ()
    return sum((g * s for g, s in zip(grids, strides)), np.zeros(shape, np.int64))


@emulates(r"gather_kernel<(.+), (long long|int)>")
def gather(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    p = slots(params, 6)      # (geometry, out, src, index, int64 index_stride, check)
    shape, (out_strides, src_strides, index_strides) = geometry(p[0], 3)
    void = np.dtype((np.void, WORDS[match.group(1)]))
    index_stride = int64(p[4])
    check = _check(p[5])
    index = driver.view(pointer(p[3]), INTS[match.group(2)], shape, index_strides)
    positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    k, good = _checked(index.astype(np.int64), positions, check, driver)
    if not good.any():
        return
    src_offsets = (_offsets(shape, src_strides) + k * index_stride)[good]
    src, src_at = _span_view(driver, pointer(p[2]), void, src_offsets)
    out, out_at = _span_view(driver, pointer(p[1]), void, _offsets(shape, out_strides)[good])
    out[out_at] = src[src_at]


def _assign(old, value, alpha):
    return value


def _add(old, value, alpha):
    if old.dtype.kind == "i":
        return old + value                      # wraps around, as the kernel's
    c = compute_type(old.dtype.type)
    return (old.astype(c) + value.astype(c)).astype(old.dtype)


def _add_scaled(old, value, alpha):
    """The product rounded to the storage type first (see index.cu)."""
    if old.dtype.kind == "i":
        return old + value * old.dtype.type(int(alpha))
    c = compute_type(old.dtype.type)
    product = (value.astype(c) * c(alpha)).astype(old.dtype).astype(c)
    return (old.astype(c) + product).astype(old.dtype)


def _mul(old, value, alpha):
    """scatter.cu's MulOp (instantiated there, through this kernel): integers wrap."""
    if old.dtype.kind == "i":
        return old * value
    c = compute_type(old.dtype.type)
    return (old.astype(c) * value.astype(c)).astype(old.dtype)


SCATTER_OPS = {"AssignOp": _assign, "AddOp": _add, "AddScaledOp": _add_scaled, "MulOp": _mul}


@emulates(r"scatter_kernel<(.+), (long long|int), (\w+)>")
def scatter(driver, match, grid, block, shared, params):
    """Every column at once, entry j = 0 .. n-1 in turn (index.cu's order): within one j the
    columns write distinct elements, so one vectorised update per j is the kernel's result."""
    grid_stride(grid, block)
    assert shared == 0
    # (geometry, n, out_step, src_step, index_step, position_step, out, src, index, alpha,
    #  check)
    p = slots(params, 11)
    columns, strides = geometry(p[0], 4)
    n, out_step, src_step, index_step, position_step = (
        int64(p[k]) for k in range(1, 6))
    alpha = double(p[9])
    check = _check(p[10])
    name = match.group(1)
    storage = np.dtype((np.void, WORDS[name])) if name in WORDS else \
        {**STORAGE, **INTS}[name]
    apply = SCATTER_OPS[match.group(3)]
    assert n >= 1
    j = np.arange(n, dtype=np.int64)
    base = [_offsets(columns, s)[..., None] for s in strides]  # (columns..., 1) each
    index_offsets = base[2] + j * index_step
    index_view, index_at = _span_view(driver, pointer(p[8]), INTS[match.group(2)],
                                      index_offsets)
    k, good = _checked(index_view[index_at].astype(np.int64), base[3] + j * position_step,
                       check, driver)
    if not good.any():
        return
    out_offsets = base[0] + k * out_step
    src_offsets = base[1] + j * src_step
    out, out_at = _span_view(driver, pointer(p[6]), storage, out_offsets[good])
    src, src_at = _span_view(driver, pointer(p[7]), storage, src_offsets[good])
    out_at_all = np.zeros(good.shape, np.int64)
    src_at_all = np.zeros(good.shape, np.int64)
    out_at_all[good], src_at_all[good] = out_at, src_at
    with np.errstate(all="ignore"):
        for step in range(n):   # the kernel's loop over j; vectorised over the columns
            ok = good[..., step]
            at = out_at_all[..., step][ok]
            out[at] = apply(out[at], src[src_at_all[..., step][ok]], alpha)
