"""reftorch-cuda's matrix products (mm, bmm, addmm, baddbmm; kernels/gemm.cu) against the cpu
reference.

Every launch test runs on a real GPU when there is one and on the emulated driver (the
`device_kind` fixture of test_plugin_cuda); the emulation decodes the kernel parameters from
their bytes and reads every operand through bounds-checked views of device memory.

Two kinds of values:
  * small integers (|x| <= 4): every partial sum is an integer below 2**24, exact in float32
    and float64 whatever the order of the additions, so kernel and reference agree bit for bit
    (16-bit results: both round the same exact float32 value once). This checks the
    layouts, strides, edge tiles and alpha/beta exactly, on a GPU as well;
  * random normal values: the orders differ (FMA chains or tensor-core sums vs NumPy's BLAS),
    so results agree within the rounding bound of `assert_product_close`.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda import ops_gemm as G  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402

# The launch fixtures of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, host, reference = base.FLOATS, base.host, base.reference

# (M, K, N): 1x1, odd sizes on both sides of the 64 and 128 tiles, a deep K; and multiples
# of 8 (16-bit operands then load 16-byte chunks on a GPU, the matrix edges element by
# element), one with a last k tile of one chunk.
SIZES = [(1, 1, 1), (7, 5, 3), (65, 33, 129), (129, 257, 7), (130, 9, 257), (136, 64, 24),
         (8, 40, 200)]


def integers(shape, dtype_name, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(-4, 5, size=shape).astype(np.float32)
    return reftorch.tensor(values).to(getattr(reftorch, dtype_name))


def normals(shape, dtype_name, seed):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape).astype(np.float32)
    return reftorch.tensor(values).to(getattr(reftorch, dtype_name))


def assert_exact(got, expected, err_msg=""):
    """Shape, then dtype, then values bit for bit (NaN where NaN; zeros of either sign: the
    kernels' sums start from +0, as BLAS's do)."""
    assert got.device.type == "cuda", err_msg
    assert got.shape == expected.shape, err_msg
    assert got.dtype is expected.dtype, err_msg
    np.testing.assert_array_equal(host(got), host(expected), err_msg=err_msg)


def accumulation_eps(dtype_name):
    return float(np.finfo(np.float64 if dtype_name == "float64" else np.float32).eps)


def finfo(dtype_name):
    import ml_dtypes
    return ml_dtypes.finfo(getattr(ml_dtypes, dtype_name)) if dtype_name == "bfloat16" \
        else np.finfo(dtype_name)


def assert_product_close(got, expected, a, b, alpha=1.0, beta=0.0, input=None, err_msg=""):
    """Kernel and reference each compute alpha * (a @ b) + beta * input with K products and
    additions in some order: each is within (K + 2) eps |alpha| (|a| @ |b|) + 2 eps |beta
    input| of the exact value (eps: the accumulation type's; the tensor cores add at least as
    precisely as float32), so they are within twice that of each other; a 16-bit result adds
    one rounding of its own (one ulp of the output type apart at most)."""
    assert got.device.type == "cuda", err_msg
    assert got.shape == expected.shape and got.dtype is expected.dtype, err_msg
    g, e = host(got), host(expected)
    k = a.shape[-1]
    magnitude = np.abs(alpha) * np.matmul(np.abs(host(a)), np.abs(host(b)))
    if input is not None and beta != 0:
        magnitude = magnitude + 2 * np.abs(beta) * np.abs(np.broadcast_to(host(input), e.shape))
    allowed = 2 * (k + 2) * accumulation_eps(got.dtype.name) * magnitude
    if got.dtype.name in ("float16", "bfloat16"):
        info = finfo(got.dtype.name)
        allowed = allowed + np.maximum(float(info.eps) * np.abs(e), float(info.smallest_subnormal))
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)
    numbers = ~np.isnan(e)
    assert np.all(np.abs(g - e)[numbers] <= allowed[numbers]), (
        err_msg, np.max((np.abs(g - e) / np.maximum(allowed, 1e-300))[numbers]))


def served(device_kind, expression):
    """Nothing went through the fallback, and (emulated) the kernel was launched."""
    assert plugins.fallbacks() == {}
    if device_kind is not None:
        assert expression in device_kind.launches


# --- mm and its operand layouts ---------------------------------------------------------------

# Operand layouts of an (r, c) matrix: (shape of the dense tensor holding it, the view of it).
# The holder is made on cpu and copied to cuda, and the view taken on each device.
MATRIX_LAYOUTS = {
    "contiguous": (lambda r, c: (r, c), lambda t: t),
    "transposed": (lambda r, c: (c, r), lambda t: t.t()),
    "sliced": (lambda r, c: (r, c + 3), lambda t: t[:, 2:-1]),        # leading stride > cols
    "stepped": (lambda r, c: (2 * r, 2 * c), lambda t: t[1::2, ::2]),  # no stride of 1
}
# (layout of A, layout of B)
MM_LAYOUTS = [("contiguous", "contiguous"), ("transposed", "contiguous"),
              ("contiguous", "transposed"), ("transposed", "transposed"),
              ("sliced", "stepped"), ("stepped", "sliced")]


def operand(shape, layouts, name, dtype_name, seed):
    """(cpu view, cuda view) of integer values, laid out as `layouts[name]` says."""
    holder_shape, view = layouts[name]
    holder = integers(holder_shape(*shape), dtype_name, seed)
    return view(holder), view(holder.cuda())


@pytest.mark.parametrize("layout", MM_LAYOUTS, ids="-".join)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_mm_layouts_and_edge_tiles_exactly(device_kind, dtype_name, layout):
    plugins.reset_fallbacks()
    for m, k, n in SIZES:
        a, a_dev = operand((m, k), MATRIX_LAYOUTS, layout[0], dtype_name, m)
        b, b_dev = operand((k, n), MATRIX_LAYOUTS, layout[1], dtype_name, n)
        assert a_dev.stride() == a.stride() and b_dev.stride() == b.stride()
        expected = reference(reftorch.mm, a, b)
        assert_exact(reftorch.mm(a_dev, b_dev), expected, f"{layout} {(m, k, n)}")
    served(device_kind, G.expression(dtype_name))


def test_layouts_really_are_strided(emulated):
    """The layouts above are what their names say (so the tests cover those strides)."""
    strides = {name: operand((5, 7), MATRIX_LAYOUTS, name, "float32", 0)[0].stride()
               for name in MATRIX_LAYOUTS}
    assert strides == {"contiguous": (7, 1), "transposed": (1, 5), "sliced": (10, 1),
                       "stepped": (28, 2)}
    strides = {name: operand((3, 4, 5), BATCH_LAYOUTS, name, "float32", 0)[0].stride()
               for name in BATCH_LAYOUTS}
    assert strides == {"contiguous": (20, 5, 1), "batch_in_middle": (5, 15, 1),
                       "transposed_matrices": (20, 1, 4), "sliced": (28, 7, 1),
                       "broadcast_batch": (0, 5, 1)}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_mm_rounding_within_the_bound(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for m, k, n in [(65, 257, 129), (130, 1000, 67)]:
        a, b = normals((m, k), dtype_name, 1), normals((k, n), dtype_name, 2)
        expected = reference(reftorch.mm, a, b)
        assert_product_close(reftorch.mm(a.cuda(), b.cuda()), expected, a, b,
                             err_msg=str((m, k, n)))
    served(device_kind, G.expression(dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_empty_products(device_kind, dtype_name):
    """M or N = 0: an empty result, no launch; K = 0: zeros (addmm: beta * input)."""
    plugins.reset_fallbacks()
    for m, k, n in [(0, 5, 3), (4, 5, 0), (4, 0, 3)]:
        a, b = integers((m, k), dtype_name, 3), integers((k, n), dtype_name, 4)
        assert_exact(reftorch.mm(a.cuda(), b.cuda()), reference(reftorch.mm, a, b))
        x = integers((m, n), dtype_name, 5)
        expected = reference(lambda *t: reftorch.addmm(*t, beta=2), x, a, b)
        assert_exact(reftorch.addmm(x.cuda(), a.cuda(), b.cuda(), beta=2), expected)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_nan_and_inf_propagate_through_the_product(device_kind, dtype_name):
    a, b = integers((9, 20), dtype_name, 6), integers((20, 11), dtype_name, 7)
    a[2, 3], a[5, 0] = float("nan"), float("inf")
    b[19, 4] = float("-inf")
    expected = host(reference(reftorch.mm, a, b))
    got = host(reftorch.mm(a.cuda(), b.cuda()))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got[~np.isnan(expected)], expected[~np.isnan(expected)])


# --- bmm: batch strides -----------------------------------------------------------------------

# Layouts of a (batch, r, c) operand, as MATRIX_LAYOUTS.
BATCH_LAYOUTS = {
    "contiguous": (lambda b, r, c: (b, r, c), lambda t: t),
    # batch stride below the matrix size: the batch dim in the middle of the memory order
    "batch_in_middle": (lambda b, r, c: (r, b, c), lambda t: t.transpose(0, 1)),
    "transposed_matrices": (lambda b, r, c: (b, c, r), lambda t: t.transpose(1, 2)),
    "sliced": (lambda b, r, c: (b, r, c + 2), lambda t: t[:, :, 1:-1]),
    "broadcast_batch": (lambda b, r, c: (1, r, c), lambda t: t.expand(3, *t.shape[1:])),
}


@pytest.mark.parametrize("layout", BATCH_LAYOUTS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_bmm_batch_layouts_exactly(device_kind, dtype_name, layout):
    plugins.reset_fallbacks()
    for m, k, n in [(1, 1, 1), (65, 33, 129), (7, 130, 5), (16, 64, 136)]:
        a, a_dev = operand((3, m, k), BATCH_LAYOUTS, layout, dtype_name, 8)
        b, b_dev = operand((3, k, n), BATCH_LAYOUTS, layout, dtype_name, 9)
        expected = reference(reftorch.bmm, a, b)
        assert_exact(reftorch.bmm(a_dev, b_dev), expected, f"{layout} {(m, k, n)}")
    served(device_kind, G.expression(dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_bmm_rounding_and_empty_batches(device_kind, dtype_name):
    plugins.reset_fallbacks()
    a, b = normals((4, 65, 300), dtype_name, 10), normals((4, 300, 33), dtype_name, 11)
    assert_product_close(reftorch.bmm(a.cuda(), b.cuda()), reference(reftorch.bmm, a, b), a, b)
    for shape_a, shape_b in [((0, 3, 4), (0, 4, 5)), ((2, 3, 0), (2, 0, 5))]:
        a, b = integers(shape_a, dtype_name, 12), integers(shape_b, dtype_name, 13)
        assert_exact(reftorch.bmm(a.cuda(), b.cuda()), reference(reftorch.bmm, a, b))
    assert plugins.fallbacks() == {}


# --- addmm and baddbmm: beta and alpha ------------------------------------------------------------

# (beta, alpha); a half or a power of two keeps integer products exact.
SCALARS = [(1, 1), (0.5, -2.0), (0, 1), (0, 0.25), (-1, 0), (3, 1)]


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_addmm_beta_alpha_and_broadcast_input_exactly(device_kind, dtype_name):
    m, k, n = 65, 33, 129
    a, b = integers((m, k), dtype_name, 14), integers((k, n), dtype_name, 15)
    inputs = {"full": integers((m, n), dtype_name, 16), "row": integers((n,), dtype_name, 17),
              "column": integers((m, 1), dtype_name, 18), "one": integers((1, 1), dtype_name, 19),
              "transposed": integers((n, m), dtype_name, 20).t()}
    plugins.reset_fallbacks()
    for name, x in inputs.items():
        for beta, alpha in SCALARS:
            def fn(x, a, b):
                return reftorch.addmm(x, a, b, beta=beta, alpha=alpha)
            expected = reference(fn, x, a, b)
            assert_exact(fn(x.cuda(), a.cuda(), b.cuda()), expected, f"{name} {beta} {alpha}")
    served(device_kind, G.expression(dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_beta_zero_ignores_nan_in_the_input(device_kind, dtype_name):
    a, b = integers((7, 9), dtype_name, 21), integers((9, 5), dtype_name, 22)
    x = reftorch.full((7, 5), float("nan"), dtype=getattr(reftorch, dtype_name))
    for alpha in (1, 0.5):
        got = reftorch.addmm(x.cuda(), a.cuda(), b.cuda(), beta=0, alpha=alpha)
        expected = reference(lambda *t: reftorch.addmm(*t, beta=0, alpha=alpha), x, a, b)
        assert not np.isnan(host(expected)).any()
        assert_exact(got, expected)


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_alpha_zero_reads_the_operands_as_the_reference_does(device_kind, dtype_name):
    """float32/float64 addmm with alpha 0 does not read mat1 and mat2 (BLAS's rule: their NaN
    stays out); baddbmm and the 16-bit types compute the product (NaN * 0 is NaN)."""
    a, b = integers((7, 9), dtype_name, 23), integers((9, 5), dtype_name, 24)
    a[1, 1] = float("nan")
    x = integers((7, 5), dtype_name, 25)
    for fn, args in [(reftorch.addmm, (x, a, b)),
                     (reftorch.baddbmm, (x, a[None], b[None]))]:
        expected = reference(lambda *t: fn(*t, alpha=0), *args)
        got = fn(*(t.cuda() for t in args), alpha=0)
        assert_exact(got, expected, fn.__name__)


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_baddbmm_beta_alpha_and_broadcast_input(device_kind, dtype_name):
    a, b = integers((3, 65, 20), dtype_name, 26), integers((3, 20, 130), dtype_name, 27)
    inputs = {"full": integers((3, 65, 130), dtype_name, 28),
              "matrix": integers((65, 130), dtype_name, 29),
              "row": integers((130,), dtype_name, 30)}
    plugins.reset_fallbacks()
    for name, x in inputs.items():
        for beta, alpha in SCALARS:
            def fn(x, a, b):
                return reftorch.baddbmm(x, a, b, beta=beta, alpha=alpha)
            assert_exact(fn(x.cuda(), a.cuda(), b.cuda()), reference(fn, x, a, b),
                         f"{name} {beta} {alpha}")
    served(device_kind, G.expression(dtype_name))
    a, b = normals((2, 40, 300), dtype_name, 31), normals((2, 300, 70), dtype_name, 32)
    x = normals((2, 40, 70), dtype_name, 33)
    expected = reference(lambda *t: reftorch.baddbmm(*t, beta=0.3, alpha=-1.7), x, a, b)
    got = reftorch.baddbmm(x.cuda(), a.cuda(), b.cuda(), beta=0.3, alpha=-1.7)
    assert_product_close(got, expected, a, b, alpha=-1.7, beta=0.3, input=x)


# --- out=, in-place, autograd, declines --------------------------------------------------------------

def test_out_and_in_place_forms(device_kind):
    a, b = integers((65, 33), "float32", 34), integers((33, 129), "float32", 35)
    x = integers((65, 129), "float32", 36)
    plugins.reset_fallbacks()
    out = reftorch.empty((2, 2), device="cuda")
    result = reftorch.mm(a.cuda(), b.cuda(), out=out)
    assert result is out
    assert_exact(out, reference(reftorch.mm, a, b))
    out = reftorch.empty((65, 129), device="cuda")
    reftorch.addmm(x.cuda(), a.cuda(), b.cuda(), beta=0.5, out=out)
    assert_exact(out, reference(lambda *t: reftorch.addmm(*t, beta=0.5), x, a, b))
    y = x.cuda()
    y.addmm_(a.cuda(), b.cuda(), alpha=2)
    assert_exact(y, reference(lambda *t: reftorch.addmm(*t, alpha=2), x, a, b))
    assert plugins.fallbacks() == {}


def test_matmul_and_its_backward_use_the_kernels(device_kind):
    """matmul (3-D @ 2-D, a transposed weight as in linear) reaches the products through its
    decomposition; its backward formulas are products too."""
    x = integers((2, 5, 33), "float32", 37).cuda().requires_grad_()
    w = integers((17, 33), "float32", 38).cuda().requires_grad_()
    plugins.reset_fallbacks()
    y = reftorch.matmul(x, w.t())
    y.sum().backward()
    cpu_x, cpu_w = x.detach().cpu(), w.detach().cpu()
    assert_exact(y.detach(), reference(lambda p, q: reftorch.matmul(p, q.t()), cpu_x, cpu_w))
    assert_exact(x.grad, reference(lambda q: reftorch.ones(2, 5, 17) @ q, cpu_w))
    expected_w_grad = reference(lambda p: reftorch.ones(17, 10) @ p.reshape(10, 33), cpu_x)
    assert_exact(w.grad, expected_w_grad)
    fell_back = {op for op, _device, _dtype in plugins.fallbacks()}
    assert not fell_back & {"mm", "bmm", "addmm", "baddbmm"}, plugins.fallbacks()


def test_kernels_decline_what_they_do_not_handle(emulated):
    f32, f64 = reftorch.float32, reftorch.float64
    a, b = reftorch.ones(3, 4, device="cuda"), reftorch.ones(4, 5, device="cuda")
    b64 = reftorch.ones(4, 5, dtype=f64, device="cuda")
    x = reftorch.ones(3, 5, device="cuda")
    keys = (f32, f32, f32)
    assert G.mm_kernel(None, (a, b), keys, {}) is not NotImplemented
    assert G.mm_kernel(None, (a, b64), keys, {}) is NotImplemented            # mixed dtypes
    assert G.mm_kernel(None, (a.cpu(), b.cpu()), keys, {}) is NotImplemented  # not on cuda
    assert G.mm_kernel(None, (a, b.cpu()), keys, {}) is NotImplemented        # two devices
    ints = reftorch.ones(3, 4, dtype=reftorch.int32, device="cuda")
    assert G.mm_kernel(None, (ints, ints.t()), keys, {}) is NotImplemented    # no int kernel
    params = {"beta": 1, "alpha": 1, "skip_zero_alpha": True}
    assert G.addmm_kernel(None, (x, a, b), keys, params) is not NotImplemented
    assert G.addmm_kernel(None, (x.double(), a, b), keys, params) is NotImplemented
    assert G.addmm_kernel(None, (x, a, b), keys, {**params, "alpha": 1j}) is NotImplemented
    # beta == 0: the input is not read, so neither its dtype nor its device matter
    assert G.addmm_kernel(None, (x.cpu(), a, b), keys, {**params, "beta": 0}) \
        is not NotImplemented


def test_16_bit_products_decline_below_sm_80(emulated, monkeypatch):
    """mma.sync m16n8k16 needs sm_80: an older GPU keeps float32/float64 on the plugin (the
    program still compiles for it, the tensor-core kernel as a trap) and sends float16 and
    bfloat16 to the reference."""
    a = reftorch.ones(3, 4, device="cuda")
    monkeypatch.setattr(a._storage._driver, "arch", lambda index: "sm_75")
    for dtype in (reftorch.float16, reftorch.bfloat16):
        x = a.to(dtype)
        assert G.mm_kernel(None, (x, x.t()), (dtype,) * 3, {}) is NotImplemented
    assert G.mm_kernel(None, (a, a.t()), (reftorch.float32,) * 3, {}) is not NotImplemented


@base.needs_nvrtc
def test_program_compiles_for_a_gpu_without_mma(compiled):
    result = compiled("sm_75", G.GEMM)
    assert set(result.lowered) == set(G.GEMM.name_expressions)


def test_program_instantiates_what_is_registered(plugin):
    assert G.GEMM in G.PROGRAMS and G.GEMM.filename == "gemm.cu"
    assert set(G.GEMM.name_expressions) == {G.expression(name) for name in FLOATS}
    assert G.expression("float16") == "mma_gemm_kernel<rt_float16>"
    assert G.expression("float32") == "gemm_kernel<float>"
    for op in ("mm", "bmm", "addmm", "baddbmm"):
        for name in FLOATS:
            assert plugins.serving(op, "cuda", getattr(reftorch, name)) == "cuda", (op, name)


def test_args_layout_matches_the_kernel_struct():
    """GemmArgs: 4 + 12 int64, 2 doubles, 2 int32 = 152 bytes (gemm.cu's static_assert)."""
    raw = bytes(G.gemm_args(2, 3, 4, 5, [(1, 2, 3), (4, 5, 6), (7, 8, 9), (10, 11, 12)],
                            0.5, -2.0, True))
    assert len(raw) == 152
    assert np.frombuffer(raw[:128], "<i8").tolist() == [2, 3, 4, 5, *range(1, 13)]
    assert np.frombuffer(raw[128:144], "<f8").tolist() == [0.5, -2.0]
    assert np.frombuffer(raw[144:], "<i4").tolist() == [1, 0]
