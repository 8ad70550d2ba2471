// layer_norm forward (native_layer_norm: output, mean, rstd). Compiled after common.cuh.
//
// One block per row (the normalized elements for one position of the leading dims), the
// reference's two passes (reftorch/_ops/nn_normalization.py) in the computation type A:
//   mean = sum x / n,  var = sum (x - mean)^2 / n,  rstd = 1 / sqrt(var + eps),
//   out = (x - mean) * rstd [* weight] [+ bias]
// with the sums in block_reduce's fixed order (common.cuh), so results differ from NumPy's
// pairwise sums by rounding only. weight and bias are null pointers when absent.
//
// Name expressions: "layer_norm_kernel<float>".

// `rows` walks the leading dims: operand 0 the output, operand 1 the input. n elements per
// row; each operand's step along the (coalesced) normalized dims. mean_out and rstd_out are
// contiguous, one element per row.
template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
layer_norm_kernel(const Geometry<2> rows, rt_int64 n, rt_int64 out_step, rt_int64 x_step,
                  rt_int64 weight_step, rt_int64 bias_step, double eps, T* out, T* mean_out,
                  T* rstd_out, const T* in, const T* weight, const T* bias) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for (rt_int64 row = blockIdx.x; row < rows.numel; row += gridDim.x) {
        rt_int64 offset[2];
        element_offsets(rows, row, offset);
        T* y = out + offset[0];
        const T* x = in + offset[1];
        A total = A(0);
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS)
            total += Arith<T>::load(x[i * x_step]);
        const A mean = block_reduce<SumOp>(partial, total) / (A)n;
        A squares = A(0);
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
            const A centered = Arith<T>::load(x[i * x_step]) - mean;
            squares += centered * centered;
        }
        const A var = block_reduce<SumOp>(partial, squares) / (A)n;
        const A rstd = A(1) / rt_sqrt(var + (A)eps);
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
            A v = (Arith<T>::load(x[i * x_step]) - mean) * rstd;
            if (weight) v = v * Arith<T>::load(weight[i * weight_step]);
            if (bias) v = v + Arith<T>::load(bias[i * bias_step]);
            y[i * out_step] = Arith<T>::store(v);
        }
        if (threadIdx.x == 0) {
            mean_out[row] = Arith<T>::store(mean);
            rstd_out[row] = Arith<T>::store(rstd);
        }
    }
}
