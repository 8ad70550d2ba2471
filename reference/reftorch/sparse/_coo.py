"""The sparse COO tensor: a `Tensor` whose layout is `torch.sparse_coo`.

A sparse tensor of shape `size` keeps two dense tensors:
  indices  int64, (sparse_dim, nnz): column k names the position of entry k in the first
           `sparse_dim` dimensions;
  values   (nnz, *size[sparse_dim:]): entry k's value, itself a dense block when the tensor
           is "hybrid" (dense_dim = len(size) - sparse_dim > 0).
An index may appear several times (the tensor is then "uncoalesced"): its value is the sum of
the entries. `coalesce()` sorts the entries lexicographically by index and sums duplicates.
Like PyTorch, a tensor carries an `is_coalesced()` flag that ops set from their inputs (it
says the entries are known to be sorted and unique, not that someone checked).

The class subclasses `Tensor` so that `isinstance(x, torch.Tensor)` holds, as in PyTorch, and
so that metadata (shape, dtype, device, autograd fields) works unchanged. A sparse tensor has
no strided memory of its own: `_np` and the view machinery raise, so dense-only ops called on
it fail with NotImplementedError as PyTorch's do ("Could not run ... 'SparseCPU' backend").
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import _dtype as D
from .._device import sparse_coo
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..autograd.graph import record


def _unsupported(what):
    return NotImplementedError(
        f"Could not run '{what}' with arguments from the 'SparseCPU' backend: it needs strided "
        f"memory, which a sparse COO tensor does not have (convert with to_dense() first).")


class SparseTensor(Tensor):
    """A sparse COO tensor (layout `torch.sparse_coo`). Make one with `sparse_coo_tensor`."""

    __slots__ = ("_indices_t", "_values_t", "_coalesced")

    # --- metadata -------------------------------------------------------------------------
    @property
    def layout(self):
        return sparse_coo

    @property
    def is_sparse(self):
        return True

    def sparse_dim(self):
        return self._indices_t._shape[0]

    def dense_dim(self):
        return len(self._shape) - self._indices_t._shape[0]

    def _nnz(self):
        return self._indices_t._shape[1]

    def is_coalesced(self):
        return self._coalesced

    def _coalesced_(self, coalesced):
        self._coalesced = builtins.bool(coalesced)
        return self

    def _indices(self):
        """The indices as stored (an alias: writes to it change this tensor)."""
        return self._indices_t

    def _values(self):
        """The values as stored (an alias, and outside autograd: use values() for gradients)."""
        return self._values_t

    def indices(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._indices_t

    def values(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        result = self._values_t.detach()
        return record("values", (self,), result, {})

    def is_contiguous(self, memory_format=None):
        return False

    def contiguous(self, memory_format=None):
        raise RuntimeError("unsupported memory format option Contiguous")

    @property
    def nbytes(self):
        raise RuntimeError("nbytes is not defined for sparse tensors.  If you want the size of "
                           "the constituent tensors, add the nbytes of the indices and values."
                           "  If you want the size of the  equivalent dense tensor, multiply "
                           "numel() by element_size()")

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def untyped_storage(self):
        raise NotImplementedError("Cannot access storage of SparseTensorImpl")

    storage = untyped_storage

    # --- what a sparse tensor does not have: strided memory --------------------------------
    @property
    def _np(self):
        raise _unsupported("a strided operator")

    def _host_array(self):
        raise _unsupported("a strided operator")

    def _view(self, shape, strides, offset=None, op="as_strided", replay=None, **params):
        raise _unsupported(f"aten::{op}")

    def _set_geometry(self, storage, offset, shape, strides):
        raise _unsupported("aten::set_")

    def numpy(self, *, force=False):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() "
                        "first.")

    def __array__(self, dtype=None, copy=None):
        self.numpy()

    def tolist(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               f"Scalar")
        return self.detach().to_dense().item()

    def reshape(self, *shape):
        raise RuntimeError("reshape is not implemented for sparse tensors")

    # --- conversions ------------------------------------------------------------------------
    def coalesce(self):
        """Entries sorted by index, duplicates summed; `self` if already flagged coalesced."""
        if self._coalesced:
            return self
        indices, values = coalesce_arrays(self._indices_t._host_array(),
                                          self._values_t._host_array(), self._shape)
        result = _from_arrays(indices, values, self._shape, self.device, coalesced=True)
        return record("coalesce", (self,), result, {})

    def to_dense(self, dtype=None, *, masked_grad=None):
        if dtype is not None:
            raise RuntimeError("dtype argument is not supported by sparse_to_dense")
        dense = to_dense_array(self._indices_t._host_array(), self._values_t._host_array(),
                               self._shape)
        result = Tensor._from_array(dense, self.dtype)
        if self.device.type != "cpu":
            result = result.to(self.device)
        return record("to_dense", (self,), result, {})

    toDense = to_dense  # the legacy (0.x) spelling

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        _check_coo_layout(layout, blocksize)
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim "
                               "argument !=self.sparse_dim() is not supported")
        return self

    def sparse_mask(self, mask):
        return sparse_mask(self, mask)

    _sparse_mask = sparse_mask

    def to(self, *args, **kwargs):
        from .._ops.copy import _parse_to_args
        kwargs.pop("memory_format", None)   # no strides to lay out
        dtype, device, copy = _parse_to_args(self, args, kwargs)
        if dtype is self.dtype and device == self.device and not copy:
            return self
        with no_grad():
            values = self._values_t.to(dtype=dtype, device=device, copy=copy)
            indices = self._indices_t.to(device=device, copy=copy)
        result = make_sparse(indices, values, self._shape, self._coalesced)
        return record("_to_copy", (self,), result, {})

    def type(self, dtype=None, non_blocking=False, **kwargs):
        from ._legacy import sparse_type
        return sparse_type(self, dtype)

    def clone(self, *, memory_format=None):
        with no_grad():
            result = make_sparse(self._indices_t.clone(), self._values_t.clone(), self._shape,
                                 self._coalesced)
        return record("clone", (self,), result, {})

    def detach(self):
        return make_sparse(self._indices_t, self._values_t, self._shape, self._coalesced)

    def __repr__(self, *, tensor_contents=None):
        return sparse_repr(self, tensor_contents)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._indices_t, self._values_t, tuple(self._shape),
                           self._coalesced, self.requires_grad))

    # --- in-place metadata and fills ---------------------------------------------------------
    def zero_(self):
        """Drop every entry (nnz becomes 0; the tensor is then trivially coalesced)."""
        indices = Tensor._from_array(np.zeros((self.sparse_dim(), 0), np.int64))
        values = Tensor._from_array(
            np.zeros((0,) + tuple(self._shape[self.sparse_dim():]),
                     self.dtype.numpy_dtype), self.dtype)
        self._replace(indices, values, self._shape, True)
        return self

    def resize_as_(self, the_template, memory_format=None):
        if not the_template.is_sparse:
            raise _unsupported("aten::resize_")
        return self.sparse_resize_(the_template.shape, the_template.sparse_dim(),
                                   the_template.dense_dim())

    resizeAs_ = resize_as_  # the legacy (0.x) spelling

    def resize_(self, *sizes, memory_format=None):
        raise _unsupported("aten::resize_")

    def sparse_resize_(self, size, sparse_dim, dense_dim):
        """Change the size (and, while nnz is 0, the sparse/dense split) keeping the entries."""
        size = tuple(builtins.int(s) for s in size)
        if len(size) != sparse_dim + dense_dim:
            raise RuntimeError(f"number of dimensions must be sparse_dim ({sparse_dim}) + "
                               f"dense_dim ({dense_dim}), but got {len(size)}")
        old_sparse = self.sparse_dim()
        if self._nnz():
            hint = ("\nYou could try the following options:\n1. If you need an empty sparse "
                    "tensor of this size, call `x = torch.sparse_coo_tensor(size)`.\n2. If you "
                    "need to resize this tensor, you have the following options:\n    1. For "
                    "both sparse and dense dimensions, keep the number of them constant and "
                    "the size of them non-shrinking, and then try the same call again.\n    "
                    "2. Or, create a new sparse tensor with the correct indices and values "
                    "from this sparse tensor.")
            if sparse_dim != old_sparse:
                raise RuntimeError(f"changing the number of sparse dimensions (from "
                                   f"{old_sparse} to {sparse_dim}) on a non-empty sparse "
                                   f"tensor is not supported.{hint}")
            if dense_dim != self.dense_dim():
                raise RuntimeError(f"changing the number of dense dimensions (from "
                                   f"{self.dense_dim()} to {dense_dim}) on a non-empty "
                                   f"sparse tensor is not supported.{hint}")
            old = self._shape
            if any(n < o for n, o in zip(size[:sparse_dim], old[:sparse_dim])):
                raise RuntimeError(f"shrinking the size of sparse dimensions (from "
                                   f"{list(old[:sparse_dim])} to {list(size[:sparse_dim])}) on "
                                   f"a non-empty sparse tensor is not supported.{hint}")
            if size[sparse_dim:] != old[sparse_dim:]:
                raise RuntimeError(f"shrinking the size of dense dimensions (from "
                                   f"{list(old[sparse_dim:])} to {list(size[sparse_dim:])}) on "
                                   f"a non-empty sparse tensor is not supported.{hint}")
            self._replace(self._indices_t, self._values_t, size, self._coalesced)
            return self
        indices = Tensor._from_array(np.zeros((sparse_dim, 0), np.int64))
        values = Tensor._from_array(np.zeros((0,) + size[sparse_dim:], self.dtype.numpy_dtype),
                                    self.dtype)
        self._replace(indices, values, size, self._coalesced)
        return self

    def _replace(self, indices, values, shape, coalesced):
        """Swap in new indices/values (in-place ops): the tensor's identity stays."""
        self._indices_t, self._values_t = indices, values
        self._storage = values._storage
        self._shape = tuple(shape)
        self._strides = (0,) * len(self._shape)
        self._coalesced = coalesced
        self._bump_version()

    # --- views PyTorch supports on sparse tensors ---------------------------------------------
    def transpose(self, dim0, dim1):
        from .._shape import wrap_dim
        n = self.ndim
        dim0, dim1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
        result = self.detach()._transposed(dim0, dim1)
        return record("transpose", (self,), result, {"dim0": dim0, "dim1": dim1})

    swapaxes = swapdims = transpose

    def t(self):
        if self.sparse_dim() > 2 or self.dense_dim() > 0:
            raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, "
                               f"but got {self.sparse_dim()} sparse and {self.dense_dim()} "
                               f"dense dimensions")
        result = self.detach()._transposed(0, 1) if self.ndim == 2 else self.detach()
        return record("t", (self,), result, {})

    @property
    def T(self):
        return self.t()

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def transpose_(self, dim0, dim1):
        from .._shape import wrap_dim
        n = self.ndim
        swapped = self._transposed(wrap_dim(dim0, n), wrap_dim(dim1, n))
        self._replace(swapped._indices_t, swapped._values_t, swapped._shape,
                      swapped._coalesced)
        return self

    def t_(self):
        self.t()  # the same checks
        return self.transpose_(0, 1) if self.ndim == 2 else self

    def _transposed(self, dim0, dim1):
        """Swap two sparse dims (rows of the indices); no autograd."""
        sparse_dim = self.sparse_dim()
        if dim0 == dim1:
            return make_sparse(self._indices_t, self._values_t, self._shape, self._coalesced)
        if dim0 >= sparse_dim or dim1 >= sparse_dim:
            raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse Got "
                               f"sparse_dim: {sparse_dim}, d0: {dim0}, d1: {dim1}")
        order = list(range(sparse_dim))
        order[dim0], order[dim1] = dim1, dim0
        indices = self._indices_t._host_array()[order]
        shape = list(self._shape)
        shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
        return make_sparse(_index_tensor(indices, self.device), self._values_t, shape, False)

    def narrow_copy(self, dim, start, length):
        return narrow_copy(self, dim, start, length)


# --- building sparse tensors -------------------------------------------------------------------

def make_sparse(indices, values, shape, coalesced=None):
    """A sparse tensor around int64 `indices` (sparse_dim, nnz) and `values` (nnz, ...).

    `coalesced` None: PyTorch's rule when it sets indices and values, true when nnz < 2."""
    shape = tuple(builtins.int(s) for s in shape)
    # dtype, device and version counter come from the values' storage; (0, ..., 0) is what
    # PyTorch reports as a sparse tensor's strides.
    t = SparseTensor._make(values._storage, 0, shape, (0,) * len(shape))
    t._indices_t = indices
    t._values_t = values
    t._coalesced = indices._shape[1] < 2 if coalesced is None else builtins.bool(coalesced)
    return t


def _index_tensor(array, device):
    t = Tensor._from_array(np.ascontiguousarray(array, dtype=np.int64), D.int64)
    return t if device.type == "cpu" else t.to(device)


def _from_arrays(indices, values, shape, device, coalesced=None, dtype=None):
    """A sparse tensor from fresh NumPy arrays (a kernel's result)."""
    values_t = Tensor._from_array(np.ascontiguousarray(values), dtype)
    if device.type != "cpu":
        values_t = values_t.to(device)
    return make_sparse(_index_tensor(indices, device), values_t, shape, coalesced)


def _rebuild(indices, values, shape, coalesced, requires_grad):
    t = make_sparse(indices, values, shape, coalesced)
    t.requires_grad = requires_grad
    return t


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None,
                      is_coalesced=None):
    """A sparse COO tensor with `values` at `indices` (see the module docstring).

    Without `size`, each sparse dim is one more than its largest index and the dense dims are
    those of `values`. As in PyTorch 2.x, indices are checked against an explicit `size` only
    when `check_invariants=True` (or `torch.sparse.check_sparse_tensor_invariants` is on)."""
    from .._ops.creation import tensor
    from .._storage import normalize_device
    target = None if device is None else normalize_device(device)
    if not isinstance(values, Tensor):
        values = tensor(values, dtype=dtype)
    elif dtype is not None and values.dtype is not dtype:
        values = values.to(dtype)
    if not isinstance(indices, Tensor):
        indices = tensor(indices)
    if indices.dtype is not D.int64:
        indices = indices.to(D.int64)  # PyTorch converts float/int32 indices too
    if target is not None:
        values, indices = values.to(target), indices.to(target)
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if values.ndim == 0:
        values = values.reshape(1)  # one value, as PyTorch does
    nnz = indices.shape[1]
    if values.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: "
                           f"{nnz}, nnz from values: {values.shape[0]}")
    sparse_dim, dense_dim = indices.shape[0], values.ndim - 1
    index_array = indices.detach()._host_array()
    if size is None:
        shape = _inferred_size(index_array) + tuple(values.shape[1:])
    else:
        shape = _checked_size(size, sparse_dim, dense_dim, values)
        if check_invariants or (check_invariants is None and _invariant_checks_enabled()):
            check_bounds(index_array, shape[:sparse_dim])
    if requires_grad and not (values.dtype.is_floating_point or values.dtype.is_complex):
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    coalesced = nnz < 2 if is_coalesced is None else builtins.bool(is_coalesced)
    result = make_sparse(indices.detach(), values.detach(), shape, coalesced)
    result = record("sparse_coo_tensor", (values,), result, {"indices": indices.detach()})
    if requires_grad:
        result.requires_grad = True
    return result


def _invariant_checks_enabled():
    from . import check_sparse_tensor_invariants
    return check_sparse_tensor_invariants.is_enabled()


def _inferred_size(index_array):
    if index_array.shape[1] == 0:
        return (0,) * index_array.shape[0]
    lows, highs = index_array.min(axis=1), index_array.max(axis=1)
    for dim, low in enumerate(lows.tolist()):
        if low < 0:
            raise RuntimeError(f"found negative index {low} for dim {dim}")
    return tuple(h + 1 for h in highs.tolist())


def _checked_size(size, sparse_dim, dense_dim, values):
    shape = tuple(builtins.int(s) for s in size)
    if len(shape) != sparse_dim + dense_dim:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) "
                           f"= {len(shape)}, sparse_dim = {sparse_dim}, dense_dim = "
                           f"{dense_dim}")
    if any(s < 0 for s in shape):
        raise RuntimeError(f"sparse_coo_tensor: negative dimension in size {list(shape)}")
    expected = (values.shape[0],) + shape[sparse_dim:]
    if tuple(values.shape) != expected:
        raise RuntimeError(f"values has incorrect size, expected {list(expected)}, got "
                           f"{list(values.shape)}")
    return shape


def check_bounds(index_array, sizes):
    """Every index must lie in [0, size) of its dim (PyTorch's invariant check messages)."""
    if index_array.shape[1] == 0:
        return
    for dim, (low, high) in enumerate(zip(index_array.min(axis=1).tolist(),
                                          index_array.max(axis=1).tolist())):
        if low < 0:
            raise RuntimeError(f"found negative index {low} for dim {dim}")
        if high >= sizes[dim]:
            raise RuntimeError(f"size is inconsistent with indices: for dim {dim}, size is "
                               f"{sizes[dim]} but found index {high}")


# --- the kernels: NumPy over indices and values --------------------------------------------------

def sort_keys(index_array, sizes):
    """An int64 key per entry (column of `index_array`) whose order is the lexicographic
    order of the indices: the row-major position, or, when that could overflow, its rank."""
    check_bounds(index_array, sizes)
    if math.prod(sizes) < 2 ** 62:
        strides = np.ones(len(sizes), np.int64)
        for d in range(len(sizes) - 2, -1, -1):
            strides[d] = strides[d + 1] * sizes[d + 1]
        return strides @ index_array if len(sizes) else np.zeros(index_array.shape[1], np.int64)
    return np.unique(index_array.T, axis=0, return_inverse=True)[1].reshape(-1)


def group_starts(sorted_keys):
    """Positions where a run of equal keys begins."""
    if sorted_keys.size == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])


def sum_groups(values, starts):
    """Sum of each run of rows starting at `starts` (runs cover all rows, in order)."""
    if values.shape[0] == 0:
        return values.copy()
    return np.add.reduceat(values, starts, axis=0).astype(values.dtype, copy=False)


def coalesce_arrays(indices, values, shape):
    """Sort entries by index (stable) and sum the values of equal indices."""
    sparse_dim = indices.shape[0]
    if sparse_dim == 0:  # every entry sits at the one (empty) index
        if values.shape[0] <= 1:
            return indices.copy(), values.copy()
        return np.zeros((0, 1), np.int64), sum_groups(values, np.zeros(1, np.int64))
    keys = sort_keys(indices, shape[:sparse_dim])
    order = np.argsort(keys, kind="stable")
    starts = group_starts(keys[order])
    return indices[:, order[starts]], sum_groups(values[order], starts)


def to_dense_array(indices, values, shape):
    """The dense array: duplicates add up, absent entries are zero."""
    dense = np.zeros(shape, values.dtype)
    sparse_dim = indices.shape[0]
    if values.shape[0] == 0:
        return dense
    if sparse_dim == 0:
        dense[...] = sum_groups(values, np.zeros(1, np.int64))[0]
        return dense
    check_bounds(indices, shape[:sparse_dim])
    np.add.at(dense, tuple(indices), values)
    return dense


def dense_to_sparse_arrays(array, sparse_dim):
    """Entries of a dense array: every index (of the first `sparse_dim` dims) whose block has
    a nonzero (NaN counts as nonzero, -0.0 does not), in row-major order."""
    if array.ndim == 0:
        keep = np.array([array != 0]).reshape(-1)
        return np.zeros((0, builtins.int(keep.sum())), np.int64), array.reshape(1)[keep]
    nonzero = array != 0
    if sparse_dim < array.ndim:
        nonzero = nonzero.any(axis=tuple(range(sparse_dim, array.ndim)))
    indices = np.stack(np.nonzero(nonzero)) if sparse_dim else np.zeros((0, 1), np.int64)
    return indices.astype(np.int64), array[nonzero]


# --- conversions from dense (attached to Tensor) ---------------------------------------------------

def _check_coo_layout(layout, blocksize):
    if layout not in (None, sparse_coo) or blocksize is not None:
        raise NotImplementedError(f"to_sparse: reftorch implements only the sparse COO layout, "
                                  f"got layout {layout}")


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """`Tensor.to_sparse(sparse_dim)`: the nonzero entries of a dense tensor (coalesced)."""
    _check_coo_layout(layout, blocksize)
    n = self.ndim
    given = sparse_dim is not None
    if sparse_dim is None:
        sparse_dim = n if dense_dim is None else n - dense_dim
    if not 0 <= sparse_dim <= n:
        raise RuntimeError(f"dense_to_sparse: sparse_dim argument must be in [0,{n}] range, "
                           f"but {sparse_dim} is given")
    if sparse_dim == 0 and n > 0:
        raise RuntimeError("dense_to_sparse: sparse_dim argument must be in >0 when "
                           "self.dim()>0")
    indices, values = dense_to_sparse_arrays(self.detach()._host_array(), sparse_dim)
    result = _from_arrays(indices, values, self._shape, self.device, coalesced=True,
                          dtype=self.dtype)
    return record("to_sparse", (self,), result, {"sparse_dim_given": given})


def sparse_mask(self, mask):
    """The entries of `self` at `mask`'s indices (mask's structure and coalesced flag)."""
    if not isinstance(mask, SparseTensor):
        raise NotImplementedError("Could not run 'aten::sparse_mask' with arguments from the "
                                  "'CPU' backend: the mask must be a sparse COO tensor")
    if self._shape != mask._shape:
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self._shape)} but mask has size {list(mask._shape)}")
    indices = mask._indices_t._host_array()
    dense = self.detach()
    if isinstance(dense, SparseTensor):
        dense = dense.to_dense()  # a sparse self contributes its coalesced values
    gathered = dense._host_array()[tuple(indices)] if mask._nnz() else \
        np.zeros((0,) + tuple(self._shape[mask.sparse_dim():]), self.dtype.numpy_dtype)
    result = _from_arrays(indices, gathered, self._shape, self.device,
                          coalesced=mask._coalesced, dtype=self.dtype)
    return record("sparse_mask", (self,), result,
                  {"self_layout_is_sparse": isinstance(self, SparseTensor)})


def narrow_copy(self, dim, start, length):
    """A sparse copy of self.narrow(dim, start, length): the entries inside the range, with
    their index along `dim` shifted down by `start` (values narrowed for a dense dim)."""
    n = self.ndim
    if not -n <= dim < n:
        raise RuntimeError(f"Dimension {dim} out of range. Expecting 0 <= dim < {n}.")
    dim %= n
    size = self._shape[dim]
    if start < 0 or length < 0 or start + length > size:
        raise RuntimeError(f"Invalid range to narrow. range(start, start+length) must be a "
                           f"subset of range(0, {size}).")
    indices = self._indices_t._host_array()
    values = self._values_t._host_array()
    shape = list(self._shape)
    shape[dim] = length
    sparse_dim = self.sparse_dim()
    if dim < sparse_dim:
        keep = (indices[dim] >= start) & (indices[dim] < start + length)
        indices = indices[:, keep].copy()
        indices[dim] -= start
        values = values[keep]
    else:
        values = np.take(values, np.arange(start, start + length), axis=dim - sparse_dim + 1)
    result = _from_arrays(indices, values, shape, self.device, coalesced=self._coalesced,
                          dtype=self.dtype)
    return record("narrow_copy_sparse", (self,), result,
                  {"dim": dim, "start": start, "length": length})


# --- printing ---------------------------------------------------------------------------------

def sparse_repr(t, tensor_contents=None):
    """PyTorch's repr of a sparse tensor:
    tensor(indices=tensor(...),
           values=tensor(...),
           size=(2, 3), nnz=3, layout=torch.sparse_coo)"""
    from .._tensor_str import _tensor_body
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    suffixes += [f"size={tuple(t.shape)}", f"nnz={t._nnz()}"]
    if t.dtype not in (D.get_default_dtype(), D.default_complex_dtype(), D.int64, D.bool):
        suffixes.append(f"dtype={t.dtype!r}")
    if tensor_contents is None:
        parts = []
        for name, part in (("indices", t._indices_t), ("values", t._values_t)):
            part_prefix = f"{name}=tensor("
            array = part.detach()._host_array()
            if array.size:
                body = _tensor_body(array, part.dtype, indent + len(part_prefix))
            else:
                body = f"[], size={tuple(array.shape)}"
            parts.append(part_prefix + body + ")")
        tensor_contents = (",\n" + " " * indent).join(parts)
    suffixes.append(f"layout={t.layout}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + tensor_contents, suffixes, indent)


def _add_suffixes(text, suffixes, indent):
    """As the strided repr's suffixes, except that the first one always starts a new line."""
    from .._tensor_str import _OPTS
    parts = [text]
    line_len = len(text) - text.rfind("\n") + 1
    for i, suffix in enumerate(suffixes):
        if i == 0 or line_len + len(suffix) + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)
