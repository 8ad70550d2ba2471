"""Arithmetic with sparse operands, as PyTorch defines it for the COO layout.

  sparse + sparse -> sparse   entries merged (PyTorch's merge of two index lists)
  dense + sparse  -> dense    (sparse + dense is an error in PyTorch, so it is here)
  sparse * number, sparse * dense, dense * sparse -> sparse with the sparse operand's indices
  sparse * sparse -> sparse   the intersection of the two sets of indices
  sparse / number -> sparse;  with a rounding mode (and for //, pow) the input is coalesced
                              first, since rounding does not distribute over duplicates.
Values are computed with reftorch's dense ops on the values tensors (so dtypes promote as for
dense tensors); indices are handled with NumPy. Every result records its autograd node under
the dense op's name: the dense derivative rows work unchanged on sparse gradients.
"""
from __future__ import annotations

import numpy as np

from .._promotion import broadcast_shapes2, check_output_cast, result_dtype
from .._tensor import Tensor
from .._ops import pointwise as P
from ..autograd.grad_mode import no_grad
from ..autograd.graph import prepare_inplace, record
from ._coo import SparseTensor, _from_arrays, make_sparse, sort_keys, sum_groups, group_starts


def _is_sparse(x):
    return isinstance(x, SparseTensor)


def _dense_values(t, dtype):
    return t._values_t.detach().to(dtype)


# --- addition -----------------------------------------------------------------------------------

def add(input, other, alpha=1, name="add"):
    """`input + alpha * other` (or, named "sub", `input - alpha * other`) where at least one
    operand is sparse."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if _is_sparse(input) and _is_sparse(other):
        result = _add_sparse_sparse(input, other, alpha, name)
    elif _is_sparse(input):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    else:
        result = _add_dense_sparse(input, other, alpha, name)
    return record(name, (input, other), result, {"alpha": alpha})


def add_(self, other, alpha=1, name="add"):
    """In place: a sparse self takes the sum's entries; a dense self gets them added in."""
    if not _is_sparse(other) and _is_sparse(self):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    saved = prepare_inplace(name, (self, other))
    if _is_sparse(self):
        total = _add_sparse_sparse(self, other, alpha, name)
        check_output_cast(total.dtype, self.dtype)
        with no_grad():
            values = total._values_t.to(self.dtype)
        self._replace(total._indices_t, values, self._shape, total._coalesced)
    else:
        _add_dense_sparse(self, other, alpha, name, out=self)
    return record(name, (self, other), self, {"alpha": alpha}, saved)


def _check_add_args(a, b, alpha, name):
    if name == "sub":
        P._check_sub(result_dtype((a, b)), {"alpha": alpha}, (a, b), False)
    dtype = result_dtype((a, b))
    P._check_alpha(dtype, {"alpha": alpha})
    return dtype


def _add_sparse_sparse(a, b, alpha, name):
    if a._shape != b._shape:
        raise RuntimeError(f"add: expected sizes of 'self' and 'other' to match, but "
                           f"{list(a._shape)} != {list(b._shape)}")
    if a.sparse_dim() != b.sparse_dim():
        raise RuntimeError(f"add: expected 'self' and 'other' to have same density, but 'self' "
                           f"has {a.sparse_dim()} sparse dimensions while 'other' has "
                           f"{b.sparse_dim()} sparse dimensions")
    dtype = _check_add_args(a, b, alpha, name)
    scale = -alpha if name == "sub" else alpha
    with no_grad():
        a_values = _dense_values(a, dtype)
        b_values = _dense_values(b, dtype)
        if scale != 1:
            b_values = b_values * scale
    if b._nnz() == 0:  # PyTorch copies self (keeping its flag), or scales other
        return make_sparse(a._indices_t.clone(), a_values.clone(), a._shape, a._coalesced)
    if a._nnz() == 0:
        return make_sparse(b._indices_t.clone(), b_values.clone(), b._shape, b._coalesced)
    indices, values, coalesced = merge_entries(
        a._indices_t._host_array(), a_values._np, b._indices_t._host_array(), b_values._np,
        a._shape[:a.sparse_dim()], a._coalesced and b._coalesced)
    return _from_arrays(indices, values, a._shape, a.device, coalesced, dtype)


def _run_ranks(keys):
    """For sorted keys: each entry's position within its run of equal keys."""
    starts = group_starts(keys)
    first = np.zeros(keys.size, np.int64)
    first[starts] = starts
    return np.arange(keys.size) - np.maximum.accumulate(first)


def merge_entries(a_indices, a_values, b_indices, b_values, sizes, both_coalesced):
    """PyTorch's sparse addition walks both entry lists at once, taking the smaller index
    first and adding the two values when the indices are equal. For sorted lists that is a
    merge in which the k-th occurrence of an index in `a` meets the k-th one in `b`: sort by
    (index, occurrence) and sum equal pairs. Lists that are not sorted are concatenated
    instead (the same tensor, but with duplicates PyTorch's walk might have combined)."""
    na = a_indices.shape[1]
    keys = sort_keys(np.concatenate([a_indices, b_indices], axis=1), sizes)
    indices = np.concatenate([a_indices, b_indices], axis=1)
    values = np.concatenate([a_values, b_values])
    a_keys, b_keys = keys[:na], keys[na:]
    if np.any(a_keys[1:] < a_keys[:-1]) or np.any(b_keys[1:] < b_keys[:-1]):
        return indices, values, False
    ranks = np.concatenate([_run_ranks(a_keys), _run_ranks(b_keys)])
    source = np.r_[np.zeros(na, np.int64), np.ones(keys.size - na, np.int64)]
    order = np.lexsort((source, ranks, keys))
    k, r = keys[order], ranks[order]
    starts = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (r[1:] != r[:-1])])
    return indices[:, order[starts]], sum_groups(values[order], starts), both_coalesced


def _add_dense_sparse(dense, sparse, alpha, name, out=None):
    if dense._shape != sparse._shape:
        raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has "
                           f"size {list(dense._shape)} while other has size "
                           f"{list(sparse._shape)} (FYI: dense-sparse addition does not "
                           f"currently support broadcasting)")
    dtype = _check_add_args(dense, sparse, alpha, name)
    scale = -alpha if name == "sub" else alpha
    with no_grad():
        if out is None:
            out = dense.detach().to(dtype, copy=True).contiguous()
        else:
            check_output_cast(dtype, out.dtype)
        values = _dense_values(sparse, dtype)
        if scale != 1:
            values = values * scale
        values = values.to(out.dtype)
    scatter_add(out._np, sparse._indices_t._host_array(), values._np)
    out._bump_version()
    return out


def scatter_add(array, indices, values):
    """array[index] += value for every entry (duplicates add up)."""
    if indices.shape[0] == 0:  # no sparse dims: every entry covers the whole array
        np.add.at(array[np.newaxis], np.zeros(values.shape[0], np.int64), values)
    else:
        np.add.at(array, tuple(indices), values)


# --- multiplication -----------------------------------------------------------------------------

def mul(input, other):
    """Sparse products: by a number or dense tensor (keeps the sparse operand's indices), or of
    two sparse tensors (their intersection)."""
    if _is_sparse(input) and _is_sparse(other):
        result = _mul_sparse_sparse(input, other)
    elif _is_sparse(input):
        result = _mul_sparse_dense(input, other)
    else:
        result = _mul_sparse_dense(other, input)
    return record("mul", (input, other), result, {})


def mul_(self, other):
    saved = prepare_inplace("mul", (self, other))
    product = mul(self.detach(), other.detach() if isinstance(other, Tensor) else other)
    check_output_cast(product.dtype, self.dtype)
    with no_grad():
        if product._indices_t is self._indices_t or not _is_sparse(other):
            self._values_t.copy_(product._values_t)  # same entries: write the values in place
            self._bump_version()
        else:
            self._replace(product._indices_t, product._values_t.to(self.dtype), self._shape,
                          product._coalesced)
    return record("mul", (self, other), self, {}, saved)


def _mul_sparse_dense(sparse, other):
    with no_grad():
        values = sparse._values_t.detach()
        if not isinstance(other, Tensor) or other.ndim == 0:
            product = values * (other.detach() if isinstance(other, Tensor) else other)
        else:
            shape = broadcast_shapes2(tuple(sparse._shape), tuple(other._shape))
            if tuple(shape) != tuple(sparse._shape):
                raise RuntimeError(f"mul: reftorch multiplies a sparse tensor of size "
                                   f"{list(sparse._shape)} only by dense tensors that broadcast "
                                   f"to that size, got {list(other._shape)}")
            product = values * Tensor._from_array(_gather(other, sparse), other.dtype)
    return make_sparse(sparse._indices_t.clone(), product, sparse._shape, sparse._coalesced)


def _gather(dense, sparse):
    """The dense tensor's blocks at the sparse tensor's indices, (nnz, *dense dims)."""
    full = np.broadcast_to(dense.detach()._host_array(), sparse._shape)
    indices = sparse._indices_t._host_array()
    if indices.shape[0] == 0:
        return np.repeat(full[np.newaxis], indices.shape[1], axis=0)
    return np.ascontiguousarray(full[tuple(indices)])


def _mul_sparse_sparse(x, y):
    """PyTorch's intersection: one operand (the coalesced one, else the one with more
    entries, else x) is coalesced and looked up at each entry of the other, the "probe"; the
    result has the probe's indices and flag, with 0 where the lookup finds nothing."""
    if x._shape != y._shape or x.sparse_dim() != y.sparse_dim():
        raise RuntimeError("sparse_binary_op_intersection_cpu(): expects sparse inputs with "
                           "equal dimensionality, number of sparse dimensions, and shape of "
                           "sparse dimensions")
    if x._coalesced:
        source = x
    elif y._coalesced:
        source = y
    else:
        source = x if x._nnz() >= y._nnz() else y
    probe = y if source is x else x
    source = source.detach().coalesce()
    dtype = result_dtype((x, y))
    sparse_dim = x.sparse_dim()
    sizes = x._shape[:sparse_dim]
    source_keys = sort_keys(source._indices_t._host_array(), sizes)
    probe_indices = probe._indices_t._host_array()
    probe_keys = sort_keys(probe_indices, sizes)
    position = np.searchsorted(source_keys, probe_keys)
    position = np.minimum(position, max(source_keys.size - 1, 0))
    found = source_keys[position] == probe_keys if source_keys.size else \
        np.zeros(probe_keys.size, bool)
    with no_grad():
        source_values = _dense_values(source, dtype)._np
        matched = np.zeros((probe_keys.size,) + source_values.shape[1:], source_values.dtype)
        matched[found] = source_values[position[found]]
        product = _dense_values(probe, dtype) * Tensor._from_array(matched, dtype)
    return _from_arrays(probe_indices, product._np, x._shape, x.device, probe._coalesced, dtype)


# --- division, negation, powers --------------------------------------------------------------------

def div(input, other, rounding_mode=None):
    if not _is_sparse(input):
        raise RuntimeError("div(dense, sparse) is not supported: a sparse divisor would divide "
                           "by its implicit zeros")
    if _is_sparse(other) or (isinstance(other, Tensor) and other.ndim > 0):
        raise RuntimeError(f"Sparse division requires a scalar or zero-dim dense tensor "
                           f"divisor (got shape {list(other.shape)} for divisor)")
    source = input.detach() if rounding_mode is None else input.detach().coalesce()
    divisor = other.detach() if isinstance(other, Tensor) else other
    with no_grad():
        values = _divide(source._values_t, divisor, rounding_mode)
    result = make_sparse(source._indices_t.clone(), values, input._shape,
                         source._coalesced)
    return record("div", (input, other), result, {"rounding_mode": rounding_mode})


def _divide(values, divisor, rounding_mode):
    import reftorch
    if rounding_mode is None:
        return reftorch.div(values, divisor)
    return reftorch.div(values, divisor, rounding_mode=rounding_mode)


def div_(self, other, rounding_mode=None):
    saved = prepare_inplace("div", (self, other))
    quotient = div(self.detach(), other.detach() if isinstance(other, Tensor) else other,
                   rounding_mode)
    check_output_cast(quotient.dtype, self.dtype)
    with no_grad():
        self._replace(quotient._indices_t, quotient._values_t.to(self.dtype), self._shape,
                      quotient._coalesced)
    return record("div", (self, other), self, {"rounding_mode": rounding_mode}, saved)


def floor_divide(input, other):
    import reftorch
    if not _is_sparse(input) or _is_sparse(other) or \
            (isinstance(other, Tensor) and other.ndim > 0):
        return div(input, other, "floor")  # the same checks and messages
    source = input.detach().coalesce()
    with no_grad():
        values = reftorch.floor_divide(source._values_t, other)
    return make_sparse(source._indices_t.clone(), values, input._shape, True)


def neg(input):
    P._check_neg(input.dtype, {}, (input,), False)
    with no_grad():
        values = -input._values_t.detach()
    result = make_sparse(input._indices_t.clone(), values, input._shape, input._coalesced)
    return record("neg", (input,), result, {})


def neg_(self):
    P._check_neg(self.dtype, {}, (self,), True)
    saved = prepare_inplace("neg", (self,))
    with no_grad():
        self._values_t.neg_()
    self._bump_version()
    return record("neg", (self,), self, {}, saved)


def pow(input, exponent):
    """A power by a nonzero number acts on the coalesced values only (PyTorch leaves the
    implicit zeros alone, even for negative exponents)."""
    if isinstance(exponent, Tensor) or not isinstance(exponent, (int, float, complex)):
        raise NotImplementedError("Could not run 'aten::pow.Tensor_Tensor' with arguments from "
                                  "the 'SparseCPU' backend: the exponent must be a number")
    if exponent == 0:
        raise RuntimeError("pow: cannot raise to zeroth power on sparse tensor; it would make "
                           "the result tensor dense")
    source = input.detach().coalesce()
    with no_grad():
        values = source._values_t ** exponent
    result = make_sparse(source._indices_t.clone(), values, input._shape, True)
    return record("pow", (input, exponent), result, {})
