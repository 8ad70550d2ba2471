"""masked_select and masked_scatter on cuda (kernels/masked_scan.cu), for every dtype of 1 to
16 bytes (elements move by width, never computed with).

Both number the true positions of the mask, broadcast with the input, in row-major order (the
reference's boolean indexing order) by a prefix count over fixed chunks of positions (see
masked_scan.cu): counts are integers, so the numbering is exact and results equal the
reference's bit for bit, whatever the launch.

masked_select's result size is the number of true positions, so the host reads that count back
(8 bytes) after the prefix count: one synchronisation of the current stream per call, as on
PyTorch. masked_scatter's result has the broadcast shape and needs no read-back; it reads
`source` flattened in row-major order (a non-contiguous source is made contiguous first, a
device copy). A source with fewer elements than true positions is never read past its end: the
kernel keeps the input's element there and records the first such position in the device's
index error record (reftorch_cuda.ops_index), so the next synchronisation raises the
reference's RuntimeError "masked_scatter: expected source to have at least as many elements
as ones in mask" (the reference checks the count in its kernel, so a call this kernel serves
does not synchronise for it).

Declined (the reference runs): a mask that is not bool, inputs on different devices, out=,
a source of another dtype, more dims than the kernel geometry takes after coalescing.
"""
from __future__ import annotations

import ctypes
import math

from reftorch import _dtype as D
from reftorch._promotion import broadcast_shapes
from reftorch._shape import contiguous_strides
from reftorch._tensor import Tensor
from reftorch.autograd.grad_mode import no_grad
from reftorch_plugins.geometry import broadcast_strides, coalesce

from . import ops_index
from .kernel_base import (WORDS, Program, block_threads, geometry_struct, max_dims,
                          on_one_cuda_device, pointer)

CHUNK = 4096        # positions per chunk: 16 per thread of a RT_BLOCK_THREADS-thread block
MAX_GRID = 1 << 16  # blocks of a chunk launch; each loops over the chunks beyond


def select_expression(itemsize):
    return f"masked_select_kernel<{WORDS[itemsize]}>"


def scatter_expression(itemsize):
    return f"masked_scatter_kernel<{WORDS[itemsize]}>"


COUNT, OFFSETS = "mask_count_kernel<bool>", "chunk_offsets_kernel<bool>"
MASKED_SCAN = Program("masked_scan.cu", (
    COUNT, OFFSETS, *(select_expression(w) for w in WORDS),
    *(scatter_expression(w) for w in WORDS)), includes=("index.cu",))
PROGRAMS = (MASKED_SCAN,)


def _walk(x, mask):
    """(broadcast shape, walk shape, [walk-contiguous, x, mask strides]), or None when the
    tensors are not served."""
    if mask.dtype is not D.bool or x.dtype.itemsize not in WORDS or \
            not on_one_cuda_device((x, mask)):
        return None
    shape = broadcast_shapes(x._shape, mask._shape)
    walk, strides = coalesce(list(shape) or [1], [
        list(contiguous_strides(shape)) or [0],
        broadcast_strides(shape, x._shape, x._strides) or [0],
        broadcast_strides(shape, mask._shape, mask._strides) or [0]])
    if len(walk) > max_dims():
        return None
    return shape, walk, strides


def _launch_chunks(t, expression, chunks, args):
    storage = t._storage
    assert CHUNK % block_threads() == 0
    storage._driver.launch_grid(storage._index, MASKED_SCAN, expression,
                                (min(chunks, MAX_GRID), 1, 1), (block_threads(), 1, 1), 0, args)


def _prefix_counts(x, mask, geometry, chunks):
    """A device int64 tensor of chunks + 1 entries: the true positions before each chunk,
    then the total."""
    counts = Tensor._empty((chunks + 1,), D.int64, x.device)
    _launch_chunks(x, COUNT, chunks, (geometry, ctypes.c_int64(CHUNK), ctypes.c_int64(chunks),
                                      pointer(counts), pointer(mask)))
    storage = x._storage
    storage._driver.launch_grid(storage._index, MASKED_SCAN, OFFSETS, (1, 1, 1),
                                (block_threads(), 1, 1), 0,
                                (ctypes.c_int64(chunks), pointer(counts)))
    return counts


def _read_total(counts, chunks):
    """counts[chunks], copied to the host (waits for the current stream)."""
    host = ctypes.c_int64(0)
    storage = counts._storage
    storage._driver.to_host(storage._index, ctypes.addressof(host),
                            counts.data_ptr() + 8 * chunks, 8)
    return host.value


def masked_select_kernel(out, inputs, dtypes, params):
    """The elements of x (broadcast with mask) where mask is True, as a new 1-D tensor."""
    if out is not None or len(inputs) != 2:
        return NotImplemented
    x, mask = inputs
    found = _walk(x, mask)
    if found is None:
        return NotImplemented
    shape, walk, strides = found
    numel = math.prod(shape)
    if numel == 0:
        return Tensor._empty((0,), x.dtype, x.device)
    geometry = geometry_struct(walk, strides)
    chunks = -(-numel // CHUNK)
    counts = _prefix_counts(x, mask, geometry, chunks)
    total = _read_total(counts, chunks)
    result = Tensor._empty((total,), x.dtype, x.device)
    if total:
        _launch_chunks(x, select_expression(x.dtype.itemsize), chunks, (
            geometry, ctypes.c_int64(CHUNK), ctypes.c_int64(chunks), pointer(counts),
            pointer(result), pointer(x), pointer(mask)))
    return result


def masked_scatter_kernel(out, inputs, dtypes, params):
    """A new tensor of the broadcast shape: x, with source's leading elements (row-major)
    where mask is True."""
    if out is not None or len(inputs) != 3:
        return NotImplemented
    x, mask, source = inputs
    if not isinstance(source, Tensor) or source.dtype is not x.dtype:
        return NotImplemented
    found = _walk(x, mask)
    if found is None or not on_one_cuda_device((x, source)):
        return NotImplemented
    shape, walk, strides = found
    result = Tensor._empty(shape, x.dtype, x.device)
    numel = math.prod(shape)
    if numel == 0:
        return result
    if not source.is_contiguous():
        with no_grad():   # kernels never record autograd history
            source = source.contiguous()
    geometry = geometry_struct(walk, strides)
    chunks = -(-numel // CHUNK)
    counts = _prefix_counts(x, mask, geometry, chunks)
    storage = x._storage
    check = ops_index.errors_of(storage._driver).arm(storage._index, "masked_scatter",
                                                     source.numel(), 0)
    _launch_chunks(x, scatter_expression(x.dtype.itemsize), chunks, (
        geometry, ctypes.c_int64(CHUNK), ctypes.c_int64(chunks), pointer(counts),
        pointer(result), pointer(x), pointer(mask), pointer(source), check))
    return result


masked_select_kernel.__name__ = "cuda_masked_select"
masked_scatter_kernel.__name__ = "cuda_masked_scatter"


def register_kernels(registrar):
    movable = [d for d in D.ALL_DTYPES if d.itemsize in WORDS]
    registrar.kernel("masked_select", "cuda", movable, masked_select_kernel)
    registrar.kernel("masked_scatter", "cuda", movable, masked_scatter_kernel)
