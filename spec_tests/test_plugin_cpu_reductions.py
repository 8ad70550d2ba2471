"""The C plugin's reductions (reftorch_cpu.reductions over _reduce) and fused nn rows
(reftorch_cpu.nn_rows over _nn_rows) against the reference kernels.

Every comparison runs the same call twice on the same inputs: with the plugin, then inside
`reftorch.plugins.use_reference_kernels()`. The C call counters tell whether C really ran.
Extremes, their indices and cumsum must be bit-equal; sums (sum, mean, var, std,
logsumexp) use a fixed blocked pairwise order that differs from NumPy's, so they are checked
within a bound tied to the number of summed elements, and against a float64 (or extended)
exact sum. The row kernels' documented bounds (nn_rows.py) are checked here.
"""
import math

import numpy as np
import pytest

import reftorch

try:
    import reftorch_cpu
    from reftorch_cpu import _nn_rows, _reduce, nn_rows
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

F = reftorch.nn.functional
F32, F64 = reftorch.float32, reftorch.float64
DTYPES = [F32, F64]


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


# ---------------------------------------------------------------------------------------------
# Helpers

def values(shape, dtype, seed, special=False, ties=False):
    """Normal values (or small integers with many ties); `special` mixes in inf, -inf, NaN."""
    rng = np.random.default_rng(seed)
    if ties:
        a = rng.integers(-3, 4, shape).astype(dtype.numpy_dtype)
    else:
        a = np.asarray(rng.standard_normal(shape) * 3, dtype=dtype.numpy_dtype)
    if special and a.size:
        flat = a.reshape(-1)
        where = rng.choice(flat.size, size=min(flat.size, 6), replace=False)
        flat[where] = [np.inf, -np.inf, np.nan, np.inf, -np.inf, np.nan][:len(where)]
    return a


LAYOUTS = ["contiguous", "transposed", "strided", "expanded"]


def tensor(shape, dtype, seed, layout="contiguous", **kw):
    """A tensor of `shape` in `layout`: a transposed copy, every other column of a wider
    one, or a stride-0 broadcast of one row."""
    if layout == "contiguous":
        return reftorch.from_numpy(values(shape, dtype, seed, **kw))
    if layout == "transposed":
        return reftorch.from_numpy(values(shape[::-1], dtype, seed, **kw)).permute(
            *reversed(range(len(shape))))
    if layout == "strided":
        wide = reftorch.from_numpy(values(shape[:-1] + (2 * shape[-1],), dtype, seed, **kw))
        return wide[..., ::2]
    if layout == "expanded":
        row = reftorch.from_numpy(values((1,) + shape[1:], dtype, seed, **kw))
        return row.expand(*shape)
    raise ValueError(layout)


def both(fn, counter):
    """fn() with the plugin and under the reference kernels, and how many C calls ran."""
    before = counter()
    got = fn()
    ran = counter() - before
    with reftorch.plugins.use_reference_kernels():
        expected = fn()
    return got, expected, ran


def arrays(result):
    items = result if isinstance(result, tuple) else (result,)
    return [t.numpy() for t in items]


def same_clone_bits(a, b):
    """Bit-equal results of two instruction-set clones, except which NaN a NaN result is: where
    two different NaNs meet (an input NaN and one made by inf - inf), the one an addition keeps
    depends on the operand order the compiler chose (IEEE 754 and C leave it open), so clones
    built differently (the sanitizer build) may keep a NaN of the other sign."""
    nan = np.isnan(a)
    return (np.array_equal(nan, np.isnan(b)) and
            a[~nan].tobytes() == b[~nan].tobytes())


def assert_same(got, expected):
    for g, e in zip(arrays(got), arrays(expected)):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, e)


def sum_bound(x, dims, dtype):
    """The error bound of a blocked pairwise sum: eps * (depth) * sum |x| per output."""
    a = np.abs(x.numpy().astype(np.float64))
    n = a.size if dims is None else math.prod(a.shape[d] for d in dims)
    depth = 32 + math.log2(max(n, 2))
    eps = np.finfo(dtype.numpy_dtype).eps
    return eps * depth * np.sum(a, axis=dims), n


DIM_CASES = [None, (0,), (1,), (0, 1), (2,), (1, 2)]


# ---------------------------------------------------------------------------------------------
# Reductions

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dims", DIM_CASES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_and_mean(dtype, layout, dims, keepdim):
    x = tensor((6, 40, 33), dtype, 1, layout)
    for op in (reftorch.sum, reftorch.mean):
        call = (lambda: op(x)) if dims is None else (lambda: op(x, dims, keepdim=keepdim))
        got, expected, ran = both(call, _reduce.calls)
        g, e = arrays(got)[0], arrays(expected)[0]
        assert g.shape == e.shape and g.dtype == e.dtype
        bound, n = sum_bound(x, dims, dtype)
        if op is reftorch.mean:
            bound = bound / n
        bound = bound.reshape(g.shape) if np.ndim(bound) else bound
        exact = np.sum(x.numpy().astype(np.longdouble), axis=dims,
                       keepdims=keepdim and dims is not None)
        if op is reftorch.mean:
            exact = exact / n
        assert np.all(np.abs(g - e) <= 2 * bound + np.finfo(g.dtype).tiny)
        assert np.all(np.abs(g.astype(np.longdouble) - exact) <= bound + np.finfo(g.dtype).tiny)
        if layout in ("contiguous", "transposed"):
            assert ran == 1  # adjacent dims of a dense tensor merge into one reduced run


def test_sum_reduces_to_rows_columns_and_everything_in_c():
    x = tensor((64, 300), F32, 2)
    for call in (lambda: x.sum(), lambda: x.sum(1), lambda: x.sum(0), lambda: x.sum(-1, True),
                 lambda: x.t().sum(0), lambda: x[:, ::3].sum(1)):
        got, expected, ran = both(call, _reduce.calls)
        assert ran == 1
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-4)


def test_geometry_is_remembered_per_call_shape():
    """The (O, I, R) geometry and result shape are worked out once per (layout, dims,
    keepdim, in_order) and reused: same answer as worked out afresh, bounded memory, and a
    declined geometry is remembered as declined. Calls of one layout at other offsets, and of
    one shape in other layouts, still agree with the reference."""
    from reftorch_cpu import reductions
    plan = reductions._plan
    plan.cache_clear()
    x = tensor((6, 40, 33), F32, 4)
    for dims, keepdim in [((0,), False), ((2,), True), (None, False), ((0, 2), False),
                          ((1, 2), False), ((0,), True)]:
        first = plan(x._shape, x._strides, dims, keepdim, False)
        fresh = reductions._loop_geometry(x._shape, x._strides, dims, False)
        assert (first is None) == (fresh is None) and (first is None or first[0] == fresh)
        assert plan(x._shape, x._strides, dims, keepdim, False) is first
        assert plan.cache_info().currsize <= plan.cache_info().maxsize == 4096
    plan.cache_clear()
    base = tensor((7, 300), F32, 5)
    for call in (lambda: base[1:].sum(0), lambda: base[:-1].sum(0), lambda: base.t().sum(0),
                 lambda: base.sum(0), lambda: base[:, ::2].sum(0), lambda: base[:, 1::2].sum(0)):
        got, expected, ran = both(call, _reduce.calls)
        assert ran == 1
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-4)


def test_unmergeable_dims_small_empty_and_zero_dim_decline():
    cases = [lambda: tensor((6, 40, 33), F32, 3).sum((0, 2)),   # dims that do not merge
             lambda: tensor((4, 5), F32, 3).sum(),               # below MIN_NUMEL
             lambda: tensor((0, 3000), F32, 3).sum(1),           # empty input
             lambda: tensor((3000, 0), F32, 3).sum(1),           # empty reduction
             lambda: reftorch.tensor(2.5).sum(),                 # 0-dim
             lambda: tensor((50, 60), F32, 3).sum(dtype=reftorch.float64),
             lambda: tensor((50, 60), F32, 3).to(reftorch.int32).sum()]
    for call in cases:
        got, expected, ran = both(call, _reduce.calls)
        assert ran == 0
        assert_same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("special", [False, True])
def test_extremes_are_exact(dtype, layout, special):
    for ties in (False, True):
        x = tensor((37, 70), dtype, 4, layout, special=special, ties=ties)
        calls = [lambda: x.amax(), lambda: x.amin(), lambda: x.max(), lambda: x.min(),
                 lambda: x.amax(1), lambda: x.amin(0, keepdim=True), lambda: x.amax((0, 1)),
                 lambda: x.max(1), lambda: x.max(0, keepdim=True), lambda: x.min(1),
                 lambda: x.min(-2), lambda: x.argmax(1), lambda: x.argmin(0, keepdim=True),
                 lambda: x.argmax(), lambda: x.argmin(), lambda: x.argmax(keepdim=True)]
        for call in calls:
            got, expected, ran = both(call, _reduce.calls)
            assert_same(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_extremes_find_planted_nans_infs_and_zeros_on_every_isa(dtype):
    """Rows around the vector widths (the runs start from the last vector and overlap, and
    the fast max/min pass reruns exactly when it meets a NaN) with a NaN, two NaNs, both
    infinities, or signed zeros planted at random places: equal to the reference on every
    instruction set the CPU has."""
    rng = np.random.default_rng(7)
    previous = _reduce.isa()
    try:
        for isa in _reduce.supported_isas():
            _reduce.set_isa(isa)
            for length in (1, 3, 8, 15, 16, 17, 33, 64, 65, 257, 1000):
                a = values((25, length), dtype, length)
                for row in range(a.shape[0]):
                    at = rng.integers(length, size=2)
                    planted = [[np.nan, a[row, at[1]]], [np.nan, np.nan], [np.inf, -np.inf],
                               [-0.0, 0.0], [a[row, at[0]], a[row, at[1]]]][row % 5]
                    if row % 5 == 3:
                        a[row] = 0.0
                    a[row, at] = planted
                x = reftorch.from_numpy(a)
                for call in (lambda: x.amax(1), lambda: x.amin(1), lambda: x.max(1),
                             lambda: x.argmin(1), lambda: x.norm(math.inf, 1),
                             lambda: x.norm(-math.inf, 1)):
                    with reftorch.plugins.all_sizes():
                        got, expected, ran = both(call, _reduce.calls)
                    assert ran == 1
                    assert_same(got, expected)
    finally:
        _reduce.set_isa(previous)


def test_extreme_indices_across_blocks_and_chunks():
    """The first occurrence is found across BLOCK and CHUNK boundaries, NaN first."""
    n = 3 * 65536 + 1000
    a = np.zeros((2, n), np.float32)
    a[0, [300, 70000, 140000]] = 5            # ties across chunks: the first wins
    a[1, 190000] = 7
    a[1, [150000, 180000]] = np.nan           # NaN beats 7: the first NaN
    x = reftorch.from_numpy(a)
    for call in (lambda: x.max(1), lambda: x.argmax(1), lambda: x.argmax(), lambda: x.amax(1),
                 lambda: x.min(1), lambda: x.argmin(1), lambda: x[0].argmax(),
                 lambda: x.t().max(0), lambda: x.t().argmax(0)):
        got, expected, ran = both(call, _reduce.calls)
        assert ran == 1
        assert_same(got, expected)
    assert x.max(1).indices.tolist() == [300, 150000]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_var_std_logsumexp(dtype, layout):
    x = tensor((30, 80, 9), dtype, 5, layout)
    rtol = 2e-5 if dtype is F32 else 1e-12
    calls = [lambda: x.var(), lambda: x.std(1), lambda: x.var((1, 2), keepdim=True),
             lambda: x.std(0, correction=0), lambda: x.var(2, correction=2.5),
             lambda: reftorch.var(x, (0, 1), unbiased=False),
             lambda: x.logsumexp(1), lambda: x.logsumexp((1, 2), keepdim=True),
             lambda: x.logsumexp(0), lambda: x.logsumexp((0, 1, 2))]
    for call in calls:
        got, expected, ran = both(call, _reduce.calls)
        g, e = arrays(got)[0], arrays(expected)[0]
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol)


def test_var_one_element_and_logsumexp_specials():
    x = tensor((5000, 1), F32, 6)
    for call in (lambda: x.var(1), lambda: x.std(1, correction=0)):
        assert_same(*both(call, _reduce.calls)[:2])        # NaN (0 / 0) and exact 0
    a = values((40, 50), F32, 7)
    a[0, :] = -np.inf        # every element -inf: -inf
    a[1, 3] = np.inf         # +inf: inf
    a[2, 4] = np.nan         # NaN: NaN
    a[3, :] = 1e30           # huge: shifted, no overflow
    x = reftorch.from_numpy(a)
    got, expected, ran = both(lambda: x.logsumexp(1), _reduce.calls)
    assert ran == 1
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=2e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cumsum_is_bit_equal(dtype, layout):
    x = tensor((20, 300), dtype, 8, layout, special=True)
    for dim in (0, 1, -1):
        got, expected, ran = both(lambda: x.cumsum(dim), _reduce.calls)
        assert ran == 1
        assert_same(got, expected)
    y = tensor((4, 30, 50), dtype, 9)
    for dim in (0, 1, 2):
        assert_same(*both(lambda: y.cumsum(dim), _reduce.calls)[:2])


def test_large_results_do_not_depend_on_the_thread_count():
    x = tensor((3, 200_003), F32, 10, special=False)
    m = tensor((4096, 257), F32, 11)
    calls = [lambda: x.sum(), lambda: x.sum(1), lambda: x.mean(0), lambda: x.var(1),
             lambda: x.logsumexp(1), lambda: x.max(1), lambda: x.argmin(),
             lambda: m.sum(1), lambda: m.sum(0), lambda: m.std(0), lambda: m.amax(1),
             lambda: m.cumsum(0), lambda: m.cumsum(1)]
    previous = _reduce.set_num_threads(1)
    try:
        single = [arrays(call()) for call in calls]
        _reduce.set_num_threads(2)
        double = [arrays(call()) for call in calls]
    finally:
        _reduce.set_num_threads(previous)
    for one, two in zip(single, double):
        for a, b in zip(one, two):
            assert a.tobytes() == b.tobytes()


def _documented_row_sum(row):
    """reduce.c's order for a float row, in NumPy's elementwise arithmetic (the file comment):
    chunks of 65,536 added in order; in a chunk, the 64-byte vectors summed pairwise (halves
    at multiples of a leaf of 1,024 elements' vectors; a leaf's vectors go to 4 accumulators
    in turn, combined (a0 + a1) + (a2 + a3)), the vector's lanes as a tree of halves, then
    the tail elements in order."""
    lanes = 64 // row.itemsize
    leaf = 1024 // lanes

    def leaf_sum(vectors):
        acc = [np.zeros(lanes, row.dtype) for _ in range(4)]
        for i, v in enumerate(vectors):
            acc[i % 4] = acc[i % 4] + v
        return (acc[0] + acc[1]) + (acc[2] + acc[3])

    def pairwise(vectors):
        if len(vectors) <= leaf:
            return leaf_sum(vectors)
        half = max(len(vectors) // 2 // leaf * leaf, leaf)
        return pairwise(vectors[:half]) + pairwise(vectors[half:])

    total = row.dtype.type(0)
    for start in range(0, len(row), 65536):
        chunk = row[start:start + 65536]
        whole = len(chunk) // lanes * lanes
        part = row.dtype.type(0)
        if whole:
            v = pairwise(chunk[:whole].reshape(-1, lanes))
            while len(v) > 1:
                v = v[:len(v) // 2] + v[len(v) // 2:]
            part = v[0]
        for e in chunk[whole:]:
            part = part + e
        total = total + part if start else part
    return total


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("n", [65536 * 2 + 5 * 1024 + 37, 3 * 1024 + 5 * 16 + 3, 8 * 65536])
def test_long_rows_sum_in_the_documented_order(n, dtype):
    """The order pinned bit for bit: whole chunks (2^k leaves, built as the leaves go by), a
    last chunk of 5 leaves, leaves of whole and partial vector groups, tails."""
    row = (np.random.default_rng(n).standard_normal(n) * 10).astype(dtype)
    out = np.empty(1, dtype)
    _reduce.reduce(_reduce.SUM, row, 0, (1, 1, n), (0, 0, 1), out, 0, (0, 0), None, 0,
                   (0, 0), 0.0)
    assert out[0].tobytes() == _documented_row_sum(row).tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("R", [1, 7, 8, 16, 17, 33, 100, 512, 1024, 1025])
def test_short_rows_summed_together_keep_each_rows_bits(R, dtype):
    """Rows of at most one pairwise leaf are summed VL at a time (one tree adds the lanes of
    all of them): each row's result is the one it gets alone, for every summing kind."""
    rng = np.random.default_rng(R)
    x = (rng.standard_normal((37, R)) * 3).astype(dtype)

    def reduce(op, rows, param=0.0):
        out = np.empty(rows.shape[0], dtype)
        _reduce.reduce(op, rows.reshape(-1), 0, (1, rows.shape[0], R), (0, R, 1), out, 0,
                       (0, 1), None, 0, (0, 0), param)
        return out
    kinds = [(_reduce.SUM, 0.0), (_reduce.MEAN, 0.0), (_reduce.VAR, 0.0),
             (_reduce.LOGSUMEXP, 0.0), (_reduce.NORM, 1.0), (_reduce.NORM, 0.0),
             (_reduce.NORM, 3.0), (_reduce.NORM, 2.0)]
    for op, param in kinds:
        together = reduce(op, x, param)
        for r in (0, 15, 16, 36):
            alone = reduce(op, x[r:r + 1].copy(), param)
            assert together[r].tobytes() == alone[0].tobytes(), (op, param, r)
        exact = {_reduce.SUM: x.astype(np.float64).sum(1)}.get(op)
        if exact is not None:
            scale = np.abs(x).astype(np.float64).sum(1)
            assert np.all(np.abs(together - exact) <= 4 * np.finfo(dtype).eps * scale)


@pytest.mark.parametrize("isa", _reduce.supported_isas())
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", [(300, 1000), (5, 64), (1000, 37), (33, 300)], ids=str)
def test_column_sums_add_the_rows_in_order(shape, dtype, isa):
    """Down columns each sum starts from 0 and adds the rows in order, as NumPy's reduction
    over an outer axis does: its bits on every clone, for column blocks held in registers
    and the columns past the last whole block."""
    x = (np.random.default_rng(shape[1]).standard_normal(shape) * 10).astype(dtype)
    rows, cols = shape
    out = np.empty(cols, dtype)
    previous = _reduce.set_isa(isa)
    try:
        _reduce.reduce(_reduce.SUM, x.reshape(-1), 0, (1, cols, rows), (0, 1, cols), out, 0,
                       (0, 1), None, 0, (0, 0), 0.0)
    finally:
        _reduce.set_isa(previous)
    want = np.zeros(cols, dtype)
    for r in range(rows):
        want = want + x[r]
    assert out.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [F32, F64])
def test_every_isa_clone_gives_the_same_bits(dtype):
    # Every summing pass (sum, (x - mean)^2, |x|, |x|^p, nonzeros) along rows that take the
    # short-row and the long-row paths, with unit and gathered strides, and down columns.
    x = tensor((70, 1000), dtype, 12, special=True)
    long_rows = tensor((3, 5000), dtype, 13)
    strided = tensor((70, 300), dtype, 14, layout="strided")
    calls = [lambda: x.sum(1), lambda: x.sum(), lambda: x.max(1), lambda: x.var(0),
             lambda: x.var(1), lambda: x.norm(1, dim=1), lambda: x.norm(3, dim=1),
             lambda: x.norm(0, dim=1), lambda: long_rows.sum(1), lambda: long_rows.std(1),
             lambda: strided.sum(1), lambda: strided.var(1)]
    previous = _reduce.isa()
    results = []
    try:
        for isa in ("baseline", "avx2", "avx512f"):
            try:
                _reduce.set_isa(isa)
            except ValueError:
                continue  # this CPU lacks it
            results.append([arrays(call()) for call in calls])
    finally:
        _reduce.set_isa(previous)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            for u, v in zip(a, b):
                assert same_clone_bits(u, v)


def test_reduce_rejects_bad_arguments():
    a = np.zeros(10, np.float32)
    out = np.zeros(1, np.float32)
    with pytest.raises(ValueError):   # the view reaches past the buffer
        _reduce.reduce(_reduce.SUM, a, 0, (1, 1, 11), (0, 0, 1), out, 0, (0, 0), None, 0,
                       (0, 0), 0.0)
    with pytest.raises(ValueError):
        _reduce.reduce(_reduce.SUM, a, 5, (1, 2, 5), (0, 5, 1), out, 0, (0, 0), None, 0,
                       (0, 0), 0.0)
    with pytest.raises(TypeError):    # out of another element type
        _reduce.reduce(_reduce.SUM, a, 0, (1, 1, 10), (0, 0, 1), np.zeros(1), 0, (0, 0), None,
                       0, (0, 0), 0.0)
    with pytest.raises(TypeError):    # an index op needs idx
        _reduce.reduce(_reduce.ARGMAX, a, 0, (1, 1, 10), (0, 0, 1), None, 0, (0, 0), None, 0,
                       (0, 0), 0.0)
    with pytest.raises(ValueError):
        _reduce.reduce(99, a, 0, (1, 1, 10), (0, 0, 1), out, 0, (0, 0), None, 0, (0, 0), 0.0)
    with pytest.raises(ValueError):
        _reduce.cumsum(a, 0, (1, 1, 10), (0, 0, 1), np.zeros(5, np.float32), 0, (0, 0, 1))


def test_sum_backward_runs_through_the_plugin():
    x = tensor((64, 100), F64, 13).requires_grad_()
    got, expected, ran = both(lambda: reftorch.autograd.grad(x.logsumexp(1).sum(), x)[0],
                              _reduce.calls)
    assert ran >= 1
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)



# ---------------------------------------------------------------------------------------------
# prod and norm

def near_one(shape, dtype, seed, layout="contiguous", special=False):
    """Factors 1 + N(0, 0.01): products of thousands stay finite and round at every step;
    `special` mixes in 0, -0, inf, -inf and NaN."""
    x = tensor(shape, dtype, seed, layout, special=special)
    return x * 0.003 + 1 if not special else x.where(x.isnan() | x.isinf(), x * 0.003 + 1)


def _zeros_and_signs(x):
    a = x.clone()
    a[0] = 0.0
    a[1] = -0.0
    return -a


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("special", [False, True])
def test_prod_is_bit_equal(dtype, layout, special):
    """Each output multiplies in the reference's order (index order along these dims, all
    shorter than 64; the lane order over every dim): the same bits. Over every dim the order
    is the logical one, which a transposed x does not lay out as one run: it declines."""
    x = near_one((6, 40, 33), dtype, 80, layout, special)
    calls = [lambda: x.prod(), lambda: x.prod(0), lambda: x.prod(1), lambda: x.prod(2),
             lambda: x.prod(-1, keepdim=True), lambda: reftorch.prod(x, 1, True),
             lambda: _zeros_and_signs(x).prod(1)]
    for i, call in enumerate(calls):
        got, expected, ran = both(call, _reduce.calls)
        assert_same(got, expected)
        if layout in ("contiguous", "transposed") and i < 6:
            assert ran == (0 if layout == "transposed" and i == 0 else 1)
    if special:   # the special values reach the results (a NaN, an inf)
        assert np.isnan(x.prod().numpy()) and not np.isfinite(x.prod(2).numpy()).all()


def test_prod_of_long_rows_and_columns_in_order():
    """Rows longer than a CHUNK are not split (a split would reassociate the product), and
    columns multiply down in order: still the reference's bits."""
    n = 2 * 65536 + 999
    for dtype in DTYPES:
        x = near_one((2, n), dtype, 81)
        for call in (lambda: x.prod(1), lambda: x.prod(), lambda: x[1].prod(),
                     lambda: x.t().prod(0), lambda: x.reshape(n, 2).prod(0)):
            got, expected, ran = both(call, _reduce.calls)
            assert ran == 1
            assert_same(got, expected)
        g = x.prod(1).numpy().astype(np.float64)
        exact = np.prod(x.numpy().astype(np.longdouble), axis=1)
        # each result has gone through at most n / 64 - 1 + 6 + 63 roundings (its lane, the
        # tree, the tail), each of relative error eps / 2 at most
        bound = (n // 64 + 70) * np.finfo(dtype.numpy_dtype).eps / 2
        assert np.all(np.abs(g - exact) <= bound * np.abs(exact))


@pytest.mark.parametrize("isa", _reduce.supported_isas())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prod_lane_order_in_rows_and_columns(dtype, isa):
    """Runs of 64 and more in the lane order, along rows (unit and other strides) and down
    columns (several column groups of the lane scratch), with tails of 0 to 63 elements, on
    every ISA and thread count: the reference's bits. The special values (0, -0, inf, NaN)
    reach the results."""
    x = near_one((200, 1000), dtype, 83, special=True)
    calls = [lambda: x[:, :64].prod(1), lambda: x[:, :127].prod(1), lambda: x.prod(1),
             lambda: x[:, :200].t().prod(1), lambda: x[:128, :70].prod(0),
             lambda: x[:, :37].prod(0), lambda: x[:65].t().prod(0), lambda: x[:70].prod(),
             lambda: x[::2, ::3].prod(1)]     # (rows of stride 3: the lanes gathered)
    previous_isa, previous_threads = _reduce.set_isa(isa), _reduce.set_num_threads(1)
    try:
        for threads in (1, 2):
            _reduce.set_num_threads(threads)
            for call in calls:
                got, expected, ran = both(call, _reduce.calls)
                assert ran == 1
                assert_same(got, expected)
    finally:
        _reduce.set_isa(previous_isa), _reduce.set_num_threads(previous_threads)
    assert np.isnan(x.prod(1).numpy()).any() and np.isinf(x.prod(1).numpy()).any()


def test_prod_declines_what_it_does_not_compute():
    x = near_one((50, 60), F32, 82)
    cases = [lambda: x.prod(dtype=reftorch.float64),       # another accumulation dtype
             lambda: x.to(reftorch.int32).prod(dtype=reftorch.int32),  # int64 only
             lambda: x.to(reftorch.float16).prod(1),        # half: float32 accumulator
             lambda: x[:5, :5].prod(),                     # below MIN_NUMEL
             lambda: tensor((3000, 0), F32, 82).prod(1),    # empty
             lambda: x.expand(3, 50, 60).prod()]            # expanded: dims do not merge
    for call in cases:
        got, expected, ran = both(call, _reduce.calls)
        assert ran == 0
        assert_same(got, expected)


INT_DTYPES = [reftorch.bool, reftorch.uint8, reftorch.int8, reftorch.int16, reftorch.int32,
              reftorch.int64]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_integer_prod_is_bit_equal_and_wraps(dtype, layout):
    """Bool and integer inputs multiply into int64, wrapping as NumPy does (products of
    hundreds of factors up to 9 overflow int64 many times over)."""
    rng = np.random.default_rng(89)
    shape = (6, 40, 33)
    a = rng.integers(1, 10, shape) * rng.choice([-1, 1], shape)
    base = reftorch.from_numpy(a).to(dtype)
    x = {"contiguous": base, "transposed": base.permute(2, 1, 0).contiguous().permute(2, 1, 0),
         "strided": reftorch.from_numpy(np.repeat(a, 2, -1)).to(dtype)[..., ::2],
         "expanded": base[:1].expand(*shape)}[layout]
    calls = [lambda: x.prod(), lambda: x.prod(0), lambda: x.prod(1), lambda: x.prod(2),
             lambda: x.prod(-1, keepdim=True)]
    for i, call in enumerate(calls):
        got, expected, ran = both(call, _reduce.calls)
        assert_same(got, expected)
        assert got.dtype == reftorch.int64
        if layout in ("contiguous", "transposed"):
            assert ran == 1
    if dtype in (reftorch.int16, reftorch.int32, reftorch.int64) and layout == "contiguous":
        exact = math.prod(a[0, 0].tolist())        # 33 factors: past int64, so it wraps
        assert abs(exact) >= 2 ** 63
        assert x.prod(2)[0, 0].item() == (exact + 2 ** 63) % 2 ** 64 - 2 ** 63


def test_integer_prod_threads_and_bad_arguments():
    a = np.random.default_rng(90).integers(-5, 6, (4096, 257))
    x = reftorch.from_numpy(a)
    calls = [lambda: x.prod(1), lambda: x.prod(0), lambda: x.prod(),
             lambda: x.to(reftorch.int8).prod(1)]
    previous = _reduce.set_num_threads(1)
    try:
        runs = []
        for threads in (1, 2, 3):
            _reduce.set_num_threads(threads)
            runs.append([call().numpy().tobytes() for call in calls])
    finally:
        _reduce.set_num_threads(previous)
    assert runs[0] == runs[1] == runs[2]
    i8, out = np.ones(10, np.int8), np.zeros(1, np.int64)
    with pytest.raises(TypeError):      # float input
        _reduce.prod_int(np.ones(10, np.float32), 0, (1, 1, 10), (0, 0, 1), out, 0, (0, 0))
    with pytest.raises(TypeError):      # out not int64
        _reduce.prod_int(i8, 0, (1, 1, 10), (0, 0, 1), np.zeros(1, np.int32), 0, (0, 0))
    with pytest.raises(ValueError):     # x's view past its buffer
        _reduce.prod_int(i8, 1, (1, 1, 10), (0, 0, 1), out, 0, (0, 0))
    with pytest.raises(ValueError):     # out's view past its buffer
        _reduce.prod_int(i8, 0, (1, 2, 5), (0, 5, 1), out, 0, (0, 1))
    assert out[0] == 0
    _reduce.prod_int(np.full(10, -2, np.int16), 0, (1, 1, 10), (0, 0, 1), out, 0, (0, 0))
    assert out[0] == 1024


NORM_PS = [2, 1, 0, math.inf, -math.inf, 3, 4, 8]


def norm_bound(x, p, dims, dtype):
    """Relative bound of the plugin's norm against the reference's: both sum positive terms
    within eps * depth (pairwise orders, sum_bound's depth); a whole power p is p - 1
    products in C and within 4 ulp in NumPy (its own SIMD power); the final root scales the
    sum's relative error by 1/p."""
    if p in (0, math.inf, -math.inf):
        return 0.0
    eps = np.finfo(dtype.numpy_dtype).eps
    n = x.numel() if dims is None else math.prod(x.shape[d] for d in dims)
    depth = 32 + math.log2(max(n, 2))
    per_term = 0 if p in (1, 2) else (p + 4) * eps
    return (2 * eps * depth + per_term) / abs(p) + 8 * eps


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dims", DIM_CASES, ids=str)
def test_norm_against_the_reference(dtype, layout, dims):
    x = tensor((6, 40, 33), dtype, 83, layout)
    for p in NORM_PS:
        call = (lambda: reftorch.norm(x, p)) if dims is None else \
            (lambda: reftorch.norm(x, p, dims, keepdim=True))
        got, expected, ran = both(call, _reduce.calls)
        g, e = arrays(got)[0], arrays(expected)[0]
        assert g.dtype == e.dtype and g.shape == e.shape
        bound = norm_bound(x, p, dims, dtype)
        if bound == 0:
            assert_same(got, expected)
        else:
            assert np.all(np.abs(g - e) <= bound * np.abs(e)), (p, np.max(np.abs(g - e) / e))
        if layout in ("contiguous", "transposed"):
            assert ran == 1
        if p == 2 and layout == "contiguous":   # against an exact (extended) computation
            a = x.numpy().astype(np.longdouble)
            exact = np.sqrt(np.sum(a * a, axis=dims, keepdims=dims is not None))
            assert np.all(np.abs(g - exact) <= bound * exact)


def test_norm_special_values_and_long_rows():
    n = 3 * 65536 + 500
    a = values((3, n), F32, 84)
    a[0, [10, 70000]] = np.nan        # NaN: every norm but p = 0 (which counts it) is NaN
    a[1, 150000] = np.inf             # inf: inf (the -inf norm is the smallest magnitude)
    a[2, ::7] = 0                     # zeros: p = 0 counts the others, -inf gives 0
    a[2, 1] = -0.0
    x = reftorch.from_numpy(a)
    for p in NORM_PS:
        for call in (lambda: reftorch.norm(x, p, 1), lambda: reftorch.norm(x.t(), p, 0),
                     lambda: reftorch.norm(x[1:], p)):
            got, expected, ran = both(call, _reduce.calls)
            assert ran == 1
            g, e = got.numpy(), expected.numpy()
            bound = norm_bound(x, p, (1,), F32)
            assert np.array_equal(np.isnan(g), np.isnan(e)) and \
                np.array_equal(np.isinf(g), np.isinf(e))
            finite = np.isfinite(e)
            assert np.all(np.abs(g[finite] - e[finite]) <= bound * np.abs(e[finite]))
    assert reftorch.norm(x, 0, 1).tolist() == [n, n, n - len(range(0, n, 7)) - 1]  # -0 too
    assert reftorch.norm(x, -math.inf, 1)[2].item() == 0
    assert reftorch.norm(x, math.inf, 1)[1].item() == math.inf


def test_norm_declines_and_errors_match():
    x = tensor((50, 60), F32, 85)
    for call in (lambda: reftorch.norm(x, math.nan),            # NaN p: the reference's
                 lambda: reftorch.norm(x, 0.5, 1),              # p with no C term
                 lambda: reftorch.norm(x, -1.5, 0),
                 lambda: reftorch.norm(x, 9),                   # past MAX_INT_P
                 lambda: reftorch.norm(x[:4, :4]),              # below MIN_NUMEL
                 lambda: reftorch.norm(x.to(reftorch.float16), 2),
                 lambda: reftorch.norm(x.expand(2, 50, 60), 1, (0, 2))):  # no merge
        got, expected, ran = both(call, _reduce.calls)
        assert ran == 0
        assert_same(got, expected)
    empty = tensor((0, 3000), F32, 85)
    for p in (math.inf, -1):   # no identity: the reference's error, before any kernel
        with pytest.raises(RuntimeError, match="cannot compute the"):
            reftorch.norm(empty, p, 0)
    with pytest.raises(RuntimeError, match="Expected a floating point"):
        reftorch.norm(x.to(reftorch.int32))
    a = np.ones(10, np.float32)
    for p in (0.5, 3.5, 9.0, -3.0):   # the raw entry point refuses p it has no term for
        with pytest.raises(ValueError, match="norm's p"):
            _reduce.reduce(_reduce.NORM, a, 0, (1, 1, 10), (0, 0, 1), np.zeros(1, np.float32),
                           0, (0, 0), None, 0, (0, 0), p)


def test_prod_and_norm_do_not_depend_on_the_thread_count_or_isa():
    x = near_one((3, 200_003), F32, 86)
    m = tensor((4096, 257), F64, 87)
    calls = [lambda: x.prod(), lambda: x.prod(1), lambda: m.prod(1), lambda: m.prod(0),
             lambda: x.norm(), lambda: x.norm(1, 1), lambda: x.norm(3, 1),
             lambda: x.norm(math.inf), lambda: m.norm(-math.inf, 1), lambda: m.norm(0, 0),
             lambda: m.norm(2, 1), lambda: m.norm(4, 0)]
    previous = _reduce.set_num_threads(1)
    try:
        runs = []
        for threads in (1, 2, 3):
            _reduce.set_num_threads(threads)
            runs.append([arrays(call()) for call in calls])
    finally:
        _reduce.set_num_threads(previous)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert a[0].tobytes() == b[0].tobytes()
    isa = _reduce.isa()
    clones = []
    try:
        for name in _reduce.supported_isas():
            _reduce.set_isa(name)
            clones.append([arrays(call()) for call in calls])
    finally:
        _reduce.set_isa(isa)
    for other in clones[1:]:
        for a, b in zip(clones[0], other):
            assert same_clone_bits(a[0], b[0])


def test_prod_and_norm_gradients_run_through_the_plugin():
    x = near_one((64, 100), F64, 88).requires_grad_()
    for fn in (lambda t: t.prod(1).sum(), lambda t: t.norm(2, 1).sum(),
               lambda t: t.norm(3)):
        got, expected, ran = both(lambda: reftorch.autograd.grad(fn(x), x)[0], _reduce.calls)
        assert ran >= 1
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)

# ---------------------------------------------------------------------------------------------
# nn rows: softmax, log_softmax, layer norm, nll_loss

ROW_SHAPES = [(40, 1), (40, 7), (40, 16), (33, 100), (8, 1025), (2, 3, 64)]


def _softmax_tolerance(dtype, log):
    if dtype is F64:  # log_softmax's (x - max) - log(sum) cancels: an absolute bound too
        return dict(rtol=1e-13, atol=1e-13) if log else dict(rtol=1e-13, atol=1e-300)
    return dict(rtol=1e-6, atol=1e-6) if log else dict(rtol=1e-6, atol=1e-38)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", ROW_SHAPES, ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_rows(dtype, shape, log):
    fn = reftorch.log_softmax if log else reftorch.softmax
    for rows_apart in (False, True):   # contiguous, or rows sliced out of wider ones
        x = tensor(shape[:-1] + (2 * shape[-1],), dtype, 20)[..., :shape[-1]] if rows_apart \
            else tensor(shape, dtype, 20)
        got, expected, ran = both(lambda: fn(x, -1), _nn_rows.calls)
        assert ran == (1 if x.numel() >= nn_rows.MIN_NUMEL else 0)
        g, e = got.numpy(), expected.numpy()
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, **_softmax_tolerance(dtype, log))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_special_rows(dtype):
    a = values((12, 300), dtype, 21) * 10
    a[0, 5] = np.nan                   # NaN: the row is NaN
    a[1, 7] = np.inf                   # +inf: inf - inf, the row is NaN
    a[2, :] = -np.inf                  # only -inf: NaN
    a[3, ::2] = -np.inf                # some -inf: exp 0 / log -inf
    a[4, :] = 0                        # all equal
    a[5, :] = np.linspace(-200, 0, 300)  # exps underflow into the subnormals
    a[6, :] = 1e30
    a[7, 0] = np.nan                   # NaN first, then in the scalar tail, then alone:
    a[8, 299] = np.nan                 # wherever it is, the row is NaN
    a[9, :] = np.nan
    a[10, 3], a[10, 4] = np.nan, -np.inf
    x = reftorch.from_numpy(a)
    for fn, log in ((reftorch.softmax, False), (reftorch.log_softmax, True)):
        got, expected, ran = both(lambda: fn(x, 1), _nn_rows.calls)
        assert ran == 1
        np.testing.assert_allclose(got.numpy(), expected.numpy(),
                                   **_softmax_tolerance(dtype, log))


def test_softmax_other_dims_and_layouts_decline():
    x = tensor((30, 40), F32, 22)
    for call in (lambda: reftorch.softmax(x, 0), lambda: reftorch.log_softmax(x.t(), 1),
                 lambda: reftorch.softmax(tensor((3, 4), F32, 22), 1)):
        got, expected, ran = both(call, _nn_rows.calls)
        assert ran == 0
        assert_same(got, expected)


def test_float32_exp_within_one_ulp():
    x = np.concatenate([np.linspace(-110, 0, 200_001, dtype=np.float32),
                        np.array([-np.inf, 0, -0.0, -1e-30, -1e-45, -87.5, -103.9],
                                 np.float32)])
    exact = np.exp(x.astype(np.float64))
    rounded = exact.astype(np.float32)
    fused = {}   # the clones with FMA: the same bits (see nn_rows.c)
    for isa in ("baseline", "avx2", "avx512f"):
        try:
            previous = _nn_rows.set_isa(isa)
        except ValueError:
            continue
        try:
            out = np.empty_like(x)
            _nn_rows.exp_f32(x, out)
        finally:
            _nn_rows.set_isa(previous)
        normal = rounded >= np.finfo(np.float32).tiny
        ulps = np.abs(out[normal].view(np.int32).astype(np.int64) -
                      rounded[normal].view(np.int32))
        assert ulps.max() <= 1
        assert np.abs(out[~normal] - exact[~normal]).max() <= 2e-45
        if isa != "baseline":
            fused[isa] = out.view(np.uint32)
    if len(fused) == 2:
        np.testing.assert_array_equal(fused["avx2"], fused["avx512f"])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["weight+bias", "weight", "bias", "none", "2-d shape",
                                  "strided rows", "3-d input"])
def test_layer_norm(dtype, case):
    shape, normalized = (50, 300), (300,)
    if case == "2-d shape":
        shape, normalized = (10, 12, 25), (12, 25)
    if case == "3-d input":
        shape = (5, 10, 300)
    x = tensor(shape, dtype, 30, "strided" if case == "strided rows" else "contiguous")
    x = x * 2 + 3   # a mean far from 0
    weight = tensor(normalized, dtype, 31) if case in ("weight+bias", "weight", "2-d shape",
                                                       "strided rows", "3-d input") else None
    bias = tensor(normalized, dtype, 32) if case in ("weight+bias", "bias", "2-d shape",
                                                     "3-d input") else None
    if case == "strided rows":   # rows with unit stride but a gap between them
        x = tensor((50, 600), dtype, 30)[:, 100:400]
    got, expected, ran = both(lambda: reftorch.native_layer_norm(x, normalized, weight, bias,
                                                                 1e-5), _nn_rows.calls)
    assert ran == 1
    tol = 2e-5 if dtype is F32 else 1e-12
    for g, e in zip(arrays(got), arrays(expected)):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


LAYER_NORM_BACKWARD_CASES = {   # name -> (x shape, normalized dims, layout, weight)
    "rows": ((300, 200), 1, "contiguous", True),
    "no weight": ((300, 200), 1, "contiguous", False),
    "2-d shape": ((40, 12, 25), 2, "contiguous", True),
    "3-d input": ((6, 50, 130), 1, "contiguous", True),
    "strided rows": ((120, 300), 1, "strided rows", True),
    "transposed batch": ((64, 5, 80), 1, "transposed batch", True),   # declined: the
    # leading dims do not merge into one strided dim
    "no leading dims": ((700,), 1, "contiguous", True),
    "one row": ((1, 700), 1, "contiguous", True),
}


def _layer_norm_backward_inputs(shape, k, layout, with_weight, dtype):
    if layout == "strided rows":
        x = tensor((shape[0], 2 * shape[1]), dtype, 60)[:, 50:50 + shape[1]]
    elif layout == "transposed batch":   # rows contiguous, the two leading dims swapped
        x = tensor((shape[1], shape[0], shape[2]), dtype, 60).permute(1, 0, 2)
    else:
        x = tensor(shape, dtype, 60)
    x = x * 2 + 3
    g = tensor(shape, dtype, 61, special=False)
    normalized = shape[len(shape) - k:]
    weight = tensor(normalized, dtype, 62) if with_weight else None
    with reftorch.plugins.use_reference_kernels():   # the same statistics for both runs
        _, mean, rstd = reftorch.native_layer_norm(x, normalized, weight, None, 1e-5)
    return g, x, mean, rstd, weight


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(LAYER_NORM_BACKWARD_CASES))
def test_layer_norm_backward(dtype, case):
    """grad_input within a few ulp of the row's scale (its two row means are summed in
    another order), grad_weight and grad_bias bit for bit (NumPy's sum over the leading
    dims, row after row); every output_mask."""
    from reftorch._ops.nn_normalization import layer_norm_backward
    shape, k, layout, with_weight = LAYER_NORM_BACKWARD_CASES[case]
    g, x, mean, rstd, weight = _layer_norm_backward_inputs(shape, k, layout, with_weight, dtype)
    tol = 1e-5 if dtype is F32 else 1e-13

    def input_close(a, b):
        scale = np.abs(b).max(axis=tuple(range(b.ndim - k, b.ndim)), keepdims=True)
        assert np.all(np.abs(a - b) <= tol * scale)

    def same_bits(a, b):
        assert a.tobytes() == b.tobytes()
    _check_norm_backward(lambda mask: layer_norm_backward(g, x, mean, rstd, weight, k, mask),
                         layout != "transposed batch", input_close, same_bits)


def _same_gradients_on_every_thread_count(forward, grad, leaves, node, c_calls):
    """forward().backward(grad) on 1, 2 and 3 threads: `c_calls` nn_rows C calls each time
    (forward and backward ops served), `node` the output's grad_fn, and the leaves'
    gradients the same bits every time."""
    results = []
    for threads in (1, 2, 3):
        previous = _nn_rows.set_num_threads(threads)
        try:
            for t in leaves:
                t.grad = None
            before = _nn_rows.calls()
            y = forward()
            y.backward(grad)
            assert _nn_rows.calls() - before == c_calls
            assert y.grad_fn.name() == node
            results.append([t.grad.numpy().copy() for t in leaves])
        finally:
            _nn_rows.set_num_threads(previous)
    for other in results[1:]:
        for a, b in zip(other, results[0]):
            assert a.tobytes() == b.tobytes()


NORM_BACKWARD_MASKS = ((True, True, True), (True, False, False), (False, True, False),
                       (False, False, True))


def _check_norm_backward(call, runs_in_c, input_close, parameters_close):
    """call(output_mask) with the plugin and on the reference, for every mask: the C code ran
    (or not), None where masked, dtypes and shapes alike, grad_input checked by
    input_close(got, want) and the parameter gradients by parameters_close."""
    for mask in NORM_BACKWARD_MASKS:
        got, expected, ran = both(lambda: call(mask), _nn_rows.calls)
        assert ran == runs_in_c
        for index, (a, b) in enumerate(zip(got, expected)):
            assert (a is None) == (b is None) == (not mask[index])
            if a is not None:
                a, b = a.numpy(), b.numpy()
                assert a.dtype == b.dtype and a.shape == b.shape
                (input_close if index == 0 else parameters_close)(a, b)


def test_layer_norm_backward_through_autograd_threads_and_signed_zeros():
    x = tensor((64, 6, 80), F32, 63).requires_grad_(True)
    weight = tensor((80,), F32, 64).requires_grad_(True)
    bias = tensor((80,), F32, 65).requires_grad_(True)
    _same_gradients_on_every_thread_count(
        lambda: reftorch.nn.functional.layer_norm(x, (80,), weight, bias),
        tensor((64, 6, 80), F32, 66), (x, weight, bias), "NativeLayerNormBackward0", 2)
    # No leading dims: the parameter gradients are the row's values themselves, -0.0 kept
    # (a sum would start from +0.0).
    from reftorch._ops.nn_normalization import layer_norm_backward
    g = reftorch.from_numpy(np.array([-0.0, 1.0, -0.0, 2.0] * 2000, np.float32))
    x1 = tensor((8000,), F32, 67)
    _, mean, rstd = reftorch.native_layer_norm(x1, (8000,), None, None, 1e-5)
    got, expected, ran = both(lambda: layer_norm_backward(g, x1, mean, rstd, None, 1,
                                                          (False, True, True)), _nn_rows.calls)
    assert ran == 1
    assert got[2].numpy().tobytes() == expected[2].numpy().tobytes() == g.numpy().tobytes()


def test_layer_norm_backward_entry_point_rejects_bad_arguments():
    x, g = np.ones(12, np.float32), np.ones(12, np.float32)
    mean, rstd, out = np.zeros(3, np.float32), np.ones(3, np.float32), np.empty(12, np.float32)
    args = [g, 0, 4, x, 0, 4, 3, 4, True, None, 0, mean, 0, rstd, 0, out, None, None]
    _nn_rows.layer_norm_backward(*args)
    bad = [
        (ValueError, {6: 4}),                              # 4 rows do not fit in x
        (ValueError, {8: False}),                          # no leading dims, but 3 rows
        (ValueError, {12: 1}),                             # mean runs past its buffer
        (TypeError, {3: np.ones(12, np.float64)}),         # x and grad of different types
        (TypeError, {15: np.empty(12, np.float64)}),       # grad_input of another type
        (TypeError, {9: np.ones(4, np.int32)}),            # an integer weight
        (TypeError, {15: np.empty(12, np.float32).tobytes()}),   # read-only output
        (TypeError, {0: None}),
    ]
    for error, changes in bad:
        trial = list(args)
        for position, value in changes.items():
            trial[position] = value
        with pytest.raises(error):
            _nn_rows.layer_norm_backward(*trial)


GROUP_NORM_BACKWARD_CASES = {   # name -> (x shape, groups, weight)
    "images": ((4, 32, 9, 11), 8, True),
    "no weight": ((4, 32, 9, 11), 8, False),
    "one group": ((3, 12, 50), 1, True),
    "a group per channel": ((3, 12, 50), 12, True),
    "2-d input": ((40, 24), 6, True),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(GROUP_NORM_BACKWARD_CASES))
def test_group_norm_backward(dtype, case):
    """grad_input within a few ulp of each group's scale; grad_weight / grad_bias (summed in
    double here, pairwise in the element type by the reference) within a few ulp of the sum
    of the terms' magnitudes; every output_mask."""
    from reftorch._ops.nn_normalization import group_norm_backward
    shape, groups, with_weight = GROUP_NORM_BACKWARD_CASES[case]
    N, C, HxW = shape[0], shape[1], math.prod(shape[2:])
    x, g = tensor(shape, dtype, 70) * 2 + 3, tensor(shape, dtype, 71)
    weight = tensor((C,), dtype, 72) if with_weight else None
    with reftorch.plugins.use_reference_kernels():
        _, mean, rstd = reftorch.native_group_norm(x, None, None, N, C, HxW, groups, 1e-5)
    tol = 1e-5 if dtype is F32 else 1e-13
    terms = np.abs(g.numpy().astype(np.float64)) * (1 + np.abs(x.numpy() - 3) / 2)
    magnitude = terms.sum(axis=(0,) + tuple(range(2, len(shape))))

    def input_close(a, b):
        scale = np.abs(b.reshape(N, groups, -1)).max(axis=2, keepdims=True)
        assert np.all(np.abs(a - b).reshape(N, groups, -1) <= tol * scale)

    def parameters_close(a, b):
        assert np.all(np.abs(a - b) <= tol * magnitude)
    _check_norm_backward(
        lambda mask: group_norm_backward(g, x, mean, rstd, weight, N, C, HxW, groups, mask),
        True, input_close, parameters_close)


def test_group_norm_backward_through_autograd_threads_and_declines():
    x = tensor((8, 32, 14, 14), F32, 73).requires_grad_(True)
    weight = tensor((32,), F32, 74).requires_grad_(True)
    bias = tensor((32,), F32, 75).requires_grad_(True)
    _same_gradients_on_every_thread_count(
        lambda: reftorch.nn.functional.group_norm(x, 8, weight, bias),
        tensor((8, 32, 14, 14), F32, 76), (x, weight, bias), "NativeGroupNormBackward0", 1)
    # a channels-last input declines (the reference runs), with the reference's results
    from reftorch._ops.nn_normalization import group_norm_backward
    last = tensor((4, 8, 5, 6), F32, 77).contiguous(memory_format=reftorch.channels_last)
    with reftorch.plugins.use_reference_kernels():
        _, mean, rstd = reftorch.native_group_norm(last, None, None, 4, 8, 30, 2, 1e-5)
    got, expected, ran = both(lambda: group_norm_backward(last, last, mean, rstd, None, 4, 8, 30,
                                                          2, (True, True, True)),
                              _nn_rows.calls)
    assert ran == 0
    for a, b in zip(got, expected):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_group_norm_backward_entry_point_rejects_bad_arguments():
    x, g = np.ones(24, np.float32), np.ones(24, np.float32)
    mean, rstd, out = np.zeros(4, np.float32), np.ones(4, np.float32), np.empty(24, np.float32)
    args = [g, x, 2, 6, 2, 2, None, mean, rstd, out, np.empty(6, np.float32), None]
    _nn_rows.group_norm_backward(*args)
    bad = [
        (ValueError, {5: 4}),                              # 4 groups do not divide 6 channels
        (ValueError, {5: 0}),
        (ValueError, {4: 3}),                              # x holds 24 elements, not 36
        (ValueError, {6: np.ones(6, np.float32)}),         # weight must be C * L long
        (ValueError, {7: np.zeros(3, np.float32)}),        # a statistic short
        (TypeError, {1: np.ones(24, np.float64)}),         # x and grad of different types
        (TypeError, {10: np.empty(6, np.float32).tobytes()}),   # read-only output
    ]
    for error, changes in bad:
        trial = list(args)
        for position, value in changes.items():
            trial[position] = value
        with pytest.raises(error):
            _nn_rows.group_norm_backward(*trial)


def test_layer_norm_declines_other_layouts():
    x = tensor((40, 300), F32, 33)
    for call in (lambda: reftorch.native_layer_norm(x.t(), (40,), None, None, 1e-5),
                 lambda: reftorch.native_layer_norm(x, (300,), tensor((600,), F32, 1)[::2],
                                                    None, 1e-5),
                 lambda: reftorch.native_layer_norm(x, (300,), tensor((300,), F64, 1), None,
                                                    1e-5)):
        before = _nn_rows.calls()
        try:
            got = call()
        except RuntimeError:
            continue
        assert _nn_rows.calls() == before
        with reftorch.plugins.use_reference_kernels():
            assert_same(got, call())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss(dtype, reduction):
    rng = np.random.default_rng(40)
    x = tensor((64, 10), dtype, 41)
    target = reftorch.from_numpy(rng.integers(0, 10, 64))
    target[5] = -100
    weight = reftorch.from_numpy(np.abs(values((10,), dtype, 42)))
    tol = 1e-5 if dtype is F32 else 1e-13   # the sums' orders differ (see nn_rows.py)
    cases = [lambda: F.nll_loss(x, target, reduction=reduction),
             lambda: F.nll_loss(x, target, weight=weight, reduction=reduction),
             lambda: F.nll_loss(x, target.clamp(0, 9), ignore_index=3, reduction=reduction),
             lambda: F.nll_loss(x[0], target[0].clamp(0, 9), reduction=reduction),
             lambda: F.cross_entropy(x, target, reduction=reduction),
             lambda: F.nll_loss(tensor((64, 20), dtype, 43)[:, ::2], target,
                                reduction=reduction)]   # class stride 2: declined
    for i, call in enumerate(cases):
        got, expected, ran = both(call, _nn_rows.calls)
        assert ran == (0 if i == len(cases) - 1 else 1 if i < 4 else 2)
        g, e = got.numpy(), expected.numpy()
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss(dtype, reduction):
    """The squares bit for bit (the elementwise C loops); their sum (mean, sum: reduce.c
    squares the difference as it reads it) within the blocked pairwise sum's bound, and the
    same bits as summing the written squares; a transposed target; declines for
    broadcasting."""
    from reftorch_cpu import _C
    x, target = tensor((300, 70), dtype, 60), tensor((300, 70), dtype, 61)
    target_t = reftorch.from_numpy(np.ascontiguousarray(target.numpy().T)).t()
    for t in (target, target_t, target[:1].expand(300, 70)):
        squares = (x.numpy().astype(np.float64) - t.numpy()) ** 2
        got, expected, ran = both(lambda: F.mse_loss(x, t, reduction=reduction), _C.calls)
        # the difference, then its square ('none'; the sums square as they read)
        assert ran == (2 if reduction == "none" else 1)
        if reduction != "none":
            written = F.mse_loss(x, t, reduction="none").sum()
            if reduction == "mean":
                written = written / written.new_tensor(float(x.numel()))
            assert_same(got, written)
        if reduction == "none":
            assert_same(got, expected)
        else:
            g, e = got.numpy(), expected.numpy()
            assert g.shape == e.shape == () and g.dtype == e.dtype
            bound, n = sum_bound(reftorch.from_numpy(squares), None, dtype)
            scale = n if reduction == "mean" else 1
            assert abs(float(g) - float(e)) <= 2 * float(bound) / scale


def test_nll_loss_all_ignored_and_bad_targets():
    x = tensor((8, 5), F32, 44)
    ignored = reftorch.full((8,), -100, dtype=reftorch.int64)
    assert_same(*both(lambda: F.nll_loss(x, ignored), _nn_rows.calls)[:2])   # NaN
    for bad in (5, -1):
        target = reftorch.zeros(8, dtype=reftorch.int64)
        target[3] = bad
        before = _nn_rows.calls()
        with pytest.raises(IndexError, match=f"Target {bad} is out of bounds"):
            F.nll_loss(x, target)
        assert _nn_rows.calls() == before       # checked before anything is computed
    with pytest.raises(ValueError):             # raw entry point: the view overruns x
        _nn_rows.nll_loss(np.zeros(10, np.float32), 0, 3, 5, 5, np.zeros(3, np.int64), 0,
                          None, 0, -100, None)


def test_cross_entropy_gradients_match_the_reference():
    rng = np.random.default_rng(50)
    logits = tensor((32, 100), F32, 51)
    target = reftorch.from_numpy(rng.integers(0, 100, 32))

    def grad():
        x = logits.detach().requires_grad_()
        F.cross_entropy(x, target).backward()
        return x.grad
    got, expected, ran = both(grad, _nn_rows.calls)
    assert ran >= 2  # log_softmax and nll_loss
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-8)


def test_rows_do_not_depend_on_the_thread_count():
    x = tensor((2000, 129), F32, 60)
    w, b = tensor((129,), F32, 61), tensor((129,), F32, 62)
    calls = [lambda: reftorch.softmax(x, 1), lambda: reftorch.log_softmax(x, 1),
             lambda: reftorch.native_layer_norm(x, (129,), w, b, 1e-5)]
    previous = _nn_rows.set_num_threads(1)
    try:
        single = [arrays(call()) for call in calls]
        _nn_rows.set_num_threads(2)
        double = [arrays(call()) for call in calls]
    finally:
        _nn_rows.set_num_threads(previous)
    for one, two in zip(single, double):
        for a, b_ in zip(one, two):
            assert a.tobytes() == b_.tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_fused_softmax_backward_rows(dtype, log):
    """The raw fused backward (for _softmax_backward_data / _log_softmax_backward_data, when
    declared) against the derivative rows' formulas in NumPy."""
    for rows, n in ((40, 7), (33, 100), (8, 1025)):
        x = values((rows, n), dtype, 70)
        g = values((rows, n), dtype, 71)
        with reftorch.plugins.use_reference_kernels():
            fn = reftorch.log_softmax if log else reftorch.softmax
            y = fn(reftorch.from_numpy(x), 1).numpy()
        out = np.empty_like(y)
        _nn_rows.softmax_backward(log, g, 0, y, 0, rows, n, (n, n), out)
        if log:
            expected = g - np.exp(y.astype(np.float64)) * g.sum(1, keepdims=True, dtype=np.float64)
        else:
            expected = y * (g - (g.astype(np.float64) * y).sum(1, keepdims=True))
        tol = 1e-5 if dtype is F32 else 1e-12
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    with pytest.raises(ValueError):   # y's view overruns its buffer
        _nn_rows.softmax_backward(log, g, 0, y[:2].copy(), 0, rows, n, (n, n), out)


@pytest.mark.parametrize("name,forward", [("_softmax_backward_data", "softmax"),
                                          ("_log_softmax_backward_data", "log_softmax")])
@pytest.mark.parametrize("dtype", [reftorch.float32, reftorch.float64])
def test_fused_softmax_backward_is_served(name, forward, dtype):
    """The derivative rows of softmax and log_softmax call these ops; the plugin fuses them."""
    from reftorch._dispatch import find_op
    from reftorch._ops import structured
    op = find_op(name)
    assert reftorch.plugins.serving(name, "cpu", dtype) == "cpu"
    rng = np.random.default_rng(0)
    x = reftorch.from_numpy(rng.standard_normal((64, 100)).astype(dtype.numpy_dtype))
    g = reftorch.from_numpy(rng.standard_normal((64, 100)).astype(dtype.numpy_dtype))
    y = getattr(reftorch, forward)(x, 1)
    params = {"dim": 1, "input_dtype": dtype}
    before = _nn_rows.calls()
    got = structured.run(op, (g, y), params)
    assert _nn_rows.calls() == before + 1
    with reftorch.plugins.use_reference_kernels():
        expected = structured.run(op, (g, y), params)
    tol = 1e-5 if dtype is reftorch.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=tol, atol=tol)
