"""NumPy emulations of reftorch-cuda's kernels, for the emulated driver (`cuda_emulator`).

Each emulation is registered under a regular expression over the kernel's name expression
and receives the driver (for `view` of device memory), the match, the launch configuration and
the address of the kernel's parameter array (one pointer per parameter, as cuLaunchKernel
takes them). Parameter layouts are decoded here from raw bytes with the kernel's C layout,
written out independently of the plugin's ctypes structs, so a packing mistake on the host
side shows up as a wrong result.
"""
from __future__ import annotations

import ctypes
import re
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNELS_DIR = ROOT / "plugin_cuda/reftorch_cuda/kernels"
STORAGE = {"float": np.float32, "double": np.float64, "rt_float16": np.float16,
           "rt_bfloat16": ml_dtypes.bfloat16}
WORDS = {"unsigned char": 1, "unsigned short": 2, "unsigned int": 4,
         "unsigned long long": 8, "rt_bytes16": 16}

_EMULATIONS = []   # (compiled pattern, function)


def emulates(pattern):
    def register(fn):
        _EMULATIONS.append((re.compile(pattern), fn))
        return fn
    return register


def run(driver, expression, grid, block, shared, params):
    for pattern, fn in _EMULATIONS:
        match = pattern.fullmatch(expression)
        if match:
            return fn(driver, match, grid, block, shared, params)
    raise AssertionError(f"no emulation for kernel {expression}")


# --- parameter decoding -----------------------------------------------------------------------

def max_dims():
    source = (KERNELS_DIR / "elementwise.cu").read_text()
    return int(re.search(r"#define RT_MAX_DIMS (\d+)", source).group(1))


def slots(params, count):
    """The kernel's parameter addresses."""
    return (ctypes.c_void_p * count).from_address(params)


def geometry(address, operands):
    """Decode `Geometry<operands>`: (int64 numel, int32 ndim, int32 pad, int64 sizes[D],
    int64 strides[operands][D])."""
    dims = max_dims()
    raw = ctypes.string_at(address, 16 + 8 * dims * (operands + 1))
    numel, ndim = struct.unpack_from("<qi", raw)
    sizes = np.frombuffer(raw, "<i8", dims, 16)
    strides = np.frombuffer(raw, "<i8", operands * dims, 16 + 8 * dims).reshape(operands, -1)
    assert 1 <= ndim <= dims and numel == int(np.prod(sizes[:ndim])) > 0
    return tuple(sizes[:ndim]), [tuple(s[:ndim]) for s in strides]


def pointer(address):
    return ctypes.c_uint64.from_address(address).value


def grid_stride(grid, block):
    """The elementwise kernels' launch shape: a 1-D grid of 256-thread blocks."""
    assert grid[1:] == (1, 1) and block == (256, 1, 1) and grid[0] <= 65535


# --- elementwise.cu ---------------------------------------------------------------------------

@emulates(r"binary_kernel<(.+), (\w+)Op>")
def binary(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    p = slots(params, 5)      # (geometry, out, a, b, alpha)
    shape, strides = geometry(p[0], 3)
    storage = STORAGE[match.group(1)]
    compute = np.float64 if storage is np.float64 else np.float32
    alpha = compute(ctypes.c_double.from_address(p[4]).value)
    out, a, b = (driver.view(pointer(p[k + 1]), storage, shape, s)
                 for k, s in enumerate(strides))
    x, y = a.astype(compute), b.astype(compute)
    with np.errstate(all="ignore"):
        value = {"Add": lambda: x + alpha * y, "Sub": lambda: x - alpha * y,
                 "Mul": lambda: x * y, "Div": lambda: x / y}[match.group(2)]()
        out[...] = value.astype(storage)


@emulates(r"copy_kernel<(.+)>")
def copy(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    p = slots(params, 3)      # (geometry, dst, src)
    shape, strides = geometry(p[0], 2)
    void = np.dtype((np.void, WORDS[match.group(1)]))
    dst, src = (driver.view(pointer(p[k + 1]), void, shape, s) for k, s in enumerate(strides))
    dst[...] = src
