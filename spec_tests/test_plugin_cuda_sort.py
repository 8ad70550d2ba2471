"""reftorch-cuda's sort, argsort, topk and kthvalue (kernels/sort.cu) against the cpu
reference.

Launch tests run on a real GPU when there is one and on the emulated driver (the
`device_kind` fixture of test_plugin_cuda). The reference's sort is stable (NaN largest, -0.0
tied with +0.0, ties in index order both ways) and the kernel sorts distinct (key, index)
pairs, so values and indices must equal the reference's bit for bit (NaN payloads included:
values are copied from the input). Samples have many ties, NaN of both signs, infinities and
signed zeros; integers include their extremes. Rows up to one tile (4096) take the one-block
kernel, longer ones the tile sort, merge passes and rank writes, each checked on the emulator
by the launches it records.
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
        assert device_kind.launches[-1] == S.sort_expression(dtype_name)


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
    # bool shares uint8's instantiations: three kernels per other dtype, a merge per key width
    assert len(S.SORT.name_expressions) == 3 * (len(DTYPES) - 1) + 2
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
