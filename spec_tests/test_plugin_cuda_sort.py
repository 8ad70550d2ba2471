"""reftorch-cuda's sort, argsort, topk and kthvalue (kernels/sort.cu) against the cpu
reference.

Launch tests run on a real GPU when there is one and on the emulated driver (the
`device_kind` fixture of test_plugin_cuda). The reference's sort is stable (NaN largest, -0.0
tied with +0.0, ties in index order both ways) and the kernel sorts distinct (key, index)
pairs, so values and indices must equal the reference's bit for bit (NaN payloads included:
values are copied from the input). Samples have many ties, NaN of both signs, infinities and
signed zeros; integers include their extremes. Rows up to one tile (4096) take the one-block
kernel, longer ones the tile sort, merge passes and rank writes, each checked on the emulator
by the launches it records. topk of a few elements and kthvalue of rows longer than a tile
take the radix selection (then a sort of the k chosen); those tests put the k-th key inside
runs of ties, on NaN, infinities and signed zeros, and check which launches ran.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda import ops_sort as S  # noqa: E402
from spec_tests import cuda_emulation_sort as emulation  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402

# The launch fixtures of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, reference = base.FLOATS, base.reference
INTEGERS = ["int64", "int32", "int16", "int8", "uint8"]
ORDERED = FLOATS + INTEGERS          # topk and kthvalue (the reference refuses bool)
DTYPES = ORDERED + ["bool"]


def sample(shape, dtype_name, seed):
    """A cpu tensor with many ties: few distinct values, plus specials at random places."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    if dtype_name == "bool":
        return reftorch.tensor(rng.random(shape) > 0.5)
    if dtype_name in FLOATS:
        a = (rng.integers(-3, 4, size) * 0.5).astype(np.float32)
        specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)
        where = rng.random(size) < 0.3
        a[where] = rng.choice(specials, int(where.sum()))
        return reftorch.tensor(a.reshape(shape)).to(getattr(reftorch, dtype_name))
    info = np.iinfo(np.dtype(dtype_name))
    a = rng.integers(max(info.min, -3), 4, size)
    where = rng.random(size) < 0.2
    a[where] = rng.choice([info.min, info.max], int(where.sum()))
    return reftorch.tensor(a.reshape(shape).astype(np.dtype(dtype_name)))


def raw(t):
    """A tensor's bytes as unsigned integers of its width (bit-level comparison)."""
    a = np.ascontiguousarray(t.cpu()._np)
    return a.view(f"u{a.dtype.itemsize}")


def assert_bit_equal(got, expected, err_msg=""):
    pairs = zip(got, expected) if isinstance(expected, tuple) else [(got, expected)]
    for g, e in pairs:
        assert g.device.type == "cuda", err_msg
        assert g.shape == e.shape and g.dtype is e.dtype, (err_msg, g.shape, e.shape)
        np.testing.assert_array_equal(raw(g), raw(e), err_msg=err_msg)


def assert_runs_on_device(fn, x, err_msg=""):
    """fn(x on cuda) equals fn(x) on the reference bit for bit, with no fallback."""
    expected = reference(fn, x)
    plugins.reset_fallbacks()
    got = fn(x.cuda())
    assert plugins.fallbacks() == {}, err_msg
    assert_bit_equal(tuple(got) if isinstance(got, tuple) else got,
                     tuple(expected) if isinstance(expected, tuple) else expected, err_msg)


# name -> (shape of the cpu sample, the view taken of it, dims sorted along). The view is
# taken on each device after the move (a .cuda() copy of a view would be dense).
LAYOUTS = {
    "contiguous": ((6, 37), lambda x: x, (0, 1, -1)),
    "transposed": ((6, 37), lambda x: x.t(), (0, 1)),
    "strided": ((6, 37), lambda x: x[::2, 3::3], (0, 1)),
    "expanded": ((1, 37), lambda x: x.expand(4, 37), (0, 1)),
    "three_dims": ((3, 19, 4), lambda x: x.transpose(0, 2), (0, 1, 2)),
}


def layout_cases(dtype_name, seed=0):
    for name, (shape, arrange, dims) in LAYOUTS.items():
        for dim in dims:
            yield f"{name}-dim{dim}", sample(shape, dtype_name, seed), arrange, dim


def assert_matches_with_layout(fn, x, arrange, err_msg):
    """fn(arrange(x)) on cuda equals it on the reference; the view is taken on each device."""
    expected = reference(lambda t: fn(arrange(t)), x)
    plugins.reset_fallbacks()
    got = fn(arrange(x.cuda()))
    assert plugins.fallbacks() == {}, err_msg
    assert_bit_equal(tuple(got) if isinstance(got, tuple) else got,
                     tuple(expected) if isinstance(expected, tuple) else expected, err_msg)


# --- sort and argsort -------------------------------------------------------------------------

@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_sort_matches_the_reference(device_kind, dtype_name, descending):
    for case, x, arrange, dim in layout_cases(dtype_name):
        for stable in (None, True, False):
            def fn(t):
                if stable is None:
                    return reftorch.sort(t, dim, descending)
                return reftorch.sort(t, dim=dim, descending=descending, stable=stable)
            assert_matches_with_layout(fn, x, arrange, f"{case} stable={stable}")


@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_argsort_matches_the_reference(device_kind, dtype_name, descending):
    for case, x, arrange, dim in layout_cases(dtype_name, seed=1):
        assert_matches_with_layout(
            lambda t: reftorch.argsort(t, dim=dim, descending=descending), x, arrange, case)
    if device_kind is not None:   # argsort launches the kernel without a values buffer
        # (then, for a layout PyTorch keeps and the kernel does not make, one copy into it)
        last = device_kind.launches[-2:] if device_kind.launches[-1].startswith("copy_kernel") \
            else device_kind.launches[-1:]
        assert last[0] == S.sort_expression(dtype_name)


def test_special_values_sort_in_the_documented_order(device_kind):
    """Independent of the reference: NaN largest, -0.0 tied with 0.0, ties in index order."""
    row = [np.nan, 1.0, -0.0, np.inf, 0.0, -np.inf, -np.nan, -0.0]
    for dtype_name in FLOATS:
        x = reftorch.tensor(np.array(row, np.float32)).to(getattr(reftorch, dtype_name)).cuda()
        up = reftorch.sort(x)
        down = reftorch.sort(x, descending=True)
        assert up.indices.cpu().tolist() == [5, 2, 4, 7, 1, 3, 0, 6], dtype_name
        assert down.indices.cpu().tolist() == [0, 6, 3, 1, 2, 4, 7, 5], dtype_name
        signs = np.signbit(up.values.cpu().to(reftorch.float32)._np[1:4]).tolist()
        assert signs == [True, False, True], dtype_name   # zeros keep their sign


# --- topk and kthvalue ------------------------------------------------------------------------

@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
@pytest.mark.parametrize("dtype_name", ORDERED)
def test_topk_matches_the_reference(device_kind, dtype_name, largest):
    for case, x, arrange, dim in layout_cases(dtype_name, seed=2):
        n = arrange(x).shape[dim]
        for k in sorted({1, 3, n // 2, n}):
            for sorted_ in (True, False):
                assert_matches_with_layout(
                    lambda t: reftorch.topk(t, k, dim, largest, sorted_), x, arrange,
                    f"{case} k={k} sorted={sorted_}")


@pytest.mark.parametrize("dtype_name", ORDERED)
def test_kthvalue_matches_the_reference(device_kind, dtype_name):
    for case, x, arrange, dim in layout_cases(dtype_name, seed=3):
        n = arrange(x).shape[dim]
        for k in sorted({1, n // 2 + 1, n}):
            for keepdim in (False, True):
                assert_matches_with_layout(
                    lambda t: reftorch.kthvalue(t, k, dim, keepdim), x, arrange,
                    f"{case} k={k} keepdim={keepdim}")


# --- row lengths, empty and 0-dim inputs ------------------------------------------------------

@pytest.mark.parametrize("dtype_name", ["float32", "float64", "float16", "int64", "int8"])
def test_every_row_length_up_to_one_tile(device_kind, dtype_name):
    """Lengths around powers of two (the padding), up to the longest row one block sorts."""
    tile = S.tile()
    for n in (1, 2, 3, 5, 31, 32, 33, 100, 1000, 2049, tile - 1, tile):
        x = sample((2, n), dtype_name, n)
        for descending in (False, True):
            assert_runs_on_device(lambda t: reftorch.sort(t, descending=descending), x,
                                  f"n={n} descending={descending}")
        assert_runs_on_device(lambda t: reftorch.topk(t, min(n, 5)), x, f"topk n={n}")
        if device_kind is not None:
            assert device_kind.launches[-1] == S.sort_expression(dtype_name)


def long_row_launches(device_kind, before):
    return [name.split("<")[0] for name in device_kind.launches[before:]]


@pytest.mark.parametrize("dtype_name", DTYPES)
def test_longer_rows_are_sorted_in_tiles_and_merged(device_kind, dtype_name):
    """From the first row longer than a tile: tiles, merge passes (a run without a partner
    in odd counts), then the ranks."""
    tile = S.tile()
    for n in (tile + 1, 3 * tile - 7):
        x = sample((2, n), dtype_name, n)
        for descending in (False, True):
            before = len(device_kind.launches) if device_kind is not None else 0
            assert_runs_on_device(lambda t: reftorch.sort(t, descending=descending), x,
                                  f"n={n} descending={descending}")
            if device_kind is not None:
                passes = 1 if n <= 2 * tile else 2
                assert long_row_launches(device_kind, before) == (
                    ["sort_tiles_kernel"] + ["merge_runs_kernel"] * passes
                    + ["write_ranks_kernel"]), n
        assert_runs_on_device(lambda t: reftorch.argsort(t, dim=1), x, f"argsort n={n}")


@pytest.mark.parametrize("dtype_name", ["float32", "float64", "int16"])
def test_longer_rows_with_layouts_topk_and_kthvalue(device_kind, dtype_name):
    tile = S.tile()
    n = 4 * tile + 3                      # three merge passes, an odd last tile
    x = sample((n, 3), dtype_name, 9)
    cases = {
        "sort_dim0": lambda t: reftorch.sort(t, dim=0),
        "sort_transposed": lambda t: reftorch.sort(t.t(), dim=1, descending=True),
        "sort_strided": lambda t: reftorch.sort(t[1:, ::2], dim=0, descending=True),
        "topk_largest": lambda t: reftorch.topk(t, 7, dim=0),
        "topk_smallest_all": lambda t: reftorch.topk(t.t(), n, largest=False),
        "kthvalue": lambda t: reftorch.kthvalue(t, n // 2, dim=0),
        "kthvalue_keepdim_last": lambda t: reftorch.kthvalue(t.t(), n, keepdim=True),
    }
    for case, fn in cases.items():
        assert_runs_on_device(fn, x, case)


def test_rows_of_two_to_the_31_decline(device_kind):
    """int32 positions: such a row declines before allocating anything (the view below is
    one element expanded, so the test needs no memory)."""
    x = sample((1,), "float32", 0).cuda().expand(2**31)
    f32 = (reftorch.float32,) * 3
    params = {"dim": 0, "descending": False, "stable": False}
    assert S.sort_kernel(None, (x,), f32, params) is NotImplemented
    assert S.topk_kernel(None, (x,), f32, {"k": 1, "dim": 0, "largest": True,
                                           "sorted": True}) is NotImplemented


def test_empty_inputs_launch_nothing(device_kind):
    cases = {
        "no_rows": (sample((0, 5), "float32", 0), lambda t: reftorch.sort(t, dim=1)),
        "empty_rows": (sample((5, 0), "float32", 0), lambda t: reftorch.sort(t, dim=1)),
        "empty_rows_argsort": (sample((5, 0), "int32", 0), lambda t: reftorch.argsort(t)),
        "empty_dim0": (sample((0, 5), "int64", 0), lambda t: reftorch.sort(t, dim=0)),
        "topk_k0": (sample((4, 6), "float64", 0), lambda t: reftorch.topk(t, 0)),
        "topk_no_rows": (sample((0, 6), "float16", 0), lambda t: reftorch.topk(t, 2)),
    }
    for name, (x, fn) in cases.items():
        before = len(device_kind.launches) if device_kind is not None else 0
        assert_runs_on_device(fn, x, name)
        if device_kind is not None:
            assert len(device_kind.launches) == before, name


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16", "int16", "bool"])
def test_zero_dim_inputs(device_kind, dtype_name):
    x = sample((), dtype_name, 4)
    assert_runs_on_device(lambda t: reftorch.sort(t, descending=True), x, "sort")
    assert_runs_on_device(lambda t: reftorch.argsort(t), x, "argsort")
    if dtype_name != "bool":
        for k in (0, 1):
            assert_runs_on_device(lambda t: reftorch.topk(t, k), x, f"topk k={k}")
        assert_runs_on_device(lambda t: reftorch.kthvalue(t, 1), x, "kthvalue")


def test_more_rows_than_one_grid(device_kind):
    """More rows than blocks in the grid: the blocks loop over the rest."""
    rows = S.MAX_GRID + 3
    x = sample((rows, 2), "float32", 5)
    assert_runs_on_device(lambda t: reftorch.topk(t, 1, largest=False), x, "topk")


# --- host-side checks (no device) -------------------------------------------------------------

def test_kernels_decline_what_they_do_not_handle():
    x = sample((3, 4), "float32", 0)
    params = {"dim": 1, "descending": False, "stable": False}
    dtypes = (reftorch.float32,) * 3
    assert S.sort_kernel(None, (x,), dtypes, params) is NotImplemented        # on cpu
    assert S.argsort_kernel(None, (x,), dtypes, params) is NotImplemented
    assert S.topk_kernel(None, (x,), dtypes, {"k": 1, "dim": 1, "largest": True,
                                              "sorted": True}) is NotImplemented
    assert S.sort_kernel(x, (x,), dtypes, params) is NotImplemented           # out= given


def test_program_and_registration_cover_the_dtypes(plugin):
    # bool shares uint8's instantiations: four kernels per other dtype, a merge per key width
    assert len(S.SORT.name_expressions) == 4 * (len(DTYPES) - 1) + 2
    registered = {(op, dtype.name) for op, device, dtype in plugin.kernels if device == "cuda"}
    for dtype_name in DTYPES:
        assert ("sort", dtype_name) in registered and ("argsort", dtype_name) in registered
    for dtype_name in ORDERED:
        assert ("topk", dtype_name) in registered and ("kthvalue", dtype_name) in registered
    assert ("topk", "bool") not in registered


def test_launch_shape_fits_every_supported_length():
    """Every length the host accepts gets a launch the kernel (and the emulation) accepts:
    the least power of two, threads for the pairs, shared memory within 48 KiB."""
    assert S.tile() == emulation.TILE
    for dtype_name in ("float64", "float32"):
        for n in range(1, S.tile() + 1):
            padded, threads, shared = S.launch_shape(n, dtype_name)
            emulation.check_launch((1, 1, 1), (threads, 1, 1), shared, 1, n, padded,
                                   S.SORT_TYPES[dtype_name])
            assert shared <= 48 * 1024


def test_the_emulated_network_sorts_pairs():
    """The emulation's bitonic network (the kernel's, step for step) orders (key, position)
    pairs as a lexicographic sort does, for every padded length."""
    rng = np.random.default_rng(0)
    for padded in (1, 2, 4, 8, 64, 1024):
        keys = rng.integers(0, 4, (3, padded)).astype(np.uint32)
        positions = np.stack([rng.permutation(padded) for _ in range(3)])
        order = np.stack([np.lexsort((p, k)) for k, p in zip(keys, positions)])
        expected_keys = np.take_along_axis(keys, order, 1)
        expected_positions = np.take_along_axis(positions, order, 1)
        emulation.bitonic_sort(keys, positions)
        np.testing.assert_array_equal(keys, expected_keys)
        np.testing.assert_array_equal(positions, expected_positions)


# --- topk and kthvalue by selection -----------------------------------------------------------

def launched(device_kind, before):
    return [name.split("<")[0] for name in device_kind.launches[before:]] if device_kind else None


def assert_launches(device_kind, fn, x, expected, err_msg):
    """fn matches the reference on the device, by the kernels `expected` (on the emulator)."""
    before = len(device_kind.launches) if device_kind is not None else 0
    assert_runs_on_device(fn, x, err_msg)
    if device_kind is not None:
        assert launched(device_kind, before) == expected, err_msg


SELECTED = ["select_rows_kernel"]                               # count 1: the answer itself
SELECTED_SORTED = ["select_rows_kernel", "sort_rows_kernel"]    # k <= a tile, then sorted
LONG_SORT = ["sort_tiles_kernel", "merge_runs_kernel", "write_ranks_kernel"]


def test_the_size_rule():
    """Selection exactly for rows longer than a tile with k <= n / SELECT_FRACTION (topk) or
    one rank (kthvalue); the rest keep the full sort."""
    tile, fraction = S.tile(), S.SELECT_FRACTION
    n = tile + 1
    assert not S.selects(tile, 0, 1) and not S.selects(tile, tile // 2, 1)
    assert S.selects(n, 0, 1) and S.selects(n, n - 1, 1) and S.selects(n, 0, n // fraction)
    assert not S.selects(n, 0, n // fraction + 1) and not S.selects(n, 0, n)
    assert not S.selects(16 * n, 1, 2)          # neither a topk nor a kthvalue request
    assert S.select_threads() == emulation.SELECT_THREADS


def long_sample(rows, n, dtype_name, seed):
    """Rows longer than a tile with long runs of ties, specials among them (sample's)."""
    return sample((rows, n), dtype_name, seed)


@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
@pytest.mark.parametrize("dtype_name", ORDERED)
def test_topk_selects_up_to_the_size_rule(device_kind, dtype_name, largest):
    """k = 1, small, the rule's last k, the first k past it (full sort), k = n; sorted=False
    gets the sorted order too (the reference's)."""
    n = S.tile() + 101
    x = long_sample(2, n, dtype_name, 11)
    boundary = n // S.SELECT_FRACTION
    cases = {1: SELECTED, 5: SELECTED_SORTED, boundary: SELECTED_SORTED,
             boundary + 1: LONG_SORT, n: LONG_SORT}
    for k, expected in cases.items():
        for sorted_ in (True, False):
            assert_launches(device_kind, lambda t: reftorch.topk(t, k, 1, largest, sorted_), x,
                            expected, f"k={k} sorted={sorted_}")


@pytest.mark.parametrize("dtype_name", ORDERED)
def test_kthvalue_selects_on_long_rows(device_kind, dtype_name):
    n = S.tile() + 37
    x = long_sample(3, n, dtype_name, 12)
    for k in (1, 2, n // 3, n // 2 + 1, n - 1, n):
        for keepdim in (False, True):
            assert_launches(device_kind, lambda t: reftorch.kthvalue(t, k, 1, keepdim), x,
                            SELECTED, f"k={k} keepdim={keepdim}")


def special_rows(n):
    """Rows whose ranks fall inside runs of equal keys: all equal, all NaN (both signs),
    signed zeros only, +-inf with zeros, few distinct values, one large value among ties."""
    rng = np.random.default_rng(13)
    zeros = np.where(rng.random(n) < 0.5, -0.0, 0.0)
    rows = {
        "all_equal": np.full(n, 1.5),
        "all_nan": np.where(rng.random(n) < 0.5, np.nan, -np.nan),
        "signed_zeros": zeros,
        "infinities_and_zeros": np.where(rng.random(n) < 0.1, np.inf, zeros),
        "nan_and_infinities": rng.choice([np.nan, np.inf, -np.inf], n),
        "few_values": rng.integers(-1, 2, n).astype(np.float64),
        "one_apart": np.where(np.arange(n) == n // 2, 2.0, 1.0),
    }
    return {name: np.stack([row, row[::-1]]) for name, row in rows.items()}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_selection_among_ties_and_special_values(device_kind, dtype_name):
    """The k-th key tied with many elements: the ties taken are the first in index order (in
    both directions), as the stable sort takes them."""
    n = S.tile() + 3
    for name, rows in special_rows(n).items():
        x = reftorch.tensor(rows.astype(np.float32)).to(getattr(reftorch, dtype_name))
        for k in (1, 3, n // 16, n // S.SELECT_FRACTION):
            for largest in (True, False):
                expected = SELECTED if k == 1 else SELECTED_SORTED
                assert_launches(device_kind, lambda t: reftorch.topk(t, k, largest=largest), x,
                                expected, f"{name} k={k} largest={largest}")
        for k in (1, n // 2, n):
            assert_launches(device_kind, lambda t: reftorch.kthvalue(t, k), x, SELECTED,
                            f"{name} kthvalue k={k}")


@pytest.mark.parametrize("dtype_name", INTEGERS)
def test_selection_of_integer_ties_and_extremes(device_kind, dtype_name):
    info = np.iinfo(np.dtype(dtype_name))
    n = S.tile() + 9
    rng = np.random.default_rng(14)
    rows = np.stack([np.full(n, info.max), rng.choice([info.min, info.max, 0], n),
                     np.where(np.arange(n) % 7 == 0, info.min, 1)]).astype(dtype_name)
    x = reftorch.tensor(rows)
    for k in (1, 2, n // 2, n // S.SELECT_FRACTION):
        for largest in (True, False):
            assert_runs_on_device(lambda t: reftorch.topk(t, k, largest=largest), x,
                                  f"k={k} largest={largest}")
    for k in (1, n // 7, n // 7 + 1, n):
        assert_runs_on_device(lambda t: reftorch.kthvalue(t, k), x, f"kthvalue k={k}")


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16", "float64", "int8"])
def test_selection_with_layouts(device_kind, dtype_name):
    """Rows along dims other than the last, transposed, stepped and expanded inputs."""
    n = 2 * S.tile() + 300                # long enough for every view below to select
    x = sample((n, 4), dtype_name, 15)
    cases = {
        "dim0": (lambda t: reftorch.topk(t, 9, dim=0), SELECTED_SORTED),
        "dim0_smallest": (lambda t: reftorch.topk(t, 1, dim=0, largest=False), SELECTED),
        "transposed": (lambda t: reftorch.topk(t.t(), 40), SELECTED_SORTED),
        "stepped": (lambda t: reftorch.topk(t[::2, 1::2], 6, dim=0), SELECTED_SORTED),
        "expanded": (lambda t: reftorch.topk(t[:, :1].expand(n, 3), 4, dim=0),
                     SELECTED_SORTED),
        "three_dims": (lambda t: reftorch.topk(t.reshape(2, n // 2, 4), 3, dim=1),
                       SELECTED_SORTED),
        "kthvalue_dim0": (lambda t: reftorch.kthvalue(t, n // 2, 0, True), SELECTED),
        "kthvalue_transposed": (lambda t: reftorch.kthvalue(t.t()[:, 5:], 7), SELECTED),
    }
    for name, (fn, expected) in cases.items():
        assert_launches(device_kind, fn, x, expected, name)


@pytest.mark.parametrize("dtype_name", ["float32", "int64"])
def test_selection_of_more_than_a_tile(device_kind, dtype_name):
    """k above a tile: the chosen elements are sorted by the long-row passes, which map their
    positions back through the selection's indices."""
    n = S.SELECT_FRACTION * (S.tile() + 1)
    x = long_sample(1, n, dtype_name, 16)
    k = n // S.SELECT_FRACTION
    for largest in (True, False):
        assert_launches(device_kind, lambda t: reftorch.topk(t, k, largest=largest), x,
                        ["select_rows_kernel"] + LONG_SORT, f"largest={largest}")


def test_the_emulated_radix_select_finds_each_rank():
    """The emulation's digit passes (the kernel's, pass for pass) against a sort: the key of
    each rank and its tie number (its place among the elements of that key in index order)."""
    rng = np.random.default_rng(17)
    for dtype, high in ((np.uint32, 2**32), (np.uint64, 2**64), (np.uint32, 3)):
        keys = rng.integers(0, high, (4, 300), dtype=dtype)
        keys[1] = keys[1, 0]                                   # one key
        for rank in (0, 1, 150, 299):
            target, tie_number = emulation.radix_select(keys, [rank] * 4)
            order = np.argsort(keys, axis=1, kind="stable")
            ranked = np.take_along_axis(keys, order, 1)[:, rank]
            np.testing.assert_array_equal(target, ranked)
            ties_before = [(order[r, :rank] != order[r, rank]) & (keys[r, order[r, :rank]]
                                                                   == ranked[r])
                           for r in range(4)]
            np.testing.assert_array_equal(tie_number, [t.sum() for t in ties_before])
