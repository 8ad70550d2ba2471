"""Three-operand pointwise ops and integer arithmetic on cuda (kernels/pointwise.cu):

    lerp, addcmul, addcdiv   float32, float64, float16, bfloat16 (16-bit computed in float):
                             the optimizers' update steps (Adam's, AdamW's, ...) and lerp
    pow                      the four float dtypes, tensor or number exponent
    add, sub, mul            uint8, int8, int16, int32, int64, wrapping on overflow

Every result but pow's is bit for bit the reference's: each element is the reference's
expression evaluated in the same order with the same roundings (no fused multiply-adds).
pow is CUDA's powf/pow (within 4 / 2 ulp of the exact value, where NumPy's is within 1),
with NumPy's exact cases: an exponent of 2 squares, and a 0-dim exponent (how a Python number
arrives) of 0.5 takes sqrt and of -1 the reciprocal, as NumPy's power does for a scalar
exponent; special values (0, inf, NaN, negative bases) follow C's pow, as NumPy's. Any strides,
broadcasting, 0-dim operands, `out=` and in-place. A Python number arrives as a 0-dim tensor
of the computation dtype: lerp takes a float32 one as the weight of a 16-bit op (unrounded, as
the reference uses it); other dtype mixes and complex numbers decline (the reference then
decides).
"""
from __future__ import annotations

import ctypes

from reftorch import _dtype as D
from reftorch._dispatch import get_op

from .kernel_base import (FLOAT_DTYPES, FLOAT_TYPES, HALF_TYPES, INT_TYPES, Program,
                          operand_types, run_elementwise)

TERNARY_OPS = {"lerp": "LerpOp", "addcmul": "AddcmulOp", "addcdiv": "AddcdivOp"}
INT_OPS = {"add": "IntAddOp", "sub": "IntSubOp", "mul": "IntMulOp"}
INT_DTYPES = tuple(D.by_name(name) for name in INT_TYPES if name != "bool")


def ternary_expression(op_name, dtype_name, weight_type=None):
    """The kernel for `dtype_name`; `weight_type` "float": a float32 third operand of a 16-bit
    op (a Python number's weight)."""
    t = FLOAT_TYPES[dtype_name]
    if weight_type is None or weight_type == t:
        return f"ternary_kernel<{t}, {TERNARY_OPS[op_name]}>"
    return f"ternary_kernel<{t}, {TERNARY_OPS[op_name]}, {weight_type}>"


def pow_expression(dtype_name, exponent_type=None):
    t = FLOAT_TYPES[dtype_name]
    if exponent_type is None or exponent_type == t:
        return f"pow_kernel<{t}>"
    return f"pow_kernel<{t}, {exponent_type}>"


def int_expression(op_name, dtype_name):
    return f"int_binary_kernel<{INT_TYPES[dtype_name]}, {INT_OPS[op_name]}>"


POINTWISE = Program("pointwise.cu", tuple(
    [ternary_expression(op, name) for op in TERNARY_OPS for name in FLOAT_TYPES]
    + [ternary_expression("lerp", name, "float") for name in HALF_TYPES]
    + [pow_expression(name) for name in FLOAT_TYPES]
    + [pow_expression(name, "float") for name in HALF_TYPES]
    + [int_expression(op, d.name) for op in INT_OPS for d in INT_DTYPES]))
PROGRAMS = (POINTWISE,)


def ternary_kernel(op_name):
    """The dispatcher kernel for lerp / addcmul / addcdiv on float tensors of one dtype."""
    number_params = get_op(op_name).number_params
    def kernel(out, inputs, dtypes, params):
        common, _computation, result = dtypes
        if len(inputs) != 3 or result is not common:
            return NotImplemented
        types = operand_types(inputs, dtypes)
        if types is None or types[0] != types[1]:
            return NotImplemented
        expression = ternary_expression(op_name, common.name, types[2])
        value = params.get("value", 1)
        if not POINTWISE.has(expression) or isinstance(value, complex):
            return NotImplemented
        return run_elementwise(POINTWISE, expression, out, inputs, result,
                               (ctypes.c_double(float(value)),), number_params)
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def pow_kernel(out, inputs, dtypes, params):
    """pow(base, exponent) of float tensors of one dtype (a 16-bit base may take a float32
    exponent: a Python number's)."""
    common, _computation, result = dtypes
    if len(inputs) != 2 or result is not common:
        return NotImplemented
    types = operand_types(inputs, dtypes)
    if types is None or types[0] != FLOAT_TYPES[common.name]:
        return NotImplemented
    expression = pow_expression(common.name, types[1])
    if not POINTWISE.has(expression):
        return NotImplemented
    scalar_exponent = ctypes.c_int(inputs[1].ndim == 0)
    return run_elementwise(POINTWISE, expression, out, inputs, result, (scalar_exponent,),
                           get_op("pow").number_params)


pow_kernel.__name__ = "cuda_pow"


def int_binary_kernel(op_name):
    """The dispatcher kernel for add / sub / mul on integer tensors of one dtype (alpha has
    been checked to be a whole number that fits the dtype before the op dispatches)."""
    def kernel(out, inputs, dtypes, params):
        common, _computation, result = dtypes
        if len(inputs) != 2 or result is not common or any(t.dtype is not common
                                                            for t in inputs):
            return NotImplemented
        alpha = params.get("alpha", 1) if op_name != "mul" else 1
        if isinstance(alpha, bool) or not isinstance(alpha, int):
            return NotImplemented
        return run_elementwise(POINTWISE, int_expression(op_name, common.name), out, inputs,
                               result, (ctypes.c_longlong(alpha),))
    kernel.__name__ = kernel.__qualname__ = f"cuda_int_{op_name}"
    return kernel


def register_kernels(registrar):
    for op_name in TERNARY_OPS:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, ternary_kernel(op_name))
    registrar.kernel("pow", "cuda", FLOAT_DTYPES, pow_kernel)
    for op_name in INT_OPS:
        registrar.kernel(op_name, "cuda", INT_DTYPES, int_binary_kernel(op_name))
