/* reftorch_cpu._depthwise: depthwise 2-D convolution (groups == input channels, one filter
 * per channel) computed directly, and its weight gradient.
 *
 * Entry points (called from reftorch_cpu/gemm.py; sizes and strides in elements; transposed,
 * the input gradient at any stride, is described where it is defined):
 *
 *   conv(out, x, x_offset, x_shape, x_strides, w, w_offset, w_strides, bias, bias_offset,
 *        bias_stride, kernel, out_size, stride, padding, dilation)
 *       out[n, c, i, j] = sum over (p, q) of x[n, c, i*sh + p*dh - ph, j*sw + q*dw - pw]
 *                         * w[c, p, q]  (+ bias[c])
 *       x (N, C, H, W) any strides; w viewed as (C, KH, KW); out a fresh row-major
 *       (N, C, OH, OW); taps that fall in the padding are skipped.
 *   weight_grad(out, x, x_offset, x_shape, x_strides, grad, grad_offset, grad_strides,
 *               kernel, out_size, stride, padding, dilation)
 *       out[c, p, q] = sum over n, i, j of grad[n, c, i, j] * x[n, c, i*sh + p*dh - ph, ...]
 *       out a fresh row-major (C, KH, KW); grad (N, C, OH, OW) any strides.
 *
 * A depthwise layer moves far more data than it computes (KH*KW multiply-adds per output),
 * so it runs as a convolution, not a product: an output row is accumulated tap by tap from
 * input rows, the inner loop over the output columns a tap reaches inside the image (a unit
 * stride along x's row vectorizes). Sums run in a fixed order (taps row-major, then the bias;
 * for the weight gradient: per tap and output column over images and rows, then over the
 * columns), planes (conv) or channels
 * (weight_grad) are split among the threads: results do not depend on the thread count.
 * They agree with the reference's (a grouped im2col product) within rounding.
 *
 * Safety: every view is bounds-checked over all its elements before anything is read or
 * written (common.h), and the loops only visit taps inside the image.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* Planes (or channels) of fewer multiply-adds than this in all run on one thread. */
#ifndef PARALLEL_MIN_WORK
#define PARALLEL_MIN_WORK (64 * 1024)
#endif

#define CACHED_TAPS 32 /* kernel widths up to this keep their column ranges in geometry_t */

typedef struct {
    ptrdiff_t n, c, h, w, kh, kw, oh, ow;
    ptrdiff_t sh, sw, ph, pw, dh, dw;
    ptrdiff_t lo[CACHED_TAPS], hi[CACHED_TAPS]; /* tap_columns of the first taps */
} geometry_t;

/* The output columns [lo, hi) whose tap q reads an input column inside [0, w). */
static inline void column_range(const geometry_t *G, ptrdiff_t q, ptrdiff_t *lo, ptrdiff_t *hi)
{
    const ptrdiff_t offset = q * G->dw - G->pw; /* input column of output column 0 */
    ptrdiff_t first = offset >= 0 ? 0 : (-offset + G->sw - 1) / G->sw;
    ptrdiff_t last = offset > G->w - 1 ? 0 : (G->w - 1 - offset) / G->sw + 1;
    if (last > G->ow) last = G->ow;
    *lo = first;
    *hi = last > first ? last : first;
}

static inline void tap_columns(const geometry_t *G, ptrdiff_t q, ptrdiff_t *lo, ptrdiff_t *hi)
{
    if (q < CACHED_TAPS) {
        *lo = G->lo[q], *hi = G->hi[q];
    } else {
        column_range(G, q, lo, hi);
    }
}

#define DEFINE_DEPTHWISE(T, ISA, ATTR)                                                        \
    /* One output plane: each output row accumulates its taps (row-major, then the bias), a   \
     * tap over the output columns whose input column is inside the image. */               \
    ATTR static void conv_plane_##T##_##ISA(const geometry_t *G, T *restrict out,             \
                                            const T *restrict x,                             \
                                            const ptrdiff_t *xs, const T *w,                 \
                                            const ptrdiff_t *ws, const T *bias)              \
    {                                                                                        \
        for (ptrdiff_t i = 0; i < G->oh; i++) {                                              \
            T *restrict row = out + i * G->ow;                                               \
            for (ptrdiff_t j = 0; j < G->ow; j++) row[j] = 0;                                \
            for (ptrdiff_t p = 0; p < G->kh; p++) {                                          \
                const ptrdiff_t r = i * G->sh + p * G->dh - G->ph;                           \
                if (r < 0 || r >= G->h) continue;                                            \
                const T *restrict xr = x + r * xs[0];                                        \
                for (ptrdiff_t q = 0; q < G->kw; q++) {                                      \
                    ptrdiff_t lo, hi;                                                        \
                    tap_columns(G, q, &lo, &hi);                                             \
                    const T wv = w[p * ws[0] + q * ws[1]];                                   \
                    const ptrdiff_t first = q * G->dw - G->pw, step = G->sw;                 \
                    if (step == 1 && xs[1] == 1) {                                           \
                        for (ptrdiff_t j = lo; j < hi; j++) row[j] += xr[first + j] * wv;    \
                    } else {                                                                 \
                        for (ptrdiff_t j = lo; j < hi; j++)                                  \
                            row[j] += xr[(first + j * step) * xs[1]] * wv;                   \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
            if (bias)                                                                        \
                for (ptrdiff_t j = 0; j < G->ow; j++) row[j] += *bias;                       \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    /* dw[c] for one channel. Each tap's products are first summed per output column over   \
     * the images and rows (in `acc`, kh * kw rows of ow: elementwise, so it vectorizes),    \
     * then each tap's row is summed in column order. */                                    \
    ATTR static void weight_grad_channel_##T##_##ISA(const geometry_t *G, T *out, T *acc, const T *x,     \
                                        const ptrdiff_t *xs, const T *g, const ptrdiff_t *gs) \
    {                                                                                        \
        const ptrdiff_t taps = G->kh * G->kw;                                                \
        for (ptrdiff_t k = 0; k < taps * G->ow; k++) acc[k] = 0;                             \
        for (ptrdiff_t n = 0; n < G->n; n++) {                                               \
            for (ptrdiff_t i = 0; i < G->oh; i++) {                                          \
                const T *grow = g + n * gs[0] + i * gs[2];                                   \
                for (ptrdiff_t p = 0; p < G->kh; p++) {                                      \
                    const ptrdiff_t r = i * G->sh + p * G->dh - G->ph;                       \
                    if (r < 0 || r >= G->h) continue;                                        \
                    const T *xr = x + n * xs[0] + r * xs[2];                                 \
                    for (ptrdiff_t q = 0; q < G->kw; q++) {                                  \
                        ptrdiff_t lo, hi;                                                    \
                        tap_columns(G, q, &lo, &hi);                                         \
                        T *a = acc + (p * G->kw + q) * G->ow;                                \
                        const ptrdiff_t first = q * G->dw - G->pw, step = G->sw;             \
                        if (step == 1 && xs[3] == 1 && gs[3] == 1) {                         \
                            for (ptrdiff_t j = lo; j < hi; j++)                              \
                                a[j] += grow[j] * xr[first + j];                             \
                        } else {                                                             \
                            for (ptrdiff_t j = lo; j < hi; j++)                              \
                                a[j] += grow[j * gs[3]] * xr[(first + j * step) * xs[3]];    \
                        }                                                                    \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        for (ptrdiff_t k = 0; k < taps; k++) {                                               \
            T sum = 0;                                                                       \
            for (ptrdiff_t j = 0; j < G->ow; j++) sum += acc[k * G->ow + j];                 \
            out[k] = sum;                                                                    \
        }                                                                                    \
    }
/* One clone per instruction set (the loops are the same C; the clones only vectorize them
 * wider): multiplies and adds stay separate (-ffp-contract=off) and no loop reorders a sum,
 * so every clone gives the same bits. */
typedef void (*conv_fn)(const geometry_t *, void *, const void *, const ptrdiff_t *,
                        const void *, const ptrdiff_t *, const void *);
typedef void (*grad_fn)(const geometry_t *, void *, void *, const void *, const ptrdiff_t *,
                        const void *, const ptrdiff_t *);
#define CONV(f) ((conv_fn)(void (*)(void))(f))
#define GRAD(f) ((grad_fn)(void (*)(void))(f))

DEFINE_DEPTHWISE(float, baseline, )
DEFINE_DEPTHWISE(double, baseline, )
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
DEFINE_DEPTHWISE(float, avx2, __attribute__((target("avx2"))))
DEFINE_DEPTHWISE(double, avx2, __attribute__((target("avx2"))))
DEFINE_DEPTHWISE(float, avx512f, __attribute__((target("avx512f"))))
DEFINE_DEPTHWISE(double, avx512f, __attribute__((target("avx512f"))))

/* Lanes [a, b) of a 16-lane mask, a and b clamped to [0, 16]. */
static inline unsigned lane_range(ptrdiff_t a, ptrdiff_t b)
{
    a = a < 0 ? 0 : a > 16 ? 16 : a;
    b = b < 0 ? 0 : b > 16 ? 16 : b;
    return b > a ? ((1u << (b - a)) - 1) << a : 0;
}

/* float32, stride 1 along the row, AVX-512F: the generic plane keeps each output row in
 * memory and adds one tap at a time (a load, a multiply, an add and a store per tap and
 * element). Here an output row goes 16 columns to a register, four registers side by side
 * (each register's sum is one chain, so four chains hide the adds' latency). A tap reaches
 * some columns only (the edges' taps fall in the padding): its lanes are masked, the masked
 * load reading only the columns it reaches and the masked add skipping the others, as the
 * generic code skips them. Each column adds its taps' products in the same order (a multiply
 * then an add, never fused), so the bits are the generic code's. 8x64x56x56, 3x3, 2 threads
 * (2-core x86-64): 1.14-1.18 ms with one register and the edge columns one at a time,
 * 0.58-0.68 ms with these (torch 0.45). */
__attribute__((target("avx512f"))) static void conv_plane_float_avx512f_rows(
    const geometry_t *G, float *restrict out, const float *restrict x, const ptrdiff_t *xs,
    const float *w, const ptrdiff_t *ws, const float *bias)
{
    if (G->sw != 1 || xs[1] != 1 || G->kw > CACHED_TAPS) {
        conv_plane_float_avx512f(G, out, x, xs, w, ws, bias);
        return;
    }
    for (ptrdiff_t j0 = 0; j0 < G->ow; j0 += 64) {
        __mmask16 live[4], reach[4][CACHED_TAPS]; /* columns to write; columns tap q reaches */
        for (int u = 0; u < 4; u++) {
            const ptrdiff_t first = j0 + 16 * u;
            live[u] = (__mmask16)lane_range(0, G->ow - first);
            for (ptrdiff_t q = 0; q < G->kw; q++)
                reach[u][q] = (__mmask16)lane_range(G->lo[q] - first, G->hi[q] - first) &
                              live[u];
        }
        for (ptrdiff_t i = 0; i < G->oh; i++) {
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                             _mm512_setzero_ps()};
            for (ptrdiff_t p = 0; p < G->kh; p++) {
                const ptrdiff_t r = i * G->sh + p * G->dh - G->ph;
                if (r < 0 || r >= G->h) continue;
                for (ptrdiff_t q = 0; q < G->kw; q++) {
                    /* input column of lane 0 of register 0 (lanes it does not reach are
                     * never read) */
                    const ptrdiff_t column = j0 + q * G->dw - G->pw;
                    const __m512 wv = _mm512_set1_ps(w[p * ws[0] + q * ws[1]]);
                    for (int u = 0; u < 4 && live[u]; u++) {
                        const __mmask16 k = reach[u][q];
                        const __m512 v = _mm512_maskz_loadu_ps(
                            k, x + r * xs[0] + column + 16 * u);
                        acc[u] = _mm512_mask_add_ps(acc[u], k, acc[u], _mm512_mul_ps(v, wv));
                    }
                }
            }
            float *row = out + i * G->ow + j0;
            for (int u = 0; u < 4 && live[u]; u++) {
                if (bias) acc[u] = _mm512_add_ps(acc[u], _mm512_set1_ps(*bias));
                _mm512_mask_storeu_ps(row + 16 * u, live[u], acc[u]);
            }
        }
    }
}

/* The same for AVX2: 8 columns to a register, eight registers side by side. AVX2 has no
 * mask registers: a tap's lanes are a vector mask, the load a masked load (vmaskmovps, which
 * reads only the columns the tap reaches) and the add a blend of the sum into the lanes the
 * tap reaches (the others keep their value, as the generic code skips them); a unit whose
 * lanes the tap all reaches takes a plain load and add, and only a row's last partial unit
 * a masked store: AMD Zen 3 runs vmaskmovps stores as microcode, and masked loads that
 * cross a cache line slowly (with both everywhere this was 1.8x slower than the generic
 * loop). The same bits as the generic code. 8x64x56x56, 3x3, AMD EPYC Zen 3, A/B: 1 thread
 * 3.0 -> 2.2 ms (1.33x), 2 threads 1.05-1.10x (the memory traffic dominates there). */
/* Lanes [a, b) of an 8-lane vector mask (lane_range's bits, as AVX2 vector lanes). */
__attribute__((target("avx2"))) static inline __m256i lanes8(ptrdiff_t a, ptrdiff_t b)
{
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i bits = _mm256_set1_epi32((int)(lane_range(a, b) & 0xff));
    return _mm256_cmpeq_epi32(_mm256_and_si256(bits, bit), bit);
}

__attribute__((target("avx2"))) static void conv_plane_float_avx2_rows(
    const geometry_t *G, float *restrict out, const float *restrict x, const ptrdiff_t *xs,
    const float *w, const ptrdiff_t *ws, const float *bias)
{
    if (G->sw != 1 || xs[1] != 1 || G->kw > CACHED_TAPS) {
        conv_plane_float_avx2(G, out, x, xs, w, ws, bias);
        return;
    }
    for (ptrdiff_t j0 = 0; j0 < G->ow; j0 += 64) {
        const int units = (int)((G->ow - j0 + 7) / 8 < 8 ? (G->ow - j0 + 7) / 8 : 8);
        __m256i live[8], reach[8][CACHED_TAPS]; /* columns to write; columns tap q reaches */
        unsigned partial[CACHED_TAPS] = {0};    /* bit u: tap q misses some of unit u's lanes */
        for (int u = 0; u < units; u++) {
            const ptrdiff_t first = j0 + 8 * u;
            live[u] = lanes8(0, G->ow - first);
            for (ptrdiff_t q = 0; q < G->kw; q++) {
                reach[u][q] = _mm256_and_si256(lanes8(G->lo[q] - first, G->hi[q] - first),
                                               live[u]);
                if (_mm256_movemask_ps(_mm256_castsi256_ps(reach[u][q])) != 0xff)
                    partial[q] |= 1u << u;
            }
        }
        for (ptrdiff_t i = 0; i < G->oh; i++) {
            __m256 acc[8];
            for (int u = 0; u < 8; u++) acc[u] = _mm256_setzero_ps();
            for (ptrdiff_t p = 0; p < G->kh; p++) {
                const ptrdiff_t r = i * G->sh + p * G->dh - G->ph;
                if (r < 0 || r >= G->h) continue;
                for (ptrdiff_t q = 0; q < G->kw; q++) {
                    const ptrdiff_t column = j0 + q * G->dw - G->pw;
                    const __m256 wv = _mm256_set1_ps(w[p * ws[0] + q * ws[1]]);
                    const float *xr = x + r * xs[0] + column;
                    _Pragma("GCC unroll 8")
                    for (int u = 0; u < 8; u++) {
                        if (u >= units) break;
                        if (!(partial[q] >> u & 1)) {
                            acc[u] = _mm256_add_ps(acc[u],
                                                   _mm256_mul_ps(_mm256_loadu_ps(xr + 8 * u), wv));
                            continue;
                        }
                        const __m256 k = _mm256_castsi256_ps(reach[u][q]);
                        const __m256 v = _mm256_maskload_ps(xr + 8 * u, reach[u][q]);
                        acc[u] = _mm256_blendv_ps(acc[u],
                                                  _mm256_add_ps(acc[u], _mm256_mul_ps(v, wv)),
                                                  k);
                    }
                }
            }
            float *row = out + i * G->ow + j0;
            _Pragma("GCC unroll 8")
            for (int u = 0; u < 8; u++) {
                if (u >= units) break;
                if (bias) acc[u] = _mm256_add_ps(acc[u], _mm256_set1_ps(*bias));
                if (8 * u + 8 <= G->ow - j0)
                    _mm256_storeu_ps(row + 8 * u, acc[u]);
                else /* (a masked store is microcoded on AMD Zen: the row's tail only) */
                    _mm256_maskstore_ps(row + 8 * u, live[u], acc[u]);
            }
        }
    }
}

static const conv_fn CONV_FNS[N_ISAS][2] = {
    {CONV(conv_plane_float_baseline), CONV(conv_plane_double_baseline)},
    {CONV(conv_plane_float_avx2_rows), CONV(conv_plane_double_avx2)},
    {CONV(conv_plane_float_avx512f_rows), CONV(conv_plane_double_avx512f)}};
static const grad_fn GRAD_FNS[N_ISAS][2] = {
    {GRAD(weight_grad_channel_float_baseline), GRAD(weight_grad_channel_double_baseline)},
    {GRAD(weight_grad_channel_float_avx2), GRAD(weight_grad_channel_double_avx2)},
    {GRAD(weight_grad_channel_float_avx512f), GRAD(weight_grad_channel_double_avx512f)}};
#else
static const conv_fn CONV_FNS[N_ISAS][2] = {
    {CONV(conv_plane_float_baseline), CONV(conv_plane_double_baseline)}};
static const grad_fn GRAD_FNS[N_ISAS][2] = {
    {GRAD(weight_grad_channel_float_baseline), GRAD(weight_grad_channel_double_baseline)}};
#endif

/* kernel, out_size, stride, padding, dilation: five pairs into G (and checks them). */
static int parse_geometry(PyObject *const *args, geometry_t *G)
{
    long long k[2], o[2], s[2], p[2], d[2];
    if (parse_window_pairs(args, k, o, s, p, d) < 0) return -1;
    for (int i = 0; i < 2; i++) {
        const long long extent = (i ? G->w : G->h) + 2 * p[i] - d[i] * (k[i] - 1) - 1;
        if (k[i] < 1 || o[i] < 1 || s[i] < 1 || p[i] < 0 || d[i] < 1 || extent < 0 ||
            extent / s[i] + 1 != o[i]) {
            PyErr_SetString(PyExc_ValueError, "kernel, out_size, stride, padding and dilation "
                            "do not describe a convolution of this input");
            return -1;
        }
    }
    G->kh = k[0], G->kw = k[1], G->oh = o[0], G->ow = o[1];
    G->sh = s[0], G->sw = s[1], G->ph = p[0], G->pw = p[1], G->dh = d[0], G->dw = d[1];
    for (ptrdiff_t q = 0; q < G->kw && q < CACHED_TAPS; q++) column_range(G, q, &G->lo[q], &G->hi[q]);
    return 0;
}

/* An (N, C, H, W) shape (`what`) and the five geometry pairs after it into G. */
static int parse_planes(PyObject *shape_obj, const char *what, PyObject *const *geometry,
                        geometry_t *G)
{
    long long shape[MAX_NDIM];
    int nd;
    if (parse_dims(shape_obj, what, -1, shape, &nd) < 0) return -1;
    if (nd != 4) {
        PyErr_Format(PyExc_ValueError, "%s must be (N, C, H, W)", what);
        return -1;
    }
    G->n = shape[0], G->c = shape[1], G->h = shape[2], G->w = shape[3];
    return parse_geometry(geometry, G);
}

/* The filters (C, KH, KW) from args[0..2] (buffer, offset, strides) and the optional bias
 * from args[3..5] (buffer or None, offset, stride), both of `kind`: held, checked, element 0
 * in *w / *b (NULL without a bias), their strides in w_strides / *b_stride. */
static int parse_filters(held_t *h, PyObject *const *args, const geometry_t *G, int kind,
                         char **w, long long *w_strides, char **b, long long *b_stride)
{
    const long long w_shape[3] = {G->c, G->kh, G->kw}, b_shape[1] = {G->c};
    *b = NULL;
    if (parse_dims(args[2], "w_strides", 3, w_strides, NULL) < 0 ||
        kind_operand(h, args[0], args[1], 3, w_shape, w_strides, 0, kind, 0, "w", w) < 0)
        return -1;
    if (args[3] == Py_None) return 0;
    if (parse_int_entry(args[5], "bias_stride", b_stride) < 0) return -1;
    return kind_operand(h, args[3], args[4], 1, b_shape, b_stride, 0, kind, 0, "bias", b);
}

/* fn over every (image, channel) plane: `in` (N, C, ...) at in_strides, out row-major planes
 * of out_plane elements, each plane its channel's filter and bias. */
static void run_planes(conv_fn fn, const geometry_t *G, int kind, char *out,
                       ptrdiff_t out_plane, const char *in, const long long *in_strides,
                       const char *w, const long long *w_strides, const char *b,
                       long long b_stride)
{
    const ptrdiff_t planes = G->n * G->c;
    const ptrdiff_t rows[2] = {(ptrdiff_t)in_strides[2], (ptrdiff_t)in_strides[3]};
    const ptrdiff_t taps[2] = {(ptrdiff_t)w_strides[1], (ptrdiff_t)w_strides[2]};
    const int par = worth_parallel((double)planes * G->oh * G->ow * G->kh * G->kw,
                                   PARALLEL_MIN_WORK);
    const size_t size = kind == KIND_F32 ? sizeof(float) : sizeof(double);
    Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) if (par)
    for (ptrdiff_t pl = 0; pl < planes; pl++) {
        const ptrdiff_t n = pl / G->c, c = pl % G->c;
        fn(G, out + (size_t)(pl * out_plane) * size,
           in + (size_t)(n * in_strides[0] + c * in_strides[1]) * size, rows,
           w + (size_t)(c * w_strides[0]) * size, taps,
           b ? b + (size_t)(c * b_stride) * size : NULL);
    }
    Py_END_ALLOW_THREADS
    g_calls++;
}

static PyObject *py_conv(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 16, "conv(out, x, x_offset, x_shape, x_strides, w, w_offset, "
                               "w_strides, bias, bias_offset, bias_stride, kernel, out_size, "
                               "stride, padding, dilation)") < 0)
        return NULL;
    held_t h = {.held = 0};
    PyObject *result = NULL;
    geometry_t G;
    long long xstr[4], bstr[1] = {0};
    if (parse_planes(args[3], "x_shape", args + 11, &G) < 0) goto done;
    const long long xshape[4] = {G.n, G.c, G.h, G.w};
    const long long oshape[4] = {G.n, G.c, G.oh, G.ow};
    const long long ostr[4] = {G.c * G.oh * G.ow, G.oh * G.ow, G.ow, 1};
    const int kind = float_kind_of(args[1], "x");
    char *x, *w, *b, *out;
    long long wstr[3];
    if (kind < 0 || parse_dims(args[4], "x_strides", 4, xstr, NULL) < 0 ||
        kind_operand(&h, args[1], args[2], 4, xshape, xstr, 0, kind, 0, "x", &x) < 0 ||
        parse_filters(&h, args + 5, &G, kind, &w, wstr, &b, bstr) < 0 ||
        kind_operand(&h, args[0], NULL, 4, oshape, ostr, 1, kind, 0, "out", &out) < 0)
        goto done;
    run_planes(CONV_FNS[g_isa][kind == KIND_F32 ? 0 : 1], &G, kind, out, G.oh * G.ow, x, xstr,
               w, wstr, b, bstr[0]);
    result = Py_None;
done:
    release_held(&h);
    Py_XINCREF(result);
    return result;
}

static PyObject *py_weight_grad(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 13, "weight_grad(out, x, x_offset, x_shape, x_strides, grad, "
                               "grad_offset, grad_strides, kernel, out_size, stride, padding, "
                               "dilation)") < 0)
        return NULL;
    held_t h = {.held = 0};
    PyObject *result = NULL;
    geometry_t G;
    long long xstr[4], gstr[4];
    if (parse_planes(args[3], "x_shape", args + 8, &G) < 0) goto done;
    const long long xshape[4] = {G.n, G.c, G.h, G.w};
    const int kind = float_kind_of(args[1], "x");
    if (kind < 0) goto done;
    char *x, *g, *out;
    const long long gshape[4] = {G.n, G.c, G.oh, G.ow};
    const long long oshape[3] = {G.c, G.kh, G.kw}, ostr[3] = {G.kh * G.kw, G.kw, 1};
    if (parse_dims(args[4], "x_strides", 4, xstr, NULL) < 0 ||
        kind_operand(&h, args[1], args[2], 4, xshape, xstr, 0, kind, 0, "x", &x) < 0 ||
        parse_dims(args[7], "grad_strides", 4, gstr, NULL) < 0 ||
        kind_operand(&h, args[5], args[6], 4, gshape, gstr, 0, kind, 0, "grad", &g) < 0 ||
        kind_operand(&h, args[0], NULL, 3, oshape, ostr, 1, kind, 0, "out", &out) < 0)
        goto done;
    const ptrdiff_t xs[4] = {(ptrdiff_t)xstr[0], (ptrdiff_t)xstr[1], (ptrdiff_t)xstr[2],
                             (ptrdiff_t)xstr[3]};
    const ptrdiff_t gs[4] = {(ptrdiff_t)gstr[0], (ptrdiff_t)gstr[1], (ptrdiff_t)gstr[2],
                             (ptrdiff_t)gstr[3]};
    const int par = worth_parallel((double)G.n * G.c * G.oh * G.ow * G.kh * G.kw,
                                   PARALLEL_MIN_WORK);
    const size_t size = kind == KIND_F32 ? sizeof(float) : sizeof(double);
    const size_t scratch = (size_t)(G.kh * G.kw * G.ow); /* one channel's column sums */
    char *acc = calloc((size_t)G.c * scratch, size);
    if (acc == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const grad_fn channel = GRAD_FNS[g_isa][kind == KIND_F32 ? 0 : 1];
    Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) if (par)
    for (ptrdiff_t c = 0; c < G.c; c++)
        channel(&G, out + (size_t)(c * G.kh * G.kw) * size, acc + c * scratch * size,
                x + (size_t)(c * xs[1]) * size, xs, g + (size_t)(c * gs[1]) * size, gs);
    Py_END_ALLOW_THREADS
    free(acc);
    g_calls++;
    result = Py_None;
done:
    release_held(&h);
    Py_XINCREF(result);
    return result;
}

/* ---- transposed (the input gradient at any stride) ----------------------------------------
 * out (N, C, H, W), H x W the forward's input size, each position the sum of g[i, j] * w[p, q]
 * over the taps whose forward read it: scattered plane by plane, output rows then taps then
 * columns (a fixed order), into a zeroed plane, then + bias. */
#define DEFINE_TRANSPOSED(T)                                                                  \
    static void transposed_plane_##T(const geometry_t *G, T *out, const T *g,                \
                                     const ptrdiff_t *gs, const T *w, const ptrdiff_t *ws,   \
                                     const T *bias)                                          \
    {                                                                                        \
        for (ptrdiff_t k = 0; k < G->h * G->w; k++) out[k] = 0;                              \
        for (ptrdiff_t i = 0; i < G->oh; i++) {                                              \
            const T *grow = g + i * gs[0];                                                   \
            for (ptrdiff_t p = 0; p < G->kh; p++) {                                          \
                const ptrdiff_t r = i * G->sh + p * G->dh - G->ph;                           \
                if (r < 0 || r >= G->h) continue;                                            \
                T *orow = out + r * G->w;                                                    \
                for (ptrdiff_t q = 0; q < G->kw; q++) {                                      \
                    ptrdiff_t lo, hi;                                                        \
                    tap_columns(G, q, &lo, &hi);                                             \
                    const T wv = w[p * ws[0] + q * ws[1]];                                   \
                    const ptrdiff_t first = q * G->dw - G->pw;                               \
                    for (ptrdiff_t j = lo; j < hi; j++)                                      \
                        orow[first + j * G->sw] += grow[j * gs[1]] * wv;                     \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        if (bias)                                                                            \
            for (ptrdiff_t k = 0; k < G->h * G->w; k++) out[k] += *bias;                     \
    }
DEFINE_TRANSPOSED(float)
DEFINE_TRANSPOSED(double)

static PyObject *py_transposed(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 16, "transposed(out, out_shape, g, g_offset, g_strides, w, w_offset, "
                               "w_strides, bias, bias_offset, bias_stride, kernel, g_size, "
                               "stride, padding, dilation)") < 0)
        return NULL;
    held_t h = {.held = 0};
    PyObject *result = NULL;
    geometry_t G;
    long long gstr[4], wstr[3], bstr[1] = {0};
    /* the forward's geometry: its input is out, its output g */
    if (parse_planes(args[1], "out_shape", args + 11, &G) < 0) goto done;
    const long long oshape[4] = {G.n, G.c, G.h, G.w}, gshape[4] = {G.n, G.c, G.oh, G.ow};
    const long long ostr[4] = {G.c * G.h * G.w, G.h * G.w, G.w, 1};
    const int kind = float_kind_of(args[2], "g");
    char *g, *w, *b, *out;
    if (kind < 0 || parse_dims(args[4], "g_strides", 4, gstr, NULL) < 0 ||
        kind_operand(&h, args[2], args[3], 4, gshape, gstr, 0, kind, 0, "g", &g) < 0 ||
        parse_filters(&h, args + 5, &G, kind, &w, wstr, &b, bstr) < 0 ||
        kind_operand(&h, args[0], NULL, 4, oshape, ostr, 1, kind, 0, "out", &out) < 0)
        goto done;
    run_planes(kind == KIND_F32 ? CONV(transposed_plane_float) : CONV(transposed_plane_double),
               &G, kind, out, G.h * G.w, g, gstr, w, wstr, b, bstr[0]);
    result = Py_None;
done:
    release_held(&h);
    Py_XINCREF(result);
    return result;
}

static PyMethodDef METHODS[] = {
    {"conv", (PyCFunction)(void (*)(void))py_conv, METH_FASTCALL,
     "conv(out, x, x_offset, x_shape, x_strides, w, w_offset, w_strides, bias, bias_offset, "
     "bias_stride, kernel, out_size, stride, padding, dilation): depthwise 2-D convolution."},
    {"weight_grad", (PyCFunction)(void (*)(void))py_weight_grad, METH_FASTCALL,
     "weight_grad(out, x, x_offset, x_shape, x_strides, grad, grad_offset, grad_strides, "
     "kernel, out_size, stride, padding, dilation): its (C, KH, KW) weight gradient."},
    {"transposed", (PyCFunction)(void (*)(void))py_transposed, METH_FASTCALL,
     "transposed(out, out_shape, g, g_offset, g_strides, w, w_offset, w_strides, bias, "
     "bias_offset, bias_stride, kernel, g_size, stride, padding, dilation): the transposed "
     "depthwise convolution (the input gradient), any stride."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._depthwise",
    .m_doc = "Depthwise 2-D convolution and its weight gradient for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__depthwise(void)
{
    if (init_module_state() < 0) return NULL;
    return PyModule_Create(&MODULE);
}
