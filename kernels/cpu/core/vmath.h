/* f32 transcendental functions written so that gcc -O3 vectorises loops calling them: no
 * branches (both sides are computed and selected), no libm calls, bit tricks through memcpy.
 * Special values follow C99 Annex F: exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(x < 0)
 * = NaN, tanh(±inf) = ±1, erf(±inf) = ±1, NaN propagates. Accuracy: a few ulp. */
#ifndef WB_VMATH_H
#define WB_VMATH_H

#include <stdint.h>
#include <string.h>

/* a * b + c in one rounding where the ISA has fused multiply-add (faster, and more accurate
 * polynomials); two roundings elsewhere. */
#if defined(__FMA__) || defined(__aarch64__)
#define WB_FMA(a, b, c) __builtin_fmaf(a, b, c)
#else
#define WB_FMA(a, b, c) ((a) * (b) + (c))
#endif

static inline uint32_t wb_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float wb_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* exp(x) = 2^n exp(r), n = round(x log2 e), |r| <= ln2 / 2, exp(r) = 1 + r + r^2 q(r) with q
 * of degree 4 fitted to (exp(r) - 1 - r) / r^2 (weighted least squares on Chebyshev nodes,
 * relative error under 4e-9). n is found with the 1.5 * 2^23 rounding trick (no float->int
 * cast, so NaN is harmless), r by Cody-Waite in two fused steps, and 2^n is applied as two
 * factors so that results down to the subnormals (n >= -150) are exact. Inputs are clamped to
 * [-104, 88.8]: exp(-104) rounds to 0 and exp(88.8) to inf. */
static inline float wb_expf(float x) {
    float xc = x < -104.0f ? -104.0f : x;
    xc = x > 88.8f ? 88.8f : xc; /* x, not xc: through a known xc gcc threads the branches, and
                                  * loops of wb_expf over a vector of lanes stay scalar */
    const float shift = 12582912.0f; /* 1.5 * 2^23 */
    const float t = WB_FMA(xc, 1.44269504088896341f, shift);
    const float n = t - shift;
    const int32_t ni = (int32_t)(wb_f2u(t) - wb_f2u(shift)); /* n as an integer, in [-150, 128] */
    float r = WB_FMA(n, -0.693145751953125f, xc);             /* ln 2, high bits: n r exact */
    r = WB_FMA(n, -1.428606765330187045e-06f, r);             /* ln 2, low bits */
    float p = 1.3814613e-3f;
    p = WB_FMA(p, r, 8.3687101e-3f);
    p = WB_FMA(p, r, 4.1668389e-2f);
    p = WB_FMA(p, r, 0.16666521f);
    p = WB_FMA(p, r, 0.49999994f);
    p = WB_FMA(p, r, 1.0f);
    p = WB_FMA(p, r, 1.0f);
    /* each in [-75, 64]: normal powers of two (>> is floor(ni / 2) in gcc and clang: one
     * instruction, where / needs a sign fix; either split gives the same product) */
    const int32_t n1 = ni >> 1, n2 = ni - n1;
    const float s1 = wb_u2f((uint32_t)(n1 + 127) << 23), s2 = wb_u2f((uint32_t)(n2 + 127) << 23);
    const float out = p * s1 * s2;
    return x != x ? x : out;
}

/* log(x) = e ln 2 + log(m), x = m 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(s),
 * s = (m - 1) / (m + 1), |s| <= 0.1716, by its series to s^11. Subnormals are scaled by 2^23. */
static inline float wb_logf(float x) {
    const int sub = x < 1.17549435e-38f;
    const float xs = sub ? x * 8388608.0f : x;
    const uint32_t ix = wb_f2u(xs);
    int32_t e = (int32_t)((ix >> 23) & 0xff) - 127 - (sub ? 23 : 0);
    float m = wb_u2f((ix & 0x007fffffu) | 0x3f800000u);
    const int big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    e += big;
    const float f = m - 1.0f, s = f / (2.0f + f), z = s * s;
    float p = 1.0f / 11.0f;
    p = p * z + 1.0f / 9.0f;
    p = p * z + 1.0f / 7.0f;
    p = p * z + 1.0f / 5.0f;
    p = p * z + 1.0f / 3.0f;
    const float hi = 2.0f * s, logm = hi + hi * z * p;
    const float ef = (float)e;
    float out = ef * 0.693145751953125f + (logm + ef * 1.428606765330187045e-06f);
    out = x == 0.0f ? -__builtin_inff() : out;
    out = x < 0.0f ? __builtin_nanf("") : out;
    out = x == __builtin_inff() ? x : out;
    return x != x ? x : out;
}

/* tanh: for |x| < 0.55 the odd Taylor series to x^17 (terms shrink ~8x each, truncation < 1e-8
 * relative); beyond, 1 - 2 / (exp(2|x|) + 1), which has no cancellation there. */
static inline float wb_tanhf(float x) {
    const float a = x < 0.0f ? -x : x, z = x * x;
    float p = 6404582.0f / 10854718875.0f;
    p = p * z - 929569.0f / 638512875.0f;
    p = p * z + 21844.0f / 6081075.0f;
    p = p * z - 1382.0f / 155925.0f;
    p = p * z + 62.0f / 2835.0f;
    p = p * z - 17.0f / 315.0f;
    p = p * z + 2.0f / 15.0f;
    p = p * z - 1.0f / 3.0f;
    const float small = x + x * z * p;
    const float large = 1.0f - 2.0f / (wb_expf(2.0f * a) + 1.0f);
    const float big = x < 0.0f ? -large : large;
    /* copysign keeps tanh(-0) = -0 (x + x z p rounds -0 + +0 to +0); NaN: a < 0.55 is false
     * and big is NaN */
    return a < 0.55f ? __builtin_copysignf(small, x) : big;
}

/* Abramowitz & Stegun 7.1.26: erfc(z) ~ t P(t) exp(-z^2), t = 1/(1 + p z), P(t) = a1 + t (a2 +
 * ... + t a5) for z >= 0, |error| <= 1.5e-7 (absolute). wb_erfc_tp is the factor t P(t). */
static inline float wb_erfc_tp(float z) {
    const float t = 1.0f / (1.0f + 0.3275911f * z);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    return p * t;
}

static inline float wb_erfc_as(float z) { return wb_erfc_tp(z) * wb_expf(-z * z); }

/* erf: the Maclaurin series to x^19 for |x| < 0.75 (relative accuracy where erf is small),
 * 1 - erfc by A&S 7.1.26 beyond. */
static inline float wb_erff(float x) {
    const float a = x < 0.0f ? -x : x, z = x * x;
    /* 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)) */
    float p = -1.0f / (362880.0f * 19.0f);
    p = p * z + 1.0f / (40320.0f * 17.0f);
    p = p * z - 1.0f / (5040.0f * 15.0f);
    p = p * z + 1.0f / (720.0f * 13.0f);
    p = p * z - 1.0f / (120.0f * 11.0f);
    p = p * z + 1.0f / (24.0f * 9.0f);
    p = p * z - 1.0f / (6.0f * 7.0f);
    p = p * z + 1.0f / (2.0f * 5.0f);
    p = p * z - 1.0f / 3.0f;
    p = p * z + 1.0f;
    const float small = 1.12837916709551257f * x * p;
    /* 1 - erfc(9) rounds to 1; the cap keeps inf out of t and subnormals out of exp */
    const float ac = a > 9.0f ? 9.0f : a;
    const float large = 1.0f - wb_erfc_as(ac);
    const float big = x < 0.0f ? -large : large;
    return a < 0.75f ? small : (x != x ? x : big);
}

/* x Phi(x) from a Phi(-a), a = |x|, by A&S: (a/2) t P(t) exp(-a^2/2), the factors multiplied
 * before the exponential, so nothing below FLT_MIN is formed on the way; x Phi(x) = -a Phi(-a)
 * for x < 0 (no cancellation where the result is tiny), x - a Phi(-a) otherwise. Below x = -13,
 * where |x Phi(x)| < 1e-37 (subnormal from -13.146), it is -0, as gelu(-inf): subnormal outputs
 * slow every later product that reads them (a TinyViT 1x1 conv whose input was 3.5%
 * subnormal gelu outputs ran 20x slower in OpenBLAS). a is capped at 13 for the same reason. */
static inline float wb_gelu_erff(float x) {
    const float a = __builtin_fabsf(x); /* +0 for -0, so that gelu(-0) = -0 - 0 = -0 */
    const float ac = a > 13.0f ? 13.0f : a;
    const float z = ac * 0.70710678118654752f;
    const float ae = (0.5f * ac * wb_erfc_tp(z)) * wb_expf(-z * z);
    const float out = x < 0.0f ? -ae : x - ae;
    return x < -13.0f ? -0.0f : out;
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); gelu(-inf) = -0 (not -inf * 0). */
static inline float wb_gelu_tanhf(float x) {
    const float out = 0.5f * x * (1.0f + wb_tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    return x < -20.0f ? -0.0f : out;
}

/* The gated linear unit of an LLM's MLP: act(g) u, act SiLU (g sigma(g)) or the tanh GELU. */
static inline float wb_glu_f(float g, float u, int gelu) {
    return (gelu ? wb_gelu_tanhf(g) : g / (1.0f + wb_expf(-g))) * u;
}

#endif /* WB_VMATH_H */
