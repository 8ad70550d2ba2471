"""The plugin's kernels: what each dispatcher kernel checks, and how it launches CUDA code.

Every kernel follows the dispatcher ABI `kernel(out, inputs, dtypes, params)` (see
reftorch._dispatch) and declines (returns NotImplemented, so the copy-to-cpu fallback runs)
for anything it does not handle exactly: mixed dtypes, tensors on other devices, more dims
than the kernel geometry holds after coalescing, or outputs that overlap their inputs in a way
an elementwise pass cannot write safely.

This module holds add/sub/mul/div and the same-dtype copy (kernels/elementwise.cu), the list
of every program (`PROGRAMS`) and `register_kernels`; the other op families live in
ops_unary.py, ops_select.py, ops_cast.py, ops_reduce.py, ops_softmax.py, ops_norm.py,
ops_index.py, ops_gemm.py, ops_conv.py, ops_loss.py, ops_batchnorm.py, ops_pointwise.py,
ops_join.py, ops_sort.py, ops_pool.py, ops_masked.py and ops_scatter.py, and what they all
share in kernel_base.py.
"""
from __future__ import annotations

import ctypes

from reftorch import _dtype as D

from . import (ops_batchnorm, ops_cast, ops_conv, ops_gemm, ops_index, ops_join, ops_loss,
               ops_masked, ops_norm, ops_pointwise, ops_pool, ops_reduce, ops_scatter,
               ops_select, ops_softmax, ops_sort, ops_unary)
from .kernel_base import (FLOAT_DTYPES, FLOAT_TYPES, HALF_TYPES, WORDS, Program, geometry_struct,
                          geometry_type, max_dims, on_one_cuda_device, operand_types, pointer,
                          run_elementwise, scalar_pairs, writable)
from reftorch_plugins.geometry import elementwise_geometry

__all__ = ["PROGRAMS", "ELEMENTWISE", "register_kernels", "binary_kernel", "copy_kernel",
           "geometry_struct", "geometry_type", "max_dims"]

BINARY_OPS = {"add": "AddOp", "sub": "SubOp", "mul": "MulOp", "div": "DivOp"}


def binary_expression(op_name, dtype_name, types=None):
    """The kernel for `dtype_name`; `types`: the operands' storage types when one differs
    (a float scalar of a 16-bit op)."""
    t = FLOAT_TYPES[dtype_name]
    if types is None or types == (t, t):
        return f"binary_kernel<{t}, {BINARY_OPS[op_name]}>"
    return f"binary_kernel<{t}, {BINARY_OPS[op_name]}, {types[0]}, {types[1]}>"


def copy_expression(itemsize):
    """A same-dtype copy moves bytes: one instantiation per element width."""
    return f"copy_kernel<{WORDS[itemsize]}>"


ELEMENTWISE = Program("elementwise.cu", tuple(
    [binary_expression(op, name) for op in BINARY_OPS for name in FLOAT_TYPES]
    + [binary_expression(op, name, types) for op in BINARY_OPS for name in HALF_TYPES
       for types in scalar_pairs(name)]
    + [copy_expression(width) for width in WORDS]))
# The op families with kernels of their own (each has PROGRAMS and register_kernels; ops_cast
# serves copy_kernel below and registers nothing).
FAMILIES = (ops_unary, ops_select, ops_reduce, ops_softmax, ops_norm, ops_index, ops_gemm,
            ops_conv, ops_loss, ops_batchnorm, ops_pointwise, ops_join, ops_sort, ops_pool,
            ops_masked, ops_scatter)
PROGRAMS = (ELEMENTWISE, *ops_cast.PROGRAMS,
            *(program for family in FAMILIES for program in family.PROGRAMS))


# --- kernels ----------------------------------------------------------------------------------

def binary_kernel(op_name):
    """The dispatcher kernel for add/sub/mul/div on float tensors of one dtype (a 16-bit op
    may also take a float32 scalar operand, see operand_types)."""
    takes_alpha = op_name in ("add", "sub")
    # (dtypes, operand dtypes) -> the instantiation, or None to decline: the checks below
    # depend on nothing else, and cost more Python than the lookup. Bounded by the number of
    # dtype combinations.
    expressions = {}

    def kernel(out, inputs, dtypes, params):
        if len(inputs) != 2:
            return NotImplemented
        key = (*dtypes, inputs[0]._storage.dtype, inputs[1]._storage.dtype)
        expression = expressions.get(key, False)
        if expression is False:
            expression = expressions[key] = _binary_instantiation(op_name, inputs, dtypes)
        if expression is None:
            return NotImplemented
        if op_name == "div" and params.get("rounding_mode") is not None:
            return NotImplemented
        alpha = params.get("alpha", 1) if takes_alpha else 1
        if isinstance(alpha, complex):
            return NotImplemented
        return run_elementwise(ELEMENTWISE, expression, out, inputs, dtypes[2],
                               (ONE if alpha == 1 else ctypes.c_double(float(alpha)),))

    kernel.__name__ = f"cuda_{op_name}"
    kernel.__qualname__ = kernel.__name__
    return kernel


ONE = ctypes.c_double(1.0)   # the usual alpha: one object serves every launch (read-only)


def _binary_instantiation(op_name, inputs, dtypes):
    """The ELEMENTWISE instantiation for add/sub/mul/div of these two inputs, or None."""
    common, _computation, result = dtypes
    if common.name not in FLOAT_TYPES or result is not common:
        return None
    types = operand_types(inputs, dtypes)
    expression = types and binary_expression(op_name, common.name, types)
    return expression if ELEMENTWISE.has(expression) else None


def copy_kernel(out, inputs, dtypes, params):
    """copy_ between two tensors on one cuda device (src already has out's shape, broadcast
    by copy_; a 0-dim src is how fill_ and zero_ arrive). Same dtype: bytes move; a dtype
    conversion goes to ops_cast."""
    if out is None or len(inputs) != 1:
        return NotImplemented
    src = inputs[0]
    if src._shape != out._shape or not on_one_cuda_device((out, src)):
        return NotImplemented
    if src.dtype is not out.dtype:
        return ops_cast.cast(out, src)
    if src.dtype.itemsize not in WORDS:
        return NotImplemented
    numel = out.numel()
    if numel == 0:
        return out
    shape, strides = elementwise_geometry(out, (src,))
    if src._storage is out._storage and src._offset == out._offset and strides[0] == strides[1]:
        return out  # copying a tensor onto itself
    if len(shape) > max_dims() or not writable(out, (src,), shape, strides):
        return NotImplemented
    storage = out._storage
    itemsize = out.dtype.itemsize
    if len(shape) == 1 and strides[0][0] == 1 and strides[1][0] == 1:
        storage._driver.device_copy(storage._index, out.data_ptr(), src.data_ptr(),
                                    numel * itemsize)
        return out
    args = (geometry_struct(shape, strides), pointer(out), pointer(src))
    storage._driver.launch(storage._index, ELEMENTWISE, copy_expression(itemsize), numel, args)
    return out


copy_kernel.__name__ = "cuda_copy_"


def register_kernels(registrar):
    for op_name in BINARY_OPS:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, binary_kernel(op_name))
    copyable = [d for d in D.ALL_DTYPES if d.itemsize in WORDS]
    registrar.kernel("copy_", "cuda", copyable, copy_kernel)
    for family in FAMILIES:
        family.register_kernels(registrar)
