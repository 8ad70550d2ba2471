"""The C plugin's indexing kernels (reftorch_cpu.indexing over reftorch_cpu._index):
index_select, embedding, gather, take, scatter (src, value, reduce), scatter_add, index_add
and put give the reference kernels' results bit for bit on every layout and dtype, raise
the reference's errors for bad indices without touching memory, and do not depend on the
thread count.

Every comparison runs the same code twice on fresh inputs: once with the plugin, once inside
`reftorch.plugins.use_reference_kernels()`. `_index.calls()` tells whether the C loop ran.
"""
import numpy as np
import pytest

import reftorch

try:
    import reftorch_cpu
    from reftorch_cpu import _index, indexing
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu._index is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

DTYPES = [reftorch.float32, reftorch.float64, reftorch.int64, reftorch.int32]
dtype_ids = ["f32", "f64", "i64", "i32"]


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


@pytest.fixture(params=["threshold", "no-threshold"])
def threshold(request, monkeypatch):
    """Run with the real decline threshold, and with none so small cases reach C too."""
    if request.param == "no-threshold":
        monkeypatch.setattr(indexing, "MIN_POSITIONS", 0)
    return request.param


@pytest.fixture
def no_threshold(monkeypatch):
    monkeypatch.setattr(indexing, "MIN_POSITIONS", 0)


# ---------------------------------------------------------------------------------------------
# Helpers

def values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype.is_floating_point:
        a = rng.standard_normal(shape) * 10
        if a.size > 4:
            a.reshape(-1)[:4] = [np.nan, -0.0, np.inf, 1e-40]
        return np.asarray(a.astype(dtype.numpy_dtype))
    return np.asarray(rng.integers(-1000, 1000, shape).astype(dtype.numpy_dtype))


def tensor(shape, dtype, seed, layout="contiguous"):
    """A fresh tensor of `shape` in the given memory layout."""
    if layout == "contiguous" or len(shape) < 2:
        if layout == "strided" and len(shape) == 1:
            return reftorch.from_numpy(values((shape[0] * 2,), dtype, seed))[::2]
        return reftorch.from_numpy(values(shape, dtype, seed))
    if layout == "transposed":
        return reftorch.from_numpy(values(shape[::-1], dtype, seed)).permute(
            *reversed(range(len(shape))))
    if layout == "strided":  # every other element of the last dim, from a wider base
        base = reftorch.from_numpy(values(shape[:-1] + (shape[-1] * 2 + 1,), dtype, seed))
        return base[..., 1::2]
    raise ValueError(layout)


def indices(shape, high, seed, low=0, dtype=np.int64, layout="contiguous"):
    rng = np.random.default_rng(seed + 1000)
    a = rng.integers(low, high, shape) if high > low else np.zeros(shape, np.int64)
    t = reftorch.from_numpy(a.astype(dtype))
    if layout == "transposed" and len(shape) >= 2:
        order = tuple(reversed(range(len(shape))))
        t = reftorch.from_numpy(np.ascontiguousarray(a.transpose(order)).astype(dtype))
        t = t.permute(*order)
    return t


def host(t):
    return np.array(t.numpy())


def assert_same(got, want):
    """Same dtype, shape and bits (nan where nan)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        got, want = got[~nan], want[~nan]
        bits = {4: np.uint32, 8: np.uint64}[got.itemsize]
        got, want = got.view(bits), want.view(bits)
    np.testing.assert_array_equal(got, want)


def run_both(case):
    """case() -> list of tensors, with the plugin and on the reference; returns C calls."""
    before = _index.calls()
    got = [host(t) for t in case()]
    ran = _index.calls() - before
    with reftorch.plugins.use_reference_kernels():
        want = [host(t) for t in case()]
    for g, w in zip(got, want):
        assert_same(g, w)
    return ran


def outcome(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return exc


def errors_match(fn, must_raise=True):
    """The plugin and the reference raise the same exception type and message (or, where
    the reference does not raise and must_raise is False, give the same result)."""
    got = outcome(fn)
    with reftorch.plugins.use_reference_kernels():
        want = outcome(fn)
    if not isinstance(want, Exception) and not must_raise:
        assert_same(host(got), host(want))
        return got
    assert isinstance(want, Exception), "the reference did not raise"
    assert type(got) is type(want) and str(got) == str(want)
    return got


# ---------------------------------------------------------------------------------------------
# Registration

@pytest.mark.parametrize("op", ["index_select", "embedding", "gather", "take", "scatter",
                                "scatter_value", "scatter_reduce_two_", "scatter_add",
                                "index_add", "put"])
def test_serves_indexing_ops(op):
    assert reftorch.plugins.serving(op, "cpu", reftorch.float32) == "cpu"
    if op != "embedding":
        assert reftorch.plugins.serving(op, "cpu", reftorch.int32) == "cpu"


def test_other_dtypes_go_to_the_reference(no_threshold):
    a = reftorch.ones(40, 40, dtype=reftorch.float16)
    before = _index.calls()
    a.index_select(0, reftorch.tensor([1, 2]))
    assert _index.calls() == before


# ---------------------------------------------------------------------------------------------
# Results: every op, dtype, layout and dim

LAYOUTS = ["contiguous", "transposed", "strided"]
SHAPE = (6, 7, 5)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_ids)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_select(dtype, layout, dim, no_threshold):
    for index_dtype in (np.int64, np.int32):
        index = indices((9,), SHAPE[dim], 1, dtype=index_dtype)  # repeats: 9 picks of <= 7
        assert run_both(lambda: [tensor(SHAPE, dtype, 0, layout).index_select(dim, index)])
    strided_index = reftorch.from_numpy(np.array([4, 0, 0, 3, 1, 2, 4, 4]))[::2]
    assert run_both(lambda: [tensor(SHAPE, dtype, 0, layout).index_select(dim, strided_index)])
    assert run_both(lambda: [tensor(SHAPE, dtype, 0, layout).index_select(
        dim, reftorch.tensor(2))])  # a 0-dim index
    assert run_both(lambda: [tensor(SHAPE, dtype, 0, layout).index_select(
        dim, reftorch.tensor([], dtype=reftorch.int64))])  # no index: empty result


def test_loop_walk_is_remembered_per_geometry(no_threshold):
    """The gather/scatter walk is merged once per (shape, strides) and reused; calls of one
    shape in other layouts, or at other offsets, still agree with the reference."""
    from reftorch_cpu import indexing
    indexing._walk.cache_clear()
    index = indices((9,), SHAPE[1], 1)
    calls = [lambda layout=layout: tensor(SHAPE, reftorch.float32, 0, layout).index_select(
        1, index) for layout in LAYOUTS]
    calls += [lambda: tensor(SHAPE, reftorch.float32, 0)[1:].index_select(1, index),
              lambda: tensor(SHAPE, reftorch.float32, 0)[:-1].index_select(1, index)]
    for call in calls + calls:
        assert run_both(lambda: [call()]) == 1
    info = indexing._walk.cache_info()
    assert info.hits >= len(calls) and info.misses <= len(calls)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_ids)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather(dtype, layout, dim, no_threshold):
    index_shape = [4, 5, 3]
    index_shape[dim] = 8  # longer than the dim: repeated indices
    for index_layout in ("contiguous", "transposed"):
        index = indices(tuple(index_shape), SHAPE[dim], 2, layout=index_layout)
        assert run_both(lambda: [tensor(SHAPE, dtype, 0, layout).gather(dim, index)])
    empty = indices((0, 5, 3), SHAPE[dim], 2)
    run_both(lambda: [tensor(SHAPE, dtype, 0, layout).gather(dim, empty)])


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_ids)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_take(dtype, layout, no_threshold):
    n = int(np.prod(SHAPE))
    for shape in [(30,), (5, 6), ()]:
        index = indices(shape, n, 3, low=-n)  # negative indices count from the end
        assert run_both(lambda: [reftorch.take(tensor(SHAPE, dtype, 0, layout), index)])
    zero_dim = reftorch.from_numpy(values((), dtype, 4))
    assert run_both(lambda: [reftorch.take(zero_dim, reftorch.tensor([0, -1, 0]))])


@pytest.mark.parametrize("dtype", [reftorch.float32, reftorch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_embedding(dtype, layout, no_threshold):
    weight = lambda: tensor((10, 6), dtype, 0, layout)
    for index_dtype in (np.int64, np.int32):
        for shape in [(7,), (3, 4), (2, 3, 2)]:
            idx = indices(shape, 10, 5, dtype=index_dtype, layout="transposed")
            assert run_both(lambda: [reftorch.nn.functional.embedding(idx, weight())])
    idx = indices((4,), 10, 6)
    assert run_both(lambda: [reftorch.nn.functional.embedding(idx, weight(), padding_idx=2)])
    assert run_both(lambda: [reftorch.embedding(weight(), reftorch.tensor(3))])


@pytest.mark.parametrize("dtype", [reftorch.float32, reftorch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_embedding_dense_backward(dtype, layout, no_threshold):
    """The weight gradient of embedding and embedding_bag: a zero table plus each index's
    row in index order, bit for bit the reference's (repeated indices, padding_idx, any
    gradient layout); scale_grad_by_freq declines."""
    from reftorch._ops.nn_embedding import embedding_dense_backward
    grad = tensor((12, 6), dtype, 7, layout)
    index = indices((12,), 5, 8)             # 5 rows of 10: repeats and untouched rows
    for padding_idx in (-1, 2):
        def case():
            with reftorch.no_grad():
                return [embedding_dense_backward(grad, index, 10, padding_idx, False)]
        assert run_both(case) == 1
    def frequency():
        with reftorch.no_grad():
            return [embedding_dense_backward(grad, index, 10, -1, True)]
    assert run_both(frequency) == 0
    weight = tensor((10, 6), dtype, 9).requires_grad_(True)
    bags = indices((12,), 10, 10)
    offsets = reftorch.tensor([0, 3, 3, 7])

    def through_autograd():
        weight.grad = None
        (reftorch.nn.functional.embedding(indices((3, 4), 10, 11), weight, padding_idx=1) *
         tensor((3, 4, 6), dtype, 12)).sum().backward()
        first = weight.grad
        weight.grad = None
        for mode in ("sum", "mean"):
            (reftorch.nn.functional.embedding_bag(bags, weight, offsets, mode=mode) *
             tensor((4, 6), dtype, 13)).sum().backward()
        return [first, weight.grad]
    assert run_both(through_autograd) >= 3


def test_embedding_dense_backward_threads(no_threshold):
    from reftorch._ops.nn_embedding import embedding_dense_backward
    grad = tensor((20000, 64), reftorch.float32, 14)
    index = indices((20000,), 3000, 15)
    results = []
    for threads in (1, 2, 3):
        previous = _index.set_num_threads(threads)
        try:
            with reftorch.no_grad():
                results.append(host(embedding_dense_backward(grad, index, 3000, -1, False)))
        finally:
            _index.set_num_threads(previous)
    assert results[1].tobytes() == results[0].tobytes() == results[2].tobytes()


SCATTERS = [
    ("scatter", lambda a, d, i, s: a.scatter(d, i, s)),
    ("scatter value", lambda a, d, i, s: a.scatter(d, i, 2.75)),
    ("scatter int value", lambda a, d, i, s: a.scatter(d, i, -3)),
    ("scatter 0-dim src", lambda a, d, i, s: a.scatter(d, i, s[(0,) * s.ndim])),
    ("scatter reduce add", lambda a, d, i, s: a.scatter(d, i, s, reduce="add")),
    ("scatter reduce multiply", lambda a, d, i, s: a.scatter(d, i, s, reduce="multiply")),
    ("scatter value multiply", lambda a, d, i, s: a.scatter(d, i, 1.5, reduce="multiply")),
    ("scatter_add", lambda a, d, i, s: a.scatter_add(d, i, s)),
    ("scatter_add_", lambda a, d, i, s: a.scatter_add_(d, i, s)),
    ("scatter_ value", lambda a, d, i, s: a.scatter_(d, i, 0.5)),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_ids)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name,fn", SCATTERS, ids=[n for n, _ in SCATTERS])
def test_scatter(name, fn, dtype, layout, dim, no_threshold):
    index_shape = [5, 6, 4]
    index_shape[dim] = 7  # more positions than the dim has: repeats collide
    index = indices(tuple(index_shape), SHAPE[dim], 7, layout="transposed")
    src = lambda: tensor((8, 8, 8), dtype, 8, layout)
    assert run_both(lambda: [fn(tensor(SHAPE, dtype, 0, layout), dim, index, src())])


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_ids)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_add(dtype, layout, dim, no_threshold):
    source_shape = list(SHAPE)
    source_shape[dim] = 11  # 11 indices into a dim of at most 7: repeats accumulate
    alphas = [1, 3, -2] if not dtype.is_floating_point else [1, 0.3, -2]
    for index_dtype in (np.int64, np.int32):
        index = indices((11,), SHAPE[dim], 9, dtype=index_dtype)
        for alpha in alphas:
            assert run_both(lambda: [tensor(SHAPE, dtype, 0, layout).index_add(
                dim, index, tensor(tuple(source_shape), dtype, 1, layout), alpha=alpha)])
    target = lambda: tensor(SHAPE, dtype, 0, layout)
    index = indices((11,), SHAPE[dim], 9)
    assert run_both(lambda: [target().index_add_(dim, index, tensor(tuple(source_shape),
                                                                     dtype, 1))])


def test_index_add_1d_and_empty(no_threshold):
    for dtype in DTYPES:
        index = indices((50,), 9, 3)
        assert run_both(lambda: [tensor((9,), dtype, 0).index_add(0, index,
                                                                  tensor((50,), dtype, 1))])
        empty = reftorch.tensor([], dtype=reftorch.int64)
        assert run_both(lambda: [tensor((9, 3), dtype, 0).index_add(
            0, empty, tensor((0, 3), dtype, 1))])


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_ids)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("accumulate", [False, True])
def test_put(dtype, layout, accumulate, no_threshold):
    n = int(np.prod(SHAPE))
    for shape in [(40,), (5, 8), (), (0,)]:  # 40 picks of 210 elements: repeats, negatives
        index = indices(shape, n, 3, low=-n, layout="transposed")
        source = lambda: tensor(shape[::-1], dtype, 4, layout)  # same count, other shape
        assert run_both(lambda: [tensor(SHAPE, dtype, 0, layout).put(
            index, source(), accumulate=accumulate)])
        assert run_both(lambda: [tensor(SHAPE, dtype, 0, layout).put_(
            index, source(), accumulate=accumulate)])
    zero_dim = lambda: reftorch.from_numpy(values((), dtype, 5))
    assert run_both(lambda: [zero_dim().put(reftorch.tensor([0, -1, 0]), tensor(
        (3,), dtype, 6), accumulate=accumulate)])


def test_small_calls_decline(threshold):
    """Below MIN_POSITIONS the reference serves (the C loop does not run)."""
    a = tensor((4, 4), reftorch.float32, 0)
    before = _index.calls()
    a.index_select(0, reftorch.tensor([1, 2]))
    ran = _index.calls() - before
    assert ran == (1 if threshold == "no-threshold" else 0)


# ---------------------------------------------------------------------------------------------
# Large inputs: parallel loops, and results that do not depend on the thread count

BIG_CASES = {
    "index_select": lambda: [tensor((4000, 64), reftorch.float32, 0).index_select(
        0, indices((3000,), 4000, 1))],
    "embedding": lambda: [reftorch.embedding(tensor((500, 48), reftorch.float64, 0),
                                             indices((40, 60), 500, 2))],
    "gather": lambda: [tensor((300, 400), reftorch.float32, 0, "transposed").gather(
        1, indices((300, 500), 400, 3))],
    "take": lambda: [reftorch.take(tensor((300, 400), reftorch.int32, 0),
                                   indices((200000,), 120000, 4, low=-120000))],
    # few distinct targets: every output element gets many float contributions
    "scatter_add dim 0": lambda: [tensor((8, 3000), reftorch.float32, 0).scatter_add(
        0, indices((64, 3000), 8, 5), tensor((64, 3000), reftorch.float32, 6))],
    "scatter_add dim 1": lambda: [tensor((300, 16), reftorch.float32, 0).scatter_add(
        1, indices((300, 600), 16, 5), tensor((300, 600), reftorch.float32, 6))],
    "scatter_add 1-D": lambda: [tensor((100,), reftorch.float32, 0).scatter_add(
        0, indices((200000,), 100, 5), tensor((200000,), reftorch.float32, 6))],
    "scatter": lambda: [tensor((50, 3000), reftorch.int64, 0).scatter(
        0, indices((400, 3000), 50, 5), tensor((400, 3000), reftorch.int64, 6))],
    "index_add rows": lambda: [tensor((100, 16), reftorch.float32, 0).index_add(
        0, indices((20000,), 100, 7), tensor((20000, 16), reftorch.float32, 8), alpha=0.5)],
    "index_add 1-D": lambda: [tensor((64,), reftorch.float64, 0).index_add(
        0, indices((200000,), 64, 7), tensor((200000,), reftorch.float64, 8))],
    "index_add dim 1": lambda: [tensor((400, 30), reftorch.float32, 0, "transposed").index_add(
        1, indices((500,), 30, 7, dtype=np.int32), tensor((400, 500), reftorch.float32, 8))],
    # 200,000 writes into 1,000 elements: every element is written (or added to) many times
    "put": lambda: [tensor((40, 25), reftorch.float64, 0, "transposed").put(
        indices((200000,), 1000, 9, low=-1000), tensor((200000,), reftorch.float64, 10))],
    "put accumulate": lambda: [tensor((40, 25), reftorch.float32, 0).put(
        indices((400, 500), 1000, 9, low=-1000), tensor((200000,), reftorch.float32, 10),
        accumulate=True)],
}


@pytest.mark.parametrize("name", list(BIG_CASES))
def test_large_inputs_match_and_ignore_thread_count(name):
    case = BIG_CASES[name]
    assert run_both(case) == 1
    previous = _index.set_num_threads(1)
    try:
        one = [host(t) for t in case()]
        _index.set_num_threads(2)
        two = [host(t) for t in case()]
        _index.set_num_threads(3)
        three = [host(t) for t in case()]
    finally:
        _index.set_num_threads(previous)
    for a, b, c in zip(one, two, three):
        assert_same(b, a)
        assert_same(c, a)


# ---------------------------------------------------------------------------------------------
# Bad indices: the reference's exception and message, and nothing written

BAD = [
    ("index_select", lambda a, i: a.index_select(0, i)),
    ("index_select dim 1", lambda a, i: a.index_select(1, i)),
    ("embedding", lambda a, i: reftorch.embedding(a, i)),
    ("gather", lambda a, i: a.gather(0, i.reshape(-1, 1).expand(-1, 3))),
    ("take", lambda a, i: reftorch.take(a[:, :1], i)),  # 5 elements, read in flat order
    ("put", lambda a, i: a[:, :1].put(i, a.new_ones(i.numel()), accumulate=True)),
    ("scatter", lambda a, i: a.scatter(0, i.reshape(-1, 1).expand(-1, 3), 1.0)),
    ("scatter_add", lambda a, i: a.scatter_add(0, i.reshape(-1, 1).expand(-1, 3),
                                               a.new_ones(i.numel(), 3))),
    ("index_add", lambda a, i: a.index_add(0, i, a.new_ones(i.numel(), a.shape[1]))),
]


@pytest.mark.parametrize("name,fn", BAD, ids=[n for n, _ in BAD])
@pytest.mark.parametrize("bad", [5, 7, -6, -1, 200, -200])
def test_bad_indices_raise_like_the_reference(name, fn, bad, no_threshold):
    a = tensor((5, 6), reftorch.float32, 0)
    index = reftorch.tensor([0, 4, bad, 2, 9 if bad != -1 else 1])
    errors_match(lambda: fn(a, index), must_raise=name not in ("take", "put"))  # they wrap -1


def kernel_of(op_name):
    from reftorch import _dispatch
    return _dispatch.get_op(op_name).kernels[("cpu", reftorch.float32)][-1][1]


F32 = (reftorch.float32,) * 3


@pytest.mark.parametrize("op,inputs,params,error", [
    ("index_select", lambda a, i: (a, i), {"dim": 0}, "index out of range in self"),
    ("embedding", lambda a, i: (a, i), {}, "index out of range in self"),
    ("gather", lambda a, i: (a, i.reshape(-1, 1).expand(-1, 6)), {"dim": 0},
     "index 9 is out of bounds for dimension 0 with size 5"),
    ("take", lambda a, i: (a, i * 4 - 5), {}, "out of range: tried to access index 31 on "
                                              "a tensor of 30 elements."),
    ("put", lambda a, i: (a, i * 4 - 5, a.new_ones(4)), {"accumulate": True},
     "out of range: tried to access index 31 on a tensor of 30 elements."),
    ("scatter_add", lambda a, i: (a, i.reshape(-1, 1).expand(-1, 6),
                                  a.new_ones(4, 6)), {"dim": 0},
     "index 9 is out of bounds for dimension 0 with size 5"),
    ("index_add", lambda a, i: (a, i, a.new_ones(4, 6)), {"dim": 0, "alpha": 1},
     "index 9 is out of bounds for dimension 0 with size 5"),
])
def test_the_c_loop_checks_every_index(op, inputs, params, error, no_threshold):
    """Called directly (no checks in the public function first), the kernel's C loop still
    refuses a bad index, with the op's message, before reading or writing through it."""
    a = tensor((5, 6), reftorch.float32, 0)
    index = reftorch.tensor([0, 4, 9, 2])
    kernel = kernel_of(op)
    args = inputs(a, index)
    snapshot = [host(t) for t in args]
    before = _index.calls()
    with pytest.raises((IndexError, RuntimeError)) as info:
        kernel(None, args, F32, params)
    assert str(info.value) == error
    assert not isinstance(info.value, _index.IndexOutOfBounds)  # translated to the op's own
    assert _index.calls() == before + 1  # it was the C loop that refused
    for t, s in zip(args, snapshot):
        assert_same(host(t), s)


@pytest.mark.parametrize("fn", [
    lambda t, i: t.index_add_(0, i, t.new_ones(i.numel(), 6)),
    lambda t, i: t.scatter_add_(0, i.reshape(-1, 1).expand(-1, 6), t.new_ones(4, 6)),
    lambda t, i: t.scatter_(0, i.reshape(-1, 1).expand(-1, 6), 3.0),
], ids=["index_add_", "scatter_add_", "scatter_"])
def test_in_place_forms_leave_the_target_alone_on_error(fn, no_threshold):
    target = tensor((5, 6), reftorch.float32, 0)
    before = host(target)
    errors_match(lambda: fn(target, reftorch.tensor([0, 1, 5, 2])))
    assert_same(host(target), before)


# ---------------------------------------------------------------------------------------------
# The raw C entry points check their arguments

def test_c_gather_checks_bounds_and_types():
    out = np.zeros(4, np.float32)
    src = np.arange(10, dtype=np.float32)
    index = np.array([0, 1, 2, 3])
    _index.gather([4], out, 0, [1], src, 0, [0], 1, 10, index, 0, [1], False)
    np.testing.assert_array_equal(out, [0, 1, 2, 3])
    with pytest.raises(ValueError):  # index_size 11 reaches past src's 10 elements
        _index.gather([4], out, 0, [1], src, 0, [0], 1, 11, index, 0, [1], False)
    with pytest.raises(ValueError):  # out too short for the walk
        _index.gather([5], out, 0, [1], src, 0, [0], 1, 10, np.zeros(5, np.int64), 0, [1],
                      False)
    with pytest.raises(TypeError):  # mixed element types
        _index.gather([4], out, 0, [1], src.astype(np.float64), 0, [0], 1, 10, index, 0, [1],
                      False)
    with pytest.raises(TypeError):  # float indices
        _index.gather([4], out, 0, [1], src, 0, [0], 1, 10, index.astype(np.float64), 0, [1],
                      False)
    with pytest.raises(_index.IndexOutOfBounds) as info:
        _index.gather([4], out, 0, [1], src, 0, [0], 1, 10, np.array([0, 10, -1, 3]), 0, [1],
                      False)
    assert info.value.args[1] == 10 and isinstance(info.value, IndexError)


@pytest.mark.parametrize("bad", [5, -1, 2**40, -2**40])
def test_c_scatter_never_writes_through_a_bad_index(bad):
    """The C scatter checks each index as it reads it. The 5 out elements sit between
    sentinels in a larger buffer, where the bad index would land (5: just past the end, -1:
    just before): they stay as they were. (Other out elements may already hold their
    updates: the Python side scatters into a fresh copy it drops on error.)"""
    buffer = np.full(9, 7.0)
    src = np.ones(4, np.float64)
    with pytest.raises(_index.IndexOutOfBounds) as info:
        _index.scatter([4], buffer, 2, [0], 1, 5, src, 0, [1], np.array([0, 4, bad, 1]), 0,
                       [1], _index.ADD, 1)
    assert info.value.args[1] == bad
    np.testing.assert_array_equal(buffer[:2], 7.0)
    np.testing.assert_array_equal(buffer[7:], 7.0)


def test_c_scatter_checks_bounds_and_types():
    out = np.zeros(5, np.float64)
    src = np.ones(4, np.float64)
    with pytest.raises(ValueError):  # index_size 6 would reach past out
        _index.scatter([4], out, 0, [0], 1, 6, src, 0, [1], np.array([0, 1, 2, 3]), 0, [1],
                       _index.ADD, 1)
    with pytest.raises(TypeError):  # read-only out
        ro = out.copy()
        ro.flags.writeable = False
        _index.scatter([4], ro, 0, [0], 1, 5, src, 0, [1], np.array([0, 1, 2, 3]), 0, [1],
                       _index.ADD, 1)
    with pytest.raises(ValueError):
        _index.scatter([4], out, 0, [0], 1, 5, src, 0, [1], np.array([0, 1, 2, 3]), 0, [1],
                       7, 1)
    _index.scatter([4], out, 0, [0], 1, 5, src, 0, [1], np.array([0, 4, 4, 1]), 0, [1],
                   _index.ADD, 2)
    np.testing.assert_array_equal(out, [2, 2, 0, 0, 4])


# ---------------------------------------------------------------------------------------------
# The AVX-512 paths (8 indices per compare and gather, whole embedding rows) and the scalar
# loops give the same results and the same errors

ISA_CASES = {
    "gather dim 1": lambda: [tensor((37, 203), reftorch.float32, 0).gather(
        1, indices((37, 301), 203, 11))],
    "gather dim 0 f64 int32 index": lambda: [tensor((45, 61), reftorch.float64, 0).gather(
        0, indices((83, 61), 45, 12))],
    "gather dim 1 int32 values, transposed index": lambda: [
        tensor((29, 50), reftorch.int32, 0).gather(
            1, indices((29, 77), 50, 13, layout="transposed"))],
    "gather dim 0 int64 values, strided source": lambda: [
        tensor((40, 33), reftorch.int64, 0, "strided").gather(0, indices((71, 33), 40, 14))],
    "take": lambda: [reftorch.take(tensor((30, 40), reftorch.float32, 0),
                                   indices((1003,), 1200, 15, low=-1200))],
    "embedding rows of 16": lambda: [reftorch.embedding(
        tensor((300, 16), reftorch.float32, 0), indices((40, 25), 300, 16))],
    "embedding rows of 21 (a masked tail)": lambda: [reftorch.embedding(
        tensor((300, 21), reftorch.float32, 0), indices((997,), 300, 17, dtype=np.int32))],
    "embedding f64 rows of 5": lambda: [reftorch.embedding(
        tensor((50, 5), reftorch.float64, 0), indices((1001,), 50, 18))],
    "index_select rows of 70": lambda: [tensor((90, 70), reftorch.float32, 0).index_select(
        0, indices((333,), 90, 19))],
}


@pytest.fixture(params=_index.supported_isas())
def each_isa(request):
    previous = _index.set_isa(request.param)
    yield request.param
    _index.set_isa(previous)


@pytest.mark.parametrize("name", list(ISA_CASES))
def test_each_instruction_set_matches_the_reference(name, each_isa, no_threshold):
    case = ISA_CASES[name]
    assert run_both(case) == 1
    previous = _index.set_num_threads(1)
    try:
        one = [host(t) for t in case()]
    finally:
        _index.set_num_threads(previous)
    assert_same(host(case()[0]), one[0])


VECTOR_BAD = [
    ("gather dim 1", lambda a, i: a.gather(1, i.reshape(1, -1).expand(3, -1))),
    ("gather dim 0", lambda a, i: a.gather(0, i.reshape(-1, 1).expand(-1, 3))),
    ("embedding", lambda a, i: reftorch.embedding(a, i)),
    ("take", lambda a, i: reftorch.take(a[:1], i)),  # 20 elements
]


@pytest.mark.parametrize("name,fn", VECTOR_BAD, ids=[n for n, _ in VECTOR_BAD])
@pytest.mark.parametrize("where", [0, 5, 7, 8, 13, 16, 19, 24, 31, 32, 39, 43])
def test_a_bad_index_anywhere_in_a_group_of_8_raises(name, fn, where, each_isa,
                                                     no_threshold):
    """A bad index at each lane of the first and later groups of 8 and in the scalar tail
    (44 indices: two blocks of 16, run as two groups of 8 each, and a tail of 12: one group
    of 8 and 4 alone), as the first, or with another bad one after it: the reference's
    error, naming the first."""
    a = tensor((20, 20), reftorch.float32, 0)
    for bad, later in [(20, None), (-21, None), (2**40, 25), (-1, -30)]:
        raw = np.random.default_rng(where).integers(0, 20, 44)
        raw[where] = bad
        if later is not None and where + 1 < 44:
            raw[where + 1:] = later
        index = reftorch.from_numpy(raw)
        errors_match(lambda: fn(a, index), must_raise=name != "take" or bad != -1)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_large_calls_name_the_first_bad_index_on_any_thread_count(threads):
    """With two bad indices far apart (in different threads' shares), every op names the
    first in row-major order."""
    previous = _index.set_num_threads(threads)
    try:
        raw = np.random.default_rng(0).integers(0, 100, 60000)
        raw[41000], raw[52000], raw[59000] = 100, -101, 10**6
        index = reftorch.from_numpy(raw)
        a = tensor((100, 4), reftorch.float32, 1)
        for fn in [lambda: reftorch.embedding(a, index),
                   lambda: a.index_add(0, index, a.new_ones(60000, 4)),
                   lambda: tensor((100,), reftorch.float32, 2).index_add(
                       0, index, reftorch.ones(60000)),
                   lambda: tensor((100, 600), reftorch.float32, 3).gather(
                       1, index.reshape(100, 600) % 600 + (index.reshape(100, 600) >= 100) * 600),
                   lambda: a.scatter_add(0, index.reshape(-1, 1).expand(-1, 4),
                                         a.new_ones(60000, 4))]:
            errors_match(fn)
    finally:
        _index.set_num_threads(previous)


GUARD_PAGE_SCRIPT = r"""
import ctypes, mmap, sys
import numpy as np
from reftorch_cpu import _index
_index.set_isa(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PAGE = mmap.PAGESIZE

def before_guard(n, dtype):
    '''n elements ending exactly where an unreadable page begins.'''
    region = mmap.mmap(-1, 3 * PAGE)
    base = np.frombuffer(region, np.uint8)
    assert libc.mprotect(base.ctypes.data + 2 * PAGE, PAGE, 0) == 0  # PROT_NONE
    size = n * np.dtype(dtype).itemsize
    return base[2 * PAGE - size:2 * PAGE].view(dtype), region

for dtype in (np.float32, np.float64):
    rows, cols = 21, 19  # 21 x 19 elements end at the guard page
    src, keep = before_guard(rows * cols, dtype)
    src[:] = np.arange(rows * cols)
    m = src.reshape(rows, cols)
    rng = np.random.default_rng(0)
    # gather along dim 1 (runs of 35 indices: 4 groups of 8 and a tail), the last index valid
    index = rng.integers(0, cols, (rows, 35)); index[-1, :] = cols - 1
    out = np.empty(rows * 35, dtype)
    _index.gather([rows, 35], out, 0, [35, 1], src, 0, [cols, 0], 1, cols, index.reshape(-1),
                  0, [35, 1], False)
    assert (out.reshape(rows, 35) == np.take_along_axis(m, index, 1)).all()
    # gather along dim 0, last row picked everywhere in the last run
    index = rng.integers(0, rows, (30, cols)); index[-1, :] = rows - 1
    out = np.empty(30 * cols, dtype)
    _index.gather([30, cols], out, 0, [cols, 1], src, 0, [0, 1], cols, rows, index.reshape(-1),
                  0, [cols, 1], False)
    assert (out.reshape(30, cols) == np.take_along_axis(m, index, 0)).all()
    # whole rows (embedding): rows of 19 elements, a masked tail at the guard page
    index = rng.integers(0, rows, 40); index[::3] = rows - 1
    out = np.empty(40 * cols, dtype)
    _index.gather([40, cols], out, 0, [cols, 1], src, 0, [0, 1], cols, rows, index, 0, [1, 0],
                  False)
    assert (out.reshape(40, cols) == m[index]).all()
    # a bad index right after the last valid one: an error, no read past the page
    index = np.full(40, rows - 1); index[17] = rows
    try:
        _index.gather([40, cols], out, 0, [cols, 1], src, 0, [0, 1], cols, rows, index, 0,
                      [1, 0], False)
        raise SystemExit("no error")
    except _index.IndexOutOfBounds:
        pass
print("ok")
"""


@pytest.mark.parametrize("isa", _index.supported_isas())
def test_vector_loops_read_nothing_past_the_source(isa):
    """The source ends where an unreadable page begins: gathers and row copies that reach its
    last elements (and masked tails) must not touch the page (a crash would fail this)."""
    import os
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", GUARD_PAGE_SCRIPT, isa], capture_output=True,
                            text=True, env=dict(os.environ), timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# Tensor.op_ written in place (reftorch._dispatch.call_in_place)

IN_PLACE = {
    "index_add_": lambda x, i, s: x.index_add_(0, i, s, alpha=2.0),
    "scatter_": lambda x, i, s: x.scatter_(0, i.unsqueeze(1).expand(-1, 3), s[:, :3]),
    "scatter_add_": lambda x, i, s: x.scatter_add_(0, i.unsqueeze(1).expand(-1, 3), s[:, :3]),
    "put_": lambda x, i, s: x.put_(i * 5 - 7, s[:, 0], accumulate=True),
}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_ops_write_the_tensor_itself(name):
    """Served in place: the same storage, one C call, the version bumped, and the
    reference's bits (which computes a new result and copies it in)."""
    fn = IN_PLACE[name]
    index = indices((600,), 100, 20)
    source = tensor((600, 5), reftorch.float32, 21)

    def run():
        x = tensor((100, 5), reftorch.float32, 22)
        storage, version = x._storage, x._version
        before = _index.calls()
        assert fn(x, index, source) is x
        return x, storage, version, _index.calls() - before
    x, storage, version, ran = run()
    assert x._storage is storage and x._version > version and ran == 1
    with reftorch.plugins.use_reference_kernels():
        expected = run()[0]
    assert_same(host(x), host(expected))


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_ops_leave_the_tensor_untouched_on_a_bad_index(name):
    fn = IN_PLACE[name]
    x = tensor((100, 5), reftorch.float32, 23)
    before = host(x)
    bad = indices((600,), 100, 24)
    bad[300] = 1000                     # out of range for every op here
    errors_match(lambda: fn(tensor((100, 5), reftorch.float32, 23), bad,
                            tensor((600, 5), reftorch.float32, 25)))
    with pytest.raises((IndexError, RuntimeError)):
        fn(x, bad, tensor((600, 5), reftorch.float32, 25))
    assert_same(host(x), before)


def test_in_place_declines_what_it_cannot_write_safely():
    """A source that is a view of the target, a non-contiguous target: computed out of place
    and copied in, as the reference does (the results are the reference's)."""
    index = indices((600,), 50, 26)

    def overlapping():
        x = tensor((100, 5), reftorch.float32, 27)
        return [x.index_add_(0, index % 50, x[50:].repeat(12, 1))] + \
               [x.index_add_(0, index[:50], x[:50])]

    def strided():
        x = tensor((100, 10), reftorch.float32, 28)[:, ::2]
        return [x.index_add_(0, index, tensor((600, 5), reftorch.float32, 29))]
    run_both(overlapping)
    run_both(strided)


def test_in_place_keeps_autograd_right():
    w = tensor((100, 5), reftorch.float32, 30).requires_grad_(True)
    s = tensor((600, 5), reftorch.float32, 31).requires_grad_(True)
    index = indices((600,), 100, 32)

    def grads():
        for t in (w, s):
            t.grad = None
        y = (w * 2).index_add_(0, index, s * 3)
        (y * y).sum().backward()
        return [w.grad, s.grad]
    assert run_both(grads) >= 1


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_ids)
def test_index_put_with_one_index_vector(dtype, no_threshold):
    """x[idx] = v and x.index_put_((idx,), v, accumulate=True): repeated and negative
    indices, v a number, a row, full values; in place and out of place; the reference's
    bits (last write wins on a repeated index, sums in index order)."""
    index = indices((40,), 20, 40, low=-20)        # repeats, negative positions

    def cases():
        results = []
        for values in (tensor((40, 6), dtype, 41), tensor((6,), dtype, 42),
                       tensor((1, 1, 6), dtype, 43)):
            x = tensor((20, 6), dtype, 44)
            x[index] = values
            y = tensor((20, 6), dtype, 45)
            y.index_put_((index,), values, accumulate=True)
            z = reftorch.index_put(tensor((20, 6), dtype, 46), (index,), values, True)
            results += [x, y, z]
        w = tensor((30,), dtype, 47)
        w[indices((50,), 30, 48)] = 2
        return results + [w]
    assert run_both(cases) == 10


def test_index_put_declines_what_it_does_not_serve(no_threshold):
    x = tensor((20, 6), reftorch.float32, 50)
    rows, cols = indices((5,), 20, 51), indices((5,), 6, 52)

    def cases():
        a, b, c = x.clone(), x.clone(), x.clone()
        a[rows, cols] = 1.0                                        # two index vectors
        b[rows] = b[rows.flip(0)]                                  # values read from b
        c.index_put_((rows,), tensor((5, 6), reftorch.float64, 53).float())
        return [a, b, c]
    run_both(cases)
    errors_match(lambda: x.clone().index_put_((rows,), tensor((5, 4), reftorch.float32, 54)))


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_ids)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32], ids=["i64", "i32"])
def test_index_copy_and_index_fill(dtype, index_dtype, no_threshold):
    """Slices along a dim written in index order (repeated and negative indices), the
    source's or one value (a number or a 0-dim tensor), in place and out of place: the
    reference's bits; a bad index raises the reference's IndexError and leaves the tensor."""
    index = indices((30,), 12, 60, low=-12, dtype=index_dtype)

    def cases():
        x = tensor((12, 7), dtype, 61)
        y = tensor((5, 12, 3), dtype, 62)
        results = [x.index_copy(0, index, tensor((30, 7), dtype, 63)),
                   y.index_copy_(1, index, tensor((5, 30, 3), dtype, 64)),
                   x.index_fill(1, index % 7, 3),
                   y.index_fill_(1, index, reftorch.tensor(-2).to(dtype))]
        return results + [y]
    assert run_both(cases) == 4
    bad = indices((30,), 12, 65, dtype=index_dtype)
    bad[3] = 12
    x = tensor((12, 7), dtype, 66)
    before = host(x)
    errors_match(lambda: tensor((12, 7), dtype, 66).index_copy_(0, bad,
                                                                tensor((30, 7), dtype, 67)))
    errors_match(lambda: tensor((12, 7), dtype, 66).index_fill_(0, bad, 1))
    with pytest.raises(IndexError):
        x.index_fill_(0, bad, 1)
    assert_same(host(x), before)
