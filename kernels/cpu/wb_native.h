/* Shared by every native CPU kernel: Python, the ISA macros of this variant, OpenMP, and the
 * half-precision conversions (f16 and bf16 are computed in f32 registers, rounded once). */
#ifndef WB_NATIVE_H
#define WB_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* WB_TEAM(t, nt): inside a parallel region, this thread's index t and the team's size nt
 * (0 and 1 without OpenMP). */
#ifdef _OPENMP
#include <omp.h>
#define WB_HAS_OPENMP 1
#define WB_TEAM(t, nt) int t = omp_get_thread_num(), nt = omp_get_num_threads()
#else
#define WB_HAS_OPENMP 0
#define WB_TEAM(t, nt) int t = 0, nt = 1
#endif

#if defined(__AVX2__)
#define WB_HAS_AVX2 1
#else
#define WB_HAS_AVX2 0
#endif
#if defined(__FMA__)
#define WB_HAS_FMA 1
#else
#define WB_HAS_FMA 0
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__)
#define WB_HAS_AVX512 1
#else
#define WB_HAS_AVX512 0
#endif
#if defined(__AVX512VNNI__)
#define WB_HAS_AVX512VNNI 1
#else
#define WB_HAS_AVX512VNNI 0
#endif
#if defined(__ARM_FEATURE_DOTPROD)
#define WB_HAS_DOTPROD 1
#else
#define WB_HAS_DOTPROD 0
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

/* Each kernel family adds its functions to the module (module.c calls these). */
int wb_register_core(PyObject *module);
int wb_register_quant(PyObject *module);

/* Threads every parallel kernel uses (core/threads.c; set from Python by set_num_threads). */
int wb_get_num_threads(void);

/* ---- half precision: IEEE binary16 and bfloat16 <-> f32 (round to nearest even) ---------- */
static inline float wb_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t wb_f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40); /* quiet NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

static inline float wb_f16_to_f32(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#elif defined(__aarch64__)
    __fp16 x;
    memcpy(&x, &h, 2);
    return (float)x;
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400u));
            bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
#endif
}

static inline uint16_t wb_f32_to_f16(float f) {
#if defined(__F16C__)
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#elif defined(__aarch64__)
    __fp16 x = (__fp16)f;
    uint16_t h;
    memcpy(&h, &x, 2);
    return h;
#else
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint32_t sign = (bits >> 16) & 0x8000u, abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);                 /* NaN */
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                /* overflow: inf */
    if (abs < 0x38800000u) {                                                  /* subnormal or 0 */
        float a;
        memcpy(&a, &abs, 4);
        a += 0.5f; /* 2^-1 puts the f16 subnormal's bits at the bottom of the mantissa */
        uint32_t r;
        memcpy(&r, &a, 4);
        return (uint16_t)(sign | (r - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to nearest even */
    return (uint16_t)(sign | (abs >> 13));
#endif
}

#endif /* WB_NATIVE_H */
