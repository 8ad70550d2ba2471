// 2-D convolutions as implicit GEMMs (convolution, transposed convolution, and the weight
// gradient convolution_backward_weight). Compiled after common.cuh and gemm.cu: the product
// bodies are gemm.cu's simt_product (float, double) and mma_product (rt_float16,
// rt_bfloat16); this file gives them conv problems whose tile readers compute each operand
// element's address from its (row, depth) coordinates, so no im2col matrix is ever built:
// a coordinate that falls in the zero padding (or between the taps of a strided transposed
// convolution) loads a zero. A 1-D convolution arrives as a 2-D one of height 1.
//
// Shapes (G groups; Cg input and Og output channels per group; a product per batch index):
//   ConvForward    x (N, G*Cg, H, W), f = weight (G*Og, Cg, KH, KW), out (N, G*Og, OH, OW):
//                  batch N*G (bi = n*G + g), M = Og, N = OH*OW, K = Cg*KH*KW,
//                  A[o][(c, kh, kw)] = f[g*Og + o, c, kh, kw],
//                  B[(c, kh, kw)][(oy, ox)] = x[n, g*Cg + c, oy*sh - ph + kh*dh,
//                                                            ox*sw - pw + kw*dw]
//   ConvTransposed x (N, G*Cg, H, W), f = weight (G*Cg, Og, KH, KW), out (N, G*Og, OH, OW):
//                  the same product, with A[o][(c, kh, kw)] = f[g*Cg + c, o, kh, kw] and
//                  B[(c, kh, kw)][(y, x)] = x[n, g*Cg + c, iy, ix] where iy*sh = y + ph - kh*dh
//                  (zero when that has no integer solution iy in [0, H); x alike)
//   ConvWeightGrad x (N, G*Cg, H, W), f = grad (N, G*Og, OH, OW), out (G*Og, Cg, KH, KW):
//                  batch G, M = Og, N = Cg*KH*KW, K = N*OH*OW,
//                  A[o][(n, oy, ox)] = f[n, g*Og + o, oy, ox],
//                  B[(n, oy, ox)][(c, kh, kw)] = x[n, g*Cg + c, oy*sh - ph + kh*dh,
//                                                              ox*sw - pw + kw*dw]
// Depth and column indices split row-major, as written ((c, kh, kw): c slowest).
//
// Numerical contract: float and double outputs are each one fused multiply-add chain over
// the depth in that order, from +0 (gemm.cu's), so the result depends on the shapes alone;
// a padding (or transposed gap) term adds w * 0, a no-op unless w is infinite or NaN. The bias, when given, is added once
// to the chain's value in the computation type. 16-bit types: float32 tensor-core sums,
// rounded once when stored (after the bias), as the reference computes in float32.
//
// Every index here is below 2**31 (the host declines larger problems); element offsets are
// 64-bit. Name expressions: conv_kernel<T, ConvForward | ConvTransposed | ConvWeightGrad>.

// The kernel parameters after the pointers; the host packs the same bytes
// (reftorch_cuda.ops_conv.CONV_ARGS).
struct ConvArgs {
    rt_int64 batch, m, n, k;              // the product
    rt_int64 groups, group_in, group_out; // G, Cg, Og
    rt_int64 in_h, in_w, out_h, out_w, kernel_h, kernel_w;
    rt_int64 stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    rt_int64 x_strides[4];                // (n, c, h, w) strides in elements: the image
    rt_int64 f_strides[4];                // the weight, or (weight gradient) the output's grad
    rt_int64 out_strides[4];
    rt_int64 bias_stride;
    int has_bias;                         // 0: `bias` is not read (and may be null)
    int unused;
};
static_assert(sizeof(ConvArgs) == 32 * 8 + 8, "ConvArgs layout");

// Depth or column index t of a filter-shaped coordinate -> (c, kh, kw), c slowest.
__device__ __forceinline__ void split_tap(int t, int taps, int kernel_w, int& c, int& kh,
                                          int& kw) {
    c = t / taps;
    const int rest = t - c * taps;
    kh = rest / kernel_w;
    kw = rest - kh * kernel_w;
}

// --- operand sources: (row, depth) -> element offset, or -1 for a zero ------------------------
// A source's row(r) precomputes what depends on the row alone (once per product), offset()
// the rest (once per tile). K_FAST: whether consecutive depths are the nearer addresses (the
// SIMT readers then give consecutive threads consecutive depths).

// A filter operand: rows are output channels, depth (c, kh, kw) (the weight, either way round).
struct FilterRows {
    enum { K_FAST = 1 };
    struct Row { rt_int64 base; bool in; };
    rt_int64 base, s_row, s_c, s_kh, s_kw;
    int rows, depth, taps, kernel_w;

    __device__ __forceinline__ Row row(rt_int64 r) const { return Row{base + r * s_row, r < rows}; }
    __device__ __forceinline__ rt_int64 offset(const Row& row, rt_int64 k) const {
        if (!row.in || k >= depth) return -1;
        int c, kh, kw;
        split_tap((int)k, taps, kernel_w, c, kh, kw);
        return row.base + c * s_c + kh * s_kh + kw * s_kw;
    }
};

// The image's window elements of the output positions (an implicit im2col): rows are output
// positions (oy, ox), depth (c, kh, kw).
struct ImageColumns {
    enum { K_FAST = 0 };
    struct Row { int y0, x0; bool in; };
    rt_int64 base, s_c, s_h, s_w;
    int positions, out_w, depth, taps, kernel_w, in_h, in_w;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;

    __device__ __forceinline__ Row row(rt_int64 r) const {
        const bool in = r < positions;
        const int p = in ? (int)r : 0, oy = p / out_w, ox = p - oy * out_w;
        return Row{oy * stride_h - pad_h, ox * stride_w - pad_w, in};
    }
    __device__ __forceinline__ rt_int64 offset(const Row& row, rt_int64 k) const {
        if (!row.in || k >= depth) return -1;
        int c, kh, kw;
        split_tap((int)k, taps, kernel_w, c, kh, kw);
        const int y = row.y0 + kh * dil_h, x = row.x0 + kw * dil_w;
        if (y < 0 || y >= in_h || x < 0 || x >= in_w) return -1;   // the zero padding
        return base + c * s_c + y * s_h + x * s_w;
    }
};

// The input elements a transposed convolution's output positions gather: rows are output
// positions (y, x), depth (c, kh, kw); tap (kh, kw) reaches input row iy when
// iy * stride_h == y + pad_h - kh * dil_h.
struct TransposedColumns {
    enum { K_FAST = 0 };
    struct Row { int ty, tx; bool in; };
    rt_int64 base, s_c, s_h, s_w;
    int positions, out_w, depth, taps, kernel_w, in_h, in_w;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;

    __device__ __forceinline__ Row row(rt_int64 r) const {
        const bool in = r < positions;
        const int p = in ? (int)r : 0, y = p / out_w, x = p - y * out_w;
        return Row{y + pad_h, x + pad_w, in};
    }
    __device__ __forceinline__ rt_int64 offset(const Row& row, rt_int64 k) const {
        if (!row.in || k >= depth) return -1;
        int c, kh, kw;
        split_tap((int)k, taps, kernel_w, c, kh, kw);
        const int ty = row.ty - kh * dil_h, tx = row.tx - kw * dil_w;
        if (ty < 0 || tx < 0) return -1;
        const int iy = ty / stride_h, ix = tx / stride_w;
        if (iy * stride_h != ty || ix * stride_w != tx || iy >= in_h || ix >= in_w) return -1;
        return base + c * s_c + iy * s_h + ix * s_w;
    }
};

// The output gradient of a weight gradient: rows are output channels, depth (n, oy, ox).
struct GradRows {
    enum { K_FAST = 1 };
    struct Row { rt_int64 base; bool in; };
    rt_int64 base, s_row, s_n, s_h, s_w;
    int rows, depth, positions, out_w;

    __device__ __forceinline__ Row row(rt_int64 r) const { return Row{base + r * s_row, r < rows}; }
    __device__ __forceinline__ rt_int64 offset(const Row& row, rt_int64 k) const {
        if (!row.in || k >= depth) return -1;
        const int n = (int)k / positions, p = (int)k - n * positions;
        const int oy = p / out_w, ox = p - oy * out_w;
        return row.base + n * s_n + oy * s_h + ox * s_w;
    }
};

// The image's elements under tap (c, kh, kw) of every window: rows are the taps (the weight
// gradient's columns), depth the windows (n, oy, ox).
struct ImageTaps {
    enum { K_FAST = 1 };
    struct Row { rt_int64 base; int dy, dx; bool in; };
    rt_int64 base, s_n, s_c, s_h, s_w;
    int rows, depth, positions, out_w, taps, kernel_w, in_h, in_w;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;

    __device__ __forceinline__ Row row(rt_int64 r) const {
        const bool in = r < rows;
        int c, kh, kw;
        split_tap(in ? (int)r : 0, taps, kernel_w, c, kh, kw);
        return Row{base + c * s_c, kh * dil_h - pad_h, kw * dil_w - pad_w, in};
    }
    __device__ __forceinline__ rt_int64 offset(const Row& row, rt_int64 k) const {
        if (!row.in || k >= depth) return -1;
        const int n = (int)k / positions, p = (int)k - n * positions;
        const int oy = p / out_w, ox = p - oy * out_w;
        const int y = oy * stride_h + row.dy, x = ox * stride_w + row.dx;
        if (y < 0 || y >= in_h || x < 0 || x >= in_w) return -1;
        return row.base + n * s_n + y * s_h + x * s_w;
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
            const int c = threadIdx.x + q * RT_GEMM_THREADS;
            r[q] = c / (BK / 8);
            kk[q] = (c % (BK / 8)) * 8;
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
            reg[q] = make_uint4(half[0] | half[1] << 16, half[2] | half[3] << 16,
                                half[4] | half[5] << 16, half[6] | half[7] << 16);
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
// output position col; the bias added to the chain's value, one rounding when stored.
template <typename T, typename A>
__device__ __forceinline__ void store_activation(const ConvArgs& p, T* out, const T* bias,
                                                 rt_int64 bi, rt_int64 row, rt_int64 col,
                                                 A acc) {
    const rt_int64 n = bi / p.groups, channel = (bi - n * p.groups) * p.group_out + row;
    const rt_int64 oy = col / p.out_w, ox = col - oy * p.out_w;
    A v = acc;
    if (p.has_bias) v = v + (A)Arith<T>::load(bias[channel * p.bias_stride]);
    out[n * p.out_strides[0] + channel * p.out_strides[1] + oy * p.out_strides[2]
        + ox * p.out_strides[3]] = Arith<T>::store(v);
}

// The image operand's columns of image n, group g (forward and transposed share the fields).
template <typename Columns>
__device__ __forceinline__ Columns image_columns(const ConvArgs& p, rt_int64 bi) {
    const rt_int64 n = bi / p.groups, g = bi - n * p.groups;
    return Columns{n * p.x_strides[0] + g * p.group_in * p.x_strides[1], p.x_strides[1],
                   p.x_strides[2], p.x_strides[3],
                   (int)p.n, (int)p.out_w, (int)p.k, (int)(p.kernel_h * p.kernel_w),
                   (int)p.kernel_w, (int)p.in_h, (int)p.in_w, (int)p.stride_h, (int)p.stride_w,
                   (int)p.pad_h, (int)p.pad_w, (int)p.dil_h, (int)p.dil_w};
}

// The filter operand of group g: rows step by `row_step` and channels by `channel_step` along
// the weight (forward: its dims 0 and 1; transposed: the other way round), taps by dims 2, 3.
__device__ __forceinline__ FilterRows filter_rows(const ConvArgs& p, rt_int64 first,
                                                  rt_int64 row_step, rt_int64 channel_step) {
    return FilterRows{first, row_step, channel_step, p.f_strides[2], p.f_strides[3], (int)p.m,
                      (int)p.k, (int)(p.kernel_h * p.kernel_w), (int)p.kernel_w};
}

// What the forward and the transposed problem share: their output is an activation.
struct ActivationOutput {
    template <typename T, typename A>
    static __device__ __forceinline__ void store(const ConvArgs& p, T* out, const T* bias,
                                                 rt_int64 bi, rt_int64 row, rt_int64 col, A acc) {
        store_activation(p, out, bias, bi, row, col, acc);
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
        const rt_int64* s = p.f_strides;   // weight (G*Cg, Og, KH, KW): rows walk dim 1
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
        const int positions = (int)(p.out_h * p.out_w);
        return GradRows{g * p.group_out * s[1], s[1], s[0], s[2], s[3], (int)p.m, (int)p.k,
                        positions, (int)p.out_w};
    }
    static __device__ __forceinline__ ImageTaps b_source(const ConvArgs& p, rt_int64 g) {
        const rt_int64* s = p.x_strides;
        return ImageTaps{g * p.group_in * s[1], s[0], s[1], s[2], s[3], (int)p.n, (int)p.k,
                         (int)(p.out_h * p.out_w), (int)p.out_w, (int)(p.kernel_h * p.kernel_w),
                         (int)p.kernel_w, (int)p.in_h, (int)p.in_w, (int)p.stride_h,
                         (int)p.stride_w, (int)p.pad_h, (int)p.pad_w, (int)p.dil_h,
                         (int)p.dil_w};
    }
    // Weight-gradient element (g*Og + row, c, kh, kw), col = (c, kh, kw); no bias.
    template <typename T, typename A>
    static __device__ __forceinline__ void store(const ConvArgs& p, T* out, const T*,
                                                 rt_int64 g, rt_int64 row, rt_int64 col, A acc) {
        int c, kh, kw;
        split_tap((int)col, (int)(p.kernel_h * p.kernel_w), (int)p.kernel_w, c, kh, kw);
        out[(g * p.group_out + row) * p.out_strides[0] + c * p.out_strides[1]
            + kh * p.out_strides[2] + kw * p.out_strides[3]] = Arith<T>::store(acc);
    }
};

// The product problem (gemm.cu's contract) of one convolution kind: A is always the filter-
// side operand f, B the image x.
template <typename T, typename Kind>
struct ConvProblem {
    ConvArgs p;   // a copy: with a reference, as MatrixProduct has, mma kernels take more registers
    T* out;
    const T *x, *f, *bias;

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
        Kind::store(p, out, bias, bi, row, col, acc);
    }
};

// float and double on the CUDA cores, the 16-bit types on the tensor cores.
template <typename T> struct ProductPath {
    template <typename Problem>
    static __device__ __forceinline__ void run(const Problem& prob) { simt_product<T>(prob); }
};
template <> struct ProductPath<rt_float16> {
    template <typename Problem>
    static __device__ __forceinline__ void run(const Problem& prob) {
        mma_product<rt_float16>(prob);
    }
};
template <> struct ProductPath<rt_bfloat16> {
    template <typename Problem>
    static __device__ __forceinline__ void run(const Problem& prob) {
        mma_product<rt_bfloat16>(prob);
    }
};

template <typename T, typename Kind>
__global__ void __launch_bounds__(RT_GEMM_THREADS)
conv_kernel(const ConvArgs p, T* out, const T* x, const T* f, const T* bias) {
    ProductPath<T>::run(ConvProblem<T, Kind>{p, out, x, f, bias});
}
