"""reftorch-cuda's block-reduction kernels against the cpu reference: sum, mean, amax, amin,
bool / integer sums, norm (p = 2, 1, inf, -inf), var and std, argmax, argmin, max.dim,
min.dim, cumsum, softmax and log_softmax with their backward ops, and layer_norm (the
reductions of reduce_more.cu, logsumexp, prod and norm p = 0 and whole p >= 3, are tested in
test_plugin_cuda_reduce_more).

Launch tests run on a real GPU when there is one and on the emulated driver (see
test_plugin_cuda_kernels, whose comparison helpers these use). Sums run in another order than
NumPy's pairwise sums, so both modes compare within the two orders' rounding bounds (norm p =
1, 2 and var / std too, with the bounds their helpers state); the kernels' own order is
checked bit for bit against a NumPy model of it. The extrema, arg reductions, integer sums
and cumsums are compared bit for bit in both modes. Every test also checks that no op fell
back to the cpu.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import reftorch
from reftorch import plugins
import reftorch.nn.functional as F

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_kernels import assert_close, finfo  # noqa: E402

# The launch fixtures and value helpers of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, host, reference = base.FLOATS, base.host, base.reference


# --- reductions -------------------------------------------------------------------------------

def finite_values(shape, dtype_name, seed):
    rng = np.random.default_rng(seed)
    return reftorch.tensor((rng.standard_normal(shape) * 3).astype(np.float32)).to(
        getattr(reftorch, dtype_name))


# (input layout from a (6, 5, 300) tensor, dims, keepdim)
REDUCE_CASES = {
    "all": (lambda x: x, None, False),
    "last_dim": (lambda x: x, (-1,), False),
    "first_dim_keepdim": (lambda x: x, (0,), True),
    "two_dims": (lambda x: x, (0, 2), False),
    "middle_dim": (lambda x: x, (1,), True),
    "transposed": (lambda x: x.transpose(0, 2), (0,), False),
    "strided_slice": (lambda x: x[::2, 1:, ::3], (2,), False),
    "broadcast": (lambda x: x[:, :1].expand(6, 5, 300), (1, 2), False),
    "zero_dim": (lambda x: x[1, 2, 3], None, False),
    "zero_dim_dim0": (lambda x: x[1, 2, 3], (0,), True),
    "empty_reduced": (lambda x: x[:, :0], (1,), False),
    "empty_kept": (lambda x: x[:0], (2,), False),
}
REDUCE = {
    "sum": lambda x, dim, keepdim: x.sum() if dim is None else x.sum(dim, keepdim=keepdim),
    "mean": lambda x, dim, keepdim: x.mean() if dim is None else x.mean(dim, keepdim=keepdim),
    "amax": lambda x, dim, keepdim: x.amax(() if dim is None else dim, keepdim=keepdim),
    "amin": lambda x, dim, keepdim: x.amin(() if dim is None else dim, keepdim=keepdim),
    "max": lambda x, dim, keepdim: x.max() if dim is None else x.amax(dim, keepdim=keepdim),
}


def accumulator_eps(dtype_name):
    return float(np.finfo(np.float64 if dtype_name == "float64" else np.float32).eps)


def assert_sum_close(got, expected, x, dims, mean, err_msg):
    """The kernel and NumPy add in different orders: each is within (terms in sequence) eps of
    the exact sum of |x| (the kernel: n / 256 sequential terms and an 8-level tree; NumPy:
    pairwise, log2(n) levels), divided by n for a mean, plus the final rounding to the output
    dtype."""
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    magnitude = np.abs(host(x))
    axes = None if dims is None or x.ndim == 0 else tuple(d % x.ndim for d in dims)
    n = max(1, magnitude.size // max(1, e.size)) if x.ndim else 1
    total = np.sum(magnitude, axis=axes, keepdims=got.ndim == x.ndim and x.ndim > 0)
    total = total.reshape(e.shape) if total.size == e.size else total
    steps = n / 256 + 8 + np.log2(n + 1) + 1
    allowed = steps * accumulator_eps(got.dtype.name) * total / (n if mean else 1)
    allowed = allowed + float(finfo(got.dtype.name).eps) * np.abs(e)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    assert np.all(np.abs(g - e)[~np.isnan(e)] <= allowed[~np.isnan(e)]), err_msg


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_reductions_match_the_cpu_reference(device_kind, dtype_name, op):
    fn = REDUCE[op]
    base_x = finite_values((6, 5, 300), dtype_name, 1)
    plugins.reset_fallbacks()
    for case, (arrange, dims, keepdim) in REDUCE_CASES.items():
        x = arrange(base_x)
        if op in ("amax", "amin", "max") and x.numel() == 0:
            continue  # no identity: the reference raises before any kernel
        if op == "max" and dims is not None:
            continue
        expected = reference(fn, x, dims, keepdim)
        got = fn(arrange(base_x.cuda()), dims, keepdim)
        if op in ("sum", "mean"):
            assert_sum_close(got, expected, x, dims, op == "mean", case)
        else:
            assert_close(got, expected, False, err_msg=case)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("op", ["amax", "amin", "sum"])
def test_reductions_propagate_nan_and_inf(device_kind, op):
    x = finite_values((4, 600), "float32", 2)
    x[1, 377] = float("nan")
    x[2, 5] = float("inf")
    x[3, 0] = float("-inf")
    expected = reference(lambda t: getattr(t, op)(1), x)
    got = getattr(x.cuda(), op)(1)
    g, e = host(got), host(expected)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
    np.testing.assert_array_equal(np.isinf(g), np.isinf(e))
    np.testing.assert_array_equal(g[np.isinf(e)], e[np.isinf(e)])


@pytest.mark.parametrize("n", [70001, 9000])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_sum_order_is_the_blocks_and_does_not_depend_on_the_launch(device_kind, dtype_name, n):
    """The sum is reduce.cu's fixed order exactly (modelled in NumPy by the emulation's
    block_order_reduce; 70001 elements take the two-launch path): on a GPU this checks the
    device code's order bit for bit."""
    from reftorch_cuda.ops_reduce import CHUNK
    from spec_tests.cuda_kernel_emulation import block_order_reduce
    x = finite_values((3, n), dtype_name, 3)
    wide = host(x).astype(np.float64 if dtype_name == "float64" else np.float32)
    model = block_order_reduce(wide, wide.dtype.type(0), np.add, CHUNK)
    first, again = x.cuda().sum(1), x.cuda().sum(1)
    np.testing.assert_array_equal(host(first), model.astype(np.float64))
    np.testing.assert_array_equal(host(first), host(again))
    mean = x.cuda().t().mean(0)  # the same rows through transposed strides
    np.testing.assert_array_equal(host(mean), (model / wide.dtype.type(n)).astype(np.float64))


# (input layout from a (2, 3, 20000) tensor, dims): more than CHUNK elements per output
LONG_REDUCE_CASES = {
    "all": (lambda x: x, None),
    "last_dim": (lambda x: x, (2,)),
    "transposed": (lambda x: x.transpose(0, 2), (0, 2)),
    "strided": (lambda x: x[:, ::2], (1, 2)),
}


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_long_reductions_run_in_two_launches(device_kind, dtype_name, op):
    from reftorch_cuda.ops_reduce import CHUNK
    base_x = finite_values((2, 3, 20000), dtype_name, 13)
    plugins.reset_fallbacks()
    for case, (arrange, dims) in LONG_REDUCE_CASES.items():
        x = arrange(base_x)
        assert x.numel() // (1 if dims is None else math.prod(
            n for d, n in enumerate(x.shape) if d not in dims)) > CHUNK
        expected = reference(REDUCE[op], x, dims, False)
        got = REDUCE[op](arrange(base_x.cuda()), dims, False)
        if op in ("sum", "mean"):
            assert_sum_close(got, expected, x, dims, op == "mean", case)
        else:
            assert_close(got, expected, False, err_msg=case)
    if device_kind is not None:
        assert any(k.startswith("reduce_chunks_kernel") for k in device_kind.launches)
    assert plugins.fallbacks() == {}


def test_sum_with_another_dtype_declines(device_kind):
    x = finite_values((4, 5), "float32", 4)
    plugins.reset_fallbacks()
    got = x.cuda().sum(1, dtype=reftorch.float64)
    expected = reference(lambda t: t.sum(1, dtype=reftorch.float64), x)
    np.testing.assert_array_equal(host(got), host(expected))
    assert plugins.fallbacks() == {("sum", "cuda", reftorch.float32): 1}


# --- softmax and log_softmax ------------------------------------------------------------------

SOFTMAX_CASES = {  # name -> (layout of a (6, 5, 300) tensor, dim)
    "last_dim": (lambda x: x, -1),
    "middle_dim": (lambda x: x, 1),
    "first_dim": (lambda x: x, 0),
    "transposed": (lambda x: x.transpose(0, 2), -1),
    "strided_slice": (lambda x: x[::2, 1:, ::7], 2),
    "broadcast": (lambda x: x[:, :1].expand(6, 5, 300), 1),
    "zero_dim": (lambda x: x[1, 2, 3], 0),
    "empty_rows": (lambda x: x[:0], -1),
}
SOFTMAX = {"softmax": F.softmax, "log_softmax": F.log_softmax}


def assert_row_op_close(got, expected, dtype_name, ulps_32, err_msg):
    """Row sums in another order than NumPy's, exp/log a few ulp apart, and outputs that cancel
    (log_softmax near 0, the gradients' g - sum): within `ulps_32` ulp of each value plus as
    many of the row's largest magnitude (1 ulp for the 16-bit types: their rounding
    dominates)."""
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    if e.size == 0:
        return
    ulps = ulps_32 if dtype_name in ("float32", "float64") else 1
    row_scale = np.max(np.abs(e), axis=-1, keepdims=True) if e.ndim else np.abs(e)
    allowed = ulps * float(finfo(dtype_name).eps) * (np.abs(e) + row_scale)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    assert np.all(np.abs(g - e) <= allowed), err_msg


@pytest.mark.parametrize("op", SOFTMAX)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_softmax_matches_the_cpu_reference(device_kind, dtype_name, op):
    fn = SOFTMAX[op]
    base_x = finite_values((6, 5, 300), dtype_name, 5)
    plugins.reset_fallbacks()
    for case, (arrange, dim) in SOFTMAX_CASES.items():
        x = arrange(base_x)
        expected = reference(fn, x, dim)
        got = fn(arrange(base_x.cuda()), dim)
        assert_row_op_close(got, expected, dtype_name, 16, case)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("op", SOFTMAX)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_softmax_backward_matches_the_cpu_reference(device_kind, dtype_name, op):
    fn = SOFTMAX[op]
    x = finite_values((7, 300), dtype_name, 6)
    g = finite_values((7, 300), dtype_name, 7)
    leaf = x.detach().requires_grad_(True)
    with plugins.use_reference_kernels():
        fn(leaf, -1).backward(g)
    expected = leaf.grad
    leaf = x.detach().cuda().requires_grad_(True)
    plugins.reset_fallbacks()
    fn(leaf, -1).backward(g.cuda())
    got = leaf.grad
    assert plugins.fallbacks() == {}
    assert_row_op_close(got, expected, dtype_name, 16, op)


@pytest.mark.parametrize("op", SOFTMAX)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_softmax_row_cache_changes_no_bit(device_kind, dtype_name, op, monkeypatch):
    """The forward kernel keeps a row that fits ROW_CACHE_BYTES in shared memory between its
    passes and reads a longer one again at each pass: the same values in the same order, so
    the same bits. Also rows past the limit against the reference."""
    from reftorch_cuda import ops_softmax
    fn = SOFTMAX[op]
    x = finite_values((3, 2000), dtype_name, 9)
    cached = host(fn(x.cuda(), -1))
    monkeypatch.setattr(ops_softmax, "ROW_CACHE_BYTES", 0)
    streamed = host(fn(x.cuda(), -1))
    bits = f"u{cached.dtype.itemsize}"
    np.testing.assert_array_equal(cached.view(bits), streamed.view(bits))
    monkeypatch.undo()
    # Just past the limit: 49152 bytes hold 12288 floats or 6144 doubles.
    long_rows = finite_values((2, 12289), dtype_name, 10)
    assert_row_op_close(fn(long_rows.cuda(), -1), reference(fn, long_rows, -1), dtype_name,
                        16, "long rows")


def test_softmax_rows_of_minus_infinity_and_nan(device_kind):
    x = finite_values((3, 300), "float32", 8)
    x[0] = float("-inf")       # every element -inf: NaN everywhere, as the reference
    x[1, 17] = float("nan")    # NaN in the row: the whole row NaN
    x[2, :150] = float("-inf")  # half the row -inf: zeros there
    for fn in SOFTMAX.values():
        expected = reference(fn, x, -1)
        got = fn(x.cuda(), -1)
        g, e = host(got), host(expected)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
        np.testing.assert_array_equal(g[2, :150], e[2, :150])


# --- layer_norm -------------------------------------------------------------------------------

LAYER_NORM_CASES = {  # name -> (layout of a (6, 5, 300) tensor, normalized_shape)
    "last_dim": (lambda x: x, (300,)),
    "two_dims": (lambda x: x, (5, 300)),
    "all_dims": (lambda x: x[0], (5, 300)),
    "strided_rows": (lambda x: x[::2, 1:], (300,)),
    "strided_tail": (lambda x: x[:, :, ::3], (100,)),
    "transposed_rows": (lambda x: x.transpose(0, 1), (300,)),
    "one_element_rows": (lambda x: x[:, :, :1], (1,)),
    "empty_rows": (lambda x: x[:0], (300,)),
}


@pytest.mark.parametrize("affine", ["weight_and_bias", "weight", "none"])
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_layer_norm_matches_the_cpu_reference(device_kind, dtype_name, affine):
    from reftorch._ops.nn_normalization import native_layer_norm
    base_x = finite_values((6, 5, 300), dtype_name, 9)
    plugins.reset_fallbacks()
    for case, (arrange, normalized) in LAYER_NORM_CASES.items():
        x = arrange(base_x)
        weight = finite_values(normalized, dtype_name, 10) if affine != "none" else None
        bias = finite_values(normalized, dtype_name, 11) if affine == "weight_and_bias" \
            else None
        expected = reference(native_layer_norm, x, normalized, weight, bias, 1e-5)
        on = [t.cuda() if t is not None else None for t in (arrange(base_x), weight, bias)]
        got = native_layer_norm(on[0], normalized, on[1], on[2], 1e-5)
        output, mean, rstd = got
        # The mean cancels: its rounding is that of the sum of |x| (as for sum and mean).
        assert_sum_close(mean, expected[1], x.abs() / math.prod(normalized),
                         tuple(range(x.ndim - len(normalized), x.ndim)), False, case)
        # rstd and the output: within a few ulp of themselves and of the row's largest value
        assert_row_op_close(rstd, expected[2], dtype_name, 16, case)
        assert_row_op_close(output, expected[0], dtype_name, 16, case)
    assert plugins.fallbacks() == {}


def test_layer_norm_with_mixed_parameter_dtypes_declines(device_kind):
    x = finite_values((4, 8), "float16", 12)
    weight = finite_values((8,), "float32", 13)
    plugins.reset_fallbacks()
    got = F.layer_norm(x.cuda(), (8,), weight.cuda())
    expected = reference(lambda a, w: F.layer_norm(a, (8,), w), x, weight)
    np.testing.assert_array_equal(host(got), host(expected))
    assert plugins.fallbacks() == {("native_layer_norm", "cuda", reftorch.float16): 1}


# --- argmax, argmin, max.dim, min.dim -----------------------------------------------------------

def tied_values(shape, dtype_name, seed):
    """Small whole numbers (many ties, -0.0 and +0.0 among them) with NaN, inf and -inf
    sprinkled in: the cases where an index choice can go wrong."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, shape).astype(np.float32)
    a[rng.random(shape) < 0.3] *= -1   # signed zeros: 0 * -1 is -0.0
    flat = a.reshape(-1)
    for special, share in ((np.nan, 0.002), (np.inf, 0.002), (-np.inf, 0.002)):
        flat[rng.random(flat.size) < share] = special
    return reftorch.tensor(a).to(getattr(reftorch, dtype_name))


ARG = {
    "argmax": lambda x, dim, keepdim: x.argmax(dim, keepdim=keepdim),
    "argmin": lambda x, dim, keepdim: x.argmin(dim, keepdim=keepdim),
    "max_dim": lambda x, dim, keepdim: tuple(x.max(dim, keepdim=keepdim)),
    "min_dim": lambda x, dim, keepdim: tuple(x.min(dim, keepdim=keepdim)),
}
# (input layout from a (6, 5, 300) tensor, dim, keepdim); dim None: argmax's flattened tensor
ARG_CASES = {
    "flattened": (lambda x: x, None, False),
    "flattened_keepdim": (lambda x: x, None, True),
    "flattened_transposed": (lambda x: x.transpose(0, 2), None, False),
    "last_dim": (lambda x: x, -1, False),
    "first_dim_keepdim": (lambda x: x, 0, True),
    "middle_dim": (lambda x: x, 1, False),
    "transposed": (lambda x: x.transpose(0, 2), 0, False),
    "strided_slice": (lambda x: x[::2, 1:, ::3], 2, True),
    "broadcast_ties": (lambda x: x[:, :1].expand(6, 5, 300), 1, False),
    "zero_dim": (lambda x: x[1, 2, 3], 0, False),
    "zero_dim_flattened": (lambda x: x[1, 2, 3], None, True),
    "empty_kept": (lambda x: x[:0], 2, False),
}


def assert_same(got, expected, err_msg):
    """Tensors (or tuples of them) equal bit for bit: values with their signs, NaN where NaN;
    int64 indices exactly."""
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), err_msg
        for g, e in zip(got, expected):
            assert_same(g, e, err_msg)
        return
    if expected.dtype is reftorch.int64:
        assert got.is_cuda and got.dtype is reftorch.int64 and got.shape == expected.shape, \
            err_msg
        np.testing.assert_array_equal(got.cpu()._np, expected._np, err_msg=err_msg)
    else:
        assert_close(got, expected, False, err_msg=err_msg)


@pytest.mark.parametrize("op", ARG)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_arg_reductions_match_the_cpu_reference(device_kind, dtype_name, op):
    fn = ARG[op]
    base_x = tied_values((6, 5, 300), dtype_name, 21)
    plugins.reset_fallbacks()
    for case, (arrange, dim, keepdim) in ARG_CASES.items():
        if dim is None and op.endswith("_dim"):
            continue   # max(x) / min(x) are the values-only reductions above
        x = arrange(base_x)
        expected = reference(fn, x, dim, keepdim)
        got = fn(arrange(base_x.cuda()), dim, keepdim)
        assert_same(got, expected, case)
    assert plugins.fallbacks() == {}


ARG_ROWS = {  # a row -> what makes it hard
    "first_nan_wins": [1.0, np.nan, 5.0, np.nan, np.inf],
    "inf_ties": [np.inf, -np.inf, np.inf, -np.inf, 0.0],
    "signed_zero_ties": [-0.0, 0.0, -0.0, 0.0, -0.0],
    "zero_ties_plus_first": [0.0, -0.0, 0.0, -1.0, 1e-30],
    "all_nan": [np.nan] * 5,
    "all_minus_inf": [-np.inf] * 5,
}


@pytest.mark.parametrize("op", ARG)
def test_arg_reductions_nan_inf_and_signed_zeros(device_kind, op):
    rows = np.array(list(ARG_ROWS.values()), dtype=np.float32)
    for dtype_name in FLOATS:
        x = reftorch.tensor(rows).to(getattr(reftorch, dtype_name))
        for dim in (1, 0):
            expected = reference(ARG[op], x, dim, False)
            assert_same(ARG[op](x.cuda(), dim, False), expected, f"{dtype_name} dim {dim}")


@pytest.mark.parametrize("op", ARG)
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_long_arg_reductions_run_in_two_launches(device_kind, dtype_name, op):
    """More than CHUNK elements per output: ties and NaN across chunks (the first NaN and the
    best values sit in later chunks too)."""
    from reftorch_cuda.ops_reduce import CHUNK
    base_x = tied_values((2, 3, 20000), dtype_name, 22)
    base_x[0, 0, CHUNK + 5] = float("nan")   # the only NaN of its row sits in the second chunk
    base_x[0, 0, :CHUNK + 5].clamp_(-3, 3)
    base_x[1, 2, CHUNK + 1:] = 50.0          # the largest values only in the second chunk
    plugins.reset_fallbacks()
    for case, (arrange, dim) in {"flattened": (lambda x: x, None),
                                 "last_dim": (lambda x: x, 2),
                                 "transposed": (lambda x: x.transpose(0, 2), 0),
                                 "strided": (lambda x: x[:, ::2, :].transpose(1, 2), 1)}.items():
        if dim is None and op.endswith("_dim"):
            continue
        x = arrange(base_x)
        expected = reference(ARG[op], x, dim, False)
        got = ARG[op](arrange(base_x.cuda()), dim, False)
        assert_same(got, expected, case)
    if device_kind is not None:
        assert any(k.startswith("arg_chunks_kernel") for k in device_kind.launches)
    assert plugins.fallbacks() == {}


def test_arg_reductions_of_empty_reductions_raise_as_the_reference(device_kind):
    x = reftorch.zeros(3, 0)
    for fn in (lambda t: t.argmax(1), lambda t: t.max(1), lambda t: t.argmin()):
        with pytest.raises(Exception) as expected:
            reference(fn, x)
        with pytest.raises(type(expected.value)):
            fn(x.cuda())


# --- sums of bool and integer tensors -----------------------------------------------------------

INTS = ["bool", "uint8", "int8", "int16", "int32", "int64"]


def int_values(shape, dtype_name, seed):
    rng = np.random.default_rng(seed)
    dtype = getattr(reftorch, dtype_name)
    if dtype_name == "bool":
        return reftorch.tensor(rng.random(shape) < 0.5)
    info = np.iinfo(dtype.numpy_dtype)
    return reftorch.tensor(rng.integers(info.min, info.max, shape, dtype=np.int64,
                                        endpoint=True).astype(dtype.numpy_dtype))


@pytest.mark.parametrize("dtype_name", INTS)
def test_integer_sums_are_exact_int64(device_kind, dtype_name):
    base_x = int_values((6, 5, 300), dtype_name, 23)
    long_x = int_values((2, 3, 20000), dtype_name, 24)
    plugins.reset_fallbacks()
    sum_ = REDUCE["sum"]
    for case, (arrange, dims, keepdim) in REDUCE_CASES.items():
        expected = reference(sum_, arrange(base_x), dims, keepdim)
        assert_same(sum_(arrange(base_x.cuda()), dims, keepdim), expected, case)
    for case, (arrange, dims) in LONG_REDUCE_CASES.items():
        expected = reference(sum_, arrange(long_x), dims, False)
        assert_same(sum_(arrange(long_x.cuda()), dims, False), expected, "long " + case)
    assert plugins.fallbacks() == {}


def test_int64_sums_wrap_as_the_reference(device_kind):
    big = reftorch.tensor(np.full((3, 20000), 2 ** 62 + 12345, dtype=np.int64))
    for fn in (lambda t: t.sum(), lambda t: t.sum(1), lambda t: t[:, :100].sum(0)):
        assert_same(fn(big.cuda()), reference(fn, big), "wrap")


def test_accuracy_count_and_declined_integer_dtype(device_kind):
    """(pred == target).sum(): the eval loop's count, on the device; sum(dtype=int32) of an
    integer tensor declines to the counted fallback."""
    logits = finite_values((64, 10), "float32", 25)
    target = reftorch.tensor(np.random.default_rng(26).integers(0, 10, 64))
    plugins.reset_fallbacks()
    on = logits.cuda().argmax(1)
    correct = (on == target.cuda()).sum()
    expected = reference(lambda a, t: (a.argmax(1) == t).sum(), logits, target)
    assert_same(correct, expected, "accuracy")
    assert correct.item() == int(expected)
    assert plugins.fallbacks() == {}
    ints = target.to(reftorch.int32)
    got = ints.cuda().sum(dtype=reftorch.int32)
    assert got.dtype is reftorch.int32 and got.item() == int(target.sum())
    assert plugins.fallbacks() == {("sum", "cuda", reftorch.int32): 1}


# --- var and std ------------------------------------------------------------------------------

def _reduced(x, dims):
    """(values as float64, axes, elements per output) of reducing cpu tensor x over dims."""
    a = host(x)
    axes = None if dims is None or x.ndim == 0 else tuple(d % x.ndim for d in dims)
    n = a.size if axes is None else math.prod(a.shape[d] for d in axes)
    return a, axes, n


def variance_bound(x, dims, correction, keepdim, dtype_name):
    """(exact variance, allowed |got - reference|) of var over dims, as float64 arrays of the
    result's shape. Each side's mean m' is within delta = steps eps sum|x| / n (+ the
    division) of the exact mean m; the sum of squared deviations of m' is the exact one plus
    n (m - m')^2 (the deviations from m sum to 0), each square and sum rounding adding
    (steps + 3) eps of it; the reference and the kernel may sit on either side, so twice
    that, over dof, plus a rounding of the quotient."""
    a, axes, n = _reduced(x, dims)
    eps = accumulator_eps(dtype_name)
    steps = n / 256 + 8 + np.log2(n + 1) + 1
    with np.errstate(all="ignore"):
        mean = np.mean(a, axis=axes, keepdims=True) if n else np.full((1,) * a.ndim, np.nan)
        squares = np.sum((a - mean) ** 2, axis=axes, keepdims=keepdim)
        magnitude = np.sum(np.abs(a), axis=axes, keepdims=keepdim)
        centre = np.abs(np.sum(a, axis=axes, keepdims=keepdim)) / max(n, 1)
        delta = steps * eps * magnitude / max(n, 1) + eps * centre
        dof = max(n - correction, 0)
        spread = squares + n * delta * delta
        variance = squares / dof
        allowed = (2 * ((steps + 3) * eps * spread + n * delta * delta) / dof
                   + eps * np.abs(variance))
    return variance, allowed


def assert_variance_close(got, expected, x, dims, correction, keepdim, std, err_msg):
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    exact, allowed = variance_bound(x, dims, correction, keepdim, got.dtype.name)
    exact, allowed = exact.reshape(e.shape), allowed.reshape(e.shape)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    np.testing.assert_array_equal(np.isinf(g), np.isinf(e), err_msg=err_msg)
    finite = np.isfinite(e)
    out_eps = float(finfo(got.dtype.name).eps)
    if std:   # |s' - s| = |s'^2 - s^2| / (s' + s), and s'^2, s^2 are within the var bound
        allowed = allowed / np.maximum(g + e, 1e-300) + 2 * out_eps * np.abs(e)
    else:
        allowed = allowed + out_eps * np.abs(e)
    assert np.all(np.abs(g - e)[finite] <= allowed[finite]), (
        err_msg, np.max((np.abs(g - e) / np.maximum(allowed, 1e-300))[finite]))


VARIANCE = {
    "var": lambda x, dims, keepdim, correction: x.var(dims, keepdim=keepdim,
                                                      correction=correction),
    "std": lambda x, dims, keepdim, correction: x.std(dims, keepdim=keepdim,
                                                      correction=correction),
}


@pytest.mark.parametrize("op", VARIANCE)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_var_std_match_the_cpu_reference(device_kind, dtype_name, op):
    fn = VARIANCE[op]
    base_x = finite_values((6, 5, 300), dtype_name, 31) + 10   # a mean away from 0
    long_x = finite_values((2, 3, 20000), dtype_name, 32)
    plugins.reset_fallbacks()
    cases = [(f"{case} c={c}", arrange, base_x, dims, keepdim, c)
             for case, (arrange, dims, keepdim) in REDUCE_CASES.items() for c in (1, 0, 2.5)]
    cases += [(f"long {case}", arrange, long_x, dims, False, 1)
              for case, (arrange, dims) in LONG_REDUCE_CASES.items()]
    cases += [("dof 0", lambda x: x[:, :, :2], base_x, (2,), False, 2),
              ("dof below 0", lambda x: x[:, :, :2], base_x, (2,), True, 3)]
    for case, arrange, source, dims, keepdim, correction in cases:
        x = arrange(source)
        expected = reference(fn, x, dims, keepdim, correction)
        got = fn(arrange(source.cuda()), dims, keepdim, correction)
        assert_variance_close(got, expected, x, dims, correction, keepdim, op == "std", case)
    if device_kind is not None:
        assert any(k.startswith("deviation_chunks_kernel") for k in device_kind.launches)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("n", [70001, 9000])
def test_var_order_is_the_blocks(device_kind, n):
    """var is the two passes in reduce.cu's block order exactly (NumPy model below), for one
    launch and for the chunked launches: on a GPU this checks the device code bit for bit."""
    from reftorch_cuda.ops_reduce import CHUNK
    from spec_tests.cuda_kernel_emulation import block_order_reduce
    x = finite_values((3, n), "float32", 33) + 5
    wide = host(x).astype(np.float32)
    mean = block_order_reduce(wide, np.float32(0), np.add, CHUNK) / np.float32(n)
    deviation = wide - mean[:, None]
    squares = block_order_reduce(deviation * deviation, np.float32(0), np.add, CHUNK)
    model = squares / np.float32(n - 1)
    np.testing.assert_array_equal(host(x.cuda().var(1)), model.astype(np.float64))
    np.testing.assert_array_equal(host(x.cuda().t().std(0)), np.sqrt(model).astype(np.float64))


# --- norm ---------------------------------------------------------------------------------------

NORMS = {"2": 2, "1": 1, "inf": math.inf, "-inf": -math.inf}


def assert_norm_close(got, expected, x, dims, p, err_msg):
    """p = inf, -inf: exact. p = 1: a sum of |x|, within (steps) eps of the sum of |x| on each
    side. p = 2: the sum of squares within (steps + 1) eps of itself on each side, so the root
    within that over (g + e). Plus the output's rounding; a result too large for a 16-bit
    dtype is inf on both sides."""
    if math.isinf(p):
        assert_close(got, expected, False, err_msg=err_msg)
        return
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    a, axes, n = _reduced(x, dims)
    steps = n / 256 + 8 + np.log2(n + 1) + 1
    eps = accumulator_eps(got.dtype.name)
    if p == 1:
        allowed = 2 * steps * eps * np.sum(np.abs(a), axis=axes).reshape(e.shape)
    else:
        squares = np.sum(a * a, axis=axes).reshape(e.shape)
        allowed = 2 * (steps + 1) * eps * squares / np.maximum(g + e, 1e-300)
    allowed = allowed + 2 * float(finfo(got.dtype.name).eps) * np.abs(e)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    np.testing.assert_array_equal(np.isinf(g), np.isinf(e), err_msg=err_msg)
    finite = np.isfinite(e)
    assert np.all(np.abs(g - e)[finite] <= allowed[finite]), err_msg


@pytest.mark.parametrize("p", NORMS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_norms_match_the_cpu_reference(device_kind, dtype_name, p):
    order = NORMS[p]
    base_x = finite_values((6, 5, 300), dtype_name, 34)
    long_x = finite_values((2, 3, 20000), dtype_name, 35)

    def fn(x, dims, keepdim):
        return reftorch.linalg.vector_norm(x, order, dims, keepdim)
    plugins.reset_fallbacks()
    cases = [(case, arrange, base_x, dims, keepdim)
             for case, (arrange, dims, keepdim) in REDUCE_CASES.items()]
    cases += [(f"long {case}", arrange, long_x, dims, False)
              for case, (arrange, dims) in LONG_REDUCE_CASES.items()]
    for case, arrange, source, dims, keepdim in cases:
        x = arrange(source)
        if math.isinf(order) and x.numel() == 0:
            continue   # no identity: the reference raises before any kernel
        expected = reference(fn, x, dims, keepdim)
        got = fn(arrange(source.cuda()), dims, keepdim)
        assert_norm_close(got, expected, x, dims, order, case)
    assert plugins.fallbacks() == {}


def test_norms_propagate_nan_and_inf_and_other_p_declines(device_kind):
    x = finite_values((4, 600), "float32", 36)
    x[1, 377] = float("nan")
    x[2, 5] = float("-inf")
    plugins.reset_fallbacks()
    for order in NORMS.values():
        got, expected = x.cuda().norm(order, 1), reference(lambda t: t.norm(order, 1), x)
        g, e = host(got), host(expected)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
        np.testing.assert_array_equal(g[np.isinf(e)], e[np.isinf(e)])
    assert np.isnan(host(x.cuda().norm())) and np.isnan(host(reference(lambda t: t.norm(), x)))
    assert plugins.fallbacks() == {}
    got = x.cuda().norm(2.5, 1)   # a fractional p: no kernel (nor for p above MAX_WHOLE_P)
    np.testing.assert_array_equal(host(got), host(reference(lambda t: t.norm(2.5, 1), x)))
    assert plugins.fallbacks() == {("norm", "cuda", reftorch.float32): 1}


# --- cumsum -------------------------------------------------------------------------------------

# (input layout from a (6, 5, 300) tensor, dim)
CUMSUM_CASES = {
    "last_dim": (lambda x: x, -1),
    "first_dim": (lambda x: x, 0),
    "middle_dim": (lambda x: x, 1),
    "transposed": (lambda x: x.transpose(0, 2), 2),
    "strided_slice": (lambda x: x[::2, 1:, ::3], 2),
    "broadcast": (lambda x: x[:, :1].expand(6, 5, 300), 1),
    "zero_dim": (lambda x: x[1, 2, 3], 0),
    "empty": (lambda x: x[:, :0], 2),
    "one_column": (lambda x: x[:, :, :1], 2),
}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_cumsum_is_bit_equal_to_the_reference(device_kind, dtype_name):
    """Rows of at most SCAN_LONG: one thread per row adds in index order, as NumPy's
    add.accumulate: the same bits, on the emulator and on a GPU (NaN, inf, signed zeros
    included: values() mixes them in, and a row starting at -0.0 keeps it). Few long rows
    are scanned in chunks: test_plugin_cuda_reduce_paths."""
    base_x = base.values((6, 5, 300), dtype_name, 37)
    base_x[:, :, 0] = -0.0
    many_x = finite_values((4100, 2500), dtype_name, 38) if dtype_name == "float32" else None
    plugins.reset_fallbacks()
    cases = [(case, arrange, base_x, dim) for case, (arrange, dim) in CUMSUM_CASES.items()]
    if many_x is not None:   # at least SCAN_ROWS long rows: still one thread each
        cases += [("many long rows", lambda x: x, many_x, 1)]
    for case, arrange, source, dim in cases:
        expected = reference(lambda t: t.cumsum(dim), arrange(source))
        got = arrange(source.cuda()).cumsum(dim)
        assert_close(got, expected, False, err_msg=case)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", INTS)
def test_integer_cumsum_is_exact_int64(device_kind, dtype_name):
    base_x = int_values((6, 5, 300), dtype_name, 39)
    plugins.reset_fallbacks()
    for case, (arrange, dim) in CUMSUM_CASES.items():
        expected = reference(lambda t: t.cumsum(dim), arrange(base_x))
        assert_same(arrange(base_x.cuda()).cumsum(dim), expected, case)
    assert plugins.fallbacks() == {}
    x = finite_values((4, 5), "float32", 40)
    got = x.cuda().cumsum(1, dtype=reftorch.float64)   # another dtype: the reference's
    np.testing.assert_array_equal(host(got), host(reference(
        lambda t: t.cumsum(1, dtype=reftorch.float64), x)))
    assert plugins.fallbacks() == {("cumsum", "cuda", reftorch.float32): 1}


# --- a training / evaluation step ---------------------------------------------------------------

def test_loop_reductions_run_without_fallback(device_kind):
    """What a training / evaluation loop calls after its forward pass: predictions and their
    count, per-class maxima, statistics, gradient norms (clip_grad_norm_'s), a running sum."""
    logits = finite_values((32, 10), "float32", 41)
    target = reftorch.tensor(np.random.default_rng(42).integers(0, 10, 32))
    steps = {
        "accuracy": lambda l, t: (l.argmax(dim=1) == t).sum(),
        "top_value": lambda l, t: l.max(dim=1).values,
        "top_index": lambda l, t: l.min(1, keepdim=True).indices,
        "std": lambda l, t: l.std(),
        "var": lambda l, t: l.var(0, unbiased=False),
        "grad_norm": lambda l, t: reftorch.linalg.vector_norm(l, 2),
        "max_abs": lambda l, t: l.norm(math.inf),
        "running": lambda l, t: l.cumsum(0)[-1],
        "mask_count": lambda l, t: (t > 4).sum(0),
    }
    plugins.reset_fallbacks()
    for name, fn in steps.items():
        expected = reference(fn, logits, target)
        got = fn(logits.cuda(), target.cuda())
        assert got.is_cuda and got.shape == expected.shape and got.dtype is expected.dtype, name
        np.testing.assert_allclose(host(got), host(expected), rtol=1e-5, err_msg=name)
    assert plugins.fallbacks() == {}
