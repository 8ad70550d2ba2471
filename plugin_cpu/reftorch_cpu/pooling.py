"""Pooling and batch / group normalization over the C module `_pool` (src/pool.c), float32
and float64 on cpu:

    max_pool2d_with_indices         (values, int64 flat in-plane indices)
    max_pool2d_with_indices_backward  (grad_output, indices; the input's shape a param)
    avg_pool2d, avg_pool2d_backward
    adaptive_avg_pool2d, adaptive_avg_pool2d_backward
    adaptive_max_pool2d             (when the output size divides the input's: max_pool2d)
    max_pool3d_with_indices, max_pool3d_with_indices_backward  (through the 2-d loops, below)
    native_batch_norm               (output, save_mean, save_invstd); training mode updates
                                    running_mean / running_var in place, as the reference
    native_batch_norm_backward      (grad_input, grad_weight, grad_bias), training mode
    native_group_norm               (output, mean (N, group), rstd (N, group))

The max-pool backward kernel takes PyTorch's inputs (grad_output, self, indices) or
reftorch's (grad_output, indices) with an `input_shape` param. Batch norm's training-mode
backward is the declared native_batch_norm_backward (below: per channel, sums in double);
its evaluation-mode backward and group norm's are compositions of reftorch ops (their
derivative rows), so they have no kernel here.

Layouts: pooling inputs are (C, H, W) or (N, C, H, W) at any strides (transposed, sliced,
channels-last): the C loops take four strides; rows with unit stride along W run
vectorized, others element by element. Outputs are contiguous, as the reference's. For the
normalizations the spatial dims must merge into one unit-stride run (N and C may have any
strides; channels-last inputs decline); the batch-norm output keeps x's order of N and C
(as the reference's NumPy arithmetic does), group norm's is contiguous.

Results against the reference (the tests check them):
  - pooling, forward and backward: bit for bit (same visiting order, same NaN and tie rule,
    the same double division by PyTorch's divisor; backward sums in double in the
    reference's order).
  - batch / group norm: output, mean and rstd within a few ulp (float32) of the
    reference: the statistics are summed in double (16 lanes per plane, planes in order) where
    the reference sums pairwise in the element type; given the statistics, the output and
    the running-stat update are computed with the reference's roundings.
Nothing depends on the OpenMP thread count (fixed blocks of rows or planes).

The 1-d torch forms (max_pool1d, avg_pool1d, adaptive_avg_pool1d) run the 2-d ops on an
unsqueezed input, so they are served too. max_pool3d pools each depth slice with the 2-d
loop, then folds the depth window's slices by the same rule (see max_pool3d_kernel); its
gradient is the 2-d one over (D*H, W) planes. Declined (the reference runs): other dtypes
(half types, integers), avg and adaptive 3-d pooling, adaptive max pooling with uneven
windows, parameters of another dtype or not contiguous, running statistics sharing memory
with another operand, channels-last normalization inputs, and empty inputs.
"""
from __future__ import annotations

import math

import numpy as np

from reftorch import _dtype as D
from reftorch._ops.nn_pooling import pooling_output_size
from reftorch._shape import contiguous_strides
from reftorch._storage import CPUStorage
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from . import _pool as _P
from .gemm import _collapsed_stride

DTYPES = (D.float32, D.float64)

# Calls on fewer input elements than this go to the reference: only empty inputs (whose
# results are the reference's edge cases and cost nothing). The reference's cost is several
# NumPy calls per kernel offset or statistic, so the plugin is faster from the smallest
# inputs. Measured on a 2-core x86-64 shared with other jobs (best of 300 calls of the
# public function, plugin / reference us, float32): max_pool2d 2x2 on (1, 1, 2, 2) 39 / 342,
# avg_pool2d 41 / 268, adaptive_avg_pool2d to 1x1 14 / 391, avg_pool2d forward+backward
# 176 / 585, batch_norm training 37 / 71, group_norm 23 / 34; on (1, 4, 8, 8) and
# (2, 16, 16, 16) the gaps only grow (adaptive to 1x1 on (2, 16, 16, 16): 14 / 7,117).
MIN_NUMEL = {"pool": 1, "norm": 1}


def register(registrar):
    """Register this group's kernels with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("max_pool2d_with_indices", "cpu", DTYPES, max_pool2d_kernel)
    registrar.kernel("adaptive_max_pool2d", "cpu", DTYPES, adaptive_max_pool2d_kernel)
    registrar.kernel("max_pool3d_with_indices", "cpu", DTYPES, max_pool3d_kernel)
    registrar.kernel("max_pool3d_with_indices_backward", "cpu", DTYPES,
                     max_pool3d_backward_kernel)
    registrar.kernel("avg_pool2d", "cpu", DTYPES, avg_pool2d_kernel)
    registrar.kernel("avg_pool2d_backward", "cpu", DTYPES, avg_pool2d_backward_kernel)
    registrar.kernel("adaptive_avg_pool2d", "cpu", DTYPES, adaptive_avg_pool2d_kernel)
    registrar.kernel("adaptive_avg_pool2d_backward", "cpu", DTYPES,
                     adaptive_avg_pool2d_backward_kernel)
    registrar.kernel("native_batch_norm", "cpu", DTYPES, batch_norm_kernel)
    registrar.kernel("native_batch_norm_backward", "cpu", DTYPES, batch_norm_backward_kernel)
    registrar.kernel("native_group_norm", "cpu", DTYPES, group_norm_kernel)
    registrar.kernel("max_pool2d_with_indices_backward", "cpu", DTYPES,
                     max_pool2d_backward_kernel)


# --- pooling --------------------------------------------------------------------------------

def max_pool2d_kernel(out, inputs, dtypes, params):
    """(values, indices) of a 2-d max pool over (C, H, W) or (N, C, H, W)."""
    x = _single(inputs)
    if x is None or not _pool_input(x):
        return NotImplemented
    window = _max_pool_window(params, 2)
    if window is None:
        return NotImplemented
    kernel, stride, padding, dilation = window
    out_size = tuple(pooling_output_size(*a, bool(params["ceil_mode"])) for a in
                     zip(x._shape[-2:], kernel, stride, padding, dilation))
    if min(out_size) < 1:
        return NotImplemented
    shape, strides = _planes(x)
    result_shape = tuple(x._shape[:-2]) + out_size
    values = Tensor._empty(result_shape, x._storage.dtype)
    indices = Tensor._empty(result_shape, D.int64)
    _P.max_pool2d(x._storage.array, x._offset, shape, strides,
                  tuple(kernel) + tuple(stride) + tuple(padding) + tuple(dilation), out_size,
                  values._storage.array, indices._storage.array)
    return values, indices


def adaptive_max_pool2d_kernel(out, inputs, dtypes, params):
    """An adaptive max pool whose output size divides the input's: its windows are then the
    regular ones of kernel = stride = input / output (adaptive window i spans
    [floor(i H / OH), ceil((i + 1) H / OH)) = [i k, (i + 1) k)), and both ops keep the first
    maximum (or NaN) of a window in the same order: max_pool2d's C loop, its bits. Other
    sizes (windows of varying size) are declined."""
    x = _single(inputs)
    size = params.get("output_size")
    if x is None or not _ints(size) or len(size) != 2 or min(size) < 1 or len(x._shape) < 3:
        return NotImplemented
    height, width = x._shape[-2:]
    if height % size[0] or width % size[1]:
        return NotImplemented
    kernel = (height // size[0], width // size[1])
    return max_pool2d_kernel(out, inputs, dtypes, {
        "kernel_size": kernel, "stride": kernel, "padding": (0, 0), "dilation": (1, 1),
        "ceil_mode": False})


def max_pool3d_kernel(out, inputs, dtypes, params):
    """(values, indices) of a 3-d max pool: the (H, W) max pool of every depth slice (the C
    2-d loop), then each depth window's slices folded in depth order by the 2-d loop's own
    rule (the first valid one starts, a later one replaces it if larger or NaN). That picks
    what the reference's scan in (kd, kh, kw) order picks, the last NaN if there is one, else
    the first maximum: the same values and indices."""
    x = _single(inputs)
    if x is None or not _cpu_float(x) or len(x._shape) not in (4, 5) or \
            math.prod(x._shape) < MIN_NUMEL["pool"]:
        return NotImplemented
    window = _max_pool_window(params, 3)
    if window is None:
        return NotImplemented
    kernel, stride, padding, dilation = window
    planes = _merged_planes(x, 3)          # (P, D, H, W): every depth slice a 2-d plane
    if planes is None:
        return NotImplemented
    ceil_mode = bool(params["ceil_mode"])
    sliced = max_pool2d_kernel(None, (planes,), dtypes, {
        "kernel_size": kernel[1:], "stride": stride[1:], "padding": padding[1:],
        "dilation": dilation[1:], "ceil_mode": ceil_mode})
    depth, height, width = x._shape[-3:]
    out_depth = pooling_output_size(depth, kernel[0], stride[0], padding[0], dilation[0],
                                    ceil_mode)
    if sliced is NotImplemented or out_depth < 1:
        return NotImplemented
    # each depth tap's input slice for every output depth, and whether it is inside
    taps = np.arange(out_depth) * stride[0] + np.arange(kernel[0])[:, None] * dilation[0] - \
        padding[0]
    inside = (taps >= 0) & (taps < depth)
    if not inside.any(axis=0).all():     # a window of padding alone: nothing starts its fold
        return NotImplemented
    slices = taps.clip(0, depth - 1)
    values, flat = sliced[0]._np, sliced[1]._np          # (P, D, OH, OW)
    best = np.empty((values.shape[0], out_depth) + values.shape[2:], values.dtype)
    index = np.empty(best.shape, np.int64)
    started = np.zeros((1, out_depth, 1, 1), bool)
    for kd in range(kernel[0]):
        valid = inside[kd].reshape(started.shape)
        slab = values[:, slices[kd]]
        wins = valid & ~started | valid & ((slab > best) | (slab != slab))
        np.copyto(best, slab, where=wins)
        np.copyto(index, slices[kd].reshape(started.shape) * height * width +
                  flat[:, slices[kd]], where=wins)
        started |= valid
    shape = x._shape[:-3] + best.shape[1:]
    return Tensor._from_array(best.reshape(shape)), Tensor._from_array(index.reshape(shape))


def max_pool3d_backward_kernel(out, inputs, dtypes, params):
    """The 3-d max-pool gradient as the 2-d one: a depth-and-height pair is one row of a
    (D*H, W) plane, and the indices already count in the flat (D, H, W) plane."""
    if len(inputs) != 2 or not isinstance(inputs[0], Tensor):
        return NotImplemented
    grad, indices = inputs
    input_shape = tuple(params.get("input_shape") or ())
    if len(input_shape) not in (4, 5) or len(grad._shape) != len(input_shape):
        return NotImplemented
    grad2, indices2 = _rows_merged(grad), _rows_merged(indices) \
        if isinstance(indices, Tensor) else None
    if grad2 is None or indices2 is None:
        return NotImplemented
    shape2 = input_shape[:-3] + (input_shape[-3] * input_shape[-2], input_shape[-1])
    result = max_pool2d_backward_kernel(None, (grad2, indices2), dtypes,
                                        {"input_shape": shape2})
    if result is NotImplemented:
        return NotImplemented
    return Tensor._make(result._storage, result._offset, input_shape,
                        contiguous_strides(input_shape))


def _merged_planes(x, spatial):
    """x (..., D, H, W) viewed as (P, D, H, W), P the leading dims' product (one plane per
    depth slice to the 2-d loop), without a copy; None if those dims do not merge."""
    stride = _collapsed_stride(x._shape[:-spatial], x._strides[:-spatial])
    if stride is None:
        return None
    return Tensor._make(x._storage, x._offset, (math.prod(x._shape[:-spatial]),) +
                        x._shape[-spatial:], (stride,) + x._strides[-spatial:])


def _rows_merged(t):
    """(..., D, H, W) viewed as (..., D*H, W) without a copy, or None."""
    stride = _collapsed_stride(t._shape[-3:-1], t._strides[-3:-1])
    if stride is None:
        return None
    return Tensor._make(t._storage, t._offset,
                        t._shape[:-3] + (t._shape[-3] * t._shape[-2], t._shape[-1]),
                        t._strides[:-3] + (stride, t._strides[-1]))


def max_pool2d_backward_kernel(out, inputs, dtypes, params):
    """The max-pool gradient: zeros of the input's shape plus each output's gradient at its
    index (bit for bit the reference's scatter_add); IndexError for an index outside the
    plane."""
    if len(inputs) == 3:
        grad, x, indices = inputs
        input_shape = tuple(x._shape) if isinstance(x, Tensor) else None
    elif len(inputs) == 2:
        grad, indices = inputs
        input_shape = params.get("input_shape")
    else:
        return NotImplemented
    if not _pool_input(grad, min_numel=1) or not _ints(input_shape) or \
            len(input_shape) != len(grad._shape) or \
            tuple(input_shape[:-2]) != tuple(grad._shape[:-2]) or \
            not (isinstance(indices, Tensor) and type(indices._storage) is CPUStorage and
                 indices._storage.dtype is D.int64 and indices._shape == grad._shape):
        return NotImplemented
    shape, strides = _planes(grad)
    _, index_strides = _planes(indices)
    result = Tensor._empty(tuple(input_shape), grad._storage.dtype)
    _P.max_pool2d_backward(grad._storage.array, grad._offset, shape, strides,
                           indices._storage.array, indices._offset, index_strides,
                           tuple(input_shape[-2:]), result._storage.array)
    return result


def avg_pool2d_kernel(out, inputs, dtypes, params):
    x = _single(inputs)
    if x is None or not _pool_input(x):
        return NotImplemented
    window = _avg_window(params)
    if window is None:
        return NotImplemented
    out_size = tuple(pooling_output_size(s, k, st, p, 1, bool(params["ceil_mode"]))
                     for s, k, st, p in zip(x._shape[-2:], window[0:2], window[2:4],
                                            window[4:6]))
    if min(out_size) < 1:
        return NotImplemented
    shape, strides = _planes(x)
    result = Tensor._empty(tuple(x._shape[:-2]) + out_size, x._storage.dtype)
    _P.avg_pool2d(x._storage.array, x._offset, shape, strides, window, out_size,
                  bool(params["count_include_pad"]), params["divisor_override"],
                  result._storage.array)
    return result


def avg_pool2d_backward_kernel(out, inputs, dtypes, params):
    grad = _single(inputs)
    input_shape = params.get("input_shape")
    if grad is None or not _pool_input(grad, min_numel=1) or not _ints(input_shape) or \
            len(input_shape) != len(grad._shape) or \
            tuple(input_shape[:-2]) != tuple(grad._shape[:-2]) or \
            math.prod(input_shape) < MIN_NUMEL["pool"]:
        return NotImplemented
    window = _avg_window(params)
    if window is None:
        return NotImplemented
    out_size = tuple(pooling_output_size(s, k, st, p, 1, bool(params["ceil_mode"]))
                     for s, k, st, p in zip(input_shape[-2:], window[0:2], window[2:4],
                                            window[4:6]))
    if out_size != tuple(grad._shape[-2:]):
        return NotImplemented
    shape, strides = _planes(grad)
    result = Tensor._empty(tuple(input_shape), grad._storage.dtype)
    _P.avg_pool2d_backward(grad._storage.array, grad._offset, shape, strides, window,
                           tuple(input_shape[-2:]), bool(params["count_include_pad"]),
                           params["divisor_override"], result._storage.array)
    return result


def adaptive_avg_pool2d_kernel(out, inputs, dtypes, params):
    x = _single(inputs)
    size = params.get("output_size")
    if x is None or not _pool_input(x) or not _ints(size) or len(size) != 2 or \
            min(size) < 1:
        return NotImplemented
    shape, strides = _planes(x)
    result = Tensor._empty(tuple(x._shape[:-2]) + tuple(size), x._storage.dtype)
    _P.adaptive_avg_pool2d(x._storage.array, x._offset, shape, strides, tuple(size),
                           result._storage.array)
    return result


def adaptive_avg_pool2d_backward_kernel(out, inputs, dtypes, params):
    grad = _single(inputs)
    input_shape, size = params.get("input_shape"), params.get("output_size")
    if grad is None or not _pool_input(grad, min_numel=1) or not _ints(input_shape, size) or \
            len(input_shape) != len(grad._shape) or len(size) != 2 or \
            tuple(input_shape[:-2]) != tuple(grad._shape[:-2]) or \
            tuple(grad._shape[-2:]) != tuple(size) or min(input_shape[-2:]) < 1 or \
            math.prod(input_shape) < MIN_NUMEL["pool"]:
        return NotImplemented
    shape, strides = _planes(grad)
    result = Tensor._empty(tuple(input_shape), grad._storage.dtype)
    _P.adaptive_avg_pool2d_backward(grad._storage.array, grad._offset, shape, strides,
                                    tuple(input_shape[-2:]), result._storage.array)
    return result


# --- normalization --------------------------------------------------------------------------

def batch_norm_kernel(out, inputs, dtypes, params):
    """native_batch_norm: (output, save_mean, save_invstd), updating the running statistics
    in place in training mode."""
    if len(inputs) != 5:
        return NotImplemented
    x, weight, bias, running_mean, running_var = inputs
    training = bool(params["training"])
    if not _norm_input(x):
        return NotImplemented
    dtype, channels = x._storage.dtype, x._shape[1]
    if not all(_parameter(p, dtype, channels) for p in inputs[1:]):
        return NotImplemented
    if (running_mean is None) != (running_var is None):
        return NotImplemented
    if running_mean is not None and training and not _updatable(running_mean, running_var,
                                                                 x, weight, bias):
        return NotImplemented
    if running_mean is None and not training:
        return NotImplemented
    geometry = _norm_planes(x)
    if geometry is None:
        return NotImplemented
    shape, strides = geometry
    N, C, L = shape
    if training and N * L == 0:
        return NotImplemented
    result, out_strides = _batch_norm_output(x, shape, strides)
    save_mean, save_rstd = Tensor._empty((C,), dtype), Tensor._empty((C,), dtype)
    _P.batch_norm(x._storage.array, x._offset, shape, strides, *_buffer(weight),
                  *_buffer(bias), *_buffer(running_mean), *_buffer(running_var), training,
                  float(params["momentum"]), float(params["eps"]), result._storage.array,
                  out_strides, save_mean._storage.array, save_rstd._storage.array)
    if not training:   # evaluation saves no statistics (empty, as the reference's)
        save_mean, save_rstd = Tensor._empty((0,), dtype), Tensor._empty((0,), dtype)
    return result, save_mean, save_rstd


def batch_norm_backward_kernel(out, inputs, dtypes, params):
    """native_batch_norm_backward (training mode): (grad_input, grad_weight, grad_bias) in
    one C pass pair per channel (sums in double), None where output_mask says so."""
    if len(inputs) != 5:
        return NotImplemented
    grad, x, weight, mean, rstd = inputs
    if not _norm_input(x) or not _cpu_float(grad) or grad._shape != x._shape:
        return NotImplemented
    dtype, channels = x._storage.dtype, x._shape[1]
    if grad._storage.dtype is not dtype or \
            not all(_parameter(p, dtype, channels) for p in (weight, mean, rstd)) or \
            mean is None or rstd is None:
        return NotImplemented
    x_planes, g_planes = _norm_planes(x), _norm_planes(grad)
    if x_planes is None or g_planes is None:
        return NotImplemented
    (N, C, L), x_strides = x_planes
    if N * L == 0:
        return NotImplemented
    mask = params["output_mask"]
    grad_input = Tensor._empty(x._shape, dtype) if mask[0] else None
    grad_weight = Tensor._empty((C,), dtype) if mask[1] else None
    grad_bias = Tensor._empty((C,), dtype) if mask[2] else None
    _P.batch_norm_backward(grad._storage.array, grad._offset, g_planes[1], x._storage.array,
                           x._offset, (N, C, L), x_strides, *_buffer(weight),
                           mean._storage.array[mean._offset:], rstd._storage.array[rstd._offset:],
                           *(None if t is None else t._storage.array
                             for t in (grad_input, grad_weight, grad_bias)))
    return grad_input, grad_weight, grad_bias


def group_norm_kernel(out, inputs, dtypes, params):
    """native_group_norm: (output, mean (N, group), rstd (N, group))."""
    if len(inputs) != 3:
        return NotImplemented
    x, weight, bias = inputs
    N, C, HxW, group = (params.get(k) for k in ("N", "C", "HxW", "group"))
    if not _norm_input(x) or not _ints((N, C, HxW, group)) or x._shape[0] != N or \
            x._shape[1] != C or math.prod(x._shape[2:]) != HxW or group < 1 or C % group:
        return NotImplemented
    dtype = x._storage.dtype
    if not all(_parameter(p, dtype, C) for p in (weight, bias)):
        return NotImplemented
    geometry = _norm_planes(x)
    if geometry is None or C // group * HxW == 0:
        return NotImplemented
    shape, strides = geometry
    result = Tensor._empty(x._shape, dtype)          # contiguous, as the reference's
    mean, rstd = Tensor._empty((N, group), dtype), Tensor._empty((N, group), dtype)
    _P.group_norm(x._storage.array, x._offset, shape, strides, group, *_buffer(weight),
                  *_buffer(bias), float(params["eps"]), result._storage.array,
                  (C * HxW, HxW), mean._storage.array, rstd._storage.array)
    return result, mean, rstd


# --- checks and geometry ---------------------------------------------------------------------

def _single(inputs):
    return inputs[0] if len(inputs) == 1 else None


def _cpu_float(t):
    return isinstance(t, Tensor) and type(t._storage) is CPUStorage and \
        t._storage.dtype in DTYPES


def _pool_input(x, min_numel=None):
    """A cpu float32/float64 (C, H, W) or (N, C, H, W) tensor worth a C call."""
    return _cpu_float(x) and len(x._shape) in (3, 4) and \
        math.prod(x._shape) >= (MIN_NUMEL["pool"] if min_numel is None else min_numel)


def _max_pool_window(params, ndim):
    """(kernel, stride, padding, dilation) of a max pool over `ndim` dims, each `ndim` Python
    ints; else None."""
    window = tuple(params[k] for k in ("kernel_size", "stride", "padding", "dilation"))
    if not _ints(*window) or any(len(w) != ndim for w in window):
        return None
    return window


def _ints(*groups):
    """Every group is a sequence of Python ints."""
    for group in groups:
        if not isinstance(group, (tuple, list)):
            return False
        for v in group:
            if type(v) is not int:
                return False
    return True


def _avg_window(params):
    """(kh, kw, sh, sw, ph, pw), or None for parameters the kernel does not take."""
    kernel, stride, padding = (params.get(k) for k in ("kernel_size", "stride", "padding"))
    if not _ints(kernel, stride, padding) or not len(kernel) == len(stride) == len(padding) == 2:
        return None
    override = params.get("divisor_override")
    if override is not None and (type(override) is not int or override == 0 or
                                 not -2**62 < override < 2**62):
        return None
    return tuple(kernel) + tuple(stride) + tuple(padding)


def _planes(x):
    """(A, B, H, W) and strides: an unbatched (C, H, W) input is one batch (A = 1)."""
    if len(x._shape) == 3:
        return (1,) + tuple(x._shape), (0,) + tuple(x._strides)
    return tuple(x._shape), tuple(x._strides)


def _norm_input(x):
    return _cpu_float(x) and len(x._shape) >= 2 and math.prod(x._shape) >= MIN_NUMEL["norm"]


def _parameter(p, dtype, channels):
    """None, or a cpu tensor of `dtype` holding `channels` contiguous elements."""
    if p is None:
        return True
    return isinstance(p, Tensor) and type(p._storage) is CPUStorage and \
        p._storage.dtype is dtype and math.prod(p._shape) == channels and \
        _dense_run(p._shape, p._strides)


def _dense_run(shape, strides):
    """The elements form one unit-stride run (size-1 dims ignored)."""
    merged, (st,) = coalesce(list(shape), [list(strides)])
    return len(merged) == 1 and (merged[0] <= 1 or st[0] == 1)


def _norm_planes(x):
    """((N, C, L), (sN, sC)) when x's spatial dims form one unit-stride run of L; else None."""
    N, C = x._shape[0], x._shape[1]
    if not _dense_run(x._shape[2:], x._strides[2:]):
        return None
    L = math.prod(x._shape[2:])
    return (N, C, L), (x._strides[0], x._strides[1])


def _batch_norm_output(x, shape, strides):
    """The output tensor, in x's order of N and C (as the reference's NumPy arithmetic
    keeps it), and its (N, C) plane strides."""
    N, C, L = shape
    if N > 1 and C > 1 and strides[0] < strides[1]:      # C outer in memory
        storage = Tensor._empty(x._shape, x._storage.dtype)._storage
        out_strides = (L, N * L)
        spatial = contiguous_strides(tuple(x._shape[2:]))
        return Tensor._make(storage, 0, tuple(x._shape), out_strides + tuple(spatial)), \
            out_strides
    return Tensor._empty(x._shape, x._storage.dtype), (C * L, L)


def _updatable(running_mean, running_var, *others):
    """The running statistics can be written in place: writable, sharing memory with no
    other operand of the call."""
    arrays = [running_mean._storage.array, running_var._storage.array]
    if not all(a.flags.writeable for a in arrays):
        return False
    if np.may_share_memory(arrays[0], arrays[1]):
        return False
    for t in others:
        if t is not None and any(np.may_share_memory(a, t._storage.array) for a in arrays):
            return False
    return True


def _buffer(t):
    """(array, element offset) of an optional parameter."""
    return (None, 0) if t is None else (t._storage.array, t._offset)
