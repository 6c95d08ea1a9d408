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

#endif /* WB_CONVERT_H */
