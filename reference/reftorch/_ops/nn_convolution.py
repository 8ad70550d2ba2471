"""Neural-network ops (convolution) at the torch level: declarations, reference kernels, torch.X forms.

Structured ops declared here (each with a derivative row in autograd/derivatives/nn_convolution.py):

  convolution                  N-d convolution, plain or transposed (aten::convolution);
                               its backward is written with `convolution` itself
  convolution_backward_weight  the weight gradient in one op (first-order backward only)
  im2col / col2im              F.unfold / F.fold: each is the other's adjoint
  constant_pad_nd              F.pad(mode="constant"), negative padding crops
  reflection_padNd,            F.pad(mode="reflect" / "replicate") over the last N dims,
  replication_padNd            with `*_backward` ops (their own adjoints' adjoints)

Circular padding is a composition of slice copies, as in PyTorch (its node is CopySlices).

The kernels share two NumPy building blocks:

  _windows(xp, kernel, dilation, stride)   a view (N, C, *out, *kernel) of every dilated
                                           window of a padded input, taken every `stride`
  _add_windows(cols, size, ...)            its adjoint: adds each window's values back at the
                                           places it was read from (one loop over kernel
                                           offsets, never over output positions)

A convolution is then one batched matmul over groups: the window view reshaped to an im2col
matrix times the flattened weight. A transposed convolution multiplies first (input times
weight gives every output window) and then adds the windows in place with `_add_windows`.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import _dtype as D
from .._shape import suggested_format
from .._tensor import Tensor
from . import structured

__all__ = ["constant_pad_nd", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d", "convolution"]

_FAMILY = "nn"


# --- NumPy building blocks --------------------------------------------------------------------

def _compute_dtype(np_dtype):
    """Half types compute in float32 and round once at the end, like PyTorch's CPU kernels."""
    if np_dtype in (D.float16.numpy_dtype, D.bfloat16.numpy_dtype):
        return np.dtype(np.float32)
    return np_dtype


def _zero_pad(x, padding):
    """x (N, C, *spatial) with `padding[i]` zeros on both sides of spatial dim i."""
    if not any(padding):
        return x
    widths = [(0, 0), (0, 0)] + [(p, p) for p in padding]
    return np.pad(x, widths)


def _windows(xp, kernel, dilation, stride):
    """View (N, C, *out, *kernel): the dilated kernel windows of xp, one every `stride`."""
    nd = len(kernel)
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    view = sliding_window_view(xp, span, axis=tuple(range(2, 2 + nd)))
    # view is (N, C, *every start position, *span): keep every stride-th start and every
    # dilation-th element of each window.
    pick = ((slice(None),) * 2 + tuple(slice(None, None, s) for s in stride)
            + tuple(slice(None, None, d) for d in dilation))
    return view[pick]


def _add_windows(cols, size, kernel, dilation, stride):
    """The adjoint of `_windows`: cols (N, C, *out, *kernel) -> (N, C, *size), every window's
    values added at the positions the window covers (overlaps sum)."""
    nd = len(kernel)
    out_shape = cols.shape[2:2 + nd]
    result = np.zeros(cols.shape[:2] + tuple(size), dtype=cols.dtype)
    for offset in np.ndindex(*kernel):
        # Kernel element `offset` of window j lands at j*stride + offset*dilation.
        target = tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                       for o, d, s, n in zip(offset, dilation, stride, out_shape))
        if all(n > 0 for n in out_shape):
            result[(Ellipsis,) + target] += cols[(Ellipsis,) + offset]
    return result


def _matmul(a, b):
    """Batched matmul with contiguous operands, so that NumPy uses BLAS (for strided
    operands it falls back to a slow loop)."""
    return np.matmul(np.ascontiguousarray(a), np.ascontiguousarray(b))


def _output_sizes(size, kernel, stride, padding, dilation):
    """Output extent of a (non-transposed) convolution along each spatial dim."""
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(size, kernel, stride, padding, dilation))


# --- convolution --------------------------------------------------------------------------------

def _conv_forward(x, weight, stride, padding, dilation, groups):
    """Plain convolution (cross-correlation): im2col windows times the weight, per group."""
    nd = weight.ndim - 2
    n, c = x.shape[:2]
    out_channels, kernel = weight.shape[0], weight.shape[2:]
    windows = _windows(_zero_pad(x, padding), kernel, dilation, stride)   # (N, C, *O, *k)
    out_size = windows.shape[2:2 + nd]
    positions = math.prod(out_size)
    k_elems = math.prod(kernel)
    # (N, G, Cg, *O, *k) -> (G, N, *O, Cg, *k) -> (G, N*L, Cg*K): one im2col matrix per
    # group, one row per output position (the tall orientation is BLAS's faster one).
    grouped = windows.reshape((n, groups, c // groups) + out_size + tuple(kernel))
    order = ((1, 0) + tuple(range(3, 3 + nd)) + (2,) + tuple(range(3 + nd, 3 + 2 * nd)))
    cols = grouped.transpose(order).reshape(groups, n * positions, (c // groups) * k_elems)
    w = weight.reshape(groups, out_channels // groups, (c // groups) * k_elems)
    out = _matmul(cols, w.transpose(0, 2, 1))                       # (G, N*L, Og)
    # (G, N, *O, Og) -> (N, G, Og, *O) -> (N, Cout, *O)
    out = out.reshape((groups, n) + out_size + (out_channels // groups,))
    order = (1, 0, 2 + nd) + tuple(range(2, 2 + nd))
    out = out.transpose(order).reshape((n, out_channels) + out_size)
    return np.ascontiguousarray(out)


def _conv_transpose_forward(x, weight, stride, padding, dilation, groups, output_padding,
                            result_dtype=None):
    """Transposed convolution: every input position times the weight gives one output
    window; the windows are then added in place (col2im) and the padding cropped."""
    nd = weight.ndim - 2
    n, c = x.shape[:2]
    in_size = x.shape[2:]
    kernel = weight.shape[2:]
    per_group_out = weight.shape[1]
    k_elems = math.prod(kernel)
    cg = c // groups
    # x: (N, G, Cg, *S) -> (G, Cg, N*L); weight: (G, Cg, Og*K) -> (G, Og*K, Cg).
    xs = np.moveaxis(x.reshape((n, groups, cg) + in_size), 0, 2)
    xs = xs.reshape(groups, cg, n * math.prod(in_size))
    w = weight.reshape(groups, cg, per_group_out * k_elems).transpose(0, 2, 1)
    cols = _matmul(w, xs)                                           # (G, Og*K, N*L)
    # -> (G, Og, *k, N, *S) -> (N, G, Og, *S, *k) -> (N, Cout, *S, *k)
    cols = cols.reshape((groups, per_group_out) + tuple(kernel) + (n,) + in_size)
    order = ((2 + nd, 0, 1) + tuple(range(3 + nd, 3 + 2 * nd)) + tuple(range(2, 2 + nd)))
    cols = cols.transpose(order).reshape((n, groups * per_group_out) + in_size + tuple(kernel))
    if result_dtype is not None:
        cols = cols.astype(result_dtype)      # round the products; add the windows in half
    full = tuple((i - 1) * s + d * (k - 1) + 1 + op for i, s, d, k, op
                 in zip(in_size, stride, dilation, kernel, output_padding))
    summed = _add_windows(cols, full, kernel, dilation, stride)
    crop = tuple(slice(p, f - p) for p, f in zip(padding, full))
    return summed[(Ellipsis,) + crop]


def convolution_kernel(input, weight, bias, stride, padding, dilation, transposed,
                       output_padding, groups):
    """Reference kernel of `convolution` (tuples of ints for every per-dim parameter)."""
    result_dtype = input.dtype
    compute = _compute_dtype(result_dtype)
    x, w = input.astype(compute, copy=False), weight.astype(compute, copy=False)
    if transposed:
        # Half types: PyTorch computes in float32 and rounds once, except when an
        # output_padding reaches the stride (only the dilation allows it): that case runs its
        # fallback kernel, which rounds every product and adds the windows in half. (On a CPU
        # for which oneDNN has no f16 kernels, e.g. an AMD Zen 4, PyTorch runs that fallback
        # for every float16 call; the rule here is the one-rounding result.)
        fallback = any(op >= s for op, s in zip(output_padding, stride))
        half = result_dtype if compute != result_dtype and fallback else None
        out = _conv_transpose_forward(x, w, stride, padding, dilation, groups, output_padding,
                                      half)
        compute = out.dtype
    else:
        out = _conv_forward(x, w, stride, padding, dilation, groups)
    if bias is not None:
        out = out + bias.astype(compute, copy=False).reshape((1, -1) + (1,) * (out.ndim - 2))
    return np.ascontiguousarray(out).astype(result_dtype, copy=False)


def _convolution_layout(tensors, params):
    """PyTorch's CPU convolutions write a channels-last output when the input or the weight
    suggests that format, else a contiguous one."""
    formats = {suggested_format(t._shape, t._strides) for t in tensors[:2]}
    return next((f for f in ("channels_last", "channels_last_3d") if f in formats),
                "contiguous")


CONVOLUTION = structured.declare(
    "convolution", convolution_kernel, family=_FAMILY,
    params={"stride": None, "padding": None, "dilation": None, "transposed": False,
            "output_padding": None, "groups": 1}, layout=_convolution_layout,
    doc="N-d convolution or transposed convolution of (N, C, *spatial) input.")


def convolution_backward_weight_kernel(input, grad_output, weight_shape, stride, padding,
                                       dilation, groups):
    """Reference kernel of `convolution_backward_weight`: the gradient of a plain convolution
    of `input` with respect to its weight, given the output's gradient. Tap k of filter
    (o, c) correlates the input's windows with the gradient: the sum over images n and
    output positions p of grad[n, o, p] * window[n, c, p, k]."""
    compute = _compute_dtype(grad_output.dtype)
    x = _zero_pad(input.astype(compute, copy=False), padding)
    grad = grad_output.astype(compute, copy=False)
    kernel = tuple(weight_shape[2:])
    windows = _windows(x, kernel, dilation, stride)            # (N, C, *out, *k)
    # A transposed convolution's output_padding leaves the input rows past the last window
    # out of the gradient: keep the windows the gradient covers.
    windows = windows[(slice(None),) * 2 + tuple(slice(0, n) for n in grad.shape[2:])]
    n, c, o = x.shape[0], x.shape[1], grad.shape[1]
    positions, taps = math.prod(grad.shape[2:]), math.prod(kernel)
    cols = windows.reshape(n, groups, c // groups, positions, taps)
    grads = grad.reshape(n, groups, o // groups, positions)
    result = np.einsum("ngop,ngcpk->gock", grads, cols, optimize=True)
    return np.ascontiguousarray(result.reshape(weight_shape).astype(grad_output.dtype,
                                                                     copy=False))


# Its own op (PyTorch computes it inside convolution_backward) so that a plugin can serve the
# first-order weight gradient in one pass; its derivative is never needed: a backward being
# differentiated (create_graph) writes the gradient as a convolution instead.
CONVOLUTION_BACKWARD_WEIGHT = structured.declare(
    "convolution_backward_weight", convolution_backward_weight_kernel, family=_FAMILY,
    params={"weight_shape": None, "stride": None, "padding": None, "dilation": None,
            "groups": 1},
    doc="The gradient of a plain N-d convolution with respect to its weight.")


def convolution_backward_weight(input, grad_output, weight_shape, stride, padding, dilation,
                                groups):
    """The weight gradient of convolution(input, weight, stride, padding, dilation, groups)
    given grad_output (all per-dim parameters as tuples)."""
    return structured.run(CONVOLUTION_BACKWARD_WEIGHT, (input, grad_output),
                          {"weight_shape": tuple(weight_shape), "stride": tuple(stride),
                           "padding": tuple(padding), "dilation": tuple(dilation),
                           "groups": groups})


def _expand_param(name, value, nd):
    """An int or a sequence of ints -> a tuple of `nd` ints, with PyTorch's error."""
    if isinstance(value, numbers.Integral):
        return (int(value),) * nd
    if isinstance(value, str) or not all(isinstance(v, numbers.Integral) for v in value):
        raise TypeError(f"argument '{name}' must be tuple of ints, but got {value!r}")
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * nd
    if len(value) != nd:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {nd} "
                           f"values to match the convolution dimensions, but got "
                           f"{name}={list(value)}")
    return value


def _shape_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _check_convolution(input, weight, bias, stride, padding, dilation, transposed,
                       output_padding, groups):
    """PyTorch's argument checks for aten::convolution (RuntimeError, its messages)."""
    nd = weight.dim() - 2
    if weight.dim() < 3:
        raise RuntimeError(f"weight should have at least three dimensions, got "
                           f"{weight.dim()}")
    if input.dim() != weight.dim():
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}-"
                           f"dimensional weight {_shape_str(weight.shape)}, but got "
                           f"{input.dim()}-dimensional input of size "
                           f"{_shape_str(input.shape)} instead")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"Input type ({input.type()}) and weight type ({weight.type()}) "
                           f"should be the same or input should be a MKLDNN tensor and "
                           f"weight is a dense tensor")
    if bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(f"Input type ({input.type()}) and bias type ({bias.type()}) "
                           f"should be the same")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size "
                           f"[{_shape_str(weight.shape)}] instead")
    channels = input.shape[1]
    if transposed:
        if channels != weight.shape[0]:
            raise RuntimeError(f"Given transposed=1, weight of size "
                               f"{_shape_str(weight.shape)}, expected input"
                               f"{_shape_str(input.shape)} to have {weight.shape[0]} "
                               f"channels, but got {channels} channels instead")
        out_channels = weight.shape[1] * groups
        if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
            raise RuntimeError("output padding must be smaller than either stride or "
                               "dilation, but got " + _output_padding_detail(
                                   output_padding, stride, dilation))
    else:
        if channels != weight.shape[1] * groups:
            prefix = f"Given groups={groups}, weight of size {_shape_str(weight.shape)}"
            raise RuntimeError(f"{prefix}, expected input{_shape_str(input.shape)} to have "
                               f"{weight.shape[1] * groups} channels, but got {channels} "
                               f"channels instead")
        out_channels = weight.shape[0]
        padded = tuple(n + 2 * p for n, p in zip(input.shape[2:], padding))
        span = tuple(d * (k - 1) + 1 for k, d in zip(weight.shape[2:], dilation))
        if any(s > n for s, n in zip(span, padded)):
            raise RuntimeError(f"Calculated padded input size per channel: "
                               f"({' x '.join(map(str, padded))}). Kernel size: "
                               f"({' x '.join(map(str, span))}). Kernel size can't be greater "
                               f"than actual input size")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(f"Given weight of size {_shape_str(weight.shape)}, expected bias to "
                           f"be 1-dimensional with {out_channels} elements, but got bias of "
                           f"size {_shape_str(bias.shape)} instead")
    if input.shape[0] != 0:          # an empty batch returns before any kernel runs
        _check_conv_dtype(input.dtype, transposed, dilation, nd)


def _output_padding_detail(output_padding, stride, dilation):
    """'output_padding_height: 1 output_padding_width: 1 stride_height: ...' as PyTorch
    prints it, one name per spatial dim."""
    names = ("depth", "height", "width")[3 - len(stride):]
    parts = []
    for label, values in (("output_padding", output_padding), ("stride", stride),
                          ("dilation", dilation)):
        parts += [f"{label}_{n}: {v}" for n, v in zip(names, values)]
    return " ".join(parts)


def _check_conv_dtype(dtype, transposed, dilation, nd):
    """Which dtypes PyTorch's CPU convolution kernels accept: bool never; integers other
    than int64 only for plain, undilated convolutions."""
    kernel = ("slow_conv_transpose3d_out_cpu" if nd == 3 else "slow_conv_transpose2d_out_cpu"
              ) if transposed else "slow_conv2d_cpu"
    if dtype == D.bool:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    if dtype in (D.uint8, D.int8, D.int16, D.int32):
        if transposed:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype.scalar_name}'")
        if any(d != 1 for d in dilation):
            raise NotImplementedError(f"\"slow_conv_dilated<>\" not implemented for "
                                      f"'{dtype.scalar_name}'")


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """torch.convolution: batched (N, C, *spatial) input, weight with nd+2 dims."""
    nd = weight.dim() - 2
    stride = _expand_param("stride", stride, nd)
    padding = _expand_param("padding", padding, nd)
    dilation = _expand_param("dilation", dilation, nd)
    output_padding = _expand_param("output_padding", output_padding, nd)
    _check_convolution(input, weight, bias, stride, padding, dilation, transposed,
                       output_padding, groups)
    if transposed:
        out_size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                         zip(input.shape[2:], stride, padding, dilation, weight.shape[2:],
                             output_padding))
        if any(o <= 0 for o in out_size):
            raise RuntimeError(f"Given input size per channel: "
                               f"({' x '.join(map(str, input.shape[2:]))}). Calculated output "
                               f"size per channel: ({' x '.join(map(str, out_size))}). "
                               f"Output size is too small")
    params = {"stride": stride, "padding": padding, "dilation": dilation,
              "transposed": bool(transposed), "output_padding": output_padding,
              "groups": int(groups)}
    return structured.run(CONVOLUTION, (input, weight, bias), params)


def _same_padding(input, weight, dilation, nd):
    """padding='same': total padding d*(k-1) per dim; when it is odd, PyTorch pads the extra
    element at the end with an explicit zero pad and splits the rest evenly."""
    kernel = weight.shape[2:]
    totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
    left = tuple(t // 2 for t in totals)
    extra = [t - 2 * l for t, l in zip(totals, left)]
    if any(extra):
        warnings.warn("Using padding='same' with even kernel lengths and odd dilation may "
                      "require a zero-padded copy of the input be created", UserWarning,
                      stacklevel=4)
        pad = []
        for e in reversed(extra):          # F.pad order: last dim first
            pad += [0, e]
        input = constant_pad_nd(input, pad)
    return input, left


def _conv_nd(nd, input, weight, bias, stride, padding, dilation, groups):
    """torch.convNd: optional unbatched input, padding as ints or 'same'/'valid'."""
    batched = input.dim() == nd + 2
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"conv{nd}d, but got input of size: {_shape_str(input.shape)}")
    if not batched:
        input = input.unsqueeze(0)
    stride = _expand_param("stride", stride, nd)
    dilation = _expand_param("dilation", dilation, nd)
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            if weight.dim() == nd + 2:
                input, padding = _same_padding(input, weight, dilation, nd)
            else:
                padding = (0,) * nd
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    out = convolution(input, weight, bias, stride, padding, dilation, False, (0,) * nd, groups)
    return out if batched else out.squeeze(0)


def _conv_transpose_nd(nd, input, weight, bias, stride, padding, output_padding, groups,
                       dilation):
    batched = input.dim() == nd + 2
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"conv_transpose{nd}d, but got input of size: "
                           f"{_shape_str(input.shape)}")
    if isinstance(padding, str):
        raise TypeError(f"conv_transpose{nd}d(): argument 'padding' must be tuple of ints, "
                        f"not str")
    if not batched:
        input = input.unsqueeze(0)
    out = convolution(input, weight, bias, stride, padding, dilation, True, output_padding,
                      groups)
    return out if batched else out.squeeze(0)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_nd(3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transpose_nd(1, input, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transpose_nd(2, input, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transpose_nd(3, input, weight, bias, stride, padding, output_padding, groups,
                              dilation)


# --- im2col / col2im (F.unfold / F.fold) ------------------------------------------------------

def im2col_kernel(input, kernel_size, dilation, padding, stride):
    """(N, C, H, W) or (C, H, W) -> (N, C*kh*kw, L): each column one flattened window."""
    batched = input.ndim == 4
    x = input if batched else input[None]
    n, c = x.shape[:2]
    windows = _windows(_zero_pad(x, padding), kernel_size, dilation, stride)  # N C oh ow kh kw
    cols = windows.transpose(0, 1, 4, 5, 2, 3)
    blocks = windows.shape[2] * windows.shape[3]
    cols = cols.reshape(n, c * math.prod(kernel_size), blocks)
    return np.ascontiguousarray(cols if batched else cols[0])


def col2im_kernel(input, output_size, kernel_size, dilation, padding, stride):
    """(N, C*kh*kw, L) or (C*kh*kw, L) -> (N, C, *output_size): overlapping windows summed."""
    batched = input.ndim == 3
    cols = input if batched else input[None]
    n = cols.shape[0]
    c = cols.shape[1] // math.prod(kernel_size)
    padded = tuple(o + 2 * p for o, p in zip(output_size, padding))
    blocks = _output_sizes(output_size, kernel_size, stride, padding, dilation)
    windows = cols.reshape((n, c) + tuple(kernel_size) + blocks).transpose(0, 1, 4, 5, 2, 3)
    summed = _add_windows(windows, padded, kernel_size, dilation, stride)
    crop = tuple(slice(p, p + o) for p, o in zip(padding, output_size))
    out = summed[(Ellipsis,) + crop]
    return np.ascontiguousarray(out if batched else out[0])


_FOLD_DTYPES = frozenset({D.bool, D.float16, D.bfloat16, D.float32, D.float64, D.complex64,
                          D.complex128})
IM2COL = structured.declare("im2col", im2col_kernel, family=_FAMILY,
                            params={"kernel_size": None, "dilation": None, "padding": None,
                                    "stride": None}, dtypes=_FOLD_DTYPES)
COL2IM = structured.declare("col2im", col2im_kernel, family=_FAMILY,
                            params={"output_size": None, "kernel_size": None, "dilation": None,
                                    "padding": None, "stride": None}, dtypes=_FOLD_DTYPES)


def _pair_param(name, value):
    if isinstance(value, numbers.Integral):
        return (int(value),) * 2
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(value)}")
    return value


def _check_fold_params(kernel_size, dilation, padding, stride):
    checks = (("kernel size", kernel_size, "kernel", lambda v: v > 0, "greater than zero"),
              ("stride", stride, "stride", lambda v: v > 0, "greater than zero"),
              ("dilation", dilation, "dilation", lambda v: v > 0, "greater than zero"),
              ("padding", padding, "pad", lambda v: v >= 0, "non-negative"))
    for text, value, prefix, ok, wanted in checks:
        if not all(ok(v) for v in value):
            raise RuntimeError(f"{text} should be {wanted}, but got {prefix}_height: "
                               f"{value[0]} {prefix}_width: {value[1]}")


def _im2col(input, kernel_size, dilation, padding, stride):
    """F.unfold's computation on a 3-D or 4-D tensor."""
    kernel_size = _pair_param("kernel_size", kernel_size)
    dilation = _pair_param("dilation", dilation)
    padding = _pair_param("padding", padding)
    stride = _pair_param("stride", stride)
    _check_fold_params(kernel_size, dilation, padding, stride)
    shape = input.shape
    if input.dim() not in (3, 4) or any(s == 0 for s in shape[-3:]):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: "
                           f"{_shape_str(shape)}")
    blocks = _output_sizes(shape[-2:], kernel_size, stride, padding, dilation)
    if any(b < 1 for b in blocks):
        raise RuntimeError(f"Given input with spatial size ({shape[-2]}, {shape[-1]}), "
                           f"kernel_size=({kernel_size[0]}, {kernel_size[1]}), dilation="
                           f"({dilation[0]}, {dilation[1]}), padding=({padding[0]}, "
                           f"{padding[1]}), calculated shape of the array of sliding blocks "
                           f"as ({blocks[0]}, {blocks[1]}), but its components must be at "
                           f"least one.")
    return structured.run(IM2COL, (input,), {"kernel_size": kernel_size, "dilation": dilation,
                                             "padding": padding, "stride": stride})


def _col2im(input, output_size, kernel_size, dilation, padding, stride):
    """F.fold's computation on a 2-D or 3-D tensor."""
    output_size = _pair_param("output_size", output_size)
    kernel_size = _pair_param("kernel_size", kernel_size)
    dilation = _pair_param("dilation", dilation)
    padding = _pair_param("padding", padding)
    stride = _pair_param("stride", stride)
    _check_fold_params(kernel_size, dilation, padding, stride)
    shape = input.shape
    if input.dim() not in (2, 3) or any(s == 0 for s in shape[-2:]):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{_shape_str(shape)}")
    k = kernel_size[0] * kernel_size[1]
    if shape[-2] % k:
        raise RuntimeError(f"Expected size of input's dimension {input.dim() - 2} to be "
                           f"divisible by the product of kernel_size, but got input.size("
                           f"{input.dim() - 2})={shape[-2]} and kernel_size=({kernel_size[0]}, "
                           f"{kernel_size[1]}).")
    blocks = _output_sizes(output_size, kernel_size, stride, padding, dilation)
    if any(b < 1 for b in blocks) or blocks[0] * blocks[1] != shape[-1]:
        raise RuntimeError(f"Given output_size=({output_size[0]}, {output_size[1]}), "
                           f"kernel_size=({kernel_size[0]}, {kernel_size[1]}), dilation="
                           f"({dilation[0]}, {dilation[1]}), padding=({padding[0]}, "
                           f"{padding[1]}), stride=({stride[0]}, {stride[1]}), expected size "
                           f"of input's dimension {input.dim() - 1} to match the calculated "
                           f"number of sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{blocks[0] * blocks[1]}, but got input.size({input.dim() - 1})="
                           f"{shape[-1]}.")
    return structured.run(COL2IM, (input,), {"output_size": output_size,
                                             "kernel_size": kernel_size, "dilation": dilation,
                                             "padding": padding, "stride": stride})


# --- padding ------------------------------------------------------------------------------------

def pad_value(value, dtype):
    """The element of NumPy `dtype` that constant padding writes for `value`: integers take
    the value truncated toward zero (2.7 -> 2), as a C cast does."""
    fill = bool(value) if dtype.kind == "b" else (int(value) if dtype.kind in "iu" else value)
    return np.full((), fill, dtype=dtype)


def constant_pad_kernel(input, pad, value):
    """Pad (or, for negative amounts, crop) the last len(pad)//2 dims; pad lists the last dim
    first: (last_before, last_after, second_last_before, ...)."""
    nd = len(pad) // 2
    widths = [(0, 0)] * (input.ndim - nd)
    crops = [slice(None)] * (input.ndim - nd)
    for i in reversed(range(nd)):
        before, after = pad[2 * i], pad[2 * i + 1]
        widths.append((max(before, 0), max(after, 0)))
        size = input.shape[input.ndim - 1 - i]
        crops.append(slice(max(-before, 0), size - max(-after, 0)))
    cropped = input[tuple(crops)]
    if not any(w != (0, 0) for w in widths):
        return cropped.copy()
    # The value everywhere, then the input in the middle (what np.pad does, at 3/4 its time).
    shape = tuple(n + before + after for n, (before, after) in zip(cropped.shape, widths))
    result = np.full(shape, pad_value(value, input.dtype))
    result[tuple(slice(before, before + n) for n, (before, _) in zip(cropped.shape, widths))] \
        = cropped
    return result


CONSTANT_PAD_ND = structured.declare("constant_pad_nd", constant_pad_kernel, family=_FAMILY,
                                     params={"pad": None, "value": 0}, layout="suggested")


def _check_pad_length(input, pad):
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * input.dim():
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {input.dim()}")


def _pad_list(pad):
    try:
        return tuple(_pad_amount(p) for p in pad)
    except TypeError as exc:
        raise TypeError(f"pad(): argument 'pad' must be tuple of ints ({exc})") from None


def _pad_amount(p):
    if type(p) is int:   # the common case, before the slower checks (an ABC's isinstance)
        return p
    if isinstance(p, Tensor):
        return int(p.item())
    if isinstance(p, bool) or not isinstance(p, numbers.Integral):
        raise TypeError(f"type must be tuple of ints, but got {type(p).__name__}")
    return int(p)


def constant_pad_nd(input, pad, value=0):
    """torch.constant_pad_nd: pad with `value`; negative amounts crop."""
    pad = _pad_list(pad)
    _check_pad_length(input, pad)
    nd = len(pad) // 2
    for i in range(nd):
        size = input.shape[input.dim() - 1 - i]
        if size + pad[2 * i] + pad[2 * i + 1] < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
    _check_fill_value(value, input.dtype)
    return structured.run(CONSTANT_PAD_ND, (input,), {"pad": pad, "value": value})


def _check_fill_value(value, dtype):
    """An integer tensor cannot hold NaN, infinity or a number outside its range."""
    if isinstance(value, Tensor):
        value = value.item()
    if dtype.category is not D.Category.INTEGER or isinstance(value, bool):
        return
    info = np.iinfo(dtype.numpy_dtype)
    if isinstance(value, complex) or not math.isfinite(value) or \
            not info.min <= int(value) <= info.max:
        from .blas import _CONVERSION_NAMES
        raise RuntimeError(f"value cannot be converted to type {_CONVERSION_NAMES[dtype]} "
                           f"without overflow")


def _source_index(size, before, after, mode):
    """For each output position along one dim, the input position it copies (reflect or
    replicate); negative amounts crop, like PyTorch's kernels."""
    positions = np.arange(-before, size + after)
    if mode == "reflect":
        positions = np.abs(positions)                         # reflect about 0 ...
        positions = (size - 1) - np.abs((size - 1) - positions)   # ... and about size-1
    else:
        positions = np.clip(positions, 0, size - 1)
    return positions


def index_pad_kernel(input, padding, mode):
    """Reflect / replicate the last len(padding)//2 dims (padding lists the last dim first)."""
    nd = len(padding) // 2
    out = input
    for i in range(nd):
        axis = input.ndim - 1 - i
        index = _source_index(input.shape[axis], padding[2 * i], padding[2 * i + 1], mode)
        out = np.take(out, index, axis=axis)
    return out


def index_pad_backward_kernel(grad, input_shape, padding, mode):
    """Adjoint of index_pad_kernel: each output gradient is added to the input position it
    was copied from (np.add.at, since edge positions receive several)."""
    nd = len(padding) // 2
    result = grad
    for i in range(nd):
        axis = grad.ndim - 1 - i
        size = input_shape[axis]
        index = _source_index(size, padding[2 * i], padding[2 * i + 1], mode)
        shape = list(result.shape)
        shape[axis] = size
        summed = np.zeros(shape, dtype=result.dtype)
        np.add.at(summed, (slice(None),) * axis + (index,), result)
        result = summed
    return result


def _declare_index_pads():
    ops = {}
    for mode, prefix in (("reflect", "reflection"), ("replicate", "replication")):
        for nd in (1, 2, 3):
            name = f"{prefix}_pad{nd}d"

            def forward(input, padding, _mode=mode):
                return index_pad_kernel(input, padding, _mode)

            def backward(grad, input_shape, padding, _mode=mode):
                return index_pad_backward_kernel(grad, input_shape, padding, _mode)
            forward.__name__, backward.__name__ = name, name + "_backward"
            ops[name] = structured.declare(name, forward, family=_FAMILY,
                                           params={"padding": None})
            ops[name + "_backward"] = structured.declare(
                name + "_backward", backward, family=_FAMILY,
                params={"input_shape": None, "padding": None})
    return ops


INDEX_PADS = _declare_index_pads()


def index_pad(input, padding, mode):
    """reflection_padNd / replication_padNd, with PyTorch's checks."""
    nd = len(padding) // 2
    prefix = "reflection" if mode == "reflect" else "replication"
    name = f"{prefix}_pad{nd}d"
    if input.dtype == D.bool:
        raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")
    spatial = input.shape[-nd:]
    # Only a leading batch dim may be empty.
    if any(s == 0 for s in input.shape[input.dim() - nd - 1:]):
        dims = f"{nd + 1}D or {nd + 2}D"
        raise RuntimeError(f"Expected {dims} (batch mode) tensor with possibly 0 batch size and "
                           f"other non-zero dimensions for input, but got: "
                           f"{_shape_str(input.shape)}")
    for i in range(nd):
        size = spatial[nd - 1 - i]
        before, after = padding[2 * i], padding[2 * i + 1]
        if mode == "reflect" and (before >= size or after >= size):
            dim = input.dim() - 1 - i
            raise RuntimeError(f"Argument #{2 + 2 * nd}: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({before}, "
                               f"{after}) at dimension {dim} of input "
                               f"{_shape_str(input.shape)}")
        if size + before + after < (1 if mode == "replicate" and nd == 1 else 0):
            raise RuntimeError(f"input (W: {size}) is too small. Calculated output W: "
                               f"{size + before + after}")
    return structured.run(INDEX_PADS[name], (input,), {"padding": tuple(padding)})


def index_pad_backward(grad, input_shape, padding, name):
    return structured.run(INDEX_PADS[name + "_backward"], (grad,),
                          {"input_shape": tuple(input_shape), "padding": tuple(padding)})


def circular_pad(input, padding):
    """Circular padding as PyTorch composes it: crop negative amounts first, then copy the
    (cropped) input into the middle of a new tensor and each wrapped edge from the opposite
    side. The copies are slice assignments, so the result's node is CopySlices."""
    nd = len(padding) // 2
    for i in range(nd):
        axis = input.dim() - 1 - i
        before, after = padding[2 * i], padding[2 * i + 1]
        size = input.shape[axis] + min(before, 0) + min(after, 0)
        if size < 0:
            raise RuntimeError("Negative padding value is resulting in an empty dimension")
        if before > size or after > size:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        input = input.narrow(axis, max(-before, 0), size)
    shape = list(input.shape)
    for i in range(nd):
        shape[input.dim() - 1 - i] += max(padding[2 * i], 0) + max(padding[2 * i + 1], 0)
    out = input.new_empty(shape)
    middle = [slice(None)] * input.dim()
    for i in range(nd):
        axis = input.dim() - 1 - i
        before = max(padding[2 * i], 0)
        middle[axis] = slice(before, before + input.shape[axis])
    out[tuple(middle)] = input
    # Wrap one dim at a time over the whole extent of the dims already done, so corners
    # come out right (they copy already-wrapped values).
    for i in range(nd):
        axis = input.dim() - 1 - i
        before, after = max(padding[2 * i], 0), max(padding[2 * i + 1], 0)
        size = input.shape[axis]
        full = [slice(None)] * input.dim()
        for j in range(i + 1, nd):      # dims not yet wrapped: only their middle is valid
            other = input.dim() - 1 - j
            full[other] = middle[other]
        if before:
            dst, src = list(full), list(full)
            dst[axis], src[axis] = slice(0, before), slice(size, size + before)
            out[tuple(dst)] = out[tuple(src)]
        if after:
            dst, src = list(full), list(full)
            end = before + size
            dst[axis], src[axis] = slice(end, end + after), slice(before, before + after)
            out[tuple(dst)] = out[tuple(src)]
    return out

