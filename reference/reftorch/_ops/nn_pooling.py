"""Neural-network ops (pooling) at the torch level: declarations, reference kernels, torch.X forms.

Every pooling op reads windows of the last `n` (spatial) dims of its input, independently for
each leading "plane" (batch x channel). The kernels loop over the few kernel offsets, never
over output positions; each offset yields, for every output, the value it reads there and
that value's flat index in the input plane (h * W + w):

  RegularWindows     kernel, stride, padding, dilation, ceil_mode: the planes are padded
                     once, and each offset is a strided slice of the padded array;
  GatheredWindows    adaptive bins (start = floor(i*in/out), end = ceil((i+1)*in/out)) and
                     fractional-max intervals: `positions[p, k, o]` per spatial dim is the
                     input index that offset k of output o reads in plane p (p = 0 when all
                     planes share it), -1 past the end of a short bin; offsets gather.

On top of these, max pooling keeps per output the first valid element, then each later one
that is larger or NaN (PyTorch's CPU rule: a later NaN wins, ties keep the first), with its
index; average pooling sums and divides by PyTorch's divisor; the backward kernels add each
output's gradient back to the positions it read. The 1-d torch forms run the 2-d ops on an
unsqueezed input, as PyTorch does (their autograd nodes are `SqueezeBackward1` over the 2-d
node, like PyTorch's).
"""
from __future__ import annotations

import itertools

import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from . import structured

__all__ = ["max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool3d", "avg_pool1d",
           "adaptive_avg_pool1d", "adaptive_max_pool1d"]

FLOATING = {D.float16, D.bfloat16, D.float32, D.float64}
MAX_DTYPES = FLOATING | {D.uint8, D.int8, D.int16, D.int32, D.int64}   # max pooling: no bool
AVG_DTYPES = FLOATING | {D.int64}          # PyTorch's CPU avg_pool kernels: floating and long


# --- window geometry (per spatial dim) ------------------------------------------------------

def pooling_output_size(size, kernel, stride, pad, dilation, ceil_mode):
    """PyTorch's pooled length: floor (or ceil) of the window count, except that with
    ceil_mode a last window starting beyond the input and its left padding is dropped."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _adaptive_bounds(size, out):
    """PyTorch's adaptive bins: [floor(i*size/out), ceil((i+1)*size/out))."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_positions(size, out):
    """positions (1, longest bin, out): bin i reads start[i] + k for k < its length, else -1."""
    start, end = _adaptive_bounds(size, out)
    longest = int((end - start).max()) if out else 0
    pos = start[None, :] + np.arange(longest)[:, None]
    return np.where(pos < end[None, :], pos, -1)[None]


def _fractional_starts(samples, size, out, kernel, dtype):
    """PyTorch's pseudo-random interval starts, one row per plane: with
    alpha = (size - kernel) / (out - 1) rounded to the input's dtype,
    start[i] = int((i + u) * alpha) - int(u * alpha), and the last start is size - kernel."""
    compute = np.float64 if dtype == np.float64 else np.float32
    u = samples.astype(compute)[:, None]
    starts = np.zeros((samples.shape[0], out), dtype=np.int64)
    if out > 1:
        alpha = np.asarray(compute(size - kernel) / compute(out - 1)).astype(dtype).astype(compute)
        i = np.arange(out, dtype=compute)[None, :]
        starts = ((i + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    if out > 0:
        starts[:, -1] = size - kernel
    return starts


def _fractional_positions(samples, size, out, kernel, dtype):
    """positions (planes, kernel, out): every plane has its own intervals."""
    starts = _fractional_starts(samples, size, out, kernel, dtype)
    return starts[:, None, :] + np.arange(kernel)[None, :, None]


def _plane_strides(spatial):
    return [int(np.prod(spatial[d + 1:])) for d in range(len(spatial))]


def _along(values, d, n):
    """A per-dim 1-d array shaped to broadcast along output dim d of n."""
    return np.reshape(values, (1,) * d + (-1,) + (1,) * (n - d - 1))


# --- where each kernel offset reads: strided slices (regular windows) or gathers ------------

def _lowest(dtype):
    """The value no element loses to: -inf, or the integer minimum (PyTorch's lower bound)."""
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else -np.inf


class RegularWindows:
    """Sliding windows (kernel, stride, padding, dilation) over the planes of an input.

    The planes are padded once with `fill` (far enough right for ceil_mode's last window),
    after which each kernel offset reads one strided slice: no gather, no mask."""

    def __init__(self, spatial, kernel, stride, padding, dilation, ceil_mode):
        self.spatial, self.kernel, self.stride = tuple(spatial), kernel, stride
        self.padding, self.dilation = padding, dilation
        self.out = tuple(pooling_output_size(*a, ceil_mode) for a in
                         zip(spatial, kernel, stride, padding, dilation))
        # padded length: the input with both paddings, or up to the last window's end
        self.padded = tuple(max(s + 2 * p, (o - 1) * st + (k - 1) * d + 1)
                            for s, p, o, st, k, d in
                            zip(spatial, padding, self.out, stride, kernel, dilation))

    def pad(self, planes, fill):
        """(P, *padded spatial) copy of `planes` (P, *spatial) surrounded by `fill`."""
        if self.padded == self.spatial:
            return planes
        padded = np.full((planes.shape[0],) + self.padded, fill, dtype=planes.dtype)
        padded[self.inner()] = planes
        return padded

    def inner(self):
        """The index of the unpadded input inside a padded array."""
        return (slice(None),) + tuple(slice(p, p + s) for p, s in zip(self.padding, self.spatial))

    def slices(self):
        """For each kernel offset: (index of its strided slice into the padded planes,
        flat in-plane input index that each output reads there)."""
        n, strides = len(self.spatial), _plane_strides(self.spatial)
        for combo in itertools.product(*(range(k) for k in self.kernel)):
            index, flat = [slice(None)], 0
            for d, k in enumerate(combo):
                first = k * self.dilation[d]
                index.append(slice(first, first + (self.out[d] - 1) * self.stride[d] + 1,
                                   self.stride[d]))
                pos = np.arange(self.out[d]) * self.stride[d] - self.padding[d] + first
                flat = flat + _along(pos, d, n) * strides[d]
            yield tuple(index), flat

    def offsets(self, planes, fill):
        padded = self.pad(planes, fill)
        for index, flat in self.slices():
            yield padded[index], flat

    def first_index(self):
        """Flat index of each window's first element inside the input (not the padding)."""
        n, strides, flat = len(self.spatial), _plane_strides(self.spatial), 0
        for d in range(n):
            start = np.arange(self.out[d]) * self.stride[d] - self.padding[d]
            skip = -(-np.maximum(-start, 0) // self.dilation[d])    # ceil: dilation steps
            flat = flat + _along(start + skip * self.dilation[d], d, n) * strides[d]
        return flat


class GatheredWindows:
    """Windows given by `positions` per spatial dim (see module doc): adaptive bins, fractional
    intervals. Each kernel offset gathers its elements; missing ones read as `fill`."""

    def __init__(self, spatial, positions):
        self.spatial, self.positions = tuple(spatial), positions
        self.out = tuple(p.shape[2] for p in positions)

    def _flat_and_valid(self):
        n, strides = len(self.spatial), _plane_strides(self.spatial)
        planes = max(p.shape[0] for p in self.positions)
        shape = (planes,) + self.out
        for combo in itertools.product(*(range(p.shape[1]) for p in self.positions)):
            flat, valid = 0, True
            for d, (pos, k) in enumerate(zip(self.positions, combo)):
                index = pos[:, k, :].reshape((pos.shape[0],) + _along(pos[0, k], d, n).shape)
                flat = flat + np.maximum(index, 0) * strides[d]
                valid = valid & (index >= 0)
            yield np.broadcast_to(flat, shape), np.broadcast_to(valid, shape)

    def offsets(self, planes, fill):
        flat_planes = planes.reshape(planes.shape[0], int(np.prod(self.spatial)))
        for flat, valid in self._flat_and_valid():
            if flat.shape[0] == 1:      # every plane shares the windows
                values = np.take(flat_planes, flat[0], axis=1)
            else:
                values = np.take_along_axis(flat_planes, flat.reshape(flat.shape[0], -1),
                                            axis=1)
            values = values.reshape((planes.shape[0],) + self.out)
            yield np.where(valid, values, fill), flat

    def first_index(self):
        return next(self._flat_and_valid())[0]

    def scatter(self, grad_planes):
        """The adjoint of summing each window: every output's gradient added to each position
        it read (one bincount over all offsets, so overlapping windows accumulate)."""
        size = int(np.prod(self.spatial))
        count = grad_planes.shape[0]
        base = _along(np.arange(count) * size, 0, len(self.out) + 1)
        targets, weights = [], []
        for flat, valid in self._flat_and_valid():
            valid = np.broadcast_to(valid, grad_planes.shape)
            targets.append(np.broadcast_to(base + flat, grad_planes.shape)[valid])
            weights.append(grad_planes[valid])
        summed = np.bincount(np.concatenate(targets), weights=np.concatenate(weights),
                             minlength=count * size)
        return summed.reshape((count,) + self.spatial)


# --- the window reductions --------------------------------------------------------------------

def _planes(x, n):
    """x as (P, *spatial): its leading dims flattened into planes."""
    return x.reshape((-1,) + x.shape[x.ndim - n:])


def _unplanes(result, x, n):
    return result.reshape(x.shape[:x.ndim - n] + result.shape[1:])


def _window_max(x, windows, n):
    """Max over each window and its flat index in the plane, with PyTorch's CPU rule: the
    first valid element starts the window, a later one replaces it if larger or NaN."""
    planes = _planes(x, n)
    shape = (planes.shape[0],) + windows.out
    best = np.full(shape, _lowest(x.dtype), dtype=x.dtype)
    index = np.array(np.broadcast_to(windows.first_index(), shape), dtype=np.int64)
    wins = np.empty(shape, dtype=bool)
    for values, flat in windows.offsets(planes, _lowest(x.dtype)):
        np.greater(values, best, out=wins)
        if not np.issubdtype(x.dtype, np.integer):
            wins |= values != values
        np.copyto(best, values, where=wins)
        np.copyto(index, np.broadcast_to(flat, shape), where=wins)
    return _unplanes(best, x, n), _unplanes(index, x, n)


def _accumulator(dtype):
    """Sums run in float32 for half types (PyTorch's CPU opmath) and in the dtype otherwise."""
    return np.float32 if dtype in (np.float16, D.bfloat16.numpy_dtype) else dtype


def _rounded(values, dtype):
    """Sums (possibly in double: a float64 divisor promotes them) in `dtype`. bfloat16 goes
    through float32, as PyTorch's float accumulators reach it: a double just above a
    bfloat16 tie lands on the tie in float, then rounds to even. (ml_dtypes 0.7 rounds a
    double to bfloat16 directly, earlier versions through float: the cast is spelled out so
    the reference does not move with the installed version.)"""
    if dtype == D.bfloat16.numpy_dtype and values.dtype == np.float64:
        values = values.astype(np.float32)
    return values.astype(dtype)


def _window_sum(x, windows, n):
    planes = _planes(x, n).astype(_accumulator(x.dtype), copy=False)
    total = np.zeros((planes.shape[0],) + windows.out, dtype=planes.dtype)
    for values, _ in windows.offsets(planes, 0):
        total += values
    return total


def _divide(total, divisor, dtype):
    """total / divisor in the input dtype; integers divide truncating toward zero (C++)."""
    if np.issubdtype(dtype, np.integer):
        quotient = np.abs(total) // np.abs(divisor)
        return (np.sign(total) * np.sign(divisor) * quotient).astype(dtype)
    return _rounded(total / divisor, dtype)


def _per_dim_product(arrays):
    """The outer product of one 1-d array per spatial dim (separable window sizes)."""
    result = np.ones((), dtype=np.int64)
    for a in arrays:
        result = np.multiply.outer(result, a)
    return result


# --- reference kernels ----------------------------------------------------------------------

def max_pool_kernel(x, kernel_size, stride, padding, dilation, ceil_mode):
    n = len(kernel_size)
    windows = RegularWindows(x.shape[-n:], kernel_size, stride, padding, dilation, ceil_mode)
    return _window_max(x, windows, n)


def _avg_scale(windows, count_include_pad, divisor_override):
    """PyTorch's divisor for every output, and whether its window holds any input element.

    A window is first clipped to the padded input (so a window that ceil_mode lets run past
    the right padding counts only up to it); count_include_pad divides by that clipped size,
    otherwise by the number of input (non-padding) elements inside; divisor_override wins."""
    padded_sizes, inside_sizes = [], []
    for size, out, kernel, step, pad in zip(windows.spatial, windows.out, windows.kernel,
                                            windows.stride, windows.padding):
        start = np.arange(out) * step - pad
        end = np.minimum(start + kernel, size + pad)
        padded_sizes.append(end - start)
        inside_sizes.append(np.maximum(np.minimum(end, size) - np.maximum(start, 0), 0))
    inside = _per_dim_product(inside_sizes)
    if divisor_override is not None:
        divisor = np.full(inside.shape, divisor_override, dtype=np.int64)
    else:
        divisor = _per_dim_product(padded_sizes) if count_include_pad else inside
    return np.where(inside > 0, divisor, 1), inside > 0


def avg_pool_kernel(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override):
    n = len(kernel_size)
    windows = RegularWindows(x.shape[-n:], kernel_size, stride, padding, (1,) * n, ceil_mode)
    divisor, nonempty = _avg_scale(windows, count_include_pad, divisor_override)
    result = np.where(nonempty, _divide(_window_sum(x, windows, n), divisor, x.dtype), 0)
    return _unplanes(_rounded(result, x.dtype), x, n)


def avg_pool_backward_kernel(grad, input_shape, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, divisor_override):
    """Each output's gradient / divisor added to every input element of its window."""
    n = len(kernel_size)
    windows = RegularWindows(input_shape[-n:], kernel_size, stride, padding, (1,) * n,
                             ceil_mode)
    divisor, nonempty = _avg_scale(windows, count_include_pad, divisor_override)
    share = np.where(nonempty, _planes(grad, n).astype(_accumulator(grad.dtype)) / divisor, 0)
    padded = windows.pad(np.zeros((share.shape[0],) + windows.spatial, share.dtype), 0)
    padded = np.array(padded)     # a fresh buffer even when there is no padding
    for index, _ in windows.slices():
        padded[index] += share    # within one offset, outputs hit distinct elements
    return _rounded(padded[windows.inner()], grad.dtype).reshape(input_shape)


def _adaptive_windows(spatial, output_size):
    positions = [_adaptive_positions(size, out) for size, out in zip(spatial, output_size)]
    counts = [np.subtract(*_adaptive_bounds(size, out)[::-1])
              for size, out in zip(spatial, output_size)]
    return GatheredWindows(spatial, positions), _per_dim_product(counts)


def adaptive_avg_pool_kernel(x, output_size):
    n = len(output_size)
    windows, counts = _adaptive_windows(x.shape[-n:], output_size)
    return _unplanes(_rounded(_window_sum(x, windows, n) / counts, x.dtype), x, n)


def adaptive_avg_pool_backward_kernel(grad, input_shape, output_size):
    n = len(output_size)
    windows, counts = _adaptive_windows(tuple(input_shape[-n:]), output_size)
    share = _planes(grad, n).astype(_accumulator(grad.dtype)) / counts
    return _rounded(windows.scatter(share), grad.dtype).reshape(input_shape)


def adaptive_max_pool_kernel(x, output_size):
    n = len(output_size)
    windows, _ = _adaptive_windows(x.shape[-n:], output_size)
    return _window_max(x, windows, n)


# The sample that drives each spatial dim: PyTorch's 2-d kernel takes width from sample 0 and
# height from sample 1; its 3-d kernel takes time, height, width from samples 0, 1, 2.
_FRACTIONAL_SAMPLE_OF_DIM = {2: (1, 0), 3: (0, 1, 2)}


def fractional_max_pool_kernel(x, samples, kernel_size, output_size):
    n = len(kernel_size)
    samples = samples.reshape(-1, n)
    positions = [_fractional_positions(samples[:, j], size, out, kernel, x.dtype)
                 for j, size, out, kernel in zip(_FRACTIONAL_SAMPLE_OF_DIM[n], x.shape[-n:],
                                                 output_size, kernel_size)]
    return _window_max(x, GatheredWindows(x.shape[-n:], positions), n)


def max_unpool_kernel(x, indices, output_size):
    """Each input value written to the flat plane position its index names; zeros elsewhere."""
    n = len(output_size)
    values = x.reshape(-1, int(np.prod(x.shape[x.ndim - n:])))
    out = np.zeros((values.shape[0], int(np.prod(output_size))), dtype=x.dtype)
    np.put_along_axis(out, indices.reshape(values.shape), values, axis=1)
    return out.reshape(x.shape[:x.ndim - n] + tuple(output_size))


def _max_pool_backward_kernel(n):
    def max_pool_backward_kernel(grad, indices, input_shape):
        """The gradient of a max pool with respect to its input: zeros of the input's shape
        plus each output's gradient at the in-plane position its index names (summed, in
        output order, where windows share a maximum)."""
        lead = len(input_shape) - n
        planes = math.prod(input_shape[:lead])
        result = np.zeros((planes, math.prod(input_shape[lead:])), dtype=grad.dtype)
        rows = np.repeat(np.arange(planes), grad.size // planes if planes else 0)
        np.add.at(result, (rows, indices.reshape(-1)), grad.reshape(-1))
        return result.reshape(input_shape)
    return max_pool_backward_kernel


_MAX = {"kernel_size": None, "stride": None, "padding": None, "dilation": None,
        "ceil_mode": False}
_AVG = {"kernel_size": None, "stride": None, "padding": None, "ceil_mode": False,
        "count_include_pad": True, "divisor_override": None}
# Pooling results take the memory format the input suggests (channels-last in, channels-last
# out), as PyTorch's CPU kernels allocate them; avg_pool3d's stay contiguous.
MAX_POOL = {n: structured.declare(f"max_pool{n}d_with_indices", max_pool_kernel, family="nn",
                                  params=_MAX, dtypes=MAX_DTYPES, layout="input_format")
            for n in (2, 3)}
# PyTorch's op takes the input itself; this one its shape, so the graph need not keep it.
MAX_POOL_BACKWARD = {n: structured.declare(f"max_pool{n}d_with_indices_backward",
                                           _max_pool_backward_kernel(n), family="nn",
                                           params={"input_shape": None}, dtypes=FLOATING)
                     for n in (2, 3)}
AVG_POOL = {n: structured.declare(f"avg_pool{n}d", avg_pool_kernel, family="nn", params=_AVG,
                                  dtypes=AVG_DTYPES,
                                  layout="input_format" if n == 2 else "contiguous")
            for n in (2, 3)}
AVG_POOL_BACKWARD = {n: structured.declare(f"avg_pool{n}d_backward", avg_pool_backward_kernel,
                                           family="nn", params={"input_shape": None, **_AVG},
                                           dtypes=FLOATING) for n in (2, 3)}
ADAPTIVE_AVG = {n: structured.declare(f"adaptive_avg_pool{n}d", adaptive_avg_pool_kernel,
                                      family="nn", params={"output_size": None},
                                      dtypes=FLOATING, layout="input_format") for n in (2, 3)}
ADAPTIVE_AVG_BACKWARD = {n: structured.declare(
    f"adaptive_avg_pool{n}d_backward", adaptive_avg_pool_backward_kernel, family="nn",
    params={"input_shape": None, "output_size": None}, dtypes=FLOATING) for n in (2, 3)}
ADAPTIVE_MAX = {n: structured.declare(f"adaptive_max_pool{n}d", adaptive_max_pool_kernel,
                                      family="nn", params={"output_size": None},
                                      dtypes=FLOATING, layout="input_format") for n in (2, 3)}
FRACTIONAL_MAX = {n: structured.declare(f"fractional_max_pool{n}d", fractional_max_pool_kernel,
                                        family="nn",
                                        params={"kernel_size": None, "output_size": None},
                                        dtypes=FLOATING) for n in (2, 3)}
MAX_UNPOOL = {n: structured.declare(f"max_unpool{n}d", max_unpool_kernel, family="nn",
                                    params={"output_size": None}) for n in (2, 3)}


# --- argument checks shared by the public forms -----------------------------------------------

def _shape_str(t):
    return "[" + ", ".join(map(str, t.shape)) + "]"


def expand_arg(value, n, fn, name, allow_empty=False):
    """An int or a 1- or n-element sequence as an n-tuple (PyTorch's IntArrayRef rules)."""
    if isinstance(value, Tensor):
        value = value.tolist()
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    if isinstance(value, (tuple, list)):
        if allow_empty and len(value) == 0:
            return None
        if len(value) == 1:
            return (int(value[0]),) * n
        if len(value) == n:
            return tuple(int(v) for v in value)
    plural = {1: "one int", 2: "two ints", 3: "three ints"}[n]
    raise RuntimeError(f"{fn}: {name} must either be a single int, or a tuple of {plural}")


def check_input_rank(x, n, fn):
    """Pooling inputs are (C, *spatial) or (N, C, *spatial) with non-empty non-batch dims."""
    ok = x.dim() in (n + 1, n + 2) and all(s > 0 for s in x.shape[x.dim() - n - 1:])
    if not ok:
        raise RuntimeError(f"{fn}: Expected {n + 1}D or {n + 2}D (batch mode) tensor with "
                           f"optional 0 dim batch size for input, but got: {_shape_str(x)}")


def _pool_args(x, n, fn, kernel_size, stride, padding, dilation, ceil_mode):
    """Validated (kernel, stride, padding, dilation) tuples and the output spatial size."""
    kernel = expand_arg(kernel_size, n, fn, "kernel_size")
    step = expand_arg(stride, n, fn, "stride", allow_empty=True) or kernel
    pad = expand_arg(padding, n, fn, "padding")
    dil = expand_arg(dilation, n, fn, "dilation")
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"{fn}: kernel size should be greater than zero, but got "
                           f"kernel_size={list(kernel)}")
    if any(s <= 0 for s in step):
        raise RuntimeError(f"{fn}: stride should be greater than zero, but got "
                           f"stride={list(step)}")
    if any(d <= 0 for d in dil):
        raise RuntimeError(f"{fn}: dilation should be greater than zero, but got "
                           f"dilation={list(dil)}")
    check_input_rank(x, n, fn)
    for p, k, d in zip(pad, kernel, dil):
        if p < 0:
            raise RuntimeError(f"{fn}: pad must be non-negative, but got pad: {p}")
        if p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"{fn}: pad should be at most half of effective kernel size, "
                               f"but got pad={p}, kernel_size={k} and dilation={d}")
    spatial = x.shape[-n:]
    out = tuple(pooling_output_size(*a, bool(ceil_mode)) for a in
                zip(spatial, kernel, step, pad, dil))
    if any(o < 1 for o in out):
        planes = x.shape[-n - 1]
        raise RuntimeError(f"{fn}: Given input size: ({'x'.join(map(str, (planes,) + spatial))})"
                           f". Calculated output size: "
                           f"({'x'.join(map(str, (planes,) + out))}). Output size is too small")
    return kernel, step, pad, dil


# --- max pooling ------------------------------------------------------------------------------

def max_pool_with_indices(n, input, kernel_size, stride=(), padding=0, dilation=1,
                          ceil_mode=False, fn=None):
    """(values, int64 flat-in-plane indices) of an n-d max pool (n = 2 or 3)."""
    fn = fn or f"max_pool{n}d"
    kernel, step, pad, dil = _pool_args(input, n, fn, kernel_size, stride, padding, dilation,
                                        ceil_mode)
    return structured.run(MAX_POOL[n], (input,), {
        "kernel_size": kernel, "stride": step, "padding": pad, "dilation": dil,
        "ceil_mode": bool(ceil_mode)})


def _check_1d(input, fn):
    if input.dim() not in (2, 3):
        raise RuntimeError(f"{fn}() Expected 2D or 3D input tensor, but got {_shape_str(input)}")


def _one(value, fn, name, allow_empty=False):
    """A 1-d op's size argument: an int or a one-element sequence."""
    if isinstance(value, (tuple, list)):
        if allow_empty and len(value) == 0:
            return ()
        if len(value) != 1:
            raise RuntimeError(f"{fn}() argument '{name}' should contain one int "
                               f"(got {len(value)})")
        return (int(value[0]),)
    return (int(value),)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):
    """torch.max_pool1d_with_indices: the 2-d op over (.., 1, L)."""
    fn = "max_pool1d"
    _check_1d(input, fn)
    kernel = _one(kernel_size, fn, "kernel_size")
    step = _one(stride, fn, "stride", allow_empty=True) or kernel
    values, indices = max_pool_with_indices(
        2, input.unsqueeze(-2), (1,) + kernel, (1,) + step, (0,) + _one(padding, fn, "padding"),
        (1,) + _one(dilation, fn, "dilation"), ceil_mode, fn=fn)
    return values.squeeze(-2), indices.squeeze(-2)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)[0]


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool_with_indices(2, input, kernel_size, stride, padding, dilation, ceil_mode)[0]


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool_with_indices(3, input, kernel_size, stride, padding, dilation, ceil_mode)[0]


# --- average pooling --------------------------------------------------------------------------

def avg_pool(n, input, kernel_size, stride=None, padding=0, ceil_mode=False,
             count_include_pad=True, divisor_override=None, fn=None):
    fn = fn or f"avg_pool{n}d"
    kernel = expand_arg(kernel_size, n, fn, "kernel_size")
    step = expand_arg(stride, n, fn, "stride", allow_empty=True) if stride is not None else None
    step = step or kernel
    pad = expand_arg(padding, n, fn, "padding")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError(f"{fn}: divisor must be not zero")
    for p, k in zip(pad, kernel):
        if p > k // 2:
            raise RuntimeError(f"{fn}: pad should be smaller than or equal to half of kernel "
                               f"size, but got pad={p}, kernel_size={k}")
    _pool_args(input, n, fn, kernel, step, pad, 1, ceil_mode)
    return structured.run(AVG_POOL[n], (input,), {
        "kernel_size": kernel, "stride": step, "padding": pad, "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad), "divisor_override": divisor_override})


def max_pool_backward(n, grad, indices, input_shape):
    """The gradient of max_pool{n}d_with_indices with respect to its input."""
    return structured.run(MAX_POOL_BACKWARD[n], (grad, indices),
                          {"input_shape": tuple(input_shape)})


def avg_pool_backward(n, grad, input_shape, params):
    """The gradient of avg_pool{n}d with respect to its input (linear in `grad`)."""
    return structured.run(AVG_POOL_BACKWARD[n], (grad,),
                          {"input_shape": tuple(input_shape), **params})


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False,
               count_include_pad=True):
    """torch.avg_pool1d: the 2-d op over (.., 1, L)."""
    fn = "avg_pool1d"
    _check_1d(input, fn)
    kernel = _one(kernel_size, fn, "kernel_size")
    step = _one(stride, fn, "stride", allow_empty=True) or kernel
    return avg_pool(2, input.unsqueeze(-2), (1,) + kernel, (1,) + step,
                    (0,) + _one(padding, fn, "padding"), ceil_mode, count_include_pad,
                    fn=fn).squeeze(-2)


# --- adaptive pooling -------------------------------------------------------------------------

def _adaptive_args(input, n, fn, output_size):
    size = expand_arg(output_size, n, fn, "output_size")
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"{fn}(): Expected {n + 1}D or {n + 2}D tensor, but got "
                           f"{_shape_str(input)}")
    for d in range(input.dim() - n, input.dim()):
        if input.shape[d] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {_shape_str(input)} with "
                               f"dimension {d} being empty")
    if any(s < 0 for s in size):
        raise RuntimeError(f"{fn}: elements of output_size must be greater than or equal to 0 "
                           f"but received {{{', '.join(map(str, size))}}}")
    return size


def adaptive_avg_pool(n, input, output_size, fn=None):
    size = _adaptive_args(input, n, fn or f"adaptive_avg_pool{n}d", output_size)
    return structured.run(ADAPTIVE_AVG[n], (input,), {"output_size": size})


def adaptive_avg_pool_backward(n, grad, input_shape, output_size):
    return structured.run(ADAPTIVE_AVG_BACKWARD[n], (grad,),
                          {"input_shape": tuple(input_shape), "output_size": output_size})


def adaptive_max_pool(n, input, output_size, fn=None):
    size = _adaptive_args(input, n, fn or f"adaptive_max_pool{n}d", output_size)
    return structured.run(ADAPTIVE_MAX[n], (input,), {"output_size": size})


def adaptive_avg_pool1d(input, output_size):
    fn = "adaptive_avg_pool1d"
    _check_1d(input, fn)
    size = _one(output_size, fn, "output_size")
    return adaptive_avg_pool(2, input.unsqueeze(-2), (1,) + size, fn=fn).squeeze(-2)


def adaptive_max_pool1d(input, output_size):
    fn = "adaptive_max_pool1d"
    _check_1d(input, fn)
    size = _one(output_size, fn, "output_size")
    values, indices = adaptive_max_pool(2, input.unsqueeze(-2), (1,) + size, fn=fn)
    return values.squeeze(-2), indices.squeeze(-2)


# --- fractional max pooling and max unpooling --------------------------------------------------

def fractional_max_pool(n, input, kernel_size, output_size, random_samples):
    fn = f"fractional_max_pool{n}d"
    kernel = expand_arg(kernel_size, n, fn, "kernel_size")
    size = expand_arg(output_size, n, fn, "output_size")
    if input.dim() not in (n + 1, n + 2) or any(s == 0 for s in input.shape[-n - 1:]):
        raise RuntimeError(f"{fn}(): Expected {n + 1}D or {n + 2}D tensor, but got "
                           f"{_shape_str(input)}")
    planes = input.shape[0] * input.shape[1] if input.dim() == n + 2 else input.shape[0]
    if random_samples.dim() != 3 or random_samples.shape[-1] != n or \
            random_samples.numel() != planes * n:
        raise RuntimeError(f"{fn}(): expected _random_samples of shape [N, C, {n}] matching "
                           f"the input, but got {_shape_str(random_samples)}")
    names = {2: ("height", "width"), 3: ("time", "height", "width")}[n]
    for name, k, o, s in zip(names, kernel, size, input.shape[-n:]):
        if o + k - 1 > s:
            raise RuntimeError(f"{fn}_out(): pool {name} {k} too large relative to input "
                               f"{name} {s}")
    if random_samples.dtype != input.dtype:
        raise RuntimeError(f"{fn}(): expected _random_samples of dtype {input.dtype}, "
                           f"but got {random_samples.dtype}")
    return structured.run(FRACTIONAL_MAX[n], (input, random_samples),
                          {"kernel_size": kernel, "output_size": size})


def max_unpool(n, input, indices, output_size):
    fn = f"max_unpool{n}d"
    size = tuple(int(s) for s in output_size)
    if indices.dtype != D.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: "
                           f"{indices.dtype.scalar_name}")
    if len(size) != n:
        raise RuntimeError(f"There should be exactly {n} elements in output_size, but got "
                           f"{len(size)} elements.")
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"Input to {fn} should be a {n + 1}d or {n + 2}d Tensor, but got a "
                           f"tensor with {input.dim()} dimensions.")
    if tuple(input.shape) != tuple(indices.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({_shape_str(input)}) but got indices tensor with shape: "
                           f"{_shape_str(indices)}")
    invalid = (indices._np < 0) | (indices._np >= int(np.prod(size)))
    if invalid.any():
        bad = int(indices._np.reshape(-1)[np.argmax(invalid.reshape(-1))])
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                           f"{'x'.join(map(str, size))})")
    return structured.run(MAX_UNPOOL[n], (input, indices), {"output_size": size})
