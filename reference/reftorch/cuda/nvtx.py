"""NVIDIA Tools Extension (NVTX) markers: `torch.cuda.nvtx`.

Ranges and marks appear in profilers such as Nsight Systems. They are emitted through
libnvToolsExt (loaded with ctypes on first use) when that library can be found; without it
only the bookkeeping below remains, so code that annotates itself runs anywhere, and the
return values are the same either way: push/pop ranges nest per thread (as NVTX's do) and
reftorch counts the depth itself rather than returning the library's value (which is a
negative "no tool attached" code when no profiler is listening).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import itertools
import threading

__all__ = ["mark", "range", "range_end", "range_pop", "range_push", "range_start"]

_LIBRARY_NAMES = ("libnvToolsExt.so.1", "libnvToolsExt.so", "nvToolsExt64_1.dll")
_library = None          # the loaded library, False when none could be loaded
_local = threading.local()
_range_ids = itertools.count(1)


def _lib():
    """libnvToolsExt, or None; looked for once."""
    global _library
    if _library is None:
        _library = False
        names = list(_LIBRARY_NAMES)
        found = ctypes.util.find_library("nvToolsExt")
        if found:
            names.insert(0, found)
        for name in names:
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                continue
            lib.nvtxRangeStartA.restype = ctypes.c_uint64
            lib.nvtxRangeEnd.argtypes = [ctypes.c_uint64]
            _library = lib
            break
    return _library or None


def _message(msg):
    if not isinstance(msg, str):
        raise TypeError(f"nvtx message must be a str, not {type(msg).__name__}")
    return msg.encode("ascii", errors="replace")


def _depth():
    return getattr(_local, "depth", 0)


def range_push(msg):
    """Start a nested range named `msg` on this thread; returns its zero-based depth."""
    text = _message(msg)
    lib = _lib()
    if lib is not None:
        lib.nvtxRangePushA(text)
    depth = _depth()
    _local.depth = depth + 1
    return depth


def range_pop():
    """End this thread's innermost range; returns the zero-based depth of the range ended,
    or -1 (NVTX's negative error value) when no range is open."""
    depth = _depth()
    if depth == 0:
        return -1
    lib = _lib()
    if lib is not None:
        lib.nvtxRangePop()
    _local.depth = depth - 1
    return depth - 1


def range_start(msg):
    """Start a range that need not nest (it may end on another thread); returns its id."""
    text = _message(msg)
    lib = _lib()
    if lib is not None:
        return int(lib.nvtxRangeStartA(text))
    return next(_range_ids)


def range_end(range_id):
    """End the range `range_start` returned `range_id` for."""
    lib = _lib()
    if lib is not None:
        lib.nvtxRangeEnd(range_id)


def mark(msg):
    """Mark an instantaneous event named `msg`."""
    text = _message(msg)
    lib = _lib()
    if lib is not None:
        lib.nvtxMarkA(text)


@contextlib.contextmanager
def range(msg, *args, **kwargs):
    """Context manager (and decorator) that pushes a range named `msg.format(*args,
    **kwargs)` for the duration of a block or call."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
