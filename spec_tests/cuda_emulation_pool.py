"""NumPy emulations of reftorch-cuda's pooling kernels (kernels/pool.cu), each in its kernel's
order, registered with cuda_kernel_emulation's `emulates` (which imports this module).
Parameters are decoded from the raw bytes with the kernels' C layouts (struct Pool2d: 18
int64; struct PlaneStrides: 4 int64), written out here independently of the plugin's ctypes
structs.

Each emulation vectorizes over what the kernel's threads do in parallel (planes, outputs or
input elements) and loops, in the kernel's order, over what one thread does in sequence.
"""
from __future__ import annotations

import ctypes
import struct

import ml_dtypes
import numpy as np

from spec_tests import cuda_kernel_emulation as E

POOL2D = struct.Struct("<18q")
STRIDES = struct.Struct("<4q")
POOL_TYPES = r"(float|double|rt_float16|rt_bfloat16)"


def _pool2d(address):
    """struct Pool2d as a dict."""
    values = POOL2D.unpack(ctypes.string_at(address, POOL2D.size))
    names = ("batch", "channels", "in_h", "in_w", "out_h", "out_w", "sn", "sc", "sh", "sw",
             "kernel_h", "kernel_w", "step_h", "step_w", "pad_h", "pad_w", "dil_h", "dil_w")
    p = dict(zip(names, values))
    assert p["batch"] >= 0 and p["channels"] > 0 and min(p["in_h"], p["in_w"]) > 0
    return p


def _strides(address):
    return STRIDES.unpack(ctypes.string_at(address, STRIDES.size))


def _int64(address):
    return ctypes.c_int64.from_address(address).value


def _int32(address):
    return ctypes.c_int32.from_address(address).value


def _read(driver, address, storage, p, rows, cols, strides=None):
    """The operand a kernel reads, (N, C, rows, cols) at p's source strides (or `strides`)."""
    strides = (p["sn"], p["sc"], p["sh"], p["sw"]) if strides is None else strides
    return driver.view(address, storage, (p["batch"], p["channels"], rows, cols), strides)


def _result(driver, address, storage, p, rows, cols):
    """A kernel's contiguous (N, C, rows, cols) result."""
    shape = (p["batch"], p["channels"], rows, cols)
    strides = (p["channels"] * rows * cols, rows * cols, cols, 1)
    return driver.view(address, storage, shape, strides)


def from_double(values, storage):
    """pool.cu's from_double: one rounding, except bfloat16 through float (ml_dtypes')."""
    if storage is ml_dtypes.bfloat16:
        return values.astype(np.float32).astype(storage)
    return values.astype(storage)


def _grid_stride(grid, block, shared):
    E.grid_stride(grid, block)
    assert shared == 0


def _taps(start, kernel, dilation, size):
    """Tap k of each window: positions (out, kernel) and whether they are inside [0, size)."""
    pos = start[:, None] + np.arange(kernel)[None, :] * dilation
    return pos, (pos >= 0) & (pos < size)


# --- max pooling ------------------------------------------------------------------------------

@E.emulates(rf"max_pool2d_kernel<{POOL_TYPES}>")
def max_pool2d(driver, match, grid, block, shared, params):
    _grid_stride(grid, block, shared)
    s = E.slots(params, 4)                    # (Pool2d, out, indices, in)
    p = _pool2d(s[0])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    x = _read(driver, E.pointer(s[3]), storage, p, p["in_h"], p["in_w"])
    values = _result(driver, E.pointer(s[1]), storage, p, p["out_h"], p["out_w"])
    indices = _result(driver, E.pointer(s[2]), np.int64, p, p["out_h"], p["out_w"])
    h0 = np.arange(p["out_h"]) * p["step_h"] - p["pad_h"]
    w0 = np.arange(p["out_w"]) * p["step_w"] - p["pad_w"]
    first = [np.where(st >= 0, st, st + (-st + d - 1) // d * d)
             for st, d in ((h0, p["dil_h"]), (w0, p["dil_w"]))]
    rows, rows_in = _taps(h0, p["kernel_h"], p["dil_h"], p["in_h"])
    cols, cols_in = _taps(w0, p["kernel_w"], p["dil_w"], p["in_w"])
    shape = values.shape
    best = np.full(shape, -np.inf, dtype=storage)
    best_value = best.astype(c)
    index = np.broadcast_to(first[0][:, None] * p["in_w"] + first[1][None, :], shape).copy()
    for i in range(p["kernel_h"]):             # the kernel's loops: rows, then columns
        for j in range(p["kernel_w"]):
            inside = rows_in[:, i][:, None] & cols_in[:, j][None, :]
            h = np.clip(rows[:, i], 0, p["in_h"] - 1)
            w = np.clip(cols[:, j], 0, p["in_w"] - 1)
            raw = x[:, :, h[:, None], w[None, :]]
            value = raw.astype(c)
            with np.errstate(invalid="ignore"):
                wins = inside & ((value > best_value) | np.isnan(value))
            best = np.where(wins, raw, best)
            best_value = np.where(wins, value, best_value)
            index = np.where(wins, h[:, None] * p["in_w"] + w[None, :], index)
    values[...] = best
    indices[...] = index


@E.emulates(rf"max_pool2d_backward_kernel<{POOL_TYPES}>")
def max_pool2d_backward(driver, match, grid, block, shared, params):
    """One warp per plane adds the outputs' gradients in output order, rounding to the
    storage type at each addition; indices outside the plane are skipped."""
    s = E.slots(params, 5)                    # (Pool2d, index strides, out, grad, indices)
    p = _pool2d(s[0])
    planes = p["batch"] * p["channels"]
    assert block == (256, 1, 1) and shared == 0
    assert grid == (min(-(-planes // 8), 65535), 1, 1)
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    grad = _read(driver, E.pointer(s[3]), storage, p, p["out_h"], p["out_w"])
    index = _read(driver, E.pointer(s[4]), np.int64, p, p["out_h"], p["out_w"],
                  _strides(s[1]))
    out = _result(driver, E.pointer(s[2]), storage, p, p["in_h"], p["in_w"])
    size = p["in_h"] * p["in_w"]
    g = grad.reshape(planes, -1).astype(c)
    k = index.reshape(planes, -1)
    result = np.zeros((planes, size), dtype=storage)
    for o in range(k.shape[1]):
        target = k[:, o]
        rows = np.nonzero((target >= 0) & (target < size))[0]
        where = (rows, target[rows])
        with np.errstate(all="ignore"):
            result[where] = (result[where].astype(c) + g[rows, o]).astype(storage)
    out[...] = result.reshape(out.shape)


# --- average pooling --------------------------------------------------------------------------

def _avg_divisors(p, override, include_pad):
    """pool.cu's avg_divisor for every output: (divisor, nonempty), each (out_h, out_w)."""
    def per_dim(out, step, pad, kernel, size):
        start = np.arange(out) * step - pad
        end = np.minimum(start + kernel, size + pad)
        inside = np.maximum(np.minimum(end, size) - np.maximum(start, 0), 0)
        return end - start, inside
    pool_h, in_h = per_dim(p["out_h"], p["step_h"], p["pad_h"], p["kernel_h"], p["in_h"])
    pool_w, in_w = per_dim(p["out_w"], p["step_w"], p["pad_w"], p["kernel_w"], p["in_w"])
    inside = np.multiply.outer(in_h, in_w)
    if override:
        divisor = np.full(inside.shape, override, dtype=np.int64)
    else:
        divisor = np.multiply.outer(pool_h, pool_w) if include_pad else inside
    return divisor, inside > 0


@E.emulates(rf"avg_pool2d_kernel<{POOL_TYPES}>")
def avg_pool2d(driver, match, grid, block, shared, params):
    _grid_stride(grid, block, shared)
    s = E.slots(params, 5)            # (Pool2d, divisor_override, count_include_pad, out, in)
    p = _pool2d(s[0])
    override, include_pad = _int64(s[1]), _int32(s[2])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    x = _read(driver, E.pointer(s[4]), storage, p, p["in_h"], p["in_w"]).astype(c)
    out = _result(driver, E.pointer(s[3]), storage, p, p["out_h"], p["out_w"])
    h0 = np.arange(p["out_h"]) * p["step_h"] - p["pad_h"]
    w0 = np.arange(p["out_w"]) * p["step_w"] - p["pad_w"]
    rows, rows_in = _taps(h0, p["kernel_h"], 1, p["in_h"])
    cols, cols_in = _taps(w0, p["kernel_w"], 1, p["in_w"])
    total = np.zeros(out.shape, dtype=c)
    for i in range(p["kernel_h"]):
        for j in range(p["kernel_w"]):
            inside = rows_in[:, i][:, None] & cols_in[:, j][None, :]
            h = np.clip(rows[:, i], 0, p["in_h"] - 1)
            w = np.clip(cols[:, j], 0, p["in_w"] - 1)
            with np.errstate(all="ignore"):
                total = np.where(inside, total + x[:, :, h[:, None], w[None, :]], total)
    divisor, nonempty = _avg_divisors(p, override, include_pad)
    with np.errstate(all="ignore"):
        quotient = np.where(nonempty, total.astype(np.float64) / divisor, 0.0)
        out[...] = from_double(quotient, storage)


@E.emulates(rf"avg_pool2d_backward_kernel<{POOL_TYPES}>")
def avg_pool2d_backward(driver, match, grid, block, shared, params):
    """Per input element, in double: kernel offsets kh then kw, each the share of the one
    output that reads the element there."""
    _grid_stride(grid, block, shared)
    s = E.slots(params, 5)            # (Pool2d, divisor_override, count_include_pad, out, grad)
    p = _pool2d(s[0])
    override, include_pad = _int64(s[1]), _int32(s[2])
    storage = E.STORAGE[match.group(1)]
    grad = _read(driver, E.pointer(s[4]), storage, p, p["out_h"], p["out_w"])
    out = _result(driver, E.pointer(s[3]), storage, p, p["in_h"], p["in_w"])
    divisor, nonempty = _avg_divisors(p, override, include_pad)
    with np.errstate(all="ignore"):
        share = np.where(nonempty, grad.astype(np.float64) / divisor, 0.0)
    total = np.zeros(out.shape, dtype=np.float64)

    def reader(size, pad, k, step, out_size):
        """The output that reads each position at offset k, and whether there is one."""
        t = np.arange(size) + pad - k
        r = np.where(t >= 0, t, 0) // step
        return np.minimum(r, out_size - 1), (t >= 0) & (r * step == t) & (r < out_size)
    for kh in range(p["kernel_h"]):
        r, r_ok = reader(p["in_h"], p["pad_h"], kh, p["step_h"], p["out_h"])
        for kw in range(p["kernel_w"]):
            col, c_ok = reader(p["in_w"], p["pad_w"], kw, p["step_w"], p["out_w"])
            ok = r_ok[:, None] & c_ok[None, :]
            with np.errstate(all="ignore"):
                total = np.where(ok, total + share[:, :, r[:, None], col[None, :]], total)
    out[...] = from_double(total, storage)


# --- adaptive average pooling -----------------------------------------------------------------

def _bins(size, out):
    o = np.arange(out)
    return o * size // out, ((o + 1) * size + out - 1) // out


@E.emulates(rf"adaptive_avg_pool2d_kernel<{POOL_TYPES}>")
def adaptive_avg_pool2d(driver, match, grid, block, shared, params):
    _grid_stride(grid, block, shared)
    s = E.slots(params, 3)                    # (Pool2d, out, in)
    p = _pool2d(s[0])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    x = _read(driver, E.pointer(s[2]), storage, p, p["in_h"], p["in_w"]).astype(c)
    out = _result(driver, E.pointer(s[1]), storage, p, p["out_h"], p["out_w"])
    (h_begin, h_end), (w_begin, w_end) = _bins(p["in_h"], p["out_h"]), _bins(p["in_w"],
                                                                            p["out_w"])
    total = np.zeros(out.shape, dtype=c)
    for i in range(int((h_end - h_begin).max())):
        for j in range(int((w_end - w_begin).max())):
            inside = ((h_begin + i) < h_end)[:, None] & ((w_begin + j) < w_end)[None, :]
            h = np.minimum(h_begin + i, p["in_h"] - 1)
            w = np.minimum(w_begin + j, p["in_w"] - 1)
            with np.errstate(all="ignore"):
                total = np.where(inside, total + x[:, :, h[:, None], w[None, :]], total)
    count = np.multiply.outer(h_end - h_begin, w_end - w_begin)
    with np.errstate(all="ignore"):
        out[...] = from_double(total.astype(np.float64) / count, storage)


def _bin_runs(x, size, out):
    """pool.cu's walk over the bins holding position x: runs of bins with one start, the
    latest start first, each run's bins ascending."""
    lowest, highest = x * out // size, ((x + 1) * out - 1) // size
    end, runs = highest + 1, []
    while end > lowest:
        start = (end - 1) * size // out
        begin = max(lowest, (start * out + size - 1) // size)
        runs.append(range(begin, end))
        end = begin
    return runs


@E.emulates(rf"adaptive_avg_pool2d_backward_kernel<{POOL_TYPES}>")
def adaptive_avg_pool2d_backward(driver, match, grid, block, shared, params):
    _grid_stride(grid, block, shared)
    s = E.slots(params, 3)                    # (Pool2d, out, grad)
    p = _pool2d(s[0])
    storage = E.STORAGE[match.group(1)]
    grad = _read(driver, E.pointer(s[2]), storage, p, p["out_h"], p["out_w"])
    out = _result(driver, E.pointer(s[1]), storage, p, p["in_h"], p["in_w"])
    (h_begin, h_end), (w_begin, w_end) = _bins(p["in_h"], p["out_h"]), _bins(p["in_w"],
                                                                            p["out_w"])
    count = np.multiply.outer(h_end - h_begin, w_end - w_begin)
    with np.errstate(all="ignore"):
        share = grad.astype(np.float64) / count
    total = np.zeros(out.shape, dtype=np.float64)
    row_runs = [_bin_runs(h, p["in_h"], p["out_h"]) for h in range(p["in_h"])]
    col_runs = [_bin_runs(w, p["in_w"], p["out_w"]) for w in range(p["in_w"])]
    for h in range(p["in_h"]):
        for w in range(p["in_w"]):
            acc = np.zeros(out.shape[:2], dtype=np.float64)
            for rows in row_runs[h]:
                for cols in col_runs[w]:
                    for r in rows:
                        for col in cols:
                            with np.errstate(all="ignore"):
                                acc = acc + share[:, :, r, col]
            total[:, :, h, w] = acc
    out[...] = from_double(total, storage)
