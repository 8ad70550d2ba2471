"""The sampler kernels: `uniform_` (rand), `normal_` (randn), `random_` (randint),
`bernoulli_` with a number p, and `exponential_`, `cauchy_`, `geometric_`, `log_normal_`
(floating dtypes), and `_randperm_` (randperm's Fisher-Yates shuffle, int64), drawing
PyTorch's CPU stream in C (`_random`, src/random.c).

reftorch's samplers are ops of the dispatch registry (see reftorch/_ops/sampling.py): a kernel
gets the tensor to fill and params holding the `reftorch.Generator` and the sampler's
numbers. Here the checks and the declines happen; the C code draws from the generator's NumPy
MT19937 engine itself (through the engine's capsule, under the engine's lock), exactly the
words the reference would draw, so calls served here and by the reference continue one
stream, PyTorch's, and `get_rng_state()` afterwards is PyTorch's too.

Results against the reference (and PyTorch):
  uniform_, random_, bernoulli_,    bit for bit (the same integer and exactly rounded steps);
  _randperm_
  normal_ float32                   bit for bit (Cephes log/sincos with the same fused
                                    multiply-adds as PyTorch's AVX2 kernel and the reference);
  normal_ float64                   the C library's log/cos/sin, as PyTorch and the
                                    reference call them: bit for bit both.
  exponential_, cauchy_, geometric_, log_normal_, normal_ on fewer than 16 or non-contiguous
                                    elements (the one-at-a-time path): likewise the C
                                    library's log1p/tan/log/sin/cos/exp: bit for bit both.
What is declined (the reference runs): empty tensors (MIN_NUMEL); normal_ of
float16/bfloat16; a non-dense tensor (a strided view); uniform_ bounds whose dtype values are
not finite; anything not a dense cpu tensor of a supported dtype.

Speed: drawing runs mt19937 itself over NumPy's state in place ("direct" mode: the twist and
tempering, vectorized), after checking at import that this NumPy keeps the state in the
layout the C code assumes and that the words come out the same; otherwise it calls NumPy's
`next_uint32` for every word (`DIRECT` tells which).
"""
from __future__ import annotations

import math

import numpy as np

from reftorch import _dtype as D
from reftorch._storage import CPUStorage

from . import _random

# Calls on fewer elements than this go to the reference. There is no crossover to find: a
# plugin call costs a few us of Python (checks, the engine's capsule and lock) before C runs,
# while the reference makes several NumPy calls even for one element. Measured on a busy
# 2-core x86-64 (best of 300 runs, plugin vs reference, the whole in-place call): uniform_
# float32 at 1 element 17.8 vs 32.3 us, at 16: 12.7 vs 32.5, at 1,024: 13.2 vs 60.8;
# random_(0, 100) int64 at 1: 19.7 vs 29.4, at 64: 13.3 vs 18.4; bernoulli_(0.3) float32 at
# 1: 6.8 vs 15.1; normal_ float32 at 16: 13.4 vs 624. Only empty tensors are declined (they
# draw nothing, and the reference then keeps the generator's state "fresh").
MIN_NUMEL = 1

TYPES = {D.float32: _random.F32, D.float64: _random.F64, D.float16: _random.F16,
         D.bfloat16: _random.BF16, D.int64: _random.I64, D.int32: _random.I32,
         D.int16: _random.I16, D.int8: _random.I8, D.uint8: _random.U8, D.bool: _random.BOOL}
UNIFORM_DTYPES = (D.float32, D.float64, D.float16, D.bfloat16)
NORMAL_DTYPES = (D.float32, D.float64)
RANDOM_DTYPES = (D.int64, D.int32, D.int16, D.int8, D.uint8, D.bool, D.float32, D.float64)
BERNOULLI_DTYPES = RANDOM_DTYPES + (D.float16, D.bfloat16)


def register(registrar):
    """Register every kernel with reftorch (called by reftorch_cpu.register)."""
    registrar.kernel("uniform_", "cpu", UNIFORM_DTYPES, uniform_kernel)
    registrar.kernel("normal_", "cpu", NORMAL_DTYPES, normal_kernel)
    registrar.kernel("random_", "cpu", RANDOM_DTYPES, random_kernel)
    registrar.kernel("bernoulli_", "cpu", BERNOULLI_DTYPES, bernoulli_kernel)
    registrar.kernel("exponential_", "cpu", UNIFORM_DTYPES, exponential_kernel)
    registrar.kernel("cauchy_", "cpu", UNIFORM_DTYPES, cauchy_kernel)
    registrar.kernel("geometric_", "cpu", UNIFORM_DTYPES, geometric_kernel)
    registrar.kernel("log_normal_", "cpu", UNIFORM_DTYPES, log_normal_kernel)
    registrar.kernel("_randperm_", "cpu", (D.int64,), randperm_kernel)


# --- kernels --------------------------------------------------------------------------------

def uniform_kernel(out, inputs, dtypes, params):
    """uniform_(low, high): fma(u, high - low, low) in the dtype's computation type."""
    start = _dense_start(out)
    if start is None:
        return NotImplemented
    bounds = _uniform_bounds(out.dtype, params["low"], params["high"])
    if bounds is None:
        return NotImplemented
    _run(_random.uniform, out, start, params["generator"], *bounds)
    return out


def normal_kernel(out, inputs, dtypes, params):
    """normal_(mean, std): PyTorch's 16-block Box-Muller path (contiguous, >= 16 elements),
    else its one-at-a-time path (any dense layout, in memory order)."""
    mean, std = _finite_float(params["mean"]), _finite_float(params["std"])
    if mean is None or std is None or not _on_cpu(out):
        return NotImplemented
    if _numel(out) < 16 or not out.is_contiguous():
        return _scalar_normals(out, params["generator"], mean, std, False)
    _run(_random.normal, out, out._offset, params["generator"], mean, std)
    return out


def log_normal_kernel(out, inputs, dtypes, params):
    """log_normal_(mean, std): exp of the one-at-a-time normals, the C library's exp."""
    mean, std = _finite_float(params["mean"]), _finite_float(params["std"])
    if mean is None or std is None:
        return NotImplemented
    return _scalar_normals(out, params["generator"], mean, std, True)


def _scalar_normals(out, generator, mean, std, take_exp):
    """The one-at-a-time sampler into a dense `out`, its waiting sine normal kept in the
    generator as the reference keeps it."""
    start = _dense_start(out)
    if start is None:
        return NotImplemented
    generator.next_double_normal = _run(_random.scalar_normal, out, start, generator, mean,
                                        std, take_exp, generator.next_double_normal)
    return out


def random_kernel(out, inputs, dtypes, params):
    """random_: low + draw % span, from 32- or 64-bit draws, cast to the dtype."""
    start = _dense_start(out)
    low, span = params["low"], params["span"]
    if start is None or not (-2 ** 63 <= low < 2 ** 63 and 0 < span < 2 ** 64):
        return NotImplemented
    _run(_random.integers, out, start, params["generator"], low, span, params["draw_bits"])
    return out


def bernoulli_kernel(out, inputs, dtypes, params):
    """bernoulli_(p) with a number p: 1 where a float64 uniform is below p."""
    start = _dense_start(out)
    p = _finite_float(params["p"])
    if start is None or p is None:
        return NotImplemented
    _run(_random.bernoulli, out, start, params["generator"], p)
    return out


def exponential_kernel(out, inputs, dtypes, params):
    """exponential_(lambd): -1/lambd * log1p(-u), the C library's log1p (PyTorch's values)."""
    lambd = _finite_float(params["lambd"])
    if lambd is None or not lambd > 0:
        return NotImplemented
    return _transform(out, params, _random.EXPONENTIAL, -1.0 / lambd, 0.0)


def cauchy_kernel(out, inputs, dtypes, params):
    """cauchy_(median, sigma): fma(tan(pi (u - 1/2)), sigma, median), the C library's tan."""
    median, sigma = _finite_float(params["median"]), _finite_float(params["sigma"])
    if median is None or sigma is None:
        return NotImplemented
    return _transform(out, params, _random.CAUCHY, sigma, median)


def geometric_kernel(out, inputs, dtypes, params):
    """geometric_(p) into a floating tensor: ceil(log(u) / log1p(-p)), the C library's log
    and log1p. (Integer tensors are left to the reference: casting a huge count to a small
    integer type is where C and NumPy part ways.)"""
    p = _finite_float(params["p"])
    if p is None or not 0 < p < 1:
        return NotImplemented
    return _transform(out, params, _random.GEOMETRIC, p, 0.0)


def randperm_kernel(out, inputs, dtypes, params):
    """_randperm_ (randperm's permutation): PyTorch's Fisher-Yates shuffle of 0 .. n-1, one
    32-bit draw a step, into a contiguous int64 tensor. One element draws nothing and is
    left to the reference (drawing would mark a fresh generator's state as used)."""
    if _numel(out) < 2 or not _on_cpu(out) or not out.is_contiguous():
        return NotImplemented
    _run(_random.randperm, out, out._offset, params["generator"])
    return out


def _transform(out, params, kind, a, b):
    start = _dense_start(out)
    if start is None:
        return NotImplemented
    _run(_random.transform, out, start, params["generator"], kind, a, b)
    return out


# --- helpers --------------------------------------------------------------------------------

def _run(entry, out, start, generator, *numbers):
    """Call the C entry point on out's elements [start, start + numel), drawing from the
    generator's engine under its lock (NumPy's own draws take it too); its return value."""
    engine = generator.engine_for_drawing()
    with engine.lock:
        return entry(engine, TYPES[out.dtype], _buffer(out), start, _numel(out), *numbers)


def _buffer(out):
    array = out._storage.array
    if out.dtype is D.bfloat16:
        array = array.view(np.uint16)   # NumPy exports no buffer of ml_dtypes' bfloat16
    return array


def _numel(t):
    return math.prod(t._shape)


def _on_cpu(t):
    storage = t._storage
    return type(storage) is CPUStorage and storage.array.flags.writeable


def _dense_start(t):
    """The storage index of t's first element when t has at least MIN_NUMEL elements, lies
    on the cpu, and covers a block of memory without gaps in the order the samplers fill it
    (decreasing stride, i.e. memory order); else None."""
    shape, strides = t._shape, t._strides
    if math.prod(shape) < MIN_NUMEL or not _on_cpu(t):
        return None
    expected = 1
    for stride, size in sorted(zip(strides, shape)):
        if size != 1:
            if stride != expected:
                return None
            expected *= size
    return t._offset


def _finite_float(x):
    """x as the float the C code takes, or None: not a Python number, not finite, or an int
    too large to convert to float64 exactly (NumPy may round those differently to float32)."""
    if type(x) is float:
        return x if math.isfinite(x) else None
    if type(x) in (int, bool) and -2 ** 53 <= x <= 2 ** 53:
        return float(x)
    return None


def _uniform_bounds(dtype, low, high):
    """(low, span, high, low value) for the C kernel, computed as the reference computes them:
    float64 in float64; every other dtype from float32 bounds, with high and low rounded to
    the dtype for the comparison. None (decline) when a value is not finite."""
    if type(low) not in (int, float) or type(high) not in (int, float):
        return None
    if low == 0 and high == 1:
        return UNIT_BOUNDS       # rand(); every dtype's values of 0 and 1 are exact
    limit = 65504.0 if dtype is D.float16 else 1e38
    if not (abs(low) <= limit and abs(high) <= limit):
        return None             # bounds that overflow the dtype: too rare to follow here
    if dtype is D.float64:
        return float(low), float(high - low), float(high), float(low)
    low32, high32 = np.float32(low), np.float32(high)
    np_type = dtype.numpy_dtype.type
    bounds = (float(low32), float(high32 - low32), float(np_type(high)), float(np_type(low)))
    return bounds if all(map(math.isfinite, bounds)) else None


UNIT_BOUNDS = (0.0, 1.0, 1.0, 0.0)


# --- direct mode: check NumPy's MT19937 state layout once -------------------------------------

def _direct_mode_works():
    """Whether the C code may run mt19937 over NumPy's MT19937 state in place: the state
    reads as {uint32 key[624]; int pos} and draws that way equal NumPy's own, across a
    twist, leaving the same state behind."""
    probe = np.random.MT19937(20240607)
    probe.random_raw(1000)                       # mid-block: pos is neither 0 nor 624
    twin = np.random.MT19937()
    twin.state = probe.state
    state = probe.state["state"]
    key = np.asarray(state["key"], np.uint32).astype("=u4").tobytes()
    if not _random.state_matches(probe, key, int(state["pos"])):
        return False
    words = np.empty(1500, np.uint32)
    previous = _random.set_direct(True)
    try:
        _random.draw(probe, words)
    finally:
        _random.set_direct(previous)
    expected = twin.random_raw(1500).astype(np.uint32)
    after, expected_after = probe.state["state"], twin.state["state"]
    return (np.array_equal(words, expected)
            and np.array_equal(after["key"], expected_after["key"])
            and after["pos"] == expected_after["pos"])


DIRECT = _direct_mode_works()
_random.set_direct(DIRECT)
