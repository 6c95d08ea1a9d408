/* The flash attention kernel for one compute type. attention.c includes this file once per
 * type with WB_T (float or double), WB_V (its vector type), WB_VFMA, WB_EXP, WB_LOG, WB_EXP_MIN
 * (the smallest argument whose exp is a normal number), WB_MASK_TILES (1 where mask_tiles
 * transposes 8 × 8 blocks of WB_T), WB_DT (the
 * storage dtype read without conversion), WB_SUFFIX (names), WB_LOAD (a strided row as WB_T)
 * and WB_STORE (a WB_T row into the output dtype) defined; they are undefined at the end. */

#define WB_VL ((Py_ssize_t)(sizeof(WB_V) / sizeof(WB_T)))
#define F_(name) WB_SUFFIX(name)
#define WB_NEG_INF (-(WB_T)__builtin_inf())

static inline WB_V F_(vload)(const WB_T *p) {
    WB_V v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void F_(vstore)(WB_T *p, WB_V v) { memcpy(p, &v, sizeof v); }
static inline WB_V F_(vset1)(WB_T s) { return s - (WB_V){0}; }

/* exp(x), flushed to 0 below WB_EXP_MIN, where it would be subnormal: a subnormal result (and
 * exp of a masked -inf score lands there) costs a microcode assist of ~100 cycles per lane. */
static inline WB_T F_(exp_or_zero)(WB_T x) {
    const WB_T e = WB_EXP(x < WB_EXP_MIN ? WB_EXP_MIN : x);
    return x < WB_EXP_MIN ? 0 : e;
}

/* Per-thread buffers (one allocation, zeroed so padding lanes read zeros). */
typedef struct {
    WB_T *base;
    WB_T *qt;    /* scaled queries: (E × WB_BQ) transposed (tiled product) or (bq × ep) rows */
    WB_T *s;     /* scores, then probabilities: (bk × ps), key-major */
    WB_T *mt;    /* the mask's block, laid out as the scores */
    WB_T *kp;    /* key rows as WB_T, (bk × E), when k cannot be read in place */
    WB_T *vp;    /* value rows as WB_T, (bk × evp), zero-padded */
    WB_T *o;     /* unnormalised outputs, (WB_BQ × evp) */
    WB_T *m, *l, *alpha, *msafe, *mx, *sum; /* per query */
    WB_T *row;   /* one loaded row (q, mask, output) */
} F_(scratch);

static int F_(scratch_alloc)(F_(scratch) *w, const attn_ctx *c) {
    const Py_ssize_t ep = round_up(c->E, WB_VL), evp = round_up(c->Ev, WB_VL);
    const Py_ssize_t nqt = c->E * WB_BQ > WB_BQ * ep ? c->E * WB_BQ : WB_BQ * ep;
    Py_ssize_t nrow = c->E > c->Ev ? c->E : c->Ev;
    nrow = nrow > WB_BK ? nrow : WB_BK;
    const Py_ssize_t sizes[] = {nqt, WB_BK * WB_BQ, WB_BK * WB_BQ, WB_BK * c->E, WB_BK * evp,
                                WB_BQ * evp, 6 * WB_BQ, nrow};
    Py_ssize_t total = 0;
    for (int i = 0; i < 8; i++) total += round_up(sizes[i], WB_VL);
    w->base = calloc((size_t)total, sizeof(WB_T));
    if (!w->base) return -1;
    WB_T *p = w->base;
    WB_T **dst[] = {&w->qt, &w->s, &w->mt, &w->kp, &w->vp, &w->o, &w->m, &w->row};
    for (int i = 0; i < 8; i++) {
        *dst[i] = p;
        p += round_up(sizes[i], WB_VL);
    }
    w->l = w->m + WB_BQ;
    w->alpha = w->l + WB_BQ;
    w->msafe = w->alpha + WB_BQ;
    w->mx = w->msafe + WB_BQ;
    w->sum = w->mx + WB_BQ;
    return 0;
}

/* s[r][0 .. nv·VL) = Σ_d kb[r][d] · qt[d][0 .. nv·VL) for r < mr: a register tile of mr key
 * rows by nv vectors of queries (mr, nv constant after inlining). */
static inline __attribute__((always_inline)) void
F_(score_tile)(const WB_T *kb, Py_ssize_t ksr, const WB_T *qt, Py_ssize_t E, WB_T *s,
               const int mr, const int nv) {
    WB_V acc[WB_MR][2];
    for (int r = 0; r < mr; r++) acc[r][0] = acc[r][1] = F_(vset1)(0);
    for (Py_ssize_t d = 0; d < E; d++) {
        const WB_V q0 = F_(vload)(qt + d * WB_BQ);
        const WB_V q1 = nv > 1 ? F_(vload)(qt + d * WB_BQ + WB_VL) : q0;
        for (int r = 0; r < mr; r++) {
            const WB_V kr = F_(vset1)(kb[r * ksr + d]);
            acc[r][0] = WB_VFMA(kr, q0, acc[r][0]);
            if (nv > 1) acc[r][1] = WB_VFMA(kr, q1, acc[r][1]);
        }
    }
    for (int r = 0; r < mr; r++) {
        F_(vstore)(s + r * WB_BQ, acc[r][0]);
        if (nv > 1) F_(vstore)(s + r * WB_BQ + WB_VL, acc[r][1]);
    }
}

#define WB_SCORE_CASE(m)                                                                       \
    case m:                                                                                   \
        if (nv == 2) F_(score_tile)(kb + j * ksr, ksr, qt + col, E, s + j * WB_BQ + col, m, 2); \
        else F_(score_tile)(kb + j * ksr, ksr, qt + col, E, s + j * WB_BQ + col, m, 1);         \
        break;

/* Scores (bk × ncols) = kb (bk × E, row stride ksr) · qt (E × ncols, row stride WB_BQ). */
static void F_(scores_tiled)(const WB_T *kb, Py_ssize_t ksr, const WB_T *qt, Py_ssize_t E,
                             Py_ssize_t ncols, WB_T *s, Py_ssize_t bk) {
    for (Py_ssize_t j = 0; j < bk; j += WB_MR) {
        const int mr = bk - j < WB_MR ? (int)(bk - j) : WB_MR;
        for (Py_ssize_t col = 0; col < ncols; col += 2 * WB_VL) {
            const int nv = ncols - col >= 2 * WB_VL ? 2 : 1;
            switch (mr) {
                WB_SCORE_CASE(1)
                WB_SCORE_CASE(2)
                WB_SCORE_CASE(3)
                WB_SCORE_CASE(4)
                WB_SCORE_CASE(5)
                WB_SCORE_CASE(6)
            }
        }
    }
}

/* Scores s[j][i] (row stride bq) = kb[j] · qr[i] for a few queries (rows of ep): dot products
 * along E, which waste no lanes when there are fewer queries than a vector holds. */
static void F_(scores_dot)(const WB_T *kb, Py_ssize_t ksr, const WB_T *qr, Py_ssize_t ep,
                           Py_ssize_t E, Py_ssize_t bq, WB_T *s, Py_ssize_t bk) {
    for (Py_ssize_t j = 0; j < bk; j++) {
        const WB_T *kr = kb + j * ksr;
        for (Py_ssize_t i = 0; i < bq; i++) {
            const WB_T *q = qr + i * ep;
            WB_V acc = F_(vset1)(0);
            Py_ssize_t d = 0;
            for (; d + WB_VL <= E; d += WB_VL)
                acc = WB_VFMA(F_(vload)(kr + d), F_(vload)(q + d), acc);
            WB_T t = 0;
            for (int lane = 0; lane < WB_VL; lane++) t += acc[lane];
            for (; d < E; d++) t += kr[d] * q[d];
            s[j * bq + i] = t;
        }
    }
}

/* o[r][0 .. nv·VL) = o[r]·alpha[r] + Σ_j p[j][r] · vb[j][0 .. nv·VL) for r < mr. */
static inline __attribute__((always_inline)) void
F_(value_tile)(const WB_T *p, Py_ssize_t ps, const WB_T *vb, Py_ssize_t vsr, Py_ssize_t bk,
               WB_T *o, Py_ssize_t os, const WB_T *alpha, const int mr, const int nv) {
    WB_V acc[WB_MR][2];
    for (int r = 0; r < mr; r++) {
        const WB_V a = F_(vset1)(alpha[r]);
        acc[r][0] = F_(vload)(o + r * os) * a;
        acc[r][1] = nv > 1 ? F_(vload)(o + r * os + WB_VL) * a : acc[r][0];
    }
    for (Py_ssize_t j = 0; j < bk; j++) {
        const WB_V v0 = F_(vload)(vb + j * vsr);
        const WB_V v1 = nv > 1 ? F_(vload)(vb + j * vsr + WB_VL) : v0;
        for (int r = 0; r < mr; r++) {
            const WB_V pr = F_(vset1)(p[j * ps + r]);
            acc[r][0] = WB_VFMA(pr, v0, acc[r][0]);
            if (nv > 1) acc[r][1] = WB_VFMA(pr, v1, acc[r][1]);
        }
    }
    for (int r = 0; r < mr; r++) {
        F_(vstore)(o + r * os, acc[r][0]);
        if (nv > 1) F_(vstore)(o + r * os + WB_VL, acc[r][1]);
    }
}

#define WB_VALUE_CASE(m)                                                                       \
    case m:                                                                                   \
        if (nv == 2)                                                                          \
            F_(value_tile)(p + i, ps, vb + col, vsr, bk, o + i * evp + col, evp, alpha + i, m, 2); \
        else                                                                                  \
            F_(value_tile)(p + i, ps, vb + col, vsr, bk, o + i * evp + col, evp, alpha + i, m, 1); \
        break;

/* o (bq × evp) = o·alpha + pᵀ (p: bk × bq, row stride ps) · vb (bk × evp, row stride vsr). */
static void F_(values)(const WB_T *p, Py_ssize_t ps, Py_ssize_t bq, const WB_T *vb,
                       Py_ssize_t vsr, Py_ssize_t bk, WB_T *o, Py_ssize_t evp, const WB_T *alpha) {
    /* column chunks outside: a chunk of the value rows stays in L1 across the query strips */
    for (Py_ssize_t col = 0; col < evp; col += 2 * WB_VL) {
        const int nv = evp - col >= 2 * WB_VL ? 2 : 1;
        for (Py_ssize_t i = 0; i < bq; i += WB_MR) {
            const int mr = bq - i < WB_MR ? (int)(bq - i) : WB_MR;
            switch (mr) {
                WB_VALUE_CASE(1)
                WB_VALUE_CASE(2)
                WB_VALUE_CASE(3)
                WB_VALUE_CASE(4)
                WB_VALUE_CASE(5)
                WB_VALUE_CASE(6)
            }
        }
    }
}

/* The online-softmax step for one key block: scores s (bk × bq, row stride ps) become
 * exp(z - m'), and m, l, alpha = e^(m - m') are updated. A query whose scores so far are all
 * -inf keeps m = -inf and l = 0 (m' is replaced by 0 in the exponents, so they give 0, not
 * NaN); a NaN score makes m, and so the output row, NaN. */
static void F_(softmax_step)(F_(scratch) *w, WB_T *s, Py_ssize_t ps, Py_ssize_t bq,
                             Py_ssize_t bk) {
    WB_T *m = w->m, *l = w->l, *alpha = w->alpha, *msafe = w->msafe, *mx = w->mx, *sum = w->sum;
    for (Py_ssize_t i = 0; i < bq; i++) {
        mx[i] = WB_NEG_INF;
        sum[i] = 0;
    }
    if (bq == 1) { /* one query: the block is one contiguous line */
        WB_T mv = WB_NEG_INF;
        for (Py_ssize_t j = 0; j < bk; j++) mv = (s[j] > mv || s[j] != s[j]) ? s[j] : mv;
        mx[0] = mv;
    } else {
        for (Py_ssize_t j = 0; j < bk; j++)
            for (Py_ssize_t i = 0; i < bq; i++) {
                const WB_T z = s[j * ps + i];
                mx[i] = (z > mx[i] || z != z) ? z : mx[i];
            }
    }
    for (Py_ssize_t i = 0; i < bq; i++) {
        const WB_T mnew = (mx[i] > m[i] || mx[i] != mx[i]) ? mx[i] : m[i];
        msafe[i] = mnew == WB_NEG_INF ? 0 : mnew;
        alpha[i] = F_(exp_or_zero)(m[i] - msafe[i]);
        m[i] = mnew;
    }
    if (bq == 1) {
        const WB_T ms = msafe[0];
        WB_T t = 0;
        for (Py_ssize_t j = 0; j < bk; j++) {
            const WB_T e = F_(exp_or_zero)(s[j] - ms);
            s[j] = e;
            t += e;
        }
        sum[0] = t;
    } else {
        for (Py_ssize_t j = 0; j < bk; j++)
            for (Py_ssize_t i = 0; i < bq; i++) {
                const WB_T e = F_(exp_or_zero)(s[j * ps + i] - msafe[i]);
                s[j * ps + i] = e;
                sum[i] += e;
            }
    }
    for (Py_ssize_t i = 0; i < bq; i++) l[i] = l[i] * alpha[i] + sum[i];
}

/* mt[j][i] = the mask at (query i, key j) for i in [i_lo, i_hi), j in [j_lo, j_hi), as WB_T (a
 * bool as 1 = attend or 0), read in runs of WB_MASK_RUN keys along each query's row: a run and
 * its places in mt are a few cache lines each. */
static void F_(mask_rect)(const wb_operand *mk, Py_ssize_t off, Py_ssize_t msl, Py_ssize_t mss,
                          Py_ssize_t i_lo, Py_ssize_t i_hi, Py_ssize_t j_lo, Py_ssize_t j_hi,
                          WB_T *mt, Py_ssize_t ps, WB_T *row) {
    for (Py_ssize_t j0 = j_lo; j0 < j_hi; j0 += WB_MASK_RUN) {
        const Py_ssize_t n = j_hi - j0 < WB_MASK_RUN ? j_hi - j0 : WB_MASK_RUN;
        for (Py_ssize_t i = i_lo; i < i_hi; i++) {
            const Py_ssize_t o = off + i * msl + j0 * mss;
            if (mk->dtype == WB_BOOL) {
                const uint8_t *keep = (const uint8_t *)mk->data + o;
                for (Py_ssize_t j = 0; j < n; j++) mt[(j0 + j) * ps + i] = keep[j * mss] != 0;
            } else {
                const WB_T *add = WB_LOAD(mk->dtype, mk->data, o, mss, n, row);
                for (Py_ssize_t j = 0; j < n; j++) mt[(j0 + j) * ps + i] = add[j];
            }
        }
    }
}

/* The mask's (bq × bk) block at ``off`` (row stride msl, key stride mss) applied to the scores
 * s (bk × ps): a bool mask sets the scores it excludes to -inf (whatever they were, NaN
 * included), a float mask is added. The block is first laid out as the scores (by 8 × 8
 * register transposes where WB_MASK_TILES, or broadcast when every query shares one row), so
 * that applying it is one vector pass. */
static void F_(apply_mask)(const wb_operand *mk, Py_ssize_t off, Py_ssize_t msl, Py_ssize_t mss,
                           Py_ssize_t bq, Py_ssize_t bk, WB_T *s, Py_ssize_t ps, F_(scratch) *w) {
    WB_T *mt = w->mt;
    if (msl == 0) { /* one row for every query, e.g. a key padding mask */
        F_(mask_rect)(mk, off, 0, mss, 0, 1, 0, bk, mt, ps, w->row);
        for (Py_ssize_t j = 0; j < bk; j++)
            for (Py_ssize_t i = 1; i < bq; i++) mt[j * ps + i] = mt[j * ps];
    } else {
        Py_ssize_t i8 = 0, j8 = 0;
#if WB_MASK_TILES
        if (mss == 1 && (mk->dtype == WB_BOOL || mk->dtype == WB_DT)) {
            i8 = bq / 8 * 8;
            j8 = bk / 8 * 8;
            mask_tiles(mk, off, msl, i8, j8, mt, ps);
        }
#endif
        F_(mask_rect)(mk, off, msl, mss, 0, i8, j8, bk, mt, ps, w->row);
        F_(mask_rect)(mk, off, msl, mss, i8, bq, 0, bk, mt, ps, w->row);
    }
    for (Py_ssize_t j = 0; j < bk; j++) {
        WB_T *sj = s + j * ps;
        const WB_T *mj = mt + j * ps;
        if (mk->dtype == WB_BOOL)
            for (Py_ssize_t i = 0; i < bq; i++) sj[i] = mj[i] == 0 ? WB_NEG_INF : sj[i];
        else
            for (Py_ssize_t i = 0; i < bq; i++) sj[i] += mj[i];
    }
}

/* Rows [j0, j0 + n) of a (S × width) operand at ``off`` as WB_T: in place when it already is
 * WB_T with unit stride along the row (and ``in_place``), else packed into ``buf`` (rows of
 * ``bufw``). Returns the rows and sets their stride. */
static const WB_T *F_(rows)(const wb_operand *x, Py_ssize_t off, Py_ssize_t rs, Py_ssize_t cs,
                            Py_ssize_t j0, Py_ssize_t n, Py_ssize_t width, int in_place,
                            WB_T *buf, Py_ssize_t bufw, Py_ssize_t *stride) {
    if (in_place) {
        *stride = rs;
        return (const WB_T *)x->data + off + j0 * rs;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        WB_T *dst = buf + j * bufw;
        const WB_T *src = WB_LOAD(x->dtype, x->data, off + (j0 + j) * rs, cs, width, dst);
        if (src != dst) memcpy(dst, src, sizeof(WB_T) * (size_t)width);
    }
    *stride = bufw;
    return buf;
}

/* Queries [i0, i0 + bq) of batch item b: attention over the keys (all, or up to the last
 * query's position when causal), written to the output. */
static void F_(attend_block)(const attn_ctx *c, Py_ssize_t b, Py_ssize_t i0, F_(scratch) *w) {
    const wb_operand *q = c->q, *k = c->k, *v = c->v, *mk = c->mask;
    const int nb = c->nb;
    const Py_ssize_t L = c->L, S = c->S, E = c->E, Ev = c->Ev;
    const Py_ssize_t bq = L - i0 < WB_BQ ? L - i0 : WB_BQ;
    const Py_ssize_t ep = round_up(E, WB_VL), evp = round_up(Ev, WB_VL);
    const int tiled = 2 * bq > WB_VL; /* else so few queries that dot products waste less */
    const Py_ssize_t ncols = round_up(bq, WB_VL), ps = tiled ? WB_BQ : bq;
    const WB_T scale = (WB_T)c->scale;

    const Py_ssize_t qoff = batch_offset(q, nb, b), qsl = q->strides[nb], qse = q->strides[nb + 1];
    for (Py_ssize_t r = 0; r < bq; r++) {
        const WB_T *row = WB_LOAD(q->dtype, q->data, qoff + (i0 + r) * qsl, qse, E, w->row);
        if (tiled) {
            for (Py_ssize_t d = 0; d < E; d++) w->qt[d * WB_BQ + r] = row[d] * scale;
        } else {
            for (Py_ssize_t d = 0; d < E; d++) w->qt[r * ep + d] = row[d] * scale;
            for (Py_ssize_t d = E; d < ep; d++) w->qt[r * ep + d] = 0;
        }
    }
    if (tiled)
        for (Py_ssize_t d = 0; d < E; d++)
            for (Py_ssize_t r = bq; r < ncols; r++) w->qt[d * WB_BQ + r] = 0;
    for (Py_ssize_t i = 0; i < bq; i++) {
        w->m[i] = WB_NEG_INF;
        w->l[i] = 0;
    }
    memset(w->o, 0, sizeof(WB_T) * (size_t)(bq * evp));

    const Py_ssize_t kend = c->causal && i0 + bq < S ? i0 + bq : S;
    const Py_ssize_t koff = batch_offset(k, nb, b), ksl = k->strides[nb], kse = k->strides[nb + 1];
    const Py_ssize_t voff = batch_offset(v, nb, b), vsl = v->strides[nb], vse = v->strides[nb + 1];
    const Py_ssize_t moff = mk ? batch_offset(mk, nb, b) : 0; /* of (i0 = 0, j0 = 0) */
    const Py_ssize_t msl = mk ? mk->strides[nb] : 0, mss = mk ? mk->strides[nb + 1] : 0;
    const int k_in_place = k->dtype == WB_DT && kse == 1;
    const int v_in_place = v->dtype == WB_DT && vse == 1 && Ev == evp;
    WB_T *s = w->s;
    for (Py_ssize_t j0 = 0; j0 < kend; j0 += WB_BK) {
        const Py_ssize_t bk = kend - j0 < WB_BK ? kend - j0 : WB_BK;
        Py_ssize_t ksr, vsr;
        const WB_T *kb = F_(rows)(k, koff, ksl, kse, j0, bk, E, k_in_place, w->kp, E, &ksr);
        if (tiled) F_(scores_tiled)(kb, ksr, w->qt, E, ncols, s, bk);
        else F_(scores_dot)(kb, ksr, w->qt, ep, E, bq, s, bk);
        if (c->causal && j0 + bk - 1 > i0) /* the block crosses the diagonal: j > i is out */
            for (Py_ssize_t j = 0; j < bk; j++)
                for (Py_ssize_t i = 0; i < bq; i++)
                    s[j * ps + i] = j0 + j > i0 + i ? WB_NEG_INF : s[j * ps + i];
        if (mk) F_(apply_mask)(mk, moff + i0 * msl + j0 * mss, msl, mss, bq, bk, s, ps, w);
        F_(softmax_step)(w, s, ps, bq, bk);
        const WB_T *vb = F_(rows)(v, voff, vsl, vse, j0, bk, Ev, v_in_place, w->vp, evp, &vsr);
        F_(values)(s, ps, bq, vb, vsr, bk, w->o, evp, w->alpha);
    }
    const Py_ssize_t ooff = (b * L + i0) * Ev;
    for (Py_ssize_t r = 0; r < bq; r++) {
        const WB_T inv = w->l[r] == 0 ? 0 : 1 / w->l[r];
        for (Py_ssize_t d = 0; d < Ev; d++) w->row[d] = w->o[r * evp + d] * inv;
        WB_STORE(q->dtype, c->out, ooff + r * Ev, w->row, Ev);
    }
    if (c->lse) { /* l is relative to the final max m (finite wherever l > 0) */
        WB_T *lse = (WB_T *)c->lse + b * L + i0;
        for (Py_ssize_t r = 0; r < bq; r++)
            lse[r] = w->l[r] == 0 ? WB_NEG_INF : w->m[r] + WB_LOG(w->l[r]);
    }
}

/* Every (batch item, query block) of ``c`` on ``threads`` threads; nonzero when out of memory. */
static int F_(attend)(const attn_ctx *c, Py_ssize_t items, int threads) {
    const Py_ssize_t blocks = (c->L + WB_BQ - 1) / WB_BQ;
    int failed = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
#endif
    {
        F_(scratch) w;
        const int ok = F_(scratch_alloc)(&w, c) == 0;
        failed = !ok;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (Py_ssize_t it = 0; it < items; it++)
            if (ok) F_(attend_block)(c, it / blocks, (it % blocks) * WB_BQ, &w);
        if (ok) free(w.base);
    }
    (void)threads;
    return failed;
}

#undef WB_SCORE_CASE
#undef WB_VALUE_CASE
#undef WB_NEG_INF
#undef F_
#undef WB_VL
#undef WB_T
#undef WB_V
#undef WB_VFMA
#undef WB_EXP
#undef WB_LOG
#undef WB_EXP_MIN
#undef WB_MASK_TILES
#undef WB_DT
#undef WB_SUFFIX
#undef WB_LOAD
#undef WB_STORE
