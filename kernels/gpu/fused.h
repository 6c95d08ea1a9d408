// Fused row kernels: softmax / log_softmax, layer_norm / rms_norm (over the last axis), rope.
// Rows: the host permutes the reduced dim last in both the input and the output Layout, so
// row r, column k is element r * K + k of each. One block per row (a multiple of 32 threads;
// block.h's reductions). Halves compute in f32; statistics (mean, rstd) are written in the
// compute type. Written in the portable dialect (common.h).

// exp(x - max) / sum exp(x - max), or x - max - log sum exp(x - max) when is_log.
#define SOFTMAX_KERNEL(name, T)                                                     \
    WB_KERNEL softmax_##name(WB_OUT(T, out, 0), WB_ARG(Layout, lo, 1), WB_IN(T, in, 2), \
                             WB_ARG(Layout, li, 3), WB_ARG(wb_i64, M, 4),           \
                             WB_ARG(wb_i64, K, 5), WB_ARG(int, is_log, 6) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        WB_SHARED C buf[32];                                                        \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            C mx = -INFINITY;                                                       \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS)                      \
                mx = wb_reduce_max::combine(mx, wb_load(in[wb_offset(li, row * K + k)])); \
            mx = wb_block_max(mx, buf WB_THREAD_PASS);                              \
            C sum = 0;                                                              \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS)                      \
                sum += exp(wb_load(in[wb_offset(li, row * K + k)]) - mx);           \
            sum = wb_block_sum(sum, buf WB_THREAD_PASS);                            \
            C lse = log(sum);                                                       \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS) {                    \
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
    WB_KERNEL norm_##name(                                                          \
        WB_OUT(T, out, 0), WB_OUT(Acc<T>::type, mean_out, 1),                       \
        WB_OUT(Acc<T>::type, rstd_out, 2), WB_IN(T, in, 3), WB_ARG(Layout, li, 4),  \
        WB_IN(T, w, 5), WB_ARG(Layout, lw, 6), WB_IN(T, b, 7), WB_ARG(Layout, lb, 8), \
        WB_ARG(wb_i64, M, 9), WB_ARG(wb_i64, K, 10), WB_ARG(wb_wide, eps, 11),      \
        WB_ARG(int, has_w, 12), WB_ARG(int, has_b, 13), WB_ARG(int, center, 14) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        WB_SHARED C buf[32];                                                        \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            C mean = 0;                                                             \
            if (center) {                                                           \
                C s = 0;                                                            \
                for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS)                  \
                    s += wb_load(in[wb_offset(li, row * K + k)]);                   \
                mean = wb_block_sum(s, buf WB_THREAD_PASS) / (C)K;                  \
            }                                                                       \
            C sq = 0;                                                               \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS) {                    \
                C d = wb_load(in[wb_offset(li, row * K + k)]) - mean;               \
                sq += d * d;                                                        \
            }                                                                       \
            C rstd = (C)1 / sqrt(wb_block_sum(sq, buf WB_THREAD_PASS) / (C)K + (C)eps); \
            if (WB_THREAD == 0) {                                                   \
                if (center) mean_out[row] = mean;                                   \
                rstd_out[row] = rstd;                                               \
            }                                                                       \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS) {                    \
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
    WB_KERNEL rope_##name(WB_OUT(T, out, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), \
                          WB_IN(T, cs, 3), WB_ARG(Layout, lc, 4), WB_IN(T, sn, 5),  \
                          WB_ARG(Layout, ls, 6), WB_ARG(wb_i64, rows, 7), WB_ARG(wb_i64, D, 8), \
                          WB_ARG(int, interleaved, 9) WB_THREAD_ARGS) {             \
        typedef Acc<T>::type C;                                                     \
        wb_i64 h = D / 2;                                                           \
        WB_LOOP(p, rows * h) {                                                      \
            wb_i64 row = p / h, j = p - row * h;                                    \
            wb_i64 i1 = interleaved ? 2 * j : j;                                    \
            wb_i64 i2 = interleaved ? 2 * j + 1 : j + h;                            \
            C x1 = wb_load(x[wb_offset(lx, row * D + i1)]);                         \
            C x2 = wb_load(x[wb_offset(lx, row * D + i2)]);                         \
            C c = wb_load(cs[wb_offset(lc, p)]);                                    \
            C s = wb_load(sn[wb_offset(ls, p)]);                                    \
            out[row * D + i1] = Store<T>::from(x1 * c - x2 * s);                    \
            out[row * D + i2] = Store<T>::from(x2 * c + x1 * s);                    \
        }                                                                           \
    }
WB_FLOAT_DTYPES(ROPE_KERNEL)
