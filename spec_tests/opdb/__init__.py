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


def _binary(name, method, **kw):
    return OpEntry(name=name, call=lambda m, a, b, **k: getattr(m, name)(a, b, **k),
                   inplace=lambda a, b, **k: getattr(a, method + "_")(b, **k), **kw)


def _unary(name, **kw):
    return OpEntry(name=name, call=lambda m, a, **k: getattr(m, name)(a, **k), arity=1,
                   inplace=lambda a, **k: getattr(a, name + "_")(**k), **kw)


POINTWISE = [
    _binary("add", "add", kwargs=[{}, {"alpha": 2}, {"alpha": 0.5}]),
    _binary("sub", "sub", kwargs=[{}, {"alpha": 3}]),
    _binary("mul", "mul"),
    _binary("div", "div", kwargs=[{}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}],
            nonzero_rhs=True),
    _binary("floor_divide", "floor_divide", nonzero_rhs=True, differentiable=False),
    _binary("remainder", "remainder", nonzero_rhs=True),
    _binary("pow", "pow", small_rhs=True, scalars=(2, 0.5, True)),
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
]

# Python operators and the op each one must agree with.
OPERATORS = {
    "+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floor_divide", "%": "remainder",
    "**": "pow", "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor",
    "<<": "bitwise_left_shift", ">>": "bitwise_right_shift", "==": "eq", "!=": "ne",
    "<": "lt", "<=": "le", ">": "gt", ">=": "ge",
}

BY_NAME = {entry.name: entry for entry in POINTWISE}


def structured_ops():
    """Every OpInfo entry (ops that are not plain elementwise), from the group modules."""
    from . import indexing, other, reductions, sorting, views
    return [*reductions.OPS, *indexing.OPS, *sorting.OPS, *other.OPS, *views.OPS]


def pointwise_as_opinfo(entry):
    """A pointwise entry as an OpInfo, so that gradient runners treat every op alike."""
    from .core import OpInfo, Sample, tensor
    from .samples import BINARY_SHAPES, UNARY_SHAPES, layouts

    def samples(dtype_name, rng):
        if entry.arity == 1:
            for shape in UNARY_SHAPES:
                for layout in layouts(shape):
                    yield Sample((tensor(shape, dtype_name, rng, layout),), {}, f"{shape}")
            return
        for (sa, sb), kwargs in zip(BINARY_SHAPES, itertools.cycle(entry.kwargs)):
            yield Sample((tensor(sa, dtype_name, rng),
                          tensor(sb, dtype_name, rng, nonzero=entry.nonzero_rhs,
                                 small=entry.small_rhs)), dict(kwargs), f"{sa} {sb}")
    return OpInfo(name=entry.name, call=entry.call, samples=samples, dtypes=entry.dtypes,
                  differentiable=entry.differentiable)
