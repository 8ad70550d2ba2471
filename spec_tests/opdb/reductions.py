"""Op-database entries: reductions (see core.py for the entry format).

Most reductions share one sample plan (`_reduce`): full reductions over several shapes
(0-dim and empty included), non-contiguous layouts, a single dim (negative too), a tuple of
dims, keepdim, the Tensor-method form, and bad dims. Per-op extras add dtype=, out= and the
op's own keywords.
"""
from __future__ import annotations

import numpy as np

from . import FLOATING, INTEGRAL
from .core import OpInfo, Sample, TensorArg, DTypeArg, tensor  # noqa: F401

FLOAT_COMPLEX = FLOATING + ("complex64", "complex128")


def _call(name):
    """Call `module.name(x, ...)`, or `x.name(...)` when the sample passes method=True."""
    def call(module, x, *args, method=False, **kwargs):
        if method:
            return getattr(x, name)(*args, **kwargs)
        return getattr(module, name)(x, *args, **kwargs)
    return call


def _out(dtype_name):
    return TensorArg(np.zeros((0,)), dtype_name, requires_grad=False)


def _reduce(*, full=True, tuples=True, keepdim=True, positional_keepdim=True, scalar_dim=True):
    """Samples for an op called as op(x), op(x, dim), op(x, dim, keepdim)."""
    def samples(dtype, rng):
        if full:
            for shape in [(3, 4), (), (0,), (2, 0, 3)]:
                yield Sample((tensor(shape, dtype, rng),), {}, f"{shape} full")
            yield Sample((tensor((3, 4), dtype, rng, "transposed"),), {"method": True},
                         "transposed method")
        yield Sample((tensor((3, 4), dtype, rng, "transposed"), 0), {}, "transposed dim=0")
        kw = {"keepdim": True} if keepdim else {}
        yield Sample((tensor((3, 4), dtype, rng, "strided"), -1), kw, "strided dim=-1")
        yield Sample((tensor((2, 3, 4), dtype, rng), 1), {"method": True, **kw},
                     "(2,3,4) dim=1 method")
        yield Sample((tensor((2, 0, 3), dtype, rng), 0), {}, "(2,0,3) dim=0")
        yield Sample((tensor((2, 0, 3), dtype, rng), 1), {}, "(2,0,3) dim=1 (empty)")
        if scalar_dim:
            yield Sample((tensor((), dtype, rng), 0), {}, "() dim=0")
        if tuples:
            yield Sample((tensor((2, 3, 4), dtype, rng), (0, 2)), {}, "dim=(0,2)")
            yield Sample((tensor((2, 3, 4), dtype, rng, "strided"), (-1, 0)), kw,
                         "strided dim=(-1,0)")
            yield Sample((tensor((3, 4), dtype, rng), (0, 0)), {}, "repeated dim")
        if keepdim and positional_keepdim:
            yield Sample((tensor((3, 4), dtype, rng), 1, True), {}, "positional keepdim")
        yield Sample((tensor((3, 4), dtype, rng), 2), {}, "dim out of range")
    return samples


def _with(base, extra):
    """Base samples followed by `extra(dtype, rng)`."""
    def samples(dtype, rng):
        yield from base(dtype, rng)
        yield from extra(dtype, rng)
    return samples


def _dtype_and_out(result_for):
    """dtype= variants and out= into a tensor of the result dtype (`result_for(dtype)`)."""
    def extra(dtype, rng):
        yield Sample((tensor((3, 4), dtype, rng),), {"dtype": DTypeArg("float64")},
                     "dtype=float64")
        yield Sample((tensor((2, 3, 4), dtype, rng), 1), {"dtype": DTypeArg("int32")},
                     "dim=1 dtype=int32")
        result = result_for(dtype)
        if result:
            yield Sample((tensor((3, 4), dtype, rng), 0), {"out": _out(result)}, "out=")
    return extra


def _integral_to_long(dtype):
    return "int64" if dtype in ("bool",) + INTEGRAL else dtype


def _same_if_inexact(dtype):
    return dtype if dtype in FLOAT_COMPLEX else None


def _variance_extra(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), 0), {"correction": 0}, "correction=0")
    yield Sample((tensor((3, 4), dtype, rng), (0, 1)), {"correction": 2, "keepdim": True},
                 "correction=2 keepdim")
    yield Sample((tensor((3, 4), dtype, rng), 1, False), {}, "unbiased=False positional")
    yield Sample((tensor((5,), dtype, rng), False), {}, "var(x, unbiased)")
    yield Sample((tensor((1,), dtype, rng),), {}, "one element (dof 0)")


def _norm_samples(dtype, rng):
    for p in (2, 1, 3, 0.5, float("inf"), float("-inf"), 0, "fro"):
        yield Sample((tensor((3, 4), dtype, rng), p), {}, f"p={p}")
    yield Sample((tensor((2, 3, 4), dtype, rng, "strided"), 3, (0, 2)), {"keepdim": True},
                 "p=3 dim=(0,2)")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"),), {"dim": -1, "p": 1}, "dim=-1")
    yield Sample((tensor((2, 0, 3), dtype, rng),), {"dim": 1}, "empty dim")
    yield Sample((tensor((0,), dtype, rng), float("inf")), {}, "empty inf-norm")
    yield Sample((tensor((), dtype, rng),), {"method": True}, "0-dim method")
    yield Sample((tensor((3, 4), dtype, rng),), {"dtype": DTypeArg("float64")}, "dtype=")
    if dtype not in LARGE_DTYPES:
        return
    for p in (2, 1, 0, float("inf"), float("-inf"), 3):
        yield Sample((tensor((40, 300), dtype, rng), p), {}, f"large p={p}")
    yield Sample((tensor((40, 300), dtype, rng, "transposed"), 2, 1), {}, "large transposed dim=1")
    yield Sample((tensor((20, 10, 30), dtype, rng, "strided"), 1, (1, 2)), {"keepdim": True},
                 "large strided p=1 dim=(1,2)")
    yield Sample((tensor((40, 300), dtype, rng), 4, 0), {}, "large p=4 dim=0")


def _dist_samples(dtype, rng):
    # p=0 is left out: torch's own DistBackward fails on it (undefined gradient).
    for p in (2, 1, 3, float("inf")):
        yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng), p), {},
                     f"p={p}")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), tensor((4,), dtype, rng)), {},
                 "broadcast")
    yield Sample((tensor((), dtype, rng), tensor((), dtype, rng)), {"method": True},
                 "0-dim method")
    yield Sample((tensor((0,), dtype, rng), tensor((0,), dtype, rng)), {}, "empty")


def _scan(dtype_kw):
    def samples(dtype, rng):
        yield Sample((tensor((3, 4), dtype, rng), 0), {}, "dim=0")
        yield Sample((tensor((3, 4), dtype, rng, "transposed"), -1), {"method": True},
                     "transposed dim=-1 method")
        yield Sample((tensor((2, 3, 4), dtype, rng, "strided"), 1), {}, "strided dim=1")
        yield Sample((tensor((), dtype, rng), 0), {}, "0-dim")
        yield Sample((tensor((2, 0, 3), dtype, rng), 2), {}, "empty")
        yield Sample((tensor((6,), dtype, rng, small=True), 0), {}, "small values (ties)")
        yield Sample((tensor((3, 4), dtype, rng), 2), {}, "dim out of range")
        if dtype_kw:
            yield Sample((tensor((3, 4), dtype, rng), 1), {"dtype": DTypeArg("float64")},
                         "dtype=float64")
            yield Sample((tensor((3, 4), dtype, rng), 0), {"dtype": DTypeArg("int8")},
                         "dtype=int8")
            if dtype in ("float32", "float64"):
                yield Sample((tensor((3, 4), dtype, rng), 0), {"out": _out(dtype)}, "out=")
    return samples


def _cumprod_extra(dtype, rng):
    # Zeros exercise the gradient's zero handling (one zero, two zeros in a row).
    values = np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 2.0], [1.0, 2.0, 0.5, 4.0]])
    yield Sample((TensorArg(values, dtype), 1), {}, "zeros")


def _exact_factors(shape, dtype, rng, layout="contiguous"):
    """Factors +-2^k (k in -1, 0, 1; mostly 0): every partial product is a power of two far
    from float32's overflow, so products agree in any order."""
    k = rng.choice([-1, 0, 1], size=shape, p=[0.05, 0.9, 0.05])
    sign = rng.choice([-1.0, 1.0], size=shape)
    return TensorArg(sign * 2.0 ** k, dtype, layout)


# Large samples (past the plugins' size thresholds and CPU blocks) in the dtypes plugins
# serve: half types overflow partial products, complex sums drift past the tolerances there.
LARGE_DTYPES = ("float32", "float64")


def _large_prod(dtype, rng):
    """Every dim, a row, a column of a large input (integers: nonzero factors up to 5, whose
    int64 products wrap)."""
    if dtype in ("bool",) + INTEGRAL:
        for shape, dim, layout in (((30, 200), None, "contiguous"), ((30, 200), 1, "transposed"),
                                   ((30, 200), 0, "strided")):
            x = tensor(shape, dtype, rng, layout, small=True, nonzero=True)
            yield Sample((x,) if dim is None else (x, dim), {}, f"large {layout} dim={dim}")
        return
    if dtype not in LARGE_DTYPES:
        return
    yield Sample((_exact_factors((30, 200), dtype, rng),), {}, "large full")
    yield Sample((_exact_factors((30, 200), dtype, rng, "transposed"), 1), {},
                 "large transposed dim=1")
    yield Sample((_exact_factors((30, 200), dtype, rng, "strided"), 0), {"keepdim": True},
                 "large strided dim=0 keepdim")


def _prod_samples(dtype, rng):
    yield from _reduce(tuples=False)(dtype, rng)
    yield from _large_prod(dtype, rng)
    yield Sample((TensorArg(np.array([[1.5, 0.0, 2.0], [0.0, 3.0, 0.0], [1.0, 2.0, 0.5]]),
                            dtype), 1), {}, "zeros per row")
    yield Sample((TensorArg(np.array([[1.5, 0.0], [2.0, 3.0]]), dtype),), {}, "one zero full")
    yield Sample((tensor((3, 4), dtype, rng), (0, 1)), {}, "tuple dim refused")
    yield from _dtype_and_out(_integral_to_long)(dtype, rng)


def _extreme_samples(dtype, rng):
    yield from _reduce(tuples=False)(dtype, rng)
    yield Sample((tensor((3, 4), dtype, rng), tensor((4,), dtype, rng)), {}, "max(other)")
    yield Sample((tensor((6, 2), dtype, rng, small=True), 0), {}, "ties (small values)")
    yield Sample((tensor((6, 2), dtype, rng, small=True),), {}, "ties full")
    if dtype in ("float32", "float64"):
        yield Sample((tensor((3, 4), dtype, rng), 1), {"out": (_out(dtype), _out("int64"))},
                     "out=(values, indices)")


def _ties(dtype, rng):
    yield Sample((tensor((6, 3), dtype, rng, small=True),), {}, "ties full")
    yield Sample((tensor((6, 3), dtype, rng, small=True), 0), {"keepdim": True}, "ties dim")
    yield Sample((tensor((3, 4), dtype, rng),), {"keepdim": True}, "full keepdim")


def _argextreme_samples(dtype, rng):
    yield from _reduce(tuples=False)(dtype, rng)
    yield from _ties(dtype, rng)


def _aminmax_samples(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng),), {}, "full")
    yield Sample((tensor((), dtype, rng),), {"method": True}, "0-dim method")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"),), {"dim": 0}, "dim=0")
    yield Sample((tensor((2, 3, 4), dtype, rng, "strided"),), {"dim": -1, "keepdim": True},
                 "dim=-1 keepdim")
    yield Sample((tensor((0,), dtype, rng),), {}, "empty full")
    yield Sample((tensor((2, 0, 3), dtype, rng),), {"dim": 0}, "empty dim=0")
    yield Sample((tensor((2, 0, 3), dtype, rng),), {"dim": 1}, "empty reduced dim")
    yield Sample((tensor((3, 4), dtype, rng),), {"dim": 3}, "dim out of range")


def _median_samples(dtype, rng):
    for shape in [(3, 4), (5,), (), (0,)]:
        yield Sample((tensor(shape, dtype, rng),), {}, f"{shape} full")
    yield Sample((tensor((3, 5), dtype, rng, "transposed"), 0), {}, "dim=0 odd")
    yield Sample((tensor((2, 3, 5), dtype, rng, "strided"), -1), {"keepdim": True,
                                                                 "method": True},
                 "dim=-1 keepdim method")
    yield Sample((tensor((2, 0, 3), dtype, rng), 0), {}, "empty kept dim")
    yield Sample((tensor((2, 0, 3), dtype, rng), 1), {}, "empty reduced dim")
    yield Sample((tensor((), dtype, rng), 0), {}, "0-dim dim=0")
    yield Sample((tensor((3, 4), dtype, rng), 2), {}, "dim out of range")


def _mode_samples(dtype, rng):
    yield Sample((tensor((3, 7), dtype, rng, small=True),), {}, "default dim=-1")
    yield Sample((tensor((7, 3), dtype, rng, small=True, layout="transposed"), 0), {},
                 "transposed dim=0")
    yield Sample((tensor((2, 3, 6), dtype, rng, small=True), 1), {"keepdim": True,
                                                                 "method": True},
                 "keepdim method")
    yield Sample((tensor((3, 4), dtype, rng),), {}, "distinct-ish values")
    yield Sample((tensor((), dtype, rng),), {}, "0-dim")
    yield Sample((tensor((2, 0, 3), dtype, rng), 1), {}, "empty reduced dim")
    yield Sample((tensor((3, 4), dtype, rng), 2), {}, "dim out of range")


def _quantile_samples(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), 0.3), {}, "q=0.3 full")
    yield Sample((tensor((3, 5), dtype, rng, "transposed"), 0.5), {"dim": 0}, "median dim 0")
    for how in ("lower", "higher", "midpoint", "nearest"):
        yield Sample((tensor((2, 7), dtype, rng), 0.4), {"dim": 1, "interpolation": how},
                     how)
    yield Sample((tensor((2, 3, 4), dtype, rng, "strided"),
                  TensorArg(np.array([0.1, 0.5, 0.9]), dtype, requires_grad=False)),
                 {"dim": -1, "keepdim": True}, "q tensor keepdim")
    yield Sample((tensor((3, 4), dtype, rng), TensorArg(np.array(0.25), dtype,
                                                        requires_grad=False)),
                 {"keepdim": True, "method": True}, "0-dim q keepdim full method")
    yield Sample((tensor((), dtype, rng), 0.5), {}, "0-dim input")
    yield Sample((tensor((0,), dtype, rng), 0.5), {}, "empty")
    yield Sample((tensor((3, 4), dtype, rng), 1.5), {}, "q out of range")
    yield Sample((tensor((3, 4), dtype, rng), 0.5), {"interpolation": "cubic"}, "bad mode")


def _unique_samples(dtype, rng):
    yield Sample((tensor((4, 5), dtype, rng, small=True),), {}, "plain")
    yield Sample((tensor((4, 5), dtype, rng, small=True, layout="transposed"),),
                 {"return_inverse": True, "return_counts": True}, "inverse counts")
    yield Sample((tensor((6,), dtype, rng, small=True),), {"return_counts": True,
                                                          "method": True}, "counts method")
    yield Sample((tensor((), dtype, rng),), {"return_inverse": True}, "0-dim")
    yield Sample((tensor((0,), dtype, rng),), {"return_counts": True}, "empty")
    yield Sample((TensorArg(np.array([[1, 2], [0, 1], [1, 2], [0, 1]]), dtype),),
                 {"dim": 0, "return_inverse": True, "return_counts": True}, "rows dim=0")
    yield Sample((TensorArg(np.array([[1, 0, 1], [2, 1, 2]]), dtype),), {"dim": 1},
                 "columns dim=1")


def _unique_consecutive_samples(dtype, rng):
    yield Sample((tensor((12,), dtype, rng, small=True),), {}, "plain")
    yield Sample((tensor((3, 4), dtype, rng, small=True, layout="transposed"),),
                 {"return_inverse": True, "return_counts": True}, "inverse counts 2-d")
    yield Sample((tensor((), dtype, rng),), {"return_counts": True, "method": True}, "0-dim")
    yield Sample((tensor((0,), dtype, rng),), {"return_inverse": True}, "empty")
    yield Sample((TensorArg(np.array([[1, 2], [1, 2], [0, 1], [1, 2]]), dtype),),
                 {"dim": 0, "return_inverse": True, "return_counts": True}, "rows dim=0")


def _logical_samples(dtype, rng):
    yield from _reduce()(dtype, rng)
    yield Sample((tensor((4, 5), dtype, rng, small=True),), {"dim": 1}, "small values")
    yield Sample((tensor((2, 3), dtype, rng, nonzero=True),), {}, "all nonzero")


def _count_nonzero_samples(dtype, rng):
    yield Sample((tensor((4, 5), dtype, rng, small=True),), {}, "full")
    yield Sample((tensor((4, 5), dtype, rng, small=True, layout="transposed"),), {"dim": 0},
                 "dim=0")
    yield Sample((tensor((2, 3, 4), dtype, rng, small=True),), {"dim": (0, -1),
                                                              "method": True}, "dim tuple")
    yield Sample((tensor((), dtype, rng),), {}, "0-dim")
    yield Sample((tensor((2, 0, 3), dtype, rng),), {"dim": 1}, "empty")
    yield Sample((tensor((3, 4), dtype, rng),), {"dim": 2}, "dim out of range")


def _logsumexp_samples(dtype, rng):
    yield from _reduce(full=False)(dtype, rng)
    if dtype in ("float32", "float64"):
        yield Sample((tensor((3, 4), dtype, rng), 1), {"out": _out(dtype)}, "out=")


def _nanmean_extra(dtype, rng):
    if dtype in FLOATING:
        values = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [2.0, 4.0, -1.0]])
        yield Sample((TensorArg(values, dtype, requires_grad=False),), {}, "NaN full")
        yield Sample((TensorArg(values, dtype, requires_grad=False), 1), {}, "NaN dim=1")


OPS = [
    OpInfo("sum", _call("sum"), _with(_reduce(), _dtype_and_out(_integral_to_long))),
    OpInfo("nansum", _call("nansum"), _with(_with(_reduce(), _nanmean_extra),
                                            _dtype_and_out(_integral_to_long))),
    OpInfo("prod", _call("prod"), _prod_samples),
    OpInfo("mean", _call("mean"), _with(_reduce(), _dtype_and_out(_same_if_inexact))),
    OpInfo("nanmean", _call("nanmean"), _with(_reduce(), _nanmean_extra)),
    OpInfo("var", _call("var"), _with(_reduce(positional_keepdim=False), _variance_extra)),
    OpInfo("std", _call("std"), _with(_reduce(positional_keepdim=False), _variance_extra)),
    OpInfo("var_mean", _call("var_mean"), _with(_reduce(positional_keepdim=False),
                                                _variance_extra)),
    OpInfo("std_mean", _call("std_mean"), _with(_reduce(positional_keepdim=False),
                                                _variance_extra)),
    OpInfo("norm", _call("norm"), _norm_samples),
    OpInfo("dist", _call("dist"), _dist_samples),
    OpInfo("logsumexp", _call("logsumexp"), _logsumexp_samples),
    OpInfo("cumsum", _call("cumsum"), _scan(dtype_kw=True)),
    OpInfo("cumprod", _call("cumprod"), _with(_scan(dtype_kw=True), _cumprod_extra)),
    OpInfo("logcumsumexp", _call("logcumsumexp"), _scan(dtype_kw=False)),
    OpInfo("cummax", _call("cummax"), _scan(dtype_kw=False)),
    OpInfo("cummin", _call("cummin"), _scan(dtype_kw=False)),
    OpInfo("argmax", _call("argmax"), _argextreme_samples, differentiable=False),
    OpInfo("argmin", _call("argmin"), _argextreme_samples, differentiable=False),
    OpInfo("max", _call("max"), _extreme_samples),
    OpInfo("min", _call("min"), _extreme_samples),
    OpInfo("amax", _call("amax"), _with(_reduce(), _ties)),
    OpInfo("amin", _call("amin"), _with(_reduce(), _ties)),
    OpInfo("aminmax", _call("aminmax"), _aminmax_samples),
    OpInfo("median", _call("median"), _median_samples),
    OpInfo("nanmedian", _call("nanmedian"), _median_samples),
    OpInfo("mode", _call("mode"), _mode_samples),
    OpInfo("all", _call("all"), _logical_samples, differentiable=False),
    OpInfo("any", _call("any"), _logical_samples, differentiable=False),
    OpInfo("count_nonzero", _call("count_nonzero"), _count_nonzero_samples,
           differentiable=False),
    OpInfo("quantile", _call("quantile"), _quantile_samples),
    OpInfo("nanquantile", _call("nanquantile"), _quantile_samples),
    OpInfo("unique", _call("unique"), _unique_samples, differentiable=False),
    OpInfo("unique_consecutive", _call("unique_consecutive"), _unique_consecutive_samples,
           differentiable=False),
]
