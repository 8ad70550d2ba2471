"""Fused row kernels over the C module `_nn_rows` (src/nn_rows.c), float32 and float64 on cpu:

    softmax, log_softmax    along the last dim (dim = ndim - 1)
    native_layer_norm       output, mean, rstd (weight / bias optional)
    native_layer_norm_backward
                            grad_input, grad_weight, grad_bias from the saved statistics
    native_group_norm_backward
                            the same for group norm ((N, C, ...) input and gradient
                            contiguous), its grad_input through the layer norm rows
    nll_loss                (N, C) or (C,) input, int64 target, optional weight, every
                            reduction and ignore_index; returns (loss, total_weight)
    _softmax_backward_data, _log_softmax_backward_data
                            what the derivative rows of softmax / log_softmax call
                            (inputs grad_output, output; params dim, input_dtype)
    nll_loss_backward       what nll_loss's derivative row calls (inputs grad_output, self,
                            target, weight, total_weight; params reduction, ignore_index,
                            as PyTorch's signature): (N, C) or (C,) self, int64 target;
                            bit for bit the reference's (rows zeroed in parallel groups)
    mse_loss                input and target of one shape: (x - t)^2 by the elementwise C
                            loops (bit for bit), summed by the reductions' (mean, sum)

Layouts: the row (the last dim; the normalized dims for layer norm) must have unit stride and
the leading dims must merge into one strided dim (contiguous tensors, row slices, a
transposed batch of rows); other layouts, other dims for softmax, other dtypes, reduced
precision and small inputs decline to the reference.

Accuracy against the NumPy reference (the tests check these bounds):
  - float32 softmax / log_softmax use the kernel's own vectorized exp (at most 1 ulp from the
    correctly rounded exp; NumPy's is within 2), a fixed 4-vector summation order and, for
    softmax, a multiplication by 1 / sum, so results differ from the reference by a few
    ulp: softmax within relative 1e-6 (8 ulp), log_softmax within relative 1e-6 or
    absolute 1e-6 (its (x - max) - log(sum) cancels near 0). float64 uses the C library's
    exp: relative 1e-13 (log_softmax also absolute 1e-13).
  - layer norm: the reference's formula (mean, then the mean of squared deviations, then
    1 / sqrt(var + eps)) with the fixed summation order: mean / rstd / output within a few
    ulp relative to the row's scale. Backward: the reference's formula in the element type;
    grad_input's two row means in the fixed order (within a few ulp relative to the row's
    scale), grad_weight / grad_bias summed over the rows in NumPy's order: bit for bit.
    Group norm's backward: grad_input likewise; grad_weight / grad_bias per channel summed in
    double (within a few ulp of the reference's pairwise sums).
  - nll_loss: element losses are exact; the loss and weight sums are accumulated in double
    in index order, then rounded (the reference's pairwise sum in the element type differs in
    the last bits). The class dim must have unit stride (else the reference runs). An
    ignored target's loss is 0 (as PyTorch's; the reference computes -x[i, 0] * 0, which is
    -0.0 or NaN for a non-finite x[i, 0]).
  - nll_loss_backward: bit for bit (the same products; zeros elsewhere).
No result depends on the OpenMP thread count (rows are split into fixed groups).
"""
from __future__ import annotations

import math

import numpy as np

from reftorch import _dtype as D
from reftorch._dispatch import get_op
from reftorch._shape import contiguous_strides
from reftorch._storage import CPUStorage
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold
from reftorch_plugins.geometry import coalesce

from . import _C, _nn_rows as _N
from . import kernels, reductions

# Calls on fewer elements than this go to the reference. Measured on a 2-core x86-64
# (float32 rows of 32, best of 300, plugin / reference us): softmax 256 elements 15.5 / 31.9,
# 1,024: 12.8 / 24.3; layer_norm 256: 29.2 / 43.0. The plugin wins from the smallest
# sizes measured; 256 keeps tiny tensors (where both cost microseconds) on the reference.
MIN_NUMEL = 256

DTYPES = (D.float32, D.float64)
_NONE, _MEAN, _SUM = 0, 1, 2  # nll_loss's reduction codes (reftorch._ops.nn_loss)
_REDUCTIONS = (_NONE, _MEAN, _SUM)


def register(registrar):
    """Register every row kernel with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("softmax", "cpu", DTYPES, _softmax_kernel(False))
    registrar.kernel("log_softmax", "cpu", DTYPES, _softmax_kernel(True))
    registrar.kernel("native_layer_norm", "cpu", DTYPES, layer_norm_kernel)
    registrar.kernel("native_layer_norm_backward", "cpu", DTYPES, layer_norm_backward_kernel)
    registrar.kernel("native_group_norm_backward", "cpu", DTYPES, group_norm_backward_kernel)
    registrar.kernel("nll_loss", "cpu", DTYPES, nll_loss_kernel)
    registrar.kernel("_softmax_backward_data", "cpu", DTYPES, _softmax_backward_kernel(False))
    registrar.kernel("_log_softmax_backward_data", "cpu", DTYPES, _softmax_backward_kernel(True))
    # inputs (grad_output, self, target, weight, total_weight), params reduction and
    # ignore_index (PyTorch's signature)
    registrar.kernel("nll_loss_backward", "cpu", DTYPES, nll_loss_backward_kernel)
    registrar.kernel("mse_loss", "cpu", DTYPES, mse_loss_kernel)


def _softmax_kernel(log):
    def kernel(out, inputs, dtypes, params):
        """(log_)softmax along the last dim of a tensor whose rows have unit stride."""
        x = inputs[0] if len(inputs) == 1 else None
        if not _usable(x) or params["dim"] != len(x._shape) - 1:
            return NotImplemented
        rows = _rows(x, 1)
        if rows is None:
            return NotImplemented
        count, stride, n = rows
        result = Tensor._empty(x._shape, x._storage.dtype)
        _N.softmax(log, x._storage.array, x._offset, count, n, stride, result._storage.array)
        return result
    return kernel


def _softmax_backward_kernel(log):
    def kernel(out, inputs, dtypes, params):
        """grad of (log_)softmax along the last dim from (grad_output, output): y * (g -
        sum(g * y)), or g - exp(y) * sum(g) (y a log_softmax output, so y <= 0)."""
        if len(inputs) != 2:
            return NotImplemented
        grad, y = inputs
        if not _usable(y) or not _on_cpu_as(grad, y._storage.dtype) or \
                grad._shape != y._shape or params.get("dim") != len(y._shape) - 1:
            return NotImplemented
        if params.get("input_dtype", y.dtype) is not y.dtype:
            return NotImplemented
        grad_rows, y_rows = _rows(grad, 1), _rows(y, 1)
        if grad_rows is None or y_rows is None:
            return NotImplemented
        result = Tensor._empty(y._shape, y._storage.dtype)
        _N.softmax_backward(log, grad._storage.array, grad._offset, y._storage.array,
                            y._offset, y_rows[0], y_rows[2], (grad_rows[1], y_rows[1]),
                            result._storage.array)
        return result
    return kernel


def layer_norm_kernel(out, inputs, dtypes, params):
    """native_layer_norm: (output, mean, rstd), the statistics shaped
    x.shape[:axis] + (1,) * len(normalized_shape)."""
    if len(inputs) != 3:
        return NotImplemented
    x, weight, bias = inputs
    normalized = params["normalized_shape"]
    if not _usable(x) or not normalized or len(normalized) > len(x._shape):
        return NotImplemented
    dtype = x._storage.dtype
    for p in (weight, bias):
        if p is not None and not (_on_cpu_as(p, dtype) and p.is_contiguous()):
            return NotImplemented
    rows = _rows(x, len(normalized))
    if rows is None:
        return NotImplemented
    count, stride, n = rows
    axis = len(x._shape) - len(normalized)
    result = Tensor._empty(x._shape, dtype)
    stats_shape = tuple(x._shape[:axis]) + (1,) * len(normalized)
    mean, rstd = Tensor._empty(stats_shape, dtype), Tensor._empty(stats_shape, dtype)
    _N.layer_norm(x._storage.array, x._offset, count, n, stride,
                  None if weight is None else weight._storage.array,
                  0 if weight is None else weight._offset,
                  None if bias is None else bias._storage.array,
                  0 if bias is None else bias._offset, float(params["eps"]),
                  result._storage.array, mean._storage.array, rstd._storage.array)
    return result, mean, rstd


def layer_norm_backward_kernel(out, inputs, dtypes, params):
    """native_layer_norm_backward: (grad_input, grad_weight, grad_bias) from the statistics
    native_layer_norm saved, None where params['output_mask'] says so."""
    grad, x, mean, rstd, weight = inputs
    k, mask = params["normalized_ndim"], params["output_mask"]
    if not _usable(x) or not 0 < k <= len(x._shape) or grad._shape != x._shape:
        return NotImplemented
    dtype = x._storage.dtype
    if not all(_on_cpu_as(t, dtype) and t.is_contiguous() for t in (grad, mean, rstd)) or \
            (weight is not None and not (_on_cpu_as(weight, dtype) and weight.is_contiguous())):
        return NotImplemented
    x_rows, g_rows = _rows(x, k), _rows(grad, k)
    if x_rows is None or g_rows is None:
        return NotImplemented
    (rows, x_stride, n), g_stride = x_rows, g_rows[1]
    if mean.numel() != rows or rstd.numel() != rows:
        return NotImplemented
    normalized = x._shape[len(x._shape) - k:]
    grad_input = Tensor._empty(x._shape, dtype) if mask[0] else None
    grad_weight = Tensor._empty(normalized, dtype) if mask[1] else None
    grad_bias = Tensor._empty(normalized, dtype) if mask[2] else None
    _N.layer_norm_backward(grad._storage.array, grad._offset, g_stride, x._storage.array,
                           x._offset, x_stride, rows, n, k < len(x._shape),
                           None if weight is None else weight._storage.array,
                           0 if weight is None else weight._offset,
                           mean._storage.array, mean._offset, rstd._storage.array, rstd._offset,
                           *(None if t is None else t._storage.array
                             for t in (grad_input, grad_weight, grad_bias)))
    return grad_input, grad_weight, grad_bias


def group_norm_backward_kernel(out, inputs, dtypes, params):
    """native_group_norm_backward: (grad_input, grad_weight, grad_bias) from the (N, group)
    statistics native_group_norm saved, None where params['output_mask'] says so."""
    grad, x, mean, rstd, weight = inputs
    N, C, HxW, group = (params[k] for k in ("N", "C", "HxW", "group"))
    mask = params["output_mask"]
    if not _usable(x) or len(x._shape) < 2 or grad._shape != x._shape or \
            x._shape[:2] != (N, C) or math.prod(x._shape[2:]) != HxW or group < 1 or C % group:
        return NotImplemented
    dtype = x._storage.dtype
    if not all(_on_cpu_as(t, dtype) and t.is_contiguous() for t in (grad, x, mean, rstd)) or \
            mean.numel() != N * group or rstd.numel() != N * group or \
            (weight is not None and not (_on_cpu_as(weight, dtype) and weight.is_contiguous()
                                         and weight._shape == (C,))):
        return NotImplemented
    grad_input = Tensor._empty(x._shape, dtype) if mask[0] else None
    grad_weight = Tensor._empty((C,), dtype) if mask[1] else None
    grad_bias = Tensor._empty((C,), dtype) if mask[2] else None
    # each channel's weight repeated over its positions: the rows' weights, group by group
    dense = kernels._dense_elements      # views: every operand was checked contiguous
    weights = None if weight is None else np.repeat(dense(weight), HxW)
    _N.group_norm_backward(dense(grad), dense(x), N, C, HxW, group, weights, dense(mean),
                           dense(rstd), *(None if t is None else t._storage.array
                                           for t in (grad_input, grad_weight, grad_bias)))
    return grad_input, grad_weight, grad_bias


def nll_loss_kernel(out, inputs, dtypes, params):
    """nll_loss over a (N, C) or (C,) input: (loss, total_weight). No size threshold: the
    reference runs about ten NumPy calls (~40 us) whatever the size, the plugin ~8 us."""
    if len(inputs) != 3:
        return NotImplemented
    x, target, weight = inputs
    reduction = params.get("reduction", _MEAN)
    operands = _nll_operands(x, target, weight, params)
    if operands is None or reduction not in _REDUCTIONS:
        return NotImplemented
    N, C, ignore_index = operands
    row_stride, class_stride = x._strides if len(x._shape) == 2 else (0, x._strides[0])
    if class_stride != 1 and C > 1:
        return NotImplemented
    dtype = x._storage.dtype
    loss = Tensor._empty(x._shape[:1] if len(x._shape) == 2 else (), dtype) \
        if reduction == _NONE else None
    total, weight_sum = _N.nll_loss(x._storage.array, x._offset, N, C, row_stride,
                                    target._storage.array, target._offset,
                                    None if weight is None else weight._storage.array,
                                    0 if weight is None else weight._offset, ignore_index,
                                    None if loss is None else loss._storage.array)
    np_dtype = dtype.numpy_dtype
    total_weight = Tensor._from_array(np.asarray(weight_sum, np_dtype))
    if reduction == _SUM:
        loss = Tensor._from_array(np.asarray(total, np_dtype))
    elif reduction == _MEAN:  # 0 / 0 when every target is ignored: NaN, as the reference's
        total, weight_sum = np_dtype.type(total), np_dtype.type(weight_sum)
        if weight_sum >= 1:   # cannot overflow or divide by 0: no errstate (a few us)
            value = total / weight_sum
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                value = total / weight_sum
        loss = Tensor._from_array(np.asarray(value, np_dtype))
    return loss, total_weight


def nll_loss_backward_kernel(out, inputs, dtypes, params):
    """grad of nll_loss for a (N, C) or (C,) input: zeros but -(w[t] * g) at each target
    (g divided by total_weight first for 'mean', in C, as the derivative row computes it)."""
    if len(inputs) != 5:
        return NotImplemented
    grad, x, target, weight, total_weight = inputs
    reduction = params.get("reduction", _MEAN)
    operands = _nll_operands(x, target, weight, params)
    if operands is None or reduction not in _REDUCTIONS:
        return NotImplemented
    N, C, ignore_index = operands
    dtype = x._storage.dtype
    if not _on_cpu_as(grad, dtype):
        return NotImplemented
    divisor = ()
    if reduction == _NONE:
        if grad.numel() != N or (len(grad._shape) == 1 and grad._strides[0] != 1 and N > 1):
            return NotImplemented
        g_stride = 1
    else:  # the one gradient value, read with stride 0 for every row
        if grad.numel() != 1:
            return NotImplemented
        g_stride = 0
        if reduction == _MEAN:
            if not (_on_cpu_as(total_weight, dtype) and total_weight.numel() == 1):
                return NotImplemented
            divisor = (total_weight._storage.array, total_weight._offset)
    result = Tensor._empty(x._shape, dtype)
    _N.nll_loss_backward(grad._storage.array, grad._offset, g_stride, N, C,
                         target._storage.array, target._offset,
                         None if weight is None else weight._storage.array,
                         0 if weight is None else weight._offset, ignore_index,
                         result._storage.array, *divisor)
    return result


def _nll_operands(x, target, weight, params):
    """(N, C, ignore_index) when nll_loss's kernels take these operands: x a cpu float32 or
    float64 tensor of shape (N, C) or (C,) with N, C >= 1, target a contiguous int64 tensor
    of N elements, weight None or a contiguous tensor of x's dtype; else None."""
    if not (isinstance(x, Tensor) and type(x._storage) is CPUStorage):
        return None
    dtype, shape = x._storage.dtype, x._shape
    if dtype not in DTYPES or not 1 <= len(shape) <= 2:
        return None
    N, C = shape if len(shape) == 2 else (1, shape[0])
    if N == 0 or C == 0:
        return None
    if not (isinstance(target, Tensor) and type(target._storage) is CPUStorage and
            target._storage.dtype is D.int64 and target.numel() == N and
            target.is_contiguous()):
        return None
    if weight is not None and not (_on_cpu_as(weight, dtype) and weight.is_contiguous()):
        return None
    ignore_index = params.get("ignore_index", -100)
    if not -2**63 <= ignore_index < 2**63:
        return None
    return N, C, ignore_index


# --- checks and geometry -------------------------------------------------------------------

def _usable(x, min_numel=None):
    """A cpu float32/float64 tensor of at least one dim and `min_numel` elements (default:
    the size threshold)."""
    if min_numel is None:
        min_numel = size_threshold(MIN_NUMEL)
    return (isinstance(x, Tensor) and type(x._storage) is CPUStorage and
            x._storage.dtype in DTYPES and len(x._shape) >= 1 and
            math.prod(x._shape) >= min_numel)


def _rows(x, k):
    """x as rows over its last k dims: (rows, row stride, n) when those dims are one
    unit-stride run and the leading dims merge into one strided dim; else None."""
    shape, strides = x._shape, x._strides
    lead = len(shape) - k
    n = math.prod(shape[lead:])
    if n == 0:
        return None
    if strides == contiguous_strides(shape):   # the common case, without coalescing
        count = math.prod(shape[:lead])
        return (count, n, n) if count else None
    inner_shape, (inner,) = coalesce(list(shape[lead:]), [list(strides[lead:])])
    if len(inner_shape) != 1 or (inner[0] != 1 and n > 1):
        return None
    outer_shape, (outer,) = coalesce(list(shape[:lead]), [list(strides[:lead])])
    if len(outer_shape) != 1 or outer_shape[0] == 0:
        return None
    stride = outer[0] if outer_shape[0] > 1 else n
    return outer_shape[0], stride, n


def _on_cpu_as(t, dtype):
    return isinstance(t, Tensor) and type(t._storage) is CPUStorage and \
        t._storage.dtype is dtype


# --- mse_loss ---------------------------------------------------------------------------------

def mse_loss_kernel(out, inputs, dtypes, params):
    """mse_loss of an input and a target of one shape: their difference by the elementwise
    C loop, then for 'mean' (over n, in the element type, as the reference divides) and
    'sum' reduce.c's sum of its squares (each the reference's (x - t)^2, bit for bit: the
    square is taken as the sum reads it, so the squares are never written), or for 'none'
    the squares in place. Threaded passes where the reference makes three single-threaded
    NumPy ones. The sum adds in reduce.c's fixed order, not NumPy's: within rounding."""
    if len(inputs) != 2:
        return NotImplemented
    x, target = inputs
    reduction = params.get("reduction", _MEAN)
    if x._shape != target._shape or reduction not in _REDUCTIONS or \
            math.prod(x._shape) < size_threshold(kernels.MIN_NUMEL):
        return NotImplemented
    dtype = dtypes[0]
    difference = _SUB(None, (x, target), (dtype, dtype, dtype), {})
    if difference is NotImplemented:
        return NotImplemented
    if reduction == _NONE:
        return _MUL(difference, (difference, difference), (dtype, dtype, dtype), {})
    total = reductions._reduce(reductions._R.SUMSQ, difference, None, False)
    if total is NotImplemented:
        return NotImplemented
    if reduction == _MEAN:
        total._storage.array[total._offset] /= total._storage.array.dtype.type(
            difference.numel())
    return total


_SUB = kernels._binary_kernel(get_op("sub"), _C.SUB)
_MUL = kernels._binary_kernel(get_op("mul"), _C.MUL)
