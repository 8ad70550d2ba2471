// Strided elementwise kernels of the reftorch CUDA plugin, compiled at run time by NVRTC
// after the shared prelude common.cuh (Geometry, element_offsets, the 16-bit types, Arith).
//
// The grid-stride loop only visits i < numel, so no access is out of bounds as long as the
// host built the geometry from tensors that fit their storages.
//
// Templates are instantiated by NVRTC name expressions, e.g. "binary_kernel<float, AddOp>" or,
// with a float scalar operand, "binary_kernel<rt_float16, MulOp, rt_float16, float>"; the host
// asks for the lowered (mangled) names after compiling.

// --- binary arithmetic ---------------------------------------------------------------------
// `alpha` is already in the computation type. The host compiles with --fmad=false, so
// a + alpha * b is a rounded multiply then a rounded add, exactly as the NumPy reference does.

struct AddOp {
    template <typename A>
    static __device__ __forceinline__ A apply(A a, A b, A alpha) { return a + alpha * b; }
};

struct SubOp {
    template <typename A>
    static __device__ __forceinline__ A apply(A a, A b, A alpha) { return a - alpha * b; }
};

struct MulOp {
    template <typename A>
    static __device__ __forceinline__ A apply(A a, A b, A) { return a * b; }
};

struct DivOp {
    template <typename A>
    static __device__ __forceinline__ A apply(A a, A b, A) { return a / b; }
};

// out = Op(a, b, alpha) over a 3-operand geometry (out, a, b). a and b are of the output's type
// T, or (for the 16-bit types) either may be float: a Python number's 0-dim float32 tensor.
template <typename T, typename Op, typename TA = T, typename TB = T>
__global__ void __launch_bounds__(256)
binary_kernel(const Geometry<3> g, T* out, const TA* a, const TB* b, double alpha) {
    typedef typename Arith<T>::type A;
    const A scale = (A)alpha;  // alpha is cast to the computation dtype first, as in PyTorch
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        const A x = load_as<A>(a[offset[1]]);
        const A y = load_as<A>(b[offset[2]]);
        out[offset[0]] = Arith<T>::store(Op::apply(x, y, scale));
    }
}

// --- strided copy --------------------------------------------------------------------------
// A same-dtype copy only moves bytes, so it is instantiated per element width, not per dtype
// (word types: unsigned char ... unsigned long long, rt_bytes16).

template <typename W>
__global__ void __launch_bounds__(256)
copy_kernel(const Geometry<2> g, W* dst, const W* src) {
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[2];
        element_offsets(g, i, offset);
        dst[offset[0]] = src[offset[1]];
    }
}
