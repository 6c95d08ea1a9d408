/* f32 convolutions as an implicit matrix product (backends/cpu/conv.py), without im2col:
 *
 *     y[n, o, h, w] = b[o] + Σ_{c, i, j} k[o, c, i, j] · x[n, c, s_h·h + d_h·i - top,
 *                                                            s_w·w + d_w·j - left]
 *
 * Each image is copied once into s_h·s_w phase planes per channel, zero-padded:
 * plane[c, a, e][r, q] = x[n, c, s_h·r + a - top, s_w·q + e - left], Hq × Wq each. Tap t =
 * (c, i, j) then reads the plane of phase (d_h·i mod s_h, d_w·j mod s_w) shifted by
 * (⌊d_h·i / s_h⌋, ⌊d_w·j / s_w⌋), so on the pixel index p = h·Wq + w of a grid Wq wide
 *
 *     y[o, p] = b[o] + Σ_t k[o, t] · prep[off[t] + p]
 *
 * a product with a B matrix whose rows are contiguous runs of the planes: the micro-kernel
 * keeps an MR × (NV·lanes) tile of outputs in registers and, per tap, loads NV input vectors
 * and broadcasts MR packed weights (k[o·MR.., t] side by side). Columns w >= Wo of the grid
 * are computed and dropped on store (Wq - Wo of them, kw - 1 at stride 1). Units of work are
 * runs of UNIT pixels of one image and MR output channels, so threads write disjoint outputs.
 * The baseline variant (no lane vectors) has no such kernel: conv.py keeps im2col there. */
#include "conv_geometry.h"
#include "lanes.h"
#include "nd.h"
#include "threads.h"

#include <stdlib.h>
#include <string.h>

#ifdef WB_LANES

#if WB_HAS_AVX512
#define WB_CD_MR 8 /* 8 × 3 accumulators + 3 inputs + 1 weight of 32 registers */
#else
#define WB_CD_MR 4 /* 4 × 3 + 3 + 1 of 16 */
#endif
#define WB_CD_NV 3
#define WB_CD_NB (WB_CD_NV * WB_LANES) /* pixels of a micro-tile */
#define WB_CD_UNIT (4 * WB_CD_NB)      /* pixels of a unit: each packed weight block serves 4 */
/* Multiply-adds above which a call runs on several threads. */
#define WB_CD_PAR (1 << 18)

typedef struct {
    const float *x, *bias; /* bias: oblocks·MR floats, zero-padded */
    float *y, *prep;
    const float *packed;    /* [oblock][tap][MR] */
    const Py_ssize_t *off;  /* per tap, into one prepared image */
    Py_ssize_t n, c, h, w, o, sh, sw, top, left, ho, wo, hq, wq;
    Py_ssize_t plane, image, taps, pixels, units_per_image, oblocks;
} cd_ctx;

/* Units (n, c): the s_h·s_w zero-padded phase planes of channel c of image n. */
static void prepare(const void *vctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {
    (void)t, (void)buf;
    const cd_ctx *cx = vctx;
    const Py_ssize_t C = cx->c, H = cx->h, W = cx->w, SH = cx->sh, SW = cx->sw;
    const Py_ssize_t HQ = cx->hq, WQ = cx->wq, PLANE = cx->plane, IMAGE = cx->image;
    const Py_ssize_t TOP = cx->top, LEFT = cx->left;
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t n = u / C, ch = u % C;
        const float *src = cx->x + u * H * W;
        float *dst = cx->prep + n * IMAGE + ch * SH * SW * PLANE;
        for (Py_ssize_t a = 0; a < SH; a++)
            for (Py_ssize_t e = 0; e < SW; e++, dst += PLANE) {
                Py_ssize_t lo, hi;
                valid_range(e - LEFT, SW, W, WQ, &lo, &hi);
                for (Py_ssize_t r = 0; r < HQ; r++) {
                    float *row = dst + r * WQ;
                    const Py_ssize_t iy = SH * r + a - TOP;
                    if (iy < 0 || iy >= H || lo == hi) {
                        memset(row, 0, sizeof(float) * (size_t)WQ);
                        continue;
                    }
                    const float *in = src + iy * W + e - LEFT;
                    memset(row, 0, sizeof(float) * (size_t)lo);
                    if (SW == 1)
                        memcpy(row + lo, in + lo, sizeof(float) * (size_t)(hi - lo));
                    else
                        for (Py_ssize_t q = lo; q < hi; q++) row[q] = in[q * SW];
                    memset(row + hi, 0, sizeof(float) * (size_t)(WQ - hi));
                }
            }
    }
}

/* tile[r][v·lanes + l] = bias[r] + Σ_t w[t][r] · src[off[t] + v·lanes + l]. */
static inline void micro_tile(const float *src, const Py_ssize_t *off, Py_ssize_t taps,
                              const float *w, const float *bias, float *tile) {
    lane_vec acc[WB_CD_MR][WB_CD_NV];
#pragma GCC unroll 8
    for (int r = 0; r < WB_CD_MR; r++) {
        const lane_vec b = lane_set1(bias[r]);
#pragma GCC unroll 3
        for (int v = 0; v < WB_CD_NV; v++) acc[r][v] = b;
    }
    for (Py_ssize_t t = 0; t < taps; t++, w += WB_CD_MR) {
        const float *s = src + off[t];
        lane_vec in[WB_CD_NV];
#pragma GCC unroll 3
        for (int v = 0; v < WB_CD_NV; v++) in[v] = lane_load(s + v * WB_LANES);
#pragma GCC unroll 8
        for (int r = 0; r < WB_CD_MR; r++) {
            const lane_vec k = lane_set1(w[r]);
#pragma GCC unroll 3
            for (int v = 0; v < WB_CD_NV; v++) acc[r][v] = lane_fma(in[v], k, acc[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < WB_CD_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < WB_CD_NV; v++)
            lane_store(tile + r * WB_CD_NB + v * WB_LANES, acc[r][v]);
}

/* A tile's pixels [p0, p1) of the Wq-wide grid as runs of real outputs: the run's first
 * output (h·Wo + w), its first pixel in the tile, its length. Returns the number of runs. */
static int tile_runs(Py_ssize_t p0, Py_ssize_t p1, Py_ssize_t wq, Py_ssize_t wo,
                     Py_ssize_t runs[][3]) {
    int count = 0;
    for (Py_ssize_t p = p0; p < p1;) {
        const Py_ssize_t row = p / wq, col = p % wq;
        const Py_ssize_t end = p1 - p < wq - col ? p1 - p + col : wq;
        if (col < wo) {
            runs[count][0] = row * wo + col;
            runs[count][1] = p - p0;
            runs[count][2] = (end < wo ? end : wo) - col;
            count++;
        }
        p += end - col;
    }
    return count;
}

/* Units (n, run of UNIT pixels, block of MR output channels), the channel blocks innermost
 * so that a thread's consecutive units read the same input pixels. */
static void compute(const void *vctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {
    (void)t;
    const cd_ctx *cx = vctx;
    const Py_ssize_t O = cx->o, WQ = cx->wq, WO = cx->wo, TAPS = cx->taps, OB = cx->oblocks;
    const Py_ssize_t PIXELS = cx->pixels, UPI = cx->units_per_image, OUT = cx->ho * cx->wo;
    float *tile = buf;
    Py_ssize_t runs[WB_CD_NB + 1][3];
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t ob = u % OB, n = u / OB / UPI, p_begin = (u / OB % UPI) * WB_CD_UNIT;
        const Py_ssize_t p_end = p_begin + WB_CD_UNIT < PIXELS ? p_begin + WB_CD_UNIT : PIXELS;
        const float *src = cx->prep + n * cx->image;
        const float *w = cx->packed + ob * TAPS * WB_CD_MR;
        const Py_ssize_t rows = O - ob * WB_CD_MR < WB_CD_MR ? O - ob * WB_CD_MR : WB_CD_MR;
        float *y = cx->y + (n * O + ob * WB_CD_MR) * OUT;
        for (Py_ssize_t p0 = p_begin; p0 < p_end; p0 += WB_CD_NB) {
            micro_tile(src + p0, cx->off, TAPS, w, cx->bias + ob * WB_CD_MR, tile);
            const Py_ssize_t p1 = p0 + WB_CD_NB < p_end ? p0 + WB_CD_NB : p_end;
            const int count = tile_runs(p0, p1, WQ, WO, runs);
            for (Py_ssize_t r = 0; r < rows; r++)
                for (int k = 0; k < count; k++)
                    memcpy(y + r * OUT + runs[k][0], tile + r * WB_CD_NB + runs[k][1],
                           sizeof(float) * (size_t)runs[k][2]);
        }
    }
}

/* The weights as [oblock][tap][MR] (rows past O zero), the bias padded to oblocks·MR, the
 * taps' offsets; NULL when out of memory (free(result) releases all three). */
static float *pack(const float *k, const float *bias, const cd_ctx *cx, Py_ssize_t kh,
                   Py_ssize_t kw, Py_ssize_t dh, Py_ssize_t dw, float **packed_bias,
                   Py_ssize_t **offsets) {
    const Py_ssize_t taps = cx->taps, rows = cx->oblocks * WB_CD_MR;
    const size_t floats = (size_t)(rows * taps + rows);
    char *mem = malloc(sizeof(float) * floats + sizeof(Py_ssize_t) * (size_t)taps);
    if (!mem) return NULL;
    float *packed = (float *)mem, *b = packed + rows * taps;
    Py_ssize_t *off = (Py_ssize_t *)(b + rows);
    for (Py_ssize_t o = 0; o < rows; o++) {
        b[o] = bias && o < cx->o ? bias[o] : 0.0f;
        float *dst = packed + (o / WB_CD_MR) * taps * WB_CD_MR + o % WB_CD_MR;
        for (Py_ssize_t t = 0; t < taps; t++)
            dst[t * WB_CD_MR] = o < cx->o ? k[o * taps + t] : 0.0f;
    }
    const Py_ssize_t SH = cx->sh, SW = cx->sw;
    for (Py_ssize_t t = 0; t < taps; t++) {
        const Py_ssize_t ch = t / (kh * kw), i = t / kw % kh, j = t % kw;
        const Py_ssize_t phase = (ch * SH + i * dh % SH) * SW + j * dw % SW;
        off[t] = phase * cx->plane + (i * dh / SH) * cx->wq + j * dw / SW;
    }
    *packed_bias = b;
    *offsets = off;
    return packed;
}

/* conv_direct(x, k, bias or None, y, N, C, H, W, O, kh, kw, sh, sw, dh, dw, Ho, Wo, top, left):
 * y (N, O, Ho, Wo) = the convolution of x (N, C, H, W) with k (O, C, kh, kw); f32, contiguous;
 * top and left are the padding before the first row and column (negative: a crop). */
static PyObject *py_conv_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 19) {
        PyErr_Format(PyExc_TypeError, "conv_direct: expected 19 arguments, found %zd", nargs);
        return NULL;
    }
    Py_ssize_t v[15]; /* N, C, H, W, O, kh, kw, sh, sw, dh, dw, Ho, Wo | top, left */
    if (sizes(args + 4, 15, 13, v, "conv_direct") < 0) return NULL;
    const Py_ssize_t N = v[0], C = v[1], H = v[2], W = v[3], O = v[4], KH = v[5], KW = v[6];
    const Py_ssize_t SH = v[7], SW = v[8], DH = v[9], DW = v[10], HO = v[11], WO = v[12];
    char *x, *k, *y, *bias = NULL;
    int xt, kt, yt, bt = WB_F32;
    Py_ssize_t nx, nk, ny, nb = O;
    if (wb_array(args[0], "conv_direct", &x, &xt, &nx, 0) < 0 ||
        wb_array(args[1], "conv_direct", &k, &kt, &nk, 0) < 0 ||
        wb_array(args[3], "conv_direct output", &y, &yt, &ny, 1) < 0)
        return NULL;
    if (args[2] != Py_None && wb_array(args[2], "conv_direct bias", &bias, &bt, &nb, 0) < 0)
        return NULL;
    if (xt != WB_F32 || kt != WB_F32 || yt != WB_F32 || bt != WB_F32) {
        PyErr_SetString(PyExc_TypeError, "conv_direct: expected f32 arrays");
        return NULL;
    }
    if (nx != N * C * H * W || nk != O * C * KH * KW || ny != N * O * HO * WO || nb != O) {
        PyErr_Format(PyExc_ValueError,
                     "conv_direct: array sizes %zd, %zd, %zd (bias %zd) do not match the "
                     "geometry: expected %zd, %zd, %zd (bias %zd)",
                     nx, nk, ny, nb, N * C * H * W, O * C * KH * KW, N * O * HO * WO, O);
        return NULL;
    }
    cd_ctx c = {.x = (const float *)x, .y = (float *)y, .n = N, .c = C, .h = H, .w = W,
                .o = O, .sh = SH, .sw = SW, .top = v[13], .left = v[14], .ho = HO, .wo = WO};
    /* the grid covers every tap of every output: (Ho - 1)·s + (k - 1)·d + 1 rows / columns */
    c.hq = ((HO - 1) * SH + (KH - 1) * DH + SH) / SH;
    c.wq = ((WO - 1) * SW + (KW - 1) * DW + SW) / SW;
    c.plane = c.hq * c.wq;
    c.image = C * SH * SW * c.plane;
    c.taps = C * KH * KW;
    c.pixels = HO * c.wq;
    c.units_per_image = (c.pixels + WB_CD_UNIT - 1) / WB_CD_UNIT;
    c.oblocks = (O + WB_CD_MR - 1) / WB_CD_MR;
    float *packed_bias;
    Py_ssize_t *off;
    float *packed = pack((const float *)k, (const float *)bias, &c, KH, KW, DH, DW,
                         &packed_bias, &off);
    /* a tile past the last pixel reads up to a tile and a row's taps beyond the last image */
    const size_t slack = (size_t)(WB_CD_NB + (KW - 1) * DW + WB_LANES);
    float *prep = malloc(sizeof(float) * ((size_t)(N * c.image) + slack));
    if (!packed || !prep) {
        free(packed);
        free(prep);
        return PyErr_NoMemory();
    }
    memset(prep + N * c.image, 0, sizeof(float) * slack);
    c.packed = packed, c.bias = packed_bias, c.off = off, c.prep = prep;
    const int threads = wb_threads_for(N * O * HO * WO * c.taps, WB_CD_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(prepare, &c, N * C, threads, 0);
    if (rc == 0)
        rc = wb_parallel_ranges(compute, &c, N * c.units_per_image * c.oblocks, threads,
                                sizeof(float) * WB_CD_MR * WB_CD_NB);
    Py_END_ALLOW_THREADS
    free(packed);
    free(prep);
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_conv_direct_methods[] = {
    {"conv_direct", (PyCFunction)(void (*)(void))py_conv_direct, METH_FASTCALL,
     "conv_direct(x, k, bias, y, N, C, H, W, O, kh, kw, sh, sw, dh, dw, Ho, Wo, top, left): "
     "y = conv2d(x, k) + bias by an implicit-GEMM micro-kernel; contiguous f32 arrays."},
    {NULL, NULL, 0, NULL},
};

#else /* the baseline variant: no lane vectors, no direct kernel */

PyMethodDef wb_conv_direct_methods[] = {{NULL, NULL, 0, NULL}};

#endif
