"""embedding_bag's 'sum' and 'mean' modes over the C module `_bags` (src/bags.c), float32 and
float64 weights on cpu.

The bags are laid out by the reference's own helper (reftorch._ops.nn_embedding.bag_layout:
the same index check and error, the same bag of every entry, padding_idx and bag sizes), and
the helper tensors (offset2bag, bag_size, max_indices) are the reference's. C then sums each
bag's rows in the reference's reduceat order, times the per-sample weights when given and
divided by max(bag_size, 1) for 'mean': bit for bit the reference's output, where the
reference gathers every entry's row into one array first and folds it with np.add.reduceat.

Declined (the reference runs): 'max' mode, weights of other dtypes or not in cpu storage,
per-sample weights of another dtype, offsets that decrease (bags out of order).
"""
from __future__ import annotations

import numpy as np

from reftorch import _dtype as D
from reftorch._ops.nn_embedding import MODES, bag_layout
from reftorch._tensor import Tensor

from . import _bags
from .kernels import _on_cpu_as

DTYPES = (D.float32, D.float64)


def register(registrar):
    """Register the kernel with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("embedding_bag", "cpu", DTYPES, embedding_bag_kernel)


def embedding_bag_kernel(out, inputs, dtypes, params):
    """(output, offset2bag, bag_size, max_indices) for modes 'sum' and 'mean'."""
    if len(inputs) != 4 or MODES.get(params.get("mode")) not in ("sum", "mean"):
        return NotImplemented
    weight, indices, offsets, per_sample_weights = inputs
    dtype = dtypes[0]
    if dtype not in DTYPES or not _on_cpu_as(weight, dtype) or \
            not (_on_cpu_as(indices, indices.dtype) and _on_cpu_as(offsets, offsets.dtype)) or \
            not (per_sample_weights is None or _on_cpu_as(per_sample_weights, dtype)):
        return NotImplemented
    flat, starts, ends, bag, valid, bag_size = bag_layout(
        weight._shape[0], indices._np, offsets._np, params["include_last_offset"],
        params["padding_idx"])
    if np.any(starts[1:] < starts[:-1]):
        return NotImplemented
    numpy_dtype = dtype.numpy_dtype
    divisors = np.maximum(bag_size, 1).astype(numpy_dtype) \
        if MODES[params["mode"]] == "mean" else None
    scales = None if per_sample_weights is None else \
        np.ascontiguousarray(per_sample_weights._np.ravel())
    output = Tensor._empty((len(starts), weight._shape[1]), dtype)
    _bags.bag_sums(weight._storage.array, weight._offset, weight._shape, weight._strides,
                   np.ascontiguousarray(flat), np.ascontiguousarray(valid),
                   np.ascontiguousarray(starts), np.ascontiguousarray(ends), scales, divisors,
                   output._storage.array)
    offset2bag = np.clip(bag, 0, None).astype(np.int64)
    return (output, Tensor._from_array(offset2bag), Tensor._from_array(bag_size),
            Tensor._from_array(bag_size.copy()))
