// Three-operand pointwise ops (lerp, addcmul, addcdiv: what the optimizers' steps are made
// of), pow, and integer add/sub/mul, compiled after the shared prelude common.cuh.
//
// The host compiles with --fmad=false, so every multiply and add below rounds on its own, in
// the order written: the order the NumPy reference evaluates its expressions in.

// lerp: start + weight * (end - start) while |weight| < 0.5, else end - (end - start) *
// (1 - weight), the form PyTorch and the reference use (exact at weight 0 and at weight 1).
struct LerpOp {
    template <typename A>
    static __device__ __forceinline__ A apply(A start, A end, A weight, A) {
        const A difference = end - start;
        return rt_fabs(weight) < (A)0.5 ? start + weight * difference
                                        : end - difference * ((A)1 - weight);
    }
};

// addcmul: input + value * tensor1 * tensor2, multiplied left to right.
struct AddcmulOp {
    template <typename A>
    static __device__ __forceinline__ A apply(A input, A t1, A t2, A value) {
        return input + value * t1 * t2;
    }
};

// addcdiv: input + value * (tensor1 / tensor2).
struct AddcdivOp {
    template <typename A>
    static __device__ __forceinline__ A apply(A input, A t1, A t2, A value) {
        return input + value * (t1 / t2);
    }
};

// out = Op(a, b, c, value) over a 4-operand geometry (out, a, b, c). The operands are of the
// output's type T, or (for the 16-bit types) c may be float: a Python number's 0-dim float32
// tensor, used unrounded as the reference does. `value` is cast to the computation type first.
template <typename T, typename Op, typename TC = T>
__global__ void __launch_bounds__(256)
ternary_kernel(const Geometry<4> g, T* out, const T* a, const T* b, const TC* c, double value) {
    typedef typename Arith<T>::type A;
    const A scale = (A)value;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[4];
        element_offsets(g, i, offset);
        const A x = load_as<A>(a[offset[1]]);
        const A y = load_as<A>(b[offset[2]]);
        const A z = load_as<A>(c[offset[3]]);
        out[offset[0]] = Arith<T>::store(Op::apply(x, y, z, scale));
    }
}

// --- power ---------------------------------------------------------------------------------
// pow(x, y) by the CUDA math library (powf within 4 ulp of the exact value, pow within 2, as
// the CUDA Programming Guide states), with NumPy's exact cases: an exponent of 2 is the
// square x * x, and a scalar exponent (a 0-dim tensor: `scalar` is set) of 0.5 is sqrt(x) and
// of -1 is 1 / x, as NumPy's power computes for a scalar exponent (sqrt differs from pow at
// -0.0 and -inf, not only in rounding).
template <typename T, typename TB = T>
__global__ void __launch_bounds__(256)
pow_kernel(const Geometry<3> g, T* out, const T* a, const TB* b, int scalar) {
    typedef typename Arith<T>::type A;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        const A x = load_as<A>(a[offset[1]]);
        const A y = load_as<A>(b[offset[2]]);
        A r;
        if (y == (A)2) r = x * x;
        else if (scalar && y == (A)0.5) r = rt_sqrt(x);
        else if (scalar && y == (A)-1) r = (A)1 / x;
        else r = rt_pow(x, y);
        out[offset[0]] = Arith<T>::store(r);
    }
}

// --- integer arithmetic --------------------------------------------------------------------
// Integers wrap around on overflow, as NumPy's (and PyTorch's) do. Signed overflow is undefined
// in C++ (and the narrow types promote to int), so the arithmetic runs on an unsigned type at
// least as wide as int, which wraps, and the result is cut back to T's width.

template <typename T> struct Unsigned { typedef unsigned int type; };  // 1, 2 and 4 bytes
template <> struct Unsigned<long long> { typedef unsigned long long type; };

struct IntAddOp {
    template <typename U>
    static __device__ __forceinline__ U apply(U a, U b, U alpha) { return a + alpha * b; }
};

struct IntSubOp {
    template <typename U>
    static __device__ __forceinline__ U apply(U a, U b, U alpha) { return a - alpha * b; }
};

struct IntMulOp {
    template <typename U>
    static __device__ __forceinline__ U apply(U a, U b, U) { return a * b; }
};

// out = Op(a, b, alpha) over a 3-operand geometry, all of integer type T; alpha (a whole
// number, already reduced to T's width by the host) multiplies b for add and sub.
template <typename T, typename Op>
__global__ void __launch_bounds__(256)
int_binary_kernel(const Geometry<3> g, T* out, const T* a, const T* b, long long alpha) {
    typedef typename Unsigned<T>::type U;
    const U scale = (U)alpha;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        out[offset[0]] = (T)Op::apply((U)a[offset[1]], (U)b[offset[2]], scale);
    }
}
