// Batch norm forward (native_batch_norm) and its training-mode backward
// (native_batch_norm_backward). Compiled after common.cuh and plane_stats.cuh (the plane
// offsets and the training pass's mean and variance).
//
// The input is seen as (batch, channels, inner): inner is the spatial dims, which the host
// coalesces into one strided dim (NCHW contiguous, channels-last, or none for a 2-D input).
// One block per channel walks that channel's count = batch * inner elements, element m at
// (m / inner, m % inner): thread t takes m = t, t + RT_BLOCK_THREADS, ... in turn, then
// block_reduce adds the threads' sums in its fixed tree order (no atomics). Formulas are the
// reference's (reftorch/_ops/nn_normalization.py), in the computation type A:
//
//   training:  mean = sum x / count, var = sum (x - mean)^2 / count,
//              rstd = 1 / sqrt(var + eps); running stats, when given, in place:
//              running_mean = (1 - momentum) * running_mean + momentum * mean,
//              running_var = (1 - momentum) * running_var + momentum * var * count/(count-1)
//              (times infinity when count is 1, as the reference's)
//   eval:      mean = running_mean, rstd = 1 / sqrt(running_var + eps)
//   output:    (x - mean) * rstd [* weight] [+ bias]
//   backward:  x_hat = (x - mean) * rstd, g_hat = grad [* weight],
//              grad_input = rstd * ((g_hat - sum g_hat / count)
//                                   - x_hat * (sum g_hat x_hat / count)),
//              grad_weight = sum grad x_hat, grad_bias = sum grad
//
// Per-channel parameters are 1-D with a stride each; a null pointer: absent (or not wanted).
// The element loops stay rolled (#pragma unroll 1): unrolled, their 64-bit index divisions
// tripled the program's NVRTC time (about 3-4 s to about 1.2 s per arch).
// Name expressions: "batch_norm_kernel<rt_float16>" (the four float types),
// "batch_norm_backward_kernel<double>" (float and double).

// x_strides / out_strides: (batch, channel, inner) strides of the input and the output.
// param_strides: weight, bias, running_mean, running_var. save_mean / save_rstd are
// contiguous (channels,), written in training mode only.
template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
batch_norm_kernel(rt_int64 batch, rt_int64 channels, rt_int64 inner, rt_int64 x_batch_stride,
                  rt_int64 x_channel_stride, rt_int64 x_inner_stride,
                  rt_int64 out_batch_stride, rt_int64 out_channel_stride,
                  rt_int64 out_inner_stride, rt_int64 weight_stride, rt_int64 bias_stride,
                  rt_int64 running_mean_stride, rt_int64 running_var_stride, int training,
                  double momentum, double eps, T* out, T* save_mean, T* save_rstd,
                  const T* in, const T* weight, const T* bias, T* running_mean,
                  T* running_var) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    const rt_int64 count = batch * inner;
    for (rt_int64 c = blockIdx.x; c < channels; c += gridDim.x) {
        const T* x = in + c * x_channel_stride;
        T* y = out + c * out_channel_stride;
        A mean, rstd;
        if (training) {
            A var;
            plane_mean_variance<T>(x, count, inner, x_batch_stride, x_inner_stride, partial,
                                   mean, var);
            rstd = A(1) / rt_sqrt(var + (A)eps);
            if (threadIdx.x == 0) {
                save_mean[c] = Arith<T>::store(mean);
                save_rstd[c] = Arith<T>::store(rstd);
                if (running_mean) {
                    const A keep = (A)(1.0 - momentum);
                    const A take = (A)momentum;
                    const A factor = count > 1 ? (A)((double)count / (double)(count - 1))
                                               : A(1) / A(0);
                    T* rm = running_mean + c * running_mean_stride;
                    T* rv = running_var + c * running_var_stride;
                    *rm = Arith<T>::store(keep * Arith<T>::load(*rm) + take * mean);
                    *rv = Arith<T>::store(keep * Arith<T>::load(*rv) + take * (var * factor));
                }
            }
        } else {
            mean = Arith<T>::load(running_mean[c * running_mean_stride]);
            rstd = A(1) / rt_sqrt(Arith<T>::load(running_var[c * running_var_stride]) + (A)eps);
        }
        const A w = weight ? Arith<T>::load(weight[c * weight_stride]) : A(1);
        const A b = bias ? Arith<T>::load(bias[c * bias_stride]) : A(0);
        #pragma unroll 1
        for (rt_int64 m = threadIdx.x; m < count; m += RT_BLOCK_THREADS) {
            A v = (Arith<T>::load(x[rt_plane_offset(m, inner, x_batch_stride, x_inner_stride)])
                   - mean) * rstd;
            if (weight) v = v * w;
            if (bias) v = v + b;
            y[rt_plane_offset(m, inner, out_batch_stride, out_inner_stride)] =
                Arith<T>::store(v);
        }
    }
}

// grad and x share the input's (batch, channel, inner) geometry through their own strides;
// grad_input is written with out_strides. mean / rstd: the forward's saved statistics
// (contiguous). grad_input, grad_weight, grad_bias: null when not wanted.
template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
batch_norm_backward_kernel(rt_int64 batch, rt_int64 channels, rt_int64 inner,
                           rt_int64 g_batch_stride, rt_int64 g_channel_stride,
                           rt_int64 g_inner_stride, rt_int64 x_batch_stride,
                           rt_int64 x_channel_stride, rt_int64 x_inner_stride,
                           rt_int64 out_batch_stride, rt_int64 out_channel_stride,
                           rt_int64 out_inner_stride, rt_int64 weight_stride, T* grad_input,
                           T* grad_weight, T* grad_bias, const T* grad, const T* in,
                           const T* weight, const T* saved_mean, const T* saved_rstd) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    const rt_int64 count = batch * inner;
    for (rt_int64 c = blockIdx.x; c < channels; c += gridDim.x) {
        const T* g = grad + c * g_channel_stride;
        const T* x = in + c * x_channel_stride;
        const A mean = Arith<T>::load(saved_mean[c]);
        const A rstd = Arith<T>::load(saved_rstd[c]);
        const A w = weight ? Arith<T>::load(weight[c * weight_stride]) : A(1);
        A sum_g = A(0), sum_gx = A(0), sum_gh = A(0), sum_ghx = A(0);
        #pragma unroll 1
        for (rt_int64 m = threadIdx.x; m < count; m += RT_BLOCK_THREADS) {
            const A gi = Arith<T>::load(g[rt_plane_offset(m, inner, g_batch_stride,
                                                          g_inner_stride)]);
            const A x_hat = (Arith<T>::load(x[rt_plane_offset(m, inner, x_batch_stride,
                                                              x_inner_stride)]) - mean) * rstd;
            const A g_hat = weight ? gi * w : gi;
            sum_g += gi;
            sum_gx += gi * x_hat;
            sum_gh += g_hat;
            sum_ghx += g_hat * x_hat;
        }
        sum_g = block_reduce<SumOp>(partial, sum_g);
        sum_gx = block_reduce<SumOp>(partial, sum_gx);
        sum_gh = block_reduce<SumOp>(partial, sum_gh);
        sum_ghx = block_reduce<SumOp>(partial, sum_ghx);
        if (threadIdx.x == 0) {
            if (grad_weight) grad_weight[c] = Arith<T>::store(sum_gx);
            if (grad_bias) grad_bias[c] = Arith<T>::store(sum_g);
        }
        if (!grad_input) continue;
        const A mean_gh = sum_gh / (A)count;
        const A mean_ghx = sum_ghx / (A)count;
        T* o = grad_input + c * out_channel_stride;
        #pragma unroll 1
        for (rt_int64 m = threadIdx.x; m < count; m += RT_BLOCK_THREADS) {
            const A gi = Arith<T>::load(g[rt_plane_offset(m, inner, g_batch_stride,
                                                          g_inner_stride)]);
            const A x_hat = (Arith<T>::load(x[rt_plane_offset(m, inner, x_batch_stride,
                                                              x_inner_stride)]) - mean) * rstd;
            const A g_hat = weight ? gi * w : gi;
            o[rt_plane_offset(m, inner, out_batch_stride, out_inner_stride)] =
                Arith<T>::store(rstd * ((g_hat - mean_gh) - x_hat * mean_ghx));
        }
    }
}
