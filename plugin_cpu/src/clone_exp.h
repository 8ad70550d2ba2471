/* The float32 exp the softmax rows (nn_rows.c) and logsumexp (reduce.c) share, for one
 * instruction-set clone: a kernel template includes it where isa_clones.h has defined
 * IS_F32 (1), VBYTES, ISA_ATTR and NAME, and gets
 *   NAME(exp_lanes)(v)   exp of every lane of the native float vector *v, in place
 * for lanes in [-inf, 0] (x - max) or NaN (NaN stays NaN); other lanes give unspecified
 * finite-or-NaN results, without undefined behaviour.
 *
 * Cody-Waite reduction by ln 2 in two parts, then Cephes' degree-5 polynomial, then 2^n in
 * two steps so that subnormal results are kept. The AVX-512F clone applies 2^n with one
 * vscalefps instead, which rounds p * 2^n once as the two steps do, and needs no clamp:
 * 20 instructions per 16 lanes instead of 32. Within 1 ulp of the correctly rounded value
 * (NumPy's float32 exp is within 2). The AVX-512F and AVX2 clones use fused multiply-adds
 * (the AVX2 clone runs only on CPUs with FMA) and give the same bits, compared over all 2^31
 * float32 in [-inf, 0]; the baseline clone rounds each a * b + c twice (the files build with
 * -ffp-contract=off), so its results may differ from theirs, each within 1 ulp. */

typedef float NAME(exp_vec) __attribute__((vector_size(VBYTES)));
typedef uint32_t NAME(exp_uvec) __attribute__((vector_size(VBYTES)));
typedef int32_t NAME(exp_ivec) __attribute__((vector_size(VBYTES)));
#define EXP_VEC NAME(exp_vec)
#define EXP_UVEC NAME(exp_uvec)
#define EXP_SPLAT(c) ((EXP_VEC){0} + (float)(c))
/* a where m, else b */
#define EXP_BLEND(m, a, b) \
    ((EXP_VEC)((((EXP_UVEC)(m)) & (EXP_UVEC)(a)) | (~((EXP_UVEC)(m)) & (EXP_UVEC)(b))))
/* a * b + c and c - a * b */
#if VBYTES == 64
#define EXP_MADD(a, b, c) ((EXP_VEC)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define EXP_NMADD(a, b, c) ((EXP_VEC)_mm512_fnmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#elif VBYTES == 32
#define EXP_MADD(a, b, c) ((EXP_VEC)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define EXP_NMADD(a, b, c) ((EXP_VEC)_mm256_fnmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#else
#define EXP_MADD(a, b, c) ((a) * (b) + (c))
#define EXP_NMADD(a, b, c) ((c) - (a) * (b))
#endif

/* whether no lane of x is below the number b (a NaN lane is not) */
#if VBYTES == 32
#define EXP_NONE_BELOW(x, b) \
    (_mm256_movemask_ps(_mm256_cmp_ps((__m256)(x), _mm256_set1_ps(b), _CMP_LT_OQ)) == 0)
#elif VBYTES == 16 && defined(__SSE2__)
#define EXP_NONE_BELOW(x, b) (_mm_movemask_ps(_mm_cmplt_ps((__m128)(x), _mm_set1_ps(b))) == 0)
#elif VBYTES == 16
#define EXP_NONE_BELOW(x, b) NAME(exp_none_below)(x, b)
ISA_ATTR static inline int NAME(exp_none_below)(EXP_VEC x, float b)
{
    int below = 0;
    for (int j = 0; j < VBYTES / 4; j++) below |= x[j] < b;
    return !below;
}
#endif

ISA_ATTR static inline void NAME(exp_lanes)(EXP_VEC *v)
{
    const EXP_VEC x = *v;
#if VBYTES == 64
    /* no clamp: vscalefps takes n as a float, and lanes below the cut, whatever they hold
     * (NaN for -inf), are replaced by 0 at the end */
    const EXP_VEC c = x;
#else
    /* Lanes at or above -86 (or NaN) have normal results and n >= -125, where 2^n is one
     * normal float and p * 2^n is exact: the two steps below give the same bits. A vector
     * of such lanes only (every softmax row but extreme ones) skips the clamp, the steps
     * and the cut: 21 instructions per 8 lanes instead of 32. */
    const int all_normal = EXP_NONE_BELOW(x, -86.0f);
    /* below -104 the result is 0 (put back at the end); clamping keeps n in range */
    const EXP_VEC c = all_normal ? x : EXP_BLEND(x < EXP_SPLAT(-104.0f), EXP_SPLAT(-104.0f), x);
#endif
    /* n = round(x / ln 2): adding 1.5 * 2^23 leaves the rounded value in the low bits */
    const EXP_VEC magic = EXP_SPLAT(12582912.0f);
    const EXP_VEC t = EXP_MADD(c, EXP_SPLAT(1.44269504088896341f), magic);
    const EXP_VEC n = t - magic;
    /* r = x - n ln 2, with ln 2 in two parts (the first exact in n * part) */
    EXP_VEC r = EXP_NMADD(n, EXP_SPLAT(0.693359375f), c);
    r = EXP_NMADD(n, EXP_SPLAT(-2.12194440e-4f), r);
    /* e^r = 1 + r + r^2 P(r) (Cephes' expf coefficients) */
    const EXP_VEC z = r * r;
    EXP_VEC p = EXP_SPLAT(1.9875691500e-4f);
    p = EXP_MADD(p, r, EXP_SPLAT(1.3981999507e-3f));
    p = EXP_MADD(p, r, EXP_SPLAT(8.3334519073e-3f));
    p = EXP_MADD(p, r, EXP_SPLAT(4.1665795894e-2f));
    p = EXP_MADD(p, r, EXP_SPLAT(1.6666665459e-1f));
    p = EXP_MADD(p, r, EXP_SPLAT(5.0000001201e-1f));
    p = EXP_MADD(p, z, r) + EXP_SPLAT(1.0f);
#if VBYTES == 64
    /* times 2^n in one instruction: one rounding of p * 2^n, the value the two steps below
     * give; then 0 below the cut (a NaN lane, never passed, keeps its result) */
    const __m512 result = _mm512_scalef_ps((__m512)p, (__m512)n);
    const __mmask16 kept = _mm512_cmp_ps_mask((__m512)x, _mm512_set1_ps(-103.972084045410f),
                                              _CMP_NLT_UQ);
    *v = (EXP_VEC)_mm512_maskz_mov_ps(kept, result);
#else
    /* times 2^n as 2^(n>>1) * 2^(n - (n>>1)): both normal for n in [-150, 0], and p * 2^(n>>1)
     * exact, so the one rounding is the second product's */
    const NAME(exp_ivec) ni = (NAME(exp_ivec))((EXP_UVEC)t - (EXP_UVEC)magic);
    if (all_normal) {
        *v = p * (EXP_VEC)((EXP_UVEC)(ni + 127) << 23);
        return;
    }
    const NAME(exp_ivec) n1 = ni >> 1, n2 = ni - n1;
    const EXP_VEC s1 = (EXP_VEC)((EXP_UVEC)(n1 + 127) << 23);
    const EXP_VEC s2 = (EXP_VEC)((EXP_UVEC)(n2 + 127) << 23);
    const EXP_VEC result = (p * s1) * s2;
    *v = EXP_BLEND(x < EXP_SPLAT(-103.972084045410f), EXP_SPLAT(0.0f), result);
#endif
}

#undef EXP_VEC
#undef EXP_UVEC
#undef EXP_SPLAT
#undef EXP_BLEND
#undef EXP_MADD
#undef EXP_NMADD
#undef EXP_NONE_BELOW
