// 2-d upsampling of NCHW (x through an UNMERGED 4-d Layout) into contiguous (N, C, Ho, Wo).
//   nearest: src = min(floor(o * scale), H - 1), scale = 1 / scale_factor or H / Ho (f32).
//   bilinear: src = o * scale when align (scale = (H-1)/(Ho-1)), else max((o + 0.5) scale - 0.5,
//   0); an axis whose size does not change is passed as scale 1, align 1 (an exact copy).
//   Source positions and weights are computed in the accumulation type (f64 for f64, else f32).
// Backward: each output gradient (contiguous (N, C, Ho, Wo)) goes to the input pixels it was
// read from, into grad_in (N, C, H, W) zeroed by the host (wb_atomic_add; f64 for f64, else
// f32). Written in the portable dialect (common.h).

struct UpGeom {
    wb_i64 N, C, H, W, Ho, Wo;
};

WB_FN wb_i64 up_at(WB_LAYOUT_REF l, wb_i64 n, wb_i64 c, wb_i64 y, wb_i64 x) {
    return l.offset + n * l.strides[0] + c * l.strides[1] + y * l.strides[2] + x * l.strides[3];
}

// The nearest source row (column) of output row o.
WB_FN wb_i64 up_nearest(wb_i64 o, float scale, wb_i64 n) {
    return wb_min((wb_i64)floor((float)o * scale), n - 1);
}

template <typename C> WB_FN C up_src(wb_i64 o, C scale, int align) {
    C s = align ? (C)o * scale : ((C)o + (C)0.5) * scale - (C)0.5;
    return s < (C)0 ? (C)0 : s;
}

// The two source rows (columns) of output row o and the weight of the second.
template <typename C> struct UpTaps {
    wb_i64 i0, i1;
    C w1;
};
template <typename C> WB_FN UpTaps<C> up_taps(wb_i64 o, C scale, int align, wb_i64 n) {
    C s = up_src<C>(o, scale, align);
    UpTaps<C> t;
    t.i0 = wb_min((wb_i64)s, n - 1);
    t.i1 = wb_min(t.i0 + 1, n - 1);
    t.w1 = s - (C)t.i0;
    return t;
}

#define UPSAMPLE_KERNELS(name, T)                                                   \
    WB_KERNEL upsample_nearest2d_##name(WB_OUT(T, out, 0), WB_IN(T, x, 1),          \
                                        WB_ARG(Layout, lx, 2), WB_ARG(UpGeom, g, 3), \
                                        WB_ARG(float, scale_h, 4),                  \
                                        WB_ARG(float, scale_w, 5) WB_THREAD_ARGS) { \
        wb_i64 total = g.N * g.C * g.Ho * g.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                           \
            wb_i64 c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);      \
            wb_i64 y = up_nearest(oy, scale_h, g.H), xx = up_nearest(ox, scale_w, g.W); \
            out[e] = x[up_at(lx, n, c, y, xx)];                                     \
        }                                                                           \
    }                                                                               \
    WB_KERNEL upsample_bilinear2d_##name(                                           \
        WB_OUT(T, out, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), WB_ARG(UpGeom, g, 3), \
        WB_ARG(wb_wide, scale_h, 4), WB_ARG(wb_wide, scale_w, 5), WB_ARG(int, align_h, 6), \
        WB_ARG(int, align_w, 7) WB_THREAD_ARGS) {                                   \
        typedef Acc<T>::type C;                                                     \
        wb_i64 total = g.N * g.C * g.Ho * g.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % g.Wo, oy = (e / g.Wo) % g.Ho;                           \
            wb_i64 c = (e / (g.Wo * g.Ho)) % g.C, n = e / (g.Wo * g.Ho * g.C);      \
            UpTaps<C> ty = up_taps<C>(oy, (C)scale_h, align_h, g.H);                \
            UpTaps<C> tx = up_taps<C>(ox, (C)scale_w, align_w, g.W);                \
            C v00 = wb_load(x[up_at(lx, n, c, ty.i0, tx.i0)]);                      \
            C v01 = wb_load(x[up_at(lx, n, c, ty.i0, tx.i1)]);                      \
            C v10 = wb_load(x[up_at(lx, n, c, ty.i1, tx.i0)]);                      \
            C v11 = wb_load(x[up_at(lx, n, c, ty.i1, tx.i1)]);                      \
            C top = v00 + (v01 - v00) * tx.w1, bottom = v10 + (v11 - v10) * tx.w1;  \
            out[e] = Store<T>::from(top + (bottom - top) * ty.w1);                  \
        }                                                                           \
    }
WB_FLOAT_DTYPES(UPSAMPLE_KERNELS)

#define UPSAMPLE_BACKWARD_KERNELS(name, T)                                          \
    WB_KERNEL upsample_nearest2d_backward_##name(                                   \
        WB_OUT(Acc<T>::type, grad_in, 0), WB_IN(T, g, 1), WB_ARG(UpGeom, u, 2),     \
        WB_ARG(float, scale_h, 3), WB_ARG(float, scale_w, 4) WB_THREAD_ARGS) {      \
        wb_i64 total = u.N * u.C * u.Ho * u.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % u.Wo, oy = (e / u.Wo) % u.Ho, nc = e / (u.Wo * u.Ho);   \
            wb_i64 y = up_nearest(oy, scale_h, u.H), xx = up_nearest(ox, scale_w, u.W); \
            wb_atomic_add(grad_in, (nc * u.H + y) * u.W + xx, wb_load(g[e]));       \
        }                                                                           \
    }                                                                               \
    WB_KERNEL upsample_bilinear2d_backward_##name(                                  \
        WB_OUT(Acc<T>::type, grad_in, 0), WB_IN(T, g, 1), WB_ARG(UpGeom, u, 2),     \
        WB_ARG(wb_wide, scale_h, 3), WB_ARG(wb_wide, scale_w, 4), WB_ARG(int, align_h, 5), \
        WB_ARG(int, align_w, 6) WB_THREAD_ARGS) {                                   \
        typedef Acc<T>::type C;                                                     \
        wb_i64 total = u.N * u.C * u.Ho * u.Wo;                                     \
        WB_LOOP(e, total) {                                                         \
            wb_i64 ox = e % u.Wo, oy = (e / u.Wo) % u.Ho, nc = e / (u.Wo * u.Ho);   \
            UpTaps<C> ty = up_taps<C>(oy, (C)scale_h, align_h, u.H);                \
            UpTaps<C> tx = up_taps<C>(ox, (C)scale_w, align_w, u.W);                \
            C v = wb_load(g[e]);                                                    \
            wb_i64 base = nc * u.H * u.W;                                           \
            C w0y = (C)1 - ty.w1, w0x = (C)1 - tx.w1;                               \
            wb_atomic_add(grad_in, base + ty.i0 * u.W + tx.i0, v * w0y * w0x);      \
            wb_atomic_add(grad_in, base + ty.i0 * u.W + tx.i1, v * w0y * tx.w1);    \
            wb_atomic_add(grad_in, base + ty.i1 * u.W + tx.i0, v * ty.w1 * w0x);    \
            wb_atomic_add(grad_in, base + ty.i1 * u.W + tx.i1, v * ty.w1 * tx.w1);  \
        }                                                                           \
    }
WB_FLOAT_DTYPES(UPSAMPLE_BACKWARD_KERNELS)
