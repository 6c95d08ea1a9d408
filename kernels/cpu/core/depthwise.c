/* Depthwise convolutions (one input channel per group, M outputs per channel) computed
 * directly, one pass over each plane, with their two gradients (backends/cpu/conv.py). With
 * x_t = x[n, c, s_h·h + d_h·i - top, s_w·w + d_w·j - left] for tap (i, j):
 *
 *     forward:       y[n, c·M + o, h, w] = b[c·M + o] + Σ_{i, j} k[c·M + o, i, j] · x_t
 *     input grad:    dx[n, c] = Σ_{o, i, j} k[c·M + o, i, j] · (g[n, c·M + o] scattered back)
 *     weight grad:   dk[c·M + o, i, j] = Σ_{n, h, w} g[n, c·M + o, h, w] · x_t
 *
 * (taps outside x read 0; a negative pad crops). numpy's path makes kh·kw multiply and add
 * passes over the whole output, and im2col would make kh·kw copies of the input for products
 * with one row: here a plane is accumulated in L1, tap by tap over its rows, or (f32 at stride
 * 1, with vector lanes) each vector of outputs sums all its taps in a register from a
 * zero-padded copy of the plane (forward_padded_f32, input_grad_padded_f32). Units are whole
 * planes (output planes, input planes, output channels), so no two threads write the same
 * element. f32 accumulates in f32 (the weight gradient's per-plane dot products summed in
 * f64), f64 in f64; halves are widened by the caller.
 *
 * Measured (one thread, 8×64×56×56, 3×3, AVX-512 EPYC): forward and input gradient 0.9-1.2
 * ms from padded planes, 2.2-3.2 tap by tap (torch 1.4-2.3 and 2.2-3.4 in the same runs); the
 * weight gradient 1.3-1.8 (torch 1.7-3.7). Earlier, tap by tap at 112²: 5.8, 5.9 and 7.5 ms
 * against numpy's 23, 22 and 15. */
#include "conv_geometry.h"
#include "lanes.h"
#include "nd.h"
#include "threads.h"

/* Elements of work above which a call runs on several threads. */
#define WB_DEPTHWISE_PAR (1 << 15)

enum { WB_DW_FORWARD, WB_DW_INPUT_GRAD, WB_DW_WEIGHT_GRAD };

typedef struct {
    const char *a, *b, *bias; /* (x, k), (g, k) or (x, g) by mode; bias (C·M,) or NULL */
    char *out;                /* y, dx or dk */
    Py_ssize_t n, c, m, h, w, ho, wo, kh, kw, sh, sw, dh, dw, top, left;
} dw_ctx;

/* The geometry as locals: with -fno-strict-aliasing a store through a T* may change any
 * field read through ``c``, which would keep the row loops from vectorising. */
#define WB_DW_GEOMETRY(c)                                                                     \
    const Py_ssize_t N = (c)->n, C = (c)->c, M = (c)->m, H = (c)->h, W = (c)->w;              \
    const Py_ssize_t HO = (c)->ho, WO = (c)->wo, KH = (c)->kh, KW = (c)->kw;                  \
    const Py_ssize_t SH = (c)->sh, SW = (c)->sw, DH = (c)->dh, DW = (c)->dw;                  \
    const Py_ssize_t TOP = (c)->top, LEFT = (c)->left, TAPS = KH * KW;                        \
    (void)N, (void)C, (void)M, (void)H, (void)HO, (void)SH, (void)SW, (void)TAPS

/* d[q·ds + doff] += k · s[q·ss + soff] over q in [q0, q1), the unit strides apart so that
 * they vectorise. */
#define WB_DW_AXPY(T, d, ds, doff, k, s, ss, soff, q0, q1)                                    \
    do {                                                                                      \
        T *restrict d_ = (d);                                                                 \
        const T *restrict s_ = (s);                                                           \
        const T k_ = (k);                                                                     \
        if ((ds) == 1 && (ss) == 1)                                                           \
            for (Py_ssize_t q = (q0); q < (q1); q++) d_[q + (doff)] += k_ * s_[q + (soff)];   \
        else                                                                                  \
            for (Py_ssize_t q = (q0); q < (q1); q++)                                          \
                d_[q * (ds) + (doff)] += k_ * s_[q * (ss) + (soff)];                          \
    } while (0)

/* Σ_{r in [r0, r1), q in [q0, q1)} g[r·wo + q] · s[r·row_step + q·sw]: a tap's share of a
 * weight gradient over one plane. */
#define WB_DW_DOT_FN(SUFFIX, T)                                                               \
    static inline T plane_dot_loop_##SUFFIX(const T *g, const T *s, Py_ssize_t r0,            \
                                            Py_ssize_t r1, Py_ssize_t wo,                     \
                                            Py_ssize_t row_step, Py_ssize_t sw,               \
                                            Py_ssize_t q0, Py_ssize_t q1) {                   \
        T dot = 0;                                                                            \
        for (Py_ssize_t r = r0; r < r1; r++)                                                  \
            for (Py_ssize_t q = q0; q < q1; q++)                                              \
                dot += g[r * wo + q] * s[r * row_step + q * sw];                              \
        return dot;                                                                           \
    }

WB_DW_DOT_FN(f32, float)
WB_DW_DOT_FN(f64, double)
#define plane_dot_f64 plane_dot_loop_f64 /* f64 has no vector form */

/* f32 at unit stride: vectors of products summed by lanes over the whole plane, reduced once
 * (a scalar sum, or one reduction per row, cost more than the products on rows of 56). */
static inline float plane_dot_f32(const float *g, const float *s, Py_ssize_t r0, Py_ssize_t r1,
                                  Py_ssize_t wo, Py_ssize_t row_step, Py_ssize_t sw,
                                  Py_ssize_t q0, Py_ssize_t q1) {
#ifdef WB_LANES
    if (sw == 1) {
        lane_vec acc = lane_zero();
        for (Py_ssize_t r = r0; r < r1; r++) {
            const float *gr = g + r * wo, *sr = s + r * row_step;
            for (Py_ssize_t v0 = q0; v0 < q1; v0 += WB_LANES) {
                const lane_mask m = lanes_between(0, q1 - v0);
                acc = lane_fma(masked_load(gr + v0, m), masked_load(sr + v0, m), acc);
            }
        }
        return lane_sum(acc);
    }
#endif
    return plane_dot_loop_f32(g, s, r0, r1, wo, row_step, sw, q0, q1);
}

/* BODY for each tap (i, j) of the kernel, with r0..r1 the output rows whose tap row lies
 * inside x, off = d_w·j - left and q0..q1 the output columns whose tap column does. */
#define WB_DW_FOR_TAPS(...)                                                                   \
    for (Py_ssize_t i = 0; i < KH; i++) {                                                     \
        Py_ssize_t r0, r1;                                                                    \
        valid_range(i * DH - TOP, SH, H, HO, &r0, &r1);                                       \
        for (Py_ssize_t j = 0; j < KW; j++) {                                                 \
            const Py_ssize_t off = j * DW - LEFT;                                             \
            Py_ssize_t q0, q1;                                                                \
            valid_range(off, SW, W, WO, &q0, &q1);                                            \
            __VA_ARGS__                                                                       \
        }                                                                                     \
    }

#define WB_DW_FNS(SUFFIX, T)                                                                  \
    /* A unit is one output plane (n, c·M + o). */                                            \
    static void forward_##SUFFIX(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1,        \
                                 void *buf) {                                                 \
        (void)t, (void)buf;                                                                   \
        const dw_ctx *c = ctx;                                                                \
        WB_DW_GEOMETRY(c);                                                                    \
        const T *xs = (const T *)c->a, *ks = (const T *)c->b, *bias = (const T *)c->bias;     \
        T *ys = (T *)c->out;                                                                  \
        for (Py_ssize_t u = u0; u < u1; u++) {                                                \
            const Py_ssize_t n = u / (C * M), co = u % (C * M);                               \
            const T *x = xs + (n * C + co / M) * H * W, *k = ks + co * TAPS;                  \
            const T b = bias ? bias[co] : (T)0;                                               \
            T *y = ys + u * HO * WO;                                                          \
            for (Py_ssize_t q = 0; q < HO * WO; q++) y[q] = b;                                \
            WB_DW_FOR_TAPS(                                                                   \
                const T kij = k[i * KW + j];                                                  \
                for (Py_ssize_t r = r0; r < r1; r++)                                          \
                    WB_DW_AXPY(T, y + r * WO, 1, 0, kij, x + (r * SH + i * DH - TOP) * W,     \
                               SW, off, q0, q1);)                                             \
        }                                                                                     \
    }                                                                                         \
                                                                                              \
    /* A unit is one input plane (n, c): its M output planes' gradients added back in turn. */ \
    static void input_grad_##SUFFIX(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1,     \
                                    void *buf) {                                              \
        (void)t, (void)buf;                                                                   \
        const dw_ctx *c = ctx;                                                                \
        WB_DW_GEOMETRY(c);                                                                    \
        const T *gs = (const T *)c->a, *ks = (const T *)c->b;                                 \
        T *dxs = (T *)c->out;                                                                 \
        for (Py_ssize_t u = u0; u < u1; u++) {                                                \
            const Py_ssize_t n = u / C, ch = u % C;                                           \
            T *dx = dxs + u * H * W;                                                          \
            memset(dx, 0, sizeof(T) * (size_t)(H * W));                                       \
            for (Py_ssize_t o = 0; o < M; o++) {                                              \
                const Py_ssize_t co = ch * M + o;                                             \
                const T *g = gs + (n * C * M + co) * HO * WO, *k = ks + co * TAPS;            \
                WB_DW_FOR_TAPS(                                                               \
                    const T kij = k[i * KW + j];                                              \
                    for (Py_ssize_t r = r0; r < r1; r++)                                      \
                        WB_DW_AXPY(T, dx + (r * SH + i * DH - TOP) * W, SW, off, kij,         \
                                   g + r * WO, 1, 0, q0, q1);)                                \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
                                                                                              \
    /* A unit is one output channel c·M + o, over all images: its kh·kw sums in f64. */       \
    static void weight_grad_##SUFFIX(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1,    \
                                     void *buf) {                                             \
        (void)t;                                                                              \
        const dw_ctx *c = ctx;                                                                \
        WB_DW_GEOMETRY(c);                                                                    \
        const T *xs = (const T *)c->a, *gs = (const T *)c->b;                                 \
        T *dks = (T *)c->out;                                                                 \
        double *sums = buf;                                                                   \
        for (Py_ssize_t co = u0; co < u1; co++) {                                             \
            for (Py_ssize_t k = 0; k < TAPS; k++) sums[k] = 0.0;                              \
            for (Py_ssize_t n = 0; n < N; n++) {                                              \
                const T *x = xs + (n * C + co / M) * H * W;                                   \
                const T *restrict g = gs + (n * C * M + co) * HO * WO;                        \
                WB_DW_FOR_TAPS(                                                               \
                    const T *s = x + (i * DH - TOP) * W + off;                                \
                    const T dot = plane_dot_##SUFFIX(g, s, r0, r1, WO, SH * W, SW, q0, q1);   \
                    sums[i * KW + j] += (double)dot;)                                         \
            }                                                                                 \
            for (Py_ssize_t k = 0; k < TAPS; k++) dks[co * TAPS + k] = (T)sums[k];            \
        }                                                                                     \
    }

WB_DW_FNS(f32, float)
WB_DW_FNS(f64, double)

#ifdef WB_LANES
/* The forward at stride 1 in f32: a unit's input plane is first copied into the thread's
 * buffer with its padding as zeros (HP = Ho + (kh-1)·d_h rows of WP = Wo + (kw-1)·d_w; a
 * negative pad crops), so that every tap of a vector of outputs is one load with no edge to
 * test. Each vector of an output row then keeps its sum in a register through all kh·kw taps
 * and is stored once, where the tap-by-tap form above reads and writes y once per tap. */
static void pad_plane(const float *x, Py_ssize_t h, Py_ssize_t w, Py_ssize_t top,
                      Py_ssize_t left, Py_ssize_t hp, Py_ssize_t wp, float *xp) {
    Py_ssize_t q0, q1; /* the buffer's columns that x fills */
    valid_range(-left, 1, w, wp, &q0, &q1);
    for (Py_ssize_t r = 0; r < hp; r++) {
        float *row = xp + r * wp;
        const Py_ssize_t src = r - top;
        if (src < 0 || src >= h || q0 >= q1) {
            memset(row, 0, sizeof(float) * (size_t)wp);
            continue;
        }
        memset(row, 0, sizeof(float) * (size_t)q0);
        memcpy(row + q0, x + src * w + q0 - left, sizeof(float) * (size_t)(q1 - q0));
        memset(row + q1, 0, sizeof(float) * (size_t)(wp - q1));
    }
}

/* y's rows from the padded plane, y = b + Σ taps (add: y += Σ taps); inlined into
 * plane_rows, once with kh = kw = 3 as constants. */
static inline __attribute__((always_inline)) void padded_rows(
    const float *xp, Py_ssize_t wp, const float *k, float b, int add, float *y, Py_ssize_t ho,
    Py_ssize_t wo, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t dh, Py_ssize_t dw) {
    const Py_ssize_t whole = wo - wo % WB_LANES;
    const lane_mask tail = lanes_between(0, wo - whole);
    for (Py_ssize_t r = 0; r < ho; r++) {
        const float *in = xp + r * wp;
        float *out = y + r * wo;
        for (Py_ssize_t v = 0; v < whole; v += WB_LANES) {
            lane_vec acc = add ? lane_load(out + v) : lane_set1(b);
            for (Py_ssize_t i = 0; i < kh; i++)
                for (Py_ssize_t j = 0; j < kw; j++)
                    acc = lane_fma(lane_set1(k[i * kw + j]),
                                   lane_load(in + i * dh * wp + j * dw + v), acc);
            lane_store(out + v, acc);
        }
        if (whole < wo) {
            lane_vec acc = add ? masked_load(out + whole, tail) : lane_set1(b);
            for (Py_ssize_t i = 0; i < kh; i++)
                for (Py_ssize_t j = 0; j < kw; j++)
                    acc = lane_fma(lane_set1(k[i * kw + j]),
                                   masked_load(in + i * dh * wp + j * dw + whole, tail), acc);
            masked_store(out + whole, tail, acc);
        }
    }
}

/* padded_rows with the taps of a 3×3 kernel unrolled. */
static void plane_rows(const float *xp, Py_ssize_t wp, const float *k, float b, int add,
                       float *y, Py_ssize_t ho, Py_ssize_t wo, Py_ssize_t kh, Py_ssize_t kw,
                       Py_ssize_t dh, Py_ssize_t dw) {
    if (kh == 3 && kw == 3) padded_rows(xp, wp, k, b, add, y, ho, wo, 3, 3, dh, dw);
    else padded_rows(xp, wp, k, b, add, y, ho, wo, kh, kw, dh, dw);
}

/* A unit is one output plane (n, c·M + o), as forward_f32's. */
static void forward_padded_f32(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1,
                               void *buf) {
    (void)t;
    const dw_ctx *c = ctx;
    WB_DW_GEOMETRY(c);
    const Py_ssize_t HP = HO + (KH - 1) * DH, WP = WO + (KW - 1) * DW;
    const float *xs = (const float *)c->a, *ks = (const float *)c->b;
    const float *bias = (const float *)c->bias;
    float *xp = buf;
    Py_ssize_t padded = -1; /* the input plane now in xp */
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t n = u / (C * M), co = u % (C * M), src = n * C + co / M;
        if (src != padded) pad_plane(xs + src * H * W, H, W, TOP, LEFT, HP, WP, xp);
        padded = src;
        const float *k = ks + co * TAPS, b = bias ? bias[co] : 0.0f;
        float *y = (float *)c->out + u * HO * WO;
        plane_rows(xp, WP, k, b, 0, y, HO, WO, KH, KW, DH, DW);
    }
}

/* The input gradient at stride 1 in f32, the same way: dx[n, c] = Σ_o g[n, c·M + o] padded
 * by ((kh-1)·d_h - top, (kw-1)·d_w - left) and correlated with its kernel flipped (the taps
 * in reverse order). A unit is one input plane, as input_grad_f32's; the buffer holds the
 * padded plane of g, then the flipped taps. */
static void input_grad_padded_f32(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1,
                                  void *buf) {
    (void)t;
    const dw_ctx *c = ctx;
    WB_DW_GEOMETRY(c);
    const Py_ssize_t HP = H + (KH - 1) * DH, WP = W + (KW - 1) * DW;
    const float *gs = (const float *)c->a, *ks = (const float *)c->b;
    float *gp = buf, *flipped = gp + HP * WP;
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t n = u / C, ch = u % C;
        float *dx = (float *)c->out + u * H * W;
        for (Py_ssize_t o = 0; o < M; o++) {
            const Py_ssize_t co = ch * M + o;
            pad_plane(gs + (n * C * M + co) * HO * WO, HO, WO, (KH - 1) * DH - TOP,
                      (KW - 1) * DW - LEFT, HP, WP, gp);
            for (Py_ssize_t k = 0; k < TAPS; k++) flipped[k] = ks[co * TAPS + TAPS - 1 - k];
            plane_rows(gp, WP, flipped, 0, o > 0, dx, H, W, KH, KW, DH, DW);
        }
    }
}
#endif

/* conv_depthwise(mode, a, b, out, bias or None, N, C, M, H, W, Ho, Wo, kh, kw, sh, sw, dh, dw,
 * top, left); mode 0: a = x (N, C, H, W), b = k (C·M, kh, kw), out = y (N, C·M, Ho, Wo);
 * 1: a = g (N, C·M, Ho, Wo), b = k, out = dx (N, C, H, W); 2: a = x, b = g, out = dk. */
static PyObject *py_conv_depthwise(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 20) {
        PyErr_Format(PyExc_TypeError, "conv_depthwise: expected 20 arguments, found %zd", nargs);
        return NULL;
    }
    const long mode = PyLong_AsLong(args[0]);
    if (mode == -1 && PyErr_Occurred()) return NULL;
    if (mode < WB_DW_FORWARD || mode > WB_DW_WEIGHT_GRAD) {
        PyErr_Format(PyExc_ValueError, "conv_depthwise: expected mode 0, 1 or 2, found %ld", mode);
        return NULL;
    }
    Py_ssize_t v[15]; /* N, C, M, H, W, Ho, Wo, kh, kw, sh, sw, dh, dw | top, left */
    if (sizes(args + 5, 15, 13, v, "conv_depthwise") < 0) return NULL;
    dw_ctx c = {NULL, NULL, NULL, NULL, v[0], v[1], v[2],  v[3],  v[4],  v[5],
                v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14]};
    const Py_ssize_t x_size = c.n * c.c * c.h * c.w, y_size = c.n * c.c * c.m * c.ho * c.wo;
    const Py_ssize_t k_size = c.c * c.m * c.kh * c.kw;
    const Py_ssize_t want[3][3] = {{x_size, k_size, y_size},
                                   {y_size, k_size, x_size},
                                   {x_size, y_size, k_size}};
    char *a, *b, *out, *bias = NULL;
    int at, bt, ot, biast;
    Py_ssize_t na, nb, no, nbias = 0;
    if (wb_array(args[1], "conv_depthwise", &a, &at, &na, 0) < 0 ||
        wb_array(args[2], "conv_depthwise", &b, &bt, &nb, 0) < 0 ||
        wb_array(args[3], "conv_depthwise output", &out, &ot, &no, 1) < 0)
        return NULL;
    if (args[4] != Py_None &&
        wb_array(args[4], "conv_depthwise bias", &bias, &biast, &nbias, 0) < 0)
        return NULL;
    if ((at != WB_F32 && at != WB_F64) || bt != at || ot != at || (bias && biast != at)) {
        PyErr_SetString(PyExc_TypeError, "conv_depthwise: the arrays must share one dtype, f32 "
                                         "or f64");
        return NULL;
    }
    const Py_ssize_t *sizes_of = want[mode];
    if (na != sizes_of[0] || nb != sizes_of[1] || no != sizes_of[2] ||
        (bias && (mode != WB_DW_FORWARD || nbias != c.c * c.m))) {
        PyErr_Format(PyExc_ValueError,
                     "conv_depthwise: array sizes %zd, %zd, %zd (bias %zd) do not match the "
                     "geometry: expected %zd, %zd, %zd (bias C*M = %zd, forward only)",
                     na, nb, no, nbias, sizes_of[0], sizes_of[1], sizes_of[2], c.c * c.m);
        return NULL;
    }
    c.a = a, c.b = b, c.out = out, c.bias = bias;
    const int f64 = at == WB_F64;
    static const wb_range_fn fns[2][3] = {
        {forward_f32, input_grad_f32, weight_grad_f32},
        {forward_f64, input_grad_f64, weight_grad_f64},
    };
    const Py_ssize_t units[3] = {c.n * c.c * c.m, c.n * c.c, c.c * c.m};
    const Py_ssize_t work = y_size * c.kh * c.kw;
    wb_range_fn fn = fns[f64][mode];
    size_t buf = mode == WB_DW_WEIGHT_GRAD ? sizeof(double) * (size_t)(c.kh * c.kw) : 0;
#ifdef WB_LANES
    if (mode != WB_DW_WEIGHT_GRAD && !f64 && c.sh == 1 && c.sw == 1) { /* padded planes */
        const Py_ssize_t rows = mode == WB_DW_FORWARD ? c.ho : c.h;
        const Py_ssize_t cols = mode == WB_DW_FORWARD ? c.wo : c.w;
        fn = mode == WB_DW_FORWARD ? forward_padded_f32 : input_grad_padded_f32;
        buf = sizeof(float) * (size_t)((rows + (c.kh - 1) * c.dh) * (cols + (c.kw - 1) * c.dw) +
                                       c.kh * c.kw);
    }
#endif
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(fn, &c, units[mode], wb_threads_for(work, WB_DEPTHWISE_PAR), buf);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_depthwise_methods[] = {
    {"conv_depthwise", (PyCFunction)(void (*)(void))py_conv_depthwise, METH_FASTCALL,
     "conv_depthwise(mode, a, b, out, bias, N, C, M, H, W, Ho, Wo, kh, kw, sh, sw, dh, dw, top, "
     "left): a depthwise convolution (mode 0: x, k -> y with bias), its input gradient (1: g, "
     "k -> dx) or its weight gradient (2: x, g -> dk); contiguous f32 or f64 arrays."},
    {NULL, NULL, 0, NULL},
};
