"""Derivative rows: neural-network ops (pooling).

Max-type pools send each output's gradient to the input position its index names: max
pooling through its declared backward op (`max_pool2d_with_indices_backward`, which a plugin
can serve in one pass), adaptive and fractional max pooling through a `scatter_add` into the
flattened input planes; either way the double backward is a gather. Average pools are linear: their backward is a structured op
of its own (`avg_pool2d_backward`, ...) whose derivative is the forward pool again. Max
unpooling's gradient gathers the output gradient at the indices.
"""
from __future__ import annotations

import math

from ._table import derivative, op_module, torch


def _planes(t, spatial_dims):
    """t as (planes, elements per plane) over its last `spatial_dims` dims."""
    return t.reshape(-1, math.prod(t.shape[t.dim() - spatial_dims:]))


def scatter_to_input(grad, indices, input_shape, spatial_dims):
    """grad_input[p, indices[p, o]] += grad[p, o] in each plane p."""
    flat_shape = (math.prod(input_shape[:len(input_shape) - spatial_dims]),
                  math.prod(input_shape[len(input_shape) - spatial_dims:]))
    zeros = torch.zeros(flat_shape, dtype=grad.dtype, device=grad.device)
    return zeros.scatter_add(1, _planes(indices, spatial_dims),
                             _planes(grad, spatial_dims)).reshape(input_shape)


def _max_rows(n):
    @derivative(f"max_pool{n}d_with_indices", f"MaxPool{n}DWithIndicesBackward0",
                saves=("result1",), outputs=("result0", "result1"),
                nondifferentiable_outputs=(1,))
    def _max(ctx, grad, _indices_grad=None):
        return _ops().max_pool_backward(n, grad, ctx.result1, ctx.shape(0))

    @derivative(f"max_pool{n}d_with_indices_backward",
                f"MaxPool{n}DWithIndicesBackwardBackward0", inputs=("grad_output", "indices"),
                saves=("indices",))
    def _max_backward(ctx, grad):
        # linear in grad_output: the adjoint of scattering to the indices is gathering there
        indices = ctx.indices
        return _planes(grad, n).gather(1, _planes(indices, n)).reshape(indices.shape), None

    @derivative(f"adaptive_max_pool{n}d", f"AdaptiveMaxPool{n}DBackward0", saves=("result1",),
                outputs=("result0", "result1"), nondifferentiable_outputs=(1,))
    def _adaptive_max(ctx, grad, _indices_grad=None):
        return scatter_to_input(grad, ctx.result1, ctx.shape(0), n)

    @derivative(f"fractional_max_pool{n}d", f"FractionalMaxPool{n}DBackward0",
                inputs=("self", "random_samples"), saves=("result1",),
                outputs=("result0", "result1"), nondifferentiable_outputs=(1,))
    def _fractional(ctx, grad, _indices_grad=None):
        return scatter_to_input(grad, ctx.result1, ctx.shape(0), n), None

    @derivative(f"max_unpool{n}d", f"MaxUnpool{n}DBackward0", inputs=("self", "indices"),
                saves=("indices",))
    def _unpool(ctx, grad):
        indices = ctx.indices
        picked = _planes(grad, n).gather(1, _planes(indices, n))
        return picked.reshape(indices.shape), None


_AVG_PARAMS = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
               "divisor_override")


def _ops():
    return op_module("nn_pooling")


def _avg_rows(n):
    @derivative(f"avg_pool{n}d", f"AvgPool{n}DBackward0", saves=_AVG_PARAMS)
    def _avg(ctx, grad):
        params = {k: getattr(ctx, k) for k in _AVG_PARAMS}
        return _ops().avg_pool_backward(n, grad, ctx.shape(0), params)

    @derivative(f"avg_pool{n}d_backward", f"AvgPool{n}DBackwardBackward0",
                inputs=("grad_output",), saves=_AVG_PARAMS)
    def _avg_backward(ctx, grad):
        params = {k: getattr(ctx, k) for k in _AVG_PARAMS}
        P = _ops()
        return P.structured.run(P.AVG_POOL[n], (grad,), params)

    @derivative(f"adaptive_avg_pool{n}d", f"AdaptiveAvgPool{n}DBackward0",
                saves=("output_size",))
    def _adaptive(ctx, grad):
        return _ops().adaptive_avg_pool_backward(n, grad, ctx.shape(0), ctx.output_size)

    @derivative(f"adaptive_avg_pool{n}d_backward", f"AdaptiveAvgPool{n}DBackwardBackward0",
                inputs=("grad_output",), saves=("output_size",))
    def _adaptive_backward(ctx, grad):
        P = _ops()
        return P.structured.run(P.ADAPTIVE_AVG[n], (grad,), {"output_size": ctx.output_size})


for _n in (2, 3):
    _max_rows(_n)
    _avg_rows(_n)
