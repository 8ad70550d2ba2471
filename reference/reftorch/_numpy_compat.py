"""Quietening NumPy's floating-point warnings cheaply.

Reference kernels produce IEEE results (inf, nan) without warnings, as PyTorch does.
`np.errstate` costs about 2 µs per use, more than a small add; setting NumPy's error-state
context variable directly costs a tenth of that. Hot paths use the variable itself:

    token = FP_STATE.set(IGNORE_ALL)
    try: ... finally: FP_STATE.reset(token)

If NumPy's internals ever move, FP_STATE falls back to entering and leaving an errstate.
"""
from __future__ import annotations

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar as FP_STATE, _make_extobj
    IGNORE_ALL = _make_extobj(all="ignore")
except ImportError:  # pragma: no cover - other NumPy layouts
    class _ErrstateAsVariable:
        """The ContextVar interface (set returns a token, reset takes it) over errstate."""

        @staticmethod
        def set(settings):
            state = np.errstate(**settings)
            state.__enter__()
            return state

        @staticmethod
        def reset(token):
            token.__exit__(None, None, None)

    FP_STATE, IGNORE_ALL = _ErrstateAsVariable(), {"all": "ignore"}

