// Integer matrix products (cuBLAS has none): out (B, M, N) contiguous = A (B, M, K) B (B, K, N)
// read through their (broadcast) layouts, one output element per thread, accumulated in the
// element type (wrapping on overflow, as the CPU backend's numpy products do).
#include "common.cuh"

#define MATMUL_INT_KERNEL(name, T)                                                  \
    extern "C" __global__ void matmul_int_##name(T* __restrict__ out, const T* __restrict__ a, \
                                                 Layout la, const T* __restrict__ b,  \
                                                 Layout lb, long long B, long long M,  \
                                                 long long N, long long K) {           \
        WB_LOOP(e, B * M * N) {                                                     \
            long long bi = e / (M * N), i = (e / N) % M, j = e % N;                 \
            T acc = 0;                                                              \
            for (long long k = 0; k < K; ++k)                                       \
                acc += a[wb_offset(la, (bi * M + i) * K + k)] *                     \
                       b[wb_offset(lb, (bi * K + k) * N + j)];                      \
            out[e] = acc;                                                           \
        }                                                                           \
    }
WB_INT_DTYPES(MATMUL_INT_KERNEL)
