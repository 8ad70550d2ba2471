"""Storage: a flat typed buffer, and the registry of device backends that allocate them.

On `cpu` a storage owns a 1-D NumPy array. A plugin device registers a `DeviceBackend`
whose storages implement the same small interface (`read`, `write`, `data_ptr`).
"""
from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np

from . import _dtype as D
from ._device import CPU, as_device, device


class Storage:
    """A flat buffer of `size` elements of one dtype on one device.

    `_version` counts in-place writes; every tensor viewing this storage shares it, which is
    what autograd checks saved tensors against.
    """

    __slots__ = ("dtype", "device", "_version", "__weakref__")

    def __init__(self, dtype, device):
        self.dtype = dtype
        self.device = device
        self._version = 0

    # --- the interface a device backend implements -------------------------------------
    def __len__(self):
        raise NotImplementedError

    def data_ptr(self):
        raise NotImplementedError

    def read(self, start, count):
        """Copy `count` elements from `start` into a new 1-D host NumPy array."""
        raise NotImplementedError

    def write(self, start, values, non_blocking=False):
        """Copy a 1-D host NumPy array into the elements from `start`. With `non_blocking` a
        backend may return before the copy has run (keeping `values` alive until it has);
        one that copies at once ignores it."""
        raise NotImplementedError

    def resize_(self, size):
        raise NotImplementedError

    # --- shared behaviour ------------------------------------------------------------
    def size(self):
        return len(self)

    def nbytes(self):
        return len(self) * self.dtype.itemsize

    def element_size(self):
        return self.dtype.itemsize

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def tolist(self):
        return self.read(0, len(self)).tolist()

    # Sharing between processes only applies to host memory; device memory (cuda) counts as
    # shared already, as in PyTorch.
    def is_shared(self):
        return self.is_cuda

    def share_memory_(self):
        return self

    def __repr__(self):
        values = "\n".join(f" {v}" for v in self.tolist())
        header = f"[{type(self).__name__} of size {len(self)}]"
        return f"{values}\n{header}" if values else header


class CPUStorage(Storage):
    """Host storage: `array` is a 1-D NumPy array that tensors view with their strides.

    A shared storage keeps its elements in a shared-memory segment (`_segment`, see
    reftorch.multiprocessing._segment) that other processes map too; `array` then views it.
    """

    __slots__ = ("array", "_segment")

    def __init__(self, array, dtype=None, segment=None):
        self.dtype = dtype or D.from_numpy_dtype(array.dtype)
        self.device = CPU
        self._version = 0
        self.array = array
        self._segment = segment

    @classmethod
    def _new_shared(cls, size, dtype):
        """An uninitialised storage of `size` elements allocated in shared memory."""
        from .multiprocessing._segment import Segment
        segment = Segment.create(size * dtype.itemsize)
        return cls(segment.array(dtype.numpy_dtype, size), dtype, segment)

    def is_shared(self):
        return self._segment is not None

    def share_memory_(self):
        """Move the elements into a new shared-memory segment (no-op when already shared);
        tensors notice the new `array` and rebuild their NumPy views on it."""
        if self._segment is None:
            moved = CPUStorage._new_shared(len(self), self.dtype)
            moved.array[...] = self.array
            self.array, self._segment = moved.array, moved._segment
        return self

    def __len__(self):
        return self.array.shape[0]

    def data_ptr(self):
        return self.array.ctypes.data if self.array.size else 0

    def read(self, start, count):
        return self.array[start:start + count].copy()

    def write(self, start, values, non_blocking=False):
        self.array[start:start + len(values)] = values

    def resize_(self, size):
        if size != len(self) and self._segment is not None:
            # Other processes map the segment with its current size (as in PyTorch).
            raise RuntimeError("Trying to resize storage that is not resizable")
        if size != len(self):
            grown = np.zeros(size, dtype=self.array.dtype)
            keep = min(size, len(self))
            grown[:keep] = self.array[:keep]
            self.array = grown
        return self


_DOUBLE, _COMPLEX = struct.Struct("=d"), struct.Struct("=dd")


def exact_number_key(value):
    """A Python number as a key that tells apart what a dtype conversion does: 0.0 from
    -0.0, one NaN from another, True from 1 from 1.0."""
    if isinstance(value, float):     # subclasses too (np.float64): -0.0 == 0.0 as keys
        return _DOUBLE.pack(value)
    if isinstance(value, complex):
        return _COMPLEX.pack(value.real, value.imag)
    return (type(value), value)


class ScalarConstants:
    """Python-number operands as 0-dim tensors made once (a backend's `scalar_operand`): on
    cpu making one costs ~1 us, as much as a small op's kernel; on a GPU a host-to-device
    copy. Keyed by the number's exact value, the dtype and what else the backend names
    (`where`). One is handed out again only while nothing has written to it or made it
    require grad (a dispatch hook sees operands, and so could). At most `capacity` are kept,
    the oldest out first."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.entries = {}   # key -> (tensor, its storage, the storage's version)
        self._lock = threading.Lock()

    def get(self, value, dtype, device, where, make):
        """The constant for (value, dtype, *where), or make(value, dtype, device) remembered
        as it."""
        key = (exact_number_key(value), dtype) + where
        found = self.entries.get(key)
        if found is not None:
            tensor, storage, version = found
            if (tensor._storage is storage and storage._version == version
                    and not tensor.requires_grad):
                return tensor
        tensor = make(value, dtype, device)
        with self._lock:
            if len(self.entries) >= self.capacity:
                self.entries.pop(next(iter(self.entries)))   # the oldest
            self.entries[key] = (tensor, tensor._storage, tensor._storage._version)
        return tensor

    def clear(self):
        self.entries.clear()


class DeviceBackend:
    """What a plugin supplies to add a device type: allocation, copies, synchronisation."""

    type_name = "?"

    def allocate(self, size, dtype, device):
        """A new (uninitialised) storage of `size` elements."""
        raise NotImplementedError

    def synchronize(self, device=None):
        pass

    def device_count(self):
        return 1

    def current_device(self):
        return 0

    def scalar_operand(self, value, dtype, device, make):
        """A Python number as a 0-dim tensor of `dtype` on `device`, for an elementwise
        kernel to read; `make(value, dtype, device)` builds a new one. A backend may return
        one it made before instead (a host-to-device copy saved per op), as long as it never
        returns one whose value has changed."""
        return make(value, dtype, device)


class CPUBackend(DeviceBackend):
    type_name = "cpu"

    def __init__(self):
        self.constants = ScalarConstants(SCALAR_CONSTANTS)

    def allocate(self, size, dtype, device):
        return CPUStorage(np.empty(size, dtype=dtype.numpy_dtype), dtype)

    def scalar_operand(self, value, dtype, device, make):
        """`x * 0.5` in a loop makes its 0.5 once (see ScalarConstants)."""
        return self.constants.get(value, dtype, device, (), make)


SCALAR_CONSTANTS = 256  # Python-number operands kept as cpu tensors


_BACKENDS = {"cpu": CPUBackend()}


def register_backend(backend):
    """Make a device type available to reftorch (called by plugins)."""
    _BACKENDS[backend.type_name] = backend


def backend_for(dev):
    backend = _BACKENDS.get(dev._type)
    if backend is None:
        raise RuntimeError(
            f"no backend is registered for device type '{dev.type}': install and load the "
            f"plugin that provides it (see reftorch.plugins.loaded())")
    return backend


def normalize_device(dev):
    """`cuda` means the backend's current device, as in PyTorch; cpu never has an index."""
    dev = as_device(dev)
    if dev.type != "cpu" and dev.index is None:
        return device(dev.type, backend_for(dev).current_device())
    return dev


def allocate(size, dtype, dev=CPU):
    if dev is CPU or dev.type == "cpu":
        return CPUStorage(_host_array(size, dtype.numpy_dtype), dtype)
    return backend_for(dev).allocate(size, dtype, dev)


# New host storages of at least _ALIGN_MIN_BYTES start on a 64-byte boundary (a cache line,
# one AVX-512 vector), as PyTorch's CPU allocator aligns them. NumPy's malloc gives 16 bytes,
# and a vector loop writing a buffer at 16 or 32 mod 64 splits every store across two cache
# lines: a plugin's log_softmax backward on (4096, 1024) float32 took 3.3 ms into an aligned
# result, 6.6 ms into a misaligned one (2-core x86-64). In cache the split costs little
# (1-5% up to 1 MB, measured on softmax and its backward) and finding the address costs
# ~0.5 us, so storages under 512 KiB skip the extra step.
_ALIGN, _ALIGN_MIN_BYTES = 64, 1 << 19


def _host_array(size, np_dtype):
    """An uninitialised 1-D array of `size` elements, 64-byte aligned when it is large."""
    nbytes = size * np_dtype.itemsize
    if nbytes < _ALIGN_MIN_BYTES:
        return np.empty(size, dtype=np_dtype)
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    # The address through ctypes' buffer protocol: `raw.ctypes.data` builds a helper object
    # and costs ~2 us more per allocation (a third of a small op's allocation).
    start = -_address_of(_first_byte(raw)) % _ALIGN
    return np.ndarray(size, np_dtype, raw, start)


_first_byte, _address_of = ctypes.c_char.from_buffer, ctypes.addressof
