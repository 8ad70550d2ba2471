"""Neural-network ops (normalization) at the torch level: declarations, kernels, torch.X forms.

Batch, layer and group normalization are one computation over different axes: subtract the
mean, multiply by the reciprocal standard deviation (biased variance, + eps), then apply a
per-channel (or per-element) weight and bias. Each is a structured op returning PyTorch's
three results (output, mean, rstd) so that a plugin can supply a fused kernel and the
derivative row (NativeBatchNormBackward0, ...) can use the saved statistics. Half and
bfloat16 inputs are normalized in float32 and rounded once, as PyTorch's CPU kernels do.

`native_batch_norm` updates running_mean / running_var in place in training mode (with the
unbiased batch variance), as PyTorch's does. Instance norm is batch norm over a (1, N*C, ...)
view, composed like PyTorch's; RMS norm is a composition of reftorch ops, like PyTorch's.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from . import structured

__all__ = ["batch_norm", "native_batch_norm", "layer_norm", "native_layer_norm", "group_norm",
           "native_group_norm", "instance_norm", "rms_norm"]

FLOATING = {D.float16, D.bfloat16, D.float32, D.float64}


def _compute_dtype(dtype):
    """Statistics of half types are computed in float32 (PyTorch's CPU opmath type)."""
    return np.float32 if dtype in (np.float16, D.bfloat16.numpy_dtype) else np.dtype(dtype).type


def _stats_dtype(x, *params):
    """The saved mean/rstd dtype: float32 when a half-type input meets float32 parameters
    (PyTorch's 'mixed type' path), otherwise the input's dtype."""
    mixed = any(p is not None and p.dtype == np.float32 for p in params)
    if mixed and _compute_dtype(x.dtype) != x.dtype:
        return np.float32
    return x.dtype


def _moments(x, axes):
    """Mean and biased variance over `axes` (kept as size-1 dims), in the compute dtype."""
    x = x.astype(_compute_dtype(x.dtype), copy=False)
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    return mean, (centered * centered).mean(axis=axes, keepdims=True)


def _affine(normalized, weight, bias, shape):
    """normalized * weight + bias, the parameters broadcast along `shape` ((C,1,..) etc.)."""
    if weight is not None:
        normalized = normalized * weight.reshape(shape)
    if bias is not None:
        normalized = normalized + bias.reshape(shape)
    return normalized


# --- batch norm ------------------------------------------------------------------------------

def native_batch_norm_kernel(x, weight, bias, running_mean, running_var, training, momentum,
                             eps):
    axes = (0,) + tuple(range(2, x.ndim))
    channel = (1, -1) + (1,) * (x.ndim - 2)
    compute, stats = _compute_dtype(x.dtype), _stats_dtype(x, weight, bias, running_mean)
    if training:
        mean, var = _moments(x, axes)
        rstd = 1 / np.sqrt(var + compute(eps))
        if running_mean is not None:
            # in place, like PyTorch; the variance that updates the running estimate is unbiased
            count = x.size // max(x.shape[1], 1)
            unbiased = var.reshape(-1) * (count / (count - 1) if count > 1 else np.inf)
            running_mean[...] = (1 - momentum) * running_mean + momentum * mean.reshape(-1)
            running_var[...] = (1 - momentum) * running_var + momentum * unbiased
        save_mean, save_rstd = mean.reshape(-1).astype(stats), rstd.reshape(-1).astype(stats)
    else:
        mean = running_mean.astype(compute).reshape(channel)
        rstd = (1 / np.sqrt(running_var.astype(compute) + compute(eps))).reshape(channel)
        save_mean = save_rstd = np.zeros((0,), dtype=stats)
    normalized = (x.astype(compute) - mean) * rstd
    out = _affine(normalized, weight, bias, channel).astype(x.dtype)
    return out, save_mean, save_rstd


NATIVE_BATCH_NORM = structured.declare(
    "native_batch_norm", native_batch_norm_kernel, family="nn",
    params={"training": False, "momentum": 0.1, "eps": 1e-5}, dtypes=FLOATING,
    layout="input_format")


def _normalized_input_grad(g_hat, x_hat, rstd, axes):
    """The gradient reaching x through x_hat = (x - mean) * rstd over `axes`, given the one
    reaching x_hat (g_hat): rstd (g_hat - mean(g_hat) - x_hat mean(g_hat x_hat)), the two
    means accounting for the statistics' own dependence on x. (The autograd rows' reftorch
    version is derivatives/nn_normalization.normalized_input_grad.)"""
    return rstd * (g_hat - g_hat.mean(axes, keepdims=True)
                   - x_hat * (g_hat * x_hat).mean(axes, keepdims=True))


def batch_norm_backward_kernel(grad, x, weight, save_mean, save_invstd, output_mask):
    """Reference kernel of `native_batch_norm_backward` (training mode): with x_hat the input
    normalized by the saved statistics and g_hat = grad * weight, the input's gradient
    rstd (g_hat - mean(g_hat) - x_hat mean(g_hat x_hat)) over each channel's elements, the
    weight's sum(grad x_hat) and the bias's sum(grad); None where output_mask says so."""
    dims = (0,) + tuple(range(2, x.ndim))
    channel = (1, -1) + (1,) * (x.ndim - 2)
    rstd = save_invstd.reshape(channel)
    x_hat = (x - save_mean.reshape(channel)) * rstd
    g_hat = grad if weight is None else grad * weight.reshape(channel)
    grad_input = None
    if output_mask[0]:
        grad_input = _normalized_input_grad(g_hat, x_hat, rstd, dims)
    grad_weight = (grad * x_hat).sum(dims) if output_mask[1] else None
    grad_bias = grad.sum(dims) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


# PyTorch's op for batch norm's first-order backward (training mode, float32/float64 here),
# declared so that a plugin can serve it in one pass; a backward being differentiated
# (create_graph) uses the composition in autograd/derivatives/nn_normalization.py instead.
NATIVE_BATCH_NORM_BACKWARD = structured.declare(
    "native_batch_norm_backward", batch_norm_backward_kernel, family="nn",
    params={"output_mask": (True, True, True)}, dtypes=(D.float32, D.float64))


def batch_norm_backward(grad, input, weight, save_mean, save_invstd, output_mask):
    """(grad_input, grad_weight, grad_bias) of training-mode batch norm, None where masked."""
    return structured.run(NATIVE_BATCH_NORM_BACKWARD,
                          (grad, input, weight, save_mean, save_invstd),
                          {"output_mask": tuple(bool(m) for m in output_mask)})


def _check_channels(name, t, channels):
    if t is not None and t.numel() != channels:
        raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                      eps):
    """torch.native_batch_norm: (output, save_mean, save_invstd); updates the running stats
    in place in training mode."""
    if input.dim() < 2:
        raise RuntimeError(f"batch_norm(): Expected input to have at least 2 dims, but got "
                           f"{input.dim()}")
    channels = input.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        _check_channels(name, t, channels)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    result = structured.run(NATIVE_BATCH_NORM, (input, weight, bias, running_mean, running_var),
                            {"training": bool(training), "momentum": float(momentum),
                             "eps": float(eps)})
    if training:
        for t in (running_mean, running_var):
            if t is not None:
                t._bump_version()
    return result


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled=True):
    """torch.batch_norm: the normalized output only."""
    return native_batch_norm(input, weight, bias, running_mean, running_var, training,
                             momentum, eps)[0]


# --- layer norm ------------------------------------------------------------------------------

def native_layer_norm_kernel(x, weight, bias, normalized_shape, eps):
    axis = x.ndim - len(normalized_shape)
    axes = tuple(range(axis, x.ndim))
    mean, var = _moments(x, axes)
    rstd = 1 / np.sqrt(var + _compute_dtype(x.dtype)(eps))
    normalized = (x.astype(_compute_dtype(x.dtype)) - mean) * rstd
    out = _affine(normalized, weight, bias, tuple(normalized_shape)).astype(x.dtype)
    stats = _stats_dtype(x, weight, bias)
    return out, mean.astype(stats), rstd.astype(stats)


NATIVE_LAYER_NORM = structured.declare(
    "native_layer_norm", native_layer_norm_kernel, family="nn",
    params={"normalized_shape": None, "eps": 1e-5}, dtypes=FLOATING, layout="contiguous")


def layer_norm_backward_kernel(grad, x, mean, rstd, weight, normalized_ndim, output_mask):
    """Reference kernel of `native_layer_norm_backward`: with x_hat the input normalized by
    the saved statistics and g_hat = grad * weight, the input's gradient
    rstd (g_hat - mean(g_hat) - x_hat mean(g_hat x_hat)) over each row's normalized
    elements, the weight's sum(grad x_hat) and the bias's sum(grad) over the leading dims;
    None where output_mask says so."""
    axis = x.ndim - normalized_ndim
    dims, leading = tuple(range(axis, x.ndim)), tuple(range(axis))
    stats_shape = x.shape[:axis] + (1,) * normalized_ndim
    rstd = rstd.reshape(stats_shape)
    x_hat = (x - mean.reshape(stats_shape)) * rstd
    g_hat = grad if weight is None else grad * weight
    grad_input = None
    if output_mask[0]:
        grad_input = _normalized_input_grad(g_hat, x_hat, rstd, dims)
    grad_weight = _sum_over(grad * x_hat, leading) if output_mask[1] else None
    grad_bias = _sum_over(grad, leading) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


def _sum_over(a, axes):
    return a.sum(axes) if axes else a


# PyTorch's op for layer norm's first-order backward (float32/float64 here), declared so that
# a plugin can serve it in one pass per row; a backward being differentiated (create_graph)
# uses the composition in autograd/derivatives/nn_normalization.py instead.
NATIVE_LAYER_NORM_BACKWARD = structured.declare(
    "native_layer_norm_backward", layer_norm_backward_kernel, family="nn",
    params={"normalized_ndim": None, "output_mask": (True, True, True)},
    dtypes=(D.float32, D.float64))


def layer_norm_backward(grad, input, mean, rstd, weight, normalized_ndim, output_mask):
    """(grad_input, grad_weight, grad_bias) of layer norm over the last `normalized_ndim`
    dims, None where masked."""
    return structured.run(NATIVE_LAYER_NORM_BACKWARD, (grad, input, mean, rstd, weight),
                          {"normalized_ndim": int(normalized_ndim),
                           "output_mask": tuple(bool(m) for m in output_mask)})


def _shape_list(shape):
    return "[" + ", ".join(map(str, shape)) + "]"


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """torch.native_layer_norm: (output, mean, rstd), the statistics shaped
    input.shape[:axis] + (1,) * len(normalized_shape)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
        tuple(int(s) for s in normalized_shape)
    if len(shape) < 1:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {_shape_list(t.shape)} and "
                               f"normalized_shape = {_shape_list(shape)}")
    if input.dim() < len(shape) or tuple(input.shape[input.dim() - len(shape):]) != shape:
        raise RuntimeError(f"Given normalized_shape={_shape_list(shape)}, expected input with "
                           f"shape [*, {', '.join(map(str, shape))}], but got input of size"
                           f"{_shape_list(input.shape)}")
    return structured.run(NATIVE_LAYER_NORM, (input, weight, bias),
                          {"normalized_shape": shape, "eps": float(eps)})


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return native_layer_norm(input, normalized_shape, weight, bias, eps)[0]


# --- group norm ------------------------------------------------------------------------------

def native_group_norm_kernel(x, weight, bias, N, C, HxW, group, eps):
    grouped = x.reshape(N, group, C // group * HxW)   # not -1: N may be 0
    mean, var = _moments(grouped, (2,))
    rstd = 1 / np.sqrt(var + _compute_dtype(x.dtype)(eps))
    normalized = ((grouped.astype(_compute_dtype(x.dtype)) - mean) * rstd).reshape(x.shape)
    channel = (1, -1) + (1,) * (x.ndim - 2)
    out = _affine(normalized, weight, bias, channel).astype(x.dtype)
    stats = _stats_dtype(x, weight, bias)
    return out, mean.reshape(N, group).astype(stats), rstd.reshape(N, group).astype(stats)


NATIVE_GROUP_NORM = structured.declare(
    "native_group_norm", native_group_norm_kernel, family="nn",
    params={"N": None, "C": None, "HxW": None, "group": None, "eps": 1e-5}, dtypes=FLOATING)


def group_norm_backward_kernel(grad, x, mean, rstd, weight, N, C, HxW, group, output_mask):
    """Reference kernel of `native_group_norm_backward`: layer norm's gradient formula over
    each (sample, group)'s elements, with g_hat = grad * weight per channel; the weight's and
    bias's gradients are sums over the samples and positions of grad x_hat and grad. None
    where output_mask says so."""
    groups = (N, group, C // group * HxW)
    rstd = rstd.reshape(N, group, 1)
    x_hat = ((x.reshape(groups) - mean.reshape(N, group, 1)) * rstd).reshape(x.shape)
    channel = (1, -1) + (1,) * (x.ndim - 2)
    g_hat = grad if weight is None else grad * weight.reshape(channel)
    grad_input = None
    if output_mask[0]:
        grad_input = _normalized_input_grad(g_hat.reshape(groups), x_hat.reshape(groups),
                                            rstd, 2).reshape(x.shape)
    dims = (0,) + tuple(range(2, x.ndim))
    grad_weight = (grad * x_hat).sum(dims) if output_mask[1] else None
    grad_bias = grad.sum(dims) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


# PyTorch's op for group norm's first-order backward (float32/float64), declared so that a
# plugin can serve it; create_graph uses the composition of the autograd row.
NATIVE_GROUP_NORM_BACKWARD = structured.declare(
    "native_group_norm_backward", group_norm_backward_kernel, family="nn",
    params={"N": None, "C": None, "HxW": None, "group": None,
            "output_mask": (True, True, True)}, dtypes=(D.float32, D.float64))


def group_norm_backward(grad, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    """(grad_input, grad_weight, grad_bias) of group norm, None where masked."""
    return structured.run(NATIVE_GROUP_NORM_BACKWARD, (grad, input, mean, rstd, weight),
                          {"N": int(N), "C": int(C), "HxW": int(HxW), "group": int(group),
                           "output_mask": tuple(bool(m) for m in output_mask)})


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """torch.native_group_norm: (output, mean (N, group), rstd (N, group))."""
    if group <= 0 or C % group != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {_shape_list(input.shape)} and "
                           f"num_groups={group}")
    if input.numel() != N * C * HxW:
        raise RuntimeError(f"Expected input to have {N * C * HxW} elements, but got "
                           f"{input.numel()}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.dim() != 1 or t.numel() != C):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number "
                               f"of channels in input, but got {name} of shape "
                               f"{_shape_list(t.shape)} and input of shape "
                               f"{_shape_list(input.shape)}")
    return structured.run(NATIVE_GROUP_NORM, (input, weight, bias),
                          {"N": int(N), "C": int(C), "HxW": int(HxW), "group": int(group),
                           "eps": float(eps)})


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    N, C = input.shape[0], input.shape[1]
    HxW = math.prod(input.shape[2:])
    return native_group_norm(input, weight, bias, N, C, HxW, num_groups, eps)[0]


# --- instance norm and RMS norm (compositions) ---------------------------------------------

def _repeat(t, times):
    return None if t is None else t.repeat(times)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled=True):
    """Batch norm of the (1, N*C, ...) view: every (sample, channel) is its own channel. The
    running stats are repeated per sample, updated, then averaged back over the samples."""
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    b, c = input.shape[0], input.shape[1]
    shape = (1, b * c) + tuple(input.shape[2:])
    mean_, var_ = _repeat(running_mean, b), _repeat(running_var, b)
    out = batch_norm(input.contiguous().view(shape), _repeat(weight, b), _repeat(bias, b),
                     mean_, var_, use_input_stats, momentum, eps)
    from ..autograd.grad_mode import no_grad
    with no_grad():
        if running_mean is not None:
            running_mean.copy_(mean_.view(b, c).mean(0))
        if running_var is not None:
            running_var.copy_(var_.view(b, c).mean(0))
    return out.view(input.shape)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2 over the normalized dims) + eps) * weight; eps defaults to the
    dtype's machine epsilon. Half types are computed in float32 and rounded, like PyTorch."""
    import reftorch
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
        tuple(int(s) for s in normalized_shape)
    if input.dim() < len(shape) or tuple(input.shape[input.dim() - len(shape):]) != shape:
        raise RuntimeError(f"Given normalized_shape={_shape_list(shape)}, expected input with "
                           f"shape [*, {', '.join(map(str, shape))}], but got input of size"
                           f"{_shape_list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {_shape_list(weight.shape)} and normalized_shape = "
                           f"{_shape_list(shape)}")
    dims = list(range(input.dim() - len(shape), input.dim()))
    upcast = input.dtype in (D.float16, D.bfloat16)
    x = input.float() if upcast else input
    if eps is None:
        eps = reftorch.finfo(x.dtype).eps
    rsqrt = reftorch.rsqrt(x.pow(2).mean(dims, keepdim=True).add(eps))
    result = (x * rsqrt).type_as(input) if upcast else x * rsqrt
    return result if weight is None else result * weight
