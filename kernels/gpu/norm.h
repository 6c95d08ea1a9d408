// Group normalisation of x (N, C, S) (S: the spatial dims flattened) with G groups.
// Row r = n * G + g covers channels [g C/G, (g + 1) C/G) of sample n and every s: its
// K = (C/G) S elements are elements r K .. r K + K - 1 of x in C order, read through x's
// Layout (strided views in place). One block per row (grid-stride over rows); two passes
// in the compute type (f32 for halves, f64 for f64): mean, then the centred sum of squares.
// Any block size that is a multiple of 32, up to 1024 (the launch bound caps the registers).
//   y = (x - mean) rstd w[c] + b[c],  rstd = 1 / sqrt(Σ (x - mean)² / K + eps),
//   c = g C/G + k / S. Output contiguous (N, C, S); mean and rstd (N, G) in the compute type.
// Written in the portable dialect (common.h); the block sums are block.h's.

#define GROUP_NORM_KERNEL(name, T)                                                  \
    WB_KERNEL_BOUNDED(1024) group_norm_##name(                                      \
        WB_OUT(T, out, 0), WB_OUT(Acc<T>::type, mean_out, 1),                       \
        WB_OUT(Acc<T>::type, rstd_out, 2), WB_IN(T, x, 3), WB_ARG(Layout, lx, 4),   \
        WB_IN(T, w, 5), WB_ARG(Layout, lw, 6), WB_IN(T, b, 7), WB_ARG(Layout, lb, 8), \
        WB_ARG(wb_i64, M, 9), WB_ARG(wb_i64, G, 10), WB_ARG(wb_i64, K, 11),         \
        WB_ARG(wb_i64, S, 12), WB_ARG(wb_i64, cpg, 13), WB_ARG(wb_wide, eps, 14),   \
        WB_ARG(int, has_w, 15), WB_ARG(int, has_b, 16) WB_THREAD_ARGS) {            \
        typedef Acc<T>::type C;                                                     \
        WB_SHARED C buf[32];                                                        \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            wb_i64 base = row * K;                                                  \
            C s = 0;                                                                \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS)                      \
                s += wb_load(x[wb_offset(lx, base + k)]);                           \
            C mean = wb_block_sum(s, buf WB_THREAD_PASS) / (C)K;                    \
            C sq = 0;                                                               \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS) {                    \
                C d = wb_load(x[wb_offset(lx, base + k)]) - mean;                   \
                sq += d * d;                                                        \
            }                                                                       \
            C rstd = (C)1 / sqrt(wb_block_sum(sq, buf WB_THREAD_PASS) / (C)K + (C)eps); \
            if (WB_THREAD == 0) {                                                   \
                mean_out[row] = mean;                                               \
                rstd_out[row] = rstd;                                               \
            }                                                                       \
            wb_i64 c0 = (row % G) * cpg;                                            \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS) {                    \
                C y = (wb_load(x[wb_offset(lx, base + k)]) - mean) * rstd;          \
                wb_i64 c = c0 + k / S;                                              \
                if (has_w) y *= wb_load(w[wb_offset(lw, c)]);                       \
                if (has_b) y += wb_load(b[wb_offset(lb, c)]);                       \
                out[base + k] = Store<T>::from(y);                                  \
            }                                                                       \
        }                                                                           \
    }
WB_FLOAT_DTYPES(GROUP_NORM_KERNEL)
