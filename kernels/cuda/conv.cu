// Convolution as im2col + GEMM (cuBLAS) and its adjoint col2im (transposed convolution and the
// input gradient). x is NCHW through an UNMERGED 4-d Layout; `col` is contiguous
// (C * kh * kw, Ho * Wo) for image `img`, rows ordered (c, i, j) like the weight (O, C, kh, kw).
#include "common.cuh"

struct ConvGeom {
    long long C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo;
};

#define CONV_KERNELS(name, T)                                                       \
    extern "C" __global__ void im2col_##name(T* __restrict__ col, const T* __restrict__ x, \
                                             Layout lx, long long img, ConvGeom g) { \
        long long cols = g.Ho * g.Wo;                                               \
        long long n = g.C * g.kh * g.kw * cols;                                     \
        WB_LOOP(e, n) {                                                             \
            long long r = e / cols, p = e - r * cols;                               \
            long long c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;  \
            long long oy = p / g.Wo, ox = p - oy * g.Wo;                            \
            long long y = oy * g.sh - g.ph + i * g.dh, xx = ox * g.sw - g.pw + j * g.dw; \
            T v = Store<T>::from(0);                                                \
            if (y >= 0 && y < g.H && xx >= 0 && xx < g.W)                           \
                v = x[lx.offset + img * lx.strides[0] + c * lx.strides[1] +         \
                      y * lx.strides[2] + xx * lx.strides[3]];                      \
            col[e] = v;                                                             \
        }                                                                           \
    }                                                                               \
    /* image (C, H, W) contiguous = sum of the col entries that im2col read from each pixel */ \
    extern "C" __global__ void col2im_##name(T* __restrict__ out, const T* __restrict__ col, \
                                             ConvGeom g) {                           \
        typedef Acc<T>::type C;                                                     \
        long long n = g.C * g.H * g.W;                                              \
        long long cols = g.Ho * g.Wo;                                               \
        WB_LOOP(e, n) {                                                             \
            long long c = e / (g.H * g.W), y = (e / g.W) % g.H, xx = e % g.W;       \
            C acc = 0;                                                              \
            for (long long i = 0; i < g.kh; ++i) {                                  \
                long long ty = y + g.ph - i * g.dh;                                 \
                if (ty < 0 || ty % g.sh) continue;                                  \
                long long oy = ty / g.sh;                                           \
                if (oy >= g.Ho) continue;                                           \
                for (long long j = 0; j < g.kw; ++j) {                              \
                    long long tx = xx + g.pw - j * g.dw;                            \
                    if (tx < 0 || tx % g.sw) continue;                              \
                    long long ox = tx / g.sw;                                       \
                    if (ox >= g.Wo) continue;                                       \
                    long long r = (c * g.kh + i) * g.kw + j;                        \
                    acc += wb_load(col[r * cols + oy * g.Wo + ox]);                 \
                }                                                                   \
            }                                                                       \
            out[e] = Store<T>::from(acc);                                           \
        }                                                                           \
    }
WB_FLOAT_DTYPES(CONV_KERNELS)
