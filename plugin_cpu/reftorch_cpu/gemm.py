"""reftorch_cpu kernels: mm, bmm, addmm, baddbmm, two-operand einsum (and so tensordot) and
convolutions for float32 and float64 on cpu.

The products run through one C routine (`_gemm.gemm`, src/gemm.c): a packed, blocked,
register-tiled product with AVX-512 / AVX2+FMA / plain-C micro-kernels, computing
`out[b] = alpha * (a[b] @ b[b]) + beta * input[b]` for each matrix of a batch. Operands may
be transposed, sliced with a step or broadcast (the packing reads any non-negative strides);
the result is a new contiguous tensor, as the reference's is. `convolution` (2-D) uses the
same driver through `_gemm.conv2d`: per image, weight @ im2col(x), with the im2col matrix
never built (the packing reads the image), the bias added last. A transposed convolution
(a convolution's input gradient) is either the plain convolution of the flipped weight
(stride 1) or a product giving the columns weight^T @ x[n], added back by `_gemm.col2im`,
whichever moves fewer elements. `convolution_backward_weight` (2-D) is one product through
`_gemm.conv2d_weight_grad`: the sum over images of grad[n] @ im2col(x[n])^T. A 1-D
convolution (and its weight gradient) is the 2-D one of height 1; a 3-D one a 2-D one over
its output depth positions (see "3-D convolutions" below); a grouped one runs one
convolution per group on views of the group's channels, the results joined along the
channels; a depthwise one (one filter per channel) runs directly in src/depthwise.c, forward,
weight gradient and input gradient (at stride 1 the flipped filters' convolution, at other
strides a scatter).

Rounding: the reference is NumPy's matmul (OpenBLAS), whose summation order differs from
ours, so results agree within a few ulps times sqrt(K), not bit for bit. Ours is fixed by K
alone: each element is one FMA chain per K slice (slices of at most 256), slices added in
order; the thread count never changes it. A product of at most 16 rows whose operands both
run along K (x @ W^T) is computed as dot products of rows instead (one FMA chain per lane of
16 floats / 8 doubles, lanes added as a tree), an order also fixed by K alone. alpha and beta are applied afterwards exactly as
the reference applies them (product * alpha, then + input * beta; beta == 0 never reads the
input, so its NaN does not propagate).

Declined (the reference runs): other dtypes, mixed dtypes, non-cpu or negative-stride
operands, addmm / baddbmm with alpha == 0 where the reference skips the product, small
products (fewer than MIN_FLOPS multiply-adds), where the Python side of the call costs more
than NumPy's whole product, and skinny ones (fewer than MIN_SIDE rows or columns), where
OpenBLAS's matrix-vector code wins. Convolution: 1-D or 2-D (3-D or 4-D input), non-empty, a
weight whose (C, KH, KW) dims collapse into one stride (any weight when transposed), bias a
vector; transposed: an output_padding below the stride. Weight gradient: 1-D, 2-D or
3-D, a gradient covering every output position.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from reftorch import _dtype as D
from reftorch._shape import contiguous_strides
from reftorch._tensor import Tensor
from reftorch.plugins import size_threshold
from reftorch_plugins.geometry import broadcast_strides

from . import _depthwise, _gemm
from .kernels import _on_cpu_as

DTYPES = (D.float32, D.float64)

# Products with fewer multiply-adds (M*N*K per matrix times the batch) go to the reference.
# A plugin call costs about 3 us of Python (checks, strides, the result allocation) on top of
# reftorch's own ~20 us per op; NumPy's matmul of small matrices costs about as much. Measured
# on a 2-core x86-64 (best of 3000 runs, shared and noisy machine, float32 mm through
# reftorch.mm): 8^3 plugin 21.9 us vs reference 25.1, 16^3 22.5 vs 25.7, 32^3 26.8 vs 29.6,
# 48^3 32.2 vs 32.4, 64^3 34.4 vs 32.7 (float64 alike): from 16^3 on the plugin is never
# clearly slower, and from 128^3 clearly faster (2 threads).
MIN_FLOPS = 4096

# Products with fewer rows or columns than this go to the reference: the micro-kernel always
# computes whole 14 x 32 (float32, AVX-512) tiles, so a 1-row product does 14x the work, and
# OpenBLAS switches to matrix-vector code there. Measured (1 thread, float32, K = 1024):
# M = 1: plugin 712 us vs reference 218; M = 8: 754 vs 963; N = 1: 1463 vs 260; N = 16:
# 1598 vs 808; (1024, 1024, K = 4): 334 vs 1107. From 8 on the plugin serves the product even
# where OpenBLAS alone is up to 2x faster (a 10-class head: 256 x 512 @ 512 x 10, 150 vs 86
# us): OpenBLAS's threads spin for a while after each call and take the core from the
# plugin's threads: an MLP training step (784-512-512-10, batch 256, 2 threads, a noisy
# machine; four interleaved runs of 30 steps each) took 12.7-18.3 ms (median 15.7) with the
# head on OpenBLAS, 8.1-17.7 ms (median 11.8) with it here.
# A product of at most _gemm.DOT_MAX_M rows whose operands both run along K (x @ W^T, the
# layout of nn.Linear) is served from one row: src/gemm.c computes it as dot products of
# rows, without packing W.
MIN_SIDE = 8

def register(registrar):
    """Register every kernel with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("mm", "cpu", DTYPES, mm_kernel)
    registrar.kernel("bmm", "cpu", DTYPES, mm_kernel)
    registrar.kernel("addmm", "cpu", DTYPES, addmm_kernel)
    registrar.kernel("baddbmm", "cpu", DTYPES, addmm_kernel)
    registrar.kernel("convolution", "cpu", DTYPES, convolution_kernel)
    registrar.kernel("convolution_backward_weight", "cpu", DTYPES, weight_grad_kernel)
    registrar.kernel("einsum", "cpu", DTYPES, einsum_kernel)


def mm_kernel(out, inputs, dtypes, params):
    """mm / bmm: a @ b, or NotImplemented to decline."""
    if len(inputs) != 2:
        return NotImplemented
    return _product(inputs[0], inputs[1], None, 1.0, 0.0, dtypes[0])


def addmm_kernel(out, inputs, dtypes, params):
    """addmm / baddbmm: beta * input + alpha * (a @ b), or NotImplemented to decline."""
    if len(inputs) != 3:
        return NotImplemented
    alpha, beta = params.get("alpha", 1), params.get("beta", 1)
    if type(alpha) not in (int, float) or type(beta) not in (int, float):
        return NotImplemented          # complex scalars: the reference's business
    if alpha == 0 and params.get("skip_zero_alpha"):
        return NotImplemented          # the reference does not read a and b then: rare, keep it
    return _product(inputs[1], inputs[2], inputs[0], float(alpha), float(beta), dtypes[0])


def einsum_kernel(out, inputs, dtypes, params):
    """A two-operand einsum (tensordot too) as one batched product, as PyTorch computes it:
    the labels both operands and the output share are the batch, those only one operand and
    the output have are the rows (a) or columns (b), those summed away the product's K. Each
    group's dims are merged into one strided dim (a copy in that order where they do not
    merge); the result is the (batch, rows, columns) product viewed in the output's label
    order. Declined: other counts of operands, a label repeated in one term (a diagonal) or
    summed over one operand only, and products the size thresholds leave to the reference."""
    if len(inputs) != 2:
        return NotImplemented
    a, b = inputs
    dtype = dtypes[0]
    if dtype not in DTYPES or not (_on_cpu_as(a, dtype) and _on_cpu_as(b, dtype)):
        return NotImplemented
    plan = _einsum_plan(params["equation"], a._shape, a._strides, b._shape, b._strides)
    if plan is None:
        return NotImplemented
    sizes, a_plan, b_plan, out_shape, out_strides = plan
    batch_n, m, n, k = sizes
    if batch_n * m * n * k < size_threshold(MIN_EINSUM_FLOPS) or \
            min(m, n) < size_threshold(MIN_SIDE) or k < size_threshold(2):
        return NotImplemented
    a_array, a_offset, a_strides = _merged_operand(a, a_plan)
    b_array, b_offset, b_strides = _merged_operand(b, b_plan)
    product = Tensor._empty((batch_n, m, n), dtype)
    _gemm.gemm(sizes, product._storage.array, 0, product._strides,
               a_array, a_offset, a_strides, b_array, b_offset, b_strides,
               1.0, 0.0, None, 0, (0, 0, 0))
    return Tensor._make(product._storage, 0, out_shape, out_strides)


# Two-operand einsums with fewer multiply-adds go to the reference: the label analysis and
# the product's call cost about 10 us more than mm's (measured on a 2-core x86-64, float32
# 'ij,jk->ik': 24^3 plugin 25 vs reference 19 us, 32^3 26 vs 22, 48^3 28 vs 32).
MIN_EINSUM_FLOPS = 48 ** 3


@functools.lru_cache(maxsize=1024)
def _einsum_plan(equation, shape_a, strides_a, shape_b, strides_b):
    """For einsum_kernel, worked out once per equation and layout: the product's sizes
    (batch, M, N, K), each operand's plan (_operand_plan), the result's shape and strides;
    or None when the equation is not one batched product."""
    terms, output = equation.split("->")
    term_a, term_b = terms.split(",")
    if len(set(term_a)) != len(term_a) or len(set(term_b)) != len(term_b) or \
            any(c not in term_b and c not in output for c in term_a) or \
            any(c not in term_a and c not in output for c in term_b):
        return None
    batch = [c for c in output if c in term_a and c in term_b]
    rows = [c for c in output if c in term_a and c not in term_b]
    columns = [c for c in output if c in term_b and c not in term_a]
    summed = [c for c in term_a if c in term_b and c not in output]
    size = dict(zip(term_a, shape_a))
    size.update(zip(term_b, shape_b))
    sizes = tuple(math.prod(size[c] for c in group) for group in (batch, rows, columns, summed))
    made = batch + rows + columns           # the product's label order, row-major
    made_strides = contiguous_strides(tuple(size[c] for c in made))
    return (sizes, _operand_plan(term_a, shape_a, strides_a, (batch, rows, summed)),
            _operand_plan(term_b, shape_b, strides_b, (batch, summed, columns)),
            tuple(size[c] for c in output), tuple(made_strides[made.index(c)] for c in output))


def _operand_plan(term, shape, strides, groups):
    """("strides", one stride per label group) when each group's dims merge into one strided
    dim in the operand's own layout; else ("copy", the dims in the groups' order, the
    groups' sizes), for a row-major copy in that order."""
    merged = []
    for group in groups:
        dims = [term.index(c) for c in group]
        stride = _collapsed_stride([shape[d] for d in dims], [strides[d] for d in dims])
        if stride is None:
            order = tuple(term.index(c) for group in groups for c in group)
            sizes = tuple(math.prod(shape[term.index(c)] for c in group) for group in groups)
            return "copy", order, sizes
        merged.append(stride)
    return "strides", tuple(merged)


def _merged_operand(t, plan):
    """(buffer, offset, one stride per label group) of t, following its _operand_plan."""
    if plan[0] == "strides":
        return t._storage.array, t._offset, plan[1]
    _, order, sizes = plan
    copy = np.ascontiguousarray(t._np.transpose(order))
    return copy.reshape(-1), 0, contiguous_strides(sizes)


def convolution_kernel(out, inputs, dtypes, params):
    """A 1-D, 2-D or 3-D convolution (plain or transposed), all through the 2-D one
    (_convolution_2d): a grouped one as one convolution per group, a 1-D one as the 2-D one
    of height 1, a 3-D one as a 2-D one over its depth positions (_convolution_3d). Anything
    else is declined."""
    if len(inputs) != 3:
        return NotImplemented
    x, weight, bias = inputs
    if len(x._shape) not in (3, 4, 5) or len(weight._shape) != len(x._shape):
        return NotImplemented
    groups = params.get("groups", 1)
    if groups == 1:
        return _CONVOLUTIONS[len(x._shape)](x, weight, bias, dtypes, params)
    if _is_depthwise(x, weight, groups):
        result = _depthwise_2d(x, weight, bias, dtypes[0], params)
        if result is not NotImplemented:
            return result
    # weight (O, C/G, ...) or, transposed, (C, O/G, ...): its dim 0 is split into the groups
    if x._shape[1] % groups or weight._shape[0] % groups:
        return NotImplemented
    in_group, w_group = x._shape[1] // groups, weight._shape[0] // groups
    out_group = weight._shape[1] if params.get("transposed") else w_group
    one_group = dict(params, groups=1)
    convolution = _CONVOLUTIONS[len(x._shape)]
    return _side_by_side(1, [
        convolution(_narrowed(x, 1, g * in_group, in_group),
                    _narrowed(weight, 0, g * w_group, w_group),
                    None if bias is None else _narrowed(bias, 0, g * out_group, out_group),
                    dtypes, one_group)
        for g in range(groups)])


def _convolution_1d(x, weight, bias, dtypes, params):
    return _without_height(_convolution_2d(_with_height(x), _with_height(weight), bias, dtypes,
                                           _params_2d(params)))


def _convolution_2d(x, weight, bias, dtypes, params):
    """2-D convolution, groups 1: per image, weight (O, C*KH*KW) @ im2col(x), the im2col
    matrix never built (the C packing reads x). Bias is added last, as the reference adds it.
    A transposed convolution with stride 1 (the input gradient of any stride-1 convolution)
    is the plain one of the flipped, channel-swapped weight. Anything else is declined."""
    dtype = dtypes[0]
    if dtype not in DTYPES or not (_on_cpu_as(x, dtype) and _on_cpu_as(weight, dtype)):
        return NotImplemented
    if bias is not None and not (_on_cpu_as(bias, dtype) and len(bias._shape) == 1):
        return NotImplemented
    stride, padding, dilation = params["stride"], params["padding"], params["dilation"]
    if len(stride) != 2 or min(x._strides) < 0:
        return NotImplemented
    if params.get("transposed"):
        output_padding = params["output_padding"]
        plain = None if _col2im_moves_less(x, weight, stride, padding, dilation,
                                           output_padding) \
            else _as_plain_convolution(weight, stride, padding, dilation, output_padding)
        if plain is None:
            return _transposed_by_col2im(x, weight, bias, stride, padding, dilation,
                                         output_padding, dtype)
        (w_array, w_offset, w_strides), padding = plain
        o, wc, kh, kw = weight._shape[1], weight._shape[0], weight._shape[2], weight._shape[3]
    else:
        o, wc, kh, kw = weight._shape
        # The weight as an (O, C*KH*KW) matrix: its last three dims must collapse into one.
        k_stride = _collapsed_stride(weight._shape[1:], weight._strides[1:])
        if k_stride is None or weight._strides[0] < 0:
            return NotImplemented
        w_array, w_offset, w_strides = (weight._storage.array, weight._offset,
                                        (weight._strides[0], k_stride))
    n, c, h, w = x._shape
    out_size = _output_size((h, w), (kh, kw), stride, padding, dilation)
    if wc != c or min(n, c, h, w, o) == 0 or min(out_size) <= 0 or \
            n * o * out_size[0] * out_size[1] * c * kh * kw < size_threshold(MIN_FLOPS):
        return NotImplemented
    result = Tensor._empty((n, o) + out_size, dtype)
    _gemm.conv2d(result._storage.array, result._offset, x._storage.array, x._offset,
                 tuple(x._shape), tuple(x._strides), w_array, w_offset, w_strides, o,
                 (kh, kw), out_size, tuple(stride), tuple(padding), tuple(dilation),
                 *_bias_args(bias))
    return result


def _as_plain_convolution(weight, stride, padding, dilation, output_padding):
    """A stride-1 transposed convolution as a plain one: ((weight array, offset, strides),
    padding), or None. Output tap i of the transposed convolution gathers input taps the
    plain convolution reaches with the kernel flipped, its in and out channels swapped and
    padding dilation * (k - 1) - padding (which must not be negative)."""
    kernel = weight._shape[2:]
    if any(s != 1 for s in stride) or any(output_padding) or min(weight._strides) < 0:
        return None
    plain_padding = tuple(d * (k - 1) - p for k, p, d in zip(kernel, padding, dilation))
    if min(plain_padding) < 0:
        return None
    flipped = np.ascontiguousarray(weight._np[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    c_k = flipped.shape[1] * flipped.shape[2] * flipped.shape[3]
    return (flipped.reshape(-1), 0, (c_k, 1)), plain_padding


def _transposed_output_size(x, weight, stride, padding, dilation, output_padding):
    return tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, k, s, p, d, op in
                 zip(x._shape[2:], weight._shape[2:], stride, padding, dilation,
                     output_padding))


def _col2im_moves_less(x, weight, stride, padding, dilation, output_padding):
    """Whether col2im's columns (written, then read: 2 * C_out*K*K*IH*IW per image) are
    fewer elements than the flipped convolution's im2col packing (C_in*K*K*OH*OW): so when
    the transposed convolution narrows the channels (LeNet's input gradients), not for
    equal channels (ResNet's)."""
    out_size = _transposed_output_size(x, weight, stride, padding, dilation, output_padding)
    c_in, c_out = weight._shape[0], weight._shape[1]
    return 2 * c_out * x._shape[2] * x._shape[3] < c_in * out_size[0] * out_size[1]


def _transposed_by_col2im(x, weight, bias, stride, padding, dilation, output_padding, dtype):
    """A transposed convolution: per image, the columns weight^T (C_out*K*K x C_in) @ x[n]
    (C_in x IH*IW), one batched product, then their col2im (each column added at the output
    positions a convolution of the output would read it from), the bias last."""
    n, c_in, ih, iw = x._shape
    c_out, kernel = weight._shape[1], tuple(weight._shape[2:])
    out_size = _transposed_output_size(x, weight, stride, padding, dilation, output_padding)
    # col2im walks the positions a convolution of the output with these parameters has:
    # an output_padding that reaches the stride would add one, which it cannot place.
    if _output_size(out_size, kernel, stride, padding, dilation) != (ih, iw) or \
            min(out_size) <= 0 or min(weight._strides) < 0 or \
            n * c_in * c_out * kernel[0] * kernel[1] * ih * iw < max(size_threshold(MIN_FLOPS), 1):
        return NotImplemented
    k_stride = _collapsed_stride(weight._shape[1:], weight._strides[1:])
    if k_stride is None:              # (C_out, K, K) must collapse: a small copy makes it so
        weight = weight.contiguous()
        k_stride = 1
    x, position_stride = _flat_positions(x)
    rows, positions = c_out * kernel[0] * kernel[1], ih * iw
    cols = Tensor._empty((n, rows, positions), dtype)
    _gemm.gemm((n, rows, positions, c_in), cols._storage.array, 0, (rows * positions, positions, 1),
               weight._storage.array, weight._offset, (0, k_stride, weight._strides[0]),
               x._storage.array, x._offset,
               (x._strides[0], x._strides[1], position_stride),
               1.0, 0.0, None, 0, (0, 0, 0))
    result = Tensor._empty((n, c_out) + out_size, dtype)
    _gemm.col2im(result._storage.array, result._offset, cols._storage.array, 0,
                 tuple(result._shape), tuple(result._strides), *_bias_args(bias), rows, kernel,
                 (ih, iw), tuple(stride), tuple(padding), tuple(dilation))
    return result


def weight_grad_kernel(out, inputs, dtypes, params):
    """convolution_backward_weight of a 1-D, 2-D or 3-D convolution, all through the 2-D one
    (_weight_grad_2d), as convolution_kernel reduces them (a grouped one group by group: each
    group's weight gradient is that of its own convolution). Anything else is declined."""
    if len(inputs) != 2:
        return NotImplemented
    x, grad = inputs
    weight_shape = tuple(params["weight_shape"])
    if len(x._shape) not in (3, 4, 5) or not len(grad._shape) == len(weight_shape) == \
            len(x._shape):
        return NotImplemented
    weight_grad = _WEIGHT_GRADS[len(x._shape)]
    groups = params.get("groups", 1)
    if groups == 1:
        return weight_grad(x, grad, weight_shape, dtypes[0], params)
    if len(x._shape) == 4 and groups == x._shape[1] == weight_shape[0] and weight_shape[1] == 1:
        result = _depthwise_weight_grad(x, grad, weight_shape, dtypes[0], params)
        if result is not NotImplemented:
            return result
    if x._shape[1] % groups or weight_shape[0] % groups or grad._shape[1] != weight_shape[0]:
        return NotImplemented
    in_group, out_group = x._shape[1] // groups, weight_shape[0] // groups
    one_group = (out_group,) + weight_shape[1:]
    return _side_by_side(0, [
        weight_grad(_narrowed(x, 1, g * in_group, in_group),
                    _narrowed(grad, 1, g * out_group, out_group), one_group, dtypes[0], params)
        for g in range(groups)])


def _weight_grad_1d(x, grad, weight_shape, dtype, params):
    return _without_height(_weight_grad_2d(
        _with_height(x), _with_height(grad), weight_shape[:2] + (1,) + weight_shape[2:], dtype,
        _params_2d(params)))


def _weight_grad_2d(x, grad, weight_shape, dtype, params):
    """convolution_backward_weight of a 2-D convolution, groups 1: one product summing
    grad[n] @ im2col(x[n])^T over the images n (src/gemm.c: conv2d_weight_grad); its result
    is the contiguous (O, C, KH, KW) gradient. Anything else is declined."""
    if len(x._shape) != 4 or len(grad._shape) != 4 or len(weight_shape) != 4 or \
            dtype not in DTYPES or not (_on_cpu_as(x, dtype) and _on_cpu_as(grad, dtype)):
        return NotImplemented
    stride, padding, dilation = params["stride"], params["padding"], params["dilation"]
    n, c, h, w = x._shape
    o, kernel = weight_shape[0], tuple(weight_shape[2:])
    out_size = _output_size((h, w), kernel, stride, padding, dilation)
    # grad may cover fewer positions (a transposed convolution's output_padding): decline
    if weight_shape[1] != c or tuple(grad._shape) != (n, o) + out_size or \
            min(x._strides) < 0 or min(grad._strides) < 0:
        return NotImplemented
    if n * o * out_size[0] * out_size[1] * c * kernel[0] * kernel[1] < size_threshold(MIN_FLOPS):
        return NotImplemented
    grad, _ = _flat_positions(grad)
    result = Tensor._empty(tuple(weight_shape), dtype)
    _gemm.conv2d_weight_grad(result._storage.array, result._offset, x._storage.array,
                             x._offset, tuple(x._shape), tuple(x._strides),
                             grad._storage.array, grad._offset, tuple(grad._strides), o, kernel,
                             out_size, tuple(stride), tuple(padding), tuple(dilation))
    return result


# --- 1-D and grouped convolutions as 2-D ones ---------------------------------------------------

def _params_2d(params):
    """A 1-D convolution's parameters for the 2-D one of height 1."""
    return dict(params, stride=(1, *params["stride"]), padding=(0, *params["padding"]),
                dilation=(1, *params["dilation"]),
                output_padding=(0, *params.get("output_padding", (0,))))


def _with_height(t):
    """(N, C, L) viewed as (N, C, 1, L), without history (the kernel's own operand)."""
    shape, strides = t._shape, t._strides
    return Tensor._make(t._storage, t._offset, (*shape[:2], 1, shape[2]),
                        (*strides[:2], shape[2] * strides[2], strides[2]))


def _without_height(result):
    """A 2-D result of height 1 viewed as the 1-D one (or NotImplemented, passed on)."""
    if result is NotImplemented:
        return result
    shape, strides = result._shape, result._strides
    return Tensor._make(result._storage, result._offset, (*shape[:2], shape[3]),
                        (*strides[:2], strides[3]))


def _narrowed(t, dim, start, length):
    """t[start:start + length] along `dim`, viewed without history."""
    shape = t._shape[:dim] + (length,) + t._shape[dim + 1:]
    return Tensor._make(t._storage, t._offset + start * t._strides[dim], shape, t._strides)


def _side_by_side(dim, parts):
    """The groups' results joined along `dim` into a new contiguous tensor (NotImplemented
    if any group declined)."""
    if any(part is NotImplemented for part in parts):
        return NotImplemented
    shape = list(parts[0]._shape)
    shape[dim] = sum(part._shape[dim] for part in parts)
    result = Tensor._empty(tuple(shape), parts[0]._storage.dtype)
    np.concatenate([part._np for part in parts], axis=dim, out=result._np)
    return result


# --- depthwise 2-D convolutions, directly (src/depthwise.c) -----------------------------------
#
# One filter per channel (groups == channels, one output channel each): KH*KW multiply-adds
# per output element, too few for a product to pay for its packing (the grouped path makes
# one product per channel). Its input gradient is, for stride 1, the depthwise convolution
# of the gradient with each filter flipped (a gather, which vectorizes); other strides
# scatter (_depthwise.transposed).

def _is_depthwise(x, weight, groups):
    return len(x._shape) == 4 and groups == x._shape[1] == weight._shape[0] and \
        weight._shape[1] == 1


def _depthwise_2d(x, weight, bias, dtype, params):
    stride, padding, dilation = params["stride"], params["padding"], params["dilation"]
    kernel = tuple(weight._shape[2:])
    if dtype not in DTYPES or not (_on_cpu_as(x, dtype) and _on_cpu_as(weight, dtype)) or \
            (bias is not None and not _on_cpu_as(bias, dtype)):
        return NotImplemented
    if params.get("transposed"):
        flipped_padding = tuple(d * (k - 1) - p for k, p, d in zip(kernel, padding, dilation))
        if any(s != 1 for s in stride) or any(params["output_padding"]) or \
                min(flipped_padding) < 0:
            return _depthwise_transposed(x, weight, bias, dtype, params)
        # stride 1: the flipped filters' convolution (a gather: it vectorizes)
        padding = flipped_padding
        weight = Tensor._make(weight._storage, weight._offset + weight._strides[2] * (
            kernel[0] - 1) + weight._strides[3] * (kernel[1] - 1), weight._shape,
            weight._strides[:2] + (-weight._strides[2], -weight._strides[3]))
    out_size = _output_size(x._shape[2:], kernel, stride, padding, dilation)
    n, c = x._shape[:2]
    if min(out_size) <= 0 or n * c * out_size[0] * out_size[1] * kernel[0] * kernel[1] < \
            size_threshold(MIN_FLOPS):
        return NotImplemented
    result = Tensor._empty((n, c) + out_size, dtype)
    _depthwise.conv(result._storage.array, x._storage.array, x._offset, tuple(x._shape),
                    tuple(x._strides), *_filters(weight), *_bias_args(bias), kernel, out_size,
                    tuple(stride), tuple(padding), tuple(dilation))
    return result


def _depthwise_transposed(x, weight, bias, dtype, params):
    """A transposed depthwise convolution at any stride (the input gradient of a strided
    one): each input element's products scattered to the positions the forward read."""
    stride, padding, dilation = params["stride"], params["padding"], params["dilation"]
    kernel = tuple(weight._shape[2:])
    out_size = _transposed_output_size(x, weight, stride, padding, dilation,
                                       params["output_padding"])
    n, c = x._shape[:2]
    if min(out_size) <= 0 or min(padding) < 0 or \
            _output_size(out_size, kernel, stride, padding, dilation) != tuple(x._shape[2:]):
        return NotImplemented
    result = Tensor._empty((n, c) + out_size, dtype)
    _depthwise.transposed(result._storage.array, tuple(result._shape), x._storage.array,
                          x._offset, tuple(x._strides), *_filters(weight), *_bias_args(bias),
                          kernel, tuple(x._shape[2:]), tuple(stride), tuple(padding),
                          tuple(dilation))
    return result


def _filters(weight):
    """A depthwise weight (C, 1, KH, KW) as the C code takes it: array, offset and the
    (C, KH, KW) strides."""
    return weight._storage.array, weight._offset, (weight._strides[0],) + tuple(
        weight._strides[2:])


def _bias_args(bias):
    """A bias vector as the C entry points take it (array, offset, stride), or none."""
    return (None, 0, 0) if bias is None else (bias._storage.array, bias._offset,
                                              bias._strides[0])


def _depthwise_weight_grad(x, grad, weight_shape, dtype, params):
    stride, padding, dilation = params["stride"], params["padding"], params["dilation"]
    kernel = tuple(weight_shape[2:])
    out_size = _output_size(x._shape[2:], kernel, stride, padding, dilation)
    if dtype not in DTYPES or not (_on_cpu_as(x, dtype) and _on_cpu_as(grad, dtype)) or \
            tuple(grad._shape) != tuple(x._shape[:2]) + out_size or min(out_size) <= 0:
        return NotImplemented
    result = Tensor._empty(tuple(weight_shape), dtype)
    _depthwise.weight_grad(result._storage.array, x._storage.array, x._offset,
                           tuple(x._shape), tuple(x._strides), grad._storage.array,
                           grad._offset, tuple(grad._strides), kernel, out_size, tuple(stride),
                           tuple(padding), tuple(dilation))
    return result


# --- 3-D convolutions as 2-D ones over the depth positions ------------------------------------
#
# A 3-D convolution is, at each output depth position od, the sum over the kernel's depth
# taps kd of 2-D convolutions of the input's depth slice od * stride + kd * dilation - padding
# with the kernel's slice kd. Gathering those slices as channels (C * KD of them, zero where
# a tap falls in the padding) turns it into one 2-D convolution over N * D_out images with
# the weight seen as (O, C * KD, KH, KW). Its weight gradient is the 2-D one of the same
# images; a transposed one is the 2-D transposed convolution of each input depth slice,
# whose C_out * KD channels are then added at their depth positions (the gather's adjoint).

def _depth_params(params):
    """The 2-D parameters of the (H, W) dims."""
    return dict(params, stride=tuple(params["stride"][1:]), padding=tuple(params["padding"][1:]),
                dilation=tuple(params["dilation"][1:]),
                output_padding=tuple(params.get("output_padding", (0, 0, 0))[1:]))


def _depth_taps(size, taps, stride, padding, dilation, positions):
    """For each tap kd: (kd, first, last, depth): positions p in [first, last) of
    range(positions) whose depth p * stride + kd * dilation - padding lies in [0, size),
    and that depth at p = first."""
    for kd in range(taps):
        offset = kd * dilation - padding
        first = max(0, -(offset // stride))                  # ceil(-offset / stride)
        last = min(positions, (size - 1 - offset) // stride + 1) if size > offset else 0
        yield kd, first, max(first, last), first * stride + offset


def _depth_columns(x, taps, params):
    """x (N, C, D, H, W) as (N * D_out, C * taps, H, W): the depth slices each output depth
    position reads, tap by tap (zero in the padding); and D_out."""
    n, c, d, h, w = x._shape
    stride, padding, dilation = params["stride"][0], params["padding"][0], params["dilation"][0]
    d_out = (d + 2 * padding - dilation * (taps - 1) - 1) // stride + 1
    if d_out <= 0:
        return None, d_out
    columns = np.zeros((n, d_out, c, taps, h, w), x._storage.dtype.numpy_dtype)
    source = x._np
    for kd, first, last, depth in _depth_taps(d, taps, stride, padding, dilation, d_out):
        if last > first:
            columns[:, first:last, :, kd] = source[:, :, depth:depth + (last - first - 1) *
                                                   stride + 1:stride].transpose(0, 2, 1, 3, 4)
    return Tensor._from_array(columns.reshape(n * d_out, c * taps, h, w)), d_out


def _convolution_3d(x, weight, bias, dtypes, params):
    if params.get("transposed"):
        return _transposed_3d(x, weight, bias, dtypes, params)
    o, c, taps = weight._shape[:3]
    if c != x._shape[1] or not (_on_cpu_as(x, dtypes[0]) and _on_cpu_as(weight, dtypes[0])):
        return NotImplemented
    columns, d_out = _depth_columns(x, taps, params)
    if columns is None:
        return NotImplemented
    flat_weight = Tensor._from_array(np.ascontiguousarray(weight._np).reshape(
        o, c * taps, *weight._shape[3:]))
    planes = _convolution_2d(columns, flat_weight, bias, dtypes, _depth_params(params))
    if planes is NotImplemented:
        return NotImplemented
    n = x._shape[0]
    result = Tensor._empty((n, o, d_out) + planes._shape[2:], planes._storage.dtype)
    result._np[...] = planes._np.reshape((n, d_out, o) + planes._shape[2:]).transpose(
        0, 2, 1, 3, 4)
    return result


def _transposed_3d(x, weight, bias, dtypes, params):
    """Each input depth slice's 2-D transposed convolution with the weight seen as
    (C_in, C_out * KD, KH, KW), its KD channel groups added at output depths
    d * stride + kd * dilation - padding (those inside [0, D_out)), the bias last."""
    c_in, c_out, taps = weight._shape[:3]
    n, c, d = x._shape[:3]
    if c != c_in or not (_on_cpu_as(x, dtypes[0]) and _on_cpu_as(weight, dtypes[0])):
        return NotImplemented
    stride, padding, dilation = params["stride"][0], params["padding"][0], params["dilation"][0]
    d_out = (d - 1) * stride - 2 * padding + dilation * (taps - 1) + \
        params["output_padding"][0] + 1
    if d_out <= 0:
        return NotImplemented
    slices = Tensor._from_array(np.ascontiguousarray(
        x._np.transpose(0, 2, 1, 3, 4)).reshape((n * d, c) + x._shape[3:]))
    flat_weight = Tensor._from_array(np.ascontiguousarray(weight._np).reshape(
        c_in, c_out * taps, *weight._shape[3:]))
    planes = _convolution_2d(slices, flat_weight, None, dtypes, _depth_params(params))
    if planes is NotImplemented:
        return NotImplemented
    spatial = planes._shape[2:]
    planes = planes._np.reshape((n, d, c_out, taps) + spatial)
    result = Tensor._empty((n, c_out, d_out) + spatial, dtypes[0])
    out = result._np
    out[...] = 0
    # input depth i reaches output depth i * stride + kd * dilation - padding: the forward's
    # enumeration with input and output depths exchanged
    for kd, first, last, depth in _depth_taps(d_out, taps, stride, padding, dilation, d):
        if last > first:
            out[:, :, depth:depth + (last - first - 1) * stride + 1:stride] += \
                planes[:, first:last, :, kd].transpose(0, 2, 1, 3, 4)
    if bias is not None:
        out += bias._np.reshape(-1, 1, 1, 1)
    return result


def _weight_grad_3d(x, grad, weight_shape, dtype, params):
    o, c, taps = weight_shape[:3]
    if c != x._shape[1] or not (_on_cpu_as(x, dtype) and _on_cpu_as(grad, dtype)):
        return NotImplemented
    columns, d_out = _depth_columns(x, taps, params)
    if columns is None or grad._shape[:3] != (x._shape[0], o, d_out):
        return NotImplemented
    n = x._shape[0]
    planes = Tensor._from_array(np.ascontiguousarray(grad._np.transpose(0, 2, 1, 3, 4)).reshape(
        (n * d_out, o) + grad._shape[3:]))
    flat = _weight_grad_2d(columns, planes, (o, c * taps) + tuple(weight_shape[3:]), dtype,
                           _depth_params(params))
    if flat is NotImplemented:
        return NotImplemented
    return Tensor._from_array(flat._np.reshape(weight_shape))


_CONVOLUTIONS = {3: _convolution_1d, 4: _convolution_2d, 5: _convolution_3d}
_WEIGHT_GRADS = {3: _weight_grad_1d, 4: _weight_grad_2d, 5: _weight_grad_3d}


def _flat_positions(t):
    """t (N, C, H, W), copied to row-major if its H x W positions do not form one strided
    run, and the stride of that run (the C code walks the positions as one dim)."""
    h, w = t._shape[2:]
    if h > 1 and w > 1 and t._strides[2] != w * t._strides[3]:
        t = t.contiguous()
    return t, (t._strides[3] if w > 1 else t._strides[2])


def _output_size(size, kernel, stride, padding, dilation):
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(size, kernel, stride, padding, dilation))


def _collapsed_stride(shape, strides):
    """The one stride that walks dims `shape` in row-major order, or None if there is none."""
    stride = None
    expected = None
    for size, st in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if stride is None:
            stride, expected = st, st * size
        elif st != expected:
            return None
        else:
            expected = st * size
    if stride is None:
        return 1
    return stride if stride >= 0 else None


def _product(a, b, input, alpha, beta, dtype):
    shape_a, shape_b = a._shape, b._shape
    if len(shape_a) == 2 and len(shape_b) == 2:
        batch, (m, k), n = 1, shape_a, shape_b[1]
        result_shape = (m, n)
    elif len(shape_a) == 3 and len(shape_b) == 3:
        (batch, m, k), n = shape_a, shape_b[2]
        result_shape = (batch, m, n)
    else:
        return NotImplemented
    if batch * m * n * k < size_threshold(MIN_FLOPS) or \
            (min(m, n) < size_threshold(MIN_SIDE) and not _as_dot_products(m, a, b)):
        return NotImplemented
    if dtype not in DTYPES or not (_on_cpu_as(a, dtype) and _on_cpu_as(b, dtype)):
        return NotImplemented
    if input is not None and beta != 0 and not _on_cpu_as(input, dtype):
        return NotImplemented
    a_strides, b_strides = _batched(a._strides), _batched(b._strides)
    if min(a_strides) < 0 or min(b_strides) < 0:
        return NotImplemented
    result = Tensor._empty(result_shape, dtype)
    out_strides = _batched(result._strides)
    if input is not None and beta != 0:
        input_strides = _batched(broadcast_strides(result_shape, input._shape, input._strides))
        if min(input_strides) < 0:
            return NotImplemented
        inp, inp_offset = input._storage.array, input._offset
    else:
        inp, inp_offset, input_strides = None, 0, (0, 0, 0)
    _gemm.gemm((batch, m, n, k), result._storage.array, result._offset, out_strides,
               a._storage.array, a._offset, a_strides, b._storage.array, b._offset, b_strides,
               alpha, beta, inp, inp_offset, input_strides)
    return result


def _as_dot_products(m, a, b):
    """Whether src/gemm.c computes a @ b as dot products of rows: few rows, A's rows and B's
    columns contiguous along K."""
    return m <= _gemm.DOT_MAX_M and a._strides[-1] == 1 and b._strides[-2] == 1


def _batched(strides):
    """(batch, row, col) strides: a matrix is a batch of one."""
    return tuple(strides) if len(strides) == 3 else (0,) + tuple(strides)


