// Shared by every workbench CUDA kernel: dtypes, the strided Layout parameter, conversions.
//
// A Layout travels BY VALUE as a kernel parameter (no device allocation per launch):
// ndim, a contiguity flag, the offset and up to WB_MAX_DIMS sizes and strides in ELEMENTS.
// backends/cuda/params.py packs it with the same field order and alignment.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define WB_MAX_DIMS 8

struct Layout {
    int ndim;
    int contiguous;
    long long offset;
    long long shape[WB_MAX_DIMS];
    long long strides[WB_MAX_DIMS];
};

// Element offset of the i-th element (C order over layout.shape).
__device__ __forceinline__ long long wb_offset(const Layout& l, long long i) {
    if (l.contiguous) return l.offset + i;
    long long off = l.offset;
    for (int d = l.ndim - 1; d >= 0; --d) {
        long long s = l.shape[d];
        long long q = i / s;
        off += (i - q * s) * l.strides[d];
        i = q;
    }
    return off;
}

#define WB_LOOP(i, n)                                                          \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)

typedef unsigned char wb_bool;
typedef unsigned char u8;
typedef unsigned int u32;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef __half f16;
typedef __nv_bfloat16 bf16;
typedef float f32;
typedef double f64;

// Compute type: halves compute in f32, everything else natively.
template <typename T> struct Acc { typedef T type; };
template <> struct Acc<f16> { typedef float type; };
template <> struct Acc<bf16> { typedef float type; };

template <typename T> __device__ __forceinline__ typename Acc<T>::type wb_load(T x) { return x; }
template <> __device__ __forceinline__ float wb_load<f16>(f16 x) { return __half2float(x); }
template <> __device__ __forceinline__ float wb_load<bf16>(bf16 x) { return __bfloat162float(x); }

// Any arithmetic value -> T (halves round to nearest even from f32).
template <typename T> struct Store {
    template <typename S> __device__ __forceinline__ static T from(S x) { return (T)x; }
};
template <> struct Store<f16> {
    template <typename S> __device__ __forceinline__ static f16 from(S x) {
        return __float2half_rn((float)x);
    }
};
template <> struct Store<bf16> {
    template <typename S> __device__ __forceinline__ static bf16 from(S x) {
        return __float2bfloat16_rn((float)x);
    }
};

// Every dtype; X(name, type). bool is stored as one byte (0 or 1).
#define WB_INT_DTYPES(X) X(u8, u8) X(u32, u32) X(i16, i16) X(i32, i32) X(i64, i64)
#define WB_FLOAT_DTYPES(X) X(f16, f16) X(bf16, bf16) X(f32, f32) X(f64, f64)
#define WB_NUM_DTYPES(X) WB_INT_DTYPES(X) WB_FLOAT_DTYPES(X)
#define WB_ALL_DTYPES(X) X(bool, wb_bool) WB_NUM_DTYPES(X)
