// More reductions, compiled after common.cuh and reduce.cu (whose block order helpers
// reduce_terms, for_each_output, reduce_chunks and combine_partials, and reduce_kernel /
// reduce_chunks_kernel / reduce_partials_kernel templates these build on):
//   logsumexp (two passes: the largest element, then the sum of exp(x - shift)), prod (floats:
//   one thread per output multiplying in index order, or for few long products the block
//   order's tree; bool / integers: wrapping long long products in the block order), and the
//   vector norms p = 0 (the count of nonzeros) and whole p from 3 up (the sum of
//   |x| * ... * |x|, then its 1/p power).
//
// The block order is reduce.cu's: one block per output element, thread t takes elements t,
// t + RT_BLOCK_THREADS, ... in turn, then block_reduce's fixed tree; an output of more than a
// chunk of elements is cut into fixed chunks, one block each, then combined. Results depend on
// the shapes alone.
//
// Name expressions: "logsumexp_kernel<float>",
// "lane_prod_kernel<rt_bfloat16, float>", "reduce_kernel<float, ProdOp>",
// "reduce_kernel<int, WrappingProdOp, long long, long long>", "norm_power_kernel<double,
// double>" (the input type, then the accumulation type: double for p = 0's count).

// --- logsumexp ----------------------------------------------------------------------------------
// The reference's formula: shift = the row's largest element (NaN propagates), replaced by 0
// when it is not finite (a row of NaN, +inf or only -inf; and the empty row, whose largest is
// the identity -inf); then log(sum of exp(x - shift)) + shift. So a NaN row gives NaN, a row
// with +inf gives inf, a row of -inf (or an empty row) gives log(0) = -inf.

template <typename A>
__device__ __forceinline__ A finite_or_zero(A shift) {
    return rt_fabs(shift) < A(1) / A(0) ? shift : A(0);   // NaN < inf is false
}

// The term of the second pass: exp(x - shift).
template <typename A>
struct ShiftedExp {
    A shift;
    __device__ A operator()(A x) const { return rt_exp(x - shift); }
};

// One block per output element, both passes.
template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
logsumexp_kernel(const Geometry<2> outer, const Geometry<1> inner, T* out, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for_each_output(outer, [&](rt_int64, rt_int64 out_offset, rt_int64 in_offset) {
        const T* base = in + in_offset;
        const A largest = reduce_terms<AmaxOp, T, A>(inner, base, 0, inner.numel,
                                                     Term<AmaxOp>(), partial);
        const A shift = finite_or_zero(largest);
        const A total = reduce_terms<SumOp, T, A>(inner, base, 0, inner.numel,
                                                  ShiftedExp<A>{shift}, partial);
        if (threadIdx.x == 0) out[out_offset] = Arith<T>::store(rt_log(total) + shift);
    });
}

// Long rows: the largest elements come from reduce_chunks_kernel<T, AmaxOp> and
// reduce_partials_kernel<A, AmaxOp> (into shifts[o], dense by output index); then each
// (output, chunk) task sums its chunk's exp(x - shift) ...
template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
logsumexp_chunks_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 chunk,
                        rt_int64 chunks, const typename Arith<T>::type* shifts,
                        typename Arith<T>::type* partials, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    reduce_chunks<SumOp, T, A>(outer, inner, chunk, chunks, partials, in, [=](rt_int64 o) {
        return ShiftedExp<A>{finite_or_zero(shifts[o])};
    }, partial);
}

// ... and one block per output adds the chunks' sums and finishes.
template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
logsumexp_partials_kernel(const Geometry<2> outer, rt_int64 chunks,
                          const typename Arith<T>::type* shifts, T* out,
                          const typename Arith<T>::type* partials) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    combine_partials<SumOp>(outer, chunks, partials, partial, [=](rt_int64 o, rt_int64 at,
                                                                  A acc) {
        out[at] = Arith<T>::store(rt_log(acc) + finite_or_zero(shifts[o]));
    });
}

// --- prod ---------------------------------------------------------------------------------------
// Floating-point products depend on their order, and the reference's is the lane order
// (reftorch/_ops/reduction.py): lane j of 64 multiplies elements j, j + 64, ... in order (of
// `inner`, which the host puts in the elements' logical order), the lanes then fold as a tree
// (lane j times lane j + w, for w = 32, 16, ..., 1) and the last n % 64 elements follow in
// order; fewer than 64 elements multiply in index order. Where the outputs are many, one
// thread per output does the same (lane_prod_kernel), in A, rounded once when stored: bit for
// bit the reference's. Few long products would leave the GPU idle and take one thread n
// multiplications each, so they take the block kernels (reduce_kernel, reduce_chunks_kernel,
// reduce_partials_kernel with ProdOp): the fixed block order's tree of products, within the
// rounding of the two orders and the same for every launch.
struct ProdOp {
    template <typename A> static __device__ A identity() { return A(1); }
    template <typename A> static __device__ A combine(A a, A b) { return a * b; }
    template <typename A> static __device__ A finish(A total, rt_int64) { return total; }
};

#define RT_PROD_LANES 64

// One thread per output: its product in the lane order (above). The lanes stay in the
// thread's registers (the loop over them is unrolled), or in its local memory where they spill.
template <typename T, typename A>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
lane_prod_kernel(const Geometry<2> outer, const Geometry<1> inner, T* out, const T* in) {
    for_each_column_chunk(outer, inner, inner.numel, 1, [&](rt_int64, rt_int64, rt_int64 at,
                                                            rt_int64 in_offset, rt_int64,
                                                            rt_int64 n) {
        const T* base = in + in_offset;
        auto element = [&](rt_int64 r) {
            rt_int64 offset[1];
            element_offsets(inner, r, offset);
            return load_as<A>(base[offset[0]]);
        };
        const rt_int64 body = n - n % RT_PROD_LANES;
        A acc = ProdOp::identity<A>();     // (1 times the first element is that element)
        if (body > 0) {
            A lanes[RT_PROD_LANES];
#pragma unroll
            for (int j = 0; j < RT_PROD_LANES; j++) lanes[j] = element(j);
            for (rt_int64 b = RT_PROD_LANES; b < body; b += RT_PROD_LANES) {
#pragma unroll
                for (int j = 0; j < RT_PROD_LANES; j++) lanes[j] = lanes[j] * element(b + j);
            }
#pragma unroll
            for (int w = RT_PROD_LANES / 2; w > 0; w /= 2) {
#pragma unroll
                for (int j = 0; j < w; j++) lanes[j] = lanes[j] * lanes[j + w];
            }
            acc = lanes[0];
        }
        for (rt_int64 r = body; r < n; r++) acc = acc * element(r);
        out[at] = Arith<T>::store(acc);
    });
}

// Bool and integer products, in long long, wrapping as NumPy's int64 product does (multiplied
// as unsigned words: signed overflow is undefined in C++). Exact in any order, so they use
// reduce.cu's block kernels.
struct WrappingProdOp {
    template <typename A> static __device__ A identity() { return A(1); }
    template <typename A> static __device__ A combine(A a, A b) {
        return (A)((unsigned long long)a * (unsigned long long)b);
    }
    template <typename A> static __device__ A finish(A total, rt_int64) { return total; }
};

// --- norms p = 0 and whole p >= 3 ---------------------------------------------------------------
// The term of |x| for p (a runtime int): p = 0 the indicator x != 0 (NaN counts: NaN != 0), else
// |x| * |x| * ... * |x| (p factors, multiplied left to right). The result: the count itself for
// p = 0 (A = double: exact up to 2^53, rounded once when stored, as the reference converts its
// int64 count), else pow(sum, 1 / p) with 1 / p rounded to A as NumPy rounds the exponent.
template <typename A>
__device__ __forceinline__ A norm_term(A x, int p) {
    if (p == 0) return x != A(0) ? A(1) : A(0);
    const A magnitude = rt_fabs(x);
    A term = magnitude;
#pragma unroll 1
    for (int k = 1; k < p; ++k) term = term * magnitude;
    return term;
}

template <typename A>
__device__ __forceinline__ A norm_finish(A total, int p) {
    return p == 0 ? total : rt_pow(total, (A)(1.0 / p));
}

// The stored value: Out's store takes its computation type (float for the 16-bit types), so
// a double count reaches a 16-bit output through float, as the reference's int64 count goes
// through float32.
template <typename T, typename A>
__device__ __forceinline__ T norm_store(A value) {
    return Arith<T>::store((typename Arith<T>::type)value);
}

// The term of a power norm (norm_term's functor).
struct NormPowerTerm {
    int p;
    template <typename A> __device__ A operator()(A x) const { return norm_term(x, p); }
};

template <typename T, typename A>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
norm_power_kernel(const Geometry<2> outer, const Geometry<1> inner, int p, T* out,
                  const T* in) {
    __shared__ A partial[RT_BLOCK_THREADS];
    for_each_output(outer, [&](rt_int64, rt_int64 out_offset, rt_int64 in_offset) {
        const A total = reduce_terms<SumOp, T, A>(inner, in + in_offset, 0, inner.numel,
                                                  NormPowerTerm{p}, partial);
        if (threadIdx.x == 0) out[out_offset] = norm_store<T>(norm_finish(total, p));
    });
}

// Long reductions: each (output, chunk) task sums its chunk's terms ...
template <typename T, typename A>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
norm_power_chunks_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 chunk,
                         rt_int64 chunks, int p, A* partials, const T* in) {
    __shared__ A partial[RT_BLOCK_THREADS];
    reduce_chunks<SumOp, T, A>(outer, inner, chunk, chunks, partials, in,
                               [=](rt_int64) { return NormPowerTerm{p}; }, partial);
}

// ... and one block per output adds the chunks' sums and finishes.
template <typename T, typename A>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
norm_power_partials_kernel(const Geometry<2> outer, rt_int64 chunks, int p, T* out,
                           const A* partials) {
    __shared__ A partial[RT_BLOCK_THREADS];
    combine_partials<SumOp>(outer, chunks, partials, partial, [=](rt_int64, rt_int64 at, A acc) {
        out[at] = norm_store<T>(norm_finish(acc, p));
    });
}
