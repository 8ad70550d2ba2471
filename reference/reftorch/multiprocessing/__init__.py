"""reftorch.multiprocessing: Python's multiprocessing, with tensors shared instead of copied.

Everything of `multiprocessing` is re-exported. Importing this module registers reducers (see
`reductions`) so that tensors put on a Queue, sent through a Pipe or passed to a spawned
process move to shared memory and the receiver maps the same memory. `spawn` runs a function
in several processes and re-raises a child's exception in the parent.
"""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403

from .reductions import init_reductions
from .spawn import (ProcessContext, ProcessException, ProcessExitedException,
                    ProcessRaisedException, SpawnContext, spawn, start_processes)

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies",
           "spawn", "start_processes", "SpawnContext", "ProcessContext",
           "ProcessRaisedException", "ProcessExitedException"] + multiprocessing.__all__

# 'file_descriptor': segments are reached through descriptors passed over sockets (the
# default, nothing is left behind); 'file_system': through file names (see _segment).
_all_sharing_strategies = {"file_descriptor", "file_system"}
_sharing_strategy = "file_descriptor"


def set_sharing_strategy(new_strategy):
    """Choose how shared CPU tensors are handed to other processes."""
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(f"invalid sharing strategy '{new_strategy}', expected one of "
                             f"{_all_sharing_strategies}")
    _sharing_strategy = new_strategy


def get_sharing_strategy():
    return _sharing_strategy


def get_all_sharing_strategies():
    return set(_all_sharing_strategies)


init_reductions()
