"""Neural-network ops (activation, dropout, distance) at the torch level.

Activations are elementwise ops (`elementwise.declare`): they share promotion, broadcasting,
`out=` and the in-place path with the pointwise ops, and half types compute in float32 and
round once, as PyTorch's CPU kernels do. Ops that look along a dimension (softmax, glu, pdist)
are structured ops. Dropout and the distances are compositions of other ops, as they are in
PyTorch, so their autograd nodes (MulBackward0, NormBackward...) come from the parts.

Random slopes (rrelu) and dropout masks draw from reftorch's generator exactly as PyTorch's
CPU kernels draw from theirs, so the same seed gives the same values.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._promotion import Promotion, result_dtype
from .._shape import wrap_dim
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from . import elementwise, structured
from .creation import empty_like
from .other_ops import broadcast_tensors
from .pointwise import SIGMOID_BACKWARD, TANH_BACKWARD
from .reduction import norm
from .special_pointwise import _erf

__all__ = ["relu", "relu_", "selu", "selu_", "celu", "celu_", "rrelu", "rrelu_", "prelu",
           "threshold", "threshold_", "hardshrink", "softmax", "log_softmax", "sigmoid_",
           "tanh_", "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_dropout",
           "feature_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_",
           "cosine_similarity", "pairwise_distance", "pdist"]

FLOATING = {D.float16, D.bfloat16, D.float32, D.float64}
INTEGRAL = {D.uint8, D.int8, D.int16, D.int32, D.int64}

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _tensor(fn_name, x, name="input", position=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn_name}(): argument '{name}' (position {position}) must be Tensor, "
                        f"not {type(x).__name__}")
    return x


# =============================================================================================
# Reference kernels (NumPy, over arrays already in the computation dtype)
# =============================================================================================

def _relu(x, inplace=False):
    return np.maximum(x, x.dtype.type(0))


def _hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    # NaN passes through (np.clip keeps it); integer bounds are converted like C++ does.
    low, high = np.asarray(min_val).astype(x.dtype), np.asarray(max_val).astype(x.dtype)
    return np.minimum(np.maximum(x, low), high)


def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0, inplace=False):
    """scale * x for x > 0, else scale * alpha * (exp(x * input_scale) - 1) (ELU, SELU, CELU)."""
    negative = np.expm1(np.minimum(x, 0) * input_scale) * (alpha * scale)
    return np.where(x > 0, x * scale, negative)


def _leaky_relu(x, negative_slope=0.01, inplace=False):
    return np.where(x > 0, x, x * negative_slope)


def _rrelu_with_noise(x, noise, lower=1 / 8, upper=1 / 3, training=False, inplace=False):
    """Training: x * noise where x <= 0 (noise holds the drawn slopes, in the computation
    dtype); evaluation: a leaky relu with the mean slope (lower + upper) / 2."""
    if training:
        return np.where(x <= 0, x.astype(noise.dtype) * noise, x).astype(x.dtype)
    compute = np.float64 if x.dtype == np.float64 else np.float32
    wide = x.astype(compute)
    return np.where(wide > 0, wide, wide * ((lower + upper) / 2)).astype(x.dtype)


def _threshold(x, threshold, value, inplace=False):
    # The bounds become the element type first (an int tensor compares with int(threshold)).
    limit = np.asarray(threshold).astype(x.dtype)
    return np.where(x > limit, x, np.asarray(value).astype(x.dtype))


def _hardshrink(x, lambd=0.5):
    return np.where((x >= -lambd) & (x <= lambd), x.dtype.type(0), x)


def _softshrink(x, lambd=0.5):
    shrunk = np.where(x > lambd, x - lambd, x + lambd)
    return np.where((x >= -lambd) & (x <= lambd), x.dtype.type(0), shrunk)


def _hardsigmoid(x, inplace=False):
    return np.minimum(np.maximum(x + 3, 0), 6) / 6


def _hardswish(x, inplace=False):
    return x * np.minimum(np.maximum(x + 3, 0), 6) / 6


def _log_sigmoid(x):
    """log(1 / (1 + exp(-x))) without overflow: min(x, 0) - log1p(exp(-|x|))."""
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def _rounded_tanh(v):
    """tanh rounded once to v's dtype (float32 through float64). gelu's 1 + tanh(inner) keeps
    every ulp of a tanh near -1, and NumPy's float32 tanh is an ulp off there: at x = -5.28
    it gave gelu -1.6e-7 where PyTorch's float32 kernel gives -0.0, and an infinite gradient
    times a derivative of 6e-8 instead of PyTorch's inf * 0 = nan."""
    if v.dtype == np.float64:
        return np.tanh(v)
    return np.tanh(v.astype(np.float64)).astype(v.dtype)


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + _rounded_tanh(inner))
    # erf in float64 then back: the result is rounded once to the computation dtype
    return (0.5 * x * (1 + _erf(x.astype(np.float64) / math.sqrt(2)))).astype(x.dtype)


def _silu(x, inplace=False):
    return x / (1 + np.exp(-x))


def _mish(x, inplace=False):
    return x * np.tanh(np.log1p(np.exp(x)))


def _softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (linear there)."""
    scaled = x * beta
    return np.where(scaled > threshold, x, np.log1p(np.exp(scaled)) / beta)


# --- backward ops (PyTorch's names): the derivative rows call these, so that a plugin can
# serve each gradient as one fused pass. Their formulas are the rows' former compositions,
# operation for operation, so float32/float64 results are unchanged; half types now compute
# in float32 and round once, as PyTorch's kernels do.

def _conj_if_complex(a):
    return np.conj(a) if a.dtype.kind == "c" else a


def _threshold_backward(grad, x, threshold):
    """grad where x > threshold, else 0: a select, not a product (a NaN or inf gradient at a
    masked element gives 0, and a NaN x passes the gradient, as PyTorch's kernel does)."""
    limit = np.asarray(threshold).astype(x.dtype)
    return np.where(x <= limit, grad.dtype.type(0), grad)


def _gelu_backward(grad, x, approximate="none"):
    """grad * gelu'(x). 'none': Phi(x) + x phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2
    (erf rounded to the dtype, as torch.erf's result is) and phi the normal density;
    'tanh': the derivative of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        inner = k * (x + 0.044715 * x * x * x)
        t = _rounded_tanh(inner)
        d_inner = k * (1 + 3 * 0.044715 * x * x)
        return grad * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner)
    cdf = 0.5 * (1 + _erf(x * (1 / math.sqrt(2))).astype(x.dtype))
    pdf = np.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
    return grad * (cdf + x * pdf)


def _silu_backward(grad, x):
    """grad * silu'(x) = grad * (s (1 + x (1 - s))) with s = sigmoid(x). Complex values are
    not conjugated (PyTorch's kernel does not; silu's own complex gradient, which does, is a
    composition)."""
    s = 1 / (1 + np.exp(-x))
    return grad * (s * (1 + x * (1 - s)))


def _prelu_kernel(x, weight):
    return np.where(x > 0, x, x * weight)


# --- argument checks (PyTorch's messages) --------------------------------------------------

def _no_complex(fn_name):
    return f"{fn_name} is not supported for complex types"


def _check_relu(common, params, operands, inplace):
    if common is D.bool:
        raise RuntimeError("Boolean inputs not supported for relu")
    if common.is_complex:
        raise NotImplementedError(_no_complex("clamp"))


def _check_hardtanh(common, params, operands, inplace):
    if common is D.bool:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if common.is_complex:
        raise NotImplementedError(_no_complex("clamp"))
    if common is D.uint8 and params.get("min_val", -1.0) < 0:
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative lower bound.")


def _check_softshrink(common, params, operands, inplace):
    lambd = params.get("lambd", 0.5)
    if common in FLOATING and not lambd >= 0:
        raise RuntimeError(f"lambda must be in range [0, {float(np.finfo(np.float32).max):g}] "
                           f"for input dtype {common.scalar_name}, but found {lambd}")


def _check_gelu(common, params, operands, inplace):
    if params.get("approximate", "none") not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")


def _check_gelu_backward(common, params, operands, inplace):
    if common not in FLOATING:
        raise NotImplementedError(f"\"GeluBackwardKernelImpl\" not implemented for "
                                  f"'{common.scalar_name}'")
    _check_gelu(common, params, operands, inplace)


def _check_threshold_backward(common, params, operands, inplace):
    if common not in FLOATING | INTEGRAL:
        raise NotImplementedError(f"\"threshold_cpu\" not implemented for "
                                  f"'{common.scalar_name}'")


def _check_threshold(common, params, operands, inplace):
    # PyTorch converts both numbers to the element type and refuses ones that overflow it.
    if common in INTEGRAL:
        info = np.iinfo(common.numpy_dtype)
        for number in (params.get("threshold"), params.get("value")):
            # an int may wrap into an unsigned type (-1 -> 255); a float may not
            low = -info.max if isinstance(number, int) and info.min == 0 else info.min
            if not low <= number <= info.max:
                c_name = f"{common.numpy_dtype.name}_t"
                raise RuntimeError(f"value cannot be converted to type {c_name} without "
                                   f"overflow")


# --- declarations ----------------------------------------------------------------------------

def _activation(name, fn, params=None, dtypes=FLOATING, check=None):
    """An elementwise op of the "nn" family: it runs through the pointwise machinery, but
    its public spellings are torch.nn.functional ones (most have no torch.X or Tensor.X)."""
    op = elementwise.declare(name, fn, promotion=Promotion.DEFAULT, params=params,
                             dtypes=dtypes, check=check)
    op.family = "nn"
    return op


RELU = _activation("relu", _relu, {"inplace": False}, dtypes=None, check=_check_relu)
HARDTANH = _activation("hardtanh", _hardtanh, {"min_val": -1.0, "max_val": 1.0,
                                               "inplace": False},
                       dtypes=None, check=_check_hardtanh)
ELU = _activation("elu", _elu, {"alpha": 1.0, "scale": 1.0, "input_scale": 1.0,
                                "inplace": False})
CELU = _activation("celu", _elu, {"alpha": 1.0, "scale": 1.0, "input_scale": 1.0,
                                  "inplace": False})
LEAKY_RELU = _activation("leaky_relu", _leaky_relu, {"negative_slope": 0.01, "inplace": False})
THRESHOLD = _activation("threshold", _threshold, {"threshold": None, "value": None,
                                                  "inplace": False},
                        dtypes=FLOATING | INTEGRAL, check=_check_threshold)
HARDSHRINK = _activation("hardshrink", _hardshrink, {"lambd": 0.5})
SOFTSHRINK = _activation("softshrink", _softshrink, {"lambd": 0.5}, check=_check_softshrink)
HARDSIGMOID = _activation("hardsigmoid", _hardsigmoid, {"inplace": False})
HARDSWISH = _activation("hardswish", _hardswish, {"inplace": False})
LOG_SIGMOID = _activation("log_sigmoid", _log_sigmoid)
GELU = _activation("gelu", _gelu, {"approximate": "none"}, check=_check_gelu)
SILU = _activation("silu", _silu, {"inplace": False},
                   dtypes=FLOATING | {D.complex64, D.complex128})
MISH = _activation("mish", _mish, {"inplace": False})
SOFTPLUS = _activation("softplus", _softplus, {"beta": 1.0, "threshold": 20.0})
PRELU_KERNEL = _activation("_prelu_kernel", _prelu_kernel)
# backward ops (inputs grad_output, then self or output, as PyTorch's signatures)
THRESHOLD_BACKWARD = _activation("threshold_backward", _threshold_backward,
                                 {"threshold": None}, dtypes=None,
                                 check=_check_threshold_backward)
GELU_BACKWARD = _activation("gelu_backward", _gelu_backward, {"approximate": "none"},
                            dtypes=None, check=_check_gelu_backward)
SILU_BACKWARD = _activation("silu_backward", _silu_backward,
                            dtypes=FLOATING | {D.complex64, D.complex128})


def _run(op, x, params, inplace=False, out=None):
    """Apply an activation to one tensor; in place, the op records its in-place node."""
    if inplace:
        return elementwise.apply(op, (x,), out=x, inplace=True, params=dict(params, inplace=True))
    return elementwise.apply(op, (x,), out=out, params=params)


# =============================================================================================
# torch.X forms
# =============================================================================================

def relu(input):
    """max(input, 0); integer tensors stay integer."""
    return _run(RELU, _tensor("relu", input), {})


def relu_(input):
    return _run(RELU, _tensor("relu_", input), {}, inplace=True)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _run(HARDTANH, input, {"min_val": min_val, "max_val": max_val}, inplace)


def elu(input, alpha=1.0, scale=1.0, input_scale=1.0, inplace=False):
    params = {"alpha": alpha, "scale": scale, "input_scale": input_scale}
    return _run(ELU, input, params, inplace)


def selu(input):
    return elu(_tensor("selu", input), SELU_ALPHA, SELU_SCALE)


def selu_(input):
    return elu(_tensor("selu_", input), SELU_ALPHA, SELU_SCALE, inplace=True)


def celu(input, alpha=1.0):
    """ELU with its negative part stretched by 1/alpha (continuously differentiable)."""
    return _run(CELU, _check_celu("celu", input, alpha), {"alpha": alpha,
                                                         "input_scale": 1.0 / alpha})


def celu_(input, alpha=1.0):
    return _run(CELU, _check_celu("celu_", input, alpha),
                {"alpha": alpha, "input_scale": 1.0 / alpha}, inplace=True)


def _check_celu(fn_name, input, alpha):
    _tensor(fn_name, input)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return input


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _run(LEAKY_RELU, input, {"negative_slope": negative_slope}, inplace)


def threshold(input, threshold, value):
    """input where input > threshold, else value."""
    return _run(THRESHOLD, _tensor("threshold", input), {"threshold": threshold, "value": value})


def threshold_(input, threshold, value):
    return _run(THRESHOLD, _tensor("threshold_", input),
                {"threshold": threshold, "value": value}, inplace=True)


def hardshrink(input, lambd=0.5):
    return _run(HARDSHRINK, _tensor("hardshrink", input), {"lambd": lambd})


def softshrink(input, lambd=0.5):
    return _run(SOFTSHRINK, input, {"lambd": lambd})


def hardsigmoid(input, inplace=False):
    return _run(HARDSIGMOID, input, {}, inplace)


def hardswish(input, inplace=False):
    return _run(HARDSWISH, input, {}, inplace)


def log_sigmoid(input):
    return _run(LOG_SIGMOID, input, {})


def gelu(input, approximate="none"):
    return _run(GELU, input, {"approximate": approximate})


def silu(input, inplace=False):
    return _run(SILU, input, {}, inplace)


def mish(input, inplace=False):
    return _run(MISH, input, {}, inplace)


def softplus(input, beta=1.0, threshold=20.0):
    return _run(SOFTPLUS, input, {"beta": beta, "threshold": threshold})


def sigmoid_(input):
    return _tensor("sigmoid_", input).sigmoid_()


def tanh_(input):
    return _tensor("tanh_", input).tanh_()


# --- prelu -----------------------------------------------------------------------------------

def prelu(input, weight):
    """max(0, x) + weight * min(0, x), one weight per channel (dim 1) or one for all."""
    _tensor("prelu", input)
    _tensor("prelu", weight, "weight", 2)
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    count = weight.numel()
    if count != 1 and count != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {count} and channel size = {channels}.")
    if weight.dtype is not input.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got "
                           f"{input.dtype.scalar_name} and {weight.dtype.scalar_name}")
    if input.dtype not in FLOATING:
        raise NotImplementedError(f"\"prelu_cpu\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    # The weight is viewed so that it broadcasts along dim 1 (PyTorch does the same view).
    if input.ndim >= 2:
        weight = weight.reshape((count,) + (1,) * (input.ndim - 2))
    else:
        weight = weight.reshape(()) if count == 1 and input.ndim == 0 else weight.reshape(-1)
    return elementwise.apply(PRELU_KERNEL, (input, weight))


# --- rrelu -----------------------------------------------------------------------------------

def _rrelu_training_noise(x, lower, upper, generator):
    """The slope of every element as PyTorch's CPU kernel draws them: walking the elements in
    (contiguous) order, each x <= 0 takes one uniform(lower, upper) double from a 64-bit draw
    (53 bits kept); positive elements draw nothing and keep slope 1. The slopes are stored in
    the computation dtype (float64 for float64, else float32)."""
    from ..random import generator_or_default
    compute = np.float64 if x.dtype is D.float64 else np.float32
    values = x.detach().contiguous()._host_array().astype(np.float64).ravel()
    negative = values <= 0
    gen = generator_or_default(generator, x.device)
    bits = gen.random64(int(negative.sum()))
    unit = (bits & np.uint64((1 << 53) - 1)).astype(np.float64) * 2.0 ** -53
    # the bounds are first converted to the computation dtype, as the kernel does; the
    # uniform is u * (high - low) + low, two roundings (no fused multiply-add)
    low, high = float(compute(lower)), float(compute(upper))
    slopes = (unit * (high - low) + low).astype(compute)
    noise = np.ones(values.shape, dtype=compute)
    noise[negative] = slopes
    return Tensor._from_array(noise.reshape(tuple(x.shape)))


def _rrelu_noise(input, lower, upper, training, generator):
    if input.dtype is D.float16 and training:
        raise NotImplementedError("\"rrelu_with_noise_out_cpu\" not implemented for 'Half'")
    if input.dtype not in FLOATING:
        kernel = "rrelu_with_noise_out_cpu" if training else "leaky_relu_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if training:
        return _rrelu_training_noise(input, lower, upper, generator)
    return Tensor._from_array(np.ones((), dtype=np.float64))


def _rrelu(input, lower, upper, training, generator, inplace):
    noise = _rrelu_noise(input, lower, upper, training, generator)
    params = {"lower": lower, "upper": upper, "training": bool(training)}
    # The noise stays in the computation dtype (not promoted with the input): a structured
    # op hands it to the kernel as it is.
    if inplace:
        return structured.run_inplace(RRELU_WITH_NOISE, (input, noise), dict(params, inplace=True))
    return structured.run(RRELU_WITH_NOISE, (input, noise), params)


RRELU_WITH_NOISE = structured.declare(
    "rrelu_with_noise", _rrelu_with_noise, family="nn",
    params={"lower": 1 / 8, "upper": 1 / 3, "training": False, "inplace": False})


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """Leaky relu with random slopes from uniform(lower, upper) when training, the mean slope
    otherwise."""
    return _rrelu(_tensor("rrelu", input), lower, upper, training, generator, False)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _rrelu(_tensor("rrelu_", input), lower, upper, training, generator, True)


# =============================================================================================
# softmax, log_softmax, glu (structured: they look along one dimension)
# =============================================================================================

def _opmath(x):
    """Half types are reduced in float32 (PyTorch's accumulation type), then rounded."""
    return x.astype(np.float32) if x.dtype in (D.float16.numpy_dtype,
                                               D.bfloat16.numpy_dtype) else x


def _softmax(x, dim):
    wide = _opmath(x)
    if wide.ndim == 0:
        wide = wide.reshape(1)
    shifted = wide - np.max(wide, axis=dim, keepdims=True, initial=-np.inf)
    exps = np.exp(shifted)
    return (exps / np.sum(exps, axis=dim, keepdims=True)).astype(x.dtype).reshape(x.shape)


def _log_softmax(x, dim):
    wide = _opmath(x)
    if wide.ndim == 0:
        wide = wide.reshape(1)
    shifted = wide - np.max(wide, axis=dim, keepdims=True, initial=-np.inf)
    logsum = np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))
    return (shifted - logsum).astype(x.dtype).reshape(x.shape)


def _softmax_backward(grad, y, dim, input_dtype=None):
    """The input gradient of softmax from its output y: y * (g - sum(g * y))."""
    g, out = _opmath(grad), _opmath(y)
    return (out * (g - np.sum(g * out, axis=dim, keepdims=True))).astype(y.dtype)


def _log_softmax_backward(grad, y, dim, input_dtype=None):
    """The input gradient of log_softmax from its output y: g - exp(y) * sum(g)."""
    g, out = _opmath(grad), _opmath(y)
    return (g - np.exp(out) * np.sum(g, axis=dim, keepdims=True)).astype(y.dtype)


def _glu(x, dim):
    """First half times the sigmoid of the second half, along dim."""
    wide = _opmath(x)
    first, second = np.split(wide, 2, axis=dim)
    return (first / (1 + np.exp(-second))).astype(x.dtype)


SOFTMAX = structured.declare("softmax", _softmax, family="nn", params={"dim": None},
                             dtypes=FLOATING)
LOG_SOFTMAX = structured.declare("log_softmax", _log_softmax, family="nn",
                                 params={"dim": None}, dtypes=FLOATING)
GLU = structured.declare("glu", _glu, family="nn", params={"dim": -1}, dtypes=FLOATING)
# The backward ops the derivative rows call (PyTorch's names), so a plugin can fuse them.
SOFTMAX_BACKWARD = structured.declare("_softmax_backward_data", _softmax_backward, family="nn",
                                      params={"dim": None, "input_dtype": None},
                                      dtypes=FLOATING)
LOG_SOFTMAX_BACKWARD = structured.declare("_log_softmax_backward_data", _log_softmax_backward,
                                          family="nn", params={"dim": None, "input_dtype": None},
                                          dtypes=FLOATING)


def softmax_backward_data(grad_output, output, dim, input_dtype):
    return structured.run(SOFTMAX_BACKWARD, (grad_output, output),
                          {"dim": dim, "input_dtype": input_dtype})


def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    return structured.run(LOG_SOFTMAX_BACKWARD, (grad_output, output),
                          {"dim": dim, "input_dtype": input_dtype})


def tanh_backward(grad_output, output):
    """PyTorch's tanh_backward: grad_output * (1 - output^2)."""
    return elementwise.apply(TANH_BACKWARD, (grad_output, output))


def sigmoid_backward(grad_output, output):
    """PyTorch's sigmoid_backward: grad_output * output (1 - output)."""
    return elementwise.apply(SIGMOID_BACKWARD, (grad_output, output))


def threshold_backward(grad_output, self, threshold):
    """PyTorch's threshold_backward (relu's and threshold's gradient): grad_output where
    self > threshold, else 0."""
    return elementwise.apply(THRESHOLD_BACKWARD, (grad_output, self),
                             params={"threshold": threshold})


def gelu_backward(grad_output, self, approximate="none"):
    return elementwise.apply(GELU_BACKWARD, (grad_output, self),
                             params={"approximate": approximate})


def silu_backward(grad_output, self):
    return elementwise.apply(SILU_BACKWARD, (grad_output, self))


def _softmax_family(op, fn_name, input, dim, dtype):
    _tensor(fn_name, input)
    if dim is None:
        raise TypeError(f"{fn_name}() missing required argument 'dim'")
    if dtype is not None:
        input = input.to(dtype)
    if input.dtype not in FLOATING:
        kernel = f"{op.name}_lastdim_kernel_impl"
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    dim = wrap_dim(dim, max(input.ndim, 1))
    return structured.run(op, (input,), {"dim": dim})


def softmax(input, dim=None, dtype=None, *, _stacklevel=None):
    """exp(x) / sum(exp(x)) along dim; `dtype` converts the input first."""
    return _softmax_family(SOFTMAX, "softmax", input, dim, dtype)


def log_softmax(input, dim=None, dtype=None, *, _stacklevel=None):
    """log(softmax(x)), computed as x - max - log(sum(exp(x - max))) for stability."""
    return _softmax_family(LOG_SOFTMAX, "log_softmax", input, dim, dtype)


def glu(input, dim=-1):
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    dim = wrap_dim(dim, input.ndim)
    if input.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size "
                           f"{input.shape[dim]}")
    return structured.run(GLU, (input,), {"dim": dim})


# =============================================================================================
# dropout: input * mask / (1 - p), the mask drawn by bernoulli_ as PyTorch's CPU path does
# =============================================================================================

def _check_p(p):
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_noise(input):
    """One mask value per (sample, channel): shape (N, C, 1, ..., 1)."""
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return input.new_empty(shape)


def _dropout_impl(input, p, train, feature, alpha, inplace):
    _check_p(p)
    if p == 0 or not train or input.numel() == 0:
        return input
    if p == 1:
        zero = input.new_zeros(())
        return input.mul_(zero) if inplace else input * zero
    noise = _feature_noise(input) if feature else empty_like(input)
    noise.bernoulli_(1 - p)
    if alpha:
        # SELU's saturation value, and the affine map that keeps mean 0 and variance 1
        alpha_value = 1.7580993408473766
        a = 1.0 / math.sqrt((alpha_value * alpha_value * p + 1) * (1 - p))
        b = noise.add(-1).mul_(alpha_value * a).add_(alpha_value * a * p)
        noise.mul_(a)
        return input.mul_(noise).add_(b) if inplace else (input * noise).add_(b)
    noise.div_(1 - p)
    return input.mul_(noise) if inplace else input * noise


def dropout(input, p, train):
    return _dropout_impl(_tensor("dropout", input), p, train, False, False, False)


def dropout_(input, p, train):
    return _dropout_impl(_tensor("dropout_", input), p, train, False, False, True)


def alpha_dropout(input, p, train):
    return _dropout_impl(_tensor("alpha_dropout", input), p, train, False, True, False)


def alpha_dropout_(input, p, train):
    return _dropout_impl(_tensor("alpha_dropout_", input), p, train, False, True, True)


def feature_dropout(input, p, train):
    return _dropout_impl(_tensor("feature_dropout", input), p, train, True, False, False)


def feature_dropout_(input, p, train):
    return _dropout_impl(_tensor("feature_dropout_", input), p, train, True, False, True)


def feature_alpha_dropout(input, p, train):
    return _dropout_impl(_tensor("feature_alpha_dropout", input), p, train, True, True, False)


def feature_alpha_dropout_(input, p, train):
    return _dropout_impl(_tensor("feature_alpha_dropout_", input), p, train, True, True, True)


# =============================================================================================
# distances
# =============================================================================================

def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """<x1 / max(|x1|, eps), x2 / max(|x2|, eps)> along dim.

    Each vector is divided by its own clamped norm before the dot product (PyTorch 2.x), so
    the result stays in [-1, 1]. The clamp is applied without recording it, as PyTorch does:
    the gradient treats the norm as unclamped.
    """
    _tensor("cosine_similarity", x1, "x1", 1)
    _tensor("cosine_similarity", x2, "x2", 2)
    common = result_dtype((x1, x2))
    if not common.is_floating_point:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{common.scalar_name}")
    if not x1.dtype.is_floating_point:
        x1 = x1.to(common)
    if not x2.dtype.is_floating_point:
        x2 = x2.to(common)
    x1, x2 = broadcast_tensors(x1, x2)
    norm1 = norm(x1, 2, dim, keepdim=True).clone()
    norm2 = norm(x2, 2, dim, keepdim=True).clone()
    with no_grad():
        norm1.clamp_min_(eps)
        norm2.clamp_min_(eps)
    return ((x1 / norm1) * (x2 / norm2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps over the last dimension (eps keeps the norm's gradient
    finite where x1 == x2)."""
    _tensor("pairwise_distance", x1, "x1", 1)
    _tensor("pairwise_distance", x2, "x2", 2)
    innermost = max(x1.ndim, x2.ndim) - 1
    return norm(x1 - x2 + eps, p, innermost, keepdim)


def _pair_indices(n):
    return np.triu_indices(n, 1)


def _pdist(x, p=2.0):
    """||x_i - x_j||_p for every pair of rows i < j, in row-major order of the pairs."""
    rows, cols = _pair_indices(x.shape[0])
    diff = np.abs(x[rows] - x[cols])
    if p == 0:
        return np.count_nonzero(diff, axis=1).astype(x.dtype)
    if p == math.inf:
        return np.max(diff, axis=1, initial=0).astype(x.dtype)
    if p == 1:
        return np.sum(diff, axis=1)
    if p == 2:
        return np.sqrt(np.sum(diff * diff, axis=1))
    return np.sum(diff ** p, axis=1) ** (1.0 / p)


PDIST = structured.declare("_pdist_forward", _pdist, family="nn", params={"p": 2.0},
                           dtypes={D.float32, D.float64})


def pdist(input, p=2):
    _tensor("pdist", input)
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if not p >= 0:
        raise RuntimeError("pdist only supports non-negative p values")
    if input.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"\"pdist\" not implemented for "
                                  f"'{input.dtype.scalar_name}'")
    return structured.run(PDIST, (input.contiguous(),), {"p": float(p)})


# =============================================================================================
# Tensor methods
# =============================================================================================

def _softmax_method(self, dim, dtype=None):
    return softmax(self, dim, dtype=dtype)


def _log_softmax_method(self, dim, dtype=None):
    return log_softmax(self, dim, dtype=dtype)


Tensor.relu = relu
Tensor.relu_ = relu_
Tensor.softmax = _softmax_method
Tensor.log_softmax = _log_softmax_method
Tensor.hardshrink = hardshrink
Tensor.prelu = prelu
