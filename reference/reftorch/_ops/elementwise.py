"""How every elementwise op runs: promote, broadcast, pick a kernel, write `out`, record history.

This is the only place that turns an elementwise call into a kernel call. Reference kernels
are plain NumPy functions over arrays already cast to the computation dtype; `numpy_kernel`
adapts one into the dispatcher's kernel ABI. `result_strides` is where a new result's layout
is decided, for the reference and the plugins alike.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _dispatch
from .. import _dtype as D
from .._device import CPU
from .._promotion import (Promotion, broadcast_shapes2, check_inplace_shape, check_output_cast,
                          numbers_within, promoted_dtypes, result_dtype)
from .._shape import elementwise_strides, kept_strides
from .._storage import backend_for
from .._tensor import Tensor
from ..autograd.graph import prepare_inplace, record
from ..autograd.grad_mode import is_grad_enabled
from .copy import laid_out
from .inplace_meta import resize_output
from .._numpy_compat import FP_STATE, IGNORE_ALL

_SCALAR_TYPES = (bool, int, float, complex)


def declare(name, reference, promotion=Promotion.DEFAULT, params=None, dtypes=None,
            promotion_rule=None, check=None, number_params=(), like_input=False, doc=""):
    """Declare an elementwise op whose reference is a NumPy function over arrays.

    `number_params`: the input positions where PyTorch takes a Python number as a parameter
    of the computation, not as an operand of the iteration (clamp's bounds, pow's exponent):
    such a number does not count for the result's layout (see result_strides).
    `like_input`: PyTorch allocates the result like its input (empty_like, preserve_format)
    rather than by the iteration's rule (nan_to_num, deg2rad, rad2deg)."""
    op = _dispatch.Op(name=name, family="pointwise", reference=None,
                      promotion=promotion, params=dict(params or {}),
                      dtypes=None if dtypes is None else frozenset(dtypes), doc=doc)
    op.reference = numpy_kernel(reference, op)
    op.numpy_fn = reference
    op.promotion_rule = promotion_rule
    op.dtypes_by_common = {}  # common dtype -> (common, computation, result); see apply
    op.check = check  # extra argument rules: check(common dtype, params, operands, inplace)
    op.number_params = frozenset(number_params)
    op.like_input = like_input
    return _dispatch.declare(op)


def result_strides(op, shape, inputs):
    """The strides of a new result of elementwise `op` over `inputs` (tensors; Python numbers
    arrive as wrapped 0-dim tensors), as PyTorch lays it out (_shape.elementwise_strides):
    every input is an operand, but a number in one of `op.number_params`; or like the input
    (_shape.kept_strides) for an op declared `like_input`."""
    if op.like_input and inputs[0]._shape == shape:
        return kept_strides(inputs[0]._shape, inputs[0]._strides)
    return elementwise_strides(shape, layout_operands(inputs, op.number_params))


def layout_operands(inputs, number_params):
    """The (shape, strides) of the inputs that are operands of PyTorch's loop: all but a
    Python number (a wrapped 0-dim tensor) in one of the positions `number_params`."""
    if not number_params:    # (most ops: a plain list, the cheapest way to build the key)
        return tuple([(t._shape, t._strides) for t in inputs])
    return tuple((t._shape, t._strides) for i, t in enumerate(inputs)
                 if not (i in number_params and getattr(t, "_wrapped_number", False)))


def numpy_kernel(fn, op):
    """Adapt `fn(*arrays, **params) -> array` into the reference kernel of `op` (see
    _dispatch); a new result gets PyTorch's layout (result_strides)."""
    def reference_kernel(out, inputs, dtypes, params):
        compute = dtypes[1].numpy_dtype
        arrays = []
        convert = False
        for t in inputs:
            a = t._cached_np  # Tensor._np without the property call, while its cache is valid
            if a is None or t._cached_from is not t._storage.array:
                a = t._np
            convert = convert or a.dtype is not compute
            arrays.append(a)
        if convert:  # mixed dtypes, half types (rare)
            arrays = _to_computation(arrays, inputs, dtypes[0].numpy_dtype, compute)
        token = FP_STATE.set(IGNORE_ALL)  # IEEE results (inf, nan) are the specification
        try:
            value = fn(*arrays, **params)
            if type(value) is not np.ndarray:
                value = np.asarray(value)
            if out is not None:
                np.copyto(out._np, value, casting="unsafe")
                return out
            result = dtypes[2]
            if value.dtype is not result.numpy_dtype:
                value = value.astype(result.numpy_dtype)  # may overflow to inf: no warning
            elif value.base is not None or _is_one_of(value, arrays):
                value = value.copy()  # never hand out memory that an input owns
        finally:
            FP_STATE.reset(token)
        tensor = Tensor._from_array(value, result)
        return laid_out(tensor, result_strides(op, tensor._shape, inputs))
    reference_kernel.__name__ = f"reference_{fn.__name__}"
    reference_kernel.__doc__ = fn.__doc__
    return reference_kernel


def _is_one_of(value, arrays):
    for a in arrays:
        if value is a:
            return True
    return False


def _to_computation(arrays, inputs, common, compute):
    converted = []
    for a, t in zip(arrays, inputs):
        if a.dtype is not compute:
            # Tensors convert to the common dtype first (a 0-dim float32 operand of a
            # bfloat16 op is rounded to bfloat16); wrapped Python numbers do not.
            if a.dtype is not common and not getattr(t, "_wrapped_number", False):
                a = a.astype(common)
            a = a.astype(compute)
        converted.append(a)
    return converted


# --- operands ---------------------------------------------------------------------------------

def as_operand(x, op_name):
    """A Tensor or a Python number; NumPy scalars count as Python numbers."""
    if isinstance(x, Tensor) or type(x) in _SCALAR_TYPES:
        return x
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, numbers.Number):
        return complex(x) if isinstance(x, numbers.Complex) and not isinstance(
            x, numbers.Real) else float(x) if not isinstance(x, numbers.Integral) else int(x)
    raise TypeError(f"{op_name}(): argument 'other' must be Tensor or Number, not "
                    f"{type(x).__name__}")


def scalar_tensor(value, dtype, device):
    """A Python number as a 0-dim tensor of `dtype`, wrapping like a C cast (uint8 300 -> 44)."""
    if isinstance(value, int) and not isinstance(value, bool) and \
            not -2**63 <= value < 2**64:
        raise RuntimeError("Overflow when unpacking long")
    if dtype.category <= D.Category.INTEGER and isinstance(value, int) and value >= 2**63:
        value -= 2**64
    array = np.array(value).astype(dtype.numpy_dtype)
    t = Tensor._from_array(array, dtype)
    t._wrapped_number = True
    if device is CPU or device.type == "cpu":
        return t
    # Non-blocking: the copy is queued on the device's stream instead of waiting for all the
    # work queued before it (the fresh host array is nobody else's; the device keeps it
    # alive until the copy has run).
    moved = t.to(device, non_blocking=True)
    moved._wrapped_number = True
    return moved


def _common_device(tensors):
    """All tensor operands must share a device; 0-dim cpu tensors act as scalars anywhere."""
    if not tensors:
        return None
    # The common case: every tensor holds the same device object (cpu tensors share CPU).
    first = tensors[0]._storage.device
    for t in tensors:
        if t._storage.device is not first:
            break
    else:
        return first
    device = None
    for t in tensors:
        d = t.device
        if device is None or device == d:
            device = d
        elif t.ndim == 0 and d.type == "cpu":
            continue
        elif device.type == "cpu" and _only_zero_dim_cpu(tensors, device):
            device = d
        else:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                               f"least two devices, {device} and {d}!")
    return device


def _only_zero_dim_cpu(tensors, device):
    return all(t.ndim == 0 for t in tensors if t.device == device)


# --- the call ---------------------------------------------------------------------------------

def apply(op, operands, out=None, inplace=False, params=None):
    """Run elementwise `op` on `operands` (tensors and numbers); `out` receives the result."""
    if params is None:
        params = {}
    # One pass over the operands gathers what promotion, placement and broadcasting need.
    tensors = []
    common = device = shape = None
    uniform = True  # all tensors of one dtype on one device object
    for x in operands:
        if isinstance(x, Tensor):
            storage = x._storage
            if common is None:
                common, device, shape = storage.dtype, storage.device, x._shape
            else:
                if storage.dtype is not common or storage.device is not device:
                    uniform = False
                if x._shape != shape:
                    shape = broadcast_shapes2(shape, x._shape)
            tensors.append(x)
        else:
            uniform = False
    # One tensor and numbers of no higher kind (x * 0.5 on a float tensor, i.add_(1) on an
    # integer one): its dtype and device stand, as result_dtype and _common_device would
    # decide with ~15 more Python calls.
    if not uniform and not (len(tensors) == 1 and
                            numbers_within(operands, tensors[0], common.category)):
        common = result_dtype(operands)
        device = _common_device(tensors)
    if op.dtypes is not None:
        check_dtype(op, common)
    if op.check is not None:
        op.check(common, params, operands, inplace)
    if op.promotion_rule is None:
        # Keyed by the dtype alone: hashing a Promotion (an Enum) runs Python code.
        dtypes = op.dtypes_by_common.get(common) or _cache_dtypes(common, op.promotion,
                                                                  op.dtypes_by_common)
    else:
        kind = op.promotion_rule(params)
        dtypes = _DTYPES_CACHE.get((common, kind)) or _cache_dtypes(common, kind)
    inputs = operands if uniform else tuple(
        x if isinstance(x, Tensor) and (x._storage.device is device or
                                        x._storage.device == device)
        else _move_operand(x, dtypes[1], device) for x in operands)

    saved = None
    if out is not None:
        check_output_cast(dtypes[2], out.dtype)
        if inplace:
            check_inplace_shape(out._shape, shape)
        elif out._shape != shape:
            resize_output(out, shape)
        if out._storage.device is not device and out.device != device:
            raise RuntimeError(f"Expected out tensor to be on {device} but got {out.device}")
        if any(t.requires_grad for t in tensors):
            if inplace:
                saved = prepare_inplace(op.name, operands)
            elif is_grad_enabled():
                raise RuntimeError(f"{op.name}(): functions with out=... arguments don't "
                                   f"support automatic differentiation, but one of the "
                                   f"arguments requires grad.")
    result = _dispatch.call(op, out, inputs, dtypes, params, device._type, math.prod(shape))
    if out is not None:
        out._bump_version()
    for t in tensors:
        if t.requires_grad:
            return record(op.name, operands, result, params, saved)
    return result


_DTYPES_CACHE = {}


def _cache_dtypes(common, kind, cache=None):
    """(common, computation, result) dtypes, remembered in `cache` (by `common`) or in
    _DTYPES_CACHE (by (common, kind)) unless they depend on the default dtype, which can
    change."""
    dtypes = promoted_dtypes(common, kind)
    if common.category > D.Category.INTEGER or kind is not Promotion.INT_TO_FLOAT:
        if cache is None:
            _DTYPES_CACHE[(common, kind)] = dtypes
        else:
            cache[common] = dtypes
    return dtypes


def _move_operand(x, compute, device):
    if isinstance(x, Tensor):
        return x.to(device)
    # The operand only goes to the kernel, which reads it: the backend may hand out a
    # constant it made before for the same number (see DeviceBackend.scalar_operand).
    return backend_for(device).scalar_operand(x, compute, device, scalar_tensor)


def check_dtype(op, dtype):
    # PyTorch reports a dtype its kernel lacks as NotImplementedError (a RuntimeError).
    if op.dtypes is not None and dtype not in op.dtypes:
        raise NotImplementedError(f"\"{op.name}_cpu\" not implemented for "
                                  f"'{dtype.scalar_name}'")
