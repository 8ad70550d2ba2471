"""Index ops on cuda (kernels/index.cu), with device-side bounds checks:

  gather, index_select, embedding, take   any dtype of 1 to 16 bytes (elements move by
                                          width); int64 indices (int32 too for index_select
                                          and embedding, as the reference accepts)
  scatter                                 any dtype of 1 to 16 bytes, int64 indices
  scatter_add                             float32, float64, float16, bfloat16, int32, int64;
                                          int64 indices
  index_add                               the same dtypes; int64 or int32 indices

Results equal the reference's bit for bit: gathers move elements, and the scatter kernel gives
each output element its contributions in the reference's order (see index.cu), so repeated
indices add up (or, for scatter, the last one wins) as np.add.at and NumPy's assignment do;
integer sums wrap around as NumPy's.

Bounds errors are asynchronous, as on PyTorch's GPUs: a kernel that meets an out-of-range
index skips it and writes it into its device's error record (one 48-byte allocation per
device, made on the first index launch). The call returns; the next synchronisation that hands
data to the host (a device-to-host copy: `.cpu()`, `.item()`, printing; or
`reftorch.cuda.synchronize()`) reads the record, clears it and raises the op's own error, the
reference's type and message:
  IndexError "index out of range in self"                       index_select, embedding
  IndexError "out of range: tried to access index 9 on a tensor of 5 elements."       take
  RuntimeError "index 7 is out of bounds for dimension 0 with size 5"
                                                      gather, scatter, scatter_add, index_add
Unlike PyTorch's device-side asserts the error is not sticky: it is raised once and the device
stays usable. `Stream.synchronize()` and `Event.synchronize()` do not read the record.

Cost: the record is read only on devices with index launches since the last read, so programs
that launch none pay a dict lookup per synchronisation. After index launches, the first
synchronisation adds one 48-byte device-to-host copy on the current stream and a wait for it
(a few microseconds on a GPU, on top of a copy that has just waited for the same stream).
"""
from __future__ import annotations

import ctypes
import itertools
import math
import struct
import threading
import weakref

import numpy as np

from reftorch import _dtype as D
from reftorch._tensor import Tensor
from reftorch.autograd.grad_mode import no_grad
from reftorch_plugins.geometry import coalesce

from .kernel_base import (FLOAT_TYPES, INT_TYPES, WORDS, Program, geometry_struct, max_dims,
                          on_one_cuda_device, pointer)

INDEX_TYPES = {"int64": "long long", "int32": "int"}
# Dtypes scatter_add and index_add add in: the floats, and the integers whose sums wrap.
ADDED_TYPES = {**FLOAT_TYPES, "int32": INT_TYPES["int32"], "int64": INT_TYPES["int64"]}
# Each op's code in the error record, and the indices it takes.
OP_CODES = {"gather": 1, "index_select": 2, "embedding": 3, "take": 4, "index_add": 5,
            "scatter": 6, "scatter_add": 7,
            "masked_scatter": 8}   # its source running out (ops_masked, masked_scan.cu)
OP_NAMES = {code: name for name, code in OP_CODES.items()}
LONG_ONLY = ("int64",)
LONG_OR_INT = ("int64", "int32")
INDEX_DTYPES = {"gather": LONG_ONLY, "index_select": LONG_OR_INT, "embedding": LONG_OR_INT,
                "take": LONG_ONLY, "index_add": LONG_OR_INT, "scatter": LONG_ONLY,
                "scatter_add": LONG_ONLY}


def gather_expression(itemsize, index_name):
    return f"gather_kernel<{WORDS[itemsize]}, {INDEX_TYPES[index_name]}>"


def scatter_expression(op_name, value_dtype, index_name):
    """scatter moves elements by width; the adding ops compute in the float type."""
    if op_name == "scatter":
        return f"scatter_kernel<{WORDS[value_dtype.itemsize]}, {INDEX_TYPES[index_name]}, " \
               f"AssignOp>"
    op = "AddOp" if op_name == "scatter_add" else "AddScaledOp"
    return f"scatter_kernel<{ADDED_TYPES[value_dtype.name]}, {INDEX_TYPES[index_name]}, {op}>"


# Only what is registered is instantiated (NVRTC time grows with each one).
INDEX = Program("index.cu", tuple(
    [gather_expression(width, name) for width in WORDS for name in LONG_OR_INT]
    + [f"scatter_kernel<{WORDS[width]}, long long, AssignOp>" for width in WORDS]
    + [scatter_expression("scatter_add", D.by_name(name), "int64") for name in ADDED_TYPES]
    + [scatter_expression("index_add", D.by_name(name), index) for name in ADDED_TYPES
       for index in LONG_OR_INT]))
PROGRAMS = (INDEX,)


# --- the error record -------------------------------------------------------------------------

# struct IndexErrorRecord of index.cu: position, launch, value, size, op, dim, lock, unused.
RECORD = struct.Struct("=QQqqiiII")
NO_POSITION = (1 << 64) - 1
CLEARED = RECORD.pack(NO_POSITION, 0, 0, 0, 0, 0, 0, 0)


class IndexCheck(ctypes.Structure):
    """struct IndexCheck of index.cu: what one launch checks its indices against."""
    _fields_ = [("record", ctypes.c_uint64), ("launch", ctypes.c_uint64),
                ("size", ctypes.c_int64), ("op", ctypes.c_int32), ("dim", ctypes.c_int32),
                ("wrap", ctypes.c_int32), ("unused", ctypes.c_int32)]


def index_error(op_name, value, size, dim):
    """The reference's exception for a bad index of `op_name`."""
    if op_name in ("index_select", "embedding"):
        return IndexError("index out of range in self")
    if op_name == "take":
        return IndexError(f"out of range: tried to access index {value} on a tensor of {size} "
                          f"elements.")
    if op_name == "masked_scatter":
        return RuntimeError("masked_scatter: expected source to have at least as many elements "
                            "as ones in mask")
    return RuntimeError(f"index {value} is out of bounds for dimension {dim} with size {size}")


class IndexErrors:
    """The error records of one driver's devices, and which of them may hold news.

    `pending[index]` holds the streams that ran index launches on device `index` since the
    record was last read after them; `check` (a sync hook of the driver) reads the record only
    when that set is not empty."""

    def __init__(self, driver):
        self.driver = driver
        self.records = {}     # device index -> address of its IndexErrorRecord
        self.pending = {}     # device index -> {StreamHandle}
        self.numbers = itertools.count(1)
        self.lock = threading.Lock()

    def arm(self, index, op_name, size, dim, wrap=False):
        """The IndexCheck argument of one launch on device `index` (its current stream)."""
        record = self.records.get(index)
        if record is None:
            record = self._allocate(index)
        with self.lock:
            self.pending.setdefault(index, set()).add(self.driver.streams.current(index))
            number = next(self.numbers)
        return IndexCheck(record, number, size, OP_CODES[op_name], dim, int(wrap), 0)

    def _allocate(self, index):
        """The device's record, cleared (made once, kept for the life of the driver; outside
        the caching allocator, so memory statistics do not count it)."""
        address = self.driver.try_alloc(index, RECORD.size)
        if address is None:
            raise RuntimeError("CUDA out of memory allocating the index error record")
        self._write(index, address, CLEARED)
        self.records[index] = address
        return address

    def _write(self, index, address, data):
        host = np.frombuffer(bytearray(data), np.uint8)
        self.driver.to_device(index, address, host.ctypes.data, len(data))  # waits

    def check(self, index, stream):
        """Sync hook: after the driver waited for `stream` of device `index` (None: the whole
        device), raise the recorded error, if any, and clear the record."""
        with self.lock:
            pending = self.pending.get(index)
            if not pending:
                return
            if stream is None:
                pending.clear()
            else:
                pending.discard(stream)
        address = self.records[index]
        raw_stream = self.driver.stream(index)
        host = ctypes.create_string_buffer(RECORD.size)
        cu = self.driver.cu
        self.driver.check(cu.cuMemcpyDtoHAsync(ctypes.addressof(host), address, RECORD.size,
                                               raw_stream), "cuMemcpyDtoHAsync")
        self.driver.check(cu.cuStreamSynchronize(raw_stream), "cuStreamSynchronize")
        _position, launch, value, size, op, dim, _lock, _ = RECORD.unpack(host.raw)
        if launch == 0:
            return
        self._write(index, address, CLEARED)
        raise index_error(OP_NAMES[op], value, size, dim)


_ERRORS = weakref.WeakKeyDictionary()   # Driver -> IndexErrors
_ERRORS_LOCK = threading.Lock()


def errors_of(driver):
    """The driver's IndexErrors, created (and hooked into its synchronisations) on first use."""
    found = _ERRORS.get(driver)
    if found is None:
        with _ERRORS_LOCK:
            found = _ERRORS.get(driver)
            if found is None:
                found = _ERRORS[driver] = IndexErrors(driver)
                driver.sync_hooks.append(found.check)
    return found


def _launch(program_expression, walk_numel, t, args_before_check, op_name, size, dim,
            wrap=False):
    """Launch an index.cu kernel on `t`'s device with the IndexCheck as its last argument."""
    storage = t._storage
    check = errors_of(storage._driver).arm(storage._index, op_name, size, dim, wrap)
    storage._driver.launch(storage._index, INDEX, program_expression, walk_numel,
                           (*args_before_check, check))


# --- the gather family ------------------------------------------------------------------------

def _shape_1d(t):
    """(shape, strides) of t, a 0-dim tensor seen as one element."""
    return (list(t._shape), list(t._strides)) if t.ndim else ([1], [0])


def _index_ok(op_name, index, values):
    return isinstance(index, Tensor) and index.dtype.name in INDEX_DTYPES[op_name] and \
        on_one_cuda_device((values, index))


def _gather(op_name, result, src, src_strides, index_stride, size, index, index_strides, dim,
            wrap=False):
    """Fill the new contiguous tensor `result` through the gather kernel over the walk
    `result`'s shape (0-dim: one element); NotImplemented when it has too many dims."""
    numel = result.numel()
    if numel == 0:
        return result
    shape, out_strides = _shape_1d(result)
    walk, strides = coalesce(shape, [out_strides, list(src_strides), list(index_strides)])
    if len(walk) > max_dims() or src.dtype.itemsize not in WORDS:
        return NotImplemented
    args = (geometry_struct(walk, strides), pointer(result), pointer(src), pointer(index),
            ctypes.c_int64(index_stride))
    _launch(gather_expression(src.dtype.itemsize, index.dtype.name), numel, result, args,
            op_name, size, dim, wrap)
    return result


def gather_kernel(out, inputs, dtypes, params):
    """out[p] = a[p with p[dim] replaced by index[p]], over index's shape."""
    a, index = inputs
    if out is not None or not _index_ok("gather", index, a):
        return NotImplemented
    dim = params["dim"]
    result = Tensor._empty(index._shape, a.dtype, a.device)
    if index.numel() == 0:
        return result
    a_shape, a_strides = _shape_1d(a)
    i_shape, i_strides = _shape_1d(index)
    if len(a_shape) != len(i_shape):
        return NotImplemented
    src_strides = list(a_strides)
    src_strides[dim] = 0
    return _gather("gather", result, a, src_strides, a_strides[dim], a_shape[dim], index,
                   i_strides, dim)


def index_select_kernel(out, inputs, dtypes, params):
    """The slices of `a` along dim at each entry of the (0-dim or 1-D) index."""
    a, index = inputs
    if out is not None or not _index_ok("index_select", index, a) or index.ndim > 1:
        return NotImplemented
    dim = params["dim"]
    a_shape, a_strides = _shape_1d(a)
    shape = list(a_shape)
    shape[dim] = index.numel()
    result = Tensor._empty(shape if a.ndim else (), a.dtype, a.device)
    src_strides = list(a_strides)
    src_strides[dim] = 0
    index_strides = [0] * len(shape)
    index_strides[dim] = index._strides[0] if index.ndim else 0
    return _gather("index_select", result, a, src_strides, a_strides[dim], a_shape[dim], index,
                   index_strides, dim)


def embedding_kernel(out, inputs, dtypes, params):
    """weight[indices]: one row of the 2-D weight per index (the other parameters only change
    the gradient)."""
    weight, indices = inputs
    if out is not None or weight.ndim != 2 or not _index_ok("embedding", indices, weight):
        return NotImplemented
    result = Tensor._empty((*indices._shape, weight._shape[1]), weight.dtype, weight.device)
    src_strides = [0] * indices.ndim + [weight._strides[1]]
    index_strides = list(indices._strides) + [0]
    return _gather("embedding", result, weight, src_strides, weight._strides[0],
                   weight._shape[0], indices, index_strides, 0)


def take_kernel(out, inputs, dtypes, params):
    """a.reshape(-1)[index], negative indices counting from the end."""
    a, index = inputs
    if out is not None or not _index_ok("take", index, a):
        return NotImplemented
    if not a.is_contiguous():
        with no_grad():
            a = a.contiguous()  # the flat order is the row-major one (a device copy)
    result = Tensor._empty(index._shape, a.dtype, a.device)
    _, index_strides = _shape_1d(index)
    return _gather("take", result, a, [0] * len(index_strides), 1, a.numel(), index,
                   index_strides, 0, wrap=True)


# --- the scatter family -----------------------------------------------------------------------

def _without(values, dim):
    return [v for d, v in enumerate(values) if d != dim]


def _row_major(shape):
    """Contiguous strides of `shape` (the error positions of its elements)."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return strides[::-1]


def _scatter(op_name, a, dim, columns, n, steps, operand_strides, src, index, alpha=1.0):
    """A contiguous copy of `a` updated by the scatter kernel: `columns` and the per-column
    strides of (out, src, index, position) without dim; `steps` the per-entry steps of
    (src, index, position) along dim (out's is its stride along dim)."""
    result = Tensor._empty(a._shape, a.dtype, a.device)
    with no_grad():  # kernels never record autograd history
        result.copy_(a)
    if n == 0 or math.prod(columns) == 0:
        return result
    out_strides = _without(result._strides, dim)
    walk, strides = coalesce(columns, [out_strides, *operand_strides])
    if len(walk) > max_dims():
        return NotImplemented
    args = (geometry_struct(walk, strides), ctypes.c_int64(n),
            ctypes.c_int64(result._strides[dim]), *(ctypes.c_int64(s) for s in steps),
            pointer(result), pointer(src), pointer(index), ctypes.c_double(alpha))
    _launch(scatter_expression(op_name, a.dtype, index.dtype.name), math.prod(walk), result,
            args, op_name, a._shape[dim], dim)
    return result


def scatter_kernel(op_name):
    """scatter (src tensor, no reduce) and scatter_add: src[p] written or added at p with
    p[dim] replaced by index[p], over index's shape."""
    def kernel(out, inputs, dtypes, params):
        a, index, src = inputs
        if out is not None or params.get("reduce") is not None or a.ndim == 0 or \
                not isinstance(src, Tensor) or src.dtype is not a.dtype or \
                src.ndim != a.ndim or index.ndim != a.ndim or \
                not _index_ok(op_name, index, a) or not on_one_cuda_device((a, src)):
            return NotImplemented
        dim = params["dim"]
        i_shape = list(index._shape)
        positions = _row_major(i_shape)
        operand_strides = [_without(src._strides, dim), _without(index._strides, dim),
                           _without(positions, dim)]
        steps = (src._strides[dim], index._strides[dim], positions[dim])
        return _scatter(op_name, a, dim, _without(i_shape, dim), i_shape[dim], steps,
                        operand_strides, src, index)
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def index_add_kernel(out, inputs, dtypes, params):
    """A copy of `a` with alpha * source[.., j, ..] added to the slice at index[j] along dim,
    repeated indices accumulating in j order."""
    a, index, source = inputs
    if out is not None or a.ndim == 0 or index.ndim > 1 or source.dtype is not a.dtype or \
            not _index_ok("index_add", index, a) or not on_one_cuda_device((a, source)):
        return NotImplemented
    dim = params["dim"]
    shape = list(a._shape)
    shape[dim] = index.numel()
    if list(source._shape) != shape:
        return NotImplemented  # a 1-element source of another rank: the reference handles it
    alpha = _alpha(params.get("alpha", 1), a.dtype)
    if alpha is None:
        return NotImplemented
    columns = _without(shape, dim)
    zeros = [0] * len(columns)
    index_step = index._strides[0] if index.ndim else 0
    steps = (source._strides[dim], index_step, 1)
    return _scatter("index_add", a, dim, columns, index.numel(), steps,
                    [_without(source._strides, dim), zeros, zeros], source, index, alpha)


def _alpha(alpha, dtype):
    """index_add's alpha as the reference's `source * alpha` converts a Python number: to the
    float dtype; for the integer dtypes an int that fits them (exactly a double, as the
    kernel takes it). None: decline."""
    if type(alpha) is bool:
        alpha = int(alpha)
    if not dtype.is_floating_point:
        info = np.iinfo(dtype.numpy_dtype)
        fits = type(alpha) is int and info.min <= alpha <= info.max and abs(alpha) <= 2**53
        return float(alpha) if fits else None
    if type(alpha) not in (int, float) or (type(alpha) is int and abs(alpha) > 2**24):
        return None
    with np.errstate(over="ignore"):
        return float(np.asarray(alpha).astype(dtype.numpy_dtype))


def register_kernels(registrar):
    by_width = [d for d in D.ALL_DTYPES if d.itemsize in WORDS]
    added = [D.by_name(name) for name in ADDED_TYPES]
    registrar.kernel("gather", "cuda", by_width, gather_kernel)
    registrar.kernel("index_select", "cuda", by_width, index_select_kernel)
    registrar.kernel("embedding", "cuda", by_width, embedding_kernel)
    registrar.kernel("take", "cuda", by_width, take_kernel)
    registrar.kernel("scatter", "cuda", by_width, scatter_kernel("scatter"))
    registrar.kernel("scatter_add", "cuda", added, scatter_kernel("scatter_add"))
    registrar.kernel("index_add", "cuda", added, index_add_kernel)
