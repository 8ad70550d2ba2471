// Dtype conversions for copy_ (and so .to(), .float(), .long(), mask.to(dtype)): between the
// float types, and between each float type and bool and the integer types. Compiled after
// common.cuh.
//
// The reference converts with NumPy (np.copyto, casting="unsafe"; ml_dtypes for bfloat16),
// and so does each conversion here:
//   * to double, float, float16: correctly rounded from the source value (an integer or a
//     double source included);
//   * to bfloat16: through float first (ml_dtypes rounds double and int64 to float, then to
//     bfloat16: two roundings, reproduced);
//   * to bool: value != 0 (NaN is true);
//   * float to integer: truncation toward zero, which C and NumPy define only when the
//     truncated value fits the integer type. A NaN or out-of-range element is not guessed at:
//     the kernel sets *undefined, and the host declines the whole call, so the reference
//     (NumPy's platform behaviour) writes every element.
//
// Name expressions: "cast_kernel<int, float>" (destination type first).

// Integer types' ranges as doubles: a value converts when lowest - 1 < v < highest + 1.
// (For long long, lowest - 1 rounds to -2^63 itself, so -2^63 exactly declines: safe.)
template <typename D> struct IntRange;
template <> struct IntRange<unsigned char> { static constexpr double lowest = 0, highest = 255; };
template <> struct IntRange<signed char> { static constexpr double lowest = -128, highest = 127; };
template <> struct IntRange<short> { static constexpr double lowest = -32768, highest = 32767; };
template <> struct IntRange<int> {
    static constexpr double lowest = -2147483648.0, highest = 2147483647.0;
};
template <> struct IntRange<long long> {
    static constexpr double lowest = -9223372036854775808.0, highest = 9223372036854775807.0;
};

// Convert<D>::from(v, defined): v is the source value in its computation type (float for the
// 16-bit types, else the source type itself).
template <typename D>
struct Convert {  // D an integer type, v a float or double
    template <typename V> static __device__ D from(V v, bool& defined) {
        const double d = (double)v;  // exact
        defined = d > IntRange<D>::lowest - 1.0 && d < IntRange<D>::highest + 1.0;  // NaN: no
        return defined ? (D)v : D(0);
    }
};

template <>
struct Convert<double> {
    template <typename V> static __device__ double from(V v, bool&) { return (double)v; }
};

template <>
struct Convert<float> {
    template <typename V> static __device__ float from(V v, bool&) { return (float)v; }
};

template <>
struct Convert<bool> {
    template <typename V> static __device__ bool from(V v, bool&) { return v != V(0); }
};

template <>
struct Convert<rt_float16> {
    // Integers below 2^24 are exact in float, and larger ones overflow float16 either way, so
    // going through float rounds once.
    template <typename V> static __device__ rt_float16 from(V v, bool&) {
        return float16_from_float((float)v);
    }
    static __device__ rt_float16 from(double v, bool&) {  // one rounding, as NumPy's
        rt_float16 h;
        asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(v));
        return h;
    }
};

template <>
struct Convert<rt_bfloat16> {
    template <typename V> static __device__ rt_bfloat16 from(V v, bool&) {
        return bfloat16_from_float((float)v);
    }
};

// out = convert(src) over a 2-operand geometry (out, src); any element whose conversion is
// undefined sets *undefined to 1 (the host passes a zeroed flag for float-to-integer casts and
// a null pointer for the others, which never set it).
template <typename D, typename S>
__global__ void __launch_bounds__(256)
cast_kernel(const Geometry<2> g, D* out, const S* src, unsigned int* undefined) {
    bool all_defined = true;
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[2];
        element_offsets(g, i, offset);
        bool defined = true;
        out[offset[0]] = Convert<D>::from(Arith<S>::load(src[offset[1]]), defined);
        all_defined = all_defined && defined;
    }
    if (!all_defined) *undefined = 1u;  // every writer stores the same value: no atomic needed
}
