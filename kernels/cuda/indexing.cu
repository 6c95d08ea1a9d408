// Index ops along one dim. Index tensors are i64 (the host casts others). With ``wrap``,
// negative indices count from the end. Layouts here are NOT merged by the host (ndim and dims
// are the tensor's own), since the kernels need each coordinate.
//   index_select_<dt>: out (pre, k, post) = x[.., idx[j], ..]
//   gather_<dt>:       out[c] = x[c with c[dim] = idx[c]] (out has idx's shape)
//   scatter_<dt>:      out[c with c[dim] = idx[c]] = src[c] (out is a copy of x made first)
//   scatter_add_<dt>, index_add_<dt>: the same with atomicAdd (f16 bf16 f32 f64 i32 i64)
#include "common.cuh"

__device__ __forceinline__ long long wb_wrap(long long i, long long n, int wrap) {
    return (wrap && i < 0) ? i + n : i;
}

// Coordinate `dim` of the element at linear index i over `shape` (C order).
__device__ __forceinline__ long long wb_coord(const Layout& shape, long long i, int dim) {
    long long c = 0;
    for (int d = shape.ndim - 1; d >= dim; --d) {
        c = i % shape.shape[d];
        i /= shape.shape[d];
    }
    return c;
}

// Offset in x of the element whose coordinates are those of linear index i over `shape`,
// except coordinate `dim`, which is replaced by `at`.
__device__ __forceinline__ long long wb_offset_at(const Layout& x, const Layout& shape,
                                                  long long i, int dim, long long at) {
    long long off = x.offset;
    for (int d = shape.ndim - 1; d >= 0; --d) {
        long long s = shape.shape[d];
        long long q = i / s;
        long long c = i - q * s;
        off += (d == dim ? at : c) * x.strides[d];
        i = q;
    }
    return off;
}

#define INDEX_KERNELS(name, T)                                                      \
    extern "C" __global__ void index_select_##name(                                 \
        T* __restrict__ out, const T* __restrict__ x, Layout lx,                    \
        const i64* __restrict__ idx, Layout li, long long n, int dim, int wrap) {   \
        /* out has x's shape with len(idx) at dim; lx.shape[dim] is the source size */ \
        Layout shape = lx;                                                          \
        shape.shape[dim] = li.shape[0];                                             \
        WB_LOOP(i, n) {                                                             \
            long long c = wb_coord(shape, i, dim);                                  \
            long long at = wb_wrap(idx[wb_offset(li, c)], lx.shape[dim], wrap);     \
            out[i] = x[wb_offset_at(lx, shape, i, dim, at)];                        \
        }                                                                           \
    }                                                                               \
    extern "C" __global__ void gather_##name(T* __restrict__ out, const T* __restrict__ x, \
                                             Layout lx, const i64* __restrict__ idx, \
                                             Layout li, long long n, int dim, int wrap) { \
        WB_LOOP(i, n) {                                                             \
            long long at = wb_wrap(idx[wb_offset(li, i)], lx.shape[dim], wrap);     \
            out[i] = x[wb_offset_at(lx, li, i, dim, at)];                           \
        }                                                                           \
    }                                                                               \
    extern "C" __global__ void scatter_##name(T* __restrict__ out, Layout lo,       \
                                              const i64* __restrict__ idx, Layout li, \
                                              const T* __restrict__ src, Layout ls,  \
                                              long long n, int dim, int wrap) {      \
        WB_LOOP(i, n) {                                                             \
            long long at = wb_wrap(idx[wb_offset(li, i)], lo.shape[dim], wrap);     \
            out[wb_offset_at(lo, li, i, dim, at)] = src[wb_offset(ls, i)];          \
        }                                                                           \
    }
WB_ALL_DTYPES(INDEX_KERNELS)

template <typename T> __device__ __forceinline__ void wb_atomic_add(T* p, T v) { atomicAdd(p, v); }
template <> __device__ __forceinline__ void wb_atomic_add<i64>(i64* p, i64 v) {
    atomicAdd((unsigned long long*)p, (unsigned long long)v);
}

#define ADD_KERNELS(name, T)                                                        \
    extern "C" __global__ void scatter_add_##name(T* __restrict__ out, Layout lo,   \
                                                  const i64* __restrict__ idx, Layout li, \
                                                  const T* __restrict__ src, Layout ls, \
                                                  long long n, int dim, int wrap) {  \
        WB_LOOP(i, n) {                                                             \
            long long at = wb_wrap(idx[wb_offset(li, i)], lo.shape[dim], wrap);     \
            wb_atomic_add(out + wb_offset_at(lo, li, i, dim, at), src[wb_offset(ls, i)]); \
        }                                                                           \
    }                                                                               \
    extern "C" __global__ void index_add_##name(T* __restrict__ out, Layout lo,     \
                                                const i64* __restrict__ idx, Layout li, \
                                                const T* __restrict__ src, Layout ls, \
                                                long long n, int dim, int wrap) {    \
        /* src has out's shape with len(idx) at dim; ls carries that shape */       \
        WB_LOOP(i, n) {                                                             \
            long long c = wb_coord(ls, i, dim);                                     \
            long long at = wb_wrap(idx[wb_offset(li, c)], lo.shape[dim], wrap);     \
            wb_atomic_add(out + wb_offset_at(lo, ls, i, dim, at), src[wb_offset(ls, i)]); \
        }                                                                           \
    }
ADD_KERNELS(f16, f16)
ADD_KERNELS(bf16, bf16)
ADD_KERNELS(f32, f32)
ADD_KERNELS(f64, f64)
ADD_KERNELS(i32, i32)
ADD_KERNELS(i64, i64)
