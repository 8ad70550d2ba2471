/* reftorch_cpu._random: PyTorch's CPU random streams in C (uniform, normal, integers,
 * bernoulli), drawing from the very mt19937 engine the reference draws from.
 *
 * The engine is the NumPy MT19937 bit generator of a `reftorch.Generator`. Kernels receive
 * that object (which owns the state while the call holds it) and reach the state through
 * its capsule ("BitGenerator", NumPy's public bitgen_t interface), drawing 32-bit words:
 *   - by default one word per `next_uint32(state)` call, the interface NumPy documents;
 *   - in "direct" mode (enabled by the Python side only after it checked, at import, that
 *     this NumPy keeps MT19937's state as {uint32 key[624]; int pos} and that both ways
 *     draw the same words; used only for objects of NumPy's MT19937 type), by running the
 *     twist and tempering over the state in place, 624 words at a time, several times
 *     faster.
 * Either way the state advances exactly as if NumPy had drawn the words, so calls served
 * here and by the reference continue one stream. 64-bit draws are two words, high first.
 * The caller holds the bit generator's lock; the GIL is released while drawing.
 *
 * Words become values as PyTorch's CPU kernels turn them (see reftorch/_ops/sampling.py):
 *   uniform   u = low 24 bits of a word * 2**-24 (float32, float16, bfloat16; computed in
 *             float32) or low 53 bits of a 64-bit draw * 2**-53 (float64); value =
 *             fma(u, high - low, low); a value equal to `high` in the dtype becomes `low`.
 *   normal    (contiguous, >= 16 elements) one uniform per element, then blocks of 16:
 *             radius sqrt(-2 log(1 - u[j])), angle 2 pi u[j + 8], j < 8; the block becomes
 *             fma(radius * cos, std, mean) then fma(radius * sin, std, mean). A partial last
 *             block: 16 more uniforms, transformed into the last 16 elements. float32 uses
 *             the Cephes log/sincos of PyTorch's AVX2 kernel (same operations, same fused
 *             multiply-adds: AVX2 intrinsics, or scalar fmaf calls on other CPUs, bit for bit
 *             the same); float64 calls the C library's log, cos and sin, as PyTorch does.
 *   integers  low + draw % span (32- or 64-bit draws, as the caller says), cast to the dtype.
 *   bernoulli 1 where a float64 uniform (53 bits) is below p, else 0.
 *   randperm  0 .. n-1, then position i swaps with i + word % (n - i), i = 0 .. n-2.
 * Draws are sequential (one stream). Only the normal transform runs on several OpenMP
 * threads, over whole 16-blocks, so results never depend on the thread count; every
 * operation is exactly rounded, so they do not depend on the instruction set either.
 * Built with -ffp-contract=off: only the fmaf/fma calls written below are fused.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#else
#define HAVE_X86 0
#endif
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- the engine: NumPy's bit generator ------------------------------------------------- */

/* numpy/random/bitgen.h (NumPy's public C API for bit generators). */
typedef struct {
    void *state;
    uint64_t (*next_uint64)(void *state);
    uint32_t (*next_uint32)(void *state);
    double (*next_double)(void *state);
    uint64_t (*next_raw)(void *state);
} bitgen_t;

/* NumPy's MT19937 state (numpy/random/src/mt19937/mt19937.h): the 624 state words and the
 * index of the word returned next (624: twist before the next draw). */
#define MT_N 624
#define MT_M 397
typedef struct {
    uint32_t key[MT_N];
    int pos;
} mt_state;

static int g_direct = 0; /* draw by running mt19937 over MT19937 states in place */

/* Where a kernel draws from: the bit generator, and whether to run mt19937 over its state
 * directly (only for NumPy's MT19937 itself, and only once the layout check enabled it). */
typedef struct {
    bitgen_t *g;
    int direct;
} stream_t;

/* The twist: the next 624 state words from the current ones (the standard mt19937
 * recurrence). The second loop reads words the first rewrote, 227 back: far enough apart
 * for the compiler to vectorize both loops. */
static ALWAYS_INLINE void twist_body(uint32_t *key)
{
#define MT_MIX(a, b, c) ((c) ^ ((((a) & 0x80000000u) | ((b) & 0x7fffffffu)) >> 1) ^ \
                         (0x9908b0dfu & (0u - ((b) & 1u))))
    for (int i = 0; i < MT_N - MT_M; i++) key[i] = MT_MIX(key[i], key[i + 1], key[i + MT_M]);
    for (int i = MT_N - MT_M; i < MT_N - 1; i++)
        key[i] = MT_MIX(key[i], key[i + 1], key[i + MT_M - MT_N]);
    key[MT_N - 1] = MT_MIX(key[MT_N - 1], key[0], key[MT_M - 1]);
#undef MT_MIX
}

static ALWAYS_INLINE void temper_body(const uint32_t *restrict src, uint32_t *restrict dst,
                                      size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t y = src[i];
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c5680u;
        y ^= (y << 15) & 0xefc60000u;
        dst[i] = y ^ (y >> 18);
    }
}

/* ---- the transforms that are worth vectorizing ----------------------------------------- */

static ALWAYS_INLINE float unit_float(uint32_t w) { return (float)(w & 0xffffffu) * 0x1p-24f; }

/* The low 53 bits of the 64-bit draw high:low, times 2**-53. Exact: high's low 21 bits and
 * low's 32 bits scale into disjoint bit ranges, so the sum of the two parts is exact; built
 * from int32 conversions, which vectorize (uint64 ones do not before AVX-512DQ). */
static ALWAYS_INLINE double unit_double(uint32_t high, uint32_t low)
{
    double high_part = (double)(int32_t)(high & 0x1fffffu) * 0x1p-21;
    double low_part = ((double)(int32_t)(low ^ 0x80000000u) + 0x1p31) * 0x1p-53;
    return high_part + low_part;
}

/* bernoulli: 1 where bits < threshold (see bernoulli_job), bits the low 53 bits of a draw. */
static ALWAYS_INLINE void bernoulli_hits_body(const uint32_t *restrict w,
                                              uint8_t *restrict hits, size_t n,
                                              uint64_t threshold)
{
    const uint64_t mask = (UINT64_C(1) << 53) - 1;
    for (size_t i = 0; i < n; i++)
        hits[i] = (((uint64_t)w[2 * i] << 32 | w[2 * i + 1]) & mask) < threshold;
}

/* float32 uniforms: fma(u, span, low), a value equal to `high` becoming `low`. rand()'s own
 * case (low 0, span 1, so high 1) is u itself, which fma(u, 1, 0) also is. */
static ALWAYS_INLINE void uniform_f32_body(const uint32_t *restrict w, float *restrict out,
                                           size_t n, float low, float span, float high)
{
    if (low == 0.0f && span == 1.0f) {
        for (size_t i = 0; i < n; i++) out[i] = unit_float(w[i]); /* below 1 = high */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float v = fmaf(unit_float(w[i]), span, low);
        out[i] = v == high ? low : v;
    }
}

/* float64 uniforms from pairs of words (high word first). */
static ALWAYS_INLINE void uniform_f64_body(const uint32_t *restrict w, double *restrict out,
                                           size_t n, double low, double span, double high)
{
    if (low == 0.0 && span == 1.0) {
        for (size_t i = 0; i < n; i++) out[i] = unit_double(w[2 * i], w[2 * i + 1]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double v = fma(unit_double(w[2 * i], w[2 * i + 1]), span, low);
        out[i] = v == high ? low : v;
    }
}

#define DEFINE_CLONES(ISA, ATTR)                                                             \
    ATTR static void twist_##ISA(uint32_t *key) { twist_body(key); }                         \
    ATTR static void temper_##ISA(const uint32_t *src, uint32_t *dst, size_t n)              \
    {                                                                                        \
        temper_body(src, dst, n);                                                            \
    }                                                                                        \
    ATTR static void uniform_f32_##ISA(const uint32_t *w, float *out, size_t n, float low,   \
                                       float span, float high)                               \
    {                                                                                        \
        uniform_f32_body(w, out, n, low, span, high);                                        \
    }                                                                                        \
    ATTR static void uniform_f64_##ISA(const uint32_t *w, double *out, size_t n, double low, \
                                       double span, double high)                             \
    {                                                                                        \
        uniform_f64_body(w, out, n, low, span, high);                                        \
    }                                                                                        \
    ATTR static void bernoulli_hits_##ISA(const uint32_t *w, uint8_t *hits, size_t n,        \
                                          uint64_t threshold)                                \
    {                                                                                        \
        bernoulli_hits_body(w, hits, n, threshold);                                          \
    }

typedef struct {
    void (*twist)(uint32_t *key);
    void (*temper)(const uint32_t *src, uint32_t *dst, size_t n);
    void (*uniform_f32)(const uint32_t *w, float *out, size_t n, float low, float span,
                        float high);
    void (*uniform_f64)(const uint32_t *w, double *out, size_t n, double low, double span,
                        double high);
    void (*bernoulli_hits)(const uint32_t *w, uint8_t *hits, size_t n, uint64_t threshold);
} clones_t;

DEFINE_CLONES(baseline, )
#if HAVE_X86
DEFINE_CLONES(avx2, TARGET_AVX2)
DEFINE_CLONES(avx512f, TARGET_AVX512)
#define CLONES_OF(ISA) \
    {twist_##ISA, temper_##ISA, uniform_f32_##ISA, uniform_f64_##ISA, bernoulli_hits_##ISA}
static const clones_t CLONES[N_ISAS] = {CLONES_OF(baseline), CLONES_OF(avx2),
                                        CLONES_OF(avx512f)};
#else
static const clones_t CLONES[N_ISAS] = {{twist_baseline, temper_baseline, uniform_f32_baseline,
                                         uniform_f64_baseline, bernoulli_hits_baseline}};
#endif

/* ---- drawing ------------------------------------------------------------------------- */

/* n 32-bit words from the engine into dst, exactly as n calls of next_uint32 would. */
static void draw_words(const stream_t *s, uint32_t *dst, size_t n)
{
    if (!s->direct) {
        for (size_t i = 0; i < n; i++) dst[i] = s->g->next_uint32(s->g->state);
        return;
    }
    const clones_t *K = &CLONES[g_isa];
    mt_state *st = (mt_state *)s->g->state;
    while (n > 0) {
        if (st->pos >= MT_N) {
            K->twist(st->key);
            st->pos = 0;
        }
        size_t k = (size_t)(MT_N - st->pos);
        if (k > n) k = n;
        K->temper(st->key + st->pos, dst, k);
        st->pos += (int)k;
        dst += k;
        n -= k;
    }
}

/* ---- float32 normal: the Cephes functions of PyTorch's AVX2 kernel ----------------------- */

/* The float32 values of Cephes' constants (as reftorch/_ops/cephes_float32.py has them). */
static const float LOG_POLY[9] = {0x1.204376p-4f,  -0x1.d7a370p-4f, 0x1.de4a34p-4f,
                                  -0x1.fcba9ep-4f, 0x1.23d37ep-3f,  -0x1.555ca0p-3f,
                                  0x1.999d58p-3f,  -0x1.fffff8p-3f, 0x1.555554p-2f};
#define LN2_HIGH 0x1.63p-1f
#define LN2_LOW (-0x1.bd0106p-13f)
#define SQRT_HALF 0x1.6a09e6p-1f
#define FOUR_OVER_PI 0x1.45f306p+0f
#define PI_4_A 0x1.92p-1f
#define PI_4_B 0x1.fb4p-13f
#define PI_4_C 0x1.4442d2p-25f
#define SIN_P0 (-0x1.9943f2p-13f)
#define SIN_P1 0x1.11073cp-7f
#define SIN_P2 (-0x1.555546p-3f)
#define COS_P0 0x1.99eb9cp-16f
#define COS_P1 (-0x1.6c0c34p-10f)
#define COS_P2 0x1.55554ap-5f
#define TWO_PI_F32 0x1.921fb6p+2f /* 2 pi rounded to float32 */

static ALWAYS_INLINE float bits_to_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static ALWAYS_INLINE uint32_t float_to_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* Cephes logf, one lane: x = m * 2**e, m in [sqrt(1/2), sqrt(2)), log(1 + (m - 1)) by a
 * polynomial, plus e * log 2 in two pieces. */
static float cephes_logf(float x)
{
    uint32_t bits = float_to_bits(x > FLT_MIN ? x : FLT_MIN); /* denormals: the smallest normal */
    float e = (float)((int32_t)(bits >> 23) - 126);
    float m = bits_to_float((bits & 0x007fffffu) | 0x3f000000u); /* in [0.5, 1) */
    int below = m < SQRT_HALF;
    e = e - (below ? 1.0f : 0.0f);
    m = (m - 1.0f) + (below ? m : 0.0f);
    float m2 = m * m;
    float poly = LOG_POLY[0];
    for (int k = 1; k < 9; k++) poly = fmaf(poly, m, LOG_POLY[k]);
    float y = fmaf(poly * m, m2, e * LN2_LOW);
    y = fmaf(m2, -0.5f, y);
    float r = fmaf(e, LN2_HIGH, m + y);
    return x > 0.0f ? r : NAN;
}

/* Cephes sinf/cosf, one lane: reduce by the even multiple j of pi/4 nearest below (in three
 * exact pieces), then the sine or cosine polynomial as the octant needs. */
static void cephes_sincosf(float x, float *sin_out, float *cos_out)
{
    int sin_negative = signbit(x) != 0;
    x = fabsf(x);
    int32_t octant = (int32_t)(x * FOUR_OVER_PI);
    octant = (octant + 1) & ~1;
    float j = (float)octant;
    x = fmaf(j, -PI_4_A, x);
    x = fmaf(j, -PI_4_B, x);
    x = fmaf(j, -PI_4_C, x);
    sin_negative ^= (octant & 4) != 0;
    int cos_negative = ((octant - 2) & 4) == 0;
    int swap = (octant & 2) != 0;
    float z = x * x;
    float cos_poly = fmaf(fmaf(COS_P0, z, COS_P1), z, COS_P2);
    float cos_r = fmaf(cos_poly * z, z, -(z * 0.5f)) + 1.0f;
    float sin_poly = fmaf(fmaf(SIN_P0, z, SIN_P1), z, SIN_P2);
    float sin_r = fmaf(sin_poly * z, x, x);
    float s = swap ? cos_r : sin_r, c = swap ? sin_r : cos_r;
    *sin_out = sin_negative ? -s : s;
    *cos_out = cos_negative ? -c : c;
}

/* One block in place: 16 words in, 16 normals out. */
static void normal_block_f32_scalar(void *block, float mean, float std)
{
    uint32_t w[16];
    memcpy(w, block, sizeof w);
    float *out = (float *)block;
    for (int j = 0; j < 8; j++) {
        float s, c;
        float log_u1 = cephes_logf(1.0f - unit_float(w[j]));
        cephes_sincosf(TWO_PI_F32 * unit_float(w[j + 8]), &s, &c);
        float radius = sqrtf(-2.0f * log_u1);
        out[j] = fmaf(radius * c, std, mean);
        out[j + 8] = fmaf(radius * s, std, mean);
    }
}

#if HAVE_X86
/* The same operations on eight lanes at once, as PyTorch's AVX2 kernel runs them. */
TARGET_AVX2 static ALWAYS_INLINE __m256 logf_avx2(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256i bits = _mm256_castps_si256(_mm256_max_ps(x, _mm256_set1_ps(FLT_MIN)));
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23),
                                                   _mm256_set1_epi32(126)));
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
        _mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000)));
    __m256 below = _mm256_cmp_ps(m, _mm256_set1_ps(SQRT_HALF), _CMP_LT_OQ);
    e = _mm256_sub_ps(e, _mm256_and_ps(below, one));
    m = _mm256_add_ps(_mm256_sub_ps(m, one), _mm256_and_ps(below, m));
    __m256 m2 = _mm256_mul_ps(m, m);
    __m256 poly = _mm256_set1_ps(LOG_POLY[0]);
    for (int k = 1; k < 9; k++) poly = _mm256_fmadd_ps(poly, m, _mm256_set1_ps(LOG_POLY[k]));
    __m256 y = _mm256_fmadd_ps(_mm256_mul_ps(poly, m), m2,
                               _mm256_mul_ps(e, _mm256_set1_ps(LN2_LOW)));
    y = _mm256_fmadd_ps(m2, _mm256_set1_ps(-0.5f), y);
    __m256 r = _mm256_fmadd_ps(e, _mm256_set1_ps(LN2_HIGH), _mm256_add_ps(m, y));
    __m256 positive = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ);
    return _mm256_blendv_ps(_mm256_set1_ps(NAN), r, positive);
}

TARGET_AVX2 static ALWAYS_INLINE void sincosf_avx2(__m256 x, __m256 *sin_out, __m256 *cos_out)
{
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    __m256 sin_sign = _mm256_and_ps(x, sign_bit);
    x = _mm256_andnot_ps(sign_bit, x);
    __m256i octant = _mm256_cvttps_epi32(_mm256_mul_ps(x, _mm256_set1_ps(FOUR_OVER_PI)));
    octant = _mm256_and_si256(_mm256_add_epi32(octant, _mm256_set1_epi32(1)),
                              _mm256_set1_epi32(~1));
    __m256 j = _mm256_cvtepi32_ps(octant);
    x = _mm256_fmadd_ps(j, _mm256_set1_ps(-PI_4_A), x);
    x = _mm256_fmadd_ps(j, _mm256_set1_ps(-PI_4_B), x);
    x = _mm256_fmadd_ps(j, _mm256_set1_ps(-PI_4_C), x);
    /* bit 2 of the octant flips the sine's sign; bit 2 of (octant - 2) clear: the cosine's */
    __m256 flip_sin = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_and_si256(octant, _mm256_set1_epi32(4)), 29));
    sin_sign = _mm256_xor_ps(sin_sign, flip_sin);
    __m256 cos_sign = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_andnot_si256(_mm256_sub_epi32(octant, _mm256_set1_epi32(2)),
                            _mm256_set1_epi32(4)), 29));
    __m256 swap = _mm256_castsi256_ps(_mm256_cmpeq_epi32(
        _mm256_and_si256(octant, _mm256_set1_epi32(2)), _mm256_set1_epi32(2)));
    __m256 z = _mm256_mul_ps(x, x);
    __m256 cos_poly = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_set1_ps(COS_P0), z, _mm256_set1_ps(COS_P1)), z,
        _mm256_set1_ps(COS_P2));
    __m256 cos_r = _mm256_add_ps(
        _mm256_fmadd_ps(_mm256_mul_ps(cos_poly, z), z,
                        _mm256_xor_ps(_mm256_mul_ps(z, _mm256_set1_ps(0.5f)), sign_bit)),
        _mm256_set1_ps(1.0f));
    __m256 sin_poly = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_set1_ps(SIN_P0), z, _mm256_set1_ps(SIN_P1)), z,
        _mm256_set1_ps(SIN_P2));
    __m256 sin_r = _mm256_fmadd_ps(_mm256_mul_ps(sin_poly, z), x, x);
    __m256 s = _mm256_blendv_ps(sin_r, cos_r, swap);
    __m256 c = _mm256_blendv_ps(cos_r, sin_r, swap);
    *sin_out = _mm256_xor_ps(s, sin_sign);
    *cos_out = _mm256_xor_ps(c, cos_sign);
}

TARGET_AVX2 static ALWAYS_INLINE __m256 unit_float_avx2(const void *words)
{
    __m256i w = _mm256_loadu_si256((const __m256i *)words);
    w = _mm256_and_si256(w, _mm256_set1_epi32(0xffffff));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(w), _mm256_set1_ps(0x1p-24f));
}

TARGET_AVX2 static void normal_block_f32_avx2(void *block, float mean, float std)
{
    __m256 u1 = unit_float_avx2(block), u2 = unit_float_avx2((const uint32_t *)block + 8);
    __m256 log_u1 = logf_avx2(_mm256_sub_ps(_mm256_set1_ps(1.0f), u1));
    __m256 s, c;
    sincosf_avx2(_mm256_mul_ps(_mm256_set1_ps(TWO_PI_F32), u2), &s, &c);
    __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), log_u1));
    __m256 vstd = _mm256_set1_ps(std), vmean = _mm256_set1_ps(mean);
    float *out = (float *)block;
    _mm256_storeu_ps(out, _mm256_fmadd_ps(_mm256_mul_ps(radius, c), vstd, vmean));
    _mm256_storeu_ps(out + 8, _mm256_fmadd_ps(_mm256_mul_ps(radius, s), vstd, vmean));
}
#endif

/* ---- float64 normal: the C library's log, cos and sin ----------------------------------- */

#define PI 0x1.921fb54442d18p+1 /* pi rounded to double */

static void normal_block_f64(void *block, double mean, double std)
{
    uint32_t w[32];
    memcpy(w, block, sizeof w);
    double *out = (double *)block;
    for (int j = 0; j < 8; j++) {
        double u1 = unit_double(w[2 * j], w[2 * j + 1]);
        double u2 = unit_double(w[2 * (j + 8)], w[2 * (j + 8) + 1]);
        double radius = sqrt(-2.0 * log(1.0 - u1));
        double theta = 2.0 * PI * u2;
        out[j] = fma(radius * cos(theta), std, mean);
        out[j + 8] = fma(radius * sin(theta), std, mean);
    }
}

/* ---- element types --------------------------------------------------------------------- */

enum { T_F32, T_F64, T_F16, T_BF16, T_I64, T_I32, T_I16, T_I8, T_U8, T_BOOL, N_TYPES };
static const char *const TYPE_NAMES[N_TYPES] = {"F32", "F64", "F16", "BF16", "I64",
                                                "I32", "I16", "I8",  "U8",   "BOOL"};
static const int TYPE_SIZES[N_TYPES] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};

/* float32 to float16/bfloat16 bits, rounding to nearest even, in integer arithmetic (so no
 * compiler support for _Float16 is needed; checked against it on every float32). */
static ALWAYS_INLINE uint16_t float_to_f16(float f)
{
    uint32_t x = float_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t magnitude = x & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | 0x7e00u;         /* NaN */
    if (magnitude >= 0x477ff000u) return sign | 0x7c00u;        /* from 65520 on: inf */
    if (magnitude < 0x38800000u) {                              /* below 2**-14: subnormal */
        float units = bits_to_float(magnitude) * 0x1p24f;        /* exact, in [0, 1024) */
        return sign | (uint16_t)((units + 0x1p23f) - 0x1p23f);  /* to nearest even */
    }
    magnitude += 0xfffu + ((magnitude >> 13) & 1u);             /* round off 13 bits */
    return sign | (uint16_t)((magnitude - ((uint32_t)(127 - 15) << 23)) >> 13);
}

static ALWAYS_INLINE uint16_t float_to_bf16(float f)
{
    uint32_t b = float_to_bits(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u); /* NaN */
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

/* Whether two float16/bfloat16 values (bits) are equal as numbers (+0 == -0; no NaNs here). */
static ALWAYS_INLINE int half_equal(uint16_t a, uint16_t b)
{
    return a == b || ((a | b) & 0x7fffu) == 0;
}

/* n int64 values stored as `type`, as C casts (and NumPy's astype) convert them: float16
 * and bfloat16 through float32, as the reference casts. One loop per type, so each
 * vectorizes. */
static void store_integers(char *out, int type, const int64_t *v, size_t n)
{
#define STORE(T, EXPR)                                       \
    for (size_t i = 0; i < n; i++) ((T *)out)[i] = (EXPR); \
    break
    switch (type) {
    case T_I64: memcpy(out, v, n * sizeof *v); break;
    case T_I32: STORE(int32_t, (int32_t)v[i]);
    case T_I16: STORE(int16_t, (int16_t)v[i]);
    case T_I8: STORE(int8_t, (int8_t)v[i]);
    case T_U8: STORE(uint8_t, (uint8_t)v[i]);
    case T_BOOL: STORE(uint8_t, v[i] != 0);
    case T_F32: STORE(float, (float)v[i]);
    case T_F64: STORE(double, (double)v[i]);
    case T_F16: STORE(uint16_t, float_to_f16((float)v[i]));
    case T_BF16: STORE(uint16_t, float_to_bf16((float)v[i]));
    }
#undef STORE
}

/* n zeros and ones stored as `type`. */
static void store_hits(char *out, int type, const uint8_t *hits, size_t n)
{
#define STORE(T, EXPR)                                       \
    for (size_t i = 0; i < n; i++) ((T *)out)[i] = (EXPR); \
    break
    switch (type) {
    case T_I64: STORE(int64_t, hits[i]);
    case T_I32: STORE(int32_t, hits[i]);
    case T_I16: STORE(int16_t, hits[i]);
    case T_I8: case T_U8: case T_BOOL: memcpy(out, hits, n); break;
    case T_F32: STORE(float, hits[i]);
    case T_F64: STORE(double, hits[i]);
    case T_F16: STORE(uint16_t, hits[i] ? 0x3c00 : 0); /* 1.0 */
    case T_BF16: STORE(uint16_t, hits[i] ? 0x3f80 : 0);
    }
#undef STORE
}

/* n float64 values stored as the floating `type` (float16/bfloat16 through float32, as C++
 * casts them). */
static void store_doubles(char *out, int type, const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (type) {
        case T_F64: ((double *)out)[i] = v[i]; break;
        case T_F32: ((float *)out)[i] = (float)v[i]; break;
        case T_F16: ((uint16_t *)out)[i] = float_to_f16((float)v[i]); break;
        default: ((uint16_t *)out)[i] = float_to_bf16((float)v[i]); break;
        }
    }
}

/* ---- the jobs (run without the GIL) ------------------------------------------------------ */

/* Elements per chunk of the sequential samplers: its words are drawn into a buffer on the
 * stack (16 KiB at two words per element), then transformed into the output. */
#define CHUNK 2048

/* low and span: the fma's operands, in the computation type (float32 for the 16-bit types);
 * high and low_value: the dtype's values of the bounds (exact in float32 for those types). */
static void uniform_job(const stream_t *s, int type, char *out, size_t count, double low,
                        double span, double high, double low_value)
{
    const clones_t *K = &CLONES[g_isa];
    uint32_t words[2 * CHUNK];
    float values[CHUNK];
    for (size_t done = 0; done < count; done += CHUNK) {
        size_t n = count - done < CHUNK ? count - done : CHUNK;
        if (type == T_F64) {
            draw_words(s, words, 2 * n);
            K->uniform_f64(words, (double *)out + done, n, low, span, high);
            continue;
        }
        draw_words(s, words, n);
        if (type == T_F32) {
            K->uniform_f32(words, (float *)out + done, n, (float)low, (float)span, (float)high);
            continue;
        }
        /* float16/bfloat16: the float32 value rounded to the dtype, then compared (high and
         * low_value are the dtype's values, so they convert exactly) */
        K->uniform_f32(words, values, n, (float)low, (float)span, NAN);
        uint16_t *dst = (uint16_t *)out + done;
#define ROUND_AND_REPLACE(TO_HALF)                                                \
    do {                                                                          \
        const uint16_t high_bits = TO_HALF((float)high);                          \
        const uint16_t low_bits = TO_HALF((float)low_value);                      \
        for (size_t i = 0; i < n; i++) {                                          \
            uint16_t h = TO_HALF(values[i]);                                      \
            dst[i] = half_equal(h, high_bits) ? low_bits : h;                     \
        }                                                                         \
    } while (0)
        if (type == T_F16)
            ROUND_AND_REPLACE(float_to_f16);
        else
            ROUND_AND_REPLACE(float_to_bf16);
#undef ROUND_AND_REPLACE
    }
}

/* d % span for 32-bit d and span (span >= 1), by multiplications (Lemire's fastmod): with
 * inverse = 2**64 / span rounded up, the remainder is the high 64 bits of the 96-bit product
 * (inverse * d mod 2**64) * span, exact for every 32-bit d. That product is taken in two
 * 32-bit halves of its first factor, without 128-bit integers: floor((hi * 2**32 + lo) *
 * span / 2**64) = floor((hi * span + floor(lo * span / 2**32)) / 2**32), no term overflowing. */
static ALWAYS_INLINE uint32_t fastmod32(uint32_t d, uint64_t inverse, uint32_t span)
{
    uint64_t fraction = inverse * d;
    uint64_t low_part = ((fraction & 0xffffffffu) * span) >> 32;
    return (uint32_t)(((fraction >> 32) * span + low_part) >> 32);
}

static void integers_job(const stream_t *s, int type, char *out, size_t count, int64_t low,
                         uint64_t span, int draw_bits)
{
    uint32_t words[2 * CHUNK];
    int64_t buffer[CHUNK];
    const uint32_t span32 = span <= UINT32_MAX ? (uint32_t)span : 0;
    const uint64_t inverse = span32 ? UINT64_MAX / span32 + 1 : 0;
    for (size_t done = 0; done < count; done += CHUNK) {
        size_t n = count - done < CHUNK ? count - done : CHUNK;
        char *dst = out + done * (size_t)TYPE_SIZES[type];
        int64_t *values = type == T_I64 ? (int64_t *)dst : buffer;
        if (draw_bits == 32) {
            draw_words(s, words, n);
            if (span32) {
                for (size_t i = 0; i < n; i++)
                    values[i] = low + fastmod32(words[i], inverse, span32);
            } else { /* every word is below span: the remainder is the word */
                for (size_t i = 0; i < n; i++) values[i] = low + words[i];
            }
        } else {
            draw_words(s, words, 2 * n);
            for (size_t i = 0; i < n; i++) {
                uint64_t d = (uint64_t)words[2 * i] << 32 | words[2 * i + 1];
                /* wraps past 2**63 - 1 as the reference's uint64 sum viewed as int64 */
                values[i] = (int64_t)((uint64_t)low + d % span);
            }
        }
        if (type != T_I64) store_integers(dst, type, values, n);
    }
}

/* randperm: out = 0 .. n-1, then for i = 0 .. n-2 out[i] swaps with out[i + w_i % (n - i)],
 * w_i the i-th 32-bit word: PyTorch's Fisher-Yates shuffle (the reference's _randperm_). */
static void randperm_job(const stream_t *s, int64_t *out, size_t n)
{
    uint32_t words[CHUNK];
    for (size_t i = 0; i < n; i++) out[i] = (int64_t)i;
    for (size_t done = 0; done + 1 < n; done += CHUNK) {
        const size_t k = n - 1 - done < CHUNK ? n - 1 - done : CHUNK;
        draw_words(s, words, k);
        for (size_t t = 0; t < k; t++) {
            const size_t i = done + t, left = n - i;
            const size_t j = i + (left > UINT32_MAX ? words[t] : words[t] % (uint32_t)left);
            const int64_t held = out[i];
            out[i] = out[j];
            out[j] = held;
        }
    }
}

/* u < p, with u = bits * 2**-53 (bits: the low 53 bits of a 64-bit draw), is bits < p * 2**53
 * (an exact scaling), that is bits < ceil(p * 2**53): an integer comparison. */
static void bernoulli_job(const stream_t *s, int type, char *out, size_t count, double p)
{
    const uint64_t threshold = p <= 0.0 ? 0 : p >= 1.0 ? UINT64_C(1) << 53
                                                       : (uint64_t)ceil(p * 0x1p53);
    const clones_t *K = &CLONES[g_isa];
    uint32_t words[2 * CHUNK];
    uint8_t hits[CHUNK];
    for (size_t done = 0; done < count; done += CHUNK) {
        size_t n = count - done < CHUNK ? count - done : CHUNK;
        draw_words(s, words, 2 * n);
        K->bernoulli_hits(words, hits, n, threshold);
        store_hits(out + done * (size_t)TYPE_SIZES[type], type, hits, n);
    }
}

/* The samplers that map one float64 uniform each through the C library, as PyTorch's CPU
 * kernels do (the reference rounds these functions correctly instead, so it can differ in
 * the last bits; through here the values are PyTorch's):
 *   exponential_(lambda)      -1/lambda * log1p(-u)            (a = -1/lambda)
 *   cauchy_(median, sigma)    fma(tan(pi (u - 1/2)), sigma, median)   (a = sigma, b = median)
 *   geometric_(p)             ceil(log(u) / log1p(-p))         (a = p)
 * then rounded to the dtype (float16/bfloat16 through float32, as C++ casts them). */
enum { SAMPLE_EXPONENTIAL, SAMPLE_CAUCHY, SAMPLE_GEOMETRIC, N_SAMPLES };

static void transform_job(const stream_t *s, int type, char *out, size_t count, int kind,
                          double a, double b)
{
    uint32_t words[2 * CHUNK];
    double values[CHUNK];
    const double geometric_scale = kind == SAMPLE_GEOMETRIC ? log1p(-a) : 0.0;
    for (size_t done = 0; done < count; done += CHUNK) {
        size_t n = count - done < CHUNK ? count - done : CHUNK;
        draw_words(s, words, 2 * n);
        for (size_t i = 0; i < n; i++) {
            const double u = unit_double(words[2 * i], words[2 * i + 1]);
            values[i] = kind == SAMPLE_EXPONENTIAL ? a * log1p(-u)
                        : kind == SAMPLE_CAUCHY    ? fma(tan(PI * (u - 0.5)), a, b)
                                                   : ceil(log(u) / geometric_scale);
        }
        store_doubles(out + done * (size_t)TYPE_SIZES[type], type, values, n);
    }
}

/* PyTorch's one-at-a-time float64 normal sampler (normal_ on fewer than 16 elements or a
 * non-contiguous tensor, and log_normal_): each pair of float64 uniforms (u1, u2) gives
 * r cos(theta) now and r sin(theta) next, r = sqrt(-2 log1p(-u2)), theta = 2 pi u1, the
 * sine waiting in the generator (*cached, when *has_cached) for the next call. Each normal
 * n becomes fma(n, std, mean) (n itself for 0 and 1, as the reference skips the step), then
 * exp of that for log_normal_, rounded to the dtype (float16/bfloat16 through float32). */
static void scalar_normal_job(const stream_t *s, int type, char *out, size_t count,
                              double mean, double std, int take_exp, int *has_cached,
                              double *cached)
{
    const int plain = mean == 0.0 && std == 1.0;
    uint32_t words[4];
    double values[CHUNK], pending = 0.0;
    int have_pending = 0;
    if (*has_cached) {
        pending = *cached, have_pending = 1, *has_cached = 0;
    }
    for (size_t done = 0; done < count; done += CHUNK) {
        const size_t n = count - done < CHUNK ? count - done : CHUNK;
        for (size_t i = 0; i < n; i++) {
            double normal;
            if (have_pending) {
                normal = pending, have_pending = 0;
            } else {
                draw_words(s, words, 4);
                const double u1 = unit_double(words[0], words[1]);
                const double u2 = unit_double(words[2], words[3]);
                const double r = sqrt(-2.0 * log1p(-u2)), theta = 2.0 * PI * u1;
                normal = r * cos(theta);
                pending = r * sin(theta), have_pending = 1;
            }
            const double v = plain ? normal : fma(normal, std, mean);
            values[i] = take_exp ? exp(v) : v;
        }
        store_doubles(out + done * (size_t)TYPE_SIZES[type], type, values, n);
    }
    if (have_pending) *cached = pending, *has_cached = 1;
}

/* The normal transform runs on several threads from this many elements: where one thread
 * takes about 150 us (single-thread cost on a 2-core x86-64: float32 2.7 ns per element with
 * AVX2, float64 35-60 ns, the C library's log, cos and sin), so that starting the parallel
 * region (a few us when cores are idle) costs under 5%. The 2-core machine they were
 * measured on was too busy to time parallel runs themselves: a parallel region there waits
 * a scheduler slice (about 10 ms) for a descheduled thread; set OMP_NUM_THREADS=1 on such
 * machines (see the README). */
#define NORMAL_PARALLEL_MIN_F32 65536
#define NORMAL_PARALLEL_MIN_F64 4096
#define NORMAL_PARALLEL_BLOCKS 64 /* 16-blocks per parallel work item */

typedef void (*normal_block_fn)(void *block, double mean, double std);

static void normal_f32_block(void *block, double mean, double std)
{
#if HAVE_X86
    if (g_isa >= ISA_AVX2) {
        normal_block_f32_avx2(block, (float)mean, (float)std);
        return;
    }
#endif
    normal_block_f32_scalar(block, (float)mean, (float)std);
}

/* Transform `blocks` consecutive 16-blocks of `bytes_per_block` bytes in place, on several
 * threads from `parallel_min` elements: each block is transformed alike whichever thread
 * takes it. */
static void transform_blocks(char *data, size_t blocks, size_t bytes_per_block,
                             normal_block_fn fn, double mean, double std, size_t parallel_min)
{
#ifdef _OPENMP
    if (worth_parallel((double)blocks * 16, (double)parallel_min)) {
        const ptrdiff_t items = (ptrdiff_t)((blocks + NORMAL_PARALLEL_BLOCKS - 1) /
                                            NORMAL_PARALLEL_BLOCKS);
#pragma omp parallel for schedule(static)
        for (ptrdiff_t item = 0; item < items; item++) {
            size_t lo = (size_t)item * NORMAL_PARALLEL_BLOCKS;
            size_t hi = lo + NORMAL_PARALLEL_BLOCKS < blocks ? lo + NORMAL_PARALLEL_BLOCKS
                                                             : blocks;
            for (size_t b = lo; b < hi; b++) fn(data + b * bytes_per_block, mean, std);
        }
        return;
    }
#else
    (void)parallel_min;
#endif
    for (size_t b = 0; b < blocks; b++) fn(data + b * bytes_per_block, mean, std);
}

/* count >= 16. The element buffer holds exactly one uniform's words per element (one word
 * for float32, two for float64), so the uniforms are drawn into it and transformed in place. */
static void normal_job(const stream_t *s, int type, char *out, size_t count, double mean,
                       double std)
{
    const size_t words_per_value = type == T_F64 ? 2 : 1, size = 4 * words_per_value;
    normal_block_fn fn = type == T_F64 ? normal_block_f64 : normal_f32_block;
    draw_words(s, (uint32_t *)out, count * words_per_value);
    transform_blocks(out, count / 16, 16 * size, fn, mean, std,
                     type == T_F64 ? NORMAL_PARALLEL_MIN_F64 : NORMAL_PARALLEL_MIN_F32);
    if (count % 16) {
        /* PyTorch draws 16 more uniforms and makes them the last 16 elements */
        uint32_t tail[32];
        draw_words(s, tail, 16 * words_per_value);
        fn(tail, mean, std);
        memcpy(out + (count - 16) * size, tail, 16 * size);
    }
}

/* ---- Python entry points ------------------------------------------------------------------ */

#define MT19937_TYPE "numpy.random._mt19937.MT19937"

/* The stream of a NumPy bit generator object, through its "BitGenerator" capsule (NumPy's
 * public interface). The object, which the caller's argument keeps alive, owns the state. */
static int get_stream(PyObject *engine, stream_t *s)
{
    PyObject *capsule = PyObject_GetAttrString(engine, "capsule");
    bitgen_t *g = capsule ? (bitgen_t *)PyCapsule_GetPointer(capsule, "BitGenerator") : NULL;
    Py_XDECREF(capsule);
    if (g == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "expected a NumPy bit generator, not %.100s",
                     Py_TYPE(engine)->tp_name);
        return -1;
    }
    if (g->state == NULL || g->next_uint32 == NULL) {
        PyErr_SetString(PyExc_ValueError, "the bit generator has no state");
        return -1;
    }
    s->g = g;
    s->direct = g_direct && strcmp(Py_TYPE(engine)->tp_name, MT19937_TYPE) == 0;
    return 0;
}

/* The common arguments (engine, type, out, start, count): checked, out acquired. */
typedef struct {
    stream_t stream;
    int type;
    Py_buffer view;
    char *data; /* the first element written */
    size_t count;
} target_t;

static int parse_target(PyObject *const *args, target_t *T)
{
    if (get_stream(args[0], &T->stream) < 0) return -1;
    long type = PyLong_Check(args[1]) ? PyLong_AsLong(args[1]) : -1;
    if (type < 0 || type >= N_TYPES) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "type must be one of the module's type codes");
        return -1;
    }
    T->type = (int)type;
    long long start, count;
    if (parse_offset(args[3], "start", &start) < 0 || parse_offset(args[4], "count", &count) < 0)
        return -1;
    if (get_buffer(args[2], &T->view, 1, "out") < 0) return -1;
    const long long size = TYPE_SIZES[T->type];
    if (T->view.itemsize != size) {
        PyErr_Format(PyExc_TypeError, "out holds %zd-byte elements; type %s needs %lld",
                     T->view.itemsize, TYPE_NAMES[T->type], size);
        PyBuffer_Release(&T->view);
        return -1;
    }
    if (start + count > (long long)(T->view.len / size)) {
        PyErr_Format(PyExc_ValueError, "elements [%lld, %lld) are outside out (%zd elements)",
                     start, start + count, T->view.len / size);
        PyBuffer_Release(&T->view);
        return -1;
    }
    T->data = (char *)T->view.buf + start * size;
    T->count = (size_t)count;
    return 0;
}

static int parse_double(PyObject *obj, const char *what, double *dst)
{
    *dst = PyFloat_AsDouble(obj);
    if (*dst == -1.0 && PyErr_Occurred()) return -1;
    if (!isfinite(*dst)) {
        PyErr_Format(PyExc_ValueError, "%s must be finite", what);
        return -1;
    }
    return 0;
}

/* ValueError "NAME() fills floating types, not TYPE" (the view released) unless the target
 * is F32, F64, F16 or BF16. */
static int floating_target(target_t *T, const char *name)
{
    if (T->type == T_F32 || T->type == T_F64 || T->type == T_F16 || T->type == T_BF16)
        return 0;
    PyBuffer_Release(&T->view);
    PyErr_Format(PyExc_ValueError, "%s() fills floating types, not %s", name,
                 TYPE_NAMES[T->type]);
    return -1;
}

static PyObject *py_uniform(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 9, "uniform(engine, type, out, start, count, low, span, high, "
                              "low_value)") < 0)
        return NULL;
    double low, span, high, low_value;
    if (parse_double(args[5], "low", &low) < 0 || parse_double(args[6], "span", &span) < 0 ||
        parse_double(args[7], "high", &high) < 0 ||
        parse_double(args[8], "low_value", &low_value) < 0)
        return NULL;
    target_t T;
    if (parse_target(args, &T) < 0 || floating_target(&T, "uniform") < 0) return NULL;
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    uniform_job(&T.stream, T.type, T.data, T.count, low, span, high, low_value);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&T.view);
    Py_RETURN_NONE;
}

static PyObject *py_normal(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 7, "normal(engine, type, out, start, count, mean, std)") < 0)
        return NULL;
    double mean, std;
    if (parse_double(args[5], "mean", &mean) < 0 || parse_double(args[6], "std", &std) < 0)
        return NULL;
    target_t T;
    if (parse_target(args, &T) < 0) return NULL;
    if ((T.type != T_F32 && T.type != T_F64) || T.count < 16) {
        PyBuffer_Release(&T.view);
        return PyErr_Format(PyExc_ValueError, "normal() fills 16 or more float32 or float64 "
                            "elements (got %s, %zu)", TYPE_NAMES[T.type], T.count);
    }
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    normal_job(&T.stream, T.type, T.data, T.count, mean, std);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&T.view);
    Py_RETURN_NONE;
}

static PyObject *py_integers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 8,
                    "integers(engine, type, out, start, count, low, span, draw_bits)") < 0)
        return NULL;
    long long low = PyLong_AsLongLong(args[5]);
    if (low == -1 && PyErr_Occurred()) return NULL;
    unsigned long long span = PyLong_Check(args[6]) ? PyLong_AsUnsignedLongLong(args[6]) : 0;
    if (span == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    long bits = PyLong_AsLong(args[7]);
    if (bits == -1 && PyErr_Occurred()) return NULL;
    if (span == 0 || (bits != 32 && bits != 64)) {
        PyErr_SetString(PyExc_ValueError, "span must be a positive int and draw_bits 32 or 64");
        return NULL;
    }
    target_t T;
    if (parse_target(args, &T) < 0) return NULL;
    if (T.type == T_F16 || T.type == T_BF16) {
        PyBuffer_Release(&T.view);
        return PyErr_Format(PyExc_ValueError, "integers() does not fill %s",
                            TYPE_NAMES[T.type]);
    }
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    integers_job(&T.stream, T.type, T.data, T.count, (int64_t)low, (uint64_t)span, (int)bits);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&T.view);
    Py_RETURN_NONE;
}

static PyObject *py_randperm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 5, "randperm(engine, type, out, start, count)") < 0) return NULL;
    target_t T;
    if (parse_target(args, &T) < 0) return NULL;
    if (T.type != T_I64) {
        PyBuffer_Release(&T.view);
        return PyErr_Format(PyExc_ValueError, "randperm() fills int64, not %s",
                            TYPE_NAMES[T.type]);
    }
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    randperm_job(&T.stream, (int64_t *)(void *)T.data, T.count);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&T.view);
    Py_RETURN_NONE;
}

static PyObject *py_bernoulli(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 6, "bernoulli(engine, type, out, start, count, p)") < 0)
        return NULL;
    double p;
    if (parse_double(args[5], "p", &p) < 0) return NULL;
    target_t T;
    if (parse_target(args, &T) < 0) return NULL;
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    bernoulli_job(&T.stream, T.type, T.data, T.count, p);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&T.view);
    Py_RETURN_NONE;
}

/* transform(engine, type, out, start, count, kind, a, b): a float64 sampler (kind one of
 * EXPONENTIAL, CAUCHY, GEOMETRIC; a and b its numbers, see transform_job) into floating
 * `out` elements [start, start + count). */
static PyObject *py_transform(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 8, "transform(engine, type, out, start, count, kind, a, b)") < 0)
        return NULL;
    long kind = PyLong_Check(args[5]) ? PyLong_AsLong(args[5]) : -1;
    if (kind < 0 || kind >= N_SAMPLES) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "kind must be EXPONENTIAL, CAUCHY or GEOMETRIC");
        return NULL;
    }
    double a, b;
    if (parse_double(args[6], "a", &a) < 0 || parse_double(args[7], "b", &b) < 0) return NULL;
    if (kind == SAMPLE_GEOMETRIC && !(a > 0.0 && a < 1.0)) {
        PyErr_SetString(PyExc_ValueError, "geometric p must lie in (0, 1)");
        return NULL;
    }
    target_t T;
    if (parse_target(args, &T) < 0 || floating_target(&T, "transform") < 0) return NULL;
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    transform_job(&T.stream, T.type, T.data, T.count, (int)kind, a, b);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&T.view);
    Py_RETURN_NONE;
}

/* scalar_normal(engine, type, out, start, count, mean, std, take_exp, cached) -> the value
 * left waiting (a float) or None: see scalar_normal_job; cached is the generator's waiting
 * value or None. */
static PyObject *py_scalar_normal(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 9, "scalar_normal(engine, type, out, start, count, mean, std, "
                              "take_exp, cached)") < 0)
        return NULL;
    double mean, std, cached = 0.0;
    if (parse_double(args[5], "mean", &mean) < 0 || parse_double(args[6], "std", &std) < 0)
        return NULL;
    const int take_exp = PyObject_IsTrue(args[7]);
    if (take_exp < 0) return NULL;
    int has_cached = args[8] != Py_None;
    if (has_cached) {
        cached = PyFloat_AsDouble(args[8]);
        if (cached == -1.0 && PyErr_Occurred()) return NULL;
    }
    target_t T;
    if (parse_target(args, &T) < 0 || floating_target(&T, "scalar_normal") < 0) return NULL;
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    scalar_normal_job(&T.stream, T.type, T.data, T.count, mean, std, take_exp, &has_cached,
                      &cached);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&T.view);
    if (has_cached) return PyFloat_FromDouble(cached);
    Py_RETURN_NONE;
}

/* draw(engine, out): fill a uint32 buffer with raw words (tests and the layout check). */
static PyObject *py_draw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 2, "draw(engine, out)") < 0) return NULL;
    stream_t stream;
    if (get_stream(args[0], &stream) < 0) return NULL;
    Py_buffer view;
    if (get_buffer(args[1], &view, 1, "out") < 0) return NULL;
    if (view.itemsize != 4) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "out must hold 4-byte elements");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    draw_words(&stream, (uint32_t *)view.buf, (size_t)(view.len / 4));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* state_matches(engine, key_bytes, pos): whether the state reads as {key, pos} in the
 * layout direct mode assumes (read only; the Python side calls it on a fresh MT19937). */
static PyObject *py_state_matches(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 3, "state_matches(engine, key_bytes, pos)") < 0) return NULL;
    stream_t stream;
    if (get_stream(args[0], &stream) < 0) return NULL;
    if (strcmp(Py_TYPE(args[0])->tp_name, MT19937_TYPE) != 0) {
        PyErr_SetString(PyExc_TypeError, "state_matches() reads NumPy's MT19937 only");
        return NULL;
    }
    char *key;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(args[1], &key, &len) < 0) return NULL;
    long pos = PyLong_AsLong(args[2]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    const mt_state *st = (const mt_state *)stream.g->state;
    int same = len == (Py_ssize_t)sizeof st->key && memcmp(st->key, key, sizeof st->key) == 0 &&
               st->pos == pos;
    return PyBool_FromLong(same);
}

static PyObject *py_set_direct(PyObject *self, PyObject *arg)
{
    (void)self;
    int flag = PyObject_IsTrue(arg);
    if (flag < 0) return NULL;
    int previous = g_direct;
    g_direct = flag;
    return PyBool_FromLong(previous);
}

static PyMethodDef METHODS[] = {
    {"scalar_normal", (PyCFunction)(void (*)(void))py_scalar_normal, METH_FASTCALL,
     "scalar_normal(engine, type, out, start, count, mean, std, take_exp, cached): PyTorch's "
     "one-at-a-time float64 normals (exp of them for log_normal_); returns the value left "
     "waiting or None."},
    {"transform", (PyCFunction)(void (*)(void))py_transform, METH_FASTCALL,
     "transform(engine, type, out, start, count, kind, a, b): exponential_, cauchy_ or "
     "geometric_ values from float64 uniforms through the C library; see src/random.c."},
    {"uniform", (PyCFunction)(void (*)(void))py_uniform, METH_FASTCALL,
     "uniform(engine, type, out, start, count, low, span, high, low_value): count "
     "uniforms into out from element start (F32, F64, F16, BF16): fma(u, span, low) in the "
     "computation type (float32 for the 16-bit types), rounded to the dtype, where equal to "
     "high (the dtype's value) replaced by low_value (the dtype's value of low)."},
    {"normal", (PyCFunction)(void (*)(void))py_normal, METH_FASTCALL,
     "normal(engine, type, out, start, count, mean, std): PyTorch's 16-block Box-Muller "
     "normals (F32, F64; count >= 16)."},
    {"integers", (PyCFunction)(void (*)(void))py_integers, METH_FASTCALL,
     "integers(engine, type, out, start, count, low, span, draw_bits): low + draw % span, "
     "cast to the type (integer, bool, F32, F64)."},
    {"randperm", (PyCFunction)(void (*)(void))py_randperm, METH_FASTCALL,
     "randperm(engine, type, out, start, count): PyTorch's Fisher-Yates permutation of "
     "0 .. count-1 into int64 elements (type I64), one 32-bit draw a step."},
    {"bernoulli", (PyCFunction)(void (*)(void))py_bernoulli, METH_FASTCALL,
     "bernoulli(engine, type, out, start, count, p): 1 where a float64 uniform < p."},
    {"draw", (PyCFunction)(void (*)(void))py_draw, METH_FASTCALL,
     "draw(engine, out): raw 32-bit words into a uint32 buffer."},
    {"state_matches", (PyCFunction)(void (*)(void))py_state_matches, METH_FASTCALL,
     "state_matches(engine, key_bytes, pos): whether direct mode reads this MT19937 state right."},
    {"set_direct", py_set_direct, METH_O,
     "Draw by running mt19937 over NumPy's state in place (True) or through next_uint32; "
     "returns the previous setting."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._random",
    .m_doc = "PyTorch's CPU random samplers over NumPy's MT19937 engine.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__random(void)
{
    if (init_module_state() < 0) return NULL;
#if HAVE_X86
    /* the AVX2 and AVX-512 clones use fused multiply-adds */
    if (!__builtin_cpu_supports("fma")) g_best_isa = g_isa = ISA_BASELINE;
#endif
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    for (int t = 0; t < N_TYPES; t++) {
        if (PyModule_AddIntConstant(m, TYPE_NAMES[t], t) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (PyModule_AddIntConstant(m, "EXPONENTIAL", SAMPLE_EXPONENTIAL) < 0 ||
        PyModule_AddIntConstant(m, "CAUCHY", SAMPLE_CAUCHY) < 0 ||
        PyModule_AddIntConstant(m, "GEOMETRIC", SAMPLE_GEOMETRIC) < 0 ||
        PyModule_AddIntConstant(m, "NORMAL_PARALLEL_MIN_F32", NORMAL_PARALLEL_MIN_F32) < 0 ||
        PyModule_AddIntConstant(m, "NORMAL_PARALLEL_MIN_F64", NORMAL_PARALLEL_MIN_F64) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
