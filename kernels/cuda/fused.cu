// Fused row kernels: softmax / log_softmax, layer_norm / rms_norm (over the last axis), rope.
// Rows: the host permutes the reduced dim last in both the input and the output Layout, so
// row r, column k is element r * K + k of each. One block of WB_ROW_THREADS per row.
// Halves compute in f32; statistics (mean, rstd) are written in the compute type.
#include "common.cuh"

#define WB_ROW_THREADS 256

template <typename C> __device__ C block_sum(C v, C* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    C r = buf[0];
    __syncthreads();
    return r;
}
template <typename C> __device__ C block_max(C v, C* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            C a = buf[threadIdx.x], b = buf[threadIdx.x + s];
            buf[threadIdx.x] = (a != a || a > b) ? a : b;
        }
        __syncthreads();
    }
    C r = buf[0];
    __syncthreads();
    return r;
}

// exp(x - max) / sum exp(x - max), or x - max - log sum exp(x - max) when is_log.
#define SOFTMAX_KERNEL(name, T)                                                     \
    extern "C" __global__ void softmax_##name(T* __restrict__ out, Layout lo,       \
                                              const T* __restrict__ in, Layout li,   \
                                              long long M, long long K, int is_log) { \
        typedef Acc<T>::type C;                                                     \
        __shared__ C buf[WB_ROW_THREADS];                                           \
        for (long long row = blockIdx.x; row < M; row += gridDim.x) {               \
            C mx = -INFINITY;                                                       \
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {               \
                C x = wb_load(in[wb_offset(li, row * K + k)]);                      \
                mx = (mx != mx || mx > x) ? mx : x;                                 \
            }                                                                       \
            mx = block_max(mx, buf);                                                \
            C sum = 0;                                                              \
            for (long long k = threadIdx.x; k < K; k += blockDim.x)                 \
                sum += exp(wb_load(in[wb_offset(li, row * K + k)]) - mx);           \
            sum = block_sum(sum, buf);                                              \
            C lse = log(sum);                                                       \
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {               \
                C x = wb_load(in[wb_offset(li, row * K + k)]) - mx;                 \
                out[wb_offset(lo, row * K + k)] =                                   \
                    Store<T>::from(is_log ? x - lse : exp(x) / sum);                \
            }                                                                       \
        }                                                                           \
    }
WB_FLOAT_DTYPES(SOFTMAX_KERNEL)

// (x - mean) * rstd * w + b over the last axis (center = 1), or x * rstd * w (center = 0,
// rms_norm: rstd = 1 / sqrt(mean(x^2) + eps)). Output contiguous; mean/rstd one per row.
#define NORM_KERNEL(name, T)                                                        \
    extern "C" __global__ void norm_##name(                                         \
        T* __restrict__ out, Acc<T>::type* __restrict__ mean_out,                   \
        Acc<T>::type* __restrict__ rstd_out, const T* __restrict__ in, Layout li,   \
        const T* __restrict__ w, Layout lw, const T* __restrict__ b, Layout lb, long long M, \
        long long K, double eps, int has_w, int has_b, int center) {                \
        typedef Acc<T>::type C;                                                     \
        __shared__ C buf[WB_ROW_THREADS];                                           \
        for (long long row = blockIdx.x; row < M; row += gridDim.x) {               \
            C mean = 0;                                                             \
            if (center) {                                                           \
                C s = 0;                                                            \
                for (long long k = threadIdx.x; k < K; k += blockDim.x)             \
                    s += wb_load(in[wb_offset(li, row * K + k)]);                   \
                mean = block_sum(s, buf) / (C)K;                                    \
            }                                                                       \
            C sq = 0;                                                               \
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {               \
                C d = wb_load(in[wb_offset(li, row * K + k)]) - mean;               \
                sq += d * d;                                                        \
            }                                                                       \
            C rstd = (C)1 / sqrt(block_sum(sq, buf) / (C)K + (C)eps);               \
            if (threadIdx.x == 0) {                                                 \
                if (center) mean_out[row] = mean;                                   \
                rstd_out[row] = rstd;                                               \
            }                                                                       \
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {               \
                C y = (wb_load(in[wb_offset(li, row * K + k)]) - mean) * rstd;      \
                if (has_w) y *= wb_load(w[wb_offset(lw, k)]);                       \
                if (has_b) y += wb_load(b[wb_offset(lb, k)]);                       \
                out[row * K + k] = Store<T>::from(y);                               \
            }                                                                       \
        }                                                                           \
    }
WB_FLOAT_DTYPES(NORM_KERNEL)

// Rotary embedding of x (rows, D) with cos/sin (rows, D/2) read through broadcast Layouts.
// Pairs (x[j], x[j + D/2]) or, interleaved, (x[2j], x[2j + 1]):
// out = (x1 cos - x2 sin, x2 cos + x1 sin). One thread per pair; output contiguous.
#define ROPE_KERNEL(name, T)                                                        \
    extern "C" __global__ void rope_##name(T* __restrict__ out, const T* __restrict__ x, \
                                           Layout lx, const T* __restrict__ cs, Layout lc, \
                                           const T* __restrict__ sn, Layout ls, long long rows, \
                                           long long D, int interleaved) {          \
        typedef Acc<T>::type C;                                                     \
        long long h = D / 2;                                                        \
        WB_LOOP(p, rows * h) {                                                      \
            long long row = p / h, j = p - row * h;                                 \
            long long i1 = interleaved ? 2 * j : j;                                 \
            long long i2 = interleaved ? 2 * j + 1 : j + h;                         \
            C x1 = wb_load(x[wb_offset(lx, row * D + i1)]);                         \
            C x2 = wb_load(x[wb_offset(lx, row * D + i2)]);                         \
            C c = wb_load(cs[wb_offset(lc, p)]);                                    \
            C s = wb_load(sn[wb_offset(ls, p)]);                                    \
            out[row * D + i1] = Store<T>::from(x1 * c - x2 * s);                    \
            out[row * D + i2] = Store<T>::from(x2 * c + x1 * s);                    \
        }                                                                           \
    }
WB_FLOAT_DTYPES(ROPE_KERNEL)
