"""The `cuda` device: storages in GPU memory, through the CUDA driver API (cuda.bindings).

Nothing here touches the driver until the first cuda allocation or query: `import reftorch`
on a machine without a GPU or driver loads the plugin silently, and the first use raises a
RuntimeError that says what is missing. The failure is remembered, as PyTorch does.

Each device index uses the driver's primary context (the one the CUDA runtime, and so
PyTorch and CuPy, share). Every driver call's CUresult is checked; a failure raises
`CUDAError` (a RuntimeError) naming the error and the call.

Kernels, device copies and memsets go to the current stream of their device (see `streams`;
the legacy default stream unless the program chose another), so they run in the order they
were issued there. Copies to the host, and host-to-device copies unless asked to be
non-blocking, wait for that stream before returning. Memory comes from the caching allocator
(see `allocator`).
"""
from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np

from reftorch._device import device as Device
from reftorch._storage import DeviceBackend, ScalarConstants, Storage

from . import pinned
from .allocator import Allocator
from .streams import Streams

NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
             "and installed a driver from http://www.nvidia.com/Download/index.aspx")
NO_DEVICE = "No CUDA GPUs are available"
OLD_DRIVER = ("The NVIDIA driver on your system does not match the CUDA version reftorch-cuda "
              "uses (cuda-bindings {version}): {error}; update the driver")
# cuInit's answers when the installed driver cannot serve these bindings.
_DRIVER_MISMATCH = ("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE")
NO_BINDINGS = ("reftorch-cuda needs the cuda-bindings package to reach the GPU "
               "(pip install cuda-bindings): {error}")
BLOCK = 256            # threads per block for every elementwise kernel
MAX_BLOCKS = 65535     # grid-stride loops cover the rest
SCALAR_CONSTANTS = 256  # Python-number operands kept on the devices (512 bytes each)


class CUDAError(RuntimeError):
    """A CUDA driver call failed."""


class _CurrentContext(threading.local):
    """Per thread: the device whose context this driver made current (None: not known), and
    the thread's ParamBuffer (None until its first launch_addresses). Class defaults, so
    reading them before the first assignment on a thread is one attribute lookup (every
    launch reads them)."""
    index = None
    params = None


class ParamBuffer:
    """One thread's kernel-parameter scratch memory for `Driver.launch_addresses`: the slot
    array cuLaunchKernel reads (one address per kernel parameter), then the 64-bit device
    addresses that the pointer parameters' slots point at."""

    BYTES = 1024

    def __init__(self):
        self.raw = ctypes.create_string_buffer(self.BYTES)
        self.address = ctypes.addressof(self.raw)
        self._layouts = {}

    def layout(self, objects, addresses, extras):
        """(struct packing the slots then the addresses, the pointer slots' own addresses)
        for `objects` + `addresses` + `extras` parameters (counts); cached per count."""
        key = (objects, addresses, extras)
        found = self._layouts.get(key)
        if found is None:
            slots = objects + addresses + extras
            if 8 * (slots + addresses) > self.BYTES:
                raise ValueError(f"{slots} kernel parameters do not fit a ParamBuffer")
            first = self.address + 8 * slots   # where the addresses themselves are written
            found = self._layouts[key] = (struct.Struct(f"={slots + addresses}Q"),
                                          tuple(first + 8 * i for i in range(addresses)))
        return found


def _bindings_version():
    try:
        from cuda.bindings import __version__
        return __version__
    except ImportError:
        return "?"


def _load_driver_module():
    from cuda.bindings import driver
    return driver


class Driver:
    """The initialised driver: device handles, primary contexts, loaded kernels.

    `cu` is the `cuda.bindings.driver` module (tests may pass a stand-in with the same API).
    """

    def __init__(self, cu):
        self.cu = cu
        self.count = self.check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        self._handles = {}      # index -> CUdevice
        self._contexts = {}     # index -> CUcontext (retained primary context)
        self._modules = {}      # (index, program key) -> CUmodule
        self._functions = {}    # (index, Program, name expression) -> CUfunction
        self._archs = {}        # index -> arch string for NVRTC
        self._lock = threading.RLock()
        self._local = _CurrentContext()   # .index: the device whose context we made current
        self._success = cu.CUresult.CUDA_SUCCESS
        self.streams = Streams(self)
        self.allocator = Allocator(self)
        self.pinned = pinned.PinnedMemory(self)
        # Called as hook(index, stream) after each synchronisation that hands results to the
        # host: `synchronize` (stream None: the whole device) and `to_host` (the stream it
        # waited for). ops_index adds the reader of its device-side index error record here,
        # so a bad index is raised at the next synchronisation, as on PyTorch.
        self.sync_hooks = []

    @classmethod
    def start(cls, cu=None):
        """cuInit and count the devices; RuntimeError with a clear message when impossible."""
        if cu is None:
            try:
                cu = _load_driver_module()
            except ImportError as exc:
                raise RuntimeError(NO_BINDINGS.format(error=exc)) from exc
        try:
            result = cu.cuInit(0)
        except Exception as exc:  # libcuda itself could not be found or loaded
            raise RuntimeError(NO_DRIVER) from exc
        err = result[0]
        if err == cu.CUresult.CUDA_ERROR_NO_DEVICE:
            raise RuntimeError(NO_DEVICE)
        if any(err == getattr(cu.CUresult, name, None) for name in _DRIVER_MISMATCH):
            version = getattr(cu, "__version__", None) or _bindings_version()
            raise RuntimeError(OLD_DRIVER.format(version=version, error=_describe(cu, err)))
        check(cu, result, "cuInit")
        driver = cls(cu)
        if driver.count == 0:
            raise RuntimeError(NO_DEVICE)
        return driver

    def check(self, result, call):
        return check(self.cu, result, call)

    # --- devices and contexts ---------------------------------------------------------------
    def check_index(self, index):
        if not 0 <= index < self.count:
            raise RuntimeError(f"CUDA error: invalid device ordinal (device {index} requested, "
                               f"{self.count} available)")

    def handle(self, index):
        found = self._handles.get(index)
        if found is None:
            self.check_index(index)
            found = self._handles[index] = self.check(self.cu.cuDeviceGet(index), "cuDeviceGet")
        return found

    def activate(self, index, force=False):
        """Make device `index`'s primary context current on this thread.

        The driver's current context is per thread, and so is the memory of which one this
        driver made current last: when it is already `index`, nothing is called (every
        launch, copy and stream call comes through here, and a cuCtxSetCurrent through
        cuda.bindings costs a microsecond or more). Code that switches the context behind
        our back (another CUDA library on the same thread) should call
        `reftorch.cuda.set_device`, which passes `force` and always makes the call."""
        local = self._local
        if not force and local.index == index:
            return
        ctx = self._contexts.get(index)
        if ctx is None:
            with self._lock:
                ctx = self._contexts.get(index)
                if ctx is None:
                    ctx = self.check(self.cu.cuDevicePrimaryCtxRetain(self.handle(index)),
                                     "cuDevicePrimaryCtxRetain")
                    self._contexts[index] = ctx
        local.index = None   # unknown until the call below has succeeded
        self.check(self.cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        local.index = index

    def name(self, index):
        raw = self.check(self.cu.cuDeviceGetName(256, self.handle(index)), "cuDeviceGetName")
        return raw.split(b"\0", 1)[0].decode(errors="replace")

    def capability(self, index):
        attribute = self.cu.CUdevice_attribute
        dev = self.handle(index)
        major = self.check(self.cu.cuDeviceGetAttribute(
            attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
        minor = self.check(self.cu.cuDeviceGetAttribute(
            attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")
        return major, minor

    def attribute(self, index, name):
        """One CU_DEVICE_ATTRIBUTE_* value of device `index`."""
        attribute = getattr(self.cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return self.check(self.cu.cuDeviceGetAttribute(attribute, self.handle(index)),
                          "cuDeviceGetAttribute")

    def total_memory(self, index):
        return int(self.check(self.cu.cuDeviceTotalMem(self.handle(index)), "cuDeviceTotalMem"))

    def mem_get_info(self, index):
        """(free, total) bytes of device `index`, as the driver sees them."""
        self.activate(index)
        free, total = self.check(self.cu.cuMemGetInfo(), "cuMemGetInfo")
        return int(free), int(total)

    def arch(self, index):
        """What to compile for device `index`: its own `sm_XY` when NVRTC knows it, else PTX
        for the newest older architecture NVRTC knows (the driver compiles that on load)."""
        found = self._archs.get(index)
        if found is None:
            found = self._archs[index] = arch_for(self.capability(index))
        return found

    def synchronize(self, index):
        """Wait for all work on every stream of device `index`."""
        self.activate(index)
        self.check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")
        self.streams.collect()
        self.pinned.release()
        for hook in self.sync_hooks:
            hook(index, None)

    def stream(self, index):
        """The raw current stream of device `index` (with its context made current)."""
        if self._local.index != index:   # `activate`'s own test, without its call
            self.activate(index)
        return self.streams.current(index).raw

    # --- memory -----------------------------------------------------------------------------
    def alloc(self, index, nbytes):
        """A block of at least `nbytes` from the caching allocator, for the current stream."""
        return self.allocator.malloc(index, nbytes, self.streams.current(index))

    def try_alloc(self, index, nbytes):
        """cuMemAlloc: the address, or None when the device is out of memory."""
        self.activate(index)
        result = self.cu.cuMemAlloc(nbytes)
        if result[0] == self.cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            return None
        return int(self.check(result, "cuMemAlloc"))

    def free(self, index, ptr):
        self.activate(index)
        self.check(self.cu.cuMemFree(ptr), "cuMemFree")

    def to_device(self, index, dst, host_address, nbytes, keep_alive=None):
        """Copy host memory to the device on the current stream. Blocking unless
        `keep_alive` is given: then it is the object owning the host memory, held until the
        copy has completed."""
        stream = self.stream(index)
        self.check(self.cu.cuMemcpyHtoDAsync(dst, host_address, nbytes, stream),
                   "cuMemcpyHtoDAsync")
        current = self.streams.current(index)
        if keep_alive is None:
            self.streams.synchronize(current)
        else:
            self.streams.keep_alive(current, keep_alive)

    def to_host(self, index, host_address, src, nbytes):
        """Copy device memory to the host on the current stream and wait for it."""
        stream = self.stream(index)
        self.check(self.cu.cuMemcpyDtoHAsync(host_address, src, nbytes, stream),
                   "cuMemcpyDtoHAsync")
        current = self.streams.current(index)
        self.streams.synchronize(current)
        for hook in self.sync_hooks:
            hook(index, current)

    def device_copy(self, index, dst, src, nbytes):
        self.check(self.cu.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream(index)),
                   "cuMemcpyDtoDAsync")

    def peer_copy(self, dst_index, dst, src_index, src, nbytes):
        """Copy between two devices with cuMemcpyPeerAsync on the destination's current
        stream, after the work queued on the source's current stream; returns when done (the
        source block may be reused as soon as the caller lets its storage go)."""
        src_stream = self.streams.current(src_index)
        dst_stream = self.streams.current(dst_index)
        ready = self.streams.marker(src_stream)
        self.streams.wait_event(dst_stream, ready)
        self.activate(dst_index)
        self.check(self.cu.cuMemcpyPeerAsync(dst, self._contexts[dst_index], src,
                                             self._contexts[src_index], nbytes, dst_stream.raw),
                   "cuMemcpyPeerAsync")
        self.streams.synchronize(dst_stream)
        self.streams.recycle(ready)   # dst_stream waited for it, and has finished

    def zero(self, index, dst, nbytes):
        self.check(self.cu.cuMemsetD8Async(dst, 0, nbytes, self.stream(index)),
                   "cuMemsetD8Async")

    # --- kernels ----------------------------------------------------------------------------
    def function(self, index, program, name_expression):
        """The CUfunction for one instantiation of `program` on device `index`. The first
        call compiles that instantiation alone for the device's arch (or finds it in the
        cache) and loads it into the device's context; later calls are a dictionary
        lookup."""
        key = (index, program, name_expression)
        found = self._functions.get(key)
        if found is None:
            with self._lock:
                compiled = program.compile_expression(self.arch(index), name_expression)
                module = self._modules.get((index, compiled.key))
                if module is None:
                    self.activate(index)
                    module = self.check(self.cu.cuModuleLoadData(compiled.image),
                                        "cuModuleLoadData")
                    self._modules[(index, compiled.key)] = module
                found = self.check(self.cu.cuModuleGetFunction(
                    module, compiled.lowered_name(name_expression).encode()),
                    f"cuModuleGetFunction({name_expression})")
                self._functions[key] = found
        return found

    def launch(self, index, program, name_expression, numel, args):
        """Run a grid-stride kernel over `numel` elements (1-D grid of BLOCK threads)."""
        self.launch_grid(index, program, name_expression, elementwise_grid(numel),
                         (BLOCK, 1, 1), 0, args)

    def launch_addresses(self, index, program, name_expression, grid, block, objects,
                         addresses, extras=()):
        """launch_grid (no dynamic shared memory) for a kernel whose parameters are the ctypes
        `objects`, then the device addresses `addresses` (ints: its pointer parameters),
        then the ctypes `extras`. One struct call writes the slot array and the addresses
        into this thread's ParamBuffer, where launch_grid makes a ctypes object per address
        and one for the array (~1-2 us of a small op). cuLaunchKernel copies the parameters
        before it returns, so the buffer is free again for the thread's next launch."""
        buffer = self._local.params
        if buffer is None:
            buffer = self._local.params = ParamBuffer()
        packer, slots = buffer.layout(len(objects), len(addresses), len(extras))
        packer.pack_into(buffer.raw, 0, *map(ctypes.addressof, objects), *slots,
                         *map(ctypes.addressof, extras), *addresses)
        self._launch(index, program, name_expression, grid, block, 0, buffer.address)

    def launch_grid(self, index, program, name_expression, grid, block, shared_bytes, args):
        """Launch one kernel with an explicit configuration: `grid` and `block` are 3-tuples,
        `shared_bytes` the dynamic shared memory; `args` are ctypes objects, one per kernel
        parameter, in order (the driver copies them when the launch is issued)."""
        pointers = (ctypes.c_void_p * len(args))(*map(ctypes.addressof, args))
        self._launch(index, program, name_expression, grid, block, shared_bytes,
                     ctypes.addressof(pointers))

    def _launch(self, index, program, name_expression, grid, block, shared_bytes, params):
        """cuLaunchKernel on this thread's current stream of device `index`, `params` the
        address of the parameter slot array (which cuLaunchKernel copies before it
        returns)."""
        function = (self._functions.get((index, program, name_expression))
                    or self.function(index, program, name_expression))
        if self._local.index != index:   # `stream` written out: every launch comes here
            self.activate(index)
        stream = self.streams.current(index).raw
        result = self.cu.cuLaunchKernel(function, *grid, *block, shared_bytes, stream, params, 0)
        if result[0] != self._success:   # the call's name is only built for the error
            self.check(result, f"cuLaunchKernel({name_expression})")


def elementwise_grid(numel):
    """The grid of a grid-stride kernel over `numel` elements: one BLOCK-thread block per
    BLOCK elements, at most MAX_BLOCKS."""
    return (max(1, min((numel + BLOCK - 1) // BLOCK, MAX_BLOCKS)), 1, 1)


def check(cu, result, call):
    """Unpack a cuda.bindings result tuple (CUresult, values...); raise CUDAError on failure."""
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise CUDAError(f"CUDA error: {_describe(cu, err)} in {call}")
    values = result[1:]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _describe(cu, err):
    """'CUDA_ERROR_X (description)' for a CUresult."""
    success = cu.CUresult.CUDA_SUCCESS
    name = desc = None
    try:
        status, raw = cu.cuGetErrorName(err)
        if status == success and raw:
            name = raw.decode()
        status, raw = cu.cuGetErrorString(err)
        if status == success and raw:
            desc = raw.decode()
    except Exception:  # an unknown code: fall back to its repr
        pass
    name = name or repr(err)
    return f"{name}: {desc}" if desc else name


def arch_for(capability):
    from . import nvrtc
    major, minor = capability
    cc = major * 10 + minor
    supported = nvrtc.supported_archs()
    if cc in supported:
        return f"sm_{cc}"
    older = [a for a in supported if a <= cc]
    if not older:
        raise RuntimeError(f"this GPU (compute capability {major}.{minor}) is older than any "
                           f"architecture NVRTC {'.'.join(map(str, nvrtc.nvrtc_version()))} "
                           f"supports (sm_{min(supported)} and newer)")
    return f"compute_{max(older)}"


class CUDAStorage(Storage):
    """`size` elements of `dtype` in GPU memory: a block of the caching allocator (None when
    empty), given back to the allocator when the storage is collected."""

    __slots__ = ("_driver", "_index", "_block", "_size")

    def __init__(self, driver, index, block, size, dtype, device):
        # Storage.__init__ written out: a small op creates one of these per result.
        self.dtype = dtype
        self.device = device
        self._version = 0
        self._driver = driver
        self._index = index
        self._block = block
        self._size = size

    def __del__(self):
        # `__del__` rather than a weakref.finalize: ~1 us instead of ~4 us per storage. The
        # allocator's `free` only queues the block (no lock, no driver call), so it is safe
        # wherever the garbage collector runs this, including at interpreter exit.
        block = self._block
        if block is not None:
            self._block = None
            self._driver.allocator.free(block)

    @property
    def _ptr(self):
        return self._block.ptr if self._block is not None else 0

    def __len__(self):
        return self._size

    def data_ptr(self):
        block = self._block
        return block.ptr if block is not None else 0

    def record_stream(self, stream):
        """Keep the memory from reuse until the work `stream` (a StreamHandle) has queued by
        the time the storage dies has run (Tensor.record_stream)."""
        if self._block is not None:
            self._driver.allocator.record_stream(self._block, stream)

    def _check_range(self, start, count):
        if start < 0 or count < 0 or start + count > self._size:
            raise IndexError(f"elements [{start}, {start + count}) are outside a cuda storage "
                             f"of size {self._size}")

    def read(self, start, count):
        self._check_range(start, count)
        host = np.empty(count, dtype=self.dtype.numpy_dtype)
        if count:
            itemsize = self.dtype.itemsize
            self._driver.to_host(self._index, host.ctypes.data, self._ptr + start * itemsize,
                                 count * itemsize)
        return host

    def write(self, start, values, non_blocking=False):
        """Copy host values in; `non_blocking` returns once the copy is queued on the current
        stream (the host array is kept alive until it has run)."""
        values = np.ascontiguousarray(values, dtype=self.dtype.numpy_dtype).reshape(-1)
        count = values.shape[0]
        self._check_range(start, count)
        if count:
            itemsize = self.dtype.itemsize
            self._driver.to_device(self._index, self._ptr + start * itemsize,
                                   values.ctypes.data, count * itemsize,
                                   keep_alive=values if non_blocking else None)

    def copy_from_peer(self, start, source, source_start, count):
        """Copy `count` elements from another device's cuda storage (same dtype)."""
        self._check_range(start, count)
        source._check_range(source_start, count)
        if count:
            itemsize = self.dtype.itemsize
            self._driver.peer_copy(self._index, self._ptr + start * itemsize, source._index,
                                   source._ptr + source_start * itemsize, count * itemsize)

    def resize_(self, size):
        if size == self._size:
            return self
        itemsize = self.dtype.itemsize
        block = self._driver.alloc(self._index, size * itemsize) if size else None
        ptr = block.ptr if block is not None else 0
        keep = min(size, self._size)
        try:
            if keep:
                self._driver.device_copy(self._index, ptr, self._ptr, keep * itemsize)
            if size > keep:  # new elements read as zero, as on cpu
                self._driver.zero(self._index, ptr + keep * itemsize, (size - keep) * itemsize)
        except BaseException:
            if block is not None:
                self._driver.allocator.free(block)
            raise
        old, self._block, self._size = self._block, block, size
        if old is not None:
            self._driver.allocator.free(old)  # the old block goes back to the cache now
        return self


def new_storage(driver, index, device, size, dtype):
    """A new storage of `size` elements on device `index` of a started driver (`device`: its
    reftorch.device). What `CUDABackend.allocate` returns; kernels call it for their results
    with an operand's driver, index and device, which proves the start and the index checks
    done (it saves a small op ~10 Python calls)."""
    nbytes = size * dtype.itemsize
    block = (driver.allocator.malloc(index, nbytes, driver.streams.current(index)) if nbytes
             else None)
    return CUDAStorage(driver, index, block, size, dtype, device)


class CUDABackend(DeviceBackend):
    """The `cuda` device type. Lazy: the driver is started by the first call that needs it."""

    type_name = "cuda"

    def __init__(self, driver_module=None):
        self._driver_module = driver_module  # None: cuda.bindings.driver
        self._driver = None
        self._error = None
        self._initialized = False          # as torch.cuda: counting devices does not count
        self._lock = threading.Lock()
        self._local = threading.local()     # the current device is per thread, as in CUDA
        self._devices = {}
        self._constants = ScalarConstants(SCALAR_CONSTANTS)   # where: (index, StreamHandle)

    # --- lazy initialisation ----------------------------------------------------------------
    def driver(self):
        """The started driver; RuntimeError (remembered) when there is no usable GPU."""
        found = self._driver
        if found is not None:
            return found
        with self._lock:
            if self._driver is None:
                if self._error is not None:
                    raise RuntimeError(self._error)
                try:
                    self._driver = Driver.start(self._driver_module)
                except RuntimeError as exc:
                    self._error = str(exc)
                    raise RuntimeError(self._error) from exc
            return self._driver

    def _init(self):
        """The driver, for a call that uses a device (not just counts them)."""
        driver = self.driver()
        self._initialized = True
        return driver

    def init(self):
        self._init()

    def is_initialized(self):
        return self._initialized

    def is_available(self):
        return self.device_count() > 0

    # --- devices ----------------------------------------------------------------------------
    def device_count(self):
        try:
            return self.driver().count
        except RuntimeError:
            return 0

    def current_device(self):
        self._init()
        return getattr(self._local, "index", 0)

    def set_device(self, index):
        driver = self._init()
        driver.check_index(index)
        self._local.index = index
        driver.activate(index, force=True)

    def index_of(self, device=None):
        """The device index meant by `device` (None, an int, or a device with or without one)."""
        if device is None:
            return self.current_device()
        if isinstance(device, int):
            return device
        index = Device(device).index if isinstance(device, str) else device.index
        return self.current_device() if index is None else index

    def device(self, index):
        """The one `reftorch.device('cuda', index)` object storages on that device share."""
        found = self._devices.get(index)
        if found is None:
            found = self._devices.setdefault(index, Device("cuda", index))
        return found

    def get_device_name(self, device=None):
        index = self.index_of(device)
        return self._init().name(index)

    def get_device_capability(self, device=None):
        index = self.index_of(device)
        return self._init().capability(index)

    def synchronize(self, device=None):
        index = self.index_of(device)
        self._init().synchronize(index)

    def get_device_properties(self, device=None):
        index = self.index_of(device)
        driver = self._init()
        driver.check_index(index)
        major, minor = driver.capability(index)
        return DeviceProperties(name=driver.name(index), major=major, minor=minor,
                                total_memory=driver.total_memory(index),
                                multi_processor_count=driver.attribute(
                                    index, "MULTIPROCESSOR_COUNT"))

    # --- memory -----------------------------------------------------------------------------
    def allocate(self, size, dtype, device):
        driver = self._driver if self._initialized else self._init()
        index = device._index
        if index is None:
            index = self.current_device()
        if not 0 <= index < driver.count:
            driver.check_index(index)   # raises
        return new_storage(driver, index, self._devices.get(index) or self.device(index),
                           size, dtype)

    def scalar_operand(self, value, dtype, device, make):
        """A Python number operand as a device constant made once: `x * 0.5` in a loop
        copies 0.5 to the device on the first call only, instead of an allocation, a copy
        and an event every call. Constants are keyed by the number's exact value, the dtype,
        the device and the current stream (the copy was queued there: work on another stream
        could run before it). One is handed out again only while nothing has written to it
        or made it require grad (a dispatch hook sees operands, and so could). The cache
        keeps SCALAR_CONSTANTS of them, oldest out first, and `empty_cache` drops them; while
        cached they count in `memory_allocated`, as PyTorch's cuBLAS workspaces do."""
        index = device._index
        if index is None:
            index = self.current_device()
        driver = self._driver if self._initialized else self._init()
        return self._constants.get(value, dtype, device,
                                   (index, driver.streams.current(index)), make)

    def mem_get_info(self, device=None):
        index = self.index_of(device)
        return self._init().mem_get_info(index)

    def memory_stats(self, device=None):
        """The allocator's counters for a device; empty before the driver has started (as
        PyTorch's are before CUDA is initialised)."""
        if not self._initialized:
            return {}
        index = self.index_of(device)
        self._driver.check_index(index)
        return self._driver.allocator.stats(index)

    def reset_peak_memory_stats(self, device=None, names=None):
        if not self._initialized:
            return
        index = self.index_of(device)
        self._driver.check_index(index)
        if names is None:
            self._driver.allocator.reset_peak(index)
        else:
            self._driver.allocator.reset_peak(index, names)

    def empty_cache(self):
        if self._initialized:
            self._constants.clear()   # their blocks go back too
            self._driver.allocator.empty_cache()

    def pinned_storage(self, size, dtype):
        """A cpu storage of `size` elements in page-locked memory (Tensor.pin_memory)."""
        from reftorch._storage import CPUStorage
        return CPUStorage(self._init().pinned.array(size, dtype.numpy_dtype), dtype)

    def is_pinned(self, storage):
        array = getattr(storage, "array", None)
        return array is not None and pinned.is_pinned(array)

    # --- streams ------------------------------------------------------------------------------
    def streams(self):
        """The started driver's `Streams` (stream and event handles, current streams)."""
        return self._init().streams


class DeviceProperties:
    """What `get_device_properties` reports (the fields of PyTorch's object we can fill)."""

    def __init__(self, name, major, minor, total_memory, multi_processor_count):
        self.name, self.major, self.minor = name, major, minor
        self.total_memory = total_memory
        self.multi_processor_count = multi_processor_count

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count})")
