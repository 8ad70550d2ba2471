"""The C plugin (plugin_cpu/, distribution reftorch-cpu): it loads, serves float32/float64
add, sub, mul, div and copy_ on cpu, gives the reference kernels' results bit for bit on every
layout, and its raw C entry points reject bad arguments with Python exceptions.

Every comparison runs the same code twice on fresh inputs: once with the plugin, once inside
`reftorch.plugins.use_reference_kernels()`. The C call counter (`_C.calls()`) tells whether
the C loop really ran or the kernel declined.
"""
import os
from importlib import metadata

import numpy as np
import pytest

import reftorch
from reftorch import _dispatch

try:
    import reftorch_cpu
    from reftorch_cpu import _C, kernels
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

F32, F64 = reftorch.float32, reftorch.float64
BIG = (300, 202)    # 60,600 elements: above MIN_NUMEL and the OpenMP size for float32; each
#                     thread's block starts inside a row (30,304 for 2 threads, 20,208 for 3)
MID = (96, 80)      # 7,680 elements: above MIN_NUMEL, one thread


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


@pytest.fixture(params=["threshold", "no-threshold"])
def threshold(request, monkeypatch):
    """Run with the real decline threshold, and with none so small cases reach C too."""
    if request.param == "threshold":
        yield request.param
        return
    monkeypatch.setattr(kernels, "MIN_NUMEL", 0)
    # The binary kernels are also registered with min_numel=MIN_NUMEL (the dispatcher skips
    # them for smaller results): register them with none for the duration of the test.
    ops = [_dispatch.get_op(name) for name in kernels.OPS]
    saved = [op.kernels for op in ops]
    for op in ops:
        op.kernels = {key: [(plugin, fn, 0 if plugin == "cpu" else floor)
                            for plugin, fn, floor in entries]
                      for key, entries in op.kernels.items()}
        op._chains.clear()
    yield request.param
    for op, kernels_before in zip(ops, saved):
        op.kernels = kernels_before
        op._chains.clear()


# ---------------------------------------------------------------------------------------------
# Helpers

def values(shape, dtype, seed, special=True):
    """Random values with the awkward ones mixed in: +-0, +-inf, nan, subnormals, huge."""
    rng = np.random.default_rng(seed)
    a = np.array(rng.standard_normal(shape) * 10, dtype=dtype.numpy_dtype)
    if special and a.size:
        tiny = np.finfo(dtype.numpy_dtype).smallest_subnormal
        big = np.finfo(dtype.numpy_dtype).max
        picks = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny * 3, big, -big, 1.0]
        flat = a.reshape(-1)
        where = rng.choice(flat.size, size=min(flat.size, 40), replace=False)
        flat[where] = np.array(picks, dtype=a.dtype)[np.arange(where.size) % len(picks)]
    return a


def host(t):
    return np.array(t.numpy())


def assert_same(got, want):
    """Same dtype, shape and values; nan where nan, and the same bits everywhere else."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = {4: np.uint32, 8: np.uint64}[got.itemsize]
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


def run_both(case):
    """case() -> list of tensors to compare; run with the plugin and on the reference.
    Returns how many C calls the plugin run made."""
    before = _C.calls()
    got = [host(t) for t in case()]
    ran = _C.calls() - before
    with reftorch.plugins.use_reference_kernels():
        want = [host(t) for t in case()]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)
    return ran


# Operand layouts: each builds a fresh tensor whose logical shape broadcasts to `shape` (2-D).
def contiguous(shape, dtype, seed):
    return reftorch.from_numpy(values(shape, dtype, seed))


def transposed(shape, dtype, seed):
    return reftorch.from_numpy(values(shape[::-1], dtype, seed)).t()


def stepped(shape, dtype, seed):
    """Every other column of a wider base: as_strided with step 2."""
    r, c = shape
    base = reftorch.from_numpy(values((r, 2 * c + 1), dtype, seed))
    return base.as_strided((r, c), (2 * c + 1, 2), 1)


def narrowed_selected(shape, dtype, seed):
    """A middle slab of a 3-D base: select + narrow, rows not adjacent in memory."""
    r, c = shape
    base = reftorch.from_numpy(values((r, 3, c + 4), dtype, seed))
    return base.select(1, 2).narrow(1, 3, c)


def expanded_row(shape, dtype, seed):
    """One row broadcast with an explicit stride-0 dim."""
    return reftorch.from_numpy(values((1, shape[1]), dtype, seed)).expand(*shape)


def row(shape, dtype, seed):
    """A 1-D tensor that broadcasts over the rows."""
    return reftorch.from_numpy(values((shape[1],), dtype, seed))


def column(shape, dtype, seed):
    """A column made with unsqueeze, broadcast over the columns."""
    return reftorch.from_numpy(values((shape[0],), dtype, seed)).unsqueeze(1)


def zero_dim(shape, dtype, seed):
    return reftorch.from_numpy(values((), dtype, seed, special=False))


LAYOUTS = [contiguous, transposed, stepped, narrowed_selected, expanded_row, row, column,
           zero_dim]
PAIRS = [(contiguous, contiguous), (transposed, transposed), (contiguous, transposed),
         (transposed, contiguous), (stepped, narrowed_selected), (contiguous, expanded_row),
         (contiguous, row), (column, row), (transposed, column), (zero_dim, stepped),
         (contiguous, zero_dim)]
pair_ids = [f"{a.__name__}-{b.__name__}" for a, b in PAIRS]

OPS = [("add", {}), ("add", {"alpha": 2.5}), ("add", {"alpha": -3}), ("sub", {}),
       ("sub", {"alpha": 0.1}), ("mul", {}), ("div", {})]
op_ids = [f"{name}{'-' + str(p['alpha']) if p else ''}" for name, p in OPS]


# ---------------------------------------------------------------------------------------------
# Loading and registration

def test_entry_point_is_declared():
    points = {ep.name: ep.value for ep in metadata.entry_points(group="reftorch.plugins")}
    assert points.get("cpu") == "reftorch_cpu:register"


def test_loads_with_reftorch():
    choice = os.environ.get("REFTORCH_PLUGINS", "all").strip().lower()
    if choice not in ("", "all") and "cpu" not in choice.split(","):
        pytest.skip(f"REFTORCH_PLUGINS={choice!r} leaves the cpu plugin out")
    assert "cpu" not in reftorch.plugins.failed()
    info = reftorch.plugins.loaded()["cpu"]
    assert info.module == "reftorch_cpu"


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "copy_"])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_serves_float_ops_on_cpu(op, dtype):
    assert reftorch.plugins.serving(op, "cpu", dtype) == "cpu"


def test_leaves_other_dtypes_to_the_reference():
    assert reftorch.plugins.serving("add", "cpu", reftorch.int64) == "reference"
    assert reftorch.plugins.serving("add", "cpu", reftorch.float16) == "reference"


def test_use_reference_kernels_bypasses_the_plugin():
    with reftorch.plugins.use_reference_kernels():
        assert reftorch.plugins.serving("add", "cpu", F32) == "reference"
        before = _C.calls()
        a = contiguous(BIG, F32, 0)
        a + a
        assert _C.calls() == before


def test_c_module_facts():
    assert _C.MAX_NDIM >= 8
    assert _C.isa() in _C.supported_isas()
    assert _C.supported_isas()[0] == "baseline"
    assert kernels.MIN_NUMEL > 0


# ---------------------------------------------------------------------------------------------
# Results match the reference: functional, method, operator, in-place and out= forms

@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,params", OPS, ids=op_ids)
@pytest.mark.parametrize("left,right", PAIRS, ids=pair_ids)
def test_functional_matches_reference(left, right, name, params, dtype, threshold):
    fn = getattr(reftorch, name)
    ran = run_both(lambda: [fn(left(BIG, dtype, 1), right(BIG, dtype, 2), **params)])
    assert ran == 1  # BIG is above the threshold: the C loop ran


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,params", OPS, ids=op_ids)
@pytest.mark.parametrize("left", LAYOUTS[:4], ids=lambda f: f.__name__)
@pytest.mark.parametrize("right", LAYOUTS, ids=lambda f: f.__name__)
def test_inplace_matches_reference(left, right, name, params, dtype, threshold):
    """a.add_(b) writes into a view of any layout; the whole base storage must match (so no
    element outside the view was touched)."""
    def case():
        a = left(MID, dtype, 3)
        result = getattr(a, name + "_")(right(MID, dtype, 4), **params)
        assert result is a
        return [a, reftorch.from_numpy(a._storage.array)]  # the view, and all its storage
    assert run_both(case) == 1


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,params", OPS, ids=op_ids)
@pytest.mark.parametrize("out_layout", [contiguous, transposed, stepped, narrowed_selected],
                         ids=lambda f: f.__name__)
def test_out_matches_reference(out_layout, name, params, dtype, threshold):
    fn = getattr(reftorch, name)

    def case():
        out = out_layout(MID, dtype, 5)
        result = fn(transposed(MID, dtype, 6), column(MID, dtype, 7), out=out, **params)
        assert result is out
        return [out, reftorch.from_numpy(out._storage.array)]
    assert run_both(case) == 1


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_method_and_operator_forms(name):
    sym = {"add": "__add__", "sub": "__sub__", "mul": "__mul__", "div": "__truediv__"}[name]
    assert run_both(lambda: [getattr(contiguous(BIG, F32, 8), name)(stepped(BIG, F32, 9))]) == 1
    assert run_both(lambda: [getattr(contiguous(BIG, F32, 8), sym)(transposed(BIG, F32, 9))]) == 1
    # a Python scalar is wrapped as a 0-dim tensor of the tensor's dtype: still the C loop
    assert run_both(lambda: [getattr(contiguous(BIG, F64, 8), sym)(0.75)]) == 1


@pytest.mark.parametrize("shape", [(0,), (0, 5), (7, 0), ()], ids=str)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_empty_and_zero_dim(shape, name, dtype, threshold):
    fn = getattr(reftorch, name)
    ran = run_both(lambda: [fn(contiguous(shape, dtype, 1), contiguous(shape, dtype, 2))])
    assert ran == (1 if threshold == "no-threshold" else 0)

    def inplace():
        a = contiguous(shape, dtype, 3)
        getattr(a, name + "_")(zero_dim(shape, dtype, 4))
        return [a]
    run_both(inplace)


def test_result_layout_follows_a_dense_input():
    """Like PyTorch: a.t() + b.t() stays transposed; a broadcast first operand defers."""
    a, b = transposed(BIG, F32, 1), transposed(BIG, F32, 2)
    assert (a + b).stride() == (1, BIG[0])
    assert (row(BIG, F32, 3) + a).stride() == (1, BIG[0])
    assert (contiguous(BIG, F32, 4) + a).stride() == (BIG[1], 1)


def test_results_do_not_depend_on_thread_count():
    a, b = contiguous((1000, 300), F32, 1), transposed((1000, 300), F32, 2)
    previous = _C.set_num_threads(1)
    try:
        results = []
        for threads in (1, 2, 3, 1):
            _C.set_num_threads(threads)
            results.append(host(a * b + a / b))
    finally:
        _C.set_num_threads(previous)
    for r in results[1:]:
        assert_same(r, results[0])


TRANSPOSING_COPIES = {
    # (base shape, view of the base): the copy's source runs along another dim than its output
    "t": ((130, 200), lambda x: x.t()),
    "batched t": ((3, 70, 129), lambda x: x.transpose(1, 2)),
    "NCHW to NHWC": ((2, 64, 9, 11), lambda x: x.permute(0, 2, 3, 1)),
    "t of a slice": ((300, 150), lambda x: x[5:200, 1:100].t()),
    "reversed dims": ((64, 5, 70), lambda x: x.permute(2, 1, 0)),   # k not next to last
}


@pytest.mark.parametrize("dtype", [F32, F64], ids=lambda d: d.name)
@pytest.mark.parametrize("case", TRANSPOSING_COPIES)
@pytest.mark.parametrize("threads", [1, 2])
def test_transposing_copies_in_tiles_give_the_reference(case, dtype, threads):
    """Copies walked in tiles (a transpose: the tile loop, with edge tiles) move every element
    where the reference puts it, on any thread count."""
    shape, view = TRANSPOSING_COPIES[case]
    base = reftorch.from_numpy(np.arange(np.prod(shape), dtype=dtype.numpy_dtype).reshape(shape))
    previous = _C.set_num_threads(threads)
    try:
        before = _C.calls()
        got = view(base).contiguous()
        ran = _C.calls() - before
    finally:
        _C.set_num_threads(previous)
    with reftorch.plugins.use_reference_kernels():
        want = view(base).contiguous()
    assert ran == 1
    assert_same(host(got), host(want))


def test_set_num_threads_reaches_every_module_from_every_thread():
    """reftorch.set_num_threads sets the C kernels' count, process-wide as PyTorch's: in
    every extension module, and in a Python thread started before or after the call."""
    import importlib
    import threading
    modules = [importlib.import_module(f"reftorch_cpu._{name}")
               for name in ("C", "reduce", "gemm", "nn_rows", "index", "sort", "unary")]
    previous = reftorch.get_num_threads()

    def counts_in_a_new_thread():
        seen = []
        worker = threading.Thread(target=lambda: seen.extend(m.num_threads() for m in modules))
        worker.start()
        worker.join()
        return seen

    try:
        for threads in (1, 3, 2):
            reftorch.set_num_threads(threads)
            assert [m.num_threads() for m in modules] == [threads] * len(modules)
            assert counts_in_a_new_thread() == [threads] * len(modules)
    finally:
        reftorch.set_num_threads(previous)
    assert _C.num_threads() == previous


@pytest.mark.parametrize("isa", _C.supported_isas())
def test_every_instruction_set_matches_reference(isa):
    previous = _C.set_isa(isa)
    try:
        for name, params in OPS:
            fn = getattr(reftorch, name)
            for dtype in (F32, F64):
                assert run_both(lambda: [fn(contiguous(BIG, dtype, 1), contiguous(BIG, dtype, 2),
                                            **params),
                                         fn(contiguous(BIG, dtype, 3), zero_dim(BIG, dtype, 4),
                                            **params),
                                         fn(zero_dim(BIG, dtype, 5), contiguous(BIG, dtype, 6),
                                            **params)]) == 3
    finally:
        _C.set_isa(previous)


# ---------------------------------------------------------------------------------------------
# Calls the C loop must not take: the kernel declines and the reference answers

def declined(case):
    assert run_both(case) == 0


def test_declines_div_with_rounding_mode():
    for mode in ("trunc", "floor"):
        declined(lambda: [reftorch.div(contiguous(BIG, F32, 1), contiguous(BIG, F32, 2),
                                       rounding_mode=mode)])


def test_declines_mixed_dtypes():
    declined(lambda: [contiguous(BIG, F32, 1) + contiguous(BIG, F64, 2)])
    declined(lambda: [contiguous(BIG, F32, 1) + reftorch.from_numpy(
        np.arange(BIG[0] * BIG[1], dtype=np.int32).reshape(BIG))])
    declined(lambda: [contiguous(BIG, F32, 1) + reftorch.from_numpy(np.array(2.0))])  # f64 0-dim

    def into_float64():
        out = contiguous(BIG, F64, 3)
        reftorch.add(contiguous(BIG, F32, 1), contiguous(BIG, F32, 2), out=out)
        return [out]
    declined(into_float64)


def test_declines_small_calls():
    n = kernels.MIN_NUMEL - 1
    declined(lambda: [contiguous((n,), F32, 1) + contiguous((n,), F32, 2)])


def test_loop_geometry_is_remembered_per_layout():
    """A broadcast or strided geometry is worked out once per layout and reused (the same
    answer for any operand of that layout, wherever its data starts); the memory is bounded,
    and a call after it was cleared is still right."""
    memory = kernels._strided_geometry
    memory.cache_clear()
    x = contiguous((128, 96), F32, 1)
    cases = [(x, [contiguous((96,), F32, 2)]), (x, [x.t().contiguous().t()]),
             (x, [reftorch.tensor(0.5)]), (x.t(), [contiguous((128, 1), F32, 3).t()]),
             (x[:, ::2], [x[:, 1::2]])]
    for out, inputs in cases:
        first = kernels._geometry(out, inputs, out.numel())
        layouts = tuple((t._shape, t._strides) for t in inputs)
        assert first == memory.__wrapped__(out._shape, out._strides, layouts)
        assert kernels._geometry(out, inputs, out.numel()) is first
        assert memory.cache_info().currsize <= memory.cache_info().maxsize == 4096
    memory.cache_clear()
    # (the first two: one shape, other strides; the last two: one layout, other offsets)
    assert run_both(lambda: [x[:, ::2] + x[:, 1::2], x[:, ::2] + contiguous((128, 48), F32, 4),
                             x + contiguous((96,), F32, 2), x[1:, 1:] * 0.5,
                             x[:-1, :-1] * 0.5]) == 5


def test_declines_beyond_max_ndim(monkeypatch):
    """12 dims that cannot be merged: a contiguous, b fully reversed."""
    monkeypatch.setattr(kernels, "MIN_NUMEL", 0)
    shape = (2,) * 12
    rev = tuple(2 ** i for i in range(12))

    def case():
        a = contiguous(shape, F32, 1)
        b = reftorch.from_numpy(values((4096,), F32, 2)).as_strided(shape, rev)
        return [a + b]
    declined(case)


def test_declines_non_real_alpha():
    declined(lambda: [reftorch.add(contiguous(BIG, F64, 1), contiguous(BIG, F64, 2),
                                   alpha=np.float64(2.0))])


def test_partial_overlap_is_left_to_the_reference():
    def transposed_self():
        a = contiguous((100, 100), F32, 1)
        a.add_(a.t())
        return [a]
    declined(transposed_self)

    def shifted_out():
        base = contiguous((1, 10001), F64, 2).select(0, 0)
        reftorch.mul(base.narrow(0, 0, 10000), 3.0, out=base.narrow(0, 1, 10000))
        return [base]
    declined(shifted_out)

    def two_storages_over_one_buffer():
        array = values((10000,), F32, 3)
        a, alias = reftorch.from_numpy(array), reftorch.from_numpy(array[1:])
        a.narrow(0, 0, 9999).add_(alias)
        return [a]
    declined(two_storages_over_one_buffer)


def test_disjoint_slices_of_one_tensor_copy_in_c():
    """Two boxes of one contiguous block whose spans interleave but whose elements differ
    (circular padding's wrapped edges): the copy runs in C, with the reference's result."""
    def wrapped_columns():
        a = contiguous((64, 4, 40, 44), F32, 4)
        a[..., :2] = a[..., 40:42]               # columns 40-41 into 0-1
        a[:, :, :3] = a[:, :, 30:33]             # rows 30-32 into 0-2, whole rows
        a[:, 1::2] = a[:, ::2]                   # every other channel into the next
        return [a]
    assert run_both(wrapped_columns) == 3


@pytest.mark.parametrize("seed", range(40))
def test_overlap_check_never_misses_a_shared_element(seed):
    """kernels._overlaps against the elements themselves, over random slices (steps too)
    of one contiguous block: where two views share an element it must say so; two slices
    of one block that are apart along a dim, or interleaved by steps, it must see apart."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 7, rng.integers(1, 5)))
    ids = np.arange(int(np.prod(shape))).reshape(shape)
    steps = [int(rng.integers(1, 3)) for _ in shape]
    for _ in range(200):
        views = []
        for _ in range(2):
            lows = [int(rng.integers(0, n)) for n in shape]
            views.append(tuple(slice(lo, None, st) for lo, st in zip(lows, steps)))
        size = tuple(min(len(range(n)[v]) for v in (a, b))
                     for n, a, b in zip(shape, *views))
        a, b = (ids[v][tuple(slice(0, m) for m in size)] for v in views)
        strides = tuple(st // ids.itemsize for st in a.strides)
        shared = bool(np.intersect1d(a, b).size)
        says = kernels._overlaps(int(a.flat[0]) if a.size else 0, a.shape, strides,
                                 int(b.flat[0]) if b.size else 0, strides)
        assert says or not shared, (shape, views, size)
        apart = any(lo_a + m - 1 < lo_b or lo_b + m - 1 < lo_a
                    for lo_a, lo_b, m in zip((int(np.unravel_index(a.flat[0], shape)[k])
                                              for k in range(len(shape))),
                                             (int(np.unravel_index(b.flat[0], shape)[k])
                                              for k in range(len(shape))), size))
        if a.size and steps == [1] * len(shape) and apart:
            assert not says, (shape, views, size)
    # rows that do not nest in the next dim's step (windows as as_strided makes them)
    for _ in range(200):
        rows, cols = (int(n) for n in rng.integers(1, 5, 2))
        strides = (int(rng.integers(cols, cols + 4)), 1)
        starts = [int(o) for o in rng.integers(0, 3 * strides[0], 2)]
        elements = [{o + i * strides[0] + j for i in range(rows) for j in range(cols)}
                    for o in starts]
        if elements[0] & elements[1]:
            assert kernels._overlaps(starts[0], (rows, cols), strides, starts[1], strides)


def test_exact_aliasing_runs_in_c():
    def self_add():
        a = contiguous(BIG, F32, 1)
        a.add_(a)
        a.mul_(a.narrow(0, 0, BIG[0]))  # the same view rebuilt: same elements, same order
        return [a]
    assert run_both(self_add) == 2


def test_read_only_out_is_declined():
    array = values(BIG, F32, 1)
    array.flags.writeable = False
    out = reftorch.from_numpy(array)
    before = _C.calls()
    with pytest.raises(Exception) as plugin_error:
        reftorch.add(contiguous(BIG, F32, 2), 1.0, out=out)
    assert _C.calls() == before
    with reftorch.plugins.use_reference_kernels():
        with pytest.raises(type(plugin_error.value)):
            reftorch.add(contiguous(BIG, F32, 2), 1.0, out=out)


# ---------------------------------------------------------------------------------------------
# copy_

@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("src_layout", LAYOUTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dst_layout", LAYOUTS[:4], ids=lambda f: f.__name__)
def test_copy_matches_reference(dst_layout, src_layout, dtype, threshold):
    def case():
        dst = dst_layout(MID, dtype, 1)
        assert dst.copy_(src_layout(MID, dtype, 2)) is dst
        return [dst, reftorch.from_numpy(dst._storage.array)]
    assert run_both(case) == 1


def test_copy_declines_dtype_conversion():
    def case():
        dst = contiguous(BIG, F64, 1)
        dst.copy_(contiguous(BIG, F32, 2))
        return [dst]
    declined(case)


def test_clone_and_contiguous_use_copy():
    assert run_both(lambda: [transposed(BIG, F32, 1).contiguous()]) == 1
    assert run_both(lambda: [stepped(BIG, F64, 2).clone()]) == 1


# ---------------------------------------------------------------------------------------------
# flip: the copy loop reading backwards

FLIPS = {"both dims": (0, 1), "rows": (0,), "within rows": (1,), "no dims": ()}


@pytest.mark.parametrize("isa", _C.supported_isas())
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("layout", [contiguous, transposed, stepped, narrowed_selected],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dims", FLIPS.values(), ids=FLIPS.keys())
def test_flip_matches_reference(dims, layout, dtype, threads, isa):
    """Every element lands where the reference's flip puts it (bits, NaN payloads kept by the
    copy), in the reference's layout, whatever the input's strides, ISA and thread count."""
    previous_isa, previous_threads = _C.set_isa(isa), _C.set_num_threads(threads)
    try:
        x = layout((130, 201), dtype, 7)   # odd rows: a reversed run ends mid-vector
        before = _C.calls()
        got = reftorch.flip(x, dims)
        ran = _C.calls() - before
    finally:
        _C.set_isa(previous_isa), _C.set_num_threads(previous_threads)
    with reftorch.plugins.use_reference_kernels():
        want = reftorch.flip(x, dims)
    assert ran == 1
    assert got.stride() == want.stride()
    assert_same(host(got), host(want))


def test_flip_of_more_dims_and_the_small_cases(threshold):
    x = reftorch.from_numpy(values((6, 33, 40), F32, 8))
    for dims in ((1,), (0, 2), (2, 1, 0), (-1,)):
        assert run_both(lambda: [reftorch.flip(x, dims), x.permute(2, 0, 1).flip(dims)]) == 2
    zero_dim_x, empty = reftorch.tensor(2.5), reftorch.zeros(0, 5)
    ran = run_both(lambda: [reftorch.flip(zero_dim_x, ()), reftorch.flip(empty, (0,))])
    assert ran == (1 if threshold == "no-threshold" else 0)   # the empty one always declines


# ---------------------------------------------------------------------------------------------
# The raw C entry points: bad arguments raise TypeError/ValueError, never crash

def buf(n=16, dtype=np.float32):
    return np.arange(n, dtype=dtype)


def binary_args(**change):
    args = dict(op=_C.ADD, shape=[4, 4], out=buf(), out_offset=0, out_strides=[4, 1],
                a=buf(), a_offset=0, a_strides=[4, 1], b=buf(), b_offset=0, b_strides=[0, 1],
                alpha=1.0)
    args.update(change)
    return list(args.values())


def copy_args(**change):
    args = dict(shape=[4, 4], out=buf(), out_offset=0, out_strides=[4, 1], src=buf(),
                src_offset=0, src_strides=[1, 4])
    args.update(change)
    return list(args.values())


def test_raw_calls_work():
    out = np.zeros(16, np.float32)
    _C.binary(*binary_args(out=out, alpha=2.0))
    np.testing.assert_array_equal(out.reshape(4, 4), buf().reshape(4, 4) + 2 * buf()[:4])
    # negative strides are fine as long as every element is inside the buffer
    out = np.zeros(16, np.float64)
    _C.binary(_C.MUL, [16], out, 15, [-1], buf(dtype=np.float64), 0, [1],
              buf(dtype=np.float64), 0, [1], 1.0)
    np.testing.assert_array_equal(out, (buf(dtype=np.float64) ** 2)[::-1])
    out = np.zeros(16, np.float32)
    _C.copy(*copy_args(out=out))
    np.testing.assert_array_equal(out.reshape(4, 4), buf().reshape(4, 4).T)
    # 0-dim and empty shapes
    out = np.zeros(3, np.float32)
    _C.binary(_C.SUB, [], out, 2, [], buf(), 5, [], buf(), 1, [], 1.0)
    assert out[2] == 4.0
    _C.binary(_C.DIV, [0, 3], out, 0, [3, 1], buf(), 0, [3, 1], buf(), 0, [3, 1], 1.0)
    _C.copy([], out, 0, [], buf(), 7, [])
    assert out[0] == 7.0


def _random_view(rng, shape, distinct):
    """(offset, strides, buffer length) of a random view of `shape`: dims in any order, gaps,
    negative strides, and (unless `distinct`) broadcast dims."""
    ndim = len(shape)
    order = rng.permutation(ndim)
    strides, step = [0] * ndim, int(rng.integers(1, 3))
    for d in order:
        strides[d] = step
        step *= shape[d] + int(rng.integers(0, 2))
    for d in range(ndim):
        if rng.random() < 0.25:
            strides[d] = -strides[d]
        if not distinct and rng.random() < 0.2:
            strides[d] = 0
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    offset = -low + int(rng.integers(0, 3))
    return offset, strides, offset + high + 1 + int(rng.integers(0, 3))


def _visited(shape, offset, strides):
    index = np.full(shape, offset, dtype=np.int64)
    for d, grid in enumerate(np.indices(shape, dtype=np.int64) if shape else []):
        index += grid * strides[d]
    return index


@pytest.mark.parametrize("threads", [1, 2])
def test_raw_binary_on_random_geometries(threads):
    """Random strided geometries (up to 8 dims, negative and zero strides, sizes large
    enough for the parallel path) against NumPy indexing."""
    rng = np.random.default_rng(threads)
    previous = _C.set_num_threads(threads)
    try:
        for trial in range(150):
            dtype = (np.float32, np.float64)[trial % 2]
            ndim = int(rng.integers(0, _C.MAX_NDIM + 1))
            shape = [int(rng.integers(1, 5)) for _ in range(ndim)]
            if ndim and trial % 3 == 0:
                shape[int(rng.integers(ndim))] = int(rng.integers(5000, 40000))
            if np.prod(shape) > 200_000:
                continue
            views = [_random_view(rng, shape, distinct=(k == 0)) for k in range(3)]
            bufs = [rng.standard_normal(length).astype(dtype) for _, _, length in views]
            op = int(rng.integers(0, 4))
            alpha = float(dtype(rng.standard_normal()))
            want = bufs[0].copy()
            idx = [_visited(shape, off, st) for off, st, _ in views]
            a, b = bufs[1][idx[1]], bufs[2][idx[2]]
            want[idx[0]] = [a + b * dtype(alpha), a - b * dtype(alpha), a * b, a / b][op]
            args = []
            for buffer, (offset, strides, _) in zip(bufs, views):
                args += [buffer, offset, strides]
            _C.binary(op, shape, *args, alpha)
            assert_same(bufs[0], want)
    finally:
        _C.set_num_threads(previous)


BAD_BINARY = {
    "no arguments": ([], TypeError),
    "op not an int": (binary_args(op="add"), TypeError),
    "unknown op": (binary_args(op=99), ValueError),
    "negative op": (binary_args(op=-1), ValueError),
    "shape not a sequence": (binary_args(shape=5), TypeError),
    "shape of floats": (binary_args(shape=[4.0, 4]), TypeError),
    "too many dims": (binary_args(shape=[1] * 9, out_strides=[1] * 9, a_strides=[1] * 9,
                                  b_strides=[1] * 9), ValueError),
    "negative size": (binary_args(shape=[-4, 4]), ValueError),
    "huge size": (binary_args(shape=[2 ** 40, 2 ** 40]), ValueError),
    "size beyond int64": (binary_args(shape=[2 ** 70, 1]), ValueError),
    "strides too short": (binary_args(a_strides=[1]), ValueError),
    "strides not ints": (binary_args(b_strides=[0, None]), TypeError),
    "negative offset": (binary_args(a_offset=-1), ValueError),
    "offset not an int": (binary_args(a_offset=1.0), TypeError),
    "reads past the end": (binary_args(a_offset=1), ValueError),
    "writes past the end": (binary_args(out_strides=[5, 1]), ValueError),
    "reads before the start": (binary_args(b_strides=[0, -1]), ValueError),
    "stride overflow": (binary_args(a_strides=[2 ** 59, 1]), ValueError),
    "out read-only": (binary_args(out=bytes(64)), TypeError),
    "out read-only array": (binary_args(out=np.frombuffer(bytes(64), np.float32)), TypeError),
    "bytearray": (binary_args(out=bytearray(64)), TypeError),
    "int32 buffer": (binary_args(a=np.arange(16, dtype=np.int32)), TypeError),
    "float16 buffer": (binary_args(a=np.arange(16, dtype=np.float16)), TypeError),
    "mixed float32/float64": (binary_args(b=buf(dtype=np.float64)), TypeError),
    "non-contiguous buffer": (binary_args(a=buf(32)[::2]), TypeError),
    "None buffer": (binary_args(b=None), TypeError),
    "alpha not a number": (binary_args(alpha="2"), TypeError),
}


@pytest.mark.parametrize("args,error", BAD_BINARY.values(), ids=BAD_BINARY.keys())
def test_bad_binary_calls_raise(args, error):
    with pytest.raises(error):
        _C.binary(*args)


BAD_COPY = {
    "too few arguments": (copy_args()[:-1], TypeError),
    "negative size": (copy_args(shape=[4, -1]), ValueError),
    "reads past the end": (copy_args(src_strides=[1, 5]), ValueError),
    "writes past the end": (copy_args(out_offset=16), ValueError),
    "dtype conversion": (copy_args(src=buf(dtype=np.float64)), TypeError),
    "out read-only": (copy_args(out=memoryview(bytes(64)).cast("f")), TypeError),
    "not a buffer": (copy_args(src=[1.0] * 16), TypeError),
}


@pytest.mark.parametrize("args,error", BAD_COPY.values(), ids=BAD_COPY.keys())
def test_bad_copy_calls_raise(args, error):
    with pytest.raises(error):
        _C.copy(*args)


def test_bad_settings_raise():
    with pytest.raises(ValueError):
        _C.set_isa("sse9")
    with pytest.raises(TypeError):
        _C.set_isa(3)
    with pytest.raises(ValueError):
        _C.set_num_threads(0)


def test_forked_child_does_not_hang():
    """libgomp's thread pool does not survive fork(); a child must still finish big ops."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork() on this platform")
    a = contiguous((1000, 300), F32, 1)
    a + a  # the parent has used its OpenMP threads
    pid = os.fork()
    if pid == 0:  # child: exit 0 only if the op completes
        try:
            ok = host(a + a)[0, 0] == host(a)[0, 0] * 2 or np.isnan(host(a)[0, 0])
        finally:
            os._exit(0 if ok else 1)
    import time
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung in a parallel kernel")


# ---------------------------------------------------------------------------------------------
# nll_loss_backward (reftorch_cpu.nn_rows, src/nn_rows.c): the op nll_loss's derivative row
# calls. Its C kernel zeroes the gradient and places -(weight[t] * g) at each target: bit for
# bit the reference's one-hot formula.

def _nll_backward_case(shape, reduction, weighted, ignore_index, seed):
    """(grad_output, self, target, weight, total_weight) as nll_loss's forward makes them."""
    from reftorch._ops import nn_loss
    rng = np.random.default_rng(seed)
    x = reftorch.from_numpy(values(shape, F32 if seed % 2 else F64, seed, special=False))
    n_classes = shape[-1]
    target = reftorch.from_numpy(rng.integers(0, n_classes, shape[:-1]))
    if target.numel() > 1:
        target[1] = ignore_index if ignore_index >= 0 else -100
    weight = reftorch.from_numpy(rng.random(n_classes).astype(x.dtype.numpy_dtype) + 0.5) \
        if weighted else None
    loss, total = reftorch._ops.structured.run(nn_loss.NLL, (x, target, weight),
                                               {"reduction": reduction,
                                                "ignore_index": ignore_index})
    grad = reftorch.from_numpy(values(tuple(loss.shape), x.dtype, seed + 1, special=False))
    return grad, x, target, weight, total


@pytest.mark.parametrize("shape", [(64, 100), (3000, 37), (100,)], ids=str)
@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("seed", [1, 2], ids=["f32", "f64"])
def test_nll_loss_backward_matches_reference(shape, reduction, weighted, seed):
    from reftorch._ops import nn_loss
    from reftorch_cpu import _nn_rows
    args = _nll_backward_case(shape, reduction, weighted, 3, seed)
    before = _nn_rows.calls()
    got = nn_loss.nll_loss_backward(args[0], args[1], args[2], args[3], reduction, 3, args[4])
    assert _nn_rows.calls() == before + 1
    with reftorch.plugins.use_reference_kernels():
        want = nn_loss.nll_loss_backward(args[0], args[1], args[2], args[3], reduction, 3,
                                         args[4])
    assert got.dtype is want.dtype and got.shape == want.shape
    assert host(got).tobytes() == host(want).tobytes()


@pytest.mark.parametrize("dtype", [F32, F64])
def test_nll_loss_backward_is_served_and_runs_in_autograd(dtype):
    from reftorch_cpu import _nn_rows
    assert reftorch.plugins.serving("nll_loss_backward", "cpu", dtype) == "cpu"
    rng = np.random.default_rng(5)
    logits = reftorch.from_numpy(values((500, 40), dtype, 6, special=False))
    target = reftorch.from_numpy(rng.integers(0, 40, 500))

    def grad():
        x = logits.detach().requires_grad_()
        reftorch.nn.functional.nll_loss(x, target).backward()
        return x.grad
    before = _nn_rows.calls()
    got = grad()
    assert _nn_rows.calls() - before == 2  # nll_loss and nll_loss_backward
    with reftorch.plugins.use_reference_kernels():
        want = grad()
    assert host(got).tobytes() == host(want).tobytes()


def test_nll_loss_backward_threads_and_bad_targets():
    from reftorch._ops import nn_loss
    from reftorch_cpu import _nn_rows
    grad, x, target, weight, total = _nll_backward_case((5000, 50), 1, True, -100, 1)
    previous = _nn_rows.set_num_threads(1)
    try:
        one = host(nn_loss.nll_loss_backward(grad, x, target, weight, 1, -100, total))
        _nn_rows.set_num_threads(3)
        three = host(nn_loss.nll_loss_backward(grad, x, target, weight, 1, -100, total))
    finally:
        _nn_rows.set_num_threads(previous)
    assert one.tobytes() == three.tobytes()
    target[7] = 50
    before = _nn_rows.calls()
    with pytest.raises(IndexError, match="Target 50 is out of bounds"):
        nn_loss.nll_loss_backward(grad, x, target, weight, 1, -100, total)
    assert _nn_rows.calls() == before  # checked before anything ran


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("total_weight", [0.0, 1e-3, 0.7, 3e38], ids=str)
def test_nll_loss_backward_mean_divides_like_the_reference(dtype, total_weight):
    """'mean' divides the incoming gradient by total_weight inside the C kernel: the same
    bits as the reference's division in the element type, for a total weight of 0 (an
    infinite gradient at every kept target), below 1, and one whose quotient underflows."""
    from reftorch._ops import nn_loss
    from reftorch_cpu import _nn_rows
    grad, x, target, weight, _ = _nll_backward_case((300, 20), 1, True, -100, 2)
    grad = reftorch.tensor(-2.5, dtype=dtype)
    x = x.to(dtype)
    weight = weight.to(dtype)
    total = reftorch.tensor(total_weight, dtype=dtype)
    before = _nn_rows.calls()
    got = nn_loss.nll_loss_backward(grad, x, target, weight, 1, -100, total)
    assert _nn_rows.calls() == before + 1
    with reftorch.plugins.use_reference_kernels():
        want = nn_loss.nll_loss_backward(grad, x, target, weight, 1, -100, total)
    assert host(got).tobytes() == host(want).tobytes()


def test_nll_loss_backward_total_weight_needs_one_grad_value():
    from reftorch_cpu import _nn_rows
    out = np.empty(6, np.float32)
    target, one = np.zeros(2, np.int64), np.ones(2, np.float32)
    with pytest.raises(ValueError, match="g_stride must be 0"):
        _nn_rows.nll_loss_backward(one, 0, 1, 2, 3, target, 0, None, 0, -100, out, one, 0)
    with pytest.raises(ValueError, match="total_weight"):   # its offset is past its end
        _nn_rows.nll_loss_backward(one, 0, 0, 2, 3, target, 0, None, 0, -100, out, one, 2)
    _nn_rows.nll_loss_backward(one, 0, 0, 2, 3, target, 0, None, 0, -100, out, one, 1)
    assert out.tolist() == [-1.0, 0.0, 0.0, -1.0, 0.0, 0.0]


@pytest.mark.parametrize("preset", [None, ("OMP_WAIT_POLICY", "ACTIVE"),
                                    ("GOMP_SPINCOUNT", "5")])
def test_loading_leaves_the_openmp_environment_as_it_was(preset):
    """The plugin loads libgomp with a short spin count but restores the environment (and
    never overrides a policy or spin count the user chose)."""
    import subprocess
    import sys
    names = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    env = {k: v for k, v in os.environ.items() if k not in names}
    if preset:
        env[preset[0]] = preset[1]
    code = ("import os, reftorch_cpu; print(os.environ.get('OMP_WAIT_POLICY'), "
            "os.environ.get('GOMP_SPINCOUNT'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()[-2:]
    assert out == [env.get(name, "None") for name in names]


def test_libgomp_is_loaded_spinning_briefly():
    """While the extension loads libgomp, GOMP_SPINCOUNT holds the plugin's short count (read
    by libgomp then), and no wait policy is forced."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = """
import importlib, os
seen = []
real = importlib.import_module
def spy(name, *args):
    if name.endswith("._C"):
        seen.append((os.environ.get("GOMP_SPINCOUNT"), os.environ.get("OMP_WAIT_POLICY")))
    return real(name, *args)
importlib.import_module = spy
import reftorch_cpu
print(seen[0][0], seen[0][1], reftorch_cpu.SPIN_COUNT)
"""
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()[-3:]
    assert out == ["30000", "None", "30000"]


_MALLINFO_PROBE = """
import ctypes, numpy as np
import reftorch_cpu
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                "usmblks", "fsmblks", "uordblks", "fordblks",
                                                "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
block = np.ones(1 << 20, np.float32)    # 4 MiB, written, then freed
del block
print(libc.mallinfo2().fordblks >= 4 << 20)
"""


@pytest.mark.parametrize("setting", [None, "REFTORCH_CPU_MALLOC", "MALLOC_TRIM_THRESHOLD_"])
def test_loading_keeps_freed_memory_for_reuse_unless_told_not_to(setting):
    """With the plugin loaded, glibc keeps a freed 4 MiB block in the heap for the next
    allocation of its size (no fresh pages to fault in); a user's malloc settings, or
    REFTORCH_CPU_MALLOC=default, leave glibc's own policy (such a block goes back to the OS)."""
    import ctypes
    import subprocess
    import sys
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("the C library has no mallinfo2 (not glibc >= 2.33)")
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("AddressSanitizer's allocator replaces glibc's malloc here")
    env = {k: v for k, v in os.environ.items()
           if k not in ("REFTORCH_CPU_MALLOC", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")}
    if setting == "REFTORCH_CPU_MALLOC":
        env[setting] = "default"
    elif setting:
        env[setting] = str(128 * 1024)
    out = subprocess.run([sys.executable, "-c", _MALLINFO_PROBE], env=env, capture_output=True,
                         text=True, check=True).stdout.split()[-1]
    assert out == str(setting is None)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_large_dense_outputs_match_reference_on_every_instruction_set(dtype):
    """Dense outputs of 8 MiB and more are written with streaming stores in the AVX-512F
    and AVX2 clones; same bits as the reference on every clone, from a start that is not 64-byte
    aligned (a view one element in), in place, on 1 and 2 threads."""
    n = (8 << 20) // dtype.itemsize + 37      # just over the streaming threshold, odd tail
    x = reftorch.from_numpy(values((n + 1,), dtype, 1))[1:]
    y = reftorch.from_numpy(values((n,), dtype, 2))
    previous_isa, previous_threads = _C.isa(), _C.set_num_threads(1)
    try:
        for isa in _C.supported_isas():
            _C.set_isa(isa)
            for threads in (1, 2):
                _C.set_num_threads(threads)
                for name, params in OPS:
                    fn = getattr(reftorch, name)
                    assert run_both(lambda: [fn(x, y, **params)]) == 1, (isa, name)
                assert run_both(lambda: [x.clone().mul_(y),
                                         y.clone().sub_(x, alpha=3)]) == 4  # clones are C copies
    finally:
        _C.set_isa(previous_isa)
        _C.set_num_threads(previous_threads)


# ---------------------------------------------------------------------------------------------
# cat: each input copied into its slice of the result

@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_cat_copies_each_input_into_its_slice(dtype):
    """Any input layouts, any dim, the legacy rule that skips 1-D empty tensors: the
    reference's bits (elements moved), one C copy per non-empty input."""
    a, b = contiguous((300, 250), dtype, 1), transposed((300, 250), dtype, 2)
    c = stepped((300, 250), dtype, 3)
    empty = reftorch.empty(0, dtype=dtype)
    assert run_both(lambda: [reftorch.cat([a, b, c])]) == 3
    assert run_both(lambda: [reftorch.cat([a, empty, c], dim=1)]) == 2
    assert run_both(lambda: [reftorch.cat([b[:, :100], c, a[:, 7:]], dim=-1)]) == 3
    flat_a, flat_c = a.reshape(-1), c.reshape(-1)
    assert run_both(lambda: [reftorch.cat([flat_a, empty, flat_c])]) == 2


def test_cat_declines_promotion_channels_last_and_small_results():
    a = contiguous((300, 250), F32, 4)
    declined(lambda: [reftorch.cat([a, contiguous((300, 250), F64, 5)])])   # to promote
    image = reftorch.from_numpy(values((4, 30, 40, 50), F32, 6)).contiguous(
        memory_format=reftorch.channels_last)
    declined(lambda: [reftorch.cat([image, image])])           # laid out channels-last
    declined(lambda: [reftorch.cat([a[:10], a[:10]])])          # small: NumPy's one call
