"""NumPy emulations of reftorch-cuda's pooling kernels (kernels/pool.cu), each in its kernel's
order, registered with cuda_kernel_emulation's `emulates` (which imports this module).
Parameters are decoded from the raw bytes with the kernels' C layouts (struct Pool3d: 25
int64 = batch, channels, then per dim (depth, height, width) in, out, kernel, step, pad,
dil, then the source's (n, c, d, h, w) strides; struct VolumeStrides: 5 int64), written out
here independently of the plugin's ctypes structs. A 2-d call is a 3-d one of unit depth.

Each emulation vectorizes over what the kernel's threads do in parallel (volumes, outputs or
input elements) and loops, in the kernel's order, over what one thread does in sequence.
"""
from __future__ import annotations

import ctypes
import itertools
import struct

import ml_dtypes
import numpy as np

from spec_tests import cuda_kernel_emulation as E

POOL3D = struct.Struct("<25q")
STRIDES = struct.Struct("<5q")
POOL_TYPES = r"(float|double|rt_float16|rt_bfloat16)"
AXIS_FIELDS = ("in", "out", "kernel", "step", "pad", "dil")


def _pool3d(address):
    """struct Pool3d as a dict: batch, channels, axes (three dicts), src (five strides)."""
    values = POOL3D.unpack(ctypes.string_at(address, POOL3D.size))
    axes = [dict(zip(AXIS_FIELDS, values[2 + 6 * d:8 + 6 * d])) for d in range(3)]
    p = {"batch": values[0], "channels": values[1], "axes": axes, "src": values[20:25]}
    assert p["batch"] >= 0 and p["channels"] > 0 and min(a["in"] for a in axes) > 0
    return p


def _sizes(p, which):
    return tuple(a[which] for a in p["axes"])


def _strides(address):
    return STRIDES.unpack(ctypes.string_at(address, STRIDES.size))


def _read(driver, address, storage, p, which, strides=None):
    """The operand a kernel reads, (N, C, D, H, W) of the `which` ("in"/"out") sizes at p's
    source strides (or `strides`)."""
    strides = p["src"] if strides is None else strides
    return driver.view(address, storage, (p["batch"], p["channels"]) + _sizes(p, which),
                       strides)


def _result(driver, address, storage, p, which):
    """A kernel's contiguous (N, C, D, H, W) result."""
    shape = (p["batch"], p["channels"]) + _sizes(p, which)
    strides = tuple(int(np.prod(shape[i + 1:])) for i in range(5))
    return driver.view(address, storage, shape, strides)


def from_double(values, storage):
    """pool.cu's from_double: one rounding, except bfloat16 through float (ml_dtypes')."""
    if storage is ml_dtypes.bfloat16:
        return values.astype(np.float32).astype(storage)
    return values.astype(storage)


def _grid_stride(grid, block, shared):
    E.grid_stride(grid, block)
    assert shared == 0


def _outer(*per_dim):
    """The (D, H, W)-shaped outer combination (logical and) of three per-dim 1-d masks, or
    product of three per-dim 1-d integer arrays."""
    a, b, c = per_dim
    if a.dtype == bool:
        return a[:, None, None] & b[None, :, None] & c[None, None, :]
    return np.multiply.outer(np.multiply.outer(a, b), c)


def _gather(x, positions):
    """x[..., z, y, x] at per-dim clipped positions (1-d arrays), as (.., OD, OH, OW)."""
    z, y, w = positions
    return x[:, :, z[:, None, None], y[None, :, None], w[None, None, :]]


def _offsets(p, kernel_of=lambda a: a["kernel"]):
    """Every kernel offset (kd, kh, kw), in the kernels' loop order."""
    return itertools.product(*(range(kernel_of(a)) for a in p["axes"]))


# --- max pooling ------------------------------------------------------------------------------

@E.emulates(rf"max_pool_kernel<{POOL_TYPES}>")
def max_pool(driver, match, grid, block, shared, params):
    _grid_stride(grid, block, shared)
    s = E.slots(params, 4)                    # (Pool3d, out, indices, in)
    p = _pool3d(s[0])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    x = _read(driver, E.pointer(s[3]), storage, p, "in")
    values = _result(driver, E.pointer(s[1]), storage, p, "out")
    indices = _result(driver, E.pointer(s[2]), np.int64, p, "out")
    starts = [np.arange(a["out"]) * a["step"] - a["pad"] for a in p["axes"]]
    first = [np.where(st >= 0, st, st + (-st + a["dil"] - 1) // a["dil"] * a["dil"])
             for st, a in zip(starts, p["axes"])]
    (_, in_h, in_w) = _sizes(p, "in")

    def flat(z, y, w):         # (d * H + h) * W + w of every output's position
        return (z * in_h * in_w)[:, None, None] + (y * in_w)[None, :, None] + w[None, None, :]
    shape = values.shape
    best = np.full(shape, -np.inf, dtype=storage)
    best_value = best.astype(c)
    index = np.broadcast_to(flat(*first), shape).copy()
    for offset in _offsets(p):                 # the kernel's loops: depth, rows, columns
        pos = [st + k * a["dil"] for st, k, a in zip(starts, offset, p["axes"])]
        inside = _outer(*((q >= 0) & (q < a["in"]) for q, a in zip(pos, p["axes"])))
        clipped = [np.clip(q, 0, a["in"] - 1) for q, a in zip(pos, p["axes"])]
        raw = _gather(x, clipped)
        value = raw.astype(c)
        with np.errstate(invalid="ignore"):
            wins = inside & ((value > best_value) | np.isnan(value))
        best = np.where(wins, raw, best)
        best_value = np.where(wins, value, best_value)
        index = np.where(wins, flat(*clipped), index)
    values[...] = best
    indices[...] = index


@E.emulates(rf"max_pool_backward_kernel<{POOL_TYPES}>")
def max_pool_backward(driver, match, grid, block, shared, params):
    """One warp per volume adds the outputs' gradients in output order, rounding to the
    storage type at each addition; indices outside the volume are skipped."""
    s = E.slots(params, 5)                    # (Pool3d, index strides, out, grad, indices)
    p = _pool3d(s[0])
    volumes = p["batch"] * p["channels"]
    assert block == (256, 1, 1) and shared == 0
    assert grid == (min(-(-volumes // 8), 65535), 1, 1)
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    grad = _read(driver, E.pointer(s[3]), storage, p, "out")
    index = _read(driver, E.pointer(s[4]), np.int64, p, "out", _strides(s[1]))
    out = _result(driver, E.pointer(s[2]), storage, p, "in")
    size = int(np.prod(_sizes(p, "in")))
    g = grad.reshape(volumes, -1).astype(c)
    k = index.reshape(volumes, -1)
    result = np.zeros((volumes, size), dtype=storage)
    for o in range(k.shape[1]):
        target = k[:, o]
        rows = np.nonzero((target >= 0) & (target < size))[0]
        where = (rows, target[rows])
        with np.errstate(all="ignore"):
            result[where] = (result[where].astype(c) + g[rows, o]).astype(storage)
    out[...] = result.reshape(out.shape)


# --- average pooling --------------------------------------------------------------------------

def _avg_divisors(p, override, include_pad):
    """pool.cu's avg_divisor for every output: (divisor, nonempty), each (OD, OH, OW)."""
    padded, inside = [], []
    for a in p["axes"]:
        start = np.arange(a["out"]) * a["step"] - a["pad"]
        end = np.minimum(start + a["kernel"], a["in"] + a["pad"])
        padded.append(end - start)
        inside.append(np.maximum(np.minimum(end, a["in"]) - np.maximum(start, 0), 0))
    inside = _outer(*inside)
    if override:
        divisor = np.full(inside.shape, override, dtype=np.int64)
    else:
        divisor = _outer(*padded) if include_pad else inside
    return divisor, inside > 0


@E.emulates(rf"avg_pool_kernel<{POOL_TYPES}>")
def avg_pool(driver, match, grid, block, shared, params):
    _grid_stride(grid, block, shared)
    s = E.slots(params, 5)            # (Pool3d, divisor_override, count_include_pad, out, in)
    p = _pool3d(s[0])
    override, include_pad = E.int64(s[1]), E.int32(s[2])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    x = _read(driver, E.pointer(s[4]), storage, p, "in").astype(c)
    out = _result(driver, E.pointer(s[3]), storage, p, "out")
    starts = [np.arange(a["out"]) * a["step"] - a["pad"] for a in p["axes"]]
    total = np.zeros(out.shape, dtype=c)
    for offset in _offsets(p):
        pos = [st + k for st, k in zip(starts, offset)]
        inside = _outer(*((q >= 0) & (q < a["in"]) for q, a in zip(pos, p["axes"])))
        clipped = [np.clip(q, 0, a["in"] - 1) for q, a in zip(pos, p["axes"])]
        with np.errstate(all="ignore"):
            total = np.where(inside, total + _gather(x, clipped), total)
    divisor, nonempty = _avg_divisors(p, override, include_pad)
    with np.errstate(all="ignore"):
        quotient = np.where(nonempty, total.astype(np.float64) / divisor, 0.0)
        out[...] = from_double(quotient, storage)


@E.emulates(rf"avg_pool_backward_kernel<{POOL_TYPES}>")
def avg_pool_backward(driver, match, grid, block, shared, params):
    """Per input element, in double: kernel offsets kd, kh then kw, each the share of the one
    output that reads the element there."""
    _grid_stride(grid, block, shared)
    s = E.slots(params, 5)            # (Pool3d, divisor_override, count_include_pad, out, grad)
    p = _pool3d(s[0])
    override, include_pad = E.int64(s[1]), E.int32(s[2])
    storage = E.STORAGE[match.group(1)]
    grad = _read(driver, E.pointer(s[4]), storage, p, "out")
    out = _result(driver, E.pointer(s[3]), storage, p, "in")
    divisor, nonempty = _avg_divisors(p, override, include_pad)
    with np.errstate(all="ignore"):
        share = np.where(nonempty, grad.astype(np.float64) / divisor, 0.0)
    total = np.zeros(out.shape, dtype=np.float64)

    def reader(a, k):
        """The output that reads each position at offset k, and whether there is one."""
        t = np.arange(a["in"]) + a["pad"] - k
        r = np.where(t >= 0, t, 0) // a["step"]
        return np.minimum(r, a["out"] - 1), (t >= 0) & (r * a["step"] == t) & (r < a["out"])
    for offset in _offsets(p):
        readers = [reader(a, k) for a, k in zip(p["axes"], offset)]
        ok = _outer(*(found for _, found in readers))
        with np.errstate(all="ignore"):
            total = np.where(ok, total + _gather(share, [r for r, _ in readers]), total)
    out[...] = from_double(total, storage)


# --- adaptive average pooling -----------------------------------------------------------------

def _bins(a):
    o = np.arange(a["out"])
    return o * a["in"] // a["out"], ((o + 1) * a["in"] + a["out"] - 1) // a["out"]


@E.emulates(rf"adaptive_avg_pool_kernel<{POOL_TYPES}>")
def adaptive_avg_pool(driver, match, grid, block, shared, params):
    _grid_stride(grid, block, shared)
    s = E.slots(params, 3)                    # (Pool3d, out, in)
    p = _pool3d(s[0])
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    x = _read(driver, E.pointer(s[2]), storage, p, "in").astype(c)
    out = _result(driver, E.pointer(s[1]), storage, p, "out")
    bins = [_bins(a) for a in p["axes"]]
    longest = [int((end - begin).max()) for begin, end in bins]
    total = np.zeros(out.shape, dtype=c)
    for offset in itertools.product(*(range(n) for n in longest)):
        inside = _outer(*((begin + k) < end for (begin, end), k in zip(bins, offset)))
        clipped = [np.minimum(begin + k, a["in"] - 1)
                   for (begin, _), k, a in zip(bins, offset, p["axes"])]
        with np.errstate(all="ignore"):
            total = np.where(inside, total + _gather(x, clipped), total)
    count = _outer(*(end - begin for begin, end in bins))
    with np.errstate(all="ignore"):
        out[...] = from_double(total.astype(np.float64) / count, storage)


def _bin_runs(x, a):
    """pool.cu's walk over the bins holding position x along one dim: runs of bins with one
    start, the latest start first, each run's bins ascending."""
    size, out = a["in"], a["out"]
    lowest, highest = x * out // size, ((x + 1) * out - 1) // size
    end, runs = highest + 1, []
    while end > lowest:
        start = (end - 1) * size // out
        begin = max(lowest, (start * out + size - 1) // size)
        runs.append(range(begin, end))
        end = begin
    return runs


@E.emulates(rf"adaptive_avg_pool_backward_kernel<{POOL_TYPES}>")
def adaptive_avg_pool_backward(driver, match, grid, block, shared, params):
    _grid_stride(grid, block, shared)
    s = E.slots(params, 3)                    # (Pool3d, out, grad)
    p = _pool3d(s[0])
    storage = E.STORAGE[match.group(1)]
    grad = _read(driver, E.pointer(s[2]), storage, p, "out")
    out = _result(driver, E.pointer(s[1]), storage, p, "in")
    bins = [_bins(a) for a in p["axes"]]
    count = _outer(*(end - begin for begin, end in bins))
    with np.errstate(all="ignore"):
        share = grad.astype(np.float64) / count
    total = np.zeros(out.shape, dtype=np.float64)
    runs = [[_bin_runs(x, a) for x in range(a["in"])] for a in p["axes"]]
    for z, y, x in itertools.product(*(range(a["in"]) for a in p["axes"])):
        acc = np.zeros(out.shape[:2], dtype=np.float64)
        for run_z, run_y, run_x in itertools.product(runs[0][z], runs[1][y], runs[2][x]):
            for bz, by, bx in itertools.product(run_z, run_y, run_x):
                with np.errstate(all="ignore"):
                    acc = acc + share[:, :, bz, by, bx]
        total[:, :, z, y, x] = acc
    out[...] = from_double(total, storage)
