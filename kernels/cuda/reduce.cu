// Reductions over the LAST axis of a (M, K) view: the host permutes the reduced dims to the end
// of the input Layout, so row m, column k is element m * K + k of that Layout. One block of
// WB_REDUCE_THREADS threads per row (grid-stride over rows), a shared-memory tree per block.
// Names: reduce_<op>_<in dtype>; sum/prod write f16/bf16/f32/f64 as the input, integers and
// bool as i64; max/min keep the dtype; argmax/argmin write i64; any/all write bool.
#include "common.cuh"
#include <float.h>
#include <limits.h>

#define WB_REDUCE_THREADS 256

template <typename A> __device__ __forceinline__ A wb_lowest();
template <typename A> __device__ __forceinline__ A wb_highest();
#define LIMITS(T, lo, hi)                                                           \
    template <> __device__ __forceinline__ T wb_lowest<T>() { return lo; }          \
    template <> __device__ __forceinline__ T wb_highest<T>() { return hi; }
LIMITS(float, -INFINITY, INFINITY)
LIMITS(double, -(double)INFINITY, (double)INFINITY)
LIMITS(wb_bool, 0, 255)  // also u8 (the same C type)
LIMITS(u32, 0u, 0xffffffffu)
LIMITS(i16, -32768, 32767)
LIMITS(i32, INT_MIN, INT_MAX)
LIMITS(i64, LLONG_MIN, LLONG_MAX)

// Sum/prod accumulator: float for halves and f32, double for f64, i64 for integers and bool.
template <typename T> struct SumAcc { typedef i64 type; };
template <> struct SumAcc<f16> { typedef float type; };
template <> struct SumAcc<bf16> { typedef float type; };
template <> struct SumAcc<f32> { typedef float type; };
template <> struct SumAcc<f64> { typedef double type; };
template <typename T> struct SumOut { typedef i64 type; };
template <> struct SumOut<f16> { typedef f16 type; };
template <> struct SumOut<bf16> { typedef bf16 type; };
template <> struct SumOut<f32> { typedef f32 type; };
template <> struct SumOut<f64> { typedef f64 type; };
// The value type max/min compare in.
template <typename T> struct CmpAcc { typedef typename Acc<T>::type type; };

#define REDUCE_KERNEL(op, name, T, O, A, init, combine)                             \
    extern "C" __global__ void reduce_##op##_##name(O* __restrict__ out,            \
                                                    const T* __restrict__ in, long long M, \
                                                    long long K, Layout l) {         \
        __shared__ A buf[WB_REDUCE_THREADS];                                        \
        for (long long row = blockIdx.x; row < M; row += gridDim.x) {               \
            A acc = init;                                                           \
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {               \
                A a = acc, b = (A)wb_load(in[wb_offset(l, row * K + k)]);           \
                acc = combine;                                                      \
            }                                                                       \
            buf[threadIdx.x] = acc;                                                 \
            __syncthreads();                                                        \
            for (int s = blockDim.x / 2; s > 0; s >>= 1) {                          \
                if (threadIdx.x < s) {                                              \
                    A a = buf[threadIdx.x], b = buf[threadIdx.x + s];               \
                    buf[threadIdx.x] = combine;                                     \
                }                                                                   \
                __syncthreads();                                                    \
            }                                                                       \
            if (threadIdx.x == 0) out[row] = Store<O>::from(buf[0]);                \
            __syncthreads();                                                        \
        }                                                                           \
    }

// NaN wins max/min (as numpy and PyTorch); for integers a != a is always false. any/all keep
// the values' own type until the test against zero (0.5 is true).
#define MAX_COMBINE ((a != a || a > b) ? a : b)
#define MIN_COMBINE ((a != a || a < b) ? a : b)

#define INST_REDUCE(name, T)                                                        \
    REDUCE_KERNEL(sum, name, T, SumOut<T>::type, SumAcc<T>::type, 0, a + b)         \
    REDUCE_KERNEL(prod, name, T, SumOut<T>::type, SumAcc<T>::type, 1, a * b)        \
    REDUCE_KERNEL(max, name, T, T, CmpAcc<T>::type, wb_lowest<CmpAcc<T>::type>(), MAX_COMBINE) \
    REDUCE_KERNEL(min, name, T, T, CmpAcc<T>::type, wb_highest<CmpAcc<T>::type>(), MIN_COMBINE) \
    REDUCE_KERNEL(any, name, T, wb_bool, CmpAcc<T>::type, 0, (CmpAcc<T>::type)((a != 0) || (b != 0))) \
    REDUCE_KERNEL(all, name, T, wb_bool, CmpAcc<T>::type, 1, (CmpAcc<T>::type)((a != 0) && (b != 0)))

// The first index of the max (min); a NaN counts as the largest and smallest value.
#define ARG_KERNEL(op, better, name, T)                                             \
    extern "C" __global__ void reduce_##op##_##name(i64* __restrict__ out,          \
                                                    const T* __restrict__ in, long long M, \
                                                    long long K, Layout l) {         \
        typedef CmpAcc<T>::type A;                                                  \
        __shared__ A vals[WB_REDUCE_THREADS];                                       \
        __shared__ long long idxs[WB_REDUCE_THREADS];                               \
        for (long long row = blockIdx.x; row < M; row += gridDim.x) {               \
            A v = 0;                                                                \
            long long vi = -1;                                                      \
            for (long long k = threadIdx.x; k < K; k += blockDim.x) {               \
                A w = (A)wb_load(in[wb_offset(l, row * K + k)]);                    \
                long long wi = k;                                                   \
                if (vi < 0 || better) { v = w; vi = wi; }                           \
            }                                                                       \
            vals[threadIdx.x] = v;                                                  \
            idxs[threadIdx.x] = vi;                                                 \
            __syncthreads();                                                        \
            for (int s = blockDim.x / 2; s > 0; s >>= 1) {                          \
                if (threadIdx.x < s) {                                              \
                    A w = vals[threadIdx.x + s];                                    \
                    long long wi = idxs[threadIdx.x + s];                           \
                    v = vals[threadIdx.x];                                          \
                    vi = idxs[threadIdx.x];                                         \
                    if (wi >= 0 && (vi < 0 || better)) {                            \
                        vals[threadIdx.x] = w;                                      \
                        idxs[threadIdx.x] = wi;                                     \
                    }                                                               \
                }                                                                   \
                __syncthreads();                                                    \
            }                                                                       \
            if (threadIdx.x == 0) out[row] = idxs[0] < 0 ? 0 : idxs[0];             \
            __syncthreads();                                                        \
        }                                                                           \
    }
// w (index wi) replaces v (index vi) when strictly better, or equal with a smaller index.
#define ARGMAX_BETTER                                                               \
    ((v != v) ? (w != w && wi < vi)                                                 \
              : ((w != w) || w > v || (w == v && wi < vi)))
#define ARGMIN_BETTER                                                               \
    ((v != v) ? (w != w && wi < vi)                                                 \
              : ((w != w) || w < v || (w == v && wi < vi)))
#define INST_ARG(name, T) ARG_KERNEL(argmax, ARGMAX_BETTER, name, T) ARG_KERNEL(argmin, ARGMIN_BETTER, name, T)

WB_ALL_DTYPES(INST_REDUCE)
WB_ALL_DTYPES(INST_ARG)

// Inclusive scan along the last axis of (M, K); one thread per row (the host permutes the scan
// dim last in both Layouts, the output Layout being the permuted contiguous result).
#define CUMSUM_KERNEL(name, T)                                                      \
    extern "C" __global__ void cumsum_##name(SumOut<T>::type* __restrict__ out, Layout lo, \
                                             const T* __restrict__ in, Layout li,    \
                                             long long M, long long K) {             \
        WB_LOOP(row, M) {                                                           \
            SumAcc<T>::type acc = 0;                                                \
            for (long long k = 0; k < K; ++k) {                                     \
                acc += (SumAcc<T>::type)wb_load(in[wb_offset(li, row * K + k)]);   \
                out[wb_offset(lo, row * K + k)] = Store<SumOut<T>::type>::from(acc); \
            }                                                                       \
        }                                                                           \
    }
WB_ALL_DTYPES(CUMSUM_KERNEL)

// Stable sort of each row of (M, K) (K <= 1024): a bitonic network in shared memory over
// (value, index) keys, so equal values keep their order; NaN sorts as the largest value.
// Shared memory: P * (8 + sizeof(compute type)) bytes, P = the power of two >= K (host).
template <typename C>
__device__ __forceinline__ bool sort_before(C va, long long ia, C vb, long long ib, int desc) {
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
    extern "C" __global__ void sort_##name(T* __restrict__ vals, i64* __restrict__ idx, \
                                           Layout lo, const T* __restrict__ in, Layout li, \
                                           long long M, long long K, long long P, int desc) { \
        typedef CmpAcc<T>::type C;                                                  \
        extern __shared__ long long smem[];                                         \
        long long* si = smem;                                                       \
        C* sv = (C*)(smem + P);                                                     \
        for (long long row = blockIdx.x; row < M; row += gridDim.x) {               \
            for (long long i = threadIdx.x; i < P; i += blockDim.x) {               \
                if (i < K) {                                                        \
                    sv[i] = (C)wb_load(in[wb_offset(li, row * K + i)]);             \
                    si[i] = i;                                                      \
                } else {                                                            \
                    si[i] = -1;                                                     \
                }                                                                   \
            }                                                                       \
            __syncthreads();                                                        \
            for (long long size = 2; size <= P; size <<= 1) {                       \
                for (long long stride = size / 2; stride > 0; stride >>= 1) {       \
                    for (long long i = threadIdx.x; i < P; i += blockDim.x) {       \
                        long long j = i ^ stride;                                   \
                        if (j <= i) continue;                                       \
                        bool asc = (i & size) == 0;                                 \
                        bool swap = asc ? sort_before(sv[j], si[j], sv[i], si[i], desc) \
                                        : sort_before(sv[i], si[i], sv[j], si[j], desc); \
                        if (swap) {                                                 \
                            C tv = sv[i]; sv[i] = sv[j]; sv[j] = tv;                \
                            long long ti = si[i]; si[i] = si[j]; si[j] = ti;        \
                        }                                                           \
                    }                                                               \
                    __syncthreads();                                                \
                }                                                                   \
            }                                                                       \
            for (long long i = threadIdx.x; i < K; i += blockDim.x) {               \
                long long o = wb_offset(lo, row * K + i);                           \
                vals[o] = in[wb_offset(li, row * K + si[i])];                       \
                idx[o] = si[i];                                                     \
            }                                                                       \
            __syncthreads();                                                        \
        }                                                                           \
    }
WB_ALL_DTYPES(SORT_KERNEL)

// Rows longer than 1024: the same network over an index scratch (M, P) in global memory, one
// launch per (size, stride) step; values are read through the input layout when compared.
extern "C" __global__ void sort_long_init(i64* __restrict__ si, long long M, long long K,
                                          long long P) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < M * P;
         t += (long long)gridDim.x * blockDim.x) {
        long long i = t % P;
        si[t] = i < K ? i : -1;
    }
}

#define SORT_LONG_KERNELS(name, T)                                                  \
    extern "C" __global__ void sort_long_step_##name(i64* __restrict__ si, const T* __restrict__ in, \
                                                     Layout li, long long M, long long K, \
                                                     long long P, long long size,   \
                                                     long long stride, int desc) {  \
        typedef CmpAcc<T>::type C;                                                  \
        for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < M * P; \
             t += (long long)gridDim.x * blockDim.x) {                              \
            long long row = t / P, i = t % P, j = i ^ stride;                       \
            if (j <= i) continue;                                                   \
            long long a = si[row * P + i], b = si[row * P + j];                     \
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
    extern "C" __global__ void sort_long_gather_##name(T* __restrict__ vals, i64* __restrict__ idx, \
                                                       Layout lo, const T* __restrict__ in, \
                                                       Layout li, const i64* __restrict__ si, \
                                                       long long M, long long K, long long P) { \
        for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < M * K; \
             t += (long long)gridDim.x * blockDim.x) {                              \
            long long row = t / K, s = si[row * P + t % K];                         \
            long long o = wb_offset(lo, t);                                         \
            vals[o] = in[wb_offset(li, row * K + s)];                               \
            idx[o] = s;                                                             \
        }                                                                           \
    }
WB_ALL_DTYPES(SORT_LONG_KERNELS)
