"""What every kernel wrapper of the plugin shares: programs (.cu files after the common
prelude), the loop geometry as the C struct `Geometry<N>`, and the checks and launch of an
elementwise pass.

An elementwise wrapper declines (returns NotImplemented, so the copy-to-cpu fallback runs)
for anything it does not handle exactly: tensors on other devices, more dims than the kernel
geometry holds after coalescing, or outputs that overlap their inputs in a way one elementwise
pass cannot write safely. Dtype checks are each wrapper's own.
"""
from __future__ import annotations

import ctypes
import functools
import math
import re
import struct
from dataclasses import dataclass
from importlib import resources

from reftorch import _dtype as D
from reftorch._ops.elementwise import layout_operands
from reftorch._promotion import broadcast_shapes
from reftorch._shape import elementwise_strides
from reftorch._tensor import Tensor
from reftorch_plugins.ctypes_table import CUDA_TYPES
from reftorch_plugins.geometry import elementwise_geometry

from . import nvrtc
from .device import BLOCK, CUDAStorage, elementwise_grid, new_storage

ELEMENTWISE_BLOCK = (BLOCK, 1, 1)

PRELUDE = "common.cuh"   # put in front of every program's source (see kernels/common.cuh)

# Storage types by dtype name. float32/float64 are the shared table's C types; the 16-bit
# floats are the kernels' own storage types (NVRTC wheels ship no cuda_fp16.h / cuda_bf16.h).
FLOAT_TYPES = {"float32": CUDA_TYPES["float32"], "float64": CUDA_TYPES["float64"],
               "float16": "rt_float16", "bfloat16": "rt_bfloat16"}
FLOAT_DTYPES = tuple(D.by_name(name) for name in FLOAT_TYPES)  # what most families register
# bool and the integer types, as built-in C++ types (NVRTC has no <cstdint> without headers).
INT_TYPES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short",
             "int32": "int", "int64": "long long"}
# Kernels that move elements without looking at them use one word type per element width.
WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long",
         16: "rt_bytes16"}


@dataclass(frozen=True, eq=False)  # hashed by identity: drivers key loaded kernels on it
class Program:
    """A .cu file of the package and the template instantiations to compile from it;
    `includes`: other .cu files of the package whose definitions it builds on (put between
    the prelude and the file)."""
    filename: str
    name_expressions: tuple
    includes: tuple = ()

    def source(self):
        """The prelude, the includes, then the file: NVRTC sees one translation unit (its
        log's line numbers count from the prelude's first line, as the CompileError listing
        does)."""
        parts = (PRELUDE, *self.includes, self.filename)
        return "\n".join(_read_source(name) for name in parts)

    @functools.cached_property
    def _names(self):
        return frozenset(self.name_expressions)

    def has(self, expression):
        """Whether `expression` is one of this program's instantiations (a wrapper serves
        exactly those, and declines any other combination of types)."""
        return expression in self._names

    def compile(self, arch, cache=None, options=nvrtc.DEFAULT_OPTIONS):
        """Every instantiation in one NVRTC run (the CI compile test: about the CPU time
        of compiling them one by one, without parsing the source once per kernel)."""
        return nvrtc.compile(self.source(), self.filename, arch=arch, options=options,
                             name_expressions=self.name_expressions, cache=cache)

    def compile_expression(self, arch, expression, cache=None, options=nvrtc.DEFAULT_OPTIONS):
        """Only `expression`'s instantiation, cached (memory and disk) under a key that
        names it: what a kernel's first launch compiles, so a first convolution waits for
        one kernel, not for every kind and dtype of conv.cu. An earlier compile of the
        whole program in this process serves it too (nvrtc.ProgramCache.get)."""
        if not self.has(expression):
            raise KeyError(f"{self.filename} has no instantiation {expression!r}")
        return nvrtc.compile(self.source(), self.filename, arch=arch, options=options,
                             name_expressions=(expression,), cache=cache)


@functools.lru_cache(maxsize=None)
def _read_source(filename):
    return resources.files(__package__).joinpath("kernels", filename).read_text()


# --- the kernel geometry, laid out as the C struct Geometry<N> -------------------------------

@functools.lru_cache(maxsize=None)
def source_constant(name, filename=PRELUDE):
    """The whole number a kernel source #defines as `name`: read from the source itself, so
    the host and the kernels cannot disagree."""
    return int(re.search(rf"#define {name} (\d+)", _read_source(filename)).group(1))


@functools.lru_cache(maxsize=None)   # (on launch paths: one lookup, no arguments)
def max_dims():
    """RT_MAX_DIMS: the most dims a kernel Geometry holds."""
    return source_constant("RT_MAX_DIMS")


@functools.lru_cache(maxsize=None)
def block_threads():
    """RT_BLOCK_THREADS: the block size the block-reduction kernels are written for (their
    summation order depends on it, so they are always launched with exactly this many)."""
    return source_constant("RT_BLOCK_THREADS")


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


@functools.lru_cache(maxsize=None)
def _geometry_packer(operands):
    """The bytes of Geometry<operands>: int64 numel, int32 ndim, int32 unused, int64
    sizes[D], int64 strides[operands][D] (native order, no padding: every field is aligned)."""
    return struct.Struct(f"=qii{max_dims() * (operands + 1)}q")


def geometry_struct(shape, operand_strides):
    """A Geometry<len(operand_strides)> for `shape`. Cached: building one costs ~5-10 us of
    Python, and a training loop launches the same few geometries again and again (the launch
    copies the bytes, so one object can serve every launch)."""
    return _geometry_struct(tuple(shape), tuple(map(tuple, operand_strides)))


@functools.lru_cache(maxsize=4096)
def _geometry_struct(shape, operand_strides):
    pad = (0,) * (max_dims() - len(shape))
    values = [*shape, *pad]
    for strides in operand_strides:
        values += [*strides, *pad]
    raw = _geometry_packer(len(operand_strides)).pack(math.prod(shape), len(shape), 0, *values)
    return geometry_type(len(operand_strides)).from_buffer_copy(raw)


def address(t):
    """A cuda tensor's device address (Tensor.data_ptr written out: every launch takes one
    per operand)."""
    storage = t._storage
    block = storage._block
    if block is None:   # an empty storage
        return 0
    return block.ptr + t._offset * storage.dtype.itemsize


def pointer(t):
    """A tensor's device address as a kernel pointer argument (a ctypes object)."""
    return ctypes.c_uint64(address(t))


# --- checks shared by the kernels -------------------------------------------------------------

def on_one_cuda_device(tensors):
    first = tensors[0]._storage
    if not isinstance(first, CUDAStorage):
        return False
    for t in tensors:
        storage = t._storage
        if storage is not first and not (isinstance(storage, CUDAStorage) and
                                         storage._index == first._index and
                                         storage._driver is first._driver):
            return False
    return True


def _span(t):
    """[first, last] element of t's storage that t touches."""
    last = t._offset + sum((n - 1) * s for n, s in zip(t._shape, t._strides))
    return t._offset, last


def writable(out, inputs, shape, strides):
    """Whether one elementwise pass may write `out` while reading `inputs`: out has no two
    elements at one address, and each input is either out itself (same elements, same order)
    or memory out does not touch."""
    for size, stride in zip(shape, strides[0]):
        if stride == 0 and size > 1:
            return False
    for t, t_strides in zip(inputs, strides[1:]):
        if t._storage is not out._storage:
            continue
        if t._offset == out._offset and t_strides == strides[0]:
            continue
        first, last = _span(out)
        t_first, t_last = _span(t)
        if t_first <= last and first <= t_last:
            return False
    return True


def new_result(storage, shape, strides, numel, dtype):
    """A new tensor of `numel` elements of `dtype` viewed as (shape, strides) on the device of
    cuda `storage` (an operand's): Tensor._empty for a layout the caller has worked out."""
    return Tensor._make(new_storage(storage._driver, storage._index, storage.device, numel,
                                    dtype), 0, shape, strides)


def all_of_dtype(tensors, dtype):
    for t in tensors:
        if t._storage.dtype is not dtype:
            return False
    return True


HALF_TYPES = ("float16", "bfloat16")


def operand_types(inputs, dtypes):
    """The storage type of each input of a float op whose common dtype is dtypes[0]: the common
    type, or float for a float32 input of a 16-bit op (how a Python number arrives: a 0-dim
    tensor of the computation dtype, which the reference computes with unrounded). None when
    an input has any other dtype (the reference would convert it first)."""
    common, computation = dtypes[0], dtypes[1]
    if common.name not in FLOAT_TYPES:
        return None
    scalar_ok = common.name in HALF_TYPES and computation.name == "float32"
    types = []
    for t in inputs:
        if t.dtype is common:
            types.append(FLOAT_TYPES[common.name])
        elif scalar_ok and t.dtype is computation:
            types.append(FLOAT_TYPES["float32"])
        else:
            return None
    return tuple(types)


def scalar_pairs(dtype_name):
    """Operand types with one float scalar, for a 16-bit dtype: (T, float) and (float, T)."""
    t = FLOAT_TYPES[dtype_name]
    return ((t, "float"), ("float", t))


# --- one elementwise pass ---------------------------------------------------------------------

def run_elementwise(program, expression, out, inputs, result_dtype, extra_args=(),
                    number_params=frozenset()):
    """Launch `expression` as `kernel(Geometry<1 + len(inputs)>, out, inputs..., extra_args...)`
    over the broadcast of `inputs` into `out` (or a new tensor of `result_dtype`, laid out as
    the reference's result_strides lays it out; `number_params`: the op's, see there). Returns
    the result, or NotImplemented when the tensors are not on one cuda device, the geometry
    has too many dims, or `out` cannot be written in one pass. Dtypes are the caller's to
    check."""
    if not on_one_cuda_device(inputs if out is None else (*inputs, out)):
        return NotImplemented
    layout = [None if out is None else (out._shape, out._strides)]
    for t in inputs:
        layout += (t._shape, t._strides)
    if number_params:    # which inputs count for a new result's layout
        layout.append(tuple(i in number_params and getattr(t, "_wrapped_number", False)
                            for i, t in enumerate(inputs)))
    layout = tuple(layout)
    plan = _PASSES.get(layout) or _plan_pass(layout, out, inputs, number_params)
    if plan is None:
        return NotImplemented
    shape, result_strides, numel, grid, geo_shape, strides, geometry = plan
    if out is None:
        target = new_result(inputs[0]._storage, shape, result_strides, numel, result_dtype)
    elif out.dtype is not result_dtype or not writable(out, inputs, geo_shape, strides):
        return NotImplemented
    else:
        target = out
    if numel:
        storage = target._storage
        storage._driver.launch_addresses(storage._index, program, expression, grid,
                                         ELEMENTWISE_BLOCK,
                                         (geometry,), (address(target), *map(address, inputs)),
                                         extra_args)
    return target


_PASSES = {}     # layout (out's and the inputs' shapes and strides) -> _plan_pass's plan
PASSES = 4096    # bound: cleared when full (a loop repeats a few layouts)


def _plan_pass(layout, out, inputs, number_params):
    """What one elementwise pass over these operands' layouts needs, worked out once per
    `layout` (shapes and strides are all it depends on; working it out costs ~10 us of
    Python, the cached lookup well under one): (shape, strides of a new result, numel,
    launch grid, coalesced dims, coalesced strides per operand, Geometry struct). None when
    the pass cannot run: `out` does not have the broadcast shape, or the geometry has too
    many dims. Which storage `out` shares is not part of a layout: the caller checks it each
    call. The tuples are shared between calls: they must not change."""
    shape = inputs[0]._shape
    for t in inputs:
        if t._shape != shape:
            shape = broadcast_shapes(*(t._shape for t in inputs))
            break
    if out is not None and out._shape != shape:
        return None
    target = out if out is not None else \
        _Layout(shape, elementwise_strides(shape, layout_operands(inputs, number_params)))
    geo_shape, strides = elementwise_geometry(target, inputs)
    if len(geo_shape) > max_dims():
        return None
    numel = math.prod(shape)
    plan = (shape, target._strides, numel, elementwise_grid(numel), tuple(geo_shape),
            tuple(map(tuple, strides)), geometry_struct(geo_shape, strides))
    if len(_PASSES) >= PASSES:
        _PASSES.clear()
    _PASSES[layout] = plan
    return plan


@dataclass(frozen=True)
class _Layout:
    _shape: tuple
    _strides: tuple


MAX_GRID = 1 << 20  # row and reduction kernels' blocks loop over the rows beyond this


def launch_blocks(program, expression, rows, t, args, shared_bytes=0):
    """Launch a block-per-row kernel (block_reduce kernels) over `rows` rows on `t`'s device,
    with `shared_bytes` of dynamic shared memory per block."""
    storage = t._storage
    storage._driver.launch_grid(storage._index, program, expression, (min(rows, MAX_GRID), 1, 1),
                                (block_threads(), 1, 1), shared_bytes, args)


def launch_block_rows(program, expression, rows, t, objects, addresses):
    """launch_blocks for a kernel whose parameters are the ctypes `objects`, then device
    addresses (ints; see Driver.launch_addresses)."""
    storage = t._storage
    storage._driver.launch_addresses(storage._index, program, expression,
                                     (min(rows, MAX_GRID), 1, 1), (block_threads(), 1, 1),
                                     objects, addresses)
