/* reftorch_cpu._pool: 2-d pooling and batch / group normalization, float32 and float64.
 *
 * Entry points (called from reftorch_cpu/pooling.py, which checks the call or declines):
 *
 *   max_pool2d(x, x_off, (A, B, H, W), x_strides, (kh, kw, sh, sw, ph, pw, dh, dw),
 *              (OH, OW), values, indices)
 *   max_pool2d_backward(grad, g_off, (A, B, OH, OW), g_strides, indices, i_off,
 *                       i_strides, (H, W), out)
 *   avg_pool2d(x, x_off, (A, B, H, W), x_strides, (kh, kw, sh, sw, ph, pw), (OH, OW),
 *              count_include_pad, divisor_override, out)
 *   avg_pool2d_backward(grad, g_off, (A, B, OH, OW), g_strides, (kh, kw, sh, sw, ph, pw),
 *                       (H, W), count_include_pad, divisor_override, out)
 *   adaptive_avg_pool2d(x, x_off, (A, B, H, W), x_strides, (OH, OW), out)
 *   adaptive_avg_pool2d_backward(grad, g_off, (A, B, OH, OW), g_strides, (H, W), out)
 *   batch_norm(x, x_off, (A, B, L), (sA, sB), weight, w_off, bias, b_off, running_mean,
 *              rm_off, running_var, rv_off, training, momentum, eps, out, (oA, oB),
 *              save_mean, save_rstd)
 *   batch_norm_backward(grad, g_off, (gA, gB), x, x_off, (A, B, L), (sA, sB), weight, w_off,
 *                       mean, rstd, out, grad_weight, grad_bias)
 *   group_norm(x, x_off, (A, B, L), (sA, sB), groups, weight, w_off, bias, b_off, eps, out,
 *              (oA, oB), mean, rstd)
 *
 * A pooling input is A x B planes (batch x channels; A = 1 for an unbatched input) of
 * H x W elements at any strides (in elements, negative allowed); outputs are contiguous
 * (A*B, OH, OW), as the reference's. The normalization input is A x B planes (N x C) of L
 * unit-stride elements (the spatial dims merged), the output the same with plane strides
 * (oA, oB). Every argument is checked before memory is touched: buffer formats (float32 'f',
 * float64 'd', int64 indices 'q'/'l'), sizes, that every element of every view lies inside
 * its buffer; window geometry that could overflow is refused. Reads of a window are guarded
 * by the input bounds per element (padding and ceil_mode windows read nothing outside).
 *
 * Arithmetic, against the NumPy reference (reference/reftorch/_ops/nn_pooling.py and
 * nn_normalization.py):
 *  - max pooling visits each window in (kh, kw) order, starting from -inf and the index of
 *    the window's first element inside the input; a later element replaces the best if it
 *    is larger or NaN (so a later NaN wins, ties keep the first): bit for bit. Its backward
 *    (for when reftorch declares the op) adds each gradient at its index in output order,
 *    as the reference's scatter_add (np.add.at): bit for bit.
 *  - avg pooling sums each window in (kh, kw) order in the element type (the reference adds
 *    one kernel offset at a time; its padding zeros add nothing), then divides in double by
 *    PyTorch's divisor and rounds once: bit for bit. The backward adds each output's
 *    grad / divisor (in double) to its window's elements in (kh, kw) order, then rounds:
 *    bit for bit. Adaptive pooling: the same with PyTorch's bins, the backward in the
 *    reference's np.bincount order ((kh, kw) offsets, then outputs): bit for bit.
 *  - batch / group norm: the reference's two-pass formula (mean; mean of (x - mean)^2 with
 *    each difference and square rounded to the element type; rstd = 1 / sqrt(var + eps) and
 *    ((x - mean) * rstd) * weight + bias in the element type, bit for bit given the
 *    statistics). The sums run in double: 16 interleaved lanes per plane (combined as a
 *    fixed tree), plane sums then added in plane order. The reference sums in the element
 *    type in NumPy's pairwise order, so means and variances differ in the last bits
 *    (float32: a few ulp; the tests bound it).
 *
 * Work is split into fixed blocks (of output rows for the pooling forwards, input rows for
 * the avg-pool backward, planes for the other backwards, statistics or planes for the
 * normalizations) handed to OpenMP threads statically; every result is computed by the
 * same code in the same order whichever thread runs it, so nothing depends on the thread
 * count. Windows of 2x2 or 3x3 (stride 1 or 2) that lie inside the input run a loop of
 * their own, vectorized over the output row; max pooling's windows of 16 or more elements
 * with strides over 2 (adaptive pooling's 8x8 bins of a 56x56 plane) one window at a time,
 * a vector maximum first and then the element that holds it (max_window). The loops are
 * compiled for baseline x86-64, AVX2 and AVX-512F (with -ffp-contract=off: no fused
 * multiply-adds) and the best one is picked at import; every clone computes the same bits.
 */
#ifndef POOL_TEMPLATE

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Loops touching fewer elements than this run on one thread: a parallel region costs a few
 * microseconds. Measured on a 2-core x86-64 (best of 400, 1 vs 2 threads, us): max_pool2d
 * 2x2 float32 over 8 Ki input elements 14.9 vs 13.4, 16 Ki 17.0 vs 12.4, 32 Ki 28.6 vs 20.0;
 * batch norm (training) 8 Ki 7.8 vs 10.4, 16 Ki 12.1 vs 12.5, 32 Ki 19.1 vs 15.8. */
#ifndef PARALLEL_MIN_ELEMENTS
#define PARALLEL_MIN_ELEMENTS 16384
#endif
/* Rows are handed to threads in blocks of about this many elements of work. */
#define BLOCK_ELEMENTS 8192
/* Window geometry beyond this is refused (keeps every index product inside 64 bits). */
#define MAX_EXTENT ((long long)1 << 31)

enum { T_F32, T_F64, N_TYPES };

typedef struct {
    const char *x;                     /* element (0, 0, 0, 0) of the input (or grad) */
    ptrdiff_t A, B, H, W;              /* planes A x B of H x W (the pooled input's size) */
    ptrdiff_t sA, sB, sH, sW;          /* strides of x (grad for the backward ops) */
    ptrdiff_t kh, kw, sh, sw, ph, pw, dh, dw;
    ptrdiff_t OH, OW;
    char *out;                         /* contiguous values / result */
    int64_t *idx;                      /* max pooling's indices */
    int count_include_pad, has_override;
    long long divisor_override;
    const ptrdiff_t *bins;             /* adaptive: h0[OH], hlen[OH], w0[OW], wlen[OW] */
    ptrdiff_t max_hlen, max_wlen;
    int disjoint;                      /* adaptive: no two bins share an element */
} pool_t;

typedef struct {
    const char *x;                     /* element 0 of plane (0, 0) */
    ptrdiff_t A, B, L, sA, sB;         /* planes (a, b): L unit-stride elements */
    char *out;
    ptrdiff_t oA, oB;
    const char *w, *bias;              /* B elements each, or NULL */
    ptrdiff_t stat_a, stat_div;        /* statistic of plane (a, b): a*stat_a + b/stat_div */
    const char *mean, *rstd;           /* one per statistic (element type) */
    double *plane_sums;                /* A * B */
} norm_t;

static inline ptrdiff_t floor_div(ptrdiff_t a, ptrdiff_t b) /* b > 0 */
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* Outputs o in [*lo, *hi) whose element o * step + c lies in [0, size) (step > 0). */
static inline void valid_range(ptrdiff_t c, ptrdiff_t step, ptrdiff_t size, ptrdiff_t n,
                               ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t first = c >= 0 ? 0 : (-c + step - 1) / step;
    ptrdiff_t last = floor_div(size - 1 - c, step) + 1;
    if (last > n) last = n;
    if (first > last) first = last;
    *lo = first, *hi = last;
}

/* PyTorch's avg-pool window along one dim: the size it divides by with count_include_pad
 * (the window clipped to the padded input) and the number of input elements inside. */
static inline void avg_extent(ptrdiff_t o, ptrdiff_t k, ptrdiff_t s, ptrdiff_t p,
                              ptrdiff_t size, ptrdiff_t *padded, ptrdiff_t *inside)
{
    ptrdiff_t start = o * s - p, end = start + k;
    if (end > size + p) end = size + p;
    *padded = end - start;
    ptrdiff_t lo = start > 0 ? start : 0, hi = end < size ? end : size;
    *inside = hi > lo ? hi - lo : 0;
}

static inline double avg_divisor(const pool_t *g, ptrdiff_t pad_h, ptrdiff_t in_h,
                                 ptrdiff_t pad_w, ptrdiff_t in_w)
{
    if (g->has_override) return (double)g->divisor_override;
    return (double)(g->count_include_pad ? pad_h * pad_w : in_h * in_w);
}

#define CAT3_(a, b, c) a##_##b##_##c
#define CAT3(a, b, c) CAT3_(a, b, c)

/* ---- the kernels, instantiated per element type and instruction set -------------------- */

#define POOL_TEMPLATE
#define CLONE_TEMPLATE "pool.c"
#include "isa_clones.h"
#undef CLONE_TEMPLATE
#undef POOL_TEMPLATE

typedef void (*rows_fn)(const pool_t *g, ptrdiff_t lo, ptrdiff_t hi);
typedef void (*scratch_rows_fn)(const pool_t *g, ptrdiff_t lo, ptrdiff_t hi, double *scratch);
typedef void (*norm_fn)(const norm_t *n, ptrdiff_t lo, ptrdiff_t hi);
typedef struct {
    rows_fn max_rows, avg_rows, adaptive_rows;
    scratch_rows_fn avg_backward_rows, adaptive_backward_planes;
    norm_fn sums, square_sums, apply;
} kernels_t;

#define KERNELS(TN, ISA)                                                                     \
    {CAT3(max_rows, TN, ISA), CAT3(avg_rows, TN, ISA), CAT3(adaptive_rows, TN, ISA),         \
     CAT3(avg_backward_rows, TN, ISA), CAT3(adaptive_backward_planes, TN, ISA),              \
     CAT3(norm_sums, TN, ISA), CAT3(norm_square_sums, TN, ISA), CAT3(norm_apply, TN, ISA)}

#if HAVE_X86_CLONES
static const kernels_t KERNELS_BY[N_ISAS][N_TYPES] = {
    {KERNELS(f32, baseline), KERNELS(f64, baseline)},
    {KERNELS(f32, avx2), KERNELS(f64, avx2)},
    {KERNELS(f32, avx512f), KERNELS(f64, avx512f)}};
#else
static const kernels_t KERNELS_BY[N_ISAS][N_TYPES] = {
    {KERNELS(f32, baseline), KERNELS(f64, baseline)}};
#endif

/* ---- running work in fixed blocks --------------------------------------------------------- */

static int parallel_ok(double elements)
{
    return worth_parallel((double)elements, PARALLEL_MIN_ELEMENTS);
}


/* Per-thread scratch: each thread's part starts on its own cache line (no false sharing). */
static size_t scratch_doubles(size_t n)
{
    return (n + 7) / 8 * 8;
}

static double *scratch_alloc(size_t per_thread, int threads)
{
    return aligned_alloc(64, sizeof(double) * per_thread * (size_t)threads);
}

/* Units [0, units) (rows or planes of `per_unit` elements of work each) in blocks of about
 * BLOCK_ELEMENTS, one call per block; threads take blocks statically. */
#define FOR_BLOCKS(units, per_unit, par, CALL) \
    FOR_GROUPS(units, group_for(per_unit, BLOCK_ELEMENTS), par, CALL)

/* ---- argument checking --------------------------------------------------------------------- */

/* A contiguous operand of n elements (common.h's kind_operand, which the strided ones use
 * directly). */
static int contiguous_operand(held_t *h, PyObject *obj, PyObject *off_obj, long long n,
                              int writable, int kind, int optional, const char *what,
                              char **ptr)
{
    const long long shape[1] = {n}, strides[1] = {1};
    return kind_operand(h, obj, off_obj, 1, shape, strides, writable, kind, optional, what,
                        ptr);
}

/* `n` ints, each in [lo, MAX_EXTENT). */
static int parse_ints(PyObject *obj, const char *what, int n, long long lo, long long *dst)
{
    if (parse_dims(obj, what, n, dst, NULL) < 0) return -1;
    for (int i = 0; i < n; i++) {
        if (dst[i] < lo || dst[i] >= MAX_EXTENT) {
            PyErr_Format(PyExc_ValueError, "%s[%d] = %lld is out of range", what, i, dst[i]);
            return -1;
        }
    }
    return 0;
}

/* The 4-d input (A, B, H, W) of a pooling op and its strides. */
static int parse_planes(PyObject *shape_obj, PyObject *strides_obj, long long *shape,
                        long long *strides)
{
    if (parse_ints(shape_obj, "shape", 4, 0, shape) < 0) return -1;
    if (parse_dims(strides_obj, "strides", 4, strides, NULL) < 0) return -1;
    long long total;
    if (__builtin_mul_overflow(shape[0], shape[1], &total) ||
        __builtin_mul_overflow(total, shape[2] * shape[3], &total) || total > PTRDIFF_MAX / 16) {
        PyErr_SetString(PyExc_ValueError, "shape has too many elements");
        return -1;
    }
    return 0;
}

static int parse_divisor(PyObject *obj, pool_t *g)
{
    g->has_override = obj != Py_None;
    if (!g->has_override) return 0;
    long long v;
    if (parse_int_entry(obj, "divisor_override", &v) < 0) return -1;
    if (v == 0) {
        PyErr_SetString(PyExc_ValueError, "divisor_override must not be zero");
        return -1;
    }
    g->divisor_override = v;
    return 0;
}

static void set_window(pool_t *g, const long long *win, int dilated)
{
    g->kh = win[0], g->kw = win[1], g->sh = win[2], g->sw = win[3];
    g->ph = win[4], g->pw = win[5];
    g->dh = dilated ? win[6] : 1, g->dw = dilated ? win[7] : 1;
}

static void set_planes(pool_t *g, const long long *shape, const long long *strides)
{
    g->A = shape[0], g->B = shape[1], g->H = shape[2], g->W = shape[3];
    g->sA = strides[0], g->sB = strides[1], g->sH = strides[2], g->sW = strides[3];
}

/* ---- running the pooling kernels ----------------------------------------------------------- */

/* fn over rows [0, rows) (per_row elements of work each) in blocks, without the GIL; on the
 * OpenMP threads when `work` elements are worth it. */
static void run_rows(rows_fn fn, const pool_t *g, ptrdiff_t rows, ptrdiff_t per_row,
                     double work)
{
    Py_BEGIN_ALLOW_THREADS
    const int par = parallel_ok(work);
    FOR_BLOCKS(rows, per_row, par, fn(g, lo, hi));
    Py_END_ALLOW_THREADS
}

/* fn over units [0, units) (per_unit elements of work each) in blocks, without the GIL, each
 * thread with its own `scratch_n` doubles of scratch. -1 with MemoryError set when the
 * scratch cannot be had (nothing runs). */
static int run_with_scratch(scratch_rows_fn fn, const pool_t *g, ptrdiff_t units,
                            ptrdiff_t per_unit, double work, size_t scratch_n)
{
    const int par = parallel_ok(work);
    const size_t per_thread = scratch_doubles(scratch_n);
    double *scratch = scratch_alloc(per_thread, thread_count(par));
    if (scratch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    FOR_BLOCKS(units, per_unit, par, fn(g, lo, hi, scratch + per_thread * thread_id()));
    Py_END_ALLOW_THREADS
    free(scratch);
    return 0;
}

/* The pooled operand (args[0], args[1]: x or grad, over shape / strides) and the contiguous
 * result `out_obj` of n_out elements, both of `type`, held in h; into g->x and g->out. */
static int pool_operands(held_t *h, PyObject *const *args, const char *in_name,
                         const long long *shape, const long long *strides, int type,
                         PyObject *out_obj, const char *out_name, long long n_out, pool_t *g)
{
    char *x, *out;
    if (kind_operand(h, args[0], args[1], 4, shape, strides, 0, type, 0, in_name, &x) < 0 ||
        contiguous_operand(h, out_obj, NULL, n_out, 1, type, 0, out_name, &out) < 0)
        return -1;
    g->x = x, g->out = out;
    return 0;
}

/* ---- pooling entry points ----------------------------------------------------------------- */

static PyObject *py_max_pool2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "max_pool2d() takes 8 arguments (x, x_off, shape, "
                     "strides, window, out_size, values, indices), got %zd", nargs);
        return NULL;
    }
    long long shape[4], strides[4], win[8], osz[2];
    if (parse_planes(args[2], args[3], shape, strides) < 0 ||
        parse_ints(args[4], "window", 8, 0, win) < 0 ||
        parse_ints(args[5], "out_size", 2, 0, osz) < 0)
        return NULL;
    if (win[0] < 1 || win[1] < 1 || win[2] < 1 || win[3] < 1 || win[6] < 1 || win[7] < 1) {
        PyErr_SetString(PyExc_ValueError, "kernel size, stride and dilation must be positive");
        return NULL;
    }
    int type = float_kind_of(args[0], "x");
    if (type < 0) return NULL;
    pool_t g = {0};
    set_planes(&g, shape, strides);
    set_window(&g, win, 1);
    g.OH = osz[0], g.OW = osz[1];
    const ptrdiff_t planes = g.A * g.B, n_out = planes * g.OH * g.OW;
    held_t h = {.held = 0};
    char *indices;
    if (pool_operands(&h, args, "x", shape, strides, type, args[6], "values", n_out, &g) < 0 ||
        contiguous_operand(&h, args[7], NULL, n_out, 1, KIND_I64, 0, "indices", &indices) < 0) {
        release_held(&h);
        return NULL;
    }
    g.idx = (int64_t *)indices;
    /* Rows of fewer than 32 outputs run faster as AVX2 than as AVX-512 (one 16-lane vector
     * and a long epilogue): 2x2 pooling of 56-wide planes measured 0.18 vs 0.24 ms (112-wide:
     * 0.23 vs 0.17). Every clone computes the same bits. */
    const int isa = g_isa == ISA_AVX512F && g.OW < 32 ? ISA_AVX2 : g_isa;
    const kernels_t *k = &KERNELS_BY[isa][type];
    g_calls++;
    if (n_out > 0)
        run_rows(k->max_rows, &g, planes * g.OH, g.OW * g.kh * g.kw,
                 (double)n_out * g.kh * g.kw);
    release_held(&h);
    Py_RETURN_NONE;
}

/* The max-pool gradient: zeros, then grad[p, o] added at indices[p, o] of plane p, outputs
 * in row-major order (np.add.at's order, so sums of repeated indices round alike). An index
 * outside [0, H*W) stops the plane and raises IndexError (nothing outside `out` is written). */
typedef struct {
    const char *g, *idx;
    ptrdiff_t B, OH, OW, gA, gB, gH, gW, iA, iB, iH, iW, HW;
    char *out;
    int type;
    int bad;                /* some plane met an out-of-range index (set atomically) */
} max_backward_t;

static void max_backward_planes(max_backward_t *m, ptrdiff_t lo, ptrdiff_t hi)
{
    for (ptrdiff_t p = lo; p < hi; p++) {
        const ptrdiff_t a = p / m->B, b = p % m->B;
        const int64_t *ip = (const int64_t *)m->idx + a * m->iA + b * m->iB;
        if (m->type == T_F32) {
            const float *gp = (const float *)m->g + a * m->gA + b * m->gB;
            float *o = (float *)m->out + p * m->HW;
            for (ptrdiff_t e = 0; e < m->HW; e++) o[e] = 0;
            for (ptrdiff_t oh = 0; oh < m->OH; oh++)
                for (ptrdiff_t ow = 0; ow < m->OW; ow++) {
                    const int64_t k = ip[oh * m->iH + ow * m->iW];
                    if (k < 0 || k >= m->HW) {
                        __atomic_store_n(&m->bad, 1, __ATOMIC_RELAXED);
                        return;
                    }
                    o[k] += gp[oh * m->gH + ow * m->gW];
                }
        } else {
            const double *gp = (const double *)m->g + a * m->gA + b * m->gB;
            double *o = (double *)m->out + p * m->HW;
            for (ptrdiff_t e = 0; e < m->HW; e++) o[e] = 0;
            for (ptrdiff_t oh = 0; oh < m->OH; oh++)
                for (ptrdiff_t ow = 0; ow < m->OW; ow++) {
                    const int64_t k = ip[oh * m->iH + ow * m->iW];
                    if (k < 0 || k >= m->HW) {
                        __atomic_store_n(&m->bad, 1, __ATOMIC_RELAXED);
                        return;
                    }
                    o[k] += gp[oh * m->gH + ow * m->gW];
                }
        }
    }
}

static PyObject *py_max_pool2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "max_pool2d_backward() takes 9 arguments (grad, g_off, "
                     "grad_shape, grad_strides, indices, i_off, i_strides, in_size, out), "
                     "got %zd", nargs);
        return NULL;
    }
    long long gshape[4], gstrides[4], istrides[4], isz[2];
    if (parse_planes(args[2], args[3], gshape, gstrides) < 0 ||
        parse_dims(args[6], "i_strides", 4, istrides, NULL) < 0 ||
        parse_ints(args[7], "in_size", 2, 0, isz) < 0)
        return NULL;
    int type = float_kind_of(args[0], "grad");
    if (type < 0) return NULL;
    max_backward_t m = {0};
    m.B = gshape[1], m.OH = gshape[2], m.OW = gshape[3], m.HW = isz[0] * isz[1];
    m.gA = gstrides[0], m.gB = gstrides[1], m.gH = gstrides[2], m.gW = gstrides[3];
    m.iA = istrides[0], m.iB = istrides[1], m.iH = istrides[2], m.iW = istrides[3];
    m.type = type, m.bad = 0;
    const ptrdiff_t planes = gshape[0] * gshape[1], n_in = planes * m.HW;
    held_t h = {.held = 0};
    char *grad, *indices, *out;
    if (kind_operand(&h, args[0], args[1], 4, gshape, gstrides, 0, type, 0, "grad", &grad) < 0 ||
        kind_operand(&h, args[4], args[5], 4, gshape, istrides, 0, KIND_I64, 0, "indices",
                &indices) < 0 ||
        contiguous_operand(&h, args[8], NULL, n_in, 1, type, 0, "out", &out) < 0) {
        release_held(&h);
        return NULL;
    }
    m.g = grad, m.idx = indices, m.out = out;
    g_calls++;
    if (planes * m.OH * m.OW > 0) {
        Py_BEGIN_ALLOW_THREADS
        const int par = parallel_ok((double)n_in);
        FOR_BLOCKS(planes, m.HW, par, max_backward_planes(&m, lo, hi));
        Py_END_ALLOW_THREADS
    }
    if (m.bad) {   /* name the first bad index in (plane, output) order */
        long long first = 0;
        for (ptrdiff_t p = 0, found = 0; p < planes && !found; p++)
            for (ptrdiff_t o = 0; o < m.OH * m.OW && !found; o++) {
                const int64_t k = ((const int64_t *)indices)[(p / m.B) * m.iA + (p % m.B) * m.iB +
                                                             (o / m.OW) * m.iH + (o % m.OW) * m.iW];
                if (k < 0 || k >= m.HW) first = k, found = 1;
            }
        release_held(&h);
        PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for dimension 1 with "
                     "size %lld", first, (long long)m.HW);
        return NULL;
    }
    release_held(&h);
    Py_RETURN_NONE;
}

/* The arguments avg_pool2d and its backward share: args[0..3] the (grad or input) operand's
 * buffer, offset, shape and strides; args[4] the window; args[5] the other side's spatial
 * size; args[6..7] count_include_pad and divisor_override. Fills shape, strides, win, size
 * and g's window settings; returns the element kind, or -1 with an exception set. */
static int parse_avg_args(PyObject *const *args, const char *operand_name, const char *size_name,
                          long long shape[4], long long strides[4], long long win[6],
                          long long size[2], pool_t *g)
{
    if (parse_planes(args[2], args[3], shape, strides) < 0 ||
        parse_ints(args[4], "window", 6, 0, win) < 0 ||
        parse_ints(args[5], size_name, 2, 0, size) < 0)
        return -1;
    if (win[0] < 1 || win[1] < 1 || win[2] < 1 || win[3] < 1) {
        PyErr_SetString(PyExc_ValueError, "kernel size and stride must be positive");
        return -1;
    }
    g->count_include_pad = PyObject_IsTrue(args[6]);
    if (g->count_include_pad < 0 || parse_divisor(args[7], g) < 0) return -1;
    return float_kind_of(args[0], operand_name);
}

static PyObject *py_avg_pool2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "avg_pool2d() takes 9 arguments (x, x_off, shape, "
                     "strides, window, out_size, count_include_pad, divisor_override, out), "
                     "got %zd", nargs);
        return NULL;
    }
    long long shape[4], strides[4], win[6], osz[2];
    pool_t g = {0};
    const int type = parse_avg_args(args, "x", "out_size", shape, strides, win, osz, &g);
    if (type < 0) return NULL;
    set_planes(&g, shape, strides);
    set_window(&g, win, 0);
    g.OH = osz[0], g.OW = osz[1];
    const ptrdiff_t planes = g.A * g.B, n_out = planes * g.OH * g.OW;
    held_t h = {.held = 0};
    if (pool_operands(&h, args, "x", shape, strides, type, args[8], "out", n_out, &g) < 0) {
        release_held(&h);
        return NULL;
    }
    const kernels_t *k = &KERNELS_BY[g_isa][type];
    g_calls++;
    if (n_out > 0)
        run_rows(k->avg_rows, &g, planes * g.OH, g.OW * g.kh * g.kw,
                 (double)n_out * g.kh * g.kw);
    release_held(&h);
    Py_RETURN_NONE;
}

static PyObject *py_avg_pool2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "avg_pool2d_backward() takes 9 arguments (grad, g_off, "
                     "grad_shape, grad_strides, window, in_size, count_include_pad, "
                     "divisor_override, out), got %zd", nargs);
        return NULL;
    }
    long long gshape[4], gstrides[4], win[6], isz[2];
    pool_t g = {0};
    const int type = parse_avg_args(args, "grad", "in_size", gshape, gstrides, win, isz, &g);
    if (type < 0) return NULL;
    set_planes(&g, gshape, gstrides);
    g.OH = gshape[2], g.OW = gshape[3], g.H = isz[0], g.W = isz[1];
    set_window(&g, win, 0);
    const ptrdiff_t planes = g.A * g.B, n_in = planes * g.H * g.W;
    held_t h = {.held = 0};
    if (pool_operands(&h, args, "grad", gshape, gstrides, type, args[8], "out", n_in, &g) < 0) {
        release_held(&h);
        return NULL;
    }
    const kernels_t *k = &KERNELS_BY[g_isa][type];
    g_calls++;
    int failed = 0;
    if (n_in > 0)
        failed = run_with_scratch(k->avg_backward_rows, &g, planes * g.H, g.W, (double)n_in,
                                  (size_t)(g.W + g.OW)) < 0;
    release_held(&h);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

/* PyTorch's adaptive bins along one dim: [floor(i*size/n), ceil((i+1)*size/n)). */
static ptrdiff_t adaptive_bins(ptrdiff_t size, ptrdiff_t n, ptrdiff_t *start, ptrdiff_t *len)
{
    ptrdiff_t longest = 0;
    for (ptrdiff_t i = 0; i < n; i++) {
        start[i] = i * size / n;
        len[i] = ((i + 1) * size + n - 1) / n - start[i];
        if (len[i] > longest) longest = len[i];
    }
    return longest;
}

static ptrdiff_t *set_bins(pool_t *g)
{
    ptrdiff_t *bins = malloc(sizeof(ptrdiff_t) * (size_t)(2 * (g->OH + g->OW) + 1));
    if (bins == NULL) return NULL;
    g->max_hlen = adaptive_bins(g->H, g->OH, bins, bins + g->OH);
    g->max_wlen = adaptive_bins(g->W, g->OW, bins + 2 * g->OH, bins + 2 * g->OH + g->OW);
    g->bins = bins;
    g->disjoint = 1;
    for (ptrdiff_t i = 0; i + 1 < g->OH; i++)
        if (bins[i + 1] < bins[i] + bins[g->OH + i]) g->disjoint = 0;
    for (ptrdiff_t i = 0; i + 1 < g->OW; i++)
        if (bins[2 * g->OH + i + 1] < bins[2 * g->OH + i] + bins[2 * g->OH + g->OW + i])
            g->disjoint = 0;
    return bins;
}

/* The arguments adaptive_avg_pool2d and its backward share: args[0..3] the pooled operand's
 * (x or grad) buffer, offset, shape and strides, args[4] the other side's spatial size.
 * Returns the element kind, or -1 with an exception set. */
static int parse_adaptive_args(PyObject *const *args, const char *operand_name,
                               const char *size_name, long long shape[4], long long strides[4],
                               long long size[2])
{
    if (parse_planes(args[2], args[3], shape, strides) < 0 ||
        parse_ints(args[4], size_name, 2, 0, size) < 0)
        return -1;
    return float_kind_of(args[0], operand_name);
}

/* The operands (out = args[5], n_out elements) held in h, then the bins (g->bins, which the
 * caller frees). */
static int adaptive_operands(held_t *h, PyObject *const *args, const char *operand_name,
                             const long long *shape, const long long *strides, int type,
                             long long n_out, pool_t *g)
{
    if (pool_operands(h, args, operand_name, shape, strides, type, args[5], "out", n_out, g) < 0)
        return -1;
    if (set_bins(g) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static PyObject *py_adaptive_avg_pool2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "adaptive_avg_pool2d() takes 6 arguments (x, x_off, "
                     "shape, strides, out_size, out), got %zd", nargs);
        return NULL;
    }
    long long shape[4], strides[4], osz[2];
    const int type = parse_adaptive_args(args, "x", "out_size", shape, strides, osz);
    if (type < 0) return NULL;
    pool_t g = {0};
    set_planes(&g, shape, strides);
    g.OH = osz[0], g.OW = osz[1];
    const ptrdiff_t planes = g.A * g.B, n_out = planes * g.OH * g.OW;
    held_t h = {.held = 0};
    if (adaptive_operands(&h, args, "x", shape, strides, type, n_out, &g) < 0) {
        release_held(&h);
        return NULL;
    }
    const kernels_t *k = &KERNELS_BY[g_isa][type];
    g_calls++;
    if (n_out > 0 && g.H > 0 && g.W > 0) {
        const ptrdiff_t per_row = g.OW * g.max_hlen * g.max_wlen;
        run_rows(k->adaptive_rows, &g, planes * g.OH, per_row, (double)planes * g.OH * per_row);
    }
    free((void *)g.bins);
    release_held(&h);
    Py_RETURN_NONE;
}

static PyObject *py_adaptive_avg_pool2d_backward(PyObject *self, PyObject *const *args,
                                                 Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "adaptive_avg_pool2d_backward() takes 6 arguments "
                     "(grad, g_off, grad_shape, grad_strides, in_size, out), got %zd", nargs);
        return NULL;
    }
    long long gshape[4], gstrides[4], isz[2];
    const int type = parse_adaptive_args(args, "grad", "in_size", gshape, gstrides, isz);
    if (type < 0) return NULL;
    pool_t g = {0};
    set_planes(&g, gshape, gstrides);
    g.OH = gshape[2], g.OW = gshape[3], g.H = isz[0], g.W = isz[1];
    const ptrdiff_t planes = g.A * g.B, n_in = planes * g.H * g.W;
    held_t h = {.held = 0};
    if (adaptive_operands(&h, args, "grad", gshape, gstrides, type, n_in, &g) < 0) {
        release_held(&h);
        return NULL;
    }
    const kernels_t *k = &KERNELS_BY[g_isa][type];
    g_calls++;
    int failed = 0;
    if (n_in > 0) {
        const ptrdiff_t per_plane = g.H * g.W + g.OH * g.OW * g.max_hlen * g.max_wlen;
        failed = run_with_scratch(k->adaptive_backward_planes, &g, planes, per_plane,
                                  (double)planes * per_plane,
                                  (size_t)(g.H * g.W + g.OH * g.OW)) < 0;
    }
    free((void *)g.bins);
    release_held(&h);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

/* ---- normalization ------------------------------------------------------------------------ */

/* Normalization statistics. Each statistic (a channel for batch norm, a (sample, group)
 * for group norm) is the sum of its planes' sums (16-lane double sums, see the template)
 * added in plane order, divided by the count: pass 0 gives the mean, rounded to the type;
 * pass 1 the sum of the rounded squared deviations from it, the variance (rounded to the
 * type for float32) and rstd = 1 / sqrt(var + eps) in the type.
 *
 * Two schedules compute the same bits: with many statistics each one runs all its passes
 * and then the output of its planes back to back (its planes stay in cache; statistics
 * are spread over threads); with few (a batch norm over 3 channels) each pass runs over all
 * planes in parallel, then the statistics are combined. */
#define FUSED_MIN_STATS 16

/* The planes of statistic s: count, first plane index, step between them. */
static inline ptrdiff_t stat_planes(const norm_t *n, ptrdiff_t s, ptrdiff_t *first,
                                    ptrdiff_t *step)
{
    if (n->stat_a == 0) {   /* batch norm: plane (a, s) for every a */
        *first = s, *step = n->B;
        return n->A;
    }
    const ptrdiff_t groups = n->stat_a, per_group = n->stat_div;
    *first = (s / groups) * n->B + (s % groups) * per_group, *step = 1;
    return per_group;
}

static void finish_stat(const norm_t *n, int type, int pass, ptrdiff_t s, double sum,
                        double count, double eps, double *var)
{
    const double v = sum / count;
    if (type == T_F32) {
        if (pass == 0) {
            ((float *)n->mean)[s] = (float)v;
        } else {
            const float var32 = (float)v;
            ((float *)n->rstd)[s] = 1.0f / sqrtf(var32 + (float)eps);
            var[s] = var32;
        }
    } else {
        if (pass == 0) {
            ((double *)n->mean)[s] = v;
        } else {
            ((double *)n->rstd)[s] = 1.0 / sqrt(v + eps);
            var[s] = v;
        }
    }
}

/* Statistics [lo, hi), each computed and applied to its planes in one go. */
static void fused_stats(const norm_t *n, const kernels_t *k, int type, ptrdiff_t lo,
                        ptrdiff_t hi, double count, double eps, double *var)
{
    for (ptrdiff_t s = lo; s < hi; s++) {
        ptrdiff_t first, step;
        const ptrdiff_t planes = stat_planes(n, s, &first, &step);
        for (int pass = 0; pass < 2; pass++) {
            double acc = 0;
            for (ptrdiff_t j = 0; j < planes; j++) {
                const ptrdiff_t p = first + j * step;
                (pass ? k->square_sums : k->sums)(n, p, p + 1);
                acc += n->plane_sums[p];
            }
            finish_stat(n, type, pass, s, acc, count, eps, var);
        }
        for (ptrdiff_t j = 0; j < planes; j++) {
            const ptrdiff_t p = first + j * step;
            k->apply(n, p, p + 1);
        }
    }
}

/* The statistics (mean, rstd into n->mean / n->rstd; variances into var) and the output.
 * n->plane_sums must hold A * B doubles. */
static void normalize(const norm_t *n, const kernels_t *k, int type, ptrdiff_t stats,
                      double count, double eps, double *var)
{
    const ptrdiff_t planes = n->A * n->B;
    const int par = parallel_ok((double)planes * n->L);
    if (stats >= FUSED_MIN_STATS) {
        FOR_BLOCKS(stats, planes / stats * n->L, par,
                   fused_stats(n, k, type, lo, hi, count, eps, var));
        return;
    }
    for (int pass = 0; pass < 2; pass++) {
        FOR_BLOCKS(planes, n->L, par, (pass ? k->square_sums : k->sums)(n, lo, hi));
        for (ptrdiff_t s = 0; s < stats; s++) {
            ptrdiff_t first, step;
            const ptrdiff_t count_s = stat_planes(n, s, &first, &step);
            double acc = 0;
            for (ptrdiff_t j = 0; j < count_s; j++) acc += n->plane_sums[first + j * step];
            finish_stat(n, type, pass, s, acc, count, eps, var);
        }
    }
    FOR_BLOCKS(planes, n->L, par, k->apply(n, lo, hi));
}

/* normalize() with its scratch (A * B plane sums, `stats` variances). Returns the variances
 * (for the caller to use and free), or NULL when the scratch cannot be had (nothing is
 * computed). Needs no GIL. */
static double *normalize_with_scratch(norm_t *n, const kernels_t *k, int type, ptrdiff_t stats,
                                      double count, double eps)
{
    const ptrdiff_t planes = n->A * n->B;
    n->plane_sums = malloc(sizeof(double) * (size_t)(planes > 0 ? planes : 1));
    double *var = malloc(sizeof(double) * (size_t)(stats > 0 ? stats : 1));
    if (n->plane_sums != NULL && var != NULL) {
        normalize(n, k, type, stats, count, eps, var);
    } else {
        free(var);
        var = NULL;
    }
    free(n->plane_sums);
    n->plane_sums = NULL;
    return var;
}

/* The normalized input x (args[0], args[1]; (A, B, L) at strides xs) and the optional
 * weight and bias (B elements each; buffer and offset at args[wb], args[wb + 1] and
 * args[wb + 2], args[wb + 3]), held in h. */
static int norm_inputs(held_t *h, PyObject *const *args, int wb, const long long shape[3],
                       const long long xs[3], int type, char **x, char **w, char **bias)
{
    const long long B = shape[1];
    if (kind_operand(h, args[0], args[1], 3, shape, xs, 0, type, 0, "x", x) < 0 ||
        contiguous_operand(h, args[wb], args[wb + 1], B, 0, type, 1, "weight", w) < 0 ||
        contiguous_operand(h, args[wb + 2], args[wb + 3], B, 0, type, 1, "bias", bias) < 0)
        return -1;
    return 0;
}

/* batch_norm_backward: training-mode gradients of batch norm for channels [lo, hi). Per
 * channel c, with x_hat = (x - mean) * rstd (in the element type, as the reference) and
 * sums over the channel's N x L elements in double:
 *   grad_bias = sum g,  grad_weight = sum g x_hat,
 *   grad_input = rstd (w g - w sum g / count - x_hat w sum g x_hat / count)
 * (w = weight[c], or 1), the last in double, rounded once. */
typedef struct {
    const char *g, *x, *w, *mean, *rstd;
    ptrdiff_t N, C, L, gN, gC, xN, xC;
    char *out, *grad_weight, *grad_bias;
} bn_backward_t;

#define DEFINE_BN_BACKWARD(T, SFX)                                                           \
    static void bn_backward_##SFX(const bn_backward_t *b, ptrdiff_t lo, ptrdiff_t hi)        \
    {                                                                                        \
        for (ptrdiff_t c = lo; c < hi; c++) {                                                \
            const T m = ((const T *)b->mean)[c], r = ((const T *)b->rstd)[c];               \
            const double w = b->w ? (double)((const T *)b->w)[c] : 1.0;                      \
            double sg = 0, sgx = 0;                                                          \
            for (ptrdiff_t n = 0; n < b->N; n++) {                                           \
                const T *g = (const T *)b->g + n * b->gN + c * b->gC;                        \
                const T *x = (const T *)b->x + n * b->xN + c * b->xC;                        \
                for (ptrdiff_t l = 0; l < b->L; l++) {                                       \
                    const T xh = (x[l] - m) * r;                                             \
                    sg += (double)g[l];                                                      \
                    sgx += (double)g[l] * (double)xh;                                        \
                }                                                                            \
            }                                                                                \
            if (b->grad_bias) ((T *)b->grad_bias)[c] = (T)sg;                                \
            if (b->grad_weight) ((T *)b->grad_weight)[c] = (T)sgx;                           \
            if (!b->out) continue;                                                           \
            const double count = (double)(b->N * b->L);                                      \
            const double mean_g = w * sg / count, mean_gx = w * sgx / count;                 \
            for (ptrdiff_t n = 0; n < b->N; n++) {                                           \
                const T *g = (const T *)b->g + n * b->gN + c * b->gC;                        \
                const T *x = (const T *)b->x + n * b->xN + c * b->xC;                        \
                T *o = (T *)b->out + (n * b->C + c) * b->L;                                  \
                for (ptrdiff_t l = 0; l < b->L; l++) {                                       \
                    const T xh = (x[l] - m) * r;                                             \
                    o[l] = (T)((double)r * (w * (double)g[l] - mean_g - (double)xh * mean_gx)); \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_BN_BACKWARD(float, f32)
DEFINE_BN_BACKWARD(double, f64)

/* batch_norm_backward(grad, g_off, g_strides, x, x_off, shape, x_strides, weight, w_off,
 *                     mean, rstd, out, grad_weight, grad_bias): training-mode batch norm
 * gradients of an (N, C, L) input whose L elements are unit-stride (g_strides, x_strides:
 * the (N, C) strides), given the forward's saved mean and rstd (C each). out (a contiguous
 * (N, C, L) buffer), grad_weight and grad_bias (C each) may each be None (not wanted);
 * weight None means 1. */
static PyObject *py_batch_norm_backward(PyObject *self, PyObject *const *args,
                                        Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 14) {
        PyErr_Format(PyExc_TypeError, "batch_norm_backward() takes 14 arguments (grad, g_off, "
                     "g_strides, x, x_off, shape, x_strides, weight, w_off, mean, rstd, out, "
                     "grad_weight, grad_bias), got %zd", nargs);
        return NULL;
    }
    long long shape[3], gst[2], xst[2];
    if (parse_ints(args[5], "shape", 3, 0, shape) < 0 ||
        parse_dims(args[2], "g_strides", 2, gst, NULL) < 0 ||
        parse_dims(args[6], "x_strides", 2, xst, NULL) < 0)
        return NULL;
    int type = float_kind_of(args[3], "x");
    if (type < 0) return NULL;
    const long long N = shape[0], C = shape[1], L = shape[2];
    const long long gs[3] = {gst[0], gst[1], 1}, xs[3] = {xst[0], xst[1], 1};
    const long long os[3] = {C * L, L, 1};
    held_t h = {.held = 0};
    char *g, *x, *w, *mean, *rstd, *out, *gw, *gb;
    if (kind_operand(&h, args[0], args[1], 3, shape, gs, 0, type, 0, "grad", &g) < 0 ||
        kind_operand(&h, args[3], args[4], 3, shape, xs, 0, type, 0, "x", &x) < 0 ||
        contiguous_operand(&h, args[7], args[8], C, 0, type, 1, "weight", &w) < 0 ||
        contiguous_operand(&h, args[9], NULL, C, 0, type, 0, "mean", &mean) < 0 ||
        contiguous_operand(&h, args[10], NULL, C, 0, type, 0, "rstd", &rstd) < 0 ||
        kind_operand(&h, args[11], NULL, 3, shape, os, 1, type, 1, "out", &out) < 0 ||
        contiguous_operand(&h, args[12], NULL, C, 1, type, 1, "grad_weight", &gw) < 0 ||
        contiguous_operand(&h, args[13], NULL, C, 1, type, 1, "grad_bias", &gb) < 0) {
        release_held(&h);
        return NULL;
    }
    if (N * L == 0) {
        PyErr_SetString(PyExc_ValueError, "batch statistics of no elements");
        release_held(&h);
        return NULL;
    }
    bn_backward_t b = {.g = g, .x = x, .w = w, .mean = mean, .rstd = rstd, .N = N, .C = C,
                       .L = L, .gN = gs[0], .gC = gs[1], .xN = xs[0], .xC = xs[1], .out = out,
                       .grad_weight = gw, .grad_bias = gb};
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    const int par = parallel_ok((double)(N * C * L));
    if (type == T_F32)
        FOR_BLOCKS(C, N * L, par, bn_backward_f32(&b, lo, hi));
    else
        FOR_BLOCKS(C, N * L, par, bn_backward_f64(&b, lo, hi));
    Py_END_ALLOW_THREADS
    release_held(&h);
    Py_RETURN_NONE;
}

static PyObject *py_batch_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 19) {
        PyErr_Format(PyExc_TypeError, "batch_norm() takes 19 arguments (x, x_off, shape, "
                     "strides, weight, w_off, bias, b_off, running_mean, rm_off, running_var, "
                     "rv_off, training, momentum, eps, out, out_strides, save_mean, "
                     "save_rstd), got %zd", nargs);
        return NULL;
    }
    long long shape[3], pstrides[2], ostrides[2];
    if (parse_ints(args[2], "shape", 3, 0, shape) < 0 ||
        parse_dims(args[3], "strides", 2, pstrides, NULL) < 0 ||
        parse_dims(args[16], "out_strides", 2, ostrides, NULL) < 0)
        return NULL;
    const int training = PyObject_IsTrue(args[12]);
    if (training < 0) return NULL;
    const double momentum = PyFloat_AsDouble(args[13]), eps = PyFloat_AsDouble(args[14]);
    if (PyErr_Occurred()) return NULL;
    int type = float_kind_of(args[0], "x");
    if (type < 0) return NULL;
    const long long A = shape[0], B = shape[1], L = shape[2];
    const long long xs[3] = {pstrides[0], pstrides[1], 1}, os[3] = {ostrides[0], ostrides[1], 1};
    held_t h = {.held = 0};
    char *x, *w, *bias, *rm, *rv, *out, *save_mean, *save_rstd;
    if (norm_inputs(&h, args, 4, shape, xs, type, &x, &w, &bias) < 0 ||
        contiguous_operand(&h, args[8], args[9], B, training, type, training, "running_mean",
                           &rm) < 0 ||
        contiguous_operand(&h, args[10], args[11], B, training, type, training,
                           "running_var", &rv) < 0 ||
        kind_operand(&h, args[15], NULL, 3, shape, os, 1, type, 0, "out", &out) < 0 ||
        contiguous_operand(&h, args[17], NULL, B, 1, type, 0, "save_mean", &save_mean) < 0 ||
        contiguous_operand(&h, args[18], NULL, B, 1, type, 0, "save_rstd", &save_rstd) < 0) {
        release_held(&h);
        return NULL;
    }
    if ((rm == NULL) != (rv == NULL)) {
        PyErr_SetString(PyExc_ValueError, "running_mean and running_var go together");
        release_held(&h);
        return NULL;
    }
    if (training && A * L == 0) {
        PyErr_SetString(PyExc_ValueError, "batch statistics of no elements");
        release_held(&h);
        return NULL;
    }
    norm_t n = {.x = x, .A = A, .B = B, .L = L, .sA = xs[0], .sB = xs[1], .out = out,
                .oA = os[0], .oB = os[1], .w = w, .bias = bias, .stat_a = 0, .stat_div = 1};
    const kernels_t *k = &KERNELS_BY[g_isa][type];
    g_calls++;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    if (training) {
        const double count = (double)(A * L);
        n.mean = save_mean, n.rstd = save_rstd;
        double *var = normalize_with_scratch(&n, k, type, B, count, eps);
        failed = var == NULL;
        if (!failed && rm != NULL) {
            /* the reference's update, rounded as NumPy does with Python-float scalars: each
             * scalar is first rounded to the element type */
            const double factor = A * L > 1 ? count / (count - 1) : INFINITY;
            for (ptrdiff_t c = 0; c < B; c++) {
                if (type == T_F32) {
                    float *m = (float *)rm, *v = (float *)rv;
                    const float keep = (float)(1 - momentum), mom = (float)momentum;
                    const float unbiased = (float)var[c] * (float)factor;
                    m[c] = keep * m[c] + mom * ((float *)save_mean)[c];
                    v[c] = keep * v[c] + mom * unbiased;
                } else {
                    double *m = (double *)rm, *v = (double *)rv;
                    const double keep = 1 - momentum;
                    m[c] = keep * m[c] + momentum * ((double *)save_mean)[c];
                    v[c] = keep * v[c] + momentum * (var[c] * factor);
                }
            }
        }
        free(var);
    } else {
        /* evaluation: the running statistics, rstd = 1 / sqrt(var + eps) in the type */
        for (ptrdiff_t c = 0; c < B; c++) {
            if (type == T_F32) {
                ((float *)save_mean)[c] = ((float *)rm)[c];
                ((float *)save_rstd)[c] = 1.0f / sqrtf(((float *)rv)[c] + (float)eps);
            } else {
                ((double *)save_mean)[c] = ((double *)rm)[c];
                ((double *)save_rstd)[c] = 1.0 / sqrt(((double *)rv)[c] + eps);
            }
        }
        n.mean = save_mean, n.rstd = save_rstd;
        const int par = parallel_ok((double)A * B * L);
        FOR_BLOCKS(A * B, L, par, k->apply(&n, lo, hi));
    }
    Py_END_ALLOW_THREADS
    release_held(&h);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *py_group_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 14) {
        PyErr_Format(PyExc_TypeError, "group_norm() takes 14 arguments (x, x_off, shape, "
                     "strides, groups, weight, w_off, bias, b_off, eps, out, out_strides, "
                     "mean, rstd), got %zd", nargs);
        return NULL;
    }
    long long shape[3], pstrides[2], ostrides[2], groups;
    if (parse_ints(args[2], "shape", 3, 0, shape) < 0 ||
        parse_dims(args[3], "strides", 2, pstrides, NULL) < 0 ||
        parse_offset(args[4], "groups", &groups) < 0 ||
        parse_dims(args[11], "out_strides", 2, ostrides, NULL) < 0)
        return NULL;
    const double eps = PyFloat_AsDouble(args[9]);
    if (PyErr_Occurred()) return NULL;
    const long long A = shape[0], B = shape[1], L = shape[2];
    if (groups < 1 || B % groups != 0 || B / groups * L == 0) {
        PyErr_SetString(PyExc_ValueError, "groups must divide the channels into non-empty "
                        "groups");
        return NULL;
    }
    int type = float_kind_of(args[0], "x");
    if (type < 0) return NULL;
    const long long xs[3] = {pstrides[0], pstrides[1], 1}, os[3] = {ostrides[0], ostrides[1], 1};
    held_t h = {.held = 0};
    char *x, *w, *bias, *out, *mean, *rstd;
    if (norm_inputs(&h, args, 5, shape, xs, type, &x, &w, &bias) < 0 ||
        kind_operand(&h, args[10], NULL, 3, shape, os, 1, type, 0, "out", &out) < 0 ||
        contiguous_operand(&h, args[12], NULL, A * groups, 1, type, 0, "mean", &mean) < 0 ||
        contiguous_operand(&h, args[13], NULL, A * groups, 1, type, 0, "rstd", &rstd) < 0) {
        release_held(&h);
        return NULL;
    }
    const long long per_group = B / groups;
    norm_t n = {.x = x, .A = A, .B = B, .L = L, .sA = xs[0], .sB = xs[1], .out = out,
                .oA = os[0], .oB = os[1], .w = w, .bias = bias, .stat_a = groups,
                .stat_div = per_group};
    const kernels_t *k = &KERNELS_BY[g_isa][type];
    g_calls++;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    n.mean = mean, n.rstd = rstd;
    double *var = normalize_with_scratch(&n, k, type, A * groups, (double)(per_group * L), eps);
    failed = var == NULL;
    free(var);
    Py_END_ALLOW_THREADS
    release_held(&h);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"max_pool2d", (PyCFunction)(void (*)(void))py_max_pool2d, METH_FASTCALL,
     "max_pool2d(x, x_off, (A, B, H, W), x_strides, (kh, kw, sh, sw, ph, pw, dh, dw), "
     "(OH, OW), values, indices): values and flat in-plane int64 indices, contiguous."},
    {"max_pool2d_backward", (PyCFunction)(void (*)(void))py_max_pool2d_backward,
     METH_FASTCALL,
     "max_pool2d_backward(grad, g_off, (A, B, OH, OW), g_strides, indices, i_off, i_strides, "
     "(H, W), out): zeros plus grad added at each flat in-plane index (IndexError if one is "
     "outside the plane)."},
    {"avg_pool2d", (PyCFunction)(void (*)(void))py_avg_pool2d, METH_FASTCALL,
     "avg_pool2d(x, x_off, (A, B, H, W), x_strides, (kh, kw, sh, sw, ph, pw), (OH, OW), "
     "count_include_pad, divisor_override, out)"},
    {"avg_pool2d_backward", (PyCFunction)(void (*)(void))py_avg_pool2d_backward,
     METH_FASTCALL,
     "avg_pool2d_backward(grad, g_off, (A, B, OH, OW), g_strides, (kh, kw, sh, sw, ph, pw), "
     "(H, W), count_include_pad, divisor_override, out)"},
    {"adaptive_avg_pool2d", (PyCFunction)(void (*)(void))py_adaptive_avg_pool2d,
     METH_FASTCALL, "adaptive_avg_pool2d(x, x_off, (A, B, H, W), x_strides, (OH, OW), out)"},
    {"adaptive_avg_pool2d_backward",
     (PyCFunction)(void (*)(void))py_adaptive_avg_pool2d_backward, METH_FASTCALL,
     "adaptive_avg_pool2d_backward(grad, g_off, (A, B, OH, OW), g_strides, (H, W), out)"},
    {"batch_norm_backward", (PyCFunction)(void (*)(void))py_batch_norm_backward, METH_FASTCALL,
     "batch_norm_backward(grad, g_off, g_strides, x, x_off, shape, x_strides, weight, w_off, "
     "mean, rstd, out, grad_weight, grad_bias): training-mode batch norm gradients; see "
     "src/pool.c."},
    {"batch_norm", (PyCFunction)(void (*)(void))py_batch_norm, METH_FASTCALL,
     "batch_norm(x, x_off, (N, C, L), (sN, sC), weight, w_off, bias, b_off, running_mean, "
     "rm_off, running_var, rv_off, training, momentum, eps, out, (oN, oC), save_mean, "
     "save_rstd): out, the saved statistics and (training) the running-stat update."},
    {"group_norm", (PyCFunction)(void (*)(void))py_group_norm, METH_FASTCALL,
     "group_norm(x, x_off, (N, C, L), (sN, sC), groups, weight, w_off, bias, b_off, eps, out, "
     "(oN, oC), mean, rstd)"},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._pool",
    .m_doc = "2-d pooling and batch / group normalization kernels for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__pool(void)
{
    if (init_module_state() < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "PARALLEL_MIN_ELEMENTS", PARALLEL_MIN_ELEMENTS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

#else /* POOL_TEMPLATE: the kernels for element type T and one instruction set ------------ */

#define FN(name) NAME(name) /* max_rows_f32_avx2, ... (isa_clones.h) */

/* best / idx over the outputs [lo, hi) of one row for one kernel offset: element
 * ow * step + c of `row` (element stride xs); the index stored is base + ow * step + c. */
ISA_ATTR static inline __attribute__((always_inline)) void FN(max_update)(
    T *best, int64_t *idx, const T *row, ptrdiff_t xs, ptrdiff_t step, ptrdiff_t c,
    int64_t base, ptrdiff_t lo, ptrdiff_t hi)
{
    for (ptrdiff_t ow = lo; ow < hi; ow++) {
        const ptrdiff_t iw = ow * step + c;
        const T v = row[iw * xs], b = best[ow];
        const int wins = (v > b) | (v != v);   /* larger, or NaN: a later NaN wins */
        best[ow] = wins ? v : b;
        idx[ow] = wins ? base + iw : idx[ow];
    }
}

/* The first element inside the input of a window starting at `start` (dilation d). */
static inline ptrdiff_t FN(first_inside)(ptrdiff_t start, ptrdiff_t d)
{
    return start >= 0 ? start : start + (-start + d - 1) / d * d;
}

/* Outputs [olo, ohi) of output row oh of one plane, any geometry: one pass per kernel
 * offset in (kh, kw) order over the outputs it reaches (the reference's order). */
ISA_ATTR static inline __attribute__((always_inline)) void FN(max_general)(
    const pool_t *g, const T *plane, ptrdiff_t oh, T *best, int64_t *idx, ptrdiff_t olo,
    ptrdiff_t ohi)
{
    const ptrdiff_t W = g->W, hstart = oh * g->sh - g->ph;
    const ptrdiff_t h0 = FN(first_inside)(hstart, g->dh);
    for (ptrdiff_t ow = olo; ow < ohi; ow++) {
        best[ow] = (T)-INFINITY;   /* nothing won yet: the first element's index */
        idx[ow] = (int64_t)(h0 * W + FN(first_inside)(ow * g->sw - g->pw, g->dw));
    }
    for (ptrdiff_t i = 0; i < g->kh; i++) {
        const ptrdiff_t ih = hstart + i * g->dh;
        if (ih < 0 || ih >= g->H) continue;
        const T *row = plane + ih * g->sH;
        const int64_t base = (int64_t)(ih * W);
        for (ptrdiff_t j = 0; j < g->kw; j++) {
            const ptrdiff_t c = j * g->dw - g->pw;
            ptrdiff_t a, b;
            valid_range(c, g->sw, W, ohi, &a, &b);
            if (a < olo) a = olo;
            if (g->sW == 1 && g->sw == 1)
                FN(max_update)(best, idx, row, 1, 1, c, base, a, b);
            else if (g->sW == 1 && g->sw == 2)
                FN(max_update)(best, idx, row, 1, 2, c, base, a, b);
            else
                FN(max_update)(best, idx, row, g->sW, g->sw, c, base, a, b);
        }
    }
}

/* Outputs [olo, ohi) whose K x K window (dilation 1, unit-stride rows) lies inside the
 * input: every offset's element read directly, in (kh, kw) order, vectorized over ow.
 * Starting from element (0, 0) instead of -inf changes nothing: it would win over -inf
 * unless it is -inf itself, whose index is the one kept then. */
ISA_ATTR static inline __attribute__((always_inline)) void FN(max_inner)(
    const T *top, ptrdiff_t sH, ptrdiff_t K, ptrdiff_t S, ptrdiff_t c, int64_t base,
    ptrdiff_t W, T *best, int64_t *idx, ptrdiff_t olo, ptrdiff_t ohi)
{
    for (ptrdiff_t ow = olo; ow < ohi; ow++) {
        const ptrdiff_t iw = ow * S + c;
        T b = top[iw];
        int64_t at = base + iw;
        for (ptrdiff_t i = 0; i < K; i++)
            for (ptrdiff_t j = 0; j < K; j++) {
                if (i == 0 && j == 0) continue;
                const T v = top[i * sH + iw + j];
                const int wins = (v > b) | (v != v);
                b = wins ? v : b;
                at = wins ? base + i * W + iw + j : at;
            }
        best[ow] = b;
        idx[ow] = at;
    }
}

/* One output whose kh x kw window (dilation 1, unit-stride rows) lies inside the input,
 * for windows too large for max_inner: the same result in two passes that do not chain
 * every comparison on the last. First the largest number (lane-wise maxima over each row's
 * whole vectors, then the rest; NaN never beats anything there) and whether a NaN is
 * there; then, in (kh, kw) order, the first element equal to it, as the single pass keeps
 * the first of equal elements; or, with a NaN, the last NaN, as each NaN wins over what
 * came before. Starting from -inf: a window of -inf gives its first element. */
#define WIN_BYTES (VBYTES < 32 ? VBYTES : 32)   /* (a row of 8 floats fills one vector) */
#if IS_F32
#define WIN_ITYPE int32_t
#else
#define WIN_ITYPE int64_t
#endif
typedef T FN(win_vec) __attribute__((vector_size(WIN_BYTES)));
typedef WIN_ITYPE FN(win_mask) __attribute__((vector_size(WIN_BYTES)));
typedef uint64_t FN(win_words) __attribute__((vector_size(WIN_BYTES)));
ISA_ATTR static inline __attribute__((always_inline)) void FN(max_window)(
    const T *top, ptrdiff_t sH, ptrdiff_t kh, ptrdiff_t kw, int64_t base, ptrdiff_t W,
    T *best, int64_t *idx)
{
    enum { L = WIN_BYTES / sizeof(T) };
    FN(win_vec) mv = (FN(win_vec)){0} + (T)-INFINITY;
    FN(win_mask) nans = {0};
    T m = (T)-INFINITY;
    int nan = 0;
    for (ptrdiff_t i = 0; i < kh; i++) {
        const T *row = top + i * sH;
        ptrdiff_t j = 0;
        for (; j + L <= kw; j += L) {
            FN(win_vec) v;
            memcpy(&v, row + j, sizeof v);
            const FN(win_mask) larger = v > mv;
            nans |= v != v;
            mv = (FN(win_vec))(((FN(win_mask))v & larger) | ((FN(win_mask))mv & ~larger));
        }
        for (; j < kw; j++) {
            nan |= row[j] != row[j];
            m = row[j] > m ? row[j] : m;
        }
    }
    for (int q = 0; q < L; q++) {
        nan |= nans[q] != 0;
        m = mv[q] > m ? mv[q] : m;
    }
    if (nan) {
        for (ptrdiff_t i = kh - 1; i >= 0; i--)
            for (ptrdiff_t j = kw - 1; j >= 0; j--)
                if (top[i * sH + j] != top[i * sH + j]) {
                    *best = top[i * sH + j];
                    *idx = base + i * W + j;
                    return;
                }
    }
    const FN(win_vec) mm = (FN(win_vec)){0} + m;
    for (ptrdiff_t i = 0; i < kh; i++) {
        const T *row = top + i * sH;
        ptrdiff_t j = 0;
        for (; j + L <= kw; j += L) {   /* whole vectors first: one test for L elements */
            FN(win_vec) v;
            memcpy(&v, row + j, sizeof v);
            const FN(win_words) equal = (FN(win_words))(v == mm);
            uint64_t any = 0;
            for (int q = 0; q < WIN_BYTES / 8; q++) any |= equal[q];
            if (any) break;
        }
        for (; j < kw; j++)
            if (row[j] == m) {
                *best = row[j];
                *idx = base + i * W + j;
                return;
            }
    }
}

/* Windows for max_window: dilation 1, unit-stride rows, at least 16 elements, strides
 * over 2. (For strides 1 and 2, max_general's passes run along the output row's elements,
 * vectorized: 2-3x faster than a window at a time on overlapping 4x4 and 5x5 windows;
 * with an 8x8 window of stride 8, a pass reads 7 elements 8 apart, and max_window took a
 * third of its time.) */
static inline int FN(window_case)(const pool_t *g)
{
    return g->sW == 1 && g->dh == 1 && g->dw == 1 && g->kh * g->kw >= 16 && g->sw > 2;
}

/* The square-window cases with their own loops: K x K, stride 1 or 2, dilation 1. */
static inline int FN(square_case)(const pool_t *g)
{
    return g->sW == 1 && g->dh == 1 && g->dw == 1 && g->kh == g->kw &&
           (g->kh == 2 || g->kh == 3) && g->sh == g->sw && (g->sw == 1 || g->sw == 2);
}

/* For an output row whose window rows all lie inside the input: the outputs [*a, *b)
 * whose window columns do too (the rest touch the padding). */
static inline int FN(inner_columns)(const pool_t *g, ptrdiff_t oh, ptrdiff_t *a, ptrdiff_t *b)
{
    const ptrdiff_t hstart = oh * g->sh - g->ph;
    if (hstart < 0 || hstart + g->kh > g->H) return 0;
    ptrdiff_t first = (g->pw + g->sw - 1) / g->sw;
    ptrdiff_t last = g->W - g->kw + g->pw >= 0 ? (g->W - g->kw + g->pw) / g->sw + 1 : 0;
    if (last > g->OW) last = g->OW;
    if (first > last) first = last;
    *a = first, *b = last;
    return first < last;
}

ISA_ATTR static void FN(max_rows)(const pool_t *g, ptrdiff_t lo, ptrdiff_t hi)
{
    const ptrdiff_t OH = g->OH, OW = g->OW, W = g->W;
    const int square = FN(square_case)(g), window = FN(window_case)(g);
    for (ptrdiff_t r = lo; r < hi; r++) {
        const ptrdiff_t p = r / OH, oh = r % OH;
        const T *plane = (const T *)g->x + (p / g->B) * g->sA + (p % g->B) * g->sB;
        T *best = (T *)g->out + r * OW;
        int64_t *idx = g->idx + r * OW;
        ptrdiff_t a, b;
        if (!(square || window) || !FN(inner_columns)(g, oh, &a, &b)) {
            FN(max_general)(g, plane, oh, best, idx, 0, OW);
            continue;
        }
        const ptrdiff_t ih = oh * g->sh - g->ph, c = -g->pw;
        const T *top = plane + ih * g->sH;
        const int64_t base = (int64_t)(ih * W);
        if (a > 0) FN(max_general)(g, plane, oh, best, idx, 0, a);
        if (!square) {
            for (ptrdiff_t ow = a; ow < b; ow++)
                FN(max_window)(top + ow * g->sw + c, g->sH, g->kh, g->kw,
                               base + ow * g->sw + c, W, best + ow, idx + ow);
            if (b < OW) FN(max_general)(g, plane, oh, best, idx, b, OW);
            continue;
        }
        if (g->kh == 2 && g->sw == 2)
            FN(max_inner)(top, g->sH, 2, 2, c, base, W, best, idx, a, b);
        else if (g->kh == 2)
            FN(max_inner)(top, g->sH, 2, 1, c, base, W, best, idx, a, b);
        else if (g->sw == 2)
            FN(max_inner)(top, g->sH, 3, 2, c, base, W, best, idx, a, b);
        else
            FN(max_inner)(top, g->sH, 3, 1, c, base, W, best, idx, a, b);
        if (b < OW) FN(max_general)(g, plane, oh, best, idx, b, OW);
    }
}

ISA_ATTR static inline __attribute__((always_inline)) void FN(add_row)(
    T *sum, const T *row, ptrdiff_t xs, ptrdiff_t step, ptrdiff_t c, ptrdiff_t lo, ptrdiff_t hi)
{
    for (ptrdiff_t ow = lo; ow < hi; ow++) sum[ow] += row[(ow * step + c) * xs];
}

/* Window sums of outputs [olo, ohi) of row oh, any geometry: one pass per kernel offset in
 * (kh, kw) order (the reference's), skipping padding (its zeros add nothing). */
ISA_ATTR static inline __attribute__((always_inline)) void FN(avg_general)(
    const pool_t *g, const T *plane, ptrdiff_t oh, T *sum, ptrdiff_t olo, ptrdiff_t ohi)
{
    const ptrdiff_t W = g->W, hstart = oh * g->sh - g->ph;
    for (ptrdiff_t ow = olo; ow < ohi; ow++) sum[ow] = 0;
    for (ptrdiff_t i = 0; i < g->kh; i++) {
        const ptrdiff_t ih = hstart + i;
        if (ih < 0 || ih >= g->H) continue;
        const T *row = plane + ih * g->sH;
        for (ptrdiff_t j = 0; j < g->kw; j++) {
            const ptrdiff_t c = j - g->pw;
            ptrdiff_t a, b;
            valid_range(c, g->sw, W, ohi, &a, &b);
            if (a < olo) a = olo;
            if (g->sW == 1 && g->sw == 1)
                FN(add_row)(sum, row, 1, 1, c, a, b);
            else if (g->sW == 1 && g->sw == 2)
                FN(add_row)(sum, row, 1, 2, c, a, b);
            else
                FN(add_row)(sum, row, g->sW, g->sw, c, a, b);
        }
    }
}

/* Sums of the K x K windows inside the input, in (kh, kw) order from 0 (as the reference:
 * 0 + x turns a -0 into +0). */
ISA_ATTR static inline __attribute__((always_inline)) void FN(avg_inner)(
    const T *top, ptrdiff_t sH, ptrdiff_t K, ptrdiff_t S, ptrdiff_t c, T *sum, ptrdiff_t olo,
    ptrdiff_t ohi)
{
    for (ptrdiff_t ow = olo; ow < ohi; ow++) {
        const ptrdiff_t iw = ow * S + c;
        T s = 0;
        for (ptrdiff_t i = 0; i < K; i++)
            for (ptrdiff_t j = 0; j < K; j++) s += top[i * sH + iw + j];
        sum[ow] = s;
    }
}

ISA_ATTR static void FN(avg_rows)(const pool_t *g, ptrdiff_t lo, ptrdiff_t hi)
{
    const ptrdiff_t OH = g->OH, OW = g->OW, W = g->W;
    const int square = FN(square_case)(g);
    for (ptrdiff_t r = lo; r < hi; r++) {
        const ptrdiff_t p = r / OH, oh = r % OH;
        const T *plane = (const T *)g->x + (p / g->B) * g->sA + (p % g->B) * g->sB;
        T *sum = (T *)g->out + r * OW;
        ptrdiff_t a, b;
        if (!square || !FN(inner_columns)(g, oh, &a, &b)) {
            FN(avg_general)(g, plane, oh, sum, 0, OW);
        } else {
            const ptrdiff_t c = -g->pw;
            const T *top = plane + (oh * g->sh - g->ph) * g->sH;
            FN(avg_general)(g, plane, oh, sum, 0, a);
            if (g->kh == 2 && g->sw == 2)
                FN(avg_inner)(top, g->sH, 2, 2, c, sum, a, b);
            else if (g->kh == 2)
                FN(avg_inner)(top, g->sH, 2, 1, c, sum, a, b);
            else if (g->sw == 2)
                FN(avg_inner)(top, g->sH, 3, 2, c, sum, a, b);
            else
                FN(avg_inner)(top, g->sH, 3, 1, c, sum, a, b);
            FN(avg_general)(g, plane, oh, sum, b, OW);
        }
        /* the reference divides the sum by an int64 divisor in double, then rounds; the
         * columns whose windows lie inside [0, W) share one divisor */
        ptrdiff_t pad_h, in_h, ca, cb;
        avg_extent(oh, g->kh, g->sh, g->ph, g->H, &pad_h, &in_h);
        valid_range(-g->pw, g->sw, W - g->kw + 1, OW, &ca, &cb);
        if (in_h > 0) {
            const double d = avg_divisor(g, pad_h, in_h, g->kw, g->kw);
            for (ptrdiff_t ow = ca; ow < cb; ow++) sum[ow] = (T)((double)sum[ow] / d);
        } else {
            ca = cb = 0;
        }
        for (ptrdiff_t ow = 0; ow < OW; ow++) {
            if (ow == ca) ow = cb;
            if (ow >= OW) break;
            ptrdiff_t pad_w, in_w;
            avg_extent(ow, g->kw, g->sw, g->pw, W, &pad_w, &in_w);
            sum[ow] = in_h * in_w > 0
                          ? (T)((double)sum[ow] / avg_divisor(g, pad_h, in_h, pad_w, in_w))
                          : (T)0;
        }
    }
}

ISA_ATTR static inline __attribute__((always_inline)) void FN(scatter_row)(
    double *acc, const double *share, ptrdiff_t step, ptrdiff_t c, ptrdiff_t lo, ptrdiff_t hi)
{
    for (ptrdiff_t ow = lo; ow < hi; ow++) acc[ow * step + c] += share[ow];
}

/* Input rows [lo, hi) of the avg-pool gradient: each element sums grad / divisor (double)
 * over the windows holding it, in (kh, kw) order as the reference adds offsets. scratch:
 * W + OW doubles. */
ISA_ATTR static void FN(avg_backward_rows)(const pool_t *g, ptrdiff_t lo, ptrdiff_t hi,
                                       double *scratch)
{
    const ptrdiff_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, sW = g->sW;
    double *acc = scratch, *share = scratch + W;
    ptrdiff_t ca, cb;   /* outputs whose windows lie inside [0, W): one divisor per row */
    valid_range(-g->pw, g->sw, W - g->kw + 1, OW, &ca, &cb);
    for (ptrdiff_t r = lo; r < hi; r++) {
        const ptrdiff_t p = r / H, ih = r % H;
        const T *gplane = (const T *)g->x + (p / g->B) * g->sA + (p % g->B) * g->sB;
        for (ptrdiff_t w = 0; w < W; w++) acc[w] = 0;
        for (ptrdiff_t i = 0; i < g->kh; i++) {
            const ptrdiff_t t = ih + g->ph - i;   /* = oh * sh for the output row using it */
            if (t < 0 || t % g->sh != 0 || t / g->sh >= OH) continue;
            const ptrdiff_t oh = t / g->sh;
            const T *grow = gplane + oh * g->sH;
            ptrdiff_t pad_h, in_h;
            avg_extent(oh, g->kh, g->sh, g->ph, H, &pad_h, &in_h);
            const double d = avg_divisor(g, pad_h, in_h, g->kw, g->kw);
            if (sW == 1) {
                for (ptrdiff_t ow = ca; ow < cb; ow++) share[ow] = (double)grow[ow] / d;
            } else {
                for (ptrdiff_t ow = ca; ow < cb; ow++) share[ow] = (double)grow[ow * sW] / d;
            }
            for (ptrdiff_t ow = 0; ow < OW; ow++) {
                if (ow == ca) ow = cb;
                if (ow >= OW) break;
                ptrdiff_t pad_w, in_w;
                avg_extent(ow, g->kw, g->sw, g->pw, W, &pad_w, &in_w);
                share[ow] = in_h * in_w > 0
                                ? (double)grow[ow * sW] / avg_divisor(g, pad_h, in_h, pad_w, in_w)
                                : 0.0;
            }
            for (ptrdiff_t j = 0; j < g->kw; j++) {
                const ptrdiff_t c = j - g->pw;
                ptrdiff_t a, b;
                valid_range(c, g->sw, W, OW, &a, &b);
                if (g->sw == 1)
                    FN(scatter_row)(acc, share, 1, c, a, b);
                else if (g->sw == 2)
                    FN(scatter_row)(acc, share, 2, c, a, b);
                else
                    FN(scatter_row)(acc, share, g->sw, c, a, b);
            }
        }
        T *o = (T *)g->out + r * W;
        for (ptrdiff_t w = 0; w < W; w++) o[w] = (T)acc[w];
    }
}

/* Adaptive-pool outputs by units u = oh * planes + p (output row oh of plane p). Each bin
 * is summed in (kh, kw) order in the element type, one sequential sum per output as the
 * reference's; up to 8 planes run side by side so their sums overlap in time. */
ISA_ATTR static void FN(adaptive_rows)(const pool_t *g, ptrdiff_t lo, ptrdiff_t hi)
{
    const ptrdiff_t OH = g->OH, OW = g->OW, P = g->A * g->B, sH = g->sH, sW = g->sW;
    const ptrdiff_t *h0 = g->bins, *hlen = g->bins + OH, *w0 = g->bins + 2 * OH,
                    *wlen = g->bins + 2 * OH + OW;
    for (ptrdiff_t u = lo; u < hi;) {
        const ptrdiff_t oh = u / P, p0 = u % P;
        ptrdiff_t count = hi - u;
        if (count > P - p0) count = P - p0;
        if (count > 8) count = 8;
        const T *top[8];
        for (ptrdiff_t k = 0; k < count; k++) {
            const ptrdiff_t p = p0 + k;
            top[k] = (const T *)g->x + (p / g->B) * g->sA + (p % g->B) * g->sB + h0[oh] * sH;
        }
        for (ptrdiff_t ow = 0; ow < OW; ow++) {
            const double n = (double)(hlen[oh] * wlen[ow]);
            T *o = (T *)g->out + (p0 * OH + oh) * OW + ow;
            if (count == 8) {
                T s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (ptrdiff_t i = 0; i < hlen[oh]; i++)
                    for (ptrdiff_t j = 0; j < wlen[ow]; j++) {
                        const ptrdiff_t at = i * sH + (w0[ow] + j) * sW;
                        for (int k = 0; k < 8; k++) s[k] += top[k][at];
                    }
                for (int k = 0; k < 8; k++) o[k * OH * OW] = (T)((double)s[k] / n);
            } else {
                for (ptrdiff_t k = 0; k < count; k++) {
                    T s = 0;
                    for (ptrdiff_t i = 0; i < hlen[oh]; i++)
                        for (ptrdiff_t j = 0; j < wlen[ow]; j++)
                            s += top[k][i * sH + (w0[ow] + j) * sW];
                    o[k * OH * OW] = (T)((double)s / n);
                }
            }
        }
        u += count;
    }
}

/* Planes [lo, hi) of the adaptive-pool gradient, in the reference's np.bincount order: for
 * each offset (kh, kw) of the longest bin, the outputs row by row. scratch: H*W + OH*OW.
 * When the bins do not overlap (size a multiple of the output size, or global pooling)
 * each element gets exactly one share, 0.0 + share (a -0 share gives +0, as bincount's). */
ISA_ATTR static void FN(adaptive_backward_planes)(const pool_t *g, ptrdiff_t lo, ptrdiff_t hi,
                                              double *scratch)
{
    const ptrdiff_t H = g->H, W = g->W, OH = g->OH, OW = g->OW;
    const ptrdiff_t *h0 = g->bins, *hlen = g->bins + OH, *w0 = g->bins + 2 * OH,
                    *wlen = g->bins + 2 * OH + OW;
    double *acc = scratch, *share = scratch + H * W;
    for (ptrdiff_t p = lo; p < hi; p++) {
        const T *gplane = (const T *)g->x + (p / g->B) * g->sA + (p % g->B) * g->sB;
        T *o = (T *)g->out + p * H * W;
        if (g->disjoint && OH == 1 && OW == 1) { /* global pooling: one share throughout */
            const T v = (T)(0.0 + (double)gplane[0] / (double)(H * W));
            for (ptrdiff_t e = 0; e < H * W; e++) o[e] = v;
            continue;
        }
        if (g->disjoint) {
            for (ptrdiff_t oh = 0; oh < OH; oh++)
                for (ptrdiff_t ow = 0; ow < OW; ow++) {
                    const T v = (T)(0.0 + (double)gplane[oh * g->sH + ow * g->sW] /
                                              (double)(hlen[oh] * wlen[ow]));
                    for (ptrdiff_t i = 0; i < hlen[oh]; i++) {
                        T *row = o + (h0[oh] + i) * W + w0[ow];
                        for (ptrdiff_t j = 0; j < wlen[ow]; j++) row[j] = v;
                    }
                }
            continue;
        }
        for (ptrdiff_t oh = 0; oh < OH; oh++)
            for (ptrdiff_t ow = 0; ow < OW; ow++)
                share[oh * OW + ow] = (double)gplane[oh * g->sH + ow * g->sW] /
                                      (double)(hlen[oh] * wlen[ow]);
        for (ptrdiff_t e = 0; e < H * W; e++) acc[e] = 0;
        for (ptrdiff_t i = 0; i < g->max_hlen; i++)
            for (ptrdiff_t j = 0; j < g->max_wlen; j++)
                for (ptrdiff_t oh = 0; oh < OH; oh++) {
                    if (i >= hlen[oh]) continue;
                    double *arow = acc + (h0[oh] + i) * W + j;
                    const double *srow = share + oh * OW;
                    for (ptrdiff_t ow = 0; ow < OW; ow++)
                        if (j < wlen[ow]) arow[w0[ow]] += srow[ow];
                }
        for (ptrdiff_t e = 0; e < H * W; e++) o[e] = (T)acc[e];
    }
}

/* ---- normalization passes ---- */

#define LANES 16
/* 16 interleaved double lanes (element i goes to lane i % 16), combined as a fixed tree. */
ISA_ATTR static inline __attribute__((always_inline)) double FN(combine)(const double *acc)
{
    double s[8];
    for (int j = 0; j < 8; j++) s[j] = acc[j] + acc[j + 8];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

ISA_ATTR static void FN(norm_sums)(const norm_t *n, ptrdiff_t lo, ptrdiff_t hi)
{
    const ptrdiff_t L = n->L;
    for (ptrdiff_t p = lo; p < hi; p++) {
        const T *x = (const T *)n->x + (p / n->B) * n->sA + (p % n->B) * n->sB;
        double acc[LANES] = {0};
        ptrdiff_t i = 0;
        for (; i + LANES <= L; i += LANES)
            for (int j = 0; j < LANES; j++) acc[j] += (double)x[i + j];
        for (int j = 0; i < L; i++, j++) acc[j] += (double)x[i];
        n->plane_sums[p] = FN(combine)(acc);
    }
}

ISA_ATTR static void FN(norm_square_sums)(const norm_t *n, ptrdiff_t lo, ptrdiff_t hi)
{
    const ptrdiff_t L = n->L;
    for (ptrdiff_t p = lo; p < hi; p++) {
        const ptrdiff_t a = p / n->B, b = p % n->B;
        const T *x = (const T *)n->x + a * n->sA + b * n->sB;
        const T m = ((const T *)n->mean)[a * n->stat_a + b / n->stat_div];
        double acc[LANES] = {0};
        ptrdiff_t i = 0;
        /* each difference and square rounded to T, as the reference computes them */
        for (; i + LANES <= L; i += LANES)
            for (int j = 0; j < LANES; j++) {
                const T d = x[i + j] - m;
                const T sq = d * d;
                acc[j] += (double)sq;
            }
        for (int j = 0; i < L; i++, j++) {
            const T d = x[i] - m;
            const T sq = d * d;
            acc[j] += (double)sq;
        }
        n->plane_sums[p] = FN(combine)(acc);
    }
}

ISA_ATTR static void FN(norm_apply)(const norm_t *n, ptrdiff_t lo, ptrdiff_t hi)
{
    const ptrdiff_t L = n->L;
    for (ptrdiff_t p = lo; p < hi; p++) {
        const ptrdiff_t a = p / n->B, b = p % n->B, s = a * n->stat_a + b / n->stat_div;
        const T *x = (const T *)n->x + a * n->sA + b * n->sB;
        T *o = (T *)n->out + a * n->oA + b * n->oB;
        const T m = ((const T *)n->mean)[s], r = ((const T *)n->rstd)[s];
        /* ((x - mean) * rstd) * weight + bias, each step rounded, as the reference */
        if (n->w != NULL && n->bias != NULL) {
            const T w = ((const T *)n->w)[b], c = ((const T *)n->bias)[b];
            for (ptrdiff_t i = 0; i < L; i++) o[i] = ((x[i] - m) * r) * w + c;
        } else if (n->w != NULL) {
            const T w = ((const T *)n->w)[b];
            for (ptrdiff_t i = 0; i < L; i++) o[i] = ((x[i] - m) * r) * w;
        } else if (n->bias != NULL) {
            const T c = ((const T *)n->bias)[b];
            for (ptrdiff_t i = 0; i < L; i++) o[i] = ((x[i] - m) * r) + c;
        } else {
            for (ptrdiff_t i = 0; i < L; i++) o[i] = (x[i] - m) * r;
        }
    }
}

#undef LANES
#undef WIN_BYTES
#undef WIN_ITYPE
#undef FN
#undef T
#undef IS_F32
#undef ISA_ATTR
#undef VBYTES
#undef NAME
#endif /* POOL_TEMPLATE */
