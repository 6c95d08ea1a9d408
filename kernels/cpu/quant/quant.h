/* The quantized kernel family's shared types: every GGUF block type decodes a weight row
 * into one integer form, and activations are quantized once per call into another, so one
 * integer dot-product kernel per ISA serves all block types.
 *
 * A weight row of K values is split into scale blocks of B = 32 (legacy types, IQ4_NL) or
 * B = 256 (K-quants, IQ4_XS, Q8_K) elements and sub-blocks of 16:
 *
 *     w[e] = d[b] * sc[j] * q[e] + dm[b] * mn[j]        (b = e / B, j = e / 16)
 *
 * with int8 levels q, int16 sub-block scales sc and mins mn (absent: sc = 1, mn = 0 or 1)
 * and float d, dm. Activations are ggml's Q8_0 / Q8_1 (B = 32) or Q8_K (B = 256):
 * a[e] = da[b] * qa[e], with per-16 integer sums of qa (bsum) and, for Q8_1, s = da * sum. */
#ifndef WB_QUANT_H
#define WB_QUANT_H

#include "wb_native.h"

/* ggml type ids (as stored in GGUF files). */
enum {
    WB_Q4_0 = 2, WB_Q4_1 = 3, WB_Q5_0 = 6, WB_Q5_1 = 7, WB_Q8_0 = 8, WB_Q8_1 = 9,
    WB_Q2_K = 10, WB_Q3_K = 11, WB_Q4_K = 12, WB_Q5_K = 13, WB_Q6_K = 14, WB_Q8_K = 15,
    WB_IQ4_NL = 20, WB_IQ4_XS = 23,
};

/* How the mins term of a block type is formed. */
enum { WB_MINS_NONE, WB_MINS_SUM, WB_MINS_SUB };

typedef struct {
    int type_id;
    const char *name;
    int block;      /* elements per GGUF block */
    int bytes;      /* bytes per GGUF block */
    int scale_block;/* B: 32 or 256 */
    int has_sc;     /* sub-block scales (else all 1) */
    int mins;       /* WB_MINS_NONE: no offset; WB_MINS_SUM: dm[b] * sum(a over b) (Q8_1's s);
                       WB_MINS_SUB: dm[b] * sum_j mn[j] * sum(a over sub-block j) */
} wb_qtype;

/* A decoded weight row (a thread's scratch). sc8 holds each sub-block scale 8 times (one
 * 128-bit lane of int16), so SIMD kernels load it instead of broadcasting. */
typedef struct {
    int8_t *q;     /* K */
    int16_t *sc8;  /* K / 16 * 8, when has_sc */
    int16_t *mn;   /* K / 16, when mins == WB_MINS_SUB */
    float *d;      /* K / B */
    float *dm;     /* K / B, when mins != WB_MINS_NONE */
} wb_wrow;

/* Quantized activations, one row (pointers into the call's buffers). */
typedef struct {
    const int8_t *q;     /* K */
    const float *d;      /* K / B */
    const float *s;      /* K / B: d * sum(q) rounded as ggml's Q8_1 (B = 32 only) */
    const int16_t *bsum; /* K / 16 */
    /* The small-batch kernels of 32-element types (qdot_raw.c) also take, 8 lanes a block
     * (one 256-bit vector, so that a block's integer dot product needs no shuffle to meet
     * them; NULL when not made): */
    const float *dv;      /* K / 32 * 8: d[b] in every lane */
    const int32_t *nsum;  /* K / 32 * 8: -offset * sum(q over b) / 8 in every lane */
    const float *sv;      /* K / 32 * 8: s[b] in lane 0, zeros (Q8_1 activations only) */
} wb_arow;

const wb_qtype *wb_qtype_find(int type_id);
void wb_decode_row(const wb_qtype *t, const uint8_t *raw, int64_t k, wb_wrow *w);
/* A row's scratch for wb_decode_row, in one zeroed allocation (the pointer to free). */
void *wb_alloc_row(const wb_qtype *t, int64_t k, wb_wrow *w);
/* Quantize one f32 row of k values as ggml does: to Q8_0 (s == NULL) or Q8_1 (blocks of 32),
 * or to Q8_K (blocks of 256). */
void wb_quantize_q8_32(const float *x, int64_t k, int8_t *q, float *d, float *s, int16_t *bsum);
void wb_quantize_q8_k(const float *x, int64_t k, int8_t *q, float *d, int16_t *bsum);
/* The level offset the small-batch kernels take out of a 32-element type's levels (they
 * multiply levels u = q + offset >= 0 as unsigned bytes): 8 (Q4_0), 16 (Q5_0), 128 (Q8_0,
 * IQ4_NL), else 0. */
int wb_level_offset(int type_id);
/* The 8-lane forms of wb_arow (dv, nsum; sv where s != NULL) of one Q8_0 / Q8_1 row. */
void wb_act_lanes(const int16_t *bsum, const float *d, const float *s, int64_t k, int offset,
                  float *dv, int32_t *nsum, float *sv);
/* out[r] = dot(w, a[r]) for r < nrows (nrows <= WB_QDOT_ROWS). */
#define WB_QDOT_ROWS 4
void wb_qdot_rows(const wb_qtype *t, const wb_wrow *w, const wb_arow *a, int nrows, int64_t k,
                  float *out);
/* The same from the raw blocks of one weight row, unpacked in registers (qdot_raw.c): NULL
 * where this type has no such kernel on this ISA (the row is decoded for wb_qdot_rows then). */
typedef void (*wb_qdot_raw_fn)(const uint8_t *raw, const wb_arow *a, int nrows, int64_t k,
                               float *out);
wb_qdot_raw_fn wb_qdot_raw_find(const wb_qtype *t);

/* Many activation rows at once (qgemm.c): m rows of quantized activations (q, d, s, bsum as
 * in wb_arow, row after row) times the n weight rows in raw blocks, out (m, n). Returns 0,
 * -1 when out of memory, or 1 where this ISA has no such kernel or m is under its crossover
 * (nothing done). */
int wb_qgemm(const wb_qtype *t, const uint8_t *raw, int64_t n, int64_t k, int64_t m,
             const int8_t *q, const float *d, const float *s, const int16_t *bsum, float *out,
             int threads);

/* The same on AMX tiles in bf16 (qgemm_amx.c), from the f32 activations x (m, k): 0, -1 when
 * out of memory, or 1 where AMX is not compiled, not on this CPU or OS, or turned off. */
int wb_qgemm_amx(const wb_qtype *t, const uint8_t *raw, int64_t n, int64_t k, const float *x,
                 int64_t m, float *out, int threads);
/* out (m, f) = act(x @ G.T) (x @ U.T), G and U (f, k) raw weights of one type, act SiLU or
 * (gelu) the tanh GELU, on the same tiles; the same returns. */
int wb_qgemm_amx_glu(const wb_qtype *t, const uint8_t *gate, const uint8_t *up, int gelu,
                     int64_t f, int64_t k, const float *x, int64_t m, float *out, int threads);
/* "on", or why wb_qgemm_amx does not run. wb_amx_enable(0) turns it off process-wide (1
 * allows it again); it returns whether it was allowed before. */
const char *wb_amx_status(void);
int wb_amx_enable(int on);

#endif /* WB_QUANT_H */
