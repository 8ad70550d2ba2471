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

// The bytes of dynamic shared memory this launch was given.
__device__ __forceinline__ unsigned dynamic_shared_bytes() {
    unsigned bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
    return bytes;
}

// n elements per row; `out_step` and `in_step` are the operands' strides along the dim.
// When the launch gives the block n * sizeof(A) bytes of dynamic shared memory (the host does
// for rows up to a limit), the row is read from global memory once and each exponential is
// computed once: a thread keeps its own elements' x - max, then exp(x - max), in the shared
// row between the passes. The values and their order are the same either way.
template <typename T, bool Log>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
softmax_kernel(const Geometry<2> rows, rt_int64 n, rt_int64 out_step, rt_int64 in_step,
               T* out, const T* in) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    extern __shared__ __align__(16) unsigned char row_bytes[];
    A* cache = reinterpret_cast<A*>(row_bytes);
    const bool cached = (rt_int64)dynamic_shared_bytes() >= n * (rt_int64)sizeof(A);
    for (rt_int64 row = blockIdx.x; row < rows.numel; row += gridDim.x) {
        rt_int64 offset[2];
        element_offsets(rows, row, offset);
        T* y = out + offset[0];
        const T* x = in + offset[1];
        A m = AmaxOp::identity<A>();
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
            const A xi = Arith<T>::load(x[i * in_step]);
            if (cached) cache[i] = xi;
            m = AmaxOp::combine(m, xi);
        }
        m = block_reduce<AmaxOp>(partial, m);
        A total = A(0);
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
            const A shifted = (cached ? cache[i] : Arith<T>::load(x[i * in_step])) - m;
            const A e = rt_exp(shifted);
            if (cached) cache[i] = Log ? shifted : e;
            total += e;
        }
        total = block_reduce<SumOp>(partial, total);
        const A log_total = Log ? rt_log(total) : A(0);
        for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
            A v;
            if (cached) {
                v = Log ? cache[i] - log_total : cache[i] / total;
            } else {
                const A shifted = Arith<T>::load(x[i * in_step]) - m;
                v = Log ? shifted - log_total : rt_exp(shifted) / total;
            }
            y[i * out_step] = Arith<T>::store(v);
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
