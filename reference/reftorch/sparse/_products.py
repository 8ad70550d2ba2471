"""Matrix products with sparse COO operands.

  sparse @ dense -> dense     each entry (r, c, v) adds v * dense[c] to row r of the result
  dense @ sparse -> dense     the same, on the transposed problem
  sparse @ sparse -> sparse   every pair of entries (r, k, a), (k, c, b) gives (r, c, a * b),
                              then duplicates are summed (a coalesced result)
  hspmm(S, D) -> hybrid sparse: one entry per row of S that has entries, holding (S @ D)'s row
  smm / sspaddmm -> sparse: those rows again, one entry per (row, column)
The sums run over all entries with np.add.at (no loop over entries).
"""
from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..autograd.graph import record
from ._coo import SparseTensor, _from_arrays, coalesce_arrays


def _is_sparse(x):
    return isinstance(x, SparseTensor)


def _check_matrix(s, name):
    if s.sparse_dim() != 2 or s.dense_dim() != 0:
        raise RuntimeError(f"{name}: expected a 2-D sparse matrix (2 sparse, 0 dense "
                           f"dimensions), got {s.sparse_dim()} sparse and {s.dense_dim()} dense "
                           f"dimensions")


def _check_dense_matrix(d, rows_needed, name):
    if d.ndim != 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [-{max(d.ndim, 1)}"
                         f", {max(d.ndim, 1) - 1}], but got 1)")
    if d.shape[0] != rows_needed:
        raise RuntimeError(f"{name}: Argument #3 (dense): Expected dim 0 size {rows_needed}, "
                           f"got {d.shape[0]}")


def _check_same_dtype(sparse, dense):
    if sparse.dtype is not dense.dtype:
        raise RuntimeError(f"expected scalar type {sparse.dtype.scalar_name} but found "
                           f"{dense.dtype.scalar_name}")


def _sparse_dense_array(sparse, dense):
    """(S @ D) as a NumPy array; S (n, k) sparse, D (k, p) dense."""
    rows, cols = sparse._indices_t._host_array()
    values = sparse._values_t._host_array()
    dense_array = dense.detach()._host_array()
    out = np.zeros((sparse.shape[0], dense.shape[1]), np.result_type(values, dense_array))
    np.add.at(out, rows, values[:, np.newaxis] * dense_array[cols])
    return out


def _sparse_dense(sparse, dense, name="addmm"):
    _check_matrix(sparse, name)
    _check_dense_matrix(dense, sparse.shape[1], name)
    _check_same_dtype(sparse, dense)
    return Tensor._from_array(_sparse_dense_array(sparse, dense), sparse.dtype)


def _dense_sparse(dense, sparse):
    """D @ S = (S^T @ D^T)^T."""
    _check_matrix(sparse, "addmm")
    if dense.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if dense.shape[1] != sparse.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({dense.shape[0]}x"
                           f"{dense.shape[1]} and {sparse.shape[0]}x{sparse.shape[1]})")
    _check_same_dtype(sparse, dense)
    product = _sparse_dense_array(sparse.detach()._transposed(0, 1), dense.detach().t())
    return Tensor._from_array(np.ascontiguousarray(product.T), sparse.dtype)


def _sparse_sparse(a, b):
    """Sparse @ sparse: all pairs of entries that meet at the inner index, then coalesced."""
    _check_matrix(a, "mm")
    _check_matrix(b, "mm")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"mat1 dtype {a.dtype.scalar_name} does not match mat2 dtype "
                           f"{b.dtype.scalar_name}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x"
                           f"{a.shape[1]} and {b.shape[0]}x{b.shape[1]})")
    a_rows, a_cols = a._indices_t._host_array()
    b_indices = b._indices_t._host_array()
    order = np.argsort(b_indices[0], kind="stable")
    b_rows, b_cols = b_indices[:, order]
    b_values = b._values_t._host_array()[order]
    first = np.searchsorted(b_rows, a_cols, "left")
    count = np.searchsorted(b_rows, a_cols, "right") - first
    a_entry = np.repeat(np.arange(a_cols.size), count)      # one row per pair of entries
    offset = np.arange(a_entry.size) - np.repeat(np.cumsum(count) - count, count)
    b_entry = first[a_entry] + offset
    indices = np.stack([a_rows[a_entry], b_cols[b_entry]]).astype(np.int64)
    values = a._values_t._host_array()[a_entry] * b_values[b_entry]
    shape = (a.shape[0], b.shape[1])
    indices, values = coalesce_arrays(indices, values.astype(a.dtype.numpy_dtype), shape)
    return _from_arrays(indices, values, shape, a.device, True, a.dtype)


def mm(input, mat2):
    """`torch.mm` with a sparse operand (recorded as MmBackward0, as PyTorch does)."""
    if _is_sparse(input) and _is_sparse(mat2):
        result = _sparse_sparse(input, mat2)
    elif _is_sparse(input):
        result = _sparse_dense(input, mat2)
    else:
        result = _dense_sparse(input, mat2)
    return record("mm", (input, mat2), result, {})


def mv(input, vec):
    """Sparse matrix @ dense vector (through a one-column mm)."""
    if not _is_sparse(input) or _is_sparse(vec):
        raise RuntimeError("mv: reftorch supports a sparse matrix times a dense vector only")
    if vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, "
                           f"{vec.ndim}")
    with no_grad():
        result = _sparse_dense(input, vec.detach().unsqueeze(1)).squeeze(1)
    return record("mv", (input, vec), result, {})


def matmul(input, other):
    if input.ndim == 2 and other.ndim == 2:
        return mm(input, other)
    if input.ndim == 2 and other.ndim == 1:
        return mv(input, other)
    raise RuntimeError(f"matmul: reftorch supports sparse operands for 2-D @ 2-D and 2-D @ 1-D "
                       f"products, got {input.ndim}-D and {other.ndim}-D")


def sparse_mm(mat1, mat2):
    """`torch.sparse.mm`: like mm, but sparse @ dense records SparseAddmmBackward0, whose
    gradient for the sparse operand is sparse (on its indices), and sparse @ sparse records
    SparseSparseMatmulBackward0."""
    if _is_sparse(mat1) and _is_sparse(mat2):
        return record("_sparse_sparse_matmul", (mat1, mat2), _sparse_sparse(mat1, mat2), {})
    if _is_sparse(mat1):
        return _sparse_addmm(None, mat1, mat2, 0, 1)
    if _is_sparse(mat2):
        return sparse_mm(mat2.t(), mat1.t()).transpose(0, 1)
    from .. import mm as dense_mm
    return dense_mm(mat1, mat2)


def _sparse_addmm(input, mat1, mat2, beta, alpha):
    """beta * input + alpha * (mat1 @ mat2) for sparse mat1 and dense mat2 and input."""
    if _is_sparse(input):
        raise RuntimeError("addmm_sparse_dense: expected strided result tensor, got tensor "
                           "with layout Sparse")
    if _is_sparse(mat2):
        raise RuntimeError("addmm_sparse_dense: expected either 'mat1' to have sparse layout "
                           "and 'mat2' to have strided layout, got 'mat1' with layout Sparse "
                           "and 'mat2' with layout Sparse")
    product = _sparse_dense(mat1, mat2)
    with no_grad():
        result = product if alpha == 1 else product * alpha
        if input is not None:
            base = input.detach().expand(product.shape)
            result = result + (base if beta == 1 else base * beta)
    params = {"beta": beta, "alpha": alpha}
    return record("_sparse_addmm", (input, mat1, mat2), result, params)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """`torch.sparse.addmm`: beta * input + alpha * (mat1 @ mat2), mat1 sparse."""
    return _sparse_addmm(input, mat1, mat2, beta, alpha)


def dense_addmm(input, mat1, mat2, beta=1, alpha=1):
    """`torch.addmm` with a sparse mat1 (recorded as AddmmBackward0, as PyTorch does)."""
    if not _is_sparse(mat1):
        raise RuntimeError("addmm: reftorch supports a sparse operand only as mat1")
    with no_grad():
        result = _sparse_addmm(input, mat1, mat2, beta, alpha)
    return record("addmm", (input, mat1, mat2), result, {"beta": beta, "alpha": alpha})


# --- products with sparse results ---------------------------------------------------------------

def _row_products(sparse, dense, name):
    """The rows of S that hold entries (sorted) and those rows of S @ D."""
    if not _is_sparse(sparse):
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                  f"'CPU' backend: mat1 must be sparse")
    if _is_sparse(dense):
        raise RuntimeError(f"{name}: expected 'mat2' to have strided layout, got 'mat2' with "
                           f"layout Sparse")
    _check_matrix(sparse, name)
    _check_dense_matrix(dense, sparse.shape[1], name)
    _check_same_dtype(sparse, dense)
    rows = np.unique(sparse._indices_t._host_array()[0])
    return rows, _sparse_dense_array(sparse, dense)[rows]


def hspmm(mat1, mat2):
    """A hybrid sparse (1 sparse dim) result: the rows of mat1 @ mat2 where mat1 has entries."""
    if _is_sparse(mat1) and _is_sparse(mat2):
        raise RuntimeError("addmm_sparse_dense: expected strided result tensor, got tensor with "
                           "layout Sparse")
    rows, products = _row_products(mat1, mat2, "hspmm")
    result = _from_arrays(rows[np.newaxis], products, (mat1.shape[0], mat2.shape[1]),
                          mat1.device, dtype=mat1.dtype)
    return record("hspmm", (mat1, mat2), result, {})


def _row_entries(rows, products):
    """(indices, values) with one entry per (row, column) of the row products."""
    columns = products.shape[1]
    indices = np.stack([np.repeat(rows, columns), np.tile(np.arange(columns), rows.size)])
    return indices.astype(np.int64), products.reshape(-1)


def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2) as a sparse tensor: input's entries (scaled)
    followed by one entry per (row of mat1 with entries, column)."""
    if not _is_sparse(input):
        raise RuntimeError("sspaddmm: expected 'self' to be a sparse tensor")
    rows, products = _row_products(mat1, mat2, "sspaddmm")
    shape = (mat1.shape[0], mat2.shape[1])
    for dim in (0, 1):
        if input.ndim != 2 or input.shape[dim] != shape[dim]:
            raise RuntimeError(f"sspaddmm: Argument #1: Expected dim {dim} size {shape[dim]}, "
                               f"got {input.shape[dim] if input.ndim > dim else 0}")
    if input.dtype is not mat1.dtype:
        raise RuntimeError(f"dtype of values ({mat1.dtype.scalar_name}) must match dtype of "
                           f"sparse tensor ({input.dtype.scalar_name})")
    indices, values = _row_entries(rows, products)
    with no_grad():
        kept = input._values_t.detach()
        kept = kept if beta == 1 else kept * beta
        added = Tensor._from_array(np.ascontiguousarray(values), mat1.dtype)
        added = added if alpha == 1 else added * alpha
    all_indices = np.concatenate([input._indices_t._host_array(), indices], axis=1)
    all_values = np.concatenate([kept._np, added._np])
    result = _from_arrays(all_indices, all_values, shape, mat1.device, dtype=mat1.dtype)
    return record("sspaddmm", (input, mat1, mat2), result, {})


def smm(input, mat2):
    """sspaddmm with an empty input: mat1 @ mat2 as a sparse tensor."""
    from ._legacy import empty_sparse
    if not _is_sparse(input):
        raise NotImplementedError("Could not run 'aten::smm' with arguments from the 'CPU' "
                                  "backend: self must be sparse")
    with no_grad():
        empty = empty_sparse((input.shape[0], mat2.shape[-1]), input.dtype, input.device)
        result = sspaddmm(empty, input, mat2)
    return record("smm", (input, mat2), result, {})
