"""Dtype conversions in copy_ on cuda (kernels/cast.cu), as NumPy converts them (the
reference's np.copyto with casting="unsafe"):

  float <-> float      float32, float64, float16, bfloat16, each way
  float -> bool, int   bool, uint8, int8, int16, int32, int64
  bool, int -> float

A float-to-integer conversion is defined (truncation toward zero) only for values whose
truncation fits the integer type; NumPy's result for NaN and out-of-range values is the
platform's. The kernel converts what is defined and flags the rest, and a flagged call
declines after the fact: the reference then writes every element of `out` (which never
overlaps `src`: they have different dtypes, so different storages). Integer-to-integer
conversions are not served (they take the fallback).
"""
from __future__ import annotations

import ctypes

import numpy as np

from reftorch import _dtype as D
from reftorch._tensor import Tensor

from .kernel_base import FLOAT_TYPES, INT_TYPES, Program, run_elementwise

SCALAR_TYPES = {**FLOAT_TYPES, **INT_TYPES}
# (destination, source) dtype names the kernel converts.
CASTS = tuple([(dst, src) for src in FLOAT_TYPES for dst in SCALAR_TYPES if dst != src]
              + [(dst, src) for src in INT_TYPES for dst in FLOAT_TYPES])


def cast_expression(dst_name, src_name):
    return f"cast_kernel<{SCALAR_TYPES[dst_name]}, {SCALAR_TYPES[src_name]}>"


CAST = Program("cast.cu", tuple(cast_expression(dst, src) for dst, src in CASTS))
PROGRAMS = (CAST,)
_SERVED = frozenset(CASTS)


def _may_be_undefined(dst, src):
    """Float to integer: NaN and out-of-range values have no defined result."""
    return src.name in FLOAT_TYPES and dst.name in INT_TYPES and dst is not D.bool


def cast(out, src):
    """Convert `src` into `out` (same shape, one cuda device, checked by copy_kernel), or
    NotImplemented when the pair is not served or an element's conversion is undefined."""
    if (out.dtype.name, src.dtype.name) not in _SERVED:
        return NotImplemented
    if out.numel() == 0:
        return out
    flag = None
    if _may_be_undefined(out.dtype, src.dtype):
        flag = Tensor._empty((1,), D.int32, out.device)
        flag._storage.write(0, np.zeros(1, np.int32))
    flag_arg = ctypes.c_uint64(flag.data_ptr() if flag is not None else 0)
    result = run_elementwise(CAST, cast_expression(out.dtype.name, src.dtype.name), out,
                             (src,), out.dtype, (flag_arg,))
    if flag is not None and result is not NotImplemented and flag._storage.read(0, 1)[0]:
        return NotImplemented  # NaN or out of range somewhere: the reference decides
    return result

