"""Streams and events on the driver API: the per-thread current stream of each device, and
the handles behind `reftorch.cuda.Stream` / `reftorch.cuda.Event`.

Each device's default stream is the legacy NULL stream (handle 0), as PyTorch's is. Created
streams are non-blocking (CU_STREAM_NON_BLOCKING, as PyTorch's pool streams): they do not
wait for the default stream implicitly, so work on them is ordered only by the waits the
program asks for (`wait_stream`, `wait_event`). Kernels, device copies and memsets go to the
current stream of their device.

A handle owns its CUstream / CUevent and destroys it when no longer referenced (the driver lets
queued work finish first). The caching allocator's blocks hold their stream's handle, so a
stream outlives the memory cached for it and its handle value is never reused while blocks
freed on it wait in the cache. Handles die in finalizers, which the garbage collector may run
between any two driver calls; switching the current context there would send the caller's
next call to the wrong device, so a finalizer only queues the handle, and the next stream or
event call destroys it.
"""
from __future__ import annotations

import collections
import ctypes
import threading
import weakref

IPC_HANDLE_BYTES = 64   # sizeof(CUipcEventHandle)
MARKER_POOL = 64        # completed marker events kept per device for reuse


class StreamHandle:
    """A stream of device `index`: `raw` is the CUstream (0 for the legacy default stream)."""

    __slots__ = ("index", "raw", "priority", "_finalizer", "__weakref__")

    def __init__(self, index, raw, priority=0, destroy=None):
        self.index, self.raw, self.priority = index, raw, priority
        self._finalizer = weakref.finalize(self, destroy, raw) if destroy else None
        if self._finalizer is not None:
            self._finalizer.atexit = False   # the process exit releases the context anyway

    @property
    def is_default(self):
        return self._finalizer is None

    def __repr__(self):
        return f"<StreamHandle device={self.index} cuda_stream={int(self.raw):#x}>"


class EventHandle:
    """A CUevent created on device `index` with `flags`."""

    __slots__ = ("index", "raw", "timing", "_finalizer", "__weakref__")

    def __init__(self, index, raw, timing, destroy):
        self.index, self.raw, self.timing = index, raw, timing
        self._finalizer = weakref.finalize(self, destroy, raw)
        self._finalizer.atexit = False


class _CurrentStreams(threading.local):
    """Per thread: {device index: current StreamHandle}, or None before the first set_current
    (a class default: reading it is one attribute lookup, and every launch reads it)."""
    current = None


class Streams:
    """The stream and event calls of one started `Driver`."""

    def __init__(self, driver):
        self.driver = driver
        self.cu = driver.cu
        self._defaults = {}                 # index -> StreamHandle of the NULL stream
        self._local = _CurrentStreams()     # .current: {index: StreamHandle}, per thread
        self._keep = []                     # (EventHandle, object) alive until the event
        self._markers = collections.defaultdict(list)   # index -> completed marker events
        self._doomed = collections.deque()  # (driver call, index, raw) of dead handles
        self._lock = threading.Lock()

    # --- which stream ---------------------------------------------------------------------
    def default(self, index):
        found = self._defaults.get(index)
        if found is None:
            self.driver.check_index(index)
            found = self._defaults.setdefault(index, StreamHandle(index, 0))
        return found

    def _current_table(self):
        table = self._local.current
        if table is None:
            table = self._local.current = {}
        return table

    def current(self, index):
        """This thread's current stream on device `index` (the default stream unless set)."""
        table = self._local.current
        found = table.get(index) if table else None
        if found is None:
            found = self._defaults.get(index) or self.default(index)
        return found

    def set_current(self, stream):
        self._current_table()[stream.index] = stream

    # --- streams --------------------------------------------------------------------------
    def create(self, index, priority=0):
        """A new non-blocking stream on device `index`; priorities are clamped to the
        device's range (lower numbers run first), as PyTorch does."""
        self._destroy_doomed()
        self.driver.activate(index)
        least, greatest = self.driver.check(self.cu.cuCtxGetStreamPriorityRange(),
                                            "cuCtxGetStreamPriorityRange")
        priority = min(max(priority, greatest), least)
        flags = int(self.cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        raw = self.driver.check(self.cu.cuStreamCreateWithPriority(flags, priority),
                                "cuStreamCreateWithPriority")
        return StreamHandle(index, raw, priority, destroy=self._destroyer("cuStreamDestroy",
                                                                          index))

    def _destroyer(self, call, index):
        doomed = self._doomed

        def destroy(raw):   # a finalizer: no driver call here (see the module docstring)
            doomed.append((call, index, raw))
        return destroy

    def _destroy_doomed(self):
        while self._doomed:
            call, index, raw = self._doomed.popleft()
            try:
                self.driver.activate(index)
                getattr(self.cu, call)(raw)
            except Exception:  # a handle the driver no longer knows: nothing left to free
                pass

    def synchronize(self, stream):
        self.driver.activate(stream.index)
        self.driver.check(self.cu.cuStreamSynchronize(stream.raw), "cuStreamSynchronize")
        self.collect()

    def query(self, stream):
        """True when all work queued on `stream` has completed."""
        self.driver.activate(stream.index)
        return self._ready(self.cu.cuStreamQuery(stream.raw), "cuStreamQuery")

    def wait_event(self, stream, event):
        """Future work on `stream` waits for `event` (any device may wait on any event)."""
        self.driver.activate(stream.index)
        self.driver.check(self.cu.cuStreamWaitEvent(stream.raw, event.raw, 0),
                          "cuStreamWaitEvent")

    # --- events ---------------------------------------------------------------------------
    def event_create(self, index, enable_timing=False, blocking=False, interprocess=False):
        flags = self.cu.CUevent_flags
        value = 0 if enable_timing else int(flags.CU_EVENT_DISABLE_TIMING)
        if blocking:
            value |= int(flags.CU_EVENT_BLOCKING_SYNC)
        if interprocess:
            value |= int(flags.CU_EVENT_INTERPROCESS)
        self._destroy_doomed()
        self.driver.activate(index)
        raw = self.driver.check(self.cu.cuEventCreate(value), "cuEventCreate")
        return EventHandle(index, raw, enable_timing,
                           destroy=self._destroyer("cuEventDestroy", index))

    def record(self, event, stream):
        if event.index != stream.index:
            raise RuntimeError(f"Event device {event.index} does not match recording stream's "
                               f"device {stream.index}.")
        self.driver.activate(stream.index)
        self.driver.check(self.cu.cuEventRecord(event.raw, stream.raw), "cuEventRecord")

    def event_query(self, event):
        self.driver.activate(event.index)
        return self._ready(self.cu.cuEventQuery(event.raw), "cuEventQuery")

    def event_synchronize(self, event):
        self.driver.activate(event.index)
        self.driver.check(self.cu.cuEventSynchronize(event.raw), "cuEventSynchronize")

    def elapsed_time(self, start, end):
        """Milliseconds between two completed timing events."""
        self.driver.activate(start.index)
        return float(self.driver.check(self.cu.cuEventElapsedTime(start.raw, end.raw),
                                       "cuEventElapsedTime"))

    def ipc_handle(self, event):
        """The bytes another process opens the (interprocess) event with."""
        self.driver.activate(event.index)
        handle = self.driver.check(self.cu.cuIpcGetEventHandle(event.raw),
                                   "cuIpcGetEventHandle")
        return ctypes.string_at(handle.getPtr(), IPC_HANDLE_BYTES)

    def open_ipc_handle(self, index, data):
        """An event of another process, from its `ipc_handle` bytes, opened on device
        `index` (the driver gives it timing disabled)."""
        data = bytes(data)
        if len(data) != IPC_HANDLE_BYTES:
            raise RuntimeError(f"an event IPC handle has {IPC_HANDLE_BYTES} bytes, got "
                               f"{len(data)}")
        handle = self.cu.CUipcEventHandle()
        ctypes.memmove(handle.getPtr(), data, IPC_HANDLE_BYTES)
        self._destroy_doomed()
        self.driver.activate(index)
        raw = self.driver.check(self.cu.cuIpcOpenEventHandle(handle), "cuIpcOpenEventHandle")
        return EventHandle(index, raw, False, destroy=self._destroyer("cuEventDestroy", index))

    def marker(self, stream):
        """An event recorded on `stream` now (for the allocator and async copies). It comes
        from the device's pool of completed markers when there is one: creating and later
        destroying an event costs two driver calls more than recording a used one. Give it
        back with `recycle` once it has been seen to complete."""
        try:   # pop() alone: another thread may take the pool's last event meanwhile
            event = self._markers[stream.index].pop()
        except IndexError:
            event = self.event_create(stream.index)
        self.record(event, stream)
        return event

    def recycle(self, event):
        """Return a marker from `marker` that has completed (a query or synchronisation said
        so) to its device's pool; re-recording it cannot change what anyone waited for."""
        pool = self._markers[event.index]
        if len(pool) < MARKER_POOL:
            pool.append(event)

    def _ready(self, result, call):
        err = result[0]
        if err == self.cu.CUresult.CUDA_ERROR_NOT_READY:
            return False
        self.driver.check(result, call)
        return True

    # --- host buffers of asynchronous copies ----------------------------------------------
    def keep_alive(self, stream, obj):
        """Hold `obj` (a host buffer an asynchronous copy reads) until the work queued on
        `stream` so far has completed."""
        event = self.marker(stream)
        with self._lock:
            self._keep.append((event, obj))
        self.collect()

    def collect(self):
        """Drop the host buffers whose copies have completed (and destroy dead handles)."""
        self._destroy_doomed()
        with self._lock:
            pending, self._keep = self._keep, []
        still = []
        for event, obj in pending:
            if self.event_query(event):
                self.recycle(event)
            else:
                still.append((event, obj))
        with self._lock:
            self._keep[:0] = still

    def pending_buffers(self):
        return len(self._keep)
