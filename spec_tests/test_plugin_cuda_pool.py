"""reftorch-cuda's pooling kernels (kernels/pool.cu, ops_pool.py) against the cpu reference:
max_pool2d_with_indices and its backward, avg_pool2d and its backward, adaptive_avg_pool2d
and its backward, for the four float dtypes.

The contract is bit for bit: every value, index and gradient equals the reference's, signed
zeros included. NaN results are compared as NaN (their payload is the hardware's on a GPU,
NumPy's in the reference); a max pool's NaN is the input element itself, so its bits are
compared too. Launch tests run on a real GPU when there is one and on the emulated driver.
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
from reftorch._ops import nn_pooling as P  # noqa: E402
from reftorch._ops import structured  # noqa: E402
from reftorch_cuda import ops as O  # noqa: E402
from reftorch_cuda import ops_pool  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402

# The launch fixtures and value helpers of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, reference = base.FLOATS, base.reference

POOL_OPS = tuple(ops_pool.OPS)
UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


# --- data and comparison ----------------------------------------------------------------------

def tied_values(shape, dtype_name, seed, nans=3):
    """Small integers (many ties), both zeros and a few NaN and infinities: every rule of max
    pooling gets exercised."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, shape).astype(np.float32)
    flat = a.reshape(-1)
    flat[flat == 0] = np.where(rng.random(int((flat == 0).sum())) < 0.5, 0.0, -0.0)
    if flat.size > 8:
        spots = rng.choice(flat.size, nans + 2, replace=False)
        flat[spots[:nans]] = np.nan
        flat[spots[nans]], flat[spots[nans + 1]] = np.inf, -np.inf
    return reftorch.tensor(a).to(getattr(reftorch, dtype_name))


def real_values(shape, dtype_name, seed, nans=0):
    """Values of every magnitude (sums round), optionally a few NaN."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))).astype(np.float32)
    flat = a.reshape(-1)
    if nans and flat.size:
        flat[rng.choice(flat.size, nans, replace=False)] = np.nan
    return reftorch.tensor(a).to(getattr(reftorch, dtype_name))


def raw(t):
    """A tensor's elements as a contiguous NumPy array of its own dtype, on the host."""
    return np.ascontiguousarray(t.detach().cpu()._np)


def assert_bits_equal(got, expected, what, nan_bits=False):
    """Same shape, dtype and device kind; equal bits, NaN anywhere the reference has NaN (and
    the same NaN bits when `nan_bits`)."""
    assert got.device.type == "cuda", what
    assert tuple(got.shape) == tuple(expected.shape) and got.dtype is expected.dtype, what
    g, e = raw(got), raw(expected)
    if g.dtype.kind == "i":
        np.testing.assert_array_equal(g, e, err_msg=str(what))
        return
    bits = UNSIGNED[g.dtype.itemsize]
    g_nan = np.isnan(g.astype(np.float64))
    e_nan = np.isnan(e.astype(np.float64))
    np.testing.assert_array_equal(g_nan, e_nan, err_msg=f"NaN positions: {what}")
    keep = np.ones_like(e_nan) if nan_bits else ~e_nan
    np.testing.assert_array_equal(g.view(bits)[keep], e.view(bits)[keep], err_msg=str(what))


# Input layouts: each takes a cpu or cuda (N, C, H, W) tensor and gives the operand.
LAYOUTS = {
    "contiguous": lambda x: x,
    "channels_last": lambda x: x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    "transposed_hw": lambda x: x.transpose(2, 3),
    "stepped_slice": lambda x: x[:, 1:, ::2, 1:],
    "unbatched": lambda x: x[1],
    "expanded_channel": lambda x: x[:, :1].expand(x.shape[0], 3, x.shape[2], x.shape[3]),
    "empty_batch": lambda x: x[:0],
}


def both(x, layout):
    """The layout of `x` on the cpu and of its copy on the device."""
    arrange = LAYOUTS[layout]
    return arrange(x), arrange(x.cuda())


def served():
    """No pooling op ran through the copy-to-cpu fallback."""
    return not any(key[0] in POOL_OPS for key in plugins.fallbacks())


def launched(device_kind, kernel):
    return device_kind is None or any(e.startswith(kernel + "<") for e in device_kind.launches)


# --- compilation ------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_pool_program_compiles_every_instantiation(compiled, arch):
    assert ops_pool.POOL in O.PROGRAMS
    result = compiled(arch, ops_pool.POOL)
    assert result.kind == "cubin" and result.arch == arch
    assert set(result.lowered) == set(ops_pool.POOL.name_expressions)
    assert len(ops_pool.POOL.name_expressions) == len(ops_pool.KERNELS) * len(FLOATS)


def test_pool_kernels_are_registered(plugin):
    for op in POOL_OPS:
        for name in FLOATS:
            assert plugins.serving(op, "cuda", getattr(reftorch, name)) == "cuda", (op, name)


# --- max pooling ------------------------------------------------------------------------------

# (kernel_size, stride, padding, dilation, ceil_mode)
MAX_WINDOWS = [
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (1, 1), (1, 1), (1, 1), False),        # overlapping: shared maxima
    ((3, 2), (2, 1), (1, 0), (1, 1), True),
    ((2, 3), (3, 2), (1, 1), (2, 1), True),         # dilation and ceil_mode
    ((3, 3), (2, 2), (0, 1), (2, 2), False),
    ((1, 1), (1, 1), (0, 0), (1, 1), False),
    ((4, 4), (3, 3), (2, 2), (1, 1), True),
]


def max_pool(x, window):
    kernel, stride, padding, dilation, ceil_mode = window
    return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_max_pool2d_is_the_reference_bit_for_bit(device_kind, dtype_name, layout):
    x = tied_values((2, 3, 9, 10), dtype_name, 1)
    cpu, dev = both(x, layout)
    plugins.reset_fallbacks()
    for window in MAX_WINDOWS:
        expected_values, expected_indices = reference(max_pool, cpu, window)
        values, indices = max_pool(dev, window)
        assert_bits_equal(values, expected_values, (layout, window), nan_bits=True)
        assert_bits_equal(indices, expected_indices, (layout, window))
    assert served()
    assert launched(device_kind, "max_pool_kernel") or layout == "empty_batch"


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_max_pool2d_nan_and_infinite_windows(device_kind, dtype_name):
    """A window of NaN only, NaN after a maximum, NaN first then larger values, a window of
    -inf only (its index is its first element), +inf ties."""
    nan, inf = float("nan"), float("inf")
    rows = [[nan, nan, 1.0, nan, 5.0, 7.0],
            [nan, nan, 2.0, 3.0, nan, 7.0],
            [-inf, -inf, inf, inf, 0.0, -0.0],
            [-inf, -inf, inf, 2.0, -0.0, 0.0]]
    x = reftorch.tensor(rows).to(getattr(reftorch, dtype_name)).reshape(1, 1, 4, 6)
    for window in [((2, 2), (2, 2), (0, 0), (1, 1), False),
                   ((2, 3), (1, 1), (1, 1), (1, 1), True)]:
        expected = reference(max_pool, x, window)
        got = max_pool(x.cuda(), window)
        assert_bits_equal(got[0], expected[0], window, nan_bits=True)
        assert_bits_equal(got[1], expected[1], window)


def test_max_pool1d_runs_the_2d_kernel(device_kind):
    x = tied_values((2, 3, 17), "float32", 2)
    expected = reference(F.max_pool1d, x, 3, 2, 1, 1, True, True)
    plugins.reset_fallbacks()
    got = F.max_pool1d(x.cuda(), 3, 2, 1, 1, True, True)
    assert_bits_equal(got[0], expected[0], "values", nan_bits=True)
    assert_bits_equal(got[1], expected[1], "indices")
    assert served()


def grad_through(fn, x, grad_seed, device, grad_layout="contiguous"):
    """x.grad of fn(x) with a random output gradient (laid out as asked), on the cpu
    reference or on the device."""
    leaf = (x.cuda() if device else x).detach().requires_grad_(True)
    out = fn(leaf)
    out = out[0] if isinstance(out, tuple) else out
    if grad_layout == "sum":             # an expanded (stride 0) gradient
        out.sum().backward()
    else:
        g = real_values(tuple(out.shape), x.dtype.name, grad_seed)
        if grad_layout == "transposed":
            g = g.transpose(-1, -2).contiguous().transpose(-1, -2)
        out.backward(g.cuda() if device else g)
    return leaf.grad


def reference_grad(fn, x, seed, grad_layout="contiguous"):
    with plugins.use_reference_kernels():
        return grad_through(fn, x, seed, False, grad_layout)


def check_backward(pool, x, settings, layouts, seed, grad_layout):
    """pool(t, setting) over every setting and input layout: the input's gradient on cuda
    is the reference's bit for bit."""
    for setting in settings:
        for layout in layouts:
            def fn(t, setting=setting, layout=layout):
                return pool(LAYOUTS[layout](t), setting)
            expected = reference_grad(fn, x, seed, grad_layout)
            got = grad_through(fn, x, seed, True, grad_layout)
            assert_bits_equal(got, expected, (setting, layout, grad_layout))


@pytest.mark.parametrize("grad_layout", ["contiguous", "transposed", "sum"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_max_pool2d_backward_through_autograd(device_kind, dtype_name, grad_layout):
    """Overlapping windows share maxima (ties of integers), so input elements collect several
    gradients, added in output order in the dtype."""
    x = tied_values((2, 3, 11, 9), dtype_name, 3)
    plugins.reset_fallbacks()
    check_backward(max_pool, x, MAX_WINDOWS,
                   ("contiguous", "transposed_hw", "unbatched", "empty_batch"), 4, grad_layout)
    assert served()
    assert launched(device_kind, "max_pool_backward_kernel")


def test_max_pool2d_backward_of_many_repeated_indices(device_kind):
    """A 1x1 plane read by every one of 70 outputs (more than two warp chunks), each with
    its own float16 gradient: the sum rounds at each step in output order."""
    grad = real_values((1, 1, 7, 10), "float16", 5)
    indices = reftorch.zeros((1, 1, 7, 10), dtype=reftorch.int64)
    run = lambda g, i: structured.run(P.MAX_POOL_BACKWARD[2], (g, i),  # noqa: E731
                                      {"input_shape": (1, 1, 1, 1)})
    expected = reference(run, grad, indices)
    got = run(grad.cuda(), indices.cuda())
    assert_bits_equal(got, expected, "repeated")


def test_max_pool2d_backward_skips_indices_outside_the_plane(device_kind):
    """Never written through: indices -1 and plane-size are dropped, the rest added."""
    grad = real_values((2, 2, 3), "float32", 6)
    index_values = np.array([[[0, -1, 5], [6, 2, 2]], [[1, 1, 9], [5, 0, 3]]], dtype=np.int64)
    indices = reftorch.tensor(index_values)
    dtypes = (reftorch.float32,) * 3
    got = ops_pool.OPS["max_pool2d_with_indices_backward"](
        None, (grad.cuda(), indices.cuda()), dtypes, {"input_shape": (2, 2, 3)})
    expected = np.zeros((2, 6), np.float32)
    g = raw(grad).reshape(2, 6)
    k = index_values.reshape(2, 6)
    for plane in range(2):
        for o in range(6):
            if 0 <= k[plane, o] < 6:
                expected[plane, k[plane, o]] += g[plane, o]
    np.testing.assert_array_equal(raw(got), expected.reshape(2, 2, 3))


# --- average pooling --------------------------------------------------------------------------

# (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_WINDOWS = [
    ((2, 2), (2, 2), (0, 0), False, True, None),
    ((3, 3), (1, 1), (1, 1), False, True, None),
    ((3, 3), (1, 1), (1, 1), False, False, None),
    ((3, 2), (2, 1), (1, 1), True, True, None),     # ceil_mode: a clipped last window
    ((3, 2), (2, 3), (1, 0), True, False, None),
    ((2, 4), (3, 2), (1, 2), True, True, 3),
    ((5, 3), (2, 2), (2, 1), False, False, -7),
]


def avg_pool(x, window):
    return F.avg_pool2d(x, *window)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_avg_pool2d_is_the_reference_bit_for_bit(device_kind, dtype_name, layout):
    x = real_values((2, 3, 10, 11), dtype_name, 7, nans=2)
    cpu, dev = both(x, layout)
    plugins.reset_fallbacks()
    for window in AVG_WINDOWS:
        assert_bits_equal(avg_pool(dev, window), reference(avg_pool, cpu, window),
                          (layout, window))
    assert served()
    assert launched(device_kind, "avg_pool_kernel") or layout == "empty_batch"


@pytest.mark.parametrize("grad_layout", ["contiguous", "transposed", "sum"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_avg_pool2d_backward_through_autograd(device_kind, dtype_name, grad_layout):
    x = real_values((2, 3, 10, 11), dtype_name, 8)
    plugins.reset_fallbacks()
    check_backward(avg_pool, x, AVG_WINDOWS,
                   ("contiguous", "channels_last", "unbatched", "empty_batch"), 9, grad_layout)
    assert served()
    assert launched(device_kind, "avg_pool_backward_kernel")


# dtype -> (three output gradients, divisor_override, the middle input's gradient)
ROUNDING_CASES = {
    "bfloat16": ((1.0, 2.0 ** -8, 2.0 ** -40), 1, 1.0),
    "float16": ((1024.0, 0.5, 2.0 ** -24), 1024, 1.0 + 2.0 ** -10),
}


@pytest.mark.parametrize("dtype_name", ROUNDING_CASES)
def test_avg_pool2d_backward_rounds_its_double_sum_as_the_reference(device_kind, dtype_name):
    """The middle element collects a double sum just above a tie of the dtype (1 + 2^-8 +
    2^-40 for bfloat16, 1 + 2^-11 + 2^-34 for float16), whose tail float drops. NumPy rounds
    a double to float16 once (up); ml_dtypes rounds it to float first, onto the tie, then to
    even (down). A kernel rounding either dtype the other way gives other bits."""
    grads, divisor, expected_middle = ROUNDING_CASES[dtype_name]
    x = reftorch.zeros((1, 1, 1, 5), dtype=getattr(reftorch, dtype_name))
    grad = reftorch.tensor([[[list(grads)]]]).to(x.dtype)
    assert raw(grad).astype(np.float64).tolist() == [[[list(grads)]]]   # exact in the dtype

    def fn(t):
        return F.avg_pool2d(t, (1, 3), 1, 0, divisor_override=divisor)

    results = []
    for device in (False, True):
        leaf = (x.cuda() if device else x).detach().requires_grad_(True)
        with contextlib.nullcontext() if device else plugins.use_reference_kernels():
            fn(leaf).backward(grad.cuda() if device else grad)
        results.append(leaf.grad)
    assert float(results[0][0, 0, 0, 2]) == expected_middle
    assert_bits_equal(results[1], results[0], dtype_name)


def test_avg_pool1d_runs_the_2d_kernel(device_kind):
    x = real_values((2, 3, 17), "float64", 10)
    expected = reference(F.avg_pool1d, x, 4, 3, 2, True, False)
    plugins.reset_fallbacks()
    assert_bits_equal(F.avg_pool1d(x.cuda(), 4, 3, 2, True, False), expected, "avg_pool1d")
    assert served()


# --- adaptive average pooling -----------------------------------------------------------------

ADAPTIVE_SIZES = [(1, 1), (3, 5), (4, 4), (7, 13), (12, 2)]   # larger than the input too


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_adaptive_avg_pool2d_is_the_reference_bit_for_bit(device_kind, dtype_name, layout):
    x = real_values((2, 3, 10, 9), dtype_name, 11, nans=1)
    cpu, dev = both(x, layout)
    plugins.reset_fallbacks()
    for size in ADAPTIVE_SIZES:
        assert_bits_equal(F.adaptive_avg_pool2d(dev, size),
                          reference(F.adaptive_avg_pool2d, cpu, size), (layout, size))
    assert served()


def test_adaptive_avg_pool2d_to_zero_size(device_kind):
    x = real_values((2, 3, 5, 4), "float32", 12)
    got = F.adaptive_avg_pool2d(x.cuda(), (0, 3))
    assert got.device.type == "cuda" and tuple(got.shape) == (2, 3, 0, 3)


@pytest.mark.parametrize("grad_layout", ["contiguous", "transposed", "sum"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_adaptive_avg_pool2d_backward_through_autograd(device_kind, dtype_name, grad_layout):
    """Output sizes that do not divide the input, and ones larger than it (bins that share a
    start): the gradient sums follow the reference's offset order."""
    x = real_values((2, 3, 7, 6), dtype_name, 13)
    plugins.reset_fallbacks()
    check_backward(F.adaptive_avg_pool2d, x, ADAPTIVE_SIZES,
                   ("contiguous", "transposed_hw", "unbatched", "empty_batch"), 14, grad_layout)
    assert served()
    assert launched(device_kind, "adaptive_avg_pool_backward_kernel")


def output_order_gradient(grad, input_size):
    """adaptive_avg_pool2d's input gradient summed in another order (outputs row-major, each
    adding its share to its whole bin), in double: a kernel with this order gives these."""
    (out_h, out_w), (in_h, in_w) = grad.shape, input_size
    starts = [[o * n // m for o in range(m)] for n, m in ((in_h, out_h), (in_w, out_w))]
    ends = [[-(-(o + 1) * n // m) for o in range(m)] for n, m in ((in_h, out_h), (in_w, out_w))]
    total = np.zeros(input_size)
    for r in range(out_h):
        for c in range(out_w):
            rows, cols = slice(starts[0][r], ends[0][r]), slice(starts[1][c], ends[1][c])
            total[rows, cols] += grad[r, c] / ((ends[0][r] - starts[0][r]) *
                                               (ends[1][c] - starts[1][c]))
    return total


@pytest.mark.parametrize("sizes", [((5, 5), (3, 3)), ((3, 4), (5, 7))], ids=str)
def test_adaptive_avg_pool2d_backward_keeps_the_reference_order(device_kind, sizes):
    """float64 gradients of magnitudes 2^-30 to 2^30 meeting in elements that several bins
    share (bins overlap, or share starts when the output is larger): summed in output order
    they give other bits (checked here), so only the reference's order passes."""
    input_size, output_size = sizes
    rng = np.random.default_rng(0)
    g = rng.standard_normal(output_size) * np.exp2(rng.integers(-30, 30, output_size))
    grad = reftorch.tensor(g.reshape((1, 1) + output_size))
    shape = (1, 1) + input_size
    expected = reference(P.adaptive_avg_pool_backward, 2, grad, shape, output_size)
    assert not np.array_equal(output_order_gradient(g, input_size), raw(expected)[0, 0])
    got = P.adaptive_avg_pool_backward(2, grad.cuda(), shape, output_size)
    assert_bits_equal(got, expected, sizes)


# --- 3-d pooling: the same kernels, with a depth axis ---------------------------------------------

LAYOUTS_3D = {
    "contiguous": lambda x: x,
    "channels_last_3d": lambda x: x.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3),
    "permuted_dhw": lambda x: x.permute(0, 1, 4, 2, 3),
    "stepped_slice": lambda x: x[:, 1:, ::2, 1:, :],
    "unbatched": lambda x: x[1],
    "empty_batch": lambda x: x[:0],
}


def both_3d(x, layout):
    arrange = LAYOUTS_3D[layout]
    return arrange(x), arrange(x.cuda())


# (kernel_size, stride, padding, dilation, ceil_mode)
MAX_WINDOWS_3D = [
    ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False),
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), False),      # overlapping: shared maxima
    ((3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 2, 1), True),       # dilation and ceil_mode
    ((2, 3, 1), (1, 2, 1), (0, 1, 0), (2, 1, 1), True),
]


def max_pool_3d(x, window):
    kernel, stride, padding, dilation, ceil_mode = window
    return F.max_pool3d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)


@pytest.mark.parametrize("layout", LAYOUTS_3D)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_max_pool3d_is_the_reference_bit_for_bit(device_kind, dtype_name, layout):
    x = tied_values((2, 3, 6, 7, 5), dtype_name, 21, nans=4)
    cpu, dev = both_3d(x, layout)
    plugins.reset_fallbacks()
    for window in MAX_WINDOWS_3D:
        expected_values, expected_indices = reference(max_pool_3d, cpu, window)
        values, indices = max_pool_3d(dev, window)
        assert_bits_equal(values, expected_values, (layout, window), nan_bits=True)
        assert_bits_equal(indices, expected_indices, (layout, window))
    assert served()
    assert launched(device_kind, "max_pool_kernel") or layout == "empty_batch"


@pytest.mark.parametrize("grad_layout", ["contiguous", "transposed", "sum"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_max_pool3d_backward_through_autograd(device_kind, dtype_name, grad_layout):
    x = tied_values((2, 2, 5, 6, 5), dtype_name, 22)
    plugins.reset_fallbacks()
    check_backward_3d(max_pool_3d, x, MAX_WINDOWS_3D, ("contiguous", "permuted_dhw"), 23,
                      grad_layout)
    assert served()
    assert launched(device_kind, "max_pool_backward_kernel")


def check_backward_3d(pool, x, settings, layouts, seed, grad_layout):
    """check_backward over 3-d layouts."""
    for setting in settings:
        for layout in layouts:
            def fn(t, setting=setting, layout=layout):
                return pool(LAYOUTS_3D[layout](t), setting)
            expected = reference_grad(fn, x, seed, grad_layout)
            got = grad_through(fn, x, seed, True, grad_layout)
            assert_bits_equal(got, expected, (setting, layout, grad_layout))


# (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_WINDOWS_3D = [
    ((2, 2, 2), (2, 2, 2), (0, 0, 0), False, True, None),
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), False, False, None),
    ((3, 2, 3), (2, 1, 2), (1, 1, 0), True, True, None),      # ceil_mode: clipped windows
    ((2, 3, 2), (3, 2, 1), (1, 1, 1), True, False, 5),
]


def avg_pool_3d(x, window):
    return F.avg_pool3d(x, *window)


@pytest.mark.parametrize("layout", LAYOUTS_3D)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_avg_pool3d_is_the_reference_bit_for_bit(device_kind, dtype_name, layout):
    x = real_values((2, 3, 7, 6, 5), dtype_name, 24, nans=2)
    cpu, dev = both_3d(x, layout)
    plugins.reset_fallbacks()
    for window in AVG_WINDOWS_3D:
        assert_bits_equal(avg_pool_3d(dev, window), reference(avg_pool_3d, cpu, window),
                          (layout, window))
    assert served()
    assert launched(device_kind, "avg_pool_kernel") or layout == "empty_batch"


@pytest.mark.parametrize("grad_layout", ["contiguous", "transposed", "sum"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_avg_pool3d_backward_through_autograd(device_kind, dtype_name, grad_layout):
    x = real_values((2, 2, 6, 5, 7), dtype_name, 25)
    plugins.reset_fallbacks()
    check_backward_3d(avg_pool_3d, x, AVG_WINDOWS_3D, ("contiguous", "channels_last_3d"), 26,
                      grad_layout)
    assert served()
    assert launched(device_kind, "avg_pool_backward_kernel")


ADAPTIVE_SIZES_3D = [(1, 1, 1), (2, 3, 4), (7, 4, 6)]   # larger than the input too


@pytest.mark.parametrize("layout", LAYOUTS_3D)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_adaptive_avg_pool3d_is_the_reference_bit_for_bit(device_kind, dtype_name, layout):
    x = real_values((2, 3, 5, 6, 4), dtype_name, 27, nans=1)
    cpu, dev = both_3d(x, layout)
    plugins.reset_fallbacks()
    for size in ADAPTIVE_SIZES_3D:
        assert_bits_equal(F.adaptive_avg_pool3d(dev, size),
                          reference(F.adaptive_avg_pool3d, cpu, size), (layout, size))
    assert served()


@pytest.mark.parametrize("grad_layout", ["contiguous", "transposed", "sum"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_adaptive_avg_pool3d_backward_through_autograd(device_kind, dtype_name, grad_layout):
    """Bins that overlap (5 -> 3, 4 -> 3) and bins that share starts (3 -> 5): the
    gradient sums follow the reference's offset order along every dim."""
    x = real_values((2, 2, 5, 3, 4), dtype_name, 28)
    plugins.reset_fallbacks()
    check_backward_3d(F.adaptive_avg_pool3d, x, [(3, 5, 3), (1, 2, 2)],
                      ("contiguous", "permuted_dhw"), 29, grad_layout)
    assert served()
    assert launched(device_kind, "adaptive_avg_pool_backward_kernel")


def test_adaptive_avg_pool3d_backward_keeps_the_reference_order(device_kind):
    """float64 gradients of magnitudes 2^-30 to 2^30 meeting in elements that several bins
    share along every dim: summed in output order (each output's share added to its whole
    bin) they give other bits (checked here), so only the reference's order passes."""
    input_size, output_size = (3, 5, 4), (5, 3, 7)
    rng = np.random.default_rng(1)
    g = rng.standard_normal(output_size) * np.exp2(rng.integers(-30, 30, output_size))
    grad = reftorch.tensor(g.reshape((1, 1) + output_size))
    shape = (1, 1) + input_size
    expected = reference(P.adaptive_avg_pool_backward, 3, grad, shape, output_size)
    bounds = [[(o * n // m, -(-(o + 1) * n // m)) for o in range(m)]
              for n, m in zip(input_size, output_size)]
    in_output_order = np.zeros(input_size)
    for o in np.ndindex(*output_size):
        spans = [bounds[d][o[d]] for d in range(3)]
        count = math.prod(end - start for start, end in spans)
        in_output_order[tuple(slice(*span) for span in spans)] += g[o] / count
    assert not np.array_equal(in_output_order, raw(expected)[0, 0])
    got = P.adaptive_avg_pool_backward(3, grad.cuda(), shape, output_size)
    assert_bits_equal(got, expected, "3d order")


def test_pool_programs_serve_both_ranks_with_one_kernel_each(plugin):
    """Six kernels (24 instantiations) serve the twelve 2-d and 3-d ops."""
    assert set(ops_pool.OPS) == {name.format(n) for n in (2, 3) for name in ops_pool.BODIES}
    assert len(ops_pool.POOL.name_expressions) == 6 * len(FLOATS)


# --- declines ---------------------------------------------------------------------------------

def test_pool_kernels_decline_what_they_do_not_handle(device_kind):
    f32 = (reftorch.float32,) * 3
    max_pool2d, max_pool2d_backward = (ops_pool.OPS["max_pool2d_with_indices"],
                                       ops_pool.OPS["max_pool2d_with_indices_backward"])
    avg_pool2d, avg_backward = ops_pool.OPS["avg_pool2d"], ops_pool.OPS["avg_pool2d_backward"]
    adaptive_backward = ops_pool.OPS["adaptive_avg_pool2d_backward"]
    x = real_values((1, 2, 4, 4), "float32", 15).cuda()
    window = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1),
              "ceil_mode": False}
    # the same call served, then each thing it does not take
    assert isinstance(max_pool2d(None, (x,), f32, window), tuple)
    assert max_pool2d(None, (x.cpu(),), f32, window) is NotImplemented
    assert max_pool2d(None, (x[0, 0],), f32, window) is NotImplemented
    assert max_pool2d(None, (x.double().to(reftorch.int32),), f32, window) is NotImplemented
    assert max_pool2d(None, (x,), f32, {**window, "stride": (0, 2)}) is NotImplemented
    assert max_pool2d(None, (x,), f32, {**window, "kernel_size": (2, 2.0)}) is NotImplemented
    # a 2-d op's parameters with a 3-d input's rank, and 3-d parameters for a 2-d op
    assert max_pool2d(None, (x.unsqueeze(0),), f32, window) is NotImplemented
    window3 = {name: value + value[:1] if isinstance(value, tuple) else value
               for name, value in window.items()}
    assert max_pool2d(None, (x,), f32, window3) is NotImplemented
    assert ops_pool.OPS["max_pool3d_with_indices"](None, (x,), f32, window) is NotImplemented
    assert isinstance(ops_pool.OPS["max_pool3d_with_indices"](None, (x.unsqueeze(2),), f32,
                                                              {**window3, "kernel_size": (1, 2, 2)}),
                      tuple)
    grad = real_values((1, 2, 2, 2), "float32", 16).cuda()
    indices = reftorch.zeros((1, 2, 2, 2), dtype=reftorch.int64).cuda()
    shape = {"input_shape": (1, 2, 4, 4)}
    assert max_pool2d_backward(None, (grad, indices), f32, shape) is not NotImplemented
    assert max_pool2d_backward(None, (grad, indices.int()), f32, shape) is NotImplemented
    assert max_pool2d_backward(None, (grad, indices[..., :1]), f32, shape) is NotImplemented
    assert max_pool2d_backward(None, (grad, indices), f32,
                               {"input_shape": (2, 2, 4, 4)}) is NotImplemented
    avg = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "ceil_mode": False,
           "count_include_pad": True, "divisor_override": None}
    assert avg_pool2d(None, (x,), f32, avg) is not NotImplemented
    assert avg_pool2d(None, (x,), f32, {**avg, "divisor_override": 0}) is NotImplemented
    assert avg_backward(None, (grad,), f32, {**avg, "input_shape": (1, 2, 5, 7)}) \
        is NotImplemented                       # grad is not that input's pooled size
    assert adaptive_backward(
        None, (grad[..., :0],), f32, {"input_shape": (1, 2, 4, 4), "output_size": (2, 0)}) \
        is NotImplemented
    # int32 pooling is the reference's (through the fallback)
    plugins.reset_fallbacks()
    ints = reftorch.arange(32, dtype=reftorch.int32).reshape(1, 2, 4, 4)
    got = F.max_pool2d(ints.cuda(), 2)
    np.testing.assert_array_equal(raw(got), raw(reference(F.max_pool2d, ints, 2)))
    assert ("max_pool2d_with_indices", "cuda", reftorch.int32) in plugins.fallbacks()
    assert math.prod(got.shape) == 8
