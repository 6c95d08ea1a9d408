// Convolution as im2col + GEMM (the backend's BLAS) and its adjoint col2im (transposed
// convolution and the input gradient). x is NCHW through an UNMERGED 4-d Layout; `col` is
// contiguous (C * kh * kw, Ho * Wo) for image `img`, rows ordered (c, i, j) like the weight
// (O, C, kh, kw).
// Written in the portable dialect (common.h).

struct ConvGeom {
    wb_i64 C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo;
};

#define CONV_KERNELS(name, T)                                                       \
    WB_KERNEL im2col_##name(WB_OUT(T, col, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), \
                            WB_ARG(wb_i64, img, 3), WB_ARG(ConvGeom, g, 4) WB_THREAD_ARGS) { \
        wb_i64 cols = g.Ho * g.Wo;                                                  \
        wb_i64 n = g.C * g.kh * g.kw * cols;                                        \
        WB_LOOP(e, n) {                                                             \
            wb_i64 r = e / cols, p = e - r * cols;                                  \
            wb_i64 c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;      \
            wb_i64 oy = p / g.Wo, ox = p - oy * g.Wo;                               \
            wb_i64 y = oy * g.sh - g.ph + i * g.dh, xx = ox * g.sw - g.pw + j * g.dw; \
            T v = Store<T>::from(0);                                                \
            if (y >= 0 && y < g.H && xx >= 0 && xx < g.W)                           \
                v = x[lx.offset + img * lx.strides[0] + c * lx.strides[1] +         \
                      y * lx.strides[2] + xx * lx.strides[3]];                      \
            col[e] = v;                                                             \
        }                                                                           \
    }                                                                               \
    /* image (C, H, W) contiguous = sum of the col entries that im2col read from each pixel */ \
    WB_KERNEL col2im_##name(WB_OUT(T, out, 0), WB_IN(T, col, 1),                    \
                            WB_ARG(ConvGeom, g, 2) WB_THREAD_ARGS) {                \
        typedef Acc<T>::type C;                                                     \
        wb_i64 n = g.C * g.H * g.W;                                                 \
        wb_i64 cols = g.Ho * g.Wo;                                                  \
        WB_LOOP(e, n) {                                                             \
            wb_i64 c = e / (g.H * g.W), y = (e / g.W) % g.H, xx = e % g.W;          \
            C acc = 0;                                                              \
            for (wb_i64 i = 0; i < g.kh; ++i) {                                     \
                wb_i64 ty = y + g.ph - i * g.dh;                                    \
                if (ty < 0 || ty % g.sh) continue;                                  \
                wb_i64 oy = ty / g.sh;                                              \
                if (oy >= g.Ho) continue;                                           \
                for (wb_i64 j = 0; j < g.kw; ++j) {                                 \
                    wb_i64 tx = xx + g.pw - j * g.dw;                               \
                    if (tx < 0 || tx % g.sw) continue;                              \
                    wb_i64 ox = tx / g.sw;                                          \
                    if (ox >= g.Wo) continue;                                       \
                    wb_i64 r = (c * g.kh + i) * g.kw + j;                           \
                    acc += wb_load(col[r * cols + oy * g.Wo + ox]);                 \
                }                                                                   \
            }                                                                       \
            out[e] = Store<T>::from(acc);                                           \
        }                                                                           \
    }
WB_FLOAT_DTYPES(CONV_KERNELS)
