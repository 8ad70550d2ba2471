// Reductions over any set of dims: sum, mean, amax, amin. Compiled after common.cuh.
//
// One block computes one output element (a grid-stride loop over output elements covers any
// count). Its RT_REDUCE_THREADS threads each combine a strided share of the reduced elements in
// order (thread t takes elements t, t + RT_REDUCE_THREADS, ...), then a tree in shared memory
// halves the partial results: partial[t] = partial[t] + partial[t + s] for s = 128, 64, ..., 1.
// No atomics: the order of every addition is fixed by the block size alone, so a result does
// not depend on the grid or on the GPU. The order differs from NumPy's pairwise sum, so sums
// agree with the reference within rounding, not bit for bit.
//
// Accumulation is in the computation type: double for double, float for float and the 16-bit
// types (rounded once at the end), as the reference and PyTorch accumulate.
//
// Name expressions: "reduce_kernel<float, SumOp>".

#define RT_REDUCE_THREADS 256

// `outer` walks the output elements: operand 0 the output, operand 1 the input (the kept
// dims). `inner` walks the reduced dims of the input (numel 0 for an empty reduction).
struct SumOp {
    template <typename A> static __device__ A identity() { return A(0); }
    template <typename A> static __device__ A combine(A a, A b) { return a + b; }
    template <typename A> static __device__ A finish(A total, rt_int64) { return total; }
};

// The sum divided by the count converted to A (0 / 0 is NaN for an empty reduction).
struct MeanOp {
    template <typename A> static __device__ A identity() { return A(0); }
    template <typename A> static __device__ A combine(A a, A b) { return a + b; }
    template <typename A> static __device__ A finish(A total, rt_int64 n) { return total / (A)n; }
};

// NaN propagates (rt_maximum/rt_minimum); amax/amin never see an empty reduction (the
// reference raises first), so the infinite identity never reaches an output.
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

template <typename T, typename Op>
__global__ void __launch_bounds__(RT_REDUCE_THREADS)
reduce_kernel(const Geometry<2> outer, const Geometry<1> inner, T* out, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_REDUCE_THREADS];
    const int t = threadIdx.x;
    for (rt_int64 o = blockIdx.x; o < outer.numel; o += gridDim.x) {
        rt_int64 offset[2];
        element_offsets(outer, o, offset);
        const T* base = in + offset[1];
        A acc = Op::template identity<A>();
        for (rt_int64 r = t; r < inner.numel; r += RT_REDUCE_THREADS) {
            rt_int64 at[1];
            element_offsets(inner, r, at);
            acc = Op::combine(acc, Arith<T>::load(base[at[0]]));
        }
        partial[t] = acc;
        __syncthreads();
        for (int s = RT_REDUCE_THREADS / 2; s > 0; s >>= 1) {
            if (t < s) partial[t] = Op::combine(partial[t], partial[t + s]);
            __syncthreads();
        }
        if (t == 0) out[offset[0]] = Arith<T>::store(Op::finish(partial[0], inner.numel));
        __syncthreads();  // partial[0] is read before the next output overwrites it
    }
}
