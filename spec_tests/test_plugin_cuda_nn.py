"""reftorch-cuda's neural-network kernels against the cpu reference: nll_loss and
nll_loss_backward (kernels/loss.cu), cross_entropy end to end, layer_norm's backward, batch
norm (kernels/batchnorm.cu) and group norm (kernels/group_norm.cu) with its backward.

Launch tests run on a real GPU when there is one and on the emulated driver. The loss sums
run in block_reduce's order, not NumPy's pairwise one, so sums are compared within the two
orders' rounding bounds, and the kernel's own order is checked bit for bit against a NumPy
model of it; per-row losses and gradients are the reference's products exactly.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

import reftorch
from reftorch import plugins
import reftorch.nn.functional as F

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch._ops import nn_loss as L  # noqa: E402
from reftorch._ops import structured  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_kernels import finfo  # noqa: E402

# The launch fixtures and value helpers of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, host, reference = base.FLOATS, base.host, base.reference

REDUCTIONS = {"none": L.NONE, "mean": L.MEAN, "sum": L.SUM}


def finite_values(shape, dtype_name, seed):
    rng = np.random.default_rng(seed)
    return reftorch.tensor((rng.standard_normal(shape) * 3).astype(np.float32)).to(
        getattr(reftorch, dtype_name))


def targets(n, classes, seed, ignored=(), ignore_index=-100):
    """n int64 targets in [0, classes), rows `ignored` set to ignore_index."""
    values = np.random.default_rng(seed).integers(0, classes, n)
    values[list(ignored)] = ignore_index
    return reftorch.tensor(values.astype(np.int64))


def nll(x, target, weight, reduction, ignore_index=-100):
    """The nll_loss op itself: (loss, total_weight)."""
    return structured.run(L.NLL, (x, target, weight),
                          {"reduction": reduction, "ignore_index": ignore_index})


def cuda(t):
    return None if t is None else t.cuda()


def accumulator_eps(dtype_name):
    return float(np.finfo(np.float64 if dtype_name == "float64" else np.float32).eps)


def assert_loss_close(got, expected, terms, total_weight, reduction, err_msg):
    """Shape, dtype, then values. 'none' is exact (an ignored row's -0.0 in the reference is
    +0 here: equal as numbers). A sum in another order: both orders within (terms in sequence)
    accumulator eps of sum |terms| (the kernel: n / 256 + 8 levels; NumPy: log2 n levels), over
    the total weight for 'mean' (whose own rounding adds as much relative to the mean), plus
    the final rounding to the output dtype."""
    assert got.device.type == "cuda", err_msg
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    if reduction == L.NONE:
        np.testing.assert_array_equal(g, e, err_msg=err_msg)
        return
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    if np.isnan(e):
        return
    n = terms.size
    steps = n / 256 + 8 + np.log2(n + 1) + 1
    magnitude = np.sum(np.abs(terms))
    if reduction == L.MEAN:
        magnitude = magnitude / abs(total_weight) + abs(e)
    allowed = steps * accumulator_eps(got.dtype.name) * magnitude
    allowed += float(finfo(got.dtype.name).eps) * abs(e)
    assert abs(g - e) <= allowed, (err_msg, g, e, allowed)


# --- nll_loss ---------------------------------------------------------------------------------

# name -> (input layout from a (300, 7) tensor, target rows, ignored rows, ignore_index)
NLL_CASES = {
    "rows": (lambda x: x, slice(None), (), -100),
    "ignored_rows": (lambda x: x, slice(None), (0, 5, 299), -100),
    "ignore_index_is_a_class": (lambda x: x, slice(None), (3, 4), 2),
    "transposed": (lambda x: x.t().contiguous().t(), slice(None), (7,), -100),
    "strided_rows": (lambda x: x[::3, 1:], slice(None, None, 3), (), -100),
    "one_row": (lambda x: x[:1], slice(None, 1), (), -100),
    "class_vector": (lambda x: x[4], 4, (), -100),
    "empty": (lambda x: x[:0], slice(0, 0), (), -100),
}


def mover(device):
    """cuda, or the identity: tensors are laid out after the move (a copy to the device is
    dense, whatever the source's strides)."""
    return cuda if device else (lambda t: t)


def nll_case(case, dtype_name, weighted, device=False):
    """(x, target, weight, ignore_index) for one case, on the cpu or the device."""
    arrange, rows, ignored, ignore_index = NLL_CASES[case]
    move = mover(device)
    x = arrange(move(finite_values((300, 7), dtype_name, 1)))
    classes = x.shape[-1]
    target = move(targets(300, classes, 2, ignored, ignore_index))[rows]
    # every other element of a longer tensor: a weight stride of 2
    weight = move(finite_values((2 * classes,), dtype_name, 3).abs())[::2] if weighted \
        else None
    return x, target, weight, ignore_index


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_nll_loss_matches_the_cpu_reference(device_kind, dtype_name, reduction, weighted):
    code = REDUCTIONS[reduction]
    plugins.reset_fallbacks()
    for case in NLL_CASES:
        x, target, weight, ignore_index = nll_case(case, dtype_name, weighted)
        expected_loss, expected_weight = reference(nll, x, target, weight, code, ignore_index)
        terms = host(reference(nll, x, target, weight, L.NONE, ignore_index)[0])
        on = nll_case(case, dtype_name, weighted, device=True)
        loss, total_weight = nll(*on[:3], code, ignore_index)
        tw = float(host(expected_weight))
        assert_loss_close(loss, expected_loss, terms, tw, code, case)
        t = host(target).astype(np.int64)
        counted = t != ignore_index
        weights = host(weight)[np.where(counted, t, 0)] * counted if weighted else counted
        assert_loss_close(total_weight, expected_weight, weights, 1.0, L.SUM, case)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_nll_loss_sum_is_the_blocks_order(device_kind, dtype_name):
    """On a GPU this checks the device code's order bit for bit: thread t adds rows t, t + 256,
    ... then the block's tree (the emulation's block_order_reduce over one chunk)."""
    from spec_tests.cuda_kernel_emulation import block_order_reduce
    x = finite_values((1000, 5), dtype_name, 4)
    target = targets(1000, 5, 5, ignored=(10, 20))
    terms = host(reference(nll, x, target, None, L.NONE)[0]).astype(
        np.float64 if dtype_name == "float64" else np.float32)
    model = block_order_reduce(terms, terms.dtype.type(0), np.add, 1000)
    loss, total_weight = nll(x.cuda(), target.cuda(), None, L.SUM)
    np.testing.assert_array_equal(host(loss), model)
    assert float(host(total_weight)) == 998.0
    mean, _ = nll(x.cuda(), target.cuda(), None, L.MEAN)
    np.testing.assert_array_equal(host(mean), model / terms.dtype.type(998))
    if device_kind is not None:
        assert f"nll_loss_kernel<{'double' if dtype_name == 'float64' else 'float'}>" in \
            device_kind.launches


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_nll_loss_with_every_target_ignored(device_kind, dtype_name):
    """'mean' is 0 / 0 = NaN, 'sum' 0 and the total weight 0, as the reference's."""
    x = finite_values((5, 3), dtype_name, 6)
    target = reftorch.full((5,), -100, dtype=reftorch.int64)
    for code in REDUCTIONS.values():
        expected = reference(nll, x, target, None, code)
        got = nll(x.cuda(), target.cuda(), None, code)
        for g, e in zip(got, expected):
            assert g.shape == e.shape and g.dtype is e.dtype
            np.testing.assert_array_equal(host(g), host(e))
    assert math.isnan(float(host(nll(x.cuda(), target.cuda(), None, L.MEAN)[0])))
    # the gradient selects, so the mean's 0 / 0 leaks no NaN: zeros
    grad, total_weight = (reftorch.ones((), dtype=x.dtype).cuda(),
                          reftorch.zeros((), dtype=x.dtype).cuda())
    got = L.nll_loss_backward(grad, x.cuda(), target.cuda(), None, L.MEAN, -100, total_weight)
    np.testing.assert_array_equal(host(got), np.zeros((5, 3)))


BAD_TARGETS = {  # name -> (targets of a (4, 3) input, ignore_index)
    "too_large": ([0, 3, 1, 2], -100),
    "negative": ([0, 1, -1, 2], -100),
    "first_of_two": ([2, -100, 7, -5], -100),
    "huge": ([0, 1, 2, 2 ** 62], 1),
    "after_an_ignored_one": ([-7, 9, 1, 1], -7),
}


@pytest.mark.parametrize("case", BAD_TARGETS)
def test_bad_targets_raise_the_reference_error(device_kind, case):
    values, ignore_index = BAD_TARGETS[case]
    x = finite_values((4, 3), "float32", 7)
    target = reftorch.tensor(values, dtype=reftorch.int64)
    with pytest.raises(IndexError) as expected:
        reference(nll, x, target, None, L.MEAN, ignore_index)
    plugins.reset_fallbacks()
    with pytest.raises(IndexError) as got:
        nll(x.cuda(), target.cuda(), None, L.MEAN, ignore_index)
    assert str(got.value) == str(expected.value)
    grad, total_weight = reftorch.ones(()).cuda(), reftorch.ones(()).cuda()
    with pytest.raises(IndexError) as got_backward:
        L.nll_loss_backward(grad, x.cuda(), target.cuda(), None, L.MEAN, ignore_index,
                            total_weight)
    assert str(got_backward.value) == str(expected.value)
    assert plugins.fallbacks() == {}  # raised by the cuda kernels, not by a fallback


def test_a_bad_target_of_a_class_vector_raises(device_kind):
    x = finite_values((3,), "float64", 8)
    target = reftorch.tensor(3, dtype=reftorch.int64)
    with pytest.raises(IndexError, match="Target 3 is out of bounds."):
        nll(x.cuda(), target.cuda(), None, L.SUM)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_nll_loss_backward_matches_the_cpu_reference(device_kind, dtype_name, reduction,
                                                     weighted):
    """Exact but for 'mean', whose total weight is a sum in another order (its rounding, a few
    accumulator ulp, reaches the gradient)."""
    plugins.reset_fallbacks()
    for case in NLL_CASES:
        grads = []
        for on_device in (False, True):
            x, target, weight, ignore_index = nll_case(case, dtype_name, weighted, on_device)
            g = finite_values(x.shape[:1] if reduction == "none" and x.ndim == 2 else (),
                              dtype_name, 9)
            leaf = x.detach().requires_grad_(True)
            oracle = contextlib.nullcontext() if on_device else plugins.use_reference_kernels()
            with oracle:
                loss = F.nll_loss(leaf, target, weight, ignore_index=ignore_index,
                                  reduction=reduction)
                loss.backward(mover(on_device)(g))
            grads.append(leaf.grad)
        expected, got = grads
        assert got.device.type == "cuda" and got.shape == expected.shape, case
        assert got.dtype is expected.dtype, case
        e, d = host(expected), host(got)
        ulps = 16 * accumulator_eps(dtype_name) if reduction == "mean" else 0.0
        allowed = (ulps + (float(finfo(dtype_name).eps) if ulps else 0.0)) * np.abs(e)
        assert np.all(np.abs(d - e) <= allowed), case
    assert plugins.fallbacks() == {}


# name -> (input layout from a (3, 5, 4, 6) tensor, target layout from a (3, 4, 6) view of
# stride 2 along the last dim)
SPATIAL_CASES = {
    "nchw": (lambda x: x, lambda t: t),
    "channels_last": (lambda x: x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
                      lambda t: t),
    "contiguous_target": (lambda x: x, lambda t: t.contiguous()),
    "three_dims": (lambda x: x.reshape(3, 5, 24), lambda t: t.reshape(3, 24)),
    "five_dims": (lambda x: x.reshape(3, 5, 2, 2, 6), lambda t: t.reshape(3, 2, 2, 6)),
    "strided_width": (lambda x: x[..., ::2], lambda t: t[..., ::2]),
    "empty_batch": (lambda x: x[:0], lambda t: t[:0]),
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_nll_loss_with_spatial_dims_matches_the_cpu_reference(device_kind, dtype_name,
                                                              reduction):
    """nll_loss2d's form: every position of the spatial dims is a row; the loss and its
    gradient (nll_loss2d_backward) on the device."""
    base_x = finite_values((3, 5, 4, 6), dtype_name, 40)
    base_target = targets(144, 5, 41, ignored=(0, 67)).reshape(3, 4, 12)
    weight = finite_values((5,), dtype_name, 42).abs()
    plugins.reset_fallbacks()
    for case, (arrange_x, arrange_t) in SPATIAL_CASES.items():
        x, target = arrange_x(base_x), arrange_t(base_target[..., ::2])
        terms = host(reference(lambda *a: F.nll_loss(*a, reduction="none"), x, target, weight))
        t = host(target).astype(np.int64)
        tw = float(np.sum(host(weight)[np.where(t == -100, 0, t)] * (t != -100)))
        grads = []
        for move in (lambda v: v, cuda):
            leaf = arrange_x(move(base_x)).detach().requires_grad_(True)
            oracle = contextlib.nullcontext() if move is cuda else \
                plugins.use_reference_kernels()
            with oracle:
                loss = F.nll_loss(leaf, arrange_t(move(base_target)[..., ::2]), move(weight),
                                  reduction=reduction)
                loss.backward(move(finite_values(loss.shape, dtype_name, 43)))
            grads.append((loss, leaf.grad))
        (expected, expected_grad), (got, got_grad) = grads
        assert_loss_close(got, expected, terms, tw, REDUCTIONS[reduction], case)
        e, d = host(expected_grad), host(got_grad)
        ulps = 16 * accumulator_eps(dtype_name) + float(finfo(dtype_name).eps) \
            if reduction == "mean" else 0.0
        assert got_grad.shape == expected_grad.shape, case
        assert np.all(np.abs(d - e) <= ulps * np.abs(e)), case
    assert plugins.fallbacks() == {}


def test_nll_loss_declines_what_it_does_not_handle(device_kind):
    x = finite_values((2, 3, 4, 4), "float32", 10)
    target = targets(32, 3, 11).reshape(2, 4, 4)
    plugins.reset_fallbacks()
    got = F.nll_loss(x.cuda()[..., :2], target.cuda()[..., :2])   # H and W do not coalesce
    expected = reference(F.nll_loss, x[..., :2], target[..., :2])
    np.testing.assert_allclose(host(got), host(expected), rtol=1e-6)
    assert plugins.fallbacks() == {("nll_loss", "cuda", reftorch.float32): 1}
    x2, bytes_target = finite_values((4, 3), "float32", 12), targets(4, 3, 13).to(reftorch.uint8)
    plugins.reset_fallbacks()
    F.nll_loss(x2.cuda(), bytes_target.cuda())          # uint8 targets
    assert plugins.fallbacks() == {("nll_loss", "cuda", reftorch.float32): 1}


# --- mse_loss ----------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_mse_loss_runs_on_the_device_forward_and_backward(device_kind, dtype_name, reduction):
    x, t = finite_values((7, 9), dtype_name, 1), finite_values((7, 9), dtype_name, 2)
    xc = x.cuda().requires_grad_()
    plugins.reset_fallbacks()
    loss = F.mse_loss(xc, t.cuda(), reduction=reduction)
    (loss.sum() if reduction == "none" else loss).backward()
    assert plugins.fallbacks() == {}
    xr = x.clone().requires_grad_()
    with plugins.use_reference_kernels():
        expected = F.mse_loss(xr, t, reduction=reduction)
        (expected.sum() if reduction == "none" else expected).backward()
    squares = host(x - t) ** 2
    eps = accumulator_eps(dtype_name)
    if reduction == "none":   # the reference's products exactly
        np.testing.assert_array_equal(host(loss), host(expected))
    else:                     # block order vs pairwise: each within n eps of the sum
        scale = 1 / squares.size if reduction == "mean" else 1
        assert abs(host(loss) - host(expected)) <= 2 * squares.size * eps * squares.sum() * scale
    assert not np.all(host(xc.grad) == 0)
    np.testing.assert_allclose(host(xc.grad), host(xr.grad), rtol=4 * eps, atol=0)


def test_mse_loss_declines_16_bit_and_mixed_dtypes():
    from reftorch_cuda import ops_loss
    h, f = reftorch.ones(2, dtype=reftorch.float16), reftorch.ones(2)
    assert ops_loss.mse_loss_kernel(None, (h, h), (h.dtype,) * 3, {}) is NotImplemented
    assert ops_loss.mse_loss_kernel(None, (f, f.double()), (f.dtype,) * 3, {}) \
        is NotImplemented


# --- cross_entropy end to end -----------------------------------------------------------------

@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_cross_entropy_runs_on_the_device_forward_and_backward(device_kind, dtype_name,
                                                               weighted):
    x = finite_values((64, 10), dtype_name, 14)
    target = targets(64, 10, 15, ignored=(3, 40))
    weight = finite_values((10,), dtype_name, 16).abs() if weighted else None
    leaf = x.detach().requires_grad_(True)
    with plugins.use_reference_kernels():
        expected_loss = F.cross_entropy(leaf, target, weight)
        expected_loss.backward()
    plugins.reset_fallbacks()
    device_leaf = x.detach().cuda().requires_grad_(True)
    loss = F.cross_entropy(device_leaf, target.cuda(), cuda(weight))
    loss.backward()
    assert plugins.fallbacks() == {}
    assert loss.device.type == "cuda" and device_leaf.grad.device.type == "cuda"
    if device_kind is not None:
        kernels = {name.split("<")[0] for name in device_kind.launches}
        assert {"softmax_kernel", "nll_check_targets_kernel", "nll_loss_kernel",
                "nll_loss_backward_kernel", "softmax_backward_kernel"} <= kernels
    # log_softmax and the sums differ from the reference's by rounding: a few ulp of the row
    bound = 64 * float(finfo(dtype_name).eps)
    np.testing.assert_allclose(host(loss), host(expected_loss), rtol=bound, atol=bound)
    e, g = host(leaf.grad), host(device_leaf.grad)
    scale = np.max(np.abs(e), axis=1, keepdims=True)
    assert np.all(np.abs(g - e) <= bound * (np.abs(e) + scale))


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_cross_entropy_over_images_runs_on_the_device(device_kind, dtype_name):
    x = finite_values((2, 5, 3, 4), dtype_name, 44)
    target = targets(24, 5, 45, ignored=(7,)).reshape(2, 3, 4)
    leaf = x.detach().requires_grad_(True)
    with plugins.use_reference_kernels():
        expected_loss = F.cross_entropy(leaf, target)
        expected_loss.backward()
    plugins.reset_fallbacks()
    device_leaf = x.detach().cuda().requires_grad_(True)
    loss = F.cross_entropy(device_leaf, target.cuda())
    loss.backward()
    assert plugins.fallbacks() == {}
    bound = 64 * float(finfo(dtype_name).eps)
    np.testing.assert_allclose(host(loss), host(expected_loss), rtol=bound, atol=bound)
    e, g = host(leaf.grad), host(device_leaf.grad)
    assert np.all(np.abs(g - e) <= bound * (np.abs(e) + np.max(np.abs(e))))


# --- layer_norm backward ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype_name", FLOATS)
def test_layer_norm_backward_runs_on_the_device(device_kind, dtype_name):
    """native_layer_norm_backward runs on the device as the autograd row's composition of
    device ops: nothing falls back."""
    x = finite_values((6, 40), dtype_name, 17)
    weight, bias = finite_values((40,), dtype_name, 18), finite_values((40,), dtype_name, 19)
    g = finite_values((6, 40), dtype_name, 20)
    leaves = [t.detach().requires_grad_(True) for t in (x, weight, bias)]
    with plugins.use_reference_kernels():
        F.layer_norm(leaves[0], (40,), leaves[1], leaves[2]).backward(g)
    device_leaves = [t.detach().cuda().requires_grad_(True) for t in (x, weight, bias)]
    plugins.reset_fallbacks()
    F.layer_norm(device_leaves[0], (40,), device_leaves[1], device_leaves[2]).backward(g.cuda())
    fallbacks = plugins.fallbacks()
    for expected, got in zip(leaves, device_leaves):
        e, d = host(expected.grad), host(got.grad)
        bound = 256 * accumulator_eps(dtype_name) + float(finfo(dtype_name).eps)
        assert np.all(np.abs(d - e) <= bound * (np.abs(e) + np.max(np.abs(e))))
    assert fallbacks == {}


# --- batch_norm -------------------------------------------------------------------------------

BATCH_NORM_CASES = {  # name -> input layout from a (4, 3, 5, 6) tensor
    "nchw": lambda x: x,
    "channels_last": lambda x: x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    "two_dims": lambda x: x[:, :, 0, 0],
    "three_dims": lambda x: x.reshape(4, 3, 30),
    "channel_slice": lambda x: x[:, 1:],
    "batch_of_one": lambda x: x[:1],
    "one_element_per_channel": lambda x: x[:1, :, 0, 0],
}


def assert_near(got, expected, ulps, err_msg):
    """Shape, dtype, then values within `ulps` accumulator ulp of each value plus as many of
    the largest (the statistics are sums in another order than NumPy's; the gradients
    cancel), and 2 ulp of the output dtype (a 16-bit value may round the other way)."""
    assert got.device.type == "cuda", err_msg
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    np.testing.assert_array_equal(np.isinf(g), np.isinf(e), err_msg=err_msg)
    finite = np.isfinite(e)
    if not finite.any():
        return
    scale = np.max(np.abs(e[finite]))
    eps = ulps * accumulator_eps(got.dtype.name) + 2 * float(finfo(got.dtype.name).eps)
    allowed = eps * (np.abs(e[finite]) + scale)
    assert np.all(np.abs(g[finite] - e[finite]) <= allowed), (err_msg, np.max(np.abs(
        g[finite] - e[finite])), scale)


def batch_norm_operands(dtype_name, channels, affine, running):
    weight = finite_values((channels,), dtype_name, 21) if affine else None
    bias = finite_values((channels,), dtype_name, 22) if affine else None
    mean = finite_values((channels,), dtype_name, 23) if running else None
    var = finite_values((channels,), dtype_name, 24).abs() + 0.5 if running else None
    return weight, bias, mean, var


# mode -> (training, running statistics given); evaluation needs them
BATCH_NORM_MODES = {"training": (True, True), "training_without_running_stats": (True, False),
                    "eval": (False, True)}


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("mode", BATCH_NORM_MODES)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_batch_norm_matches_the_cpu_reference(device_kind, dtype_name, mode, affine):
    from reftorch._ops.nn_normalization import native_batch_norm
    training, running = BATCH_NORM_MODES[mode]
    base_x = finite_values((4, 3, 5, 6), dtype_name, 20) + 1.5
    plugins.reset_fallbacks()
    for case, arrange in BATCH_NORM_CASES.items():
        x = arrange(base_x)
        weight, bias, mean, var = batch_norm_operands(dtype_name, x.shape[1], affine, running)
        on = [cuda(t) for t in (x, weight, bias, mean, var)]  # before the cpu update
        expected = reference(native_batch_norm, x, weight, bias, mean, var, training, 0.1,
                             1e-5)
        got = native_batch_norm(arrange(base_x.cuda()), *on[1:], training, 0.1, 1e-5)
        for name, g, e in zip(("output", "save_mean", "save_rstd"), got, expected):
            assert_near(g, e, 64, f"{case} {name}")
        if running and training:  # updated in place on both sides
            assert_near(on[3], mean, 64, f"{case} running_mean")
            assert_near(on[4], var, 64, f"{case} running_var")
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_batch_norm_statistics_are_the_blocks_order(device_kind, dtype_name):
    """On a GPU this checks the device code's order bit for bit: a channel's elements in
    (batch, inner) order, thread t taking t, t + 256, ..., then the block's tree."""
    from reftorch._ops.nn_normalization import native_batch_norm
    from spec_tests.cuda_kernel_emulation import block_order_reduce
    x = finite_values((7, 2, 100), dtype_name, 25)
    wide = host(x).astype(np.float64 if dtype_name == "float64" else np.float32)
    per_channel = wide.transpose(1, 0, 2).reshape(2, 700)
    model = block_order_reduce(per_channel, wide.dtype.type(0), np.add, 700) / \
        wide.dtype.type(700)
    _, mean, _ = native_batch_norm(x.cuda(), None, None, None, None, True, 0.1, 1e-5)
    np.testing.assert_array_equal(host(mean), model)


@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_batch_norm_backward_matches_the_cpu_reference(device_kind, dtype_name, affine):
    """float32/float64 through native_batch_norm_backward; the 16-bit types through the
    reference's composition in float32, whose ops all run on the device too."""
    base_x = finite_values((4, 3, 5, 6), dtype_name, 26)
    base_g = finite_values((4, 3, 5, 6), dtype_name, 27)
    plugins.reset_fallbacks()
    for case, arrange in BATCH_NORM_CASES.items():
        if case == "one_element_per_channel":
            continue  # F.batch_norm refuses to train on it
        channels = arrange(base_x).shape[1]
        weight, bias, _, _ = batch_norm_operands(dtype_name, channels, True, False)
        grads = []
        for move in (lambda t: t, cuda):
            leaves = [t.detach().requires_grad_(True)
                      for t in (arrange(move(base_x)), move(weight), move(bias))]
            oracle = contextlib.nullcontext() if move is cuda else plugins.use_reference_kernels()
            with oracle:
                F.batch_norm(leaves[0], None, None, leaves[1] if affine else None,
                             leaves[2] if affine else None, training=True).backward(
                                 arrange(move(base_g)))
            grads.append([leaf.grad for leaf in leaves])
        for name, e, d in zip(("input", "weight", "bias"), *grads):
            if not affine and name != "input":
                assert d is None and e is None
                continue
            assert_near(d, e, 256, f"{case} grad {name}")
    assert plugins.fallbacks() == {}
    if device_kind is not None:
        fused = any(k.startswith("batch_norm_backward_kernel") for k in device_kind.launches)
        assert fused == (dtype_name in ("float32", "float64"))


def test_batch_norm_backward_output_mask(device_kind):
    from reftorch._ops.nn_normalization import batch_norm_backward, native_batch_norm
    x, g = finite_values((4, 3, 10), "float64", 28), finite_values((4, 3, 10), "float64", 29)
    weight = finite_values((3,), "float64", 30)
    _, mean, rstd = reference(native_batch_norm, x, weight, None, None, None, True, 0.1, 1e-5)
    for mask in [(True, False, False), (False, True, True), (False, False, True)]:
        expected = reference(batch_norm_backward, g, x, weight, mean, rstd, mask)
        got = batch_norm_backward(*(t.cuda() for t in (g, x, weight, mean, rstd)), mask)
        for wanted, d, e in zip(mask, got, expected):
            assert (d is None) == (not wanted) and (e is None) == (not wanted)
            if wanted:
                assert_near(d, e, 256, str(mask))


def test_batch_norm_declines_what_it_does_not_handle(device_kind):
    from reftorch._ops.nn_normalization import native_batch_norm
    x = finite_values((4, 3, 5, 6), "float32", 31)
    weight = finite_values((3,), "float32", 32)
    for arrange, dtype in ((lambda t: t[..., :3], reftorch.float32),    # spatial dims apart
                           (lambda t: t.half(), reftorch.float16)):     # float32 weight
        plugins.reset_fallbacks()
        got = native_batch_norm(arrange(x.cuda()), weight.cuda(), None, None, None, True, 0.1,
                                1e-5)
        expected = reference(native_batch_norm, arrange(x), weight, None, None, None, True,
                             0.1, 1e-5)
        np.testing.assert_array_equal(host(got[0]), host(expected[0]))
        assert plugins.fallbacks() == {("native_batch_norm", "cuda", dtype): 1}


# --- group_norm -------------------------------------------------------------------------------

GROUP_NORM_CASES = {  # name -> (input layout from a (4, 6, 5, 7) tensor, groups)
    "nchw": (lambda x: x, 3),
    "one_group": (lambda x: x, 1),
    "a_group_per_channel": (lambda x: x, 6),
    "channels_last": (lambda x: x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2), 2),
    "two_dims": (lambda x: x[:, :, 0, 0], 3),
    "three_dims": (lambda x: x.reshape(4, 6, 35), 2),
    "channel_slice": (lambda x: x[:, 2:], 2),
    "strided_batch": (lambda x: x[::2, :, 1:], 3),
    "batch_of_one": (lambda x: x[:1], 6),
    "long_rows": (lambda x: x.reshape(1, 6, 140), 1),     # 840 elements: 4 thread sweeps
}


def group_norm_operands(dtype_name, channels, affine):
    if not affine:
        return None, None
    return finite_values((channels,), dtype_name, 31), finite_values((channels,), dtype_name, 32)


@pytest.mark.parametrize("affine", ["weight_and_bias", "weight", "none"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_group_norm_matches_the_cpu_reference(device_kind, dtype_name, affine):
    from reftorch._ops.nn_normalization import native_group_norm
    base_x = finite_values((4, 6, 5, 7), dtype_name, 30) + 0.75
    plugins.reset_fallbacks()
    for case, (arrange, groups) in GROUP_NORM_CASES.items():
        x = arrange(base_x)
        N, C = x.shape[0], x.shape[1]
        HxW = math.prod(x.shape[2:])
        weight, bias = group_norm_operands(dtype_name, C, affine != "none")
        if affine == "weight":
            bias = None
        expected = reference(native_group_norm, x, weight, bias, N, C, HxW, groups, 1e-5)
        got = native_group_norm(arrange(base_x.cuda()), cuda(weight), cuda(bias), N, C, HxW,
                                groups, 1e-5)
        assert got[0].is_contiguous()
        for name, g, e in zip(("output", "mean", "rstd"), got, expected):
            assert_near(g, e, 64, f"{case} {name}")
    assert plugins.fallbacks() == {}


def test_group_norm_parameters_may_be_strided(device_kind):
    from reftorch._ops.nn_normalization import native_group_norm
    x = finite_values((3, 4, 9), "float32", 33)
    parameters = finite_values((2, 8), "float32", 34)
    weight, bias = parameters[0, ::2], parameters[1, 1::2]   # stride 2
    expected = reference(native_group_norm, x, weight, bias, 3, 4, 9, 2, 1e-3)
    got = native_group_norm(x.cuda(), weight.cuda(), bias.cuda(), 3, 4, 9, 2, 1e-3)
    for name, g, e in zip(("output", "mean", "rstd"), got, expected):
        assert_near(g, e, 64, name)


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_group_norm_statistics_are_the_blocks_order(device_kind, dtype_name):
    """On a GPU this checks the device code's order bit for bit: a group's elements in
    (channel, position) order, thread t taking t, t + 256, ..., then the block's tree."""
    from reftorch._ops.nn_normalization import native_group_norm
    from spec_tests.cuda_kernel_emulation import block_order_reduce
    x = finite_values((2, 6, 130), dtype_name, 35)
    wide = host(x).astype(np.float64 if dtype_name == "float64" else np.float32)
    per_group = wide.reshape(2, 3, 260)
    model = block_order_reduce(per_group, wide.dtype.type(0), np.add, 260) / \
        wide.dtype.type(260)
    _, mean, _ = native_group_norm(x.transpose(1, 2).contiguous().transpose(1, 2).cuda(),
                                   None, None, 2, 6, 130, 3, 1e-5)
    np.testing.assert_array_equal(host(mean), model)


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_group_norm_backward_runs_on_the_device(device_kind, dtype_name):
    """NativeGroupNormBackward0 is a composition of reftorch ops (reshape, sums, products):
    every one of them is served on cuda, so the backward has no fallback either."""
    x = finite_values((3, 4, 6, 5), dtype_name, 36)
    weight, bias = finite_values((4,), dtype_name, 37), finite_values((4,), dtype_name, 38)
    g = finite_values((3, 4, 6, 5), dtype_name, 39)
    leaves = [t.detach().requires_grad_(True) for t in (x, weight, bias)]
    with plugins.use_reference_kernels():
        F.group_norm(leaves[0], 2, leaves[1], leaves[2]).backward(g)
    device_leaves = [t.detach().cuda().requires_grad_(True) for t in (x, weight, bias)]
    plugins.reset_fallbacks()
    F.group_norm(device_leaves[0], 2, device_leaves[1], device_leaves[2]).backward(g.cuda())
    fallbacks = plugins.fallbacks()
    for expected, got in zip(leaves, device_leaves):
        e, d = host(expected.grad), host(got.grad)
        bound = 256 * accumulator_eps(dtype_name) + float(finfo(dtype_name).eps)
        assert np.all(np.abs(d - e) <= bound * (np.abs(e) + np.max(np.abs(e))))
    assert fallbacks == {}


def test_group_norm_declines_what_it_does_not_handle(device_kind):
    from reftorch._ops.nn_normalization import native_group_norm
    from reftorch_cuda import ops_norm
    x = finite_values((2, 4, 3), "float16", 40)
    weight = finite_values((4,), "float32", 41)
    plugins.reset_fallbacks()
    got = native_group_norm(x.cuda(), weight.cuda(), None, 2, 4, 3, 2, 1e-5)   # mixed dtypes
    expected = reference(native_group_norm, x, weight, None, 2, 4, 3, 2, 1e-5)
    for g, e in zip(got, expected):
        assert_near(g, e, 64, "mixed")
    assert plugins.fallbacks() == {("native_group_norm", "cuda", reftorch.float16): 1}
    f32 = reftorch.float32
    y = finite_values((2, 4, 3, 5), "float32", 42).cuda()
    params = {"N": 2, "C": 4, "HxW": 15, "group": 2, "eps": 1e-5}
    kernel = ops_norm.group_norm_kernel
    assert kernel(None, (y[:, :, :, ::2].transpose(2, 3), None, None), (f32,) * 3,
                  {**params, "HxW": 9}) is NotImplemented     # spatial dims do not coalesce
    assert kernel(None, (y, None, None), (f32,) * 3, {**params, "group": 3}) \
        is NotImplemented                                     # C not divisible
    assert kernel(None, (y[:, :, :0], None, None), (f32,) * 3, {**params, "HxW": 0}) \
        is NotImplemented                                     # empty groups: the reference's NaN
    assert kernel(None, (y[:0], None, None), (f32,) * 3, {**params, "N": 0}) \
        is NotImplemented                                     # no rows: the reference decides
    assert kernel(None, (y.cpu(), None, None), (f32,) * 3, params) is NotImplemented
