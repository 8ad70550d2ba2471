"""An emulated CUDA driver: just enough of `cuda.bindings.driver`, on host memory, to run
reftorch-cuda's host side without a GPU.

Allocations are NumPy byte buffers (filled with garbage, as device memory is) and every copy
is bounds-checked against them. `cuLaunchKernel` decodes the kernel parameters from the raw
bytes the plugin hands it and does the kernel's work with NumPy, through the per-kernel
emulations of `cuda_kernel_emulation` (written independently of the plugin's ctypes
structs). So the emulation checks geometry packing, pointers, offsets, dispatch, fallbacks and
memory management; only a GPU checks the device code itself. Each launch must also fit what
the loaded CUBIN says its kernel needs (registers, shared memory, `__launch_bounds__`; see
`cubin_resources`): a launch a GPU would refuse fails here too.

Streams and events: with `deferred` set, copies, memsets and event records issued on a
created stream are queued and run later (at a synchronisation, a wait on one of its events,
or the next kernel launch on that stream), while the legacy default stream runs its work at
once. Running a queue late is one schedule a GPU may choose, so code that forgets a
stream dependency or frees memory a queued copy still uses reads the wrong bytes here too.
Kernels always run at launch (their parameter bytes live only during cuLaunchKernel), after
their stream's queue.
"""
from __future__ import annotations

import ctypes
import enum
import itertools
import threading
import time

import numpy as np

from spec_tests import cuda_kernel_emulation
from spec_tests.cubin_resources import kernel_resources


class EmulatedDriver:
    """The driver API over host memory; `lowered` maps lowered kernel names to the name
    expressions they were compiled from."""

    class CUresult(enum.IntEnum):
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_VALUE = 1
        CUDA_ERROR_OUT_OF_MEMORY = 2
        CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803
        CUDA_ERROR_NO_DEVICE = 100
        CUDA_ERROR_INVALID_DEVICE = 101
        CUDA_ERROR_INVALID_CONTEXT = 201
        CUDA_ERROR_INVALID_HANDLE = 400
        CUDA_ERROR_NOT_FOUND = 500
        CUDA_ERROR_NOT_READY = 600

    class CUdevice_attribute(enum.IntEnum):
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16

    class CUstream_flags(enum.IntEnum):
        CU_STREAM_DEFAULT = 0
        CU_STREAM_NON_BLOCKING = 1

    class CUevent_flags(enum.IntEnum):
        CU_EVENT_DEFAULT = 0
        CU_EVENT_BLOCKING_SYNC = 1
        CU_EVENT_DISABLE_TIMING = 2
        CU_EVENT_INTERPROCESS = 4

    MULTIPROCESSORS = 132

    class CUipcEventHandle:
        """64 opaque bytes at `getPtr()`, as the real struct."""

        def __init__(self):
            self._bytes = ctypes.create_string_buffer(64)

        def getPtr(self):
            return ctypes.addressof(self._bytes)
    CU_MEMHOSTALLOC_PORTABLE = 1

    def __init__(self, lowered, count=2, capability=(9, 0), capacity=1 << 30):
        self.lowered = lowered            # lowered name -> name expression
        self.count, self.capability = count, capability
        self.capacity = capacity          # bytes of memory per device
        self.memory = {}                  # address -> uint8 buffer
        self.owner = {}                   # address -> device index
        self.host_memory = {}             # address -> uint8 buffer (pinned host memory)
        self._thread = threading.local()  # .context: the current context, per thread
        self.launches = []                # name expressions, in launch order
        self.launch_devices = []          # the device current at each launch
        self.launch_streams = []          # the stream of each launch (0: legacy default)
        self.deferred = False             # queue work on created streams (see module doc)
        self.streams = {}                 # handle -> Stream
        self.events = set()               # live (created, not destroyed) events
        self.ipc_events = {}              # exported handle bytes -> event
        self.calls = []                   # names of the memory calls made (alloc, free, ...)
        self.resources = {}               # lowered name -> KernelResources of loaded modules
        self._ids = itertools.count(1)

    OK = (CUresult.CUDA_SUCCESS,)

    @property
    def current(self):
        """This thread's current context: as in the driver, each thread has its own."""
        return getattr(self._thread, "context", None)

    @current.setter
    def current(self, ctx):
        self._thread.context = ctx

    def _fail(self, name):
        return (self.CUresult[name],)

    def cuInit(self, flags):
        return self.OK

    def cuDeviceGetCount(self):
        return (self.CUresult.CUDA_SUCCESS, self.count)

    def cuDeviceGet(self, index):
        if not 0 <= index < self.count:
            return (self.CUresult.CUDA_ERROR_INVALID_DEVICE, None)
        return (self.CUresult.CUDA_SUCCESS, index)

    def cuDevicePrimaryCtxRetain(self, dev):
        return (self.CUresult.CUDA_SUCCESS, ("context", dev))

    def cuCtxSetCurrent(self, ctx):
        self.current = ctx
        return self.OK

    def cuCtxSynchronize(self):
        if not self.current:
            return self._fail("CUDA_ERROR_INVALID_CONTEXT")
        for stream in self.streams.values():
            if stream.device == self._device():
                stream.flush()
        return self.OK

    def cuDeviceGetName(self, length, dev):
        return (self.CUresult.CUDA_SUCCESS, f"Emulated GPU {dev}".encode().ljust(length, b"\0"))

    def cuDeviceGetAttribute(self, attribute, dev):
        if attribute == self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
            return (self.CUresult.CUDA_SUCCESS, self.MULTIPROCESSORS)
        major = attribute == self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        return (self.CUresult.CUDA_SUCCESS, self.capability[0 if major else 1])

    def cuGetErrorName(self, err):
        return (self.CUresult.CUDA_SUCCESS, self.CUresult(err).name.encode())

    def cuGetErrorString(self, err):
        return (self.CUresult.CUDA_SUCCESS, b"emulated")

    # --- memory -------------------------------------------------------------------------------
    def _device(self):
        return self.current[1]

    def used(self, index):
        """Bytes allocated on device `index`."""
        return sum(self.memory[a].size for a, d in self.owner.items() if d == index)

    def cuMemAlloc(self, nbytes):
        if nbytes <= 0 or self.current is None:
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE, 0)
        self.calls.append("cuMemAlloc")
        if self.used(self._device()) + nbytes > self.capacity:
            return (self.CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0)
        buffer = np.full(nbytes, 0xA5, dtype=np.uint8)
        self.memory[buffer.ctypes.data] = buffer
        self.owner[buffer.ctypes.data] = self._device()
        return (self.CUresult.CUDA_SUCCESS, buffer.ctypes.data)

    def cuMemFree(self, ptr):
        # The real cuMemFree waits for the device's work first; so do the queues here.
        if self.current is not None:
            self.cuCtxSynchronize()
        if self.memory.pop(int(ptr), None) is None:
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        self.owner.pop(int(ptr))
        self.calls.append("cuMemFree")
        return self.OK

    def cuMemHostAlloc(self, nbytes, flags):
        if self.current is None:
            return (self.CUresult.CUDA_ERROR_INVALID_CONTEXT, 0)
        buffer = np.full(nbytes, 0x5A, dtype=np.uint8)
        self.host_memory[buffer.ctypes.data] = buffer
        self.calls.append("cuMemHostAlloc")
        return (self.CUresult.CUDA_SUCCESS, buffer.ctypes.data)

    def cuMemFreeHost(self, ptr):
        if self.host_memory.pop(int(ptr), None) is None:
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        self.calls.append("cuMemFreeHost")
        return self.OK

    def cuMemGetInfo(self):
        if self.current is None:
            return (self.CUresult.CUDA_ERROR_INVALID_CONTEXT, 0, 0)
        used = self.used(self._device())
        return (self.CUresult.CUDA_SUCCESS, self.capacity - used, self.capacity)

    def cuDeviceTotalMem(self, dev):
        return (self.CUresult.CUDA_SUCCESS, self.capacity)

    def _inside(self, ptr, nbytes):
        for base, buffer in self.memory.items():
            if base <= ptr and ptr + nbytes <= base + buffer.size:
                return True
        return False

    def cuMemcpyHtoD(self, dst, src, nbytes):
        if not self._inside(dst, nbytes):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        ctypes.memmove(dst, src, nbytes)
        return self.OK

    def cuMemcpyDtoH(self, dst, src, nbytes):
        if not self._inside(src, nbytes):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        ctypes.memmove(dst, src, nbytes)
        return self.OK

    def cuMemcpyDtoD(self, dst, src, nbytes):
        if not (self._inside(dst, nbytes) and self._inside(src, nbytes)):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        ctypes.memmove(dst, src, nbytes)
        return self.OK

    def cuMemsetD8(self, dst, value, nbytes):
        if not self._inside(dst, nbytes):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        ctypes.memset(dst, value, nbytes)
        return self.OK

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):
        if not self._inside(dst, nbytes):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        return self._on(stream, lambda: ctypes.memmove(dst, src, nbytes))

    def cuMemcpyDtoHAsync(self, dst, src, nbytes, stream):
        if not self._inside(src, nbytes):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        return self._on(stream, lambda: ctypes.memmove(dst, src, nbytes))

    def cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        if not (self._inside(dst, nbytes) and self._inside(src, nbytes)):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        return self._on(stream, lambda: ctypes.memmove(dst, src, nbytes))

    def cuMemsetD8Async(self, dst, value, nbytes, stream):
        if not self._inside(dst, nbytes):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        return self._on(stream, lambda: ctypes.memset(dst, value, nbytes))

    def cuMemcpyPeerAsync(self, dst, dst_ctx, src, src_ctx, nbytes, stream):
        if not (self._inside(dst, nbytes) and self._inside(src, nbytes)):
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        if self.owner_of(dst) != dst_ctx[1] or self.owner_of(src) != src_ctx[1]:
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        self.calls.append("cuMemcpyPeerAsync")
        return self._on(stream, lambda: ctypes.memmove(dst, src, nbytes))

    def owner_of(self, ptr):
        for base, buffer in self.memory.items():
            if base <= ptr < base + buffer.size:
                return self.owner[base]
        return None

    # --- streams and events -------------------------------------------------------------------
    def _stream(self, handle):
        """The emulated stream for a handle (None: the legacy default stream), checked to
        belong to the current context, as the driver requires."""
        if handle == 0 or handle is None:
            return None
        stream = self.streams.get(handle)
        assert stream is not None, f"unknown stream {handle!r}"
        assert stream.device == self._device(), \
            f"stream of device {stream.device} used with device {self._device()} current"
        return stream

    def _on(self, handle, work):
        """Issue `work` on a stream: queued on a created stream when deferred, else run now."""
        if self.current is None:
            return self._fail("CUDA_ERROR_INVALID_CONTEXT")
        stream = self._stream(handle)
        if stream is not None and self.deferred:
            stream.queue.append(work)
        else:
            if stream is not None:
                stream.flush()
            work()
        return self.OK

    def cuStreamCreate(self, flags):
        return self.cuStreamCreateWithPriority(flags, 0)

    def cuStreamCreateWithPriority(self, flags, priority):
        if self.current is None:
            return (self.CUresult.CUDA_ERROR_INVALID_CONTEXT, None)
        handle = EmulatedHandle("stream", next(self._ids))
        self.streams[handle] = Stream(self._device(), int(flags), priority)
        return (self.CUresult.CUDA_SUCCESS, handle)

    def cuCtxGetStreamPriorityRange(self):
        return (self.CUresult.CUDA_SUCCESS, 0, -5)   # (least, greatest), as on an H100

    def cuStreamDestroy(self, handle):
        stream = self.streams.pop(handle, None)
        if stream is None:
            return self._fail("CUDA_ERROR_INVALID_HANDLE")
        stream.flush()   # the driver finishes a destroyed stream's work
        return self.OK

    def cuStreamSynchronize(self, handle):
        self.calls.append("cuStreamSynchronize")
        stream = self._stream(handle)
        if stream is not None:
            stream.flush()
        return self.OK

    def cuStreamQuery(self, handle):
        stream = self._stream(handle)
        if stream is not None and stream.queue:
            return self._fail("CUDA_ERROR_NOT_READY")
        return self.OK

    def cuStreamWaitEvent(self, handle, event, flags):
        self._stream(handle)
        event.wait()   # running the awaited work now is a valid schedule
        return self.OK

    def cuEventCreate(self, flags):
        if self.current is None:
            return (self.CUresult.CUDA_ERROR_INVALID_CONTEXT, None)
        event = Event(self._device(), int(flags))
        self.events.add(event)
        return (self.CUresult.CUDA_SUCCESS, event)

    def cuEventDestroy(self, event):
        if event not in self.events:
            return self._fail("CUDA_ERROR_INVALID_HANDLE")
        self.events.remove(event)
        return self.OK

    def cuIpcGetEventHandle(self, event):
        if not event.flags & self.CUevent_flags.CU_EVENT_INTERPROCESS:
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE, None)
        handle = self.CUipcEventHandle()
        ctypes.memmove(handle.getPtr(), b"emulated-ipc-event:%d" % id(event), 64)
        self.ipc_events[ctypes.string_at(handle.getPtr(), 64)] = event
        return (self.CUresult.CUDA_SUCCESS, handle)

    def cuIpcOpenEventHandle(self, handle):
        """The exporting event itself (an emulated process shares its objects)."""
        event = self.ipc_events.get(ctypes.string_at(handle.getPtr(), 64))
        if event is None or self.current is None:
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE, None)
        self.events.add(event)   # the opened handle is destroyed like a created one
        return (self.CUresult.CUDA_SUCCESS, event)

    def cuEventRecord(self, event, handle):
        if event.device != self._device():
            return self._fail("CUDA_ERROR_INVALID_HANDLE")
        stream = self._stream(handle)
        event.record(stream)
        return self._on(handle, event.complete)

    def cuEventQuery(self, event):
        return self.OK if event.done() else self._fail("CUDA_ERROR_NOT_READY")

    def cuEventSynchronize(self, event):
        event.wait()
        return self.OK

    def cuEventElapsedTime(self, start, end):
        timing = self.CUevent_flags.CU_EVENT_DISABLE_TIMING
        if (start.flags | end.flags) & timing or start.time is None or end.time is None:
            return (self.CUresult.CUDA_ERROR_INVALID_HANDLE, 0.0)
        return (self.CUresult.CUDA_SUCCESS, (end.time - start.time) * 1000.0)

    def view(self, ptr, dtype, shape, strides):
        """A NumPy view of device memory at `ptr` (strides in elements). NumPy refuses views
        that reach outside the allocation: every emulated kernel access is bounds-checked."""
        dtype = np.dtype(dtype)
        for base, buffer in self.memory.items():
            if base <= ptr < base + buffer.size:
                return np.ndarray(shape, dtype, buffer=buffer, offset=ptr - base,
                                  strides=[s * dtype.itemsize for s in strides])
        raise AssertionError(f"pointer {ptr:#x} is not device memory")

    # --- kernels ------------------------------------------------------------------------------
    def cuModuleLoadData(self, image):
        if not bytes(image[:4]) == b"\x7fELF":
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE, None)
        self.resources.update(kernel_resources(image))
        return (self.CUresult.CUDA_SUCCESS, ("module", len(image)))

    def cuModuleGetFunction(self, module, name):
        if name.decode() not in self.lowered:
            return (self.CUresult.CUDA_ERROR_NOT_FOUND, None)
        return (self.CUresult.CUDA_SUCCESS, name.decode())

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert self.current is not None and extra == 0 and isinstance(params, int)
        assert 1 <= gx < 2 ** 31 and 1 <= gy <= 65535 and 1 <= gz <= 65535
        assert 1 <= bx * by * bz <= 1024 and 0 <= shared <= 48 * 1024
        expression = self.lowered[f]
        # What the compiled kernel needs must fit the block, as on a GPU (see cubin_resources)
        problem = self.resources[f].launch_problem(bx * by * bz, shared)
        assert problem is None, f"a GPU would refuse to launch {expression}: {problem}"
        stream = self._stream(stream)
        if stream is not None:
            stream.flush()
        self.launches.append(expression)
        self.launch_streams.append(stream)
        self.launch_devices.append(self._device())
        cuda_kernel_emulation.run(self, expression, (gx, gy, gz), (bx, by, bz), shared, params)
        return self.OK


class EmulatedHandle:
    """An opaque driver handle (CUstream), hashed by identity like the real ones' pointers."""

    def __init__(self, kind, number):
        self.kind, self.number = kind, number

    def __int__(self):   # the real handles convert to their pointer value
        return 0x7F0000000000 + 0x100 * self.number

    def __repr__(self):
        return f"<emulated {self.kind} {self.number}>"


class Stream:
    """A created stream: its device and the work queued on it, in order."""

    def __init__(self, device, flags, priority):
        self.device, self.flags, self.priority = device, flags, priority
        self.queue = []

    def flush(self, until=lambda: False):
        """Run the queued work in order, all of it or until `until()` holds."""
        while self.queue and not until():
            self.queue.pop(0)()


class Event:
    def __init__(self, device, flags):
        self.device, self.flags = device, flags
        self.stream = None
        self.time = None          # perf_counter when the recorded work completed
        self.pending = False

    def __int__(self):
        return id(self)

    def record(self, stream):
        self.stream, self.time, self.pending = stream, None, True

    def complete(self):
        self.time, self.pending = time.perf_counter(), False

    def done(self):
        return not self.pending

    def wait(self):
        """Run the recording stream's queue up to this event."""
        if self.pending and self.stream is not None:
            self.stream.flush(until=self.done)
