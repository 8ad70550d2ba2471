"""NumPy emulations of reftorch-cuda's sort kernels (kernels/sort.cu), registered with
cuda_kernel_emulation's `emulates` (which imports this module).

The parameters are decoded from the raw bytes with the kernels' C layouts; launch shapes
(threads, dynamic shared memory, grid) are checked against what each kernel needs; and the
kernels' algorithms run step for step on all rows (or pairs) at once: order-preserving integer
keys, the padding sentinels, the bitonic network's compare-exchanges on (key, position) pairs,
the long-row passes' binary searches and scatters between scratch runs, and the selection
kernel's radix digit passes (a histogram per row and digit) and its placement of the chosen
elements (elements below the target key, then the ties it takes, by its slot arithmetic).
"""
from __future__ import annotations

import re

import numpy as np

from spec_tests import cuda_kernel_emulation as E

TILE = 4096             # RT_SORT_TILE
SELECT_THREADS = int(re.search(r"#define RT_SELECT_THREADS (\d+)",
                               (E.KERNELS_DIR / "sort.cu").read_text()).group(1))
RADIX_BITS = 8
KEYS = {"unsigned int": np.uint32, "unsigned long long": np.uint64}
WIDE = {"double", "long long"}
INFINITY_BITS = {32: 0x7F800000, 64: 0x7FF0000000000000}


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


def check_launch(grid, block, shared, blocks, n, padded, storage_name):
    """The launch gives the kernel what it needs: a padded length that is the least power of
    two >= n, threads covering the pairs (32..1024), shared memory for padded keys and
    16-bit positions, a grid of at most one block per row (or tile)."""
    assert 1 <= n <= padded <= TILE and padded & (padded - 1) == 0 and padded < 2 * n
    assert block == (min(1024, max(32, padded // 2)), 1, 1)
    assert shared == padded * ((8 if storage_name in WIDE else 4) + 2)
    assert grid[1:] == (1, 1) and 1 <= grid[0] <= min(blocks, 1 << 20)


def storage_of(name):
    return E.STORAGE.get(name) or E.INTS[name]


def padded_keys(x_rows, counts, padded, storage_name, descending):
    """A block's shared arrays after loading, for each row of `x_rows`: the keys (inverted for
    descending) of its first `counts[row]` elements, sentinels after them, positions
    0..padded-1."""
    keys = keys_of(x_rows, storage_name)
    if descending:
        keys = ~keys
    blocks, width = keys.shape
    full = np.full((blocks, padded), ~keys.dtype.type(0), keys.dtype)
    loaded = np.arange(width)[None, :] < np.asarray(counts)[:, None]
    full[:, :width] = np.where(loaded, keys, full[:, :width])
    positions = np.broadcast_to(np.arange(padded, dtype=np.int64), (blocks, padded)).copy()
    return full, positions


def mapped(driver, address, chosen, shape, strides):
    """The indices written for the sorted positions `chosen` (rows, count): the positions, or,
    with an index map (null: none), the map's entries at those positions of each row (the map
    is laid out as the sorted input: `shape` and `strides`)."""
    if not address:
        return chosen
    index_map = driver.view(address, np.int64, shape, strides).reshape(chosen.shape[0], -1)
    return np.take_along_axis(index_map, chosen, axis=1)


@E.emulates(r"sort_rows_kernel<(.+)>")
def sort_rows(driver, match, grid, block, shared, params):
    # (rows geometry, n, first, count, int padded, int descending, values/indices/in steps,
    #  values (may be null), indices, in, index_map (may be null))
    p = E.slots(params, 13)
    shape, (values_strides, indices_strides, in_strides) = E.geometry(p[0], 3)
    n, first, count = (E.int64(p[k]) for k in (1, 2, 3))
    padded, descending = E.int32(p[4]), E.int32(p[5])
    values_step, indices_step, in_step = (E.int64(p[k]) for k in (6, 7, 8))
    storage_name = match.group(1)
    storage = storage_of(storage_name)
    rows = int(np.prod(shape))
    check_launch(grid, block, shared, rows, n, padded, storage_name)
    assert 0 <= first and 1 <= count and first + count <= n
    x = driver.view(E.pointer(p[11]), storage, shape + (n,), in_strides + (in_step,))
    rows_x = x.reshape(rows, n)
    keys, positions = padded_keys(rows_x, [n] * rows, padded, storage_name, descending)
    bitonic_sort(keys, positions)
    chosen = positions[:, first:first + count]
    assert (chosen < n).all()   # the sentinels sort last
    indices = driver.view(E.pointer(p[10]), np.int64, shape + (count,),
                          indices_strides + (indices_step,))
    indices[...] = mapped(driver, E.pointer(p[12]), chosen, shape + (n,),
                          in_strides + (in_step,)).reshape(shape + (count,))
    if E.pointer(p[9]):
        values = driver.view(E.pointer(p[9]), storage, shape + (count,),
                             values_strides + (values_step,))
        values[...] = np.take_along_axis(rows_x, chosen, axis=1).reshape(shape + (count,))


# --- long rows ----------------------------------------------------------------------------------

@E.emulates(r"sort_tiles_kernel<(.+)>")
def sort_tiles(driver, match, grid, block, shared, params):
    # (rows geometry, n, int descending, in_step, in, run_keys, run_positions)
    p = E.slots(params, 7)
    shape, (_, _, in_strides) = E.geometry(p[0], 3)
    n, descending, in_step = E.int64(p[1]), E.int32(p[2]), E.int64(p[3])
    storage_name = match.group(1)
    rows, tiles = int(np.prod(shape)), -(-n // TILE)
    assert n > TILE
    check_launch(grid, block, shared, rows * tiles, TILE, TILE, storage_name)
    x = driver.view(E.pointer(p[4]), storage_of(storage_name), shape + (n,),
                    in_strides + (in_step,)).reshape(rows, n)
    # Block b sorts tile b % tiles of row b // tiles; a row's last tile loads only its
    # remaining elements (the zeros placed after them here are never loaded).
    tiled = np.zeros((rows, tiles * TILE), x.dtype)
    tiled[:, :n] = x
    counts = np.minimum(n - np.arange(tiles) * TILE, TILE)
    keys, positions = padded_keys(tiled.reshape(rows * tiles, TILE), np.tile(counts, rows),
                                  TILE, storage_name, descending)
    bitonic_sort(keys, positions)
    starts = np.tile(np.arange(tiles) * TILE, rows)[:, None]
    row_keys = keys.reshape(rows, tiles * TILE)
    row_positions = (positions + starts).reshape(rows, tiles * TILE)
    # Each tile's first `count` sorted pairs go to the run at row * n + tile start.
    written = (np.arange(TILE)[None, :] < np.tile(counts, rows)[:, None]).reshape(rows, -1)
    run_keys = driver.view(E.pointer(p[5]), keys.dtype, (rows, n), (n, 1))
    run_positions = driver.view(E.pointer(p[6]), np.int32, (rows, n), (n, 1))
    run_keys[...] = row_keys[written].reshape(rows, n)
    run_positions[...] = row_positions[written].reshape(rows, n)
    assert (run_positions < n).all()   # the sentinels sorted after every loaded element


@E.emulates(r"merge_runs_kernel<(.+)>")
def merge_runs(driver, match, grid, block, shared, params):
    """One thread per pair: own index in its run plus its rank in the other run, found by the
    kernel's binary search (all threads' searches advance together here)."""
    E.grid_stride(grid, block)
    assert shared == 0
    # (total, n, width, keys_in, positions_in, keys_out, positions_out)
    p = E.slots(params, 7)
    total, n, width = (E.int64(p[k]) for k in range(3))
    key_dtype = KEYS[match.group(1)]
    assert total % n == 0 and TILE <= width < n
    keys_in = driver.view(E.pointer(p[3]), key_dtype, (total,), (1,)).copy()
    positions_in = driver.view(E.pointer(p[4]), np.int32, (total,), (1,)).copy()
    e = np.arange(total, dtype=np.int64)
    row_start = e // n * n
    i = e - row_start
    first_start = i // (2 * width) * (2 * width)
    second_start = np.minimum(first_start + width, n)
    end = np.minimum(first_start + 2 * width, n)
    in_first = i < second_start
    other = row_start + np.where(in_first, second_start, first_start)
    low = np.zeros(total, np.int64)
    high = np.where(in_first, end - second_start, second_start - first_start)
    while (low < high).any():
        searching = low < high
        mid = low + (high - low) // 2
        at = np.where(searching, other + mid, 0)
        k, q = keys_in[at], positions_in[at]
        before = (k < keys_in) | ((k == keys_in) & (q < positions_in))
        low = np.where(searching & before, mid + 1, low)
        high = np.where(searching & ~before, mid, high)
    own_index = np.where(in_first, i - first_start, i - second_start)
    destination = row_start + first_start + own_index + low
    assert np.array_equal(np.sort(destination), e)   # a permutation: nothing lost or doubled
    keys_out = driver.view(E.pointer(p[5]), key_dtype, (total,), (1,))
    positions_out = driver.view(E.pointer(p[6]), np.int32, (total,), (1,))
    keys_out[destination] = keys_in
    positions_out[destination] = positions_in


@E.emulates(r"write_ranks_kernel<(.+)>")
def write_ranks(driver, match, grid, block, shared, params):
    E.grid_stride(grid, block)
    assert shared == 0
    # (rows geometry, n, first, count, values/indices/in steps, run_positions, values (may be
    #  null), indices, in, index_map (may be null))
    p = E.slots(params, 12)
    shape, (values_strides, indices_strides, in_strides) = E.geometry(p[0], 3)
    n, first, count = (E.int64(p[k]) for k in (1, 2, 3))
    values_step, indices_step, in_step = (E.int64(p[k]) for k in (4, 5, 6))
    storage = storage_of(match.group(1))
    rows = int(np.prod(shape))
    assert n > TILE and 0 <= first and 1 <= count and first + count <= n
    sorted_positions = driver.view(E.pointer(p[7]), np.int32, (rows, n), (n, 1))
    chosen = sorted_positions[:, first:first + count].astype(np.int64)
    assert ((0 <= chosen) & (chosen < n)).all()
    x = driver.view(E.pointer(p[10]), storage, shape + (n,), in_strides + (in_step,))
    indices = driver.view(E.pointer(p[9]), np.int64, shape + (count,),
                          indices_strides + (indices_step,))
    indices[...] = mapped(driver, E.pointer(p[11]), chosen, shape + (n,),
                          in_strides + (in_step,)).reshape(shape + (count,))
    if E.pointer(p[8]):
        values = driver.view(E.pointer(p[8]), storage, shape + (count,),
                             values_strides + (values_step,))
        values[...] = np.take_along_axis(x.reshape(rows, n), chosen, axis=1).reshape(
            shape + (count,))


# --- selection ----------------------------------------------------------------------------------

def radix_select(keys, ranks):
    """The kernel's digit passes on every row of `keys` (rows, n) at once: from the most
    significant 8-bit digit down, a histogram of the digits of the elements whose higher
    digits match the ones chosen, the bin holding the rank chosen, the rank made relative to
    it. Returns (target key, the target's tie number) per row."""
    rows, n = keys.shape
    unsigned = keys.dtype.type
    target = np.zeros(rows, keys.dtype)
    decided = unsigned(0)
    ranks = np.array(ranks, np.int64)
    row_of = np.broadcast_to(np.arange(rows)[:, None], keys.shape)
    bins = 1 << RADIX_BITS
    for shift in range(8 * keys.dtype.itemsize - RADIX_BITS, -1, -RADIX_BITS):
        matching = (keys & decided) == target[:, None]
        digits = ((keys >> unsigned(shift)) & unsigned(bins - 1)).astype(np.int64)
        histogram = np.bincount((row_of * bins + digits)[matching],
                                minlength=rows * bins).reshape(rows, bins)
        after = np.cumsum(histogram, axis=1)
        before = after - histogram
        holds = (before <= ranks[:, None]) & (ranks[:, None] < after)
        assert (holds.sum(axis=1) == 1).all()   # exactly one bin holds each rank
        digit = holds.argmax(axis=1)
        ranks = ranks - before[np.arange(rows), digit]
        target |= digit.astype(keys.dtype) << unsigned(shift)
        decided |= unsigned(bins - 1) << unsigned(shift)
    return target, ranks


@E.emulates(r"select_rows_kernel<(.+)>")
def select_rows(driver, match, grid, block, shared, params):
    # (rows geometry, n, first, count, int descending, values/indices/in steps, values,
    #  indices, in)
    p = E.slots(params, 11)
    shape, (values_strides, indices_strides, in_strides) = E.geometry(p[0], 3)
    n, first, count = (E.int64(p[k]) for k in (1, 2, 3))
    descending = E.int32(p[4])
    values_step, indices_step, in_step = (E.int64(p[k]) for k in (5, 6, 7))
    storage_name = match.group(1)
    storage = storage_of(storage_name)
    rows = int(np.prod(shape))
    assert block == (SELECT_THREADS, 1, 1) and shared == 0
    assert grid[1:] == (1, 1) and 1 <= grid[0] <= min(rows, 1 << 20)
    assert n < 2**31 and 0 <= first and 1 <= count and first + count <= n
    assert first == 0 or count == 1       # the two requests the kernel serves
    x = driver.view(E.pointer(p[10]), storage, shape + (n,), in_strides + (in_step,))
    rows_x = x.reshape(rows, n)
    keys = keys_of(rows_x, storage_name)
    if descending:
        keys = ~keys
    target, last_tie = radix_select(keys, [first + count - 1] * rows)
    first_tie = np.maximum(last_tie - count + 1, 0)[:, None]
    last_tie = last_tie[:, None]
    below = (keys < target[:, None]) & (first == 0)
    tie = keys == target[:, None]
    tie_number = np.cumsum(tie, axis=1) - tie
    taken = below | (tie & (first_tie <= tie_number) & (tie_number <= last_tie))
    slot = (np.cumsum(below, axis=1) - below
            + np.clip(tie_number, first_tie, last_tie + 1) - first_tie)
    assert (taken.sum(axis=1) == count).all()
    written_slots = slot[taken].reshape(rows, count)
    assert (written_slots == np.arange(count)).all()   # index order fills slots 0..count-1
    chosen = np.nonzero(taken)[1].reshape(rows, count)
    indices = driver.view(E.pointer(p[9]), np.int64, shape + (count,),
                          indices_strides + (indices_step,))
    indices[...] = chosen.reshape(shape + (count,))
    values = driver.view(E.pointer(p[8]), storage, shape + (count,),
                         values_strides + (values_step,))
    values[...] = np.take_along_axis(rows_x, chosen, axis=1).reshape(shape + (count,))
