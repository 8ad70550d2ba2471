"""NumPy emulations of reftorch-cuda's matrix products (kernels/gemm.cu), registered with
`cuda_kernel_emulation.emulates`.

The parameters are decoded from the raw bytes of `GemmArgs`, with the layout written out here
(not taken from the plugin), and every operand is a NumPy view of device memory over exactly
the elements the kernel reads or writes, so an index outside a buffer fails the view. The
launch shape is checked against the kernel's tiles. The product is NumPy's matmul in the
kernel's accumulation type (float64 for double, float32 for the rest), whose order of
additions differs from the kernel's FMA chains and tensor-core sums: tests compare within a
rounding bound, as they do on a GPU.
"""
from __future__ import annotations

import ctypes
import struct

import numpy as np

from spec_tests.cuda_kernel_emulation import STORAGE, compute_type, emulates, pointer, slots

# GemmArgs: int64 batch, m, n, k; int64 (batch, row, col) strides of out, a, b, input;
# double alpha, beta; int32 has_input; int32 unused.
LAYOUT = struct.Struct("<4q12q2d2i")
THREADS = 256
# Block tiles (rows, cols) per kernel, as gemm.cu's SimtTile<T> and RT_MMA_BM/BN set them.
TILES = {"gemm_kernel<float>": (128, 128), "gemm_kernel<double>": (64, 64),
         "mma_gemm_kernel<rt_float16>": (128, 128), "mma_gemm_kernel<rt_bfloat16>": (128, 128)}


def decode(address):
    values = LAYOUT.unpack(ctypes.string_at(address, LAYOUT.size))
    batch, m, n, k = values[:4]
    out_s, a_s, b_s, in_s = (tuple(values[4 + 3 * i:7 + 3 * i]) for i in range(4))
    alpha, beta, has_input, unused = values[16:]
    assert unused == 0 and has_input in (0, 1)
    return (batch, m, n, k), (out_s, a_s, b_s, in_s), alpha, beta, bool(has_input)


@emulates(r"(?:mma_)?gemm_kernel<(.+)>")
def gemm(driver, match, grid, block, shared, params):
    p = slots(params, 5)      # (GemmArgs, out, a, b, input)
    (batch, m, n, k), (out_s, a_s, b_s, in_s), alpha, beta, has_input = decode(p[0])
    tile_m, tile_n = TILES[match.group(0)]
    assert block == (THREADS, 1, 1) and shared == 0
    assert grid == (-(-n // tile_n), -(-m // tile_m), min(batch, 65535)), (grid, m, n, batch)
    assert min(batch, m, n) > 0 and k >= 0
    storage = STORAGE[match.group(1)]
    c = compute_type(storage)
    out = driver.view(pointer(p[1]), storage, (batch, m, n), out_s)
    if k:          # with K = 0 the kernel loads no tile of a or b
        a = driver.view(pointer(p[2]), storage, (batch, m, k), a_s).astype(c)
        b = driver.view(pointer(p[3]), storage, (batch, k, n), b_s).astype(c)
        with np.errstate(all="ignore"):
            value = np.matmul(a, b)
    else:
        value = np.zeros((batch, m, n), c)
    with np.errstate(all="ignore"):
        if c(alpha) != 1:
            value = value * c(alpha)
        if has_input:
            addend = driver.view(pointer(p[4]), storage, (batch, m, n), in_s).astype(c)
            value = value + (addend if c(beta) == 1 else addend * c(beta))
        out[...] = value.astype(storage)
