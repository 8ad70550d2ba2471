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
// from the input so their bits (NaN payloads, -0.0) are kept.
//
// Longer rows (below 2^31 elements), in global scratch runs (keys, and int positions in the
// row; row r's n pairs at r * n), in passes: sort_tiles_kernel sorts each tile of
// RT_SORT_TILE elements as above into a run; merge_runs_kernel merges pairs of runs (width
// w -> 2w) until one run is the row; write_ranks_kernel writes the ranks asked for.
//
// Name expressions: "sort_rows_kernel<float>", "sort_tiles_kernel<float>",
// "write_ranks_kernel<float>" (and double, rt_float16, rt_bfloat16, long long, int, short,
// signed char, unsigned char; bool is sorted as unsigned char, its 0/1 bytes);
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

// --- rows of up to RT_SORT_TILE elements --------------------------------------------------------

// n: row length (1..RT_SORT_TILE); padded: the power of two >= n the network sorts;
// first, count: the ranks written (first + count <= n); descending: nonzero for largest first;
// *_step: each operand's stride along the dim. values may be null (argsort).
template <typename T>
__global__ void sort_rows_kernel(const Geometry<3> rows, rt_int64 n, rt_int64 first,
                                 rt_int64 count, int padded, int descending,
                                 rt_int64 values_step, rt_int64 indices_step, rt_int64 in_step,
                                 T* values, rt_int64* indices, const T* in) {
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
            indices[offset[1] + r * indices_step] = position;
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
                                   rt_int64* indices, const T* in) {
    RT_GRID_STRIDE_LOOP(e, rows.numel * count) {
        const rt_int64 row = e / count;
        const rt_int64 r = e - row * count;
        rt_int64 offset[3];
        element_offsets(rows, row, offset);
        const rt_int64 position = run_positions[row * n + first + r];
        indices[offset[1] + r * indices_step] = position;
        if (values != 0) values[offset[0] + r * values_step] = in[offset[2] + position * in_step];
    }
}
