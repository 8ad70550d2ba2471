"""Reductions on cuda (kernels/reduce.cu): sum, mean, amax, amin (and max/min over every
element, which share amax/amin's kernel) over any dims, for the four float dtypes.

The kernel reduces one output element per block in a fixed order (see reduce.cu), so results
do not depend on the launch; sums differ from the reference's pairwise NumPy sum by rounding
only. sum/mean with a `dtype=` other than the input's decline (the reference converts first).
"""
from __future__ import annotations

from reftorch import _dtype as D
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_TYPES, Program, geometry_struct, launch_blocks, max_dims,
                          on_one_cuda_device, pointer)

REDUCE_OPS = {"sum": "SumOp", "mean": "MeanOp", "amax": "AmaxOp", "amin": "AminOp",
              "max": "AmaxOp", "min": "AminOp"}


def reduce_expression(op_struct, dtype_name):
    return f"reduce_kernel<{FLOAT_TYPES[dtype_name]}, {op_struct}>"


REDUCE = Program("reduce.cu", tuple(
    reduce_expression(s, name) for s in dict.fromkeys(REDUCE_OPS.values())
    for name in FLOAT_TYPES))
PROGRAMS = (REDUCE,)


def _split(t, dims, keepdim):
    """(output shape, kept dims, reduced dims) of reducing `t` over `dims` (None: all; a
    0-dim tensor's dim 0 is the whole tensor)."""
    reduced = set(range(t.ndim)) if dims is None or t.ndim == 0 else set(dims)
    kept = [d for d in range(t.ndim) if d not in reduced]
    if keepdim:
        shape = tuple(1 if d in reduced else n for d, n in enumerate(t._shape))
    else:
        shape = tuple(t._shape[d] for d in kept)
    return shape, kept, sorted(reduced)


def _geometries(t, result, kept, reduced, keepdim):
    """The kernel's `outer` (result, input over the kept dims) and `inner` (input over the
    reduced dims) geometries, coalesced; None when either has too many dims."""
    kept_out = [result._strides[d] for d in kept] if keepdim else list(result._strides)
    outer = coalesce([t._shape[d] for d in kept], [kept_out, [t._strides[d] for d in kept]])
    inner = coalesce([t._shape[d] for d in reduced], [[t._strides[d] for d in reduced]])
    if max(len(outer[0]), len(inner[0])) > max_dims():
        return None
    return geometry_struct(*outer), geometry_struct(*inner)


def reduce_kernel(op_name):
    def kernel(out, inputs, dtypes, params):
        if out is not None or len(inputs) != 1:
            return NotImplemented
        t = inputs[0]
        dtype = t.dtype
        if dtype.name not in FLOAT_TYPES or params.get("dtype", dtype) is not dtype:
            return NotImplemented
        if not on_one_cuda_device((t,)):
            return NotImplemented
        keepdim = bool(params.get("keepdim", False))
        shape, kept, reduced = _split(t, params.get("dim"), keepdim)
        result = Tensor._empty(shape, dtype, t.device)
        geometries = _geometries(t, result, kept, reduced, keepdim)
        if geometries is None:
            return NotImplemented
        if result.numel():
            launch_blocks(REDUCE, reduce_expression(REDUCE_OPS[op_name], dtype.name),
                          result.numel(), t, (*geometries, pointer(result), pointer(t)))
        return result
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def register_kernels(registrar):
    floats = [D.by_name(name) for name in FLOAT_TYPES]
    for op_name in REDUCE_OPS:
        registrar.kernel(op_name, "cuda", floats, reduce_kernel(op_name))
