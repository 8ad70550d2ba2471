/* reftorch_cpu._C: strided elementwise kernels for float32 and float64.
 *
 * Entry points (called from reftorch_cpu/__init__.py, which builds the loop geometry):
 *
 *   binary(op, shape, out, out_offset, out_strides, a, a_offset, a_strides,
 *          b, b_offset, b_strides, alpha)      out = a (op) b, elementwise
 *   copy(shape, out, out_offset, out_strides, src, src_offset, src_strides)
 *
 * Each operand is a contiguous buffer of float32 ('f') or float64 ('d') elements (a CPU
 * storage's 1-D NumPy array), the element offset of the view's element 0, and one stride per
 * dim, in elements (0 for a broadcast dim, negative allowed). Every argument is checked before
 * any memory is touched: the dims count, sizes >= 0, offsets >= 0, and that every element the
 * loop will visit lies inside its buffer. Bad arguments raise TypeError or ValueError.
 *
 * The loop walks the shape in row-major order and hands each run along the last dim to a
 * "row" function. A row function has vectorizable loops for the contiguous cases (all unit
 * strides, or one input broadcast as a scalar) and a plain strided loop otherwise. It is
 * compiled three times, for baseline x86-64, AVX2 and AVX-512F, and the best one the CPU
 * supports is picked at import. Above PARALLEL_MIN_BYTES of output the index range is split
 * into blocks, one contiguous run of them per OpenMP thread; each element is computed by the same
 * expression whichever thread runs it, so results never depend on the thread count.
 *
 * Compiled with -ffp-contract=off: a + b * alpha must round twice (as NumPy does), never be
 * fused into one FMA.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define OWNS_THREAD_SETTING /* (see common.h) */
#include "common.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Loops writing fewer bytes than this run on one thread: starting a parallel region costs
 * a few microseconds. Measured on a 2-core x86-64 (float32 add, 1 vs 2 threads): 16 KiB
 * elements 4.3 vs 5.0 us, 32 Ki 7.1 vs 6.3 us, 64 Ki 12 vs 9.5 us; float64 crosses over at
 * 16 Ki elements, the same 128 KiB. */
#ifndef PARALLEL_MIN_BYTES
#define PARALLEL_MIN_BYTES (128 * 1024)
#endif

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, N_OPS };
enum { T_F32, T_F64, N_TYPES };

/* One run of n elements along the innermost dim; strides in elements. */
typedef void (*row_fn)(ptrdiff_t n, char *o, ptrdiff_t so, const char *a, ptrdiff_t sa,
                       const char *b, ptrdiff_t sb, double alpha);

/* ---- the arithmetic -------------------------------------------------------------------- */

#define EXPR_add(x, y, al) ((x) + (y) * (al))
#define EXPR_sub(x, y, al) ((x) - (y) * (al))
#define EXPR_mul(x, y, al) ((x) * (y))
#define EXPR_div(x, y, al) ((x) / (y))

/* A row function for one op, one element type and one instruction set. The three unit-stride
 * cases get their own loops so the compiler vectorizes them; `omp simd` tells it that an
 * output equal to an input (in-place ops) is fine, as each element is read before it is
 * written. */
#define DEFINE_ROW(OP, T, ISA, ATTR)                                                         \
    ATTR static void row_##OP##_##T##_##ISA(ptrdiff_t n, char *o_, ptrdiff_t so,             \
                                            const char *a_, ptrdiff_t sa, const char *b_,    \
                                            ptrdiff_t sb, double alpha)                      \
    {                                                                                        \
        T *o = (T *)o_;                                                                      \
        const T *a = (const T *)a_, *b = (const T *)b_;                                      \
        const T al = (T)alpha;                                                               \
        (void)al;                                                                            \
        if (so == 1 && sa == 1 && sb == 1) {                                                 \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++)                            \
                o[i] = EXPR_##OP(a[i], b[i], al);                                            \
        } else if (so == 1 && sa == 1 && sb == 0) {                                          \
            const T y = b[0];                                                                \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++)                            \
                o[i] = EXPR_##OP(a[i], y, al);                                               \
        } else if (so == 1 && sa == 0 && sb == 1) {                                          \
            const T x = a[0];                                                                \
            _Pragma("omp simd") for (ptrdiff_t i = 0; i < n; i++)                            \
                o[i] = EXPR_##OP(x, b[i], al);                                               \
        } else {                                                                             \
            for (ptrdiff_t i = 0; i < n; i++)                                                \
                o[i * so] = EXPR_##OP(a[i * sa], b[i * sb], al);                             \
        }                                                                                    \
    }

#define DEFINE_ROWS_FOR_ISA(ISA, ATTR)                                                       \
    DEFINE_ROW(add, float, ISA, ATTR) DEFINE_ROW(add, double, ISA, ATTR)                     \
    DEFINE_ROW(sub, float, ISA, ATTR) DEFINE_ROW(sub, double, ISA, ATTR)                     \
    DEFINE_ROW(mul, float, ISA, ATTR) DEFINE_ROW(mul, double, ISA, ATTR)                     \
    DEFINE_ROW(div, float, ISA, ATTR) DEFINE_ROW(div, double, ISA, ATTR)

#define ROWS_FOR_ISA(ISA)                                                                    \
    {{row_add_float_##ISA, row_add_double_##ISA}, {row_sub_float_##ISA, row_sub_double_##ISA}, \
     {row_mul_float_##ISA, row_mul_double_##ISA}, {row_div_float_##ISA, row_div_double_##ISA}}

DEFINE_ROWS_FOR_ISA(baseline, )

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define HAVE_X86_CLONES 1
DEFINE_ROWS_FOR_ISA(avx2, __attribute__((target("avx2"))))
DEFINE_ROWS_FOR_ISA(avx512f, __attribute__((target("avx512f"))))
static const row_fn ROWS[N_ISAS][N_OPS][N_TYPES] = {
    ROWS_FOR_ISA(baseline), ROWS_FOR_ISA(avx2), ROWS_FOR_ISA(avx512f)};
#else
#define HAVE_X86_CLONES 0
static const row_fn ROWS[N_ISAS][N_OPS][N_TYPES] = {ROWS_FOR_ISA(baseline)};
#endif

#if HAVE_X86_CLONES
#include <immintrin.h>
/* Dense outputs of at least STREAM_MIN_BYTES are written with non-temporal (streaming) stores
 * in the AVX-512F and AVX2 clones: they bypass the caches, so a line is not read before it is
 * written (a normal store reads it first) and the inputs stay cached. A 4M-element float32 add took
 * 4.3 ms with normal stores and 3.4 ms streaming (one thread, 2-core x86-64). Smaller outputs
 * keep normal stores: they are likely read again soon, from cache. The arithmetic is the same
 * lane by lane, so the bits are the same. */
#define STREAM_MIN_BYTES ((size_t)8 << 20)

typedef float vf32 __attribute__((vector_size(64)));
typedef double vf64 __attribute__((vector_size(64)));
typedef float vf32x8 __attribute__((vector_size(32)));
typedef double vf64x4 __attribute__((vector_size(32)));

#define DEFINE_STREAM_ROW(NAME, OP, T, V, STREAM, ATTR)                                     \
    ATTR static void NAME(ptrdiff_t n, char *o_, ptrdiff_t so, const char *a_, ptrdiff_t sa, \
                          const char *b_, ptrdiff_t sb, double alpha)                        \
    {                                                                                        \
        enum { L = sizeof(V) / sizeof(T) };                                                  \
        T *o = (T *)o_;                                                                      \
        const T *a = (const T *)a_, *b = (const T *)b_;                                      \
        const T al = (T)alpha;                                                               \
        const V alv = (V){0} + al;                                                           \
        (void)so; (void)sa; (void)sb; (void)al; (void)alv;                                   \
        ptrdiff_t i = 0;                                                                     \
        for (; i < n && ((uintptr_t)(o + i) & (sizeof(V) - 1)) != 0; i++) /* aligned */     \
            o[i] = EXPR_##OP(a[i], b[i], al);                                                \
        for (; i + L <= n; i += L) {                                                         \
            V x, y;                                                                          \
            memcpy(&x, a + i, sizeof x);                                                     \
            memcpy(&y, b + i, sizeof y);                                                     \
            STREAM(o + i, EXPR_##OP(x, y, alv));                                             \
        }                                                                                    \
        for (; i < n; i++) o[i] = EXPR_##OP(a[i], b[i], al);                                 \
        _mm_sfence(); /* streamed stores are visible before the loop's end is reported */    \
    }

/* (the AVX2 clone streams 32-byte vectors: AMD EPYC Zen 3, a 4M-element float32 add on 2
 * threads 1.1-1.2x faster streaming than with normal stores) */
#define AVX512_ATTR __attribute__((target("avx512f")))
#define AVX2_ATTR __attribute__((target("avx2")))
#define DEFINE_STREAM_ROWS(OP)                                                               \
    DEFINE_STREAM_ROW(stream_##OP##_float, OP, float, vf32, _mm512_stream_ps, AVX512_ATTR)  \
    DEFINE_STREAM_ROW(stream_##OP##_double, OP, double, vf64, _mm512_stream_pd, AVX512_ATTR) \
    DEFINE_STREAM_ROW(stream2_##OP##_float, OP, float, vf32x8, _mm256_stream_ps, AVX2_ATTR) \
    DEFINE_STREAM_ROW(stream2_##OP##_double, OP, double, vf64x4, _mm256_stream_pd, AVX2_ATTR)
DEFINE_STREAM_ROWS(add)
DEFINE_STREAM_ROWS(sub)
DEFINE_STREAM_ROWS(mul)
DEFINE_STREAM_ROWS(div)
#define STREAM_TABLE(P)                                                                      \
    {{P##_add_float, P##_add_double}, {P##_sub_float, P##_sub_double},                       \
     {P##_mul_float, P##_mul_double}, {P##_div_float, P##_div_double}}
static const row_fn STREAM_ROWS[N_ISAS][N_OPS][N_TYPES] = {
    [ISA_AVX2] = STREAM_TABLE(stream2), [ISA_AVX512F] = STREAM_TABLE(stream)};
#endif

/* Copies move bits (integer types keep every NaN payload); memmove does its own dispatch.
 * Cloned per instruction set for flip's reversed runs, which the compiler vectorizes with
 * lane shuffles: one 64-byte shuffle per vector in the AVX-512F clone. Reversing the last
 * dim of a (1000, 1000) float32 tensor took 172 us element by element, 83 with SSE2
 * shuffles, 55-60 in the AVX-512F clone (torch 51; 2 threads, 2-core x86-64). */
#define DEFINE_COPY_ROW(NAME, U, ATTR)                                                       \
    ATTR static void NAME(ptrdiff_t n, char *o_, ptrdiff_t so, const char *a_, ptrdiff_t sa, \
                          const char *b_, ptrdiff_t sb, double alpha)                        \
    {                                                                                        \
        (void)b_, (void)sb, (void)alpha;                                                     \
        U *o = (U *)o_;                                                                      \
        const U *a = (const U *)a_;                                                          \
        if (so == 1 && sa == 1) {                                                            \
            memmove(o, a, (size_t)n * sizeof(U));                                            \
        } else if (so == 1 && sa == 0) {                                                     \
            const U x = a[0];                                                                \
            for (ptrdiff_t i = 0; i < n; i++) o[i] = x;                                      \
        } else if (so == 1 && sa == -1) {                                                    \
            for (ptrdiff_t i = 0; i < n; i++) o[i] = a[-i];                                  \
        } else {                                                                             \
            for (ptrdiff_t i = 0; i < n; i++) o[i * so] = a[i * sa];                         \
        }                                                                                    \
    }
#define DEFINE_COPY_ROWS_FOR_ISA(ISA, ATTR)                                                  \
    DEFINE_COPY_ROW(row_copy_4_##ISA, uint32_t, ATTR)                                        \
    DEFINE_COPY_ROW(row_copy_8_##ISA, uint64_t, ATTR)
#define COPY_ROWS_FOR_ISA(ISA) {row_copy_4_##ISA, row_copy_8_##ISA}

DEFINE_COPY_ROWS_FOR_ISA(baseline, )
#if HAVE_X86_CLONES
DEFINE_COPY_ROWS_FOR_ISA(avx2, __attribute__((target("avx2"))))
DEFINE_COPY_ROWS_FOR_ISA(avx512f, __attribute__((target("avx512f"))))
static const row_fn COPY_ROWS[N_ISAS][2] = {
    COPY_ROWS_FOR_ISA(baseline), COPY_ROWS_FOR_ISA(avx2), COPY_ROWS_FOR_ISA(avx512f)};
#else
static const row_fn COPY_ROWS[N_ISAS][2] = {COPY_ROWS_FOR_ISA(baseline)};
#endif


/* ---- the loop over a strided shape ---------------------------------------------------- */

typedef struct {
    int ndim; /* >= 1 */
    int nops; /* 2 (copy) or 3 (binary): out first */
    size_t itemsize;
    ptrdiff_t shape[MAX_NDIM];
    ptrdiff_t strides[3][MAX_NDIM];
    ptrdiff_t offset[3]; /* element offset of element 0 in each buffer */
    char *buf[3];
    row_fn row;
    double alpha;
} loop_t;

/* Run linear indices [start, end) (row-major over shape). Offsets stay element counts and a
 * pointer is formed only for an element that is visited, so nothing outside the checked
 * bounds is ever addressed. */
static void run_range(const loop_t *L, ptrdiff_t start, ptrdiff_t end)
{
    const int nd = L->ndim, last = nd - 1;
    ptrdiff_t idx[MAX_NDIM], off[3];
    ptrdiff_t rem = start;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % L->shape[d];
        rem /= L->shape[d];
    }
    for (int k = 0; k < L->nops; k++) {
        off[k] = L->offset[k];
        for (int d = 0; d < nd; d++) off[k] += idx[d] * L->strides[k][d];
    }
    const ptrdiff_t inner = L->shape[last];
    const ptrdiff_t s0 = L->strides[0][last], s1 = L->strides[1][last];
    const ptrdiff_t s2 = L->nops > 2 ? L->strides[2][last] : 0;
    const size_t w = L->itemsize;
    while (start < end) {
        ptrdiff_t count = inner - idx[last];
        if (count > end - start) count = end - start;
        L->row(count, L->buf[0] + (size_t)off[0] * w, s0, L->buf[1] + (size_t)off[1] * w, s1,
               L->nops > 2 ? L->buf[2] + (size_t)off[2] * w : NULL, s2, L->alpha);
        start += count;
        if (start >= end) break;
        /* the run ended at the end of a row: move to the next row's first element */
        for (int k = 0; k < L->nops; k++) off[k] -= idx[last] * L->strides[k][last];
        idx[last] = 0;
        for (int d = last - 1; d >= 0; d--) {
            idx[d]++;
            for (int k = 0; k < L->nops; k++) off[k] += L->strides[k][d];
            if (idx[d] < L->shape[d]) break;
            for (int k = 0; k < L->nops; k++) off[k] -= L->shape[d] * L->strides[k][d];
            idx[d] = 0;
        }
    }
}

/* ---- transposing copies ---------------------------------------------------------------- */

/* A copy whose output runs along its last dim while its source runs along another dim k
 * (x.t().contiguous(), an NCHW -> NHWC permute) reads a new cache line for every element
 * when walked row by row. In TILE x TILE tiles of dims (k, last) the lines a tile reads and
 * writes stay cached while it uses them whole. Copies move bits: the order changes nothing in
 * the result. Measured on a 2-core x86-64 (2 threads, interleaved with torch), float32:
 * 2048 x 2048 transposed 11.3 ms row by row, 7.1-7.3 in tiles of 64 (torch 4.8-5.0);
 * (32, 64, 56, 56) NCHW -> NHWC 3.9 -> 2.8-3.1 ms (torch 3.2-3.4). Tiles of 16 did better on
 * the first (5.5-6.0 ms) and worse on the second (5.5-6.3): the per-row call costs more
 * when the plane fits in L2. */
#define TILE 64

/* k, or -1 when L is not such a copy (or too small a plane to gain from tiles). */
static int transposed_dim(const loop_t *L)
{
    const int last = L->ndim - 1;
    if (L->nops != 2 || last < 1 || L->strides[0][last] != 1 || L->shape[last] < TILE)
        return -1;
    for (int d = 0; d < last; d++)
        if (L->strides[1][d] == 1 && L->strides[1][last] != 1 && L->shape[d] >= TILE)
            return d;
    return -1;
}

/* Tiles of rows [k0, k0 + TILE) of dim k, at the outer index `outer` (row-major over the
 * dims other than k and last). */
static void copy_tile_row(const loop_t *L, int k, ptrdiff_t outer, ptrdiff_t k0)
{
    const int last = L->ndim - 1;
    ptrdiff_t off[2] = {L->offset[0], L->offset[1]};
    for (int d = last - 1; d >= 0; d--) {
        if (d == k) continue;
        const ptrdiff_t i = outer % L->shape[d];
        outer /= L->shape[d];
        off[0] += i * L->strides[0][d];
        off[1] += i * L->strides[1][d];
    }
    const ptrdiff_t rows = L->shape[k] - k0 < TILE ? L->shape[k] - k0 : TILE;
    const ptrdiff_t so = L->strides[0][last], ss = L->strides[1][last];
    const size_t w = L->itemsize;
    for (ptrdiff_t j0 = 0; j0 < L->shape[last]; j0 += TILE) {
        const ptrdiff_t n = L->shape[last] - j0 < TILE ? L->shape[last] - j0 : TILE;
        for (ptrdiff_t r = k0; r < k0 + rows; r++) {
            const ptrdiff_t o = off[0] + r * L->strides[0][k] + j0 * so;
            const ptrdiff_t a = off[1] + r * L->strides[1][k] + j0 * ss;
            L->row(n, L->buf[0] + (size_t)o * w, so, L->buf[1] + (size_t)a * w, ss, NULL, 0,
                   L->alpha);
        }
    }
}

static void run_tiled(const loop_t *L, int k, ptrdiff_t numel)
{
    const ptrdiff_t outer = numel / (L->shape[k] * L->shape[L->ndim - 1]);
    const ptrdiff_t tile_rows = (L->shape[k] + TILE - 1) / TILE;
    const ptrdiff_t items = outer * tile_rows;
    const int par = worth_parallel((double)numel * (double)L->itemsize, PARALLEL_MIN_BYTES);
    (void)par;
#pragma omp parallel for schedule(static) if (par)
    for (ptrdiff_t item = 0; item < items; item++)
        copy_tile_row(L, k, item / tile_rows, item % tile_rows * TILE);
}

static void run(const loop_t *L, ptrdiff_t numel)
{
    const int k = transposed_dim(L);
    if (k >= 0) {
        run_tiled(L, k, numel);
        return;
    }
#ifdef _OPENMP
    if (worth_parallel((double)numel * (double)L->itemsize, PARALLEL_MIN_BYTES)) {
        const ptrdiff_t block = even_block(numel, max_threads());
        const ptrdiff_t blocks = (numel + block - 1) / block;
#pragma omp parallel for schedule(static)
        for (ptrdiff_t i = 0; i < blocks; i++) {
            ptrdiff_t lo = i * block, hi = lo + block;
            run_range(L, lo, hi < numel ? hi : numel);
        }
        return;
    }
#endif
    run_range(L, 0, numel);
}


/* ---- argument checking ---------------------------------------------------------------- */

/* The element type codes are common.h's kinds (buffer_float_kind returns them). */
_Static_assert((int)T_F32 == (int)KIND_F32 && (int)T_F64 == (int)KIND_F64,
               "T_* must match KIND_*");

/* Shared by both entry points: parse shape and the operands, check them, fill a loop_t.
 * Returns numel (>= 0), or -1 with an exception set. */
static const char *const OPERAND_NAMES[3][3] = {
    {"out", "out_offset", "out_strides"}, {"a", "a_offset", "a_strides"},
    {"b", "b_offset", "b_strides"}};
static const char *const COPY_NAMES[2][3] = {
    {"out", "out_offset", "out_strides"}, {"src", "src_offset", "src_strides"}};

static long long prepare(loop_t *L, Py_buffer *views, int nops, PyObject *const *args,
                         const char *const (*names)[3], int *type)
{
    long long shape[MAX_NDIM], strides[MAX_NDIM], offset;
    int ndim;
    const long long numel = parse_shape(args[0], shape, &ndim);
    if (numel < 0) return -1;
    memset(L, 0, sizeof *L);
    int held = 0; /* views[0..held) are acquired */
    /* a 0-dim operation is a 1-dim one of one element */
    L->ndim = ndim ? ndim : 1;
    for (int d = 0; d < L->ndim; d++) L->shape[d] = ndim ? (ptrdiff_t)shape[d] : 1;
    *type = -1;
    for (int k = 0; k < nops; k++) {
        PyObject *const *arg = args + 1 + 3 * k;
        if (get_buffer(arg[0], &views[k], k == 0, names[k][0]) < 0) goto fail;
        held = k + 1;
        int t = buffer_float_kind(&views[k], names[k][0]);
        if (t < 0) goto fail;
        if (k > 0 && t != *type) {
            PyErr_Format(PyExc_TypeError, "%s and out must hold the same element type",
                         names[k][0]);
            goto fail;
        }
        *type = t;
        if (parse_offset(arg[1], names[k][1], &offset) < 0 ||
            parse_dims(arg[2], names[k][2], ndim, strides, NULL) < 0 ||
            check_view(&views[k], names[k][0], offset, ndim, shape, strides) < 0)
            goto fail;
        L->buf[k] = (char *)views[k].buf;
        L->offset[k] = (ptrdiff_t)offset;
        for (int d = 0; d < L->ndim; d++) L->strides[k][d] = ndim ? (ptrdiff_t)strides[d] : 0;
    }
    L->nops = nops;
    L->itemsize = (size_t)views[0].itemsize;
    return numel;
fail:
    for (int k = 0; k < held; k++) PyBuffer_Release(&views[k]);
    return -1;
}

/* ---- entry points --------------------------------------------------------------------- */

static PyObject *py_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 12) {
        PyErr_Format(PyExc_TypeError, "binary() takes 12 arguments (op, shape, out, "
                     "out_offset, out_strides, a, a_offset, a_strides, b, b_offset, b_strides, "
                     "alpha), got %zd", nargs);
        return NULL;
    }
    if (!PyLong_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "op must be an int op code");
        return NULL;
    }
    long op = PyLong_AsLong(args[0]);
    if (op < 0 || op >= N_OPS) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "unknown op code %ld", op);
        return NULL;
    }
    double alpha = PyFloat_AsDouble(args[11]);
    if (alpha == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "alpha must be a real number");
        return NULL;
    }
    loop_t L;
    Py_buffer views[3];
    int type;
    long long numel = prepare(&L, views, 3, args + 1, OPERAND_NAMES, &type);
    if (numel < 0) return NULL;
    L.row = ROWS[g_isa][op][type];
#if HAVE_X86_CLONES
    if (g_isa >= ISA_AVX2 && L.ndim == 1 && L.strides[0][0] == 1 && L.strides[1][0] == 1 &&
        L.strides[2][0] == 1 && (size_t)numel * L.itemsize >= STREAM_MIN_BYTES)
        L.row = STREAM_ROWS[g_isa][op][type];
#endif
    L.alpha = alpha;
    g_calls++;
    if (numel > 0) {
        Py_BEGIN_ALLOW_THREADS
        run(&L, (ptrdiff_t)numel);
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 3; k++) PyBuffer_Release(&views[k]);
    Py_RETURN_NONE;
}

static PyObject *py_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "copy() takes 7 arguments (shape, out, out_offset, "
                     "out_strides, src, src_offset, src_strides), got %zd", nargs);
        return NULL;
    }
    /* prepare() reads operands as (buffer, offset, strides) triples after the shape */
    loop_t L;
    Py_buffer views[2];
    int type;
    long long numel = prepare(&L, views, 2, args, COPY_NAMES, &type);
    if (numel < 0) return NULL;
    L.row = COPY_ROWS[g_isa][L.itemsize == 8];
    g_calls++;
    if (numel > 0) {
        Py_BEGIN_ALLOW_THREADS
        run(&L, (ptrdiff_t)numel);
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 2; k++) PyBuffer_Release(&views[k]);
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"binary", (PyCFunction)(void (*)(void))py_binary, METH_FASTCALL,
     "binary(op, shape, out, out_offset, out_strides, a, a_offset, a_strides, b, b_offset, "
     "b_strides, alpha): out = a (op) b elementwise; op is ADD, SUB (a +- alpha * b), MUL or "
     "DIV. Strides and offsets count elements."},
    {"copy", (PyCFunction)(void (*)(void))py_copy, METH_FASTCALL,
     "copy(shape, out, out_offset, out_strides, src, src_offset, src_strides): a strided "
     "copy between buffers of one element type."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._C",
    .m_doc = "Strided elementwise float kernels for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__C(void)
{
    if (init_module_state() < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "ADD", OP_ADD) < 0 ||
        PyModule_AddIntConstant(m, "SUB", OP_SUB) < 0 ||
        PyModule_AddIntConstant(m, "MUL", OP_MUL) < 0 ||
        PyModule_AddIntConstant(m, "DIV", OP_DIV) < 0 ||
        PyModule_AddIntConstant(m, "MAX_NDIM", MAX_NDIM) < 0 ||
        PyModule_AddIntConstant(m, "PARALLEL_MIN_BYTES", PARALLEL_MIN_BYTES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* the thread setting the other modules share (common.h) */
    PyObject *setting = PyCapsule_New(&g_own_thread_setting, THREADS_CAPSULE, NULL);
    const int added = setting ? PyModule_AddObjectRef(m, "thread_setting", setting) : -1;
    Py_XDECREF(setting);
    if (added < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
