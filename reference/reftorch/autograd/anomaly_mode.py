"""Anomaly detection: remember where each node was made, and stop backward on NaN gradients.

With anomaly mode on, every recorded node keeps the stack of the forward call that made it;
when its backward fails or returns NaN, that stack is printed, so the error points at the
forward line that produced the bad value.
"""
from __future__ import annotations

import warnings

_enabled = False
_check_nan = True


def is_anomaly_enabled():
    return _enabled


def is_anomaly_check_nan_enabled():
    return _check_nan


class detect_anomaly:
    """Context manager (and decorator) turning anomaly detection on for its block."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self):
        global _enabled, _check_nan
        self._previous = (_enabled, _check_nan)
        _enabled, _check_nan = True, self.check_nan

    def __exit__(self, *exc):
        global _enabled, _check_nan
        _enabled, _check_nan = self._previous
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off; works as a function call or a context manager."""

    def __init__(self, mode, check_nan=True):
        global _enabled, _check_nan
        self._previous = (_enabled, _check_nan)
        _enabled, _check_nan = bool(mode), check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        global _enabled, _check_nan
        _enabled, _check_nan = self._previous
        return False


def report_forward_trace(node):
    """Warn with the forward traceback recorded for `node` (as PyTorch prints it)."""
    trace = node.metadata.get("traceback_")
    if trace is None:
        message = ("Error detected in " + node.name() + ". No forward pass information "
                   "available. Enable detect anomaly during forward pass for more information.")
    else:
        message = (f"Error detected in {node.name()}. Traceback of forward call that caused "
                   f"the error:\n{trace}")
    warnings.warn(message, UserWarning, stacklevel=2)
