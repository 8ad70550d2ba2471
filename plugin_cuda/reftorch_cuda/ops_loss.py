"""nll_loss, nll_loss_backward and nll_loss2d_backward on cuda (kernels/loss.cu) for the four
float dtypes, so cross_entropy (log_softmax + nll_loss) runs on the device forward and
backward; and mse_loss for float32/float64, composed of the elementwise and reduction kernels
(its backward is a formula of ops that already run on the device).

Served: a (C,), (N, C) or (N, C, H, W) input (the reference views every other input with
spatial dims as 4-D) with C >= 1, whose H and W coalesce to one strided dim together with the
target's (and a 'none' gradient's), int64 targets, an optional weight of the input's dtype,
any other strides, every reduction and ignore_index; a uint8 target and mixed dtypes decline
to the reference.

Order and accuracy: the forward's loss and weight sums run in one block, in block_reduce's
fixed order (computation type: float for float32 and the 16-bit types, double for float64),
so they differ from the reference's NumPy pairwise sums by rounding only; each row's loss and
the backward's values are the reference's products exactly. An ignored row's loss is +0 (the
reference computes -x[i, 0] * 0: -0.0, or NaN for a non-finite x[i, 0]; PyTorch gives 0).

Bad targets: a target outside [0, C) that is not ignore_index is never used as an index (the
kernels treat it as ignored). A one-block kernel records the first one in a 2-element int64
status buffer, which the op reads back before returning and raises as the reference's
IndexError. That read is one 16-byte device-to-host copy, and it waits for the stream: each
call costs one synchronisation (about 10-20 us on a GPU, plus any queued work it must wait
for), the price of raising at the call as the reference does.
"""
from __future__ import annotations

import ctypes
from typing import NamedTuple

from reftorch import _dtype as D
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_DTYPES, FLOAT_TYPES, Program, launch_blocks,
                          on_one_cuda_device, pointer)
from .ops_reduce import reduce_kernel

NONE, MEAN, SUM = 0, 1, 2     # reftorch._ops.nn_loss's reduction codes
TARGET_TYPE = "long long"     # int64 targets


def check_expression():
    return f"nll_check_targets_kernel<{TARGET_TYPE}>"


def forward_expression(dtype_name):
    return f"nll_loss_kernel<{FLOAT_TYPES[dtype_name]}>"


def backward_expression(dtype_name):
    return f"nll_loss_backward_kernel<{FLOAT_TYPES[dtype_name]}>"


LOSS = Program("loss.cu", (check_expression(),)
               + tuple(forward_expression(name) for name in FLOAT_TYPES)
               + tuple(backward_expression(name) for name in FLOAT_TYPES))
PROGRAMS = (LOSS,)


class Rows(NamedTuple):
    """An nll_loss call as the kernels see it: (batch, classes, spatial), rows n = batch *
    spatial; each operand's strides (x: batch, class, spatial; the per-row operands: batch,
    spatial)."""
    n: int
    classes: int
    spatial: int
    x_strides: tuple
    row_strides: tuple      # one (batch, spatial) pair per per-row operand (target first)


def _rows(x, target, weight, params, per_row=()):
    """The call's Rows when it is served, else None. `per_row`: more operands shaped like
    target (a 'none' gradient), whose strides come after target's."""
    if x.dtype.name not in FLOAT_TYPES or x.ndim not in (1, 2, 4) or target.dtype is not D.int64:
        return None
    if params.get("reduction", MEAN) not in (NONE, MEAN, SUM):
        return None
    if not -2 ** 63 <= params.get("ignore_index", -100) < 2 ** 63:
        return None
    row_operands = (target, *per_row)
    if any(t._shape != target._shape for t in per_row) or target.ndim != max(x.ndim - 1, 0):
        return None
    if x.ndim == 1:
        batch, classes, spatial = 1, x._shape[0], 1
        x_strides, row_strides = (0, x._strides[0], 0), [(0, 0)] * len(row_operands)
    else:
        batch, classes = x._shape[:2]
        shape, strides = coalesce(list(x._shape[2:]), [list(x._strides[2:])] + [
            list(t._strides[1:]) for t in row_operands])
        if len(shape) != 1 or tuple(target._shape) != (batch, *x._shape[2:]):
            return None
        spatial = shape[0]
        x_strides = (x._strides[0], x._strides[1], strides[0][0])
        row_strides = [(t._strides[0], s[0]) for t, s in zip(row_operands, strides[1:])]
    if classes == 0:
        return None
    if weight is not None and (weight.dtype is not x.dtype or weight.ndim != 1 or
                               weight.numel() != classes):
        return None
    tensors = (x, *row_operands) if weight is None else (x, *row_operands, weight)
    if not on_one_cuda_device(tensors):
        return None
    return Rows(batch * spatial, classes, spatial, x_strides, tuple(row_strides))


def _null_or(t):
    return pointer(t) if t is not None else ctypes.c_uint64(0)


def _ints(values):
    return tuple(ctypes.c_int64(v) for v in values)


def _check_targets(x, target, rows, ignore_index):
    """Queue the target check; returns the status buffer to read once the op's kernels are
    queued too (one synchronisation for the whole op)."""
    status = Tensor._empty((2,), D.int64, x.device)
    args = (*_ints((rows.n, rows.classes, rows.spatial, *rows.row_strides[0], ignore_index)),
            pointer(status), pointer(target))
    launch_blocks(LOSS, check_expression(), 1, x, args)
    return status


def _raise_on_bad_target(status, n):
    """The reference's error for the first bad target (reads the status back: a sync)."""
    first, target = (int(v) for v in status._storage.read(status._offset, 2))
    if first < n:
        raise IndexError(f"Target {target} is out of bounds.")


def _weight_stride(weight):
    return 0 if weight is None else weight._strides[0]


def nll_loss_kernel(out, inputs, dtypes, params):
    """(loss, total_weight) as the reference's nll_loss kernel returns them."""
    if out is not None or len(inputs) != 3:
        return NotImplemented
    x, target, weight = inputs
    rows = _rows(x, target, weight, params)
    if rows is None:
        return NotImplemented
    reduction, ignore_index = params.get("reduction", MEAN), params.get("ignore_index", -100)
    status = _check_targets(x, target, rows, ignore_index)
    loss = Tensor._empty(target._shape if reduction == NONE else (), x.dtype, x.device)
    total_weight = Tensor._empty((), x.dtype, x.device)
    args = (*_ints((rows.n, rows.classes, rows.spatial, *rows.x_strides, *rows.row_strides[0],
                    _weight_stride(weight), ignore_index)),
            ctypes.c_int(reduction), pointer(loss), pointer(total_weight), pointer(x),
            pointer(target), _null_or(weight))
    launch_blocks(LOSS, forward_expression(x.dtype.name), 1, x, args)
    _raise_on_bad_target(status, rows.n)
    return loss, total_weight


def nll_loss_backward_kernel(out, inputs, dtypes, params):
    """grad_input of nll_loss (inputs grad_output, self, target, weight, total_weight)."""
    if out is not None or len(inputs) != 5:
        return NotImplemented
    grad, x, target, weight, total_weight = inputs
    reduction, ignore_index = params.get("reduction", MEAN), params.get("ignore_index", -100)
    per_row = reduction == NONE and x.ndim > 1
    if grad.dtype is not x.dtype or (not per_row and grad.numel() != 1):
        return NotImplemented   # (a reduced loss with another gradient: the reference raises)
    rows = _rows(x, target, weight, params, (grad,) if per_row else ())
    if rows is None or not on_one_cuda_device((x, grad)):
        return NotImplemented
    mean = reduction == MEAN
    if mean and not (total_weight is not None and total_weight.dtype is x.dtype and
                     total_weight.numel() == 1 and on_one_cuda_device((x, total_weight))):
        return NotImplemented
    status = _check_targets(x, target, rows, ignore_index)
    result = Tensor._empty(x._shape, x.dtype, x.device)
    grad_strides = rows.row_strides[1] if per_row else (0, 0)
    args = (*_ints((rows.n, rows.classes, rows.spatial, *grad_strides, *rows.row_strides[0],
                    _weight_stride(weight), ignore_index)),
            ctypes.c_int(int(mean)), pointer(result), pointer(grad), pointer(target),
            _null_or(weight), pointer(total_weight) if mean else ctypes.c_uint64(0))
    if rows.n:
        storage = result._storage
        storage._driver.launch(storage._index, LOSS, backward_expression(x.dtype.name),
                               rows.n * rows.classes, args)
    _raise_on_bad_target(status, rows.n)
    return result


nll_loss_kernel.__name__ = "cuda_nll_loss"
nll_loss_backward_kernel.__name__ = "cuda_nll_loss_backward"


def mse_loss_kernel(out, inputs, dtypes, params):
    """mse_loss of float32/float64 tensors: (x - t) * (x - t) by the elementwise kernels (the
    reference's values exactly), then summed (or averaged) by the reduction kernel, in block
    order: within rounding of the reference's pairwise sum. 16-bit inputs decline (the
    reference squares in float32 and rounds once at the end)."""
    from .ops import binary_kernel     # ops imports this module: import on use
    if out is not None or len(inputs) != 2:
        return NotImplemented
    x, target = inputs
    if x.dtype not in (D.float32, D.float64) or target.dtype is not x.dtype:
        return NotImplemented
    same = (x.dtype,) * 3
    difference = binary_kernel("sub")(None, (x, target), same, {})
    if difference is NotImplemented:
        return NotImplemented
    square = binary_kernel("mul")(None, (difference, difference), same, {})
    reduction = params.get("reduction", MEAN)
    if reduction == NONE:
        return square
    total = reduce_kernel("mean" if reduction == MEAN else "sum")
    return total(None, (square,), same, {"dim": None, "keepdim": False})


def register_kernels(registrar):
    registrar.kernel("nll_loss", "cuda", FLOAT_DTYPES, nll_loss_kernel)
    registrar.kernel("nll_loss_backward", "cuda", FLOAT_DTYPES, nll_loss_backward_kernel)
    registrar.kernel("nll_loss2d_backward", "cuda", FLOAT_DTYPES, nll_loss_backward_kernel)
    registrar.kernel("mse_loss", "cuda", (D.float32, D.float64), mse_loss_kernel)
