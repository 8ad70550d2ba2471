"""Creation ops: tensor, as_tensor, from_numpy, zeros/ones/full/empty (+ _like), ranges, eye.

Values are computed on the host with NumPy and then placed: into `out=`, or on `device=`.
"""
from __future__ import annotations

import builtins
import math
import numbers
import warnings

import numpy as np

from .. import _dtype as D
from .._device import CPU
from .._promotion import check_scalar_fits, promote_types, scalar_dtype
from .._shape import format_strides, storage_span
from .._storage import _host_array
from .._storage import CPUStorage, normalize_device
from .._tensor import Tensor, _shape_arg
from ..autograd.graph import set_requires_grad
from .copy import copy_, empty_like_layout, format_name
from .inplace_meta import fill_check_dtype


# --- placing computed values --------------------------------------------------------------------

def _finish(values, dtype, device=None, requires_grad=False, out=None):
    """Turn host `values` into the result tensor of a factory function."""
    if out is not None:
        if dtype is not None and dtype is not out.dtype:
            raise RuntimeError(f"dtype {dtype} does not match dtype of out parameter "
                               f"({out.dtype})")
        out.resize_(values.shape)
        copy_(out, Tensor._from_array(np.array(values, order="C")))
        return out
    if dtype is not None and values.dtype != dtype.numpy_dtype:
        values = values.astype(dtype.numpy_dtype)
    t = Tensor._from_array(np.array(values, order="C", copy=None), dtype)
    device = CPU if device is None else normalize_device(device)
    if device.type != "cpu":
        t = t.to(device)
    if requires_grad:
        set_requires_grad(t, True)
    return t


def _size(size):
    shape = _shape_arg(size)
    for s in shape:
        if not isinstance(s, (builtins.int, np.integer)) and not (
                isinstance(s, Tensor) and s.ndim == 0):
            raise TypeError(f"zeros(): argument 'size' must be tuple of ints, but found element "
                            f"of type {type(s).__name__}")
    shape = tuple(builtins.int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    return shape


def _factory_dtype(dtype, out):
    if dtype is not None:
        return dtype
    return out.dtype if out is not None else D.get_default_dtype()


# --- tensor(), as_tensor(), from_numpy() ---------------------------------------------------

def infer_dtype(data):
    """The dtype `tensor(data)` gives: promote_types over every element's dtype."""
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, np.ndarray):
        return D.from_numpy_dtype(data.dtype)
    if isinstance(data, np.generic):
        return D.from_numpy_dtype(data.dtype)
    if isinstance(data, (builtins.bool, builtins.int, builtins.float, builtins.complex)):
        return scalar_dtype(data)
    if isinstance(data, (list, tuple)):
        result = None
        for item in data:
            d = infer_dtype(item)
            result = d if result is None else promote_types(result, d)
        return result or D.get_default_dtype()
    if isinstance(data, numbers.Number):
        return scalar_dtype(complex(data) if isinstance(data, numbers.Complex)
                            and not isinstance(data, numbers.Real) else float(data))
    if isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")


def _to_host(data, np_dtype):
    """Nested data as one NumPy array, checking that the nesting is rectangular."""
    if isinstance(data, Tensor):
        return _aligned_copy(data._host_array(), np_dtype)
    if isinstance(data, np.ndarray):
        return _aligned_copy(data, np_dtype)
    if isinstance(data, (list, tuple)):
        parts = [_to_host(item, np_dtype) for item in data]
        if parts:
            first = parts[0].shape
            for part in parts:
                if part.shape != first:
                    dim = next((i for i, (a, b) in enumerate(zip(first, part.shape)) if a != b),
                               min(len(first), len(part.shape)))
                    expected = first[dim] if dim < len(first) else 1
                    raise ValueError(f"expected sequence of length {expected} at dim "
                                     f"{dim + 1} (got {part.shape[dim] if dim < len(part.shape) else 1})")
            return np.stack(parts) if parts else np.empty((0,), dtype=np_dtype)
        return np.empty((0,), dtype=np_dtype)
    if isinstance(data, builtins.int) and not isinstance(data, builtins.bool) \
            and not -2**63 <= data < 2**63:
        raise ValueError("Overflow when unpacking long long")
    return np.array(data).astype(np_dtype)


def _aligned_copy(array, np_dtype):
    """array converted to np_dtype (as astype converts) in new row-major memory that starts on
    a 64-byte boundary when it is large, as every new storage does (see _storage._host_array):
    the plugins' vector loops run on whole cache lines of a tensor made from user data."""
    result = _host_array(array.size, np.dtype(np_dtype)).reshape(array.shape)
    np.copyto(result, array, casting="unsafe")
    return result


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data`, with its dtype inferred as PyTorch does."""
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.detach().clone() or sourceTensor.detach().clone()"
                      ".requires_grad_(True), rather than torch.tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
    target = dtype or infer_dtype(data)
    values = _to_host(data, target.numpy_dtype)
    return _finish(values, target, device, requires_grad)


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray`: writes through either are seen by both."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    dtype = D.from_numpy_dtype(ndarray.dtype)
    itemsize = ndarray.itemsize
    if any(s < 0 for s in ndarray.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors "
                         "with negative strides are not currently supported. (You can probably "
                         "work around this by making a copy of your array  with array.copy().) ")
    if any(s % itemsize for s in ndarray.strides):
        raise ValueError("given numpy array strides not a multiple of the element byte size. "
                         "Copy the numpy array to reallocate the memory.")
    strides = tuple(s // itemsize for s in ndarray.strides)
    if ndarray.size == 0:
        flat = np.empty(0, dtype=ndarray.dtype)
    else:
        span = storage_span(ndarray.shape, strides)
        flat = np.lib.stride_tricks.as_strided(ndarray, (span,), (itemsize,))
    return Tensor._make(CPUStorage(flat, dtype), 0, ndarray.shape, strides, ndarray)


def as_tensor(data, dtype=None, device=None):
    """Like `tensor`, but shares memory with a Tensor or ndarray when dtype and device allow."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype or data.dtype, device=device or data.device)
    if isinstance(data, np.ndarray) and (device is None or normalize_device(device) == CPU):
        if dtype is None or dtype.numpy_dtype == data.dtype:
            return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


# --- filled tensors ---------------------------------------------------------------------------

def empty(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, memory_format=None):
    shape = _size(size)
    dtype = _factory_dtype(dtype, out)
    if out is not None:
        return out.resize_(shape)
    strides = None if memory_format is None else format_strides(
        shape, format_name(memory_format, len(shape)))
    t = Tensor._empty(shape, dtype, normalize_device(device), strides)
    if requires_grad:
        set_requires_grad(t, True)
    return t


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """An uninitialised tensor with the given sizes and strides (its storage spans them)."""
    shape, strides = tuple(size), tuple(stride)
    if len(shape) != len(strides):
        raise RuntimeError("mismatch in length of strides and shape")
    dtype = _factory_dtype(dtype, None)
    t = Tensor._empty((storage_span(shape, strides),), dtype, normalize_device(device))
    t._set_geometry(t._storage, 0, shape, strides)
    if requires_grad:
        set_requires_grad(t, True)
    return t


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """A tensor of `size` filled with `fill_value`; the dtype follows the value's type."""
    if dtype is None and out is None:
        dtype = scalar_dtype(fill_value.item() if isinstance(fill_value, (Tensor, np.generic))
                             else fill_value)
    dtype = _factory_dtype(dtype, out)
    shape = _size((size,))
    if not isinstance(fill_value, (Tensor, np.generic)):
        check_scalar_fits(fill_value, fill_check_dtype(math.prod(shape), dtype))
    values = np.full(shape, np.array(fill_value).astype(dtype.numpy_dtype))
    return _finish(values, dtype, device, requires_grad, out)


def zeros(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    dtype = _factory_dtype(dtype, out)
    return _finish(np.zeros(_size(size), dtype.numpy_dtype), dtype, device, requires_grad, out)


def ones(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    dtype = _factory_dtype(dtype, out)
    return _finish(np.ones(_size(size), dtype.numpy_dtype), dtype, device, requires_grad, out)


def _like(input, dtype, device, requires_grad, fill, memory_format):
    t = empty_like_layout(input, dtype=dtype or input.dtype,
                          device=normalize_device(device) if device is not None else None,
                          memory_format=memory_format)
    if fill is not None:
        value = np.asarray(fill).astype(t.dtype.numpy_dtype)
        if isinstance(t._storage, CPUStorage):
            t._np[...] = value       # a fresh tensor: no history, no version to bump
        else:
            copy_(t, Tensor._from_array(value))
    if requires_grad:
        set_requires_grad(t, True)
    return t


def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None):
    return _like(input, dtype, device, requires_grad, None, memory_format)


def zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None):
    return _like(input, dtype, device, requires_grad, 0, memory_format)


def ones_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    return _like(input, dtype, device, requires_grad, 1, memory_format)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    return _like(input, dtype, device, requires_grad, fill_value, memory_format)


# --- ranges ---------------------------------------------------------------------------------

def _number(x, name):
    if isinstance(x, Tensor):
        return x.item()
    if isinstance(x, (builtins.bool, builtins.int, builtins.float, np.number)):
        return x.item() if isinstance(x, np.generic) else x
    raise TypeError(f"arange(): argument '{name}' must be Number, not {type(x).__name__}")


def arange(start, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
           requires_grad=False):
    """Values from `start` up to (not including) `end`, `step` apart."""
    if end is None:
        start, end = 0, start
    start, end, step = (_number(v, n) for v, n in ((start, "start"), (end, "end"),
                                                       (step, "step")))
    if dtype is None:
        floating = any(isinstance(v, builtins.float) for v in (start, end, step))
        dtype = out.dtype if out is not None else \
            D.get_default_dtype() if floating else D.int64
    _check_range(start, end, step)
    count = math.ceil((end - start) / step)
    values = start + np.arange(count, dtype=np.float64 if dtype.category >= D.Category.FLOATING
                               or any(isinstance(v, builtins.float) for v in (start, end, step))
                               else np.int64) * step
    if out is not None:
        values = values.reshape(_arange_out_shape(out, values.size))
    return _finish(values.astype(dtype.numpy_dtype), dtype, device, requires_grad, out)


def _arange_out_shape(out, count):
    """The shape arange's `out` gets: its own when it holds `count` elements (filled in
    row-major order, as PyTorch's arange fills it), else (count,), with a UserWarning when it
    held any (the one factory that warns: a rounded (end - start) / step can be the cause)."""
    if out.numel() == count:
        return out._shape
    if out.numel() != 0:
        warnings.warn(f"The number of elements in the out tensor of shape {list(out._shape)} "
                      f"is {out.numel()} which does not match the computed number of elements "
                      f"{count}. Rounding (end - start) / step can cause this; out is resized "
                      f"to shape ({count},).", UserWarning, stacklevel=3)
    return (count,)


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,  # noqa: A001
          requires_grad=False):
    """Deprecated: values from `start` to `end` inclusive. Use `arange` (end exclusive)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        start, end = 0, start
    dtype = _factory_dtype(dtype, out)
    _check_range(start, end, step)
    count = builtins.int(math.floor((end - start) / step)) + 1
    values = start + np.arange(count, dtype=np.float64) * step
    return _finish(values.astype(dtype.numpy_dtype), dtype, device, requires_grad, out)


def _check_range(start, end, step):
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(math.isfinite(v) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")


def _symmetric_steps(start, end, steps):
    """linspace values: the first half counts up from start, the second down from end."""
    if steps == 1:
        return np.array([start], dtype=np.float64)
    step = (end - start) / (steps - 1)
    i = np.arange(steps, dtype=np.float64)
    half = steps // 2
    return np.where(i < half, start + step * i, end - step * (steps - 1 - i))


def _check_steps(steps):
    steps = _number(steps, "steps")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return builtins.int(steps)


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """`steps` evenly spaced values from `start` to `end`, both included."""
    steps = _check_steps(steps)
    dtype = _factory_dtype(dtype, out)
    start, end = _number(start, "start"), _number(end, "end")
    if dtype.category <= D.Category.INTEGER:
        values = _integer_linspace(start, end, steps)
    else:
        values = _symmetric_steps(start, end, steps)
    return _finish(values.astype(dtype.numpy_dtype), dtype, device, requires_grad, out)


def _integer_linspace(start, end, steps):
    # Integer results step by a float increment and truncate toward zero.
    if steps <= 1:
        return np.full(steps, start, dtype=np.int64)
    step = (end - start) / (steps - 1)
    return np.trunc(start + step * np.arange(steps, dtype=np.float64)).astype(np.int64)


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """`base ** linspace(start, end, steps)`."""
    steps = _check_steps(steps)
    dtype = _factory_dtype(dtype, out)
    exponents = _symmetric_steps(_number(start, "start"), _number(end, "end"), steps)
    values = np.power(np.float64(base), exponents)
    return _finish(values.astype(dtype.numpy_dtype), dtype, device, requires_grad, out)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """A 2-D tensor with ones on the diagonal and zeros elsewhere."""
    m = n if m is None else m
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    dtype = _factory_dtype(dtype, out)
    return _finish(np.eye(n, m, dtype=dtype.numpy_dtype), dtype, device, requires_grad, out)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    dtype = dtype or D.get_default_dtype()
    return _finish(np.array(s).astype(dtype.numpy_dtype), dtype, device, requires_grad)
