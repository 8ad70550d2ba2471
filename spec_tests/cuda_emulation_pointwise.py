"""NumPy emulations of reftorch-cuda's kernels/pointwise.cu (lerp, addcmul, addcdiv, pow and
integer add/sub/mul) and kernels/masked.cu (masked_fill), operation for operation in the
kernels' computation type, registered with cuda_kernel_emulation's `emulates` (which imports
this module). Parameters are decoded from the raw bytes with the kernels' C layouts.
"""
from __future__ import annotations

import ctypes

import numpy as np

from spec_tests import cuda_kernel_emulation as E


def _lerp(start, end, weight, _value):
    difference = end - start
    one = weight.dtype.type(1)
    return np.where(np.abs(weight) < 0.5, start + weight * difference,
                    end - difference * (one - weight))


TERNARY = {
    "Lerp": _lerp,
    "Addcmul": lambda x, t1, t2, value: x + value * t1 * t2,
    "Addcdiv": lambda x, t1, t2, value: x + value * (t1 / t2),
}


@E.emulates(r"ternary_kernel<(\w+), (\w+)Op(?:, (\w+))?>")
def ternary(driver, match, grid, block, shared, params):
    E.grid_stride(grid, block)
    assert shared == 0
    p = E.slots(params, 6)      # (geometry, out, a, b, c, double value)
    shape, strides = E.geometry(p[0], 4)
    storage = E.STORAGE[match.group(1)]
    compute = E.compute_type(storage)
    value = compute(ctypes.c_double.from_address(p[5]).value)
    types = [storage] * 3 + [E.STORAGE[match.group(3) or match.group(1)]]
    out, a, b, c = (driver.view(E.pointer(p[k + 1]), types[k], shape, s)
                    for k, s in enumerate(strides))
    with np.errstate(all="ignore"):
        result = TERNARY[match.group(2)](a.astype(compute), b.astype(compute),
                                         c.astype(compute), value)
        out[...] = result.astype(storage)


@E.emulates(r"pow_kernel<(\w+)(?:, (\w+))?>")
def power(driver, match, grid, block, shared, params):
    E.grid_stride(grid, block)
    assert shared == 0
    p = E.slots(params, 5)      # (geometry, out, a, b, int scalar)
    shape, strides = E.geometry(p[0], 3)
    storage = E.STORAGE[match.group(1)]
    compute = E.compute_type(storage)
    types = [storage, storage, E.STORAGE[match.group(2) or match.group(1)]]
    out, a, b = (driver.view(E.pointer(p[k + 1]), types[k], shape, s)
                 for k, s in enumerate(strides))
    x, y = a.astype(compute), b.astype(compute)
    scalar = ctypes.c_int.from_address(p[4]).value != 0
    with np.errstate(all="ignore"):
        value = np.where(y == 2, x * x, np.power(x, y))
        if scalar:
            value = np.where(y == 0.5, np.sqrt(x), np.where(y == -1, 1 / x, value))
        out[...] = value.astype(storage)


INT_BINARY = {
    "IntAdd": lambda a, b, alpha: a + alpha * b,
    "IntSub": lambda a, b, alpha: a - alpha * b,
    "IntMul": lambda a, b, alpha: a * b,
}


@E.emulates(r"int_binary_kernel<(.+), (\w+)Op>")
def int_binary(driver, match, grid, block, shared, params):
    E.grid_stride(grid, block)
    assert shared == 0
    p = E.slots(params, 5)      # (geometry, out, a, b, long long alpha)
    shape, strides = E.geometry(p[0], 3)
    storage = E.INTS[match.group(1)]
    # modular arithmetic on 64-bit unsigned words, cut to the element width at the end
    alpha = np.uint64(ctypes.c_uint64.from_address(p[4]).value)
    out, a, b = (driver.view(E.pointer(p[k + 1]), storage, shape, s)
                 for k, s in enumerate(strides))
    wide = INT_BINARY[match.group(2)](a.astype(np.int64).view(np.uint64),
                                      b.astype(np.int64).view(np.uint64), alpha)
    out[...] = wide.astype(storage)


@E.emulates(r"masked_fill_kernel<(.+)>")
def masked_fill(driver, match, grid, block, shared, params):
    E.grid_stride(grid, block)
    assert shared == 0
    p = E.slots(params, 5)      # (geometry, out, a, mask, W value)
    shape, strides = E.geometry(p[0], 3)
    width = E.WORDS[match.group(1)]
    void = np.dtype((np.void, width))
    out, a = (driver.view(E.pointer(p[k + 1]), void, shape, strides[k]) for k in (0, 1))
    mask = driver.view(E.pointer(p[3]), np.bool_, shape, strides[2])
    value = np.frombuffer(ctypes.string_at(p[4], width), void)[0]
    out[...] = np.where(mask, value, a)
