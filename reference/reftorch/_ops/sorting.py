"""Sorting, selection and comparison ops that are not elementwise.

sort / argsort / msort / topk / kthvalue order elements along one dim; searchsorted and
bucketize look values up in sorted boundaries; isin tests membership; isclose, allclose and
equal compare whole tensors.

PyTorch semantics that differ from NumPy's, and that the kernels below take care of:

* NaN is the largest value: last when sorting ascending, first when descending. A descending
  sort is stable too: equal elements keep their original order in both directions (NumPy's
  `argsort(-a)` would not work for unsigned or bool and would reverse ties).
* searchsorted is PyTorch's binary search, bit for bit: with NaN among the boundaries it
  answers what that search answers, not what NumPy's NaN-aware searchsorted would.
* indices are always int64 (int32 with `out_int32=True`), values keep the input's dtype.

Ties: our sort is always stable. PyTorch's topk and kthvalue do not document which of several
equal elements they pick (their CPU kernels use partial sorts); ours pick the first in the
original order, so values always agree with PyTorch and indices agree whenever there are no
ties.
"""
from __future__ import annotations

import builtins

import math

import numpy as np

from .. import _dtype as D
from .. import return_types
from .._promotion import result_dtype
from .._shape import wrap_dim
from .._tensor import Tensor
from . import structured

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "equal", "allclose", "isclose",
           "isin", "searchsorted", "bucketize"]

# out= variants print as torch.return_types.<name>_out in PyTorch.
for _name in ("sort_out", "topk_out", "kthvalue_out"):
    if not hasattr(return_types, _name):
        return_types._make(_name, ("values", "indices"))


# --- argument checks -----------------------------------------------------------------------

def _check_int(fn, name, value):
    """PyTorch's int arguments reject bool, float and None with a TypeError."""
    if isinstance(value, builtins.bool) or not isinstance(value, (builtins.int, np.integer)):
        raise TypeError(f"{fn}(): argument '{name}' must be int, not {type(value).__name__}")
    return builtins.int(value)


def _check_bool(fn, name, value, optional=False):
    if optional and value is None:
        return False
    if not isinstance(value, (builtins.bool, np.bool_)):
        raise TypeError(f"{fn}(): argument '{name}' must be bool, not {type(value).__name__}")
    return builtins.bool(value)


def _check_tensor(fn, name, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(value).__name__}")
    return value


def _check_out_dtypes(out, dtypes):
    """sort/topk/kthvalue write results only into outs of exactly the results' dtypes."""
    if out is None:
        return
    if not isinstance(out, (tuple, list)) or len(out) != len(dtypes):
        raise TypeError(f"out must be a tuple of {len(dtypes)} tensors")
    for o, dtype in zip(out, dtypes):
        _check_tensor("out", "out", o)
        if o.dtype != dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {dtype}, but got "
                               f"{o.dtype} instead")


def _size(t, dim):
    """The length of `dim`; a 0-dim tensor counts as one element along its only dim."""
    return t._shape[dim] if t.ndim else 1


def _named(name, result, out):
    return return_types.named(name + ("_out" if out is not None else ""), result)


# --- kernels -------------------------------------------------------------------------------

def _orderable(a):
    """`a` in a dtype NumPy orders with NaN last: half types widen exactly to float32."""
    if a.dtype.itemsize == 2 and a.dtype.kind not in "iu":
        return a.astype(np.float32)
    return a


def _stable_order(a, axis, descending):
    """Indices that sort `a` along `axis`; ties keep their original order either way."""
    key = _orderable(a)
    if not descending:
        return np.argsort(key, axis=axis, kind="stable")
    # Sort the reversed array ascending (ties end up in reversed order), then read that
    # order backwards: largest first, NaN first, and ties back in original order.
    n = a.shape[axis]
    reversed_order = np.argsort(np.flip(key, axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(reversed_order, axis)


def _as_1d(a):
    """Kernels work on at least one dim; a 0-dim tensor is a single element."""
    return a.reshape(1) if a.ndim == 0 else a


def sort_kernel(a, dim, descending, stable):
    """Sorted values and the int64 indices they came from, along `dim`."""
    work = _as_1d(a)
    indices = _stable_order(work, dim, descending).astype(np.int64)
    values = np.take_along_axis(work, indices, axis=dim)
    return values.reshape(a.shape), indices.reshape(a.shape)


def argsort_kernel(a, dim, descending, stable):
    return sort_kernel(a, dim, descending, stable)[1]


def topk_kernel(a, k, dim, largest, sorted):
    """The k largest (or smallest) elements along `dim`, in sorted order.

    With sorted=False PyTorch leaves the order unspecified; sorted order is one valid answer.
    """
    values, indices = sort_kernel(a, dim, descending=largest, stable=True)
    if a.ndim == 0:
        return values, indices
    keep = np.arange(k)
    return np.take(values, keep, axis=dim), np.take(indices, keep, axis=dim)


def kthvalue_kernel(a, k, dim, keepdim):
    """The k-th smallest element along `dim` (k counts from 1) and its index."""
    values, indices = sort_kernel(a, dim, descending=False, stable=True)
    if a.ndim == 0:
        return values, indices
    pick = np.array([k - 1])
    values, indices = np.take(values, pick, axis=dim), np.take(indices, pick, axis=dim)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return values, indices


def scatter_along_dim(grad, indices, dim, shape):
    """A zero tensor of `shape` with `grad` added at `indices` along `dim` (gather's adjoint).

    Derivative of selecting elements by index: each selected element receives its gradient.
    """
    out = np.zeros(shape, dtype=grad.dtype)
    if len(shape) == 0:
        return out + grad
    # Full coordinates of every element of `grad`, with the `dim` coordinate replaced.
    coords = list(np.ix_(*[np.arange(n) for n in indices.shape]))
    coords[dim] = indices
    np.add.at(out, tuple(coords), grad)
    return out


def gather_along_dim(grad, indices, dim):
    """`grad` read at `indices` along `dim` (scatter_along_dim's adjoint)."""
    if grad.ndim == 0:
        return grad.copy()
    return np.take_along_axis(grad, indices, axis=dim)


def isclose_kernel(a, b, rtol, atol, equal_nan):
    """|a - b| <= atol + rtol * |b|, elementwise, plus exact equality (infinities).

    Bool and integer inputs compute the tolerance test in the default float dtype, as
    PyTorch's `rtol * other` does; floats compute in their own dtype.
    """
    close = np.asarray(a == b)
    floating = a.dtype.kind in "fcV"   # "V": ml_dtypes' bfloat16
    if equal_nan and floating:
        close = close | (np.isnan(a) & np.isnan(b))
    if rtol == 0 and atol == 0:
        return close
    if a.dtype.kind in "biu":
        compute = D.get_default_dtype().numpy_dtype
        a, b = a.astype(compute), b.astype(compute)
    actual_error = np.abs(a - b)
    allowed_error = np.abs(rtol * b)
    allowed_error = (atol + allowed_error).astype(allowed_error.dtype)
    return close | (np.isfinite(actual_error) & (actual_error <= allowed_error))


def equal_kernel(a, b):
    """0-dim bool: same values (the shapes were already checked to agree). NaN != NaN."""
    return np.array(np.array_equal(_orderable(a), _orderable(b)))


def isin_kernel(elements, test_elements, compute, invert):
    """Membership of each element in `test_elements`, compared in the promoted dtype."""
    elements = np.asarray(elements).astype(compute)
    test_elements = np.asarray(test_elements).astype(compute)
    return np.isin(elements, test_elements, invert=invert)


def searchsorted_kernel(boundaries, values, sorter, compute, right, out_int32):
    """Insertion points of `values` in each innermost row of `boundaries`.

    1-D boundaries serve every value; N-D boundaries pair row by row with `values`.
    """
    boundaries = np.asarray(boundaries).astype(compute)
    values = np.asarray(values).astype(compute)
    n = boundaries.shape[-1]
    rows = boundaries.reshape(math.prod(boundaries.shape[:-1]), n)   # (n may be 0)
    if sorter is not None:  # searching through `sorter` is searching the sorted rows
        rows = np.take_along_axis(rows, sorter.reshape(-1, n), axis=1)
    queries = values.reshape(rows.shape[0], -1) if boundaries.ndim > 1 else values.reshape(1, -1)
    found = _binary_search(rows, queries, right)
    return found.reshape(values.shape).astype(np.int32 if out_int32 else np.int64)


def _binary_search(rows, queries, right):
    """PyTorch's lower/upper bound search, run for all queries at once (one step per halving).

    Lower bound moves right while not (boundary >= value); upper bound while not
    (boundary > value). Written with `not` so that NaN comparisons behave as in PyTorch.
    """
    n = rows.shape[1]
    start = np.zeros(queries.shape, dtype=np.int64)
    end = np.full(queries.shape, n, dtype=np.int64)
    row_of = np.arange(rows.shape[0])[:, None]
    while np.any(start < end):
        active = start < end
        mid = start + (end - start) // 2
        boundary = rows[row_of, np.minimum(mid, n - 1)]
        go_right = ~(boundary > queries) if right else ~(boundary >= queries)
        start = np.where(active & go_right, mid + 1, start)
        end = np.where(active & ~go_right, mid, end)
    return start


_ORDERED_NUMBERS = {d for d in D.ALL_DTYPES if not d.is_complex and d is not D.bool}

SORT = structured.declare("sort", sort_kernel, family="sorting",
                          params={"dim": -1, "descending": False, "stable": False},
                          layout="input")
ARGSORT = structured.declare("argsort", argsort_kernel, family="sorting",
                             params={"dim": -1, "descending": False, "stable": False},
                             layout="input")
TOPK = structured.declare("topk", topk_kernel, family="sorting",
                          params={"k": None, "dim": -1, "largest": True, "sorted": True})
KTHVALUE = structured.declare("kthvalue", kthvalue_kernel, family="sorting",
                              params={"k": None, "dim": -1, "keepdim": False})
SCATTER_ALONG_DIM = structured.declare("_scatter_along_dim", scatter_along_dim,
                                       family="autograd", params={"dim": 0, "shape": None})
GATHER_ALONG_DIM = structured.declare("_gather_along_dim", gather_along_dim,
                                      family="autograd", params={"dim": 0})
ISCLOSE = structured.declare("isclose", isclose_kernel, family="comparison",
                             params={"rtol": 1e-05, "atol": 1e-08, "equal_nan": False})
EQUAL = structured.declare("equal", equal_kernel, family="comparison")
ISIN = structured.declare("isin", isin_kernel, family="comparison",
                          params={"compute": None, "invert": False},
                          dtypes=_ORDERED_NUMBERS)
SEARCHSORTED = structured.declare("searchsorted", searchsorted_kernel, family="sorting",
                                  params={"compute": None, "right": False, "out_int32": False})
BUCKETIZE = structured.declare("bucketize", searchsorted_kernel, family="sorting",
                               params={"compute": None, "right": False, "out_int32": False})


def _scatter_along_dim(grad, indices, dim, shape):
    """Autograd helper: `grad` placed at `indices` along `dim` in zeros of `shape`."""
    return structured.run(SCATTER_ALONG_DIM, (grad, indices), {"dim": dim, "shape": tuple(shape)})


def _gather_along_dim(grad, indices, dim):
    """Autograd helper: `grad` read at `indices` along `dim`."""
    return structured.run(GATHER_ALONG_DIM, (grad, indices), {"dim": dim})


# --- sort, argsort, msort ------------------------------------------------------------------

_DEFAULTS = {"dim": -1, "descending": False}


def _sort_args(fn, input, args, kwargs, stable):
    """dim and descending, checked. PyTorch has two overloads: with stable= both must be
    given by keyword; without it they may also be positional."""
    _check_tensor(fn, "input", input)
    if len(args) > 2 or (args and stable is not None):
        raise TypeError(f"{fn}() received an invalid combination of arguments: dim and "
                        f"descending are keyword-only when stable= is given")
    given = dict(zip(("dim", "descending"), args))
    for name, value in kwargs.items():
        if name not in _DEFAULTS or name in given:
            raise TypeError(f"{fn}() got an unexpected or repeated argument '{name}'")
        given[name] = value
    given = {**_DEFAULTS, **given}
    dim = wrap_dim(_check_int(fn, "dim", given["dim"]), input.ndim)
    descending = _check_bool(fn, "descending", given["descending"])
    stable = _check_bool(fn, "stable", stable, optional=True)
    if input.dtype.is_complex:
        raise RuntimeError(" Sort does not support complex dtypes on CPU")
    return {"dim": dim, "descending": descending, "stable": stable}


def sort(input, *args, stable=None, out=None, **kwargs):
    """`sort(input, dim=-1, descending=False, *, stable=None, out=None)`.

    Sorted values along `dim` and their indices: `return_types.sort(values, indices)`.
    NaN sorts as the largest value; the sort is stable (ties keep their order).
    """
    params = _sort_args("sort", input, args, kwargs, stable)
    _check_out_dtypes(out, (input.dtype, D.int64))
    return _named("sort", structured.run(SORT, (input,), params, out=out), out)


def argsort(input, *args, stable=None, out=None, **kwargs):
    """`argsort(input, dim=-1, descending=False, *, stable=None, out=None)`.

    The int64 indices that sort `input` along `dim` (`sort(...).indices`).
    """
    if out is not None and stable is None:
        raise TypeError("argsort(): out= is only accepted together with stable=")
    params = _sort_args("argsort", input, args, kwargs, stable)
    if out is not None:
        _check_out_dtypes((out,), (D.int64,))
    return structured.run(ARGSORT, (input,), params, out=out)


def msort(input, *, out=None):
    """`input` sorted along its first dim (values only)."""
    values = sort(input, dim=0).values
    if out is not None:
        _check_out_dtypes((out,), (input.dtype,))
        return structured.write_out(out, values)
    return values


# --- topk, kthvalue ------------------------------------------------------------------------

def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """The `k` largest (or smallest, largest=False) elements along `dim`, with indices."""
    _check_tensor("topk", "input", input)
    k = _check_int("topk", "k", k)
    dim = wrap_dim(_check_int("topk", "dim", dim), input.ndim)
    largest = _check_bool("topk", "largest", largest)
    sorted = _check_bool("topk", "sorted", sorted)
    if not 0 <= k <= _size(input, dim):
        raise RuntimeError("selected index k out of range")
    if input.dtype.is_complex or input.dtype is D.bool:
        kind = "complex" if input.dtype.is_complex else "bool"
        raise RuntimeError(f"topk does not support {kind} dtypes on CPU")
    if out is not None and isinstance(out, (tuple, list)) and len(out) == 2 and \
            isinstance(out[0], Tensor) and out[0].dtype != input.dtype:
        raise RuntimeError("output values must be of same type as input")
    _check_out_dtypes(out, (input.dtype, D.int64))
    params = {"k": k, "dim": dim, "largest": largest, "sorted": sorted}
    return _named("topk", structured.run(TOPK, (input,), params, out=out), out)


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The k-th smallest element along `dim` (k counts from 1) and its index."""
    _check_tensor("kthvalue", "input", input)
    k = _check_int("kthvalue", "k", k)
    dim = wrap_dim(_check_int("kthvalue", "dim", dim), input.ndim)
    keepdim = _check_bool("kthvalue", "keepdim", keepdim)
    if input.ndim and input._shape[dim] == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {dim} to have non-zero size.")
    if not 1 <= k <= _size(input, dim):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    if input.ndim and (input.dtype.is_complex or input.dtype is D.bool):
        # (a 0-dim input is its own k-th value, whatever its dtype)
        raise NotImplementedError(f"\"kthvalue_cpu\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    _check_out_dtypes(out, (input.dtype, D.int64))
    params = {"k": k, "dim": dim, "keepdim": keepdim}
    return _named("kthvalue", structured.run(KTHVALUE, (input,), params, out=out), out)


# --- comparisons of whole tensors ----------------------------------------------------------

def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise `|input - other| <= atol + rtol * |other|` (bool tensor; broadcasts).

    Both tensors must have the same dtype. Equal infinities are close; NaN is close to NaN
    only with equal_nan=True.
    """
    _check_tensor("isclose", "input", input)
    _check_tensor("isclose", "other", other)
    if input.dtype != other.dtype:
        raise RuntimeError(f"{input.dtype.scalar_name} did not match {other.dtype.scalar_name}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    a, b = _broadcast_pair(input, other)
    return structured.run(ISCLOSE, (a, b), {"rtol": rtol, "atol": atol,
                                            "equal_nan": _check_bool("isclose", "equal_nan",
                                                                     equal_nan)})


def _broadcast_pair(a, b):
    from .._promotion import broadcast_shapes2
    shape = broadcast_shapes2(a._shape, b._shape)
    return a.expand(shape), b.expand(shape)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element of `input` is close to `other` (see `isclose`)."""
    close = isclose(input, other, rtol, atol, equal_nan)
    return builtins.bool(np.all(close._host_array()))


def equal(input, other):
    """True when both tensors have the same shape and the same values (any dtypes)."""
    _check_tensor("equal", "input", input)
    _check_tensor("equal", "other", other)
    if input._shape != other._shape:
        return False
    return builtins.bool(structured.run(EQUAL, (input, other)).item())


# --- isin, searchsorted, bucketize ---------------------------------------------------------

def _compute_dtype(fn, operands):
    """The promoted dtype both sides are compared in (half types widen exactly to float32)."""
    dtype = result_dtype(operands)
    if dtype.is_complex or dtype is D.bool:
        raise RuntimeError(f"Unsupported input type encountered for {fn}(): "
                           f"{dtype.scalar_name}")
    if dtype in (D.float16, D.bfloat16):
        return np.dtype(np.float32)
    return dtype.numpy_dtype


def isin(elements, test_elements, *, assume_unique=False, invert=False, out=None):
    """Bool tensor shaped like `elements`: whether each element occurs in `test_elements`.

    Either argument may be a Python number (not both). NaN is never found.
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): at least one of elements and test_elements must be a Tensor")
    for x in (elements, test_elements):
        if isinstance(x, Tensor) and (x.dtype.is_complex or x.dtype is D.bool):
            raise RuntimeError(f"Unsupported input type encountered for isin(): "
                               f"{x.dtype.scalar_name}")
        if not isinstance(x, (Tensor, builtins.int, builtins.float)) or \
                isinstance(x, builtins.bool):
            raise RuntimeError(f"Unsupported input type encountered for isin(): "
                               f"{type(x).__name__}")
    compute = _compute_dtype("isin", (elements, test_elements))
    if out is not None:
        _check_out_dtypes((out,), (D.bool,))
    key = next(x.dtype for x in (elements, test_elements) if isinstance(x, Tensor))
    return structured.run(ISIN, (elements, test_elements),
                          {"compute": compute, "invert": _check_bool("isin", "invert", invert)},
                          out=out, dtype=key)


def _check_side(right, side):
    if side is None:
        return _check_bool("searchsorted", "right", right)
    if side not in ("left", "right"):
        raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got "
                           f"{side}")
    if right and side == "left":
        raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                           "got side of left while right was True")
    return side == "right"


def _check_index_out(out, out_int32):
    if out is None:
        return
    _check_tensor("searchsorted", "out", out)
    if out.dtype != (D.int32 if out_int32 else D.int64):
        raise RuntimeError("torch.searchsorted(): output tensor's dtype is wrong, it can only "
                           "be Int(int32) or Long(int64) depending on whether out_int32 flag "
                           f"is True, but we got output tensor's dtype {out.dtype.scalar_name} "
                           f"and out_int32 flag is {out_int32}")


def _check_sorter(sorter, sorted_sequence):
    if sorter is None:
        return
    _check_tensor("searchsorted", "sorter", sorter)
    if sorter.dtype is not D.int64:
        raise RuntimeError(f"torch.searchsorted(): sorter must be a tensor of long dtype but "
                           f"got dtype {sorter.dtype.scalar_name}")
    if sorter._shape != sorted_sequence._shape:
        raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same size, "
                           f"but got boundary tensor {list(sorted_sequence._shape)}and got "
                           f"sorter tensor {list(sorter._shape)}")
    host = sorter._host_array()
    if host.size and (host.min() < 0 or host.max() >= sorted_sequence._shape[-1]):
        raise RuntimeError("torch.searchsorted(): sorter index out of range")


def _search_dtype(boundaries, values):
    """The dtype boundaries and values are compared in: their promoted dtype, which must be
    ordered (bool and complex are refused unless there is nothing to search)."""
    dtype = result_dtype((boundaries, values))
    has_values = not isinstance(values, Tensor) or values.numel() > 0
    if has_values and (dtype.is_complex or dtype is D.bool):
        raise NotImplementedError(f"\"searchsorted_out_cpu\" not implemented for "
                                  f"'{dtype.scalar_name}'")
    return dtype


def _search(op, boundaries, values, sorter, right, out_int32, out):
    dtype = _search_dtype(boundaries, values)
    _check_index_out(out, out_int32)
    compute = np.dtype(np.float32) if dtype in (D.float16, D.bfloat16) else dtype.numpy_dtype
    params = {"compute": compute, "right": right, "out_int32": out_int32}
    return structured.run(op, (boundaries, values, sorter), params, out=out, dtype=dtype)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                 out=None, sorter=None):
    """Where each of `values` would be inserted into the innermost dim of `sorted_sequence`.

    right=False (side="left") gives the first such index, right=True the last. N-D
    `sorted_sequence` searches row by row: its leading dims must equal those of `values`.
    `sorter` holds indices that sort an unsorted `sorted_sequence`.
    """
    _check_tensor("searchsorted", "sorted_sequence", sorted_sequence)
    right = _check_side(right, side)
    out_int32 = _check_bool("searchsorted", "out_int32", out_int32)
    if sorted_sequence.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if isinstance(values, Tensor) and sorted_sequence.ndim > 1 and (
            values.ndim != sorted_sequence.ndim
            or values._shape[:-1] != sorted_sequence._shape[:-1]):
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           f"the first N-1 dimensions of boundaries tensor and input value "
                           f"tensor must match, but we got boundaries tensor "
                           f"{list(sorted_sequence._shape)} and input value tensor "
                           f"{list(values._shape)}")
    _check_sorter(sorter, sorted_sequence)
    return _search(SEARCHSORTED, sorted_sequence, values, sorter, right, out_int32, out)


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each element of `input` among 1-D sorted `boundaries`.

    right=False: boundaries[i-1] < x <= boundaries[i]; right=True: boundaries[i-1] <= x <
    boundaries[i] (the same search as `searchsorted`, arguments swapped).
    """
    _check_tensor("bucketize", "boundaries", boundaries)
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim"
                           f"({boundaries.ndim})")
    right = _check_bool("bucketize", "right", right)
    out_int32 = _check_bool("bucketize", "out_int32", out_int32)
    return _search(BUCKETIZE, boundaries, input, None, right, out_int32, out)


# --- Tensor methods ------------------------------------------------------------------------

def _no_out(fn, kwargs):
    if "out" in kwargs:
        raise TypeError(f"{fn}() got an unexpected keyword argument 'out'")
    return kwargs


def _sort_method(self, *args, stable=None, **kwargs):
    return sort(self, *args, stable=stable, **_no_out("sort", kwargs))


def _argsort_method(self, *args, stable=None, **kwargs):
    return argsort(self, *args, stable=stable, **_no_out("argsort", kwargs))


def _topk_method(self, k, dim=-1, largest=True, sorted=True):
    return topk(self, k, dim, largest, sorted)


def _kthvalue_method(self, k, dim=-1, keepdim=False):
    return kthvalue(self, k, dim, keepdim)


def _isclose_method(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return isclose(self, other, rtol, atol, equal_nan)


def _allclose_method(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return allclose(self, other, rtol, atol, equal_nan)


def _msort_method(self):
    return msort(self)


def _equal_method(self, other):
    return equal(self, other)


for _method in (_sort_method, _argsort_method, _msort_method, _topk_method, _kthvalue_method,
                _isclose_method, _allclose_method, _equal_method):
    _method.__name__ = _method.__name__[1:-len("_method")]
    _method.__qualname__ = f"Tensor.{_method.__name__}"
    _method.__doc__ = f"See `reftorch.{_method.__name__}`."
    setattr(Tensor, _method.__name__, _method)
