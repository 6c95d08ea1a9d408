/* Scalar conversions numpy rounds in one step that a detour through f32 would round twice:
 * f64 -> f16/bf16, and float -> integer with a defined result out of range. */
#ifndef WB_CAST_H
#define WB_CAST_H

#include "nd.h"

/* d rounded to f32 toward zero with the lowest mantissa bit set when bits were lost ("round to
 * odd"): rounding that f32 again to any format at least two bits narrower (f16: 11, bf16: 8)
 * gives the correctly rounded result of d. NaN stays NaN, overflow becomes FLT_MAX | odd. */
static inline float wb_f64_to_f32_odd(double d) {
    float f = (float)d;
    if ((double)f == d || f != f) return f;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (__builtin_fabs((double)f) > __builtin_fabs(d)) u -= 1; /* rounded away: truncate */
    u |= 1u;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t wb_f64_to_f16(double d) { return wb_f32_to_f16(wb_f64_to_f32_odd(d)); }
static inline uint16_t wb_f64_to_bf16(double d) { return wb_f32_to_bf16(wb_f64_to_f32_odd(d)); }

/* Truncation toward zero as C's cast, defined everywhere: values outside the i64 range and NaN
 * give INT64_MIN (what x86's cvttsd2si gives); u32 (and u8 from f64) keep its low bits, as the
 * casts numpy and PyTorch compile to do. */
static inline int64_t wb_f64_to_i64(double x) {
    return (x > -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN;
}

/* The same through i32, as x86's cvttss2si/cvttsd2si with a 32-bit result: values outside the
 * i32 range and NaN give INT32_MIN. numpy and PyTorch compile float -> i8/i16/i32 (and
 * f32/f16 -> u8) to this, so 300.0 -> i8 is 44 and 5e9 -> i8 is 0 in all three. */
static inline int32_t wb_f64_to_i32(double x) {
    return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN;
}

#endif /* WB_CAST_H */
