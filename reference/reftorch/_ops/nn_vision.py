"""Neural-network ops (vision) at the torch level: resampling and pixel rearrangement.

* Upsampling (`upsample_nearest2d`, `upsample_bilinear2d`, `upsample_bicubic2d`, ...) is
  separable: along each spatial dimension every output position reads a few input positions
  ("taps") with weights. `_axis_taps` computes those index and weight arrays with PyTorch's
  source-index formulas; the forward kernel gathers and weights them one dimension at a time,
  and the backward kernel applies the transposed interpolation matrices (a matmul per
  dimension), which is the scatter-add of the forward gather.
* Grid sampling (`grid_sampler_2d/3d`) reads, for every output location, the input at a
  location the grid names (in [-1, 1] coordinates). `_grid_plan` turns the grid into flat
  input indices, weights and weight derivatives for each tap; forward, input gradient and grid
  gradient are all gathers or bincount scatters over that plan.
* `affine_grid_generator` is a batched matmul of a fixed base grid with theta.
* `pixel_shuffle`, `pixel_unshuffle` and `channel_shuffle` are reshape/permute copies.
"""
from __future__ import annotations

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from . import structured

__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
           "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator"]

FLOATING = {D.float16, D.bfloat16, D.float32, D.float64}
CUBIC_A = -0.75       # the cubic convolution constant PyTorch uses (Keys' kernel)


def _compute_dtype(dtype):
    """Half types compute in float32 (PyTorch's opmath type on CPU), others in their own."""
    return np.float64 if dtype == np.float64 else np.float32


# =============================================================================================
# Upsampling
# =============================================================================================

def _scale(in_size, out_size, scale, compute):
    """PyTorch's compute_scales_value: 1/scale_factor when one was given, else in/out."""
    if scale is not None and scale > 0:
        return compute(1.0 / scale)
    return compute(in_size) / compute(out_size)


def _linear_scale(in_size, out_size, align_corners, scale, compute):
    """area_pixel_compute_scale: with align_corners the corner pixels map onto each other."""
    if align_corners:
        return compute(in_size - 1) / compute(out_size - 1) if out_size > 1 else compute(0)
    return _scale(in_size, out_size, scale, compute)


def _source_positions(in_size, out_size, align_corners, scale, compute, cubic):
    """The real-valued source coordinate of every output position (area_pixel_...index)."""
    step = _linear_scale(in_size, out_size, align_corners, scale, compute)
    dst = np.arange(out_size, dtype=compute)
    if align_corners:
        return step * dst
    src = step * (dst + compute(0.5)) - compute(0.5)
    # linear modes clamp negative positions to 0; cubic lets the taps reach outside instead
    return src if cubic else np.maximum(src, compute(0))


def _cubic_weights(t):
    """The four cubic-convolution weights for taps at offsets -1, 0, 1, 2 from floor(src)."""
    a = CUBIC_A

    def near(x):   # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):    # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=-1)


def _axis_taps(mode, in_size, out_size, align_corners, scale, compute):
    """(indices (out, taps) int64, weights (out, taps)) of one spatial dimension."""
    if mode in ("nearest", "nearest-exact"):
        # PyTorch computes nearest indices with a float32 scale, whatever the dtype
        step = _scale(in_size, out_size, scale, np.float32)
        dst = np.arange(out_size, dtype=np.float32)
        if mode == "nearest-exact":
            dst = dst + np.float32(0.5)
        index = np.minimum(np.floor(dst * step).astype(np.int64), in_size - 1)
        return index[:, None], np.ones((out_size, 1), dtype=compute)
    cubic = mode == "cubic"
    src = _source_positions(in_size, out_size, align_corners, scale, compute, cubic)
    base = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    frac = np.clip(src - base.astype(compute), 0, 1).astype(compute)
    if cubic:
        taps = base[:, None] + np.arange(-1, 3)
        return np.clip(taps, 0, in_size - 1), _cubic_weights(frac).astype(compute)
    upper = base + (base < in_size - 1)
    return np.stack([base, upper], axis=1), np.stack([1 - frac, frac], axis=1)


_UPSAMPLE_MODES = {   # op name -> (per-axis mode, spatial dims, node name stem)
    "upsample_nearest1d": ("nearest", 1, "UpsampleNearest1D"),
    "upsample_nearest2d": ("nearest", 2, "UpsampleNearest2D"),
    "upsample_nearest3d": ("nearest", 3, "UpsampleNearest3D"),
    "_upsample_nearest_exact1d": ("nearest-exact", 1, "UpsampleNearestExact1D"),
    "_upsample_nearest_exact2d": ("nearest-exact", 2, "UpsampleNearestExact2D"),
    "_upsample_nearest_exact3d": ("nearest-exact", 3, "UpsampleNearestExact3D"),
    "upsample_linear1d": ("linear", 1, "UpsampleLinear1D"),
    "upsample_bilinear2d": ("linear", 2, "UpsampleBilinear2D"),
    "upsample_trilinear3d": ("linear", 3, "UpsampleTrilinear3D"),
    "upsample_bicubic2d": ("cubic", 2, "UpsampleBicubic2D"),
}


def _all_taps(mode, in_spatial, output_size, align_corners, scales, compute):
    scales = scales or (None,) * len(output_size)
    return [_axis_taps(mode, i, o, align_corners, s, compute)
            for i, o, s in zip(in_spatial, output_size, scales)]


def _upsample_kernel(mode):
    def upsample(x, output_size, align_corners=False, scales=None):
        n = len(output_size)
        compute = _compute_dtype(x.dtype)
        exact = mode.startswith("nearest")     # a pure gather: keep the dtype (uint8 too)
        taps = _all_taps(mode, x.shape[-n:], output_size, align_corners, scales, compute)
        result = x if exact else x.astype(compute, copy=False)
        for d, (index, weights) in enumerate(taps):
            axis = x.ndim - n + d
            if exact:
                result = np.take(result, index[:, 0], axis=axis)
                continue
            shape = [1] * x.ndim
            shape[axis] = -1
            total = None
            for t in range(index.shape[1]):
                part = np.take(result, index[:, t], axis=axis) * weights[:, t].reshape(shape)
                total = part if total is None else total + part
            result = total
        return result.astype(x.dtype, copy=False)
    upsample.__name__ = f"upsample_{mode}"
    return upsample


def _upsample_backward_kernel(mode):
    def upsample_backward(grad, output_size, input_size, align_corners=False, scales=None):
        """The transpose of the forward's taps, one spatial axis at a time: each output
        position's gradient times each of its taps' weights, added into that tap's input
        position, from zero, output positions in order and each one's taps in order
        (np.add.at's order)."""
        n = len(output_size)
        compute = _compute_dtype(grad.dtype)
        in_spatial = tuple(input_size[-n:])
        taps = _all_taps(mode, in_spatial, output_size, align_corners, scales, compute)
        result = grad.astype(compute, copy=False)
        for d, (index, weights) in enumerate(taps):
            axis = grad.ndim - n + d
            moved = np.moveaxis(result, axis, 0)                  # (output positions, ...)
            rest = moved.shape[1:]
            terms = moved[:, None] * weights.reshape(weights.shape + (1,) * len(rest))
            summed = np.zeros((in_spatial[d],) + rest, dtype=compute)
            np.add.at(summed, index.reshape(-1), terms.reshape((index.size,) + rest))
            result = np.moveaxis(summed, 0, axis)
        return np.ascontiguousarray(result).astype(grad.dtype, copy=False)
    upsample_backward.__name__ = f"upsample_{mode}_backward"
    return upsample_backward


_UPSAMPLE_PARAMS = {"output_size": None, "align_corners": False, "scales": None}
UPSAMPLE = {}
UPSAMPLE_BACKWARD = {}
for _name, (_mode, _n, _node) in _UPSAMPLE_MODES.items():
    _dtypes = FLOATING | {D.uint8} if _mode.startswith("nearest") else FLOATING
    UPSAMPLE[_name] = structured.declare(_name, _upsample_kernel(_mode), family="nn",
                                         params=_UPSAMPLE_PARAMS, dtypes=_dtypes,
                                         layout="input_format")
    UPSAMPLE_BACKWARD[_name] = structured.declare(
        _name + "_backward", _upsample_backward_kernel(_mode), family="nn",
        params={**_UPSAMPLE_PARAMS, "input_size": None}, dtypes=FLOATING)


def upsample_op_name(mode, n):
    """The op that `F.interpolate(mode=...)` runs for an input with n spatial dims, or None."""
    for name, (axis_mode, dims, _node) in _UPSAMPLE_MODES.items():
        public = {"linear": ("linear", "bilinear", "trilinear")[dims - 1],
                  "cubic": "bicubic"}.get(axis_mode, axis_mode)
        if public == mode and dims == n:
            return name
    return None


def upsample_node_name(op_name):
    return _UPSAMPLE_MODES[op_name][2]


def _sizes_str(shape, letters):
    return ", ".join(f"{k}: {v}" for k, v in zip(letters, shape))


def upsample(op_name, input, output_size, align_corners=False, scales=None):
    """Run an upsample op after PyTorch's size checks (output_size is a tuple of ints)."""
    n = _UPSAMPLE_MODES[op_name][1]
    output_size = tuple(int(s) for s in output_size)
    if len(output_size) != n:
        raise RuntimeError(f"It is expected output_size equals to {n}, but got size "
                           f"{len(output_size)}")
    if input.dim() != n + 2:
        raise RuntimeError(f"It is expected input_size equals to {n + 2}, but got size "
                           f"{input.dim()}")
    spatial = tuple(input.shape[2:])
    if any(s <= 0 for s in spatial + output_size):
        letters = ("D", "H", "W")[3 - n:]
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({_sizes_str(spatial, letters)}) output "
                           f"({_sizes_str(output_size, letters)})")
    scales = None if scales is None or all(s is None for s in scales) else tuple(scales)
    return structured.run(UPSAMPLE[op_name], (input,), {
        "output_size": output_size, "align_corners": bool(align_corners), "scales": scales})


def upsample_backward(op_name, grad, input_size, params):
    return structured.run(UPSAMPLE_BACKWARD[op_name], (grad,),
                          {**params, "input_size": tuple(input_size)})


# =============================================================================================
# Grid sampling
# =============================================================================================

_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def _unnormalize(coord, size, align_corners):
    """[-1, 1] -> pixel coordinates, and d(pixel)/d(coord)."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _clip(x, grad, size):
    """Clamp to [0, size-1]; the gradient is 0 where the clamp is active (PyTorch's rule)."""
    inside = (x > 0) & (x < size - 1)
    return np.clip(x, 0, size - 1), np.where(inside, grad, 0)


def _reflect(x, grad, low2, high2):
    """Reflect x into [low2/2, high2/2] (bounds given doubled, as PyTorch does)."""
    if low2 == high2:
        return np.zeros_like(x), np.zeros_like(grad)
    low, span = low2 / 2, (high2 - low2) / 2
    shifted = x - low
    sign = np.where(shifted < 0, -1, 1).astype(x.dtype)
    shifted = np.abs(shifted)
    extra = np.fmod(shifted, span)
    even = np.fmod(np.floor(shifted / span), 2) == 0
    value = np.where(even, extra + low, span - extra + low)
    return value.astype(x.dtype), np.where(even, sign, -sign) * grad


def _apply_padding(x, grad, size, padding, align_corners):
    """PyTorch's compute_coordinates: where border/reflection padding moves a coordinate."""
    if padding == "border":
        return _clip(x, grad, size)
    if padding == "reflection":
        if align_corners:
            x, grad = _reflect(x, grad, 0, 2 * (size - 1))
        else:
            x, grad = _reflect(x, grad, -1, 2 * size - 1)
        return _clip(x, grad, size)
    return x, grad


def _axis_plan(coord, size, mode, padding, align_corners):
    """For one grid axis: tap indices (..., taps), in-bounds masks, weights, and d(weight)/d(coord).

    Taps: nearest 1 (round half to even), bilinear 2 (floor, floor+1), bicubic 4
    (floor-1 .. floor+2, each tap moved by the padding rule on its own).
    """
    x, dx = _unnormalize(coord, size, align_corners)
    dx = np.full_like(coord, dx)
    if mode != "bicubic":
        x, dx = _apply_padding(x, dx, size, padding, align_corners)
    finite = np.isfinite(x)
    x = np.where(finite, x, -10)        # NaN/inf coordinates read nothing (all taps outside)
    base = np.floor(x)
    if mode == "nearest":
        taps = np.rint(x)[..., None]
        weights = np.ones_like(taps)
        dweights = np.zeros_like(taps)
    elif mode == "bilinear":
        frac = (x - base)[..., None]
        taps = base[..., None] + np.array([0, 1], dtype=x.dtype)
        weights = np.concatenate([1 - frac, frac], axis=-1)
        dweights = np.broadcast_to(np.array([-1, 1], dtype=x.dtype), taps.shape) * dx[..., None]
    else:
        t = x - base
        taps = base[..., None] + np.arange(-1, 3).astype(x.dtype)
        weights = _cubic_weights(t)
        dweights = _cubic_derivatives(t) * dx[..., None]
        tap_grad = np.zeros_like(taps)
        taps, _ = _apply_padding(taps, tap_grad, size, padding, align_corners)
    inside = (taps >= 0) & (taps <= size - 1)
    index = np.where(inside, taps, 0).astype(np.int64)
    return index, inside, weights.astype(coord.dtype), dweights.astype(coord.dtype)


def _cubic_derivatives(t):
    """d/dt of the four cubic weights of `_cubic_weights`."""
    a = CUBIC_A

    def near(x):
        return (3 * (a + 2) * x - 2 * (a + 3)) * x

    def far(x):
        return (3 * a * x - 10 * a) * x + 8 * a

    return np.stack([far(t + 1), near(t), -near(1 - t), -far(2 - t)], axis=-1)


def _grid_plan(grid, spatial, mode, padding, align_corners):
    """Combine the per-axis plans into taps over the flattened input plane.

    Returns flat indices (N, P, T), weights (N, P, T) with out-of-bounds taps at weight 0,
    and for each grid axis k the derivative of the weights with respect to grid[..., k].
    Grid axis 0 is x (the last input dim), axis 1 y, axis 2 z: reversed input order.
    """
    n_batch = grid.shape[0]
    k = grid.shape[-1]
    coords = grid.reshape(n_batch, -1, k)
    plans = [_axis_plan(coords[..., a], spatial[k - 1 - a], mode, padding, align_corners)
             for a in range(k)]                       # plans[a] is grid axis a
    strides = np.cumprod((1,) + tuple(spatial[::-1]))[:k]   # x stride 1, y stride W, ...
    flat = 0
    inside = True
    weights = 1
    for a, (index, ok, w, _dw) in enumerate(plans):
        expand = _tap_axis(a, k, index.ndim)
        flat = flat + index[expand] * strides[a]
        inside = inside & ok[expand]
        weights = weights * w[expand]
    dweights = []
    for a in range(k):
        total = 1
        for b, (_index, _ok, w, dw) in enumerate(plans):
            total = total * (dw if a == b else w)[_tap_axis(b, k, w.ndim)]
        dweights.append(_flatten_taps(np.where(inside, total, 0), k))
    weights = np.where(inside, weights, 0)
    return (_flatten_taps(np.where(inside, flat, 0), k), _flatten_taps(weights, k), dweights)


def _tap_axis(a, k, ndim):
    """Index that places grid axis a's taps on its own trailing axis (outer product)."""
    lead = (slice(None),) * (ndim - 1)
    # trailing axes ordered z, y, x so the flattened taps run x fastest
    return lead + tuple(slice(None) if b == a else None for b in reversed(range(k)))


def _flatten_taps(array, k):
    return array.reshape(array.shape[:array.ndim - k] + (-1,))


def _gather(x, flat):
    """x (N, C, L) read at flat (N, P, T) -> (N, C, P, T)."""
    n, c = x.shape[:2]
    p, t = flat.shape[1:]
    picked = np.take_along_axis(x, flat.reshape(n, 1, p * t), axis=2)
    return picked.reshape(n, c, p, t)


def _check_grid_args(mode, padding):
    if mode not in _MODES:
        raise RuntimeError(f"grid_sampler(): unknown interpolation_mode {mode}")
    if padding not in _PADDINGS:
        raise RuntimeError(f"grid_sampler(): unknown padding_mode {padding}")
    return _MODES[mode], _PADDINGS[padding]


def _grid_setup(x, grid, interpolation_mode, padding_mode, align_corners):
    mode, padding = _check_grid_args(interpolation_mode, padding_mode)
    compute = _compute_dtype(x.dtype)
    spatial = x.shape[2:]
    flat, weights, dweights = _grid_plan(grid.astype(compute), spatial, mode, padding,
                                         align_corners)
    planes = x.astype(compute).reshape(x.shape[0], x.shape[1], -1)
    return compute, flat, weights, dweights, planes


def grid_sampler_kernel(x, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    _compute, flat, weights, _dw, planes = _grid_setup(x, grid, interpolation_mode,
                                                       padding_mode, align_corners)
    values = _gather(planes, flat)
    values = np.where(weights[:, None] != 0, values, 0)    # an outside tap adds exactly 0
    out = np.einsum("ncpt,npt->ncp", values, weights)
    return out.reshape(x.shape[:2] + grid.shape[1:-1]).astype(x.dtype)


def grid_sampler_backward_kernel(grad, x, grid, interpolation_mode=0, padding_mode=0,
                                 align_corners=False):
    """(d input, d grid): scatter grad * weight back to the taps; contract values with the
    weight derivatives for the grid."""
    compute, flat, weights, dweights, planes = _grid_setup(x, grid, interpolation_mode,
                                                           padding_mode, align_corners)
    n, c = x.shape[:2]
    plane = planes.shape[2]
    g = grad.astype(compute).reshape(n, c, -1)                         # (N, C, P)
    contributions = g[..., None] * weights[:, None]                    # (N, C, P, T)
    target = (np.arange(n * c).reshape(n, c, 1, 1) * plane + flat[:, None])
    grad_input = np.bincount(target.ravel(), weights=contributions.ravel(),
                             minlength=n * c * plane).reshape(x.shape)
    values = _gather(planes, flat)
    values = np.where(weights[:, None] != 0, values, 0)
    grad_grid = np.stack([np.einsum("ncp,ncpt,npt->np", g, values, dw) for dw in dweights],
                         axis=-1).reshape(grid.shape)
    return grad_input.astype(x.dtype), grad_grid.astype(grid.dtype)


_GRID_PARAMS = {"interpolation_mode": 0, "padding_mode": 0, "align_corners": False}
GRID_SAMPLER = {n: structured.declare(f"grid_sampler_{n}d", grid_sampler_kernel, family="nn",
                                      params=_GRID_PARAMS, dtypes=FLOATING) for n in (2, 3)}
GRID_SAMPLER_BACKWARD = {n: structured.declare(f"grid_sampler_{n}d_backward",
                                               grid_sampler_backward_kernel, family="nn",
                                               params=_GRID_PARAMS, dtypes=FLOATING)
                         for n in (2, 3)}


def _shape_str(t):
    return "[" + ", ".join(map(str, t.shape)) + "]"


def _check_grid_sampler(input, grid, interpolation_mode):
    fn = "grid_sampler()"
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"grid_sampler(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"{fn}: expected input and grid to have same dtype, but input has "
                           f"{input.dtype.scalar_name} and grid has {grid.dtype.scalar_name}")
    if input.dim() not in (4, 5) or input.dim() != grid.dim():
        raise RuntimeError(f"{fn}: expected 4D or 5D input and grid with same number of "
                           f"dimensions, but got input with sizes {_shape_str(input)} and "
                           f"grid with sizes {_shape_str(grid)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"{fn}: expected grid and input to have same batch size, but got "
                           f"input with sizes {_shape_str(input)} and grid with sizes "
                           f"{_shape_str(grid)}")
    n = input.dim() - 2
    if grid.shape[-1] != n:
        raise RuntimeError(f"{fn}: expected grid to have size {n} in last dimension, but got "
                           f"grid with sizes {_shape_str(grid)}")
    for d in range(2, input.dim()):
        if input.shape[d] <= 0:
            raise RuntimeError(f"{fn}: expected input to have non-empty spatial dimensions, "
                               f"but input has sizes {_shape_str(input)} with dimension {d} "
                               f"being empty")
    if n == 3 and interpolation_mode == 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    return n


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler: sample `input` at the [-1, 1] locations of `grid`."""
    n = _check_grid_sampler(input, grid, interpolation_mode)
    _check_grid_args(interpolation_mode, padding_mode)
    return structured.run(GRID_SAMPLER[n], (input, grid), {
        "interpolation_mode": int(interpolation_mode), "padding_mode": int(padding_mode),
        "align_corners": bool(align_corners)})


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    if input.dim() != 4:
        raise RuntimeError(f"grid_sampler_2d(): expected 4D input, got {input.dim()}D")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    if input.dim() != 5:
        raise RuntimeError(f"grid_sampler_3d(): expected 5D input, got {input.dim()}D")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_backward(n, grad, input, grid, params):
    return structured.run(GRID_SAMPLER_BACKWARD[n], (grad, input, grid), params)


# =============================================================================================
# Affine grids
# =============================================================================================

def _linspace_from_neg_one(steps, align_corners, dtype):
    """Pixel centres in [-1, 1] coordinates (scaled in by (steps-1)/steps without corners)."""
    if steps <= 1:
        return np.zeros(max(steps, 0), dtype=dtype)
    line = np.linspace(-1, 1, steps, dtype=dtype)
    if not align_corners:
        line = line * dtype((steps - 1) / steps)
    return line


def affine_base_grid(spatial, align_corners, dtype):
    """(prod(spatial), k+1) rows (x, y[, z], 1), x running fastest (the last spatial dim)."""
    lines = [_linspace_from_neg_one(s, align_corners, dtype) for s in spatial]
    mesh = np.meshgrid(*lines, indexing="ij")                 # (d,) h, w order
    coords = [m.ravel() for m in reversed(mesh)]              # x, y, (z)
    ones = np.ones_like(coords[0])
    return np.stack(coords + [ones], axis=-1)


def affine_grid_kernel(theta, size, align_corners=False):
    spatial = tuple(size[2:])
    compute = _compute_dtype(theta.dtype)
    base = affine_base_grid(spatial, align_corners, compute)
    grid = base @ np.swapaxes(theta.astype(compute), 1, 2)          # (N, P, k)
    return grid.reshape((theta.shape[0],) + spatial + (len(spatial),)).astype(theta.dtype)


AFFINE_GRID = structured.declare("affine_grid_generator", affine_grid_kernel, family="nn",
                                 params={"size": None, "align_corners": False},
                                 dtypes=FLOATING)


def affine_grid_generator(theta, size, align_corners):
    """torch.affine_grid_generator: grid[n, ..., :] = theta[n] @ (x, y[, z], 1)."""
    size = tuple(int(s) for s in size)
    k = len(size) - 2
    if len(size) not in (4, 5):
        raise RuntimeError(f"AffineGridGenerator needs 4d (spatial) or 5d (volumetric) inputs. "
                           f"Got size {list(size)}")
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (k, k + 1):
        raise RuntimeError(f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1}, "
                           f"got {_shape_str(theta)}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"affine_grid_generator: theta batch size {theta.shape[0]} does "
                           f"not match size[0] {size[0]}")
    return structured.run(AFFINE_GRID, (theta,), {"size": size,
                                                  "align_corners": bool(align_corners)})


# =============================================================================================
# Pixel and channel shuffles
# =============================================================================================

def _pixel_shuffle_kernel(x, upscale_factor):
    r = upscale_factor
    *batch, c, h, w = x.shape
    oc = c // (r * r)
    nb = len(batch)
    split = x.reshape(tuple(batch) + (oc, r, r, h, w))
    # (.., oc, r_h, r_w, h, w) -> (.., oc, h, r_h, w, r_w)
    order = tuple(range(nb)) + tuple(nb + i for i in (0, 3, 1, 4, 2))
    return split.transpose(order).reshape(tuple(batch) + (oc, h * r, w * r))


def _pixel_unshuffle_kernel(x, downscale_factor):
    r = downscale_factor
    *batch, c, h, w = x.shape
    nb = len(batch)
    split = x.reshape(tuple(batch) + (c, h // r, r, w // r, r))
    # (.., c, oh, r_h, ow, r_w) -> (.., c, r_h, r_w, oh, ow)
    order = tuple(range(nb)) + tuple(nb + i for i in (0, 2, 4, 1, 3))
    return split.transpose(order).reshape(tuple(batch) + (c * r * r, h // r, w // r))


def _channel_shuffle_kernel(x, groups):
    n, c = x.shape[:2]
    rest = x.shape[2:]
    split = x.reshape((n, groups, c // groups) + rest)
    return np.swapaxes(split, 1, 2).reshape(x.shape)


PIXEL_SHUFFLE = structured.declare("pixel_shuffle", _pixel_shuffle_kernel, family="nn",
                                   params={"upscale_factor": 1})
PIXEL_UNSHUFFLE = structured.declare("pixel_unshuffle", _pixel_unshuffle_kernel, family="nn",
                                     params={"downscale_factor": 1})
CHANNEL_SHUFFLE = structured.declare("channel_shuffle", _channel_shuffle_kernel, family="nn",
                                     params={"groups": 1})


def _check_factor(fn, name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{fn}(): argument '{name}' (position 2) must be int, not "
                        f"{type(value).__name__}")
    if value <= 0:
        raise RuntimeError(f"{fn} expects {name} to be greater than 0, but got: {value}")


def _check_rank(fn, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if input.dim() < 3:
        raise RuntimeError(f"{fn} expects input to have at least 3 dimensions, but got input "
                           f"with {input.dim()} dimension(s)")


def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    fn = "pixel_shuffle"
    _check_rank(fn, input)
    _check_factor(fn, "upscale_factor", upscale_factor)
    c = input.shape[-3]
    if c % (upscale_factor * upscale_factor) != 0:
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {upscale_factor * upscale_factor}")
    return structured.run(PIXEL_SHUFFLE, (input,), {"upscale_factor": upscale_factor})


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    fn = "pixel_unshuffle"
    _check_rank(fn, input)
    _check_factor(fn, "downscale_factor", downscale_factor)
    h, w = input.shape[-2:]
    for name, size in (("height", h), ("width", w)):
        if size % downscale_factor != 0:
            raise RuntimeError(f"pixel_unshuffle expects {name} to be divisible by "
                               f"downscale_factor, but input.size({-2 if name == 'height' else -1}"
                               f")={size} is not divisible by {downscale_factor}")
    return structured.run(PIXEL_UNSHUFFLE, (input,), {"downscale_factor": downscale_factor})


def channel_shuffle(input, groups):
    """Split the channels into `groups` groups and interleave them (ShuffleNet)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"channel_shuffle(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if isinstance(groups, bool) or not isinstance(groups, int):
        raise TypeError(f"channel_shuffle(): argument 'groups' (position 2) must be int, not "
                        f"{type(groups).__name__}")
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with sizes {_shape_str(input)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    c = input.shape[1]
    if c % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    return structured.run(CHANNEL_SHUFFLE, (input,), {"groups": groups})


native_channel_shuffle = channel_shuffle
