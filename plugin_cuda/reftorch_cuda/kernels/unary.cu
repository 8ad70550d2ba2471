// Unary math, activations and the backward ops of the activations, for float, double and the
// two 16-bit types (computed in float, rounded once when stored). Compiled after common.cuh
// (which has the math library by computation type: rt_exp, rt_log, ...).
//
// Each Op's formula is the NumPy reference's, operation for operation and in the same order
// (reftorch/_ops/pointwise.py and nn_activation.py), so that with --fmad=false the only
// differences from the reference are those of the math functions themselves: CUDA's exp, log,
// tanh, sin, cos, erf are within 1-2 ulp of the exact value, NumPy's within 1-3, so a GPU
// result may differ by a few ulp. +, -, *, / and sqrt are correctly rounded on both sides.
//
// Templates are instantiated by name expressions: "unary_kernel<float, ExpOp>",
// "unary_scalar_kernel<double, LeakyReluOp>", "grad_kernel<rt_float16, SiluBackwardOp>".

// Constants as the reference's Python floats (repr of math.sqrt(2), math.sqrt(2 / math.pi),
// math.sqrt(2 * math.pi)); a constant meets a float tensor rounded to float, as NumPy does.
#define RT_SQRT2 1.4142135623730951
#define RT_SQRT_2_OVER_PI 0.7978845608028654
#define RT_SQRT_2PI 2.5066282746310002
#define RT_GELU_CUBIC 0.044715

// erf in double, rounded once to A: the reference computes gelu's erf in float64 for every
// dtype.
template <typename A>
__device__ __forceinline__ A erf_rounded(A x) { return (A)erf((double)x); }

// --- unary ops: apply(x) in the computation type A ---------------------------------------------

struct NegOp { template <typename A> static __device__ A apply(A x) { return -x; } };
struct AbsOp { template <typename A> static __device__ A apply(A x) { return rt_fabs(x); } };
// sign: 1, -1, or 0 for zeros of either sign and for NaN (PyTorch's sign of NaN is 0).
struct SignOp {
    template <typename A>
    static __device__ A apply(A x) { return x > (A)0 ? (A)1 : x < (A)0 ? (A)-1 : (A)0; }
};
struct ExpOp { template <typename A> static __device__ A apply(A x) { return rt_exp(x); } };
struct Expm1Op { template <typename A> static __device__ A apply(A x) { return rt_expm1(x); } };
struct LogOp { template <typename A> static __device__ A apply(A x) { return rt_log(x); } };
struct Log1pOp { template <typename A> static __device__ A apply(A x) { return rt_log1p(x); } };
struct SqrtOp { template <typename A> static __device__ A apply(A x) { return rt_sqrt(x); } };
struct SinOp { template <typename A> static __device__ A apply(A x) { return rt_sin(x); } };
struct CosOp { template <typename A> static __device__ A apply(A x) { return rt_cos(x); } };
struct TanhOp { template <typename A> static __device__ A apply(A x) { return rt_tanh(x); } };

// 1 / sqrt(x): two correctly rounded operations, as the reference (not CUDA's rsqrt, which
// is an approximation).
struct RsqrtOp {
    template <typename A> static __device__ A apply(A x) { return A(1) / rt_sqrt(x); }
};

// 1 / (1 + exp(-x)); exp overflowing to inf gives exactly 0.
struct SigmoidOp {
    template <typename A> static __device__ A apply(A x) { return A(1) / (A(1) + rt_exp(-x)); }
};

// np.maximum(x, 0): NaN stays NaN, -0.0 gives +0.0.
struct ReluOp {
    template <typename A> static __device__ A apply(A x) { return rt_maximum(x, A(0)); }
};

struct SiluOp {
    template <typename A> static __device__ A apply(A x) { return x / (A(1) + rt_exp(-x)); }
};

// 0.5 x (1 + erf(x / sqrt 2)): the product 0.5 x in A, the rest in double, rounded once to A.
struct GeluErfOp {
    template <typename A> static __device__ A apply(A x) {
        const double e = erf((double)x / RT_SQRT2);
        return (A)((double)(A(0.5) * x) * (1.0 + e));
    }
};

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), all in A.
// tanh in double, rounded to A: the reference's gelu rounds its tanh once (NumPy's float32 tanh
// was an ulp off near -1, where 1 + tanh keeps every ulp of it).
template <typename A>
__device__ __forceinline__ A tanh_rounded(A x) { return (A)tanh((double)x); }

struct GeluTanhOp {
    template <typename A> static __device__ A apply(A x) {
        const A inner = (A)RT_SQRT_2_OVER_PI * (x + (A)RT_GELU_CUBIC * x * x * x);
        return A(0.5) * x * (A(1) + tanh_rounded(inner));
    }
};

// erf in double (CUDA's erf: within 2 ulp of the exact value), rounded to A and then to the
// storage type: the reference computes erf in float64 for every dtype and rounds once.
struct ErfOp {
    template <typename A> static __device__ A apply(A x) { return erf_rounded(x); }
};

// out = Op(x) over a 2-operand geometry (out, x).
template <typename T, typename Op>
__global__ void __launch_bounds__(256)
unary_kernel(const Geometry<2> g, T* out, const T* x) {
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[2];
        element_offsets(g, i, offset);
        out[offset[0]] = Arith<T>::store(Op::apply(Arith<T>::load(x[offset[1]])));
    }
}

// --- unary ops with a number: apply(x, p) ------------------------------------------------------

// x where x > 0, else x * negative_slope (NaN gives NaN, -0.0 gives -0.0 * slope = -0.0): the
// reference's where(x > 0, x, x * slope) with the slope rounded to A, as NumPy rounds a
// Python number against an array of A.
struct LeakyReluOp {
    template <typename A> static __device__ A apply(A x, A slope) {
        return x > A(0) ? x : x * slope;
    }
};

// out = Op(x, p) over a 2-operand geometry (out, x); p is a double converted to the
// computation type first.
template <typename T, typename Op>
__global__ void __launch_bounds__(256)
unary_scalar_kernel(const Geometry<2> g, T* out, const T* x, double p) {
    typedef typename Arith<T>::type A;
    const A param = (A)p;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[2];
        element_offsets(g, i, offset);
        out[offset[0]] = Arith<T>::store(Op::apply(Arith<T>::load(x[offset[1]]), param));
    }
}

// --- backward ops: apply(grad, v, p), v the forward's output (tanh, sigmoid) or input ---------

// grad (1 - y^2)
struct TanhBackwardOp {
    template <typename A> static __device__ A apply(A g, A y, A) { return g * (A(1) - y * y); }
};

// grad y (1 - y)
struct SigmoidBackwardOp {
    template <typename A> static __device__ A apply(A g, A y, A) { return g * (y * (A(1) - y)); }
};

// grad where x > threshold, else 0: a select (a NaN x passes the gradient, an inf or NaN
// gradient at a masked element gives 0).
struct ThresholdBackwardOp {
    template <typename A> static __device__ A apply(A g, A x, A threshold) {
        return x <= threshold ? A(0) : g;
    }
};

// grad s (1 + x (1 - s)), s = sigmoid(x)
struct SiluBackwardOp {
    template <typename A> static __device__ A apply(A g, A x, A) {
        const A s = A(1) / (A(1) + rt_exp(-x));
        return g * (s * (A(1) + x * (A(1) - s)));
    }
};

// grad (Phi(x) + x phi(x)): Phi from erf (in double, rounded to A as torch.erf's result is),
// phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
struct GeluErfBackwardOp {
    template <typename A> static __device__ A apply(A g, A x, A) {
        const A cdf = A(0.5) * (A(1) + erf_rounded(x * (A)(1.0 / RT_SQRT2)));
        const A pdf = rt_exp(A(-0.5) * x * x) * (A)(1.0 / RT_SQRT_2PI);
        return g * (cdf + x * pdf);
    }
};

// grad d/dx [0.5 x (1 + tanh(k (x + c x^3)))] = grad (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2))
struct GeluTanhBackwardOp {
    template <typename A> static __device__ A apply(A g, A x, A) {
        const A k = (A)RT_SQRT_2_OVER_PI;
        const A t = tanh_rounded(k * (x + (A)RT_GELU_CUBIC * x * x * x));
        const A d_inner = k * (A(1) + (A)(3 * RT_GELU_CUBIC) * x * x);
        return g * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * d_inner);
    }
};

// out = Op(grad, v, p) over a 3-operand geometry (out, grad, v); p is a double parameter
// (threshold_backward's threshold) converted to the computation type first, as NumPy does.
template <typename T, typename Op>
__global__ void __launch_bounds__(256)
grad_kernel(const Geometry<3> g, T* out, const T* grad, const T* v, double p) {
    typedef typename Arith<T>::type A;
    const A param = (A)p;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        const A gv = Arith<T>::load(grad[offset[1]]);
        out[offset[0]] = Arith<T>::store(Op::apply(gv, Arith<T>::load(v[offset[2]]), param));
    }
}
