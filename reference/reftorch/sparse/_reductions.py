"""Sums of sparse tensors (`torch.sparse.sum`, and `Tensor.sum` on a sparse tensor).

Reducing every sparse dim leaves a dense tensor (the values summed over all entries and over
the reduced dense dims); reducing only some sparse dims leaves a sparse tensor whose entries
are the remaining index columns, coalesced. Integer and bool inputs sum to int64 when the
result is dense, as dense sums do, but keep their dtype when it stays sparse (PyTorch).
"""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._shape import wrap_dim
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..autograd.graph import record
from ._coo import SparseTensor, _from_arrays, coalesce_arrays


def _dims(dim, ndim):
    given = dim if isinstance(dim, (tuple, list)) else (dim,)
    dims = [wrap_dim(d, ndim) for d in given]
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return sorted(dims)


def sparse_sum(input, dim=None, dtype=None, *, node="_sparse_sum", keepdim=False):
    """`torch.sparse.sum(input, dim=None, dtype=None)`."""
    if not isinstance(input, SparseTensor):
        if dim is None:
            raise RuntimeError("coalesce expected sparse coordinate tensor layout but got "
                               "Strided")
        raise NotImplementedError("Could not run 'aten::_indices' with arguments from the "
                                  "'CPU' backend: torch.sparse.sum expects a sparse tensor")
    if dim is None:
        # The sum of the coalesced values: recorded as coalesce -> values -> sum, as PyTorch.
        values = input.coalesce().values()
        return values.sum(dtype=dtype) if dtype is not None else values.sum()
    source = input if dtype is None else input.to(dtype)
    dims = _dims(dim, input.ndim)
    result = _sum_dims(source.detach(), dims, keepdim)
    return record(node, (source,), result, {"dim": tuple(dims), "keepdim": keepdim})


def _sum_dims(s, dims, keepdim):
    sparse_dim = s.sparse_dim()
    sparse_dims = [d for d in dims if d < sparse_dim]
    dense_axes = tuple(d - sparse_dim + 1 for d in dims if d >= sparse_dim)  # axes of values
    values = s._values_t._host_array()
    if dense_axes:
        values = values.sum(axis=dense_axes, keepdims=keepdim).astype(values.dtype, copy=False)
    if len(sparse_dims) == sparse_dim:  # nothing sparse left: a dense result
        total = values.sum(axis=0, keepdims=False)
        dtype = D.int64 if s.dtype.category <= D.Category.INTEGER else s.dtype
        total = np.asarray(total).astype(dtype.numpy_dtype)
        if keepdim:
            total = total.reshape((1,) * sparse_dim + total.shape)
        return Tensor._from_array(total, dtype)
    kept = [d for d in range(sparse_dim) if d not in sparse_dims]
    indices = s._indices_t._host_array()[kept]
    if keepdim:
        shape = [1 if d in dims else n for d, n in enumerate(s._shape)]
    else:
        shape = [n for d, n in enumerate(s._shape) if d not in dims]
    kept_shape = tuple(s._shape[d] for d in kept)
    indices, values = coalesce_arrays(indices, values, kept_shape)
    coalesced = True
    if keepdim:  # the reduced sparse dims come back as rows of zeros
        full = np.zeros((sparse_dim, indices.shape[1]), np.int64)
        full[kept] = indices
        indices, coalesced = full, False
    return _from_arrays(indices, values, shape, s.device, coalesced, s.dtype)


def tensor_sum(self, dim=None, keepdim=False, *, dtype=None, out=None):
    """`Tensor.sum` / `torch.sum` of a sparse tensor: a dense total, or a sparse tensor when
    some dims remain (recorded as SumBackward0 / SumBackward1, as PyTorch)."""
    if out is not None:
        raise RuntimeError("sum: out= is not supported for sparse inputs")
    if dim is None:
        with no_grad():
            total = sparse_sum(self.detach(), None, dtype)
        return record("_sparse_sum_all", (self,), total, {})
    return sparse_sum(self, dim, dtype, node="_sparse_sum_dim", keepdim=keepdim)
