"""Random sampling that reproduces PyTorch's CPU streams for the same seed."""
from __future__ import annotations

__all__ = []
