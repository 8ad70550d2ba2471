"""Streams and events: `torch.cuda.Stream`, `Event`, `current_stream`, `stream`.

A stream is an ordered queue of GPU work on one device; work on different streams may run
concurrently. Each thread has a current stream per device (the device's default stream until
`set_stream` or a `stream(...)` block changes it); kernels, device copies and allocations on
a device use its current stream. Created streams do not synchronise with the default stream
(PyTorch's pool streams are non-blocking too): order work across streams with `wait_stream`
or events.

The backend (reftorch-cuda) supplies the handles (`backend.streams()`, see
reftorch_cuda/streams.py); these classes hold one and add PyTorch's checks.
"""
from __future__ import annotations

from .._device import device as _Device
from . import _index, _require

__all__ = ["Event", "Stream", "current_stream", "default_stream", "set_stream", "stream"]


def _streams():
    return _require().streams()


def _device_index(device):
    """None or a negative int mean the current device."""
    if device is None or (isinstance(device, int) and not isinstance(device, bool)
                          and device < 0):
        return _index(None)
    return _index(device)


class Stream:
    """A new CUDA stream on `device` (default: the current device) with `priority` (lower
    numbers run first; clamped to the device's range, which `priority_range()` gives)."""

    def __init__(self, device=None, priority=0, **kwargs):
        if kwargs:
            raise TypeError(f"Stream() got an unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")
        self._handle = _streams().create(_device_index(device), priority)

    @classmethod
    def _wrap(cls, handle):
        stream = cls.__new__(cls)
        stream._handle = handle
        return stream

    @property
    def device(self):
        return _Device("cuda", self._handle.index)

    @property
    def device_index(self):
        return self._handle.index

    @property
    def cuda_stream(self):
        """The raw CUstream as an int (0: the legacy default stream)."""
        return int(self._handle.raw)

    @property
    def priority(self):
        return self._handle.priority

    def query(self):
        """True when all work submitted to this stream has completed."""
        return _streams().query(self._handle)

    def synchronize(self):
        """Wait for all work submitted to this stream."""
        _streams().synchronize(self._handle)

    def wait_event(self, event):
        """Make work submitted to this stream from now on wait for `event`; returns at once."""
        event.wait(self)

    def wait_stream(self, stream):
        """Make work submitted to this stream from now on wait for the work submitted to
        `stream` so far; returns at once."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Record `event` (a new Event when None) on this stream; returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return (isinstance(other, Stream) and self.device_index == other.device_index
                and self.cuda_stream == other.cuda_stream)

    def __hash__(self):
        return hash((self.device_index, self.cuda_stream))

    def __repr__(self):
        return f"<torch.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event: a marker in a stream, to wait for, query, synchronise on and time.

    `enable_timing` lets `elapsed_time` measure between two events; `blocking` makes
    `synchronize` sleep rather than spin; `interprocess` asks for an event shareable between
    processes with `ipc_handle`/`from_ipc_handle` (the driver wants timing off for it). The
    driver event is created at the first `record`, on the recording stream's device."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._handle = None

    @property
    def device(self):
        return None if self._handle is None else _Device("cuda", self._handle.index)

    @property
    def cuda_event(self):
        return 0 if self._handle is None else int(self._handle.raw)

    @classmethod
    def from_ipc_handle(cls, device, handle):
        """The event another process exported with `ipc_handle`, opened on `device`."""
        event = cls(interprocess=True)
        event._handle = _streams().open_ipc_handle(_device_index(device), handle)
        return event

    def ipc_handle(self):
        """Bytes that let another process open this event (`from_ipc_handle`); the event
        must be interprocess. An event not yet recorded is created on the current device."""
        if self._handle is None:
            self._handle = _streams().event_create(_device_index(None), self.enable_timing,
                                                   self.blocking, self.interprocess)
        return _streams().ipc_handle(self._handle)

    def record(self, stream=None):
        """Record the event on `stream` (default: the current stream), which must be on the
        event's device once the event exists."""
        stream = current_stream() if stream is None else stream
        streams = _streams()
        if self._handle is None:
            self._handle = streams.event_create(stream.device_index, self.enable_timing,
                                                self.blocking, self.interprocess)
        streams.record(self._handle, stream._handle)

    def wait(self, stream=None):
        """Make future work on `stream` (default: the current stream) wait for this event;
        nothing to wait for when the event was never recorded."""
        if self._handle is None:
            return
        stream = current_stream() if stream is None else stream
        _streams().wait_event(stream._handle, self._handle)

    def query(self):
        """True when the work the event captured has completed (True if never recorded)."""
        return self._handle is None or _streams().event_query(self._handle)

    def synchronize(self):
        """Wait for the work the event captured."""
        if self._handle is not None:
            _streams().event_synchronize(self._handle)

    def elapsed_time(self, end_event):
        """Milliseconds from this event to `end_event`; both must have timing enabled, be
        recorded, and have completed (PyTorch's ValueError, ValueError, RuntimeError)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self._handle is None or end_event._handle is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (self.query() and end_event.query()):
            raise RuntimeError("Both events must be completed before calculating elapsed "
                               "time.")
        return _streams().elapsed_time(self._handle, end_event._handle)

    def __repr__(self):
        return (f"<torch.cuda.Event {self.cuda_event:#x}>" if self._handle is not None
                else "<torch.cuda.Event uninitialized>")


def current_stream(device=None):
    """This thread's current stream on `device` (default: the current device)."""
    index = _device_index(device)
    return Stream._wrap(_streams().current(index))


def default_stream(device=None):
    """The default (legacy NULL) stream of `device` (default: the current device)."""
    index = _device_index(device)
    return Stream._wrap(_streams().default(index))


def set_stream(stream):
    """Make `stream` the current stream of its device (a None stream changes nothing)."""
    if stream is not None:
        _streams().set_current(stream._handle)


class stream:
    """Context manager that makes `stream` current inside the block, and its device the
    current device; both are restored after. `stream(None)` changes nothing."""

    def __init__(self, stream):
        self.stream = stream
        self._saved = None

    def __enter__(self):
        target = self.stream
        if target is None:
            return None
        from . import current_device, set_device
        previous_device = current_device()
        # The current stream of both devices is restored: the target's and the one we left.
        saved = [current_stream(previous_device), current_stream(target.device_index)]
        self._saved = (previous_device, saved)
        if target.device_index != previous_device:
            set_device(target.device_index)
        set_stream(target)
        return target

    def __exit__(self, *exc):
        if self._saved is None:
            return False
        from . import set_device
        previous_device, saved = self._saved
        self._saved = None
        for s in reversed(saved):
            set_stream(s)
        set_device(previous_device)
        return False
