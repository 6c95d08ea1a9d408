/* Vectors of f32 lanes and lane masks (kernels/cpu/core: conv.c, conv_direct.c, depthwise.c).
 * WB_LANES is defined where the variant has them (AVX-512 or AVX2), not in the baseline one. */
#ifndef WB_LANES_H
#define WB_LANES_H

#include "wb_native.h"

/* AVX-512 masks or AVX2 lane-wise ones; masked-off lanes are neither loaded (they never
 * fault) nor stored. */
#if WB_HAS_AVX512
#define WB_LANES 16
typedef __m512 lane_vec;
typedef __mmask16 lane_mask;
/* Lanes lo..hi-1 (either bound may lie outside 0..16). */
static inline lane_mask lanes_between(Py_ssize_t lo, Py_ssize_t hi) {
    if (lo < 0) lo = 0;
    if (lo >= 16 || hi <= lo) return 0;
    const unsigned below = hi >= 16 ? 0xFFFFu : (1u << hi) - 1u;
    return (lane_mask)(below & (0xFFFFu << lo));
}
static inline lane_vec masked_load(const float *p, lane_mask m) {
    return _mm512_maskz_loadu_ps(m, p);
}
static inline void masked_store(float *p, lane_mask m, lane_vec v) {
    _mm512_mask_storeu_ps(p, m, v);
}
#define lane_zero _mm512_setzero_ps
#define lane_load _mm512_loadu_ps
#define lane_store _mm512_storeu_ps
#define lane_set1 _mm512_set1_ps
#define lane_add _mm512_add_ps
#define lane_fma _mm512_fmadd_ps
#define lane_sum _mm512_reduce_add_ps
#elif WB_HAS_AVX2
#define WB_LANES 8
typedef __m256 lane_vec;
typedef __m256i lane_mask;
static inline lane_mask lanes_between(Py_ssize_t lo, Py_ssize_t hi) {
    if (lo < 0) lo = 0;
    if (hi > 8) hi = 8;
    if (hi <= lo) return _mm256_setzero_si256();
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), lane),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane));
}
static inline lane_vec masked_load(const float *p, lane_mask m) {
    return _mm256_maskload_ps(p, m);
}
static inline void masked_store(float *p, lane_mask m, lane_vec v) {
    _mm256_maskstore_ps(p, m, v);
}
#define lane_zero _mm256_setzero_ps
#define lane_load _mm256_loadu_ps
#define lane_store _mm256_storeu_ps
#define lane_set1 _mm256_set1_ps
#define lane_add _mm256_add_ps
#define lane_fma _mm256_fmadd_ps
static inline float lane_sum(lane_vec v) {
    const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}
#endif

#endif /* WB_LANES_H */
