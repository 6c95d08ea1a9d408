/* Moving elements between a strided operand of any float dtype and a contiguous f32 buffer:
 * half types are widened on load and rounded once on store (F16C / AVX-512 conversions where
 * the variant has them). */
#ifndef WB_CONVERT_H
#define WB_CONVERT_H

#include "nd.h"

/* Elements [off, off + n*stride) of ``base`` (dtype ``dt``: f32, f16 or bf16) as f32: a pointer
 * into ``base`` itself when it already is contiguous f32, else ``buf`` filled. */
static inline const float *wb_load_f32(int dt, const char *base, Py_ssize_t off, Py_ssize_t stride,
                                       Py_ssize_t n, float *restrict buf) {
    if (dt == WB_F32) {
        const float *p = (const float *)base + off;
        if (stride == 1) return p;
        for (Py_ssize_t i = 0; i < n; i++) buf[i] = p[i * stride];
        return buf;
    }
    const uint16_t *p = (const uint16_t *)base + off;
    if (dt == WB_BF16) {
        if (stride == 1)
            for (Py_ssize_t i = 0; i < n; i++) buf[i] = wb_bf16_to_f32(p[i]);
        else
            for (Py_ssize_t i = 0; i < n; i++) buf[i] = wb_bf16_to_f32(p[i * stride]);
        return buf;
    }
    Py_ssize_t i = 0;
    if (stride == 1) {
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(buf + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + i))));
#elif defined(__F16C__)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(buf + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))));
#endif
        for (; i < n; i++) buf[i] = wb_f16_to_f32(p[i]);
    } else {
        for (; i < n; i++) buf[i] = wb_f16_to_f32(p[i * stride]);
    }
    return buf;
}

/* Contiguous f32 ``src`` into elements [off, off + n) of ``base`` (dtype f16 or bf16). */
static inline void wb_store_f32(int dt, char *base, Py_ssize_t off, const float *restrict src,
                                Py_ssize_t n) {
    uint16_t *p = (uint16_t *)base + off;
    if (dt == WB_BF16) {
        for (Py_ssize_t i = 0; i < n; i++) p[i] = wb_f32_to_bf16(src[i]);
        return;
    }
    Py_ssize_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(p + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) p[i] = wb_f32_to_f16(src[i]);
}

/* Contiguous f32 ``src`` into elements [off, off + n) of ``base`` of dtype ``dt`` (f32, f16 or
 * bf16). */
static inline void wb_store_line_f32(int dt, char *base, Py_ssize_t off, const float *restrict src,
                                     Py_ssize_t n) {
    if (dt == WB_F32) memcpy((float *)base + off, src, sizeof(float) * (size_t)n);
    else wb_store_f32(dt, base, off, src, n);
}

/* Contiguous f64 ``src`` into elements [off, off + n) of the f64 ``base`` (``dt`` is WB_F64;
 * the same signature as wb_store_line_f32 for kernels written once per compute type). */
static inline void wb_store_line_f64(int dt, char *base, Py_ssize_t off, const double *restrict src,
                                     Py_ssize_t n) {
    (void)dt;
    memcpy((double *)base + off, src, sizeof(double) * (size_t)n);
}

/* The same for f64 (the compute type of f64 ops): a pointer into ``base`` or ``buf``. */
static inline const double *wb_load_f64(const char *base, Py_ssize_t off, Py_ssize_t stride,
                                        Py_ssize_t n, double *restrict buf) {
    const double *p = (const double *)base + off;
    if (stride == 1) return p;
    for (Py_ssize_t i = 0; i < n; i++) buf[i] = p[i * stride];
    return buf;
}

/* ---- one vector of a half-precision operand, widened and rounded in registers ---------- */
/* Fused half-precision kernels work on WB_HLANES elements at a time: widen into a float[16] or
 * float[8] that gcc keeps in one vector register, compute, round on store. The conversions are
 * those of the loops above (F16C/AVX-512 where the variant has them, else the scalar ones), so
 * results are bit-identical. */
#if defined(__AVX512F__)
#define WB_HLANES 16
#else
#define WB_HLANES 8
#endif

/* WB_HLANES elements p[0], p[stride], ... of half dtype ``dt`` (f16 or bf16) as f32 in ``t``. */
static inline __attribute__((always_inline)) void wb_half_lanes_load(int dt, const uint16_t *p,
                                                                     Py_ssize_t stride,
                                                                     float *restrict t) {
    if (stride != 1) {
        for (int j = 0; j < WB_HLANES; j++)
            t[j] = dt == WB_BF16 ? wb_bf16_to_f32(p[j * stride]) : wb_f16_to_f32(p[j * stride]);
        return;
    }
    if (dt == WB_BF16) { /* bf16 is the top half of an f32 */
#if defined(__AVX512F__)
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
        _mm512_storeu_ps(t, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
#elif defined(__AVX2__)
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
        _mm256_storeu_ps(t, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
#else
        for (int j = 0; j < WB_HLANES; j++) t[j] = wb_bf16_to_f32(p[j]);
#endif
        return;
    }
#if defined(__AVX512F__)
    _mm512_storeu_ps(t, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)));
#elif defined(__F16C__)
    _mm256_storeu_ps(t, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)));
#else
    for (int j = 0; j < WB_HLANES; j++) t[j] = wb_f16_to_f32(p[j]);
#endif
}

/* ``t`` (WB_HLANES f32) rounded to nearest even into p[0 .. WB_HLANES) of half dtype ``dt``. */
static inline __attribute__((always_inline)) void wb_half_lanes_store(int dt, uint16_t *p,
                                                                      const float *restrict t) {
    if (dt == WB_BF16) { /* wb_f32_to_bf16 on each lane: NaN -> its top half | 0x40 (quiet) */
#if defined(__AVX512F__)
        const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(t)), hi = _mm512_srli_epi32(u, 16);
        const __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                             _mm512_and_si512(hi, _mm512_set1_epi32(1))), 16);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(
            _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
        const __m512i q = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
        _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(q));
#elif defined(__AVX2__)
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(t)), hi = _mm256_srli_epi32(u, 16);
        const __m256i r = _mm256_srli_epi32(
            _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
                             _mm256_and_si256(hi, _mm256_set1_epi32(1))), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                               _mm256_set1_epi32(0x7f800000));
        const __m256i q = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
        _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(_mm256_castsi256_si128(q),
                                                        _mm256_extracti128_si256(q, 1)));
#else
        for (int j = 0; j < WB_HLANES; j++) p[j] = wb_f32_to_bf16(t[j]);
#endif
        return;
    }
#if defined(__AVX512F__)
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(_mm512_loadu_ps(t), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(_mm256_loadu_ps(t), _MM_FROUND_TO_NEAREST_INT));
#else
    for (int j = 0; j < WB_HLANES; j++) p[j] = wb_f32_to_f16(t[j]);
#endif
}

/* AVX512-BF16's vcvtneps2bf16 rounds 16 lanes as wb_f32_to_bf16 does (nearest even; NaN ->
 * its top half | 0x40) in one instruction, where the integer sequence above takes ten. It reads
 * subnormal inputs as zero, so a vector holding one takes that sequence. The avx512 variant is
 * compiled without the extension: kernels built around this store carry WB_BF16NI_FN and run
 * where wb_bf16ni_usable() says so (never, in the other variants). */
#if defined(__AVX512F__) && (defined(__clang__) || __GNUC__ >= 11)
#define WB_BF16NI_FN __attribute__((target("avx512bf16")))

static inline int wb_bf16ni_usable(void) { return __builtin_cpu_supports("avx512bf16"); }

WB_BF16NI_FN static inline __attribute__((always_inline)) void wb_bf16ni_lanes_store(
    int dt, uint16_t *p, const float *restrict t) {
    (void)dt;
    const __m512 v = _mm512_loadu_ps(t);
    if (__builtin_expect(_mm512_fpclass_ps_mask(v, 0x20) != 0, 0)) { /* 0x20: subnormal */
        wb_half_lanes_store(WB_BF16, p, t);
        return;
    }
    _mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(v));
}
#else
#define WB_BF16NI_FN
static inline int wb_bf16ni_usable(void) { return 0; }
#define wb_bf16ni_lanes_store wb_half_lanes_store
#endif

#endif /* WB_CONVERT_H */
