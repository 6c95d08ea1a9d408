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
