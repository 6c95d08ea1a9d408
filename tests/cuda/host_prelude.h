// Host prelude of the portable kernel dialect (kernels/gpu/common.h), for tests only: g++
// compiles a family's bodies into a shared library whose kernels run on the CPU.
//
// One host thread runs the whole grid (WB_GLOBAL_ID 0, WB_GLOBAL_SIZE 1), so the grid-stride
// kernels compute exactly what they compute on a GPU. Kernels that cooperate within a block
// (shared memory, barriers, shuffles) cannot run this way: their words are not defined here,
// so such a family fails to compile instead of computing something else.
//
// Every parameter is a reference into the packed argument buffer that the CUDA host code
// builds (backends/gpu/params.py): the test driver passes one pointer per parameter, at the
// offsets of the kernel's PTX parameter list.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

using namespace std;  // the float overloads of the maths functions, as on the GPU targets

#define WB_TARGET_HOST 1
// tests/metal/host_metal.h defines WB_HOST_METAL first: Metal's types (no f64, float scalars)
// and real blocks of threads (its own WB_GLOBAL_ID and block words) instead of one thread.
#ifdef WB_HOST_METAL
#define WB_HAS_F64 0
#else
#define WB_HAS_F64 1
#endif

#define WB_KERNEL extern "C" void
#define WB_KERNEL_BOUNDED(N) extern "C" void
#define WB_FN inline
#define WB_DEVICE inline
#define WB_OUT(T, name, slot) T* const& name
#define WB_IN(T, name, slot) const T* const& name
#define WB_ARG(T, name, slot) const T& name
#define WB_THREAD_ARGS
#define WB_GLOBAL
#define WB_REF(T) const T&
#define WB_LAYOUT_REF WB_REF(Layout)
#ifndef WB_HOST_METAL
#define WB_GLOBAL_ID 0
#define WB_GLOBAL_SIZE 1
#endif

typedef long long wb_i64;
typedef unsigned long long wb_u64;
typedef signed char wb_i8;
#ifdef WB_HOST_METAL
typedef float wb_wide;
#else
typedef double wb_wide;
#endif
typedef _Float16 f16;  // g++ rounds to nearest even, like the GPUs' conversions
struct bf16 {
    unsigned short bits;
};

inline float wb_bf16_to_f32(bf16 x) {
    uint32_t u = (uint32_t)x.bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline bf16 wb_f32_to_bf16(float f) {  // round to nearest even; NaN stays a (quiet) NaN
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{(unsigned short)((u >> 16) | 0x40u)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{(unsigned short)(u >> 16)};
}
#define WB_F16_TO_F32(x) ((float)(x))
#define WB_BF16_TO_F32(x) wb_bf16_to_f32(x)
#define WB_F32_TO_F16(x) ((f16)(x))
#define WB_F32_TO_BF16(x) wb_f32_to_bf16(x)
inline float wb_f16_bits_to_f32(unsigned short bits) {
    f16 h;
    memcpy(&h, &bits, 2);
    return (float)h;
}
#define WB_F16_BITS_TO_F32(bits) wb_f16_bits_to_f32(bits)

// One thread: a plain add (rounded once to T, as an atomic add is).
template <typename T> inline void wb_atomic_add(T* base, wb_i64 i, T v) { base[i] = base[i] + v; }
inline void wb_atomic_add(bf16* base, wb_i64 i, bf16 v) {
    base[i] = wb_f32_to_bf16(wb_bf16_to_f32(base[i]) + wb_bf16_to_f32(v));
}
