"""Page-locked ("pinned") host memory for `Tensor.pin_memory()`.

The GPU copies pinned memory by DMA without a staging copy, so a `non_blocking` copy from it
really returns at once and overlaps with the host. The memory comes from cuMemHostAlloc with
CU_MEMHOSTALLOC_PORTABLE (pinned for every device's context) and backs an ordinary cpu
storage: NumPy views it through `PinnedBuffer`, which frees it once no array uses it. As for
streams, the finalizer only queues the address and the next pinned allocation (or
`release`) makes the driver call.
"""
from __future__ import annotations

import collections
import weakref

import numpy as np


class PinnedBuffer:
    """`nbytes` of pinned memory at `ptr`, viewable by NumPy (np.asarray keeps it alive)."""

    def __init__(self, ptr, nbytes, on_free):
        self.ptr, self.nbytes = ptr, nbytes
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                    "data": (ptr, False), "version": 3}
        finalizer = weakref.finalize(self, on_free, ptr)
        finalizer.atexit = False


class PinnedMemory:
    """Pinned allocations of one started `Driver`."""

    def __init__(self, driver):
        self.driver = driver
        self._dead = collections.deque()   # addresses whose buffers died, to free
        self.live = 0                      # buffers allocated and not yet freed

    def array(self, size, dtype):
        """A new 1-D array of `size` elements of NumPy `dtype` in pinned memory."""
        self.release()
        nbytes = max(1, size * dtype.itemsize)
        cu = self.driver.cu
        self.driver.activate(0)   # any context: the memory is portable
        ptr = int(self.driver.check(
            cu.cuMemHostAlloc(nbytes, int(cu.CU_MEMHOSTALLOC_PORTABLE)), "cuMemHostAlloc"))
        self.live += 1
        buffer = PinnedBuffer(ptr, nbytes, self._dead.append)
        return np.asarray(buffer)[:size * dtype.itemsize].view(dtype)

    def release(self):
        """Free the pinned memory no array uses any more."""
        while self._dead:
            ptr = self._dead.popleft()
            self.driver.activate(0)
            self.driver.check(self.driver.cu.cuMemFreeHost(ptr), "cuMemFreeHost")
            self.live -= 1


def is_pinned(array):
    """Whether a NumPy array views pinned memory from `PinnedMemory.array`."""
    base = array
    while base is not None:
        if isinstance(base, PinnedBuffer):
            return True
        base = getattr(base, "base", None)
    return False
