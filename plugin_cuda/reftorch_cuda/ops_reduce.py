"""Reductions on cuda (kernels/reduce.cu): sum, mean, amax, amin (and max/min over every
element, which share amax/amin's kernel) over any dims, for the four float dtypes; and
sum_to_size (the sum autograd uses to undo broadcasting, e.g. a bias's gradient), which is
sum over the leading and the expanded dims.

The kernel reduces one output element per block in a fixed order (see reduce.cu), so results
do not depend on the launch; sums differ from the reference's pairwise NumPy sum by rounding
only. A reduction of more than CHUNK elements per output runs in two launches: fixed chunks
of CHUNK elements, one block each, then one block per output over the chunks' results (a
full sum of 64M elements would otherwise be one block's work). sum/mean with a `dtype=` other
than the input's decline (the reference converts first).
"""
from __future__ import annotations

import ctypes

from reftorch import _dtype as D
from reftorch._shape import contiguous_strides
from reftorch.autograd.grad_mode import no_grad
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_DTYPES, FLOAT_TYPES, Program, geometry_struct, launch_blocks,
                          max_dims, on_one_cuda_device, pointer)

REDUCE_OPS = {"sum": "SumOp", "mean": "MeanOp", "amax": "AmaxOp", "amin": "AminOp",
              "max": "AmaxOp", "min": "AminOp"}


# Elements per chunk of a two-launch reduction: 64 per thread of a 256-thread block. A constant,
# so the summation order depends on the reduced element count alone.
CHUNK = 16384
KERNELS = ("reduce_kernel", "reduce_chunks_kernel", "reduce_partials_kernel")


def reduce_expression(op_struct, dtype_name, kernel="reduce_kernel"):
    return f"{kernel}<{FLOAT_TYPES[dtype_name]}, {op_struct}>"


REDUCE = Program("reduce.cu", tuple(
    reduce_expression(s, name, kernel) for kernel in KERNELS
    for s in dict.fromkeys(REDUCE_OPS.values()) for name in FLOAT_TYPES))
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


def _launch(op_struct, t, result, geometries):
    """One launch, or chunks then partials when an output reduces more than CHUNK elements."""
    outer, inner = geometries
    dtype, n, outputs = t.dtype, inner.numel, result.numel()
    if n <= CHUNK:
        launch_blocks(REDUCE, reduce_expression(op_struct, dtype.name), outputs, t,
                      (outer, inner, pointer(result), pointer(t)))
        return
    chunks = -(-n // CHUNK)
    # the chunks' results, unrounded: in the computation type (float for the 16-bit types)
    partials = Tensor._empty((outputs * chunks,), D.float64 if dtype is D.float64 else
                             D.float32, t.device)
    launch_blocks(REDUCE, reduce_expression(op_struct, dtype.name, "reduce_chunks_kernel"),
                  outputs * chunks, t, (outer, inner, ctypes.c_int64(CHUNK),
                                        ctypes.c_int64(chunks), pointer(partials), pointer(t)))
    launch_blocks(REDUCE, reduce_expression(op_struct, dtype.name, "reduce_partials_kernel"),
                  outputs, t, (outer, ctypes.c_int64(chunks), ctypes.c_int64(n),
                               pointer(result), pointer(partials)))


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
            _launch(REDUCE_OPS[op_name], t, result, geometries)
        return result
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def sum_to_size_kernel(out, inputs, dtypes, params):
    """sum_to_size: `a` summed over its leading dims and the dims where `size` has 1, as a
    new tensor of shape `size` (a copy when nothing is summed, as the reference's)."""
    if out is not None or len(inputs) != 1:
        return NotImplemented
    a, size = inputs[0], tuple(params["size"])
    lead = a.ndim - len(size)
    dims = [*range(lead), *(lead + i for i, n in enumerate(size)
                            if n == 1 and a._shape[lead + i] != 1)]
    if not dims:
        with no_grad():   # a plain copy: the dispatcher records the op's own history
            return a.clone()
    summed = reduce_kernel("sum")(None, (a,), dtypes, {"dim": dims, "keepdim": True})
    if summed is NotImplemented:
        return NotImplemented
    return Tensor._make(summed._storage, summed._offset, size, contiguous_strides(size))


def register_kernels(registrar):
    for op_name in REDUCE_OPS:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, reduce_kernel(op_name))
    registrar.kernel("sum_to_size", "cuda", FLOAT_DTYPES, sum_to_size_kernel)
