/* Row kernels for one compute type: rows.c includes this file once per type with WB_T (float
 * or double), WB_DT (its dtype), WB_SUFFIX (names), WB_LOAD (a strided line as WB_T) and
 * WB_STORE (a WB_T line into a contiguous output of any float dtype) defined; they are
 * undefined at the end. */

#define F_(name) WB_SUFFIX(name)

static WB_T F_(lane_sum)(const WB_T *restrict x, Py_ssize_t n) {
    WB_T acc[WB_LANES] = {0};
    Py_ssize_t i = 0;
    for (; i + WB_LANES <= n; i += WB_LANES)
        for (int j = 0; j < WB_LANES; j++) acc[j] += x[i + j];
    WB_T s = 0;
    for (int j = 0; j < WB_LANES; j++) s += acc[j];
    for (; i < n; i++) s += x[i];
    return s;
}

/* Centred sum of squares sum((x - c)^2). */
static WB_T F_(lane_ss)(const WB_T *restrict x, Py_ssize_t n, WB_T c) {
    WB_T acc[WB_LANES] = {0};
    Py_ssize_t i = 0;
    for (; i + WB_LANES <= n; i += WB_LANES)
        for (int j = 0; j < WB_LANES; j++) {
            const WB_T d = x[i + j] - c;
            acc[j] += d * d;
        }
    WB_T s = 0;
    for (int j = 0; j < WB_LANES; j++) s += acc[j];
    for (; i < n; i++) s += (x[i] - c) * (x[i] - c);
    return s;
}

/* ---- group_norm: x (N, C, S), G groups of C/G channels ----------------------------------- */
/* Buffer: a channel's line, its output, and the weight and bias (C each). */
static void F_(group_norm_lines)(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1,
                                 void *buf) {
    const group_norm_ctx *c = ctx;
    const wb_operand *x = c->x;
    const Py_ssize_t C = x->shape[1], S = x->shape[2], G = c->groups, cpg = C / G;
    WB_T *line = buf, *o = line + S, *w = o + S, *b = w + C;
    const wb_operand *cw = c->w, *cb = c->b;
    const WB_T *wp = cw ? WB_LOAD(cw->dtype, cw->data, cw->offset, cw->strides[0], C, w) : NULL;
    const WB_T *bp = cb ? WB_LOAD(cb->dtype, cb->data, cb->offset, cb->strides[0], C, b) : NULL;
    const double count = (double)(cpg * S);
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t n = u / G, ch0 = (u % G) * cpg;
        const Py_ssize_t off = x->offset + n * x->strides[0];
        const Py_ssize_t cs = x->strides[1], sp = x->strides[2];
        double total = 0; /* per-channel sums are short; their total is kept in f64 */
        for (Py_ssize_t ch = ch0; ch < ch0 + cpg; ch++)
            total += F_(lane_sum)(WB_LOAD(x->dtype, x->data, off + ch * cs, sp, S, line), S);
        const WB_T mean = (WB_T)(total / count);
        double ss = 0; /* a second pass, centred: no cancellation */
        for (Py_ssize_t ch = ch0; ch < ch0 + cpg; ch++)
            ss += F_(lane_ss)(WB_LOAD(x->dtype, x->data, off + ch * cs, sp, S, line), S, mean);
        const WB_T rstd = (WB_T)(1.0 / sqrt(ss / count + c->eps));
        ((WB_T *)c->mean)[u] = mean;
        ((WB_T *)c->rstd)[u] = rstd;
        for (Py_ssize_t ch = ch0; ch < ch0 + cpg; ch++) {
            const WB_T *v = WB_LOAD(x->dtype, x->data, off + ch * cs, sp, S, line);
            const WB_T wc = wp ? wp[ch] : 1, bc = bp ? bp[ch] : 0;
            const Py_ssize_t at = (n * C + ch) * S;
            WB_T *dst = x->dtype == WB_DT ? (WB_T *)c->out + at : o;
            for (Py_ssize_t i = 0; i < S; i++) dst[i] = (v[i] - mean) * rstd * wc + bc;
            if (dst == o) WB_STORE(x->dtype, c->out, at, o, S);
        }
    }
}

/* ---- rope: pairs of x (..., D) rotated by cos/sin (..., D/2) ----------------------------- */
/* Buffer: a line of x, its output, and a line each of cos and sin. */
static void F_(rope_lines)(const void *ctx, int t, Py_ssize_t l0, Py_ssize_t l1, void *buf) {
    const rope_ctx *c = ctx;
    const wb_operand *x = c->x, *cs = c->cos, *sn = c->sin;
    const int last = x->ndim - 1;
    const Py_ssize_t D = x->shape[last], h = D / 2;
    WB_T *line = buf, *ob = line + D, *cb = ob + D, *sb = cb + h;
    for (Py_ssize_t l = l0; l < l1; l++) {
        Py_ssize_t xi = x->offset, ci = cs->offset, si = sn->offset, rest = l;
        for (int d = last - 1; d >= 0; d--) {
            const Py_ssize_t idx = rest % x->shape[d];
            rest /= x->shape[d];
            xi += idx * x->strides[d];
            ci += idx * cs->strides[d];
            si += idx * sn->strides[d];
        }
        const WB_T *v = WB_LOAD(x->dtype, x->data, xi, x->strides[last], D, line);
        const WB_T *co = WB_LOAD(cs->dtype, cs->data, ci, cs->strides[last], h, cb);
        const WB_T *si_ = WB_LOAD(sn->dtype, sn->data, si, sn->strides[last], h, sb);
        WB_T *o = x->dtype == WB_DT ? (WB_T *)c->out + l * D : ob;
        if (c->interleaved) {
            for (Py_ssize_t i = 0; i < h; i++) {
                const WB_T x1 = v[2 * i], x2 = v[2 * i + 1];
                o[2 * i] = x1 * co[i] - x2 * si_[i];
                o[2 * i + 1] = x2 * co[i] + x1 * si_[i];
            }
        } else {
            for (Py_ssize_t i = 0; i < h; i++) {
                const WB_T x1 = v[i], x2 = v[i + h];
                o[i] = x1 * co[i] - x2 * si_[i];
                o[i + h] = x2 * co[i] + x1 * si_[i];
            }
        }
        if (o == ob) WB_STORE(x->dtype, c->out, l * D, o, D);
    }
}

#undef F_
#undef WB_T
#undef WB_DT
#undef WB_SUFFIX
#undef WB_LOAD
#undef WB_STORE
