// 2-d pooling over NCHW (x through an UNMERGED 4-d Layout); outputs contiguous (N, C, Ho, Wo).
//   max_pool2d_<dt>: values and i64 indices into H*W (PyTorch's): among equal maxima the
//     first tap wins, a NaN wins (the last NaN), a window of -inf reports its first real
//     element and a window of padding only reports -1 (value -inf).
//   max_pool2d_backward_<dt>: routes each output gradient to its index.
//   avg_pool2d_<dt>: PyTorch's divisor (count_include_pad, divisor_override > 0).
//   adaptive_avg_pool2d_<dt>: windows [floor(o H / Ho), ceil((o + 1) H / Ho)).
// The backward kernels add into grad_in (N, C, H, W) in Acc<T> (f64 or f32), zeroed by the
// host, with wb_atomic_add; their g (and idx) are contiguous (N, C, Ho, Wo).
// Written in the portable dialect (common.h).

struct PoolGeom {
    wb_i64 N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo;
};

WB_FN wb_i64 x_at(WB_LAYOUT_REF l, wb_i64 n, wb_i64 c, wb_i64 y, wb_i64 x) {
    return l.offset + n * l.strides[0] + c * l.strides[1] + y * l.strides[2] + x * l.strides[3];
}

// The pixels an output pixel averages: [y0, y1) x [x0, x1) inside the image, and its divisor.
struct PoolWindow {
    wb_i64 y0, y1, x0, x1, divisor;
};
WB_FN PoolWindow avg_window(WB_REF(PoolGeom) g, wb_i64 oy, wb_i64 ox, int count_include_pad,
                            wb_i64 divisor) {
    PoolWindow w;
    w.y0 = oy * g.sh - g.ph;
    w.x0 = ox * g.sw - g.pw;
    w.y1 = wb_min(w.y0 + g.kh, g.H + g.ph);
    w.x1 = wb_min(w.x0 + g.kw, g.W + g.pw);
    wb_i64 padded = (w.y1 - w.y0) * (w.x1 - w.x0);
    w.y0 = wb_max(w.y0, (wb_i64)0);
    w.x0 = wb_max(w.x0, (wb_i64)0);
    w.y1 = wb_min(w.y1, g.H);
    w.x1 = wb_min(w.x1, g.W);
    w.divisor = divisor > 0 ? divisor
              : (count_include_pad ? padded : (w.y1 - w.y0) * (w.x1 - w.x0));
    return w;
}
WB_FN PoolWindow adaptive_window(WB_REF(PoolGeom) g, wb_i64 oy, wb_i64 ox) {
    PoolWindow w;
    w.y0 = oy * g.H / g.Ho;
    w.y1 = ((oy + 1) * g.H + g.Ho - 1) / g.Ho;
    w.x0 = ox * g.W / g.Wo;
    w.x1 = ((ox + 1) * g.W + g.Wo - 1) / g.Wo;
    w.divisor = (w.y1 - w.y0) * (w.x1 - w.x0);
    return w;
}

// Σ x over a window, divided by its divisor.
template <typename T>
WB_FN typename Acc<T>::type window_mean(WB_GLOBAL const T* x, WB_LAYOUT_REF lx, wb_i64 n,
                                        wb_i64 c, PoolWindow w) {
    typedef typename Acc<T>::type C;
    C acc = 0;
    for (wb_i64 y = w.y0; y < w.y1; ++y)
        for (wb_i64 xx = w.x0; xx < w.x1; ++xx) acc += wb_load(x[x_at(lx, n, c, y, xx)]);
    return acc / (C)w.divisor;
}

// v spread over a window of plane nc of grad_in.
template <typename C>
WB_FN void window_spread(WB_GLOBAL C* grad_in, WB_REF(PoolGeom) p, wb_i64 nc, PoolWindow w,
                         C v) {
    for (wb_i64 y = w.y0; y < w.y1; ++y)
        for (wb_i64 xx = w.x0; xx < w.x1; ++xx)
            wb_atomic_add(grad_in, (nc * p.H + y) * p.W + xx, v);
}

#define POOL_KERNELS(name, T)                                                       \
    WB_KERNEL max_pool2d_##name(WB_OUT(T, out, 0), WB_OUT(i64, idx, 1), WB_IN(T, x, 2), \
                                WB_ARG(Layout, lx, 3), WB_ARG(PoolGeom, g, 4) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        wb_i64 total = g.N * g.C * g.Ho * g.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                           \
            wb_i64 c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);      \
            C best = -INFINITY;                                                     \
            wb_i64 arg = -1;                                                        \
            for (wb_i64 i = 0; i < g.kh; ++i) {                                     \
                wb_i64 y = oy * g.sh - g.ph + i * g.dh;                             \
                if (y < 0 || y >= g.H) continue;                                    \
                for (wb_i64 j = 0; j < g.kw; ++j) {                                 \
                    wb_i64 xx = ox * g.sw - g.pw + j * g.dw;                        \
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
    WB_KERNEL avg_pool2d_##name(WB_OUT(T, out, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), \
                                WB_ARG(PoolGeom, g, 3), WB_ARG(int, count_include_pad, 4), \
                                WB_ARG(wb_i64, divisor, 5) WB_THREAD_ARGS) {        \
        wb_i64 total = g.N * g.C * g.Ho * g.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                           \
            wb_i64 c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);      \
            PoolWindow w = avg_window(g, oy, ox, count_include_pad, divisor);       \
            out[e] = Store<T>::from(window_mean(x, lx, n, c, w));                   \
        }                                                                           \
    }                                                                               \
    WB_KERNEL adaptive_avg_pool2d_##name(WB_OUT(T, out, 0), WB_IN(T, x, 1),         \
                                         WB_ARG(Layout, lx, 2),                     \
                                         WB_ARG(PoolGeom, g, 3) WB_THREAD_ARGS) {   \
        wb_i64 total = g.N * g.C * g.Ho * g.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                           \
            wb_i64 c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);      \
            out[e] = Store<T>::from(window_mean(x, lx, n, c, adaptive_window(g, oy, ox))); \
        }                                                                           \
    }                                                                               \
    WB_KERNEL max_pool2d_backward_##name(                                           \
        WB_OUT(Acc<T>::type, grad_in, 0), WB_IN(T, g, 1), WB_IN(i64, idx, 2),       \
        WB_ARG(wb_i64, total, 3), WB_ARG(wb_i64, per_plane, 4),                     \
        WB_ARG(wb_i64, plane, 5) WB_THREAD_ARGS) {                                  \
        WB_LOOP(e, total) {                                                         \
            wb_i64 at = idx[e];                                                     \
            if (at >= 0) wb_atomic_add(grad_in, (e / per_plane) * plane + at, wb_load(g[e])); \
        }                                                                           \
    }                                                                               \
    WB_KERNEL avg_pool2d_backward_##name(                                           \
        WB_OUT(Acc<T>::type, grad_in, 0), WB_IN(T, g, 1), WB_ARG(PoolGeom, p, 2),   \
        WB_ARG(int, count_include_pad, 3), WB_ARG(wb_i64, divisor, 4) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        wb_i64 total = p.N * p.C * p.Ho * p.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % p.Wo, oy = (e / p.Wo) % p.Ho, nc = e / (p.Wo * p.Ho);   \
            PoolWindow w = avg_window(p, oy, ox, count_include_pad, divisor);       \
            window_spread(grad_in, p, nc, w, wb_load(g[e]) / (C)w.divisor);         \
        }                                                                           \
    }                                                                               \
    WB_KERNEL adaptive_avg_pool2d_backward_##name(                                  \
        WB_OUT(Acc<T>::type, grad_in, 0), WB_IN(T, g, 1),                           \
        WB_ARG(PoolGeom, p, 2) WB_THREAD_ARGS) {                                    \
        typedef Acc<T>::type C;                                                     \
        wb_i64 total = p.N * p.C * p.Ho * p.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % p.Wo, oy = (e / p.Wo) % p.Ho, nc = e / (p.Wo * p.Ho);   \
            PoolWindow w = adaptive_window(p, oy, ox);                              \
            window_spread(grad_in, p, nc, w, wb_load(g[e]) / (C)w.divisor);         \
        }                                                                           \
    }
WB_FLOAT_DTYPES(POOL_KERNELS)
