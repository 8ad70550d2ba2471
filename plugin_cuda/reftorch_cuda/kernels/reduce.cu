// Reductions over any set of dims, compiled after common.cuh:
//   sum, mean, amax, amin (the four float types), sum of bool and integer tensors into
//   long long, the vector norms p = 1, 2, inf, -inf (NormOneOp ...), var and std (two passes:
//   the mean, then the squared deviations), argmax / argmin / max.dim / min.dim (value and
//   index pairs), and cumsum (one thread per row, in index order).
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
// types (rounded once at the end), as the reference and PyTorch accumulate; long long for bool
// and integer sums.
//
// Reductions longer than a chunk run in two launches (reduce_chunks_kernel, then
// reduce_partials_kernel): each output's elements cut into fixed chunks, one block per chunk,
// then one block per output over the chunks' results. Every kernel here and in reduce_more.cu
// takes that shape from the same helpers (reduce_terms, for_each_output, for_each_chunk,
// reduce_chunks, combine_partials), so the block order is written once.
//
// Name expressions: "reduce_kernel<float, SumOp>", "reduce_chunks_kernel<double, AmaxOp>",
// "reduce_kernel<int, WrappingSumOp, long long, long long>", "arg_reduce_kernel<float, true>",
// "variance_kernel<double, false>", "cumsum_kernel<rt_float16, SumOp>".

// The reduction ops (SumOp, AmaxOp, AminOp) and block_reduce are common.cuh's; the mean is the
// sum divided by the count converted to A (0 / 0 is NaN for an empty reduction).
struct MeanOp : SumOp {
    template <typename A> static __device__ A finish(A total, rt_int64 n) { return total / (A)n; }
};

// Bool and integer sums, in long long, wrapping on overflow as NumPy's int64 sum does (added
// as unsigned words: signed overflow is undefined in C++). Exact in any order.
struct WrappingSumOp {
    template <typename A> static __device__ A identity() { return A(0); }
    template <typename A> static __device__ A combine(A a, A b) {
        return (A)((unsigned long long)a + (unsigned long long)b);
    }
    template <typename A> static __device__ A finish(A total, rt_int64) { return total; }
};

// The vector norms: what they combine of each element is its Term (below), not the element.
struct NormOneOp : SumOp {};        // the sum of |x|
struct NormTwoOp : SumOp {          // the square root of the sum of x * x
    template <typename A> static __device__ A finish(A total, rt_int64) { return rt_sqrt(total); }
};
struct NormInfOp : AmaxOp {};       // the largest |x| (NaN propagates)
struct NormNegInfOp : AminOp {};    // the smallest |x|

// What a reduction combines of each element: the element itself, except for the norms. A
// term is a functor of the loaded element (reduce_terms below calls it); var / std,
// logsumexp and the power norms have terms of their own (Deviation here, the others in
// reduce_more.cu).
template <typename Op>
struct Term {
    template <typename A> __device__ A operator()(A x) const { return x; }
};
struct AbsTerm {
    template <typename A> __device__ A operator()(A x) const { return rt_fabs(x); }
};
template <> struct Term<NormOneOp> : AbsTerm {};
template <> struct Term<NormInfOp> : AbsTerm {};
template <> struct Term<NormNegInfOp> : AbsTerm {};
template <> struct Term<NormTwoOp> {
    template <typename A> __device__ A operator()(A x) const { return x * x; }  // = |x| * |x|
};

// --- the block order, shared by every reduction kernel here and in reduce_more.cu ----------------
// `outer` walks the output elements: operand 0 the output, operand 1 the input (the kept
// dims). `inner` walks the reduced dims of the input (numel 0 for an empty reduction), in
// their logical order, so a position r in it is the index argmax reports.

// The block's combination by Op of term(x) over the reduced elements [first, last) of one
// output element (whose input offset is `base`): thread t takes first + t,
// first + t + RT_BLOCK_THREADS, ... in turn, then block_reduce's tree. Every thread gets the
// result.
template <typename Op, typename T, typename A, typename TermFn>
__device__ A reduce_terms(const Geometry<1>& inner, const T* base, rt_int64 first,
                          rt_int64 last, TermFn term, A* partial) {
    A acc = Op::template identity<A>();
    for (rt_int64 r = first + threadIdx.x; r < last; r += RT_BLOCK_THREADS) {
        rt_int64 at[1];
        element_offsets(inner, r, at);
        acc = Op::combine(acc, term(load_as<A>(base[at[0]])));
    }
    return block_reduce<Op>(partial, acc);
}

// One block per output element (a grid-stride loop over them): body(o, out offset, input
// offset) for each output element o of this block.
template <typename Body>
__device__ void for_each_output(const Geometry<2>& outer, Body body) {
    for (rt_int64 o = blockIdx.x; o < outer.numel; o += gridDim.x) {
        rt_int64 offset[2];
        element_offsets(outer, o, offset);
        body(o, offset[0], offset[1]);
    }
}

// Long reductions run in two launches, so that many blocks share one output element. The
// host cuts each output's reduced elements into `chunks` chunks of `chunk` elements (the last
// one shorter), a split fixed by the element count alone, so results still do not depend on
// the launch. First launch: one block per (output, chunk) task, task = o * chunks + c:
// body(task, o, input offset, first, last) with [first, last) the chunk's reduced elements.
template <typename Body>
__device__ void for_each_chunk(const Geometry<2>& outer, const Geometry<1>& inner,
                               rt_int64 chunk, rt_int64 chunks, Body body) {
    for (rt_int64 task = blockIdx.x; task < outer.numel * chunks; task += gridDim.x) {
        const rt_int64 o = task / chunks, c = task - o * chunks;
        rt_int64 offset[2];
        element_offsets(outer, o, offset);
        const rt_int64 first = c * chunk;
        const rt_int64 last = first + chunk < inner.numel ? first + chunk : inner.numel;
        body(task, o, offset[1], first, last);
    }
}

// The first launch of an Op reduction: each task's combination of its chunk's terms
// (term_of(o): output o's term), unrounded, into partials[task].
template <typename Op, typename T, typename A, typename TermOf>
__device__ void reduce_chunks(const Geometry<2>& outer, const Geometry<1>& inner,
                              rt_int64 chunk, rt_int64 chunks, A* partials, const T* in,
                              TermOf term_of, A* partial) {
    for_each_chunk(outer, inner, chunk, chunks,
                   [=, &inner](rt_int64 task, rt_int64 o, rt_int64 in_offset, rt_int64 first,
                       rt_int64 last) {
        const A acc = reduce_terms<Op, T, A>(inner, in + in_offset, first, last, term_of(o),
                                             partial);
        if (threadIdx.x == 0) partials[task] = acc;
    });
}

// The second launch: one block per output element combines its chunks' results
// partials[o * chunks + c] by Op in the same block order, and thread 0 calls
// finish(o, out offset, combination). The partials are already terms, so no term here.
template <typename Op, typename A, typename Finish>
__device__ void combine_partials(const Geometry<2>& outer, rt_int64 chunks, const A* partials,
                                 A* partial, Finish finish) {
    for_each_output(outer, [=](rt_int64 o, rt_int64 out_offset, rt_int64) {
        A acc = Op::template identity<A>();
        for (rt_int64 c = threadIdx.x; c < chunks; c += RT_BLOCK_THREADS)
            acc = Op::combine(acc, partials[o * chunks + c]);
        acc = block_reduce<Op>(partial, acc);
        if (threadIdx.x == 0) finish(o, out_offset, acc);
    });
}

// --- sum, mean, amax, amin, integer sums, norms p = 1, 2, inf, -inf ------------------------------

// One block per output element, over all its reduced elements. A: the accumulation type,
// Out: the output's type (long long for integer sums).
template <typename T, typename Op, typename A = typename Arith<T>::type, typename Out = T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
reduce_kernel(const Geometry<2> outer, const Geometry<1> inner, Out* out, const T* in) {
    __shared__ A partial[RT_BLOCK_THREADS];
    for_each_output(outer, [&](rt_int64, rt_int64 out_offset, rt_int64 in_offset) {
        const A acc = reduce_terms<Op, T, A>(inner, in + in_offset, 0, inner.numel, Term<Op>(),
                                             partial);
        if (threadIdx.x == 0) out[out_offset] = Arith<Out>::store(Op::finish(acc, inner.numel));
    });
}

// Long reductions, first launch: each (output, chunk) task's combination.
template <typename T, typename Op, typename A = typename Arith<T>::type>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
reduce_chunks_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 chunk,
                     rt_int64 chunks, A* partials, const T* in) {
    __shared__ A partial[RT_BLOCK_THREADS];
    reduce_chunks<Op, T, A>(outer, inner, chunk, chunks, partials, in,
                            [](rt_int64) { return Term<Op>(); }, partial);
}

// Then the chunks' results combined, storing Op::finish of them (`n`: the output's reduced
// element count, for the mean). A norm's partials use SumOp / AmaxOp / AminOp here, or
// NormTwoOp for its square root.
template <typename T, typename Op, typename A = typename Arith<T>::type, typename Out = T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
reduce_partials_kernel(const Geometry<2> outer, rt_int64 chunks, rt_int64 n, Out* out,
                       const A* partials) {
    __shared__ A partial[RT_BLOCK_THREADS];
    combine_partials<Op>(outer, chunks, partials, partial, [=](rt_int64, rt_int64 at, A acc) {
        out[at] = Arith<Out>::store(Op::finish(acc, n));
    });
}

// --- var and std ---------------------------------------------------------------------------------
// The reference's two passes: centre = (sum of x) / n, then the sum of (x - centre)^2 divided
// by dof = max(n - correction, 0) (the host's double; 0 gives inf or NaN, as the reference),
// and its square root for std. Both sums in the block order above.

// The term of the second pass: (x - centre)^2.
template <typename A>
struct Deviation {
    A centre;
    __device__ A operator()(A x) const {
        const A deviation = x - centre;
        return deviation * deviation;
    }
};

template <bool Std, typename A>
__device__ A variance_finish(A squares, double dof) {
    const A variance = squares / (A)dof;
    return Std ? rt_sqrt(variance) : variance;
}

// One block per output element, both passes.
template <typename T, bool Std>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
variance_kernel(const Geometry<2> outer, const Geometry<1> inner, double dof, T* out,
                const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for_each_output(outer, [&](rt_int64, rt_int64 out_offset, rt_int64 in_offset) {
        const T* base = in + in_offset;
        const A total = reduce_terms<SumOp, T, A>(inner, base, 0, inner.numel, Term<SumOp>(),
                                                  partial);
        const A centre = total / (A)inner.numel;
        const A squares = reduce_terms<SumOp, T, A>(inner, base, 0, inner.numel,
                                                    Deviation<A>{centre}, partial);
        if (threadIdx.x == 0) out[out_offset] = Arith<T>::store(variance_finish<Std>(squares, dof));
    });
}

// Long rows: the centres come from reduce_chunks_kernel<T, SumOp> and
// reduce_partials_kernel<A, MeanOp> (into centres[o], unrounded); then each (output, chunk)
// task sums its chunk's squared deviations ...
template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
deviation_chunks_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 chunk,
                        rt_int64 chunks, const typename Arith<T>::type* centres,
                        typename Arith<T>::type* partials, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    reduce_chunks<SumOp, T, A>(outer, inner, chunk, chunks, partials, in,
                               [=](rt_int64 o) { return Deviation<A>{centres[o]}; }, partial);
}

// ... and one block per output adds the chunks' sums and finishes.
template <typename T, bool Std>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
variance_partials_kernel(const Geometry<2> outer, rt_int64 chunks, double dof, T* out,
                         const typename Arith<T>::type* partials) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    combine_partials<SumOp>(outer, chunks, partials, partial, [=](rt_int64, rt_int64 at, A acc) {
        out[at] = Arith<T>::store(variance_finish<Std>(acc, dof));
    });
}

// --- argmax, argmin, max.dim, min.dim ----------------------------------------------------------
// Each thread and then the tree combine (value, index) pairs. The chosen element is the first
// NaN when there is one, else the largest (smallest) value, and among equal values (-0.0 and
// +0.0 are equal) the lowest index: NumPy's argmax / argmin, which the reference calls. That
// is a strict order on the pairs (indices are distinct), so the result is the same for any
// order of combining: exact. Index -1 marks "no element yet" (a thread with nothing to take).

// Whether (v, i) is chosen over (w, j).
template <bool Largest, typename A>
__device__ __forceinline__ bool arg_beats(A v, rt_int64 i, A w, rt_int64 j) {
    if (i < 0) return false;
    if (j < 0) return true;
    const bool v_nan = v != v, w_nan = w != w;
    if (v_nan || w_nan) return v_nan && (!w_nan || i < j);
    if (v == w) return i < j;
    return Largest ? v > w : v < w;
}

// The tree of block_reduce over pairs; every thread gets the chosen pair.
template <bool Largest, typename A>
__device__ void block_reduce_arg(A* values, rt_int64* indices, A& value, rt_int64& index) {
    const int t = threadIdx.x;
    values[t] = value;
    indices[t] = index;
    __syncthreads();
#pragma unroll 1
    for (int s = RT_BLOCK_THREADS / 2; s > 0; s >>= 1) {
        if (t < s && arg_beats<Largest>(values[t + s], indices[t + s], values[t], indices[t])) {
            values[t] = values[t + s];
            indices[t] = indices[t + s];
        }
        __syncthreads();
    }
    value = values[0];
    index = indices[0];
    __syncthreads();
}

// The block's chosen pair among the reduced elements [first, last) (index: the position r).
template <typename T, bool Largest, typename A>
__device__ void arg_range(const Geometry<1>& inner, const T* base, rt_int64 first,
                          rt_int64 last, A* values, rt_int64* indices, A& value,
                          rt_int64& index) {
    value = A(0);
    index = -1;
    for (rt_int64 r = first + threadIdx.x; r < last; r += RT_BLOCK_THREADS) {
        rt_int64 at[1];
        element_offsets(inner, r, at);
        const A x = load_as<A>(base[at[0]]);
        if (arg_beats<Largest>(x, r, value, index)) {
            value = x;
            index = r;
        }
    }
    block_reduce_arg<Largest>(values, indices, value, index);
}

// Stores the chosen index at `at`, and for max.dim / min.dim (`values` not null) the chosen
// element itself, copied from the input so that every bit (a NaN's payload too) is the
// reference's. The host launches these kernels only for non-empty reductions (index >= 0).
template <typename T>
__device__ void store_arg(const Geometry<1>& inner, const T* base, rt_int64 index,
                          rt_int64 at, rt_int64* indices, T* values) {
    if (index < 0) return;
    indices[at] = index;
    if (values != 0) {
        rt_int64 element[1];
        element_offsets(inner, index, element);
        values[at] = base[element[0]];
    }
}

// One block per output element. `indices` (int64) and `values` (null for argmax / argmin)
// are new tensors of one shape, so outer's operand 0 strides serve both.
template <typename T, bool Largest>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
arg_reduce_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64* indices,
                  T* values, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A shared_values[RT_BLOCK_THREADS];
    __shared__ rt_int64 shared_indices[RT_BLOCK_THREADS];
    for_each_output(outer, [&](rt_int64, rt_int64 out_offset, rt_int64 in_offset) {
        A value;
        rt_int64 index;
        arg_range<T, Largest>(inner, in + in_offset, 0, inner.numel, shared_values,
                              shared_indices, value, index);
        if (threadIdx.x == 0) store_arg(inner, in + in_offset, index, out_offset, indices, values);
    });
}

// Long reductions: each (output, chunk) task writes its chunk's chosen pair ...
template <typename T, bool Largest>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
arg_chunks_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 chunk,
                  rt_int64 chunks, typename Arith<T>::type* partial_values,
                  rt_int64* partial_indices, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A shared_values[RT_BLOCK_THREADS];
    __shared__ rt_int64 shared_indices[RT_BLOCK_THREADS];
    for_each_chunk(outer, inner, chunk, chunks,
                   [&](rt_int64 task, rt_int64, rt_int64 in_offset, rt_int64 first,
                       rt_int64 last) {
        A value;
        rt_int64 index;
        arg_range<T, Largest>(inner, in + in_offset, first, last, shared_values,
                              shared_indices, value, index);
        if (threadIdx.x == 0) {
            partial_values[task] = value;
            partial_indices[task] = index;
        }
    });
}

// ... and one block per output element chooses among its chunks' pairs.
template <typename T, bool Largest>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
arg_partials_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 chunks,
                    rt_int64* indices, T* values, const typename Arith<T>::type* partial_values,
                    const rt_int64* partial_indices, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A shared_values[RT_BLOCK_THREADS];
    __shared__ rt_int64 shared_indices[RT_BLOCK_THREADS];
    for_each_output(outer, [&](rt_int64 o, rt_int64 out_offset, rt_int64 in_offset) {
        A value = A(0);
        rt_int64 index = -1;
        for (rt_int64 c = threadIdx.x; c < chunks; c += RT_BLOCK_THREADS) {
            const rt_int64 task = o * chunks + c;
            if (arg_beats<Largest>(partial_values[task], partial_indices[task], value, index)) {
                value = partial_values[task];
                index = partial_indices[task];
            }
        }
        block_reduce_arg<Largest>(shared_values, shared_indices, value, index);
        if (threadIdx.x == 0) store_arg(inner, in + in_offset, index, out_offset, indices, values);
    });
}

// --- cumsum -------------------------------------------------------------------------------------
// One thread per row (`rows`: operand 0 the output, operand 1 the input, over every dim but
// the scanned one), adding the row's n elements in index order, as NumPy's add.accumulate
// does: out[0] = x[0] (so -0.0 stays -0.0), out[k] = out[k - 1] + x[k], in A and rounded to
// Out at each store. Bit for bit the reference's; one long row is one thread's work.
template <typename T, typename Op, typename A = typename Arith<T>::type, typename Out = T>
__global__ void __launch_bounds__(256)
cumsum_kernel(const Geometry<2> rows, rt_int64 n, rt_int64 out_step, rt_int64 in_step,
              Out* out, const T* in) {
    RT_GRID_STRIDE_LOOP(row, rows.numel) {
        rt_int64 offset[2];
        element_offsets(rows, row, offset);
        A acc = load_as<A>(in[offset[1]]);
        out[offset[0]] = Arith<Out>::store(acc);
        for (rt_int64 k = 1; k < n; ++k) {
            acc = Op::combine(acc, load_as<A>(in[offset[1] + k * in_step]));
            out[offset[0] + k * out_step] = Arith<Out>::store(acc);
        }
    }
}
