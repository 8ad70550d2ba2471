"""Reductions on cuda (kernels/reduce.cu), over any dims (keepdim, any strides, 0-dim and
empty tensors where the reference allows them):

    sum, mean, amax, amin    the four float dtypes (max/min of every element share amax/amin)
    sum                      bool and integer tensors, into int64 (wrapping as NumPy)
    sum_to_size              sum over the leading and the expanded dims (how autograd undoes
                             broadcasting, e.g. a bias's gradient)
    norm                     p = 2, 1, inf, -inf, the four float dtypes
    var, std                 any correction, the four float dtypes
    argmax, argmin           along one dim or over the flattened tensor, the four float dtypes
    max.dim, min.dim         (values, int64 indices) along one dim, the four float dtypes
    cumsum                   along any dim: the four float dtypes, and bool / integer tensors
                             into int64
    logsumexp                over any dims, the four float dtypes (kernels/reduce_more.cu)
    prod                     over every dim or one dim: the four float dtypes, and bool /
                             integer tensors into int64 (wrapping as NumPy)
    norm                     also p = 0 (the count of nonzeros) and whole p from 3 to
                             MAX_WHOLE_P (reduce_more.cu)

Every kernel combines in a fixed order that depends on the shapes and strides alone (the path
and its split come from the size rule below, never from the GPU or the grid), so results
repeat bit for bit. The paths (see reduce.cu), chosen on the host by `_path`:
  - column: the kept dims hold the input's densest dim (outer's last dim has a smaller input
    stride than every reduced dim) and there are at least COLUMN_MIN_OUTPUTS outputs: one
    thread per output, neighbouring threads on neighbouring outputs (coalesced loads), each
    combining its n elements in index order from the op's identity. When the outputs are too
    few for COLUMN_THREADS threads, `column_split` cuts n into chunks (as many as reach
    COLUMN_THREADS (chunk, output) tasks, each chunk at least COLUMN_MIN_CHUNK elements, at
    most COLUMN_MAX_CHUNKS chunks): one thread per task, then a second column pass combining
    each output's chunk results in chunk order. sum, mean, amax, amin, norm p = 1, 2, inf,
    -inf, bool / integer sums.
  - rows: otherwise, n from 1 to ROW_MAX: `row_lanes(n)` lanes (the power of two at or above
    n, at most 32) per output, lane l taking elements l, l + lanes, ... then a shuffle tree.
    The same ops.
  - block: otherwise (and every other reduction: var, std, logsumexp, the arg reductions,
    norm p = 0 and p >= 3, integer products): one 256-thread block per output; more than
    CHUNK elements per output run in two launches: fixed chunks of CHUNK elements, one block
    each, then one block per output over the chunks' results (a full sum of 64M elements
    would otherwise be one block's work); var/std and logsumexp take four (the mean's or the
    largest element's two, then the squared deviations' or exponentials' two).
The numerical contract against the reference, with d a path's longest chain of roundings:
block n / 256 + 8 (chunked CHUNK / 256 + chunks / 256 + 16), column n (chunked chunk + chunks),
rows ceil(n / lanes) + log2(lanes):
  - sum, mean, norm p = 1 and 2: not NumPy's pairwise order, so within both orders' rounding
    bounds: (d + log2 n + 1) eps of the sum of |x| (divided by n for the mean), plus the
    final rounding to the dtype.
  - var, std: the reference's two passes (the mean, then the sum of squared deviations over
    max(n - correction, 0)), each sum in the block order: within the sums' bounds.
  - amax, amin, max, min, norm p = inf and -inf, argmax, argmin, max.dim, min.dim: exact on
    every path. NaN propagates and an index is the first occurrence (the first NaN when there
    is one), as NumPy's argmax; max.dim's values are copied from the input element chosen.
  - integer sums and cumsums: exact (int64, wrapping) on every path.
  - float cumsum: `scan_split`'s rule. At least SCAN_ROWS rows, or rows of at most SCAN_LONG:
    one thread per row adds in index order, as the reference's add.accumulate does: bit for
    bit. Fewer, longer rows: each row cut into chunks (enough for SCAN_THREADS (row, chunk)
    tasks, each at least SCAN_MIN_CHUNK elements), the chunk sums and then their carries
    (exclusive prefix sums in a fixed segment order) computed first, then each chunk scanned
    in index order from its carry: out[k] within (k + 2 chunk + 2 ceil(chunks / 256) + 256)
    eps of the sum of |x[0..k]| of the reference's, deterministic; chunk 0 is the
    reference's bits.
  - logsumexp: the reference's shift by the row's largest element (0 when that is not finite:
    a NaN row gives NaN, a row with +inf gives inf, a row of -inf or an empty one -inf), then
    log of the block-order sum of exp(x - shift), plus the shift. CUDA's expf / logf are within
    2 / 1 ulp of the exact value (exp / log: 1 / 1; the CUDA programming guide's table), so
    against NumPy's: within the sum's bounds plus a few ulp of the result.
  - prod: floats, at least PROD_FEW_OUTPUTS outputs or at most PROD_LONG elements each: one
    thread per output multiplies its elements in the reference's lane order (64 lanes down
    the run in order, folded as a tree, then the tail in order; index order for runs under
    64), over the elements' logical order (every dim of a layout whose dims do not merge in
    that order goes through a dense copy first): bit for bit. Fewer, longer products: the block path's tree of products (CHUNK chunks as
    the sums): n - 1 roundings in either order, so within 2 (n - 1) eps relative of the
    reference's (before the final rounding to a 16-bit dtype), unless an intermediate product
    over- or underflows in one order and not in the other; deterministic. bool / integers:
    int64, wrapping, exact in any order (the block path).
  - norm p = 0: the count of nonzeros (NaN counts), exact (a double count, rounded once as
    the reference rounds its int64 count). Whole p from 3 to MAX_WHOLE_P: the block-order sum
    of |x| * ... * |x| (p - 1 roundings per term where NumPy's power rounds about once), then
    pow(sum, 1 / p) (CUDA's powf / pow: within 4 / 2 ulp): within the sums' bounds plus p + 4
    ulp per term and of the root.
Every index the kernels compute (outputs times chunks, element offsets) is 64-bit.
Declined (the reference runs, through the counted fallback): a `dtype=` other than the
input's (int64 for bool / integer sums, prods and cumsums), other norms' p (fractional,
negative, above MAX_WHOLE_P), a correction that is not a number, and geometries with more
than RT_MAX_DIMS dims after coalescing.
"""
from __future__ import annotations

import ctypes
import functools
import math
from typing import NamedTuple

from reftorch import _dtype as D
from reftorch._shape import contiguous_strides
from reftorch.autograd.grad_mode import no_grad
from reftorch._tensor import Tensor
from reftorch_plugins.geometry import coalesce

from .device import BLOCK, elementwise_grid
from .kernel_base import (FLOAT_DTYPES, FLOAT_TYPES, INT_TYPES, Program, address,
                          block_threads, geometry_struct, launch_block_rows, launch_blocks,
                          max_dims, new_result, on_one_cuda_device, pointer)

REDUCE_OPS = {"sum": "SumOp", "mean": "MeanOp", "amax": "AmaxOp", "amin": "AminOp",
              "max": "AmaxOp", "min": "AminOp"}
NORM_OPS = {2.0: "NormTwoOp", 1.0: "NormOneOp", math.inf: "NormInfOp",
            -math.inf: "NormNegInfOp"}
# A norm's chunk results are terms already (|x|, x * x): combined by the plain op.
PARTIALS_OP = {"NormOneOp": "SumOp", "NormInfOp": "AmaxOp", "NormNegInfOp": "AminOp"}
INT_DTYPES = tuple(D.by_name(name) for name in INT_TYPES)

# Elements per chunk of a two-launch reduction: 64 per thread of a 256-thread block. A constant,
# so the summation order depends on the reduced element count alone.
CHUNK = 16384

# The path rule (see _path): every number here is a constant, so the path and its split, and
# with them the order of every combination, depend on the shapes and strides alone.
COLUMN_MIN_OUTPUTS = 32    # the column path needs a warp of neighbouring outputs
COLUMN_THREADS = 1 << 17   # (chunk, output) tasks that fill a GPU (H100: 132 SMs x 2048 threads)
COLUMN_MIN_CHUNK = 32      # the fewest elements one chunked column thread combines
COLUMN_MAX_CHUNKS = 1024   # the most chunk results the second column pass combines per output
ROW_MAX = 512              # reductions of up to this many along the densest dim: the row path
WARP = 32                  # the most lanes of the row path (one warp)
# A column's chunk results are terms already (|x|, x * x): combined by the plain op (the
# 2-norm's square root by SumRootOp, whose term is the element itself).
COLUMN_PARTIALS_OP = {**PARTIALS_OP, "NormTwoOp": "SumRootOp"}


class Kernels(NamedTuple):
    """The instantiations of one reduction: `block` (one-launch, chunks, partials) of the
    block path; `column` (one-launch, chunks, partials) of the column path and `rows` (the row
    kernel) where the reduction has them (else it takes the block path)."""
    block: tuple
    column: tuple = None
    rows: str = None


def float_accumulator(dtype_name):
    """The C++ type a float reduction accumulates in: double for float64, float for float32
    and the 16-bit types (rounded once at the end), as the reference computes."""
    return "double" if dtype_name == "float64" else "float"


def reduce_expression(op_struct, dtype_name, kernel="reduce_kernel"):
    return f"{kernel}<{FLOAT_TYPES[dtype_name]}, {op_struct}>"


def path_kernels(t, op_struct, a, out, partials_op):
    """(column, rows) kernels of storage type `t`, op, accumulator `a` and output type `out`."""
    column = (f"column_reduce_kernel<{t}, {op_struct}, {a}, {out}>",
              f"column_chunks_kernel<{t}, {op_struct}, {a}>",
              f"column_reduce_kernel<{a}, {partials_op}, {a}, {out}>")
    return column, f"row_reduce_kernel<{t}, {op_struct}, {a}, {out}>"


@functools.lru_cache(maxsize=None)   # bounded: op structs x dtypes
def float_kernels(op_struct, dtype_name, paths=True):
    """The Kernels of a float reduction (`paths` False: the block path only)."""
    block = (reduce_expression(op_struct, dtype_name),
             reduce_expression(op_struct, dtype_name, "reduce_chunks_kernel"),
             reduce_expression(PARTIALS_OP.get(op_struct, op_struct), dtype_name,
                               "reduce_partials_kernel"))
    if not paths:
        return Kernels(block)
    t = FLOAT_TYPES[dtype_name]
    return Kernels(block, *path_kernels(t, op_struct, float_accumulator(dtype_name), t,
                                        COLUMN_PARTIALS_OP.get(op_struct, op_struct)))


def wrapping_kernels(dtype_name, op_struct, paths=False):
    """The Kernels of a bool / integer sum or product (op_struct WrappingSumOp,
    WrappingProdOp) into long long."""
    t = INT_TYPES[dtype_name]
    block = (f"reduce_kernel<{t}, {op_struct}, long long, long long>",
             f"reduce_chunks_kernel<{t}, {op_struct}, long long>",
             f"reduce_partials_kernel<long long, {op_struct}>")
    if not paths:
        return Kernels(block)
    return Kernels(block, *path_kernels(t, op_struct, "long long", "long long", op_struct))


def int_sum_kernels(dtype_name):
    return wrapping_kernels(dtype_name, "WrappingSumOp", paths=True)


def arg_kernels(dtype_name, largest):
    t, flag = FLOAT_TYPES[dtype_name], "true" if largest else "false"
    return tuple(f"{kernel}<{t}, {flag}>"
                 for kernel in ("arg_reduce_kernel", "arg_chunks_kernel", "arg_partials_kernel"))


def variance_kernels(dtype_name, std):
    """(one-launch, squared-deviation chunks, their partials) kernels of var / std."""
    t, flag = FLOAT_TYPES[dtype_name], "true" if std else "false"
    return (f"variance_kernel<{t}, {flag}>", f"deviation_chunks_kernel<{t}>",
            f"variance_partials_kernel<{t}, {flag}>")


def cumsum_types(dtype_name):
    """(storage type, op, accumulator, output type) of cumsum's kernels."""
    if dtype_name in FLOAT_TYPES:
        t = FLOAT_TYPES[dtype_name]
        return t, "SumOp", float_accumulator(dtype_name), t
    return INT_TYPES[dtype_name], "WrappingSumOp", "long long", "long long"


def cumsum_kernels(dtype_name):
    """(scan, chunk sums, carries) kernels of cumsum."""
    t, op, a, out = cumsum_types(dtype_name)
    return (f"cumsum_kernel<{t}, {op}, {a}, {out}>", f"cumsum_chunk_sums_kernel<{t}, {op}, {a}>",
            f"cumsum_carries_kernel<{a}, {op}>")


def _programs(expressions):
    """Name expressions, each once, in order, for a Program."""
    return tuple(dict.fromkeys(expressions))


PLAIN_OPS = tuple(dict.fromkeys(REDUCE_OPS.values()))
# reduce.cu's instantiations, as several programs: NVRTC's time grows with the instantiations
# (about 0.14 s each on a 2-core x86-64), and a program is compiled on the first launch of any
# of its kernels, so a first `sum` does not wait for the arg, variance, norm and scan kernels,
# nor for the paths its shapes do not take.
REDUCE = Program("reduce.cu", _programs(
    [e for s in PLAIN_OPS for name in FLOAT_TYPES for e in float_kernels(s, name).block]
    + [e for name in INT_TYPES for e in int_sum_kernels(name).block]))
REDUCE_COLUMN = Program("reduce.cu", _programs(
    [e for s in PLAIN_OPS for name in FLOAT_TYPES for e in float_kernels(s, name).column]
    + [e for name in INT_TYPES for e in int_sum_kernels(name).column]))
REDUCE_ROWS = Program("reduce.cu", _programs(
    [float_kernels(s, name).rows for s in PLAIN_OPS for name in FLOAT_TYPES]
    + [int_sum_kernels(name).rows for name in INT_TYPES]))
REDUCE_NORM = Program("reduce.cu", _programs(
    e for op in NORM_OPS.values() for name in FLOAT_TYPES
    for e in (*float_kernels(op, name).block, *float_kernels(op, name).column,
              float_kernels(op, name).rows)
    if not (REDUCE.has(e) or REDUCE_COLUMN.has(e))))   # the plain ops' partials
REDUCE_VARIANCE = Program("reduce.cu", _programs(
    e for name in FLOAT_TYPES for std in (False, True) for e in variance_kernels(name, std)))
REDUCE_ARG = Program("reduce.cu", tuple(
    e for name in FLOAT_TYPES for largest in (True, False) for e in arg_kernels(name, largest)))
REDUCE_SCAN = Program("reduce.cu", _programs(
    e for name in (*FLOAT_TYPES, *INT_TYPES) for e in cumsum_kernels(name)))


# reduce_more.cu (built on reduce.cu's templates): three more programs, so none of the above
# grows and a first logsumexp, prod or p = 0 norm compiles only its own kernels.
MAX_WHOLE_P = 8   # whole p norms as repeated products: p - 1 roundings per term


def logsumexp_kernels(dtype_name):
    """(one-launch, exponential-sum chunks, their partials) kernels of logsumexp."""
    t = FLOAT_TYPES[dtype_name]
    return tuple(f"{kernel}<{t}>" for kernel in ("logsumexp_kernel", "logsumexp_chunks_kernel",
                                                 "logsumexp_partials_kernel"))


def prod_kernels(dtype_name):
    """The Kernels of a float prod: `column` its one-thread-per-output kernel (the
    reference's lane order, one launch), `block` its few-long-products tree."""
    t, a = FLOAT_TYPES[dtype_name], float_accumulator(dtype_name)
    return Kernels(float_kernels("ProdOp", dtype_name, paths=False).block,
                   (f"lane_prod_kernel<{t}, {a}>",))


def int_prod_kernels(dtype_name):
    return wrapping_kernels(dtype_name, "WrappingProdOp")


def norm_power_accumulator(dtype_name, p):
    """p = 0 counts in double (exact); other p sum in the computation type."""
    return "double" if p == 0 else float_accumulator(dtype_name)


def norm_power_kernels(dtype_name, p):
    """(one-launch, chunks, partials) kernels of the p = 0 or whole p >= 3 norm."""
    t, a = FLOAT_TYPES[dtype_name], norm_power_accumulator(dtype_name, p)
    return tuple(f"{kernel}<{t}, {a}>" for kernel in (
        "norm_power_kernel", "norm_power_chunks_kernel", "norm_power_partials_kernel"))


MORE = ("reduce.cu",)   # reduce_more.cu's includes
REDUCE_LOGSUMEXP = Program("reduce_more.cu", tuple(
    e for name in FLOAT_TYPES for e in logsumexp_kernels(name)), MORE)
REDUCE_PROD = Program("reduce_more.cu", _programs(
    [e for name in FLOAT_TYPES for e in (*prod_kernels(name).column, *prod_kernels(name).block)]
    + [e for name in INT_TYPES for e in int_prod_kernels(name).block]), MORE)
REDUCE_NORM_POWER = Program("reduce_more.cu", tuple(dict.fromkeys(
    e for p in (0, 3) for name in FLOAT_TYPES for e in norm_power_kernels(name, p))), MORE)
PROGRAMS = (REDUCE, REDUCE_COLUMN, REDUCE_ROWS, REDUCE_NORM, REDUCE_VARIANCE, REDUCE_ARG,
            REDUCE_SCAN, REDUCE_LOGSUMEXP, REDUCE_PROD, REDUCE_NORM_POWER)
# the program that holds each instantiation (a chunked norm or var also launches REDUCE's)
PROGRAM_OF = {e: program for program in PROGRAMS for e in program.name_expressions}


def _launch_blocks(expression, rows, t, args):
    launch_blocks(PROGRAM_OF[expression], expression, rows, t, args)


def _computation_dtype(dtype):
    """The kernels' accumulation dtype: float64, int64 for bool / integers, else float32."""
    if dtype.name in INT_TYPES:
        return D.int64
    return D.float64 if dtype is D.float64 else D.float32


def _split(shape, dims, keepdim):
    """(output shape, kept dims, reduced dims) of reducing a tensor of `shape` over `dims`
    (None: all; a 0-dim tensor's dim 0 is the whole tensor)."""
    ndim = len(shape)
    reduced = set(range(ndim)) if dims is None or ndim == 0 else set(dims)
    kept = [d for d in range(ndim) if d not in reduced]
    if keepdim:
        out_shape = tuple(1 if d in reduced else n for d, n in enumerate(shape))
    else:
        out_shape = tuple(shape[d] for d in kept)
    return out_shape, kept, sorted(reduced)


def _geometries(shape, strides, out_strides, kept, reduced, keepdim):
    """The kernel's `outer` (result, input over the kept dims) and `inner` (input over the
    reduced dims, in their logical order: a position in it is a flat index) geometries,
    coalesced; None when either has too many dims."""
    kept_out = [out_strides[d] for d in kept] if keepdim else list(out_strides)
    outer = coalesce([shape[d] for d in kept], [kept_out, [strides[d] for d in kept]])
    inner = coalesce([shape[d] for d in reduced], [[strides[d] for d in reduced]])
    if max(len(outer[0]), len(inner[0])) > max_dims():
        return None
    return geometry_struct(*outer), geometry_struct(*inner)


@functools.lru_cache(maxsize=4096)
def _plan(shape, strides, dims, keepdim):
    """(result shape, its contiguous strides, its numel, (outer, inner) geometries) of a
    reduction into a new contiguous result, or None. Cached by the input's shape and
    strides, the dims and keepdim: a training loop reduces the same few geometries again and
    again, and a launch copies the structs' bytes, so one object serves every launch."""
    out_shape, kept, reduced = _split(shape, dims, keepdim)
    out_strides = contiguous_strides(out_shape)
    geometries = _geometries(shape, strides, out_strides, kept, reduced, keepdim)
    if geometries is None:
        return None
    return out_shape, out_strides, math.prod(out_shape), geometries


def _one_input(out, inputs, dtypes):
    """The single cuda input of a reduction whose dtype is one of `dtypes`, or None."""
    if out is not None or len(inputs) != 1:
        return None
    t = inputs[0]
    if t._storage.dtype not in dtypes or not on_one_cuda_device((t,)):
        return None
    return t


def _prepare(t, dims, keepdim, result_dtype):
    """(result, (outer, inner) geometries), or None when the geometry does not fit."""
    plan = _plan(t._shape, t._strides, None if dims is None else tuple(dims), keepdim)
    if plan is None:
        return None
    shape, strides, numel, geometries = plan
    return new_result(t._storage, shape, strides, numel, result_dtype), geometries


def _chunking(n):
    return -(-n // CHUNK)


def _launch(kernels, t, result, geometries):
    """The reduction by `kernels` on the path _path chooses."""
    outer, inner = geometries
    path = _path(outer, inner)
    if path == "column" and kernels.column is not None:
        _launch_column(kernels.column, t, result, outer, inner)
    elif path == "rows" and kernels.rows is not None:
        _launch_rows(kernels.rows, t, result, outer, inner)
    else:
        _launch_block(kernels.block, t, result, outer, inner)


def _path(outer, inner):
    """The size rule: "column" when the outputs are at least COLUMN_MIN_OUTPUTS and the
    kept dims hold the input's densest dim (outer's last dim has a smaller input stride than
    every reduced dim), so neighbouring threads on neighbouring outputs read neighbouring
    addresses; else "rows" for reductions of 1 to ROW_MAX elements; else "block"."""
    n = inner.numel
    if n == 0:
        return "block"
    kept = abs(outer.strides[1][outer.ndim - 1])
    if outer.numel >= COLUMN_MIN_OUTPUTS and kept < min(
            abs(inner.strides[0][d]) for d in range(inner.ndim)):
        return "column"
    return "rows" if n <= ROW_MAX else "block"


def column_split(outputs, n):
    """(chunk, chunks) of a column reduction of `outputs` outputs of `n` elements: one chunk
    when the outputs alone reach COLUMN_THREADS tasks or n is short; else enough chunks for
    COLUMN_THREADS tasks, of at least COLUMN_MIN_CHUNK elements, at most COLUMN_MAX_CHUNKS."""
    chunks = min(-(-COLUMN_THREADS // outputs), n // COLUMN_MIN_CHUNK, COLUMN_MAX_CHUNKS)
    if chunks <= 1:
        return n, 1
    chunk = -(-n // chunks)
    return chunk, -(-n // chunk)


def row_lanes(n):
    """The row path's lanes per output: the power of two at or above n, at most WARP."""
    return min(WARP, 1 << max(0, n - 1).bit_length())


def _launch_column(kernels, t, result, outer, inner):
    single, chunked, combined = kernels
    n, outputs = inner.numel, result.numel()
    chunk, chunks = column_split(outputs, n)
    if chunks == 1:
        _launch_threads(single, outputs, t, (outer, inner, ctypes.c_int64(n)),
                        (address(result), address(t)))
        return
    partials = Tensor._empty((chunks * outputs,), _computation_dtype(t.dtype), t.device)
    _launch_threads(chunked, chunks * outputs, t,
                    (outer, inner, ctypes.c_int64(chunk), ctypes.c_int64(chunks)),
                    (address(partials), address(t)))
    # partials[c * outputs + o]: column o of a (chunks, outputs) matrix, walked as the input
    _launch_threads(combined, outputs, t,
                    (_partials_outer(outer), geometry_struct([chunks], [[outputs]]),
                     ctypes.c_int64(n)), (address(result), address(partials)))


def _partials_outer(outer):
    """`outer` with its input strides replaced by dense row-major ones: output o's chunk
    results start at partials[o]."""
    sizes = list(outer.sizes[:outer.ndim])
    return geometry_struct(sizes, [list(outer.strides[0][:outer.ndim]),
                                   contiguous_strides(tuple(sizes))])


def _launch_threads(expression, tasks, t, objects, addresses):
    """A grid-stride kernel of one thread per task (the column kernels)."""
    storage = t._storage
    storage._driver.launch_addresses(storage._index, PROGRAM_OF[expression], expression,
                                     elementwise_grid(tasks), (BLOCK, 1, 1), objects, addresses)


def _launch_rows(expression, t, result, outer, inner):
    lanes = row_lanes(inner.numel)
    launch_block_rows(PROGRAM_OF[expression], expression,
                      -(-result.numel() // (block_threads() // lanes)), t,
                      (outer, inner, ctypes.c_int32(lanes)), (address(result), address(t)))


def _launch_block(kernels, t, result, outer, inner):
    """One launch, or chunks then partials when an output reduces more than CHUNK elements."""
    single, chunked, combined = kernels
    n, outputs = inner.numel, result.numel()
    if n <= CHUNK:
        launch_block_rows(PROGRAM_OF[single], single, outputs, t, (outer, inner),
                          (address(result), address(t)))
        return
    chunks = _chunking(n)
    # the chunks' results, unrounded: in the computation type (float for the 16-bit types)
    partials = Tensor._empty((outputs * chunks,), _computation_dtype(t.dtype), t.device)
    launch_block_rows(PROGRAM_OF[chunked], chunked, outputs * chunks, t,
                      (outer, inner, ctypes.c_int64(CHUNK), ctypes.c_int64(chunks)),
                      (address(partials), address(t)))
    launch_block_rows(PROGRAM_OF[combined], combined, outputs, t,
                      (outer, ctypes.c_int64(chunks), ctypes.c_int64(n)),
                      (address(result), address(partials)))


def _reduce(t, dims, keepdim, kernels, result_dtype):
    prepared = _prepare(t, dims, keepdim, result_dtype)
    if prepared is None:
        return NotImplemented
    result, geometries = prepared
    if result.numel():
        _launch(kernels, t, result, geometries)
    return result


# --- sum, mean, amax, amin, norm ------------------------------------------------------------

def reduce_kernel(op_name):
    def kernel(out, inputs, dtypes, params):
        t = _one_input(out, inputs, FLOAT_DTYPES)
        if t is None:
            return NotImplemented
        dtype = t._storage.dtype
        if params.get("dtype", dtype) is not dtype:
            return NotImplemented
        return _reduce(t, params.get("dim"), bool(params.get("keepdim", False)),
                       float_kernels(REDUCE_OPS[op_name], dtype.name), dtype)
    kernel.__name__ = kernel.__qualname__ = f"cuda_{op_name}"
    return kernel


def int_sum_kernel(out, inputs, dtypes, params):
    """sum of a bool / integer tensor into int64 (the default dtype; others decline)."""
    t = _one_input(out, inputs, INT_DTYPES)
    if t is None or params.get("dtype") is not D.int64:
        return NotImplemented
    return _reduce(t, params.get("dim"), bool(params.get("keepdim", False)),
                   int_sum_kernels(t.dtype.name), D.int64)


def norm_kernel(out, inputs, dtypes, params):
    """The vector p-norm for p = 2, 1, inf, -inf, 0 and whole p from 3 to MAX_WHOLE_P over
    params['dim'] (None: every dim)."""
    t = _one_input(out, inputs, FLOAT_DTYPES)
    p = params.get("p", 2)
    if t is None or type(p) not in (int, float):
        return NotImplemented
    dims, keepdim = params.get("dim"), bool(params.get("keepdim", False))
    if float(p) in NORM_OPS:
        return _reduce(t, dims, keepdim, float_kernels(NORM_OPS[float(p)], t.dtype.name),
                       t.dtype)
    if not _whole_power(p):
        return NotImplemented
    prepared = _prepare(t, dims, keepdim, t.dtype)
    if prepared is None:
        return NotImplemented
    result, geometries = prepared
    if result.numel():
        _launch_norm_power(t, result, geometries, int(p))
    return result


def _whole_power(p):
    """p = 0 or a whole p from 3 to MAX_WHOLE_P (the p that norm_power_kernel takes)."""
    return math.isfinite(p) and p == int(p) and (p == 0 or 3 <= p <= MAX_WHOLE_P)


def _launch_norm_power(t, result, geometries, p):
    outer, inner = geometries
    n, outputs, name = inner.numel, result.numel(), t.dtype.name
    single, chunked, finish = norm_power_kernels(name, p)
    power = ctypes.c_int32(p)
    if n <= CHUNK:
        _launch_blocks(single, outputs, t, (outer, inner, power, pointer(result), pointer(t)))
        return
    chunks = _chunking(n)
    accumulator = D.float64 if norm_power_accumulator(name, p) == "double" else D.float32
    partials = Tensor._empty((outputs * chunks,), accumulator, t.device)
    _launch_blocks(chunked, outputs * chunks, t,
                   (outer, inner, ctypes.c_int64(CHUNK), ctypes.c_int64(chunks), power,
                    pointer(partials), pointer(t)))
    _launch_blocks(finish, outputs, t, (outer, ctypes.c_int64(chunks), power, pointer(result),
                                        pointer(partials)))


def sum_to_size_kernel(out, inputs, dtypes, params):
    """sum_to_size: `a` summed over its leading dims and the dims where `size` has 1, as a
    new tensor of shape `size` (a copy when nothing is summed, as the reference's)."""
    if out is not None or len(inputs) != 1:
        return NotImplemented
    a, size = inputs[0], tuple(params["size"])
    lead = a.ndim - len(size)
    dims = [*range(lead), *(lead + i for i, n in enumerate(size)
                            if n == 1 and a._shape[lead + i] != 1)]
    if not dims:
        with no_grad():   # a plain copy: the dispatcher records the op's own history
            return a.clone()
    summed = reduce_kernel("sum")(None, (a,), dtypes, {"dim": dims, "keepdim": True})
    if summed is NotImplemented:
        return NotImplemented
    return Tensor._make(summed._storage, summed._offset, size, contiguous_strides(size))


# --- var, std ---------------------------------------------------------------------------------

def variance_kernel(std):
    def kernel(out, inputs, dtypes, params):
        """var / std with params['correction'] (a number) over params['dim']."""
        t = _one_input(out, inputs, FLOAT_DTYPES)
        correction = params.get("correction", 1)
        if t is None or type(correction) not in (int, float, bool):
            return NotImplemented
        prepared = _prepare(t, params.get("dim"), bool(params.get("keepdim", False)), t.dtype)
        if prepared is None:
            return NotImplemented
        result, geometries = prepared
        if result.numel():
            _launch_variance(t, result, geometries, correction, std)
        return result
    kernel.__name__ = kernel.__qualname__ = "cuda_std" if std else "cuda_var"
    return kernel


def _launch_variance(t, result, geometries, correction, std):
    # the reference's max(count - correction, 0), converted to the computation type there
    dof = ctypes.c_double(float(max(geometries[1].numel - correction, 0)))
    _launch_two_passes(t, result, geometries, ("SumOp", "MeanOp"),
                       variance_kernels(t.dtype.name, std), lambda centres: (dof,))


def _launch_two_passes(t, result, geometries, first_ops, kernels, finish_args):
    """A two-pass reduction (var / std, logsumexp): `kernels` = (one-launch, chunks, partials)
    of the second pass; finish_args(stats): the arguments after the geometry (and the chunk
    count) that the one-launch and partials kernels take (stats None for the one-launch one).
    An output of more than CHUNK elements takes four launches: the first pass's statistic
    (first_ops: the op of its chunks and of its partials, e.g. SumOp then MeanOp for the mean),
    unrounded, into stats[o]; then each chunk's terms given it; then their combination."""
    outer, inner = geometries
    n, outputs, name = inner.numel, result.numel(), t.dtype.name
    single, terms, finish = kernels
    if n <= CHUNK:
        _launch_blocks(single, outputs, t, (outer, inner, *finish_args(None), pointer(result),
                                            pointer(t)))
        return
    chunks, computation = _chunking(n), _computation_dtype(t.dtype)
    partials = Tensor._empty((outputs * chunks,), computation, t.device)
    stats = Tensor._empty((outputs,), computation, t.device)
    chunk_args = (outer, inner, ctypes.c_int64(CHUNK), ctypes.c_int64(chunks))
    _launch_blocks(float_kernels(first_ops[0], name).block[1], outputs * chunks, t,
                   (*chunk_args, pointer(partials), pointer(t)))
    _launch_blocks(reduce_expression(first_ops[1], computation.name, "reduce_partials_kernel"),
                   outputs, t, (_dense_outer(outer), ctypes.c_int64(chunks), ctypes.c_int64(n),
                                pointer(stats), pointer(partials)))
    # the same partials buffer again: the stream runs the launches in order
    _launch_blocks(terms, outputs * chunks, t,
                   (*chunk_args, pointer(stats), pointer(partials), pointer(t)))
    _launch_blocks(finish, outputs, t, (outer, ctypes.c_int64(chunks), *finish_args(stats),
                                        pointer(result), pointer(partials)))


def _dense_outer(outer):
    """`outer` with its output strides replaced by dense row-major ones: output element o at
    offset o (the first-pass statistics of a chunked var / std or logsumexp, read back by
    output index)."""
    sizes = list(outer.sizes[:outer.ndim])
    return geometry_struct(sizes, [contiguous_strides(tuple(sizes)),
                                   list(outer.strides[1][:outer.ndim])])


# --- argmax, argmin, max.dim, min.dim ---------------------------------------------------------

def arg_kernel(largest, with_values):
    def kernel(out, inputs, dtypes, params):
        """argmax / argmin (params['dim']: (d,) or None, the flattened tensor) and max.dim /
        min.dim (params['dim']: an int; values and indices)."""
        t = _one_input(out, inputs, FLOAT_DTYPES)
        if t is None:
            return NotImplemented
        dim = params.get("dim")
        dims = None if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
        prepared = _prepare(t, dims, bool(params.get("keepdim", False)), D.int64)
        if prepared is None:
            return NotImplemented
        indices, (outer, inner) = prepared
        if inner.numel == 0 and indices.numel():
            return NotImplemented   # no identity: the reference raises its error
        values = Tensor._empty(indices._shape, t.dtype, t.device) if with_values else None
        if indices.numel():
            _launch_arg(t, indices, values, outer, inner, largest)
        return (values, indices) if with_values else indices
    kind = "max" if largest else "min"
    kernel.__name__ = kernel.__qualname__ = f"cuda_{kind}_dim" if with_values else \
        f"cuda_arg{kind}"
    return kernel


def _launch_arg(t, indices, values, outer, inner, largest):
    single, chunked, combined = arg_kernels(t.dtype.name, largest)
    n, outputs = inner.numel, indices.numel()
    values_pointer = ctypes.c_uint64(0) if values is None else pointer(values)
    if n <= CHUNK:
        _launch_blocks(single, outputs, t, (outer, inner, pointer(indices),
                                                   values_pointer, pointer(t)))
        return
    chunks = _chunking(n)
    partial_values = Tensor._empty((outputs * chunks,), _computation_dtype(t.dtype), t.device)
    partial_indices = Tensor._empty((outputs * chunks,), D.int64, t.device)
    _launch_blocks(chunked, outputs * chunks, t,
                  (outer, inner, ctypes.c_int64(CHUNK), ctypes.c_int64(chunks),
                   pointer(partial_values), pointer(partial_indices), pointer(t)))
    _launch_blocks(combined, outputs, t,
                  (outer, inner, ctypes.c_int64(chunks), pointer(indices), values_pointer,
                   pointer(partial_values), pointer(partial_indices), pointer(t)))


# --- cumsum -----------------------------------------------------------------------------------

def cumsum_kernel(out, inputs, dtypes, params):
    """cumsum along params['dim']: float tensors into their own dtype, bool / integer tensors
    into int64 (other `dtype=` decline)."""
    t = _one_input(out, inputs, (*FLOAT_DTYPES, *INT_DTYPES))
    if t is None:
        return NotImplemented
    result_dtype = t.dtype if t.dtype.name in FLOAT_TYPES else D.int64
    if params.get("dtype", result_dtype) is not result_dtype:
        return NotImplemented
    result = Tensor._empty(t._shape, result_dtype, t.device)
    if t.ndim == 0:   # the reference scans it as a one-element row
        rows, n, steps = ([1], [[0], [0]]), 1, (0, 0)
    else:
        d = params.get("dim", 0)
        kept = [k for k in range(t.ndim) if k != d]
        rows = coalesce([t._shape[k] for k in kept], [[result._strides[k] for k in kept],
                                                      [t._strides[k] for k in kept]])
        n, steps = t._shape[d], (result._strides[d], t._strides[d])
    if len(rows[0]) > max_dims():
        return NotImplemented
    if result.numel():
        _launch_cumsum(t, result, geometry_struct(*rows), n, steps)
    return result


# cumsum's rule (see scan_split): few long rows are cut into chunks scanned in parallel.
SCAN_ROWS = 4096           # at least this many rows: one thread per row (the reference's bits)
SCAN_LONG = 2048           # fewer rows longer than this: chunked
SCAN_THREADS = 1 << 16     # (row, chunk) tasks that fill a GPU
SCAN_MIN_CHUNK = 64        # the fewest elements of a chunk


def scan_split(rows, n):
    """(chunk, chunks) of a cumsum of `rows` rows of `n`: the whole row when the rows are
    many or short, else enough chunks for SCAN_THREADS tasks of at least SCAN_MIN_CHUNK
    elements."""
    if rows >= SCAN_ROWS or n <= SCAN_LONG:
        return n, 1
    chunks = min(-(-SCAN_THREADS // rows), n // SCAN_MIN_CHUNK)
    chunk = -(-n // chunks)
    return chunk, -(-n // chunk)


def _launch_cumsum(t, result, rows, n, steps):
    scan, sums, carries = cumsum_kernels(t.dtype.name)
    chunk, chunks = scan_split(rows.numel, n)
    split = (ctypes.c_int64(chunk), ctypes.c_int64(chunks))
    carry_address = 0
    if chunks > 1:
        accumulator = Tensor._empty((rows.numel * chunks,), _computation_dtype(t.dtype),
                                    t.device)
        _launch_threads(sums, rows.numel * chunks, t,
                        (rows, ctypes.c_int64(n), ctypes.c_int64(steps[1]), *split),
                        (address(accumulator), address(t)))
        launch_block_rows(REDUCE_SCAN, carries, rows.numel, t,
                          (ctypes.c_int64(rows.numel), ctypes.c_int64(chunks)),
                          (address(accumulator),))
        carry_address = address(accumulator)
    _launch_threads(scan, rows.numel * chunks, t,
                    (rows, ctypes.c_int64(n), *map(ctypes.c_int64, steps), *split),
                    (carry_address, address(result), address(t)))


# --- logsumexp --------------------------------------------------------------------------------

def logsumexp_kernel(out, inputs, dtypes, params):
    """logsumexp over params['dim'] (None: every dim) of a float tensor, into its dtype."""
    t = _one_input(out, inputs, FLOAT_DTYPES)
    if t is None or params.get("dtype", t.dtype) is not t.dtype:
        return NotImplemented
    prepared = _prepare(t, params.get("dim"), bool(params.get("keepdim", False)), t.dtype)
    if prepared is None:
        return NotImplemented
    result, geometries = prepared
    if result.numel():
        _launch_logsumexp(t, result, geometries)
    return result


def _launch_logsumexp(t, result, geometries):
    # the shifts are the first pass's largest elements (the chunked amax)
    _launch_two_passes(t, result, geometries, ("AmaxOp", "AmaxOp"),
                       logsumexp_kernels(t.dtype.name), _shifts_argument)


def _shifts_argument(shifts):
    """logsumexp's one-launch kernel takes no shifts; its partials kernel takes them."""
    return () if shifts is None else (pointer(shifts),)


# --- prod -------------------------------------------------------------------------------------

def prod_kernel(out, inputs, dtypes, params):
    """prod over params['dim'] ((d,) or None: every dim): float tensors into their dtype,
    bool / integer tensors into int64 (other `dtype=` decline)."""
    t = _one_input(out, inputs, (*FLOAT_DTYPES, *INT_DTYPES))
    if t is None:
        return NotImplemented
    integral = t.dtype.name in INT_TYPES
    result_dtype = D.int64 if integral else t.dtype
    if params.get("dtype", result_dtype) is not result_dtype:
        return NotImplemented
    dims, keepdim = params.get("dim"), bool(params.get("keepdim", False))
    if integral:   # exact in any order: the block kernels
        return _reduce(t, dims, keepdim, int_prod_kernels(t.dtype.name), D.int64)
    shape, kept, reduced = _split(t._shape, dims, keepdim)
    result = Tensor._empty(shape, t.dtype, t.device)
    geometries = _geometries(t._shape, t._strides, result._strides, kept, reduced, keepdim)
    if geometries is None and dims is None:
        # every dim of a layout they do not merge in, in their logical order: a dense copy's
        t = t.contiguous()
        geometries = _geometries(t._shape, t._strides, result._strides, kept, reduced, keepdim)
    if geometries is None:
        return NotImplemented
    if result.numel():
        _launch_prod(t, result, *geometries)
    return result


# Float prod's rule: fewer than PROD_FEW_OUTPUTS products of more than PROD_LONG elements each
# take the block tree (within rounding); the rest one thread each (the reference's bits).
PROD_FEW_OUTPUTS = 1024
PROD_LONG = 2048


def _launch_prod(t, result, outer, inner):
    kernels = prod_kernels(t.dtype.name)
    n, outputs = inner.numel, result.numel()
    if outputs < PROD_FEW_OUTPUTS and n > PROD_LONG:
        _launch_block(kernels.block, t, result, outer, inner)
    else:
        _launch_threads(kernels.column[0], outputs, t, (outer, inner),
                        (address(result), address(t)))


def register_kernels(registrar):
    for op_name in REDUCE_OPS:
        registrar.kernel(op_name, "cuda", FLOAT_DTYPES, reduce_kernel(op_name))
    registrar.kernel("sum", "cuda", INT_DTYPES, int_sum_kernel)
    registrar.kernel("sum_to_size", "cuda", FLOAT_DTYPES, sum_to_size_kernel)
    registrar.kernel("norm", "cuda", FLOAT_DTYPES, norm_kernel)
    registrar.kernel("var", "cuda", FLOAT_DTYPES, variance_kernel(std=False))
    registrar.kernel("std", "cuda", FLOAT_DTYPES, variance_kernel(std=True))
    for largest, kind in ((True, "max"), (False, "min")):
        registrar.kernel(f"arg{kind}", "cuda", FLOAT_DTYPES, arg_kernel(largest, False))
        registrar.kernel(f"{kind}.dim", "cuda", FLOAT_DTYPES, arg_kernel(largest, True))
    registrar.kernel("cumsum", "cuda", (*FLOAT_DTYPES, *INT_DTYPES), cumsum_kernel)
    registrar.kernel("logsumexp", "cuda", FLOAT_DTYPES, logsumexp_kernel)
    registrar.kernel("prod", "cuda", (*FLOAT_DTYPES, *INT_DTYPES), prod_kernel)
