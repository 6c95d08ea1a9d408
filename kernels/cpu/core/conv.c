/* The copies around a convolution's BLAS products (backends/cpu/conv.py), one threaded pass
 * each, written straight in the layout the product reads or the caller wants.
 *
 * im2col: for images n0..n0+m, output rows r0..r1 and k = (c·kh + i)·kw + j,
 *     cols[k, n, (r - r0)·Wo + q] = x[n0 + n, c, s_h·r + d_h·i - top, s_w·q + d_w·j - left]
 * (0 outside x: the padding is never materialised; a negative pad crops). One matmul per group,
 * (O/G, K) @ (K, m·L), then covers the whole block: the forward, W @ cols, and the weight
 * gradient, g @ colsᵀ, read the same columns. Halves are widened to f32 on the way.
 *
 * col2im, its adjoint, scatters the columns back (x += ...): the input gradient (and any
 * transposed convolution) is the product cols = Wᵀ @ g, (C·kh·kw, O) @ (O, m·L), then col2im;
 * that product has C·kh·kw rows where the forward-style one (a convolution of g with the
 * flipped kernel) has C, and ran 1.8x faster on the MNIST conv's gradient (0.92 vs 1.67 ms).
 *
 * swap01: dst[b, a, :] = act(src[a, b, :] + bias[a]) (bias and act optional), src (A, B, L)
 * contiguous, the rows of dst at any strides: the forward's (O, m·L) product lands in
 * (N, O, Ho·Wo) with the bias added and the activation applied in the same pass, and the weight
 * gradient's g (m, O, L) becomes (O, m·L).
 *
 * Measured (2-core Xeon, MNIST CNN's 32→64 3×3 conv at 14×14, batch 64): numpy's strided
 * copies cost about as much as the 5.7 ms sgemm; these passes take a few tenths of a ms. */
#include "activation.h"
#include "conv_geometry.h"
#include "lanes.h"
#include "nd.h"
#include "threads.h"

/* Elements written above which the copies run on several threads. */
#define WB_CONV_PAR (1 << 15)

typedef struct {
    char *x;    /* (N, C, H, W) contiguous: read by im2col, added to by col2im */
    char *cols; /* (C·kh·kw, m, Lb) contiguous, Lb = (r1 - r0)·Wo */
    Py_ssize_t n0, m, c, h, w, kh, kw, sh, sw, dh, dw, top, left, wo, r0, r1;
} im2col_ctx;

/* WB_ROW_FN(name, T, D, TO_D): one row of columns, dst[q] = TO_D(src[s·q + off]) for q in
 * [q0, q1) (the outputs whose input column lies inside x), 0 for the rest of [0, wo). */
#define WB_ROW_FN(name, T, D, TO_D)                                                           \
    static inline void name(D *restrict dst, const T *restrict src, Py_ssize_t off,           \
                            Py_ssize_t s, Py_ssize_t q0, Py_ssize_t q1, Py_ssize_t wo) {      \
        memset(dst, 0, sizeof(D) * (size_t)q0);                                               \
        for (Py_ssize_t q = q0; q < q1; q++) dst[q] = TO_D(src[q * s + off]);                 \
        memset(dst + q1, 0, sizeof(D) * (size_t)(wo - q1));                                   \
    }

#define WB_SAME(v) (v)
WB_ROW_FN(row_loop_f32, float, float, WB_SAME)
WB_ROW_FN(row_f64, double, double, WB_SAME)
WB_ROW_FN(row_f16, uint16_t, float, wb_f16_to_f32)
WB_ROW_FN(row_bf16, uint16_t, float, wb_bf16_to_f32)

/* f32 at stride 1 with AVX-512: 16 lanes a step, masked loads (masked-off lanes never fault)
 * and stores. The loop above costs ~12 ns a row of 14 (MNIST's 14×14 planes, where it was
 * half the im2col's time); this ~2 ns. */
static inline void row_f32(float *restrict dst, const float *restrict src, Py_ssize_t off,
                           Py_ssize_t s, Py_ssize_t q0, Py_ssize_t q1, Py_ssize_t wo) {
#if WB_HAS_AVX512
    if (s == 1) {
        for (Py_ssize_t q = 0; q < wo; q += 16) {
            const Py_ssize_t lo = q0 > q ? q0 - q : 0, hi = q1 > q ? q1 - q : 0;
            const Py_ssize_t left = wo - q;
            const unsigned below = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
            const unsigned in = lo >= 16 ? 0u : below & (0xFFFFu << lo);
            const unsigned out = left >= 16 ? 0xFFFFu : (1u << left) - 1u;
            const __m512 v = _mm512_maskz_loadu_ps((__mmask16)in, src + off + q);
            _mm512_mask_storeu_ps(dst + q, (__mmask16)out, v);
        }
        return;
    }
#endif
    row_loop_f32(dst, src, off, s, q0, q1, wo);
}

/* WB_IM2COL_FN(name, T, D, ROW): im2col from storage type T into columns of type D, a row of
 * outputs by ROW. A unit is one (k, n) row of the columns, contiguous at unit · Lb. */
#define WB_IM2COL_FN(name, T, D, ROW)                                                         \
    static void name(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {       \
        (void)t;                                                                              \
        (void)buf;                                                                            \
        const im2col_ctx *c = (const im2col_ctx *)ctx;                                        \
        const Py_ssize_t wo = c->wo, lb = (c->r1 - c->r0) * wo;                               \
        for (Py_ssize_t u = u0; u < u1; u++) {                                                \
            const Py_ssize_t k = u / c->m, n = u % c->m;                                      \
            const Py_ssize_t ch = k / (c->kh * c->kw), i = k / c->kw % c->kh, j = k % c->kw;  \
            const T *plane = (const T *)c->x + ((c->n0 + n) * c->c + ch) * c->h * c->w;       \
            D *dst = (D *)c->cols + u * lb;                                                   \
            const Py_ssize_t off = j * c->dw - c->left;                                       \
            Py_ssize_t q0, q1;                                                                \
            valid_range(off, c->sw, c->w, wo, &q0, &q1);                                      \
            for (Py_ssize_t r = c->r0; r < c->r1; r++, dst += wo) {                           \
                const Py_ssize_t row = r * c->sh + i * c->dh - c->top;                        \
                if (row < 0 || row >= c->h || q0 == q1)                                       \
                    memset(dst, 0, sizeof(D) * (size_t)wo);                                   \
                else                                                                          \
                    ROW(dst, plane + row * c->w, off, c->sw, q0, q1, wo);                     \
            }                                                                                 \
        }                                                                                     \
    }

WB_IM2COL_FN(im2col_f32, float, float, row_f32)
WB_IM2COL_FN(im2col_f64, double, double, row_f64)
WB_IM2COL_FN(im2col_f16, uint16_t, float, row_f16)
WB_IM2COL_FN(im2col_bf16, uint16_t, float, row_bf16)

#ifdef WB_LANES
/* The widest rows of outputs the next form takes (its masks are kept on the stack). */
#define WB_IM2COL_MAX_VECS 4

/* im2col of f32 at stride 1 along W with rows of up to 4 vectors: the lane masks of a tap's
 * rows (which columns come from x, which are padding) are computed once per tap, and a unit's
 * indices are stepped, not divided, so a row costs one masked load and store per vector. On
 * small images that per-row and per-unit work was the whole cost (64×16×4×4 into 3×3 columns:
 * 152 us a thread, 4 GB/s). */
static void im2col_s1_f32(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {
    (void)t;
    (void)buf;
    const im2col_ctx *c = (const im2col_ctx *)ctx;
    const Py_ssize_t wo = c->wo, lb = (c->r1 - c->r0) * wo, kk = c->kh * c->kw;
    const Py_ssize_t vecs = (wo + WB_LANES - 1) / WB_LANES;
    lane_mask in[WB_IM2COL_MAX_VECS], out[WB_IM2COL_MAX_VECS];
    for (Py_ssize_t v = 0; v < vecs; v++) out[v] = lanes_between(0, wo - v * WB_LANES);
    for (Py_ssize_t u = u0; u < u1;) {
        const Py_ssize_t k = u / c->m, n_first = u % c->m;
        const Py_ssize_t n_end = n_first + (u1 - u) < c->m ? n_first + (u1 - u) : c->m;
        const Py_ssize_t ch = k / kk, i = k / c->kw % c->kh, j = k % c->kw;
        const Py_ssize_t off = j * c->dw - c->left;
        Py_ssize_t q0, q1;
        valid_range(off, 1, c->w, wo, &q0, &q1);
        for (Py_ssize_t v = 0; v < vecs; v++)
            in[v] = lanes_between(q0 - v * WB_LANES, q1 - v * WB_LANES);
        for (Py_ssize_t n = n_first; n < n_end; n++) {
            const float *plane = (const float *)c->x + ((c->n0 + n) * c->c + ch) * c->h * c->w;
            float *dst = (float *)c->cols + (k * c->m + n) * lb;
            for (Py_ssize_t r = c->r0; r < c->r1; r++, dst += wo) {
                const Py_ssize_t row = r * c->sh + i * c->dh - c->top;
                if (row < 0 || row >= c->h || q0 == q1) {
                    for (Py_ssize_t v = 0; v < vecs; v++)
                        masked_store(dst + v * WB_LANES, out[v], lane_zero());
                    continue;
                }
                const float *src = plane + row * c->w + off;
                for (Py_ssize_t v = 0; v < vecs; v++)
                    masked_store(dst + v * WB_LANES, out[v],
                                 masked_load(src + v * WB_LANES, in[v]));
            }
        }
        u += n_end - n_first;
    }
}
#endif

static wb_range_fn im2col_fn(int xt, int ct) {
    switch (xt) {
    case WB_F32: return ct == WB_F32 ? im2col_f32 : NULL;
    case WB_F64: return ct == WB_F64 ? im2col_f64 : NULL;
    case WB_F16: return ct == WB_F32 ? im2col_f16 : NULL;
    case WB_BF16: return ct == WB_F32 ? im2col_bf16 : NULL;
    default: return NULL;
    }
}

/* col2im, the adjoint of im2col: x[n0 + n, c, s_h·r + d_h·i - top, s_w·q + d_w·j - left] +=
 * cols[k, n, (r - r0)·Wo + q] (taps outside x dropped), into x of the compute dtype. A unit
 * is one (n, c) plane of x, so the kh·kw taps that land on it are summed by one thread. */
/* One row of col2im: dst[s·q + off] += src[q] for q in [q0, q1). */
#define WB_ROW_ADD_FN(name, T)                                                                \
    static inline void name(T *restrict dst, const T *restrict src, Py_ssize_t off,           \
                            Py_ssize_t s, Py_ssize_t q0, Py_ssize_t q1) {                     \
        for (Py_ssize_t q = q0; q < q1; q++) dst[q * s + off] += src[q];                      \
    }

WB_ROW_ADD_FN(row_add_loop_f32, float)
WB_ROW_ADD_FN(row_add_f64, double)

/* f32 at stride 1 with AVX-512, masked as row_f32 (the loop: ~16 ns a row of 14). */
static inline void row_add_f32(float *restrict dst, const float *restrict src, Py_ssize_t off,
                               Py_ssize_t s, Py_ssize_t q0, Py_ssize_t q1) {
#if WB_HAS_AVX512
    if (s == 1) {
        for (Py_ssize_t q = q0; q < q1; q += 16) {
            const Py_ssize_t left = q1 - q;
            const __mmask16 in = (__mmask16)(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
            const __m512 sum = _mm512_add_ps(_mm512_maskz_loadu_ps(in, dst + off + q),
                                             _mm512_maskz_loadu_ps(in, src + q));
            _mm512_mask_storeu_ps(dst + off + q, in, sum);
        }
        return;
    }
#endif
    row_add_loop_f32(dst, src, off, s, q0, q1);
}

#define WB_COL2IM_FN(name, T, ROW_ADD)                                                        \
    static void name(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {       \
        (void)t;                                                                              \
        (void)buf;                                                                            \
        const im2col_ctx *c = (const im2col_ctx *)ctx;                                        \
        const Py_ssize_t wo = c->wo, lb = (c->r1 - c->r0) * wo, kk = c->kh * c->kw;           \
        for (Py_ssize_t u = u0; u < u1; u++) {                                                \
            const Py_ssize_t n = u / c->c, ch = u % c->c;                                     \
            T *plane = (T *)c->x + ((c->n0 + n) * c->c + ch) * c->h * c->w;                   \
            for (Py_ssize_t k = ch * kk; k < (ch + 1) * kk; k++) {                            \
                const Py_ssize_t i = k / c->kw % c->kh, j = k % c->kw;                        \
                const T *src = (const T *)c->cols + (k * c->m + n) * lb;                      \
                const Py_ssize_t off = j * c->dw - c->left;                                   \
                Py_ssize_t q0, q1;                                                            \
                valid_range(off, c->sw, c->w, wo, &q0, &q1);                                  \
                for (Py_ssize_t r = c->r0; r < c->r1; r++, src += wo) {                       \
                    const Py_ssize_t row = r * c->sh + i * c->dh - c->top;                    \
                    if (row < 0 || row >= c->h) continue;                                     \
                    T *dst = plane + row * c->w;                                              \
                    ROW_ADD(dst, src, off, c->sw, q0, q1);                                    \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }

WB_COL2IM_FN(col2im_f32, float, row_add_f32)
WB_COL2IM_FN(col2im_f64, double, row_add_f64)

/* col2im of f32 at stride 1 by gathering: each vector of a plane's row is the sum of its
 * kh·kw shifted taps, read with masked loads (masked-off lanes never fault), and added to x
 * with one store. The scatter above stores each tap's row (2 loads and a store per tap, the
 * next tap's row overlapping it one element over); on the MNIST conv's 14×14 gradient this
 * form took 0.41 ms where the scatter took 0.70 (2-core EPYC, 2 threads). */
#ifdef WB_LANES
/* The widest kernel this form takes (its taps' valid ranges are kept on the stack). */
#define WB_GATHER_MAX_KW 32

/* x[y, v] += Σ_{i, j} cols[tap (i, j)][row y + top - d_h·i, column v - (d_w·j - left)] over a
 * unit's (n, c) plane, lanes v of a vector at a time; a tap's lane is loaded only where its
 * column lies in [q0_j, q1_j) (valid_range) and its row in [r0, r1). */
static void col2im_gather_f32(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1,
                              void *buf) {
    (void)t;
    (void)buf;
    const im2col_ctx *c = (const im2col_ctx *)ctx;
    const Py_ssize_t wo = c->wo, lb = (c->r1 - c->r0) * wo, kk = c->kh * c->kw;
    Py_ssize_t off[WB_GATHER_MAX_KW], q0[WB_GATHER_MAX_KW], q1[WB_GATHER_MAX_KW];
    for (Py_ssize_t j = 0; j < c->kw; j++) {
        off[j] = j * c->dw - c->left;
        valid_range(off[j], 1, c->w, wo, &q0[j], &q1[j]);
    }
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t n = u / c->c, ch = u % c->c;
        float *plane = (float *)c->x + ((c->n0 + n) * c->c + ch) * c->h * c->w;
        const float *taps = (const float *)c->cols + (ch * kk * c->m + n) * lb;
        for (Py_ssize_t y = 0; y < c->h; y++) {
            for (Py_ssize_t v0 = 0; v0 < c->w; v0 += WB_LANES) {
                lane_vec acc = lane_zero();
                int any = 0;
                for (Py_ssize_t i = 0; i < c->kh; i++) {
                    const Py_ssize_t r = y + c->top - i * c->dh;
                    if (r < c->r0 || r >= c->r1) continue;
                    for (Py_ssize_t j = 0; j < c->kw; j++) {
                        const Py_ssize_t base = v0 - off[j]; /* the column of lane 0 */
                        if (q0[j] - base >= WB_LANES || q1[j] <= base || q0[j] >= q1[j]) continue;
                        const float *row = taps + (i * c->kw + j) * c->m * lb + (r - c->r0) * wo;
                        const lane_mask in = lanes_between(q0[j] - base, q1[j] - base);
                        acc = lane_add(acc, masked_load(row + base, in));
                        any = 1;
                    }
                }
                if (any) {
                    float *dst = plane + y * c->w + v0;
                    const lane_mask m = lanes_between(0, c->w - v0);
                    masked_store(dst, m, lane_add(masked_load(dst, m), acc));
                }
            }
        }
    }
}
#endif

/* The geometry of conv_im2col / conv_col2im (x, cols, N, C, H, W, kh, kw, sh, sw, dh, dw, Wo,
 * top, left, n0, m, r0, r1) into ``c``, checked against the arrays; x's and cols' dtypes out. */
static int columns_args(PyObject *const *args, Py_ssize_t nargs, const char *what,
                        int x_writable, im2col_ctx *c, int *xt, int *ct) {
    if (nargs != 19) {
        PyErr_Format(PyExc_TypeError, "%s: expected 19 arguments, found %zd", what, nargs);
        return -1;
    }
    Py_ssize_t v[17]; /* N, C, H, W, kh, kw, sh, sw, dh, dw, Wo | top, left, n0, m, r0, r1 */
    if (sizes(args + 2, 17, 11, v, what) < 0) return -1;
    char *x, *cols;
    Py_ssize_t nx, nc;
    if (wb_array(args[0], what, &x, xt, &nx, x_writable) < 0 ||
        wb_array(args[1], what, &cols, ct, &nc, !x_writable) < 0)
        return -1;
    *c = (im2col_ctx){x,     cols,  v[13], v[14], v[1],  v[2],  v[3],  v[4],  v[5],
                      v[6],  v[7],  v[8],  v[9],  v[11], v[12], v[10], v[15], v[16]};
    const Py_ssize_t lb = (c->r1 - c->r0) * c->wo;
    if (nx != v[0] * c->c * c->h * c->w || c->n0 < 0 || c->m < 0 || c->n0 + c->m > v[0] ||
        c->r0 < 0 || c->r1 < c->r0 || nc != c->c * c->kh * c->kw * c->m * lb) {
        PyErr_Format(PyExc_ValueError, "%s: array sizes do not match (N, C, H, W) and "
                     "(C*kh*kw, m, (r1 - r0)*Wo)", what);
        return -1;
    }
    return 0;
}

/* fn over ``units`` on the kernels' threads, the GIL released. */
static PyObject *run_columns(wb_range_fn fn, const im2col_ctx *c, Py_ssize_t units) {
    const Py_ssize_t work = c->c * c->kh * c->kw * c->m * (c->r1 - c->r0) * c->wo;
    const int threads = wb_threads_for(work, WB_CONV_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(fn, c, units, threads, 0);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *py_conv_im2col(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    im2col_ctx c;
    int xt, ct;
    if (columns_args(args, nargs, "conv_im2col", 0, &c, &xt, &ct) < 0) return NULL;
    const wb_range_fn fn = im2col_fn(xt, ct);
    if (!fn) {
        PyErr_SetString(PyExc_TypeError, "conv_im2col: x must be f32, f64, f16 or bf16 and "
                                         "cols f64 for f64 x, else f32");
        return NULL;
    }
#ifdef WB_LANES
    if (fn == im2col_f32 && c.sw == 1 && c.wo <= WB_IM2COL_MAX_VECS * WB_LANES)
        return run_columns(im2col_s1_f32, &c, c.c * c.kh * c.kw * c.m);
#endif
    return run_columns(fn, &c, c.c * c.kh * c.kw * c.m);
}

static PyObject *py_conv_col2im(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    im2col_ctx c;
    int xt, ct;
    if (columns_args(args, nargs, "conv_col2im", 1, &c, &xt, &ct) < 0) return NULL;
    if ((xt != WB_F32 && xt != WB_F64) || ct != xt) {
        PyErr_SetString(PyExc_TypeError, "conv_col2im: x and cols must share one dtype, f32 "
                                         "or f64");
        return NULL;
    }
#ifdef WB_LANES
    if (xt == WB_F32 && c.sh == 1 && c.sw == 1 && c.kw <= WB_GATHER_MAX_KW)
        return run_columns(col2im_gather_f32, &c, c.m * c.c);
#endif
    return run_columns(xt == WB_F32 ? col2im_f32 : col2im_f64, &c, c.m * c.c);
}

typedef struct {
    const char *src, *bias; /* src (A, B, L) contiguous; bias (A,) or NULL */
    char *dst;              /* row (b, a) at offset + b·stride_b + a·stride_a */
    Py_ssize_t a, b, l, offset, stride_b, stride_a;
    int act; /* activation.h's code */
} swap_ctx;

/* A unit is one destination row (b, a), taken in the destination's order. */
#define WB_SWAP_FN(name, T, ACTIVATE)                                                         \
    static void name(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {       \
        (void)t;                                                                              \
        (void)buf;                                                                            \
        const swap_ctx *c = (const swap_ctx *)ctx;                                            \
        const T *bias = (const T *)c->bias;                                                   \
        for (Py_ssize_t u = u0; u < u1; u++) {                                                \
            const Py_ssize_t b = u / c->a, a = u % c->a;                                      \
            const T *restrict src = (const T *)c->src + (a * c->b + b) * c->l;                \
            T *restrict dst = (T *)c->dst + c->offset + b * c->stride_b + a * c->stride_a;    \
            if (bias) {                                                                       \
                const T add = bias[a];                                                        \
                for (Py_ssize_t l = 0; l < c->l; l++) dst[l] = src[l] + add;                  \
            } else {                                                                          \
                memcpy(dst, src, sizeof(T) * (size_t)c->l);                                   \
            }                                                                                 \
            ACTIVATE(dst, c->l, c->act); /* (the row just written: from L1) */               \
        }                                                                                     \
    }

WB_SWAP_FN(swap_f32, float, wb_activate_f32)
WB_SWAP_FN(swap_f64, double, wb_activate_f64)

/* conv_swap01(src, dst, bias, A, B, L, offset, stride_b, stride_a, act) */
static PyObject *py_conv_swap01(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "conv_swap01: expected 10 arguments, found %zd", nargs);
        return NULL;
    }
    Py_ssize_t v[7]; /* A, B, L, offset, stride_b, stride_a, act */
    if (sizes(args + 3, 7, 0, v, "conv_swap01") < 0) return NULL;
    if (v[6] < 0 || v[6] >= WB_ACT_COUNT) {
        PyErr_Format(PyExc_ValueError, "conv_swap01: act must be in [0, %d), found %zd",
                     WB_ACT_COUNT, v[6]);
        return NULL;
    }
    char *src, *dst, *bias = NULL;
    int st, dt, bt;
    Py_ssize_t ns, nd, nb;
    if (wb_array(args[0], "conv_swap01 src", &src, &st, &ns, 0) < 0 ||
        wb_array(args[1], "conv_swap01 dst", &dst, &dt, &nd, 1) < 0)
        return NULL;
    if (args[2] != Py_None && wb_array(args[2], "conv_swap01 bias", &bias, &bt, &nb, 0) < 0)
        return NULL;
    if ((st != WB_F32 && st != WB_F64) || dt != st || (bias && bt != st)) {
        PyErr_SetString(PyExc_TypeError, "conv_swap01: src, dst and bias must share one dtype, "
                                         "f32 or f64");
        return NULL;
    }
    const Py_ssize_t a = v[0], b = v[1], l = v[2];
    int fits = a >= 0 && b >= 0 && l >= 0 && ns == a * b * l && (!bias || nb == a);
    if (fits && a && b && l) {
        const Py_ssize_t last = v[3] + (b - 1) * v[4] + (a - 1) * v[5] + l;
        fits = v[3] >= 0 && v[4] >= 0 && v[5] >= 0 && last <= nd;
    }
    if (!fits) {
        PyErr_SetString(PyExc_ValueError, "conv_swap01: array sizes do not match (A, B, L), "
                                          "(A,) and the destination rows");
        return NULL;
    }
    swap_ctx c = {src, bias, dst, a, b, l, v[3], v[4], v[5], (int)v[6]};
    const int threads = wb_threads_for(ns, WB_CONV_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(st == WB_F32 ? swap_f32 : swap_f64, &c, a * b, threads, 0);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_conv_methods[] = {
    {"conv_im2col", (PyCFunction)(void (*)(void))py_conv_im2col, METH_FASTCALL,
     "conv_im2col(x, cols, N, C, H, W, kh, kw, sh, sw, dh, dw, Wo, top, left, n0, m, r0, r1): "
     "cols[(c*kh + i)*kw + j, n, (r - r0)*Wo + q] = x[n0 + n, c, sh*r + dh*i - top, "
     "sw*q + dw*j - left] (0 outside x), for r in [r0, r1); halves widen to f32 cols."},
    {"conv_col2im", (PyCFunction)(void (*)(void))py_conv_col2im, METH_FASTCALL,
     "conv_col2im(x, cols, <as conv_im2col>): the adjoint, x[n0 + n, c, sh*r + dh*i - top, "
     "sw*q + dw*j - left] += cols[(c*kh + i)*kw + j, n, (r - r0)*Wo + q] (f32 or f64)."},
    {"conv_swap01", (PyCFunction)(void (*)(void))py_conv_swap01, METH_FASTCALL,
     "conv_swap01(src, dst, bias, A, B, L, offset, stride_b, stride_a, act): dst[offset + "
     "b*stride_b + a*stride_a + l] = act(src[a, b, l] + bias[a]) (bias None: no add; act 0: "
     "none); f32 or f64."},
    {NULL, NULL, 0, NULL},
};
