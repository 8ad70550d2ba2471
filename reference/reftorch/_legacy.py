"""Legacy tensor types (torch.FloatTensor ...), typed storages (torch.FloatStorage ...),
`Tensor.type()` and `set_default_tensor_type`.

Each legacy tensor class is a constructor and an `isinstance` test for (dtype, device type);
the tensors it makes are ordinary `Tensor`s. Typed storages are views of a tensor storage.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from . import _dtype as D
from ._device import CPU, Size
from ._storage import CPUStorage, Storage, allocate, normalize_device
from ._shape import contiguous_strides as _contiguous_strides
from ._tensor import Tensor

_default_tensor_class = None  # set below to FloatTensor


# --- legacy tensor classes ----------------------------------------------------------------

class _LegacyTensorMeta(type):
    def __instancecheck__(cls, obj):
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype
                and obj.device.type == cls.device_type and not obj.is_sparse)

    def __call__(cls, *args, **kwargs):
        return legacy_construct(Tensor, cls.dtype, args, kwargs, cls.device_type)

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def _legacy_class(dtype, device_type):
    module = "torch" if device_type == "cpu" else "torch.cuda"
    name = dtype.legacy_prefix + "Tensor"
    return _LegacyTensorMeta(name, (), {"dtype": dtype, "device_type": device_type,
                                        "__module__": module, "is_cuda": device_type == "cuda"})


_LEGACY_DTYPES = (D.float32, D.float64, D.float16, D.bfloat16, D.uint8, D.int8, D.int16,
                  D.int32, D.int64, D.bool, D.complex64, D.complex128)
CPU_TENSOR_TYPES = {d: _legacy_class(d, "cpu") for d in _LEGACY_DTYPES}
CUDA_TENSOR_TYPES = {d: _legacy_class(d, "cuda") for d in _LEGACY_DTYPES}
_BY_TYPE_NAME = {f"{cls.__module__}.{cls.__name__}": cls
                 for table in (CPU_TENSOR_TYPES, CUDA_TENSOR_TYPES) for cls in table.values()}

FloatTensor = CPU_TENSOR_TYPES[D.float32]
DoubleTensor = CPU_TENSOR_TYPES[D.float64]
HalfTensor = CPU_TENSOR_TYPES[D.float16]
BFloat16Tensor = CPU_TENSOR_TYPES[D.bfloat16]
ByteTensor = CPU_TENSOR_TYPES[D.uint8]
CharTensor = CPU_TENSOR_TYPES[D.int8]
ShortTensor = CPU_TENSOR_TYPES[D.int16]
IntTensor = CPU_TENSOR_TYPES[D.int32]
LongTensor = CPU_TENSOR_TYPES[D.int64]
BoolTensor = CPU_TENSOR_TYPES[D.bool]
_default_tensor_class = FloatTensor


def legacy_construct(cls, dtype, args, kwargs, device_type="cpu"):
    """torch.Tensor(*sizes), torch.Tensor(sequence), torch.Tensor(storage), torch.Tensor()."""
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if dtype is None:
        dtype = _default_tensor_class.dtype
        device_type = _default_tensor_class.device_type
    device = normalize_device(device if device is not None else device_type)
    if not args:
        return Tensor._empty((0,), dtype, device)
    if all(isinstance(a, (builtins.int, np.integer)) and not isinstance(a, builtins.bool)
           for a in args):
        return Tensor._empty(tuple(builtins.int(a) for a in args), dtype, device)
    if len(args) == 1:
        (data,) = args
        if isinstance(data, Size):
            return Tensor._empty(tuple(data), dtype, device)
        if isinstance(data, TypedStorage):
            data = data._storage
        if isinstance(data, Storage):
            return Tensor._make(data, 0, (len(data),), (1,))
        if isinstance(data, Tensor):
            if data.dtype is not dtype:
                raise TypeError(f"expected {dtype} (got {data.dtype})")
            return data._view(data._shape, data._strides, op="alias")  # an alias, as PyTorch
        from ._ops.creation import tensor
        return tensor(data, dtype=dtype, device=device)
    raise TypeError(f"new() received an invalid combination of arguments - got "
                    f"({', '.join(type(a).__name__ for a in args)})")


def type_name(t):
    table = CPU_TENSOR_TYPES if t.device.type == "cpu" else CUDA_TENSOR_TYPES
    cls = table[t.dtype]
    return f"{cls.__module__}.{cls.__name__}"


def tensor_type(t, dtype=None):
    """`Tensor.type()`: the legacy type name, or a converted tensor for a dtype/type/name."""
    if dtype is None:
        return type_name(t)
    if isinstance(dtype, str):
        if dtype not in _BY_TYPE_NAME:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = _BY_TYPE_NAME[dtype]
    if isinstance(dtype, _LegacyTensorMeta):
        device = t.device if dtype.device_type == t.device.type else dtype.device_type
        return t.to(dtype=dtype.dtype, device=device)
    return t.to(dtype)


def set_default_tensor_type(t):
    """Set the default tensor type (and so the default float dtype) by class or name."""
    global _default_tensor_class
    cls = _BY_TYPE_NAME.get(t) if isinstance(t, str) else t
    if not isinstance(cls, _LegacyTensorMeta):
        raise TypeError(f"invalid type: '{t}'")
    if not cls.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    D.set_default_dtype(cls.dtype)
    _default_tensor_class = cls


def rebuild_tensor(array, dtype, device, requires_grad):
    t = Tensor._from_array(np.array(array), dtype)
    if device != "cpu":
        t = t.to(device)
    t.requires_grad = requires_grad
    return t


# --- typed storages -------------------------------------------------------------------------

class TypedStorage:
    """A storage of one dtype (torch.FloatStorage ...): a sequence of its elements."""

    dtype = None

    def __init__(self, *args, device=None, _storage=None):
        if _storage is not None:
            self._storage = _storage
            return
        device = normalize_device(device)
        if len(args) == 1 and not isinstance(args[0], (builtins.int, np.integer)):
            values = np.asarray(list(args[0])).astype(self.dtype.numpy_dtype)
            self._storage = allocate(len(values), self.dtype, device)
            self._storage.write(0, values)
        else:
            size = builtins.int(args[0]) if args else 0
            self._storage = allocate(size, self.dtype, device)

    @property
    def device(self):
        return self._storage.device

    @property
    def is_cuda(self):
        return self._storage.device.type == "cuda"

    is_sparse = False

    def size(self):
        return len(self._storage)

    def __len__(self):
        return len(self._storage)

    def nbytes(self):
        return self._storage.nbytes()

    def element_size(self):
        return self.dtype.itemsize

    def data_ptr(self):
        return self._storage.data_ptr()

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise RuntimeError("slices with steps are not supported by storages")
            values = self._storage.read(start, max(stop - start, 0))
            return type(self)(values.tolist(), device=self.device)
        index = operator.index(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for storage of size {len(self)}")
        return _python(self._storage.read(index % len(self), 1)[0])

    def __setitem__(self, index, value):
        start, stop, _ = (index.indices(len(self)) if isinstance(index, slice)
                          else (operator.index(index) % len(self),
                                operator.index(index) % len(self) + 1, 1))
        values = np.full(stop - start, value).astype(self.dtype.numpy_dtype)
        self._storage.write(start, values)
        self._storage._version += 1

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self):
        return [_python(v) for v in self._storage.read(0, len(self))]

    def fill_(self, value):
        self[0:len(self)] = value
        return self

    def copy_(self, source, non_blocking=False):
        source = source._storage if isinstance(source, TypedStorage) else source
        values = source.read(0, len(source)).astype(self.dtype.numpy_dtype)
        self._storage.write(0, values)
        return self

    def clone(self):
        return type(self)(self.tolist(), device=self.device)

    def resize_(self, size):
        self._storage.resize_(size)
        return self

    def new(self):
        return type(self)(0, device=self.device)

    def cpu(self):
        return self if self.device.type == "cpu" else self._to(self.dtype, CPU)

    def cuda(self, device=None, non_blocking=False, **kwargs):
        from ._device import device as Device
        return self._to(self.dtype, Device("cuda" if device is None else device))

    def _to(self, dtype, device):
        values = self._storage.read(0, len(self)).astype(dtype.numpy_dtype)
        storage = allocate(len(values), dtype, normalize_device(device))
        storage.write(0, values)
        return storage_class(dtype)(_storage=storage)

    def type(self, dtype=None, non_blocking=False, **kwargs):
        if dtype is None:
            return f"torch.{type(self).__name__}"
        if isinstance(dtype, str):
            dtype = _STORAGE_BY_NAME[dtype].dtype
        elif isinstance(dtype, type) and issubclass(dtype, TypedStorage):
            dtype = dtype.dtype
        return self._to(dtype, self.device)

    def float(self):
        return self._to(D.float32, self.device)

    def double(self):
        return self._to(D.float64, self.device)

    def half(self):
        return self._to(D.float16, self.device)

    def bfloat16(self):
        return self._to(D.bfloat16, self.device)

    def int(self):
        return self._to(D.int32, self.device)

    def long(self):
        return self._to(D.int64, self.device)

    def short(self):
        return self._to(D.int16, self.device)

    def char(self):
        return self._to(D.int8, self.device)

    def byte(self):
        return self._to(D.uint8, self.device)

    def bool(self):
        return self._to(D.bool, self.device)

    def is_pinned(self):
        return False

    def pin_memory(self):
        return self

    def is_shared(self):
        return self._storage.is_shared()

    def share_memory_(self):
        self._storage.share_memory_()
        return self

    @classmethod
    def from_buffer(cls, buffer, byte_order="native", count=-1, offset=0):
        dtype = cls.dtype.numpy_dtype
        if byte_order in ("big", "little"):
            dtype = dtype.newbyteorder(">" if byte_order == "big" else "<")
        values = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
        return cls(values.astype(cls.dtype.numpy_dtype).tolist())

    @classmethod
    def from_file(cls, filename, shared=False, size=0):
        values = np.fromfile(filename, dtype=cls.dtype.numpy_dtype, count=size)
        return cls(_storage=CPUStorage(values, cls.dtype))

    def __repr__(self):
        values = "\n".join(f" {v}" for v in self.tolist())
        header = f"[torch.storage.TypedStorage(dtype={self.dtype}, device={self.device}) of " \
                 f"size {len(self)}]"
        return f"{values}\n{header}" if values else header


def _python(value):
    if isinstance(value, np.generic):
        if value.dtype in (np.float16, D.bfloat16.numpy_dtype):
            return float(np.float32(value))
        return value.item()
    return value


_STORAGE_CLASSES = {d: type(d.legacy_prefix + "Storage", (TypedStorage,),
                            {"dtype": d, "__module__": "torch"}) for d in _LEGACY_DTYPES}
_STORAGE_BY_NAME = {f"torch.{cls.__name__}": cls for cls in _STORAGE_CLASSES.values()}


def storage_class(dtype):
    return _STORAGE_CLASSES[dtype]


def typed_storage_for(storage):
    return _STORAGE_CLASSES[storage.dtype](_storage=storage)


# --- Tensor.share_memory_ / Tensor.is_shared (they act on the tensor's storage) ---------------

def _tensor_share_memory_(self):
    """Move the tensor's storage to shared memory (no-op if already there or not on cpu)."""
    if not self._storage.is_shared():
        self._storage.share_memory_()
    return self


def _tensor_is_shared(self):
    return self._storage.is_shared()


Tensor.share_memory_ = _tensor_share_memory_
Tensor.is_shared = _tensor_is_shared


FloatStorage = _STORAGE_CLASSES[D.float32]
DoubleStorage = _STORAGE_CLASSES[D.float64]
HalfStorage = _STORAGE_CLASSES[D.float16]
BFloat16Storage = _STORAGE_CLASSES[D.bfloat16]
ByteStorage = _STORAGE_CLASSES[D.uint8]
CharStorage = _STORAGE_CLASSES[D.int8]
ShortStorage = _STORAGE_CLASSES[D.int16]
IntStorage = _STORAGE_CLASSES[D.int32]
LongStorage = _STORAGE_CLASSES[D.int64]
BoolStorage = _STORAGE_CLASSES[D.bool]
ComplexFloatStorage = _STORAGE_CLASSES[D.complex64]
ComplexDoubleStorage = _STORAGE_CLASSES[D.complex128]


# --- Tensor.pin_memory / Tensor.is_pinned ---------------------------------------------------
# Page-locked host memory only means something next to an accelerator. Without one PyTorch
# refuses to pin; the cuda backend supplies it (`pinned_storage`); a backend without it gets
# an ordinary host copy, so code written for pinned batches still runs.

def _tensor_pin_memory(self, device=None):
    from . import cuda
    if not cuda.is_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")
    if self.device.type != "cpu":
        raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
    if self.is_pinned():
        return self
    pinned_storage = getattr(cuda._backend(), "pinned_storage", None)
    if pinned_storage is None:
        return self.clone()
    result = Tensor._make(pinned_storage(self.numel(), self.dtype), 0, self._shape,
                          _contiguous_strides(self._shape))
    np.copyto(result._np, self._np)
    return result


def _tensor_is_pinned(self, device=None):
    from . import cuda
    is_pinned = getattr(cuda._backend(), "is_pinned", None)
    return self.device.type == "cpu" and is_pinned is not None and is_pinned(self._storage)


Tensor.pin_memory = _tensor_pin_memory
Tensor.is_pinned = _tensor_is_pinned


# --- Tensor.new / Tensor.storage_type ----------------------------------------------------------

def _tensor_new(self, *args, **kwargs):
    """The legacy constructor with this tensor's dtype and device: `x.new(2, 3)` (uninitialised),
    `x.new([1, 2])` (data), `x.new(size)`, `x.new(storage)`, `x.new(tensor)` (that tensor)."""
    return legacy_construct(Tensor, self.dtype, args, dict(kwargs), device_type=str(self.device))


def _tensor_storage_type(self):
    return storage_class(self.dtype)


Tensor.new = _tensor_new
Tensor.storage_type = _tensor_storage_type
