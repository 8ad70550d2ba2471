"""The C plugin's embedding_bag ('sum', 'mean' and 'max' modes; plugin_cpu/src/bags.c,
reftorch_cpu/bags.py) against the reference, bit for bit: the bags' sums follow the
reference's np.add.reduceat order (a bag's first term plus NumPy's pairwise sum of the rest),
the maxima its np.maximum.reduceat fold and first-holder indices.
"""
import numpy as np
import pytest

import reftorch

try:
    import reftorch_cpu
    from reftorch_cpu import _bags, bags
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

F32, F64 = reftorch.float32, reftorch.float64
SUM, MEAN, MAX = 0, 1, 2


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


def weights(rows, dim, dtype, seed, layout="contiguous"):
    """Rows with -0.0, NaN and inf mixed in; a transposed layout keeps the same values."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, dim)).astype(dtype.numpy_dtype)
    w[3] = -0.0
    w[5, 0], w[6, -1] = np.nan, np.inf
    if layout == "transposed":
        return reftorch.from_numpy(np.ascontiguousarray(w.T)).t()
    return reftorch.from_numpy(w)


def run_both(call):
    before = _bags.calls()
    got = call()
    ran = _bags.calls() - before
    with reftorch.plugins.use_reference_kernels():
        want = call()
    return got, want, ran


def assert_same(got, want):
    for g, w in zip(got, want):
        g, w = np.ascontiguousarray(g.detach().numpy()), np.ascontiguousarray(w.detach().numpy())
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()


BAGS = {
    "even": lambda n: np.arange(0, n, 16),
    "empty-bags": lambda n: np.array([0, 0, 5, 5, n - 1, n]),
    "one-bag": lambda n: np.array([0]),
    "long-bags": lambda n: np.array([0, 300, 301]),   # past the 128-term blocks: split sums
}


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("bag_kind", list(BAGS))
@pytest.mark.parametrize("mode", [SUM, MEAN, MAX])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_embedding_bag_matches_reference_bit_for_bit(dtype, bag_kind, mode, layout):
    rng = np.random.default_rng(1)
    n = 700
    w = weights(40, 9, dtype, 2, layout)
    indices = reftorch.from_numpy(rng.integers(0, 40, n))
    indices.numpy()[:8] = 3                  # a bag of -0.0 rows
    offsets = reftorch.from_numpy(BAGS[bag_kind](n))
    for padding_idx in (None, 3, 5):
        for last in (False, True):
            if last and offsets.numel() < 2:
                continue
            got, want, ran = run_both(lambda: reftorch.embedding_bag(
                w, indices, offsets, mode=mode, include_last_offset=last,
                padding_idx=padding_idx))
            assert ran == 1
            assert_same(got, want)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_per_sample_weights_and_one_column(dtype):
    rng = np.random.default_rng(3)
    for dim in (1, 130):
        w = weights(50, dim, dtype, 4)
        indices = reftorch.from_numpy(rng.integers(0, 50, 200))
        offsets = reftorch.from_numpy(np.array([0, 7, 7, 150]))
        scales = reftorch.from_numpy(rng.standard_normal(200).astype(dtype.numpy_dtype))
        got, want, ran = run_both(lambda: reftorch.embedding_bag(
            w, indices, offsets, mode=SUM, per_sample_weights=scales, padding_idx=11))
        assert ran == 1
        assert_same(got, want)


def test_a_bag_of_many_entries():
    """20,000 entries in one bag: its pairwise sum splits 8 levels deep (each level's partial
    sum needs a scratch row of its own)."""
    rng = np.random.default_rng(13)
    w = weights(100, 16, F32, 14)
    indices = reftorch.from_numpy(rng.integers(0, 100, 20000))
    offsets = reftorch.tensor([0, 3, 20000])
    for mode in (SUM, MEAN):
        got, want, ran = run_both(lambda: reftorch.embedding_bag(w, indices, offsets, mode=mode))
        assert ran == 1
        assert_same(got, want)


@pytest.mark.parametrize("isa", _bags.supported_isas())
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_every_instruction_set_gives_the_reference_bits(isa, dtype):
    """The sums' clones: rows of 37 columns (vector bodies and tails), bags of 1 to 300 terms
    (in order, one block of 8 running sums, split), weighted and not."""
    rng = np.random.default_rng(15)
    w = weights(400, 37, dtype, 16)
    indices = reftorch.from_numpy(rng.integers(0, 400, 600))
    offsets = reftorch.tensor([0, 1, 6, 140, 600 - 300])
    scales = reftorch.from_numpy(rng.standard_normal(600).astype(dtype.numpy_dtype))
    previous = _bags.set_isa(isa)
    try:
        for mode, psw in ((SUM, None), (MEAN, None), (SUM, scales)):
            got, want, ran = run_both(lambda: reftorch.embedding_bag(
                w, indices, offsets, mode=mode, per_sample_weights=psw))
            assert ran == 1
            assert_same(got, want)
    finally:
        _bags.set_isa(previous)


def test_the_module_and_functional_forms_run_in_c():
    reftorch.manual_seed(0)
    bag = reftorch.nn.EmbeddingBag(1000, 32, mode="mean")
    indices = reftorch.randint(0, 1000, (16, 20))      # 2-D input: bags of 20
    got, want, ran = run_both(lambda: bag(indices))
    assert ran == 1
    assert_same([got], [want])


def test_bad_indices_raise_as_the_reference_does():
    w = weights(10, 4, F32, 5)
    offsets = reftorch.tensor([0, 2])
    for bad in (10, -1):
        indices = reftorch.tensor([1, 2, bad, 3])
        before = _bags.calls()
        with pytest.raises(RuntimeError, match=f"found idx to be {bad}"):
            reftorch.embedding_bag(w, indices, offsets)
        assert _bags.calls() == before


def test_max_ties_nan_and_its_gradient():
    """Ties keep the first entry holding the maximum; a NaN in a column makes it NaN; the
    gradient flows to the winning rows (through the reference's derivative row)."""
    w = reftorch.tensor([[1.0, 2.0], [1.0, float("nan")], [3.0, 2.0], [-1.0, 5.0]],
                        requires_grad=True)
    indices = reftorch.tensor([0, 1, 2, 1, 0, 3, 3])
    offsets = reftorch.tensor([0, 2, 3, 5])
    got, want, ran = run_both(lambda: reftorch.embedding_bag(w, indices, offsets, mode=MAX))
    assert ran == 1
    assert_same(got, want)
    assert got[3].tolist() == [[0, 0], [2, 2], [1, 0], [3, 3]]
    reftorch.nn.functional.embedding_bag(indices, w, offsets, mode="max").sum().backward()
    grad = w.grad.clone()
    w.grad = None
    with reftorch.plugins.use_reference_kernels():
        reftorch.nn.functional.embedding_bag(indices, w, offsets, mode="max").sum().backward()
    assert_same([grad], [w.grad])


def test_declines_bags_out_of_order_and_weighted_max():
    w = weights(10, 4, F32, 6)
    indices = reftorch.tensor([1, 2, 3, 4, 5, 6])
    assert bags.embedding_bag_kernel(None, (w, indices, reftorch.tensor([0, 4, 2]), None),
                                     (F32,) * 3, {"mode": SUM, "include_last_offset": False,
                                                  "padding_idx": -1}) is NotImplemented
    assert bags.embedding_bag_kernel(None, (w, indices, reftorch.tensor([0, 2]),
                                            reftorch.ones(6)),
                                     (F32,) * 3, {"mode": MAX, "include_last_offset": False,
                                                  "padding_idx": -1}) is NotImplemented


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(7)
    w = weights(5000, 64, F32, 8)
    indices = reftorch.from_numpy(rng.integers(0, 5000, 40000))
    offsets = reftorch.from_numpy(np.sort(rng.integers(0, 40000, 300)))
    offsets.numpy()[0] = 0
    outs = []
    previous = _bags.set_num_threads(1)
    try:
        for threads in (1, 2):
            _bags.set_num_threads(threads)
            outs.append([t.numpy().copy() for mode in (SUM, MAX)
                         for t in reftorch.embedding_bag(w, indices, offsets, mode=mode)])
    finally:
        _bags.set_num_threads(previous)
    for one, two in zip(*outs):
        assert one.tobytes() == two.tobytes()


def test_c_entry_point_checks_its_arguments():
    w = np.zeros(12, np.float32)
    out = np.zeros(8, np.float32)
    valid = np.ones(3, np.bool_)
    good = dict(indices=np.array([0, 1, 2]), starts=np.array([0, 1]), ends=np.array([1, 3]))

    def call(**changed):
        a = dict(good, **changed)
        _bags.bag_sums(w, 0, (3, 4), (4, 1), a["indices"], valid, a["starts"], a["ends"],
                       None, None, out)
    call()
    with pytest.raises(IndexError):
        call(indices=np.array([0, 3, 1]))                  # row 3 of 3
    with pytest.raises(ValueError):
        call(ends=np.array([1, 4]))                        # past the 3 entries
    with pytest.raises(ValueError):
        call(starts=np.array([2, 1]), ends=np.array([1, 3]))   # start after end
    with pytest.raises(ValueError):
        _bags.bag_sums(w, 0, (4, 4), (4, 1), good["indices"], valid, good["starts"],
                       good["ends"], None, None, out)      # the weight view overruns w
    with pytest.raises(TypeError):
        _bags.bag_sums(w, 0, (3, 4), (4, 1), good["indices"].astype(np.int32), valid,
                       good["starts"], good["ends"], None, None, out)


@pytest.mark.parametrize("bag_kind", list(BAGS))
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 4])
def test_bag_layout_matches_the_references(bag_kind, include_last_offset, padding_idx):
    """The C pass gives the reference's bag of every entry (clipped at 0, as offset2bag),
    valid entries and bag sizes."""
    from reftorch._ops.nn_embedding import bag_layout
    n, rows = 320, 10
    indices = np.random.default_rng(9).integers(0, rows, n)
    offsets = BAGS[bag_kind](n)
    flat, starts, _, bag, valid, bag_size = bag_layout(rows, indices, offsets,
                                                       include_last_offset, padding_idx)
    starts = np.ascontiguousarray(starts)
    got_bag, got_valid = np.full(n, -7, np.int64), np.zeros(n, np.bool_)
    got_size = np.full(starts.size, -7, np.int64)
    assert _bags.bag_layout(flat, rows, starts, padding_idx, got_bag, got_valid,
                            got_size) == -1
    np.testing.assert_array_equal(got_bag, np.clip(bag, 0, None))
    np.testing.assert_array_equal(got_valid, valid)
    np.testing.assert_array_equal(got_size, bag_size)


def test_bag_layout_reports_bad_indices_and_disorder_without_writing():
    indices, starts = np.array([0, 1, 2, 1]), np.array([0, 2])
    bag, valid, size = np.full(4, -7, np.int64), np.zeros(4, np.bool_), np.zeros(2, np.int64)
    assert _bags.bag_layout(np.array([0, 1, 3, 5]), 3, starts, -1, bag, valid, size) == 2
    assert _bags.bag_layout(np.array([0, -1, 3]), 3, starts, -1, bag[:3], valid[:3], size) == 1
    assert _bags.bag_layout(indices, 3, np.array([2, 0]), -1, bag, valid, size) == -2
    assert (bag == -7).all()
    with pytest.raises(ValueError):
        _bags.bag_layout(indices, 3, starts, -1, bag[:3], valid, size)     # short offset2bag
    with pytest.raises(ValueError):
        _bags.bag_layout(indices, 3, starts, -1, bag, valid, size[:1])     # short bag_size
    with pytest.raises(TypeError):
        _bags.bag_layout(indices.astype(np.int32), 3, starts, -1, bag, valid, size)
    frozen = bag.copy()
    frozen.flags.writeable = False
    with pytest.raises((TypeError, ValueError, BufferError)):
        _bags.bag_layout(indices, 3, starts, -1, frozen, valid, size)
