"""torch.utils.dlpack: exchange tensors with other libraries through DLPack, sharing memory.

How it works. A cpu tensor's elements are already a strided NumPy view (`t._np`) of its
storage, and NumPy (>= 1.22) implements the DLPack protocol on both sides. So:

- exporting (`Tensor.__dlpack__`, `to_dlpack`) hands out the capsule NumPy builds for that
  view: the capsule points at the tensor's own memory with the tensor's shape and strides, and
  keeps the storage alive until the consumer's deleter runs;
- importing (`from_dlpack`) lets `numpy.from_dlpack` turn the producer's capsule into an array
  viewing the producer's memory, then wraps that array with `from_numpy` (which shares it).

No DLPack struct is built by hand. The one thing NumPy cannot do is bfloat16 (NumPy has no
such dtype; reftorch uses ml_dtypes'), so for bfloat16 we move the same 16-bit elements as
uint16 and relabel the dtype field of the capsule's DLTensor in place (kDLUInt <-> kDLBfloat),
through a small ctypes mirror of the DLTensor header below. That mirror is also read for the
device and, for empty tensors only, the strides (NumPy replaces an empty array's strides by
zeros; PyTorch keeps them).

Limits: only cpu tensors are exchanged (a plugin device's memory is not a NumPy array); an
imported read-only buffer (DLPack >= 1.0 READ_ONLY flag) gives a tensor whose writes fail, where
PyTorch silently allows them.
"""
from __future__ import annotations

import ctypes
import enum

import numpy as np

__all__ = ["DLDeviceType", "from_dlpack", "to_dlpack"]


class DLDeviceType(enum.IntEnum):
    """DLPack's device codes (`Tensor.__dlpack_device__()[0]`)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


# Devices whose memory the host can address directly: those NumPy (and so we) can wrap.
_HOST_DEVICES = (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost, DLDeviceType.kDLROCMHost)

# --- the DLTensor header, only to relabel bfloat16 (see the module docstring) ---------------
_DL_UINT, _DL_BFLOAT = 1, 4   # DLDataTypeCode values


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensorVersioned(ctypes.Structure):
    # DLPack >= 1.0 puts version, manager context, deleter and flags before the DLTensor;
    # the legacy DLManagedTensor starts with the DLTensor itself.
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_LEGACY_NAME, _VERSIONED_NAME = b"dltensor", b"dltensor_versioned"

# Private prototypes (not ctypes.pythonapi's shared function objects, whose argtypes other
# code might also set).
_capsule_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


def _dltensor_of(capsule):
    """The DLTensor inside an unconsumed DLPack capsule (legacy or versioned)."""
    name = _capsule_get_name(capsule)
    if name not in (_LEGACY_NAME, _VERSIONED_NAME):
        # A consumer renames the capsule to "used_dltensor..." when it takes ownership.
        raise RuntimeError(
            "from_dlpack received an invalid capsule. Note that DLTensor capsules can be "
            "consumed only once, so you might have already constructed a tensor from it once.")
    address = _capsule_get_pointer(capsule, name)
    if name == _VERSIONED_NAME:
        return _DLManagedTensorVersioned.from_address(address).dl_tensor
    return _DLTensor.from_address(address)


class _CapsuleProducer:
    """A bare capsule presented through the `__dlpack__` protocol, which is what
    `numpy.from_dlpack` consumes. The capsule is handed over as it is, whatever version the
    consumer asks for (NumPy accepts both capsule kinds)."""

    def __init__(self, capsule, device):
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, **_requested):
        return self._capsule

    def __dlpack_device__(self):
        return self._device


# --- export ------------------------------------------------------------------------------------

def _check_exportable(tensor):
    if tensor.device.type != "cpu":
        raise BufferError(
            f"reftorch exchanges DLPack tensors on cpu only, and this tensor is on "
            f"{tensor.device}: copy it with .cpu() first")


def _export(tensor, max_version=None, dl_device=None, copy=None):
    """The DLPack capsule for `tensor`, built by NumPy from the tensor's strided view."""
    from .. import _dtype as D
    _check_exportable(tensor)
    view = tensor._np
    if view.size == 0:
        # NumPy gives empty arrays all-zero strides; export the tensor's own strides instead.
        view = np.lib.stride_tricks.as_strided(
            view, tensor.shape, [s * view.itemsize for s in tensor.stride()])
    is_bfloat16 = tensor.dtype == D.bfloat16
    if is_bfloat16:
        view = view.view(np.uint16)   # the same bits; NumPy can export uint16
    try:
        capsule = view.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)
    except BufferError as error:
        raise BufferError(f"cannot export a {tensor.dtype} tensor through DLPack: {error}") \
            from None
    if is_bfloat16:
        _dltensor_of(capsule).dtype.code = _DL_BFLOAT
    return capsule


def tensor_dlpack(self, *, stream=-1, max_version=None, dl_device=None, copy=None):
    """Tensor.__dlpack__: a DLPack capsule sharing this tensor's memory.

    `stream` must be None (or PyTorch's default -1) on cpu. `max_version` >= (1, 0) asks for a
    versioned capsule, `dl_device` must name the cpu, `copy=True` exports a copy.
    """
    if self.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if stream not in (None, -1):
        raise AssertionError("stream should be None on cpu.")
    return _export(self, max_version, dl_device, copy)


def tensor_dlpack_device(self):
    """Tensor.__dlpack_device__: (DLDeviceType, device index)."""
    if self.device.type == "cpu":
        return (DLDeviceType.kDLCPU, 0)
    if self.device.type == "cuda":
        return (DLDeviceType.kDLCUDA, self.device.index or 0)
    raise BufferError(f"no DLPack device type corresponds to {self.device}")


def to_dlpack(tensor):
    """A (legacy, unversioned) DLPack capsule sharing `tensor`'s memory. Like PyTorch this
    also works for a tensor that requires grad: the capsule sees its data, not its graph. Each
    capsule can be consumed only once."""
    from .._tensor import Tensor
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack(): argument 'tensor' (position 1) must be Tensor, not "
                        f"{type(tensor).__name__}")
    return _export(tensor)


# --- import ------------------------------------------------------------------------------------

def _capsule_from(ext_tensor):
    """A capsule from a producer object, asking for a versioned one first (it can carry a
    read-only flag, without which NumPy refuses to export read-only arrays)."""
    if hasattr(ext_tensor, "__dlpack_device__"):
        device_type = int(ext_tensor.__dlpack_device__()[0])
        if device_type not in _HOST_DEVICES:
            try:
                name = DLDeviceType(device_type).name
            except ValueError:
                name = f"device type {device_type}"
            raise RuntimeError(
                f"reftorch.from_dlpack reads DLPack tensors in host memory only, and this one "
                f"is on {name}: move it to the cpu in its own library first")
    try:
        return ext_tensor.__dlpack__(max_version=(1, 0))
    except TypeError:    # a producer older than the 2023 array-API protocol
        return ext_tensor.__dlpack__()


def _array_from_capsule(capsule):
    """A NumPy array viewing the memory a capsule describes (bfloat16 relabelled)."""
    from .. import _dtype as D
    dltensor = _dltensor_of(capsule)
    if dltensor.device_type not in _HOST_DEVICES:
        raise RuntimeError(
            f"reftorch.from_dlpack reads DLPack tensors in host memory only (this capsule's "
            f"device type is {dltensor.device_type})")
    is_bfloat16 = dltensor.dtype.code == _DL_BFLOAT and dltensor.dtype.bits == 16
    if is_bfloat16:
        dltensor.dtype.code = _DL_UINT   # NumPy reads it as uint16; same bits
    strides = _element_strides(dltensor)   # read now: consuming may free the struct
    producer = _CapsuleProducer(capsule, (int(dltensor.device_type), int(dltensor.device_id)))
    try:
        array = np.from_dlpack(producer)
    except (BufferError, TypeError) as error:
        raise RuntimeError(f"from_dlpack: unsupported DLPack tensor: {error}") from None
    if array.size == 0 and strides is not None:
        # NumPy gives empty arrays all-zero strides; keep the producer's.
        array = np.lib.stride_tricks.as_strided(array, array.shape,
                                                [s * array.itemsize for s in strides])
    return array.view(D.bfloat16.numpy_dtype) if is_bfloat16 else array


def _element_strides(dltensor):
    """The DLTensor's strides in elements (None: NULL strides, meaning C-contiguous)."""
    if not dltensor.strides:
        return None
    values = ctypes.cast(dltensor.strides, ctypes.POINTER(ctypes.c_int64))
    return tuple(values[i] for i in range(dltensor.ndim))


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor sharing memory with `ext_tensor`: a DLPack capsule, or any object with
    `__dlpack__` (a NumPy array, a PyTorch tensor, ...). Writes through either are seen by both.

    `copy=True` returns a copy instead; `device` moves the result (copying) when it is not cpu.
    """
    from .._ops.creation import from_numpy
    if _is_capsule(ext_tensor):
        capsule = ext_tensor
    elif hasattr(ext_tensor, "__dlpack__"):
        capsule = _capsule_from(ext_tensor)
    else:
        raise RuntimeError(
            f"from_dlpack received an invalid capsule: expected a DLPack capsule or an object "
            f"with __dlpack__, got {type(ext_tensor).__name__}")
    tensor = from_numpy(_array_from_capsule(capsule))
    if copy:
        tensor = tensor.clone()
    if device is not None:
        tensor = tensor.to(device)
    return tensor
