"""Random sampling that reproduces PyTorch's CPU random streams for the same seed.

Every sampler turns raw mt19937 draws (`reftorch.random.Generator`) into values exactly as
PyTorch's CPU kernels do, in the same order, so that `manual_seed(s)` followed by the same
calls gives the same numbers as PyTorch. The recipes, learned from PyTorch's documentation and
by observing its output:

* uniform in [0, 1): keep the low `digits` bits of one draw and scale by 2**-digits, where
  digits is the dtype's mantissa precision (53 for float64, from a 64-bit draw; 24, 11 and 8
  for float32, float16 and bfloat16, from a 32-bit draw);
* integers in [from, to): `from + draw % (to - from)`, one 32-bit draw per value, or a 64-bit
  one when the range needs more than 32 bits;
* bernoulli, exponential, geometric, cauchy, log-normal: a float64 uniform through the
  distribution's inverse CDF, computed in float64 and rounded to the tensor's dtype;
* normal: Box-Muller. A contiguous tensor of 16 or more elements is first filled with
  uniforms, then transformed in blocks of 16 (the first 8 values give the radii, the next 8
  the angles); when the size is not a multiple of 16, the last 16 values are drawn again and
  transformed as one more block. Smaller or non-contiguous tensors take values one at a time
  from a scalar sampler that makes two normals per pair of float64 uniforms and keeps the
  second for the next call (the cached value is part of the generator's state).

Values are written in PyTorch's iteration order: memory order for dense tensors (dimensions
sorted by decreasing stride), which for a contiguous tensor is its logical order.

uniform_, normal_, random_, bernoulli_ (with a number p), exponential_, cauchy_, geometric_ and
log_normal_ are ops of the dispatch registry, so that plugins may fill cpu tensors in their own code (see
"the dispatch point" below).

The reference is vectorized: NumPy produces the draws and transforms them; no loop runs over
the elements of a tensor. Where PyTorch calls the C library's log, log1p, sin, cos, tan or exp
in float64, `_libm` calls the same functions (through Python's math module), so float64
results are PyTorch's bits on the machine that runs them.
"""
from __future__ import annotations

import builtins
import math
from fractions import Fraction

import numpy as np

from .. import _dispatch
from .. import _dtype as D
from .._promotion import broadcast_shapes, result_dtype
from .._tensor import Tensor
from ..autograd.graph import prepare_inplace, record
from ..autograd.grad_mode import no_grad
from ..random import generator_or_default
from . import cephes_float32 as cephes
from .creation import _factory_dtype, _size, empty, empty_like, empty_strided

__all__ = [
    "bernoulli", "multinomial", "normal", "rand", "rand_like", "randint", "randint_like",
    "randn", "randn_like", "randperm",
]

FLOATING = (D.float16, D.bfloat16, D.float32, D.float64)
# Random mantissa bits of each floating dtype's uniform sampler (float64 from 64-bit draws).
DIGITS = {D.float64: 53, D.float32: 24, D.float16: 11, D.bfloat16: 8}


# --- float64 arithmetic as PyTorch's compiled kernels do it ---------------------------------

def _libm(name, x):
    """The C library's float64 function `name` over an array, element by element.

    PyTorch's CPU samplers call the C library's log, log1p, sin, cos, tan and exp, whose
    results are not always the nearest float64 and differ between the library's variants for
    different CPUs (glibc picks an FMA or an SSE2 version at load time). NumPy's float64 loops
    use approximations of their own. So the only way to reproduce PyTorch's bits is to call
    the same functions, as Python's math module does. Arguments whose NumPy result is not
    finite, or beyond 2**1023 in magnitude, keep NumPy's value: there math raises instead of
    returning C's inf or NaN (both libraries agree on those special values).
    """
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        result = np.asarray(getattr(np, name)(x), np.float64).copy()
    ordinary = np.isfinite(result) & (np.abs(result) < 2.0 ** 1023)
    result[ordinary] = _C_LIBRARY[name](x[ordinary])
    return result


# math.<name> as ufuncs (object results, converted by _libm's assignment)
_C_LIBRARY = {name: np.frompyfunc(getattr(math, name), 1, 1)
              for name in ("log", "log1p", "sin", "cos", "tan", "exp")}


def _fma(a, b, c):
    """a * b + c with one rounding: the compiled kernels contract `a * b + c` into a fused
    multiply-add, whose result can differ in the last bit from two roundings."""
    if np.ndim(b) == 0 and np.ndim(c) == 0 and b == 1 and c == 0:
        return np.asarray(a, np.float64)          # exact: the common standard case
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    product = a.astype(np.longdouble) * b
    return _round_once(product + c, lambda i: float(Fraction(float(a.flat[i])) * Fraction(
        float(b.flat[i])) + Fraction(float(c.flat[i]))), error=np.spacing(np.abs(product)))


def _round_once(wide, exact_at, error=None):
    """Round extended-precision results `wide` to float64 as if from the exact values.

    Rounding once from extended precision gives the nearest float64, except where `wide`
    lies (within its own error) on a midpoint between two float64s; those rare elements
    (about 1 in 500) are recomputed exactly by `exact_at(flat index)`. `error` bounds the
    error of `wide` in units of its extended precision (by default, its own last place).
    """
    error = np.spacing(np.abs(wide)) if error is None else error
    result = np.asarray(wide.astype(np.float64))
    neighbour = np.nextafter(result, np.where(wide > result, np.inf, -np.inf))
    midpoint = (result.astype(np.longdouble) + neighbour) / 2
    unsure = np.isfinite(result) & (np.abs(wide - midpoint) <= 8 * error)
    for i in np.flatnonzero(unsure):
        result.flat[i] = exact_at(i)
    return result


# --- where the values go ------------------------------------------------------------------------

def _in_iteration_order(self, array):
    """`array` (shaped like `self`) viewed with its dimensions in the order PyTorch's
    iterator visits `self`'s (decreasing stride), so that C order follows PyTorch's order."""
    order = sorted(builtins.range(self.ndim), key=lambda d: -self._strides[d])
    return array.transpose(order)


def _check_writable(self):
    if any(st == 0 and n > 1 for n, st in zip(self._shape, self._strides)):
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the "
                           "tensor before performing the operation.")


def _fill(self, name, values, params=None):
    """Write `values` (one per element, in iteration order) into `self` as the in-place op
    `name`; its autograd node passes no gradient back (the old values are overwritten)."""
    prepare_inplace(name, (self,))
    if self.device.type == "cpu":
        _store(self, values)
    else:
        host = empty_like(self, device="cpu")
        _store(self, values, host)
        with no_grad():
            self.copy_(host)
    self._bump_version()
    return record(name, (self,), self, params or {})


def _store(self, values, target=None):
    """Write `values` into the cpu tensor `target` (default `self`) in `self`'s order."""
    view = _in_iteration_order(self, (self if target is None else target)._np)
    view[...] = values.reshape(view.shape)


# --- the dispatch point: plugins may fill a tensor from the generator -----------------------
#
# uniform_, normal_, random_, bernoulli_ with a number p, exponential_, cauchy_, geometric_ and
# log_normal_ are ops of the dispatch registry,
# keyed by the tensor's dtype, so that a plugin can fill a cpu tensor in its own code. A
# kernel registered with `registrar.kernel("uniform_", "cpu", dtypes, fn)` is called as
#     fn(self, (), (dtype, dtype, dtype), params)
# where `params` holds the generator ("generator") and the sampler's numbers, as the op's
# values function below takes them. It writes every element of `self` in PyTorch's
# iteration order and returns `self`, or returns NotImplemented to decline. It must consume
# exactly the draws the reference consumes, in the same order (drawing from
# `Generator.engine_for_drawing()`), so that calls served by a plugin and by the reference
# continue one stream: PyTorch's. Argument checks, autograd and non-cpu tensors stay here.

def _declare_sampler(name, values, params):
    """Declare the sampler op `name` (its `params`: the numbers after the generator, with
    their defaults), whose reference kernel writes `values(self, generator, **numbers)`, one
    value per element, in iteration order."""
    def reference(self, inputs, dtypes, params):
        _store(self, values(self, **params))
        return self
    reference.__name__ = f"reference_{name}"
    op = _dispatch.declare(_dispatch.Op(name=name, family="sampling", reference=reference,
                                        params={"generator": None, **params},
                                        doc=values.__doc__ or ""))
    op.values = values
    return op


def _sample(self, op, params, record_params=None):
    """Fill `self` as the sampler op: on cpu through the dispatcher (a plugin's kernel or the
    reference), on other devices with the reference's values through a host copy."""
    if self.device.type != "cpu":
        return _fill(self, op.name, op.values(self, **params), record_params)
    prepare_inplace(op.name, (self,))
    _dispatch.call(op, self, (), (self.dtype,) * 3, params, "cpu")
    self._bump_version()
    return record(op.name, (self,), self, record_params or {})


def _require_floating(self, kernel):
    if self.dtype not in FLOATING:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{self.dtype.scalar_name}'")


# --- uniform --------------------------------------------------------------------------------

def _unit_uniform(gen, count, dtype):
    """`count` uniforms in [0, 1) as `dtype`'s sampler makes them, as float64 values: float64
    keeps 53 bits of a 64-bit draw, every other dtype 24 bits of a 32-bit draw (a float32
    uniform, which float16 and bfloat16 round only when the result is stored)."""
    if dtype is D.float64:
        return (gen.random64(count) & np.uint64((1 << 53) - 1)).astype(np.float64) * 2.0 ** -53
    return (gen.random32(count) & np.uint64((1 << 24) - 1)).astype(np.float64) * 2.0 ** -24


def _uniform_values(gen, count, dtype, low, high):
    """fma(u, high - low, low) in the dtype's accumulation type (float64 for float64, else
    float32, bounds included). A value that rounds up to `high` in the dtype becomes `low`,
    so that every sample stays in [low, high)."""
    np_dtype = dtype.numpy_dtype
    u = _unit_uniform(gen, count, dtype)
    if dtype is D.float64:
        values = _fma(u, high - low, low)
    else:
        low32, high32 = np.float32(low), np.float32(high)
        values = cephes.fma(u, high32 - low32, low32).astype(np_dtype)
    return np.where(values == np_dtype.type(high), np_dtype.type(low), values)


def uniform_(self, from_=0, to=1, *, generator=None):
    """Fill with uniform samples from [from, to)."""
    if self.is_complex():
        return _complex_as_real(self, uniform_, from_, to, generator=generator)
    _require_floating(self, "check_uniform_bounds")
    if not from_ <= to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={from_} > to={to}")
    _check_writable(self)
    params = {"generator": generator_or_default(generator, self.device), "low": from_,
              "high": to}
    return _sample(self, UNIFORM, params)


def _uniform_fill(self, generator, low, high):
    """uniform_: params low and high (numbers, as given: from and to)."""
    return _uniform_values(generator, self.numel(), self.dtype, low, high)


UNIFORM = _declare_sampler("uniform_", _uniform_fill, {"low": 0, "high": 1})


def _complex_as_real(self, sampler, *args, generator=None):
    """PyTorch samples a complex tensor as the float tensor of its real and imaginary parts
    (`view_as_real`: a trailing dimension of 2, strides doubled)."""
    real_dtype = D.float64 if self.dtype is D.complex128 else D.float32
    parts = empty_strided(self._shape + (2,), tuple(2 * s for s in self._strides) + (1,),
                          dtype=real_dtype)
    sampler(parts, *args, generator=generator)
    values = parts._np.view(self.dtype.numpy_dtype)[..., 0]
    return _fill(self, sampler.__name__, _in_iteration_order(self, values).ravel())


# --- normal ---------------------------------------------------------------------------------

def _scalar_normals(gen, count):
    """`count` standard normals from PyTorch's one-at-a-time sampler (float64).

    Each pair of float64 uniforms (u1, u2) gives r*cos(theta) now and r*sin(theta) cached
    in the generator for the next value, with r = sqrt(-2 log(1 - u2)), theta = 2 pi u1.
    """
    head = [] if gen.next_double_normal is None else [gen.next_double_normal]
    pairs = max(0, -(-(count - len(head)) // 2))
    u = _unit_uniform(gen, 2 * pairs, D.float64).reshape(pairs, 2)
    radius = np.sqrt(-2.0 * _libm("log1p", -u[:, 1]))
    theta = 2.0 * math.pi * u[:, 0]
    stream = np.concatenate([head, np.stack([radius * _libm("cos", theta),
                                             radius * _libm("sin", theta)], 1).ravel()])
    gen.next_double_normal = float(stream[count]) if stream.size > count else None
    return stream[:count]


def _box_muller_blocks(u, dtype, mean, std):
    """PyTorch's 16-at-a-time transform of uniforms `u` (a multiple of 16 of them): in each
    block the first 8 give radii sqrt(-2 log(1 - u)) and the last 8 angles 2 pi u; the block
    becomes the 8 cosine normals followed by the 8 sine normals. float64 computes in float64;
    every other dtype in float32 (rounding to the dtype at the end). float32 follows PyTorch
    on x86-64 CPUs with AVX2; on other CPUs PyTorch's float32 results may differ in the last
    bits."""
    blocks = u.reshape(-1, 16)
    if dtype is D.float64:
        radius = np.sqrt(-2.0 * _libm("log", 1.0 - blocks[:, :8]))
        theta = 2.0 * math.pi * blocks[:, 8:]
        cos, sin = _libm("cos", theta), _libm("sin", theta)
        return np.concatenate([_fma(radius * cos, std, mean), _fma(radius * sin, std, mean)],
                              1).ravel()
    f32 = np.float32
    if dtype is D.float32:
        # PyTorch's x86-64 AVX2 kernel: Cephes log/sin/cos in float32 lanes (cephes_float32)
        log_u1 = cephes.log(f32(1) - blocks[:, :8].astype(f32))
        sin, cos = cephes.sincos(f32(2 * math.pi) * blocks[:, 8:].astype(f32))
    else:
        # float16/bfloat16: PyTorch calls the C library's logf/cosf/sinf; float64 NumPy
        # rounded to float32 gives its values but for a few per 100,000 that end 1 ulp of
        # the dtype apart (not from these functions: calling them does not remove those)
        log_u1 = np.log(1.0 - blocks[:, :8]).astype(f32)
        theta = f32(2 * math.pi) * blocks[:, 8:].astype(f32)
        cos = np.cos(theta.astype(np.float64)).astype(f32)
        sin = np.sin(theta.astype(np.float64)).astype(f32)
    radius = np.sqrt(f32(-2) * log_u1)
    std, mean = f32(std), f32(mean)
    return np.concatenate([cephes.fma(radius * cos, std, mean),
                           cephes.fma(radius * sin, std, mean)], 1).ravel()


def _normal_values(gen, self, mean, std):
    count, dtype = self.numel(), self.dtype
    if count < 16 or not self.is_contiguous():
        return _fma(_scalar_normals(gen, count), std, mean).astype(dtype.numpy_dtype)
    whole = count - count % 16
    # float16 and bfloat16 draw uniforms for the whole blocks only; the others for every
    # element (the values past the last whole block are overwritten unused).
    drawn = count if dtype in (D.float32, D.float64) else whole
    values = _box_muller_blocks(_unit_uniform(gen, drawn, dtype)[:whole], dtype, mean, std)
    if whole < count:
        # PyTorch draws the last 16 values again and transforms them as one more block
        tail = _box_muller_blocks(_unit_uniform(gen, 16, dtype), dtype, mean, std)
        values = np.concatenate([values[:count - 16], tail])
    return values.astype(dtype.numpy_dtype)


def normal_(self, mean=0, std=1, *, generator=None):
    """Fill with samples from the normal distribution N(mean, std**2)."""
    if self.is_complex():
        # the real and imaginary parts each get variance std**2 / 2
        return _complex_as_real(self, normal_, mean, std / math.sqrt(2), generator=generator)
    _require_floating(self, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    _check_writable(self)
    params = {"generator": generator_or_default(generator, self.device), "mean": mean,
              "std": std}
    return _sample(self, NORMAL, params)


def _normal_fill(self, generator, mean, std):
    """normal_: params mean and std (numbers). The 16-block path runs for contiguous tensors
    of 16 or more elements, the one-at-a-time path (and its cache) for the others."""
    return _normal_values(generator, self, mean, std)


NORMAL = _declare_sampler("normal_", _normal_fill, {"mean": 0, "std": 1})


# --- distributions through a float64 uniform ------------------------------------------------

def _float64_sampler(name, kernel, transform, check, numbers):
    """An in-place sampler op that maps float64 uniforms through `transform(u, *numbers)`;
    `numbers` names them (with their defaults) for the op's params."""
    def values(self, generator, **params):
        u = _unit_uniform(generator, self.numel(), D.float64)
        with np.errstate(all="ignore"):
            return _cast(transform(u, **params), self.dtype)
    values.__doc__ = f"{name}: float64 uniforms through {transform.__name__}."
    op = _declare_sampler(name, values, numbers)

    def sampler(self, *args, generator=None):
        check(*args)
        if kernel is not None:
            _require_floating(self, kernel)
        _check_writable(self)
        params = {"generator": generator_or_default(generator, self.device), **numbers,
                  **dict(zip(numbers, args))}
        return _sample(self, op, params)
    sampler.__name__ = name
    sampler.op = op
    return sampler


def _cast(values, dtype):
    """float64 values to `dtype` as C++ static_cast does: integers truncate, and float16 and
    bfloat16 convert through float32 (two roundings)."""
    if dtype is D.bool:
        return values != 0
    if dtype in (D.float16, D.bfloat16):
        values = values.astype(np.float32)
    return values.astype(dtype.numpy_dtype)


def _check_lambda(lambd=1.0):
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")


def _check_geometric(p):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")


def _check_sigma(median=0.0, sigma=1.0):
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")


def _exponential(u, lambd=1.0):
    return -1.0 / lambd * _libm("log1p", -u)


def _geometric(u, p):
    return np.ceil(_libm("log", u) / _libm("log1p", np.full_like(u, -p)))


def _cauchy(u, median=0.0, sigma=1.0):
    return _fma(_libm("tan", math.pi * (u - 0.5)), sigma, median)


exponential_ = _float64_sampler("exponential_", "exponential_cpu", _exponential, _check_lambda,
                                {"lambd": 1.0})
geometric_ = _float64_sampler("geometric_", None, _geometric, _check_geometric, {"p": 0.5})
cauchy_ = _float64_sampler("cauchy_", "cauchy_cpu", _cauchy, _check_sigma,
                           {"median": 0.0, "sigma": 1.0})


def log_normal_(self, mean=1, std=2, *, generator=None):
    """Fill with exp(N(mean, std**2)) samples (from the scalar normal sampler)."""
    _require_floating(self, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    _check_writable(self)
    params = {"generator": generator_or_default(generator, self.device), "mean": mean,
              "std": std}
    return _sample(self, LOG_NORMAL, params)


def _log_normal_fill(self, generator, mean, std):
    """log_normal_: exp of the one-at-a-time sampler's normals times std plus mean."""
    normals = _fma(_scalar_normals(generator, self.numel()), std, mean)
    return _cast(_libm("exp", normals), self.dtype)


LOG_NORMAL = _declare_sampler("log_normal_", _log_normal_fill, {"mean": 1, "std": 2})


# --- bernoulli --------------------------------------------------------------------------------

def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 1 where a uniform sample falls below p (a number or a tensor of them)."""
    gen = generator_or_default(generator, self.device)
    _check_writable(self)
    if isinstance(p, Tensor):
        probs = p.detach().cpu().expand(self.shape)
        # float64 probabilities meet float64 uniforms; any other dtype meets float32 ones
        u_dtype = D.float64 if p.dtype is D.float64 else D.float32
        u = _unit_uniform(gen, self.numel(), u_dtype)
        probs = _in_iteration_order(self, probs._np.astype(np.float64)).ravel()
        return _fill(self, "bernoulli_", _cast((u < probs).astype(np.float64), self.dtype),
                     {"p_tensor": True})
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    return _sample(self, BERNOULLI, {"generator": gen, "p": p})


def _bernoulli_fill(self, generator, p):
    """bernoulli_ with a number p: 1 where a float64 uniform is below p, else 0."""
    u = _unit_uniform(generator, self.numel(), D.float64)
    return _cast((u < p).astype(np.float64), self.dtype)


BERNOULLI = _declare_sampler("bernoulli_", _bernoulli_fill, {"p": 0.5})


def bernoulli(input, p=None, *, generator=None, out=None):
    """Samples 0 or 1, each 1 with probability p (the input's elements, or the number p)."""
    if p is None:
        if not input.dtype.is_floating_point:
            raise RuntimeError(f"\"bernoulli_tensor_cpu_p_\" not implemented for "
                               f"'{input.dtype.scalar_name}'")
        values = input.detach()
        if ((values < 0) | (values > 1)).any().item():
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  "
                               "(Could this error message be improved?  If so, please report "
                               "an enhancement request to PyTorch.)")
    result = empty_like(input) if out is None else out.resize_(input.shape)
    with no_grad():
        bernoulli_(result, input.detach() if p is None else p, generator=generator)
    if p is None:
        record("bernoulli", (input,), result, {})
    return result


# --- integers -----------------------------------------------------------------------------

def _integer_values(gen, count, low, span, draw_bits):
    """low + draw % span for `count` draws of `draw_bits` (32 or 64) bits, as int64 (wrapping
    past 2**63 - 1, which only the full int64 range reaches)."""
    draws = gen.random64(count) if draw_bits == 64 else gen.random32(count)
    return (draws % np.uint64(span)).astype(np.int64) + np.int64(low) if span < 1 << 63 \
        else (draws % np.uint64(span) + np.uint64(low % (1 << 64))).view(np.int64)


def _random_fill(self, generator, low, span, draw_bits):
    """random_: params low, span (values low .. low + span - 1) and draw_bits (32 or 64)."""
    return _cast(_integer_values(generator, self.numel(), low, span, draw_bits), self.dtype)


RANDOM = _declare_sampler("random_", _random_fill, {"low": 0, "span": None, "draw_bits": 32})


def _largest(dtype):
    """The largest value random_(from) may produce in `dtype`."""
    if dtype is D.bool:
        return 1
    if dtype.is_floating_point:
        return 1 << DIGITS[dtype]
    return int(np.iinfo(dtype.numpy_dtype).max)


def _check_bound(value, name, dtype):
    if dtype is D.bool or dtype.is_floating_point:
        limit = 1 << (DIGITS.get(dtype, 1))
        if not -limit <= value <= limit:
            raise RuntimeError(f"{name} is out of bounds for {dtype.scalar_name}")
        return
    info = np.iinfo(dtype.numpy_dtype)
    if not int(info.min) <= value <= int(info.max):
        raise RuntimeError(f"{name} is out of bounds for {dtype.scalar_name}")


def random_(self, *args, generator=None, **bounds):
    """random_(), random_(to) or random_(from, to): integers drawn uniformly (see below)."""
    names = ("from", "to")
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    given = dict(zip(names if len(args) == 2 else ("to",), args))
    given.update(bounds)
    unknown = set(given) - set(names)
    if unknown:
        raise TypeError(f"random_() got an unexpected keyword argument '{unknown.pop()}'")
    _check_writable(self)
    gen = generator_or_default(generator, self.device)
    dtype = self.dtype
    if dtype.is_complex:
        raise RuntimeError(f"\"random_\" not implemented for '{dtype.scalar_name}'")
    low, high = int(given.get("from", 0)), given.get("to")
    if "from" not in given and high is None:
        # draw % (largest + 1), from 64-bit draws for float64 and int64 (largest: 2**digits
        # for floating dtypes, the maximum for integers, 1 for bool)
        params = {"generator": gen, "low": 0, "span": _largest(dtype) + 1,
                  "draw_bits": 64 if dtype in (D.float64, D.int64) else 32}
        return _sample(self, RANDOM, params, {"form": 2})
    if high is None:
        _check_bound(low, "from", dtype)
        span = _largest(dtype) - low + 1
        form = 0
    else:
        high = int(high)
        if not low < high:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={low} >= to={high}")
        _check_bound(low, "from", dtype)
        _check_bound(high - 1, "to - 1", dtype)
        span = high - low
        form = 0 if "from" in given else 1
    # PyTorch switches to 64-bit draws from a span of 2**28 on (observed)
    params = {"generator": gen, "low": low, "span": span,
              "draw_bits": 64 if span >= 1 << 28 else 32}
    return _sample(self, RANDOM, params, {"form": form})


# --- factories -----------------------------------------------------------------------------

def _factory(size, dtype, out, device, requires_grad, fill):
    """empty(size).fill_(...) as the factory functions do: the sampler fills `out` or a new
    tensor, then requires_grad applies."""
    shape = _size(size)
    if out is not None:
        if dtype is not None and dtype is not out.dtype:
            raise RuntimeError(f"dtype {dtype} does not match dtype of out parameter "
                               f"({out.dtype})")
        out.resize_(shape)
        with no_grad():
            fill(out)
        return out
    return _sampled(empty(shape, dtype=_factory_dtype(dtype, None), device=device), fill,
                    requires_grad)


def _sampled(t, fill, requires_grad):
    fill(t)
    if requires_grad:
        t.requires_grad_(True)
    return t


def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """Uniform samples from [0, 1)."""
    return _factory(size, dtype, out, device, requires_grad,
                    lambda t: uniform_(t, 0, 1, generator=generator))


def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False):
    """Standard normal samples."""
    return _factory(size, dtype, out, device, requires_grad,
                    lambda t: normal_(t, 0, 1, generator=generator))


def randint(*args, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False, **kwargs):
    """randint(high, size) or randint(low, high, size): integers from [low, high)."""
    low, high, size = _randint_args(args, kwargs)
    dtype = dtype if dtype is not None else (out.dtype if out is not None else D.int64)
    return _factory((size,), dtype, out, device, requires_grad,
                    lambda t: random_(t, low, high, generator=generator))


def _randint_args(args, kwargs):
    values = dict(kwargs)
    names = ("high", "size") if len(args) + len(values) == 2 else ("low", "high", "size")
    values.update(zip(names, args))
    if "high" not in values or "size" not in values:
        raise TypeError("randint() missing required arguments 'high' and 'size'")
    size = values["size"]
    if not isinstance(size, (tuple, list)) and not hasattr(size, "__len__"):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__}")
    return int(values.get("low", 0)), int(values["high"]), tuple(size)


def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, generator=None):
    return _like(input, dtype, device, requires_grad, memory_format,
                 lambda t: uniform_(t, 0, 1, generator=generator))


def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, generator=None):
    return _like(input, dtype, device, requires_grad, memory_format,
                 lambda t: normal_(t, 0, 1, generator=generator))


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, generator=None):
    if high is None:
        low, high = 0, low
    return _like(input, dtype, device, requires_grad, memory_format,
                 lambda t: random_(t, int(low), int(high), generator=generator))


def _like(input, dtype, device, requires_grad, memory_format, fill):
    return _sampled(empty_like(input, dtype=dtype, device=device, memory_format=memory_format),
                    fill, requires_grad)


# --- normal(): every overload ----------------------------------------------------------------

def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None,
           layout=None, device=None, requires_grad=False, pin_memory=False):
    """Normal samples with the given means and standard deviations (tensors or numbers).

    As PyTorch: standard normals of the result's shape are drawn first, then scaled by std
    and shifted by mean (with a number std, it is used in the draw itself).
    """
    mean_is_tensor, std_is_tensor = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mean_is_tensor and not std_is_tensor:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: "
                            "expected size when mean and std are numbers")
        return _factory((tuple(size),), dtype, out, device, requires_grad,
                        lambda t: normal_(t, mean, std, generator=generator))
    if std_is_tensor and (std.detach() < 0).any().item():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if not std_is_tensor and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    tensors = [x for x in (mean, std) if isinstance(x, Tensor)]
    shape = broadcast_shapes(*(x.shape for x in tensors))
    dtype = result_dtype(tensors)
    with no_grad():
        standard = empty(shape, dtype=dtype, device=tensors[0].device)
        if std_is_tensor:
            normal_(standard, 0, 1, generator=generator)
            result = standard * std.detach() + (mean.detach() if mean_is_tensor else mean)
        else:
            normal_(standard, 0, std, generator=generator)
            result = standard + mean.detach()
    if out is not None:
        from .structured import write_out
        return write_out(out, result)
    return record("normal", (mean, std), result, {})


# --- randperm -------------------------------------------------------------------------------

def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of 0..n-1 (PyTorch's Fisher-Yates shuffle)."""
    n = int(n)
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    dtype = dtype if dtype is not None else (out.dtype if out is not None else D.int64)
    if dtype.is_floating_point and n > (1 << DIGITS[dtype]) + 1:
        raise RuntimeError(f"n cannot be greater than 2^{DIGITS[dtype]}+1 for "
                           f"{dtype.scalar_name} dtype.")
    gen = generator_or_default(generator, device if out is None else out.device)
    # The permutation is made on the host (from any device's generator, as the reference
    # draws from it), then cast and moved.
    perm = empty(n, dtype=D.int64)
    _dispatch.call(RANDPERM, perm, (), (D.int64,) * 3, {"generator": gen}, "cpu")
    return _factory((n,), dtype, out, device, requires_grad,
                    lambda t: _fill(t, "randperm", perm._np.astype(dtype.numpy_dtype)))


def _randperm_fill(self, generator):
    """_randperm_: a permutation of 0 .. n-1 (n = self.numel()) by PyTorch's Fisher-Yates
    shuffle: step i swaps position i with position i + draw_i % (n - i), for i = 0 .. n-2,
    one 32-bit draw a step. randperm fills its int64 permutation through this sampler op."""
    n = self.numel()
    offsets = generator.random32(max(n - 1, 0)) % np.arange(n, 1, -1, dtype=np.uint64)
    return shuffle_by_swaps(np.arange(n) + np.append(offsets, 0).astype(np.int64))


RANDPERM = _declare_sampler("_randperm_", _randperm_fill, {})


def shuffle_by_swaps(targets):
    """The array [0, 1, ..., n-1] after swapping a[i] with a[targets[i]] for i = 0, 1, ...
    in turn (targets[i] >= i), computed without stepping through the swaps.

    After step i, position i never changes again, and it holds what position targets[i]
    held just before step i. Position p (p >= i) holds, before step i, the value that the
    last earlier step k with targets[k] == p moved there, which is what position k held
    before step k; if no earlier step touched p, it still holds p. So each step k points
    back to the last earlier step that targeted position k, and following those pointers to
    their end finds the original value (pointer jumping: log2(n) vectorized rounds).
    """
    n = targets.size
    steps = np.arange(n)
    # Steps sorted by (target, step): the last step before t that targeted p is found by
    # a binary search for (p, t).
    keys = targets * n + steps
    by_key = np.argsort(keys, kind="stable")
    sorted_keys = keys[by_key]

    def last_step_targeting(positions, before):
        where = np.searchsorted(sorted_keys, positions * n + before) - 1
        found = (where >= 0) & (sorted_keys[np.maximum(where, 0)] // n == positions)
        return np.where(found, by_key[np.maximum(where, 0)], -1)

    # held[k]: the value position k holds before step k.
    pointer = last_step_targeting(steps, steps)
    origin = np.where(pointer < 0, steps, pointer)
    while True:
        jumped = origin[origin]
        if np.array_equal(jumped, origin):
            break
        origin = jumped
    held = origin   # the root of each chain is a step whose position nobody targeted before
    source = last_step_targeting(targets, steps)
    return np.where(source < 0, targets, held[np.maximum(source, 0)])


# --- multinomial --------------------------------------------------------------------------

def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices drawn from the categories weighted by each row of `input`."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: "
                           f"{input.dtype.scalar_name.capitalize()}")
    categories = input.shape[-1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    host = input.detach().cpu()
    _check_weights(host._np.reshape(-1, categories))
    gen = generator_or_default(generator, input.device)
    if not replacement or num_samples == 1:
        indices = _multinomial_by_exponentials(host, num_samples, gen)
    else:
        indices = _multinomial_by_search(host._np.reshape(-1, categories), num_samples, gen)
    indices = indices.reshape(input.shape[:-1] + (num_samples,))
    result = Tensor._from_array(np.ascontiguousarray(indices, dtype=np.int64))
    if input.device.type != "cpu":
        result = result.to(input.device)
    if out is not None:
        from .structured import write_out
        return write_out(out, result)
    return result


def _check_weights(rows):
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (rows.astype(np.float64).sum(axis=1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


def _multinomial_by_exponentials(weights, num_samples, gen):
    """Without replacement: the num_samples largest of weight / E, E ~ Exponential(1) drawn
    in the weights' dtype (the exponential-race form of sampling without replacement)."""
    races = exponential_(empty_like(weights), generator=gen)
    keys = weights._np / races._np
    keys = keys.reshape(-1, keys.shape[-1])
    # descending by key; ties keep the lower index first
    order = np.argsort(-keys, axis=1, kind="stable")
    return order[:, :num_samples]


def _multinomial_by_search(rows, num_samples, gen):
    """With replacement: each row's cumulative weights, normalized, searched for float64
    uniforms: the first category whose cumulative weight is not below the uniform (a binary
    search run for all samples at once, one halving per round)."""
    acc = np.float64 if rows.dtype == np.float64 else np.float32
    cumulative = np.cumsum(rows.astype(acc), axis=1, dtype=acc)
    cumulative = cumulative / cumulative[:, -1:]
    cumulative[:, -1] = 1
    u = _unit_uniform(gen, rows.shape[0] * num_samples, D.float64).reshape(-1, num_samples)
    row = np.arange(rows.shape[0])[:, None]
    left = np.zeros(u.shape, np.int64)
    right = np.full(u.shape, rows.shape[1], np.int64)
    while (left < right).any():
        middle = left + (right - left) // 2
        below = cumulative[row, np.minimum(middle, rows.shape[1] - 1)] < u
        active = left < right
        left = np.where(active & below, middle + 1, left)
        right = np.where(active & ~below, middle, right)
    return left


# --- Tensor methods -------------------------------------------------------------------------

def _bernoulli_method(self, p=None, *, generator=None):
    return bernoulli(self, p, generator=generator)


Tensor.uniform_ = uniform_
Tensor.normal_ = normal_
Tensor.random_ = random_
Tensor.bernoulli_ = bernoulli_
Tensor.bernoulli = _bernoulli_method
Tensor.exponential_ = exponential_
Tensor.geometric_ = geometric_
Tensor.cauchy_ = cauchy_
Tensor.log_normal_ = log_normal_
Tensor.multinomial = multinomial
