"""reftorch-cuda's reduction paths for the layouts one block per output serves badly (see
ops_reduce's size rule): the column path (reductions that keep the input's densest dim: one
thread per output, chunked when the outputs are few), the row path (short reductions along
the densest dim: up to 32 lanes per output), cumsum's chunked scan of few long rows, and the
block tree of few long float products.

Launch tests run on a real GPU when there is one and on the emulated driver. Each path is
checked twice:
  - bit for bit against a NumPy model of its documented order, written here from the rule in
    ops_reduce's docstring (the split is recomputed here from the rule's constants, so on the
    emulator, which decodes the split from the launch's parameter bytes, this checks the
    host's choice and packing; on a GPU, the device code's order);
  - against the cpu reference within the documented bound of the two orders' roundings
    (sums, means, norms p = 1, 2, cumsums, products), or exactly (extrema, norm inf, integer
    sums and cumsums, and the paths that keep the reference's order).
Shapes cross each rule's boundaries, and every test checks that nothing fell back to the cpu.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import reftorch
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda import ops_reduce as R  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.cuda_emulation_reduce import scan_carries  # noqa: E402
from spec_tests.cuda_kernel_emulation import block_order_reduce  # noqa: E402
from spec_tests.test_plugin_cuda_kernels import assert_close, finfo  # noqa: E402
from spec_tests.test_plugin_cuda_reductions import (  # noqa: E402
    INTS, assert_same, finite_values, int_values)

# The launch fixtures and value helpers of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, host, reference = base.FLOATS, base.host, base.reference
STORAGE = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
           "bfloat16": ml_dtypes.bfloat16}


def accumulator(dtype_name):
    return np.float64 if dtype_name == "float64" else np.float32


def rounded(values, dtype_name):
    """Accumulator values rounded to the dtype, as float64 (what host() gives)."""
    return values.astype(STORAGE[dtype_name]).astype(np.float64)


def reduced_layout(x, dims):
    """The cpu tensor x's values as (kept..., n), the reduced dims last in their logical
    order (the order of a reduction's element positions)."""
    a = host(x)
    dims = tuple(d % a.ndim for d in dims)
    kept = [d for d in range(a.ndim) if d not in dims]
    moved = np.transpose(a, kept + list(dims))
    return moved.reshape(moved.shape[:len(kept)] + (-1,))


def launched(device_kind, name):
    """Whether the emulator saw a launch of kernel `name` (None on a GPU: not observable)."""
    if device_kind is None:
        return None
    return any(k.startswith(name + "<") for k in device_kind.launches)


def run_case(device_kind, fn, source, arrange):
    """(cpu input, cuda result, reference result) of fn on arrange(source), the emulator's
    launch list cleared first."""
    if device_kind is not None:
        device_kind.launches.clear()
    x = arrange(source)
    return x, fn(arrange(source.cuda())), reference(fn, x)


# --- the documented orders, in NumPy -----------------------------------------------------------

def in_order(values, identity, combine):
    """The identity combined with values[..., 0], values[..., 1], ... one at a time."""
    acc = np.full(values.shape[:-1], identity, values.dtype)
    for k in range(values.shape[-1]):
        acc = combine(acc, values[..., k])
    return acc


def documented_column_split(outputs, n):
    """ops_reduce's column rule, restated: chunks enough for COLUMN_THREADS tasks, at least
    COLUMN_MIN_CHUNK elements each, at most COLUMN_MAX_CHUNKS; one chunk when that is <= 1."""
    chunks = min(-(-R.COLUMN_THREADS // outputs), n // R.COLUMN_MIN_CHUNK, R.COLUMN_MAX_CHUNKS)
    if chunks <= 1:
        return n, 1
    chunk = -(-n // chunks)
    return chunk, -(-n // chunk)


def column_order(values, identity, combine):
    """The column path over the last axis: each chunk in index order, then the chunk
    results in chunk order (one chunk: just the index order)."""
    outputs = math.prod(values.shape[:-1])
    chunk, chunks = documented_column_split(outputs, values.shape[-1])
    if chunks == 1:
        return in_order(values, identity, combine)
    results = [in_order(values[..., c * chunk:(c + 1) * chunk], identity, combine)
               for c in range(chunks)]
    return in_order(np.stack(results, -1), identity, combine)


def row_order(values, identity, combine):
    """The row path: lanes = the power of two at or above n (at most 32); lane l takes
    elements l, l + lanes, ... in order, then value[l] = combine(value[l], value[l + s]) for
    s = lanes / 2, ..., 1."""
    n = values.shape[-1]
    lanes = min(32, 1 << (n - 1).bit_length())
    value = [in_order(values[..., lane::lanes], identity, combine) for lane in range(lanes)]
    s = lanes // 2
    while s:
        value[:s] = [combine(value[t], value[t + s]) for t in range(s)]
        s //= 2
    return value[0]


# op -> (fn(x, dims, keepdim), identity, combine, term, finish(total, n), summed)
OPS = {
    "sum": (lambda x, d, k: x.sum(d, keepdim=k), 0.0, np.add, None, None, True),
    "mean": (lambda x, d, k: x.mean(d, keepdim=k), 0.0, np.add, None,
             lambda total, n: total / total.dtype.type(n), True),
    "amax": (lambda x, d, k: x.amax(d, keepdim=k), -np.inf, np.maximum, None, None, False),
    "amin": (lambda x, d, k: x.amin(d, keepdim=k), np.inf, np.minimum, None, None, False),
    "norm1": (lambda x, d, k: x.norm(1, d, k), 0.0, np.add, np.abs, None, True),
    "norm2": (lambda x, d, k: x.norm(2, d, k), 0.0, np.add, lambda v: v * v,
              lambda total, n: np.sqrt(total), True),
    "norm_inf": (lambda x, d, k: x.norm(math.inf, d, k), -np.inf, np.maximum, np.abs, None,
                 False),
}


def modelled(op, order, x, dims, dtype_name):
    """The op's result in `order` (column_order, row_order), rounded to the dtype."""
    _, identity, combine, term, finish, _ = OPS[op]
    values = reduced_layout(x, dims).astype(accumulator(dtype_name))
    terms = values if term is None else term(values)
    with np.errstate(all="ignore"):
        total = order(terms, values.dtype.type(identity), combine)
        if finish is not None:
            total = finish(total, values.shape[-1])
    return rounded(total, dtype_name)


def assert_within_sum_bound(got, expected, x, dims, op, dtype_name, chain, err_msg):
    """A sum-like result against the reference: both orders within (chain + log2 n + 1) eps
    of the accumulator of the sum of the terms' magnitudes (over n for the mean), plus a
    rounding to the dtype. The norm 2 root halves a relative error: the squares' bound is
    kept (larger)."""
    _, _, _, term, _, _ = OPS[op]
    g, e = host(got).reshape(-1), host(expected).reshape(-1)
    values = reduced_layout(x, dims)
    magnitudes = np.abs(values if term is None else term(values))
    n = values.shape[-1]
    total = magnitudes.sum(-1).reshape(-1)
    if op == "mean":
        total = total / n
    if op == "norm2":
        total = np.sqrt(total)
    steps = chain + math.log2(n + 1) + 1
    allowed = steps * float(np.finfo(accumulator(dtype_name)).eps) * total \
        + 2 * float(finfo(dtype_name).eps) * np.abs(e)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e), err_msg=err_msg)  # an empty mean
    finite = ~np.isnan(e)
    assert np.all(np.abs(g - e)[finite] <= allowed[finite]), err_msg


# --- the column path ------------------------------------------------------------------------------

# name -> (source shape, layout, dims, keepdim): each keeps the input's densest dim
COLUMN_CASES = {
    "one_chunk": ((40, 300), lambda x: x, (0,), False),         # n < 2 COLUMN_MIN_CHUNK
    "chunked": ((3000, 40), lambda x: x, (0,), False),
    "chunked_keepdim": ((3000, 40), lambda x: x, (0,), True),
    "nchw_keeping_c_and_w": ((4, 8, 6, 40), lambda x: x, (0, 2), False),
    "transposed": ((300, 50), lambda x: x.t(), (1,), False),     # kept dim of stride 1
    "strided": ((600, 120), lambda x: x[::2, ::3], (0,), False),  # densest stride 3, kept
    "a_warp_of_outputs": ((3000, 64), lambda x: x[:, :32], (0,), False),
}


def column_chain(outputs, n):
    chunk, chunks = documented_column_split(outputs, n)
    return n if chunks == 1 else chunk + chunks


def test_column_split_follows_the_rule_at_its_boundaries():
    """Enough outputs or short columns: one chunk; else chunks of at least COLUMN_MIN_CHUNK,
    at most COLUMN_MAX_CHUNKS, covering n exactly once."""
    assert R.column_split(R.COLUMN_THREADS, 10 ** 6) == (10 ** 6, 1)
    assert R.column_split(32, 2 * R.COLUMN_MIN_CHUNK - 1) == (2 * R.COLUMN_MIN_CHUNK - 1, 1)
    for outputs, n in ((32, 2 * R.COLUMN_MIN_CHUNK), (40, 3000), (32, 10 ** 7),
                       (R.COLUMN_THREADS // 2, 10 ** 5), (1000, 12345)):
        chunk, chunks = R.column_split(outputs, n)
        assert (chunk, chunks) == documented_column_split(outputs, n)
        assert chunks > 1 and chunk >= R.COLUMN_MIN_CHUNK and chunks <= R.COLUMN_MAX_CHUNKS
        assert (chunks - 1) * chunk < n <= chunks * chunk


@pytest.mark.parametrize("dtype_name", INTS)
def test_integer_sums_on_the_column_and_row_paths_are_exact(device_kind, dtype_name):
    plugins.reset_fallbacks()
    cases = [(case, shape, arrange, dims, keepdim)
             for case, (shape, arrange, dims, keepdim) in {**COLUMN_CASES, **ROW_CASES}.items()]
    for case, shape, arrange, dims, keepdim in cases:
        x = arrange(int_values(shape, dtype_name, 72))
        got = arrange(int_values(shape, dtype_name, 72).cuda()).sum(dims, keepdim=keepdim)
        assert_same(got, reference(lambda t: t.sum(dims, keepdim=keepdim), x), case)
    assert plugins.fallbacks() == {}


# --- the row path ---------------------------------------------------------------------------------

# name -> (source shape, layout, dims, keepdim): short reductions along the densest dim
ROW_CASES = {
    "one_element": ((300, 1, 3), lambda x: x, (1, 2), False),   # n = 3: four lanes
    "rows_of_32": ((2000, 32), lambda x: x, (1,), False),
    "rows_of_33": ((700, 33), lambda x: x, (1,), True),
    "row_max": ((90, 512), lambda x: x, (1,), False),
    "transposed": ((300, 50), lambda x: x.t(), (0,), False),    # reduced dim of stride 1
    "strided": ((60, 300), lambda x: x[::2, ::3], (1,), False),
    "few_outputs": ((3, 100), lambda x: x, (1,), False),
    "all_of_a_small_tensor": ((10, 30), lambda x: x, (0, 1), False),
}


def row_chain(outputs, n):
    lanes = min(32, 1 << (n - 1).bit_length())
    return -(-n // lanes) + int(math.log2(lanes))


# path -> (cases, the order's model, its longest chain of roundings, the kernel it launches)
PATHS = {
    "column": (COLUMN_CASES, column_order, column_chain, "column_reduce_kernel"),
    "rows": (ROW_CASES, row_order, row_chain, "row_reduce_kernel"),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_path_is_its_order_and_within_the_bound(device_kind, dtype_name, op, path):
    fn, *_, summed = OPS[op]
    cases, order, chain, kernel = PATHS[path]
    plugins.reset_fallbacks()
    for case, (shape, arrange, dims, keepdim) in cases.items():
        x, got, expected = run_case(device_kind, lambda t: fn(t, dims, keepdim),
                                    finite_values(shape, dtype_name, 71), arrange)
        assert got.shape == expected.shape and got.dtype is expected.dtype, case
        outputs = expected.numel()
        n = x.numel() // outputs
        assert launched(device_kind, kernel) in (None, True), case
        if path == "column":
            chunks = documented_column_split(outputs, n)[1]
            assert launched(device_kind, "column_chunks_kernel") in (None, chunks > 1), case
        model = modelled(op, order, x, dims, dtype_name)
        np.testing.assert_array_equal(host(got).reshape(-1), model.reshape(-1), err_msg=case)
        if summed:
            assert_within_sum_bound(got, expected, x, dims, op, dtype_name,
                                    chain(outputs, n), case)
        else:
            assert_close(got, expected, False, err_msg=case)
    assert plugins.fallbacks() == {}


# name -> (source shape, layout, dims, the kernel the rule gives)
BOUNDARY_CASES = {
    "outputs_below_a_warp": ((3000, 31), lambda x: x, (0,), "reduce_kernel"),
    "row_over_row_max": ((90, 513), lambda x: x, (1,), "reduce_kernel"),
    "row_at_row_max": ((90, 512), lambda x: x, (1,), "row_reduce_kernel"),
    "column_at_a_warp": ((3000, 32), lambda x: x, (0,), "column_reduce_kernel"),
    "kept_dim_not_densest": ((40, 50, 6), lambda x: x, (2,), "row_reduce_kernel"),
    "empty_reduction": ((0, 64), lambda x: x, (0,), "reduce_kernel"),
    "zero_dim": ((), lambda x: x, (0,), "row_reduce_kernel"),
}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_the_size_rule_at_its_boundaries(device_kind, dtype_name):
    """Each side of each boundary takes the documented path, and agrees with the reference
    (sums within the block bound or the path's, extrema exactly); empty and 0-dim too."""
    plugins.reset_fallbacks()
    for case, (shape, arrange, dims, kernel) in BOUNDARY_CASES.items():
        source = finite_values(shape, dtype_name, 74)
        for op in ("sum", "mean", "amax"):
            if op == "amax" and source.numel() == 0:
                continue   # no identity: the reference raises
            fn = OPS[op][0]
            x, got, expected = run_case(device_kind, lambda t: fn(t, dims, True), source,
                                        arrange)
            assert launched(device_kind, kernel) in (None, True), case
            if op == "amax":
                assert_close(got, expected, False, err_msg=case)
                continue
            n = max(1, x.numel() // max(1, expected.numel()))
            assert_within_sum_bound(got, expected, x, dims if x.ndim else (), op, dtype_name,
                                    n / 256 + 8 + n, case)
    assert plugins.fallbacks() == {}


# --- cumsum of few long rows ----------------------------------------------------------------------

def documented_scan_split(rows, n):
    """ops_reduce's scan rule, restated: the whole row when rows >= SCAN_ROWS or
    n <= SCAN_LONG; else chunks enough for SCAN_THREADS tasks, at least SCAN_MIN_CHUNK long."""
    if rows >= R.SCAN_ROWS or n <= R.SCAN_LONG:
        return n, 1
    chunks = min(-(-R.SCAN_THREADS // rows), n // R.SCAN_MIN_CHUNK)
    chunk = -(-n // chunks)
    return chunk, -(-n // chunk)


def chunked_scan(rows, chunk, chunks):
    """The chunked cumsum of (rows, n) in the accumulator: chunk sums in index order from
    their first element, the carries (the kernel's segment order), then each chunk's scan
    from its carry plus its first element."""
    n = rows.shape[-1]
    out = np.empty_like(rows)
    sums = np.stack([from_first(rows[:, c * chunk:(c + 1) * chunk]) for c in range(chunks)], -1)
    carries = scan_carries(sums)
    for c in range(chunks):
        first, last = c * chunk, min((c + 1) * chunk, n)
        acc = rows[:, first] if c == 0 else carries[:, c] + rows[:, first]
        out[:, first] = acc
        for k in range(first + 1, last):
            acc = acc + rows[:, k]
            out[:, k] = acc
    return out


def from_first(piece):
    """The sum of piece's last axis in index order, starting from its first element."""
    acc = piece[..., 0]
    for k in range(1, piece.shape[-1]):
        acc = acc + piece[..., k]
    return acc


# name -> (source shape, layout, dim)
SCAN_CASES = {
    "long_rows": ((3, 20000), lambda x: x, 1),
    "long_column": ((3, 20000), lambda x: x.t(), 0),
    "strided": ((4, 9000), lambda x: x[::2, ::2], 1),
    "just_over_scan_long": ((2, R.SCAN_LONG + 1), lambda x: x, 1),
}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_chunked_cumsum_is_its_order_and_within_the_bound(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for case, (shape, arrange, dim) in SCAN_CASES.items():
        x, got, expected = run_case(device_kind, lambda t: t.cumsum(dim),
                                    finite_values(shape, dtype_name, 75), arrange)
        rows = np.moveaxis(host(x), dim, -1).astype(accumulator(dtype_name))
        chunk, chunks = documented_scan_split(rows.shape[0], rows.shape[1])
        assert chunks > 1, case
        assert launched(device_kind, "cumsum_carries_kernel") in (None, True), case
        with np.errstate(all="ignore"):
            model = rounded(chunked_scan(rows, chunk, chunks), dtype_name)
        g, e = np.moveaxis(host(got), dim, -1), np.moveaxis(host(expected), dim, -1)
        np.testing.assert_array_equal(g, model, err_msg=case)
        # the documented bound: (k + 2 chunk + 2 ceil(chunks / 256) + 256) eps of the prefix
        # sum of |x| in the accumulator, plus each side's rounding to the dtype
        k = np.arange(rows.shape[1])
        chain = k + 2 * chunk + 2 * -(-chunks // 256) + 256 + 1
        prefix = np.cumsum(np.abs(rows.astype(np.float64)), -1)
        allowed = chain * float(np.finfo(accumulator(dtype_name)).eps) * prefix \
            + 2 * float(finfo(dtype_name).eps) * np.abs(e)
        assert np.all(np.abs(g - e) <= allowed), case
        # chunk 0 is scanned as the reference scans: its bits
        np.testing.assert_array_equal(g[:, :chunk], e[:, :chunk], err_msg=case)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", ["bool", "int8", "int32", "int64"])
def test_chunked_integer_cumsum_is_exact(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for case, (shape, arrange, dim) in SCAN_CASES.items():
        source = int_values(shape, dtype_name, 77)
        got = arrange(source.cuda()).cumsum(dim)
        assert_same(got, reference(lambda t: t.cumsum(dim), arrange(source)), case)
    assert plugins.fallbacks() == {}


def test_scan_split_covers_each_row_once():
    for rows, n in ((1, R.SCAN_LONG + 1), (3, 20000), (R.SCAN_ROWS - 1, 10 ** 5),
                    (1, 10 ** 8)):
        chunk, chunks = R.scan_split(rows, n)
        assert (chunk, chunks) == documented_scan_split(rows, n)
        assert chunks > 1 and chunk >= R.SCAN_MIN_CHUNK
        assert (chunks - 1) * chunk < n <= chunks * chunk
    assert R.scan_split(R.SCAN_ROWS, 10 ** 6) == (10 ** 6, 1)
    assert R.scan_split(1, R.SCAN_LONG) == (R.SCAN_LONG, 1)


# --- prod of few long outputs ---------------------------------------------------------------------

def near_one(shape, dtype_name, seed):
    """Values close to 1: long products neither overflow nor underflow."""
    rng = np.random.default_rng(seed)
    return reftorch.tensor((1 + rng.standard_normal(shape) * 0.02).astype(np.float32)).to(
        getattr(reftorch, dtype_name))


# name -> (source shape, layout, dims)
PROD_TREE_CASES = {
    "long_row": ((3, 20000), lambda x: x, (1,)),
    "long_all": ((3, 20000), lambda x: x, None),
    "long_column": ((3, 20000), lambda x: x.t(), (0,)),
    "strided": ((4, 9000), lambda x: x[::2, ::2], (1,)),
    "just_over_prod_long": ((2, R.PROD_LONG + 1), lambda x: x, (1,)),
}


def prod_of(x, dims):
    return x.prod() if dims is None else x.prod(dims[0])


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_few_long_products_are_the_block_tree_within_the_bound(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for case, (shape, arrange, dims) in PROD_TREE_CASES.items():
        x, got, expected = run_case(device_kind, lambda t: prod_of(t, dims),
                                    near_one(shape, dtype_name, 78), arrange)
        if device_kind is not None:   # the block kernels, in one launch or chunked
            assert launched(device_kind, "reduce_kernel") or launched(
                device_kind, "reduce_chunks_kernel"), case
        values = reduced_layout(x, range(x.ndim) if dims is None else dims)
        wide = values.astype(accumulator(dtype_name))
        with np.errstate(all="ignore"):
            model = rounded(block_order_reduce(wide, wide.dtype.type(1), np.multiply,
                                               R.CHUNK), dtype_name)
        g, e = host(got).reshape(-1), host(expected).reshape(-1)
        np.testing.assert_array_equal(g, model.reshape(-1), err_msg=case)
        n = values.shape[-1]
        allowed = 2 * (n - 1) * float(np.finfo(accumulator(dtype_name)).eps) * np.abs(e) \
            + 2 * float(finfo(dtype_name).eps) * np.abs(e)
        assert np.all(np.abs(g - e) <= allowed), case
    assert plugins.fallbacks() == {}


# op -> (fn, values, shapes on the one-thread side of each boundary, its kernel, a kernel of
# the other side): at most SCAN_LONG / PROD_LONG elements, or at least SCAN_ROWS rows /
# PROD_FEW_OUTPUTS outputs
SEQUENTIAL_CASES = {
    "cumsum": (lambda t: t.cumsum(1), finite_values,
               ((2, R.SCAN_LONG), (R.SCAN_ROWS, R.SCAN_LONG + 50)),
               "cumsum_kernel", "cumsum_carries_kernel"),
    "prod": (lambda t: t.prod(1), near_one,
             ((3, R.PROD_LONG), (R.PROD_FEW_OUTPUTS, R.PROD_LONG + 1)),
             "lane_prod_kernel", "reduce_kernel"),
}


@pytest.mark.parametrize("op", SEQUENTIAL_CASES)
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_one_thread_per_row_keeps_the_reference_bits_where_the_rule_says(device_kind,
                                                                        dtype_name, op):
    """cumsum and prod at each boundary of their rules, on the one-thread-per-row side: the
    reference's order, bit for bit."""
    fn, values, shapes, kernel, other = SEQUENTIAL_CASES[op]
    plugins.reset_fallbacks()
    for shape in shapes:
        _, got, expected = run_case(device_kind, fn, values(shape, dtype_name, 79), lambda t: t)
        assert launched(device_kind, kernel) in (None, True), shape
        assert launched(device_kind, other) in (None, False), shape
        assert_close(got, expected, False, err_msg=str(shape))
    assert plugins.fallbacks() == {}
