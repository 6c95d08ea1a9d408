/* Attention of a language model's new tokens against its KV cache, read in place.
 *
 *   llm_rope_store(q, k, v, pos, cos, sin, q_norm, k_norm, kb, vc, cells, dims, n_rot, neox, eps)
 *       q (n, Hq, D), k (n, Hkv, D): RMS-normalised per head (weights q_norm / k_norm, when
 *       not None), then the first n_rot dims of each head rotated by the rows pos[i] of the
 *       tables cos / sin (T, n_rot/2): (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), the
 *       pairs being (x[2i], x[2i+1]) or, neox, (x[i], x[i + n_rot/2]). q is rotated in place;
 *       k (in place too) and v (n, Hkv, Dv) are stored into cell cells[i] of the cache.
 *   llm_attention(q, kb, vc, kpos, qpos, out, dims, n_keys, scale, softcap, window)
 *       out (n, Hq, Dv) = softmax(cap(scale q kᵀ) + mask) v per query head, head h of Hq
 *       reading key/value head h / (Hq / Hkv) (grouped-query attention), over the first
 *       n_keys cells. Query i sees cell j when 0 <= kpos[j] <= qpos[i] and, with a window,
 *       qpos[i] - kpos[j] < window; cap(s) = softcap tanh(s / softcap) when softcap > 0. A
 *       query that sees no cell gets zeros.
 *
 * dims = (Hq, Hkv, D, Dv). Cache layout (one slot, C cells, C a multiple of 16): values vc
 * (Hkv, C, Dv) row-major; keys kb (Hkv, C/16, D, 16): blocks of 16 cells, dimension-major
 * inside a block. A block of scores is then D broadcast multiply-adds of one query element by
 * 16 contiguous keys (no horizontal sums) for any number of queries, and it streams 64·D
 * contiguous bytes. One work item is a key/value head and a tile of tokens: its rows (token,
 * query head of the group) share every key and value load; each row keeps its scores over the
 * tile's key range, then a softmax, then the value products. The cache holds f32 or f16 (read
 * into f32, F16C where the ISA has it), everything else is f32; positions int64.
 *
 * Vectors are VW floats wide: 16 with AVX-512 (a key block is one zmm register), else 8.
 * Register tiles use ACC accumulators (24 of the 32 zmm, 12 of the 16 ymm): scores SR = ACC/2
 * rows × 2 vectors of cells, values VR = ACC/4 rows × 4 vectors of columns (then one vector ×
 * SR rows, a ragged tail in scalars); every product is an f32 fused multiply-add, as before.
 * Measured (one Sapphire Rapids core, 12 query / 4 KV heads, D = 64, causal 512-token prompt,
 * separate processes): 13.3-13.9 ms with 8-wide tiles, 8.2-8.4 ms with these (2 threads:
 * 10.3-11.6 -> 6.7-8.3 ms; torch's SDPA 13-15 ms at 1 thread); a decode step (1 query, 512
 * keys) 0.06-0.067 ms either way. The rest of a prompt item (mask, soft-cap, exp, sums) is
 * about a quarter of its time (perf). */
#include "nd.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>

#define KB 16              /* cells per key block */
#define TILE_ROWS 24       /* about this many rows (tokens x group) per work item */
#define ATTN_PAR (1 << 18) /* multiply-adds from which the items run on several threads */

/* vf: VW floats, the widest vector the variant has (16 with AVX-512: one key block; else 8).
 * ACC accumulators fit the register file beside the loads (32 zmm / 16 ymm registers). */
#if defined(__AVX512F__)
#define VW 16
#define ACC 24
#else
#define VW 8
#define ACC 12
#endif
#define SR (ACC / 2) /* rows of a score tile (x 2 vectors of cells) */
#define VR (ACC / 4) /* rows of a value tile of 4 vectors of columns */

typedef float vf __attribute__((vector_size(4 * VW)));
typedef int32_t vi __attribute__((vector_size(4 * VW)));

/* Always inlined: no 32-byte vector crosses a call, whatever the ISA, so gcc's note that
 * their passing differs without AVX does not apply. */
#if !defined(__AVX__) && defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#define VF_INLINE static inline __attribute__((always_inline))
VF_INLINE vf vf_load(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
VF_INLINE void vf_store(float *p, vf v) { memcpy(p, &v, sizeof v); }
VF_INLINE vf vf_set1(float s) { return s - (vf){0}; }
VF_INLINE vf vf_max(vf a, vf b) {
    const vi gt = a > b;
    return (vf)(((vi)a & gt) | ((vi)b & ~gt));
}
/* a * b + c, fused where the ISA has it (gcc does not contract vector code under -std=c11). */
VF_INLINE vf vf_fma(vf a, vf b, vf c) {
#if defined(__AVX512F__)
    return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__AVX__) && defined(__FMA__)
    return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    return a * b + c;
#endif
}

/* ---- argument helpers --------------------------------------------------------------------- */

/* A C-contiguous array of dtype ``want`` (WB_F32 or WB_I64) and ``numel`` elements (-1: any);
 * None allowed when ``optional`` (then *data = NULL). Returns its element count or -1. */
static Py_ssize_t arg_array(PyObject *obj, const char *what, int want, Py_ssize_t numel,
                            int writable, int optional, char **data) {
    *data = NULL;
    if (optional && obj == Py_None) return 0;
    int dtype;
    Py_ssize_t found;
    if (wb_array(obj, what, data, &dtype, &found, writable) < 0) return -1;
    if (dtype != want) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s values", what,
                     want == WB_F32 ? "float32" : "int64");
        return -1;
    }
    if (numel >= 0 && found != numel) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd elements, found %zd", what, numel, found);
        return -1;
    }
    return found;
}

/* dims = (Hq, Hkv, D, Dv), Hkv dividing Hq; C from the key cache's size. */
typedef struct {
    Py_ssize_t hq, hkv, d, dv, c;
    int half; /* the cache holds f16 (else f32) */
} attn_dims;

static int parse_dims(PyObject *tuple, const char *op, attn_dims *a) {
    Py_ssize_t v[WB_MAXDIM];
    const int n = wb_dims(tuple, op, v);
    if (n < 0) return -1;
    if (n != 4 || v[0] <= 0 || v[1] <= 0 || v[2] <= 0 || v[3] <= 0 || v[0] % v[1]) {
        PyErr_Format(PyExc_ValueError, "%s: dims must be (n_head, n_head_kv, head_dim, "
                     "value_dim), positive, n_head_kv dividing n_head", op);
        return -1;
    }
    a->hq = v[0], a->hkv = v[1], a->d = v[2], a->dv = v[3];
    return 0;
}

/* The cache arrays kb (Hkv, C/16, D, 16) and vc (Hkv, C, Dv), both f32 or both f16: sets
 * a->c and a->half. */
static int parse_cache(PyObject *kb, PyObject *vc, int writable, const char *op, attn_dims *a,
                       char **kbd, char **vcd) {
    int kdt, vdt;
    Py_ssize_t nk, nv;
    if (wb_array(kb, op, kbd, &kdt, &nk, writable) < 0 ||
        wb_array(vc, op, vcd, &vdt, &nv, writable) < 0)
        return -1;
    if ((kdt != WB_F32 && kdt != WB_F16) || vdt != kdt) {
        PyErr_Format(PyExc_TypeError, "%s: the key and value caches must both be float32 or "
                     "both float16", op);
        return -1;
    }
    a->half = kdt == WB_F16;
    a->c = nk / (a->hkv * a->d);
    if (nk % (a->hkv * a->d * KB) || a->c == 0 || nv != a->hkv * a->c * a->dv) {
        PyErr_Format(PyExc_ValueError, "%s: caches of %zd and %zd values are not keys "
                     "(n_head_kv=%zd, cells/16, head_dim=%zd, 16) and values (n_head_kv, cells, "
                     "value_dim=%zd)", op, nk, nv, a->hkv, a->d, a->dv);
        return -1;
    }
    return 0;
}

/* VW cache values as f32, from f32 or (half) f16. */
VF_INLINE vf load_cached(const void *base, Py_ssize_t i, const int half) {
    if (!half) return vf_load((const float *)base + i);
    const uint16_t *h = (const uint16_t *)base + i;
#if defined(__AVX512F__)
    return (vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
#elif defined(__F16C__)
    return (vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
#else
    vf v;
    for (int l = 0; l < VW; l++) v[l] = wb_f16_to_f32(h[l]);
    return v;
#endif
}

static inline float cached_at(const void *base, Py_ssize_t i, int half) {
    return half ? wb_f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

static inline void store_cached(void *base, Py_ssize_t i, float x, int half) {
    if (half) ((uint16_t *)base)[i] = wb_f32_to_f16(x);
    else ((float *)base)[i] = x;
}

/* ---- llm_rope_store ----------------------------------------------------------------------- */

static float inv_rms(const float *x, Py_ssize_t n, float eps) {
    float ss = 0.0f;
    for (Py_ssize_t i = 0; i < n; i++) ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / (float)n + eps);
}

/* One head row x (D): normalised by w (when given), then its first n_rot dims rotated. */
static void norm_rotate(float *x, Py_ssize_t D, const float *w, float eps, const float *cs,
                        const float *sn, Py_ssize_t n_rot, int neox) {
    if (w) {
        const float r = inv_rms(x, D, eps);
        for (Py_ssize_t i = 0; i < D; i++) x[i] = x[i] * r * w[i];
    }
    const Py_ssize_t half = n_rot / 2;
    for (Py_ssize_t i = 0; i < half; i++) {
        const Py_ssize_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x1 = x[a], x2 = x[b];
        x[a] = x1 * cs[i] - x2 * sn[i];
        x[b] = x2 * cs[i] + x1 * sn[i];
    }
}

static PyObject *py_rope_store(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *op = "llm_rope_store";
    if (nargs != 15) {
        PyErr_Format(PyExc_TypeError, "%s: expected 15 arguments, found %zd", op, nargs);
        return NULL;
    }
    attn_dims a;
    if (parse_dims(args[11], op, &a) < 0) return NULL;
    const Py_ssize_t n_rot = PyLong_AsSsize_t(args[12]);
    const int neox = PyObject_IsTrue(args[13]);
    const double eps = PyFloat_AsDouble(args[14]);
    if (PyErr_Occurred() || neox < 0) return NULL;
    if (n_rot < 0 || n_rot % 2 || n_rot > a.d) {
        PyErr_Format(PyExc_ValueError, "%s: n_rot = %zd must be even and at most head_dim = %zd",
                     op, n_rot, a.d);
        return NULL;
    }
    char *pd, *qd, *kd, *vd, *cd, *sd, *qn, *kn, *kbd, *vcd, *celld;
    const Py_ssize_t n = arg_array(args[3], "llm_rope_store: pos", WB_I64, -1, 0, 0, &pd);
    if (n < 0) return NULL;
    const Py_ssize_t ntab = arg_array(args[4], "llm_rope_store: cos", WB_F32, -1, 0, 0, &cd);
    if (ntab < 0 ||
        arg_array(args[5], "llm_rope_store: sin", WB_F32, ntab, 0, 0, &sd) < 0 ||
        arg_array(args[0], "llm_rope_store: q", WB_F32, n * a.hq * a.d, 1, 0, &qd) < 0 ||
        arg_array(args[1], "llm_rope_store: k", WB_F32, n * a.hkv * a.d, 1, 0, &kd) < 0 ||
        arg_array(args[2], "llm_rope_store: v", WB_F32, n * a.hkv * a.dv, 0, 0, &vd) < 0 ||
        arg_array(args[6], "llm_rope_store: q_norm", WB_F32, a.d, 0, 1, &qn) < 0 ||
        arg_array(args[7], "llm_rope_store: k_norm", WB_F32, a.d, 0, 1, &kn) < 0 ||
        parse_cache(args[8], args[9], 1, op, &a, &kbd, &vcd) < 0 ||
        arg_array(args[10], "llm_rope_store: cells", WB_I64, n, 0, 0, &celld) < 0)
        return NULL;
    const Py_ssize_t half = n_rot / 2, rows = half ? ntab / half : 0;
    if (half && ntab % half) {
        PyErr_Format(PyExc_ValueError, "%s: cos/sin hold %zd values, not rows of n_rot/2 = %zd",
                     op, ntab, half);
        return NULL;
    }
    const int64_t *pos = (const int64_t *)pd, *cells = (const int64_t *)celld;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (cells[i] < 0 || cells[i] >= a.c || (half && (pos[i] < 0 || pos[i] >= rows))) {
            PyErr_Format(PyExc_ValueError, "%s: token %zd has cell %lld of %zd and position %lld "
                         "of a %zd-row rope table", op, i, (long long)cells[i], a.c,
                         (long long)pos[i], rows);
            return NULL;
        }
    }
    float *q = (float *)qd, *k = (float *)kd;
    char *kb = kbd, *vc = vcd;
    const int f16 = a.half;
    const float *v = (const float *)vd, *cs = (const float *)cd, *sn = (const float *)sd;
    const float *wq = (const float *)qn, *wk = (const float *)kn;
    const int threads = n * (a.hq + a.hkv) * a.d >= (1 << 17) ? wb_get_num_threads() : 1;
    Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (Py_ssize_t i = 0; i < n; i++) {
        const float *ci = cs + pos[i] * half, *si = sn + pos[i] * half;
        for (Py_ssize_t h = 0; h < a.hq; h++)
            norm_rotate(q + (i * a.hq + h) * a.d, a.d, wq, (float)eps, ci, si, n_rot, neox);
        const Py_ssize_t cell = cells[i], blk = cell / KB, lane = cell % KB;
        for (Py_ssize_t h = 0; h < a.hkv; h++) {
            float *kr = k + (i * a.hkv + h) * a.d;
            norm_rotate(kr, a.d, wk, (float)eps, ci, si, n_rot, neox);
            const Py_ssize_t kat = ((h * (a.c / KB) + blk) * a.d) * KB + lane;
            for (Py_ssize_t e = 0; e < a.d; e++) store_cached(kb, kat + e * KB, kr[e], f16);
            const float *vr = v + (i * a.hkv + h) * a.dv;
            const Py_ssize_t vat = (h * a.c + cell) * a.dv;
            for (Py_ssize_t e = 0; e < a.dv; e++) store_cached(vc, vat + e, vr[e], f16);
        }
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* ---- llm_attention ------------------------------------------------------------------------ */

typedef struct {
    attn_dims a;
    const float *q;
    const void *kb, *vc; /* f32 or f16 (a.half) */
    const int64_t *kpos, *qpos;
    float *out;
    Py_ssize_t n, n_keys, tile; /* tokens, cells scanned, tokens per item */
    float scale, softcap;
    int64_t window;
} attn_ctx;

/* Branch-free (& and |, not && and ||): the mask loops over cells vectorise. */
static inline int sees(const attn_ctx *c, int64_t p, int64_t kp) {
    return (kp >= 0) & (kp <= p) & ((c->window <= 0) | (p - kp < c->window));
}

/* s[r][0 .. NK·VW) = Σ_d qs[R0 + r][d] · key[d][b .. b + NK·VW) for r < R: the cells from b
 * of the head whose key blocks start at element kh of the cache. */
VF_INLINE void score_tile(const void *kb, Py_ssize_t kh, Py_ssize_t b, Py_ssize_t D,
                          const float *qs, Py_ssize_t R0, float *s, Py_ssize_t ss, const int R,
                          const int NK, const int half) {
    vf acc[SR][2];
    Py_ssize_t at[2];
    for (int u = 0; u < NK; u++) {
        const Py_ssize_t cell = b + u * VW;
        at[u] = kh + cell / KB * D * KB + cell % KB;
    }
    for (int r = 0; r < R; r++)
        for (int u = 0; u < NK; u++) acc[r][u] = vf_set1(0.0f);
    for (Py_ssize_t d = 0; d < D; d++) {
        vf k[2];
        for (int u = 0; u < NK; u++) k[u] = load_cached(kb, at[u] + d * KB, half);
        for (int r = 0; r < R; r++) {
            const vf qv = vf_set1(qs[(R0 + r) * D + d]);
            for (int u = 0; u < NK; u++) acc[r][u] = vf_fma(qv, k[u], acc[r][u]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int u = 0; u < NK; u++) vf_store(s + (R0 + r) * ss + u * VW, acc[r][u]);
}

/* o[R0 + r][0 .. NV·VW) = Σ_j p[R0 + r][j] · v[j][0 .. NV·VW) over nj value rows starting at
 * element ``at`` of the cache, r < R. */
VF_INLINE void value_tile(const void *vc, Py_ssize_t at, Py_ssize_t Dv, Py_ssize_t nj,
                          const float *p, Py_ssize_t ps, Py_ssize_t R0, float *o, Py_ssize_t os,
                          const int R, const int NV, const int half) {
    vf acc[SR][4];
    for (int r = 0; r < R; r++)
        for (int u = 0; u < NV; u++) acc[r][u] = vf_set1(0.0f);
    for (Py_ssize_t j = 0; j < nj; j++) {
        vf x[4];
        for (int u = 0; u < NV; u++) x[u] = load_cached(vc, at + j * Dv + VW * u, half);
        for (int r = 0; r < R; r++) {
            const vf pv = vf_set1(p[(R0 + r) * ps + j]);
            for (int u = 0; u < NV; u++) acc[r][u] = vf_fma(pv, x[u], acc[r][u]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int u = 0; u < NV; u++) vf_store(o + (R0 + r) * os + VW * u, acc[r][u]);
}

/* call(R) for R = min(rows_left, cap), cap being VR or SR (compile-time row counts). */
#if SR > 6
#define ROWS_7_TO_12(call)                                                                     \
    case 7: call(7); break;                                                                    \
    case 8: call(8); break;                                                                    \
    case 9: call(9); break;                                                                    \
    case 10: call(10); break;                                                                  \
    case 11: call(11); break;
#else
#define ROWS_7_TO_12(call)
#endif
#define BY_ROWS(call, rows_left, cap)                                                          \
    switch (rows_left < cap ? rows_left : cap) {                                               \
    case 1: call(1); break;                                                                    \
    case 2: call(2); break;                                                                    \
    case 3: call(3); break;                                                                    \
    case 4: call(4); break;                                                                    \
    case 5: call(5); break;                                                                    \
    case 6: call(6); break;                                                                    \
    ROWS_7_TO_12(call)                                                                         \
    default: call(cap); break;                                                                 \
    }

/* Scores s (rows × span) of the item's rows over cells [lo, lo + span), in tiles of SR rows
 * × 2 vectors of cells (a last tile of one vector when span is an odd number of vectors). */
static void item_scores(const attn_ctx *c, Py_ssize_t h, Py_ssize_t lo, Py_ssize_t span,
                        Py_ssize_t rows, const float *qs, float *s) {
    const Py_ssize_t D = c->a.d, kh = h * (c->a.c / KB) * D * KB;
    for (Py_ssize_t b = 0; b < span; b += 2 * VW)
        for (Py_ssize_t r0 = 0; r0 < rows; r0 += SR) {
            const Py_ssize_t left = rows - r0;
#define SCORE(R, NK)                                                                           \
    (c->a.half ? score_tile(c->kb, kh, lo + b, D, qs, r0, s + b, span, R, NK, 1)              \
               : score_tile(c->kb, kh, lo + b, D, qs, r0, s + b, span, R, NK, 0))
#define SCORE2(R) SCORE(R, 2)
#define SCORE1(R) SCORE(R, 1)
            if (b + 2 * VW <= span) BY_ROWS(SCORE2, left, SR)
            else BY_ROWS(SCORE1, left, SR)
#undef SCORE1
#undef SCORE2
#undef SCORE
        }
}

/* Row r of s: masked by madd, soft-capped, exponentiated against its maximum (unnormalised);
 * returns the sum of the row (0 when the row sees nothing, then zeros). */
static float softmax_row(const attn_ctx *c, float *sr, const float *madd, Py_ssize_t span) {
    if (c->softcap > 0.0f) {
        const float cap = c->softcap, inv = 1.0f / c->softcap;
        for (Py_ssize_t j = 0; j < span; j++) sr[j] = cap * wb_tanhf(sr[j] * inv);
    }
    vf vmax = vf_set1(-INFINITY);
    for (Py_ssize_t j = 0; j < span; j += VW) { /* span is a multiple of 16 */
        const vf z = vf_load(sr + j) + vf_load(madd + j);
        vf_store(sr + j, z);
        vmax = vf_max(vmax, z);
    }
    float mx = vmax[0];
    for (int l = 1; l < VW; l++) mx = vmax[l] > mx ? vmax[l] : mx;
    if (mx == -INFINITY) {
        memset(sr, 0, sizeof(float) * (size_t)span);
        return 0.0f;
    }
    for (Py_ssize_t j = 0; j < span; j++) sr[j] = wb_expf(sr[j] - mx);
    vf vsum = vf_set1(0.0f);
    for (Py_ssize_t j = 0; j < span; j += VW) vsum += vf_load(sr + j);
    float sum = 0.0f;
    for (int l = 0; l < VW; l++) sum += vsum[l];
    return sum;
}

/* o (rows × dvp) = p (rows × span) · values of head h, cells [lo, lo + span): 4 vectors of
 * columns × VR rows while they fill, then one vector × SR rows, a ragged tail in scalars. */
static void item_values(const attn_ctx *c, Py_ssize_t h, Py_ssize_t lo, Py_ssize_t span,
                        Py_ssize_t rows, const float *p, float *o, Py_ssize_t dvp) {
    const Py_ssize_t Dv = c->a.dv, vh = (h * c->a.c + lo) * Dv;
    Py_ssize_t done = 0;
#define VALUE(R, NV)                                                                           \
    (c->a.half ? value_tile(c->vc, vh + done, Dv, span, p, span, r0, o + done, dvp, R, NV, 1) \
               : value_tile(c->vc, vh + done, Dv, span, p, span, r0, o + done, dvp, R, NV, 0))
#define VALUE4(R) VALUE(R, 4)
#define VALUE1(R) VALUE(R, 1)
    for (; done + 4 * VW <= Dv; done += 4 * VW)
        for (Py_ssize_t r0 = 0; r0 < rows; r0 += VR) {
            const Py_ssize_t left = rows - r0;
            BY_ROWS(VALUE4, left, VR)
        }
    for (; done + VW <= Dv; done += VW)
        for (Py_ssize_t r0 = 0; r0 < rows; r0 += SR) {
            const Py_ssize_t left = rows - r0;
            BY_ROWS(VALUE1, left, SR)
        }
#undef VALUE1
#undef VALUE4
#undef VALUE
    for (Py_ssize_t r = 0; r < rows; r++)
        for (Py_ssize_t e = done; e < Dv; e++) {
            float acc = 0.0f;
            for (Py_ssize_t j = 0; j < span; j++)
                acc += p[r * span + j] * cached_at(c->vc, vh + j * Dv + e, c->a.half);
            o[r * dvp + e] = acc;
        }
}

/* One work item: key/value head h, tokens [t0, t1). Scratch: qs (rows × D), s (rows × span),
 * o (rows × Dv, 16-padded), sums (rows), madd (span). */
static void attend_item(const attn_ctx *c, Py_ssize_t h, Py_ssize_t t0, Py_ssize_t t1,
                        float *qs, float *s, float *o, float *sums, float *madd) {
    const attn_dims *a = &c->a;
    const Py_ssize_t G = a->hq / a->hkv, D = a->d, Dv = a->dv, rows = (t1 - t0) * G;
    const Py_ssize_t dvp = (Dv + 15) / 16 * 16;
    int64_t pmin = c->qpos[t0], pmax = c->qpos[t0];
    for (Py_ssize_t t = t0; t < t1; t++) {
        pmin = c->qpos[t] < pmin ? c->qpos[t] : pmin;
        pmax = c->qpos[t] > pmax ? c->qpos[t] : pmax;
    }
    /* The cells any of these queries sees, rounded out to key blocks. */
    Py_ssize_t lo = c->n_keys, hi = 0;
    for (Py_ssize_t j = 0; j < c->n_keys; j++) {
        const int64_t kp = c->kpos[j];
        if (kp >= 0 && kp <= pmax && (c->window <= 0 || pmin - kp < c->window)) {
            lo = j < lo ? j : lo;
            hi = j + 1;
        }
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        const Py_ssize_t t = t0 + r / G, head = h * G + r % G;
        const float *qr = c->q + (t * a->hq + head) * D;
        for (Py_ssize_t d = 0; d < D; d++) qs[r * D + d] = qr[d] * c->scale;
    }
    if (hi <= lo) { /* nothing visible */
        for (Py_ssize_t r = 0; r < rows; r++) {
            const Py_ssize_t t = t0 + r / G, head = h * G + r % G;
            memset(c->out + (t * a->hq + head) * Dv, 0, sizeof(float) * (size_t)Dv);
        }
        return;
    }
    lo = lo / KB * KB;
    hi = (hi + KB - 1) / KB * KB;
    const Py_ssize_t span = hi - lo;
    item_scores(c, h, lo, span, rows, qs, s);
    /* The additive mask is built once per token, for the G rows of its group. */
    for (Py_ssize_t r = 0; r < rows; r++) {
        if (r % G == 0) {
            const int64_t p = c->qpos[t0 + r / G];
            for (Py_ssize_t j = 0; j < span; j++)
                madd[j] = sees(c, p, c->kpos[lo + j]) ? 0.0f : -INFINITY;
        }
        sums[r] = softmax_row(c, s + r * span, madd, span);
    }
    item_values(c, h, lo, span, rows, s, o, dvp);
    for (Py_ssize_t r = 0; r < rows; r++) {
        const Py_ssize_t t = t0 + r / G, head = h * G + r % G;
        float *dst = c->out + (t * a->hq + head) * Dv;
        const float inv = sums[r] > 0.0f ? 1.0f / sums[r] : 0.0f;
        for (Py_ssize_t e = 0; e < Dv; e++) dst[e] = o[r * dvp + e] * inv;
    }
}

static int attend(const attn_ctx *c, int threads) {
    const attn_dims *a = &c->a;
    const Py_ssize_t G = a->hq / a->hkv, tiles = (c->n + c->tile - 1) / c->tile;
    const Py_ssize_t items = a->hkv * tiles, rows = c->tile * G;
    const Py_ssize_t span = (c->n_keys + 2 * KB) / KB * KB, dvp = (a->dv + 15) / 16 * 16;
    if (threads > items) threads = (int)items;
    int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
    {
        float *buf = malloc(sizeof(float) * (size_t)(rows * (a->d + span + dvp + 1) + span));
        if (!buf) failed = 1;
#pragma omp for schedule(static)
        for (Py_ssize_t it = 0; it < items; it++) {
            if (!buf) continue;
            const Py_ssize_t h = it % a->hkv, t0 = (it / a->hkv) * c->tile;
            const Py_ssize_t t1 = t0 + c->tile < c->n ? t0 + c->tile : c->n;
            float *qs = buf, *s = qs + rows * a->d, *o = s + rows * span, *sums = o + rows * dvp;
            attend_item(c, h, t0, t1, qs, s, o, sums, sums + rows);
        }
        free(buf);
    }
    return failed ? -1 : 0;
}

static PyObject *py_attention(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *op = "llm_attention";
    if (nargs != 11) {
        PyErr_Format(PyExc_TypeError, "%s: expected 11 arguments, found %zd", op, nargs);
        return NULL;
    }
    attn_ctx c;
    if (parse_dims(args[6], op, &c.a) < 0) return NULL;
    c.n_keys = PyLong_AsSsize_t(args[7]);
    const double scale = PyFloat_AsDouble(args[8]), softcap = PyFloat_AsDouble(args[9]);
    c.window = PyLong_AsLongLong(args[10]);
    if (PyErr_Occurred()) return NULL;
    c.scale = (float)scale, c.softcap = (float)softcap;
    char *qd, *kbd, *vcd, *kpd, *qpd, *od;
    c.n = arg_array(args[4], "llm_attention: qpos", WB_I64, -1, 0, 0, &qpd);
    if (c.n < 0 || parse_cache(args[1], args[2], 0, op, &c.a, &kbd, &vcd) < 0 ||
        arg_array(args[0], "llm_attention: q", WB_F32, c.n * c.a.hq * c.a.d, 0, 0, &qd) < 0 ||
        arg_array(args[3], "llm_attention: kpos", WB_I64, c.a.c, 0, 0, &kpd) < 0 ||
        arg_array(args[5], "llm_attention: out", WB_F32, c.n * c.a.hq * c.a.dv, 1, 0, &od) < 0)
        return NULL;
    if (c.n_keys < 0 || c.n_keys > c.a.c) {
        PyErr_Format(PyExc_ValueError, "%s: n_keys = %zd is outside the cache's %zd cells", op,
                     c.n_keys, c.a.c);
        return NULL;
    }
    if (c.n == 0) Py_RETURN_NONE;
    c.q = (const float *)qd, c.kb = kbd, c.vc = vcd;
    c.kpos = (const int64_t *)kpd, c.qpos = (const int64_t *)qpd, c.out = (float *)od;
    const Py_ssize_t G = c.a.hq / c.a.hkv;
    c.tile = TILE_ROWS / G > 0 ? TILE_ROWS / G : 1;
    const double work = (double)c.n * (double)c.n_keys * (double)c.a.hq * (double)(c.a.d + c.a.dv);
    const int threads = work >= ATTN_PAR ? wb_get_num_threads() : 1;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = attend(&c, threads);
    Py_END_ALLOW_THREADS
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_llm_attention_methods[] = {
    {"llm_rope_store", (PyCFunction)(void (*)(void))py_rope_store, METH_FASTCALL,
     "llm_rope_store(q, k, v, pos, cos, sin, q_norm, k_norm, kb, vc, cells, dims, n_rot, neox, "
     "eps): q/k head norms and rope in place; k and v stored into the cache cells."},
    {"llm_attention", (PyCFunction)(void (*)(void))py_attention, METH_FASTCALL,
     "llm_attention(q, kb, vc, kpos, qpos, out, dims, n_keys, scale, softcap, window): "
     "softmax(cap(scale q k^T) + mask) v over the cached cells, grouped-query heads."},
    {NULL, NULL, 0, NULL},
};
