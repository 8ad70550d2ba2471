// Index ops with device-side bounds checks: gather, index_select, embedding and take (one
// gather kernel), scatter, scatter_add and index_add (one scatter kernel). Compiled after
// common.cuh.
//
// Every index is checked before it is used: an out-of-range index is never read or written
// through. The kernel skips that element (its output is left as it was) and records the bad
// index in the device's error record (IndexErrorRecord below, one small allocation per device
// that the host reads at the next synchronisation and turns into the op's IndexError or
// RuntimeError; see reftorch_cuda.ops_index).
//
// The record holds the first bad index *by position* (the row-major position in the walk
// the op defines, see each kernel) of the first launch that found one, so which index is
// reported does not depend on thread timing:
//   * a launch leaves a record of another launch alone (launches on one stream run in order,
//     so the earliest failing launch stays; between kernels running concurrently on two
//     streams, which one is reported is unspecified);
//   * within a launch, atomicMin lowers `position`, and the lowering thread then writes the
//     other fields under a spin lock, only while `position` is still its own. Whoever lowers
//     `position` last writes last, so the fields always belong to the smallest position. Only
//     threads that found a bad index ever take the lock (Volta and later schedule the threads
//     of a warp independently, so a spinning thread does not stall the holder).
//
// Name expressions: "gather_kernel<unsigned int, long long>" (by element width: W is one of
// common.cuh's word types), "scatter_kernel<float, long long, AddOp>" (the adding ops for
// the float types and int, long long),
// "scatter_kernel<unsigned short, long long, AssignOp>".

// The device's error record. The host reads it whole and writes it back cleared
// (position ~0, launch 0) after reporting it; the layout is pinned by the static_assert and
// mirrored by ops_index.RECORD.
struct IndexErrorRecord {
    unsigned long long position;  // first bad position of the failing launch; ~0: none
    unsigned long long launch;     // the failing launch's number; 0: no error recorded
    long long value;               // the bad index, as given
    long long size;                // the size it was checked against
    int op;                        // the op's code (ops_index.OP_CODES)
    int dim;                       // the dim it indexes (for the message)
    unsigned int lock;             // the spin lock of the writers (0: free)
    unsigned int unused;
};
static_assert(sizeof(IndexErrorRecord) == 48, "IndexErrorRecord layout");

// What a launch checks its indices against, passed by value (ops_index.IndexCheck).
struct IndexCheck {
    IndexErrorRecord* record;
    unsigned long long launch;     // this launch's number (nonzero)
    rt_int64 size;                 // valid indices: [0, size), or [-size, size) with wrap
    int op;
    int dim;
    int wrap;                      // negative indices count from the end (take)
    int unused;
};
static_assert(sizeof(IndexCheck) == 40, "IndexCheck layout");

// Record bad index `value` found at `position` by launch `launch`, unless a smaller position
// of this launch, or another launch's error, is recorded already. Out of line (only the error
// path runs it), and given the check's fields by value: a reference to the kernel's
// IndexCheck parameter would make every thread copy it to local memory first.
__device__ __noinline__ void report_bad_index(IndexErrorRecord* r, unsigned long long launch,
                                              rt_int64 size, int op, int dim,
                                              unsigned long long position, rt_int64 value) {
    volatile IndexErrorRecord* v = r;
    const unsigned long long recorded = v->launch;
    if (recorded != 0ull && recorded != launch) return;         // an earlier launch's error
    if (atomicMin(&r->position, position) <= position) return;  // a smaller position won
    while (atomicCAS(&r->lock, 0u, 1u) != 0u) {
    }
    __threadfence();
    if (atomicAdd(&r->position, 0ull) == position) {  // still the smallest: the fields are ours
        v->value = value;
        v->size = size;
        v->op = op;
        v->dim = dim;
        v->launch = launch;
    }
    __threadfence();
    atomicExch(&r->lock, 0u);
}

// The index `raw` as an element number in [0, size) (negative ones wrapped when `wrap`), or
// false. Records nothing: the scatter_reduce passes after the first skip a bad index quietly.
template <typename I>
__device__ __forceinline__ bool index_in_range(I raw, rt_int64 size, bool wrap,
                                               rt_int64& index) {
    const rt_int64 value = (rt_int64)raw;
    const rt_int64 k = (wrap && value < 0) ? value + size : value;
    if (k < 0 || k >= size) return false;
    index = k;
    return true;
}

// index_in_range, recording a bad index (found at `position`) in the error record.
template <typename I>
__device__ __forceinline__ bool checked_index(const IndexCheck& c, unsigned long long position,
                                              I raw, rt_int64& index) {
    rt_int64 k;
    if (!index_in_range(raw, c.size, c.wrap != 0, k)) {
        report_bad_index(c.record, c.launch, c.size, c.op, c.dim, position, (rt_int64)raw);
        return false;
    }
    index = k;
    return true;
}

// --- gather -----------------------------------------------------------------------------------
// out[p] = src[src_offset(p) + index[index_offset(p)] * index_stride] over a 3-operand walk
// (out, src, index) in row-major order; the linear walk index is the error position. The host
// sets src's stride to 0 along the indexed dims and passes the indexed dim's stride as
// `index_stride`:
//   gather        walk = index's shape, src = input with stride 0 along dim
//   index_select  walk = out's shape, index strided along dim only
//   embedding     walk = indices' shape + (columns,), src = weight's row 0
//   take          walk = index's shape, src = the contiguous input, index_stride 1, wrap
// Elements move without being looked at: one instantiation per element width.
template <typename W, typename I>
__global__ void __launch_bounds__(256)
gather_kernel(const Geometry<3> g, W* out, const W* src, const I* index, rt_int64 index_stride,
              const IndexCheck check) {
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        rt_int64 k;
        if (checked_index(check, (unsigned long long)i, index[offset[2]], k))
            out[offset[0]] = src[offset[1] + k * index_stride];
    }
}

// --- scatter ----------------------------------------------------------------------------------
// One thread per column: a column is one choice of every coordinate except the indexed dim,
// and its thread takes the n entries along that dim in order, j = 0 .. n-1:
//   target = out + out_offset + index[index_offset + j * index_step] * out_step
//   *target = Op(*target, src[src_offset + j * src_step])
// Two columns never write one element (their other coordinates differ), so there are no
// atomics and no races, and each output element receives its contributions in j order: the
// order of the reference's np.add.at (sums round as they do there, bit for bit) and of its
// fancy assignment (for scatter, the last of repeated indices wins). The walk `g` has four
// operands: out, src, index and the error position of the column's j = 0 entry (the row-major
// position in index's shape; each j adds position_step).
//   scatter, scatter_add  columns of index's shape; index_step, src_step, out_step along dim
//   index_add             columns of out's shape; index 1-D (index column strides 0),
//                         position = j
// The cost is n steps per thread: fast while there are many columns, slow for a long index
// over few columns (an embedding gradient of a narrow table, say).

// scatter: the new value replaces the old one (elements moved by width).
struct AssignOp {
    template <typename T>
    static __device__ __forceinline__ T apply(T, T value, double) { return value; }
};

// Integer sums and products wrap around, as NumPy's do: computed in the unsigned twin type
// (signed overflow is undefined in C++; the conversion back is modular).
template <typename T> struct Unsigned;
template <> struct Unsigned<int> { typedef unsigned int type; };
template <> struct Unsigned<long long> { typedef unsigned long long type; };

template <typename T>
__device__ __forceinline__ T wrapping_add(T a, T b) {
    typedef typename Unsigned<T>::type U;
    return (T)((U)a + (U)b);
}

template <typename T>
__device__ __forceinline__ T wrapping_mul(T a, T b) {
    typedef typename Unsigned<T>::type U;
    return (T)((U)a * (U)b);
}

// scatter_add: old + value; floats in the computation type, rounded once.
struct AddOp {
    template <typename T>
    static __device__ __forceinline__ T apply(T old, T value, double) {
        return Arith<T>::store(Arith<T>::load(old) + Arith<T>::load(value));
    }
    static __device__ __forceinline__ int apply(int old, int value, double) {
        return wrapping_add(old, value);
    }
    static __device__ __forceinline__ long long apply(long long old, long long value, double) {
        return wrapping_add(old, value);
    }
};

// index_add: old + alpha * value, as the reference computes `source * alpha`: alpha in T and
// the product rounded to T before the sum (PyTorch's rounding, bfloat16 included). The host
// passes alpha already rounded to T (an integer for the integer types).

struct AddScaledOp {
    template <typename T>
    static __device__ __forceinline__ T apply(T old, T value, double alpha) {
        typedef typename Arith<T>::type A;
        A product = Arith<T>::load(value) * (A)alpha;
        product = Arith<T>::load(Arith<T>::store(product));
        return Arith<T>::store(Arith<T>::load(old) + product);
    }
    static __device__ __forceinline__ int apply(int old, int value, double alpha) {
        return wrapping_add(old, wrapping_mul(value, (int)alpha));
    }
    static __device__ __forceinline__ long long apply(long long old, long long value,
                                                      double alpha) {
        return wrapping_add(old, wrapping_mul(value, (long long)alpha));
    }
};

// The walk above, shared by every kernel that walks it (scatter_kernel here, scatter.cu's
// scatter_scalar_kernel): each column of g (a grid-stride loop; offsets: out, src, index, the
// error position of the column's j = 0 entry), its n entries in order j = 0 .. n-1, each index
// checked (a bad one recorded and skipped), and visit(offset, j, k) for a good one (k: the
// element number along dim).
template <typename I, typename Visit>
__device__ __forceinline__ void for_each_scatter_entry(const Geometry<4>& g, rt_int64 n,
                                                       rt_int64 index_step,
                                                       rt_int64 position_step, const I* index,
                                                       const IndexCheck& check, Visit visit) {
    RT_GRID_STRIDE_LOOP(c, g.numel) {
        rt_int64 offset[4];
        element_offsets(g, c, offset);
#pragma unroll 1
        for (rt_int64 j = 0; j < n; ++j) {
            rt_int64 k;
            const unsigned long long position =
                (unsigned long long)(offset[3] + j * position_step);
            if (!checked_index(check, position, index[offset[2] + j * index_step], k))
                continue;
            visit(offset, j, k);
        }
    }
}

template <typename T, typename I, typename Op>
__global__ void __launch_bounds__(256)
scatter_kernel(const Geometry<4> g, rt_int64 n, rt_int64 out_step, rt_int64 src_step,
               rt_int64 index_step, rt_int64 position_step, T* out, const T* src,
               const I* index, double alpha, const IndexCheck check) {
    for_each_scatter_entry(g, n, index_step, position_step, index, check,
                           [=](const rt_int64* offset, rt_int64 j, rt_int64 k) {
        T* target = out + offset[0] + k * out_step;
        *target = Op::apply(*target, src[offset[1] + j * src_step], alpha);
    });
}
