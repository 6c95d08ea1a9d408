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
 * and broadcasts MR weights k[o·MR + r, t], read in place from MR rows of k (the weights are
 * not repacked). Columns w >= Wo of the grid are computed and dropped on store (Wq - Wo of
 * them, kw - 1 at stride 1). Units of work are runs of at most UNIT pixels of one image, of
 * about equal length, and MR output channels, so threads write disjoint outputs.
 *
 * Narrow images would waste much of that (2 of 10 columns at 8², 2 of 18 at 16²). The
 * forward then copies them into column-shifted planes instead, kw per row phase and channel,
 * exactly Wo wide: plane[c, a, j][r, w] = x[n, c, s_h·r + a - top, s_w·w + d_w·j - left].
 * Tap (c, i, j) reads plane (c, d_h·i mod s_h, j) shifted by ⌊d_h·i / s_h⌋ rows, the grid is
 * the output itself (Wq = Wo), and nothing is computed twice, for kw/s_w times the copies.
 * The baseline variant (no lane vectors) has no such kernel: conv.py keeps im2col there. */
#include "activation.h"
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
#define WB_CD_UNIT (4 * WB_CD_NB) /* most pixels of a unit: MR weight rows serve 4 tiles */
/* Column-shifted planes where O · (wasted columns / Wq) reaches this: the multiply-adds they
 * save per input value grow with O, the copies they add do not. */
#define WB_CD_SHIFT_GAIN 8
/* Multiply-adds above which a call runs on several threads. */
#define WB_CD_PAR (1 << 18)

typedef struct {
    const float *x, *bias; /* bias: oblocks·MR floats, zero-padded */
    float *y, *prep;
    const float *k;         /* the weights (O, taps) */
    const float *packed;    /* the channel form's: [oblock][tap][width] */
    const Py_ssize_t *off;  /* per tap, into one prepared image */
    Py_ssize_t n, c, h, w, o, sh, sw, top, left, ho, wo, hq, wq;
    Py_ssize_t plane, image, taps, pixels, units_per_image, oblocks;
    Py_ssize_t run; /* pixels of a unit of the pixel form (the last of an image: the rest) */
    Py_ssize_t slack; /* zero floats read past a prepared image */
    /* the planes' columns: per row phase, ``cols`` planes, plane e starting at input column
     * e·col_step - left (s_w phases, step 1; or kw shifts, step d_w, when ``shifted``) */
    Py_ssize_t cols, col_step;
    int shifted;
    int act; /* activation.h's code, applied to each tile before it is stored */
} cd_ctx;

/* The zero-padded planes of channels [c0, c1) of image n into ``image`` (one prepared image). */
static void prepare_channels(const cd_ctx *cx, Py_ssize_t n, Py_ssize_t c0, Py_ssize_t c1,
                             float *image) {
    const Py_ssize_t C = cx->c, H = cx->h, W = cx->w, SH = cx->sh, SW = cx->sw;
    const Py_ssize_t HQ = cx->hq, WQ = cx->wq, PLANE = cx->plane;
    const Py_ssize_t TOP = cx->top, LEFT = cx->left, COLS = cx->cols, STEP = cx->col_step;
    for (Py_ssize_t ch = c0; ch < c1; ch++) {
        const float *src = cx->x + (n * C + ch) * H * W;
        float *dst = image + ch * SH * COLS * PLANE;
        for (Py_ssize_t a = 0; a < SH; a++)
            for (Py_ssize_t e = 0; e < COLS; e++, dst += PLANE) {
                const Py_ssize_t first = e * STEP - LEFT; /* the input column of q = 0 */
                Py_ssize_t lo, hi;
                valid_range(first, SW, W, WQ, &lo, &hi);
                for (Py_ssize_t r = 0; r < HQ; r++) {
                    float *row = dst + r * WQ;
                    const Py_ssize_t iy = SH * r + a - TOP;
                    if (iy < 0 || iy >= H || lo == hi) {
                        memset(row, 0, sizeof(float) * (size_t)WQ);
                        continue;
                    }
                    const float *in = src + iy * W + first;
                    memset(row, 0, sizeof(float) * (size_t)lo);
                    if (SW == 1)
                        memcpy(row + lo, in + lo, sizeof(float) * (size_t)(hi - lo));
                    else if (SW == 2) /* a constant stride: gcc vectorises it with shuffles */
                        for (Py_ssize_t q = lo; q < hi; q++) row[q] = in[2 * q];
                    else
                        for (Py_ssize_t q = lo; q < hi; q++) row[q] = in[q * SW];
                    memset(row + hi, 0, sizeof(float) * (size_t)(WQ - hi));
                }
            }
    }
}

/* Units (n, c): the planes of channel c of image n, into the batch's cx->prep. */
static void prepare(const void *vctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {
    (void)t, (void)buf;
    const cd_ctx *cx = vctx;
    for (Py_ssize_t u = u0; u < u1; u++)
        prepare_channels(cx, u / cx->c, u % cx->c, u % cx->c + 1, cx->prep + u / cx->c * cx->image);
}

/* tile[r][v·lanes + l] = bias[r] + Σ_t k_r[t] · src[off[t] + v·lanes + l] for v < nv. */
static inline __attribute__((always_inline)) void micro_tile(const float *src,
                                                             const Py_ssize_t *off,
                                                             Py_ssize_t taps,
                                                             const float *const k[WB_CD_MR],
                                                             const float *bias, float *tile,
                                                             const int nv) {
    lane_vec acc[WB_CD_MR][WB_CD_NV];
#pragma GCC unroll 8
    for (int r = 0; r < WB_CD_MR; r++) {
        const lane_vec b = lane_set1(bias[r]);
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) acc[r][v] = b;
    }
    for (Py_ssize_t t = 0; t < taps; t++) {
        const float *s = src + off[t];
        lane_vec in[WB_CD_NV];
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) in[v] = lane_load(s + v * WB_LANES);
#pragma GCC unroll 8
        for (int r = 0; r < WB_CD_MR; r++) {
            const lane_vec w = lane_set1(k[r][t]);
#pragma GCC unroll 3
            for (int v = 0; v < nv; v++) acc[r][v] = lane_fma(in[v], w, acc[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < WB_CD_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++) lane_store(tile + r * WB_CD_NB + v * WB_LANES, acc[r][v]);
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

/* Unit u = (n, run of pixels, block of MR output channels) of the pixel form, from ``src``
 * (image n prepared); ``tile`` holds MR × NB floats. */
static void pixel_unit(const cd_ctx *cx, const float *src, Py_ssize_t u, float *tile) {
    const Py_ssize_t O = cx->o, WQ = cx->wq, WO = cx->wo, TAPS = cx->taps, OB = cx->oblocks;
    const Py_ssize_t PIXELS = cx->pixels, UPI = cx->units_per_image, OUT = cx->ho * cx->wo;
    Py_ssize_t runs[WB_CD_NB + 1][3];
    const Py_ssize_t ob = u % OB, n = u / OB / UPI, p_begin = (u / OB % UPI) * cx->run;
    const Py_ssize_t p_end = p_begin + cx->run < PIXELS ? p_begin + cx->run : PIXELS;
    const Py_ssize_t rows = O - ob * WB_CD_MR < WB_CD_MR ? O - ob * WB_CD_MR : WB_CD_MR;
    const float *w[WB_CD_MR]; /* rows past O repeat the last one; they are not stored */
    for (int r = 0; r < WB_CD_MR; r++)
        w[r] = cx->k + (ob * WB_CD_MR + (r < rows ? r : rows - 1)) * TAPS;
    const float *bias = cx->bias + ob * WB_CD_MR;
    float *y = cx->y + (n * O + ob * WB_CD_MR) * OUT;
    for (Py_ssize_t p0 = p_begin; p0 < p_end; p0 += WB_CD_NB) {
        const Py_ssize_t p1 = p0 + WB_CD_NB < p_end ? p0 + WB_CD_NB : p_end;
        /* a short last tile computes only the vectors it has */
        if (p1 - p0 > 2 * WB_LANES)
            micro_tile(src + p0, cx->off, TAPS, w, bias, tile, WB_CD_NV);
        else if (p1 - p0 > WB_LANES)
            micro_tile(src + p0, cx->off, TAPS, w, bias, tile, 2);
        else
            micro_tile(src + p0, cx->off, TAPS, w, bias, tile, 1);
        wb_activate_f32(tile, rows * WB_CD_NB, cx->act); /* (while the tile is in L1) */
        const int count = tile_runs(p0, p1, WQ, WO, runs);
        for (Py_ssize_t r = 0; r < rows; r++)
            for (int k = 0; k < count; k++)
                memcpy(y + r * OUT + runs[k][0], tile + r * WB_CD_NB + runs[k][1],
                       sizeof(float) * (size_t)runs[k][2]);
    }
}

/* Units of the pixel form over the batch's prepared images, the channel blocks innermost so
 * that a thread's consecutive units read the same input pixels. */
static void compute(const void *vctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {
    (void)t;
    const cd_ctx *cx = vctx;
    const Py_ssize_t per_image = cx->units_per_image * cx->oblocks;
    for (Py_ssize_t u = u0; u < u1; u++)
        pixel_unit(cx, cx->prep + u / per_image * cx->image, u, buf);
}

/* Units: whole images, each prepared in the thread's buffer (an image, its slack, then a
 * tile) just before its units of the pixel form run, so that it is read from cache. */
static void compute_images(const void *vctx, int t, Py_ssize_t n0, Py_ssize_t n1, void *buf) {
    (void)t;
    const cd_ctx *cx = vctx;
    const Py_ssize_t per_image = cx->units_per_image * cx->oblocks;
    float *image = buf, *tile = image + cx->image + cx->slack;
    memset(image + cx->image, 0, sizeof(float) * (size_t)cx->slack);
    for (Py_ssize_t n = n0; n < n1; n++) {
        prepare_channels(cx, n, 0, cx->c, image);
        for (Py_ssize_t u = n * per_image; u < (n + 1) * per_image; u++)
            pixel_unit(cx, image, u, tile);
    }
}

/* acc[v] += x · w[v] for v < nv: one input times a row of weight vectors. */
static inline __attribute__((always_inline)) void rank1_update(lane_vec *acc, lane_vec x,
                                                               const lane_vec *w, const int nv) {
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++) acc[v] = lane_fma(x, w[v], acc[v]);
}

/* The channel form, for grids of fewer pixels than the pixel form's micro-tile (48 or 24):
 * the same sums with vectors along output channels, y[o·lanes.., p] over PX consecutive
 * pixels of the grid (one broadcast input per pixel and tap; weights packed
 * [oblock][tap][WIDTH], WIDTH one vector of lanes, or NV of them beyond lanes channels), so a
 * tile computes at most PX - 1 pixels past the grid. Units are (image, block of WIDTH output
 * channels, tile of PX pixels), the tiles innermost so that a thread's consecutive units read
 * the same packed weights. */
#if WB_HAS_AVX512
#define WB_CC_PX 12 /* 12 × 2 accumulators + 2 weights + 1 input of 32 registers */
#else
#define WB_CC_PX 6 /* 6 × 2 + 2 + 1 of 16 */
#endif
#define WB_CC_NV 2
#define WB_CC_WIDTH (WB_CC_NV * WB_LANES)

/* One unit of the channel form with ``nv`` vectors of channels per block (WIDTH = nv·lanes). */
static inline __attribute__((always_inline)) void channels_unit(const cd_ctx *cx, Py_ssize_t u,
                                                                float *tile, const int nv) {
    const Py_ssize_t O = cx->o, WQ = cx->wq, WO = cx->wo, TAPS = cx->taps, OB = cx->oblocks;
    const Py_ssize_t PIXELS = cx->pixels, TILES = cx->units_per_image, OUT = cx->ho * cx->wo;
    const Py_ssize_t WIDTH = nv * WB_LANES;
    const Py_ssize_t p0 = u % TILES * WB_CC_PX, ob = u / TILES % OB, n = u / TILES / OB;
    const float *src = cx->prep + n * cx->image + p0;
    const float *w = cx->packed + ob * TAPS * WIDTH;
    lane_vec acc[WB_CC_PX][WB_CC_NV];
#pragma GCC unroll 2
    for (int v = 0; v < nv; v++) {
        const lane_vec b = lane_load(cx->bias + ob * WIDTH + v * WB_LANES);
#pragma GCC unroll 12
        for (int i = 0; i < WB_CC_PX; i++) acc[i][v] = b;
    }
    for (Py_ssize_t k = 0; k < TAPS; k++, w += WIDTH) {
        const float *s = src + cx->off[k];
        lane_vec wv[WB_CC_NV];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) wv[v] = lane_load(w + v * WB_LANES);
#pragma GCC unroll 12
        for (int i = 0; i < WB_CC_PX; i++) rank1_update(acc[i], lane_set1(s[i]), wv, nv);
    }
#pragma GCC unroll 12
    for (int i = 0; i < WB_CC_PX; i++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) lane_store(tile + i * WIDTH + v * WB_LANES, acc[i][v]);
    wb_activate_f32(tile, WB_CC_PX * WIDTH, cx->act);
    const Py_ssize_t rows = O - ob * WIDTH < WIDTH ? O - ob * WIDTH : WIDTH;
    for (Py_ssize_t i = 0; i < WB_CC_PX && p0 + i < PIXELS; i++) {
        const Py_ssize_t row = (p0 + i) / WQ, col = (p0 + i) % WQ;
        if (col >= WO) continue;
        float *y = cx->y + (n * O + ob * WIDTH) * OUT + row * WO + col;
        for (Py_ssize_t r = 0; r < rows; r++) y[r * OUT] = tile[i * WIDTH + r];
    }
}

static void compute_by_channels(const void *vctx, int t, Py_ssize_t u0, Py_ssize_t u1,
                                void *buf) {
    (void)t;
    const cd_ctx *cx = vctx;
    for (Py_ssize_t u = u0; u < u1; u++)
        if (cx->o > WB_LANES)
            channels_unit(cx, u, buf, WB_CC_NV);
        else /* one vector of channels is enough */
            channels_unit(cx, u, buf, 1);
}

/* The taps' offsets into one prepared image, ``taps`` of them (t >= C·kh·kw: 0, a padding
 * tap that reads the first plane). */
static void tap_offsets(const cd_ctx *cx, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t dh,
                        Py_ssize_t dw, Py_ssize_t taps, Py_ssize_t *off) {
    const Py_ssize_t SH = cx->sh, SW = cx->sw, COLS = cx->cols;
    for (Py_ssize_t t = 0; t < taps; t++) {
        const Py_ssize_t ch = t / (kh * kw), i = t / kw % kh, j = t % kw;
        /* the column phase and shift: plane j, none (shifted planes); else j·d_w mod / div s_w */
        const Py_ssize_t e = cx->shifted ? j : j * dw % SW, shift = cx->shifted ? 0 : j * dw / SW;
        const Py_ssize_t plane = (ch * SH + i * dh % SH) * COLS + e;
        off[t] = t < cx->taps ? plane * cx->plane + (i * dh / SH) * cx->wq + shift : 0;
    }
}

/* Packing of the weights k (O, taps) as [oblock][tap][width], rows past O zero. */
typedef struct {
    const float *k;
    float *packed;
    Py_ssize_t o, taps, width;
} pack_ctx;

/* Units: blocks of ``width`` output channels, tap by tap (the stores run contiguously). */
static void pack_blocks(const void *vctx, int t, Py_ssize_t b0, Py_ssize_t b1, void *buf) {
    (void)t, (void)buf;
    const pack_ctx *px = vctx;
    const Py_ssize_t O = px->o, TAPS = px->taps, WIDTH = px->width;
    for (Py_ssize_t b = b0; b < b1; b++) {
        float *dst = px->packed + b * TAPS * WIDTH;
        const Py_ssize_t rows = O - b * WIDTH < WIDTH ? O - b * WIDTH : WIDTH;
        const float *src = px->k + b * WIDTH * TAPS;
        for (Py_ssize_t tap = 0; tap < TAPS; tap++, dst += WIDTH) {
            Py_ssize_t r = 0;
            for (; r < rows; r++) dst[r] = src[r * TAPS + tap];
            for (; r < WIDTH; r++) dst[r] = 0.0f;
        }
    }
}

/* The bias padded to oblocks·width, the taps' offsets and, for the channel form (``packs``),
 * room for the packed weights (``pk`` says how to fill it: pack_blocks); NULL when out of
 * memory (free(result) releases all three). */
static float *call_arrays(const float *k, const float *bias, const cd_ctx *cx, Py_ssize_t kh,
                          Py_ssize_t kw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t width,
                          int packs, float **packed_bias, Py_ssize_t **offsets, pack_ctx *pk) {
    const Py_ssize_t taps = cx->taps, rows = cx->oblocks * width;
    const Py_ssize_t weights = packs ? rows * taps : 0;
    char *mem = malloc(sizeof(float) * (size_t)(weights + rows) +
                       sizeof(Py_ssize_t) * (size_t)taps);
    if (!mem) return NULL;
    float *b = (float *)mem + weights;
    Py_ssize_t *off = (Py_ssize_t *)(b + rows);
    for (Py_ssize_t o = 0; o < rows; o++) b[o] = bias && o < cx->o ? bias[o] : 0.0f;
    tap_offsets(cx, kh, kw, dh, dw, taps, off);
    *pk = (pack_ctx){.k = k, .packed = packs ? (float *)mem : NULL, .o = cx->o, .taps = taps,
                     .width = width};
    *packed_bias = b;
    *offsets = off;
    return (float *)mem;
}

/* The geometry of a call from its 15 size arguments (N, C, H, W, O, kh, kw, sh, sw, dh, dw,
 * Ho, Wo, top, left; ``kernel`` gets kh, kw, dh, dw); -1 with an exception when invalid. */
static int geometry(PyObject *const *args, const char *what, cd_ctx *c, Py_ssize_t kernel[4]) {
    Py_ssize_t v[15];
    if (sizes(args, 15, 13, v, what) < 0) return -1;
    *c = (cd_ctx){.n = v[0], .c = v[1], .h = v[2], .w = v[3], .o = v[4], .sh = v[7],
                  .sw = v[8], .top = v[13], .left = v[14], .ho = v[11], .wo = v[12]};
    kernel[0] = v[5], kernel[1] = v[6], kernel[2] = v[9], kernel[3] = v[10];
    /* the grid covers every tap of every output: (Ho - 1)·s + (k - 1)·d + 1 rows / columns */
    c->hq = ((c->ho - 1) * c->sh + (v[5] - 1) * v[9] + c->sh) / c->sh;
    c->wq = ((c->wo - 1) * c->sw + (v[6] - 1) * v[10] + c->sw) / c->sw;
    c->cols = c->sw, c->col_step = 1;
    c->plane = c->hq * c->wq;
    c->image = c->c * c->sh * c->sw * c->plane;
    c->taps = c->c * v[5] * v[6];
    return 0;
}

/* The column-shifted planes (see the top) in place of the phase planes of ``geometry``. */
static void shift_columns(cd_ctx *c, Py_ssize_t kw, Py_ssize_t dw) {
    c->shifted = 1;
    c->cols = kw, c->col_step = dw;
    c->wq = c->wo;
    c->plane = c->hq * c->wq;
    c->image = c->c * c->sh * kw * c->plane;
}

/* The N prepared images (phase or column-shifted planes) of cx->x, with ``slack`` zero floats
 * after them, by ``threads`` threads; NULL when out of memory. Call without the GIL. */
static float *prepared_images(cd_ctx *cx, size_t slack, int threads) {
    float *prep = malloc(sizeof(float) * ((size_t)(cx->n * cx->image) + slack));
    if (!prep) return NULL;
    memset(prep + cx->n * cx->image, 0, sizeof(float) * slack);
    cx->prep = prep;
    if (wb_parallel_ranges(prepare, cx, cx->n * cx->c, threads, 0) == 0) return prep;
    free(prep);
    return NULL;
}

/* Whether arrays of ``found`` floats are the ``expected`` ones, else ValueError naming both. */
static int sizes_match(const char *what, const Py_ssize_t found[], const Py_ssize_t expected[],
                       int count) {
    for (int i = 0; i < count; i++)
        if (found[i] != expected[i]) {
            PyErr_Format(PyExc_ValueError,
                         "%s: array %d has %zd elements, the geometry expects %zd", what, i,
                         found[i], expected[i]);
            return -1;
        }
    return 0;
}

/* conv_direct(x, k, bias or None, y, N, C, H, W, O, kh, kw, sh, sw, dh, dw, Ho, Wo, top, left,
 * act): y (N, O, Ho, Wo) = act(the convolution of x (N, C, H, W) with k (O, C, kh, kw)); f32,
 * contiguous; top and left are the padding before the first row and column (negative: a
 * crop); act is activation.h's code (0: none). */
static PyObject *py_conv_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 20) {
        PyErr_Format(PyExc_TypeError, "conv_direct: expected 20 arguments, found %zd", nargs);
        return NULL;
    }
    cd_ctx c;
    Py_ssize_t kd[4]; /* kh, kw, dh, dw */
    if (geometry(args + 4, "conv_direct", &c, kd) < 0) return NULL;
    const long act = PyLong_AsLong(args[19]);
    if (act == -1 && PyErr_Occurred()) return NULL;
    if (act < 0 || act >= WB_ACT_COUNT) {
        PyErr_Format(PyExc_ValueError, "conv_direct: act must be in [0, %d), found %ld",
                     WB_ACT_COUNT, act);
        return NULL;
    }
    c.act = (int)act;
    char *x, *k, *y, *bias = NULL;
    int xt, kt, yt, bt = WB_F32;
    Py_ssize_t found[4], expected[4] = {c.n * c.c * c.h * c.w, c.o * c.taps,
                                        c.n * c.o * c.ho * c.wo, c.o};
    found[3] = c.o;
    if (wb_array(args[0], "conv_direct", &x, &xt, &found[0], 0) < 0 ||
        wb_array(args[1], "conv_direct", &k, &kt, &found[1], 0) < 0 ||
        wb_array(args[3], "conv_direct output", &y, &yt, &found[2], 1) < 0)
        return NULL;
    if (args[2] != Py_None && wb_array(args[2], "conv_direct bias", &bias, &bt, &found[3], 0) < 0)
        return NULL;
    if (xt != WB_F32 || kt != WB_F32 || yt != WB_F32 || bt != WB_F32) {
        PyErr_SetString(PyExc_TypeError, "conv_direct: expected f32 arrays");
        return NULL;
    }
    if (sizes_match("conv_direct", found, expected, 4) < 0) return NULL;
    c.x = (const float *)x, c.y = (float *)y;
    /* measured (AVX-512, 2 threads, batch 64, 3×3): 16 -> 32 channels on 4² images (a grid of 24
     * pixels) in 0.53 of the pixel form's time, 32 -> 16 in 0.7; from 8² (80) the pixel form
     * is ahead */
    const int by_channels = c.ho * c.wq < WB_CD_NB;
    /* measured (AVX-512, 3×3, one thread): 0.72 of the phase planes' time at 8² (256 channels,
     * batch 2), 0.92 at 16² and 0.94 at 32² (128, batch 2); at 14² with 32 and 64 channels
     * (batch 64) 1.0-1.5×, at 160² with 32 1.6-2.6×: the copies' cost (the rule keeps those,
     * and the channel form's tiny grids, on the phase planes) */
    if (!by_channels && c.o * (c.wq - c.wo) >= WB_CD_SHIFT_GAIN * c.wq)
        shift_columns(&c, kd[1], kd[3]);
    c.pixels = c.ho * c.wq;
    const Py_ssize_t width = by_channels ? (c.o > WB_LANES ? WB_CC_WIDTH : WB_LANES) : WB_CD_MR;
    const Py_ssize_t tile = by_channels ? WB_CC_PX : WB_CD_UNIT;
    c.units_per_image = (c.pixels + tile - 1) / tile;
    /* units of about equal size (a vector multiple), so that equal counts of them are equal
     * work for the threads: 400 pixels as 144, 144, 112 rather than 192, 192, 16 */
    c.run = (c.pixels + c.units_per_image - 1) / c.units_per_image;
    c.run = (c.run + WB_LANES - 1) / WB_LANES * WB_LANES;
    c.oblocks = (c.o + width - 1) / width;
    float *packed_bias;
    Py_ssize_t *off;
    pack_ctx pk;
    float *arrays = call_arrays((const float *)k, (const float *)bias, &c, kd[0], kd[1], kd[2],
                                kd[3], width, by_channels, &packed_bias, &off, &pk);
    if (!arrays) return PyErr_NoMemory();
    c.k = (const float *)k, c.packed = pk.packed, c.bias = packed_bias, c.off = off;
    /* a tile past the last pixel reads up to a tile and a row's taps beyond the last image */
    c.slack = WB_CD_NB + (kd[1] - 1) * kd[3] + WB_LANES;
    const int threads = wb_threads_for(c.n * c.o * c.ho * c.wo * c.taps, WB_CD_PAR);
    /* Enough images for the threads: each prepares its own just before computing it (from
     * cache); else all are prepared first and the units of all split between the threads.
     * measured (AVX-512, 2 threads, batch 64, 3×3, best of 4): 0.75 of the time of preparing
     * all first at 28² of 1 channel, 0.96-1.04 at 14² of 32 and 64 channels */
    const int by_images = !by_channels && (threads == 1 || c.n >= 4 * threads);
    int rc = -1;
    Py_BEGIN_ALLOW_THREADS
    if (by_images)
        rc = wb_parallel_ranges(compute_images, &c, c.n, threads,
                                sizeof(float) * (size_t)(c.image + c.slack +
                                                         WB_CD_MR * WB_CD_NB));
    else {
        float *prep = prepared_images(&c, (size_t)c.slack, threads);
        if (prep)
            rc = by_channels ? wb_parallel_ranges(pack_blocks, &pk, c.oblocks, threads, 0) : 0;
        if (rc == 0)
            rc = wb_parallel_ranges(by_channels ? compute_by_channels : compute, &c,
                                    c.n * c.units_per_image * c.oblocks, threads,
                                    sizeof(float) * (by_channels ? WB_CC_PX * WB_CC_WIDTH
                                                                 : WB_CD_MR * WB_CD_NB));
        free(prep);
    }
    Py_END_ALLOW_THREADS
    free(arrays);
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* ---- The weight gradient, over the same prepared images ----
 *
 *     dk[o, t] = Σ_n Σ_{h < Ho, w < Wo} g[n, o, h, w] · prep_n[off[t] + h·Wq + w]
 *
 * as outer products: per pixel, NV vectors of g over output channels (g transposed to
 * pixel-major in a unit's scratch) times S broadcast taps, into S × NV accumulators held in
 * registers over a unit's pixels. Taps are padded to a multiple of S (a padding tap reads the
 * first plane; its sums are dropped), output channels to NV vectors (zero g). Units are runs of
 * images (small ones) or of rows of one image, about WB_WG_PIXELS pixels; each thread sums
 * into its own [tap][channel] partial, and the partials are added at the end. */
#define WB_WG_S 9 /* the taps of a 3×3 kernel */
#if WB_HAS_AVX512
#define WB_WG_NV 2 /* 9 × 2 accumulators + 2 gradients + 1 tap of 32 registers */
#define WB_WG_R 3  /* the row form: 3 × 9 accumulators + 3 gradients + 1 input */
#else
#define WB_WG_NV 1 /* 9 + 1 + 1 of 16 */
#define WB_WG_R 1
#define WB_WG_AVX2_MAX_TAPS 576 /* beyond: declined (None), im2col and BLAS run instead */
#endif
#define WB_WG_PIXELS 512

typedef struct {
    const float *g, *prep;
    float *partial;        /* [thread][tpad][opad] */
    const Py_ssize_t *off; /* tpad of them */
    Py_ssize_t o, opad, tpad, ho, wo, wq, image, images_per_unit, rows_per_unit, row_units;
    Py_ssize_t tap_runs, run_taps; /* runs of tap blocks per pixel unit, taps per run */
    int by_rows;                   /* the row form (wgrad_rows) rather than outer products */
} wg_ctx;

/* acc[s][lane] += Σ_pixels g_t[pixel][lane] · src[off[s] + pixel] over ``rows`` rows of Wo
 * pixels of each of ``images`` images (src, g_t advance by an image / its pixels), ``nv``
 * vectors of lanes. */
static inline __attribute__((always_inline)) void wgrad_block(
    const float *src, const Py_ssize_t *off, const float *gt, const wg_ctx *cx,
    Py_ssize_t images, Py_ssize_t rows, float *acc_mem, const int nv) {
    const Py_ssize_t OPAD = cx->opad, WO = cx->wo, WQ = cx->wq;
    lane_vec acc[WB_WG_S][WB_WG_NV];
#pragma GCC unroll 9
    for (int s = 0; s < WB_WG_S; s++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) acc[s][v] = lane_load(acc_mem + s * OPAD + v * WB_LANES);
    for (Py_ssize_t n = 0; n < images; n++, src += cx->image)
        for (Py_ssize_t h = 0; h < rows; h++) {
            const float *in = src + h * WQ;
            for (Py_ssize_t w = 0; w < WO; w++, gt += OPAD) {
                lane_vec gv[WB_WG_NV];
#pragma GCC unroll 2
                for (int v = 0; v < nv; v++) gv[v] = lane_load(gt + v * WB_LANES);
#pragma GCC unroll 9
                for (int s = 0; s < WB_WG_S; s++)
                    rank1_update(acc[s], lane_set1(in[off[s] + w]), gv, nv);
            }
        }
#pragma GCC unroll 9
    for (int s = 0; s < WB_WG_S; s++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) lane_store(acc_mem + s * OPAD + v * WB_LANES, acc[s][v]);
}

/* The row form, for few taps on wide images (where transposing g would cost more than the
 * products): out[s·Opad + r] += Σ_pixels g_r[pixel] · src[off[s] + pixel] for ``count`` <= R
 * rows of g from ``g`` (rows Ho·Wo apart; images O·Ho·Wo apart), as vectors along each row of
 * Wo pixels (its tail masked) and a horizontal sum at the end. */
static void wgrad_rows(const wg_ctx *cx, const float *g, const float *src, const Py_ssize_t *off,
                       Py_ssize_t images, Py_ssize_t rows, Py_ssize_t count, float *out) {
    const Py_ssize_t WO = cx->wo, WQ = cx->wq, PLANE = cx->ho * cx->wo;
    lane_vec acc[WB_WG_R][WB_WG_S];
#pragma GCC unroll 3
    for (int r = 0; r < WB_WG_R; r++)
#pragma GCC unroll 9
        for (int s = 0; s < WB_WG_S; s++) acc[r][s] = lane_zero();
    for (Py_ssize_t n = 0; n < images; n++)
        for (Py_ssize_t h = 0; h < rows; h++) {
            const float *gr[WB_WG_R];
            for (int r = 0; r < WB_WG_R; r++) /* rows past ``count``: row 0 again, dropped */
                gr[r] = g + (n * cx->o + (r < count ? r : 0)) * PLANE + h * WO;
            const float *in = src + n * cx->image + h * WQ;
            for (Py_ssize_t w = 0; w < WO; w += WB_LANES) {
                const lane_mask m = lanes_between(0, WO - w);
                lane_vec gv[WB_WG_R];
#pragma GCC unroll 3
                for (int r = 0; r < WB_WG_R; r++) gv[r] = masked_load(gr[r] + w, m);
#pragma GCC unroll 9
                for (int s = 0; s < WB_WG_S; s++) {
                    const lane_vec x = masked_load(in + off[s] + w, m);
#pragma GCC unroll 3
                    for (int r = 0; r < WB_WG_R; r++) acc[r][s] = lane_fma(gv[r], x, acc[r][s]);
                }
            }
        }
#pragma GCC unroll 3
    for (int r = 0; r < WB_WG_R; r++) /* constant indices: acc stays in registers */
#pragma GCC unroll 9
        for (int s = 0; s < WB_WG_S; s++)
            if (r < count) out[s * cx->opad + r] += lane_sum(acc[r][s]);
}

/* g_t[p][o] = g[o][p] for ``pixels`` pixels of O channels (g's rows ``stride`` apart), zero
 * for O <= o < Opad; by blocks of 16 pixels, whose rows of g_t stay in L1. */
static void transpose_gradient(const float *g, Py_ssize_t stride, Py_ssize_t pixels,
                               Py_ssize_t O, Py_ssize_t opad, float *gt) {
    for (Py_ssize_t p0 = 0; p0 < pixels; p0 += 16) {
        const Py_ssize_t p1 = p0 + 16 < pixels ? p0 + 16 : pixels;
        for (Py_ssize_t o = 0; o < O; o++)
            for (Py_ssize_t p = p0; p < p1; p++) gt[p * opad + o] = g[o * stride + p];
        for (Py_ssize_t p = p0; p < p1 && O < opad; p++)
            memset(gt + p * opad + O, 0, sizeof(float) * (size_t)(opad - O));
    }
}

/* Units (pixel unit, run of tap blocks), the tap runs innermost: a pixel unit is images
 * [n0, n0 + images_per_unit), or rows [r0, r0 + rows_per_unit) of one image. */
static void wgrad_compute(const void *vctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {
    const wg_ctx *cx = vctx;
    const Py_ssize_t O = cx->o, OPAD = cx->opad, HO = cx->ho, WO = cx->wo;
    const Py_ssize_t IMAGES = cx->images_per_unit, RUNS = cx->tap_runs;
    const int nv = OPAD / WB_LANES < WB_WG_NV ? (int)(OPAD / WB_LANES) : WB_WG_NV;
    float *gt = buf, *acc = cx->partial + (Py_ssize_t)t * cx->tpad * OPAD;
    Py_ssize_t transposed = -1; /* the pixel unit in gt */
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t unit = u / RUNS, n0 = unit / cx->row_units * IMAGES;
        const Py_ssize_t r0 = unit % cx->row_units * cx->rows_per_unit;
        const Py_ssize_t rows = HO - r0 < cx->rows_per_unit ? HO - r0 : cx->rows_per_unit;
        const float *src = cx->prep + n0 * cx->image + r0 * cx->wq;
        const Py_ssize_t tb0 = u % RUNS * cx->run_taps;
        const Py_ssize_t tb1 = tb0 + cx->run_taps < cx->tpad ? tb0 + cx->run_taps : cx->tpad;
        if (cx->by_rows) {
            const float *g = cx->g + n0 * O * HO * WO + r0 * WO;
            for (Py_ssize_t tb = tb0; tb < tb1; tb += WB_WG_S)
                for (Py_ssize_t ob = 0; ob < O; ob += WB_WG_R)
                    wgrad_rows(cx, g + ob * HO * WO, src, cx->off + tb, IMAGES, rows,
                               O - ob < WB_WG_R ? O - ob : WB_WG_R, acc + tb * OPAD + ob);
            continue;
        }
        if (unit != transposed)
            for (Py_ssize_t n = 0; n < IMAGES; n++)
                transpose_gradient(cx->g + (n0 + n) * O * HO * WO + r0 * WO, HO * WO, rows * WO,
                                   O, OPAD, gt + n * rows * WO * OPAD);
        transposed = unit;
        for (Py_ssize_t tb = tb0; tb < tb1; tb += WB_WG_S)
            for (Py_ssize_t ob = 0; ob < OPAD; ob += nv * WB_LANES) {
                float *a = acc + tb * OPAD + ob;
                if (nv == WB_WG_NV)
                    wgrad_block(src, cx->off + tb, gt + ob, cx, IMAGES, rows, a, WB_WG_NV);
                else
                    wgrad_block(src, cx->off + tb, gt + ob, cx, IMAGES, rows, a, 1);
            }
    }
}

/* conv_direct_wgrad(x, g, dk, N, C, H, W, O, kh, kw, sh, sw, dh, dw, Ho, Wo, top, left):
 * dk (O, C, kh, kw) = the weight gradient of conv_direct's convolution of x (N, C, H, W) for
 * the output gradient g (N, O, Ho, Wo); f32, contiguous. True, or None (dk untouched) where
 * this variant leaves the geometry to im2col and BLAS. */
static PyObject *py_conv_direct_wgrad(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char what[] = "conv_direct_wgrad";
    if (nargs != 18) {
        PyErr_Format(PyExc_TypeError, "%s: expected 18 arguments, found %zd", what, nargs);
        return NULL;
    }
    cd_ctx c;
    Py_ssize_t kd[4];
    if (geometry(args + 3, what, &c, kd) < 0) return NULL;
    char *x, *g, *dk;
    int xt, gt, kt;
    Py_ssize_t found[3], expected[3] = {c.n * c.c * c.h * c.w, c.n * c.o * c.ho * c.wo,
                                        c.o * c.taps};
    if (wb_array(args[0], what, &x, &xt, &found[0], 0) < 0 ||
        wb_array(args[1], what, &g, &gt, &found[1], 0) < 0 ||
        wb_array(args[2], what, &dk, &kt, &found[2], 1) < 0)
        return NULL;
    if (xt != WB_F32 || gt != WB_F32 || kt != WB_F32) {
        PyErr_Format(PyExc_TypeError, "%s: expected f32 arrays", what);
        return NULL;
    }
    if (sizes_match(what, found, expected, 3) < 0) return NULL;
#if !WB_HAS_AVX512
    /* 8 channels by 9 taps per step: from about 576 taps (64 input channels of a 3×3 kernel)
     * im2col and BLAS measured as fast, 0.7× this kernel's time at 1152 (AVX2 on a Zen 4) */
    if (c.taps > WB_WG_AVX2_MAX_TAPS) Py_RETURN_NONE;
#endif
    c.x = (const float *)x;
    wg_ctx w = {.g = (const float *)g, .o = c.o, .ho = c.ho, .wo = c.wo, .wq = c.wq,
                .image = c.image};
    const Py_ssize_t vec = (c.o <= WB_LANES ? 1 : WB_WG_NV) * WB_LANES;
    w.opad = (c.o + vec - 1) / vec * vec;
    w.tpad = (c.taps + WB_WG_S - 1) / WB_WG_S * WB_WG_S;
    const Py_ssize_t pixels = c.ho * c.wo;
    if (pixels <= WB_WG_PIXELS) { /* whole images, as many as make about WB_WG_PIXELS */
        Py_ssize_t m = WB_WG_PIXELS / pixels < c.n ? WB_WG_PIXELS / pixels : c.n;
        while (c.n % m) m--;
        w.images_per_unit = m, w.rows_per_unit = c.ho, w.row_units = 1;
    } else {
        w.images_per_unit = 1;
        w.rows_per_unit = (WB_WG_PIXELS + c.wo - 1) / c.wo;
        w.row_units = (c.ho + w.rows_per_unit - 1) / w.rows_per_unit;
    }
    const int threads = wb_threads_for(c.n * c.o * pixels * c.taps, WB_CD_PAR);
    /* measured (AVX-512, 2 threads): the row form takes 0.4-0.9 of the outer products' time up
     * to 6 input channels of a 3×3 kernel on images 16 to 64 wide, 1.25-3.6× theirs from 16
     * input channels (16 at 4², 32 at 14², 64 at 80²) */
    w.by_rows = c.taps <= 6 * WB_WG_S && c.wo >= WB_LANES;
    /* too few pixel units for the threads: split the taps too, in runs of >= 8 blocks */
    const Py_ssize_t pixel_units = c.n / w.images_per_unit * w.row_units;
    const Py_ssize_t blocks = w.tpad / WB_WG_S;
    Py_ssize_t runs = 1;
    if (pixel_units < 4 * threads) runs = (4 * threads + pixel_units - 1) / pixel_units;
    if (runs > blocks / 8) runs = blocks / 8 > 1 ? blocks / 8 : 1;
    w.run_taps = (blocks + runs - 1) / runs * WB_WG_S;
    w.tap_runs = (w.tpad + w.run_taps - 1) / w.run_taps;
    const Py_ssize_t units = pixel_units * w.tap_runs;
    const size_t scratch = w.by_rows ? 0 : sizeof(float) * (size_t)(w.images_per_unit *
                                                    w.rows_per_unit * c.wo * w.opad);
    const size_t per_thread = (size_t)(w.tpad * w.opad);
    Py_ssize_t *off = malloc(sizeof(Py_ssize_t) * (size_t)w.tpad);
    float *partial = calloc((size_t)threads * per_thread, sizeof(float));
    int rc = -1;
    if (off && partial) {
        tap_offsets(&c, kd[0], kd[1], kd[2], kd[3], w.tpad, off);
        w.off = off, w.partial = partial;
        Py_BEGIN_ALLOW_THREADS
        float *prep = prepared_images(&c, 0, threads);
        w.prep = prep;
        if (prep) rc = wb_parallel_ranges(wgrad_compute, &w, units, threads, scratch);
        free(prep);
        float *out = (float *)dk;
        for (Py_ssize_t o = 0; rc == 0 && o < c.o; o++)
            for (Py_ssize_t t = 0; t < c.taps; t++) {
                float sum = 0.0f;
                for (int k = 0; k < threads; k++) sum += partial[k * per_thread + t * w.opad + o];
                out[o * c.taps + t] = sum;
            }
        Py_END_ALLOW_THREADS
    }
    free(off);
    free(partial);
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_TRUE;
}

PyMethodDef wb_conv_direct_methods[] = {
    {"conv_direct", (PyCFunction)(void (*)(void))py_conv_direct, METH_FASTCALL,
     "conv_direct(x, k, bias, y, N, C, H, W, O, kh, kw, sh, sw, dh, dw, Ho, Wo, top, left, act): "
     "y = act(conv2d(x, k) + bias) by an implicit-GEMM micro-kernel; contiguous f32 arrays."},
    {"conv_direct_wgrad", (PyCFunction)(void (*)(void))py_conv_direct_wgrad, METH_FASTCALL,
     "conv_direct_wgrad(x, g, dk, N, C, H, W, O, kh, kw, sh, sw, dh, dw, Ho, Wo, top, left): "
     "dk = the weight gradient of conv_direct's convolution for the output gradient g; "
     "None where im2col and BLAS measure faster on this variant."},
    {NULL, NULL, 0, NULL},
};

#else /* the baseline variant: no lane vectors, no direct kernel */

PyMethodDef wb_conv_direct_methods[] = {{NULL, NULL, 0, NULL}};

#endif
