"""The C plugin's sorting kernels (reftorch_cpu.sorting over reftorch_cpu._sort): sort,
argsort, topk and kthvalue give the reference kernels' results bit for bit -- values (NaN
payloads and the sign of zeros included) and indices (ties in the reference's stable order)
-- on every layout and dtype, do not depend on the thread count, and check their arguments
before touching memory.

Every comparison runs the same call twice on the same inputs: with the plugin, then inside
`reftorch.plugins.use_reference_kernels()`. `_sort.calls()` tells whether the C code ran.
"""
import os
import time

import numpy as np
import pytest

import reftorch

try:
    import reftorch_cpu
    from reftorch_cpu import _sort, sorting
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu._sort is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

F32, F64, I64, I32 = reftorch.float32, reftorch.float64, reftorch.int64, reftorch.int32
DTYPES = [F32, F64, I64, I32]
DTYPE_IDS = ["f32", "f64", "i64", "i32"]


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


@pytest.fixture
def threads():
    """Set the OpenMP thread count for one test (process-wide), restored afterwards."""
    previous = _sort.set_num_threads(1)
    _sort.set_num_threads(previous)
    yield _sort.set_num_threads
    _sort.set_num_threads(previous)


# ---------------------------------------------------------------------------------------------
# Inputs

def values(shape, dtype, seed, kind="normal"):
    """`normal`: mostly distinct values; `ties`: a few small integers, so most elements tie;
    `special` (floats): ties plus NaNs of several signs and payloads, +-inf, 0.0 and -0.0."""
    rng = np.random.default_rng(seed)
    np_dtype = dtype.numpy_dtype
    if kind == "normal":
        if dtype.is_floating_point:
            return np.asarray(rng.standard_normal(shape) * 100, dtype=np_dtype)
        info = np.iinfo(np_dtype)
        return rng.integers(info.min, info.max, shape, dtype=np_dtype, endpoint=True)
    a = rng.integers(-3, 4, shape).astype(np_dtype)
    if kind == "special":
        bits = {np.float32: np.uint32, np.float64: np.uint64}[np_dtype.type]
        nans = np.array([np.nan, -np.nan], dtype=np_dtype).view(bits)
        nans = np.concatenate([nans, nans | 1, nans | 5]).view(np_dtype)  # other payloads
        pool = np.concatenate([nans, np.array([np.inf, -np.inf, 0.0, -0.0], dtype=np_dtype)])
        flat = a.reshape(-1)
        where = rng.random(flat.size) < 0.4
        flat[where] = rng.choice(pool, size=int(where.sum()))
    return a


LAYOUTS = ["contiguous", "transposed", "strided", "expanded"]


def tensor(shape, dtype, seed, layout="contiguous", kind="normal"):
    """A tensor of `shape` in `layout`: a permuted copy (all dims reversed), every other
    element along the last dim of a wider one, or a stride-0 broadcast along the first
    dim."""
    if layout == "contiguous":
        return reftorch.from_numpy(values(shape, dtype, seed, kind))
    if layout == "transposed":
        return reftorch.from_numpy(values(shape[::-1], dtype, seed, kind)).permute(
            *reversed(range(len(shape))))
    if layout == "strided":
        wide = reftorch.from_numpy(values(shape[:-1] + (2 * shape[-1],), dtype, seed, kind))
        return wide[..., ::2]
    if layout == "expanded":
        row = reftorch.from_numpy(values((1,) + shape[1:], dtype, seed, kind))
        return row.expand(*shape)
    raise ValueError(layout)


def kinds(dtype):
    return ["normal", "ties", "special"] if dtype.is_floating_point else ["normal", "ties"]


# ---------------------------------------------------------------------------------------------
# Comparing

def both(fn):
    """fn() with the plugin and under the reference kernels, and how many C calls ran."""
    before = _sort.calls()
    got = fn()
    ran = _sort.calls() - before
    with reftorch.plugins.use_reference_kernels():
        expected = fn()
    return got, expected, ran


def parts(result):
    return list(result) if isinstance(result, tuple) else [result]


def assert_same(got, expected):
    """Same result type, and per tensor the same dtype, shape, strides and bytes."""
    assert type(got).__name__ == type(expected).__name__
    for g, e in zip(parts(got), parts(expected), strict=True):
        assert g.dtype == e.dtype and tuple(g.shape) == tuple(e.shape)
        if g.numel():
            assert g.stride() == e.stride()
        a, b = g.numpy(), e.numpy()
        assert a.tobytes() == b.tobytes(), f"\nplugin    {a}\nreference {b}"


def check(fn, runs_in_c=True):
    got, expected, ran = both(fn)
    assert_same(got, expected)
    assert ran == (1 if runs_in_c else 0)
    return got


# ---------------------------------------------------------------------------------------------
# sort and argsort

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sort_and_argsort_match_reference(dtype, layout):
    for kind in kinds(dtype):
        x = tensor((6, 5, 90), dtype, 1, layout, kind)
        for dim in (-1, 0, 1, -2, 2):
            for descending in (False, True):
                check(lambda: reftorch.sort(x, dim, descending))
                check(lambda: reftorch.argsort(x, dim=dim, descending=descending))
                for stable in (False, True):  # the reference is stable either way
                    check(lambda: reftorch.sort(x, dim=dim, descending=descending,
                                                stable=stable))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_sort_short_and_1d_rows(dtype):
    """Rows short enough for the insertion sort, exactly at its limit, and just past it."""
    for n in (1, 2, 3, 17, 64, 65, 300):
        for kind in kinds(dtype):
            x = tensor((n,), dtype, n, "contiguous", kind)
            for descending in (False, True):
                check(lambda: reftorch.sort(x, descending=descending))
                check(lambda: x.argsort(0, True))


def test_special_values_order_and_bits():
    """NaN above +inf (every NaN tied), -0.0 tied with 0.0: the reference's order, and each
    value comes back with its own bits (NaN payloads and signs, the sign of zero)."""
    for dtype in (F32, F64):
        x = tensor((4000,), dtype, 7, kind="special")
        result = check(lambda: reftorch.sort(x, descending=True))
        assert np.isnan(result.values.numpy()[0])
        check(lambda: reftorch.sort(x))
        check(lambda: reftorch.topk(x, 300))
        check(lambda: reftorch.topk(x, 30, largest=False))
        check(lambda: reftorch.kthvalue(x, 1234))


def test_methods_and_msort():
    x = tensor((40, 30), F32, 3, kind="ties")
    check(lambda: x.sort())
    check(lambda: x.sort(0, True))
    check(lambda: x.argsort(dim=0, descending=True))
    check(lambda: x.topk(5, 0, False))
    check(lambda: x.kthvalue(3, 0, True))
    check(lambda: reftorch.msort(x))


# ---------------------------------------------------------------------------------------------
# topk and kthvalue

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_topk_matches_reference(dtype, layout):
    """k small (heap), medium (selection by key) and large (full sort), and the ends."""
    for kind in kinds(dtype):
        x = tensor((3, 1000), dtype, 2, layout, kind)
        for k in (0, 1, 5, 64, 65, 100, 124, 125, 500, 999, 1000):
            for largest in (True, False):
                for sorted_ in (True, False):
                    check(lambda: reftorch.topk(x, k, largest=largest, sorted=sorted_))
        check(lambda: reftorch.topk(x, 2, dim=0))
        check(lambda: reftorch.topk(x, 3, dim=-2, largest=False))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_kthvalue_matches_reference(dtype, layout):
    for kind in kinds(dtype):
        x = tensor((4, 700), dtype, 4, layout, kind)
        for k in (1, 2, 100, 350, 699, 700):
            for keepdim in (False, True):
                check(lambda: reftorch.kthvalue(x, k, -1, keepdim))
        check(lambda: reftorch.kthvalue(x, 3, 0))
        check(lambda: reftorch.kthvalue(x, 4, dim=0, keepdim=True))


def test_selection_worst_cases():
    """Inputs that defeat simple pivot choices or carry long runs of equal keys: constant,
    sorted, reversed, organ-pipe and two-valued rows."""
    n = 5000
    ramp = np.arange(n)
    rows = [np.zeros(n), ramp, ramp[::-1], np.minimum(ramp, n - ramp), ramp % 2,
            np.repeat(np.arange(50), n // 50)]
    for dtype in (F64, I32):
        x = reftorch.from_numpy(np.stack(rows).astype(dtype.numpy_dtype))
        for k in (1, 10, 200, 2500, n):
            check(lambda: reftorch.topk(x, k))
            check(lambda: reftorch.topk(x, k, largest=False))
            check(lambda: reftorch.kthvalue(x, k))
        check(lambda: reftorch.sort(x, stable=True))
        check(lambda: reftorch.sort(x, descending=True))


def test_integer_extremes():
    """The order-preserving integer keys at the ends of each integer range."""
    for dtype in (I64, I32):
        info = np.iinfo(dtype.numpy_dtype)
        a = np.array([info.max, info.min, 0, -1, 1, info.min + 1, info.max - 1] * 30,
                     dtype=dtype.numpy_dtype)
        x = reftorch.from_numpy(a)
        for descending in (False, True):
            check(lambda: reftorch.sort(x, descending=descending))
        check(lambda: reftorch.topk(x, 7))
        check(lambda: reftorch.kthvalue(x, 31))


@pytest.mark.parametrize("isa", _sort.supported_isas())
def test_every_instruction_set_gives_the_same_topk(isa):
    """topk's small-k filter is compiled per instruction set: each must agree, also when
    NaNs or ties make the filter let whole blocks through."""
    previous = _sort.set_isa(isa)
    try:
        for dtype in DTYPES:
            for kind in kinds(dtype):
                x = tensor((8, 2000), dtype, 21, "contiguous", kind)
                for k in (1, 7, 64):
                    check(lambda: reftorch.topk(x, k))
                    check(lambda: reftorch.topk(x, k, largest=False))
                check(lambda: reftorch.topk(x.t(), 5, dim=0))
    finally:
        _sort.set_isa(previous)


# ---------------------------------------------------------------------------------------------
# Shapes the C code does not take, and edge shapes it does

def test_empty_and_zero_dim_decline():
    for shape, dim in (((0,), 0), ((3, 0), 1), ((0, 5), 1), ((0, 5), 0)):
        x = reftorch.zeros(shape)
        check(lambda: reftorch.sort(x, dim), runs_in_c=False)
        check(lambda: reftorch.argsort(x, dim), runs_in_c=False)
        check(lambda: reftorch.topk(x, 0, dim), runs_in_c=False)
    x = reftorch.tensor(2.5)
    check(lambda: reftorch.sort(x), runs_in_c=False)
    check(lambda: reftorch.topk(x, 1), runs_in_c=False)
    check(lambda: reftorch.kthvalue(x, 1), runs_in_c=False)


def test_k_zero_and_size_one_dims_run_in_c():
    x = tensor((5, 1, 40), F32, 5)
    check(lambda: reftorch.topk(x, 0))
    check(lambda: reftorch.topk(x, 1, dim=1))
    check(lambda: reftorch.sort(x, dim=1))
    check(lambda: reftorch.kthvalue(x, 1, dim=1))


@pytest.mark.parametrize("dtype", [reftorch.float16, reftorch.bfloat16, reftorch.bool,
                                   reftorch.uint8, reftorch.int16])
def test_other_dtypes_decline(dtype):
    x = reftorch.from_numpy(values((30, 20), F32, 6, "ties")).to(dtype)
    check(lambda: reftorch.sort(x), runs_in_c=False)
    check(lambda: reftorch.argsort(x, dim=0, descending=True), runs_in_c=False)
    if dtype is not reftorch.bool:
        check(lambda: reftorch.topk(x, 3), runs_in_c=False)
        check(lambda: reftorch.kthvalue(x, 3), runs_in_c=False)


def test_out_forms():
    x = tensor((50, 60), F64, 8, "transposed", "ties")
    for fn, outs in (
            (lambda o: reftorch.sort(x, 1, True, out=o), (F64, I64)),
            (lambda o: reftorch.sort(x, dim=0, stable=True, out=o), (F64, I64)),
            (lambda o: reftorch.topk(x, 7, 0, out=o), (F64, I64)),
            (lambda o: reftorch.kthvalue(x, 9, 1, out=o), (F64, I64)),
            (lambda o: reftorch.argsort(x, dim=1, stable=True, out=o[0]), (I64,))):
        def call():
            out = tuple(reftorch.empty(0, dtype=d) for d in outs)
            result = fn(out)
            returned = parts(result)
            assert all(r is o for r, o in zip(returned, out))
            return result
        check(call)


def test_gradients_flow_through_the_plugin():
    x = tensor((20, 30), F64, 9, kind="ties")
    for op in (lambda t: reftorch.sort(t, 1, True).values,
               lambda t: reftorch.topk(t, 4, 0).values,
               lambda t: reftorch.kthvalue(t, 5, 1).values):
        def grad():
            leaf = x.clone().requires_grad_()
            (op(leaf) * reftorch.arange(op(leaf).numel(), dtype=F64).reshape(
                op(leaf).shape)).sum().backward()
            return leaf.grad
        got, expected, ran = both(grad)
        assert ran >= 1
        assert_same(got, expected)


# ---------------------------------------------------------------------------------------------
# Threads and long rows

def test_many_rows_and_thread_count_independence(threads):
    """Rows spread over the threads (static split of 3,001 rows) and one long row sorted by
    every thread together: the same bits on 1, 2 and 3 threads, equal to the reference."""
    many = tensor((3001, 33), F32, 10, "transposed", "special")
    long_rows = tensor((2, 300_000), I64, 11, "strided", "ties")
    long_row = tensor((300_000,), F64, 12, "contiguous", "special")
    calls = [lambda: reftorch.sort(many, 0, True), lambda: reftorch.topk(many, 5, 0),
             lambda: reftorch.kthvalue(many, 17, 1), lambda: reftorch.sort(long_rows),
             lambda: reftorch.sort(long_row, descending=True), lambda: reftorch.argsort(long_row)]
    results = {}
    for n in (1, 2, 3):
        threads(n)
        results[n] = [fn() for fn in calls]
    for one, two, three in zip(results[1], results[2], results[3]):
        assert_same(two, one)
        assert_same(three, one)
    threads(2)
    for fn in calls:
        check(fn)


def test_one_million_element_rows(threads):
    """1M-element rows: one row (the row split over threads) and, transposed, as column."""
    x = tensor((1 << 20,), F32, 13, "contiguous", "special")
    for n in (1, 2):
        threads(n)
        check(lambda: reftorch.sort(x))
        check(lambda: reftorch.argsort(x, descending=True))
    check(lambda: reftorch.topk(x, 10))
    check(lambda: reftorch.kthvalue(x, 1 << 19))
    column = tensor((2, 1 << 19), I32, 14, "transposed")
    check(lambda: reftorch.sort(column, dim=0))


def test_forked_child_does_not_hang():
    """libgomp's thread pool does not survive fork(); a child must still sort big rows."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork() on this platform")
    x = tensor((400_000,), F32, 15)
    reftorch.sort(x)  # the parent has used its OpenMP threads
    pid = os.fork()
    if pid == 0:  # child: exit 0 only if the sort completes
        ok = False
        try:
            ok = bool(np.all(np.diff(reftorch.sort(x).values.numpy()) >= 0))
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
    pytest.fail("the forked child hung in a parallel sort")


# ---------------------------------------------------------------------------------------------
# The C entry point checks its arguments

def _select_args(x, out_len=None, k=None, kth_only=False):
    n = x.size
    k = n if k is None else k
    out_len = (1 if kth_only else k) if out_len is None else out_len
    values = np.empty(out_len, x.dtype)
    indices = np.empty(out_len, np.int64)
    return [x, 0, (n,), (1,), 0, False, k, kth_only, values, 0, (1,), indices, 0, (1,)]


def test_c_entry_point_rejects_bad_arguments():
    x = np.arange(10, dtype=np.float32)
    args = _select_args(x)
    _sort.select(*args)
    np.testing.assert_array_equal(args[11], np.arange(10))
    bad = [
        (ValueError, {6: 11}),                       # k > n
        (ValueError, {6: 0, 7: True}),               # kthvalue needs k >= 1
        (ValueError, {4: 1}),                        # dim out of range
        (ValueError, {1: 1}),                        # x's row runs past its buffer
        (ValueError, {3: (2,)}),                     # so does a stride of 2
        (ValueError, {9: 1}),                        # values run past their buffer
        (ValueError, {13: (-1,)}),                   # indices reach before their buffer
        (ValueError, {2: (-1,)}),                    # a negative size
        (ValueError, {2: (10, 1)}),                  # strides do not match the dims
        (TypeError, {0: np.arange(10, dtype=np.int16)}),       # an unsupported dtype
        (TypeError, {8: np.empty(10, np.float64)}),            # values of another dtype
        (TypeError, {11: np.empty(10, np.int32)}),             # indices must be int64
        (TypeError, {8: None, 11: None}),                      # nothing to write
        (TypeError, {11: np.empty(10, np.int64)[::2].copy().tobytes()}),  # read-only
    ]
    for error, changes in bad:
        trial = list(args)
        for position, value in changes.items():
            trial[position] = value
        with pytest.raises(error):
            _sort.select(*trial)
    with pytest.raises(TypeError):
        _sort.select(*args[:-1])
    with pytest.raises(ValueError):
        _sort.set_num_threads(0)


# ---------------------------------------------------------------------------------------------
# searchsorted and bucketize

def _sorted_rows(shape, dtype, seed, kind):
    """Rows sorted by the reference's own order (NaNs last), with ties for 'ties'."""
    rows = np.sort(values(shape, dtype, seed, kind), axis=-1)
    return reftorch.from_numpy(np.ascontiguousarray(rows))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("kind", ["normal", "ties", "special"])
@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("out_int32", [False, True])
def test_searchsorted_and_bucketize_match_reference(dtype, kind, right, out_int32):
    if kind == "special" and not dtype.is_floating_point:
        pytest.skip("no NaN or inf in an integer dtype")
    flat = _sorted_rows((1000,), dtype, 1, kind)
    rows = _sorted_rows((7, 33), dtype, 2, kind)
    queries = tensor((7, 50), dtype, 3, "contiguous", kind)
    strided = tensor((7, 50), dtype, 4, "transposed", kind)
    options = {"right": right, "out_int32": out_int32}
    check(lambda: reftorch.searchsorted(flat, queries, **options))
    check(lambda: reftorch.searchsorted(rows, queries, **options))
    check(lambda: reftorch.searchsorted(rows, strided, **options))
    check(lambda: reftorch.searchsorted(rows[:, ::2], queries, side="right" if right else "left",
                                        out_int32=out_int32))
    check(lambda: reftorch.searchsorted(flat[::3], queries[2, ::2], **options))   # 1-D steps
    check(lambda: reftorch.bucketize(strided, flat, **options))
    check(lambda: reftorch.bucketize(queries[0, 3], flat, **options))   # a 0-dim input


def test_searchsorted_matches_pytorch_with_the_plugin():
    torch = pytest.importorskip("torch")
    b = np.array([1.0, 2.0, 2.0, 3.0, np.nan, np.nan], np.float32)
    v = np.array([[0.0, 2.0, 2.5, np.nan, 5.0], [2.0, 3.0, -np.inf, 1.0, np.inf]], np.float32)
    for right in (False, True):
        got = reftorch.searchsorted(reftorch.from_numpy(b), reftorch.from_numpy(v), right=right)
        want = torch.searchsorted(torch.from_numpy(b), torch.from_numpy(v), right=right)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_searchsorted_threads_and_declines(threads):
    flat = _sorted_rows((4096,), F64, 5, "ties")
    queries = tensor((300, 1000), F64, 6, "contiguous", "ties")      # enough for 2 threads
    results = []
    for n in (1, 2, 3):
        threads(n)
        results.append(reftorch.searchsorted(flat, queries))
    assert_same(results[1], results[0])
    assert_same(results[2], results[0])
    threads(2)
    check(lambda: reftorch.searchsorted(flat, queries))
    # declined: a sorter, a number, mixed dtypes, float16, empty boundaries
    order = reftorch.from_numpy(np.argsort(values((50,), F32, 7)))
    unsorted = reftorch.from_numpy(values((50,), F32, 7))
    check(lambda: reftorch.searchsorted(unsorted, tensor((9,), F32, 8), sorter=order), False)
    check(lambda: reftorch.searchsorted(flat, 0.5), False)
    check(lambda: reftorch.searchsorted(flat, tensor((9,), F32, 8)), False)
    check(lambda: reftorch.searchsorted(flat.to(reftorch.float16), queries[0].to(
        reftorch.float16)), False)
    check(lambda: reftorch.searchsorted(flat[:0], queries[0]), False)


def test_search_entry_point_rejects_bad_arguments():
    b, v = np.arange(10, dtype=np.float32), np.zeros(6, np.float32)
    out = np.empty(6, np.int64)
    _sort.search(b, 2, 5, v, 3, False, out)
    np.testing.assert_array_equal(out, 0)
    bad = [
        (ValueError, {1: 3}),                          # boundaries hold only 2 rows of 5
        (ValueError, {4: 4}),                          # values hold 6, not 2 * 4
        (ValueError, {2: -1}),                         # a negative size
        (TypeError, {3: np.zeros(6, np.float64)}),     # values of another type
        (TypeError, {6: np.empty(6, np.float32)}),     # out must be int64 or int32
        (TypeError, {0: np.arange(10, dtype=np.int16)}),   # an unsupported type
        (TypeError, {6: np.empty(6, np.int64).tobytes()}),  # read-only out
    ]
    for error, changes in bad:
        trial = [b, 2, 5, v, 3, False, out]
        for position, value in changes.items():
            trial[position] = value
        with pytest.raises(error):
            _sort.search(*trial)
