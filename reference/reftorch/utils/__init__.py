"""reftorch.utils: helpers around the core (checkpointing)."""
from . import checkpoint

__all__ = ["checkpoint"]
