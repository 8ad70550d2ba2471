"""The kernels reftorch calls: float32/float64 `add`, `sub`, `mul`, `div`, `copy_`, `cat` and
`flip` on cpu.

Each kernel checks here, in Python, everything the C code must not be handed wrongly, and
declines (returns NotImplemented, so the reference kernel runs) for any call it does not
accelerate: other or mixed dtypes, small tensors, `div` with a rounding mode, or an output
whose memory overlaps itself or an input in a way an elementwise loop cannot write safely.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from reftorch import _dtype as D
from reftorch._dispatch import get_op
from reftorch._ops.elementwise import result_strides
from reftorch._promotion import broadcast_shapes
from reftorch._shape import (common_format, contiguous_strides, is_contiguous,
                             is_non_overlapping_and_dense, kept_strides)
from reftorch._storage import CPUStorage
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold
from reftorch_plugins.geometry import broadcast_strides, coalesce

from . import _C

# Calls on fewer elements than this go to the reference kernel (one NumPy call). Below it
# the Python side of a plugin call (checks, loop geometry, allocation: 3-5 us) costs more
# than the faster loop saves. Measured on a 2-core x86-64, contiguous a + b and a.add_(b),
# best of many runs: float32 at 2,048 elements plugin 6.5 us vs reference 6.3 us, at 4,096
# 7.0 vs 7.3, at 16,384 9.4 vs 13.7; float64 crosses over near 2,048. Transposed operands
# need more Python geometry work and cross over later (about 16,384).
MIN_NUMEL = 4096

DTYPES = (D.float32, D.float64)
OPS = {"add": _C.ADD, "sub": _C.SUB, "mul": _C.MUL, "div": _C.DIV}


def register(registrar):
    """Register every kernel with reftorch (called by reftorch_cpu.register)."""
    for name, code in OPS.items():
        # min_numel: reftorch skips the kernel for small results without calling it
        registrar.kernel(name, "cpu", DTYPES, _binary_kernel(get_op(name), code),
                         min_numel=MIN_NUMEL)
    registrar.kernel("copy_", "cpu", DTYPES, copy_kernel)
    registrar.kernel("cat", "cpu", DTYPES, cat_kernel)
    registrar.kernel("flip", "cpu", DTYPES, flip_kernel)


def _binary_kernel(op, code):
    def kernel(out, inputs, dtypes, params):
        """out = a (op) b through the C loop, or NotImplemented to decline."""
        # Small calls are the common decline: rule them out before any other check. A
        # broadcast result has at most numel(a) * numel(b) elements (a + 1 declines here).
        if len(inputs) != 2:
            return NotImplemented
        a_shape, b_shape = inputs[0]._shape, inputs[1]._shape
        a_numel = math.prod(a_shape)
        positions = a_numel if a_shape == b_shape else a_numel * math.prod(b_shape)
        if positions < size_threshold(MIN_NUMEL):
            return NotImplemented
        dtype = dtypes[0]
        if dtype not in DTYPES or dtypes[1] is not dtype or dtypes[2] is not dtype:
            return NotImplemented
        alpha = _alpha(params, dtype)
        if alpha is None or params.get("rounding_mode") is not None:
            return NotImplemented
        a, b = inputs
        if not (_on_cpu_as(a, dtype) and _on_cpu_as(b, dtype)):
            return NotImplemented
        if out is None and a._shape == b._shape and \
                a._strides == b._strides == contiguous_strides(a._shape):
            # The common call, two contiguous operands of one shape: one block of memory,
            # walked in order, into a new contiguous result (what the general path finds)
            result = Tensor._empty(a._shape, dtype)
            shape, strides = (a_numel,), _ONE_BLOCK
        else:
            prepared = _prepare(op, out, a, b, dtype)
            if prepared is None:
                return NotImplemented
            result, shape, strides = prepared
        _C.binary(code, shape, result._storage.array, result._offset, strides[0],
                  a._storage.array, a._offset, strides[1],
                  b._storage.array, b._offset, strides[2], alpha)
        return result
    return kernel


_ONE_BLOCK = ((1,), (1,), (1,))  # unit strides of out, a and b over one dense block


def _prepare(op, out, a, b, dtype):
    """(result, loop shape, loop strides) for any geometry, or None to decline: a
    broadcast result too small, too many dims after merging, or an unsafe `out`."""
    inputs = (a, b)
    shape = a._shape if a._shape == b._shape else broadcast_shapes(a._shape, b._shape)
    numel = math.prod(shape)
    if numel < size_threshold(MIN_NUMEL) or (out is not None and out._shape != shape):
        return None
    result = _new_result(op, shape, dtype, inputs) if out is None else out
    shape, strides = _geometry(result, inputs, numel)
    if len(shape) > _C.MAX_NDIM:
        return None
    if out is not None and not _safe_to_write(out, shape, strides, inputs, dtype):
        return None
    return result, shape, strides


def copy_kernel(out, inputs, dtypes, params):
    """`copy_` between tensors of one float dtype (src already broadcast to out's shape)."""
    dtype = dtypes[2]
    if dtype not in DTYPES or dtypes[0] is not dtype or len(inputs) != 1:
        return NotImplemented
    src = inputs[0]
    if not _on_cpu_as(src, dtype) or src._shape != out._shape or \
            out.numel() < size_threshold(MIN_NUMEL):
        return NotImplemented
    shape, strides = _geometry(out, inputs, out.numel())
    if len(shape) > _C.MAX_NDIM or not _safe_to_write(out, shape, strides, inputs, dtype):
        return NotImplemented
    _C.copy(shape, out._storage.array, out._offset, strides[0],
            src._storage.array, src._offset, strides[1])
    return out


def flip_kernel(out, inputs, dtypes, params):
    """flip as the C copy from the input read backwards along the flipped dims (each such
    stride negated, starting from the last element along it), into a result laid out like
    the input, the op's declared layout."""
    x = inputs[0] if len(inputs) == 1 else None
    if out is not None or x is None or dtypes[0] not in DTYPES or not _on_cpu_as(x, dtypes[0]) or \
            math.prod(x._shape) < max(1, size_threshold(MIN_NUMEL)):
        return NotImplemented
    shape, offset, strides = x._shape, x._offset, list(x._strides)
    for d in params["dims"]:
        offset += (shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    result = Tensor._empty(shape, x._storage.dtype, strides=kept_strides(shape, x._strides))
    geometry_shape, (out_strides, src_strides) = _strided_geometry(
        shape, result._strides, ((shape, tuple(strides)),))
    if len(geometry_shape) > _C.MAX_NDIM:
        return NotImplemented
    _C.copy(geometry_shape, result._storage.array, result._offset, out_strides,
            x._storage.array, offset, src_strides)
    return result


# cat results with fewer elements go to the reference: NumPy's concatenate, one call on one
# thread, is as fast there. Measured on a 2-core x86-64 (interleaved, 2 threads), cat([x, x])
# float32, plugin / reference / torch us: x of 16,384 elements 14.6 / 12.8 / 4.3, 32,768
# 17.4 / 16.6 / 6.9, 65,536 19.9 / 22.1 / 10.0, 1M 381 / 599 / 354.
CAT_MIN_NUMEL = 131072


def cat_kernel(out, inputs, dtypes, params):
    """cat along params['dim'] of cpu tensors of the result's dtype into a new contiguous
    result: each input copied into its slice by the C copy loop (in parallel), moving bits
    only, as np.concatenate does. Declined: a dtype to promote to, results the inputs'
    memory formats would lay out channels-last (the op's declared layout), small results."""
    dim, dtype = params["dim"], params["dtype"]
    if out is not None or dtype not in DTYPES or \
            not all(_on_cpu_as(t, dtype) for t in inputs):
        return NotImplemented
    kept = [t for t in inputs if t._shape != (0,)] or [inputs[0]]   # the legacy empty rule
    shape = list(kept[0]._shape)
    shape[dim] = sum(t._shape[dim] for t in kept)
    if math.prod(shape) < size_threshold(CAT_MIN_NUMEL) or \
            common_format((t._shape, t._strides) for t in inputs) != "contiguous":
        return NotImplemented
    result = Tensor._empty(tuple(shape), dtype)
    start = 0
    for t in kept:
        size = t._shape[dim]
        if size and t.numel():
            piece = Tensor._make(result._storage, start * result._strides[dim], t._shape,
                                 result._strides)
            slice_shape, strides = _geometry(piece, (t,), t.numel())
            _C.copy(slice_shape, piece._storage.array, piece._offset, strides[0],
                    t._storage.array, t._offset, strides[1])
        start += size
    return result


def _geometry(out, inputs, numel):
    """The loop geometry: (shape, (out strides, input strides...)), coalesced, in elements.

    Built from the shared helpers (reftorch_plugins.geometry), with dims first put in the
    order of out's strides, largest outermost, so a transposed out (`a.t() + b.t()`) still
    loops over memory in order. All operands with one shape and one dense layout (the common
    case: all contiguous) is known without work. Other geometries are worked out once per
    layout (the operands' shapes and strides are all they depend on) and remembered: working
    out a broadcast one (x * 0.5, x + bias, clamp's bounds) took about as much Python as the
    rest of the call. The answer is shared between calls: callers must not change it."""
    shape, strides = out._shape, out._strides
    same = True
    for t in inputs:
        same = same and t._shape == shape and t._strides == strides
    if same and (is_contiguous(shape, strides) or is_non_overlapping_and_dense(shape, strides)):
        return (numel,), ((1,),) * (len(inputs) + 1)  # one block of memory, walked in order
    return _strided_geometry(shape, strides, tuple((t._shape, t._strides) for t in inputs))


@functools.lru_cache(maxsize=4096)
def _strided_geometry(shape, strides, input_layouts):
    """_geometry for out's (shape, strides) and each input's (shape, strides)."""
    order = sorted(range(len(shape)), key=lambda d: -strides[d])
    operand_strides = [[strides[d] for d in order]]
    for in_shape, in_strides in input_layouts:
        full = broadcast_strides(shape, in_shape, in_strides)
        operand_strides.append([full[d] for d in order])
    merged, merged_strides = coalesce([shape[d] for d in order], operand_strides)
    return tuple(merged), tuple(map(tuple, merged_strides))


# --- checks ---------------------------------------------------------------------------------

def _alpha(params, dtype):
    """alpha as the C kernel takes it (a float already rounded to `dtype`, as the reference
    rounds it), or None when it is not a real Python number the kernel can use."""
    alpha = params.get("alpha", 1)
    if type(alpha) not in (int, float, bool):
        return None
    if alpha == 1:
        return 1.0
    if isinstance(alpha, int) and not -2**63 <= alpha < 2**63:
        return None
    return float(np.asarray(alpha).astype(dtype.numpy_dtype))


def _on_cpu_as(t, dtype):
    """t is a cpu tensor of exactly `dtype` (its storage is a contiguous 1-D NumPy array)."""
    storage = t._storage
    return type(storage) is CPUStorage and storage.dtype is dtype


def _dense_elements(t):
    """A cpu tensor's elements in row-major order as a contiguous 1-D array: a view of its
    storage when it is contiguous, else a copy."""
    if t._strides == contiguous_strides(t._shape):
        start = t._offset
        return t._storage.array[start:start + math.prod(t._shape)]
    return np.ascontiguousarray(t._np).reshape(-1)


def _can_write_in_place(t, reads):
    """Whether a C loop may write a cpu tensor's elements where they are (a `Tensor.op_`
    served in place): contiguous, writable, and sharing no memory with the arrays the loop
    reads (`reads`; may_share_memory: a bounds test, so it errs towards no)."""
    array = t._storage.array
    return is_contiguous(t._shape, t._strides) and array.flags.writeable and \
        not any(np.may_share_memory(array, other) for other in reads)


def _safe_to_write(out, shape, strides, inputs, dtype):
    """`out` may be written by the elementwise loop: a writable cpu tensor of `dtype` whose
    elements are distinct, and which shares memory with no input except element for element
    (the in-place `a.add_(b)` case)."""
    if not _on_cpu_as(out, dtype) or not out._storage.array.flags.writeable:
        return False
    out_strides = strides[0]
    if not _distinct_elements(shape, out_strides):
        return False
    for t, t_strides in zip(inputs, strides[1:]):
        if t is out:
            continue  # the in-place `a.add_(b)`: each element is read, then written
        if not np.may_share_memory(out._storage.array, t._storage.array):
            continue
        if t._storage is not out._storage:
            return False  # two storages over one buffer: too rare to be worth reasoning about
        if t._offset == out._offset and t_strides == out_strides:
            continue  # the same elements in the same order
        if _overlaps(out._offset, shape, out_strides, t._offset, t_strides):
            return False
    return True


def _distinct_elements(shape, strides):
    """No two indices of the view reach one element (checked on the coalesced geometry)."""
    if len(shape) == 1:
        return strides[0] > 0 or shape[0] == 1
    reach = 0
    for stride, size in sorted(zip(strides, shape)):
        if size != 1:
            if stride <= reach:
                return False
            reach += (size - 1) * stride
    return True


def _overlaps(offset_a, shape, strides_a, offset_b, strides_b):
    """Whether two views of one storage may share an element: their spans intersect, and
    they are not two disjoint boxes of one row-major block (see _box_coordinates)."""
    span_a = sum((n - 1) * s for n, s in zip(shape, strides_a))
    span_b = sum((n - 1) * s for n, s in zip(shape, strides_b))
    if offset_a > offset_b + span_b or offset_b > offset_a + span_a:
        return False
    if strides_a != strides_b:
        return True
    box_a = _box_coordinates(offset_a, shape, strides_a)
    box_b = _box_coordinates(offset_b, shape, strides_a)
    if box_a is None or box_b is None:
        return True
    (residue_a, corner_a), (residue_b, corner_b) = box_a, box_b
    return residue_a == residue_b and all(
        a <= b + n - 1 and b <= a + n - 1 for a, b, n in zip(corner_a, corner_b, shape))


def _box_coordinates(offset, shape, strides):
    """Where a view sits as a box in a row-major block whose strides are its own (a slice
    of a contiguous tensor, as padding's wrapped edges are): (the offset's remainder below
    the smallest stride, the box's first coordinate along each dim), or None when the view
    is not such a box. Then element i of the view is at coordinates corner + i, so two such
    views with the same strides share an element only if they have the same remainder and
    their coordinate ranges meet along every dim."""
    dims = sorted((s, k) for k, (s, n) in enumerate(zip(strides, shape)) if n != 1)
    corner = [0] * len(shape)
    remainder = offset
    for j in range(len(dims) - 1, -1, -1):
        stride, k = dims[j]
        if stride <= 0:
            return None
        corner[k], remainder = divmod(remainder, stride)
        if j + 1 < len(dims):   # the box must fit inside the next larger dim's step
            larger = dims[j + 1][0]
            if larger % stride or corner[k] + shape[k] > larger // stride:
                return None
    return remainder, corner


def _new_result(op, shape, dtype, inputs):
    """A new result of elementwise `op`, laid out as PyTorch lays it out (the reference's
    result_strides: `a.t() + b.t()` stays transposed)."""
    return Tensor._empty(shape, dtype, strides=result_strides(op, shape, inputs))

