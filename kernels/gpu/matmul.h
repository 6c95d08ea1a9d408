// Integer matrix products (cuBLAS has none): out (B, M, N) contiguous = A (B, M, K) B (B, K, N)
// read through their (broadcast) layouts, one output element per thread, accumulated in the
// element type (wrapping on overflow, as the CPU backend's numpy products do).
// Written in the portable dialect (common.h).

#define MATMUL_INT_KERNEL(name, T)                                                  \
    WB_KERNEL matmul_int_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(Layout, la, 2), \
                                WB_IN(T, b, 3), WB_ARG(Layout, lb, 4), WB_ARG(wb_i64, B, 5), \
                                WB_ARG(wb_i64, M, 6), WB_ARG(wb_i64, N, 7),         \
                                WB_ARG(wb_i64, K, 8) WB_THREAD_ARGS) {              \
        WB_LOOP(e, B * M * N) {                                                     \
            wb_i64 bi = e / (M * N), i = (e / N) % M, j = e % N;                    \
            T acc = 0;                                                              \
            for (wb_i64 k = 0; k < K; ++k)                                          \
                acc += a[wb_offset(la, (bi * M + i) * K + k)] *                     \
                       b[wb_offset(lb, (bi * K + k) * N + j)];                      \
            out[e] = acc;                                                           \
        }                                                                           \
    }
WB_INT_DTYPES(MATMUL_INT_KERNEL)
