"""The C plugin's unary group (plugin_cpu/src/unary.c, reftorch_cpu/unary.py): unary math,
activations, where, clamp and dtype-converting copies on float32/float64 cpu tensors.

Every comparison runs the same code twice on fresh inputs, once with the plugin and once
inside `reftorch.plugins.use_reference_kernels()`, and the C call counter (`_unary.calls()`)
tells whether the C loop really ran. Ops the reference computes with exact IEEE operations
must agree bit for bit; exp, log, tanh and what is built on them (the reference calls NumPy's
own SIMD approximations) must agree within ULP_BOUNDS.
"""
import numpy as np
import pytest

import reftorch
import reftorch.nn.functional as F

try:
    import reftorch_cpu
    from reftorch_cpu import _unary, unary
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

F32, F64 = reftorch.float32, reftorch.float64
BIG = (300, 202)   # 60,600 elements: parallel (above PARALLEL_MIN_*); each thread's block
#                    starts inside a row (30,304 for 2 threads, 20,208 for 3)
MID = (64, 80)     # 5,120 elements: above MIN_NUMEL, one thread


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


# ---------------------------------------------------------------------------------------------
# Inputs: wide-ranging values with the awkward ones mixed in

def values(shape, dtype, seed, special=True):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    scale = np.array([0.1, 1.0, 4.0, 30.0, 300.0])[rng.integers(0, 5, n)]
    a = (rng.standard_normal(n) * scale).astype(dtype.numpy_dtype)
    if special and n:
        info = np.finfo(dtype.numpy_dtype)
        picks = [0.0, -0.0, np.inf, -np.inf, np.nan, info.smallest_subnormal,
                 -info.smallest_subnormal * 3, info.tiny, info.max, -info.max, 1.0, -1.0,
                 88.72, 88.73, -87.3, -103.9, -104.0, 709.7, 709.8, -745.1, 20.0, -20.0,
                 9.01, -9.01, 1e-6, -1e-6, 0.5, -0.5]
        where = rng.choice(n, size=min(n, len(picks)), replace=False)
        a[where] = np.array(picks, dtype=a.dtype)[:where.size]
    return a.reshape(shape)


def contiguous(shape, dtype, seed):
    return reftorch.from_numpy(values(shape, dtype, seed))


def transposed(shape, dtype, seed):
    return reftorch.from_numpy(values(shape[::-1], dtype, seed)).t()


def stepped(shape, dtype, seed):
    r, c = shape
    base = reftorch.from_numpy(values((r, 2 * c + 1), dtype, seed))
    return base.as_strided((r, c), (2 * c + 1, 2), 1)


def expanded(shape, dtype, seed):
    return reftorch.from_numpy(values((1, shape[1]), dtype, seed)).expand(*shape)


def narrowed(shape, dtype, seed):
    """A middle slab of a 3-D base: select + narrow, rows not adjacent in memory."""
    r, c = shape
    base = reftorch.from_numpy(values((r, 3, c + 4), dtype, seed))
    return base.select(1, 2).narrow(1, 3, c)


LAYOUTS = [contiguous, transposed, stepped, expanded, narrowed]


# ---------------------------------------------------------------------------------------------
# The ops and how closely they must agree

EXACT = {
    "neg": reftorch.neg,
    "abs": reftorch.abs,
    "relu": reftorch.relu,
    "F.relu": F.relu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "leaky_relu-default": F.leaky_relu,
    "sqrt": reftorch.sqrt,
    "rsqrt": reftorch.rsqrt,
    "clamp": lambda x: reftorch.clamp(x, -0.5, 0.7),
    "clamp-min": lambda x: reftorch.clamp(x, min=0.1),
    "clamp-max": lambda x: x.clamp(max=-0.25),
    "clamp-nan-bound": lambda x: reftorch.clamp(x, min=float("nan")),
    "clamp-crossed": lambda x: reftorch.clamp(x, 1.0, -1.0),
    "reciprocal": reftorch.reciprocal,
    # pow's exponents 2 and -1 run as x * x and 1 / x (NumPy's power gives exactly these)
    "pow-2": lambda x: x ** 2,
    "pow-minus-1": lambda x: reftorch.pow(x, -1),
    "square": reftorch.square,
    "pow-0-dim-tensor": lambda x: x.pow(reftorch.tensor(2.0, dtype=x.dtype)),
}
# Max distance in units in the last place. The reference's float32 exp is itself up to 2
# ulp from the correctly rounded value and its log up to 3; ours are at most 1 ulp from it
# (exp, log), so they may sit on opposite sides: float32 exp 3 apart.
# sigmoid and silu round twice more after exp (1 + e, then a division).
ULP_BOUNDS = {
    "exp": {F32: 3, F64: 2},
    "log": {F32: 4, F64: 2},
    "tanh": {F32: 2, F64: 3},
    "sigmoid": {F32: 4, F64: 4},
    "silu": {F32: 4, F64: 5},
    "erf": {F32: 1, F64: 2},
}
APPROX = {
    "exp": reftorch.exp,
    "log": reftorch.log,
    "tanh": reftorch.tanh,
    "sigmoid": reftorch.sigmoid,
    "silu": F.silu,
    "erf": reftorch.erf,
}
# gelu's formulas are ill-conditioned where 1 + erf(x/sqrt2) or 1 + tanh(...) cancels
# (x < -3): there the reference's own result carries an absolute error of about
# |x| * eps(1), which any change in the last bit of erf/tanh moves. Bound: a few ulp, or
# that absolute error.
GELU = {
    "gelu": F.gelu,
    "gelu-tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def _ordered(a):
    """Float bits mapped to integers that count ulps across zero."""
    itype = {4: np.int32, 8: np.int64}[a.itemsize]
    i = a.view(itype).astype(np.int64)
    mask = np.int64(np.iinfo(itype).max)
    return np.where(i < 0, -(i & mask), i)


def assert_same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = {4: np.uint32, 8: np.uint64}[got.itemsize]
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


def assert_within_ulp(got, want, ulps, x=None, abs_scale=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    g, w = got[~nan], want[~nan]
    np.testing.assert_array_equal(np.isinf(g), np.isinf(w))
    np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)])
    distance = np.abs(_ordered(np.ascontiguousarray(g)) - _ordered(np.ascontiguousarray(w)))
    ok = distance <= ulps
    if abs_scale:
        eps = np.finfo(got.dtype).eps
        xs = np.abs(np.asarray(x, dtype=np.float64))[~nan]
        ok |= np.abs(g.astype(np.float64) - w.astype(np.float64)) <= abs_scale * eps * xs
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (f"{bad.size} elements beyond {ulps} ulp, e.g. got {g[bad[:4]]} "
                           f"want {w[bad[:4]]} ({distance[bad[:4]]} ulp)")


def run_both(case):
    """case() -> list of tensors; plugin run and reference run, plus the C calls made."""
    before = _unary.calls()
    got = [np.array(t.numpy()) for t in case()]
    ran = _unary.calls() - before
    with reftorch.plugins.use_reference_kernels():
        want = [np.array(t.numpy()) for t in case()]
    return got, want, ran


def check(name, got, want, dtype, x=None):
    if name in EXACT:
        assert_same(got, want)
    elif name in APPROX:
        assert_within_ulp(got, want, ULP_BOUNDS[name][dtype])
    else:
        assert_within_ulp(got, want, 4, x, abs_scale=4.0)


ALL = {**EXACT, **APPROX, **GELU}


def _gelu_input_guard(name, dtype, x):
    # The reference's erf gives nan for |x| > 1.6e307 (trunc(16 y) overflows inside
    # exp(-y^2)); PyTorch gives x and so do we, so those float64 inputs are left out.
    if (name.startswith("gelu") or name == "erf") and dtype is F64:
        a = x.numpy()
        a[np.abs(a) > 1e300] = 1.0
    return x


# ---------------------------------------------------------------------------------------------
# Results

@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(ALL))
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f.__name__)
def test_matches_reference(layout, name, dtype):
    fn = ALL[name]

    def case():
        x = _gelu_input_guard(name, dtype, layout(BIG, dtype, 3))
        return [x, fn(x)]
    got, want, ran = run_both(case)
    assert ran == 1
    assert_same(got[0], want[0])
    check(name, got[1], want[1], dtype, got[0])


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_large_range_of_values(dtype):
    """Every op over a million values spanning the whole range (crossing many blocks)."""
    rng = np.random.default_rng(5)
    n = 1 << 20
    a = values((n,), dtype, 11)
    exponent = rng.uniform(-40, 40, n) if dtype is F32 else rng.uniform(-300, 300, n)
    a[::3] = (np.sign(rng.standard_normal(a[::3].size)) * 10.0 ** exponent[::3]).astype(
        a.dtype)
    for name, fn in ALL.items():
        x = reftorch.from_numpy(a.copy())
        _gelu_input_guard(name, dtype, x)
        got, want, ran = run_both(lambda: [fn(x)])
        assert ran == 1, name
        check(name, got[0], want[0], dtype, x.numpy())


def test_float32_exp_log_tanh_and_erf_are_faithfully_rounded():
    """src/unary.c's float32 exp, log, tanh and erf against the correctly rounded values
    (float64 results rounded once) over 2M random bit patterns (every exponent, subnormals,
    inf, nan, negatives) and dense grids around their branch points: at most 1 ulp. (An
    exhaustive run over all 2^32 inputs gave the same bound for log, tanh and erf, see
    unary.c.)"""
    from reftorch._ops.special_pointwise import _erf
    rng = np.random.default_rng(81)
    bits = rng.integers(0, 2**32, 1 << 21, dtype=np.uint64).astype(np.uint32)
    grids = [np.linspace(lo, hi, 100_001, dtype=np.float32) for lo, hi in
             ((0.5, 0.6), (0.85, 0.95), (3.8, 4.2), (8.9, 9.3), (0.0, 1e-3),
              (0.70, 0.72), (0.99, 1.01), (1.40, 1.43), (1.1e-38, 1.2e-38))]
    x = np.concatenate([bits.view(np.float32)] + grids + [-g for g in grids])
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)])
    with np.errstate(all="ignore"):
        exact = {"tanh": np.tanh(x.astype(np.float64)).astype(np.float32),
                 "erf": _erf(x.astype(np.float64)).astype(np.float32),
                 "exp": np.exp(x.astype(np.float64)).astype(np.float32),
                 "log": np.log(x.astype(np.float64)).astype(np.float32)}
    for name in ("exp", "log", "tanh", "erf"):
        got = np.empty_like(x)
        _unary.elementwise(getattr(_unary, name.upper()), [x.size], got, 0, [1], x, 0, [1],
                           0.0, 0.0)
        assert_within_ulp(got, exact[name], 1)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(), (0,), (0, 7), (5,), MID], ids=str)
def test_small_empty_and_zero_dim(shape, dtype, monkeypatch):
    """With the decline thresholds off, tiny, empty and 0-dim tensors run in C too."""
    monkeypatch.setattr(unary, "MIN_NUMEL", 0)
    monkeypatch.setattr(unary, "MIN_NUMEL_MATH", 0)
    monkeypatch.setattr(unary, "MIN_NUMEL_ERF", 0)
    for name, fn in ALL.items():
        def case():
            x = reftorch.from_numpy(values(shape, dtype, 1))
            return [fn(_gelu_input_guard(name, dtype, x))]
        got, want, ran = run_both(case)
        assert ran == 1, name
        check(name, got[0], want[0], dtype, values(shape, dtype, 1))


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_inplace_and_out_forms(dtype):
    cases = {
        "exp_": lambda x: x.exp_(),
        "sigmoid_": lambda x: x.sigmoid_(),
        "tanh_": lambda x: reftorch.tanh_(x) if hasattr(reftorch, "tanh_") else x.tanh_(),
        "relu_": lambda x: reftorch.relu_(x),
        "F.relu inplace": lambda x: F.relu(x, inplace=True),
        "clamp_": lambda x: x.clamp_(-1.0, 2.0),
        "neg out": lambda x: reftorch.neg(x, out=reftorch.empty(BIG, dtype=dtype)),
        "exp out": lambda x: reftorch.exp(x, out=reftorch.empty(BIG, dtype=dtype)),
        "silu inplace": lambda x: F.silu(x, inplace=True),
    }
    for label, fn in cases.items():
        got, want, ran = run_both(lambda: [fn(contiguous(BIG, dtype, 4))])
        assert ran == 1, label
        name = label.split()[0].rstrip("_")
        check(name if name in ALL else "exp", got[0], want[0], dtype)


def test_out_of_another_dtype_is_declined_and_right():
    x = contiguous(BIG, F32, 2)
    got, want, ran = run_both(lambda: [reftorch.exp(x, out=reftorch.empty(BIG, dtype=F64))])
    assert ran == 0
    assert_same(got[0], want[0])


def test_overlapping_outputs_are_declined():
    """An out whose elements overlap each other, or that overlaps its input shifted by one
    element, is left to the reference (an elementwise loop could read what it wrote)."""
    def case():
        x = contiguous(BIG, F32, 2)
        shifted = reftorch.from_numpy(values((BIG[0] * BIG[1] + 1,), F32, 3))
        reftorch.exp(shifted[1:].view(*BIG), out=shifted[:-1].view(*BIG))
        return [shifted]
    got, want, ran = run_both(case)
    assert ran == 0
    assert_within_ulp(got[0], want[0], 0)
    x = contiguous(BIG, F32, 2)
    out = reftorch.zeros(BIG[1], dtype=F32).expand(*BIG)
    before = _unary.calls()
    try:
        reftorch.neg(x, out=out)
    except RuntimeError:
        pass
    assert _unary.calls() == before


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("bounds", ["tensors", "broadcast", "scalars"])
def test_clamp_with_tensor_bounds(bounds, dtype):
    def case():
        x = contiguous(BIG, dtype, 1)
        if bounds == "tensors":
            low, high = contiguous(BIG, dtype, 2), contiguous(BIG, dtype, 3)
        elif bounds == "broadcast":
            low = reftorch.from_numpy(values((BIG[1],), dtype, 2))
            high = reftorch.from_numpy(values((BIG[0], 1), dtype, 3))
        else:
            low, high = -2.0, 3.0
        return [reftorch.clamp(x, low, high), reftorch.clamp(x, min=low),
                reftorch.clamp(x, max=high)]
    got, want, ran = run_both(case)
    assert ran == 3
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("form", ["tensors", "scalar-other", "broadcast", "transposed"])
def test_where(form, dtype):
    def case():
        cond = reftorch.from_numpy(values(BIG, F32, 7) > 0)
        a, b = contiguous(BIG, dtype, 1), contiguous(BIG, dtype, 2)
        if form == "scalar-other":
            return [reftorch.where(cond, a, 0.0), a.where(cond, -1.5)]
        if form == "broadcast":
            return [reftorch.where(cond[:1], a, reftorch.from_numpy(values((BIG[1],), dtype, 3)))]
        return [reftorch.where(cond.t().contiguous().t(), a.t().contiguous().t(), b)]
    got, want, ran = run_both(case)
    assert ran >= 1
    for g, w in zip(got, want):
        assert_same(g, w)


# addcmul, addcdiv and lerp: the optimizers' update ops, bit for bit in every layout

TERNARY = {
    "addcmul": lambda a, b, c: reftorch.addcmul(a, b, c, value=0.3),
    "addcmul-default-value": lambda a, b, c: reftorch.addcmul(a, b, c),
    "addcmul-int-value": lambda a, b, c: a.addcmul(b, c, value=-3),
    "addcdiv": lambda a, b, c: reftorch.addcdiv(a, b, c, value=-1e-3),
    "addcdiv-default-value": lambda a, b, c: a.addcdiv(b, c),
    "lerp-weight-below-half": lambda a, b, c: reftorch.lerp(a, b, 0.3),
    "lerp-weight-above-half": lambda a, b, c: a.lerp(b, 0.9),
    "lerp-weight-nan": lambda a, b, c: a.lerp(b, float("nan")),
    "lerp-tensor-weight": lambda a, b, c: reftorch.lerp(a, b, c),
}


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(TERNARY))
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f.__name__)
def test_addcmul_addcdiv_and_lerp_match_reference(layout, name, dtype):
    """Every operand in the layout (the special values of `values` included); lerp's tensor
    weight spans both branches (|w| < 0.5 and not) and NaN."""
    fn = TERNARY[name]
    got, want, ran = run_both(lambda: [fn(layout(BIG, dtype, 1), layout(BIG, dtype, 2),
                                          layout(BIG, dtype, 3))])
    assert ran == 1
    assert_same(got[0], want[0])


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_addcmul_addcdiv_and_lerp_broadcast_inplace_and_out(dtype):
    def case():
        a, b, c = (contiguous(BIG, dtype, seed) for seed in (4, 5, 6))
        row, column = reftorch.from_numpy(values((BIG[1],), dtype, 7)), c[:, :1]
        return [reftorch.addcmul(a, row, column, value=2.5),
                reftorch.addcdiv(b, row, column),
                reftorch.lerp(a, row, column),
                a.clone().addcmul_(b, b, value=0.001),      # Adam's second moment
                a.clone().lerp_(b, 0.1),                    # and its first
                a.clone().addcdiv_(b, c, value=-0.01),      # and its update
                reftorch.addcmul(a, b, c, value=0.5, out=reftorch.empty(BIG, dtype=dtype))]
    got, want, ran = run_both(case)
    assert ran == 7
    for g, w in zip(got, want):
        assert_same(g, w)


def test_addcmul_addcdiv_and_lerp_decline_what_they_do_not_handle():
    a, b, c = (contiguous(BIG, F32, seed) for seed in (8, 9, 10))
    c64, a16, b16 = c.double(), a.to(reftorch.bfloat16), b.to(reftorch.bfloat16)
    before = _unary.calls()
    reftorch.addcmul(a, b, c, value=2**60)           # a value no double holds exactly
    reftorch.addcmul(a, b, c64)                      # mixed dtypes
    reftorch.lerp(a16, b16, 0.3)                     # bfloat16
    reftorch.addcdiv(a[:10, :10], b[:10, :10], c[:10, :10])   # below MIN_NUMEL
    assert _unary.calls() == before


def test_addcmul_addcdiv_and_lerp_give_the_same_bits_in_every_instruction_set_and_thread_count():
    a, b, c = (contiguous((1 << 17,), F32, seed) for seed in (11, 12, 13))
    outs = []
    previous_isa, previous_threads = _unary.isa(), _unary.set_num_threads(1)
    try:
        for isa in _unary.supported_isas():
            for threads in (1, 2):
                _unary.set_isa(isa)
                _unary.set_num_threads(threads)
                outs.append([np.array(fn(a, b, c).numpy()) for fn in TERNARY.values()])
    finally:
        _unary.set_isa(previous_isa)
        _unary.set_num_threads(previous_threads)
    for results in outs[1:]:
        for g, w in zip(results, outs[0]):
            assert_same(g, w)


# ---------------------------------------------------------------------------------------------
# dtype conversions (copy_ across dtypes: .to(), .float(), mask.to(x.dtype), ...)

CAST = [F32, F64, reftorch.int64, reftorch.int32, reftorch.bool]


def assert_bytes_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))


def cast_source(dtype, seed, layout):
    a = values(BIG, F64, seed)
    if dtype is reftorch.bool:
        arr = a > 0
    elif dtype in (reftorch.int64, reftorch.int32):
        info = np.iinfo(dtype.numpy_dtype)
        rng = np.random.default_rng(seed)
        arr = rng.integers(info.min, info.max, BIG, dtype=dtype.numpy_dtype, endpoint=True)
        arr[:, :20] = rng.integers(-1000, 1000, (BIG[0], 20))
    else:
        arr = a.astype(dtype.numpy_dtype)
        # values beyond the integer ranges (and nan/inf, already in) for float -> int
        arr.reshape(-1)[50:60] = [3e9, -3e9, 2**31, -2**31, 2**31 - 1, 9.3e18, -9.3e18,
                                  2.0**63, -2.0**63, 1e30]
    if layout == "transposed":
        return reftorch.from_numpy(np.ascontiguousarray(arr.T)).t()
    return reftorch.from_numpy(arr)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("src", CAST, ids=lambda d: d.name)
@pytest.mark.parametrize("dst", CAST, ids=lambda d: d.name)
def test_casts_match_reference(dst, src, layout):
    got, want, ran = run_both(lambda: [cast_source(src, 9, layout).to(dst)])
    assert ran == (0 if src is dst else 1)  # .to(own dtype) copies nothing
    assert_bytes_equal(got[0], want[0])


@pytest.mark.parametrize("dst", CAST, ids=lambda d: d.name)
def test_cast_into_strided_destination(dst):
    def case():
        src = cast_source(F32, 4, "contiguous")
        out = reftorch.zeros((BIG[1], BIG[0]), dtype=dst).t()
        out.copy_(src)
        return [out.contiguous(), src.t()[:1].expand(*BIG[::-1]).to(dst)]
    got, want, ran = run_both(case)
    assert ran >= (1 if dst is not F32 else 0)
    for g, w in zip(got, want):
        assert_bytes_equal(g, w)


F16, BF16, U8 = reftorch.float16, reftorch.bfloat16, reftorch.uint8


def every_16_bit_pattern(dtype, layout):
    """All 65,536 float16 or bfloat16 values (NaN payloads, signalling ones, subnormals)."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).reshape(256, 256)
    if layout == "transposed":
        bits = np.ascontiguousarray(bits.T)
    t = reftorch.from_numpy(bits.view(np.int16)).view(dtype)
    return t.t() if layout == "transposed" else t


def float32_edge_patterns():
    """float32 values where rounding to float16 / bfloat16 is delicate: ties either way, the
    subnormal and overflow boundaries of both, NaN payloads in the kept and the dropped bits,
    and random bit patterns; 65,536 in all (above the parallel size)."""
    rng = np.random.default_rng(12)
    edges = []
    for base in (0x3f800000, 0x38800000, 0x38000000, 0x33000000, 0x477fe000, 0x477ff000,
                 0x7f7f0000, 0x00800000, 0x00000000, 0x7f800000):
        for delta in (-0x1001, -0x1000, -0xfff, -1, 0, 1, 0xfff, 0x1000, 0x1001, 0x2000,
                      0x7fff, 0x8000, 0x8001, 0x18000):
            edges.append((base + delta) & 0xffffffff)
    edges += [0x7f800001, 0x7fa00000, 0x7fc00000, 0x7fc12345, 0x7fbfffff, 0x7f801fff,
              0xff800001, 0xffc00000, 0xff812345]
    edges = np.array(edges, np.uint32)
    bits = np.concatenate([edges, edges | 0x80000000,
                           rng.integers(0, 1 << 32, (1 << 16) - 2 * edges.size, np.uint32)])
    return reftorch.from_numpy(bits.view(np.float32).reshape(256, 256))


def on_isa(isa, case):
    """run_both(case) with the C loops of instruction set `isa`."""
    previous = _unary.set_isa(isa)
    try:
        return run_both(case)
    finally:
        _unary.set_isa(previous)


@pytest.mark.parametrize("isa", _unary.supported_isas())
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("src, dst", [(F16, F32), (BF16, F32), (BF16, F64)],
                         ids=lambda d: d.name)
def test_every_half_and_bfloat16_value_widens_as_the_reference(src, dst, layout, isa):
    got, want, ran = on_isa(isa, lambda: [every_16_bit_pattern(src, layout).to(dst)])
    assert ran == 1
    assert_bytes_equal(got[0], want[0])


@pytest.mark.parametrize("isa", _unary.supported_isas())
@pytest.mark.parametrize("dst", [F16, BF16], ids=lambda d: d.name)
def test_float32_rounds_to_half_and_bfloat16_as_the_reference(dst, isa):
    """The bits of NumPy's float16 and ml_dtypes' bfloat16: nearest-even rounding, and each
    library's NaN rule (float16 keeps a signalling NaN signalling, bfloat16 makes every NaN
    0x7fc0 with its sign), whether the block conversions (AVX-512F) or the integer code run.
    Checked offline over all 2^32 float32 values too."""
    def case():
        x = float32_edge_patterns()
        return [x.to(dst).view(reftorch.int16), x.t().to(dst).view(reftorch.int16),
                x.reshape(-1)[3:].to(dst).view(reftorch.int16)]   # blocks off 16 alignment
    got, want, ran = on_isa(isa, case)
    assert ran == 3
    for g, w in zip(got, want):
        assert_bytes_equal(g, w)


@pytest.mark.parametrize("dtype", [F16, BF16, U8], ids=lambda d: d.name)
def test_copies_within_half_bfloat16_and_uint8_move_the_bits(dtype):
    def case():
        if dtype is U8:
            x = reftorch.from_numpy(np.arange(1 << 16, dtype=np.uint32).astype(np.uint8)
                                    .reshape(256, 256))
        else:
            x = every_16_bit_pattern(dtype, "contiguous")
        return [x.t().contiguous(), x[::2].clone()]
    got, want, ran = run_both(case)
    assert ran == 2
    for g, w in zip(got, want):
        assert_bytes_equal(g, w)


@pytest.mark.parametrize("dst", [F32, F64, reftorch.int64], ids=lambda d: d.name)
def test_uint8_widens_as_the_reference(dst):
    def case():
        pixels = np.arange(3 * 128 * 128, dtype=np.uint64).astype(np.uint8).reshape(3, 128, 128)
        x = reftorch.from_numpy(pixels)
        return [x.to(dst), x.permute(1, 2, 0).to(dst)]
    got, want, ran = run_both(case)
    assert ran == 2
    for g, w in zip(got, want):
        assert_bytes_equal(g, w)


def test_casts_the_c_loop_does_not_take_go_to_the_reference():
    """float64 rounds straight to float16 (not through float32), float to uint8 is left
    undefined by C: these pairs decline and the reference converts."""
    x = reftorch.from_numpy(np.linspace(-300, 300, 70000))
    for dst in (F16, BF16, U8):
        before = _unary.calls()
        got = x.to(dst)
        assert _unary.calls() == before
        with reftorch.plugins.use_reference_kernels():
            assert_bytes_equal(np.array(got.numpy()), np.array(x.to(dst).numpy()))


def test_cast_rejects_a_pair_it_has_no_loop_for():
    out, src = np.zeros(4, np.float16), np.zeros(4, np.float64)
    with pytest.raises(TypeError, match="no conversion from float64 to float16"):
        _unary.cast((4,), out, _unary.T_F16, 0, (1,), src, _unary.T_F64, 0, (1,))


# ---------------------------------------------------------------------------------------------
# Backward ops (what the derivative rows of tanh, sigmoid, relu/threshold, gelu, silu call):
# inputs (grad_output, the forward's output or input). tanh, sigmoid and threshold backward
# are plain arithmetic and agree bit for bit; gelu and silu backward contain erf/exp/tanh and
# cancel where the derivative crosses 0, so they are bounded by 4 ulp or an absolute error of
# GRAD_ABS_SCALE * eps * |g| * (1 + x^2) (measured over 1M values: at most 1.5).

def _ops():
    from reftorch._ops import nn_activation
    return nn_activation


# (tanh and sigmoid backward take the forward's output; any values do for the arithmetic)
GRADS_EXACT = {
    "tanh_backward": lambda g, y: _ops().tanh_backward(g, y),
    "sigmoid_backward": lambda g, y: _ops().sigmoid_backward(g, y),
    "threshold_backward": lambda g, x: _ops().threshold_backward(g, x, 0),
    "threshold_backward-0.25": lambda g, x: _ops().threshold_backward(g, x, 0.25),
    "threshold_backward-int": lambda g, x: _ops().threshold_backward(g, x, -3),
}
GRADS_APPROX = {
    "gelu_backward": lambda g, x: _ops().gelu_backward(g, x),
    "gelu_backward-tanh": lambda g, x: _ops().gelu_backward(g, x, approximate="tanh"),
    "silu_backward": lambda g, x: _ops().silu_backward(g, x),
}
GRADS = {**GRADS_EXACT, **GRADS_APPROX}
GRAD_ABS_SCALE = 2.0


def assert_grad_close(got, want, g, x):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    g, x = np.broadcast_to(g, got.shape), np.broadcast_to(x, got.shape)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    gv, wv, gg, xx = got[~nan], want[~nan], g[~nan], x[~nan]
    np.testing.assert_array_equal(gv[np.isinf(wv)], wv[np.isinf(wv)])
    distance = np.abs(_ordered(np.ascontiguousarray(gv)) - _ordered(np.ascontiguousarray(wv)))
    eps = np.finfo(got.dtype).eps
    with np.errstate(all="ignore"):
        scale = np.abs(gg.astype(np.float64)) * (1 + xx.astype(np.float64) ** 2)
        bound = GRAD_ABS_SCALE * eps * scale
        ok = (distance <= 4) | (np.abs(gv.astype(np.float64) - wv) <= bound)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, f"{bad.size} beyond the bound, e.g. x={xx[bad[:4]]} got {gv[bad[:4]]} " \
                          f"want {wv[bad[:4]]}"


def check_grad(name, got, want, g, x):
    if name in GRADS_EXACT:
        assert_same(got, want)
    else:
        assert_grad_close(got, want, g, x)


def _grad_inputs(layout, dtype):
    """(g, x) for the backward ops: g in `layout` (an expanded g is the gradient of a sum),
    x contiguous or in the same layout (stepped g with a transposed x mixes the two)."""
    g = layout(BIG, dtype, 21)
    x = (transposed if layout is stepped else layout if layout is not expanded
         else contiguous)(BIG, dtype, 22)
    return g, x


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(GRADS))
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f.__name__)
def test_backward_ops_match_reference(layout, name, dtype):
    fn = GRADS[name]

    def case():
        g, x = _grad_inputs(layout, dtype)
        if name.startswith("gelu") and dtype is F64:  # see _gelu_input_guard
            _gelu_input_guard("gelu", dtype, x)
        return [g, x, fn(g, x)]
    got, want, ran = run_both(case)
    assert ran == 1
    check_grad(name, got[2], want[2], got[0], got[1])


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_backward_ops_over_a_large_range_of_values(dtype):
    n = 1 << 20
    x = values((n,), dtype, 31)
    rng = np.random.default_rng(32)
    x[::3] = (np.sign(rng.standard_normal(x[::3].size)) *
              10.0 ** rng.uniform(-8, 3, x[::3].size)).astype(x.dtype)
    g = values((n,), dtype, 33)
    for name, fn in GRADS.items():
        if name.startswith("gelu") and dtype is F64:
            x[np.abs(x) > 1e300] = 1.0
        got, want, ran = run_both(lambda: [fn(reftorch.from_numpy(g.copy()),
                                              reftorch.from_numpy(x.copy()))])
        assert ran >= 1, name
        check_grad(name, got[0], want[0], g, x)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("shapes", [((), ()), ((0,), (0,)), ((5,), (5,)), (MID, MID),
                                    ((), MID), (MID, (MID[1],))], ids=str)
def test_backward_ops_small_empty_zero_dim_and_broadcast(shapes, dtype, monkeypatch):
    monkeypatch.setattr(unary, "MIN_NUMEL", 0)
    monkeypatch.setattr(unary, "MIN_NUMEL_MATH", 0)
    monkeypatch.setattr(unary, "MIN_NUMEL_ERF", 0)
    for name, fn in GRADS.items():
        def case():
            g = reftorch.from_numpy(values(shapes[0], dtype, 41))
            x = reftorch.from_numpy(values(shapes[1], dtype, 42))
            return [g, x, fn(g, x)]
        got, want, ran = run_both(case)
        assert ran >= 1, name
        check_grad(name, got[2], want[2], got[0], got[1])


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("forward", ["tanh", "sigmoid", "relu", "threshold", "gelu",
                                     "gelu-tanh", "silu"])
def test_autograd_runs_the_fused_backward(forward, dtype):
    """x.grad through the derivative rows: the forward and its backward op both run in C."""
    fns = {"tanh": reftorch.tanh, "sigmoid": reftorch.sigmoid, "relu": F.relu,
           "threshold": lambda x: F.threshold(x, 0.5, -2.0), "gelu": F.gelu,
           "gelu-tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu}

    def case():
        x = contiguous(BIG, dtype, 51)
        if forward.startswith("gelu") and dtype is F64:
            _gelu_input_guard("gelu", dtype, x)
        x.requires_grad_()
        g = contiguous(BIG, dtype, 52)
        y = fns[forward](x)
        y.backward(g)
        return [x.detach(), g, x.grad]
    got, want, ran = run_both(case)
    # the forward and its backward op in C; F.threshold's forward is the reference's
    assert ran == (1 if forward == "threshold" else 2)
    name = {"tanh": "tanh_backward", "sigmoid": "sigmoid_backward", "relu": "threshold_backward",
            "threshold": "threshold_backward", "gelu": "gelu_backward",
            "gelu-tanh": "gelu_backward-tanh", "silu": "silu_backward"}[forward]
    if forward in ("tanh", "sigmoid"):  # exact arithmetic on outputs that differ by ulps
        assert_grad_close(got[2], want[2], got[1], got[0])
    else:
        check_grad(name, got[2], want[2], got[1], got[0])


def test_relu_backward_of_a_sum_matches():
    """The gradient of y.sum() arrives as one expanded number (stride 0)."""
    def case():
        x = contiguous(BIG, F32, 8).requires_grad_()
        y = F.relu(x)
        y.sum().backward()
        return [y.detach(), x.grad]
    got, want, ran = run_both(case)
    assert ran == 2  # relu and threshold_backward
    for g, w in zip(got, want):
        assert_same(g, w)


def test_backward_ops_do_not_depend_on_threads_or_instruction_set():
    g32, x32 = values((1 << 18,), F32, 61), values((1 << 18,), F32, 62)
    g64, x64 = values((1 << 17,), F64, 63), values((1 << 17,), F64, 64)
    x64[np.abs(x64) > 1e300] = 1.0

    def run_all():
        return [np.array(fn(reftorch.from_numpy(g.copy()), reftorch.from_numpy(x.copy())).numpy())
                for fn in GRADS.values() for g, x in ((g32, x32), (g64, x64))]
    outs = {}
    previous_threads, previous_isa = _unary.set_num_threads(1), _unary.isa()
    try:
        outs["1 thread"] = run_all()
        for threads in (2, 3):
            _unary.set_num_threads(threads)
            outs[f"{threads} threads"] = run_all()
        for isa in _unary.supported_isas():
            _unary.set_isa(isa)
            outs[isa] = run_all()
    finally:
        _unary.set_num_threads(previous_threads)
        _unary.set_isa(previous_isa)
    for label, results in outs.items():
        for got, want in zip(results, outs["1 thread"]):
            assert_same(got, want)


def test_backward_ops_decline_what_they_do_not_handle():
    g, x = contiguous(BIG, F32, 71), contiguous(BIG, F32, 72)
    x64, g16, x16 = x.double(), g.to(reftorch.bfloat16), x.to(reftorch.bfloat16)
    small_g, small_x = contiguous((10, 10), F32, 1), contiguous((10, 10), F32, 2)
    before = _unary.calls()
    _ops().threshold_backward(g, x, 2**60)     # a threshold no double holds exactly
    _ops().tanh_backward(g, x64)               # mixed dtypes
    _ops().silu_backward(small_g, small_x)     # below MIN_NUMEL
    _ops().sigmoid_backward(g16, x16)          # bfloat16
    assert _unary.calls() == before


# ---------------------------------------------------------------------------------------------
# Determinism: thread count and instruction set never change a bit

def test_thread_count_does_not_change_results():
    a = values((1 << 19,), F32, 12)
    b = values((1 << 18,), F64, 13)
    outs = {}
    previous = _unary.set_num_threads(1)
    try:
        for threads in (1, 2, 3):
            _unary.set_num_threads(threads)
            outs[threads] = [np.array(fn(reftorch.from_numpy(x.copy())).numpy())
                             for fn in ALL.values() for x in (a, b)]
    finally:
        _unary.set_num_threads(previous)
    for threads in (2, 3):
        for g, w in zip(outs[threads], outs[1]):
            assert_same(g, w)


def test_float32_exp_family_gives_the_same_bits_in_every_layout():
    """float32 exp, sigmoid and silu: the unit-stride rows (AVX-512F: explicit vectors applying
    2^n with vscalefps, a masked last vector) against the strided rows (the scalar formula),
    over random bit patterns (NaN payloads included) and dense grids where the results
    overflow, turn subnormal or hit the clamps, for lengths 1-33 (whole vectors, and a
    masked last one)."""
    rng = np.random.default_rng(82)
    bits = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    grids = [np.linspace(lo, hi, 200_001, dtype=np.float32) for lo, hi in
             ((-110.5, -85.0), (87.0, 90.5), (-1.0, 1.0))]
    x = np.concatenate([bits.view(np.float32)] + grids + [-g for g in grids])
    for name in ("exp", "sigmoid", "silu"):
        code = getattr(_unary, name.upper())
        for n in [x.size] + list(range(1, 34)):
            dense, strided = np.empty(n, np.float32), np.empty(2 * n, np.float32)
            _unary.elementwise(code, [n], dense, 0, [1], x, 0, [1], 0.0, 0.0)
            _unary.elementwise(code, [n], strided, 0, [2], x, 0, [1], 0.0, 0.0)
            assert_same(dense, strided[::2])


def test_float32_gelu_and_silu_backward_give_the_same_bits_in_every_layout():
    """gelu_backward and silu_backward: the unit-stride rows (AVX-512F: explicit vectors, 2^n
    by vscalefps, erfc's range test as a mask) against the strided rows (the scalar formula),
    over random bit patterns for x and g, dense grids across erfc's |x / sqrt2| = 4 cut and
    exp's clamps, and lengths 1-33 (whole vectors and a masked last one). (Checked once over
    every float32 x with random g: no lane differs.)"""
    rng = np.random.default_rng(83)
    bits = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    grids = [np.linspace(lo, hi, 200_001, dtype=np.float32) for lo, hi in
             ((-6.0, 6.0), (5.5, 5.9), (-90.5, -86.0), (-15.0, -13.0))]
    x = np.concatenate([bits.view(np.float32)] + grids + [-g for g in grids])
    g = np.concatenate([rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32), rng.standard_normal(x.size - (1 << 20))
                        .astype(np.float32)])
    for name in ("gelu_backward", "silu_backward"):
        code = getattr(_unary, name.upper())
        for n in [x.size] + list(range(1, 34)):
            dense, strided = np.empty(n, np.float32), np.empty(2 * n, np.float32)
            _unary.elementwise(code, [n], dense, 0, [1], g, 0, [1], x, 0, [1], 0.0, 0.0)
            _unary.elementwise(code, [n], strided, 0, [2], g, 0, [1], x, 0, [1], 0.0, 0.0)
            assert_same(dense, strided[::2])


def test_every_instruction_set_gives_the_same_bits():
    a = values((20000,), F32, 14)
    b = values((20000,), F64, 15)
    outs = {}
    previous = _unary.isa()
    try:
        for isa in _unary.supported_isas():
            _unary.set_isa(isa)
            outs[isa] = [np.array(fn(reftorch.from_numpy(x.copy())).numpy())
                         for fn in ALL.values() for x in (a, b)]
    finally:
        _unary.set_isa(previous)
    for isa, results in outs.items():
        for g, w in zip(results, outs["baseline"]):
            assert_same(g, w)


# ---------------------------------------------------------------------------------------------
# Registration, declines, raw C argument checks

@pytest.mark.parametrize("op", ["neg", "abs", "relu", "reciprocal", "pow", "exp", "log", "tanh",
                                "sigmoid", "silu",
                                "gelu", "erf", "leaky_relu", "sqrt", "rsqrt", "clamp",
                                "clamp_min", "clamp_max", "where", "tanh_backward",
                                "sigmoid_backward", "threshold_backward", "gelu_backward",
                                "silu_backward", "addcmul", "addcdiv", "lerp"])
def test_serves_ops(op):
    assert reftorch.plugins.serving(op, "cpu", F32) == "cpu"
    assert reftorch.plugins.serving(op, "cpu", F64) == "cpu"


def test_pow_serves_exponents_2_and_minus_1_only():
    x = contiguous(BIG, F32, 4)
    got, want, ran = run_both(lambda: [x.clone().pow_(2), reftorch.pow(x, -1.0, out=x.clone()),
                                       x.t() ** 2])
    assert ran == 3
    for g, w in zip(got, want):
        assert_same(g, w)
    exponents = [3, 0.5, 2.5, 0, 1, float("nan"), reftorch.tensor(2.0, dtype=F64),
                 contiguous(BIG, F32, 5)]
    got, want, ran = run_both(lambda: [x.abs() ** e for e in exponents])
    assert ran == len(exponents)   # the abs() calls only
    for g, w in zip(got, want):
        assert_same(g, w)


def test_erf_ops_run_in_c_at_any_size():
    """erf, gelu and gelu_backward: the reference's erf costs ~90 us even for tiny inputs."""
    x, g = contiguous((3, 4), F32, 0), contiguous((3, 4), F32, 1)
    got, want, ran = run_both(lambda: [reftorch.erf(x), F.gelu(x), _ops().gelu_backward(g, x)])
    assert ran == 3
    check("erf", got[0], want[0], F32)
    check("gelu", got[1], want[1], F32, x.numpy())
    check_grad("gelu_backward", got[2], want[2], g.numpy(), x.numpy())


@pytest.mark.parametrize("dtype", [F32, F64], ids=lambda d: d.name)
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (0, 6), (-0.3, 1e-45), (2.5, 2.5)])
def test_hardtanh_runs_the_clamp_row_with_the_reference_bits(bounds, layout, dtype):
    """hardtanh (relu6 too) with its number bounds rounded to the dtype first (1e-45 to a
    float32 subnormal); NaN passes through; equal bounds give that value everywhere."""
    def case():
        x = layout(BIG, dtype, 21)
        inplace = x.contiguous()
        F.hardtanh(inplace, *bounds, inplace=True)
        return [F.hardtanh(x, *bounds), inplace]
    got, want, ran = run_both(case)
    assert ran == 2
    for g, w in zip(got, want):
        assert_same(g, w)
    before = _unary.calls()
    F.relu6(contiguous(BIG, F32, 3))
    assert _unary.calls() == before + 1


def test_declines_small_and_other_dtypes():
    before = _unary.calls()
    reftorch.exp(contiguous((10, 10), F32, 0))
    reftorch.neg(reftorch.ones(BIG, dtype=reftorch.float16))
    contiguous(BIG, F64, 0).to(reftorch.bfloat16)  # (float64 rounds straight to it)
    F.leaky_relu(contiguous(BIG, F32, 0), negative_slope=0.5)  # a plain number: served
    assert _unary.calls() - before == 1


def test_raw_entry_points_check_their_arguments():
    x = np.zeros(100, dtype=np.float32)
    o = np.zeros(100, dtype=np.float32)
    ok = (_unary.EXP, [10, 10], o, 0, [10, 1], x, 0, [10, 1], 0.0, 0.0)
    _unary.elementwise(*ok)
    with pytest.raises(ValueError):  # reaches past the end of x
        _unary.elementwise(_unary.EXP, [10, 10], o, 0, [10, 1], x, 1, [10, 1], 0.0, 0.0)
    with pytest.raises(ValueError):  # negative offset
        _unary.elementwise(_unary.EXP, [10], o, -1, [1], x, 0, [1], 0.0, 0.0)
    with pytest.raises(ValueError):  # stride list of the wrong length
        _unary.elementwise(_unary.EXP, [10, 10], o, 0, [10], x, 0, [10, 1], 0.0, 0.0)
    with pytest.raises(TypeError):  # float64 input for a float32 out
        _unary.elementwise(_unary.EXP, [10], o, 0, [1], x.astype(np.float64), 0, [1], 0.0, 0.0)
    with pytest.raises(TypeError):  # wrong argument count for a ternary op
        _unary.elementwise(_unary.WHERE, [10], o, 0, [1], x, 0, [1], 0.0, 0.0)
    with pytest.raises(TypeError):  # where's condition must be bool
        _unary.elementwise(_unary.WHERE, [10], o, 0, [1], x, 0, [1], x, 0, [1], x, 0, [1],
                           0.0, 0.0)
    with pytest.raises(TypeError):  # read-only out
        ro = np.zeros(10, dtype=np.float32)
        ro.flags.writeable = False
        _unary.elementwise(_unary.EXP, [10], ro, 0, [1], x, 0, [1], 0.0, 0.0)
    with pytest.raises(ValueError):  # unknown op code
        _unary.elementwise(99, [10], o, 0, [1], x, 0, [1], 0.0, 0.0)
    with pytest.raises(TypeError):  # int64 buffer declared as int32
        _unary.cast([10], o, _unary.T_F32, 0, [1], np.zeros(10, np.int64), _unary.T_I32, 0,
                    [1])
    with pytest.raises(ValueError):
        _unary.cast([10], o, _unary.T_F32, 0, [1], np.zeros(10, np.int64), 99, 0, [1])
