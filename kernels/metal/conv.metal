// Generated from kernels/gpu/conv.h by
// `python -m workbench.backends.gpu.metal_sources`: do not edit.

// Metal prelude of the portable kernel dialect (see common.h): what the dialect's words mean
// for the Metal shading language. Generated kernels/metal/*.metal start with it.
#include <metal_stdlib>
using namespace metal;

#define WB_TARGET_METAL 1
#define WB_HAS_F64 0  // Metal has no double: f64 kernels are CUDA-only

#define WB_KERNEL kernel void
#define WB_KERNEL_BOUNDED(N) [[max_total_threads_per_threadgroup(N)]] kernel void
#define WB_FN inline
#define WB_DEVICE inline
#define WB_OUT(T, name, slot) device T* name [[buffer(slot)]]
#define WB_IN(T, name, slot) device const T* name [[buffer(slot)]]
#define WB_ARG(T, name, slot) constant T& name [[buffer(slot)]]
#define WB_THREAD_ARGS , uint wb_gid [[thread_position_in_grid]], \
    uint wb_tid [[thread_index_in_threadgroup]], uint wb_nthreads [[threads_per_threadgroup]], \
    uint wb_bid [[threadgroup_position_in_grid]], uint wb_nblocks [[threadgroups_per_grid]], \
    uint wb_gsize [[threads_per_grid]]
#define WB_THREAD_PARAMS , uint wb_tid, uint wb_nthreads
#define WB_THREAD_PASS , wb_tid, wb_nthreads
#define WB_LAYOUT_REF WB_REF(Layout)
#define WB_GLOBAL_ID (wb_i64)wb_gid
#define WB_GLOBAL_SIZE (wb_i64)wb_gsize
#define WB_BLOCK_ID wb_bid
#define WB_BLOCKS wb_nblocks
#define WB_THREAD wb_tid
#define WB_THREADS wb_nthreads
#define WB_SHARED threadgroup
#define WB_SHARED_PTR(T) threadgroup T*
#define WB_BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup)
#define WB_DYNAMIC_SHARED(T, name)
#define WB_DYNAMIC_SHARED_ARG(T, name) , threadgroup T* name [[threadgroup(0)]]
#define WB_GLOBAL device
#define WB_REF(T) constant T&

typedef long wb_i64;
typedef ulong wb_u64;
typedef char wb_i8;
typedef float wb_wide;
typedef half f16;
typedef bfloat bf16;

#define WB_F16_TO_F32(x) ((float)(x))
#define WB_BF16_TO_F32(x) ((float)(x))
#define WB_F32_TO_F16(x) ((half)(x))
#define WB_F32_TO_BF16(x) ((bfloat)(x))
#define WB_F16_BITS_TO_F32(bits) ((float)as_type<half>((ushort)(bits)))

// v from the lane o above in the 32-lane simdgroup. 64-bit values move as two 32-bit halves
// and 1- and 2-byte ones widened (types every MSL version shuffles).
template <typename T> inline T wb_shuffle_down(T v, int o) {
    return simd_shuffle_down(v, (ushort)o);
}
inline long wb_shuffle_down(long v, int o) {
    return as_type<long>(simd_shuffle_down(as_type<uint2>(v), (ushort)o));
}
inline ulong wb_shuffle_down(ulong v, int o) {
    return as_type<ulong>(simd_shuffle_down(as_type<uint2>(v), (ushort)o));
}
inline uchar wb_shuffle_down(uchar v, int o) {
    return (uchar)simd_shuffle_down((ushort)v, (ushort)o);
}
inline short wb_shuffle_down(short v, int o) {
    return (short)simd_shuffle_down((int)v, (ushort)o);
}

// base[i] += v atomically, with relaxed order (only the final sums are read).
//   f32: atomic_float (MSL 3.0, which the prelude needs anyway: bfloat is MSL 3.1);
//   i32: atomic_int; i64: Metal has no 64-bit atomic add on most GPUs, so the low word is
//   added with a 32-bit atomic and its carry into the high word (exact modulo 2^64, like
//   one 64-bit add, once every add has finished);
//   f16, bf16: a compare-and-swap loop on the 32-bit word holding the element (the buffer
//   must start 4-byte aligned), adding in f32 and rounding to the half type.
inline void wb_atomic_add(device float* base, long i, float v) {
    atomic_fetch_add_explicit((device atomic_float*)(base + i), v, memory_order_relaxed);
}
inline void wb_atomic_add(device int* base, long i, int v) {
    atomic_fetch_add_explicit((device atomic_int*)(base + i), v, memory_order_relaxed);
}
inline void wb_atomic_add(device long* base, long i, long v) {
    device atomic_uint* word = (device atomic_uint*)(base + i);
    uint lo = (uint)v, hi = (uint)((ulong)v >> 32);
    uint old = atomic_fetch_add_explicit(word, lo, memory_order_relaxed);
    uint carry = old + lo < old ? 1u : 0u;
    atomic_fetch_add_explicit(word + 1, hi + carry, memory_order_relaxed);
}
template <typename H> inline void wb_atomic_add_half(device H* base, long i, H v) {
    device atomic_uint* word = (device atomic_uint*)base + (i >> 1);
    uint shift = (uint)(i & 1) * 16u;
    uint old = atomic_load_explicit(word, memory_order_relaxed);
    for (;;) {
        H now = as_type<H>((ushort)(old >> shift));
        uint sum = (uint)as_type<ushort>((H)((float)now + (float)v));
        uint next = (old & ~(0xffffu << shift)) | (sum << shift);
        if (atomic_compare_exchange_weak_explicit(word, &old, next, memory_order_relaxed,
                                                  memory_order_relaxed))
            return;
    }
}
inline void wb_atomic_add(device half* base, long i, half v) { wb_atomic_add_half(base, i, v); }
inline void wb_atomic_add(device bfloat* base, long i, bfloat v) {
    wb_atomic_add_half(base, i, v);
}

// ---- per-target maths: the Metal standard library has no erf, log1p, expm1 ------------------
// erf: Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, as f32 needs).
inline float erf(float x) {
    float z = fabs(x);
    float t = 1.0f / (1.0f + 0.3275911f * z);
    float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
              t * (-1.453152027f + t * 1.061405429f))));
    return copysign(1.0f - p * exp(-z * z), x);
}
// log1p and expm1 without cancellation near 0 (Goldberg's and Kahan's tricks).
inline float log1p(float x) {
    float u = 1.0f + x;
    return u == 1.0f ? x : log(u) * (x / (u - 1.0f));
}
inline float expm1(float x) {
    float u = exp(x);
    if (u == 1.0f) return x;
    float um1 = u - 1.0f;
    return um1 == -1.0f ? -1.0f : um1 * (x / log(u));
}

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

// Convolution as im2col + GEMM (the backend's BLAS) and its adjoint col2im (transposed
// convolution and the input gradient). x is NCHW through an UNMERGED 4-d Layout; `col` is
// contiguous (C * kh * kw, Ho * Wo) for image `img`, rows ordered (c, i, j) like the weight
// (O, C, kh, kw).
// Written in the portable dialect (common.h).

struct ConvGeom {
    wb_i64 C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo;
};

#define CONV_KERNELS(name, T)                                                       \
    WB_KERNEL im2col_##name(WB_OUT(T, col, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), \
                            WB_ARG(wb_i64, img, 3), WB_ARG(ConvGeom, g, 4) WB_THREAD_ARGS) { \
        wb_i64 cols = g.Ho * g.Wo;                                                  \
        wb_i64 n = g.C * g.kh * g.kw * cols;                                        \
        WB_LOOP(e, n) {                                                             \
            wb_i64 r = e / cols, p = e - r * cols;                                  \
            wb_i64 c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;      \
            wb_i64 oy = p / g.Wo, ox = p - oy * g.Wo;                               \
            wb_i64 y = oy * g.sh - g.ph + i * g.dh, xx = ox * g.sw - g.pw + j * g.dw; \
            T v = Store<T>::from(0);                                                \
            if (y >= 0 && y < g.H && xx >= 0 && xx < g.W)                           \
                v = x[lx.offset + img * lx.strides[0] + c * lx.strides[1] +         \
                      y * lx.strides[2] + xx * lx.strides[3]];                      \
            col[e] = v;                                                             \
        }                                                                           \
    }                                                                               \
    /* image (C, H, W) contiguous = sum of the col entries that im2col read from each pixel */ \
    WB_KERNEL col2im_##name(WB_OUT(T, out, 0), WB_IN(T, col, 1),                    \
                            WB_ARG(ConvGeom, g, 2) WB_THREAD_ARGS) {                \
        typedef Acc<T>::type C;                                                     \
        wb_i64 n = g.C * g.H * g.W;                                                 \
        wb_i64 cols = g.Ho * g.Wo;                                                  \
        WB_LOOP(e, n) {                                                             \
            wb_i64 c = e / (g.H * g.W), y = (e / g.W) % g.H, xx = e % g.W;          \
            C acc = 0;                                                              \
            for (wb_i64 i = 0; i < g.kh; ++i) {                                     \
                wb_i64 ty = y + g.ph - i * g.dh;                                    \
                if (ty < 0 || ty % g.sh) continue;                                  \
                wb_i64 oy = ty / g.sh;                                              \
                if (oy >= g.Ho) continue;                                           \
                for (wb_i64 j = 0; j < g.kw; ++j) {                                 \
                    wb_i64 tx = xx + g.pw - j * g.dw;                               \
                    if (tx < 0 || tx % g.sw) continue;                              \
                    wb_i64 ox = tx / g.sw;                                          \
                    if (ox >= g.Wo) continue;                                       \
                    wb_i64 r = (c * g.kh + i) * g.kw + j;                           \
                    acc += wb_load(col[r * cols + oy * g.Wo + ox]);                 \
                }                                                                   \
            }                                                                       \
            out[e] = Store<T>::from(acc);                                           \
        }                                                                           \
    }
WB_FLOAT_DTYPES(CONV_KERNELS)
