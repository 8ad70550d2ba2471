/* reftorch_cpu._gather: padding (F.pad's constant, reflect and replicate modes) and the
 * backward of the latter two, and upsampling (nearest by gather, linear and cubic by weighted
 * taps).
 *
 * Entry points (called from reftorch_cpu/padding.py and upsampling.py, which build the index
 * arrays and weights with the reference's own functions):
 *
 *   gather(out, a, a_offset, a_strides, a_shape, indices, fill)
 *       out[o_0, .., o_last] = a[i_0(o_0), .., i_last(o_last)] with i_d(o) = indices[d][o],
 *       or o where indices[d] is None (a dim not padded); where any i_d(o_d) is -1 (allowed
 *       only with a fill), out[o..] = fill[0] instead.
 *       a is viewed as a_shape (at most MAX_NDIM dims) from element a_offset with a_strides;
 *       out is a fresh row-major array of shape (len(indices[d]) or a_shape[d] per dim);
 *       fill is None or a one-element buffer of a's width.
 *   taps(out, a, outer, size, n, inner, index, weights)
 *       out[r, o, i] = sum over t of a[r, index[o, t], i] * weights[o, t], the products
 *       added in t order (the first one alone, then + the next); float32 / float64;
 *       a row-major (outer, size, inner), out row-major (outer, n, inner), index and
 *       weights (n, T). One spatial axis of an upsampling.
 *   index_add(out, a, outer, size, inner, index[, weights, taps])
 *       out (outer, size, inner), row-major, is set to zero, then
 *       out[r, index[o], i] += a[r, o, i] for o = 0, 1, .. in order; a is row-major
 *       (outer, n, inner), index (n,). With weights, index and weights are (n, taps) and
 *       out[r, index[o, t], i] += a[r, o, i] * weights[o, t] for o in order, then t: the
 *       transpose of taps (one axis of an upsampling's backward).
 *
 * gather moves elements, never computes with them: the Python side hands over the storages
 * viewed as unsigned integers of the dtype's width (1, 2, 4 or 8 bytes), so one loop serves
 * every dtype and the result is the reference's bit for bit. It serves reflection and
 * replication padding (mirrored or repeated indices) and constant padding (-1 where the value
 * goes; cropping is an index range that starts or ends inside). Along the last dim the
 * output is cut once into runs whose indices count up by one, or are all -1: each run one
 * loop of loads and stores (the padded image's middle), or of stores (a fill), the rest
 * element by element (the mirrored or repeated edges).
 *
 * taps is one axis of the reference's separable upsampling: each output element one product
 * per tap, added in the reference's order, so the bits are its own. Rows are split among
 * the threads.
 *
 * index_add is one dim of a backward: the reference's np.add.at along that dim, which adds
 * the contributions of each output element in index order, starting from zero (each
 * weighted one a product rounded first, as the reference multiplies before np.add.at). Doing
 * the same here (float32 / float64) gives the reference's bits; padding.py runs one pass per
 * padded dim, last dim first, and upsampling.py one per spatial axis, first axis first, as
 * the reference does.
 *
 * Safety: every index is checked against its dim before any memory is touched, and every
 * buffer's view is bounds-checked (common.h). Threads split the output rows (gather) or the
 * outer rows (index_add); each row is written by one thread from its own inputs, so results
 * never depend on the thread count.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Calls moving fewer bytes than this run on one thread (a parallel region costs a few
 * microseconds): 256 KiB, the copy kernels' threshold in kernels.c. */
#ifndef PARALLEL_MIN_BYTES
#define PARALLEL_MIN_BYTES (256 * 1024)
#endif

/* An int64 index buffer of any length whose values all lie in [lowest, limit). */
static int parse_index(held_t *h, PyObject *obj, long long lowest, long long limit,
                       const char *what, const int64_t **values, ptrdiff_t *length)
{
    const Py_buffer *view = hold_buffer(h, obj, 0, what);
    if (view == NULL) return -1;
    const int c = format_char(view);
    if (!((c == 'l' || c == 'q') && view->itemsize == 8)) {
        PyErr_Format(PyExc_TypeError, "%s must hold int64 elements", what);
        return -1;
    }
    const int64_t *v = (const int64_t *)view->buf;
    const ptrdiff_t n = (ptrdiff_t)(view->len / 8);
    for (ptrdiff_t i = 0; i < n; i++) {
        if (v[i] < lowest || v[i] >= limit) {
            PyErr_Format(PyExc_IndexError, "%s[%zd] = %lld is out of range for a dim of size %lld",
                         what, i, (long long)v[i], limit);
            return -1;
        }
    }
    *values = v;
    *length = n;
    return 0;
}

/* ---- gather ---------------------------------------------------------------------------- */

/* A run of the last dim: output positions [start, start + length) read input positions
 * first, first + 1, ..., or take the fill value when first is -1. */
typedef struct {
    ptrdiff_t start, first, length;
} run_t;

typedef struct {
    int ndim;
    ptrdiff_t out_len[MAX_NDIM];      /* out's shape */
    ptrdiff_t stride[MAX_NDIM];       /* a's strides in elements */
    const int64_t *index[MAX_NDIM];   /* per dim: the padded dims' index arrays, else NULL */
    const char *fill;                 /* the fill element, or NULL */
    const ptrdiff_t *offsets;         /* the last dim's element offsets in a, when its runs
                                         are too short to copy run by run; else NULL */
    const run_t *runs;
    ptrdiff_t n_runs;
    size_t width;                     /* bytes per element */
    char *out;
    const char *a;
} gather_t;

/* Output row o from its input row a (NULL: a padded row, the fill value throughout), elements
 * of type UT: element by element through G->offsets when set, else run by run. Typed loops,
 * not calls per run: a padded image's rows are short (a 56-element middle between fills of
 * 2), and calls to memcpy cost more than the copying. */
#define DEFINE_ROW(W, UT)                                                                    \
    static void row_##W(const gather_t *G, UT *o, const UT *a)                               \
    {                                                                                        \
        const ptrdiff_t n = G->out_len[G->ndim - 1], s = G->stride[G->ndim - 1];             \
        UT fill = 0;                                                                         \
        if (G->fill) memcpy(&fill, G->fill, sizeof fill);                                    \
        if (a == NULL) {                                                                     \
            for (ptrdiff_t i = 0; i < n; i++) o[i] = fill;                                   \
            return;                                                                          \
        }                                                                                    \
        if (G->offsets) {                                                                    \
            for (ptrdiff_t i = 0; i < n; i++) o[i] = a[G->offsets[i]];                       \
            return;                                                                          \
        }                                                                                    \
        for (ptrdiff_t r = 0; r < G->n_runs; r++) {                                          \
            const run_t run = G->runs[r];                                                    \
            UT *out = o + run.start;                                                         \
            if (run.first < 0) {                                                             \
                for (ptrdiff_t i = 0; i < run.length; i++) out[i] = fill;                    \
                continue;                                                                    \
            }                                                                                \
            const UT *in = a + run.first * s;                                                \
            if (s == 1) {                                                                    \
                for (ptrdiff_t i = 0; i < run.length; i++) out[i] = in[i];                   \
            } else {                                                                         \
                for (ptrdiff_t i = 0; i < run.length; i++) out[i] = in[i * s];               \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_ROW(1, uint8_t)
DEFINE_ROW(2, uint16_t)
DEFINE_ROW(4, uint32_t)
DEFINE_ROW(8, uint64_t)

/* Output row `row`, at position pos[d] of every dim d but the last. */
static void gather_row(const gather_t *G, ptrdiff_t row, const ptrdiff_t *pos)
{
    const int last = G->ndim - 1;
    const size_t w = G->width;
    char *o = G->out + (size_t)row * G->out_len[last] * w;
    const char *a = G->a;
    ptrdiff_t offset = 0;
    for (int d = 0; d < last; d++) {
        const ptrdiff_t i = G->index[d] ? (ptrdiff_t)G->index[d][pos[d]] : pos[d];
        if (i < 0) { /* a padded row */
            a = NULL;
            break;
        }
        offset += i * G->stride[d];
    }
    if (a != NULL) a += offset * (ptrdiff_t)w;
    if (w == 1) {
        row_1(G, (uint8_t *)o, (const uint8_t *)a);
    } else if (w == 2) {
        row_2(G, (uint16_t *)o, (const uint16_t *)a);
    } else if (w == 4) {
        row_4(G, (uint32_t *)o, (const uint32_t *)a);
    } else {
        row_8(G, (uint64_t *)o, (const uint64_t *)a);
    }
}

/* Output rows [lo, hi) (row-major over every dim but the last), their positions counted
 * up row by row: working them out from the row number took a division per dim and row, more
 * time than a short row's copy. */
static void gather_rows(const gather_t *G, ptrdiff_t lo, ptrdiff_t hi)
{
    const int last = G->ndim - 1;
    ptrdiff_t pos[MAX_NDIM], rem = lo;
    for (int d = last - 1; d >= 0; d--) {
        pos[d] = rem % G->out_len[d];
        rem /= G->out_len[d];
    }
    for (ptrdiff_t row = lo; row < hi; row++) {
        gather_row(G, row, pos);
        for (int d = last - 1; d >= 0 && ++pos[d] == G->out_len[d]; d--) pos[d] = 0;
    }
}

/* The last dim's index (NULL: not padded) cut into runs that count up by one or are all -1
 * (at most n runs). */
static ptrdiff_t find_runs(const int64_t *index, ptrdiff_t n, run_t *runs)
{
    if (index == NULL) {
        runs[0] = (run_t){0, 0, n};
        return 1;
    }
    ptrdiff_t count = 0;
    for (ptrdiff_t o = 0; o < n; o++) {
        if (count > 0) {
            run_t *prev = &runs[count - 1];
            if (prev->first < 0 ? index[o] < 0 : index[o] == prev->first + prev->length) {
                prev->length++;
                continue;
            }
        }
        runs[count++] = (run_t){o, index[o] < 0 ? -1 : (ptrdiff_t)index[o], 1};
    }
    return count;
}

static PyObject *py_gather(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "gather(out, a, a_offset, a_strides, a_shape, indices, "
                        "fill) takes 7 arguments");
        return NULL;
    }
    held_t h = {.held = 0};
    PyObject *result = NULL;
    run_t *runs = NULL;
    ptrdiff_t *offsets = NULL;
    gather_t G = {0};
    long long shape[MAX_NDIM], strides[MAX_NDIM]; /* parse_dims fills up to MAX_NDIM */
    int ndim;
    if (parse_dims(args[4], "a_shape", -1, shape, &ndim) < 0) goto done;
    if (ndim < 1) {
        PyErr_SetString(PyExc_ValueError, "a_shape must have at least one dim");
        goto done;
    }
    const Py_buffer *out = hold_buffer(&h, args[0], 1, "out");
    const Py_buffer *a = out ? hold_buffer(&h, args[1], 0, "a") : NULL;
    if (a == NULL) goto done;
    if (out->itemsize != a->itemsize || (a->itemsize != 1 && a->itemsize != 2 &&
                                         a->itemsize != 4 && a->itemsize != 8)) {
        PyErr_Format(PyExc_TypeError, "out and a must hold elements of one width of 1, 2, 4 or 8 "
                     "bytes (got %zd and %zd)", out->itemsize, a->itemsize);
        goto done;
    }
    if (args[6] != Py_None) {
        const Py_buffer *fill = hold_buffer(&h, args[6], 0, "fill");
        if (fill == NULL) goto done;
        if (fill->itemsize != a->itemsize || fill->len < fill->itemsize) {
            PyErr_SetString(PyExc_TypeError, "fill must hold one element of a's width");
            goto done;
        }
        G.fill = fill->buf;
    }
    PyObject *indices = PySequence_Fast(args[5], "indices must be a tuple");
    if (indices == NULL) goto done;
    if (PySequence_Fast_GET_SIZE(indices) != ndim) {
        PyErr_Format(PyExc_ValueError, "indices must hold %d entries, an index array or None "
                     "per dim of a", ndim);
        Py_DECREF(indices);
        goto done;
    }
    G.ndim = ndim;
    long long out_shape[MAX_NDIM];
    for (int d = 0; d < ndim; d++) {
        PyObject *index = PySequence_Fast_GET_ITEM(indices, d);
        ptrdiff_t n = (ptrdiff_t)shape[d];
        if (index != Py_None && parse_index(&h, index, G.fill ? -1 : 0, shape[d], "indices",
                                            &G.index[d], &n) < 0) {
            Py_DECREF(indices);
            goto done;
        }
        G.out_len[d] = n;
        out_shape[d] = n;
    }
    Py_DECREF(indices);
    long long out_strides[MAX_NDIM];
    long long step = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        out_strides[d] = step;
        step *= out_shape[d];
    }
    char *a_start, *out_start;
    if (parse_view(a, "a", args[2], args[3], ndim, shape, strides, &a_start) < 0 ||
        view_start(out, "out", 0, ndim, out_shape, out_strides, &out_start) < 0)
        goto done;
    for (int d = 0; d < ndim; d++) G.stride[d] = strides[d];
    G.width = (size_t)a->itemsize;
    G.out = out_start;
    G.a = a_start;
    const ptrdiff_t n_last = G.out_len[ndim - 1];
    ptrdiff_t rows = 1;
    for (int d = 0; d < ndim - 1; d++) rows *= G.out_len[d];
    if (rows == 0 || n_last == 0) {
        result = Py_None;
        goto done;
    }
    runs = malloc((size_t)n_last * sizeof *runs);
    if (runs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    G.runs = runs;
    G.n_runs = find_runs(G.index[ndim - 1], n_last, runs);
    if (G.index[ndim - 1] != NULL && G.fill == NULL && G.n_runs * 4 > n_last) {
        /* runs average under 4 elements: gather element by element through offsets */
        offsets = malloc((size_t)n_last * sizeof *offsets);
        if (offsets == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (ptrdiff_t o = 0; o < n_last; o++)
            offsets[o] = (ptrdiff_t)G.index[ndim - 1][o] * G.stride[ndim - 1];
        G.offsets = offsets;
    }
    const double bytes = (double)rows * n_last * G.width;
    Py_BEGIN_ALLOW_THREADS
    if (worth_parallel(bytes, PARALLEL_MIN_BYTES)) {
        const ptrdiff_t block = even_block(rows, max_threads());
        const ptrdiff_t blocks = (rows + block - 1) / block;
#pragma omp parallel for schedule(static)
        for (ptrdiff_t b = 0; b < blocks; b++)
            gather_rows(&G, b * block, rows - b * block < block ? rows : (b + 1) * block);
    } else {
        gather_rows(&G, 0, rows);
    }
    Py_END_ALLOW_THREADS
    g_calls++;
    result = Py_None;
done:
    free(runs);
    free(offsets);
    release_held(&h);
    Py_XINCREF(result);
    return result;
}

/* ---- taps (one axis of an upsampling) ----------------------------------------------------- */

#define DEFINE_TAPS(T)                                                                       \
    static void taps_row_##T(T *out, const T *a, ptrdiff_t inner, const int64_t *index,      \
                             const T *weights, ptrdiff_t n, ptrdiff_t taps)                  \
    {                                                                                        \
        if (inner == 1) { /* the last axis: one element per output, its sum in a register */  \
            for (ptrdiff_t o = 0; o < n; o++) {                                              \
                const int64_t *ix = index + o * taps;                                        \
                const T *w = weights + o * taps;                                             \
                T acc = a[ix[0]] * w[0];                                                     \
                for (ptrdiff_t t = 1; t < taps; t++) acc = acc + a[ix[t]] * w[t];            \
                out[o] = acc;                                                                \
            }                                                                                \
            return;                                                                          \
        }                                                                                    \
        for (ptrdiff_t o = 0; o < n; o++) {                                                  \
            T *dst = out + o * inner;                                                        \
            const int64_t *ix = index + o * taps;                                            \
            const T *w = weights + o * taps;                                                 \
            const T *src = a + ix[0] * inner;                                                \
            for (ptrdiff_t i = 0; i < inner; i++) dst[i] = src[i] * w[0];                    \
            for (ptrdiff_t t = 1; t < taps; t++) {                                           \
                src = a + ix[t] * inner;                                                     \
                for (ptrdiff_t i = 0; i < inner; i++) dst[i] = dst[i] + src[i] * w[t];       \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_TAPS(float)
DEFINE_TAPS(double)

/* out (outer, n, inner) and a (outer, size, inner), row-major floats of one kind (out's):
 * held, checked, their element 0 in *out_start / *a_start; returns the kind, or -1. */
static int axis_operands(held_t *h, PyObject *out_obj, PyObject *a_obj, long long outer,
                         long long n, long long size, long long inner, char **out_start,
                         char **a_start)
{
    const int kind = float_kind_of(out_obj, "out");
    const long long out_shape[3] = {outer, n, inner}, a_shape[3] = {outer, size, inner};
    const long long out_strides[3] = {n * inner, inner, 1}, a_strides[3] = {size * inner, inner, 1};
    if (kind < 0 ||
        kind_operand(h, out_obj, NULL, 3, out_shape, out_strides, 1, kind, 0, "out",
                     out_start) < 0 ||
        kind_operand(h, a_obj, NULL, 3, a_shape, a_strides, 0, kind, 0, "a", a_start) < 0)
        return -1;
    return kind;
}

static PyObject *py_taps(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 8, "taps(out, a, outer, size, n, inner, index, weights)") < 0)
        return NULL;
    held_t h = {.held = 0};
    PyObject *result = NULL;
    long long outer, size, n, inner;
    const int64_t *index;
    ptrdiff_t entries;
    char *out, *a, *w;
    if (parse_size(args[2], "outer", &outer) < 0 || parse_size(args[3], "size", &size) < 0 ||
        parse_size(args[4], "n", &n) < 0 || parse_size(args[5], "inner", &inner) < 0 ||
        parse_index(&h, args[6], 0, size, "index", &index, &entries) < 0)
        goto done;
    const int kind = axis_operands(&h, args[0], args[1], outer, n, size, inner, &out, &a);
    const Py_buffer *weights = kind < 0 ? NULL : hold_buffer(&h, args[7], 0, "weights");
    if (weights == NULL) goto done;
    if (buffer_kind(weights, "weights") != kind) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "weights must hold out's element type");
        goto done;
    }
    if (weights->len / weights->itemsize != entries ||
        (n == 0 ? entries != 0 : entries % n != 0)) {
        PyErr_SetString(PyExc_ValueError, "index and weights must both be (n, T)");
        goto done;
    }
    const ptrdiff_t taps = n ? entries / n : 0;
    w = weights->buf;
    if (outer == 0 || n == 0 || inner == 0 || taps == 0) {
        result = Py_None;
        goto done;
    }
    const double bytes = (double)outer * n * inner * (double)(taps + 1) *
                         (kind == KIND_F32 ? sizeof(float) : sizeof(double));
    const int threaded = worth_parallel(bytes, PARALLEL_MIN_BYTES);
    Py_BEGIN_ALLOW_THREADS
    if (kind == KIND_F32) {
#pragma omp parallel for schedule(static) if (threaded)
        for (ptrdiff_t r = 0; r < outer; r++)
            taps_row_float((float *)out + r * n * inner, (const float *)a + r * size * inner,
                           inner, index, (const float *)w, n, taps);
    } else {
#pragma omp parallel for schedule(static) if (threaded)
        for (ptrdiff_t r = 0; r < outer; r++)
            taps_row_double((double *)out + r * n * inner, (const double *)a + r * size * inner,
                            inner, index, (const double *)w, n, taps);
    }
    Py_END_ALLOW_THREADS
    g_calls++;
    result = Py_None;
done:
    release_held(&h);
    Py_XINCREF(result);
    return result;
}

/* ---- index_add (one dim of a backward) -------------------------------------------------- */

/* out[index[o, t], i] += a[o, i] (* weights[o, t] when weights) over one row; T = taps. */
#define DEFINE_INDEX_ADD(T)                                                                  \
    static void index_add_row_##T(T *out, const T *a, ptrdiff_t size, ptrdiff_t inner,        \
                                  const int64_t *index, const T *weights, ptrdiff_t n,        \
                                  ptrdiff_t taps)                                            \
    {                                                                                        \
        memset(out, 0, (size_t)(size * inner) * sizeof(T));                                 \
        for (ptrdiff_t o = 0; o < n; o++) {                                                  \
            const T *src = a + o * inner;                                                    \
            for (ptrdiff_t t = 0; t < taps; t++) {                                           \
                T *dst = out + index[o * taps + t] * inner;                                  \
                if (weights == NULL) {                                                       \
                    for (ptrdiff_t i = 0; i < inner; i++) dst[i] += src[i];                  \
                } else {                                                                     \
                    const T w = weights[o * taps + t];                                       \
                    for (ptrdiff_t i = 0; i < inner; i++) dst[i] += src[i] * w;              \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_INDEX_ADD(float)
DEFINE_INDEX_ADD(double)

static PyObject *py_index_add(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 8 && check_nargs(nargs, 6, "index_add(out, a, outer, size, inner, index[, "
                                            "weights, taps])") < 0)
        return NULL;
    held_t h = {.held = 0};
    PyObject *result = NULL;
    long long outer, size, inner, taps = 1;
    const int64_t *index;
    ptrdiff_t entries;
    if (parse_size(args[2], "outer", &outer) < 0 || parse_size(args[3], "size", &size) < 0 ||
        parse_size(args[4], "inner", &inner) < 0 ||
        parse_index(&h, args[5], 0, size, "index", &index, &entries) < 0 ||
        (nargs == 8 && parse_size(args[7], "taps", &taps) < 0))
        goto done;
    if (taps == 0 || entries % taps != 0) {
        PyErr_SetString(PyExc_ValueError, "index must be (n, taps)");
        goto done;
    }
    const ptrdiff_t n = entries / taps;
    char *out_start, *a_start;
    const int kind = axis_operands(&h, args[0], args[1], outer, size, n, inner, &out_start,
                                   &a_start);
    if (kind < 0) goto done;
    const Py_buffer *weights = nargs == 8 ? hold_buffer(&h, args[6], 0, "weights") : NULL;
    if (nargs == 8 && weights == NULL) goto done;
    if (weights && buffer_kind(weights, "weights") != kind) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "weights must hold out's element type");
        goto done;
    }
    if (weights && weights->len / weights->itemsize != entries) {
        PyErr_SetString(PyExc_ValueError, "index and weights must both be (n, taps)");
        goto done;
    }
    if (outer == 0 || size == 0 || inner == 0) {
        result = Py_None;
        goto done;
    }
    const void *w = weights ? weights->buf : NULL;
    const size_t width = kind == KIND_F32 ? sizeof(float) : sizeof(double);
    const double bytes = (double)outer * (double)(n + size) * (double)inner * (double)width;
    const int threaded = worth_parallel(bytes, PARALLEL_MIN_BYTES);
    Py_BEGIN_ALLOW_THREADS
    if (kind == KIND_F32) {
#pragma omp parallel for schedule(static) if (threaded)
        for (ptrdiff_t r = 0; r < outer; r++)
            index_add_row_float((float *)out_start + r * size * inner,
                                (const float *)a_start + r * n * inner, size, inner, index,
                                (const float *)w, n, taps);
    } else {
#pragma omp parallel for schedule(static) if (threaded)
        for (ptrdiff_t r = 0; r < outer; r++)
            index_add_row_double((double *)out_start + r * size * inner,
                                 (const double *)a_start + r * n * inner, size, inner, index,
                                 (const double *)w, n, taps);
    }
    Py_END_ALLOW_THREADS
    g_calls++;
    result = Py_None;
done:
    release_held(&h);
    Py_XINCREF(result);
    return result;
}

static PyMethodDef METHODS[] = {
    {"gather", (PyCFunction)(void (*)(void))py_gather, METH_FASTCALL,
     "gather(out, a, a_offset, a_strides, a_shape, indices, fill): out[o..] = a[indices[d][o_d]..]."},
    {"taps", (PyCFunction)(void (*)(void))py_taps, METH_FASTCALL,
     "taps(out, a, outer, size, n, inner, index, weights): out[r, o, i] = sum_t a[r, index[o, t], i] * weights[o, t]."},
    {"index_add", (PyCFunction)(void (*)(void))py_index_add, METH_FASTCALL,
     "index_add(out, a, outer, size, inner, index[, weights, taps]): out = 0; "
     "out[r, index[o], i] += a[r, o, i], or += a[r, o, i] * weights[o, t] at index[o, t]."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._gather",
    .m_doc = "Padding and upsampling gathers for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__gather(void)
{
    if (init_module_state() < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_NDIM", MAX_NDIM) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
