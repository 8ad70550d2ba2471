"""reftorch-cuda's convolutions (convolution plain and transposed, convolution_backward_weight;
kernels/conv.cu, implicit GEMMs on gemm.cu's product bodies) against the cpu reference.

Every launch test runs on a real GPU when there is one and on the emulated driver (the
`device_kind` fixture of test_plugin_cuda); the emulation (cuda_emulation_conv) decodes the
kernel parameters from their bytes, checks the product sizes against the convolution they
describe and reads every operand through bounds-checked views of device memory.

Two kinds of values, as in test_plugin_cuda_gemm:
  * small integers (|x| <= 3): every partial sum is an integer far below 2**24, exact in
    float32 and float64 whatever the order, so kernel and reference agree bit for bit
    (16-bit results: both round the same exact float32 value once). This checks the
    addressing (padding, stride, dilation, groups, strided operands, tile edges), the bias
    and the output layout exactly, on a GPU as well;
  * random normal values: the orders differ (the kernel's FMA chain over (c, kh, kw) or
    tensor-core sums vs the reference's BLAS), so results agree within
    `assert_conv_close`'s bound, derived from K = Cg*KH*KW (the weight gradient: N*OH*OW)
    as the GEMM tests derive theirs.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
import reftorch.nn.functional as F
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda import ops_conv as C  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_gemm import (accumulation_eps, assert_exact, finfo,  # noqa: E402
                                              integers, normals)

# The launch fixtures of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, host, reference = base.FLOATS, base.host, base.reference

# (N, C, H, W, O, kernel, stride, padding, dilation, groups, bias): a 1x1 problem; padding,
# stride, dilation and groups alone and together; more output channels than a row tile
# (130 > 128 and > 64, the float64 tile); more positions than a column tile (144 > 128) with
# a depth of 360 (no multiple of 8, 16 or 32: partial k tiles); depthwise (Cg = 1, K = 1);
# padding wider than the kernel (windows entirely in the padding); stride 3 with groups 4.
FORWARD = [
    (1, 1, 1, 1, 1, (1, 1), 1, 0, 1, 1, False),
    (2, 3, 7, 9, 5, (3, 3), 1, 1, 1, 1, True),
    (1, 4, 10, 11, 6, (3, 3), 2, 2, 2, 2, True),
    (2, 6, 5, 5, 4, (2, 2), 1, 0, 1, 2, False),
    (1, 5, 13, 17, 130, (3, 2), (2, 1), (1, 0), (1, 2), 1, True),
    (2, 40, 12, 12, 8, (3, 3), 1, 1, 1, 1, False),
    (3, 8, 6, 6, 8, (1, 1), 1, 0, 1, 8, True),
    (1, 6, 4, 4, 6, (5, 5), 1, 3, 1, 3, True),
    (2, 4, 9, 9, 12, (3, 3), 3, 0, 1, 4, False),
]


def forward_tensors(case, dtype_name, values=integers):
    n, c, h, w, o, kernel, _stride, _padding, _dilation, groups, with_bias = case
    x = values((n, c, h, w), dtype_name, 1)
    weight = values((o, c // groups) + kernel, dtype_name, 2)
    bias = values((o,), dtype_name, 3) if with_bias else None
    return x, weight, bias


def conv_params(case):
    return dict(stride=case[6], padding=case[7], dilation=case[8], groups=case[9])


def cuda(t):
    return None if t is None else t.cuda()


def served(device_kind, *kinds):
    """Nothing went through the fallback, and (emulated) the kernels were launched."""
    assert plugins.fallbacks() == {}, plugins.fallbacks()
    if device_kind is not None:
        for kind, dtype_name in kinds:
            assert C.expression(kind, dtype_name) in device_kind.launches, (kind, dtype_name)


def assert_conv_close(got, expected, magnitude, depth, err_msg=""):
    """Kernel and reference each sum `depth` products (+ the bias) in some order: each is
    within (depth + 2) eps * magnitude of the exact value (magnitude: the same convolution of
    the absolute values, bias included; eps: the accumulation type's), so they are within
    twice that of each other; a 16-bit result adds one rounding of its own."""
    assert got.device.type == "cuda", err_msg
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    allowed = 2 * (depth + 2) * accumulation_eps(got.dtype.name) * magnitude
    if got.dtype.name in ("float16", "bfloat16"):
        info = finfo(got.dtype.name)
        allowed = allowed + np.maximum(float(info.eps) * np.abs(e),
                                       float(info.smallest_subnormal))
    assert np.all(np.abs(g - e) <= allowed), (
        err_msg, np.max(np.abs(g - e) / np.maximum(allowed, 1e-300)))


def absolute(t):
    return None if t is None else t.double().abs()


# --- forward ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv2d_forward_exactly(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for case in FORWARD:
        x, weight, bias = forward_tensors(case, dtype_name)
        params = conv_params(case)
        expected = reference(lambda *t: F.conv2d(*t, **params), x, weight, bias)
        assert_exact(F.conv2d(x.cuda(), weight.cuda(), cuda(bias), **params), expected,
                     str(case))
    served(device_kind, ("ConvForward", dtype_name))


# Non-contiguous operands: (name, view of the cpu input, view of the cpu weight); each view is
# taken of a tensor first copied to cuda, so the device operand has the same strides.
LAYOUTS = [
    ("channels_last", lambda t: t.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
     lambda t: t),
    ("sliced_stepped", lambda t: t[:, 1:, 1:-1, ::2], lambda t: t),
    ("transposed_weight", lambda t: t, lambda t: t.transpose(2, 3).contiguous().transpose(2, 3)),
    ("expanded_batch", lambda t: t[:1].expand(3, -1, -1, -1),
     lambda t: t[:, :1].expand(-1, 5, -1, -1)),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout[0])
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_strided_operands_need_no_copy(device_kind, dtype_name, layout):
    _name, x_view, w_view = layout
    x_full = integers((3, 6, 9, 14), dtype_name, 4)
    w_full = integers((7, 5, 3, 3), dtype_name, 5)
    x, weight = x_view(x_full), w_view(w_full)
    x_dev, w_dev = x_view(x_full.cuda()), w_view(w_full.cuda())
    assert x_dev.stride() == x.stride() and w_dev.stride() == weight.stride()
    if x.shape[1] != weight.shape[1]:
        x, x_dev = x[:, :weight.shape[1]], x_dev[:, :weight.shape[1]]
    bias = integers((7,), dtype_name, 6)
    plugins.reset_fallbacks()
    expected = reference(lambda *t: F.conv2d(*t, stride=2, padding=1), x, weight, bias)
    assert_exact(F.conv2d(x_dev, w_dev, bias.cuda(), stride=2, padding=1), expected)
    served(device_kind, ("ConvForward", dtype_name))


def test_layouts_really_are_strided(emulated):
    x, weight = integers((3, 6, 9, 14), "float32", 4), integers((7, 5, 3, 3), "float32", 5)
    strides = {name: (xv(x).stride(), wv(weight).stride()) for name, xv, wv in LAYOUTS}
    assert strides["channels_last"][0] == (756, 1, 84, 6)
    assert strides["sliced_stepped"][0] == (756, 126, 14, 2)
    assert strides["transposed_weight"][1] == (45, 9, 1, 3)
    assert strides["expanded_batch"] == ((0, 126, 14, 1), (45, 0, 3, 1))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv1d_runs_as_a_unit_height_conv2d(device_kind, dtype_name):
    x, weight = integers((2, 6, 37), dtype_name, 7), integers((4, 3, 5), dtype_name, 8)
    bias = integers((4,), dtype_name, 9)
    plugins.reset_fallbacks()
    for params in [dict(), dict(stride=2, padding=3, dilation=2, groups=2)]:
        w = weight if params.get("groups") else integers((4, 6, 5), dtype_name, 10)
        expected = reference(lambda *t: F.conv1d(*t, **params), x, w, bias)
        assert_exact(F.conv1d(x.cuda(), w.cuda(), bias.cuda(), **params), expected, str(params))
    served(device_kind, ("ConvForward", dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv2d_rounding_within_the_bound(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for case in [(2, 40, 12, 12, 8, (3, 3), 1, 1, 1, 1, True),
                 (1, 64, 9, 10, 70, (3, 3), 2, 1, 1, 2, True)]:
        x, weight, bias = forward_tensors(case, dtype_name, normals)
        params = conv_params(case)
        expected = reference(lambda *t: F.conv2d(*t, **params), x, weight, bias)
        magnitude = host(reference(lambda *t: F.conv2d(*t, **params),
                                   absolute(x), absolute(weight), absolute(bias)))
        depth = (case[1] // case[9]) * case[5][0] * case[5][1]
        assert_conv_close(F.conv2d(x.cuda(), weight.cuda(), cuda(bias), **params), expected,
                          magnitude, depth, str(case))
    served(device_kind, ("ConvForward", dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_empty_batches_and_channels(device_kind, dtype_name):
    """A batch of 0: an empty result (no launch). No input channels (K = 0): the bias alone.
    A batch of 0 in the backward: zero weight gradient (its depth N*OH*OW is 0)."""
    plugins.reset_fallbacks()
    x, weight = integers((0, 3, 5, 5), dtype_name, 11), integers((4, 3, 3, 3), dtype_name, 12)
    got = F.conv2d(x.cuda(), weight.cuda(), padding=1)
    assert_exact(got, reference(lambda *t: F.conv2d(*t, padding=1), x, weight))
    x, weight = integers((2, 0, 5, 5), dtype_name, 13), integers((4, 0, 3, 3), dtype_name, 14)
    bias = integers((4,), dtype_name, 15)
    assert_exact(F.conv2d(x.cuda(), weight.cuda(), bias.cuda()),
                 reference(F.conv2d, x, weight, bias))
    x, weight = integers((0, 3, 5, 5), dtype_name, 16), integers((4, 3, 3, 3), dtype_name, 17)
    w_dev = weight.cuda().requires_grad_()
    F.conv2d(x.cuda(), w_dev).sum().backward()
    assert_exact(w_dev.grad, reftorch.zeros_like(weight))
    assert plugins.fallbacks() == {}


def test_nan_and_inf_propagate(device_kind):
    x, weight = integers((1, 2, 6, 6), "float32", 18), integers((3, 2, 3, 3), "float32", 19)
    x[0, 1, 2, 3], weight[1, 0, 0, 0] = float("nan"), float("inf")
    expected = host(reference(lambda *t: F.conv2d(*t, padding=1), x, weight))
    got = host(F.conv2d(x.cuda(), weight.cuda(), padding=1))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got[~np.isnan(expected)], expected[~np.isnan(expected)])


# --- transposed ---------------------------------------------------------------------------------

# (N, C_in, H, W, C_out per group, kernel, stride, padding, output_padding, groups, dilation,
# bias): output_padding from the stride, from the dilation, more output channels than a tile,
# stride 1 with padding.
TRANSPOSED = [
    (2, 4, 5, 6, 3, (3, 3), 2, 1, 1, 2, 1, True),
    (1, 3, 7, 4, 5, (2, 3), (1, 3), (0, 1), (0, 2), 1, (2, 1), False),
    (1, 2, 3, 3, 130, (3, 3), 1, 0, 0, 1, 1, True),
    (2, 6, 6, 5, 2, (3, 2), 1, (1, 0), 0, 3, (1, 2), False),
]


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv_transpose2d_exactly(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for case in TRANSPOSED:
        n, c, h, w, og, kernel, stride, padding, output_padding, groups, dilation, with_bias = case
        x = integers((n, c, h, w), dtype_name, 20)
        weight = integers((c, og) + kernel, dtype_name, 21)
        bias = integers((og * groups,), dtype_name, 22) if with_bias else None
        params = dict(stride=stride, padding=padding, output_padding=output_padding,
                      groups=groups, dilation=dilation)
        expected = reference(lambda *t: F.conv_transpose2d(*t, **params), x, weight, bias)
        assert_exact(F.conv_transpose2d(x.cuda(), weight.cuda(), cuda(bias), **params),
                     expected, str(case))
    x, weight = integers((2, 4, 9), dtype_name, 23), integers((4, 3, 4), dtype_name, 24)
    params = dict(stride=3, padding=2, output_padding=1, groups=2, dilation=1)
    expected = reference(lambda *t: F.conv_transpose1d(*t, **params), x, weight)
    assert_exact(F.conv_transpose1d(x.cuda(), weight.cuda(), **params), expected, "1-d")
    served(device_kind, ("ConvTransposed", dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv_transpose2d_rounding_within_the_bound(device_kind, dtype_name):
    plugins.reset_fallbacks()
    x, weight = normals((2, 48, 7, 8), dtype_name, 25), normals((48, 5, 3, 3), dtype_name, 26)
    bias = normals((5,), dtype_name, 27)
    params = dict(stride=2, padding=1, output_padding=1)
    expected = reference(lambda *t: F.conv_transpose2d(*t, **params), x, weight, bias)
    magnitude = host(reference(lambda *t: F.conv_transpose2d(*t, **params),
                               absolute(x), absolute(weight), absolute(bias)))
    assert_conv_close(F.conv_transpose2d(x.cuda(), weight.cuda(), bias.cuda(), **params),
                      expected, magnitude, 48 * 9)
    served(device_kind, ("ConvTransposed", dtype_name))


# --- autograd: input gradient (transposed), weight gradient, bias -----------------------------

def grads(fn, inputs, grad_out):
    """(output, gradients of every input) of fn, one backward with grad_out."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    out = fn(*leaves)
    out.backward(grad_out)
    return out.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv2d_backward_exactly(device_kind, dtype_name):
    """Through autograd: the input gradient is a transposed convolution (its output_padding
    restores the rows the stride skipped), the weight gradient convolution_backward_weight."""
    plugins.reset_fallbacks()
    for case in FORWARD[1:6] + [FORWARD[8]]:
        x, weight, bias = forward_tensors(case, dtype_name)
        params = conv_params(case)

        def fn(*t):
            return F.conv2d(*t, **params)
        shape = reference(fn, x, weight, bias).shape
        grad_out = integers(tuple(shape), dtype_name, 28)
        inputs = [x, weight] + ([bias] if bias is not None else [])
        with plugins.use_reference_kernels():
            expected, expected_grads = grads(fn, inputs, grad_out)
        got, got_grads = grads(fn, [t.cuda() for t in inputs], grad_out.cuda())
        assert_exact(got, expected, str(case))
        for g, e, name in zip(got_grads, expected_grads, ("input", "weight", "bias")):
            assert_exact(g, e, f"{name} {case}")
    served(device_kind, ("ConvForward", dtype_name), ("ConvTransposed", dtype_name),
           ("ConvWeightGrad", dtype_name))


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_conv_transpose_and_conv1d_backward_exactly(device_kind, dtype_name):
    """A transposed convolution's own backward (its input gradient a plain convolution, its
    weight gradient convolution_backward_weight of the gradient by the input), and conv1d's."""
    plugins.reset_fallbacks()
    cases = [
        (lambda *t: F.conv_transpose2d(*t, stride=2, padding=1, output_padding=1, groups=2),
         [integers((2, 4, 5, 6), dtype_name, 29), integers((4, 3, 3, 3), dtype_name, 30),
          integers((6,), dtype_name, 31)]),
        (lambda *t: F.conv1d(*t, stride=2, padding=1, dilation=2),
         [integers((3, 5, 40), dtype_name, 32), integers((7, 5, 3), dtype_name, 33)]),
    ]
    for fn, inputs in cases:
        shape = reference(fn, *inputs).shape
        grad_out = integers(tuple(shape), dtype_name, 34)
        with plugins.use_reference_kernels():
            expected, expected_grads = grads(fn, inputs, grad_out)
        got, got_grads = grads(fn, [t.cuda() for t in inputs], grad_out.cuda())
        assert_exact(got, expected)
        for g, e in zip(got_grads, expected_grads):
            assert_exact(g, e)
    served(device_kind, ("ConvForward", dtype_name), ("ConvTransposed", dtype_name),
           ("ConvWeightGrad", dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_weight_gradient_rounding_within_the_bound(device_kind, dtype_name):
    """convolution_backward_weight on normal values: each element sums N*OH*OW products."""
    from reftorch._ops.nn_convolution import convolution_backward_weight
    plugins.reset_fallbacks()
    x, grad = normals((4, 6, 20, 20), dtype_name, 35), normals((4, 10, 10, 10), dtype_name, 36)
    args = ((10, 3, 3, 3), (2, 2), (1, 1), (1, 1), 2)

    def fn(x, grad):
        return convolution_backward_weight(x, grad, *args)
    expected = reference(fn, x, grad)
    magnitude = host(reference(fn, absolute(x), absolute(grad)))
    assert_conv_close(fn(x.cuda(), grad.cuda()), expected, magnitude, 4 * 100)
    served(device_kind, ("ConvWeightGrad", dtype_name))


# --- 3-D: the same kernels, depth as the slowest spatial dim -------------------------------------

# (N, C, (D, H, W), O, kernel, stride, padding, dilation, groups, bias): a 1x1x1 problem;
# padding, stride and dilation differing per dim, with groups; more positions than a column
# tile (6*6*5 = 180 > 128) with a depth of 4*27 = 108 (partial k tiles); more output channels
# than a row tile (130); depthwise; padding wider than the kernel along depth.
FORWARD_3D = [
    (1, 1, (1, 1, 1), 1, (1, 1, 1), 1, 0, 1, 1, False),
    (2, 4, (5, 6, 7), 6, (3, 2, 3), (2, 1, 2), (1, 0, 2), (1, 2, 1), 2, True),
    (1, 4, (6, 6, 5), 5, (3, 3, 3), 1, 1, 1, 1, True),
    (1, 3, (4, 5, 3), 130, (2, 3, 1), (1, 2, 1), (0, 1, 0), 1, 1, False),
    (2, 6, (4, 4, 4), 6, (3, 1, 3), 1, (1, 0, 1), (1, 1, 2), 6, True),
    (1, 2, (3, 4, 4), 4, (2, 2, 2), (1, 1, 2), (3, 1, 0), 1, 2, False),
]


def forward_3d_tensors(case, dtype_name, values=integers, seed=0):
    n, c, size, o, kernel, _stride, _padding, _dilation, groups, with_bias = case
    x = values((n, c) + size, dtype_name, 50 + seed)
    weight = values((o, c // groups) + kernel, dtype_name, 51 + seed)
    bias = values((o,), dtype_name, 52 + seed) if with_bias else None
    return x, weight, bias


def conv3d_params(case):
    return dict(stride=case[5], padding=case[6], dilation=case[7], groups=case[8])


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv3d_forward_and_backward_exactly(device_kind, dtype_name):
    """Forward, input gradient (a transposed 3-D convolution) and weight gradient, bit for bit
    with the reference on integer data."""
    plugins.reset_fallbacks()
    for case in FORWARD_3D:
        x, weight, bias = forward_3d_tensors(case, dtype_name)
        params = conv3d_params(case)

        def fn(*t):
            return F.conv3d(*t, **params)
        shape = reference(fn, x, weight, bias).shape
        grad_out = integers(tuple(shape), dtype_name, 53)
        inputs = [x, weight] + ([bias] if bias is not None else [])
        with plugins.use_reference_kernels():
            expected, expected_grads = grads(fn, inputs, grad_out)
        got, got_grads = grads(fn, [t.cuda() for t in inputs], grad_out.cuda())
        assert_exact(got, expected, str(case))
        for g, e, name in zip(got_grads, expected_grads, ("input", "weight", "bias")):
            assert_exact(g, e, f"{name} {case}")
    served(device_kind, ("ConvForward", dtype_name), ("ConvTransposed", dtype_name),
           ("ConvWeightGrad", dtype_name))


# (N, C_in, (D, H, W), C_out per group, kernel, stride, padding, output_padding, groups,
# dilation, bias): output_padding from the stride, and (float32/float64 only: 16-bit
# declines it) from the dilation.
TRANSPOSED_3D = [
    (2, 4, (3, 4, 3), 3, (3, 2, 3), (2, 1, 2), (1, 0, 1), (1, 0, 0), 2, 1, True),
    (1, 3, (2, 3, 4), 2, (2, 3, 2), (1, 1, 1), (0, 1, 1), (0, 0, 0), 1, (2, 1, 2), False),
    (1, 2, (4, 2, 3), 3, (2, 2, 2), (3, 1, 1), 0, (0, 0, 1), 1, (1, 1, 2), True),
]


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv_transpose3d_and_its_backward_exactly(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for case in TRANSPOSED_3D:
        n, c, size, og, kernel, stride, padding, output_padding, groups, dilation, bias = case
        if dtype_name in ("float16", "bfloat16") and \
                any(op >= st for op, st in zip(output_padding, stride)):
            continue       # declined: the reference rounds each product to 16 bits there
        params = dict(stride=stride, padding=padding, output_padding=output_padding,
                      groups=groups, dilation=dilation)
        inputs = [integers((n, c) + size, dtype_name, 54),
                  integers((c, og) + kernel, dtype_name, 55)]
        if bias:
            inputs.append(integers((og * groups,), dtype_name, 56))

        def fn(*t, params=params):
            return F.conv_transpose3d(*t, **params)
        shape = reference(fn, *inputs).shape
        grad_out = integers(tuple(shape), dtype_name, 57)
        with plugins.use_reference_kernels():
            expected, expected_grads = grads(fn, inputs, grad_out)
        got, got_grads = grads(fn, [t.cuda() for t in inputs], grad_out.cuda())
        assert_exact(got, expected, str(case))
        for g, e in zip(got_grads, expected_grads):
            assert_exact(g, e, str(case))
    served(device_kind, ("ConvForward", dtype_name), ("ConvTransposed", dtype_name),
           ("ConvWeightGrad", dtype_name))


# Non-contiguous 3-D operands (cpu view, device view), as LAYOUTS.
LAYOUTS_3D = [
    ("channels_last_3d", lambda t: t.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3),
     lambda t: t),
    ("sliced_stepped", lambda t: t[:, 1:, ::2, 1:-1, ::2], lambda t: t),
    ("permuted_weight", lambda t: t,
     lambda t: t.permute(0, 1, 4, 2, 3).contiguous().permute(0, 1, 3, 4, 2)),
    ("expanded_batch", lambda t: t[:1].expand(3, -1, -1, -1, -1),
     lambda t: t[:, :1].expand(-1, 5, -1, -1, -1)),
]


@pytest.mark.parametrize("layout", LAYOUTS_3D, ids=lambda layout: layout[0])
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_conv3d_strided_operands_need_no_copy(device_kind, dtype_name, layout):
    _name, x_view, w_view = layout
    x_full = integers((3, 6, 7, 6, 9), dtype_name, 58)
    w_full = integers((7, 5, 3, 2, 3), dtype_name, 59)
    x, weight = x_view(x_full), w_view(w_full)
    x_dev, w_dev = x_view(x_full.cuda()), w_view(w_full.cuda())
    assert x_dev.stride() == x.stride() and w_dev.stride() == weight.stride()
    assert not (x.is_contiguous() and weight.is_contiguous())
    if x.shape[1] != weight.shape[1]:
        x, x_dev = x[:, :weight.shape[1]], x_dev[:, :weight.shape[1]]
    bias = integers((7,), dtype_name, 60)
    params = dict(stride=(1, 2, 2), padding=(1, 0, 1), dilation=(2, 1, 1))
    plugins.reset_fallbacks()
    expected = reference(lambda *t: F.conv3d(*t, **params), x, weight, bias)
    assert_exact(F.conv3d(x_dev, w_dev, bias.cuda(), **params), expected)
    served(device_kind, ("ConvForward", dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_conv3d_rounding_within_the_bound(device_kind, dtype_name):
    """Normal values: forward (depth 16*27 = 432), input and weight gradients (each weight
    element sums N*OD*OH*OW = 2*216 products) within the bounds of their depths."""
    plugins.reset_fallbacks()
    x, weight = normals((2, 16, 6, 6, 6), dtype_name, 61), normals((9, 16, 3, 3, 3),
                                                                   dtype_name, 62)
    bias = normals((9,), dtype_name, 63)
    params = dict(padding=1)

    def fn(*t):
        return F.conv3d(*t, **params)
    expected = reference(fn, x, weight, bias)
    magnitude = host(reference(fn, absolute(x), absolute(weight), absolute(bias)))
    assert_conv_close(fn(x.cuda(), weight.cuda(), bias.cuda()), expected, magnitude, 16 * 27)
    grad_out = normals(tuple(expected.shape), dtype_name, 64)
    with plugins.use_reference_kernels():
        _, (gx, gw, _gb) = grads(fn, [x, weight, bias], grad_out)
        _, (mx, mw, _mb) = grads(fn, [absolute(x), absolute(weight), absolute(bias)],
                                 absolute(grad_out))
    _, (got_x, got_w, _) = grads(fn, [t.cuda() for t in (x, weight, bias)], grad_out.cuda())
    assert_conv_close(got_x, gx, host(mx), 9 * 27, "input gradient")
    assert_conv_close(got_w, gw, host(mw), 2 * 216, "weight gradient")
    served(device_kind, ("ConvForward", dtype_name), ("ConvTransposed", dtype_name),
           ("ConvWeightGrad", dtype_name))


# --- declines, program, layout ------------------------------------------------------------------

PARAMS = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "transposed": False,
          "output_padding": (0, 0), "groups": 1}


def test_kernels_decline_what_they_do_not_handle(emulated):
    f32 = reftorch.float32
    keys = (f32, f32, f32)
    x, w = reftorch.ones(1, 2, 5, 5, device="cuda"), reftorch.ones(3, 2, 3, 3, device="cuda")
    conv = C.convolution_kernel
    assert conv(None, (x, w, None), keys, PARAMS) is not NotImplemented
    assert conv(None, (x, w.double(), None), keys, PARAMS) is NotImplemented    # mixed dtypes
    assert conv(None, (x, w, reftorch.ones(3, device="cuda").double()), keys, PARAMS) \
        is NotImplemented
    assert conv(None, (x.cpu(), w.cpu(), None), keys, PARAMS) is NotImplemented  # not on cuda
    assert conv(None, (x, w.cpu(), None), keys, PARAMS) is NotImplemented
    x3 = reftorch.ones(1, 2, 4, 4, 4, device="cuda")
    w3 = reftorch.ones(3, 2, 3, 3, 3, device="cuda")
    params3 = {**PARAMS, "stride": (1,) * 3, "padding": (0,) * 3, "dilation": (1,) * 3,
               "output_padding": (0,) * 3}
    assert conv(None, (x3, w3, None), keys, params3) is not NotImplemented       # 3-D
    params4 = {name: value + value[:2] if isinstance(value, tuple) else value
               for name, value in params3.items()}
    x4, w4 = x3.unsqueeze(-1), w3.unsqueeze(-1)                                   # 4-D
    assert conv(None, (x4, w4, None), keys, params4) is NotImplemented
    assert conv(None, (x3, w3, None), keys, PARAMS) is NotImplemented   # 2-D params, 3-D x
    ints = reftorch.ones(1, 2, 5, 5, dtype=reftorch.int64, device="cuda")
    int_weight = reftorch.ones(3, 2, 3, 3, dtype=reftorch.int64, device="cuda")
    assert conv(None, (ints, int_weight, None), keys, PARAMS) is NotImplemented
    # 16-bit transposed with an output_padding reaching the stride (the dilation allows it):
    # the reference rounds each product to 16 bits there
    half = x.half()
    transposed = {**PARAMS, "transposed": True, "dilation": (2, 2), "output_padding": (1, 1)}
    wt = reftorch.ones(2, 3, 3, 3, dtype=reftorch.float16, device="cuda")
    assert conv(None, (half, wt, None), (reftorch.float16,) * 3, transposed) is NotImplemented
    assert conv(None, (x, wt.float(), None), keys, transposed) is not NotImplemented
    grad = reftorch.ones(1, 3, 3, 3, device="cuda")
    wg = {"weight_shape": (3, 2, 3, 3), "stride": (1, 1), "padding": (0, 0),
          "dilation": (1, 1), "groups": 1}
    assert C.weight_grad_kernel(None, (x, grad), keys, wg) is not NotImplemented
    assert C.weight_grad_kernel(None, (x, grad.double()), keys, wg) is NotImplemented
    too_big = reftorch.ones(1, 3, 4, 3, device="cuda")   # more rows than the windows
    assert C.weight_grad_kernel(None, (x, too_big), keys, wg) is NotImplemented


def test_16_bit_convolutions_decline_below_sm_80(emulated, monkeypatch):
    x, w = reftorch.ones(1, 2, 5, 5, device="cuda"), reftorch.ones(3, 2, 3, 3, device="cuda")
    monkeypatch.setattr(x._storage._driver, "arch", lambda index: "sm_75")
    for dtype in (reftorch.float16, reftorch.bfloat16):
        assert C.convolution_kernel(None, (x.to(dtype), w.to(dtype), None), (dtype,) * 3,
                                    PARAMS) is NotImplemented
    assert C.convolution_kernel(None, (x, w, None), (reftorch.float32,) * 3, PARAMS) \
        is not NotImplemented


@base.needs_nvrtc
def test_program_compiles_for_a_gpu_without_mma(compiled):
    result = compiled("sm_75", C.CONV)
    assert set(result.lowered) == set(C.CONV.name_expressions)


def test_program_instantiates_what_is_registered(plugin):
    assert C.CONV in C.PROGRAMS and C.CONV.filename == "conv.cu"
    assert C.CONV.includes == ("gemm.cu",)
    assert set(C.CONV.name_expressions) == {C.expression(kind, name)
                                            for kind in C.KINDS for name in FLOATS}
    assert C.expression("ConvForward", "float16") == "conv_kernel<rt_float16, ConvForward>"
    for op in ("convolution", "convolution_backward_weight"):
        for name in FLOATS:
            assert plugins.serving(op, "cuda", getattr(reftorch, name)) == "cuda", (op, name)


def test_args_layout_matches_the_kernel_struct():
    """ConvArgs: 41 int64 and 2 int32 = 336 bytes (conv.cu's static_assert)."""
    raw = bytes(C.conv_args((1, 2, 3, 4), 5, 6, 7, (8, 9, 10), (11, 12, 13), (14, 15, 16),
                            (17, 18, 19), (20, 21, 22), (23, 24, 25), (26, 27, 28, 29, 30),
                            (31, 32, 33, 34, 35), (36, 37, 38, 39, 40), 41, True))
    assert len(raw) == 336
    assert np.frombuffer(raw[:328], "<i8").tolist() == list(range(1, 42))
    assert np.frombuffer(raw[328:], "<i4").tolist() == [1, 0]


def test_lower_dims_run_as_3d_with_unit_leading_dims(emulated):
    """A 2-D (1-D) problem's ConvArgs: depth (and height) 1 with stride 1, padding 0,
    dilation 1, stride 0 along the added dims; the output size of each dim computed."""
    x = reftorch.ones(2, 4, 9, device="cuda")[:, :, ::2]           # (2, 4, 5), strides (36, 9, 2)
    assert C._as_3d(x) == ((2, 4, 1, 1, 5), (36, 9, 0, 0, 2))
    assert C._as_3d(reftorch.ones(2, 3, 4, 5, device="cuda")) == \
        ((2, 3, 1, 4, 5), (60, 20, 0, 5, 1))
    assert C._spatial({"stride": (2,), "padding": (3,), "dilation": (4,)}) == \
        ((1, 1, 2), (0, 0, 3), (1, 1, 4))


# --- conv.cu's addressing, run on the host ------------------------------------------------------

HOST_KINDS = {"Forward": 0, "Transposed": 1, "WeightGrad": 2}


@pytest.fixture(scope="module")
def conv_host_library(tmp_path_factory):
    """cuda_host/conv_addressing.cpp (conv.cu's sources, kinds, stores and divisors) built
    for the host, loaded with ctypes."""
    import ctypes
    import shutil
    import subprocess

    from spec_tests import cuda_kernel_emulation as E

    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler to build conv.cu's addressing for the host")
    library = tmp_path_factory.mktemp("conv-host") / "conv_addressing.so"
    subprocess.run([compiler, "-std=c++17", "-O1", "-shared", "-fPIC",
                    f"-I{E.KERNELS_DIR}", "-o", str(library),
                    str(base.ROOT / "spec_tests/cuda_host/conv_addressing.cpp")], check=True)
    lib = ctypes.CDLL(str(library))
    lib.divisor_mismatch.restype = ctypes.c_longlong
    return lib


def test_conv_cu_divisor_matches_integer_division(conv_host_library):
    """conv.cu's multiply-high Divisor (every index split of its operand sources) gives n / d
    exactly over the range the host allows (0 <= n, d < 2**31): every divisor below 4096 and
    at each power of two and its neighbours, random ones, each with its multiples and their
    neighbours, the largest n, and random n."""
    import ctypes

    rng = np.random.default_rng(7)
    powers = np.array([1 << i for i in range(31)], np.int64)
    divisors = np.unique(np.concatenate([
        np.arange(1, 4096), powers, powers - 1, powers + 1,
        rng.integers(1, 2 ** 31, 20000), [2 ** 31 - 1]]))
    divisors = divisors[(divisors >= 1) & (divisors < 2 ** 31)]
    d = np.repeat(divisors, 8)
    quotient = rng.integers(0, 2 ** 31, d.size) % (2 ** 31 // d)   # n near a multiple of d
    n = quotient * d + rng.integers(-1, 2, d.size)
    n[::8] = 2 ** 31 - 1
    n[1::8] = rng.integers(0, 2 ** 31, n[1::8].size)
    n[2::8] = d[2::8] - 1
    n = np.clip(n, 0, 2 ** 31 - 1)
    n, d = n.astype(np.int32), d.astype(np.int32)
    first_wrong = conv_host_library.divisor_mismatch(
        n.ctypes.data_as(ctypes.c_void_p), d.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_longlong(d.size))
    assert first_wrong == -1, (int(n[first_wrong]), int(d[first_wrong]))


@pytest.fixture
def host_addressing(emulated, conv_host_library, monkeypatch):
    """The emulated driver with conv.cu's own addressing in place of the NumPy model: the
    sources, kinds and stores of conv.cu compiled for the host (cuda_host/conv_addressing.cpp)
    give every operand element's offset and every output's; the launch's values are then
    those elements' products, summed (in NumPy's order). So a wrong index, stride or group
    offset in the CUDA code shows up here without a GPU. The tile readers and the product
    bodies (gemm.cu's, run by the gemm tests on a GPU) are not part of it."""
    import ctypes
    import re

    from spec_tests import cuda_kernel_emulation as E
    from spec_tests.cuda_emulation_conv import decode

    lib = conv_host_library
    launches = []

    def run(driver, match, grid, block, shared, params):
        p = E.slots(params, 5)
        a = decode(p[0])
        storage, kind = E.STORAGE[match.group(1)], match.group(2)
        c = E.compute_type(storage)
        batch, m, n, k = a["batch"], a["m"], a["n"], a["k"]
        a_offsets = np.zeros((batch, m, k), np.int64)
        b_offsets = np.zeros((batch, k, n), np.int64)
        out_shape = (a["groups"] * a["group_out"], a["group_in"]) + a["kernel"] \
            if kind == "WeightGrad" else \
            (batch // a["groups"], a["groups"] * a["group_out"]) + a["out_size"]
        out_span = 1 + sum((size - 1) * s for size, s in zip(out_shape, a["out_strides"]))
        out_index = np.full(out_span, -1.0)
        status = lib.conv_maps(HOST_KINDS[kind], ctypes.c_void_p(p[0]),
                               a_offsets.ctypes.data_as(ctypes.c_void_p),
                               b_offsets.ctypes.data_as(ctypes.c_void_p),
                               out_index.ctypes.data_as(ctypes.c_void_p))
        assert status == 0, "an offset past the depth or the rows was not -1"

        def gathered(address, offsets):
            """The elements at `offsets` of the operand at `address` (zero where -1)."""
            if offsets.size == 0 or offsets.max() < 0:
                return np.zeros(offsets.shape, c)
            flat = driver.view(E.pointer(address), storage, (int(offsets.max()) + 1,), (1,))
            return np.where(offsets >= 0, flat[np.maximum(offsets, 0)].astype(c), c(0))
        with np.errstate(all="ignore"):
            value = np.matmul(gathered(p[3], a_offsets), gathered(p[2], b_offsets))
        written = np.flatnonzero(out_index >= 0)
        order = out_index[written].astype(np.int64)      # the (batch, row, col) stored there
        assert sorted(order.tolist()) == list(range(batch * m * n)), "outputs not one-to-one"
        value = value.reshape(-1)[order]
        if a["has_bias"]:
            row = (order // n) % m
            channel = (order // (m * n)) % a["groups"] * a["group_out"] + row
            bias = driver.view(E.pointer(p[4]), storage, (a["groups"] * a["group_out"],),
                               (a["bias_stride"],))
            value = value + bias.astype(c)[channel]
        out = driver.view(E.pointer(p[1]), storage, (out_span,), (1,))
        out[written] = value.astype(storage)
        launches.append(kind)

    pattern = re.compile(r"conv_kernel<(\w+), Conv(Forward|Transposed|WeightGrad)>")
    monkeypatch.setattr(E, "_EMULATIONS", [(pattern, run)] + list(E._EMULATIONS))
    return launches


@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_conv_cu_addressing_on_the_host(host_addressing, dtype_name):
    """Forward, input gradient (transposed) and weight gradient of every FORWARD case with a
    channels-last input, every TRANSPOSED case with its backward, a conv1d, and 3-D cases
    (channels-last-3d conv3d, conv_transpose3d), through conv.cu's addressing: bit for bit
    with the reference on integer data."""
    plugins.reset_fallbacks()
    channels_last = LAYOUTS[0][1]
    cases = []
    for case in FORWARD:
        x, weight, bias = forward_tensors(case, dtype_name)
        params = conv_params(case)
        cases.append((lambda *t, params=params: F.conv2d(*t, **params),
                      [channels_last(x), weight] + ([bias] if bias is not None else [])))
    for case in TRANSPOSED:
        n, c, h, w, og, kernel, stride, padding, output_padding, groups, dilation, bias = case
        params = dict(stride=stride, padding=padding, output_padding=output_padding,
                      groups=groups, dilation=dilation)
        inputs = [integers((n, c, h, w), dtype_name, 40),
                  integers((c, og) + kernel, dtype_name, 41)]
        if bias:
            inputs.append(integers((og * groups,), dtype_name, 42))
        cases.append((lambda *t, params=params: F.conv_transpose2d(*t, **params), inputs))
    cases.append((lambda *t: F.conv1d(*t, stride=2, padding=3, dilation=2, groups=2),
                  [integers((3, 6, 31), dtype_name, 43), integers((4, 3, 5), dtype_name, 44)]))
    channels_last_3d = LAYOUTS_3D[0][1]
    for case in FORWARD_3D[1:3] + FORWARD_3D[4:]:
        x, weight, bias = forward_3d_tensors(case, dtype_name, seed=10)
        cases.append((lambda *t, params=conv3d_params(case): F.conv3d(*t, **params),
                      [channels_last_3d(x), weight] + ([bias] if bias is not None else [])))
    for case in TRANSPOSED_3D[:1]:
        n, c, size, og, kernel, stride, padding, output_padding, groups, dilation, bias = case
        params = dict(stride=stride, padding=padding, output_padding=output_padding,
                      groups=groups, dilation=dilation)
        cases.append((lambda *t, params=params: F.conv_transpose3d(*t, **params),
                      [integers((n, c) + size, dtype_name, 46),
                       integers((c, og) + kernel, dtype_name, 47),
                       integers((og * groups,), dtype_name, 48)]))
    for fn, inputs in cases:
        shape = reference(fn, *inputs).shape
        grad_out = integers(tuple(shape), dtype_name, 45)
        with plugins.use_reference_kernels():
            expected, expected_grads = grads(fn, inputs, grad_out)
        got, got_grads = grads(fn, [t.cuda() for t in inputs], grad_out.cuda())
        assert_exact(got, expected)
        for g, e in zip(got_grads, expected_grads):
            assert_exact(g, e)
    assert plugins.fallbacks() == {}
    assert set(host_addressing) == set(HOST_KINDS)
