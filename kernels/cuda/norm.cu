// Group normalisation of x (N, C, S) (S: the spatial dims flattened) with G groups.
// Row r = n * G + g covers channels [g C/G, (g + 1) C/G) of sample n and every s: its
// K = (C/G) S elements are elements r K .. r K + K - 1 of x in C order, read through x's
// Layout (strided views in place). One block per row (grid-stride over rows); two passes
// in the compute type (f32 for halves, f64 for f64): mean, then the centred sum of squares.
// Any block size that is a multiple of 32, up to 1024 (the launch bound caps the registers).
//   y = (x - mean) rstd w[c] + b[c],  rstd = 1 / sqrt(Σ (x - mean)² / K + eps),
//   c = g C/G + k / S. Output contiguous (N, C, S); mean and rstd (N, G) in the compute type.
#include "common.cuh"

// Σ v over the block (blockDim.x a multiple of 32, at most 1024); buf holds 32 values.
template <typename C> __device__ C gn_block_sum(C v, C* buf) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = threadIdx.x < (blockDim.x >> 5) ? buf[lane] : (C)0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) buf[0] = v;
    }
    __syncthreads();
    C r = buf[0];
    __syncthreads();
    return r;
}

#define GROUP_NORM_KERNEL(name, T)                                                  \
    extern "C" __global__ void __launch_bounds__(1024) group_norm_##name(          \
        T* __restrict__ out, Acc<T>::type* __restrict__ mean_out,                   \
        Acc<T>::type* __restrict__ rstd_out, const T* __restrict__ x, Layout lx,    \
        const T* __restrict__ w, Layout lw, const T* __restrict__ b, Layout lb, long long M, \
        long long G, long long K, long long S, long long cpg, double eps, int has_w, \
        int has_b) {                                                                \
        typedef Acc<T>::type C;                                                     \
        __shared__ C buf[32];                                                       \
        for (long long row = blockIdx.x; row < M; row += gridDim.x) {               \
            long long base = row * K;                                               \
            C s = 0;                                                                \
            for (long long k = threadIdx.x; k < K; k += blockDim.x)                 \
                s += wb_load(x[wb_offset(lx, base + k)]);                           \
            C mean = gn_block_sum(s, buf) / (C)K;                                   \
            C sq = 0;                                                               \
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {               \
                C d = wb_load(x[wb_offset(lx, base + k)]) - mean;                   \
                sq += d * d;                                                        \
            }                                                                       \
            C rstd = (C)1 / sqrt(gn_block_sum(sq, buf) / (C)K + (C)eps);            \
            if (threadIdx.x == 0) {                                                 \
                mean_out[row] = mean;                                               \
                rstd_out[row] = rstd;                                               \
            }                                                                       \
            long long c0 = (row % G) * cpg;                                         \
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {               \
                C y = (wb_load(x[wb_offset(lx, base + k)]) - mean) * rstd;          \
                long long c = c0 + k / S;                                           \
                if (has_w) y *= wb_load(w[wb_offset(lw, c)]);                       \
                if (has_b) y += wb_load(b[wb_offset(lb, c)]);                       \
                out[base + k] = Store<T>::from(y);                                  \
            }                                                                       \
        }                                                                           \
    }
WB_FLOAT_DTYPES(GROUP_NORM_KERNEL)
