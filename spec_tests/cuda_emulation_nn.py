"""NumPy emulations of reftorch-cuda's neural-network kernels (kernels/loss.cu,
kernels/batchnorm.cu and kernels/group_norm.cu), in each kernel's exact order, registered with cuda_kernel_emulation's
`emulates` (which imports this module). Parameters are decoded from the raw bytes with the
kernels' C layouts, as there.
"""
from __future__ import annotations

import numpy as np

from spec_tests import cuda_kernel_emulation as E

NONE, MEAN, SUM = 0, 1, 2


def _one_block(grid, block, shared):
    assert grid == (1, 1, 1) and block == (E.REDUCE_THREADS, 1, 1) and shared == 0


def _per_row(driver, address, dtype, n, spatial, strides):
    """A per-row operand (target, gradient) as (n,) in row order: row i is (i // spatial,
    i % spatial) at the operand's (batch, spatial) strides."""
    if not n:
        return np.zeros(0, dtype)
    view = driver.view(address, dtype, (n // spatial, spatial), strides)
    return view.reshape(n)


def _valid(targets, classes, ignore_index):
    return (targets != ignore_index) & (targets >= 0) & (targets < classes)


def _picked(driver, address, storage, n, classes, spatial, x_strides, rows, targets):
    """x[row, target] for the given rows of a (batch, classes, spatial) input."""
    if not rows.size:
        return np.zeros(0, storage)
    batch_stride, class_stride, spatial_stride = x_strides
    view = driver.view(address, storage, (n // spatial, classes, spatial),
                       (batch_stride, class_stride, spatial_stride))
    return view[rows // spatial, targets, rows % spatial]


@E.emulates(r"nll_check_targets_kernel<long long>")
def nll_check_targets(driver, match, grid, block, shared, params):
    _one_block(grid, block, shared)
    # (n, classes, spatial, target batch/spatial strides, ignore_index, status, target)
    p = E.slots(params, 8)
    n, classes, spatial, batch_stride, spatial_stride, ignore_index = (
        E.int64(p[k]) for k in range(6))
    targets = _per_row(driver, E.pointer(p[7]), np.int64, n, spatial,
                       (batch_stride, spatial_stride))
    bad = ~_valid(targets, classes, ignore_index) & (targets != ignore_index)
    first = int(np.argmax(bad)) if bad.any() else n
    status = driver.view(E.pointer(p[6]), np.int64, (2,), (1,))
    status[...] = (first, targets[first] if first < n else 0)


@E.emulates(r"nll_loss_kernel<(.+)>")
def nll_loss(driver, match, grid, block, shared, params):
    """Per-row losses and weights (0 for ignored and bad rows), each summed in block_reduce's
    order (thread t: rows t, t + 256, ... in turn, then the tree)."""
    _one_block(grid, block, shared)
    # (n, classes, spatial, x batch/class/spatial strides, target batch/spatial strides,
    #  weight_stride, ignore_index, int reduction, out, total_weight, x, target, weight)
    p = E.slots(params, 16)
    n, classes, spatial = (E.int64(p[k]) for k in range(3))
    x_strides = tuple(E.int64(p[k]) for k in range(3, 6))
    target_strides = (E.int64(p[6]), E.int64(p[7]))
    weight_stride, ignore_index = E.int64(p[8]), E.int64(p[9])
    reduction = E.int32(p[10])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    targets = _per_row(driver, E.pointer(p[14]), np.int64, n, spatial, target_strides)
    rows = np.nonzero(_valid(targets, classes, ignore_index))[0]
    w = np.zeros(n, c)
    if E.pointer(p[15]):
        weight = driver.view(E.pointer(p[15]), storage, (classes,), (weight_stride,))
        w[rows] = weight[targets[rows]].astype(c)
    else:
        w[rows] = c(1)
    loss = np.zeros(n, c)
    with np.errstate(all="ignore"):
        picked = _picked(driver, E.pointer(p[13]), storage, n, classes, spatial, x_strides,
                         rows, targets[rows]).astype(c)
        loss[rows] = -(picked * w[rows])
        loss_sum = E._block_reduce(loss, c(0), np.add)
        weight_sum = E._block_reduce(w, c(0), np.add)
        driver.view(E.pointer(p[12]), storage, (), ())[...] = weight_sum.astype(storage)
        if reduction == NONE:
            if n:
                driver.view(E.pointer(p[11]), storage, (n,), (1,))[...] = loss.astype(storage)
        else:
            value = loss_sum / weight_sum if reduction == MEAN else loss_sum
            driver.view(E.pointer(p[11]), storage, (), ())[...] = value.astype(storage)


@E.emulates(r"nll_loss_backward_kernel<(.+)>")
def nll_loss_backward(driver, match, grid, block, shared, params):
    E.grid_stride(grid, block)
    assert shared == 0
    # (n, classes, spatial, grad batch/spatial strides, target batch/spatial strides,
    #  weight_stride, ignore_index, int mean, out, grad, target, weight, total_weight)
    p = E.slots(params, 15)
    n, classes, spatial = (E.int64(p[k]) for k in range(3))
    grad_strides, target_strides = (E.int64(p[3]), E.int64(p[4])), (E.int64(p[5]), E.int64(p[6]))
    weight_stride, ignore_index = E.int64(p[7]), E.int64(p[8])
    mean = E.int32(p[9])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    targets = _per_row(driver, E.pointer(p[12]), np.int64, n, spatial, target_strides)
    rows = np.nonzero(_valid(targets, classes, ignore_index))[0]
    batch = n // spatial
    out = driver.view(E.pointer(p[10]), storage, (batch, classes, spatial),
                      (classes * spatial, spatial, 1))
    out[...] = storage(0)
    g = _per_row(driver, E.pointer(p[11]), storage, n, spatial, grad_strides)[rows].astype(c)
    with np.errstate(all="ignore"):
        if mean:
            g = g / driver.view(E.pointer(p[14]), storage, (), ()).astype(c)
        w = np.ones(rows.size, c)
        if E.pointer(p[13]):
            weight = driver.view(E.pointer(p[13]), storage, (classes,), (weight_stride,))
            w = weight[targets[rows]].astype(c)
        out[rows // spatial, targets[rows], rows % spatial] = (-w * g).astype(storage)


# --- batchnorm.cu -----------------------------------------------------------------------------

def _channel_values(driver, address, storage, planes, strides):
    """An operand as (channels, batch * inner) in the kernels' element order m = b * inner + l
    (strides: its (batch, channel, inner) strides)."""
    batch, channels, inner = planes
    view = driver.view(address, storage, (channels, batch, inner),
                       (strides[1], strides[0], strides[2]))
    return view.reshape(channels, batch * inner)


def _write_channels(driver, address, storage, planes, strides, values):
    batch, channels, inner = planes
    view = driver.view(address, storage, (channels, batch, inner),
                       (strides[1], strides[0], strides[2]))
    view[...] = values.reshape(channels, batch, inner).astype(storage)


def _channel_parameter(driver, address, storage, channels, stride):
    """A per-channel operand (None for a null pointer)."""
    return driver.view(address, storage, (channels,), (stride,)) if address else None


def _one_block_per_channel(grid, block, shared, channels):
    assert grid[1:] == (1, 1) and grid[0] == min(channels, 1 << 20)
    assert block == (E.REDUCE_THREADS, 1, 1) and shared == 0


@E.emulates(r"batch_norm_kernel<(.+)>")
def batch_norm(driver, match, grid, block, shared, params):
    # (batch, channels, inner, x strides[3], out strides[3], weight/bias/running_mean/
    #  running_var strides, int training, double momentum, double eps, out, save_mean,
    #  save_rstd, x, weight, bias, running_mean, running_var)
    p = E.slots(params, 24)
    planes = tuple(E.int64(p[k]) for k in range(3))
    x_strides, out_strides = (tuple(E.int64(p[k]) for k in range(s, s + 3)) for s in (3, 6))
    parameter_strides = [E.int64(p[k]) for k in range(9, 13)]
    training = E.int32(p[13])
    momentum, eps = (E.double(p[k]) for k in (14, 15))
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    channels, count = planes[1], planes[0] * planes[2]
    _one_block_per_channel(grid, block, shared, channels)
    weight, bias, running_mean, running_var = (
        _channel_parameter(driver, E.pointer(p[20 + k]), storage, channels,
                           parameter_strides[k]) for k in range(4))
    x = _channel_values(driver, E.pointer(p[19]), storage, planes, x_strides).astype(c)
    with np.errstate(all="ignore"):
        if training:
            mean = E._block_reduce(x, c(0), np.add) / c(count)
            centered = x - mean[:, None]
            var = E._block_reduce(centered * centered, c(0), np.add) / c(count)
            rstd = c(1) / np.sqrt(var + c(eps))
            for k, value in ((17, mean), (18, rstd)):
                driver.view(E.pointer(p[k]), storage, (channels,), (1,))[...] = \
                    value.astype(storage)
            if running_mean is not None:
                keep, take = c(1.0 - momentum), c(momentum)
                factor = c(count / (count - 1)) if count > 1 else c(np.inf)
                running_mean[...] = (keep * running_mean.astype(c) + take * mean).astype(
                    storage)
                running_var[...] = (keep * running_var.astype(c) + take * (var * factor)
                                    ).astype(storage)
        else:
            mean = running_mean.astype(c)
            rstd = c(1) / np.sqrt(running_var.astype(c) + c(eps))
        value = (x - mean[:, None]) * rstd[:, None]
        if weight is not None:
            value = value * weight.astype(c)[:, None]
        if bias is not None:
            value = value + bias.astype(c)[:, None]
        _write_channels(driver, E.pointer(p[16]), storage, planes, out_strides, value)


@E.emulates(r"batch_norm_backward_kernel<(.+)>")
def batch_norm_backward(driver, match, grid, block, shared, params):
    # (batch, channels, inner, grad strides[3], x strides[3], out strides[3], weight_stride,
    #  grad_input, grad_weight, grad_bias, grad, x, weight, saved_mean, saved_rstd)
    p = E.slots(params, 21)
    planes = tuple(E.int64(p[k]) for k in range(3))
    g_strides, x_strides, out_strides = (tuple(E.int64(p[k]) for k in range(s, s + 3))
                                         for s in (3, 6, 9))
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    channels, count = planes[1], planes[0] * planes[2]
    _one_block_per_channel(grid, block, shared, channels)
    g = _channel_values(driver, E.pointer(p[16]), storage, planes, g_strides).astype(c)
    x = _channel_values(driver, E.pointer(p[17]), storage, planes, x_strides).astype(c)
    weight = _channel_parameter(driver, E.pointer(p[18]), storage, channels, E.int64(p[12]))
    mean, rstd = (driver.view(E.pointer(p[k]), storage, (channels,), (1,)).astype(c)[:, None]
                  for k in (19, 20))
    with np.errstate(all="ignore"):
        x_hat = (x - mean) * rstd
        g_hat = g * weight.astype(c)[:, None] if weight is not None else g
        sums = [E._block_reduce(v, c(0), np.add) for v in (g, g * x_hat, g_hat, g_hat * x_hat)]
        for k, value in ((14, sums[1]), (15, sums[0])):
            if E.pointer(p[k]):
                driver.view(E.pointer(p[k]), storage, (channels,), (1,))[...] = \
                    value.astype(storage)
        if E.pointer(p[13]):
            mean_gh, mean_ghx = (s[:, None] / c(count) for s in sums[2:])
            _write_channels(driver, E.pointer(p[13]), storage, planes, out_strides,
                            rstd * ((g_hat - mean_gh) - x_hat * mean_ghx))


# --- group_norm.cu ----------------------------------------------------------------------------

@E.emulates(r"group_norm_kernel<(.+)>")
def group_norm(driver, match, grid, block, shared, params):
    """Each (n, g) row's elements in the kernel's order m = c * inner + l (channel c of the
    group, position l), reduced in the block order; the output contiguous (N, C, inner)."""
    # (batch, channels, inner, groups, x strides[3], weight_stride, bias_stride, double eps,
    #  out, mean, rstd, x, weight, bias)
    p = E.slots(params, 16)
    batch, channels, inner, groups = (E.int64(p[k]) for k in range(4))
    x_strides = tuple(E.int64(p[k]) for k in range(4, 7))
    weight_stride, bias_stride = E.int64(p[7]), E.int64(p[8])
    eps = E.double(p[9])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    rows, per_group = batch * groups, channels // groups
    assert channels % groups == 0 and per_group * inner > 0
    assert grid[1:] == (1, 1) and grid[0] == min(rows, 1 << 20)
    assert block == (E.REDUCE_THREADS, 1, 1) and shared == 0
    x = driver.view(E.pointer(p[13]), storage, (batch, groups, per_group, inner),
                    (x_strides[0], x_strides[1] * per_group, x_strides[1], x_strides[2]))
    x = x.astype(c).reshape(batch, groups, per_group * inner)
    weight, bias = (_channel_parameter(driver, E.pointer(p[k]), storage, channels, stride)
                    for k, stride in ((14, weight_stride), (15, bias_stride)))
    with np.errstate(all="ignore"):
        mean = E._block_reduce(x, c(0), np.add) / c(per_group * inner)
        centered = x - mean[..., None]
        var = E._block_reduce(centered * centered, c(0), np.add) / c(per_group * inner)
        rstd = c(1) / np.sqrt(var + c(eps))
        value = ((x - mean[..., None]) * rstd[..., None]).reshape(batch, channels, inner)
        if weight is not None:
            value = value * weight.astype(c)[:, None]
        if bias is not None:
            value = value + bias.astype(c)[:, None]
        driver.view(E.pointer(p[10]), storage, (batch, channels, inner),
                    (channels * inner, inner, 1))[...] = value.astype(storage)
        for k, stat in ((11, mean), (12, rstd)):
            driver.view(E.pointer(p[k]), storage, (batch, groups), (groups, 1))[...] = \
                stat.astype(storage)
