"""torch.set_num_threads / get_num_threads and the inter-op variants.

Reference kernels are single NumPy calls, so reftorch itself runs no thread pool: these
functions validate and store the settings exactly as PyTorch does, and report them back.
Plugins with their own parallel kernels (the CPU plugin) are told each new intra-op count
(`Registrar.on_set_num_threads`), so one setting governs every kernel.

PyTorch's rules, kept here:
- the single positional argument must be an integer (bool and float are rejected) and
  positive; every bad value raises RuntimeError;
- the intra-op default is the number of CPUs this process may run on, lowered by
  OMP_NUM_THREADS / MKL_NUM_THREADS when they ask for fewer;
- the inter-op pool size can be set only once, before any inter-op work: a second call raises.
"""
from __future__ import annotations

import operator
import os

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads"]


def _available_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not every platform has sched_getaffinity
        return os.cpu_count() or 1


def _threads_from_environment():
    """OMP_NUM_THREADS (or MKL_NUM_THREADS) when set, but never more than the CPUs available:
    PyTorch too caps the environment's request at the core count."""
    cpus = _available_cpus()
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return min(int(value), cpus)
    return cpus


_intra_op_threads = None     # None until first asked for: then the default above
_listeners = []              # plugins' callables, told each new intra-op count
_interop_threads = None
_interop_was_set = False


def _thread_count(n, function_name):
    """`n` as a Python int, validated like PyTorch: an integer (NumPy integers too, bool
    not), then positive; every bad value is a RuntimeError."""
    try:
        if isinstance(n, bool):
            raise TypeError
        value = operator.index(n)
    except TypeError:
        raise RuntimeError(f"{function_name} expects an int, but got {type(n).__name__}") \
            from None
    if value <= 0:
        raise RuntimeError(f"{function_name} expects a positive integer")
    return value


def set_num_threads(n, /):
    """Set the number of threads used for intra-op parallelism on CPU."""
    global _intra_op_threads
    _intra_op_threads = _thread_count(n, "set_num_threads")
    for listener in list(_listeners):
        listener(_intra_op_threads)


def follow(listener):
    """Call listener(n) on every set_num_threads(n) from now on, and at once if a count was
    already set (a plugin's own thread pool follows the setting)."""
    _listeners.append(listener)
    if _intra_op_threads is not None:
        listener(_intra_op_threads)


def unfollow(listener):
    _listeners.remove(listener)


def get_num_threads():
    """The number of threads used for intra-op parallelism on CPU."""
    global _intra_op_threads
    if _intra_op_threads is None:
        _intra_op_threads = _threads_from_environment()
    return _intra_op_threads


def set_num_interop_threads(n, /):
    """Set the number of threads used for inter-op parallelism; allowed once, before any
    inter-op work (reftorch runs none, so only a second call is refused, as in PyTorch)."""
    global _interop_threads, _interop_was_set
    count = _thread_count(n, "set_num_interop_threads")
    if _interop_was_set:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work "
                           "has started or set_num_interop_threads called")
    _interop_threads = count
    _interop_was_set = True


def get_num_interop_threads():
    """The number of threads used for inter-op parallelism on CPU."""
    global _interop_threads
    if _interop_threads is None:
        _interop_threads = _available_cpus()
    return _interop_threads
