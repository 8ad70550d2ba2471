"""torch.save / torch.load in PyTorch's own checkpoint formats, so files move both ways.

The zip format (PyTorch >= 1.6, the default) is a zip archive whose records all sit in one
folder (the archive name):

    <archive>/data.pkl                  the object, pickled with protocol 2 by default
    <archive>/.format_version           b"1"
    <archive>/.storage_alignment        b"64"
    <archive>/byteorder                 b"little" or b"big"
    <archive>/data/<key>                the raw bytes of one storage, one record per storage
    <archive>/version                   b"3\\n"
    <archive>/.data/serialization_id    an identifier of this save

Records are stored uncompressed and each record's bytes start at a multiple of 64 bytes in
the file (PyTorch pads the local header's extra field with an "FB" field to get there), so a
loader can memory-map them. In data.pkl a tensor is the call
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)` and a
storage is the persistent id `("storage", torch.FloatStorage, key, location, numel)`: the
pickle names PyTorch's globals, so PyTorch loads what reftorch saves and the other way round.

The legacy format (`_use_new_zipfile_serialization=False`, PyTorch < 1.6) is a sequence of
pickles: a magic number, a protocol version, a system-info dict, the object, the list of
storage keys, then for each storage its element count (int64) and its raw bytes.

Loading is safe by default (`weights_only=True`): data.pkl is run by a small pickle
interpreter here that knows only an allow-list of globals and calls, so a checkpoint can
never run code. A damaged file raises RuntimeError (the archive) or pickle.UnpicklingError
(the pickle inside it), or EOFError for an empty file, as PyTorch does.
"""
from __future__ import annotations

import collections
import codecs
import contextlib
import importlib
import io
import os
import pickle
import pickletools
import struct
import sys
import uuid
import zipfile

import numpy as np

from . import _dtype as D
from ._device import Size, device, layout, sparse_coo, strided
from ._legacy import CPU_TENSOR_TYPES, CUDA_TENSOR_TYPES, TypedStorage, storage_class
from ._shape import storage_span
from ._storage import CPUStorage, Storage, allocate, normalize_device
from ._tensor import Tensor

__all__ = ["save", "load", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "safe_globals", "DEFAULT_PROTOCOL"]

DEFAULT_PROTOCOL = 2
LEGACY_MAGIC_NUMBER = 0x1950a86a20f9469cfc6c
LEGACY_PROTOCOL_VERSION = 1001
STORAGE_ALIGNMENT = 64
_ZIP_MAGIC = b"PK\x03\x04"


# =============================================================================================
# Globals by PyTorch's names
# =============================================================================================

class _TorchGlobal:
    """A function of PyTorch's named in a pickle (e.g. torch._utils._rebuild_tensor_v2).

    reftorch never imports torch: the saving pickler writes these by name, and the loaders
    map the names back to reftorch's own rebuild functions below."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        raise RuntimeError(f"{self.module}.{self.name} is only a name written into pickles")

    def __reduce__(self):
        return self.name  # "save as a global": the pickler's save_global writes our names

    def __repr__(self):
        return f"{self.module}.{self.name}"


_REBUILD_TENSOR_V2 = _TorchGlobal("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _TorchGlobal("torch._utils", "_rebuild_parameter")
_REBUILD_PARAMETER_WITH_STATE = _TorchGlobal("torch._utils", "_rebuild_parameter_with_state")
_REBUILD_FROM_TYPE_V2 = _TorchGlobal("torch._tensor", "_rebuild_from_type_v2")
_GET_LAYOUT = _TorchGlobal("torch.serialization", "_get_layout")
_REBUILD_SPARSE_TENSOR = _TorchGlobal("torch._utils", "_rebuild_sparse_tensor")


def _torch_name(obj):
    """The (module, name) PyTorch pickles `obj` under, or None for an ordinary global."""
    if isinstance(obj, _TorchGlobal):
        return obj.module, obj.name
    if isinstance(obj, D.dtype):
        return "torch", obj.name
    if isinstance(obj, type):
        if issubclass(obj, TypedStorage) and obj.dtype is not None:
            return "torch", obj.__name__
        for module, classes in (("torch", CPU_TENSOR_TYPES), ("torch.cuda", CUDA_TENSOR_TYPES)):
            if obj in classes.values():
                return module, obj.__name__
        if obj is Size or obj is device:
            return "torch", obj.__name__
        if obj is Tensor:
            return "torch", "Tensor"
    return None


# =============================================================================================
# save
# =============================================================================================

class _StorageTable:
    """Gives each distinct storage one key, so tensors sharing memory share it after load.

    reftorch can have two storage objects over the same memory (x.real and x.imag of a
    complex tensor each get a float view of its array); they are one storage in the file,
    as in PyTorch. Viewing the same memory as two dtypes cannot be saved (nor in PyTorch)."""

    def __init__(self, legacy):
        self.legacy = legacy
        self.keys = {}        # memory key -> (key in the file, dtype)
        self.storages = []    # (key, storage), in first-seen order; also keeps ids alive

    def persistent_id(self, obj):
        if isinstance(obj, TypedStorage):
            obj = obj._storage
        if not isinstance(obj, Storage):
            return None
        memory = _memory_key(obj)
        if memory not in self.keys:
            self.keys[memory] = (str(len(self.storages)), obj.dtype)
            self.storages.append((self.keys[memory][0], obj))
        key, dtype = self.keys[memory]
        if dtype is not obj.dtype:
            raise RuntimeError("Cannot save multiple tensors or storages that view the same "
                               "data as different types")
        pid = ("storage", storage_class(obj.dtype), key, _location(obj.device), len(obj))
        # The legacy format has a sixth field for views of storages (None: not a view).
        return pid + (None,) if self.legacy else pid


def _memory_key(storage):
    """What identifies a storage's memory: the address and size of a cpu array, else the
    storage object itself."""
    if isinstance(storage, CPUStorage) and len(storage):
        return "cpu", storage.array.__array_interface__["data"][0], storage.nbytes()
    return "object", id(storage)


def _location(dev):
    """How a device is written in a checkpoint: 'cpu', 'cuda:0', ..."""
    return "cpu" if dev.type == "cpu" else str(normalize_device(dev))


def _is_parameter(obj):
    """reftorch.nn.Parameter (if reftorch.nn exists) saves as PyTorch's Parameter does."""
    cls = type(obj)
    return cls.__name__ == "Parameter" and cls.__module__.startswith("reftorch.nn")


def _plain_tensor(t):
    """A plain Tensor with `t`'s storage and geometry (what torch's `param.data` is)."""
    return Tensor._make(t._storage, t._offset, tuple(t._shape), tuple(t._strides))


def _user_attributes(t):
    """Python attributes a user set on a tensor (t.note = ...), which PyTorch saves too.
    Names starting with '_' are reftorch's autograd bookkeeping and are not saved."""
    return {k: v for k, v in vars(t).items() if not k.startswith("_")}


def _reduce_tensor(t):
    """torch's pickled form of a tensor or Parameter, attributes included."""
    if t.is_sparse:  # torch's form: (layout, (indices, values, size, is_coalesced))
        return _REBUILD_SPARSE_TENSOR, (t.layout, (t._indices(), t._values(), Size(t.shape),
                                                   t.is_coalesced()))
    hooks = collections.OrderedDict()  # backward hooks are never saved (nor by torch)
    state = _user_attributes(t)
    if _is_parameter(t):
        args = (_plain_tensor(t), bool(t.requires_grad), hooks)
        if state:
            return _REBUILD_PARAMETER_WITH_STATE, args + (state,)
        return _REBUILD_PARAMETER, args
    args = (t._storage, t._offset, tuple(t._shape), tuple(t._strides), bool(t.requires_grad),
            hooks)
    if state:
        return _REBUILD_FROM_TYPE_V2, (_REBUILD_TENSOR_V2, Tensor, args, state)
    return _REBUILD_TENSOR_V2, args


class _TorchPicklerMixin:
    """A Pickler that writes tensors, storages, dtypes and devices under PyTorch's names.

    It is built on the pure-Python pickler (`pickle._Pickler`) because only that one lets a
    subclass write a global by name without importing the module that defines it."""

    def __init__(self, file, protocol, storages):
        super().__init__(file, protocol)
        self._storage_table = storages

    def persistent_id(self, obj):
        return self._storage_table.persistent_id(obj)

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return _reduce_tensor(obj)
        if isinstance(obj, device):
            # torch writes device('cpu') with one argument and device('cuda', 1) with two.
            args = (obj.type,) if obj.index is None else (obj.type, obj.index)
            return device, args
        if isinstance(obj, layout):
            return _GET_LAYOUT, (f"torch.{obj.name}",)
        return NotImplemented

    def save_global(self, obj, name=None):
        names = _torch_name(obj)
        if names is None:
            return super().save_global(obj, name)
        module, name = names
        if self.proto >= 4:
            self.save(module)
            self.save(name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode("utf-8"))
        self.memoize(obj)


def _pickler_class(pickle_module):
    base = pickle._Pickler if pickle_module is pickle else getattr(pickle_module, "Pickler", None)
    if not (isinstance(base, type) and issubclass(base, pickle._Pickler)):
        raise TypeError("save: pickle_module must be the pickle module or provide a Pickler "
                        "derived from pickle._Pickler (one that can write globals by name)")
    return type("TorchPickler", (_TorchPicklerMixin, base), {})


def _pickle(obj, pickle_module, protocol, storages):
    buffer = io.BytesIO()
    _pickler_class(pickle_module)(buffer, protocol, storages).dump(obj)
    return buffer.getvalue()


def _storage_bytes(storage):
    """A storage's elements as a byte buffer in native byte order (no copy on cpu)."""
    values = storage.array if isinstance(storage, CPUStorage) else storage.read(0, len(storage))
    return memoryview(np.ascontiguousarray(values).view(np.uint8))


def save(obj, f, pickle_module=pickle, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Save `obj` (tensors, containers of them, any picklable object) to a path or file.

    The file is PyTorch's checkpoint format: `torch.load` reads it, `reftorch.load` reads
    PyTorch's. Tensors that share a storage are saved with one copy of it."""
    storages = _StorageTable(legacy=not _use_new_zipfile_serialization)
    with _open_for_writing(f) as (stream, archive_name):
        if _use_new_zipfile_serialization:
            data_pkl = _pickle(obj, pickle_module, pickle_protocol, storages)
            _write_zip_checkpoint(stream, archive_name, data_pkl, storages,
                                  byteorder=not _disable_byteorder_record)
        else:
            _write_legacy_checkpoint(stream, obj, pickle_module, pickle_protocol, storages)


@contextlib.contextmanager
def _open_for_writing(f):
    """(binary stream, archive name): a path is opened (its stem names the archive), a
    file-like object is written in place (archive name 'archive', as torch does)."""
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise RuntimeError(f"Parent directory {parent} does not exist.")
        name = os.path.splitext(os.path.basename(path))[0] or "archive"
        with open(path, "wb") as stream:
            yield stream, name
    elif hasattr(f, "write"):
        yield f, "archive"
    else:
        raise AttributeError(f"expected 'f' to be string, path, or a file-like object with a "
                             f"'write' attribute, got {type(f).__name__}")


def _padding_field(position):
    """A zip extra field ("FB", length, b"Z" * n) that makes data start at `position` + its
    length on a multiple of STORAGE_ALIGNMENT, as PyTorch writes it."""
    pad = -(position + 4) % STORAGE_ALIGNMENT
    return b"FB" + struct.pack("<H", pad) + b"Z" * pad


def _write_zip_checkpoint(stream, archive_name, data_pkl, storages, byteorder):
    records = [("data.pkl", data_pkl), (".format_version", b"1"),
               (".storage_alignment", str(STORAGE_ALIGNMENT).encode())]
    if byteorder:
        records.append(("byteorder", sys.byteorder.encode()))
    records += [(f"data/{key}", _storage_bytes(storage)) for key, storage in storages.storages]
    serialization_id = f"{uuid.uuid4().int:040d}"[:40]
    records += [("version", b"3\n"), (".data/serialization_id", serialization_id.encode())]

    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED) as archive:
        position = 0  # where the next local header starts, from the archive's start
        for name, data in records:
            info = zipfile.ZipInfo(f"{archive_name}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            nbytes = len(data)
            # Local header: 30 fixed bytes, the name, the extra field; zipfile appends a
            # 20-byte zip64 field to records it expects to pass ZIP64_LIMIT (2 GiB).
            header = 30 + len(info.filename.encode("utf-8"))
            header += 20 if nbytes * 1.05 > zipfile.ZIP64_LIMIT else 0
            info.extra = _padding_field(position + header)
            archive.writestr(info, data)
            position = info.header_offset + header + len(info.extra) + nbytes


def _write_legacy_checkpoint(stream, obj, pickle_module, protocol, storages):
    for header in (LEGACY_MAGIC_NUMBER, LEGACY_PROTOCOL_VERSION,
                   {"protocol_version": LEGACY_PROTOCOL_VERSION,
                    "little_endian": sys.byteorder == "little",
                    "type_sizes": {"short": 2, "int": 4, "long": 4}}):
        stream.write(pickle.dumps(header, protocol=protocol))
    stream.write(_pickle(obj, pickle_module, protocol, storages))
    stream.write(pickle.dumps([key for key, _ in storages.storages], protocol=protocol))
    for _, storage in storages.storages:
        stream.write(struct.pack("=q", len(storage)))
        stream.write(_storage_bytes(storage))


# =============================================================================================
# Rebuilding objects while loading
# =============================================================================================

def _check_int(value, what):
    if not isinstance(value, int) or isinstance(value, bool):
        raise pickle.UnpicklingError(f"{what} must be an int, got {type(value).__name__}")
    return value


def _check_int_tuple(values, what):
    if not isinstance(values, (tuple, list)):
        raise pickle.UnpicklingError(f"{what} must be a tuple of ints, got "
                                     f"{type(values).__name__}")
    return tuple(_check_int(v, what) for v in values)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       metadata=None):
    """A tensor viewing `storage` with the saved geometry (torch._utils._rebuild_tensor_v2)."""
    if not isinstance(storage, TypedStorage):
        raise pickle.UnpicklingError(f"expected a storage to rebuild a tensor from, got "
                                     f"{type(storage).__name__}")
    base = storage._storage
    offset = _check_int(storage_offset, "storage offset")
    size = _check_int_tuple(size, "size")
    stride = _check_int_tuple(stride, "stride")
    _check_geometry(base, offset, size, stride)
    t = _apply_lazy_bits(Tensor._make(base, offset, size, stride), metadata)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _apply_lazy_bits(t, metadata):
    """PyTorch saves lazy negated/conjugated views with {"neg": True} / {"conj": True};
    reftorch has no such bits, so the values are materialised (a copy: the result no longer
    shares the file's storage)."""
    if isinstance(metadata, dict):
        if metadata.get("neg"):
            t = -t
        if metadata.get("conj"):
            t = t.conj()
    return t


def _check_geometry(storage, offset, size, stride):
    """Refuse a geometry that reaches outside the storage, with PyTorch's message."""
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: sizes {list(size)}, "
                           f"strides {list(stride)}")
    if offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"setStorage: negative sizes, strides or offset are not supported "
                           f"(sizes {list(size)}, strides {list(stride)}, offset {offset})")
    if 0 in size:
        return
    needed = offset + storage_span(size, stride)
    if needed > len(storage):
        itemsize = storage.dtype.itemsize
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
            f"and itemsize {itemsize} requiring a storage size of {needed * itemsize} are out "
            f"of bounds for storage of size {len(storage) * itemsize}")


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       dtype, metadata=None):
    """Like v2, for an untyped (byte) storage viewed as `dtype`."""
    if not isinstance(dtype, D.dtype):
        raise pickle.UnpicklingError(f"expected a dtype, got {type(dtype).__name__}")
    if not isinstance(storage, TypedStorage):
        raise pickle.UnpicklingError("expected a storage to rebuild a tensor from")
    if storage.dtype is not dtype:
        storage = _reinterpret(storage, dtype)
    return _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
                              backward_hooks, metadata)


def _reinterpret(storage, dtype):
    """The bytes of a byte storage as `dtype` elements (sharing memory on cpu)."""
    base = storage._storage
    nbytes = len(base) * base.dtype.itemsize
    if nbytes % dtype.itemsize:
        raise RuntimeError(f"a storage of {nbytes} bytes cannot hold {dtype} elements")
    if isinstance(base, CPUStorage):
        typed = CPUStorage(base.array.view(dtype.numpy_dtype), dtype)
    else:
        values = base.read(0, len(base)).view(dtype.numpy_dtype)
        typed = allocate(len(values), dtype, base.device)
        typed.write(0, values)
    return storage_class(dtype)(_storage=typed)


def _rebuild_tensor(storage, storage_offset, size, stride):
    """The pre-1.0 form, without requires_grad and hooks."""
    return _rebuild_tensor_v2(storage, storage_offset, size, stride, False, None)


def _parameter_class():
    from .nn import Parameter  # imported late: reftorch.nn is built on everything here
    return Parameter


def _rebuild_parameter(data, requires_grad, backward_hooks):
    """torch._utils._rebuild_parameter: a reftorch.nn.Parameter sharing data's storage."""
    if not isinstance(data, Tensor):
        raise pickle.UnpicklingError(f"expected a tensor for a Parameter, got "
                                     f"{type(data).__name__}")
    return _parameter_class()(data, bool(requires_grad))


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    param = _rebuild_parameter(data, requires_grad, backward_hooks)
    _set_attributes(param, state)
    return param


def _rebuild_from_type_v2(func, new_type, args, state):
    """torch._tensor._rebuild_from_type_v2: a tensor rebuilt by `func`, then given the
    Python attributes in `state`. Only reftorch's Tensor and Parameter types are built."""
    if func not in _SAFE_REBUILD_FUNCTIONS:
        raise pickle.UnpicklingError(f"_rebuild_from_type_v2 cannot call {func!r}")
    if not isinstance(args, tuple):
        raise pickle.UnpicklingError("_rebuild_from_type_v2 expects a tuple of arguments")
    result = func(*args)
    parameter = _parameter_class()
    if new_type is parameter and not isinstance(result, parameter):
        result = parameter(result, result.requires_grad)
    elif new_type is not Tensor and new_type is not parameter:
        raise pickle.UnpicklingError(f"cannot rebuild a tensor of type {new_type!r}")
    _set_attributes(result, state)
    return result


def _set_attributes(obj, state):
    """Apply a pickled state: a dict of attributes, or (dict, slot dict). Only the instance
    __dict__ is updated, so properties and slots cannot be replaced."""
    if isinstance(state, tuple) and len(state) == 2:
        state = state[0]
    if state is None:
        return
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise pickle.UnpicklingError(f"unsupported state for {type(obj).__name__}: "
                                     f"{type(state).__name__}")
    obj.__dict__.update(state)


def _get_layout(name):
    layouts = {"torch.strided": strided, "torch.sparse_coo": sparse_coo}
    if name not in layouts:
        raise pickle.UnpicklingError(f"reftorch has no layout {name!r}")
    return layouts[name]


def _rebuild_sparse_tensor(layout, data):
    """torch._utils._rebuild_sparse_tensor: a sparse COO tensor from (indices, values, size
    [, is_coalesced]), its indices checked against the size as PyTorch's loader does."""
    if layout is not sparse_coo or not isinstance(data, tuple) or len(data) not in (3, 4):
        raise pickle.UnpicklingError(f"cannot rebuild a sparse tensor of layout {layout!r}")
    from .sparse import sparse_coo_tensor
    is_coalesced = data[3] if len(data) == 4 else None
    return sparse_coo_tensor(data[0], data[1], data[2], check_invariants=True,
                             is_coalesced=is_coalesced)


_SAFE_REBUILD_FUNCTIONS = {_rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_tensor,
                           _rebuild_sparse_tensor,
                           _rebuild_parameter}


# --- checked builtins for the weights-only interpreter ---------------------------------------
# The allow-listed builtins are called through these, so a checkpoint cannot use them for
# anything but rebuilding plain data (e.g. bytearray(10**12) is refused).

def _safe_ordered_dict(*args):
    return collections.OrderedDict(*_pairs(args, "OrderedDict"))


def _safe_counter(*args):
    return collections.Counter(*_pairs(args, "Counter"))


def _pairs(args, what):
    if not args:
        return ()
    if len(args) == 1 and isinstance(args[0], (list, tuple, dict)):
        return args
    raise pickle.UnpicklingError(f"{what} takes one list of pairs in a weights-only load")


def _safe_set(items=()):
    return set(_sequence(items, "set"))


def _safe_frozenset(items=()):
    return frozenset(_sequence(items, "frozenset"))


def _sequence(items, what):
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise pickle.UnpicklingError(f"{what} takes a list in a weights-only load")
    return items


def _safe_complex(real=0.0, imag=0.0):
    if not all(isinstance(v, (int, float)) for v in (real, imag)):
        raise pickle.UnpicklingError("complex takes two numbers in a weights-only load")
    return complex(real, imag)


def _safe_bytearray(data=b"", encoding=None):
    if isinstance(data, str) and encoding is not None:
        data = _safe_encode(data, encoding)
    if not isinstance(data, (bytes, bytearray)):
        raise pickle.UnpicklingError("bytearray takes bytes in a weights-only load")
    return bytearray(data)


def _safe_encode(text, encoding="utf-8"):
    """_codecs.encode: how protocol 2 pickles bytes (as latin-1 text)."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "utf-8", "ascii"):
        raise pickle.UnpicklingError("_codecs.encode takes text and a latin1/utf-8 encoding")
    return codecs.encode(text, encoding)


def _safe_size(sizes=()):
    return Size(_check_int_tuple(sizes, "torch.Size"))


def _safe_device(type_or_name, index=None):
    if not isinstance(type_or_name, (str, int)) or (index is not None
                                                    and not isinstance(index, int)):
        raise pickle.UnpicklingError("torch.device takes a string and an optional index")
    return device(type_or_name, index)


# =============================================================================================
# The allow-list: PyTorch's (and reftorch's) global names -> reftorch objects
# =============================================================================================

def _torch_globals():
    """Global names that mean the same in PyTorch and reftorch, for both loaders."""
    table = {
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_sparse_tensor"): _rebuild_sparse_tensor,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
        ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
        ("torch.serialization", "_get_layout"): _get_layout,
        ("torch", "Tensor"): Tensor,
        ("torch.storage", "UntypedStorage"): _UntypedStorage,
        ("torch.storage", "TypedStorage"): TypedStorage,
    }
    for dtype in D.ALL_DTYPES:
        table["torch", dtype.name] = dtype
        table["reftorch._dtype", dtype.name] = dtype
        cls = storage_class(dtype)
        table["torch", cls.__name__] = table["torch.cuda", cls.__name__] = cls
    for module, classes in (("torch", CPU_TENSOR_TYPES), ("torch.cuda", CUDA_TENSOR_TYPES)):
        for cls in classes.values():
            table[module, cls.__name__] = cls
    return table


class _UntypedStorage:
    """Stands for torch.storage.UntypedStorage in persistent ids: bytes, typed by the
    tensor (torch._utils._rebuild_tensor_v3) that views them."""
    dtype = D.uint8


_CALLABLE_GLOBALS = {  # name -> (what full unpickling calls, what weights-only calls)
    ("collections", "OrderedDict"): (collections.OrderedDict, _safe_ordered_dict),
    ("collections", "Counter"): (collections.Counter, _safe_counter),
    ("builtins", "set"): (set, _safe_set),
    ("builtins", "frozenset"): (frozenset, _safe_frozenset),
    ("builtins", "complex"): (complex, _safe_complex),
    ("builtins", "bytearray"): (bytearray, _safe_bytearray),
    ("_codecs", "encode"): (codecs.encode, _safe_encode),
    ("torch", "Size"): (Size, _safe_size),
    ("torch", "device"): (device, _safe_device),
    ("reftorch._device", "Size"): (Size, _safe_size),
    ("reftorch._device", "device"): (device, _safe_device),
}

_TORCH_GLOBALS = _torch_globals()
_user_safe_globals = {}  # "module.name" -> object, from add_safe_globals


def _full_global(module, name):
    """A torch.* global for full (weights_only=False) unpickling; None if not PyTorch's."""
    if (module, name) in _TORCH_GLOBALS:
        return _TORCH_GLOBALS[module, name]
    if (module, name) in _CALLABLE_GLOBALS:
        return _CALLABLE_GLOBALS[module, name][0]
    if (module, name) == ("torch.nn.parameter", "Parameter"):
        return _parameter_class()
    return None


def _safe_global(module, name):
    """The object a weights-only load may use for GLOBAL `module name`, or raise."""
    if (module, name) in _TORCH_GLOBALS:
        return _TORCH_GLOBALS[module, name]
    if (module, name) in _CALLABLE_GLOBALS:
        return _CALLABLE_GLOBALS[module, name][1]
    if (module, name) == ("torch.nn.parameter", "Parameter"):
        return _parameter_class()  # only as the type in _rebuild_from_type_v2, never called
    qualified = f"{module}.{name}"
    if qualified in _user_safe_globals:
        return _user_safe_globals[qualified]
    if module == "torch" or module.startswith("torch."):
        raise pickle.UnpicklingError(
            f"Weights only load failed. Unsupported global: GLOBAL {qualified}: reftorch has no "
            f"equivalent of it in weights-only loads (a dtype, tensor type or class reftorch "
            f"does not have); weights_only=False maps other torch.* names to reftorch.* ones.")
    raise pickle.UnpicklingError(
        f"Weights only load failed. Unsupported global: GLOBAL {qualified} was not an allowed "
        f"global by default. Use reftorch.serialization.add_safe_globals([{name}]) to allow it "
        f"if you trust it, or re-run reftorch.load with weights_only=False, which can run "
        f"arbitrary code, only if you trust the source of the checkpoint.")


def add_safe_globals(safe_globals):
    """Allow these functions/classes in weights-only loads. Items are objects or
    (object, "module.name") pairs."""
    for item in safe_globals:
        if isinstance(item, tuple):
            obj, qualified = item
        else:
            obj, qualified = item, f"{item.__module__}.{item.__qualname__}"
        _user_safe_globals[qualified] = obj


def get_safe_globals():
    """The globals added with add_safe_globals."""
    return list(_user_safe_globals.values())


def clear_safe_globals():
    _user_safe_globals.clear()


@contextlib.contextmanager
def safe_globals(globals_to_allow):
    """Allow globals for weights-only loads inside a `with` block."""
    saved = dict(_user_safe_globals)
    add_safe_globals(globals_to_allow)
    try:
        yield
    finally:
        _user_safe_globals.clear()
        _user_safe_globals.update(saved)


# =============================================================================================
# The weights-only pickle interpreter
# =============================================================================================

# Protocols 0-2 write Python 2 module names for builtins (pickle's fix_imports).
_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


class WeightsOnlyUnpickler:
    """Runs a pickle with an allow-list: globals come from `_safe_global`, calls are only
    to those globals, and containers are built directly. Nothing in the file can import a
    module or call an arbitrary function, and every malformed input ends in
    pickle.UnpicklingError (or RuntimeError from a rebuilt tensor's checks)."""

    def __init__(self, data, persistent_load, encoding="ASCII"):
        self._data = data
        self._persistent_load = persistent_load
        self._encoding = encoding

    def load(self):
        """Run the pickle that starts at the current position; returns its object."""
        try:
            return self._run()
        except (pickle.UnpicklingError, RuntimeError):
            raise
        except Exception as exc:  # malformed pickles: IndexError, KeyError, ValueError ...
            raise pickle.UnpicklingError(
                f"Weights only load failed: corrupt or unsupported pickle "
                f"({type(exc).__name__}: {exc})") from None

    def _run(self):
        self.stack, self.metastack, self.memo = [], [], {}
        for opcode, arg, pos in pickletools.genops(self._data):
            if opcode.name == "STOP":
                if len(self.stack) != 1 or self.metastack:
                    raise pickle.UnpicklingError("pickle stack is not a single object at STOP")
                return self.stack.pop()
            handler = self._HANDLERS.get(opcode.name)
            if handler is None:  # EXT*, INST, OBJ, NEWOBJ_EX, out-of-band buffers ...
                raise pickle.UnpicklingError(
                    f"Weights only load failed: unsupported pickle opcode {opcode.name} at "
                    f"position {pos}")
            handler(self, arg)
        raise pickle.UnpicklingError("pickle data was truncated")

    # --- stack helpers -------------------------------------------------------------------
    def _pop_mark(self):
        items = self.stack
        self.stack = self.metastack.pop()
        return items

    # --- constants -----------------------------------------------------------------------
    def _value(self, arg):
        self.stack.append(arg)

    def _py2_string(self, arg):
        # Python 2 `str`: text in old checkpoints; pickletools decodes it as latin-1.
        self.stack.append(arg.encode("latin-1") if self._encoding == "bytes" else arg)

    def _none(self, arg):
        self.stack.append(None)

    def _true(self, arg):
        self.stack.append(True)

    def _false(self, arg):
        self.stack.append(False)

    # --- containers ----------------------------------------------------------------------
    def _mark(self, arg):
        self.metastack.append(self.stack)
        self.stack = []

    def _empty_tuple(self, arg):
        self.stack.append(())

    def _tuple(self, arg):
        items = self._pop_mark()  # (before touching self.stack: popping replaces it)
        self.stack.append(tuple(items))

    def _tuple1(self, arg):
        self._tuple_of_last(1)

    def _tuple2(self, arg):
        self._tuple_of_last(2)

    def _tuple3(self, arg):
        self._tuple_of_last(3)

    def _tuple_of_last(self, n):
        if len(self.stack) < n:
            raise pickle.UnpicklingError("pickle stack underflow")
        items = tuple(self.stack[-n:])
        del self.stack[-n:]
        self.stack.append(items)

    def _empty_list(self, arg):
        self.stack.append([])

    def _list(self, arg):
        items = self._pop_mark()
        self.stack.append(items)

    def _append(self, arg):
        value = self.stack.pop()
        self._target(list).append(value)

    def _appends(self, arg):
        items = self._pop_mark()
        self._target(list).extend(items)

    def _empty_dict(self, arg):
        self.stack.append({})

    def _dict(self, arg):
        items = self._pop_mark()
        self.stack.append(dict(zip(items[::2], items[1::2])))

    def _setitem(self, arg):
        value = self.stack.pop()
        key = self.stack.pop()
        self._target(dict)[key] = value

    def _setitems(self, arg):
        items = self._pop_mark()
        target = self._target(dict)
        if len(items) % 2:
            raise pickle.UnpicklingError("odd number of items for SETITEMS")
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    def _empty_set(self, arg):
        self.stack.append(set())

    def _additems(self, arg):
        items = self._pop_mark()
        self._target(set).update(items)

    def _frozenset(self, arg):
        items = self._pop_mark()
        self.stack.append(frozenset(items))

    def _target(self, kind):
        target = self.stack[-1]
        if not isinstance(target, kind):
            raise pickle.UnpicklingError(f"expected a {kind.__name__} on the pickle stack, got "
                                         f"{type(target).__name__}")
        return target

    # --- stack and memo ------------------------------------------------------------------
    def _pop(self, arg):
        if self.stack:
            self.stack.pop()
        else:
            self._pop_mark()

    def _pop_mark_op(self, arg):
        self._pop_mark()

    def _dup(self, arg):
        self.stack.append(self.stack[-1])

    def _put(self, arg):
        if arg < 0:
            raise pickle.UnpicklingError("negative PUT argument")
        self.memo[arg] = self.stack[-1]

    def _memoize(self, arg):
        self.memo[len(self.memo)] = self.stack[-1]

    def _get(self, arg):
        if arg not in self.memo:
            raise pickle.UnpicklingError(f"Memo value not found at index {arg}")
        self.stack.append(self.memo[arg])

    def _proto(self, arg):
        if not 0 <= arg <= pickle.HIGHEST_PROTOCOL:
            raise pickle.UnpicklingError(f"unsupported pickle protocol: {arg}")

    def _frame(self, arg):
        pass  # frames only group opcodes for buffered reading

    # --- globals, calls, objects ---------------------------------------------------------
    def _global(self, arg):
        module, _, name = arg.partition(" ")
        self.stack.append(_safe_global(_PY2_MODULES.get(module, module), name))

    def _stack_global(self, arg):
        name = self.stack.pop()
        module = self.stack.pop()
        if not isinstance(module, str) or not isinstance(name, str):
            raise pickle.UnpicklingError("STACK_GLOBAL requires str")
        self.stack.append(_safe_global(_PY2_MODULES.get(module, module), name))

    def _reduce(self, arg):
        args = self.stack.pop()
        func = self.stack.pop()
        if not isinstance(args, tuple):
            raise pickle.UnpicklingError("REDUCE arguments must be a tuple")
        self.stack.append(self._call(func, args))

    def _call(self, func, args):
        if not self._callable(func):
            raise pickle.UnpicklingError(
                f"Weights only load failed: trying to call reduce for unrecognized function "
                f"{func!r}")
        return func(*args)

    @staticmethod
    def _callable(func):
        """Only rebuild functions, the checked builtins and user-allowed globals are called
        (storage classes and dtypes are allowed globals too, but are never called)."""
        allowed = (*_SAFE_REBUILD_FUNCTIONS, *_OTHER_SAFE_CALLS, *_user_safe_globals.values())
        return any(func is obj for obj in allowed)

    def _newobj(self, arg):
        args = self.stack.pop()
        cls = self.stack.pop()
        if not any(cls is obj for obj in _user_safe_globals.values()) \
                or not isinstance(cls, type) or not isinstance(args, tuple):
            raise pickle.UnpicklingError(
                f"Weights only load failed: trying to instantiate unsupported class {cls!r}")
        self.stack.append(cls.__new__(cls, *args))

    def _build(self, arg):
        state = self.stack.pop()
        obj = self.stack[-1]
        if any(type(obj) is cls for cls in _user_safe_globals.values()):
            setstate = getattr(obj, "__setstate__", None)  # a class the user trusts
            if setstate is not None:
                setstate(state)
            else:
                _set_attributes(obj, state)
        elif isinstance(obj, (collections.OrderedDict, collections.Counter, Tensor)):
            _set_attributes(obj, state)  # e.g. a state_dict's `_metadata` attribute
        else:
            raise pickle.UnpicklingError(f"Weights only load failed: cannot set the state of "
                                         f"a {type(obj).__name__}")

    def _persid(self, arg):
        self.stack.append(self._persistent_load(arg))

    def _binpersid(self, arg):
        self.stack.append(self._persistent_load(self.stack.pop()))


_H = WeightsOnlyUnpickler
_VALUE_OPCODES = ("INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT",
                  "BINFLOAT", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8",
                  "SHORT_BINBYTES", "BINBYTES", "BINBYTES8", "BYTEARRAY8")
_H._HANDLERS = {
    **{name: _H._value for name in _VALUE_OPCODES},
    "STRING": _H._py2_string, "BINSTRING": _H._py2_string, "SHORT_BINSTRING": _H._py2_string,
    "NONE": _H._none, "NEWTRUE": _H._true, "NEWFALSE": _H._false,
    "MARK": _H._mark, "EMPTY_TUPLE": _H._empty_tuple, "TUPLE": _H._tuple,
    "TUPLE1": _H._tuple1, "TUPLE2": _H._tuple2, "TUPLE3": _H._tuple3,
    "EMPTY_LIST": _H._empty_list, "LIST": _H._list, "APPEND": _H._append,
    "APPENDS": _H._appends, "EMPTY_DICT": _H._empty_dict, "DICT": _H._dict,
    "SETITEM": _H._setitem, "SETITEMS": _H._setitems, "EMPTY_SET": _H._empty_set,
    "ADDITEMS": _H._additems, "FROZENSET": _H._frozenset,
    "POP": _H._pop, "POP_MARK": _H._pop_mark_op, "DUP": _H._dup,
    "PUT": _H._put, "BINPUT": _H._put, "LONG_BINPUT": _H._put, "MEMOIZE": _H._memoize,
    "GET": _H._get, "BINGET": _H._get, "LONG_BINGET": _H._get,
    "PROTO": _H._proto, "FRAME": _H._frame,
    "GLOBAL": _H._global, "STACK_GLOBAL": _H._stack_global, "REDUCE": _H._reduce,
    "NEWOBJ": _H._newobj, "BUILD": _H._build,
    "PERSID": _H._persid, "BINPERSID": _H._binpersid,
}
_OTHER_SAFE_CALLS = {safe for _, safe in _CALLABLE_GLOBALS.values()} | {
    _rebuild_parameter_with_state, _rebuild_from_type_v2, _get_layout}


class _FullUnpickler(pickle.Unpickler):
    """weights_only=False: ordinary unpickling (it can run code), with PyTorch's names
    mapped to reftorch's objects."""

    def __init__(self, file, persistent_load, **kwargs):
        super().__init__(file, **kwargs)
        self._load_storage = persistent_load

    def find_class(self, module, name):
        found = _full_global(module, name)
        if found is not None:
            return found
        if module == "torch" or module.startswith("torch."):
            found = _reftorch_attribute(module, name)
            if found is None:
                raise pickle.UnpicklingError(f"reftorch has no equivalent of {module}.{name}")
            return found
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self._load_storage(pid)


def _reftorch_attribute(module, name):
    """torch.a.b.Name -> reftorch.a.b.Name when reftorch has it (full unpickling only)."""
    try:
        found = importlib.import_module("reftorch" + module[len("torch"):])
    except ImportError:
        return None
    for part in name.split("."):
        found = getattr(found, part, None)
    return found


# =============================================================================================
# load
# =============================================================================================

def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load an object saved by torch.save or reftorch.save (zip or legacy format).

    map_location: None (storages go back where they were saved), a device or string (all
    storages go there), a dict from saved location to location, or a callable
    `(storage, location) -> storage or None`.
    weights_only (True unless a pickle_module is given, as in PyTorch) only rebuilds tensors,
    containers and allow-listed globals and never runs code from the file;
    weights_only=False unpickles fully, which can run arbitrary code.
    mmap=True maps the storages of a zip checkpoint given by path instead of reading them."""
    if weights_only is None:
        weights_only = pickle_module is None
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is "
                           "specified")
    with _open_for_reading(f) as stream:
        magic = stream.read(4)
        stream.seek(-len(magic), io.SEEK_CUR)
        loader = _Loader(map_location, pickle_module or pickle, weights_only, pickle_load_args)
        if magic == _ZIP_MAGIC:
            if mmap and not isinstance(f, (str, os.PathLike)):
                raise ValueError("f must be a file path in order to use the mmap argument")
            return loader.load_zip(stream, _memory_map(f) if mmap else None)
        if mmap:
            raise RuntimeError("mmap can only be used with files saved with "
                               "`torch.save(_use_new_zipfile_serialization=True), please "
                               "torch.save your checkpoint with this option in order to use "
                               "mmap.")
        return loader.load_legacy(stream)


@contextlib.contextmanager
def _open_for_reading(f):
    """A seekable binary stream for a path or file-like object."""
    if isinstance(f, (str, os.PathLike)):
        with open(os.fspath(f), "rb") as stream:
            yield stream
        return
    if not hasattr(f, "read"):
        raise AttributeError(f"expected 'f' to be string, path, or a file-like object with a "
                             f"'read' attribute, got {type(f).__name__}")
    seekable = getattr(f, "seekable", None)
    yield f if seekable is not None and seekable() else io.BytesIO(f.read())


def _memory_map(path):
    return np.memmap(os.fspath(path), dtype=np.uint8, mode="c")


class _Loader:
    """One load: the storages read so far (by key, so sharing survives) and where they go."""

    def __init__(self, map_location, pickle_module, weights_only, pickle_load_args):
        self.map_location = map_location
        self.pickle_module = pickle_module
        self.weights_only = weights_only
        self.pickle_load_args = pickle_load_args
        self.storages = {}

    def unpickle(self, stream, persistent_load):
        if self.weights_only:
            encoding = self.pickle_load_args.get("encoding", "ASCII")
            return WeightsOnlyUnpickler(stream, persistent_load, encoding).load()
        unpickler = _FullUnpickler if self.pickle_module is pickle else type(
            "FullUnpickler", (_FullUnpickler, self.pickle_module.Unpickler), {})
        return unpickler(stream, persistent_load, **self.pickle_load_args).load()

    # --- the zip format ------------------------------------------------------------------
    def load_zip(self, stream, mapped=None):
        archive = _ZipCheckpoint(stream, mapped)
        with archive:
            self.archive = archive
            data_pkl = archive.read_record("data.pkl")
            return self.unpickle(io.BytesIO(data_pkl), self.zip_persistent_load)

    def zip_persistent_load(self, pid):
        cls, key, location, numel = _parse_pid(pid, 5)
        if key not in self.storages:
            values = self.archive.read_storage(key, cls.dtype, numel)
            self.storages[key] = self.restore(CPUStorage(values, cls.dtype), location)
        storage = self.storages[key]
        return _typed(storage)

    # --- the legacy format ---------------------------------------------------------------
    def load_legacy(self, stream):
        if _is_tar(stream):
            raise RuntimeError("tar-format checkpoints (PyTorch < 0.4) are not supported by "
                               "reftorch.load")
        if not stream.read(1):
            raise EOFError("Ran out of input")
        stream.seek(-1, io.SEEK_CUR)
        header = WeightsOnlyUnpickler(stream, _no_persistent_ids)
        if header.load() != LEGACY_MAGIC_NUMBER:
            raise RuntimeError("Invalid magic number; corrupt file?")
        version = header.load()
        if version != LEGACY_PROTOCOL_VERSION:
            raise RuntimeError(f"Invalid protocol version: {version}")
        sys_info = header.load()
        little_endian = not isinstance(sys_info, dict) or sys_info.get("little_endian", True)
        self.legacy_size = _stream_size(stream)
        self.pending = {}  # key -> (dtype, numel) of storages whose bytes follow the pickle
        result = self.unpickle(stream, self.legacy_persistent_load)
        keys = header.load()
        if not isinstance(keys, list):
            raise pickle.UnpicklingError("corrupt checkpoint: storage key list expected")
        for key in keys:
            self.read_legacy_storage(stream, key, little_endian)
        return result

    def legacy_persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 6):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
        cls, key, location, numel = _parse_pid(pid[:5], 5)
        view_metadata = pid[5]
        if key not in self.storages:
            # The bytes come after the pickle: allocate now (where map_location says, as
            # PyTorch does), fill in read_legacy_storage.
            if numel * cls.dtype.itemsize > self.legacy_size:
                raise RuntimeError(f"corrupt checkpoint: storage {key} of {numel} elements is "
                                   f"larger than the file")
            empty = CPUStorage(np.zeros(numel, dtype=cls.dtype.numpy_dtype), cls.dtype)
            self.storages[key] = self.restore(empty, location)
            self.pending[key] = (cls.dtype, numel)
        storage = self.storages[key]
        if view_metadata is not None:
            storage = _legacy_storage_view(storage, view_metadata)
        return _typed(storage)

    def read_legacy_storage(self, stream, key, little_endian):
        if key not in self.pending:
            raise RuntimeError(f"corrupt checkpoint: unknown storage key {key!r}")
        dtype, numel = self.pending.pop(key)
        count = stream.read(8)
        if len(count) != 8 or struct.unpack("<q" if little_endian else ">q", count)[0] != numel:
            raise RuntimeError(f"corrupt checkpoint: bad size header for storage {key}")
        data = stream.read(numel * dtype.itemsize)
        if len(data) != numel * dtype.itemsize:
            raise RuntimeError(f"corrupt checkpoint: storage {key} is truncated")
        values = _decode_values(bytearray(data), dtype, "little" if little_endian else "big")
        self.storages[key].write(0, values)

    # --- map_location ---------------------------------------------------------------------
    def restore(self, storage, location):
        """Move a freshly read cpu storage to where map_location says."""
        where = self.map_location
        if callable(where):
            result = where(_typed(storage), location)
            if result is not None:
                if isinstance(result, TypedStorage):
                    result = result._storage
                if not isinstance(result, Storage):
                    raise TypeError(f"map_location returned {type(result).__name__}, expected "
                                    f"a storage or None")
                return result
            target = location
        elif isinstance(where, dict):
            target = where.get(location, location)
        elif where is not None:
            target = where
        else:
            target = location
        return _to_device(storage, target)


def _to_device(storage, target):
    """A cpu storage moved to `target` (a location string or device)."""
    target = target if isinstance(target, device) else device(str(target))
    if target.type == "cpu":
        return storage
    try:
        moved = allocate(len(storage), storage.dtype, normalize_device(target))
    except RuntimeError as exc:
        if target.type == "cuda":
            raise RuntimeError(
                "Attempting to deserialize object on a CUDA device but "
                "torch.cuda.is_available() is False. If you are running on a CPU-only machine, "
                "please use torch.load with map_location=torch.device('cpu') to map your "
                "storages to the CPU.") from exc
        raise
    moved.write(0, storage.array)
    return moved


def _typed(storage):
    return storage_class(storage.dtype)(_storage=storage)


def _parse_pid(pid, length):
    """Check a storage persistent id ('storage', class, key, location, numel)."""
    if not (isinstance(pid, tuple) and len(pid) == length and pid[0] == "storage"):
        raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
    _, cls, key, location, numel = pid
    if not (isinstance(cls, type) and issubclass(cls, (TypedStorage, _UntypedStorage))
            and cls.dtype is not None):
        raise pickle.UnpicklingError(f"persistent id names {cls!r}, not a storage type")
    if not isinstance(key, str) or not isinstance(location, str):
        raise pickle.UnpicklingError("storage key and location must be strings")
    if _check_int(numel, "storage size") < 0:
        raise pickle.UnpicklingError("negative storage size")
    return cls, key, location, numel


def _no_persistent_ids(pid):
    raise pickle.UnpicklingError("unexpected persistent id in a checkpoint header")


def _legacy_storage_view(storage, view_metadata):
    """Old checkpoints could save a slice of a storage: (view key, offset, size)."""
    if not (isinstance(view_metadata, tuple) and len(view_metadata) == 3):
        raise pickle.UnpicklingError("corrupt storage view metadata")
    _, offset, size = view_metadata
    _check_int(offset, "view offset")
    _check_int(size, "view size")
    if not isinstance(storage, CPUStorage) or offset < 0 or size < 0 \
            or offset + size > len(storage):
        raise RuntimeError("unsupported or out-of-range legacy storage view")
    return CPUStorage(storage.array[offset:offset + size], storage.dtype)


def _is_tar(stream):
    start = stream.tell()
    block = stream.read(512)
    stream.seek(start)
    return len(block) == 512 and block[257:262] == b"ustar"


def _stream_size(stream):
    here = stream.tell()
    end = stream.seek(0, io.SEEK_END)
    stream.seek(here)
    return end


def _decode_values(buffer, dtype, byteorder, mapped=False):
    """Raw storage bytes -> a 1-D array of `dtype` in native order."""
    values = np.frombuffer(buffer, dtype=dtype.numpy_dtype)
    if byteorder != sys.byteorder and dtype.itemsize > 1:
        values = values.byteswap()  # a copy in native order
    if dtype is D.bool and not mapped:
        values = values.view(np.uint8) != 0  # any nonzero byte is True, as in C
    return values


class _ZipCheckpoint:
    """Reads records of a PyTorch zip checkpoint; every archive problem is a RuntimeError."""

    def __init__(self, stream, mapped=None):
        self.size = _stream_size(stream)
        self.mapped = mapped
        with _archive_errors():
            self.zip = zipfile.ZipFile(stream)
            names = self.zip.namelist()
            if not names:
                raise RuntimeError("archive has no records")
            self.prefix = names[0].split("/")[0]
            if f"{self.prefix}/data.pkl" not in names:
                if f"{self.prefix}/constants.pkl" in names:
                    raise RuntimeError("this is a TorchScript archive (torch.jit.save); "
                                       "reftorch.load reads torch.save checkpoints only")
                raise RuntimeError("archive has no data.pkl record")
            self.byteorder = "little"
            if f"{self.prefix}/byteorder" in names:
                self.byteorder = self.read_record("byteorder").decode("ascii")
                if self.byteorder not in ("little", "big"):
                    raise RuntimeError(f"unknown byteorder {self.byteorder!r}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.zip.close()

    def read_record(self, name):
        with _archive_errors():
            return self.zip.read(f"{self.prefix}/{name}")

    def read_storage(self, key, dtype, numel):
        """The elements of record data/<key>, which must hold exactly `numel` of them."""
        nbytes = numel * dtype.itemsize
        with _archive_errors():
            info = self.zip.getinfo(f"{self.prefix}/data/{key}")
            if info.file_size != nbytes:
                raise RuntimeError(f"record data/{key} holds {info.file_size} bytes, expected "
                                   f"{nbytes} ({numel} {dtype} elements)")
            stored = info.compress_type == zipfile.ZIP_STORED
            if stored and nbytes > self.size:
                raise RuntimeError(f"record data/{key} is larger than the file")
            if self.mapped is not None:
                if not stored:
                    raise RuntimeError("mmap needs uncompressed records")
                start = self._data_start(info)
                buffer = self.mapped[start:start + nbytes]
                if len(buffer) != nbytes:
                    raise RuntimeError(f"record data/{key} is truncated")
            else:
                buffer = bytearray(nbytes)
                with self.zip.open(info) as record:
                    got = record.readinto(buffer)
                    if got != nbytes or record.read(1):
                        raise RuntimeError(f"record data/{key} has the wrong length")
        return _decode_values(buffer, dtype, self.byteorder, mapped=self.mapped is not None)

    def _data_start(self, info):
        """Where a record's bytes start: after its local header (which may differ from the
        central directory's copy in its extra field)."""
        header = bytes(self.mapped[info.header_offset:info.header_offset + 30])
        if len(header) != 30 or header[:4] != _ZIP_MAGIC:
            raise RuntimeError("bad local file header")
        name_length, extra_length = struct.unpack("<HH", header[26:30])
        return info.header_offset + 30 + name_length + extra_length


@contextlib.contextmanager
def _archive_errors():
    """Turn any failure while reading the zip structure into RuntimeError, as PyTorch's
    reader reports them ("PytorchStreamReader failed reading zip archive ...")."""
    try:
        yield
    except NotImplementedError as exc:  # zipfile: an unsupported zip feature
        raise RuntimeError(f"PytorchStreamReader failed reading zip archive: {exc}") from None
    except RuntimeError:
        raise
    except Exception as exc:  # BadZipFile, KeyError, struct.error, OSError, ValueError ...
        raise RuntimeError(f"PytorchStreamReader failed reading zip archive: "
                           f"{type(exc).__name__}: {exc}. The checkpoint is corrupt or "
                           f"truncated.") from None
