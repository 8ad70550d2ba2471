/* reftorch_cpu._gemm: packed, blocked, register-tiled matrix products (float32, float64).
 *
 * Entry point (reftorch_cpu/gemm.py builds the arguments):
 *
 *   gemm(sizes, out, out_offset, out_strides, a, a_offset, a_strides,
 *        b, b_offset, b_strides, alpha, beta, inp, inp_offset, inp_strides)
 *
 * computes, for each of `batch` matrices (sizes = (batch, M, N, K), strides in elements, one
 * per dim of (batch, rows, cols)):
 *
 *   out[b] = alpha * (a[b] @ b[b]) + beta * inp[b]
 *
 * with the reference's rounding steps: the product is summed in T, then multiplied by alpha
 * (skipped when alpha == 1), then beta * inp is added (skipped when beta == 0: inp is not
 * read at all, so NaN in it does not propagate; inp may then be None). a, b and inp may have
 * any non-negative strides (transposed, stepped, broadcast with stride 0): they are only read
 * by the packing routines. out's column stride must be 1.
 *
 * The structure is GotoBLAS/BLIS's:
 *   - C is cut into blocks of at most MC rows x NC columns (per batch matrix); each block is
 *     one work item, items are shared among the OpenMP threads;
 *   - K is cut into KC-long slices (never across threads); for each slice the item packs its
 *     KC x NC slice of B into NR-wide micro-panels and its MC x KC slice of A into MR-tall
 *     micro-panels (zero padded at the edges), contiguous and 64-byte aligned;
 *   - a micro-kernel keeps an MR x NR tile of C in vector registers and adds the KC rank-1
 *     updates with FMA; the first slice stores the tile, later slices add it to C.
 * Every element of C is therefore computed by the same operations in the same order (one FMA
 * chain per K slice, slices added in order) whatever the thread count and whatever block it
 * falls into: results do not depend on the number of threads.
 *
 * Micro-kernels (rows x columns of C, C row-major so vectors run along a row):
 *   AVX-512F: float 14 x 32, double 14 x 16 (28 accumulators + 2 B vectors of 32 zmm);
 *             float 8 x 48 for convolutions (24 accumulators + 3 B vectors)
 *   AVX2+FMA: float  6 x 16, double  6 x 8  (12 accumulators + 2 B vectors of 16 ymm)
 *   baseline: 4 x 8 plain C (multiply then add: no FMA on baseline x86-64).
 * The epilogue (alpha, beta) is plain C built with -ffp-contract=off, so it rounds exactly as
 * the NumPy reference does.
 *
 * Edge tiles: the packed panels are zero padded, so the micro-kernel always computes a whole
 * tile; at the bottom edge it stores only the valid rows, at the right edge it writes into a
 * small buffer whose valid part is then added to C (same arithmetic either way).
 *
 * A product of at most DOT_MAX_M rows whose A rows and B columns are contiguous along K
 * (x @ W^T: nn.Linear with a small batch) skips all of this: each element is a dot product
 * of two rows (see DEFINE_DOT), summed in an order fixed by K alone.
 *
 *   conv2d(...)  (see py_conv2d) is a 2-D convolution through the same driver: per image,
 *   weight (O x C*KH*KW) @ im2col(x), where the packing of B reads the image directly
 *   (im2col is never built) and the bias is the epilogue's beta * input. A stride-1 one
 *   runs over a zero-padded copy of each image instead where that pays (conv_shifted),
 *   where every im2col row is one contiguous run: packed by whole-vector copies, or read in
 *   place by the float32 AVX-512 kernel (DEFINE_DIRECT_UKR).
 *
 * This file includes itself once per element type (the TEMPLATE part at the end) so the
 * packing and driver code is written once for float and double.
 */
#ifndef GEMM_TEMPLATE

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define HAVE_X86_CLONES 1
#include <immintrin.h>
#else
#define HAVE_X86_CLONES 0
#endif

/* Products with fewer multiply-adds than this run on one thread (a parallel region costs a
 * few microseconds). Measured on a 2-core x86-64, float32 square products, 1 vs 2 threads:
 * 64^3 (256 Ki multiply-adds) 8.8 vs 9.5 us, 96^3 (864 Ki) 26.6 vs 19.6 us. */
#ifndef PARALLEL_MIN_FLOPS
#define PARALLEL_MIN_FLOPS (512 * 1024)
#endif

enum { T_F32, T_F64, N_TYPES };



/* A 2-D convolution seen as a product (see py_conv2d): B is the im2col matrix of one image,
 * never built; its packing reads the image directly. Row p of B is (c, kh, kw), column j is
 * the output position (oh, ow); B[p][j] = x[c][oh*sh - ph + kh*dh][ow*sw - pw + kw*dw], or 0
 * in the padding. */
typedef struct {
    ptrdiff_t h, w, kh, kw, oh, ow;        /* input and kernel extents, output extents */
    ptrdiff_t sh, sw, ph, pw, dh, dw;      /* stride, padding, dilation */
    ptrdiff_t xs_c, xs_h, xs_w;            /* the image's strides (channel, row, column) */
} conv_geometry;

/* What B is: a strided matrix; the im2col matrix of an image (a convolution: rows (c, kh,
 * kw), columns output positions); the same for a stride-1 convolution over a zero-padded
 * copy of the image (conv_shifted), where row p is one contiguous run of the copy; or the
 * im2col matrix's transpose (a convolution's weight gradient: rows output positions,
 * columns (c, kh, kw)). */
enum { B_MATRIX, B_IM2COL, B_SHIFTED, B_IM2COL_T };

/* Whether stride-1 convolutions may take conv_shifted (tests turn it off to compare), and
 * how many have. */
static int g_conv_shifted = 1;
static unsigned long long g_conv_shifted_calls = 0;

/* One product's operands, as checked element offsets and strides (in elements).
 *
 * K may be a sum over `segments` equal parts (a weight gradient sums over the images of a
 * batch): K slices never cross a segment, and segment s of A starts a_seg_s elements after
 * segment 0, of B's image b_seg_s after. A plain product is one segment. */
typedef struct {
    int b_kind;
    const conv_geometry *conv;             /* the image geometry, unless b_kind == B_MATRIX */
    ptrdiff_t batch, m, n, k;              /* k: the whole sum, segments * seg_len */
    ptrdiff_t segments, seg_len, a_seg_s, b_seg_s;
    char *out;
    const char *a, *b, *inp;
    ptrdiff_t out_s[3], a_s[3], b_s[3], inp_s[3]; /* (batch, row, col) strides */
    double alpha, beta;
} gemm_args;

/* ---- micro-kernels --------------------------------------------------------------------- */

/* c[0:rows, 0:NR] (row stride ldc) = (accumulate ? c + : ) sum_p a[p][0:rows] x b[p][0:NR]
 * (rows <= MR; the kernel computes all MR rows, the packed A is zero past its edge):
 * a is an MR-tall packed micro-panel (MR values per p), b an NR-wide one (NR values per p,
 * 64-byte aligned). The accumulators live in registers (the loops over i and v unroll).
 *
 * The A micro-panel stays in L1 while the B micro-panel streams from L2 (see BLOCKING), so
 * each step prefetches B's lines UKR_PREFETCH bytes ahead into L1, and the K loop is
 * unrolled 4 times. Measured on float32 1024^3 (1 thread, builds interleaved in one
 * process): each gave 2-3%, together 4%; 8 KiB of B in flight, 512 B or 2 KiB ahead, made no
 * difference. The order of the FMAs (one chain per accumulator, p ascending) is unchanged. */
#define UKR_PREFETCH 1024
#define DEFINE_VECTOR_UKR(NAME, ATTR, T, VT, VL, MR, NV, LOAD, LOADU, STOREU, SET1, FMA, ADD, \
                          ZERO)                                                               \
    ATTR static void NAME(ptrdiff_t kc, const T *restrict a, const T *restrict b,            \
                          T *restrict c, ptrdiff_t ldc, int accumulate, int rows)            \
    {                                                                                        \
        UKR_BODY(T, VT, VL, MR, NV, LOAD, LOADU, STOREU, SET1, FMA, ADD, ZERO, b,            \
                 b += NV * VL, 1)                                                            \
    }

/* The same tile with B read in place: row p of the micro-panel is the NR values at
 * b + off[p] (unaligned), no packing (conv_shifted's images, see item). */
#define DEFINE_DIRECT_UKR(NAME, ATTR, T, VT, VL, MR, NV, LOADU, STOREU, SET1, FMA, ADD, ZERO) \
    ATTR static void NAME(ptrdiff_t kc, const T *restrict a, const T *b,                     \
                          const ptrdiff_t *restrict off, T *restrict c, ptrdiff_t ldc,       \
                          int accumulate, int rows)                                          \
    {                                                                                        \
        UKR_BODY(T, VT, VL, MR, NV, LOADU, LOADU, STOREU, SET1, FMA, ADD, ZERO, b + off[p],  \
                 (void)0, 0)                                                                 \
    }

/* The kernels' one body: B_ROW is row p's address, B_NEXT what moves to the next row,
 * PREFETCH whether to prefetch ahead. */
#define UKR_BODY(T, VT, VL, MR, NV, LOADB, LOADU, STOREU, SET1, FMA, ADD, ZERO, B_ROW,       \
                 B_NEXT, PREFETCH)                                                           \
        VT acc[MR][NV];                                                                      \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = ZERO();         \
        _Pragma("GCC unroll 4") for (ptrdiff_t p = 0; p < kc; p++) {                         \
            const T *row = B_ROW;                                                            \
            VT bv[NV];                                                                       \
            if (PREFETCH) {                                                                  \
                _Pragma("GCC unroll 4") for (size_t o = 0; o < NV * VL * sizeof(T); o += 64) \
                    __builtin_prefetch((const char *)row + UKR_PREFETCH + o, 0, 3);          \
            }                                                                                \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] = LOADB(row + v * VL); \
            _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                          \
                VT av = SET1(a[i]);                                                          \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                         \
                    acc[i][v] = FMA(av, bv[v], acc[i][v]);                                   \
            }                                                                                \
            a += MR;                                                                         \
            B_NEXT;                                                                          \
        }                                                                                    \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                              \
            if (i >= rows) break;        /* a bottom edge tile: rows past M are not stored */ \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                           \
                T *ci = c + i * ldc + v * VL;                                                \
                STOREU(ci, accumulate ? ADD(LOADU(ci), acc[i][v]) : acc[i][v]);              \
            }                                                                                \
        }

/* The baseline: MR x NR plain C multiply-adds (two roundings each; the FMA clones round
 * once, so baseline results differ from theirs in the last bits). */
#define DEFINE_SCALAR_UKR(NAME, T, MR, NR)                                                   \
    static void NAME(ptrdiff_t kc, const T *restrict a, const T *restrict b, T *restrict c,  \
                     ptrdiff_t ldc, int accumulate, int rows)                                \
    {                                                                                        \
        T acc[MR][NR] = {{0}};                                                               \
        for (ptrdiff_t p = 0; p < kc; p++) {                                                 \
            for (int i = 0; i < MR; i++)                                                     \
                for (int j = 0; j < NR; j++) acc[i][j] = acc[i][j] + a[i] * b[j];            \
            a += MR;                                                                         \
            b += NR;                                                                         \
        }                                                                                    \
        for (int i = 0; i < rows; i++)                                                       \
            for (int j = 0; j < NR; j++)                                                     \
                c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];        \
    }

DEFINE_SCALAR_UKR(ukr_f32_baseline, float, 4, 8)
DEFINE_SCALAR_UKR(ukr_f64_baseline, double, 4, 8)

#if HAVE_X86_CLONES
#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2,fma")))
DEFINE_VECTOR_UKR(ukr_f32_avx512f, AVX512, float, __m512, 16, 14, 2, _mm512_load_ps,
                  _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps,
                  _mm512_add_ps, _mm512_setzero_ps)
/* 8 x 48 for convolutions: their M (output channels) is usually a multiple of 8, and the
 * packed im2col slice is reused by more FMAs per row tile (measured 5-8% faster than 14 x 32
 * on conv2d 8x64x56x56 3x3, 3-5% slower on square products). */
DEFINE_VECTOR_UKR(ukr_f32_conv_avx512f, AVX512, float, __m512, 16, 8, 3, _mm512_load_ps,
                  _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps,
                  _mm512_add_ps, _mm512_setzero_ps)
DEFINE_DIRECT_UKR(ukr_f32_conv_direct_avx512f, AVX512, float, __m512, 16, 8, 3, _mm512_loadu_ps,
                  _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps,
                  _mm512_setzero_ps)
DEFINE_VECTOR_UKR(ukr_f64_avx512f, AVX512, double, __m512d, 8, 14, 2, _mm512_load_pd,
                  _mm512_loadu_pd, _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd,
                  _mm512_add_pd, _mm512_setzero_pd)
DEFINE_VECTOR_UKR(ukr_f32_avx2, AVX2, float, __m256, 8, 6, 2, _mm256_load_ps,
                  _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps,
                  _mm256_add_ps, _mm256_setzero_ps)
DEFINE_VECTOR_UKR(ukr_f64_avx2, AVX2, double, __m256d, 4, 6, 2, _mm256_load_pd,
                  _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd,
                  _mm256_add_pd, _mm256_setzero_pd)
#endif

/* Block sizes per (instruction set, type), for products and for convolutions. One MR x KC
 * micro-panel of A stays in L1 while the NR-wide micro-panels of the KC x NC slice of B
 * stream through the micro-kernel from L2 (that loop order measured faster than the other
 * one); the MC x KC block of A sits in L2. Tuned on a 2-core Sapphire Rapids (48 KiB L1d,
 * 2 MiB L2): KC 128..384, MC 168..672 and NC 512..4096 all came within the noise of the
 * shared machine; these were best or tied. */
typedef void (*ukr_fn)(ptrdiff_t, const void *, const void *, void *, ptrdiff_t, int, int);
typedef void (*direct_ukr_fn)(ptrdiff_t, const void *, const void *, const ptrdiff_t *, void *,
                              ptrdiff_t, int, int);
typedef struct {
    int mr, nr, kc, mc, nc;
    ukr_fn ukr;
    direct_ukr_fn direct;   /* the same tile reading B in place (DEFINE_DIRECT_UKR), or NULL */
} blocking;

#define UKR(f) ((ukr_fn)(void (*)(void))(f))
#define DIRECT_UKR(f) ((direct_ukr_fn)(void (*)(void))(f))
static blocking BLOCKING[N_ISAS][N_TYPES] = {
    {{4, 8, 256, 128, 2048, UKR(ukr_f32_baseline)}, {4, 8, 256, 64, 2048, UKR(ukr_f64_baseline)}},
#if HAVE_X86_CLONES
    {{6, 16, 256, 144, 2048, UKR(ukr_f32_avx2)}, {6, 8, 256, 72, 2048, UKR(ukr_f64_avx2)}},
    {{14, 32, 256, 336, 2048, UKR(ukr_f32_avx512f)}, {14, 16, 256, 168, 2048, UKR(ukr_f64_avx512f)}},
#endif
};
static blocking CONV_BLOCKING[N_ISAS][N_TYPES] = {
    {{4, 8, 256, 128, 2048, UKR(ukr_f32_baseline)}, {4, 8, 256, 64, 2048, UKR(ukr_f64_baseline)}},
#if HAVE_X86_CLONES
    {{6, 16, 256, 144, 2048, UKR(ukr_f32_avx2)}, {6, 8, 256, 72, 2048, UKR(ukr_f64_avx2)}},
    {{8, 48, 256, 336, 2048, UKR(ukr_f32_conv_avx512f),
      DIRECT_UKR(ukr_f32_conv_direct_avx512f)}, {14, 16, 256, 168, 2048, UKR(ukr_f64_avx512f)}},
#endif
};

/* ---- products with few rows: dot products along K -------------------------------------- */

/* A product of at most DOT_MAX_M rows whose operands both run along K in memory (A
 * row-major, B transposed: x @ W^T, nn.Linear's layout with a small batch) is computed as
 * dot products of rows: packing W for the micro-kernel would move as much memory as the
 * whole product reads, for a few rows of use. c[i, j] = the dot product of A's row i and
 * B's column j (W's row j): per 64-byte logical vector of K (16 floats, 8 doubles) one
 * multiply-add per lane, p ascending, then the lanes added as a tree (halves), with the
 * < 1 vector tail as one zero-padded vector. That order depends on K alone (not on M, the
 * tile, or the thread count); the FMA clones fuse each multiply-add (fp-contract=fast for
 * these functions only), the baseline clone cannot, so its bits differ in the last place as
 * the packed kernels' do. IM x JN rows of A and B are taken together (their accumulators in
 * registers: 16 zmm for AVX-512F). Measured (2 threads, 2-core x86-64, float32 F.linear of a
 * 1024 x 1024 weight, us, packed or NumPy before -> dot products, torch): M = 1 188 -> 86
 * (62), M = 4 489 -> 102 (101), M = 8 339 -> 170 (164), M = 16 457 -> 271 (287); at M = 24
 * the packed kernel is faster again (367 against 430). */
#define DOT_MAX_M 16
#define DOT_VBYTES 64
#define DEFINE_DOT(NAME, ATTR, T, IM, JN)                                                    \
    ATTR __attribute__((optimize("fp-contract=fast"))) static void NAME(                     \
        const T *a, ptrdiff_t lda, ptrdiff_t m, const T *b, ptrdiff_t ldb, ptrdiff_t j_lo,   \
        ptrdiff_t j_hi, ptrdiff_t k, T *c, ptrdiff_t ldc)                                    \
    {                                                                                        \
        typedef T V __attribute__((vector_size(DOT_VBYTES)));                                \
        enum { L = DOT_VBYTES / sizeof(T) };                                                 \
        const ptrdiff_t whole = k / L * L;                                                   \
        for (ptrdiff_t j0 = j_lo; j0 < j_hi; j0 += JN) {                                     \
            const T *bj[JN];                                                                 \
            const int jn = j_hi - j0 < JN ? (int)(j_hi - j0) : JN;                           \
            for (int jj = 0; jj < JN; jj++) bj[jj] = b + (j0 + (jj < jn ? jj : 0)) * ldb;    \
            for (ptrdiff_t i0 = 0; i0 < m; i0 += IM) {                                       \
                const T *ai[IM];                                                             \
                const int in = m - i0 < IM ? (int)(m - i0) : IM;                             \
                for (int ii = 0; ii < IM; ii++) ai[ii] = a + (i0 + (ii < in ? ii : 0)) * lda; \
                V acc[IM][JN];                                                               \
                for (int ii = 0; ii < IM; ii++)                                              \
                    for (int jj = 0; jj < JN; jj++) acc[ii][jj] = (V){0};                    \
                for (ptrdiff_t p = 0; p < whole; p += L) {                                   \
                    V av[IM], bv[JN];                                                        \
                    for (int ii = 0; ii < IM; ii++) memcpy(&av[ii], ai[ii] + p, sizeof(V));  \
                    for (int jj = 0; jj < JN; jj++) memcpy(&bv[jj], bj[jj] + p, sizeof(V));  \
                    for (int ii = 0; ii < IM; ii++)                                          \
                        for (int jj = 0; jj < JN; jj++)                                      \
                            acc[ii][jj] = av[ii] * bv[jj] + acc[ii][jj];                     \
                }                                                                            \
                if (whole < k) { /* the tail: one more step on zero-padded copies */          \
                    T ta[IM][L], tb[JN][L];                                                  \
                    memset(ta, 0, sizeof ta);                                                \
                    memset(tb, 0, sizeof tb);                                                \
                    const size_t bytes = (size_t)(k - whole) * sizeof(T);                    \
                    for (int ii = 0; ii < IM; ii++) memcpy(ta[ii], ai[ii] + whole, bytes);   \
                    for (int jj = 0; jj < JN; jj++) memcpy(tb[jj], bj[jj] + whole, bytes);   \
                    for (int ii = 0; ii < IM; ii++)                                          \
                        for (int jj = 0; jj < JN; jj++) {                                    \
                            V av, bv;                                                        \
                            memcpy(&av, ta[ii], sizeof(V));                                  \
                            memcpy(&bv, tb[jj], sizeof(V));                                  \
                            acc[ii][jj] = av * bv + acc[ii][jj];                             \
                        }                                                                    \
                }                                                                            \
                for (int ii = 0; ii < IM; ii++)                                              \
                    for (int jj = 0; jj < JN; jj++) {                                        \
                        if (ii >= in || jj >= jn) continue;                                  \
                        T lanes[L];                                                          \
                        for (int q = 0; q < L; q++) lanes[q] = acc[ii][jj][q];               \
                        for (int w = L / 2; w >= 1; w /= 2)                                  \
                            for (int q = 0; q < w; q++) lanes[q] = lanes[q] + lanes[q + w];  \
                        c[(i0 + ii) * ldc + j0 + jj] = lanes[0];                             \
                    }                                                                        \
            }                                                                                \
        }                                                                                    \
    }

typedef void (*dot_fn)(const void *a, ptrdiff_t lda, ptrdiff_t m, const void *b, ptrdiff_t ldb,
                       ptrdiff_t j_lo, ptrdiff_t j_hi, ptrdiff_t k, void *c, ptrdiff_t ldc);
#define DOT_FN(f) ((dot_fn)(void (*)(void))(f))
DEFINE_DOT(dot_f32_baseline, , float, 1, 2)
DEFINE_DOT(dot_f64_baseline, , double, 1, 2)
#if HAVE_X86_CLONES
DEFINE_DOT(dot_f32_avx2, AVX2, float, 2, 2)
DEFINE_DOT(dot_f64_avx2, AVX2, double, 2, 2)
DEFINE_DOT(dot_f32_avx512f, AVX512, float, 4, 4)
DEFINE_DOT(dot_f64_avx512f, AVX512, double, 4, 4)
static const dot_fn DOT[N_ISAS][N_TYPES] = {
    {DOT_FN(dot_f32_baseline), DOT_FN(dot_f64_baseline)},
    {DOT_FN(dot_f32_avx2), DOT_FN(dot_f64_avx2)},
    {DOT_FN(dot_f32_avx512f), DOT_FN(dot_f64_avx512f)}};
#else
static const dot_fn DOT[N_ISAS][N_TYPES] = {{DOT_FN(dot_f32_baseline), DOT_FN(dot_f64_baseline)}};
#endif
/* Columns (W's rows) per work item of a dot-product product. */
#define DOT_COLUMNS 64

#if HAVE_X86_CLONES
/* Packing one NR-wide micro-panel of a transposed B (columns of B contiguous: element (p, j)
 * at b[j * sn + p]), the layout of every nn.Linear forward (x @ weight.t()). Element by
 * element, either the reads or the writes run across memory (measured 0.57 ns per element,
 * a fifth of a 256 x 512 x 784 product's time); instead, square blocks of 16 columns x 16 k
 * (float; 8 x 8 double) are loaded row by row, transposed in registers and stored as 16
 * packed rows (0.23 ns per element). A transposition is three rounds of pairwise merges:
 * interleave elements of row pairs, then pairs of elements, then 128-bit lanes. */
AVX512 static void transpose16_f32(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {          /* rows i, i + 1 interleaved element-wise */
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {          /* then in pairs: each lane holds a 4 x 4 */
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {              /* then the 4 x 4 blocks, lane by lane */
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

AVX512 static void transpose8_f64(__m512d r[8])
{
    __m512d t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);
    }
    for (int i = 0; i < 2; i++) {              /* even (i = 0) and odd (i = 1) columns */
        u[i] = _mm512_shuffle_f64x2(t[i], t[i + 2], 0x88);
        u[i + 2] = _mm512_shuffle_f64x2(t[i], t[i + 2], 0xdd);
        u[i + 4] = _mm512_shuffle_f64x2(t[i + 4], t[i + 6], 0x88);
        u[i + 6] = _mm512_shuffle_f64x2(t[i + 4], t[i + 6], 0xdd);
    }
    for (int i = 0; i < 2; i++) {
        r[i] = _mm512_shuffle_f64x2(u[i], u[i + 4], 0x88);
        r[i + 4] = _mm512_shuffle_f64x2(u[i], u[i + 4], 0xdd);
        r[i + 2] = _mm512_shuffle_f64x2(u[i + 2], u[i + 6], 0x88);
        r[i + 6] = _mm512_shuffle_f64x2(u[i + 2], u[i + 6], 0xdd);
    }
}

/* One 32-wide (float) / 16-wide (double) panel of a transposed B: two column halves, each
 * transposed a square block at a time; the last kc % 16 (8) rows element by element. */
AVX512 static void pack32_cols_f32(ptrdiff_t kc, const float *b, ptrdiff_t sn, float *dst)
{
    for (int half = 0; half < 2; half++, b += 16 * sn, dst += 16) {
        ptrdiff_t p = 0;
        for (; p + 16 <= kc; p += 16) {
            __m512 r[16];
            for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(b + j * sn + p);
            transpose16_f32(r);
            for (int q = 0; q < 16; q++) _mm512_store_ps(dst + (p + q) * 32, r[q]);
        }
        for (; p < kc; p++)
            for (int j = 0; j < 16; j++) dst[p * 32 + j] = b[j * sn + p];
    }
}

AVX512 static void pack16_cols_f64(ptrdiff_t kc, const double *b, ptrdiff_t sn, double *dst)
{
    for (int half = 0; half < 2; half++, b += 8 * sn, dst += 8) {
        ptrdiff_t p = 0;
        for (; p + 8 <= kc; p += 8) {
            __m512d r[8];
            for (int j = 0; j < 8; j++) r[j] = _mm512_loadu_pd(b + j * sn + p);
            transpose8_f64(r);
            for (int q = 0; q < 8; q++) _mm512_store_pd(dst + (p + q) * 16, r[q]);
        }
        for (; p < kc; p++)
            for (int j = 0; j < 8; j++) dst[p * 16 + j] = b[j * sn + p];
    }
}

/* Packing `panels` whole micro-panels of a row-major B (rows contiguous), each `width`
 * bytes (NR elements, a multiple of 64) wide, row by row: each row of B is read in order
 * and its NR-wide pieces go to consecutive panels. Panel by panel (the plain C loop), each
 * k step read 128 bytes of the next row: 1.45 ns per element for a 1024-wide float32 B
 * (rows 4 KiB apart: the lines compete for the same cache sets), 0.47 for a 1040-wide one;
 * row by row, 0.37 for either (measured alone, 1024 x 1024, one thread). */
AVX512 static void pack_rows_avx512(ptrdiff_t kc, ptrdiff_t panels, ptrdiff_t width,
                                    const char *b, ptrdiff_t row_bytes, char *dst)
{
    for (ptrdiff_t p = 0; p < kc; p++) {
        const char *src = b + p * row_bytes;
        char *d = dst + p * width;
        for (ptrdiff_t r = 0; r < panels; r++, src += width, d += width * kc)
            for (ptrdiff_t o = 0; o < width; o += 64)
                _mm512_store_si512((void *)(d + o), _mm512_loadu_si512((const void *)(src + o)));
    }
}

/* Packing 14 rows of a row-major A (the AVX-512 micro-panels): square blocks of 16 (float;
 * 8 double) k values of each row are loaded, transposed in registers and stored as 14-wide
 * packed columns, so the writes stay sequential and each line of A is read once. One gather
 * per k across the 14 rows (the previous method; element by element was slower still) cost
 * 0.94 ns per element for a 1024-wide float32 A (14 lines 4 KiB apart share cache sets),
 * 0.75 for a 1040-wide one; this costs 0.5-0.6, about what reading A from L3 costs here
 * (measured alone, 1024 x 1024, one thread). The last kc % 16 (8) k values are gathered. */
AVX512 static void pack14_rows_f32(ptrdiff_t kc, int rows, const float *a, ptrdiff_t sm,
                                   float *dst)
{
    ptrdiff_t p = 0;
    for (; p + 16 <= kc; p += 16) {
        __m512 r[16];
        for (int i = 0; i < 16; i++)      /* rows past M (and rows 14, 15) stay zero */
            r[i] = i < rows ? _mm512_loadu_ps(a + i * sm + p) : _mm512_setzero_ps();
        transpose16_f32(r);
        for (int q = 0; q < 16; q++) _mm512_mask_storeu_ps(dst + (p + q) * 14, 0x3FFF, r[q]);
    }
    const __mmask16 valid = (__mmask16)((1u << rows) - 1);
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_set_epi32(0, 0, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32((int)sm));
    for (; p < kc; p++) {
        __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, idx, a + p, 4);
        _mm512_mask_storeu_ps(dst + p * 14, 0x3FFF, v);
    }
}

AVX512 static void pack14_rows_f64(ptrdiff_t kc, int rows, const double *a, ptrdiff_t sm,
                                   double *dst)
{
    ptrdiff_t p = 0;
    for (; p + 8 <= kc; p += 8) {
        __m512d lo[8], hi[8];             /* rows 0..7 and 8..13 (14, 15 and past M zero) */
        for (int i = 0; i < 8; i++) {
            lo[i] = i < rows ? _mm512_loadu_pd(a + i * sm + p) : _mm512_setzero_pd();
            hi[i] = 8 + i < rows ? _mm512_loadu_pd(a + (8 + i) * sm + p) : _mm512_setzero_pd();
        }
        transpose8_f64(lo);
        transpose8_f64(hi);
        for (int q = 0; q < 8; q++) {
            _mm512_storeu_pd(dst + (p + q) * 14, lo[q]);
            _mm512_mask_storeu_pd(dst + (p + q) * 14 + 8, 0x3F, hi[q]);
        }
    }
    const __mmask8 valid_lo = (__mmask8)(rows >= 8 ? 0xFF : (1u << rows) - 1);
    const __mmask8 valid_hi = (__mmask8)(rows <= 8 ? 0 : (1u << (rows - 8)) - 1);
    const __m256i step = _mm256_set1_epi32((int)sm);
    const __m256i lo = _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), step);
    const __m256i hi = _mm256_mullo_epi32(_mm256_set_epi32(0, 0, 13, 12, 11, 10, 9, 8), step);
    for (; p < kc; p++) {
        _mm512_storeu_pd(dst + p * 14,
                         _mm512_mask_i32gather_pd(_mm512_setzero_pd(), valid_lo, lo, a + p, 8));
        _mm512_mask_storeu_pd(dst + p * 14 + 8, 0x3F,
                              _mm512_mask_i32gather_pd(_mm512_setzero_pd(), valid_hi, hi, a + p, 8));
    }
}

/* Whole NR-wide micro-panels of one packed row: `panels` pieces of `width` bytes (a
 * multiple of 64) from consecutive memory at src, each to its panel, panel_bytes apart
 * (pack_b_shifted's rows). */
AVX512 static void copy_panels_avx512(ptrdiff_t panels, ptrdiff_t width, const char *src,
                                      char *dst, ptrdiff_t panel_bytes)
{
    for (ptrdiff_t r = 0; r < panels; r++, src += width, dst += panel_bytes)
        for (ptrdiff_t o = 0; o < width; o += 64)
            _mm512_store_si512((void *)(dst + o), _mm512_loadu_si512((const void *)(src + o)));
}
#endif

static ptrdiff_t ceil_div(ptrdiff_t a, ptrdiff_t b) { return (a + b - 1) / b; }

/* Where im2col row q = (c, kh, kw) of a zero-padded image (B_SHIFTED; cv describes the
 * padded copy, see conv_shifted) starts: its column j' is element shift + j' of the copy. */
static ptrdiff_t shifted_row(const conv_geometry *cv, ptrdiff_t q)
{
    const ptrdiff_t kw = q % cv->kw, kh = q / cv->kw % cv->kh, c = q / (cv->kw * cv->kh);
    return c * cv->xs_c + kh * cv->dh * cv->xs_h + kw * cv->dw;
}

/* shifted_row of rows q0 .. q0 + count - 1 into rows[]: the (c, kh, kw) counters stepped
 * along, one set of divisions for the lot (three per row were half an item's time in
 * LeNet's 12x12 layer, whose items are one image of 150 rows each). */
static void shifted_rows(const conv_geometry *cv, ptrdiff_t q0, ptrdiff_t count,
                         ptrdiff_t *rows)
{
    ptrdiff_t kw = q0 % cv->kw, kh = q0 / cv->kw % cv->kh;
    ptrdiff_t at = shifted_row(cv, q0);
    const ptrdiff_t kh_step = cv->dh * cv->xs_h;
    for (ptrdiff_t p = 0; p < count; p++) {
        rows[p] = at;
        if (++kw < cv->kw) {
            at += cv->dw;
        } else if (kw = 0, ++kh < cv->kh) {
            at += kh_step - (cv->kw - 1) * cv->dw;
        } else {
            kh = 0;
            at += cv->xs_c - (cv->kh - 1) * kh_step - (cv->kw - 1) * cv->dw;
        }
    }
}

/* The A block one thread packed last (see item): where it starts and its size. */
typedef struct {
    const void *from;
    ptrdiff_t rows, cols;
} packed_block;

static ptrdiff_t round_up(ptrdiff_t a, ptrdiff_t b) { return ceil_div(a, b) * b; }

/* Where row q = (c, kh, kw) of an image's im2col matrix reads the image: output position
 * (oh, ow) reads input (oh * sh + row_off, ow * sw + col_off) of channel c, inside the image
 * for output columns [ow_lo, ow_hi) (and rows checked per output row). */
typedef struct {
    ptrdiff_t c_off, row_off, col_off, ow_lo, ow_hi;
} im2col_row;

/* Row (c, kh, kw); a unit column stride needs no division (a small layer's col2im spends
 * more on its rows' geometry than on its adds otherwise). */
static im2col_row im2col_row_of(const conv_geometry *cv, ptrdiff_t c, ptrdiff_t kh,
                                ptrdiff_t kw)
{
    im2col_row row;
    row.c_off = c * cv->xs_c;
    row.row_off = kh * cv->dh - cv->ph;
    row.col_off = kw * cv->dw - cv->pw;
    /* ow * sw + col_off in [0, w) */
    if (cv->sw == 1) {
        row.ow_lo = row.col_off >= 0 ? 0 : -row.col_off;
        row.ow_hi = cv->w - row.col_off <= 0 ? 0 : cv->w - row.col_off;
    } else {
        row.ow_lo = row.col_off >= 0 ? 0 : ceil_div(-row.col_off, cv->sw);
        row.ow_hi = cv->w - row.col_off <= 0 ? 0 : ceil_div(cv->w - row.col_off, cv->sw);
    }
    if (row.ow_hi > cv->ow) row.ow_hi = cv->ow;
    return row;
}

static im2col_row im2col_row_at(const conv_geometry *cv, ptrdiff_t q)
{
    const ptrdiff_t kernel = cv->kh * cv->kw;
    const ptrdiff_t r = q % kernel;
    return im2col_row_of(cv, q / kernel, r / cv->kw, r % cv->kw);
}

/* ---- the type-generic part: packing, edge tiles, epilogue, driver ---------------------- */

#define GEMM_TEMPLATE
#define T float
#define NAME(x) x##_f32
#define PACK14_ROWS pack14_rows_f32
#define PACK_COLS pack32_cols_f32
#define PACK_COLS_NR 32
#include "gemm.c"
#undef T
#undef NAME
#undef PACK14_ROWS
#undef PACK_COLS
#undef PACK_COLS_NR
#define T double
#define NAME(x) x##_f64
#define PACK14_ROWS pack14_rows_f64
#define PACK_COLS pack16_cols_f64
#define PACK_COLS_NR 16
#include "gemm.c"
#undef T
#undef NAME
#undef PACK14_ROWS
#undef PACK_COLS
#undef PACK_COLS_NR
#undef GEMM_TEMPLATE

/* ---- argument checking ----------------------------------------------------------------- */

/* The element type codes are common.h's kinds (buffer_float_kind returns them). */
_Static_assert((int)T_F32 == (int)KIND_F32 && (int)T_F64 == (int)KIND_F64,
               "T_* must match KIND_*");

/* Parse (buffer, offset, strides) of one operand with the given (batch, rows, cols) shape,
 * check every element it reaches lies in the buffer, and return its element-0 pointer. */
static int operand(PyObject *const *args, const char *const names[3], int writable,
                   const long long *shape, Py_buffer *view, int *type, ptrdiff_t strides[3],
                   const char **ptr)
{
    const char *what = names[0];
    long long offset, st[3];
    if (parse_offset(args[1], names[1], &offset) < 0) return -1;
    if (parse_dims(args[2], names[2], 3, st, NULL) < 0) return -1;
    for (int d = 0; d < 3; d++) {
        if (st[d] < 0) {
            PyErr_Format(PyExc_ValueError, "%s must be non-negative", names[2]);
            return -1;
        }
    }
    if (get_buffer(args[0], view, writable, what) < 0) return -1;
    *type = buffer_float_kind(view, what);
    if (*type < 0 || check_view(view, what, offset, 3, shape, st) < 0) {
        PyBuffer_Release(view);
        return -1;
    }
    for (int d = 0; d < 3; d++) strides[d] = (ptrdiff_t)st[d];
    *ptr = (const char *)view->buf + (size_t)offset * (size_t)view->itemsize;
    return 0;
}

static const char *const OUT_NAMES[3] = {"out", "out_offset", "out_strides"};
static const char *const A_NAMES[3] = {"a", "a_offset", "a_strides"};
static const char *const B_NAMES[3] = {"b", "b_offset", "b_strides"};
static const char *const INP_NAMES[3] = {"inp", "inp_offset", "inp_strides"};

static int run_gemm(int type, const gemm_args *g, int isa)
{
    return type == T_F32 ? gemm_f32(g, isa) : gemm_f64(g, isa);
}

/* ---- entry points ---------------------------------------------------------------------- */

/* Run the product without the GIL, then release the operands' buffers; -1 (MemoryError set)
 * when the packing buffers could not be allocated. */
static int run_and_release(int type, const gemm_args *g, Py_buffer *views, int nviews)
{
    int status;
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    status = run_gemm(type, g, g_isa);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < nviews; i++) PyBuffer_Release(&views[i]);
    if (status < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}


static PyObject *py_gemm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 15) {
        PyErr_Format(PyExc_TypeError, "gemm() takes 15 arguments (sizes, out, out_offset, "
                     "out_strides, a, a_offset, a_strides, b, b_offset, b_strides, alpha, beta, "
                     "inp, inp_offset, inp_strides), got %zd", nargs);
        return NULL;
    }
    long long sizes[4];
    if (parse_dims(args[0], "sizes", 4, sizes, NULL) < 0) return NULL;
    for (int d = 0; d < 4; d++) {
        if (sizes[d] < 0) {
            PyErr_SetString(PyExc_ValueError, "sizes must be non-negative");
            return NULL;
        }
    }
    gemm_args g;
    g.b_kind = B_MATRIX;
    g.conv = NULL;
    g.alpha = PyFloat_AsDouble(args[10]);
    if (g.alpha == -1.0 && PyErr_Occurred()) return NULL;
    g.beta = PyFloat_AsDouble(args[11]);
    if (g.beta == -1.0 && PyErr_Occurred()) return NULL;
    g.batch = sizes[0], g.m = sizes[1], g.n = sizes[2], g.k = sizes[3];
    g.segments = 1, g.seg_len = g.k, g.a_seg_s = g.b_seg_s = 0;
    const long long out_shape[3] = {sizes[0], sizes[1], sizes[2]};
    const long long a_shape[3] = {sizes[0], sizes[1], sizes[3]};
    const long long b_shape[3] = {sizes[0], sizes[3], sizes[2]};
    Py_buffer views[4];
    int types[4], nviews = 0;
    const char *out_ptr;
    if (operand(args + 1, OUT_NAMES, 1, out_shape, &views[0], &types[0], g.out_s, &out_ptr) < 0)
        return NULL;
    nviews = 1;
    if (operand(args + 4, A_NAMES, 0, a_shape, &views[1], &types[1], g.a_s, &g.a) < 0) goto fail;
    nviews = 2;
    if (operand(args + 7, B_NAMES, 0, b_shape, &views[2], &types[2], g.b_s, &g.b) < 0) goto fail;
    nviews = 3;
    g.out = (char *)out_ptr;
    g.inp = NULL;
    memset(g.inp_s, 0, sizeof g.inp_s);
    if (g.beta != 0.0) {
        if (args[12] == Py_None) {
            PyErr_SetString(PyExc_TypeError, "inp is needed when beta != 0");
            goto fail;
        }
        if (operand(args + 12, INP_NAMES, 0, out_shape, &views[3], &types[3], g.inp_s, &g.inp) < 0)
            goto fail;
        nviews = 4;
    }
    for (int i = 1; i < nviews; i++) {
        if (types[i] != types[0]) {
            PyErr_SetString(PyExc_TypeError, "gemm operands must share one element type");
            goto fail;
        }
    }
    if (g.out_s[2] != 1 && g.n > 1) {
        PyErr_SetString(PyExc_ValueError, "out must have unit column stride");
        goto fail;
    }
    if (run_and_release(types[0], &g, views, nviews) < 0) return NULL;
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < nviews; i++) PyBuffer_Release(&views[i]);
    return NULL;
}

/* The arguments conv2d and conv2d_weight_grad share, checked: x_shape, x_strides (args[4],
 * args[5]) and out_channels, kernel, out_size, stride, padding, dilation (args[9..14]); the
 * image geometry they give goes to *cv. */
static int parse_conv(PyObject *const *args, long long xshape[4], long long xst[4],
                      long long *oc, conv_geometry *cv)
{
    long long kernel[2], osize[2], stride[2], pad[2], dil[2];
    if (parse_dims(args[4], "x_shape", 4, xshape, NULL) < 0 ||
        parse_dims(args[5], "x_strides", 4, xst, NULL) < 0 ||
        parse_offset(args[9], "out_channels", oc) < 0 ||
        parse_window_pairs(args + 10, kernel, osize, stride, pad, dil) < 0)
        return -1;
    for (int d = 0; d < 4; d++) {
        if (xshape[d] < 0 || xst[d] < 0) {
            PyErr_SetString(PyExc_ValueError, "x_shape and x_strides must be non-negative");
            return -1;
        }
    }
    for (int d = 0; d < 2; d++) {
        if (kernel[d] < 1 || osize[d] < 0 || stride[d] < 1 || pad[d] < 0 || dil[d] < 1) {
            PyErr_SetString(PyExc_ValueError, "conv2d(): bad kernel, output size, stride, "
                            "padding or dilation");
            return -1;
        }
        long long span, padded, expect;
        if (__builtin_mul_overflow(dil[d], kernel[d] - 1, &span) ||
            __builtin_mul_overflow(pad[d], 2, &padded) ||
            __builtin_add_overflow(xshape[2 + d], padded, &padded)) {
            PyErr_SetString(PyExc_ValueError, "conv2d(): sizes overflow");
            return -1;
        }
        expect = (padded - span - 1) / stride[d] + 1;
        if (expect < 0) expect = 0;
        if (osize[d] != expect) {
            PyErr_SetString(PyExc_ValueError, "conv2d(): out_size does not match the input");
            return -1;
        }
    }
    /* The callers multiply sizes (the output's and the columns' numel, the weight's, their
     * partial products, strides made of them): every such product must fit in 64 bits, or a
     * wrapped one would make a view look empty or small and skip its bounds check. */
    const long long products[3][4] = {{xshape[0], xshape[1], xshape[2], xshape[3]},
                                      {xshape[0], *oc, osize[0], osize[1]},
                                      {*oc, xshape[1], kernel[0], kernel[1]}};
    for (int i = 0; i < 3; i++) {
        long long p = 1;
        for (int j = 0; j < 4; j++) {   /* (a zero factor is 1 here: the partials count) */
            if (__builtin_mul_overflow(p, products[i][j] > 0 ? products[i][j] : 1, &p)) {
                PyErr_SetString(PyExc_ValueError, "conv2d(): sizes overflow");
                return -1;
            }
        }
    }
    const conv_geometry geometry = {xshape[2], xshape[3], kernel[0], kernel[1], osize[0],
                                    osize[1], stride[0], stride[1], pad[0], pad[1], dil[0],
                                    dil[1], xst[1], xst[2], xst[3]};
    *cv = geometry;
    return 0;
}

/* The buffers bufs[0..n) (out, x, a second operand, an optional bias; names for messages),
 * each checked to hold float32 or float64, all one type; out writable. Returns n (release
 * them all) or -1 with an error set and nothing left acquired. */
static int conv_buffers(PyObject *const *bufs, const char *const *names, int n,
                        Py_buffer *views, int *type)
{
    *type = -1; /* the first buffer's, which the others must share */
    for (int i = 0; i < n; i++) {
        if (get_buffer(bufs[i], &views[i], i == 0, names[i]) < 0) {
            for (int j = 0; j < i; j++) PyBuffer_Release(&views[j]);
            return -1;
        }
        int t = buffer_float_kind(&views[i], names[i]);
        if (t >= 0 && i > 0 && t != *type) {
            PyErr_SetString(PyExc_TypeError, "conv2d operands must share one element type");
            t = -1;
        }
        if (t < 0) {
            for (int j = 0; j <= i; j++) PyBuffer_Release(&views[j]);
            return -1;
        }
        *type = t;
    }
    return n;
}


/* conv2d(out, out_offset, x, x_offset, x_shape, x_strides, w, w_offset, w_strides,
 *        out_channels, kernel, out_size, stride, padding, dilation, bias, bias_offset,
 *        bias_stride): a 2-D convolution (groups 1, not transposed) of x (N, C, H, W) with
 * the weight viewed as an (out_channels, C*KH*KW) matrix (w_strides: its two strides), into a
 * contiguous out (N, out_channels, OH, OW); bias (a vector, or None) is added last. Per image
 * it is the product weight @ im2col(x[n]), whose packing reads x directly. */
static PyObject *py_conv2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 18) {
        PyErr_Format(PyExc_TypeError, "conv2d() takes 18 arguments, got %zd", nargs);
        return NULL;
    }
    long long xshape[4], xst[4], wst[2], out_off, x_off, w_off, oc;
    long long bias_off = 0, bias_stride = 0;
    conv_geometry cv;
    if (parse_offset(args[1], "out_offset", &out_off) < 0 ||
        parse_offset(args[3], "x_offset", &x_off) < 0 ||
        parse_offset(args[7], "w_offset", &w_off) < 0 ||
        parse_dims(args[8], "w_strides", 2, wst, NULL) < 0 ||
        parse_conv(args, xshape, xst, &oc, &cv) < 0)
        return NULL;
    if (wst[0] < 0 || wst[1] < 0) {
        PyErr_SetString(PyExc_ValueError, "conv2d(): weight strides must be non-negative");
        return NULL;
    }
    const int has_bias = args[15] != Py_None;
    if (has_bias && (parse_offset(args[16], "bias_offset", &bias_off) < 0 ||
                     parse_offset(args[17], "bias_stride", &bias_stride) < 0))
        return NULL;
    const long long L = cv.oh * cv.ow, K = xshape[1] * cv.kh * cv.kw;
    gemm_args g;
    memset(&g, 0, sizeof g);
    g.b_kind = B_IM2COL;
    g.conv = &cv;
    g.batch = xshape[0], g.m = oc, g.n = L, g.k = K;
    g.segments = 1, g.seg_len = K;
    g.alpha = 1.0, g.beta = has_bias ? 1.0 : 0.0;
    g.out_s[0] = oc * L, g.out_s[1] = L, g.out_s[2] = 1;
    g.a_s[0] = 0, g.a_s[1] = wst[0], g.a_s[2] = wst[1];
    g.b_s[0] = xst[0];
    g.inp_s[0] = 0, g.inp_s[1] = bias_stride, g.inp_s[2] = 0;
    Py_buffer views[4];
    int type;
    PyObject *const bufs[4] = {args[0], args[2], args[6], args[15]};
    static const char *const names[4] = {"out", "x", "w", "bias"};
    const int nviews = conv_buffers(bufs, names, 3 + has_bias, views, &type);
    if (nviews < 0) return NULL;
    {
        const long long out_shape[3] = {xshape[0], oc, L}, out_st[3] = {oc * L, L, 1};
        const long long w_shape[3] = {1, oc, K}, w_st3[3] = {0, wst[0], wst[1]};
        const long long b_shape[3] = {1, oc, 1}, b_st[3] = {0, bias_stride, 0};
        Py_ssize_t len[4];
        for (int i = 0; i < nviews; i++) len[i] = views[i].len / views[i].itemsize;
        const int empty_out = xshape[0] * oc * L == 0, empty_w = oc * K == 0;
        if ((!empty_out && check_bounds("out", len[0], out_off, 3, out_shape, out_st) < 0) ||
            (!empty_out && xshape[1] > 0 && check_bounds("x", len[1], x_off, 4, xshape, xst) < 0) ||
            (!empty_w && check_bounds("w", len[2], w_off, 3, w_shape, w_st3) < 0) ||
            (has_bias && oc > 0 && check_bounds("bias", len[3], bias_off, 3, b_shape, b_st) < 0)) {
            for (int i = 0; i < nviews; i++) PyBuffer_Release(&views[i]);
            return NULL;
        }
    }
    const size_t size = (size_t)views[0].itemsize;
    g.out = (char *)views[0].buf + (size_t)out_off * size;
    g.b = (const char *)views[1].buf + (size_t)x_off * size;
    g.a = (const char *)views[2].buf + (size_t)w_off * size;
    g.inp = has_bias ? (const char *)views[3].buf + (size_t)bias_off * size : NULL;
    if (run_and_release(type, &g, views, nviews) < 0) return NULL;
    Py_RETURN_NONE;
}

/* conv2d_weight_grad(out, out_offset, x, x_offset, x_shape, x_strides, grad, grad_offset,
 *                    grad_strides, out_channels, kernel, out_size, stride, padding,
 *                    dilation): the gradient of a 2-D convolution (groups 1, not transposed)
 * of x (N, C, H, W) with respect to its weight, given the output's gradient grad
 * (N, out_channels, OH, OW; its (OH, OW) dims must collapse into one stride), into a
 * contiguous out (out_channels, C*KH*KW):
 *     out = sum over images n of grad[n] (out_channels x OH*OW) @ im2col(x[n])^T,
 * one product whose K (all images' output positions) is cut into per-image segments. */
static PyObject *py_conv2d_weight_grad(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 15) {
        PyErr_Format(PyExc_TypeError, "conv2d_weight_grad() takes 15 arguments, got %zd",
                     nargs);
        return NULL;
    }
    long long xshape[4], xst[4], gst[4], out_off, x_off, g_off, oc;
    conv_geometry cv;
    if (parse_offset(args[1], "out_offset", &out_off) < 0 ||
        parse_offset(args[3], "x_offset", &x_off) < 0 ||
        parse_offset(args[7], "grad_offset", &g_off) < 0 ||
        parse_dims(args[8], "grad_strides", 4, gst, NULL) < 0 ||
        parse_conv(args, xshape, xst, &oc, &cv) < 0)
        return NULL;
    for (int d = 0; d < 4; d++) {
        if (gst[d] < 0) {
            PyErr_SetString(PyExc_ValueError, "grad_strides must be non-negative");
            return NULL;
        }
    }
    if (cv.ow > 1 && cv.oh > 1 && gst[2] != cv.ow * gst[3]) {
        PyErr_SetString(PyExc_ValueError, "conv2d_weight_grad(): grad's spatial dims must "
                        "collapse into one stride");
        return NULL;
    }
    const long long L = cv.oh * cv.ow, K = xshape[1] * cv.kh * cv.kw;
    gemm_args g;
    memset(&g, 0, sizeof g);
    g.b_kind = B_IM2COL_T;
    g.conv = &cv;
    g.batch = 1, g.m = oc, g.n = K, g.k = xshape[0] * L;
    g.segments = xshape[0], g.seg_len = L, g.a_seg_s = gst[0], g.b_seg_s = xst[0];
    g.alpha = 1.0, g.beta = 0.0;
    g.out_s[1] = K, g.out_s[2] = 1;
    g.a_s[1] = gst[1], g.a_s[2] = cv.ow > 1 ? gst[3] : gst[2];
    Py_buffer views[3];
    int type;
    PyObject *const bufs[3] = {args[0], args[2], args[6]};
    static const char *const names[3] = {"out", "x", "grad"};
    const int nviews = conv_buffers(bufs, names, 3, views, &type);
    if (nviews < 0) return NULL;
    {
        const long long out_shape[3] = {1, oc, K}, out_st[3] = {0, K, 1};
        const long long g_shape[4] = {xshape[0], oc, cv.oh, cv.ow};
        Py_ssize_t len[3];
        for (int i = 0; i < 3; i++) len[i] = views[i].len / views[i].itemsize;
        const int empty_sum = xshape[0] * L == 0;
        if ((oc * K > 0 && check_bounds("out", len[0], out_off, 3, out_shape, out_st) < 0) ||
            (!empty_sum && oc * K > 0 &&
             (check_bounds("x", len[1], x_off, 4, xshape, xst) < 0 ||
              check_bounds("grad", len[2], g_off, 4, g_shape, gst) < 0))) {
            for (int i = 0; i < nviews; i++) PyBuffer_Release(&views[i]);
            return NULL;
        }
    }
    const size_t size = (size_t)views[0].itemsize;
    g.out = (char *)views[0].buf + (size_t)out_off * size;
    g.b = (const char *)views[1].buf + (size_t)x_off * size;
    g.a = (const char *)views[2].buf + (size_t)g_off * size;
    if (run_and_release(type, &g, views, nviews) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Images of col2im per parallel group: about this many added elements per group. */
#define COL2IM_GROUP_ELEMENTS (64 * 1024)

/* col2im(image, image_offset, cols, cols_offset, image_shape, image_strides, bias,
 *        bias_offset, bias_stride, rows, kernel, cols_size, stride, padding, dilation): the
 * adjoint of im2col, into a contiguous image (N, C, H, W) from contiguous columns
 * (N, rows = C*KH*KW, OH*OW) whose positions are those a convolution of the image with
 * (kernel, stride, padding, dilation) has (cols_size = (OH, OW)); bias (a vector, or None)
 * is added last. A transposed convolution is weight^T @ x per image, then this. */
static PyObject *py_col2im(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 15) {
        PyErr_Format(PyExc_TypeError, "col2im() takes 15 arguments, got %zd", nargs);
        return NULL;
    }
    long long shape[4], st[4], rows, out_off, cols_off, bias_off = 0, bias_stride = 0;
    conv_geometry cv;
    if (parse_offset(args[1], "image_offset", &out_off) < 0 ||
        parse_offset(args[3], "cols_offset", &cols_off) < 0 ||
        parse_conv(args, shape, st, &rows, &cv) < 0)
        return NULL;
    const long long planes = shape[0] * shape[1], plane = shape[2] * shape[3];
    if (st[3] != 1 || st[2] != shape[3] || st[1] != plane || st[0] != shape[1] * plane ||
        rows != shape[1] * cv.kh * cv.kw) {
        PyErr_SetString(PyExc_ValueError, "col2im(): the image must be contiguous and rows "
                        "must be C * KH * KW");
        return NULL;
    }
    const int has_bias = args[6] != Py_None;
    if (has_bias && (parse_offset(args[7], "bias_offset", &bias_off) < 0 ||
                     parse_offset(args[8], "bias_stride", &bias_stride) < 0))
        return NULL;
    Py_buffer views[3];
    int type;
    PyObject *const bufs[3] = {args[0], args[2], args[6]};
    static const char *const names[3] = {"image", "cols", "bias"};
    const int nviews = conv_buffers(bufs, names, 2 + has_bias, views, &type);
    if (nviews < 0) return NULL;
    {
        const long long image_shape[1] = {planes * plane}, one[1] = {1};
        const long long cols_shape[1] = {shape[0] * rows * cv.oh * cv.ow};
        const long long bias_shape[1] = {shape[1]}, bias_st[1] = {bias_stride};
        Py_ssize_t len[3];
        for (int i = 0; i < nviews; i++) len[i] = views[i].len / views[i].itemsize;
        if ((image_shape[0] > 0 && check_bounds("image", len[0], out_off, 1, image_shape, one) < 0) ||
            (cols_shape[0] > 0 && check_bounds("cols", len[1], cols_off, 1, cols_shape, one) < 0) ||
            (has_bias && shape[1] > 0 && check_bounds("bias", len[2], bias_off, 1, bias_shape, bias_st) < 0)) {
            for (int i = 0; i < nviews; i++) PyBuffer_Release(&views[i]);
            return NULL;
        }
    }
    const size_t size = (size_t)views[0].itemsize;
    char *out = (char *)views[0].buf + (size_t)out_off * size;
    const char *cols = (const char *)views[1].buf + (size_t)cols_off * size;
    const char *bias = has_bias ? (const char *)views[2].buf + (size_t)bias_off * size : NULL;
    const ptrdiff_t n = shape[0], channels = shape[1];
    const ptrdiff_t per_image = rows * cv.oh * cv.ow + channels * plane;
    const ptrdiff_t group = group_for(per_image, COL2IM_GROUP_ELEMENTS);
    const int par = worth_parallel((double)n * per_image, 2.0 * COL2IM_GROUP_ELEMENTS);
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    if (type == T_F32)
        FOR_GROUPS(n, group, par, col2im_f32(&cv, channels, lo, hi, cols, out, bias, bias_stride));
    else
        FOR_GROUPS(n, group, par, col2im_f64(&cv, channels, lo, hi, cols, out, bias, bias_stride));
    Py_END_ALLOW_THREADS
    for (int i = 0; i < nviews; i++) PyBuffer_Release(&views[i]);
    Py_RETURN_NONE;
}

static PyObject *py_set_conv_shifted(PyObject *self, PyObject *flag)
{
    (void)self;
    const int on = PyObject_IsTrue(flag);
    if (on < 0) return NULL;
    const int previous = g_conv_shifted;
    g_conv_shifted = on;
    return PyBool_FromLong(previous);
}

static PyObject *py_conv_shifted_calls(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyLong_FromUnsignedLongLong(g_conv_shifted_calls);
}

/* set_blocking(isa, type, kc, mc, nc) -> the previous (kc, mc, nc): for tuning, and for
 * tests that cross block boundaries with small matrices. Sets products' and convolutions'
 * blocks alike (returns the products' old ones). mc is rounded up to a multiple of MR and
 * nc to one of NR by the driver. */
static PyObject *py_set_blocking(PyObject *self, PyObject *args)
{
    (void)self;
    const char *isa_name;
    int type, kc, mc, nc;
    if (!PyArg_ParseTuple(args, "siiii", &isa_name, &type, &kc, &mc, &nc)) return NULL;
    int isa = -1;
    for (int i = 0; i < N_ISAS; i++)
        if (strcmp(isa_name, ISA_NAMES[i]) == 0) isa = i;
    if (isa < 0 || isa > g_best_isa || type < 0 || type >= N_TYPES || kc < 1 || mc < 1 ||
        nc < 1 || kc > 4096 || mc > 4096 || nc > 16384) {
        PyErr_SetString(PyExc_ValueError, "set_blocking(): bad instruction set, type or size");
        return NULL;
    }
    blocking *bk = &BLOCKING[isa][type], *conv = &CONV_BLOCKING[isa][type];
    PyObject *previous = Py_BuildValue("(iii)", bk->kc, bk->mc, bk->nc);
    bk->kc = conv->kc = kc, bk->mc = conv->mc = mc, bk->nc = conv->nc = nc;
    return previous;
}

static PyMethodDef METHODS[] = {
    {"gemm", (PyCFunction)(void (*)(void))py_gemm, METH_FASTCALL,
     "gemm(sizes, out, out_offset, out_strides, a, a_offset, a_strides, b, b_offset, "
     "b_strides, alpha, beta, inp, inp_offset, inp_strides): out = alpha * a @ b + beta * inp "
     "for each of sizes[0] matrices; sizes = (batch, M, N, K); strides (batch, row, col) in "
     "elements; inp is not read when beta == 0."},
    {"conv2d", (PyCFunction)(void (*)(void))py_conv2d, METH_FASTCALL,
     "conv2d(out, out_offset, x, x_offset, x_shape, x_strides, w, w_offset, w_strides, "
     "out_channels, kernel, out_size, stride, padding, dilation, bias, bias_offset, "
     "bias_stride): 2-D convolution (groups 1) into a contiguous out; see src/gemm.c."},
    {"conv2d_weight_grad", (PyCFunction)(void (*)(void))py_conv2d_weight_grad, METH_FASTCALL,
     "conv2d_weight_grad(out, out_offset, x, x_offset, x_shape, x_strides, grad, grad_offset, "
     "grad_strides, out_channels, kernel, out_size, stride, padding, dilation): a 2-D "
     "convolution's weight gradient (groups 1) into a contiguous out; see src/gemm.c."},
    {"col2im", (PyCFunction)(void (*)(void))py_col2im, METH_FASTCALL,
     "col2im(image, image_offset, cols, cols_offset, image_shape, image_strides, bias, "
     "bias_offset, bias_stride, rows, kernel, cols_size, stride, padding, dilation): the "
     "adjoint of im2col into a contiguous image, bias added last; see src/gemm.c."},
    {"set_conv_shifted", py_set_conv_shifted, METH_O,
     "set_conv_shifted(flag): whether stride-1 convolutions may run over a zero-padded copy "
     "of the image (same bits either way; for tests); returns the previous flag."},
    {"conv_shifted_calls", py_conv_shifted_calls, METH_NOARGS,
     "conv_shifted_calls(): how many convolutions have run over a zero-padded copy."},
    {"set_blocking", py_set_blocking, METH_VARARGS,
     "set_blocking(isa, type, kc, mc, nc): change one block-size set (type 0 float32, 1 "
     "float64); returns the previous (kc, mc, nc)."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._gemm",
    .m_doc = "Packed, blocked, register-tiled matrix products for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__gemm(void)
{
    if (init_module_state() < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "PARALLEL_MIN_FLOPS", PARALLEL_MIN_FLOPS) < 0 ||
        PyModule_AddIntConstant(m, "DOT_MAX_M", DOT_MAX_M) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

#else /* GEMM_TEMPLATE: the code below is compiled once with T = float, once with double */

/* Pack rows [0, mc) x columns [0, kc) of A (element (i, p) at a[i * sm + p * sk]) into
 * MR-tall micro-panels: panel r holds a[r*MR + i][p] at dst[r*MR*kc + p*MR + i], rows past
 * mc are zero. */
static void NAME(pack_a)(ptrdiff_t mc, ptrdiff_t kc, int mr, const T *a, ptrdiff_t sm,
                         ptrdiff_t sk, T *restrict dst)
{
    for (ptrdiff_t i0 = 0; i0 < mc; i0 += mr, dst += (ptrdiff_t)mr * kc) {
        const int rows = mc - i0 < mr ? (int)(mc - i0) : mr;
        if (sm == 1 && rows == mr) {         /* columns of A contiguous (a transposed A) */
            for (ptrdiff_t p = 0; p < kc; p++) {
                const T *src = a + i0 + p * sk;
                for (int i = 0; i < mr; i++) dst[p * mr + i] = src[i];
            }
            continue;
        }
#if HAVE_X86_CLONES
        /* MR == 14 only in the AVX-512 blockings; the gather's indices are 32-bit */
        if (sk == 1 && mr == 14 && sm <= INT32_MAX / 16) {
            PACK14_ROWS(kc, rows, a + i0 * sm, sm, dst);
            continue;
        }
#endif
        /* Rows of A contiguous (sk == 1) or strided: walk the MR rows side by side, so the
         * writes are sequential (row by row, they would be MR apart: measured 3x slower). */
        const T *src[32];
        for (int i = 0; i < rows; i++) src[i] = a + (i0 + i) * sm;
        for (ptrdiff_t p = 0; p < kc; p++) {
            T *d = dst + p * mr;
            const ptrdiff_t off = p * sk;
            for (int i = 0; i < rows; i++) d[i] = src[i][off];
            for (int i = rows; i < mr; i++) d[i] = 0;
        }
    }
}

/* Pack rows [0, kc) x columns [0, nc) of B (element (p, j) at b[p * sk + j * sn]) into
 * NR-wide micro-panels: panel r holds b[p][r*NR + j] at dst[r*NR*kc + p*NR + j], columns
 * past nc are zero. */
static void NAME(pack_b)(ptrdiff_t kc, ptrdiff_t nc, int nr, const T *b, ptrdiff_t sk,
                         ptrdiff_t sn, T *restrict dst)
{
    ptrdiff_t j0 = 0;
#if HAVE_X86_CLONES
    /* NR == PACK_COLS_NR only in the AVX-512 blockings (NR * sizeof(T) == 128 bytes) */
    if (sn == 1 && nr == PACK_COLS_NR && nc >= nr) {
        j0 = nc / nr * nr;
        pack_rows_avx512(kc, nc / nr, nr * (ptrdiff_t)sizeof(T), (const char *)b,
                         sk * (ptrdiff_t)sizeof(T), (char *)dst);
        dst += j0 * kc;
    }
#endif
    for (; j0 < nc; j0 += nr, dst += (ptrdiff_t)nr * kc) {
        const int cols = nc - j0 < nr ? (int)(nc - j0) : nr;
        if (sn == 1 && cols == nr) {         /* rows of B contiguous */
            for (ptrdiff_t p = 0; p < kc; p++) {   /* (a loop: memcpy calls cost more here) */
                const T *src = b + p * sk + j0;
                for (int j = 0; j < nr; j++) dst[p * nr + j] = src[j];
            }
            continue;
        }
#if HAVE_X86_CLONES
        /* NR == PACK_COLS_NR only in the AVX-512 blockings */
        if (sk == 1 && cols == nr && nr == PACK_COLS_NR) {
            PACK_COLS(kc, b + j0 * sn, sn, dst);
            continue;
        }
#endif
        if (sk == 1) {                       /* columns of B contiguous (a transposed B) */
            for (int j = 0; j < cols; j++) {
                const T *src = b + (j0 + j) * sn;
                for (ptrdiff_t p = 0; p < kc; p++) dst[p * nr + j] = src[p];
            }
        } else {
            for (ptrdiff_t p = 0; p < kc; p++)
                for (int j = 0; j < cols; j++) dst[p * nr + j] = b[p * sk + (j0 + j) * sn];
        }
        for (ptrdiff_t p = 0; p < kc; p++)
            for (int j = cols; j < nr; j++) dst[p * nr + j] = 0;
    }
}

/* Elements [j, j + count) of row `row` of image x's im2col matrix (output positions
 * j = oh * OW + ow), into d[t * step]. Each run along ow reads one input row (a strided,
 * usually contiguous copy); the padding reads as zeros. */
static void NAME(im2col_span)(const conv_geometry *cv, const T *x, const im2col_row *row,
                              ptrdiff_t j, ptrdiff_t count, T *restrict d, ptrdiff_t step)
{
    const ptrdiff_t x_step = cv->sw * cv->xs_w;
    ptrdiff_t oh = j / cv->ow, ow = j % cv->ow, t = 0;
    while (t < count) {
        const ptrdiff_t run = cv->ow - ow < count - t ? cv->ow - ow : count - t;
        const ptrdiff_t ih = oh * cv->sh + row->row_off;
        ptrdiff_t lo = run, hi = run;      /* [lo, hi) of the run reads inside the image */
        const T *src = NULL;
        if (ih >= 0 && ih < cv->h) {
            lo = row->ow_lo - ow, hi = row->ow_hi - ow;
            lo = lo < 0 ? 0 : (lo > run ? run : lo);
            hi = hi < lo ? lo : (hi > run ? run : hi);
            src = x + row->c_off + ih * cv->xs_h + ((ow + lo) * cv->sw + row->col_off) * cv->xs_w;
        }
        T *dt = d + t * step;
        if (step == 1 && x_step == 1) {   /* short runs: an inline (vectorized) loop beats memcpy */
            for (ptrdiff_t u = 0; u < lo; u++) dt[u] = 0;
            for (ptrdiff_t u = lo; u < hi; u++) dt[u] = src[u - lo];
            for (ptrdiff_t u = hi; u < run; u++) dt[u] = 0;
        } else {
            for (ptrdiff_t u = 0; u < lo; u++) dt[u * step] = 0;
            for (ptrdiff_t u = lo; u < hi; u++) dt[u * step] = src[(u - lo) * x_step];
            for (ptrdiff_t u = hi; u < run; u++) dt[u * step] = 0;
        }
        t += run;
        ow = 0;
        oh++;
    }
}

/* pack_b for a convolution: rows [p0, p0 + kc) x columns [j0, j0 + nc) of the im2col
 * matrix of image x, into NR-wide micro-panels (the layout pack_b writes): each packed row of
 * a micro-panel is a span of one im2col row. */
static void NAME(pack_b_conv)(ptrdiff_t kc, ptrdiff_t nc, int nr, ptrdiff_t p0, ptrdiff_t j0,
                              const conv_geometry *cv, const T *x, T *restrict dst)
{
    for (ptrdiff_t p = 0; p < kc; p++) {
        const im2col_row row = im2col_row_at(cv, p0 + p);
        for (ptrdiff_t jp = 0; jp < nc; jp += nr) {
            T *d = dst + jp * kc + p * nr;
            const ptrdiff_t cols = nc - jp < nr ? nc - jp : nr;
            NAME(im2col_span)(cv, x, &row, j0 + jp, cols, d, 1);
            for (ptrdiff_t j = cols; j < nr; j++) d[j] = 0;
        }
    }
}

/* pack_b for a stride-1 convolution over a zero-padded image (B_SHIFTED; cv describes the
 * padded copy: xs_c = its plane, xs_h = its row length Wp, no padding): im2col row
 * p = (c, kh, kw) at output position j' = oh * Wp + ow is x[c][oh + kh*dh][ow + kw*dw], so
 * columns [j0, j0 + nc) of it are the contiguous run x[shift(p) + j0 ...]. Columns
 * ow >= OW read across into the next row: the product computes them and conv_shifted drops
 * them. No bounds logic, no zeros but past nc: the padding is in the copy. */
static void NAME(pack_b_shifted)(ptrdiff_t kc, ptrdiff_t nc, int nr, ptrdiff_t p0,
                                 ptrdiff_t j0, const conv_geometry *cv, const T *x,
                                 T *restrict dst)
{
    const ptrdiff_t full = nc / nr * nr;
    for (ptrdiff_t p = 0; p < kc; p++) {
        const T *src = x + shifted_row(cv, p0 + p) + j0;
        T *d = dst + p * nr;
#if HAVE_X86_CLONES
        if (g_isa == ISA_AVX512F && (nr * sizeof(T)) % 64 == 0)
            copy_panels_avx512(full / nr, nr * (ptrdiff_t)sizeof(T), (const char *)src,
                               (char *)d, nr * kc * (ptrdiff_t)sizeof(T));
        else
#endif
            for (ptrdiff_t jp = 0; jp < full; jp += nr)
                for (int j = 0; j < nr; j++) d[jp * kc + j] = src[jp + j];
        if (full < nc) {
            T *t = d + full * kc;
            for (ptrdiff_t j = 0; j < nr; j++) t[j] = full + j < nc ? src[full + j] : 0;
        }
    }
}

/* pack_b for a weight gradient: rows [p0, p0 + kc) x columns [j0, j0 + nc) of the
 * transposed im2col matrix (rows output positions, columns (c, kh, kw)). Per micro-panel,
 * its NR im2col rows are first copied as contiguous spans into `rows` (NR x kc), which is
 * then a transposed B for pack_b (written straight across the panel, the spans' stores were
 * NR apart: measured 2x slower). */
static void NAME(pack_b_im2col_t)(ptrdiff_t kc, ptrdiff_t nc, int nr, ptrdiff_t p0,
                                  ptrdiff_t j0, const conv_geometry *cv, const T *x,
                                  T *restrict rows, T *restrict dst)
{
    for (ptrdiff_t jp = 0; jp < nc; jp += nr, dst += (ptrdiff_t)nr * kc) {
        const ptrdiff_t cols = nc - jp < nr ? nc - jp : nr;
        for (ptrdiff_t j = 0; j < cols; j++) {
            const im2col_row row = im2col_row_at(cv, j0 + jp + j);
            NAME(im2col_span)(cv, x, &row, p0, kc, rows + j * kc, 1);
        }
        NAME(pack_b)(kc, cols, nr, rows, 1, kc, dst);
    }
}

/* The adjoint of im2col for one image: row q of `cols` (OH*OW values) is added at the
 * image positions im2col row q reads (padding positions dropped), rows in order, so every
 * element's sum has one order. x must not overlap cols. */
static void NAME(col2im_image)(const conv_geometry *cv, ptrdiff_t rows, const T *restrict cols,
                               T *restrict x)
{
    const ptrdiff_t step = cv->sw * cv->xs_w;
    ptrdiff_t c = 0, kh = 0, kw = 0;   /* row q's (c, kh, kw), counted up */
    for (ptrdiff_t q = 0; q < rows; q++, cols += cv->oh * cv->ow) {
        const im2col_row row = im2col_row_of(cv, c, kh, kw);
        if (++kw == cv->kw) {
            kw = 0;
            if (++kh == cv->kh) kh = 0, c++;
        }
        for (ptrdiff_t oh = 0; oh < cv->oh; oh++) {
            const ptrdiff_t ih = oh * cv->sh + row.row_off;
            if (ih < 0 || ih >= cv->h) continue;
            T *restrict dst = x + row.c_off + ih * cv->xs_h + row.col_off * cv->xs_w;
            const T *restrict src = cols + oh * cv->ow;
            if (step == 1) /* (the stride a constant: one loop of vector adds) */
                for (ptrdiff_t ow = row.ow_lo; ow < row.ow_hi; ow++) dst[ow] += src[ow];
            else
                for (ptrdiff_t ow = row.ow_lo; ow < row.ow_hi; ow++) dst[ow * step] += src[ow];
        }
    }
}

/* Images [lo, hi) of col2im: each zeroed, then its columns added, then bias[c] (if any) added
 * to every element of channel c, last (as the reference adds a bias). */
static void NAME(col2im)(const conv_geometry *cv, ptrdiff_t channels, ptrdiff_t lo,
                         ptrdiff_t hi, const char *cols, char *out, const char *bias,
                         ptrdiff_t bias_s)
{
    const ptrdiff_t plane = cv->h * cv->w, rows = channels * cv->kh * cv->kw;
    for (ptrdiff_t n = lo; n < hi; n++) {
        T *x = (T *)out + n * channels * plane;
        for (ptrdiff_t i = 0; i < channels * plane; i++) x[i] = 0;
        NAME(col2im_image)(cv, rows, (const T *)cols + n * rows * cv->oh * cv->ow, x);
        if (bias == NULL) continue;
        for (ptrdiff_t c = 0; c < channels; c++) {
            const T b = ((const T *)bias)[c * bias_s];
            for (ptrdiff_t i = 0; i < plane; i++) x[c * plane + i] += b;
        }
    }
}

/* c = alpha * c + beta * inp on a rows x cols tile, with the reference's roundings:
 * (c * alpha) then + (inp * beta), each step skipped when its scalar is 1 (or beta 0). */
static void NAME(epilogue)(T *c, ptrdiff_t ldc, ptrdiff_t rows, ptrdiff_t cols, const T *inp,
                           ptrdiff_t sim, ptrdiff_t sin, double alpha, double beta)
{
    const T al = (T)alpha, be = (T)beta;
    for (ptrdiff_t i = 0; i < rows; i++) {
        T *ci = c + i * ldc;
        if (alpha != 1.0)
            for (ptrdiff_t j = 0; j < cols; j++) ci[j] = ci[j] * al;
        if (beta == 0.0) continue;
        const T *x = inp + i * sim;
        if (beta == 1.0)
            for (ptrdiff_t j = 0; j < cols; j++) ci[j] = ci[j] + x[j * sin];
        else
            for (ptrdiff_t j = 0; j < cols; j++) ci[j] = ci[j] + x[j * sin] * be;
    }
}

/* Prefetch a rows x cols tile of C into L2 (each of its lines: every 64 bytes of a row and
 * its last element). The macro-kernel does this for the next tile while the micro-kernel
 * computes the current one, whose C loads and stores then find their lines in L2: measured
 * 1-1.5% on float32 1024^3 (C is read and written once per K slice). */
static void NAME(prefetch_tile)(const T *c, ptrdiff_t ldc, ptrdiff_t rows, ptrdiff_t cols)
{
    const ptrdiff_t step = 64 / (ptrdiff_t)sizeof(T);
    for (ptrdiff_t i = 0; i < rows; i++) {
        const T *row = c + i * ldc;
        for (ptrdiff_t j = 0; j < cols; j += step) __builtin_prefetch(row + j, 1, 2);
        __builtin_prefetch(row + cols - 1, 1, 2);
    }
}

/* The micro-kernel calls for one packed A block (mc rows) and B slice (nc columns) of one
 * K slice: c is the block's top-left element. With `off`, B is not packed: bbuf is its
 * column 0 in place, row p at off[p] from it (bk->direct reads it). */
static void NAME(macro)(const gemm_args *g, const blocking *bk, ptrdiff_t mc, ptrdiff_t nc,
                        ptrdiff_t kc, int accumulate, int last, const T *abuf, const T *bbuf,
                        const ptrdiff_t *off, T *c, const T *inp, T *tile)
{
    const int mr = bk->mr, nr = bk->nr;
    const ptrdiff_t ldc = g->out_s[1];
    const int scale = last && (g->alpha != 1.0 || g->beta != 0.0);
    for (ptrdiff_t ir = 0; ir < mc; ir += mr) {
        const ptrdiff_t rows = mc - ir < mr ? mc - ir : mr;
        const T *ap = abuf + ir * kc;
        for (ptrdiff_t jr = 0; jr < nc; jr += nr) {
            const ptrdiff_t cols = nc - jr < nr ? nc - jr : nr;
            const T *bp = off ? bbuf + jr : bbuf + jr * kc;
            T *ct = c + ir * ldc + jr;
            if (jr + nr < nc)    /* the next tile's C, into L2 while this one computes */
                NAME(prefetch_tile)(ct + nr, ldc, rows, nc - jr - nr < nr ? nc - jr - nr : nr);
            else if (ir + mr < mc)
                NAME(prefetch_tile)(c + (ir + mr) * ldc, ldc, mc - ir - mr < mr ? mc - ir - mr : mr,
                                    nc < nr ? nc : nr);
            if (cols == nr) {     /* the kernel stores `rows` rows itself */
                if (off)
                    bk->direct(kc, ap, bp, off, ct, ldc, accumulate, (int)rows);
                else
                    bk->ukr(kc, ap, bp, ct, ldc, accumulate, (int)rows);
            } else {     /* a right edge tile: compute it whole, then merge the valid part */
                if (off)
                    bk->direct(kc, ap, bp, off, tile, nr, 0, mr);
                else
                    bk->ukr(kc, ap, bp, tile, nr, 0, mr);
                for (ptrdiff_t i = 0; i < rows; i++)
                    for (ptrdiff_t j = 0; j < cols; j++)
                        ct[i * ldc + j] = accumulate ? ct[i * ldc + j] + tile[i * nr + j]
                                                     : tile[i * nr + j];
            }
            if (scale)   /* alpha, beta while the tile is in L1 */
                NAME(epilogue)(ct, ldc, rows, cols,
                               inp ? inp + ir * g->inp_s[1] + jr * g->inp_s[2] : NULL,
                               g->inp_s[1], g->inp_s[2], g->alpha, g->beta);
        }
    }
}

/* One work item: rows [i0, i0 + m) x columns [j0, j0 + nc) of batch matrix bi. For each K
 * slice the B slice is packed once, then the rows are taken MC at a time. */
static void NAME(item)(const gemm_args *g, const blocking *bk, ptrdiff_t kc_step,
                       ptrdiff_t mc_step, ptrdiff_t bi, ptrdiff_t i0, ptrdiff_t m, ptrdiff_t j0,
                       ptrdiff_t nc, ptrdiff_t seg_lo, ptrdiff_t seg_hi, T *out, T *abuf,
                       T *bbuf, T *tile, T *scratch, packed_block *packed_a)
{
    const ptrdiff_t ldc = g->out_s[1];
    T *c = out + i0 * ldc + j0;
    const T *inp = g->beta != 0.0 ? (const T *)g->inp + bi * g->inp_s[0] + i0 * g->inp_s[1] +
                                        j0 * g->inp_s[2] : NULL;
    if (g->k == 0) {     /* an empty sum: zeros, then alpha and beta */
        for (ptrdiff_t i = 0; i < m; i++)
            for (ptrdiff_t j = 0; j < nc; j++) c[i * ldc + j] = 0;
        if (g->alpha != 1.0 || g->beta != 0.0)
            NAME(epilogue)(c, ldc, m, nc, inp, g->inp_s[1], g->inp_s[2], g->alpha, g->beta);
        return;
    }
    const T *a = (const T *)g->a + bi * g->a_s[0] + i0 * g->a_s[1];
    const T *b = (const T *)g->b + bi * g->b_s[0];   /* the matrix, or the image */
    const int direct = g->b_kind == B_SHIFTED && bk->direct != NULL;
    ptrdiff_t done = 0;                                   /* K elements summed so far */
    for (ptrdiff_t seg = seg_lo; seg < seg_hi; seg++) {
        const T *a_seg = a + seg * g->a_seg_s, *b_seg = b + seg * g->b_seg_s;
        for (ptrdiff_t r0 = 0; r0 < g->seg_len; r0 += kc_step) {
            const ptrdiff_t kc = g->seg_len - r0 < kc_step ? g->seg_len - r0 : kc_step;
            const ptrdiff_t *off = NULL;   /* B in place (direct) rather than packed */
            if (direct) {
                shifted_rows(g->conv, r0, kc, (ptrdiff_t *)(void *)scratch);
                off = (ptrdiff_t *)(void *)scratch;
            } else if (g->b_kind == B_IM2COL)
                NAME(pack_b_conv)(kc, nc, bk->nr, r0, j0, g->conv, b_seg, bbuf);
            else if (g->b_kind == B_SHIFTED)
                NAME(pack_b_shifted)(kc, nc, bk->nr, r0, j0, g->conv, b_seg, bbuf);
            else if (g->b_kind == B_IM2COL_T)
                NAME(pack_b_im2col_t)(kc, nc, bk->nr, r0, j0, g->conv, b_seg, scratch, bbuf);
            else
                NAME(pack_b)(kc, nc, bk->nr, b_seg + r0 * g->b_s[1] + j0 * g->b_s[2],
                             g->b_s[1], g->b_s[2], bbuf);
            for (ptrdiff_t ic = 0; ic < m; ic += mc_step) {
                const ptrdiff_t mc = m - ic < mc_step ? m - ic : mc_step;
                const T *a_block = a_seg + ic * g->a_s[1] + r0 * g->a_s[2];
                /* (the block this thread packed last, again: a convolution's weight is every
                 * image's A, and a small layer's item is one image) */
                if (a_block != packed_a->from || mc != packed_a->rows || kc != packed_a->cols) {
                    NAME(pack_a)(mc, kc, bk->mr, a_block, g->a_s[1], g->a_s[2], abuf);
                    packed_a->from = a_block, packed_a->rows = mc, packed_a->cols = kc;
                }
                const int last = seg == g->segments - 1 && r0 + kc >= g->seg_len;
                NAME(macro)(g, bk, mc, nc, kc, done > 0, last, abuf, off ? b_seg + j0 : bbuf,
                            off, c + ic * ldc,
                            inp ? inp + ic * g->inp_s[1] : NULL, tile);
            }
            done += kc;
        }
    }
}

/* A product whose K sums over segments (a weight gradient: over the images) and whose output
 * has at most K_GROUP_MAX_OUTPUT elements (too few items to share among threads: LeNet's
 * first layer has 6 x 25) sums its segments in K_GROUPS fixed groups, each into its own
 * matrix, and adds those in group order at the end. The groups depend on the sizes only, so
 * the results still do not depend on the thread count. */
#define K_GROUP_MAX_OUTPUT (16 * 1024)
#define K_GROUPS 4

static int NAME(conv_shifted)(const gemm_args *g, int isa);

/* A product of few rows as dot products (see DEFINE_DOT): items of DOT_COLUMNS columns per
 * batch matrix on the threads, each followed by the epilogue on its columns. */
static void NAME(dot_product)(const gemm_args *g, int isa)
{
    const dot_fn fn = DOT[isa][sizeof(T) == 4 ? T_F32 : T_F64];
    const ptrdiff_t per_batch = ceil_div(g->n, DOT_COLUMNS), items = g->batch * per_batch;
    const int par = worth_parallel((double)g->batch * g->m * g->n * g->k, PARALLEL_MIN_FLOPS);
#pragma omp parallel for schedule(static) if (par)
    for (ptrdiff_t it = 0; it < items; it++) {
        const ptrdiff_t bi = it / per_batch, j_lo = (it % per_batch) * DOT_COLUMNS;
        const ptrdiff_t j_hi = j_lo + DOT_COLUMNS < g->n ? j_lo + DOT_COLUMNS : g->n;
        T *c = (T *)g->out + bi * g->out_s[0];
        fn((const T *)g->a + bi * g->a_s[0], g->a_s[1], g->m, (const T *)g->b + bi * g->b_s[0],
           g->b_s[2], j_lo, j_hi, g->k, c, g->out_s[1]);
        if (g->alpha != 1.0 || g->beta != 0.0)
            NAME(epilogue)(c + j_lo, g->out_s[1], g->m, j_hi - j_lo,
                           g->beta != 0.0 ? (const T *)g->inp + bi * g->inp_s[0] +
                                                j_lo * g->inp_s[2]
                                          : NULL,
                           g->inp_s[1], g->inp_s[2], g->alpha, g->beta);
    }
}

/* The whole product: choose block sizes, cut C into items, run them on the threads.
 * Returns -1 when the packing buffers cannot be allocated. */
static int NAME(gemm)(const gemm_args *g, int isa)
{
    if (g->b_kind == B_MATRIX && g->segments == 1 && g->m <= DOT_MAX_M && g->k > 0 &&
        g->a_s[2] == 1 && g->b_s[1] == 1 && g->batch > 0 && g->m > 0 && g->n > 0) {
        NAME(dot_product)(g, isa);     /* few rows, both operands along K: dot products */
        return 0;
    }
    if (g->b_kind == B_IM2COL) {
        const int shifted = NAME(conv_shifted)(g, isa);
        if (shifted <= 0) return shifted;     /* done (0) or out of memory (-1) */
    }
    const int type = sizeof(T) == 4 ? T_F32 : T_F64;
    const blocking bk_copy = g->b_kind == B_IM2COL || g->b_kind == B_SHIFTED
                                 ? CONV_BLOCKING[isa][type] : BLOCKING[isa][type];
    const blocking *bk = &bk_copy;   /* set_blocking may change the table meanwhile */
    const ptrdiff_t M = g->m, N = g->n, K = g->k;
    if (g->batch == 0 || M == 0 || N == 0) return 0;
    /* K slices of (nearly) equal length, at most KC, within each segment: they depend on the
     * segment length only, which is what makes the results independent of how C is cut. */
    const ptrdiff_t S = g->seg_len;
    const ptrdiff_t kc_step = S > 0 ? ceil_div(S, ceil_div(S, bk->kc)) : 1;
    const ptrdiff_t mc_step = round_up(ceil_div(M, ceil_div(M, bk->mc)), bk->mr);
    int threads = 1;
#ifdef _OPENMP
    if (!g_forked && (double)g->batch * M * N * (K > 0 ? K : 1) >= PARALLEL_MIN_FLOPS)
        threads = max_threads();
#endif
    /* Items: (batch matrix, rows part, columns block). Columns blocks of at most NC; when
     * that gives fewer items than threads, cut the columns finer while blocks stay at least
     * 8 micro-panels wide, then the rows while parts stay 4 micro-tiles tall. Each item packs
     * its own slices of A and B, so every extra cut packs one operand again: one item per
     * thread measured 7-9% faster than four (MLP-sized float32 products, 2 threads, the two
     * builds interleaved in one process). Any cut gives the same results. */
    ptrdiff_t n_cuts = ceil_div(N, bk->nc), m_cuts = 1;
    const ptrdiff_t target = threads;
    /* each rows part packs all of B again: keep parts at least 4 micro-tiles tall */
    const ptrdiff_t tallest = M / (4 * bk->mr) > 1 ? M / (4 * bk->mr) : 1;
    if (g->batch * n_cuts < target && M >= N && g->b_kind == B_MATRIX) {
        /* A product at least as tall as wide is cut into rows parts first: each then packs
         * all of B again instead of all of A, and a row-major B packs faster than A (a
         * 1024^3 float32 product's halves, one thread each: 512 x 1024 took 5% less time
         * than 1024 x 512) */
        m_cuts = ceil_div(target, g->batch * n_cuts);
        if (m_cuts > tallest) m_cuts = tallest;
    }
    if (g->batch * n_cuts * m_cuts < target) {
        const ptrdiff_t want = ceil_div(target, g->batch * m_cuts), widest = N / (8 * bk->nr);
        if (n_cuts < want) n_cuts = want < widest ? want : (widest > n_cuts ? widest : n_cuts);
        if (g->batch * n_cuts * m_cuts < target) {
            m_cuts = ceil_div(target, g->batch * n_cuts);
            if (m_cuts > tallest) m_cuts = tallest;
        }
    }
    const ptrdiff_t nc = round_up(ceil_div(N, n_cuts), bk->nr);
    const ptrdiff_t m_part = round_up(ceil_div(M, m_cuts), bk->mr);
    const ptrdiff_t n_blocks = ceil_div(N, nc), m_parts = ceil_div(M, m_part);
    const ptrdiff_t k_groups = g->segments > 1 && g->batch == 1 && g->seg_len > 0 &&
                                       g->alpha == 1.0 && g->beta == 0.0 &&
                                       M * N <= K_GROUP_MAX_OUTPUT
                                   ? (g->segments < K_GROUPS ? g->segments : K_GROUPS) : 1;
    const ptrdiff_t per_group = g->batch * m_parts * n_blocks;
    const ptrdiff_t items = k_groups * per_group;
    if (items < threads) threads = (int)items;

    /* Per thread: A block, B slice, one edge tile, the weight gradient's scratch rows; each
     * 64-byte aligned. */
    const ptrdiff_t mc_alloc = mc_step < m_part ? mc_step : round_up(m_part, bk->mr);
    const size_t a_len = (size_t)round_up(mc_alloc * kc_step, 16);
    const size_t b_len = (size_t)round_up(kc_step * nc, 16);
    const size_t t_len = (size_t)round_up((ptrdiff_t)bk->mr * bk->nr, 16);
    /* scratch: the weight gradient's rows, or a direct product's row offsets */
    const size_t s_len = g->b_kind == B_IM2COL_T ? (size_t)round_up(kc_step * bk->nr, 16)
                         : g->b_kind == B_SHIFTED && bk->direct
                             ? (size_t)round_up(kc_step * (ptrdiff_t)(sizeof(ptrdiff_t) / sizeof(T)) + 1, 16)
                             : 0;
    const size_t per_thread = a_len + b_len + t_len + s_len;
    /* UKR_PREFETCH bytes of slack: the micro-kernel prefetches that far past the B panel it
     * reads, and the last panel's prefetch should stay inside memory we own. */
    const size_t buffer_bytes = per_thread * threads * sizeof(T) + UKR_PREFETCH;
    T *buffers = aligned_alloc(64, (size_t)round_up((ptrdiff_t)buffer_bytes, 64));
    packed_block *packed = calloc((size_t)threads, sizeof *packed);
    if (buffers == NULL || packed == NULL) {
        free(buffers);
        free(packed);
        return -1;
    }
    /* K groups after the first sum into partial matrices laid out as out is (row stride ldc) */
    const ptrdiff_t ldc = g->out_s[1], partial_len = M * ldc;
    T *partials = NULL;
    if (k_groups > 1) {
        partials = aligned_alloc(64, (size_t)round_up((k_groups - 1) * partial_len * (ptrdiff_t)sizeof(T), 64));
        if (partials == NULL) {
            free(buffers);
            free(packed);
            return -1;
        }
    }

#define RUN_ITEM(item, t)                                                                    \
    do {                                                                                     \
        T *abuf = buffers + per_thread * (t), *bbuf = abuf + a_len, *tile = bbuf + b_len;    \
        T *scratch = tile + t_len;                                                           \
        const ptrdiff_t kg = (item) / per_group, in_group = (item) % per_group;              \
        const ptrdiff_t bi = in_group / (m_parts * n_blocks);                                \
        const ptrdiff_t rest = in_group % (m_parts * n_blocks);                              \
        const ptrdiff_t i0 = (rest / n_blocks) * m_part, j0 = (rest % n_blocks) * nc;         \
        T *out = kg == 0 ? (T *)g->out + bi * g->out_s[0] : partials + (kg - 1) * partial_len; \
        NAME(item)(g, bk, kc_step, mc_step, bi, i0, M - i0 < m_part ? M - i0 : m_part, j0,   \
                   N - j0 < nc ? N - j0 : nc, kg * g->segments / k_groups,                   \
                   (kg + 1) * g->segments / k_groups, out, abuf, bbuf, tile, scratch,        \
                   &packed[t]);                                                              \
    } while (0)
    if (threads == 1) {      /* no parallel region at all: it costs microseconds */
        for (ptrdiff_t item = 0; item < items; item++) RUN_ITEM(item, 0);
    } else {
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (ptrdiff_t item = 0; item < items; item++) RUN_ITEM(item, omp_get_thread_num());
#endif
    }
#undef RUN_ITEM
    for (ptrdiff_t kg = 1; kg < k_groups; kg++) {     /* the groups' sums, in group order */
        T *c = (T *)g->out;
        const T *p = partials + (kg - 1) * partial_len;
        for (ptrdiff_t i = 0; i < M; i++)
            for (ptrdiff_t j = 0; j < N; j++) c[i * ldc + j] += p[i * ldc + j];
    }
    free(partials);
    free(packed);
    free(buffers);
    return 0;
}

/* A stride-1 convolution (g: B_IM2COL) the cheaper way, when that pays (below):
 * each image is copied once with its zero padding (H + 2ph rows of Wp = W + 2pw), which
 * makes every im2col row a contiguous run of the copy (pack_b_shifted: whole-vector copies
 * where pack_b_conv copied short runs between zeros, 20-25% of a 64-channel 3x3 layer's
 * time); the product then covers OH x Wp output positions, of which the OW x OH real ones
 * are copied out (with the bias the epilogue added). Every real output element sums the
 * same products, zeros of the padding included, in the same order: same bits.
 * Returns 1 (not taken: the caller runs the im2col product), 0 (done) or -1 (no memory). */
static int NAME(conv_shifted)(const gemm_args *g, int isa)
{
    const conv_geometry *cv = g->conv;
    const ptrdiff_t C = g->k / (cv->kh * cv->kw);   /* (parse_conv: kernel sizes >= 1) */
    const ptrdiff_t hp = cv->h + 2 * cv->ph, wp = cv->w + 2 * cv->pw;
    /* Taken when it pays (measured on 2 cores, float32, both ways interleaved):
     *  - at least 4 taps: a K slice then spans at most KC / 4 channel planes. With 1-3 the
     *    in-place reads of its 256 rows touched up to 256 pages and missed the TLB
     *    (a 256-to-64-channel 1x1 layer: 8.7 ms this way, 4.1 ms packed);
     *  - K >= 4 M: the copy out costs about M per output position, the packing it saves
     *    about K (a 3-to-64-channel 7x7 stem: 36 ms this way, 22 ms packed; 6 to 1 channel,
     *    5x5, LeNet's input gradient: 0.59 ms this way, 2.2 ms packed);
     *  - at most 1/2 more columns than output positions (wp exceeds ow by the (KW - 1) * dw
     *    columns a row's last taps reach): LeNet's 12x12 5x5 layer, 1/2 more, 0.27 ms this
     *    way, 0.44 packed. */
    if (!g_conv_shifted || cv->sh != 1 || cv->sw != 1 || C == 0 || g->m == 0 ||
        cv->oh == 0 || cv->ow == 0 || cv->kh * cv->kw < 4 || g->k < 4 * g->m ||
        wp * 2 > cv->ow * 3)
        return 1;
    /* past the last image: its last taps' reach, and a direct kernel's whole right edge tile */
    const ptrdiff_t N = g->batch, plane = hp * wp, slack = (cv->kw - 1) * cv->dw + 128;
    const ptrdiff_t wide = cv->oh * wp;          /* output positions of the product */
    T *padded = malloc((size_t)(N * C * plane + slack) * sizeof(T));
    T *wide_out = aligned_alloc(64, (size_t)round_up(N * g->m * wide * (ptrdiff_t)sizeof(T), 64));
    if (padded == NULL || wide_out == NULL) {
        free(padded);
        free(wide_out);
        return 1;
    }
    const T *x = (const T *)g->b;
    const int par = worth_parallel((double)N * C * plane, 64 * 1024);
#pragma omp parallel for if (par) schedule(static)
    for (ptrdiff_t pc = 0; pc < N * C; pc++) {   /* the padded copy, plane by plane */
        const T *src = x + (pc / C) * g->b_s[0] + (pc % C) * cv->xs_c;
        T *d = padded + pc * plane;
        for (ptrdiff_t i = 0; i < hp; i++, d += wp) {
            const ptrdiff_t ih = i - cv->ph;
            if (ih < 0 || ih >= cv->h) {
                for (ptrdiff_t j = 0; j < wp; j++) d[j] = 0;
                continue;
            }
            const T *row = src + ih * cv->xs_h;
            for (ptrdiff_t j = 0; j < cv->pw; j++) d[j] = 0;
            for (ptrdiff_t j = 0; j < cv->w; j++) d[cv->pw + j] = row[j * cv->xs_w];
            for (ptrdiff_t j = cv->pw + cv->w; j < wp; j++) d[j] = 0;
        }
    }
    for (ptrdiff_t j = 0; j < slack; j++) padded[N * C * plane + j] = 0;  /* read, unused */

    g_conv_shifted_calls++;
    conv_geometry shifted = *cv;
    shifted.h = hp, shifted.w = wp, shifted.ph = shifted.pw = 0, shifted.ow = wp;
    shifted.xs_c = plane, shifted.xs_h = wp, shifted.xs_w = 1;
    gemm_args wg = *g;
    wg.b_kind = B_SHIFTED, wg.conv = &shifted;
    wg.n = wide, wg.b = (const char *)padded, wg.b_s[0] = C * plane;
    wg.out = (char *)wide_out, wg.out_s[0] = g->m * wide, wg.out_s[1] = wide, wg.out_s[2] = 1;
    const int status = NAME(gemm)(&wg, isa);
    free(padded);
    if (status == 0) {
        const ptrdiff_t planes = N * g->m;
#pragma omp parallel for if (par) schedule(static)
        for (ptrdiff_t po = 0; po < planes; po++) {  /* the real columns, into out */
            T *d = (T *)g->out + (po / g->m) * g->out_s[0] + (po % g->m) * g->out_s[1];
            const T *src = wide_out + po * wide;
            for (ptrdiff_t i = 0; i < cv->oh; i++)
                for (ptrdiff_t j = 0; j < cv->ow; j++) d[i * cv->ow + j] = src[i * wp + j];
        }
    }
    free(wide_out);
    return status;
}

#endif /* GEMM_TEMPLATE */
