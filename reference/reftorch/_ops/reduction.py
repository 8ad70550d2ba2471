"""Reduction ops: sums, means, variances, norms, extrema, scans, medians, modes, uniques.

Every op is a structured op (see structured.py) whose NumPy kernel reduces over a tuple of
dims; the public functions parse PyTorch's overloads (dim None / int / tuple, keepdim,
dtype=, out=) and check the inputs PyTorch rejects. Where PyTorch and NumPy differ, the
kernel says why: integer sums widen to int64, half types accumulate in float32, max/min
propagate NaN, argmax counts NaN as the maximum, median is the lower median.
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

__all__ = ["sum", "nansum", "prod", "mean", "nanmean", "std", "var", "std_mean", "var_mean",
           "norm", "dist", "logsumexp", "cumsum", "cumprod", "cummax", "cummin",
           "logcumsumexp", "argmax", "argmin", "max", "min", "amax", "amin", "aminmax",
           "median", "nanmedian", "mode", "all", "any", "count_nonzero", "quantile",
           "nanquantile", "unique", "unique_consecutive"]

# This module defines sum/max/min/all/any; these keep Python's own where kernels need them.
_py_max, _py_any = builtins.max, builtins.any


class _Unset:
    """Marks an argument the caller left out (PyTorch picks another overload then)."""

    def __repr__(self):
        return "None"


_UNSET = _Unset()


# --- argument helpers -------------------------------------------------------------------------

def reduce_dims(dim, ndim):
    """None, an int or a sequence of ints as None (every dim) or a sorted tuple of dims."""
    if dim is None or isinstance(dim, _Unset):
        return None
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return None  # PyTorch: an empty dim list reduces over every dim
        wrapped = [wrap_dim(d, ndim) for d in dim]
        for d in wrapped:
            if wrapped.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        return tuple(sorted(wrapped))
    return (wrap_dim(dim, ndim),)


def _single_dim(dim, ndim, name):
    if isinstance(dim, (list, tuple)):
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    return wrap_dim(dim, ndim)


def _axis(a, dims):
    """NumPy's axis for `dims` (a 0-dim array has no axes: its dim 0 is the whole array)."""
    return None if dims is None or a.ndim == 0 else dims


def _reduced_numel(shape, dims):
    if dims is None or len(shape) == 0:
        return math.prod(shape)
    return math.prod(shape[d] for d in dims)


def _accumulator(np_dtype):
    """Half types accumulate in float32 (then round once), as PyTorch's CPU kernels do."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _HALF_TYPES:
        return np.dtype(np.float32)
    return np_dtype


_HALF_TYPES = (np.dtype(np.float16), D.bfloat16.numpy_dtype)


def _long_if_integral(dtype):
    """Sums and products of bool and integer tensors are int64 unless dtype= says otherwise."""
    return D.int64 if dtype.category <= D.Category.INTEGER else dtype


def _check_floating(input, name):
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"{name}(): could not infer output dtype. Input dtype must be "
                           f"either a floating point or complex dtype. Got: "
                           f"{input.dtype.scalar_name}")


def _check_nonempty(input, dims, name):
    """Reductions without an identity (max, argmax, ...) refuse empty reductions."""
    if dims is None:
        if input.numel() == 0:
            raise _empty_full_error(name)
        return
    for d in dims:
        if input.ndim > 0 and input.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _empty_full_error(name):
    return RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                        f"input.numel() == 0. Specify the reduction dim with the 'dim' "
                        f"argument.")


def _no_complex(dtype, kernel, numel=1):
    """PyTorch's kernels reject complex inputs, but only when there is something to do."""
    if dtype.is_complex and numel:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype.scalar_name}'")


REAL_DTYPES = frozenset(d for d in D.ALL_DTYPES if not d.is_complex)
INEXACT_DTYPES = frozenset(d for d in D.ALL_DTYPES if d.is_floating_point or d.is_complex)


def _declare(name, kernel, **kwargs):
    """A reduction op. PyTorch allocates every reduction's results contiguous (keepdim or
    not, whatever the input's layout), so they are laid out so whichever kernel made them."""
    return structured.declare(name, kernel, family="reduction", layout="contiguous", **kwargs)


# --- sums, products, means ----------------------------------------------------------------------

def _sum_kernel(a, dim=None, keepdim=False, dtype=None, overload=1, nan_as_zero=False):
    target = dtype.numpy_dtype
    # dtype= converts the input before summing (no copy when it already has that dtype:
    # the sum below makes a new array).
    work = a.astype(_accumulator(target), copy=False)
    if nan_as_zero and work.dtype.kind == "f":
        work = np.where(np.isnan(work), 0, work)
    # np.add.reduce is what np.sum runs for an ndarray, without np.sum's Python-level
    # dispatch (~2 us: a noticeable share of a small sum, the backward of every broadcast)
    total = np.add.reduce(work, axis=_axis(a, dim), keepdims=bool(keepdim))
    return total.astype(target, copy=False)


def _nansum_kernel(a, dim=None, keepdim=False, dtype=None):
    return _sum_kernel(a, dim, keepdim, dtype, nan_as_zero=True)


SUM = _declare("sum", _sum_kernel,
               params={"dim": None, "keepdim": False, "dtype": None, "overload": 1})
NANSUM = _declare("nansum", _nansum_kernel, params={"dim": None, "keepdim": False, "dtype": None})


def sum(input, dim=_UNSET, keepdim=False, *, dtype=None, out=None):
    """Sum over `dim` (every dim when left out); bool and integer sums are int64."""
    if dim is _UNSET:  # the common `t.sum()`: every dim, SumBackward0
        dims, overload = None, 0
    else:
        dims, overload = reduce_dims(dim, input.ndim), 1  # SumBackward1
    result = dtype if dtype is not None else _long_if_integral(input.dtype)
    return structured.run(SUM, (input,), {"dim": dims, "keepdim": keepdim, "dtype": result,
                                          "overload": overload}, out=out)


def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Sum treating NaN as zero."""
    dims = reduce_dims(dim, input.ndim)
    if input.dtype.is_complex:
        raise RuntimeError("nansum on CPU does not support complex inputs")
    result = dtype if dtype is not None else _long_if_integral(input.dtype)
    return structured.run(NANSUM, (input,), {"dim": dims, "keepdim": keepdim,
                                             "dtype": result}, out=out)


# A product's order of multiplication is part of its bits. Multiplying in index order
# chains every step on the last, so no implementation can run it wide; this order can:
# lane j (j < PROD_LANES) multiplies elements j, j + 64, j + 128, ... in order, the lanes
# are then folded as a tree (lane j times lane j + w, for w = 32, 16, ..., 1), and the last
# n % 64 elements follow in order. A run shorter than 64 is multiplied in index order.
# (PyTorch's CPU order is another one again, vectorized; its results agree within rounding.)
PROD_LANES = 64


def _lane_product(work, axis):
    """The product of `work` along `axis` (None: all of it, in C order) in the lane order."""
    rows = work.reshape(-1) if axis is None else np.moveaxis(work, axis, -1)
    n = rows.shape[-1]
    body = n - n % PROD_LANES
    if body == 0:   # (a reduce along the last axis multiplies in index order)
        return np.multiply.reduce(rows, axis=-1)
    blocks = rows[..., :body].reshape(rows.shape[:-1] + (body // PROD_LANES, PROD_LANES))
    lanes = np.multiply.reduce(blocks, axis=-2)          # each lane down its blocks, in order
    while lanes.shape[-1] > 1:
        half = lanes.shape[-1] // 2
        lanes = lanes[..., :half] * lanes[..., half:]
    return np.multiply.reduce(np.concatenate([lanes, rows[..., body:]], axis=-1), axis=-1)


def _prod_kernel(a, dim=None, keepdim=False, dtype=None):
    target = dtype.numpy_dtype
    work = a.astype(_accumulator(target))
    axis = _axis(a, dim)
    result = _lane_product(work, None if axis is None else axis[0])
    if keepdim:
        result = result.reshape(tuple(1 if axis is None or d in axis else n
                                      for d, n in enumerate(a.shape)))
    return np.asarray(result).astype(target)


PROD = _declare("prod", _prod_kernel, params={"dim": None, "keepdim": False, "dtype": None})


def prod(input, dim=_UNSET, keepdim=False, *, dtype=None, out=None):
    """Product of all elements, or over one dim (an int: PyTorch takes no tuple here)."""
    dims = None if isinstance(dim, _Unset) else (_single_dim(dim, input.ndim, "prod"),)
    result = dtype if dtype is not None else _long_if_integral(input.dtype)
    return structured.run(PROD, (input,), {"dim": dims, "keepdim": keepdim, "dtype": result},
                          out=out)


def _mean_kernel(a, dim=None, keepdim=False, dtype=None, overload=1):
    target = dtype.numpy_dtype
    work = a.astype(_accumulator(target))
    total = np.add.reduce(work, axis=_axis(a, dim), keepdims=bool(keepdim))  # np.sum's core
    count = _reduced_numel(a.shape, _axis(a, dim))
    return (total / work.dtype.type(count) if count else total * np.nan).astype(target)


MEAN = _declare("mean", _mean_kernel,
                params={"dim": None, "keepdim": False, "dtype": None, "overload": 1})


def mean(input, dim=_UNSET, keepdim=False, *, dtype=None, out=None):
    """Arithmetic mean; integer inputs need dtype= (PyTorch cannot infer a result dtype)."""
    if dtype is None:
        _check_floating(input, "mean")
    elif not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"mean(): could not infer output dtype. Optional dtype must be "
                           f"either a floating point or complex dtype. Got: "
                           f"{dtype.scalar_name}")
    if dim is _UNSET:  # the common `t.mean()`: every dim, MeanBackward0
        dims, overload = None, 0
    else:
        dims, overload = reduce_dims(dim, input.ndim), 1
    return structured.run(MEAN, (input,), {"dim": dims, "keepdim": keepdim,
                                           "dtype": dtype or input.dtype,
                                           "overload": overload}, out=out)


def nanmean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Mean of the non-NaN elements: nansum / count (PyTorch composes it the same way)."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                           f"dtype but got {input.dtype.scalar_name}")
    count = sum((input == input), dim, keepdim)  # NaN is the one value unequal to itself
    result = nansum(input, dim, keepdim, dtype=dtype) / count
    if out is not None:
        return structured.write_out(out, result)
    return result


# --- variance and standard deviation -----------------------------------------------------------

def _variance(a, dim, keepdim, correction):
    work = a.astype(_accumulator(a.dtype))
    axis = _axis(a, dim)
    count = _reduced_numel(a.shape, axis)
    with np.errstate(divide="ignore", invalid="ignore"):  # an empty mean is NaN
        centre = np.sum(work, axis=axis, keepdims=True) / work.dtype.type(count)
    deviation = work - centre
    squares = (deviation * np.conj(deviation)).real if work.dtype.kind == "c" else \
        deviation * deviation
    dof = _py_max(count - correction, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.sum(squares, axis=axis, keepdims=bool(keepdim)) / squares.dtype.type(dof)
    if keepdim:
        mean_ = centre
    elif axis is None:
        mean_ = centre.reshape(())
    else:
        mean_ = np.squeeze(centre, axis=axis)
    return var, mean_


def _real_numpy(np_dtype):
    return D.from_numpy_dtype(np.dtype(np_dtype)).to_real().numpy_dtype if \
        np.dtype(np_dtype).kind == "c" else np.dtype(np_dtype)


def _var_kernel(a, dim=None, keepdim=False, correction=1):
    return _variance(a, dim, keepdim, correction)[0].astype(_real_numpy(a.dtype))


def _std_kernel(a, dim=None, keepdim=False, correction=1):
    return np.sqrt(_variance(a, dim, keepdim, correction)[0]).astype(_real_numpy(a.dtype))


def _var_mean_kernel(a, dim=None, keepdim=False, correction=1):
    var, mean_ = _variance(a, dim, keepdim, correction)
    return var.astype(_real_numpy(a.dtype)), np.asarray(mean_).astype(a.dtype)


def _std_mean_kernel(a, dim=None, keepdim=False, correction=1):
    var, mean_ = _variance(a, dim, keepdim, correction)
    return np.sqrt(var).astype(_real_numpy(a.dtype)), np.asarray(mean_).astype(a.dtype)


_VAR_PARAMS = {"dim": None, "keepdim": False, "correction": 1}
VAR = _declare("var", _var_kernel, params=_VAR_PARAMS)
STD = _declare("std", _std_kernel, params=_VAR_PARAMS)
VAR_MEAN = _declare("var_mean", _var_mean_kernel, params=_VAR_PARAMS)
STD_MEAN = _declare("std_mean", _std_mean_kernel, params=_VAR_PARAMS)


def _variance_args(input, dim, unbiased, keepdim, correction):
    """PyTorch's overloads: (dim, unbiased, keepdim), (unbiased), (dim, *, correction=)."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError("std and var only support floating point and complex dtypes")
    if isinstance(dim, bool):  # var(input, unbiased)
        dim, unbiased = None, dim
    if correction is not None and unbiased is not None:
        raise RuntimeError("Cannot specify both unbiased and correction")
    if correction is None:
        correction = 0 if unbiased is False else 1
    return {"dim": reduce_dims(dim, input.ndim), "keepdim": keepdim, "correction": correction}


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """Variance with Bessel's correction by default (correction=1)."""
    return structured.run(VAR, (input,), _variance_args(input, dim, unbiased, keepdim,
                                                        correction), out=out)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """Standard deviation: the square root of `var`."""
    return structured.run(STD, (input,), _variance_args(input, dim, unbiased, keepdim,
                                                        correction), out=out)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """(var, mean) as a plain tuple."""
    return tuple(structured.run(VAR_MEAN, (input,), _variance_args(
        input, dim, unbiased, keepdim, correction), out=out))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """(std, mean) as a plain tuple."""
    return tuple(structured.run(STD_MEAN, (input,), _variance_args(
        input, dim, unbiased, keepdim, correction), out=out))


# --- norms ------------------------------------------------------------------------------------

def vector_norm_array(a, p, dim, keepdim):
    """The p-norm of `a` over `dim` (PyTorch's linalg.vector_norm), in a's real dtype."""
    magnitude = np.abs(a.astype(_accumulator(a.dtype)))
    axis = _axis(a, dim)
    if p == math.inf:
        value = np.max(magnitude, axis=axis, keepdims=bool(keepdim))
    elif p == -math.inf:
        value = np.min(magnitude, axis=axis, keepdims=bool(keepdim))
    elif p == 0:
        value = np.sum(magnitude != 0, axis=axis, keepdims=bool(keepdim)).astype(
            magnitude.dtype)
    elif p == 1:
        value = np.sum(magnitude, axis=axis, keepdims=bool(keepdim))
    elif p == 2:
        value = np.sqrt(np.sum(magnitude * magnitude, axis=axis, keepdims=bool(keepdim)))
    else:
        value = np.sum(magnitude ** p, axis=axis, keepdims=bool(keepdim)) ** (1.0 / p)
    return np.asarray(value).astype(_real_numpy(a.dtype))


def _norm_kernel(a, p=2, dim=None, keepdim=False):
    return vector_norm_array(a, p, dim, keepdim)


NORM = _declare("norm", _norm_kernel, params={"p": 2, "dim": None, "keepdim": False})


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """Vector p-norm over `dim` (p: a number, inf, -inf or 'fro'). 'nuc' needs an SVD."""
    if p == "nuc":
        raise NotImplementedError("norm(p='nuc') needs singular values: use "
                                  "torch.linalg.matrix_norm (not available in reftorch yet)")
    if p is None or p == "fro":
        p = 2
    if isinstance(p, str):
        raise RuntimeError(f"norm(): unsupported norm type {p!r}")
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {input.dtype.scalar_name}")
    if dtype is not None:
        if input.dtype.is_complex and not dtype.is_complex:
            raise RuntimeError(f"linalg.vector_norm: dtype should be complex for complex "
                               f"inputs, but got {dtype.scalar_name}")
        input = input.to(dtype)
    dims = reduce_dims(dim, input.ndim)
    if (p < 0 or p == math.inf) and _empty_reduction(input, dims):
        shown = "inf" if p == math.inf else p
        raise RuntimeError(f"linalg.vector_norm cannot compute the {shown} norm on an empty "
                           f"tensor because the operation does not have an identity")
    return structured.run(NORM, (input,), {"p": float(p), "dim": dims, "keepdim": keepdim},
                          out=out)


def _empty_reduction(input, dims):
    if dims is None:
        return input.numel() == 0
    return input.ndim > 0 and _py_any(input.shape[d] == 0 for d in dims)


def _dist_kernel(a, b, p=2, dtype=None):
    difference = a.astype(dtype.numpy_dtype) - b.astype(dtype.numpy_dtype)
    return vector_norm_array(difference, p, None, False)


DIST = _declare("dist", _dist_kernel, params={"p": 2, "dtype": None})


def dist(input, other, p=2):
    """The p-norm of `input - other` (broadcast)."""
    if input.dtype == D.bool and other.dtype == D.bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    common = result_dtype([input, other])
    if not (common.is_floating_point or common.is_complex):
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. "
                           f"Got {common.scalar_name} instead.")
    return structured.run(DIST, (input, other), {"p": float(p), "dtype": common})


def _logsumexp_kernel(a, dim=None, keepdim=False, dtype=None):
    work = a.astype(_accumulator(dtype.numpy_dtype))
    axis = _axis(a, dim)
    if work.size == 0:
        return np.log(np.sum(np.exp(work), axis=axis, keepdims=bool(keepdim))).astype(
            dtype.numpy_dtype)
    # Shift by the largest (real part) so exp cannot overflow; an infinite shift is skipped.
    shift = np.max(work.real, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0)
    value = np.log(np.sum(np.exp(work - shift), axis=axis, keepdims=True)) + shift
    if not keepdim:
        value = value.reshape(np.sum(work, axis=axis).shape)
    return value.astype(dtype.numpy_dtype)


LOGSUMEXP = _declare("logsumexp", _logsumexp_kernel,
                     params={"dim": None, "keepdim": False, "dtype": None})


def logsumexp(input, dim, keepdim=False, *, out=None):
    """log(sum(exp(input))) over `dim`, computed without overflow; integers give floats."""
    result = input.dtype if input.dtype.is_floating_point or input.dtype.is_complex else \
        D.get_default_dtype()
    return structured.run(LOGSUMEXP, (input,), {"dim": reduce_dims(dim, input.ndim),
                                                "keepdim": keepdim, "dtype": result}, out=out)


# --- scans ------------------------------------------------------------------------------------

def _scan(ufunc, a, dim, target):
    """ufunc.accumulate along `dim` in the accumulator dtype, then rounded to `target`."""
    work = a.astype(_accumulator(target)).reshape(a.shape or (1,))
    return ufunc.accumulate(work, axis=dim).reshape(a.shape).astype(target)


def _cumsum_kernel(a, dim=0, dtype=None):
    return _scan(np.add, a, dim, dtype.numpy_dtype)


def _cumprod_kernel(a, dim=0, dtype=None):
    return _scan(np.multiply, a, dim, dtype.numpy_dtype)


def _logcumsumexp_kernel(a, dim=0):
    if a.dtype.kind != "c":
        return _scan(np.logaddexp, a, dim, a.dtype)
    # NumPy's logaddexp is real only: shift each slice by its largest real part instead.
    work = a.reshape(a.shape or (1,))
    shift = np.max(work.real, axis=dim, keepdims=True) if work.size else 0
    shift = np.where(np.isfinite(shift), shift, 0)
    value = np.log(np.cumsum(np.exp(work - shift), axis=dim)) + shift
    return value.reshape(a.shape).astype(a.dtype)


CUMSUM = _declare("cumsum", _cumsum_kernel, params={"dim": 0, "dtype": None})
CUMPROD = _declare("cumprod", _cumprod_kernel, params={"dim": 0, "dtype": None})
LOGCUMSUMEXP = _declare("logcumsumexp", _logcumsumexp_kernel,
                        params={"dim": 0}, dtypes=INEXACT_DTYPES)


def cumsum(input, dim, *, dtype=None, out=None):
    """Running sum along `dim`; bool and integer inputs accumulate in int64."""
    result = dtype if dtype is not None else _long_if_integral(input.dtype)
    return structured.run(CUMSUM, (input,), {"dim": wrap_dim(dim, input.ndim),
                                             "dtype": result}, out=out)


def cumprod(input, dim, *, dtype=None, out=None):
    """Running product along `dim`; bool and integer inputs accumulate in int64."""
    result = dtype if dtype is not None else _long_if_integral(input.dtype)
    return structured.run(CUMPROD, (input,), {"dim": wrap_dim(dim, input.ndim),
                                              "dtype": result}, out=out)


def logcumsumexp(input, dim, *, out=None):
    """Running log(sum(exp(input))) along `dim`."""
    dim = wrap_dim(dim, input.ndim)
    if input.dtype.category <= D.Category.INTEGER:
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    return structured.run(LOGCUMSUMEXP, (input,), {"dim": dim}, out=out)


def _running_extreme(ufunc, a, dim):
    """Values and indices of cummax/cummin.

    PyTorch's index is the LAST position holding the running extreme (ties move the index
    forward), and NaN, once seen, is the extreme; every later NaN moves the index too.
    """
    shape = a.shape
    work = a.reshape(shape or (1,))
    values = ufunc.accumulate(work, axis=dim)
    nan = np.isnan(work) if work.dtype.kind == "f" or work.dtype == D.bfloat16.numpy_dtype \
        else np.zeros(work.shape, bool)
    holds = (work == values) | nan
    positions = np.arange(work.shape[dim]).reshape(
        [-1 if d == dim else 1 for d in range(work.ndim)])
    indices = np.maximum.accumulate(np.where(holds, positions, 0), axis=dim)
    return values.reshape(shape), indices.astype(np.int64).reshape(shape)


def _cummax_kernel(a, dim=0):
    return _running_extreme(np.maximum, a, dim)


def _cummin_kernel(a, dim=0):
    return _running_extreme(np.minimum, a, dim)


CUMMAX = _declare("cummax", _cummax_kernel, params={"dim": 0})
CUMMIN = _declare("cummin", _cummin_kernel, params={"dim": 0})


def _cumulative_extreme(op, name, input, dim, out):
    dim = wrap_dim(dim, input.ndim)
    if input.ndim > 0 and input.numel() > 0:  # PyTorch never reaches its kernel otherwise
        _no_complex(input.dtype, f"{name}_cpu")
    return _named(name, structured.run(op, (input,), {"dim": dim}, out=out), out)


def cummax(input, dim, *, out=None):
    """Running maximum along `dim` and the index where it was found."""
    return _cumulative_extreme(CUMMAX, "cummax", input, dim, out)


def cummin(input, dim, *, out=None):
    """Running minimum along `dim` and the index where it was found."""
    return _cumulative_extreme(CUMMIN, "cummin", input, dim, out)


# --- arg-extrema and extrema ------------------------------------------------------------------

def _as_comparable(a):
    """Half types compare exactly in float32 (NumPy's ml_dtypes lack some reductions)."""
    return a.astype(np.float32) if a.dtype == D.bfloat16.numpy_dtype else a


def _arg_kernel(a, dim=None, keepdim=False, largest=True):
    # np.argmax/argmin return the first NaN when there is one: PyTorch treats NaN as the
    # extreme in both directions, and ties go to the first index.
    work = _as_comparable(a)
    pick = np.argmax if largest else np.argmin
    if dim is None or a.ndim == 0:
        index = pick(work.reshape(-1))
        shape = (1,) * a.ndim if keepdim else ()
        return np.asarray(index, dtype=np.int64).reshape(shape)
    return pick(work, axis=dim[0], keepdims=bool(keepdim)).astype(np.int64)


def _argmax_kernel(a, dim=None, keepdim=False):
    return _arg_kernel(a, dim, keepdim, largest=True)


def _argmin_kernel(a, dim=None, keepdim=False):
    return _arg_kernel(a, dim, keepdim, largest=False)


ARGMAX = _declare("argmax", _argmax_kernel, params={"dim": None, "keepdim": False})
ARGMIN = _declare("argmin", _argmin_kernel, params={"dim": None, "keepdim": False})


def _argextreme(op, name, input, dim, keepdim, out):
    if input.dtype == D.bool:
        raise RuntimeError(f"{name}(): does not support bool input")
    if input.dtype.is_complex:
        raise RuntimeError(f"{name}(): does not support complex input")
    dims = None if dim is None else (_single_dim(dim, input.ndim, name),)
    if dims is None and input.numel() == 0:
        raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                         f"input.numel() == 0.")
    _check_nonempty(input, dims, name)
    return structured.run(op, (input,), {"dim": dims, "keepdim": keepdim}, out=out)


def argmax(input, dim=None, keepdim=False, *, out=None):
    """Index of the largest element (flattened when dim is None); the first among ties."""
    return _argextreme(ARGMAX, "argmax", input, dim, keepdim, out)


def argmin(input, dim=None, keepdim=False, *, out=None):
    """Index of the smallest element (flattened when dim is None); the first among ties."""
    return _argextreme(ARGMIN, "argmin", input, dim, keepdim, out)


def _extreme_kernel(a, dim=None, keepdim=False, largest=True):
    # np.max/np.min propagate NaN, as PyTorch's max/min/amax/amin do.
    work = _as_comparable(a)
    reduce = np.max if largest else np.min
    return reduce(work, axis=_axis(a, dim), keepdims=bool(keepdim)).astype(a.dtype)


def _extreme_dim_kernel(a, dim=0, keepdim=False, largest=True):
    work = _as_comparable(a)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    index = (np.argmax if largest else np.argmin)(work, axis=dim, keepdims=True)
    values = np.take_along_axis(a, index, axis=dim)
    if not keepdim:
        values, index = np.squeeze(values, axis=dim), np.squeeze(index, axis=dim)
    return values, index.astype(np.int64)


def _aminmax_kernel(a, dim=None, keepdim=False):
    return (_extreme_kernel(a, dim, keepdim, largest=False),
            _extreme_kernel(a, dim, keepdim, largest=True))


def _max_kernel(a, dim=None, keepdim=False):
    return _extreme_kernel(a, dim, keepdim, largest=True)


def _min_kernel(a, dim=None, keepdim=False):
    return _extreme_kernel(a, dim, keepdim, largest=False)


def _max_dim_kernel(a, dim=0, keepdim=False):
    return _extreme_dim_kernel(a, dim, keepdim, largest=True)


def _min_dim_kernel(a, dim=0, keepdim=False):
    return _extreme_dim_kernel(a, dim, keepdim, largest=False)


_EXTREME_PARAMS = {"dim": None, "keepdim": False}
MAX = _declare("max", _max_kernel, params=_EXTREME_PARAMS)
MIN = _declare("min", _min_kernel, params=_EXTREME_PARAMS)
AMAX = _declare("amax", _max_kernel, params=_EXTREME_PARAMS)
AMIN = _declare("amin", _min_kernel, params=_EXTREME_PARAMS)
MAX_DIM = _declare("max.dim", _max_dim_kernel, params={"dim": 0, "keepdim": False})
MIN_DIM = _declare("min.dim", _min_dim_kernel, params={"dim": 0, "keepdim": False})
AMINMAX = _declare("aminmax", _aminmax_kernel, params=_EXTREME_PARAMS)


def _extreme(name, full_op, dim_op, elementwise, input, dim, keepdim, out):
    if isinstance(dim, Tensor):  # max(input, other): the elementwise maximum
        return elementwise(input, dim, out=out) if out is not None else elementwise(input, dim)
    if dim is None:
        _no_complex(input.dtype, f"{name}_all")
        if input.numel() == 0:
            raise _empty_full_error(name)
        return structured.run(full_op, (input,), {"dim": None, "keepdim": False}, out=out)
    d = _single_dim(dim, input.ndim, name)
    _check_nonempty(input, (d,), name)
    _no_complex(input.dtype, f"{name}_cpu")
    result = structured.run(dim_op, (input,), {"dim": d, "keepdim": keepdim}, out=out)
    return _named(name, result, out)


def _named(name, result, out):
    """The named tuple PyTorch returns: `<name>_out` when the results went to out=."""
    return return_types.named(name + ("_out" if out is not None else ""), result)


def max(input, dim=None, keepdim=False, *, out=None):
    """max(input): the largest element; max(input, dim): (values, indices); max(input, other):
    the elementwise maximum. NaN propagates."""
    import reftorch
    return _extreme("max", MAX, MAX_DIM, reftorch.maximum if isinstance(dim, Tensor) else None,
                    input, dim, keepdim, out)


def min(input, dim=None, keepdim=False, *, out=None):
    """min(input), min(input, dim) -> (values, indices), min(input, other) (elementwise)."""
    import reftorch
    return _extreme("min", MIN, MIN_DIM, reftorch.minimum if isinstance(dim, Tensor) else None,
                    input, dim, keepdim, out)


def _amax_like(op, name, input, dim, keepdim, out):
    dims = reduce_dims(dim, input.ndim)
    if dims is None and input.numel() == 0:
        raise _empty_full_error(name)
    _check_nonempty(input, dims, name)
    _no_complex(input.dtype, f"{name[1:]}_values_cpu", input.numel())
    return structured.run(op, (input,), {"dim": dims, "keepdim": keepdim}, out=out)


def amax(input, dim=(), keepdim=False, *, out=None):
    """Largest elements over `dim` (an int or tuple; all dims when empty)."""
    return _amax_like(AMAX, "amax", input, dim, keepdim, out)


def amin(input, dim=(), keepdim=False, *, out=None):
    """Smallest elements over `dim` (an int or tuple; all dims when empty)."""
    return _amax_like(AMIN, "amin", input, dim, keepdim, out)


def aminmax(input, *, dim=None, keepdim=False, out=None):
    """(min, max) over one dim or every element."""
    dims = None if dim is None else (_single_dim(dim, input.ndim, "aminmax"),)
    if _empty_reduction(input, dims):
        if dims is None:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        raise IndexError(f"aminmax(): Expected reduction dim {dims[0]} to have non-zero size.")
    _no_complex(input.dtype, "aminmax_cpu", 1 if dims else input.numel())
    result = structured.run(AMINMAX, (input,), {"dim": dims, "keepdim": keepdim}, out=out)
    return _named("aminmax", result, out)


# --- medians and modes ------------------------------------------------------------------------

def _is_nan(a):
    return np.isnan(a) if a.dtype.kind in "fc" else np.zeros(a.shape, bool)


def _median_along_last(a, ignore_nan):
    """Lower median of each row of `a` (..., n) and its index in the row.

    NaN sorts last; median propagates NaN (a row with NaN has median NaN, at the first NaN),
    nanmedian takes the lower median of the row's other elements.
    """
    work = _as_comparable(a)
    order = np.argsort(work, axis=-1, kind="stable")
    nans = _is_nan(work)
    count = np.sum(~nans, axis=-1, keepdims=True)
    if ignore_nan:
        rank = np.maximum(count - 1, 0) // 2
    else:
        rank = np.where(count < a.shape[-1], count, (a.shape[-1] - 1) // 2)
    index = np.take_along_axis(order, rank, axis=-1)
    values = np.take_along_axis(a, index, axis=-1)
    return values[..., 0], index[..., 0].astype(np.int64)


def _median_kernel(a, ignore_nan=False):
    if a.size == 0:  # PyTorch returns NaN converted to the dtype (as C converts it)
        return np.array(np.nan).astype(a.dtype)
    return _median_along_last(a.reshape(1, -1), ignore_nan)[0].reshape(())


def _nanmedian_kernel(a):
    return _median_kernel(a, ignore_nan=True)


def _nanmedian_dim_kernel(a, dim=0, keepdim=False):
    return _median_dim_kernel(a, dim, keepdim, ignore_nan=True)


def _median_dim_kernel(a, dim=0, keepdim=False, ignore_nan=False):
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    values, index = _median_along_last(np.moveaxis(a, dim, -1), ignore_nan)
    if keepdim:
        values, index = np.expand_dims(values, dim), np.expand_dims(index, dim)
    return values, index


MEDIAN = _declare("median", _median_kernel)
NANMEDIAN = _declare("nanmedian", _nanmedian_kernel)
MEDIAN_DIM = _declare("median.dim", _median_dim_kernel, params={"dim": 0, "keepdim": False})
NANMEDIAN_DIM = _declare("nanmedian.dim", _nanmedian_dim_kernel,
                         params={"dim": 0, "keepdim": False})


def _median(name, full_op, dim_op, input, dim, keepdim, out):
    refused = input.dtype.is_complex or input.dtype == D.bool
    if dim is None:
        if refused and input.numel():
            raise NotImplementedError(f"\"median_cpu\" not implemented for "
                                      f"'{input.dtype.scalar_name}'")
        return structured.run(full_op, (input,), {}, out=out)
    d = _single_dim(dim, input.ndim, name)
    _check_nonempty(input, (d,), name)
    if refused:
        raise NotImplementedError(f"\"median_out\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    result = structured.run(dim_op, (input,), {"dim": d, "keepdim": keepdim}, out=out)
    return _named(name, result, out)


def median(input, dim=None, keepdim=False, *, out=None):
    """The lower median (of all elements, or along `dim` with its index); NaN propagates."""
    return _median("median", MEDIAN, MEDIAN_DIM, input, dim, keepdim, out)


def nanmedian(input, dim=None, keepdim=False, *, out=None):
    """The lower median ignoring NaN."""
    return _median("nanmedian", NANMEDIAN, NANMEDIAN_DIM, input, dim, keepdim, out)


def _mode_kernel(a, dim=-1, keepdim=False):
    """Most frequent value along `dim` (the smallest among equally frequent ones) and the
    last index where it occurs, as PyTorch's CPU kernel reports."""
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    rows = np.moveaxis(a, dim, -1)
    lead, n = rows.shape[:-1], rows.shape[-1]
    rows = rows.reshape(-1, n)
    ordered = np.sort(_as_comparable(rows), axis=-1)
    positions = np.broadcast_to(np.arange(n), ordered.shape)
    starts = np.ones(ordered.shape, bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    run_start = np.maximum.accumulate(np.where(starts, positions, 0), axis=-1)
    run_length = positions - run_start + 1          # length of the run up to each element
    best = np.argmax(run_length == run_length.max(axis=-1, keepdims=True), axis=-1)
    value = np.take_along_axis(ordered, best[:, None], axis=-1)
    matches = _as_comparable(rows) == value
    last = n - 1 - np.argmax(matches[:, ::-1], axis=-1)
    values = np.take_along_axis(rows, last[:, None], axis=-1)[:, 0].reshape(lead)
    index = last.astype(np.int64).reshape(lead)
    if keepdim:
        values, index = np.expand_dims(values, dim), np.expand_dims(index, dim)
    return values, index


MODE = _declare("mode", _mode_kernel, params={"dim": -1, "keepdim": False})


def mode(input, dim=-1, keepdim=False, *, out=None):
    """(values, indices) of the most frequent value along `dim`."""
    d = _single_dim(dim, input.ndim, "mode")
    _check_nonempty(input, (d,), "mode")
    _no_complex(input.dtype, "mode_cpu", input.ndim and input.numel())
    result = structured.run(MODE, (input,), {"dim": d, "keepdim": keepdim}, out=out)
    return _named("mode", result, out)


# --- logical reductions and counting -----------------------------------------------------------

def _all_kernel(a, dim=None, keepdim=False):
    return _logical_kernel(a, dim, keepdim, every=True)


def _any_kernel(a, dim=None, keepdim=False):
    return _logical_kernel(a, dim, keepdim, every=False)


def _logical_kernel(a, dim=None, keepdim=False, every=True):
    truth = (np.all if every else np.any)(a != 0, axis=_axis(a, dim), keepdims=bool(keepdim))
    # PyTorch keeps uint8 for uint8 inputs (a legacy of byte masks); everything else is bool.
    return truth.astype(np.uint8 if a.dtype == np.uint8 else bool)


def _count_nonzero_kernel(a, dim=None):
    return np.asarray(np.count_nonzero(a, axis=_axis(a, dim))).astype(np.int64)


ALL = _declare("all", _all_kernel, params={"dim": None, "keepdim": False})
ANY = _declare("any", _any_kernel, params={"dim": None, "keepdim": False})
COUNT_NONZERO = _declare("count_nonzero", _count_nonzero_kernel, params={"dim": None})


def all(input, dim=None, keepdim=False, *, out=None):
    """True where every element (over `dim`) is nonzero."""
    return structured.run(ALL, (input,), {"dim": reduce_dims(dim, input.ndim),
                                          "keepdim": keepdim}, out=out)


def any(input, dim=None, keepdim=False, *, out=None):
    """True where some element (over `dim`) is nonzero."""
    return structured.run(ANY, (input,), {"dim": reduce_dims(dim, input.ndim),
                                          "keepdim": keepdim}, out=out)


def count_nonzero(input, dim=None):
    """Number of nonzero elements (over `dim`), as int64."""
    return structured.run(COUNT_NONZERO, (input,), {"dim": reduce_dims(dim, input.ndim)})


# --- quantiles --------------------------------------------------------------------------------

def _quantile_kernel(a, q, dim=None, keepdim=False, interpolation="linear", ignore_nan=False):
    axis = None if dim is None or a.ndim == 0 else dim
    work = a.reshape(-1) if axis is None else a
    fn = np.nanquantile if ignore_nan else np.quantile
    value = fn(work, q, axis=0 if axis is None else axis, method=interpolation)
    if not ignore_nan:
        # np.quantile's linear interpolation may turn a NaN row into a number; PyTorch
        # propagates NaN from any element of the slice.
        has_nan = np.any(np.isnan(work), axis=0 if axis is None else axis)
        value = np.where(has_nan, np.nan, value)
    if keepdim:
        q_lead = np.ndim(q)
        kept = (1,) * a.ndim if axis is None else tuple(
            1 if d == axis else s for d, s in enumerate(a.shape))
        value = np.asarray(value).reshape(np.shape(q) + kept) if q_lead else \
            np.asarray(value).reshape(kept)
    return np.asarray(value).astype(a.dtype)


QUANTILE = _declare("quantile", _quantile_kernel,
                    params={"dim": None, "keepdim": False, "interpolation": "linear"},
                    dtypes={D.float32, D.float64})


def _nanquantile_kernel(a, q, dim=None, keepdim=False, interpolation="linear"):
    return _quantile_kernel(a, q, dim, keepdim, interpolation, ignore_nan=True)


NANQUANTILE = _declare("nanquantile", _nanquantile_kernel,
                       params={"dim": None, "keepdim": False, "interpolation": "linear"},
                       dtypes={D.float32, D.float64})

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile_weights(a, q, dim=None, keepdim=False, interpolation="linear", ignore_nan=False):
    """How much each element of `a` contributes to each quantile: shape (len(q), *a.shape).

    A quantile interpolates between the two order statistics around rank q * (n - 1); these
    weights are its derivative (piecewise constant in `a`), which the gradient row uses.
    """
    qs = np.asarray(q, np.float64).reshape(-1)
    moved = a.reshape(1, -1) if dim is None or a.ndim == 0 else np.moveaxis(a, dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    order = np.argsort(rows, axis=-1, kind="stable")                  # NaN sorts last
    counts = np.sum(~np.isnan(rows), axis=-1) if ignore_nan else np.full(len(rows),
                                                                         rows.shape[-1])
    last = np.maximum(counts - 1, 0)
    weights = np.zeros((len(qs),) + rows.shape, a.dtype)
    for i, value in enumerate(qs):   # a loop over the few requested quantiles
        rank = value * last
        low, high = np.floor(rank).astype(np.int64), np.ceil(rank).astype(np.int64)
        upper_share = {"linear": rank - low, "lower": np.zeros_like(rank),
                       "higher": np.ones_like(rank), "midpoint": np.full_like(rank, 0.5),
                       "nearest": (np.round(rank) == high).astype(np.float64)}[interpolation]
        upper_share = np.where(low == high, 0.0, upper_share)
        for position, share in ((low, 1 - upper_share), (high, upper_share)):
            columns = np.take_along_axis(order, position[:, None], axis=-1)
            current = np.take_along_axis(weights[i], columns, axis=-1)
            np.put_along_axis(weights[i], columns, current + share[:, None], axis=-1)
    weights = weights.reshape((len(qs),) + moved.shape)
    if not (dim is None or a.ndim == 0):
        weights = np.moveaxis(weights, -1, dim + 1)
    return weights.reshape((len(qs),) + a.shape)


QUANTILE_WEIGHTS = structured.declare("_quantile_weights", quantile_weights,
                                      family="reduction",
                                      params={"dim": None, "keepdim": False,
                                              "interpolation": "linear", "ignore_nan": False})


def _quantile(op, name, input, q, dim, keepdim, interpolation, out):
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest. Got {interpolation}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        q_values = q._host_array() if hasattr(q, "_host_array") else q._np
    else:
        q_values = np.asarray(float(q))
    if np.any((q_values < 0) | (q_values > 1)):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    d = None if dim is None else wrap_dim(dim, input.ndim)
    q_param = tuple(np.asarray(q_values, np.float64).reshape(-1).tolist())
    q_param = q_param if np.ndim(q_values) else q_param[0]
    return structured.run(op, (input, q_param), {"dim": d, "keepdim": keepdim,
                                                 "interpolation": interpolation}, out=out)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-th quantiles over `dim` (all elements when None); NaN propagates."""
    return _quantile(QUANTILE, "quantile", input, q, dim, keepdim, interpolation, out)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-th quantiles ignoring NaN."""
    return _quantile(NANQUANTILE, "nanquantile", input, q, dim, keepdim, interpolation, out)


# --- unique -----------------------------------------------------------------------------------

def _rows_along(a, dim):
    """`a` as (size of dim, rest): one row per slice along `dim`, for whole-slice comparisons."""
    moved = np.moveaxis(a, dim, 0)
    return moved.reshape(moved.shape[0], math.prod(moved.shape[1:])), moved.shape


def _unique_kernel(a, dim=None, return_inverse=False, return_counts=False):
    work = _as_comparable(a)
    if dim is None:
        values, inverse, counts = np.unique(work.reshape(-1), return_inverse=True,
                                            return_counts=True)
        inverse = inverse.reshape(a.shape)
        values = values.astype(a.dtype)
    else:
        rows, moved_shape = _rows_along(work, dim)
        if rows.shape[1] == 0:
            raise RuntimeError("unique(): cannot unique along a dim when another dim has "
                               "size zero")
        values, inverse, counts = np.unique(rows, axis=0, return_inverse=True,
                                            return_counts=True)
        values = np.moveaxis(values.astype(a.dtype).reshape((-1,) + moved_shape[1:]), 0, dim)
        inverse = inverse.reshape(-1)
    return values, inverse.astype(np.int64), counts.astype(np.int64)


def _unique_consecutive_kernel(a, dim=None, return_inverse=False, return_counts=False):
    work = _as_comparable(a)
    rows, moved_shape = _rows_along(work.reshape(-1) if dim is None else work,
                                    0 if dim is None else dim)
    n = rows.shape[0]
    starts = np.ones(n, bool)
    starts[1:] = np.any(rows[1:] != rows[:-1], axis=1) if rows.shape[1] else False
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), n))
    kept = rows[starts].astype(a.dtype)
    if dim is None:
        values, inverse = kept.reshape(-1), inverse.reshape(a.shape)
    else:
        values = np.moveaxis(kept.reshape((-1,) + moved_shape[1:]), 0, dim)
    return values, inverse.astype(np.int64), counts.astype(np.int64)


UNIQUE = _declare("unique", _unique_kernel,
                  params={"dim": None, "return_inverse": False, "return_counts": False},
                  dtypes=REAL_DTYPES)
UNIQUE_CONSECUTIVE = _declare("unique_consecutive", _unique_consecutive_kernel,
                              params={"dim": None, "return_inverse": False,
                                      "return_counts": False}, dtypes=REAL_DTYPES)


def _unique(op, input, return_inverse, return_counts, dim):
    _no_complex(input.dtype, "unique")
    d = None if dim is None else wrap_dim(dim, input.ndim)
    values, inverse, counts = structured.run(op, (input,), {"dim": d})
    extra = ([inverse] if return_inverse else []) + ([counts] if return_counts else [])
    return (values, *extra) if extra else values


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted), optionally with the inverse map and the counts."""
    return _unique(UNIQUE, input, return_inverse, return_counts, dim)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Drop consecutive repeats (runs of equal elements, or of equal slices along `dim`)."""
    return _unique(UNIQUE_CONSECUTIVE, input, return_inverse, return_counts, dim)


# --- Tensor methods ---------------------------------------------------------------------------

for _name in __all__:
    if _name in ("var_mean", "std_mean"):
        continue  # functions only: torch.Tensor has no var_mean / std_mean
    setattr(Tensor, _name, globals()[_name])  # a function on the class binds self as input
del _name
