"""Special functions (erf, gamma family, Bessel I0/I1, sinc, ...): NumPy kernels and declarations.

Every kernel is vectorized NumPy built from published numerical methods:
  * erf/erfc/erfcx: W. J. Cody's rational Chebyshev approximations (Math. Comp. 1969), with
    the exp(-x^2) factor split in two to keep its relative accuracy for large x;
  * erfinv/ndtri: M. Giles' single-precision approximation ("Approximating the erfinv
    function", GPU Computing Gems 2011) polished by Newton steps on our own erf/erfc;
  * lgamma: Taylor series around 1 and 2 (zeta values as coefficients), elsewhere the upward
    recurrence to x >= 10 followed by Stirling's series; reflection for x < 0.5;
  * digamma/polygamma: recurrence plus asymptotic series; for n >= 2 the Hurwitz zeta
    function by a direct sum plus the Euler-Maclaurin tail;
  * i0/i0e/i1/i1e: the power series for |x| <= 25 and Hankel's asymptotic series above.
Loops below run over a fixed number of series terms or recurrence steps, never over elements.
Half and single precision inputs are computed in float64 and rounded once (more accurate than
PyTorch's own float32 kernels, well within their tolerances).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as D
from .._promotion import Promotion
from .._tensor import Tensor
from . import variants as V
from .elementwise import apply, as_operand, declare

REAL = {D.bool, D.uint8, D.int8, D.int16, D.int32, D.int64,
        D.float16, D.bfloat16, D.float32, D.float64}
REAL_NO_HALF = REAL - {D.float16, D.bfloat16}

_SQRT_PI = math.sqrt(math.pi)
_EULER_GAMMA = 0.57721566490153286061


def _f64(x):
    """Work in float64 (results are rounded to the op's dtype by the caller)."""
    return np.asarray(x, dtype=np.float64)


def _polyval(coefficients, x):
    """Horner's rule; `coefficients` from the highest power down."""
    result = np.zeros_like(x) + coefficients[0]
    for c in coefficients[1:]:
        result = result * x + c
    return result


# --- error function family ----------------------------------------------------------------------
# Cody's coefficients: erf on |x| <= 0.5 (A/B), erfc on 0.5 < x <= 4 (C/D), and erfc for x > 4
# as exp(-x^2)/x * (1/sqrt(pi) + R(1/x^2)/x^2) (P/Q).

_CODY_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
           3.20937758913846947e03, 1.85777706184603153e-1)
_CODY_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
           2.84423683343917062e03)
_CODY_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
           2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
           2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_CODY_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
           1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
           3.43936767414372164e03, 1.23033935480374942e03)
_CODY_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
           1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_CODY_Q = (2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1,
           6.05183413124413191e-2, 2.33520497626869185e-3)


def _cody_ratio(x, num, den, lead):
    """Cody's nested evaluation: (num[-1] x^n + num[0] x^(n-1) + ...) / (x^n + den[0] ...)."""
    xnum = num[lead] * x
    xden = x
    for i in range(lead - 1):
        xnum = (xnum + num[i]) * x
        xden = (xden + den[i]) * x
    return xnum + num[lead - 1], xden + den[lead - 1]


def _erf_small(x):
    """erf(x) for |x| <= 0.5."""
    num, den = _cody_ratio(x * x, _CODY_A, _CODY_B, 4)
    return x * num / den


def _erfcx_positive(y):
    """exp(y^2) erfc(y) for y > 0.5 (the scaled complement has no overflow or underflow)."""
    with np.errstate(all="ignore"):
        num, den = _cody_ratio(y, _CODY_C, _CODY_D, 8)
        middle = num / den
        z = 1.0 / (y * y)
        num, den = _cody_ratio(z, _CODY_P, _CODY_Q, 5)
        tail = (1.0 / _SQRT_PI - z * num / den) / y
    return np.where(y <= 4.0, middle, tail)


def _exp_minus_square(y):
    """exp(-y^2) with y^2 split so that its rounding error does not reach the result."""
    with np.errstate(all="ignore"):
        head = np.trunc(y * 16.0) / 16.0
        return np.exp(-head * head) * np.exp(-(y - head) * (y + head))


def _erfc_positive(y):
    """erfc(y) for y > 0.5."""
    with np.errstate(all="ignore"):
        value = _exp_minus_square(y) * _erfcx_positive(y)
    # erfc(y) is below the smallest subnormal from y ~ 27.3 on; past 28 it is 0 exactly, and
    # the split of y*y above would overflow for huge y (y * 16 = inf gives NaN).
    return np.where(y >= 28.0, 0.0, value)


def _erf(x):
    """The error function 2/sqrt(pi) * integral of exp(-t^2) from 0 to x."""
    x = _f64(x)
    ax = np.abs(x)
    small = _erf_small(np.where(ax <= 0.5, x, 0.0))
    large = np.copysign(1.0 - _erfc_positive(np.where(ax > 0.5, ax, 1.0)), x)
    return np.where(ax <= 0.5, small, np.where(np.isnan(x), x, large))


def _erfc(x):
    """1 - erf(x), accurate where erf(x) is close to 1."""
    x = _f64(x)
    ax = np.abs(x)
    small = 1.0 - _erf_small(np.where(ax <= 0.5, x, 0.0))
    tail = _erfc_positive(np.where(ax > 0.5, ax, 1.0))
    large = np.where(x > 0, tail, 2.0 - tail)
    return np.where(ax <= 0.5, small, np.where(np.isnan(x), x, large))


def _erfcx(x):
    """exp(x^2) erfc(x), the scaled complementary error function."""
    x = _f64(x)
    ax = np.abs(x)
    small = np.exp(x * x) * (1.0 - _erf_small(np.where(ax <= 0.5, x, 0.0)))
    scaled = _erfcx_positive(np.where(ax > 0.5, ax, 1.0))
    with np.errstate(all="ignore"):
        # erfcx(-y) = 2 exp(y^2) - erfcx(y); the exponential overflows to inf for large y.
        negative = 2.0 * np.exp(ax * ax) - scaled
    large = np.where(x > 0, np.where(x == np.inf, 0.0, scaled), negative)
    return np.where(ax <= 0.5, small, np.where(np.isnan(x), x, large))


# Giles' single-precision erfinv: a polynomial in w = -log((1-x)(1+x)) (two ranges).
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _giles_guess(w):
    """Giles' first approximation of erfinv(x) / x from w = -log((1 - x)(1 + x))."""
    central = _polyval(_GILES_CENTRAL, w - 2.5)
    tail = _polyval(_GILES_TAIL, np.sqrt(np.maximum(w, 5.0)) - 3.0)
    return np.where(w < 5.0, central, tail)


def _erfcinv_positive(q):
    """The y >= 0 with erfc(y) = q, for 0 < q <= 1, by Newton steps on the scaled residual."""
    with np.errstate(all="ignore"):
        w = -np.log(q) - np.log(2.0 - q)  # (1 - x)(1 + x) with x = 1 - q, without cancelling
        log_q = np.log(q)
        # Giles' polynomial covers single precision (w < 16); further out, solve the leading
        # asymptotic form erfc(y) ~ exp(-y^2) / (y sqrt(pi)) (1 - 1/(2y^2)) by fixed point.
        far = np.sqrt(np.maximum(-log_q, 1.0))
        for _ in range(3):
            far = np.sqrt(-log_q - np.log(far * _SQRT_PI) + np.log1p(-0.5 / (far * far)))
        y = np.where(w < 16.0, _giles_guess(np.minimum(w, 16.0)) * (1.0 - q), far)
        for _ in range(4):
            # erfc(y) - q = exp(-y^2) (erfcx(y) - q exp(y^2)); dividing by the derivative
            # -2/sqrt(pi) exp(-y^2) leaves a step free of underflow.
            scaled = np.where(y > 0.5, _erfcx_positive(np.maximum(y, 0.5)),
                              np.exp(y * y) * (1.0 - _erf_small(np.minimum(y, 0.5))))
            y = y + (scaled - np.exp(log_q + y * y)) * (_SQRT_PI / 2.0)
    return y


def _erfinv(x):
    """The inverse of erf on [-1, 1]: +-inf at +-1, nan outside."""
    x = _f64(x)
    ax = np.abs(x)
    with np.errstate(all="ignore"):
        # Near zero Newton works on erf itself; beyond |x| = 0.5 on erfc, where 1 - |x| is
        # exact and keeps the tail's relative accuracy.
        y = _giles_guess(-np.log1p(-ax * ax)) * x
        for _ in range(2):
            y = y - (_erf(y) - x) * (_SQRT_PI / 2.0) * np.exp(y * y)
        tail = np.copysign(_erfcinv_positive(np.where(ax > 0.5, 1.0 - ax, 0.5)), x)
    result = np.where(ax <= 0.5, y, tail)
    result = np.where(ax == 1.0, np.copysign(np.inf, x), result)
    return np.where((ax > 1.0) | np.isnan(x), np.nan, result)


def _ndtri(p):
    """The inverse of the standard normal CDF: -inf at 0, inf at 1, nan outside [0, 1]."""
    p = _f64(p)
    # ndtri(p) = -sqrt(2) erfcinv(2p); for p > 1/2 use the exact complement 1 - p.
    lower = p < 0.5
    q = np.where(lower, p, 1.0 - p)
    with np.errstate(all="ignore"):
        magnitude = math.sqrt(2.0) * _erfcinv_positive(np.where(q > 0, 2.0 * q, 1.0))
    result = np.where(lower, -magnitude, magnitude)
    result = np.where(p == 0.0, -np.inf, np.where(p == 1.0, np.inf, result))
    return np.where((p < 0) | (p > 1) | np.isnan(p), np.nan, result)


def _log_ndtr(x):
    """log of the standard normal CDF, accurate far into the lower tail."""
    x = _f64(x)
    t = x / math.sqrt(2.0)
    with np.errstate(all="ignore"):
        # Lower tail: log(erfc(-t)/2) = log(erfcx(-t)/2) - t^2 never underflows.
        lower = np.log(_erfcx(-t) / 2.0) - t * t
        upper = np.log1p(-_erfc(t) / 2.0)
    return np.where(x < -1.0, lower, upper)


# --- gamma family -----------------------------------------------------------------------------

_STIRLING = (1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188, -691.0 / 360360,
             1.0 / 156)  # B_2k / (2k (2k - 1)), the coefficients of x^(1 - 2k)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SHIFT_TO = 10.0  # recurrences push arguments up to here, where the asymptotic series is exact


def _sinpi(x):
    """sin(pi x), exact at integers and accurate for large x (the reduction is exact)."""
    r = x - 2.0 * np.round(x / 2.0)  # in [-1, 1]
    return np.sin(np.pi * r)


def _stirling_lgamma(y):
    """lgamma(y) for y >= 10."""
    z = 1.0 / (y * y)
    series = np.zeros_like(y)
    for c in reversed(_STIRLING):
        series = series * z + c
    return (y - 0.5) * np.log(y) - y + _HALF_LOG_2PI + series / y


def _hurwitz_zeta(s, q):
    """zeta(s, q) = sum over k >= 0 of (q + k)^-s, for an integer s >= 2 and any real q.

    For q < 0 the first m = ceil(-q) terms are (-1)^s (a + j)^-s with a = 1 - (q + m) in
    (0, 1], so their sum is (-1)^s (zeta(s, a) - zeta(s, a + m)): every zeta evaluated below
    has a positive argument, and the cost does not grow with |q|.
    """
    negative = q < 0
    with np.errstate(all="ignore"):
        m = np.where(negative, np.ceil(-q), 0.0)
        a = np.where(negative, -q - (m - 1.0), 1.0)  # 1 - (q + m), without rounding
        head = (-1.0) ** s * (_hurwitz_zeta_positive(s, a) - _hurwitz_zeta_positive(s, a + m))
        rest = _hurwitz_zeta_positive(s, np.where(negative, q + m, q))
    return np.where(negative, head + rest, rest)


def _hurwitz_zeta_positive(s, q):
    """zeta(s, q) for q >= 0."""
    with np.errstate(all="ignore"):
        # Sum the first terms directly until q + k >= 10, then add the Euler-Maclaurin tail.
        finite_q = np.where(np.isfinite(q), q, _SHIFT_TO)
        steps = np.maximum(np.ceil(_SHIFT_TO - finite_q), 0.0)
        total = np.zeros_like(q)
        for k in range(int(_SHIFT_TO)):
            total = total + np.where(k < steps, (q + k) ** -s, 0.0)
        w = q + steps
        total = total + w ** (1.0 - s) / (s - 1.0) + 0.5 * w ** -s
        # Bernoulli terms: B_2j / (2j)! * s (s+1) ... (s+2j-2) * w^(-s-2j+1).
        rising = float(s)
        power = w ** (-s - 1.0)
        for j, b2j in enumerate(_BERNOULLI, start=1):
            total = total + b2j / math.factorial(2 * j) * rising * power
            rising *= (s + 2 * j - 1) * (s + 2 * j)
            power = power / (w * w)
    return total


_BERNOULLI = (1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
              -3617.0 / 510, 43867.0 / 798, -174611.0 / 330)  # B_2, B_4, ... B_20

# Riemann zeta(k) for k = 2..29: coefficients of lgamma's Taylor series around 1.
_ZETA = [float(_hurwitz_zeta(k, np.array(1.0))) for k in range(2, 60)]


def _lgamma_near_one(z):
    """lgamma(1 + z) for |z| <= 0.5: -gamma z + sum (-1)^k zeta(k) z^k / k."""
    series = np.zeros_like(z)
    for k in range(len(_ZETA) + 1, 1, -1):
        series = (series + (-1) ** k * _ZETA[k - 2] / k) * z
    return (series - _EULER_GAMMA) * z


def _lgamma_positive(x):
    """lgamma(x) for x >= 0.5 (and finite)."""
    steps = np.maximum(np.ceil(_SHIFT_TO - x), 0.0)
    product = np.ones_like(x)
    for k in range(int(_SHIFT_TO)):
        product = product * np.where(k < steps, x + k, 1.0)
    shifted = _stirling_lgamma(x + steps) - np.log(product)
    # Around the zeros at 1 and 2 the Taylor series keeps the relative accuracy that the
    # difference of two large logarithms above would lose.
    near_one = _lgamma_near_one(np.clip(x - 1.0, -0.5, 0.5))
    near_two = np.log1p(np.clip(x - 2.0, -0.5, 0.5)) + \
        _lgamma_near_one(np.clip(x - 2.0, -0.5, 0.5))
    return np.where(np.abs(x - 1.0) <= 0.5, near_one,
                    np.where(np.abs(x - 2.0) <= 0.5, near_two, shifted))


def _lgamma(x):
    """log |Gamma(x)|: +inf at the poles (0, -1, -2, ...) and at +-inf."""
    x = _f64(x)
    with np.errstate(all="ignore"):
        finite = np.isfinite(x)
        reflect = x < 0.5
        # Small positive x: lgamma(x) = lgamma(1 + x) - log(x) keeps full accuracy.
        positive = _lgamma_positive(np.where(finite, np.where(reflect, 1.0 - x, x), 1.0))
        tiny = _lgamma_positive(np.where((x > 0) & reflect, 1.0 + x, 1.0)) - np.log(np.abs(x))
        # Reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x).
        reflected = math.log(math.pi) - np.log(np.abs(_sinpi(x))) - positive
        result = np.where(reflect, np.where(x > 0, tiny, reflected), positive)
        pole = (x <= 0) & (x == np.floor(x))
    # + 0.0: the series gives -0.0 at x = 1 and 2, where PyTorch returns +0.0.
    return np.where(pole | np.isinf(x), np.inf, np.where(np.isnan(x), x, result + 0.0))


def _digamma_positive(x):
    """digamma(x) for x > 0: recurrence up to x >= 10, then the asymptotic series."""
    steps = np.maximum(np.ceil(_SHIFT_TO - x), 0.0)
    correction = np.zeros_like(x)
    for k in range(int(_SHIFT_TO) + 1):
        correction = correction + np.where(k < steps, 1.0 / (x + k), 0.0)
    y = x + steps
    z = 1.0 / (y * y)
    series = np.zeros_like(y)
    for b2k, k in zip(reversed(_BERNOULLI[:8]), range(8, 0, -1)):
        series = (series + b2k / (2 * k)) * z
    return np.log(y) - 0.5 / y - series - correction


def _digamma(x):
    """The logarithmic derivative of Gamma: -inf at +0, +inf at -0, nan at negative integers."""
    x = _f64(x)
    with np.errstate(all="ignore"):
        positive = _digamma_positive(np.where(x > 0, x, 1.0 - np.where(np.isfinite(x), x, 0.0)))
        # Reflection psi(x) = psi(1 - x) - pi / tan(pi x), with the fractional part of x
        # (tan(pi r) is exact at the integers and accurate for large x).
        fraction = x - np.trunc(x)
        reflected = positive - np.pi / np.tan(np.pi * fraction)
        result = np.where(x > 0, positive, reflected)
        result = np.where(x == 0, np.copysign(np.inf, -x), result)
        negative_integer = (x < 0) & (x == np.trunc(x))
    return np.where(negative_integer | np.isnan(x), np.nan,
                    np.where(x == np.inf, np.inf, result))


def _trigamma(x):
    """polygamma(1, x), with PyTorch's reflection for x < 1/2 (finite even at the poles)."""
    with np.errstate(all="ignore"):
        reflect = x < 0.5
        # PyTorch forms (pi / sin(pi x))^2 directly: at the poles sin(pi x) is only rounded
        # to zero at x = 0, so -1, -2, ... give large finite values, as they do in PyTorch.
        # That term is formed in the input's own precision, as PyTorch does (in float32 the
        # rounded sin at -1, -2, ... is about 1e-7, not 1e-16).
        pi = np.asarray(np.pi, dtype=x.dtype)
        sine = np.sin(pi * x)
        reflection = _f64((pi * pi) / (sine * sine))
        x = _f64(x)
        y = np.where(reflect, 1.0 - x, x)
        y = np.where(np.isnan(y), 1.0, y)
        steps = np.maximum(np.ceil(_SHIFT_TO - np.where(np.isfinite(y), y, _SHIFT_TO)), 0.0)
        correction = np.zeros_like(y)
        for k in range(int(_SHIFT_TO) + 1):
            correction = correction + np.where(k < steps, 1.0 / (y + k) ** 2, 0.0)
        w = y + steps
        z = 1.0 / (w * w)
        series = np.zeros_like(w)
        for b2k in reversed(_BERNOULLI[:8]):
            series = (series + b2k) * z
        value = correction + (1.0 + 0.5 / w + series) / w
        value = np.where(w == np.inf, 0.0, value)
        result = np.where(reflect, reflection - value, value)
    return np.where(np.isnan(x), x, result)


def _polygamma(x, n=0):
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x) for n >= 1."""
    original, x = x, _f64(x)
    if n == 0:
        return _digamma(x)
    if n == 1:
        return _trigamma(original)
    with np.errstate(all="ignore"):
        zeta = _hurwitz_zeta(n + 1, np.where(np.isfinite(x), x, 1.0))
        # Hurwitz zeta's own domain rules: +inf at q = 0, -1, ...; nan at q = +inf.
        zeta = np.where((x <= 0) & (x == np.floor(x)), np.inf, zeta)
        zeta = np.where((x == np.inf) | np.isnan(x), np.nan, zeta)
        factorial = np.exp(np.float64(math.lgamma(n + 1.0)))
        return (1.0 if n % 2 else -1.0) * factorial * zeta


def _mvlgamma(x, p=1):
    """The multivariate log-gamma: sum over j < p of lgamma(x - j/2), plus p(p-1)/4 log(pi)."""
    x = _f64(x)
    total = np.zeros_like(x)
    for j in range(p):
        total = total + _lgamma(x - j / 2.0)
    return total + p * (p - 1) / 4.0 * math.log(math.pi)


def _check_mvlgamma(common, params, operands, inplace):
    p = params.get("p", 1)
    if common is D.bool:
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    # PyTorch 2.x no longer rejects elements <= (p-1)/2: they give lgamma's poles (inf).


def _check_polygamma(common, params, operands, inplace):
    if params.get("n", 0) < 0:
        raise RuntimeError("_polygamma(n, x) does not support negative n.")


# --- Bessel functions I0, I1 ------------------------------------------------------------------

_BESSEL_SWITCH = 25.0  # power series below, Hankel's asymptotic series above
_POWER_TERMS = 60
_HANKEL_TERMS = 30


def _bessel_power_series(x, order):
    """I_order(x) by its power series sum (x/2)^(2k + order) / (k! (k + order)!)."""
    quarter_square = x * x / 4.0
    term = np.ones_like(x) if order == 0 else x / 2.0
    total = term
    for k in range(1, _POWER_TERMS):
        term = term * quarter_square / (k * (k + order))
        total = total + term
    return total


def _bessel_hankel_scaled(ax, order):
    """sqrt(x) exp(-x) I_order(x) for large x: sum of a_k (8x)^-k over sqrt(2 pi)."""
    mu = 4.0 * order * order
    term = np.ones_like(ax)
    total = term
    for k in range(1, _HANKEL_TERMS):
        term = term * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * ax)
        total = total + term
    return total / math.sqrt(2.0 * math.pi)


def _bessel(x, order, scaled):
    x = _f64(x)
    ax = np.abs(x)
    with np.errstate(all="ignore"):
        small = _bessel_power_series(np.where(ax <= _BESSEL_SWITCH, ax, 0.0), order)
        if scaled:
            small = small * np.exp(-ax)
        hankel = _bessel_hankel_scaled(np.where(ax > _BESSEL_SWITCH, ax, 2 * _BESSEL_SWITCH),
                                       order)
        # PyTorch multiplies exp(x) in before dividing by sqrt(x): inf at x = inf is nan.
        large = hankel / np.sqrt(ax) if scaled else np.exp(ax) * hankel / np.sqrt(ax)
        result = np.where(ax <= _BESSEL_SWITCH, small, large)
    if order == 1:
        result = np.where(x < 0, -result, result)  # I1 is odd (and i1(-0.0) is +0.0)
    return np.where(np.isnan(x), x, result)


def _i0(x):
    """The modified Bessel function of the first kind, order 0."""
    return _bessel(x, 0, scaled=False)


def _i0e(x):
    """exp(-|x|) i0(x)."""
    return _bessel(x, 0, scaled=True)


def _i1(x):
    """The modified Bessel function of the first kind, order 1."""
    return _bessel(x, 1, scaled=False)


def _i1e(x):
    """exp(-|x|) i1(x)."""
    return _bessel(x, 1, scaled=True)


# --- elementary compositions ------------------------------------------------------------------

def _sinc(x):
    """sin(pi x) / (pi x), and 1 at 0 (computed in the op's own precision, as PyTorch does)."""
    product = np.asarray(np.pi, dtype=x.dtype) * x
    with np.errstate(all="ignore"):
        value = np.sin(product) / product
    return np.where(x == 0, np.ones_like(value), value)


def _xlog1py(x, y):
    """x * log1p(y), taken as 0 where x == 0 (unless y is nan)."""
    with np.errstate(all="ignore"):
        value = x * np.log1p(y)
    return np.where((x == 0) & ~np.isnan(y), np.zeros_like(value), value)


def _entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf for x < 0."""
    with np.errstate(all="ignore"):
        value = -x * np.log(x)
    value = np.where(x == 0, np.zeros_like(value), value)
    return np.where(x < 0, np.full_like(value, -np.inf), value)


# --- declarations -----------------------------------------------------------------------------

def _declare(name, fn, dtypes=REAL, **kw):
    return declare(name, fn, promotion=Promotion.INT_TO_FLOAT, dtypes=dtypes, **kw)


ERF = _declare("erf", _erf)
ERFC = _declare("erfc", _erfc)
ERFINV = _declare("erfinv", _erfinv)
LGAMMA = _declare("lgamma", _lgamma)
DIGAMMA = _declare("digamma", _digamma)
POLYGAMMA = _declare("polygamma", _polygamma, params={"n": 0}, check=_check_polygamma)
MVLGAMMA = _declare("mvlgamma", _mvlgamma, params={"p": 1}, check=_check_mvlgamma)
I0 = _declare("i0", _i0)
SINC = _declare("sinc", _sinc, dtypes=set(D.ALL_DTYPES))
SPECIAL_I0E = _declare("special_i0e", _i0e)
SPECIAL_I1 = _declare("special_i1", _i1)
SPECIAL_I1E = _declare("special_i1e", _i1e)
SPECIAL_ERFCX = _declare("special_erfcx", _erfcx, dtypes=REAL_NO_HALF)
SPECIAL_NDTRI = _declare("special_ndtri", _ndtri, dtypes=REAL_NO_HALF)
SPECIAL_LOG_NDTR = _declare("special_log_ndtr", _log_ndtr, dtypes=REAL_NO_HALF)
SPECIAL_ENTR = _declare("special_entr", _entr)
SPECIAL_XLOG1PY = _declare("special_xlog1py", _xlog1py)

erf = V.functional(ERF, arity=1)
erfc = V.functional(ERFC, arity=1)
erfinv = V.functional(ERFINV, arity=1)
lgamma = V.functional(LGAMMA, arity=1)
digamma = V.functional(DIGAMMA, arity=1)
i0 = V.functional(I0, arity=1)
sinc = V.functional(SINC, arity=1)


def _check_order(n, name):
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"{name}(): argument 'n' must be int, not {type(n).__name__}")
    return n


def polygamma(n, input, *, out=None):
    """The n-th derivative of the digamma function."""
    _check_order(n, "polygamma")
    return apply(POLYGAMMA, (V._self_tensor(POLYGAMMA, input),), out=out, params={"n": n})


def mvlgamma(input, p, *, out=None):
    """The multivariate log-gamma function of dimension p."""
    _check_order(p, "mvlgamma")
    return apply(MVLGAMMA, (V._self_tensor(MVLGAMMA, input),), out=out, params={"p": p})


__all__ = ["erf", "erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "sinc"]

# --- Tensor methods ---------------------------------------------------------------------------

for _name, _op in (("erf", ERF), ("erfc", ERFC), ("erfinv", ERFINV), ("lgamma", LGAMMA),
                   ("digamma", DIGAMMA), ("i0", I0), ("sinc", SINC)):
    setattr(Tensor, _name, V.method(_op, arity=1))
    setattr(Tensor, _name + "_", V.inplace(_op, arity=1))


def _polygamma_method(self, n):
    return apply(POLYGAMMA, (self,), params={"n": _check_order(n, "polygamma")})


def _polygamma_inplace(self, n):
    return apply(POLYGAMMA, (self,), out=self, inplace=True,
                 params={"n": _check_order(n, "polygamma")})


def _mvlgamma_method(self, p):
    return apply(MVLGAMMA, (self,), params={"p": _check_order(p, "mvlgamma")})


def _mvlgamma_inplace(self, p):
    return apply(MVLGAMMA, (self,), out=self, inplace=True,
                 params={"p": _check_order(p, "mvlgamma")})


_polygamma_method.__name__, _polygamma_inplace.__name__ = "polygamma", "polygamma_"
_mvlgamma_method.__name__, _mvlgamma_inplace.__name__ = "mvlgamma", "mvlgamma_"
Tensor.polygamma, Tensor.polygamma_ = _polygamma_method, _polygamma_inplace
Tensor.mvlgamma, Tensor.mvlgamma_ = _mvlgamma_method, _mvlgamma_inplace

# torch.special functions without a torch.<name> twin (see reftorch/special.py).
special_i0e = V.functional(SPECIAL_I0E, arity=1)
special_i1 = V.functional(SPECIAL_I1, arity=1)
special_i1e = V.functional(SPECIAL_I1E, arity=1)
special_erfcx = V.functional(SPECIAL_ERFCX, arity=1)
special_ndtri = V.functional(SPECIAL_NDTRI, arity=1)
special_log_ndtr = V.functional(SPECIAL_LOG_NDTR, arity=1)
special_entr = V.functional(SPECIAL_ENTR, arity=1)
special_xlog1py = V.functional(SPECIAL_XLOG1PY, scalar_self=True)
