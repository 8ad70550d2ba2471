// masked_fill, compiled after the shared prelude common.cuh. The op moves elements without
// looking at them, so it is instantiated per element width (word types unsigned char ...
// unsigned long long, rt_bytes16), not per dtype: the host passes the fill value as the bits
// of one element of the tensor's dtype.

// out = mask ? value : a over a 3-operand geometry (out, a, mask); mask is bool.
template <typename W>
__global__ void __launch_bounds__(256)
masked_fill_kernel(const Geometry<3> g, W* out, const W* a, const bool* mask, const W value) {
    RT_GRID_STRIDE_LOOP(i, g.numel) {
        rt_int64 offset[3];
        element_offsets(g, i, offset);
        out[offset[0]] = mask[offset[2]] ? value : a[offset[1]];
    }
}
