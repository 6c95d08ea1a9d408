/* The activations that a convolution applies as it stores its outputs (conv_direct.c's tiles,
 * conv.c's swap01 rows) and that elementwise.c's unary kernels compute: one definition of
 * each, so that an activation fused into a convolution equals the separate op. The codes are
 * backends/cpu/conv.py's ``ACTIVATIONS``. */
#ifndef WB_ACTIVATION_H
#define WB_ACTIVATION_H

#include "wb_native.h" /* Python.h first: it sets feature macros math.h reads */
#include "vmath.h"

#include <math.h>

enum { WB_ACT_NONE, WB_ACT_SILU, WB_ACT_RELU, WB_ACT_GELU, WB_ACT_GELU_ERF, WB_ACT_COUNT };

/* silu(x) = x / (1 + exp(-x)); silu(-inf) = -0, the limit (not -inf / inf) */
static inline float wb_silu32(float x) {
    return x == -__builtin_inff() ? -0.0f : x / (1.0f + wb_expf(-x));
}
static inline double wb_silu64(double x) {
    return x == -__builtin_inf() ? -0.0 : x / (1.0 + exp(-x));
}
/* relu keeps NaN */
static inline float wb_relu32(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
static inline double wb_relu64(double x) { return (x > 0.0 || x != x) ? x : 0.0; }
static inline double wb_gelu_tanh64(double x) {
    if (x < -40.0) return -0.0;
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static inline double wb_gelu_erf64(double x) {
    /* x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2: no cancellation for negative x; -0 below
     * -37.5, where the result would soon be subnormal (from -37.616), as the f32 kernel */
    if (x < -37.5) return -0.0;
    return x * 0.5 * erfc(-x * 0.70710678118654752);
}

/* x[i] = act(x[i]) for i < n, one plain loop per activation (so each vectorises). */
#define WB_ACTIVATE_FN(name, T, SILU, RELU, GELU, GELU_ERF)                                   \
    static inline void name(T *restrict x, Py_ssize_t n, int act) {                           \
        switch (act) {                                                                        \
        case WB_ACT_SILU:                                                                     \
            for (Py_ssize_t i = 0; i < n; i++) x[i] = SILU(x[i]);                             \
            break;                                                                            \
        case WB_ACT_RELU:                                                                     \
            for (Py_ssize_t i = 0; i < n; i++) x[i] = RELU(x[i]);                             \
            break;                                                                            \
        case WB_ACT_GELU:                                                                     \
            for (Py_ssize_t i = 0; i < n; i++) x[i] = GELU(x[i]);                             \
            break;                                                                            \
        case WB_ACT_GELU_ERF:                                                                 \
            for (Py_ssize_t i = 0; i < n; i++) x[i] = GELU_ERF(x[i]);                         \
            break;                                                                            \
        default:                                                                              \
            break;                                                                            \
        }                                                                                     \
    }
WB_ACTIVATE_FN(wb_activate_f32, float, wb_silu32, wb_relu32, wb_gelu_tanhf, wb_gelu_erff)
WB_ACTIVATE_FN(wb_activate_f64, double, wb_silu64, wb_relu64, wb_gelu_tanh64, wb_gelu_erf64)
#undef WB_ACTIVATE_FN

#endif
