"""convolution (2-D, and 1-D as 2-D of height 1; plain and transposed, any stride, padding,
dilation and groups, optional bias) and convolution_backward_weight on cuda (kernels/conv.cu),
for float32, float64, float16 and bfloat16.

Each is an implicit GEMM through gemm.cu's product bodies: per image and group, the output is
weight (Og x Cg*KH*KW) times the image's im2col matrix (Cg*KH*KW x OH*OW), whose elements
the tile loader computes from the image on the fly (zeros in the padding), so no im2col
matrix is built. A transposed convolution (how autograd's input gradient of a convolution
arrives) gathers, for each output position and tap, the one input element that reaches it
(zero where the stride leaves a gap). The weight gradient is, per group, the output gradient
(Og x N*OH*OW) times the image's windows (N*OH*OW x Cg*KH*KW). Operands are read through
their strides (non-contiguous inputs need no copy); results are new contiguous tensors.

Numerical contract: float32/float64 outputs are each one fused multiply-add chain over
(c, kh, kw) (weight gradient: over (n, oy, ox)) in that row-major order from +0, then
+ bias once; the result depends on the shapes alone. 16-bit types: float32 tensor-core sums,
+ bias in float32, rounded once (as the reference computes in float32). The reference sums
in NumPy's (BLAS's) order, so results agree within a rounding bound of K = Cg*KH*KW (weight
gradient: N*OH*OW) terms, and bit for bit on small-integer data. One difference: the
GEMM multiplies every weight tap by a loaded zero where a transposed convolution's tap reaches
no input element (a stride gap or past the border), so an infinite or NaN weight gives NaN
at those outputs too, where the reference (which adds only the products that exist) keeps
them finite. Plain convolutions and the weight gradient multiply padding zeros in the
reference as well, so they agree on non-finite values.

Declined (the reference runs through the counted fallback): 3-D convolutions, mixed dtypes or
devices, negative strides, problems with an index of 2**31 or more, a 16-bit transposed
convolution whose output_padding reaches the stride (the reference then rounds every
product to 16 bits), float16/bfloat16 below sm_80, and a weight gradient whose gradient has
more positions than the windows.
"""
from __future__ import annotations

import ctypes
import struct

from reftorch._tensor import Tensor

from .kernel_base import FLOAT_DTYPES, FLOAT_TYPES, Program, on_one_cuda_device, pointer
from .ops_gemm import MAX_GRID_YZ, TENSOR_CORE, THREADS, TILES, _has_mma

KINDS = ("ConvForward", "ConvTransposed", "ConvWeightGrad")
# ConvArgs: int64 batch, m, n, k, groups, group_in, group_out, in_h, in_w, out_h, out_w,
# kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, x_strides[4],
# f_strides[4], out_strides[4], bias_stride; int32 has_bias, unused.
CONV_ARGS = struct.Struct("=32q2i")
INDEX_LIMIT = 2 ** 31   # the kernels split indices in 32-bit arithmetic


def expression(kind, dtype_name):
    return f"conv_kernel<{FLOAT_TYPES[dtype_name]}, {kind}>"


CONV = Program("conv.cu", tuple(expression(kind, name) for kind in KINDS for name in FLOAT_TYPES),
               includes=("gemm.cu",))
PROGRAMS = (CONV,)


class _Args(ctypes.Structure):
    """ConvArgs as one opaque, 8-aligned block of bytes (the launch copies it)."""
    _fields_ = [("raw", ctypes.c_int64 * (CONV_ARGS.size // 8))]


def conv_args(product, groups, group_in, group_out, in_size, out_size, kernel, stride, padding,
              dilation, x_strides, f_strides, out_strides, bias_stride, has_bias):
    raw = CONV_ARGS.pack(*product, groups, group_in, group_out, *in_size, *out_size, *kernel,
                         *stride, *padding, *dilation, *x_strides, *f_strides, *out_strides,
                         bias_stride, int(has_bias), 0)
    return _Args.from_buffer_copy(raw)


def _as_2d(t):
    """(shape, strides) of a 4-D tensor, or of a 3-D one as 4-D with a unit height."""
    if t.ndim == 4:
        return tuple(t._shape), tuple(t._strides)
    n, c, length = t._shape
    return (n, c, 1, length), (t._strides[0], t._strides[1], 0, t._strides[2])


def _spatial(params, nd):
    """stride, padding, dilation as (height, width) pairs (1-D: height 1, 0, 1)."""
    def pair(name, unit):
        values = tuple(params[name])
        return values if nd == 2 else (unit,) + values
    return pair("stride", 1), pair("padding", 0), pair("dilation", 1)


def _fits(*values):
    return max(values) < INDEX_LIMIT


def _coordinates_fit(in_size, out_size, kernel, stride, padding, dilation):
    """Every row/column coordinate the kernels form (window starts, taps, gaps) is below
    2**31 in magnitude."""
    return all(_fits(o * s + i + 2 * p + d * k + s)
               for i, o, k, s, p, d in zip(in_size, out_size, kernel, stride, padding, dilation))


def _usable(tensors, dtype):
    return all(t.dtype is dtype and min(t._strides, default=0) >= 0 for t in tensors) and \
        on_one_cuda_device(tensors) and \
        (dtype.name not in TENSOR_CORE or _has_mma(tensors[0]._storage))


def _launch(kind, dtype, result, product, args, x, f, bias):
    batch, m, n, _k = product
    tile_m, tile_n = TILES[dtype.name]
    grid = (-(-n // tile_n), -(-m // tile_m), min(batch, MAX_GRID_YZ))
    storage = result._storage
    storage._driver.launch_grid(storage._index, CONV, expression(kind, dtype.name), grid,
                                (THREADS, 1, 1), 0,
                                (args, pointer(result), pointer(x), pointer(f),
                                 pointer(bias) if bias is not None else ctypes.c_uint64(0)))


def convolution_kernel(out, inputs, dtypes, params):
    """convolution: plain or transposed, 1-D or 2-D, or NotImplemented."""
    if len(inputs) != 3:
        return NotImplemented
    x, weight, bias = inputs
    dtype = x.dtype
    if dtype.name not in FLOAT_TYPES or x.ndim not in (3, 4) or weight.ndim != x.ndim:
        return NotImplemented
    if bias is not None and bias.ndim != 1:
        return NotImplemented
    if not _usable((x, weight) if bias is None else (x, weight, bias), dtype):
        return NotImplemented
    nd, groups = x.ndim - 2, params.get("groups", 1)
    stride, padding, dilation = _spatial(params, nd)
    (n, c, h, w), x_strides = _as_2d(x)
    w_shape, w_strides = _as_2d(weight)
    kernel = w_shape[2:]
    if params.get("transposed"):
        output_padding = tuple(params["output_padding"])
        output_padding = output_padding if nd == 2 else (0,) + output_padding
        if dtype.name in TENSOR_CORE and any(op >= s for op, s in zip(output_padding, stride)):
            return NotImplemented      # the reference rounds each product to 16 bits there
        kind, group_in, group_out = "ConvTransposed", c // groups, w_shape[1]
        out_size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                         zip((h, w), stride, padding, dilation, kernel, output_padding))
    else:
        kind, group_in, group_out = "ConvForward", w_shape[1], w_shape[0] // groups
        out_size = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                         zip((h, w), stride, padding, dilation, kernel))
    shape = (n, group_out * groups) + (out_size if nd == 2 else out_size[1:])
    product = (n * groups, group_out, out_size[0] * out_size[1],
               group_in * kernel[0] * kernel[1])
    if not (_fits(*product[1:], c, h, w) and
            _coordinates_fit((h, w), out_size, kernel, stride, padding, dilation)):
        return NotImplemented
    result = Tensor._empty(shape, dtype, x.device)
    if result.numel() == 0:
        return result
    _, out_strides = _as_2d(result)
    args = conv_args(product, groups, group_in, group_out, (h, w), out_size, kernel, stride,
                     padding, dilation, x_strides, w_strides, out_strides,
                     0 if bias is None else bias._strides[0], bias is not None)
    _launch(kind, dtype, result, product, args, x, weight, bias)
    return result


convolution_kernel.__name__ = convolution_kernel.__qualname__ = "cuda_convolution"


def weight_grad_kernel(out, inputs, dtypes, params):
    """convolution_backward_weight of a 1-D or 2-D convolution, or NotImplemented."""
    if len(inputs) != 2:
        return NotImplemented
    x, grad = inputs
    dtype, weight_shape = x.dtype, tuple(params["weight_shape"])
    if dtype.name not in FLOAT_TYPES or x.ndim not in (3, 4) or grad.ndim != x.ndim or \
            len(weight_shape) != x.ndim or not _usable((x, grad), dtype):
        return NotImplemented
    nd, groups = x.ndim - 2, params.get("groups", 1)
    stride, padding, dilation = _spatial(params, nd)
    (n, c, h, w), x_strides = _as_2d(x)
    (_, o, oh, ow), grad_strides = _as_2d(grad)
    kernel = (1,) + weight_shape[2:] if nd == 1 else weight_shape[2:]
    windows = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                    zip((h, w), stride, padding, dilation, kernel))
    group_in = weight_shape[1]
    if o != weight_shape[0] or c != group_in * groups or oh > windows[0] or ow > windows[1]:
        return NotImplemented
    product = (groups, o // groups, group_in * kernel[0] * kernel[1], n * oh * ow)
    if not (_fits(*product[1:], c, h, w) and
            _coordinates_fit((h, w), (oh, ow), kernel, stride, padding, dilation)):
        return NotImplemented
    result = Tensor._empty(weight_shape, dtype, x.device)
    if result.numel() == 0:
        return result
    _, out_strides = _as_2d(result)
    args = conv_args(product, groups, group_in, o // groups, (h, w), (oh, ow), kernel, stride,
                     padding, dilation, x_strides, grad_strides, out_strides, 0, False)
    _launch("ConvWeightGrad", dtype, result, product, args, x, grad, None)
    return result


weight_grad_kernel.__name__ = weight_grad_kernel.__qualname__ = "cuda_convolution_backward_weight"


def register_kernels(registrar):
    registrar.kernel("convolution", "cuda", FLOAT_DTYPES, convolution_kernel)
    registrar.kernel("convolution_backward_weight", "cuda", FLOAT_DTYPES, weight_grad_kernel)
