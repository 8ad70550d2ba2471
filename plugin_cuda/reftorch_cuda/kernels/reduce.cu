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
// Reductions longer than a chunk run in two launches (reduce_chunks_kernel, then
// reduce_partials_kernel): each output's elements cut into fixed chunks, one block per chunk,
// then one block per output over the chunks' results.
//
// Name expressions: "reduce_kernel<float, SumOp>", "reduce_chunks_kernel<double, AmaxOp>".

// The reduction ops (SumOp, AmaxOp, AminOp) and block_reduce are common.cuh's; the mean is the
// sum divided by the count converted to A (0 / 0 is NaN for an empty reduction).
struct MeanOp : SumOp {
    template <typename A> static __device__ A finish(A total, rt_int64 n) { return total / (A)n; }
};

// `outer` walks the output elements: operand 0 the output, operand 1 the input (the kept
// dims). `inner` walks the reduced dims of the input (numel 0 for an empty reduction).

// The block's combination of the reduced elements [first, last) of output element `o` (whose
// input offset is `base`): thread t takes first + t, first + t + RT_BLOCK_THREADS, ... in turn,
// then block_reduce's tree. Every thread gets the result.
template <typename T, typename Op, typename A>
__device__ A reduce_range(const Geometry<1>& inner, const T* base, rt_int64 first,
                          rt_int64 last, A* partial) {
    A acc = Op::template identity<A>();
    for (rt_int64 r = first + threadIdx.x; r < last; r += RT_BLOCK_THREADS) {
        rt_int64 at[1];
        element_offsets(inner, r, at);
        acc = Op::combine(acc, Arith<T>::load(base[at[0]]));
    }
    return block_reduce<Op>(partial, acc);
}

// One block per output element, over all its reduced elements.
template <typename T, typename Op>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
reduce_kernel(const Geometry<2> outer, const Geometry<1> inner, T* out, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for (rt_int64 o = blockIdx.x; o < outer.numel; o += gridDim.x) {
        rt_int64 offset[2];
        element_offsets(outer, o, offset);
        const A acc = reduce_range<T, Op>(inner, in + offset[1], 0, inner.numel, partial);
        if (threadIdx.x == 0) out[offset[0]] = Arith<T>::store(Op::finish(acc, inner.numel));
    }
}

// Long reductions in two launches, so that many blocks share one output element. The host
// cuts each output's reduced elements into `chunks` chunks of `chunk` elements (the last one
// shorter), a split fixed by the element count alone, so results still do not depend on the
// launch. First: one block per (output, chunk) writes the chunk's combination, unrounded, to
// partials[o * chunks + c].
template <typename T, typename Op>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
reduce_chunks_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 chunk,
                     rt_int64 chunks, typename Arith<T>::type* partials, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for (rt_int64 task = blockIdx.x; task < outer.numel * chunks; task += gridDim.x) {
        const rt_int64 o = task / chunks, c = task - o * chunks;
        rt_int64 offset[2];
        element_offsets(outer, o, offset);
        const rt_int64 first = c * chunk;
        const rt_int64 last = first + chunk < inner.numel ? first + chunk : inner.numel;
        const A acc = reduce_range<T, Op>(inner, in + offset[1], first, last, partial);
        if (threadIdx.x == 0) partials[task] = acc;
    }
}

// Then: one block per output element combines its chunks' results in the same block order
// and stores Op::finish of them (`n`: the output's reduced element count, for the mean).
template <typename T, typename Op>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
reduce_partials_kernel(const Geometry<2> outer, rt_int64 chunks, rt_int64 n, T* out,
                       const typename Arith<T>::type* partials) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for (rt_int64 o = blockIdx.x; o < outer.numel; o += gridDim.x) {
        rt_int64 offset[2];
        element_offsets(outer, o, offset);
        A acc = Op::template identity<A>();
        for (rt_int64 c = threadIdx.x; c < chunks; c += RT_BLOCK_THREADS)
            acc = Op::combine(acc, partials[o * chunks + c]);
        acc = block_reduce<Op>(partial, acc);
        if (threadIdx.x == 0) out[offset[0]] = Arith<T>::store(Op::finish(acc, n));
    }
}
