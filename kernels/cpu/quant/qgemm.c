/* Many activation rows at once: a register-blocked integer micro-kernel that serves every
 * block type through the row decoder (decode.c), on AVX-512 VNNI and on AVX2.
 *
 * Threads take panels of NC weight rows. A panel is decoded once into levels u = q + o (u8),
 * interleaved so that one vector holds 4 consecutive levels of each of the NC rows (int32
 * lane c = row c), and float scales per sub-block j of S elements and row c: fs = d[b] sc[j]
 * (and the mins' fm = dm[b] mn[j], or dm[b]). The activations are packed once per call in
 * tiles of MR rows the same way (4 levels of each row side by side), so one multiply of a
 * panel vector with one row's 4 levels broadcast makes 4 NC products into NC outputs:
 *
 *     y[r, c] = sum_b da_r[b] sum_{j in b} fs[j, c] (u_c,j . qa_r,j - o sum qa_r,j)
 *               + mins term
 *
 * The sum for each sub-block is exact int32, started at -o sum(qa_r,j); it meets its float
 * scale once. A tile's MR x NC outputs stay in registers over all of k. S is 32 where a
 * type's scale covers 32 levels, 16 for Q2_K, Q3_K, Q6_K.
 *
 * AVX-512 VNNI: NC = 16, MR = 8, o = 128 for every type, one vpdpbusd per vector and row.
 * AVX2: NC = 8, MR = 4. vpmaddubsw (u8 x s8, pairs summed into saturating int16) takes the
 * place of vpdpbusd, so o is the smallest offset that makes a type's levels unsigned (Q4_0
 * 8, Q5_0 16, Q3_K 4, Q6_K 32, the rest 0) and several products add up in int16 before
 * vpmaddwd widens them: at most 2^15 / (2 * 127 * u_max) of them (u_max 15: 8, 31: 4,
 * 63: 2), so nothing saturates (activation levels are within +-127). Types with 8-bit
 * levels (Q8_0, Q8_1, Q8_K, IQ4_NL, IQ4_XS) keep o = 0 and multiply |q| by qa with q's sign
 * (vpsignb): |q| <= 128, so a pair is at most 2 * 128 * 127 < 2^15.
 *
 * The float sums' order is this file's own: results match the other kernels to f32
 * rounding, not bits. Other ISAs return 1 (the caller keeps its own loops).
 * Measured (Intel Xeon, AVX-512 VNNI, 2 threads, x (64, 4096) @ W.T, W 4096 x 4096; f32
 * matmul 22-24 ms in the same runs): Q4_0 24 -> 8.1 ms, Q4_K 8.5, Q6_K 21 -> 9.5, Q2_K 32 ->
 * 10.6 (benchmarks/bench_quantized.py qmatmul/<type>/b64). AMD EPYC (Zen 3, AVX2), the same
 * shapes, f32 matmul 16-20 ms, before IN_REGISTER: Q4_0 31 -> 8.7 ms, Q8_0 32 -> 11.7, Q4_K
 * 24 -> 9.6, Q6_K 19 -> 9.5, IQ4_NL 33 -> 12.0. */
#include "transpose.h"

#include <stdlib.h>

#define INLINE static inline __attribute__((always_inline))

#if WB_HAS_AVX512 && WB_HAS_AVX512VNNI
#define NC 16 /* weight rows a panel: one int32 lane each */
#define MR 8  /* activation rows a tile */
#elif WB_HAS_AVX2
#define NC 8
#define MR 4
#endif

#ifdef NC

/* Elements a float scale covers. */
static int sub_block(const wb_qtype *t) {
    return t->type_id == WB_Q2_K || t->type_id == WB_Q3_K || t->type_id == WB_Q6_K ? 16 : 32;
}

/* o: the offset that makes the panel's levels u8 (see the header). */
static int level_offset(const wb_qtype *t) {
#if NC == 16
    (void)t;
    return 128;
#else
    switch (t->type_id) {
    case WB_Q4_0: return 8;
    case WB_Q5_0: return 16;
    case WB_Q3_K: return 4;
    case WB_Q6_K: return 32;
    default: return 0;
    }
#endif
}

/* A decoded panel: u (k / 4 vectors of 4 NC bytes), fs (k / S x NC), fm (mins: k / S x NC
 * for WB_MINS_SUB, k / B x NC for WB_MINS_SUM). */
typedef struct {
    uint8_t *u;
    float *fs, *fm;
} panel;

/* One tile of MR activation rows, interleaved: q (k / 4 x MR x 4 bytes), init (k / S x MR:
 * -o sum qa), bs (k / S x MR: sum qa as float, WB_MINS_SUB), d (k / B x MR), s (k / 32 x
 * MR, WB_MINS_SUM). Rows past m are zeros. */
typedef struct {
    int8_t *q;
    int32_t *init;
    float *bs, *d, *s;
} tile;

#if NC == 16
/* u: the k levels of the NC rows w[c].q, 4 of each row per vector, plus o (mod 256). */
static void interleave(const wb_wrow *w, int64_t k, int o, uint8_t *u) {
    const __m512i off = _mm512_set1_epi8((char)o);
    for (int64_t e = 0; e < k; e += 64) {
        const __mmask64 in = k - e >= 64 ? ~0ull : (1ull << (k - e)) - 1;
        __m512i r[16];
        for (int c = 0; c < NC; c++) r[c] = _mm512_maskz_loadu_epi8(in, w[c].q + e);
        wb_transpose16(r);
        const int groups = k - e >= 64 ? 16 : (int)(k - e) / 4;
        for (int g = 0; g < groups; g++)
            _mm512_store_si512(u + (e + 4 * g) * NC, _mm512_add_epi8(r[g], off));
    }
}
#else
/* The same for 8 rows, 32 levels a step (k is a multiple of 32). */
static void interleave(const wb_wrow *w, int64_t k, int o, uint8_t *u) {
    const __m256i off = _mm256_set1_epi8((char)o);
    for (int64_t e = 0; e < k; e += 32) {
        __m256i r[8], t[8];
        for (int c = 0; c < 8; c++) r[c] = _mm256_loadu_si256((const __m256i *)(w[c].q + e));
        for (int i = 0; i < 4; i++) {
            t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 2; i++) { /* r[4i + x], 128-bit lane L: dword 4L + x of 4 rows */
            r[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
            r[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
            r[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
            r[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
        }
        for (int x = 0; x < 4; x++) {
            t[x] = _mm256_permute2x128_si256(r[x], r[4 + x], 0x20);
            t[4 + x] = _mm256_permute2x128_si256(r[x], r[4 + x], 0x31);
        }
        for (int g = 0; g < 8; g++)
            _mm256_store_si256((__m256i *)(u + (e + 4 * g) * NC), _mm256_add_epi8(t[g], off));
    }
}
#endif

/* Weight rows [0, cols) of the panel at raw; rows >= cols keep what they held (their
 * outputs are never stored). */
static void decode_panel(const wb_qtype *t, const uint8_t *raw, int64_t row_bytes, int cols,
                         int64_t k, wb_wrow *w, panel *p) {
    const int S = sub_block(t), B = t->scale_block;
    for (int c = 0; c < cols; c++) wb_decode_row(t, raw + c * row_bytes, k, &w[c]);
    interleave(w, k, level_offset(t), p->u);
    for (int64_t j = 0; j < k / S; j++) {
        const int64_t b = j * S / B, j16 = j * S / 16;
        for (int c = 0; c < NC; c++) {
            p->fs[NC * j + c] = t->has_sc ? w[c].d[b] * (float)w[c].sc8[8 * j16] : w[c].d[b];
            if (t->mins == WB_MINS_SUB) p->fm[NC * j + c] = w[c].dm[b] * (float)w[c].mn[j16];
        }
    }
    if (t->mins == WB_MINS_SUM)
        for (int64_t b = 0; b < k / B; b++)
            for (int c = 0; c < NC; c++) p->fm[NC * b + c] = w[c].dm[b];
}

/* Row r's 4 levels of group g, as one int32 to broadcast. */
INLINE int32_t levels4(const int8_t *x, int g, int r) {
    int32_t x4;
    memcpy(&x4, x + 4 * (MR * g + r), 4);
    return x4;
}

#if NC == 16
/* acc[r] = the tile's MR x NC products over all of k (S, B, mins: compile-time constants;
 * step and wide are AVX2's). */
INLINE void tile_dot(const int S, const int B, const int mins, const int step, const int wide,
                     const panel *p, const tile *a, int64_t k, __m512 *acc) {
    (void)step, (void)wide;
    for (int r = 0; r < MR; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < k / B; b++) {
        __m512 part[MR];
        for (int js = 0; js < B / S; js++) {
            const int64_t j = b * (B / S) + js;
            const uint8_t *u = p->u + j * S * NC;
            const int8_t *x = a->q + j * S * MR;
            __m512i sum[MR];
            for (int r = 0; r < MR; r++) sum[r] = _mm512_set1_epi32(a->init[MR * j + r]);
            for (int g = 0; g < S / 4; g++) {
                const __m512i v = _mm512_load_si512(u + 64 * g);
                for (int r = 0; r < MR; r++)
                    sum[r] = _mm512_dpbusd_epi32(sum[r], v, _mm512_set1_epi32(levels4(x, g, r)));
            }
            const __m512 fs = _mm512_load_ps(p->fs + NC * j);
            for (int r = 0; r < MR; r++) {
                const __m512 i = _mm512_cvtepi32_ps(sum[r]);
                part[r] = js == 0 ? _mm512_mul_ps(i, fs) : _mm512_fmadd_ps(i, fs, part[r]);
            }
            if (mins == WB_MINS_SUB) {
                const __m512 fm = _mm512_load_ps(p->fm + NC * j);
                for (int r = 0; r < MR; r++)
                    part[r] = _mm512_fmadd_ps(fm, _mm512_set1_ps(a->bs[MR * j + r]), part[r]);
            }
        }
        for (int r = 0; r < MR; r++)
            acc[r] = _mm512_fmadd_ps(part[r], _mm512_set1_ps(a->d[MR * b + r]), acc[r]);
        if (mins == WB_MINS_SUM) {
            const __m512 fm = _mm512_load_ps(p->fm + NC * b);
            for (int r = 0; r < MR; r++)
                acc[r] = _mm512_fmadd_ps(fm, _mm512_set1_ps(a->s[MR * b + r]), acc[r]);
        }
    }
}

typedef __m512 vacc;

/* Columns [0, cols) of one output row. */
INLINE void store_cols(float *out, vacc v, int cols) {
    _mm512_mask_storeu_ps(out, (__mmask16)((1u << cols) - 1), v);
}
#else
/* An empty asm that holds v in a register here: without it gcc reassociates the integer
 * sums below into trees, computes every product of a step first and spills them (1 thread,
 * 256 x 2048 @ 2048 x 2048: Q4_0 62 -> 81 GMAC/s, Q4_K 57 -> 68, Q8_0 45 -> 50). */
#define IN_REGISTER(v) __asm__("" : "+x"(v))

/* The same on AVX2: step products summed in int16 before each vpmaddwd; wide: sign
 * transfer for 8-bit levels. Every sub-block's sum meets fs d_r at once (16 registers hold
 * no partial sums per super-block). */
INLINE void tile_dot(const int S, const int B, const int mins, const int step, const int wide,
                     const panel *p, const tile *a, int64_t k, __m256 *acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < MR; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t j = 0; j < k / S; j++) {
        const int64_t b = j * S / B;
        const uint8_t *u = p->u + j * S * NC;
        const int8_t *x = a->q + j * S * MR;
        __m256i sum[MR];
        for (int r = 0; r < MR; r++) sum[r] = _mm256_set1_epi32(a->init[MR * j + r]);
        for (int g0 = 0; g0 < S / 4; g0 += step) {
            __m256i s16[MR];
            for (int g = g0; g < g0 + step; g++) {
                const __m256i v = _mm256_load_si256((const __m256i *)(u + 32 * g));
                const __m256i va = wide ? _mm256_abs_epi8(v) : v;
                for (int r = 0; r < MR; r++) {
                    __m256i xr = _mm256_set1_epi32(levels4(x, g, r));
                    if (wide) xr = _mm256_sign_epi8(xr, v);
                    const __m256i pr = _mm256_maddubs_epi16(va, xr);
                    s16[r] = g == g0 ? pr : _mm256_add_epi16(s16[r], pr);
                    IN_REGISTER(s16[r]);
                }
            }
            for (int r = 0; r < MR; r++) {
                sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(s16[r], ones));
                IN_REGISTER(sum[r]);
            }
        }
        const __m256 fs = _mm256_load_ps(p->fs + NC * j);
        for (int r = 0; r < MR; r++) {
            const __m256 f = _mm256_mul_ps(fs, _mm256_set1_ps(a->d[MR * b + r]));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), f, acc[r]);
        }
        if (mins == WB_MINS_SUB) {
            const __m256 fm = _mm256_load_ps(p->fm + NC * j);
            for (int r = 0; r < MR; r++) {
                const float bd = a->bs[MR * j + r] * a->d[MR * b + r];
                acc[r] = _mm256_fmadd_ps(fm, _mm256_set1_ps(bd), acc[r]);
            }
        }
        if (mins == WB_MINS_SUM && (j + 1) * S % B == 0) {
            const __m256 fm = _mm256_load_ps(p->fm + NC * b);
            for (int r = 0; r < MR; r++)
                acc[r] = _mm256_fmadd_ps(fm, _mm256_set1_ps(a->s[MR * b + r]), acc[r]);
        }
    }
}

typedef __m256 vacc;

INLINE void store_cols(float *out, vacc v, int cols) {
    if (cols == NC) {
        _mm256_storeu_ps(out, v);
        return;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(out, _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane), v);
}
#endif

typedef void (*tiles_fn)(const panel *p, const tile *tiles, int64_t m, int64_t k, int64_t n,
                         int64_t c0, int cols, float *out);

/* Every tile times the panel, into out's columns [c0, c0 + cols). */
INLINE void all_tiles(const int S, const int B, const int mins, const int step, const int wide,
                      const panel *p, const tile *tiles, int64_t m, int64_t k, int64_t n,
                      int64_t c0, int cols, float *out) {
    for (int64_t r0 = 0; r0 < m; r0 += MR) {
        vacc acc[MR];
        tile_dot(S, B, mins, step, wide, p, &tiles[r0 / MR], k, acc);
        for (int r = 0; r < MR && r0 + r < m; r++)
            store_cols(out + (r0 + r) * n + c0, acc[r], cols);
    }
}

#define TILES_FN(name, S, B, mins, step, wide)                                               \
    static void name(const panel *p, const tile *tiles, int64_t m, int64_t k, int64_t n,     \
                     int64_t c0, int cols, float *out) {                                     \
        all_tiles(S, B, mins, step, wide, p, tiles, m, k, n, c0, cols, out);                 \
    }

#if NC == 16
TILES_FN(tiles_32, 32, 32, WB_MINS_NONE, 1, 0)
TILES_FN(tiles_32_sum, 32, 32, WB_MINS_SUM, 1, 0)
TILES_FN(tiles_256, 32, 256, WB_MINS_NONE, 1, 0)
TILES_FN(tiles_256_sub, 32, 256, WB_MINS_SUB, 1, 0)
TILES_FN(tiles_256_16, 16, 256, WB_MINS_NONE, 1, 0)
TILES_FN(tiles_256_16_sub, 16, 256, WB_MINS_SUB, 1, 0)

static tiles_fn find_tiles(const wb_qtype *t) {
    const int S = sub_block(t);
    if (t->scale_block == 32) return t->mins == WB_MINS_SUM ? tiles_32_sum : tiles_32;
    if (S == 16) return t->mins == WB_MINS_SUB ? tiles_256_16_sub : tiles_256_16;
    return t->mins == WB_MINS_SUB ? tiles_256_sub : tiles_256;
}
#else
/* One per type: its sub-block, scale block, mins, int16 step (2^15 / (2 * 127 * u_max)
 * capped at the sub-block's groups) and level width. */
TILES_FN(tiles_q4_0, 32, 32, WB_MINS_NONE, 8, 0)
TILES_FN(tiles_q4_1, 32, 32, WB_MINS_SUM, 8, 0)
TILES_FN(tiles_q5_0, 32, 32, WB_MINS_NONE, 4, 0)
TILES_FN(tiles_q5_1, 32, 32, WB_MINS_SUM, 4, 0)
TILES_FN(tiles_q8_32, 32, 32, WB_MINS_NONE, 1, 1)
TILES_FN(tiles_q2_k, 16, 256, WB_MINS_SUB, 4, 0)
TILES_FN(tiles_q3_k, 16, 256, WB_MINS_NONE, 4, 0)
TILES_FN(tiles_q4_k, 32, 256, WB_MINS_SUB, 8, 0)
TILES_FN(tiles_q5_k, 32, 256, WB_MINS_SUB, 4, 0)
TILES_FN(tiles_q6_k, 16, 256, WB_MINS_NONE, 2, 0)
TILES_FN(tiles_q8_256, 32, 256, WB_MINS_NONE, 1, 1)

static tiles_fn find_tiles(const wb_qtype *t) {
    switch (t->type_id) {
    case WB_Q4_0: return tiles_q4_0;
    case WB_Q4_1: return tiles_q4_1;
    case WB_Q5_0: return tiles_q5_0;
    case WB_Q5_1: return tiles_q5_1;
    case WB_Q8_0: case WB_Q8_1: case WB_IQ4_NL: return tiles_q8_32;
    case WB_Q2_K: return tiles_q2_k;
    case WB_Q3_K: return tiles_q3_k;
    case WB_Q4_K: return tiles_q4_k;
    case WB_Q5_K: return tiles_q5_k;
    case WB_Q6_K: return tiles_q6_k;
    case WB_Q8_K: case WB_IQ4_XS: return tiles_q8_256;
    default: return NULL;
    }
}
#endif

/* Sizes of a tile's sections, in bytes (each a multiple of 64). */
typedef struct {
    size_t q, init, bs, d, s;
} tile_sizes;

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

static tile_sizes sizes_of(const wb_qtype *t, int64_t k) {
    const size_t S = (size_t)sub_block(t), B = (size_t)t->scale_block, K = (size_t)k;
    tile_sizes z = {round64(K * MR), round64(K / S * MR * 4), 0, round64(K / B * MR * 4), 0};
    if (t->mins == WB_MINS_SUB) z.bs = z.init;
    if (t->mins == WB_MINS_SUM) z.s = round64(K / 32 * MR * 4);
    return z;
}

/* The activations in tiles (one zeroed allocation, returned to free; NULL: out of memory). */
static void *pack_tiles(const wb_qtype *t, int64_t k, int64_t m, const int8_t *q,
                        const float *d, const float *s, const int16_t *bsum, tile *tiles) {
    const tile_sizes z = sizes_of(t, k);
    const size_t per = z.q + z.init + z.bs + z.d + z.s;
    const int64_t ntiles = (m + MR - 1) / MR, S = sub_block(t), B = t->scale_block;
    const int o = level_offset(t);
    char *base = aligned_alloc(64, per * (size_t)ntiles);
    if (!base) return NULL;
    memset(base, 0, per * (size_t)ntiles);
    for (int64_t i = 0; i < ntiles; i++) {
        char *p = base + per * (size_t)i;
        tile *a = &tiles[i];
        a->q = (int8_t *)p;
        a->init = (int32_t *)(p + z.q);
        a->bs = z.bs ? (float *)(p + z.q + z.init) : NULL;
        a->d = (float *)(p + z.q + z.init + z.bs);
        a->s = z.s ? (float *)(p + z.q + z.init + z.bs + z.d) : NULL;
        for (int r = 0; r < MR && MR * i + r < m; r++) {
            const int64_t row = MR * i + r;
            const int8_t *qr = q + row * k;
            const int16_t *br = bsum + row * k / 16;
            for (int64_t g = 0; g < k / 4; g++) memcpy(a->q + 4 * (MR * g + r), qr + 4 * g, 4);
            for (int64_t j = 0; j < k / S; j++) {
                const int sum = S == 16 ? br[j] : br[2 * j] + br[2 * j + 1];
                a->init[MR * j + r] = -o * sum;
                if (a->bs) a->bs[MR * j + r] = (float)sum;
            }
            for (int64_t b = 0; b < k / B; b++) a->d[MR * b + r] = d[row * k / B + b];
            if (a->s)
                for (int64_t b = 0; b < k / 32; b++) a->s[MR * b + r] = s[row * k / 32 + b];
        }
    }
    return base;
}

/* Fewer activation rows go to the caller's loops. AVX2's crossovers with them, measured at
 * 1 thread on a 768 x 3072 weight (us a row, loops -> tiles): Q4_0 at 5 rows 126 -> 101,
 * Q8_0 124 -> 128, at 6 rows 120 -> 84 and 116 -> 105; Q4_K at 6 rows 95 -> 102, at 8 rows
 * 87 -> 75; Q6_K at 8 rows 71 -> 82, at 12 rows 69 -> 65. */
static int64_t min_rows(const wb_qtype *t) {
#if NC == 16
    (void)t;
    return 0;
#else
    return t->scale_block == 32 ? 6 : 12;
#endif
}

int wb_qgemm(const wb_qtype *t, const uint8_t *raw, int64_t n, int64_t k, int64_t m,
             const int8_t *q, const float *d, const float *s, const int16_t *bsum, float *out,
             int threads) {
    if (m < min_rows(t)) return 1;
    const int64_t ntiles = (m + MR - 1) / MR, npanels = (n + NC - 1) / NC;
    const int64_t row_bytes = k / t->block * t->bytes, S = sub_block(t);
    const size_t su = round64((size_t)k * NC), sf = round64((size_t)(k / S) * NC * 4);
    tile *tiles = malloc(sizeof(tile) * (size_t)ntiles);
    void *acts = tiles ? pack_tiles(t, k, m, q, d, s, bsum, tiles) : NULL;
    if (!acts) {
        free(tiles);
        return -1;
    }
    const tiles_fn run = find_tiles(t);
    int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
    {
        wb_wrow w[NC];
        void *rows[NC] = {0};
        int ok = 1;
        for (int c = 0; c < NC; c++) ok &= (rows[c] = wb_alloc_row(t, k, &w[c])) != NULL;
        panel p;
        char *pb = aligned_alloc(64, su + 2 * sf);
        ok &= pb != NULL;
        if (pb) {
            memset(pb, 0, su + 2 * sf);
            p.u = (uint8_t *)pb;
            p.fs = (float *)(pb + su);
            p.fm = (float *)(pb + su + sf);
        }
        if (!ok) failed = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < npanels; i++) {
            if (!ok) continue;
            const int cols = n - NC * i < NC ? (int)(n - NC * i) : NC;
            decode_panel(t, raw + NC * i * row_bytes, row_bytes, cols, k, w, &p);
            run(&p, tiles, m, k, n, NC * i, cols, out);
        }
        for (int c = 0; c < NC; c++) free(rows[c]);
        free(pb);
    }
    free(acts);
    free(tiles);
    return failed ? -1 : 0;
}

#else
int wb_qgemm(const wb_qtype *t, const uint8_t *raw, int64_t n, int64_t k, int64_t m,
             const int8_t *q, const float *d, const float *s, const int16_t *bsum, float *out,
             int threads) {
    (void)t, (void)raw, (void)n, (void)k, (void)m, (void)q, (void)d, (void)s, (void)bsum;
    (void)out, (void)threads;
    return 1;
}
#endif
