"""An emulated CUDA driver: just enough of `cuda.bindings.driver`, on host memory, to run
reftorch-cuda's host side without a GPU.

Allocations are NumPy byte buffers (filled with garbage, as device memory is) and every copy
is bounds-checked against them. `cuLaunchKernel` decodes the kernel parameters from the raw
bytes the plugin hands it and does the kernel's work with NumPy, through the per-kernel
emulations of `cuda_kernel_emulation` (written independently of the plugin's ctypes
structs). So the emulation checks geometry packing, pointers, offsets, dispatch, fallbacks and
memory management; only a GPU checks the device code itself.
"""
from __future__ import annotations

import ctypes
import enum

import numpy as np

from spec_tests import cuda_kernel_emulation


class EmulatedDriver:
    """The driver API over host memory; `lowered` maps lowered kernel names to the name
    expressions they were compiled from."""

    class CUresult(enum.IntEnum):
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_VALUE = 1
        CUDA_ERROR_INSUFFICIENT_DRIVER = 35
        CUDA_ERROR_NO_DEVICE = 100
        CUDA_ERROR_INVALID_DEVICE = 101
        CUDA_ERROR_INVALID_CONTEXT = 201
        CUDA_ERROR_NOT_FOUND = 500

    class CUdevice_attribute(enum.IntEnum):
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76

    def __init__(self, lowered, count=2, capability=(9, 0)):
        self.lowered = lowered            # lowered name -> name expression
        self.count, self.capability = count, capability
        self.memory = {}                  # address -> uint8 buffer
        self.current = None
        self.launches = []                # name expressions, in launch order

    OK = (CUresult.CUDA_SUCCESS,)

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
        return self.OK if self.current else self._fail("CUDA_ERROR_INVALID_CONTEXT")

    def cuDeviceGetName(self, length, dev):
        return (self.CUresult.CUDA_SUCCESS, f"Emulated GPU {dev}".encode().ljust(length, b"\0"))

    def cuDeviceGetAttribute(self, attribute, dev):
        major = attribute == self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        return (self.CUresult.CUDA_SUCCESS, self.capability[0 if major else 1])

    def cuGetErrorName(self, err):
        return (self.CUresult.CUDA_SUCCESS, self.CUresult(err).name.encode())

    def cuGetErrorString(self, err):
        return (self.CUresult.CUDA_SUCCESS, b"emulated")

    # --- memory -------------------------------------------------------------------------------
    def cuMemAlloc(self, nbytes):
        if nbytes <= 0 or self.current is None:
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE, 0)
        buffer = np.full(nbytes, 0xA5, dtype=np.uint8)
        self.memory[buffer.ctypes.data] = buffer
        return (self.CUresult.CUDA_SUCCESS, buffer.ctypes.data)

    def cuMemFree(self, ptr):
        if self.memory.pop(int(ptr), None) is None:
            return self._fail("CUDA_ERROR_INVALID_VALUE")
        return self.OK

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
        self.launches.append(expression)
        cuda_kernel_emulation.run(self, expression, (gx, gy, gz), (bx, by, bz), shared, params)
        return self.OK
