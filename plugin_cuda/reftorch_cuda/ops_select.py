"""Comparisons, where and clamp on cuda (kernels/select.cu): exact results, so bit for bit the
reference's.

  eq, ne, lt, le, gt, ge   both inputs of the common dtype (floats, bool, int32, int64) -> bool
  where                    a bool condition and two inputs of the result dtype, any dtype of
                           1 to 16 bytes (the kernel moves elements by width)
  clamp                    x, low, high of one float dtype (Python-number bounds arrive as
  clamp_min, clamp_max     0-dim tensors of x's dtype for float32/float64)

For float16/bfloat16, a Python number arrives as a 0-dim float32 tensor, used unrounded (see
kernel_base.operand_types): comparisons take it as the second operand, clamps as the bounds,
where as either value. Any other mix of dtypes (an int64 tensor compared with a float one, a
float64 0-dim bound) declines: the reference converts it first.
"""
from __future__ import annotations

from reftorch import _dtype as D
from reftorch._dispatch import get_op

from .kernel_base import (FLOAT_TYPES, HALF_TYPES, INT_TYPES, WORDS, Program, all_of_dtype,
                          operand_types, run_elementwise, scalar_pairs)

COMPARE_OPS = {"eq": "EqOp", "ne": "NeOp", "lt": "LtOp", "le": "LeOp", "gt": "GtOp",
               "ge": "GeOp"}
COMPARE_TYPES = {**FLOAT_TYPES, **{name: INT_TYPES[name] for name in ("bool", "int32", "int64")}}
BOUND_OPS = {"clamp_min": "MaximumOp", "clamp_max": "MinimumOp"}


def compare_expression(op_name, dtype_name, scalar=False):
    """`scalar`: the second operand is a float scalar of a 16-bit comparison."""
    extra = ", float" if scalar else ""
    return f"compare_kernel<{COMPARE_TYPES[dtype_name]}, {COMPARE_OPS[op_name]}{extra}>"


def where_expression(itemsize):
    return f"where_kernel<{WORDS[itemsize]}>"


def where_scalar_expression(dtype_name, types):
    return f"where_scalar_kernel<{FLOAT_TYPES[dtype_name]}, {types[0]}, {types[1]}>"


def clamp_expression(op_name, dtype_name, scalar=False):
    """`scalar`: the bounds are float scalars of a 16-bit clamp."""
    extra = ", float" if scalar else ""
    if op_name == "clamp":
        return f"clamp_kernel<{FLOAT_TYPES[dtype_name]}{extra}>"
    return f"bound_kernel<{FLOAT_TYPES[dtype_name]}, {BOUND_OPS[op_name]}{extra}>"


SELECT = Program("select.cu", tuple(
    [compare_expression(op, name) for op in COMPARE_OPS for name in COMPARE_TYPES]
    + [compare_expression(op, name, True) for op in COMPARE_OPS for name in HALF_TYPES]
    + [where_expression(width) for width in WORDS]
    + [where_scalar_expression(name, types) for name in HALF_TYPES
       for types in scalar_pairs(name)]
    + [clamp_expression(op, name) for op in ("clamp", *BOUND_OPS) for name in FLOAT_TYPES]
    + [clamp_expression(op, name, True) for op in ("clamp", *BOUND_OPS)
       for name in HALF_TYPES]))
PROGRAMS = (SELECT,)


def _is_scalar_form(types, dtype_name):
    """Whether every input but the first is a float scalar of a 16-bit op (the first, x or a,
    has the op's own type); False for the plain same-type form."""
    return types[0] == FLOAT_TYPES.get(dtype_name) != "float" and \
        all(t == "float" for t in types[1:])


def compare_kernel(op_name):
    def kernel(out, inputs, dtypes, params):
        common, _computation, result = dtypes
        if len(inputs) != 2 or common.name not in COMPARE_TYPES or result is not D.bool:
            return NotImplemented
        if all_of_dtype(inputs, common):
            expression = compare_expression(op_name, common.name)
        else:
            types = operand_types(inputs, dtypes)
            if types is None or not _is_scalar_form(types, common.name):
                return NotImplemented
            expression = compare_expression(op_name, common.name, scalar=True)
        return run_elementwise(SELECT, expression, out, inputs, result)
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def where_kernel(out, inputs, dtypes, params):
    """where(condition, a, b): condition bool, a and b of the result dtype (or one of them a
    float scalar of a 16-bit result)."""
    result = dtypes[2]
    if len(inputs) != 3 or result.itemsize not in WORDS or inputs[0].dtype is not D.bool:
        return NotImplemented
    if all_of_dtype(inputs[1:], result):
        expression = where_expression(result.itemsize)
    else:
        types = operand_types(inputs[1:], dtypes) if result is dtypes[0] else None
        expression = types and where_scalar_expression(result.name, types)
        if not SELECT.has(expression):
            return NotImplemented
    return run_elementwise(SELECT, expression, out, inputs, result)


where_kernel.__name__ = "cuda_where"


def clamp_kernel(op_name):
    arity = 3 if op_name == "clamp" else 2
    number_params = get_op(op_name).number_params

    def kernel(out, inputs, dtypes, params):
        common, _computation, result = dtypes
        if len(inputs) != arity or common.name not in FLOAT_TYPES or result is not common:
            return NotImplemented
        if all_of_dtype(inputs, common):
            expression = clamp_expression(op_name, common.name)
        else:
            types = operand_types(inputs, dtypes)
            if types is None or not _is_scalar_form(types, common.name):
                return NotImplemented
            expression = clamp_expression(op_name, common.name, scalar=True)
        return run_elementwise(SELECT, expression, out, inputs, result,
                               number_params=number_params)
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def register_kernels(registrar):
    for op_name in COMPARE_OPS:
        registrar.kernel(op_name, "cuda", [D.by_name(n) for n in COMPARE_TYPES],
                         compare_kernel(op_name))
    registrar.kernel("where", "cuda", [d for d in D.ALL_DTYPES if d.itemsize in WORDS],
                     where_kernel)
    for op_name in ("clamp", *BOUND_OPS):
        registrar.kernel(op_name, "cuda", [D.by_name(n) for n in FLOAT_TYPES],
                         clamp_kernel(op_name))
