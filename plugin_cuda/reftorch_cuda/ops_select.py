"""Comparisons, where and clamp on cuda (kernels/select.cu): exact results, so bit for bit the
reference's.

  eq, ne, lt, le, gt, ge   both inputs of the common dtype (floats, bool, int32, int64) -> bool
  where                    a bool condition and two inputs of the result dtype, any dtype of
                           1 to 16 bytes (the kernel moves elements by width)
  clamp                    x, low, high of one float dtype (Python-number bounds arrive as
  clamp_min, clamp_max     0-dim tensors of x's dtype for float32/float64)

An input of another dtype than the common one (a float32 0-dim bound of a float16 tensor, an
int64 tensor compared with a float one) declines: the reference converts it first.
"""
from __future__ import annotations

from reftorch import _dtype as D

from .kernel_base import (FLOAT_TYPES, INT_TYPES, WORDS, Program, all_of_dtype,
                          run_elementwise)

COMPARE_OPS = {"eq": "EqOp", "ne": "NeOp", "lt": "LtOp", "le": "LeOp", "gt": "GtOp",
               "ge": "GeOp"}
COMPARE_TYPES = {**FLOAT_TYPES, **{name: INT_TYPES[name] for name in ("bool", "int32", "int64")}}
BOUND_OPS = {"clamp_min": "MaximumOp", "clamp_max": "MinimumOp"}


def compare_expression(op_name, dtype_name):
    return f"compare_kernel<{COMPARE_TYPES[dtype_name]}, {COMPARE_OPS[op_name]}>"


def where_expression(itemsize):
    return f"where_kernel<{WORDS[itemsize]}>"


def clamp_expression(op_name, dtype_name):
    if op_name == "clamp":
        return f"clamp_kernel<{FLOAT_TYPES[dtype_name]}>"
    return f"bound_kernel<{FLOAT_TYPES[dtype_name]}, {BOUND_OPS[op_name]}>"


SELECT = Program("select.cu", tuple(
    [compare_expression(op, name) for op in COMPARE_OPS for name in COMPARE_TYPES]
    + [where_expression(width) for width in WORDS]
    + [clamp_expression(op, name) for op in ("clamp", *BOUND_OPS) for name in FLOAT_TYPES]))
PROGRAMS = (SELECT,)


def compare_kernel(op_name):
    def kernel(out, inputs, dtypes, params):
        common, _computation, result = dtypes
        if len(inputs) != 2 or common.name not in COMPARE_TYPES or result is not D.bool:
            return NotImplemented
        if not all_of_dtype(inputs, common):
            return NotImplemented
        return run_elementwise(SELECT, compare_expression(op_name, common.name), out, inputs,
                               result)
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def where_kernel(out, inputs, dtypes, params):
    """where(condition, a, b): condition bool, a and b of the result dtype."""
    result = dtypes[2]
    if len(inputs) != 3 or result.itemsize not in WORDS or inputs[0].dtype is not D.bool:
        return NotImplemented
    if not all_of_dtype(inputs[1:], result):
        return NotImplemented
    return run_elementwise(SELECT, where_expression(result.itemsize), out, inputs, result)


where_kernel.__name__ = "cuda_where"


def clamp_kernel(op_name):
    arity = 3 if op_name == "clamp" else 2

    def kernel(out, inputs, dtypes, params):
        common, _computation, result = dtypes
        if len(inputs) != arity or common.name not in FLOAT_TYPES or result is not common:
            return NotImplemented
        if not all_of_dtype(inputs, common):
            return NotImplemented
        return run_elementwise(SELECT, clamp_expression(op_name, common.name), out, inputs,
                               result)
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
