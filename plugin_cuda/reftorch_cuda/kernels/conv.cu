// Convolutions of 1, 2 or 3 spatial dims as implicit GEMMs (convolution, transposed
// convolution, and the weight gradient convolution_backward_weight). Compiled after
// common.cuh and gemm.cu: the product bodies are gemm.cu's simt_product (float, double) and
// mma_product (rt_float16, rt_bfloat16); this file gives them conv problems whose tile readers
// compute each operand element's address from its (row, depth) coordinates, so no im2col
// matrix is ever built: a coordinate that falls in the zero padding (or between the taps of a
// strided transposed convolution) loads a zero. Every problem is 3-D: a 2-D one arrives with
// depth 1 (kernel 1, stride 1, padding 0, dilation 1) and a 1-D one with height 1 as well.
// Splitting an index over a unit depth skips its division, so the 1-D/2-D work is what it
// was before depth existed, and their sums run in the same order (a unit dim adds no term).
//
// Shapes (G groups; Cg input and Og output channels per group; a product per batch index;
// "(z, y, x)" spatial coordinates, depth slowest; sd, sh, sw strides, pd.. padding, dd..
// dilation):
//   ConvForward    x (N, G*Cg, D, H, W), f = weight (G*Og, Cg, KD, KH, KW),
//                  out (N, G*Og, OD, OH, OW):
//                  batch N*G (bi = n*G + g), M = Og, N = OD*OH*OW, K = Cg*KD*KH*KW,
//                  A[o][(c, kd, kh, kw)] = f[g*Og + o, c, kd, kh, kw],
//                  B[(c, kd, kh, kw)][(oz, oy, ox)] = x[n, g*Cg + c, oz*sd - pd + kd*dd,
//                                                   oy*sh - ph + kh*dh, ox*sw - pw + kw*dw]
//   ConvTransposed x (N, G*Cg, D, H, W), f = weight (G*Cg, Og, KD, KH, KW), out as above:
//                  the same product, with A[o][(c, kd, kh, kw)] = f[g*Cg + c, o, kd, kh, kw]
//                  and B[(c, kd, kh, kw)][(z, y, x)] = x[n, g*Cg + c, iz, iy, ix] where
//                  iz*sd = z + pd - kd*dd (zero when that has no integer solution iz in
//                  [0, D); y and x alike)
//   ConvWeightGrad x (N, G*Cg, D, H, W), f = grad (N, G*Og, OD, OH, OW),
//                  out (G*Og, Cg, KD, KH, KW):
//                  batch G, M = Og, N = Cg*KD*KH*KW, K = N*OD*OH*OW,
//                  A[o][(n, oz, oy, ox)] = f[n, g*Og + o, oz, oy, ox],
//                  B[(n, oz, oy, ox)][(c, kd, kh, kw)] = x[n, g*Cg + c, oz*sd - pd + kd*dd,
//                                                        oy*sh - ph + kh*dh, ox*sw - pw + kw*dw]
// Depth and column indices split row-major, as written ((c, kd, kh, kw): c slowest).
//
// Numerical contract: float and double outputs are each one fused multiply-add chain over
// the depth in that order, from +0 (gemm.cu's), so the result depends on the shapes alone;
// a padding (or transposed gap) term adds w * 0, a no-op unless w is infinite or NaN. The
// bias, when given, is added once to the chain's value in the computation type. 16-bit
// types: float32 tensor-core sums, rounded once when stored (after the bias), as the
// reference computes in float32.
//
// Every index here is below 2**31 (the host declines larger problems); element offsets are
// 64-bit. Name expressions: conv_kernel<T, ConvForward | ConvTransposed | ConvWeightGrad>.

// The kernel parameters after the pointers; the host packs the same bytes
// (reftorch_cuda.ops_conv.CONV_ARGS). Spatial fields are (depth, height, width).
struct ConvArgs {
    rt_int64 batch, m, n, k;              // the product
    rt_int64 groups, group_in, group_out; // G, Cg, Og
    rt_int64 in_size[3], out_size[3], kernel[3];
    rt_int64 stride[3], pad[3], dil[3];
    rt_int64 x_strides[5];                // (n, c, d, h, w) strides in elements: the image
    rt_int64 f_strides[5];                // the weight, or (weight gradient) the output's grad
    rt_int64 out_strides[5];
    rt_int64 bias_stride;
    int has_bias;                         // 0: `bias` is not read (and may be null)
    int unused;
};
static_assert(sizeof(ConvArgs) == 41 * 8 + 8, "ConvArgs layout");

// n / d for 0 <= n < 2**31 and 1 <= d < 2**31 as a multiply-high, an add and a shift, with
// the divisor's multiplier worked out once (the round-up method of Granlund and Montgomery:
// shift = ceil(log2 d), magic = floor(2**32 * (2**shift - d) / d) + 1, which is below 2**32;
// then n / d = (umulhi(n, magic) + n) >> shift exactly, and the sum stays below 2**32). The
// operand sources split an index into coordinates for every element they load; GPUs have no
// integer divide instruction, so each `/` by a plain int was a long inlined sequence, several
// hundred of them per kernel, and ptxas spent about 40% of conv.cu's compile time on them.
struct Divisor {
    int value;
    unsigned magic;
    int shift;
};

__device__ __forceinline__ Divisor divisor(int d) {
    const unsigned long long u = d > 1 ? d : 1;   // an empty dim's 0: nothing is split by it
    const int shift = d > 1 ? 32 - __clz(d - 1) : 0;
    const unsigned long long magic = ((1ull << 32) * ((1ull << shift) - u)) / u + 1;
    return Divisor{d, (unsigned)magic, shift};
}

__device__ __forceinline__ int operator/(int n, const Divisor& d) {
    return (int)((__umulhi((unsigned)n, d.magic) + (unsigned)n) >> d.shift);
}

// The sizes (Z, Y, X) of a row-major (z, y, x) index, as the products the splits divide by.
struct Extent3 {
    Divisor zyx, yx, x;
};

__device__ __forceinline__ Extent3 extent3(const rt_int64 (&size)[3]) {
    return Extent3{divisor((int)(size[0] * size[1] * size[2])), divisor((int)(size[1] * size[2])),
                   divisor((int)size[2])};
}

// An index t below e.zyx -> (z, y, x). A unit Z (every 1-D and 2-D problem) skips its
// division: z is 0 and t already below Y*X.
__device__ __forceinline__ void split3(int t, const Extent3& e, int& z, int& y, int& x) {
    z = 0;
    if (e.zyx.value != e.yx.value) {
        z = t / e.yx;
        t -= z * e.yx.value;
    }
    y = t / e.x;
    x = t - y * e.x.value;
}

// Any index t -> (slow, z, y, x), slow the count of whole (Z, Y, X) blocks.
__device__ __forceinline__ void split4(int t, const Extent3& e, int& slow, int& z, int& y,
                                       int& x) {
    slow = t / e.zyx;
    split3(t - slow * e.zyx.value, e, z, y, x);
}

// One spatial dim of the image side of a problem (32-bit: the host checks the bounds);
// `step` divides by the stride (a transposed convolution's gather).
struct Axis {
    int in, stride, pad, dil;
    Divisor step;
};

__device__ __forceinline__ Axis axis(const ConvArgs& p, int d) {
    return Axis{(int)p.in_size[d], (int)p.stride[d], (int)p.pad[d], (int)p.dil[d],
                divisor((int)p.stride[d])};
}

// --- operand sources: (row, depth) -> element offset, or -1 for a zero ------------------------
// A source's row(r) precomputes what depends on the row alone (once per product), offset()
// the rest (once per tile). K_FAST: whether consecutive depths are the nearer addresses (the
// SIMT readers then give consecutive threads consecutive depths).

// A tensor read as strided rows whose depth is a row-major (slow, z, y, x) index over four of
// its dims, `inner` the (z, y, x) extent. The filter operand: rows are output channels, depth
// (c, kd, kh, kw) (the weight, either way round). The output gradient of a weight gradient:
// rows are output channels, depth (n, oz, oy, ox).
struct StridedRows {
    enum { K_FAST = 1 };
    struct Row { rt_int64 base; bool in; };
    rt_int64 base, s_row, s_slow, s_d, s_h, s_w;
    int rows, depth;
    Extent3 inner;

    __device__ __forceinline__ Row row(rt_int64 r) const { return Row{base + r * s_row, r < rows}; }
    __device__ __forceinline__ rt_int64 offset(const Row& row, rt_int64 k) const {
        if (!row.in || k >= depth) return -1;
        int slow, z, y, x;
        split4((int)k, inner, slow, z, y, x);
        return row.base + slow * s_slow + z * s_d + y * s_h + x * s_w;
    }
};
typedef StridedRows FilterRows;
typedef StridedRows GradRows;

// How the window of output position o meets the image along one axis: start(o) is what a
// row keeps (once per product), input(start, t) the input index tap t reads, or -1 for a zero.
// A convolution reads input o * stride - pad + t * dil (-1 in the zero padding).
struct DirectWindow {
    static __device__ __forceinline__ int start(const Axis& a, int o) {
        return o * a.stride - a.pad;
    }
    static __device__ __forceinline__ int input(const Axis& a, int start, int t) {
        const int i = start + t * a.dil;
        return i >= 0 && i < a.in ? i : -1;
    }
};

// A transposed convolution's output position o gathers, through tap t, the input i with
// i * stride == o + pad - t * dil (-1 when there is none in [0, in): a stride gap or past the
// border).
struct GatherWindow {
    static __device__ __forceinline__ int start(const Axis& a, int o) { return o + a.pad; }
    static __device__ __forceinline__ int input(const Axis& a, int start, int t) {
        const int u = start - t * a.dil;
        if (u < 0) return -1;
        const int i = u / a.step;
        return i * a.stride == u && i < a.in ? i : -1;
    }
};

// The image elements the output positions' windows read (an implicit im2col; Window: a
// convolution's or a transposed one's): rows are output positions (oz, oy, ox), depth
// (c, kd, kh, kw).
template <typename Window>
struct WindowColumns {
    enum { K_FAST = 0 };
    struct Row { int z, y, x; bool in; };   // each axis's Window::start
    rt_int64 base, s_c, s_d, s_h, s_w;
    int positions, depth;
    Extent3 out, taps;
    Axis d, h, w;

    __device__ __forceinline__ Row row(rt_int64 r) const {
        const bool in = r < positions;
        int oz, oy, ox;
        split3(in ? (int)r : 0, out, oz, oy, ox);
        return Row{Window::start(d, oz), Window::start(h, oy), Window::start(w, ox), in};
    }
    __device__ __forceinline__ rt_int64 offset(const Row& row, rt_int64 k) const {
        if (!row.in || k >= depth) return -1;
        int c, kd, kh, kw;
        split4((int)k, taps, c, kd, kh, kw);
        const int iz = Window::input(d, row.z, kd), iy = Window::input(h, row.y, kh),
                  ix = Window::input(w, row.x, kw);
        if (iz < 0 || iy < 0 || ix < 0) return -1;
        return base + c * s_c + iz * s_d + iy * s_h + ix * s_w;
    }
};
typedef WindowColumns<DirectWindow> ImageColumns;
typedef WindowColumns<GatherWindow> TransposedColumns;

// The image's elements under tap (c, kd, kh, kw) of every window: rows are the taps (the
// weight gradient's columns), depth the windows (n, oz, oy, ox).
struct ImageTaps {
    enum { K_FAST = 1 };
    struct Row { rt_int64 base; int dz, dy, dx; bool in; };
    rt_int64 base, s_n, s_c, s_d, s_h, s_w;
    int rows, depth;
    Extent3 out, taps;
    Axis d, h, w;

    __device__ __forceinline__ Row row(rt_int64 r) const {
        const bool in = r < rows;
        int c, kd, kh, kw;
        split4(in ? (int)r : 0, taps, c, kd, kh, kw);
        return Row{base + c * s_c, kd * d.dil - d.pad, kh * h.dil - h.pad, kw * w.dil - w.pad,
                   in};
    }
    __device__ __forceinline__ rt_int64 offset(const Row& row, rt_int64 k) const {
        if (!row.in || k >= depth) return -1;
        int n, oz, oy, ox;
        split4((int)k, out, n, oz, oy, ox);
        const int z = oz * d.stride + row.dz, y = oy * h.stride + row.dy,
                  x = ox * w.stride + row.dx;
        if (z < 0 || z >= d.in || y < 0 || y >= h.in || x < 0 || x >= w.in) return -1;
        return row.base + n * s_n + z * s_d + y * s_h + x * s_w;
    }
};

// --- tile readers over a source ----------------------------------------------------------------

// gemm.cu's TileReader contract (SIMT kernels): P elements per thread and tile, at fixed
// tile coordinates (tile_coords order by the source's K_FAST), zeros where the source says.
template <typename T, int R, int BK, typename Source>
struct GatherReader {
    enum { P = R * BK / RT_GEMM_THREADS };
    const T* base;
    Source src;
    typename Source::Row row[P];
    int kk[P];
    bool k_fast;

    __device__ __forceinline__ GatherReader(const T* base_, const Source& src_, rt_int64 r0)
        : base(base_), src(src_), k_fast(Source::K_FAST) {
#pragma unroll
        for (int q = 0; q < P; ++q) {
            int r;
            tile_coords<R, BK>(threadIdx.x + q * RT_GEMM_THREADS, k_fast, r, kk[q]);
            row[q] = src.row(r0 + r);
        }
    }

    __device__ __forceinline__ void load(rt_int64 k0, T (&reg)[P]) const {
#pragma unroll
        for (int q = 0; q < P; ++q) {
            const rt_int64 at = src.offset(row[q], k0 + kk[q]);
            reg[q] = at >= 0 ? base[at] : T(0);
        }
    }
};

// gemm.cu's ChunkReader contract (tensor-core kernels): chunks of 8 consecutive depths of one
// row, element by element, stored as one 16-byte word into the k-minor shared tile.
template <int R, int BK, typename Source>
struct GatherChunkReader {
    enum { P = R * BK / 8 / RT_GEMM_THREADS };
    const unsigned short* base;
    Source src;
    typename Source::Row row[P];
    int r[P], kk[P];

    __device__ __forceinline__ GatherChunkReader(const unsigned short* base_,
                                                 const Source& src_, rt_int64 r0)
        : base(base_), src(src_) {
#pragma unroll
        for (int q = 0; q < P; ++q) {
            chunk_along_k<BK>(threadIdx.x + q * RT_GEMM_THREADS, r[q], kk[q]);
            row[q] = src.row(r0 + r[q]);
        }
    }

    __device__ __forceinline__ void load(rt_int64 k0, uint4 (&reg)[P]) const {
#pragma unroll
        for (int q = 0; q < P; ++q) {
            unsigned half[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const rt_int64 at = src.offset(row[q], k0 + kk[q] + j);
                half[j] = at >= 0 ? base[at] : 0u;  // 0: +0.0 in both formats
            }
            reg[q] = pack_chunk(half);
        }
    }

    template <int ROW>
    __device__ __forceinline__ void store(unsigned short (&tile)[R][ROW],
                                          const uint4 (&reg)[P]) const {
#pragma unroll
        for (int q = 0; q < P; ++q) *reinterpret_cast<uint4*>(&tile[r[q]][kk[q]]) = reg[q];
    }
};

// --- the three convolutions -------------------------------------------------------------------

// An activation output element (forward and transposed): channel g*Og + row of image n, at
// output position col = (oz, oy, ox) (`cols`: the output's extent); the bias added to the
// chain's value, one rounding when stored.
template <typename T, typename A>
__device__ __forceinline__ void store_activation(const ConvArgs& p, const Extent3& cols, T* out,
                                                 const T* bias, rt_int64 bi, rt_int64 row,
                                                 rt_int64 col, A acc) {
    const rt_int64 n = bi / p.groups, channel = (bi - n * p.groups) * p.group_out + row;
    int oz, oy, ox;
    split3((int)col, cols, oz, oy, ox);
    A v = acc;
    if (p.has_bias) v = v + (A)Arith<T>::load(bias[channel * p.bias_stride]);
    const rt_int64* s = p.out_strides;
    out[n * s[0] + channel * s[1] + oz * s[2] + oy * s[3] + ox * s[4]] = Arith<T>::store(v);
}

// The image operand's columns of image n, group g (forward and transposed share the fields).
template <typename Columns>
__device__ __forceinline__ Columns image_columns(const ConvArgs& p, rt_int64 bi) {
    const rt_int64 n = bi / p.groups, g = bi - n * p.groups;
    const rt_int64* s = p.x_strides;
    return Columns{n * s[0] + g * p.group_in * s[1], s[1], s[2], s[3], s[4],
                   (int)p.n, (int)p.k, extent3(p.out_size), extent3(p.kernel),
                   axis(p, 0), axis(p, 1), axis(p, 2)};
}

// The filter operand of group g: rows step by `row_step` and channels by `channel_step` along
// the weight (forward: its dims 0 and 1; transposed: the other way round), taps by dims 2-4.
__device__ __forceinline__ FilterRows filter_rows(const ConvArgs& p, rt_int64 first,
                                                  rt_int64 row_step, rt_int64 channel_step) {
    const rt_int64* s = p.f_strides;
    return FilterRows{first, row_step, channel_step, s[2], s[3], s[4], (int)p.m, (int)p.k,
                      extent3(p.kernel)};
}

// What the forward and the transposed problem share: their output is an activation, whose
// columns are the output positions.
struct ActivationOutput {
    static __device__ __forceinline__ Extent3 columns(const ConvArgs& p) {
        return extent3(p.out_size);
    }
    template <typename T, typename A>
    static __device__ __forceinline__ void store(const ConvArgs& p, const Extent3& cols, T* out,
                                                 const T* bias, rt_int64 bi, rt_int64 row,
                                                 rt_int64 col, A acc) {
        store_activation(p, cols, out, bias, bi, row, col, acc);
    }
};

struct ConvForward : ActivationOutput {
    typedef FilterRows ASource;
    typedef ImageColumns BSource;
    static __device__ __forceinline__ FilterRows a_source(const ConvArgs& p, rt_int64 bi) {
        const rt_int64* s = p.f_strides;
        return filter_rows(p, bi % p.groups * p.group_out * s[0], s[0], s[1]);
    }
    static __device__ __forceinline__ ImageColumns b_source(const ConvArgs& p, rt_int64 bi) {
        return image_columns<ImageColumns>(p, bi);
    }
};

struct ConvTransposed : ActivationOutput {
    typedef FilterRows ASource;
    typedef TransposedColumns BSource;
    static __device__ __forceinline__ FilterRows a_source(const ConvArgs& p, rt_int64 bi) {
        const rt_int64* s = p.f_strides;   // weight (G*Cg, Og, KD, KH, KW): rows walk dim 1
        return filter_rows(p, bi % p.groups * p.group_in * s[0], s[1], s[0]);
    }
    static __device__ __forceinline__ TransposedColumns b_source(const ConvArgs& p,
                                                                 rt_int64 bi) {
        return image_columns<TransposedColumns>(p, bi);
    }
};

struct ConvWeightGrad {
    typedef GradRows ASource;
    typedef ImageTaps BSource;
    static __device__ __forceinline__ GradRows a_source(const ConvArgs& p, rt_int64 g) {
        const rt_int64* s = p.f_strides;
        return GradRows{g * p.group_out * s[1], s[1], s[0], s[2], s[3], s[4], (int)p.m,
                        (int)p.k, extent3(p.out_size)};
    }
    static __device__ __forceinline__ ImageTaps b_source(const ConvArgs& p, rt_int64 g) {
        const rt_int64* s = p.x_strides;
        return ImageTaps{g * p.group_in * s[1], s[0], s[1], s[2], s[3], s[4], (int)p.n,
                         (int)p.k, extent3(p.out_size), extent3(p.kernel), axis(p, 0),
                         axis(p, 1), axis(p, 2)};
    }
    static __device__ __forceinline__ Extent3 columns(const ConvArgs& p) {
        return extent3(p.kernel);
    }
    // Weight-gradient element (g*Og + row, c, kd, kh, kw), col = (c, kd, kh, kw); no bias.
    template <typename T, typename A>
    static __device__ __forceinline__ void store(const ConvArgs& p, const Extent3& cols, T* out,
                                                 const T*, rt_int64 g, rt_int64 row,
                                                 rt_int64 col, A acc) {
        int c, kd, kh, kw;
        split4((int)col, cols, c, kd, kh, kw);
        const rt_int64* s = p.out_strides;
        out[(g * p.group_out + row) * s[0] + c * s[1] + kd * s[2] + kh * s[3] + kw * s[4]] =
            Arith<T>::store(acc);
    }
};

// The product problem (gemm.cu's contract) of one convolution kind: A is always the filter-
// side operand f, B the image x.
template <typename T, typename Kind>
struct ConvProblem {
    ConvArgs p;   // a copy: with a reference, as MatrixProduct has, mma kernels take more registers
    T* out;
    const T *x, *f, *bias;
    Extent3 cols;   // what a column index splits by (worked out once, not per stored element)

    __device__ __forceinline__ rt_int64 batch() const { return p.batch; }
    __device__ __forceinline__ rt_int64 m() const { return p.m; }
    __device__ __forceinline__ rt_int64 n() const { return p.n; }
    __device__ __forceinline__ rt_int64 k() const { return p.k; }

    template <int R, int BK> using SimtA = GatherReader<T, R, BK, typename Kind::ASource>;
    template <int R, int BK> using SimtB = GatherReader<T, R, BK, typename Kind::BSource>;
    template <int R, int BK> using MmaA = GatherChunkReader<R, BK, typename Kind::ASource>;
    template <int R, int BK> using MmaB = GatherChunkReader<R, BK, typename Kind::BSource>;

    template <int R, int BK>
    __device__ __forceinline__ SimtA<R, BK> simt_a(rt_int64 bi, rt_int64 m0) const {
        return SimtA<R, BK>(f, Kind::a_source(p, bi), m0);
    }
    template <int R, int BK>
    __device__ __forceinline__ SimtB<R, BK> simt_b(rt_int64 bi, rt_int64 n0) const {
        return SimtB<R, BK>(x, Kind::b_source(p, bi), n0);
    }
    template <int R, int BK>
    __device__ __forceinline__ MmaA<R, BK> mma_a(rt_int64 bi, rt_int64 m0) const {
        return MmaA<R, BK>(reinterpret_cast<const unsigned short*>(f), Kind::a_source(p, bi),
                           m0);
    }
    template <int R, int BK>
    __device__ __forceinline__ MmaB<R, BK> mma_b(rt_int64 bi, rt_int64 n0) const {
        return MmaB<R, BK>(reinterpret_cast<const unsigned short*>(x), Kind::b_source(p, bi),
                           n0);
    }
    template <typename A>
    __device__ __forceinline__ void store(rt_int64 bi, rt_int64 row, rt_int64 col, A acc) const {
        Kind::store(p, cols, out, bias, bi, row, col, acc);
    }
};

// float and double on the CUDA cores, the 16-bit types on the tensor cores.
template <typename T> struct OnTensorCores { enum { value = 0 }; };
template <> struct OnTensorCores<rt_float16> { enum { value = 1 }; };
template <> struct OnTensorCores<rt_bfloat16> { enum { value = 1 }; };

template <typename T, typename Kind>
__global__ void __launch_bounds__(RT_GEMM_THREADS)
conv_kernel(const ConvArgs p, T* out, const T* x, const T* f, const T* bias) {
    const ConvProblem<T, Kind> prob{p, out, x, f, bias, Kind::columns(p)};
    if constexpr (OnTensorCores<T>::value)
        mma_product<T>(prob);
    else
        simt_product<T>(prob);
}
