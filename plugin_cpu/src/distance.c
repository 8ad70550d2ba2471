/* reftorch_cpu._distance: cdist's p = 1 and p = 2 distances, float32 and float64.
 *
 * Entry point (called from reftorch_cpu/distance.py):
 *
 *   cdist(p, x1, x1_offset, (B, N, D), (x1 strides), x2, x2_offset, M, (x2 strides), out)
 *       out[b, i, j] = sum over k of |x1[b, i, k] - x2[b, j, k]| (p = 1), or the square root
 *       of the sum of their squares (p = 2); out is (B, N, M) row-major.
 *
 * The reference forms the (N, M, D) array of |differences| (squared as d * d, which is what
 * NumPy's power gives for the exponent 2), sums its contiguous last axis with np.sum and takes
 * ** 0.5 (NumPy's sqrt). np.sum adds an axis in NumPy's pairwise order (see pairwise below),
 * so doing the same here gives the reference's bits. Each vector lane computes one distance
 * (a tile of x2's rows, transposed into scratch so a lane reads its row's features
 * contiguously), every lane with the scalar order's operations, so every instruction-set
 * clone gives the same bits. Strides are in elements, any sign; every element visited is
 * checked to lie in its buffer first. Tiles run in fixed groups over OpenMP threads; each
 * distance is one lane's, so results never depend on the thread count.
 */
#ifndef DISTANCE_TEMPLATE

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

/* Tiles are grouped into work items of at least this many terms. */
#define ITEM_MIN_ELEMENTS 16384
#define PW_BLOCK 128

enum { T_F32, T_F64, N_TYPES };

typedef struct {
    const char *x1, *x2;
    ptrdiff_t B, N, M, D;
    ptrdiff_t s1[3], s2[3];
    char *out;
    int square;
} dist_t;

/* Tiles [lo, hi) of (batch, L rows of x2); -1 when scratch cannot be allocated. */
typedef int (*tiles_fn)(const dist_t *G, ptrdiff_t lo, ptrdiff_t hi);
typedef ptrdiff_t (*lanes_fn)(void);

#define DISTANCE_TEMPLATE
#define CLONE_TEMPLATE "distance.c"
#include "isa_clones.h"
#undef CLONE_TEMPLATE
#undef DISTANCE_TEMPLATE

static const tiles_fn TILES[N_ISAS][N_TYPES] = CLONES(tiles);
static const lanes_fn LANES[N_ISAS][N_TYPES] = CLONES(lanes);

static PyObject *py_cdist(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (check_nargs(nargs, 10, "cdist(p, x1, x1_offset, (B, N, D), x1_strides, x2, "
                               "x2_offset, M, x2_strides, out)") < 0)
        return NULL;
    long long p, dims[3], m, s1[3], s2[3];
    if (parse_int_entry(args[0], "p", &p) < 0 ||
        parse_dims(args[3], "(B, N, D)", 3, dims, NULL) < 0 || parse_size(args[7], "M", &m) < 0 ||
        parse_dims(args[4], "x1 strides", 3, s1, NULL) < 0 ||
        parse_dims(args[8], "x2 strides", 3, s2, NULL) < 0)
        return NULL;
    if (p != 1 && p != 2) {
        PyErr_SetString(PyExc_ValueError, "cdist(): p must be 1 or 2");
        return NULL;
    }
    if (dims[0] < 0 || dims[1] < 0 || dims[2] < 0 ||
        (double)dims[0] * (double)dims[1] * (double)m > 0x1p60 || (double)dims[2] * 64 > 0x1p60) {
        PyErr_SetString(PyExc_ValueError, "cdist(): sizes must be >= 0 and (B, N, M) not huge");
        return NULL;
    }
    const int kind = float_kind_of(args[1], "x1");
    if (kind < 0) return NULL;
    held_t h = {.held = 0};
    const long long shape2[3] = {dims[0], m, dims[2]};
    const long long out_shape[3] = {dims[0], dims[1], m};
    const long long out_strides[3] = {dims[1] * m, m, 1};
    char *x1, *x2, *out;
    if (kind_operand(&h, args[1], args[2], 3, dims, s1, 0, kind, 0, "x1", &x1) < 0 ||
        kind_operand(&h, args[5], args[6], 3, shape2, s2, 0, kind, 0, "x2", &x2) < 0 ||
        kind_operand(&h, args[9], NULL, 3, out_shape, out_strides, 1, kind, 0, "out", &out) < 0) {
        release_held(&h);
        return NULL;
    }
    const dist_t G = {.x1 = x1, .x2 = x2, .B = dims[0], .N = dims[1], .M = m, .D = dims[2],
                      .s1 = {s1[0], s1[1], s1[2]}, .s2 = {s2[0], s2[1], s2[2]}, .out = out,
                      .square = p == 2};
    const int type = kind == KIND_F32 ? T_F32 : T_F64;
    const ptrdiff_t lanes = LANES[g_isa][type]();
    const ptrdiff_t tiles = G.B * ((G.M + lanes - 1) / lanes);
    const ptrdiff_t per_tile = lanes * G.N * (G.D > 0 ? G.D : 1);
    const int par = worth_parallel((double)tiles * (double)per_tile, ITEM_MIN_ELEMENTS * 2);
    const tiles_fn fn = TILES[g_isa][type];
    int failed = 0;
    g_calls++;
    Py_BEGIN_ALLOW_THREADS
    FOR_GROUPS(tiles, group_for(per_tile, ITEM_MIN_ELEMENTS), par,
               if (fn(&G, lo, hi) < 0) failed = 1);
    Py_END_ALLOW_THREADS
    release_held(&h);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"cdist", (PyCFunction)(void (*)(void))py_cdist, METH_FASTCALL,
     "cdist(p, x1, x1_offset, (B, N, D), x1_strides, x2, x2_offset, M, x2_strides, out): "
     "p = 1 or 2 distances between rows; see src/distance.c."},
    COMMON_METHODS,
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reftorch_cpu._distance",
    .m_doc = "cdist's p = 1 and p = 2 distances for reftorch.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__distance(void)
{
    if (init_module_state() < 0) return NULL;
    return PyModule_Create(&MODULE);
}

#else /* DISTANCE_TEMPLATE: once per element type and instruction-set clone */

#if IS_F32
#define UINT uint32_t
#define SQRT_T sqrtf
#else
#define UINT uint64_t
#define SQRT_T sqrt
#endif
#define L (VBYTES / (ptrdiff_t)sizeof(T))      /* lanes: distances computed at once */
typedef T NAME(vec) __attribute__((vector_size(VBYTES)));
typedef UINT NAME(uvec) __attribute__((vector_size(VBYTES)));
#define VEC NAME(vec)
#define UVEC NAME(uvec)

ISA_ATTR static ptrdiff_t NAME(lanes)(void) { return L; }

/* One term per lane: |a - b|, its sign bit cleared as np.abs clears it (inf - inf is a
 * negative NaN on x86, the reference's positive), squared for p = 2. */
ISA_ATTR static inline VEC NAME(term)(T a, const T *b, int square)
{
    VEC d, bv;
    memcpy(&bv, b, sizeof bv);
    d = ((VEC){0} + a) - bv;
    d = (VEC)((UVEC)d & ~((UVEC){0} + ((UINT)1 << (sizeof(T) * 8 - 1))));
    return square ? d * d : d;
}

/* NumPy's pairwise sum of the n terms of each lane (a's features k at stride sa against the
 * transposed tile bt, L values per feature): fewer than 8 added in order from -0.0; up to
 * PW_BLOCK as 8 running sums of every 8th term, combined ((r0 + r1) + (r2 + r3)) +
 * ((r4 + r5) + (r6 + r7)), then the rest in order; longer runs split in two (the first part
 * a multiple of 8 long). */
ISA_ATTR static VEC NAME(pairwise)(const T *a, ptrdiff_t sa, const T *bt, ptrdiff_t n,
                                   int square)
{
    if (n < 8) {
        VEC res = (VEC){0} + (T)-0.0;
        for (ptrdiff_t k = 0; k < n; k++) res = res + NAME(term)(a[k * sa], bt + k * L, square);
        return res;
    }
    if (n <= PW_BLOCK) {
        VEC r[8];
        for (int j = 0; j < 8; j++) r[j] = NAME(term)(a[j * sa], bt + j * L, square);
        ptrdiff_t k = 8;
        for (; k < n - n % 8; k += 8)
            for (int j = 0; j < 8; j++)
                r[j] = r[j] + NAME(term)(a[(k + j) * sa], bt + (k + j) * L, square);
        VEC res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; k < n; k++) res = res + NAME(term)(a[k * sa], bt + k * L, square);
        return res;
    }
    ptrdiff_t n2 = n / 2;
    n2 -= n2 % 8;
    return NAME(pairwise)(a, sa, bt, n2, square) +
           NAME(pairwise)(a + n2 * sa, sa, bt + n2 * L, n - n2, square);
}

/* Tiles [lo, hi): tile t is batch t / tiles_per_batch, rows j0 .. j0 + L of x2 (fewer at the
 * end: the missing lanes compute on zeros and are not stored). */
ISA_ATTR static int NAME(tiles)(const dist_t *G, ptrdiff_t lo, ptrdiff_t hi)
{
    const ptrdiff_t D = G->D, per_batch = (G->M + L - 1) / L;
    T *bt = malloc(sizeof(T) * (size_t)(D > 0 ? D : 1) * (size_t)L);
    if (bt == NULL) return -1;
    for (ptrdiff_t t = lo; t < hi; t++) {
        const ptrdiff_t b = t / per_batch, j0 = t % per_batch * L;
        const ptrdiff_t lanes = G->M - j0 < L ? G->M - j0 : L;
        const T *x2 = (const T *)G->x2 + b * G->s2[0];
        for (ptrdiff_t k = 0; k < D; k++)
            for (ptrdiff_t j = 0; j < L; j++)
                bt[k * L + j] = j < lanes ? x2[(j0 + j) * G->s2[1] + k * G->s2[2]] : 0;
        for (ptrdiff_t i = 0; i < G->N; i++) {
            const T *a = (const T *)G->x1 + b * G->s1[0] + i * G->s1[1];
            const VEC sums = NAME(pairwise)(a, G->s1[2], bt, D, G->square);
            T *o = (T *)G->out + (b * G->N + i) * G->M + j0;
            for (ptrdiff_t j = 0; j < lanes; j++) o[j] = G->square ? SQRT_T(sums[j]) : sums[j];
        }
    }
    free(bt);
    return 0;
}

#undef L
#undef VEC
#undef UVEC
#undef UINT
#undef SQRT_T
#undef T
#undef IS_F32
#undef ISA_ATTR
#undef VBYTES
#undef NAME
#endif /* DISTANCE_TEMPLATE */
