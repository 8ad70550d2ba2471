/* reftorch_cpu._index: gather- and scatter-shaped indexing kernels, every index checked.
 *
 * Entry points (called from reftorch_cpu/indexing.py, which builds the geometry):
 *
 *   gather(shape, out, out_offset, out_strides, src, src_offset, src_strides,
 *          index_stride, index_size, index, index_offset, index_strides, wrap)
 *       for every position p of `shape` (row-major):
 *           v = index[p]  (v + index_size when v < 0 and wrap)
 *           out[p] = src[p + v * index_stride]
 *       index_select, embedding, gather and take are all this loop: the Python side picks the
 *       strides (0 where an operand does not vary along a dim of the walk).
 *
 *   scatter(shape, out, out_offset, out_strides, index_stride, index_size, src, src_offset,
 *           src_strides, index, index_offset, index_strides, mode, alpha[, wrap])
 *       for every position p of `shape` (row-major), v = index[p] (+ index_size when v < 0
 *       and wrap):
 *           out[p + v * index_stride]  =  src[p]            (mode ASSIGN)
 *                                     +=  src[p] * alpha    (mode ADD)
 *                                     *=  src[p]            (mode MULTIPLY)
 *       scatter (src and value forms), scatter_add, index_add and put (wrap). `out` must be a fresh
 *       buffer whose elements are distinct (the Python side writes into a new copy of self).
 *
 * Operands are contiguous buffers (a cpu storage's 1-D NumPy array) with an element offset
 * and one stride per dim of `shape`, in elements. Values are float32, float64, int64 or int32
 * (out and src of one type); indices int64 or int32.
 *
 * Safety: every argument is parsed and checked before memory is touched, and every operand
 * must stay inside its buffer for every position of the walk and every index in
 * [0, index_size) (check_bounds). Each index element is then checked in the copy loop itself,
 * before it is used: an index outside [0, index_size) ([-index_size, index_size) with wrap)
 * raises IndexOutOfBounds (an IndexError) naming the first bad index in row-major order of
 * `shape`; no element is read or written through it. Both loops check as they go (a separate
 * checking pass over all indices first cost a second read of them: gather 1M float32 0.61x
 * PyTorch's speed that way, index_add of 1M scalars 2.0 + 3.2 ms instead of 3.2), so on error
 * `out` may already hold some of the results or updates: callers pass a fresh buffer (a new
 * tensor, or for scatter a new copy of self) that they drop on error. After a scatter loop
 * meets a bad index, one pass over the indices finds the first in row-major order to report
 * (whichever thread met which).
 *
 * Speed (chosen at run time; set_isa("baseline") selects the scalar loops, which give the
 * same results and errors): with AVX-512F, a gather run whose out and index are contiguous
 * takes 8 indices per step, checks them with one unsigned compare against index_size (a
 * negative index is a huge unsigned one) and loads the 8 values with one gather
 * instruction; rows of a 2-D walk with one index per row (embedding, index_select) are
 * copied 64 bytes per load/store. With AVX2 the same run checks 8 indices with two signed
 * vector compares and copies the 8 values by scalar loads with no branch (gather dim 1 of
 * 1M float32, AMD EPYC Zen 3: 1.3-1.5x the scalar loop; AVX2's gather instruction was
 * slower there). Each stops at a group or row holding a bad index and leaves it to the
 * scalar loop, which finds the bad index itself.
 *
 * Threads: the result never depends on the thread count.
 *   gather: every position writes its own out element; the walk is split into contiguous
 *     ranges of whole rows of its last dim (of positions when there are few rows), one per
 *     thread.
 *   scatter: positions whose indices repeat write one out element, so writes must stay in
 *     the walk's order (the reference's np.add.at / fancy assignment order: the last write
 *     wins, sums and products accumulate in row-major order of `shape`). Two collision-free
 *     splits keep that order: along a walk dim other than the indexed one whose out stride
 *     is nonzero (different coordinates there never reach one out element), each thread
 *     walking its slab in row-major order; or, when no such dim is large enough, by index
 *     value: every thread walks all positions and applies only those whose index lies in its
 *     own range of [0, index_size). Either way each out element receives its contributions in
 *     walk order, one thread doing all of them, so float sums are the reference's bit for
 *     bit.
 *
 * Compiled with -ffp-contract=off: `out + src * alpha` rounds twice, as NumPy's
 * `np.add.at(out, where, src * alpha)` does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define COMMON_STRIDED_WALK /* walk_t and parse_operand from common.h */
#include "common.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Walks with fewer positions than this run on one thread (a parallel region costs a few
 * microseconds). Measured on a 2-core x86-64: float32 gather of 16 Ki elements 1 vs 2
 * threads about even, 64 Ki clearly faster on 2. */
#ifndef PARALLEL_MIN_POSITIONS
#define PARALLEL_MIN_POSITIONS 32768
#endif

enum { V_F32, V_F64, V_I64, V_I32, N_VTYPES };
enum { I_I64, I_I32, N_ITYPES };
enum { MODE_ASSIGN, MODE_ADD, MODE_MULTIPLY, N_MODES };

static PyObject *IndexOutOfBounds = NULL;


static int n_threads(ptrdiff_t positions)
{
#ifdef _OPENMP
    if (positions >= PARALLEL_MIN_POSITIONS && !g_forked) return max_threads();
#endif
    (void)positions;
    return 1;
}

/* ---- the walk (walk_t, walk_seek, walk_next_row: common.h) and its operand slots ------- */

enum { OP_OUT, OP_SRC, OP_IDX };

/* A thread's first bad index: its linear position (-1: none) and value. */
typedef struct {
    ptrdiff_t position;
    long long value;
} bad_t;

/* ---- gather ---------------------------------------------------------------------------- */

/* The AVX-512 inner loops (used while the module's isa is avx512f, see set_isa):
 *   run:  out[i] = src[i * ss + v_i * ks] along a run whose out and index are contiguous: 8
 *         indices at a time, one unsigned compare of the 8 (wrapped) indices against the size
 *         checks both bounds, then one gather instruction loads the 8 values;
 *   rows: whole rows of a 2-D walk whose index is fixed along the row (embedding,
 *         index_select): one check per row, then 64-byte loads and stores (a masked pair
 *         for the row's tail).
 * Both stop at the first group (run) or row holding a bad index and return how far they
 * got; the scalar loop then goes on from there and finds the bad index itself, so the error
 * is the same on every path and nothing is read through a bad index. */
typedef ptrdiff_t (*vector_run_fn)(void *o, const void *s, const void *ix, ptrdiff_t count,
                                   ptrdiff_t ss, ptrdiff_t ks, ptrdiff_t K, int wrap);
typedef ptrdiff_t (*vector_rows_fn)(char *out, ptrdiff_t out_row, const char *src,
                                    ptrdiff_t src_row, const char *index, ptrdiff_t index_row,
                                    ptrdiff_t rows, ptrdiff_t count, ptrdiff_t ks, ptrdiff_t K,
                                    int wrap);

typedef struct {
    walk_t W;
    char *buf[3];
    ptrdiff_t index_stride, index_size;
    int wrap;
    vector_run_fn vector_run;   /* NULL: scalar only */
    vector_rows_fn vector_rows; /* NULL: scalar only */
} gather_t;

/* v (wrapped when asked) inside [0, K)? One unsigned compare gives both bounds. */
#define INDEX_OK(v, K) ((unsigned long long)(v) < (unsigned long long)(K))
/* v, counted from K when it is negative and wrap is set (take, put). */
#define WRAPPED(v, K, wrap) ((v) < 0 && (wrap) ? (v) + (K) : (v))

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define HAVE_AVX512_PATHS 1
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))

#define LOAD8_I64(p) _mm512_loadu_si512((const void *)(p))
#define LOAD8_I32(p) _mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(p)))
#define GATHER8_U32(o, off, s) \
    _mm256_storeu_si256((__m256i *)(o), _mm512_i64gather_epi32(off, (const void *)(s), 4))
#define GATHER8_U64(o, off, s) \
    _mm512_storeu_si512((void *)(o), _mm512_i64gather_epi64(off, (const void *)(s), 8))

/* 8 indices, negative ones wrapped when asked (take), as unsigned 64-bit lanes. */
AVX512 static inline __m512i wrapped(__m512i v, __m512i size, int wrap)
{
    if (wrap) v = _mm512_mask_add_epi64(v, _mm512_cmplt_epi64_mask(v, _mm512_setzero_si512()),
                                        v, size);
    return v;
}

/* The source offsets of 8 (checked) indices v: v * ks (the index's stride) plus each lane's
 * own offset along the run. */
AVX512 static inline __m512i gather_offsets(__m512i v, ptrdiff_t ks, __m512i step, __m512i lanes)
{
    return _mm512_add_epi64(ks == 1 ? v : _mm512_mullox_epi64(v, step), lanes);
}

#define DEFINE_VECTOR_RUN(NAME, U, I, LOAD8, GATHER8)                                        \
    AVX512 static ptrdiff_t NAME(void *o_, const void *s_, const void *ix_, ptrdiff_t count, \
                                 ptrdiff_t ss, ptrdiff_t ks, ptrdiff_t K, int wrap)          \
    {                                                                                        \
        U *o = (U *)o_;                                                                      \
        const U *s = (const U *)s_;                                                          \
        const I *ix = (const I *)ix_;                                                        \
        const __m512i size = _mm512_set1_epi64(K), step = _mm512_set1_epi64(ks);             \
        const __m512i lane_step = _mm512_set1_epi64(8 * ss);                                 \
        __m512i lanes = _mm512_mullox_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0),        \
                                            _mm512_set1_epi64(ss));                          \
        ptrdiff_t i = 0;                                                                     \
        /* two gathers an iteration: their latencies overlap (one at a time ran at 0.75 of    \
         * torch's scalar loop on an AMD EPYC); a bad index stops both, and the loop below   \
         * then runs up to its block of 8 */                                                 \
        for (; i + 16 <= count; i += 16) {                                                   \
            const __m512i v0 = wrapped(LOAD8(ix + i), size, wrap);                           \
            const __m512i v1 = wrapped(LOAD8(ix + i + 8), size, wrap);                       \
            if (_mm512_cmpge_epu64_mask(v0, size) | _mm512_cmpge_epu64_mask(v1, size))       \
                break;                                                                       \
            const __m512i lanes1 = _mm512_add_epi64(lanes, lane_step);                       \
            GATHER8(o + i, gather_offsets(v0, ks, step, lanes), s);                          \
            GATHER8(o + i + 8, gather_offsets(v1, ks, step, lanes1), s);                     \
            lanes = _mm512_add_epi64(lanes1, lane_step);                                     \
        }                                                                                    \
        for (; i + 8 <= count; i += 8) {                                                     \
            const __m512i v = wrapped(LOAD8(ix + i), size, wrap);                            \
            if (_mm512_cmpge_epu64_mask(v, size)) break; /* v < 0 is a huge unsigned */      \
            GATHER8(o + i, gather_offsets(v, ks, step, lanes), s);                           \
            lanes = _mm512_add_epi64(lanes, lane_step);                                      \
        }                                                                                    \
        return i;                                                                            \
    }

DEFINE_VECTOR_RUN(vector_run_u32_i64, uint32_t, int64_t, LOAD8_I64, GATHER8_U32)
DEFINE_VECTOR_RUN(vector_run_u32_i32, uint32_t, int32_t, LOAD8_I32, GATHER8_U32)
DEFINE_VECTOR_RUN(vector_run_u64_i64, uint64_t, int64_t, LOAD8_I64, GATHER8_U64)
DEFINE_VECTOR_RUN(vector_run_u64_i32, uint64_t, int32_t, LOAD8_I32, GATHER8_U64)

/* Copy `bytes` (a row) from src to out: 64 bytes at a time, the tail as one masked pair. */
AVX512 static inline void copy_row(char *out, const char *src, ptrdiff_t bytes)
{
    ptrdiff_t b = 0;
    for (; b + 64 <= bytes; b += 64)
        _mm512_storeu_si512((void *)(out + b), _mm512_loadu_si512((const void *)(src + b)));
    if (b < bytes) { /* rows are whole elements of 4 or 8 bytes: 4-byte lanes cover them */
        const __mmask16 m = (__mmask16)((1u << ((bytes - b) / 4)) - 1);
        _mm512_mask_storeu_epi32(out + b, m, _mm512_maskz_loadu_epi32(m, src + b));
    }
}

#define DEFINE_VECTOR_ROWS(NAME, U, I)                                                       \
    AVX512 static ptrdiff_t NAME(char *out, ptrdiff_t out_row, const char *src,              \
                                 ptrdiff_t src_row, const char *index, ptrdiff_t index_row,  \
                                 ptrdiff_t rows, ptrdiff_t count, ptrdiff_t ks, ptrdiff_t K, \
                                 int wrap)                                                   \
    {                                                                                        \
        const ptrdiff_t bytes = count * (ptrdiff_t)sizeof(U);                                \
        for (ptrdiff_t r = 0; r < rows; r++) {                                               \
            const long long v = WRAPPED(                                                     \
                (long long)*(const I *)(index + r * index_row * (ptrdiff_t)sizeof(I)), K, wrap); \
            if (!INDEX_OK(v, K)) return r;                                                   \
            copy_row(out + r * out_row * (ptrdiff_t)sizeof(U),                               \
                     src + (r * src_row + (ptrdiff_t)v * ks) * (ptrdiff_t)sizeof(U), bytes); \
        }                                                                                    \
        return rows;                                                                         \
    }

DEFINE_VECTOR_ROWS(vector_rows_u32_i64, uint32_t, int64_t)
DEFINE_VECTOR_ROWS(vector_rows_u32_i32, uint32_t, int32_t)
DEFINE_VECTOR_ROWS(vector_rows_u64_i64, uint64_t, int64_t)
DEFINE_VECTOR_ROWS(vector_rows_u64_i32, uint64_t, int32_t)

/* The AVX2 run: AVX2 has no unsigned 64-bit compare and no 64-bit multiply, so the 8
 * indices are checked as signed lanes (v < 0 or v >= K after wrapping), and the values are
 * then copied by scalar loads through the checked indices (no branch left in the copy). */
#define AVX2 __attribute__((target("avx2")))

/* 4 indices (int64 lanes), negative ones wrapped when asked; *bad gets the lanes outside
 * [0, K). */
AVX2 static inline __m256i wrapped4(__m256i v, __m256i size, int wrap)
{
    if (wrap)
        v = _mm256_add_epi64(v, _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), v),
                                                 size));
    return v;
}

AVX2 static inline __m256i outside4(__m256i v, __m256i last)
{
    return _mm256_or_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), v),
                           _mm256_cmpgt_epi64(v, last));
}

#define LOAD4_I64(p) _mm256_loadu_si256((const __m256i *)(p))
#define LOAD4_I32(p) _mm256_cvtepi32_epi64(_mm_loadu_si128((const __m128i *)(p)))

#define DEFINE_VECTOR_RUN_AVX2(NAME, U, I, LOAD4)                                            \
    AVX2 static ptrdiff_t NAME(void *o_, const void *s_, const void *ix_, ptrdiff_t count,   \
                               ptrdiff_t ss, ptrdiff_t ks, ptrdiff_t K, int wrap)            \
    {                                                                                        \
        U *o = (U *)o_;                                                                      \
        const U *s = (const U *)s_;                                                          \
        const I *ix = (const I *)ix_;                                                        \
        const __m256i size = _mm256_set1_epi64x(K), last = _mm256_set1_epi64x(K - 1);        \
        int64_t v[8];                                                                        \
        ptrdiff_t i = 0;                                                                     \
        for (; i + 8 <= count; i += 8) {                                                     \
            const __m256i v0 = wrapped4(LOAD4(ix + i), size, wrap);                          \
            const __m256i v1 = wrapped4(LOAD4(ix + i + 4), size, wrap);                      \
            if (!_mm256_testz_si256(_mm256_or_si256(outside4(v0, last), outside4(v1, last)), \
                                    _mm256_set1_epi64x(-1)))                                 \
                break;                                                                       \
            _mm256_storeu_si256((__m256i *)v, v0);                                           \
            _mm256_storeu_si256((__m256i *)(v + 4), v1);                                     \
            for (int j = 0; j < 8; j++) o[i + j] = s[(i + j) * ss + (ptrdiff_t)v[j] * ks];   \
        }                                                                                    \
        return i;                                                                            \
    }

DEFINE_VECTOR_RUN_AVX2(vector_run2_u32_i64, uint32_t, int64_t, LOAD4_I64)
DEFINE_VECTOR_RUN_AVX2(vector_run2_u32_i32, uint32_t, int32_t, LOAD4_I32)
DEFINE_VECTOR_RUN_AVX2(vector_run2_u64_i64, uint64_t, int64_t, LOAD4_I64)
DEFINE_VECTOR_RUN_AVX2(vector_run2_u64_i32, uint64_t, int32_t, LOAD4_I32)
#endif /* x86 */

/* Positions [start, end) of the walk: U is the value's bits type, I the index type. Stops at
 * the first bad index (reported in *bad), before anything is read through it. */
#define DEFINE_GATHER(NAME, U, I)                                                            \
    static void NAME(const gather_t *G, ptrdiff_t start, ptrdiff_t end, bad_t *bad)          \
    {                                                                                        \
        const walk_t *W = &G->W;                                                             \
        const int last = W->ndim - 1;                                                        \
        ptrdiff_t idx[MAX_NDIM], off[3];                                                     \
        U *out = (U *)G->buf[OP_OUT];                                                        \
        const U *src = (const U *)G->buf[OP_SRC];                                            \
        const I *index = (const I *)G->buf[OP_IDX];                                          \
        const ptrdiff_t so = W->strides[OP_OUT][last], ss = W->strides[OP_SRC][last];        \
        const ptrdiff_t si = W->strides[OP_IDX][last];                                       \
        const ptrdiff_t ks = G->index_stride, K = G->index_size;                             \
        const int wrap = G->wrap;                                                            \
        walk_seek(W, start, idx, off);                                                       \
        if (G->vector_rows && W->ndim == 2 && si == 0 && so == 1 && ss == 1 &&               \
            idx[last] == 0) {                                                                \
            /* whole rows (run_gather splits on row boundaries): the vector loop, then the \
             * scalar one from the row it stopped at (a bad index, found again below) */     \
            const ptrdiff_t n = W->shape[last];                                              \
            const ptrdiff_t done = G->vector_rows(                                           \
                (char *)(out + off[OP_OUT]), W->strides[OP_OUT][0],                          \
                (const char *)(src + off[OP_SRC]), W->strides[OP_SRC][0],                    \
                (const char *)(index + off[OP_IDX]), W->strides[OP_IDX][0],                  \
                (end - start) / n, n, ks, K, wrap);                                          \
            if (done * n == end - start) return;                                             \
            start += done * n;                                                               \
            walk_seek(W, start, idx, off);                                                   \
        }                                                                                    \
        while (start < end) {                                                                \
            ptrdiff_t count = W->shape[last] - idx[last];                                    \
            if (count > end - start) count = end - start;                                    \
            U *o = out + off[OP_OUT];                                                        \
            const U *s = src + off[OP_SRC];                                                  \
            const I *ix = index + off[OP_IDX];                                               \
            if (si == 0) { /* one index for the whole run: index_select, embedding rows */   \
                const long long v = WRAPPED((long long)ix[0], K, wrap);                      \
                if (!INDEX_OK(v, K)) {                                                       \
                    bad->position = start;                                                   \
                    bad->value = (long long)ix[0];                                           \
                    return;                                                                  \
                }                                                                            \
                const U *row = s + (ptrdiff_t)v * ks;                                        \
                if (so == 1 && ss == 1)                                                      \
                    memcpy(o, row, (size_t)count * sizeof(U));                               \
                else                                                                         \
                    for (ptrdiff_t i = 0; i < count; i++) o[i * so] = row[i * ss];           \
            } else {                                                                         \
                ptrdiff_t i = 0;                                                             \
                if (G->vector_run && so == 1 && si == 1)                                     \
                    i = G->vector_run(o, s, ix, count, ss, ks, K, wrap);                     \
                for (; i < count; i++) {                                                     \
                    const long long v = WRAPPED((long long)ix[i * si], K, wrap);             \
                    if (!INDEX_OK(v, K)) {                                                   \
                        bad->position = start + i;                                           \
                        bad->value = (long long)ix[i * si];                                  \
                        return;                                                              \
                    }                                                                        \
                    o[i * so] = s[i * ss + (ptrdiff_t)v * ks];                               \
                }                                                                            \
            }                                                                                \
            start += count;                                                                  \
            if (start < end) walk_next_row(W, idx, off);                                     \
        }                                                                                    \
    }

DEFINE_GATHER(gather_u32_i64, uint32_t, int64_t)
DEFINE_GATHER(gather_u32_i32, uint32_t, int32_t)
DEFINE_GATHER(gather_u64_i64, uint64_t, int64_t)
DEFINE_GATHER(gather_u64_i32, uint64_t, int32_t)

typedef void (*gather_fn)(const gather_t *, ptrdiff_t, ptrdiff_t, bad_t *);

/* The first bad index over all threads' ranges: the smallest position found. */
static void merge_bad(bad_t *into, const bad_t *b)
{
    if (b->position >= 0 && (into->position < 0 || b->position < into->position)) *into = *b;
}

static void run_gather(const gather_t *G, gather_fn fn, ptrdiff_t numel, bad_t *bad)
{
    bad->position = -1;
    int threads = n_threads(numel);
    /* Each thread takes whole rows of the walk's last dim when there are enough of them (the
     * row loops work on whole rows), else a range of single positions. */
    const ptrdiff_t row = G->W.shape[G->W.ndim - 1];
    const ptrdiff_t unit = numel / row >= 4 * threads ? row : 1;
#ifdef _OPENMP
    if (threads > 1) {
        bad_t found[256];
        if (threads > 256) threads = 256;
        for (int t = 0; t < threads; t++) found[t].position = -1;
#pragma omp parallel num_threads(threads)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            const ptrdiff_t units = numel / unit;
            ptrdiff_t lo = units / nt * t + (t < units % nt ? t : units % nt);
            ptrdiff_t hi = lo + units / nt + (t < units % nt ? 1 : 0);
            fn(G, lo * unit, hi * unit, &found[t]);
        }
        for (int t = 0; t < threads; t++) merge_bad(bad, &found[t]);
        return;
    }
#endif
    (void)threads, (void)unit;
    fn(G, 0, numel, bad);
}

/* ---- scatter --------------------------------------------------------------------------- */

typedef struct {
    walk_t W;
    char *buf[3];
    ptrdiff_t index_stride, index_size;
    double alpha_f;
    long long alpha_i;
    int wrap; /* negative indices count from index_size (put) */
} scatter_t;

/* Positions [start, end) of walk W (a thread's slab), applying only indices in [vlo, vhi).
 * Every index read (wrapped when asked) is checked against [0, index_size) first: at a bad
 * one the loop returns 1
 * before writing through it (0: all applied). The caller then locates the first bad index in
 * row-major order (first_bad_index) to report it. */
#define DEFINE_SCATTER(NAME, T, I, APPLY)                                                    \
    static int NAME(const scatter_t *S, const walk_t *W, ptrdiff_t start, ptrdiff_t end,     \
                    ptrdiff_t vlo, ptrdiff_t vhi)                                            \
    {                                                                                        \
        const int last = W->ndim - 1;                                                        \
        ptrdiff_t idx[MAX_NDIM], off[3];                                                     \
        T *out = (T *)S->buf[OP_OUT];                                                        \
        const T *src = (const T *)S->buf[OP_SRC];                                            \
        const I *index = (const I *)S->buf[OP_IDX];                                          \
        const ptrdiff_t so = W->strides[OP_OUT][last], ss = W->strides[OP_SRC][last];        \
        const ptrdiff_t si = W->strides[OP_IDX][last], ks = S->index_stride;                 \
        const ptrdiff_t K = S->index_size;                                                   \
        const T alpha = (T)(ALPHA_OF_##T(S));                                                \
        const int wrap = S->wrap;                                                            \
        (void)alpha;                                                                         \
        walk_seek(W, start, idx, off);                                                       \
        while (start < end) {                                                                \
            ptrdiff_t count = W->shape[last] - idx[last];                                    \
            if (count > end - start) count = end - start;                                    \
            T *o = out + off[OP_OUT];                                                        \
            const T *s = src + off[OP_SRC];                                                  \
            const I *ix = index + off[OP_IDX];                                               \
            if (si == 0) { /* one index for the run: index_add rows */                       \
                const ptrdiff_t v = WRAPPED((ptrdiff_t)ix[0], K, wrap);                      \
                if (!INDEX_OK(v, K)) return 1;                                               \
                if (v >= vlo && v < vhi) {                                                   \
                    T *row = o + v * ks;                                                     \
                    if (so == 1 && ss == 1) {                                                \
                        for (ptrdiff_t i = 0; i < count; i++) APPLY(row[i], s[i]);           \
                    } else {                                                                 \
                        for (ptrdiff_t i = 0; i < count; i++) APPLY(row[i * so], s[i * ss]); \
                    }                                                                        \
                }                                                                            \
            } else if (so == 0 && si == 1 && ss == 1 && vlo == 0 && vhi == K) {              \
                /* one thread, contiguous index and src: index_add / scatter_add of a 1-D   \
                 * tensor (no range test; unit strides the compiler can see) */              \
                for (ptrdiff_t i = 0; i < count; i++) {                                      \
                    const ptrdiff_t v = WRAPPED((ptrdiff_t)ix[i], K, wrap);                  \
                    if (!INDEX_OK(v, K)) return 1;                                           \
                    APPLY(o[v * ks], s[i]);                                                  \
                }                                                                            \
            } else {                                                                         \
                for (ptrdiff_t i = 0; i < count; i++) {                                      \
                    const ptrdiff_t v = WRAPPED((ptrdiff_t)ix[i * si], K, wrap);             \
                    if (!INDEX_OK(v, K)) return 1;                                           \
                    if (v >= vlo && v < vhi) APPLY(o[i * so + v * ks], s[i * ss]);           \
                }                                                                            \
            }                                                                                \
            start += count;                                                                  \
            if (start < end) walk_next_row(W, idx, off);                                     \
        }                                                                                    \
        return 0;                                                                            \
    }

#define ALPHA_OF_float(S) ((S)->alpha_f)
#define ALPHA_OF_double(S) ((S)->alpha_f)
#define ALPHA_OF_int64_t(S) ((S)->alpha_i)
#define ALPHA_OF_int32_t(S) ((S)->alpha_i)
#define ALPHA_OF_uint32_t(S) 0
#define ALPHA_OF_uint64_t(S) 0

#define APPLY_ASSIGN(dst, x) ((dst) = (x))
#define APPLY_ADD(dst, x) ((dst) = (dst) + (x) * alpha)
#define APPLY_MULTIPLY(dst, x) ((dst) = (dst) * (x))
/* Integer sums and products wrap around as NumPy's do: compute them unsigned. */
#define APPLY_ADD_I64(dst, x) ((dst) = (int64_t)((uint64_t)(dst) + (uint64_t)(x) * (uint64_t)alpha))
#define APPLY_ADD_I32(dst, x) ((dst) = (int32_t)((uint32_t)(dst) + (uint32_t)(x) * (uint32_t)alpha))
#define APPLY_MUL_I64(dst, x) ((dst) = (int64_t)((uint64_t)(dst) * (uint64_t)(x)))
#define APPLY_MUL_I32(dst, x) ((dst) = (int32_t)((uint32_t)(dst) * (uint32_t)(x)))

#define DEFINE_SCATTERS_FOR_INDEX(I, SUF)                                                    \
    DEFINE_SCATTER(assign_u32_##SUF, uint32_t, I, APPLY_ASSIGN)                              \
    DEFINE_SCATTER(assign_u64_##SUF, uint64_t, I, APPLY_ASSIGN)                              \
    DEFINE_SCATTER(add_f32_##SUF, float, I, APPLY_ADD)                                       \
    DEFINE_SCATTER(add_f64_##SUF, double, I, APPLY_ADD)                                      \
    DEFINE_SCATTER(add_i64_##SUF, int64_t, I, APPLY_ADD_I64)                                 \
    DEFINE_SCATTER(add_i32_##SUF, int32_t, I, APPLY_ADD_I32)                                 \
    DEFINE_SCATTER(mul_f32_##SUF, float, I, APPLY_MULTIPLY)                                  \
    DEFINE_SCATTER(mul_f64_##SUF, double, I, APPLY_MULTIPLY)                                 \
    DEFINE_SCATTER(mul_i64_##SUF, int64_t, I, APPLY_MUL_I64)                                 \
    DEFINE_SCATTER(mul_i32_##SUF, int32_t, I, APPLY_MUL_I32)

DEFINE_SCATTERS_FOR_INDEX(int64_t, i64)
DEFINE_SCATTERS_FOR_INDEX(int32_t, i32)

typedef int (*scatter_fn)(const scatter_t *, const walk_t *, ptrdiff_t, ptrdiff_t, ptrdiff_t,
                          ptrdiff_t);

#define SCATTER_TABLE(SUF)                                                                   \
    {{assign_u32_##SUF, assign_u64_##SUF, assign_u64_##SUF, assign_u32_##SUF},               \
     {add_f32_##SUF, add_f64_##SUF, add_i64_##SUF, add_i32_##SUF},                           \
     {mul_f32_##SUF, mul_f64_##SUF, mul_i64_##SUF, mul_i32_##SUF}}
static const scatter_fn SCATTERS[N_ITYPES][N_MODES][N_VTYPES] = {SCATTER_TABLE(i64),
                                                                 SCATTER_TABLE(i32)};

/* The first bad index of the walk in row-major order (dims where the index does not move
 * are walked once): only run after a scatter loop met one, to report it. */
#define DEFINE_CHECK(NAME, I)                                                                \
    static void NAME(const walk_t *W, const char *buf, ptrdiff_t K, int wrap, bad_t *bad)    \
    {                                                                                        \
        const I *index = (const I *)buf;                                                     \
        ptrdiff_t numel = 1;                                                                 \
        for (int d = 0; d < W->ndim; d++) numel *= W->shape[d];                              \
        const int last = W->ndim - 1;                                                        \
        const ptrdiff_t si = W->strides[OP_IDX][last];                                       \
        ptrdiff_t idx[MAX_NDIM], off[3], start = 0;                                          \
        bad->position = -1;                                                                  \
        walk_seek(W, 0, idx, off);                                                           \
        while (start < numel) {                                                              \
            const ptrdiff_t count = W->shape[last];                                          \
            const I *ix = index + off[OP_IDX];                                               \
            for (ptrdiff_t i = 0; i < count; i++) {                                          \
                const long long v = (long long)ix[i * si];                                   \
                if (!INDEX_OK(WRAPPED(v, K, wrap), K)) {                                     \
                    bad->position = start + i;                                               \
                    bad->value = v;                                                          \
                    return;                                                                  \
                }                                                                            \
            }                                                                                \
            start += count;                                                                  \
            if (start < numel) walk_next_row(W, idx, off);                                   \
        }                                                                                    \
    }
DEFINE_CHECK(check_i64, int64_t)
DEFINE_CHECK(check_i32, int32_t)

/* The walk with the dims along which the index does not move cut to one position. */
static walk_t index_only_walk(const walk_t *W)
{
    walk_t R = *W;
    for (int d = 0; d < R.ndim; d++)
        if (R.strides[OP_IDX][d] == 0) R.shape[d] = 1;
    return R;
}

/* Whether some thread met a bad index (it stopped there; out may be partly updated). */
static int run_scatter(const scatter_t *S, scatter_fn fn, ptrdiff_t numel)
{
    const walk_t *W = &S->W;
    const ptrdiff_t K = S->index_size;
    int threads = n_threads(numel);
    /* The dim to split along: not indexed (index_stride moves out along another dim, but a
     * dim with out stride 0 would make slabs collide), not the innermost (threads would
     * share cache lines), and with room for every thread. */
    int split = -1;
    for (int d = 0; d < W->ndim - 1; d++)
        if (W->strides[OP_OUT][d] != 0 && W->shape[d] >= 4 * threads &&
            (split < 0 || W->shape[d] > W->shape[split]))
            split = d;
    /* The split by index value makes every thread read every index: worth it only when each
     * index moves a row (index_add, one index per run of the innermost dim), not when each
     * position has its own index (scatter_add of a 1-D tensor: measured slower than one
     * thread on 2 cores). */
    const int last = W->ndim - 1;
    const int by_value = W->strides[OP_IDX][last] == 0 && W->shape[last] >= 16 &&
                         K >= 4 * threads;
#ifdef _OPENMP
    if (threads > 1 && (split >= 0 || by_value)) {
        int met_bad = 0;
#pragma omp parallel num_threads(threads) reduction(| : met_bad)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            if (split >= 0) { /* each thread a slab of the split dim, all index values */
                const ptrdiff_t n = W->shape[split];
                const ptrdiff_t lo = n / nt * t + (t < n % nt ? t : n % nt);
                const ptrdiff_t hi = lo + n / nt + (t < n % nt ? 1 : 0);
                walk_t slab = *W;
                slab.shape[split] = hi - lo;
                for (int k = 0; k < 3; k++) slab.offset[k] += lo * W->strides[k][split];
                if (hi > lo) met_bad = fn(S, &slab, 0, numel / n * (hi - lo), 0, K);
            } else { /* every position, each thread its own range of index values */
                const ptrdiff_t lo = K / nt * t + (t < K % nt ? t : K % nt);
                const ptrdiff_t hi = lo + K / nt + (t < K % nt ? 1 : 0);
                met_bad = fn(S, W, 0, numel, lo, hi);
            }
        }
        return met_bad;
    }
#endif
    (void)threads, (void)by_value;
    return fn(S, W, 0, numel, 0, K);
}

/* ---- argument checking ---------------------------------------------------------------- */

static int index_type(const Py_buffer *view)
{
    int c = format_char(view);
    if ((c == 'l' || c == 'q') && view->itemsize == 8) return I_I64;
    if ((c == 'i' || c == 'l') && view->itemsize == 4) return I_I32;
    PyErr_Format(PyExc_TypeError, "index must hold int64 or int32 elements (buffer format "
                 "'%s', itemsize %zd)", view->format ? view->format : "B", view->itemsize);
    return -1;
}

static int parse_stride(PyObject *obj, const char *what, long long *dst)
{
    int overflow = 0;
    *dst = PyLong_Check(obj) ? PyLong_AsLongLongAndOverflow(obj, &overflow) : 0;
    if (!PyLong_Check(obj) || overflow || (*dst == -1 && PyErr_Occurred()) ||
        *dst > PTRDIFF_MAX / 16 || *dst < -(PTRDIFF_MAX / 16)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be an int of moderate size", what);
        return -1;
    }
    return 0;
}

/* The walk's operands out, src and index (slots OP_OUT, OP_SRC, OP_IDX) from the
 * (buffer, offset, strides) triples at args[at[k]], into views[k]. The operand the index
 * moves along (`indexed`: src for gather, out for scatter) must also hold index_stride
 * times every index in [0, index_size). On failure none is held. */
static int parse_walk_operands(PyObject *const *args, const int at[3], int indexed, int ndim,
                               const long long *shape, long long index_stride,
                               long long index_size, Py_buffer views[3], walk_t *W)
{
    static const char *const names[3] = {"out", "src", "index"};
    for (int k = 0; k < 3; k++) {
        const int moved = k == indexed;
        if (parse_operand(args + at[k], names[k], k == OP_OUT, ndim, shape,
                          moved ? index_stride : 0, moved ? index_size : 0, &views[k], W,
                          k) < 0) {
            for (int j = 0; j < k; j++) PyBuffer_Release(&views[j]);
            return -1;
        }
    }
    return 0;
}

/* The element type out and src share (*vt, V_*) and the index type (*it, I_*), or -1 with
 * TypeError set. (One kind means one itemsize too.) */
static int operand_types(const Py_buffer views[3], int *vt, int *it)
{
    *vt = buffer_kind_in(&views[OP_OUT], "out", 1);
    *it = index_type(&views[OP_IDX]);
    const int st = *vt < 0 ? -1 : buffer_kind_in(&views[OP_SRC], "src", 1);
    if (*vt < 0 || st < 0 || *it < 0) return -1;
    if (*vt != st) {
        PyErr_SetString(PyExc_TypeError, "out and src must hold the same element type");
        return -1;
    }
    return 0;
}

static PyObject *raise_bad(const bad_t *bad, long long size)
{
    PyObject *msg = PyUnicode_FromFormat("index %lld is out of bounds for size %lld",
                                         bad->value, size);
    if (msg == NULL) return NULL;
    PyObject *args = Py_BuildValue("(NL)", msg, bad->value);
    if (args != NULL) {
        PyErr_SetObject(IndexOutOfBounds, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* ---- entry points --------------------------------------------------------------------- */

static PyObject *py_gather(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "gather() takes 13 arguments (shape, out, out_offset, "
                     "out_strides, src, src_offset, src_strides, index_stride, index_size, "
                     "index, index_offset, index_strides, wrap), got %zd", nargs);
        return NULL;
    }
    long long shape[MAX_NDIM], ks, K;
    int ndim;
    long long numel = parse_shape(args[0], shape, &ndim);
    if (numel < 0 || parse_stride(args[7], "index_stride", &ks) < 0 ||
        parse_size(args[8], "index_size", &K) < 0)
        return NULL;
    int wrap = PyObject_IsTrue(args[12]);
    if (wrap < 0) return NULL;
    gather_t G;
    memset(&G, 0, sizeof G);
    set_walk_shape(&G.W, ndim, shape);
    Py_buffer views[3];
    if (parse_walk_operands(args, (const int[]){1, 4, 9}, OP_SRC, ndim, shape, ks, K, views,
                            &G.W) < 0)
        return NULL;
    int vt, it;
    PyObject *result = NULL;
    if (operand_types(views, &vt, &it) < 0) goto done;
    for (int k = 0; k < 3; k++) G.buf[k] = (char *)views[k].buf;
    G.index_stride = (ptrdiff_t)ks;
    G.index_size = (ptrdiff_t)K;
    G.wrap = wrap;
    const int wide = views[0].itemsize == 8;
    gather_fn fn = !wide ? (it == I_I64 ? gather_u32_i64 : gather_u32_i32)
                         : (it == I_I64 ? gather_u64_i64 : gather_u64_i32);
#ifdef HAVE_AVX512_PATHS
    if (g_isa >= ISA_AVX512F) {
        G.vector_run = !wide ? (it == I_I64 ? vector_run_u32_i64 : vector_run_u32_i32)
                             : (it == I_I64 ? vector_run_u64_i64 : vector_run_u64_i32);
        G.vector_rows = !wide ? (it == I_I64 ? vector_rows_u32_i64 : vector_rows_u32_i32)
                              : (it == I_I64 ? vector_rows_u64_i64 : vector_rows_u64_i32);
    } else if (g_isa >= ISA_AVX2) {
        G.vector_run = !wide ? (it == I_I64 ? vector_run2_u32_i64 : vector_run2_u32_i32)
                             : (it == I_I64 ? vector_run2_u64_i64 : vector_run2_u64_i32);
    }
#endif
    bad_t bad = {-1, 0};
    g_calls++;
    if (numel > 0) {
        Py_BEGIN_ALLOW_THREADS
        run_gather(&G, fn, (ptrdiff_t)numel, &bad);
        Py_END_ALLOW_THREADS
    }
    if (bad.position >= 0)
        raise_bad(&bad, K);
    else
        result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < 3; k++) PyBuffer_Release(&views[k]);
    return result;
}

static PyObject *py_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 14 && nargs != 15) {
        PyErr_Format(PyExc_TypeError, "scatter() takes 14 or 15 arguments (shape, out, "
                     "out_offset, out_strides, index_stride, index_size, src, src_offset, "
                     "src_strides, index, index_offset, index_strides, mode, alpha[, wrap]), "
                     "got %zd", nargs);
        return NULL;
    }
    long long shape[MAX_NDIM], ks, K, mode;
    int ndim;
    long long numel = parse_shape(args[0], shape, &ndim);
    if (numel < 0 || parse_stride(args[4], "index_stride", &ks) < 0 ||
        parse_size(args[5], "index_size", &K) < 0 || parse_size(args[12], "mode", &mode) < 0)
        return NULL;
    if (mode >= N_MODES) {
        PyErr_Format(PyExc_ValueError, "unknown scatter mode %lld", mode);
        return NULL;
    }
    scatter_t S;
    memset(&S, 0, sizeof S);
    S.wrap = nargs == 15 ? PyObject_IsTrue(args[14]) : 0;
    if (S.wrap < 0) return NULL;
    PyObject *alpha = args[13];
    if (PyLong_Check(alpha)) {
        int overflow = 0;
        S.alpha_i = PyLong_AsLongLongAndOverflow(alpha, &overflow);
        if (overflow || (S.alpha_i == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "alpha is out of range");
            return NULL;
        }
        S.alpha_f = (double)S.alpha_i;
    } else if (PyFloat_Check(alpha)) {
        S.alpha_f = PyFloat_AsDouble(alpha);
        S.alpha_i = 0;
    } else {
        PyErr_SetString(PyExc_TypeError, "alpha must be an int or a float");
        return NULL;
    }
    set_walk_shape(&S.W, ndim, shape);
    Py_buffer views[3];
    if (parse_walk_operands(args, (const int[]){1, 6, 9}, OP_OUT, ndim, shape, ks, K, views,
                            &S.W) < 0)
        return NULL;
    int vt, it;
    PyObject *result = NULL;
    if (operand_types(views, &vt, &it) < 0) goto done;
    if ((vt == V_I64 || vt == V_I32) && mode == MODE_ADD && !PyLong_Check(alpha)) {
        PyErr_SetString(PyExc_TypeError, "alpha must be an int for integer elements");
        goto done;
    }
    for (int k = 0; k < 3; k++) S.buf[k] = (char *)views[k].buf;
    S.index_stride = (ptrdiff_t)ks;
    S.index_size = (ptrdiff_t)K;
    scatter_fn fn = SCATTERS[it][mode][vt];
    bad_t bad = {-1, 0};
    g_calls++;
    if (numel > 0) {
        Py_BEGIN_ALLOW_THREADS
        if (run_scatter(&S, fn, (ptrdiff_t)numel)) { /* locate the first bad index to report */
            walk_t check = index_only_walk(&S.W);
            if (it == I_I64)
                check_i64(&check, S.buf[OP_IDX], (ptrdiff_t)K, S.wrap, &bad);
            else
                check_i32(&check, S.buf[OP_IDX], (ptrdiff_t)K, S.wrap, &bad);
        }
        Py_END_ALLOW_THREADS
    }
    if (bad.position >= 0)
        raise_bad(&bad, K);
    else
        result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < 3; k++) PyBuffer_Release(&views[k]);
    return result;
}

static PyMethodDef METHODS[] = {
    {"gather", (PyCFunction)(void (*)(void))py_gather, METH_FASTCALL,
     "gather(shape, out, out_offset, out_strides, src, src_offset, src_strides, index_stride, "
     "index_size, index, index_offset, index_strides, wrap): out[p] = src[p + index[p] * "
     "index_stride] over `shape`; every index checked against index_size."},
    {"scatter", (PyCFunction)(void (*)(void))py_scatter, METH_FASTCALL,
     "scatter(shape, out, out_offset, out_strides, index_stride, index_size, src, src_offset, "
     "src_strides, index, index_offset, index_strides, mode, alpha[, wrap]): out[p + index[p] "
     "* index_stride] (=, +=, *=) src[p] in row-major order; every index checked."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._index",
    .m_doc = "Gather- and scatter-shaped indexing kernels for reftorch, indices checked.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__index(void)
{
    if (init_module_state() < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    IndexOutOfBounds = PyErr_NewExceptionWithDoc(
        "reftorch_cpu._index.IndexOutOfBounds",
        "An index outside its dim; args are (message, the bad index value).", PyExc_IndexError,
        NULL);
    if (IndexOutOfBounds == NULL || PyModule_AddObjectRef(m, "IndexOutOfBounds",
                                                          IndexOutOfBounds) < 0 ||
        PyModule_AddIntConstant(m, "ASSIGN", MODE_ASSIGN) < 0 ||
        PyModule_AddIntConstant(m, "ADD", MODE_ADD) < 0 ||
        PyModule_AddIntConstant(m, "MULTIPLY", MODE_MULTIPLY) < 0 ||
        PyModule_AddIntConstant(m, "MAX_NDIM", MAX_NDIM) < 0 ||
        PyModule_AddIntConstant(m, "PARALLEL_MIN_POSITIONS", PARALLEL_MIN_POSITIONS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
