// scatter with a scalar value (scatter_value; scatter_reduce_two_ with reduce="add" or
// "multiply"), scatter_reduce_two_ with a tensor source and reduce="multiply" (through
// index.cu's scatter_kernel with MulOp), and scatter_reduce (sum, prod, mean, amax, amin,
// include_self). Compiled after common.cuh and index.cu, whose error record, IndexCheck,
// index_in_range, checked_index, scatter walk (for_each_scatter_entry), AssignOp, AddOp and
// wrapping arithmetic these kernels use.
//
// Order: as index.cu's scatter_kernel, one thread per column (every coordinate but the
// indexed dim) walks the n entries along dim in order j = 0 .. n-1. Two columns never touch
// one output element, so there are no atomics and each element receives its contributions in
// j order: the order of the reference's np.ufunc.at. Sums and products therefore round as the
// reference's do, bit for bit; the mean divides the same sum by the same count.
// A bad index is skipped and recorded (the first by position, see index.cu).
//
// Name expressions: "scatter_scalar_kernel<unsigned int, long long, AssignOp>" (by width),
// "scatter_scalar_kernel<float, long long, AddOp>" / "<..., MulOp>" (the float types, int,
// long long), "scatter_kernel<float, long long, MulOp>",
// "scatter_reduce_kernel<float, long long, ReduceMean>" (ReduceSum, ReduceProd, ReduceMean,
// ReduceAmax, ReduceAmin).

// scatter's multiply: old * value; floats in the computation type, rounded once; integers
// wrap around as NumPy's.
struct MulOp {
    template <typename T>
    static __device__ __forceinline__ T apply(T old, T value, double) {
        return Arith<T>::store(Arith<T>::load(old) * Arith<T>::load(value));
    }
    static __device__ __forceinline__ int apply(int old, int value, double) {
        return wrapping_mul(old, value);
    }
    static __device__ __forceinline__ long long apply(long long old, long long value, double) {
        return wrapping_mul(old, value);
    }
};

// Every entry of the column: out[k] = Op(out[k], value), over index.cu's scatter walk
// (operands: out, unused, index, error position).
template <typename T, typename I, typename Op>
__global__ void __launch_bounds__(256)
scatter_scalar_kernel(const Geometry<4> g, rt_int64 n, rt_int64 out_step, rt_int64 index_step,
                      rt_int64 position_step, T* out, const T value, const I* index,
                      const IndexCheck check) {
    for_each_scatter_entry(g, n, index_step, position_step, index, check,
                           [=](const rt_int64* offset, rt_int64, rt_int64 k) {
        T* target = out + offset[0] + k * out_step;
        *target = Op::apply(*target, value, 0.0);
    });
}

// --- scatter_reduce ---------------------------------------------------------------------------
// Each reduction: identity (what include_self=False starts a hit element from, as the
// reference's out[where] = identity), combine (in the computation type A), and finish (the
// mean's division by the count; the others keep the value).

template <typename T> struct Limits;
template <> struct Limits<int> {
    static __device__ int lowest() { return -2147483647 - 1; }
    static __device__ int highest() { return 2147483647; }
};
template <> struct Limits<long long> {
    static __device__ long long lowest() { return -9223372036854775807LL - 1; }
    static __device__ long long highest() { return 9223372036854775807LL; }
};

// A float NaN as np.nan (the reference writes np.nan where a NaN met the reduction).
template <typename A> __device__ __forceinline__ A rt_quiet_nan();
template <> __device__ __forceinline__ float rt_quiet_nan<float>() {
    return __int_as_float(0x7fc00000);
}
template <> __device__ __forceinline__ double rt_quiet_nan<double>() {
    return __longlong_as_double(0x7ff8000000000000LL);
}

// Integer storage types are their own computation type; floats go through Arith.
template <typename T> struct Reduced {
    typedef typename Arith<T>::type A;
    static __device__ __forceinline__ A load(T v) { return Arith<T>::load(v); }
    static __device__ __forceinline__ T store(A v) { return Arith<T>::store(v); }
    static const bool integer = false;
};
template <> struct Reduced<int> {
    typedef int A;
    static __device__ __forceinline__ int load(int v) { return v; }
    static __device__ __forceinline__ int store(int v) { return v; }
    static const bool integer = true;
};
template <> struct Reduced<long long> {
    typedef long long A;
    static __device__ __forceinline__ long long load(long long v) { return v; }
    static __device__ __forceinline__ long long store(long long v) { return v; }
    static const bool integer = true;
};

__device__ __forceinline__ int rt_add(int a, int b) { return wrapping_add(a, b); }
__device__ __forceinline__ long long rt_add(long long a, long long b) { return wrapping_add(a, b); }
__device__ __forceinline__ float rt_add(float a, float b) { return a + b; }
__device__ __forceinline__ double rt_add(double a, double b) { return a + b; }
__device__ __forceinline__ int rt_mul(int a, int b) { return wrapping_mul(a, b); }
__device__ __forceinline__ long long rt_mul(long long a, long long b) { return wrapping_mul(a, b); }
__device__ __forceinline__ float rt_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double rt_mul(double a, double b) { return a * b; }

// The mean: the sum divided by the count (at least 1). Floats: the quotient in double, then
// rounded to T (the reference divides in float64 and casts; for every float type the double
// quotient rounded once more to T is the correctly rounded quotient). Integers: NumPy's
// floor division of the (wrapped) sum.
__device__ __forceinline__ float rt_mean(float total, rt_int64 count) {
    return (float)((double)total / (double)count);
}
__device__ __forceinline__ double rt_mean(double total, rt_int64 count) {
    return total / (double)count;
}
template <typename I>
__device__ __forceinline__ I rt_floor_mean(I total, rt_int64 count) {
    const rt_int64 t = (rt_int64)total;
    rt_int64 q = t / count;
    if (q * count != t && t < 0) --q;  // count > 0: round toward minus infinity
    return (I)q;
}
__device__ __forceinline__ int rt_mean(int total, rt_int64 count) {
    return rt_floor_mean(total, count);
}
__device__ __forceinline__ long long rt_mean(long long total, rt_int64 count) {
    return rt_floor_mean(total, count);
}

struct ReduceSum {
    static const bool mean = false;
    template <typename A> static __device__ A identity() { return A(0); }
    template <typename A> static __device__ A combine(A a, A b) { return rt_add(a, b); }
};
struct ReduceMean {
    static const bool mean = true;
    template <typename A> static __device__ A identity() { return A(0); }
    template <typename A> static __device__ A combine(A a, A b) { return rt_add(a, b); }
};
struct ReduceProd {
    static const bool mean = false;
    template <typename A> static __device__ A identity() { return A(1); }
    template <typename A> static __device__ A combine(A a, A b) { return rt_mul(a, b); }
};

// amax / amin: NaN (np.nan) when either side is NaN, as the reference's fmax/fmin followed by
// putting NaN back; otherwise the larger (smaller), the old value on ties (-0.0 against 0.0
// keeps the old one; NumPy's ufunc.at is not consistent about that tie across dtypes).
template <typename A> __device__ __forceinline__ bool rt_is_nan(A v) { return v != v; }
struct ReduceAmax {
    static const bool mean = false;
    template <typename A> static __device__ A identity();
    template <typename A> static __device__ A combine(A a, A b) {
        if (rt_is_nan(a) || rt_is_nan(b)) return rt_quiet_nan<A>();
        return b > a ? b : a;
    }
};
template <> __device__ float ReduceAmax::identity<float>() { return -1.0f / 0.0f; }
template <> __device__ double ReduceAmax::identity<double>() { return -1.0 / 0.0; }
template <> __device__ int ReduceAmax::identity<int>() { return Limits<int>::lowest(); }
template <> __device__ long long ReduceAmax::identity<long long>() {
    return Limits<long long>::lowest();
}
template <> __device__ int ReduceAmax::combine<int>(int a, int b) { return b > a ? b : a; }
template <> __device__ long long ReduceAmax::combine<long long>(long long a, long long b) {
    return b > a ? b : a;
}

struct ReduceAmin {
    static const bool mean = false;
    template <typename A> static __device__ A identity();
    template <typename A> static __device__ A combine(A a, A b) {
        if (rt_is_nan(a) || rt_is_nan(b)) return rt_quiet_nan<A>();
        return b < a ? b : a;
    }
};
template <> __device__ float ReduceAmin::identity<float>() { return 1.0f / 0.0f; }
template <> __device__ double ReduceAmin::identity<double>() { return 1.0 / 0.0; }
template <> __device__ int ReduceAmin::identity<int>() { return Limits<int>::highest(); }
template <> __device__ long long ReduceAmin::identity<long long>() {
    return Limits<long long>::highest();
}
template <> __device__ int ReduceAmin::combine<int>(int a, int b) { return b < a ? b : a; }
template <> __device__ long long ReduceAmin::combine<long long>(long long a, long long b) {
    return b < a ? b : a;
}

// The index entry j of the column as an element number, or false (a bad entry: reported by
// the first pass only, skipped by the others).
template <typename I>
__device__ __forceinline__ bool rt_entry(const IndexCheck& check, const I* index,
                                         rt_int64 at, unsigned long long position, bool report,
                                         rt_int64& k) {
    if (report) return checked_index(check, position, index[at], k);
    return index_in_range(index[at], check.size, false, k);   // scatter never wraps
}

// scatter_reduce over the walk of index.cu's scatter_kernel (operands: out, src, index, error
// position). Up to three passes over the column's entries, all by this one thread:
//   1. include_self == 0: every hit element starts from the identity (as the reference's
//      out[where] = identity before its ufunc.at)
//   2. out[k] = combine(out[k], src[j]) in j order; the mean also counts the hits of each
//      element in `counts` (int64, zero on entry, out's layout: element k at the same
//      offset as out's, which the host makes contiguous)
//   3. the mean only: each hit element divided once by its hits + include_self, its count
//      set back to 0 so a repeated index does not divide again
// The walk is done in the computation type of each element and stored after every step, as
// the reference's ufunc.at stores into the array after every step.
template <typename T, typename I, typename R>
__global__ void __launch_bounds__(256)
scatter_reduce_kernel(const Geometry<4> g, rt_int64 n, rt_int64 out_step, rt_int64 src_step,
                      rt_int64 index_step, rt_int64 position_step, T* out, const T* src,
                      const I* index, rt_int64* counts, int include_self,
                      const IndexCheck check) {
    typedef Reduced<T> Q;
    typedef typename Q::A A;
    RT_GRID_STRIDE_LOOP(c, g.numel) {
        rt_int64 offset[4];
        element_offsets(g, c, offset);
        bool report = true;
        if (!include_self) {
#pragma unroll 1
            for (rt_int64 j = 0; j < n; ++j) {
                rt_int64 k;
                if (rt_entry(check, index, offset[2] + j * index_step,
                             (unsigned long long)(offset[3] + j * position_step), true, k))
                    out[offset[0] + k * out_step] = Q::store(R::template identity<A>());
            }
            report = false;
        }
#pragma unroll 1
        for (rt_int64 j = 0; j < n; ++j) {
            rt_int64 k;
            if (!rt_entry(check, index, offset[2] + j * index_step,
                          (unsigned long long)(offset[3] + j * position_step), report, k))
                continue;
            T* target = out + offset[0] + k * out_step;
            *target = Q::store(R::combine(Q::load(*target),
                                          Q::load(src[offset[1] + j * src_step])));
            if (R::mean) counts[offset[0] + k * out_step] += 1;
        }
        if (!R::mean) continue;
#pragma unroll 1
        for (rt_int64 j = 0; j < n; ++j) {
            rt_int64 k;
            if (!rt_entry(check, index, offset[2] + j * index_step, 0ull, false, k)) continue;
            const rt_int64 at = offset[0] + k * out_step;
            const rt_int64 hits = counts[at];
            if (hits == 0) continue;   // divided already (a repeated index)
            out[at] = Q::store(rt_mean(Q::load(out[at]), hits + (include_self ? 1 : 0)));
            counts[at] = 0;
        }
    }
}
