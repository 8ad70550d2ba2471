"""Memory management: the caching allocator's statistics and `empty_cache`.

The numbers come from the cuda backend's allocator (reftorch-cuda's caching allocator rounds
every block up to 512 bytes; "allocated" counts the blocks live tensors hold, "reserved" all
memory taken from the driver, cached blocks included). Before CUDA is initialised every
statistic is 0 and nothing starts the driver, as in PyTorch.
"""
from __future__ import annotations

from . import _backend, _index

__all__ = ["empty_cache", "max_memory_allocated", "max_memory_cached", "max_memory_reserved",
           "mem_get_info", "memory_allocated", "memory_cached", "memory_reserved",
           "memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
           "reset_peak_memory_stats"]


def _device_index(device):
    return None if device is None else _index(device)


def memory_stats(device=None):
    """A dict of allocator statistics for `device` (default: the current device), with
    PyTorch's keys: 'allocated_bytes.all.current', 'allocated_bytes.all.peak',
    'reserved_bytes.all.current', 'reserved_bytes.all.peak', 'active_bytes.all.*',
    'requested_bytes.all.*', 'allocation.all.*', 'segment.all.*', 'num_alloc_retries',
    'num_ooms'. Empty before CUDA is initialised."""
    backend = _backend()
    stats = getattr(backend, "memory_stats", None)
    if stats is None or not backend.is_initialized():
        return {}
    return dict(stats(_device_index(device)))


def _stat(name, device):
    return memory_stats(device).get(name, 0)


def memory_allocated(device=None):
    """Bytes of device memory held by tensors on `device` (rounded block sizes)."""
    return _stat("allocated_bytes.all.current", device)


def max_memory_allocated(device=None):
    """Peak of `memory_allocated` since the start or the last reset."""
    return _stat("allocated_bytes.all.peak", device)


def memory_reserved(device=None):
    """Bytes of device memory the caching allocator holds (in use or cached)."""
    return _stat("reserved_bytes.all.current", device)


def max_memory_reserved(device=None):
    """Peak of `memory_reserved` since the start or the last reset."""
    return _stat("reserved_bytes.all.peak", device)


def memory_cached(device=None):
    """The old name of `memory_reserved`."""
    return memory_reserved(device)


def max_memory_cached(device=None):
    """The old name of `max_memory_reserved`."""
    return max_memory_reserved(device)


def _reset(device, names):
    backend = _backend()
    reset = getattr(backend, "reset_peak_memory_stats", None)
    if reset is not None and backend.is_initialized():
        reset(_device_index(device), names)


def reset_max_memory_allocated(device=None):
    """Restart the peak of `memory_allocated` from its current value."""
    _reset(device, ("allocated_bytes",))


def reset_max_memory_cached(device=None):
    """Restart the peak of `memory_reserved` from its current value."""
    _reset(device, ("reserved_bytes",))


def reset_peak_memory_stats(device=None):
    """Restart every peak statistic of `device` from its current value."""
    _reset(device, None)


def empty_cache():
    """Give the cached blocks no tensor uses back to the driver, on every device (visible in
    nvidia-smi; it does not make more memory available to reftorch itself)."""
    backend = _backend()
    empty = getattr(backend, "empty_cache", None)
    if empty is not None:
        empty()


def mem_get_info(device=None):
    """(free, total) bytes of `device` as the driver reports them (cuMemGetInfo)."""
    from . import _require
    backend = _require()
    return tuple(backend.mem_get_info(_device_index(device)))
