"""NumPy emulations of reftorch-cuda's kernels/reduce.cu kernels beyond the plain block
reductions (those, with the bool / integer sums and products and the norms p = 1, 2, inf, -inf,
are in cuda_kernel_emulation): the column path (column_reduce_kernel: one thread per output in
index order, also the second pass of a chunked column; column_chunks_kernel: each (chunk,
output) task in index order), the row path (row_reduce_kernel: the block order with `lanes`
threads), var / std (variance_kernel, deviation_chunks_kernel, variance_partials_kernel),
argmax / argmin / max.dim / min.dim (arg_reduce_kernel, arg_chunks_kernel,
arg_partials_kernel) and cumsum (cumsum_kernel: each (row, chunk) in index order from its
carry; cumsum_chunk_sums_kernel; cumsum_carries_kernel: the segment order of the carries);
and kernels/reduce_more.cu's logsumexp (logsumexp_kernel, logsumexp_chunks_kernel,
logsumexp_partials_kernel) and the norms p = 0 and whole p >= 3 (norm_power_kernel,
norm_power_chunks_kernel, norm_power_partials_kernel); float prod runs on lane_prod_kernel
(the reference's lane order, one thread per output) and the block kernels with ProdOp. Registered with cuda_kernel_emulation's `emulates` (which imports
this module); parameters are decoded from the raw bytes with the kernels' C layouts.

The sums follow each kernel's order (the block order: cuda_kernel_emulation's _block_reduce;
the column, row and scan orders here), so on a GPU the device's bits can be checked against
them; the arg kernels' choice does not depend on any order, so they are modelled by the rule
itself.
"""
from __future__ import annotations

import numpy as np

from spec_tests import cuda_kernel_emulation as E


def _launch_is_blocks(grid, block, shared):
    assert grid[1:] == (1, 1) and block == (E.REDUCE_THREADS, 1, 1) and shared == 0


# --- var / std --------------------------------------------------------------------------------

def _squared_deviations(values, centre):
    """The second pass's terms: (x - centre)^2, centre per row."""
    deviation = values - centre[..., None]
    return deviation * deviation


def _sum(terms):
    """The block-order sum of (outer..., n) terms over the last axis."""
    return E._block_reduce(terms, terms.dtype.type(0), np.add)


def _store_chunk_sums(driver, address, terms, chunk, chunks):
    """A *_chunks_kernel's sums of its chunk's terms. Padding with +0 terms: adding +0 to a
    sum from +0 changes nothing, as the kernel's threads past the chunk's end add nothing."""
    E.store_chunk_results(driver, address, terms, chunk, chunks, terms.dtype.type(0), np.add)


def _statistics(driver, address, dtype, shape):
    """A two-pass reduction's first-pass statistic per output (the centres of var / std, the
    shifts of logsumexp), dense by output index, as a NumPy array."""
    return np.array(driver.view(address, dtype, shape, E.dense_strides(shape)))


def _chunk_sums(driver, address, dtype, shape, chunks):
    """A *_partials_kernel's block-order sums of each output's chunk sums (unfinished)."""
    return E.combined_chunk_results(driver, address, dtype, shape, chunks, 0, np.add)


def _finish_variance(squares, dof, std):
    variance = squares / squares.dtype.type(dof)
    return np.sqrt(variance) if std else variance


@E.emulates(r"variance_kernel<(\w+), (true|false)>")
def variance(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    p = E.slots(params, 5)      # (outer, inner, double dof, out, in)
    storage = E.STORAGE[match.group(1)]
    shape, out_strides, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[4]),
                                                   storage)
    c = values.dtype.type
    with np.errstate(all="ignore"):
        centre = _sum(values) / c(values.shape[-1])
        value = _finish_variance(_sum(_squared_deviations(values, centre)), E.double(p[2]),
                                 match.group(2) == "true")
        driver.view(E.pointer(p[3]), storage, shape, out_strides)[...] = value.astype(storage)


def _second_pass_chunks(terms):
    """The emulation of a two-pass reduction's chunks kernel (deviation_chunks_kernel,
    logsumexp_chunks_kernel): each chunk's sum of terms(values, statistic per output)."""
    def emulation(driver, match, grid, block, shared, params):
        _launch_is_blocks(grid, block, shared)
        # (outer, inner, int64 chunk, int64 chunks, statistics, partials, in)
        p = E.slots(params, 7)
        storage = E.STORAGE[match.group(1)]
        shape, _, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[6]), storage)
        statistics = _statistics(driver, E.pointer(p[4]), values.dtype, shape)
        with np.errstate(all="ignore"):
            _store_chunk_sums(driver, E.pointer(p[5]), terms(values, statistics),
                              E.int64(p[2]), E.int64(p[3]))
    return emulation


deviation_chunks = E.emulates(r"deviation_chunks_kernel<(\w+)>")(
    _second_pass_chunks(_squared_deviations))


@E.emulates(r"variance_partials_kernel<(\w+), (true|false)>")
def variance_partials(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    p = E.slots(params, 5)      # (outer, int64 chunks, double dof, out, partials)
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    shape, (out_strides, _) = E.geometry(p[0], 2)
    with np.errstate(all="ignore"):
        squares = _chunk_sums(driver, E.pointer(p[4]), c, shape, E.int64(p[1]))
        value = _finish_variance(squares, E.double(p[2]), match.group(2) == "true")
        driver.view(E.pointer(p[3]), storage, shape, out_strides)[...] = value.astype(storage)


# --- argmax / argmin / max.dim / min.dim ------------------------------------------------------

def choose(values, indices, largest):
    """The chosen (value, index) over the last axis: the first NaN (lowest index) when there
    is one, else the largest (smallest) value at its lowest index (-0.0 == +0.0)."""
    nan = np.isnan(values)
    best = (np.max if largest else np.min)(
        np.where(nan, -np.inf if largest else np.inf, values), axis=-1, keepdims=True)
    candidates = np.where(nan.any(-1, keepdims=True), nan, ~nan & (values == best))
    ranked = np.where(candidates, indices, np.iinfo(np.int64).max)
    position = np.argmin(ranked, axis=-1)[..., None]
    return (np.take_along_axis(values, position, -1)[..., 0],
            np.take_along_axis(indices, position, -1)[..., 0])


def _input_rows(driver, outer_address, inner_address, in_address, storage):
    """The input as (outer..., n) in its storage type (for copying the chosen element)."""
    outer_shape, (_, in_strides) = E.geometry(outer_address, 2)
    inner_shape, (inner_strides,) = E.geometry(inner_address, 1)
    view = driver.view(in_address, storage, outer_shape + inner_shape, in_strides + inner_strides)
    return np.array(view).reshape(outer_shape + (-1,))


def _store_arg(driver, params, indices_slot, values_slot, storage, shape, out_strides, rows,
               index):
    """Write the chosen indices and, when the values pointer is not null, the chosen input
    elements themselves (index and values outputs share out_strides)."""
    assert np.all(index >= 0)
    driver.view(E.pointer(params[indices_slot]), np.int64, shape, out_strides)[...] = index
    if E.pointer(params[values_slot]):
        chosen = np.take_along_axis(rows, index[..., None], -1)[..., 0]
        driver.view(E.pointer(params[values_slot]), storage, shape, out_strides)[...] = chosen


@E.emulates(r"arg_reduce_kernel<(\w+), (true|false)>")
def arg_reduce(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    p = E.slots(params, 5)      # (outer, inner, int64* indices, T* values or null, in)
    storage = E.STORAGE[match.group(1)]
    shape, (out_strides, _) = E.geometry(p[0], 2)
    rows = _input_rows(driver, p[0], p[1], E.pointer(p[4]), storage)
    c = E.compute_type(storage)
    indices = np.broadcast_to(np.arange(rows.shape[-1]), rows.shape)
    _, index = choose(rows.astype(c), indices, match.group(2) == "true")
    _store_arg(driver, p, 2, 3, storage, shape, out_strides, rows, index)


@E.emulates(r"arg_chunks_kernel<(\w+), (true|false)>")
def arg_chunks(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    # (outer, inner, int64 chunk, int64 chunks, A* partial values, int64* partial indices, in)
    p = E.slots(params, 7)
    storage = E.STORAGE[match.group(1)]
    shape, _ = E.geometry(p[0], 2)
    rows = _input_rows(driver, p[0], p[1], E.pointer(p[6]), storage)
    c = E.compute_type(storage)
    chunk, chunks = E.int64(p[2]), E.int64(p[3])
    largest = match.group(2) == "true"
    # padding: a value never chosen over a real one (a worse value; never NaN) at a later index
    pieces = E.chunked(rows.astype(c), chunk, chunks, -np.inf if largest else np.inf)
    indices = np.broadcast_to(np.arange(chunks * chunk).reshape(chunks, chunk), pieces.shape)
    value, index = choose(pieces, indices, largest)
    E.partials_view(driver, E.pointer(p[4]), c, shape, chunks)[...] = value
    E.partials_view(driver, E.pointer(p[5]), np.int64, shape, chunks)[...] = index


@E.emulates(r"arg_partials_kernel<(\w+), (true|false)>")
def arg_partials(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    # (outer, inner, int64 chunks, int64* indices, T* values or null, A* partial values,
    #  int64* partial indices, in)
    p = E.slots(params, 8)
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    shape, (out_strides, _) = E.geometry(p[0], 2)
    chunks = E.int64(p[2])
    values = np.array(E.partials_view(driver, E.pointer(p[5]), c, shape, chunks))
    indices = np.array(E.partials_view(driver, E.pointer(p[6]), np.int64, shape, chunks))
    _, index = choose(values, indices, match.group(2) == "true")
    rows = _input_rows(driver, p[0], p[1], E.pointer(p[7]), storage)
    _store_arg(driver, p, 3, 4, storage, shape, out_strides, rows, index)


# --- reduce.cu's column and row paths -------------------------------------------------------------

def _in_order(values, op, identity, lengths=None):
    """Op's identity combined with the terms of (outer..., n) `values` over the last axis in
    index order, one element at a time (`lengths`: per leading position, how many to take)."""
    combine = E.REDUCERS[op][1]
    terms = E._terms(op, values)
    acc = np.full(values.shape[:-1], identity, values.dtype)
    for k in range(values.shape[-1]):
        step = combine(acc, terms[..., k])
        acc = step if lengths is None else np.where(k < lengths, step, acc)
    return acc


@E.emulates(rf"column_reduce_kernel<{E.TYPED_OP}>")
def column_reduce(driver, match, grid, block, shared, params):
    """One thread per output: its elements (or chunk results) in index order, then finish."""
    E.grid_stride(grid, block)
    assert shared == 0
    p = E.slots(params, 5)      # (outer, inner, int64 count, out, in)
    storage, compute, out_type = E.reduce_types(match, 1)
    op = match.group(2)
    shape, out_strides, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[4]),
                                                   storage, compute)
    identity = values.dtype.type(E.REDUCERS[op][0])
    with np.errstate(all="ignore"):
        total = _in_order(values, op, identity)
        value = E._finish(op, total, E.int64(p[2])).astype(out_type)
    driver.view(E.pointer(p[3]), out_type, shape, out_strides)[...] = value


@E.emulates(r"lane_prod_kernel<([\w ]+), ([\w ]+)>")
def lane_prod(driver, match, grid, block, shared, params):
    """One thread per output: its product in the reference's lane order, in the
    accumulation type, rounded once to the storage type."""
    E.grid_stride(grid, block)
    assert shared == 0
    p = E.slots(params, 4)      # (outer, inner, out, in)
    storage, compute = E.TYPES[match.group(1)], E.TYPES[match.group(2)]
    shape, out_strides, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[3]),
                                                   storage, compute)
    with np.errstate(all="ignore"):
        value = _lanes_then_tail(values).astype(storage)
    driver.view(E.pointer(p[2]), storage, shape, out_strides)[...] = value


def _lanes_then_tail(values, lanes=64):
    """lane_prod_kernel's loops over (outer..., n) `values`, as written: 1 times the first
    `lanes` elements, each later whole block multiplied in, the tree, then the tail."""
    n = values.shape[-1]
    body = n - n % lanes
    acc = np.ones(values.shape[:-1], values.dtype)
    if body:
        acc = acc[..., None] * values[..., :lanes]
        for b in range(lanes, body, lanes):
            acc = acc * values[..., b:b + lanes]
        width = lanes // 2
        while width:
            acc = acc[..., :width] * acc[..., width:2 * width]
            width //= 2
        acc = acc[..., 0]
    for r in range(body, n):
        acc = acc * values[..., r]
    return acc


@E.emulates(rf"column_chunks_kernel<{E.TYPED_OP}>")
def column_chunks(driver, match, grid, block, shared, params):
    """Each (chunk, output) task's elements in index order, into partials[c * outputs + o]."""
    E.grid_stride(grid, block)
    assert shared == 0 and match.group(4) is None
    p = E.slots(params, 6)      # (outer, inner, int64 chunk, int64 chunks, partials, in)
    storage, compute, _ = E.reduce_types(match, 1)
    op = match.group(2)
    shape, _, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[5]), storage, compute)
    chunk, chunks = E.int64(p[2]), E.int64(p[3])
    identity = values.dtype.type(E.REDUCERS[op][0])
    pieces = E.chunked(values, chunk, chunks, identity)
    lengths = np.minimum(values.shape[-1] - np.arange(chunks) * chunk, chunk)
    with np.errstate(all="ignore"):
        results = _in_order(pieces, op, identity, lengths)   # (outer..., chunks)
    outputs = int(np.prod(shape))
    view = driver.view(E.pointer(p[4]), compute, (chunks,) + shape,
                       (outputs,) + E.dense_strides(shape))
    view[...] = np.moveaxis(results, -1, 0)


@E.emulates(rf"row_reduce_kernel<{E.TYPED_OP}>")
def row_reduce(driver, match, grid, block, shared, params):
    """`lanes` lanes per output: reduce.cu's block order with `lanes` threads."""
    assert grid[1:] == (1, 1) and block == (E.REDUCE_THREADS, 1, 1) and shared == 0
    p = E.slots(params, 5)      # (outer, inner, int lanes, out, in)
    storage, compute, out_type = E.reduce_types(match, 1)
    op = match.group(2)
    lanes = E.int32(p[2])
    assert lanes in (1, 2, 4, 8, 16, 32)
    shape, out_strides, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[4]),
                                                   storage, compute)
    assert values.shape[-1] >= 1
    assert grid[0] == min(-(-int(np.prod(shape)) // (E.REDUCE_THREADS // lanes)), 1 << 20)
    identity, combine = E.REDUCERS[op]
    with np.errstate(all="ignore"):
        total = E._block_reduce(E._terms(op, values), values.dtype.type(identity), combine,
                                lanes)
        value = E._finish(op, total, values.shape[-1]).astype(out_type)
    driver.view(E.pointer(p[3]), out_type, shape, out_strides)[...] = value


# --- cumsum -----------------------------------------------------------------------------------
# Each (row, chunk) task adds its chunk's elements in index order from its first element (and
# for chunk c > 0 from the carry plus the first element); modelled chunk by chunk, one position
# of every chunk at a time, positions past the row's end left out (as the kernel's loop stops).

def _scan_operands(driver, params, first_step, count):
    """(rows shape, n, row strides, (chunk, chunks)) of a scan kernel whose parameters start
    (rows, int64 n, `count` int64 steps, int64 chunk, int64 chunks)."""
    shape, strides = E.geometry(params[0], 2)
    n = E.int64(params[1])
    steps = [E.int64(params[first_step + k]) for k in range(count)]
    chunk, chunks = (E.int64(params[first_step + count + k]) for k in range(2))
    assert n >= 1 and 1 <= chunk and chunks == -(-n // chunk)
    return shape, n, strides, steps, chunk, chunks


def _scan_pieces(driver, address, storage, compute, shape, n, strides, step, chunk, chunks):
    """The (rows..., n) input at `address` cut into (rows..., chunks, chunk), in the
    accumulation type, with each position's validity (inside the row)."""
    x = driver.view(address, storage, shape + (n,), strides + (step,))
    wide = np.zeros(shape + (chunks * chunk,), compute)
    wide[..., :n] = x.astype(compute)
    valid = (np.arange(chunks * chunk) < n).reshape(chunks, chunk)
    return wide.reshape(shape + (chunks, chunk)), valid


def _walk_chunks(pieces, valid, acc, visit=None):
    """Each chunk's running sum from its start `acc` (rows..., chunks) over its later positions
    in order, positions past the row's end left out; visit(k, running sum) at every position.
    Returns the chunks' totals."""
    with np.errstate(all="ignore"):
        for k in range(pieces.shape[-1]):
            if k:
                acc = np.where(valid[:, k], acc + pieces[..., k], acc)
            if visit is not None:
                visit(k, acc)
    return acc


def _scan_launch(driver, match, grid, block, shared, params, count, steps):
    """What a scan kernel of `count` parameters (rows, int64 n, `steps` int64 steps, int64
    chunk, int64 chunks, ..., the input last) gives: (slots, (compute, out type), rows shape, n,
    row strides, steps, (chunk, chunks), input pieces, their validity) (see _scan_pieces)."""
    E.grid_stride(grid, block)
    assert shared == 0
    p = E.slots(params, count)
    storage, compute, out_type = E.reduce_types(match, 1)
    assert match.group(2) in ("Sum", "WrappingSum")
    shape, n, strides, step_values, chunk, chunks = _scan_operands(driver, p, 2, steps)
    pieces, valid = _scan_pieces(driver, E.pointer(p[count - 1]), storage, compute, shape, n,
                                 strides[1], step_values[-1], chunk, chunks)
    return p, (compute, out_type), shape, n, strides, step_values, (chunk, chunks), pieces, valid


@E.emulates(rf"cumsum_kernel<{E.TYPED_OP}>")
def cumsum(driver, match, grid, block, shared, params):
    # (rows, int64 n, int64 out_step, int64 in_step, int64 chunk, int64 chunks, A* carries,
    #  out, in)
    p, (compute, out_type), shape, n, (out_strides, _), (out_step, _), (_, chunks), pieces, \
        valid = _scan_launch(driver, match, grid, block, shared, params, 9, 2)
    start = pieces[..., 0]
    if chunks > 1:   # chunk c > 0 starts from carry + its first element
        carries = np.array(E.partials_view(driver, E.pointer(p[6]), compute, shape, chunks))
        with np.errstate(all="ignore"):
            start = np.concatenate([start[..., :1], carries[..., 1:] + start[..., 1:]], -1)
    else:
        assert E.pointer(p[6]) == 0
    result = np.zeros(pieces.shape, out_type)

    def store(k, running):
        result[..., k] = running.astype(out_type)
    _walk_chunks(pieces, valid, start, store)
    out = driver.view(E.pointer(p[7]), out_type, shape + (n,), out_strides + (out_step,))
    out[...] = result.reshape(shape + (-1,))[..., :n]


@E.emulates(rf"cumsum_chunk_sums_kernel<{E.TYPED_OP}>")
def cumsum_chunk_sums(driver, match, grid, block, shared, params):
    # (rows, int64 n, int64 in_step, int64 chunk, int64 chunks, A* sums, in)
    p, (compute, _), shape, _, _, _, (_, chunks), pieces, valid = _scan_launch(
        driver, match, grid, block, shared, params, 7, 1)
    assert chunks > 1
    E.partials_view(driver, E.pointer(p[5]), compute, shape, chunks)[...] = _walk_chunks(
        pieces, valid, pieces[..., 0])


def scan_carries(sums, threads=E.REDUCE_THREADS):
    """cumsum_carries_kernel's carries of (rows, chunks) chunk sums: each of `threads`
    segments of ceil(chunks / threads) sums totalled in order, the totals before each segment
    added in order, then each segment walked from its prefix (carry[0] is left as it is)."""
    chunks = sums.shape[-1]
    segment = -(-chunks // threads)
    starts = range(0, chunks, segment)
    totals = []
    for begin in starts:
        total = sums[..., begin]
        for c in range(begin + 1, min(begin + segment, chunks)):
            total = total + sums[..., c]
        totals.append(total)
    carries = sums.copy()
    running = None
    for begin, total in zip(starts, totals):
        walk = running
        for c in range(begin, min(begin + segment, chunks)):
            if c > 0:
                carries[..., c] = walk
            walk = sums[..., c] if walk is None else walk + sums[..., c]
        running = total if running is None else running + total
    return carries


@E.emulates(r"cumsum_carries_kernel<([\w ]+), (\w+)Op>")
def cumsum_carries(driver, match, grid, block, shared, params):
    assert grid[1:] == (1, 1) and block == (E.REDUCE_THREADS, 1, 1) and shared == 0
    p = E.slots(params, 3)      # (int64 rows, int64 chunks, A* sums), in place
    compute = E.TYPES[match.group(1)]
    assert match.group(2) in ("Sum", "WrappingSum")
    rows, chunks = E.int64(p[0]), E.int64(p[1])
    assert rows >= 1 and chunks > 1 and grid[0] == min(rows, 1 << 20)
    view = driver.view(E.pointer(p[2]), compute, (rows, chunks), (chunks, 1))
    with np.errstate(all="ignore"):
        view[...] = scan_carries(np.array(view))


# --- reduce_more.cu: logsumexp ----------------------------------------------------------------

def _finite_or_zero(shift):
    return np.where(np.abs(shift) < np.inf, shift, shift.dtype.type(0))


def _shifted_exp(values, shift):
    """The second pass's terms: exp(x - shift), shift per row."""
    return np.exp(values - shift[..., None])


def _shifts(driver, address, dtype, shape):
    """The first pass's largest elements, made finite or 0."""
    return _finite_or_zero(_statistics(driver, address, dtype, shape))


@E.emulates(r"logsumexp_kernel<(\w+)>")
def logsumexp(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    p = E.slots(params, 4)      # (outer, inner, out, in)
    storage = E.STORAGE[match.group(1)]
    shape, out_strides, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[3]),
                                                   storage)
    c = values.dtype.type
    with np.errstate(all="ignore"):
        shift = _finite_or_zero(E._block_reduce(values, c(-np.inf), E.REDUCERS["Amax"][1]))
        value = np.log(_sum(_shifted_exp(values, shift))) + shift
        driver.view(E.pointer(p[2]), storage, shape, out_strides)[...] = value.astype(storage)


logsumexp_chunks = E.emulates(r"logsumexp_chunks_kernel<(\w+)>")(_second_pass_chunks(
    lambda values, largest: _shifted_exp(values, _finite_or_zero(largest))))


@E.emulates(r"logsumexp_partials_kernel<(\w+)>")
def logsumexp_partials(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    p = E.slots(params, 5)      # (outer, int64 chunks, shifts, out, partials)
    storage = E.STORAGE[match.group(1)]
    c = E.compute_type(storage)
    shape, (out_strides, _) = E.geometry(p[0], 2)
    shifts = _shifts(driver, E.pointer(p[2]), c, shape)
    with np.errstate(all="ignore"):
        value = np.log(_chunk_sums(driver, E.pointer(p[4]), c, shape, E.int64(p[1]))) + shifts
        driver.view(E.pointer(p[3]), storage, shape, out_strides)[...] = value.astype(storage)


# --- reduce_more.cu: norms p = 0 and whole p >= 3 ---------------------------------------------

NORM_ACCUMULATORS = {"float": np.float32, "double": np.float64}


def _norm_terms(values, power):
    """The kernel's term: x != 0 for p = 0, else |x| multiplied by itself left to right."""
    if power == 0:
        return (values != 0).astype(values.dtype)
    magnitude = np.abs(values)
    term = magnitude
    for _ in range(1, power):
        term = term * magnitude
    return term


def _norm_store(total, power, storage):
    """pow(total, 1 / p) (p > 0) with 1 / p rounded to the accumulator; then to the storage
    type through its computation type (a double count reaches a 16-bit type via float)."""
    value = total if power == 0 else total ** total.dtype.type(1.0 / power)
    return np.asarray(value).astype(E.compute_type(storage)).astype(storage)


@E.emulates(r"norm_power_kernel<(\w+), (float|double)>")
def norm_power(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    p = E.slots(params, 5)      # (outer, inner, int p, out, in)
    storage, accumulator = E.STORAGE[match.group(1)], NORM_ACCUMULATORS[match.group(2)]
    shape, out_strides, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[4]),
                                                   storage, accumulator)
    power = E.int32(p[2])
    with np.errstate(all="ignore"):
        total = _sum(_norm_terms(values, power))
        driver.view(E.pointer(p[3]), storage, shape, out_strides)[...] = _norm_store(
            total, power, storage)


@E.emulates(r"norm_power_chunks_kernel<(\w+), (float|double)>")
def norm_power_chunks(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    # (outer, inner, int64 chunk, int64 chunks, int p, partials, in)
    p = E.slots(params, 7)
    storage, accumulator = E.STORAGE[match.group(1)], NORM_ACCUMULATORS[match.group(2)]
    shape, _, values = E._reduced_values(driver, p[0], p[1], E.pointer(p[6]), storage,
                                         accumulator)
    with np.errstate(all="ignore"):
        _store_chunk_sums(driver, E.pointer(p[5]), _norm_terms(values, E.int32(p[4])),
                          E.int64(p[2]), E.int64(p[3]))


@E.emulates(r"norm_power_partials_kernel<(\w+), (float|double)>")
def norm_power_partials(driver, match, grid, block, shared, params):
    _launch_is_blocks(grid, block, shared)
    p = E.slots(params, 5)      # (outer, int64 chunks, int p, out, partials)
    storage, accumulator = E.STORAGE[match.group(1)], NORM_ACCUMULATORS[match.group(2)]
    shape, (out_strides, _) = E.geometry(p[0], 2)
    with np.errstate(all="ignore"):
        total = _chunk_sums(driver, E.pointer(p[4]), accumulator, shape, E.int64(p[1]))
        driver.view(E.pointer(p[3]), storage, shape, out_strides)[...] = _norm_store(
            total, E.int32(p[2]), storage)
