"""reftorch.cuda: the `torch.cuda` functions, answered by the `cuda` device backend.

The backend comes from a plugin (reftorch-cuda registers it). Without one, everything answers
as PyTorch built without CUDA does: `is_available()` is False, `device_count()` is 0, and the
calls that need a device raise. With the plugin but no usable GPU, the plugin's backend raises
its own message ("Found no NVIDIA driver on your system...", "No CUDA GPUs are available").
Nothing here starts the driver except the calls that need it, as in PyTorch.
"""
from __future__ import annotations

from .. import _storage
from .._device import device as _Device

__all__ = ["OutOfMemoryError", "current_device", "device", "device_count", "device_of",
           "get_device_capability", "get_device_name", "get_device_properties", "init",
           "is_available", "is_initialized", "set_device", "synchronize"]


class OutOfMemoryError(RuntimeError):
    """The device has no memory left for an allocation, even after the caching allocator
    gave its unused blocks back (PyTorch's torch.cuda.OutOfMemoryError, a RuntimeError)."""


class CUDANotAvailableError(RuntimeError, AssertionError):
    """No cuda backend is registered. PyTorch raises AssertionError("Torch not compiled with
    CUDA enabled") here; this is both that and a RuntimeError."""


def _backend():
    return _storage._BACKENDS.get("cuda")


def _require():
    backend = _backend()
    if backend is None:
        raise CUDANotAvailableError(
            "reftorch has no CUDA backend: the reftorch-cuda plugin is not installed or not "
            "loaded (see reftorch.plugins.loaded() and reftorch.plugins.failed())")
    return backend


def _index(dev, optional=True):
    """A device index from an int, 'cuda:N' string or device; None (or an index-less cuda
    device) means the current device when `optional`."""
    if isinstance(dev, str):
        dev = _Device(dev)
    if isinstance(dev, _Device):
        if dev.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {dev}")
        dev = dev.index
    if dev is None:
        if not optional:
            raise ValueError("Expected a cuda device with a specified index or an integer, "
                             "but got: None")
        return current_device()
    if isinstance(dev, bool) or not isinstance(dev, int):
        raise ValueError(f"Expected a cuda device, but got: {dev!r}")
    return dev


def is_available():
    """Whether a cuda backend is registered and sees at least one GPU. Never raises."""
    backend = _backend()
    if backend is None:
        return False
    try:
        return backend.device_count() > 0
    except RuntimeError:
        return False


def device_count():
    """Number of GPUs (0 without a backend or a driver)."""
    backend = _backend()
    if backend is None:
        return 0
    try:
        return backend.device_count()
    except RuntimeError:
        return 0


def is_initialized():
    """Whether the backend has started the driver."""
    backend = _backend()
    initialized = getattr(backend, "is_initialized", None)
    return bool(initialized()) if initialized is not None else False


def init():
    """Start the driver now rather than at the first cuda call (raises if impossible)."""
    backend = _require()
    start = getattr(backend, "init", None)
    if start is not None:
        start()
    else:
        backend.device_count()


def current_device():
    """Index of the current GPU of this thread."""
    return _require().current_device()


def set_device(device):
    """Make `device` current (an int, 'cuda:N' or a device); a negative index does nothing."""
    backend = _require()
    index = _index(device, optional=False)
    if index < 0:
        return
    setter = getattr(backend, "set_device", None)
    if setter is None:
        if index != backend.current_device():
            raise RuntimeError(f"the cuda backend cannot switch to device {index}")
        return
    setter(index)


def synchronize(device=None):
    """Wait for all work queued on `device` (default: the current GPU) to finish."""
    backend = _require()
    index = _index(device)
    backend.synchronize(_Device("cuda", index))


def get_device_name(device=None):
    backend = _require()
    index = _index(device)
    name = getattr(backend, "get_device_name", None)
    if name is None:
        return "cuda"
    return name(index)


def get_device_properties(device=None):
    """The device's properties: `name`, `major`, `minor`, `total_memory` (bytes) and
    `multi_processor_count`."""
    backend = _require()
    properties = getattr(backend, "get_device_properties", None)
    if properties is None:
        raise RuntimeError("the cuda backend does not report device properties")
    return properties(_index(device))


def get_device_capability(device=None):
    """(major, minor) compute capability of `device`."""
    backend = _require()
    index = _index(device)
    capability = getattr(backend, "get_device_capability", None)
    if capability is None:
        raise RuntimeError("the cuda backend does not report compute capability")
    return tuple(capability(index))


class device:
    """Context manager that makes a GPU current inside a `with` block and restores the
    previous one after. `device(None)` and negative indices change nothing."""

    def __init__(self, device):
        if device is None or (isinstance(device, int) and not isinstance(device, bool)):
            self.idx = -1 if device is None else device
        else:
            dev = _Device(device) if isinstance(device, str) else device
            if not isinstance(dev, _Device) or dev.type != "cuda":
                raise ValueError(f"Expected a cuda device, but got: {device}")
            self.idx = -1 if dev.index is None else dev.index
        self.prev_idx = -1

    def __enter__(self):
        if self.idx < 0:
            return self
        self.prev_idx = current_device()
        if self.prev_idx != self.idx:
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of `obj` (a tensor or storage) current inside
    the block; for an object not on a GPU it changes nothing."""

    def __init__(self, obj):
        on_cuda = obj.device.type == "cuda"
        super().__init__(obj.device.index if on_cuda else -1)


# The rest of the torch.cuda namespace, one module per documented section.
from . import comm, nvtx  # noqa: E402
from .memory import (empty_cache, max_memory_allocated, max_memory_cached,  # noqa: E402
                     max_memory_reserved, mem_get_info, memory_allocated, memory_cached,
                     memory_reserved, memory_stats, reset_max_memory_allocated,
                     reset_max_memory_cached, reset_peak_memory_stats)
from .random import (default_generators, get_rng_state, get_rng_state_all,  # noqa: E402
                     initial_seed, manual_seed, manual_seed_all, seed, seed_all,
                     set_rng_state, set_rng_state_all)
from .streams import (Event, Stream, current_stream, default_stream, set_stream,  # noqa: E402
                      stream)
from .._legacy import CUDA_TENSOR_TYPES as _TYPES  # noqa: E402
from .. import _dtype as _D  # noqa: E402

# Legacy tensor types (torch.cuda.FloatTensor, ...): constructors and isinstance tests for
# (dtype, cuda); the tensors they make are ordinary tensors on the current device.
FloatTensor = _TYPES[_D.float32]
DoubleTensor = _TYPES[_D.float64]
HalfTensor = _TYPES[_D.float16]
BFloat16Tensor = _TYPES[_D.bfloat16]
ByteTensor = _TYPES[_D.uint8]
CharTensor = _TYPES[_D.int8]
ShortTensor = _TYPES[_D.int16]
IntTensor = _TYPES[_D.int32]
LongTensor = _TYPES[_D.int64]
BoolTensor = _TYPES[_D.bool]

__all__ += ["BFloat16Tensor", "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor",
            "Event", "FloatTensor", "HalfTensor", "IntTensor", "LongTensor", "ShortTensor",
            "Stream", "comm", "current_stream", "default_generators", "default_stream",
            "empty_cache", "get_rng_state", "get_rng_state_all", "initial_seed",
            "manual_seed", "manual_seed_all", "max_memory_allocated", "max_memory_cached",
            "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_cached",
            "memory_reserved", "memory_stats", "nvtx", "reset_max_memory_allocated",
            "reset_max_memory_cached", "reset_peak_memory_stats", "seed", "seed_all",
            "set_rng_state", "set_rng_state_all", "set_stream", "stream"]
