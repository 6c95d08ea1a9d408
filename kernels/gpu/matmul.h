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

// Float GEMM where no vendor library serves (Metal's bf16, and f32/f16 without MPS): one
// 16x16 tile of C per block of 256 threads, A and B staged through shared memory 16 columns
// (rows) at a time, accumulated in f32:  C = op(A) op(B) + beta C  for each of g.batch
// matrices; tile t (grid-stride over the blocks) is tile row (t / tiles_n) % tiles_m, column
// t % tiles_n of matrix t / (tiles_m tiles_n).
// A (m, k) is row-major (a[i*lda + k]) or, when ta, a transposed view (a[k*lda + i]); so B.
// C is row-major with row stride ldc; sa, sb, sc step between matrices (0: broadcast).
struct GemmGeom {
    wb_i64 m, n, k, lda, ldb, ldc, sa, sb, sc, ta, tb, tiles_m, tiles_n, batch;
};

#define GEMM_KERNEL(name, T)                                                        \
    WB_KERNEL_BOUNDED(256) gemm_##name(WB_OUT(T, c, 0), WB_IN(T, a, 1), WB_IN(T, b, 2), \
                                       WB_ARG(GemmGeom, g, 3),                      \
                                       WB_ARG(float, beta, 4) WB_THREAD_ARGS) {     \
        WB_SHARED float tile_a[16][17];                                             \
        WB_SHARED float tile_b[16][17];                                             \
        wb_i64 tiles = g.tiles_m * g.tiles_n;                                       \
        int tx = (int)(WB_THREAD % 16), ty = (int)(WB_THREAD / 16);                 \
        for (wb_i64 t = WB_BLOCK_ID; t < g.batch * tiles; t += WB_BLOCKS) {         \
            wb_i64 bi = t / tiles;                                                  \
            wb_i64 i = ((t / g.tiles_n) % g.tiles_m) * 16 + ty;                     \
            wb_i64 j = (t % g.tiles_n) * 16 + tx;                                   \
            float acc = 0.0f;                                                       \
            for (wb_i64 k0 = 0; k0 < g.k; k0 += 16) {                               \
                wb_i64 ka = k0 + tx, kb = k0 + ty;                                  \
                wb_i64 ia = g.ta ? ka * g.lda + i : i * g.lda + ka;                 \
                wb_i64 ib = g.tb ? j * g.ldb + kb : kb * g.ldb + j;                 \
                tile_a[ty][tx] = (i < g.m && ka < g.k) ? (float)wb_load(a[bi * g.sa + ia]) : 0.0f; \
                tile_b[ty][tx] = (kb < g.k && j < g.n) ? (float)wb_load(b[bi * g.sb + ib]) : 0.0f; \
                WB_BARRIER();                                                       \
                for (int kk = 0; kk < 16; ++kk) acc += tile_a[ty][kk] * tile_b[kk][tx]; \
                WB_BARRIER();                                                       \
            }                                                                       \
            if (i < g.m && j < g.n) {                                               \
                wb_i64 at = bi * g.sc + i * g.ldc + j;                              \
                if (beta != 0.0f) acc += beta * (float)wb_load(c[at]);              \
                c[at] = Store<T>::from(acc);                                        \
            }                                                                       \
        }                                                                           \
    }
GEMM_KERNEL(f16, f16)
GEMM_KERNEL(bf16, bf16)
GEMM_KERNEL(f32, f32)
