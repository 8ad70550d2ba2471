"""Other operations: flips and rotations, triangles and diagonals, einsum, histograms, ...

Most ops are structured ops with a NumPy reference (`structured.declare` + `structured.run`);
a few that are naturally built from other ops (kron, tensordot, diff, cov, atleast_*d,
broadcast_*) are written as compositions, so autograd works through their parts.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import _dtype as D
from .._promotion import broadcast_shapes, result_dtype
from .._shape import common_format, format_strides, kept_strides, wrap_dim
from .._tensor import Tensor
from . import structured

__all__ = [
    "atleast_1d", "atleast_2d", "atleast_3d", "bincount", "block_diag", "broadcast_tensors",
    "broadcast_to", "cartesian_prod", "cdist", "combinations", "corrcoef", "cov", "cross",
    "diag", "diag_embed", "diagflat", "diff", "einsum", "flip", "fliplr", "flipud", "histc",
    "histogram", "kron", "meshgrid", "ravel", "renorm", "roll", "rot90", "tensordot", "trace",
    "tril", "tril_indices", "triu", "triu_indices", "unflatten", "vander",
]

FLOATING = frozenset({D.float16, D.bfloat16, D.float32, D.float64})
INTEGRAL = frozenset({D.uint8, D.int8, D.int16, D.int32, D.int64})


def _reftorch():
    import reftorch
    return reftorch


def _run(op, inputs, params, out=None, dtype=None):
    return structured.run(op, tuple(inputs), params, out=out, dtype=dtype)


def _int_list(value, name, fn):
    """An int or a sequence of ints as a tuple (PyTorch's int[] arguments)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, np.integer)) for v in value):
        return tuple(int(v) for v in value)
    raise TypeError(f"{fn}(): argument '{name}' must be tuple of ints, not "
                    f"{type(value).__name__}")


# --- flip, roll, rot90 (copies in PyTorch, not views) --------------------------------------

def _flip_kernel(a, dims):
    return np.flip(a, axis=dims).copy() if dims else a.copy()


FLIP = structured.declare("flip", _flip_kernel, family="other", params={"dims": ()},
                          layout="input")


def flip(input, dims):
    """Reverse the order of elements along `dims` (a copy, unlike NumPy's view)."""
    if not isinstance(dims, (tuple, list)):
        raise TypeError(f"flip(): argument 'dims' (position 2) must be tuple of ints, not "
                        f"{type(dims).__name__}")
    wrapped = tuple(wrap_dim(d, input.ndim) for d in dims)
    for d in wrapped:
        if wrapped.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return _run(FLIP, (input,), {"dims": wrapped})


def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, [1])


def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, [0])


def _roll_kernel(a, shifts, dims):
    if dims is None:  # roll the flattened tensor, then restore the shape
        return np.roll(a.reshape(-1), shifts[0]).reshape(a.shape)
    return np.roll(a, shifts, axis=dims)


def _roll_layout(tensors, params):
    """How PyTorch lays out roll's result. It rolls a flattened copy when dims is None
    (contiguous), clones an empty tensor (like the input), and otherwise rolls one dim at a
    time by concatenating two slices of it: cat's rule, so the memory format both slices
    suggest, the next dim's roll starting from that layout. A slice may suggest a format the
    whole tensor does not (a narrower dim can pass the channels-last test), and an empty one
    (the shift a multiple of the size) suggests contiguous."""
    x = tensors[0]
    if params["dims"] is None:
        return "contiguous"
    if 0 in x._shape:
        return "input"
    shape, strides, chosen = x._shape, x._strides, "contiguous"
    for shift, dim in zip(params["shifts"], params["dims"]):
        start = (shape[dim] - shift) % shape[dim]
        chosen = common_format((shape[:dim] + (n,) + shape[dim + 1:], strides)
                               for n in (shape[dim] - start, start))
        strides = format_strides(shape, chosen)
    return chosen


ROLL = structured.declare("roll", _roll_kernel, family="other",
                          params={"shifts": (), "dims": None}, layout=_roll_layout)


def roll(input, shifts, dims=None):
    """Shift elements cyclically along `dims` (the flattened tensor when dims is None)."""
    shifts = _int_list(shifts, "shifts", "roll")
    if dims is not None:
        dims = tuple(wrap_dim(d, input.ndim) for d in _int_list(dims, "dims", "roll"))
        if not dims:
            dims = None
    if dims is None and len(shifts) != 1 or dims is not None and len(dims) != len(shifts):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{0 if dims is None else len(dims)}")
    return _run(ROLL, (input,), {"shifts": shifts, "dims": dims})


def _rot90_kernel(a, k, dims):
    return np.rot90(a, k, axes=dims).copy()


def _rot90_layout(tensors, params):
    """How PyTorch lays out rot90's result: it flips (a copy laid out like the input) and,
    for an odd number of quarter turns, transposes that copy; no turn is a contiguous clone."""
    x, turns, (d0, d1) = tensors[0], params["k"] % 4, params["dims"]
    if turns == 0:
        return "contiguous"
    strides = list(kept_strides(x._shape, x._strides))
    if turns % 2:
        strides[d0], strides[d1] = strides[d1], strides[d0]
    return tuple(strides)


ROT90 = structured.declare("rot90", _rot90_kernel, family="other",
                           params={"k": 1, "dims": (0, 1)}, layout=_rot90_layout)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees `k` times in the plane of `dims` (from dims[0] towards dims[1])."""
    dims = _int_list(dims, "dims", "rot90")
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (wrap_dim(d, input.ndim) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    return _run(ROT90, (input,), {"k": int(k), "dims": (d0, d1)})


# --- triangles, diagonals, trace ------------------------------------------------------------

TRIL = structured.declare("tril", lambda a, diagonal: np.tril(a, diagonal), family="other",
                          params={"diagonal": 0}, layout="contiguous")
TRIU = structured.declare("triu", lambda a, diagonal: np.triu(a, diagonal), family="other",
                          params={"diagonal": 0}, layout="contiguous")


def _triangle(op, name):
    def public(input, diagonal=0, *, out=None):
        if input.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return _run(op, (input,), {"diagonal": int(diagonal)}, out=out)
    public.__name__ = name
    public.__doc__ = (f"The {'lower' if name == 'tril' else 'upper'} triangle of the last two "
                      f"dims (batched); `diagonal` shifts the boundary.")
    return public


tril = _triangle(TRIL, "tril")
triu = _triangle(TRIU, "triu")


def _triangle_inplace(public):
    def inplace(self, diagonal=0):
        # The result is computed out of place and copied back: autograd sees tril + copy_.
        return self.copy_(public(self, diagonal))
    inplace.__name__ = public.__name__ + "_"
    return inplace


def _triangle_indices(which):
    def public(row, col, offset=0, *, dtype=None, device=None, layout=None):
        if row < 0:
            raise RuntimeError(f"row must be non-negative, got{row}")
        if col < 0:
            raise RuntimeError(f"col must be non-negative, got{col}")
        dtype = D.int64 if dtype is None else dtype
        if dtype not in (D.int32, D.int64):
            raise RuntimeError(f"\"{which}_indices\" not implemented for "
                               f"'{dtype.scalar_name}'")
        rows, cols = (np.tril_indices if which == "tril" else np.triu_indices)(row, offset, col)
        indices = np.stack([rows, cols]).astype(dtype.numpy_dtype).reshape(2, -1)
        result = Tensor._from_array(indices)
        return result if device is None else result.to(device)
    public.__name__ = f"{which}_indices"
    public.__doc__ = f"2 x N coordinates of the {which} triangle of a row x col matrix."
    return public


tril_indices = _triangle_indices("tril")
triu_indices = _triangle_indices("triu")


def _diag_embed_kernel(a, offset, dim1, dim2):
    n = a.shape[-1] + abs(offset)
    out = np.zeros(a.shape[:-1] + (n, n), dtype=a.dtype)
    i = np.arange(a.shape[-1])
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    out[..., rows, cols] = a
    return np.moveaxis(out, (-2, -1), (dim1, dim2))


DIAG_EMBED = structured.declare("diag_embed", _diag_embed_kernel, family="other",
                                params={"offset": 0, "dim1": -2, "dim2": -1})


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Place the last dim of `input` on the diagonals of new (dim1, dim2) planes."""
    if input.ndim < 1:
        raise RuntimeError("diag_embed(): input must be at least 1-dimensional")
    d1, d2 = wrap_dim(dim1, input.ndim + 1), wrap_dim(dim2, input.ndim + 1)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _run(DIAG_EMBED, (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def diag(input, diagonal=0, *, out=None):
    """1-D -> square matrix with `input` on a diagonal; 2-D -> that diagonal (a copy)."""
    if input.ndim == 1:
        result = diag_embed(input, diagonal)
    elif input.ndim == 2:
        result = input.diagonal(diagonal).clone()
    else:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    return result if out is None else structured.write_out(out, result)


def diagflat(input, offset=0):
    """The flattened `input` on a diagonal of a new square matrix."""
    return diag_embed(input.reshape(-1), offset)


def _trace_kernel(a, dtype):
    wide = a.astype(np.float64) if a.dtype.itemsize <= 2 and a.dtype.kind == "f" or \
        a.dtype == D.bfloat16.numpy_dtype else a
    return np.asarray(np.trace(wide)).astype(dtype)


TRACE = structured.declare("trace", _trace_kernel, family="other", params={"dtype": None},
                           dtypes=set(D.ALL_DTYPES) - {D.bool})


def trace(input):
    """Sum of the main diagonal of a matrix (integers accumulate in int64, like sum)."""
    if input.dtype is D.bool:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    dtype = D.int64 if input.dtype in INTEGRAL else input.dtype
    return _run(TRACE, (input,), {"dtype": dtype.numpy_dtype})


# --- counting and histograms (not differentiable) ------------------------------------------

def _bincount_kernel(a, weights, minlength, dtype):
    return np.bincount(a, weights, minlength).astype(dtype)


BINCOUNT = structured.declare("bincount", _bincount_kernel, family="other",
                              params={"minlength": 0, "dtype": None}, dtypes=INTEGRAL)


def bincount(input, weights=None, minlength=0):
    """Count each non-negative integer of a 1-D tensor (summing `weights` if given)."""
    if input.dtype not in INTEGRAL:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    if (input.ndim != 1 or input.numel() and
                                    int(input._np.min()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    # Counts are int64; weighted sums are float32 for float32 weights, else double.
    dtype = D.int64 if weights is None else (
        D.float32 if weights.dtype is D.float32 else D.float64)
    return _run(BINCOUNT, (input, weights), {"minlength": int(minlength),
                                             "dtype": dtype.numpy_dtype}, dtype=input.dtype)


def _histc_kernel(a, bins, min, max):
    # Bin positions are computed in the input's precision (float32 for half types), so
    # values near a bin edge fall in the same bin as in PyTorch.
    half = a.dtype.itemsize == 2

    def rounded(v):  # each step rounds to the input's dtype, as in PyTorch's kernel
        return v.astype(a.dtype).astype(np.float32) if half else v

    x = a.astype(np.float64 if a.dtype == np.float64 else np.float32).reshape(-1)
    lo, hi = x.dtype.type(min), x.dtype.type(max)
    if lo == hi and x.size:  # PyTorch: equal bounds mean "use the data's range"
        lo, hi = x.min(), x.max()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    x = x[(x >= lo) & (x <= hi)]
    position = rounded(rounded(rounded(x - lo) * bins) / rounded(np.asarray(hi - lo)))
    index = np.floor(position).astype(np.int64)
    index = np.minimum(index, bins - 1)  # the upper edge belongs to the last bin
    return np.bincount(index, minlength=bins).astype(a.dtype)


HISTC = structured.declare("histc", _histc_kernel, family="other",
                           params={"bins": 100, "min": 0, "max": 0}, dtypes=FLOATING)


def histc(input, bins=100, min=0, max=0, *, out=None):
    """Histogram with `bins` equal bins between min and max (the data's range if equal)."""
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("max must be larger than min")
    return _run(HISTC, (input,), {"bins": int(bins), "min": min, "max": max}, out=out)


def _histogram_kernel(a, edges, weight, bins, range, density):
    x = a.astype(np.float64).reshape(-1)
    w = None if weight is None else weight.astype(np.float64).reshape(-1)
    if edges is not None:
        bins = edges.astype(np.float64)
    elif range is None and x.size == 0:
        range = (0.0, 1.0)
    hist, bin_edges = np.histogram(x, bins=bins, range=range, weights=w, density=density)
    return hist.astype(a.dtype), bin_edges.astype(a.dtype)


HISTOGRAM = structured.declare("histogram", _histogram_kernel, family="other",
                               params={"bins": 100, "range": None, "density": False},
                               dtypes=FLOATING - {D.float16, D.bfloat16})


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges): counts in equal bins (int bins) or in the given edges (tensor)."""
    edges = bins if isinstance(bins, Tensor) else None
    count = 0 if edges is not None else int(bins)
    if edges is None and count <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {count} for "
                           f"dimension 0")
    if range is not None and range[0] > range[1]:
        raise RuntimeError("torch.histogram(): min should not exceed max")
    result = _run(HISTOGRAM, (input, edges, weight),
                  {"bins": count, "range": None if range is None else tuple(map(float, range)),
                   "density": bool(density)}, out=out)
    return _reftorch().return_types.named("histogram", tuple(result))


# --- broadcasting and reshaping helpers (compositions of views) ----------------------------

def broadcast_to(input, size):
    return input.expand(*size)


def broadcast_tensors(*tensors):
    """Views of `tensors` expanded to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(*shape) for t in tensors)


def _atleast(ndim, shape_for):
    def public(*tensors):
        single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
        if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
            tensors = tuple(tensors[0])
        results = tuple(t if t.ndim >= ndim else t.reshape(shape_for(t.shape))
                        for t in tensors)
        return results[0] if single else results
    public.__name__ = f"atleast_{ndim}d"
    public.__doc__ = f"Views of the inputs with at least {ndim} dimensions."
    return public


atleast_1d = _atleast(1, lambda s: (1,))
atleast_2d = _atleast(2, lambda s: (1,) * (2 - len(s)) + tuple(s))
atleast_3d = _atleast(3, lambda s: {0: (1, 1, 1), 1: (1,) + tuple(s) + (1,),
                                    2: tuple(s) + (1,)}[len(s)])


def ravel(input):
    return input.reshape(-1)


def unflatten(input, dim, sizes):
    """Split dim `dim` into `sizes` (one entry may be -1)."""
    dim = wrap_dim(dim, input.ndim)
    sizes = tuple(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = int(np.prod([s for s in sizes if s != -1]))
    if -1 in sizes:
        if known == 0 or input.shape[dim] % known:
            raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up "
                               f"to the size of dim {dim} ({input.shape[dim]}) in the input "
                               f"tensor")
        sizes = tuple(input.shape[dim] // known if s == -1 else s for s in sizes)
    elif known != input.shape[dim]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({input.shape[dim]}) in the input tensor")
    return input.view(*(tuple(input.shape[:dim]) + sizes + tuple(input.shape[dim + 1:])))


def meshgrid(*tensors, indexing=None):
    """Coordinate grids: each 1-D input expanded along its own dim ('ij'; 'xy' swaps 0/1)."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t.ndim}D")
    tensors = tuple(t.reshape(-1) for t in tensors)
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0   # 'xy': the first input varies along dim 1
    shape = [0] * len(tensors)
    for i, t in enumerate(tensors):
        shape[order[i]] = t.shape[0]
    grids = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[order[i]] = t.shape[0]
        grids.append(t.reshape(view).expand(*shape))
    return tuple(grids)


# --- products and contractions -------------------------------------------------------------

def _cross_kernel(a, b, dim):
    return np.cross(a, b, axis=dim)


CROSS = structured.declare("cross", _cross_kernel, family="other", params={"dim": -1},
                           dtypes=set(D.ALL_DTYPES) - {D.bool})


def cross(input, other, dim=None, *, out=None):
    """Cross product of 3-vectors along `dim` (default: the first dim of size 3, deprecated)."""
    if input.dtype is not other.dtype:
        raise RuntimeError(f"linalg.cross: expected input and other to have the same dtype, "
                           f"but got {input.dtype} and {other.dtype}")
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = broadcast_shapes(input.shape, other.shape)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross."
                      "\nThe default value of dim will change to agree with that of "
                      "linalg.cross in a future release.", UserWarning, stacklevel=2)
        dim = next((d for d, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    dim = wrap_dim(dim, len(shape))
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[dim]} and {other.shape[dim]}")
    return _run(CROSS, (input, other), {"dim": dim}, out=out)


def _einsum_kernel(*arrays, equation):
    dtype = arrays[0].dtype
    if dtype.kind == "f" and dtype.itemsize <= 2 or dtype == D.bfloat16.numpy_dtype:
        # Half-precision products accumulate in float32, as PyTorch's kernels do.
        arrays = tuple(a.astype(np.float32) for a in arrays)
    return np.asarray(np.einsum(equation, *arrays, optimize=len(arrays) > 2)).astype(dtype)


EINSUM = structured.declare("einsum", _einsum_kernel, family="other",
                            params={"equation": ""})
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _sublist_equation(args):
    """einsum(op1, [0, 1], op2, [1, 2], [0, 2]) -> ("ab,bc->ac", operands)."""
    def term(sub):
        return "".join("..." if s is Ellipsis else _LETTERS[s] for s in sub)
    operands, terms = list(args[0::2]), [term(s) for s in args[1::2]]
    output = None
    if len(args) % 2 == 1:
        operands, output = operands[:-1], term(args[-1])
    return ",".join(terms) + ("" if output is None else "->" + output), operands


def _normalize_equation(equation, operands):
    """Explicit form of `equation`: ellipses replaced by letters, output spelled out."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum(): {'more' if len(operands) > len(terms) else 'fewer'} "
                           f"operands were provided than specified in the equation")
    used = set(equation) - {".", ",", "-", ">"}
    free = [c for c in _LETTERS if c not in used]
    ellipsis_dims = 0
    for term, t in zip(terms, operands):
        if any(c not in _LETTERS for c in term.replace("...", "")):
            raise RuntimeError("einsum(): invalid subscript given in the equation string")
        named = len(term.replace("...", ""))
        if "..." in term:
            if named > t.ndim:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                                   f"({named}) is more than the number of dimensions "
                                   f"({t.ndim}) for operand {terms.index(term)}")
            ellipsis_dims = max(ellipsis_dims, t.ndim - named)
        elif named != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) "
                               f"does not match the number of dimensions ({t.ndim}) for "
                               f"operand {terms.index(term)} and no ellipsis was given")
    ellipsis = "".join(free[:ellipsis_dims])
    explicit = [term.replace("...", ellipsis[len(ellipsis) - (t.ndim + 3 - len(term)):]
                             if ellipsis else "") for term, t in zip(terms, operands)]
    if arrow:
        output = rhs.replace("...", ellipsis)
        for c in output:
            if c not in "".join(explicit):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   f"equation for any input operand")
            if output.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in "
                                   f"the output")
    else:
        joined = "".join(t.replace("...", "") for t in terms)
        output = ellipsis + "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    return explicit, output


def einsum(*args):
    """Einstein summation: `einsum("ij,jk->ik", a, b)` (also operands as one list, or the
    sublist format). One recorded op; its gradient is again an einsum (see derivatives)."""
    if args and isinstance(args[0], Tensor):
        equation, operands = _sublist_equation(args)
    else:
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
            operands = list(operands[0])
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    terms, output = _normalize_equation(equation, operands)
    dtype = operands[0].dtype
    for t in operands:
        if t.dtype is not dtype:
            raise RuntimeError(f"expected scalar type {dtype.scalar_name} but found "
                               f"{t.dtype.scalar_name}")
    operands = _broadcast_labels(terms, operands)
    summed = set("".join(terms)) - set(output)
    if len(operands) == 1 and summed and not (dtype.is_floating_point or dtype.is_complex):
        operands = [operands[0].to(D.int64)]  # torch.sum: integers accumulate in int64
    empty = any(t.numel() == 0 for t in operands)
    if dtype is D.bool and len(operands) > 1 and summed and not empty:
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    return _run(EINSUM, operands, {"equation": ",".join(terms) + "->" + output})


def _broadcast_labels(terms, operands):
    """Size-1 dims broadcast against the same label's size elsewhere (expand them)."""
    sizes = {}
    for term, t in zip(terms, operands):
        for c, s in zip(term, t.shape):
            if s != 1:
                if sizes.get(c, s) != s:
                    raise RuntimeError(f"einsum(): operands do not broadcast with remapped "
                                       f"shapes (original->remapped): subscript {c} has size "
                                       f"{sizes[c]} and {s}")
                sizes[c] = s
    result = []
    for term, t in zip(terms, operands):
        target = tuple(sizes.get(c, 1) if s == 1 else s for c, s in zip(term, t.shape))
        result.append(t if target == tuple(t.shape) else t.expand(*target))
    return result


def einsum_gradient(equation, operands, grad, k, shape):
    """Gradient of einsum(equation, *operands) for operand k, written as another einsum.

    The gradient contracts `grad` with the other operands (conjugated) onto operand k's
    labels. Labels that operand k repeats (a diagonal) are given fresh names tied to the
    original by an identity matrix; labels found only in operand k are brought in by a
    vector of ones, so the equation stays valid and the result has operand k's shape.
    """
    torch = _reftorch()
    lhs, output = equation.split("->")
    terms = lhs.split(",")
    target = terms[k]
    free = iter(c for c in _LETTERS if c not in equation)
    terms_in, ops_in = [output], [grad]
    for j, (term, t) in enumerate(zip(terms, operands)):
        if j != k:
            terms_in.append(term)
            ops_in.append(t.conj() if t.is_complex() else t)
    elsewhere = "".join(terms_in)
    result_term = ""
    for position, c in enumerate(target):
        size = shape[position]
        if c in result_term:
            fresh = next(free)
            terms_in.append(c + fresh)
            ops_in.append(torch.eye(size, dtype=grad.dtype, device=grad.device))
            result_term += fresh
            continue
        if c not in elsewhere:
            terms_in.append(c)
            ops_in.append(torch.ones(size, dtype=grad.dtype, device=grad.device))
        result_term += c
    return _run(EINSUM, ops_in, {"equation": ",".join(terms_in) + "->" + result_term})


def tensordot(a, b, dims=2, out=None):
    """Contract the last `dims` dims of a with the first of b (or the listed dim pairs)."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims="
                               f"{dims}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    dims_a = [wrap_dim(d, a.ndim) for d in dims_a]
    dims_b = [wrap_dim(d, b.ndim) for d in dims_b]
    letters = iter(_LETTERS)
    term_a = [next(letters) for _ in range(a.ndim)]
    term_b = [next(letters) for _ in range(b.ndim)]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[da]} in dim {da} and second has size "
                               f"{b.shape[db]} in dim {db}")
        term_b[db] = term_a[da]
    output = [c for i, c in enumerate(term_a) if i not in dims_a] + \
        [c for i, c in enumerate(term_b) if i not in dims_b]
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {a.dtype.scalar_name} but found "
                           f"{b.dtype.scalar_name}")
    if a.dtype is D.bool and output:  # a matrix product, which lacks bool in PyTorch
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    equation = f"{''.join(term_a)},{''.join(term_b)}->{''.join(output)}"
    result = _run(EINSUM, (a, b), {"equation": equation})
    return result if out is None else structured.write_out(out, result)


def kron(input, other, *, out=None):
    """Kronecker product: every element of input scales a copy of other (block layout)."""
    ndim = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (ndim - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (ndim - other.ndim) + tuple(other.shape))
    # Interleave dims: a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...); then merge pairs.
    a_view = [s for size in a.shape for s in (size, 1)]
    b_view = [s for size in b.shape for s in (1, size)]
    product = a.reshape(a_view) * b.reshape(b_view)
    result = product.reshape([x * y for x, y in zip(a.shape, b.shape)])
    return result if out is None else structured.write_out(out, result)


def _block_diag_kernel(*arrays, dtype):
    matrices = [a.reshape(1, -1) if a.ndim == 1 else a.reshape(1, 1) if a.ndim == 0 else a
                for a in arrays]
    rows = sum(m.shape[0] for m in matrices)
    cols = sum(m.shape[1] for m in matrices)
    out = np.zeros((rows, cols), dtype=dtype)
    r = c = 0
    for m in matrices:  # one block per input tensor
        out[r:r + m.shape[0], c:c + m.shape[1]] = m
        r, c = r + m.shape[0], c + m.shape[1]
    return out


BLOCK_DIAG = structured.declare("block_diag", _block_diag_kernel, family="other",
                                params={"dtype": None})


def block_diag(*tensors):
    """A block-diagonal matrix from 0-, 1- or 2-D tensors (promoted to a common dtype)."""
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
    if not tensors:
        return _reftorch().empty(1, 0)
    dtype = result_dtype(list(tensors))
    return _run(BLOCK_DIAG, tensors, {"dtype": dtype.numpy_dtype}, dtype=dtype)


def block_diag_gradient(grad, shapes):
    """The block of `grad` that each input filled, in its own shape."""
    grads, r, c = [], 0, 0
    for shape in shapes:
        rows, cols = (1, shape[0]) if len(shape) == 1 else (1, 1) if not shape else shape
        grads.append(grad[r:r + rows, c:c + cols].reshape(shape))
        r, c = r + rows, c + cols
    return tuple(grads)


def cartesian_prod(*tensors):
    """All combinations of one element from each 1-D tensor, one per row."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return _reftorch().stack([g.reshape(-1) for g in grids], dim=1)


def combinations(input, r=2, with_replacement=False):
    """Rows of r elements of a 1-D tensor taken in index order (like itertools)."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return _reftorch().empty(0, dtype=input.dtype, device=input.device)
    n = input.shape[0]
    # Every r-tuple of indices in lexicographic order, kept where indices increase.
    grid = np.indices((n,) * r).reshape(r, -1)
    steps = np.diff(grid, axis=0)
    keep = np.all(steps >= 0 if with_replacement else steps > 0, axis=0)
    index = Tensor._from_array(np.ascontiguousarray(grid[:, keep].T))
    if input.device.type != "cpu":
        index = index.to(input.device)
    return input[index.reshape(-1)].reshape(-1, r)


# --- distances and norms --------------------------------------------------------------------

def _pairwise(x1, x2):
    return x1[..., :, None, :] - x2[..., None, :, :]


def _cdist_kernel(x1, x2, p):
    d = np.abs(_pairwise(x1, x2))
    if p == 0:
        return np.count_nonzero(d, axis=-1).astype(x1.dtype)
    if p == np.inf:
        return d.max(axis=-1, initial=0).astype(x1.dtype)
    if p == 1:
        return d.sum(axis=-1).astype(x1.dtype)
    return (np.sum(d ** p, axis=-1) ** (1.0 / p)).astype(x1.dtype)


def _cdist_backward_kernel(grad, x1, x2, dist, p):
    """d dist_ij / d x1_i = sign(x1_i - x2_j) |x1_i - x2_j|^(p-1) / dist_ij^(p-1)."""
    diff = _pairwise(x1, x2)
    d, sign = np.abs(diff), np.sign(diff)
    dist = dist[..., None]
    if p == 0:
        local = np.zeros_like(diff)
    elif p == 1:
        local = sign
    elif p == np.inf:
        local = sign * (d == dist)
    else:
        with np.errstate(all="ignore"):
            local = sign * d ** (p - 1) / dist ** (p - 1)
        local = np.where((dist == 0) | (d == 0), 0, local)
    weighted = grad[..., None] * local
    return weighted.sum(axis=-2).astype(x1.dtype), (-weighted.sum(axis=-3)).astype(x1.dtype)


CDIST = structured.declare("cdist", _cdist_kernel, family="other", params={"p": 2.0},
                           dtypes={D.float32, D.float64})
CDIST_BACKWARD = structured.declare("_cdist_backward", _cdist_backward_kernel, family="other",
                                    params={"p": 2.0}, dtypes={D.float32, D.float64})


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distance between each row of x1 and each row of x2 (batched)."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if not (x1.is_floating_point() and x2.is_floating_point()):
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {x1.dtype}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"X1 and X2 must have the same dtype, X1: {x1.dtype} X2: "
                           f"{x2.dtype}")
    return _run(CDIST, (x1, x2), {"p": float(p)})


def cdist_gradient(grad, x1, x2, dist, p):
    return _run(CDIST_BACKWARD, (grad, x1, x2, dist), {"p": p})


def _slice_norms(a, p, dim):
    """p-norm of each slice a.select(dim, i), kept broadcastable against a."""
    axes = tuple(d for d in range(a.ndim) if d != dim)
    d = np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
    if p == np.inf:
        return d.max(axis=axes, keepdims=True, initial=0)
    return np.sum(d ** p, axis=axes, keepdims=True) ** (1.0 / p)


def _renorm_factor(norm, maxnorm):
    # PyTorch divides by norm + 1e-7, so slices at the limit shrink very slightly.
    return np.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)


def _renorm_kernel(a, p, dim, maxnorm):
    return (a * _renorm_factor(_slice_norms(a, p, dim), maxnorm)).astype(a.dtype)


def _renorm_backward_kernel(grad, a, p, dim, maxnorm):
    norm = _slice_norms(a, p, dim)
    factor = _renorm_factor(norm, maxnorm)
    axes = tuple(d for d in range(a.ndim) if d != dim)
    x = a.astype(np.float64)
    with np.errstate(all="ignore"):
        dnorm = np.sign(x) * np.abs(x) ** (p - 1) / norm ** (p - 1)  # d norm / d x
    dnorm = np.where(norm == 0, 0, dnorm)
    inner = np.sum(grad * x, axis=axes, keepdims=True)
    shrink = grad * factor - maxnorm / (norm + 1e-7) ** 2 * inner * dnorm
    return np.where(norm > maxnorm, shrink, grad).astype(a.dtype)


RENORM = structured.declare("renorm", _renorm_kernel, family="other",
                            params={"p": 2.0, "dim": 0, "maxnorm": 1.0},
                            dtypes=FLOATING | {D.complex64, D.complex128}, layout="contiguous")
RENORM_BACKWARD = structured.declare("_renorm_backward", _renorm_backward_kernel,
                                     family="other", params={"p": 2.0, "dim": 0,
                                                             "maxnorm": 1.0}, dtypes=FLOATING)


def renorm(input, p, dim, maxnorm, *, out=None):
    """Scale each slice along `dim` whose p-norm exceeds `maxnorm` down to norm `maxnorm`."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} "
                           f"dimensions")
    dim = wrap_dim(dim, input.ndim)
    return _run(RENORM, (input,), {"p": float(p), "dim": dim, "maxnorm": float(maxnorm)},
                out=out)


def renorm_gradient(grad, a, p, dim, maxnorm):
    return _run(RENORM_BACKWARD, (grad, a), {"p": p, "dim": dim, "maxnorm": maxnorm})


# --- differences, Vandermonde, covariance (compositions) -----------------------------------

def diff(input, n=1, dim=-1, prepend=None, append=None):
    """n-th forward difference along `dim` (bool tensors: 'not equal')."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    dim = wrap_dim(dim, input.ndim)
    if prepend is not None or append is not None:
        parts = [x if x.ndim else x.expand(*input.shape[:dim], 1, *input.shape[dim + 1:])
                 for x in (prepend, input, append) if x is not None]
        input = _reftorch().cat(parts, dim=dim)
    for _ in range(n):
        length = input.shape[dim]
        if length == 0:
            break
        later, earlier = input.narrow(dim, 1, length - 1), input.narrow(dim, 0, length - 1)
        input = later.ne(earlier) if input.dtype is D.bool else later - earlier
    return input


def vander(x, N=None, increasing=False):
    """Columns are powers of x: x^(N-1) ... x^0 (or increasing)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    N = x.shape[0] if N is None else N
    if N < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = D.int64 if x.dtype in INTEGRAL or x.dtype is D.bool else x.dtype
    return _run(VANDER, (x,), {"N": int(N), "increasing": bool(increasing),
                               "dtype": dtype.numpy_dtype}, dtype=dtype)


def _vander_kernel(x, N, increasing, dtype):
    wide = np.float32 if dtype == D.bfloat16.numpy_dtype else dtype  # NumPy lacks bf16 math
    return np.vander(x.astype(wide), N, increasing=increasing).astype(dtype)


def _vander_backward_kernel(grad, x, N, increasing):
    """d x^k / d x = k x^(k-1), summed over the columns against grad."""
    powers = np.arange(N) if increasing else np.arange(N)[::-1]
    lower = np.vander(x, max(N - 1, 0), increasing=True) if N > 1 else \
        np.zeros((x.shape[0], 0), dtype=x.dtype)
    # Column j holds x^powers[j]; its derivative is powers[j] * x^(powers[j] - 1).
    dcol = np.concatenate([np.zeros((x.shape[0], 1), x.dtype), lower], axis=1)[:, powers] \
        if N else np.zeros((x.shape[0], 0), x.dtype)
    return np.sum(grad * powers * dcol, axis=1).astype(x.dtype)


VANDER = structured.declare("vander", _vander_kernel, family="other",
                            params={"N": None, "increasing": False, "dtype": None})
VANDER_BACKWARD = structured.declare("_vander_backward", _vander_backward_kernel,
                                     family="other", params={"N": None, "increasing": False})


def vander_gradient(grad, x, N, increasing):
    return _run(VANDER_BACKWARD, (grad, x), {"N": N, "increasing": increasing})


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the variables in the rows of `input` (observations in columns)."""
    torch = _reftorch()
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.ndim} dimensions")
    if input.dtype is D.bool:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(D.get_default_dtype())
    if aweights is not None:  # the observation weights take part in the type promotion
        x = x.to(result_dtype([x, aweights]))
    observations = x.shape[1]
    weights = None
    for name, w in (("fweights", fweights), ("aweights", aweights)):
        if w is None:
            continue
        if w.ndim > 1 or w.numel() != observations:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions and "
                               f"{observations} elements")
        if name == "fweights" and w.is_floating_point():
            raise RuntimeError("cov(): expected fweights to have integral dtype")
        if name == "aweights" and not w.is_floating_point():
            raise RuntimeError("cov(): expected aweights to have floating point dtype")
        if w.numel() and bool((w < 0)._np.any()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        w = w.reshape(-1).to(x.dtype)
        weights = w if weights is None else weights * w
    if weights is None:
        weights = torch.ones(observations, dtype=x.dtype, device=x.device)
    total = einsum("j->", weights)
    mean = einsum("ij,j->i", x, weights) / total
    if aweights is None:
        norm = total - correction
    else:
        aw = aweights.reshape(-1).to(x.dtype)
        norm = total - correction * einsum("j,j->", weights, aw) / total
    centered = x - mean.reshape(-1, 1)
    other = centered.conj() if centered.is_complex() else centered
    # PyTorch clamps a negative normaliser to zero (giving inf/nan, as NumPy does).
    norm = norm * ((norm.real if norm.is_complex() else norm) > 0)
    result = einsum("ij,kj,j->ik", centered, other, weights) / norm
    return result.reshape(()) if input.ndim < 2 else result


def corrcoef(input):
    """Pearson correlation coefficients: cov scaled by the standard deviations."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = diag(c).pow(0.5)
    return c / std.reshape(-1, 1) / std.reshape(1, -1)


# --- Tensor methods -------------------------------------------------------------------------

Tensor.flip = lambda self, *dims: flip(self, list(dims[0]) if len(dims) == 1 and isinstance(
    dims[0], (tuple, list)) else list(dims))
Tensor.fliplr = fliplr
Tensor.flipud = flipud
Tensor.roll = roll
Tensor.rot90 = rot90
Tensor.tril = tril
Tensor.triu = triu
Tensor.tril_ = _triangle_inplace(tril)
Tensor.triu_ = _triangle_inplace(triu)
Tensor.diag = diag
Tensor.diag_embed = diag_embed
Tensor.diagflat = diagflat
Tensor.trace = trace
Tensor.bincount = bincount
Tensor.histc = histc
Tensor.histogram = histogram
Tensor.broadcast_to = broadcast_to
Tensor.cross = cross
Tensor.kron = kron
Tensor.renorm = renorm
Tensor.renorm_ = lambda self, p, dim, maxnorm: self.copy_(renorm(self, p, dim, maxnorm))
Tensor.ravel = ravel
Tensor.unflatten = unflatten
Tensor.diff = diff
Tensor.cov = cov
Tensor.corrcoef = corrcoef
