// GGUF (ggml) block formats: dequantization to f32 / f16 / bf16 and a matrix-vector product
// for Q4_0 and Q8_0 weights (one warp of 32 lanes per output row, x in f32).
// Block layouts (bytes): Q4_0 {half d; u8 qs[16]} 32 values; Q4_1 {half d, m; u8 qs[16]};
// Q5_0 {half d; u8 qh[4]; u8 qs[16]}; Q5_1 {half d, m; u8 qh[4]; u8 qs[16]};
// Q8_0 {half d; i8 qs[32]}; Q4_K {half d, dmin; u8 scales[12]; u8 qs[128]} 256 values;
// Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; half d} 256 values.
// Blocks are packed without padding, so halves are read byte-wise (no alignment assumed).
// Names: dequantize_<type>_<out dtype>, qmatvec_<type>_f32.
// Written in the portable dialect (common.h).

typedef WB_GLOBAL const u8* wb_block;

WB_FN float rd_half(wb_block p) {
    return WB_F16_BITS_TO_F32((unsigned short)p[0] | ((unsigned short)p[1] << 8));
}

// Value k (0..31) of a 32-value block.
WB_FN float q4_0(wb_block b, int k) {
    int q = k < 16 ? (b[2 + k] & 0xF) : (b[2 + k - 16] >> 4);
    return (float)(q - 8) * rd_half(b);
}
WB_FN float q4_1(wb_block b, int k) {
    int q = k < 16 ? (b[4 + k] & 0xF) : (b[4 + k - 16] >> 4);
    return (float)q * rd_half(b) + rd_half(b + 2);
}
WB_FN int q5_int(wb_block qh4, wb_block qs, int k) {
    unsigned qh = (unsigned)qh4[0] | ((unsigned)qh4[1] << 8) | ((unsigned)qh4[2] << 16) |
                  ((unsigned)qh4[3] << 24);
    int lo = k < 16 ? (qs[k] & 0xF) : (qs[k - 16] >> 4);
    int hi = (qh >> k) & 1;
    return lo | (hi << 4);
}
WB_FN float q5_0(wb_block b, int k) {
    return (float)(q5_int(b + 2, b + 6, k) - 16) * rd_half(b);
}
WB_FN float q5_1(wb_block b, int k) {
    return (float)q5_int(b + 4, b + 8, k) * rd_half(b) + rd_half(b + 2);
}
WB_FN float q8_0(wb_block b, int k) {
    return (float)((WB_GLOBAL const i8*)(b + 2))[k] * rd_half(b);
}
// 6-bit scale (first) and min (second) j (0..7) of a Q4_K super-block.
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
WB_FN float q4_k(wb_block b, int k) {
    int chunk = k / 64, within = k % 64, sub = 2 * chunk + within / 32;
    ScaleMin sm = k4_scale_min(sub, b + 4);
    u8 q = b[16 + chunk * 32 + within % 32];
    int v = within < 32 ? (q & 0xF) : (q >> 4);
    return rd_half(b) * (float)sm.scale * (float)v - rd_half(b + 2) * (float)sm.min;
}
WB_FN float q6_k(wb_block b, int k) {
    int half = k / 128, r = k % 128, quarter = r / 32, l = r % 32;
    wb_block ql = b + 64 * half;
    wb_block qh = b + 128 + 32 * half;
    WB_GLOBAL const i8* sc = (WB_GLOBAL const i8*)(b + 192) + 8 * half;
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
    WB_KERNEL dequantize_##qt##_##oname(WB_OUT(O, out, 0), WB_IN(u8, blocks, 1),    \
                                        WB_ARG(wb_i64, n, 2) WB_THREAD_ARGS) {      \
        WB_LOOP(i, n) {                                                             \
            out[i] = Store<O>::from(qt(blocks + (i / QK) * BYTES, (int)(i % QK)));  \
        }                                                                           \
    }
#define DEQUANT_ALL(qt, QK, BYTES)                                                  \
    DEQUANT_KERNEL(qt, QK, BYTES, f32, f32)                                         \
    DEQUANT_KERNEL(qt, QK, BYTES, f16, f16)                                         \
    DEQUANT_KERNEL(qt, QK, BYTES, bf16, bf16)
WB_QTYPES(DEQUANT_ALL)

// y[r] = sum_k W[r, k] x[k]; W (rows, K) quantized row-major (K a multiple of the block size).
// A block of 32 R threads serves R rows: warp w of block b takes row b R + w.
#define MATVEC_KERNEL(qt, QK, BYTES)                                                \
    WB_KERNEL qmatvec_##qt##_f32(WB_OUT(float, y, 0), WB_IN(u8, w, 1), WB_IN(float, x, 2), \
                                 WB_ARG(wb_i64, rows, 3), WB_ARG(wb_i64, K, 4) WB_THREAD_ARGS) { \
        wb_i64 row = (wb_i64)WB_BLOCK_ID * (WB_THREADS >> 5) + (WB_THREAD >> 5);    \
        int lane = WB_THREAD & 31;                                                  \
        if (row >= rows) return; /* the whole warp: its lanes share the row */      \
        wb_block wr = w + row * (K / QK) * BYTES;                                   \
        float acc = 0.f;                                                            \
        for (wb_i64 k = lane; k < K; k += 32)                                       \
            acc += qt(wr + (k / QK) * BYTES, (int)(k % QK)) * x[k];                 \
        acc = wb_warp_reduce<wb_reduce_sum>(acc);                                   \
        if (lane == 0) y[row] = acc;                                                \
    }
MATVEC_KERNEL(q4_0, 32, 18)
MATVEC_KERNEL(q8_0, 32, 34)
