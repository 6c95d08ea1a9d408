/* The reduction passes of reduce.c in one compute type, included once per type with
 *   WB_T (float or double), WB_SFX(name) (name##_f32 / name##_f64), WB_IT (lane index type),
 *   WB_LOAD(dt, base, off, stride, n, buf), WB_EXP(x), WB_POW(x, p), WB_FABS(x).
 * Two ways through the elements, picked by the layout (see reduce.c):
 *   rows:    each output reduces lines of its own (a line: the innermost reduced dim, read a
 *            chunk at a time, contiguous or gathered), lanes of partial results per chunk;
 *            short contiguous lines in the compute type: eight outputs at a time, each
 *            output's lines into one set of lanes (lines in lanes);
 *   columns: each output is a column: rows of up to pl->width contiguous outputs are read for each
 *            reduced index and accumulated elementwise. */

#define WB_L (64 / (int)sizeof(WB_T)) /* lanes: 16 f32 or 8 f64 (2 AVX-512 / 4 AVX2 registers) */
/* One register of lanes (AVX-512, AVX2 or SSE): a gcc vector wider than the registers has none
 * to live in and stays in memory (a row max of 4096 x 4096 f32 took 12 times torch's time on
 * the AVX2 EPYC with 64-byte ones). */
#if defined(__AVX512F__)
#define WB_EXT_BYTES 64
#elif defined(__AVX__)
#define WB_EXT_BYTES 32
#else
#define WB_EXT_BYTES 16
#endif
typedef WB_T WB_SFX(ext_vec) __attribute__((vector_size(WB_EXT_BYTES), aligned(sizeof(WB_T))));
typedef WB_IT WB_SFX(ext_bits) __attribute__((vector_size(WB_EXT_BYTES)));
#define WB_EL (WB_EXT_BYTES / (int)sizeof(WB_T)) /* lanes of an ext_vec */

/* ---- rows: one piece of n <= WB_PIECE contiguous values ---------------------------------- */
/* Lane partial sums: 4·WB_L lanes (64 f32, 32 f64) in the compute type, into f64 lanes every
 * WB_FLUSH elements (so a lane never sums more than WB_FLUSH / lanes values in f32), 4 at a
 * time into WB_L f64 lanes; the last n mod 4·WB_L values a vector of WB_L lanes at a time, then
 * the last n mod WB_L straight into f64. The f64 lanes meet pairwise (unrolled: as a loop over
 * the halvings it cost short rows ~20%). The lanes are only ever indexed by constants, so they
 * stay in registers (indexed by a variable in the tail, they lived on the stack, which cost a
 * row sum of a 4096 x 4096 f32 matrix ~30% on the EPYC). The map is applied to each element. */
#define WB_LANE_SUM(name, EXPR)                                                                \
    static double WB_SFX(sum_##name)(const WB_T *restrict x, Py_ssize_t n, WB_T c, WB_T p,     \
                                     Py_ssize_t ahead) {                                       \
        (void)c, (void)p;                                                                     \
        double total[WB_L], tail = 0.0;                                                       \
        for (int j = 0; j < WB_L; j++) total[j] = 0.0;                                        \
        const Py_ssize_t whole = n - n % (4 * WB_L), vecs = n - n % WB_L;                     \
        for (Py_ssize_t i = 0; i < whole;) {                                                  \
            const Py_ssize_t end = whole - i < WB_FLUSH ? whole : i + WB_FLUSH;                \
            WB_T acc[4 * WB_L];                                                               \
            for (int j = 0; j < 4 * WB_L; j++) acc[j] = 0;                                    \
            for (; i < end; i += 4 * WB_L) {                                                  \
                prefetch_at(x + i, 4 * WB_L * sizeof(WB_T), ahead);                           \
                for (int j = 0; j < 4 * WB_L; j++) {                                          \
                    const WB_T v = x[i + j];                                                  \
                    acc[j] += (EXPR);                                                         \
                }                                                                             \
            }                                                                                 \
            for (int k = 0; k < 4; k++) /* (a loop over j of 4 terms: gcc made it scalar) */   \
                for (int j = 0; j < WB_L; j++) total[j] += acc[k * WB_L + j];                 \
        }                                                                                     \
        if (whole < vecs) {                                                                   \
            WB_T acc[WB_L];                                                                   \
            for (int j = 0; j < WB_L; j++) acc[j] = 0;                                        \
            for (Py_ssize_t i = whole; i < vecs; i += WB_L)                                   \
                for (int j = 0; j < WB_L; j++) {                                              \
                    const WB_T v = x[i + j];                                                  \
                    acc[j] += (EXPR);                                                         \
                }                                                                             \
            for (int j = 0; j < WB_L; j++) total[j] += acc[j];                                \
        }                                                                                     \
        for (Py_ssize_t i = vecs; i < n; i++) {                                               \
            const WB_T v = x[i];                                                              \
            tail += (EXPR);                                                                   \
        }                                                                                     \
        _Pragma("GCC unroll 8")                                                               \
        for (int h = WB_L / 2; h > 0; h /= 2)                                                 \
            for (int j = 0; j < h; j++) total[j] += total[j + h];                             \
        return total[0] + tail;                                                               \
    }
WB_LANE_SUM(id, v)
WB_LANE_SUM(abs, WB_FABS(v))
WB_LANE_SUM(sq, v * v)
WB_LANE_SUM(sqdev, (v - c) * (v - c))
WB_LANE_SUM(expdev, WB_EXP(v - c))
WB_LANE_SUM(powabs, WB_POW(WB_FABS(v), p))
#undef WB_LANE_SUM

/* Lane extrema; NaN wins (numpy's max/min and PyTorch's amax/amin propagate it). 8 vector
 * registers of lanes (half the register file on AVX2): each step's compare and select wait on
 * the last (a latency chain), and with 2 zmm of lanes a row max of 256 x 1024 f32 ran at a
 * third of torch's speed on the EPYC (8: 40 -> 21 us, 4: 26). The lanes are vectors of gcc's
 * own, as plain arrays gcc vectorised them or not from one build to the next, one register
 * wide (ext_vec). They meet in the first vector, the rest of the line goes into it a vector at a
 * time, its last n mod WB_EL into one scalar; the first vector's lanes then meet pairwise,
 * unrolled (one lane at a time was a branch each). */
#define WB_EXT_V 8
/* acc = e where e CMP acc or e is NaN, lane by lane (vectors of any one type). */
#define WB_VEC_PICK(acc, e, CMP)                                                               \
    do {                                                                                      \
        const __typeof__((e) != (e)) take_ = ((e)CMP(acc)) | ((e) != (e));                    \
        (acc) = (__typeof__(acc))(((__typeof__(take_))(e) & take_) |                          \
                                  ((__typeof__(take_))(acc) & ~take_));                       \
    } while (0)
#define WB_LANE_EXT(name, EXPR, VEXPR, CMP, INIT)                                             \
    static WB_T WB_SFX(name)(const WB_T *restrict x, Py_ssize_t n) {                          \
        WB_SFX(ext_vec) acc[WB_EXT_V];                                                        \
        WB_T m = (INIT);                                                                      \
        for (int k = 0; k < WB_EXT_V; k++) acc[k] = (WB_SFX(ext_vec)){0} + (WB_T)(INIT);      \
        const Py_ssize_t whole = n - n % (WB_EXT_V * WB_EL), vecs = n - n % WB_EL;            \
        for (Py_ssize_t i = 0; i < whole; i += WB_EXT_V * WB_EL) {                            \
            prefetch_at(x + i, WB_EXT_V * WB_EXT_BYTES, WB_PREFETCH_AHEAD);                   \
            for (int k = 0; k < WB_EXT_V; k++) {                                              \
                const WB_SFX(ext_vec) v = *(const WB_SFX(ext_vec) *)(x + i + k * WB_EL);      \
                const WB_SFX(ext_vec) e = (VEXPR);                                            \
                WB_VEC_PICK(acc[k], e, CMP);                                                  \
            }                                                                                 \
        }                                                                                     \
        if (whole > 0)                                                                        \
            for (int k = 1; k < WB_EXT_V; k++) WB_VEC_PICK(acc[0], acc[k], CMP);              \
        for (Py_ssize_t i = whole; i < vecs; i += WB_EL) {                                    \
            const WB_SFX(ext_vec) v = *(const WB_SFX(ext_vec) *)(x + i);                      \
            const WB_SFX(ext_vec) e = (VEXPR);                                                \
            WB_VEC_PICK(acc[0], e, CMP);                                                      \
        }                                                                                     \
        for (Py_ssize_t i = vecs; i < n; i++) {                                               \
            const WB_T v = x[i], e = (EXPR);                                                  \
            m = (e CMP m || e != e) ? e : m;                                                  \
        }                                                                                     \
        WB_T lane[WB_EL];                                                                     \
        for (int j = 0; j < WB_EL; j++) lane[j] = acc[0][j];                                  \
        _Pragma("GCC unroll 8")                                                               \
        for (int h = WB_EL / 2; h > 0; h /= 2)                                                \
            for (int j = 0; j < h; j++) {                                                     \
                const WB_T b = lane[j + h];                                                   \
                lane[j] = (b CMP lane[j] || b != b) ? b : lane[j];                            \
            }                                                                                 \
        return (lane[0] CMP m || lane[0] != lane[0]) ? lane[0] : m;                           \
    }
/* |v| of a vector: its sign bits cleared. */
#define WB_VEC_ABS(v) ((__typeof__(v))((__typeof__((v) != (v)))(v) & WB_ABS_BITS))
WB_LANE_EXT(max_id, v, v, >, -__builtin_inf())
WB_LANE_EXT(min_id, v, v, <, __builtin_inf())
WB_LANE_EXT(max_abs, WB_FABS(v), WB_VEC_ABS(v), >, -__builtin_inf())
WB_LANE_EXT(min_abs, WB_FABS(v), WB_VEC_ABS(v), <, __builtin_inf())
#undef WB_LANE_EXT

/* How far ahead (bytes) the sums of an output's contiguous lines in place prefetch. Short
 * lines apart (a bias gradient's image planes): the next line, not past their own line's end
 * (another channel's plane): a sum over dims 0, 2, 3 of 64 x 32 x 28 x 28 took 0.8 of the
 * time on the EPYC. */
static Py_ssize_t WB_SFX(lines_ahead)(const red_plan *pl) {
    const Py_ssize_t n = pl->rshape[pl->nr - 1];
    return pl->nr >= 2 && n * (Py_ssize_t)sizeof(WB_T) < WB_PREFETCH_AHEAD
               ? pl->rstride[pl->nr - 2] * (Py_ssize_t)sizeof(WB_T)
               : WB_PREFETCH_AHEAD;
}

/* ---- rows: lines in lanes, eight outputs at a time ----------------------------------------- */
/* Contiguous lines of WB_L..WB_FLUSH elements in place, an output reducing one or several
 * (x.sum(-1) of a (262144, 64) matrix; a bias gradient's planes of 28 x 28). Line by line,
 * the per-output path's setup (the pass's dispatch, the lane sums' tail and halvings, a
 * compensated addition per line and a store per output) cost ~100 cycles a line of 64 f32,
 * twice the reading, on the EPYC. Here the lines of an output add into 4 vectors of WB_L
 * lanes (a lane sums x[j], x[j + 4 WB_L], ... in the compute type, as sum_id's do), the last
 * single vectors into the next ones, and each line's last n mod WB_L elements from the
 * vector that ends at its end into the fourth (for sums with its lanes already read masked
 * off; an extremum reading an element twice is unchanged): a lane takes at most
 * ceil(n / (4 WB_L)) elements of a line. Before a lane would sum more than WB_FLUSH / (4 WB_L)
 * elements (16 f32), the 4 vectors meet pairwise in the compute type (an f32 lane's sum is
 * then rounded at most 17 times) and their lanes go into 8 f64 lanes; eight outputs' f64
 * lanes meet at once (lanes_meet). (n >= WB_L.) */
/* A vector of WB_L lanes is WB_LV registers (ext_vec), so that the lanes stay in registers. */
#define WB_LV (64 / WB_EXT_BYTES)
#define WB_INTO_SUM(acc, e) ((acc) += (e))
#define WB_INTO_MAX(acc, e) WB_VEC_PICK(acc, e, >)
#define WB_INTO_MIN(acc, e) WB_VEC_PICK(acc, e, <)
/* acc[k·WB_LV + h] INTO= VEXPR(v) for the WB_L lanes at p, register by register. */
#define WB_LINE_STEP(p, k, VEXPR, INTO, TAIL)                                                 \
    for (int h = 0; h < WB_LV; h++) {                                                         \
        const WB_SFX(ext_vec) v = *(const WB_SFX(ext_vec) *)((p) + h * WB_EL);                \
        WB_SFX(ext_vec) e = (VEXPR);                                                          \
        TAIL;                                                                                 \
        INTO(acc[(k) * WB_LV + h], e);                                                        \
    }
#define WB_LINES_FN(name, VEXPR, KIND, INTO)                                                   \
    static inline __attribute__((always_inline)) void WB_SFX(line_into_##name)(               \
        const WB_T *restrict x, Py_ssize_t n, WB_SFX(ext_vec) cv,                             \
        const WB_SFX(ext_bits) *fresh, Py_ssize_t ahead, WB_SFX(ext_vec) *acc) {              \
        const Py_ssize_t whole = n - n % (4 * WB_L), vecs = n - n % WB_L;                     \
        (void)cv, (void)fresh;                                                                \
        for (Py_ssize_t i = 0; i < whole; i += 4 * WB_L) {                                    \
            prefetch_at(x + i, 4 * WB_L * sizeof(WB_T), ahead);                               \
            for (int k = 0; k < 4; k++) WB_LINE_STEP(x + i + k * WB_L, k, VEXPR, INTO, );     \
        }                                                                                     \
        for (int k = 0; k < 3; k++) /* (constant indices: the lanes stay in registers) */    \
            if (whole + k * WB_L < vecs)                                                      \
                WB_LINE_STEP(x + whole + k * WB_L, k, VEXPR, INTO, );                         \
        if (vecs < n)                                                                         \
            WB_LINE_STEP(x + n - WB_L, 3, VEXPR, INTO,                                        \
                         if ((KIND) == A_SUM) e = (WB_SFX(ext_vec))((WB_SFX(ext_bits))e &     \
                                                                    fresh[h]));               \
    }                                                                                         \
    static void WB_SFX(lines_##name)(const red_pass *ps, const WB_T *x, Py_ssize_t n,          \
                                     Py_ssize_t o0, Py_ssize_t o1, wb_odometer *outs) {        \
        const red_plan *pl = ps->pl;                                                          \
        const Py_ssize_t per = pl->nred / n, ahead = WB_SFX(lines_ahead)(pl);                 \
        const Py_ssize_t blocks = (n + 4 * WB_L - 1) / (4 * WB_L); /* a lane's per line */    \
        const Py_ssize_t window = WB_FLUSH / (4 * WB_L) / blocks; /* lines (n <= WB_FLUSH) */  \
        const WB_T start = (KIND) == A_SUM ? 0 : (KIND) == A_MAX ? -__builtin_inf()            \
                                                                : __builtin_inf();            \
        WB_SFX(ext_bits) fresh[WB_LV]; /* the tail vector's lanes not read before */          \
        for (int j = 0; j < WB_L; j++)                                                        \
            fresh[j / WB_EL][j % WB_EL] = j >= WB_L - n % WB_L ? -1 : 0;                      \
        for (Py_ssize_t o = o0; o < o1; o += 8) {                                             \
            const int group = o1 - o < 8 ? (int)(o1 - o) : 8;                                 \
            wb_f64x8 lanes[8];                                                                \
            for (int r = 0; r < group; r++, odometer_next(outs)) {                            \
                const WB_SFX(ext_vec) cv =                                                    \
                    (WB_SFX(ext_vec)){0} + (WB_T)(ps->center ? ps->center[o + r] : 0);        \
                WB_SFX(ext_vec) acc[4 * WB_LV];                                               \
                for (int k = 0; k < 4 * WB_LV; k++) acc[k] = (WB_SFX(ext_vec)){0} + start;    \
                int flushed = 0;                                                              \
                if (per == 1) {                                                               \
                    WB_SFX(line_into_##name)(x + outs->off, n, cv, fresh, 0, acc);            \
                } else {                                                                      \
                    wb_odometer lines;                                                        \
                    odometer_seek(&lines, pl->nr - 1, pl->rshape, pl->rstride, 0);            \
                    Py_ssize_t since = 0; /* lines in the lanes since they went into f64 */   \
                    for (Py_ssize_t l = 0; l < per; l++, odometer_next(&lines)) {             \
                        if ((KIND) == A_SUM && since == window) {                             \
                            WB_SFX(lanes_into)(&lanes[r], acc, KIND, flushed);                \
                            for (int k = 0; k < 4 * WB_LV; k++)                               \
                                acc[k] = (WB_SFX(ext_vec)){0};                                \
                            since = 0, flushed = 1;                                           \
                        }                                                                     \
                        WB_SFX(line_into_##name)(x + outs->off + lines.off, n, cv, fresh,     \
                                                 ahead, acc);                                 \
                        since++;                                                              \
                    }                                                                         \
                }                                                                             \
                WB_SFX(lanes_into)(&lanes[r], acc, KIND, flushed);                            \
            }                                                                                 \
            for (int r = group; r < 8; r++) lanes[r] = (wb_f64x8){0}; /* (results unused) */  \
            const wb_f64x8 result = lanes_meet(lanes, KIND);                                  \
            for (int r = 0; r < group; r++) ps->val[o + r] = result[r];                       \
        }                                                                                     \
    }

/* The 4 lane vectors of an output (4 · WB_LV registers), met in the compute type, into its 8
 * f64 lanes (added to them where ``more``: not the first time). */
static inline __attribute__((always_inline)) void WB_SFX(lanes_into)(
    wb_f64x8 *wide, WB_SFX(ext_vec) *acc, red_acc kind, int more) {
    for (int h = 0; h < WB_LV; h++) {
        if (kind == A_SUM) {
            acc[h] = (acc[h] + acc[WB_LV + h]) + (acc[2 * WB_LV + h] + acc[3 * WB_LV + h]);
        } else {
            for (int k = 1; k < 4; k++) {
                if (kind == A_MAX) WB_VEC_PICK(acc[h], acc[k * WB_LV + h], >);
                else WB_VEC_PICK(acc[h], acc[k * WB_LV + h], <);
            }
        }
    }
    WB_T met[WB_L]; /* (converted lane by lane: gcc 12 crashed on __builtin_convertvector into
                     * 64-byte vectors on AVX2 under ASan) */
    memcpy(met, acc, sizeof(met));
    wb_f64x8 w;
    for (int h = 0; h < WB_L / 8; h++) {
        double part[8];
        for (int j = 0; j < 8; j++) part[j] = (double)met[8 * h + j];
        wb_f64x8 v;
        memcpy(&v, part, sizeof(v));
        w = h ? lanes_combine(w, v, kind) : v;
    }
    *wide = more ? lanes_combine(*wide, w, kind) : w;
}
WB_LINES_FN(sum_id, v, A_SUM, WB_INTO_SUM)
WB_LINES_FN(sum_abs, WB_VEC_ABS(v), A_SUM, WB_INTO_SUM)
WB_LINES_FN(sum_sq, v * v, A_SUM, WB_INTO_SUM)
WB_LINES_FN(sum_sqdev, (v - cv) * (v - cv), A_SUM, WB_INTO_SUM)
WB_LINES_FN(max_id, v, A_MAX, WB_INTO_MAX)
WB_LINES_FN(max_abs, WB_VEC_ABS(v), A_MAX, WB_INTO_MAX)
WB_LINES_FN(min_id, v, A_MIN, WB_INTO_MIN)
WB_LINES_FN(min_abs, WB_VEC_ABS(v), A_MIN, WB_INTO_MIN)
#undef WB_LINES_FN
#undef WB_LINE_STEP
#undef WB_LV
#undef WB_INTO_SUM
#undef WB_INTO_MAX
#undef WB_INTO_MIN

#undef WB_VEC_PICK
#undef WB_VEC_ABS
#undef WB_EXT_V

/* The lanes of an arg-extremum: explicit vectors where reduce.c has them (WB_ARG_VEC), else
 * portable lanes. */
#ifdef WB_ARG_VEC
#define WB_ARG_LANES(name, CMP) i = WB_ARG_VEC(name)(x, n, bv, bi);
#else
#define WB_ARG_LANES(name, CMP)                                                                \
    for (int j = 0; j < WB_L; j++) bv[j] = x[j], bi[j] = (WB_IT)j;                            \
    for (i = WB_L; i + WB_L <= n; i += WB_L)                                                  \
        for (int j = 0; j < WB_L; j++) {                                                      \
            const WB_T v = x[i + j];                                                          \
            const int take = (v CMP bv[j]) | ((v != v) & (bv[j] == bv[j]));                   \
            bv[j] = take ? v : bv[j];                                                         \
            bi[j] = take ? (WB_IT)(i + j) : bi[j];                                            \
        }
#endif

/* The first index of the extremum (the first NaN if there is one), lanes of (value, index). */
#define WB_LANE_ARG(name, CMP)                                                                 \
    static void WB_SFX(name)(const WB_T *restrict x, Py_ssize_t n, WB_T *best, int64_t *at) { \
        WB_T m = x[0];                                                                        \
        Py_ssize_t b = 0, i = 1;                                                              \
        if (n >= 2 * WB_L) {                                                                  \
            WB_T bv[WB_L];                                                                    \
            WB_IT bi[WB_L];                                                                   \
            WB_ARG_LANES(name, CMP)                                                           \
            m = bv[0], b = bi[0];                                                             \
            for (int j = 1; j < WB_L; j++) {                                                  \
                const WB_T v = bv[j];                                                         \
                const int better = v != v ? (m == m || bi[j] < b)                              \
                                          : (m == m && (v CMP m || (v == m && bi[j] < b)));   \
                if (better) m = v, b = bi[j];                                                 \
            }                                                                                 \
        }                                                                                     \
        for (; i < n; i++) /* later indices: only a strictly better value replaces */         \
            if (x[i] CMP m || (x[i] != x[i] && m == m)) m = x[i], b = i;                      \
        *best = m;                                                                            \
        *at = b;                                                                              \
    }
WB_LANE_ARG(arg_max, >)
WB_LANE_ARG(arg_min, <)
#undef WB_LANE_ARG
#undef WB_ARG_LANES

static double WB_SFX(prod)(const WB_T *restrict x, Py_ssize_t n) {
    double acc[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] *= x[i + j];
    for (int j = 0; i < n; i++, j++) acc[j] *= x[i];
    return ((acc[0] * acc[1]) * (acc[2] * acc[3])) * ((acc[4] * acc[5]) * (acc[6] * acc[7]));
}

/* One piece into ``part``: i0 is the index of x[0] along the reduced elements; sums prefetch
 * ``ahead`` bytes past their reads (none for 0). */
static void WB_SFX(chunk)(const red_pass *ps, const WB_T *restrict x, Py_ssize_t n, WB_T c,
                          Py_ssize_t ahead, int64_t i0, red_part *part) {
    const WB_T p = (WB_T)ps->p;
    switch (ps->acc) {
    case A_SUM: {
        double s;
        switch (ps->map) {
        case M_ID: s = WB_SFX(sum_id)(x, n, c, p, ahead); break;
        case M_ABS: s = WB_SFX(sum_abs)(x, n, c, p, ahead); break;
        case M_SQ: s = WB_SFX(sum_sq)(x, n, c, p, ahead); break;
        case M_SQDEV: s = WB_SFX(sum_sqdev)(x, n, c, p, ahead); break;
        case M_EXPDEV: s = WB_SFX(sum_expdev)(x, n, c, p, ahead); break;
        default: s = WB_SFX(sum_powabs)(x, n, c, p, ahead); break;
        }
        part_add(part, A_SUM, s, 0);
        return;
    }
    case A_PROD: part_add(part, A_PROD, WB_SFX(prod)(x, n), 0); return;
    case A_MAX:
        part_add(part, A_MAX, ps->map == M_ABS ? WB_SFX(max_abs)(x, n) : WB_SFX(max_id)(x, n), 0);
        return;
    case A_MIN:
        part_add(part, A_MIN, ps->map == M_ABS ? WB_SFX(min_abs)(x, n) : WB_SFX(min_id)(x, n), 0);
        return;
    default: {
        WB_T m;
        int64_t at;
        if (ps->acc == A_ARGMAX) WB_SFX(arg_max)(x, n, &m, &at);
        else WB_SFX(arg_min)(x, n, &m, &at);
        part_add(part, ps->acc, m, i0 + at);
        return;
    }
    }
}

/* Whether the input's elements are already in the compute type (contiguous ones are read in
 * place, others are converted through a buffer). */
static int WB_SFX(in_compute_type)(const red_plan *pl) {
    return sizeof(WB_T) == 8 ? pl->dtype == WB_F64 : pl->dtype == WB_F32;
}

/* Elements of a line read at a time: lines of contiguous compute-type elements are read in
 * place, in long pieces; others through a buffer of WB_CHUNK. */
static Py_ssize_t WB_SFX(piece)(const red_plan *pl) {
    const int in_place = pl->rstride[pl->nr - 1] == 1 && WB_SFX(in_compute_type)(pl);
    return in_place ? WB_PIECE : WB_CHUNK;
}

/* Units [u0, u1) of one output (a unit: one piece of one line) into ``part``. */
static void WB_SFX(rows_units)(const red_pass *ps, Py_ssize_t o, Py_ssize_t base, Py_ssize_t u0,
                               Py_ssize_t u1, red_part *part, WB_T *buf) {
    const red_plan *pl = ps->pl;
    const Py_ssize_t n = pl->rshape[pl->nr - 1], s = pl->rstride[pl->nr - 1];
    const Py_ssize_t piece = WB_SFX(piece)(pl), cpl = (n + piece - 1) / piece;
    const WB_T c = ps->center ? (WB_T)ps->center[o] : 0;
    const Py_ssize_t ahead = piece == WB_PIECE ? WB_SFX(lines_ahead)(pl) : WB_PREFETCH_AHEAD;
    if (u0 >= u1) return;
    wb_odometer lines;
    Py_ssize_t line = u0 / cpl;
    odometer_seek(&lines, pl->nr - 1, pl->rshape, pl->rstride, line);
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t l = u / cpl, start = (u % cpl) * piece;
        if (l != line) {
            odometer_next(&lines);
            line = l;
        }
        const Py_ssize_t len = n - start < piece ? n - start : piece;
        const WB_T *v = WB_LOAD(pl->dtype, pl->data, base + lines.off + start * s, s, len, buf);
        WB_SFX(chunk)(ps, v, len, c, ahead, l * n + start, part);
    }
}

/* Outputs [o0, o1) of lines at x + outs' offsets (and their lines' offsets). */
typedef void (*WB_SFX(lines_fn))(const red_pass *ps, const WB_T *x, Py_ssize_t n,
                                  Py_ssize_t o0, Py_ssize_t o1, wb_odometer *outs);

/* The lanes kernel of a pass, or NULL where it has none (exp, pow, products, args) or its
 * lines are not contiguous lines of WB_L..WB_FLUSH elements in the compute type. */
static WB_SFX(lines_fn) WB_SFX(lines_kernel)(const red_pass *ps) {
    const red_plan *pl = ps->pl;
    const Py_ssize_t n = pl->rshape[pl->nr - 1];
    if (pl->rstride[pl->nr - 1] != 1 || !WB_SFX(in_compute_type)(pl) || n < WB_L || n > WB_FLUSH)
        return NULL;
    const int abs = ps->map == M_ABS;
    switch (ps->acc) {
    case A_SUM:
        switch (ps->map) {
        case M_ID: return WB_SFX(lines_sum_id);
        case M_ABS: return WB_SFX(lines_sum_abs);
        case M_SQ: return WB_SFX(lines_sum_sq);
        case M_SQDEV: return WB_SFX(lines_sum_sqdev);
        default: return NULL;
        }
    case A_MAX: return abs ? WB_SFX(lines_max_abs) : WB_SFX(lines_max_id);
    case A_MIN: return abs ? WB_SFX(lines_min_abs) : WB_SFX(lines_min_id);
    default: return NULL;
    }
}
/* Outputs [o0, o1), each reduced whole. */
static void WB_SFX(rows_outputs)(const red_pass *ps, Py_ssize_t o0, Py_ssize_t o1, WB_T *buf) {
    const red_plan *pl = ps->pl;
    const Py_ssize_t n = pl->rshape[pl->nr - 1], piece = WB_SFX(piece)(pl);
    const Py_ssize_t units = pl->nred / n * ((n + piece - 1) / piece);
    if (o0 >= o1) return;
    wb_odometer outs;
    odometer_seek(&outs, pl->nk, pl->kshape, pl->kstride, o0);
    const WB_SFX(lines_fn) lanes = WB_SFX(lines_kernel)(ps);
    if (lanes) {
        lanes(ps, (const WB_T *)pl->data + pl->offset, n, o0, o1, &outs);
        return;
    }
    if (pl->nr == 1 && units == 1 && piece == WB_PIECE) {
        /* One contiguous line in place per output that the lanes do not take (x.sum(-1) of
         * lines over WB_FLUSH or under WB_L; exp, pow, products, args): no units' walk, whose
         * setup cost rows of 64 f32 ~2/3 of their time on the EPYC, and no software prefetch (the
         * hardware's keeps up with lines one after another: with it, a row sum of a 4096 x
         * 4096 f32 matrix on one thread took 1.1-1.3x torch's time, without it 0.95-1.05x). */
        const WB_T *x = (const WB_T *)pl->data + pl->offset;
        for (Py_ssize_t o = o0; o < o1; o++, odometer_next(&outs)) {
            red_part part = part_init(ps->acc);
            const WB_T c = ps->center ? (WB_T)ps->center[o] : 0;
            WB_SFX(chunk)(ps, x + outs.off, n, c, 0, 0, &part);
            part_store(ps, o, &part);
        }
        return;
    }
    for (Py_ssize_t o = o0; o < o1; o++, odometer_next(&outs)) {
        red_part part = part_init(ps->acc);
        WB_SFX(rows_units)(ps, o, pl->offset + outs.off, 0, units, &part, buf);
        part_store(ps, o, &part);
    }
}

/* ---- columns: rows of w contiguous outputs, accumulated for each reduced index ------------ */
typedef struct {
    WB_T *blk, *row, *c; /* block partial sums (or extrema), a loaded row, centers */
    double *tot;        /* sums of the blocks (products) */
    int64_t *at;        /* arg ops: the index of each column's extremum */
} WB_SFX(cols_buf);

#define WB_COLS_LOOP(STMT)                                                                     \
    for (Py_ssize_t j = 0; j < w; j++) {                                                      \
        const WB_T v = x[j];                                                                  \
        STMT;                                                                                 \
    }

/* One reduced index ``r``: its row x of w values into the accumulators. */
static void WB_SFX(cols_row)(const red_pass *ps, const WB_T *restrict x, Py_ssize_t w, int64_t r,
                             WB_SFX(cols_buf) *b) {
    WB_T *restrict acc = b->blk;
    const WB_T *restrict c = b->c;
    const WB_T p = (WB_T)ps->p;
    switch (ps->acc) {
    case A_SUM:
        switch (ps->map) {
        case M_ID: WB_COLS_LOOP(acc[j] += v); break;
        case M_ABS: WB_COLS_LOOP(acc[j] += WB_FABS(v)); break;
        case M_SQ: WB_COLS_LOOP(acc[j] += v * v); break;
        case M_SQDEV: WB_COLS_LOOP(acc[j] += (v - c[j]) * (v - c[j])); break;
        case M_EXPDEV: WB_COLS_LOOP(acc[j] += WB_EXP(v - c[j])); break;
        default: WB_COLS_LOOP(acc[j] += WB_POW(WB_FABS(v), p)); break;
        }
        return;
    case A_PROD: {
        double *restrict t = b->tot;
        WB_COLS_LOOP(t[j] *= v);
        return;
    }
    case A_MAX:
        if (ps->map == M_ABS) {
            WB_COLS_LOOP(const WB_T e = WB_FABS(v); acc[j] = (e > acc[j] || e != e) ? e : acc[j]);
        } else {
            WB_COLS_LOOP(acc[j] = (v > acc[j] || v != v) ? v : acc[j]);
        }
        return;
    case A_MIN:
        if (ps->map == M_ABS) {
            WB_COLS_LOOP(const WB_T e = WB_FABS(v); acc[j] = (e < acc[j] || e != e) ? e : acc[j]);
        } else {
            WB_COLS_LOOP(acc[j] = (v < acc[j] || v != v) ? v : acc[j]);
        }
        return;
    default: {
        int64_t *restrict at = b->at;
        if (ps->acc == A_ARGMAX) {
            WB_COLS_LOOP(const int take = (v > acc[j]) | ((v != v) & (acc[j] == acc[j]));
                         acc[j] = take ? v : acc[j]; at[j] = take ? r : at[j]);
        } else {
            WB_COLS_LOOP(const int take = (v < acc[j]) | ((v != v) & (acc[j] == acc[j]));
                         acc[j] = take ? v : acc[j]; at[j] = take ? r : at[j]);
        }
        return;
    }
    }
}
#undef WB_COLS_LOOP

/* ---- columns in place: sums over tiles of neighbouring outputs ---------------------------- */
/* Rows of contiguous compute-type values: the sums of a tile of neighbouring outputs stay in
 * registers through a block of rows (offs: each row's offset), then go into their f64 totals.
 * Row at a time, the accumulators were stored back after every row, and those stores bounded
 * the pass (a bias gradient's sum of 64 x 64 x 14 x 14 ran at 30 GB/s on the EPYC). gcc does
 * not vectorise a tile whose rows' offsets it reads from memory, so the tiles are vectors of
 * gcc's own (ext_vec, one register each): 4 of them, then 1, then the last w mod WB_EL
 * outputs one at a time. The maps without vector arithmetic (abs, exp, pow) take the
 * row-at-a-time form. */
#define WB_TILE_VECS(NV, VEXPR)                                                                \
    for (; j0 + (NV) * WB_EL <= w; j0 += (NV) * WB_EL) {                                      \
        WB_SFX(ext_vec) acc[NV], cv[NV];                                                      \
        for (int k = 0; k < (NV); k++) {                                                      \
            acc[k] = (WB_SFX(ext_vec)){0};                                                    \
            cv[k] = c ? *(const WB_SFX(ext_vec) *)(c + j0 + k * WB_EL) : acc[k];              \
        }                                                                                     \
        (void)cv;                                                                             \
        for (Py_ssize_t r = 0; r < rows; r++) {                                               \
            const WB_T *xr = x + offs[r] + j0;                                                \
            for (int k = 0; k < (NV); k++) {                                                  \
                const WB_SFX(ext_vec) v = *(const WB_SFX(ext_vec) *)(xr + k * WB_EL);         \
                acc[k] += (VEXPR);                                                            \
            }                                                                                 \
        }                                                                                     \
        for (int k = 0; k < (NV); k++)                                                        \
            for (int j = 0; j < WB_EL; j++) tot[j0 + k * WB_EL + j] += acc[k][j];             \
    }
#define WB_TILE_SUM(name, VEXPR, EXPR)                                                         \
    static void WB_SFX(tiles_##name)(const WB_T *x, const Py_ssize_t *restrict offs,           \
                                     Py_ssize_t rows, Py_ssize_t w, const WB_T *c,             \
                                     double *restrict tot) {                                   \
        Py_ssize_t j0 = 0;                                                                    \
        WB_TILE_VECS(4, VEXPR)                                                                \
        WB_TILE_VECS(1, VEXPR)                                                                \
        for (; j0 < w; j0++) {                                                                \
            const WB_T cj = c ? c[j0] : 0;                                                    \
            (void)cj;                                                                         \
            WB_T acc = 0;                                                                     \
            for (Py_ssize_t r = 0; r < rows; r++) {                                           \
                const WB_T v = x[offs[r] + j0];                                               \
                acc += (EXPR);                                                                \
            }                                                                                 \
            tot[j0] += acc;                                                                   \
        }                                                                                     \
    }
WB_TILE_SUM(id, v, v)
WB_TILE_SUM(sq, v * v, v * v)
WB_TILE_SUM(sqdev, (v - cv[k]) * (v - cv[k]), (v - cj) * (v - cj))
#undef WB_TILE_SUM
#undef WB_TILE_VECS

/* One block of rows of a sum in place into the totals (the maps cols_units gives tiles). */
static void WB_SFX(cols_tiles)(const red_pass *ps, const WB_T *x, const Py_ssize_t *offs,
                               Py_ssize_t rows, Py_ssize_t w, WB_SFX(cols_buf) *b) {
    switch (ps->map) {
    case M_ID: WB_SFX(tiles_id)(x, offs, rows, w, NULL, b->tot); return;
    case M_SQ: WB_SFX(tiles_sq)(x, offs, rows, w, NULL, b->tot); return;
    default: WB_SFX(tiles_sqdev)(x, offs, rows, w, b->c, b->tot); return;
    }
}

/* Column units [u0, u1): a unit is pl->width (or fewer) neighbouring outputs of one row of the
 * output (its innermost dim), reduced over every reduced index. */
static void WB_SFX(cols_units)(const red_pass *ps, Py_ssize_t u0, Py_ssize_t u1,
                               WB_SFX(cols_buf) *b) {
    const red_plan *pl = ps->pl;
    const Py_ssize_t kw = pl->kshape[pl->nk - 1], ks = pl->kstride[pl->nk - 1], W = pl->width;
    const Py_ssize_t cpr = (kw + W - 1) / W;
    const int sum = ps->acc == A_SUM;
    const int tiled_map = ps->map == M_ID || ps->map == M_SQ || ps->map == M_SQDEV;
    const int tiles = sum && tiled_map && ks == 1 && WB_SFX(in_compute_type)(pl);
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t outer = u / cpr, j0 = (u % cpr) * W;
        const Py_ssize_t w = kw - j0 < W ? kw - j0 : W, o0 = outer * kw + j0;
        wb_odometer out_row;
        odometer_seek(&out_row, pl->nk - 1, pl->kshape, pl->kstride, outer);
        const Py_ssize_t base = pl->offset + out_row.off + j0 * ks;
        const WB_T init = ps->acc == A_MAX ? -__builtin_inf() : ps->acc == A_MIN ? __builtin_inf() : 0;
        const double tot0 = ps->acc == A_PROD ? 1.0 : 0.0;
        for (Py_ssize_t j = 0; j < w; j++) b->blk[j] = init, b->tot[j] = tot0;
        for (Py_ssize_t j = 0; ps->center && j < w; j++) b->c[j] = (WB_T)ps->center[o0 + j];
        wb_odometer red;
        odometer_seek(&red, pl->nr, pl->rshape, pl->rstride, 0);
        Py_ssize_t r = 0;
        if (ps->acc == A_ARGMAX || ps->acc == A_ARGMIN) { /* start from the first row */
            const WB_T *v = WB_LOAD(pl->dtype, pl->data, base, ks, w, b->row);
            for (Py_ssize_t j = 0; j < w; j++) b->blk[j] = v[j], b->at[j] = 0;
            odometer_next(&red);
            r = 1;
        }
        if (tiles) {
            Py_ssize_t offs[WB_BLOCK];
            for (; r < pl->nred; r += WB_BLOCK) {
                const Py_ssize_t rows = pl->nred - r < WB_BLOCK ? pl->nred - r : WB_BLOCK;
                for (Py_ssize_t i = 0; i < rows; i++, odometer_next(&red)) offs[i] = red.off;
                WB_SFX(cols_tiles)(ps, (const WB_T *)pl->data + base, offs, rows, w, b);
            }
        }
        for (; r < pl->nred; r++, odometer_next(&red)) {
            const WB_T *v = WB_LOAD(pl->dtype, pl->data, base + red.off, ks, w, b->row);
            WB_SFX(cols_row)(ps, v, w, r, b);
            if (sum && r % WB_BLOCK == WB_BLOCK - 1) /* a block's sum into the f64 total */
                for (Py_ssize_t j = 0; j < w; j++) b->tot[j] += b->blk[j], b->blk[j] = 0;
        }
        double *restrict val = ps->val + o0; /* (a part with no compensation: its value) */
        if (sum) for (Py_ssize_t j = 0; j < w; j++) val[j] = b->tot[j] + b->blk[j];
        else if (ps->acc == A_PROD) for (Py_ssize_t j = 0; j < w; j++) val[j] = b->tot[j];
        else for (Py_ssize_t j = 0; j < w; j++) val[j] = b->blk[j];
        for (Py_ssize_t j = 0; ps->idx && j < w; j++) ps->idx[o0 + j] = b->at[j];
    }
}

/* ---- one pass over the elements, on ``threads`` threads ---------------------------------- */
/* The thread jobs (wb_parallel_ranges): column units, whole outputs, or one output's units. */
static void WB_SFX(cols_job)(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *mem) {
    const red_pass *ps = ctx;
    const Py_ssize_t W = ps->pl->width;
    WB_SFX(cols_buf) b;
    b.blk = mem;
    b.row = b.blk + W;
    b.c = b.row + W;
    b.tot = (double *)(b.c + W);
    b.at = (int64_t *)(b.tot + W);
    WB_SFX(cols_units)(ps, u0, u1, &b);
}

static void WB_SFX(outputs_job)(const void *ctx, int t, Py_ssize_t o0, Py_ssize_t o1, void *buf) {
    WB_SFX(rows_outputs)(ctx, o0, o1, buf);
}

typedef struct {
    const red_pass *ps;
    Py_ssize_t o, base; /* the output, and the offset of its first element */
    red_part *parts;    /* one per thread */
} WB_SFX(shared_ctx);

static void WB_SFX(shared_job)(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {
    const WB_SFX(shared_ctx) *c = ctx;
    WB_SFX(rows_units)(c->ps, c->o, c->base, u0, u1, &c->parts[t], buf);
}

static int WB_SFX(run_pass)(const red_pass *ps, int threads) {
    const red_plan *pl = ps->pl;
    if (pl->columns) {
        const Py_ssize_t kw = pl->kshape[pl->nk - 1];
        const Py_ssize_t units = pl->nout / kw * ((kw + pl->width - 1) / pl->width);
        const size_t per = 3 * sizeof(WB_T) + sizeof(double) + sizeof(int64_t);
        return wb_parallel_ranges(WB_SFX(cols_job), ps, units, threads, (size_t)pl->width * per);
    }
    if (pl->nout >= threads) /* threads take ranges of outputs */
        return wb_parallel_ranges(WB_SFX(outputs_job), ps, pl->nout, threads,
                                  sizeof(WB_T) * WB_CHUNK);
    /* fewer outputs than threads: the threads share each output's units, and their partial
     * results are combined in index order (deterministic for a given thread count) */
    const Py_ssize_t n = pl->rshape[pl->nr - 1], piece = WB_SFX(piece)(pl);
    const Py_ssize_t units = pl->nred / n * ((n + piece - 1) / piece);
    if (threads > units) threads = (int)units;
    if (threads > WB_MAX_THREADS) threads = WB_MAX_THREADS;
    red_part parts[WB_MAX_THREADS];
    WB_SFX(shared_ctx) c = {ps, 0, 0, parts};
    wb_odometer outs;
    odometer_seek(&outs, pl->nk, pl->kshape, pl->kstride, 0);
    for (Py_ssize_t o = 0; o < pl->nout; o++, odometer_next(&outs)) {
        c.o = o;
        c.base = pl->offset + outs.off;
        for (int t = 0; t < threads; t++) parts[t] = part_init(ps->acc); /* (fewer may run) */
        if (wb_parallel_ranges(WB_SFX(shared_job), &c, units, threads, sizeof(WB_T) * WB_CHUNK) < 0)
            return -1;
        for (int t = 1; t < threads; t++) part_merge(&parts[0], ps->acc, &parts[t]);
        part_store(ps, o, &parts[0]);
    }
    return 0;
}

#undef WB_L
#undef WB_EL
#undef WB_EXT_BYTES
