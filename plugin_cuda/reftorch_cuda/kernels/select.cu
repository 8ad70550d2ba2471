// Comparisons (bool results), where and clamp. Compiled after common.cuh.
//
// Nothing here rounds: a comparison of two values loaded into the computation type is exact,
// where only moves elements, and clamp's results are one of its operands. So results equal
// the NumPy reference bit for bit, NaN handling included (comparisons with NaN are false
// except !=, clamp propagates NaN from any operand as np.maximum/np.minimum do).
//
// Name expressions: "compare_kernel<float, LtOp>", "where_kernel<unsigned short>",
// "clamp_kernel<double>", "bound_kernel<rt_bfloat16, MaximumOp>", and for a 16-bit type with
// float scalars "compare_kernel<rt_float16, GtOp, float>", "clamp_kernel<rt_float16, float>",
// "where_scalar_kernel<rt_bfloat16, rt_bfloat16, float>".

// --- comparisons ------------------------------------------------------------------------------

struct EqOp { template <typename A> static __device__ bool apply(A a, A b) { return a == b; } };
struct NeOp { template <typename A> static __device__ bool apply(A a, A b) { return a != b; } };
struct LtOp { template <typename A> static __device__ bool apply(A a, A b) { return a < b; } };
struct LeOp { template <typename A> static __device__ bool apply(A a, A b) { return a <= b; } };
struct GtOp { template <typename A> static __device__ bool apply(A a, A b) { return a > b; } };
struct GeOp { template <typename A> static __device__ bool apply(A a, A b) { return a >= b; } };

// out = Op(a, b) over a 3-operand geometry (out, a, b); out is bool (one byte). b is of the
// compared type T or, for the 16-bit types, a float scalar (see load_as).
template <typename T, typename Op, typename TB = T>
__global__ void __launch_bounds__(256)
compare_kernel(const Geometry<3> g, bool* out, const T* a, const TB* b) {
    typedef typename Arith<T>::type A;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        out[offset[0]] = Op::apply(load_as<A>(a[offset[1]]), load_as<A>(b[offset[2]]));
    }
}

// --- where ------------------------------------------------------------------------------------
// A select moves elements unchanged: one instantiation per element width (W is a word type of
// that width, from common.cuh's word types), whatever the dtype.

template <typename W>
__global__ void __launch_bounds__(256)
where_kernel(const Geometry<4> g, W* out, const bool* condition, const W* a, const W* b) {
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[4];
        element_offsets(g, i, offset);
        out[offset[0]] = condition[offset[1]] ? a[offset[2]] : b[offset[3]];
    }
}

// where with a float scalar (a Python number) for a or b of a 16-bit result: the values go
// through the computation type and are rounded to T, as the reference selects in float32 and
// rounds the result.
template <typename T, typename TA, typename TB>
__global__ void __launch_bounds__(256)
where_scalar_kernel(const Geometry<4> g, T* out, const bool* condition, const TA* a,
                    const TB* b) {
    typedef typename Arith<T>::type A;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[4];
        element_offsets(g, i, offset);
        const A v = condition[offset[1]] ? load_as<A>(a[offset[2]]) : load_as<A>(b[offset[3]]);
        out[offset[0]] = Arith<T>::store(v);
    }
}

// --- clamp ------------------------------------------------------------------------------------

// min(max(x, low), high): NaN in any operand gives NaN; low > high gives high. The bounds are
// of x's type T or, for the 16-bit types, float scalars (see load_as).
template <typename T, typename TB = T>
__global__ void __launch_bounds__(256)
clamp_kernel(const Geometry<4> g, T* out, const T* x, const TB* low, const TB* high) {
    typedef typename Arith<T>::type A;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[4];
        element_offsets(g, i, offset);
        const A v = rt_maximum(Arith<T>::load(x[offset[1]]), load_as<A>(low[offset[2]]));
        out[offset[0]] = Arith<T>::store(rt_minimum(v, load_as<A>(high[offset[3]])));
    }
}

// clamp_min is np.maximum(x, low), clamp_max np.minimum(x, high).
struct MaximumOp {
    template <typename A> static __device__ A apply(A x, A b) { return rt_maximum(x, b); }
};
struct MinimumOp {
    template <typename A> static __device__ A apply(A x, A b) { return rt_minimum(x, b); }
};

template <typename T, typename Op, typename TB = T>
__global__ void __launch_bounds__(256)
bound_kernel(const Geometry<3> g, T* out, const T* x, const TB* bound) {
    typedef typename Arith<T>::type A;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        const A v = Op::apply(Arith<T>::load(x[offset[1]]), load_as<A>(bound[offset[2]]));
        out[offset[0]] = Arith<T>::store(v);
    }
}
