// Reductions over any set of dims, compiled after common.cuh:
//   sum, mean, amax, amin (the four float types), sum of bool and integer tensors into
//   long long, the vector norms p = 1, 2, inf, -inf (NormOneOp ...), var and std (two passes:
//   the mean, then the squared deviations), argmax / argmin / max.dim / min.dim (value and
//   index pairs), and cumsum (in index order, per row or per fixed chunk of a row).
//
// Three paths, chosen by the host (ops_reduce.py) from the shapes and strides alone:
//   * the block path: one block computes one output element (a grid-stride loop over output
//     elements covers any count). Its RT_BLOCK_THREADS threads each combine a strided share of
//     the reduced elements in order (thread t takes elements t, t + RT_BLOCK_THREADS, ...), then
//     a tree in shared memory halves the partial results: partial[t] = partial[t] +
//     partial[t + s] for s = 128, 64, ..., 1. Reductions longer than a chunk run in two
//     launches (reduce_chunks_kernel, then reduce_partials_kernel): each output's elements cut
//     into fixed chunks, one block per chunk, then one block per output over the chunks'
//     results. Every block kernel here and in reduce_more.cu takes that shape from the same
//     helpers (reduce_terms, for_each_output, for_each_chunk, reduce_chunks, combine_partials),
//     so the block order is written once.
//   * the column path (column_reduce_kernel, column_chunks_kernel): one thread per output
//     element, in index order, for reductions that keep the input's densest dim; chunked into
//     (chunk, output) tasks when the outputs are few.
//   * the row path (row_reduce_kernel): a group of up to 32 lanes per output element, for
//     short reductions along the densest dim.
// No atomics: the order of every addition is fixed by the path and its split, which depend on
// the shape alone, so a result does not depend on the grid or on the GPU. The orders differ
// from NumPy's pairwise sum, so sums agree with the reference within rounding, not bit for bit.
//
// Accumulation is in the computation type: double for double, float for float and the 16-bit
// types (rounded once at the end), as the reference and PyTorch accumulate; long long for bool
// and integer sums.
//
// Name expressions: "reduce_kernel<float, SumOp>", "reduce_chunks_kernel<double, AmaxOp>",
// "reduce_kernel<int, WrappingSumOp, long long, long long>", "arg_reduce_kernel<float, true>",
// "variance_kernel<double, false>", "cumsum_kernel<rt_float16, SumOp>",
// "column_reduce_kernel<float, SumOp, float, float>", "column_chunks_kernel<float, SumOp, float>",
// "row_reduce_kernel<int, WrappingSumOp, long long, long long>",
// "cumsum_chunk_sums_kernel<float, SumOp, float>", "cumsum_carries_kernel<float, SumOp>".

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

// One thread's share of a reduction: Op's identity combined with term(x) of the reduced
// elements start, start + step, ... below last, in that order (of one output element, whose
// input offset is `base`). Every path's threads walk their elements so.
template <typename Op, typename T, typename A, typename TermFn>
__device__ A combine_strided(const Geometry<1>& inner, const T* base, rt_int64 start,
                             rt_int64 last, rt_int64 step, TermFn term) {
    A acc = Op::template identity<A>();
    for (rt_int64 r = start; r < last; r += step) {
        rt_int64 at[1];
        element_offsets(inner, r, at);
        acc = Op::combine(acc, term(load_as<A>(base[at[0]])));
    }
    return acc;
}

// The block's combination by Op of term(x) over the reduced elements [first, last) of one
// output element: thread t takes first + t, first + t + RT_BLOCK_THREADS, ... in turn, then
// block_reduce's tree. Every thread gets the result.
template <typename Op, typename T, typename A, typename TermFn>
__device__ A reduce_terms(const Geometry<1>& inner, const T* base, rt_int64 first,
                          rt_int64 last, TermFn term, A* partial) {
    return block_reduce<Op>(partial, combine_strided<Op, T, A>(
        inner, base, first + threadIdx.x, last, RT_BLOCK_THREADS, term));
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

// --- the column path: one thread per output element ----------------------------------------------
// For a reduction that keeps the input's densest dim (x.sum(0) of a row-major matrix, NCHW
// summed over N and H): thread o of the grid takes output o, so a warp's 32 loads of one
// reduced position are 32 neighbouring addresses, and each thread combines its elements in
// index order, from Op's identity. When the outputs are too few to fill the GPU the host cuts
// the reduced elements into `chunks` fixed chunks of `chunk` (a split fixed by the shape) and
// launches one thread per (chunk, output) task, task = c * outer.numel + o (neighbouring
// threads still on neighbouring outputs); a second column pass combines each output's chunk
// results in chunk order.

// body(task, o, input offset, first, last) for every (chunk, output) task of the grid, with
// [first, last) the chunk's reduced elements (chunks = 1, chunk = n: the whole reduction).
template <typename Body>
__device__ void for_each_column_chunk(const Geometry<2>& outer, const Geometry<1>& inner,
                                      rt_int64 chunk, rt_int64 chunks, Body body) {
    RT_GRID_STRIDE_LOOP(task, outer.numel * chunks) {
        const rt_int64 c = task / outer.numel, o = task - c * outer.numel;
        rt_int64 offset[2];
        element_offsets(outer, o, offset);
        const rt_int64 first = c * chunk;
        const rt_int64 last = first + chunk < inner.numel ? first + chunk : inner.numel;
        body(task, o, offset[0], offset[1], first, last);
    }
}

// The one-pass column reduction, storing Op::finish(combination, count) (`count`: the
// reduced element count, for the mean). Also the second pass of a chunked one: then `in` is
// the partials, outer's input strides dense and inner the (chunks,) column of stride
// outer.numel, and Op the partials' op (terms are already taken: SumRootOp for NormTwoOp).
template <typename T, typename Op, typename A, typename Out>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
column_reduce_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 count, Out* out,
                     const T* in) {
    for_each_column_chunk(outer, inner, inner.numel, 1, [&](rt_int64, rt_int64, rt_int64 at,
                                                            rt_int64 in_offset, rt_int64,
                                                            rt_int64 last) {
        const A acc = combine_strided<Op, T, A>(inner, in + in_offset, 0, last, 1, Term<Op>());
        out[at] = Arith<Out>::store(Op::finish(acc, count));
    });
}

// The first pass of a chunked column reduction: partials[task], unfinished, in A.
template <typename T, typename Op, typename A>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
column_chunks_kernel(const Geometry<2> outer, const Geometry<1> inner, rt_int64 chunk,
                     rt_int64 chunks, A* partials, const T* in) {
    for_each_column_chunk(outer, inner, chunk, chunks, [&](rt_int64 task, rt_int64, rt_int64,
                                                           rt_int64 in_offset, rt_int64 first,
                                                           rt_int64 last) {
        partials[task] = combine_strided<Op, T, A>(inner, in + in_offset, first, last, 1,
                                                   Term<Op>());
    });
}

// NormTwoOp's finish without its term: the second pass of a chunked column 2-norm.
struct SumRootOp : NormTwoOp {};   // Term<SumRootOp> is the element itself

// --- the row path: a group of `lanes` threads per output element ---------------------------------
// For short reductions along the input's densest dim (a million rows of 32): `lanes` (a power
// of two up to 32, the host's choice from the reduced element count) neighbouring threads of
// a warp share one output element. Lane l takes elements l, l + lanes, ... in turn, then the
// lanes combine in block_reduce's tree shape: value[l] = combine(value[l], value[l + s]) for
// s = lanes / 2, ..., 1, by warp shuffles. The order depends on `lanes` alone.

// The group's combination, in lane 0 (the other lanes hold values nobody reads). Every lane of
// the warp must call it (the shuffles take the full mask).
template <typename Op, typename A>
__device__ A lanes_reduce(A value, int lanes) {
#pragma unroll 1
    for (int s = lanes / 2; s > 0; s >>= 1)
        value = Op::combine(value, __shfl_down_sync(0xffffffffu, value, s, lanes));
    return value;
}

template <typename T, typename Op, typename A, typename Out>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
row_reduce_kernel(const Geometry<2> outer, const Geometry<1> inner, int lanes, Out* out,
                  const T* in) {
    const int per_block = RT_BLOCK_THREADS / lanes, lane = threadIdx.x % lanes;
    // the loop's bound depends on the block alone, so every lane of a warp reaches the shuffles
    for (rt_int64 first = (rt_int64)blockIdx.x * per_block; first < outer.numel;
         first += (rt_int64)gridDim.x * per_block) {
        const rt_int64 o = first + threadIdx.x / lanes;
        const bool active = o < outer.numel;
        rt_int64 offset[2] = {0, 0};
        A acc = Op::template identity<A>();
        if (active) {
            element_offsets(outer, o, offset);
            acc = combine_strided<Op, T, A>(inner, in + offset[1], lane, inner.numel, lanes,
                                            Term<Op>());
        }
        acc = lanes_reduce<Op>(acc, lanes);
        if (active && lane == 0) out[offset[0]] = Arith<Out>::store(Op::finish(acc, inner.numel));
    }
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
// `rows` walks the rows (operand 0 the output, operand 1 the input, over every dim but the
// scanned one); a row has n elements, out_step / in_step apart. Each row is cut into `chunks`
// chunks of `chunk` elements (the last one shorter; chunks = 1: the whole row), one thread per
// (row, chunk) task, task = row * chunks + c. A thread adds its chunk's elements in index
// order, in A, rounded to Out at each store, starting from its first element (chunk 0) or from
// the chunk's carry plus its first element (chunk c > 0): out[k] = out[k - 1] + x[k]. With one
// chunk that is NumPy's add.accumulate, bit for bit (out[0] = x[0], so -0.0 stays -0.0).
// With more (few long rows, the host's rule), the carries come first, from two launches:
// cumsum_chunk_sums_kernel, then cumsum_carries_kernel. The order depends on the shape alone.

// The walker of the (row, chunk) tasks: body(task, c, out offset, in offset, first, last).
template <typename Body>
__device__ void for_each_scan_chunk(const Geometry<2>& rows, rt_int64 n, rt_int64 chunk,
                                    rt_int64 chunks, Body body) {
    RT_GRID_STRIDE_LOOP(task, rows.numel * chunks) {
        const rt_int64 row = task / chunks, c = task - row * chunks;
        rt_int64 offset[2];
        element_offsets(rows, row, offset);
        const rt_int64 first = c * chunk;
        body(task, c, offset[0], offset[1], first, first + chunk < n ? first + chunk : n);
    }
}

// carries: null for one chunk, else carries[task] (chunk c > 0) from cumsum_carries_kernel.
template <typename T, typename Op, typename A = typename Arith<T>::type, typename Out = T>
__global__ void __launch_bounds__(256)
cumsum_kernel(const Geometry<2> rows, rt_int64 n, rt_int64 out_step, rt_int64 in_step,
              rt_int64 chunk, rt_int64 chunks, const A* carries, Out* out, const T* in) {
    for_each_scan_chunk(rows, n, chunk, chunks, [&](rt_int64 task, rt_int64 c, rt_int64 out_at,
                                                    rt_int64 in_at, rt_int64 first,
                                                    rt_int64 last) {
        A acc = load_as<A>(in[in_at + first * in_step]);
        if (c > 0) acc = Op::combine(carries[task], acc);
        out[out_at + first * out_step] = Arith<Out>::store(acc);
        for (rt_int64 k = first + 1; k < last; ++k) {
            acc = Op::combine(acc, load_as<A>(in[in_at + k * in_step]));
            out[out_at + k * out_step] = Arith<Out>::store(acc);
        }
    });
}

// First launch of a chunked scan: sums[task], each chunk's elements added in index order from
// its first element, in A.
template <typename T, typename Op, typename A>
__global__ void __launch_bounds__(256)
cumsum_chunk_sums_kernel(const Geometry<2> rows, rt_int64 n, rt_int64 in_step, rt_int64 chunk,
                         rt_int64 chunks, A* sums, const T* in) {
    for_each_scan_chunk(rows, n, chunk, chunks, [&](rt_int64 task, rt_int64, rt_int64,
                                                    rt_int64 in_at, rt_int64 first,
                                                    rt_int64 last) {
        A acc = load_as<A>(in[in_at + first * in_step]);
        for (rt_int64 k = first + 1; k < last; ++k)
            acc = Op::combine(acc, load_as<A>(in[in_at + k * in_step]));
        sums[task] = acc;
    });
}

// Second launch: one block per row turns its chunk sums s[0..chunks) into carries, in place:
// carry[c] = s[0] + ... + s[c - 1] for c > 0 (carry[0] is never read). Thread t takes the
// segment [t * segment, (t + 1) * segment) of the sums, segment = ceil(chunks / 256): its
// total in index order; thread 0 adds the totals before each segment in thread order; then
// each thread walks its segment from that prefix, writing each carry before adding its sum.
// Every partial sum starts from its first term (no identity), so a -0.0 carry stays -0.0.
template <typename A, typename Op>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
cumsum_carries_kernel(rt_int64 rows, rt_int64 chunks, A* sums) {
    __shared__ A prefix[RT_BLOCK_THREADS];
    const int t = threadIdx.x;
    const rt_int64 segment = (chunks + RT_BLOCK_THREADS - 1) / RT_BLOCK_THREADS;
    const rt_int64 begin = t * segment;
    const rt_int64 end = begin + segment < chunks ? begin + segment : chunks;
    for (rt_int64 row = blockIdx.x; row < rows; row += gridDim.x) {
        A* s = sums + row * chunks;
        A total = begin < end ? s[begin] : A(0);
        for (rt_int64 c = begin + 1; c < end; ++c) total = Op::combine(total, s[c]);
        prefix[t] = total;
        __syncthreads();
        if (t == 0) {   // exclusive prefixes of the non-empty segments' totals, in order
            A running = prefix[0];
            for (int u = 1; u < RT_BLOCK_THREADS && u * segment < chunks; ++u) {
                const A next = prefix[u];
                prefix[u] = running;
                running = Op::combine(running, next);
            }
        }
        __syncthreads();
        if (begin < end) {
            A running = prefix[t];   // thread 0's is never used: chunk 0 has no carry,
                                     // and its sum is left in place
            for (rt_int64 c = begin; c < end; ++c) {
                const A sum = s[c];
                if (c > 0) s[c] = running;
                running = c == 0 ? sum : Op::combine(running, sum);
            }
        }
        __syncthreads();   // prefix is written again for the next row
    }
}
