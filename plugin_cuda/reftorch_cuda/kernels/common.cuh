// Definitions every kernel program of the reftorch CUDA plugin shares: the loop geometry, the
// 16-bit float storage types and how each storage type is computed, NumPy's maximum/minimum,
// the math library by computation type, and the fixed-order block reduction.
// reftorch_cuda.kernel_base puts this text in front of every .cu file before NVRTC compiles it
// (NVRTC wheels ship no headers, and one prelude keeps one definition of each thing), so it
// includes nothing itself.
//
// The geometry is a coalesced loop geometry (see reftorch_plugins.geometry): one shape and
// one stride list per operand, strides in elements, operand 0 is the output. Linear index i in
// [0, numel) is split row-major (last dim fastest) into per-dim indices, and each operand's
// element offset is the dot product of those indices with its strides. All index arithmetic is
// 64-bit.
//
// NVRTC as shipped in wheels has no cuda_fp16.h / cuda_bf16.h, so the two 16-bit float types
// are plain 16-bit storage here with explicit conversions. They are computed in float
// (PyTorch's "opmath") and rounded once, to nearest even, when stored.

#define RT_MAX_DIMS 16

typedef long long rt_int64;

// The loop geometry, passed to each kernel by value. The host builds the identical layout
// with ctypes (reftorch_cuda.kernel_base.geometry_struct); the static_asserts pin the size
// both sides use.
template <int N>
struct Geometry {
    rt_int64 numel;                      // number of elements of the output
    int ndim;                            // 1 <= ndim <= RT_MAX_DIMS
    int unused;                          // explicit padding
    rt_int64 sizes[RT_MAX_DIMS];
    rt_int64 strides[N][RT_MAX_DIMS];    // strides[k][d]: operand k, dim d, in elements
};
static_assert(sizeof(Geometry<2>) == 16 + 8 * RT_MAX_DIMS * 3, "Geometry<2> layout");
static_assert(sizeof(Geometry<3>) == 16 + 8 * RT_MAX_DIMS * 4, "Geometry<3> layout");

// Element offsets of linear index i for every operand.
template <int N>
__device__ __forceinline__ void element_offsets(const Geometry<N>& g, rt_int64 i,
                                                rt_int64 (&offset)[N]) {
#pragma unroll
    for (int k = 0; k < N; ++k) offset[k] = 0;
#pragma unroll 1  // a rolled loop: 64-bit division is long code, and ndim is usually 1 or 2
    for (int d = g.ndim - 1; d > 0; --d) {
        const rt_int64 size = g.sizes[d];
        const rt_int64 rest = i / size;
        const rt_int64 index = i - rest * size;
#pragma unroll
        for (int k = 0; k < N; ++k) offset[k] += index * g.strides[k][d];
        i = rest;
    }
    // What is left of i is the index in dim 0 (i < numel, so it is below sizes[0]).
#pragma unroll
    for (int k = 0; k < N; ++k) offset[k] += i * g.strides[k][0];
}

// --- 16-bit floating point types -----------------------------------------------------------

struct __align__(2) rt_float16 { unsigned short bits; };
struct __align__(2) rt_bfloat16 { unsigned short bits; };

__device__ __forceinline__ float to_float(rt_float16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}

__device__ __forceinline__ rt_float16 float16_from_float(float f) {
    rt_float16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}

__device__ __forceinline__ float to_float(rt_bfloat16 b) {
    // bfloat16 is the high half of a float32.
    return __uint_as_float(((unsigned int)b.bits) << 16);
}

__device__ __forceinline__ rt_bfloat16 bfloat16_from_float(float f) {
    unsigned int u = __float_as_uint(f);
    rt_bfloat16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        b.bits = (unsigned short)((u >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
        return b;
    }
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    b.bits = (unsigned short)(u >> 16);
    return b;
}

// How a storage type is loaded into its computation type and stored back.
template <typename T>
struct Arith {
    typedef T type;
    static __device__ __forceinline__ T load(T v) { return v; }
    static __device__ __forceinline__ T store(T v) { return v; }
};

template <>
struct Arith<rt_float16> {
    typedef float type;
    static __device__ __forceinline__ float load(rt_float16 v) { return to_float(v); }
    static __device__ __forceinline__ rt_float16 store(float v) { return float16_from_float(v); }
};

template <>
struct Arith<rt_bfloat16> {
    typedef float type;
    static __device__ __forceinline__ float load(rt_bfloat16 v) { return to_float(v); }
    static __device__ __forceinline__ rt_bfloat16 store(float v) { return bfloat16_from_float(v); }
};

// An operand of storage type T loaded into the computation type A of another operand type. A
// 16-bit op may have float operands (a Python number arrives as a 0-dim float32 tensor, which
// the reference uses as it is, unrounded): those load as float, exactly.
template <typename A, typename T>
__device__ __forceinline__ A load_as(T v) { return (A)Arith<T>::load(v); }

// A 16-byte word (complex128), for kernels that move elements without looking at them.
struct __align__(16) rt_bytes16 { unsigned long long low, high; };

// The elementwise kernels' loop: every linear index below g.numel, once, over a 1-D grid of
// any size (the host caps the grid; each thread strides by the grid's thread count).
#define RT_GRID_STRIDE_LOOP(i, n)                                                           \
    for (rt_int64 i = (rt_int64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);             \
         i += (rt_int64)blockDim.x * gridDim.x)

// Maximum and minimum as NumPy's np.maximum / np.minimum compute them: a NaN in either
// operand gives NaN, and equal operands (-0.0 and +0.0) give the second one.
template <typename A>
__device__ __forceinline__ A rt_maximum(A a, A b) {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}

template <typename A>
__device__ __forceinline__ A rt_minimum(A a, A b) {
    if (a != a) return a;
    if (b != b) return b;
    return a < b ? a : b;
}

// --- the math library by computation type ------------------------------------------------------
// One overload per type keeps float math in float (expf, not exp on a promoted double).

__device__ __forceinline__ float rt_exp(float x) { return expf(x); }
__device__ __forceinline__ double rt_exp(double x) { return exp(x); }
__device__ __forceinline__ float rt_expm1(float x) { return expm1f(x); }
__device__ __forceinline__ double rt_expm1(double x) { return expm1(x); }
__device__ __forceinline__ float rt_log(float x) { return logf(x); }
__device__ __forceinline__ double rt_log(double x) { return log(x); }
__device__ __forceinline__ float rt_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ double rt_log1p(double x) { return log1p(x); }
__device__ __forceinline__ float rt_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double rt_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float rt_sin(float x) { return sinf(x); }
__device__ __forceinline__ double rt_sin(double x) { return sin(x); }
__device__ __forceinline__ float rt_cos(float x) { return cosf(x); }
__device__ __forceinline__ double rt_cos(double x) { return cos(x); }
__device__ __forceinline__ float rt_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double rt_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float rt_fabs(float x) { return fabsf(x); }
__device__ __forceinline__ double rt_fabs(double x) { return fabs(x); }
__device__ __forceinline__ float rt_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double rt_pow(double x, double y) { return pow(x, y); }

// --- block reductions -------------------------------------------------------------------------
// A block of RT_BLOCK_THREADS threads combines one value per thread in a fixed tree order:
// partial[t] = combine(partial[t], partial[t + s]) for s = 128, 64, ..., 1. No atomics, so the
// result depends on the block size alone, never on the grid or the GPU (the host launches
// these kernels with exactly RT_BLOCK_THREADS threads).
#define RT_BLOCK_THREADS 256

// Reduction ops: identity, combine, and finish (the value stored, given the element count).
struct SumOp {
    template <typename A> static __device__ A identity() { return A(0); }
    template <typename A> static __device__ A combine(A a, A b) { return a + b; }
    template <typename A> static __device__ A finish(A total, rt_int64) { return total; }
};

// NaN propagates (rt_maximum/rt_minimum). The infinite identities reach an output only for an
// empty reduction, which amax/amin refuse before any kernel runs.
struct AmaxOp {
    template <typename A> static __device__ A identity() { return -A(1) / A(0); }
    template <typename A> static __device__ A combine(A a, A b) { return rt_maximum(a, b); }
    template <typename A> static __device__ A finish(A v, rt_int64) { return v; }
};

struct AminOp {
    template <typename A> static __device__ A identity() { return A(1) / A(0); }
    template <typename A> static __device__ A combine(A a, A b) { return rt_minimum(a, b); }
    template <typename A> static __device__ A finish(A v, rt_int64) { return v; }
};

// A value of any trivially copyable type from the lane `delta` above in this warp (a lane
// with none above gets its own back), moved as 32-bit words.
template <typename A>
__device__ __forceinline__ A shuffle_down(A value, int delta) {
    constexpr int words = (sizeof(A) + 3) / 4;
    unsigned int word[words] = {};
    memcpy(word, &value, sizeof(A));
    for (int k = 0; k < words; ++k) word[k] = __shfl_down_sync(0xffffffffu, word[k], delta);
    memcpy(&value, word, sizeof(A));
    return value;
}

// Every thread's `value` combined; every thread gets the result. `partial` is the block's
// shared array of RT_BLOCK_THREADS elements, free again when this returns.
// The tree's levels s >= 64 pair threads of different warps and go through shared memory;
// warp 0 does the rest with shuffles (lane t holds partial[t]: at each level, lane t < s
// combines its value with lane t + s's, the same pairs in the same order), which saves
// five of the block's barriers per reduction.
template <typename Op, typename A>
__device__ A block_reduce(A* partial, A value) {
    const int t = threadIdx.x;
    partial[t] = value;
    __syncthreads();
#pragma unroll 1  // a rolled loop: each level waits on __syncthreads anyway, and unrolling
                  // the levels doubled the NVRTC time of every reduction kernel
    for (int s = RT_BLOCK_THREADS / 2; s > 32; s >>= 1) {
        if (t < s) partial[t] = Op::combine(partial[t], partial[t + s]);
        __syncthreads();
    }
    if (t < 32) {
        A v = Op::combine(partial[t], partial[t + 32]);
#pragma unroll 1
        for (int s = 16; s > 0; s >>= 1) v = Op::combine(v, shuffle_down(v, s));
        if (t == 0) partial[0] = v;
    }
    __syncthreads();
    const A result = partial[0];
    __syncthreads();  // every thread has read partial[0] before anyone writes partial again
    return result;
}
