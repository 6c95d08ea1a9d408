/* On-the-fly activation quantization, as ggml's reference quantizers (quantize_row_q8_0,
 * _q8_1, _q8_K): one f32 row -> int8 levels, block scales and per-16 level sums. A block
 * holding NaN or inf gets a NaN scale (and zero levels), so the product is NaN, not garbage. */
#include "quant.h"

#include <float.h>
#include <math.h>

static inline int16_t sum16(const int8_t *q) {
    int s = 0;
    for (int i = 0; i < 16; i++) s += q[i];
    return (int16_t)s;
}

/* Largest |x| of n values, and the first value of that magnitude; *finite = 0 on NaN/inf. */
static inline float absmax(const float *x, int n, float *signed_max, int *finite) {
    float amax = 0.0f, mx = 0.0f;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        ok &= ax <= FLT_MAX;
        if (ax > amax) {
            amax = ax;
            mx = x[i];
        }
    }
    *signed_max = mx;
    *finite = ok;
    return amax;
}

#if WB_HAS_AVX512
/* One block of 32 in two 16-lane halves, as the scalar loop below (same roundings, same NaN
 * rule): roundf is trunc, then a step away from zero where the dropped fraction is >= 1/2;
 * vpmovsdb narrows each half in order, and each half's levels sum to its bsum. */
static inline void q8_32_block(const float *xb, int8_t *qb, float *d, float *s, int16_t *bsum) {
    const __m512 v[2] = {_mm512_loadu_ps(xb), _mm512_loadu_ps(xb + 16)};
    const __m512 a0 = _mm512_abs_ps(v[0]), a1 = _mm512_abs_ps(v[1]);
    const __mmask16 bad = _mm512_cmp_ps_mask(a0, _mm512_set1_ps(FLT_MAX), _CMP_NLE_UQ) |
                          _mm512_cmp_ps_mask(a1, _mm512_set1_ps(FLT_MAX), _CMP_NLE_UQ);
    const int finite = bad == 0;
    const float db = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1)) / 127.0f;
    const __m512 id = _mm512_set1_ps(finite && db != 0.0f ? 1.0f / db : 0.0f);
    int sum[2];
    for (int h = 0; h < 2; h++) {
        const __m512 x = _mm512_mul_ps(v[h], id);
        const __m512 t = _mm512_roundscale_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(x, t)),
                                                _mm512_set1_ps(0.5f), _CMP_GE_OQ);
        const __m512 step = _mm512_or_ps(_mm512_and_ps(x, _mm512_set1_ps(-0.0f)),
                                         _mm512_set1_ps(1.0f));
        const __m512i n = _mm512_maskz_cvtps_epi32(finite ? 0xffff : 0, /* zero levels */
                                                   _mm512_mask_add_ps(t, up, t, step));
        _mm_storeu_si128((__m128i *)(qb + 16 * h), _mm512_cvtsepi32_epi8(n));
        sum[h] = _mm512_reduce_add_epi32(n);
    }
    *d = finite ? wb_f16_to_f32(wb_f32_to_f16(db)) : NAN;
    if (s) *s = finite ? wb_f16_to_f32(wb_f32_to_f16(db * (float)(sum[0] + sum[1]))) : NAN;
    bsum[0] = (int16_t)sum[0];
    bsum[1] = (int16_t)sum[1];
}
#elif WB_HAS_AVX2
/* roundf (half away from zero) of 8 lanes: truncate, then step away from zero where the
 * dropped fraction is at least 1/2 (v - trunc(v) is exact). */
static inline __m256 round_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    const __m256 step = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
    return _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                          step));
}

static inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* One block of 32, as the scalar loop below (same roundings, same NaN rule). */
static inline void q8_32_block(const float *xb, int8_t *qb, float *d, float *s, int16_t *bsum) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(xb + 8 * i);
        const __m256 a = _mm256_andnot_ps(sign, v[i]);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ));
        amax = _mm256_max_ps(amax, a);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const int finite = _mm256_movemask_ps(bad) == 0;
    const float db = _mm_cvtss_f32(m) / 127.0f, id = finite && db != 0.0f ? 1.0f / db : 0.0f;
    __m256i n[4];
    for (int i = 0; i < 4; i++)
        n[i] = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v[i], _mm256_set1_ps(id))));
    const int lo = hsum_i32(_mm256_add_epi32(n[0], n[1]));
    const int hi = hsum_i32(_mm256_add_epi32(n[2], n[3]));
    /* packs interleave 128-bit lanes; the permute restores element order */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qb, p);
    *d = finite ? wb_f16_to_f32(wb_f32_to_f16(db)) : NAN;
    if (s) *s = finite ? wb_f16_to_f32(wb_f32_to_f16(db * (float)(lo + hi))) : NAN;
    bsum[0] = (int16_t)lo;
    bsum[1] = (int16_t)hi;
}
#endif

void wb_quantize_q8_32(const float *x, int64_t k, int8_t *q, float *d, float *s, int16_t *bsum) {
#if WB_HAS_AVX2
    for (int64_t b = 0; b < k / 32; b++)
        q8_32_block(x + 32 * b, q + 32 * b, d + b, s ? s + b : NULL, bsum + 2 * b);
    return;
#endif
    for (int64_t b = 0; b < k / 32; b++) {
        const float *xb = x + 32 * b;
        int8_t *qb = q + 32 * b;
        float mx;
        int finite;
        float amax = absmax(xb, 32, &mx, &finite);
        float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            qb[i] = finite ? (int8_t)roundf(xb[i] * id) : 0; /* |x * id| <= 127 */
            sum += qb[i];
        }
        /* ggml stores d (and Q8_1's s = d * sum, with the unrounded d) as f16 */
        d[b] = finite ? wb_f16_to_f32(wb_f32_to_f16(db)) : NAN;
        if (s) s[b] = finite ? wb_f16_to_f32(wb_f32_to_f16(db * (float)sum)) : NAN;
        bsum[2 * b] = sum16(qb);
        bsum[2 * b + 1] = sum16(qb + 16);
    }
}

/* ggml's nearest_int: round half to even through the float mantissa (|v| < 2^22). */
static inline int nearest_int(float v) {
    float f = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

void wb_quantize_q8_k(const float *x, int64_t k, int8_t *q, float *d, int16_t *bsum) {
    for (int64_t b = 0; b < k / 256; b++) {
        const float *xb = x + 256 * b;
        int8_t *qb = q + 256 * b;
        float mx;
        int finite;
        float amax = absmax(xb, 256, &mx, &finite);
        if (!finite || amax == 0.0f) {
            memset(qb, 0, 256);
            memset(bsum + 16 * b, 0, 16 * sizeof(int16_t));
            d[b] = finite ? 0.0f : NAN;
            continue;
        }
        float iscale = -127.0f / mx; /* the signed maximum maps to -127 */
        for (int i = 0; i < 256; i++) {
            int v = nearest_int(iscale * xb[i]);
            qb[i] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < 16; j++) bsum[16 * b + j] = sum16(qb + 16 * j);
        d[b] = 1.0f / iscale;
    }
}

int wb_level_offset(int type_id) {
    switch (type_id) {
    case WB_Q4_0: return 8;
    case WB_Q5_0: return 16;
    case WB_Q8_0: case WB_IQ4_NL: return 128;
    default: return 0;
    }
}

void wb_act_lanes(const int16_t *bsum, const float *d, const float *s, int64_t k, int offset,
                  float *dv, int32_t *nsum, float *sv) {
    for (int64_t b = 0; b < k / 32; b++) {
        /* offset * sum spread over the 8 lanes (offset is 0, 8, 16 or 128: exact) */
        const int32_t lane = -(offset / 8) * (bsum[2 * b] + bsum[2 * b + 1]);
#if WB_HAS_AVX2
        _mm256_storeu_ps(dv + 8 * b, _mm256_set1_ps(d[b]));
        _mm256_storeu_si256((__m256i *)(nsum + 8 * b), _mm256_set1_epi32(lane));
        if (sv) _mm256_storeu_ps(sv + 8 * b, _mm256_setr_ps(s[b], 0, 0, 0, 0, 0, 0, 0));
#else
        for (int i = 0; i < 8; i++) {
            dv[8 * b + i] = d[b];
            nsum[8 * b + i] = lane;
            if (sv) sv[8 * b + i] = i == 0 ? s[b] : 0.0f;
        }
#endif
    }
}
