/* The integer dot product of one decoded weight row (quant.h) with up to WB_QDOT_ROWS
 * quantized activation rows:
 *
 *     y[r] = sum_b d[b] da_r[b] sum_{j in b} sc[j] (q_j . qa_r,j)  +  mins term
 *
 * The inner sums are exact int32 (|q| <= 128, |qa| <= 127, |sc| <= 128: at most 2^29 per
 * 256-element block); each block's sum meets its float scales once. Loading the weight
 * chunk once for several activation rows is the batch > 1 micro-kernel where qgemm.c has none.
 *
 * x86 (AVX2 32 values a step, AVX-512 64): |q| (u8) times qa with q's sign (s8) by
 * maddubs into int16 pairs (at most 2*128*127 < 2^15: never saturates), then madd with the
 * sub-block scales into int32 (vpdpwssd with VNNI; vpdpbusd alone without sub-block scales).
 * ARM dotprod: sdot per 16.
 * Elsewhere plain C (vectorised by the compiler as it can). */
#include "quant.h"

#if WB_HAS_AVX2
static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

/* The offsets' share of the dot product (as many operations per row pair as the main loop
 * has blocks, so it is vectorised too: scalar, it doubled the batch-64 time of Q4_1/Q4_K). */
static inline float mins_term(const wb_qtype *t, const wb_wrow *w, const wb_arow *a, int64_t nb) {
    float y = 0.0f;
    int64_t b = 0;
    if (t->mins == WB_MINS_SUM) {
#if WB_HAS_AVX2
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                         _mm256_setzero_ps()}; /* four chains hide the fma latency */
        for (; b + 32 <= nb; b += 32)
            for (int c = 0; c < 4; c++)
                acc[c] = _mm256_fmadd_ps(_mm256_loadu_ps(w->dm + b + 8 * c),
                                         _mm256_loadu_ps(a->s + b + 8 * c), acc[c]);
        for (; b + 8 <= nb; b += 8)
            acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w->dm + b), _mm256_loadu_ps(a->s + b), acc[0]);
        y = hsum256(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
#endif
        for (; b < nb; b++) y += w->dm[b] * a->s[b];
    } else if (t->mins == WB_MINS_SUB) { /* 256-element blocks: 16 sub-blocks */
#if WB_HAS_AVX2
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (; b < nb; b++) {
            __m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(w->mn + 16 * b)),
                                          _mm256_loadu_si256((const __m256i *)(a->bsum + 16 * b)));
            acc[b & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(w->dm[b] * a->d[b]),
                                         acc[b & 1]);
        }
        y = hsum256(_mm256_add_ps(acc[0], acc[1]));
#endif
        for (; b < nb; b++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += w->mn[16 * b + j] * a->bsum[16 * b + j];
            y += w->dm[b] * a->d[b] * (float)s;
        }
    }
    return y;
}

#if WB_HAS_AVX512
/* 64 values a step. q's sign goes onto x by a masked negate (AVX-512 has no vpsignb), shared
 * by all rows; legacy types (no sub-block scales) take one vpdpbusd per step with VNNI. */
static inline __m512i sum_pairs(__m512i acc, __m512i aq, __m512i xs, __m512i sc, int has_sc) {
#if WB_HAS_AVX512VNNI
    if (!has_sc) return _mm512_dpbusd_epi32(acc, aq, xs);
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(aq, xs), sc);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(aq, xs), sc));
#endif
}

static inline __attribute__((always_inline)) void dot_rows(const wb_qtype *t, const wb_wrow *w,
                                                           const wb_arow *a, const int R,
                                                           int64_t k, float *out) {
    const int B = t->scale_block, has_sc = t->has_sc;
    const int64_t nb = k / B;
    const __m512i ones = _mm512_set1_epi16(1), zero = _mm512_setzero_si512();
    /* lanes 0-7 take block b's scale, lanes 8-15 block b + 1's (B = 32: two blocks a step) */
    const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 fa[WB_QDOT_ROWS];
    for (int r = 0; r < R; r++) fa[r] = _mm512_setzero_ps();
    if (B == 32) {
        int64_t e = 0;
        for (; e + 64 <= k; e += 64) {
            const int64_t b = e / 32;
            __m512i q = _mm512_loadu_si512(w->q + e), aq = _mm512_abs_epi8(q);
            __mmask64 neg = _mm512_movepi8_mask(q);
            __m512 wd = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_castpd_ps(
                                                          _mm_load_sd((const double *)(w->d + b)))));
            for (int r = 0; r < R; r++) {
                __m512i x = _mm512_loadu_si512(a[r].q + e);
                __m512i ia = sum_pairs(zero, aq, _mm512_mask_sub_epi8(x, neg, zero, x), ones, 0);
                __m512 ad = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(_mm_castpd_ps(
                                                              _mm_load_sd((const double *)(a[r].d + b)))));
                fa[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(wd, ad), fa[r]);
            }
        }
        if (e < k) { /* an odd number of blocks: the last one alone, nothing read past it */
            const __mmask64 low = 0xffffffffull;
            __m512i q = _mm512_maskz_loadu_epi8(low, w->q + e), aq = _mm512_abs_epi8(q);
            __mmask64 neg = _mm512_movepi8_mask(q);
            for (int r = 0; r < R; r++) {
                __m512i x = _mm512_maskz_loadu_epi8(low, a[r].q + e);
                __m512i ia = sum_pairs(zero, aq, _mm512_mask_sub_epi8(x, neg, zero, x), ones, 0);
                fa[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia),
                                        _mm512_set1_ps(w->d[e / 32] * a[r].d[e / 32]), fa[r]);
            }
        }
    } else {
        for (int64_t b = 0; b < nb; b++) {
            __m512i ia[WB_QDOT_ROWS];
            for (int r = 0; r < R; r++) ia[r] = zero;
            for (int64_t e = b * B; e < (b + 1) * B; e += 64) {
                __m512i q = _mm512_loadu_si512(w->q + e), aq = _mm512_abs_epi8(q);
                __mmask64 neg = _mm512_movepi8_mask(q);
                __m512i sc = has_sc ? _mm512_loadu_si512(w->sc8 + e / 2) : ones;
                for (int r = 0; r < R; r++) {
                    __m512i x = _mm512_loadu_si512(a[r].q + e);
                    ia[r] = sum_pairs(ia[r], aq, _mm512_mask_sub_epi8(x, neg, zero, x), sc, 1);
                }
            }
            for (int r = 0; r < R; r++)
                fa[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[r]),
                                        _mm512_set1_ps(w->d[b] * a[r].d[b]), fa[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = _mm512_reduce_add_ps(fa[r]) + mins_term(t, w, &a[r], nb);
}

#elif WB_HAS_AVX2

static inline __m256i scaled_pairs(__m256i acc, __m256i pairs, __m256i sc) {
#if WB_HAS_AVX512VNNI && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, pairs, sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, sc));
#endif
}

static inline __attribute__((always_inline)) void dot_rows(const wb_qtype *t, const wb_wrow *w,
                                                           const wb_arow *a, const int R,
                                                           int64_t k, float *out) {
    const int B = t->scale_block;
    const int64_t nb = k / B;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 fa[WB_QDOT_ROWS];
    for (int r = 0; r < R; r++) fa[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i ia[WB_QDOT_ROWS];
        for (int r = 0; r < R; r++) ia[r] = _mm256_setzero_si256();
        for (int64_t e = b * B; e < (b + 1) * B; e += 32) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(w->q + e));
            __m256i aq = _mm256_abs_epi8(q);
            __m256i sc = t->has_sc ? _mm256_loadu_si256((const __m256i *)(w->sc8 + e / 2)) : ones;
            for (int r = 0; r < R; r++) {
                __m256i x = _mm256_loadu_si256((const __m256i *)(a[r].q + e));
                ia[r] = scaled_pairs(ia[r], _mm256_maddubs_epi16(aq, _mm256_sign_epi8(x, q)), sc);
            }
        }
        for (int r = 0; r < R; r++)
            fa[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r]), _mm256_set1_ps(w->d[b] * a[r].d[b]),
                                    fa[r]);
    }
    for (int r = 0; r < R; r++) out[r] = hsum256(fa[r]) + mins_term(t, w, &a[r], nb);
}

#elif WB_HAS_DOTPROD
static inline __attribute__((always_inline)) void dot_rows(const wb_qtype *t, const wb_wrow *w,
                                                           const wb_arow *a, const int R,
                                                           int64_t k, float *out) {
    const int B = t->scale_block;
    const int64_t nb = k / B;
    float32x4_t fa[WB_QDOT_ROWS];
    for (int r = 0; r < R; r++) fa[r] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int32x4_t ia[WB_QDOT_ROWS];
        for (int r = 0; r < R; r++) ia[r] = vdupq_n_s32(0);
        for (int64_t e = b * B; e < (b + 1) * B; e += 16) {
            int8x16_t q = vld1q_s8(w->q + e);
            int32_t sc = t->has_sc ? w->sc8[e / 2] : 1;
            for (int r = 0; r < R; r++)
                ia[r] = vmlaq_n_s32(ia[r], vdotq_s32(vdupq_n_s32(0), q, vld1q_s8(a[r].q + e)), sc);
        }
        for (int r = 0; r < R; r++)
            fa[r] = vmlaq_n_f32(fa[r], vcvtq_f32_s32(ia[r]), w->d[b] * a[r].d[b]);
    }
    for (int r = 0; r < R; r++) out[r] = vaddvq_f32(fa[r]) + mins_term(t, w, &a[r], nb);
}

#else
static inline __attribute__((always_inline)) void dot_rows(const wb_qtype *t, const wb_wrow *w,
                                                           const wb_arow *a, const int R,
                                                           int64_t k, float *out) {
    const int B = t->scale_block;
    const int64_t nb = k / B;
    for (int r = 0; r < R; r++) {
        float y = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            int32_t acc = 0;
            for (int64_t e = b * B; e < (b + 1) * B; e += 16) {
                int32_t s = 0;
                for (int i = 0; i < 16; i++) s += w->q[e + i] * a[r].q[e + i];
                acc += (t->has_sc ? w->sc8[e / 2] : 1) * s;
            }
            y += (float)acc * (w->d[b] * a[r].d[b]);
        }
        out[r] = y + mins_term(t, w, &a[r], nb);
    }
}
#endif

void wb_qdot_rows(const wb_qtype *t, const wb_wrow *w, const wb_arow *a, int nrows, int64_t k,
                  float *out) {
    switch (nrows) { /* constant row counts let the compiler keep the accumulators in registers */
    case 4: dot_rows(t, w, a, 4, k, out); break;
    case 3: dot_rows(t, w, a, 3, k, out); break;
    case 2: dot_rows(t, w, a, 2, k, out); break;
    default: dot_rows(t, w, a, 1, k, out); break;
    }
}
