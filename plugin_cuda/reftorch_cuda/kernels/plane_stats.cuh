// What batchnorm.cu and group_norm.cu share (ops_batchnorm and ops_norm put this file between
// common.cuh and theirs): the walk of a "plane" and the reference's two-pass statistics of it.
//
// A plane is `count` elements seen as rows of `inner` elements: element m is in row m / inner
// at position m % inner. batch_norm's plane is one channel (rows: the batch), group_norm's one
// (sample, group) pair (rows: the group's channels).

// The offset of element m of a plane, given the (row, position) strides.
__device__ __forceinline__ rt_int64 rt_plane_offset(rt_int64 m, rt_int64 inner,
                                                    rt_int64 row_stride,
                                                    rt_int64 inner_stride) {
    const rt_int64 row = m / inner;
    return row * row_stride + (m - row * inner) * inner_stride;
}

// The plane's mean = sum x / count and biased variance = sum (x - mean)^2 / count, in the
// computation type A; x points at element 0. Thread t takes m = t, t + RT_BLOCK_THREADS, ... in
// turn and block_reduce adds the threads' sums in its fixed tree order (no atomics). Every
// thread gets both results. The loops stay rolled (#pragma unroll 1): unrolled, their 64-bit
// index divisions tripled a program's NVRTC time.
template <typename T, typename A>
__device__ void plane_mean_variance(const T* x, rt_int64 count, rt_int64 inner,
                                    rt_int64 row_stride, rt_int64 inner_stride, A* partial,
                                    A& mean, A& var) {
    A total = A(0);
#pragma unroll 1
    for (rt_int64 m = threadIdx.x; m < count; m += RT_BLOCK_THREADS)
        total += Arith<T>::load(x[rt_plane_offset(m, inner, row_stride, inner_stride)]);
    mean = block_reduce<SumOp>(partial, total) / (A)count;
    A squares = A(0);
#pragma unroll 1
    for (rt_int64 m = threadIdx.x; m < count; m += RT_BLOCK_THREADS) {
        const A centered =
            Arith<T>::load(x[rt_plane_offset(m, inner, row_stride, inner_stride)]) - mean;
        squares += centered * centered;
    }
    var = block_reduce<SumOp>(partial, squares) / (A)count;
}
