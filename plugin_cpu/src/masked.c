/* reftorch_cpu._masked: masked_fill, masked_select and masked_scatter.
 *
 * Entry points (called from reftorch_cpu/masked.py, which broadcasts the operands and
 * builds the walk; p runs over the positions of `shape` in row-major order):
 *
 *   fill(shape, out, out_offset, out_strides, a, a_offset, a_strides,
 *        mask, mask_offset, mask_strides, value)
 *       out[p] = mask[p] ? value[0] : a[p]
 *   count(shape, mask, mask_offset, mask_strides) -> how many mask[p] are true
 *   select(shape, out, out_offset, a, a_offset, a_strides, mask, mask_offset, mask_strides)
 *       -> n; out[out_offset + k] = a[p_k], p_k the k-th position where mask[p] is true
 *   scatter(shape, out, out_offset, out_strides, a, a_offset, a_strides,
 *           mask, mask_offset, mask_strides, source, source_offset)
 *       out[p] = mask[p] ? source[source_offset + k(p)] : a[p], k(p) the number of true
 *       mask positions before p
 *
 * The kernels move elements, never compute with them, so one loop per element width serves
 * every dtype of 1, 2, 4 or 8 bytes: the Python side hands over the storages viewed as
 * unsigned integers of that width (out, a, value and source of one width). The mask holds
 * bytes (a bool storage); any nonzero byte counts as true. Strides and offsets are in
 * elements; out, a and mask strides may be 0 (broadcast) or negative.
 *
 * Safety: every argument is parsed and checked before memory is touched: each walked operand
 * stays inside its buffer at every position (parse_operand), and select's out / scatter's
 * source must hold the counted number of elements past their offset (checked after the
 * count, before the first write).
 *
 * Threads: the positions are cut into fixed BLOCKs (a size that depends on nothing else).
 * fill writes each position from its own inputs. select and scatter first count the true
 * mask positions of every block, then add the counts up in block order (exclusive prefix
 * sums), so block b knows where its first selected element goes (select) or comes from
 * (scatter) before any block writes: blocks are then independent, and the result is the
 * same bits whatever the thread count. The loops are memory-bound moves, compiled once (no
 * per-ISA clones).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define COMMON_STRIDED_WALK /* walk_t and parse_operand from common.h */
#include "common.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define BLOCK 16384 /* positions per work item (a multiple of a cache line of bytes) */
/* Walks with fewer positions than this run on one thread (a parallel region costs a few
 * microseconds); the same threshold as index.c's gather, another memory-bound move. */
#ifndef PARALLEL_MIN_POSITIONS
#define PARALLEL_MIN_POSITIONS 32768
#endif

enum { M_OUT, M_A, M_MASK }; /* the walk's operand slots */
enum { W8, W16, W32, W64, N_WIDTHS };

/* The operands of one call: the walk and each slot's element 0; `flat` is select's out or
 * scatter's source (element flat[k] for the k-th true position). */
typedef struct {
    walk_t W;
    char *buf[3];
    char *flat;
    const char *value;
} masked_t;

static int parallel_ok(ptrdiff_t positions)
{
    return worth_parallel((double)positions, PARALLEL_MIN_POSITIONS);
}

/* Run ROW(count, o, so, a, sa, m, sm) over every row piece of positions [start, end):
 * o, a, m point at the piece's first element, so / sa / sm are the last dim's strides. */
#define FOR_ROWS(M, U, start, end, ROW)                                                      \
    do {                                                                                     \
        const walk_t *W_ = &(M)->W;                                                          \
        const int last_ = W_->ndim - 1;                                                      \
        const ptrdiff_t so = W_->strides[M_OUT][last_], sa = W_->strides[M_A][last_];        \
        const ptrdiff_t sm = W_->strides[M_MASK][last_];                                     \
        ptrdiff_t idx_[MAX_NDIM], off_[3], pos_ = (start);                                   \
        walk_seek(W_, pos_, idx_, off_);                                                     \
        while (pos_ < (end)) {                                                               \
            ptrdiff_t count = W_->shape[last_] - idx_[last_];                                \
            if (count > (end) - pos_) count = (end) - pos_;                                  \
            U *o = (U *)(M)->buf[M_OUT] + off_[M_OUT];                                       \
            const U *a = (const U *)(M)->buf[M_A] + off_[M_A];                               \
            const uint8_t *m = (const uint8_t *)(M)->buf[M_MASK] + off_[M_MASK];            \
            (void)o, (void)a, (void)so, (void)sa;                                            \
            ROW;                                                                             \
            pos_ += count;                                                                   \
            if (pos_ < (end)) walk_next_row(W_, idx_, off_);                                 \
        }                                                                                    \
    } while (0)

/* ---- the loops, one per element width --------------------------------------------------- */

/* mask ? x : y as a bit select (x and y both evaluated, no branch). */
#define PICK(mask, x, y)                                                                     \
    ((__typeof__(y))(((x) & ((__typeof__(y))0 - (__typeof__(y))((mask) != 0))) |            \
                     ((y) & ~((__typeof__(y))0 - (__typeof__(y))((mask) != 0)))))
#define PIECE 256 /* elements select / scatter stage on the stack */

#define DEFINE_LOOPS(U, SFX)                                                                 \
    /* out[p] = mask[p] ? value : a[p], as a bit select on every element (no branch on       \
     * the mask, and a[p] read unconditionally: the loop vectorizes) */                      \
    static void fill_##SFX(const masked_t *M, ptrdiff_t start, ptrdiff_t end)                \
    {                                                                                        \
        const U v = *(const U *)M->value;                                                    \
        FOR_ROWS(M, U, start, end, {                                                         \
            if (so == 1 && sa == 1 && sm == 1) {                                             \
                for (ptrdiff_t i = 0; i < count; i++) o[i] = PICK(m[i], v, a[i]);            \
            } else {                                                                         \
                for (ptrdiff_t i = 0; i < count; i++)                                        \
                    o[i * so] = PICK(m[i * sm], v, a[i * sa]);                               \
            }                                                                                \
        });                                                                                  \
    }                                                                                        \
    /* flat[at + k] = a[p_k] for the true positions p_k of [start, end). Branch-free (a      \
     * random mask would mispredict half the time): every element goes to a stack piece at   \
     * the next free slot, which advances only for a true position; the piece's kept         \
     * elements are then copied out, so flat is written only where they belong. */           \
    static void select_##SFX(const masked_t *M, ptrdiff_t start, ptrdiff_t end,              \
                             ptrdiff_t at, ptrdiff_t at_end)                                 \
    {                                                                                        \
        U *flat = (U *)M->flat + at, piece[PIECE];                                           \
        (void)at_end;                                                                        \
        FOR_ROWS(M, U, start, end, {                                                         \
            for (ptrdiff_t i0 = 0; i0 < count; i0 += PIECE) {                                \
                const ptrdiff_t n = count - i0 < PIECE ? count - i0 : PIECE;                 \
                ptrdiff_t k = 0;                                                             \
                for (ptrdiff_t i = i0; i < i0 + n; i++) {                                    \
                    piece[k] = a[i * sa];                                                    \
                    k += m[i * sm] != 0;                                                     \
                }                                                                            \
                memcpy(flat, piece, (size_t)k * sizeof(U));                                  \
                flat += k;                                                                   \
            }                                                                                \
        });                                                                                  \
    }                                                                                        \
    /* out[p] = mask[p] ? flat[at + k(p)] : a[p] over [start, end), branch-free: the next    \
     * source elements (no more than this block's at_end - at) are copied to a stack piece,  \
     * whose slot k is read at every position and kept only where the mask is true. */       \
    static void scatter_##SFX(const masked_t *M, ptrdiff_t start, ptrdiff_t end,             \
                              ptrdiff_t at, ptrdiff_t at_end)                                \
    {                                                                                        \
        const U *flat = (const U *)M->flat + at;                                             \
        ptrdiff_t left = at_end - at;                                                        \
        U piece[PIECE];                                                                      \
        FOR_ROWS(M, U, start, end, {                                                         \
            for (ptrdiff_t i0 = 0; i0 < count; i0 += PIECE) {                                \
                const ptrdiff_t n = count - i0 < PIECE ? count - i0 : PIECE;                 \
                const ptrdiff_t have = left < n ? left : n;                                  \
                memcpy(piece, flat, (size_t)have * sizeof(U));                               \
                memset(piece + have, 0, (size_t)(PIECE - have) * sizeof(U));                 \
                ptrdiff_t k = 0;                                                             \
                for (ptrdiff_t i = i0; i < i0 + n; i++) {                                    \
                    const uint8_t take = m[i * sm];                                          \
                    o[i * so] = PICK(take, piece[k], a[i * sa]);                             \
                    k += take != 0;                                                          \
                }                                                                            \
                flat += k;                                                                   \
                left -= k;                                                                   \
            }                                                                                \
        });                                                                                  \
    }

DEFINE_LOOPS(uint8_t, w8)
DEFINE_LOOPS(uint16_t, w16)
DEFINE_LOOPS(uint32_t, w32)
DEFINE_LOOPS(uint64_t, w64)

typedef void (*fill_fn)(const masked_t *, ptrdiff_t, ptrdiff_t);
typedef void (*move_fn)(const masked_t *, ptrdiff_t, ptrdiff_t, ptrdiff_t, ptrdiff_t);
static const fill_fn FILL[N_WIDTHS] = {fill_w8, fill_w16, fill_w32, fill_w64};
static const move_fn SELECT[N_WIDTHS] = {select_w8, select_w16, select_w32, select_w64};
static const move_fn SCATTER[N_WIDTHS] = {scatter_w8, scatter_w16, scatter_w32, scatter_w64};

/* The end of block b (the last block may be short). */
static ptrdiff_t block_end(ptrdiff_t b, ptrdiff_t numel)
{
    return (b + 1) * BLOCK < numel ? (b + 1) * BLOCK : numel;
}

/* True mask positions in [start, end) (a sum of 0/1 bytes: vectorizable when unit-stride). */
static ptrdiff_t count_block(const masked_t *M, ptrdiff_t start, ptrdiff_t end)
{
    ptrdiff_t total = 0;
    FOR_ROWS(M, uint8_t, start, end, {
        if (sm == 1)
            for (ptrdiff_t i = 0; i < count; i++) total += m[i] != 0;
        else
            for (ptrdiff_t i = 0; i < count; i++) total += m[i * sm] != 0;
    });
    return total;
}

/* Per-block true counts turned into each block's first flat index (exclusive prefix sums
 * in block order); returns the total, or -1 when out of memory. *firsts is malloc'ed. */
static ptrdiff_t block_firsts(const masked_t *M, ptrdiff_t numel, ptrdiff_t **firsts)
{
    const ptrdiff_t blocks = (numel + BLOCK - 1) / BLOCK;
    ptrdiff_t *f = malloc((size_t)(blocks > 0 ? blocks : 1) * sizeof *f);
    if (f == NULL) return -1;
    const int par = parallel_ok(numel);
    FOR_GROUPS(blocks, 1, par,
               for (ptrdiff_t b = lo; b < hi; b++) f[b] = count_block(M, b * BLOCK,
                                                                      block_end(b, numel)));
    ptrdiff_t total = 0;
    for (ptrdiff_t b = 0; b < blocks; b++) {
        const ptrdiff_t c = f[b];
        f[b] = total;
        total += c;
    }
    *firsts = f;
    return total;
}

/* Every block moves its elements to (select) or from (scatter) flat indices [its first,
 * the next block's first). */
static void run_blocks(const masked_t *M, move_fn fn, ptrdiff_t numel, const ptrdiff_t *firsts,
                       ptrdiff_t total)
{
    const ptrdiff_t blocks = (numel + BLOCK - 1) / BLOCK;
    const int par = parallel_ok(numel);
    FOR_GROUPS(blocks, 1, par,
               for (ptrdiff_t b = lo; b < hi; b++)
                   fn(M, b * BLOCK, block_end(b, numel), firsts[b],
                      b + 1 < blocks ? firsts[b + 1] : total));
}

/* ---- argument checking ------------------------------------------------------------------ */

/* The width index of a buffer of 1, 2, 4 or 8-byte elements, or -1 with TypeError set. */
static int width_of(const Py_buffer *view, const char *what)
{
    switch (view->itemsize) {
    case 1: return W8;
    case 2: return W16;
    case 4: return W32;
    case 8: return W64;
    }
    PyErr_Format(PyExc_TypeError, "%s must hold elements of 1, 2, 4 or 8 bytes, not %zd", what,
                 view->itemsize);
    return -1;
}

/* The parsed walk of a call: shape, numel and the views it holds (h, released by
 * release_held). */
typedef struct {
    long long shape[MAX_NDIM], numel;
    int ndim;
    held_t h;
} call_t;

/* A walked operand into slot k: (buffer, offset, strides) at args. */
static int walked(call_t *C, masked_t *M, PyObject *const *args, const char *name,
                  int writable, int k)
{
    if (parse_operand(args, name, writable, C->ndim, C->shape, 0, 0,
                      &C->h.views[C->h.held], &M->W, k) < 0)
        return -1;
    M->buf[k] = (char *)C->h.views[C->h.held++].buf;
    return 0;
}

/* A flat operand (buffer, offset): its element `offset` in *ptr, the elements from there
 * in *len. */
static int flat_operand(call_t *C, PyObject *const *args, const char *name, int writable,
                        char **ptr, ptrdiff_t *len)
{
    long long offset;
    const Py_buffer *view = hold_buffer(&C->h, args[0], writable, name);
    if (view == NULL) return -1;
    if (parse_offset(args[1], name, &offset) < 0) return -1;
    const Py_ssize_t n = view->len / (view->itemsize ? view->itemsize : 1);
    if (offset > n) {
        PyErr_Format(PyExc_ValueError, "%s: offset %lld is past the buffer's %zd elements",
                     name, offset, n);
        return -1;
    }
    *ptr = (char *)view->buf + offset * view->itemsize;
    *len = (ptrdiff_t)(n - offset);
    return 0;
}

/* The shape at args[0]; the walk set up over it. */
static int walk_shape(call_t *C, masked_t *M, PyObject *shape)
{
    /* A slot a call does not use walks with strides 0 over this, never NULL (no pointer
     * arithmetic on NULL, even + 0). */
    static uint64_t unused_slot;
    memset(M, 0, sizeof *M);
    for (int k = 0; k < 3; k++) M->buf[k] = (char *)&unused_slot;
    C->h.held = 0;
    C->numel = parse_shape(shape, C->shape, &C->ndim);
    if (C->numel < 0) return -1;
    set_walk_shape(&M->W, C->ndim, C->shape);
    return 0;
}

/* Every view holds elements of one width (the mask's bytes are checked apart). */
static int same_width(call_t *C, const int *which, int n)
{
    const Py_buffer *views = C->h.views;
    int w = width_of(&views[which[0]], "out");
    for (int k = 1; w >= 0 && k < n; k++) {
        if (views[which[k]].itemsize != views[which[0]].itemsize) {
            PyErr_SetString(PyExc_TypeError, "out, a, value and source must hold elements "
                            "of one size");
            return -1;
        }
    }
    return w;
}

static int mask_bytes(call_t *C, int k)
{
    if (C->h.views[k].itemsize != 1) {
        PyErr_Format(PyExc_TypeError, "mask must hold bytes (bool), not %zd-byte elements",
                     C->h.views[k].itemsize);
        return -1;
    }
    return 0;
}

/* ---- entry points ----------------------------------------------------------------------- */

static PyObject *py_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 11, "fill(shape, out, out_offset, out_strides, a, a_offset, "
                  "a_strides, mask, mask_offset, mask_strides, value)") < 0)
        return NULL;
    call_t C;
    masked_t M;
    PyObject *result = NULL;
    int w;
    if (walk_shape(&C, &M, args[0]) < 0 || walked(&C, &M, args + 1, "out", 1, M_OUT) < 0 ||
        walked(&C, &M, args + 4, "a", 0, M_A) < 0 ||
        walked(&C, &M, args + 7, "mask", 0, M_MASK) < 0 || mask_bytes(&C, 2) < 0)
        goto done;
    const Py_buffer *value = hold_buffer(&C.h, args[10], 0, "value");
    if (value == NULL) goto done;
    if (value->len < value->itemsize) {
        PyErr_SetString(PyExc_ValueError, "value must hold one element");
        goto done;
    }
    if ((w = same_width(&C, (const int[]){0, 1, 3}, 3)) < 0) goto done;
    M.value = value->buf;
    const int par = parallel_ok((ptrdiff_t)C.numel);
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    FOR_GROUPS((ptrdiff_t)C.numel, BLOCK, par, FILL[w](&M, lo, hi));
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release_held(&C.h);
    return result;
}

static PyObject *py_count(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 4, "count(shape, mask, mask_offset, mask_strides)") < 0) return NULL;
    call_t C;
    masked_t M;
    PyObject *result = NULL;
    if (walk_shape(&C, &M, args[0]) < 0 || walked(&C, &M, args + 1, "mask", 0, M_MASK) < 0 ||
        mask_bytes(&C, 0) < 0)
        goto done;
    ptrdiff_t *firsts = NULL, total;
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    total = block_firsts(&M, (ptrdiff_t)C.numel, &firsts);
    Py_END_ALLOW_THREADS
    free(firsts);
    result = total < 0 ? PyErr_NoMemory() : PyLong_FromSsize_t(total);
done:
    release_held(&C.h);
    return result;
}

/* select and scatter: count, check the flat operand holds the total, then move. A short
 * operand raises `exc` with `shortage` (scatter's source: the reference's RuntimeError, which
 * the reference checks in its own kernel; select's out is sized by the caller). */
static PyObject *run_moves(call_t *C, masked_t *M, move_fn fn, ptrdiff_t flat_len,
                           PyObject *exc, const char *shortage)
{
    ptrdiff_t *firsts = NULL, total;
    const ptrdiff_t numel = (ptrdiff_t)C->numel;
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    total = block_firsts(M, numel, &firsts);
    Py_END_ALLOW_THREADS
    if (total < 0) return PyErr_NoMemory();
    if (total > flat_len) {
        free(firsts);
        PyErr_SetString(exc, shortage);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    run_blocks(M, fn, numel, firsts, total);
    Py_END_ALLOW_THREADS
    free(firsts);
    return PyLong_FromSsize_t(total);
}

static PyObject *py_select(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 9, "select(shape, out, out_offset, a, a_offset, a_strides, mask, "
                  "mask_offset, mask_strides)") < 0)
        return NULL;
    call_t C;
    masked_t M;
    PyObject *result = NULL;
    ptrdiff_t len;
    int w;
    if (walk_shape(&C, &M, args[0]) < 0 ||
        flat_operand(&C, args + 1, "out", 1, &M.flat, &len) < 0 ||
        walked(&C, &M, args + 3, "a", 0, M_A) < 0 ||
        walked(&C, &M, args + 6, "mask", 0, M_MASK) < 0 || mask_bytes(&C, 2) < 0 ||
        (w = same_width(&C, (const int[]){0, 1}, 2)) < 0)
        goto done;
    result = run_moves(&C, &M, SELECT[w], len, PyExc_ValueError,
                       "select(): out is shorter than the true mask positions");
done:
    release_held(&C.h);
    return result;
}

static PyObject *py_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 12, "scatter(shape, out, out_offset, out_strides, a, a_offset, "
                  "a_strides, mask, mask_offset, mask_strides, source, source_offset)") < 0)
        return NULL;
    call_t C;
    masked_t M;
    PyObject *result = NULL;
    ptrdiff_t len;
    int w;
    if (walk_shape(&C, &M, args[0]) < 0 || walked(&C, &M, args + 1, "out", 1, M_OUT) < 0 ||
        walked(&C, &M, args + 4, "a", 0, M_A) < 0 ||
        walked(&C, &M, args + 7, "mask", 0, M_MASK) < 0 || mask_bytes(&C, 2) < 0 ||
        flat_operand(&C, args + 10, "source", 0, &M.flat, &len) < 0 ||
        (w = same_width(&C, (const int[]){0, 1, 3}, 3)) < 0)
        goto done;
    result = run_moves(&C, &M, SCATTER[w], len, PyExc_RuntimeError,
                       "masked_scatter: expected source to have at least as many elements as "
                       "ones in mask");
done:
    release_held(&C.h);
    return result;
}

static PyMethodDef METHODS[] = {
    {"fill", (PyCFunction)(void (*)(void))py_fill, METH_FASTCALL,
     "fill(shape, out, out_offset, out_strides, a, a_offset, a_strides, mask, mask_offset, "
     "mask_strides, value): out[p] = mask[p] ? value[0] : a[p]."},
    {"count", (PyCFunction)(void (*)(void))py_count, METH_FASTCALL,
     "count(shape, mask, mask_offset, mask_strides): the number of true mask positions."},
    {"select", (PyCFunction)(void (*)(void))py_select, METH_FASTCALL,
     "select(shape, out, out_offset, a, a_offset, a_strides, mask, mask_offset, "
     "mask_strides): a at the true mask positions, in row-major order, into out from "
     "out_offset on; returns how many."},
    {"scatter", (PyCFunction)(void (*)(void))py_scatter, METH_FASTCALL,
     "scatter(shape, out, out_offset, out_strides, a, a_offset, a_strides, mask, mask_offset, "
     "mask_strides, source, source_offset): out[p] = the next source element where mask[p], "
     "else a[p]; returns how many source elements were used."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._masked",
    .m_doc = "masked_fill, masked_select and masked_scatter for reftorch (any 1-8 byte dtype).",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__masked(void)
{
    if (init_module_state() < 0) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "BLOCK", BLOCK) < 0 ||
        PyModule_AddIntConstant(m, "MAX_NDIM", MAX_NDIM) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
