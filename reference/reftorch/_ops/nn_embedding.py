"""Neural-network ops (embedding) at the torch level: lookups, bags and in-place renorm.

`embedding` is a row gather from the weight; its gradient (EmbeddingBackward0) scatters rows
back with index_add, skipping padding_idx and optionally dividing by each index's frequency.
`embedding_bag` reduces the looked-up rows of each bag (a run of entries between offsets) by
sum, mean or max. Bags are contiguous segments of the flat input, so the reductions are
segment reductions (`np.add.reduceat`, `np.maximum.reduceat`), not a loop over bags.
"""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..autograd.grad_mode import is_grad_enabled, no_grad
from . import structured

__all__ = ["embedding", "embedding_bag", "embedding_renorm_"]

FLOATING = {D.float16, D.bfloat16, D.float32, D.float64}
INDEX_DTYPES = (D.int64, D.int32)
MODES = {0: "sum", 1: "mean", 2: "max"}


def _check_indices(indices, fn, position=1, name="indices"):
    if not isinstance(indices, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not "
                        f"{type(indices).__name__}")
    if indices.dtype not in INDEX_DTYPES:
        raise RuntimeError(f"Expected tensor for argument #{position} '{name}' to have one of "
                           f"the following scalar types: Long, Int; but got "
                           f"{_legacy_type(indices)} instead (while checking arguments for "
                           f"{fn})")


def _legacy_type(t):
    """PyTorch's legacy type name of a CPU tensor: torch.FloatTensor, torch.LongTensor, ..."""
    return f"torch.{t.dtype.scalar_name}Tensor"


# =============================================================================================
# embedding
# =============================================================================================

def _embedding_kernel(weight, indices, padding_idx=-1, scale_grad_by_freq=False,
                      sparse=False):
    flat = indices.astype(np.int64).ravel()
    if flat.size and (flat.min() < 0 or flat.max() >= weight.shape[0]):
        raise IndexError("index out of range in self")
    return weight[flat].reshape(indices.shape + weight.shape[1:])


EMBEDDING = structured.declare("embedding", _embedding_kernel, family="nn",
                               params={"padding_idx": -1, "scale_grad_by_freq": False,
                                       "sparse": False})


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """torch.embedding: weight[indices] (padding_idx -1 means none)."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"embedding(): argument 'weight' (position 1) must be Tensor, not "
                        f"{type(weight).__name__}")
    _check_indices(indices, "embedding")
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    return structured.run(EMBEDDING, (weight, indices), {
        "padding_idx": int(padding_idx), "scale_grad_by_freq": bool(scale_grad_by_freq),
        "sparse": bool(sparse)}, dtype=weight.dtype)


def _embedding_dense_backward_kernel(grad, indices, num_weights, padding_idx=-1,
                                     scale_grad_by_freq=False):
    """Reference kernel of `embedding_dense_backward`: each index's gradient row (zero where
    the index is padding_idx, divided by the index's count with scale_grad_by_freq) added
    into a zero (num_weights, D) gradient, in index order (np.add.at, as index_add)."""
    flat = indices.reshape(-1).astype(np.int64)
    rows = grad.reshape(flat.size, grad.shape[-1])
    if padding_idx >= 0:
        rows = rows * (flat != padding_idx).astype(rows.dtype)[:, None]
    if scale_grad_by_freq:
        counts = np.bincount(flat, minlength=num_weights)
        rows = rows / counts[flat].astype(rows.dtype)[:, None]
    out = np.zeros((num_weights, rows.shape[1]), dtype=rows.dtype)
    np.add.at(out, flat, rows)
    return out


# PyTorch's op for embedding's first-order weight gradient, declared so that a plugin can
# write it in one pass (zeros, then the rows added in); a gradient being differentiated
# (create_graph) uses the composition below.
EMBEDDING_DENSE_BACKWARD = structured.declare(
    "embedding_dense_backward", _embedding_dense_backward_kernel, family="nn",
    params={"num_weights": None, "padding_idx": -1, "scale_grad_by_freq": False},
    dtypes=(D.float32, D.float64))


def embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """The weight gradient of `embedding`: the op for a float32 / float64 cpu gradient that
    nothing differentiates further, else the composition of differentiable reftorch ops
    (the same values; on other devices each of its ops runs there)."""
    if not is_grad_enabled() and grad.dtype in (D.float32, D.float64) and \
            grad.device.type == "cpu":
        return structured.run(EMBEDDING_DENSE_BACKWARD, (grad, indices.reshape(-1).long()),
                              {"num_weights": int(num_weights), "padding_idx": int(padding_idx),
                               "scale_grad_by_freq": bool(scale_grad_by_freq)})
    return _embedding_dense_backward_composed(grad, indices, num_weights, padding_idx,
                                              scale_grad_by_freq)


def _embedding_dense_backward_composed(grad, indices, num_weights, padding_idx,
                                       scale_grad_by_freq):
    """The weight gradient of `embedding`, written with differentiable reftorch ops."""
    from .. import zeros, bincount
    flat = indices.reshape(-1).long()
    rows = grad.reshape(flat.shape[0], grad.shape[-1])
    if padding_idx >= 0:
        rows = rows * (flat != padding_idx).to(rows.dtype).unsqueeze(1)
    if scale_grad_by_freq:
        counts = bincount(flat, minlength=num_weights)
        rows = rows / counts.index_select(0, flat).to(rows.dtype).unsqueeze(1)
    out = zeros((num_weights, rows.shape[1]), dtype=grad.dtype, device=grad.device)
    return out.index_add(0, flat, rows)


def embedding_renorm_(weight, indices, max_norm, norm_type):
    """Rescale, in place, every row of `weight` named in `indices` whose p-norm exceeds
    max_norm to norm max_norm (PyTorch divides by norm + 1e-7)."""
    if weight.dim() != 2:
        raise RuntimeError("'self' must be 2-D")
    _check_indices(indices, "embedding_renorm_", position=2)
    with no_grad():
        rows = np.unique(indices._np.astype(np.int64).ravel())
        if rows.size and (rows[0] < 0 or rows[-1] >= weight.shape[0]):
            raise IndexError("index out of range in self")
        values = weight._np[rows]
        wide = values.astype(np.float64)
        if norm_type == float("inf"):
            norms = np.abs(wide).max(axis=1) if wide.shape[1] else np.zeros(len(rows))
        elif norm_type == 0:
            norms = (wide != 0).sum(axis=1).astype(np.float64)
        else:
            norms = (np.abs(wide) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
        too_long = norms > max_norm
        scale = max_norm / (norms[too_long] + 1e-7)
        compute = np.float64 if values.dtype == np.float64 else np.float32
        scaled = values[too_long].astype(compute) * scale[:, None].astype(compute)
        weight._np[rows[too_long]] = scaled.astype(values.dtype)
        weight._bump_version()
    return weight


# =============================================================================================
# embedding_bag
# =============================================================================================

def bag_index_error(index):
    """embedding_bag's error for the first index outside the weight's rows."""
    return RuntimeError(f"embedding_bag: Expected idx >= 0 && idx < num_embeddings but found "
                        f"idx to be {index}")


def bag_bounds(offsets, n_entries, include_last_offset):
    """(starts, ends) of each bag: bag b covers entries starts[b] .. ends[b]-1."""
    offsets = offsets.astype(np.int64)
    # with include_last_offset the final offset only closes the list of bags: PyTorch's last
    # bag still runs to the end of the input
    starts = offsets[:-1] if include_last_offset else offsets
    ends = np.append(starts[1:], n_entries)
    return starts, np.maximum(ends, starts)


def _segment_reduce(ufunc, values, starts, ends, empty_value):
    """ufunc.reduceat over [starts, ends) of `values` rows, `empty_value` for empty bags
    (a padded row keeps a start equal to the number of entries valid for reduceat)."""
    padded = np.concatenate([values, np.full((1,) + values.shape[1:], empty_value,
                                             dtype=values.dtype)])
    if len(starts) == 0:
        return np.zeros((0,) + values.shape[1:], dtype=values.dtype)
    reduced = ufunc.reduceat(padded, starts, axis=0)
    return np.where((ends > starts)[:, None], reduced, empty_value).astype(values.dtype)


def bag_layout(num_embeddings, indices, offsets, include_last_offset, padding_idx):
    """How embedding_bag's entries fall into bags: (flat int64 indices, starts, ends, the bag
    of each entry, valid (in a bag, not padding_idx), bag_size (valid entries per bag)).
    RuntimeError for an index outside the weight's rows."""
    flat = indices.astype(np.int64).ravel()
    n = flat.size
    outside = (flat < 0) | (flat >= num_embeddings)
    if outside.any():
        raise bag_index_error(flat[outside][0])
    starts, ends = bag_bounds(offsets, n, include_last_offset)
    # bag of each entry (empty bags share a start, so the last bag starting there wins)
    bag = np.searchsorted(starts, np.arange(n), side="right") - 1
    valid = (bag >= 0) & (flat != padding_idx)
    bag_size = np.bincount(bag[valid], minlength=len(starts)).astype(np.int64)
    return flat, starts, ends, bag, valid, bag_size


def _embedding_bag_kernel(weight, indices, offsets, per_sample_weights=None, mode=0,
                          include_last_offset=False, padding_idx=-1, scale_grad_by_freq=False,
                          sparse=False):
    """(output (B, D), offset2bag (n,), bag_size (B,), max_indices (B, D) or (B,))."""
    flat, starts, ends, bag, valid, bag_size = bag_layout(
        weight.shape[0], indices, offsets, include_last_offset, padding_idx)
    n = flat.size
    positions = np.arange(n)
    compute = np.float64 if weight.dtype == np.float64 else np.float32
    rows = weight[flat].astype(compute)
    if MODES[mode] == "max":
        masked = np.where(valid[:, None], rows, -np.inf).astype(compute)
        best = _segment_reduce(np.maximum, masked, starts, ends, -np.inf)
        # the first entry of each bag holding the maximum (PyTorch's strict '>' scan)
        hit = valid[:, None] & (rows == best[np.clip(bag, 0, None)])
        first = _segment_reduce(np.minimum, np.where(hit, positions[:, None], n), starts,
                                ends, n)
        max_indices = np.where(first < n, np.append(flat, 0)[np.minimum(first, n)], 0)
        output = np.where(bag_size[:, None] > 0, best, 0)
        return (output.astype(weight.dtype), np.clip(bag, 0, None), bag_size,
                max_indices.astype(np.int64))
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.astype(compute).ravel()[:, None]
    rows = np.where(valid[:, None], rows, 0).astype(compute)
    output = _segment_reduce(np.add, rows, starts, ends, 0)
    if MODES[mode] == "mean":
        output = output / np.maximum(bag_size, 1)[:, None].astype(compute)
    return (output.astype(weight.dtype), np.clip(bag, 0, None), bag_size,
            bag_size.copy())


EMBEDDING_BAG = structured.declare(
    "embedding_bag", _embedding_bag_kernel, family="nn",
    params={"mode": 0, "include_last_offset": False, "padding_idx": -1,
            "scale_grad_by_freq": False, "sparse": False},
    dtypes=FLOATING)


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """torch.embedding_bag: returns (output, offset2bag, bag_size, max_indices).

    Only `output` is meant to be compared with PyTorch: the three helper tensors follow this
    implementation's layout (PyTorch leaves some of them empty depending on the mode).
    """
    fn = "embedding_bag"
    _check_indices(indices, fn, position=2)
    _check_indices(offsets, fn, position=3, name="offsets")
    if weight.dtype not in FLOATING:
        raise RuntimeError(f"Expected tensor for argument #1 'weight' to have one of the "
                           f"following scalar types: Half, BFloat16, Float, Double; but got "
                           f"{_legacy_type(weight)} instead (while checking arguments for "
                           f"embedding_bag)")
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    if mode not in MODES:
        raise RuntimeError(f"embedding_bag: unknown mode {mode}")
    if indices.dim() != 1 or offsets.dim() != 1:
        raise RuntimeError("input and offsets have to be 1D tensors")
    n = indices.numel()
    offset_values = offsets._np
    if offset_values.size:
        if offset_values[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the "
                               f"mini-batch has to start from position 0. However, got "
                               f"{int(offset_values[0])}")
        if offset_values[-1] > n:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but "
                               f"got offsets[-1] of {int(offset_values[-1])}")
    if include_last_offset and offsets.numel() < 1:
        raise RuntimeError("include_last_offset: number of offset should be at least 1")
    if per_sample_weights is not None:
        if MODES[mode] != "sum":
            raise RuntimeError("embedding_bag: per_sample_weights only supported with "
                               "mode='sum'")
        if per_sample_weights.dtype != weight.dtype:
            raise RuntimeError(f"expected scalar type {weight.dtype.scalar_name} but found "
                               f"{per_sample_weights.dtype.scalar_name}")
        if per_sample_weights.numel() != n:
            raise RuntimeError("embedding_bag: per_sample_weights must have the same number "
                               "of elements as indices")
    if padding_idx is None:
        padding_idx = -1
    return structured.run(EMBEDDING_BAG, (weight, indices, offsets, per_sample_weights), {
        "mode": int(mode), "include_last_offset": bool(include_last_offset),
        "padding_idx": int(padding_idx), "scale_grad_by_freq": bool(scale_grad_by_freq),
        "sparse": bool(sparse)}, dtype=weight.dtype)
