/* Instantiates a kernel template once per element type and instruction-set clone: include
 * this with CLONE_TEMPLATE defined as the template's file name (in quotes). For each of
 * (float, double) x (baseline x86-64, AVX2 with FMA, AVX-512F; the x86 clones only where GCC builds
 * them) the template is included with
 *   T          float or double
 *   IS_F32     1 for float, 0 for double (the template derives its other per-type macros)
 *   ISA_ATTR   the function attribute of the clone (empty for the baseline)
 *   VBYTES     the clone's native vector size in bytes: 16, 32 or 64
 *   NAME(x)    x's name in this clone: x##_f32_baseline, x##_f64_avx2, ...
 * defined; the template #undefs them at its end. Afterwards HAVE_X86_CLONES says whether the
 * x86 clones exist and CLONES(fn) is the [N_ISAS][2] table of fn's clones (by ISA, then
 * float / double). Used by bags.c, distance.c, nn_rows.c, pool.c and reduce.c. */

#define T float
#define IS_F32 1
#define ISA_ATTR
#define VBYTES 16
#define NAME(x) x##_f32_baseline
#include CLONE_TEMPLATE
#define T double
#define IS_F32 0
#define ISA_ATTR
#define VBYTES 16
#define NAME(x) x##_f64_baseline
#include CLONE_TEMPLATE

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define HAVE_X86_CLONES 1
#define T float
#define IS_F32 1
#define ISA_ATTR __attribute__((target("avx2,fma")))
#define VBYTES 32
#define NAME(x) x##_f32_avx2
#include CLONE_TEMPLATE
#define T double
#define IS_F32 0
#define ISA_ATTR __attribute__((target("avx2,fma")))
#define VBYTES 32
#define NAME(x) x##_f64_avx2
#include CLONE_TEMPLATE
#define T float
#define IS_F32 1
#define ISA_ATTR __attribute__((target("avx512f")))
#define VBYTES 64
#define NAME(x) x##_f32_avx512f
#include CLONE_TEMPLATE
#define T double
#define IS_F32 0
#define ISA_ATTR __attribute__((target("avx512f")))
#define VBYTES 64
#define NAME(x) x##_f64_avx512f
#include CLONE_TEMPLATE
#define CLONES(fn) {{fn##_f32_baseline, fn##_f64_baseline}, {fn##_f32_avx2, fn##_f64_avx2}, \
                    {fn##_f32_avx512f, fn##_f64_avx512f}}
#else
#define HAVE_X86_CLONES 0
#define CLONES(fn) {{fn##_f32_baseline, fn##_f64_baseline}}
#endif
