// Pooling over the (D, H, W) volumes of (N, C, D, H, W) or (C, D, H, W) inputs, forward and
// backward; 2-D pooling runs as 3-D with a unit depth (kernel 1, step 1, no padding), whose
// loops run once, so every order below is the 2-D one too. Compiled after common.cuh.
//
// Every kernel reads one operand through its five (n, c, d, h, w) strides (an unbatched input
// is N = 1, stride 0; a 2-D one has depth stride 0) and writes a new contiguous result. Each
// result element is computed by one thread in the reference's order
// (reftorch/_ops/nn_pooling.py: kernel offsets in row-major (kd, kh, kw) order), so every
// result is the reference's bit for bit:
//
//   max_pool_kernel              one thread per output: the window's in-bounds elements, depth
//                                then rows then columns; a later element wins when larger or
//                                NaN (ties keep the first); the index (flat in the volume,
//                                (d * H + h) * W + w) starts at the window's first in-bounds
//                                position, as the reference's first_index.
//   max_pool_backward_kernel     one warp per volume: zeros, then each output's gradient added
//                                at its index in output order, rounded to T at each addition
//                                (np.add.at in the gradient's dtype). 32 outputs at a time:
//                                the first lane holding an index adds, in lane order, every
//                                lane's gradient for that index, so no two lanes write one
//                                element and no atomics are used. An index outside the volume
//                                is skipped (never read or written through).
//   avg_pool_kernel              one thread per output: the window's in-bounds elements summed
//                                in A (float; double for double) depth, rows then columns,
//                                then (double)sum / divisor, rounded to T (NumPy divides
//                                float32 by the int64 divisor array in double).
//   avg_pool_backward_kernel     one thread per input element: sum in double over the kernel
//                                offsets (kd, kh, then kw) of grad / divisor of the output
//                                that reads this element at that offset (the reference's
//                                offset order of `padded[index] += share`).
//   adaptive_avg_pool_kernel     one thread per output: the bin summed in A, depth, rows then
//                                columns, then (double)sum / count, rounded to T.
//   adaptive_avg_pool_backward_kernel
//                                one thread per input element: sum in double of grad / count
//                                over the bins that hold it, in np.bincount's order over the
//                                reference's gathered offsets: bin offsets kd, kh, kw (each
//                                the latest bin start first), then output depth, row, column.
//
// A double is rounded to T as the reference's astype does: once for float and float16, and
// for bfloat16 through float first (ml_dtypes converts double to bfloat16 that way).
// All index arithmetic is 64-bit.
// Name expressions: "max_pool_kernel<float>", "avg_pool_backward_kernel<rt_bfloat16>", ...

// The strides, in elements, of the operand a kernel reads (or of the indices).
struct VolumeStrides {
    rt_int64 n, c, d, h, w;
};

// One spatial dim: the pooled (forward input) size, the pooled output size, and the window.
struct PoolAxis {
    rt_int64 in, out, kernel, step, pad, dil;
};

// The geometry of one call. `in` is always the pooled (forward input) volume and `out` the
// pooled output volume, for the backward kernels too; `src` are the strides of the operand
// the kernel reads (the input forward, the gradient backward).
struct Pool3d {
    rt_int64 batch, channels;
    PoolAxis d, h, w;
    VolumeStrides src;
};
static_assert(sizeof(Pool3d) == 25 * 8, "Pool3d layout");
static_assert(sizeof(VolumeStrides) == 5 * 8, "VolumeStrides layout");

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

// Linear index i of an (N, C, depth, rows, cols) array: its volume's (n, c) and (z, y, x).
struct VolumeIndex {
    rt_int64 n, c, z, y, x, volume;
};

__device__ __forceinline__ VolumeIndex split_index(rt_int64 i, rt_int64 channels,
                                                   rt_int64 depth, rt_int64 rows,
                                                   rt_int64 cols) {
    VolumeIndex at;
    at.x = i % cols;
    i /= cols;
    at.y = i % rows;
    i /= rows;
    at.z = i % depth;
    at.volume = i / depth;
    at.c = at.volume % channels;
    at.n = at.volume / channels;
    return at;
}

__device__ __forceinline__ VolumeIndex input_index(rt_int64 i, const Pool3d& p) {
    return split_index(i, p.channels, p.d.in, p.h.in, p.w.in);
}

__device__ __forceinline__ VolumeIndex output_index(rt_int64 i, const Pool3d& p) {
    return split_index(i, p.channels, p.d.out, p.h.out, p.w.out);
}

__device__ __forceinline__ rt_int64 volume_base(const VolumeStrides& s, rt_int64 n,
                                                rt_int64 c) {
    return n * s.n + c * s.c;
}

__device__ __forceinline__ rt_int64 at_strides(const VolumeStrides& s, rt_int64 z, rt_int64 y,
                                               rt_int64 x) {
    return z * s.d + y * s.h + x * s.w;
}

__device__ __forceinline__ rt_int64 min64(rt_int64 a, rt_int64 b) { return a < b ? a : b; }
__device__ __forceinline__ rt_int64 max64(rt_int64 a, rt_int64 b) { return a > b ? a : b; }

// --- max pooling ------------------------------------------------------------------------------

// The in-bounds taps of window o along one dim: first, first + dil, ... below end.
struct Taps {
    rt_int64 first, end;
};

__device__ __forceinline__ Taps dilated_taps(const PoolAxis& a, rt_int64 o) {
    const rt_int64 start = o * a.step - a.pad;
    // the first tap at or past 0 (taps are start + k * dil)
    const rt_int64 first = start >= 0 ? start : start + ((-start + a.dil - 1) / a.dil) * a.dil;
    return Taps{first, min64(start + (a.kernel - 1) * a.dil + 1, a.in)};
}

template <typename T>
__global__ void __launch_bounds__(256)
max_pool_kernel(const Pool3d p, T* out, rt_int64* indices, const T* in) {
    typedef typename Arith<T>::type A;
    const rt_int64 numel = p.batch * p.channels * p.d.out * p.h.out * p.w.out;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const VolumeIndex at = output_index(i, p);
        const T* volume = in + volume_base(p.src, at.n, at.c);
        const Taps zs = dilated_taps(p.d, at.z), ys = dilated_taps(p.h, at.y),
                   xs = dilated_taps(p.w, at.x);
        T best = Arith<T>::store(-A(1) / A(0));       // -inf: padding never wins
        A best_value = Arith<T>::load(best);
        rt_int64 best_index = (zs.first * p.h.in + ys.first) * p.w.in + xs.first;
        for (rt_int64 z = zs.first; z < zs.end; z += p.d.dil) {
            for (rt_int64 y = ys.first; y < ys.end; y += p.h.dil) {
                for (rt_int64 x = xs.first; x < xs.end; x += p.w.dil) {
                    const T v = volume[at_strides(p.src, z, y, x)];
                    const A value = Arith<T>::load(v);
                    if (value > best_value || value != value) {
                        best = v;
                        best_value = value;
                        best_index = (z * p.h.in + y) * p.w.in + x;
                    }
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
max_pool_backward_kernel(const Pool3d p, const VolumeStrides index_strides, T* out,
                         const T* grad, const rt_int64* indices) {
    typedef typename Arith<T>::type A;
    const unsigned int all_lanes = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const rt_int64 warps_per_block = blockDim.x / 32;
    const rt_int64 volumes = p.batch * p.channels;
    const rt_int64 volume_size = p.d.in * p.h.in * p.w.in;
    const rt_int64 plane_outputs = p.h.out * p.w.out, outputs = p.d.out * plane_outputs;
    // The volume loop and the chunk loop are the same for every lane of a warp, so every
    // lane reaches each __shfl_sync.
    for (rt_int64 v = blockIdx.x * warps_per_block + threadIdx.x / 32; v < volumes;
         v += (rt_int64)gridDim.x * warps_per_block) {
        T* result = out + v * volume_size;
        for (rt_int64 k = lane; k < volume_size; k += 32) result[k] = Arith<T>::store(A(0));
        __syncwarp();
        const rt_int64 c = v % p.channels, n = v / p.channels;
        const T* g = grad + volume_base(p.src, n, c);
        const rt_int64* index = indices + volume_base(index_strides, n, c);
        for (rt_int64 first = 0; first < outputs; first += 32) {
            const rt_int64 o = first + lane;
            rt_int64 target = -1;           // -1: no output, or an index outside the volume
            A value = A(0);
            if (o < outputs) {
                const rt_int64 z = o / plane_outputs, rest = o - z * plane_outputs;
                const rt_int64 y = rest / p.w.out, x = rest - y * p.w.out;
                const rt_int64 k = index[at_strides(index_strides, z, y, x)];
                if (k >= 0 && k < volume_size) {
                    target = k;
                    value = Arith<T>::load(g[at_strides(p.src, z, y, x)]);
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

// Window o along one dim, clipped to the padded input [start, padded_end), and the count of
// input (non-padding) elements inside it.
struct Span {
    rt_int64 start, padded_end, inside;
};

__device__ __forceinline__ Span avg_span(const PoolAxis& a, rt_int64 o) {
    const rt_int64 start = o * a.step - a.pad;
    const rt_int64 end = min64(start + a.kernel, a.in + a.pad);
    return Span{start, end, max64(min64(end, a.in) - max64(start, 0), 0)};
}

// PyTorch's divisor of output (z, y, x), and whether its window holds any input element.
__device__ __forceinline__ rt_int64 avg_divisor(const Pool3d& p, rt_int64 z, rt_int64 y,
                                                rt_int64 x, rt_int64 divisor_override,
                                                int count_include_pad, bool& nonempty) {
    const Span sz = avg_span(p.d, z), sy = avg_span(p.h, y), sx = avg_span(p.w, x);
    const rt_int64 inside = sz.inside * sy.inside * sx.inside;
    nonempty = inside > 0;
    if (divisor_override != 0) return divisor_override;
    return count_include_pad ? (sz.padded_end - sz.start) * (sy.padded_end - sy.start) *
                                   (sx.padded_end - sx.start)
                             : inside;
}

template <typename T>
__global__ void __launch_bounds__(256)
avg_pool_kernel(const Pool3d p, rt_int64 divisor_override, int count_include_pad, T* out,
                const T* in) {
    typedef typename Arith<T>::type A;
    const rt_int64 numel = p.batch * p.channels * p.d.out * p.h.out * p.w.out;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const VolumeIndex at = output_index(i, p);
        const T* volume = in + volume_base(p.src, at.n, at.c);
        bool nonempty;
        const rt_int64 divisor = avg_divisor(p, at.z, at.y, at.x, divisor_override,
                                             count_include_pad, nonempty);
        const rt_int64 z0 = at.z * p.d.step - p.d.pad, y0 = at.y * p.h.step - p.h.pad,
                       x0 = at.x * p.w.step - p.w.pad;
        const rt_int64 z_end = min64(z0 + p.d.kernel, p.d.in),
                       y_end = min64(y0 + p.h.kernel, p.h.in),
                       x_end = min64(x0 + p.w.kernel, p.w.in);
        A total = A(0);   // the padding's zeros add nothing (a sum from +0 is never -0)
        for (rt_int64 z = max64(z0, 0); z < z_end; ++z)
            for (rt_int64 y = max64(y0, 0); y < y_end; ++y)
                for (rt_int64 x = max64(x0, 0); x < x_end; ++x)
                    total += Arith<T>::load(volume[at_strides(p.src, z, y, x)]);
        out[i] = from_double<T>(nonempty ? (double)total / (double)divisor : 0.0);
    }
}

// The output r that reads position `pos` at kernel offset k along one dim (pos + pad - k >= 0,
// the callers' loop bound), or -1: r * step == pos + pad - k, r < out.
__device__ __forceinline__ rt_int64 reading_output(const PoolAxis& a, rt_int64 pos,
                                                   rt_int64 k) {
    const rt_int64 t = pos + a.pad - k, r = t / a.step;
    return r * a.step == t && r < a.out ? r : -1;
}

// Operands: out (contiguous, the forward input's shape), grad (p.src strides).
template <typename T>
__global__ void __launch_bounds__(256)
avg_pool_backward_kernel(const Pool3d p, rt_int64 divisor_override, int count_include_pad,
                         T* out, const T* grad) {
    const rt_int64 numel = p.batch * p.channels * p.d.in * p.h.in * p.w.in;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const VolumeIndex at = input_index(i, p);
        const T* g = grad + volume_base(p.src, at.n, at.c);
        double total = 0.0;
        // Offset k of output r reads r * step - pad + k: past k = pos + pad none reads pos.
        for (rt_int64 kd = 0; kd < p.d.kernel && kd <= at.z + p.d.pad; ++kd) {
            const rt_int64 rz = reading_output(p.d, at.z, kd);
            if (rz < 0) continue;
            for (rt_int64 kh = 0; kh < p.h.kernel && kh <= at.y + p.h.pad; ++kh) {
                const rt_int64 ry = reading_output(p.h, at.y, kh);
                if (ry < 0) continue;
                for (rt_int64 kw = 0; kw < p.w.kernel && kw <= at.x + p.w.pad; ++kw) {
                    const rt_int64 rx = reading_output(p.w, at.x, kw);
                    if (rx < 0) continue;
                    bool nonempty;
                    const rt_int64 divisor = avg_divisor(p, rz, ry, rx, divisor_override,
                                                         count_include_pad, nonempty);
                    if (nonempty)
                        total += (double)Arith<T>::load(g[at_strides(p.src, rz, ry, rx)]) /
                                 (double)divisor;
                }
            }
        }
        out[i] = from_double<T>(total);
    }
}

// --- adaptive average pooling -----------------------------------------------------------------

// Bin o of `out` bins over `size` elements: [floor(o * size / out), ceil((o + 1) * size / out)).
__device__ __forceinline__ rt_int64 bin_start(rt_int64 o, const PoolAxis& a) {
    return o * a.in / a.out;
}

__device__ __forceinline__ rt_int64 bin_end(rt_int64 o, const PoolAxis& a) {
    return ((o + 1) * a.in + a.out - 1) / a.out;
}

__device__ __forceinline__ rt_int64 bin_size(rt_int64 o, const PoolAxis& a) {
    return bin_end(o, a) - bin_start(o, a);
}

template <typename T>
__global__ void __launch_bounds__(256)
adaptive_avg_pool_kernel(const Pool3d p, T* out, const T* in) {
    typedef typename Arith<T>::type A;
    const rt_int64 numel = p.batch * p.channels * p.d.out * p.h.out * p.w.out;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const VolumeIndex at = output_index(i, p);
        const T* volume = in + volume_base(p.src, at.n, at.c);
        A total = A(0);
        for (rt_int64 z = bin_start(at.z, p.d); z < bin_end(at.z, p.d); ++z)
            for (rt_int64 y = bin_start(at.y, p.h); y < bin_end(at.y, p.h); ++y)
                for (rt_int64 x = bin_start(at.x, p.w); x < bin_end(at.x, p.w); ++x)
                    total += Arith<T>::load(volume[at_strides(p.src, z, y, x)]);
        const rt_int64 count = bin_size(at.z, p.d) * bin_size(at.y, p.h) * bin_size(at.x, p.w);
        out[i] = from_double<T>((double)total / (double)count);
    }
}

// The bins that hold element x along one dim (out >= 1): o in [lowest, end), consecutive,
// as bins are monotone. Bins with one start form a run; the reference visits runs by
// offset x - start ascending, so the latest start first, and a run's bins ascending.
struct BinRuns {
    rt_int64 lowest, end;
};

__device__ __forceinline__ BinRuns bins_holding(rt_int64 x, const PoolAxis& a) {
    // the first bin whose end passes x; one past the last bin starting at or before x
    return BinRuns{x * a.out / a.in, ((x + 1) * a.out - 1) / a.in + 1};
}

// The first bin of the run that ends (exclusive) at `end`: the first bin sharing the start of
// bin end - 1, which is ceil(start * out / in), and never below the lowest holding bin.
__device__ __forceinline__ rt_int64 run_begin(rt_int64 end, const BinRuns& bins,
                                              const PoolAxis& a) {
    const rt_int64 start = bin_start(end - 1, a);
    return max64(bins.lowest, (start * a.out + a.in - 1) / a.in);
}

// Operands: out (contiguous, the forward input's shape), grad (p.src strides).
template <typename T>
__global__ void __launch_bounds__(256)
adaptive_avg_pool_backward_kernel(const Pool3d p, T* out, const T* grad) {
    const rt_int64 numel = p.batch * p.channels * p.d.in * p.h.in * p.w.in;
    RT_GRID_STRIDE_LOOP(i, numel) {
        const VolumeIndex at = input_index(i, p);
        const T* g = grad + volume_base(p.src, at.n, at.c);
        const BinRuns zs = bins_holding(at.z, p.d), ys = bins_holding(at.y, p.h),
                      xs = bins_holding(at.x, p.w);
        double total = 0.0;
        // Runs of depth, row and column bins (one offset each), then their bins.
        for (rt_int64 z_end = zs.end, z_begin; z_end > zs.lowest; z_end = z_begin) {
            z_begin = run_begin(z_end, zs, p.d);
            for (rt_int64 y_end = ys.end, y_begin; y_end > ys.lowest; y_end = y_begin) {
                y_begin = run_begin(y_end, ys, p.h);
                for (rt_int64 x_end = xs.end, x_begin; x_end > xs.lowest; x_end = x_begin) {
                    x_begin = run_begin(x_end, xs, p.w);
                    for (rt_int64 z = z_begin; z < z_end; ++z) {
                        for (rt_int64 y = y_begin; y < y_end; ++y) {
                            const rt_int64 area = bin_size(z, p.d) * bin_size(y, p.h);
                            for (rt_int64 x = x_begin; x < x_end; ++x) {
                                const rt_int64 count = area * bin_size(x, p.w);
                                total += (double)Arith<T>::load(g[at_strides(p.src, z, y, x)]) /
                                         (double)count;
                            }
                        }
                    }
                }
            }
        }
        out[i] = from_double<T>(total);
    }
}
