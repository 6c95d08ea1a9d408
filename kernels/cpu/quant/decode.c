/* GGUF block decoders: one weight row -> the integer form of quant.h (levels, sub-block
 * scales and mins, block scales). Layouts as in backends/cpu/ggml (legacy.py, kquants.py,
 * iquants.py). Plain loops over fixed sizes, which the compiler vectorises per variant. */
#include "unpack.h"

#include <stdlib.h>

static const wb_qtype TYPES[] = {
    /* id, name, block, bytes, B, has_sc, mins */
    {WB_Q4_0, "Q4_0", 32, 18, 32, 0, WB_MINS_NONE},
    {WB_Q4_1, "Q4_1", 32, 20, 32, 0, WB_MINS_SUM},
    {WB_Q5_0, "Q5_0", 32, 22, 32, 0, WB_MINS_NONE},
    {WB_Q5_1, "Q5_1", 32, 24, 32, 0, WB_MINS_SUM},
    {WB_Q8_0, "Q8_0", 32, 34, 32, 0, WB_MINS_NONE},
    {WB_Q8_1, "Q8_1", 32, 36, 32, 0, WB_MINS_NONE},
    {WB_Q2_K, "Q2_K", 256, 84, 256, 1, WB_MINS_SUB},
    {WB_Q3_K, "Q3_K", 256, 110, 256, 1, WB_MINS_NONE},
    {WB_Q4_K, "Q4_K", 256, 144, 256, 1, WB_MINS_SUB},
    {WB_Q5_K, "Q5_K", 256, 176, 256, 1, WB_MINS_SUB},
    {WB_Q6_K, "Q6_K", 256, 210, 256, 1, WB_MINS_NONE},
    {WB_Q8_K, "Q8_K", 256, 292, 256, 0, WB_MINS_NONE},
    {WB_IQ4_NL, "IQ4_NL", 32, 18, 32, 0, WB_MINS_NONE},
    {WB_IQ4_XS, "IQ4_XS", 256, 136, 256, 1, WB_MINS_NONE},
};

const wb_qtype *wb_qtype_find(int type_id) {
    for (size_t i = 0; i < sizeof(TYPES) / sizeof(TYPES[0]); i++)
        if (TYPES[i].type_id == type_id) return &TYPES[i];
    return NULL;
}

/* Sub-block scale j (of 16 elements) repeated over one 8-lane int16 slot. */
static inline void put_scale(int16_t *sc8, int j, int v) {
#if WB_HAS_AVX2
    _mm_storeu_si128((__m128i *)(sc8 + 8 * j), _mm_set1_epi16((short)v));
#else
    for (int i = 0; i < 8; i++) sc8[8 * j + i] = (int16_t)v;
#endif
}

#if WB_HAS_AVX2
/* Element-level unpacking, 32 bytes per instruction; the scalar versions below say what each
 * computes. */
static inline void store32(int8_t *q, __m256i v) { _mm256_storeu_si256((__m256i *)q, v); }

static inline void nibbles32(const uint8_t *qs, int8_t *q, int bias) {
    store32(q, _mm256_sub_epi8(wb_nib32(qs), _mm256_set1_epi8((char)bias)));
}

static inline void nibbles32_hi(const uint8_t *qs, uint32_t qh, int8_t *q, int bias) {
    store32(q, _mm256_sub_epi8(wb_nib32_hi(qs, qh), _mm256_set1_epi8((char)bias)));
}

static inline void codebook32(const uint8_t *qs, int8_t *q) { store32(q, wb_codebook32(qs)); }

static inline void crumbs256(const uint8_t *qs, int8_t *q) {
    for (int h = 0; h < 2; h++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
        for (int j = 0; j < 4; j++) store32(q + 128 * h + 32 * j, wb_field(v, 2 * j, 3));
    }
}

static inline void q3_high(const uint8_t *hm, int8_t *q) {
    __m256i h = _mm256_loadu_si256((const __m256i *)hm), four = _mm256_set1_epi8(4);
    for (int b = 0; b < 8; b++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(q + 32 * b));
        __m256i hb = _mm256_slli_epi16(wb_field(h, b, 1), 2);
        store32(q + 32 * b, _mm256_sub_epi8(_mm256_add_epi8(v, hb), four));
    }
}

static inline void k4_nibbles(const uint8_t *qs, const uint8_t *qh, int8_t *q) {
    __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i lo = wb_field(v, 0, 15), hi = wb_field(v, 4, 15);
        if (qh) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(wb_field(h, 2 * c, 1), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(wb_field(h, 2 * c + 1, 1), 4));
        }
        store32(q + 64 * c, lo);
        store32(q + 64 * c + 32, hi);
    }
}

static inline void q6_levels(const uint8_t *ql, const uint8_t *qh, int8_t *q) {
    const __m256i off = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; h++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(ql + 64 * h));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 64 * h + 32));
        __m256i hv = _mm256_loadu_si256((const __m256i *)(qh + 32 * h));
        __m256i lows[4] = {wb_field(l0, 0, 15), wb_field(l1, 0, 15), wb_field(l0, 4, 15),
                           wb_field(l1, 4, 15)};
        for (int r = 0; r < 4; r++) {
            __m256i v = _mm256_or_si256(lows[r], _mm256_slli_epi16(wb_field(hv, 2 * r, 3), 4));
            store32(q + 128 * h + 32 * r, _mm256_sub_epi8(v, off));
        }
    }
}

#else
/* 32 elements from 16 bytes of nibbles: element j low nibble, j + 16 high nibble. */
static inline void nibbles32(const uint8_t *qs, int8_t *q, int bias) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)((qs[j] & 15) - bias);
        q[j + 16] = (int8_t)((qs[j] >> 4) - bias);
    }
}

/* ... with bit 4 of element j at bit j of qh. */
static inline void nibbles32_hi(const uint8_t *qs, uint32_t qh, int8_t *q, int bias) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 15) | ((qh >> j) & 1) << 4) - bias);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - bias);
    }
}

/* ... as indices into the IQ4 codebook. */
static inline void codebook32(const uint8_t *qs, int8_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = WB_IQ4_LEVELS[qs[j] & 15];
        q[j + 16] = WB_IQ4_LEVELS[qs[j] >> 4];
    }
}

/* 256 two-bit levels: element 128h + 32j + l is bits 2j of qs[32h + l]. */
static inline void crumbs256(const uint8_t *qs, int8_t *q) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * j + l] = (int8_t)((qs[32 * h + l] >> (2 * j)) & 3);
}

/* Q3_K: level - 4 unless the high bit of element 32b + m (bit b of hm[m]) is set. */
static inline void q3_high(const uint8_t *hm, int8_t *q) {
    for (int b = 0; b < 8; b++)
        for (int m = 0; m < 32; m++) q[32 * b + m] += ((hm[m] >> b) & 1) ? 0 : -4;
}

/* Q4_K / Q5_K: sub-block 2c is the low nibbles of qs[32c:32c+32], 2c+1 the high ones; bit 4
 * of element 32s + l (Q5_K) is bit s of qh[l]. */
static inline void k4_nibbles(const uint8_t *qs, const uint8_t *qh, int8_t *q) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t)(qs[32 * c + l] & 15);
            q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
        }
    if (qh)
        for (int s = 0; s < 8; s++)
            for (int l = 0; l < 32; l++) q[32 * s + l] |= (int8_t)(((qh[l] >> s) & 1) << 4);
}

/* Q6_K: element 128h + 32r + l has its low nibble in ql[64h + 32(r%2) + l] (high nibble for
 * r >= 2) and its top 2 bits at bits 2r of qh[32h + l]; level - 32. */
static inline void q6_levels(const uint8_t *ql, const uint8_t *qh, int8_t *q) {
    for (int h = 0; h < 2; h++)
        for (int r = 0; r < 4; r++)
            for (int l = 0; l < 32; l++) {
                int lo = ql[64 * h + 32 * (r % 2) + l];
                lo = r < 2 ? lo & 15 : lo >> 4;
                int hi = (qh[32 * h + l] >> (2 * r)) & 3;
                q[128 * h + 32 * r + l] = (int8_t)((lo | hi << 4) - 32);
            }
}
#endif

/* Bytes ahead of the block being decoded to ask memory for: the decode loop alternates with
 * the dot products, which leave the hardware prefetcher behind (Q4_0 at batch 1 on the loaded
 * dev machine: about 3.1 -> 2.0-2.8 ms). Rows are contiguous, so this runs into the next row. */
#define WB_PREFETCH_AHEAD 1024

static void decode_legacy(const wb_qtype *t, const uint8_t *raw, int64_t nb, wb_wrow *w) {
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = raw + b * t->bytes;
        if ((b & 1) == 0) __builtin_prefetch(p + WB_PREFETCH_AHEAD, 0, 3);
        int8_t *q = w->q + 32 * b;
        w->d[b] = wb_f16_at(p);
        switch (t->type_id) {
        case WB_Q4_0: nibbles32(p + 2, q, 8); break;
        case WB_Q4_1: w->dm[b] = wb_f16_at(p + 2); nibbles32(p + 4, q, 0); break;
        case WB_Q5_0: nibbles32_hi(p + 6, wb_u32_at(p + 2), q, 16); break;
        case WB_Q5_1:
            w->dm[b] = wb_f16_at(p + 2);
            nibbles32_hi(p + 8, wb_u32_at(p + 4), q, 0);
            break;
        case WB_Q8_0: memcpy(q, p + 2, 32); break;
        case WB_Q8_1: memcpy(q, p + 4, 32); break;
        case WB_IQ4_NL: codebook32(p + 2, q); break;
        }
    }
}

static void decode_q2_k(const uint8_t *p, int8_t *q, int16_t *sc8, int16_t *mn, float *d, float *dm) {
    for (int j = 0; j < 16; j++) {
        put_scale(sc8, j, p[j] & 15);
        mn[j] = (int16_t)(p[j] >> 4);
    }
    crumbs256(p + 16, q);
    *d = wb_f16_at(p + 80);
    *dm = -wb_f16_at(p + 82);
}

static void decode_q3_k(const uint8_t *p, int8_t *q, int16_t *sc8, float *d) {
    const uint8_t *hm = p, *s = p + 96;
    for (int j = 0; j < 16; j++) {
        int low = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
        int top = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        put_scale(sc8, j, (low | top << 4) - 32);
    }
    crumbs256(p + 32, q);
    q3_high(hm, q);
    *d = wb_f16_at(p + 108);
}

static void decode_q45_k(const uint8_t *p, int five, int8_t *q, int16_t *sc8, int16_t *mn,
                         float *d, float *dm) {
    uint8_t sc[8], m[8];
    wb_k4_scales(p + 4, sc, m);
    for (int j = 0; j < 8; j++) {
        put_scale(sc8, 2 * j, sc[j]);
        put_scale(sc8, 2 * j + 1, sc[j]);
        mn[2 * j] = mn[2 * j + 1] = m[j];
    }
    k4_nibbles(p + (five ? 48 : 16), five ? p + 16 : NULL, q);
    *d = wb_f16_at(p);
    *dm = -wb_f16_at(p + 2);
}

static void decode_q6_k(const uint8_t *p, int8_t *q, int16_t *sc8, float *d) {
    q6_levels(p, p + 128, q);
    for (int j = 0; j < 16; j++) put_scale(sc8, j, (int8_t)p[192 + j]);
    *d = wb_f16_at(p + 208);
}

static void decode_iq4_xs(const uint8_t *p, int8_t *q, int16_t *sc8, float *d) {
    uint16_t sh;
    memcpy(&sh, p + 2, 2);
    for (int i = 0; i < 8; i++) {
        int ls = ((p[4 + i / 2] >> (4 * (i % 2))) & 15) | (((sh >> (2 * i)) & 3) << 4);
        put_scale(sc8, 2 * i, ls - 32);
        put_scale(sc8, 2 * i + 1, ls - 32);
        codebook32(p + 8 + 16 * i, q + 32 * i);
    }
    *d = wb_f16_at(p);
}

void wb_decode_row(const wb_qtype *t, const uint8_t *raw, int64_t k, wb_wrow *w) {
    int64_t nb = k / t->block;
    if (t->block == 32) {
        decode_legacy(t, raw, nb, w);
        return;
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = raw + b * t->bytes;
        for (int o = 0; o < t->bytes; o += 64) __builtin_prefetch(p + WB_PREFETCH_AHEAD + o, 0, 3);
        int8_t *q = w->q + 256 * b;
        int16_t *sc8 = w->sc8 ? w->sc8 + 128 * b : NULL, *mn = w->mn ? w->mn + 16 * b : NULL;
        float *dm = w->dm ? w->dm + b : NULL;
        switch (t->type_id) {
        case WB_Q2_K: decode_q2_k(p, q, sc8, mn, w->d + b, dm); break;
        case WB_Q3_K: decode_q3_k(p, q, sc8, w->d + b); break;
        case WB_Q4_K: decode_q45_k(p, 0, q, sc8, mn, w->d + b, dm); break;
        case WB_Q5_K: decode_q45_k(p, 1, q, sc8, mn, w->d + b, dm); break;
        case WB_Q6_K: decode_q6_k(p, q, sc8, w->d + b); break;
        case WB_IQ4_XS: decode_iq4_xs(p, q, sc8, w->d + b); break;
        case WB_Q8_K:
            memcpy(&w->d[b], p, 4);
            memcpy(q, p + 4, 256);
            break;
        }
    }
}

void *wb_alloc_row(const wb_qtype *t, int64_t k, wb_wrow *w) {
    int64_t nb = k / t->scale_block, ns = k / 16;
    size_t size = (size_t)(k + 16 * ns + 2 * ns + 8 * nb) + 64;
    char *p = calloc(1, size); /* zeroed: SIMD tails past k read zeros, never stale heap */
    if (!p) return NULL;
    w->d = (float *)p;
    w->dm = t->mins ? (float *)(p + 4 * nb) : NULL;
    w->sc8 = t->has_sc ? (int16_t *)(p + 8 * nb) : NULL;
    w->mn = t->mins == WB_MINS_SUB ? (int16_t *)(p + 8 * nb + 16 * ns) : NULL;
    w->q = (int8_t *)(p + 8 * nb + 18 * ns);
    return p;
}
