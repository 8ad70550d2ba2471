"""Unary math and activations, and the activations' backward ops (kernels/unary.cu), for
float32, float64, float16 and bfloat16 on cuda; the 16-bit types compute in float.

The backward ops are the ones the derivative rows call (PyTorch's aten names): inputs
grad_output, then the forward's output (tanh_backward, sigmoid_backward) or its input
(threshold_backward for relu, gelu_backward, silu_backward).

`erf` and `leaky_relu` are a second program of unary.cu (UNARY_MORE), so that the first unary
op of a process does not compile them. erf is CUDA's double erf (within 2 ulp of the exact
value) rounded to the dtype, as the reference rounds its float64 erf: within 1 ulp of the
reference for float32 and the 16-bit types (both are a few double ulp from the exact value
before the one rounding), and within 2 + 3 ulp for float64 (the reference's Cody
approximation measured within 3 ulp of the exact value). leaky_relu is bit for bit the
reference's (one comparison and one rounded product, the slope rounded to the computation
type). leaky_relu has no backward op of its own (the reference's derivative is a where and a
product, which run on the device). A negative_slope that is not a plain number declines.
"""
from __future__ import annotations

import ctypes


from .kernel_base import FLOAT_DTYPES, FLOAT_TYPES, Program, all_of_dtype, run_elementwise

# op name -> the Op struct of unary.cu; gelu picks its form from `approximate` (GELU below).
UNARY_OPS = {"neg": "NegOp", "abs": "AbsOp", "exp": "ExpOp", "expm1": "Expm1Op",
             "log": "LogOp", "log1p": "Log1pOp", "sqrt": "SqrtOp", "rsqrt": "RsqrtOp",
             "sin": "SinOp", "cos": "CosOp", "tanh": "TanhOp", "sigmoid": "SigmoidOp",
             "relu": "ReluOp", "silu": "SiluOp", "gelu": None,
             "sign": "SignOp", "sgn": "SignOp"}   # sgn of a real tensor is its sign
GRAD_OPS = {"tanh_backward": "TanhBackwardOp", "sigmoid_backward": "SigmoidBackwardOp",
            "threshold_backward": "ThresholdBackwardOp", "silu_backward": "SiluBackwardOp",
            "gelu_backward": None}
GELU = {"gelu": {"none": "GeluErfOp", "tanh": "GeluTanhOp"},
        "gelu_backward": {"none": "GeluErfBackwardOp", "tanh": "GeluTanhBackwardOp"}}


def _structs(table):
    """Every Op struct a table's ops use (gelu's two forms included), once each."""
    return list(dict.fromkeys([s for name, s in table.items() if s] +
                              [s for name in table if name in GELU for s in GELU[name].values()]))


def unary_expression(op_struct, dtype_name):
    return f"unary_kernel<{FLOAT_TYPES[dtype_name]}, {op_struct}>"


def grad_expression(op_struct, dtype_name):
    return f"grad_kernel<{FLOAT_TYPES[dtype_name]}, {op_struct}>"


# The second program: erf, and the ops with a number (op name -> (Op struct, the param and its
# default)).
MORE_UNARY_OPS = {"erf": "ErfOp"}
SCALAR_OPS = {"leaky_relu": ("LeakyReluOp", "negative_slope", 0.01)}


def unary_scalar_expression(op_struct, dtype_name):
    return f"unary_scalar_kernel<{FLOAT_TYPES[dtype_name]}, {op_struct}>"


UNARY = Program("unary.cu", tuple(
    [unary_expression(s, name) for s in _structs(UNARY_OPS) for name in FLOAT_TYPES]
    + [grad_expression(s, name) for s in _structs(GRAD_OPS) for name in FLOAT_TYPES]))
UNARY_MORE = Program("unary.cu", tuple(
    [unary_expression(s, name) for s in MORE_UNARY_OPS.values() for name in FLOAT_TYPES]
    + [unary_scalar_expression(s, name) for s, _, _ in SCALAR_OPS.values()
       for name in FLOAT_TYPES]))
PROGRAMS = (UNARY, UNARY_MORE)


def _op_struct(op_name, table, params):
    """The Op struct for this call, or None to decline (an unknown gelu `approximate`)."""
    if op_name in GELU:
        return GELU[op_name].get(params.get("approximate", "none"))
    return table[op_name]


def _same_float_dtype(inputs, dtypes):
    common, _computation, result = dtypes
    return common.name in FLOAT_TYPES and result is common and all_of_dtype(inputs, common)


def _plain_number(number):
    """A float, or an int that a double holds exactly (the threshold goes as a double)."""
    return type(number) is float or (type(number) is int and abs(number) < 2**53)


def unary_kernel(op_name, program=UNARY, table=UNARY_OPS):
    """The dispatcher kernel for one unary op on a float tensor (in-place and out= included:
    relu_/silu_ arrive with `out` the input itself)."""
    def kernel(out, inputs, dtypes, params):
        if len(inputs) != 1 or not _same_float_dtype(inputs, dtypes):
            return NotImplemented
        op_struct = _op_struct(op_name, table, params)
        if op_struct is None:
            return NotImplemented
        return run_elementwise(program, unary_expression(op_struct, dtypes[0].name), out,
                               inputs, dtypes[2])
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def unary_scalar_kernel(op_name):
    """The dispatcher kernel for a unary op with one number parameter (leaky_relu's
    negative_slope; leaky_relu_ arrives with `out` the input itself)."""
    op_struct, param, default = SCALAR_OPS[op_name]

    def kernel(out, inputs, dtypes, params):
        if len(inputs) != 1 or not _same_float_dtype(inputs, dtypes):
            return NotImplemented
        number = params.get(param, default)
        if not _plain_number(number):
            return NotImplemented
        return run_elementwise(UNARY_MORE, unary_scalar_expression(op_struct, dtypes[0].name),
                               out, inputs, dtypes[2], (ctypes.c_double(float(number)),))
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def grad_kernel(op_name):
    """The dispatcher kernel for one activation backward op: out = f(grad_output, v)."""
    def kernel(out, inputs, dtypes, params):
        if len(inputs) != 2 or not _same_float_dtype(inputs, dtypes):
            return NotImplemented
        op_struct = _op_struct(op_name, GRAD_OPS, params)
        if op_struct is None:
            return NotImplemented
        threshold = params.get("threshold", 0)
        if not _plain_number(threshold):
            return NotImplemented
        return run_elementwise(UNARY, grad_expression(op_struct, dtypes[0].name), out,
                               inputs, dtypes[2], (ctypes.c_double(float(threshold)),))
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def register_kernels(registrar):
    for op_name in UNARY_OPS:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, unary_kernel(op_name))
    for op_name in GRAD_OPS:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, grad_kernel(op_name))
    for op_name in MORE_UNARY_OPS:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES,
                         unary_kernel(op_name, UNARY_MORE, MORE_UNARY_OPS))
    for op_name in SCALAR_OPS:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, unary_scalar_kernel(op_name))
