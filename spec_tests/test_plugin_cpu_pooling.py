"""The C plugin's pooling and batch / group normalization (reftorch_cpu.pooling over _pool)
against the reference kernels.

Every comparison runs the same call twice on the same inputs: with the plugin, then inside
`reftorch.plugins.use_reference_kernels()`; `_pool.calls()` tells whether C really ran.
Pooling (max with indices, avg, adaptive avg, and the avg / adaptive backward ops) must be
bit-equal to the reference, NaN and ties included. Batch / group norm sum their statistics
in double where the reference sums in the element type, so their results are compared
within bounds derived from the float32 rounding (and the plugin's statistics against a
float64 computation of the exact ones). Results must not depend on the thread count or the
instruction-set clone.
"""
import contextlib
import math
import os
import time

import numpy as np
import pytest

import reftorch

try:
    import reftorch_cpu
    from reftorch_cpu import _pool, pooling
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

F = reftorch.nn.functional
F32, F64 = reftorch.float32, reftorch.float64
DTYPES = [F32, F64]


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


# ---------------------------------------------------------------------------------------------
# Helpers

def values(shape, dtype, seed, special=False, ties=False, loc=0.0):
    """Normal values (or small integers: many ties); `special` mixes in NaN and +-inf."""
    rng = np.random.default_rng(seed)
    if ties:
        a = rng.integers(-2, 3, shape).astype(dtype.numpy_dtype)
    else:
        a = np.asarray(rng.standard_normal(shape) * 3 + loc, dtype=dtype.numpy_dtype)
    if special and a.size:
        flat = a.reshape(-1)
        where = rng.choice(flat.size, size=min(flat.size, max(6, flat.size // 20)),
                           replace=False)
        flat[where] = np.resize([np.nan, np.inf, -np.inf, np.nan, -np.inf, -0.0], where.size)
    return a


LAYOUTS = ["contiguous", "transposed", "strided", "channels_last", "batch_transposed"]


def tensor(shape, dtype, seed, layout="contiguous", **kw):
    """A tensor of `shape` (N, C, H, W) or (C, H, W) laid out as named: H and W swapped in
    memory, every other column of a wider tensor, channels last, or C outside N."""
    n = len(shape)
    if layout == "contiguous":
        return reftorch.from_numpy(values(shape, dtype, seed, **kw))
    if layout == "transposed":
        base = shape[:-2] + (shape[-1], shape[-2])
        return reftorch.from_numpy(values(base, dtype, seed, **kw)).transpose(-1, -2)
    if layout == "strided":
        wide = reftorch.from_numpy(values(shape[:-1] + (2 * shape[-1],), dtype, seed, **kw))
        return wide[..., ::2]
    if layout == "channels_last":   # (.., H, W, C) memory
        c = n - 3
        base = shape[:c] + shape[c + 1:] + (shape[c],)
        order = list(range(c)) + [n - 1] + list(range(c, n - 1))
        return reftorch.from_numpy(values(base, dtype, seed, **kw)).permute(*order)
    if layout == "batch_transposed":
        if n == 3:
            return tensor(shape, dtype, seed, "strided", **kw)
        base = (shape[1], shape[0]) + shape[2:]
        return reftorch.from_numpy(values(base, dtype, seed, **kw)).transpose(0, 1)
    raise ValueError(layout)


def both(fn):
    """fn() with the plugin and under the reference kernels, and how many C calls ran."""
    before = _pool.calls()
    got = fn()
    ran = _pool.calls() - before
    with reftorch.plugins.use_reference_kernels():
        expected = fn()
    return got, expected, ran


def arrays(result):
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [t.numpy() for t in items]


def assert_same(got, expected):
    """Bit-equal values (NaN payloads aside), same dtypes, shapes and strides."""
    g_items = got if isinstance(got, (tuple, list)) else (got,)
    e_items = expected if isinstance(expected, (tuple, list)) else (expected,)
    assert len(g_items) == len(e_items)
    for g, e in zip(g_items, e_items):
        assert g.dtype == e.dtype and tuple(g.shape) == tuple(e.shape)
        assert g.stride() == e.stride()
        a, b = g.numpy(), e.numpy()
        assert np.array_equal(a, b, equal_nan=True)
        # signed zeros too
        both_zero = (a == 0) & (b == 0)
        assert np.array_equal(np.signbit(a[both_zero]), np.signbit(b[both_zero]))


# ---------------------------------------------------------------------------------------------
# Max pooling (values and indices: bit for bit)

MAX_CASES = {
    "k2": dict(kernel_size=2),
    "k3 s2 p1": dict(kernel_size=3, stride=2, padding=1),
    "k3 s1 p1": dict(kernel_size=3, stride=1, padding=1),
    "k2 s1": dict(kernel_size=2, stride=1),
    "rect dilated ceil": dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1),
                              dilation=(2, 1), ceil_mode=True),
    "k2 ceil": dict(kernel_size=2, ceil_mode=True),
    "k3 s3 p1 ceil": dict(kernel_size=3, stride=3, padding=1, ceil_mode=True),
    "k4 s3 dil2 p3": dict(kernel_size=4, stride=3, padding=3, dilation=2),
    "kernel larger than input": dict(kernel_size=(3, 3), padding=1, stride=1),
    # windows of 16+ elements with strides over 2: a window at a time (pool.c's max_window)
    "k4 s4": dict(kernel_size=4, stride=4),
    "k5x4 s3 p1": dict(kernel_size=(5, 4), stride=3, padding=1),
    "k6 s3 ceil": dict(kernel_size=6, stride=(3, 4), ceil_mode=True),
    "k10x12 s3": dict(kernel_size=(10, 12), stride=3),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", list(MAX_CASES))
def test_max_pool2d(dtype, layout, case):
    shape = (2, 3, 2, 2) if case == "kernel larger than input" else (2, 3, 11, 13)
    for special, ties in ((False, False), (True, False), (False, True)):
        x = tensor(shape, dtype, 1, layout, special=special, ties=ties)
        got, expected, ran = both(lambda: F.max_pool2d(x, return_indices=True,
                                                      **MAX_CASES[case]))
        assert ran == 1
        assert_same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_max_pool2d_nan_and_infinity_rules(dtype):
    """A later NaN wins (its index), ties keep the first, an all -inf window keeps its first
    element's index, padding never wins."""
    nan, inf = np.nan, np.inf
    plane = np.array([[1, nan, 2, 2, -inf, -inf, 5, 5],
                      [nan, 0, 2, 2, -inf, -inf, nan, 7],
                      [3, 3, nan, nan, -inf, inf, 1, 1],
                      [3, 3, nan, 0, -inf, -inf, 1, 1]], dtype=dtype.numpy_dtype)
    x = reftorch.from_numpy(np.stack([plane, -plane])[None])
    for kwargs in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
                   dict(kernel_size=2, stride=1, ceil_mode=True), dict(kernel_size=4, stride=4),
                   dict(kernel_size=(4, 5), stride=3)):
        got, expected, ran = both(lambda: F.max_pool2d(x, return_indices=True, **kwargs))
        assert ran == 1
        assert_same(got, expected)
    torch = pytest.importorskip("torch")   # the oracle: PyTorch's own CPU kernel
    for kwargs in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
                   dict(kernel_size=4, stride=4)):
        values_, indices = F.max_pool2d(x, return_indices=True, **kwargs)
        t_values, t_indices = torch.nn.functional.max_pool2d(torch.from_numpy(x.numpy()),
                                                             return_indices=True, **kwargs)
        assert indices.tolist() == t_indices.tolist()
        np.testing.assert_array_equal(values_.numpy(), t_values.numpy())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2, 2), stride=(2, 1, 1), ceil_mode=True),
    dict(kernel_size=2, dilation=2, padding=1), dict(kernel_size=(1, 3, 3), padding=(0, 1, 1)),
    dict(kernel_size=3, stride=1, padding=1)])
def test_max_pool3d_folds_depth_slices_with_the_2d_rule(dtype, kwargs):
    """max_pool3d: each depth slice's 2-d pool in C, the depth windows folded in depth order;
    NaN (a later one wins), infinities and ties anywhere in the 3-d window give the
    reference's values and indices, batched or not, and the gradient lands where they say."""
    for special, ties in ((False, False), (True, False), (False, True)):
        x = reftorch.from_numpy(values((2, 3, 7, 9, 8), dtype, 3, special=special, ties=ties))
        # contiguous, unbatched, H and W swapped in memory; then C outside N, which leaves
        # no plane stride for the 2-d loop: the reference runs
        for case, runs in ((x, True), (x[0], True), (x.transpose(-1, -2), True),
                           (x.transpose(0, 1).contiguous().transpose(0, 1)[:, ::2], False)):
            got, expected, ran = both(lambda: F.max_pool3d(case, return_indices=True,
                                                          **kwargs))
            assert (ran >= 1) == runs
            assert got[0].shape == expected[0].shape
            np.testing.assert_array_equal(got[0].numpy(), expected[0].numpy())
            assert got[1].tolist() == expected[1].tolist()
    grads = []
    for reference in (False, True):
        leaf = x.clone().nan_to_num().requires_grad_()
        with contextlib.ExitStack() as stack:
            if reference:
                stack.enter_context(reftorch.plugins.use_reference_kernels())
            F.max_pool3d(leaf, **kwargs).square().sum().backward()
        grads.append(leaf.grad.numpy())
    np.testing.assert_array_equal(*grads)


def test_max_pool2d_unbatched_empty_and_declines():
    x = tensor((3, 9, 10), F32, 2, "strided")
    got, expected, ran = both(lambda: F.max_pool2d(x, 3, 2, 1, return_indices=True))
    assert ran == 1
    assert_same(got, expected)
    # an empty batch, half precision and integers run on the reference
    for call in (lambda: F.max_pool2d(reftorch.zeros(0, 2, 4, 4), 2, return_indices=True),
                 lambda: F.max_pool2d(reftorch.ones(1, 2, 6, 6, dtype=reftorch.float16), 2),
                 lambda: F.max_pool2d(reftorch.ones(1, 2, 6, 6, dtype=reftorch.int64), 2)):
        got, expected, ran = both(call)
        assert ran == 0
        assert_same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_max_pool1d_runs_the_2d_kernel(dtype):
    x = tensor((4, 5, 37), dtype, 4, special=True)
    got, expected, ran = both(lambda: F.max_pool1d(x, 3, 2, 1, return_indices=True))
    assert ran == 1
    assert_same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_max_pool2d_gradient(dtype):
    """Forward and backward (the declared max_pool2d_with_indices_backward) both run in C and
    agree with the reference bit for bit."""
    x0 = tensor((2, 3, 10, 9), dtype, 5, ties=True)
    g = tensor((2, 3, 6, 5), dtype, 6)    # the ceil_mode output's shape

    def grad():
        x = x0.detach().clone().requires_grad_()
        y = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
        y.backward(g)
        return x.grad
    got, expected, ran = both(grad)
    assert ran == 2
    assert_same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "channels_last"])
def test_max_pool2d_backward_kernel(dtype, layout):
    """The dedicated backward kernel (registered once reftorch declares the op) against the
    reference's scatter_add gradient: bit for bit, overlapping windows (repeated indices)
    included; an index outside the plane raises IndexError."""
    x0 = tensor((2, 3, 10, 9), dtype, 5, layout, ties=True)
    values_, indices = F.max_pool2d(x0, 3, 1, 1, return_indices=True)
    g = tensor(tuple(values_.shape), dtype, 6, layout)
    before = _pool.calls()
    got = pooling.max_pool2d_backward_kernel(None, (g, x0, indices), (dtype,) * 3, {})
    got_by_shape = pooling.max_pool2d_backward_kernel(None, (g.transpose(0, 1).transpose(0, 1),
                                                              indices), (dtype,) * 3,
                                                      {"input_shape": tuple(x0.shape)})
    assert _pool.calls() - before == 2
    with reftorch.plugins.use_reference_kernels():
        x = x0.detach().clone().requires_grad_()
        F.max_pool2d(x, 3, 1, 1).backward(g)
    expected = x.grad.contiguous()     # .grad takes x's layout; both kernels return row-major
    assert_same(got, expected)
    assert_same(got_by_shape, expected)
    bad = indices.clone()
    bad[1, 2, 3, 4] = 90
    with pytest.raises(IndexError, match="index 90 is out of bounds"):
        pooling.max_pool2d_backward_kernel(None, (g, x0, bad), (dtype,) * 3, {})
    bad[0, 0, 0, 0] = -1
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        pooling.max_pool2d_backward_kernel(None, (g, x0, bad), (dtype,) * 3, {})


# ---------------------------------------------------------------------------------------------
# Average pooling: forward and backward bit for bit

AVG_CASES = {
    "k2": dict(kernel_size=2),
    "k3 s2 p1": dict(kernel_size=3, stride=2, padding=1),
    "k3 s1 p1 exclude pad": dict(kernel_size=3, stride=1, padding=1, count_include_pad=False),
    "k2 s1": dict(kernel_size=2, stride=1),
    "ceil exclude pad": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                             count_include_pad=False),
    "ceil include pad": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "rect divisor": dict(kernel_size=(3, 2), stride=(1, 2), divisor_override=4),
    "negative divisor": dict(kernel_size=2, padding=1, divisor_override=-3),
    "k4 s3 p2": dict(kernel_size=4, stride=3, padding=2),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", list(AVG_CASES))
def test_avg_pool2d_forward_and_backward(dtype, layout, case):
    kwargs = AVG_CASES[case]
    x0 = tensor((2, 3, 11, 13), dtype, 7, layout, special=layout == "contiguous")
    got, expected, ran = both(lambda: F.avg_pool2d(x0, **kwargs))
    assert ran == 1
    assert_same(got, expected)
    g = tensor(tuple(got.shape), dtype, 8, layout)

    def grad():
        x = x0.detach().clone().requires_grad_()
        F.avg_pool2d(x, **kwargs).backward(g)
        return x.grad
    got, expected, ran = both(grad)
    assert ran == 2
    assert_same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_avg_pool2d_signed_zeros_and_expanded_gradient(dtype):
    x = reftorch.from_numpy(np.full((1, 2, 6, 6), -0.0, dtype=dtype.numpy_dtype))
    got, expected, ran = both(lambda: F.avg_pool2d(x, 2))
    assert ran == 1
    assert_same(got, expected)
    assert not np.signbit(got.numpy()).any()    # 0 + (-0) is +0, as the reference sums

    def grad():   # sum().backward() hands the backward op a stride-0 gradient
        x1 = tensor((2, 3, 9, 9), dtype, 9).requires_grad_()
        F.avg_pool2d(x1, 3, 2, 1, ceil_mode=True).sum().backward()
        return x1.grad
    got, expected, ran = both(grad)
    assert ran == 2
    assert_same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_avg_pool2d_double_backward(dtype):
    x0 = tensor((2, 2, 8, 8), dtype, 10)
    g0 = tensor((2, 2, 4, 4), dtype, 11)

    def second():
        x = x0.detach().clone().requires_grad_()
        g = g0.detach().clone().requires_grad_()
        (gx,) = reftorch.autograd.grad(F.avg_pool2d(x, 3, 2, 1), x, g, create_graph=True)
        return reftorch.autograd.grad((gx * gx).sum(), g)[0]
    got, expected, ran = both(second)
    assert ran >= 2
    assert_same(got, expected)


def test_avg_pool1d_and_unbatched():
    x = tensor((3, 40), F32, 12)
    got, expected, ran = both(lambda: F.avg_pool1d(x, 4, 3, 2, ceil_mode=True))
    assert ran == 1
    assert_same(got, expected)
    x = tensor((3, 9, 10), F64, 13, "transposed")
    got, expected, ran = both(lambda: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False))
    assert ran == 1
    assert_same(got, expected)


# ---------------------------------------------------------------------------------------------
# Adaptive average pooling

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "channels_last"])
@pytest.mark.parametrize("size", [(1, 1), (3, 5), (7, 4), (20, 30), (11, 13), (2, 13)],
                         ids=str)
def test_adaptive_avg_pool2d_forward_and_backward(dtype, layout, size):
    x0 = tensor((2, 3, 11, 13), dtype, 14, layout)
    got, expected, ran = both(lambda: F.adaptive_avg_pool2d(x0, size))
    assert ran == 1
    assert_same(got, expected)
    g = tensor((2, 3) + size, dtype, 15, layout)

    def grad():
        x = x0.detach().clone().requires_grad_()
        F.adaptive_avg_pool2d(x, size).backward(g)
        return x.grad
    got, expected, ran = both(grad)
    assert ran == 2
    assert_same(got, expected)


def test_adaptive_avg_pool2d_negative_zero_gradient_and_nan():
    x0 = tensor((1, 2, 8, 8), F32, 16, special=True)
    got, expected, ran = both(lambda: F.adaptive_avg_pool2d(x0, (2, 4)))
    assert ran == 1
    assert_same(got, expected)

    for size in ((4, 2), (1, 1)):    # (1, 1): global pooling's one share per plane
        def grad():
            x = tensor((1, 2, 8, 8), F32, 17).requires_grad_()
            F.adaptive_avg_pool2d(x, size).backward(reftorch.full((1, 2) + size, -0.0))
            return x.grad
        got, expected, ran = both(grad)
        assert ran == 2
        assert_same(got, expected)
        assert not np.signbit(got.numpy()).any()     # 0.0 + (-0.0 / n) is +0.0


# ---------------------------------------------------------------------------------------------
# Batch and group norm (statistics in double: within bounds)

def _depth(x_np, axes):
    count = math.prod(x_np.shape[a] for a in axes)
    return 8 + math.log2(max(count, 2))


def _check_norm(dtype, x_np, got, expected, axes, w_abs=1.0, b_abs=0.0):
    """(output, mean, rstd) of a normalization over `axes` of x_np (the output viewed like
    x_np, the statistics holding one value per reduced slice): the plugin's statistics
    against exact float64 ones (the mean rounded once, rstd within a few ulp), the
    reference's within the rounding of its element-type sums (eps * depth * mean |x|), and
    the output against the reference within what the statistics' differences move it."""
    eps = np.finfo(dtype.numpy_dtype).eps
    eps64 = np.finfo(np.float64).eps
    depth = _depth(x_np, axes)
    x = x_np.astype(np.float64)
    exact_mean = x.mean(axis=axes, keepdims=True)
    rstd_exact = 1 / np.sqrt(((x - exact_mean) ** 2).mean(axis=axes, keepdims=True) + 1e-5)
    mean_abs = np.abs(x).mean(axis=axes, keepdims=True)
    mean_g = got[1].numpy().astype(np.float64).reshape(exact_mean.shape)
    rstd_g = got[2].numpy().astype(np.float64).reshape(exact_mean.shape)
    mean_e = expected[1].numpy().astype(np.float64).reshape(exact_mean.shape)
    rstd_e = expected[2].numpy().astype(np.float64).reshape(exact_mean.shape)
    finite = np.isfinite(exact_mean)
    # the plugin: sums in double, the mean rounded once to the element type
    assert np.all((np.abs(mean_g - exact_mean) <=
                   eps * np.abs(exact_mean) + 2 * eps64 * depth * mean_abs)[finite])
    assert np.all((np.abs(rstd_g - rstd_exact) <=
                   (8 * eps + 2 * eps64 * depth) * rstd_exact)[finite])
    # the reference: pairwise sums in the element type
    assert np.all((np.abs(mean_g - mean_e) <= 2 * eps * depth * mean_abs +
                   eps * np.abs(exact_mean))[finite])
    assert np.all((np.abs(rstd_g - rstd_e) <= (16 + 2 * depth) * eps * rstd_exact)[finite])
    # the output moves by |w| * (|d mean| * rstd + |x - mean| * |d rstd|), plus roundings
    out_g, out_e = got[0].numpy().astype(np.float64), expected[0].numpy().astype(np.float64)
    assert out_g.shape == out_e.shape == x.shape
    x_centered = np.abs(x - exact_mean)
    moved = w_abs * (np.abs(mean_g - mean_e) * rstd_exact +
                     x_centered * np.abs(rstd_g - rstd_e)) * (1 + 16 * eps)
    bound = moved + 4 * eps * (np.abs(out_e) + b_abs + w_abs * x_centered * rstd_exact) + \
        np.finfo(dtype.numpy_dtype).tiny
    ok = np.isfinite(out_e)
    assert np.array_equal(ok, np.isfinite(out_g))
    assert np.array_equal(np.isnan(out_e), np.isnan(out_g))
    assert np.all((np.abs(out_g - out_e) <= bound)[ok])


def _channel(t, ndim):
    """|parameter| shaped to broadcast along dim 1 of an ndim input (1.0 / 0.0 if None)."""
    if t is None:
        return 0.0
    return np.abs(t.numpy().astype(np.float64)).reshape((1, -1) + (1,) * (ndim - 2))


BN_CASES = ["affine running", "affine", "running only", "plain", "eval", "eval plain",
            "2-d input", "3-d input", "batch_transposed", "batch strided"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", BN_CASES)
def test_batch_norm(dtype, case):
    shape = {"2-d input": (40, 6), "3-d input": (5, 6, 30)}.get(case, (4, 6, 7, 9))
    layout = "batch_transposed" if case == "batch_transposed" else "contiguous"
    x = tensor(shape, dtype, 20, layout, loc=2.0)
    if case == "batch strided":
        x = tensor((8,) + shape[1:], dtype, 20, loc=2.0)[::2]
    training = not case.startswith("eval")
    affine = case.startswith("affine") or case == "eval" or case.endswith("input")
    weight = tensor((6,), dtype, 21) if affine else None
    bias = tensor((6,), dtype, 22) if affine else None
    running = case not in ("affine", "plain")
    momentum = 0.3
    stats = []

    def call():
        rm = tensor((6,), dtype, 23) if running else None
        rv = tensor((6,), dtype, 24).abs() + 0.5 if running else None
        stats.append((rm, rv))
        return reftorch.native_batch_norm(x, weight, bias, rm, rv, training, momentum, 1e-5)
    got, expected, ran = both(call)
    assert ran == 1
    assert got[0].stride() == expected[0].stride()
    axes = (0,) + tuple(range(2, len(shape)))
    if not training:   # the running statistics: no sums, bit for bit
        assert got[1].shape == (0,) and got[2].shape == (0,)
        assert_same(got, expected)
        assert_same(stats[0], stats[1])
        return
    w_abs = 1.0 if weight is None else _channel(weight, len(shape))
    _check_norm(dtype, x.numpy(), got, expected, axes, w_abs, _channel(bias, len(shape)))
    if running:   # the in-place update of the running statistics
        (rm_g, rv_g), (rm_e, rv_e) = stats
        eps = np.finfo(dtype.numpy_dtype).eps
        mean_diff = np.abs(got[1].numpy() - expected[1].numpy()).astype(np.float64)
        assert np.all(np.abs(rm_g.numpy() - rm_e.numpy()) <=
                      momentum * mean_diff + 4 * eps * np.abs(rm_e.numpy()))
        np.testing.assert_allclose(rv_g.numpy(), rv_e.numpy(), rtol=(32 + 8 * _depth(
            x.numpy(), axes)) * eps)


def test_batch_norm_special_inputs_and_declines():
    # NaN in one channel: that channel is NaN, the others are normal
    x = tensor((4, 3, 5, 5), F32, 25)
    x[1, 2, 3, 3] = float("nan")
    got, expected, ran = both(lambda: reftorch.native_batch_norm(x, None, None, None, None,
                                                                 True, 0.1, 1e-5))
    assert ran == 1
    assert np.isnan(got[0].numpy()[:, 2]).all() and not np.isnan(got[0].numpy()[:, :2]).any()
    assert np.isnan(got[1].numpy()[2]) and np.isnan(got[2].numpy()[2])
    _check_norm(F32, x.numpy(), got, expected, (0, 2, 3))
    # one element per channel: the running variance gets 0 * inf = NaN, as the reference's
    x1 = tensor((1, 3), F64, 26)
    rms = [(reftorch.zeros(3, dtype=F64), reftorch.ones(3, dtype=F64)) for _ in range(2)]
    got, expected, ran = both(lambda: reftorch.native_batch_norm(x1, None, None, *rms.pop(),
                                                                 True, 0.1, 1e-5))
    assert ran == 1
    assert_same(got, expected)
    # channels-last, mixed dtypes, half precision and an empty batch run on the reference
    x2 = tensor((2, 3, 4, 5), F32, 27, "channels_last")
    for call in (lambda: reftorch.native_batch_norm(x2, None, None, None, None, True, 0.1,
                                                    1e-5),
                 lambda: reftorch.native_batch_norm(x, tensor((3,), F64, 1), None, None, None,
                                                    True, 0.1, 1e-5),
                 lambda: reftorch.native_batch_norm(x.half(), None, None, None, None, True,
                                                    0.1, 1e-5),
                 lambda: reftorch.native_batch_norm(reftorch.zeros(0, 3, 4), None, None,
                                                    reftorch.zeros(3), reftorch.ones(3),
                                                    False, 0.1, 1e-5)):
        got, expected, ran = both(call)
        assert ran == 0
        for g, e in zip(arrays(got), arrays(expected)):
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_normalization_schedules_agree(dtype):
    """Many statistics run one statistic at a time, few run pass by pass over all planes:
    the same sums in the same order, so a channel's results do not depend on how many
    other channels there are."""
    x = tensor((5, 32, 9, 11), dtype, 35, loc=1.0)
    w, b = tensor((32,), dtype, 36), tensor((32,), dtype, 37)
    before = _pool.calls()
    many = reftorch.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
    few = reftorch.native_batch_norm(x[:, 5:8], w[5:8], b[5:8], None, None, True, 0.1, 1e-5)
    assert _pool.calls() - before == 2
    assert many[0][:, 5:8].numpy().tobytes() == few[0].numpy().tobytes()
    assert many[1][5:8].numpy().tobytes() == few[1].numpy().tobytes()
    assert many[2][5:8].numpy().tobytes() == few[2].numpy().tobytes()
    # groups of 4 channels: 40 statistics (one at a time) against 4 (pass by pass)
    many = reftorch.native_group_norm(x, None, None, 5, 32, 99, 8, 1e-5)
    few = reftorch.native_group_norm(x[:2, :8], None, None, 2, 8, 99, 2, 1e-5)
    assert many[0][:2, :8].numpy().tobytes() == few[0].numpy().tobytes()
    assert many[1][:2, :2].numpy().tobytes() == few[1].numpy().tobytes()
    assert many[2][:2, :2].numpy().tobytes() == few[2].numpy().tobytes()


def test_batch_norm_functional_training_and_gradients():
    """F.batch_norm in training (running stats bumped), and its backward (the declared
    native_batch_norm_backward: a second C call)."""
    x0 = tensor((6, 4, 5, 5), F64, 28, loc=1.0)
    w0, b0 = tensor((4,), F64, 29), tensor((4,), F64, 30)

    def run():
        x = x0.detach().clone().requires_grad_()
        w, b = w0.detach().clone().requires_grad_(), b0.detach().clone().requires_grad_()
        rm, rv = reftorch.zeros(4, dtype=F64), reftorch.ones(4, dtype=F64)
        version = rm._version
        y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2)
        assert rm._version > version
        (y * y.detach()).sum().backward()
        return y.detach(), x.grad, w.grad, b.grad, rm, rv
    got, expected, ran = both(run)
    assert ran == 2
    for g, e in zip(arrays(got), arrays(expected)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def _bn_backward_inputs(shape, dtype, layout, seed=40):
    x = tensor(shape, dtype, seed, layout, loc=0.5)
    with reftorch.plugins.use_reference_kernels():
        _, mean, rstd = reftorch.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    return x, tensor(shape, dtype, seed + 1, layout), mean, rstd


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, True)],
                         ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["weight", "no weight"])
def test_batch_norm_backward_kernel(dtype, layout, mask, affine):
    """native_batch_norm_backward in C (sums in double, one rounding) against the reference's
    NumPy formula: within a few ulp of the magnitudes; masked gradients are None; an input
    whose spatial dims are not one unit-stride run (transposed, strided, channels last) is
    declined."""
    from reftorch._ops.nn_normalization import batch_norm_backward
    x, g, mean, rstd = _bn_backward_inputs((3, 5, 7, 9), dtype, layout)
    weight = tensor((5,), dtype, 42) if affine else None
    got, expected, ran = both(lambda: batch_norm_backward(g, x, weight, mean, rstd, mask))
    assert ran == (0 if layout in ("transposed", "strided", "channels_last") else 1)
    eps = np.finfo(dtype.numpy_dtype).eps
    for m, gt, ex in zip(mask, got, expected):
        assert (gt is None) == (not m) and (ex is None) == (not m)
        if m:
            scale = np.abs(ex.numpy()).max() + 1
            np.testing.assert_allclose(gt.numpy(), ex.numpy(), rtol=0, atol=64 * eps * scale)


def test_batch_norm_backward_threads_and_buffers():
    """Bitwise the same on 1, 2 and 3 threads; the C entry refuses buffers too small for its
    shape and mismatched element types."""
    from reftorch._ops.nn_normalization import batch_norm_backward
    x, g, mean, rstd = _bn_backward_inputs((4, 37, 9, 11), F32, "contiguous")
    previous = _pool.set_num_threads(1)
    try:
        results = []
        for threads in (1, 2, 3):
            _pool.set_num_threads(threads)
            results.append([t.numpy() for t in
                            batch_norm_backward(g, x, None, mean, rstd, (True, True, True))])
    finally:
        _pool.set_num_threads(previous)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert a.tobytes() == b.tobytes()
    xs = np.zeros(2 * 3 * 4, np.float32)
    args = [xs, 0, (12, 4), xs, 0, (2, 3, 4), (12, 4), None, 0, np.zeros(3, np.float32),
            np.ones(3, np.float32), np.zeros(24, np.float32), np.zeros(3, np.float32), None]
    _pool.batch_norm_backward(*args)
    for position, bad in ((0, xs[:-1]), (9, np.zeros(2, np.float32)), (11, np.zeros(23, np.float32)),
                          (12, np.zeros(2, np.float32))):
        wrong = list(args)
        wrong[position] = bad
        with pytest.raises((ValueError, IndexError)):
            _pool.batch_norm_backward(*wrong)
    wrong = list(args)
    wrong[10] = np.ones(3, np.float64)
    with pytest.raises(TypeError):
        _pool.batch_norm_backward(*wrong)
    wrong = list(args)
    wrong[5] = (0, 3, 4)
    with pytest.raises(ValueError, match="no elements"):
        _pool.batch_norm_backward(*wrong)


GN_CASES = {"groups 2 affine": (2, True), "groups 1": (1, False), "groups = channels": (6, True),
            "groups 3 weight only": (3, "weight")}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(GN_CASES))
@pytest.mark.parametrize("shape", [(3, 6, 5, 7), (10, 6), (2, 6, 40)], ids=str)
def test_group_norm(dtype, case, shape):
    groups, affine = GN_CASES[case]
    x = tensor(shape, dtype, 31, loc=-3.0)
    weight = tensor((6,), dtype, 32) if affine else None
    bias = tensor((6,), dtype, 33) if affine is True else None
    N, C, HxW = shape[0], shape[1], math.prod(shape[2:])
    got, expected, ran = both(lambda: reftorch.native_group_norm(x, weight, bias, N, C, HxW,
                                                                 groups, 1e-5))
    assert ran == 1
    assert got[1].shape == expected[1].shape == (N, groups)
    assert got[0].stride() == expected[0].stride()

    def grouped(t):   # (N, C, ...) -> (N, groups, C / groups * HxW)
        return t.reshape(N, groups, -1)

    def per_element(p):
        if p is None:
            return 0.0
        a = np.abs(p.numpy().astype(np.float64))
        return np.repeat(a, HxW).reshape(1, groups, -1)
    _check_norm(dtype, grouped(x.numpy()), (grouped(got[0]),) + tuple(got[1:]),
                (grouped(expected[0]),) + tuple(expected[1:]), (2,),
                per_element(weight) if weight is not None else 1.0, per_element(bias))


def test_group_norm_layouts_and_declines():
    x = tensor((4, 6, 5, 7), F32, 34, "batch_transposed")   # N, C strides swapped: served
    got, expected, ran = both(lambda: reftorch.native_group_norm(x, None, None, 4, 6, 35, 3,
                                                                 1e-5))
    assert ran == 1
    assert got[0].stride() == expected[0].stride()
    np.testing.assert_allclose(got[0].numpy(), expected[0].numpy(), rtol=1e-5, atol=1e-5)
    x = tensor((4, 6, 5, 7), F32, 34, "channels_last")
    got, expected, ran = both(lambda: F.group_norm(x, 3))
    assert ran == 0
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


# ---------------------------------------------------------------------------------------------
# Threads, instruction sets, argument checks

def _large_calls():
    """Calls big enough to run parallel, over many blocks (and planes crossing blocks)."""
    x = tensor((3, 5, 130, 150), F32, 40, special=True)
    big_plane = tensor((1, 1, 700, 600), F32, 41)
    g = tensor((3, 5, 65, 75), F32, 42)
    y = tensor((8, 16, 40, 40), F32, 43, loc=1.0)
    w, b = tensor((16,), F32, 44), tensor((16,), F32, 45)
    avg_grad = reftorch._ops.nn_pooling.avg_pool_backward
    indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)[1]
    params = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=False,
                  count_include_pad=False, divisor_override=None)
    return [
        lambda: F.max_pool2d(x, 2, return_indices=True),
        lambda: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
        lambda: F.max_pool2d(big_plane, 3, 1, 1, return_indices=True),
        lambda: F.max_pool2d(x, (5, 7), 3, 1, return_indices=True),   # a window at a time
        lambda: F.avg_pool2d(x, 3, 2, 1),
        lambda: F.avg_pool2d(big_plane, 2),
        lambda: avg_grad(2, g, (3, 5, 130, 150), params),
        lambda: F.adaptive_avg_pool2d(x, (7, 9)),
        lambda: F.adaptive_avg_pool2d(big_plane, 1),
        lambda: reftorch._ops.nn_pooling.adaptive_avg_pool_backward(2, g, (3, 5, 130, 150),
                                                                    (65, 75)),
        lambda: reftorch.native_batch_norm(y, w, b, None, None, True, 0.1, 1e-5),
        lambda: reftorch.native_group_norm(y, w, b, 8, 16, 1600, 4, 1e-5),
        lambda: pooling.max_pool2d_backward_kernel(None, (g, x, indices), None, {}),
    ]


def test_results_do_not_depend_on_the_thread_count():
    calls = _large_calls()
    previous = _pool.set_num_threads(1)
    try:
        before = _pool.calls()
        single = [arrays(call()) for call in calls]
        assert _pool.calls() - before == len(calls)
        results = []
        for threads in (2, 3):
            _pool.set_num_threads(threads)
            results.append([arrays(call()) for call in calls])
    finally:
        _pool.set_num_threads(previous)
    for other in results:
        for one, two in zip(single, other):
            for a, b in zip(one, two):
                assert a.tobytes() == b.tobytes()


def test_large_inputs_match_the_reference():
    calls = _large_calls()
    del calls[7]    # a global pool of 700 x 600 takes the reference 420,000 NumPy passes
    for call in calls[:8]:
        got, expected, ran = both(call)
        assert ran == 1
        assert_same(got, expected)


def test_every_isa_clone_gives_the_same_bits():
    calls = _large_calls()
    previous = _pool.isa()
    results = []
    try:
        for isa in _pool.supported_isas():
            _pool.set_isa(isa)
            results.append([arrays(call()) for call in calls])
    finally:
        _pool.set_isa(previous)
    for other in results[1:]:
        for one, two in zip(results[0], other):
            for a, b in zip(one, two):
                assert a.tobytes() == b.tobytes()


def test_forked_child_runs_single_threaded():
    """libgomp's thread pool does not survive fork(): a child must still finish (and get
    the same bits, the result not depending on the thread count)."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork() on this platform")
    x = tensor((4, 8, 64, 64), F32, 46)
    expected = F.max_pool2d(x, 3, 2, 1).numpy()   # the parent has used its threads
    pid = os.fork()
    if pid == 0:   # child: exit 0 only if the op completes with the same values
        ok = False
        try:
            ok = F.max_pool2d(x, 3, 2, 1).numpy().tobytes() == expected.tobytes()
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung in a parallel kernel")


def test_pool_rejects_bad_arguments():
    a = np.zeros(64, np.float32)
    v, i = np.zeros(16, np.float32), np.zeros(16, np.int64)
    win = (2, 2, 2, 2, 0, 0, 1, 1)
    _pool.max_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), win, (4, 4), v, i)   # fine
    with pytest.raises(ValueError):   # the view reaches past the buffer
        _pool.max_pool2d(a, 1, (1, 1, 8, 8), (64, 64, 8, 1), win, (4, 4), v, i)
    with pytest.raises(ValueError):
        _pool.max_pool2d(a, 0, (1, 2, 8, 8), (64, 64, 8, 1), win, (4, 4), v, i)
    with pytest.raises(ValueError):   # outputs too small for the output size
        _pool.max_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), win, (5, 4), v, i)
    with pytest.raises(ValueError):   # a zero stride, a negative padding
        _pool.max_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), (2, 2, 0, 2, 0, 0, 1, 1), (4, 4),
                         v, i)
    with pytest.raises(ValueError):
        _pool.max_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), (2, 2, 2, 2, -1, 0, 1, 1),
                         (4, 4), v, i)
    with pytest.raises(ValueError):   # geometry that could overflow
        _pool.max_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), (2, 2, 2**40, 2, 0, 0, 1, 1),
                         (4, 4), v, i)
    with pytest.raises(TypeError):    # indices of another type, values of another type
        _pool.max_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), win, (4, 4), v, v)
    with pytest.raises(TypeError):
        _pool.max_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), win, (4, 4), np.zeros(16), i)
    with pytest.raises(TypeError):    # a read-only output
        ro = np.zeros(16, np.float32)
        ro.flags.writeable = False
        _pool.max_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), win, (4, 4), ro, i)
    with pytest.raises(ValueError):   # divisor_override 0
        _pool.avg_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), win[:6], (4, 4), True, 0, v)
    with pytest.raises(ValueError):   # the gradient's output too small
        _pool.avg_pool2d_backward(v, 0, (1, 1, 4, 4), (16, 16, 4, 1), win[:6], (8, 8), True,
                                  None, np.zeros(63, np.float32))
    with pytest.raises(ValueError):
        _pool.adaptive_avg_pool2d(a, 0, (1, 1, 8, 8), (64, 64, 8, 1), (5, 4), v)
    with pytest.raises(TypeError):
        _pool.adaptive_avg_pool2d_backward(v, 0, (1, 1, 4, 4), (16, 16, 4, 1), (8, 8),
                                           np.zeros(64))
    x = np.zeros(24, np.float32)
    stats = np.zeros(3, np.float32)
    with pytest.raises(ValueError):   # running stats too short
        _pool.batch_norm(x, 0, (2, 3, 4), (12, 4), None, 0, None, 0, np.zeros(2, np.float32),
                         0, stats, 0, True, 0.1, 1e-5, np.zeros(24, np.float32), (12, 4),
                         stats, stats.copy())
    with pytest.raises(TypeError):    # evaluation needs the running statistics
        _pool.batch_norm(x, 0, (2, 3, 4), (12, 4), None, 0, None, 0, None, 0, None, 0, False,
                         0.1, 1e-5, np.zeros(24, np.float32), (12, 4), stats, stats.copy())
    with pytest.raises(ValueError):   # groups must divide the channels
        _pool.group_norm(x, 0, (2, 3, 4), (12, 4), 2, None, 0, None, 0, 1e-5,
                         np.zeros(24, np.float32), (12, 4), np.zeros(4, np.float32),
                         np.zeros(4, np.float32))
    with pytest.raises(ValueError):   # out reaching past its buffer
        _pool.group_norm(x, 0, (2, 3, 4), (12, 4), 3, None, 0, None, 0, 1e-5,
                         np.zeros(23, np.float32), (12, 4), np.zeros(6, np.float32),
                         np.zeros(6, np.float32))


def test_registered_kernels():
    kernels = {op for op, device, dtype in reftorch.plugins.loaded()["cpu"].kernels
               if device == "cpu"}
    for op in ("max_pool2d_with_indices", "avg_pool2d", "avg_pool2d_backward",
               "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "native_batch_norm",
               "native_batch_norm_backward", "native_group_norm"):
        assert op in kernels
    assert pooling.MIN_NUMEL["pool"] >= 1
    declared = reftorch._dispatch.find_op("max_pool2d_with_indices_backward") is not None
    assert ("max_pool2d_with_indices_backward" in kernels) == declared
