"""The plugin's kernels: what each dispatcher kernel checks, and how it launches CUDA code.

Every kernel follows the dispatcher ABI `kernel(out, inputs, dtypes, params)` (see
reftorch._dispatch) and declines (returns NotImplemented, so the copy-to-cpu fallback runs)
for anything it does not handle exactly: mixed dtypes, tensors on other devices, more dims
than the kernel geometry holds after coalescing, or outputs that overlap their inputs in a way
an elementwise pass cannot write safely.
"""
from __future__ import annotations

import ctypes
import functools
import re
from dataclasses import dataclass
from importlib import resources

from reftorch import _dtype as D
from reftorch._ops.copy import empty_like_layout
from reftorch._promotion import broadcast_shapes2
from reftorch._tensor import Tensor
from reftorch_plugins.ctypes_table import CUDA_TYPES
from reftorch_plugins.geometry import elementwise_geometry

from . import nvrtc
from .device import CUDAStorage

# Storage types by dtype name. float32/float64 are the shared table's C types; the 16-bit
# floats are the kernel's own storage types (NVRTC wheels ship no cuda_fp16.h / cuda_bf16.h).
FLOAT_TYPES = {"float32": CUDA_TYPES["float32"], "float64": CUDA_TYPES["float64"],
               "float16": "rt_float16", "bfloat16": "rt_bfloat16"}
BINARY_OPS = {"add": "AddOp", "sub": "SubOp", "mul": "MulOp", "div": "DivOp"}
# A same-dtype copy moves bytes: one instantiation per element width.
COPY_WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int",
              8: "unsigned long long", 16: "rt_bytes16"}


def binary_expression(op_name, dtype_name):
    return f"binary_kernel<{FLOAT_TYPES[dtype_name]}, {BINARY_OPS[op_name]}>"


def copy_expression(itemsize):
    return f"copy_kernel<{COPY_WORDS[itemsize]}>"


@dataclass(frozen=True, eq=False)  # hashed by identity: drivers key loaded kernels on it
class Program:
    """A .cu file of the package and the template instantiations to compile from it."""
    filename: str
    name_expressions: tuple

    def source(self):
        return _read_source(self.filename)

    def compile(self, arch, cache=None, options=nvrtc.DEFAULT_OPTIONS):
        return nvrtc.compile(self.source(), self.filename, arch=arch, options=options,
                             name_expressions=self.name_expressions, cache=cache)


@functools.lru_cache(maxsize=None)
def _read_source(filename):
    return resources.files(__package__).joinpath("kernels", filename).read_text()


ELEMENTWISE = Program("elementwise.cu", tuple(
    [binary_expression(op, name) for op in BINARY_OPS for name in FLOAT_TYPES]
    + [copy_expression(width) for width in COPY_WORDS]))
PROGRAMS = (ELEMENTWISE,)


# --- the kernel geometry, laid out as the C struct Geometry<N> -------------------------------

@functools.lru_cache(maxsize=None)
def max_dims():
    """RT_MAX_DIMS, read from the kernel source so the two sides cannot disagree."""
    return int(re.search(r"#define RT_MAX_DIMS (\d+)", ELEMENTWISE.source()).group(1))


@functools.lru_cache(maxsize=None)
def geometry_type(operands):
    """ctypes twin of `template <int N> struct Geometry` for N = `operands`."""
    dims = max_dims()

    class Geometry(ctypes.Structure):
        _fields_ = [("numel", ctypes.c_int64), ("ndim", ctypes.c_int32),
                    ("unused", ctypes.c_int32), ("sizes", ctypes.c_int64 * dims),
                    ("strides", (ctypes.c_int64 * dims) * operands)]
    Geometry.__name__ = f"Geometry{operands}"
    return Geometry


def geometry_struct(shape, operand_strides):
    g = geometry_type(len(operand_strides))()
    numel = 1
    for d, size in enumerate(shape):
        g.sizes[d] = size
        numel *= size
    for k, strides in enumerate(operand_strides):
        for d, stride in enumerate(strides):
            g.strides[k][d] = stride
    g.numel = numel
    g.ndim = len(shape)
    return g


# --- checks shared by the kernels -------------------------------------------------------------

def _on_one_cuda_device(tensors):
    storages = [t._storage for t in tensors]
    if not all(isinstance(s, CUDAStorage) for s in storages):
        return False
    return all(s._driver is storages[0]._driver and s._index == storages[0]._index
               for s in storages)


def _span(t):
    """[first, last] element of t's storage that t touches."""
    last = t._offset + sum((n - 1) * s for n, s in zip(t._shape, t._strides))
    return t._offset, last


def _writable(out, inputs, shape, strides):
    """Whether one elementwise pass may write `out` while reading `inputs`: out has no two
    elements at one address, and each input is either out itself (same elements, same order)
    or memory out does not touch."""
    if any(stride == 0 and size > 1 for size, stride in zip(shape, strides[0])):
        return False
    first, last = _span(out)
    for t, t_strides in zip(inputs, strides[1:]):
        if t._storage is not out._storage:
            continue
        if t._offset == out._offset and t_strides == strides[0]:
            continue
        t_first, t_last = _span(t)
        if t_first <= last and first <= t_last:
            return False
    return True


def _output(a, b, shape, dtype):
    """A new result tensor; it keeps the layout of an operand of the full shape when dense."""
    for t in (a, b):
        if t._shape == shape:
            return empty_like_layout(t, dtype=dtype)
    return Tensor._empty(shape, dtype, a.device)


# --- kernels ----------------------------------------------------------------------------------

def binary_kernel(op_name):
    """The dispatcher kernel for add/sub/mul/div on same-dtype float tensors."""
    takes_alpha = op_name in ("add", "sub")

    def kernel(out, inputs, dtypes, params):
        common, _computation, result = dtypes
        if len(inputs) != 2 or common.name not in FLOAT_TYPES or result is not common:
            return NotImplemented
        a, b = inputs
        if a.dtype is not common or b.dtype is not common:
            return NotImplemented
        if out is not None and out.dtype is not result:
            return NotImplemented
        if op_name == "div" and params.get("rounding_mode") is not None:
            return NotImplemented
        alpha = params.get("alpha", 1) if takes_alpha else 1
        if isinstance(alpha, complex):
            return NotImplemented
        if not _on_one_cuda_device((a, b) if out is None else (a, b, out)):
            return NotImplemented
        shape = broadcast_shapes2(a._shape, b._shape)
        if out is not None and out._shape != shape:
            return NotImplemented
        target = out if out is not None else _output(a, b, shape, result)
        geo_shape, strides = elementwise_geometry(target, (a, b))
        if len(geo_shape) > max_dims() or (out is not None and
                                           not _writable(out, (a, b), geo_shape, strides)):
            return NotImplemented
        numel = target.numel()
        if numel:
            storage = a._storage
            args = (geometry_struct(geo_shape, strides), ctypes.c_uint64(target.data_ptr()),
                    ctypes.c_uint64(a.data_ptr()), ctypes.c_uint64(b.data_ptr()),
                    ctypes.c_double(float(alpha)))
            storage._driver.launch(storage._index, ELEMENTWISE,
                                   binary_expression(op_name, common.name), numel, args)
        return target

    kernel.__name__ = f"cuda_{op_name}"
    kernel.__qualname__ = kernel.__name__
    return kernel


def copy_kernel(out, inputs, dtypes, params):
    """copy_ between two tensors of one dtype on one cuda device (src already has out's
    shape, broadcast by copy_). Dtype conversions decline and take the fallback."""
    if out is None or len(inputs) != 1:
        return NotImplemented
    src = inputs[0]
    if src.dtype is not out.dtype or src._shape != out._shape:
        return NotImplemented
    if src.dtype.itemsize not in COPY_WORDS or not _on_one_cuda_device((out, src)):
        return NotImplemented
    numel = out.numel()
    if numel == 0:
        return out
    shape, strides = elementwise_geometry(out, (src,))
    if src._storage is out._storage and src._offset == out._offset and strides[0] == strides[1]:
        return out  # copying a tensor onto itself
    if len(shape) > max_dims() or not _writable(out, (src,), shape, strides):
        return NotImplemented
    storage = out._storage
    itemsize = out.dtype.itemsize
    if len(shape) == 1 and strides[0][0] == 1 and strides[1][0] == 1:
        storage._driver.device_copy(storage._index, out.data_ptr(), src.data_ptr(),
                                    numel * itemsize)
        return out
    args = (geometry_struct(shape, strides), ctypes.c_uint64(out.data_ptr()),
            ctypes.c_uint64(src.data_ptr()))
    storage._driver.launch(storage._index, ELEMENTWISE, copy_expression(itemsize), numel, args)
    return out


copy_kernel.__name__ = "cuda_copy_"


def register_kernels(registrar):
    floats = [D.by_name(name) for name in FLOAT_TYPES]
    for op_name in BINARY_OPS:
        registrar.kernel(op_name, "cuda", floats, binary_kernel(op_name))
    copyable = [d for d in D.ALL_DTYPES if d.itemsize in COPY_WORDS]
    registrar.kernel("copy_", "cuda", copyable, copy_kernel)
