"""The `cuda` device: storages in GPU memory, through the CUDA driver API (cuda.bindings).

Nothing here touches the driver until the first cuda allocation or query: `import reftorch`
on a machine without a GPU or driver loads the plugin silently, and the first use raises a
RuntimeError that says what is missing. The failure is remembered, as PyTorch does.

Each device index uses the driver's primary context (the one the CUDA runtime, and so
PyTorch and CuPy, share). Every driver call's CUresult is checked; a failure raises
`CUDAError` (a RuntimeError) naming the error and the call. All work goes to the legacy
default stream, so copies and kernels run in the order they were issued, and copies to the
host return when the data has arrived.
"""
from __future__ import annotations

import ctypes
import threading
import warnings
import weakref

import numpy as np

from reftorch._device import device as Device
from reftorch._storage import DeviceBackend, Storage

NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
             "and installed a driver from http://www.nvidia.com/Download/index.aspx")
NO_DEVICE = "No CUDA GPUs are available"
OLD_DRIVER = ("The NVIDIA driver on your system is too old for the CUDA version reftorch-cuda "
              "uses (cuda-bindings {version}); update the driver")
NO_BINDINGS = ("reftorch-cuda needs the cuda-bindings package to reach the GPU "
               "(pip install cuda-bindings): {error}")
BLOCK = 256            # threads per block for every elementwise kernel
MAX_BLOCKS = 65535     # grid-stride loops cover the rest


class CUDAError(RuntimeError):
    """A CUDA driver call failed."""


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
        if err == cu.CUresult.CUDA_ERROR_INSUFFICIENT_DRIVER:
            version = getattr(cu, "__version__", None) or _bindings_version()
            raise RuntimeError(OLD_DRIVER.format(version=version))
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

    def activate(self, index):
        """Make device `index`'s primary context current on this thread."""
        ctx = self._contexts.get(index)
        if ctx is None:
            with self._lock:
                ctx = self._contexts.get(index)
                if ctx is None:
                    ctx = self.check(self.cu.cuDevicePrimaryCtxRetain(self.handle(index)),
                                     "cuDevicePrimaryCtxRetain")
                    self._contexts[index] = ctx
        self.check(self.cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

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

    def arch(self, index):
        """What to compile for device `index`: its own `sm_XY` when NVRTC knows it, else PTX
        for the newest older architecture NVRTC knows (the driver compiles that on load)."""
        found = self._archs.get(index)
        if found is None:
            found = self._archs[index] = arch_for(self.capability(index))
        return found

    def synchronize(self, index):
        self.activate(index)
        self.check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")

    # --- memory -----------------------------------------------------------------------------
    def alloc(self, index, nbytes):
        self.activate(index)
        return int(self.check(self.cu.cuMemAlloc(nbytes), "cuMemAlloc"))

    def free(self, index, ptr):
        self.activate(index)
        self.check(self.cu.cuMemFree(ptr), "cuMemFree")

    def to_device(self, index, dst, host_address, nbytes):
        self.activate(index)
        self.check(self.cu.cuMemcpyHtoD(dst, host_address, nbytes), "cuMemcpyHtoD")

    def to_host(self, index, host_address, src, nbytes):
        self.activate(index)
        self.check(self.cu.cuMemcpyDtoH(host_address, src, nbytes), "cuMemcpyDtoH")

    def device_copy(self, index, dst, src, nbytes):
        self.activate(index)
        self.check(self.cu.cuMemcpyDtoD(dst, src, nbytes), "cuMemcpyDtoD")

    def zero(self, index, dst, nbytes):
        self.activate(index)
        self.check(self.cu.cuMemsetD8(dst, 0, nbytes), "cuMemsetD8")

    # --- kernels ----------------------------------------------------------------------------
    def function(self, index, program, name_expression):
        """The CUfunction for one instantiation of `program` on device `index`. The first
        call compiles the program for the device's arch (or finds it in the cache) and loads
        it into the device's context; later calls are a dictionary lookup."""
        key = (index, program, name_expression)
        found = self._functions.get(key)
        if found is None:
            with self._lock:
                compiled = program.compile(self.arch(index))
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
        blocks = max(1, min((numel + BLOCK - 1) // BLOCK, MAX_BLOCKS))
        self.launch_grid(index, program, name_expression, (blocks, 1, 1), (BLOCK, 1, 1), 0,
                         args)

    def launch_grid(self, index, program, name_expression, grid, block, shared_bytes, args):
        """Launch one kernel with an explicit configuration: `grid` and `block` are 3-tuples,
        `shared_bytes` the dynamic shared memory; `args` are ctypes objects, one per kernel
        parameter, in order (the driver copies them when the launch is issued)."""
        function = self.function(index, program, name_expression)
        pointers = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        self.activate(index)
        self.check(self.cu.cuLaunchKernel(function, *grid, *block, shared_bytes, 0,
                                          ctypes.addressof(pointers), 0),
                   f"cuLaunchKernel({name_expression})")


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
    """`size` elements of `dtype` in GPU memory at `ptr` (0 when empty), freed on collection."""

    __slots__ = ("_driver", "_index", "_ptr", "_size", "_finalizer")

    def __init__(self, driver, index, ptr, size, dtype, device):
        super().__init__(dtype, device)
        self._driver = driver
        self._index = index
        self._set_memory(ptr, size)

    def _set_memory(self, ptr, size):
        self._ptr = ptr
        self._size = size
        if ptr:
            self._finalizer = weakref.finalize(self, _free, self._driver, self._index, ptr)
            self._finalizer.atexit = False  # at exit the process releases everything anyway
        else:
            self._finalizer = None

    def __len__(self):
        return self._size

    def data_ptr(self):
        return self._ptr

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

    def write(self, start, values):
        values = np.ascontiguousarray(values, dtype=self.dtype.numpy_dtype).reshape(-1)
        count = values.shape[0]
        self._check_range(start, count)
        if count:
            itemsize = self.dtype.itemsize
            self._driver.to_device(self._index, self._ptr + start * itemsize,
                                   values.ctypes.data, count * itemsize)

    def resize_(self, size):
        if size == self._size:
            return self
        itemsize = self.dtype.itemsize
        ptr = self._driver.alloc(self._index, size * itemsize) if size else 0
        keep = min(size, self._size)
        try:
            if keep:
                self._driver.device_copy(self._index, ptr, self._ptr, keep * itemsize)
            if size > keep:  # new elements read as zero, as on cpu
                self._driver.zero(self._index, ptr + keep * itemsize, (size - keep) * itemsize)
        except BaseException:
            if ptr:
                _free(self._driver, self._index, ptr)
            raise
        if self._finalizer is not None:
            self._finalizer()  # frees the old memory now
        self._set_memory(ptr, size)
        return self


def _free(driver, index, ptr):
    try:
        driver.free(index, ptr)
    except Exception as exc:  # a finalizer cannot raise; say what happened instead
        warnings.warn(f"reftorch-cuda: freeing device memory failed: {exc}", ResourceWarning,
                      stacklevel=2)


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
        driver.activate(index)

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

    # --- memory -----------------------------------------------------------------------------
    def allocate(self, size, dtype, device):
        driver = self._init()
        index = self.index_of(device)
        driver.check_index(index)
        nbytes = size * dtype.itemsize
        ptr = driver.alloc(index, nbytes) if nbytes else 0
        return CUDAStorage(driver, index, ptr, size, dtype, self.device(index))
