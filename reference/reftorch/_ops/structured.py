"""How every op that is not elementwise runs: declare it once, then `run` it.

`run` is the one path for reductions, indexing, joining, sorting and the other structured
ops: it checks the device and dtype, dispatches (plugins first, then the reference), writes
`out=` and records autograd history. Reference kernels are NumPy functions over the inputs'
arrays (`array_kernel` adapts one to the dispatcher's ABI); each returns fresh arrays.
"""
from __future__ import annotations

import numpy as np

from .. import _dispatch
from .._promotion import check_output_cast
from .._tensor import Tensor
from .._numpy_compat import FP_STATE, IGNORE_ALL
from ..autograd.graph import prepare_inplace, record
from ..autograd.grad_mode import is_grad_enabled, no_grad
from .._shape import common_format, format_strides, kept_strides, suggested_format
from .copy import laid_out
from .elementwise import _common_device, _is_one_of
from .inplace_meta import resize_output


def declare(name, reference, family, params=None, dtypes=None, layout=None, doc=""):
    """Declare a structured op whose reference is `reference(*arrays, **params)`.

    Tensor inputs arrive as NumPy arrays; numbers and None pass through unchanged. The
    function returns an array (or a tuple of arrays); numpy dtypes map back to reftorch's.
    `layout`: how PyTorch lays out the op's new results, whichever kernel made them: a
    memory format ("contiguous", "channels_last", "channels_last_3d"); "input" (each result
    of the first input's shape laid out like it, as PyTorch's preserve_format:
    reftorch._shape.kept_strides); "suggested" (the memory format every tensor input
    suggests, contiguous when they disagree: how PyTorch's cat chooses,
    reftorch._shape.common_format); "input_format" (the memory format the first input
    suggests: pooling, upsampling, batch norm); None leaves them as made; or a function of
    the call's (tensor inputs, params) that names one of these or gives the strides. A
    channels-last format lays out results of its rank only; others are contiguous.
    """
    op = _dispatch.Op(name=name, family=family, reference=array_kernel(reference),
                      params=dict(params or {}), layout=layout,
                      dtypes=None if dtypes is None else frozenset(dtypes), doc=doc)
    op.numpy_fn = reference
    return _dispatch.declare(op)


_CHANNELS_LAST_RANK = {"channels_last": 4, "channels_last_3d": 5}


def _in_declared_layout(layout, result, tensors):
    """`result` (a tensor or a tuple) laid out as `layout` (see declare) says (`tensors`:
    the op's tensor inputs)."""
    if layout == "suggested":
        layout = common_format((t._shape, t._strides) for t in tensors)
    elif layout == "input_format":
        layout = suggested_format(tensors[0]._shape, tensors[0]._strides)
    return _laid_out_as(layout, result, tensors[0] if tensors else None)


def _laid_out_as(layout, result, first):
    """`result` (a tensor or a tuple) in `layout`: strides, a memory format, or "input"
    (laid out like `first` when of its shape)."""
    if isinstance(result, tuple):
        return type(result)(_laid_out_as(layout, r, first) for r in result)
    if not isinstance(result, Tensor):
        return result
    if isinstance(layout, tuple):   # the strides themselves
        return laid_out(result, layout)
    if layout == "contiguous" and (not result._shape or result._strides == (1,)):
        return result   # (a scalar or a dense vector, the common reduction result)
    if layout != "input":   # a memory format: contiguous or a channels-last one
        if _CHANNELS_LAST_RANK.get(layout, result.ndim) != result.ndim:
            layout = "contiguous"     # (a statistic beside a channels-last output)
        return laid_out(result, format_strides(result._shape, layout))
    if first._shape != result._shape:
        return result
    return laid_out(result, kept_strides(first._shape, first._strides))


def array_kernel(fn):
    """Adapt `fn(*arrays, **params)` into a reference kernel (see _dispatch)."""
    def reference_kernel(out, inputs, dtypes, params):
        arrays = [x._np if isinstance(x, Tensor) else x for x in inputs]
        token = FP_STATE.set(IGNORE_ALL)  # IEEE results (inf, nan) are the specification
        try:
            value = fn(*arrays, **params)
        finally:
            FP_STATE.reset(token)
        return _wrap(value, arrays)
    reference_kernel.__name__ = f"reference_{fn.__name__}"
    reference_kernel.__doc__ = fn.__doc__
    return reference_kernel


def _wrap(value, arrays):
    if type(value) is not np.ndarray:  # arrays, the common case, skip these tests
        if isinstance(value, tuple):
            return tuple(_wrap(v, arrays) for v in value)
        if value is None or isinstance(value, Tensor):
            return value
        value = np.asarray(value)
    if value.base is not None or _is_one_of(value, arrays):
        value = value.copy()  # never hand out memory that an input owns
    return Tensor._from_array(value)


def run(op, inputs, params=None, out=None, dtype=None):
    """Dispatch `op` on `inputs` (tensors, numbers, None); write `out=`; record history.

    `dtype` is the dtype kernels are keyed by (default: the first tensor input's).
    """
    if params is None:
        params = {}
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    device = _common_device(tensors)
    key = dtype or tensors[0]._storage.dtype
    if op.dtypes is not None and key not in op.dtypes:
        raise NotImplementedError(f"\"{op.name}_cpu\" not implemented for "
                                  f"'{key.scalar_name}'")
    if out is not None and is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise RuntimeError(f"{op.name}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires "
                           f"grad.")
    result = _dispatch.call(op, None, tuple(inputs), (key, key, key), params, device._type)
    if out is not None:
        return write_out(out, result)
    if op.layout is not None:
        layout = op.layout(tensors, params) if callable(op.layout) else op.layout
        result = _in_declared_layout(layout, result, tensors)
    return record(op.name, inputs, result, params)


def run_inplace(op, inputs, params=None):
    """`Tensor.op_`: run the out-of-place `op`, write its result into inputs[0], and record
    the call as an in-place op (its node's `self` is the value before the write). A plugin
    kernel may write into inputs[0] itself (_dispatch.call_in_place); the reference always
    computes a new result and copies it in."""
    params = {} if params is None else params
    target = inputs[0]
    saved = prepare_inplace(op.name, inputs)
    with no_grad():
        dtype = target._storage.dtype
        if (op.dtypes is None or dtype in op.dtypes) and _dispatch.call_in_place(
                op, target, tuple(inputs), (dtype,) * 3, params,
                target._storage.device._type) is not NotImplemented:
            target._bump_version()
        else:
            target.copy_(run(op, inputs, params))
    return record(op.name, inputs, target, params, saved)


def write_out(out, result):
    """Copy `result` into the caller's `out=` tensor(s), resizing them as PyTorch does."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"out must be a tuple of {len(result)} tensors")
        return type(result)(write_out(o, r) for o, r in zip(out, result))
    if not isinstance(out, Tensor):
        raise TypeError(f"argument 'out' must be Tensor, not {type(out).__name__}")
    check_output_cast(result.dtype, out.dtype)
    if out.device != result.device:
        raise RuntimeError(f"Expected out tensor to be on {result.device} but got "
                           f"{out.device}")
    resize_output(out, result._shape)
    out.copy_(result)
    return out
