"""A pretend device for tests: storages that keep their bytes in a private host array, so
plugin-device code paths (fallbacks, map_location, copies) run without a GPU."""
from __future__ import annotations

import numpy as np

from reftorch._storage import Storage


class HostBackedStorage(Storage):
    """A 'device' storage that keeps its bytes in a private host array."""

    def __init__(self, size, dtype, device):
        super().__init__(dtype, device)
        self._data = np.zeros(size, dtype=dtype.numpy_dtype)

    def __len__(self):
        return len(self._data)

    def data_ptr(self):
        return self._data.ctypes.data

    def read(self, start, count):
        return self._data[start:start + count].copy()

    def write(self, start, values, non_blocking=False):
        self._data[start:start + len(values)] = values

    def resize_(self, size):
        self._data = np.resize(self._data, size)
        return self
