"""The kernels reftorch calls for unary math, activations, their backward ops, `where`, `clamp`,
`addcmul`, `addcdiv`, `lerp` and dtype casts.

float32 and float64 on cpu, any strides (transposed, sliced, broadcast, 0-dim):

    bit for bit the reference's result:  neg, abs, relu, leaky_relu, sqrt, rsqrt, clamp,
                                         clamp_min, clamp_max, where, copy_ across dtypes,
                                         reciprocal, pow with exponent 2 or -1 (square),
                                         tanh_backward, sigmoid_backward, threshold_backward,
                                         addcmul, addcdiv, lerp
    within a few ulp of the reference:   exp, log, tanh, sigmoid, silu, erf,
                                         gelu (approximate 'none' and 'tanh'),
                                         gelu_backward, silu_backward

The backward ops are what the derivative rows of tanh, sigmoid, relu/threshold, gelu and silu
call (PyTorch's aten names; inputs grad_output, then the forward's output for tanh/sigmoid or
its input): one fused pass each instead of a chain of elementwise ops.

The reference's exp/log/tanh are NumPy's own SIMD approximations (float32 exp is up to 2 ulp
from the correctly rounded value, log up to 3), which C cannot reproduce without copying
them. src/unary.c computes these functions itself; its header lists the measured distances
from the reference. float32 tanh and erf are its own fused-multiply-add approximations,
faithfully rounded (at most 1 ulp from the correctly rounded value, checked exhaustively over
all float32 inputs); against the reference, tanh is within 2 ulp (NumPy's own tanh is up to
1 ulp off) and erf within 1. float32 exp (and so sigmoid and silu) uses the same kind of
fused-multiply-add polynomial: at most 1 ulp from the correctly rounded value, so within 3 of
NumPy's. sigmoid, silu, gelu(approximate='tanh') and the gelu/silu
backward ops keep the reference's formula operation for operation; only the exp/tanh/erf
inside differ. float32 gelu(approximate='none') computes 1 + erf(x / sqrt2) from erfc in
float32 (the reference works in float64): at most 2 ulp from the correctly rounded value for
x > 0, an absolute error of at most 0.51 eps |x| for x < 0.

Tolerances the tests hold these to (spec_tests/test_plugin_cpu_unary.py): ULP_BOUNDS there
(float32: exp 3, log 4, tanh 2, sigmoid 4, silu 4, erf 1 ulp; float64: exp 2, log 2, tanh 3,
sigmoid 4, silu 5, erf 2); gelu within 4 ulp or an absolute 4 eps |x| (where 1 + erf or
1 + tanh cancels, the reference's own error is that large); gelu_backward and silu_backward
within 4 ulp or an absolute 2 eps |g| (1 + x^2) (they cancel where the derivative crosses 0;
measured at most 1.5).

`copy_` between float32, float64, int64, int32 and bool (the dtype conversions `.to()`,
`.float()`, `mask.to(x.dtype)` make) runs here, and float16 / bfloat16 to and from float32
(mixed precision's casts; bfloat16 also to float64), uint8 to float32 / float64 / int64
(image data), and copies within float16, bfloat16 or uint8: the bits of NumPy's and
ml_dtypes' conversions, NaN payloads included (src/unary.c). A copy within one float dtype
is left to reftorch_cpu.kernels. Everything else is declined (NotImplemented: the reference
runs): other dtypes, mixed input dtypes, an `out=` of another dtype, fewer than MIN_NUMEL
elements, gelu/leaky_relu/threshold_backward parameters that are not plain numbers or known
strings, and outputs that overlap an input other than element for element.
"""
from __future__ import annotations

import math

import numpy as np

from reftorch import _dtype as D
from reftorch._dispatch import get_op
from reftorch._ops.copy import laid_out
from reftorch._ops.elementwise import result_strides
from reftorch._promotion import broadcast_shapes
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold

from . import _unary as _U
from .kernels import _geometry, _new_result, _on_cpu_as, _safe_to_write

# Calls on fewer elements go to the reference. The Python side of a plugin call costs 3-5 us
# more than the reference's (checks, loop geometry, allocating the result). Measured on a
# 2-core x86-64 (contiguous float32, best of many runs): for neg/relu/clamp/sigmoid/silu the
# plugin wins from about 4,096 elements, as in kernels.py (the reference's sigmoid makes four
# NumPy passes); so do the backward ops (the reference's make three to ten: at 4,096
# elements tanh_backward 14.6 vs 12.4 us, at 8,192 11.4 vs 16.6; threshold_backward and
# silu_backward win from 1,024). NumPy's own exp/log/tanh loops are as fast as ours on one
# thread (0.6-0.8 ns an element), so those win only once the loop is split over threads,
# from PARALLEL_MIN_MATH (16,384) elements in src/unary.c.
MIN_NUMEL = 4096
MIN_NUMEL_MATH = 16384
SINGLE_NUMPY_CALL = {"exp", "log", "tanh"}  # the ops that use MIN_NUMEL_MATH
# The reference's erf is a chain of some forty NumPy calls (about 90 us even for 128
# elements, 260 us for 1,024; the plugin 8-14 us): erf, gelu and gelu_backward run in C
# whatever their size.
MIN_NUMEL_ERF = 1
USES_ERF = {"erf", "gelu", "gelu_backward"}

DTYPES = (D.float32, D.float64)
CAST_TYPES = {D.float32: _U.T_F32, D.float64: _U.T_F64, D.int64: _U.T_I64,
              D.int32: _U.T_I32, D.bool: _U.T_BOOL, D.float16: _U.T_F16,
              D.bfloat16: _U.T_BF16, D.uint8: _U.T_U8}
# (from, to) dtype pairs the C cast converts; same-dtype float copies go to reftorch_cpu.kernels
_C_CASTS = set(_U.CASTS)
CASTS = {(a, b) for a, code_a in CAST_TYPES.items() for b, code_b in CAST_TYPES.items()
         if (code_a, code_b) in _C_CASTS and not (a is b and a in DTYPES)}

# op name -> C op code; the number parameters come from `_params` below
CHEAP = {"neg": _U.NEG, "abs": _U.ABS, "relu": _U.RELU, "sqrt": _U.SQRT, "rsqrt": _U.RSQRT,
         "leaky_relu": _U.LEAKY_RELU, "reciprocal": _U.RECIPROCAL}
MATH = {"exp": _U.EXP, "log": _U.LOG, "tanh": _U.TANH, "sigmoid": _U.SIGMOID,
        "silu": _U.SILU, "gelu": _U.GELU, "erf": _U.ERF}
BOUNDS = {"clamp_min": _U.CLAMP_MIN, "clamp_max": _U.CLAMP_MAX, "clamp": _U.CLAMP}
# (input, tensor1, tensor2) with the value parameter; lerp's (input, end, weight), the weight
# a tensor or a wrapped number. An optimizer's step is made of these (Adam: lerp_, addcmul_,
# addcdiv_).
TERNARY = {"addcmul": _U.ADDCMUL, "addcdiv": _U.ADDCDIV, "lerp": _U.LERP}
# The backward ops the derivative rows call (inputs grad_output, then the forward's output
# for tanh/sigmoid, its input for the others); gelu_backward picks GELU_TANH_BACKWARD for
# approximate='tanh' in `_params`.
GRADS = {"tanh_backward": _U.TANH_BACKWARD, "sigmoid_backward": _U.SIGMOID_BACKWARD,
         "threshold_backward": _U.THRESHOLD_BACKWARD, "gelu_backward": _U.GELU_BACKWARD,
         "silu_backward": _U.SILU_BACKWARD}


def register(registrar):
    """Register every kernel with reftorch (called by reftorch_cpu.register)."""
    for name, code in {**CHEAP, **MATH, **BOUNDS, **GRADS, **TERNARY, "where": _U.WHERE}.items():
        registrar.kernel(name, "cpu", DTYPES, _elementwise_kernel(name, code))
    registrar.kernel("pow", "cpu", DTYPES, _pow_kernel())
    registrar.kernel("hardtanh", "cpu", DTYPES, _hardtanh_kernel())
    registrar.kernel("copy_", "cpu", tuple(CAST_TYPES), cast_kernel)


def _params(name, code, params):
    """(op code, p0, p1) for the C call, or None to decline."""
    if name in ("leaky_relu", "threshold_backward"):
        number = params.get("negative_slope", 0.01) if name == "leaky_relu" else \
            params.get("threshold")
        if not _plain_number(number):
            return None
        return code, float(number), 0.0  # C rounds it to the dtype, as NumPy rounds a number
    if name in ("gelu", "gelu_backward"):
        approximate = params.get("approximate", "none")
        if approximate == "tanh":
            return (_U.GELU_TANH if name == "gelu" else _U.GELU_TANH_BACKWARD), 0.0, 0.0
        return (code, 0.0, 0.0) if approximate == "none" else None
    if name in ("addcmul", "addcdiv"):
        value = params.get("value", 1)
        return (code, float(value), 0.0) if _plain_number(value) else None
    return code, 0.0, 0.0


def _plain_number(number):
    """A float, or an int a double holds exactly (NumPy converts larger ints directly)."""
    return type(number) is float or (type(number) is int and abs(number) < 2**53)


def _elementwise_kernel(name, code, op=None):
    """The kernel of `name` (op: its declaration, when `name` is a C row serving another op,
    as square serves pow)."""
    op = op or get_op(name)
    is_math, uses_erf = name in SINGLE_NUMPY_CALL, name in USES_ERF
    n_inputs = 3 if name in ("where", "clamp") or name in TERNARY else \
        2 if name in ("clamp_min", "clamp_max") or name in GRADS else 1

    def kernel(out, inputs, dtypes, params):
        """out = op(inputs) through the C loop, or NotImplemented to decline."""
        if len(inputs) != n_inputs:
            return NotImplemented
        first = inputs[1] if code == _U.WHERE else inputs[0]
        # read per call: tests patch them
        min_numel = size_threshold(MIN_NUMEL_MATH if is_math else MIN_NUMEL_ERF if uses_erf
                                   else MIN_NUMEL)
        if math.prod(first._shape) < min_numel and (out is None or out.numel() < min_numel):
            return NotImplemented  # small: the common decline, ruled out first
        dtype = dtypes[0]
        if dtype not in DTYPES or dtypes[1] is not dtype or dtypes[2] is not dtype:
            return NotImplemented
        call = _params(name, code, params)
        if call is None:
            return NotImplemented
        for i, t in enumerate(inputs):
            if not _on_cpu_as(t, D.bool if (code == _U.WHERE and i == 0) else dtype):
                return NotImplemented
        shape = inputs[0]._shape
        for t in inputs[1:]:
            if t._shape != shape:
                shape = broadcast_shapes(shape, t._shape)
        numel = math.prod(shape)
        if numel < min_numel or (out is not None and out._shape != shape):
            return NotImplemented
        result = _new_result(op, shape, dtype, inputs) if out is None else out
        shape, strides = _geometry(result, inputs, numel)
        if len(shape) > _U.MAX_NDIM:
            return NotImplemented
        if out is not None and not _safe_to_write(out, shape, strides, inputs, dtype):
            return NotImplemented
        args = [call[0], shape, result._storage.array, result._offset, strides[0]]
        for t, t_strides in zip(inputs, strides[1:]):
            args += [t._storage.array, t._offset, t_strides]
        _U.elementwise(*args, call[1], call[2])
        return result
    kernel.__name__ = f"{name}_kernel"
    return kernel


def _hardtanh_kernel():
    clamp = _elementwise_kernel("clamp", _U.CLAMP, op=get_op("hardtanh"))

    def kernel(out, inputs, dtypes, params):
        """hardtanh through the clamp row, its bounds rounded to the dtype first as the
        reference rounds them (np.asarray(bound).astype(dtype)), each a broadcast 0-dim
        operand."""
        low, high = params.get("min_val", -1.0), params.get("max_val", 1.0)
        if len(inputs) != 1 or not (_plain_number(low) and _plain_number(high)):
            return NotImplemented
        if math.prod(inputs[0]._shape) < size_threshold(MIN_NUMEL):
            return NotImplemented  # what clamp would decline, before making its bounds
        np_dtype = dtypes[0].numpy_dtype
        bounds = [Tensor._from_array(np.asarray(b).astype(np_dtype)) for b in (low, high)]
        return clamp(out, (inputs[0], *bounds), dtypes, {})
    return kernel


# pow's exponents with a row of their own: NumPy's power returns exactly x * x and 1 / x for
# them (checked over every float32 and 2^27 float64 values, inf and nan included).
POW_ROWS = {2.0: ("square", _U.SQUARE), -1.0: ("reciprocal", _U.RECIPROCAL)}


def _pow_kernel():
    pow_op = get_op("pow")
    rows = {exponent: _elementwise_kernel(*row, op=pow_op) for exponent, row in POW_ROWS.items()}

    def kernel(out, inputs, dtypes, params):
        """input ** exponent for an exponent of 2 or -1 given as a number (or any 0-dim
        tensor of the computation dtype); other exponents decline."""
        if len(inputs) != 2:
            return NotImplemented
        base, exponent = inputs
        if exponent._shape or not _on_cpu_as(exponent, dtypes[1]):
            return NotImplemented
        row = rows.get(float(exponent._storage.array[exponent._offset]))
        if row is None:
            return NotImplemented
        result = row(out, (base,), dtypes, params)
        if out is None and result is not NotImplemented:
            # A tensor exponent is an operand of PyTorch's loop, a number is not: with one,
            # size-1 dims may get other strides (the memory order is base's either way).
            result = laid_out(result, result_strides(pow_op, result._shape, inputs))
        return result
    return kernel


def cast_kernel(out, inputs, dtypes, params):
    """`copy_` converting between the CASTS pairs of dtypes (src already broadcast to out's
    shape): float32, float64, int64, int32 and bool among themselves, float16 and bfloat16
    to and from float32 (bfloat16 also to float64), uint8 to float32, float64 and int64, and
    same-dtype copies of the 1- and 2-byte types."""
    src_dtype, dst_dtype = dtypes[0], dtypes[2]
    if len(inputs) != 1 or (src_dtype, dst_dtype) not in CASTS:
        return NotImplemented
    src = inputs[0]
    if src._shape != out._shape or out.numel() < size_threshold(MIN_NUMEL):
        return NotImplemented
    if not (_on_cpu_as(src, src_dtype) and _on_cpu_as(out, dst_dtype)):
        return NotImplemented
    shape, strides = _geometry(out, inputs, out.numel())
    if len(shape) > _U.MAX_NDIM or not _safe_to_write(out, shape, strides, inputs, dst_dtype):
        return NotImplemented
    _U.cast(shape, _buffer(out), CAST_TYPES[dst_dtype], out._offset, strides[0],
            _buffer(src), CAST_TYPES[src_dtype], src._offset, strides[1])
    return out


def _buffer(t):
    """t's storage array as the C cast reads it: bfloat16 as its uint16 bits (NumPy gives
    ml_dtypes' bfloat16 no buffer format)."""
    array = t._storage.array
    return array.view(np.uint16) if t._storage.dtype is D.bfloat16 else array
