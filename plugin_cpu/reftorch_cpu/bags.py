"""embedding_bag over the C module `_bags` (src/bags.c), float32 and float64 weights on cpu:
modes 'sum', 'mean' and 'max'.

The bags are laid out as the reference's bag_layout (reftorch._ops.nn_embedding) lays them
out, in one C pass (NumPy's searchsorted and bincount took longer than the sums): the same
index check and error, the same bag of every entry, padding_idx and bag sizes; the helper
tensors (offset2bag, bag_size, max_indices) are the reference's. C then sums each
bag's rows in the reference's reduceat order, times the per-sample weights when given and
divided by max(bag_size, 1) for 'mean': bit for bit the reference's output, where the
reference gathers every entry's row into one array first and folds it with np.add.reduceat.
'max' folds each bag's valid rows as np.maximum.reduceat does (NaN kept, the running value
on ties) and finds the first entry holding each maximum, as the reference's second pass
does: the reference's values and max_indices (a tie between -0.0 and +0.0 keeps the first;
NumPy's vector loops may keep either).

Declined (the reference runs): weights of other dtypes or not in cpu storage, per-sample
weights of another dtype, offsets that decrease (bags out of order).
"""
from __future__ import annotations

import numpy as np

from reftorch import _dtype as D
from reftorch._ops.nn_embedding import MODES, bag_bounds, bag_index_error
from reftorch._tensor import Tensor

from . import _bags
from .kernels import _on_cpu_as

DTYPES = (D.float32, D.float64)


def register(registrar):
    """Register the kernel with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("embedding_bag", "cpu", DTYPES, embedding_bag_kernel)


def embedding_bag_kernel(out, inputs, dtypes, params):
    """(output, offset2bag, bag_size, max_indices) for modes 'sum', 'mean' and 'max'."""
    mode = MODES.get(params.get("mode"))
    if len(inputs) != 4 or mode not in ("sum", "mean", "max"):
        return NotImplemented
    weight, indices, offsets, per_sample_weights = inputs
    dtype = dtypes[0]
    if dtype not in DTYPES or not _on_cpu_as(weight, dtype) or \
            not (_on_cpu_as(indices, indices.dtype) and _on_cpu_as(offsets, offsets.dtype)) or \
            not (per_sample_weights is None or _on_cpu_as(per_sample_weights, dtype)):
        return NotImplemented
    flat = np.ascontiguousarray(indices._np.ravel(), dtype=np.int64)
    starts, ends = bag_bounds(offsets._np, flat.size, params["include_last_offset"])
    starts, ends = np.ascontiguousarray(starts), np.ascontiguousarray(ends)
    offset2bag, valid = np.empty(flat.size, np.int64), np.empty(flat.size, np.bool_)
    bag_size = np.empty(starts.size, np.int64)
    status = _bags.bag_layout(flat, weight._shape[0], starts, params["padding_idx"],
                              offset2bag, valid, bag_size)
    if status == -2:     # bags out of order
        return NotImplemented
    if status >= 0:
        raise bag_index_error(flat[status])
    offset2bag = Tensor._from_array(offset2bag)
    output = Tensor._empty((len(starts), weight._shape[1]), dtype)
    layout = (weight._storage.array, weight._offset, weight._shape, weight._strides,
              flat, valid, starts, ends)
    if mode == "max":
        if per_sample_weights is not None:
            return NotImplemented      # (the reference raises for it)
        max_indices = Tensor._empty(output._shape, D.int64)
        _bags.bag_maxima(*layout, output._storage.array, max_indices._storage.array)
        return output, offset2bag, Tensor._from_array(bag_size), max_indices
    numpy_dtype = dtype.numpy_dtype
    divisors = np.maximum(bag_size, 1).astype(numpy_dtype) if mode == "mean" else None
    scales = None if per_sample_weights is None else \
        np.ascontiguousarray(per_sample_weights._np.ravel())
    _bags.bag_sums(*layout, scales, divisors, output._storage.array)
    return output, offset2bag, Tensor._from_array(bag_size), Tensor._from_array(bag_size.copy())
