// sort, argsort, topk and kthvalue along one dim: a stable sort of each row, of which the
// kernels write a run of ranks. Compiled after common.cuh.
//
// Rows are sorted as (key, position) pairs:
//
// * key: the element as an unsigned integer in the reference's order. Floats: the IEEE bits
//   with negatives inverted and positives' sign bit set; every NaN gets the largest key (above
//   +inf) and -0.0 gets +0.0's key (the two tie). 16-bit floats widen exactly to float first.
//   Signed integers: the bits with the sign bit flipped. A descending sort inverts the key
//   (largest first, NaN first) but not the position.
// * position: the element's index in the row, which breaks ties. Every pair is distinct, so
//   the sorted order is unique: stable (ties in index order, in both directions, as the
//   reference's sort) and independent of block sizes, of the grid and of the GPU.
//
// Rows of up to RT_SORT_TILE elements: sort_rows_kernel, one block per row (a row: the
// elements along the dim for one position of the other dims; `rows` walks those positions,
// operands 0..2: values out, indices out, input). A bitonic network sorts the row in shared
// memory, padded to `padded` entries (a power of two) with sentinels (largest key, positions
// n..padded-1), which sort after every real entry. Shared memory (dynamic): padded keys, then
// padded 16-bit positions; at most 40 KiB, within the 48 KiB a launch may use without opting
// in. The sorted entries' ranks first..first+count-1 are written: their positions (int64)
// and, unless `values` is null (argsort), the input elements at those positions, read again
// from the input so their bits (NaN payloads, -0.0) are kept. sort_rows_kernel and
// write_ranks_kernel write each position as it is, or mapped through `index_map` when the
// row they sorted is select_rows_kernel's selection (see there).
//
// Longer rows (below 2^31 elements), in global scratch runs (keys, and int positions in the
// row; row r's n pairs at r * n), in passes: sort_tiles_kernel sorts each tile of
// RT_SORT_TILE elements as above into a run; merge_runs_kernel merges pairs of runs (width
// w -> 2w) until one run is the row; write_ranks_kernel writes the ranks asked for.
//
// topk of a few elements and kthvalue of longer rows: select_rows_kernel finds them by a
// radix select without sorting the row, then (topk) only they are sorted (at the end).
//
// Name expressions: "sort_rows_kernel<float>", "sort_tiles_kernel<float>",
// "write_ranks_kernel<float>", "select_rows_kernel<float>" (and double, rt_float16,
// rt_bfloat16, long long, int, short, signed char, unsigned char; bool is sorted as unsigned
// char, its 0/1 bytes);
// "merge_runs_kernel<unsigned int>" (keys of 32-bit and narrower types) and
// "merge_runs_kernel<unsigned long long>" (double, long long).

#define RT_SORT_TILE 4096   // the longest row one block sorts in shared memory

// --- order-preserving keys ---------------------------------------------------------------------

__device__ __forceinline__ unsigned int sort_key(float v) {
    if (v != v) return 0xffffffffu;              // every NaN: one key, above +inf
    unsigned int bits = __float_as_uint(v);
    if (bits == 0x80000000u) bits = 0u;          // -0.0 ties with +0.0
    return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ unsigned long long sort_key(double v) {
    if (v != v) return 0xffffffffffffffffull;
    unsigned long long bits = (unsigned long long)__double_as_longlong(v);
    const unsigned long long sign = 0x8000000000000000ull;
    if (bits == sign) bits = 0ull;
    return (bits & sign) ? ~bits : (bits | sign);
}

__device__ __forceinline__ unsigned int sort_key(rt_float16 v) { return sort_key(to_float(v)); }
__device__ __forceinline__ unsigned int sort_key(rt_bfloat16 v) { return sort_key(to_float(v)); }
__device__ __forceinline__ unsigned int sort_key(unsigned char v) { return v; }
// Narrow signed types sign-extend to int first, so one flip of bit 31 orders them all.
__device__ __forceinline__ unsigned int sort_key(signed char v) {
    return (unsigned int)(int)v ^ 0x80000000u;
}
__device__ __forceinline__ unsigned int sort_key(short v) {
    return (unsigned int)(int)v ^ 0x80000000u;
}
__device__ __forceinline__ unsigned int sort_key(int v) { return (unsigned int)v ^ 0x80000000u; }
__device__ __forceinline__ unsigned long long sort_key(long long v) {
    return (unsigned long long)v ^ 0x8000000000000000ull;
}

template <typename T> struct SortKey { typedef unsigned int type; };
template <> struct SortKey<double> { typedef unsigned long long type; };
template <> struct SortKey<long long> { typedef unsigned long long type; };

// --- the bitonic network -----------------------------------------------------------------------

// Whether entry a belongs after entry b (keys, then positions; no two entries are equal).
template <typename Key>
__device__ __forceinline__ bool sorts_after(const Key* keys, const unsigned short* positions,
                                            int a, int b) {
    return keys[a] > keys[b] || (keys[a] == keys[b] && positions[a] > positions[b]);
}

// Sorts `padded` (a power of two) entries ascending. Each step pairs entry `low` with
// `low + stride`; a pair inside a `size`-long run whose start has bit `size` clear is put in
// ascending order, else descending, which merges the bitonic runs; the last size is the
// whole array, all ascending. Every thread of the block takes part (there are syncs).
template <typename Key>
__device__ void bitonic_sort(Key* keys, unsigned short* positions, int padded) {
#pragma unroll 1
    for (int size = 2; size <= padded; size <<= 1) {
#pragma unroll 1
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int t = threadIdx.x; t < padded / 2; t += blockDim.x) {
                const int low = 2 * t - (t & (stride - 1));
                const int high = low + stride;
                const bool ascending = (low & size) == 0;
                if (sorts_after(keys, positions, low, high) == ascending) {
                    const Key key = keys[low];
                    keys[low] = keys[high];
                    keys[high] = key;
                    const unsigned short position = positions[low];
                    positions[low] = positions[high];
                    positions[high] = position;
                }
            }
            __syncthreads();
        }
    }
}

// Loads `count` (<= padded) elements of x (stride `step`) as (key ^ flip, index) pairs into
// shared memory, pads them with sentinels and sorts them.
template <typename T, typename Key>
__device__ void sort_in_shared(const T* x, rt_int64 step, int count, int padded, Key flip,
                               Key* keys, unsigned short* positions) {
    for (int i = threadIdx.x; i < padded; i += blockDim.x) {
        keys[i] = i < count ? (Key)(sort_key(x[i * step]) ^ flip) : ~Key(0);
        positions[i] = (unsigned short)i;
    }
    __syncthreads();
    bitonic_sort(keys, positions, padded);
}

// The index written for the element at `position` of a row: the position itself, or, when the
// input is select_rows_kernel's selected elements, the index it wrote for that element
// (`index_map`, laid out as the input: the row at `row_offset`, stride `step`).
__device__ __forceinline__ rt_int64 mapped_index(const rt_int64* index_map, rt_int64 row_offset,
                                                 rt_int64 step, rt_int64 position) {
    return index_map == 0 ? position : index_map[row_offset + position * step];
}

// --- rows of up to RT_SORT_TILE elements --------------------------------------------------------

// n: row length (1..RT_SORT_TILE); padded: the power of two >= n the network sorts;
// first, count: the ranks written (first + count <= n); descending: nonzero for largest first;
// *_step: each operand's stride along the dim. values may be null (argsort).
template <typename T>
__global__ void sort_rows_kernel(const Geometry<3> rows, rt_int64 n, rt_int64 first,
                                 rt_int64 count, int padded, int descending,
                                 rt_int64 values_step, rt_int64 indices_step, rt_int64 in_step,
                                 T* values, rt_int64* indices, const T* in,
                                 const rt_int64* index_map) {
    typedef typename SortKey<T>::type Key;
    extern __shared__ unsigned long long sort_shared[];  // 8-byte aligned for either key
    Key* keys = reinterpret_cast<Key*>(sort_shared);
    unsigned short* positions = reinterpret_cast<unsigned short*>(keys + padded);
    const Key flip = descending ? ~Key(0) : Key(0);
    for (rt_int64 row = blockIdx.x; row < rows.numel; row += gridDim.x) {
        rt_int64 offset[3];
        element_offsets(rows, row, offset);
        const T* x = in + offset[2];
        sort_in_shared(x, in_step, (int)n, padded, flip, keys, positions);
        for (int r = threadIdx.x; r < count; r += blockDim.x) {
            const int position = positions[first + r];
            indices[offset[1] + r * indices_step] = mapped_index(index_map, offset[2], in_step,
                                                                 position);
            if (values != 0) values[offset[0] + r * values_step] = x[position * in_step];
        }
        __syncthreads();  // every thread is done reading before the next row is loaded
    }
}

// --- longer rows: sorted tiles, merged in passes ----------------------------------------------

// Pass 1: block b sorts tile (b mod tiles) of row (b / tiles): RT_SORT_TILE elements (a row's
// last tile may be shorter; the network always sorts a whole padded tile) into the run at
// row * n + tile start, positions counted from the row's start.
template <typename T>
__global__ void sort_tiles_kernel(const Geometry<3> rows, rt_int64 n, int descending,
                                  rt_int64 in_step, const T* in,
                                  typename SortKey<T>::type* run_keys, int* run_positions) {
    typedef typename SortKey<T>::type Key;
    extern __shared__ unsigned long long sort_shared[];
    Key* keys = reinterpret_cast<Key*>(sort_shared);
    unsigned short* positions = reinterpret_cast<unsigned short*>(keys + RT_SORT_TILE);
    const Key flip = descending ? ~Key(0) : Key(0);
    const rt_int64 tiles = (n + RT_SORT_TILE - 1) / RT_SORT_TILE;
    for (rt_int64 block = blockIdx.x; block < rows.numel * tiles; block += gridDim.x) {
        const rt_int64 row = block / tiles;
        const rt_int64 start = (block - row * tiles) * RT_SORT_TILE;
        const int count = (int)(n - start < RT_SORT_TILE ? n - start : RT_SORT_TILE);
        rt_int64 offset[3];
        element_offsets(rows, row, offset);
        sort_in_shared(in + offset[2] + start * in_step, in_step, count, RT_SORT_TILE, flip,
                       keys, positions);
        for (int r = threadIdx.x; r < count; r += blockDim.x) {
            run_keys[row * n + start + r] = keys[r];
            run_positions[row * n + start + r] = (int)(start + positions[r]);
        }
        __syncthreads();
    }
}

// How many pairs of the sorted run [0, length) come before (key, position): a binary search.
template <typename Key>
__device__ rt_int64 rank_in_run(const Key* keys, const int* positions, rt_int64 length,
                                Key key, int position) {
    rt_int64 low = 0, high = length;
    while (low < high) {
        const rt_int64 mid = low + (high - low) / 2;
        const bool before = keys[mid] < key || (keys[mid] == key && positions[mid] < position);
        if (before) low = mid + 1;
        else high = mid;
    }
    return low;
}

// Passes 2...: the runs of `width` pairs of each row (the last may be shorter) are merged two
// by two. Each pair moves to its index in its run plus the number of pairs of the other run
// that come before it; no two pairs are equal, so the destinations are a permutation of the
// two runs' places (a run without a partner stays where it is). One thread per pair.
template <typename Key>
__global__ void merge_runs_kernel(rt_int64 total, rt_int64 n, rt_int64 width,
                                  const Key* keys_in, const int* positions_in, Key* keys_out,
                                  int* positions_out) {
    RT_GRID_STRIDE_LOOP(e, total) {
        const rt_int64 row_start = e / n * n;
        const rt_int64 i = e - row_start;
        const rt_int64 first_start = i / (2 * width) * (2 * width);
        const rt_int64 second_start = first_start + width < n ? first_start + width : n;
        const rt_int64 end = first_start + 2 * width < n ? first_start + 2 * width : n;
        const Key key = keys_in[e];
        const int position = positions_in[e];
        const rt_int64 other = i < second_start ? second_start : first_start;
        const rt_int64 other_length = i < second_start ? end - second_start
                                                       : second_start - first_start;
        const rt_int64 own_index = i < second_start ? i - first_start : i - second_start;
        const rt_int64 destination = first_start + own_index
            + rank_in_run(keys_in + row_start + other, positions_in + row_start + other,
                          other_length, key, position);
        keys_out[row_start + destination] = key;
        positions_out[row_start + destination] = position;
    }
}

// Last: ranks first..first+count-1 of each sorted row (`run_positions`, n per row), written as
// sort_rows_kernel writes them. One thread per written rank.
template <typename T>
__global__ void write_ranks_kernel(const Geometry<3> rows, rt_int64 n, rt_int64 first,
                                   rt_int64 count, rt_int64 values_step, rt_int64 indices_step,
                                   rt_int64 in_step, const int* run_positions, T* values,
                                   rt_int64* indices, const T* in, const rt_int64* index_map) {
    RT_GRID_STRIDE_LOOP(e, rows.numel * count) {
        const rt_int64 row = e / count;
        const rt_int64 r = e - row * count;
        rt_int64 offset[3];
        element_offsets(rows, row, offset);
        const rt_int64 position = run_positions[row * n + first + r];
        indices[offset[1] + r * indices_step] = mapped_index(index_map, offset[2], in_step,
                                                             position);
        if (values != 0) values[offset[0] + r * values_step] = in[offset[2] + position * in_step];
    }
}

// --- topk and kthvalue by selection -----------------------------------------------------------
//
// select_rows_kernel: the ranks [first, last] (last = first + count - 1; first == 0, topk, or
// count == 1, kthvalue: the host launches nothing else) of each row's stable order, without
// sorting the row. One block per row (RT_SELECT_THREADS threads), in three steps:
//
// 1. Radix select: the key of rank `last`, one 8-bit digit per pass from the most significant.
//    A pass counts, in a 256-bin shared histogram, the digit of every element whose higher
//    digits equal the ones chosen so far; the chosen digit is the bin in which `rank` (the
//    rank still to find among those elements) falls, and the rank becomes the rank within
//    that bin. After the last pass `target` is the key and `rank` is the target's rank among
//    the elements of that key (its tie number: ties are ranked in index order).
// 2. The selected elements: every element with a key below the target when first == 0 (there
//    are last - rank of them, all within the ranks asked for), and the ties numbered
//    max(rank - count + 1, 0)..rank. That is `count` elements, exactly the ranks asked for.
// 3. They are written in index order to slots 0..count-1 (values from the input, so their
//    bits are kept, and int64 indices). Slots come from block prefix sums over slices of the
//    row in index order; a slice holding no key below the target and no tie is skipped, and
//    the walk ends once `count` elements are written.
//
// Histogram counts are integers added with shared-memory atomics (their sum does not depend
// on the order), and the slots follow index order, so the result depends on the row alone.
// With count == 1 that one element is the answer; with more, the host sorts the written
// elements by sort_rows_kernel or the long-row passes (their positions in the written order
// are in index order, so ties sort as in the row) and maps the positions back through the
// written indices (`index_map`).
//
// Counts are 32-bit (the host sends rows of fewer than 2^31 elements), element indices and
// offsets 64-bit. Name expressions: "select_rows_kernel<float>" and the other storage types.

#define RT_SELECT_THREADS 1024   // one block per row, a multiple of 32
#define RT_SELECT_LOADS 8        // elements each thread loads at once (loads in flight)
#define RT_RADIX_BINS 256

// Every thread's `value`, summed over the threads before it (thread order); `total` gets the
// sum over the block. `warp_sums`: shared, RT_SELECT_THREADS / 32 entries. Every thread of the
// block must call it.
__device__ unsigned int select_exclusive_sum(unsigned int value, unsigned int* warp_sums,
                                             unsigned int* total) {
    const unsigned int all_lanes = 0xffffffffu;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    unsigned int inclusive = value;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const unsigned int below = __shfl_up_sync(all_lanes, inclusive, d);
        if (lane >= d) inclusive += below;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        unsigned int sum = lane < warps ? warp_sums[lane] : 0u;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const unsigned int below = __shfl_up_sync(all_lanes, sum, d);
            if (lane >= d) sum += below;
        }
        if (lane < warps) warp_sums[lane] = sum;      // inclusive sums of the warps
    }
    __syncthreads();
    const unsigned int before = (warp ? warp_sums[warp - 1] : 0u) + inclusive - value;
    *total = warp_sums[warps - 1];
    __syncthreads();  // every thread has read warp_sums before anyone writes it again
    return before;
}

// Step 1: the key of rank `rank` among the row's n keys (key ^ flip). On return `rank` is
// the target's tie number. Every thread of the block gets the same results.
template <typename T, typename Key>
__device__ Key radix_select(const T* x, rt_int64 step, rt_int64 n, Key flip, unsigned int& rank,
                            unsigned int* histogram, unsigned int* warp_sums,
                            unsigned int* chosen) {
    Key target = 0, decided = 0;          // the digits chosen so far, and their bits
#pragma unroll 1
    for (int shift = 8 * (int)sizeof(Key) - 8; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < RT_RADIX_BINS; b += blockDim.x) histogram[b] = 0u;
        __syncthreads();
#pragma unroll 1
        for (rt_int64 base = 0; base < n; base += (rt_int64)RT_SELECT_LOADS * blockDim.x) {
            Key keys[RT_SELECT_LOADS];
            bool loaded[RT_SELECT_LOADS];
#pragma unroll
            for (int u = 0; u < RT_SELECT_LOADS; ++u) {
                const rt_int64 i = base + (rt_int64)u * blockDim.x + threadIdx.x;
                loaded[u] = i < n;
                keys[u] = loaded[u] ? (Key)(sort_key(x[i * step]) ^ flip) : Key(0);
            }
#pragma unroll
            for (int u = 0; u < RT_SELECT_LOADS; ++u) {
                if (loaded[u] && (keys[u] & decided) == target)
                    atomicAdd(&histogram[(unsigned int)(keys[u] >> shift) & 0xffu], 1u);
            }
        }
        __syncthreads();
        unsigned int total;
        const unsigned int count = threadIdx.x < RT_RADIX_BINS ? histogram[threadIdx.x] : 0u;
        const unsigned int before = select_exclusive_sum(count, warp_sums, &total);
        if (threadIdx.x < RT_RADIX_BINS && before <= rank && rank - before < count) {
            chosen[0] = threadIdx.x;           // exactly one bin holds the rank
            chosen[1] = rank - before;
        }
        __syncthreads();
        target |= (Key)chosen[0] << shift;
        decided |= (Key)0xffu << shift;
        rank = chosen[1];
        __syncthreads();  // every thread has read `chosen` before the next pass writes it
    }
    return target;
}

// How many of the ties numbered below `tie_number` are taken: those numbered first_tie..last_tie.
__device__ __forceinline__ rt_int64 ties_taken_before(rt_int64 tie_number, rt_int64 first_tie,
                                                      rt_int64 last_tie) {
    const rt_int64 clamped = tie_number < first_tie ? first_tie
                             : (tie_number > last_tie + 1 ? last_tie + 1 : tie_number);
    return clamped - first_tie;
}

// Steps 2 and 3 for one row: the `count` selected elements written in index order. Slices of
// RT_SELECT_LOADS * blockDim.x elements, loaded at once; each element is then placed in turn.
template <typename T, typename Key>
__device__ void write_selected(const T* x, rt_int64 step, rt_int64 n, Key flip, Key target,
                               bool take_below, rt_int64 first_tie, rt_int64 last_tie,
                               rt_int64 count, T* values, rt_int64 values_step,
                               rt_int64* indices, rt_int64 indices_step,
                               unsigned int* warp_sums) {
    rt_int64 belows = 0, ties = 0;        // below the target / tied with it, in the slices walked
#pragma unroll 1
    for (rt_int64 base = 0; base < n; base += (rt_int64)RT_SELECT_LOADS * blockDim.x) {
        if (belows + ties_taken_before(ties, first_tie, last_tie) == count) break;  // all written
        Key keys[RT_SELECT_LOADS];
#pragma unroll
        for (int u = 0; u < RT_SELECT_LOADS; ++u) {
            const rt_int64 i = base + (rt_int64)u * blockDim.x + threadIdx.x;
            keys[u] = i < n ? (Key)(sort_key(x[i * step]) ^ flip) : Key(0);
        }
#pragma unroll 1  // unrolled, the eight block sums tripled the program's NVRTC time (3 s ->
                  // 9 s); keys[] may live in (L1-cached) local memory instead
        for (int u = 0; u < RT_SELECT_LOADS; ++u) {
            const rt_int64 i = base + (rt_int64)u * blockDim.x + threadIdx.x;
            const bool below = i < n && take_below && keys[u] < target;
            const bool tie = i < n && keys[u] == target;
            if (__syncthreads_count(below || tie) == 0) continue;   // the same in every thread
            // Prefix sums of both flags at once: belows in the high 16 bits, ties in the low
            // ones (each at most blockDim.x <= 1024).
            unsigned int part_total;
            const unsigned int flags = (below ? 0x10000u : 0u) | (tie ? 1u : 0u);
            const unsigned int part = select_exclusive_sum(flags, warp_sums, &part_total);
            const rt_int64 tie_number = ties + (part & 0xffffu);
            const bool taken = below || (tie && first_tie <= tie_number && tie_number <= last_tie);
            const rt_int64 slot = belows + (part >> 16)
                                  + ties_taken_before(tie_number, first_tie, last_tie);
            if (taken && slot < count) {
                indices[slot * indices_step] = i;
                values[slot * values_step] = x[i * step];
            }
            belows += part_total >> 16;
            ties += part_total & 0xffffu;
        }
    }
}

// n: row length; first, count: the ranks asked for (first == 0 or count == 1, first + count
// <= n < 2^31); descending: nonzero for largest first; *_step: each operand's stride along
// the dim. Operands of `rows`: values out, indices out, input.
template <typename T>
__global__ void __launch_bounds__(RT_SELECT_THREADS)
select_rows_kernel(const Geometry<3> rows, rt_int64 n, rt_int64 first, rt_int64 count,
                   int descending, rt_int64 values_step, rt_int64 indices_step,
                   rt_int64 in_step, T* values, rt_int64* indices, const T* in) {
    typedef typename SortKey<T>::type Key;
    __shared__ unsigned int histogram[RT_RADIX_BINS];
    __shared__ unsigned int warp_sums[RT_SELECT_THREADS / 32];
    __shared__ unsigned int chosen[2];
    const Key flip = descending ? ~Key(0) : Key(0);
    for (rt_int64 row = blockIdx.x; row < rows.numel; row += gridDim.x) {
        rt_int64 offset[3];
        element_offsets(rows, row, offset);
        const T* x = in + offset[2];
        unsigned int rank = (unsigned int)(first + count - 1);
        const Key target = radix_select(x, in_step, n, flip, rank, histogram, warp_sums,
                                        chosen);
        // the target's tie number is `rank`; the ties before it that are among the ranks
        // asked for are taken with it
        const rt_int64 first_tie = (rt_int64)rank - count + 1 > 0 ? (rt_int64)rank - count + 1
                                                                  : 0;
        write_selected(x, in_step, n, flip, target, first == 0, first_tie, (rt_int64)rank, count,
                       values + offset[0], values_step, indices + offset[1], indices_step,
                       warp_sums);
        __syncthreads();  // every thread is done with the shared arrays before the next row
    }
}
