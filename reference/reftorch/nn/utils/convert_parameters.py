"""Parameters as one flat vector and back (for optimizers that work on vectors)."""
from __future__ import annotations

from ..._tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    import reftorch
    return reftorch.cat([p.view(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Make each parameter's values the next slice of `vec` (the parameters keep their
    identity; their data is replaced)."""
    if not isinstance(vec, Tensor):
        from ..modules.module import typename
        raise TypeError(f"expected torch.Tensor, but got: {typename(vec)}")
    start = 0
    for param in parameters:
        count = param.numel()
        param.data = vec[start:start + count].view_as(param).data
        start += count
