// Generated from kernels/gpu/indexing.h by
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

// Index ops along one dim. Index tensors are i64 (the host casts others). With ``wrap``,
// negative indices count from the end. Layouts here are NOT merged by the host (ndim and dims
// are the tensor's own), since the kernels need each coordinate.
//   index_select_<dt>: out (pre, k, post) = x[.., idx[j], ..]
//   gather_<dt>:       out[c] = x[c with c[dim] = idx[c]] (out has idx's shape)
//   scatter_<dt>:      out[c with c[dim] = idx[c]] = src[c] (out is a copy of x made first)
//   scatter_add_<dt>, index_add_<dt>: the same with wb_atomic_add (f16 bf16 f32 f64 i32 i64)
// Written in the portable dialect (common.h).

WB_FN wb_i64 wb_wrap(wb_i64 i, wb_i64 n, int wrap) { return (wrap && i < 0) ? i + n : i; }

// The element at linear index i of a tensor shaped like `shape` but with `size` at `dim`:
// its coordinate along `dim`, and the offset in x of the element with the same coordinates
// except `at` along `dim`.
WB_FN wb_i64 wb_coord(WB_LAYOUT_REF shape, wb_i64 i, int dim, wb_i64 size) {
    for (int d = shape.ndim - 1; d > dim; --d) i /= shape.shape[d];
    return i % size;
}
WB_FN wb_i64 wb_offset_at(WB_LAYOUT_REF x, WB_LAYOUT_REF shape, wb_i64 i, int dim, wb_i64 size,
                          wb_i64 at) {
    wb_i64 off = x.offset;
    for (int d = shape.ndim - 1; d >= 0; --d) {
        wb_i64 s = d == dim ? size : shape.shape[d];
        wb_i64 q = i / s;
        off += (d == dim ? at : i - q * s) * x.strides[d];
        i = q;
    }
    return off;
}

#define INDEX_KERNELS(name, T)                                                      \
    WB_KERNEL index_select_##name(WB_OUT(T, out, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), \
                                  WB_IN(i64, idx, 3), WB_ARG(Layout, li, 4),        \
                                  WB_ARG(wb_i64, n, 5), WB_ARG(int, dim, 6),        \
                                  WB_ARG(int, wrap, 7) WB_THREAD_ARGS) {            \
        /* out has x's shape with len(idx) at dim; lx.shape[dim] is the source size */ \
        wb_i64 k = li.shape[0];                                                     \
        WB_LOOP(i, n) {                                                             \
            wb_i64 c = wb_coord(lx, i, dim, k);                                     \
            wb_i64 at = wb_wrap(idx[wb_offset(li, c)], lx.shape[dim], wrap);        \
            out[i] = x[wb_offset_at(lx, lx, i, dim, k, at)];                        \
        }                                                                           \
    }                                                                               \
    WB_KERNEL gather_##name(WB_OUT(T, out, 0), WB_IN(T, x, 1), WB_ARG(Layout, lx, 2), \
                            WB_IN(i64, idx, 3), WB_ARG(Layout, li, 4), WB_ARG(wb_i64, n, 5), \
                            WB_ARG(int, dim, 6), WB_ARG(int, wrap, 7) WB_THREAD_ARGS) { \
        WB_LOOP(i, n) {                                                             \
            wb_i64 at = wb_wrap(idx[wb_offset(li, i)], lx.shape[dim], wrap);        \
            out[i] = x[wb_offset_at(lx, li, i, dim, li.shape[dim], at)];            \
        }                                                                           \
    }                                                                               \
    WB_KERNEL scatter_##name(WB_OUT(T, out, 0), WB_ARG(Layout, lo, 1), WB_IN(i64, idx, 2), \
                             WB_ARG(Layout, li, 3), WB_IN(T, src, 4), WB_ARG(Layout, ls, 5), \
                             WB_ARG(wb_i64, n, 6), WB_ARG(int, dim, 7),             \
                             WB_ARG(int, wrap, 8) WB_THREAD_ARGS) {                 \
        WB_LOOP(i, n) {                                                             \
            wb_i64 at = wb_wrap(idx[wb_offset(li, i)], lo.shape[dim], wrap);        \
            out[wb_offset_at(lo, li, i, dim, li.shape[dim], at)] = src[wb_offset(ls, i)]; \
        }                                                                           \
    }
WB_ALL_DTYPES(INDEX_KERNELS)

#define ADD_KERNELS(name, T)                                                        \
    WB_KERNEL scatter_add_##name(WB_OUT(T, out, 0), WB_ARG(Layout, lo, 1),          \
                                 WB_IN(i64, idx, 2), WB_ARG(Layout, li, 3),         \
                                 WB_IN(T, src, 4), WB_ARG(Layout, ls, 5),           \
                                 WB_ARG(wb_i64, n, 6), WB_ARG(int, dim, 7),         \
                                 WB_ARG(int, wrap, 8) WB_THREAD_ARGS) {             \
        WB_LOOP(i, n) {                                                             \
            wb_i64 at = wb_wrap(idx[wb_offset(li, i)], lo.shape[dim], wrap);        \
            wb_atomic_add(out, wb_offset_at(lo, li, i, dim, li.shape[dim], at),     \
                          (T)src[wb_offset(ls, i)]);                                \
        }                                                                           \
    }                                                                               \
    WB_KERNEL index_add_##name(WB_OUT(T, out, 0), WB_ARG(Layout, lo, 1), WB_IN(i64, idx, 2), \
                               WB_ARG(Layout, li, 3), WB_IN(T, src, 4), WB_ARG(Layout, ls, 5), \
                               WB_ARG(wb_i64, n, 6), WB_ARG(int, dim, 7),           \
                               WB_ARG(int, wrap, 8) WB_THREAD_ARGS) {               \
        /* src has out's shape with len(idx) at dim; ls carries that shape */       \
        wb_i64 k = ls.shape[dim];                                                   \
        WB_LOOP(i, n) {                                                             \
            wb_i64 at = wb_wrap(idx[wb_offset(li, wb_coord(ls, i, dim, k))], lo.shape[dim], wrap); \
            wb_atomic_add(out, wb_offset_at(lo, ls, i, dim, k, at), (T)src[wb_offset(ls, i)]); \
        }                                                                           \
    }
#define WB_ATOMIC_DTYPES(X) X(f16, f16) X(bf16, bf16) X(f32, f32) WB_IF_F64(X(f64, f64)) \
    X(i32, i32) X(i64, i64)
WB_ATOMIC_DTYPES(ADD_KERNELS)
