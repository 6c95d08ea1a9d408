// Generated from kernels/gpu/reduce.h by
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

// Block (threadgroup) reductions in the portable dialect, for kernels that give one block to
// each row: every thread folds its share of the row, then the block folds the threads'
// partials with warp (simdgroup) shuffles and one shared slot per warp. The combining ops
// are the op table's reductions (optable.h): wb_reduce_<op>::combine(a, b), ::identity<A>().
// Blocks must be a multiple of 32 threads, at most 1024 (32 warps of 32 lanes).

// The identities of max and min: the lowest and highest value of the accumulator type.
template <typename A> WB_FN A wb_lowest();
template <typename A> WB_FN A wb_highest();
#define WB_LIMITS(T, lo, hi)                                                        \
    template <> WB_FN T wb_lowest<T>() { return lo; }                               \
    template <> WB_FN T wb_highest<T>() { return hi; }
WB_LIMITS(float, -INFINITY, INFINITY)
WB_IF_F64(WB_LIMITS(double, -(double)INFINITY, (double)INFINITY))
WB_LIMITS(wb_bool, 0, 255)  // also u8 (the same C type)
WB_LIMITS(u32, 0u, 0xffffffffu)
WB_LIMITS(i8, -128, 127)
WB_LIMITS(i16, -32768, 32767)
WB_LIMITS(i32, -2147483647 - 1, 2147483647)
WB_LIMITS(i64, -9223372036854775807L - 1, 9223372036854775807L)

#define WB_REDUCE_FUNCTOR(op, combine_expr, identity_expr, name, T)                 \
    struct wb_reduce_##op {                                                         \
        template <typename A> WB_FN static A combine(A a, A b) { return combine_expr; } \
        template <typename A> WB_FN static A identity() { return identity_expr; }   \
    };
WB_WIDENING_REDUCE(WB_REDUCE_FUNCTOR, _, _)
WB_VALUE_REDUCE(WB_REDUCE_FUNCTOR, _, _)
WB_BOOL_REDUCE(WB_REDUCE_FUNCTOR, _, _)

// Op over the 32 lanes of a warp: lane 0 ends with the result.
template <typename Op, typename A> WB_FN A wb_warp_reduce(A v) {
    for (int o = 16; o > 0; o >>= 1) v = Op::combine(v, wb_shuffle_down(v, o));
    return v;
}

// Op over every thread's v, returned to all of them; buf holds 32 values.
template <typename Op, typename A>
WB_DEVICE A wb_block_reduce(A v, WB_SHARED_PTR(A) buf WB_THREAD_PARAMS) {
    v = wb_warp_reduce<Op>(v);
    int lane = WB_THREAD & 31, warp = WB_THREAD >> 5;
    if (lane == 0) buf[warp] = v;
    WB_BARRIER();
    if (warp == 0) {
        v = WB_THREAD < (WB_THREADS >> 5) ? buf[lane] : Op::template identity<A>();
        v = wb_warp_reduce<Op>(v);
        if (lane == 0) buf[0] = v;
    }
    WB_BARRIER();
    A r = buf[0];
    WB_BARRIER();  // buf is free again when this returns
    return r;
}
template <typename A> WB_DEVICE A wb_block_sum(A v, WB_SHARED_PTR(A) buf WB_THREAD_PARAMS) {
    return wb_block_reduce<wb_reduce_sum>(v, buf WB_THREAD_PASS);
}
template <typename A> WB_DEVICE A wb_block_max(A v, WB_SHARED_PTR(A) buf WB_THREAD_PARAMS) {
    return wb_block_reduce<wb_reduce_max>(v, buf WB_THREAD_PASS);
}

// Reductions over the LAST axis of a (M, K) view: the host permutes the reduced dims to the end
// of the input Layout, so row m, column k is element m * K + k of that Layout. One block per
// row (grid-stride over rows, a multiple of 32 threads): each thread folds its columns, then
// block.h folds the threads. The ops and their maths are the op table's (optable.h):
// reduce_<op>_<in dtype>; sum/prod write f16/bf16/f32/f64 as the input, integers and bool as
// i64; max/min keep the dtype; argmax/argmin write i64; any/all write bool.
// Also: cumsum, and the stable sorts (in shared memory, or in global memory for long rows).
// Written in the portable dialect (common.h).

// Sum/prod accumulator: float for halves and f32, double for f64, i64 for integers and bool.
template <typename T> struct SumAcc { typedef i64 type; };
template <> struct SumAcc<f16> { typedef float type; };
template <> struct SumAcc<bf16> { typedef float type; };
template <> struct SumAcc<f32> { typedef float type; };
WB_IF_F64(template <> struct SumAcc<f64> { typedef double type; };)
template <typename T> struct SumOut { typedef i64 type; };
template <> struct SumOut<f16> { typedef f16 type; };
template <> struct SumOut<bf16> { typedef bf16 type; };
template <> struct SumOut<f32> { typedef f32 type; };
WB_IF_F64(template <> struct SumOut<f64> { typedef f64 type; };)
// The value type max/min compare in.
template <typename T> struct CmpAcc { typedef typename Acc<T>::type type; };

// out[row] = the op over row `row`, accumulated in A and written as O.
#define REDUCE_KERNEL(op, O, A, name, T)                                            \
    WB_KERNEL reduce_##op##_##name(WB_OUT(O, out, 0), WB_IN(T, in, 1), WB_ARG(wb_i64, M, 2), \
                                   WB_ARG(wb_i64, K, 3), WB_ARG(Layout, l, 4) WB_THREAD_ARGS) { \
        WB_SHARED A buf[32];                                                        \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            A acc = wb_reduce_##op::identity<A>();                                  \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS)                      \
                acc = wb_reduce_##op::combine(acc, (A)wb_load(in[wb_offset(l, row * K + k)])); \
            acc = wb_block_reduce<wb_reduce_##op>(acc, buf WB_THREAD_PASS);         \
            if (WB_THREAD == 0) out[row] = Store<O>::from(acc);                     \
        }                                                                           \
    }
#define WIDENING_KERNEL(op, combine, identity, name, T)                             \
    REDUCE_KERNEL(op, SumOut<T>::type, SumAcc<T>::type, name, T)
#define VALUE_KERNEL(op, combine, identity, name, T)                                \
    REDUCE_KERNEL(op, T, CmpAcc<T>::type, name, T)
#define BOOL_KERNEL(op, combine, identity, name, T)                                 \
    REDUCE_KERNEL(op, wb_bool, CmpAcc<T>::type, name, T)
#define INST_REDUCE(name, T)                                                        \
    WB_WIDENING_REDUCE(WIDENING_KERNEL, name, T) WB_VALUE_REDUCE(VALUE_KERNEL, name, T) \
    WB_BOOL_REDUCE(BOOL_KERNEL, name, T)
WB_ALL_DTYPES(INST_REDUCE)

// ---- argmax / argmin: the first index of the max (min); a NaN counts as the largest and
// smallest value. wb_arg_<op>::beats(a, b) is the op table's "a beats b".
#define WB_ARG_FUNCTOR(op, beats_expr, name, T)                                     \
    struct wb_arg_##op {                                                            \
        template <typename A> WB_FN static bool beats(A a, A b) { return beats_expr; } \
    };
WB_ARG_REDUCE(WB_ARG_FUNCTOR, _, _)

// Does value w at index wi replace v at vi? (index -1: no value yet)
template <typename Op, typename A> WB_FN bool arg_replaces(A w, wb_i64 wi, A v, wb_i64 vi) {
    if (wi < 0) return false;
    if (vi < 0) return true;
    if (v != v) return w != w && wi < vi;  // a NaN held: only an earlier NaN replaces it
    return w != w || Op::beats(w, v) || (w == v && wi < vi);
}

// A value and its index (i < 0: none yet), folded by arg_fold.
template <typename A> struct ArgBest {
    A v;
    wb_i64 i;
};
template <typename Op, typename A> WB_FN ArgBest<A> arg_fold(ArgBest<A> best, A w, wb_i64 wi) {
    if (arg_replaces<Op>(w, wi, best.v, best.i)) {
        best.v = w;
        best.i = wi;
    }
    return best;
}
template <typename Op, typename A> WB_FN ArgBest<A> arg_warp(ArgBest<A> b) {
    for (int o = 16; o > 0; o >>= 1)
        b = arg_fold<Op>(b, wb_shuffle_down(b.v, o), wb_shuffle_down(b.i, o));
    return b;
}
// The best index over every thread's (v, i) (block.h's scheme, for pairs), to all threads.
template <typename Op, typename A>
WB_DEVICE wb_i64 arg_block(ArgBest<A> b, WB_SHARED_PTR(A) vals,
                           WB_SHARED_PTR(wb_i64) idxs WB_THREAD_PARAMS) {
    b = arg_warp<Op>(b);
    int lane = WB_THREAD & 31, warp = WB_THREAD >> 5;
    if (lane == 0) {
        vals[warp] = b.v;
        idxs[warp] = b.i;
    }
    WB_BARRIER();
    if (warp == 0) {
        b.i = -1;
        if (WB_THREAD < (WB_THREADS >> 5)) {
            b.v = vals[lane];
            b.i = idxs[lane];
        }
        b = arg_warp<Op>(b);
        if (lane == 0) idxs[0] = b.i;
    }
    WB_BARRIER();
    wb_i64 r = idxs[0];
    WB_BARRIER();
    return r;
}

#define ARG_KERNEL(op, beats, name, T)                                              \
    WB_KERNEL reduce_##op##_##name(WB_OUT(i64, out, 0), WB_IN(T, in, 1), WB_ARG(wb_i64, M, 2), \
                                   WB_ARG(wb_i64, K, 3), WB_ARG(Layout, l, 4) WB_THREAD_ARGS) { \
        typedef CmpAcc<T>::type A;                                                  \
        WB_SHARED A vals[32];                                                       \
        WB_SHARED wb_i64 idxs[32];                                                  \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            ArgBest<A> b;                                                           \
            b.v = 0;                                                                \
            b.i = -1;                                                               \
            for (wb_i64 k = WB_THREAD; k < K; k += WB_THREADS)                      \
                b = arg_fold<wb_arg_##op>(b, (A)wb_load(in[wb_offset(l, row * K + k)]), k); \
            wb_i64 best = arg_block<wb_arg_##op>(b, vals, idxs WB_THREAD_PASS);     \
            if (WB_THREAD == 0) out[row] = best < 0 ? 0 : best;                     \
        }                                                                           \
    }
#define INST_ARG(name, T) WB_ARG_REDUCE(ARG_KERNEL, name, T)
WB_ALL_DTYPES(INST_ARG)

// ---- cumsum: inclusive scan along the last axis of (M, K); one thread per row (the host
// permutes the scan dim last in both Layouts, the output Layout being the permuted
// contiguous result).
#define CUMSUM_KERNEL(name, T)                                                      \
    WB_KERNEL cumsum_##name(WB_OUT(SumOut<T>::type, out, 0), WB_ARG(Layout, lo, 1), \
                            WB_IN(T, in, 2), WB_ARG(Layout, li, 3), WB_ARG(wb_i64, M, 4), \
                            WB_ARG(wb_i64, K, 5) WB_THREAD_ARGS) {                  \
        typedef SumAcc<T>::type A;                                                  \
        WB_LOOP(row, M) {                                                           \
            A acc = 0;                                                              \
            for (wb_i64 k = 0; k < K; ++k) {                                        \
                acc += (A)wb_load(in[wb_offset(li, row * K + k)]);                  \
                out[wb_offset(lo, row * K + k)] = Store<SumOut<T>::type>::from(acc); \
            }                                                                       \
        }                                                                           \
    }
WB_ALL_DTYPES(CUMSUM_KERNEL)

// ---- sort: stable sort of each row of (M, K) (K <= 1024): a bitonic network in shared
// memory over (value, index) keys, so equal values keep their order; NaN sorts as the largest
// value. Shared memory: P * (8 + sizeof(compute type)) bytes, P = the power of two >= K
// (the host's plan.sort_shared_bytes).
template <typename C> WB_FN bool sort_before(C va, wb_i64 ia, C vb, wb_i64 ib, int desc) {
    if (ia < 0) return false;  // padding goes last
    if (ib < 0) return true;
    bool na = va != va, nb = vb != vb;
    if (na || nb) {
        if (na && nb) return ia < ib;
        return desc ? na : nb;  // NaN first when descending, last when ascending
    }
    if (va != vb) return desc ? va > vb : va < vb;
    return ia < ib;
}

#define SORT_KERNEL(name, T)                                                        \
    WB_KERNEL sort_##name(WB_OUT(T, vals, 0), WB_OUT(i64, idx, 1), WB_ARG(Layout, lo, 2), \
                          WB_IN(T, in, 3), WB_ARG(Layout, li, 4), WB_ARG(wb_i64, M, 5), \
                          WB_ARG(wb_i64, K, 6), WB_ARG(wb_i64, P, 7),               \
                          WB_ARG(int, desc, 8) WB_DYNAMIC_SHARED_ARG(wb_i64, smem)  \
                          WB_THREAD_ARGS) {                                         \
        typedef CmpAcc<T>::type C;                                                  \
        WB_DYNAMIC_SHARED(wb_i64, smem);                                            \
        WB_SHARED_PTR(wb_i64) si = smem;                                            \
        WB_SHARED_PTR(C) sv = (WB_SHARED_PTR(C))(smem + P);                         \
        for (wb_i64 row = WB_BLOCK_ID; row < M; row += WB_BLOCKS) {                 \
            for (wb_i64 i = WB_THREAD; i < P; i += WB_THREADS) {                    \
                if (i < K) {                                                        \
                    sv[i] = (C)wb_load(in[wb_offset(li, row * K + i)]);             \
                    si[i] = i;                                                      \
                } else {                                                            \
                    si[i] = -1;                                                     \
                }                                                                   \
            }                                                                       \
            WB_BARRIER();                                                           \
            for (wb_i64 size = 2; size <= P; size <<= 1) {                          \
                for (wb_i64 stride = size / 2; stride > 0; stride >>= 1) {          \
                    for (wb_i64 i = WB_THREAD; i < P; i += WB_THREADS) {            \
                        wb_i64 j = i ^ stride;                                      \
                        if (j <= i) continue;                                       \
                        bool asc = (i & size) == 0;                                 \
                        bool swap = asc ? sort_before(sv[j], si[j], sv[i], si[i], desc) \
                                        : sort_before(sv[i], si[i], sv[j], si[j], desc); \
                        if (swap) {                                                 \
                            C tv = sv[i];                                           \
                            sv[i] = sv[j];                                          \
                            sv[j] = tv;                                             \
                            wb_i64 ti = si[i];                                      \
                            si[i] = si[j];                                          \
                            si[j] = ti;                                             \
                        }                                                           \
                    }                                                               \
                    WB_BARRIER();                                                   \
                }                                                                   \
            }                                                                       \
            for (wb_i64 i = WB_THREAD; i < K; i += WB_THREADS) {                    \
                wb_i64 o = wb_offset(lo, row * K + i);                              \
                vals[o] = in[wb_offset(li, row * K + si[i])];                       \
                idx[o] = si[i];                                                     \
            }                                                                       \
            WB_BARRIER();                                                           \
        }                                                                           \
    }
WB_ALL_DTYPES(SORT_KERNEL)

// Rows longer than 1024: the same network over an index scratch (M, P) in global memory, one
// launch per (size, stride) step; values are read through the input layout when compared.
WB_KERNEL sort_long_init(WB_OUT(i64, si, 0), WB_ARG(wb_i64, M, 1), WB_ARG(wb_i64, K, 2),
                         WB_ARG(wb_i64, P, 3) WB_THREAD_ARGS) {
    WB_LOOP(t, M * P) {
        wb_i64 i = t % P;
        si[t] = i < K ? i : -1;
    }
}

#define SORT_LONG_KERNELS(name, T)                                                  \
    WB_KERNEL sort_long_step_##name(WB_OUT(i64, si, 0), WB_IN(T, in, 1), WB_ARG(Layout, li, 2), \
                                    WB_ARG(wb_i64, M, 3), WB_ARG(wb_i64, K, 4),     \
                                    WB_ARG(wb_i64, P, 5), WB_ARG(wb_i64, size, 6),  \
                                    WB_ARG(wb_i64, stride, 7),                      \
                                    WB_ARG(int, desc, 8) WB_THREAD_ARGS) {          \
        typedef CmpAcc<T>::type C;                                                  \
        WB_LOOP(t, M * P) {                                                         \
            wb_i64 row = t / P, i = t % P, j = i ^ stride;                          \
            if (j <= i) continue;                                                   \
            wb_i64 a = si[row * P + i], b = si[row * P + j];                        \
            C va = a >= 0 ? (C)wb_load(in[wb_offset(li, row * K + a)]) : (C)0;      \
            C vb = b >= 0 ? (C)wb_load(in[wb_offset(li, row * K + b)]) : (C)0;      \
            bool asc = (i & size) == 0;                                             \
            bool swap = asc ? sort_before(vb, b, va, a, desc) : sort_before(va, a, vb, b, desc); \
            if (swap) {                                                             \
                si[row * P + i] = b;                                                \
                si[row * P + j] = a;                                                \
            }                                                                       \
        }                                                                           \
    }                                                                               \
    WB_KERNEL sort_long_gather_##name(WB_OUT(T, vals, 0), WB_OUT(i64, idx, 1),      \
                                      WB_ARG(Layout, lo, 2), WB_IN(T, in, 3),       \
                                      WB_ARG(Layout, li, 4), WB_IN(i64, si, 5),     \
                                      WB_ARG(wb_i64, M, 6), WB_ARG(wb_i64, K, 7),   \
                                      WB_ARG(wb_i64, P, 8) WB_THREAD_ARGS) {        \
        WB_LOOP(t, M * K) {                                                         \
            wb_i64 row = t / K, s = si[row * P + t % K];                            \
            wb_i64 o = wb_offset(lo, t);                                            \
            vals[o] = in[wb_offset(li, row * K + s)];                               \
            idx[o] = s;                                                             \
        }                                                                           \
    }
WB_ALL_DTYPES(SORT_LONG_KERNELS)
