"""Upsampling (F.interpolate's upsample_* ops) over the C module `_gather` (src/gather.c).

Every mode is the reference's separable form, with the per-axis indices and weights the
reference itself computes (reftorch._ops.nn_vision._all_taps), so the bits are its own:

  * nearest and nearest-exact: one gather through those indices, for every dtype the op
    takes (uint8 too): elements moved, never computed;
  * linear, bilinear, trilinear and bicubic: in the computation dtype (float32 for the 16-bit
    types, converted as the reference converts them), one C pass per spatial axis, each
    output element its taps' products added in tap order, as the reference's NumPy passes
    add them; the result converted back to the input's dtype.

The backward ops (upsample_*_backward, every mode) run one C pass per spatial axis: the
reference's np.add.at of each output position's gradient times its taps' weights, in its
order (gather.c's index_add with weights), so the bits are the reference's too.

Declined (the reference runs): tensors not in cpu storage, an `out` tensor, more dims than
the gather takes, and calls with fewer than MIN_NUMEL output (backward: gradient) elements.
"""
from __future__ import annotations

import math

import numpy as np

from reftorch import _dtype as D
from reftorch._ops.nn_vision import _UPSAMPLE_MODES, _all_taps, _compute_dtype
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold

from . import _gather
from .masked import _bits, _on_cpu

# Calls writing fewer elements go to the reference (NumPy's passes are as quick there).
MIN_NUMEL = 4096

FLOATING = (D.float16, D.bfloat16, D.float32, D.float64)


def register(registrar):
    """Register the upsampling kernels with reftorch (called by reftorch_cpu.register)."""
    for name, (mode, dims, _) in _UPSAMPLE_MODES.items():
        nearest = mode.startswith("nearest")
        registrar.kernel(name, "cpu", FLOATING + (D.uint8,) if nearest else FLOATING,
                         _kernel(mode, dims, nearest))
        registrar.kernel(name + "_backward", "cpu", FLOATING, _backward_kernel(mode, dims))


def _kernel(mode, dims, nearest):
    def kernel(out, inputs, dtypes, params):
        """x upsampled to params["output_size"] over its last `dims` dims, or
        NotImplemented."""
        (x,), output_size = inputs, tuple(params["output_size"])
        if out is not None or not _on_cpu(x) or len(output_size) != dims or \
                not dims < len(x._shape) <= _gather.MAX_NDIM or \
                math.prod(x._shape[:-dims]) * math.prod(output_size) < size_threshold(MIN_NUMEL):
            return NotImplemented
        dtype = x._storage.dtype
        compute = _compute_dtype(dtype.numpy_dtype)
        taps = _all_taps(mode, x._shape[-dims:], output_size, params["align_corners"],
                         params["scales"], compute)
        if nearest:
            return _gathered(x, [index[:, 0] for index, _ in taps])
        return _weighted(x, taps, compute)
    return kernel


def _backward_kernel(mode, dims):
    def kernel(out, inputs, dtypes, params):
        """The gradient of the input of size params["input_size"] from the output's, grad,
        or NotImplemented: one C pass per spatial axis (first axis first), each the
        reference's np.add.at of the tap-weighted gradient, in its order: its bits."""
        (grad,), input_size = inputs, tuple(params["input_size"])
        output_size = tuple(params["output_size"])
        shape = grad._shape
        if out is not None or not _on_cpu(grad) or len(output_size) != dims or \
                len(input_size) != len(shape) or not dims < len(shape) or \
                shape[-dims:] != output_size or shape[:-dims] != input_size[:-dims] or \
                math.prod(shape) < size_threshold(MIN_NUMEL):
            return NotImplemented
        compute = _compute_dtype(grad._storage.dtype.numpy_dtype)
        taps = _all_taps(mode, input_size[-dims:], output_size, params["align_corners"],
                         params["scales"], compute)
        values = np.ascontiguousarray(grad._np, dtype=compute)
        shape, lead = list(shape), len(shape) - dims
        for d, (index, weights) in enumerate(taps):
            axis = lead + d
            outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
            summed = np.empty(outer * input_size[axis] * inner, compute)
            _gather.index_add(summed, values.reshape(-1), outer, input_size[axis], inner,
                              np.ascontiguousarray(index, np.int64).reshape(-1),
                              np.ascontiguousarray(weights, compute).reshape(-1),
                              index.shape[1])
            shape[axis] = input_size[axis]
            values = summed
        return Tensor._from_array(values.reshape(shape).astype(grad._storage.dtype.numpy_dtype,
                                                              copy=False))
    return kernel


def _gathered(x, indices):
    """x read through one index array per spatial dim (a gather: the same bits)."""
    lead = len(x._shape) - len(indices)
    result = Tensor._empty(x._shape[:lead] + tuple(len(i) for i in indices), x._storage.dtype)
    _gather.gather(_bits(result), _bits(x), x._offset, x._strides, x._shape,
                   (None,) * lead + tuple(np.ascontiguousarray(i, np.int64) for i in indices),
                   None)
    return result


def _weighted(x, taps, compute):
    """The separable passes: along each spatial axis in turn, every output element the sum of
    its taps' products (in the computation dtype), then the input's dtype."""
    values = np.ascontiguousarray(x._np, dtype=compute)
    shape = list(values.shape)
    lead = len(shape) - len(taps)
    if values.size == 0:
        return Tensor._empty(tuple(shape[:lead]) + tuple(len(index) for index, _ in taps),
                             x._storage.dtype)
    for d, (index, weights) in enumerate(taps):
        axis = lead + d
        outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
        passed = np.empty(outer * index.shape[0] * inner, compute)
        _gather.taps(passed, values.reshape(-1), outer, shape[axis], index.shape[0], inner,
                     np.ascontiguousarray(index, np.int64),
                     np.ascontiguousarray(weights, compute))
        shape[axis] = index.shape[0]
        values = passed
    return Tensor._from_array(values.reshape(shape).astype(x._storage.dtype.numpy_dtype,
                                                          copy=False))
