"""torch.nn.functional: distance functions (the torch-level ops of the same names)."""
from __future__ import annotations

from ..._ops.nn_activation import cosine_similarity, pairwise_distance, pdist

__all__ = ["pairwise_distance", "pdist", "cosine_similarity"]
