// CUDA prelude of the portable kernel dialect (see common.h): what the dialect's words mean
// for nvcc. kernels/cuda/*.cu include it through common.cuh.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define WB_TARGET_CUDA 1
#define WB_HAS_F64 1

// A kernel entry point (one bounded to at most N threads per block) and device helpers.
#define WB_KERNEL extern "C" __global__ void
#define WB_KERNEL_BOUNDED(N) extern "C" __global__ void __launch_bounds__(N)
#define WB_FN __device__ __forceinline__
#define WB_DEVICE __device__
// Kernel parameters: an output buffer, an input buffer, a value (by value on CUDA; the slot
// is Metal's buffer index). WB_THREAD_ARGS ends the list (Metal's thread position).
#define WB_OUT(T, name, slot) T* __restrict__ name
#define WB_IN(T, name, slot) const T* __restrict__ name
#define WB_ARG(T, name, slot) T name
#define WB_THREAD_ARGS
// A helper that reads the thread's position declares WB_THREAD_PARAMS and is called with
// WB_THREAD_PASS (Metal passes the kernel's built-ins on; CUDA reads them anywhere).
#define WB_THREAD_PARAMS
#define WB_THREAD_PASS
// How helpers take a Layout parameter.
#define WB_LAYOUT_REF WB_REF(Layout)
// The global thread index and the grid's thread count (for grid-stride loops).
#define WB_GLOBAL_ID blockIdx.x * (long long)blockDim.x + threadIdx.x
#define WB_GLOBAL_SIZE (long long)blockDim.x * gridDim.x
// The block (threadgroup): its index and count, the thread's index in it and its size.
#define WB_BLOCK_ID blockIdx.x
#define WB_BLOCKS gridDim.x
#define WB_THREAD threadIdx.x
#define WB_THREADS blockDim.x
// Block-shared memory, a pointer into it, and the block barrier.
#define WB_SHARED __shared__
#define WB_SHARED_PTR(T) T*
#define WB_BARRIER() __syncthreads()
// Dynamic block-shared memory (its size set at launch): declared in the body on CUDA, a
// kernel parameter on Metal (WB_DYNAMIC_SHARED_ARG goes just before WB_THREAD_ARGS).
#define WB_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#define WB_DYNAMIC_SHARED_ARG(T, name)
// Address space of a pointer into device memory, and how helpers take a struct parameter
// (a read-only reference: on Metal it lives in the constant address space).
#define WB_GLOBAL
#define WB_REF(T) const T&

typedef long long wb_i64;
typedef unsigned long long wb_u64;
typedef signed char wb_i8;
typedef double wb_wide;  // scalars cross from the host in this type
typedef __half f16;
typedef __nv_bfloat16 bf16;

// Half conversions: intrinsics on CUDA (round to nearest even).
#define WB_F16_TO_F32(x) __half2float(x)
#define WB_BF16_TO_F32(x) __bfloat162float(x)
#define WB_F32_TO_F16(x) __float2half_rn(x)
#define WB_F32_TO_BF16(x) __float2bfloat16_rn(x)
#define WB_F16_BITS_TO_F32(bits) __half2float(__ushort_as_half(bits))

// v from the lane o above in the 32-lane warp (lanes past the end keep their own v).
// __shfl_down_sync has no 1- and 2-byte overloads: those go through int.
template <typename T> WB_FN T wb_shuffle_down(T v, int o) {
    return __shfl_down_sync(0xffffffffu, v, o);
}
WB_FN unsigned char wb_shuffle_down(unsigned char v, int o) {
    return (unsigned char)__shfl_down_sync(0xffffffffu, (int)v, o);
}
WB_FN short wb_shuffle_down(short v, int o) {
    return (short)__shfl_down_sync(0xffffffffu, (int)v, o);
}

// base[i] += v atomically: atomicAdd for f32, f64, i32, f16 and bf16 (sm_70+; bf16 natively
// from sm_90, a 16-bit compare-and-swap loop in the toolkit before); i64 through the unsigned
// overload (two's complement: the same bits).
template <typename T> WB_FN void wb_atomic_add(T* base, wb_i64 i, T v) { atomicAdd(base + i, v); }
WB_FN void wb_atomic_add(wb_i64* base, wb_i64 i, wb_i64 v) {
    atomicAdd((wb_u64*)(base + i), (wb_u64)v);
}
