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
 * with one row: here a plane is accumulated in L1, tap by tap over its rows. Units are whole
 * planes (output planes, input planes, output channels), so no two threads write the same
 * element. f32 accumulates in f32 (the weight gradient's per-plane dot products summed in
 * f64), f64 in f64; halves are widened by the caller.
 *
 * Measured (one thread, 8×64×56×56, 3×3): forward, input and weight gradient 1.9, 1.7 and
 * 1.7 ms, where numpy's path took 3.6, 4.8 and 2.1 (torch 1.6, 1.3 and 1.8, in the same
 * loaded window); at 112² 5.8, 5.9 and 7.5 ms against numpy's 23, 22 and 15. */
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
    (void)N, (void)C, (void)M, (void)H, (void)HO, (void)TAPS

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
    const size_t buf = mode == WB_DW_WEIGHT_GRAD ? sizeof(double) * (size_t)(c.kh * c.kw) : 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(fns[f64][mode], &c, units[mode],
                            wb_threads_for(work, WB_DEPTHWISE_PAR), buf);
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
