// Reductions over any set of dims: sum, mean, amax, amin. Compiled after common.cuh.
//
// One block computes one output element (a grid-stride loop over output elements covers any
// count). Its RT_BLOCK_THREADS threads each combine a strided share of the reduced elements in
// order (thread t takes elements t, t + RT_BLOCK_THREADS, ...), then a tree in shared memory
// halves the partial results: partial[t] = partial[t] + partial[t + s] for s = 128, 64, ..., 1.
// No atomics: the order of every addition is fixed by the block size alone, so a result does
// not depend on the grid or on the GPU. The order differs from NumPy's pairwise sum, so sums
// agree with the reference within rounding, not bit for bit.
//
// Accumulation is in the computation type: double for double, float for float and the 16-bit
// types (rounded once at the end), as the reference and PyTorch accumulate.
//
// Name expressions: "reduce_kernel<float, SumOp>".

// The reduction ops (SumOp, AmaxOp, AminOp) and block_reduce are common.cuh's; the mean is the
// sum divided by the count converted to A (0 / 0 is NaN for an empty reduction).
struct MeanOp : SumOp {
    template <typename A> static __device__ A finish(A total, rt_int64 n) { return total / (A)n; }
};

// `outer` walks the output elements: operand 0 the output, operand 1 the input (the kept
// dims). `inner` walks the reduced dims of the input (numel 0 for an empty reduction).
template <typename T, typename Op>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
reduce_kernel(const Geometry<2> outer, const Geometry<1> inner, T* out, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for (rt_int64 o = blockIdx.x; o < outer.numel; o += gridDim.x) {
        rt_int64 offset[2];
        element_offsets(outer, o, offset);
        const T* base = in + offset[1];
        A acc = Op::template identity<A>();
        for (rt_int64 r = threadIdx.x; r < inner.numel; r += RT_BLOCK_THREADS) {
            rt_int64 at[1];
            element_offsets(inner, r, at);
            acc = Op::combine(acc, Arith<T>::load(base[at[0]]));
        }
        acc = block_reduce<Op>(partial, acc);
        if (threadIdx.x == 0) out[offset[0]] = Arith<T>::store(Op::finish(acc, inner.numel));
    }
}
