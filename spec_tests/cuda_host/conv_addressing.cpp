// conv.cu's addressing compiled for the host (test_plugin_cuda_conv.py builds it with a C++
// compiler): the stand-ins below replace what conv.cu takes from CUDA, common.cuh and gemm.cu,
// so its operand sources (FilterRows, ImageColumns, TransposedColumns, GradRows, ImageTaps),
// the three kinds' a_source/b_source and their store functions run as written, on a machine
// without a GPU. conv_maps lists, for one launch's ConvArgs, the element offset (or -1 for a
// zero) of every A and B element of every product, and the output offset store() writes for
// every (batch, row, col).
#include <cstdio>
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(x)
#define RT_GEMM_THREADS 256
typedef long long rt_int64;
struct uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static struct { unsigned x; } threadIdx;
inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
struct rt_float16 { unsigned short bits; };
struct rt_bfloat16 { unsigned short bits; };
template <typename T> struct Arith {
    static T load(T v) { return v; }
    static T store(T v) { return v; }
};
template <int R, int BK> void tile_coords(int, bool, int&, int&) {}
template <int BK> void chunk_along_k(int, int&, int&) {}
inline uint4 pack_chunk(const unsigned (&)[8]) { return {}; }
template <typename T, typename P> void simt_product(const P&) {}
template <typename T, typename P> void mma_product(const P&) {}

#include "conv.cu"

// store() adds the bias when the launch has one: a zero bias, so every stored value is the
// (batch, row, col) index it was given.
static double zero_bias[1 << 20];

template <typename Kind>
static int maps(const ConvArgs& p, long long* a, long long* b, double* out) {
    if (p.has_bias && (p.groups * p.group_out - 1) * p.bias_stride >= (1 << 20)) return 1;
    int edges_ok = 1;
    for (rt_int64 bi = 0; bi < p.batch; ++bi) {
        const typename Kind::ASource as = Kind::a_source(p, bi);
        const typename Kind::BSource bs = Kind::b_source(p, bi);
        for (rt_int64 r = 0; r < p.m; ++r) {
            const auto row = as.row(r);
            for (rt_int64 k = 0; k < p.k; ++k) a[(bi * p.m + r) * p.k + k] = as.offset(row, k);
            edges_ok &= as.offset(row, p.k) == -1;            // past the depth: a zero
        }
        for (rt_int64 c = 0; c < p.n; ++c) {
            const auto row = bs.row(c);
            for (rt_int64 k = 0; k < p.k; ++k) b[(bi * p.k + k) * p.n + c] = bs.offset(row, k);
            edges_ok &= bs.offset(row, p.k) == -1;
        }
        for (rt_int64 k = 0; k < p.k; ++k)                     // rows past the tile edge
            edges_ok &= as.offset(as.row(p.m), k) == -1 && bs.offset(bs.row(p.n), k) == -1;
        for (rt_int64 r = 0; r < p.m; ++r)
            for (rt_int64 c = 0; c < p.n; ++c)
                Kind::store(p, Kind::columns(p), out, (const double*)zero_bias, bi, r, c,
                            (double)((bi * p.m + r) * p.n + c));
    }
    return edges_ok ? 0 : 2;
}

extern "C" int conv_maps(int kind, const ConvArgs* p, long long* a, long long* b, double* out) {
    switch (kind) {
        case 0: return maps<ConvForward>(*p, a, b, out);
        case 1: return maps<ConvTransposed>(*p, a, b, out);
        default: return maps<ConvWeightGrad>(*p, a, b, out);
    }
}

// conv.cu's Divisor against the division operator: the first n of `count` (n, d) pairs where
// they differ, or -1.
extern "C" long long divisor_mismatch(const int* n, const int* d, long long count) {
    for (long long i = 0; i < count; ++i)
        if (n[i] / divisor(d[i]) != n[i] / d[i]) return i;
    return -1;
}
