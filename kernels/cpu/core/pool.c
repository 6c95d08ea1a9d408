/* Max pooling over (H, W) planes, with the argmax, in one pass per output (the numpy path
 * needs a pass per window tap for the values and another for the indices), and its gradient,
 * a scatter of each output gradient onto its argmax. Planes are spread over the threads.
 *
 * Semantics (PyTorch's): the window's taps are visited in (i, j) order, padding skipped; the
 * first maximum wins, NaN wins over everything (the last NaN); a window of -inf reports its
 * first real element, a window of padding only (dilation) -inf with index -1. Every dtype but
 * bool: halves are compared in f32 and their bits copied, so values are exact. */
#include "conv_geometry.h"
#include "nd.h"
#include "threads.h"

/* Outputs above which the pools run on several threads. */
#define WB_POOL_PAR (1 << 14)

typedef struct {
    const char *x;  /* (P, H, W) contiguous */
    char *out;      /* (P, Ho, Wo) contiguous, x's dtype */
    int64_t *idx;   /* (P, Ho, Wo), flat into H·W */
    Py_ssize_t h, w, ho, wo;
    Py_ssize_t kh, kw, sh, sw, ph, pw, dh, dw;
    int tiles; /* 2×2 windows at stride 2 inside the plane: the WB_TILES_FN path */
} pool_ctx;


/* WB_TILES_FN(name, T, V, TO_V): output row r of 2×2 windows at stride 2, no padding or
 * dilation (the windows tile the plane): taps a[0], a[1], b[0], b[1] of rows 2r and 2r + 1,
 * taken in that order by the rule below. Straight-line selects that the compiler vectorises
 * (stride-2 loads); the generic loop's tap ranges and inner loops cost ~5 ns an output. */
#define WB_TILES_FN(name, T, V, TO_V, SIMD)                                                       \
    static inline void name(const T *restrict x, T *restrict out, int64_t *restrict idx,      \
                            Py_ssize_t r, Py_ssize_t w, Py_ssize_t wo) {                      \
        const T *restrict a = x + 2 * r * w, *restrict b = a + w;                             \
        T *restrict o = out + r * wo;                                                         \
        int64_t *restrict ix = idx + r * wo;                                                  \
        for (Py_ssize_t q = SIMD(a, b, o, ix, 2 * r * w, w, wo); q < wo; q++) {               \
            const T t1 = a[2 * q + 1], t2 = b[2 * q], t3 = b[2 * q + 1];                      \
            T bt = a[2 * q];                                                                  \
            V best = TO_V(bt);                                                                \
            const int64_t at0 = 2 * r * w + 2 * q;                                            \
            int64_t at = at0;                                                                 \
            WB_TILE_TAKE(V, TO_V, t1, at0 + 1)                                                \
            WB_TILE_TAKE(V, TO_V, t2, at0 + w)                                                \
            WB_TILE_TAKE(V, TO_V, t3, at0 + w + 1)                                            \
            o[q] = bt;                                                                        \
            ix[q] = at;                                                                       \
        }                                                                                     \
    }
/* One tap of a tile: replaces (bt, best, at) when greater than the best or NaN. */
#define WB_TILE_TAKE(V, TO_V, t, where)                                                       \
    {                                                                                         \
        const V v = TO_V(t);                                                                  \
        const int take = (v > best) | (v != v);                                               \
        bt = take ? t : bt;                                                                   \
        best = take ? v : best;                                                               \
        at = take ? (where) : at;                                                             \
    }

/* WB_POOL_FN(name, T, V, TO_V, LOWEST): max pool of storage type T compared as V; LOWEST
 * (-inf, or the smallest integer) is the value of a window of padding only. The first real tap
 * starts the running maximum, the others replace it branch-free when greater or NaN. */
#define WB_POOL_FN(name, T, V, TO_V, LOWEST, SIMD)                                            \
    WB_TILES_FN(name##_tiles, T, V, TO_V, SIMD)                                               \
    static void name(const void *ctx, int t, Py_ssize_t p0, Py_ssize_t p1, void *buf) {       \
        (void)t;                                                                              \
        const pool_ctx *c = (const pool_ctx *)ctx;                                            \
        const Py_ssize_t h = c->h, w = c->w, ho = c->ho, wo = c->wo, kh = c->kh, kw = c->kw;  \
        const Py_ssize_t sh = c->sh, sw = c->sw, ph = c->ph, pw = c->pw, dh = c->dh;          \
        const Py_ssize_t dw = c->dw;                                                          \
        if (c->tiles) {                                                                       \
            for (Py_ssize_t p = p0; p < p1; p++)                                              \
                for (Py_ssize_t r = 0; r < ho; r++)                                           \
                    name##_tiles((const T *)c->x + p * h * w, (T *)c->out + p * ho * wo,      \
                                 c->idx + p * ho * wo, r, w, wo);                             \
            return;                                                                           \
        }                                                                                     \
        Py_ssize_t *restrict jr = (Py_ssize_t *)buf; /* per output column: its tap range */   \
        for (Py_ssize_t q = 0; q < wo; q++)                                                   \
            valid_range(q * sw - pw, dw, w, kw, jr + 2 * q, jr + 2 * q + 1);                  \
        for (Py_ssize_t p = p0; p < p1; p++) {                                                \
            const T *restrict x = (const T *)c->x + p * h * w;                                \
            T *restrict out = (T *)c->out + p * ho * wo;                                      \
            int64_t *restrict idx = c->idx + p * ho * wo;                                     \
            for (Py_ssize_t r = 0; r < ho; r++) {                                             \
                const Py_ssize_t r0 = r * sh - ph;                                            \
                Py_ssize_t i0, i1;                                                            \
                valid_range(r0, dh, h, kh, &i0, &i1);                                         \
                for (Py_ssize_t q = 0; q < wo; q++) {                                         \
                    const Py_ssize_t q0 = q * sw - pw, j0 = jr[2 * q], j1 = jr[2 * q + 1];    \
                    if (i0 == i1 || j0 == j1) {                                               \
                        out[r * wo + q] = LOWEST;                                             \
                        idx[r * wo + q] = -1;                                                 \
                        continue;                                                             \
                    }                                                                         \
                    Py_ssize_t best_at = (r0 + i0 * dh) * w + q0 + j0 * dw;                   \
                    V best = TO_V(x[best_at]);                                                \
                    for (Py_ssize_t i = i0; i < i1; i++) {                                    \
                        const Py_ssize_t row = (r0 + i * dh) * w + q0;                        \
                        for (Py_ssize_t j = (i == i0 ? j0 + 1 : j0); j < j1; j++) {           \
                            const Py_ssize_t at = row + j * dw;                               \
                            const V v = TO_V(x[at]);                                          \
                            const int take = (v > best) | (v != v);                           \
                            best = take ? v : best;                                           \
                            best_at = take ? at : best_at;                                    \
                        }                                                                     \
                    }                                                                         \
                    out[r * wo + q] = x[best_at];                                             \
                    idx[r * wo + q] = best_at;                                                \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }

/* tiles_f32(a, b, o, ix, at, w, wo): the f32 tile row by vectors, 16 (AVX-512) or 8 (AVX2)
 * outputs a step: the even and odd taps of rows a and b deinterleaved from two loads each, the
 * same selects in the same order, and the index at + 2q + {0, 1, w, w + 1} of the tap taken.
 * Returns the outputs done (the scalar loop finishes the row). */
#if WB_HAS_AVX512
static inline Py_ssize_t tiles_f32(const float *a, const float *b, float *o, int64_t *ix,
                                   int64_t at, Py_ssize_t w, Py_ssize_t wo) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i taps[3] = {_mm512_set1_epi32(1), _mm512_set1_epi32((int)w),
                             _mm512_set1_epi32((int)w + 1)};
    for (Py_ssize_t q = 0; q < wo; q += 16) {
        const Py_ssize_t n = wo - q < 16 ? wo - q : 16;
        const __mmask16 out = (__mmask16)((1u << n) - 1u);
        const __mmask16 lo = n >= 8 ? 0xFFFFu : (__mmask16)((1u << 2 * n) - 1u);
        const __mmask16 hi = n <= 8 ? 0u : (__mmask16)((1u << 2 * (n - 8)) - 1u);
        const __m512 a0 = _mm512_maskz_loadu_ps(lo, a + 2 * q);
        const __m512 a1 = _mm512_maskz_loadu_ps(hi, a + 2 * q + 16);
        const __m512 b0 = _mm512_maskz_loadu_ps(lo, b + 2 * q);
        const __m512 b1 = _mm512_maskz_loadu_ps(hi, b + 2 * q + 16);
        const __m512 tap[3] = {_mm512_permutex2var_ps(a0, odd, a1),
                               _mm512_permutex2var_ps(b0, even, b1),
                               _mm512_permutex2var_ps(b0, odd, b1)};
        __m512 best = _mm512_permutex2var_ps(a0, even, a1);
        __m512i offset = even; /* 2·lane, then + the taken tap's offset */
        for (int k = 0; k < 3; k++) {
            const __mmask16 take = _mm512_cmp_ps_mask(tap[k], best, _CMP_GT_OQ) |
                                   _mm512_cmp_ps_mask(tap[k], tap[k], _CMP_UNORD_Q);
            best = _mm512_mask_mov_ps(best, take, tap[k]);
            offset = _mm512_mask_add_epi32(offset, take, even, taps[k]);
        }
        _mm512_mask_storeu_ps(o + q, out, best);
        const __m512i base = _mm512_set1_epi64(at + 2 * q);
        const __m512i i0 = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(offset));
        const __m512i i1 = _mm512_cvtepi32_epi64(_mm512_extracti32x8_epi32(offset, 1));
        _mm512_mask_storeu_epi64(ix + q, (__mmask8)out, _mm512_add_epi64(base, i0));
        _mm512_mask_storeu_epi64(ix + q + 8, (__mmask8)(out >> 8), _mm512_add_epi64(base, i1));
    }
    return wo;
}
#elif WB_HAS_AVX2
static inline Py_ssize_t tiles_f32(const float *a, const float *b, float *o, int64_t *ix,
                                   int64_t at, Py_ssize_t w, Py_ssize_t wo) {
    const __m256i lanes = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i taps[3] = {_mm256_set1_epi32(1), _mm256_set1_epi32((int)w),
                             _mm256_set1_epi32((int)w + 1)};
    Py_ssize_t q = 0;
    for (; q + 8 <= wo; q += 8) {
        /* shuffle_ps keeps 128-bit lanes: (x0 x2 y0 y2 | x4 x6 y4 y6), then 64-bit reorder */
#define WB_EVEN(x, y) \
    _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x, y, 0x88)), 0xD8))
#define WB_ODD(x, y) \
    _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x, y, 0xDD)), 0xD8))
        const __m256 a0 = _mm256_loadu_ps(a + 2 * q), a1 = _mm256_loadu_ps(a + 2 * q + 8);
        const __m256 b0 = _mm256_loadu_ps(b + 2 * q), b1 = _mm256_loadu_ps(b + 2 * q + 8);
        const __m256 tap[3] = {WB_ODD(a0, a1), WB_EVEN(b0, b1), WB_ODD(b0, b1)};
        __m256 best = WB_EVEN(a0, a1);
#undef WB_EVEN
#undef WB_ODD
        __m256i offset = lanes;
        for (int k = 0; k < 3; k++) {
            const __m256 take = _mm256_or_ps(_mm256_cmp_ps(tap[k], best, _CMP_GT_OQ),
                                             _mm256_cmp_ps(tap[k], tap[k], _CMP_UNORD_Q));
            best = _mm256_blendv_ps(best, tap[k], take);
            offset = _mm256_blendv_epi8(offset, _mm256_add_epi32(lanes, taps[k]),
                                        _mm256_castps_si256(take));
        }
        _mm256_storeu_ps(o + q, best);
        const __m256i base = _mm256_set1_epi64x(at + 2 * q);
        const __m256i i0 = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(offset));
        const __m256i i1 = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(offset, 1));
        _mm256_storeu_si256((__m256i *)(ix + q), _mm256_add_epi64(base, i0));
        _mm256_storeu_si256((__m256i *)(ix + q + 4), _mm256_add_epi64(base, i1));
    }
    return q;
}
#else
#define tiles_f32(a, b, o, ix, at, w, wo) 0
#endif
/* The other types' tile rows are all scalar. */
#define WB_NO_SIMD(a, b, o, ix, at, w, wo) 0

#define WB_ID(v) (v)
WB_POOL_FN(pool_f32, float, float, WB_ID, -__builtin_inff(), tiles_f32)
WB_POOL_FN(pool_f64, double, double, WB_ID, -__builtin_inf(), WB_NO_SIMD)
WB_POOL_FN(pool_f16, uint16_t, float, wb_f16_to_f32, 0xFC00u, WB_NO_SIMD)
WB_POOL_FN(pool_bf16, uint16_t, float, wb_bf16_to_f32, 0xFF80u, WB_NO_SIMD)
WB_POOL_FN(pool_i64, int64_t, int64_t, WB_ID, INT64_MIN, WB_NO_SIMD)
WB_POOL_FN(pool_i32, int32_t, int32_t, WB_ID, INT32_MIN, WB_NO_SIMD)
WB_POOL_FN(pool_u32, uint32_t, uint32_t, WB_ID, 0, WB_NO_SIMD)
WB_POOL_FN(pool_i16, int16_t, int16_t, WB_ID, INT16_MIN, WB_NO_SIMD)
WB_POOL_FN(pool_i8, int8_t, int8_t, WB_ID, INT8_MIN, WB_NO_SIMD)
WB_POOL_FN(pool_u8, uint8_t, uint8_t, WB_ID, 0, WB_NO_SIMD)

static wb_range_fn pool_fn(int dtype) {
    switch (dtype) {
    case WB_F32: return pool_f32;
    case WB_F64: return pool_f64;
    case WB_F16: return pool_f16;
    case WB_BF16: return pool_bf16;
    case WB_I64: return pool_i64;
    case WB_I32: return pool_i32;
    case WB_U32: return pool_u32;
    case WB_I16: return pool_i16;
    case WB_I8: return pool_i8;
    case WB_U8: return pool_u8;
    default: return NULL;
    }
}

static int ints(PyObject *const *args, Py_ssize_t n, Py_ssize_t *dst, const char *what) {
    for (Py_ssize_t i = 0; i < n; i++) {
        dst[i] = PyLong_AsSsize_t(args[i]);
        if (dst[i] == -1 && PyErr_Occurred()) return -1;
        if (dst[i] < 0 || (i >= 5 && i < 9 && dst[i] < 1) || (i >= 11 && dst[i] < 1)) {
            PyErr_Format(PyExc_ValueError, "%s: argument %zd out of range (%zd)", what, i + 3,
                         dst[i]);
            return -1;
        }
    }
    return 0;
}

/* max_pool2d(x, out, idx, P, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw) */
static PyObject *py_max_pool2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 16) {
        PyErr_Format(PyExc_TypeError, "max_pool2d: expected 16 arguments, found %zd", nargs);
        return NULL;
    }
    Py_ssize_t v[13]; /* P, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw */
    if (ints(args + 3, 13, v, "max_pool2d") < 0) return NULL;
    char *x, *out, *idx;
    int xt, ot, it;
    Py_ssize_t nx, no, ni;
    if (wb_array(args[0], "max_pool2d x", &x, &xt, &nx, 0) < 0 ||
        wb_array(args[1], "max_pool2d out", &out, &ot, &no, 1) < 0 ||
        wb_array(args[2], "max_pool2d idx", &idx, &it, &ni, 1) < 0)
        return NULL;
    const wb_range_fn fn = pool_fn(xt);
    if (!fn || ot != xt || it != WB_I64) {
        PyErr_SetString(PyExc_TypeError, "max_pool2d: x must be a number array (not bool), out "
                                         "of x's dtype, idx int64");
        return NULL;
    }
    const Py_ssize_t planes = v[0], outputs = v[0] * v[3] * v[4];
    if (nx != planes * v[1] * v[2] || no != outputs || ni != outputs) {
        PyErr_SetString(PyExc_ValueError, "max_pool2d: array sizes do not match (P, H, W) and "
                                          "(P, Ho, Wo)");
        return NULL;
    }
    pool_ctx c = {x, out, (int64_t *)idx, v[1], v[2], v[3], v[4],
                  v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], 0};
    c.tiles = c.kh == 2 && c.kw == 2 && c.sh == 2 && c.sw == 2 && !c.ph && !c.pw && c.dh == 1 &&
              c.dw == 1 && 2 * c.ho <= c.h && 2 * c.wo <= c.w && c.w < INT32_MAX / 2;
    const int threads = wb_threads_for(outputs * v[5] * v[6], WB_POOL_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(fn, &c, planes, threads, sizeof(Py_ssize_t) * 2 * (size_t)(v[4] + 1));
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

typedef struct {
    const char *g;      /* (P, L) contiguous, f32 or f64 */
    const int64_t *idx; /* (P, L), into the plane; -1: nowhere */
    char *out;          /* (P, S) contiguous, g's dtype */
    Py_ssize_t l, s;
} scatter_ctx;

#define WB_SCATTER_FN(name, T)                                                                \
    static void name(const void *ctx, int t, Py_ssize_t p0, Py_ssize_t p1, void *buf) {       \
        (void)t;                                                                              \
        (void)buf;                                                                            \
        const scatter_ctx *c = (const scatter_ctx *)ctx;                                      \
        for (Py_ssize_t p = p0; p < p1; p++) {                                                \
            const T *g = (const T *)c->g + p * c->l;                                          \
            const int64_t *idx = c->idx + p * c->l;                                           \
            T *out = (T *)c->out + p * c->s;                                                  \
            memset(out, 0, sizeof(T) * (size_t)c->s);                                         \
            for (Py_ssize_t k = 0; k < c->l; k++)                                             \
                if (idx[k] >= 0 && idx[k] < c->s) out[idx[k]] += g[k];                        \
        }                                                                                     \
    }

WB_SCATTER_FN(scatter_f32, float)
WB_SCATTER_FN(scatter_f64, double)

/* max_pool2d_backward(g, idx, out, P, L, S): out[p, idx[p, k]] += g[p, k], out zeroed first. */
static PyObject *py_max_pool2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "max_pool2d_backward: expected 6 arguments, found %zd",
                     nargs);
        return NULL;
    }
    Py_ssize_t v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = PyLong_AsSsize_t(args[3 + i]);
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
        if (v[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "max_pool2d_backward: negative size");
            return NULL;
        }
    }
    char *g, *idx, *out;
    int gt, it, ot;
    Py_ssize_t ng, ni, no;
    if (wb_array(args[0], "max_pool2d_backward g", &g, &gt, &ng, 0) < 0 ||
        wb_array(args[1], "max_pool2d_backward idx", &idx, &it, &ni, 0) < 0 ||
        wb_array(args[2], "max_pool2d_backward out", &out, &ot, &no, 1) < 0)
        return NULL;
    if ((gt != WB_F32 && gt != WB_F64) || ot != gt || it != WB_I64) {
        PyErr_SetString(PyExc_TypeError, "max_pool2d_backward: g and out must be one of f32, "
                                         "f64; idx int64");
        return NULL;
    }
    if (ng != v[0] * v[1] || ni != ng || no != v[0] * v[2]) {
        PyErr_SetString(PyExc_ValueError, "max_pool2d_backward: array sizes do not match "
                                          "(P, L) and (P, S)");
        return NULL;
    }
    scatter_ctx c = {g, (const int64_t *)idx, out, v[1], v[2]};
    const int threads = wb_threads_for(v[0] * (v[1] + v[2]), WB_POOL_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(gt == WB_F32 ? scatter_f32 : scatter_f64, &c, v[0], threads, 1);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_pool_methods[] = {
    {"max_pool2d", (PyCFunction)(void (*)(void))py_max_pool2d, METH_FASTCALL,
     "max_pool2d(x, out, idx, P, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw): max pooling of "
     "the contiguous (P, H, W) planes of x into out (P, Ho, Wo) and the argmax idx (int64, flat "
     "into H*W; the first maximum, the last NaN, -1 for a window of padding only)."},
    {"max_pool2d_backward", (PyCFunction)(void (*)(void))py_max_pool2d_backward, METH_FASTCALL,
     "max_pool2d_backward(g, idx, out, P, L, S): out (P, S) = 0, then out[p, idx[p, k]] += "
     "g[p, k] for idx >= 0 (f32 or f64)."},
    {NULL, NULL, 0, NULL},
};
