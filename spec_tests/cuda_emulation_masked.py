"""NumPy emulations of kernels/masked_scan.cu (mask_count_kernel, chunk_offsets_kernel,
masked_select_kernel, masked_scatter_kernel) for the emulated driver.

Parameters are decoded from the raw bytes with masked_scan.cu's C layouts, independently of
reftorch_cuda.ops_masked. The emulations follow the kernels' data flow: the count kernel
writes per-chunk counts, the offsets kernel turns them into exclusive prefix sums in place,
and the select / scatter kernels number each chunk's true positions from the offsets they read
back from device memory, so a wrong chunk size, a wrong scratch buffer or a skipped launch
shows up in the result. masked_scatter checks each source index before reading it and records
a source that runs out in the device's index error record, as the kernel does.
"""
from __future__ import annotations

import numpy as np

from spec_tests.cuda_emulation_index import _check, _checked
from spec_tests.cuda_kernel_emulation import (REDUCE_THREADS, WORDS, emulates, geometry,
                                              int64, pointer, slots)


def _chunk_launch(grid, block, shared, chunks):
    assert block == (REDUCE_THREADS, 1, 1) and shared == 0
    assert grid[1:] == (1, 1) and 1 <= grid[0] <= min(chunks, 1 << 16)


def _positions(p):
    """(walk shape, its strides, chunk, chunks) of a chunk launch's first parameters."""
    shape, strides = geometry(p[0], 3)
    chunk, chunks = int64(p[1]), int64(p[2])
    numel = int(np.prod(shape))
    assert chunk % REDUCE_THREADS == 0 and chunks == -(-numel // chunk)
    return shape, strides, chunk, chunks


def _mask(driver, address, shape, strides):
    return driver.view(address, np.bool_, shape, strides[2]).reshape(-1)


def _ranks(driver, offsets_address, mask, chunk, chunks):
    """Each true position's number in the selection: its chunk's offset, read from the
    device, plus the trues before it in the chunk."""
    offsets = driver.view(offsets_address, np.int64, (chunks,), (1,)).copy()
    chunk_of = np.arange(mask.size) // chunk
    before = np.cumsum(mask) - mask                            # trues before each position
    chunk_start = np.concatenate([[0], np.cumsum(mask)])[np.arange(chunks) * chunk]
    return offsets[chunk_of] + before - chunk_start[chunk_of]


@emulates(r"mask_count_kernel<bool>")
def mask_count(driver, match, grid, block, shared, params):
    p = slots(params, 5)          # (geometry, chunk, chunks, counts, mask)
    shape, strides, chunk, chunks = _positions(p)
    _chunk_launch(grid, block, shared, chunks)
    mask = _mask(driver, pointer(p[4]), shape, strides)
    padded = np.zeros(chunks * chunk, np.int64)
    padded[:mask.size] = mask
    driver.view(pointer(p[3]), np.int64, (chunks,), (1,))[...] = \
        padded.reshape(chunks, chunk).sum(axis=1)


@emulates(r"chunk_offsets_kernel<bool>")
def chunk_offsets(driver, match, grid, block, shared, params):
    assert grid == (1, 1, 1) and block == (REDUCE_THREADS, 1, 1) and shared == 0
    p = slots(params, 2)          # (chunks, counts)
    chunks = int64(p[0])
    counts = driver.view(pointer(p[1]), np.int64, (chunks + 1,), (1,))
    totals = np.cumsum(counts[:chunks])
    counts[1:] = totals
    counts[0] = 0


@emulates(r"masked_select_kernel<(.+)>")
def masked_select(driver, match, grid, block, shared, params):
    p = slots(params, 7)          # (geometry, chunk, chunks, offsets, out, x, mask)
    shape, strides, chunk, chunks = _positions(p)
    _chunk_launch(grid, block, shared, chunks)
    void = np.dtype((np.void, WORDS[match.group(1)]))
    mask = _mask(driver, pointer(p[6]), shape, strides)
    if not mask.any():
        return
    ranks = _ranks(driver, pointer(p[3]), mask, chunk, chunks)[mask]
    x = driver.view(pointer(p[5]), void, shape, strides[1]).reshape(-1)
    out = driver.view(pointer(p[4]), void, (int(ranks.max()) + 1,), (1,))
    out[ranks] = x[mask]


@emulates(r"masked_scatter_kernel<(.+)>")
def masked_scatter(driver, match, grid, block, shared, params):
    # (geometry, chunk, chunks, offsets, out, x, mask, source, check)
    p = slots(params, 9)
    shape, strides, chunk, chunks = _positions(p)
    _chunk_launch(grid, block, shared, chunks)
    void = np.dtype((np.void, WORDS[match.group(1)]))
    check = _check(p[8])
    mask = _mask(driver, pointer(p[6]), shape, strides)
    out = driver.view(pointer(p[4]), void, shape, strides[0])
    x = driver.view(pointer(p[5]), void, shape, strides[1]).reshape(-1)
    values = x.copy()
    if mask.any():
        positions = np.flatnonzero(mask)
        ranks = _ranks(driver, pointer(p[3]), mask, chunk, chunks)[mask]
        taken, good = _checked(ranks, positions, check, driver)
        if good.any():
            source = driver.view(pointer(p[7]), void, (int(taken[good].max()) + 1,), (1,))
            values[positions[good]] = source[taken[good]]
    out[...] = values.reshape(shape)
