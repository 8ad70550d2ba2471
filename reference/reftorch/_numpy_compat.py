"""Quietening NumPy's floating-point warnings cheaply.

Reference kernels produce IEEE results (inf, nan) without warnings, as PyTorch does.
`np.errstate` costs about 2 µs per use, more than a small add; setting NumPy's error-state
context variable directly costs a tenth of that. Fall back to errstate if NumPy's internals
ever move.
"""
from __future__ import annotations

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    _IGNORE_ALL = _make_extobj(all="ignore")

    def ignore_fp_errors():
        return _extobj_contextvar.set(_IGNORE_ALL)

    def restore_fp_errors(token):
        _extobj_contextvar.reset(token)
except ImportError:  # pragma: no cover - other NumPy layouts
    def ignore_fp_errors():
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def restore_fp_errors(token):
        token.__exit__(None, None, None)
