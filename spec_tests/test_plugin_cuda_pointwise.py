"""reftorch-cuda's pointwise kernels (kernels/pointwise.cu): lerp, addcmul and addcdiv on the
float dtypes, add/sub/mul on the integer dtypes, and sum_to_size (kernels/reduce.cu), against
the cpu reference; and optimizer steps that run on the device without a fallback.

Launch tests run on a real GPU when there is one and on the emulated driver. Every pointwise
result must be the reference's bit for bit (the same expression, the same roundings).
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda import ops_pointwise as P  # noqa: E402
from reftorch_cuda import ops_reduce  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_kernels import assert_close, is_gpu  # noqa: E402

# The launch fixtures and value helpers of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, host, reference, values = base.FLOATS, base.host, base.reference, base.values
INTS = ["uint8", "int8", "int16", "int32", "int64"]


def assert_same(got, expected, err_msg=""):
    """Bit for bit (signed zeros included), on a GPU as on the emulator."""
    assert_close(got, expected, gpu=False, err_msg=err_msg)


def weights(shape, dtype_name, seed):
    """lerp weights on both sides of 0.5 (the two formulas), past 0 and 1, and exactly 0.5."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(-0.5, 1.5, shape).astype(np.float32)
    w.reshape(-1)[:3] = [0.5, 0.0, 1.0][:w.size]
    return reftorch.tensor(w).to(getattr(reftorch, dtype_name))


# Each case: (name, fn of three operands). Layouts arrange three (4, 5) tensors.
TERNARY = {
    "lerp": lambda a, b, c: reftorch.lerp(a, b, c),
    "lerp_scalar_low": lambda a, b, c: reftorch.lerp(a, b, 0.3),
    "lerp_scalar_high": lambda a, b, c: reftorch.lerp(a, b, 0.7),
    "addcmul": lambda a, b, c: reftorch.addcmul(a, b, c),
    "addcmul_value": lambda a, b, c: reftorch.addcmul(a, b, c, value=-0.37),
    "addcdiv_value": lambda a, b, c: reftorch.addcdiv(a, b, c, value=1e-3),
}
LAYOUTS = {
    "contiguous": lambda a, b, c: (a, b, c),
    "transposed": lambda a, b, c: (a.t(), b.t(), c.t()),
    "broadcast": lambda a, b, c: (a[:, :1], b[:1, :], c),
    "zero_dim": lambda a, b, c: (a, b[1, 2], c[0, 0]),
    "strided": lambda a, b, c: (a[::2, 1:], b[1::2, :-1], c[1::2, 1:]),
}


@pytest.mark.parametrize("op", TERNARY)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_ternary_ops_match_the_cpu_reference(device_kind, dtype_name, op):
    fn = TERNARY[op]
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        a, b = values((4, 5), dtype_name, seed), values((4, 5), dtype_name, seed + 10)
        c = weights((4, 5), dtype_name, seed) if op == "lerp" else values((4, 5), dtype_name,
                                                                           seed + 20)
        expected = reference(fn, *arrange(a, b, c))
        got = fn(*arrange(a.cuda(), b.cuda(), c.cuda()))
        assert_same(got, expected, layout)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_in_place_and_out_forms(device_kind, dtype_name):
    a, b, c = (values((3, 6), dtype_name, k) for k in (1, 2, 3))
    plugins.reset_fallbacks()
    got = a.cuda().t()
    got.addcdiv_(b.cuda().t(), c.cuda().t(), value=0.5)  # writes through a transposed view
    assert_same(got, reference(lambda x, y, z: x.t().clone().addcdiv_(y.t(), z.t(), value=0.5),
                               a, b, c))
    got = a.cuda()
    got.lerp_(b.cuda(), 0.25)
    assert_same(got, reference(lambda x, y: x.clone().lerp_(y, 0.25), a, b))
    out = reftorch.empty(0, dtype=a.dtype).cuda()   # resized by the op
    reftorch.addcmul(a.cuda(), b.cuda(), c.cuda(), value=3, out=out)
    assert_same(out, reference(lambda x, y, z: reftorch.addcmul(x, y, z, value=3), a, b, c))
    assert plugins.fallbacks() == {}


def test_ternary_ops_decline_what_they_do_not_handle():
    f32, f64 = reftorch.float32, reftorch.float64
    a, d = reftorch.ones(2), reftorch.ones(2, dtype=f64)
    addcmul = P.ternary_kernel("addcmul")
    assert addcmul(None, (a, a, d), (f64, f64, f64), {}) is NotImplemented      # mixed dtypes
    assert addcmul(None, (a, a, a), (f32, f32, f32), {"value": 1j}) is NotImplemented
    assert addcmul(None, (a, a, a), (f32, f32, f32), {}) is NotImplemented      # not on cuda
    assert addcmul(None, (a, a), (f32, f32, f32), {}) is NotImplemented


def int_values(shape, dtype_name, seed):
    """Integers over the dtype's whole range, so that sums and products wrap around."""
    info = np.iinfo(dtype_name)
    rng = np.random.default_rng(seed)
    return reftorch.tensor(rng.integers(info.min, info.max, shape, dtype=dtype_name,
                                        endpoint=True))


INT_OPS = {
    "add": lambda a, b: reftorch.add(a, b),
    "add_alpha": lambda a, b: reftorch.add(a, b, alpha=3),
    "sub_alpha": lambda a, b: reftorch.sub(a, b, alpha=-2),
    "mul": lambda a, b: reftorch.mul(a, b),
    "add_number": lambda a, b: a + 7,
}


@pytest.mark.parametrize("op", INT_OPS)
@pytest.mark.parametrize("dtype_name", INTS)
def test_integer_arithmetic_wraps_like_the_reference(device_kind, dtype_name, op):
    fn = INT_OPS[op]
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(base.LAYOUTS.items()):
        x, y = int_values((6, 5), dtype_name, seed), int_values((6, 5), dtype_name, seed + 50)
        expected = reference(fn, *arrange(x, y))
        got = fn(*arrange(x.cuda(), y.cuda()))
        assert got.device.type == "cuda" and got.dtype is expected.dtype, layout
        np.testing.assert_array_equal(got.cpu().numpy(), expected.numpy(), err_msg=layout)
    assert plugins.fallbacks() == {}


def test_a_counter_increments_in_place(device_kind):
    # what BatchNorm does with num_batches_tracked each training step
    counter = reftorch.tensor(41).cuda()
    plugins.reset_fallbacks()
    counter.add_(1)
    counter += 1
    assert counter.item() == 43 and plugins.fallbacks() == {}


def small_integers(shape, dtype_name, seed):
    """Whole numbers small enough that every sum is exact in any order (so the device's
    summation order cannot change a bit)."""
    rng = np.random.default_rng(seed)
    return reftorch.tensor(rng.integers(-8, 9, shape).astype(np.float32)).to(
        getattr(reftorch, dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
@pytest.mark.parametrize("shape,size", [((4, 3, 5), (3, 1)), ((4, 3, 5), (1, 5)),
                                        ((2, 3), (2, 3)), ((7, 1, 6), (6,)), ((5,), ())])
def test_sum_to_size_matches_the_cpu_reference(device_kind, dtype_name, shape, size):
    a = small_integers(shape, dtype_name, 3)
    plugins.reset_fallbacks()
    got = a.cuda().sum_to_size(size)
    expected = reference(lambda t: t.sum_to_size(size), a)
    assert_same(got, expected)
    assert plugins.fallbacks() == {}
    if size == shape:      # a new tensor, not the input (the reference copies too)
        assert got.data_ptr() != a.data_ptr()


def test_sum_to_size_of_long_columns_is_within_rounding(device_kind):
    # 40,000 elements per output (more than one chunk): the device adds in its own fixed
    # order, the reference pairwise; both within (log2 n + 16) eps of the sum of magnitudes
    a = values((40000, 3), "float32", 4)
    a = reftorch.where(a.isfinite(), a, reftorch.zeros(()))
    got = host(a.cuda().sum_to_size(1, 3))
    expected = host(reference(lambda t: t.sum_to_size(1, 3), a))
    bound = 32 * np.finfo(np.float32).eps * np.abs(host(a)).sum(axis=0)
    assert np.all(np.abs(got - expected) <= bound)
    assert not np.array_equal(got, np.zeros_like(got))


def test_sum_to_size_declines_off_the_device():
    f32 = reftorch.float32
    assert ops_reduce.sum_to_size_kernel(None, (reftorch.ones(2, 3),), (f32,) * 3,
                                         {"size": (3,)}) is NotImplemented


OPTIMIZERS = {
    "SGD momentum": lambda p: reftorch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "Adam": lambda p: reftorch.optim.Adam(p, lr=1e-2),
    "AdamW": lambda p: reftorch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_steps_run_on_the_device(device_kind, name):
    """Three steps with fixed gradients on cuda give the cpu reference's parameters bit for
    bit (every update op is exact pointwise arithmetic), with no fallback."""
    rng = np.random.default_rng(0)
    start = rng.standard_normal((5, 4)).astype(np.float32)
    grads = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(3)]

    def train(device, use_reference):
        param = reftorch.nn.Parameter(reftorch.tensor(start).to(device))
        opt = OPTIMIZERS[name]([param])
        for g in grads:
            param.grad = reftorch.tensor(g).to(device)
            if use_reference:
                with plugins.use_reference_kernels():
                    opt.step()
            else:
                opt.step()
        return param.detach().cpu().numpy()

    expected = train("cpu", True)
    plugins.reset_fallbacks()
    got = train("cuda", False)
    assert plugins.fallbacks() == {}
    np.testing.assert_array_equal(got, expected)


# --- cat, stack, masked_fill --------------------------------------------------------------------

JOIN_DTYPES = FLOATS + ["int64", "int32", "uint8", "bool", "complex64", "complex128"]


def any_values(shape, dtype_name, seed):
    """Values of any dtype (floats with NaN, infinities and signed zeros mixed in)."""
    if dtype_name in FLOATS:
        return values(shape, dtype_name, seed)
    rng = np.random.default_rng(seed)
    raw = rng.standard_normal(shape) * 50 + 1j * rng.standard_normal(shape)
    if dtype_name.startswith("complex"):
        return reftorch.tensor(raw.astype(dtype_name))
    return reftorch.tensor(raw.real).to(getattr(reftorch, dtype_name))


@pytest.mark.parametrize("dtype_name", JOIN_DTYPES)
def test_cat_and_stack_match_the_cpu_reference(device_kind, dtype_name):
    a, b = any_values((3, 4), dtype_name, 1), any_values((2, 4), dtype_name, 2)
    c = any_values((4, 3), dtype_name, 3).t()         # a transposed input
    empty = reftorch.empty(0, dtype=a.dtype)           # skipped by cat's legacy rule
    cases = {
        "cat dim 0": lambda x, y, z, e: reftorch.cat([x, y, z, e]),
        "cat dim 1": lambda x, y, z, e: reftorch.cat([x.t(), z.t()], dim=1),
        "cat dim -1 strided": lambda x, y, z, e: reftorch.cat([x[:, ::2], z[:, 1:3]], -1),
        "stack dim 0": lambda x, y, z, e: reftorch.stack([x, z]),
        "stack dim 1": lambda x, y, z, e: reftorch.stack([x, z, x], dim=1),
        "stack last": lambda x, y, z, e: reftorch.stack([x, z], dim=-1),
    }
    plugins.reset_fallbacks()
    for name, fn in cases.items():
        expected = reference(fn, a, b, c, empty)
        got = fn(a.cuda(), b.cuda(), c.cuda(), empty.cuda())
        assert got.device.type == "cuda" and got.dtype is expected.dtype, name
        assert got.shape == expected.shape and got.is_contiguous(), name
        assert got.cpu().numpy().tobytes() == expected.numpy().tobytes(), name
    assert plugins.fallbacks() == {}


def test_cat_converts_to_the_promoted_dtype(device_kind):
    a, b = values((2, 3), "float16", 1), reftorch.arange(6).reshape(2, 3)
    plugins.reset_fallbacks()
    got = reftorch.cat([a.cuda(), b.cuda()])
    expected = reference(lambda x, y: reftorch.cat([x, y]), a, b)
    assert got.dtype is reftorch.float16 and plugins.fallbacks() == {}
    assert_same(got, expected)


@pytest.mark.parametrize("dtype_name", JOIN_DTYPES)
def test_masked_fill_matches_the_cpu_reference(device_kind, dtype_name):
    a = any_values((4, 5), dtype_name, 5)
    mask = reftorch.tensor(np.random.default_rng(6).random((4, 5)) < 0.4)
    fill = {"bool": True, "uint8": 7}.get(dtype_name, -3 if "int" in dtype_name else 1e-3)
    cases = {
        "number": lambda x, m: x.masked_fill(m, fill),
        "0-dim tensor": lambda x, m: x.masked_fill(m, reftorch.tensor(fill).to(x.device)),
        "broadcast mask": lambda x, m: x.masked_fill(m[1], fill),
        "transposed": lambda x, m: x.t().masked_fill(m.t(), fill),
        "in place": lambda x, m: x.clone().masked_fill_(m, fill),
    }
    plugins.reset_fallbacks()
    for name, fn in cases.items():
        expected = reference(fn, a, mask)
        got = fn(a.cuda(), mask.cuda())
        assert got.device.type == "cuda" and got.dtype is expected.dtype, name
        assert got.cpu().numpy().tobytes() == expected.contiguous().numpy().tobytes() or \
            np.array_equal(got.cpu().numpy(), expected.numpy(), equal_nan=True), name
    assert plugins.fallbacks() == {}


def test_masked_fill_with_a_value_float16_rounds(device_kind):
    # the value is rounded to the tensor's dtype as the reference rounds it (1/3 in float16)
    a = reftorch.zeros(3, dtype=reftorch.float16)
    mask = reftorch.tensor([True, False, True])
    got = a.cuda().masked_fill(mask.cuda(), 1 / 3)
    assert got.cpu().numpy().tobytes() == a.masked_fill(mask, 1 / 3).numpy().tobytes()


# --- Python numbers as operands -------------------------------------------------------------------

def test_a_python_number_operand_does_not_wait_for_the_device(emulated):
    """A number becomes a 0-dim device tensor by a copy queued on the current stream: no
    synchronisation (a blocking copy would wait for all the work queued before it)."""
    x = reftorch.arange(6, dtype=reftorch.float32).cuda()
    emulated.calls.clear()
    y = x * 0.5
    z = (y + 3).sub_(1, alpha=2)
    assert "cuStreamSynchronize" not in emulated.calls
    np.testing.assert_array_equal(z.cpu().numpy(), np.arange(6) * 0.5 + 1)


def test_a_python_number_operand_on_a_side_stream(emulated):
    # a created stream's copies run late (deferred): the number's copy must still come
    # before the kernel that reads it, from a host buffer that is still alive
    emulated.deferred = True
    x = reftorch.arange(5, dtype=reftorch.float64).cuda()
    stream = reftorch.cuda.Stream()
    stream.wait_stream(reftorch.cuda.current_stream())
    with reftorch.cuda.stream(stream):
        results = [x * k for k in (0.25, -3.0, 7.5)]
    reftorch.cuda.current_stream().wait_stream(stream)
    for k, r in zip((0.25, -3.0, 7.5), results):
        np.testing.assert_array_equal(r.cpu().numpy(), np.arange(5) * k)


# --- pow ------------------------------------------------------------------------------------------

def pow_operands(dtype_name, seed):
    """Bases of both signs (with zeros, infinities and NaN), and exponents mixing whole
    numbers (so negative bases have real powers), fractions and the specials."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(-3, 3, (6, 5)).astype(np.float32)
    base.reshape(-1)[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0]
    exponent = rng.choice([2.0, 3.0, -1.0, 0.5, -1.5, 0.0, 2.5, np.nan, np.inf],
                          (6, 5)).astype(np.float32)
    dtype = getattr(reftorch, dtype_name)
    return reftorch.tensor(base).to(dtype), reftorch.tensor(exponent).to(dtype)


# GPU tolerance in ulp (32/64-bit, 16-bit): CUDA's powf is within 4 ulp of the exact value,
# pow within 2 (CUDA C Programming Guide), NumPy's within 1; a 16-bit result is rounded from
# a float far more accurate than its own ulp.
POW_ULPS = {"float32": 5, "float64": 3, "float16": 1, "bfloat16": 1}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_pow_matches_the_cpu_reference(device_kind, dtype_name):
    base, exponent = pow_operands(dtype_name, 7)
    cases = {
        "tensor exponent": lambda x, y: x.pow(y),
        "square": lambda x, y: x ** 2,
        "number": lambda x, y: x.pow(1.7),
        "broadcast": lambda x, y: x.pow(y[:1]),
        "transposed": lambda x, y: x.t().pow(y.t()),
        "in place sqrt": lambda x, y: x.clone().pow_(0.5),
        "reciprocal": lambda x, y: x.pow(-1),
        "half array": lambda x, y: x.pow(reftorch.full_like(y, 0.5)),   # pow, not sqrt
    }
    plugins.reset_fallbacks()
    for name, fn in cases.items():
        expected = reference(fn, base, exponent)
        got = fn(base.cuda(), exponent.cuda())
        exact = name in ("square", "in place sqrt", "reciprocal")
        ulps = 0 if exact else POW_ULPS[dtype_name]
        assert_close(got, expected, is_gpu(device_kind), ulps, err_msg=name)
    assert plugins.fallbacks() == {}
