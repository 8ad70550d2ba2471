"""cdist's p = 1 and p = 2 distances over the C module `_distance` (src/distance.c), float32
and float64 on cpu.

Each distance sums the |differences| (squared for p = 2) over the feature dim in NumPy's
pairwise order, as the reference's np.sum over its (N, M, D) array does, then takes sqrt
(the reference's ** 0.5): bit for bit the reference's result for row-major inputs, without
the (N, M, D) array. (For other layouts NumPy's order follows the memory layout of that
array, so there the two agree within rounding.)

Declined (the reference runs): other p, other or mixed dtypes, batch dims that differ between
the inputs (broadcasting) or do not merge into one strided dim, an empty feature dim, and
calls with fewer than MIN_TERMS terms.
"""
from __future__ import annotations

import math

from reftorch import _dtype as D
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold

from . import _distance
from .gemm import _collapsed_stride
from .kernels import _on_cpu_as

DTYPES = (D.float32, D.float64)

# Calls with fewer terms (N * M * D) go to the reference, whose few NumPy calls cost about
# what the plugin's Python side does there (the reference: ~15 us at 8 x 8 x 32).
MIN_TERMS = 4096


def register(registrar):
    """Register the kernel with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("cdist", "cpu", DTYPES, cdist_kernel)


def cdist_kernel(out, inputs, dtypes, params):
    """(..., N, M) distances between the rows of x1 (..., N, D) and x2 (..., M, D)."""
    if len(inputs) != 2 or params.get("p") not in (1.0, 2.0):
        return NotImplemented
    x1, x2 = inputs
    dtype = dtypes[0]
    if dtype not in DTYPES or not (_on_cpu_as(x1, dtype) and _on_cpu_as(x2, dtype)):
        return NotImplemented
    batch = x1._shape[:-2]
    if x2._shape[:-2] != batch:
        return NotImplemented
    n, d, m = x1._shape[-2], x1._shape[-1], x2._shape[-2]
    if d == 0 or math.prod(batch) * n * m * d < size_threshold(MIN_TERMS):
        return NotImplemented
    strides1, strides2 = _batched(x1), _batched(x2)
    if strides1 is None or strides2 is None:
        return NotImplemented
    result = Tensor._empty(batch + (n, m), dtype)
    _distance.cdist(int(params["p"]), x1._storage.array, x1._offset,
                    (math.prod(batch), n, d), strides1, x2._storage.array, x2._offset, m,
                    strides2, result._storage.array)
    return result


def _batched(t):
    """(batch, row, feature) strides of t, its leading dims walked as one (None when they do
    not merge)."""
    batch = _collapsed_stride(t._shape[:-2], t._strides[:-2])
    return None if batch is None else (batch,) + tuple(t._strides[-2:])
