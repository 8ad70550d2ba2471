"""Indexing, slicing, joining and mutating ops: cat/stack/split, gather/scatter, index_*,
masked_*, take/put, nonzero, repeat, the *_scatter ops and the Tensor.new_* factories.

Every op that computes new values is a structured op (see structured.py) whose reference is a
NumPy function; the ops that only re-slice (split, chunk, unbind, tensor_split, movedim) are
compositions of views, so their results share memory and autograd flows through the views.
In-place forms (`scatter_`, `index_add_`, ...) run the out-of-place kernel, write the result
into `self`, and record the same derivative row with `self` as the output (as PyTorch does).
"""
from __future__ import annotations

import builtins
import numbers
import operator
import warnings

import numpy as np

from .. import _dtype as D
from .._promotion import broadcast_shapes, check_output_cast, check_scalar_fits, promote_types
from .._shape import common_format, format_strides, wrap_dim
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..autograd.graph import record
from . import structured
from .copy import laid_out
from .inplace_meta import resize_output

__all__ = ["cat", "concat", "concatenate", "stack", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "chunk", "split", "tensor_split", "hsplit", "vsplit", "dsplit",
           "unbind", "gather", "scatter", "scatter_add", "scatter_reduce", "index_select",
           "index_add", "index_copy", "index_fill", "index_put", "masked_select",
           "masked_fill", "masked_scatter", "take", "take_along_dim", "put", "nonzero",
           "argwhere", "movedim", "moveaxis", "tile", "repeat_interleave", "narrow_copy",
           "select_scatter", "slice_scatter", "diagonal_scatter"]


# --- shared checks ----------------------------------------------------------------------------

def _check_tensor(x, fn, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(x).__name__}")


def _check_index_dtype(index, fn, allow_int32=False):
    allowed = (D.int64, D.int32) if allow_int32 else (D.int64,)
    if index.dtype not in allowed:
        wanted = "int32 or int64" if allow_int32 else "int64"
        raise RuntimeError(f"{fn}(): Expected dtype {wanted} for index")


def _bounds(index, size, dim, negative_ok=False, error=RuntimeError):
    """Raise `error` naming the first index outside [0, size) (or [-size, size))."""
    low = -size if negative_ok else 0
    bad = (index < low) | (index >= size)
    if bad.any():
        raise error(f"index {int(index[bad].flat[0])} is out of bounds for dimension {dim} "
                    f"with size {size}")


def _same_dtype(self, other, fn, what="source"):
    if self.dtype is not other.dtype:
        raise RuntimeError(f"{fn}(): self ({self.dtype.scalar_name}) and {what} "
                           f"({other.dtype.scalar_name}) must have the same scalar type")


def _zeros(shape, like):
    from .creation import zeros
    return zeros(shape, dtype=like.dtype, device=like.device)


# --- cat and stack ---------------------------------------------------------------------------

def _cat_kernel(*arrays, dim, dtype):
    # PyTorch's legacy rule: 1-D empty tensors are skipped whatever the other shapes are.
    kept = [a for a in arrays if a.shape != (0,)] or [arrays[0]]
    return np.concatenate([a.astype(dtype.numpy_dtype, copy=False) for a in kept], axis=dim)


CAT = structured.declare("cat", _cat_kernel, family="joining", params={"dim": 0, "dtype": None},
                         layout="suggested")


def _tensor_list(tensors, fn):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {type(tensors).__name__}")
    for t in tensors:
        _check_tensor(t, fn, "tensors")
    return list(tensors)


def _common_dtype(tensors):
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = promote_types(dtype, t.dtype)
    return dtype


def cat(tensors, dim=0, *, out=None):
    """Join tensors along an existing dim; dtypes promote; 1-D empty tensors are skipped."""
    tensors = _tensor_list(tensors, "cat")
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    kept = [(i, t) for i, t in enumerate(tensors) if t._shape != (0,)]
    for i, t in kept:
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               f"concatenated")
    if kept:
        first_i, first = kept[0]
        dim = wrap_dim(dim, first.ndim)
        for i, t in kept[1:]:
            if t.ndim != first.ndim:
                raise RuntimeError(f"Tensors must have same number of dimensions: got "
                                   f"{first.ndim} and {t.ndim}")
            for d in range(first.ndim):
                if d != dim and t._shape[d] != first._shape[d]:
                    raise RuntimeError(
                        f"Sizes of tensors must match except in dimension {dim}. Expected "
                        f"size {first._shape[d]} but got size {t._shape[d]} for tensor number "
                        f"{i} in the list.")
    else:
        dim = wrap_dim(dim, 1)
    dtype = _common_dtype(tensors)
    if out is not None:
        check_output_cast(dtype, out.dtype)
    return structured.run(CAT, tuple(tensors), {"dim": dim, "dtype": dtype}, out=out,
                          dtype=dtype)


concat = concatenate = cat


def _stack_kernel(*arrays, dim, dtype):
    return np.stack([a.astype(dtype.numpy_dtype, copy=False) for a in arrays], axis=dim)


def _stack_layout(tensors, params):
    """The strides of PyTorch's stack: below the last dim it concatenates the tensors along
    `dim` (cat's memory format) and splits that dim into (count, size) by a view; at the
    new last dim it concatenates them unsqueezed there. Empty results are contiguous."""
    first, dim, count = tensors[0], params["dim"], len(tensors)
    shape = first._shape
    if 0 in shape:
        return "contiguous"
    if dim == len(shape):
        chosen = common_format((t._shape + (1,), t._strides + (1,)) for t in tensors)
        return format_strides(shape + (count,), chosen)
    chosen = common_format((t._shape, t._strides) for t in tensors)
    joined = format_strides(shape[:dim] + (count * shape[dim],) + shape[dim + 1:], chosen)
    return joined[:dim] + (shape[dim] * joined[dim], joined[dim]) + joined[dim + 1:]


STACK = structured.declare("stack", _stack_kernel, family="joining",
                           params={"dim": 0, "dtype": None}, layout=_stack_layout)


def stack(tensors, dim=0, *, out=None):
    """Join equally shaped tensors along a new dim."""
    tensors = _tensor_list(tensors, "stack")
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors[1:], 1):
        if t._shape != tensors[0]._shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(tensors[0]._shape)} at entry 0 and {list(t._shape)} "
                               f"at entry {i}")
    dim = wrap_dim(dim, tensors[0].ndim + 1)
    dtype = _common_dtype(tensors)
    if out is not None:
        check_output_cast(dtype, out.dtype)
    return structured.run(STACK, tuple(tensors), {"dim": dim, "dtype": dtype}, out=out,
                          dtype=dtype)


def _at_least(t, ndim):
    """atleast_1d/2d/3d as views: 0-d -> (1,)*, 1-d (n) -> (1, n) / (1, n, 1), 2-d -> (m, n, 1)."""
    if t.ndim >= ndim:
        return t
    if t.ndim == 0:
        return t.reshape((1,) * ndim)
    if t.ndim == 1:
        return t.unsqueeze(0) if ndim == 2 else t.unsqueeze(0).unsqueeze(-1)
    return t.unsqueeze(-1)


def hstack(tensors, *, out=None):
    tensors = [_at_least(t, 1) for t in _tensor_list(tensors, "hstack")]
    dim = 0 if tensors and tensors[0].ndim == 1 else 1
    return cat(tensors, dim, out=out)


def vstack(tensors, *, out=None):
    return cat([_at_least(t, 2) for t in _tensor_list(tensors, "vstack")], 0, out=out)


row_stack = vstack


def dstack(tensors, *, out=None):
    return cat([_at_least(t, 3) for t in _tensor_list(tensors, "dstack")], 2, out=out)


def column_stack(tensors, *, out=None):
    tensors = _tensor_list(tensors, "column_stack")
    return cat([t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in tensors], 1, out=out)


# --- splitting (views) -----------------------------------------------------------------------

def _slice_along(t, dim, start, stop):
    return t[(slice(None),) * dim + (slice(start, stop),)]


def split(tensor, split_size_or_sections, dim=0):
    """Pieces of `split_size` along dim (the last may be smaller), or of the listed sizes."""
    dim = wrap_dim(dim, tensor.ndim)
    if tensor.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    size = tensor._shape[dim]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [operator.index(s) for s in split_size_or_sections]
        if builtins.sum(sizes) != size or any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                               f"(input tensor's size at dimension {dim}), but got "
                               f"split_sizes={sizes}")
    else:
        step = operator.index(split_size_or_sections)
        if step < 0 or (step == 0 and size != 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {size}")
        return _pieces(tensor, dim, split_sizes(size, step), "split", {"split_size": step})
    return _pieces(tensor, dim, sizes, "split_with_sizes", {"split_sizes": tuple(sizes)})


def split_sizes(size, step):
    """The sizes of split's pieces of a dim of `size`: `step` each, the last one smaller
    (one empty piece for an empty dim)."""
    count = builtins.max(-(-size // step), 1) if step else 1
    return [builtins.min(step, size - i * step) for i in range(count)]


def _pieces(tensor, dim, sizes, op, params, keep_dim=True):
    """Views of consecutive pieces of `sizes` along dim (each piece's dim dropped when not
    `keep_dim`: unbind), recorded as ONE op with an output per piece, as PyTorch records
    split, split_with_sizes and unbind. Its backward joins the pieces' gradients once,
    where a node per piece would make a gradient of the whole tensor for each piece (an
    LSTM takes a piece of its input gates per time step)."""
    pieces, start = [], 0
    with no_grad():
        for s in sizes:
            pieces.append(tensor.narrow(dim, start, s) if keep_dim else tensor.select(dim, start))
            start += s
    if not pieces:
        return ()
    return record(op, (tensor,), tuple(pieces), dict(params, dim=dim, self_shape=tensor._shape))


def chunk(input, chunks, dim=0):
    """At most `chunks` pieces of equal size ceil(n / chunks) along dim."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    dim = wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    size = input._shape[dim]
    step = -(-size // chunks)
    if step == 0:  # an empty dim splits into `chunks` empty pieces
        return tuple(input.narrow(dim, 0, 0) for _ in range(chunks))
    return split(input, step, dim)


def tensor_split(input, indices_or_sections, dim=0):
    """Split into n nearly equal sections, or at the given indices (as Python slices)."""
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    dim = wrap_dim(dim, input.ndim)
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype is not D.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have "
                               f"dtype of long, but got {spec.dtype.scalar_name}")
        if spec.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a "
                               f"zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {spec.ndim} dims")
        spec = spec.item() if spec.ndim == 0 else spec.tolist()
    size = input._shape[dim]
    if isinstance(spec, (list, tuple)):
        bounds = [operator.index(i) for i in spec]
        starts, stops = [0] + bounds, bounds + [size]
        return tuple(_slice_along(input, dim, a, b) for a, b in zip(starts, stops))
    sections = operator.index(spec)
    if sections <= 0:
        raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
    base, extra = divmod(size, sections)
    pieces, start = [], 0
    for i in range(sections):
        length = base + (1 if i < extra else 0)
        pieces.append(input.narrow(dim, start, length))
        start += length
    return tuple(pieces)


def _split_helper(name, min_dims, dim_of):
    def fn(input, indices_or_sections):
        if input.ndim < min_dims:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} "
                               f"dimension{'s' if min_dims > 1 else ''}, but got a tensor with "
                               f"{input.ndim} dimensions!")
        dim = dim_of(input)
        if isinstance(indices_or_sections, numbers.Integral):
            sections = operator.index(indices_or_sections)
            if sections == 0 or input._shape[dim] % sections:
                raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, "
                                   f"but the size of the dimension {input._shape[dim]} is not "
                                   f"divisible by the split_size {sections}!")
        return tensor_split(input, indices_or_sections, dim)
    fn.__name__ = name
    return fn


hsplit = _split_helper("hsplit", 1, lambda t: 1 if t.ndim > 1 else 0)
vsplit = _split_helper("vsplit", 2, lambda t: 0)
dsplit = _split_helper("dsplit", 3, lambda t: 2)


def unbind(input, dim=0):
    """All slices along dim, as views."""
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    dim = wrap_dim(dim, input.ndim)
    return _pieces(input, dim, [1] * input._shape[dim], "unbind", {}, keep_dim=False)


def movedim(input, source, destination):
    """Move dims `source` to positions `destination`; the others keep their order."""
    src = [source] if isinstance(source, numbers.Integral) else list(source)
    dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    n = input.ndim
    src = [wrap_dim(d, n) for d in src]
    dst = [wrap_dim(d, n) for d in dst]
    for name, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({dims})")
    if n == 0:
        return input.view(())
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return input.permute(order)


moveaxis = movedim


# --- gather and scatter ----------------------------------------------------------------------

def _coords(index_shape, dim, index):
    """Full coordinates of every element addressed by a gather/scatter index."""
    grids = list(np.indices(index_shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


def _index_bounds(a, index, dim):
    """gather/scatter: every index value in [0, a.shape[dim]) (a 0-dim a has size 1)."""
    if index.size:
        _bounds(index, a.shape[dim] if a.ndim else 1, dim)


def _gather_kernel(a, index, dim):
    _index_bounds(a, index, dim)
    a1, i1 = np.atleast_1d(a), np.atleast_1d(index)
    result = a1[_coords(i1.shape, dim, i1)]
    return result.reshape(index.shape)


GATHER = structured.declare("gather", _gather_kernel, family="indexing", params={"dim": 0})


def _check_gather_shapes(fn, self, dim, index, src=None):
    if index.ndim != self.ndim and not (index.numel() == 0 or
                                        builtins.max(index.ndim, self.ndim) <= 1):
        raise RuntimeError(f"Index tensor must have the same number of dimensions as "
                           f"{'self' if src is None else 'input'} tensor")
    if index.numel() == 0:
        return
    for d in range(index.ndim):
        if d != dim and index._shape[d] > (self._shape[d] if self.ndim else 1):
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(index._shape)} to be no larger than self "
                               f"{list(self._shape)} apart from dimension {dim}")
        if src is not None and src.ndim and index._shape[d] > src._shape[d]:
            raise RuntimeError(f"Expected index {list(index._shape)} to be no larger than "
                               f"self {list(self._shape)} apart from dimension {dim} and to be "
                               f"no larger size than src {list(src._shape)}")
    # The indices' values are checked by whichever kernel runs (_index_bounds below for the
    # reference's; a plugin's checks its own): a second pass over them here cost as much as
    # a plugin's whole gather.


def gather(input, dim, index, *, sparse_grad=False, out=None):
    """out[i][j] = input[index[i][j]][j] (dim 0): values picked along dim by `index`."""
    _check_tensor(index, "gather", "index")
    dim = wrap_dim(dim, input.ndim)
    _check_index_dtype(index, "gather")
    _check_gather_shapes("gather", input, dim, index)
    return structured.run(GATHER, (input, index), {"dim": dim}, out=out, dtype=input.dtype)


def _scatter_kernel(a, index, src, dim, reduce=None):
    _index_bounds(a, index, dim)
    out = np.atleast_1d(a.copy())
    i1 = np.atleast_1d(index)
    if i1.size == 0:
        return out.reshape(a.shape)
    where = _coords(i1.shape, dim, i1)
    if isinstance(src, np.ndarray) and src.ndim:
        values = src[tuple(slice(0, n) for n in i1.shape)]
    else:
        values = np.asarray(src).astype(a.dtype)
    if reduce is None:
        out[where] = values
    elif reduce == "add" or reduce == "sum":
        np.add.at(out, where, values)
    else:
        np.multiply.at(out, where, values)
    return out.reshape(a.shape)


SCATTER = structured.declare("scatter", _scatter_kernel, family="indexing",
                             params={"dim": 0, "reduce": None})
SCATTER_VALUE = structured.declare("scatter_value", _scatter_kernel, family="indexing",
                                   params={"dim": 0, "reduce": None})
SCATTER_REDUCE_TWO = structured.declare("scatter_reduce_two_", _scatter_kernel,
                                        family="indexing", params={"dim": 0, "reduce": None})
SCATTER_ADD = structured.declare("scatter_add", lambda a, index, src, dim: _scatter_kernel(
    a, index, src, dim, "add"), family="indexing", params={"dim": 0})


def _scatter_args(fn, self, dim, index, src, value, reduce):
    _check_tensor(index, fn, "index")
    dim = wrap_dim(dim, self.ndim)
    _check_index_dtype(index, fn)
    if src is None:
        src = value
    if isinstance(src, Tensor):
        _same_dtype(self, src, fn, "src")
        _check_gather_shapes(fn, self, dim, index, src)
    else:
        _check_gather_shapes(fn, self, dim, index)
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if reduce is None:
        op = SCATTER if isinstance(src, Tensor) else SCATTER_VALUE
    else:
        op = SCATTER_REDUCE_TWO
        if isinstance(src, Tensor):
            warnings.warn("The reduce argument of torch.scatter with Tensor src is deprecated "
                          "and will be removed in a future PyTorch release. Use "
                          "torch.scatter_reduce instead for more reduction options.",
                          UserWarning, stacklevel=3)
    return op, dim, src


def scatter(input, dim, index, src=None, value=None, *, reduce=None, out=None):
    """A copy of input with src (or value) written at the positions `index` names along dim."""
    op, dim, src = _scatter_args("scatter", input, dim, index, src, value, reduce)
    params = {"dim": dim, "reduce": reduce}
    return structured.run(op, (input, index, src), params, out=out, dtype=input.dtype)


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    op, dim, src = _scatter_args("scatter_", self, dim, index, src, value, reduce)
    return structured.run_inplace(op, (self, index, src), {"dim": dim, "reduce": reduce})


def _scatter_add_args(fn, self, dim, index, src):
    _check_tensor(index, fn, "index")
    _check_tensor(src, fn, "src")
    dim = wrap_dim(dim, self.ndim)
    _check_index_dtype(index, fn)
    _same_dtype(self, src, fn, "src")
    _check_gather_shapes(fn, self, dim, index, src)
    return dim


def scatter_add(input, dim, index, src, *, out=None):
    """A copy of input with src added at the positions `index` names (repeats accumulate)."""
    dim = _scatter_add_args("scatter_add", input, dim, index, src)
    return structured.run(SCATTER_ADD, (input, index, src), {"dim": dim}, out=out,
                          dtype=input.dtype)


def scatter_add_(self, dim, index, src):
    dim = _scatter_add_args("scatter_add_", self, dim, index, src)
    return structured.run_inplace(SCATTER_ADD, (self, index, src), {"dim": dim})


_REDUCE_UFUNCS = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.fmax,
                  "amin": np.fmin}


def _is_integer(dtype):
    return dtype.kind in "biu"  # bfloat16 is kind 'V' in NumPy: a floating type here


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if not _is_integer(dtype):
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_kernel(a, index, src, dim, reduce, include_self=True):
    _index_bounds(a, index, dim)
    out = np.atleast_1d(a.copy())
    i1 = np.atleast_1d(index)
    where = _coords(i1.shape, dim, i1)
    values = np.atleast_1d(src)[tuple(slice(0, n) for n in i1.shape)]
    if not include_self:
        out[where] = _identity(reduce, a.dtype)
    ufunc = _REDUCE_UFUNCS[reduce]
    if reduce in ("amax", "amin"):
        # NaN wins in PyTorch's amax/amin: fmax ignores NaN, so put NaNs back afterwards.
        ufunc.at(out, where, values)
        if not _is_integer(out.dtype):
            nan_hit = np.zeros(out.shape, bool)
            np.logical_or.at(nan_hit, where, np.isnan(values))
            out[nan_hit | np.isnan(np.atleast_1d(a)) & include_self] = np.nan
    else:
        ufunc.at(out, where, values)
    if reduce == "mean":
        count = np.full(out.shape, 1 if include_self else 0, dtype=np.int64)
        np.add.at(count, where, 1)
        count = np.maximum(count, 1)
        if not _is_integer(out.dtype):
            out = out / count
        else:
            out = np.floor_divide(out, count)
    return out.astype(a.dtype).reshape(a.shape)


SCATTER_REDUCE = structured.declare("scatter_reduce", _scatter_reduce_kernel,
                                    family="indexing",
                                    params={"dim": 0, "reduce": None, "include_self": True})


def _scatter_reduce_args(fn, self, dim, index, src, reduce):
    dim = _scatter_add_args(fn, self, dim, index, src)
    if reduce not in _REDUCE_UFUNCS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    return dim


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    """Reduce src into a copy of input at the positions `index` names (sum, prod, mean, amax,
    amin); include_self=False leaves input's own value out of the reduction."""
    dim = _scatter_reduce_args("scatter_reduce", input, dim, index, src, reduce)
    params = {"dim": dim, "reduce": reduce, "include_self": bool(include_self)}
    return structured.run(SCATTER_REDUCE, (input, index, src), params, out=out,
                          dtype=input.dtype)


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    dim = _scatter_reduce_args("scatter_reduce_", self, dim, index, src, reduce)
    params = {"dim": dim, "reduce": reduce, "include_self": bool(include_self)}
    return structured.run_inplace(SCATTER_REDUCE, (self, index, src), params)


# --- index_select / index_add / index_copy / index_fill -------------------------------------

def _along(dim, index, ndim):
    return (slice(None),) * dim + (index,) + (slice(None),) * (ndim - dim - 1)


def _index_select_kernel(a, index, dim):
    size = a.shape[dim] if a.ndim else 1
    positions = np.atleast_1d(index)
    if ((positions < 0) | (positions >= size)).any():
        raise IndexError("index out of range in self")
    a1 = np.atleast_1d(a)
    result = np.take(a1, positions, axis=dim)
    return result.reshape(()) if a.ndim == 0 else result


INDEX_SELECT = structured.declare("index_select", _index_select_kernel, family="indexing",
                                  params={"dim": 0})


def _check_vector_index(fn, self, dim, index, name="index_select"):
    _check_tensor(index, fn, "index")
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    _check_index_dtype(index, name, allow_int32=True)
    # The values are checked by the kernel that runs (the reference's; a plugin's checks its
    # own: on a GPU asynchronously, so reading them here would wait for the device).


def index_select(input, dim, index, *, out=None):
    """The slices of input along dim at the positions in the 1-D `index`."""
    dim = wrap_dim(dim, input.ndim)
    _check_vector_index("index_select", input, dim, index)
    return structured.run(INDEX_SELECT, (input, index), {"dim": dim}, out=out,
                          dtype=input.dtype)


def _index_write_kernel(a, index, source, dim, mode, alpha=1):
    # index_add reports a bad index as a RuntimeError, index_copy and index_fill (which also
    # take negative ones) as an IndexError
    size = a.shape[dim] if a.ndim else 1
    if mode == "add":
        _bounds(index, size, dim)
    else:
        _bounds(index, size, dim, negative_ok=True, error=IndexError)
    out = np.atleast_1d(a.copy())
    where = _along(dim, np.atleast_1d(index), out.ndim)
    src = np.asarray(source)
    if src.ndim == 0 and out.ndim and mode != "fill":
        src = src.reshape((1,) * out.ndim)
    if mode == "add":
        # alpha in the element type, and the product rounded to it, before the sum (PyTorch's
        # bfloat16 index_add too; NumPy's weak Python numbers do this for its own types only)
        np.add.at(out, where, src * np.asarray(alpha).astype(src.dtype) if alpha != 1 else src)
    else:
        out[where] = src
    return out.reshape(a.shape)


INDEX_ADD = structured.declare("index_add", lambda a, index, source, dim, alpha=1:
                               _index_write_kernel(a, index, source, dim, "add", alpha),
                               family="indexing", params={"dim": 0, "alpha": 1})
INDEX_COPY = structured.declare("index_copy", lambda a, index, source, dim:
                                _index_write_kernel(a, index, source, dim, "copy"),
                                family="indexing", params={"dim": 0})
INDEX_FILL = structured.declare("index_fill", lambda a, index, value, dim:
                                _index_write_kernel(a, index, value, dim, "fill"),
                                family="indexing", params={"dim": 0})


def _index_source_args(fn, self, dim, index, source):
    dim = wrap_dim(dim, self.ndim)
    _check_vector_index(fn, self, dim, index, fn)
    _check_tensor(source, fn, "source")
    _same_dtype(self, source, fn)
    expected = list(self._shape)
    if expected:
        expected[dim] = index.numel()
    if list(source._shape) != expected and not (source.numel() == index.numel() and
                                               builtins.max(self.ndim, source.ndim) <= 1):
        raise RuntimeError(f"{fn}(): Source/destination tensor must have same slice shapes. "
                           f"Destination slice shape: {list(self._shape)} at dimension {dim} "
                           f"and source slice shape: {list(source._shape)} at dimension 0.")
    return dim


def index_add(input, dim, index, source, *, alpha=1, out=None):
    """A copy of input with alpha * source added to the slices at `index` (repeats add up)."""
    dim = _index_source_args("index_add", input, dim, index, source)
    return structured.run(INDEX_ADD, (input, index, source), {"dim": dim, "alpha": alpha},
                          out=out, dtype=input.dtype)


def index_add_(self, dim, index, source, *, alpha=1):
    dim = _index_source_args("index_add_", self, dim, index, source)
    return structured.run_inplace(INDEX_ADD, (self, index, source), {"dim": dim, "alpha": alpha})


def index_copy(input, dim, index, source, *, out=None):
    """A copy of input whose slices at `index` along dim are replaced by source's."""
    dim = _index_source_args("index_copy", input, dim, index, source)
    return structured.run(INDEX_COPY, (input, index, source), {"dim": dim}, out=out,
                          dtype=input.dtype)


def index_copy_(self, dim, index, source):
    dim = _index_source_args("index_copy_", self, dim, index, source)
    return structured.run_inplace(INDEX_COPY, (self, index, source), {"dim": dim})


def _index_fill_args(fn, self, dim, index, value):
    dim = wrap_dim(dim, self.ndim)
    _check_vector_index(fn, self, dim, index, fn)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
    elif not isinstance(value, numbers.Number):
        raise TypeError(f"{fn}(): argument 'value' must be Number, not "
                        f"{type(value).__name__}")
    number = value.item() if isinstance(value, Tensor) else value
    if isinstance(number, complex) and not self.is_complex():
        raise RuntimeError("index_fill_(): Converting complex Scalar to non-complex type is not "
                           "supported")
    check_scalar_fits(number, self.dtype)
    return dim


def index_fill(input, dim, index, value):
    """A copy of input whose slices at `index` along dim are set to `value`."""
    dim = _index_fill_args("index_fill", input, dim, index, value)
    return structured.run(INDEX_FILL, (input, index, value), {"dim": dim}, dtype=input.dtype)


def index_fill_(self, dim, index, value):
    dim = _index_fill_args("index_fill_", self, dim, index, value)
    return structured.run_inplace(INDEX_FILL, (self, index, value), {"dim": dim})


# --- advanced indexing as ops: index and index_put --------------------------------------------
# `indices` is one entry per leading dim of self: an int64 NumPy-ready tensor or None (that
# dim is taken whole). NumPy's rule for where the indexed dims go is PyTorch's.

def _numpy_indices(indices):
    return tuple(slice(None) if i is None else i._host_array() for i in indices)


def _index_kernel(a, indices):
    return np.ascontiguousarray(a[_numpy_indices(indices)])


INDEX = structured.declare("index", _index_kernel, family="indexing", params={"indices": ()})


def _strip_leading_ones(shape):
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _index_put_kernel(a, values, indices, accumulate=False):
    out = a.copy()
    where = _numpy_indices(indices)
    values = values.reshape(_strip_leading_ones(values.shape))
    if accumulate:
        np.add.at(out, where, values)
    else:
        out[where] = values
    return out


INDEX_PUT = structured.declare("index_put", _index_put_kernel, family="indexing",
                               params={"indices": (), "accumulate": False})


def check_indices(self, indices):
    """Validate per-dim index tensors (int64/int32, in range, broadcastable); returns them as
    a tuple with int64 tensors or None."""
    if len(indices) > self.ndim and not (self.ndim == 0 and len(indices) <= 1):
        raise IndexError(f"too many indices for tensor of dimension {self.ndim} (got "
                         f"{len(indices)})")
    shapes = []
    checked = []
    for dim, index in enumerate(indices):
        if index is None:
            checked.append(None)
            continue
        if index.dtype not in (D.int64, D.int32):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        size = self._shape[dim] if self.ndim else 1
        _bounds(index._host_array(), size, dim, negative_ok=True, error=IndexError)
        shapes.append(index._shape)
        checked.append(index if index.dtype is D.int64 else index.long())
    try:
        broadcast_shapes(*shapes)
    except RuntimeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(str(list(s)) for s in shapes)) from None
    return tuple(checked)


def index(self, indices):
    """Advanced indexing with per-dim index tensors (IndexBackward0)."""
    indices = check_indices(self, _bool_to_long(self, indices))
    return structured.run(INDEX, (self,), {"indices": indices})


def _bool_to_long(self, indices):
    """Bool/uint8 masks become one int64 index tensor per dim they cover (like nonzero)."""
    out = []
    dim = 0
    for index in indices:
        if isinstance(index, Tensor) and index.dtype in (D.bool, D.uint8):
            if index.dtype is D.uint8:
                warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a "
                              "dtype torch.bool instead.", UserWarning, stacklevel=4)
            mask = index._host_array().astype(bool)
            for k in range(mask.ndim):
                if dim + k >= self.ndim or mask.shape[k] != self._shape[dim + k]:
                    raise IndexError(f"The shape of the mask {list(mask.shape)} at index {k} "
                                     f"does not match the shape of the indexed tensor "
                                     f"{list(self._shape)} at index {dim + k}")
            out.extend(Tensor._from_array(np.ascontiguousarray(c, dtype=np.int64))
                       for c in np.nonzero(mask))
            dim += mask.ndim
        else:
            out.append(index)
            dim += 1
    return out


def _index_put_args(self, indices, values):
    _check_tensor(values, "index_put", "values")
    indices = check_indices(self, _bool_to_long(self, list(indices)))
    if values.dtype is not self.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{self.dtype.scalar_name} for the destination and "
                           f"{values.dtype.scalar_name} for the source.")
    target_shape = np.empty(self._shape, dtype=bool)[_numpy_indices(indices)].shape
    try:
        # Extra leading size-1 dims of values are allowed (they are dropped).
        if broadcast_shapes(_strip_leading_ones(values._shape), target_shape) != \
                tuple(target_shape):
            raise RuntimeError
    except RuntimeError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values._shape)} "
                           f"cannot be broadcast to indexing result of shape "
                           f"{list(target_shape)}") from None
    return indices


def index_put(input, indices, values, accumulate=False):
    """A copy of input with `values` written (or added, accumulate=True) at input[indices]."""
    indices = _index_put_args(input, indices, values)
    return structured.run(INDEX_PUT, (input, values),
                          {"indices": indices, "accumulate": builtins.bool(accumulate)})


def index_put_(self, indices, values, accumulate=False):
    indices = _index_put_args(self, indices, values)
    return structured.run_inplace(INDEX_PUT, (self, values),
                        {"indices": indices, "accumulate": builtins.bool(accumulate)})


# --- masks -----------------------------------------------------------------------------------

def _check_mask(fn, mask, allow_uint8=False):
    _check_tensor(mask, fn, "mask")
    if mask.dtype is not D.bool:
        raise RuntimeError(f"{fn}: expected BoolTensor for mask")


def _masked_select_kernel(a, mask):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    return np.broadcast_to(a, shape)[np.broadcast_to(mask, shape)]


MASKED_SELECT = structured.declare("masked_select", _masked_select_kernel, family="indexing")


def masked_select(input, mask, *, out=None):
    """The elements of input where mask (broadcast) is True, as a 1-D tensor."""
    _check_mask("masked_select", mask)
    broadcast_shapes(input._shape, mask._shape)
    return structured.run(MASKED_SELECT, (input, mask), {}, out=out, dtype=input.dtype)


def _masked_fill_kernel(a, mask, value):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    return np.where(mask, np.asarray(value).astype(a.dtype), a).reshape(shape)


MASKED_FILL = structured.declare("masked_fill", _masked_fill_kernel, family="indexing")


def _masked_fill_args(fn, self, mask, value):
    _check_tensor(mask, fn, "mask")
    if mask.dtype is not D.bool:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{mask.dtype.scalar_name}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
    elif not isinstance(value, numbers.Number):
        raise TypeError(f"{fn}(): argument 'value' must be Number, not {type(value).__name__}")
    check_scalar_fits(value.item() if isinstance(value, Tensor) else value, self.dtype)


def masked_fill(input, mask, value):
    """A copy of input (broadcast with mask) with `value` where mask is True."""
    _masked_fill_args("masked_fill", input, mask, value)
    broadcast_shapes(input._shape, mask._shape)
    return structured.run(MASKED_FILL, (input, mask, value), {}, dtype=input.dtype)


def masked_fill_(self, mask, value):
    _masked_fill_args("masked_fill_", self, mask, value)
    if broadcast_shapes(self._shape, mask._shape) != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast "
                           f"shape {list(broadcast_shapes(self._shape, mask._shape))}")
    return structured.run_inplace(MASKED_FILL, (self, mask, value), {})


def _masked_scatter_kernel(a, mask, source):
    # The count is checked here, where the mask's values are at hand, rather than before
    # dispatch: a device kernel checks it on the device, without a host synchronisation.
    shape = np.broadcast_shapes(a.shape, mask.shape)
    out = np.array(np.broadcast_to(a, shape))
    full_mask = np.broadcast_to(mask, shape)
    count = int(full_mask.sum())
    if count > source.size:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements "
                           "as ones in mask")
    out[full_mask] = source.reshape(-1)[:count]
    return out


MASKED_SCATTER = structured.declare("masked_scatter", _masked_scatter_kernel,
                                    family="indexing")


def _masked_scatter_args(fn, self, mask, source):
    _check_mask(fn, mask)
    _check_tensor(source, fn, "source")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"{fn}: expected self and source to have same dtypes but got "
                           f"{self.dtype.scalar_name} and {source.dtype.scalar_name}")
    return broadcast_shapes(self._shape, mask._shape)


def masked_scatter(input, mask, source):
    """A copy of input with source's leading elements written where mask is True, in order."""
    _masked_scatter_args("masked_scatter", input, mask, source)
    return structured.run(MASKED_SCATTER, (input, mask, source), {}, dtype=input.dtype)


def masked_scatter_(self, mask, source):
    shape = _masked_scatter_args("masked_scatter_", self, mask, source)
    if shape != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")
    return structured.run_inplace(MASKED_SCATTER, (self, mask, source), {})


# --- take / put -------------------------------------------------------------------------------

def _take_kernel(a, index):
    _flat_bounds(index, a.size)
    return a.reshape(-1)[index]


TAKE = structured.declare("take", _take_kernel, family="indexing")


def _check_flat_index(fn, index):
    """index is an int64 tensor. Its values must lie in [-n, n) for the n elements of the
    tensor it indexes: the kernel that runs checks them (the reference's with _flat_bounds)."""
    _check_tensor(index, fn, "index")
    if index.dtype is not D.int64:
        raise RuntimeError(f"{fn}(): Expected a long tensor for index, but got "
                           f"{index.dtype.scalar_name}")


def _flat_bounds(values, n):
    bad = (values < -n) | (values >= n)
    if bad.any():
        raise IndexError(f"out of range: tried to access index {int(values[bad].flat[0])} on "
                         f"a tensor of {n} elements.")


def take(input, index):
    """input viewed as 1-D, read at `index` (negative counts from the end)."""
    _check_flat_index("take", index)
    return structured.run(TAKE, (input, index), {}, dtype=input.dtype)


def _put_kernel(a, index, source, accumulate=False):
    _flat_bounds(index, a.size)
    out = a.copy()
    flat = out.reshape(-1)
    if accumulate:
        np.add.at(flat, index.reshape(-1), source.reshape(-1))
    else:
        flat[index.reshape(-1)] = source.reshape(-1)
    return flat.reshape(a.shape)


PUT = structured.declare("put", _put_kernel, family="indexing", params={"accumulate": False})


def _put_args(fn, self, index, source):
    _check_flat_index(fn, index)
    _check_tensor(source, fn, "source")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"{fn}(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {self.dtype.scalar_name} and source.dtype = "
                           f"{source.dtype.scalar_name}")
    if source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.numel()}, "
                           f"index.numel() = {index.numel()}")


def put(input, index, source, accumulate=False):
    """A copy of input (as 1-D) with source written (or added) at `index`."""
    _put_args("put", input, index, source)
    return structured.run(PUT, (input, index, source),
                          {"accumulate": builtins.bool(accumulate)}, dtype=input.dtype)


def put_(self, index, source, accumulate=False):
    _put_args("put_", self, index, source)
    return structured.run_inplace(PUT, (self, index, source), {"accumulate": builtins.bool(accumulate)})


def take_along_dim(input, indices, dim=None, *, out=None):
    """gather along dim after broadcasting input and indices in the other dims."""
    _check_tensor(indices, "take_along_dim", "indices")
    if indices.dtype is not D.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{indices.dtype.scalar_name}")
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1), out=out)
    dim = wrap_dim(dim, input.ndim)
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {input.ndim} dimensions for input, "
                           f"and {indices.ndim} dimensions for indices")
    in_shape, ix_shape = list(input._shape), list(indices._shape)
    in_shape[dim] = ix_shape[dim] = 1
    common = list(broadcast_shapes(tuple(in_shape), tuple(ix_shape)))
    in_target, ix_target = list(common), list(common)
    in_target[dim], ix_target[dim] = input._shape[dim], indices._shape[dim]
    return gather(input.expand(in_target), dim, indices.expand(ix_target), out=out)


# --- nonzero ---------------------------------------------------------------------------------

NONZERO = structured.declare("nonzero", lambda a: np.argwhere(a).astype(np.int64),
                             family="indexing")


def nonzero(input, *, out=None, as_tuple=False):
    """Indices of the nonzero elements: an (n, ndim) int64 tensor, or one tensor per dim."""
    result = structured.run(NONZERO, (input,), {})
    if not as_tuple:
        # PyTorch writes the indices one dim after another: its (n, ndim) result is the
        # transpose of an (ndim, n) tensor, strides (1, n), whichever kernel made it. An out=
        # tensor of another shape is resized to (ndim, n) and transposed the same way.
        if out is None:
            return laid_out(result, (1, result._shape[0]))
        if out.dtype is not D.int64:
            raise RuntimeError(f"nonzero: Expected out tensor to have scalar type Long but got "
                               f"scalar type{out.dtype.scalar_name}")
        if out._shape != result._shape:
            n, ndim = result._shape
            resize_output(out, (ndim, n))
            out._set_geometry(out._storage, out._offset, (n, ndim), (1, n))
        return structured.write_out(out, result)
    if input.ndim == 0:
        # A 0-dim input counts as one element at index 0 (kept only if it is nonzero).
        return (Tensor._from_array(np.zeros(int(builtins.bool(input.item())), np.int64)),)
    return tuple(result.select(1, d).clone() for d in range(input.ndim))


def argwhere(input):
    return nonzero(input)


# --- repeat, tile, repeat_interleave ---------------------------------------------------------

def _repeat_kernel(a, repeats):
    padded = a.reshape((1,) * (len(repeats) - a.ndim) + a.shape)
    return np.tile(padded, repeats)


REPEAT = structured.declare("repeat", _repeat_kernel, family="joining", params={"repeats": ()},
                            layout="contiguous")


def repeat(self, *sizes):
    """Tile self `sizes[d]` times along each dim (extra leading sizes add dims)."""
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) \
        else sizes
    sizes = tuple(operator.index(s) for s in sizes)
    if len(sizes) < self.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: "
                           f"{list(sizes)}")
    return structured.run(REPEAT, (self,), {"repeats": sizes})


def tile(input, dims):
    """repeat, with missing leading repeats taken as 1."""
    dims = tuple(dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (or slice along dim) `repeats` times; composition of index_select.

    `torch.repeat_interleave(repeats)` (a 1-D tensor alone) gives the indices 0..n-1, each
    repeated repeats[i] times.
    """
    if repeats is None:
        counts = input
        if counts.ndim > 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if counts.dtype not in (D.int64, D.int32):
            raise RuntimeError("repeats has to be Long or Int tensor")
        values = counts._host_array()
        if (values < 0).any():
            raise RuntimeError("repeats can not be negative")
        result = np.repeat(np.arange(values.size, dtype=np.int64), values.reshape(-1))
        return Tensor._from_array(result.astype(counts.dtype.numpy_dtype)).to(counts.device)
    if dim is None:
        input = input.reshape(-1)
        dim = 0
    dim = wrap_dim(dim, input.ndim)
    size = input._shape[dim] if input.ndim else 1
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        counts = repeats._host_array().reshape(-1)
        if counts.size == 1:
            counts = np.repeat(counts, size)
        elif counts.size != size:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {counts.size} and input.size({dim}) = "
                               f"{size}")
    else:
        counts = np.full(size, operator.index(repeats), dtype=np.int64)
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    index = np.repeat(np.arange(size, dtype=np.int64), counts)
    if output_size is not None and output_size != index.size:
        raise RuntimeError("allocated size does not match required size")
    index = Tensor._from_array(index).to(input.device)
    if input.ndim == 0:
        input = input.reshape(1)
    return index_select(input, dim, index)


def narrow_copy(input, dim, start, length, *, out=None):
    """A contiguous copy of input.narrow(dim, start, length)."""
    result = input.narrow(dim, start, length).clone(memory_format=None)
    if out is not None:
        return structured.write_out(out, result)
    return result


# --- select_scatter / slice_scatter / diagonal_scatter ----------------------------------------

def _region(t, kind, params):
    if kind == "select":
        return t.select(params["dim"], params["index"])
    if kind == "slice":
        dim = params["dim"]
        return t[(slice(None),) * dim + (slice(params["start"], params["end"],
                                                params["step"]),)]
    return t.diagonal(params["offset"], params["dim1"], params["dim2"])


def _view_scatter(kind, input, src, params):
    """A copy of input with the view `kind`(params) of it replaced by src."""
    _check_tensor(src, f"{kind}_scatter", "src")
    with no_grad():
        result = input.clone()
        region = _region(result, kind, params)
        if region._shape != src._shape:
            raise RuntimeError(f"expected src to have a size equal to the slice of self. src "
                               f"size = {list(src._shape)}, slice size = "
                               f"{list(region._shape)}")
        region.copy_(src)
    return record(f"{kind}_scatter", (input, src), result, params)


def select_scatter(input, src, dim, index):
    dim = wrap_dim(dim, input.ndim)
    return _view_scatter("select", input, src, {"dim": dim, "index": index})


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    dim = wrap_dim(dim, input.ndim)
    return _view_scatter("slice", input, src, {"dim": dim, "start": start, "end": end,
                                               "step": step})


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    return _view_scatter("diagonal", input, src, {"offset": offset, "dim1": dim1,
                                                  "dim2": dim2})


# --- Tensor.new_* factories, map_, apply_ -----------------------------------------------------

def _size_args(size):
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else size


def _new(self, fill, size, dtype, device, requires_grad):
    dtype = self.dtype if dtype is None else dtype
    device = self.device if device is None else device
    if fill is None:
        return _creation.empty(_size_args(size), dtype=dtype, device=device,
                               requires_grad=requires_grad)
    return _creation.full(_size_args(size), fill, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False):
    from .creation import tensor
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.clone().detach() or "
                      "sourceTensor.clone().detach().requires_grad_(True), rather than "
                      "tensor.new_tensor(sourceTensor).", UserWarning, stacklevel=2)
        result = data.detach().to(dtype=dtype or self.dtype, device=device or self.device,
                                  copy=True)
        return result.requires_grad_(requires_grad) if requires_grad else result
    return tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                  requires_grad=requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    return _new(self, None, size, dtype, device, requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
             layout=None, pin_memory=False):
    return _new(self, fill_value, (size,), dtype, device, requires_grad)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    return _new(self, 0, size, dtype, device, requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
             pin_memory=False):
    return _new(self, 1, size, dtype, device, requires_grad)


def map_(self, tensor, callable):
    """self[i] = callable(self[i], tensor[i]) for every element (a Python call per element,
    by definition; cpu only, as in PyTorch)."""
    if self.device.type != "cpu":
        raise RuntimeError("map_ is only implemented on CPU tensors")
    other = tensor.expand(self._shape)._np
    fn = np.frompyfunc(lambda a, b: callable(a, b), 2, 1)
    result = fn(self._np.astype(object), _python_objects(other)).astype(self._np.dtype)
    np.copyto(self._np, result)
    self._bump_version()
    return self


def apply_(self, callable):
    """self[i] = callable(self[i]) for every element (a Python call per element; cpu only)."""
    if self.device.type != "cpu":
        raise RuntimeError("apply_ is only implemented on CPU tensors")
    fn = np.frompyfunc(callable, 1, 1)
    np.copyto(self._np, fn(_python_objects(self._np)).astype(self._np.dtype))
    self._bump_version()
    return self


def _python_objects(a):
    """Elements as Python numbers (the callable sees float/int/bool, as in PyTorch)."""
    if a.dtype.kind == "V" or a.dtype.name == "bfloat16":
        a = a.astype(np.float32)
    return np.array(a.tolist(), dtype=object).reshape(a.shape) if a.ndim else \
        np.array(a.item(), dtype=object)


# --- Tensor methods -----------------------------------------------------------------------------

for _name in ("chunk", "split", "tensor_split", "hsplit", "vsplit", "dsplit", "unbind",
              "gather", "scatter", "scatter_add", "scatter_reduce", "index_select",
              "index_add", "index_copy", "index_fill", "index_put", "masked_select",
              "masked_fill", "masked_scatter", "take", "take_along_dim", "put", "nonzero",
              "argwhere", "movedim", "moveaxis", "tile", "repeat_interleave", "narrow_copy",
              "select_scatter", "slice_scatter", "diagonal_scatter"):
    setattr(Tensor, _name, globals()[_name])  # a function on the class binds self as input


def _split_method(self, split_size, dim=0):
    return split(self, split_size, dim)


Tensor.split = _split_method
Tensor.repeat = repeat
for _fn in (scatter_, scatter_add_, scatter_reduce_, index_add_, index_copy_, index_fill_,
            index_put_, masked_fill_, masked_scatter_, put_, new_tensor, new_empty, new_full,
            new_zeros, new_ones, map_, apply_):
    setattr(Tensor, _fn.__name__, _fn)


# Imported last: creation imports this module (a function-level import costs ~0.6 us a call:
# every new_zeros / new_full / new_empty ran one).
from . import creation as _creation  # noqa: E402
