"""Joining and masking on cuda: `cat` and `stack` (copies into slices of the result, through
the copy kernels: no program of their own) and `masked_fill` (kernels/masked.cu).

Each moves or converts elements without arithmetic, so results are the reference's bit for
bit, for every dtype the copy kernels take (cat/stack inputs of other dtypes are converted by
the cast kernels, as the reference's result dtype asks). The reference's result layout is
kept: a new contiguous tensor. masked_fill's value is cast to the tensor's dtype on the host
exactly as the reference casts it (NumPy's astype), and the kernel writes those bits.
"""
from __future__ import annotations

import ctypes

import numpy as np

from reftorch import _dtype as D
from reftorch._promotion import broadcast_shapes
from reftorch._shape import contiguous_strides
from reftorch._tensor import Tensor

from .kernel_base import WORDS, Program, on_one_cuda_device, run_elementwise

# ctypes twins of the word types, for passing one element's bits by value
WORD_CTYPES = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64,
               16: ctypes.c_uint64 * 2}


def masked_fill_expression(itemsize):
    return f"masked_fill_kernel<{WORDS[itemsize]}>"


MASKED = Program("masked.cu", tuple(masked_fill_expression(w) for w in WORDS))
PROGRAMS = (MASKED,)


def _copy_into(result, offset, shape, strides, src):
    """Copy `src` into the part of `result` at (offset, shape, strides); False if the copy
    kernel declined."""
    from .ops import copy_kernel   # ops imports this module: import on use
    part = Tensor._make(result._storage, offset, shape, strides)
    return copy_kernel(part, (src,), (result.dtype, result.dtype, src.dtype), {}) \
        is not NotImplemented


def cat_kernel(out, inputs, dtypes, params):
    """cat along params['dim'] into a new contiguous tensor of params['dtype'] (1-D empty
    inputs are skipped, as the reference's legacy rule)."""
    if out is not None or not inputs or not on_one_cuda_device(inputs):
        return NotImplemented
    dim, dtype = params["dim"], params["dtype"]
    kept = [t for t in inputs if t._shape != (0,)] or [inputs[0]]
    first = kept[0]
    shape = list(first._shape)
    shape[dim] = sum(t._shape[dim] for t in kept)
    result = Tensor._empty(tuple(shape), dtype, first.device)
    strides = contiguous_strides(tuple(shape))
    start = 0
    for t in kept:
        if t.numel() and not _copy_into(result, start * strides[dim], t._shape, strides, t):
            return NotImplemented
        start += t._shape[dim]
    return result


def stack_kernel(out, inputs, dtypes, params):
    """stack along a new params['dim'] into a new contiguous tensor of params['dtype']."""
    if out is not None or not inputs or not on_one_cuda_device(inputs):
        return NotImplemented
    dim, dtype = params["dim"], params["dtype"]
    each = inputs[0]._shape
    shape = each[:dim] + (len(inputs),) + each[dim:]
    result = Tensor._empty(shape, dtype, inputs[0].device)
    strides = contiguous_strides(shape)
    part_strides = strides[:dim] + strides[dim + 1:]
    for i, t in enumerate(inputs):
        if t.numel() and not _copy_into(result, i * strides[dim], each, part_strides, t):
            return NotImplemented
    return result


def _element_bits(value, dtype):
    """`value` cast to `dtype` as the reference casts it, as one word of the element's width."""
    word = np.asarray(value).astype(dtype.numpy_dtype).reshape(1)
    ctype = WORD_CTYPES[dtype.itemsize]
    return ctype.from_buffer_copy(word.tobytes())


def masked_fill_kernel(out, inputs, dtypes, params):
    """masked_fill(a, mask, value): value a number or a 0-dim tensor (read once, on the
    host)."""
    if len(inputs) != 3:
        return NotImplemented
    a, mask, value = inputs
    if mask.dtype is not D.bool or a.dtype.itemsize not in WORDS:
        return NotImplemented
    if isinstance(value, Tensor):
        value = value.item()
    if isinstance(value, complex) and not a.dtype.is_complex:
        return NotImplemented
    if out is None:   # masked_fill fills a contiguous copy of the (broadcast) input
        out = Tensor._empty(broadcast_shapes(a._shape, mask._shape), a.dtype, a.device)
    return run_elementwise(MASKED, masked_fill_expression(a.dtype.itemsize), out, (a, mask),
                           a.dtype, (_element_bits(value, a.dtype),))


def register_kernels(registrar):
    joinable = [d for d in D.ALL_DTYPES if d.itemsize in WORDS]
    registrar.kernel("cat", "cuda", joinable, cat_kernel)
    registrar.kernel("stack", "cuda", joinable, stack_kernel)
    registrar.kernel("masked_fill", "cuda", joinable, masked_fill_kernel)
