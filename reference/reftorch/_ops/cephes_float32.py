"""float32 log, sin and cos as PyTorch's vectorized normal sampler evaluates them.

On x86-64 CPUs with AVX2, PyTorch's float32 Box-Muller kernel (`randn`, `normal_` on
contiguous float32 tensors of 16 or more elements) computes log, sin and cos with the Cephes
single-precision algorithms (range reduction plus a short polynomial, in eight float32 lanes)
rather than the C library's correctly rounded functions. Their results are within a few ulp
of the true values but not always nearest; to give the same samples, the reference evaluates
the same algorithms step by step in float32 here.

The compiler contracts a multiplication whose only use is an addition into a fused
multiply-add (one rounding), so the steps written `fma` below round once; which pairs contract
was settled by comparing the samples bit for bit with PyTorch 2.x.

The constants are those of Cephes' `logf`, `sinf` and `cosf` (S. L. Moshier).
"""
from __future__ import annotations

import numpy as np

f32 = np.float32

# log(1 + x) ~ x - x**2/2 + x**3 * P(x) on [sqrt(1/2) - 1, sqrt(2) - 1]
LOG_POLY = tuple(map(f32, (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
    -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)))
# log(2) split in two: e * LN2_HIGH is exact for the exponents that occur
LN2_HIGH, LN2_LOW = f32(0.693359375), f32(-2.12194440e-4)
SQRT_HALF = f32(0.707106781186547524)

FOUR_OVER_PI = f32(1.27323954473516)
# pi/4 in three pieces (Cody-Waite reduction), each with few enough bits to multiply exactly
PI_4_PIECES = (f32(0.78515625), f32(2.4187564849853515625e-4), f32(3.77489497744594108e-8))
SIN_POLY = (f32(-1.9515295891e-4), f32(8.3321608736e-3), f32(-1.6666654611e-1))
COS_POLY = (f32(2.443315711809948e-5), f32(-1.388731625493765e-3), f32(4.166664568298827e-2))


def fma(a, b, c):
    """a * b + c in float32 with one rounding.

    The product of two float32s is exact in float64, but the sum may not be, and rounding it
    to float64 and then to float32 can differ from rounding once. Rounding the float64 sum
    "to odd" (toward zero, then setting the last bit when anything was lost) keeps the
    information the second rounding needs, since float64 carries more than 24 + 1 bits.
    """
    product = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    addend = np.asarray(c, np.float64)
    total = product + addend
    # TwoSum: the exact error of the float64 addition
    virtual = total - product
    error = (product - (total - virtual)) + (addend - virtual)
    inexact = (error != 0) & np.isfinite(total)
    overshot = inexact & ((error < 0) != (total < 0))
    truncated = np.where(overshot, np.nextafter(total, 0), total)
    bits = truncated.view(np.int64)
    to_odd = np.where(inexact, bits | 1, bits).view(np.float64)
    return to_odd.astype(f32)


def log(x):
    """Natural logarithm of positive float32 `x` (NaN for x <= 0)."""
    x = np.asarray(x, f32)
    # x = m * 2**e with m in [0.5, 1); denormals are flushed to the smallest normal
    bits = np.maximum(x, np.finfo(f32).tiny).view(np.int32)
    e = ((bits >> 23) - 126).astype(f32)
    m = ((bits & 0x007FFFFF) | 0x3F000000).view(f32)
    # keep m near 1: for m < sqrt(1/2) use 2m and e - 1, so the polynomial sees m - 1 small
    below = m < SQRT_HALF
    e = e - below.astype(f32)
    m = (m - f32(1)) + np.where(below, m, f32(0))
    m_squared = m * m
    poly = np.full_like(m, LOG_POLY[0])
    for coefficient in LOG_POLY[1:]:
        poly = fma(poly, m, coefficient)
    y = fma(poly * m, m_squared, e * LN2_LOW)
    y = fma(m_squared, f32(-0.5), y)
    result = fma(e, LN2_HIGH, m + y)
    return np.where(x > 0, result, f32(np.nan))


def sincos(x):
    """(sin x, cos x) of float32 `x`: reduce by multiples of pi/4, then a polynomial for
    whichever of sin and cos is accurate in the reduced octant."""
    x = np.asarray(x, f32)
    sin_negative = np.signbit(x)
    x = np.abs(x)
    # the octant, rounded up to even: j * pi/4 is the nearest even multiple at or below
    octant = (x * FOUR_OVER_PI).astype(np.int32)
    octant = (octant + 1) & ~1
    j = octant.astype(f32)
    for piece in PI_4_PIECES:
        x = fma(j, -piece, x)
    sin_negative ^= (octant & 4) != 0
    cos_negative = ((octant - 2) & 4) == 0
    use_cos_poly_for_sin = (octant & 2) != 0

    z = x * x
    cos_poly = fma(fma(COS_POLY[0], z, COS_POLY[1]), z, COS_POLY[2])
    cos_r = fma(cos_poly * z, z, -(z * f32(0.5))) + f32(1)
    sin_poly = fma(fma(SIN_POLY[0], z, SIN_POLY[1]), z, SIN_POLY[2])
    sin_r = fma(sin_poly * z, x, x)

    sin = np.where(use_cos_poly_for_sin, cos_r, sin_r)
    cos = np.where(use_cos_poly_for_sin, sin_r, cos_r)
    return np.where(sin_negative, -sin, sin), np.where(cos_negative, -cos, cos)
