// Generated from kernels/gpu/quantized.h by
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

// GGUF (ggml) block formats on the GPU: dequantization to f32 / f16 / bf16, and the
// matrix-vector product y[b, r] = sum_k W[r, k] x[b, k] for 1..8 vectors x that reads W once,
// decoding its blocks in registers (decoding never expands a whole weight per token).
//
// Every block type is a struct with its values per block (QK), bytes per block (BYTES) and
// slice(block, s): the 8 values of slice s (0 .. QK/8 - 1) as f32, in two runs of 4
// consecutive positions p0.. and p1.. of the block (the ggml layouts pair each byte's low and
// high nibble, or bit fields of one byte, with values 16, 32 or 64 apart). Both kernels are
// written once over slices; the layouts (bytes, little-endian; halves are IEEE f16) are:
//   Q4_0   {f16 d; u8 qs[16]}                 w = d (nibble - 8), value j: low nibble of
//          qs[j] (j < 16), high nibble of qs[j - 16]
//   Q4_1   {f16 d, m; u8 qs[16]}              w = d nibble + m
//   Q5_0   {f16 d; u32 qh; u8 qs[16]}         w = d (nibble | bit j of qh << 4 - 16)
//   Q5_1   {f16 d, m; u32 qh; u8 qs[16]}      w = d (nibble | bit j of qh << 4) + m
//   Q8_0   {f16 d; i8 qs[32]}, Q8_1 {f16 d, s; i8 qs[32]}: w = d q
//   IQ4_NL {f16 d; u8 qs[16]}                 w = d level[nibble] (the IQ4 codebook)
//   Q2_K   {u8 scales[16]; u8 qs[64]; f16 d, dmin}: value 128h + 32j + l: bits 2j of
//          qs[32h + l]; sub-block (16 values) i = 8h + 2j + l/16: w = d (sc_i & 15) q -
//          dmin (sc_i >> 4)
//   Q3_K   {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}: as Q2_K's 2-bit q, minus 4
//          unless bit 4h + j of hmask[l]; 6-bit signed scales (k3_scale): w = d (s_i - 32) q
//   Q4_K   {f16 d, dmin; u8 scales[12]; u8 qs[128]}: value 64c + l (l < 32) the low nibble
//          of qs[32c + l], 64c + 32 + l the high one; sub-block j = value / 32 with 6-bit
//          scale and min (k4_scale_min): w = d sc_j q - dmin m_j
//   Q5_K   {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: Q4_K plus bit j of qh[l]
//          as bit 4 of value 32j + l
//   Q6_K   {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: value 128h + 32r + l: low nibble
//          of ql[64h + 32(r & 1) + l] (high nibble for r >= 2), bits 2r of qh[32h + l] on
//          top, minus 32; w = d scales[8h + 2r + l/16] q
//   IQ4_XS {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}: sub-block i (32 values) has
//          the nibble pairs of qs[16i..16i+16] as IQ4_NL and the 6-bit scale
//          (scales_l nibble i | bits 2i of scales_h << 4) - 32
//   Q8_K   {f32 d; i8 qs[256]; i16 bsums[16]}: w = d q
//   F16, BF16: plain halves, taken 8 at a time as one "block" of 16 bytes (K % 8 == 0)
// Blocks are packed without padding; a type's fields are read with the widest loads its
// block size allows (4-byte words where BYTES % 4 == 0, else 2-byte halves).
//
// The matvec: 1, 2 or 4 32-lane warps (simdgroups) per row of W (`split`, the host's choice);
// in a warp step, lane t decodes slice t % (QK/8) of block t / (QK/8) of the step, so a warp
// reads 256 consecutive values (144 bytes of Q4_0, one Q4_K super-block) per step, the row's
// warps taking every split-th step, and every decoded value is used for all the vectors x[b]
// before the next is decoded. Activations stay f32 and every product and sum is f32: each
// lane sums at most K/32 products in order, five shuffle levels add the lanes and at most 3
// adds the warps, so |y - W x| <= (K/32 + 8) 2^-24 sum_k |w_k x_k| beyond the f32 decoding
// of w itself (no activation quantization, unlike ggml's Q8_1 mmvq).
// Names: dequantize_<type>_<out dtype>, qmatvec_<type>_f32 (one vector) and
// qmatvec_<type>_f32_b<B> (at most B = 2, 4, 8 vectors).
// Written in the portable dialect (common.h).

typedef WB_GLOBAL const u8* wb_block;

WB_FN float rd_half(wb_block p) {
    return WB_F16_BITS_TO_F32(*(WB_GLOBAL const unsigned short*)p);
}
// Four bytes at p as one little-endian word: p 4-byte aligned, or 2-byte aligned (two halves).
WB_FN u32 rd32_a4(wb_block p) { return *(WB_GLOBAL const u32*)p; }
WB_FN u32 rd32_a2(wb_block p) {
    WB_GLOBAL const unsigned short* h = (WB_GLOBAL const unsigned short*)p;
    return (u32)h[0] | ((u32)h[1] << 16);
}
// Byte i of a word, and that byte as a signed value.
WB_FN int byte_of(u32 q, int i) { return (int)((q >> (8 * i)) & 0xFFu); }
WB_FN int sbyte_of(u32 q, int i) {
    int v = byte_of(q, i);
    return v - ((v & 0x80) << 1);
}
// The IQ4_NL / IQ4_XS codebook (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53,
// 69, 89, 113), packed as signed bytes into four words so no target needs a constant table.
WB_FN int iq4_level(int i) {
    u32 word = i < 8 ? (i < 4 ? 0xBFAD9881u : 0xF6EADDCFu) : (i < 12 ? 0x26190D01u : 0x71594535u);
    return sbyte_of(word, i & 3);
}

// The 8 values of one slice: w[0..3] at positions p0..p0+3 of the block, w[4..7] at p1..p1+3.
struct Slice8 {
    float w[8];
    int p0, p1;
};
// A slice of nibble pairs: the low nibbles of the 4 bytes of q (plus bit 4 from hi_lo, a
// byte per value) at p0, the high nibbles (plus hi_hi) at p1, each level l -> a l + c.
WB_FN Slice8 nibble_slice(u32 q, u32 hi_lo, u32 hi_hi, float a0, float c0, float a1, float c1,
                          int p0, int p1) {
    Slice8 s;
    for (int i = 0; i < 4; ++i) {
        int lo = (byte_of(q, i) & 15) | (byte_of(hi_lo, i) << 4);
        int hi = (byte_of(q, i) >> 4) | (byte_of(hi_hi, i) << 4);
        s.w[i] = a0 * (float)lo + c0;
        s.w[4 + i] = a1 * (float)hi + c1;
    }
    s.p0 = p0;
    s.p1 = p1;
    return s;
}
// Bits j .. j + 3 of a 32-bit mask as one byte each (0 or 1): bit 4 of four Q5 values.
WB_FN u32 bits4(u32 m, int j) {
    return ((m >> j) & 1u) | (((m >> (j + 1)) & 1u) << 8) | (((m >> (j + 2)) & 1u) << 16) |
           (((m >> (j + 3)) & 1u) << 24);
}
WB_FN Slice8 int8_slice(u32 q0, u32 q1, float d, int p0) {
    Slice8 s;
    for (int i = 0; i < 4; ++i) {
        s.w[i] = d * (float)sbyte_of(q0, i);
        s.w[4 + i] = d * (float)sbyte_of(q1, i);
    }
    s.p0 = p0;
    s.p1 = p0 + 4;
    return s;
}
WB_FN Slice8 codebook_slice(u32 q, float d, int p0, int p1) {
    Slice8 s;
    for (int i = 0; i < 4; ++i) {
        s.w[i] = d * (float)iq4_level(byte_of(q, i) & 15);
        s.w[4 + i] = d * (float)iq4_level(byte_of(q, i) >> 4);
    }
    s.p0 = p0;
    s.p1 = p1;
    return s;
}

// ---- 32-value blocks: 4 slices, slice s holds values 4s.. and 16 + 4s.. (Q8: 8s..) ----------
struct q4_0 {
    enum { QK = 32, BYTES = 18 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        float d = rd_half(b);
        return nibble_slice(rd32_a2(b + 2 + 4 * s), 0u, 0u, d, -8.f * d, d, -8.f * d, 4 * s,
                            16 + 4 * s);
    }
};
struct q4_1 {
    enum { QK = 32, BYTES = 20 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        float d = rd_half(b), m = rd_half(b + 2);
        return nibble_slice(rd32_a4(b + 4 + 4 * s), 0u, 0u, d, m, d, m, 4 * s, 16 + 4 * s);
    }
};
struct q5_0 {
    enum { QK = 32, BYTES = 22 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        float d = rd_half(b);
        u32 qh = rd32_a2(b + 2);
        return nibble_slice(rd32_a2(b + 6 + 4 * s), bits4(qh, 4 * s), bits4(qh, 16 + 4 * s), d,
                            -16.f * d, d, -16.f * d, 4 * s, 16 + 4 * s);
    }
};
struct q5_1 {
    enum { QK = 32, BYTES = 24 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        float d = rd_half(b), m = rd_half(b + 2);
        u32 qh = rd32_a4(b + 4);
        return nibble_slice(rd32_a4(b + 8 + 4 * s), bits4(qh, 4 * s), bits4(qh, 16 + 4 * s), d,
                            m, d, m, 4 * s, 16 + 4 * s);
    }
};
struct q8_0 {
    enum { QK = 32, BYTES = 34 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        return int8_slice(rd32_a2(b + 2 + 8 * s), rd32_a2(b + 6 + 8 * s), rd_half(b), 8 * s);
    }
};
struct q8_1 {
    enum { QK = 32, BYTES = 36 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        return int8_slice(rd32_a4(b + 4 + 8 * s), rd32_a4(b + 8 + 8 * s), rd_half(b), 8 * s);
    }
};
struct iq4_nl {
    enum { QK = 32, BYTES = 18 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        return codebook_slice(rd32_a2(b + 2 + 4 * s), rd_half(b), 4 * s, 16 + 4 * s);
    }
};

// ---- 256-value super-blocks: 32 slices ----------------------------------------------------
// 6-bit scale and min j (0..7) of Q4_K / Q5_K from their 12 scale bytes s.
struct ScaleMin {
    int scale, min;
};
WB_FN ScaleMin k4_scale_min(int j, wb_block s) {
    ScaleMin r;
    if (j < 4) {
        r.scale = s[j] & 63;
        r.min = s[j + 4] & 63;
    } else {
        r.scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        r.min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
    return r;
}
// Q4_K / Q5_K slice s: chunk c = s / 8 of 64 values, bytes 4 (s % 8).. of its 32 qs bytes:
// low nibbles are sub-block 2c, high nibbles 2c + 1 (Q5_K, ``five``: bits 2c, 2c + 1 of qh
// on top).
WB_FN Slice8 k45_slice(wb_block b, int s, wb_block qs, wb_block qh, bool five) {
    int c = s >> 3, l0 = 4 * (s & 7);
    float d = rd_half(b), dmin = rd_half(b + 2);
    ScaleMin lo = k4_scale_min(2 * c, b + 4), hi = k4_scale_min(2 * c + 1, b + 4);
    u32 h = five ? rd32_a4(qh + l0) : 0u;
    u32 h_lo = (h >> (2 * c)) & 0x01010101u, h_hi = (h >> (2 * c + 1)) & 0x01010101u;
    return nibble_slice(rd32_a4(qs + 32 * c + l0), h_lo, h_hi, d * (float)lo.scale,
                        -dmin * (float)lo.min, d * (float)hi.scale, -dmin * (float)hi.min,
                        64 * c + l0, 64 * c + 32 + l0);
}
struct q4_k {
    enum { QK = 256, BYTES = 144 };
    WB_FN static Slice8 slice(wb_block b, int s) { return k45_slice(b, s, b + 16, b, false); }
};
struct q5_k {
    enum { QK = 256, BYTES = 176 };
    WB_FN static Slice8 slice(wb_block b, int s) { return k45_slice(b, s, b + 48, b + 16, true); }
};

// Q2_K / Q3_K / Q6_K slice s: half h = s / 16 (128 values), r = s % 16: the 2-bit fields
// j = r / 8 and j + 2 of bytes l0 = 4 (r % 8).. of the half's 32 qs bytes (values
// 128h + 32j + l0.. and 128h + 32(j + 2) + l0..; each run lies in one 16-value sub-block).
struct Crumbs {
    int h, j, l0;
};
WB_FN Crumbs crumbs(int s) {
    Crumbs c;
    c.h = s >> 4;
    c.j = (s >> 3) & 1;
    c.l0 = 4 * (s & 7);
    return c;
}
struct q2_k {
    enum { QK = 256, BYTES = 84 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        Crumbs c = crumbs(s);
        float d = rd_half(b + 80), dmin = rd_half(b + 82);
        u32 q = rd32_a4(b + 16 + 32 * c.h + c.l0);
        Slice8 out;
        for (int t = 0; t < 2; ++t) {
            int j = c.j + 2 * t, sc = b[8 * c.h + 2 * j + (c.l0 >> 4)];
            float a = d * (float)(sc & 15), m = dmin * (float)(sc >> 4);
            for (int i = 0; i < 4; ++i)
                out.w[4 * t + i] = a * (float)((byte_of(q, i) >> (2 * j)) & 3) - m;
        }
        out.p0 = 128 * c.h + 32 * c.j + c.l0;
        out.p1 = out.p0 + 64;
        return out;
    }
};
// Q3_K's 6-bit scale i (0..15), biased by 32, from its 12 scale bytes s.
WB_FN int k3_scale(int i, wb_block s) {
    int low = i < 8 ? (s[i] & 15) : (s[i - 8] >> 4);
    int top = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    return (low | (top << 4)) - 32;
}
struct q3_k {
    enum { QK = 256, BYTES = 110 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        Crumbs c = crumbs(s);
        float d = rd_half(b + 108);
        u32 q = rd32_a2(b + 32 + 32 * c.h + c.l0), hm = rd32_a2(b + c.l0);
        Slice8 out;
        for (int t = 0; t < 2; ++t) {
            int j = c.j + 2 * t;
            float a = d * (float)k3_scale(8 * c.h + 2 * j + (c.l0 >> 4), b + 96);
            for (int i = 0; i < 4; ++i) {
                int high = (byte_of(hm, i) >> (4 * c.h + j)) & 1;
                out.w[4 * t + i] = a * (float)(((byte_of(q, i) >> (2 * j)) & 3) - 4 + 4 * high);
            }
        }
        out.p0 = 128 * c.h + 32 * c.j + c.l0;
        out.p1 = out.p0 + 64;
        return out;
    }
};
struct q6_k {
    enum { QK = 256, BYTES = 210 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        Crumbs c = crumbs(s);  // r = c.j and c.j + 2 share the ql bytes (low, high nibbles)
        float d = rd_half(b + 208);
        u32 ql = rd32_a2(b + 64 * c.h + 32 * c.j + c.l0), qh = rd32_a2(b + 128 + 32 * c.h + c.l0);
        WB_GLOBAL const i8* sc = (WB_GLOBAL const i8*)(b + 192) + 8 * c.h + (c.l0 >> 4);
        Slice8 out;
        for (int t = 0; t < 2; ++t) {
            int r = c.j + 2 * t;
            float a = d * (float)sc[2 * r];
            for (int i = 0; i < 4; ++i) {
                int low = (byte_of(ql, i) >> (4 * t)) & 15;
                int high = (byte_of(qh, i) >> (2 * r)) & 3;
                out.w[4 * t + i] = a * (float)((low | (high << 4)) - 32);
            }
        }
        out.p0 = 128 * c.h + 32 * c.j + c.l0;
        out.p1 = out.p0 + 64;
        return out;
    }
};
struct iq4_xs {
    enum { QK = 256, BYTES = 136 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        int i = s >> 2, j0 = 4 * (s & 3);
        int sh = (int)*(WB_GLOBAL const unsigned short*)(b + 2);
        int ls = ((b[4 + (i >> 1)] >> (4 * (i & 1))) & 15) | (((sh >> (2 * i)) & 3) << 4);
        return codebook_slice(rd32_a4(b + 8 + 16 * i + j0), rd_half(b) * (float)(ls - 32),
                              32 * i + j0, 32 * i + 16 + j0);
    }
};
struct q8_k {
    enum { QK = 256, BYTES = 292 };
    WB_FN static Slice8 slice(wb_block b, int s) {
        float d = *(WB_GLOBAL const float*)b;
        return int8_slice(rd32_a4(b + 4 + 8 * s), rd32_a4(b + 8 + 8 * s), d, 8 * s);
    }
};

// ---- unquantized halves: 8 values (16 bytes) a block, 1 slice --------------------------------
template <typename H> struct halves {
    enum { QK = 8, BYTES = 16 };
    WB_FN static Slice8 slice(wb_block b, int) {
        WB_GLOBAL const H* h = (WB_GLOBAL const H*)b;
        Slice8 out;
        for (int i = 0; i < 8; ++i) out.w[i] = wb_load(h[i]);
        out.p0 = 0;
        out.p1 = 4;
        return out;
    }
};
typedef halves<f16> f16w;
typedef halves<bf16> bf16w;

// X(name in kernel names, block type): every block type (its struct above).
#define WB_QTYPES(X) X(q4_0, q4_0) X(q4_1, q4_1) X(q5_0, q5_0) X(q5_1, q5_1) X(q8_0, q8_0) \
    X(q8_1, q8_1) X(iq4_nl, iq4_nl) X(q2_k, q2_k) X(q3_k, q3_k) X(q4_k, q4_k) X(q5_k, q5_k) \
    X(q6_k, q6_k) X(iq4_xs, iq4_xs) X(q8_k, q8_k) X(f16, f16w) X(bf16, bf16w)

// out[v] for the n values of whole blocks: thread i writes slice i (8 values).
template <typename Q, typename O>
WB_FN void dequantize_slice(WB_GLOBAL O* out, wb_block blocks, wb_i64 i) {
    const int L = Q::QK / 8;
    wb_i64 blk = i / L;
    Slice8 v = Q::slice(blocks + blk * Q::BYTES, (int)(i - blk * L));
    WB_GLOBAL O* o = out + blk * Q::QK;
    for (int j = 0; j < 4; ++j) {
        o[v.p0 + j] = Store<O>::from(v.w[j]);
        o[v.p1 + j] = Store<O>::from(v.w[4 + j]);
    }
}
#define DEQUANT_KERNEL(qt, Q, oname, O)                                             \
    WB_KERNEL dequantize_##qt##_##oname(WB_OUT(O, out, 0), WB_IN(u8, blocks, 1),    \
                                        WB_ARG(wb_i64, n, 2) WB_THREAD_ARGS) {      \
        WB_LOOP(i, n / 8) { dequantize_slice<Q, O>(out, blocks, i); }               \
    }
#define DEQUANT_ALL(qt, Q)                                                          \
    DEQUANT_KERNEL(qt, Q, f32, f32) DEQUANT_KERNEL(qt, Q, f16, f16)                 \
    DEQUANT_KERNEL(qt, Q, bf16, bf16)
WB_QTYPES(DEQUANT_ALL)

// The matvec's blocks: QMV_WARPS warps; `split` (1, 2 or 4) warps share a row, each summing
// every split-th warp step of it, so a block serves QMV_WARPS / split rows.
#define QMV_WARPS 4

// y[b, row] = sum_k W[row, k] x[b, k] for b < batch <= B: W (rows, K) quantized row-major
// (K a multiple of QK), x (batch, K) and y (batch, rows) contiguous f32, x 16-byte aligned.
// Warp v of block g takes part v % split of row g (QMV_WARPS / split) + v / split; the parts'
// sums meet in `partial` (QMV_WARPS B floats of block-shared memory) and are added in order.
template <typename Q, int B>
WB_DEVICE void qmatvec_rows(WB_GLOBAL float* y, wb_block w, WB_GLOBAL const float* x,
                            wb_i64 rows, wb_i64 K, int batch, int split,
                            WB_SHARED_PTR(float) partial, wb_i64 group, int thread) {
    const int L = Q::QK / 8, STEP = 32 / L;  // lanes per block, blocks per warp step
    int warp = thread >> 5, lane = thread & 31, part = warp % split;
    wb_i64 row = group * (QMV_WARPS / split) + warp / split, nb = K / Q::QK;
    float acc[B];
    for (int b = 0; b < B; ++b) acc[b] = 0.f;
    if (row < rows) {  // the whole warp: its lanes share the row
        wb_block wr = w + row * nb * Q::BYTES;
        for (wb_i64 blk = part * STEP + lane / L; blk < nb; blk += split * STEP) {
            Slice8 s = Q::slice(wr + blk * Q::BYTES, lane % L);
            WB_GLOBAL const float* xs = x + blk * Q::QK;
            for (int b = 0; b < B; ++b) {
                if (b < batch) {
                    float4 u = *(WB_GLOBAL const float4*)(xs + b * K + s.p0);
                    float4 v = *(WB_GLOBAL const float4*)(xs + b * K + s.p1);
                    float a = acc[b];
                    a = fma(s.w[0], u.x, a);
                    a = fma(s.w[1], u.y, a);
                    a = fma(s.w[2], u.z, a);
                    a = fma(s.w[3], u.w, a);
                    a = fma(s.w[4], v.x, a);
                    a = fma(s.w[5], v.y, a);
                    a = fma(s.w[6], v.z, a);
                    acc[b] = fma(s.w[7], v.w, a);
                }
            }
        }
        for (int b = 0; b < B; ++b)
            if (b < batch) acc[b] = wb_warp_reduce<wb_reduce_sum>(acc[b]);
    }
    if (split == 1) {  // the same for the whole block: no barrier
        if (row < rows && lane == 0)
            for (int b = 0; b < B; ++b)
                if (b < batch) y[b * rows + row] = acc[b];
        return;
    }
    if (lane == 0)
        for (int b = 0; b < B; ++b) partial[warp * B + b] = acc[b];
    WB_BARRIER();
    if (row < rows && lane == 0 && part == 0)
        for (int b = 0; b < B; ++b) {
            if (b < batch) {
                float t = partial[warp * B + b];
                for (int p = 1; p < split; ++p) t += partial[(warp + p) * B + b];
                y[b * rows + row] = t;
            }
        }
}
// The kernel for one vector is qmatvec_<type>_f32, the ones for up to B = 2, 4, 8 vectors
// add _b<B>; blocks of 32 QMV_WARPS threads.
#define MATVEC_KERNEL(qt, Q, B, suffix)                                             \
    WB_KERNEL qmatvec_##qt##_f32##suffix(WB_OUT(float, y, 0), WB_IN(u8, w, 1),      \
                                         WB_IN(float, x, 2), WB_ARG(wb_i64, rows, 3), \
                                         WB_ARG(wb_i64, K, 4), WB_ARG(wb_i64, batch, 5), \
                                         WB_ARG(wb_i64, split, 6) WB_THREAD_ARGS) { \
        WB_SHARED float partial[QMV_WARPS * B];                                     \
        qmatvec_rows<Q, B>(y, w, x, rows, K, (int)batch, (int)split, partial,      \
                           (wb_i64)WB_BLOCK_ID, (int)WB_THREAD);                    \
    }
#define MATVEC_ALL(qt, Q) MATVEC_KERNEL(qt, Q, 1, ) MATVEC_KERNEL(qt, Q, 2, _b2) \
    MATVEC_KERNEL(qt, Q, 4, _b4) MATVEC_KERNEL(qt, Q, 8, _b8)
WB_QTYPES(MATVEC_ALL)
