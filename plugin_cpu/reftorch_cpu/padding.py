"""Padding over the C module `_gather` (src/gather.c): constant_pad_nd (F.pad's "constant" mode),
reflection_pad{1,2,3}d and replication_pad{1,2,3}d ("reflect", "replicate") and the latter's
backward ops.

Forward: for every dtype whose elements are 1, 2, 4 or 8 bytes. Each padded dim has an index
array (output position -> input position): for reflect and replicate the reference's own
`_source_index`, so both sides mirror, repeat and crop by one formula; for constant padding
-1 where the value goes (the reference's `pad_value` element) and the kept positions in
between, which crops negative amounts. The C gather reads the input once in that order and
writes the new result, moving bits only: the reference's result bit for bit, in any input
layout. constant_pad_nd's result takes the memory format its input suggests (the op's
declared layout): a channels-last input is walked in its memory order, so the result is
written channels-last directly.

Backward (float32, float64): one C pass per padded dim, last dim first, each adding every
output gradient into the input position it was copied from, in output order, starting from
zero: the reference's np.add.at passes, the same sums in the same order.

Declined (the reference runs): tensors not in cpu storage, complex128, an `out` tensor, more
than 8 dims, and calls with fewer than MIN_NUMEL output elements.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from reftorch import _dtype as D
from reftorch._ops.nn_convolution import _source_index, pad_value
from reftorch._shape import format_strides, suggested_format
from reftorch._storage import _host_array
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold

from . import _gather
from .masked import _bits, _on_cpu

# Calls writing fewer elements go to the reference, whose np.take passes cost about what
# the plugin's Python side does at that size.
MIN_NUMEL = 4096

# (bool: PyTorch has no reflection or replication pad for it, and neither does the reference)
CONSTANT_DTYPES = tuple(d for d in D.ALL_DTYPES if d.numpy_dtype.itemsize in (1, 2, 4, 8))
DTYPES = tuple(d for d in CONSTANT_DTYPES if d is not D.bool)
GRAD_DTYPES = (D.float32, D.float64)
MODES = (("reflection", "reflect"), ("replication", "replicate"))


def register(registrar):
    """Register the padding kernels with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("constant_pad_nd", "cpu", CONSTANT_DTYPES, constant_pad_kernel)
    for prefix, mode in MODES:
        for nd in (1, 2, 3):
            registrar.kernel(f"{prefix}_pad{nd}d", "cpu", DTYPES, _forward_kernel(mode))
            registrar.kernel(f"{prefix}_pad{nd}d_backward", "cpu", GRAD_DTYPES,
                             _backward_kernel(mode))


def _forward_kernel(mode):
    def kernel(out, inputs, dtypes, params):
        """input padded over its last len(padding) // 2 dims, or NotImplemented."""
        (x,), padding = inputs, params["padding"]
        nd = len(padding) // 2
        if out is not None or not _on_cpu(x) or x._storage.dtype not in DTYPES or \
                not nd < len(x._shape) <= _gather.MAX_NDIM:
            return NotImplemented
        spatial = x._shape[-nd:]
        indices = tuple(_source_index(spatial[nd - 1 - i], padding[2 * i], padding[2 * i + 1],
                                      mode).astype(np.int64) for i in reversed(range(nd)))
        out_shape = x._shape[:-nd] + tuple(len(index) for index in indices)
        if math.prod(out_shape) < size_threshold(MIN_NUMEL):
            return NotImplemented
        result = Tensor._empty(out_shape, x._storage.dtype)
        _gather.gather(_bits(result), _bits(x), x._offset, x._strides, x._shape,
                    (None,) * (len(x._shape) - nd) + indices, None)
        return result
    return kernel


# The dims of a channels-last tensor from slowest to fastest in memory.
MEMORY_ORDER = {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}


def constant_pad_kernel(out, inputs, dtypes, params):
    """input padded with `value` (negative amounts crop), laid out in the memory format the
    input suggests, or NotImplemented."""
    (x,), pad, value = inputs, params["pad"], params["value"]
    nd = len(pad) // 2
    if out is not None or not _on_cpu(x) or x._storage.dtype not in CONSTANT_DTYPES or \
            not 0 < len(x._shape) <= _gather.MAX_NDIM or isinstance(value, Tensor):
        return NotImplemented
    indices = [None] * len(x._shape)
    for i in range(nd):
        dim = len(x._shape) - 1 - i
        indices[dim] = _constant_index(x._shape[dim], pad[2 * i], pad[2 * i + 1])
    out_shape = tuple(n if index is None else len(index)
                      for n, index in zip(x._shape, indices))
    if math.prod(out_shape) < size_threshold(MIN_NUMEL):
        return NotImplemented
    dtype = x._storage.dtype
    memory_format = suggested_format(x._shape, x._strides)
    result = Tensor._empty(out_shape, dtype, strides=format_strides(out_shape, memory_format))
    order = MEMORY_ORDER.get(memory_format, range(len(x._shape)))
    fill = pad_value(value, dtype.numpy_dtype).reshape(1)
    _gather.gather(_bits(result), _bits(x), x._offset, [x._strides[d] for d in order],
                [x._shape[d] for d in order], [indices[d] for d in order],
                fill.view(np.dtype(f"u{fill.itemsize}")))
    return result


@functools.lru_cache(maxsize=256)
def _constant_index(size, before, after):
    """Output position -> input position along a dim of `size` padded by (before, after),
    -1 where the value goes (a negative amount crops). Remembered: building it took about as
    long as padding a small image; read-only, as it is shared."""
    positions = np.arange(-before, size + after, dtype=np.int64)
    index = np.where((positions >= 0) & (positions < size), positions, -1)
    index.flags.writeable = False
    return index


def _backward_kernel(mode):
    def kernel(out, inputs, dtypes, params):
        """The gradient of the padded input, or NotImplemented."""
        (grad,), input_shape, padding = inputs, params["input_shape"], params["padding"]
        nd = len(padding) // 2
        if out is not None or not _on_cpu(grad) or grad._storage.dtype not in GRAD_DTYPES or \
                math.prod(grad._shape) < size_threshold(MIN_NUMEL):
            return NotImplemented
        dtype = grad._storage.dtype
        values = grad._storage.array[grad._offset:]
        if not grad.is_contiguous():
            values = grad.contiguous()._storage.array
        shape = list(grad._shape)
        for i in range(nd):            # the last dim first, as the reference sums them
            axis = len(shape) - 1 - i
            size = input_shape[axis]
            index = _source_index(size, padding[2 * i], padding[2 * i + 1], mode)
            outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
            summed = _host_array(outer * size * inner, dtype.numpy_dtype)
            _gather.index_add(summed, values, outer, size, inner, index.astype(np.int64))
            shape[axis], values = size, summed
        return Tensor._from_array(values.reshape(shape), dtype)
    return kernel
