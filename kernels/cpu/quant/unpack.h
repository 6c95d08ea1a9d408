/* Unpacking GGUF block fields into int8 vectors, shared by the row decoder (decode.c) and the
 * small-batch kernels that never leave registers (qdot_raw.c). */
#ifndef WB_QUANT_UNPACK_H
#define WB_QUANT_UNPACK_H

#include "quant.h"

/* The IQ4_NL / IQ4_XS codebook: a 4-bit index -> its int8 level. */
static const int8_t WB_IQ4_LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

static inline float wb_f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return wb_f16_to_f32(h);
}

static inline uint32_t wb_u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

#if WB_HAS_AVX2
/* 16 bytes of nibbles -> 32 levels: element j the low nibble of byte j, j + 16 the high one. */
static inline __m256i wb_nib32(const uint8_t *qs) {
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m4), _mm_and_si128(b, m4));
}

/* Bit j of x -> byte j: 0xff when set (broadcast each byte of x over 8 lanes, test one bit). */
static inline __m256i wb_bits32(uint32_t x) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

/* Q5_0 / Q5_1: the nibbles of qs with bit 4 of element j at bit j of qh (levels 0..31). */
static inline __m256i wb_nib32_hi(const uint8_t *qs, uint32_t qh) {
    return _mm256_or_si256(wb_nib32(qs), _mm256_and_si256(wb_bits32(qh), _mm256_set1_epi8(16)));
}

/* IQ4: the nibbles of qs as indices into the codebook. */
static inline __m256i wb_codebook32(const uint8_t *qs) {
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)WB_IQ4_LEVELS));
    return _mm256_shuffle_epi8(kv, wb_nib32(qs));
}

/* Bits s..s+width-1 of every byte of v, as the byte's value (mask = 2^width - 1). */
static inline __m256i wb_field(__m256i v, int s, int mask) {
    return _mm256_and_si256(_mm256_srli_epi16(v, s), _mm256_set1_epi8((char)mask));
}
#endif

/* Q4_K / Q5_K: the 12 scale bytes -> the eight 6-bit sub-block scales (sc) and mins (mn), one a
 * byte. Scales and mins 0-3 are the low 6 bits of bytes 0-3 and 4-7; 4-7 take their low 4 bits
 * from the nibbles of bytes 8-11 and their top 2 from the top bits of bytes 0-3 (scales) and
 * 4-7 (mins). */
static inline void wb_k4_scales(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    const uint32_t w0 = wb_u32_at(s), w1 = wb_u32_at(s + 4), w2 = wb_u32_at(s + 8);
    const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, top2 = 0x30303030u;
    uint32_t out[4] = {w0 & low6, (w2 & low4) | ((w0 >> 2) & top2), w1 & low6,
                       ((w2 >> 4) & low4) | ((w1 >> 2) & top2)};
    memcpy(sc, out, 8);
    memcpy(mn, out + 2, 8);
}

#endif /* WB_QUANT_UNPACK_H */
