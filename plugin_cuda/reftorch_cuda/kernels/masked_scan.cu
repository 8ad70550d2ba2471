// masked_select and masked_scatter: the true positions of a (broadcast) bool mask, numbered
// in row-major order by a prefix count. Compiled after common.cuh and index.cu (whose error
// record reports a masked_scatter source that runs out).
//
// Every kernel walks the broadcast positions p in [0, g.numel) of a 3-operand geometry
// (out, x, mask; operand 0 is the walk's own contiguous layout for masked_select). The
// positions are cut into chunks of `chunk` consecutive positions (a multiple of
// RT_BLOCK_THREADS); in a chunk, thread t owns the `chunk / RT_BLOCK_THREADS` consecutive
// positions from chunk start + t * items. Three launches:
//   1. mask_count_kernel       counts[c] = true positions of chunk c
//   2. chunk_offsets_kernel    counts[c] becomes the true positions before chunk c (an
//                              exclusive prefix sum, one block), counts[chunks] the total
//   3. masked_select_kernel / masked_scatter_kernel: each thread counts its positions' trues,
//      an exclusive prefix over the block's threads gives its first rank, and it walks its
//      positions in order: the k-th true position overall is element k of the selection.
// Counts are integers, so the result is exact and the same for any launch. Every index is
// 64-bit; each block loops over the chunks beyond the grid.
//
// Name expressions: "mask_count_kernel<bool>", "chunk_offsets_kernel<bool>",
// "masked_select_kernel<unsigned int>" and "masked_scatter_kernel<unsigned int>" (by element
// width: W is one of common.cuh's word types).

// The positions thread threadIdx.x owns in chunk c: [first, last).
__device__ __forceinline__ void rt_thread_positions(rt_int64 c, rt_int64 chunk,
                                                    rt_int64 numel, rt_int64& first,
                                                    rt_int64& last) {
    const rt_int64 items = chunk / RT_BLOCK_THREADS;
    first = c * chunk + (rt_int64)threadIdx.x * items;
    last = first + items < numel ? first + items : numel;
}

// The true mask entries at positions [first, last).
__device__ __forceinline__ rt_int64 rt_count_trues(const Geometry<3>& g, const bool* mask,
                                                   rt_int64 first, rt_int64 last) {
    rt_int64 count = 0;
#pragma unroll 1
    for (rt_int64 p = first; p < last; ++p) {
        rt_int64 offset[3];
        element_offsets(g, p, offset);
        count += mask[offset[2]] ? 1 : 0;
    }
    return count;
}

// Every thread's `value`, summed over the threads before it (thread order). `partial` is the
// block's shared array of RT_BLOCK_THREADS elements, free again when this returns.
__device__ rt_int64 rt_block_exclusive_sum(rt_int64* partial, rt_int64 value) {
    partial[threadIdx.x] = value;
    __syncthreads();
    if (threadIdx.x == 0) {
        rt_int64 running = 0;
        for (int t = 0; t < RT_BLOCK_THREADS; ++t) {
            const rt_int64 v = partial[t];
            partial[t] = running;
            running += v;
        }
    }
    __syncthreads();
    const rt_int64 result = partial[threadIdx.x];
    __syncthreads();  // every thread has read its entry before anyone writes partial again
    return result;
}

// B is unused (NVRTC name expressions name template instantiations).
template <typename B>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
mask_count_kernel(const Geometry<3> g, rt_int64 chunk, rt_int64 chunks, rt_int64* counts,
                  const B* mask) {
    __shared__ rt_int64 partial[RT_BLOCK_THREADS];
    for (rt_int64 c = blockIdx.x; c < chunks; c += gridDim.x) {
        rt_int64 first, last;
        rt_thread_positions(c, chunk, g.numel, first, last);
        const rt_int64 total = block_reduce<SumOp>(partial, rt_count_trues(g, mask, first, last));
        if (threadIdx.x == 0) counts[c] = total;
    }
}

// One block: thread t takes the chunks [t * span, (t + 1) * span), sums them, and after the
// block's exclusive sum rewrites each with the trues before it. counts has chunks + 1 entries.
template <typename B>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
chunk_offsets_kernel(rt_int64 chunks, rt_int64* counts) {
    __shared__ rt_int64 partial[RT_BLOCK_THREADS];
    const rt_int64 span = (chunks + RT_BLOCK_THREADS - 1) / RT_BLOCK_THREADS;
    const rt_int64 first = (rt_int64)threadIdx.x * span;
    const rt_int64 last = first + span < chunks ? first + span : chunks;
    rt_int64 total = 0;
#pragma unroll 1
    for (rt_int64 c = first; c < last; ++c) total += counts[c];
    rt_int64 running = rt_block_exclusive_sum(partial, total);
#pragma unroll 1
    for (rt_int64 c = first; c < last; ++c) {
        const rt_int64 v = counts[c];
        counts[c] = running;
        running += v;
    }
    if (threadIdx.x == RT_BLOCK_THREADS - 1) counts[chunks] = running;  // the last thread
}                                                                       // ends at the total

// The walk of masked_select and masked_scatter: each of the block's chunks, each thread's
// positions p in order, numbered: visit(p, offset, k) where k is the rank in the selection of
// the next true position (the visitor advances it past a true one).
template <typename Visit>
__device__ __forceinline__ void for_each_ranked_position(const Geometry<3>& g, rt_int64 chunk,
                                                         rt_int64 chunks,
                                                         const rt_int64* offsets,
                                                         const bool* mask, rt_int64* partial,
                                                         Visit visit) {
    for (rt_int64 c = blockIdx.x; c < chunks; c += gridDim.x) {
        rt_int64 first, last;
        rt_thread_positions(c, chunk, g.numel, first, last);
        rt_int64 k = offsets[c] + rt_block_exclusive_sum(partial,
                                                         rt_count_trues(g, mask, first, last));
#pragma unroll 1
        for (rt_int64 p = first; p < last; ++p) {
            rt_int64 offset[3];
            element_offsets(g, p, offset);
            visit(p, offset, k);
        }
    }
}

// out[k] = x at the k-th true position; out has counts[chunks] elements.
template <typename W>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
masked_select_kernel(const Geometry<3> g, rt_int64 chunk, rt_int64 chunks,
                     const rt_int64* offsets, W* out, const W* x, const bool* mask) {
    __shared__ rt_int64 partial[RT_BLOCK_THREADS];
    for_each_ranked_position(g, chunk, chunks, offsets, mask, partial,
                             [=](rt_int64, const rt_int64* offset, rt_int64& k) {
        if (mask[offset[2]]) out[k++] = x[offset[1]];
    });
}

// out (new, of the broadcast shape) = x, with source[k] at the k-th true position. A k at or
// past source_numel is never read: that position keeps x's element and the first such
// position is recorded (check.size is source_numel) for the host to raise at the next
// synchronisation.
template <typename W>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
masked_scatter_kernel(const Geometry<3> g, rt_int64 chunk, rt_int64 chunks,
                      const rt_int64* offsets, W* out, const W* x, const bool* mask,
                      const W* source, const IndexCheck check) {
    __shared__ rt_int64 partial[RT_BLOCK_THREADS];
    for_each_ranked_position(g, chunk, chunks, offsets, mask, partial,
                             [&](rt_int64 p, const rt_int64* offset, rt_int64& k) {
        rt_int64 taken;
        if (mask[offset[2]] && checked_index(check, (unsigned long long)p, k++, taken))
            out[offset[0]] = source[taken];
        else
            out[offset[0]] = x[offset[1]];
    });
}
