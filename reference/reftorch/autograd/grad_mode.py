"""Grad mode: whether ops record history. Thread-local, as in PyTorch."""
from __future__ import annotations

import functools
import threading

class _GradState(threading.local):
    # The class attribute is every thread's starting mode (on, as in PyTorch). Reading it
    # through the class, rather than getattr(local, "enabled", True), spares threads that never
    # set a mode an AttributeError raised and caught on each call: ~1 us per recorded op.
    enabled = True


_state = _GradState()


def is_grad_enabled():
    return _state.enabled


def _set_enabled(mode):
    _state.enabled = bool(mode)


class _GradModeContext:
    """Base for the grad-mode context managers; each also works as a decorator."""
    mode = True

    def __enter__(self):
        self._previous = is_grad_enabled()
        _set_enabled(self.mode)

    def __exit__(self, *exc):
        _set_enabled(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    """Inside this block no op records history: results never require grad."""
    mode = False


class enable_grad(_GradModeContext):
    """Turn history recording back on inside a `no_grad` block."""
    mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off; takes effect at once, and as a context manager restores it."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._previous = is_grad_enabled()
        _set_enabled(self.mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _set_enabled(self._previous)
        return False

    def __call__(self, fn):
        _set_enabled(self._previous)
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper


class inference_mode(_GradModeContext):
    """Like `no_grad` (reftorch keeps no separate inference tensors)."""

    def __init__(self, mode=True):
        self.mode = not mode

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(not self.mode):
                return fn(*args, **kwargs)
        return wrapper
