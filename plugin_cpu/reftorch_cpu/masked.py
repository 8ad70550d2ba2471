"""masked_fill, masked_select and masked_scatter (and tril / triu, as a masked_fill) over the
C module `_masked` (src/masked.c),
for every dtype whose elements are 1, 2, 4 or 8 bytes (all but complex128): the kernels move
elements without computing, so the results are the reference's bit for bit.

The public functions have already checked what the reference checks (a bool mask, the value,
broadcastable shapes) and raised its errors; masked_scatter's source must hold as many
elements as the mask has true positions, which the C kernel checks after counting them,
before it writes, raising the reference's RuntimeError. The kernels get
(input, mask[, value | source]) and:
  - broadcast input and mask to their common shape (stride 0 along broadcast dims),
  - write a new contiguous result of that shape (masked_fill, masked_scatter) or a new 1-D
    result of the true mask positions in row-major order (masked_select),
  - merge dims that are contiguous for every operand (reftorch_plugins.geometry.coalesce),
    keeping the row-major order the selected / scattered elements follow.
masked_fill's value becomes an element of the input's dtype exactly as the reference does it
(`np.asarray(value).astype(dtype)`: a Python number or a 0-dim tensor); masked_scatter reads
`source` flattened in row-major order (a non-contiguous source is made contiguous first).

Declined (the reference runs): tensors not in cpu storage, complex128, a mask that is not
bool, more dims than the C walk takes after merging, and fewer than MIN_NUMEL positions.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from reftorch import _dtype as D
from reftorch._promotion import broadcast_shapes2
from reftorch._shape import contiguous_strides, is_contiguous
from reftorch._storage import CPUStorage
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold
from reftorch_plugins.geometry import broadcast_strides, coalesce

from . import _masked as _M
from .kernels import _can_write_in_place

# Calls with fewer positions go to the reference: below this the Python side of a plugin
# call (broadcasting, geometry, the result) costs about what NumPy's where / boolean
# indexing does. Measured on a busy 2-core x86-64 (float32, random half-true mask, plugin /
# reference us, noisy): masked_fill 1,024: 44 / 39, 4,096: 68 / 77; masked_select 1,024:
# 44 / 59; masked_scatter 1,024: 74 / 99; at 16,384 all three 2-3x faster.
MIN_NUMEL = 2048

DTYPES = tuple(d for d in D.ALL_DTYPES if d.numpy_dtype.itemsize in (1, 2, 4, 8))


def register(registrar):
    """Register the masked kernels with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("masked_fill", "cpu", DTYPES, masked_fill_kernel)
    registrar.kernel("masked_select", "cpu", DTYPES, masked_select_kernel)
    registrar.kernel("masked_scatter", "cpu", DTYPES, masked_scatter_kernel)
    registrar.kernel("tril", "cpu", DTYPES, _triangle_kernel(upper=False))
    registrar.kernel("triu", "cpu", DTYPES, _triangle_kernel(upper=True))


def masked_fill_kernel(out, inputs, dtypes, params):
    """input (broadcast with mask) with `value` where mask is True; masked_fill_ (out is the
    input) writes the input itself where that is safe (see _target)."""
    x, mask, value = inputs
    if isinstance(value, Tensor):
        if not _on_cpu(value):
            return NotImplemented
        value = value._np
    geometry = _geometry(x, mask)
    if geometry is NotImplemented or (out is not None and out is not x):
        return NotImplemented
    shape, (walk, (out_strides, x_strides, mask_strides)) = geometry
    element = np.asarray(value).astype(x._storage.dtype.numpy_dtype).reshape(1)
    target = _target(out, x, shape, (mask,))
    if target is NotImplemented:
        return NotImplemented
    result, offset = target
    _M.fill(walk, _bits(result), offset, out_strides, _bits(x), x._offset, x_strides,
            _bits(mask), mask._offset, mask_strides, _bits_of(element))
    return result


masked_fill_kernel.writes_in_place = True


def masked_select_kernel(out, inputs, dtypes, params):
    """The elements of input (broadcast with mask) where mask is True, as a 1-D tensor."""
    x, mask = inputs
    geometry = _geometry(x, mask)
    if geometry is NotImplemented:
        return NotImplemented
    shape, (walk, (_, x_strides, mask_strides)) = geometry
    count = _M.count(walk, _bits(mask), mask._offset, mask_strides)
    result = Tensor._empty((count,), x._storage.dtype)
    _M.select(walk, _bits(result), 0, _bits(x), x._offset, x_strides, _bits(mask),
              mask._offset, mask_strides)
    return result


def masked_scatter_kernel(out, inputs, dtypes, params):
    """input (broadcast with mask) with source's leading elements, in row-major order, where
    mask is True."""
    x, mask, source = inputs
    if not _on_cpu(source) or source._storage.dtype is not x._storage.dtype or \
            (out is not None and out is not x):
        return NotImplemented
    geometry = _geometry(x, mask)
    if geometry is NotImplemented:
        return NotImplemented
    shape, (walk, (out_strides, x_strides, mask_strides)) = geometry
    if not source.is_contiguous():
        source = source.contiguous()
    target = _target(out, x, shape, (mask, source))
    if target is NotImplemented:
        return NotImplemented
    result, offset = target
    # exactly source's elements: the C loop checks the count of True against the buffer it
    # gets, and a view's storage may run on past the view
    start = source._offset
    elements = _bits(source)[start:start + source.numel()]
    _M.scatter(walk, _bits(result), offset, out_strides, _bits(x), x._offset, x_strides,
               _bits(mask), mask._offset, mask_strides, elements, 0)
    return result


masked_scatter_kernel.writes_in_place = True


def _target(out, x, shape, reads):
    """(tensor, element offset) the loop writes: a new contiguous result, or for the in-place
    form (out is x) x itself when that is safe -- contiguous, of the result's shape, writable,
    sharing no memory with the tensors the loop reads besides x (the loops read each element
    of x before writing it, and check the mask and source before writing anything);
    NotImplemented when it is not."""
    if out is None:
        return Tensor._empty(shape, x._storage.dtype), 0
    if x._shape != shape or not _can_write_in_place(x, [t._storage.array for t in reads]):
        return NotImplemented
    return x, x._offset


# --- tril / triu -------------------------------------------------------------------------------

def _triangle_kernel(upper):
    def kernel(out, inputs, dtypes, params):
        """tril (triu): the input with 0 where the dropped triangle's (rows, cols) mask is True,
        broadcast over the batch dims: masked_fill's loop, so the kept elements keep their
        bits and the others are the reference's zeros (+0.0 for floats)."""
        (x,) = inputs
        if out is not None or not _on_cpu(x) or len(x._shape) < 2:
            return NotImplemented
        rows, cols = x._shape[-2:]
        dropped = _remembered_mask if rows * cols <= _REMEMBERED_MASK_MAX else _dropped_mask
        return masked_fill_kernel(None, (x, dropped(rows, cols, params["diagonal"], upper), 0),
                                  dtypes, params)
    return kernel


def _dropped_mask(rows, cols, diagonal, upper):
    """A (rows, cols) bool tensor, True above diagonal `diagonal` (below it for `upper`)."""
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]   # j - i
    mask = offset < diagonal if upper else offset > diagonal
    mask.flags.writeable = False
    return Tensor._from_array(mask)


# Masks of up to this many elements are remembered per (rows, cols, diagonal, upper): building
# one costs about what the loop does on a small matrix. Larger ones (a MiB each) are not kept.
_REMEMBERED_MASK_MAX = 1 << 20
_remembered_mask = functools.lru_cache(maxsize=32)(_dropped_mask)


# --- shared helpers ---------------------------------------------------------------------------

def _on_cpu(t):
    return isinstance(t, Tensor) and type(t._storage) is CPUStorage


def _geometry(x, mask):
    """(broadcast shape, (walk shape, [out, x, mask strides])), or NotImplemented."""
    if not (_on_cpu(x) and _on_cpu(mask)) or mask._storage.dtype is not D.bool or \
            x._storage.dtype not in DTYPES:
        return NotImplemented
    shape = broadcast_shapes2(x._shape, mask._shape)
    numel = math.prod(shape)
    if numel < size_threshold(MIN_NUMEL):
        return NotImplemented
    if x._shape == mask._shape and is_contiguous(shape, x._strides) and \
            is_contiguous(shape, mask._strides):   # the common case, without coalesce's cost
        return shape, ([numel], [[1], [1], [1]])
    walk, strides = coalesce(list(shape), [list(contiguous_strides(shape)),
                                           broadcast_strides(shape, x._shape, x._strides),
                                           broadcast_strides(shape, mask._shape, mask._strides)])
    if len(walk) > _M.MAX_NDIM:
        return NotImplemented
    return shape, (walk, strides)


def _bits(t):
    """A tensor's storage viewed as unsigned integers of its element size (no copy)."""
    return _bits_of(t._storage.array)


def _bits_of(array):
    return array.view(np.dtype(f"u{array.dtype.itemsize}"))
