// 2-d upsampling of NCHW (x through an UNMERGED 4-d Layout) into contiguous (N, C, Ho, Wo).
//   nearest: src = min(floor(o * scale), H - 1), scale = 1 / scale_factor or H / Ho (f32).
//   bilinear: src = o * scale when align (scale = (H-1)/(Ho-1)), else max((o + 0.5) scale - 0.5,
//   0); an axis whose size does not change is passed as scale 1, align 1 (an exact copy).
//   Source positions and weights are computed in the accumulation type (f64 for f64, else f32).
#include "common.cuh"

struct UpGeom {
    long long N, C, H, W, Ho, Wo;
};

__device__ __forceinline__ long long up_at(const Layout& l, long long n, long long c, long long y,
                                           long long x) {
    return l.offset + n * l.strides[0] + c * l.strides[1] + y * l.strides[2] + x * l.strides[3];
}

template <typename C>
__device__ __forceinline__ C up_src(long long o, C scale, int align) {
    C s = align ? (C)o * scale : ((C)o + (C)0.5) * scale - (C)0.5;
    return s < (C)0 ? (C)0 : s;
}

#define UPSAMPLE_KERNELS(name, T)                                                   \
    extern "C" __global__ void upsample_nearest2d_##name(T* __restrict__ out,       \
                                                         const T* __restrict__ x, Layout lx, \
                                                         UpGeom g, float scale_h, float scale_w) { \
        long long total = g.N * g.C * g.Ho * g.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                        \
            long long c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);   \
            long long y = min((long long)floorf((float)oy * scale_h), g.H - 1);     \
            long long xx = min((long long)floorf((float)ox * scale_w), g.W - 1);    \
            out[e] = x[up_at(lx, n, c, y, xx)];                                     \
        }                                                                           \
    }                                                                               \
    extern "C" __global__ void upsample_bilinear2d_##name(                          \
        T* __restrict__ out, const T* __restrict__ x, Layout lx, UpGeom g, double scale_h, \
        double scale_w, int align_h, int align_w) {                                 \
        typedef Acc<T>::type C;                                                     \
        long long total = g.N * g.C * g.Ho * g.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                        \
            long long c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);   \
            C sy = up_src<C>(oy, (C)scale_h, align_h), sx = up_src<C>(ox, (C)scale_w, align_w); \
            long long y0 = min((long long)sy, g.H - 1), x0 = min((long long)sx, g.W - 1); \
            long long y1 = min(y0 + 1, g.H - 1), x1 = min(x0 + 1, g.W - 1);         \
            C ly = sy - (C)y0, lx_ = sx - (C)x0;                                    \
            C v00 = wb_load(x[up_at(lx, n, c, y0, x0)]), v01 = wb_load(x[up_at(lx, n, c, y0, x1)]); \
            C v10 = wb_load(x[up_at(lx, n, c, y1, x0)]), v11 = wb_load(x[up_at(lx, n, c, y1, x1)]); \
            C top = v00 + (v01 - v00) * lx_, bottom = v10 + (v11 - v10) * lx_;      \
            out[e] = Store<T>::from(top + (bottom - top) * ly);                     \
        }                                                                           \
    }
WB_FLOAT_DTYPES(UPSAMPLE_KERNELS)

// Backward: each output gradient (contiguous (N, C, Ho, Wo)) goes to the input pixels it was
// read from, into grad_in (N, C, H, W) zeroed by the host (atomicAdd; f64 for f64, else f32).
#define UPSAMPLE_BACKWARD_KERNELS(name, T)                                          \
    extern "C" __global__ void upsample_nearest2d_backward_##name(                  \
        Acc<T>::type* __restrict__ grad_in, const T* __restrict__ g, UpGeom u, float scale_h, \
        float scale_w) {                                                            \
        long long total = u.N * u.C * u.Ho * u.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % u.Wo, oy = (e / u.Wo) % u.Ho, nc = e / (u.Wo * u.Ho); \
            long long y = min((long long)floorf((float)oy * scale_h), u.H - 1);     \
            long long xx = min((long long)floorf((float)ox * scale_w), u.W - 1);    \
            atomicAdd(grad_in + (nc * u.H + y) * u.W + xx, wb_load(g[e]));          \
        }                                                                           \
    }                                                                               \
    extern "C" __global__ void upsample_bilinear2d_backward_##name(                 \
        Acc<T>::type* __restrict__ grad_in, const T* __restrict__ g, UpGeom u, double scale_h, \
        double scale_w, int align_h, int align_w) {                                 \
        typedef Acc<T>::type C;                                                     \
        long long total = u.N * u.C * u.Ho * u.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % u.Wo, oy = (e / u.Wo) % u.Ho, nc = e / (u.Wo * u.Ho); \
            C sy = up_src<C>(oy, (C)scale_h, align_h), sx = up_src<C>(ox, (C)scale_w, align_w); \
            long long y0 = min((long long)sy, u.H - 1), x0 = min((long long)sx, u.W - 1); \
            long long y1 = min(y0 + 1, u.H - 1), x1 = min(x0 + 1, u.W - 1);         \
            C ly = sy - (C)y0, lx_ = sx - (C)x0;                                    \
            C v = wb_load(g[e]);                                                    \
            C* base = grad_in + nc * u.H * u.W;                                     \
            atomicAdd(base + y0 * u.W + x0, v * ((C)1 - ly) * ((C)1 - lx_));        \
            atomicAdd(base + y0 * u.W + x1, v * ((C)1 - ly) * lx_);                 \
            atomicAdd(base + y1 * u.W + x0, v * ly * ((C)1 - lx_));                 \
            atomicAdd(base + y1 * u.W + x1, v * ly * lx_);                          \
        }                                                                           \
    }
WB_FLOAT_DTYPES(UPSAMPLE_BACKWARD_KERNELS)
