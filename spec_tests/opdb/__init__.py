"""The op database: one entry per op, read by every runner.

An entry says how to call the op on a module (`reftorch` or `torch`: their APIs agree), which
dtypes to sample, how to make valid values, and which keyword variants to try. Tolerances live
in TOLERANCES only. Adding an op to the spec tests means adding its entry here.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
               "float32", "float64", "complex64", "complex128")
INTEGRAL = ("uint8", "int8", "int16", "int32", "int64")
FLOATING = ("float16", "bfloat16", "float32", "float64")
COMPLEX = ("complex64", "complex128")

# (rtol, atol) per result dtype; integers and bool compare exactly.
TOLERANCES = {
    "float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7),
}


@dataclass
class OpEntry:
    name: str                          # the op's name in reftorch's registry
    call: Callable                     # call(module, *args, **kwargs) -> result
    arity: int = 2
    inplace: Callable | None = None    # inplace(self, *args, **kwargs): the Tensor.op_ form
    dtypes: tuple = DTYPE_NAMES
    nonzero_rhs: bool = False          # integer divisors must be nonzero for value samples
    small_rhs: bool = False            # rhs in [0, 5]: shift amounts, integer exponents
    kwargs: list = field(default_factory=lambda: [{}])
    scalars: tuple = (3, -2.5, True)   # Python numbers tried as the second operand
    differentiable: bool = True        # gradients checked against torch (float64)
    domain: tuple | None = None        # (low, high) for values of both operands (acos, log)


def _binary(name, method, has_inplace=True, **kw):
    inplace = (lambda a, b, **k: getattr(a, method + "_")(b, **k)) if has_inplace else None
    return OpEntry(name=name, call=lambda m, a, b, **k: getattr(m, name)(a, b, **k),
                   inplace=inplace, **kw)


def _unary(name, has_inplace=True, **kw):
    inplace = (lambda a, **k: getattr(a, name + "_")(**k)) if has_inplace else None
    return OpEntry(name=name, call=lambda m, a, **k: getattr(m, name)(a, **k), arity=1,
                   inplace=inplace, **kw)


def _bool_result(name, arity=1, **kw):
    """Classification and logic ops: bool results, no gradient."""
    make = _unary if arity == 1 else _binary
    args = (name,) if arity == 1 else (name, name)
    return make(*args, differentiable=False, **kw)


UNIT = (-0.95, 0.95)       # acos, asin, atanh
POSITIVE = (0.1, 6.0)      # log, sqrt, ...


POINTWISE = [
    _binary("add", "add", kwargs=[{}, {"alpha": 2}, {"alpha": 0.5}]),
    _binary("sub", "sub", kwargs=[{}, {"alpha": 3}]),
    _binary("mul", "mul"),
    _binary("div", "div", kwargs=[{}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}],
            nonzero_rhs=True),
    _binary("floor_divide", "floor_divide", nonzero_rhs=True, differentiable=False),
    _binary("remainder", "remainder", nonzero_rhs=True),
    _binary("pow", "pow", small_rhs=True, scalars=(2, 0.5, -1, True)),
    *(_binary(name, name, differentiable=False) for name in ("eq", "ne", "lt", "le", "gt", "ge")),
    _binary("bitwise_and", "bitwise_and", scalars=(3, True), differentiable=False),
    _binary("bitwise_or", "bitwise_or", scalars=(3, True), differentiable=False),
    _binary("bitwise_xor", "bitwise_xor", scalars=(3, True), differentiable=False),
    _binary("bitwise_left_shift", "bitwise_left_shift", small_rhs=True, scalars=(2,),
            differentiable=False),
    _binary("bitwise_right_shift", "bitwise_right_shift", small_rhs=True, scalars=(2,),
            differentiable=False),
    _unary("neg"), _unary("abs"), _unary("bitwise_not", differentiable=False),
    OpEntry(name="positive", call=lambda m, a: m.positive(a), arity=1),
    # --- pointwise math ---
    _unary("acos", domain=UNIT), _unary("asin", domain=UNIT), _unary("atan"),
    _unary("acosh", domain=(1.1, 6.0)), _unary("asinh"), _unary("atanh", domain=UNIT),
    _unary("cos"), _unary("cosh"), _unary("sin"), _unary("sinh"), _unary("tan"),
    _unary("tanh"), _unary("exp"), _unary("exp2"), _unary("expm1"),
    _unary("log", domain=POSITIVE), _unary("log10", domain=POSITIVE),
    _unary("log1p", domain=(-0.9, 6.0)), _unary("log2", domain=POSITIVE), _unary("sigmoid"),
    _unary("logit", domain=(0.02, 0.98), kwargs=[{}, {"eps": 0.2}]),
    _unary("reciprocal"), _unary("rsqrt", domain=POSITIVE), _unary("sqrt", domain=POSITIVE),
    _unary("square"), _unary("deg2rad"), _unary("rad2deg"),
    _unary("angle", has_inplace=False),
    _unary("ceil"), _unary("floor"), _unary("trunc"), _unary("fix"), _unary("frac"),
    _unary("round", kwargs=[{}, {"decimals": 2}, {"decimals": -1}]),
    _unary("sign"),
    # torch's gradient of real sgn is a ZeroTensor the gradient runner cannot read.
    _unary("sgn", differentiable=False), _unary("conj_physical"),
    OpEntry(name="conj", call=lambda m, a: m.conj(a).resolve_conj(), arity=1),
    _unary("nan_to_num", kwargs=[{}, {"nan": 1.5, "posinf": 100.0, "neginf": -100.0}]),
    *(_bool_result(name, has_inplace=False)
      for name in ("signbit", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal")),
    _bool_result("logical_not"),
    *(_bool_result(name, arity=2) for name in ("logical_and", "logical_or", "logical_xor")),
    _binary("atan2", "atan2"), _binary("arctan2", "arctan2"),
    _binary("hypot", "hypot"),
    _binary("logaddexp", "logaddexp", has_inplace=False),
    _binary("logaddexp2", "logaddexp2", has_inplace=False),
    _binary("copysign", "copysign"),
    _binary("heaviside", "heaviside", differentiable=False),
    *(_binary(name, name, has_inplace=False)
      for name in ("maximum", "minimum", "fmax", "fmin")),
    _binary("float_power", "float_power", small_rhs=True, scalars=(2, 0.5, -1)),
    _binary("xlogy", "xlogy", domain=POSITIVE, scalars=(3, 2.5, 0)),
    _binary("ldexp", "ldexp", small_rhs=True),
    _binary("nextafter", "nextafter", differentiable=False),
    _binary("fmod", "fmod", nonzero_rhs=True, scalars=(3, -2.5, 0)),
    _binary("gcd", "gcd", differentiable=False), _binary("lcm", "lcm", differentiable=False),
    _binary("clamp_min", "clamp_min", scalars=(3, -2.5, True)),
    _binary("clamp_max", "clamp_max", scalars=(3, -2.5, True)),
]

# Python operators and the op each one must agree with.
OPERATORS = {
    "+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floor_divide", "%": "remainder",
    "**": "pow", "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor",
    "<<": "bitwise_left_shift", ">>": "bitwise_right_shift", "==": "eq", "!=": "ne",
    "<": "lt", "<=": "le", ">": "gt", ">=": "ge",
}

from .pointwise_special import POINTWISE_SPECIAL  # noqa: E402 (needs the helpers above)

POINTWISE = POINTWISE + POINTWISE_SPECIAL
BY_NAME = {entry.name: entry for entry in POINTWISE}


def _ternary_entries():
    # Elementwise ops with three operands (clamp, lerp, addcmul, addcdiv, where) are OpInfos:
    # their samples need per-operand kinds (Number weights, None bounds, bool conditions).
    from .pointwise_ternary import OPS
    return OPS


BY_NAME.update({entry.name: entry for entry in _ternary_entries()})


def structured_ops():
    """Every OpInfo entry (ops that are not plain elementwise), from the group modules."""
    from . import (blas, indexing, linalg, nn_activation, nn_convolution, nn_embedding,
                   nn_loss, nn_normalization, nn_pooling, nn_vision, other, pointwise_ternary,
                   reductions, sorting, spectral, views)
    return [*reductions.OPS, *indexing.OPS, *sorting.OPS, *other.OPS, *views.OPS,
            *pointwise_ternary.OPS, *blas.OPS, *linalg.OPS, *spectral.OPS,
            *nn_activation.OPS, *nn_convolution.OPS, *nn_embedding.OPS, *nn_loss.OPS,
            *nn_normalization.OPS, *nn_pooling.OPS, *nn_vision.OPS]


def differentiable_ops():
    """Every differentiable op in the database, pointwise entries as OpInfos: what the
    gradient runners iterate over."""
    return [pointwise_as_opinfo(e) for e in POINTWISE if e.differentiable] + \
        [e for e in structured_ops() if e.differentiable]


def pointwise_as_opinfo(entry):
    """A pointwise entry as an OpInfo, so that gradient runners treat every op alike."""
    from .core import OpInfo, Sample, tensor
    from .samples import BINARY_SHAPES, UNARY_SHAPES, layouts

    def samples(dtype_name, rng):
        if entry.arity == 1:
            kwargs_cycle = itertools.cycle(entry.kwargs)
            for shape in UNARY_SHAPES:
                for layout in layouts(shape):
                    yield Sample((tensor(shape, dtype_name, rng, layout, domain=entry.domain),),
                                 dict(next(kwargs_cycle)), f"{shape}")
            return
        for (sa, sb), kwargs in zip(BINARY_SHAPES, itertools.cycle(entry.kwargs)):
            yield Sample((tensor(sa, dtype_name, rng, domain=entry.domain),
                          tensor(sb, dtype_name, rng, nonzero=entry.nonzero_rhs,
                                 small=entry.small_rhs, domain=entry.domain)),
                         dict(kwargs), f"{sa} {sb}")
    return OpInfo(name=entry.name, call=entry.call, samples=samples, dtypes=entry.dtypes,
                  differentiable=entry.differentiable)
