// softmax and log_softmax along one dim, and their backward ops. Compiled after common.cuh.
//
// One block per row (a row: the elements along the dim, for one position of the other dims;
// `rows` walks those positions, operand 0 the output, then the inputs). Row sums and maxima
// go through block_reduce, in a fixed order (common.cuh). Formulas are the reference's
// (reftorch/_ops/nn_activation.py), in the computation type A: float for float and the 16-bit
// types, double for double, rounded once when stored.
//
//   softmax:       e_i = exp(x_i - max x), out_i = e_i / sum e
//   log_softmax:   out_i = (x_i - max x) - log(sum exp(x_i - max x))
//   backward:      softmax: y_i (g_i - sum g y),  log_softmax: g_i - exp(y_i) sum g
//
// Name expressions: "softmax_kernel<float, false>" (true: log_softmax),
// "softmax_backward_kernel<double, true>".

// n elements per row; `step[k]` is operand k's stride along the dim.
template <typename T, bool Log>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
softmax_kernel(const Geometry<2> rows, rt_int64 n, rt_int64 out_step, rt_int64 in_step,
               T* out, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for (rt_int64 row = blockIdx.x; row < rows.numel; row += gridDim.x) {
        rt_int64 offset[2];
        element_offsets(rows, row, offset);
        T* y = out + offset[0];
        const T* x = in + offset[1];
        A m = AmaxOp::identity<A>();
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS)
            m = AmaxOp::combine(m, Arith<T>::load(x[i * in_step]));
        m = block_reduce<AmaxOp>(partial, m);
        A total = A(0);
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS)
            total += rt_exp(Arith<T>::load(x[i * in_step]) - m);
        total = block_reduce<SumOp>(partial, total);
        const A log_total = Log ? rt_log(total) : A(0);
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
            const A shifted = Arith<T>::load(x[i * in_step]) - m;
            y[i * out_step] = Arith<T>::store(Log ? shifted - log_total
                                                  : rt_exp(shifted) / total);
        }
    }
}

// Operands: out, grad, y (the forward's output).
template <typename T, bool Log>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
softmax_backward_kernel(const Geometry<3> rows, rt_int64 n, rt_int64 out_step,
                        rt_int64 grad_step, rt_int64 y_step, T* out, const T* grad,
                        const T* y) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    for (rt_int64 row = blockIdx.x; row < rows.numel; row += gridDim.x) {
        rt_int64 offset[3];
        element_offsets(rows, row, offset);
        T* o = out + offset[0];
        const T* g = grad + offset[1];
        const T* v = y + offset[2];
        A total = A(0);  // sum g (log_softmax) or sum g y (softmax)
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
            const A gi = Arith<T>::load(g[i * grad_step]);
            total += Log ? gi : gi * Arith<T>::load(v[i * y_step]);
        }
        total = block_reduce<SumOp>(partial, total);
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
            const A gi = Arith<T>::load(g[i * grad_step]);
            const A yi = Arith<T>::load(v[i * y_step]);
            o[i * out_step] = Arith<T>::store(Log ? gi - rt_exp(yi) * total
                                                  : yi * (gi - total));
        }
    }
}
