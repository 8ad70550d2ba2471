/* reftorch_cpu._nn_rows: fused row kernels over the last dim, float32 and float64:
 * softmax, log_softmax and their backward ops, the layer norm forward and backward,
 * nll_loss and its backward op.
 *
 * Entry points (called from reftorch_cpu/nn_rows.py, which checks the layout or declines):
 *
 *   softmax(log, x, x_offset, rows, n, row_stride, out)
 *       out (rows x n, contiguous) = softmax (log=0) or log_softmax (log=1) of each row
 *       x[r * row_stride + j], j < n.
 *   layer_norm(x, x_offset, rows, n, row_stride, weight, w_offset, bias, b_offset, eps,
 *              out, mean, rstd)
 *       weight / bias: None or n contiguous elements; out contiguous; mean, rstd: rows.
 *   layer_norm_backward(grad, g_offset, g_stride, x, x_offset, x_stride, rows, n, summed,
 *                       weight, w_offset, mean, m_offset, rstd, r_offset, grad_input,
 *                       grad_weight, grad_bias)
 *       native_layer_norm_backward from the saved statistics (rows contiguous elements
 *       each): grad_input (rows x n) per row in one pass per sum; grad_weight / grad_bias
 *       (n) summed over the rows from 0, row after row, in the element type (bit for bit
 *       NumPy's reduction over the leading dims), one column per thread. Each optional.
 *   group_norm_backward(grad, x, N, C, L, group, weight, mean, rstd, grad_input,
 *                       grad_weight, grad_bias)
 *       native_group_norm_backward, every buffer contiguous: grad_input by the layer norm
 *       rows (one row per (sample, group), weight each channel's value repeated over its L
 *       positions); grad_weight / grad_bias per channel, summed in double (within a few
 *       ulp of the reference's sums).
 *   nll_loss(x, x_offset, N, C, row_stride, target, t_offset, weight, w_offset,
 *            ignore_index, loss)  ->  (sum of losses, total weight) as floats
 *       loss: None or N contiguous elements (reduction 'none'); a target outside [0, C)
 *       that is not ignore_index raises IndexError before anything is written.
 *   nll_loss_backward(grad, g_offset, g_stride, N, C, target, t_offset, weight, w_offset,
 *                     ignore_index, out[, total_weight, tw_offset])
 *       out (N x C, contiguous) = 0 except -(w[t_i] * grad[i * g_stride]) at (i, t_i):
 *       nll_loss_backward (bit for bit the reference's; a target outside [0, C) that is not
 *       ignore_index raises IndexError before anything is written). With total_weight
 *       ('mean'; g_stride 0), the one grad value is first divided by total_weight[tw_offset]
 *       in the element type, as the derivative row does.
 *   softmax_backward(log, grad, g_offset, y, y_offset, rows, n, (g_stride, y_stride), out)
 *       from the forward's output y: y * (grad - sum(grad * y)) (softmax) or
 *       grad - exp(y) * sum(grad) (log_softmax, y <= 0), per row: the backward ops
 *       _softmax_backward_data and _log_softmax_backward_data.
 *
 * Every buffer is checked (format, and that every element visited lies inside it) first.
 *
 * Each row is one pass per statistic over memory that stays in cache: softmax reads the row
 * for its max, writes exp(x - max) while summing it, then multiplies by 1 / sum (within an
 * ulp of the reference's division); log_softmax writes (x - max) - log(sum); layer norm
 * sums x, then (x - mean)^2 (the reference's two-pass formula), then writes
 * (x - mean) * rstd * weight + bias. A row whose max is NaN or +-inf is all NaN, as the
 * reference's. Row sums use 4 interleaved "logical" 64-byte vector accumulators (GCC vector
 * extensions; one zmm, two ymm or four xmm pieces, so every ISA clone adds the same lanes in
 * the same order), combined (a0 + a1) + (a2 + a3), then across lanes as a tree, then the
 * tail in order: a fixed order that depends on n only. Rows are split into fixed groups
 * over OpenMP threads, so no result depends on the thread count.
 *
 * exp: float32 uses the vectorized exp of clone_exp.h (shared with reduce.c's logsumexp)
 * for x - max in [-inf, 0]: within 1 ulp of the correctly rounded value (NumPy's float32
 * exp is within 2), checked by the tests on a fine grid of [-110, 0]. float64 calls the C
 * library's exp per element. That exp is the one place that uses fused multiply-adds (see
 * clone_exp.h); elsewhere the file's -ffp-contract=off keeps every a * b + c two roundings,
 * so sums and everything else round alike in every clone, and only the baseline clone's exp
 * may differ from the others', each within 1 ulp.
 */
#ifndef NN_ROWS_TEMPLATE

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
#endif

#define ROW_GROUP_ELEMENTS 16384  /* rows are handed to threads in groups of this much work */
/* Fewer elements than this run on one thread (a parallel region costs a few us). */
#define PARALLEL_MIN_ELEMENTS 32768

enum { T_F32, T_F64, N_TYPES };

typedef void (*softmax_fn)(const char *x, ptrdiff_t rs, ptrdiff_t n, char *out, ptrdiff_t lo,
                           ptrdiff_t hi, int log);
typedef void (*softmax_backward_fn)(const char *g, ptrdiff_t gs, const char *y, ptrdiff_t ys,
                                    ptrdiff_t n, char *out, ptrdiff_t lo, ptrdiff_t hi,
                                    int take_log);
typedef void (*layer_norm_fn)(const char *x, ptrdiff_t rs, ptrdiff_t n, const char *w,
                              const char *b, double eps, char *out, char *mean, char *rstd,
                              ptrdiff_t lo, ptrdiff_t hi);

#define PARAM_GRAD_COLUMNS 512   /* columns per work item of layer norm's parameter gradients */
typedef void (*layer_norm_param_grads_fn)(const char *g, ptrdiff_t gs, const char *x,
                                          ptrdiff_t xs, ptrdiff_t rows, const char *mean,
                                          const char *rstd, char *dw, char *db, int summed,
                                          ptrdiff_t c_lo, ptrdiff_t c_hi);
typedef void (*layer_norm_backward_fn)(const char *g, ptrdiff_t gs, const char *x, ptrdiff_t xs,
                                       ptrdiff_t n, const char *w, ptrdiff_t w_period,
                                       const char *mean, const char *rstd, char *out,
                                       ptrdiff_t lo, ptrdiff_t hi);
typedef void (*channel_param_grads_fn)(const char *g, const char *x, ptrdiff_t N, ptrdiff_t C,
                                       ptrdiff_t L, ptrdiff_t per_group, const char *mean,
                                       const char *rstd, char *dw, char *db, char *scratch,
                                       ptrdiff_t c_lo, ptrdiff_t c_hi);

#define NN_ROWS_TEMPLATE
#define CLONE_TEMPLATE "nn_rows.c"
#include "isa_clones.h"
#undef CLONE_TEMPLATE
#undef NN_ROWS_TEMPLATE

static const softmax_fn SOFTMAX[N_ISAS][N_TYPES] = CLONES(softmax_rows);
static const layer_norm_fn LAYER_NORM[N_ISAS][N_TYPES] = CLONES(layer_norm_rows);
static const layer_norm_backward_fn LAYER_NORM_BACKWARD[N_ISAS][N_TYPES] =
    CLONES(layer_norm_backward_rows);
static const layer_norm_param_grads_fn LAYER_NORM_PARAM_GRADS[N_ISAS][N_TYPES] =
    CLONES(layer_norm_param_grads);
static const channel_param_grads_fn CHANNEL_PARAM_GRADS[N_ISAS][N_TYPES] =
    CLONES(channel_param_grads);
static const softmax_backward_fn SOFTMAX_BACKWARD[N_ISAS][N_TYPES] =
    CLONES(softmax_backward_rows);
typedef void (*exp_f32_fn)(const float *x, ptrdiff_t n, float *out);
#if HAVE_X86_CLONES
static const exp_f32_fn EXP_F32[N_ISAS] = {exp_only_f32_baseline, exp_only_f32_avx2,
                                           exp_only_f32_avx512f};
#else
static const exp_f32_fn EXP_F32[N_ISAS] = {exp_only_f32_baseline};
#endif



static int parallel_ok(ptrdiff_t elements)
{
    return worth_parallel((double)elements, PARALLEL_MIN_ELEMENTS);
}

/* Rows [0, rows) in fixed groups (by size only), each group one call; parallel when `par`. */
#define FOR_ROW_GROUPS(rows, n, par, CALL) \
    FOR_GROUPS(rows, group_for(n, ROW_GROUP_ELEMENTS), par, CALL)

/* ---- argument checking ------------------------------------------------------------------ */

/* An operand (common.h's kind_operand) viewed as (d0, d1) with strides (s0, s1) from element
 * offset `off_obj` (NULL: 0). */
static int operand(held_t *h, PyObject *obj, PyObject *off_obj, long long d0, long long d1,
                   long long s0, long long s1, int writable, int kind, int optional,
                   const char *what, char **ptr)
{
    const long long shape[2] = {d0, d1}, strides[2] = {s0, s1};
    return kind_operand(h, obj, off_obj, 2, shape, strides, writable, kind, optional, what,
                        ptr);
}

static int sane_total(long long rows, long long n)
{
    long long total;
    if (__builtin_mul_overflow(rows, n, &total) || total > PTRDIFF_MAX / 16) {
        PyErr_SetString(PyExc_ValueError, "too many elements");
        return -1;
    }
    return 0;
}

/* IndexError for the first target outside [0, C) that is not ignore_index. */
static int check_targets(const int64_t *target, long long N, long long C, long long ignore)
{
    for (long long i = 0; i < N; i++) {
        if (target[i] != ignore && (target[i] < 0 || target[i] >= C)) {
            PyErr_Format(PyExc_IndexError, "Target %lld is out of bounds.",
                         (long long)target[i]);
            return -1;
        }
    }
    return 0;
}

/* ---- entry points ----------------------------------------------------------------------- */

static PyObject *py_softmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "softmax() takes 7 arguments (log, x, x_offset, rows, "
                     "n, row_stride, out), got %zd", nargs);
        return NULL;
    }
    int log = PyObject_IsTrue(args[0]);
    long long rows, n, rs;
    if (log < 0 || parse_size(args[3], "rows", &rows) < 0 || parse_size(args[4], "n", &n) < 0 ||
        parse_int_entry(args[5], "row_stride", &rs) < 0 || sane_total(rows, n) < 0)
        return NULL;
    int kind = float_kind_of(args[1], "x");
    if (kind < 0) return NULL;
    held_t h = {.held = 0};
    char *x, *out;
    if (operand(&h, args[1], args[2], rows, n, rs, 1, 0, kind, 0, "x", &x) < 0 ||
        operand(&h, args[6], NULL, rows, n, n, 1, 1, kind, 0, "out", &out) < 0) {
        release_held(&h);
        return NULL;
    }
    g_calls++;
    if (rows > 0 && n > 0) {
        const softmax_fn fn = SOFTMAX[g_isa][kind];
        const int par = parallel_ok(rows * n);
        Py_BEGIN_ALLOW_THREADS
        FOR_ROW_GROUPS(rows, n, par, fn(x, rs, n, out, lo, hi, log));
        Py_END_ALLOW_THREADS
    }
    release_held(&h);
    Py_RETURN_NONE;
}

static PyObject *py_softmax_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "softmax_backward() takes 9 arguments (log, grad, "
                     "g_offset, y, y_offset, rows, n, (g_row_stride, y_row_stride), out), got "
                     "%zd", nargs);
        return NULL;
    }
    int log = PyObject_IsTrue(args[0]);
    long long rows, n, rstrides[2];
    if (log < 0 || parse_size(args[5], "rows", &rows) < 0 || parse_size(args[6], "n", &n) < 0 ||
        parse_dims(args[7], "row_strides", 2, rstrides, NULL) < 0 || sane_total(rows, n) < 0)
        return NULL;
    int kind = float_kind_of(args[1], "grad");
    if (kind < 0) return NULL;
    held_t h = {.held = 0};
    char *g, *y, *out;
    if (operand(&h, args[1], args[2], rows, n, rstrides[0], 1, 0, kind, 0, "grad", &g) < 0 ||
        operand(&h, args[3], args[4], rows, n, rstrides[1], 1, 0, kind, 0, "y", &y) < 0 ||
        operand(&h, args[8], NULL, rows, n, n, 1, 1, kind, 0, "out", &out) < 0) {
        release_held(&h);
        return NULL;
    }
    g_calls++;
    if (rows > 0 && n > 0) {
        const softmax_backward_fn fn = SOFTMAX_BACKWARD[g_isa][kind];
        const int par = parallel_ok(rows * n);
        const ptrdiff_t gs = rstrides[0], ys = rstrides[1];
        Py_BEGIN_ALLOW_THREADS
        FOR_ROW_GROUPS(rows, n, par, fn(g, gs, y, ys, n, out, lo, hi, log));
        Py_END_ALLOW_THREADS
    }
    release_held(&h);
    Py_RETURN_NONE;
}

static PyObject *py_layer_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "layer_norm() takes 13 arguments (x, x_offset, rows, n, "
                     "row_stride, weight, w_offset, bias, b_offset, eps, out, mean, rstd), got "
                     "%zd", nargs);
        return NULL;
    }
    long long rows, n, rs;
    if (parse_size(args[2], "rows", &rows) < 0 || parse_size(args[3], "n", &n) < 0 ||
        parse_int_entry(args[4], "row_stride", &rs) < 0 || sane_total(rows, n) < 0)
        return NULL;
    double eps = PyFloat_AsDouble(args[9]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    int kind = float_kind_of(args[0], "x");
    if (kind < 0) return NULL;
    held_t h = {.held = 0};
    char *x, *w, *b, *out, *mean, *rstd;
    if (operand(&h, args[0], args[1], rows, n, rs, 1, 0, kind, 0, "x", &x) < 0 ||
        operand(&h, args[5], args[6], 1, n, 0, 1, 0, kind, 1, "weight", &w) < 0 ||
        operand(&h, args[7], args[8], 1, n, 0, 1, 0, kind, 1, "bias", &b) < 0 ||
        operand(&h, args[10], NULL, rows, n, n, 1, 1, kind, 0, "out", &out) < 0 ||
        operand(&h, args[11], NULL, rows, 1, 1, 1, 1, kind, 0, "mean", &mean) < 0 ||
        operand(&h, args[12], NULL, rows, 1, 1, 1, 1, kind, 0, "rstd", &rstd) < 0) {
        release_held(&h);
        return NULL;
    }
    g_calls++;
    if (rows > 0 && n > 0) {
        const layer_norm_fn fn = LAYER_NORM[g_isa][kind];
        const int par = parallel_ok(rows * n);
        Py_BEGIN_ALLOW_THREADS
        FOR_ROW_GROUPS(rows, n, par, fn(x, rs, n, w, b, eps, out, mean, rstd, lo, hi));
        Py_END_ALLOW_THREADS
    }
    release_held(&h);
    Py_RETURN_NONE;
}


static PyObject *py_layer_norm_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 18) {
        PyErr_Format(PyExc_TypeError, "layer_norm_backward() takes 18 arguments (grad, "
                     "g_offset, g_stride, x, x_offset, x_stride, rows, n, summed, weight, "
                     "w_offset, mean, m_offset, rstd, r_offset, grad_input, grad_weight, "
                     "grad_bias), got %zd", nargs);
        return NULL;
    }
    long long rows, n, gs, xs;
    if (parse_int_entry(args[2], "g_stride", &gs) < 0 ||
        parse_int_entry(args[5], "x_stride", &xs) < 0 || parse_size(args[6], "rows", &rows) < 0 ||
        parse_size(args[7], "n", &n) < 0 || sane_total(rows, n) < 0)
        return NULL;
    const int summed = PyObject_IsTrue(args[8]);
    if (summed < 0) return NULL;
    int kind = float_kind_of(args[3], "x");
    if (kind < 0) return NULL;
    held_t h = {.held = 0};
    char *g, *x, *w, *mean, *rstd, *gi, *gw, *gb;
    if (operand(&h, args[0], args[1], rows, n, gs, 1, 0, kind, 0, "grad", &g) < 0 ||
        operand(&h, args[3], args[4], rows, n, xs, 1, 0, kind, 0, "x", &x) < 0 ||
        operand(&h, args[9], args[10], 1, n, 0, 1, 0, kind, 1, "weight", &w) < 0 ||
        operand(&h, args[11], args[12], rows, 1, 1, 1, 0, kind, 0, "mean", &mean) < 0 ||
        operand(&h, args[13], args[14], rows, 1, 1, 1, 0, kind, 0, "rstd", &rstd) < 0 ||
        operand(&h, args[15], NULL, rows, n, n, 1, 1, kind, 1, "grad_input", &gi) < 0 ||
        operand(&h, args[16], NULL, 1, n, 0, 1, 1, kind, 1, "grad_weight", &gw) < 0 ||
        operand(&h, args[17], NULL, 1, n, 0, 1, 1, kind, 1, "grad_bias", &gb) < 0) {
        release_held(&h);
        return NULL;
    }
    if (!summed && rows > 1) {
        release_held(&h);
        PyErr_SetString(PyExc_ValueError, "without leading dims to sum over there is one row");
        return NULL;
    }
    g_calls++;
    if (rows > 0 && n > 0) {
        const int par = parallel_ok(rows * n);
        Py_BEGIN_ALLOW_THREADS
        if (gi) {
            const layer_norm_backward_fn fn = LAYER_NORM_BACKWARD[g_isa][kind];
            FOR_ROW_GROUPS(rows, n, par, fn(g, gs, x, xs, n, w, 1, mean, rstd, gi, lo, hi));
        }
        if (gw || gb) {
            const layer_norm_param_grads_fn fn = LAYER_NORM_PARAM_GRADS[g_isa][kind];
            FOR_GROUPS(n, PARAM_GRAD_COLUMNS, par,
                       fn(g, gs, x, xs, rows, mean, rstd, gw, gb, summed, lo, hi));
        }
        Py_END_ALLOW_THREADS
    }
    release_held(&h);
    Py_RETURN_NONE;
}

static PyObject *py_group_norm_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 12) {
        PyErr_Format(PyExc_TypeError, "group_norm_backward() takes 12 arguments (grad, x, N, C, "
                     "L, group, weight, mean, rstd, grad_input, grad_weight, grad_bias), got "
                     "%zd", nargs);
        return NULL;
    }
    long long N, C, L, group;
    if (parse_size(args[2], "N", &N) < 0 || parse_size(args[3], "C", &C) < 0 ||
        parse_size(args[4], "L", &L) < 0 || parse_size(args[5], "group", &group) < 0 ||
        sane_total(N, C) < 0 || sane_total(N * C, L) < 0)
        return NULL;
    if (group < 1 || C % group != 0) {
        PyErr_SetString(PyExc_ValueError, "group must be >= 1 and divide C");
        return NULL;
    }
    int kind = float_kind_of(args[1], "x");
    if (kind < 0) return NULL;
    const long long rows = N * group, n = C / group * L;
    held_t h = {.held = 0};
    char *g, *x, *w, *mean, *rstd, *gi, *gw, *gb;
    /* weight: each channel's weight repeated over its L positions (C * L elements) */
    if (operand(&h, args[0], NULL, rows, n, n, 1, 0, kind, 0, "grad", &g) < 0 ||
        operand(&h, args[1], NULL, rows, n, n, 1, 0, kind, 0, "x", &x) < 0 ||
        operand(&h, args[6], NULL, group, n, n, 1, 0, kind, 1, "weight", &w) < 0 ||
        operand(&h, args[7], NULL, rows, 1, 1, 1, 0, kind, 0, "mean", &mean) < 0 ||
        operand(&h, args[8], NULL, rows, 1, 1, 1, 0, kind, 0, "rstd", &rstd) < 0 ||
        operand(&h, args[9], NULL, rows, n, n, 1, 1, kind, 1, "grad_input", &gi) < 0 ||
        operand(&h, args[10], NULL, 1, C, 0, 1, 1, kind, 1, "grad_weight", &gw) < 0 ||
        operand(&h, args[11], NULL, 1, C, 0, 1, 1, kind, 1, "grad_bias", &gb) < 0) {
        release_held(&h);
        return NULL;
    }
    const int par = parallel_ok(rows * n);
    const size_t itemsize = kind == T_F32 ? sizeof(float) : sizeof(double);
    char *scratch = NULL;
    if (gw && L > 0) {
        const size_t threads = (size_t)thread_count(par);
        scratch = malloc(threads * (size_t)L * itemsize);
        if (scratch == NULL) {
            release_held(&h);
            return PyErr_NoMemory();
        }
    }
    g_calls++;
    if (rows > 0 && n > 0) {
        Py_BEGIN_ALLOW_THREADS
        if (gi) {
            const layer_norm_backward_fn fn = LAYER_NORM_BACKWARD[g_isa][kind];
            FOR_ROW_GROUPS(rows, n, par, fn(g, n, x, n, n, w, group, mean, rstd, gi, lo, hi));
        }
        if (gw || gb) {
            const channel_param_grads_fn fn = CHANNEL_PARAM_GRADS[g_isa][kind];
            FOR_GROUPS(C, 1, par,
                       fn(g, x, N, C, L, C / group, mean, rstd, gw, gb,
                          scratch ? scratch + (size_t)thread_id() * (size_t)L * itemsize
                                  : NULL,
                          lo, hi));
        }
        Py_END_ALLOW_THREADS
    }
    free(scratch);
    release_held(&h);
    Py_RETURN_NONE;
}

/* nll_loss: loss_i = -x[i, t_i] * w[t_i] (0 where t_i == ignore_index); returns the sum of
 * the losses and of the weights, both accumulated in order i = 0, 1, ... in double (more
 * accurate than the reference's pairwise sum in the element type; the caller rounds). */
#define DEFINE_NLL(T, SFX)                                                                   \
    static void nll_##SFX(const char *x_, ptrdiff_t N, ptrdiff_t rs, const int64_t *t,      \
                          const char *w_, long long ignore, char *loss_, double *sum,        \
                          double *total)                                                     \
    {                                                                                        \
        const T *x = (const T *)x_, *w = (const T *)w_;                                      \
        T *loss = (T *)loss_;                                                                \
        double s = 0, tw = 0;                                                                \
        for (ptrdiff_t i = 0; i < N; i++) {                                                  \
            const int64_t c = t[i];                                                          \
            const T wi = c == ignore ? (T)0 : (w ? w[c] : (T)1);                             \
            const T picked = c == ignore ? (T)0 : x[i * rs + c];                             \
            const T li = -picked * wi;                                                       \
            if (loss) loss[i] = li;                                                          \
            s += li;                                                                         \
            tw += wi;                                                                        \
        }                                                                                    \
        *sum = s, *total = tw;                                                               \
    }
DEFINE_NLL(float, f32)
DEFINE_NLL(double, f64)

static PyObject *py_nll_loss(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 11) {
        PyErr_Format(PyExc_TypeError, "nll_loss() takes 11 arguments (x, x_offset, N, C, "
                     "row_stride, target, t_offset, weight, w_offset, ignore_index, loss), got "
                     "%zd", nargs);
        return NULL;
    }
    long long N, C, rs, ignore;
    if (parse_size(args[2], "N", &N) < 0 || parse_size(args[3], "C", &C) < 0 ||
        parse_int_entry(args[4], "row_stride", &rs) < 0 || sane_total(N, C) < 0)
        return NULL;
    ignore = PyLong_AsLongLong(args[9]);
    if (ignore == -1 && PyErr_Occurred()) return NULL;
    int kind = float_kind_of(args[0], "x");
    if (kind < 0) return NULL;
    held_t h = {.held = 0};
    char *x, *t, *w, *loss;
    if (operand(&h, args[0], args[1], N, C, rs, 1, 0, kind, 0, "x", &x) < 0 ||
        operand(&h, args[5], args[6], 1, N, 0, 1, 0, KIND_I64, 0, "target", &t) < 0 ||
        operand(&h, args[7], args[8], 1, C, 0, 1, 0, kind, 1, "weight", &w) < 0 ||
        operand(&h, args[10], NULL, 1, N, 0, 1, 1, kind, 1, "loss", &loss) < 0 ||
        check_targets((const int64_t *)t, N, C, ignore) < 0) {
        release_held(&h);
        return NULL;
    }
    const int64_t *target = (const int64_t *)t;
    g_calls++;
    double sum = 0, total = 0;
    if (kind == KIND_F32)
        nll_f32(x, N, rs, target, w, ignore, loss, &sum, &total);
    else
        nll_f64(x, N, rs, target, w, ignore, loss, &sum, &total);
    release_held(&h);
    return Py_BuildValue("(dd)", sum, total);
}

static PyObject *py_exp(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    /* The float32 exp on its own (for the tests): out[i] = exp(x[i]) over n elements. */
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "exp_f32() takes 2 arguments (x, out)");
        return NULL;
    }
    Py_buffer probe;
    if (get_buffer(args[0], &probe, 0, "x") < 0) return NULL;
    const long long n = probe.len / (probe.itemsize ? probe.itemsize : 1);
    PyBuffer_Release(&probe);
    held_t h = {.held = 0};
    char *x, *out;
    if (operand(&h, args[0], NULL, 1, n, 0, 1, 0, KIND_F32, 0, "x", &x) < 0 ||
        operand(&h, args[1], NULL, 1, n, 0, 1, 1, KIND_F32, 0, "out", &out) < 0) {
        release_held(&h);
        return NULL;
    }
    const exp_f32_fn fn = EXP_F32[g_isa];
    fn((const float *)x, n, (float *)out);
    release_held(&h);
    Py_RETURN_NONE;
}

/* grad of nll_loss: out (N x C, zeroed here) gets -(w[t_i] * g_i) at (i, t_i) for every
 * target that is not ignore_index; g_i = grad[i * g_stride] (the caller passes the 'mean'
 * grad already divided by the total weight, as the reference does). Rows [lo, hi). */
#define DEFINE_NLL_BACKWARD(T, SFX)                                                          \
    static void nll_backward_##SFX(const char *g_, ptrdiff_t gs, ptrdiff_t C,               \
                                   const int64_t *t, const char *w_, long long ignore,       \
                                   char *out_, ptrdiff_t lo, ptrdiff_t hi)                   \
    {                                                                                        \
        const T *g = (const T *)g_, *w = (const T *)w_;                                      \
        T *out = (T *)out_;                                                                  \
        memset(out + lo * C, 0, (size_t)(hi - lo) * (size_t)C * sizeof(T));                  \
        for (ptrdiff_t i = lo; i < hi; i++) {                                                \
            const int64_t c = t[i];                                                          \
            if (c == ignore) continue;                                                       \
            out[i * C + c] = -((w ? w[c] : (T)1) * g[i * gs]);                               \
        }                                                                                    \
    }
DEFINE_NLL_BACKWARD(float, f32)
DEFINE_NLL_BACKWARD(double, f64)

static PyObject *py_nll_loss_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 11 && nargs != 13) {
        PyErr_Format(PyExc_TypeError, "nll_loss_backward() takes 11 or 13 arguments (grad, "
                     "g_offset, g_stride, N, C, target, t_offset, weight, w_offset, "
                     "ignore_index, out[, total_weight, tw_offset]), got %zd", nargs);
        return NULL;
    }
    long long gs, N, C, ignore;
    if (parse_int_entry(args[2], "g_stride", &gs) < 0 || parse_size(args[3], "N", &N) < 0 ||
        parse_size(args[4], "C", &C) < 0 || sane_total(N, C) < 0)
        return NULL;
    const int divided = nargs == 13;
    if (divided && gs != 0) {
        PyErr_SetString(PyExc_ValueError, "a total_weight divides one grad value: g_stride "
                        "must be 0");
        return NULL;
    }
    ignore = PyLong_AsLongLong(args[9]);
    if (ignore == -1 && PyErr_Occurred()) return NULL;
    int kind = float_kind_of(args[0], "grad");
    if (kind < 0) return NULL;
    held_t h = {.held = 0};
    char *g, *t, *w, *out, *tw = NULL;
    if (operand(&h, args[0], args[1], 1, N, 0, gs, 0, kind, 0, "grad", &g) < 0 ||
        operand(&h, args[5], args[6], 1, N, 0, 1, 0, KIND_I64, 0, "target", &t) < 0 ||
        operand(&h, args[7], args[8], 1, C, 0, 1, 0, kind, 1, "weight", &w) < 0 ||
        operand(&h, args[10], NULL, N, C, C, 1, 1, kind, 0, "out", &out) < 0 ||
        (divided &&
         operand(&h, args[11], args[12], 1, 1, 0, 0, 0, kind, 0, "total_weight", &tw) < 0) ||
        check_targets((const int64_t *)t, N, C, ignore) < 0) {
        release_held(&h);
        return NULL;
    }
    const int64_t *target = (const int64_t *)t;
    g_calls++;
    union { float f32; double f64; } quotient; /* 'mean': grad / total_weight, one rounding */
    if (divided && N > 0) {
        if (kind == KIND_F32)
            quotient.f32 = *(const float *)g / *(const float *)tw;
        else
            quotient.f64 = *(const double *)g / *(const double *)tw;
        g = (char *)&quotient;
    }
    if (N > 0 && C > 0) {
        /* mostly zeroing memory: rows in fixed groups over threads (each element is
         * written by one thread whatever the count, so the result never depends on it) */
        const int par = parallel_ok(N * C);
        Py_BEGIN_ALLOW_THREADS
        if (kind == KIND_F32)
            FOR_ROW_GROUPS(N, C, par,
                           nll_backward_f32(g, gs, C, target, w, ignore, out, lo, hi));
        else
            FOR_ROW_GROUPS(N, C, par,
                           nll_backward_f64(g, gs, C, target, w, ignore, out, lo, hi));
        Py_END_ALLOW_THREADS
    }
    release_held(&h);
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"softmax", (PyCFunction)(void (*)(void))py_softmax, METH_FASTCALL,
     "softmax(log, x, x_offset, rows, n, row_stride, out): (log_)softmax of each row."},
    {"softmax_backward", (PyCFunction)(void (*)(void))py_softmax_backward, METH_FASTCALL,
     "softmax_backward(log, grad, g_offset, y, y_offset, rows, n, (g_row_stride, "
     "y_row_stride), out): per row, y * (grad - sum(grad * y)) for softmax's output y, or "
     "grad - exp(y) * sum(grad) for log_softmax's."},
    {"group_norm_backward", (PyCFunction)(void (*)(void))py_group_norm_backward, METH_FASTCALL,
     "group_norm_backward(grad, x, N, C, L, group, weight, mean, rstd, grad_input, "
     "grad_weight, grad_bias): group norm's gradients from the saved (N, group) statistics; "
     "every buffer contiguous, weight None or each channel's weight repeated L times, "
     "outputs None when not wanted."},
    {"layer_norm_backward", (PyCFunction)(void (*)(void))py_layer_norm_backward, METH_FASTCALL,
     "layer_norm_backward(grad, g_offset, g_stride, x, x_offset, x_stride, rows, n, summed, "
     "weight, w_offset, mean, m_offset, rstd, r_offset, grad_input, grad_weight, grad_bias): "
     "layer norm's gradients from the saved statistics; grad_input (rows x n), grad_weight "
     "and grad_bias (n) contiguous, each None when not wanted; summed: whether there are "
     "leading dims to sum the parameter gradients over (else one row, taken as it is)."},
    {"layer_norm", (PyCFunction)(void (*)(void))py_layer_norm, METH_FASTCALL,
     "layer_norm(x, x_offset, rows, n, row_stride, weight, w_offset, bias, b_offset, eps, "
     "out, mean, rstd): the layer norm forward of each row."},
    {"nll_loss", (PyCFunction)(void (*)(void))py_nll_loss, METH_FASTCALL,
     "nll_loss(x, x_offset, N, C, row_stride, target, t_offset, weight, w_offset, "
     "ignore_index, loss) -> (loss sum, total weight)."},
    {"nll_loss_backward", (PyCFunction)(void (*)(void))py_nll_loss_backward, METH_FASTCALL,
     "nll_loss_backward(grad, g_offset, g_stride, N, C, target, t_offset, weight, w_offset, "
     "ignore_index, out[, total_weight, tw_offset]): out (N x C) = 0 except "
     "-(w[t_i] * grad_i) at each (i, t_i), grad_i = grad / total_weight when it is given."},
    {"exp_f32", (PyCFunction)(void (*)(void))py_exp, METH_FASTCALL,
     "exp_f32(x, out): the kernels' float32 exp, elementwise (for tests)."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._nn_rows",
    .m_doc = "Fused row kernels (softmax, log_softmax, layer norm, nll_loss) for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__nn_rows(void)
{
    if (init_module_state() < 0) return NULL;
    return PyModule_Create(&MODULE);
}

#else /* NN_ROWS_TEMPLATE: kernels for element type T and one instruction set ------------ */

/* The per-type macros besides isa_clones.h's (#undef'd at the end). */
#if IS_F32
#define ITYPE uint32_t
#define LOG_T logf
#define SQRT_T sqrtf
#else
#define ITYPE uint64_t
#define LOG_T log
#define SQRT_T sqrt
#endif

/* Native vectors (VBYTES: 16 baseline, 32 AVX2, 64 AVX-512F) of VL lanes. Sums keep LW =
 * 64-byte "logical" lanes whatever the ISA: a logical vector is P native pieces, so every
 * clone adds the same numbers in the same order. */
#define VL ((ptrdiff_t)(VBYTES / sizeof(T)))
#define LW ((ptrdiff_t)(64 / sizeof(T)))
#define P (64 / VBYTES)
typedef T NAME(vec) __attribute__((vector_size(VBYTES)));
typedef ITYPE NAME(uvec) __attribute__((vector_size(VBYTES)));
#define VEC NAME(vec)
#define UVEC NAME(uvec)
#define SPLAT(c) ((VEC){0} + (T)(c))
#define BLEND(m, a, b) ((VEC)((((UVEC)(m)) & (UVEC)(a)) | (~((UVEC)(m)) & (UVEC)(b))))

#if IS_F32
#include "clone_exp.h" /* NAME(exp_lanes): exp of every lane of a vector, in place */

/* The exp alone over n contiguous float32 elements in [-inf, 0] (for the tests). */
ISA_ATTR static void NAME(exp_only)(const float *x, ptrdiff_t n, float *out)
{
    for (ptrdiff_t i = 0; i < n; i += VL) {
        VEC v = SPLAT(0);
        const ptrdiff_t m = n - i < VL ? n - i : VL;
        memcpy(&v, x + i, (size_t)m * sizeof(T));
        NAME(exp_lanes)(&v);
        memcpy(out + i, &v, (size_t)m * sizeof(T));
    }
}
#else
/* float64: the C library's exp, lane by lane. */
ISA_ATTR static inline void NAME(exp_lanes)(VEC *v)
{
    T lanes[VBYTES / sizeof(T)];
    memcpy(lanes, v, sizeof lanes);
    for (ptrdiff_t j = 0; j < VL; j++) lanes[j] = exp(lanes[j]);
    memcpy(v, lanes, sizeof lanes);
}
#endif

/* The sum of 4 logical vectors held as 4 * P native pieces: (a0 + a1) + (a2 + a3), then
 * the LW lanes as a tree. */
ISA_ATTR static inline T NAME(logical_sum)(const VEC *a)
{
    T t[64 / sizeof(T)];
    for (int q = 0; q < P; q++) {
        const VEC s = (a[q] + a[P + q]) + (a[2 * P + q] + a[3 * P + q]);
        memcpy(t + q * VL, &s, sizeof s);
    }
    for (ptrdiff_t width = LW / 2; width > 0; width /= 2)
        for (ptrdiff_t j = 0; j < width; j++) t[j] += t[j + width];
    return t[0];
}

/* v where v > a, else a: a NaN in v is passed over. One max instruction in the AVX clones,
 * whose max returns its second operand when the first is not greater. */
#if VBYTES == 64 && IS_F32
#define VMAX(v, a) ((VEC)_mm512_max_ps((__m512)(v), (__m512)(a)))
#elif VBYTES == 64
#define VMAX(v, a) ((VEC)_mm512_max_pd((__m512d)(v), (__m512d)(a)))
#elif VBYTES == 32 && IS_F32
#define VMAX(v, a) ((VEC)_mm256_max_ps((__m256)(v), (__m256)(a)))
#elif VBYTES == 32
#define VMAX(v, a) ((VEC)_mm256_max_pd((__m256d)(v), (__m256d)(a)))
#else
#define VMAX(v, a) BLEND((v) > (a), v, a)
#endif

/* The row's largest number, NaNs passed over (-inf when it holds none). The caller needs no
 * NaN test of its own: a NaN element makes its exp(x - max), the row's sum and so every
 * result NaN, the reference's results for a row holding a NaN. */
ISA_ATTR static T NAME(row_max)(const T *x, ptrdiff_t n)
{
    const ptrdiff_t nv = n / VL;
    T best = -INFINITY;
    if (nv > 0) {
        VEC a[4] = {SPLAT(-INFINITY), SPLAT(-INFINITY), SPLAT(-INFINITY), SPLAT(-INFINITY)};
        VEC v;
        ptrdiff_t i = 0;
        for (; i + 4 <= nv; i += 4)
            for (int k = 0; k < 4; k++) {
                memcpy(&v, x + (i + k) * VL, sizeof v);
                a[k] = VMAX(v, a[k]);
            }
        for (; i < nv; i++) {
            memcpy(&v, x + i * VL, sizeof v);
            a[0] = VMAX(v, a[0]);
        }
        a[0] = VMAX(VMAX(a[1], a[0]), VMAX(a[3], a[2]));
        T t[VBYTES / sizeof(T)];
        memcpy(t, &a[0], sizeof t);
        for (ptrdiff_t j = 0; j < VL; j++) best = t[j] > best ? t[j] : best;
    }
    for (ptrdiff_t i = nv * VL; i < n; i++) best = x[i] > best ? x[i] : best;
    return best;
}
#undef VMAX

/* Sum of exp(x - m) over the row (the fixed order of the file comment; m finite); the exps
 * are also written to `store` when it is not NULL. The last partial logical vector is
 * padded with -inf (exp 0). */
ISA_ATTR static T NAME(exp_sum)(const T *x, ptrdiff_t n, T m, T *store)
{
    const ptrdiff_t nlog = n / LW, tail = n - nlog * LW;
    const VEC mv = SPLAT(m);
    VEC a[4 * P], v = SPLAT(0);
    for (int j = 0; j < 4 * P; j++) a[j] = SPLAT(0);
    ptrdiff_t i = 0; /* in logical vectors */
    for (; i + 4 <= nlog; i += 4)
#pragma GCC unroll 16 /* (each accumulator its own register: a loop kept them in memory) */
        for (int j = 0; j < 4 * P; j++) {
            memcpy(&v, x + i * LW + j * VL, sizeof v);
            v = v - mv;
            NAME(exp_lanes)(&v);
            if (store) memcpy(store + i * LW + j * VL, &v, sizeof v);
            a[j] += v;
        }
    for (int k = 0; i < nlog; i++, k++)
        for (int q = 0; q < P; q++) {
            memcpy(&v, x + i * LW + q * VL, sizeof v);
            v = v - mv;
            NAME(exp_lanes)(&v);
            if (store) memcpy(store + i * LW + q * VL, &v, sizeof v);
            a[k * P + q] += v;
        }
    T total = nlog > 0 ? NAME(logical_sum)(a) : 0;
    if (tail) {
        T e[64 / sizeof(T)];
        for (ptrdiff_t j = 0; j < LW; j++) e[j] = j < tail ? x[nlog * LW + j] : -INFINITY;
        for (int q = 0; q < P; q++) {
            memcpy(&v, e + q * VL, sizeof v);
            v = v - mv;
            NAME(exp_lanes)(&v);
            memcpy(e + q * VL, &v, sizeof v);
        }
        if (store) memcpy(store + nlog * LW, e, (size_t)tail * sizeof(T));
        for (ptrdiff_t j = 0; j < tail; j++) total += e[j];
    }
    return total;
}

ISA_ATTR static void NAME(softmax_rows)(const char *x_, ptrdiff_t rs, ptrdiff_t n, char *out_,
                                        ptrdiff_t lo, ptrdiff_t hi, int take_log)
{
    for (ptrdiff_t r = lo; r < hi; r++) {
        const T *x = (const T *)x_ + r * rs;
        T *out = (T *)out_ + r * n;
        const T m = NAME(row_max)(x, n);
        if (!isfinite(m)) {
            /* +inf, or no number above -inf: x - max has a NaN (inf - inf, -inf + inf),
             * so the sum and every result are NaN, as in the reference (a NaN beside
             * finite numbers makes them NaN through the sum) */
            for (ptrdiff_t j = 0; j < n; j++) out[j] = NAN;
        } else if (take_log) {
            const T logsum = LOG_T(NAME(exp_sum)(x, n, m, NULL));
            for (ptrdiff_t j = 0; j < n; j++) out[j] = (x[j] - m) - logsum;
        } else {
            /* times the reciprocal, not a division: within an ulp of the reference's
             * exps / sum, and the divide would cost as much as the exp */
            const T scale = (T)1 / NAME(exp_sum)(x, n, m, out);
            for (ptrdiff_t j = 0; j < n; j++) out[j] = out[j] * scale;
        }
    }
}

/* Sum of x (square = 0) or of (x - c)^2 (square = 1) over the row, in the fixed order. */
ISA_ATTR static T NAME(row_sum)(const T *x, ptrdiff_t n, T c, int square)
{
    const ptrdiff_t nlog = n / LW;
    const VEC cv = SPLAT(c);
    VEC a[4 * P], v = SPLAT(0);
    for (int j = 0; j < 4 * P; j++) a[j] = SPLAT(0);
    ptrdiff_t i = 0; /* in logical vectors */
    if (square) {
        for (; i + 4 <= nlog; i += 4)
#pragma GCC unroll 16
            for (int j = 0; j < 4 * P; j++) {
                memcpy(&v, x + i * LW + j * VL, sizeof v);
                a[j] += (v - cv) * (v - cv);
            }
    } else {
        for (; i + 4 <= nlog; i += 4)
#pragma GCC unroll 16
            for (int j = 0; j < 4 * P; j++) {
                memcpy(&v, x + i * LW + j * VL, sizeof v);
                a[j] += v;
            }
    }
    for (int k = 0; i < nlog; i++, k++)
        for (int q = 0; q < P; q++) {
            memcpy(&v, x + i * LW + q * VL, sizeof v);
            a[k * P + q] += square ? (v - cv) * (v - cv) : v;
        }
    T total = nlog > 0 ? NAME(logical_sum)(a) : 0;
    for (ptrdiff_t j = nlog * LW; j < n; j++) total += square ? (x[j] - c) * (x[j] - c) : x[j];
    return total;
}

/* The backward of softmax (y * (g - sum(g * y))) or log_softmax (g - exp(y) * sum(g)) per
 * row, from the forward's output y: the formulas of the derivative rows, in one pass for the
 * sum and one for the result. The sums use the fixed order of row_sum. */
ISA_ATTR static void NAME(softmax_backward_rows)(const char *g_, ptrdiff_t gs, const char *y_,
                                                 ptrdiff_t ys, ptrdiff_t n, char *out_,
                                                 ptrdiff_t lo, ptrdiff_t hi, int take_log)
{
    for (ptrdiff_t r = lo; r < hi; r++) {
        const T *g = (const T *)g_ + r * gs, *y = (const T *)y_ + r * ys;
        T *out = (T *)out_ + r * n;
        if (take_log) {
            const T total = NAME(row_sum)(g, n, 0, 0);
            const ptrdiff_t nv = n / VL;
            const VEC tv = SPLAT(total);
            for (ptrdiff_t i = 0; i < nv; i++) {
                VEC e, gv;
                memcpy(&e, y + i * VL, sizeof e);
                memcpy(&gv, g + i * VL, sizeof gv);
                NAME(exp_lanes)(&e);
                gv = gv - e * tv;
                memcpy(out + i * VL, &gv, sizeof gv);
            }
            if (n > nv * VL) {
                VEC e = SPLAT(0);
                memcpy(&e, y + nv * VL, (size_t)(n - nv * VL) * sizeof(T));
                NAME(exp_lanes)(&e);
                for (ptrdiff_t j = nv * VL; j < n; j++) out[j] = g[j] - e[j - nv * VL] * total;
            }
        } else {
            /* sum(g * y): the products go through out, then one fixed-order sum */
            for (ptrdiff_t j = 0; j < n; j++) out[j] = g[j] * y[j];
            const T total = NAME(row_sum)(out, n, 0, 0);
            for (ptrdiff_t j = 0; j < n; j++) out[j] = y[j] * (g[j] - total);
        }
    }
}

ISA_ATTR static void NAME(layer_norm_rows)(const char *x_, ptrdiff_t rs, ptrdiff_t n,
                                           const char *w_, const char *b_, double eps,
                                           char *out_, char *mean_, char *rstd_, ptrdiff_t lo,
                                           ptrdiff_t hi)
{
    const T *w = (const T *)w_, *b = (const T *)b_;
    for (ptrdiff_t r = lo; r < hi; r++) {
        const T *x = (const T *)x_ + r * rs;
        T *out = (T *)out_ + r * n;
        /* the reference's formula: mean, the mean of squared deviations, 1 / sqrt(var + eps) */
        const T mean = NAME(row_sum)(x, n, 0, 0) / (T)n;
        const T var = NAME(row_sum)(x, n, mean, 1) / (T)n;
        const T rstd = (T)1 / SQRT_T(var + (T)eps);
        ((T *)mean_)[r] = mean;
        ((T *)rstd_)[r] = rstd;
        if (w && b)
            for (ptrdiff_t j = 0; j < n; j++) out[j] = ((x[j] - mean) * rstd) * w[j] + b[j];
        else if (w)
            for (ptrdiff_t j = 0; j < n; j++) out[j] = ((x[j] - mean) * rstd) * w[j];
        else if (b)
            for (ptrdiff_t j = 0; j < n; j++) out[j] = ((x[j] - mean) * rstd) + b[j];
        else
            for (ptrdiff_t j = 0; j < n; j++) out[j] = (x[j] - mean) * rstd;
    }
}

/* Layer norm's backward per row (native_layer_norm_backward): the reference's formula in the
 * element type, x_hat = (x - mean) * rstd and g_hat = g * w, then
 * dx = rstd * ((g_hat - sum(g_hat) / n) - x_hat * (sum(g_hat * x_hat) / n)). The two sums
 * go through the result row, in row_sum's fixed order. Row r's weights are the n at
 * w + (r % w_period) * n (layer norm: one row of them; group norm: each group's channels'
 * weights, each repeated over the positions). */
ISA_ATTR static void NAME(layer_norm_backward_rows)(const char *g_, ptrdiff_t gs,
                                                    const char *x_, ptrdiff_t xs, ptrdiff_t n,
                                                    const char *w_, ptrdiff_t w_period,
                                                    const char *mean_, const char *rstd_,
                                                    char *out_, ptrdiff_t lo, ptrdiff_t hi)
{
    for (ptrdiff_t r = lo; r < hi; r++) {
        const T *g = (const T *)g_ + r * gs, *x = (const T *)x_ + r * xs;
        const T *w = w_ ? (const T *)w_ + (r % w_period) * n : NULL;
        const T mean = ((const T *)mean_)[r], rstd = ((const T *)rstd_)[r];
        T *out = (T *)out_ + r * n;
        for (ptrdiff_t j = 0; j < n; j++) out[j] = w ? g[j] * w[j] : g[j];
        const T g_mean = NAME(row_sum)(out, n, 0, 0) / (T)n;
        for (ptrdiff_t j = 0; j < n; j++) out[j] = out[j] * ((x[j] - mean) * rstd);
        const T gx_mean = NAME(row_sum)(out, n, 0, 0) / (T)n;
        for (ptrdiff_t j = 0; j < n; j++) {
            const T g_hat = w ? g[j] * w[j] : g[j], x_hat = (x[j] - mean) * rstd;
            out[j] = rstd * ((g_hat - g_mean) - x_hat * gx_mean);
        }
    }
}

/* Layer norm's weight and bias gradients, columns [c_lo, c_hi) (at most PARAM_GRAD_COLUMNS):
 * dw[j] = the sum over rows of g * x_hat, db[j] = the sum of g, added row after row from 0 in
 * the element type (NumPy's reduction over an outer axis) -- or, with no leading dims to sum
 * over (`summed` 0), the one row's values themselves. One column is one thread's: the order
 * never changes. The sums stay in local arrays (a 4096 x 1024 float32 input, 2 threads:
 * 1.0-1.1 ms with blocks of 512 columns, 1.2-1.5 ms with 64-256, 1.7 ms summing straight into
 * the results, whose addresses alias the rows' every 4 KiB). */
ISA_ATTR static void NAME(layer_norm_param_grads)(const char *g_, ptrdiff_t gs, const char *x_,
                                                  ptrdiff_t xs, ptrdiff_t rows,
                                                  const char *mean_, const char *rstd_,
                                                  char *dw_, char *db_, int summed,
                                                  ptrdiff_t c_lo, ptrdiff_t c_hi)
{
    const T *g = (const T *)g_ + c_lo, *x = (const T *)x_ + c_lo;
    const T *mean = (const T *)mean_, *rstd = (const T *)rstd_;
    const ptrdiff_t width = c_hi - c_lo;
    T dw[PARAM_GRAD_COLUMNS] = {0}, db[PARAM_GRAD_COLUMNS] = {0};
    for (ptrdiff_t r = 0; r < rows; r++) {
        const T *gr = g + r * gs, *xr = x + r * xs, m = mean[r], s = rstd[r];
        if (summed)
            for (ptrdiff_t j = 0; j < width; j++) {
                dw[j] = dw[j] + gr[j] * ((xr[j] - m) * s);
                db[j] = db[j] + gr[j];
            }
        else
            for (ptrdiff_t j = 0; j < width; j++) {
                dw[j] = gr[j] * ((xr[j] - m) * s);
                db[j] = gr[j];
            }
    }
    if (dw_) memcpy((T *)dw_ + c_lo, dw, (size_t)width * sizeof(T));
    if (db_) memcpy((T *)db_ + c_lo, db, (size_t)width * sizeof(T));
}

/* Group norm's weight and bias gradients, channels [c_lo, c_hi) of an (N, C, L) input whose
 * statistics are per (sample, group of per_group channels): per channel, each sample's
 * plane of g * x_hat and of g summed in row_sum's fixed order (the products go through
 * `scratch`, L elements), the planes' sums added in sample order in double, rounded once.
 * One channel is one work item: the order never depends on the threads. */
ISA_ATTR static void NAME(channel_param_grads)(const char *g_, const char *x_, ptrdiff_t N,
                                               ptrdiff_t C, ptrdiff_t L, ptrdiff_t per_group,
                                               const char *mean_, const char *rstd_, char *dw_,
                                               char *db_, char *scratch_, ptrdiff_t c_lo,
                                               ptrdiff_t c_hi)
{
    const T *mean = (const T *)mean_, *rstd = (const T *)rstd_;
    T *scratch = (T *)scratch_;
    const ptrdiff_t groups = C / per_group;
    for (ptrdiff_t c = c_lo; c < c_hi; c++) {
        double dw = 0, db = 0;
        for (ptrdiff_t n = 0; n < N; n++) {
            const T *g = (const T *)g_ + (n * C + c) * L, *x = (const T *)x_ + (n * C + c) * L;
            const ptrdiff_t s = n * groups + c / per_group;
            const T m = mean[s], r = rstd[s];
            if (dw_) {
                for (ptrdiff_t l = 0; l < L; l++) scratch[l] = g[l] * ((x[l] - m) * r);
                dw += (double)NAME(row_sum)(scratch, L, 0, 0);
            }
            if (db_) db += (double)NAME(row_sum)(g, L, 0, 0);
        }
        if (dw_) ((T *)dw_)[c] = (T)dw;
        if (db_) ((T *)db_)[c] = (T)db;
    }
}

#undef T
#undef ITYPE
#undef IS_F32
#undef LOG_T
#undef SQRT_T
#undef ISA_ATTR
#undef VBYTES
#undef P
#undef LW
#undef NAME
#undef VEC
#undef UVEC
#undef VL
#endif /* NN_ROWS_TEMPLATE */
