// Comparisons (bool results), where and clamp. Compiled after common.cuh.
//
// Nothing here rounds: a comparison of two values loaded into the computation type is exact,
// where only moves elements, and clamp's results are one of its operands. So results equal
// the NumPy reference bit for bit, NaN handling included (comparisons with NaN are false
// except !=, clamp propagates NaN from any operand as np.maximum/np.minimum do).
//
// Name expressions: "compare_kernel<float, LtOp>", "where_kernel<unsigned short>",
// "clamp_kernel<double>", "bound_kernel<rt_bfloat16, MaximumOp>".

// --- comparisons ------------------------------------------------------------------------------

struct EqOp { template <typename A> static __device__ bool apply(A a, A b) { return a == b; } };
struct NeOp { template <typename A> static __device__ bool apply(A a, A b) { return a != b; } };
struct LtOp { template <typename A> static __device__ bool apply(A a, A b) { return a < b; } };
struct LeOp { template <typename A> static __device__ bool apply(A a, A b) { return a <= b; } };
struct GtOp { template <typename A> static __device__ bool apply(A a, A b) { return a > b; } };
struct GeOp { template <typename A> static __device__ bool apply(A a, A b) { return a >= b; } };

// out = Op(a, b) over a 3-operand geometry (out, a, b); out is bool (one byte).
template <typename T, typename Op>
__global__ void __launch_bounds__(256)
compare_kernel(const Geometry<3> g, bool* out, const T* a, const T* b) {
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        out[offset[0]] = Op::apply(Arith<T>::load(a[offset[1]]), Arith<T>::load(b[offset[2]]));
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

// --- clamp ------------------------------------------------------------------------------------

// min(max(x, low), high): NaN in any operand gives NaN; low > high gives high.
template <typename T>
__global__ void __launch_bounds__(256)
clamp_kernel(const Geometry<4> g, T* out, const T* x, const T* low, const T* high) {
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[4];
        element_offsets(g, i, offset);
        const auto v = rt_maximum(Arith<T>::load(x[offset[1]]), Arith<T>::load(low[offset[2]]));
        out[offset[0]] = Arith<T>::store(rt_minimum(v, Arith<T>::load(high[offset[3]])));
    }
}

// clamp_min is np.maximum(x, low), clamp_max np.minimum(x, high).
struct MaximumOp {
    template <typename A> static __device__ A apply(A x, A b) { return rt_maximum(x, b); }
};
struct MinimumOp {
    template <typename A> static __device__ A apply(A x, A b) { return rt_minimum(x, b); }
};

template <typename T, typename Op>
__global__ void __launch_bounds__(256)
bound_kernel(const Geometry<3> g, T* out, const T* x, const T* bound) {
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        const auto v = Op::apply(Arith<T>::load(x[offset[1]]), Arith<T>::load(bound[offset[2]]));
        out[offset[0]] = Arith<T>::store(v);
    }
}
