"""Shared-memory segments: the memory of shared CPU storages.

A segment is a file in a RAM-backed file system (/dev/shm on Linux) mapped with MAP_SHARED, so
every process that maps it sees the same bytes. How another process gets hold of the file
depends on the sharing strategy (see reftorch.multiprocessing):

* ``file_descriptor``: the file is unlinked right after creation; only open descriptors keep it
  alive, and a descriptor travels to the receiver over a Unix socket (multiprocessing's
  ``DupFd``). The memory is freed when the last descriptor and mapping are gone.
* ``file_system``: the file keeps a name. Every message gets its own hard link to the file and
  the receiver takes that name over; each process unlinks the name it owns when its segment is
  garbage collected. A message that is never received leaks its name (as in PyTorch).
"""
from __future__ import annotations

import itertools
import mmap
import os
import tempfile
import weakref

import numpy as np

_SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_counter = itertools.count()


def _fresh_path():
    return os.path.join(_SHM_DIR, f"reftorch_{os.getpid()}_{next(_counter)}_{os.urandom(4).hex()}")


def _release(fd, name, owner_pid):
    os.close(fd)
    # A forked child inherits the segment object but not the ownership of its name.
    if name is not None and os.getpid() == owner_pid:
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


class Segment:
    """An open, mapped shared-memory file of `nbytes` bytes.

    `name` is the path this process owns (file_system strategy) or None (only the descriptor
    keeps the file alive). The mapping stays valid for as long as NumPy arrays view it, even
    after the segment object (and its descriptor) is gone.
    """

    def __init__(self, fd, nbytes, name=None):
        self.fd = fd
        self.nbytes = nbytes
        self.name = name
        # mmap cannot map 0 bytes; an empty storage maps one unused byte.
        self.mmap = mmap.mmap(fd, max(nbytes, 1))
        weakref.finalize(self, _release, fd, name, os.getpid())

    @classmethod
    def create(cls, nbytes):
        from . import get_sharing_strategy
        path = _fresh_path()
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, max(nbytes, 1))
        except OSError:
            os.close(fd)
            os.unlink(path)
            raise
        if get_sharing_strategy() == "file_descriptor":
            os.unlink(path)
            path = None
        return cls(fd, nbytes, path)

    def array(self, numpy_dtype, count):
        """A 1-D NumPy array of `count` elements viewing the segment."""
        return np.frombuffer(self.mmap, dtype=numpy_dtype, count=count)

    def link_for_message(self):
        """A new name for the file, handed to exactly one receiver (file_system strategy)."""
        path = _fresh_path()
        os.link(self.name, path)
        return path

    @classmethod
    def open_name(cls, path, nbytes):
        """Map the file a message named; this process owns (and later unlinks) the name."""
        fd = os.open(path, os.O_RDWR)
        return cls(fd, nbytes, path)
