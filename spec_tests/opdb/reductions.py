"""Op-database entries: reductions (see core.py for the entry format)."""
from __future__ import annotations

from .core import OpInfo, Sample, TensorArg, DTypeArg, tensor  # noqa: F401

OPS = []
