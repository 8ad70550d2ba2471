/* reftorch_cpu._sort: sort, argsort, topk and kthvalue along one dim, for float32, float64,
 * int64 and int32.
 *
 * Entry point (called from reftorch_cpu/sorting.py, which allocates the results):
 *
 *   select(x, x_offset, shape, x_strides, dim, descending, k, kth_only,
 *          values, values_offset, values_strides, indices, indices_offset, indices_strides)
 *
 *       For every row of x along `dim` (every combination of the other dims' coordinates),
 *       order the row's n = shape[dim] elements the way the reference's stable sort does
 *       (ascending, or descending when `descending`) and write the first k of that order
 *       (topk; sort is k = n) -- or, with `kth_only`, only the k-th (kthvalue) -- into
 *       `values` (same element type as x) and `indices` (int64). The results have x's shape
 *       with shape[dim] replaced by k (1 with kth_only), and any strides. `values` or
 *       `indices` may be None (argsort has no values).
 *
 * The order is the reference's (NumPy's stable argsort, which matches torch's stable sort):
 *   - NaN is larger than +inf; every NaN (any sign or payload) is equal to every other;
 *   - -0.0 equals 0.0;
 *   - equal elements keep their original order, in both directions: descending is NOT the
 *     ascending order reversed (ties still come lowest index first).
 * The reference sorts stably whatever `stable=` says, so this module always does too, and
 * topk (sorted=True or False) returns the first k of that stable order, as the reference does.
 *
 * How: each element becomes one unsigned integer holding (key, index): the key is an
 * order-preserving map of the value to an unsigned integer (float bits with the sign folded
 * in, NaN and -0.0 made canonical first; integers with their sign bit flipped), complemented
 * for a descending order; the index (the position along the row) fills the low bits. For
 * 32-bit values that is a uint64 (key << 32 | index), for 64-bit values an unsigned __int128
 * (key << 64 | index). These integers are all distinct, and ordering them orders by key with
 * ties broken by the lower index: exactly the stable order. So ANY correct sort or
 * selection of them gives the one right answer -- nothing depends on the algorithm's tie
 * handling, the pivot choice or the thread count.
 *   - full sorts (sort, argsort, topk with k >= n / 8): an LSD radix sort on the keys
 *     (stable, and the elements start in index order, so equal keys stay in index order).
 *     It sorts key - (the row's smallest key), so only the digits the keys' range needs are
 *     passed over (an int row spanning fewer than 256 values takes one pass), and skips a
 *     digit that is the same in every element. Digits are 8 bits, 11 bits from 65,536
 *     elements (3 passes for 32-bit keys). Rows of at most 64 elements: insertion sort.
 *     Rows of 524,288 elements or more (and rows sorted by several threads) first go into
 *     up to 2,048 buckets by the top bits of their keys (one stable counting pass), and
 *     each bucket is then sorted on its own, in cache.
 *   - topk with small k (k <= 64 and k < n / 8): one pass keeping the k smallest integers in
 *     a max-heap, then a heap sort of those k. Most elements cannot enter the heap; a
 *     vectorized compare with the heap top's value rules out blocks of 16 at once, and the
 *     blocks that pass are checked exactly, by key. This filter loop is compiled for
 *     baseline x86-64, AVX2 and AVX-512F and picked by best_isa() (set_isa() to force one);
 *     the other loops (radix scatter, heap, partitions) are scalar data movement.
 *   - other topk, kthvalue: the k-th smallest KEY by quickselect on the keys alone
 *     (median-of-three pivot, branch-free partitions; when the pivot is the range's
 *     minimum a second pass splits off the keys equal to it, so runs of equal keys cost one
 *     pass; a heap sort takes over after 2 log2 n rounds, so the worst case stays n log n).
 *     The k smallest elements are then those with a smaller key plus, in index order, the
 *     first few with that key; the smaller ones get an introsort (topk).
 * Values are written back from the key (the map is invertible), except for keys that stand
 * for several values (zeros: 0.0 / -0.0; NaNs: their payloads), which are read from x so that
 * the results are the input's elements bit for bit.
 *
 * Threads: rows are split over OpenMP threads (static schedule, one row is one thread's
 * work). When there are fewer rows than threads and a row is long (>= PARALLEL_ROW_MIN
 * elements, full sorts only), each row's sort is itself split: the row is cut into one
 * chunk per thread for the bucket pass (chunk c's elements go after those of chunks < c in
 * each bucket: stable), and the buckets are then sorted by whichever thread is free.
 * Whatever the split, the result is the unique sorted order above, so it never depends on
 * the thread count.
 *
 * Safety: every argument is checked before memory is touched (formats, sizes, 0 <= k <= n,
 * every element of every operand inside its buffer). Scratch memory is allocated per thread;
 * if an allocation fails the call raises MemoryError.
 */
#if !defined(ELEM_TEMPLATE) && !defined(VALUE_TEMPLATE)

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

/* Rows of at most this many elements are insertion-sorted (no radix pass overhead). */
#define INSERTION_MAX 64
/* topk sorts the whole row when k * PARTIAL_RATIO >= n (a selection would not save work);
 * otherwise it keeps a heap of the k best when k <= HEAP_MAX_K, else selects by key. */
#define PARTIAL_RATIO 8
#define HEAP_MAX_K 64
/* Radix sorts of at least this many elements use 11-bit digits (3 passes for 32-bit keys,
 * 6 for 64-bit ones) instead of 8-bit ones (4 and 8 passes). */
#define RADIX11_MIN 65536
/* Rows of at least this many elements (or sorted by several threads) are first split into
 * buckets by their top bits. Measured on one thread of a 2-core x86-64 (ms, LSD / split):
 * float32 65,536 elements 1.2 / 1.9, 262,144: 6.1 / 7.4, 1,048,576: 48 / 35; int32 1M 47 / 41.
 */
#define MSD_MIN 524288
/* Calls touching fewer elements run on one thread (a parallel region costs a few us). */
#define PARALLEL_MIN_ELEMENTS 16384
/* A row this long sorts on all threads when there are fewer rows than threads. */
#define PARALLEL_ROW_MIN 131072
#define MAX_CHUNKS 64

__extension__ typedef unsigned __int128 u128;  /* GCC / Clang */

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define HAVE_X86_CLONES 1
#else
#define HAVE_X86_CLONES 0
#endif

enum { T_F32, T_F64, T_I64, T_I32, N_TYPES };

/* The walk: batch dims (every dim but the sorted one) and the sorted row. */
typedef struct {
    int nb;                                    /* number of batch dims */
    ptrdiff_t bshape[MAX_NDIM];                /* their sizes */
    ptrdiff_t bx[MAX_NDIM], bv[MAX_NDIM], bi[MAX_NDIM]; /* their strides in x, values, indices */
    ptrdiff_t rows, n, k;                      /* rows, row length, results per row */
    ptrdiff_t sx, sv, si;                      /* strides along the sorted dim */
    int descending, kth_only;
    const char *x;
    char *values;                              /* may be NULL */
    int64_t *indices;                          /* may be NULL */
} walk_t;

/* Element offsets of row r's first element in x, values and indices (row-major over the
 * batch dims). */
static inline void row_offsets(const walk_t *w, ptrdiff_t r, ptrdiff_t *ox, ptrdiff_t *ov,
                               ptrdiff_t *oi)
{
    ptrdiff_t x = 0, v = 0, i = 0;
    for (int d = w->nb - 1; d >= 0; d--) {
        const ptrdiff_t c = r % w->bshape[d];
        r /= w->bshape[d];
        x += c * w->bx[d], v += c * w->bv[d], i += c * w->bi[d];
    }
    *ox = x, *ov = v, *oi = i;
}

static int parallel_ok(ptrdiff_t elements)
{
    return worth_parallel((double)elements, PARALLEL_MIN_ELEMENTS);
}

static int chunk_count(void) /* the threads, at most MAX_CHUNKS */
{
#ifdef _OPENMP
    int t = max_threads();
    return t < 1 ? 1 : t > MAX_CHUNKS ? MAX_CHUNKS : t;
#else
    return 1;
#endif
}

/* ---- sorting and selection of distinct unsigned integers (one copy per element width) --- */

#define ELEM_TEMPLATE
#define E uint64_t
#define K uint32_t
#define KEY_SHIFT 32
#define ES(x) x##_e64
#include "sort.c"
#define E u128
#define K uint64_t
#define KEY_SHIFT 64
#define ES(x) x##_e128
#include "sort.c"
#undef ELEM_TEMPLATE

/* ---- rows of each value type ----------------------------------------------------------- */

#define VALUE_TEMPLATE
/* float32: the bits, NaN canonical (above +inf once mapped), -0.0 -> 0.0; sign folded in. */
#define T float
#define U uint32_t
#define IS_FLOAT 1
#define SIGN 0x80000000u
#define ABS_INF 0x7f800000u
#define CANONICAL_NAN 0x7fc00000u
#define E uint64_t
#define K uint32_t
#define KEY_SHIFT 32
#define ES(x) x##_e64
#define VS(x) x##_f32
#include "sort.c"
#define T double
#define U uint64_t
#define IS_FLOAT 1
#define SIGN 0x8000000000000000ull
#define ABS_INF 0x7ff0000000000000ull
#define CANONICAL_NAN 0x7ff8000000000000ull
#define E u128
#define K uint64_t
#define KEY_SHIFT 64
#define ES(x) x##_e128
#define VS(x) x##_f64
#include "sort.c"
#define T int64_t
#define U uint64_t
#define IS_FLOAT 0
#define SIGN 0x8000000000000000ull
#define E u128
#define K uint64_t
#define KEY_SHIFT 64
#define ES(x) x##_e128
#define VS(x) x##_i64
#include "sort.c"
#define T int32_t
#define U uint32_t
#define IS_FLOAT 0
#define SIGN 0x80000000u
#define E uint64_t
#define K uint32_t
#define KEY_SHIFT 32
#define ES(x) x##_e64
#define VS(x) x##_i32
#include "sort.c"
#undef VALUE_TEMPLATE

typedef int (*select_fn)(const walk_t *w);
static const select_fn SELECT[N_TYPES] = {select_rows_f32, select_rows_f64, select_rows_i64,
                                          select_rows_i32};

/* ---- argument checking ----------------------------------------------------------------- */

/* One operand held in `h`: (buffer, offset, strides) over `shape`, checked to lie inside
 * its buffer. Returns its element type, or -1 with an exception set. */
static int operand(held_t *h, PyObject *buf, PyObject *off, PyObject *strides_obj, int ndim,
                   const long long *shape, int writable, const char *what, char **ptr,
                   long long *strides)
{
    const Py_buffer *view = hold_buffer(h, buf, writable, what);
    if (view == NULL) return -1;
    int type = buffer_kind_in(view, what, 1);
    if (type < 0 || parse_view(view, what, off, strides_obj, ndim, shape, strides, ptr) < 0)
        return -1;
    return type;
}

static int parse_flag(PyObject *obj, const char *what)
{
    int v = PyObject_IsTrue(obj);
    if (v < 0) PyErr_Format(PyExc_TypeError, "%s must be a bool", what);
    return v;
}

/* ---- searchsorted / bucketize ----------------------------------------------------------- */

/* For each of `per_row` queries of each row, the insertion point into that row's n sorted
 * boundaries: the reference's (and PyTorch's) binary search, which moves right past
 * boundary b while !(b >= v) (right = 0: the first position with b >= v) or !(b > v)
 * (right = 1: the first with b > v). Written with `!` so a NaN compares as PyTorch's does.
 * The results are exact integers: any thread split gives the same. */
#define DEFINE_SEARCH(T, SFX)                                                                \
    static void search_##SFX(const T *bounds, ptrdiff_t rows, ptrdiff_t n, const T *values, \
                             ptrdiff_t per_row, int right, int64_t *out64, int32_t *out32,   \
                             int par)                                                         \
    {                                                                                        \
        const ptrdiff_t total = rows * per_row;                                              \
        _Pragma("omp parallel for schedule(static) if(par)")                                \
        for (ptrdiff_t q = 0; q < total; q++) {                                              \
            const T *b = bounds + (q / per_row) * n;                                         \
            const T v = values[q];                                                           \
            ptrdiff_t start = 0, end = n;                                                    \
            while (start < end) {                                                            \
                const ptrdiff_t mid = start + (end - start) / 2;                             \
                const int go_right = right ? !(b[mid] > v) : !(b[mid] >= v);                 \
                if (go_right) start = mid + 1;                                               \
                else end = mid;                                                              \
            }                                                                                \
            if (out64) out64[q] = start;                                                     \
            else out32[q] = (int32_t)start;                                                  \
        }                                                                                    \
    }
DEFINE_SEARCH(float, f32)
DEFINE_SEARCH(double, f64)
DEFINE_SEARCH(int64_t, i64)
DEFINE_SEARCH(int32_t, i32)

/* Queries searched with fewer boundary reads than this run on one thread. */
#define SEARCH_PARALLEL_MIN 65536

static PyObject *py_search(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "search() takes 7 arguments (boundaries, rows, n, "
                     "values, per_row, right, out), got %zd", nargs);
        return NULL;
    }
    long long rows, n, per_row;
    if (parse_size(args[1], "rows", &rows) < 0 || parse_size(args[2], "n", &n) < 0 ||
        parse_size(args[4], "per_row", &per_row) < 0)
        return NULL;
    int right = parse_flag(args[5], "right");
    if (right < 0) return NULL;
    long long total;
    if (__builtin_mul_overflow(rows, per_row, &total) || total > PTRDIFF_MAX / 8) {
        PyErr_SetString(PyExc_ValueError, "rows * per_row is too large");
        return NULL;
    }
    held_t h = {.held = 0};
    PyObject *result = NULL;
    const Py_buffer *b = hold_buffer(&h, args[0], 0, "boundaries");
    const Py_buffer *v = b ? hold_buffer(&h, args[3], 0, "values") : NULL;
    const Py_buffer *o = v ? hold_buffer(&h, args[6], 1, "out") : NULL;
    if (o == NULL) goto done;
    const int type = buffer_kind_in(b, "boundaries", 1);
    if (type < 0) goto done;
    if (buffer_kind_in(v, "values", 1) != type) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "values must have the boundaries' element type");
        goto done;
    }
    const int out_type = buffer_kind_in(o, "out", 1);
    if (out_type != KIND_I64 && out_type != KIND_I32) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "out must hold int64 or int32");
        goto done;
    }
    long long b_len = 0;
    if (__builtin_mul_overflow(rows, n, &b_len) || b->len / b->itemsize < b_len ||
        v->len / v->itemsize < total || o->len / o->itemsize < total) {
        PyErr_SetString(PyExc_ValueError, "boundaries must hold rows * n elements, values and "
                        "out rows * per_row");
        goto done;
    }
    int64_t *out64 = out_type == KIND_I64 ? (int64_t *)o->buf : NULL;
    int32_t *out32 = out_type == KIND_I32 ? (int32_t *)o->buf : NULL;
    const int par = worth_parallel((double)total * (double)(64 - __builtin_clzll((unsigned long long)n | 1)),
                                   SEARCH_PARALLEL_MIN);
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    switch (type) {
    case KIND_F32: search_f32(b->buf, rows, n, v->buf, per_row, right, out64, out32, par); break;
    case KIND_F64: search_f64(b->buf, rows, n, v->buf, per_row, right, out64, out32, par); break;
    case KIND_I64: search_i64(b->buf, rows, n, v->buf, per_row, right, out64, out32, par); break;
    default: search_i32(b->buf, rows, n, v->buf, per_row, right, out64, out32, par); break;
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    release_held(&h);
    return result;
}

/* ---- entry point ----------------------------------------------------------------------- */

static PyObject *py_select(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 14) {
        PyErr_Format(PyExc_TypeError, "select() takes 14 arguments (x, x_offset, shape, "
                     "x_strides, dim, descending, k, kth_only, values, values_offset, "
                     "values_strides, indices, indices_offset, indices_strides), got %zd",
                     nargs);
        return NULL;
    }
    long long shape[MAX_NDIM], out_shape[MAX_NDIM], xs[MAX_NDIM], vs[MAX_NDIM], is[MAX_NDIM];
    int ndim;
    if (parse_dims(args[2], "shape", -1, shape, &ndim) < 0) return NULL;
    if (ndim < 1) {
        PyErr_SetString(PyExc_ValueError, "select() needs at least one dim");
        return NULL;
    }
    long long numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || __builtin_mul_overflow(numel, shape[d], &numel) ||
            numel > PTRDIFF_MAX / 16) {
            PyErr_SetString(PyExc_ValueError, "shape must be sizes >= 0 of a sane total");
            return NULL;
        }
    }
    long dim = PyLong_Check(args[4]) ? PyLong_AsLong(args[4]) : -1;
    if (dim < 0 || dim >= ndim) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "dim must be an int in [0, ndim)");
        return NULL;
    }
    int descending = parse_flag(args[5], "descending");
    int kth_only = parse_flag(args[7], "kth_only");
    if (descending < 0 || kth_only < 0) return NULL;
    long long k;
    if (parse_offset(args[6], "k", &k) < 0) return NULL;
    const long long n = shape[dim];
    /* the index sits in the low 32 bits of a 32-bit type's element */
    if (k > n || (kth_only && k < 1) || n > (long long)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "k must be in [0, n] ([1, n] for the k-th value) "
                        "and n < 2**32");
        return NULL;
    }
    memcpy(out_shape, shape, sizeof shape);
    out_shape[dim] = kth_only ? 1 : k;
    if (args[8] == Py_None && args[11] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "select() needs values or indices (or both)");
        return NULL;
    }

    held_t h = {.held = 0};
    char *x, *values = NULL, *indices = NULL;
    PyObject *result = NULL;
    int type = operand(&h, args[0], args[1], args[3], ndim, shape, 0, "x", &x, xs);
    if (type < 0) goto done;
    if (args[8] != Py_None) {
        int vtype = operand(&h, args[8], args[9], args[10], ndim, out_shape, 1, "values",
                            &values, vs);
        if (vtype < 0) goto done;
        if (vtype != type) {
            PyErr_SetString(PyExc_TypeError, "values must have x's element type");
            goto done;
        }
    } else {
        memset(vs, 0, sizeof vs);
    }
    if (args[11] != Py_None) {
        int itype = operand(&h, args[11], args[12], args[13], ndim, out_shape, 1, "indices",
                            &indices, is);
        if (itype < 0) goto done;
        if (itype != T_I64) {
            PyErr_SetString(PyExc_TypeError, "indices must hold int64 elements");
            goto done;
        }
    } else {
        memset(is, 0, sizeof is);
    }

    walk_t w = {0};
    w.rows = 1;
    for (int d = 0; d < ndim; d++) {
        if (d == dim) continue;
        w.bshape[w.nb] = shape[d], w.bx[w.nb] = xs[d], w.bv[w.nb] = vs[d], w.bi[w.nb] = is[d];
        w.rows *= shape[d];
        w.nb++;
    }
    w.n = n, w.k = k, w.sx = xs[dim], w.sv = vs[dim], w.si = is[dim];
    w.descending = descending, w.kth_only = kth_only;
    w.x = x, w.values = values, w.indices = (int64_t *)indices;

    int rc = 0;
    g_calls++;
    if (w.rows > 0 && w.n > 0 && w.k > 0) {
        const select_fn fn = SELECT[type];
        Py_BEGIN_ALLOW_THREADS
        rc = fn(&w);
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

static PyMethodDef METHODS[] = {
    {"search", (PyCFunction)(void (*)(void))py_search, METH_FASTCALL,
     "search(boundaries, rows, n, values, per_row, right, out): insertion points of "
     "per_row values per row into each row's n sorted boundaries (contiguous buffers of one "
     "type: float32, float64, int64 or int32; out int64 or int32): searchsorted's binary "
     "search."},
    {"select", (PyCFunction)(void (*)(void))py_select, METH_FASTCALL,
     "select(x, x_offset, shape, x_strides, dim, descending, k, kth_only, values, "
     "values_offset, values_strides, indices, indices_offset, indices_strides): the first k "
     "elements of each row's stable order along dim (or only the k-th) and their indices."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._sort",
    .m_doc = "Stable sort, argsort, topk and kthvalue along one dim for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__sort(void)
{
    if (init_module_state() < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MAX_NDIM", MAX_NDIM) < 0 ||
        PyModule_AddIntConstant(m, "PARALLEL_MIN_ELEMENTS", PARALLEL_MIN_ELEMENTS) < 0 ||
        PyModule_AddIntConstant(m, "PARALLEL_ROW_MIN", PARALLEL_ROW_MIN) < 0 ||
        PyModule_AddIntConstant(m, "HEAP_MAX_K", HEAP_MAX_K) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

#elif defined(ELEM_TEMPLATE) /* ---- E: distinct unsigned integers, K: their key part ------ */

#define KEY_OF(e) ((K)((e) >> KEY_SHIFT))
#define KEY_BITS (8 * (int)sizeof(K))

static void ES(insertion_sort)(E *a, ptrdiff_t n)
{
    for (ptrdiff_t i = 1; i < n; i++) {
        const E v = a[i];
        ptrdiff_t j = i;
        for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

/* Max-heap of a[0..n): move a[i] down to its place. */
static inline void ES(sift_down)(E *a, ptrdiff_t n, ptrdiff_t i)
{
    const E v = a[i];
    for (;;) {
        ptrdiff_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && a[child + 1] > a[child]) child++;
        if (a[child] <= v) break;
        a[i] = a[child];
        i = child;
    }
    a[i] = v;
}

static void ES(heap_sort)(E *a, ptrdiff_t n)
{
    for (ptrdiff_t i = n / 2 - 1; i >= 0; i--) ES(sift_down)(a, n, i);
    for (ptrdiff_t end = n - 1; end > 0; end--) {
        const E top = a[0];
        a[0] = a[end];
        a[end] = top;
        ES(sift_down)(a, end, 0);
    }
}

/* Add e to the max-heap a[0..size) (sift up). */
static inline void ES(heap_push)(E *a, ptrdiff_t size, E e)
{
    ptrdiff_t i = size;
    while (i > 0) {
        const ptrdiff_t parent = (i - 1) / 2;
        if (a[parent] >= e) break;
        a[i] = a[parent];
        i = parent;
    }
    a[i] = e;
}

static int ES(depth_limit)(ptrdiff_t n)
{
    int depth = 0;
    while (n > 1) n >>= 1, depth++;
    return 2 * depth + 2;
}

/* Introsort of distinct elements: quicksort (median-of-three pivot, branch-free Lomuto
 * partition), heap sort once too deep, insertion sort for short ranges. */
static void ES(quick_sort)(E *a, ptrdiff_t n, int depth)
{
    while (n > 16) {
        if (depth-- == 0) {
            ES(heap_sort)(a, n);
            return;
        }
        E *lo = a, *mid = a + n / 2, *hi = a + n - 1, t;
        if (*mid < *lo) t = *mid, *mid = *lo, *lo = t;
        if (*hi < *mid) {
            t = *hi, *hi = *mid, *mid = t;
            if (*mid < *lo) t = *mid, *mid = *lo, *lo = t;
        }
        t = *mid, *mid = *hi, *hi = t;  /* the median goes last, as the pivot */
        const E pivot = *hi;
        ptrdiff_t p = 0;
        for (ptrdiff_t j = 0; j < n - 1; j++) {
            /* every element is swapped to the boundary; only smaller ones advance it */
            const E v = a[j];
            const ptrdiff_t smaller = v < pivot;
            a[j] = a[p];
            a[p] = v;
            p += smaller;
        }
        a[n - 1] = a[p];
        a[p] = pivot;
        if (p < n - 1 - p) {  /* recurse into the smaller side, loop on the larger */
            ES(quick_sort)(a, p, depth);
            a += p + 1, n -= p + 1;
        } else {
            ES(quick_sort)(a + p + 1, n - 1 - p, depth);
            n = p;
        }
    }
    ES(insertion_sort)(a, n);
}

/* ---- keys alone (not distinct): the m-th smallest of n ---------------------------------- */

static void ES(key_insertion_sort)(K *a, ptrdiff_t n)
{
    for (ptrdiff_t i = 1; i < n; i++) {
        const K v = a[i];
        ptrdiff_t j = i;
        for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

static void ES(key_heap_sort)(K *a, ptrdiff_t n)
{
    for (ptrdiff_t start = n / 2 - 1, end = n; end > 1;) {
        ptrdiff_t i;
        if (start >= 0) {
            i = start--;
        } else {
            end--;
            const K top = a[0];
            a[0] = a[end];
            a[end] = top;
            i = 0;
        }
        const K v = a[i];
        for (;;) {
            ptrdiff_t child = 2 * i + 1;
            if (child >= end) break;
            if (child + 1 < end && a[child + 1] > a[child]) child++;
            if (a[child] <= v) break;
            a[i] = a[child];
            i = child;
        }
        a[i] = v;
    }
}

/* Move the elements of a[lo..hi) for which `take` holds to the front (branch-free);
 * returns where the others start. */
#define KEY_PARTITION(a, lo, hi, take, out)                                                  \
    do {                                                                                     \
        ptrdiff_t i_ = (lo);                                                                 \
        for (ptrdiff_t j_ = (lo); j_ < (hi); j_++) {                                         \
            const K v = (a)[j_];                                                             \
            const ptrdiff_t t_ = (take);                                                     \
            (a)[j_] = (a)[i_];                                                               \
            (a)[i_] = v;                                                                     \
            i_ += t_;                                                                        \
        }                                                                                    \
        (out) = i_;                                                                          \
    } while (0)

/* The m-th smallest (from 0) of the keys a[0..n), which it reorders: quickselect with a
 * median-of-three pivot. Elements < pivot go first; when that leaves the range as it was
 * (the pivot is its minimum), elements == pivot go first next, so long runs of equal keys
 * cost one pass. A heap sort takes over after 2 log2 n rounds. */
static K ES(select_key)(K *a, ptrdiff_t n, ptrdiff_t m)
{
    ptrdiff_t lo = 0, hi = n;
    int depth = ES(depth_limit)(n);
    while (hi - lo > 16) {
        if (depth-- == 0) {
            ES(key_heap_sort)(a + lo, hi - lo);
            return a[m];
        }
        K x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1], t;
        if (y < x) t = x, x = y, y = t;
        if (z < y) y = z < x ? x : z;
        const K pivot = y;  /* the median of x, y, z */
        ptrdiff_t split;
        KEY_PARTITION(a, lo, hi, v < pivot, split);
        if (m < split) {
            hi = split;
        } else if (split > lo) {
            lo = split;
        } else {
            KEY_PARTITION(a, lo, hi, v == pivot, split);  /* split > lo: pivot is in range */
            if (m < split) return pivot;
            lo = split;
        }
    }
    ES(key_insertion_sort)(a + lo, hi - lo);
    return a[m];
}

/* ---- radix sort ------------------------------------------------------------------------- */

/* LSD radix sort by key, on key - (the smallest key): only the digits the keys' range
 * needs are passed over (one pass for int rows spanning fewer than 256 values), and a
 * digit that is the same in every element is skipped. Digits are 8 bits (256 counters per
 * pass) for short rows, 11 bits (fewer passes, 2,048 counters) from RADIX11_MIN elements. */
#define MAX_RADIX 2048
#define MAX_DIGITS ((KEY_BITS + 7) / 8)

typedef struct {
    K base;             /* the smallest key */
    int bits, digits;   /* digit width, digits the range needs */
} ES(plan_t);

static inline void ES(key_range)(const E *a, ptrdiff_t n, K *lo, K *hi)
{
    K mn = KEY_OF(a[0]), mx = mn;
    for (ptrdiff_t i = 1; i < n; i++) {
        const K key = KEY_OF(a[i]);
        mn = key < mn ? key : mn;
        mx = key > mx ? key : mx;
    }
    *lo = mn, *hi = mx;
}

static ES(plan_t) ES(plan)(ptrdiff_t n, K lo, K hi)
{
    ES(plan_t) p = {lo, n >= RADIX11_MIN ? 11 : 8, 0};
    int used = 0;
    for (K range = hi - lo; range; range >>= 1) used++;
    p.digits = (used + p.bits - 1) / p.bits;
    return p;
}

#define DIGIT(e, p, d) ((int)(((K)(KEY_OF(e) - (p).base) >> ((d) * (p).bits)) & \
                              (K)((1 << (p).bits) - 1)))

/* count[d * radix + v]: how many of a[0..n) have v as digit d. */
static inline __attribute__((always_inline)) void
ES(count_digits)(const E *a, ptrdiff_t n, ES(plan_t) p, uint32_t *count)
{
    const int radix = 1 << p.bits;
    memset(count, 0, sizeof(uint32_t) * (size_t)(p.digits * radix));
    const K mask = (K)(radix - 1);
    for (ptrdiff_t i = 0; i < n; i++) {
        K key = (K)(KEY_OF(a[i]) - p.base);
        uint32_t *c = count;
        for (int d = 0; d < p.digits; d++, key >>= p.bits, c += radix) c[key & mask]++;
    }
}

/* The passes of a radix sort; p.bits a constant where it is inlined. */
static inline __attribute__((always_inline)) E *
ES(radix_passes)(E *a, E *tmp, ptrdiff_t n, ES(plan_t) p)
{
    const int radix = 1 << p.bits;
    uint32_t count[MAX_DIGITS * 256 > 6 * MAX_RADIX ? MAX_DIGITS * 256 : 6 * MAX_RADIX];
    ES(count_digits)(a, n, p, count);
    E *src = a, *dst = tmp;
    for (int d = 0; d < p.digits; d++) {
        const uint32_t *c = count + d * radix;
        if (c[DIGIT(a[0], p, d)] == (uint32_t)n) continue; /* one digit: nothing moves */
        uint32_t next[MAX_RADIX], sum = 0;
        for (int v = 0; v < radix; v++) next[v] = sum, sum += c[v];
        for (ptrdiff_t i = 0; i < n; i++) {
            const E e = src[i];
            dst[next[DIGIT(e, p, d)]++] = e;
        }
        E *t = src;
        src = dst, dst = t;
    }
    return src;
}

/* Stable radix sort of a[0..n) by key (ties keep their order in a, i.e. index order when
 * a was filled in index order). Returns the buffer holding the result: a or tmp. */
static E *ES(radix_sort)(E *a, E *tmp, ptrdiff_t n)
{
    K lo, hi;
    ES(key_range)(a, n, &lo, &hi);
    ES(plan_t) p = ES(plan)(n, lo, hi);
    if (p.bits == 8) {
        p.bits = 8;  /* a constant from here on: the digit shifts and masks are immediates */
        return ES(radix_passes)(a, tmp, n, p);
    }
    p.bits = 11;
    return ES(radix_passes)(a, tmp, n, p);
}

/* Long rows: one pass on the top MSD_BITS bits of key - base scatters the elements into
 * buckets (stably, chunk by chunk), then each bucket is sorted on its own by the radix sort
 * above -- a bucket is small enough to stay in cache, which the passes of one LSD sort over
 * the whole row are not. With `par`, the counting and scattering are split over the
 * threads in fixed chunks (within each bucket, chunk c's elements go after those of chunks
 * < c) and the buckets are handed out dynamically: each bucket's result is the same
 * whichever thread sorts it. a[0..n) (in index order) ends sorted in a; tmp is scratch.
 * Returns 0, or -1 if memory ran out. */
#define MSD_BITS 11
#define MSD_BUCKET 512
static int ES(msd_sort)(E *a, E *tmp, ptrdiff_t n, int par)
{
    K lo, hi;
    ES(key_range)(a, n, &lo, &hi);
    int used = 0;
    for (K range = hi - lo; range; range >>= 1) used++;
    if (used == 0) return 0;  /* one key: index order is the order */
    /* about MSD_BUCKET elements per bucket if the keys spread evenly, at most 2^MSD_BITS */
    int bits = 0;
    while (bits < MSD_BITS && ((ptrdiff_t)MSD_BUCKET << (bits + 1)) <= n) bits++;
    const int shift = used > bits ? used - bits : 0;
    const ptrdiff_t buckets = (ptrdiff_t)((hi - lo) >> shift) + 1;
#ifdef _OPENMP
    const int chunks = par ? chunk_count() : 1;
#else
    const int chunks = 1;
    (void)par;
#endif
    uint32_t local_count[1 << MSD_BITS], local_start[(1 << MSD_BITS) + 1];
    uint32_t *count = chunks > 1 ? malloc(sizeof(uint32_t) * (size_t)buckets * (size_t)chunks)
                                 : local_count;
    uint32_t *start = local_start;
    if (count == NULL) return -1;
    #pragma omp parallel num_threads(chunks) if(chunks > 1)
    {
#ifdef _OPENMP
        const int team = omp_get_num_threads(), t = omp_get_thread_num();
#else
        const int team = 1, t = 0;
#endif
        const ptrdiff_t first = n * t / team, last = n * (t + 1) / team;
        uint32_t *mine = count + (size_t)t * (size_t)buckets;
        memset(mine, 0, sizeof(uint32_t) * (size_t)buckets);
        for (ptrdiff_t i = first; i < last; i++) mine[(KEY_OF(a[i]) - lo) >> shift]++;
        #pragma omp barrier
        #pragma omp single
        {
            /* where each (bucket, chunk) run starts: buckets in order, chunks within them */
            uint32_t sum = 0;
            for (ptrdiff_t b = 0; b < buckets; b++) {
                start[b] = sum;
                for (int c = 0; c < team; c++) {
                    uint32_t *slot = count + (size_t)c * (size_t)buckets + (size_t)b;
                    const uint32_t size = *slot;
                    *slot = sum;
                    sum += size;
                }
            }
            start[buckets] = sum;
        }
        for (ptrdiff_t i = first; i < last; i++) {
            const E e = a[i];
            tmp[mine[(KEY_OF(e) - lo) >> shift]++] = e;
        }
        #pragma omp barrier
        #pragma omp for schedule(dynamic, 16)
        for (ptrdiff_t b = 0; b < buckets; b++) {
            const ptrdiff_t s = start[b], size = (ptrdiff_t)start[b + 1] - s;
            if (size <= INSERTION_MAX) {
                memcpy(a + s, tmp + s, sizeof(E) * (size_t)size);
                ES(insertion_sort)(a + s, size);
            } else {
                const E *sorted = ES(radix_sort)(tmp + s, a + s, size);
                if (sorted != a + s) memcpy(a + s, sorted, sizeof(E) * (size_t)size);
            }
        }
    }
    if (count != local_count) free(count);
    return 0;
}

/* The whole row a[0..n) (filled in index order) sorted; returns a or tmp (NULL if memory
 * ran out). `par`: long rows may use every thread (only outside a parallel region). */
static E *ES(sort_row)(E *a, E *tmp, ptrdiff_t n, int par)
{
    if (n <= INSERTION_MAX) {
        ES(insertion_sort)(a, n);
        return a;
    }
    if (par || n >= MSD_MIN) return ES(msd_sort)(a, tmp, n, par) < 0 ? NULL : a;
    return ES(radix_sort)(a, tmp, n);
}

#undef DIGIT
#undef MAX_RADIX
#undef MSD_BITS
#undef MSD_BUCKET
#undef KEY_PARTITION
#undef MAX_DIGITS
#undef KEY_OF
#undef KEY_BITS
#undef E
#undef K
#undef KEY_SHIFT
#undef ES

#else /* VALUE_TEMPLATE: rows of element type T (unsigned twin U = K), packed into E ------- */

/* The order-preserving key of v (before the descending complement). */
static inline U VS(key)(T v)
{
    U u;
    memcpy(&u, &v, sizeof u);
#if IS_FLOAT
    u = (u & ~SIGN) > ABS_INF ? CANONICAL_NAN : u;  /* every NaN: one key, above +inf */
    u = u == SIGN ? 0 : u;                          /* -0.0 ties with 0.0 */
    return (u & SIGN) ? ~u : (u | SIGN);
#else
    return u ^ SIGN;
#endif
}

/* The element of the row whose key is `key` (complement undone) and index j. */
static inline T VS(value_of)(U key, const T *row, ptrdiff_t sx, ptrdiff_t j)
{
    T v;
#if IS_FLOAT
    const U u = (key & SIGN) ? (key & ~SIGN) : ~key;
    if (u == 0 || u == CANONICAL_NAN) return row[j * sx];  /* zeros and NaNs: the original */
    memcpy(&v, &u, sizeof v);
#else
    const U u = key ^ SIGN;
    (void)row, (void)sx, (void)j;
    memcpy(&v, &u, sizeof v);
#endif
    return v;
}

static inline E VS(pack)(U key, ptrdiff_t j) { return ((E)key << KEY_SHIFT) | (E)j; }

/* a[j] = (key ^ flip, j) of row[j * sx], j in [lo, hi). */
static void VS(load)(const T *row, ptrdiff_t sx, U flip, E *a, ptrdiff_t lo, ptrdiff_t hi)
{
    if (sx == 1) {
        for (ptrdiff_t j = lo; j < hi; j++) a[j] = VS(pack)(VS(key)(row[j]) ^ flip, j);
    } else {
        for (ptrdiff_t j = lo; j < hi; j++) a[j] = VS(pack)(VS(key)(row[j * sx]) ^ flip, j);
    }
}

/* keys[j] = key ^ flip of row[j * sx], j in [0, n). */
static void VS(load_keys)(const T *row, ptrdiff_t sx, U flip, U *keys, ptrdiff_t n)
{
    if (sx == 1) {
        for (ptrdiff_t j = 0; j < n; j++) keys[j] = VS(key)(row[j]) ^ flip;
    } else {
        for (ptrdiff_t j = 0; j < n; j++) keys[j] = VS(key)(row[j * sx]) ^ flip;
    }
}

/* Results i in [lo, hi) from the ordered elements s[]. */
static void VS(store)(const walk_t *w, const E *s, U flip, const T *row, T *values,
                      int64_t *indices, ptrdiff_t lo, ptrdiff_t hi)
{
    const E mask = ((E)1 << KEY_SHIFT) - 1;
    for (ptrdiff_t i = lo; i < hi; i++) {
        const E e = s[i];
        const ptrdiff_t j = (ptrdiff_t)(e & mask);
        if (indices) indices[i * w->si] = j;
        if (values) values[i * w->sv] = VS(value_of)((U)(e >> KEY_SHIFT) ^ flip, row, w->sx, j);
    }
}

/* The value a key stands for (complement undone), to compare elements with: NaN for the
 * NaN key and 0.0 for the zeros' key, which only let more elements through a filter. */
static inline T VS(value_for_filter)(U key)
{
    T v;
#if IS_FLOAT
    const U u = (key & SIGN) ? (key & ~SIGN) : ~key;
#else
    const U u = key ^ SIGN;
#endif
    memcpy(&v, &u, sizeof v);
    return v;
}

/* topk for small k: the k smallest elements in a max-heap a[0..k), then sorted. Most
 * elements cannot enter the heap, and a cheap test in the value domain rules them out a
 * block of FILTER at a time: an element enters only if its key is below the top's (an
 * equal key comes later in the row, so its element is larger), which needs its value to
 * be >= the top's value when descending (<= ascending), or NaN -- `!(x < top)` /
 * `!(x > top)`, which vectorizes. Blocks that pass are then checked exactly, by key. */
#define FILTER 16
#define FILTER_BLOCK(PASS)                                                                   \
    do {                                                                                     \
        if (sx == 1) {                                                                       \
            _Pragma("omp simd reduction(|:any)")                                             \
            for (int t = 0; t < FILTER; t++) {                                               \
                const T x = row[j + t];                                                      \
                any |= (PASS);                                                               \
            }                                                                                \
        } else                                                                               \
            for (int t = 0; t < FILTER; t++) {                                               \
                const T x = row[(j + t) * sx];                                               \
                any |= (PASS);                                                               \
            }                                                                                \
    } while (0)

static inline __attribute__((always_inline)) void
VS(heap_topk_body)(const T *row, ptrdiff_t sx, ptrdiff_t n, ptrdiff_t k, U flip, E *a)
{
    ptrdiff_t j = 0;
    for (; j < k; j++) ES(heap_push)(a, j, VS(pack)(VS(key)(row[j * sx]) ^ flip, j));
    U top = (U)(a[0] >> KEY_SHIFT);
    T limit = VS(value_for_filter)(top ^ flip);
    for (; j < n; j += FILTER) {
        const ptrdiff_t m = n - j < FILTER ? n - j : FILTER;
        if (m == FILTER) {
            int any = 0;
            if (flip) FILTER_BLOCK(!(x < limit));
            else FILTER_BLOCK(!(x > limit));
            if (!any) continue;
        }
        for (ptrdiff_t t = 0; t < m; t++) {
            const U key = VS(key)(row[(j + t) * sx]) ^ flip;
            if (key < top) {
                a[0] = VS(pack)(key, j + t);
                ES(sift_down)(a, k, 0);
                top = (U)(a[0] >> KEY_SHIFT);
                limit = VS(value_for_filter)(top ^ flip);
            }
        }
    }
    ES(heap_sort)(a, k);
}

/* The filter loop compiled for each instruction set (the rest is scalar). */
static void VS(heap_topk_baseline)(const T *row, ptrdiff_t sx, ptrdiff_t n, ptrdiff_t k,
                                   U flip, E *a)
{
    VS(heap_topk_body)(row, sx, n, k, flip, a);
}
#if HAVE_X86_CLONES
__attribute__((target("avx2"))) static void
VS(heap_topk_avx2)(const T *row, ptrdiff_t sx, ptrdiff_t n, ptrdiff_t k, U flip, E *a)
{
    VS(heap_topk_body)(row, sx, n, k, flip, a);
}
__attribute__((target("avx512f"))) static void
VS(heap_topk_avx512f)(const T *row, ptrdiff_t sx, ptrdiff_t n, ptrdiff_t k, U flip, E *a)
{
    VS(heap_topk_body)(row, sx, n, k, flip, a);
}
#endif

static void VS(heap_topk)(const T *row, ptrdiff_t sx, ptrdiff_t n, ptrdiff_t k, U flip, E *a)
{
#if HAVE_X86_CLONES
    if (g_isa == ISA_AVX512F) {
        VS(heap_topk_avx512f)(row, sx, n, k, flip, a);
        return;
    }
    if (g_isa == ISA_AVX2) {
        VS(heap_topk_avx2)(row, sx, n, k, flip, a);
        return;
    }
#endif
    VS(heap_topk_baseline)(row, sx, n, k, flip, a);
}

/* topk (kth_only = 0) or kthvalue (kth_only = 1) through the k-th smallest key: the k
 * smallest elements are those with a smaller key plus the first few (in index order) with
 * that key. Writes them, in order, to a[0..k) (kthvalue: just the k-th, to a[0]). keys
 * is scratch for n keys. */
static void VS(select_topk)(const T *row, ptrdiff_t sx, ptrdiff_t n, ptrdiff_t k, U flip,
                            int kth_only, E *a, U *keys)
{
    VS(load_keys)(row, sx, flip, keys, n);
    const U kth = ES(select_key)(keys, n, k - 1);
    ptrdiff_t below = 0;  /* how many keys are smaller than the k-th */
    for (ptrdiff_t j = 0; j < n; j++) below += keys[j] < kth;
    ptrdiff_t equal_wanted = k - below, lt = 0, eq = 0;
    for (ptrdiff_t j = 0; j < n; j++) {
        const U key = VS(key)(row[j * sx]) ^ flip;
        if (key == kth && eq < equal_wanted) {
            if (kth_only && ++eq == equal_wanted) {
                a[0] = VS(pack)(key, j);
                return;
            }
            if (!kth_only) a[below + eq++] = VS(pack)(key, j);
        } else if (key < kth && !kth_only) {
            a[lt++] = VS(pack)(key, j);
        }
    }
    /* the smaller ones (in index order) still need sorting; the equal ones follow them */
    ES(quick_sort)(a, below, ES(depth_limit)(below));
}

/* One row; a and tmp are scratch for n elements each. */
static void VS(one_row)(const walk_t *w, ptrdiff_t r, E *a, E *tmp)
{
    ptrdiff_t ox, ov, oi;
    row_offsets(w, r, &ox, &ov, &oi);
    const T *row = (const T *)w->x + ox;
    T *values = w->values ? (T *)w->values + ov : NULL;
    int64_t *indices = w->indices ? w->indices + oi : NULL;
    const ptrdiff_t n = w->n, k = w->k, sx = w->sx;
    const U flip = w->descending ? (U)~(U)0 : 0;
    const E *ordered = a;
    if (!w->kth_only && k * PARTIAL_RATIO >= n) {
        VS(load)(row, sx, flip, a, 0, n);
        ordered = ES(sort_row)(a, tmp, n, 0);
    } else if (!w->kth_only && k <= HEAP_MAX_K) {
        VS(heap_topk)(row, sx, n, k, flip, a);
    } else {
        VS(select_topk)(row, sx, n, k, flip, w->kth_only, a, (U *)tmp);
    }
    VS(store)(w, ordered, flip, row, values, indices, 0, w->kth_only ? 1 : k);
}

/* A single long row sorted on every thread; 0, or -1 when memory ran out. */
static int VS(long_row)(const walk_t *w, ptrdiff_t r, E *a, E *tmp)
{
    ptrdiff_t ox, ov, oi;
    row_offsets(w, r, &ox, &ov, &oi);
    const T *row = (const T *)w->x + ox;
    T *values = w->values ? (T *)w->values + ov : NULL;
    int64_t *indices = w->indices ? w->indices + oi : NULL;
    const ptrdiff_t n = w->n, k = w->k;
    const U flip = w->descending ? (U)~(U)0 : 0;
    const int chunks = chunk_count();
    #pragma omp parallel for schedule(static) num_threads(chunks)
    for (int c = 0; c < chunks; c++)
        VS(load)(row, w->sx, flip, a, n * c / chunks, n * (c + 1) / chunks);
    const E *ordered = ES(sort_row)(a, tmp, n, 1);
    if (ordered == NULL) return -1;
    #pragma omp parallel for schedule(static) num_threads(chunks)
    for (int c = 0; c < chunks; c++)
        VS(store)(w, ordered, flip, row, values, indices, k * c / chunks, k * (c + 1) / chunks);
    return 0;
}

/* Every row of the walk; 0, or -1 when scratch memory could not be had. */
static int VS(select_rows)(const walk_t *w)
{
    const ptrdiff_t n = w->n;
    const int par = parallel_ok(w->rows * n);
    const int full_sort = !w->kth_only && w->k * PARTIAL_RATIO >= n;
    if (par && full_sort && n >= PARALLEL_ROW_MIN && w->rows < chunk_count()) {
        E *a = malloc(sizeof(E) * (size_t)n), *tmp = malloc(sizeof(E) * (size_t)n);
        int rc = a && tmp ? 0 : -1;
        for (ptrdiff_t r = 0; rc == 0 && r < w->rows; r++) rc = VS(long_row)(w, r, a, tmp);
        free(a);
        free(tmp);
        return rc;
    }
    int failed = 0;
    #pragma omp parallel if(par)
    {
        E *a = malloc(sizeof(E) * (size_t)n), *tmp = malloc(sizeof(E) * (size_t)n);
        if (a == NULL || tmp == NULL) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (ptrdiff_t r = 0; r < w->rows; r++)
            if (a && tmp) VS(one_row)(w, r, a, tmp);
        free(a);
        free(tmp);
    }
    return failed ? -1 : 0;
}

#undef FILTER
#undef FILTER_BLOCK
#undef T
#undef U
#undef IS_FLOAT
#undef SIGN
#undef ABS_INF
#undef CANONICAL_NAN
#undef E
#undef K
#undef KEY_SHIFT
#undef ES
#undef VS

#endif
