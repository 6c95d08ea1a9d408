/* A 16 x 16 transpose of 32-bit items in AVX-512 registers, shared by the panel kernels that
 * interleave rows (qgemm.c: weight levels; qgemm_amx.c: bf16 activation pairs). */
#ifndef WB_QUANT_TRANSPOSE_H
#define WB_QUANT_TRANSPOSE_H

#include "quant.h"

#if WB_HAS_AVX512
/* o[e] = dword e of each of the 16 vectors r[c] (a 16 x 16 transpose of 32-bit items). */
static inline __attribute__((always_inline)) void wb_transpose16(__m512i *r) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* r[4i + x], 128-bit lane L: item 4L + x of rows 4i.. */
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int x = 0; x < 4; x++) {
        const __m512i a = _mm512_shuffle_i32x4(r[x], r[4 + x], 0x88);
        const __m512i b = _mm512_shuffle_i32x4(r[x], r[4 + x], 0xdd);
        const __m512i c = _mm512_shuffle_i32x4(r[8 + x], r[12 + x], 0x88);
        const __m512i d = _mm512_shuffle_i32x4(r[8 + x], r[12 + x], 0xdd);
        t[x] = _mm512_shuffle_i32x4(a, c, 0x88);
        t[4 + x] = _mm512_shuffle_i32x4(b, d, 0x88);
        t[8 + x] = _mm512_shuffle_i32x4(a, c, 0xdd);
        t[12 + x] = _mm512_shuffle_i32x4(b, d, 0xdd);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

#endif

#endif /* WB_QUANT_TRANSPOSE_H */
