// nll_loss forward and backward (nll_loss2d's 4-D form too), and the target check they share.
// Compiled after common.cuh.
//
// The input is (batch, classes, spatial): a (C,) input is one row, an (N, C) input has
// spatial 1, an (N, C, H, W) input has its H and W coalesced by the host into one strided dim.
// Row i (in [0, n), n = batch * spatial) is position (b, s) = (i / spatial, i % spatial); its
// class c is at x[b * x_batch_stride + s * x_spatial_stride + c * x_class_stride] and its
// int64 target at target[b * target_batch_stride + s * target_spatial_stride]. The formulas
// are the reference's (reftorch/_ops/nn_loss.py) in the computation type A (float for float
// and the 16-bit types, double for double), rounded once when stored:
//
//   forward:   loss_i = -(x[i, t_i] * w[t_i]), total_weight = sum w[t_i],
//              'sum' = sum loss_i, 'mean' = sum loss_i / total_weight (NaN when it is 0 / 0)
//   backward:  grad_input[i, c] = -w[t_i] * g_i at c = t_i, 0 elsewhere (g_i the row's
//              incoming gradient, or the loss's one gradient divided by total_weight for
//              'mean')
//
// with w = 1 without weights. A row whose target is ignore_index counts 0 in both sums (its
// loss is 0, as PyTorch's). A target outside [0, classes) that is not ignore_index is never
// used as an index: the kernels treat it as ignored, and nll_check_targets_kernel records the
// first one, which the host reads back and raises as the reference's IndexError.
//
// Name expressions: "nll_check_targets_kernel<long long>", "nll_loss_kernel<float>",
// "nll_loss_backward_kernel<float>".

#define RT_REDUCTION_NONE 0
#define RT_REDUCTION_MEAN 1
#define RT_REDUCTION_SUM 2

struct MinRowOp {
    template <typename A> static __device__ A combine(A a, A b) { return a < b ? a : b; }
};

// Where row i's (b, s) position is in an operand with (batch, spatial) strides.
__device__ __forceinline__ rt_int64 rt_row_offset(rt_int64 i, rt_int64 spatial,
                                                  rt_int64 batch_stride,
                                                  rt_int64 spatial_stride) {
    const rt_int64 b = i / spatial;
    return b * batch_stride + (i - b * spatial) * spatial_stride;
}

// Whether target t is a class a kernel may index with.
__device__ __forceinline__ bool rt_valid_target(rt_int64 t, rt_int64 classes,
                                                rt_int64 ignore_index) {
    return t != ignore_index && t >= 0 && t < classes;
}

// One block: status[0] = the first row (in row order) whose target is neither ignore_index
// nor a class, or n when there is none; status[1] = that row's target (0 when none). Thread
// t checks rows t, t + RT_BLOCK_THREADS, ... and stops at its first bad row; the block's
// smallest is the first.
template <typename I>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
nll_check_targets_kernel(rt_int64 n, rt_int64 classes, rt_int64 spatial,
                         rt_int64 target_batch_stride, rt_int64 target_spatial_stride,
                         rt_int64 ignore_index, rt_int64* status, const I* target) {
    __shared__ rt_int64 partial[RT_BLOCK_THREADS];
    rt_int64 first = n;
    for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
        const rt_int64 t = (rt_int64)target[rt_row_offset(i, spatial, target_batch_stride,
                                                          target_spatial_stride)];
        if (t != ignore_index && (t < 0 || t >= classes)) {
            first = i;
            break;
        }
    }
    first = block_reduce<MinRowOp>(partial, first);
    if (threadIdx.x == 0) {
        status[0] = first;
        status[1] = first < n ? (rt_int64)target[rt_row_offset(first, spatial,
                                                               target_batch_stride,
                                                               target_spatial_stride)]
                              : 0;
    }
}

// One block for the whole loss, so both sums have one fixed order (no atomics): thread t adds
// the rows t, t + RT_BLOCK_THREADS, ... in turn, then block_reduce adds the threads' sums in
// its tree order. 'none' also writes each row's loss to out[i] (contiguous in row order);
// 'mean' and 'sum' write out[0]. total_weight[0] is written for every reduction, as the
// reference returns it.
template <typename T>
__global__ void __launch_bounds__(RT_BLOCK_THREADS)
nll_loss_kernel(rt_int64 n, rt_int64 classes, rt_int64 spatial, rt_int64 x_batch_stride,
                rt_int64 x_class_stride, rt_int64 x_spatial_stride,
                rt_int64 target_batch_stride, rt_int64 target_spatial_stride,
                rt_int64 weight_stride, rt_int64 ignore_index, int reduction, T* out,
                T* total_weight, const T* x, const rt_int64* target, const T* weight) {
    typedef typename Arith<T>::type A;
    __shared__ A partial[RT_BLOCK_THREADS];
    A loss_sum = A(0);
    A weight_sum = A(0);
    for (rt_int64 i = threadIdx.x; i < n; i += RT_BLOCK_THREADS) {
        const rt_int64 t = target[rt_row_offset(i, spatial, target_batch_stride,
                                                target_spatial_stride)];
        A loss = A(0);
        A w = A(0);
        if (rt_valid_target(t, classes, ignore_index)) {
            w = weight ? Arith<T>::load(weight[t * weight_stride]) : A(1);
            const rt_int64 at = rt_row_offset(i, spatial, x_batch_stride, x_spatial_stride);
            loss = -(Arith<T>::load(x[at + t * x_class_stride]) * w);
        }
        if (reduction == RT_REDUCTION_NONE) out[i] = Arith<T>::store(loss);
        loss_sum += loss;
        weight_sum += w;
    }
    loss_sum = block_reduce<SumOp>(partial, loss_sum);
    weight_sum = block_reduce<SumOp>(partial, weight_sum);
    if (threadIdx.x == 0) {
        total_weight[0] = Arith<T>::store(weight_sum);
        if (reduction == RT_REDUCTION_MEAN) out[0] = Arith<T>::store(loss_sum / weight_sum);
        if (reduction == RT_REDUCTION_SUM) out[0] = Arith<T>::store(loss_sum);
    }
}

// Elementwise over the contiguous (batch, classes, spatial) result: element k is (b, c, s),
// row i = b * spatial + s. grad's strides are (batch, spatial), both 0 for the one gradient
// of a reduced loss; `mean` divides it by total_weight[0] (as the reference does, before the
// product). A bad target equals no valid class here, so its row is zeros.
template <typename T>
__global__ void __launch_bounds__(256)
nll_loss_backward_kernel(rt_int64 n, rt_int64 classes, rt_int64 spatial,
                         rt_int64 grad_batch_stride, rt_int64 grad_spatial_stride,
                         rt_int64 target_batch_stride, rt_int64 target_spatial_stride,
                         rt_int64 weight_stride, rt_int64 ignore_index, int mean, T* out,
                         const T* grad, const rt_int64* target, const T* weight,
                         const T* total_weight) {
    typedef typename Arith<T>::type A;
    const rt_int64 plane = classes * spatial;
    RT_GRID_STRIDE_LOOP(k, n * classes) {
        const rt_int64 b = k / plane;
        const rt_int64 rest = k - b * plane;
        const rt_int64 c = rest / spatial;
        const rt_int64 s = rest - c * spatial;
        const rt_int64 t = target[b * target_batch_stride + s * target_spatial_stride];
        A value = A(0);
        if (t == c && t != ignore_index) {
            A g = Arith<T>::load(grad[b * grad_batch_stride + s * grad_spatial_stride]);
            if (mean) g = g / Arith<T>::load(total_weight[0]);
            const A w = weight ? Arith<T>::load(weight[t * weight_stride]) : A(1);
            value = -w * g;
        }
        out[k] = Arith<T>::store(value);
    }
}
