"""Derivative rows: sparse COO tensors (work in progress)."""
from __future__ import annotations
