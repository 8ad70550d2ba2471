"""Reduction kernels over the C module `_reduce` (src/reduce.c), float32 and float64 on cpu:

    sum, mean            over every dim or any set of dims (keepdim)
    amax, amin, max, min over every dim or any set of dims (values only)
    max.dim, min.dim     values and int64 indices along one dim
    argmax, argmin       along one dim, or over the flattened tensor
    var, std             with any correction, over every dim or any set of dims
    logsumexp            over every dim or any set of dims
    prod                 over every dim or one dim (also bool / integer inputs into int64)
    norm                 p-norms (p = 2, 1, 0, inf, -inf, whole 3..8) over any dims
    cumsum               along one dim

How a call reaches C: the reduced dims must merge into ONE strided run and the kept dims
into at most two (O outer, I inner), so the C loop sees x as (O, I, R) with any strides.
That covers every reduction of a contiguous tensor over a block of adjacent dims (all dims,
the last dims, a leading dim, a middle dim), and transposed / sliced / expanded inputs whose
dims still merge. Other geometries (e.g. dims (0, 2) of a contiguous 3-D tensor) decline.

Results (see src/reduce.c for the orders):
  - sum, mean, var, std, logsumexp: a fixed blocked pairwise order that depends on the
    shape only, never on the thread count (rows of at most 1024 float32 / 512 float64 add
    their vector's lanes in an adjacent-pairs tree, longer rows in halves); it differs from
    NumPy's pairwise order, so the last bits may differ from the reference (relative error
    ~ eps * log2(n), as NumPy's).
    logsumexp: float32 uses the kernel's own vectorized exp (within 1 ulp), float64 the C
    library's; a row whose max is NaN or +-inf gives that max, as the reference does.
  - amax/amin/max/min/argmax/argmin/max.dim/min.dim: exact; NaN propagates, indices are the
    first occurrence (the first NaN when there is one), as the reference's.
  - cumsum: the reference's sequential order: bit-equal.
  - prod: the reference's lane order (64 lanes down each run in order, folded as a tree,
    then the tail in order; index order for runs under 64), over the elements' logical
    order (every dim: C order): bit-equal to the reference. Only rows run in parallel (a
    single row runs on one thread). Bool and integer inputs multiply into int64, wrapping
    as NumPy does: bit-equal in any order.
  - norm: p = inf, -inf and 0 (the largest / smallest magnitude, the count of nonzeros) are
    exact; p = 2 is sqrt of the sum of x * x, p = 1 the sum of |x|, whole p from 3 to
    MAX_INT_P (8) the sum of |x| * ... * |x| (p - 1 roundings per term where the reference's
    power rounds about once) ** (1 / p), summed in the order above: within the sums' rounding
    of the reference plus p ulp per term. Other p decline (see _norm_in_c). float32 p = 0
    declines rows longer than 2 ** 24 (a float32 count is exact below that).
Declined (the reference runs): other dtypes, a `dtype=` other than the input's (int64 for
integer prod), 0-dim or empty inputs, empty reductions, fewer than MIN_NUMEL elements, and
unmergeable geometries.
"""
from __future__ import annotations

import functools
import math

from reftorch import _dtype as D
from reftorch._shape import contiguous_strides
from reftorch._storage import CPUStorage
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold
from reftorch_plugins.geometry import coalesce

from . import _reduce as _R

# Calls reading fewer elements than this go to the reference kernel. Measured on a quiet
# 2-core x86-64 (float32, best of 7 x 400 calls, plugin / reference us): over every element
# of 32: sum 6.7 / 13.8, mean 6.4 / 9.7, amax 7.4 / 11.9, var 7.1 / 24.0; of 1,024: sum
# 6.8 / 8.9; sum(1) of (n/32, 32): 32 elements 8.7 / 8.1, 1,024: 9.4 / 9.7 (even);
# amax(1) of (1, 32) 10.0 / 12.2. Since the per-call overhead cuts the plugin wins from the
# smallest sizes measured; below 32 both cost a few microseconds.
MIN_NUMEL = 32

DTYPES = (D.float32, D.float64)
INT_DTYPES = (D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64)   # prod's int64 results


def register(registrar):
    """Register every reduction kernel with reftorch (called by reftorch_cpu.register)."""
    for name, code in (("sum", _R.SUM), ("mean", _R.MEAN)):
        registrar.kernel(name, "cpu", DTYPES, _summing_kernel(code))
    for name, code in (("amax", _R.AMAX), ("max", _R.AMAX), ("amin", _R.AMIN),
                       ("min", _R.AMIN)):
        registrar.kernel(name, "cpu", DTYPES, _values_kernel(code))
    for name, code in (("var", _R.VAR), ("std", _R.STD)):
        registrar.kernel(name, "cpu", DTYPES, _variance_kernel(code))
    registrar.kernel("logsumexp", "cpu", DTYPES, _summing_kernel(_R.LOGSUMEXP))
    registrar.kernel("prod", "cpu", DTYPES, _summing_kernel(_R.PROD))
    registrar.kernel("prod", "cpu", INT_DTYPES, int_prod_kernel)
    registrar.kernel("norm", "cpu", DTYPES, norm_kernel)
    registrar.kernel("max.dim", "cpu", DTYPES, _extreme_dim_kernel(_R.MAX_DIM))
    registrar.kernel("min.dim", "cpu", DTYPES, _extreme_dim_kernel(_R.MIN_DIM))
    registrar.kernel("argmax", "cpu", DTYPES, _arg_kernel(_R.ARGMAX))
    registrar.kernel("argmin", "cpu", DTYPES, _arg_kernel(_R.ARGMIN))
    registrar.kernel("cumsum", "cpu", DTYPES, cumsum_kernel)


# --- kernels ----------------------------------------------------------------------------------

def _summing_kernel(code):
    def kernel(out, inputs, dtypes, params):
        """sum / mean / logsumexp / prod over params['dim'] (None: every dim)."""
        x = _input(inputs)
        if x is None or params.get("dtype") is not x._storage.dtype:
            return NotImplemented
        # a product's order is the elements' logical one (sums keep memory order)
        return _reduce(code, x, params["dim"], params["keepdim"], in_order=code == _R.PROD)
    return kernel


def _values_kernel(code):
    def kernel(out, inputs, dtypes, params):
        """amax / amin (and max / min of every element): the extreme values only."""
        x = _input(inputs)
        if x is None:
            return NotImplemented
        return _reduce(code, x, params["dim"], params["keepdim"])
    return kernel


def _variance_kernel(code):
    def kernel(out, inputs, dtypes, params):
        """var / std with params['correction'] (a number)."""
        x = _input(inputs)
        correction = params.get("correction", 1)
        if x is None or type(correction) not in (int, float, bool):
            return NotImplemented
        return _reduce(code, x, params["dim"], params["keepdim"], float(correction))
    return kernel


def _extreme_dim_kernel(code):
    def kernel(out, inputs, dtypes, params):
        """max.dim / min.dim: (values, int64 indices) along one dim."""
        x = _input(inputs)
        if x is None:
            return NotImplemented
        return _reduce(code, x, (params["dim"],), params["keepdim"], in_order=True,
                       values=True, indices=True)
    return kernel


def _arg_kernel(code):
    def kernel(out, inputs, dtypes, params):
        """argmax / argmin along (d,) or over the flattened tensor (dim None)."""
        x = _input(inputs)
        if x is None:
            return NotImplemented
        # dim None: the flattened tensor, so the dims must merge in their logical order
        return _reduce(code, x, params["dim"], params["keepdim"], in_order=True,
                       values=False, indices=True)
    return kernel


def int_prod_kernel(out, inputs, dtypes, params):
    """prod of a bool / integer tensor into int64 (the default dtype; others decline)."""
    x = _input(inputs, INT_DTYPES)
    if x is None or params.get("dtype") is not D.int64:
        return NotImplemented
    return _reduce(None, x, params["dim"], params["keepdim"], result_dtype=D.int64)


def norm_kernel(out, inputs, dtypes, params):
    """The vector p-norm over params['dim'] (None: every dim); the result has x's dtype."""
    x = _input(inputs)
    p = params.get("p", 2)
    if x is None or type(p) not in (int, float) or not _norm_in_c(p):
        return NotImplemented
    if p == 0 and x._storage.dtype is D.float32 and _reduced_numel(x, params["dim"]) > 2 ** 24:
        return NotImplemented
    return _reduce(_R.NORM, x, params["dim"], params["keepdim"], float(p))


def cumsum_kernel(out, inputs, dtypes, params):
    """cumsum along params['dim'] (the result dtype must be the input's)."""
    x = _input(inputs)
    if x is None or params.get("dtype") is not x._storage.dtype:
        return NotImplemented
    shape, strides, d = x._shape, x._strides, params["dim"]
    kept = [k for k in range(len(shape)) if k != d]
    out_strides = contiguous_strides(tuple(shape))
    kept_shape, (kept_x, kept_out) = coalesce([shape[k] for k in kept],
                                              [[strides[k] for k in kept],
                                               [out_strides[k] for k in kept]])
    if len(kept_shape) > 2:
        return NotImplemented
    (O, I), (so, si), (oso, osi) = _outer_inner(kept_shape, kept_x, kept_out)
    result = Tensor._empty(shape, x._storage.dtype)
    _R.cumsum(x._storage.array, x._offset, (O, I, shape[d]), (so, si, strides[d]),
              result._storage.array, 0, (oso, osi, out_strides[d]))
    return result


# --- shared helpers ---------------------------------------------------------------------------

def _input(inputs, dtypes=DTYPES):
    """The one input, if the C kernels take it: a cpu tensor of one of `dtypes`, at least
    1-D, with at least MIN_NUMEL elements."""
    if len(inputs) != 1:
        return None
    x = inputs[0]
    if not isinstance(x, Tensor) or type(x._storage) is not CPUStorage:
        return None
    if x._storage.dtype not in dtypes or not x._shape or \
            math.prod(x._shape) < size_threshold(MIN_NUMEL):
        return None
    return x


def _norm_in_c(p):
    """p = 0, 1, 2, +-inf, or a whole p from 3 to MAX_INT_P (its terms as repeated products).
    Other p decline: the C library's pow per element ran about 3x slower than the reference's
    NumPy power (its own SIMD code) on a 2-core x86-64, 4M float32."""
    if math.isnan(p):
        return False
    return p in (0, 1, 2, math.inf, -math.inf) or (p == int(p) and 3 <= p <= _R.MAX_INT_P)


def _reduced_numel(x, dims):
    return math.prod(x._shape if dims is None else [x._shape[d] for d in dims])


def _reduce(code, x, dims, keepdim, param=0.0, in_order=False, values=True, indices=False,
            result_dtype=None):
    """Run reduction `code` of x over `dims` (None: all); NotImplemented if the geometry
    does not fit (O, I, R). `in_order` keeps the reduced dims in logical order (needed when
    an index into them is returned); otherwise they are ordered by stride, so any dense
    layout merges. `result_dtype` int64 (code None) runs the integer product instead."""
    plan = _plan(x._shape, x._strides, dims if dims is None else tuple(dims), keepdim,
                 in_order)
    if plan is None:
        return NotImplemented
    (sizes, x_strides, out_strides), result_shape = plan
    if result_dtype is D.int64:
        value = Tensor._empty(result_shape, D.int64)
        _R.prod_int(x._storage.array, x._offset, sizes, x_strides, value._storage.array, 0,
                    out_strides)
        return value
    dtype = x._storage.dtype
    value = Tensor._empty(result_shape, dtype) if values else None
    index = Tensor._empty(result_shape, D.int64) if indices else None
    _R.reduce(code, x._storage.array, x._offset, sizes, x_strides,
              None if value is None else value._storage.array, 0, out_strides,
              None if index is None else index._storage.array, 0, out_strides, param)
    if values and indices:
        return value, index
    return value if values else index


@functools.lru_cache(maxsize=4096)
def _plan(shape, strides, dims, keepdim, in_order):
    """(the (O, I, R) geometry, the result's shape) of reducing (shape, strides) over `dims`
    (a tuple, or None), or None when the geometry does not fit. Remembered per call shape:
    the merging below took more Python than the rest of the call (sum(0) of a (256, 512)
    tensor: 27 us of Python around a 14 us kernel)."""
    geometry = _loop_geometry(shape, strides, dims, in_order)
    return None if geometry is None else (geometry, _result_shape(shape, dims, keepdim))


def _result_shape(shape, dims, keepdim):
    if dims is None:
        return (1,) * len(shape) if keepdim else ()
    if keepdim:
        return tuple(1 if d in dims else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in dims)


def _loop_geometry(shape, strides, dims, in_order):
    """((O, I, R), x's (so, si, sr), out's (oso, osi)) for reducing x of (shape, strides)
    over `dims` (None: all), or None when the reduced dims do not merge into one run or the
    kept dims into two."""
    reduced = list(range(len(shape))) if dims is None else list(dims)
    if not in_order:
        reduced.sort(key=lambda d: -abs(strides[d]))
    reduced_shape, (reduced_strides,) = coalesce([shape[d] for d in reduced],
                                                 [[strides[d] for d in reduced]])
    if len(reduced_shape) != 1 or reduced_shape[0] == 0:
        return None
    kept = [d for d in range(len(shape)) if d not in reduced]
    kept_sizes = [shape[d] for d in kept]
    if 0 in kept_sizes:
        return None
    kept_shape, (kept_x, kept_out) = coalesce(kept_sizes, [[strides[d] for d in kept],
                                                           contiguous_strides(tuple(kept_sizes))])
    if len(kept_shape) > 2:
        return None
    (O, I), (so, si), (oso, osi) = _outer_inner(kept_shape, kept_x, kept_out)
    return (O, I, reduced_shape[0]), (so, si, reduced_strides[0]), (oso, osi)


def _outer_inner(shape, x_strides, out_strides):
    """(O, I), x's (so, si), out's (oso, osi) from at most two coalesced kept dims; one dim
    becomes the inner one (so a unit-stride column block runs down the reduced dim)."""
    if len(shape) == 2:
        return tuple(shape), tuple(x_strides), tuple(out_strides)
    return (1, shape[0]), (0, x_strides[0]), (0, out_strides[0])
