/* reftorch_cpu._bags: embedding_bag's 'sum', 'mean' and 'max' bags, float32 and float64.
 *
 * Entry point (called from reftorch_cpu/bags.py, which lays out the bags with the reference's
 * own helper and checks every index first):
 *
 *   bag_sums(weight, w_offset, (rows, D), (w_row_stride, w_col_stride), indices, valid,
 *            starts, ends, per_sample_weights, divisors, out)
 *       for each bag b, out[b, :] = the sum, in the element type, of the terms
 *       weight[indices[k], :] (times per_sample_weights[k] when given) over k in
 *       [starts[b], ends[b]), a position whose valid[k] is 0 (padding_idx) giving +0.0; an
 *       empty bag is 0; then divided by divisors[b] when given ('mean').
 *
 *   bag_maxima(weight, w_offset, (rows, D), strides, indices, valid, starts, ends, out,
 *              max_indices)
 *       'max': each bag's column maxima over its valid entries and the index of the first
 *       entry holding each (see DEFINE_BAG_MAXIMA).
 *
 *   bag_layout(indices, rows, starts, padding_idx, offset2bag, valid, bag_size) -> int
 *       the reference's bag_layout (reftorch/_ops/nn_embedding.py) for nondecreasing starts,
 *       in one pass instead of NumPy's searchsorted and bincount: the bag of entry k is the
 *       last b with starts[b] <= k (-1 before the first start), written clipped at 0 to
 *       offset2bag; valid[k] = that bag >= 0 and indices[k] != padding_idx; bag_size[b]
 *       counts b's valid entries. Returns -1, or the position of the first index outside
 *       [0, rows) (nothing written: the caller raises the reference's error), or -2 when the
 *       starts decrease (the caller declines).
 *
 * The sums are the reference's np.add.reduceat bits, operation for operation: a bag's first
 * term plus NumPy's pairwise sum of the others (see pairwise below), and for the last bag the
 * others include the row of zeros the reference appends (reduceat runs past the final start
 * to the end).
 *
 * indices, starts and ends are int64, valid bool (one byte each), the float operands all of
 * weight's type; out is (B, D) row-major. Everything is checked before memory is touched: the
 * weight view, every index inside [0, rows), 0 <= starts[b] <= ends[b] <= n. Bags run in fixed
 * groups over OpenMP threads; each is summed by one thread, so results never depend on the
 * thread count.
 */
#ifndef BAGS_TEMPLATE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common.h"

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Bags are grouped into work items of at least this many multiply-adds. */
#define ITEM_MIN_ELEMENTS 16384

typedef struct {
    const char *w;                  /* element (0, 0) of the weight view */
    ptrdiff_t rs, cs, D;            /* its strides (elements) and row length */
    const int64_t *idx, *starts, *ends;
    const uint8_t *valid;
    const char *psw, *div;          /* per-sample weights, divisors, or NULL */
    char *out;
    ptrdiff_t bags, n;              /* bags, entries */
} bags_t;

/* NumPy's pairwise summation (its add.reduce inner loop), over the rows of a bag: fewer than
 * 8 terms are added in order (from -0.0, which changes no sum); up to PW_BLOCK, 8 running
 * sums of every 8th term, combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)),
 * then the rest in order; longer runs split in two (the first part a multiple of 8 long) and
 * the halves' sums added. `scratch` holds one row per level of splitting (the second half's
 * sum; the first half's goes to `out`), then the 8 rows of a block's running sums:
 * SPLIT_LEVELS + 8 rows in all (runs up to 2^40 terms split at most 33 times). */
#define PW_BLOCK 128
#define SPLIT_LEVELS 40
#define PREFETCH_AHEAD 8     /* entries: a weight row is fetched this many terms early */

/* The sums, once per element type and instruction set (the BAGS_TEMPLATE part at the end of
 * this file, which isa_clones.h includes): the same C, vectorized wider, adds and multiplies
 * never fused, so every clone gives the same bits. */
#define BAGS_TEMPLATE
#define CLONE_TEMPLATE "bags.c"
#include "isa_clones.h"
#undef CLONE_TEMPLATE
#undef BAGS_TEMPLATE

typedef int (*bag_group_fn)(const bags_t *B, ptrdiff_t lo, ptrdiff_t hi);
static const bag_group_fn BAG_GROUPS[N_ISAS][2] = CLONES(bag_group);

/* A 1-D int64 (kind KIND_I64) or bool (kind -1) operand held in h, writable when
 * `writable`: its first element and its length. */
static int vector_buffer(held_t *h, PyObject *obj, int kind, int writable, const char *what,
                         const char **start, long long *count)
{
    const Py_buffer *view = hold_buffer(h, obj, writable, what);
    if (view == NULL) return -1;
    if (kind == -1 ? view->itemsize != 1 || format_char(view) != '?'
                   : buffer_kind(view, what) != kind) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s must hold %s elements", what,
                         kind == -1 ? "bool" : "int64");
        return -1;
    }
    *count = view->len / view->itemsize;
    *start = view->buf;
    return 0;
}

static int vector_operand(held_t *h, PyObject *obj, int kind, const char *what,
                          const char **start, long long *count)
{
    return vector_buffer(h, obj, kind, 0, what, start, count);
}

/* The operands every entry point shares, args[0..7]: the weight view (weight, w_offset,
 * (rows, D), strides), indices, valid, starts, ends, checked (every index inside the weight's
 * rows, every bag inside the entries) and held in h; B filled but for its outputs. Returns
 * the weight's kind, or -1 with an exception set. */
static int parse_bags(PyObject *const *args, held_t *h, bags_t *B)
{
    long long shape[2], strides[2];
    if (parse_dims(args[2], "weight shape", 2, shape, NULL) < 0 ||
        parse_dims(args[3], "weight strides", 2, strides, NULL) < 0)
        return -1;
    const int kind = float_kind_of(args[0], "weight");
    if (kind < 0) return -1;
    char *w;
    if (kind_operand(h, args[0], args[1], 2, shape, strides, 0, kind, 0, "weight", &w) < 0)
        return -1;
    const char *idx, *valid, *starts, *ends;
    long long n, n_valid, bags, n_ends;
    if (vector_operand(h, args[4], KIND_I64, "indices", &idx, &n) < 0 ||
        vector_operand(h, args[5], -1, "valid", &valid, &n_valid) < 0 ||
        vector_operand(h, args[6], KIND_I64, "starts", &starts, &bags) < 0 ||
        vector_operand(h, args[7], KIND_I64, "ends", &ends, &n_ends) < 0)
        return -1;
    if (n_valid != n || n_ends != bags) {
        PyErr_SetString(PyExc_ValueError, "bags: valid must match indices, ends starts");
        return -1;
    }
    const int64_t *I = (const int64_t *)idx, *S = (const int64_t *)starts,
                  *E = (const int64_t *)ends;
    for (long long k = 0; k < n; k++)
        if (I[k] < 0 || I[k] >= shape[0]) {
            PyErr_Format(PyExc_IndexError, "bags: index %lld is out of range for %lld rows",
                         (long long)I[k], shape[0]);
            return -1;
        }
    for (long long b = 0; b < bags; b++)
        if (S[b] < 0 || S[b] > E[b] || E[b] > n) {
            PyErr_Format(PyExc_ValueError, "bags: bag %lld spans [%lld, %lld) of %lld entries",
                         b, (long long)S[b], (long long)E[b], n);
            return -1;
        }
    *B = (bags_t){.w = w, .rs = strides[0], .cs = strides[1], .D = shape[1], .idx = I,
                  .starts = S, .ends = E, .valid = (const uint8_t *)valid, .bags = bags,
                  .n = n};
    return kind;
}

/* Bags per work item: at least ITEM_MIN_ELEMENTS of work, and whether to use the threads. */
static ptrdiff_t bag_group(const bags_t *B, int *par)
{
    const ptrdiff_t per_bag = B->bags ? (ptrdiff_t)((B->n / B->bags + 1) * B->D) : 1;
    *par = worth_parallel((double)B->n * (double)B->D, ITEM_MIN_ELEMENTS * 2);
    return group_for(per_bag, ITEM_MIN_ELEMENTS);
}

static PyObject *py_bag_sums(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 11, "bag_sums(weight, w_offset, (rows, D), (row_stride, "
                               "col_stride), indices, valid, starts, ends, "
                               "per_sample_weights, divisors, out)") < 0)
        return NULL;
    held_t h = {.held = 0};
    PyObject *result = NULL;
    bags_t B;
    const int kind = parse_bags(args, &h, &B);
    if (kind < 0) goto done;
    const long long one[1] = {1}, n = B.n, bags = B.bags, out_shape[2] = {B.bags, B.D},
                    out_strides[2] = {B.D, 1};
    char *psw, *div, *out;
    if (kind_operand(&h, args[8], NULL, 1, &n, one, 0, kind, 1, "per_sample_weights", &psw) < 0 ||
        kind_operand(&h, args[9], NULL, 1, &bags, one, 0, kind, 1, "divisors", &div) < 0 ||
        kind_operand(&h, args[10], NULL, 2, out_shape, out_strides, 1, kind, 0, "out", &out) < 0)
        goto done;
    B.psw = psw, B.div = div, B.out = out;
    int par, failed = 0;
    const ptrdiff_t group = bag_group(&B, &par);
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    const bag_group_fn sums = BAG_GROUPS[g_isa][kind == KIND_F64];
    FOR_GROUPS(bags, group, par, if (sums(&B, lo, hi) < 0) failed = 1);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release_held(&h);
    return result;
}

/* 'max' bags [lo, hi): out[b, d] = the largest weight[indices[k], d] over the bag's valid
 * entries, folded as np.maximum.reduceat folds them (from the first term, invalid entries
 * as -inf, keeping the running value on ties and when it is NaN, taking a NaN term), 0 for a
 * bag without valid entries; max_indices[b, d] = the index of the first valid entry equal
 * to that maximum, 0 if none (an empty bag, or a NaN maximum). */
#define DEFINE_BAG_MAXIMA(T, SFX)                                                            \
    static void bag_maxima_##SFX(const bags_t *B, int64_t *max_indices, ptrdiff_t lo,       \
                                 ptrdiff_t hi)                                               \
    {                                                                                        \
        const ptrdiff_t D = B->D, cs = B->cs;                                                \
        for (ptrdiff_t b = lo; b < hi; b++) {                                                \
            T *best = (T *)B->out + b * D;                                                   \
            int64_t *where = max_indices + b * D;                                            \
            const int64_t s = B->starts[b], e = B->ends[b];                                  \
            int any_valid = 0;                                                               \
            for (ptrdiff_t d = 0; d < D; d++) best[d] = (T)-INFINITY;                        \
            for (int64_t k = s; k < e; k++) {                                                \
                if (!B->valid[k]) continue; /* a -inf term: the running value stands */     \
                any_valid = 1;                                                               \
                const T *row = (const T *)B->w + B->idx[k] * B->rs;                          \
                for (ptrdiff_t d = 0; d < D; d++) {                                          \
                    const T acc = best[d], v = row[d * cs];                                  \
                    best[d] = (acc >= v || acc != acc) ? acc : v;                            \
                }                                                                            \
            }                                                                                \
            for (ptrdiff_t d = 0; d < D; d++) where[d] = -1;                                 \
            for (int64_t k = s; k < e && any_valid; k++) {                                   \
                if (!B->valid[k]) continue;                                                  \
                const T *row = (const T *)B->w + B->idx[k] * B->rs;                          \
                for (ptrdiff_t d = 0; d < D; d++)                                            \
                    if (where[d] < 0 && row[d * cs] == best[d]) where[d] = B->idx[k];        \
            }                                                                                \
            for (ptrdiff_t d = 0; d < D; d++) {                                              \
                if (where[d] < 0) where[d] = 0;                                              \
                if (!any_valid) best[d] = 0;                                                 \
            }                                                                                \
        }                                                                                    \
    }
DEFINE_BAG_MAXIMA(float, f32)
DEFINE_BAG_MAXIMA(double, f64)

static PyObject *py_bag_maxima(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 10, "bag_maxima(weight, w_offset, (rows, D), (row_stride, "
                               "col_stride), indices, valid, starts, ends, out, "
                               "max_indices)") < 0)
        return NULL;
    held_t h = {.held = 0};
    PyObject *result = NULL;
    bags_t B;
    const int kind = parse_bags(args, &h, &B);
    if (kind < 0) goto done;
    const long long out_shape[2] = {B.bags, B.D}, out_strides[2] = {B.D, 1};
    char *out, *max_indices;
    if (kind_operand(&h, args[8], NULL, 2, out_shape, out_strides, 1, kind, 0, "out", &out) < 0 ||
        kind_operand(&h, args[9], NULL, 2, out_shape, out_strides, 1, KIND_I64, 0,
                     "max_indices", &max_indices) < 0)
        goto done;
    B.out = out;
    int par;
    const ptrdiff_t group = bag_group(&B, &par);
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    if (kind == KIND_F32)
        FOR_GROUPS(B.bags, group, par, bag_maxima_f32(&B, (int64_t *)max_indices, lo, hi));
    else
        FOR_GROUPS(B.bags, group, par, bag_maxima_f64(&B, (int64_t *)max_indices, lo, hi));
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    release_held(&h);
    return result;
}

static PyObject *py_bag_layout(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 7, "bag_layout(indices, rows, starts, padding_idx, offset2bag, "
                              "valid, bag_size)") < 0)
        return NULL;
    long long rows, padding;
    if (parse_size(args[1], "rows", &rows) < 0) return NULL;
    padding = PyLong_AsLongLong(args[3]);
    if (padding == -1 && PyErr_Occurred()) return NULL;
    held_t h = {.held = 0};
    PyObject *result = NULL;
    const char *idx_, *starts_, *bag_, *valid_, *size_;
    long long n, bags, n_bag, n_valid, n_size;
    if (vector_operand(&h, args[0], KIND_I64, "indices", &idx_, &n) < 0 ||
        vector_operand(&h, args[2], KIND_I64, "starts", &starts_, &bags) < 0 ||
        vector_buffer(&h, args[4], KIND_I64, 1, "offset2bag", &bag_, &n_bag) < 0 ||
        vector_buffer(&h, args[5], -1, 1, "valid", &valid_, &n_valid) < 0 ||
        vector_buffer(&h, args[6], KIND_I64, 1, "bag_size", &size_, &n_size) < 0)
        goto done;
    if (n_bag != n || n_valid != n || n_size != bags) {
        PyErr_SetString(PyExc_ValueError, "bag_layout: offset2bag and valid must match "
                        "indices, bag_size starts");
        goto done;
    }
    const int64_t *idx = (const int64_t *)idx_, *starts = (const int64_t *)starts_;
    int64_t *bag = (int64_t *)bag_, *bag_size = (int64_t *)size_;
    uint8_t *valid = (uint8_t *)valid_;
    long long status = -1;
    for (long long k = 0; k < n; k++)
        if (idx[k] < 0 || idx[k] >= rows) {
            status = k;
            break;
        }
    for (long long b = 1; b < bags && status == -1; b++)
        if (starts[b] < starts[b - 1]) status = -2;
    if (status == -1) {
        for (long long b = 0; b < bags; b++) bag_size[b] = 0;
        long long b = -1; /* the bag of entry k: the last with starts[b] <= k */
        for (long long k = 0; k < n; k++) {
            while (b + 1 < bags && starts[b + 1] <= k) b++;
            const int in_bag = b >= 0 && idx[k] != padding;
            bag[k] = b < 0 ? 0 : b;
            valid[k] = (uint8_t)in_bag;
            if (in_bag) bag_size[b]++;
        }
    }
    result = PyLong_FromLongLong(status);
done:
    release_held(&h);
    return result;
}

static PyMethodDef METHODS[] = {
    {"bag_layout", (PyCFunction)(void (*)(void))py_bag_layout, METH_FASTCALL,
     "bag_layout(indices, rows, starts, padding_idx, offset2bag, valid, bag_size) -> int: "
     "embedding_bag's bag of each entry, valid entries and bag sizes; see src/bags.c."},
    {"bag_maxima", (PyCFunction)(void (*)(void))py_bag_maxima, METH_FASTCALL,
     "bag_maxima(weight, w_offset, (rows, D), (row_stride, col_stride), indices, valid, "
     "starts, ends, out, max_indices): embedding_bag's 'max' bags; see src/bags.c."},
    {"bag_sums", (PyCFunction)(void (*)(void))py_bag_sums, METH_FASTCALL,
     "bag_sums(weight, w_offset, (rows, D), (row_stride, col_stride), indices, valid, starts, "
     "ends, per_sample_weights, divisors, out): embedding_bag's sums; see src/bags.c."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._bags",
    .m_doc = "embedding_bag's sum, mean and max bags for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__bags(void)
{
    if (init_module_state() < 0) return NULL;
    return PyModule_Create(&MODULE);
}

#else /* BAGS_TEMPLATE: the sums for element type T and one instruction set ------------- */

/* dst = entry k's term (assign) or dst + that term, element by element: its weight row
 * (times its per-sample weight), +0.0 for an entry that is not valid and for k == n
 * (the row of zeros reduceat runs into). Assigning stores the term itself: NumPy's
 * running sums start from their first term, not from 0 (0 + -0.0 is +0.0). */
ISA_ATTR static inline void NAME(add_term)(const bags_t *B, int64_t k,
                                           T *restrict dst, int assign)
{
    const ptrdiff_t D = B->D, cs = B->cs;
    if (k >= B->n || !B->valid[k]) {
        for (ptrdiff_t d = 0; d < D; d++) dst[d] = assign ? (T)0 : dst[d] + (T)0;
        return;
    }
    const T *row = (const T *)B->w + B->idx[k] * B->rs;
    if (k + PREFETCH_AHEAD < B->n && cs == 1) {
        /* the rows are far apart in a large table: ask for a later entry's row now, so
         * its memory latency overlaps these adds (the next rows are read in k order) */
        const char *later = (const char *)((const T *)B->w + B->idx[k + PREFETCH_AHEAD] * B->rs);
        for (ptrdiff_t byte = 0; byte < D * (ptrdiff_t)sizeof(T); byte += 64)
            __builtin_prefetch(later + byte);
    }
    if (B->psw) {
        const T s = ((const T *)B->psw)[k];
        if (assign)
            for (ptrdiff_t d = 0; d < D; d++) dst[d] = row[d * cs] * s;
        else
            for (ptrdiff_t d = 0; d < D; d++) dst[d] = dst[d] + row[d * cs] * s;
    } else if (cs == 1) {
        if (assign)
            for (ptrdiff_t d = 0; d < D; d++) dst[d] = row[d];
        else
            for (ptrdiff_t d = 0; d < D; d++) dst[d] = dst[d] + row[d];
    } else {
        if (assign)
            for (ptrdiff_t d = 0; d < D; d++) dst[d] = row[d * cs];
        else
            for (ptrdiff_t d = 0; d < D; d++) dst[d] = dst[d] + row[d * cs];
    }
}

ISA_ATTR static void NAME(pairwise)(const bags_t *B, int64_t k0, int64_t n, T *out,
                                    T *scratch)
{
    const ptrdiff_t D = B->D;
    if (n < 8) {
        for (ptrdiff_t d = 0; d < D; d++) out[d] = (T)-0.0;
        for (int64_t i = 0; i < n; i++) NAME(add_term)(B, k0 + i, out, 0);
    } else if (n <= PW_BLOCK) {
        T *r = scratch;
        for (int j = 0; j < 8; j++) NAME(add_term)(B, k0 + j, r + j * D, 1);
        int64_t i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++)
                NAME(add_term)(B, k0 + i + j, r + j * D, 0);
        for (ptrdiff_t d = 0; d < D; d++)
            out[d] = ((r[d] + r[D + d]) + (r[2 * D + d] + r[3 * D + d])) +
                     ((r[4 * D + d] + r[5 * D + d]) + (r[6 * D + d] + r[7 * D + d]));
        for (; i < n; i++) NAME(add_term)(B, k0 + i, out, 0);
    } else {
        int64_t n2 = n / 2;
        n2 -= n2 % 8;
        /* this level's row; deeper levels use the rows after */
        T *second = scratch;
        NAME(pairwise)(B, k0, n2, out, scratch + D);
        NAME(pairwise)(B, k0 + n2, n - n2, second, scratch + D);
        for (ptrdiff_t d = 0; d < D; d++) out[d] = out[d] + second[d];
    }
}

/* reduceat over bag b: its first term plus the pairwise sum of the rest (the last bag's
 * rest running into the row of zeros); an empty bag is 0; then the 'mean' division. */
ISA_ATTR static void NAME(bag_sums)(const bags_t *B, ptrdiff_t lo, ptrdiff_t hi,
                                    T *scratch, T *rest)
{
    const ptrdiff_t D = B->D;
    const T *div = (const T *)B->div;
    for (ptrdiff_t b = lo; b < hi; b++) {
        T *acc = (T *)B->out + b * D;
        const int64_t start = B->starts[b], end = B->ends[b];
        if (end <= start) {
            for (ptrdiff_t d = 0; d < D; d++) acc[d] = 0;
            continue;
        }
        const int64_t stop = b == B->bags - 1 ? B->n + 1 : end;
        NAME(pairwise)(B, start + 1, stop - start - 1, rest, scratch);
        NAME(add_term)(B, start, acc, 1);
        for (ptrdiff_t d = 0; d < D; d++) acc[d] = acc[d] + rest[d];
        if (div)
            for (ptrdiff_t d = 0; d < D; d++) acc[d] = acc[d] / div[b];
    }
}

/* Bags [lo, hi) with scratch rows of their own; -1 when they cannot be allocated. */
ISA_ATTR static int NAME(bag_group)(const bags_t *B, ptrdiff_t lo, ptrdiff_t hi)
{
    T *scratch = malloc(sizeof(T) * (size_t)B->D * (SPLIT_LEVELS + 8 + 1) + 1);
    if (scratch == NULL) return -1;
    NAME(bag_sums)(B, lo, hi, scratch, scratch + (SPLIT_LEVELS + 8) * B->D);
    free(scratch);
    return 0;
}

#undef T
#undef IS_F32
#undef ISA_ATTR
#undef VBYTES
#undef NAME
#endif /* BAGS_TEMPLATE */
