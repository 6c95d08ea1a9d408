// 2-d pooling over NCHW (x through an UNMERGED 4-d Layout); outputs contiguous (N, C, Ho, Wo).
//   max_pool2d_<dt>: values and i64 indices into H*W (PyTorch's): among equal maxima the
//     first tap wins, a NaN wins (the last NaN), a window of -inf reports its first real
//     element and a window of padding only reports -1 (value -inf).
//   max_pool2d_backward_<dt>: routes each output gradient to its index (atomicAdd, f32 acc).
//   avg_pool2d_<dt>: PyTorch's divisor (count_include_pad, divisor_override > 0).
//   adaptive_avg_pool2d_<dt>: windows [floor(o H / Ho), ceil((o + 1) H / Ho)).
#include "common.cuh"

struct PoolGeom {
    long long N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo;
};

__device__ __forceinline__ long long x_at(const Layout& l, long long n, long long c, long long y,
                                          long long x) {
    return l.offset + n * l.strides[0] + c * l.strides[1] + y * l.strides[2] + x * l.strides[3];
}

#define POOL_KERNELS(name, T)                                                       \
    extern "C" __global__ void max_pool2d_##name(T* __restrict__ out, i64* __restrict__ idx, \
                                                 const T* __restrict__ x, Layout lx, PoolGeom g) { \
        typedef Acc<T>::type C;                                                     \
        long long total = g.N * g.C * g.Ho * g.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                        \
            long long c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);   \
            C best = -INFINITY;                                                     \
            long long arg = -1;                                                     \
            for (long long i = 0; i < g.kh; ++i) {                                  \
                long long y = oy * g.sh - g.ph + i * g.dh;                          \
                if (y < 0 || y >= g.H) continue;                                    \
                for (long long j = 0; j < g.kw; ++j) {                              \
                    long long xx = ox * g.sw - g.pw + j * g.dw;                     \
                    if (xx < 0 || xx >= g.W) continue;                              \
                    C v = wb_load(x[x_at(lx, n, c, y, xx)]);                        \
                    if (arg < 0 || v != v || (best == best && v > best)) {          \
                        best = v;                                                   \
                        arg = y * g.W + xx;                                         \
                    }                                                               \
                }                                                                   \
            }                                                                       \
            out[e] = Store<T>::from(best);                                          \
            idx[e] = arg;                                                           \
        }                                                                           \
    }                                                                               \
    extern "C" __global__ void avg_pool2d_##name(T* __restrict__ out, const T* __restrict__ x, \
                                                 Layout lx, PoolGeom g, int count_include_pad, \
                                                 long long divisor) {                \
        typedef Acc<T>::type C;                                                     \
        long long total = g.N * g.C * g.Ho * g.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                        \
            long long c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);   \
            long long y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;                 \
            long long y1 = min(y0 + g.kh, g.H + g.ph), x1 = min(x0 + g.kw, g.W + g.pw); \
            long long padded = (y1 - y0) * (x1 - x0);                               \
            y0 = max(y0, 0LL); x0 = max(x0, 0LL);                                   \
            y1 = min(y1, g.H); x1 = min(x1, g.W);                                   \
            C acc = 0;                                                              \
            for (long long y = y0; y < y1; ++y)                                     \
                for (long long xx = x0; xx < x1; ++xx) acc += wb_load(x[x_at(lx, n, c, y, xx)]); \
            long long div = divisor > 0 ? divisor                                   \
                          : (count_include_pad ? padded : (y1 - y0) * (x1 - x0));   \
            out[e] = Store<T>::from(acc / (C)div);                                  \
        }                                                                           \
    }                                                                               \
    extern "C" __global__ void adaptive_avg_pool2d_##name(T* __restrict__ out,      \
                                                          const T* __restrict__ x, Layout lx, \
                                                          PoolGeom g) {              \
        typedef Acc<T>::type C;                                                     \
        long long total = g.N * g.C * g.Ho * g.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                        \
            long long c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);   \
            long long y0 = oy * g.H / g.Ho, y1 = ((oy + 1) * g.H + g.Ho - 1) / g.Ho; \
            long long x0 = ox * g.W / g.Wo, x1 = ((ox + 1) * g.W + g.Wo - 1) / g.Wo; \
            C acc = 0;                                                              \
            for (long long y = y0; y < y1; ++y)                                     \
                for (long long xx = x0; xx < x1; ++xx) acc += wb_load(x[x_at(lx, n, c, y, xx)]); \
            out[e] = Store<T>::from(acc / (C)((y1 - y0) * (x1 - x0)));              \
        }                                                                           \
    }                                                                               \
    /* grad_in (N, C, H, W) in Acc<T> (f64 or f32), zeroed by the host; g and idx contiguous */ \
    extern "C" __global__ void max_pool2d_backward_##name(Acc<T>::type* __restrict__ grad_in, \
                                                          const T* __restrict__ g,   \
                                                          const i64* __restrict__ idx, \
                                                          long long total, long long per_plane, \
                                                          long long plane) {         \
        WB_LOOP(e, total) {                                                         \
            long long at = idx[e];                                                  \
            if (at >= 0) atomicAdd(grad_in + (e / per_plane) * plane + at, wb_load(g[e])); \
        }                                                                           \
    }
WB_FLOAT_DTYPES(POOL_KERNELS)

// Backward of avg / adaptive avg pooling: each output gradient (contiguous (N, C, Ho, Wo)) is
// spread over its window into grad_in (N, C, H, W) in Acc<T> (f64 or f32), zeroed by the host
// (atomicAdd).
#define POOL_BACKWARD_KERNELS(name, T)                                              \
    extern "C" __global__ void avg_pool2d_backward_##name(Acc<T>::type* __restrict__ grad_in, \
                                                          const T* __restrict__ g, PoolGeom p, \
                                                          int count_include_pad,     \
                                                          long long divisor) {       \
        long long total = p.N * p.C * p.Ho * p.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % p.Wo, oy = (e / p.Wo) % p.Ho, nc = e / (p.Wo * p.Ho); \
            long long y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;                 \
            long long y1 = min(y0 + p.kh, p.H + p.ph), x1 = min(x0 + p.kw, p.W + p.pw); \
            long long padded = (y1 - y0) * (x1 - x0);                               \
            y0 = max(y0, 0LL); x0 = max(x0, 0LL);                                   \
            y1 = min(y1, p.H); x1 = min(x1, p.W);                                   \
            long long div = divisor > 0 ? divisor                                   \
                          : (count_include_pad ? padded : (y1 - y0) * (x1 - x0));   \
            Acc<T>::type v = wb_load(g[e]) / (Acc<T>::type)div;                     \
            for (long long y = y0; y < y1; ++y)                                     \
                for (long long xx = x0; xx < x1; ++xx)                              \
                    atomicAdd(grad_in + (nc * p.H + y) * p.W + xx, v);              \
        }                                                                           \
    }                                                                               \
    extern "C" __global__ void adaptive_avg_pool2d_backward_##name(                 \
        Acc<T>::type* __restrict__ grad_in, const T* __restrict__ g, PoolGeom p) {  \
        long long total = p.N * p.C * p.Ho * p.Wo;                                  \
        WB_LOOP(e, total) {                                                         \
            long long ox = e % p.Wo, oy = (e / p.Wo) % p.Ho, nc = e / (p.Wo * p.Ho); \
            long long y0 = oy * p.H / p.Ho, y1 = ((oy + 1) * p.H + p.Ho - 1) / p.Ho; \
            long long x0 = ox * p.W / p.Wo, x1 = ((ox + 1) * p.W + p.Wo - 1) / p.Wo; \
            Acc<T>::type v = wb_load(g[e]) / (Acc<T>::type)((y1 - y0) * (x1 - x0)); \
            for (long long y = y0; y < y1; ++y)                                     \
                for (long long xx = x0; xx < x1; ++xx)                              \
                    atomicAdd(grad_in + (nc * p.H + y) * p.W + xx, v);              \
        }                                                                           \
    }
WB_FLOAT_DTYPES(POOL_BACKWARD_KERNELS)
