"""The C plugin's matrix products (plugin_cpu/src/gemm.c, reftorch_cpu/gemm.py): mm, bmm,
addmm, baddbmm, 2-D convolution (plain, stride-1 transposed) and its weight gradient for
float32 and float64 on cpu.

The reference is NumPy's matmul (OpenBLAS), which sums in another order, so results are
compared within a rounding bound, not bit for bit: |got - want| <= rtol * sqrt(K) * scale,
where scale is the product of the magnitudes (|alpha| * |A| @ |B| + |beta * input|, in
float64), for both the reference and the exact (float64 / longdouble) result. The C call
counter (`_gemm.calls()`) tells whether the C path really ran. Block sizes are shrunk with
`_gemm.set_blocking` so that small matrices cross every block boundary (K slices, MC row
blocks, NC column blocks, micro-tile edges) cheaply; one test crosses the real ones.
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
    from reftorch_cpu import _depthwise, _gemm, gemm
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

F32, F64 = reftorch.float32, reftorch.float64
DTYPES = [F32, F64]
RTOL = {F32: 1e-5, F64: 1e-13}        # times sqrt(K), relative to the magnitudes' product
TYPE_CODE = {F32: 0, F64: 1}


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


@pytest.fixture
def no_threshold(monkeypatch):
    """Send every size to C (the real thresholds decline small and skinny products)."""
    monkeypatch.setattr(gemm, "MIN_FLOPS", 0)
    monkeypatch.setattr(gemm, "MIN_EINSUM_FLOPS", 0)
    monkeypatch.setattr(gemm, "MIN_SIDE", 0)


@pytest.fixture
def small_blocks():
    """Tiny block sizes for every ISA and type: KC 7, MC 2 micro-tiles + 1 row, NC 2
    micro-panels + 1 column (the driver rounds MC and NC up to whole micro-tiles)."""
    saved = []
    for isa in _gemm.supported_isas():
        for code in (0, 1):
            saved.append((isa, code, _gemm.set_blocking(isa, code, 7, 3, 3)))
    yield
    for isa, code, (kc, mc, nc) in saved:
        _gemm.set_blocking(isa, code, kc, mc, nc)


def values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return np.asarray(rng.standard_normal(shape), dtype=dtype.numpy_dtype)


def tensor(shape, dtype, seed, layout="contiguous"):
    """A tensor of `shape` in the given memory layout (same values for every layout)."""
    a = values(shape, dtype, seed)
    if layout == "contiguous":
        return reftorch.from_numpy(a)
    if layout == "transposed":       # last two dims swapped in memory
        return reftorch.from_numpy(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2)
    if layout == "strided":          # every other element of a bigger tensor, both dims
        big = np.zeros(shape[:-2] + (shape[-2] * 2, shape[-1] * 3), a.dtype)
        big[..., ::2, ::3] = a
        return reftorch.from_numpy(big)[..., ::2, ::3]
    if layout == "batch-broadcast":  # one matrix expanded over the batch (stride 0)
        return reftorch.from_numpy(a[:1].copy()).expand(*shape)
    raise ValueError(layout)


def host(t):
    return np.array(t.numpy())


def calls_during(fn):
    before = _gemm.calls()
    result = fn()
    return result, _gemm.calls() - before


def bound(a, b, k, dtype, alpha=1.0, beta=0.0, input=None):
    """The allowed difference: rtol * sqrt(K) * (|alpha| |A| @ |B| + |beta input|)."""
    scale = abs(alpha) * np.matmul(np.abs(host(a).astype(np.float64)),
                                   np.abs(host(b).astype(np.float64)))
    if beta != 0 and input is not None:
        scale = scale + abs(beta) * np.abs(host(input).astype(np.float64))
    return RTOL[dtype] * math.sqrt(max(k, 1)) * scale + np.finfo(dtype.numpy_dtype).tiny


def exact(a, b, alpha=1.0, beta=0.0, input=None):
    """alpha * A @ B + beta * input in extended precision (longdouble)."""
    product = np.matmul(host(a).astype(np.longdouble), host(b).astype(np.longdouble)) * alpha
    if beta != 0:
        product = product + beta * host(input).astype(np.longdouble)
    return product


def check(case, a, b, k, dtype, alpha=1.0, beta=0.0, input=None, expect_c=True):
    """Run case() with the plugin and on the reference; both within the bound of each other
    and of the exact result; the C path ran (or not) as expected."""
    got, ran = calls_during(case)
    with reftorch.plugins.use_reference_kernels():
        want = case()
    assert ran == (1 if expect_c else 0)
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    assert got.is_contiguous()
    g, w = host(got), host(want)
    tol = bound(a, b, k, dtype, alpha, beta, input)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    finite = np.isfinite(w)
    np.testing.assert_array_equal(g[~finite], w[~finite])   # inf where inf, nan where nan
    assert np.all(np.abs(g - w)[finite] <= tol[finite] * 2)
    assert np.all(np.abs(g.astype(np.longdouble) - exact(a, b, alpha, beta, input))[finite]
                  <= tol[finite])
    return g


# ---------------------------------------------------------------------------------------------
# Registration

def test_serves_the_products():
    for op in ("mm", "bmm", "addmm", "baddbmm", "convolution"):
        for dtype in DTYPES:
            assert reftorch._dispatch.get_op(op).serving("cpu", dtype) == "cpu"


def test_c_module_facts():
    assert _gemm.isa() in _gemm.supported_isas()
    assert _gemm.supported_isas()[0] == "baseline"
    assert _gemm.PARALLEL_MIN_FLOPS > 0


# ---------------------------------------------------------------------------------------------
# Values on every layout, across every block boundary

# (M, N, K) around the shrunk blocks: KC 7 (K = 6, 7, 8, 14, 15), micro-tile and MC edges
# (MR is 4, 6 or 14; MC = 2 tiles), NC = 2 micro-panels (NR 8, 16 or 32), and 1s.
SHAPES = [(1, 1, 1), (1, 33, 7), (29, 1, 8), (13, 17, 6), (15, 31, 14), (29, 65, 15),
          (28, 64, 21), (30, 66, 22), (43, 97, 9)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_mm_across_blocks(dtype, layout, no_threshold, small_blocks):
    for i, (m, n, k) in enumerate(SHAPES):
        a = tensor((m, k), dtype, i, layout)
        b = tensor((k, n), dtype, 100 + i, "transposed" if layout == "contiguous" else layout)
        check(lambda: reftorch.mm(a, b), a, b, k, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_mm_across_the_real_blocks(dtype):
    """Default block sizes: K just over one KC slice (256), M over MC, N over a micro-panel."""
    for m, n, k in [(337, 33, 257), (17, 2049, 3), (170, 65, 511)]:
        a, b = tensor((m, k), dtype, 1), tensor((k, n), dtype, 2, "transposed")
        check(lambda: reftorch.mm(a, b), a, b, k, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("layouts", [("contiguous", "contiguous"), ("transposed", "strided"),
                                     ("batch-broadcast", "contiguous"),
                                     ("strided", "batch-broadcast")])
def test_bmm(dtype, layouts, no_threshold, small_blocks):
    for i, (batch, m, n, k) in enumerate([(3, 13, 17, 6), (2, 29, 65, 15), (5, 1, 33, 8)]):
        a = tensor((batch, m, k), dtype, i, layouts[0])
        b = tensor((batch, k, n), dtype, 50 + i, layouts[1])
        want = host(a)
        assert want.shape == (batch, m, k)
        check(lambda: reftorch.bmm(a, b), a, b, k, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("alpha,beta", [(1, 1), (2.5, -0.5), (1, 0), (-3, 1), (0.1, 2)])
def test_addmm_scalars_and_input_broadcast(dtype, alpha, beta, no_threshold, small_blocks):
    m, n, k = 29, 65, 15
    a, b = tensor((m, k), dtype, 1), tensor((k, n), dtype, 2, "strided")
    for shape in [(m, n), (n,), (m, 1), ()]:
        input = tensor(shape, dtype, 3) if shape else reftorch.tensor(0.75, dtype=dtype)
        full = input.expand(m, n)
        check(lambda: reftorch.addmm(input, a, b, beta=beta, alpha=alpha), a, b, k, dtype,
              alpha, beta, full)
    # the method and in-place forms reach the same kernel
    input = tensor((m, n), dtype, 4, "transposed")
    check(lambda: input.addmm(a, b, beta=beta, alpha=alpha), a, b, k, dtype, alpha, beta,
          input)
    target = input.clone()
    got, ran = calls_during(lambda: target.addmm_(a, b, beta=beta, alpha=alpha))
    assert ran == 1 and got is target


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_beta_zero_ignores_nan_input(dtype, no_threshold):
    """beta == 0: the input is never read, so its NaN and inf do not propagate."""
    m, n, k = 20, 40, 30
    a, b = tensor((m, k), dtype, 1), tensor((k, n), dtype, 2)
    input = reftorch.full((m, n), float("nan"), dtype=dtype)
    input[0, 0] = float("inf")
    g = check(lambda: reftorch.addmm(input, a, b, beta=0, alpha=2), a, b, k, dtype, 2.0)
    assert not np.isnan(g).any()
    batch_input = reftorch.full((2, m, n), float("nan"), dtype=dtype)
    ba, bb = tensor((2, m, k), dtype, 3), tensor((2, k, n), dtype, 4)
    g = check(lambda: reftorch.baddbmm(batch_input, ba, bb, beta=0), ba, bb, k, dtype)
    assert not np.isnan(g).any()
    # beta != 0: NaN does reach the result, as in the reference
    g = check(lambda: reftorch.addmm(input, a, b, beta=1), a, b, k, dtype, 1.0, 1.0, input)
    assert np.isnan(g[1:]).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_nan_and_inf_in_operands(dtype, no_threshold):
    m, n, k = 16, 40, 30
    a, b = values((m, k), dtype, 1), values((k, n), dtype, 2)
    a[3, 5], b[7, 9], a[4, 0] = np.nan, np.inf, np.inf
    ta, tb = reftorch.from_numpy(a), reftorch.from_numpy(b)
    got, ran = calls_during(lambda: host(reftorch.mm(ta, tb)))
    with reftorch.plugins.use_reference_kernels():
        want = host(reftorch.mm(ta, tb))
    assert ran == 1
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_baddbmm(dtype, no_threshold, small_blocks):
    batch, m, n, k = 3, 15, 33, 8
    a = tensor((batch, m, k), dtype, 1, "transposed")
    b = tensor((batch, k, n), dtype, 2, "batch-broadcast")
    for alpha, beta in [(1, 1), (0.5, 2), (0, 1)]:   # alpha 0: baddbmm still computes a @ b
        for shape in [(batch, m, n), (m, n), (1, 1, n)]:
            input = tensor(shape, dtype, 3)
            check(lambda: reftorch.baddbmm(input, a, b, beta=beta, alpha=alpha), a, b, k,
                  dtype, alpha, beta, input.expand(batch, m, n))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_empty_dims(dtype, no_threshold):
    """0-size M, N, K or batch: an empty result, or zeros (K == 0) then alpha and beta."""
    for m, n, k in [(0, 5, 3), (4, 0, 3), (4, 5, 0), (0, 0, 0)]:
        a, b = tensor((m, k), dtype, 1), tensor((k, n), dtype, 2)
        check(lambda: reftorch.mm(a, b), a, b, k, dtype)
        input = tensor((m, n), dtype, 3)
        check(lambda: reftorch.addmm(input, a, b, beta=0.5, alpha=2), a, b, k, dtype, 2.0, 0.5,
              input)
    a, b = tensor((0, 3, 4), dtype, 1), tensor((0, 4, 5), dtype, 2)
    check(lambda: reftorch.bmm(a, b), a, b, 4, dtype)


# ---------------------------------------------------------------------------------------------
# Threads and instruction sets

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_results_do_not_depend_on_thread_count(dtype):
    """Bitwise the same with 1 to 4 threads (the cuts of C change; K slices do not), also
    for a product narrower than one micro-panel."""
    a, b = tensor((300, 517), dtype, 1), tensor((517, 130), dtype, 2, "transposed")
    ba, bb = tensor((3, 70, 300), dtype, 3), tensor((3, 300, 90), dtype, 4)
    input = tensor((130,), dtype, 5)
    narrow = tensor((517, 20), dtype, 6)
    previous = _gemm.set_num_threads(1)
    try:
        results = []
        for threads in (1, 2, 3, 4, 1):
            _gemm.set_num_threads(threads)
            results.append([host(reftorch.mm(a, b)), host(reftorch.bmm(ba, bb)),
                            host(reftorch.addmm(input, a, b, beta=0.5, alpha=3)),
                            host(reftorch.mm(a, narrow))])
    finally:
        _gemm.set_num_threads(previous)
    for r in results[1:]:
        for got, want in zip(r, results[0]):
            np.testing.assert_array_equal(got.view(f"u{got.itemsize}"),
                                          want.view(f"u{want.itemsize}"))


@pytest.mark.parametrize("isa", _gemm.supported_isas())
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_every_instruction_set_is_accurate(isa, dtype, no_threshold):
    """Each clone (incl. the plain-C baseline) within the bound of the reference and the
    exact result, on edge-tile and multi-slice shapes."""
    previous = _gemm.set_isa(isa)
    try:
        assert _gemm.isa() == isa
        for i, (m, n, k) in enumerate([(15, 33, 300), (45, 70, 9), (1, 1, 513)]):
            a, b = tensor((m, k), dtype, i), tensor((k, n), dtype, 10 + i, "transposed")
            check(lambda: reftorch.mm(a, b), a, b, k, dtype)
        x, w, bias = tensor((2, 30, 9, 13), dtype, 5), tensor((13, 30, 3, 3), dtype, 6), None
        check_conv(x, w, bias, dtype, padding=1)      # K = 270 crosses KC, 13 rows an MR edge
    finally:
        _gemm.set_isa(previous)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_instruction_sets_agree(dtype):
    m, n, k = 40, 70, 600
    a, b = tensor((m, k), dtype, 1), tensor((k, n), dtype, 2)
    tol = 2 * bound(a, b, k, dtype)
    previous = _gemm.isa()
    try:
        results = {}
        for isa in _gemm.supported_isas():
            _gemm.set_isa(isa)
            results[isa] = host(reftorch.mm(a, b))
    finally:
        _gemm.set_isa(previous)
    for isa, got in results.items():
        assert np.all(np.abs(got - results["baseline"]) <= tol), isa


def test_forked_child_does_not_hang():
    """libgomp's thread pool does not survive fork(); the child runs products on one thread
    and gets the parent's bits."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork() on this platform")
    a, b = tensor((200, 300), F32, 1), tensor((300, 150), F32, 2)
    want = host(reftorch.mm(a, b))   # the parent has used its OpenMP threads
    pid = os.fork()
    if pid == 0:  # child: exit 0 only if the product completes with the same bits
        ok = False
        try:
            ok = np.array_equal(host(reftorch.mm(a, b)).view(np.uint32), want.view(np.uint32))
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
    pytest.fail("the forked child hung in a parallel product")


# ---------------------------------------------------------------------------------------------
# Calls left to the reference

def declined(case):
    _, ran = calls_during(case)
    assert ran == 0


def test_declines_small_products():
    a, b = tensor((8, 8), F32, 1), tensor((8, 8), F32, 2)
    assert 8 ** 3 < gemm.MIN_FLOPS
    declined(lambda: reftorch.mm(a, b))


def test_declines_skinny_products():
    for m, n in [(1, 500), (500, 1), (gemm.MIN_SIDE - 1, 300)]:
        a, b = tensor((m, 200), F32, 1), tensor((200, n), F32, 2)
        assert m * n * 200 >= gemm.MIN_FLOPS
        declined(lambda: reftorch.mm(a, b))


# ---------------------------------------------------------------------------------------------
# Few rows, both operands along K (x @ W^T): dot products of rows

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("m", [1, 3, 4, 7, 16])
@pytest.mark.parametrize("k", [1, 15, 16, 17, 300])
def test_few_rows_as_dot_products(dtype, m, k):
    """Served from one row on (the real thresholds): plain, with a bias row (F.linear's addmm)
    and with alpha / beta, N not a multiple of the 4-column tiles or the 64-column items."""
    n = 131
    x, w = tensor((m, k), dtype, 1), tensor((n, k), dtype, 2)
    if m * n * k < gemm.MIN_FLOPS:
        return
    check(lambda: reftorch.mm(x, w.t()), x, w.t(), k, dtype)
    bias = tensor((n,), dtype, 3)
    check(lambda: reftorch.addmm(bias, x, w.t()), x, w.t(), k, dtype, 1.0, 1.0,
          bias.expand(m, n))
    check(lambda: reftorch.addmm(bias, x, w.t(), beta=0.5, alpha=-2.0), x, w.t(), k, dtype,
          -2.0, 0.5, bias.expand(m, n))
    batch_x, batch_w = tensor((3, m, k), dtype, 4), tensor((3, n, k), dtype, 5)
    check(lambda: reftorch.bmm(batch_x, batch_w.transpose(1, 2)), batch_x,
          batch_w.transpose(1, 2), k, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_dot_products_depend_on_k_alone(dtype):
    """A row's results are the same bits whatever the other rows, the thread count, and
    (between the FMA clones, which add the same lanes in the same order) the instruction
    set."""
    x, w = tensor((16, 1000), dtype, 6), tensor((700, 1000), dtype, 7)
    whole = host(reftorch.mm(x, w.t()))
    for rows in (slice(0, 1), slice(5, 9), slice(3, 16)):
        assert host(reftorch.mm(x[rows], w.t())).tobytes() == whole[rows].tobytes()
    previous = _gemm.set_num_threads(1)
    try:
        for threads in (1, 3):
            _gemm.set_num_threads(threads)
            assert host(reftorch.mm(x, w.t())).tobytes() == whole.tobytes()
    finally:
        _gemm.set_num_threads(previous)
    previous = _gemm.isa()
    try:
        for isa in set(_gemm.supported_isas()) - {"baseline"}:
            _gemm.set_isa(isa)
            assert host(reftorch.mm(x, w.t())).tobytes() == whole.tobytes(), isa
        _gemm.set_isa("baseline")    # no FMA: within the rounding bound
        got = host(reftorch.mm(x, w.t()))
        assert np.all(np.abs(got - whole) <= 2 * bound(x, w.t(), 1000, dtype))
    finally:
        _gemm.set_isa(previous)


def test_few_rows_other_layouts_still_decline():
    x, w = tensor((4, 300), F32, 8), tensor((300, 200), F32, 9)   # W not transposed
    declined(lambda: reftorch.mm(x, w))
    declined(lambda: reftorch.mm(tensor((300, 4), F32, 10).t(), w.t().contiguous().t()))


def test_declines_other_dtypes(no_threshold):
    for dtype in (reftorch.int64, reftorch.complex64, reftorch.float16):
        a = reftorch.ones((20, 30), dtype=dtype)
        b = reftorch.ones((30, 10), dtype=dtype)
        declined(lambda: reftorch.mm(a, b))


def test_declines_zero_alpha_where_the_reference_skips_the_product(no_threshold):
    """addmm with alpha == 0 does not read a and b (NaN there does not propagate)."""
    a = reftorch.full((20, 30), float("nan"))
    b = reftorch.ones((30, 10))
    input = reftorch.ones((20, 10))
    _, ran = calls_during(lambda: reftorch.addmm(input, a, b, alpha=0))
    assert ran == 0
    assert not np.isnan(host(reftorch.addmm(input, a, b, alpha=0))).any()


def test_use_reference_kernels_bypasses_the_plugin():
    a, b = tensor((64, 64), F32, 1), tensor((64, 64), F32, 2)
    with reftorch.plugins.use_reference_kernels():
        declined(lambda: reftorch.mm(a, b))


# ---------------------------------------------------------------------------------------------
# The raw C entry point checks its arguments

def _raw_args(m=4, n=5, k=3, dtype=np.float32):
    a, b = np.ones(m * k, dtype), np.ones(k * n, dtype)
    out = np.empty(m * n, dtype)
    return [(1, m, n, k), out, 0, (0, n, 1), a, 0, (0, k, 1), b, 0, (0, n, 1), 1.0, 0.0,
            None, 0, (0, 0, 0)]


def test_raw_gemm_computes():
    args = _raw_args()
    _gemm.gemm(*args)
    np.testing.assert_array_equal(args[1], np.full(20, 3, np.float32))


@pytest.mark.parametrize("index,value,error", [
    (2, 1, ValueError),                      # out offset: last element past the end
    (6, (0, 4, 1), ValueError),              # a's row stride reaches past its buffer
    (9, (0, -5, 1), ValueError),             # negative stride
    (4, np.ones(12, np.float64), TypeError),  # mixed element types
    (4, np.ones(12, np.int32), TypeError),   # not float
    (0, (1, 4, 5), ValueError),              # wrong number of sizes
    (0, (1, -4, 5, 3), ValueError),          # negative size
    (11, 1.0, TypeError),                    # beta != 0 without inp
    (3, (0, 5, 2), ValueError),              # out column stride must be 1
])
def test_raw_gemm_rejects_bad_arguments(index, value, error):
    args = _raw_args()
    args[index] = value
    with pytest.raises(error):
        _gemm.gemm(*args)


def test_raw_gemm_rejects_read_only_out():
    args = _raw_args()
    args[1].flags.writeable = False
    with pytest.raises(TypeError):
        _gemm.gemm(*args)


# ---------------------------------------------------------------------------------------------
# convolution: 2-D, groups 1, not transposed

def check_conv(x, w, bias, dtype, expect_c=True, **kw):
    """Plugin vs reference within rtol * sqrt(K) * (|x| conv |w| + |bias|) (that bound computed
    by the reference in float64); the C path ran (or not) as expected."""
    got, ran = calls_during(lambda: reftorch.conv2d(x, w, bias, **kw))
    with reftorch.plugins.use_reference_kernels():
        want = reftorch.conv2d(x, w, bias, **kw)
        tol = RTOL[dtype] * math.sqrt(w.shape[1] * w.shape[2] * w.shape[3]) * host(
            reftorch.conv2d(x.abs().double(), w.abs().double(),
                            None if bias is None else bias.abs().double(), **kw))
    assert ran == (1 if expect_c else 0)
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    assert np.all(np.abs(host(got) - host(want)) <= 2 * tol + np.finfo(dtype.numpy_dtype).tiny)
    return got


CONV_CASES = [
    ((2, 3, 9, 11), (5, 3, 3, 3), dict(padding=1)),
    ((2, 4, 10, 7), (6, 4, 2, 3), dict(stride=2, padding=(1, 0), dilation=(1, 2))),
    ((1, 8, 16, 16), (16, 8, 3, 3), dict(stride=3)),
    ((3, 5, 12, 12), (7, 5, 5, 5), dict(padding=4, dilation=2)),
    ((2, 16, 20, 20), (32, 16, 1, 1), {}),
    ((1, 2, 40, 3), (3, 2, 3, 1), dict(padding=(0, 2), stride=(1, 2))),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_conv2d_matches_reference(dtype, no_threshold, small_blocks):
    for i, (xs, ws, kw) in enumerate(CONV_CASES):
        x, w, b = tensor(xs, dtype, i), tensor(ws, dtype, 10 + i), tensor((ws[0],), dtype, 20)
        check_conv(x, w, None, dtype, **kw)
        check_conv(x, w, b, dtype, **kw)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_conv2d_layouts(dtype, no_threshold):
    """Channels-last and stepped inputs, a stepped bias, a weight sliced from a bigger one
    (its C*KH*KW dims still collapse); a weight whose dims do not collapse is declined."""
    x = tensor((2, 6, 14, 13), dtype, 1)
    w, b = tensor((8, 6, 3, 3), dtype, 2), tensor((16,), dtype, 3)[::2]
    channels_last = reftorch.from_numpy(np.ascontiguousarray(
        host(x).transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    stepped = reftorch.from_numpy(np.repeat(host(x), 2, axis=3))[..., ::2]
    for xv in (channels_last, stepped):
        assert not xv.is_contiguous()
        check_conv(xv, w, b, dtype, padding=1)
    w_sliced = tensor((12, 6, 3, 3), dtype, 4)[2:10]
    check_conv(x, w_sliced, b, dtype, padding=(2, 1), stride=2)
    w_permuted = reftorch.from_numpy(np.ascontiguousarray(
        host(w).transpose(1, 0, 2, 3))).transpose(0, 1)
    check_conv(x, w_permuted, b, dtype, expect_c=False, padding=1)


def test_conv2d_real_blocks_and_threads():
    """Default blocks (K = 64*9 = 576 crosses KC; L crosses NC), bitwise equal on 1 and 2
    threads."""
    x, w, b = tensor((2, 64, 30, 70), F32, 1), tensor((20, 64, 3, 3), F32, 2), tensor((20,), F32, 3)
    previous = _gemm.set_num_threads(1)
    try:
        one = host(check_conv(x, w, b, F32, padding=1))
        _gemm.set_num_threads(2)
        two = host(check_conv(x, w, b, F32, padding=1))
    finally:
        _gemm.set_num_threads(previous)
    np.testing.assert_array_equal(one.view(np.uint32), two.view(np.uint32))


# Stride 1, at least 4 taps, at least 4 im2col rows per output channel, the padding adding at
# most 1/2 to the row length: these run over a zero-padded copy of each image (conv_shifted in
# src/gemm.c) rather than through the im2col packing.
SHIFTED_CASES = [
    ((2, 3, 9, 30), (5, 3, 3, 3), dict(padding=1)),
    ((2, 4, 10, 40), (6, 4, 2, 3), dict(padding=(1, 2), dilation=(2, 1))),
    ((1, 5, 12, 64), (7, 5, 5, 5), dict(padding=2)),
    ((2, 6, 8, 50), (3, 6, 2, 3), dict(padding=(0, 1))),
    ((3, 2, 7, 33), (4, 2, 3, 3), {}),
]


@pytest.mark.parametrize("isa", _gemm.supported_isas())
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_conv2d_over_a_padded_copy_gives_the_im2col_bits(isa, dtype, no_threshold,
                                                         small_blocks):
    """A stride-1 convolution over a zero-padded copy of each image (packed, or read in place
    by the AVX-512 float32 kernel) sums the same products in the same order as the im2col
    packing: the same bits, with and without bias, from contiguous, channels-last and stepped
    inputs, and close to the reference; in every instruction set."""
    previous_isa = _gemm.set_isa(isa)
    try:
        _check_padded_copy_cases(dtype)
    finally:
        _gemm.set_isa(previous_isa)


def _check_padded_copy_cases(dtype):
    for i, (xs, ws, kw) in enumerate(SHIFTED_CASES):
        x, w, b = tensor(xs, dtype, i), tensor(ws, dtype, 10 + i), tensor((ws[0],), dtype, 20)
        channels_last = reftorch.from_numpy(np.ascontiguousarray(
            host(x).transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
        stepped = reftorch.from_numpy(np.repeat(host(x), 2, axis=3))[..., ::2]
        for xv in (x, channels_last, stepped):
            for bias in (None, b):
                before = _gemm.conv_shifted_calls()
                got = host(check_conv(xv, w, bias, dtype, **kw))
                assert _gemm.conv_shifted_calls() == before + 1
                previous = _gemm.set_conv_shifted(False)
                try:
                    packed = host(reftorch.conv2d(xv, w, bias, **kw))
                finally:
                    _gemm.set_conv_shifted(previous)
                assert _gemm.conv_shifted_calls() == before + 1
                np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                              np.ascontiguousarray(packed).view(np.uint8))


def test_conv2d_takes_the_padded_copy_only_when_it_pays():
    """Strided convolutions, kernels of fewer than 4 taps, fewer than 4 im2col rows per
    output channel, and padding that would widen the rows by more than 1/2 keep the im2col
    packing (see conv_shifted)."""
    w = tensor((4, 3, 3, 3), F32, 2)
    wide = tensor((1, 3, 9, 40), F32, 3)
    before = _gemm.conv_shifted_calls()
    with reftorch.plugins.all_sizes():
        reftorch.conv2d(wide, w, padding=1, stride=2)
        reftorch.conv2d(wide, tensor((4, 3, 1, 3), F32, 4), padding=(0, 1))
        reftorch.conv2d(wide, tensor((4, 3, 1, 1), F32, 5))
        reftorch.conv2d(wide, tensor((8, 3, 3, 3), F32, 6), padding=1)   # 27 rows for 8
        reftorch.conv2d(tensor((1, 3, 9, 8), F32, 7), tensor((4, 3, 5, 5), F32, 8))  # 8 for 4
        assert _gemm.conv_shifted_calls() == before
        reftorch.conv2d(wide, w, padding=1)
    assert _gemm.conv_shifted_calls() == before + 1


def test_conv2d_declines_what_it_does_not_handle(no_threshold):
    x, w = tensor((2, 4, 10, 10), F32, 1), tensor((6, 4, 3, 3), F32, 2)
    # an output_padding reaching the stride (allowed by the dilation): col2im cannot place it
    declined(lambda: reftorch.conv_transpose2d(x, tensor((4, 6, 3, 3), F32, 3),
                                               output_padding=1, dilation=2))
    declined(lambda: reftorch.conv3d(tensor((1, 4, 5, 5, 5), F32, 1).to(reftorch.float16),
                                     tensor((6, 4, 3, 3, 3), F32, 2).to(reftorch.float16)))
    declined(lambda: reftorch.conv2d(x.to(reftorch.float16), w.to(reftorch.float16)))
    declined(lambda: reftorch.conv2d(x[:0], w))


def test_conv2d_gradients_flow(no_threshold):
    """The plugin's forward is recorded like the reference's: same gradients."""
    results = []
    for reference in (False, True):
        x = tensor((2, 3, 8, 8), F64, 1).requires_grad_()
        w = tensor((4, 3, 3, 3), F64, 2).requires_grad_()
        b = tensor((4,), F64, 3).requires_grad_()
        if reference:
            with reftorch.plugins.use_reference_kernels():
                reftorch.conv2d(x, w, b, padding=1).square().sum().backward()
        else:
            out, ran = calls_during(lambda: reftorch.conv2d(x, w, b, padding=1))
            assert ran == 1
            out.square().sum().backward()
        results.append([host(t.grad) for t in (x, w, b)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# transposed convolution (a convolution's input gradient): the flipped plain convolution
# (stride 1) or columns + col2im

def check_conv_transpose(x, w, bias, dtype, calls, **kw):
    """Plugin vs reference within rtol * sqrt(C_in * K * K) * the magnitudes' transposed
    convolution; `calls` C calls ran (1: the flipped convolution, 2: product and col2im)."""
    got, ran = calls_during(lambda: reftorch.conv_transpose2d(x, w, bias, **kw))
    with reftorch.plugins.use_reference_kernels():
        want = reftorch.conv_transpose2d(x, w, bias, **kw)
        tol = RTOL[dtype] * math.sqrt(w.shape[0] * w.shape[2] * w.shape[3]) * host(
            reftorch.conv_transpose2d(x.abs().double(), w.abs().double(),
                                      None if bias is None else bias.abs().double(), **kw))
    assert ran == calls
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    assert np.all(np.abs(host(got) - host(want)) <= 2 * tol + np.finfo(dtype.numpy_dtype).tiny)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_conv_transpose2d_matches_reference(dtype, no_threshold, small_blocks):
    cases = [((2, 3, 9, 11), (3, 5, 3, 3), {}, 1),
             ((2, 4, 10, 7), (4, 6, 2, 3), dict(padding=(1, 0), dilation=(1, 2)), 1),
             ((3, 5, 8, 8), (5, 7, 5, 5), dict(padding=(4, 7), dilation=2), 1),
             ((2, 16, 6, 6), (16, 8, 1, 1), {}, 1),
             ((2, 16, 10, 10), (16, 3, 5, 5), dict(padding=2), 2),    # narrows the channels
             ((2, 4, 5, 7), (4, 6, 4, 4), dict(stride=2, padding=1), 2),
             ((2, 4, 5, 7), (4, 6, 3, 2), dict(stride=(3, 2), padding=(1, 0),
                                                output_padding=(2, 1)), 2),
             ((1, 3, 6, 6), (3, 2, 3, 3), dict(stride=2, dilation=3, output_padding=1), 2),
             ((2, 3, 9, 9), (3, 5, 3, 3), dict(padding=3), 2)]            # padding > d(k-1)
    for i, (xs, ws, kw, calls) in enumerate(cases):
        x, w, b = tensor(xs, dtype, i), tensor(ws, dtype, 10 + i), tensor((ws[1],), dtype, 20)
        check_conv_transpose(x, w, None, dtype, calls, **kw)
        check_conv_transpose(x, w, b, dtype, calls, **kw)
    # a weight and an input in other layouts
    w = tensor((8, 6, 3, 3), dtype, 4).permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3)
    x = tensor((2, 8, 7, 7), dtype, 5)
    channels_last = reftorch.from_numpy(np.ascontiguousarray(
        host(x).transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    assert not w.is_contiguous()
    check_conv_transpose(x, w, None, dtype, 1, padding=1)
    check_conv_transpose(channels_last, w, None, dtype, 2, stride=2)


def test_col2im_checks_its_buffers():
    """The C entry point refuses buffers too small for the geometry, a non-contiguous image
    and a rows count that is not C * KH * KW."""
    image = np.zeros(2 * 3 * 7 * 7, np.float32)
    cols = np.zeros(2 * 27 * 5 * 5, np.float32)
    bias = np.zeros(3, np.float32)
    args = [image, 0, cols, 0, (2, 3, 7, 7), (147, 49, 7, 1), bias, 0, 1, 27, (3, 3), (5, 5),
            (1, 1), (0, 0), (1, 1)]
    _gemm.col2im(*args)
    for position, value, error in ((0, image[:-1], IndexError), (2, cols[:-1], IndexError),
                                   (6, bias[:-1], IndexError), (5, (147, 49, 1, 7), ValueError),
                                   (9, 26, ValueError), (11, (5, 4), ValueError),
                                   (2, cols.astype(np.float64), TypeError)):
        wrong = list(args)
        wrong[position] = value
        with pytest.raises((error, ValueError) if error is IndexError else error):
            _gemm.col2im(*wrong)


# ---------------------------------------------------------------------------------------------
# convolution_backward_weight: one product summing over the images

def weight_grad(x, grad, weight_shape, **kw):
    from reftorch._ops.nn_convolution import convolution_backward_weight
    nd = 2
    params = {name: kw.get(name, default) for name, default in
              (("stride", (1,) * nd), ("padding", (0,) * nd), ("dilation", (1,) * nd))}
    return convolution_backward_weight(x, grad, weight_shape, params["stride"],
                                       params["padding"], params["dilation"], 1)


def check_weight_grad(x, w_shape, dtype, expect_c=True, **kw):
    """Plugin vs reference kernel within rtol * sqrt(sum length) * (|grad| corr |x|)."""
    with reftorch.plugins.use_reference_kernels():
        grad = reftorch.conv2d(x, tensor(w_shape, dtype, 99), **kw) * 0 + \
            tensor(tuple(reftorch.conv2d(x, tensor(w_shape, dtype, 99), **kw).shape), dtype, 98)
        want = weight_grad(x, grad, w_shape, **kw)
        scale = host(weight_grad(x.abs().double(), grad.abs().double(), w_shape, **kw))
    got, ran = calls_during(lambda: weight_grad(x, grad, w_shape, **kw))
    terms = grad.shape[0] * grad.shape[2] * grad.shape[3]
    assert ran == (1 if expect_c else 0)
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(w_shape) and got.is_contiguous()
    tol = RTOL[dtype] * math.sqrt(terms) * scale
    assert np.all(np.abs(host(got) - host(want)) <= 2 * tol + np.finfo(dtype.numpy_dtype).tiny)
    return got


WEIGHT_GRAD_CASES = [
    ((2, 3, 9, 11), (5, 3, 3, 3), dict(padding=(1, 1))),
    ((2, 4, 10, 7), (6, 4, 2, 3), dict(stride=(2, 2), padding=(1, 0), dilation=(1, 2))),
    ((1, 8, 16, 16), (16, 8, 3, 3), dict(stride=(3, 3))),
    ((3, 5, 12, 12), (7, 5, 5, 5), dict(padding=(4, 4), dilation=(2, 2))),
    ((2, 16, 20, 20), (32, 16, 1, 1), {}),
    ((4, 2, 40, 3), (3, 2, 3, 1), dict(padding=(0, 2), stride=(1, 2))),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_conv2d_weight_grad_matches_reference(dtype, no_threshold, small_blocks):
    for i, (xs, ws, kw) in enumerate(WEIGHT_GRAD_CASES):
        check_weight_grad(tensor(xs, dtype, i), ws, dtype, **kw)
    # a channels-last input
    x = tensor((2, 6, 9, 8), dtype, 7)
    channels_last = reftorch.from_numpy(np.ascontiguousarray(
        host(x).transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    check_weight_grad(channels_last, (4, 6, 3, 3), dtype, padding=(1, 1))


def test_conv2d_weight_grad_real_blocks_and_threads():
    """Default blocks (each image's 30*70 positions cross KC), bitwise equal on 1, 2 and 3
    threads."""
    x = tensor((3, 64, 30, 70), F32, 1)
    previous = _gemm.set_num_threads(1)
    try:
        results = []
        for threads in (1, 2, 3):
            _gemm.set_num_threads(threads)
            results.append(host(check_weight_grad(x, (20, 64, 3, 3), F32, padding=(1, 1))))
    finally:
        _gemm.set_num_threads(previous)
    for other in results[1:]:
        np.testing.assert_array_equal(results[0].view(np.uint32), other.view(np.uint32))


def test_conv2d_gradients_use_the_plugin_and_match(no_threshold):
    """A stride-1 convolution's backward runs its input gradient (a transposed convolution)
    and its weight gradient in C; the gradients equal the reference's within rounding. With
    create_graph the weight gradient is a convolution again (double backward works)."""
    def grads(reference, create_graph=False):
        x = tensor((2, 3, 8, 8), F64, 1).requires_grad_()
        w = tensor((4, 3, 3, 3), F64, 2).requires_grad_()
        out = reftorch.conv2d(x, w, padding=1)
        g = tensor(tuple(out.shape), F64, 3)
        if reference:
            with reftorch.plugins.use_reference_kernels():
                return reftorch.autograd.grad(out, (x, w), g, create_graph=create_graph), 0
        before = _gemm.calls()
        result = reftorch.autograd.grad(out, (x, w), g, create_graph=create_graph)
        return result, _gemm.calls() - before
    (gx, gw), calls = grads(False)
    assert calls == 2
    (rx, rw), _ = grads(True)
    np.testing.assert_allclose(host(gx), host(rx), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(host(gw), host(rw), rtol=1e-12, atol=1e-12)
    (gx2, gw2), _ = grads(False, create_graph=True)
    assert gw2.grad_fn is not None
    np.testing.assert_allclose(host(gw2.detach()), host(rw), rtol=1e-12, atol=1e-12)


def test_conv2d_weight_grad_declines_what_it_does_not_handle(no_threshold):
    x = tensor((2, 4, 10, 10), F32, 1)
    grad = tensor((2, 6, 8, 8), F32, 2)
    from reftorch._ops.nn_convolution import convolution_backward_weight
    declined(lambda: weight_grad(x.double(), grad, (6, 4, 3, 3)))
    declined(lambda: weight_grad(x, grad[:, :, :7], (6, 4, 3, 3)))   # fewer positions
    declined(lambda: convolution_backward_weight(tensor((2, 4, 10, 10, 10), F32, 1),
                                                 tensor((2, 6, 7, 8, 8), F32, 2),
                                                 (6, 4, 3, 3, 3), (1,) * 3, (0,) * 3, (1,) * 3,
                                                 1))                     # fewer positions


@pytest.mark.parametrize("name,x_shape,w_shape,kw,calls", [
    ("conv1d", (2, 4, 20), (6, 4, 3), {"stride": 2, "padding": 1}, 1),
    ("conv1d", (2, 4, 20), (6, 2, 3), {"groups": 2, "dilation": 2}, 2),
    ("conv2d", (2, 4, 10, 10), (6, 2, 3, 3), {"groups": 2, "padding": 1}, 2),
    ("conv2d", (2, 4, 9, 9), (4, 1, 3, 3), {"groups": 4, "stride": 2, "padding": 1}, 0),
    ("conv2d", (2, 4, 9, 9), (8, 1, 3, 3), {"groups": 4}, 4),     # a channel multiplier
    ("conv_transpose1d", (2, 4, 10), (4, 3, 3), {"stride": 2}, None),
    ("conv_transpose2d", (2, 4, 6, 6), (4, 3, 3, 3), {"groups": 2, "stride": 2}, None),
    ("conv_transpose2d", (2, 4, 6, 6), (4, 1, 3, 3), {"groups": 4, "padding": 1}, 0),
    ("conv_transpose2d", (2, 4, 6, 6), (4, 1, 3, 3), {"groups": 4, "stride": 2}, 0),
    ("conv_transpose2d", (2, 4, 6, 6), (4, 1, 3, 3),
     {"groups": 4, "stride": 2, "output_padding": 1, "dilation": 2}, 0),
    ("conv3d", (2, 3, 5, 6, 6), (4, 3, 3, 3, 3), {"padding": 1, "stride": (2, 1, 1)}, 1),
    ("conv3d", (1, 4, 7, 5, 5), (4, 2, 2, 3, 3), {"groups": 2, "dilation": (3, 1, 1),
                                                  "padding": (2, 0, 1)}, 2),
    ("conv3d", (1, 2, 4, 5, 5), (3, 2, 3, 2, 2), {"padding": (4, 0, 0)}, 1),  # taps all out
    ("conv_transpose3d", (2, 4, 3, 4, 4), (4, 2, 3, 3, 3),
     {"stride": 2, "padding": 1, "output_padding": 1}, None),
    ("conv_transpose3d", (1, 4, 4, 3, 3), (4, 1, 2, 2, 2),
     {"groups": 2, "dilation": (2, 1, 1), "padding": (1, 0, 0)}, None),
])
def test_1d_3d_and_grouped_convolutions_run_as_2d_ones(name, x_shape, w_shape, kw, calls,
                                                      no_threshold):
    """A 1-D convolution runs as the 2-D one of height 1, a 3-D one as a 2-D one over its
    output depth positions (the depth taps gathered as channels; transposed: each input
    depth slice's 2-D transposed convolution, added at its depths), a grouped one as one
    convolution per group (`calls`: the GEMM module's C calls of the forward, None where a
    transposed group may take one or two, 0 for the depthwise ones the direct kernel serves);
    forward and every gradient (the transposed convolution and the weight gradient, grouped,
    1-D or 3-D alike) agree with the reference."""
    fn = getattr(reftorch, name)
    results = []
    for reference in (False, True):
        x = tensor(x_shape, F64, 1).requires_grad_()
        w = tensor(w_shape, F64, 2).requires_grad_()
        out_channels = w_shape[1] * kw.get("groups", 1) if "transpose" in name else w_shape[0]
        b = tensor((out_channels,), F64, 3).requires_grad_()
        with contextlib.ExitStack() as stack:
            if reference:
                stack.enter_context(reftorch.plugins.use_reference_kernels())
            out, ran = calls_during(lambda: fn(x, w, b, **kw))
            _, backward_ran = calls_during(lambda: out.square().sum().backward())
        if not reference:
            assert ran == calls if calls is not None else ran >= kw.get("groups", 1)
            assert backward_ran >= (2 if calls else 0)   # the input and weight gradients
        results.append([host(t.detach()) for t in (out, x.grad, w.grad, b.grad)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())


@pytest.mark.parametrize("x_shape,kw", [
    ((2, 6, 11, 13), {"padding": 1}),
    ((3, 4, 9, 8), {"stride": (2, 1), "padding": (0, 2), "dilation": (1, 2)}),
    ((2, 3, 12, 12), {"stride": 2, "padding": 1}),
    ((1, 5, 7, 16), {"dilation": 2, "padding": 2}),
    ((2, 3, 9, 150), {"padding": 1}),     # rows of several registers and register groups
    ((1, 4, 6, 37), {"padding": (1, 3), "dilation": (1, 3)}),
])
@pytest.mark.parametrize("dtype", DTYPES)
def test_depthwise_convolution_runs_directly(x_shape, kw, dtype, no_threshold):
    """groups == channels with one filter each: the forward, the weight gradient and the
    input gradient run in src/depthwise.c (the input gradient at stride 1 as the flipped
    filters' convolution, at other strides scattered); all agree with the reference, in
    every instruction set, with the same bits on 1 and 2 threads."""
    channels = x_shape[1]
    results = {}
    for run in ("reference", "1 thread", "2 threads") + tuple(_depthwise.supported_isas()):
        x = tensor(x_shape, dtype, 1, "transposed" if run == "2 threads" else "contiguous")
        x.requires_grad_()
        w = tensor((channels, 1, 3, 3), dtype, 2).requires_grad_()
        b = tensor((channels,), dtype, 3).requires_grad_()
        previous_isa, previous_threads = _depthwise.isa(), _depthwise.set_num_threads(1)
        try:
            if run == "2 threads":
                _depthwise.set_num_threads(2)
            elif run in _depthwise.supported_isas():
                _depthwise.set_isa(run)
            before = _depthwise.calls()
            with contextlib.ExitStack() as stack:
                if run == "reference":
                    stack.enter_context(reftorch.plugins.use_reference_kernels())
                reftorch.conv2d(x, w, b, groups=channels, **kw).square().sum().backward()
            direct = _depthwise.calls() - before
        finally:
            _depthwise.set_isa(previous_isa)
            _depthwise.set_num_threads(previous_threads)
        if run != "reference":
            assert direct == 3
        results[run] = [host(t.detach()) for t in (x.grad, w.grad, b.grad)]
    want = results.pop("reference")
    for run, got in results.items():
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=RTOL[dtype] * 30,
                                       atol=RTOL[dtype] * 30 * np.abs(e).max())
        for g, e in zip(got, results["1 thread"]):
            assert np.array_equal(g, e), run


def test_depthwise_checks_its_arguments():
    x = np.zeros(2 * 3 * 6 * 6, np.float32)
    w = np.zeros(3 * 9, np.float32)
    out = np.zeros(2 * 3 * 4 * 4, np.float32)
    args = [out, x, 0, (2, 3, 6, 6), (108, 36, 6, 1), w, 0, (9, 3, 1), None, 0, 0, (3, 3),
            (4, 4), (1, 1), (0, 0), (1, 1)]
    _depthwise.conv(*args)
    for position, bad in ((0, out[:-1]), (1, x[:-1]), (5, w[:-1]), (12, (5, 4)), (2, 1),
                          (4, (108, 36, 7, 1)), (14, (-1, 0))):
        wrong = list(args)
        wrong[position] = bad
        with pytest.raises((ValueError, IndexError)):
            _depthwise.conv(*wrong)
    wrong = list(args)
    wrong[5] = w.astype(np.float64)
    with pytest.raises(TypeError):
        _depthwise.conv(*wrong)
    grad = np.zeros(2 * 3 * 4 * 4, np.float32)
    wargs = [w, x, 0, (2, 3, 6, 6), (108, 36, 6, 1), grad, 0, (48, 16, 4, 1), (3, 3), (4, 4),
             (1, 1), (0, 0), (1, 1)]
    _depthwise.weight_grad(*wargs)
    for position, bad in ((0, w[:-1]), (5, grad[:-1]), (9, (4, 5))):
        wrong = list(wargs)
        wrong[position] = bad
        with pytest.raises((ValueError, IndexError)):
            _depthwise.weight_grad(*wrong)
    targs = [x, (2, 3, 6, 6), grad, 0, (48, 16, 4, 1), w, 0, (9, 3, 1), None, 0, 0, (3, 3),
             (4, 4), (1, 1), (0, 0), (1, 1)]
    _depthwise.transposed(*targs)
    for position, bad in ((0, x[:-1]), (2, grad[:-1]), (5, w[:-1]), (12, (3, 4)),
                          (1, (2, 3, 7, 6))):
        wrong = list(targs)
        wrong[position] = bad
        with pytest.raises((ValueError, IndexError)):
            _depthwise.transposed(*wrong)


def test_conv2d_weight_grad_checks_its_buffers():
    """The C entry point refuses buffers too small for the geometry it is given."""
    x = np.zeros(2 * 4 * 10 * 10, np.float32)
    grad = np.zeros(2 * 6 * 8 * 8, np.float32)
    out = np.zeros(6 * 4 * 9, np.float32)
    args = [out, 0, x, 0, (2, 4, 10, 10), (400, 100, 10, 1), grad, 0, (384, 64, 8, 1), 6,
            (3, 3), (8, 8), (1, 1), (0, 0), (1, 1)]
    _gemm.conv2d_weight_grad(*args)
    for position, bad in ((0, out[:-1]), (2, x[:-1]), (6, grad[:-1])):
        wrong = list(args)
        wrong[position] = bad
        with pytest.raises((ValueError, IndexError)):
            _gemm.conv2d_weight_grad(*wrong)
    wrong = list(args)
    wrong[11] = (7, 8)                                   # out_size that the input does not give
    with pytest.raises(ValueError):
        _gemm.conv2d_weight_grad(*wrong)
    wrong = list(args)
    wrong[6] = grad.astype(np.float64)
    with pytest.raises(TypeError):
        _gemm.conv2d_weight_grad(*wrong)


def test_sizes_whose_product_overflows_are_still_bounds_checked():
    """out's numel (2**31 * 2**31 * 4) wraps a 64-bit product to 0; the bounds check once
    read that as an empty out and skipped itself, and the kernel wrote far past out. Every
    dim is nonzero, so out's view is checked and refused."""
    out = np.zeros(4, np.float32)
    a = np.ones(1, np.float32)
    b = np.ones(4, np.float32)
    big = 1 << 31
    with pytest.raises(ValueError, match="out"):
        _gemm.gemm((big, big, 4, 1), out, 0, (0, 4, 1), a, 0, (0, 0, 0), b, 0, (0, 0, 1), 1.0,
                   0.0, None, 0, (0, 0, 0))
    assert out.tolist() == [0.0] * 4


def test_convolution_sizes_whose_products_overflow_are_refused():
    """A batch of 2**32 images of 2**32 output channels: the output's numel wraps 64 bits
    to 0. conv2d once read that as an empty output and skipped its bounds check (x and the
    weight pass theirs with all-zero strides), then wrote far past `out` (a segfault). Now
    the sizes are refused before any memory is touched; so is a dilation whose span
    overflows."""
    big = 1 << 32
    out = np.zeros(8, np.float32)
    x = np.ones(8, np.float32)
    args = [out, 0, x, 0, (big, 1, 1, 1), (0, 0, 0, 0), x, 0, (0, 0), big, (1, 1), (1, 1),
            (1, 1), (0, 0), (1, 1), None, 0, 0]
    with pytest.raises(ValueError, match="overflow"):
        _gemm.conv2d(*args)
    wide = list(args)
    wide[4], wide[9], wide[10], wide[14] = (1, 1, 1, 1), 1, (1 << 20, 1), (1 << 58, 1)
    with pytest.raises(ValueError, match="overflow"):
        _gemm.conv2d(*wide)
    assert out.tolist() == [0.0] * 8


# ---------------------------------------------------------------------------------------------
# einsum (and tensordot) as one batched product

EINSUMS = [
    ("ij,jk->ik", (33, 20), (20, 17)),
    ("ij,jk->ki", (33, 20), (20, 17)),          # the product viewed transposed
    ("bij,bjk->bik", (3, 21, 30), (3, 30, 19)),
    ("bij,bkj->bik", (3, 21, 30), (3, 19, 30)),
    ("bhqd,bhkd->bhqk", (2, 3, 16, 8), (2, 3, 12, 8)),   # attention scores
    ("bhqk,bhkd->bqhd", (2, 3, 16, 12), (2, 3, 12, 8)),  # their values, heads moved
    ("xyz,zyw->xw", (10, 9, 8), (8, 9, 11)),     # two summed labels in opposite orders
    ("ij,ij->i", (20, 30), (20, 30)),            # batch only, 1 x 1 products
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("equation,shape_a,shape_b", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_as_a_batched_product(equation, shape_a, shape_b, dtype, no_threshold):
    """Within the products' rounding bound of the exact contraction (np.einsum in
    longdouble); operands contiguous and in a layout whose dims do not merge (a copy)."""
    for layout in ("contiguous", "permuted"):
        a, b = tensor(shape_a, dtype, 1), tensor(shape_b, dtype, 2)
        if layout == "permuted":
            a = reftorch.from_numpy(np.ascontiguousarray(host(a).T)).permute(
                *reversed(range(a.ndim)))
        got, ran = calls_during(lambda: reftorch.einsum(equation, a, b))
        with reftorch.plugins.use_reference_kernels():
            want = reftorch.einsum(equation, a, b)
        assert ran == 1
        assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
        exact_value = np.einsum(equation, host(a).astype(np.longdouble),
                                host(b).astype(np.longdouble))
        scale = np.einsum(equation, np.abs(host(a)).astype(np.float64),
                          np.abs(host(b)).astype(np.float64))
        terms, output = equation.split("->")
        sizes = dict(zip(terms.split(",")[0], shape_a))
        k = math.prod(n for c, n in sizes.items() if c in terms.split(",")[1] and c not in output)
        tol = RTOL[dtype] * math.sqrt(k + 1) * 4 * scale + np.finfo(dtype.numpy_dtype).tiny
        assert np.all(np.abs(host(got) - exact_value) <= tol)
        assert np.all(np.abs(host(got) - host(want)) <= 2 * tol)


def test_einsum_declines_what_is_not_a_product(no_threshold):
    a = tensor((6, 6), reftorch.float32, 3)
    for equation, operands in (("ii->i", (a,)), ("ij,jk->", (a, a)), ("ii,ij->j", (a, a)),
                               ("ij,jk,kl->il", (a, a, a)),
                               ("i,j->ij", (a[0], a[1]))):   # K = 1: NumPy's outer product
        got, ran = calls_during(lambda: reftorch.einsum(equation, *operands))
        assert ran == 0, equation


def test_tensordot_runs_as_a_product():
    a, b = tensor((16, 24, 32), reftorch.float32, 4), tensor((32, 24, 20), reftorch.float32, 5)
    got, ran = calls_during(lambda: reftorch.tensordot(a, b, dims=([1, 2], [1, 0])))
    assert ran == 1
    want = np.tensordot(host(a).astype(np.float64), host(b).astype(np.float64),
                        axes=([1, 2], [1, 0]))
    np.testing.assert_allclose(host(got), want, rtol=1e-4, atol=1e-4)
