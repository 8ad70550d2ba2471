"""NumPy emulation of reftorch-cuda's row sort (kernels/sort.cu), registered with
cuda_kernel_emulation's `emulates` (which imports this module).

The parameters are decoded from the raw bytes with the kernel's C layout; the launch shape
(threads, dynamic shared memory, grid) is checked against what the kernel needs; and the
kernel's algorithm runs step for step on all rows at once: order-preserving integer keys, the
padding sentinels, and the bitonic network's compare-exchanges on (key, position) pairs.
"""
from __future__ import annotations

import ctypes

import numpy as np

from spec_tests import cuda_kernel_emulation as E

MAX_ROW = 4096          # RT_SORT_MAX_ROW
WIDE = {"double", "long long"}
INFINITY_BITS = {32: 0x7F800000, 64: 0x7FF0000000000000}


def _int64(address):
    return ctypes.c_int64.from_address(address).value


def _int32(address):
    return ctypes.c_int32.from_address(address).value


def float_keys(bits, width):
    """Keys of IEEE floats given as unsigned `bits` of `width` bits: negatives inverted,
    positives with the sign bit set, -0.0 as +0.0, every NaN the largest key."""
    unsigned = np.uint64 if width == 64 else np.uint32
    sign = unsigned(1 << (width - 1))
    infinity = unsigned(INFINITY_BITS[width])
    magnitude = bits & ~sign
    nan = magnitude > infinity
    bits = np.where(bits == sign, unsigned(0), bits)
    keys = np.where(bits & sign, ~bits, bits | sign)
    return np.where(nan, ~unsigned(0), keys).astype(unsigned)


def keys_of(values, storage_name):
    """The kernel's sort_key for each element, as uint32 or uint64."""
    if storage_name == "double":
        return float_keys(values.view(np.uint64), 64)
    if storage_name in ("float", "rt_float16", "rt_bfloat16"):
        return float_keys(values.astype(np.float32).view(np.uint32), 32)
    if storage_name == "unsigned char":
        return values.astype(np.uint32)
    if storage_name == "long long":
        return values.view(np.uint64) ^ np.uint64(1 << 63)
    # narrow signed types: sign-extended to int32, then bit 31 flipped
    return values.astype(np.int32).view(np.uint32) ^ np.uint32(1 << 31)


def bitonic_sort(keys, positions):
    """The kernel's network on every row (last axis, a power of two long) at once."""
    padded = keys.shape[-1]
    t = np.arange(padded // 2)
    size = 2
    while size <= padded:
        stride = size // 2
        while stride > 0:
            low = 2 * t - (t & (stride - 1))
            high = low + stride
            ascending = (low & size) == 0
            k_low, k_high = keys[:, low], keys[:, high]
            p_low, p_high = positions[:, low], positions[:, high]
            after = (k_low > k_high) | ((k_low == k_high) & (p_low > p_high))
            swap = after == ascending
            keys[:, low], keys[:, high] = np.where(swap, k_high, k_low), np.where(swap, k_low,
                                                                                  k_high)
            positions[:, low], positions[:, high] = (np.where(swap, p_high, p_low),
                                                     np.where(swap, p_low, p_high))
            stride //= 2
        size *= 2


def check_launch(grid, block, shared, rows, n, padded, storage_name):
    """The launch gives the kernel what it needs: a padded length that is the least power of
    two >= n, threads covering the pairs (32..1024), shared memory for padded keys and
    16-bit positions, a grid of at most one block per row."""
    assert 1 <= n <= padded <= MAX_ROW and padded & (padded - 1) == 0 and padded < 2 * n
    assert block == (min(1024, max(32, padded // 2)), 1, 1)
    assert shared == padded * ((8 if storage_name in WIDE else 4) + 2)
    assert grid[1:] == (1, 1) and 1 <= grid[0] <= min(rows, 1 << 20)


@E.emulates(r"sort_rows_kernel<(.+)>")
def sort_rows(driver, match, grid, block, shared, params):
    # (rows geometry, n, first, count, int padded, int descending, values/indices/in steps,
    #  values (may be null), indices, in)
    p = E.slots(params, 12)
    shape, (values_strides, indices_strides, in_strides) = E.geometry(p[0], 3)
    n, first, count = (_int64(p[k]) for k in (1, 2, 3))
    padded, descending = _int32(p[4]), _int32(p[5])
    values_step, indices_step, in_step = (_int64(p[k]) for k in (6, 7, 8))
    storage_name = match.group(1)
    storage = E.STORAGE.get(storage_name) or E.INTS[storage_name]
    rows = int(np.prod(shape))
    check_launch(grid, block, shared, rows, n, padded, storage_name)
    assert 0 <= first and 1 <= count and first + count <= n
    x = driver.view(E.pointer(p[11]), storage, shape + (n,), in_strides + (in_step,))
    rows_x = x.reshape(rows, n)
    keys = keys_of(rows_x, storage_name)
    if descending:
        keys = ~keys
    sentinel = ~keys.dtype.type(0)
    keys = np.concatenate([keys, np.full((rows, padded - n), sentinel, keys.dtype)], axis=1)
    positions = np.broadcast_to(np.arange(padded, dtype=np.int64), (rows, padded)).copy()
    bitonic_sort(keys, positions)
    chosen = positions[:, first:first + count]
    assert (chosen < n).all()   # the sentinels sort last
    indices = driver.view(E.pointer(p[10]), np.int64, shape + (count,),
                          indices_strides + (indices_step,))
    indices[...] = chosen.reshape(shape + (count,))
    if E.pointer(p[9]):
        values = driver.view(E.pointer(p[9]), storage, shape + (count,),
                             values_strides + (values_step,))
        values[...] = np.take_along_axis(rows_x, chosen, axis=1).reshape(shape + (count,))
