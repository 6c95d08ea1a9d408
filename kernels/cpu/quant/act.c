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

void wb_quantize_q8_32(const float *x, int64_t k, int8_t *q, float *d, float *s, int16_t *bsum) {
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
