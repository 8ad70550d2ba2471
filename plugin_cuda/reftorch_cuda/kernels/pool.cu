// 2-d pooling over (N, C, H, W) or (C, H, W) planes, forward and backward. Compiled after
// common.cuh.
//
// Every kernel reads one operand through its four (n, c, h, w) strides (an unbatched input is
// N = 1, stride 0) and writes a new contiguous result. Each result element is computed by one
// thread in the reference's order (reftorch/_ops/nn_pooling.py), so every result is the
// reference's bit for bit:
//
//   max_pool2d_kernel            one thread per output: the window's in-bounds elements, rows
//                                then columns; a later element wins when larger or NaN (ties
//                                keep the first); the index starts at the window's first
//                                in-bounds position, as the reference's first_index.
//   max_pool2d_backward_kernel   one warp per plane: zeros, then each output's gradient added
//                                at its index in output order, rounded to T at each addition
//                                (np.add.at in the gradient's dtype). 32 outputs at a time:
//                                the first lane holding an index adds, in lane order, every
//                                lane's gradient for that index, so no two lanes write one
//                                element and no atomics are used. An index outside the plane is
//                                skipped (never read or written through).
//   avg_pool2d_kernel            one thread per output: the window's in-bounds elements summed
//                                in A (float; double for double) rows then columns, then
//                                (double)sum / divisor, rounded to T (NumPy divides float32 by
//                                the int64 divisor array in double).
//   avg_pool2d_backward_kernel   one thread per input element: sum in double over the kernel
//                                offsets (kh, then kw) of grad / divisor of the output that
//                                reads this element at that offset (the reference's offset
//                                order of `padded[index] += share`).
//   adaptive_avg_pool2d_kernel   one thread per output: the bin summed in A, rows then
//                                columns, then (double)sum / count, rounded to T.
//   adaptive_avg_pool2d_backward_kernel
//                                one thread per input element: sum in double of grad / count
//                                over the bins that hold it, in np.bincount's order over the
//                                reference's gathered offsets: bin offset kh (latest bin
//                                start first), kw, then output row, then output column.
//
// A double is rounded to T as the reference's astype does: once for float and float16, and
// for bfloat16 through float first (ml_dtypes converts double to bfloat16 that way).
// All index arithmetic is 64-bit.
// Name expressions: "max_pool2d_kernel<float>", "avg_pool2d_backward_kernel<rt_bfloat16>", ...

// The strides, in elements, of the operand a kernel reads (or of the indices).
struct PlaneStrides {
    rt_int64 n, c, h, w;
};

// The geometry of one call. `in_*` is always the pooled (forward input) plane and `out_*` the
// pooled output plane, for the backward kernels too; `src` are the strides of the operand the
// kernel reads (the input forward, the gradient backward).
struct Pool2d {
    rt_int64 batch, channels;
    rt_int64 in_h, in_w, out_h, out_w;
    PlaneStrides src;
    rt_int64 kernel_h, kernel_w, step_h, step_w, pad_h, pad_w, dil_h, dil_w;
};
static_assert(sizeof(Pool2d) == 18 * 8, "Pool2d layout");
static_assert(sizeof(PlaneStrides) == 4 * 8, "PlaneStrides layout");

// The storage value nearest a double, as NumPy's / ml_dtypes' astype rounds it.
template <typename T>
__device__ __forceinline__ T from_double(double v) { return (T)v; }

template <>
__device__ __forceinline__ rt_float16 from_double<rt_float16>(double v) {
    rt_float16 h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(v));
    return h;
}

template <>
__device__ __forceinline__ rt_bfloat16 from_double<rt_bfloat16>(double v) {
    return bfloat16_from_float((float)v);
}

// Linear index i of an (N, C, rows, cols) array: its plane's (n, c), row and column.
struct PlaneIndex {
    rt_int64 n, c, row, col, plane;
};

__device__ __forceinline__ PlaneIndex split_index(rt_int64 i, rt_int64 channels,
                                                  rt_int64 rows, rt_int64 cols) {
    PlaneIndex at;
    at.col = i % cols;
    i /= cols;
    at.row = i % rows;
    at.plane = i / rows;
    at.c = at.plane % channels;
    at.n = at.plane / channels;
    return at;
}

__device__ __forceinline__ rt_int64 plane_base(const PlaneStrides& s, const PlaneIndex& at) {
    return at.n * s.n + at.c * s.c;
}

__device__ __forceinline__ rt_int64 min64(rt_int64 a, rt_int64 b) { return a < b ? a : b; }
__device__ __forceinline__ rt_int64 max64(rt_int64 a, rt_int64 b) { return a > b ? a : b; }

// --- max pooling ------------------------------------------------------------------------------

// The first in-bounds tap of a dilated window starting at `start` (taps start + k * dil).
__device__ __forceinline__ rt_int64 first_tap(rt_int64 start, rt_int64 dil) {
    return start >= 0 ? start : start + ((-start + dil - 1) / dil) * dil;
}

template <typename T>
__global__ void __launch_bounds__(256)
max_pool2d_kernel(const Pool2d p, T* out, rt_int64* indices, const T* in) {
    typedef typename Arith<T>::type A;
    const rt_int64 numel = p.batch * p.channels * p.out_h * p.out_w;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const PlaneIndex at = split_index(i, p.channels, p.out_h, p.out_w);
        const T* plane = in + plane_base(p.src, at);
        const rt_int64 h0 = at.row * p.step_h - p.pad_h, w0 = at.col * p.step_w - p.pad_w;
        const rt_int64 h_first = first_tap(h0, p.dil_h), w_first = first_tap(w0, p.dil_w);
        const rt_int64 h_end = min64(h0 + (p.kernel_h - 1) * p.dil_h + 1, p.in_h);
        const rt_int64 w_end = min64(w0 + (p.kernel_w - 1) * p.dil_w + 1, p.in_w);
        T best = Arith<T>::store(-A(1) / A(0));       // -inf: padding never wins
        A best_value = Arith<T>::load(best);
        rt_int64 best_index = h_first * p.in_w + w_first;
        for (rt_int64 h = h_first; h < h_end; h += p.dil_h) {
            for (rt_int64 w = w_first; w < w_end; w += p.dil_w) {
                const T v = plane[h * p.src.h + w * p.src.w];
                const A value = Arith<T>::load(v);
                if (value > best_value || value != value) {
                    best = v;
                    best_value = value;
                    best_index = h * p.in_w + w;
                }
            }
        }
        out[i] = best;
        indices[i] = best_index;
    }
}

// Operands: out (contiguous, the forward input's shape), grad (p.src strides), indices.
template <typename T>
__global__ void __launch_bounds__(256)
max_pool2d_backward_kernel(const Pool2d p, const PlaneStrides index_strides, T* out,
                           const T* grad, const rt_int64* indices) {
    typedef typename Arith<T>::type A;
    const unsigned int all_lanes = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const rt_int64 warps_per_block = blockDim.x / 32;
    const rt_int64 planes = p.batch * p.channels;
    const rt_int64 plane_size = p.in_h * p.in_w, outputs = p.out_h * p.out_w;
    // The plane loop and the chunk loop are the same for every lane of a warp, so every
    // lane reaches each __shfl_sync.
    for (rt_int64 plane = blockIdx.x * warps_per_block + threadIdx.x / 32; plane < planes;
         plane += (rt_int64)gridDim.x * warps_per_block) {
        T* result = out + plane * plane_size;
        for (rt_int64 k = lane; k < plane_size; k += 32) result[k] = Arith<T>::store(A(0));
        __syncwarp();
        PlaneIndex at;
        at.c = plane % p.channels;
        at.n = plane / p.channels;
        const T* g = grad + plane_base(p.src, at);
        const rt_int64* index = indices + plane_base(index_strides, at);
        for (rt_int64 first = 0; first < outputs; first += 32) {
            const rt_int64 o = first + lane;
            rt_int64 target = -1;           // -1: no output, or an index outside the plane
            A value = A(0);
            if (o < outputs) {
                const rt_int64 row = o / p.out_w, col = o - row * p.out_w;
                const rt_int64 k = index[row * index_strides.h + col * index_strides.w];
                if (k >= 0 && k < plane_size) {
                    target = k;
                    value = Arith<T>::load(g[row * p.src.h + col * p.src.w]);
                }
            }
            bool leader = target >= 0;      // the first lane of this chunk with its target
            T total = Arith<T>::store(A(0));
            for (int j = 0; j < 32; ++j) {
                const rt_int64 target_j = __shfl_sync(all_lanes, target, j);
                const A value_j = __shfl_sync(all_lanes, value, j);
                if (target < 0 || target_j != target) continue;
                if (j < lane) {
                    leader = false;
                } else if (leader) {
                    if (j == lane) total = result[target];
                    total = Arith<T>::store(Arith<T>::load(total) + value_j);
                }
            }
            if (leader) result[target] = total;
            __syncwarp();   // this chunk's writes are seen by the next chunk's readers
        }
    }
}

// --- average pooling --------------------------------------------------------------------------

// PyTorch's divisor of output (row, col), and whether its window holds any input element.
__device__ __forceinline__ rt_int64 avg_divisor(const Pool2d& p, rt_int64 row, rt_int64 col,
                                                rt_int64 divisor_override,
                                                int count_include_pad, bool& nonempty) {
    const rt_int64 h0 = row * p.step_h - p.pad_h, w0 = col * p.step_w - p.pad_w;
    const rt_int64 h_end = min64(h0 + p.kernel_h, p.in_h + p.pad_h);
    const rt_int64 w_end = min64(w0 + p.kernel_w, p.in_w + p.pad_w);
    const rt_int64 inside = max64(min64(h_end, p.in_h) - max64(h0, 0), 0) *
                            max64(min64(w_end, p.in_w) - max64(w0, 0), 0);
    nonempty = inside > 0;
    if (divisor_override != 0) return divisor_override;
    return count_include_pad ? (h_end - h0) * (w_end - w0) : inside;
}

template <typename T>
__global__ void __launch_bounds__(256)
avg_pool2d_kernel(const Pool2d p, rt_int64 divisor_override, int count_include_pad, T* out,
                  const T* in) {
    typedef typename Arith<T>::type A;
    const rt_int64 numel = p.batch * p.channels * p.out_h * p.out_w;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const PlaneIndex at = split_index(i, p.channels, p.out_h, p.out_w);
        const T* plane = in + plane_base(p.src, at);
        bool nonempty;
        const rt_int64 divisor = avg_divisor(p, at.row, at.col, divisor_override,
                                             count_include_pad, nonempty);
        const rt_int64 h0 = at.row * p.step_h - p.pad_h, w0 = at.col * p.step_w - p.pad_w;
        const rt_int64 h_end = min64(h0 + p.kernel_h, p.in_h);
        const rt_int64 w_end = min64(w0 + p.kernel_w, p.in_w);
        A total = A(0);   // the padding's zeros add nothing (a sum from +0 is never -0)
        for (rt_int64 h = max64(h0, 0); h < h_end; ++h)
            for (rt_int64 w = max64(w0, 0); w < w_end; ++w)
                total += Arith<T>::load(plane[h * p.src.h + w * p.src.w]);
        out[i] = from_double<T>(nonempty ? (double)total / (double)divisor : 0.0);
    }
}

// Operands: out (contiguous, the forward input's shape), grad (p.src strides).
template <typename T>
__global__ void __launch_bounds__(256)
avg_pool2d_backward_kernel(const Pool2d p, rt_int64 divisor_override, int count_include_pad,
                           T* out, const T* grad) {
    const rt_int64 numel = p.batch * p.channels * p.in_h * p.in_w;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const PlaneIndex at = split_index(i, p.channels, p.in_h, p.in_w);
        const T* g = grad + plane_base(p.src, at);
        double total = 0.0;
        // Offset kh of output row r reads row r * step - pad + kh: the one that reads this
        // row is r = (row + pad - kh) / step, when that divides and is in range.
        for (rt_int64 kh = 0; kh < p.kernel_h; ++kh) {
            const rt_int64 h = at.row + p.pad_h - kh;
            if (h < 0) break;
            const rt_int64 r = h / p.step_h;
            if (r * p.step_h != h || r >= p.out_h) continue;
            for (rt_int64 kw = 0; kw < p.kernel_w; ++kw) {
                const rt_int64 w = at.col + p.pad_w - kw;
                if (w < 0) break;
                const rt_int64 c = w / p.step_w;
                if (c * p.step_w != w || c >= p.out_w) continue;
                bool nonempty;
                const rt_int64 divisor = avg_divisor(p, r, c, divisor_override,
                                                     count_include_pad, nonempty);
                if (nonempty)
                    total += (double)Arith<T>::load(g[r * p.src.h + c * p.src.w]) /
                             (double)divisor;
            }
        }
        out[i] = from_double<T>(total);
    }
}

// --- adaptive average pooling -----------------------------------------------------------------

// Bin o of `out` bins over `size` elements: [floor(o * size / out), ceil((o + 1) * size / out)).
__device__ __forceinline__ rt_int64 bin_start(rt_int64 o, rt_int64 size, rt_int64 out) {
    return o * size / out;
}

__device__ __forceinline__ rt_int64 bin_end(rt_int64 o, rt_int64 size, rt_int64 out) {
    return ((o + 1) * size + out - 1) / out;
}

template <typename T>
__global__ void __launch_bounds__(256)
adaptive_avg_pool2d_kernel(const Pool2d p, T* out, const T* in) {
    typedef typename Arith<T>::type A;
    const rt_int64 numel = p.batch * p.channels * p.out_h * p.out_w;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const PlaneIndex at = split_index(i, p.channels, p.out_h, p.out_w);
        const T* plane = in + plane_base(p.src, at);
        const rt_int64 h_begin = bin_start(at.row, p.in_h, p.out_h);
        const rt_int64 h_end = bin_end(at.row, p.in_h, p.out_h);
        const rt_int64 w_begin = bin_start(at.col, p.in_w, p.out_w);
        const rt_int64 w_end = bin_end(at.col, p.in_w, p.out_w);
        A total = A(0);
        for (rt_int64 h = h_begin; h < h_end; ++h)
            for (rt_int64 w = w_begin; w < w_end; ++w)
                total += Arith<T>::load(plane[h * p.src.h + w * p.src.w]);
        const rt_int64 count = (h_end - h_begin) * (w_end - w_begin);
        out[i] = from_double<T>((double)total / (double)count);
    }
}

// The bins that hold element x of `size` (out >= 1): o in [lowest, highest], where bins are
// monotone, so they are consecutive. Bins with one start form a run; the first bin of the
// run that starts at s is ceil(s * out / size).
struct BinRange {
    rt_int64 lowest, highest;
};

__device__ __forceinline__ BinRange bins_holding(rt_int64 x, rt_int64 size, rt_int64 out) {
    BinRange r;
    r.lowest = x * out / size;                   // the first bin whose end passes x
    r.highest = ((x + 1) * out - 1) / size;      // the last bin starting at or before x
    return r;
}

__device__ __forceinline__ rt_int64 first_bin_starting_at(rt_int64 s, rt_int64 size,
                                                          rt_int64 out) {
    return (s * out + size - 1) / size;
}

// Operands: out (contiguous, the forward input's shape), grad (p.src strides).
template <typename T>
__global__ void __launch_bounds__(256)
adaptive_avg_pool2d_backward_kernel(const Pool2d p, T* out, const T* grad) {
    const rt_int64 numel = p.batch * p.channels * p.in_h * p.in_w;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const PlaneIndex at = split_index(i, p.channels, p.in_h, p.in_w);
        const T* g = grad + plane_base(p.src, at);
        const BinRange rows = bins_holding(at.row, p.in_h, p.out_h);
        const BinRange cols = bins_holding(at.col, p.in_w, p.out_w);
        double total = 0.0;
        // The reference visits offset kh = row - start ascending, so the latest start first;
        // bins of one start (one kh) in ascending order; then the same for columns.
        for (rt_int64 r_end = rows.highest + 1; r_end > rows.lowest;) {
            const rt_int64 r_begin = max64(
                rows.lowest,
                first_bin_starting_at(bin_start(r_end - 1, p.in_h, p.out_h), p.in_h, p.out_h));
            for (rt_int64 c_end = cols.highest + 1; c_end > cols.lowest;) {
                const rt_int64 c_begin = max64(
                    cols.lowest,
                    first_bin_starting_at(bin_start(c_end - 1, p.in_w, p.out_w), p.in_w,
                                          p.out_w));
                for (rt_int64 r = r_begin; r < r_end; ++r) {
                    const rt_int64 height = bin_end(r, p.in_h, p.out_h) -
                                            bin_start(r, p.in_h, p.out_h);
                    for (rt_int64 c = c_begin; c < c_end; ++c) {
                        const rt_int64 count = height * (bin_end(c, p.in_w, p.out_w) -
                                                         bin_start(c, p.in_w, p.out_w));
                        total += (double)Arith<T>::load(g[r * p.src.h + c * p.src.w]) /
                                 (double)count;
                    }
                }
                c_end = c_begin;
            }
            r_end = r_begin;
        }
        out[i] = from_double<T>(total);
    }
}
