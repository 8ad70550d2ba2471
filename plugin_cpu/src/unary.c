/* reftorch_cpu._unary: strided elementwise math, activations, where, clamp, addcmul, addcdiv,
 * lerp and dtype casts.
 *
 * Entry points (called from reftorch_cpu/unary.py, which builds the loop geometry):
 *
 *   elementwise(op, shape, out, out_offset, out_strides,
 *               [x, x_offset, x_strides] * n_inputs(op), p0, p1)
 *       out = op(inputs...) for float32 ('f') or float64 ('d') buffers; `where`'s condition
 *       is a bool ('?') buffer. p0, p1 are the op's number parameters (leaky_relu's slope,
 *       threshold_backward's threshold, addcmul's and addcdiv's value). The backward ops take
 *       (grad_output, y or x); addcmul/addcdiv (input, tensor1, tensor2), lerp (input, end,
 *       weight).
 *   cast(shape, out, out_type, out_offset, out_strides, src, src_type, src_offset, src_strides)
 *       out = src converted between float32, float64, int64, int32 and bool, and float16,
 *       bfloat16 (passed as uint16 bits) and uint8 to and from some of them (T_* codes; the
 *       pairs are in CASTS).
 *
 * Every operand is a contiguous buffer (a CPU storage's 1-D NumPy array), the element offset
 * of the view's element 0 and one stride per dim in elements (0 for a broadcast dim, negative
 * allowed). Every argument is checked before memory is touched (dims, sizes, offsets, buffer
 * element types, and that every visited element lies in its buffer, via common.h).
 *
 * Accuracy against the NumPy reference (float32 and float64):
 *   bit-exact: neg, abs, relu, leaky_relu, sqrt, rsqrt, clamp, clamp_min, clamp_max, where,
 *     addcmul, addcdiv, lerp, casts, and the backward ops tanh_backward, sigmoid_backward,
 *     threshold_backward (relu's gradient). These are the reference's own IEEE operations,
 *     done in the same order.
 *     Also square (x * x) and reciprocal (1 / x), which serve pow's exponents 2 and -1:
 *     NumPy's power gives exactly these (checked over every float32 and 2^27 float64).
 *   within a few ulp: exp, log, tanh, erf and what is built on them. NumPy's SIMD exp/log/tanh
 *     are their own approximations (its float32 exp is up to 2 ulp from the correctly rounded
 *     value, log up to 3), which cannot be reproduced without copying them. Ours are written
 *     here. float64 exp and log: Cody-Waite range reduction (x = n ln2 + r, |r| <= ln2/2,
 *     ln2 split so n * ln2_hi is exact) and a polynomial in r, in float64 (about 1-2 ulp).
 *     float32 exp, log, tanh and erf are float32 arithmetic with fused multiply-adds (16
 *     lanes per AVX-512 vector; see "float32 exp, log, tanh and erf" below): exp within 1
 *     ulp of the true value; log, tanh and erf faithfully rounded, at most 1 ulp from the
 *     correctly rounded value over every float32 input (checked exhaustively). sigmoid, silu, gelu(approximate='tanh') and the gelu /
 *     silu backward ops follow the reference's formula operation by operation with only
 *     exp/erf/tanh replaced. float32 gelu(approximate='none') is 0.5 x (1 + erf(x / sqrt2))
 *     in float32 with 1 + erf taken from erfc (no cancellation for x < 0): at most 2 ulp
 *     from the correctly rounded gelu for x > 0, an absolute error of at most 0.51 eps |x|
 *     for x < 0 (checked on every 7th float32); float64 gelu uses the reference's erf
 *     (Cody's rational approximations, the same operations in the same order) with our exp.
 *   Measured maximum distances from the reference (1M-4M values over the whole range, incl.
 *     inf/nan/subnormal):
 *     float32  exp 3, log 4, tanh 2, erf 1, sigmoid 4, silu 4 ulp (exp: ours within 1 ulp of
 *              the correctly rounded value, NumPy's within 2, on opposite sides at worst)
 *     float64  exp 1, log 2, tanh 3, erf 2, sigmoid 3, silu 4 ulp
 *   gelu's formulas cancel where 1 + erf(x/sqrt2) or 1 + tanh(..) is near 0 (x < -3): the
 *   reference's own result has an absolute error of about |x| eps there, which a change in
 *   the last bit of erf/tanh moves; the tests bound gelu by that. Likewise the gelu and silu
 *   backward ops cancel where the derivative crosses 0: bounded by 4 ulp or an absolute
 *   2 eps |g| (1 + x^2) (measured: at most 1.5). (The reference's erf also gives nan for
 *   float64 |x| > 1.6e307, where trunc(16 y) overflows; we give PyTorch's x.)
 *   spec_tests/test_plugin_cpu_unary.py checks all of these bounds.
 * FMA is used only in the float32 exp/log/tanh/erf/gelu functions, through explicit fmaf() calls
 * (and their vector twins in the AVX-512F exp rows; the build's -ffp-contract=off fuses
 * nothing else): the AVX2 clone is built with FMA (a CPU with AVX2 but no FMA runs the
 * baseline clone), and the baseline clone's fmaf() is the C library's, which rounds
 * identically, so every instruction-set clone gives the same bits; the loop runs
 * elementwise, so results never depend on the thread count.
 */
/* The math loops below have conversions (double <-> int, double -> float) on lanes whose
 * result a later select throws away (nan and out-of-range inputs). With the default
 * -ftrapping-math GCC will not execute those speculatively, so it builds a branch and the
 * loop does not vectorize. No value changes: this only lets floating-point exception flags
 * be raised, which nothing reads (NumPy's reference ignores them too). */
#pragma GCC optimize("no-trapping-math")

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define X86_INTRINSICS 1
#define AVX512F_ATTR __attribute__((target("avx512f")))
#endif

/* Loops over fewer elements than these run on one thread (starting a parallel region costs
 * a few microseconds, more on a machine whose cores are busy). Cheap ops move memory only:
 * 128 KiB of float32 output, as in kernels.c. The math ops spend 1-10 ns an element, so
 * splitting pays off sooner: from 8 Ki elements a thread (2 threads, 2-core x86-64). */
#define PARALLEL_MIN_CHEAP 32768
#define PARALLEL_MIN_MATH 16384
enum {
    OP_NEG, OP_ABS, OP_RELU, OP_SQRT, OP_RSQRT, OP_LEAKY_RELU, OP_SQUARE, /* cheap unary */
    OP_RECIPROCAL,
    OP_EXP, OP_LOG, OP_TANH, OP_SIGMOID, OP_SILU, OP_GELU, OP_GELU_TANH, OP_ERF, /* math */
    OP_CLAMP_MIN, OP_CLAMP_MAX, /* binary */
    /* backward ops (grad_output, then output or self): cheap, then math */
    OP_TANH_BACKWARD, OP_SIGMOID_BACKWARD, OP_THRESHOLD_BACKWARD,
    OP_GELU_BACKWARD, OP_GELU_TANH_BACKWARD, OP_SILU_BACKWARD,
    OP_CLAMP, OP_WHERE,         /* ternary */
    OP_ADDCMUL, OP_ADDCDIV, OP_LERP, /* ternary arithmetic (p0: addcmul/addcdiv's value) */
    N_OPS
};
static const int N_INPUTS[N_OPS] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                    2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3};
/* ops that spend nanoseconds an element (exp, erf, tanh inside): parallel sooner */
static const char IS_MATH[N_OPS] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                    0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0};

/* Element types (the math runs on the first two; casts take all). bfloat16 buffers are passed
 * as their uint16 bits (NumPy exports no buffer format for ml_dtypes' bfloat16). */
enum { T_F32, T_F64, T_I64, T_I32, T_BOOL, T_F16, T_BF16, T_U8, N_TYPES };
static const char *const TYPE_NAMES[N_TYPES] = {"float32", "float64", "int64", "int32", "bool",
                                                "float16", "bfloat16", "uint8"};

#define MAX_OPERANDS 4

/* One run of n elements along the innermost dim: p[0] the output, p[1..] the inputs;
 * s[k] the strides in elements; prm the op's number parameters. */
typedef void (*row_fn)(ptrdiff_t n, char *const *p, const ptrdiff_t *s, const double *prm);

#define AI static inline __attribute__((always_inline))

/* ==== the math (double precision cores, branch-free so loops vectorize) ================== */

static const double LOG2E = 1.4426950408889634;
static const double LN2 = 0.6931471805599453;
/* ln2 split so that n * LN2_HI is exact for |n| < 2^11 (its low 32 bits are zero) */
static const double LN2_HI = 0x1.62e42feep-1;
static const double LN2_LO = 0x1.a39ef35793c76p-33;
static const double SHIFTER = 0x1.8p52; /* adding it rounds to an integer (round to nearest) */

AI double from_bits(int64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

AI int64_t to_bits(double d)
{
    int64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

/* The clamp bounds and stand-in values the math below selects between. They reach the loop
 * through an empty asm, so the compiler cannot fold a whole computation for a constant
 * branch (exp(90) = inf) into a separate path: that path would be control flow, and the
 * loop would not vectorize. Rows build one of these before their loop. */
typedef struct {
    double exp32_hi, exp32_lo, exp64_hi, exp64_lo, tanh_cap, erf_cap, one, zero;
} limits_t;

AI double hide(double c)
{
    __asm__("" : "+x"(c));
    return c;
}

AI limits_t make_limits(void)
{
    limits_t k = {hide(90.0), hide(-110.0), hide(710.0), hide(-746.0), hide(20.0), hide(1e6),
                  hide(1.0), hide(0.0)};
    return k;
}

/* 2^k for an integer k in [-1022, 1023]. */
AI double pow2i(int32_t k) { return from_bits((int64_t)(k + 1023) << 52); }

/* x = n ln2 + r with |r| <= ln2/2 (plus rounding): n (as a double and int) and r. x must be
 * finite and |x| < 2^10 ln2 (callers clamp). */
AI double reduce_ln2(double x, int32_t *n_out, double *r_out)
{
    double n = (x * LOG2E + SHIFTER) - SHIFTER;
    *n_out = (int32_t)n;
    *r_out = (x - n * LN2_HI) - n * LN2_LO;
    return n;
}

/* exp(r) - 1 - r for |r| <= 0.35: the Taylor terms r^2/2! .. r^d/d!, written out (loops of
 * constant length are not always unrolled before vectorization). Degree 13 truncates below
 * 2^-57 relative to exp(r) (float64 work), degree 9 below 2^-37 (float32 work). */
#define INV_FACT_2 (1.0 / 2)
#define INV_FACT_3 (1.0 / 6)
#define INV_FACT_4 (1.0 / 24)
#define INV_FACT_5 (1.0 / 120)
#define INV_FACT_6 (1.0 / 720)
#define INV_FACT_7 (1.0 / 5040)
#define INV_FACT_8 (1.0 / 40320)
#define INV_FACT_9 (1.0 / 362880)
#define INV_FACT_10 (1.0 / 3628800)
#define INV_FACT_11 (1.0 / 39916800)
#define INV_FACT_12 (1.0 / 479001600)
#define INV_FACT_13 (1.0 / 6227020800.0)

AI double expm1_tail(double r, int degree)
{
    double q;
    if (degree > 9) {
        q = INV_FACT_13;
        q = q * r + INV_FACT_12;
        q = q * r + INV_FACT_11;
        q = q * r + INV_FACT_10;
        q = q * r + INV_FACT_9;
    } else {
        q = INV_FACT_9;
    }
    q = q * r + INV_FACT_8;
    q = q * r + INV_FACT_7;
    q = q * r + INV_FACT_6;
    q = q * r + INV_FACT_5;
    q = q * r + INV_FACT_4;
    q = q * r + INV_FACT_3;
    q = q * r + INV_FACT_2;
    return r * r * q;
}

/* exp(x) for x clamped to [-746, 710] by the caller (not nan): 2^n exp(r), the power of two
 * applied in two halves so subnormal results come out right. */
AI double exp_core(double x, int degree)
{
    int32_t n;
    double r;
    reduce_ln2(x, &n, &r);
    double p = 1.0 + (r + expm1_tail(r, degree));
    int32_t n1 = n >> 1;
    return p * pow2i(n1) * pow2i(n - n1);
}

/* exp(y) - 1 for y in [0, 45] (tanh's argument): 2^n expm1(r) + (2^n - 1), both exact
 * scalings, so small y keep full relative accuracy. */
AI double expm1_core(double y, int degree)
{
    int32_t n;
    double r;
    reduce_ln2(y, &n, &r);
    double q = r + expm1_tail(r, degree);
    double scale = pow2i(n);
    return scale * q + (scale - 1.0);
}

/* log(x) for a positive, finite, normal double x: x = 2^e (1 + f), sqrt(1/2) <= 1 + f <
 * sqrt(2); log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)) with s = f / (2 + f) and R the atanh
 * series 2 s^2/3 + 2 s^4/5 + ... (`terms` of them: 11 for float64, 6 for float32 work). */
AI double log_core(double x, int terms)
{
    int64_t bits = to_bits(x);
    int32_t e = (int32_t)(bits >> 52) - 1023;
    double m = from_bits((bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL);
    int big = m > 1.4142135623730951;
    m = big ? m * 0.5 : m;
    e = big ? e + 1 : e;
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double R;
    if (terms > 6) {
        R = 2.0 / 23;
        R = R * z + 2.0 / 21;
        R = R * z + 2.0 / 19;
        R = R * z + 2.0 / 17;
        R = R * z + 2.0 / 15;
        R = R * z + 2.0 / 13;
    } else {
        R = 2.0 / 13;
    }
    R = R * z + 2.0 / 11;
    R = R * z + 2.0 / 9;
    R = R * z + 2.0 / 7;
    R = R * z + 2.0 / 5;
    R = R * z + 2.0 / 3;
    R = R * z;
    double hfsq = 0.5 * f * f;
    double ed = (double)e;
    return ed * LN2_HI + ((f - hfsq + s * (hfsq + R)) + ed * LN2_LO);
}

/* tanh(x) = sign(x) expm1(2|x|) / (expm1(2|x|) + 2); |x| >= 20 gives +-1 in both dtypes. */
AI double tanh_core(double x, int degree, const limits_t *K)
{
    double ax = fabs(x);
    ax = ax > K->tanh_cap ? K->tanh_cap : ax; /* nan stays nan */
    double safe = ax == ax ? ax : K->zero;
    double em1 = expm1_core(2.0 * safe, degree);
    double t = em1 / (em1 + 2.0);
    t = copysign(t, x);
    return x != x ? x : t;
}

/* --- float32 ops ------------------------------------------------------------------------ */

AI float pow2i_f32(int32_t k) /* 2^k for k in [-126, 127] */
{
    int32_t b = (k + 127) << 23;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* --- float32 exp, log, tanh and erf with fused multiply-adds --------------------------------
 *
 * float32 exp (and the sigmoid and silu built on it) is exp_fma_f32 below: within 1 ulp of
 * the correctly rounded value, and 20-25% faster than the Taylor polynomial in separate
 * multiplies and adds it replaced (4M float32 values, 1 and 2 threads).
 * These are the one place the file uses fused multiply-adds, through explicit fmaf() calls
 * (the build's -ffp-contract=off never fuses anything else). The AVX2 (built with FMA) and
 * AVX-512F clones make them vfmadd instructions; the baseline clone calls the C library's
 * fmaf, which rounds the same way (slowly: only CPUs without AVX2 run it), so every clone
 * gives the same bits. Polynomial coefficients are our own near-minimax fits (Lawson's
 * weighted least squares against 40-digit values), rounded to float32. Accuracy, checked
 * exhaustively over every float32 input against the correctly rounded value (libm's double
 * result rounded): log, tanh and erf at most 1 ulp (faithfully rounded; 99.4%, 99.8% and
 * 99.3% of inputs exact). gelu (from one_plus_erf_f32) on every 7th float32: at most 2 ulp for x > 0, an
 * absolute error of at most 0.51 eps |x| for x < 0. */

/* exp(y) = 2^n e^r, y = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, n * part exact in the
 * fma), e^r = 1 + r + r^2 Q(r) with Q a degree-4 fit (relative error 3.3e-9 on the range).
 * No clamping: y must lie in [-87, 88] (tanh's and erf's callers guarantee it). */
#define FMA_SHIFTER 0x1.8p23f /* adding it rounds to an integer kept in the low bits */
/* its constants, shared with the AVX-512F twin vexp_f32x16 */
#define EXPM_LOG2E 0x1.715476p0f
#define EXPM_LN2_UP 0x1.62e430p-1f    /* ln2 rounded up to float ... */
#define EXPM_LN2_OVER 0x1.05c610p-29f /* ... and what that overshoots */
#define EXPM_Q4 0x1.6a1a5ep-10f       /* Q(r) = Q0 + Q1 r + ... + Q4 r^4 */
#define EXPM_Q3 0x1.123fd2p-7f
#define EXPM_Q2 0x1.555916p-5f
#define EXPM_Q1 0x1.55548ap-3f
#define EXPM_Q0 0x1.fffffcp-2f

AI float expm_core_f32(float y, float *n_out, int32_t *ni_out)
{
    const float t = fmaf(y, EXPM_LOG2E, FMA_SHIFTER); /* y / ln2 + shifter */
    const float n = t - FMA_SHIFTER;
    int32_t tb;
    memcpy(&tb, &t, sizeof tb);
    *ni_out = tb - 0x4b400000; /* the integer n, from the shifter's low bits */
    *n_out = n;
    float r = fmaf(n, -EXPM_LN2_UP, y);
    r = fmaf(n, EXPM_LN2_OVER, r);
    float q = EXPM_Q4;
    q = fmaf(q, r, EXPM_Q3);
    q = fmaf(q, r, EXPM_Q2);
    q = fmaf(q, r, EXPM_Q1);
    q = fmaf(q, r, EXPM_Q0);
    return fmaf(q, r * r, r) + 1.0f; /* e^r */
}

AI float exp_fma_small_f32(float y)
{
    float n;
    int32_t ni;
    const float p = expm_core_f32(y, &n, &ni);
    return p * pow2i_f32(ni);
}

/* exp(x) over the whole float32 range (nan stays nan; clamped to [-110, 90] like exp_f32,
 * 2^n applied in two halves so subnormal results are rounded once). Within 1 ulp. */
AI float exp_fma_f32(float x, const limits_t *K)
{
    float c = x > (float)K->exp32_hi ? (float)K->exp32_hi : x;
    c = c < (float)K->exp32_lo ? (float)K->exp32_lo : c;
    const float d = c == c ? c : (float)K->zero;
    float n;
    int32_t ni;
    const float p = expm_core_f32(d, &n, &ni);
    const int32_t n1 = ni >> 1;
    return p * pow2i_f32(n1) * pow2i_f32(ni - n1) + (c - c); /* + nan for a nan x */
}

/* tanh: for |x| < 0.55 the odd polynomial x + x^3 P(x^2) (P a degree-4 fit, relative error
 * 1e-9); above, 1 - 2 / (exp(2|x|) + 1), which cancels less than a bit there (tanh(0.55) =
 * 0.5); |x| is capped at 9.125, past which tanh rounds to 1 in float32. */
AI float tanh_f32(float x, const limits_t *K)
{
    (void)K;
    const float ax = fabsf(x);
    const float s = ax * ax;
    float q = -0x1.9b3048p-8f;
    q = fmaf(q, s, 0x1.593d08p-6f);
    q = fmaf(q, s, -0x1.b9287ap-5f);
    q = fmaf(q, s, 0x1.110d26p-3f);
    q = fmaf(q, s, -0x1.55554ap-2f);
    const float small = fmaf(q, s * ax, ax);
    const float capped = ax < 9.125f ? ax : 9.125f; /* nan: 9.125 (replaced below) */
    const float e = exp_fma_small_f32(2.0f * capped);
    const float big = 1.0f - 2.0f / (e + 1.0f);
    const float t = ax >= 0.55f ? big : small; /* nan: small, which is nan */
    return copysignf(t, x);
}

/* log: x = 2^e m with m in [sqrt(1/2), sqrt(2)) (subnormal x scaled by 2^23 first), found
 * from the bits: subtracting sqrt(1/2)'s bits carries into the exponent field exactly when
 * m must be halved. With f = m - 1 (exact), log(m) = log1p(f) = f + f^2 Q(f), Q a degree-8
 * fit (the error it leaves is under 5.7e-9 of log1p(f) on the range); then e ln2 is added in
 * two fused steps (ln2 as EXPM_LN2_UP - EXPM_LN2_OVER). No division: the atanh-series form it
 * replaced (s = f / (2 + f)) spent a third of its time in the divide. */
AI float log_f32(float x, const limits_t *K)
{
    float safe = (x > 0.0f && x < INFINITY) ? x : (float)K->one;
    const int tiny = safe < 0x1p-126f;
    safe = tiny ? safe * 0x1p23f : safe;
    int32_t bits;
    memcpy(&bits, &safe, sizeof bits);
    const int32_t e = (bits - 0x3f3504f3) >> 23; /* 0x3f3504f3: sqrt(1/2) rounded down */
    const int32_t mbits = bits - (int32_t)((uint32_t)e << 23);
    float m;
    memcpy(&m, &mbits, sizeof m);
    const float f = m - 1.0f;
    float q = -0x1.3c0874p-4f;
    q = fmaf(q, f, 0x1.096854p-3f);
    q = fmaf(q, f, -0x1.0efbb0p-3f);
    q = fmaf(q, f, 0x1.223f86p-3f);
    q = fmaf(q, f, -0x1.54288ap-3f);
    q = fmaf(q, f, 0x1.99a6a2p-3f);
    q = fmaf(q, f, -0x1.00042cp-2f);
    q = fmaf(q, f, 0x1.55554ap-2f);
    q = fmaf(q, f, -0x1.fffff8p-2f); /* -1/2 */
    const float log_m = fmaf(f * f, q, f);
    const float ef = (float)(tiny ? e - 23 : e);
    float y = fmaf(ef, EXPM_LN2_UP, fmaf(ef, -EXPM_LN2_OVER, log_m));
    y = x == 0.0f ? -INFINITY : y;
    y = x == INFINITY ? INFINITY : y;
    y = x < 0.0f ? NAN : y;
    return x != x ? x : y;
}

/* erf for |x| < 0.9: x + x Q(x^2), Q a degree-6 fit (relative error 3e-10) */
AI float erf_small_f32(float ax)
{
    const float s = ax * ax;
    float q = 0x1.651132p-14f;
    q = fmaf(q, s, -0x1.aca3b8p-11f);
    q = fmaf(q, s, 0x1.550a4ap-8f);
    q = fmaf(q, s, -0x1.b81524p-6f);
    q = fmaf(q, s, 0x1.ce2e54p-4f);
    q = fmaf(q, s, -0x1.812744p-2f);
    q = fmaf(q, s, 0x1.06eba8p-3f); /* 2/sqrt(pi) - 1 */
    return fmaf(q, ax, ax);
}

/* erfc(t) for t in [0.9, 4]: exp(P(t)), P a degree-8 fit of log(erfc(t)) (its error moves
 * erf by under 1e-9 relative, erfc by under 1e-7); erfc(4) = 1.5e-8 is below half an ulp
 * of 1, so past 4 erf is 1. */
AI float erfc_mid_f32(float t)
{
    float p = 0x1.6a9554p-20f;
    p = fmaf(p, t, -0x1.56bfdep-15f);
    p = fmaf(p, t, 0x1.23fa18p-11f);
    p = fmaf(p, t, -0x1.2cdb88p-8f);
    p = fmaf(p, t, 0x1.a9d404p-6f);
    p = fmaf(p, t, -0x1.c01cccp-4f);
    p = fmaf(p, t, -0x1.43d2fcp-1f);
    p = fmaf(p, t, -0x1.2140e6p+0f);
    p = fmaf(p, t, 0x1.014c7ap-12f);
    return exp_fma_small_f32(p);
}

AI float erf_f32(float x)
{
    const float ax = fabsf(x);
    const float small = erf_small_f32(ax);
    const float big = 1.0f - erfc_mid_f32(ax < 4.0f ? ax : 4.0f); /* nan: 4 (replaced) */
    const float r = ax < 0.9f ? small : big;
    return copysignf(x == x ? r : x, x);
}

/* 2^y for y in [-126, 127]: y = n + f with n = round(y) and |f| <= 1/2 (exact), 2^f =
 * 1 + f Q(f) with Q a degree-5 fit (relative error 2e-9). */
AI float exp2_fma_f32(float y)
{
    const float t = y + FMA_SHIFTER;
    const float n = t - FMA_SHIFTER;
    int32_t tb;
    memcpy(&tb, &t, sizeof tb);
    const float f = y - n;
    float q = 0x1.41fbbcp-13f;
    q = fmaf(q, f, 0x1.5f3e54p-10f);
    q = fmaf(q, f, 0x1.3b2d4cp-7f);
    q = fmaf(q, f, 0x1.c6aee8p-5f);
    q = fmaf(q, f, 0x1.ebfbdcp-3f);
    q = fmaf(q, f, 0x1.62e430p-1f); /* ln 2 */
    return fmaf(q, f, 1.0f) * pow2i_f32(tb - 0x4b400000);
}

/* 1 + erf(t), gelu's factor, from erfc alone: 2 - erfc(t) for t >= 0, erfc(|t|) for t < 0
 * (no cancellation), with erfc(u) = 2^P(u) on [0, 4), P a degree-10 fit of log2(erfc)
 * weighted by erfc (absolute error of erfc below 4e-8, float32 evaluation included). From
 * |t| = 4 on, erfc is taken as 0 (erfc(4) = 1.5e-8: 1 + erf(t) is 2 for t >= 4, and 0 for
 * t <= -4 as PyTorch's float32 gelu gives). One polynomial and one exp2 for every lane where
 * erf_f32 needs two polynomials and an exp: gelu only needs absolute accuracy for t < 0 (see
 * the file comment). A nan t gives a number (its callers multiply by x, which is nan), and
 * |t| >= 4 (or nan) evaluates P out of its range into a value that is then replaced. */
AI float one_plus_erf_f32(float t)
{
    const float u = fabsf(t);
    float p = -0x1.5cb108p-20f;
    p = fmaf(p, u, 0x1.a6a172p-16f);
    p = fmaf(p, u, -0x1.bb1d94p-13f);
    p = fmaf(p, u, 0x1.015cacp-10f);
    p = fmaf(p, u, -0x1.415da4p-9f);
    p = fmaf(p, u, 0x1.d38080p-13f);
    p = fmaf(p, u, 0x1.c53b82p-6f);
    p = fmaf(p, u, -0x1.2fb4acp-3f);
    p = fmaf(p, u, -0x1.d63e50p-1f);
    p = fmaf(p, u, -0x1.a0be88p+0f); /* -2 / (sqrt(pi) ln 2) */
    p = fmaf(p, u, 0x1.32a734p-29f);
    const float erfc = u < 4.0f ? exp2_fma_f32(p) : 0.0f; /* P in [-26, 0] on [0, 4) */
    return t < 0.0f ? erfc : 2.0f - erfc;
}


/* --- float64 ops -------------------------------------------------------------------------- */

AI double exp_f64(double x, const limits_t *K)
{
    double d = x > K->exp64_hi ? K->exp64_hi : x;
    d = d < K->exp64_lo ? K->exp64_lo : d;
    double safe = d == d ? d : K->zero;
    double y = exp_core(safe, 13);
    return x != x ? x : y;
}

AI double log_f64(double x, const limits_t *K)
{
    double safe = (x > 0.0 && x < INFINITY) ? x : K->one;
    int tiny = safe < 0x1p-1022; /* subnormal: scale into the normal range first */
    double y = log_core(tiny ? safe * 0x1p54 : safe, 11);
    y = tiny ? y - 54.0 * LN2 : y;
    y = x == 0.0 ? -INFINITY : y;
    y = x == INFINITY ? INFINITY : y;
    y = x < 0.0 ? NAN : y;
    return x != x ? x : y;
}

AI double tanh_f64(double x, const limits_t *K) { return tanh_core(x, 13, K); }

/* --- erf, as the reference computes it (_ops/special_pointwise.py: Cody's rational
 * approximations, the same operations in the same order), with our exp. ------------------ */

static const double CODY_A[5] = {3.16112374387056560e00, 1.13864154151050156e02,
                                 3.77485237685302021e02, 3.20937758913846947e03,
                                 1.85777706184603153e-1};
static const double CODY_B[4] = {2.36012909523441209e01, 2.44024637934444173e02,
                                 1.28261652607737228e03, 2.84423683343917062e03};
static const double CODY_C[9] = {5.64188496988670089e-1, 8.88314979438837594e00,
                                 6.61191906371416295e01, 2.98635138197400131e02,
                                 8.81952221241769090e02, 1.71204761263407058e03,
                                 2.05107837782607147e03, 1.23033935479799725e03,
                                 2.15311535474403846e-8};
static const double CODY_D[8] = {1.57449261107098347e01, 1.17693950891312499e02,
                                 5.37181101862009858e02, 1.62138957456669019e03,
                                 3.29079923573345963e03, 4.36261909014324716e03,
                                 3.43936767414372164e03, 1.23033935480374942e03};
static const double CODY_P[6] = {3.05326634961232344e-1, 3.60344899949804439e-1,
                                 1.25781726111229246e-1, 1.60837851487422766e-2,
                                 6.58749161529837803e-4, 1.63153871373020978e-2};
static const double CODY_Q[5] = {2.56852019228982242e00, 1.87295284992346725e00,
                                 5.27905102951428412e-1, 6.05183413124413191e-2,
                                 2.33520497626869185e-3};

/* One step of Cody's nesting: xnum = (xnum + num[i]) x, xden = (xden + den[i]) x */
#define CODY_STEP(num, den, i, x)                                                           \
    do {                                                                                    \
        xnum = (xnum + (num)[i]) * (x);                                                     \
        xden = (xden + (den)[i]) * (x);                                                     \
    } while (0)

/* float64 erf (torch.erf, gelu and its backward), as the reference computes it. */
AI double erf_ref(double x, const limits_t *K)
{
    double ax = fabs(x);
    /* |x| <= 0.5: x A(x^2) / B(x^2) */
    double xs = ax <= 0.5 ? x : K->zero;
    double x2 = xs * xs;
    double xnum = CODY_A[4] * x2, xden = x2;
    CODY_STEP(CODY_A, CODY_B, 0, x2);
    CODY_STEP(CODY_A, CODY_B, 1, x2);
    CODY_STEP(CODY_A, CODY_B, 2, x2);
    double small = xs * (xnum + CODY_A[3]) / (xden + CODY_B[3]);
    /* 0.5 < y: erfc(y) = exp(-y^2) erfcx(y); for y > 6, 1 - erfc(y) is exactly 1, so y is
     * capped (below where trunc(16 y) leaves the int range) without changing a result. */
    double y = ax > 0.5 ? ax : K->one;
    y = y > K->erf_cap ? K->erf_cap : y;
    y = y == y ? y : K->one;
    xnum = CODY_C[8] * y, xden = y;
    CODY_STEP(CODY_C, CODY_D, 0, y);
    CODY_STEP(CODY_C, CODY_D, 1, y);
    CODY_STEP(CODY_C, CODY_D, 2, y);
    CODY_STEP(CODY_C, CODY_D, 3, y);
    CODY_STEP(CODY_C, CODY_D, 4, y);
    CODY_STEP(CODY_C, CODY_D, 5, y);
    CODY_STEP(CODY_C, CODY_D, 6, y);
    double middle = (xnum + CODY_C[7]) / (xden + CODY_D[7]);
    double z = 1.0 / (y * y);
    xnum = CODY_P[5] * z, xden = z;
    CODY_STEP(CODY_P, CODY_Q, 0, z);
    CODY_STEP(CODY_P, CODY_Q, 1, z);
    CODY_STEP(CODY_P, CODY_Q, 2, z);
    CODY_STEP(CODY_P, CODY_Q, 3, z);
    double tail = (0.5641895835477563 - z * (xnum + CODY_P[4]) / (xden + CODY_Q[4])) / y;
    double erfcx = y <= 4.0 ? middle : tail; /* 0.5641895835477563: 1/sqrt(pi) */
    /* exp(-y^2) with y^2 split (head = trunc(16 y) / 16) so its rounding does not count */
    double head = (double)(int32_t)(y * 16.0) / 16.0;
    double arg1 = -head * head, arg2 = -(y - head) * (y + head);
    double ems = exp_core(arg1 < K->exp64_lo ? K->exp64_lo : arg1, 13) *
                 exp_core(arg2 < K->exp64_lo ? K->exp64_lo : arg2, 13);
    double large = copysign(1.0 - ems * erfcx, x);
    return ax <= 0.5 ? small : (x != x ? x : large);
}

/* ==== row functions ======================================================================= */

/* sqrt as one instruction. C's sqrt() keeps a call for negative input (to set errno), which
 * stops loops from vectorizing; the build has no -fno-math-errno, and the optimize pragma
 * cannot turn it off. Same IEEE result either way (correctly rounded; nan below 0). */
#ifdef X86_INTRINSICS
AI float sqrt1f(float x) { return _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x))); }
AI double sqrt1d(double x) { return _mm_cvtsd_f64(_mm_sqrt_sd(_mm_setzero_pd(), _mm_set_sd(x))); }
#else
AI float sqrt1f(float x) { return sqrtf(x); }
AI double sqrt1d(double x) { return sqrt(x); }
#endif

/* float32 formulas (reference: numbers meet float32 arrays as float32, NumPy 2's rule) */
#define F32_neg(x) (-(x))
#define F32_abs(x) fabsf(x)
#define F32_relu(x) ((x) > 0.0f ? (x) : ((x) != (x) ? (x) : 0.0f))
#define F32_sqrt(x) sqrt1f(x)
#define F32_rsqrt(x) (1.0f / sqrt1f(x))
#define F32_leaky_relu(x) ((x) > 0.0f ? (x) : (x) * c0)
#define F32_square(x) ((x) * (x))
#define F32_reciprocal(x) (1.0f / (x))
#define F32_exp(x) exp_fma_f32(x, &K)
#define F32_log(x) log_f32(x, &K)
#define F32_tanh(x) tanh_f32(x, &K)
#define F32_sigmoid(x) (1.0f / (1.0f + exp_fma_f32(-(x), &K)))
#define F32_silu(x) ((x) / (1.0f + exp_fma_f32(-(x), &K)))
#define F32_gelu(x) ((0.5f * (x)) * one_plus_erf_f32((x) * 0x1.6a09e6p-1f)) /* 1/sqrt2 */
#define F32_gelu_tanh(x) gelu_tanh_f32(x, &K)
#define F32_erf(x) erf_f32(x)

#define F64_neg(x) (-(x))
#define F64_abs(x) fabs(x)
#define F64_relu(x) ((x) > 0.0 ? (x) : ((x) != (x) ? (x) : 0.0))
#define F64_sqrt(x) sqrt1d(x)
#define F64_rsqrt(x) (1.0 / sqrt1d(x))
#define F64_leaky_relu(x) ((x) > 0.0 ? (x) : (x) * c0)
#define F64_square(x) ((x) * (x))
#define F64_reciprocal(x) (1.0 / (x))
#define F64_exp(x) exp_f64(x, &K)
#define F64_log(x) log_f64(x, &K)
#define F64_tanh(x) tanh_f64(x, &K)
#define F64_sigmoid(x) (1.0 / (1.0 + exp_f64(-(x), &K)))
#define F64_silu(x) ((x) / (1.0 + exp_f64(-(x), &K)))
#define F64_gelu(x) ((0.5 * (x)) * (1.0 + erf_ref((x) / 1.4142135623730951, &K)))
#define F64_gelu_tanh(x) gelu_tanh_f64(x, &K)
#define F64_erf(x) erf_ref((x), &K)

/* Backward ops (g: grad_output; y: the forward's output, x: its input), the reference's
 * formulas (reftorch/_ops/pointwise.py, nn_activation.py) operation for operation: numbers
 * meet float32 arrays as float32. tanh, sigmoid and threshold backward are plain IEEE
 * arithmetic (bit for bit the reference's); gelu and silu backward replace the reference's
 * erf/exp/tanh with this file's. */
#define F32_tanh_backward(g, y) ((g) * (1.0f - (y) * (y)))
#define F32_sigmoid_backward(g, y) ((g) * ((y) * (1.0f - (y))))
#define F32_threshold_backward(g, x) ((x) <= c0 ? 0.0f : (g))
#define F32_gelu_backward(g, x) gelu_backward_f32(g, x, &K)
#define F32_gelu_tanh_backward(g, x) gelu_tanh_backward_f32(g, x, &K)
#define F32_silu_backward(g, x) silu_backward_f32(g, x, &K)
#define F64_tanh_backward(g, y) ((g) * (1.0 - (y) * (y)))
#define F64_sigmoid_backward(g, y) ((g) * ((y) * (1.0 - (y))))
#define F64_threshold_backward(g, x) ((x) <= c0 ? 0.0 : (g))
#define F64_gelu_backward(g, x) gelu_backward_f64(g, x, &K)
#define F64_gelu_tanh_backward(g, x) gelu_tanh_backward_f64(g, x, &K)
#define F64_silu_backward(g, x) silu_backward_f64(g, x, &K)

/* g * (cdf + x pdf): cdf = 0.5 (1 + erf(x / sqrt2)), pdf = exp(-0.5 x x) / sqrt(2 pi) */
AI float gelu_backward_f32(float g, float x, const limits_t *K)
{
    const float cdf = 0.5f * one_plus_erf_f32(x * 0x1.6a09e6p-1f);
    const float pdf = exp_fma_f32((-0.5f * x) * x, K) * 0x1.988454p-2f; /* 1/sqrt(2pi) */
    return g * (cdf + x * pdf);
}

AI double gelu_backward_f64(double g, double x, const limits_t *K)
{
    const double cdf = 0.5 * (1.0 + erf_ref(x * 0.7071067811865475, K));
    const double pdf = exp_f64((-0.5 * x) * x, K) * 0.3989422804014327;
    return g * (cdf + x * pdf);
}

/* g * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2)), t = tanh(k (x + c x^3)) */
AI float gelu_tanh_backward_f32(float g, float x, const limits_t *K)
{
    const float k = (float)0.7978845608028654, c = (float)0.044715;
    const float t = tanh_f32(k * (x + c * x * x * x), K);
    const float d_inner = k * (1.0f + (float)0.13414500000000001 * x * x);
    return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner);
}

AI double gelu_tanh_backward_f64(double g, double x, const limits_t *K)
{
    const double k = 0.7978845608028654, c = 0.044715;
    const double t = tanh_f64(k * (x + c * x * x * x), K);
    const double d_inner = k * (1.0 + 0.13414500000000001 * x * x);
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner);
}

/* g * (s (1 + x (1 - s))), s = sigmoid(x) = 1 / (1 + exp(-x)) */
AI float silu_backward_f32(float g, float x, const limits_t *K)
{
    const float s = 1.0f / (1.0f + exp_fma_f32(-x, K));
    return g * (s * (1.0f + x * (1.0f - s)));
}

AI double silu_backward_f64(double g, double x, const limits_t *K)
{
    const double s = 1.0 / (1.0 + exp_f64(-x, K));
    return g * (s * (1.0 + x * (1.0 - s)));
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in the reference's order */
AI float gelu_tanh_f32(float x, const limits_t *K)
{
    float inner = (float)0.7978845608028654 * (x + (float)0.044715 * x * x * x);
    return 0.5f * x * (1.0f + tanh_f32(inner, K));
}

AI double gelu_tanh_f64(double x, const limits_t *K)
{
    double inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh_f64(inner, K));
}

/* NumPy's maximum/minimum: nan wins (from either side), and on a tie (+0 vs -0) the second
 * operand is returned. */
#define MAX2(a, b) ((a) != (a) ? (a) : ((a) > (b) ? (a) : (b)))
#define MIN2(a, b) ((a) != (a) ? (a) : ((a) < (b) ? (a) : (b)))

#define DEFINE_UNARY_ROW(NAME, T, PFX, ISA, ATTR)                                           \
    ATTR static void row_##NAME##_##T##_##ISA(ptrdiff_t n, char *const *p,                  \
                                              const ptrdiff_t *s, const double *prm)        \
    {                                                                                       \
        T *o = (T *)p[0];                                                                   \
        const T *a = (const T *)p[1];                                                       \
        const T c0 = (T)prm[0];                                                             \
        const limits_t K = make_limits();                                                   \
        (void)c0, (void)K;                                                                  \
        const ptrdiff_t so = s[0], sa = s[1];                                               \
        if (so == 1 && sa == 1) {                                                           \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) {                         \
                const T x = a[i];                                                           \
                o[i] = PFX##_##NAME(x);                                                     \
            }                                                                               \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const T x = a[i * sa];                                                      \
                o[i * so] = PFX##_##NAME(x);                                                \
            }                                                                               \
        }                                                                                   \
    }

/* A backward op: out = F(g, a) (g the incoming gradient, a the forward's output or input;
 * c0 the threshold). Fast loops for unit strides, and for a broadcast g (the gradient of a
 * sum arrives expanded from one number). */
#define DEFINE_GRAD_ROW(NAME, T, PFX, ISA, ATTR)                                            \
    ATTR static void row_##NAME##_##T##_##ISA(ptrdiff_t n, char *const *p,                  \
                                              const ptrdiff_t *s, const double *prm)        \
    {                                                                                       \
        T *o = (T *)p[0];                                                                   \
        const T *g = (const T *)p[1], *a = (const T *)p[2];                                 \
        const T c0 = (T)prm[0];                                                             \
        const limits_t K = make_limits();                                                   \
        (void)c0, (void)K;                                                                  \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                          \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) {                         \
                const T gv = g[i], x = a[i];                                                \
                o[i] = PFX##_##NAME(gv, x);                                                 \
            }                                                                               \
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {                                   \
            const T gv = g[0];                                                              \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) {                         \
                const T x = a[i];                                                           \
                o[i] = PFX##_##NAME(gv, x);                                                 \
            }                                                                               \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const T gv = g[i * s[1]], x = a[i * s[2]];                                  \
                o[i * s[0]] = PFX##_##NAME(gv, x);                                          \
            }                                                                               \
        }                                                                                   \
    }

/* clamp_min / clamp_max: out = MAX2(a, lo) / MIN2(a, hi); fast when the bound is a scalar */
#define DEFINE_BINARY_ROW(NAME, T, F, ISA, ATTR)                                            \
    ATTR static void row_##NAME##_##T##_##ISA(ptrdiff_t n, char *const *p,                  \
                                              const ptrdiff_t *s, const double *prm)        \
    {                                                                                       \
        (void)prm;                                                                          \
        T *o = (T *)p[0];                                                                   \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                                 \
        if (s[0] == 1 && s[1] == 1 && s[2] == 0) {                                          \
            const T y = b[0];                                                               \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) o[i] = F(a[i], y);        \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                   \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) o[i] = F(a[i], b[i]);     \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) o[i * s[0]] = F(a[i * s[1]], b[i * s[2]]);    \
        }                                                                                   \
    }

/* clamp: MIN2(MAX2(a, lo), hi), as the reference's np.minimum(np.maximum(a, lo), hi) */
#define DEFINE_CLAMP_ROW(T, ISA, ATTR)                                                      \
    ATTR static void row_clamp_##T##_##ISA(ptrdiff_t n, char *const *p, const ptrdiff_t *s, \
                                           const double *prm)                               \
    {                                                                                       \
        (void)prm;                                                                          \
        T *o = (T *)p[0];                                                                   \
        const T *a = (const T *)p[1], *l = (const T *)p[2], *h = (const T *)p[3];           \
        if (s[0] == 1 && s[1] == 1 && s[2] == 0 && s[3] == 0) {                             \
            /* two vectorized passes over chunks in cache (GCC does not vectorize the two  \
             * nested selects in one loop for AVX-512F); same values as one pass */         \
            const T lo = l[0], hi = h[0];                                                   \
            for (ptrdiff_t j = 0; j < n; j += 1024) {                                       \
                const ptrdiff_t m = n - j < 1024 ? n - j : 1024;                            \
                T *oj = o + j;                                                              \
                const T *aj = a + j;                                                        \
                _Pragma("omp simd") for (ptrdiff_t i = 0; i < m; i++) {                     \
                    const T x = aj[i];                                                      \
                    oj[i] = MAX2(x, lo);                                                    \
                }                                                                           \
                _Pragma("omp simd") for (ptrdiff_t i = 0; i < m; i++) {                     \
                    const T x = oj[i];                                                      \
                    oj[i] = MIN2(x, hi);                                                    \
                }                                                                           \
            }                                                                               \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const T m = MAX2(a[i * s[1]], l[i * s[2]]);                                 \
                o[i * s[0]] = MIN2(m, h[i * s[3]]);                                         \
            }                                                                               \
        }                                                                                   \
    }

/* where: out = cond ? a : b, cond a bool buffer (any nonzero byte counts as true) */
#define DEFINE_WHERE_ROW(T, ISA, ATTR)                                                      \
    ATTR static void row_where_##T##_##ISA(ptrdiff_t n, char *const *p, const ptrdiff_t *s, \
                                           const double *prm)                               \
    {                                                                                       \
        (void)prm;                                                                          \
        T *o = (T *)p[0];                                                                   \
        const uint8_t *c = (const uint8_t *)p[1];                                           \
        const T *a = (const T *)p[2], *b = (const T *)p[3];                                 \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                             \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) {                         \
                const T av = a[i], bv = b[i];                                               \
                o[i] = c[i] ? av : bv;                                                      \
            }                                                                               \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 0) {                      \
            const T y = b[0];                                                               \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) o[i] = c[i] ? a[i] : y;   \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++)                                               \
                o[i * s[0]] = c[i * s[1]] ? a[i * s[2]] : b[i * s[3]];                      \
        }                                                                                   \
    }

/* addcmul, addcdiv, lerp: out = F(a, b, c, v) (v: the value parameter, rounded to T as the
 * reference rounds it), each the reference's operations in its order: a + (v * b) * c,
 * a + v * (b / c), and lerp from the nearer end: |w| < 0.5 ? a + w (b - a) : b - (b - a)
 * (1 - w). Fast loops for unit strides and for a broadcast third operand (lerp's one
 * weight, addcmul's scalar tensor). */
#define ADDCMUL(a, b, c, v) ((a) + ((v) * (b)) * (c))
#define ADDCDIV(a, b, c, v) ((a) + (v) * ((b) / (c)))
#define LERP(a, b, w, v) (((w) < 0 ? -(w) : (w)) < 0.5 ? (a) + (w) * ((b) - (a))             \
                                                      : (b) - ((b) - (a)) * (1 - (w)))
#define DEFINE_TERNARY_ROW(NAME, T, F, ISA, ATTR)                                           \
    ATTR static void row_##NAME##_##T##_##ISA(ptrdiff_t n, char *const *p,                  \
                                              const ptrdiff_t *s, const double *prm)        \
    {                                                                                       \
        T *o = (T *)p[0];                                                                   \
        const T *a = (const T *)p[1], *b = (const T *)p[2], *c = (const T *)p[3];           \
        const T v = (T)prm[0];                                                              \
        (void)v;                                                                            \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                             \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) {                         \
                const T x = a[i], y = b[i], z = c[i];                                       \
                o[i] = F(x, y, z, v);                                                       \
            }                                                                               \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 0) {                      \
            const T z = c[0];                                                               \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++) {                         \
                const T x = a[i], y = b[i];                                                 \
                o[i] = F(x, y, z, v);                                                       \
            }                                                                               \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const T x = a[i * s[1]], y = b[i * s[2]], z = c[i * s[3]];                  \
                o[i * s[0]] = F(x, y, z, v);                                                \
            }                                                                               \
        }                                                                                   \
    }

#ifdef X86_INTRINSICS
#define DEFINE_GENERIC_SQRT_ROWS(T, PFX, ISA, ATTR)
#else
#define DEFINE_GENERIC_SQRT_ROWS(T, PFX, ISA, ATTR)                                         \
    DEFINE_UNARY_ROW(sqrt, T, PFX, ISA, ATTR) DEFINE_UNARY_ROW(rsqrt, T, PFX, ISA, ATTR)
#endif

#ifdef X86_INTRINSICS
/* sqrt and rsqrt over unit-stride rows with the instruction set's vector sqrt (P: the
 * intrinsics prefix, WF/WD: floats/doubles per vector); other rows element by element. */
#define DEFINE_VSQRT_ROW(NAME, T, SFX, P, W, ISA, ATTR, VEXPR, SEXPR)                       \
    ATTR static void row_v##NAME##_##T##_##ISA(ptrdiff_t n, char *const *p,                 \
                                               const ptrdiff_t *s, const double *prm)       \
    {                                                                                       \
        (void)prm;                                                                          \
        T *o = (T *)p[0];                                                                   \
        const T *a = (const T *)p[1];                                                       \
        if (s[0] == 1 && s[1] == 1) {                                                       \
            ptrdiff_t i = 0;                                                                \
            for (; i + W <= n; i += W) {                                                    \
                __typeof__(P##loadu_##SFX(a)) v = P##loadu_##SFX(a + i);                    \
                P##storeu_##SFX(o + i, VEXPR);                                              \
            }                                                                               \
            for (; i < n; i++) {                                                            \
                const T x = a[i];                                                           \
                o[i] = SEXPR;                                                               \
            }                                                                               \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) {                                             \
                const T x = a[i * s[1]];                                                    \
                o[i * s[0]] = SEXPR;                                                        \
            }                                                                               \
        }                                                                                   \
    }
#define DEFINE_VSQRT_ROWS(P, WF, WD, ISA, ATTR)                                             \
    DEFINE_VSQRT_ROW(sqrt, float, ps, P, WF, ISA, ATTR, P##sqrt_ps(v), sqrt1f(x))           \
    DEFINE_VSQRT_ROW(rsqrt, float, ps, P, WF, ISA, ATTR,                                    \
                     P##div_ps(P##set1_ps(1.0f), P##sqrt_ps(v)), 1.0f / sqrt1f(x))          \
    DEFINE_VSQRT_ROW(sqrt, double, pd, P, WD, ISA, ATTR, P##sqrt_pd(v), sqrt1d(x))          \
    DEFINE_VSQRT_ROW(rsqrt, double, pd, P, WD, ISA, ATTR,                                   \
                     P##div_pd(P##set1_pd(1.0), P##sqrt_pd(v)), 1.0 / sqrt1d(x))
DEFINE_VSQRT_ROWS(_mm_, 4, 2, baseline, )
DEFINE_VSQRT_ROWS(_mm256_, 8, 4, avx2, __attribute__((target("avx2"))))
DEFINE_VSQRT_ROWS(_mm512_, 16, 8, avx512f, AVX512F_ATTR)
#define SQRT_ROW(NAME, T, ISA) row_v##NAME##_##T##_##ISA
#else
#define SQRT_ROW(NAME, T, ISA) row_##NAME##_##T##_##ISA
#endif

#define DEFINE_ROWS_T(T, PFX, ISA, ATTR)                                                    \
    DEFINE_UNARY_ROW(neg, T, PFX, ISA, ATTR)                                                \
    DEFINE_UNARY_ROW(abs, T, PFX, ISA, ATTR)                                                \
    DEFINE_UNARY_ROW(relu, T, PFX, ISA, ATTR)                                               \
    DEFINE_GENERIC_SQRT_ROWS(T, PFX, ISA, ATTR)                                             \
    DEFINE_UNARY_ROW(leaky_relu, T, PFX, ISA, ATTR)                                         \
    DEFINE_UNARY_ROW(square, T, PFX, ISA, ATTR)                                             \
    DEFINE_UNARY_ROW(reciprocal, T, PFX, ISA, ATTR)                                         \
    DEFINE_UNARY_ROW(exp, T, PFX, ISA, ATTR)                                                \
    DEFINE_UNARY_ROW(log, T, PFX, ISA, ATTR)                                                \
    DEFINE_UNARY_ROW(tanh, T, PFX, ISA, ATTR)                                               \
    DEFINE_UNARY_ROW(sigmoid, T, PFX, ISA, ATTR)                                            \
    DEFINE_UNARY_ROW(silu, T, PFX, ISA, ATTR)                                               \
    DEFINE_UNARY_ROW(gelu, T, PFX, ISA, ATTR)                                               \
    DEFINE_UNARY_ROW(gelu_tanh, T, PFX, ISA, ATTR)                                          \
    DEFINE_UNARY_ROW(erf, T, PFX, ISA, ATTR)                                                \
    DEFINE_BINARY_ROW(clamp_min, T, MAX2, ISA, ATTR)                                        \
    DEFINE_BINARY_ROW(clamp_max, T, MIN2, ISA, ATTR)                                        \
    DEFINE_GRAD_ROW(tanh_backward, T, PFX, ISA, ATTR)                                       \
    DEFINE_GRAD_ROW(sigmoid_backward, T, PFX, ISA, ATTR)                                    \
    DEFINE_GRAD_ROW(threshold_backward, T, PFX, ISA, ATTR)                                  \
    DEFINE_GRAD_ROW(gelu_backward, T, PFX, ISA, ATTR)                                       \
    DEFINE_GRAD_ROW(gelu_tanh_backward, T, PFX, ISA, ATTR)                                  \
    DEFINE_GRAD_ROW(silu_backward, T, PFX, ISA, ATTR)                                       \
    DEFINE_CLAMP_ROW(T, ISA, ATTR)                                                          \
    DEFINE_WHERE_ROW(T, ISA, ATTR)                                                          \
    DEFINE_TERNARY_ROW(addcmul, T, ADDCMUL, ISA, ATTR)                                      \
    DEFINE_TERNARY_ROW(addcdiv, T, ADDCDIV, ISA, ATTR)                                      \
    DEFINE_TERNARY_ROW(lerp, T, LERP, ISA, ATTR)

#define ROWS_T(T, ISA)                                                                      \
    {row_neg_##T##_##ISA, row_abs_##T##_##ISA, row_relu_##T##_##ISA,                        \
     SQRT_ROW(sqrt, T, ISA), SQRT_ROW(rsqrt, T, ISA), row_leaky_relu_##T##_##ISA,           \
     row_square_##T##_##ISA, row_reciprocal_##T##_##ISA,                                    \
     row_exp_##T##_##ISA, row_log_##T##_##ISA, row_tanh_##T##_##ISA,                        \
     row_sigmoid_##T##_##ISA, row_silu_##T##_##ISA, row_gelu_##T##_##ISA,                   \
     row_gelu_tanh_##T##_##ISA, row_erf_##T##_##ISA, row_clamp_min_##T##_##ISA,             \
     row_clamp_max_##T##_##ISA, row_tanh_backward_##T##_##ISA,                              \
     row_sigmoid_backward_##T##_##ISA, row_threshold_backward_##T##_##ISA,                  \
     row_gelu_backward_##T##_##ISA, row_gelu_tanh_backward_##T##_##ISA,                     \
     row_silu_backward_##T##_##ISA, row_clamp_##T##_##ISA, row_where_##T##_##ISA,            \
     row_addcmul_##T##_##ISA, row_addcdiv_##T##_##ISA, row_lerp_##T##_##ISA}

#define DEFINE_ROWS_FOR_ISA(ISA, ATTR)                                                      \
    DEFINE_ROWS_T(float, F32, ISA, ATTR) DEFINE_ROWS_T(double, F64, ISA, ATTR)
#define ROWS_FOR_ISA(ISA) {ROWS_T(float, ISA), ROWS_T(double, ISA)}

DEFINE_ROWS_FOR_ISA(baseline, )

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define HAVE_X86_CLONES 1
DEFINE_ROWS_FOR_ISA(avx2, __attribute__((target("avx2,fma"))))
DEFINE_ROWS_FOR_ISA(avx512f, AVX512F_ATTR)

/* float32 exp, sigmoid and silu over unit-stride rows in the AVX-512F clone: exp_fma_f32's
 * steps on 16 lanes, with 2^n applied by one vscalefps. That rounds p 2^n once, as the
 * scalar code's two halves do (the first half is exact), so every lane gets the scalar
 * code's bits; and it takes n as a float, so a NaN lane needs no stand-in (it stays NaN
 * through every step) and there is no integer work. 16 instructions a vector where GCC's
 * vectorization of the scalar code has 26. 256 Ki elements (L2-resident, 2 threads, builds
 * in alternating processes): exp 88-103 -> 52-55 us, sigmoid 116-127 -> 73-76 us. Same bits
 * as the generic rows for all 2^32 inputs (checked: contiguous vs strided output). The last
 * < 16 elements are one masked vector (masked-off lanes are not read or written). Other
 * strides run the generic rows.
 * gelu_backward and silu_backward have twins built the same way (one_plus_erf_f32's range
 * test becomes a mask): 256 Ki elements, 1 thread, builds in alternating processes:
 * gelu_backward 196-203 -> 162-173 us, silu_backward 133-137 -> 105-109 us; same bits as the
 * generic rows for every float32 x (random g). tanh and gelu gained nothing this way: GCC's
 * vectorization of their scalar code is already as short. */

/* exp_fma_small_f32 on 16 lanes: y must lie in [-87, 88] (or be NaN, which stays NaN) */
AVX512F_ATTR static inline __m512 vexp_small_f32x16(__m512 y)
{
    const __m512 shifter = _mm512_set1_ps(FMA_SHIFTER);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(y, _mm512_set1_ps(EXPM_LOG2E), shifter),
                                   shifter);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-EXPM_LN2_UP), y);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(EXPM_LN2_OVER), r);
    __m512 q = _mm512_set1_ps(EXPM_Q4);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EXPM_Q3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EXPM_Q2));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EXPM_Q1));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EXPM_Q0));
    const __m512 p = _mm512_add_ps(_mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r),
                                   _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

AVX512F_ATTR static inline __m512 vexp_f32x16(__m512 x, const limits_t *K)
{
    /* min/max give their second operand when one is NaN, so a NaN x passes the clamp */
    const __m512 hi = _mm512_set1_ps((float)K->exp32_hi), lo = _mm512_set1_ps((float)K->exp32_lo);
    return vexp_small_f32x16(_mm512_max_ps(lo, _mm512_min_ps(hi, x)));
}

AVX512F_ATTR static inline __m512 vneg_f32x16(__m512 x) /* -x: the sign bit flipped */
{
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x),
                                                _mm512_set1_epi32(INT32_MIN)));
}

AVX512F_ATTR static inline __m512 vabs_f32x16(__m512 x) /* |x|: the sign bit cleared */
{
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x),
                                                _mm512_set1_epi32(INT32_MAX)));
}

/* exp2_fma_f32 on 16 lanes for y in [-26, 0] (2^n exact: vscalef gives the same bits) */
AVX512F_ATTR static inline __m512 vexp2_small_f32x16(__m512 y)
{
    const __m512 shifter = _mm512_set1_ps(FMA_SHIFTER);
    const __m512 n = _mm512_sub_ps(_mm512_add_ps(y, shifter), shifter);
    const __m512 f = _mm512_sub_ps(y, n);
    __m512 q = _mm512_set1_ps(0x1.41fbbcp-13f);
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0x1.5f3e54p-10f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0x1.3b2d4cp-7f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0x1.c6aee8p-5f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0x1.ebfbdcp-3f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0x1.62e430p-1f));
    return _mm512_scalef_ps(_mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0f)), n);
}

/* one_plus_erf_f32 on 16 lanes: lanes with |t| >= 4 (or NaN) evaluate P out of its range
 * and are replaced by erfc = 0, as there. */
AVX512F_ATTR static inline __m512 vone_plus_erf_f32x16(__m512 t)
{
    const __m512 u = vabs_f32x16(t);
    __m512 p = _mm512_set1_ps(-0x1.5cb108p-20f);
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(0x1.a6a172p-16f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(-0x1.bb1d94p-13f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(0x1.015cacp-10f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(-0x1.415da4p-9f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(0x1.d38080p-13f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(0x1.c53b82p-6f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(-0x1.2fb4acp-3f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(-0x1.d63e50p-1f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(-0x1.a0be88p+0f));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(0x1.32a734p-29f));
    const __mmask16 in_range = _mm512_cmp_ps_mask(u, _mm512_set1_ps(4.0f), _CMP_LT_OQ);
    const __m512 erfc = _mm512_maskz_mov_ps(in_range, vexp2_small_f32x16(p));
    const __mmask16 negative = _mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(2.0f), erfc), erfc);
}

AVX512F_ATTR static inline __m512 vgelu_backward_f32x16(__m512 g, __m512 x, const limits_t *K)
{
    const __m512 cdf = _mm512_mul_ps(_mm512_set1_ps(0.5f),
                                     vone_plus_erf_f32x16(_mm512_mul_ps(x, _mm512_set1_ps(0x1.6a09e6p-1f))));
    const __m512 pdf = _mm512_mul_ps(
        vexp_f32x16(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), x), x), K),
        _mm512_set1_ps(0x1.988454p-2f));
    return _mm512_mul_ps(g, _mm512_add_ps(cdf, _mm512_mul_ps(x, pdf)));
}

AVX512F_ATTR static inline __m512 vsilu_backward_f32x16(__m512 g, __m512 x, const limits_t *K)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, vexp_f32x16(vneg_f32x16(x), K)));
    return _mm512_mul_ps(g, _mm512_mul_ps(s, _mm512_add_ps(one, _mm512_mul_ps(
                                                                 x, _mm512_sub_ps(one, s)))));
}

/* BODY for each vector of L lanes over [0, n), with its index i and its lane mask m: the
 * whole vectors first, with an all-ones mask (a constant, which GCC turns into plain loads
 * and stores), then the last partial vector with its lanes' mask. Masked accesses in every
 * iteration kept the prefetchers from running ahead out of cache: exp of 4M float32 ran
 * at a third of its speed (AMD EPYC). */
#define FOR_VECTORS(n, L, MASK, BODY)                                                        \
    do {                                                                                     \
        ptrdiff_t i = 0;                                                                     \
        for (; i + (L) <= (n); i += (L)) {                                                   \
            const MASK m = (MASK)~0u;                                                        \
            BODY;                                                                            \
        }                                                                                    \
        if (i < (n)) {                                                                       \
            const MASK m = (MASK)((1u << ((n) - i)) - 1);                                    \
            BODY;                                                                            \
        }                                                                                    \
    } while (0)

#define DEFINE_VEXP_ROW(NAME, VEXPR)                                                        \
    AVX512F_ATTR static void row_v##NAME##_float_avx512f(ptrdiff_t n, char *const *p,       \
                                                         const ptrdiff_t *s,                \
                                                         const double *prm)                 \
    {                                                                                       \
        if (s[0] != 1 || s[1] != 1) {                                                       \
            row_##NAME##_float_avx512f(n, p, s, prm);                                       \
            return;                                                                         \
        }                                                                                   \
        float *o = (float *)p[0];                                                           \
        const float *a = (const float *)p[1];                                               \
        const limits_t K = make_limits();                                                   \
        const __m512 one = _mm512_set1_ps(1.0f);                                            \
        (void)one;                                                                          \
        FOR_VECTORS(n, 16, __mmask16, const __m512 x = _mm512_maskz_loadu_ps(m, a + i);      \
                    _mm512_mask_storeu_ps(o + i, m, VEXPR));                                \
    }
DEFINE_VEXP_ROW(exp, vexp_f32x16(x, &K))
DEFINE_VEXP_ROW(sigmoid, _mm512_div_ps(one, _mm512_add_ps(one, vexp_f32x16(vneg_f32x16(x), &K))))
DEFINE_VEXP_ROW(silu, _mm512_div_ps(x, _mm512_add_ps(one, vexp_f32x16(vneg_f32x16(x), &K))))

/* The backward twins (out = F(g, x)), over unit-stride rows; other strides (a broadcast g
 * included) run the generic rows. */
#define DEFINE_VGRAD_ROW(NAME, VEXPR)                                                       \
    AVX512F_ATTR static void row_v##NAME##_float_avx512f(ptrdiff_t n, char *const *p,       \
                                                         const ptrdiff_t *s,                \
                                                         const double *prm)                 \
    {                                                                                       \
        if (s[0] != 1 || s[1] != 1 || s[2] != 1) {                                          \
            row_##NAME##_float_avx512f(n, p, s, prm);                                       \
            return;                                                                         \
        }                                                                                   \
        float *o = (float *)p[0];                                                           \
        const float *gp = (const float *)p[1], *a = (const float *)p[2];                    \
        const limits_t K = make_limits();                                                   \
        const __m512 one = _mm512_set1_ps(1.0f);                                            \
        (void)one;                                                                          \
        FOR_VECTORS(n, 16, __mmask16, const __m512 g = _mm512_maskz_loadu_ps(m, gp + i);     \
                    const __m512 x = _mm512_maskz_loadu_ps(m, a + i);                       \
                    _mm512_mask_storeu_ps(o + i, m, VEXPR));                                \
    }
DEFINE_VGRAD_ROW(gelu_backward, vgelu_backward_f32x16(g, x, &K))
DEFINE_VGRAD_ROW(silu_backward, vsilu_backward_f32x16(g, x, &K))

/* clamp between scalar bounds in one pass of max/min instructions. They return their
 * second operand for a NaN (x > NaN is false), where MAX2 / MIN2 keep a NaN first operand:
 * a blend puts it back after each step. A tie (+0 vs -0) gives the bound, as MAX2 / MIN2
 * do. The generic row made two passes (GCC does not vectorize the nested selects). */
#define DEFINE_VCLAMP_ROW(T, SFX, W, MASK)                                                  \
    AVX512F_ATTR static inline __m512##SFX vclamp_##T(__m512##SFX x, __m512##SFX lo,        \
                                                      __m512##SFX hi)                       \
    {                                                                                       \
        const __m512##SFX m = _mm512_mask_mov_##W(_mm512_max_##W(x, lo),                   \
                                                  _mm512_cmp_##W##_mask(x, x, _CMP_UNORD_Q), x); \
        return _mm512_mask_mov_##W(_mm512_min_##W(m, hi),                                  \
                                   _mm512_cmp_##W##_mask(m, m, _CMP_UNORD_Q), m);           \
    }                                                                                       \
    AVX512F_ATTR static void row_vclamp_##T##_avx512f(ptrdiff_t n, char *const *p,          \
                                                      const ptrdiff_t *s, const double *prm) \
    {                                                                                       \
        if (s[0] != 1 || s[1] != 1 || s[2] != 0 || s[3] != 0) {                             \
            row_clamp_##T##_avx512f(n, p, s, prm);                                          \
            return;                                                                         \
        }                                                                                   \
        enum { L = 64 / (int)sizeof(T) };                                                   \
        T *o = (T *)p[0];                                                                   \
        const T *a = (const T *)p[1];                                                       \
        const __m512##SFX lo = _mm512_set1_##W(((const T *)p[2])[0]);                       \
        const __m512##SFX hi = _mm512_set1_##W(((const T *)p[3])[0]);                       \
        FOR_VECTORS(n, L, MASK, _mm512_mask_storeu_##W(o + i, m, vclamp_##T(                \
                                    _mm512_maskz_loadu_##W(m, a + i), lo, hi)));            \
    }
DEFINE_VCLAMP_ROW(float, , ps, __mmask16)
DEFINE_VCLAMP_ROW(double, d, pd, __mmask8)

/* (the designators after the generic tables replace the AVX-512F float32 exp family and
 * both types' clamp) */
static const row_fn ROWS[N_ISAS][2][N_OPS] = {
    ROWS_FOR_ISA(baseline), ROWS_FOR_ISA(avx2), ROWS_FOR_ISA(avx512f),
    [ISA_AVX512F][T_F32][OP_EXP] = row_vexp_float_avx512f,
    [ISA_AVX512F][T_F32][OP_SIGMOID] = row_vsigmoid_float_avx512f,
    [ISA_AVX512F][T_F32][OP_SILU] = row_vsilu_float_avx512f,
    [ISA_AVX512F][T_F32][OP_GELU_BACKWARD] = row_vgelu_backward_float_avx512f,
    [ISA_AVX512F][T_F32][OP_SILU_BACKWARD] = row_vsilu_backward_float_avx512f,
    [ISA_AVX512F][T_F32][OP_CLAMP] = row_vclamp_float_avx512f,
    [ISA_AVX512F][T_F64][OP_CLAMP] = row_vclamp_double_avx512f};
#else
#define HAVE_X86_CLONES 0
static const row_fn ROWS[N_ISAS][2][N_OPS] = {ROWS_FOR_ISA(baseline)};
#endif

/* ---- casts (NumPy's conversions: C casts; float to integer truncates, and nan or a value
 * out of the integer's range gives the x86 "integer indefinite" INT_MIN, as NumPy's does
 * on this hardware; to bool: x != 0) ---------------------------------------------------- */

#define CONV_ID(x) (x)
#define CONV_BOOL(x) ((uint8_t)((x) != 0))
#define CONV_F_I64(x) (((x) >= -0x1p63 && (x) < 0x1p63) ? (int64_t)(x) : INT64_MIN)
#define CONV_F_I32(x) (((x) > -0x1p31 - 1.0 && (x) < 0x1p31) ? (int32_t)(x) : INT32_MIN)
#define CONV_I64_I32(x) ((int32_t)(uint32_t)(uint64_t)(x))
#define CONV_FROM_BOOL(x) ((x) != 0)

#define DEFINE_CAST_ROW(NAME, TI, TO, CONV) DEFINE_CAST_ROW_AFTER(NAME, TI, TO, CONV, NONE_FIRST)
#define NONE_FIRST(o, a, n) 0
/* FIRST(o, a, n): how many leading elements of a unit-stride row a faster loop converted */
#define DEFINE_CAST_ROW_AFTER(NAME, TI, TO, CONV, FIRST)                                    \
    CAST_ATTR static void CAST_ROW_NAME(NAME, CAST_ISA)(ptrdiff_t n, char *const *p,         \
                                                        const ptrdiff_t *s, const double *prm) \
    {                                                                                       \
        (void)prm;                                                                          \
        TO *o = (TO *)p[0];                                                                 \
        const TI *a = (const TI *)p[1];                                                     \
        if (s[0] == 1 && s[1] == 1) {                                                       \
            const ptrdiff_t first = FIRST(o, a, n);                                         \
            _Pragma("omp simd") for (ptrdiff_t i = first; i < n; i++) o[i] = (TO)CONV(a[i]); \
        } else {                                                                            \
            for (ptrdiff_t i = 0; i < n; i++) o[i * s[0]] = (TO)CONV(a[i * s[1]]);          \
        }                                                                                   \
    }


/* float16 and bfloat16, in integer arithmetic on the bits (branch-free, so the loops
 * vectorize). The rounding is IEEE's nearest-even, so any correct method gives the bits of
 * NumPy's float16 and ml_dtypes' bfloat16 for numbers; NaN follows each library's own rule
 * (below), which the hardware's F16C instructions would not (they quiet a signalling NaN). */

/* float16 bits -> float32 bits, exactly (NumPy's npy_halfbits_to_floatbits): a subnormal
 * half is its 10-bit significand times 2^-24 (exact in float32); NaN keeps its payload. */
static inline uint32_t f16_to_f32_bits(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = h & 0x7c00u, mant = h & 0x3ffu;
    const uint32_t normal = sign | (((uint32_t)(h & 0x7fffu) + 0x1c000u) << 13);
    const uint32_t inf_nan = sign | 0x7f800000u | (mant << 13);
    const float subnormal = (float)mant * 0x1p-24f;
    uint32_t sub_bits;
    memcpy(&sub_bits, &subnormal, sizeof sub_bits);
    return exp == 0 ? sign | sub_bits : exp == 0x7c00u ? inf_nan : normal;
}

/* float32 bits -> float16 bits, rounding to nearest even. Normal results round the
 * significand by integer addition (a carry moves into the exponent, up to infinity); results
 * below 2^-14 come from a float addition of 0.5, whose rounding at 2^-24 is the half's last
 * subnormal bit; from 65536 up the result is infinity. NaN (NumPy's npy_floatbits_to_halfbits)
 * keeps the top 10 payload bits, and a payload only in the lower 13 becomes 1: a signalling
 * NaN stays signalling. */
static inline uint16_t f32_bits_to_f16(uint32_t f)
{
    const uint32_t sign = (f >> 16) & 0x8000u, a = f & 0x7fffffffu;
    uint32_t nan = 0x7c00u | ((a & 0x7fffffu) >> 13);
    nan += nan == 0x7c00u;
    float magnitude;
    memcpy(&magnitude, &a, sizeof magnitude);
    const float shifted = magnitude + 0.5f;
    uint32_t shifted_bits;
    memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
    const uint32_t subnormal = shifted_bits - 0x3f000000u;
    /* - (127 - 15) << 23 rebiases the exponent; 0xfff plus the kept lsb rounds to even */
    const uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    const uint32_t h = a > 0x7f800000u ? nan : a >= 0x47800000u ? 0x7c00u
                     : a < 0x38800000u ? subnormal : normal;
    return (uint16_t)(sign | h);
}

/* float32 bits -> bfloat16 bits as ml_dtypes rounds (nearest even on the upper 16 bits,
 * subnormals kept); every NaN becomes the quiet NaN 0x7fc0 with its sign. */
static inline uint16_t f32_bits_to_bf16(uint32_t f)
{
    const uint16_t rounded = (uint16_t)((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
    return (f & 0x7fffffffu) > 0x7f800000u ? (uint16_t)(((f >> 16) & 0x8000u) | 0x7fc0u)
                                           : rounded;
}

#define CONV_F16_F32(h) f16_to_f32_bits(h)
#define CONV_F32_F16(f) f32_bits_to_f16(f)
#define CONV_F32_BF16(f) f32_bits_to_bf16(f)
#define CONV_BF16_F32(h) ((uint32_t)(h) << 16)
/* ml_dtypes widens bfloat16 to float64 through float32 (a C cast: a NaN comes out quiet) */
#define CONV_BF16_F64(h) ((double)bf16_to_f32(h))
static inline float bf16_to_f32(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#if HAVE_X86_CLONES
/* float16 <-> float32 16 at a time by the AVX-512F conversions, which give the bits of the
 * integer code above for every number (exact widening; nearest-even narrowing); a block
 * holding a NaN takes the integer code, whose NaN rule is NumPy's. They convert the leading
 * multiple of 16 elements of a unit-stride row and return how many that is. */
__attribute__((target("avx512f"))) static ptrdiff_t f32_to_f16_blocks(uint16_t *o,
                                                                       const uint32_t *a,
                                                                       ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps((const float *)(a + i));
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) {
            for (int j = 0; j < 16; j++) o[i + j] = f32_bits_to_f16(a[i + j]);
            continue;
        }
        const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(o + i), h);
    }
    return i;
}

/* float32 -> bfloat16 16 at a time: f32_bits_to_bf16 in AVX-512F integer instructions (GCC
 * does not vectorize its narrowing store well). */
__attribute__((target("avx512f"))) static ptrdiff_t f32_to_bf16_blocks(uint16_t *o,
                                                                        const uint32_t *a,
                                                                        ptrdiff_t n)
{
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i sign = _mm512_set1_epi32(0x8000), quiet_nan = _mm512_set1_epi32(0x7fc0);
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i x = _mm512_loadu_si512((const void *)(a + i));
        const __m512i high = _mm512_srli_epi32(x, 16);
        const __m512i lsb = _mm512_and_si512(high, one);
        const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, bias),
                                                                   lsb), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, magnitude), inf);
        const __m512i nan_bits = _mm512_or_si512(_mm512_and_si512(high, sign), quiet_nan);
        const __m512i h = _mm512_mask_blend_epi32(nan, rounded, nan_bits);
        _mm256_storeu_si256((__m256i *)(o + i), _mm512_cvtepi32_epi16(h));
    }
    return i;
}

__attribute__((target("avx512f"))) static ptrdiff_t f16_to_f32_blocks(uint32_t *o,
                                                                       const uint16_t *a,
                                                                       ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i)));
        if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) {
            for (int j = 0; j < 16; j++) o[i + j] = f16_to_f32_bits(a[i + j]);
            continue;
        }
        _mm512_storeu_ps((float *)(o + i), x);
    }
    return i;
}

/* The same 8 at a time with F16C (AVX2 machines; a CPU with AVX2 but no F16C converts none
 * here and leaves the row to the integer code). 4M elements, AMD EPYC Zen 3, A/B against
 * the integer code: float32 -> float16 1.86x, float16 -> float32 1.41x. */
static int g_f16c = -1; /* whether the CPU has F16C: -1 until asked */

static int have_f16c(void)
{
    if (g_f16c < 0) {
        __builtin_cpu_init();
        g_f16c = __builtin_cpu_supports("f16c") != 0;
    }
    return g_f16c;
}

__attribute__((target("avx2,f16c"))) static ptrdiff_t f32_to_f16_blocks8(uint16_t *o,
                                                                          const uint32_t *a,
                                                                          ptrdiff_t n)
{
    if (!have_f16c()) return 0;
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps((const float *)(a + i));
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            for (int j = 0; j < 8; j++) o[i + j] = f32_bits_to_f16(a[i + j]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(o + i),
                         _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}

__attribute__((target("avx2,f16c"))) static ptrdiff_t f16_to_f32_blocks8(uint32_t *o,
                                                                          const uint16_t *a,
                                                                          ptrdiff_t n)
{
    if (!have_f16c()) return 0;
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))) {
            for (int j = 0; j < 8; j++) o[i + j] = f16_to_f32_bits(a[i + j]);
            continue;
        }
        _mm256_storeu_ps((float *)(o + i), x);
    }
    return i;
}
#endif

/* Every row, defined for one instruction set (CAST_ISA, CAST_ATTR); float32 moves as its
 * bits where it is not converted (a signalling NaN must not pass through a float register). */
#define DEFINE_CAST_ROWS                                                                     \
    DEFINE_CAST_ROW(f32_f32, uint32_t, uint32_t, CONV_ID)                                   \
    DEFINE_CAST_ROW(f32_f64, float, double, CONV_ID)                                        \
    DEFINE_CAST_ROW(f32_i64, float, int64_t, CONV_F_I64)                                    \
    DEFINE_CAST_ROW(f32_i32, float, int32_t, CONV_F_I32)                                    \
    DEFINE_CAST_ROW(f32_b, float, uint8_t, CONV_BOOL)                                       \
    DEFINE_CAST_ROW(f64_f32, double, float, CONV_ID)                                        \
    DEFINE_CAST_ROW(f64_f64, uint64_t, uint64_t, CONV_ID)                                   \
    DEFINE_CAST_ROW(f64_i64, double, int64_t, CONV_F_I64)                                   \
    DEFINE_CAST_ROW(f64_i32, double, int32_t, CONV_F_I32)                                   \
    DEFINE_CAST_ROW(f64_b, double, uint8_t, CONV_BOOL)                                      \
    DEFINE_CAST_ROW(i64_f32, int64_t, float, CONV_ID)                                       \
    DEFINE_CAST_ROW(i64_f64, int64_t, double, CONV_ID)                                      \
    DEFINE_CAST_ROW(i64_i64, int64_t, int64_t, CONV_ID)                                     \
    DEFINE_CAST_ROW(i64_i32, int64_t, int32_t, CONV_I64_I32)                                \
    DEFINE_CAST_ROW(i64_b, int64_t, uint8_t, CONV_BOOL)                                     \
    DEFINE_CAST_ROW(i32_f32, int32_t, float, CONV_ID)                                       \
    DEFINE_CAST_ROW(i32_f64, int32_t, double, CONV_ID)                                      \
    DEFINE_CAST_ROW(i32_i64, int32_t, int64_t, CONV_ID)                                     \
    DEFINE_CAST_ROW(i32_i32, int32_t, int32_t, CONV_ID)                                     \
    DEFINE_CAST_ROW(i32_b, int32_t, uint8_t, CONV_BOOL)                                     \
    DEFINE_CAST_ROW(b_f32, uint8_t, float, CONV_FROM_BOOL)                                  \
    DEFINE_CAST_ROW(b_f64, uint8_t, double, CONV_FROM_BOOL)                                 \
    DEFINE_CAST_ROW(b_i64, uint8_t, int64_t, CONV_FROM_BOOL)                                \
    DEFINE_CAST_ROW(b_i32, uint8_t, int32_t, CONV_FROM_BOOL)                                \
    DEFINE_CAST_ROW(b_b, uint8_t, uint8_t, CONV_ID) /* bytes as they are, as NumPy copies */ \
    DEFINE_CAST_ROW_AFTER(f16_f32, uint16_t, uint32_t, CONV_F16_F32, HALF_BLOCKS_F16_F32)   \
    DEFINE_CAST_ROW_AFTER(f32_f16, uint32_t, uint16_t, CONV_F32_F16, HALF_BLOCKS_F32_F16)   \
    DEFINE_CAST_ROW(bf16_f32, uint16_t, uint32_t, CONV_BF16_F32)                            \
    DEFINE_CAST_ROW_AFTER(f32_bf16, uint32_t, uint16_t, CONV_F32_BF16, HALF_BLOCKS_F32_BF16) \
    DEFINE_CAST_ROW(bf16_f64, uint16_t, double, CONV_BF16_F64)                              \
    DEFINE_CAST_ROW(u8_f32, uint8_t, float, CONV_ID)                                        \
    DEFINE_CAST_ROW(u8_f64, uint8_t, double, CONV_ID)                                       \
    DEFINE_CAST_ROW(u8_i64, uint8_t, int64_t, CONV_ID)                                      \
    DEFINE_CAST_ROW(h_h, uint16_t, uint16_t, CONV_ID) /* float16 / bfloat16 copies: the bits */

#define CAST_ROW_NAME(NAME, ISA) CAST_ROW_NAME_(NAME, ISA)
#define CAST_ROW_NAME_(NAME, ISA) row_cast_##NAME##_##ISA
#define CAST_ISA baseline
#define CAST_ATTR
#define HALF_BLOCKS_F16_F32 NONE_FIRST
#define HALF_BLOCKS_F32_F16 NONE_FIRST
#define HALF_BLOCKS_F32_BF16 NONE_FIRST
DEFINE_CAST_ROWS
#undef CAST_ISA
#undef CAST_ATTR
#if HAVE_X86_CLONES
/* (the float16 / bfloat16 conversions are a dozen integer operations per element: 16 lanes
 * at a time they keep up with memory, 2 at a time they do not) */
#undef HALF_BLOCKS_F16_F32
#undef HALF_BLOCKS_F32_F16
#define HALF_BLOCKS_F16_F32 f16_to_f32_blocks8
#define HALF_BLOCKS_F32_F16 f32_to_f16_blocks8
#define CAST_ISA avx2
#define CAST_ATTR __attribute__((target("avx2")))
DEFINE_CAST_ROWS
#undef CAST_ISA
#undef CAST_ATTR
#undef HALF_BLOCKS_F16_F32
#undef HALF_BLOCKS_F32_F16
#undef HALF_BLOCKS_F32_BF16
#define HALF_BLOCKS_F16_F32 f16_to_f32_blocks
#define HALF_BLOCKS_F32_F16 f32_to_f16_blocks
#define HALF_BLOCKS_F32_BF16 f32_to_bf16_blocks
#define CAST_ISA avx512f
#define CAST_ATTR __attribute__((target("avx512f")))
DEFINE_CAST_ROWS
#undef CAST_ISA
#undef CAST_ATTR
#endif

/* [from][to]; NULL: no C conversion (the reference converts). Same-type copies move bits.
 * Left out: float to uint8 (C leaves an out-of-range value undefined), float64 to and from
 * float16 / bfloat16 (NumPy rounds float64 straight to float16, ml_dtypes to bfloat16: not
 * one float32 step), and pairs rare in practice. */
#define CAST_TABLE(ISA) {                                                                   \
    [T_F32] = {                                                                             \
        [T_F32] = CAST_ROW_NAME(f32_f32, ISA),                                              \
        [T_F64] = CAST_ROW_NAME(f32_f64, ISA),                                              \
        [T_I64] = CAST_ROW_NAME(f32_i64, ISA),                                              \
        [T_I32] = CAST_ROW_NAME(f32_i32, ISA),                                              \
        [T_BOOL] = CAST_ROW_NAME(f32_b, ISA),                                               \
        [T_F16] = CAST_ROW_NAME(f32_f16, ISA),                                              \
        [T_BF16] = CAST_ROW_NAME(f32_bf16, ISA),                                            \
    },                                                                                      \
    [T_F64] = {                                                                             \
        [T_F32] = CAST_ROW_NAME(f64_f32, ISA),                                              \
        [T_F64] = CAST_ROW_NAME(f64_f64, ISA),                                              \
        [T_I64] = CAST_ROW_NAME(f64_i64, ISA),                                              \
        [T_I32] = CAST_ROW_NAME(f64_i32, ISA),                                              \
        [T_BOOL] = CAST_ROW_NAME(f64_b, ISA),                                               \
    },                                                                                      \
    [T_I64] = {                                                                             \
        [T_F32] = CAST_ROW_NAME(i64_f32, ISA),                                              \
        [T_F64] = CAST_ROW_NAME(i64_f64, ISA),                                              \
        [T_I64] = CAST_ROW_NAME(i64_i64, ISA),                                              \
        [T_I32] = CAST_ROW_NAME(i64_i32, ISA),                                              \
        [T_BOOL] = CAST_ROW_NAME(i64_b, ISA),                                               \
    },                                                                                      \
    [T_I32] = {                                                                             \
        [T_F32] = CAST_ROW_NAME(i32_f32, ISA),                                              \
        [T_F64] = CAST_ROW_NAME(i32_f64, ISA),                                              \
        [T_I64] = CAST_ROW_NAME(i32_i64, ISA),                                              \
        [T_I32] = CAST_ROW_NAME(i32_i32, ISA),                                              \
        [T_BOOL] = CAST_ROW_NAME(i32_b, ISA),                                               \
    },                                                                                      \
    [T_BOOL] = {                                                                            \
        [T_F32] = CAST_ROW_NAME(b_f32, ISA),                                                \
        [T_F64] = CAST_ROW_NAME(b_f64, ISA),                                                \
        [T_I64] = CAST_ROW_NAME(b_i64, ISA),                                                \
        [T_I32] = CAST_ROW_NAME(b_i32, ISA),                                                \
        [T_BOOL] = CAST_ROW_NAME(b_b, ISA),                                                 \
    },                                                                                      \
    [T_F16] = {                                                                             \
        [T_F32] = CAST_ROW_NAME(f16_f32, ISA),                                              \
        [T_F16] = CAST_ROW_NAME(h_h, ISA),                                                  \
    },                                                                                      \
    [T_BF16] = {                                                                            \
        [T_F32] = CAST_ROW_NAME(bf16_f32, ISA),                                             \
        [T_F64] = CAST_ROW_NAME(bf16_f64, ISA),                                             \
        [T_BF16] = CAST_ROW_NAME(h_h, ISA),                                                 \
    },                                                                                      \
    [T_U8] = {                                                                              \
        [T_F32] = CAST_ROW_NAME(u8_f32, ISA),                                               \
        [T_F64] = CAST_ROW_NAME(u8_f64, ISA),                                               \
        [T_I64] = CAST_ROW_NAME(u8_i64, ISA),                                               \
        [T_U8] = CAST_ROW_NAME(b_b, ISA),                                                   \
    },                                                                                      \
}

#if HAVE_X86_CLONES
static const row_fn CAST_ROWS[N_ISAS][N_TYPES][N_TYPES] = {
    CAST_TABLE(baseline), CAST_TABLE(avx2), CAST_TABLE(avx512f)};
#else
static const row_fn CAST_ROWS[N_ISAS][N_TYPES][N_TYPES] = {CAST_TABLE(baseline)};
#endif

/* ==== the loop over a strided shape ======================================================= */


typedef struct {
    int ndim; /* >= 1 */
    int nops; /* operands, out first */
    ptrdiff_t shape[MAX_NDIM];
    ptrdiff_t strides[MAX_OPERANDS][MAX_NDIM];
    ptrdiff_t offset[MAX_OPERANDS];
    size_t itemsize[MAX_OPERANDS];
    char *buf[MAX_OPERANDS];
    row_fn row;
    double prm[2];
} loop_t;

/* Run linear indices [start, end) in row-major order. Offsets stay element counts and a
 * pointer is formed only for elements that are visited (all inside the checked bounds). */
static void run_range(const loop_t *L, ptrdiff_t start, ptrdiff_t end)
{
    const int nd = L->ndim, last = nd - 1, nops = L->nops;
    ptrdiff_t idx[MAX_NDIM], off[MAX_OPERANDS], inner_s[MAX_OPERANDS];
    char *ptr[MAX_OPERANDS];
    ptrdiff_t rem = start;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % L->shape[d];
        rem /= L->shape[d];
    }
    for (int k = 0; k < nops; k++) {
        off[k] = L->offset[k];
        for (int d = 0; d < nd; d++) off[k] += idx[d] * L->strides[k][d];
        inner_s[k] = L->strides[k][last];
    }
    const ptrdiff_t inner = L->shape[last];
    while (start < end) {
        ptrdiff_t count = inner - idx[last];
        if (count > end - start) count = end - start;
        for (int k = 0; k < nops; k++) ptr[k] = L->buf[k] + (size_t)off[k] * L->itemsize[k];
        L->row(count, ptr, inner_s, L->prm);
        start += count;
        if (start >= end) break;
        for (int k = 0; k < nops; k++) off[k] -= idx[last] * L->strides[k][last];
        idx[last] = 0;
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            for (int k = 0; k < nops; k++) off[k] += L->strides[k][d];
            if (idx[d] < L->shape[d]) break;
            for (int k = 0; k < nops; k++) off[k] -= L->shape[d] * L->strides[k][d];
            idx[d] = 0;
        }
    }
}

static void run(const loop_t *L, ptrdiff_t numel, ptrdiff_t parallel_min)
{
#ifdef _OPENMP
    if (worth_parallel((double)numel, (double)parallel_min)) {
        const ptrdiff_t block = even_block(numel, max_threads());
        const ptrdiff_t nblocks = (numel + block - 1) / block;
#pragma omp parallel for schedule(static)
        for (ptrdiff_t i = 0; i < nblocks; i++) {
            ptrdiff_t lo = i * block, hi = lo + block;
            run_range(L, lo, hi < numel ? hi : numel);
        }
        return;
    }
#endif
    (void)parallel_min;
    run_range(L, 0, numel);
}


/* ==== argument checking =================================================================== */

/* The element type a buffer holds (T_*), or -1 with TypeError set. */
static int buffer_type(const Py_buffer *view, const char *what)
{
    Py_ssize_t size = view->itemsize;
    switch (format_char(view)) {
    case 'f': if (size == 4) return T_F32; break;
    case 'd': if (size == 8) return T_F64; break;
    case 'q': case 'l': if (size == 8) return T_I64; break;
    case 'i': if (size == 4) return T_I32; break;
    case '?': if (size == 1) return T_BOOL; break;
    case 'e': if (size == 2) return T_F16; break;
    case 'H': if (size == 2) return T_BF16; break; /* (bfloat16's bits) */
    case 'B': if (size == 1) return T_U8; break;
    }
    PyErr_Format(PyExc_TypeError, "%s holds elements of buffer format '%s' (itemsize %zd), "
                 "not one of float32, float64, int64, int32, bool, float16, bfloat16 (as "
                 "uint16 bits), uint8", what,
                 view->format ? view->format : "B", size);
    return -1;
}

/* Parse the shape (args[0]) into L; returns numel or -1 with an exception set. */
static long long parse_loop_shape(loop_t *L, PyObject *shape_obj, long long *shape, int *ndim)
{
    const long long numel = parse_shape(shape_obj, shape, ndim);
    if (numel < 0) return -1;
    memset(L, 0, sizeof *L);
    L->ndim = *ndim ? *ndim : 1; /* a 0-dim operation is a 1-dim one of one element */
    for (int d = 0; d < L->ndim; d++) L->shape[d] = *ndim ? (ptrdiff_t)shape[d] : 1;
    return numel;
}

/* Operand k from (buffer, offset, strides): acquire the buffer (out writable), check its
 * element type is `want` and every visited element lies inside it. */
static int parse_operand(loop_t *L, Py_buffer *view, int k, PyObject *buf, PyObject *off_obj,
                         PyObject *strides_obj, int want, const char *what,
                         const long long *shape, int ndim)
{
    long long strides[MAX_NDIM], offset;
    if (get_buffer(buf, view, k == 0, what) < 0) return -1;
    int t = buffer_type(view, what);
    if (t >= 0 && t != want) {
        PyErr_Format(PyExc_TypeError, "%s must hold %s elements, not %s", what,
                     TYPE_NAMES[want], TYPE_NAMES[t]);
        t = -1;
    }
    if (t < 0 || parse_offset(off_obj, "offset", &offset) < 0 ||
        parse_dims(strides_obj, "strides", ndim, strides, NULL) < 0 ||
        check_view(view, what, offset, ndim, shape, strides) < 0) {
        PyBuffer_Release(view);
        return -1;
    }
    L->buf[k] = (char *)view->buf;
    L->offset[k] = (ptrdiff_t)offset;
    L->itemsize[k] = (size_t)view->itemsize;
    for (int d = 0; d < L->ndim; d++) L->strides[k][d] = ndim ? (ptrdiff_t)strides[d] : 0;
    return 0;
}

static int parse_int(PyObject *obj, const char *what, long lo, long hi, long *dst)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int", what);
        return -1;
    }
    *dst = PyLong_AsLong(obj);
    if ((*dst == -1 && PyErr_Occurred()) || *dst < lo || *dst >= hi) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s is out of range", what);
        return -1;
    }
    return 0;
}

static void release(Py_buffer *views, int n)
{
    for (int k = 0; k < n; k++) PyBuffer_Release(&views[k]);
}

/* ==== entry points ======================================================================== */

static const char *const OPERAND_NAMES[MAX_OPERANDS] = {"out", "input 1", "input 2", "input 3"};

static PyObject *py_elementwise(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    long op;
    if (nargs < 1 || parse_int(args[0], "op", 0, N_OPS, &op) < 0) {
        if (nargs < 1) PyErr_SetString(PyExc_TypeError, "elementwise() needs an op code");
        return NULL;
    }
    const int nops = 1 + N_INPUTS[op];
    if (nargs != 2 + 3 * nops + 2) {
        PyErr_Format(PyExc_TypeError, "elementwise() with this op takes %d arguments (op, "
                     "shape, %d (buffer, offset, strides) operands, p0, p1), got %zd",
                     2 + 3 * nops + 2, nops, nargs);
        return NULL;
    }
    double prm[2];
    for (int i = 0; i < 2; i++) {
        prm[i] = PyFloat_AsDouble(args[2 + 3 * nops + i]);
        if (prm[i] == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "p0 and p1 must be real numbers");
            return NULL;
        }
    }
    loop_t L;
    long long shape[MAX_NDIM];
    int ndim;
    long long numel = parse_loop_shape(&L, args[1], shape, &ndim);
    if (numel < 0) return NULL;
    Py_buffer views[MAX_OPERANDS];
    int type = -1;
    for (int k = 0; k < nops; k++) {
        PyObject *const *arg = args + 2 + 3 * k;
        int want;
        if (k == 0) {
            /* out decides the element type: float32 or float64 */
            Py_buffer probe;
            if (get_buffer(arg[0], &probe, 1, "out") < 0) return NULL;
            type = buffer_type(&probe, "out");
            PyBuffer_Release(&probe);
            if (type < 0) return NULL;
            if (type != T_F32 && type != T_F64) {
                PyErr_Format(PyExc_TypeError, "out must hold float32 or float64 elements, "
                             "not %s", TYPE_NAMES[type]);
                return NULL;
            }
            want = type;
        } else {
            want = (op == OP_WHERE && k == 1) ? T_BOOL : type;
        }
        if (parse_operand(&L, &views[k], k, arg[0], arg[1], arg[2], want, OPERAND_NAMES[k],
                          shape, ndim) < 0) {
            release(views, k);
            return NULL;
        }
    }
    L.nops = nops;
    L.row = ROWS[g_isa][type][op];
    L.prm[0] = prm[0];
    L.prm[1] = prm[1];
    g_calls++;
    if (numel > 0) {
        ptrdiff_t parallel_min = IS_MATH[op] ? PARALLEL_MIN_MATH : PARALLEL_MIN_CHEAP;
        Py_BEGIN_ALLOW_THREADS
        run(&L, (ptrdiff_t)numel, parallel_min);
        Py_END_ALLOW_THREADS
    }
    release(views, nops);
    Py_RETURN_NONE;
}

static PyObject *py_cast(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "cast() takes 9 arguments (shape, out, out_type, "
                     "out_offset, out_strides, src, src_type, src_offset, src_strides), got %zd",
                     nargs);
        return NULL;
    }
    long types[2];
    if (parse_int(args[2], "out_type", 0, N_TYPES, &types[0]) < 0 ||
        parse_int(args[6], "src_type", 0, N_TYPES, &types[1]) < 0)
        return NULL;
    loop_t L;
    long long shape[MAX_NDIM];
    int ndim;
    long long numel = parse_loop_shape(&L, args[0], shape, &ndim);
    if (numel < 0) return NULL;
    Py_buffer views[2];
    static const char *const names[2] = {"out", "src"};
    for (int k = 0; k < 2; k++) {
        PyObject *const *arg = args + 1 + 4 * k;
        if (parse_operand(&L, &views[k], k, arg[0], arg[2], arg[3], (int)types[k], names[k],
                          shape, ndim) < 0) {
            release(views, k);
            return NULL;
        }
    }
    L.nops = 2;
    L.row = CAST_ROWS[g_isa][types[1]][types[0]];
    if (L.row == NULL) {
        release(views, 2);
        PyErr_Format(PyExc_TypeError, "cast(): no conversion from %s to %s",
                     TYPE_NAMES[types[1]], TYPE_NAMES[types[0]]);
        return NULL;
    }
    g_calls++;
    if (numel > 0) {
        Py_BEGIN_ALLOW_THREADS
        run(&L, (ptrdiff_t)numel, PARALLEL_MIN_CHEAP);
        Py_END_ALLOW_THREADS
    }
    release(views, 2);
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"elementwise", (PyCFunction)(void (*)(void))py_elementwise, METH_FASTCALL,
     "elementwise(op, shape, out, out_offset, out_strides, [x, x_offset, x_strides]..., p0, "
     "p1): out = op(inputs) for float32/float64 buffers (where's condition: bool)."},
    {"cast", (PyCFunction)(void (*)(void))py_cast, METH_FASTCALL,
     "cast(shape, out, out_type, out_offset, out_strides, src, src_type, src_offset, "
     "src_strides): strided conversion between buffers of the T_* types (the pairs in "
     "CASTS)."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._unary",
    .m_doc = "Strided unary math, activations, where, clamp and casts for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__unary(void)
{
    if (init_module_state() < 0) return NULL;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    /* the AVX2 clone also uses FMA (tanh, erf): without it, the baseline */
    if (g_best_isa == ISA_AVX2 && !__builtin_cpu_supports("fma")) g_best_isa = g_isa = ISA_BASELINE;
#endif
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    static const char *const OP_NAMES[N_OPS] = {
        "NEG", "ABS", "RELU", "SQRT", "RSQRT", "LEAKY_RELU", "SQUARE", "RECIPROCAL", "EXP",
        "LOG", "TANH", "SIGMOID",
        "SILU", "GELU", "GELU_TANH", "ERF", "CLAMP_MIN", "CLAMP_MAX", "TANH_BACKWARD",
        "SIGMOID_BACKWARD", "THRESHOLD_BACKWARD", "GELU_BACKWARD", "GELU_TANH_BACKWARD",
        "SILU_BACKWARD", "CLAMP", "WHERE", "ADDCMUL", "ADDCDIV", "LERP"};
    static const char *const T_CONSTS[N_TYPES] = {"T_F32", "T_F64", "T_I64", "T_I32",
                                                  "T_BOOL", "T_F16", "T_BF16", "T_U8"};
    for (int i = 0; i < N_OPS; i++)
        if (PyModule_AddIntConstant(m, OP_NAMES[i], i) < 0) goto fail;
    for (int i = 0; i < N_TYPES; i++)
        if (PyModule_AddIntConstant(m, T_CONSTS[i], i) < 0) goto fail;
    /* CASTS: the (from, to) type pairs cast() converts */
    PyObject *casts = PyList_New(0);
    for (int from = 0; casts && from < N_TYPES; from++)
        for (int to = 0; casts && to < N_TYPES; to++) {
            if (CAST_ROWS[0][from][to] == NULL) continue;
            PyObject *pair = Py_BuildValue("(ii)", from, to);
            if (pair == NULL || PyList_Append(casts, pair) < 0) Py_CLEAR(casts);
            Py_XDECREF(pair);
        }
    if (casts == NULL || PyModule_AddObjectRef(m, "CASTS", casts) < 0) {
        Py_XDECREF(casts);
        goto fail;
    }
    Py_DECREF(casts);
    if (PyModule_AddIntConstant(m, "MAX_NDIM", MAX_NDIM) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
