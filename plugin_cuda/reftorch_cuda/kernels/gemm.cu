// Matrix products: out[b] = alpha * (A[b] @ B[b]) + beta * input[b] for every matrix b of a
// batch (mm, bmm, addmm, baddbmm). Compiled after common.cuh.
//
// Operands are read through (batch, row, col) strides in elements, so transposed, sliced and
// batch-broadcast (stride 0) views are served without a copy; the tile loads walk whichever
// of an operand's two matrix dims has stride 1 (the other dim, if neither), so both row- and
// column-major operands load coalesced. Every load and store is bounds-checked: M, N and K
// need not be multiples of the tiles. A block computes one output tile of every matrix of
// the batch it visits (blockIdx.z, then in steps of gridDim.z).
//
// gemm_kernel<T> (float, double): a shared-memory tiled product on the CUDA cores. Each of
// the 256 threads accumulates a TM x TN register micro-tile, read from shared memory in
// 16-byte vectors; operand tiles are double buffered (the next tile's global loads are in
// flight while the current one is used).
// Every output element is one fixed-order chain of fused multiply-adds, k = 0, 1, ..., K-1,
// starting from +0: the kernels are compiled with --fmad=false, so the chain is written with
// explicit fma() and is the same on every GPU and for every tile shape.
//
// mma_gemm_kernel<T> (rt_float16, rt_bfloat16): tensor cores through inline PTX
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (sm_80 and later),
// float32 accumulation, one rounding to T when stored (PyTorch's default for these dtypes).
// The order of the additions inside one mma is the hardware's. Operand tiles are loaded in
// 16-byte chunks of 8 elements when the operand is aligned for it (ChunkReader), and the
// mma fragments are read from shared memory with ldmatrix.
//
// Both end in the same epilogue, in the computation type A (double for double, float else),
// as the reference (reftorch/_ops/blas.py) orders it: v = acc; v = v * alpha (alpha != 1);
// v = v + input * beta (the `* beta` only for beta != 1; has_input is 0 for beta == 0, and
// then the input is never read, so its NaN does not propagate).
//
// The kernel bodies (simt_product, mma_product) are templated on a product problem, which
// says how operand tiles are read and where results go: MatrixProduct (strided matrices and
// the alpha/beta epilogue) for these kernels, and conv.cu's implicit-GEMM convolutions, which
// compile this file in front of their own.
//
// Name expressions: "gemm_kernel<float>", "gemm_kernel<double>",
// "mma_gemm_kernel<rt_float16>", "mma_gemm_kernel<rt_bfloat16>".

#define RT_GEMM_THREADS 256

// The kernel parameters after the pointers. The host packs the same bytes
// (reftorch_cuda.ops_gemm.GEMM_ARGS); the static_assert pins the size both sides use.
struct GemmArgs {
    rt_int64 batch, m, n, k;
    rt_int64 out_strides[3];     // (batch, row, col) strides in elements, for each operand
    rt_int64 a_strides[3];
    rt_int64 b_strides[3];
    rt_int64 input_strides[3];
    double alpha, beta;
    int has_input;               // 0: beta == 0, `input` is not read (and may be null)
    int unused;
};
static_assert(sizeof(GemmArgs) == 4 * 8 + 4 * 3 * 8 + 2 * 8 + 8, "GemmArgs layout");

// Where element e (0 <= e < R * BK) of one thread pass over an R x BK operand tile sits:
// consecutive e walk k when k has stride 1 in memory, else they walk r, so neighbouring
// threads read neighbouring addresses either way.
template <int R, int BK>
__device__ __forceinline__ void tile_coords(int e, bool k_fast, int& r, int& kk) {
    if (k_fast) {
        kk = e % BK;
        r = e / BK;
    } else {
        r = e % R;
        kk = e / R;
    }
}

// One thread's share of the loads of an operand's R x BK tiles (rows [r0, r0 + R) of `rows`,
// k in [k0, k0 + BK) of `depth`): P elements per tile at tile coordinates fixed for the whole
// product, so the addresses are computed once and each tile only adds k0 * stride_k.
// Outside the matrix a zero is loaded (it adds nothing to the chains of rows that are stored).
template <typename T, int R, int BK>
struct TileReader {
    enum { P = R * BK / RT_GEMM_THREADS };
    const T* ptr[P];        // element (r0 + r, kk) of load p
    int kk[P];
    bool row_in[P];
    rt_int64 stride_k, depth;
    bool k_fast;            // consecutive loads walk k (the tile_coords order of `stage`)

    __device__ __forceinline__ TileReader(const T* base, rt_int64 stride_r, rt_int64 stride_k_,
                                          rt_int64 rows, rt_int64 r0, rt_int64 depth_)
        : stride_k(stride_k_), depth(depth_), k_fast(stride_k_ == 1) {
#pragma unroll
        for (int q = 0; q < P; ++q) {
            int r;
            tile_coords<R, BK>(threadIdx.x + q * RT_GEMM_THREADS, k_fast, r, kk[q]);
            row_in[q] = r0 + r < rows;
            ptr[q] = base + (r0 + r) * stride_r + kk[q] * stride_k;
        }
    }

    __device__ __forceinline__ void load(rt_int64 k0, T (&reg)[P]) const {
#pragma unroll
        for (int q = 0; q < P; ++q)
            reg[q] = (row_in[q] && k0 + kk[q] < depth) ? ptr[q][k0 * stride_k] : T(0);
    }
};

// The epilogue shared by both kernels: one output element from its accumulated product.
template <typename T, typename A>
__device__ __forceinline__ void store_result(const GemmArgs& p, T* out, const T* input,
                                             rt_int64 b, rt_int64 row, rt_int64 col, A acc) {
    A v = acc;
    const A alpha = (A)p.alpha;
    if (alpha != A(1)) v = v * alpha;
    if (p.has_input) {
        A w = Arith<T>::load(input[b * p.input_strides[0] + row * p.input_strides[1]
                                   + col * p.input_strides[2]]);
        const A beta = (A)p.beta;
        if (beta != A(1)) w = w * beta;
        v = v + w;
    }
    out[b * p.out_strides[0] + row * p.out_strides[1] + col * p.out_strides[2]] =
        Arith<T>::store(v);
}

// --- float and double on the CUDA cores --------------------------------------------------------

// Block tile BM x BN, BK deep; each thread a TM x TN micro-tile. (BM / TM) * (BN / TN) and
// BM * BK / 4 must both equal RT_GEMM_THREADS (four loads per thread and operand per tile).
// A thread's TM rows are two runs of V = TM / 2 adjacent rows, BM / 2 apart (columns alike),
// so each run is one 16-byte shared load (V16: float4 or double2).
template <typename T> struct SimtTile;
template <> struct SimtTile<float> {
    enum { BM = 128, BN = 128, BK = 8, TM = 8, TN = 8 };
    typedef float4 V16;
};
template <> struct SimtTile<double> {
    enum { BM = 64, BN = 64, BK = 16, TM = 4, TN = 4 };
    typedef double2 V16;
};

// The V = 16 / sizeof(T) elements of a 16-byte vector, by index.
__device__ __forceinline__ void unpack(float4 v, float (&x)[4]) {
    x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
}
__device__ __forceinline__ void unpack(double2 v, double (&x)[2]) { x[0] = v.x; x[1] = v.y; }

__device__ __forceinline__ float rt_fma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double rt_fma(double a, double b, double c) { return fma(a, b, c); }

// The body of the CUDA-core kernels, for any product problem (see MatrixProduct below).
template <typename T, typename Problem>
__device__ __forceinline__ void simt_product(const Problem& prob) {
    typedef SimtTile<T> S;
    typedef typename S::V16 V16;
    enum { BM = S::BM, BN = S::BN, BK = S::BK, TM = S::TM, TN = S::TN, V = 16 / sizeof(T),
           A_LOADS = BM * BK / RT_GEMM_THREADS, B_LOADS = BN * BK / RT_GEMM_THREADS };
    static_assert((BM / TM) * (BN / TN) == RT_GEMM_THREADS, "one micro-tile per thread");
    static_assert(A_LOADS * RT_GEMM_THREADS == BM * BK && B_LOADS * RT_GEMM_THREADS == BN * BK,
                  "whole tiles per pass");
    static_assert(TM == 2 * V && TN == 2 * V && sizeof(V16) == 16, "two vectors per run");
    // [buffer][k][row]: at one k, a thread reads two 16-byte runs of each; a warp's A reads
    // are two addresses (broadcast), its B reads 16 adjacent vectors. The +4 keeps every row
    // 16-byte aligned (BM + 4 elements are a multiple of 16 bytes) and moves the banks of the
    // tile stores of k-contiguous operands apart.
    __shared__ __align__(16) T As[2][BK][BM + 4];
    __shared__ __align__(16) T Bs[2][BK][BN + 4];
    static_assert(((BM + 4) * sizeof(T)) % 16 == 0 && ((BN + 4) * sizeof(T)) % 16 == 0,
                  "16-byte aligned rows");

    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
    const rt_int64 m0 = (rt_int64)blockIdx.y * BM, n0 = (rt_int64)blockIdx.x * BN;
    typedef typename Problem::template SimtA<BM, BK> AReader;
    typedef typename Problem::template SimtB<BN, BK> BReader;
    static_assert(AReader::P == A_LOADS && BReader::P == B_LOADS, "reader shares");

    for (rt_int64 bi = blockIdx.z; bi < prob.batch(); bi += gridDim.z) {
        T acc[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

        const AReader a_tiles = prob.template simt_a<BM, BK>(bi, m0);
        const BReader b_tiles = prob.template simt_b<BN, BK>(bi, n0);
        T a_reg[A_LOADS], b_reg[B_LOADS];
        // Store the registers' tile into buffer `buf` (same coordinates as the loads).
        auto stage = [&](int buf) {
#pragma unroll
            for (int q = 0; q < A_LOADS; ++q) {
                int r, kk;
                tile_coords<BM, BK>(threadIdx.x + q * RT_GEMM_THREADS, a_tiles.k_fast, r, kk);
                As[buf][kk][r] = a_reg[q];
            }
#pragma unroll
            for (int q = 0; q < B_LOADS; ++q) {
                int r, kk;
                tile_coords<BN, BK>(threadIdx.x + q * RT_GEMM_THREADS, b_tiles.k_fast, r, kk);
                Bs[buf][kk][r] = b_reg[q];
            }
        };
        const rt_int64 tiles = (prob.k() + BK - 1) / BK;
        if (tiles > 0) {
            a_tiles.load(0, a_reg);
            b_tiles.load(0, b_reg);
            stage(0);
        }
        __syncthreads();
        for (rt_int64 t = 0; t < tiles; ++t) {
            const int buf = (int)(t & 1);
            const bool more = t + 1 < tiles;
            if (more) {  // the next tile's loads, in flight during this tile's products
                a_tiles.load((t + 1) * BK, a_reg);
                b_tiles.load((t + 1) * BK, b_reg);
            }
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                T av[2][V], bv[2][V];  // [run][element]: rows (columns) of the micro-tile
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    unpack(*reinterpret_cast<const V16*>(&As[buf][kk][ty * V + h * (BM / 2)]),
                           av[h]);
                    unpack(*reinterpret_cast<const V16*>(&Bs[buf][kk][tx * V + h * (BN / 2)]),
                           bv[h]);
                }
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j)
                        acc[i][j] = rt_fma(av[i / V][i % V], bv[j / V][j % V], acc[i][j]);
            }
            // The other buffer was last read in iteration t - 1, before its closing barrier.
            if (more) stage(buf ^ 1);
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            // micro-tile row i: run i / V, element i % V (as the shared loads above)
            const rt_int64 row = m0 + ty * V + (i / V) * (BM / 2) + i % V;
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const rt_int64 col = n0 + tx * V + (j / V) * (BN / 2) + j % V;
                if (row < prob.m() && col < prob.n()) prob.store(bi, row, col, acc[i][j]);
            }
        }
    }
}

// --- float16 and bfloat16 on the tensor cores ----------------------------------------------------
//
// Fragment layouts of mma.m16n8k16 with .f16/.bf16 inputs and .f32 accumulators (PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type"), for lane l of the warp with
// g = l >> 2 (groupID) and t = l % 4 (threadID_in_group); each 32-bit input register holds two
// 16-bit elements, the lower-numbered one in the low half:
//   A (16 x 16, row):  a0,a1: (g, 2t + 0/1)    a2,a3: (g + 8, 2t + 0/1)
//                      a4,a5: (g, 2t + 8 + 0/1) a6,a7: (g + 8, 2t + 8 + 0/1)   (row, k)
//   B (16 x 8, col):   b0,b1: (2t + 0/1, g)    b2,b3: (2t + 8 + 0/1, g)        (k, col)
//   C, D (16 x 8):     c0,c1: (g, 2t + 0/1)    c2,c3: (g + 8, 2t + 0/1)        (row, col)
// So a thread's registers are pairs of k-neighbours: shared memory keeps both tiles k-minor
// (As[row][k], Bs[col][k]) and each register is one aligned 32-bit shared load.

template <typename T> struct MmaType;
template <> struct MmaType<rt_float16> {
    static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {
#if __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
        __trap();  // never launched: the host declines 16-bit products below sm_80
#endif
    }
};
template <> struct MmaType<rt_bfloat16> {
    static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {
#if __CUDA_ARCH__ >= 800
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
        __trap();
#endif
    }
};

// Block tile 128 x 128, 32 deep; 8 warps as 2 (rows) x 4 (cols), each a 64 x 32 warp tile of
// 4 x 4 mma tiles (m16 x n8), two k16 steps per block tile.
#define RT_MMA_BM 128
#define RT_MMA_BN 128
#define RT_MMA_BK 32
#define RT_MMA_PAD 8  // row length 40 halves = 20 words: the 8 rows x 4 words a warp's
                      // fragment loads touch fall in 32 distinct banks

// Four 8x8 matrices of 16-bit elements from shared memory in one instruction (ldmatrix,
// sm_75 and later): lanes 8q..8q+7 give the addresses of matrix q's eight rows (16 bytes each,
// 16-byte aligned), and lane l receives, in r[q], the two elements at row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1 of matrix q: the layout of mma.m16n8k16's fragments.
__device__ __forceinline__ void load_matrices(unsigned (&r)[4], const unsigned short* row) {
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
}

// Eight 16-bit elements, each the low half of its `half[j]`, as one 16-byte word in order
// (the first in the low half of x): a chunk as the tensor-core readers keep it in registers.
__device__ __forceinline__ uint4 pack_chunk(const unsigned (&half)[8]) {
    return make_uint4(half[0] | half[1] << 16, half[2] | half[3] << 16,
                      half[4] | half[5] << 16, half[6] | half[7] << 16);
}

// Tile coordinates (r, kk) of chunk c when chunks run along k (8 depths each): consecutive
// chunks cover a row's BK depths, then the next row.
template <int BK>
__device__ __forceinline__ void chunk_along_k(int c, int& r, int& kk) {
    r = c / (BK / 8);
    kk = (c % (BK / 8)) * 8;
}

// One thread's share of the loads of a 16-bit operand's R x BK tiles, in chunks of 8
// elements along the operand's stride-1 dim (k or r; r when neither has stride 1), as one
// 16-byte word: 8 elements in order, the first in the low half of word x. A chunk is one
// 16-byte load when the operand allows (`vector`: 16-byte aligned matrix, the other stride a
// multiple of 8) and the chunk lies inside the matrix; else 8 bounds-checked loads (zeros
// outside). Consecutive threads take chunks along the contiguous dim when it is k (so a
// warp reads whole row segments) and along k when it is r (so a warp's shared stores of the
// chunk's 8 rows fall in distinct banks).
template <int R, int BK>
struct ChunkReader {
    enum { P = R * BK / 8 / RT_GEMM_THREADS };
    const unsigned short* ptr[P];   // element (r0 + r, kk) of chunk q, r and kk its first
    int r[P], kk[P];
    rt_int64 stride_r, stride_k, rows, r0, depth;
    bool along_k, vector;

    __device__ __forceinline__ ChunkReader(const unsigned short* base, rt_int64 stride_r_,
                                           rt_int64 stride_k_, rt_int64 rows_, rt_int64 r0_,
                                           rt_int64 depth_)
        : stride_r(stride_r_), stride_k(stride_k_), rows(rows_), r0(r0_), depth(depth_) {
        along_k = stride_k == 1;
        const rt_int64 other = along_k ? stride_r : stride_k;
        vector = (along_k || stride_r == 1) && other % 8 == 0 &&
                 reinterpret_cast<unsigned long long>(base) % 16 == 0;
#pragma unroll
        for (int q = 0; q < P; ++q) {
            const int c = threadIdx.x + q * RT_GEMM_THREADS;
            if (along_k) {
                chunk_along_k<BK>(c, r[q], kk[q]);
            } else {
                r[q] = (c / BK) * 8;
                kk[q] = c % BK;
            }
            ptr[q] = base + (r0 + r[q]) * stride_r + kk[q] * stride_k;
        }
    }

    __device__ __forceinline__ void load(rt_int64 k0, uint4 (&reg)[P]) const {
#pragma unroll
        for (int q = 0; q < P; ++q) {
            const rt_int64 gr = r0 + r[q], gk = k0 + kk[q];
            const unsigned short* at = ptr[q] + k0 * stride_k;
            const bool inside = along_k ? gr < rows && gk + 8 <= depth
                                        : gk < depth && gr + 8 <= rows;
            if (vector && inside) {
                reg[q] = *reinterpret_cast<const uint4*>(at);
                continue;
            }
            const rt_int64 step = along_k ? stride_k : stride_r;
            unsigned half[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const bool in = along_k ? gr < rows && gk + j < depth
                                        : gk < depth && gr + j < rows;
                half[j] = in ? at[j * step] : 0u;  // 0: +0.0 in both formats
            }
            reg[q] = pack_chunk(half);
        }
    }

    // The chunks into a [R][ROW] shared tile (k-minor rows, 16-byte aligned).
    template <int ROW>
    __device__ __forceinline__ void store(unsigned short (&tile)[R][ROW],
                                          const uint4 (&reg)[P]) const {
#pragma unroll
        for (int q = 0; q < P; ++q) {
            if (along_k) {
                *reinterpret_cast<uint4*>(&tile[r[q]][kk[q]]) = reg[q];
                continue;
            }
            const unsigned words[4] = {reg[q].x, reg[q].y, reg[q].z, reg[q].w};
#pragma unroll
            for (int j = 0; j < 8; ++j)
                tile[r[q] + j][kk[q]] = (unsigned short)(words[j / 2] >> (16 * (j % 2)));
        }
    }
};

// The body of the tensor-core kernels, for any product problem (see MatrixProduct below).
template <typename T, typename Problem>
__device__ __forceinline__ void mma_product(const Problem& prob) {
    enum { BM = RT_MMA_BM, BN = RT_MMA_BN, BK = RT_MMA_BK, ROW = RT_MMA_BK + RT_MMA_PAD };
    static_assert((ROW * 2) % 16 == 0, "16-byte aligned shared rows");
    // 16-bit elements as their bits: the tensor cores read them, nothing here computes.
    __shared__ __align__(16) unsigned short As[2][BM][ROW];
    __shared__ __align__(16) unsigned short Bs[2][BN][ROW];
    typedef typename Problem::template MmaA<BM, BK> AReader;
    typedef typename Problem::template MmaB<BN, BK> BReader;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t4 = lane & 3;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;    // the warp tile's corner
    const rt_int64 m0 = (rt_int64)blockIdx.y * BM, n0 = (rt_int64)blockIdx.x * BN;

    for (rt_int64 bi = blockIdx.z; bi < prob.batch(); bi += gridDim.z) {
        const AReader a_tiles = prob.template mma_a<BM, BK>(bi, m0);
        const BReader b_tiles = prob.template mma_b<BN, BK>(bi, n0);
        float acc[4][4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

        uint4 a_reg[AReader::P], b_reg[BReader::P];
        const rt_int64 tiles = (prob.k() + BK - 1) / BK;
        if (tiles > 0) {
            a_tiles.load(0, a_reg);
            b_tiles.load(0, b_reg);
            a_tiles.store(As[0], a_reg);
            b_tiles.store(Bs[0], b_reg);
        }
        __syncthreads();
        for (rt_int64 t = 0; t < tiles; ++t) {
            const int buf = (int)(t & 1);
            const bool more = t + 1 < tiles;
            if (more) {  // the next tile's loads, in flight during this tile's products
                a_tiles.load((t + 1) * BK, a_reg);
                b_tiles.load((t + 1) * BK, b_reg);
            }
#pragma unroll
            for (int ks = 0; ks < BK; ks += 16) {
                // A's 16 x 16 fragment i: matrices (rows +0, k +0), (+8, +0), (+0, +8),
                // (+8, +8). B's fragments j and j + 1 (rows of Bs are columns of B): (j, k +0),
                // (j, k +8), (j + 1, k +0), (j + 1, k +8). Lane l addresses row l % 8 of
                // matrix q = l / 8.
                const int q = lane / 8, row8 = lane % 8;
                unsigned af[4][4], bf[4][2];
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    load_matrices(af[i], &As[buf][wm + i * 16 + (q & 1) * 8 + row8]
                                                [ks + (q >> 1) * 8]);
#pragma unroll
                for (int j = 0; j < 4; j += 2) {
                    unsigned pair[4];
                    load_matrices(pair, &Bs[buf][wn + (j + (q >> 1)) * 8 + row8]
                                               [ks + (q & 1) * 8]);
                    bf[j][0] = pair[0];
                    bf[j][1] = pair[1];
                    bf[j + 1][0] = pair[2];
                    bf[j + 1][1] = pair[3];
                }
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) MmaType<T>::mma(acc[i][j], af[i], bf[j]);
            }
            if (more) {  // the other buffer was last read before the previous barrier
                a_tiles.store(As[buf ^ 1], a_reg);
                b_tiles.store(Bs[buf ^ 1], b_reg);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const rt_int64 row = m0 + wm + i * 16 + g + (c >= 2 ? 8 : 0);
                    const rt_int64 col = n0 + wn + j * 8 + 2 * t4 + (c & 1);
                    if (row < prob.m() && col < prob.n()) prob.store(bi, row, col, acc[i][j][c]);
                }
    }
}

// --- the matrix products: problem and kernels -------------------------------------------------
//
// A product problem tells simt_product / mma_product its sizes, how to read its operands'
// tiles and where each result goes: batch(), m(), n(), k(); reader types SimtA/SimtB
// (T elements, with `k_fast` and load(k0, regs)) and MmaA/MmaB (16-byte chunks of 16-bit bits,
// with load(k0, regs) and store(tile, regs)) made by simt_a/simt_b/mma_a/mma_b(bi, first row);
// store(bi, row, col, acc) for row < m(), col < n(). B's readers take the product's columns
// as their rows (its tiles are stored column by column). conv.cu defines the convolutions'.
// It refers to the kernel's parameter block rather than copying it (a copy costs the CUDA-core
// kernel 20 more registers).
template <typename T>
struct MatrixProduct {
    const GemmArgs& p;
    T* out;
    const T *a, *b, *input;

    __device__ __forceinline__ rt_int64 batch() const { return p.batch; }
    __device__ __forceinline__ rt_int64 m() const { return p.m; }
    __device__ __forceinline__ rt_int64 n() const { return p.n; }
    __device__ __forceinline__ rt_int64 k() const { return p.k; }

    template <int R, int BK> using SimtA = TileReader<T, R, BK>;
    template <int R, int BK> using SimtB = TileReader<T, R, BK>;
    template <int R, int BK> using MmaA = ChunkReader<R, BK>;
    template <int R, int BK> using MmaB = ChunkReader<R, BK>;

    template <int R, int BK>
    __device__ __forceinline__ SimtA<R, BK> simt_a(rt_int64 bi, rt_int64 m0) const {
        return SimtA<R, BK>(a + bi * p.a_strides[0], p.a_strides[1], p.a_strides[2], p.m, m0,
                            p.k);
    }
    template <int R, int BK>
    __device__ __forceinline__ SimtB<R, BK> simt_b(rt_int64 bi, rt_int64 n0) const {
        return SimtB<R, BK>(b + bi * p.b_strides[0], p.b_strides[2], p.b_strides[1], p.n, n0,
                            p.k);
    }
    template <int R, int BK>
    __device__ __forceinline__ MmaA<R, BK> mma_a(rt_int64 bi, rt_int64 m0) const {
        return MmaA<R, BK>(reinterpret_cast<const unsigned short*>(a) + bi * p.a_strides[0],
                           p.a_strides[1], p.a_strides[2], p.m, m0, p.k);
    }
    template <int R, int BK>
    __device__ __forceinline__ MmaB<R, BK> mma_b(rt_int64 bi, rt_int64 n0) const {
        return MmaB<R, BK>(reinterpret_cast<const unsigned short*>(b) + bi * p.b_strides[0],
                           p.b_strides[2], p.b_strides[1], p.n, n0, p.k);
    }
    template <typename A>
    __device__ __forceinline__ void store(rt_int64 bi, rt_int64 row, rt_int64 col, A acc) const {
        store_result(p, out, input, bi, row, col, acc);
    }
};

template <typename T>
__global__ void __launch_bounds__(RT_GEMM_THREADS)
gemm_kernel(const GemmArgs p, T* out, const T* a, const T* b, const T* input) {
    simt_product<T>(MatrixProduct<T>{p, out, a, b, input});
}

// Two blocks per multiprocessor: the register budget of 128 per thread spills a few words
// (about 50 bytes of local frame), but on an H100 the 4096^3 product ran at 156-159 TFLOP/s
// this way against 113 with one block of 186-register threads, with the same bits.
template <typename T>
__global__ void __launch_bounds__(RT_GEMM_THREADS, 2)
mma_gemm_kernel(const GemmArgs p, T* out, const T* a, const T* b, const T* input) {
    mma_product<T>(MatrixProduct<T>{p, out, a, b, input});
}
