"""Derivative rows: neural-network ops (vision).

Upsampling is linear in its input: its backward is a structured op of its own
(`upsample_bilinear2d_backward`, ...) applying the transposed interpolation, and that op's
derivative is the forward upsample again (double backward). Grid sampling's backward is one
structured op giving both gradients (PyTorch has no double backward for it either). The
affine grid is a matmul with a constant base grid, so its gradient is written with reftorch
ops. The shuffles are permutations: each one's gradient is the inverse permutation.
"""
from __future__ import annotations

from ._table import derivative, not_differentiable, op_module, torch

_UPSAMPLE_PARAMS = ("output_size", "align_corners", "scales")


def _ops():
    return op_module("nn_vision")


def _upsample_rows(op_name, node):
    @derivative(op_name, node + "Backward0", saves=_UPSAMPLE_PARAMS)
    def _forward(ctx, grad):
        params = {k: getattr(ctx, k) for k in _UPSAMPLE_PARAMS}
        return _ops().upsample_backward(op_name, grad, ctx.shape(0), params)

    @derivative(op_name + "_backward", node + "BackwardBackward0", inputs=("grad_output",),
                saves=_UPSAMPLE_PARAMS)
    def _backward(ctx, grad):
        P = _ops()
        params = {k: getattr(ctx, k) for k in _UPSAMPLE_PARAMS}
        return P.structured.run(P.UPSAMPLE[op_name], (grad,), params)


_UPSAMPLE_NODES = {     # op -> PyTorch's node name stem
    "upsample_nearest1d": "UpsampleNearest1D", "upsample_nearest2d": "UpsampleNearest2D",
    "upsample_nearest3d": "UpsampleNearest3D",
    "_upsample_nearest_exact1d": "UpsampleNearestExact1D",
    "_upsample_nearest_exact2d": "UpsampleNearestExact2D",
    "_upsample_nearest_exact3d": "UpsampleNearestExact3D",
    "upsample_linear1d": "UpsampleLinear1D", "upsample_bilinear2d": "UpsampleBilinear2D",
    "upsample_trilinear3d": "UpsampleTrilinear3D", "upsample_bicubic2d": "UpsampleBicubic2D",
}
for _op, _node in _UPSAMPLE_NODES.items():
    _upsample_rows(_op, _node)

_GRID_PARAMS = ("interpolation_mode", "padding_mode", "align_corners")


def _grid_rows(n):
    @derivative(f"grid_sampler_{n}d", f"GridSampler{n}DBackward0", inputs=("input", "grid"),
                saves=("input", "grid") + _GRID_PARAMS)
    def _grid(ctx, grad):
        params = {k: getattr(ctx, k) for k in _GRID_PARAMS}
        grad_input, grad_grid = _ops().grid_sampler_backward(n, grad, ctx.input, ctx.grid,
                                                             params)
        return grad_input, grad_grid


for _n in (2, 3):
    _grid_rows(_n)
not_differentiable("grid_sampler_2d_backward", "grid_sampler_3d_backward")


@derivative("affine_grid_generator", "AffineGridGeneratorBackward0", inputs=("theta",),
            saves=("size", "align_corners"))
def _affine_grid(ctx, grad):
    # grid (N, P, k) = base (P, k+1) @ theta^T  =>  d theta (N, k, k+1) = grad^T @ base
    size = ctx.size
    k = len(size) - 2
    base = _ops().affine_base_grid(tuple(size[2:]), ctx.align_corners,
                                   _ops()._compute_dtype(grad.dtype.numpy_dtype))
    base = torch.tensor(base, dtype=grad.dtype, device=grad.device)
    flat = grad.reshape(size[0], -1, k)
    return torch.matmul(flat.transpose(1, 2), base)


@derivative("pixel_shuffle", "PixelShuffleBackward0", saves=("upscale_factor",))
def _pixel_shuffle(ctx, grad):
    return _ops().pixel_unshuffle(grad, ctx.upscale_factor)


@derivative("pixel_unshuffle", "PixelUnshuffleBackward0", saves=("downscale_factor",))
def _pixel_unshuffle(ctx, grad):
    return _ops().pixel_shuffle(grad, ctx.downscale_factor)


@derivative("channel_shuffle", "ChannelShuffleBackward0", saves=("groups",))
def _channel_shuffle(ctx, grad):
    # shuffling (groups, C/groups) is undone by shuffling with C/groups groups
    return _ops().channel_shuffle(grad, grad.shape[1] // ctx.groups)
