"""Derivative rows: random sampling."""
from __future__ import annotations

from ._table import derivative, not_differentiable, torch


# An in-place sampler overwrites its tensor: nothing flows back to the old values.
def _sampler_row(op, node):
    @derivative(op, node, inputs=("self",))
    def _(ctx, grad):
        return torch.zeros_like(grad)


for _op, _node in (("uniform_", "UniformBackward0"), ("normal_", "NormalBackward0"),
                   ("exponential_", "ExponentialBackward0"),
                   ("geometric_", "GeometricBackward0"), ("cauchy_", "CauchyBackward0"),
                   ("log_normal_", "LogNormalBackward0")):
    _sampler_row(_op, _node)


@derivative("random_", lambda inputs, params: f"RandomBackward{params.get('form', 0)}")
def _random(ctx, grad):
    return torch.zeros_like(grad)


@derivative("bernoulli_", lambda inputs, params: "BernoulliBackward1"
            if params.get("p_tensor") else "BernoulliBackward2")
def _bernoulli_inplace(ctx, grad):
    return torch.zeros_like(grad)


@derivative("bernoulli", "BernoulliBackward0")
def _bernoulli(ctx, grad):
    return torch.zeros_like(grad)


def _normal_node(inputs, params):
    mean_is_tensor, std_is_tensor = (hasattr(x, "_shape") for x in inputs)
    return "NormalBackward" + ("3" if mean_is_tensor and std_is_tensor else
                               "1" if mean_is_tensor else "2")


# PyTorch treats the samples as constants of mean and std (no reparameterization): zero
# gradients. Write mean + std * randn(...) for the reparameterized form.
@derivative("normal", _normal_node, inputs=("mean", "std"))
def _normal(ctx, grad):
    return tuple(torch.zeros(ctx.shape(i), dtype=ctx.dtype(i)) if needed else None
                 for i, needed in enumerate(ctx.needs_input_grad))


not_differentiable("randperm")
