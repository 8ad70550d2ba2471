"""NumPy emulations of reftorch-cuda's kernels, for the emulated driver (`cuda_emulator`).

Each emulation is registered under a regular expression over the kernel's name expression
and receives the driver (for `view` of device memory), the match, the launch configuration and
the address of the kernel's parameter array (one pointer per parameter, as cuLaunchKernel
takes them). Parameter layouts are decoded here from raw bytes with the kernel's C layout,
written out independently of the plugin's ctypes structs, so a packing mistake on the host
side shows up as a wrong result.
"""
from __future__ import annotations

import ctypes
import math
import re
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNELS_DIR = ROOT / "plugin_cuda/reftorch_cuda/kernels"
STORAGE = {"float": np.float32, "double": np.float64, "rt_float16": np.float16,
           "rt_bfloat16": ml_dtypes.bfloat16}
INTS = {"bool": np.bool_, "unsigned char": np.uint8, "signed char": np.int8, "short": np.int16,
        "int": np.int32, "long long": np.int64}
WORDS = {"unsigned char": 1, "unsigned short": 2, "unsigned int": 4,
         "unsigned long long": 8, "rt_bytes16": 16}

_EMULATIONS = []   # (compiled pattern, function)


def emulates(pattern):
    def register(fn):
        _EMULATIONS.append((re.compile(pattern), fn))
        return fn
    return register


def run(driver, expression, grid, block, shared, params):
    for pattern, fn in _EMULATIONS:
        match = pattern.fullmatch(expression)
        if match:
            return fn(driver, match, grid, block, shared, params)
    raise AssertionError(f"no emulation for kernel {expression}")


# --- parameter decoding -----------------------------------------------------------------------

def max_dims():
    source = (KERNELS_DIR / "common.cuh").read_text()
    return int(re.search(r"#define RT_MAX_DIMS (\d+)", source).group(1))


def slots(params, count):
    """The kernel's parameter addresses."""
    return (ctypes.c_void_p * count).from_address(params)


def int64(address):
    """A long long parameter (a slot's address)."""
    return ctypes.c_int64.from_address(address).value


def int32(address):
    """An int parameter."""
    return ctypes.c_int32.from_address(address).value


def double(address):
    """A double parameter."""
    return ctypes.c_double.from_address(address).value


def geometry(address, operands):
    """Decode `Geometry<operands>`: (int64 numel, int32 ndim, int32 pad, int64 sizes[D],
    int64 strides[operands][D])."""
    dims = max_dims()
    raw = ctypes.string_at(address, 16 + 8 * dims * (operands + 1))
    numel, ndim = struct.unpack_from("<qi", raw)
    sizes = np.frombuffer(raw, "<i8", dims, 16)
    strides = np.frombuffer(raw, "<i8", operands * dims, 16 + 8 * dims).reshape(operands, -1)
    assert 1 <= ndim <= dims and numel == int(np.prod(sizes[:ndim])) > 0
    return tuple(sizes[:ndim]), [tuple(s[:ndim]) for s in strides]


def pointer(address):
    return ctypes.c_uint64.from_address(address).value


def compute_type(storage):
    """The kernels' computation type: double for double, float for the rest."""
    return np.float64 if storage is np.float64 else np.float32


def grid_stride(grid, block):
    """The elementwise kernels' launch shape: a 1-D grid of 256-thread blocks."""
    assert grid[1:] == (1, 1) and block == (256, 1, 1) and grid[0] <= 65535


# --- elementwise.cu ---------------------------------------------------------------------------

def operand_storages(match, first, count):
    """Storage types of `count` operands: regex groups first.. when the name expression lists
    them (a float scalar of a 16-bit op), else all the output's type (group 1)."""
    named = [match.group(k) for k in range(first, first + count)]
    return [STORAGE[n if n is not None else match.group(1)] for n in named]


@emulates(r"binary_kernel<(\w+), (\w+)Op(?:, (\w+), (\w+))?>")
def binary(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    p = slots(params, 5)      # (geometry, out, a, b, alpha)
    shape, strides = geometry(p[0], 3)
    storage = STORAGE[match.group(1)]
    compute = compute_type(storage)
    alpha = compute(double(p[4]))
    types = [storage] + operand_storages(match, 3, 2)
    out, a, b = (driver.view(pointer(p[k + 1]), types[k], shape, s)
                 for k, s in enumerate(strides))
    x, y = a.astype(compute), b.astype(compute)
    with np.errstate(all="ignore"):
        value = {"Add": lambda: x + alpha * y, "Sub": lambda: x - alpha * y,
                 "Mul": lambda: x * y, "Div": lambda: x / y}[match.group(2)]()
        out[...] = value.astype(storage)


@emulates(r"copy_kernel<(.+)>")
def copy(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    p = slots(params, 3)      # (geometry, dst, src)
    shape, strides = geometry(p[0], 2)
    void = np.dtype((np.void, WORDS[match.group(1)]))
    dst, src = (driver.view(pointer(p[k + 1]), void, shape, s) for k, s in enumerate(strides))
    dst[...] = src


# --- unary.cu ---------------------------------------------------------------------------------
# The formulas of unary.cu's Op structs, operation for operation, in the computation type c
# (NumPy keeps Python-float constants in the array's type, as the kernels cast them).

SQRT2, SQRT_2_OVER_PI, SQRT_2PI, CUBIC = 1.4142135623730951, 0.7978845608028654, \
    2.5066282746310002, 0.044715


def _erf(x):
    from reftorch._ops.special_pointwise import _erf as erf64
    return erf64(x.astype(np.float64))


def _gelu_erf(x):
    return ((0.5 * x).astype(np.float64) * (1.0 + _erf(x.astype(np.float64) / SQRT2))
            ).astype(x.dtype)


def _tanh_rounded(x):
    """unary.cu's tanh_rounded: tanh in double, rounded to x's type."""
    return np.tanh(x.astype(np.float64)).astype(x.dtype)


def _gelu_tanh(x):
    return 0.5 * x * (1 + _tanh_rounded(SQRT_2_OVER_PI * (x + CUBIC * x * x * x)))


UNARY = {
    "Neg": np.negative, "Abs": np.abs,
    "Sign": lambda x: np.where(x > 0, 1, np.where(x < 0, -1, 0)).astype(x.dtype), "Exp": np.exp, "Expm1": np.expm1, "Log": np.log,
    "Log1p": np.log1p, "Sqrt": np.sqrt, "Sin": np.sin, "Cos": np.cos, "Tanh": np.tanh,
    "Rsqrt": lambda x: 1 / np.sqrt(x),
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "Relu": lambda x: np.where(np.isnan(x), x, np.where(x > 0, x, 0)).astype(x.dtype),
    "Silu": lambda x: x / (1 + np.exp(-x)),
    "GeluErf": _gelu_erf, "GeluTanh": _gelu_tanh,
    "Erf": lambda x: _libm_erf(x).astype(x.dtype),   # CUDA's double erf, rounded to x's type
}


def _libm_erf(x):
    """erf in float64 by Python's math.erf (within 1 ulp; an implementation independent of the
    reference's, standing in for CUDA's)."""
    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(np.float64)


def _gelu_erf_backward(g, x, p):
    cdf = 0.5 * (1 + _erf(x * (1 / SQRT2)).astype(x.dtype))
    pdf = np.exp(-0.5 * x * x) * (1 / SQRT_2PI)
    return g * (cdf + x * pdf)


def _gelu_tanh_backward(g, x, p):
    t = _tanh_rounded(SQRT_2_OVER_PI * (x + CUBIC * x * x * x))
    d_inner = SQRT_2_OVER_PI * (1 + (3 * CUBIC) * x * x)
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner)


def _silu_backward(g, x, p):
    s = 1 / (1 + np.exp(-x))
    return g * (s * (1 + x * (1 - s)))


GRAD = {
    "TanhBackward": lambda g, y, p: g * (1 - y * y),
    "SigmoidBackward": lambda g, y, p: g * (y * (1 - y)),
    "ThresholdBackward": lambda g, x, p: np.where(x <= p, 0, g).astype(g.dtype),
    "SiluBackward": _silu_backward,
    "GeluErfBackward": _gelu_erf_backward, "GeluTanhBackward": _gelu_tanh_backward,
}


@emulates(r"unary_kernel<(.+), (\w+)Op>")
def unary(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    p = slots(params, 3)      # (geometry, out, x)
    shape, strides = geometry(p[0], 2)
    storage = STORAGE[match.group(1)]
    out, x = (driver.view(pointer(p[k + 1]), storage, shape, s) for k, s in enumerate(strides))
    with np.errstate(all="ignore"):
        value = UNARY[match.group(2)](x.astype(compute_type(storage)))
        out[...] = value.astype(storage)


# unary_scalar_kernel's ops: f(x, p) with p the double parameter converted to x's type
UNARY_SCALAR = {"LeakyRelu": lambda x, p: np.where(x > 0, x, x * p).astype(x.dtype)}


@emulates(r"unary_scalar_kernel<(.+), (\w+)Op>")
def unary_scalar(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    p = slots(params, 4)      # (geometry, out, x, double parameter)
    shape, strides = geometry(p[0], 2)
    storage = STORAGE[match.group(1)]
    compute = compute_type(storage)
    parameter = compute(double(p[3]))
    out, x = (driver.view(pointer(p[k + 1]), storage, shape, s) for k, s in enumerate(strides))
    with np.errstate(all="ignore"):
        out[...] = UNARY_SCALAR[match.group(2)](x.astype(compute), parameter).astype(storage)


@emulates(r"grad_kernel<(.+), (\w+)Op>")
def grad(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    p = slots(params, 5)      # (geometry, out, grad, v, double parameter)
    shape, strides = geometry(p[0], 3)
    storage = STORAGE[match.group(1)]
    compute = compute_type(storage)
    parameter = compute(double(p[4]))
    out, g, v = (driver.view(pointer(p[k + 1]), storage, shape, s)
                 for k, s in enumerate(strides))
    with np.errstate(all="ignore"):
        value = GRAD[match.group(2)](g.astype(compute), v.astype(compute), parameter)
        out[...] = value.astype(storage)


# --- select.cu --------------------------------------------------------------------------------

COMPARE = {"Eq": np.equal, "Ne": np.not_equal, "Lt": np.less, "Le": np.less_equal,
           "Gt": np.greater, "Ge": np.greater_equal}


def _elementwise_views(driver, params, operand_types):
    """Views of (out, inputs...) for a kernel(Geometry<N>, pointers...) launch."""
    p = slots(params, len(operand_types) + 1)
    shape, strides = geometry(p[0], len(operand_types))
    return [driver.view(pointer(p[k + 1]), t, shape, s)
            for k, (t, s) in enumerate(zip(operand_types, strides))]


@emulates(r"compare_kernel<([\w ]+), (\w+)Op(?:, (float))?>")
def compare(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    storage = {**STORAGE, **INTS}[match.group(1)]
    second = np.float32 if match.group(3) else storage
    out, a, b = _elementwise_views(driver, params, (np.bool_, storage, second))
    if match.group(3):  # a 16-bit value against a float scalar: both as float
        a = a.astype(np.float32)
    out[...] = COMPARE[match.group(2)](a, b)


@emulates(r"where_kernel<(.+)>")
def where(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    void = np.dtype((np.void, WORDS[match.group(1)]))
    out, condition, a, b = _elementwise_views(driver, params, (void, np.bool_, void, void))
    out[...] = np.where(condition, a, b)


@emulates(r"where_scalar_kernel<(\w+), (\w+), (\w+)>")
def where_scalar(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    storage = STORAGE[match.group(1)]
    a_type, b_type = operand_storages(match, 2, 2)
    out, condition, a, b = _elementwise_views(driver, params,
                                              (storage, np.bool_, a_type, b_type))
    c = compute_type(storage)
    out[...] = np.where(condition, a.astype(c), b.astype(c)).astype(storage)


def _maximum(a, b):
    """np.maximum as select.cu's rt_maximum: NaN from either side, b on ties."""
    return np.where(np.isnan(a), a, np.where(np.isnan(b) | ~(a > b), b, a))


def _minimum(a, b):
    return np.where(np.isnan(a), a, np.where(np.isnan(b) | ~(a < b), b, a))


@emulates(r"clamp_kernel<(\w+)(?:, (float))?>")
def clamp(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    storage = STORAGE[match.group(1)]
    bounds = np.float32 if match.group(2) else storage
    out, x, low, high = _elementwise_views(driver, params, (storage, storage, bounds, bounds))
    c = compute_type(storage)
    out[...] = _minimum(_maximum(x.astype(c), low.astype(c)), high.astype(c)).astype(storage)


@emulates(r"bound_kernel<(\w+), (Maximum|Minimum)Op(?:, (float))?>")
def bound(driver, match, grid, block, shared, params):
    grid_stride(grid, block)
    assert shared == 0
    storage = STORAGE[match.group(1)]
    bound_type = np.float32 if match.group(3) else storage
    out, x, b = _elementwise_views(driver, params, (storage, storage, bound_type))
    c = compute_type(storage)
    fn = _maximum if match.group(2) == "Maximum" else _minimum
    out[...] = fn(x.astype(c), b.astype(c)).astype(storage)


# --- cast.cu ----------------------------------------------------------------------------------

INT_RANGES = {np.uint8: (0, 255), np.int8: (-128, 127), np.int16: (-32768, 32767),
              np.int32: (-2**31, 2**31 - 1), np.int64: (-2**63, 2**63 - 1)}


@emulates(r"cast_kernel<(.+), (.+)>")
def cast(driver, match, grid, block, shared, params):
    """NumPy's conversion where it is defined; a float-to-integer element whose truncation
    does not fit (or NaN) sets the flag (its output element is then unspecified: 0 here)."""
    grid_stride(grid, block)
    assert shared == 0
    types = {**STORAGE, **INTS}
    dst_type, src_type = types[match.group(1)], types[match.group(2)]
    out, src = _elementwise_views(driver, params, (dst_type, src_type))
    flag_address = pointer(slots(params, 4)[3])  # (geometry, out, src, flag)
    value = src
    if dst_type in INT_RANGES and src_type in STORAGE.values():
        wide = src.astype(np.float64)
        lowest, highest = INT_RANGES[dst_type]
        defined = (wide > float(lowest) - 1) & (wide < float(highest) + 1)
        if not defined.all():
            driver.view(flag_address, np.uint32, (1,), (1,))[0] = 1
        value = np.where(defined, wide, 0)
    with np.errstate(all="ignore"):
        out[...] = value.astype(dst_type)


# --- reduce.cu --------------------------------------------------------------------------------

def geometry_allowing_empty(address, operands):
    """Decode `Geometry<operands>` as `geometry` does, allowing numel 0 (an empty reduction)."""
    dims = max_dims()
    raw = ctypes.string_at(address, 16 + 8 * dims * (operands + 1))
    numel, ndim = struct.unpack_from("<qi", raw)
    sizes = np.frombuffer(raw, "<i8", dims, 16)
    strides = np.frombuffer(raw, "<i8", operands * dims, 16 + 8 * dims).reshape(operands, -1)
    assert 1 <= ndim <= dims and numel == int(np.prod(sizes[:ndim])) >= 0
    return tuple(sizes[:ndim]), [tuple(s[:ndim]) for s in strides]


# The block size the block-reduction kernels are written for (RT_BLOCK_THREADS): their order
# of additions depends on it, so launches must use exactly this many threads.
REDUCE_THREADS = int(re.search(r"#define RT_BLOCK_THREADS (\d+)",
                               (KERNELS_DIR / "common.cuh").read_text()).group(1))
REDUCERS = {  # (identity, combine)
    "Sum": (0.0, np.add), "Mean": (0.0, np.add),
    "Amax": (-np.inf, lambda a, b: _maximum(a, b)), "Amin": (np.inf, lambda a, b: _minimum(a, b)),
    "WrappingSum": (0, np.add),   # int64: NumPy's integer adds wrap
    "WrappingProd": (1, np.multiply),   # int64 products wrap too
    "NormOne": (0.0, np.add), "NormTwo": (0.0, np.add),
    "NormInf": (-np.inf, lambda a, b: _maximum(a, b)),
    "NormNegInf": (np.inf, lambda a, b: _minimum(a, b)),
    "Prod": (1.0, np.multiply),   # float products (reduce_more.cu's ProdOp)
    "SumRoot": (0.0, np.add),     # a chunked column 2-norm's second pass: sqrt of the sum
}
# What the norms combine of each element (the others: the element itself).
TERMS = {"NormOne": np.abs, "NormTwo": lambda x: x * x, "NormInf": np.abs, "NormNegInf": np.abs}
TYPES = {**STORAGE, **INTS}


def reduce_types(match, first):
    """(storage, accumulation, output) types of a reduce kernel whose name expression has the
    input type at group `first` and the op at `first + 1`, then optionally the accumulation and output types (bool and
    integer sums: long long); defaults: compute_type and the input type."""
    storage = TYPES[match.group(first)]
    named = [match.group(first + k) for k in (2, 3)]   # after the op's group
    default = np.int64 if np.dtype(storage).kind in "biu" else compute_type(storage)
    return (storage, TYPES[named[0]] if named[0] else default,
            TYPES[named[1]] if named[1] else storage)


def _block_reduce(values, identity, combine, threads=REDUCE_THREADS):
    """reduce.cu's order over the last axis: thread t combines elements t, t + 256, ... in
    turn, then the tree partial[t] = combine(partial[t], partial[t + s]), s = 128, ..., 1
    (`threads`: another power of two, the row path's lanes, in the same shape)."""
    n = values.shape[-1]
    padded = -(-n // threads) * threads
    pad = np.full(values.shape[:-1] + (padded - n,), identity, values.dtype)
    chunks = np.concatenate([values, pad], axis=-1).reshape(
        values.shape[:-1] + (-1, threads))
    partial = np.full(values.shape[:-1] + (threads,), identity, values.dtype)
    for k in range(chunks.shape[-2]):  # one step per `threads` elements: the threads' loops
        partial = combine(partial, chunks[..., k, :])
    s = threads // 2
    while s:
        partial = np.concatenate([combine(partial[..., :s], partial[..., s:2 * s]),
                                  partial[..., s:]], axis=-1)
        s //= 2
    return partial[..., 0]


def block_order_reduce(values, identity, combine, chunk):
    """reduce.cu's result over the last axis, unrounded: one block's order when the axis has at
    most `chunk` elements, else each chunk in the block order and then the chunks' results."""
    n = values.shape[-1]
    if n <= chunk:
        return _block_reduce(values, identity, combine)
    pieces = chunked(values, chunk, -(-n // chunk), identity)
    return _block_reduce(_block_reduce(pieces, identity, combine), identity, combine)


# --- the two-launch reductions (reduce.cu's for_each_chunk and combine_partials) ---------------
# A long reduction's first launch writes each (output, chunk) block's result to
# partials[o * chunks + c]; the second combines each output's chunk results in the block order.

def dense_strides(shape, last=1):
    """Row-major strides of `shape` (in elements), times `last` (a trailing dim's size)."""
    return tuple(int(np.prod(shape[d + 1:])) * last for d in range(len(shape)))


def partials_view(driver, address, dtype, shape, chunks):
    """The (output, chunk) buffer of a chunked launch: partials[o * chunks + c]."""
    return driver.view(address, dtype, shape + (chunks,), dense_strides(shape, chunks) + (1,))


def chunked(values, chunk, chunks, fill):
    """(outer..., n) values cut into (outer..., chunks, chunk), the last chunk padded with
    `fill` (a value that changes no chunk's result: the identity, as the kernel's threads past
    the chunk's end take nothing)."""
    n = values.shape[-1]
    assert chunks == -(-n // chunk) and chunks > 1
    pad = np.full(values.shape[:-1] + (chunks * chunk - n,), fill, values.dtype)
    return np.concatenate([values, pad], -1).reshape(values.shape[:-1] + (chunks, chunk))


def store_chunk_results(driver, address, terms, chunk, chunks, identity, combine):
    """A first launch: each chunk of the (outer..., n) `terms` combined in the block order,
    into the partials buffer at `address`."""
    view = partials_view(driver, address, terms.dtype, terms.shape[:-1], chunks)
    view[...] = _block_reduce(chunked(terms, chunk, chunks, identity), identity, combine)


def combined_chunk_results(driver, address, dtype, shape, chunks, identity, combine):
    """A second launch's combination (unfinished) of each output's chunk results."""
    partials = np.array(partials_view(driver, address, dtype, shape, chunks))
    return _block_reduce(partials, dtype(identity), combine)


def _reduced_values(driver, outer_address, inner_address, in_address, storage, compute=None):
    """(outer shape, output strides, input values as (outer..., n) in the computation type)."""
    outer_shape, (out_strides, in_strides) = geometry(outer_address, 2)
    inner_shape, (inner_strides,) = geometry_allowing_empty(inner_address, 1)
    n = int(np.prod(inner_shape))
    source = driver.view(in_address, storage, outer_shape + inner_shape,
                         in_strides + inner_strides) if n else \
        np.zeros(outer_shape + (0,), storage)
    compute = compute_type(storage) if compute is None else compute
    return outer_shape, out_strides, source.astype(compute).reshape(outer_shape + (n,))


def _finish(op, total, n):
    if op == "Mean":
        return total / total.dtype.type(n)
    return np.sqrt(total) if op in ("NormTwo", "SumRoot") else total


def _terms(op, values):
    return TERMS[op](values) if op in TERMS else values


# name expressions: <T, Op> or <T, Op, A, Out> (reduce_chunks_kernel: <T, Op, A>)
TYPED_OP = r"([\w ]+), (\w+)Op(?:, ([\w ]+))?(?:, ([\w ]+))?"


@emulates(rf"reduce_kernel<{TYPED_OP}>")
def reduce(driver, match, grid, block, shared, params):
    assert grid[1:] == (1, 1) and block == (REDUCE_THREADS, 1, 1) and shared == 0
    p = slots(params, 4)      # (outer geometry, inner geometry, out, in)
    storage, compute, out_type = reduce_types(match, 1)
    op = match.group(2)
    shape, out_strides, values = _reduced_values(driver, p[0], p[1], pointer(p[3]), storage,
                                                 compute)
    out = driver.view(pointer(p[2]), out_type, shape, out_strides)
    identity, combine = REDUCERS[op]
    with np.errstate(all="ignore"):
        total = _block_reduce(_terms(op, values), values.dtype.type(identity), combine)
        out[...] = _finish(op, total, values.shape[-1]).astype(out_type)


@emulates(rf"reduce_chunks_kernel<{TYPED_OP}>")
def reduce_chunks(driver, match, grid, block, shared, params):
    """Each chunk of `chunk` elements (the last one shorter) combined in the block order."""
    assert grid[1:] == (1, 1) and block == (REDUCE_THREADS, 1, 1) and shared == 0
    assert match.group(4) is None
    p = slots(params, 6)      # (outer, inner, int64 chunk, int64 chunks, partials, in)
    storage, compute, _ = reduce_types(match, 1)
    op = match.group(2)
    _, _, values = _reduced_values(driver, p[0], p[1], pointer(p[5]), storage, compute)
    identity, combine = REDUCERS[op]
    with np.errstate(all="ignore"):
        store_chunk_results(driver, pointer(p[4]), _terms(op, values), int64(p[2]), int64(p[3]),
                            values.dtype.type(identity), combine)


@emulates(rf"reduce_partials_kernel<{TYPED_OP}>")
def reduce_partials(driver, match, grid, block, shared, params):
    """The chunks' results (terms already: no TERMS here) combined, then finished."""
    assert grid[1:] == (1, 1) and block == (REDUCE_THREADS, 1, 1) and shared == 0
    p = slots(params, 5)      # (outer, int64 chunks, int64 n, out, partials)
    _, c, out_type = reduce_types(match, 1)
    op = match.group(2)
    shape, (out_strides, _) = geometry(p[0], 2)
    out = driver.view(pointer(p[3]), out_type, shape, out_strides)
    identity, combine = REDUCERS[op]
    with np.errstate(all="ignore"):
        total = combined_chunk_results(driver, pointer(p[4]), c, shape, int64(p[1]), identity,
                                       combine)
        out[...] = _finish(op, total, int64(p[2])).astype(out_type)


# --- softmax.cu -------------------------------------------------------------------------------

def _row_views(driver, params, storage, operands):
    """(n, views of shape rows + (n,)) for softmax.cu's (Geometry<k> rows, int64 n,
    int64 step[k], pointer[k]) parameters."""
    p = slots(params, 2 + 2 * operands)
    shape, strides = geometry(p[0], operands)
    n = int64(p[1])
    steps = [int64(p[2 + k]) for k in range(operands)]
    assert n >= 1
    return n, [driver.view(pointer(p[2 + operands + k]), storage, shape + (n,),
                           strides[k] + (steps[k],)) for k in range(operands)]


@emulates(r"softmax_kernel<(.+), (true|false)>")
def softmax(driver, match, grid, block, shared, params):
    assert grid[1:] == (1, 1) and block == (REDUCE_THREADS, 1, 1)
    storage = STORAGE[match.group(1)]
    c = compute_type(storage)
    n, (out, x) = _row_views(driver, params, storage, 2)
    # A shared row of n computation-type values, or none: the kernel computes the same
    # values in the same order either way (it only keeps them between its passes).
    assert shared in (0, n * np.dtype(c).itemsize), (shared, n)
    wide = x.astype(c)
    with np.errstate(all="ignore"):
        m = _block_reduce(wide, c(-np.inf), REDUCERS["Amax"][1])[..., None]
        total = _block_reduce(np.exp(wide - m), c(0), np.add)[..., None]
        if match.group(2) == "true":
            value = (wide - m) - np.log(total)
        else:
            value = np.exp(wide - m) / total
        out[...] = value.astype(storage)


@emulates(r"softmax_backward_kernel<(.+), (true|false)>")
def softmax_backward(driver, match, grid, block, shared, params):
    assert grid[1:] == (1, 1) and block == (REDUCE_THREADS, 1, 1) and shared == 0
    storage = STORAGE[match.group(1)]
    c = compute_type(storage)
    n, (out, grad, y) = _row_views(driver, params, storage, 3)
    g, v = grad.astype(c), y.astype(c)
    log = match.group(2) == "true"
    with np.errstate(all="ignore"):
        total = _block_reduce(g if log else g * v, c(0), np.add)[..., None]
        out[...] = (g - np.exp(v) * total if log else v * (g - total)).astype(storage)


# --- norm.cu ----------------------------------------------------------------------------------

@emulates(r"layer_norm_kernel<(.+)>")
def layer_norm(driver, match, grid, block, shared, params):
    assert grid[1:] == (1, 1) and block == (REDUCE_THREADS, 1, 1) and shared == 0
    # (rows, n, out_step, x_step, weight_step, bias_step, eps, out, mean, rstd, x, weight, bias)
    p = slots(params, 13)
    shape, (out_strides, x_strides) = geometry(p[0], 2)
    n, out_step, x_step, w_step, b_step = (int64(p[k]) for k in range(1, 6))
    storage = STORAGE[match.group(1)]
    c = compute_type(storage)
    eps = c(double(p[6]))
    out = driver.view(pointer(p[7]), storage, shape + (n,), out_strides + (out_step,))
    mean_out, rstd_out = (driver.view(pointer(p[k]), storage, shape, dense_strides(shape))
                          for k in (8, 9))
    x = driver.view(pointer(p[10]), storage, shape + (n,), x_strides + (x_step,)).astype(c)
    with np.errstate(all="ignore"):
        mean = _block_reduce(x, c(0), np.add)[..., None] / c(n)
        centered = x - mean
        rstd = c(1) / np.sqrt(_block_reduce(centered * centered, c(0), np.add)[..., None] / c(n)
                              + eps)
        value = (x - mean) * rstd
        for k, step, combine in ((11, w_step, np.multiply), (12, b_step, np.add)):
            if pointer(p[k]):  # a null pointer: no weight / no bias
                parameter = driver.view(pointer(p[k]), storage, (n,), (step,))
                value = combine(value, parameter.astype(c))
        out[...] = value.astype(storage)
        mean_out[...] = mean[..., 0].astype(storage)
        rstd_out[...] = rstd[..., 0].astype(storage)


# --- the other kernel families (index, gemm, conv, loss, batchnorm, pointwise, masked, sort,
# pool, and reduce.cu's var/std, arg and cumsum kernels): in their own modules (registered by
# importing them) ------------------------------------------------------------------------
from spec_tests import (cuda_emulation_conv, cuda_emulation_gemm,  # noqa: E402
                        cuda_emulation_index, cuda_emulation_nn, cuda_emulation_pointwise,
                        cuda_emulation_pool, cuda_emulation_reduce, cuda_emulation_sort)
from spec_tests import cuda_emulation_masked, cuda_emulation_scatter  # noqa: E402
EMULATION_MODULES = (cuda_emulation_index, cuda_emulation_gemm, cuda_emulation_conv,
                     cuda_emulation_nn, cuda_emulation_pointwise, cuda_emulation_sort,
                     cuda_emulation_pool, cuda_emulation_reduce, cuda_emulation_masked,
                     cuda_emulation_scatter)
