// GGUF (ggml) block formats: dequantization to f32 / f16 / bf16 and a matrix-vector product
// for Q4_0 and Q8_0 weights (one warp per output row, x in f32).
// Block layouts (bytes): Q4_0 {half d; u8 qs[16]} 32 values; Q4_1 {half d, m; u8 qs[16]};
// Q5_0 {half d; u8 qh[4]; u8 qs[16]}; Q5_1 {half d, m; u8 qh[4]; u8 qs[16]};
// Q8_0 {half d; i8 qs[32]}; Q4_K {half d, dmin; u8 scales[12]; u8 qs[128]} 256 values;
// Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; half d} 256 values.
// Blocks are packed without padding, so halves are read byte-wise (no alignment assumed).
// Names: dequantize_<type>_<out dtype>, qmatvec_<type>_f32.
#include "common.cuh"

__device__ __forceinline__ float rd_half(const u8* p) {
    unsigned short bits = (unsigned short)p[0] | ((unsigned short)p[1] << 8);
    return __half2float(__ushort_as_half(bits));
}

// Value k (0..31) of a 32-value block.
__device__ __forceinline__ float q4_0(const u8* b, int k) {
    int q = k < 16 ? (b[2 + k] & 0xF) : (b[2 + k - 16] >> 4);
    return (float)(q - 8) * rd_half(b);
}
__device__ __forceinline__ float q4_1(const u8* b, int k) {
    int q = k < 16 ? (b[4 + k] & 0xF) : (b[4 + k - 16] >> 4);
    return (float)q * rd_half(b) + rd_half(b + 2);
}
__device__ __forceinline__ int q5_int(const u8* qh4, const u8* qs, int k) {
    unsigned qh = (unsigned)qh4[0] | ((unsigned)qh4[1] << 8) | ((unsigned)qh4[2] << 16) |
                  ((unsigned)qh4[3] << 24);
    int lo = k < 16 ? (qs[k] & 0xF) : (qs[k - 16] >> 4);
    int hi = (qh >> k) & 1;
    return lo | (hi << 4);
}
__device__ __forceinline__ float q5_0(const u8* b, int k) {
    return (float)(q5_int(b + 2, b + 6, k) - 16) * rd_half(b);
}
__device__ __forceinline__ float q5_1(const u8* b, int k) {
    return (float)q5_int(b + 4, b + 8, k) * rd_half(b) + rd_half(b + 2);
}
__device__ __forceinline__ float q8_0(const u8* b, int k) {
    return (float)((const signed char*)(b + 2))[k] * rd_half(b);
}
// 6-bit scale and min j (0..7) of a Q4_K super-block.
__device__ __forceinline__ void k4_scale_min(int j, const u8* s, int* sc, int* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}
__device__ __forceinline__ float q4_k(const u8* b, int k) {
    int chunk = k / 64, within = k % 64, sub = 2 * chunk + within / 32;
    int sc, m;
    k4_scale_min(sub, b + 4, &sc, &m);
    u8 q = b[16 + chunk * 32 + within % 32];
    int v = within < 32 ? (q & 0xF) : (q >> 4);
    return rd_half(b) * (float)sc * (float)v - rd_half(b + 2) * (float)m;
}
__device__ __forceinline__ float q6_k(const u8* b, int k) {
    const u8* ql = b;
    const u8* qh = b + 128;
    const signed char* sc = (const signed char*)(b + 192);
    int half = k / 128, r = k % 128, quarter = r / 32, l = r % 32;
    ql += 64 * half;
    qh += 32 * half;
    sc += 8 * half;
    int low = (quarter & 1) ? ql[l + 32] : ql[l];
    low = quarter < 2 ? (low & 0xF) : (low >> 4);
    int high = (qh[l] >> (2 * quarter)) & 3;
    int q = (low | (high << 4)) - 32;
    return rd_half(b + 208) * (float)sc[l / 16 + 2 * quarter] * (float)q;
}

// X(type, values per block, bytes per block)
#define WB_QTYPES(X) X(q4_0, 32, 18) X(q4_1, 32, 20) X(q5_0, 32, 22) X(q5_1, 32, 24) \
    X(q8_0, 32, 34) X(q4_k, 256, 144) X(q6_k, 256, 210)

#define DEQUANT_KERNEL(qt, QK, BYTES, oname, O)                                     \
    extern "C" __global__ void dequantize_##qt##_##oname(O* __restrict__ out,       \
                                                         const u8* __restrict__ blocks, \
                                                         long long n) {              \
        WB_LOOP(i, n) {                                                             \
            out[i] = Store<O>::from(qt(blocks + (i / QK) * BYTES, (int)(i % QK)));  \
        }                                                                           \
    }
#define DEQUANT_ALL(qt, QK, BYTES)                                                  \
    DEQUANT_KERNEL(qt, QK, BYTES, f32, f32)                                         \
    DEQUANT_KERNEL(qt, QK, BYTES, f16, f16)                                         \
    DEQUANT_KERNEL(qt, QK, BYTES, bf16, bf16)
WB_QTYPES(DEQUANT_ALL)

// y[r] = sum_k W[r, k] x[k]; W (rows, K) quantized row-major (K a multiple of the block size),
// one warp of 32 threads per row (blockDim = (32, rows per block)).
#define MATVEC_KERNEL(qt, QK, BYTES)                                                \
    extern "C" __global__ void qmatvec_##qt##_f32(float* __restrict__ y,            \
                                                  const u8* __restrict__ w,          \
                                                  const float* __restrict__ x, long long rows, \
                                                  long long K) {                     \
        long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;           \
        if (row >= rows) return;                                                    \
        const u8* wr = w + row * (K / QK) * BYTES;                                  \
        float acc = 0.f;                                                            \
        for (long long k = threadIdx.x; k < K; k += 32)                             \
            acc += qt(wr + (k / QK) * BYTES, (int)(k % QK)) * x[k];                 \
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off); \
        if (threadIdx.x == 0) y[row] = acc;                                         \
    }
MATVEC_KERNEL(q4_0, 32, 18)
MATVEC_KERNEL(q8_0, 32, 34)
