/* reftorch_cpu._reduce: reductions over one (coalesced) dim for float32 and float64:
 * sum, mean, var/std, logsumexp, extremes and their indices, prod, p-norms, cumsum.
 *
 * Entry points (called from reftorch_cpu/reductions.py, which turns the op's dims into this
 * geometry or declines):
 *
 *   reduce(op, x, x_offset, (O, I, R), (so, si, sr), out, out_offset, (oso, osi),
 *          idx, idx_offset, (iso, isi), param)
 *       for every (o, i): reduce the R elements x[o*so + i*si + r*sr] into out[o, i]
 *       (and the int64 index of the extreme into idx[o, i]); out or idx may be None when
 *       the op has no such result. param is var/std's correction, or norm's p. SUMSQ is
 *       the sum of squares (mse_loss's, over x - target), summed as norm's p = 2 pass is.
 *   cumsum(x, x_offset, (O, I, R), (so, si, sr), out, out_offset, (oso, osi, osr))
 *   prod_int(x, x_offset, (O, I, R), (so, si, sr), out, out_offset, (oso, osi))
 *       int64 products of a bool / integer x (any of those element types) into out[O, I]
 *
 * Buffers are contiguous float32 ('f') / float64 ('d') arrays (int64 for idx); offsets and
 * strides count elements (negative and zero strides allowed). Everything is checked before
 * memory is touched (every element visited lies inside its buffer).
 *
 * Summation order (fixed: it depends on R and the geometry only, never on the thread count):
 *   - along a row (sr == 1, or neither stride is 1): the row is cut into CHUNKs of 65,536
 *     elements, summed separately and then added in chunk order. In a chunk, the whole
 *     64-byte vectors are summed pairwise (halves split at multiples of a 1,024-element
 *     leaf; a leaf runs 4 interleaved vector accumulators, combined (a0 + a1) + (a2 + a3));
 *     the resulting vector's lanes are added as a tree, then the < 1 vector tail in order.
 *     The vectors are "logical" 64-byte ones (GCC vector extensions: one zmm, two ymm or
 *     four xmm), so every ISA clone adds the same numbers in the same order (which NaN a
 *     NaN sum is, when an input NaN meets one made by inf - inf, depends on the operand
 *     order the compiler picked: IEEE 754 leaves it open, and so do the tests). Each leaf lane
 *     adds 16 elements, then the tree: about as accurate as NumPy's pairwise sum (error ~
 *     eps * (16 + log2 n)), but not its order, so sums and means differ from the reference
 *     in the last bits.
 *   - down columns (si == 1 and sr != 1): each output element adds its R inputs in order,
 *     starting from 0, as NumPy's reduction over an outer axis does.
 *   - cumsum is sequential in both layouts, as NumPy's accumulate is: bit-equal to it.
 * max/min/argmax/argmin/max.dim are exact: the value is the extreme (NaN if any element is
 * NaN), the index the first occurrence (the first NaN if there is one), found by a per-block
 * (BLOCK = 256) maximum pass and a scan of the first block holding it. Their comparisons run
 * on native-width vectors (exact in any order); on x86 the pass uses the max/min
 * instructions, which drop a NaN, and a run in which it saw a NaN is run again with
 * compare-and-blend steps that keep it.
 * var/std: the mean (the sum above / n), then the same sum of (x - mean)^2, / max(n -
 * correction, 0): the reference's two-pass formula. logsumexp: the max, then the sum of
 * exp(x - max) (float32: clone_exp.h's vectorized exp, within 1 ulp; float64: the C
 * library's), log(sum) + max; a row whose max is NaN or +-inf has that max as its result,
 * as the reference computes it.
 *
 * prod: the reference's lane order (reftorch/_ops/reduction.py): lane j of PROD_LANES = 64
 * multiplies elements j, j + 64, ... in order, the lanes fold as a tree (lane j times lane
 * j + w, w = 32, ..., 1), the last R % 64 elements follow in order; R < 64 is index order.
 * Along a row the 64 lanes are 64 bytes' worth of logical vectors (4 float32 or 8 float64
 * chains side by side); down columns each column keeps its 64 lanes. Bit-equal in both
 * layouts. Rows are not cut into chunks, so one row is one thread's work.
 *
 * norm(p): the passes above over a transform of each element: p = 2 sums
 * x * x (the var pass around 0) and takes sqrt, p = 1 sums |x|, whole p in 3..MAX_INT_P
 * sum |x| * ... * |x| (p - 1 roundings; the C library's pow per element ran 3x slower than
 * the reference's SIMD power) and take pow(sum, 1 / p): the reference's formulas, summed in
 * this file's order (other p are declined by the Python side); p = 0
 * counts nonzeros (NaN included) and +-inf take the extreme magnitude: exact.
 *
 * Work is split into a fixed list of items (row x chunk, or column block) handed out by an
 * OpenMP static loop; partial results are combined in item order afterwards. The per-type,
 * per-ISA kernels live in the REDUCE_TEMPLATE part of this file, which isa_clones.h includes
 * six times (float32/float64 x baseline/AVX2/AVX-512F).
 */
#ifndef REDUCE_TEMPLATE

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define BLOCK 256            /* block of the extremes' first-occurrence scan */
#define CHUNK 65536          /* long rows are cut into chunks (a multiple of BLOCK) */
#define COLUMN_BLOCK 256     /* columns per work item in the column layout */
#define ITEM_MIN_ELEMENTS 16384 /* rows are grouped into work items of at least this size */
/* Reductions reading fewer elements run on one thread (a parallel region costs a few us):
 * measured on a 2-core x86-64, float32 sum of 32 Ki elements 1 vs 2 threads about even. */
#define PARALLEL_MIN_ELEMENTS 32768

enum { T_F32, T_F64, N_TYPES };
/* What one pass computes per row: sums of a transform of each element (pairwise, or down
 * columns), the sequential product, or an extreme (of the element or of its magnitude). */
enum { K_SUM, K_SQDEV, K_EXPSUM, K_ABSSUM, K_NONZERO, K_POWSUM, K_PROD, K_MAX, K_MIN,
       K_ABSMAX, K_ABSMIN, N_KINDS };
enum { OP_SUM, OP_MEAN, OP_AMAX, OP_AMIN, OP_MAX_DIM, OP_MIN_DIM, OP_ARGMAX, OP_ARGMIN,
       OP_VAR, OP_STD, OP_LOGSUMEXP, OP_PROD, OP_NORM, OP_SUMSQ, N_OPS };

static int is_extreme(int kind)
{
    return kind == K_MAX || kind == K_MIN || kind == K_ABSMAX || kind == K_ABSMIN;
}

static int is_largest(int kind) { return kind == K_MAX || kind == K_ABSMAX; }

/* The kinds that sum a transform of each element (the enum lists them first). */
static int is_summing(int kind) { return kind <= K_POWSUM; }

/* The product runs in the reference's lane order (see the file comment), which a chunked
 * row would change: its rows are never cut into chunks. */
#define PROD_LANES 64
#define PROD_COLUMNS 32 /* columns whose lanes one column-layout step keeps (8 / 16 KiB) */
static int is_sequential(int kind) { return kind == K_PROD; }

/* Magnitude and power for either element type (one definition for the six clones). */
#define ABS(e) _Generic((e), float: fabsf, double: fabs)(e)
#define POW(e, p) _Generic((e), float: powf, double: pow)((e), (p))
#define MAX_INT_P 8 /* the largest whole p of the general p-norm (p - 1 roundings a term) */

/* The reduction geometry: x's element 0, and (O, I, R) with strides in elements. */
typedef struct {
    const char *x;
    ptrdiff_t O, I, R, so, si, sr;
} geo_t;

/* Row `row` (= o * I + i)'s first element, in elements from x. A division only where O and
 * I both exceed 1: one costs more than summing a short row (the last dim's rows have I = 1). */
static inline ptrdiff_t row_start(const geo_t *g, ptrdiff_t row)
{
    if (g->I == 1) return row * g->so;
    if (g->O == 1) return row * g->si;
    const ptrdiff_t o = row / g->I;
    return o * g->so + (row - o * g->I) * g->si;
}

/* One pass over items [lo, hi): row layout (item = row * nchunks + chunk) writes one partial
 * per item; column layout (item = o * column blocks + block) writes the final value of its
 * columns. `center` holds a per-row value the pass needs (the mean, the shift). */
typedef void (*pass_fn)(const geo_t *g, int kind, const void *center, void *val,
                        int64_t *idx, ptrdiff_t nchunks, ptrdiff_t lo, ptrdiff_t hi);
typedef void (*cumsum_fn)(const geo_t *g, char *out, ptrdiff_t oso, ptrdiff_t osi,
                          ptrdiff_t osr, ptrdiff_t lo, ptrdiff_t hi, int column);

/* ---- the per-type, per-ISA kernels ----------------------------------------------------- */

#define REDUCE_TEMPLATE
#define CLONE_TEMPLATE "reduce.c"
#include "isa_clones.h"
#undef CLONE_TEMPLATE
#undef REDUCE_TEMPLATE

static const pass_fn ROW_PASS[N_ISAS][N_TYPES] = CLONES(row_pass);
static const pass_fn COLUMN_PASS[N_ISAS][N_TYPES] = CLONES(column_pass);
static const cumsum_fn CUMSUM[N_ISAS][N_TYPES] = CLONES(cumsum_items);



static int parallel_ok(ptrdiff_t elements)
{
    return worth_parallel((double)elements, PARALLEL_MIN_ELEMENTS);
}

/* Combine the per-chunk partials of each row in chunk order (sums add; extremes keep the
 * first NaN, else the first strictly better value). */
#define DEFINE_COMBINE(T, SFX)                                                               \
    static void combine_##SFX(int kind, const T *pv, const int64_t *pi, ptrdiff_t nchunks,  \
                              ptrdiff_t nrows, T *val, int64_t *idx, int par)                \
    {                                                                                        \
        _Pragma("omp parallel for schedule(static) if(par)")                                 \
        for (ptrdiff_t row = 0; row < nrows; row++) {                                        \
            const T *p = pv + row * nchunks;                                                 \
            T best = p[0];                                                                   \
            int64_t at = pi ? pi[row * nchunks] : 0;                                         \
            for (ptrdiff_t k = 1; k < nchunks; k++) {                                        \
                T v = p[k];                                                                  \
                if (is_extreme(kind)) {                                                      \
                    int better = is_largest(kind) ? v > best : v < best;                     \
                    if (best == best && (better || v != v)) {                                \
                        best = v;                                                            \
                        if (pi) at = (int64_t)k * CHUNK + pi[row * nchunks + k];            \
                    }                                                                        \
                } else {                                                                     \
                    best += v;                                                               \
                }                                                                            \
            }                                                                                \
            val[row] = best;                                                                 \
            if (idx) idx[row] = at;                                                          \
        }                                                                                    \
    }
DEFINE_COMBINE(float, f32)
DEFINE_COMBINE(double, f64)

/* One pass of `kind` over every row: per-row results in val (and idx). Returns -1 when out
 * of memory. */
static int run_pass(int type, const geo_t *g, int kind, const void *center, void *val,
                    int64_t *idx, int par)
{
    const ptrdiff_t nrows = g->O * g->I;
    const size_t w = type == T_F32 ? 4 : 8;
    if (g->si == 1 && g->sr != 1 && g->I > 1) { /* column layout */
        const ptrdiff_t blocks = (g->I + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
        const pass_fn fn = COLUMN_PASS[g_isa][type];
        FOR_GROUPS(g->O * blocks, 1, par, fn(g, kind, center, val, idx, 0, lo, hi));
        return 0;
    }
    const ptrdiff_t nchunks = is_sequential(kind) ? 1 : (g->R + CHUNK - 1) / CHUNK;
    const ptrdiff_t items = nrows * nchunks;
    const ptrdiff_t per_item = g->R < CHUNK || is_sequential(kind) ? g->R : CHUNK;
    const ptrdiff_t group = per_item >= ITEM_MIN_ELEMENTS ? 1 : ITEM_MIN_ELEMENTS / per_item;
    const pass_fn fn = ROW_PASS[g_isa][type];
    if (nchunks == 1) {
        FOR_GROUPS(items, group, par, fn(g, kind, center, val, idx, 1, lo, hi));
        return 0;
    }
    void *pv = malloc((size_t)items * w);
    int64_t *pi = idx ? malloc((size_t)items * sizeof(int64_t)) : NULL;
    if (pv == NULL || (idx && pi == NULL)) {
        free(pv), free(pi);
        return -1;
    }
    FOR_GROUPS(items, group, par, fn(g, kind, center, pv, pi, nchunks, lo, hi));
    /* (a few partials per row: threads pay off only for many rows) */
    const int combine_par = par && parallel_ok(items);
    if (type == T_F32)
        combine_f32(kind, pv, pi, nchunks, nrows, val, idx, combine_par);
    else
        combine_f64(kind, pv, pi, nchunks, nrows, val, idx, combine_par);
    free(pv), free(pi);
    return 0;
}

/* The pass of the p-norm: p = 2 is the sum of squares (x - 0)^2 = x * x, as the
 * reference's |x| * |x|; p = 0 counts nonzeros (NaN included); +-inf the largest and smallest
 * magnitude; any other p sums |x| ** p. */
static int norm_kind(double p)
{
    if (p == 2) return K_SQDEV;
    if (p == 1) return K_ABSSUM;
    if (p == 0) return K_NONZERO;
    if (p == INFINITY) return K_ABSMAX;
    if (p == -INFINITY) return K_ABSMIN;
    return K_POWSUM;
}

/* The op's result per row from its passes, written to out/idx (strided over O x I). */
#define DEFINE_REDUCE(T, SFX, LOG, SQRT)                                                     \
    static int reduce_##SFX(int op, const geo_t *g, char *out_, ptrdiff_t oso,              \
                            ptrdiff_t osi, int64_t *oidx, ptrdiff_t iso, ptrdiff_t isi,      \
                            double param)                                                    \
    {                                                                                        \
        const ptrdiff_t nrows = g->O * g->I, R = g->R;                                       \
        const int type = sizeof(T) == 4 ? T_F32 : T_F64;                                     \
        const int par = parallel_ok(nrows * R);                                              \
        T *out = (T *)out_, *val = malloc((size_t)nrows * sizeof(T));                        \
        T *center = NULL, *shift = NULL;                                                     \
        int64_t *idx = NULL;                                                                 \
        int rc = -1;                                                                         \
        const int indexed = op == OP_MAX_DIM || op == OP_MIN_DIM || op == OP_ARGMAX ||       \
                            op == OP_ARGMIN;                                                 \
        if (val == NULL) goto done;                                                          \
        if (indexed && (idx = malloc((size_t)nrows * sizeof(int64_t))) == NULL) goto done;   \
        switch (op) {                                                                        \
        case OP_SUM: case OP_MEAN:                                                           \
            if (run_pass(type, g, K_SUM, NULL, val, NULL, par) < 0) goto done;               \
            break;                                                                           \
        case OP_AMAX: case OP_MAX_DIM: case OP_ARGMAX:                                       \
            if (run_pass(type, g, K_MAX, NULL, val, idx, par) < 0) goto done;                \
            break;                                                                           \
        case OP_AMIN: case OP_MIN_DIM: case OP_ARGMIN:                                       \
            if (run_pass(type, g, K_MIN, NULL, val, idx, par) < 0) goto done;                \
            break;                                                                           \
        case OP_VAR: case OP_STD:                                                            \
            if ((center = malloc((size_t)nrows * sizeof(T))) == NULL ||                      \
                run_pass(type, g, K_SUM, NULL, center, NULL, par) < 0) goto done;            \
            for (ptrdiff_t r = 0; r < nrows; r++) center[r] = center[r] / (T)R;              \
            if (run_pass(type, g, K_SQDEV, center, val, NULL, par) < 0) goto done;           \
            break;                                                                           \
        case OP_LOGSUMEXP:                                                                   \
            if ((center = malloc((size_t)nrows * sizeof(T))) == NULL ||                      \
                run_pass(type, g, K_MAX, NULL, center, NULL, par) < 0) goto done;            \
            /* exp(x - max) <= 1 cannot overflow. A row whose max is NaN or +-inf has that  \
             * max as its result (the reference's sum is NaN, inf or 0 there): its pass      \
             * runs with 0 and the value is dropped below */                                 \
            if ((shift = malloc((size_t)nrows * sizeof(T))) == NULL) goto done;              \
            for (ptrdiff_t r = 0; r < nrows; r++)                                            \
                shift[r] = isfinite(center[r]) ? center[r] : 0;                              \
            if (run_pass(type, g, K_EXPSUM, shift, val, NULL, par) < 0) goto done;           \
            break;                                                                           \
        case OP_PROD:                                                                        \
            if (run_pass(type, g, K_PROD, NULL, val, NULL, par) < 0) goto done;              \
            break;                                                                           \
        case OP_SUMSQ: /* (x - 0)^2 is x * x exactly: the sum of squares, no sqrt */         \
            if (run_pass(type, g, K_SQDEV, NULL, val, NULL, par) < 0) goto done;             \
            break;                                                                           \
        case OP_NORM: /* the general p's pass reads p (as T, as NumPy's power does) as the   \
                       * per-row value */                                                    \
            if (norm_kind(param) == K_POWSUM) {                                              \
                if ((center = malloc((size_t)nrows * sizeof(T))) == NULL) goto done;         \
                for (ptrdiff_t r = 0; r < nrows; r++) center[r] = (T)param;                  \
            }                                                                                \
            if (run_pass(type, g, norm_kind(param), center, val, NULL, par) < 0) goto done;  \
            break;                                                                           \
        }                                                                                    \
        const double dof = (double)R - param > 0 ? (double)R - param : 0.0;                  \
        for (ptrdiff_t o = 0; o < g->O; o++) {                                               \
            for (ptrdiff_t i = 0; i < g->I; i++) {                                           \
                const ptrdiff_t row = o * g->I + i;                                          \
                T v = val[row];                                                              \
                switch (op) {                                                                \
                case OP_MEAN: v = v / (T)R; break;                                           \
                case OP_VAR: v = v / (T)dof; break;                                          \
                case OP_STD: v = SQRT(v / (T)dof); break;                                    \
                case OP_NORM: /* the reference's sqrt(sum) and sum ** (1 / p) */             \
                    if (norm_kind(param) == K_SQDEV) v = SQRT(v);                            \
                    if (norm_kind(param) == K_POWSUM) v = POW(v, (T)(1.0 / param));          \
                    break;                                                                   \
                case OP_LOGSUMEXP:                                                           \
                    v = isfinite(center[row]) ? LOG(v) + center[row] : center[row];          \
                    break;                                                                   \
                case OP_MAX_DIM: case OP_MIN_DIM: /* the first occurrence itself */          \
                    v = *(const T *)(g->x + (o * g->so + i * g->si + idx[row] * g->sr) *     \
                                                (ptrdiff_t)sizeof(T));                       \
                    break;                                                                   \
                }                                                                            \
                if (out) out[o * oso + i * osi] = v;                                         \
                if (oidx) oidx[o * iso + i * isi] = idx[row];                                \
            }                                                                                \
        }                                                                                    \
        rc = 0;                                                                              \
    done:                                                                                    \
        free(val), free(center), free(shift), free(idx);                                     \
        return rc;                                                                           \
    }
DEFINE_REDUCE(float, f32, logf, sqrtf)
DEFINE_REDUCE(double, f64, log, sqrt)

/* ---- argument checking ------------------------------------------------------------------ */

/* The element kind of an integer product's input (bool and every integer type; int64 is
 * also the output's kind), or -1 with TypeError set. */
enum { E_BOOL, E_U8, E_I8, E_I16, E_I32, E_I64, N_INT_KINDS };

static int int_kind(const Py_buffer *view, const char *what)
{
    const int c = format_char(view);
    const Py_ssize_t size = view->itemsize;
    if (c == '?' && size == 1) return E_BOOL;
    if (c == 'B' && size == 1) return E_U8;
    if (c == 'b' && size == 1) return E_I8;
    if (c == 'h' && size == 2) return E_I16;
    if ((c == 'i' || c == 'l') && size == 4) return E_I32;
    if ((c == 'l' || c == 'q') && size == 8) return E_I64;
    PyErr_Format(PyExc_TypeError, "%s must hold bool or integer elements (buffer format '%s', "
                 "itemsize %zd)", what, view->format ? view->format : "B", size);
    return -1;
}

/* One operand held in `h`: (buffer, offset, strides) over `shape`; `kind` is the element
 * kind it must have (-1: float32 or float64, returned; -2: any kind of int_kind). Sets *ptr
 * to the view's element 0. */
static int operand(held_t *h, PyObject *buf, PyObject *off, PyObject *strides_obj, int ndim,
                   const long long *shape, int writable, int kind, const char *what,
                   char **ptr, long long *strides)
{
    const Py_buffer *view = hold_buffer(h, buf, writable, what);
    if (view == NULL) return -1;
    int k = kind == -2 ? int_kind(view, what) : buffer_kind(view, what);
    if (k < 0) return -1;
    if ((kind >= 0 && k != kind) || (kind == -1 && k == KIND_I64)) {
        PyErr_Format(PyExc_TypeError, "%s has the wrong element type", what);
        return -1;
    }
    if (parse_view(view, what, off, strides_obj, ndim, shape, strides, ptr) < 0) return -1;
    return k;
}

static int parse_shape3(PyObject *obj, long long *shape)
{
    if (parse_dims(obj, "shape", 3, shape, NULL) < 0) return -1;
    long long numel = 1;
    for (int d = 0; d < 3; d++) {
        if (shape[d] < 0 || __builtin_mul_overflow(numel, shape[d], &numel) ||
            numel > PTRDIFF_MAX / 16) {
            PyErr_SetString(PyExc_ValueError, "shape must be 3 sizes >= 0 of a sane total");
            return -1;
        }
    }
    return 0;
}

/* The arguments prod_int and cumsum share: x (args[0..3]: buffer, offset, (O, I, R),
 * strides) of kind x_kind (operand's codes) and out (args[4..6]: buffer, offset, strides)
 * over the first out_ndim dims, of kind out_kind (-1: x's), both held in h; x's geometry
 * into *g. Returns x's kind, or -1 with an exception set. */
static int parse_x_and_out(held_t *h, PyObject *const *args, int x_kind, int out_ndim,
                           int out_kind, geo_t *g, char **out, long long *os)
{
    long long shape[3], xs[3];
    char *x;
    if (parse_shape3(args[2], shape) < 0) return -1;
    const int kind = operand(h, args[0], args[1], args[3], 3, shape, 0, x_kind, "x", &x, xs);
    if (kind < 0 || operand(h, args[4], args[5], args[6], out_ndim, shape, 1,
                            out_kind == -1 ? kind : out_kind, "out", out, os) < 0)
        return -1;
    const geo_t geometry = {x, shape[0], shape[1], shape[2], xs[0], xs[1], xs[2]};
    *g = geometry;
    return kind;
}

/* ---- entry points ----------------------------------------------------------------------- */

static PyObject *py_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 12) {
        PyErr_Format(PyExc_TypeError, "reduce() takes 12 arguments (op, x, x_offset, shape, "
                     "x_strides, out, out_offset, out_strides, idx, idx_offset, idx_strides, "
                     "param), got %zd", nargs);
        return NULL;
    }
    long op = PyLong_Check(args[0]) ? PyLong_AsLong(args[0]) : -1;
    if (op < 0 || op >= N_OPS) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "unknown reduction op code");
        return NULL;
    }
    double param = PyFloat_AsDouble(args[11]);
    if (param == -1.0 && PyErr_Occurred()) return NULL;
    if (op == OP_NORM && norm_kind(param) == K_POWSUM &&
        !(param == floor(param) && param >= 3 && param <= MAX_INT_P)) {
        PyErr_Format(PyExc_ValueError, "norm's p must be 0, 1, 2, +-inf or a whole number "
                     "from 3 to %d", MAX_INT_P);
        return NULL;
    }
    long long shape[3], xs[3], os[2] = {0, 0}, is[2] = {0, 0};
    if (parse_shape3(args[3], shape) < 0) return NULL;
    if (shape[2] < 1) {
        PyErr_SetString(PyExc_ValueError, "reduce() needs a reduced size R >= 1");
        return NULL;
    }
    const int want_out = op != OP_ARGMAX && op != OP_ARGMIN;
    const int want_idx = op == OP_MAX_DIM || op == OP_MIN_DIM || op == OP_ARGMAX ||
                         op == OP_ARGMIN;
    if ((args[5] == Py_None) == want_out || (args[8] == Py_None) == want_idx) {
        PyErr_SetString(PyExc_TypeError, "reduce(): out / idx given where the op has none "
                        "or missing where it has one");
        return NULL;
    }
    held_t h = {.held = 0};
    char *x, *out = NULL, *idx = NULL;
    PyObject *result = NULL;
    const int type = operand(&h, args[1], args[2], args[4], 3, shape, 0, -1, "x", &x, xs);
    if (type < 0 ||
        (want_out && operand(&h, args[5], args[6], args[7], 2, shape, 1, type, "out", &out,
                             os) < 0) ||
        (want_idx && operand(&h, args[8], args[9], args[10], 2, shape, 1, KIND_I64, "idx",
                             &idx, is) < 0))
        goto done;
    geo_t g = {x, shape[0], shape[1], shape[2], xs[0], xs[1], xs[2]};
    int rc = 0;
    g_calls++;
    if (g.O * g.I > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = type == T_F32 ? reduce_f32((int)op, &g, out, os[0], os[1], (int64_t *)idx, is[0],
                                        is[1], param)
                           : reduce_f64((int)op, &g, out, os[0], os[1], (int64_t *)idx, is[0],
                                        is[1], param);
        Py_END_ALLOW_THREADS
    }
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release_held(&h);
    return result;
}

/* Integer products: int64 wrapping multiplication (in uint64: no signed overflow) is
 * associative and commutative, so any order gives the reference's bits (NumPy converts to
 * int64 first, then multiplies, wrapping the same way); each row still runs in order. */
#define DEFINE_INT_PRODUCTS(E, SFX)                                                          \
    static void int_products_##SFX(const geo_t *g, int64_t *out, ptrdiff_t oso,             \
                                   ptrdiff_t osi, ptrdiff_t lo, ptrdiff_t hi)                \
    {                                                                                        \
        for (ptrdiff_t row = lo; row < hi; row++) {                                          \
            const ptrdiff_t o = row / g->I, i = row % g->I;                                  \
            const E *x = (const E *)g->x + o * g->so + i * g->si;                            \
            uint64_t acc = 1;                                                                \
            for (ptrdiff_t r = 0; r < g->R; r++) acc *= (uint64_t)(int64_t)x[r * g->sr];     \
            out[o * oso + i * osi] = (int64_t)acc; /* GCC: modulo 2^64, as NumPy wraps */    \
        }                                                                                    \
    }
DEFINE_INT_PRODUCTS(uint8_t, bool) /* a bool byte is 0 or 1 */
DEFINE_INT_PRODUCTS(uint8_t, u8)
DEFINE_INT_PRODUCTS(int8_t, i8)
DEFINE_INT_PRODUCTS(int16_t, i16)
DEFINE_INT_PRODUCTS(int32_t, i32)
DEFINE_INT_PRODUCTS(int64_t, i64)

typedef void (*int_products_fn)(const geo_t *, int64_t *, ptrdiff_t, ptrdiff_t, ptrdiff_t,
                                ptrdiff_t);
static const int_products_fn INT_PRODUCTS[N_INT_KINDS] = {
    int_products_bool, int_products_u8, int_products_i8, int_products_i16, int_products_i32,
    int_products_i64};

static PyObject *py_prod_int(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "prod_int() takes 7 arguments (x, x_offset, shape, "
                     "x_strides, out, out_offset, out_strides), got %zd", nargs);
        return NULL;
    }
    long long os[2];
    held_t h = {.held = 0};
    geo_t g;
    char *out;
    PyObject *result = NULL;
    const int kind = parse_x_and_out(&h, args, -2, 2, KIND_I64, &g, &out, os);
    if (kind < 0) goto done;
    const ptrdiff_t rows = g.O * g.I;
    const int par = parallel_ok(rows * g.R);
    const ptrdiff_t group = g.R >= ITEM_MIN_ELEMENTS ? 1 : ITEM_MIN_ELEMENTS / (g.R ? g.R : 1);
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    FOR_GROUPS(rows, group, par, INT_PRODUCTS[kind](&g, (int64_t *)out, os[0], os[1], lo, hi));
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release_held(&h);
    return result;
}

static PyObject *py_cumsum(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "cumsum() takes 7 arguments (x, x_offset, shape, "
                     "x_strides, out, out_offset, out_strides), got %zd", nargs);
        return NULL;
    }
    long long os[3];
    held_t h = {.held = 0};
    geo_t g;
    char *out;
    PyObject *result = NULL;
    const int type = parse_x_and_out(&h, args, -1, 3, -1, &g, &out, os);
    if (type < 0) goto done;
    g_calls++;
    const ptrdiff_t numel = g.O * g.I * g.R;
    if (numel > 0) {
        const int column = g.si == 1 && os[1] == 1 && g.I > 1 && !(g.sr == 1 && os[2] == 1);
        const ptrdiff_t items = column ? g.O * ((g.I + COLUMN_BLOCK - 1) / COLUMN_BLOCK)
                                       : g.O * g.I;
        const ptrdiff_t per_item = column ? g.R * COLUMN_BLOCK : g.R;
        const ptrdiff_t group = per_item >= ITEM_MIN_ELEMENTS ? 1
                                                              : ITEM_MIN_ELEMENTS / per_item;
        const int par = parallel_ok(numel);
        const cumsum_fn fn = CUMSUM[g_isa][type];
        Py_BEGIN_ALLOW_THREADS
        FOR_GROUPS(items, group, par, fn(&g, out, os[0], os[1], os[2], lo, hi, column));
        Py_END_ALLOW_THREADS
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release_held(&h);
    return result;
}

static PyMethodDef METHODS[] = {
    {"reduce", (PyCFunction)(void (*)(void))py_reduce, METH_FASTCALL,
     "reduce(op, x, x_offset, (O, I, R), x_strides, out, out_offset, out_strides, idx, "
     "idx_offset, idx_strides, param): reduce x's R axis into out[O, I] (and idx)."},
    {"prod_int", (PyCFunction)(void (*)(void))py_prod_int, METH_FASTCALL,
     "prod_int(x, x_offset, (O, I, R), x_strides, out, out_offset, out_strides): int64 "
     "(wrapping) products of bool / integer x along R into out[O, I]."},
    {"cumsum", (PyCFunction)(void (*)(void))py_cumsum, METH_FASTCALL,
     "cumsum(x, x_offset, (O, I, R), x_strides, out, out_offset, out_strides): running sums "
     "along R."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._reduce",
    .m_doc = "Reductions (sum, mean, var, extremes, logsumexp, cumsum) for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__reduce(void)
{
    if (init_module_state() < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_INT_P", MAX_INT_P) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static const char *const names[N_OPS] = {"SUM", "MEAN", "AMAX", "AMIN", "MAX_DIM",
                                             "MIN_DIM", "ARGMAX", "ARGMIN", "VAR", "STD",
                                             "LOGSUMEXP", "PROD", "NORM", "SUMSQ"};
    for (int i = 0; i < N_OPS; i++) {
        if (PyModule_AddIntConstant(m, names[i], i) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}

#else /* REDUCE_TEMPLATE: kernels for element type T and one instruction set ------------- */

/* The per-type macros besides isa_clones.h's (#undef'd at the end). */
#if IS_F32
#define ITYPE int32_t
#define EXP expf
#else
#define ITYPE int64_t
#define EXP exp
#endif

/* Row kernels work on 64-byte vectors (GCC vector extensions: one zmm register, two ymm or
 * four xmm, so every clone adds in the same lanes and gives the same bits). */
#define VL ((ptrdiff_t)(64 / sizeof(T)))
typedef T NAME(vec) __attribute__((vector_size(64)));
typedef ITYPE NAME(ivec) __attribute__((vector_size(64)));
#define VEC NAME(vec)
#define IVEC NAME(ivec)
#define LEAF_VECTORS (1024 / VL) /* a pairwise leaf: 1024 elements in 4 vector accumulators */
/* Comparisons run on native vectors (VBYTES: 16 baseline, 32 AVX2, 64 AVX-512F; GCC
 * splits a 64-byte compare into scalar code without AVX-512). Extremes are exact, so the
 * width does not change their results. */
typedef T NAME(nvec) __attribute__((vector_size(VBYTES)));
typedef ITYPE NAME(nivec) __attribute__((vector_size(VBYTES)));
#define NVEC NAME(nvec)
#define NIVEC NAME(nivec)
#define NL ((ptrdiff_t)(VBYTES / sizeof(T)))
#define NATIVE_PIECES (64 / VBYTES) /* native vectors in a logical one */
#define BLEND(m, a, b) ((NVEC)(((NIVEC)(a) & (m)) | ((NIVEC)(b) & ~(m))))
/* |v| of every lane: the sign bit cleared (as fabs, NaN stays NaN). */
#define ABS_BITS ((ITYPE)((((uint64_t)1) << (8 * sizeof(T) - 1)) - 1))
#define NABS(v) ((NVEC)((NIVEC)(v) & ((NIVEC){0} + ABS_BITS)))

/* Native vector i of a run with stride s (an unaligned load, or a gather by lanes). */
#define NLOAD(v, x, i, s)                                                                    \
    do {                                                                                     \
        if ((s) == 1) {                                                                      \
            memcpy(&(v), (x) + (i) * NL, sizeof(NVEC));                                      \
        } else {                                                                             \
            for (ptrdiff_t j_ = 0; j_ < NL; j_++) (v)[j_] = (x)[((i) * NL + j_) * (s)];     \
        }                                                                                    \
    } while (0)

/* Lane trees, on registers and without branches: the upper half of a vector is folded onto
 * its lower half (lane j with lane j + half) until one lane is left. The halves are taken by
 * shuffles (one instruction each; a trip through memory stalled store forwarding). */
#define LOW_HALF_16(v) __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)
#define HIGH_HALF_16(v) __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)
#define LOW_HALF_8(v) __builtin_shufflevector(v, v, 0, 1, 2, 3)
#define HIGH_HALF_8(v) __builtin_shufflevector(v, v, 4, 5, 6, 7)
#define LOW_HALF_4(v) __builtin_shufflevector(v, v, 0, 1)
#define HIGH_HALF_4(v) __builtin_shufflevector(v, v, 2, 3)
#define LOW_HALF_2(v) __builtin_shufflevector(v, v, 0)
#define HIGH_HALF_2(v) __builtin_shufflevector(v, v, 1)
/* lanes j + (lanes j + N/2) of an N-lane v */
#define SUM_HALVES(v, N)                                                                     \
    ({                                                                                       \
        const __typeof__(v) v_ = (v);                                                        \
        LOW_HALF_##N(v_) + HIGH_HALF_##N(v_);                                                \
    })
/* lane j + N/2 where it beats lane j (see the extremes below; with nan, NaN beats every
 * number), else lane j */
#define EXTREME_HALVES(v, N, largest, nan)                                                   \
    ({                                                                                       \
        const __typeof__(v) v_ = (v);                                                        \
        const __typeof__(LOW_HALF_##N(v_)) lo_ = LOW_HALF_##N(v_), hi_ = HIGH_HALF_##N(v_);  \
        const __typeof__(lo_ < hi_) beats_ = (largest) ? hi_ > lo_ : hi_ < lo_;              \
        const __typeof__(beats_) m_ = (nan) ? beats_ | (hi_ != hi_) : beats_;                \
        (__typeof__(lo_))(((__typeof__(m_))hi_ & m_) | ((__typeof__(m_))lo_ & ~m_));        \
    })
#define SUM_TREE_2(v) SUM_HALVES(v, 2)[0]
#define SUM_TREE_4(v) SUM_TREE_2(SUM_HALVES(v, 4))
#define SUM_TREE_8(v) SUM_TREE_4(SUM_HALVES(v, 8))
#define SUM_TREE_16(v) SUM_TREE_8(SUM_HALVES(v, 16))
#define EXTREME_TREE_2(v, l, nan) EXTREME_HALVES(v, 2, l, nan)[0]
#define EXTREME_TREE_4(v, l, nan) EXTREME_TREE_2(EXTREME_HALVES(v, 4, l, nan), l, nan)
#define EXTREME_TREE_8(v, l, nan) EXTREME_TREE_4(EXTREME_HALVES(v, 8, l, nan), l, nan)
#define EXTREME_TREE_16(v, l, nan) EXTREME_TREE_8(EXTREME_HALVES(v, 16, l, nan), l, nan)
#define SUM_TREE(N, v) SUM_TREE_(N, v)                  /* (N expanded first) */
#define SUM_TREE_(N, v) SUM_TREE_##N(v)
#define EXTREME_TREE(N, v, l, nan) EXTREME_TREE_(N, v, l, nan)
#define EXTREME_TREE_(N, v, l, nan) EXTREME_TREE_##N(v, l, nan)
/* lanes of VEC and of NVEC, as literals for the trees */
#if IS_F32
#define VEC_LANES 16
#define NATIVE_LANES_64 16
#define NATIVE_LANES_32 8
#define NATIVE_LANES_16 4
#else
#define VEC_LANES 8
#define NATIVE_LANES_64 8
#define NATIVE_LANES_32 4
#define NATIVE_LANES_16 2
#endif
#if VBYTES == 64
#define NATIVE_LANES NATIVE_LANES_64
#elif VBYTES == 32
#define NATIVE_LANES NATIVE_LANES_32
#else
#define NATIVE_LANES NATIVE_LANES_16
#endif

/* The sum of a 64-byte vector's lanes as a tree. */
ISA_ATTR static inline T NAME(lanes_sum)(VEC v) { return SUM_TREE(VEC_LANES, v); }

/* The extreme of a native vector's lanes as a tree (exact in any order); `nan`: whether a
 * lane may be NaN (the fast pass has none, and needs no NaN test). */
ISA_ATTR static inline T NAME(lanes_extreme)(NVEC v, int largest, int nan)
{
    return nan ? EXTREME_TREE(NATIVE_LANES, v, largest, 1)
               : EXTREME_TREE(NATIVE_LANES, v, largest, 0);
}

#if IS_F32
#include "clone_exp.h"
#define NATIVE_EXP(v) NAME(exp_lanes)(&(v))
#define SCALAR_EXP(e) NAME(scalar_exp)(e)
ISA_ATTR static inline T NAME(scalar_exp)(T e)
{
    NVEC v = (NVEC){0} + e;
    NAME(exp_lanes)(&v);
    return v[0];
}
#else
#define NATIVE_EXP(v) for (ptrdiff_t j_ = 0; j_ < NL; j_++) (v)[j_] = EXP((v)[j_])
#define SCALAR_EXP(e) EXP(e)
#endif

/* m ** p for a whole p >= 1 as m * m * ... * m in order (p - 1 roundings): the general
 * p-norm's term. */
ISA_ATTR static inline T NAME(ipow)(T m, int p)
{
    T r = m;
    for (int k = 1; k < p; k++) r *= m;
    return r;
}

/* Pairwise sum of XFORM(v) over nv vectors of stride STRIDE (the leaf: 4 interleaved
 * accumulators, combined (a0 + a1) + (a2 + a3); above it, halves split at multiples of the
 * leaf), into *out. */
#define DEFINE_PAIRWISE_VECTORS(VFN, FN, STRIDE)                                             \
    ISA_ATTR static void NAME(VFN)(const T *x, ptrdiff_t nv, ptrdiff_t s, T c, VEC *out)    \
    {                                                                                        \
        (void)s;                                                                             \
        const ptrdiff_t leaves = nv / LEAF_VECTORS;                                          \
        if (leaves > 1 && leaves * LEAF_VECTORS == nv && (leaves & (leaves - 1)) == 0) {     \
            /* 2^k whole leaves (a whole chunk): the same tree, built as the leaves go by  \
             * (leaf k closes a subtree of each size that divides k + 1), without calls */ \
            VEC open[64]; /* open subtrees: at most log2(leaves) + 1 of them */              \
            int top = 0;                                                                     \
            for (ptrdiff_t k = 0; k < leaves; k++) {                                         \
                VEC v;                                                                       \
                NAME(FN##_leaf)(x + k * LEAF_VECTORS * VL * (STRIDE), LEAF_VECTORS, STRIDE,  \
                                c, &v);                                                      \
                for (ptrdiff_t m = k + 1; (m & 1) == 0; m >>= 1) v = open[--top] + v;        \
                open[top++] = v;                                                             \
            }                                                                                \
            *out = open[0];                                                                  \
            return;                                                                          \
        }                                                                                    \
        if (nv > LEAF_VECTORS) {                                                             \
            ptrdiff_t half = nv / 2 / LEAF_VECTORS * LEAF_VECTORS;                           \
            if (half == 0) half = LEAF_VECTORS;                                              \
            VEC rest;                                                                        \
            NAME(VFN)(x, half, STRIDE, c, out);                                              \
            NAME(VFN)(x + half * VL * (STRIDE), nv - half, STRIDE, c, &rest);                \
            *out += rest;                                                                    \
            return;                                                                          \
        }                                                                                    \
        NAME(FN##_leaf)(x, nv, STRIDE, c, out);                                              \
    }

/* The pairwise sum above, then the row's sum: the vectors' lanes added as a tree, then the
 * < VL tail elements in order. */
#define DEFINE_PAIRWISE(FN, XFORM, SCALAR)                                                   \
    ISA_ATTR static inline void NAME(FN##_leaf)(const T *x, ptrdiff_t nv, ptrdiff_t s, T c, \
                                                VEC *out);                                   \
    DEFINE_PAIRWISE_VECTORS(FN##_vectors, FN, s)                                             \
    /* (the same with the unit stride a constant: with a variable one, GCC computes the    \
     * strided loads' 64 addresses before every leaf, even where the stride is 1; a         \
     * 4M-element float32 sum took 100 us on 2 threads instead of 80) */                    \
    DEFINE_PAIRWISE_VECTORS(FN##_unit_vectors, FN, 1)                                        \
    /* (inline: a row of one leaf, the common short row, makes no call) The accumulators  \
     * are the logical vectors' native pieces (NATIVE_PIECES each), each its own register:  \
     * the same lanes and order in every clone, without the spills GCC makes of an array of \
     * 64-byte vectors where a register is narrower (AVX2 sums ran 2.4x slower). */         \
    ISA_ATTR static inline void NAME(FN##_leaf)(const T *x, ptrdiff_t nv, ptrdiff_t s, T c, \
                                                VEC *out)                                    \
    {                                                                                        \
        enum { PN = NATIVE_PIECES };                                                         \
        const NVEC cv = (NVEC){0} + c;                                                       \
        NVEC a[4 * PN], v = {0};                                                             \
        (void)cv;                                                                            \
        for (int k = 0; k < 4 * PN; k++) a[k] = (NVEC){0};                                   \
        ptrdiff_t i = 0;                                                                     \
        for (; i + 4 <= nv; i += 4)                                                          \
            _Pragma("GCC unroll 16")                                                         \
            for (int k = 0; k < 4 * PN; k++) {                                               \
                NLOAD(v, x, i * PN + k, s);                                                  \
                XFORM;                                                                       \
                a[k] += v;                                                                   \
            }                                                                                \
        for (int k = 0; k < 3 && i < nv; i++, k++) /* (the last nv % 4 vectors) */        \
            for (int q = 0; q < PN; q++) {                                                   \
                NLOAD(v, x, i * PN + q, s);                                                  \
                XFORM;                                                                       \
                a[k * PN + q] += v;                                                          \
            }                                                                                \
        for (int q = 0; q < PN; q++) {                                                       \
            const NVEC piece = (a[q] + a[PN + q]) + (a[2 * PN + q] + a[3 * PN + q]);         \
            memcpy((char *)out + q * VBYTES, &piece, VBYTES);                                \
        }                                                                                    \
    }                                                                                        \
    /* total plus the row's last n % VL terms, in order */                                   \
    ISA_ATTR static inline T NAME(FN##_tail)(const T *x, ptrdiff_t n, ptrdiff_t s, T c,      \
                                             T total)                                        \
    {                                                                                        \
        for (ptrdiff_t i = n / VL * VL; i < n; i++) {                                        \
            const T e = x[i * s];                                                            \
            total += SCALAR;                                                                 \
        }                                                                                    \
        return total;                                                                        \
    }                                                                                        \
    ISA_ATTR static T NAME(FN)(const T *x, ptrdiff_t n, ptrdiff_t s, T c)                   \
    {                                                                                        \
        const ptrdiff_t nv = n / VL;                                                         \
        T total = 0;                                                                         \
        if (nv > 0) {                                                                        \
            VEC sum;                                                                         \
            if (s == 1)                                                                      \
                NAME(FN##_unit_vectors)(x, nv, 1, c, &sum);                                  \
            else                                                                             \
                NAME(FN##_vectors)(x, nv, s, c, &sum);                                       \
            total = NAME(lanes_sum)(sum);                                                   \
        }                                                                                    \
        return NAME(FN##_tail)(x, n, s, c, total);                                           \
    }

/* (the transforms act on a native piece v, with cv the piece of c's) */
DEFINE_PAIRWISE(sum, (void)0, e)
DEFINE_PAIRWISE(sqdev, v = (v - cv) * (v - cv), (e - c) * (e - c))
DEFINE_PAIRWISE(expsum, v = v - cv; NATIVE_EXP(v), SCALAR_EXP(e - c))
DEFINE_PAIRWISE(abssum, v = NABS(v), ABS(e))
DEFINE_PAIRWISE(nonzero, v = (NVEC)((v != (NVEC){0}) & (NIVEC)((NVEC){0} + 1)), (T)(e != 0))
DEFINE_PAIRWISE(powsum, v = NABS(v); NVEC m_ = v; for (int k_ = 1; k_ < (int)c; k_++) v *= m_,
                NAME(ipow)(ABS(e), (int)c))

/* Extremes: `v` beats `best` when strictly greater (smaller), or when v is NaN: NaN, once
 * held, is never replaced (nothing compares greater than it, and v != v fails for numbers).
 * FN##_run gives the extreme of VX / SX of each element (the element, or its magnitude for
 * the inf-norms). The first occurrence (plain extremes only) is then the first element equal
 * to the result (or the first NaN): the value pass keeps each BLOCK's extreme, the scan
 * looks only inside the first block whose extreme equals the result. */
/* The better of v and a, lane-wise: exactly, v when it is strictly greater (smaller) or NaN;
 * and the x86 max/min instructions' way, the same for numbers but a for a NaN v (one
 * instruction instead of two compares and a blend). NAN_BITS(u, v) is nonzero when a lane of
 * u or v is NaN (one unordered compare for both), so a run on the max/min instructions knows
 * whether it lost a NaN. Elsewhere the fast step is the exact one. */
#define LARGER(v, a) BLEND(((v) > (a)) | ((v) != (v)), v, a)
#define SMALLER(v, a) BLEND(((v) < (a)) | ((v) != (v)), v, a)
#define NO_NANS(u, v) 0u
#if defined(__x86_64__) && defined(__GNUC__)
#if VBYTES == 64
#define X86_(op, v, a) (IS_F32 ? (NVEC)_mm512_##op##_ps((__m512)(v), (__m512)(a))             \
                               : (NVEC)_mm512_##op##_pd((__m512d)(v), (__m512d)(a)))
#define NAN_BITS(u, v)                                                                       \
    (IS_F32 ? (unsigned)_mm512_cmp_ps_mask((__m512)(u), (__m512)(v), _CMP_UNORD_Q)           \
            : (unsigned)_mm512_cmp_pd_mask((__m512d)(u), (__m512d)(v), _CMP_UNORD_Q))
#elif VBYTES == 32
#define X86_(op, v, a) (IS_F32 ? (NVEC)_mm256_##op##_ps((__m256)(v), (__m256)(a))             \
                               : (NVEC)_mm256_##op##_pd((__m256d)(v), (__m256d)(a)))
#define NAN_BITS(u, v)                                                                       \
    (IS_F32 ? (unsigned)_mm256_movemask_ps(_mm256_cmp_ps((__m256)(u), (__m256)(v), _CMP_UNORD_Q)) \
            : (unsigned)_mm256_movemask_pd(_mm256_cmp_pd((__m256d)(u), (__m256d)(v), _CMP_UNORD_Q)))
#else
#define X86_(op, v, a) (IS_F32 ? (NVEC)_mm_##op##_ps((__m128)(v), (__m128)(a))                 \
                               : (NVEC)_mm_##op##_pd((__m128d)(v), (__m128d)(a)))
#define NAN_BITS(u, v)                                                                       \
    (IS_F32 ? (unsigned)_mm_movemask_ps(_mm_cmpunord_ps((__m128)(u), (__m128)(v)))           \
            : (unsigned)_mm_movemask_pd(_mm_cmpunord_pd((__m128d)(u), (__m128d)(v))))
#endif
#define FAST_LARGER(v, a) X86_(max, v, a)
#define FAST_SMALLER(v, a) X86_(min, v, a)
#else
#define FAST_LARGER LARGER
#define FAST_SMALLER SMALLER
#define NAN_BITS NO_NANS
#endif

/* The lane-wise extreme of x's n >= NL elements: 4 accumulators (starting from the first
 * vector, which the loop sees again), and no scalar tail: the last NL elements overlap the
 * whole vectors when NL does not divide n, and an extreme may see an element twice.
 * *nans: see NAN_BITS. */
#define DEFINE_EXTREME_VECTORS(FN, INLINE, STEP, VX, NANS)                                   \
    ISA_ATTR static INLINE NVEC NAME(FN)(const T *x, ptrdiff_t n, ptrdiff_t s,               \
                                         unsigned *nans)                                     \
    {                                                                                        \
        const ptrdiff_t nv = n / NL;                                                         \
        NVEC v0 = {0}, v1 = {0}, v2 = {0}, v3 = {0};                                         \
        NLOAD(v0, x, 0, s);                                                                  \
        v0 = VX(v0);                                                                         \
        NVEC a0 = v0, a1 = v0, a2 = v0, a3 = v0;                                             \
        unsigned seen = 0;                                                                   \
        ptrdiff_t i = 0;                                                                     \
        for (; i + 4 <= nv; i += 4) {                                                        \
            NLOAD(v0, x, i, s);                                                              \
            NLOAD(v1, x, i + 1, s);                                                          \
            NLOAD(v2, x, i + 2, s);                                                          \
            NLOAD(v3, x, i + 3, s);                                                          \
            v0 = VX(v0), v1 = VX(v1), v2 = VX(v2), v3 = VX(v3);                              \
            a0 = STEP(v0, a0), a1 = STEP(v1, a1), a2 = STEP(v2, a2), a3 = STEP(v3, a3);      \
            seen |= NANS(v0, v1) | NANS(v2, v3);                                             \
        }                                                                                    \
        for (; i < nv; i++) {                                                                \
            NLOAD(v0, x, i, s);                                                              \
            v0 = VX(v0);                                                                     \
            a0 = STEP(v0, a0);                                                               \
            seen |= NANS(v0, v0);                                                            \
        }                                                                                    \
        if (nv * NL < n) { /* the last NL elements (read last: the prefetcher runs forward) */ \
            NLOAD(v1, x + (n - NL) * s, 0, s);                                               \
            v1 = VX(v1);                                                                     \
            a1 = STEP(v1, a1);                                                               \
            seen |= NANS(v1, v1);                                                            \
        }                                                                                    \
        *nans = seen;                                                                        \
        return STEP(STEP(a3, a2), STEP(a1, a0));                                             \
    }

/* The extreme of VX / SX of each of x's n elements: the fast vector pass, and the exact one
 * again for a row whose fast pass met a NaN (which the result must be). */
#define DEFINE_EXTREME_RUN(FN, CMP, LARGEST, VX, SX, FAST_STEP, EXACT_STEP)                  \
    DEFINE_EXTREME_VECTORS(FN##_fast, inline __attribute__((always_inline)), FAST_STEP, VX, \
                           NAN_BITS)                                                         \
    /* (rare: kept out of line so the common path stays short) */                            \
    DEFINE_EXTREME_VECTORS(FN##_exact, __attribute__((noinline)), EXACT_STEP, VX, NO_NANS)   \
    ISA_ATTR static T NAME(FN##_run)(const T *x, ptrdiff_t n, ptrdiff_t s)                   \
    {                                                                                        \
        if (n < NL) {                                                                        \
            T best = SX(x[0]);                                                               \
            for (ptrdiff_t i = 1; i < n; i++) {                                              \
                const T e = SX(x[i * s]);                                                    \
                best = ((e CMP best) | (e != e)) ? e : best;                                 \
            }                                                                                \
            return best;                                                                     \
        }                                                                                    \
        unsigned nans;                                                                       \
        /* (a unit stride as a constant: the contiguous loop without the gather's setup) */  \
        const NVEC a = s == 1 ? NAME(FN##_fast)(x, n, 1, &nans)                              \
                              : NAME(FN##_fast)(x, n, s, &nans);                             \
        if (nans == 0) return NAME(lanes_extreme)(a, LARGEST, 0);                            \
        return NAME(lanes_extreme)(NAME(FN##_exact)(x, n, s, &nans), LARGEST, 1);            \
    }

#define DEFINE_EXTREME_INDEX(FN, CMP)                                                        \
    /* n <= CHUNK elements; *index (if wanted) gets the first occurrence of the result */    \
    ISA_ATTR static T NAME(FN)(const T *x, ptrdiff_t n, ptrdiff_t s, int64_t *index)         \
    {                                                                                        \
        if (index == NULL) return NAME(FN##_run)(x, n, s);                                   \
        T block_best[CHUNK / BLOCK];                                                         \
        const ptrdiff_t blocks = (n + BLOCK - 1) / BLOCK;                                    \
        T best = 0;                                                                          \
        for (ptrdiff_t b = 0; b < blocks; b++) {                                             \
            const ptrdiff_t len = n - b * BLOCK < BLOCK ? n - b * BLOCK : BLOCK;             \
            const T v = block_best[b] = NAME(FN##_run)(x + b * BLOCK * s, len, s);           \
            best = b == 0 || ((v CMP best) | (v != v)) ? v : best;                           \
        }                                                                                    \
        const int nan = best != best;                                                        \
        ptrdiff_t b = 0;                                                                     \
        while (nan ? block_best[b] == block_best[b] : block_best[b] != best) b++;            \
        ptrdiff_t i = b * BLOCK;                                                             \
        while (nan ? x[i * s] == x[i * s] : x[i * s] != best) i++;                           \
        *index = i;                                                                          \
        return best;                                                                         \
    }

#define SAME(e) (e)
DEFINE_EXTREME_RUN(largest, >, 1, SAME, SAME, FAST_LARGER, LARGER)
DEFINE_EXTREME_RUN(smallest, <, 0, SAME, SAME, FAST_SMALLER, SMALLER)
DEFINE_EXTREME_RUN(abs_largest, >, 1, NABS, ABS, FAST_LARGER, LARGER)
DEFINE_EXTREME_RUN(abs_smallest, <, 0, NABS, ABS, FAST_SMALLER, SMALLER)
DEFINE_EXTREME_INDEX(largest, >)
DEFINE_EXTREME_INDEX(smallest, <)

/* The product of a row in index order, from 1 (NumPy's multiply.reduce: 1 * x[0] is x[0]
 * exactly, so it equals starting from x[0]). Each step depends on the last: no vectors. */
ISA_ATTR static T NAME(product)(const T *x, ptrdiff_t n, ptrdiff_t s)
{
    T acc = 1;
    for (ptrdiff_t i = 0; i < n; i++) acc *= x[i * s];
    return acc;
}

/* The product of a row of n >= PROD_LANES elements in the lane order: the lanes are
 * PROD_LANES / VL logical vectors, each a chain of its own, so the multiplies overlap. */
ISA_ATTR static inline __attribute__((always_inline)) T NAME(lane_product_at)(const T *x,
                                                                             ptrdiff_t n,
                                                                             ptrdiff_t s)
{
    /* (the logical vectors as native pieces, each in a register: see the pairwise leaf) */
    enum { V = PROD_LANES / (int)VL, PN = NATIVE_PIECES };
    const ptrdiff_t blocks = n / PROD_LANES;
    NVEC a[V * PN], v = {0};
    for (int k = 0; k < V * PN; k++) NLOAD(a[k], x, k, s);
    for (ptrdiff_t b = 1; b < blocks; b++)
#pragma GCC unroll 16
        for (int k = 0; k < V * PN; k++) {
            NLOAD(v, x + b * PROD_LANES * s, k, s);
            a[k] *= v;
        }
    /* the tree: while its step spans whole vectors, vector k times vector k + step / VL */
    for (int step = V / 2; step > 0; step /= 2)
        for (int k = 0; k < step * PN; k++) a[k] = a[k] * a[k + step * PN];
    T t[VL];
    memcpy(t, &a[0], sizeof t);   /* logical vector 0: pieces 0 .. PN - 1 */
    for (ptrdiff_t w = VL / 2; w > 0; w /= 2)
        for (ptrdiff_t j = 0; j < w; j++) t[j] = t[j] * t[j + w];
    T acc = t[0];
    for (ptrdiff_t i = blocks * PROD_LANES; i < n; i++) acc *= x[i * s];
    return acc;
}

ISA_ATTR static T NAME(lane_product)(const T *x, ptrdiff_t n, ptrdiff_t s)
{
    /* (a unit stride as a constant: see DEFINE_PAIRWISE) */
    return s == 1 ? NAME(lane_product_at)(x, n, 1) : NAME(lane_product_at)(x, n, s);
}

/* Products down w <= PROD_COLUMNS columns of R >= PROD_LANES rows (row r at x + r * sr) in
 * the lane order, into acc: lane j of column i multiplies rows j, j + 64, ... of it. */
ISA_ATTR static void NAME(column_lane_products)(const T *x, ptrdiff_t R, ptrdiff_t sr,
                                                ptrdiff_t w, T *acc)
{
    T lanes[PROD_LANES][PROD_COLUMNS];
    const ptrdiff_t body = R - R % PROD_LANES;
    for (ptrdiff_t j = 0; j < PROD_LANES; j++)
        for (ptrdiff_t i = 0; i < w; i++) lanes[j][i] = x[j * sr + i];
    for (ptrdiff_t r = PROD_LANES; r < body; r++)
        for (ptrdiff_t i = 0; i < w; i++) lanes[r % PROD_LANES][i] *= x[r * sr + i];
    for (ptrdiff_t half = PROD_LANES / 2; half > 0; half /= 2)
        for (ptrdiff_t j = 0; j < half; j++)
            for (ptrdiff_t i = 0; i < w; i++) lanes[j][i] = lanes[j][i] * lanes[j + half][i];
    for (ptrdiff_t i = 0; i < w; i++) acc[i] = lanes[0][i];
    for (ptrdiff_t r = body; r < R; r++)
        for (ptrdiff_t i = 0; i < w; i++) acc[i] *= x[r * sr + i];
}

/* The products of rows [lo, hi). Rows shorter than PROD_LANES go PRODUCT_ROWS rows at a
 * time: each row still multiplies in index order (the same bits as product()), but the rows'
 * independent chains interleave, so the multiplier's latency is hidden (a lone row waits
 * for each product before the next). */
#define PRODUCT_ROWS 8
ISA_ATTR static void NAME(products)(const geo_t *g, ptrdiff_t lo, ptrdiff_t hi, T *val)
{
    if (g->R >= PROD_LANES) { /* rows in the lane order: each row's chains overlap already */
        for (ptrdiff_t row = lo; row < hi; row++)
            val[row] = NAME(lane_product)((const T *)g->x + row_start(g, row), g->R, g->sr);
        return;
    }
    for (ptrdiff_t r0 = lo; r0 < hi; r0 += PRODUCT_ROWS) {
        const ptrdiff_t n = hi - r0 < PRODUCT_ROWS ? hi - r0 : PRODUCT_ROWS;
        if (n == 1) {
            const T *x = (const T *)g->x + row_start(g, r0);
            val[r0] = NAME(product)(x, g->R, g->sr);
            continue;
        }
        const T *x[PRODUCT_ROWS];
        T acc[PRODUCT_ROWS];
        for (ptrdiff_t j = 0; j < PRODUCT_ROWS; j++) { /* missing rows repeat the last one */
            const ptrdiff_t row = r0 + (j < n ? j : n - 1);
            x[j] = (const T *)g->x + row_start(g, row);
            acc[j] = 1;
        }
        for (ptrdiff_t i = 0; i < g->R; i++)
            for (int j = 0; j < PRODUCT_ROWS; j++) acc[j] *= x[j][i * g->sr];
        for (ptrdiff_t j = 0; j < n; j++) val[r0 + j] = acc[j];
    }
}

/* ---- rows of at most one pairwise leaf, VL at a time -------------------------------------
 * A short row spends more on the tree that adds its vector's lanes than on its elements
 * (65536 rows of 16 float32: 6 ns a row, torch 2.5). Rows of at most one leaf (R <= 1024,
 * either type) with unit stride go VL at a time: each row's leaf vector as before,
 * then one transposing tree adds the lanes of all VL vectors together: level by level, lanes
 * (2i, 2i + 1) of neighbouring vectors are added into one vector, so after log2(VL) levels
 * lane r holds row r's total. Each row's lanes are added in the same tree (adjacent pairs,
 * then pairs of pairs) whatever rows share its batch; a batch short of VL rows is padded
 * with zero vectors. Results depend on R only, as every other order here. */
/* the lane of `a` (0 .. VL-1) or `b` (VL .. 2VL-1) that lane j of a level's first operand
 * takes, for groups of g lanes; the second operand takes the lane g further on */
#define TREE_LANE(j, g) ((((j) % (2 * (g))) < (g) ? 0 : VL) + (j) / (2 * (g)) * 2 * (g) + (j) % (g))
#define TREE_MASK_8(g) {TREE_LANE(0, g), TREE_LANE(1, g), TREE_LANE(2, g), TREE_LANE(3, g),     \
                        TREE_LANE(4, g), TREE_LANE(5, g), TREE_LANE(6, g), TREE_LANE(7, g)}
#define TREE_MASK_16(g) {TREE_LANE(0, g), TREE_LANE(1, g), TREE_LANE(2, g), TREE_LANE(3, g),    \
                         TREE_LANE(4, g), TREE_LANE(5, g), TREE_LANE(6, g), TREE_LANE(7, g),    \
                         TREE_LANE(8, g), TREE_LANE(9, g), TREE_LANE(10, g), TREE_LANE(11, g),  \
                         TREE_LANE(12, g), TREE_LANE(13, g), TREE_LANE(14, g), TREE_LANE(15, g)}
#if IS_F32
#define TREE_MASK(g) ((IVEC)TREE_MASK_16(g))
#else
#define TREE_MASK(g) ((IVEC)TREE_MASK_8(g))
#endif

/* part[0 .. VL) -> *out, whose lane r is the sum of part[r]'s lanes (part is consumed) */
ISA_ATTR static inline void NAME(rows_lanes_sum)(VEC *part, VEC *out)
{
    for (int g = 1, count = VL; g < VL; g *= 2, count /= 2) {
        IVEC first, second;
        switch (g) { /* (constant masks: a shuffle with a variable one is slow) */
        case 1: first = TREE_MASK(1); break;
        case 2: first = TREE_MASK(2); break;
        case 4: first = TREE_MASK(4); break;
        default: first = TREE_MASK(8); break;
        }
        second = first + g;
        for (int k = 0; k < count / 2; k++)
            part[k] = __builtin_shuffle(part[2 * k], part[2 * k + 1], first) +
                      __builtin_shuffle(part[2 * k], part[2 * k + 1], second);
    }
    *out = part[0];
}

/* STEP(FN) for the summing kind `kind` (FN: its DEFINE_PAIRWISE name) */
#define FOR_SUMMING_KIND(kind, STEP)                                                         \
    switch (kind) {                                                                          \
    case K_SUM: STEP(sum); break;                                                            \
    case K_SQDEV: STEP(sqdev); break;                                                        \
    case K_EXPSUM: STEP(expsum); break;                                                      \
    case K_ABSSUM: STEP(abssum); break;                                                      \
    case K_NONZERO: STEP(nonzero); break;                                                    \
    case K_POWSUM: STEP(powsum); break;                                                      \
    }

/* The rows [lo, hi) of a summing kind, R <= VL * LEAF_VECTORS, unit stride. */
ISA_ATTR static void NAME(short_rows)(const geo_t *g, int kind, const T *center, T *val,
                                      ptrdiff_t lo, ptrdiff_t hi)
{
    const ptrdiff_t nv = g->R / VL;
    for (ptrdiff_t r0 = lo; r0 < hi; r0 += VL) {
        const ptrdiff_t m = hi - r0 < VL ? hi - r0 : VL;
        VEC part[VL];
        const T *x[VL];
        T c[VL];
        for (ptrdiff_t r = 0; r < VL; r++) {
            part[r] = (VEC){0};
            if (r >= m) continue;
            const ptrdiff_t row = r0 + r;
            x[r] = (const T *)g->x + row_start(g, row);
            c[r] = center ? center[row] : 0;
#define LEAF(FN) NAME(FN##_leaf)(x[r], nv, 1, c[r], &part[r])
            if (nv > 0) FOR_SUMMING_KIND(kind, LEAF)
#undef LEAF
        }
        VEC totals;
        NAME(rows_lanes_sum)(part, &totals);
        for (ptrdiff_t r = 0; r < m; r++) {
            T t = totals[r];
#define TAIL(FN) t = NAME(FN##_tail)(x[r], g->R, 1, c[r], t)
            FOR_SUMMING_KIND(kind, TAIL)
#undef TAIL
            val[r0 + r] = t;
        }
    }
}

/* Row layout: item = row * nchunks + chunk; writes the chunk's partial to val[item] (a
 * sequential kind's row is one item whatever its length). */
ISA_ATTR static void NAME(row_pass)(const geo_t *g, int kind, const void *center_, void *val_,
                                    int64_t *idx, ptrdiff_t nchunks, ptrdiff_t lo,
                                    ptrdiff_t hi)
{
    const T *center = center_;
    T *val = val_;
    if (kind == K_PROD) { /* one item per row (never chunked) */
        NAME(products)(g, lo, hi, val);
        return;
    }
    if (nchunks == 1 && g->sr == 1 && g->R <= VL * LEAF_VECTORS && is_summing(kind)) {
        NAME(short_rows)(g, kind, center, val, lo, hi);
        return;
    }
    for (ptrdiff_t item = lo; item < hi; item++) {
        /* (divisions only where they are needed: a short row costs about as much as one) */
        const ptrdiff_t row = nchunks == 1 ? item : item / nchunks, chunk = item - row * nchunks;
        const ptrdiff_t start = chunk * CHUNK;
        const ptrdiff_t n = nchunks == 1 ? g->R : g->R - start < CHUNK ? g->R - start : CHUNK;
        const T *x = (const T *)g->x + row_start(g, row) + start * g->sr;
        const T c = center ? center[row] : 0;
#define ROW(FN) val[item] = NAME(FN)(x, n, g->sr, c)
        if (is_summing(kind)) {
            FOR_SUMMING_KIND(kind, ROW)
            continue;
        }
#undef ROW
        switch (kind) {
        case K_MAX: val[item] = NAME(largest)(x, n, g->sr, idx ? idx + item : NULL); break;
        case K_MIN: val[item] = NAME(smallest)(x, n, g->sr, idx ? idx + item : NULL); break;
        case K_ABSMAX: val[item] = NAME(abs_largest_run)(x, n, g->sr); break;
        case K_ABSMIN: val[item] = NAME(abs_smallest_run)(x, n, g->sr); break;
        }
    }
}

/* One step down the columns: acc[i] OP= TERM for the w columns of this row r. */
#define COLUMN_STEP(OP, TERM)                                                                \
    for (ptrdiff_t i = 0; i < w; i++) acc[i] OP TERM
/* One step of an extreme down the columns (SX: the element, or its magnitude). */
#define COLUMN_EXTREME(CMP, SX)                                                              \
    for (ptrdiff_t i = 0; i < w; i++) {                                                      \
        const T v = SX(xr[i]);                                                               \
        const int take = ((v CMP acc[i]) | (v != v)) & (acc[i] == acc[i]);                  \
        acc[i] = take ? v : acc[i];                                                          \
        at[i] = take ? r : at[i];                                                            \
    }

/* acc[i] = the sum of the w columns x[r * sr + i] down r = 0 .. R-1, each from 0 in row
 * order (the generic column step's bits). 256 bytes of columns at a time in registers, down
 * all the rows: the generic step loaded and stored every partial sum at every row, and ran
 * at about a third of torch's speed (AMD EPYC Zen 3, (4096, 1024) float32 sum(0)). */
#define COLUMN_SUM_VECTORS 8 /* native vectors of 32 bytes: 256 bytes of columns */
typedef T NAME(column_uvec) __attribute__((vector_size(32), aligned(sizeof(T))));
ISA_ATTR static void NAME(column_sums)(const T *x, ptrdiff_t R, ptrdiff_t sr, ptrdiff_t w,
                                       T *acc)
{
    typedef NAME(column_uvec) CVEC;
    enum { CL = 32 / sizeof(T), CB = COLUMN_SUM_VECTORS * CL };
    ptrdiff_t i0 = 0;
    for (; i0 + CB <= w; i0 += CB) {
        CVEC a[COLUMN_SUM_VECTORS];
        for (int k = 0; k < COLUMN_SUM_VECTORS; k++) a[k] = (CVEC){0};
        for (ptrdiff_t r = 0; r < R; r++) {
            const CVEC *xr = (const CVEC *)(x + r * sr + i0);
            _Pragma("GCC unroll 8")
            for (int k = 0; k < COLUMN_SUM_VECTORS; k++) a[k] += xr[k];
        }
        memcpy(acc + i0, a, sizeof a);
    }
    for (ptrdiff_t i = i0; i < w; i++) acc[i] = 0;
    for (ptrdiff_t r = 0; r < R; r++)
        for (ptrdiff_t i = i0; i < w; i++) acc[i] += x[r * sr + i];
}

/* Column layout (si == 1): item = o * blocks + block of COLUMN_BLOCK columns; each column
 * runs down R in order (NumPy's order for an outer axis), a product of R >= PROD_LANES in
 * its lane order. Writes final per-row values (row = o * I + i). */
ISA_ATTR static void NAME(column_pass)(const geo_t *g, int kind, const void *center_,
                                       void *val_, int64_t *idx, ptrdiff_t unused,
                                       ptrdiff_t lo, ptrdiff_t hi)
{
    (void)unused;
    const T *center = center_;
    T *val = val_;
    const ptrdiff_t blocks = (g->I + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
    T acc[COLUMN_BLOCK], c[COLUMN_BLOCK];
    int64_t at[COLUMN_BLOCK];
    for (ptrdiff_t item = lo; item < hi; item++) {
        const ptrdiff_t o = item / blocks, i0 = item % blocks * COLUMN_BLOCK;
        const ptrdiff_t w = g->I - i0 < COLUMN_BLOCK ? g->I - i0 : COLUMN_BLOCK;
        const T *x = (const T *)g->x + o * g->so + i0;
        const ptrdiff_t sr = g->sr, R = g->R, row0 = o * g->I + i0;
        for (ptrdiff_t i = 0; i < w; i++) c[i] = center ? center[row0 + i] : 0;
        if (is_extreme(kind)) {
            const int mag = kind == K_ABSMAX || kind == K_ABSMIN;
            for (ptrdiff_t i = 0; i < w; i++) acc[i] = mag ? ABS(x[i]) : x[i], at[i] = 0;
            for (ptrdiff_t r = 1; r < R; r++) {
                const T *xr = x + r * sr;
                switch (kind) {
                case K_MAX: COLUMN_EXTREME(>, SAME); break;
                case K_MIN: COLUMN_EXTREME(<, SAME); break;
                case K_ABSMAX: COLUMN_EXTREME(>, ABS); break;
                case K_ABSMIN: COLUMN_EXTREME(<, ABS); break;
                }
            }
            if (idx)
                for (ptrdiff_t i = 0; i < w; i++) idx[row0 + i] = at[i];
        } else if (kind == K_PROD && R >= PROD_LANES) {
            for (ptrdiff_t i = 0; i < w; i += PROD_COLUMNS)
                NAME(column_lane_products)(x + i, R, sr,
                                           w - i < PROD_COLUMNS ? w - i : PROD_COLUMNS, acc + i);
        } else if (kind == K_SUM) {
            NAME(column_sums)(x, R, sr, w, acc);
        } else {
            for (ptrdiff_t i = 0; i < w; i++) acc[i] = kind == K_PROD ? 1 : 0;
            for (ptrdiff_t r = 0; r < R; r++) {
                const T *xr = x + r * sr;
                switch (kind) {
                case K_SUM: COLUMN_STEP(+=, xr[i]); break;
                case K_SQDEV: COLUMN_STEP(+=, (xr[i] - c[i]) * (xr[i] - c[i])); break;
                case K_EXPSUM: COLUMN_STEP(+=, SCALAR_EXP(xr[i] - c[i])); break;
                case K_ABSSUM: COLUMN_STEP(+=, ABS(xr[i])); break;
                case K_NONZERO: COLUMN_STEP(+=, (T)(xr[i] != 0)); break;
                case K_POWSUM: COLUMN_STEP(+=, NAME(ipow)(ABS(xr[i]), (int)c[i])); break;
                case K_PROD: COLUMN_STEP(*=, xr[i]); break;
                }
            }
        }
        for (ptrdiff_t i = 0; i < w; i++) val[row0 + i] = acc[i];
    }
}

/* Running sums: out[r] = out[r - 1] + x[r], out[0] = x[0] (NumPy's accumulate order). Row
 * items are (o, i) rows; column items are blocks of columns (x's and out's si == 1). */
ISA_ATTR static void NAME(cumsum_items)(const geo_t *g, char *out_, ptrdiff_t oso,
                                        ptrdiff_t osi, ptrdiff_t osr, ptrdiff_t lo,
                                        ptrdiff_t hi, int column)
{
    const ptrdiff_t R = g->R, sr = g->sr;
    for (ptrdiff_t item = lo; item < hi; item++) {
        if (column) {
            const ptrdiff_t blocks = (g->I + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
            const ptrdiff_t o = item / blocks, i0 = item % blocks * COLUMN_BLOCK;
            const ptrdiff_t w = g->I - i0 < COLUMN_BLOCK ? g->I - i0 : COLUMN_BLOCK;
            const T *x = (const T *)g->x + o * g->so + i0;
            T *out = (T *)out_ + o * oso + i0;
            for (ptrdiff_t i = 0; i < w; i++) out[i] = x[i];
            for (ptrdiff_t r = 1; r < R; r++)
                for (ptrdiff_t i = 0; i < w; i++)
                    out[r * osr + i] = out[(r - 1) * osr + i] + x[r * sr + i];
        } else {
            const ptrdiff_t o = item / g->I, i = item % g->I;
            const T *x = (const T *)g->x + o * g->so + i * g->si;
            T *out = (T *)out_ + o * oso + i * osi;
            T acc = x[0];
            out[0] = acc;
            for (ptrdiff_t r = 1; r < R; r++) {
                acc += x[r * sr];
                out[r * osr] = acc;
            }
        }
    }
}

#undef T
#undef IS_F32
#undef NATIVE_EXP
#undef SCALAR_EXP
#undef ITYPE
#undef VEC
#undef IVEC
#undef VL
#undef NVEC
#undef NIVEC
#undef NL
#undef NATIVE_PIECES
#undef VBYTES
#undef EXP
#undef ISA_ATTR
#undef NAME
#undef ABS_BITS
#undef VEC_LANES
#undef NATIVE_LANES
#undef NATIVE_LANES_64
#undef NATIVE_LANES_32
#undef NATIVE_LANES_16
#undef NABS
#undef SAME
#undef COLUMN_STEP
#undef COLUMN_EXTREME
#undef DEFINE_EXTREME_RUN
#undef DEFINE_EXTREME_VECTORS
#undef LARGER
#undef SMALLER
#undef NO_NANS
#undef X86_
#undef NAN_BITS
#undef FAST_LARGER
#undef FAST_SMALLER
#undef DEFINE_EXTREME_INDEX
#undef DEFINE_PAIRWISE
#undef PRODUCT_ROWS
#undef TREE_LANE
#undef TREE_MASK_8
#undef TREE_MASK_16
#undef TREE_MASK
#undef FOR_SUMMING_KIND
#endif /* REDUCE_TEMPLATE */
