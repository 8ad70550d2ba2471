// sort, argsort, topk and kthvalue along one dim: a stable sort of each row, of which the
// kernel writes a run of ranks. Compiled after common.cuh.
//
// One block per row (a row: the elements along the dim for one position of the other dims;
// `rows` walks those positions, operands 0..2: values out, indices out, input). The row is
// sorted in shared memory by a bitonic network over (key, position) pairs:
//
// * key: the element as an unsigned integer in the reference's order. Floats: the IEEE bits
//   with negatives inverted and positives' sign bit set; every NaN gets the largest key (above
//   +inf) and -0.0 gets +0.0's key (the two tie). 16-bit floats widen exactly to float first.
//   Signed integers: the bits with the sign bit flipped. A descending sort inverts the key
//   (largest first, NaN first) but not the position.
// * position: the element's index in the row, which breaks ties. Every pair is distinct, so
//   the sorted order is unique: stable (ties in index order, in both directions, as the
//   reference's sort) and independent of the block size and of the GPU.
//
// The row is padded to `padded` entries (a power of two) with sentinels (largest key,
// positions n..padded-1), which sort after every real entry. Shared memory (dynamic):
// padded keys, then padded 16-bit positions; rows are at most RT_SORT_MAX_ROW long (the host
// declines longer ones), so positions fit 16 bits and the memory fits the 48 KiB a launch may
// use without opting in. The sorted entries' ranks first..first+count-1 are written: their
// positions (int64) and, unless `values` is null (argsort), the input elements at those
// positions, read again from the input so their bits (NaN payloads, -0.0) are kept.
//
// Name expressions: "sort_rows_kernel<float>" (double, rt_float16, rt_bfloat16, long long,
// int, short, signed char, unsigned char; bool is sorted as unsigned char, its 0/1 bytes).

#define RT_SORT_MAX_ROW 4096

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

// --- the kernel --------------------------------------------------------------------------------

// n: row length (1..RT_SORT_MAX_ROW); padded: the power of two >= n the network sorts;
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
        for (int i = threadIdx.x; i < padded; i += blockDim.x) {
            keys[i] = i < n ? (Key)(sort_key(x[i * in_step]) ^ flip) : ~Key(0);
            positions[i] = (unsigned short)i;
        }
        __syncthreads();
        bitonic_sort(keys, positions, padded);
        for (int r = threadIdx.x; r < count; r += blockDim.x) {
            const int position = positions[first + r];
            indices[offset[1] + r * indices_step] = position;
            if (values != 0) values[offset[0] + r * values_step] = x[position * in_step];
        }
        __syncthreads();  // every thread is done reading before the next row is loaded
    }
}
