/* Small-batch dot products straight from the raw GGUF blocks (x86 AVX2; the AVX-512 variant
 * compiles the same 256-bit code with its VNNI forms, and its own 512-bit kernel for the
 * 32-element types): each block is unpacked into int8 vectors in registers and multiplied
 * with the Q8 activation blocks at once, so a weight row is read once and never stored (the
 * row decoder's scratch halved the weight stream at batch 1).
 *
 *     y[r] = sum_b d[b] da_r[b] sum_{j in b} sc[j] (q_j . qa_r,j)  +  mins term      (qdot.c)
 *
 * Levels q that fit in u8 (Q4_1, Q5_1, K-quants before their offset) meet the signed
 * activations in maddubs / vpdpbusd directly. Q4_0 and Q5_0 (and with VNNI Q8_0, IQ4_NL)
 * are multiplied as u = q + offset, the integer sum starting at -offset * sum(qa) (wb_arow's
 * nsum), which saves the sign transfer; the other signed levels (IQ4_XS; Q8_0, IQ4_NL on
 * plain AVX2) go as |q| against qa with q's sign. Q3_K's and Q6_K's level offsets (4, 32)
 * are taken out once per block as offset * sum_j sc[j] bsum_r[j]. Integer sums are exact
 * (pairs at most 2 * 128 * 127 < 2^15, or int32 in vpdpbusd); the float sums' order is this
 * file's own, so results match qdot.c's to f32 rounding, not bits.
 * Measured (AMD EPYC, AVX-512 variant, 1 thread, 4096 x 4096, batch 1): Q4_0 0.95 -> 0.45
 * ms, Q8_0 0.75 -> 0.57 ms, Q4_K 0.68 -> 0.58 ms (benchmarks/bench_quantized.py qmatvec).
 * Q8_K (not a weight type in practice) and every type on other ISAs go through decode.c and
 * qdot.c. */
#include "unpack.h"

#if WB_HAS_AVX2

#if WB_HAS_AVX512VNNI && defined(__AVX512VL__)
#define WB_VNNI256 1
#else
#define WB_VNNI256 0
#endif

#define INLINE static inline __attribute__((always_inline))

/* Bytes ahead of the block in hand to ask memory for (the next row's, at a row's end): the
 * hardware prefetcher alone left the loop waiting. Q6_K / Q4_K at batch 1 on the loaded dev
 * machine (AMD EPYC): 1.96 / 1.42 ms without, 1.30 / 1.11 at 2048, 1.20 / 1.05 at 4096, no
 * better at 8192. */
#define WB_RAW_PREFETCH 4096

/* 8 int32 lanes, each the sum of 4 products u[i] * s[i] (u unsigned bytes, s signed). */
INLINE __m256i dot_us(__m256i u, __m256i s) {
#if WB_VNNI256
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* acc + the products u[i] * s[i] in pairs, each pair times its int16 lane of sc. */
INLINE __m256i dot_us_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc) {
#if WB_VNNI256
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc));
#endif
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* ---------------------------------------------------------------- 32-element blocks */
INLINE int legacy_bytes(int type) {
    switch (type) {
    case WB_Q4_0: case WB_IQ4_NL: return 18;
    case WB_Q4_1: return 20;
    case WB_Q5_0: return 22;
    case WB_Q5_1: return 24;
    case WB_Q8_0: return 34;
    default: return 36; /* Q8_1 */
    }
}

/* Where a block's levels (qs) and Q5's high bits (qh) start. */
INLINE int legacy_qs_at(int type) {
    switch (type) {
    case WB_Q4_1: case WB_Q8_1: return 4;
    case WB_Q5_0: return 6;
    case WB_Q5_1: return 8;
    default: return 2;
    }
}

INLINE int legacy_qh_at(int type) { return type == WB_Q5_0 ? 2 : 4; }

/* Levels with an offset block term (dm * s, Q8_1's s = da * sum(qa)): unsigned. */
INLINE int legacy_has_min(int type) { return type == WB_Q4_1 || type == WB_Q5_1; }

/* Signed levels multiplied as u = q + offset (u8, wb_level_offset) against qa, the offset's
 * share taken out by starting the integer sum at nsum (quant.h): no sign transfer. Q8_0 and
 * IQ4_NL only with vpdpbusd (maddubs would saturate: 2 * 255 * 127 > 2^15). */
INLINE int legacy_offset_form(int type) {
    return type == WB_Q4_0 || type == WB_Q5_0 ||
           (WB_VNNI256 && (type == WB_Q8_0 || type == WB_IQ4_NL));
}

/* IQ4_NL's codebook + 128, as unsigned bytes. */
static const uint8_t IQ4_LEVELS_U8[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                          129, 141, 153, 166, 181, 197, 217, 241};

/* The 32 levels of the block at p: u8 where legacy_has_min or legacy_offset_form (then
 * q + offset), else s8. */
INLINE __m256i legacy_levels(int type, const uint8_t *p) {
    switch (type) {
    case WB_Q4_0: return wb_nib32(p + 2);
    case WB_Q4_1: return wb_nib32(p + 4);
    case WB_Q5_0: return wb_nib32_hi(p + 6, wb_u32_at(p + 2));
    case WB_Q5_1: return wb_nib32_hi(p + 8, wb_u32_at(p + 4));
    case WB_Q8_0:
        return legacy_offset_form(type) ? _mm256_xor_si256(load32(p + 2), _mm256_set1_epi8(-128))
                                        : load32(p + 2);
    case WB_IQ4_NL:
        if (legacy_offset_form(type))
            return _mm256_shuffle_epi8(
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)IQ4_LEVELS_U8)),
                wb_nib32(p + 2));
        return wb_codebook32(p + 2);
    default: return load32(p + 4); /* Q8_1 */
    }
}

/* Block b of the row (at p) times every activation row: prod[r] (+)= d da (q . qa) as 8
 * float lanes, mins[r] += dm * s; first: prod starts here. */
INLINE void legacy_block(int type, const uint8_t *p, int64_t b, const wb_arow *a, const int R,
                         __m256 *prod, float *mins, int first) {
    const __m256i q = legacy_levels(type, p);
    const int unsigned_q = legacy_has_min(type) || legacy_offset_form(type);
    const __m256i u = unsigned_q ? q : _mm256_abs_epi8(q);
    const float d = wb_f16_at(p), dm = legacy_has_min(type) ? wb_f16_at(p + 2) : 0.0f;
    for (int r = 0; r < R; r++) {
        __m256i x = load32(a[r].q + 32 * b), i;
        if (legacy_offset_form(type)) {
            __m256i bias = load32(a[r].nsum + 8 * b);
#if WB_VNNI256
            i = _mm256_dpbusd_epi32(bias, u, x);
#else
            i = _mm256_add_epi32(bias, dot_us(u, x));
#endif
        } else {
            i = dot_us(u, unsigned_q ? x : _mm256_sign_epi8(x, q));
        }
        __m256 v = _mm256_cvtepi32_ps(i);
        __m256 s = _mm256_set1_ps(d * a[r].d[b]);
        prod[r] = first ? _mm256_mul_ps(v, s) : _mm256_fmadd_ps(v, s, prod[r]);
        if (legacy_has_min(type)) mins[r] += dm * a[r].s[b];
    }
}

#if WB_HAS_AVX512 && WB_HAS_AVX512VNNI
/* AVX-512: two blocks a 512-bit step. The pair's bytes are loaded once and its fields picked
 * out by 16-bit permutes (every field of these layouts starts at an even byte): the nibbles
 * as [qs0, qs0, qs1, qs1], the second copies shifted right by 4, give both blocks' levels in
 * element order; the two f16 scales become [d0 x 8, d1 x 8] (Q8_0: its levels by two 256-bit
 * loads, which measured 2x faster than a two-source vpermt2w at 4096 x 4096 on AMD EPYC
 * with AVX-512). Every level in the offset form
 * (u = q + offset, or unsigned with mins), one vpdpbusd per row and step; the block's 8
 * int32 lanes meet its 8-lane activation scale (dv) and start at its nsum. */
static const int16_t PAIR_IOTA[32] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7,
                                      0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
static const int16_t PAIR_SHIFT[32] = {0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4,
                                       0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4};
/* 16-bit lanes 0-15 = lo, 16-31 = hi (words 8-15 of a d/m index: the second block). */
INLINE __m512i words2(int lo, int hi, __mmask32 second) {
    return _mm512_mask_blend_epi16(second, _mm512_set1_epi16((short)lo),
                                   _mm512_set1_epi16((short)hi));
}

INLINE void legacy_pair512(int type, const uint8_t *p, int64_t b, const wb_arow *a,
                           const int R, __m512 *acc, __m512 *macc) {
    const int bb = legacy_bytes(type), qs = legacy_qs_at(type);
    __m512i A, v;
    if (type == WB_Q8_0) {
        A = _mm512_loadu_si512(p);
        v = _mm512_inserti64x4(_mm512_castsi256_si512(load32(p + 2)), load32(p + 36), 1);
        v = _mm512_xor_si512(v, _mm512_set1_epi8(-128));
    } else {
        A = _mm512_maskz_loadu_epi8(_bzhi_u64(~0ull, (unsigned)(2 * bb)), p);
        const __m512i idx = _mm512_add_epi16(_mm512_loadu_si512(PAIR_IOTA),
                                             words2(qs / 2, (bb + qs) / 2, 0xffff0000u));
        v = _mm512_srlv_epi16(_mm512_permutexvar_epi16(idx, A), _mm512_loadu_si512(PAIR_SHIFT));
        v = _mm512_and_si512(v, _mm512_set1_epi8(15));
        if (type == WB_Q5_0 || type == WB_Q5_1) {
            const int qh = legacy_qh_at(type);
            const uint64_t hi =
                (uint64_t)wb_u32_at(p + qh) | (uint64_t)wb_u32_at(p + bb + qh) << 32;
            v = _mm512_mask_add_epi8(v, _cvtu64_mask64(hi), v, _mm512_set1_epi8(16));
        } else if (type == WB_IQ4_NL) {
            v = _mm512_shuffle_epi8(
                _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)IQ4_LEVELS_U8)), v);
        }
    }
    const __m512 dv = _mm512_cvtph_ps(
        _mm512_castsi512_si256(_mm512_permutexvar_epi16(words2(0, bb / 2, 0xff00u), A)));
    __m512 mv = _mm512_setzero_ps();
    if (legacy_has_min(type))
        mv = _mm512_cvtph_ps(
            _mm512_castsi512_si256(_mm512_permutexvar_epi16(words2(1, bb / 2 + 1, 0xff00u), A)));
    for (int r = 0; r < R; r++) {
        const __m512i x = _mm512_loadu_si512(a[r].q + 32 * b);
        const __m512i start = legacy_has_min(type) ? _mm512_setzero_si512()
                                                   : _mm512_loadu_si512(a[r].nsum + 8 * b);
        const __m512 i = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, v, x));
        acc[r] = _mm512_fmadd_ps(i, _mm512_mul_ps(dv, _mm512_loadu_ps(a[r].dv + 8 * b)), acc[r]);
        if (legacy_has_min(type))
            macc[r] = _mm512_fmadd_ps(mv, _mm512_loadu_ps(a[r].sv + 8 * b), macc[r]);
    }
}

/* Pairs in twos with two accumulators a row (the fma latency, not the loads, bound one). */
INLINE void legacy_rows512(int type, const uint8_t *raw, const wb_arow *a, const int R,
                           int64_t k, float *out) {
    const int bytes = legacy_bytes(type);
    const int64_t nb = k / 32;
    __m512 acc0[WB_QDOT_ROWS], acc1[WB_QDOT_ROWS], macc[WB_QDOT_ROWS];
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = macc[r] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        const uint8_t *p = raw + b * bytes;
        for (int o = 0; o < 4 * bytes; o += 64)
            __builtin_prefetch(p + WB_RAW_PREFETCH + o, 0, 3);
        legacy_pair512(type, p, b, a, R, acc0, macc);
        legacy_pair512(type, p + 2 * bytes, b + 2, a, R, acc1, macc);
    }
    if (b + 2 <= nb) {
        legacy_pair512(type, raw + b * bytes, b, a, R, acc0, macc);
        b += 2;
    }
    for (int r = 0; r < R; r++)
        out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) +
                 _mm512_reduce_add_ps(macc[r]);
    if (b < nb) { /* an odd last block */
        __m256 prod[WB_QDOT_ROWS];
        float mins[WB_QDOT_ROWS] = {0};
        legacy_block(type, raw + b * bytes, b, a, R, prod, mins, 1);
        for (int r = 0; r < R; r++) out[r] += hsum(prod[r]) + mins[r];
    }
}
#endif

/* Blocks go in pairs whose products are summed before they meet the accumulator: half the
 * dependent adds, so the loop runs at the speed of its loads, not of the add latency. */
INLINE void legacy_rows(int type, const uint8_t *raw, const wb_arow *a, const int R, int64_t k,
                        float *out) {
#if WB_HAS_AVX512 && WB_HAS_AVX512VNNI
    if (type != WB_Q8_1) {
        legacy_rows512(type, raw, a, R, k, out);
        return;
    }
#endif
    const int bytes = legacy_bytes(type);
    const int64_t nb = k / 32;
    __m256 acc[WB_QDOT_ROWS];
    float mins[WB_QDOT_ROWS];
    for (int r = 0; r < R; r++) {
        acc[r] = _mm256_setzero_ps();
        mins[r] = 0.0f;
    }
    for (int64_t b = 0; b < nb; b += 2) {
        __m256 prod[WB_QDOT_ROWS];
        for (int o = 0; o < 2 * bytes; o += 64)
            __builtin_prefetch(raw + b * bytes + WB_RAW_PREFETCH + o, 0, 3);
        legacy_block(type, raw + b * bytes, b, a, R, prod, mins, 1);
        if (b + 1 < nb) legacy_block(type, raw + (b + 1) * bytes, b + 1, a, R, prod, mins, 0);
        for (int r = 0; r < R; r++) acc[r] = _mm256_add_ps(acc[r], prod[r]);
    }
    for (int r = 0; r < R; r++) out[r] = hsum(acc[r]) + mins[r];
}

/* --------------------------------------------------------------- 256-element blocks */
INLINE int kquant_bytes(int type) {
    switch (type) {
    case WB_Q2_K: return 84;
    case WB_Q3_K: return 110;
    case WB_Q4_K: return 144;
    case WB_Q5_K: return 176;
    case WB_Q6_K: return 210;
    default: return 136; /* IQ4_XS */
    }
}

/* Where the block's f16 d is (Q2_K, Q4_K, Q5_K: dmin follows it). */
INLINE int kquant_d_at(int type) {
    return type == WB_Q2_K ? 80 : type == WB_Q3_K ? 108 : type == WB_Q6_K ? 208 : 0;
}

INLINE int kquant_has_dmin(int type) {
    return type == WB_Q2_K || type == WB_Q4_K || type == WB_Q5_K;
}

/* Q3_K, Q6_K: levels are u - 2^shift for the u8 levels u the kernel multiplies. */
INLINE int kquant_offset_shift(int type) { return type == WB_Q3_K ? 2 : type == WB_Q6_K ? 5 : 0; }

/* int16 lanes 0-7 = v[i], 8-15 = v[j], for 16 bytes v (signed: sign-extended). */
INLINE __m256i pair_scales(__m128i v, int i, int j) {
    const __m128i pick = _mm_set_epi64x(0x0101010101010101ll * j, 0x0101010101010101ll * i);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(v, pick));
}

/* sumi[r] += the 32 levels u (u8) of elements 256b + e.. times row r, in two scale halves. */
INLINE void add_group(__m256i *sumi, __m256i u, __m256i sc, const wb_arow *a, const int R,
                      int64_t b, int e) {
    for (int r = 0; r < R; r++)
        sumi[r] = dot_us_scaled(sumi[r], u, load32(a[r].q + 256 * b + e), sc);
}

/* int16 lane j of each 128-bit half of v in every lane (bytes 2j, 2j + 1 by pshufb). */
INLINE __m256i word_to_all(__m256i v, int j) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* Q4_K / Q5_K: sub-block 2c is the low nibbles of qs[32c:32c+32], 2c+1 the high ones; bit 4
 * of element 32s + l (Q5_K) is bit s of qh[l]; one scale and min per 32. */
INLINE void k45_block(int five, const uint8_t *p, int64_t b, const wb_arow *a, const int R,
                      __m256i *sumi, __m256i *mins) {
    const __m256i m4 = _mm256_set1_epi8(15);
    uint8_t sc[8], mn[8];
    wb_k4_scales(p + 4, sc, mn);
    /* the 8 scales as int16 in both 128-bit lanes; scale j to every lane by one pshufb (a
     * broadcast from a scalar took 2-3 instructions: 20% of the block at batch 1) */
    const __m256i sc16 =
        _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    const uint8_t *qs = p + (five ? 48 : 16);
    const __m256i qh = five ? load32(p + 16) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i v = load32(qs + 32 * c);
        __m256i lo = _mm256_and_si256(v, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (five) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(wb_field(qh, 2 * c, 1), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(wb_field(qh, 2 * c + 1, 1), 4));
        }
        add_group(sumi, lo, word_to_all(sc16, 2 * c), a, R, b, 64 * c);
        add_group(sumi, hi, word_to_all(sc16, 2 * c + 1), a, R, b, 64 * c + 32);
    }
    /* each 32-element min covers two 16-element activation sums */
    const __m128i twice = _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    __m128i m8 = _mm_loadl_epi64((const __m128i *)mn);
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(m8, twice));
    for (int r = 0; r < R; r++) mins[r] = _mm256_madd_epi16(mn16, load32(a[r].bsum + 16 * b));
}

/* Q6_K: element 128h + 32g + l has its low nibble in ql[64h + 32(g % 2) + l] (high nibble
 * for g >= 2), its top 2 bits at bits 2g of qh[32h + l]; level - 32; int8 scale per 16. */
INLINE void q6_block(const uint8_t *p, int64_t b, const wb_arow *a, const int R, __m256i *sumi) {
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m128i sc = _mm_loadu_si128((const __m128i *)(p + 192));
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = load32(p + 64 * h), l1 = load32(p + 64 * h + 32);
        const __m256i hv = load32(p + 128 + 32 * h);
        for (int g = 0; g < 4; g++) {
            const __m256i l = g & 1 ? l1 : l0;
            const __m256i lo = _mm256_and_si256(g < 2 ? l : _mm256_srli_epi16(l, 4), m4);
            const __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(wb_field(hv, 2 * g, 3), 4));
            add_group(sumi, u, pair_scales(sc, 8 * h + 2 * g, 8 * h + 2 * g + 1), a, R, b,
                      128 * h + 32 * g);
        }
    }
}

/* Q3_K's 16 scales: 4 low bits from the nibbles of s[0:8] (j < 8: low ones), 2 top bits at
 * bits 2(j / 4) of s[8 + j % 4]; minus 32. */
INLINE __m128i q3_scales(const uint8_t *s) {
    const __m128i m4 = _mm_set1_epi8(15);
    const __m128i lo8 = _mm_loadl_epi64((const __m128i *)s);
    const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4),
                                           _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
    /* dword q holds s[8:12]; shifted by 2q, byte m's bits 0-1 are j = 4q + m's top bits */
    const __m128i tops = _mm_srlv_epi32(_mm_set1_epi32((int)wb_u32_at(s + 8)),
                                        _mm_set_epi32(6, 4, 2, 0));
    const __m128i top = _mm_slli_epi16(_mm_and_si128(tops, _mm_set1_epi8(3)), 4);
    return _mm_sub_epi8(_mm_or_si128(low, top), _mm_set1_epi8(32));
}

/* Q2_K (levels: 2-bit crumbs, scale and min nibbles per 16) and Q3_K (crumbs + 4 * the
 * hmask bit, level - 4, 6-bit scale per 16): element 128h + 32j + l is bits 2j of
 * qs[32h + l], its Q3_K high bit is bit 4h + j of hmask[l]. */
INLINE void crumb_block(int three, const uint8_t *p, int64_t b, const wb_arow *a, const int R,
                        __m256i *sumi, __m256i *mins) {
    const __m128i sm = _mm_loadu_si128((const __m128i *)p);
    const __m128i sc = three ? q3_scales(p + 96) : _mm_and_si128(sm, _mm_set1_epi8(15));
    const __m256i hm = three ? load32(p) : _mm256_setzero_si256();
    const uint8_t *qs = p + (three ? 32 : 16);
    for (int h = 0; h < 2; h++) {
        const __m256i v = load32(qs + 32 * h);
        for (int j = 0; j < 4; j++) {
            __m256i u = wb_field(v, 2 * j, 3);
            if (three) u = _mm256_or_si256(u, _mm256_slli_epi16(wb_field(hm, 4 * h + j, 1), 2));
            add_group(sumi, u, pair_scales(sc, 8 * h + 2 * j, 8 * h + 2 * j + 1), a, R, b,
                      128 * h + 32 * j);
        }
    }
    if (!three) {
        const __m128i mn = _mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(15));
        const __m256i mn16 = _mm256_cvtepu8_epi16(mn);
        for (int r = 0; r < R; r++) mins[r] = _mm256_madd_epi16(mn16, load32(a[r].bsum + 16 * b));
    }
}

/* IQ4_XS: signed codebook levels, 6-bit scale - 32 per 32. */
INLINE void iq4xs_block(const uint8_t *p, int64_t b, const wb_arow *a, const int R,
                        __m256i *sumi) {
    const uint32_t sh = (uint32_t)p[2] | (uint32_t)p[3] << 8;
    for (int i = 0; i < 8; i++) {
        const int ls = ((p[4 + i / 2] >> (4 * (i % 2))) & 15) | (((sh >> (2 * i)) & 3) << 4);
        const __m256i q = wb_codebook32(p + 8 + 16 * i), u = _mm256_abs_epi8(q);
        const __m256i s = _mm256_set1_epi16((short)(ls - 32));
        for (int r = 0; r < R; r++) {
            const __m256i x = load32(a[r].q + 256 * b + 32 * i);
            sumi[r] = dot_us_scaled(sumi[r], u, _mm256_sign_epi8(x, q), s);
        }
    }
}

/* One 256-element block times every row: sumi[r] = sum_j sc[j] (u_j . qa_r,j) exactly, and
 * as int32 lanes mins[r] = sum_j mn[j] bsum_r[j] (the types with dmin) or the offset term
 * 2^shift sum_j sc[j] bsum_r[j] (Q3_K, Q6_K). */
INLINE void kquant_block(int type, const uint8_t *p, int64_t b, const wb_arow *a, const int R,
                         __m256i *sumi, __m256i *mins) {
    for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
    switch (type) {
    case WB_Q2_K: crumb_block(0, p, b, a, R, sumi, mins); break;
    case WB_Q3_K: crumb_block(1, p, b, a, R, sumi, mins); break;
    case WB_Q4_K: k45_block(0, p, b, a, R, sumi, mins); break;
    case WB_Q5_K: k45_block(1, p, b, a, R, sumi, mins); break;
    case WB_Q6_K: q6_block(p, b, a, R, sumi); break;
    default: iq4xs_block(p, b, a, R, sumi); break;
    }
    const int shift = kquant_offset_shift(type);
    if (shift) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(
            type == WB_Q3_K ? q3_scales(p + 96) : _mm_loadu_si128((const __m128i *)(p + 192)));
        for (int r = 0; r < R; r++)
            mins[r] = _mm256_sll_epi32(_mm256_madd_epi16(sc16, load32(a[r].bsum + 16 * b)),
                                       _mm_cvtsi32_si128(shift));
    }
}

INLINE void kquant_rows(int type, const uint8_t *raw, const wb_arow *a, const int R, int64_t k,
                        float *out) {
    const int bytes = kquant_bytes(type);
    const int64_t nb = k / 256;
    __m256 acc[WB_QDOT_ROWS];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = raw + b * bytes;
        for (int o = 0; o < bytes; o += 64) __builtin_prefetch(p + WB_RAW_PREFETCH + o, 0, 3);
        __m256i sumi[WB_QDOT_ROWS], mins[WB_QDOT_ROWS];
        kquant_block(type, p, b, a, R, sumi, mins);
        const float d = wb_f16_at(p + kquant_d_at(type));
        const float dmin = kquant_has_dmin(type) ? wb_f16_at(p + kquant_d_at(type) + 2) : 0.0f;
        for (int r = 0; r < R; r++) {
            __m256i s = kquant_offset_shift(type) ? _mm256_sub_epi32(sumi[r], mins[r]) : sumi[r];
            if (kquant_has_dmin(type)) { /* w = d sc q - dmin mn */
                __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a[r].d[b]));
                v = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins[r]), _mm256_set1_ps(dmin * a[r].d[b]),
                                     v);
                acc[r] = _mm256_add_ps(acc[r], v);
            } else {
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a[r].d[b]),
                                         acc[r]);
            }
        }
    }
    for (int r = 0; r < R; r++) out[r] = hsum(acc[r]);
}

/* ------------------------------------------------------------------------- dispatch */
/* One function per (type, row count): the constant arguments let the compiler drop every
 * other type's branch and keep the per-row accumulators in registers. */
#define ROWS_FN(name, family, type)                                                           \
    static void name(const uint8_t *raw, const wb_arow *a, int nrows, int64_t k, float *out) { \
        switch (nrows) {                                                                      \
        case 4: family(type, raw, a, 4, k, out); break;                                       \
        case 3: family(type, raw, a, 3, k, out); break;                                       \
        case 2: family(type, raw, a, 2, k, out); break;                                       \
        default: family(type, raw, a, 1, k, out); break;                                      \
        }                                                                                     \
    }

ROWS_FN(rows_q4_0, legacy_rows, WB_Q4_0)
ROWS_FN(rows_q4_1, legacy_rows, WB_Q4_1)
ROWS_FN(rows_q5_0, legacy_rows, WB_Q5_0)
ROWS_FN(rows_q5_1, legacy_rows, WB_Q5_1)
ROWS_FN(rows_q8_0, legacy_rows, WB_Q8_0)
ROWS_FN(rows_q8_1, legacy_rows, WB_Q8_1)
ROWS_FN(rows_iq4_nl, legacy_rows, WB_IQ4_NL)
ROWS_FN(rows_q2_k, kquant_rows, WB_Q2_K)
ROWS_FN(rows_q3_k, kquant_rows, WB_Q3_K)
ROWS_FN(rows_q4_k, kquant_rows, WB_Q4_K)
ROWS_FN(rows_q5_k, kquant_rows, WB_Q5_K)
ROWS_FN(rows_q6_k, kquant_rows, WB_Q6_K)
ROWS_FN(rows_iq4_xs, kquant_rows, WB_IQ4_XS)

wb_qdot_raw_fn wb_qdot_raw_find(const wb_qtype *t) {
    switch (t->type_id) {
    case WB_Q4_0: return rows_q4_0;
    case WB_Q4_1: return rows_q4_1;
    case WB_Q5_0: return rows_q5_0;
    case WB_Q5_1: return rows_q5_1;
    case WB_Q8_0: return rows_q8_0;
    case WB_Q8_1: return rows_q8_1;
    case WB_IQ4_NL: return rows_iq4_nl;
    case WB_Q2_K: return rows_q2_k;
    case WB_Q3_K: return rows_q3_k;
    case WB_Q4_K: return rows_q4_k;
    case WB_Q5_K: return rows_q5_k;
    case WB_Q6_K: return rows_q6_k;
    case WB_IQ4_XS: return rows_iq4_xs;
    default: return NULL;
    }
}

#else
wb_qdot_raw_fn wb_qdot_raw_find(const wb_qtype *t) {
    (void)t;
    return NULL;
}
#endif
