"""reftorch-cuda's elementwise kernels against the cpu reference: unary math and activations
with their backward ops, comparisons, where, clamp, dtype conversions, and Python numbers with
16-bit tensors (the block-reduction kernels: test_plugin_cuda_reductions).

Every launch test runs twice (the `device_kind` fixture of test_plugin_cuda): on a real GPU
when there is one, and on the emulated driver, which re-does each kernel's work with NumPy from
the parameter bytes the plugin hands to cuLaunchKernel. The emulation computes with NumPy's
functions, as the reference does, so emulated results must equal the reference exactly; on a
GPU, CUDA's exp/log/tanh/sin/cos/erf are not correctly rounded (nor are NumPy's), so results
are compared within the ulp counts the UNARY and GRAD tables below give each op.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch import plugins
from reftorch._ops import nn_activation as A
import reftorch.nn.functional as F

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from spec_tests import test_plugin_cuda as base  # noqa: E402

# The launch fixtures and value helpers of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, values, host, reference = base.FLOATS, base.values, base.host, base.reference


# --- comparing results ------------------------------------------------------------------------

def finfo(dtype_name):
    import ml_dtypes
    return ml_dtypes.finfo(getattr(ml_dtypes, dtype_name)) if dtype_name == "bfloat16" \
        else np.finfo(dtype_name)


def assert_close(got, expected, gpu, ulps=0, abs_eps=0.0, scale=None, err_msg=""):
    """Shape, then dtype, then values. Emulated (gpu False): bit for bit (NaN where NaN, -0.0
    where -0.0; a NaN's sign and payload are not compared: a GPU's conversions may make NaNs
    canonical). On a GPU: within `ulps` units in the last place of the expected value, plus
    `abs_eps` machine epsilons times `scale` (for formulas that cancel)."""
    assert got.device.type == "cuda", err_msg
    assert got.shape == expected.shape, err_msg
    assert got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    if not gpu or (ulps == 0 and abs_eps == 0):
        np.testing.assert_array_equal(g, e, err_msg=err_msg)
        numbers = ~np.isnan(e)
        np.testing.assert_array_equal(np.signbit(g[numbers]), np.signbit(e[numbers]),
                                      err_msg=err_msg)
        return
    info = finfo(expected.dtype.name)
    eps, tiny = float(info.eps), float(info.smallest_subnormal)
    allowed = ulps * np.maximum(np.abs(e) * eps, tiny)
    if abs_eps:
        allowed = allowed + abs_eps * eps * scale
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    finite = np.isfinite(e)
    np.testing.assert_array_equal(g[~finite & ~np.isnan(e)], e[~finite & ~np.isnan(e)],
                                  err_msg=err_msg)
    assert np.all(np.abs(g - e)[finite] <= allowed[finite]), (
        err_msg, np.max((np.abs(g - e) / np.maximum(allowed, 1e-300))[finite]))


def plain(t):
    """A tensor's values as NumPy, bfloat16 widened to float32 (exactly), so that NumPy's
    comparisons treat NaN as equal to NaN and see signed zeros."""
    a = t.cpu()._np
    return a.astype(np.float32) if t.dtype is reftorch.bfloat16 else a


def assert_same_values(got, expected, err_msg=""):
    """Same shape, dtype and values, bit for bit up to NaNs' signs and payloads (-0.0 is not
    0.0)."""
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = plain(got), plain(expected)
    np.testing.assert_array_equal(g, e, err_msg=err_msg)
    if g.dtype.kind in "fc":
        numbers = ~np.isnan(e.real)
        np.testing.assert_array_equal(np.signbit(g.real[numbers]), np.signbit(e.real[numbers]),
                                      err_msg=err_msg)


def is_gpu(device_kind):
    return device_kind is None


# Layouts of one input, applied the same way to the cpu and the cuda tensor.
UNARY_LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.t(),
    "strided_slice": lambda x: x[1::2, 1:],
    "broadcast": lambda x: x[:1].expand(6, 5),
    "zero_dim": lambda x: x[2, 3],
    "empty": lambda x: x[:0],
}


# --- unary math and activations ---------------------------------------------------------------

# op -> (function, GPU tolerance in ulp for 32/64-bit, in ulp for the 16-bit types). CUDA's
# float functions are within 1-2 ulp of the exact value (CUDA C Programming Guide, "Mathematical
# Functions": expf 2, logf 1, tanhf 2, sinf/cosf 2, erf 2), NumPy's SIMD float32 exp/log within
# 2-3: their sum, plus one rounding per extra operation in sigmoid/silu. A 16-bit result is
# rounded from a float whose error is far below its own ulp: at most 1 ulp apart.
UNARY = {
    "neg": (reftorch.neg, 0, 0),
    "abs": (reftorch.abs, 0, 0),
    "sign": (reftorch.sign, 0, 0),
    "sgn": (reftorch.sgn, 0, 0),
    "sqrt": (reftorch.sqrt, 0, 0),
    "rsqrt": (reftorch.rsqrt, 0, 0),
    "relu": (reftorch.relu, 0, 0),
    "exp": (reftorch.exp, 4, 1),
    "expm1": (reftorch.expm1, 4, 1),
    "log": (reftorch.log, 4, 1),
    "log1p": (reftorch.log1p, 4, 1),
    "sin": (reftorch.sin, 4, 1),
    "cos": (reftorch.cos, 4, 1),
    "tanh": (reftorch.tanh, 4, 1),
    "sigmoid": (reftorch.sigmoid, 6, 1),
    "silu": (F.silu, 6, 1),
    "gelu": (F.gelu, 4, 1),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), 6, 1),
}
# Where 1 + erf(..) or 1 + tanh(..) cancels (gelu for x << 0), an absolute error of a few
# eps |x| is the functions' own error (erf and tanh are 1-2 ulp of 1 apart): allowed on top of
# the ulps. (float32 gelu computes erf in double, so only float64 needs it there.)
CANCELLING = {"gelu": 4.0, "gelu_tanh": 4.0}


def ulps_for(table_entry, dtype_name):
    return table_entry[1] if dtype_name in ("float32", "float64") else table_entry[2]


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_unary_ops_match_the_cpu_reference(device_kind, dtype_name, op):
    fn = UNARY[op][0]
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(UNARY_LAYOUTS.items()):
        x = values((6, 5), dtype_name, seed)
        expected = reference(fn, arrange(x))
        got = fn(arrange(x.cuda()))
        assert_close(got, expected, is_gpu(device_kind), ulps_for(UNARY[op], dtype_name),
                     CANCELLING.get(op, 0.0), 1 + np.abs(host(arrange(x))), err_msg=layout)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_unary_in_place_and_out(device_kind, dtype_name):
    x = values((4, 7), dtype_name, 11)
    plugins.reset_fallbacks()
    got = x.cuda().t()
    reftorch.relu_(got)  # in place through a transposed view
    assert_close(got, reference(lambda t: reftorch.relu(t), x.t()), False)
    out = reftorch.empty(0, dtype=x.dtype).cuda()
    reftorch.neg(x.cuda().t(), out=out)
    assert_close(out, reference(reftorch.neg, x.t()), False)
    y = x.cuda()
    y.abs_()
    assert_close(y, reference(reftorch.abs, x), False)
    assert plugins.fallbacks() == {}


def test_unary_overlapping_out_declines(device_kind):
    x = values((10,), "float32", 4)
    got = x.cuda()
    plugins.reset_fallbacks()
    reftorch.neg(got[:-1], out=got[1:])  # reads what it writes, shifted: not one pass
    expected = x.clone()
    with plugins.use_reference_kernels():
        reftorch.neg(expected[:-1], out=expected[1:])
    np.testing.assert_array_equal(host(got), host(expected))
    assert plugins.fallbacks() == {("neg", "cuda", reftorch.float32): 1}


def test_unary_kernels_decline_what_they_do_not_handle():
    from reftorch_cuda import ops_unary as U
    f32, f64 = reftorch.float32, reftorch.float64
    a = reftorch.ones(2)
    exp = U.unary_kernel("exp")
    assert exp(None, (a,), (f32, f32, f32), {}) is NotImplemented  # not on cuda
    assert exp(None, (a,), (f64, f64, f64), {}) is NotImplemented  # mixed dtypes
    ints = reftorch.ones(2, dtype=reftorch.int64)
    assert exp(None, (ints,), (reftorch.int64,) * 3, {}) is NotImplemented
    assert U.unary_kernel("gelu")(None, (a,), (f32,) * 3, {"approximate": "x"}) \
        is NotImplemented
    threshold = U.grad_kernel("threshold_backward")
    assert threshold(None, (a, a), (f32,) * 3, {"threshold": 2**60}) is NotImplemented


# --- the activations' backward ops ------------------------------------------------------------

GRAD = {  # op -> (function of (grad, v), ulps 32/64-bit, ulps 16-bit)
    "tanh_backward": (A.tanh_backward, 0, 0),
    "sigmoid_backward": (A.sigmoid_backward, 0, 0),
    "threshold_backward": (lambda g, x: A.threshold_backward(g, x, 0.25), 0, 0),
    "silu_backward": (A.silu_backward, 6, 1),
    "gelu_backward": (A.gelu_backward, 6, 1),
    "gelu_backward_tanh": (lambda g, x: A.gelu_backward(g, x, approximate="tanh"), 8, 1),
}
# gelu/silu derivatives cross 0 (and 1 + tanh cancels): an absolute error of a few eps
# (1 + x^2) |g| is the reference's own rounding error there.
GRAD_CANCELLING = {"silu_backward": 4.0, "gelu_backward": 4.0, "gelu_backward_tanh": 4.0}

PAIR_LAYOUTS = {
    "contiguous": lambda g, v: (g, v),
    "transposed": lambda g, v: (g.t(), v.t()),
    "one_transposed": lambda g, v: (g.t(), v.t().contiguous()),
    "broadcast": lambda g, v: (g[:1], v),
    "strided_slices": lambda g, v: (g[::2, 1:], v[1::2, :-1]),
    "zero_dim": lambda g, v: (g[1, 1], v[2, 2]),
    "empty": lambda g, v: (g[:0], v[:0]),
}


@pytest.mark.parametrize("op", GRAD)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_backward_ops_match_the_cpu_reference(device_kind, dtype_name, op):
    fn = GRAD[op][0]
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(PAIR_LAYOUTS.items()):
        g, v = values((6, 5), dtype_name, seed), values((6, 5), dtype_name, seed + 50)
        if op in ("tanh_backward", "sigmoid_backward"):
            v = reference(reftorch.tanh, v)  # an output of the forward, in [-1, 1]
        a, b = arrange(g, v)
        expected = reference(fn, a, b)
        got = fn(*arrange(g.cuda(), v.cuda()))
        scale = np.abs(host(a)) * (1 + host(b) ** 2)
        assert_close(got, expected, is_gpu(device_kind), ulps_for(GRAD[op], dtype_name),
                     GRAD_CANCELLING.get(op, 0.0), scale, err_msg=layout)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("activation", ["relu", "tanh", "sigmoid", "gelu", "silu"])
def test_autograd_calls_the_backward_kernels(emulated, activation):
    fn = {"relu": F.relu, "tanh": reftorch.tanh, "sigmoid": reftorch.sigmoid,
          "gelu": F.gelu, "silu": F.silu}[activation]
    x = values((5, 3), "float32", 7)
    x.requires_grad_(True)
    expected_grad = None
    with plugins.use_reference_kernels():
        fn(x).backward(reftorch.ones(5, 3))
        expected_grad = x.grad
    xc = x.detach().cuda().requires_grad_(True)
    emulated.launches.clear()
    fn(xc).backward(reftorch.ones(5, 3).cuda())
    names = {"relu": "ThresholdBackward", "tanh": "TanhBackward", "sigmoid": "SigmoidBackward",
             "gelu": "GeluErfBackward", "silu": "SiluBackward"}
    assert f"grad_kernel<float, {names[activation]}Op>" in emulated.launches
    np.testing.assert_array_equal(host(xc.grad), host(expected_grad))


def test_unary_program_instantiates_what_is_registered():
    from reftorch_cuda import ops_unary as U
    assert len(U.UNARY.name_expressions) == (17 + 6) * 4
    assert len(set(U.UNARY.name_expressions)) == len(U.UNARY.name_expressions)
    for op in list(U.UNARY_OPS) + list(U.GRAD_OPS):
        for name in FLOATS:
            assert plugins.serving(op, "cuda", getattr(reftorch, name)) == "cuda"


# --- comparisons, where, clamp ----------------------------------------------------------------

COMPARE = {name: getattr(reftorch, name) for name in ("eq", "ne", "lt", "le", "gt", "ge")}
COMPARE_DTYPES = FLOATS + ["int32", "int64", "bool"]


def some_values(shape, dtype_name, seed):
    """values() for float dtypes; small integers (with repeats, so == is often true) else."""
    if dtype_name in FLOATS:
        x = values(shape, dtype_name, seed)
        x.reshape(-1)[-3:] = x.reshape(-1)[:3]  # some equal pairs across the two inputs' seeds
        return x
    rng = np.random.default_rng(seed)
    return reftorch.tensor(rng.integers(-3, 3, shape)).to(getattr(reftorch, dtype_name))


@pytest.mark.parametrize("op", COMPARE)
@pytest.mark.parametrize("dtype_name", COMPARE_DTYPES)
def test_comparisons_match_the_cpu_reference(device_kind, dtype_name, op):
    fn = COMPARE[op]
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(PAIR_LAYOUTS.items()):
        x, y = some_values((6, 5), dtype_name, seed), some_values((6, 5), dtype_name, seed)
        y = y.flip(0) if dtype_name in FLOATS else y.flip(1)  # equal and unequal pairs
        a, b = arrange(x, y)
        expected = reference(fn, a, b)
        got = fn(*arrange(x.cuda(), y.cuda()))
        assert_close(got, expected, False, err_msg=layout)
    if dtype_name in ("float32", "float64", "int64"):
        x = some_values((6, 5), dtype_name, 3)
        assert_close(fn(x.cuda(), 0.5 if dtype_name != "int64" else 1),
                     reference(lambda t: fn(t, 0.5 if dtype_name != "int64" else 1), x),
                     False, err_msg="python scalar")
    assert plugins.fallbacks() == {}


TRIPLE_LAYOUTS = {
    "contiguous": lambda c, a, b: (c, a, b),
    "transposed": lambda c, a, b: (c.t(), a.t(), b.t()),
    "broadcast": lambda c, a, b: (c[:, :1], a[:1], b),
    "strided_slices": lambda c, a, b: (c[::2, 1:], a[1::2, :-1], b[::2, :-1]),
    "zero_dim": lambda c, a, b: (c, a[0, 0], b[1, 1]),
    "empty": lambda c, a, b: (c[:0], a[:0], b[:0]),
}


@pytest.mark.parametrize("dtype_name", FLOATS + ["int64", "int16", "bool", "complex64",
                                                 "complex128"])
def test_where_matches_the_cpu_reference(device_kind, dtype_name):
    dtype = getattr(reftorch, dtype_name)
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(TRIPLE_LAYOUTS.items()):
        condition = values((6, 5), "float32", seed) > 0
        a = values((6, 5), "float32", seed + 1).to(dtype)
        b = values((6, 5), "float32", seed + 2).to(dtype)
        args = arrange(condition, a, b)
        expected = reference(reftorch.where, *args)
        got = reftorch.where(*arrange(condition.cuda(), a.cuda(), b.cuda()))
        assert_same_values(got, expected, err_msg=layout)
    assert plugins.fallbacks() == {}


CLAMP = {
    "clamp_scalars": lambda x, lo, hi: reftorch.clamp(x, -1.5, 2.0),
    "clamp_tensors": lambda x, lo, hi: reftorch.clamp(x, lo, hi),
    "clamp_min": lambda x, lo, hi: reftorch.clamp(x, min=lo),
    "clamp_max_scalar": lambda x, lo, hi: x.clamp(max=0.25),
    "clamp_inverted": lambda x, lo, hi: reftorch.clamp(x, hi, lo),  # low > high gives high
}


@pytest.mark.parametrize("op", CLAMP)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_clamp_matches_the_cpu_reference(device_kind, dtype_name, op):
    fn = CLAMP[op]
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(TRIPLE_LAYOUTS.items()):
        x = values((6, 5), dtype_name, seed)
        low, high = values((6, 5), dtype_name, seed + 7), values((6, 5), dtype_name, seed + 8)
        low, high = reftorch.minimum(low, high), reftorch.maximum(low, high)
        args = arrange(x, low, high)
        expected = reference(fn, *args)
        got = fn(*arrange(x.cuda(), low.cuda(), high.cuda()))
        assert_close(got, expected, False, err_msg=layout)
    assert plugins.fallbacks() == {}


def test_clamp_in_place_and_nan_bounds(device_kind):
    x = values((5, 4), "float32", 9)
    got = x.cuda().t()
    plugins.reset_fallbacks()
    got.clamp_(-1.0, float("nan"))  # a NaN bound gives NaN everywhere, as np.minimum does
    assert_close(got, reference(lambda t: reftorch.clamp(t, -1.0, float("nan")), x.t()), False)
    assert plugins.fallbacks() == {}


# --- dtype conversions ------------------------------------------------------------------------

INTS = ["bool", "uint8", "int8", "int16", "int32", "int64"]


def in_range_values(shape, src_name, dst_name, seed):
    """Values whose conversion NumPy defines: truncations that fit an integer destination."""
    x = values(shape, "float64", seed)
    if src_name in INTS:
        x = x * 10 if src_name != "bool" else x
    elif dst_name in INTS and dst_name != "bool":
        x = reftorch.nan_to_num(x, 0.0, 0.0, 0.0)
        # inside int8 even after rounding to the source dtype (bfloat16 has 0.5 steps here)
        x = x.clamp(-0.9, 200.9) if dst_name == "uint8" else x.clamp(-120.9, 120.9)
    if src_name in INTS and src_name not in ("bool",):
        x = reftorch.nan_to_num(x, 0.0, 0.0, 0.0).clamp(-120, 120)
    return x.to(getattr(reftorch, src_name))


CAST_PAIRS = ([(s, d) for s in FLOATS for d in FLOATS + INTS if s != d]
              + [(s, d) for s in INTS for d in FLOATS])


@pytest.mark.parametrize("src_name,dst_name", CAST_PAIRS, ids=lambda p: p)
def test_conversions_match_the_cpu_reference(device_kind, src_name, dst_name):
    dst = getattr(reftorch, dst_name)
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(UNARY_LAYOUTS.items()):
        x = arrange(in_range_values((6, 5), src_name, dst_name, seed))
        expected = reference(lambda t: t.to(dst), x)
        got = x.cuda().to(dst)
        assert_same_values(got, expected, err_msg=layout)
        # into a strided destination
        target = reftorch.zeros(*reversed(expected.shape), dtype=dst).cuda().t()
        target.copy_(x.cuda())
        assert_same_values(target, expected, err_msg=layout)
    assert plugins.fallbacks() == {}


def test_undefined_float_to_integer_conversions_decline(device_kind):
    x = reftorch.tensor([1.5, -2.5, float("nan"), 3e9, -7.9])
    plugins.reset_fallbacks()
    with np.errstate(invalid="ignore"):
        got = x.cuda().to(reftorch.int32)  # NaN and 3e9: NumPy's (the platform's) result
        expected = reference(lambda t: t.to(reftorch.int32), x)
    np.testing.assert_array_equal(got.cpu()._np, expected._np)
    assert plugins.fallbacks() == {("copy_", "cuda", reftorch.float32): 1}
    plugins.reset_fallbacks()
    edges = reftorch.tensor([255.9, -0.9, 0.0], dtype=reftorch.float64)
    got = edges.cuda().to(reftorch.uint8)  # all defined: served
    np.testing.assert_array_equal(got.cpu()._np, np.array([255, 0, 0], np.uint8))
    assert plugins.fallbacks() == {}
    got = reftorch.tensor([256.0, 1.0]).cuda().to(reftorch.uint8)
    assert plugins.fallbacks() == {("copy_", "cuda", reftorch.float32): 1}


def test_fill_and_zero_stay_on_the_device(device_kind):
    x = values((4, 6), "float16", 2).cuda()
    plugins.reset_fallbacks()
    x.t()[1:].fill_(2.5)
    x[:, ::2].zero_()
    expected = values((4, 6), "float16", 2)
    with plugins.use_reference_kernels():
        expected.t()[1:].fill_(2.5)
        expected[:, ::2].zero_()
    assert_close(x, expected, False)
    assert plugins.fallbacks() == {}


def test_select_ops_write_out_and_in_place(device_kind):
    x, y = values((4, 6), "float32", 14), values((4, 6), "float32", 15)
    plugins.reset_fallbacks()
    mask = reftorch.empty(0, dtype=reftorch.bool).cuda()
    reftorch.lt(x.cuda().t(), y.cuda().t(), out=mask)  # resized, then written
    assert_same_values(mask, reference(reftorch.lt, x.t(), y.t()))
    target = reftorch.zeros(6, 4).cuda()
    reftorch.where(mask, x.cuda().t(), y.cuda().t(), out=target)
    assert_same_values(target, reference(reftorch.where, mask.cpu(), x.t(), y.t()))
    clamped = x.cuda()
    clamped[1:].clamp_min_(y.cuda()[1:])  # in place through a slice
    expected = x.clone()
    with plugins.use_reference_kernels():
        expected[1:].clamp_min_(y[1:])
    assert_same_values(clamped, expected)
    assert plugins.fallbacks() == {}


# --- Python numbers with 16-bit tensors ----------------------------------------------------------
# A Python number arrives as a 0-dim float32 tensor (the computation dtype), which the reference
# uses unrounded, as PyTorch does: the kernels take it as a float operand.

SCALAR_OPS = {
    "mul_right": lambda t: t * 0.1001,
    "mul_left": lambda t: 3.3333 * t,
    "rsub": lambda t: 0.3 - t,
    "add_alpha": lambda t: t.add(1.2345, alpha=3),
    "rdiv": lambda t: 7.0 / t,
    "div": lambda t: t / 3.0,
    "gt": lambda t: t > 0.1001,
    "le_left": lambda t: 0.25 >= t,
    "eq": lambda t: t == 1.0,
    "clamp": lambda t: t.clamp(-0.3, 0.7),
    "clamp_min": lambda t: t.clamp(min=0.1001),
    "clamp_max_": lambda t: t.clone().clamp_(max=1.2345),
    "where_right": lambda t: reftorch.where(t > 0, t, 0.1001),
    "where_left": lambda t: reftorch.where(t > 0, -1.2345, t),
}


@pytest.mark.parametrize("op", SCALAR_OPS)
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_python_numbers_with_16_bit_tensors_stay_on_the_device(device_kind, dtype_name, op):
    fn = SCALAR_OPS[op]
    plugins.reset_fallbacks()
    for layout in ("contiguous", "transposed", "strided_slice", "zero_dim", "empty"):
        x = UNARY_LAYOUTS[layout](values((6, 5), dtype_name, 21))
        expected = reference(fn, x)
        got = fn(x.cuda())
        assert_same_values(got, expected, err_msg=layout)
    assert plugins.fallbacks() == {}
