// The portable kernel dialect: kernel bodies written once, compiled by nvcc (after
// prelude_cuda.h) and by Metal (after prelude_metal.h, see backends/gpu/metal_sources.py).
//
// Words a body uses instead of a target's own: WB_KERNEL (entry point), WB_FN (helper),
// WB_OUT / WB_IN / WB_ARG (parameters: buffers and values, with Metal's buffer slot),
// WB_THREAD_ARGS (closes a parameter list), WB_REF / WB_LAYOUT_REF, WB_GLOBAL (pointers into
// device memory), WB_GLOBAL_ID / WB_GLOBAL_SIZE, the block words (WB_BLOCK_ID, WB_THREAD,
// WB_SHARED, WB_DYNAMIC_SHARED, WB_BARRIER, wb_shuffle_down), wb_atomic_add(base, i, v),
// wb_i64 / wb_u64 / wb_i8 / wb_wide, f16 / bf16 and their WB_*_TO_* conversions. f64 exists
// where WB_HAS_F64 (not on Metal). Anything else a target does differently lives in its
// prelude.
//
// A Layout travels BY VALUE as a kernel parameter (no device allocation per launch):
// ndim, a contiguity flag, the offset and up to WB_MAX_DIMS sizes and strides in ELEMENTS.
// backends/gpu/params.py packs it with the same field order and alignment.
#pragma once

#define WB_MAX_DIMS 8

// WB_IF_F64(code): the code only where the target has f64.
#if WB_HAS_F64
#define WB_IF_F64(...) __VA_ARGS__
#else
#define WB_IF_F64(...)
#endif

struct Layout {
    int ndim;
    int contiguous;
    wb_i64 offset;
    wb_i64 shape[WB_MAX_DIMS];
    wb_i64 strides[WB_MAX_DIMS];
};

// Element offset of the i-th element (C order over layout.shape).
WB_FN wb_i64 wb_offset(WB_LAYOUT_REF l, wb_i64 i) {
    if (l.contiguous) return l.offset + i;
    wb_i64 off = l.offset;
    for (int d = l.ndim - 1; d >= 0; --d) {
        wb_i64 s = l.shape[d];
        wb_i64 q = i / s;
        off += (i - q * s) * l.strides[d];
        i = q;
    }
    return off;
}

// min / max of two values of one type (the targets' own overload sets differ).
template <typename T> WB_FN T wb_min(T a, T b) { return a < b ? a : b; }
template <typename T> WB_FN T wb_max(T a, T b) { return a > b ? a : b; }

#define WB_LOOP(i, n) for (wb_i64 i = WB_GLOBAL_ID; i < (n); i += WB_GLOBAL_SIZE)

typedef unsigned char wb_bool;
typedef wb_i8 i8;
typedef unsigned char u8;
typedef unsigned int u32;
typedef short i16;
typedef int i32;
typedef wb_i64 i64;
typedef float f32;
WB_IF_F64(typedef double f64;)

// Compute type: halves compute in f32, everything else natively.
template <typename T> struct Acc { typedef T type; };
template <> struct Acc<f16> { typedef float type; };
template <> struct Acc<bf16> { typedef float type; };

template <typename T> WB_FN typename Acc<T>::type wb_load(T x) { return x; }
template <> WB_FN float wb_load<f16>(f16 x) { return WB_F16_TO_F32(x); }
template <> WB_FN float wb_load<bf16>(bf16 x) { return WB_BF16_TO_F32(x); }

// Any arithmetic value -> T (halves round to nearest even from f32).
template <typename T> struct Store {
    template <typename S> WB_FN static T from(S x) { return (T)x; }
};
template <> struct Store<f16> {
    template <typename S> WB_FN static f16 from(S x) {
        return WB_F32_TO_F16((float)x);
    }
};
template <> struct Store<bf16> {
    template <typename S> WB_FN static bf16 from(S x) {
        return WB_F32_TO_BF16((float)x);
    }
};

// Every dtype; X(name, type). bool is stored as one byte (0 or 1).
#define WB_INT_DTYPES(X) X(u8, u8) X(u32, u32) X(i8, i8) X(i16, i16) X(i32, i32) X(i64, i64)
#define WB_FLOAT_DTYPES(X) X(f16, f16) X(bf16, bf16) X(f32, f32) WB_IF_F64(X(f64, f64))
#define WB_NUM_DTYPES(X) WB_INT_DTYPES(X) WB_FLOAT_DTYPES(X)
#define WB_ALL_DTYPES(X) X(bool, wb_bool) WB_NUM_DTYPES(X)
