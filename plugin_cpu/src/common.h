/* What every C module of reftorch_cpu shares: argument parsing and bounds checks for the
 * (buffer, element offset, shape, strides) operands the Python side hands over, and the
 * choice of instruction-set clone. All static: each extension module gets its own copy.
 *
 * The rule every kernel follows: parse and check every argument before touching memory;
 * every element an operand's loop visits must lie inside its buffer (check_view, on
 * check_bounds; the operand helpers below build on it).
 */
#ifndef REFTORCH_CPU_COMMON_H
#define REFTORCH_CPU_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAX_NDIM 8

enum { ISA_BASELINE, ISA_AVX2, ISA_AVX512F, N_ISAS };
static const char *const ISA_NAMES[N_ISAS] = {"baseline", "avx2", "avx512f"};

/* The best clone this CPU runs (AVX-512F, AVX2, or the baseline). The "avx2" clones may use
 * FMA as well (GEMM, random, the exps), so they need both: every AVX2 CPU made has FMA, and
 * every AVX-512F one. */
static inline int best_isa(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return ISA_AVX512F;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ISA_AVX2;
#endif
    return ISA_BASELINE;
}

/* A sequence of ndim Python ints into dst; `what` names it in errors. */
static inline int parse_dims(PyObject *seq_obj, const char *what, int expect, long long *dst, int *ndim)
{
    PyObject *seq = PySequence_Fast(seq_obj, "");
    if (seq == NULL) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple or list of ints, not %.100s", what,
                     Py_TYPE(seq_obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (expect < 0 ? (n < 0 || n > MAX_NDIM) : n != expect) {
        if (expect < 0)
            PyErr_Format(PyExc_ValueError, "%s has %zd dims; between 0 and %d are supported",
                         what, n, MAX_NDIM);
        else
            PyErr_Format(PyExc_ValueError, "%s has %zd entries, expected %d (one per dim)", what,
                         n, expect);
        Py_DECREF(seq);
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyLong_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "%s must hold ints, not %.100s", what,
                         Py_TYPE(items[i])->tp_name);
            Py_DECREF(seq);
            return -1;
        }
        int overflow = 0;
        dst[i] = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (overflow || (dst[i] == -1 && PyErr_Occurred()) || dst[i] > PTRDIFF_MAX / 16 ||
            dst[i] < -(PTRDIFF_MAX / 16)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s[%zd] is out of range", what, i);
            Py_DECREF(seq);
            return -1;
        }
    }
    if (ndim) *ndim = (int)n;
    Py_DECREF(seq);
    return 0;
}

static inline int parse_offset(PyObject *obj, const char *what, long long *dst)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    *dst = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (*dst == -1 && PyErr_Occurred()) || *dst < 0 || *dst > PTRDIFF_MAX / 16) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a non-negative element offset", what);
        return -1;
    }
    return 0;
}

static inline int get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous%s buffer, not %.100s", what,
                     writable ? " writable" : "", Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

/* Every element visited (numel > 0) must lie in [0, len) of its buffer. */
static inline int check_bounds(const char *what, Py_ssize_t len, long long offset, int ndim,
                        const long long *shape, const long long *strides)
{
    long long lo = offset, hi = offset;
    for (int d = 0; d < ndim; d++) {
        long long reach;
        if (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach) ||
            __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi)) {
            PyErr_Format(PyExc_ValueError, "%s: strides overflow", what);
            return -1;
        }
    }
    if (lo < 0 || hi >= (long long)len) {
        PyErr_Format(PyExc_ValueError, "%s: the view reaches elements [%lld, %lld] but the "
                     "buffer holds %zd", what, lo, hi, len);
        return -1;
    }
    return 0;
}

/* ---- the state and Python API every module shares ------------------------------------- */

#include <pthread.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int g_isa = ISA_BASELINE;       /* the clone in use */
static int g_best_isa = ISA_BASELINE;  /* the best clone this CPU runs */
static volatile int g_forked = 0;      /* set in a fork()ed child: libgomp is not fork-safe */
static unsigned long long g_calls = 0; /* kernel calls that ran (incremented under the GIL) */

/* The thread count reftorch.set_num_threads chose (0: none chosen, OpenMP's default stands).
 * One int serves every extension module of the plugin: _C (kernels.c, which defines
 * OWNS_THREAD_SETTING) holds it and exports its address as the capsule THREADS_CAPSULE, and
 * the others find it there when they load. OpenMP keeps its count per calling thread, so
 * max_threads() first brings the caller's count in line: kernels called from any Python
 * thread run on the chosen count, as PyTorch's process-wide setting does. */
#define THREADS_CAPSULE "reftorch_cpu._C.thread_setting"
#ifdef OWNS_THREAD_SETTING
static int g_own_thread_setting = 0;
static int *g_thread_setting = &g_own_thread_setting;
#else
static int *g_thread_setting = NULL;
#endif

/* The threads a parallel region of the calling thread will run on. */
static inline int max_threads(void)
{
#ifdef _OPENMP
    const int chosen = *g_thread_setting;
    if (chosen > 0 && omp_get_max_threads() != chosen) omp_set_num_threads(chosen);
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static void after_fork_in_child(void) { g_forked = 1; }

/* Whether work of `elements` should run on the OpenMP threads: at least `min_elements` of it
 * (each kernel file's measured threshold), more than one thread, and not in a forked child. */
static inline int worth_parallel(double elements, double min_elements)
{
#ifdef _OPENMP
    return elements >= min_elements && !g_forked && max_threads() > 1;
#else
    (void)elements;
    (void)min_elements;
    return 0;
#endif
}

/* How many threads a region run when `par` may have (per-thread scratch), and which of them
 * runs this code (0 outside a parallel region or without OpenMP). */
static inline int thread_count(int par)
{
#ifdef _OPENMP
    return par ? max_threads() : 1;
#else
    (void)par;
    return 1;
#endif
}

static inline int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* The block of an elementwise loop over n elements run by `threads` threads: one contiguous
 * block per thread, as equal as blocks whose length is a multiple of 16 allow (no cache line
 * is written by two threads: 16 float32 are 64 bytes). Equal blocks, not many fixed-size
 * ones: 100,000 elements in blocks of 16,384 gave one thread 4 blocks and the other 2.1, and
 * float32 a + b took 8.3 us where torch took 6.5 (2 threads, 2-core x86-64). */
static inline ptrdiff_t even_block(ptrdiff_t n, int threads)
{
    const ptrdiff_t per_thread = (n + threads - 1) / (threads > 0 ? threads : 1);
    const ptrdiff_t block = (per_thread + 15) / 16 * 16;
    return block > 0 ? block : 16;
}

/* Call first in the module's init function; -1 with an exception set when the thread
 * setting cannot be found (_C must load first: the package's __init__ loads it). */
static int init_module_state(void)
{
    g_best_isa = best_isa();
    g_isa = g_best_isa;
    pthread_atfork(NULL, NULL, after_fork_in_child);
#ifndef OWNS_THREAD_SETTING
    g_thread_setting = PyCapsule_Import(THREADS_CAPSULE, 0);
    if (g_thread_setting == NULL) return -1;
#endif
    return 0;
}

static PyObject *py_isa(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyUnicode_FromString(ISA_NAMES[g_isa]);
}

static PyObject *py_set_isa(PyObject *self, PyObject *name)
{
    (void)self;
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s == NULL) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "set_isa() takes an instruction set name");
        return NULL;
    }
    for (int i = 0; i < N_ISAS; i++) {
        if (strcmp(s, ISA_NAMES[i]) == 0) {
            if (i > g_best_isa) {
                PyErr_Format(PyExc_ValueError, "this CPU does not support %s", s);
                return NULL;
            }
            int previous = g_isa;
            g_isa = i;
            return PyUnicode_FromString(ISA_NAMES[previous]);
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown instruction set '%s'", s);
    return NULL;
}

static PyObject *py_supported_isas(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i <= g_best_isa; i++) {
        PyObject *s = PyUnicode_FromString(ISA_NAMES[i]);
        if (s == NULL || PyList_Append(list, s) < 0) Py_CLEAR(list);
        Py_XDECREF(s);
    }
    return list;
}

static PyObject *py_calls(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyLong_FromUnsignedLongLong(g_calls);
}

static PyObject *py_set_num_threads(PyObject *self, PyObject *arg)
{
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "set_num_threads() needs a positive count");
        return NULL;
    }
#ifdef _OPENMP
    const int previous = max_threads();
    *g_thread_setting = n > INT_MAX ? INT_MAX : (int)n;
    omp_set_num_threads(*g_thread_setting);
    return PyLong_FromLong(previous);
#else
    return PyLong_FromLong(1);
#endif
}

static PyObject *py_num_threads(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return PyLong_FromLong(max_threads());
}

/* The entries of the module's method table that come from here. */
#define COMMON_METHODS                                                                       \
    {"isa", py_isa, METH_NOARGS, "The instruction set of the kernels in use."},              \
    {"set_isa", py_set_isa, METH_O, "Use another instruction set's kernels; returns the old."}, \
    {"supported_isas", py_supported_isas, METH_NOARGS, "Instruction sets this CPU runs."},    \
    {"calls", py_calls, METH_NOARGS, "How many kernel calls have run in this process."},       \
    {"set_num_threads", py_set_num_threads, METH_O,                                           \
     "Set the thread count of every kernel, in every thread; returns the previous one."},     \
    {"num_threads", py_num_threads, METH_NOARGS,                                              \
     "The threads a kernel called from this thread runs on."}

/* ---- shared by the kernel files -------------------------------------------------------- */

/* Element kinds of the buffers kernels take. */
enum { KIND_F32, KIND_F64, KIND_I64, KIND_I32 };

/* A buffer's one-character struct format ('f', 'd', 'q', ...), after one prefix that means
 * this machine's byte order ('@', '=', or '<' / '>' on a little / big-endian one), or 0 for
 * anything else. */
static inline int format_char(const Py_buffer *view)
{
    const char *f = view->format ? view->format : "B";
#if PY_LITTLE_ENDIAN
    if (*f == '<' || *f == '@' || *f == '=') f++;
#else
    if (*f == '>' || *f == '@' || *f == '=') f++;
#endif
    return f[0] && !f[1] ? f[0] : 0;
}

/* A buffer's element kind (KIND_*; int32 only when `with_int32`), or -1 with TypeError set
 * naming `what`. */
static inline int buffer_kind_in(const Py_buffer *view, const char *what, int with_int32)
{
    const int c = format_char(view);
    if (c == 'f' && view->itemsize == 4) return KIND_F32;
    if (c == 'd' && view->itemsize == 8) return KIND_F64;
    if ((c == 'l' || c == 'q') && view->itemsize == 8) return KIND_I64;
    if (with_int32 && (c == 'i' || c == 'l') && view->itemsize == 4) return KIND_I32;
    PyErr_Format(PyExc_TypeError, "%s must hold float32, float64%s int64%s elements (buffer "
                 "format '%s', itemsize %zd)", what, with_int32 ? "," : " or",
                 with_int32 ? " or int32" : "", view->format ? view->format : "B",
                 view->itemsize);
    return -1;
}

/* float32, float64 or int64 (the kernels without int32 support). */
static inline int buffer_kind(const Py_buffer *view, const char *what)
{
    return buffer_kind_in(view, what, 0);
}

/* float32 or float64 only (KIND_F32 / KIND_F64), or -1 with TypeError set naming `what`. */
static inline int buffer_float_kind(const Py_buffer *view, const char *what)
{
    const int c = format_char(view);
    if (c == 'f' && view->itemsize == 4) return KIND_F32;
    if (c == 'd' && view->itemsize == 8) return KIND_F64;
    PyErr_Format(PyExc_TypeError, "%s must hold float32 or float64 elements (buffer format "
                 "'%s', itemsize %zd)", what, view->format ? view->format : "B",
                 view->itemsize);
    return -1;
}

/* ---- buffer operands: the one definition each kernel file's operands go through ---------
 * An operand is a buffer (get_buffer: C-contiguous, writable when written), its element kind
 * (format_char / buffer_kind_in / buffer_float_kind), an element offset and a view over it
 * (ndim dims of shape and strides) whose every visited element must lie in the buffer
 * (check_view). */

/* Every element the view (element `offset`, then ndim dims of shape / strides) visits lies
 * inside `view`'s buffer; a view with a dim of size 0 visits none. A zero itemsize counts as
 * 1 (such a buffer holds no elements). */
static inline int check_view(const Py_buffer *view, const char *what, long long offset, int ndim,
                             const long long *shape, const long long *strides)
{
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) return 0;
    const Py_ssize_t len = view->len / (view->itemsize ? view->itemsize : 1);
    return check_bounds(what, len, offset, ndim, shape, strides);
}

/* check_view, then *start = the view's element 0. */
static inline int view_start(const Py_buffer *view, const char *what, long long offset,
                             int ndim, const long long *shape, const long long *strides,
                             char **start)
{
    if (check_view(view, what, offset, ndim, shape, strides) < 0) return -1;
    *start = (char *)view->buf + offset * view->itemsize;
    return 0;
}

/* The element offset (off_obj) and ndim strides (strides_obj) of a view over `shape`, both
 * named `what` in errors; then view_start. */
static inline int parse_view(const Py_buffer *view, const char *what, PyObject *off_obj,
                             PyObject *strides_obj, int ndim, const long long *shape,
                             long long *strides, char **start)
{
    long long offset;
    if (parse_offset(off_obj, what, &offset) < 0 ||
        parse_dims(strides_obj, what, ndim, strides, NULL) < 0)
        return -1;
    return view_start(view, what, offset, ndim, shape, strides, start);
}

/* The buffers an entry point holds, released together when it returns. */
#define MAX_HELD 8
typedef struct {
    Py_buffer views[MAX_HELD];
    int held;
} held_t;

static inline void release_held(held_t *h)
{
    for (int i = 0; i < h->held; i++) PyBuffer_Release(&h->views[i]);
    h->held = 0;
}

/* get_buffer into the next free view of `h` (an entry point holds at most MAX_HELD: one
 * more is a bug of ours, refused rather than written past the array). */
static inline Py_buffer *hold_buffer(held_t *h, PyObject *obj, int writable, const char *what)
{
    if (h->held >= MAX_HELD) {
        PyErr_Format(PyExc_RuntimeError, "%s: more than %d buffers held", what, MAX_HELD);
        return NULL;
    }
    Py_buffer *view = &h->views[h->held];
    if (get_buffer(obj, view, writable, what) < 0) return NULL;
    h->held++;
    return view;
}

/* An operand held in `h` whose elements are of kind `kind` (buffer_kind's), viewed from
 * element offset `off_obj` (NULL: 0) over ndim dims of shape / strides. None is allowed when
 * `optional` (*start = NULL). *start = the view's element 0. */
static inline int kind_operand(held_t *h, PyObject *obj, PyObject *off_obj, int ndim,
                               const long long *shape, const long long *strides, int writable,
                               int kind, int optional, const char *what, char **start)
{
    *start = NULL;
    if (obj == Py_None && optional) return 0;
    const Py_buffer *view = hold_buffer(h, obj, writable, what);
    if (view == NULL) return -1;
    const int k = buffer_kind(view, what);
    if (k < 0) return -1;
    if (k != kind) {
        PyErr_Format(PyExc_TypeError, "%s has the wrong element type", what);
        return -1;
    }
    long long offset = 0;
    if (off_obj != NULL && parse_offset(off_obj, what, &offset) < 0) return -1;
    return view_start(view, what, offset, ndim, shape, strides, start);
}

/* The float kind (KIND_F32 / KIND_F64) of a buffer, read without keeping it: the kind every
 * float operand of a call is then held to. */
static inline int float_kind_of(PyObject *obj, const char *what)
{
    Py_buffer view;
    if (get_buffer(obj, &view, 0, what) < 0) return -1;
    int k = buffer_kind(&view, what);
    PyBuffer_Release(&view);
    if (k == KIND_I64) {
        PyErr_Format(PyExc_TypeError, "%s must hold float32 or float64 elements", what);
        return -1;
    }
    return k;
}

/* ---- scalar arguments ------------------------------------------------------------------- */

/* A size or count: an int >= 0 (parse_offset's rule and messages). */
static inline int parse_size(PyObject *obj, const char *what, long long *dst)
{
    return parse_offset(obj, what, dst);
}

/* One int with the range and messages of one parse_dims entry (`what`[0] when out of range). */
static inline int parse_int_entry(PyObject *obj, const char *what, long long *dst)
{
    PyObject *one = PyTuple_Pack(1, obj);
    if (one == NULL) return -1;
    const int rc = parse_dims(one, what, 1, dst, NULL);
    Py_DECREF(one);
    return rc;
}

/* TypeError "USAGE takes WANT arguments, got NARGS" unless nargs == want. */
static inline int check_nargs(Py_ssize_t nargs, Py_ssize_t want, const char *usage)
{
    if (nargs == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments, got %zd", usage, want, nargs);
    return -1;
}

/* Units [0, n) in fixed groups of `group` units, one CALL per group with [lo, hi) set;
 * threads take groups statically when `par`. The groups depend on the sizes only, never on
 * the thread count, so neither do the results. */
#define FOR_GROUPS(n, group, par, CALL)                                                      \
    do {                                                                                     \
        const ptrdiff_t n_ = (n), group_ = (group), groups_ = (n_ + group_ - 1) / group_;   \
        _Pragma("omp parallel for schedule(static) if(par)")                                 \
        for (ptrdiff_t gi_ = 0; gi_ < groups_; gi_++) {                                      \
            const ptrdiff_t lo = gi_ * group_;                                               \
            const ptrdiff_t hi = lo + group_ < n_ ? lo + group_ : n_;                        \
            CALL;                                                                            \
        }                                                                                    \
    } while (0)

/* Units per group when each unit is `per_unit` elements of work and a group about
 * `elements` (at least one unit). */
static inline ptrdiff_t group_for(ptrdiff_t per_unit, ptrdiff_t elements)
{
    return per_unit >= elements ? 1 : elements / (per_unit > 0 ? per_unit : 1);
}

/* The five (H, W) pairs of a 2-D window, args[0..4]: kernel, out_size, stride, padding,
 * dilation (the caller checks their values). */
static inline int parse_window_pairs(PyObject *const *args, long long kernel[2],
                                     long long out_size[2], long long stride[2],
                                     long long padding[2], long long dilation[2])
{
    return parse_dims(args[0], "kernel", 2, kernel, NULL) < 0 ||
                   parse_dims(args[1], "out_size", 2, out_size, NULL) < 0 ||
                   parse_dims(args[2], "stride", 2, stride, NULL) < 0 ||
                   parse_dims(args[3], "padding", 2, padding, NULL) < 0 ||
                   parse_dims(args[4], "dilation", 2, dilation, NULL) < 0
               ? -1 : 0;
}

/* A shape (ints >= 0, at most MAX_NDIM of them, numel not overflowing); returns numel or -1
 * with an exception set. */
static inline long long parse_shape(PyObject *obj, long long *shape, int *ndim)
{
    long long numel = 1;
    if (parse_dims(obj, "shape", -1, shape, ndim) < 0) return -1;
    for (int d = 0; d < *ndim; d++) {
        if (shape[d] < 0) {
            PyErr_Format(PyExc_ValueError, "shape[%d] is negative (%lld)", d, shape[d]);
            return -1;
        }
        if (__builtin_mul_overflow(numel, shape[d], &numel) || numel > PTRDIFF_MAX / 16) {
            PyErr_SetString(PyExc_ValueError, "shape has too many elements");
            return -1;
        }
    }
    return numel;
}

/* ---- the walk over a strided shape ------------------------------------------------------
 * For the modules that define COMMON_STRIDED_WALK before including this file (index.c,
 * masked.c); other modules have their own walk_t / parse_operand. */
#ifdef COMMON_STRIDED_WALK

/* Up to 3 operands (e.g. out, src, index) walked together over one shape, row-major. */
typedef struct {
    int ndim; /* >= 1 */
    ptrdiff_t shape[MAX_NDIM];
    ptrdiff_t strides[3][MAX_NDIM];
    ptrdiff_t offset[3];
} walk_t;

/* Position `start` (linear, row-major): its multi-index and each operand's element offset. */
static inline void walk_seek(const walk_t *W, ptrdiff_t start, ptrdiff_t *idx, ptrdiff_t *off)
{
    ptrdiff_t rem = start;
    for (int d = W->ndim - 1; d >= 0; d--) {
        idx[d] = rem % W->shape[d];
        rem /= W->shape[d];
    }
    for (int k = 0; k < 3; k++) {
        off[k] = W->offset[k];
        for (int d = 0; d < W->ndim; d++) off[k] += idx[d] * W->strides[k][d];
    }
}

/* Move from the end of a row (last coordinate past its end) to the next row's start. */
static inline void walk_next_row(const walk_t *W, ptrdiff_t *idx, ptrdiff_t *off)
{
    const int last = W->ndim - 1;
    for (int k = 0; k < 3; k++) off[k] -= idx[last] * W->strides[k][last];
    idx[last] = 0;
    for (int d = last - 1; d >= 0; d--) {
        idx[d]++;
        for (int k = 0; k < 3; k++) off[k] += W->strides[k][d];
        if (idx[d] < W->shape[d]) break;
        for (int k = 0; k < 3; k++) off[k] -= W->shape[d] * W->strides[k][d];
        idx[d] = 0;
    }
}

/* One operand: buffer, offset, strides (one per walk dim). Its elements for every position
 * of the walk, plus `extra_stride` times every index in [0, extra_size) when extra_size > 0,
 * must lie in the buffer. */
static inline int parse_operand(PyObject *const *arg, const char *name, int writable, int ndim,
                                const long long *shape, long long extra_stride,
                                long long extra_size, Py_buffer *view, walk_t *W, int k)
{
    long long offset, strides[MAX_NDIM + 1], full_shape[MAX_NDIM + 1];
    char what[64];
    if (get_buffer(arg[0], view, writable, name) < 0) return -1;
    snprintf(what, sizeof what, "%s_offset", name);
    if (parse_offset(arg[1], what, &offset) < 0) goto fail;
    snprintf(what, sizeof what, "%s_strides", name);
    if (parse_dims(arg[2], what, ndim, strides, NULL) < 0) goto fail;
    memcpy(full_shape, shape, sizeof(long long) * (size_t)ndim);
    int checked_ndim = ndim;
    if (extra_size > 0) {
        full_shape[ndim] = extra_size;
        strides[ndim] = extra_stride;
        checked_ndim++;
    }
    if (check_view(view, name, offset, checked_ndim, full_shape, strides) < 0) goto fail;
    W->offset[k] = (ptrdiff_t)offset;
    for (int d = 0; d < W->ndim; d++) W->strides[k][d] = ndim ? (ptrdiff_t)strides[d] : 0;
    return 0;
fail:
    PyBuffer_Release(view);
    return -1;
}

static inline void set_walk_shape(walk_t *W, int ndim, const long long *shape)
{
    memset(W, 0, sizeof *W);
    W->ndim = ndim ? ndim : 1; /* a 0-dim walk is a 1-dim one of one position */
    for (int d = 0; d < W->ndim; d++) W->shape[d] = ndim ? (ptrdiff_t)shape[d] : 1;
}
#endif /* COMMON_STRIDED_WALK */

#endif /* REFTORCH_CPU_COMMON_H */
