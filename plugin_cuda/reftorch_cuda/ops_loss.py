"""nll_loss and nll_loss_backward on cuda (kernels/loss.cu) for the four float dtypes, so
cross_entropy (log_softmax + nll_loss) runs on the device forward and backward.

Served: a (N, C) or (C,) input of any strides with C >= 1, int64 targets of any stride, an
optional weight of the input's dtype, every reduction and ignore_index; a uint8 target, other
dims (nll_loss2d's 4-D form) and mixed dtypes decline to the reference.

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

from reftorch import _dtype as D
from reftorch._tensor import Tensor

from .kernel_base import FLOAT_TYPES, Program, launch_blocks, on_one_cuda_device, pointer

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


def _rows(x, target, weight, params):
    """(n, classes, x row stride, x class stride) when the call is served, else None."""
    if x.dtype.name not in FLOAT_TYPES or x.ndim not in (1, 2) or target.dtype is not D.int64:
        return None
    if params.get("reduction", MEAN) not in (NONE, MEAN, SUM):
        return None
    if not -2 ** 63 <= params.get("ignore_index", -100) < 2 ** 63:
        return None
    if x.ndim == 2:
        (n, classes), (row_stride, class_stride) = x._shape, x._strides
    else:
        (n, classes), (row_stride, class_stride) = (1, x._shape[0]), (0, x._strides[0])
    if classes == 0 or target.numel() != n or target.ndim != x.ndim - 1:
        return None
    if weight is not None and (weight.dtype is not x.dtype or weight.ndim != 1 or
                               weight.numel() != classes):
        return None
    tensors = (x, target) if weight is None else (x, target, weight)
    if not on_one_cuda_device(tensors):
        return None
    return n, classes, row_stride, class_stride


def _stride(t):
    """The one stride of a 0-dim or 1-dim tensor (0 for 0-dim)."""
    return t._strides[0] if t.ndim else 0


def _null_or(t):
    return pointer(t) if t is not None else ctypes.c_uint64(0)


def _check_targets(x, target, n, classes, ignore_index):
    """Queue the target check; returns the status buffer to read once the op's kernels are
    queued too (one synchronisation for the whole op)."""
    status = Tensor._empty((2,), D.int64, x.device)
    args = (ctypes.c_int64(n), ctypes.c_int64(classes), ctypes.c_int64(_stride(target)),
            ctypes.c_int64(ignore_index), pointer(status), pointer(target))
    launch_blocks(LOSS, check_expression(), 1, x, args)
    return status


def _raise_on_bad_target(status, n):
    """The reference's error for the first bad target (reads the status back: a sync)."""
    first, target = (int(v) for v in status._storage.read(status._offset, 2))
    if first < n:
        raise IndexError(f"Target {target} is out of bounds.")


def nll_loss_kernel(out, inputs, dtypes, params):
    """(loss, total_weight) as the reference's nll_loss kernel returns them."""
    if out is not None or len(inputs) != 3:
        return NotImplemented
    x, target, weight = inputs
    rows = _rows(x, target, weight, params)
    if rows is None:
        return NotImplemented
    n, classes, row_stride, class_stride = rows
    reduction, ignore_index = params.get("reduction", MEAN), params.get("ignore_index", -100)
    status = _check_targets(x, target, n, classes, ignore_index)
    loss_shape = x._shape[:1] if reduction == NONE and x.ndim == 2 else ()
    loss = Tensor._empty(loss_shape, x.dtype, x.device)
    total_weight = Tensor._empty((), x.dtype, x.device)
    args = (ctypes.c_int64(n), ctypes.c_int64(classes), ctypes.c_int64(row_stride),
            ctypes.c_int64(class_stride), ctypes.c_int64(_stride(target)),
            ctypes.c_int64(0 if weight is None else weight._strides[0]),
            ctypes.c_int64(ignore_index), ctypes.c_int(reduction), pointer(loss),
            pointer(total_weight), pointer(x), pointer(target), _null_or(weight))
    launch_blocks(LOSS, forward_expression(x.dtype.name), 1, x, args)
    _raise_on_bad_target(status, n)
    return loss, total_weight


def nll_loss_backward_kernel(out, inputs, dtypes, params):
    """grad_input of nll_loss (inputs grad_output, self, target, weight, total_weight)."""
    if out is not None or len(inputs) != 5:
        return NotImplemented
    grad, x, target, weight, total_weight = inputs
    rows = _rows(x, target, weight, params)
    if rows is None or grad.dtype is not x.dtype or not on_one_cuda_device((x, grad)):
        return NotImplemented
    n, classes = rows[:2]
    reduction, ignore_index = params.get("reduction", MEAN), params.get("ignore_index", -100)
    per_row = reduction == NONE and x.ndim == 2
    if per_row and (grad.numel() != n or grad.ndim != 1):
        return NotImplemented
    if not per_row and grad.numel() != 1:
        return NotImplemented   # the reference raises its error
    mean = reduction == MEAN
    if mean and not (total_weight is not None and total_weight.dtype is x.dtype and
                     total_weight.numel() == 1 and on_one_cuda_device((x, total_weight))):
        return NotImplemented
    status = _check_targets(x, target, n, classes, ignore_index)
    result = Tensor._empty(x._shape, x.dtype, x.device)
    args = (ctypes.c_int64(n), ctypes.c_int64(classes),
            ctypes.c_int64(grad._strides[0] if per_row else 0),
            ctypes.c_int64(_stride(target)),
            ctypes.c_int64(0 if weight is None else weight._strides[0]),
            ctypes.c_int64(ignore_index), ctypes.c_int(int(mean)), pointer(result),
            pointer(grad), pointer(target), _null_or(weight),
            pointer(total_weight) if mean else ctypes.c_uint64(0))
    if n:
        storage = result._storage
        storage._driver.launch(storage._index, LOSS, backward_expression(x.dtype.name),
                               n * classes, args)
    _raise_on_bad_target(status, n)
    return result


nll_loss_kernel.__name__ = "cuda_nll_loss"
nll_loss_backward_kernel.__name__ = "cuda_nll_loss_backward"


def register_kernels(registrar):
    floats = [D.by_name(name) for name in FLOAT_TYPES]
    registrar.kernel("nll_loss", "cuda", floats, nll_loss_kernel)
    registrar.kernel("nll_loss_backward", "cuda", floats, nll_loss_backward_kernel)
