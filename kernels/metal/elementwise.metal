// Generated from kernels/gpu/elementwise.h by
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

// Generated from backends/optable.py by `python -m workbench.backends.optable`:
// do not edit. Each list is K(op, expr, name, T) per op; the kernel sources define K.

#define WB_FLOAT_UNARY(K, name, T) \
    K(exp, exp(x), name, T) \
    K(log, log(x), name, T) \
    K(sin, sin(x), name, T) \
    K(cos, cos(x), name, T) \
    K(tan, tan(x), name, T) \
    K(tanh, tanh(x), name, T) \
    K(abs, fabs(x), name, T) \
    K(neg, -x, name, T) \
    K(recip, (C)1 / x, name, T) \
    K(sqr, x * x, name, T) \
    K(sqrt, sqrt(x), name, T) \
    K(rsqrt, (C)1 / sqrt(x), name, T) \
    K(gelu, (x < (C)0 && isinf(x)) ? -(C)0 : (C)0.5 * x * ((C)1 + tanh((C)0.7978845608028654 * (x + (C)0.044715 * x * x * x))), name, T) \
    K(gelu_erf, (x < (C)0 && isinf(x)) ? -(C)0 : (C)0.5 * x * ((C)1 + erf(x * (C)0.7071067811865476)), name, T) \
    K(erf, erf(x), name, T) \
    K(relu, (x != x || x > (C)0) ? x : (C)0, name, T) \
    K(silu, (x < (C)0 && isinf(x)) ? -(C)0 : x / ((C)1 + exp(-x)), name, T) \
    K(sigmoid, (C)1 / ((C)1 + exp(-x)), name, T) \
    K(ceil, ceil(x), name, T) \
    K(floor, floor(x), name, T) \
    K(round, rint(x), name, T) \
    K(sign, x != x ? x : (C)((x > (C)0) - (x < (C)0)), name, T) \
    K(log1p, log1p(x), name, T) \
    K(expm1, expm1(x), name, T) \
    K(asin, asin(x), name, T) \
    K(acos, acos(x), name, T) \
    K(atan, atan(x), name, T) \
    K(sinh, sinh(x), name, T) \
    K(cosh, cosh(x), name, T) \
    /* end */

#define WB_FLOAT_BOOL_UNARY(K, name, T) \
    K(isnan, x != x, name, T) \
    K(isinf, isinf(x), name, T) \
    /* end */

#define WB_INT_UNARY(K, name, T) \
    K(abs, int_abs(x), name, T) \
    K(neg, (C)(-x), name, T) \
    K(sqr, (C)(x * x), name, T) \
    K(relu, x > (C)0 ? x : (C)0, name, T) \
    K(ceil, x, name, T) \
    K(floor, x, name, T) \
    K(round, x, name, T) \
    K(sign, int_sign(x), name, T) \
    K(bitwise_not, (C)(~x), name, T) \
    /* end */

#define WB_INT_BOOL_UNARY(K, name, T) \
    K(isnan, false, name, T) \
    K(isinf, false, name, T) \
    /* end */

#define WB_ANY_BOOL_UNARY(K, name, T) \
    K(logical_not, x == (C)0, name, T) \
    /* end */

#define WB_FLOAT_BINARY(K, name, T) \
    K(add, a + b, name, T) \
    K(sub, a - b, name, T) \
    K(mul, a * b, name, T) \
    K(div, a / b, name, T) \
    K(maximum, (a != a || a > b) ? a : b, name, T) \
    K(minimum, (a != a || a < b) ? a : b, name, T) \
    K(pow, pow(a, b), name, T) \
    K(floor_div, floor(a / b), name, T) \
    K(remainder, py_remainder(a, b), name, T) \
    K(atan2, atan2(a, b), name, T) \
    K(fmod, fmod(a, b), name, T) \
    K(copysign, copysign(a, b), name, T) \
    /* end */

#define WB_INT_BINARY(K, name, T) \
    K(add, a + b, name, T) \
    K(sub, a - b, name, T) \
    K(mul, a * b, name, T) \
    K(maximum, a > b ? a : b, name, T) \
    K(minimum, a < b ? a : b, name, T) \
    K(pow, int_pow(a, b), name, T) \
    K(floor_div, int_floor_div(a, b), name, T) \
    K(remainder, int_remainder(a, b), name, T) \
    K(fmod, b == (C)0 ? (C)0 : (C)(a % b), name, T) \
    K(bitwise_and, (C)(a & b), name, T) \
    K(bitwise_or, (C)(a | b), name, T) \
    K(bitwise_xor, (C)(a ^ b), name, T) \
    K(left_shift, (b < (C)0 || b >= (C)(sizeof(C) * 8)) ? (C)0 : (C)(a << b), name, T) \
    K(right_shift, (b < (C)0 || b >= (C)(sizeof(C) * 8)) ? (C)(a < (C)0 ? -1 : 0) : (C)(a >> b), name, T) \
    /* end */

#define WB_LOGICAL_BINARY(K, name, T) \
    K(logical_and, (a != (C)0) && (b != (C)0), name, T) \
    K(logical_or, (a != (C)0) || (b != (C)0), name, T) \
    K(logical_xor, (a != (C)0) != (b != (C)0), name, T) \
    /* end */

#define WB_CMP_OPS(K, name, T) \
    K(eq, a == b, name, T) \
    K(ne, a != b, name, T) \
    K(lt, a < b, name, T) \
    K(le, a <= b, name, T) \
    K(gt, a > b, name, T) \
    K(ge, a >= b, name, T) \
    /* end */

#define WB_WIDENING_REDUCE(K, name, T) \
    K(sum, a + b, (A)0, name, T) \
    K(prod, a * b, (A)1, name, T) \
    /* end */

#define WB_VALUE_REDUCE(K, name, T) \
    K(max, (a != a || a > b) ? a : b, wb_lowest<A>(), name, T) \
    K(min, (a != a || a < b) ? a : b, wb_highest<A>(), name, T) \
    /* end */

#define WB_BOOL_REDUCE(K, name, T) \
    K(any, (A)((a != (A)0) || (b != (A)0)), (A)0, name, T) \
    K(all, (A)((a != (A)0) && (b != (A)0)), (A)1, name, T) \
    /* end */

#define WB_ARG_REDUCE(K, name, T) \
    K(argmax, a > b, name, T) \
    K(argmin, a < b, name, T) \
    /* end */

// Elementwise kernels: unary, binary, scalar, comparison, where, affine, powf, elu, clamp,
// cast, strided copy and fill. Inputs are strided Layouts (broadcast = stride 0); outputs are
// contiguous (copy/fill write through a Layout). Names: <family>_<op>_<dtype>, cast_<src>_<dst>.
// Written in the portable dialect (common.h); the op lists come from optable.h.

// Float compute type of a dtype: halves and f32 -> float, f64 and integers -> wb_wide.
template <typename T> struct FAcc { typedef wb_wide type; };
template <> struct FAcc<f16> { typedef float type; };
template <> struct FAcc<bf16> { typedef float type; };
template <> struct FAcc<f32> { typedef float type; };

template <typename C> WB_FN C py_remainder(C a, C b) {
    C r = fmod(a, b);
    if (r != (C)0 && ((r < (C)0) != (b < (C)0))) r += b;
    return r;
}
template <typename C> WB_FN C int_floor_div(C a, C b) {
    if (b == (C)0) return (C)0;
    C q = a / b;
    if ((a % b != (C)0) && ((a < (C)0) != (b < (C)0))) q -= (C)1;
    return q;
}
template <typename C> WB_FN C int_remainder(C a, C b) {
    if (b == (C)0) return (C)0;
    C r = a % b;
    if (r != (C)0 && ((r < (C)0) != (b < (C)0))) r += b;
    return r;
}
template <typename C> WB_FN C int_pow(C a, C b) {
    if (b < (C)0) return a == (C)1 ? (C)1 : (C)0;
    C r = 1;
    while (b > (C)0) {
        if (b & (C)1) r *= a;
        a *= a;
        b >>= 1;
    }
    return r;
}
template <typename C> WB_FN C int_abs(C x) { return x < (C)0 ? (C)(-x) : x; }
template <typename C> WB_FN C int_sign(C x) {
    return (C)((x > (C)0) - (x < (C)0));
}
template <typename C> WB_FN C wb_scalar(wb_wide s) { return (C)(wb_i64)s; }
template <> WB_FN float wb_scalar<float>(wb_wide s) { return (float)s; }
WB_IF_F64(template <> WB_FN double wb_scalar<double>(double s) { return s; })

// ---- unary ----------------------------------------------------------------------------
#define UNARY_KERNEL(op, expr, name, T)                                             \
    WB_KERNEL unary_##op##_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2), \
                                  WB_ARG(Layout, la, 3) WB_THREAD_ARGS) {           \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = Store<T>::from(expr);                                          \
        }                                                                           \
    }

#define BOOL_UNARY_KERNEL(op, expr, name, T)                                        \
    WB_KERNEL unary_##op##_##name(WB_OUT(wb_bool, out, 0), WB_IN(T, a, 1),          \
                                  WB_ARG(wb_i64, n, 2), WB_ARG(Layout, la, 3) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }

#define INST_FLOAT_UNARY(name, T)                                                   \
    WB_FLOAT_UNARY(UNARY_KERNEL, name, T) WB_FLOAT_BOOL_UNARY(BOOL_UNARY_KERNEL, name, T)
#define INST_INT_UNARY(name, T)                                                     \
    WB_INT_UNARY(UNARY_KERNEL, name, T) WB_INT_BOOL_UNARY(BOOL_UNARY_KERNEL, name, T)
#define INST_LOGICAL_NOT(name, T) WB_ANY_BOOL_UNARY(BOOL_UNARY_KERNEL, name, T)

WB_FLOAT_DTYPES(INST_FLOAT_UNARY)
WB_INT_DTYPES(INST_INT_UNARY)
WB_ALL_DTYPES(INST_LOGICAL_NOT)

// ---- binary (operands broadcast to the output's shape through their layouts) -----------
// Binary kernels store their result as O: T for arithmetic, wb_bool for the logical ops.
#define BINARY_KERNEL_TO(op, expr, name, T, O)                                      \
    WB_KERNEL binary_##op##_##name(WB_OUT(O, out, 0), WB_IN(T, pa, 1), WB_IN(T, pb, 2), \
                                   WB_ARG(wb_i64, n, 3), WB_ARG(Layout, la, 4),     \
                                   WB_ARG(Layout, lb, 5) WB_THREAD_ARGS) {          \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C a = wb_load(pa[wb_offset(la, i)]);                                    \
            C b = wb_load(pb[wb_offset(lb, i)]);                                    \
            out[i] = Store<O>::from(expr);                                          \
        }                                                                           \
    }
#define BINARY_KERNEL(op, expr, name, T) BINARY_KERNEL_TO(op, expr, name, T, T)
#define BOOL_BINARY_KERNEL(op, expr, name, T) BINARY_KERNEL_TO(op, expr, name, T, wb_bool)

// x op s (or s op x when reverse); s arrives as wb_wide, converted to the compute type.
#define SCALAR_KERNEL_TO(op, expr, name, T, O)                                      \
    WB_KERNEL bscalar_##op##_##name(WB_OUT(O, out, 0), WB_IN(T, px, 1), WB_ARG(wb_i64, n, 2), \
                                    WB_ARG(Layout, lx, 3), WB_ARG(wb_wide, s, 4),   \
                                    WB_ARG(int, reverse, 5) WB_THREAD_ARGS) {       \
        typedef Acc<T>::type C;                                                     \
        C sv = wb_scalar<C>(s);                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(px[wb_offset(lx, i)]);                                    \
            C a = reverse ? sv : x;                                                 \
            C b = reverse ? x : sv;                                                 \
            out[i] = Store<O>::from(expr);                                          \
        }                                                                           \
    }
#define SCALAR_KERNEL(op, expr, name, T) SCALAR_KERNEL_TO(op, expr, name, T, T)
#define BOOL_SCALAR_KERNEL(op, expr, name, T) SCALAR_KERNEL_TO(op, expr, name, T, wb_bool)

#define INST_FLOAT_BINARY(name, T)                                                  \
    WB_FLOAT_BINARY(BINARY_KERNEL, name, T) WB_FLOAT_BINARY(SCALAR_KERNEL, name, T)
#define INST_INT_BINARY(name, T)                                                    \
    WB_INT_BINARY(BINARY_KERNEL, name, T) WB_INT_BINARY(SCALAR_KERNEL, name, T)
#define INST_LOGICAL_BINARY(name, T)                                                \
    WB_LOGICAL_BINARY(BOOL_BINARY_KERNEL, name, T) WB_LOGICAL_BINARY(BOOL_SCALAR_KERNEL, name, T)

WB_FLOAT_DTYPES(INST_FLOAT_BINARY)
WB_INT_DTYPES(INST_INT_BINARY)
WB_ALL_DTYPES(INST_LOGICAL_BINARY)

// ---- comparisons (bool out); scalars compare in the float compute type -------------------
#define CMP_KERNEL(op, expr, name, T)                                               \
    WB_KERNEL cmp_##op##_##name(WB_OUT(wb_bool, out, 0), WB_IN(T, pa, 1), WB_IN(T, pb, 2), \
                                WB_ARG(wb_i64, n, 3), WB_ARG(Layout, la, 4),        \
                                WB_ARG(Layout, lb, 5) WB_THREAD_ARGS) {             \
        WB_LOOP(i, n) {                                                             \
            Acc<T>::type a = wb_load(pa[wb_offset(la, i)]);                         \
            Acc<T>::type b = wb_load(pb[wb_offset(lb, i)]);                         \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }
#define CMPS_KERNEL(op, expr, name, T)                                              \
    WB_KERNEL cmps_##op##_##name(WB_OUT(wb_bool, out, 0), WB_IN(T, pa, 1),          \
                                 WB_ARG(wb_i64, n, 2), WB_ARG(Layout, la, 3),       \
                                 WB_ARG(wb_wide, s, 4) WB_THREAD_ARGS) {            \
        typedef FAcc<T>::type C;                                                    \
        C b = (C)s;                                                                 \
        WB_LOOP(i, n) {                                                             \
            C a = (C)wb_load(pa[wb_offset(la, i)]);                                 \
            out[i] = (wb_bool)(expr);                                               \
        }                                                                           \
    }
#define INST_CMP(name, T) WB_CMP_OPS(CMP_KERNEL, name, T) WB_CMP_OPS(CMPS_KERNEL, name, T)
WB_ALL_DTYPES(INST_CMP)

// ---- where, affine, powf, elu, clamp -------------------------------------------------------
#define WHERE_KERNEL(name, T)                                                       \
    WB_KERNEL where_##name(WB_OUT(T, out, 0), WB_IN(wb_bool, c, 1), WB_IN(T, a, 2),  \
                           WB_IN(T, b, 3), WB_ARG(wb_i64, n, 4), WB_ARG(Layout, lc, 5), \
                           WB_ARG(Layout, la, 6), WB_ARG(Layout, lb, 7) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) {                                                             \
            out[i] = c[wb_offset(lc, i)] ? a[wb_offset(la, i)] : b[wb_offset(lb, i)]; \
        }                                                                           \
    }
WB_ALL_DTYPES(WHERE_KERNEL)

#define AFFINE_KERNEL(name, T)                                                      \
    WB_KERNEL affine_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2), \
                            WB_ARG(Layout, la, 3), WB_ARG(wb_wide, mul, 4),          \
                            WB_ARG(wb_wide, add, 5) WB_THREAD_ARGS) {                \
        typedef FAcc<T>::type C;                                                    \
        C m = (C)mul, d = (C)add;                                                   \
        WB_LOOP(i, n) { out[i] = Store<T>::from((C)wb_load(a[wb_offset(la, i)]) * m + d); } \
    }
WB_NUM_DTYPES(AFFINE_KERNEL)

#define CLAMP_KERNEL(name, T)                                                       \
    WB_KERNEL clamp_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2),  \
                           WB_ARG(Layout, la, 3), WB_ARG(wb_wide, lo, 4),            \
                           WB_ARG(wb_wide, hi, 5), WB_ARG(int, has_lo, 6),           \
                           WB_ARG(int, has_hi, 7) WB_THREAD_ARGS) {                  \
        typedef FAcc<T>::type C;                                                    \
        WB_LOOP(i, n) {                                                             \
            T v = a[wb_offset(la, i)];                                              \
            C x = (C)wb_load(v);                                                    \
            if (has_lo && x < (C)lo) v = Store<T>::from(lo);                        \
            else if (has_hi && x > (C)hi) v = Store<T>::from(hi);                   \
            out[i] = v;                                                             \
        }                                                                           \
    }
WB_NUM_DTYPES(CLAMP_KERNEL)

#define FLOAT_PARAM_KERNELS(name, T)                                                \
    WB_KERNEL powf_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2),   \
                          WB_ARG(Layout, la, 3), WB_ARG(wb_wide, e, 4) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) { out[i] = Store<T>::from(pow(wb_load(a[wb_offset(la, i)]), (C)e)); } \
    }                                                                               \
    WB_KERNEL elu_##name(WB_OUT(T, out, 0), WB_IN(T, a, 1), WB_ARG(wb_i64, n, 2),    \
                         WB_ARG(Layout, la, 3), WB_ARG(wb_wide, alpha, 4) WB_THREAD_ARGS) { \
        typedef Acc<T>::type C;                                                     \
        WB_LOOP(i, n) {                                                             \
            C x = wb_load(a[wb_offset(la, i)]);                                     \
            out[i] = Store<T>::from(x > (C)0 ? x : (C)alpha * expm1(x));            \
        }                                                                           \
    }
WB_FLOAT_DTYPES(FLOAT_PARAM_KERNELS)

// ---- casts: cast_<src>_<dst> ----------------------------------------------------------------
#define CAST_KERNEL(sname, S, dname, D)                                             \
    WB_KERNEL cast_##sname##_##dname(WB_OUT(D, out, 0), WB_IN(S, a, 1),             \
                                     WB_ARG(wb_i64, n, 2), WB_ARG(Layout, la, 3) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) { out[i] = Store<D>::from(wb_load(a[wb_offset(la, i)])); }    \
    }
#define CAST_TO_BOOL(sname, S)                                                      \
    WB_KERNEL cast_##sname##_bool(WB_OUT(wb_bool, out, 0), WB_IN(S, a, 1),          \
                                  WB_ARG(wb_i64, n, 2), WB_ARG(Layout, la, 3) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) { out[i] = (wb_bool)(wb_load(a[wb_offset(la, i)]) != 0); }     \
    }
#define CAST_FROM(sname, S)                                                         \
    CAST_TO_BOOL(sname, S)                                                          \
    CAST_KERNEL(sname, S, u8, u8) CAST_KERNEL(sname, S, u32, u32)                   \
    CAST_KERNEL(sname, S, i8, i8) CAST_KERNEL(sname, S, i16, i16)                   \
    CAST_KERNEL(sname, S, i32, i32)                                                 \
    CAST_KERNEL(sname, S, i64, i64) CAST_KERNEL(sname, S, f16, f16)                 \
    CAST_KERNEL(sname, S, bf16, bf16) CAST_KERNEL(sname, S, f32, f32)               \
    WB_IF_F64(CAST_KERNEL(sname, S, f64, f64))
WB_ALL_DTYPES(CAST_FROM)

// ---- strided copy and fill, by element size -------------------------------------------------
#define COPY_KERNELS(bytes, T)                                                      \
    WB_KERNEL copy_b##bytes(WB_OUT(T, dst, 0), WB_ARG(Layout, ld, 1), WB_IN(T, src, 2), \
                            WB_ARG(Layout, ls, 3), WB_ARG(wb_i64, n, 4) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) { dst[wb_offset(ld, i)] = src[wb_offset(ls, i)]; }            \
    }                                                                               \
    WB_KERNEL fill_b##bytes(WB_OUT(T, dst, 0), WB_ARG(Layout, ld, 1), WB_ARG(wb_i64, n, 2), \
                            WB_ARG(T, value, 3) WB_THREAD_ARGS) {                    \
        WB_LOOP(i, n) { dst[wb_offset(ld, i)] = value; }                            \
    }
COPY_KERNELS(1, unsigned char)
COPY_KERNELS(2, unsigned short)
COPY_KERNELS(4, unsigned int)
COPY_KERNELS(8, wb_u64)
