"""NumPy emulations of reftorch-cuda's neural-network kernels (kernels/loss.cu), in each
kernel's exact order, registered with cuda_kernel_emulation's `emulates` (which imports this
module). Parameters are decoded from the raw bytes with the kernels' C layouts, as there.
"""
from __future__ import annotations

import ctypes

import numpy as np

from spec_tests import cuda_kernel_emulation as E

NONE, MEAN, SUM = 0, 1, 2


def _int64(address):
    return ctypes.c_int64.from_address(address).value


def _int32(address):
    return ctypes.c_int32.from_address(address).value


def _one_block(grid, block, shared):
    assert grid == (1, 1, 1) and block == (E.REDUCE_THREADS, 1, 1) and shared == 0


def _targets(driver, address, n, stride):
    return driver.view(address, np.int64, (n,), (stride,)) if n else np.zeros(0, np.int64)


def _valid(targets, classes, ignore_index):
    return (targets != ignore_index) & (targets >= 0) & (targets < classes)


def _gather(driver, address, storage, n, classes, strides, rows, columns):
    """x[rows, columns] of an (n, classes) operand (only where the kernel reads)."""
    if not rows.size:
        return np.zeros(0, storage)
    view = driver.view(address, storage, (n, classes), strides)
    return view[rows, columns]


@E.emulates(r"nll_check_targets_kernel<long long>")
def nll_check_targets(driver, match, grid, block, shared, params):
    _one_block(grid, block, shared)
    p = E.slots(params, 6)   # (n, classes, target_stride, ignore_index, status, target)
    n, classes, stride, ignore_index = (_int64(p[k]) for k in range(4))
    targets = _targets(driver, E.pointer(p[5]), n, stride)
    bad = ~_valid(targets, classes, ignore_index) & (targets != ignore_index)
    first = int(np.argmax(bad)) if bad.any() else n
    status = driver.view(E.pointer(p[4]), np.int64, (2,), (1,))
    status[...] = (first, targets[first] if first < n else 0)


@E.emulates(r"nll_loss_kernel<(.+)>")
def nll_loss(driver, match, grid, block, shared, params):
    """Per-row losses and weights (0 for ignored and bad rows), each summed in block_reduce's
    order (thread t: rows t, t + 256, ... in turn, then the tree)."""
    _one_block(grid, block, shared)
    # (n, classes, x_row_stride, x_class_stride, target_stride, weight_stride, ignore_index,
    #  int reduction, out, total_weight, x, target, weight)
    p = E.slots(params, 13)
    n, classes, row_stride, class_stride, target_stride, weight_stride, ignore_index = (
        _int64(p[k]) for k in range(7))
    reduction = _int32(p[7])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    targets = _targets(driver, E.pointer(p[11]), n, target_stride)
    valid = _valid(targets, classes, ignore_index)
    rows = np.nonzero(valid)[0]
    w = np.zeros(n, c)
    if E.pointer(p[12]):
        weight = driver.view(E.pointer(p[12]), storage, (classes,), (weight_stride,))
        w[rows] = weight[targets[rows]].astype(c)
    else:
        w[rows] = c(1)
    loss = np.zeros(n, c)
    with np.errstate(all="ignore"):
        picked = _gather(driver, E.pointer(p[10]), storage, n, classes,
                         (row_stride, class_stride), rows, targets[rows]).astype(c)
        loss[rows] = -(picked * w[rows])
        loss_sum = E._block_reduce(loss, c(0), np.add)
        weight_sum = E._block_reduce(w, c(0), np.add)
        driver.view(E.pointer(p[9]), storage, (), ())[...] = weight_sum.astype(storage)
        if reduction == NONE:
            if n:
                driver.view(E.pointer(p[8]), storage, (n,), (1,))[...] = loss.astype(storage)
        else:
            value = loss_sum / weight_sum if reduction == MEAN else loss_sum
            driver.view(E.pointer(p[8]), storage, (), ())[...] = value.astype(storage)


@E.emulates(r"nll_loss_backward_kernel<(.+)>")
def nll_loss_backward(driver, match, grid, block, shared, params):
    E.grid_stride(grid, block)
    assert shared == 0
    # (n, classes, grad_stride, target_stride, weight_stride, ignore_index, int mean, out,
    #  grad, target, weight, total_weight)
    p = E.slots(params, 12)
    n, classes, grad_stride, target_stride, weight_stride, ignore_index = (
        _int64(p[k]) for k in range(6))
    mean = _int32(p[6])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    targets = _targets(driver, E.pointer(p[9]), n, target_stride)
    rows = np.nonzero(_valid(targets, classes, ignore_index))[0]
    out = driver.view(E.pointer(p[7]), storage, (n, classes), (classes, 1))
    out[...] = storage(0)
    g = driver.view(E.pointer(p[8]), storage, (n,), (grad_stride,))[rows].astype(c)
    with np.errstate(all="ignore"):
        if mean:
            g = g / driver.view(E.pointer(p[11]), storage, (), ()).astype(c)
        w = np.ones(rows.size, c)
        if E.pointer(p[10]):
            weight = driver.view(E.pointer(p[10]), storage, (classes,), (weight_stride,))
            w = weight[targets[rows]].astype(c)
        out[rows, targets[rows]] = (-w * g).astype(storage)
