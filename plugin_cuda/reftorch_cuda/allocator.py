"""The caching allocator: device memory is taken from the driver once and reused.

cuMemAlloc and cuMemFree are slow (cuMemFree waits for the whole device), so, as PyTorch's
allocator does, a freed storage gives its block back to a cache and the next allocation of a
similar size on the same device and stream takes it from there:

  * sizes are rounded up to 512 bytes; a cached block serves a request when it is at least as
    large and less than twice as large (a big block is not wasted on a small tensor). Blocks are
    not split or merged: simpler than PyTorch's segments, at the cost of some fragmentation;
  * a block belongs to the stream it was allocated on, and is reused only by allocations on
    that stream: work queued there on the old tensor runs before work queued later on the new
    one, so no wait is needed. A block also used on other streams (`record_stream`) goes back
    to the cache only once an event recorded on each of those streams has completed;
  * `empty_cache()` returns the unused cached blocks to the driver; when cuMemAlloc runs out of
    memory, the device's cache is emptied and the allocation tried once more before
    `OutOfMemoryError` (a RuntimeError) is raised.

Storages are freed by finalizers, which may run inside any allocation (the garbage collector
runs when it likes): `free` only appends to a queue, and every other entry point first takes
the queued blocks back under the lock (an allocation that finds exactly one queued block of
its size and stream takes that block itself).
"""
from __future__ import annotations

import bisect
import collections
import threading

ROUND = 512                 # every block is a multiple of this many bytes
# What memory_stats reports as '<name>.all.current' and '.peak'. Every allocated block is
# active here (no block is split), so active_bytes is reported as allocated_bytes.
STAT_NAMES = ("allocated_bytes", "reserved_bytes", "requested_bytes", "allocation",
              "segment")


class Block:
    """`size` bytes of device memory at `ptr` on device `index`, allocated on `stream` (a
    StreamHandle). `requested` is what the live storage asked for; `streams_used` the other
    streams recorded on it."""

    __slots__ = ("index", "ptr", "size", "stream", "requested", "streams_used")

    def __init__(self, index, ptr, size, stream):
        self.index, self.ptr, self.size, self.stream = index, ptr, size, stream
        self.requested = 0
        self.streams_used = set()



class DeviceCache:
    """One device's cached blocks (per stream, sorted), blocks waiting on events, and the
    statistics: current values and their peaks since the last reset, by name."""

    def __init__(self):
        # StreamHandle -> [(size, ptr, Block)] sorted by size then address: tuples compare
        # in C, which keeps the search and insertion off the Python stack (a small op's
        # allocation is on its hot path).
        self.free = collections.defaultdict(list)
        self.waiting = []                           # (events, Block) freed, still in use
        self.current = dict.fromkeys(STAT_NAMES, 0)
        self.peak = dict.fromkeys(STAT_NAMES, 0)
        self.counts = {"num_alloc_retries": 0, "num_ooms": 0}

    def add(self, changes):
        """Apply (name, amount) changes, raising peaks (one call per event: it is hot)."""
        current, peak = self.current, self.peak
        for name, amount in changes:
            value = current[name] = current[name] + amount
            if value > peak[name]:
                peak[name] = value

    def handed_out(self, size, requested):
        """Count a block given to a storage (the hot path: written out, not through `add`)."""
        current, peak = self.current, self.peak
        value = current["allocated_bytes"] = current["allocated_bytes"] + size
        if value > peak["allocated_bytes"]:
            peak["allocated_bytes"] = value
        value = current["requested_bytes"] = current["requested_bytes"] + requested
        if value > peak["requested_bytes"]:
            peak["requested_bytes"] = value
        value = current["allocation"] = current["allocation"] + 1
        if value > peak["allocation"]:
            peak["allocation"] = value

    def cache(self, block):
        bisect.insort(self.free[block.stream], (block.size, block.ptr, block))

    def cached_blocks(self):
        return [entry[2] for entries in self.free.values() for entry in entries]


class Allocator:
    """Caching allocator over a started `Driver` (all devices)."""

    def __init__(self, driver):
        self.driver = driver
        self._devices = collections.defaultdict(DeviceCache)
        self._returned = collections.deque()   # blocks freed by finalizers, not yet cached
        self._waiting_blocks = 0               # blocks in the caches' `waiting` lists
        self._lock = threading.RLock()

    # --- allocation -----------------------------------------------------------------------
    def malloc(self, index, nbytes, stream):
        """A block of at least `nbytes` (> 0) on device `index` for use on `stream`."""
        size = max(ROUND, -(-nbytes // ROUND) * ROUND)   # rounded up to ROUND bytes
        with self._lock:
            returned = self._returned
            if len(returned) == 1 and not self._waiting_blocks:
                # A loop of small ops frees the last result and asks for one of the same size
                # on the same stream: hand that block straight back (a cached block the
                # general path could take instead has the same size), skipping its trip
                # through the sorted cache (~1 us of Python per op).
                block = returned[0]
                if (block.size == size and block.stream is stream and block.index == index
                        and not block.streams_used):
                    returned.popleft()
                    self._handed_back(block, nbytes)
                    return block
            if returned or self._waiting_blocks:
                self._take_back()
            cache = self._devices[index]
            block = self._from_cache(cache, size, stream) or self._new_block(cache, index, size,
                                                                             nbytes, stream)
            block.requested = nbytes
            cache.handed_out(block.size, nbytes)
            return block

    def _handed_back(self, block, nbytes):
        """Count a freed block given out again at once: allocated_bytes and allocation go
        down and back up to where they were (no new peak); requested_bytes changes by the
        difference of the two requests."""
        cache = self._devices[block.index]
        current, peak = cache.current, cache.peak
        value = current["requested_bytes"] = current["requested_bytes"] + nbytes - block.requested
        if value > peak["requested_bytes"]:
            peak["requested_bytes"] = value
        block.requested = nbytes

    @staticmethod
    def _from_cache(cache, size, stream):
        entries = cache.free.get(stream)
        if not entries:
            return None
        at = bisect.bisect_left(entries, (size,))   # the first entry of at least `size`
        if at == len(entries) or entries[at][0] >= 2 * size:
            return None
        return entries.pop(at)[2]

    def _new_block(self, cache, index, size, nbytes, stream):
        ptr = self.driver.try_alloc(index, size)
        if ptr is None:  # out of memory: give the cached blocks back and try once more
            cache.counts["num_alloc_retries"] += 1
            self._release_cached(index, cache)
            ptr = self.driver.try_alloc(index, size)
        if ptr is None:
            cache.counts["num_ooms"] += 1
            raise self._out_of_memory(index, cache, nbytes)
        cache.add((("reserved_bytes", size), ("segment", 1)))
        return Block(index, ptr, size, stream)

    def _out_of_memory(self, index, cache, nbytes):
        from reftorch.cuda import OutOfMemoryError
        free, total = self.driver.mem_get_info(index)
        allocated = cache.current["allocated_bytes"]
        reserved = cache.current["reserved_bytes"]
        return OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {format_size(nbytes)}. GPU {index} has a "
            f"total capacity of {format_size(total)} of which {format_size(free)} is free. Of "
            f"the allocated memory {format_size(allocated)} is allocated by reftorch, and "
            f"{format_size(reserved - allocated)} is reserved by reftorch but unallocated.")

    # --- freeing --------------------------------------------------------------------------
    def free(self, block):
        """Give a block back (from a storage's finalizer: no lock, no driver call here)."""
        self._returned.append(block)

    def record_stream(self, block, stream):
        """Note that `stream` uses the block too (Tensor.record_stream)."""
        if stream is not block.stream:
            with self._lock:
                block.streams_used.add(stream)

    def _take_back(self, index=None):
        """Cache the blocks freed since the last call; returns device `index`'s cache."""
        while self._returned:
            self._uncount(self._returned.popleft())
        if self._waiting_blocks:
            for cache in list(self._devices.values()):
                self._collect_waiting(cache)
        return None if index is None else self._devices[index]

    def _uncount(self, block):
        cache = self._devices[block.index]
        current = cache.current   # uncounted here (lowering a value never raises a peak)
        current["allocated_bytes"] -= block.size
        current["requested_bytes"] -= block.requested
        current["allocation"] -= 1
        if block.streams_used:
            # Other streams may still be running kernels on it: wait for what they have queued.
            events = [self.driver.streams.marker(stream) for stream in block.streams_used]
            block.streams_used = set()
            cache.waiting.append((events, block))
            self._waiting_blocks += 1
        else:
            cache.cache(block)

    def _collect_waiting(self, cache):
        streams = self.driver.streams
        still = []
        for events, block in cache.waiting:
            if all(streams.event_query(event) for event in events):
                for event in events:
                    streams.recycle(event)
                cache.cache(block)
                self._waiting_blocks -= 1
            else:
                still.append((events, block))
        cache.waiting = still

    def _release_cached(self, index, cache):
        blocks = cache.cached_blocks()
        if blocks:  # work queued on a block's stream may still use it: let it finish first
            self.driver.synchronize(index)
        for block in blocks:
            self.driver.free(index, block.ptr)
            cache.add((("reserved_bytes", -block.size), ("segment", -1)))
        cache.free.clear()

    def empty_cache(self):
        """Return every unused cached block, on every device, to the driver."""
        with self._lock:
            self._take_back()
            for index, cache in list(self._devices.items()):
                if cache.waiting:   # blocks still in use elsewhere: wait, then release them
                    self.driver.synchronize(index)
                    self._collect_waiting(cache)
                self._release_cached(index, cache)

    # --- statistics -----------------------------------------------------------------------
    def stats(self, index):
        """PyTorch's `memory_stats` keys: '<stat>.all.current|peak', plus the counters."""
        with self._lock:
            cache = self._take_back(index)
            result = {}
            for name in sorted(STAT_NAMES):
                result[f"{name}.all.current"] = cache.current[name]
                result[f"{name}.all.peak"] = cache.peak[name]
            result["active_bytes.all.current"] = cache.current["allocated_bytes"]
            result["active_bytes.all.peak"] = cache.peak["allocated_bytes"]
            result.update(cache.counts)
            return result

    def reset_peak(self, index, names=STAT_NAMES):
        with self._lock:
            cache = self._take_back(index)
            for name in names:
                cache.peak[name] = cache.current[name]


def format_size(nbytes):
    """Bytes as PyTorch's messages write them ('512 bytes', '1.50 KiB', '2.00 GiB')."""
    if nbytes < 1024:
        return f"{nbytes} bytes"
    for unit, scale in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)):
        if nbytes < scale * 1024 or unit == "GiB":
            return f"{nbytes / scale:.2f} {unit}"
