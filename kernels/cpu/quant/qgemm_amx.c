/* Many activation rows at once on AMX (Intel Sapphire Rapids and later): every block type's
 * weights decoded to bfloat16 and multiplied in tiles with f32 accumulation.
 *
 * out (m, n) = x (m, k) @ W.T. Threads take panels of NP = 32 weight rows. A panel is decoded
 * once (decode.c's row decoder, then w = d sc q + dm mn in f32, rounded to bf16) into row-major
 * bf16, which is what a tile of the first operand holds: 16 rows x 32 values. The activations
 * are rounded to bf16 once per call and laid out as the second operand wants, in groups of 16
 * rows: for each 32-value step of k, 16 pairs p x 16 rows j, item (p, j) = (x[j][2p],
 * x[j][2p + 1]). One TDPBF16PS then adds
 *
 *     C[i][j] += sum_p W[i][2p] x[j][2p] + W[i][2p + 1] x[j][2p + 1]
 *
 * for 16 weight rows i and 16 activation rows j: 8192 products. Four accumulator tiles (32
 * weight rows x 32 activation rows) stay in the tile registers over all of k, then C (= out's
 * transpose) is written through a 16 x 16 transpose.
 *
 * wb_qgemm_amx_glu fuses an LLM's gated MLP unit into the same tiles: a panel holds 16 gate
 * rows over the 16 up rows of the same outputs, and act(gate) up is taken before the store, so
 * neither product is written.
 *
 * Error: each factor carries bf16's relative rounding error, at most 2^-9, so
 * |y - sum w x| <= (2^-8 + 2^-18) sum |w x| plus f32 accumulation (the tests allow 2^-8 +
 * 2^-16 and (k/2 + 2) 2^-24 for the sums). That
 * is the size of the error ggml's Q8 activation quantization makes, which the VNNI kernel
 * (qgemm.c) keeps.
 *
 * AMX needs the CPU's AMX-TILE, AMX-BF16 and AVX512-BF16, the OS's tile state (XCR0 bits 17-18)
 * and Linux's permission (arch_prctl ARCH_REQ_XCOMP_PERM, asked once). wb_amx_enable(0) (from
 * WORKBENCH_AMX=0, or a test) turns it off; elsewhere wb_qgemm_amx returns 1 and the caller runs
 * its own kernels.
 * Measured (2-core Xeon with AMX, 1 thread, x (512, 768) @ W.T, W 2048 x 768 Q8_0): 2.8 ms
 * against the VNNI kernel's 6.8 ms (about 570 GFLOP/s); from 32 rows on it is the faster one
 * (16 rows: even). benchmarks/bench_quantized.py -k b512 has the 4096-wide products. Cutting k
 * into L1-sized parts (the accumulators kept in memory between them) measured 3-8% slower. */
#include "transpose.h" /* first: Python.h sets the feature macros (syscall) */

#include "core/vmath.h"

#include <stdatomic.h>
#include <stdlib.h>

#if WB_HAS_AVX512 && defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && \
    (__GNUC__ >= 11 || defined(__clang__))
#define WB_AMX_BUILT 1
#include <cpuid.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define WB_AMX_BUILT 0
#endif

static atomic_int amx_allowed = 1; /* wb_amx_enable */

#if WB_AMX_BUILT

#define NP 32 /* weight rows a panel: two tiles of 16 */
#define KS 32 /* values of k a tile step: 16 bf16 pairs */
#define AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512bf16")))

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static const char *amx_why = NULL; /* NULL: usable */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) {
        amx_why = "the CPU has no AMX-TILE/AMX-BF16";
        return;
    }
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a & (1u << 5))) {
        amx_why = "the CPU has no AVX512-BF16";
        return;
    }
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) {
        amx_why = "the OS does not enable the tile state (XCR0)";
        return;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
        amx_why = "Linux refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM)";
}

const char *wb_amx_status(void) {
    pthread_once(&amx_once, amx_probe);
    if (amx_why) return amx_why;
    return atomic_load(&amx_allowed) ? "on" : "off (turned off: WORKBENCH_AMX=0 or set_amx)";
}

static int amx_on(void) {
    pthread_once(&amx_once, amx_probe);
    return !amx_why && atomic_load(&amx_allowed);
}

/* Palette 1; all eight tiles 16 rows x 64 bytes (0-3 accumulators, 4-5 weights, 6-7 acts). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

AMX_FN static void load_config(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* 32 floats -> 32 bf16 (round to nearest even), in order. */
AMX_FN static inline __m512i bf16x32(__m512 lo, __m512 hi) {
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* Rows [r0, r0 + 16) of x (rows >= m are zeros) as the group's tile operands: k / KS blocks
 * of 16 x 16 pairs (1 KiB each). */
AMX_FN static void pack_group(const float *x, int64_t m, int64_t k, int64_t r0, uint8_t *g) {
    for (int64_t e = 0; e < k; e += KS) {
        __m512i r[16];
        for (int j = 0; j < 16; j++) {
            if (r0 + j >= m) {
                r[j] = _mm512_setzero_si512();
                continue;
            }
            const float *row = x + (r0 + j) * k + e;
            r[j] = bf16x32(_mm512_loadu_ps(row), _mm512_loadu_ps(row + 16));
        }
        wb_transpose16(r); /* r[p] = pair p of every row */
        for (int p = 0; p < 16; p++) _mm512_store_si512(g + (e / KS) * 1024 + 64 * p, r[p]);
    }
}

/* One decoded row as bf16: w[e] = (d[b] sc[j]) q[e] + dm[b] mn[j] (mn = 1 for WB_MINS_SUM). */
AMX_FN static void expand_bf16(const wb_qtype *t, const wb_wrow *w, int64_t k, uint16_t *out) {
    const int B = t->scale_block;
    for (int64_t e = 0; e < k; e += 32) {
        __m512 v[2];
        for (int h = 0; h < 2; h++) {
            const int64_t b = e / B, j = (e + 16 * h) / 16;
            const float scale = t->has_sc ? w->d[b] * (float)w->sc8[8 * j] : w->d[b];
            const __m128i q = _mm_loadu_si128((const __m128i *)(w->q + e + 16 * h));
            v[h] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
                                 _mm512_set1_ps(scale));
            if (t->mins == WB_MINS_SUM) v[h] = _mm512_add_ps(v[h], _mm512_set1_ps(w->dm[b]));
            if (t->mins == WB_MINS_SUB)
                v[h] = _mm512_add_ps(v[h], _mm512_set1_ps(w->dm[b] * (float)w->mn[j]));
        }
        _mm512_storeu_si512(out + e, bf16x32(v[0], v[1]));
    }
}

/* C tile (out's transpose: C[i][j] = out[j][i]) into out's rows [r0, r0 + rows) and columns
 * [c0, c0 + cols). */
AMX_FN static void store_transposed(const float *c, float *out, int64_t n, int64_t r0, int rows,
                                    int64_t c0, int cols) {
    __m512i r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_load_si512(c + 16 * i);
    wb_transpose16(r);
    const __mmask16 keep = (__mmask16)((1u << cols) - 1);
    for (int j = 0; j < rows; j++)
        _mm512_mask_storeu_ps(out + (r0 + j) * n + c0, keep, _mm512_castsi512_ps(r[j]));
}

/* The four accumulator tiles into c (4 x 256 floats: tile t at c + 256 t). */
AMX_FN static inline void store_sums(float *c) {
    _tile_stored(0, c, 64);
    _tile_stored(1, c + 256, 64);
    _tile_stored(2, c + 512, 64);
    _tile_stored(3, c + 768, 64);
}

/* What a panel's products become: out's columns [c0, c0 + cols) of a plain product (the
 * panel's 32 rows are 32 output columns), or of a gated unit (rows 0-15 are gate rows, 16-31
 * the up rows of the same 16 output columns: out = act(gate) up). */
typedef struct {
    float *out;
    int64_t n, c0;
    int cols, glu, gelu;
} panel_out;

/* Tile t holds weight rows 16 (t >> 1) times activation group g + (t & 1). */
AMX_FN static void store_tiles(float *c, const panel_out *o, int64_t g, int64_t m) {
    for (int h = 0; h < 2; h++) {
        const int64_t r0 = 16 * (g + h);
        if (r0 >= m) break;
        const int rows = m - r0 < 16 ? (int)(m - r0) : 16;
        if (o->glu) {
            float *gate = c + 256 * h, *up = c + 256 * (2 + h);
            if (o->gelu) /* two loops: each vectorises with its act inlined */
                for (int i = 0; i < 256; i++) gate[i] = wb_glu_f(gate[i], up[i], 1);
            else
                for (int i = 0; i < 256; i++) gate[i] = wb_glu_f(gate[i], up[i], 0);
            store_transposed(gate, o->out, o->n, r0, rows, o->c0, o->cols);
            continue;
        }
        for (int wc = 0; wc < 32 && wc < o->cols; wc += 16)
            store_transposed(c + 256 * (2 * (wc / 16) + h), o->out, o->n, r0, rows, o->c0 + wc,
                             o->cols - wc < 16 ? o->cols - wc : 16);
    }
}

/* The panel (NP bf16 rows of k at w) times every pair of activation groups. */
AMX_FN static void panel_times_acts(const uint16_t *w, const uint8_t *acts, int64_t groups,
                                    int64_t m, int64_t k, const panel_out *o) {
    const size_t wstride = (size_t)k * 2, gbytes = (size_t)k / KS * 1024;
    const uint16_t *w1 = w + 16 * k;
    float c[1024] __attribute__((aligned(64)));
    for (int64_t g = 0; g < groups; g += 2) {
        const uint8_t *b0 = acts + g * gbytes, *b1 = b0 + gbytes;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t e = 0; e < k; e += KS) {
            _tile_loadd(4, w + e, wstride);
            _tile_loadd(5, w1 + e, wstride);
            _tile_loadd(6, b0 + e / KS * 1024, 64);
            _tile_loadd(7, b1 + e / KS * 1024, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        store_sums(c);
        store_tiles(c, o, g, m);
    }
}

/* A thread's weight scratch: the panel's bf16 rows and the row decoder's scratch. */
typedef struct {
    uint16_t *bf;
    wb_wrow w;
    void *row;
} panel_scratch;

static int alloc_panel(const wb_qtype *t, int64_t k, panel_scratch *p) {
    p->bf = aligned_alloc(64, (size_t)NP * (size_t)k * 2);
    p->row = wb_alloc_row(t, k, &p->w);
    if (p->bf) memset(p->bf, 0, (size_t)NP * (size_t)k * 2); /* rows past n: never stored */
    return p->bf && p->row;
}

static void free_panel(panel_scratch *p) {
    free(p->bf);
    free(p->row);
}

/* rows weight rows from raw into the panel's rows [first, first + rows). */
AMX_FN static void decode_rows(const wb_qtype *t, const uint8_t *raw, int64_t row_bytes,
                               int rows, int first, int64_t k, panel_scratch *p) {
    for (int c = 0; c < rows; c++) {
        wb_decode_row(t, raw + c * row_bytes, k, &p->w);
        expand_bf16(t, &p->w, k, p->bf + (first + c) * k);
    }
}

/* out (m, n) = x @ W.T (up NULL: W = raw), or act(x @ G.T) (x @ U.T) (G = raw, U = up). */
AMX_FN static int run(const wb_qtype *t, const uint8_t *raw, const uint8_t *up, int gelu,
                      int64_t n, int64_t k, const float *x, int64_t m, float *out,
                      int threads) {
    const int per = up ? NP / 2 : NP; /* output columns a panel */
    const int64_t groups = (m + 31) / 32 * 2, npanels = (n + per - 1) / per;
    const int64_t row_bytes = k / t->block * t->bytes;
    const size_t gbytes = (size_t)k / KS * 1024;
    uint8_t *acts = aligned_alloc(64, gbytes * (size_t)groups);
    if (!acts) return -1;
    int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
    {
#pragma omp for schedule(static)
        for (int64_t g = 0; g < groups; g++) pack_group(x, m, k, 16 * g, acts + g * gbytes);
        panel_scratch p;
        const int ok = alloc_panel(t, k, &p);
        if (!ok) failed = 1;
        load_config();
#pragma omp for schedule(static)
        for (int64_t i = 0; i < npanels; i++) {
            if (!ok) continue;
            const panel_out o = {out, n, per * i, n - per * i < per ? (int)(n - per * i) : per,
                                 up != NULL, gelu};
            decode_rows(t, raw + per * i * row_bytes, row_bytes, o.cols, 0, k, &p);
            if (up) decode_rows(t, up + per * i * row_bytes, row_bytes, o.cols, NP / 2, k, &p);
            panel_times_acts(p.bf, acts, groups, m, k, &o);
        }
        _tile_release();
        free_panel(&p);
    }
    free(acts);
    return failed ? -1 : 0;
}

int wb_qgemm_amx(const wb_qtype *t, const uint8_t *raw, int64_t n, int64_t k, const float *x,
                 int64_t m, float *out, int threads) {
    if (!amx_on() || k % KS) return 1;
    return run(t, raw, NULL, 0, n, k, x, m, out, threads);
}

int wb_qgemm_amx_glu(const wb_qtype *t, const uint8_t *gate, const uint8_t *up, int gelu,
                     int64_t f, int64_t k, const float *x, int64_t m, float *out, int threads) {
    if (!amx_on() || k % KS) return 1;
    return run(t, gate, up, gelu, f, k, x, m, out, threads);
}

#else
const char *wb_amx_status(void) { return "not compiled into this variant"; }

int wb_qgemm_amx(const wb_qtype *t, const uint8_t *raw, int64_t n, int64_t k, const float *x,
                 int64_t m, float *out, int threads) {
    (void)t, (void)raw, (void)n, (void)k, (void)x, (void)m, (void)out, (void)threads;
    return 1;
}

int wb_qgemm_amx_glu(const wb_qtype *t, const uint8_t *gate, const uint8_t *up, int gelu,
                     int64_t f, int64_t k, const float *x, int64_t m, float *out, int threads) {
    (void)t, (void)gate, (void)up, (void)gelu, (void)f, (void)k, (void)x, (void)m, (void)out;
    (void)threads;
    return 1;
}
#endif

int wb_amx_enable(int on) { return atomic_exchange(&amx_allowed, on != 0); }
