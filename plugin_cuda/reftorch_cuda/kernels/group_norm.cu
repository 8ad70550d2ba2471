// group_norm forward (native_group_norm: output, mean, rstd). Compiled after common.cuh and
// plane_stats.cuh (the plane offsets and the mean and variance passes, batchnorm.cu's too).
//
// The input is seen as (batch, channels, inner): inner is the spatial dims, which the host
// coalesces into one strided dim (none for a 2-D input: inner 1). A row is one (n, g) pair:
// the count = (channels / groups) * inner elements of group g of sample n, element m at
// channel g * per_group + m / inner, position m % inner. One block per row, the reference's
// two passes (reftorch/_ops/nn_normalization.py) in the computation type A:
//   mean = sum x / count,  var = sum (x - mean)^2 / count,  rstd = 1 / sqrt(var + eps),
//   out = (x - mean) * rstd [* weight[c]] [+ bias[c]]
// Thread t takes m = t, t + RT_BLOCK_THREADS, ... in turn and block_reduce adds the threads'
// sums in its fixed tree order (no atomics), so results differ from NumPy's pairwise sums by
// rounding only and depend on the shape alone. The output is contiguous (batch, channels,
// inner), as the reference's; mean_out and rstd_out contiguous (batch, groups).
// weight and bias are null pointers when absent.
//
// Name expressions: "group_norm_kernel<float>" (the four float types).

template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
group_norm_kernel(rt_int64 batch, rt_int64 channels, rt_int64 inner, rt_int64 groups,
                  rt_int64 x_batch_stride, rt_int64 x_channel_stride, rt_int64 x_inner_stride,
                  rt_int64 weight_stride, rt_int64 bias_stride, double eps, T* out,
                  T* mean_out, T* rstd_out, const T* in, const T* weight, const T* bias) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    const rt_int64 per_group = channels / groups;
    const rt_int64 count = per_group * inner;
    const rt_int64 rows = batch * groups;
    for (rt_int64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const rt_int64 n = row / groups;
        const rt_int64 first_channel = (row - n * groups) * per_group;
        const T* x = in + n * x_batch_stride + first_channel * x_channel_stride;
        // The output is contiguous: a row's elements are consecutive.
        T* y = out + row * count;
        A mean, var;
        plane_mean_variance<T>(x, count, inner, x_channel_stride, x_inner_stride, partial, mean,
                               var);
        const A rstd = A(1) / rt_sqrt(var + (A)eps);
#pragma unroll 1
        for (rt_int64 m = threadIdx.x; m < count; m += RT_BLOCK_THREADS) {
            const rt_int64 c = first_channel + m / inner;
            A v = (Arith<T>::load(x[rt_plane_offset(m, inner, x_channel_stride,
                                                    x_inner_stride)]) - mean) * rstd;
            if (weight) v = v * Arith<T>::load(weight[c * weight_stride]);
            if (bias) v = v + Arith<T>::load(bias[c * bias_stride]);
            y[m] = Arith<T>::store(v);
        }
        if (threadIdx.x == 0) {
            mean_out[row] = Arith<T>::store(mean);
            rstd_out[row] = Arith<T>::store(rstd);
        }
    }
}
