"""Copies: `copy_`, `clone`, `to`, and moving tensors between devices.

A copy within one device is a dispatched op (plugins accelerate strided copies); a copy
between devices goes through host memory with the storage's `read`/`write`, except a
same-dtype copy between two devices of one plugin type whose storages copy directly
(`copy_from_peer`). `non_blocking` host-to-device copies ask the storage to return before
the copy has run (`write(..., non_blocking=True)`; the storage keeps the host buffer alive).
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from .. import _dispatch
from .. import _dtype as D
from .._device import (as_device, channels_last, channels_last_3d, contiguous_format,
                       preserve_format)
from .._shape import (expand_strides, format_strides, is_non_overlapping_and_dense, kept_strides,
                      storage_span, suggested_format)
from .._storage import CPUStorage, normalize_device
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ..autograd.graph import prepare_inplace, record


def _reference_copy(out, inputs, dtypes, params):
    """Write src (already broadcast to out's shape) into out, converting the dtype."""
    np.copyto(out._np, inputs[0]._np, casting="unsafe")
    return out


COPY = _dispatch.declare(_dispatch.Op(name="copy_", family="copy", reference=_reference_copy))


def copy_(dst, src, non_blocking=False):
    """Copy `src` into `dst` (broadcasting src, converting dtype, across devices)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' (position 1) must be Tensor, not "
                        f"{type(src).__name__}")
    if src.is_complex() and not dst.is_complex():
        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=3)
    original_src = src
    tracked = dst.requires_grad or src.requires_grad
    saved = prepare_inplace("copy_", (dst, src)) if tracked else None
    if src._shape != dst._shape:
        shape, strides = expand_strides(src._shape, src._strides, dst._shape)
        src = Tensor._make(src._storage, src._offset, shape, strides)
    if src._storage.device is dst._storage.device or src.device == dst.device:
        _dispatch.call(COPY, dst, (src,), (src.dtype, src.dtype, dst.dtype), {},
                       dst.device.type)
    elif dst.device.type == "cpu":
        np.copyto(dst._np, host_values(src), casting="unsafe")
    elif not _peer_copy(dst, src):
        # copy=False: a host tensor of the right dtype is copied from where it lies (a
        # pinned one by DMA), with no staging copy here
        write_host_values(dst, host_values(src).astype(dst.dtype.numpy_dtype, copy=False),
                          non_blocking and src.device.type == "cpu")
    dst._bump_version()
    if tracked:
        record("copy_", (dst, original_src), dst, {}, saved)
    return dst


def host_values(t):
    """A host NumPy array with `t`'s values; reads only the span of storage the view covers."""
    if isinstance(t._storage, CPUStorage):
        return t._np
    if t.numel() == 0:
        return np.empty(t._shape, dtype=t.dtype.numpy_dtype)
    span = storage_span(t._shape, t._strides)
    flat = t._storage.read(t._offset, span)
    itemsize = t.dtype.itemsize
    return np.ndarray(t._shape, dtype=flat.dtype, buffer=flat,
                      strides=[s * itemsize for s in t._strides])


def _peer_copy(dst, src):
    """Copy between two devices of one plugin type directly when their storages can
    (`copy_from_peer`, same dtype): the source made contiguous on its device, one copy of the
    dense bytes, then a strided copy on the destination's device when it is not contiguous.
    False when the copy must go through the host (another device type, a dtype change)."""
    if (not hasattr(dst._storage, "copy_from_peer")
            or type(src._storage) is not type(dst._storage)
            or src.dtype is not dst.dtype or dst.numel() == 0):
        return False
    with no_grad():
        dense = src.contiguous()
        staging = dst if dst.is_contiguous() else Tensor._empty(dst._shape, dst.dtype,
                                                                dst.device)
        staging._storage.copy_from_peer(staging._offset, dense._storage, dense._offset,
                                        dst.numel())
        if staging is not dst:
            _dispatch.call(COPY, dst, (staging,), (dst.dtype,) * 3, {}, dst.device.type)
    return True


def write_host_values(dst, values, non_blocking=False):
    """Write a host array of dst's shape and dtype into a tensor on a plugin device."""
    if dst.numel() == 0:
        return
    if dst.is_contiguous():
        dst._storage.write(dst._offset, np.ascontiguousarray(values).reshape(-1),
                           non_blocking=non_blocking)
        return
    # Non-contiguous destination: read the covered span, update it on the host, write it back
    # (a dense one, e.g. transposed, covers nothing else: nothing to read back).
    span = storage_span(dst._shape, dst._strides)
    if is_non_overlapping_and_dense(dst._shape, dst._strides):
        flat = np.empty(span, dtype=dst.dtype.numpy_dtype)
    else:
        flat = dst._storage.read(dst._offset, span)
    itemsize = dst.dtype.itemsize
    view = np.ndarray(dst._shape, dtype=flat.dtype, buffer=flat,
                      strides=[s * itemsize for s in dst._strides])
    np.copyto(view, values)
    dst._storage.write(dst._offset, flat)


def laid_out(t, strides):
    """A fresh result `t` with the dense `strides` PyTorch gives it: t itself when only dims
    of size 0 or 1 differ (they address nothing), else a copy in that layout."""
    if strides == t._strides:
        return t
    if 0 in t._shape or all(a == b or n == 1 for n, a, b in zip(t._shape, strides, t._strides)):
        t._set_geometry(t._storage, t._offset, t._shape, strides)
        return t
    result = Tensor._empty(t._shape, t.dtype, t.device, strides)
    with no_grad():
        copy_(result, t)
    return result


def empty_like_layout(t, dtype=None, device=None, memory_format=None):
    """An uninitialised tensor like `t`, laid out as `memory_format` says: None or
    preserve_format keeps t's strides when they are dense (else dense ones in the same
    order); contiguous_format or channels_last lay it out so."""
    if memory_format is None or memory_format is preserve_format:
        strides = kept_strides(t._shape, t._strides)
    else:
        strides = format_strides(t._shape, format_name(memory_format, t.ndim))
    return Tensor._empty(t._shape, dtype or t.dtype, device or t.device, strides)


def format_name(memory_format, ndim):
    """reftorch._shape's name of `memory_format` (contiguous_format, channels_last or
    channels_last_3d) for a new tensor of `ndim` dims; PyTorch's errors for the others."""
    if memory_format is contiguous_format:
        return "contiguous"
    for fmt, rank in ((channels_last, 4), (channels_last_3d, 5)):
        if memory_format is fmt:
            if ndim != rank:
                raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
            return fmt.name
    if memory_format is preserve_format:
        raise RuntimeError("unsupported memory format Preserve")
    raise TypeError(f"memory_format must be a torch.memory_format, not "
                    f"{type(memory_format).__name__}")


def clone(t, memory_format=None):
    """A copy of `t` in new memory: laid out like t (PyTorch's preserve_format, the default),
    or in `memory_format` (contiguous_format, or channels_last for a 4-D tensor)."""
    result = empty_like_layout(t, memory_format=memory_format)
    with no_grad():
        copy_(result, t)
    return record("clone", (t,), result, {})


def to(t, *args, **kwargs):
    """`Tensor.to(dtype)`, `to(device, dtype)`, `to(other)`, each with `memory_format=`;
    returns `t` when nothing changes (for a memory format: when t's strides suggest it
    already, as PyTorch decides, so a transposed matrix stays as it is)."""
    non_blocking = kwargs.pop("non_blocking", False)
    memory_format = kwargs.pop("memory_format", None)
    dtype, device, copy = _parse_to_args(t, args, kwargs)
    if dtype is t.dtype and device == t.device and not copy and (
            memory_format is None or memory_format is preserve_format or
            suggested_format(t._shape, t._strides) == format_name(memory_format, t.ndim)):
        return t
    result = empty_like_layout(t, dtype=dtype, device=device, memory_format=memory_format)
    with no_grad():
        copy_(result, t, non_blocking)
    return record("_to_copy", (t,), result, {})


def _parse_to_args(t, args, kwargs):
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, builtins.bool):
            copy = a  # to(dtype, non_blocking, copy) positional form; last bool wins
        elif a is None:
            continue
        else:
            device = as_device(a)
    device = t.device if device is None else normalize_device(device)
    return dtype or t.dtype, device, copy
