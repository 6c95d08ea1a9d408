/* Reductions over any set of dims of a strided (or broadcast) operand in f32, f64, f16 and
 * bf16: sum, mean, prod, max, min, argmax, argmin, var and std (with a correction), logsumexp,
 * the p-norm; and cumsum along one dim. The result is contiguous, in the input's dtype (i64
 * for argmax/argmin).
 *
 * Accuracy: f32, f16 and bf16 are computed in f32 registers (as PyTorch's CPU kernels), f64 in
 * f64. Sums are blocked: 64 lanes of partial sums over blocks of 1024 elements (columns: blocks
 * of 64 rows), the blocks' sums added in f64 (pieces of a line: with Neumaier's compensation;
 * lines in lanes: plain f64 lanes, one addition per 16 f32 a lane has summed), so an f32 sum of
 * n elements has an error of about 16-64 ulp at most instead of n. var is two-pass (the mean,
 * then the squared deviations from it), logsumexp is max + log sum exp(x - max), cumsum
 * accumulates in f64 (as PyTorch's CPU cumsum does for f32). Results are rounded once.
 *
 * The dims are collapsed (size-1 dims dropped, neighbours merged where memory allows; the
 * reduced dims are ordered by stride first except for argmax/argmin) and the elements are read
 * by rows (each output reduces its own lines, contiguous lines vectorised by lanes) or by
 * columns (each reduced index adds a contiguous row of outputs), whichever reads memory in
 * order. Contiguous f32/f64 lines of 16 f32 / 8 f64 to WB_FLUSH elements run eight outputs
 * at a time, an output's lines into one set of lanes (reduce_impl.h's lines in lanes). Other
 * rows of short lines, many per output (dims 0, 2, 3 of NCHW in f16), run split: by columns
 * over the outputs widened by their line, then each output sums its line (plan_splits).
 * Outputs (or, for fewer outputs than threads, each output's chunks) are spread over the
 * threads above WB_RED_PAR elements, and so is the rounding of the results into the output. */
#include "cast.h"
#include "convert.h"
#include "iter.h" /* WB_CHUNK: elements read at a time */
#include "threads.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WB_RED_PAR (1 << 16) /* elements above which a reduction runs on several threads */
/* Outputs in one columns unit: whole rows where they fit (each row of a unit is a jump in
 * memory, and short jumps through a tall matrix miss the TLB on every row), split so that every
 * thread has one. */
#define WB_COLS_MAX 8192
#define WB_COLS_MIN 256
#define WB_BLOCK 64          /* columns: rows summed in the compute type before adding into f64 */
#define WB_FLUSH 1024        /* rows: elements summed in the compute type before adding into f64 */
#define WB_PIECE 16384       /* rows: elements read in place at a time (contiguous lines) */
#define WB_MAX_THREADS 256
#define WB_SPLIT_LINE 256         /* lines up to this long may run split (plan_splits) */
#define WB_SPLIT_LINES_PER 4      /* split: lines of n elements need n / 4 lines per output */
#define WB_SPLIT_OUTPUTS (1 << 20) /* split: at most this many widened outputs (f64 each) */
/* Row passes that walk units of lines prefetch them 8 KiB ahead of their reads (sums of short
 * lines: the next line; lines read one per output take none, see rows_outputs): on one thread
 * the hardware prefetchers alone left a row sum of a 4096 x 4096 f32 matrix ~25% below the
 * memory's speed in that walk (measured on the 2-core EPYC). A prefetch never faults, past a
 * line's end included. */
#define WB_PREFETCH_AHEAD 8192

/* Prefetches the cache lines of [p, p + bytes) + ahead (bytes); none where ahead is 0. */
static inline void prefetch_at(const void *p, size_t bytes, Py_ssize_t ahead) {
    if (!ahead) return;
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch((const char *)p + ahead + b);
}

typedef enum { M_ID, M_ABS, M_SQ, M_SQDEV, M_EXPDEV, M_POWABS } red_map;
typedef enum { A_SUM, A_PROD, A_MAX, A_MIN, A_ARGMAX, A_ARGMIN } red_acc;

/* The collapsed problem: kept dims (the output, C order) and reduced dims of the input. */
typedef struct {
    const char *data;
    int dtype;
    Py_ssize_t offset;
    int nk, nr, columns;
    Py_ssize_t width; /* columns: outputs per unit */
    Py_ssize_t kshape[WB_MAXDIM], kstride[WB_MAXDIM];
    Py_ssize_t rshape[WB_MAXDIM], rstride[WB_MAXDIM];
    Py_ssize_t nout, nred;
    int split; /* rows of short lines, run as columns (plan_splits) */
} red_plan;

/* One pass: acc over map(x) for every output, into val (and idx for argmax/argmin). */
typedef struct {
    const red_plan *pl;
    red_map map;
    red_acc acc;
    double p;             /* M_POWABS's exponent */
    const double *center; /* per output: M_SQDEV's and M_EXPDEV's c, else NULL */
    double *val;
    int64_t *idx;
} red_pass;

/* A partial result: sum with its compensation, product, or extremum with its index. */
typedef struct {
    double s, comp;
    int64_t i; /* -1: no element yet (argmax/argmin) */
} red_part;

/* Walks a multi-index in C order, keeping the element offset sum(idx * stride). */
typedef struct {
    int nd;
    const Py_ssize_t *shape, *stride;
    Py_ssize_t idx[WB_MAXDIM];
    Py_ssize_t off;
} wb_odometer;

static void odometer_seek(wb_odometer *d, int nd, const Py_ssize_t *shape,
                          const Py_ssize_t *stride, Py_ssize_t flat) {
    d->nd = nd, d->shape = shape, d->stride = stride, d->off = 0;
    for (int i = nd - 1; i >= 0; i--) {
        d->idx[i] = flat % shape[i];
        flat /= shape[i];
        d->off += d->idx[i] * stride[i];
    }
}

static void odometer_next(wb_odometer *d) {
    for (int i = d->nd - 1; i >= 0; i--) {
        d->off += d->stride[i];
        if (++d->idx[i] < d->shape[i]) return;
        d->off -= d->shape[i] * d->stride[i];
        d->idx[i] = 0;
    }
}

static red_part part_init(red_acc acc) {
    red_part p = {0.0, 0.0, -1};
    if (acc == A_PROD) p.s = 1.0;
    else if (acc == A_MAX) p.s = -__builtin_inf();
    else if (acc == A_MIN) p.s = __builtin_inf();
    return p;
}

/* Adds value v (at index i) to p; among equal extrema the earlier one stays, NaN wins. */
static void part_add(red_part *p, red_acc acc, double v, int64_t i) {
    switch (acc) {
    case A_SUM: { /* Neumaier: the rounding error of each addition is kept in comp */
        const double t = p->s + v;
        p->comp += fabs(p->s) >= fabs(v) ? (p->s - t) + v : (v - t) + p->s;
        p->s = t;
        return;
    }
    case A_PROD: p->s *= v; return;
    case A_MAX: if (p->s == p->s && (v > p->s || v != v)) p->s = v; return;
    case A_MIN: if (p->s == p->s && (v < p->s || v != v)) p->s = v; return;
    case A_ARGMAX:
        if (p->i < 0 || (p->s == p->s && (v > p->s || v != v))) p->s = v, p->i = i;
        return;
    default:
        if (p->i < 0 || (p->s == p->s && (v < p->s || v != v))) p->s = v, p->i = i;
        return;
    }
}

/* a = a then b (b covers later indices). */
static void part_merge(red_part *a, red_acc acc, const red_part *b) {
    if (acc == A_SUM) {
        part_add(a, A_SUM, b->s, 0);
        a->comp += b->comp;
    } else if (!(acc >= A_ARGMAX && b->i < 0)) {
        part_add(a, acc, b->s, b->i);
    }
}

static void part_store(const red_pass *ps, Py_ssize_t o, const red_part *p) {
    /* an infinite sum has a NaN compensation (inf - inf): the sum alone is the answer */
    ps->val[o] = ps->acc == A_SUM && isfinite(p->s) ? p->s + p->comp : p->s;
    if (ps->idx) ps->idx[o] = p->i;
}

/* ---- f32 arg-extremum lanes in explicit vectors (gcc does not vectorise the index select):
 * 16 lanes, lane j holding the extremum of x[j], x[j + 16], ... (the first one, or the first
 * NaN) and its index; n >= 32. Returns the elements consumed (a multiple of 16). */
#if WB_HAS_AVX512
#define WB_ARG_VEC_FN(fname, PRED)                                                             \
    static Py_ssize_t fname(const float *restrict x, Py_ssize_t n, float *bv, int32_t *bi) {   \
        __m512 m = _mm512_loadu_ps(x);                                                        \
        __m512i at = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);   \
        __m512i cur = at;                                                                     \
        const __m512i step = _mm512_set1_epi32(16);                                           \
        Py_ssize_t i = 16;                                                                    \
        for (; i + 16 <= n; i += 16) {                                                        \
            cur = _mm512_add_epi32(cur, step);                                                \
            const __m512 v = _mm512_loadu_ps(x + i);                                          \
            const __mmask16 take = _mm512_cmp_ps_mask(v, m, PRED) |                           \
                                   (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) &                  \
                                    _mm512_cmp_ps_mask(m, m, _CMP_ORD_Q));                    \
            m = _mm512_mask_blend_ps(take, m, v);                                             \
            at = _mm512_mask_blend_epi32(take, at, cur);                                      \
        }                                                                                     \
        _mm512_storeu_ps(bv, m);                                                              \
        _mm512_storeu_si512((void *)bi, at);                                                  \
        return i;                                                                             \
    }
#elif WB_HAS_AVX2
#define WB_ARG_STEP(m, at, cur, v, PRED)                                                       \
    do {                                                                                      \
        const __m256 take = _mm256_or_ps(                                                     \
            _mm256_cmp_ps(v, m, PRED),                                                        \
            _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(m, m, _CMP_ORD_Q))); \
        m = _mm256_blendv_ps(m, v, take);                                                     \
        at = _mm256_castps_si256(                                                             \
            _mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(cur), take));       \
    } while (0)
#define WB_ARG_VEC_FN(fname, PRED)                                                             \
    static Py_ssize_t fname(const float *restrict x, Py_ssize_t n, float *bv, int32_t *bi) {   \
        __m256 m0 = _mm256_loadu_ps(x), m1 = _mm256_loadu_ps(x + 8);                          \
        __m256i at0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                              \
        __m256i at1 = _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15), c0 = at0, c1 = at1;    \
        const __m256i step = _mm256_set1_epi32(16);                                           \
        Py_ssize_t i = 16;                                                                    \
        for (; i + 16 <= n; i += 16) {                                                        \
            c0 = _mm256_add_epi32(c0, step);                                                  \
            c1 = _mm256_add_epi32(c1, step);                                                  \
            const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);        \
            WB_ARG_STEP(m0, at0, c0, v0, PRED);                                               \
            WB_ARG_STEP(m1, at1, c1, v1, PRED);                                               \
        }                                                                                     \
        _mm256_storeu_ps(bv, m0);                                                             \
        _mm256_storeu_ps(bv + 8, m1);                                                         \
        _mm256_storeu_si256((__m256i *)bi, at0);                                              \
        _mm256_storeu_si256((__m256i *)(bi + 8), at1);                                        \
        return i;                                                                             \
    }
#endif
#ifdef WB_ARG_VEC_FN
WB_ARG_VEC_FN(arg_max_vec, _CMP_GT_OQ)
WB_ARG_VEC_FN(arg_min_vec, _CMP_LT_OQ)
#endif

/* ---- eight outputs' lanes at once (reduce_impl.h's lines in lanes) ------------------------ */
typedef double wb_f64x8 __attribute__((vector_size(64), aligned(8)));
typedef int64_t wb_i64x8 __attribute__((vector_size(64)));
#ifdef __clang__
#define WB_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define WB_SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (wb_i64x8){__VA_ARGS__})
#endif

/* a and b lane by lane: their sums, or their extrema (NaN wins). */
static inline wb_f64x8 lanes_combine(wb_f64x8 a, wb_f64x8 b, red_acc acc) {
    if (acc == A_SUM) return a + b;
    const wb_i64x8 take = (acc == A_MAX ? b > a : b < a) | (b != b);
    return (wb_f64x8)(((wb_i64x8)b & take) | ((wb_i64x8)a & ~take));
}

/* Eight lines' partial results, 8 lanes each (v[r]: line r's), into one vector of their
 * results (line r's in lane r). Three steps pair the vectors; each takes the first half of
 * every line's lanes in the pair (lo) and the second half (hi), so that lo + hi holds twice
 * the lines with half the lanes each. (v is overwritten.) */
static inline __attribute__((always_inline)) wb_f64x8 lanes_meet(wb_f64x8 *v, red_acc acc) {
    for (int k = 0; k < 4; k++)
        v[k] = lanes_combine(WB_SHUFFLE(v[2 * k], v[2 * k + 1], 0, 1, 2, 3, 8, 9, 10, 11),
                             WB_SHUFFLE(v[2 * k], v[2 * k + 1], 4, 5, 6, 7, 12, 13, 14, 15), acc);
    for (int k = 0; k < 2; k++)
        v[k] = lanes_combine(WB_SHUFFLE(v[2 * k], v[2 * k + 1], 0, 1, 4, 5, 8, 9, 12, 13),
                             WB_SHUFFLE(v[2 * k], v[2 * k + 1], 2, 3, 6, 7, 10, 11, 14, 15), acc);
    return lanes_combine(WB_SHUFFLE(v[0], v[1], 0, 2, 4, 6, 8, 10, 12, 14),
                         WB_SHUFFLE(v[0], v[1], 1, 3, 5, 7, 9, 11, 13, 15), acc);
}

/* ---- the passes, in f32 and in f64 -------------------------------------------------------- */
#define WB_T float
#define WB_SFX(name) name##_f32
#define WB_IT int32_t
#define WB_LOAD(dt, base, off, stride, n, buf) wb_load_f32(dt, base, off, stride, n, buf)
#define WB_EXP(x) wb_expf(x)
#define WB_POW(x, p) powf(x, p)
#define WB_FABS(x) fabsf(x)
#define WB_ABS_BITS 0x7fffffff
#ifdef WB_ARG_VEC_FN
#define WB_ARG_VEC(name) name##_vec
#endif
#include "reduce_impl.h"
#undef WB_ARG_VEC
#undef WB_T
#undef WB_SFX
#undef WB_IT
#undef WB_LOAD
#undef WB_EXP
#undef WB_POW
#undef WB_FABS
#undef WB_ABS_BITS

#define WB_T double
#define WB_SFX(name) name##_f64
#define WB_IT int64_t
#define WB_LOAD(dt, base, off, stride, n, buf) wb_load_f64(base, off, stride, n, buf)
#define WB_EXP(x) exp(x)
#define WB_POW(x, p) pow(x, p)
#define WB_FABS(x) fabs(x)
#define WB_ABS_BITS 0x7fffffffffffffffLL
#include "reduce_impl.h"
#undef WB_T
#undef WB_SFX
#undef WB_IT
#undef WB_LOAD
#undef WB_EXP
#undef WB_POW
#undef WB_FABS
#undef WB_ABS_BITS

/* Appends dim (shape n, stride s) to a dim list, merged into the last one where stepping
 * through both is stepping through one. */
static void push_dim(Py_ssize_t *shape, Py_ssize_t *stride, int *nd, Py_ssize_t n, Py_ssize_t s,
                     int merge) {
    if (merge && *nd > 0 && stride[*nd - 1] == s * n) {
        shape[*nd - 1] *= n;
        stride[*nd - 1] = s;
        return;
    }
    shape[*nd] = n;
    stride[*nd] = s;
    (*nd)++;
}

static Py_ssize_t abs_z(Py_ssize_t v) { return v < 0 ? -v : v; }

static void plan_build(red_plan *pl, const wb_operand *x, const int *reduced, int keep_order) {
    pl->data = x->data, pl->dtype = x->dtype, pl->offset = x->offset;
    pl->nk = pl->nr = 0;
    pl->nout = pl->nred = 1;
    int order[WB_MAXDIM], nrd = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (reduced[d]) pl->nred *= x->shape[d];
        else pl->nout *= x->shape[d];
        if (x->shape[d] == 1) continue;
        if (reduced[d]) order[nrd++] = d;
        else push_dim(pl->kshape, pl->kstride, &pl->nk, x->shape[d], x->strides[d], 1);
    }
    /* reduced dims largest stride first (insertion sort: few dims), so that the innermost
     * line has the smallest stride; argmax/argmin keep C order (their index is positional) */
    for (int i = 1; i < nrd && !keep_order; i++)
        for (int j = i; j > 0 && abs_z(x->strides[order[j]]) > abs_z(x->strides[order[j - 1]]); j--) {
            const int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (int i = 0; i < nrd; i++)
        push_dim(pl->rshape, pl->rstride, &pl->nr, x->shape[order[i]], x->strides[order[i]],
                 !keep_order);
    if (pl->nr == 0) pl->rshape[0] = 1, pl->rstride[0] = 1, pl->nr = 1;
    if (pl->nk == 0) pl->kshape[0] = 1, pl->kstride[0] = 0, pl->nk = 1;
    pl->columns = pl->kshape[pl->nk - 1] > 1 &&
                  abs_z(pl->kstride[pl->nk - 1]) < abs_z(pl->rstride[pl->nr - 1]);
}

/* The columns unit width for ``threads`` threads. */
static void plan_width(red_plan *pl, int threads) {
    const Py_ssize_t kw = pl->kshape[pl->nk - 1], rows = pl->nout / kw;
    Py_ssize_t w = rows >= threads ? kw : (kw * rows + threads - 1) / threads;
    w = w < WB_COLS_MIN ? WB_COLS_MIN : w > WB_COLS_MAX ? WB_COLS_MAX : w;
    pl->width = (w + 15) / 16 * 16; /* whole vectors */
}

static int run_plain(const red_plan *pl, red_map map, red_acc acc, double p, const double *center,
                     double *val, int64_t *idx, int threads) {
    const red_pass ps = {pl, map, acc, p, center, val, idx};
    return pl->dtype == WB_F64 ? run_pass_f64(&ps, threads) : run_pass_f32(&ps, threads);
}

/* Whether a plan's pass runs split: it reads by rows, its innermost reduced line is contiguous
 * and short, and each output has many lines (a bias gradient's sum over dims 0, 2, 3 of NCHW).
 * Each line of the rows form pays its lanes' setup and sum, a piece's compensated addition and
 * an odometer step, many times the work of a few elements. Split, the line joins the kept dims,
 * the other reduced dims are read by columns (tiles of accumulators along the outputs'
 * neighbouring lines), and each output then sums its line's n partial results. Measured on the
 * EPYC (f32, 2 threads): 2-6x faster for 16-64 lines per output of 4-196 elements; 1.2-4x
 * slower for 2-8 lines of 64-256, where the widened outputs' own setup dominates. */
static int plan_splits(const red_plan *pl) { /* (pl->nred > 0) */
    const Py_ssize_t n = pl->rshape[pl->nr - 1], lines = pl->nred / n;
    return !pl->columns && pl->nr >= 2 && pl->rstride[pl->nr - 1] == 1 && n <= WB_SPLIT_LINE &&
           n <= WB_SPLIT_LINES_PER * lines && pl->nout * n <= WB_SPLIT_OUTPUTS;
}

/* Whether a split plan's pass runs through reduce_impl.h's lines in lanes instead: they
 * apply, each thread has outputs of its own, and a line fills 4 vectors (256 bytes). There
 * they beat the split: a sum over dims 0, 2, 3 of 64 x 16 x 8 x 8 f32 took 0.7 of the time,
 * of 64 x 64 x 14 x 14 0.75 (one thread, the EPYC); with lines of one vector (64 x 32 x 4 x 4)
 * it took 1.3-2x. */
static int in_lanes(const red_plan *pl, red_map map, red_acc acc, int threads) {
    const red_pass probe = {pl, map, acc, 0.0, NULL, NULL, NULL};
    const Py_ssize_t bytes = pl->rshape[pl->nr - 1] * (pl->dtype == WB_F64 ? 8 : 4);
    return pl->nout >= threads && bytes >= 256 &&
           (pl->dtype == WB_F64 ? lines_kernel_f64(&probe) != NULL
                                : lines_kernel_f32(&probe) != NULL);
}

/* The plan with its innermost reduced line moved to the kept dims (see plan_splits). */
static red_plan plan_widened(const red_plan *pl, int threads) {
    red_plan w = *pl;
    const Py_ssize_t n = pl->rshape[pl->nr - 1];
    push_dim(w.kshape, w.kstride, &w.nk, n, pl->rstride[pl->nr - 1], 1);
    w.nr--;
    w.nout *= n, w.nred /= n;
    w.columns = 1, w.split = 0;
    plan_width(&w, threads);
    return w;
}

/* One pass; a split plan runs as columns over its widened outputs, each output's n partial
 * results then combined in index order. */
static int run_pass(const red_plan *pl, red_map map, red_acc acc, double p, const double *center,
                    double *val, int64_t *idx, int threads) {
    if (!pl->split || in_lanes(pl, map, acc, threads))
        return run_plain(pl, map, acc, p, center, val, idx, threads);
    const red_plan w = plan_widened(pl, threads);
    const Py_ssize_t n = pl->rshape[pl->nr - 1];
    double *wval = malloc(sizeof(double) * (size_t)w.nout);
    double *wcenter = center ? malloc(sizeof(double) * (size_t)w.nout) : NULL;
    if (!wval || (center && !wcenter)) {
        free(wval);
        free(wcenter);
        return -1;
    }
    for (Py_ssize_t i = 0; center && i < w.nout; i++) wcenter[i] = center[i / n];
    const int rc = run_plain(&w, map, acc, p, wcenter, wval, NULL, threads);
    for (Py_ssize_t o = 0; rc == 0 && o < pl->nout; o++) {
        const double *part = wval + o * n;
        if (acc == A_SUM) { /* n partial sums of f32 (or f64) blocks: f64 adds suffice */
            double s = 0.0;
            for (Py_ssize_t k = 0; k < n; k++) s += part[k];
            val[o] = s;
        } else {
            red_part all = part_init(acc);
            for (Py_ssize_t k = 0; k < n; k++) part_add(&all, acc, part[k], 0);
            val[o] = all.s;
        }
    }
    free(wval);
    free(wcenter);
    return rc;
}

/* ---- the ops ------------------------------------------------------------------------------ */
enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_VAR, R_STD, R_LOGSUMEXP,
       R_NORM, WB_NREDUCE };
static const char *const reduce_names[WB_NREDUCE] = {
    "sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "logsumexp", "norm",
};

static int is_arg(int op) { return op == R_ARGMAX || op == R_ARGMIN; }

static void store_value(int dt, char *out, Py_ssize_t o, double v) {
    switch (dt) {
    case WB_F32: ((float *)out)[o] = (float)v; break;
    case WB_F64: ((double *)out)[o] = v; break;
    case WB_F16: ((uint16_t *)out)[o] = wb_f64_to_f16(v); break;
    default: ((uint16_t *)out)[o] = wb_f64_to_bf16(v); break;
    }
}

/* Results [o0, o1) into the output, rounded once (a thread job: ctx is a store_ctx). */
typedef struct {
    int dtype;
    char *out;
    const double *val;
} store_ctx;

static void store_job(const void *ctx, int t, Py_ssize_t o0, Py_ssize_t o1, void *unused) {
    const store_ctx *c = ctx;
    if (c->dtype == WB_F32) {
        float *restrict out = (float *)c->out;
        for (Py_ssize_t o = o0; o < o1; o++) out[o] = (float)c->val[o];
    } else {
        for (Py_ssize_t o = o0; o < o1; o++) store_value(c->dtype, c->out, o, c->val[o]);
    }
}

/* The value of an empty reduction, where it has one. */
static double empty_value(int op) {
    switch (op) {
    case R_SUM: case R_NORM: return 0.0;
    case R_PROD: return 1.0;
    case R_LOGSUMEXP: return -__builtin_inf();
    default: return __builtin_nan(""); /* mean, var, std: 0 / 0 */
    }
}

/* Runs op's passes into val (idx for argmax/argmin), then its final step per output. */
static int reduce_run(const red_plan *pl, int op, double param, double *val, double *center,
                      int64_t *idx, int threads) {
    const Py_ssize_t nout = pl->nout;
    const double n = (double)pl->nred;
    switch (op) {
    case R_SUM: case R_MEAN:
        if (run_pass(pl, M_ID, A_SUM, 0, NULL, val, NULL, threads) < 0) return -1;
        if (op == R_MEAN)
            for (Py_ssize_t o = 0; o < nout; o++) val[o] /= n;
        return 0;
    case R_PROD: return run_pass(pl, M_ID, A_PROD, 0, NULL, val, NULL, threads);
    case R_MAX: return run_pass(pl, M_ID, A_MAX, 0, NULL, val, NULL, threads);
    case R_MIN: return run_pass(pl, M_ID, A_MIN, 0, NULL, val, NULL, threads);
    case R_ARGMAX: return run_pass(pl, M_ID, A_ARGMAX, 0, NULL, val, idx, threads);
    case R_ARGMIN: return run_pass(pl, M_ID, A_ARGMIN, 0, NULL, val, idx, threads);
    case R_VAR: case R_STD: {
        if (run_pass(pl, M_ID, A_SUM, 0, NULL, center, NULL, threads) < 0) return -1;
        for (Py_ssize_t o = 0; o < nout; o++) center[o] /= n;
        if (run_pass(pl, M_SQDEV, A_SUM, 0, center, val, NULL, threads) < 0) return -1;
        const double dof = n - param;
        for (Py_ssize_t o = 0; o < nout; o++) {
            const double v = dof > 0 ? val[o] / dof : __builtin_nan("");
            val[o] = op == R_STD ? sqrt(v) : v;
        }
        return 0;
    }
    case R_LOGSUMEXP:
        if (run_pass(pl, M_ID, A_MAX, 0, NULL, center, NULL, threads) < 0) return -1;
        for (Py_ssize_t o = 0; o < nout; o++) /* an infinite max shifts by 0 (PyTorch's rule) */
            if (isinf(center[o])) center[o] = 0.0;
        if (run_pass(pl, M_EXPDEV, A_SUM, 0, center, val, NULL, threads) < 0) return -1;
        for (Py_ssize_t o = 0; o < nout; o++) val[o] = log(val[o]) + center[o];
        return 0;
    default: /* R_NORM: (sum |x|^p)^(1/p); p = inf: max |x|, p = -inf: min |x| */
        if (param == 2.0) {
            if (run_pass(pl, M_SQ, A_SUM, 0, NULL, val, NULL, threads) < 0) return -1;
            for (Py_ssize_t o = 0; o < nout; o++) val[o] = sqrt(val[o]);
            return 0;
        }
        if (isinf(param))
            return run_pass(pl, M_ABS, param > 0 ? A_MAX : A_MIN, 0, NULL, val, NULL, threads);
        if (param == 1.0) return run_pass(pl, M_ABS, A_SUM, 0, NULL, val, NULL, threads);
        if (run_pass(pl, M_POWABS, A_SUM, param, NULL, val, NULL, threads) < 0) return -1;
        for (Py_ssize_t o = 0; o < nout; o++) val[o] = pow(val[o], 1.0 / param);
        return 0;
    }
}

static int parse_dims(PyObject *tuple, int ndim, int *reduced, int *count, const char *what) {
    Py_ssize_t dims[WB_MAXDIM];
    const int n = wb_dims(tuple, what, dims);
    if (n < 0) return -1;
    for (int d = 0; d < ndim; d++) reduced[d] = 0;
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= ndim || reduced[dims[i]]) {
            PyErr_Format(PyExc_ValueError, "%s: dim %zd is out of range or repeated (%d dims)",
                         what, dims[i], ndim);
            return -1;
        }
        reduced[dims[i]] = 1;
    }
    *count = n;
    return 0;
}

/* reduce(code, x, offset, shape, strides, dims, out, param): out (contiguous, the kept dims;
 * x's dtype, i64 for argmax/argmin) = op over dims. param: var/std's correction, norm's p. */
static PyObject *py_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "reduce: expected 8 arguments, found %zd", nargs);
        return NULL;
    }
    const long op = PyLong_AsLong(args[0]);
    if (op == -1 && PyErr_Occurred()) return NULL;
    if (op < 0 || op >= WB_NREDUCE) {
        PyErr_Format(PyExc_ValueError, "reduce: no op with code %ld", op);
        return NULL;
    }
    wb_operand x, out;
    if (wb_operand_parse(&x, args[1], args[2], args[3], args[4], "x") < 0) return NULL;
    int reduced[WB_MAXDIM], ndims;
    if (parse_dims(args[5], x.ndim, reduced, &ndims, "reduce") < 0) return NULL;
    const double param = PyFloat_AsDouble(args[7]);
    if (param == -1.0 && PyErr_Occurred()) return NULL;
    Py_ssize_t kept[WB_MAXDIM];
    int nk = 0;
    for (int d = 0; d < x.ndim; d++)
        if (!reduced[d]) kept[nk++] = x.shape[d];
    if (wb_output_parse(&out, args[6], nk, kept) < 0) return NULL;
    if (!wb_is_float(x.dtype) || out.dtype != (is_arg(op) ? WB_I64 : x.dtype)) {
        PyErr_Format(PyExc_TypeError, "reduce %s: unsupported dtype combination",
                     reduce_names[op]);
        return NULL;
    }
    if (is_arg(op) && ndims > 1) {
        PyErr_Format(PyExc_ValueError, "reduce %s: expected at most one dim, found %d",
                     reduce_names[op], ndims);
        return NULL;
    }
    red_plan pl;
    plan_build(&pl, &x, reduced, is_arg(op));
    if (pl.nout == 0) Py_RETURN_NONE;
    if (pl.nred == 0) {
        if (op == R_MAX || op == R_MIN || is_arg(op)) {
            PyErr_Format(PyExc_ValueError, "reduce %s: cannot reduce an empty dim",
                         reduce_names[op]);
            return NULL;
        }
        for (Py_ssize_t o = 0; o < pl.nout; o++) store_value(out.dtype, out.data, o, empty_value(op));
        Py_RETURN_NONE;
    }
    pl.split = !is_arg(op) && plan_splits(&pl);
    const int two_pass = op == R_VAR || op == R_STD || op == R_LOGSUMEXP;
    double *val = malloc(sizeof(double) * (size_t)pl.nout);
    double *center = two_pass ? malloc(sizeof(double) * (size_t)pl.nout) : NULL;
    int64_t *idx = is_arg(op) ? (int64_t *)out.data : NULL;
    if (!val || (two_pass && !center)) {
        free(val);
        free(center);
        return PyErr_NoMemory();
    }
    const int threads = wb_threads_for(pl.nout * pl.nred, WB_RED_PAR);
    plan_width(&pl, threads);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = reduce_run(&pl, (int)op, param, val, center, idx, threads);
    const store_ctx results = {out.dtype, out.data, val};
    if (rc == 0 && !is_arg(op))
        rc = wb_parallel_ranges(store_job, &results, pl.nout, wb_threads_for(pl.nout, WB_RED_PAR),
                                0);
    Py_END_ALLOW_THREADS
    free(val);
    free(center);
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* ---- cumsum -------------------------------------------------------------------------------- */
typedef struct {
    const wb_operand *x;
    int dim, columns;
    char *out;
    Py_ssize_t ostride[WB_MAXDIM];
    /* the dims other than dim (columns: other than dim and the last), as an odometer walks
     * them: input strides, and output strides in a second odometer */
    int nd;
    Py_ssize_t shape[WB_MAXDIM], istride[WB_MAXDIM], ostr[WB_MAXDIM];
} cumsum_ctx;

/* Elements [off, off + n*stride) of x as f64 (widened from the f32 compute type). */
static const double *load_any_f64(int dt, const char *base, Py_ssize_t off, Py_ssize_t stride,
                                  Py_ssize_t n, double *restrict buf, float *restrict fbuf) {
    if (dt == WB_F64) return wb_load_f64(base, off, stride, n, buf);
    const float *v = wb_load_f32(dt, base, off, stride, n, fbuf);
    for (Py_ssize_t i = 0; i < n; i++) buf[i] = v[i];
    return buf;
}

static void store_run(int dt, char *out, Py_ssize_t o, Py_ssize_t stride, const double *v,
                      Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) store_value(dt, out, o + i * stride, v[i]);
}

/* Units [u0, u1): rows mode, a unit is a line along dim; columns mode, up to WB_CHUNK
 * neighbours along the last dim of a group of lines. */
static void cumsum_units(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *mem) {
    const cumsum_ctx *c = ctx;
    double *acc = mem, *buf = acc + WB_CHUNK;
    float *fbuf = (float *)(buf + WB_CHUNK);
    const wb_operand *x = c->x;
    const int last = x->ndim - 1;
    const Py_ssize_t n = x->shape[c->dim], s = x->strides[c->dim], os = c->ostride[c->dim];
    const Py_ssize_t kw = c->columns ? x->shape[last] : 1;
    const Py_ssize_t cpr = (kw + WB_CHUNK - 1) / WB_CHUNK;
    for (Py_ssize_t u = u0; u < u1; u++) {
        wb_odometer in, o;
        odometer_seek(&in, c->nd, c->shape, c->istride, u / cpr);
        odometer_seek(&o, c->nd, c->shape, c->ostr, u / cpr);
        if (c->columns) {
            const Py_ssize_t j0 = (u % cpr) * WB_CHUNK, w = kw - j0 < WB_CHUNK ? kw - j0 : WB_CHUNK;
            const Py_ssize_t ib = x->offset + in.off + j0 * x->strides[last], ob = o.off + j0;
            for (Py_ssize_t j = 0; j < w; j++) acc[j] = 0.0;
            for (Py_ssize_t i = 0; i < n; i++) {
                const double *v = load_any_f64(x->dtype, x->data, ib + i * s, x->strides[last], w,
                                               buf, fbuf);
                for (Py_ssize_t j = 0; j < w; j++) acc[j] += v[j];
                store_run(x->dtype, c->out, ob + i * os, 1, acc, w);
            }
        } else {
            double run = 0.0;
            for (Py_ssize_t i0 = 0; i0 < n; i0 += WB_CHUNK) {
                const Py_ssize_t len = n - i0 < WB_CHUNK ? n - i0 : WB_CHUNK;
                const double *v = load_any_f64(x->dtype, x->data, x->offset + in.off + i0 * s, s,
                                               len, buf, fbuf);
                for (Py_ssize_t i = 0; i < len; i++) acc[i] = run += v[i];
                store_run(x->dtype, c->out, o.off + i0 * os, os, acc, len);
            }
        }
    }
}

/* cumsum(x, offset, shape, strides, dim, out): out (contiguous, x's dtype) = running sums. */
static PyObject *py_cumsum(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "cumsum: expected 6 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, out;
    if (wb_operand_parse(&x, args[0], args[1], args[2], args[3], "x") < 0) return NULL;
    const long dim = PyLong_AsLong(args[4]);
    if (dim == -1 && PyErr_Occurred()) return NULL;
    if (dim < 0 || dim >= x.ndim) {
        PyErr_Format(PyExc_ValueError, "cumsum: dim %ld out of range for %d dims", dim, x.ndim);
        return NULL;
    }
    if (wb_output_parse(&out, args[5], x.ndim, x.shape) < 0) return NULL;
    if (!wb_is_float(x.dtype) || out.dtype != x.dtype) {
        PyErr_SetString(PyExc_TypeError, "cumsum: unsupported dtype combination");
        return NULL;
    }
    const Py_ssize_t numel = wb_numel(x.ndim, x.shape);
    if (numel == 0) Py_RETURN_NONE;
    const int last = x.ndim - 1;
    cumsum_ctx c = {&x, (int)dim, 0, out.data};
    for (int d = 0; d < x.ndim; d++) c.ostride[d] = out.strides[d];
    c.columns = dim != last && x.shape[last] > 1 && abs_z(x.strides[last]) < abs_z(x.strides[dim]);
    c.nd = 0;
    for (int d = 0; d < x.ndim; d++) {
        if (d == dim || (c.columns && d == last)) continue;
        c.shape[c.nd] = x.shape[d], c.istride[c.nd] = x.strides[d], c.ostr[c.nd] = out.strides[d];
        c.nd++;
    }
    const Py_ssize_t groups = numel / x.shape[dim] / (c.columns ? x.shape[last] : 1);
    const Py_ssize_t units = groups * (c.columns ? (x.shape[last] + WB_CHUNK - 1) / WB_CHUNK : 1);
    const int threads = wb_threads_for(numel, WB_RED_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(cumsum_units, &c, units, threads,
                            sizeof(double) * 2 * WB_CHUNK + sizeof(float) * WB_CHUNK);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *py_reduce_ops(PyObject *self, PyObject *unused) {
    PyObject *t = PyTuple_New(WB_NREDUCE);
    if (!t) return NULL;
    for (int i = 0; i < WB_NREDUCE; i++) {
        PyObject *s = PyUnicode_FromString(reduce_names[i]);
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

PyMethodDef wb_reduce_methods[] = {
    {"reduce", (PyCFunction)(void (*)(void))py_reduce, METH_FASTCALL,
     "reduce(code, x, offset, shape, strides, dims, out, param): out = op of x over dims "
     "(param: var/std's correction, norm's p)."},
    {"cumsum", (PyCFunction)(void (*)(void))py_cumsum, METH_FASTCALL,
     "cumsum(x, offset, shape, strides, dim, out): running sums along dim."},
    {"reduce_ops", py_reduce_ops, METH_NOARGS, "Names of the reductions, in code order."},
    {NULL, NULL, 0, NULL},
};
