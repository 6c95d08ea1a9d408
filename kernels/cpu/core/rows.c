/* Fused row ops: softmax / log_softmax along any dim, layer_norm and rms_norm over the last dim
 * (f32, f16 and bf16 storage, in f32 registers), group_norm and rope (also f64, in f64). One
 * line is read into a buffer of the compute type (or used in place when it already is
 * contiguous), reduced with 16 independent partial sums (so the compiler vectorises it without
 * reassociating a single sum), and written back once, rounded once for f16 / bf16. Lines are
 * spread over the threads. A softmax along a dim with contiguous dims after it goes by column
 * blocks instead: 64 adjacent lines at a time, vectorised across them. */
#include "convert.h"
#include "threads.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#define WB_LANES 16
/* Elements above which a row op runs on several threads. */
#define WB_ROWS_PAR (1 << 15)

/* max of x (n), in vector registers where the ISA has them (written as a select, gcc had left
 * this loop scalar: half a 4096² softmax's time). NaN elements may be passed over: softmax
 * only subtracts the max, and a NaN's exp makes the line's sum, so the whole line, NaN. */
static float lane_max(const float *restrict x, Py_ssize_t n) {
    Py_ssize_t i = 0;
    float m = -__builtin_inff();
#if defined(__AVX512F__)
    __m512 acc = _mm512_set1_ps(-__builtin_inff());
    for (; i + 16 <= n; i += 16) acc = _mm512_max_ps(acc, _mm512_loadu_ps(x + i));
    m = _mm512_reduce_max_ps(acc);
#elif defined(__AVX__)
    __m256 acc = _mm256_set1_ps(-__builtin_inff());
    for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(acc, _mm256_loadu_ps(x + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (int j = 0; j < 8; j++) m = lanes[j] > m ? lanes[j] : m;
#endif
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

typedef struct {
    const wb_operand *x, *w, *b; /* x (N, C, S); w, b: NULL or (C,) */
    Py_ssize_t groups;
    char *out;          /* contiguous (N, C, S), x's dtype */
    void *mean, *rstd;  /* (N, G), the compute type */
    double eps;
} group_norm_ctx;

typedef struct {
    const wb_operand *x, *cos, *sin; /* x (..., D); cos, sin (..., D/2) */
    int interleaved;                 /* pairs (2i, 2i+1), else (i, i + D/2) */
    char *out;                       /* contiguous, x's dtype */
} rope_ctx;

#define WB_T float
#define WB_DT WB_F32
#define WB_SUFFIX(name) name##_f32
#define WB_LOAD(dt, base, off, stride, n, buf) wb_load_f32(dt, base, off, stride, n, buf)
#define WB_STORE wb_store_line_f32
#include "rows_impl.h"

#define WB_T double
#define WB_DT WB_F64
#define WB_SUFFIX(name) name##_f64
#define WB_LOAD(dt, base, off, stride, n, buf) wb_load_f64(base, off, stride, n, buf)
#define WB_STORE wb_store_line_f64
#include "rows_impl.h"

/* ``fn`` over lines [0, lines) on the threads (several when there are at least WB_ROWS_PAR
 * elements of ``work``), each thread with its own ``buf_bytes`` buffer. Releases the GIL;
 * returns None, or NULL with MemoryError. */
static PyObject *run_lines(wb_range_fn fn, const void *ctx, Py_ssize_t lines, Py_ssize_t work,
                           size_t buf_bytes) {
    const int threads = wb_threads_for(work, WB_ROWS_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(fn, ctx, lines, threads, buf_bytes ? buf_bytes : 1);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* Line ``l`` of the lines along ``dim``: the element offsets of its first element in the input
 * layout and in the contiguous output. */
static void line_start(const wb_operand *x, int dim, Py_ssize_t l, Py_ssize_t *in, Py_ssize_t *out) {
    Py_ssize_t i0 = x->offset, o0 = 0, ostride = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (d != dim) {
            const Py_ssize_t idx = l % x->shape[d];
            l /= x->shape[d];
            i0 += idx * x->strides[d];
            o0 += idx * ostride;
        }
        ostride *= x->shape[d];
    }
    *in = i0;
    *out = o0;
}

typedef struct {
    const wb_operand *x;
    int dim, log;
    char *out;
    int out_dtype;
    Py_ssize_t inner; /* elements of the dims after ``dim`` (the column path) */
} softmax_ctx;

/* f32 ``r`` (n) into the output of dtype ``dt`` at element ``o``, ``stride`` apart. */
static void store_line(int dt, char *out, Py_ssize_t o, Py_ssize_t stride, const float *r,
                       Py_ssize_t n) {
    if (stride == 1) wb_store_line_f32(dt, out, o, r, n);
    else
        for (Py_ssize_t i = 0; i < n; i++) wb_store_line_f32(dt, out, o + i * stride, r + i, 1);
}

static void softmax_lines(const void *ctx, int t, Py_ssize_t l0, Py_ssize_t l1, void *vbuf) {
    const softmax_ctx *c = ctx;
    float *buf = vbuf;
    const wb_operand *x = c->x;
    const Py_ssize_t n = x->shape[c->dim], s = x->strides[c->dim];
    Py_ssize_t ostride = 1;
    for (int d = c->dim + 1; d < x->ndim; d++) ostride *= x->shape[d];
    float *e = buf + n;
    for (Py_ssize_t l = l0; l < l1; l++) {
        Py_ssize_t in, o;
        line_start(x, c->dim, l, &in, &o);
        const float *v = wb_load_f32(x->dtype, x->data, in, s, n, buf);
        const float m = lane_max(v, n);
        /* direct into the output when it is contiguous f32 along the line */
        float *r = (c->out_dtype == WB_F32 && ostride == 1) ? (float *)c->out + o : e;
        for (Py_ssize_t i = 0; i < n; i++) r[i] = wb_expf(v[i] - m);
        const float sum = lane_sum_f32(r, n);
        if (c->log) {
            const float shift = m + wb_logf(sum);
            for (Py_ssize_t i = 0; i < n; i++) r[i] = v[i] - shift;
        } else {
            const float inv = 1.0f / sum;
            for (Py_ssize_t i = 0; i < n; i++) r[i] *= inv;
        }
        if (r == e) store_line(c->out_dtype, c->out, o, ostride, r, n);
    }
}

/* Adjacent lines of one column block, and the longest dim the column path takes. */
#define WB_COL_BLOCK 64
#define WB_COL_MAX_N 1024

/* softmax along a dim whose inner dims (those after it) are contiguous in x: units of up to
 * WB_COL_BLOCK adjacent lines (inner indices j0.. of one outer index), so that every load and
 * store is a contiguous run along the inner dims, not n single elements a stride apart (the
 * DFL softmax of YOLOv8, over 16 of (1, 4, 16, 8400), ran 6x torch's time that way). */
static void softmax_columns(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *vbuf) {
    (void)t;
    const softmax_ctx *c = ctx;
    const wb_operand *x = c->x;
    const int dim = c->dim, dt = x->dtype, odt = c->out_dtype, log = c->log;
    const Py_ssize_t n = x->shape[dim], s = x->strides[dim], inner = c->inner;
    const Py_ssize_t per = (inner + WB_COL_BLOCK - 1) / WB_COL_BLOCK;
    float *e = vbuf;                   /* n × WB_COL_BLOCK results */
    float *v = e + n * WB_COL_BLOCK;   /* n × WB_COL_BLOCK inputs widened to f32 */
    const float **rows = (const float **)(v + n * WB_COL_BLOCK);
    float m[WB_COL_BLOCK], shift[WB_COL_BLOCK];
    double sum[WB_COL_BLOCK]; /* f64: a sequential sum over up to 1024 lines stays exact-ish */
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t j0 = (u % per) * WB_COL_BLOCK;
        const Py_ssize_t b = inner - j0 < WB_COL_BLOCK ? inner - j0 : WB_COL_BLOCK;
        Py_ssize_t in, o;
        line_start(x, dim, u / per * inner + j0, &in, &o);
        for (Py_ssize_t j = 0; j < b; j++) m[j] = -__builtin_inff(), sum[j] = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) {
            const float *r = rows[i] = wb_load_f32(dt, x->data, in + i * s, 1, b,
                                                   v + i * WB_COL_BLOCK);
            for (Py_ssize_t j = 0; j < b; j++) /* NaN may be passed over, as in lane_max */
                m[j] = r[j] > m[j] ? r[j] : m[j];
        }
        /* the row pointers in locals marked restrict: stores through ei could otherwise
         * alias the pointer array, which keeps gcc from vectorising over j */
        for (Py_ssize_t i = 0; i < n; i++) {
            const float *restrict r = rows[i];
            float *restrict ei = e + i * WB_COL_BLOCK;
            for (Py_ssize_t j = 0; j < b; j++) {
                ei[j] = wb_expf(r[j] - m[j]);
                sum[j] += ei[j];
            }
        }
        for (Py_ssize_t j = 0; j < b; j++) /* the shift, or 1 / Σ */
            shift[j] = log ? m[j] + wb_logf((float)sum[j]) : (float)(1.0 / sum[j]);
        for (Py_ssize_t i = 0; i < n; i++) {
            const float *restrict r = rows[i];
            float *restrict ei = e + i * WB_COL_BLOCK;
            if (log)
                for (Py_ssize_t j = 0; j < b; j++) ei[j] = r[j] - shift[j];
            else
                for (Py_ssize_t j = 0; j < b; j++) ei[j] *= shift[j];
            wb_store_line_f32(odt, c->out, o + i * inner, ei, b);
        }
    }
}

/* softmax(x, offset, shape, strides, dim, out, log) */
static PyObject *py_softmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "softmax: expected 7 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, out;
    if (wb_operand_parse(&x, args[0], args[1], args[2], args[3], "x") < 0) return NULL;
    long dim = PyLong_AsLong(args[4]);
    int log = PyObject_IsTrue(args[6]);
    if ((dim == -1 && PyErr_Occurred()) || log < 0) return NULL;
    if (dim < 0 || dim >= x.ndim) {
        PyErr_Format(PyExc_ValueError, "softmax: dim %ld out of range for %d dims", dim, x.ndim);
        return NULL;
    }
    if (wb_output_parse(&out, args[5], x.ndim, x.shape) < 0) return NULL;
    if (!wb_is_f32ish(x.dtype) || out.dtype != x.dtype) {
        PyErr_SetString(PyExc_TypeError, "softmax: unsupported dtype combination");
        return NULL;
    }
    const Py_ssize_t numel = wb_numel(x.ndim, x.shape), n = x.shape[dim];
    if (numel == 0) Py_RETURN_NONE;
    const Py_ssize_t lines = numel / n;
    softmax_ctx c = {&x, (int)dim, log, out.data, out.dtype, 1};
    int columns = n <= WB_COL_MAX_N; /* the dims after dim contiguous, at least 16 elements */
    for (int d = x.ndim - 1; d > dim; d--) {
        if (x.shape[d] != 1 && x.strides[d] != c.inner) columns = 0;
        c.inner *= x.shape[d];
    }
    if (columns && c.inner >= 16) {
        const size_t block = sizeof(float) * 2 * WB_COL_BLOCK + sizeof(float *);
        return run_lines(softmax_columns, &c, lines / c.inner * ((c.inner + WB_COL_BLOCK - 1) /
                         WB_COL_BLOCK), numel, block * (size_t)n);
    }
    return run_lines(softmax_lines, &c, lines, numel, sizeof(float) * 2 * (size_t)n);
}

typedef struct {
    const wb_operand *x, *w, *b; /* w, b: NULL or 1-d of the last dim */
    char *out;
    float *mean, *rstd; /* per row; mean NULL for rms_norm */
    float eps;
} norm_ctx;

static void norm_rows(const void *ctx, int t, Py_ssize_t r0, Py_ssize_t r1, void *vbuf) {
    const norm_ctx *c = ctx;
    float *buf = vbuf;
    const wb_operand *x = c->x;
    const int last = x->ndim - 1;
    const Py_ssize_t n = x->shape[last];
    float *w = buf + n, *b = buf + 2 * n, *o = buf + 3 * n;
    const float *wp = c->w ? wb_load_f32(c->w->dtype, c->w->data, c->w->offset, c->w->strides[0], n, w) : NULL;
    const float *bp = c->b ? wb_load_f32(c->b->dtype, c->b->data, c->b->offset, c->b->strides[0], n, b) : NULL;
    for (Py_ssize_t r = r0; r < r1; r++) {
        Py_ssize_t in, out;
        line_start(x, last, r, &in, &out);
        const float *v = wb_load_f32(x->dtype, x->data, in, x->strides[last], n, buf);
        const float mean = c->mean ? lane_sum_f32(v, n) / (float)n : 0.0f;
        const float rstd = 1.0f / sqrtf(lane_ss_f32(v, n, mean) / (float)n + c->eps);
        if (c->mean) c->mean[r] = mean;
        c->rstd[r] = rstd;
        float *dst = x->dtype == WB_F32 ? (float *)c->out + out : o;
        for (Py_ssize_t i = 0; i < n; i++) dst[i] = (v[i] - mean) * rstd;
        if (wp)
            for (Py_ssize_t i = 0; i < n; i++) dst[i] *= wp[i];
        if (bp)
            for (Py_ssize_t i = 0; i < n; i++) dst[i] += bp[i];
        if (dst == o) wb_store_f32(x->dtype, c->out, out, o, n);
    }
}

/* An optional 1-d operand of ``n`` elements and dtype ``dtype`` (args: array or None, offset,
 * strides). */
static int optional_vector(PyObject *const *args, Py_ssize_t n, int dtype, wb_operand *v,
                           const wb_operand **p, const char *what) {
    *p = NULL;
    if (args[0] == Py_None) return 0;
    PyObject *shape = Py_BuildValue("(n)", n);
    if (!shape) return -1;
    int rc = wb_operand_parse(v, args[0], args[1], shape, args[2], what);
    Py_DECREF(shape);
    if (rc < 0) return -1;
    if (v->dtype != dtype) {
        PyErr_Format(PyExc_TypeError, "%s: expected the input's dtype", what);
        return -1;
    }
    *p = v;
    return 0;
}

/* norm(x, offset, shape, strides, w, w_offset, w_strides, b, b_offset, b_strides, eps, out,
 *      mean, rstd): layer_norm (mean given) or rms_norm (mean None) over the last dim. */
static PyObject *py_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 14) {
        PyErr_Format(PyExc_TypeError, "norm: expected 14 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, out, w, b, mean, rstd;
    if (wb_operand_parse(&x, args[0], args[1], args[2], args[3], "x") < 0) return NULL;
    if (x.ndim < 1) {
        PyErr_SetString(PyExc_ValueError, "norm: expected at least 1 dim");
        return NULL;
    }
    const Py_ssize_t n = x.shape[x.ndim - 1], rows = wb_numel(x.ndim - 1, x.shape);
    const wb_operand *wp, *bp;
    if (optional_vector(args + 4, n, x.dtype, &w, &wp, "weight") < 0 ||
        optional_vector(args + 7, n, x.dtype, &b, &bp, "bias") < 0)
        return NULL;
    double eps = PyFloat_AsDouble(args[10]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    if (wb_output_parse(&out, args[11], x.ndim, x.shape) < 0 ||
        wb_output_parse(&rstd, args[13], x.ndim - 1, x.shape) < 0)
        return NULL;
    const int center = args[12] != Py_None;
    if (center && wb_output_parse(&mean, args[12], x.ndim - 1, x.shape) < 0) return NULL;
    if (!wb_is_f32ish(x.dtype) || out.dtype != x.dtype || rstd.dtype != WB_F32 ||
        (center && mean.dtype != WB_F32)) {
        PyErr_SetString(PyExc_TypeError, "norm: unsupported dtype combination");
        return NULL;
    }
    if (rows == 0 || n == 0) {
        PyErr_SetString(PyExc_ValueError, "norm: empty rows");
        return NULL;
    }
    norm_ctx c = {&x, wp, bp, out.data, center ? (float *)mean.data : NULL, (float *)rstd.data,
                  (float)eps};
    return run_lines(norm_rows, &c, rows, rows * n, sizeof(float) * 4 * (size_t)n);
}


/* group_norm(x, offset, shape, strides, groups, w, w_offset, w_strides, b, b_offset, b_strides,
 *            eps, out, mean, rstd): x (N, C, S); mean, rstd (N, G) in the compute type. */
static PyObject *py_group_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 15) {
        PyErr_Format(PyExc_TypeError, "group_norm: expected 15 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, out, w, b, mean, rstd;
    if (wb_operand_parse(&x, args[0], args[1], args[2], args[3], "x") < 0) return NULL;
    const Py_ssize_t groups = PyLong_AsSsize_t(args[4]);
    if (groups == -1 && PyErr_Occurred()) return NULL;
    if (x.ndim != 3 || groups < 1 || x.shape[1] % groups) {
        PyErr_Format(PyExc_ValueError,
                     "group_norm: expected x (N, C, S) with C a multiple of groups=%zd", groups);
        return NULL;
    }
    if (!wb_is_float(x.dtype)) {
        PyErr_SetString(PyExc_TypeError, "group_norm: unsupported dtype");
        return NULL;
    }
    const Py_ssize_t N = x.shape[0], C = x.shape[1], S = x.shape[2];
    const wb_operand *wp, *bp;
    if (optional_vector(args + 5, C, x.dtype, &w, &wp, "weight") < 0 ||
        optional_vector(args + 8, C, x.dtype, &b, &bp, "bias") < 0)
        return NULL;
    const double eps = PyFloat_AsDouble(args[11]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    const Py_ssize_t stats[2] = {N, groups};
    if (wb_output_parse(&out, args[12], 3, x.shape) < 0 ||
        wb_output_parse(&mean, args[13], 2, stats) < 0 ||
        wb_output_parse(&rstd, args[14], 2, stats) < 0)
        return NULL;
    const int cdt = x.dtype == WB_F64 ? WB_F64 : WB_F32;
    if (out.dtype != x.dtype || mean.dtype != cdt || rstd.dtype != cdt) {
        PyErr_SetString(PyExc_TypeError, "group_norm: unsupported dtype combination");
        return NULL;
    }
    if (N * C * S == 0) {
        PyErr_SetString(PyExc_ValueError, "group_norm: empty groups");
        return NULL;
    }
    group_norm_ctx c = {&x, wp, bp, groups, out.data, mean.data, rstd.data, eps};
    const size_t buf = (size_t)wb_itemsize[cdt] * (size_t)(2 * S + 2 * C);
    return run_lines(cdt == WB_F64 ? group_norm_lines_f64 : group_norm_lines_f32, &c, N * groups,
                     N * C * S, buf);
}

/* rope(x, offset, shape, strides, cos, c_offset, c_strides, sin, s_offset, s_strides,
 *      interleaved, out): x (..., D), cos/sin (..., D/2) of x's dtype (broadcast by strides). */
static PyObject *py_rope(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 12) {
        PyErr_Format(PyExc_TypeError, "rope: expected 12 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, cs, sn, out;
    if (wb_operand_parse(&x, args[0], args[1], args[2], args[3], "x") < 0) return NULL;
    if (x.ndim < 1 || x.shape[x.ndim - 1] % 2) {
        PyErr_SetString(PyExc_ValueError, "rope: expected x (..., D) with an even D");
        return NULL;
    }
    const int last = x.ndim - 1;
    const Py_ssize_t D = x.shape[last];
    PyObject *half = PyTuple_New(x.ndim);
    if (!half) return NULL;
    for (int d = 0; d < x.ndim; d++) {
        PyObject *n = PyLong_FromSsize_t(d == last ? D / 2 : x.shape[d]);
        if (!n) {
            Py_DECREF(half);
            return NULL;
        }
        PyTuple_SET_ITEM(half, d, n);
    }
    const int rc = wb_operand_parse(&cs, args[4], args[5], half, args[6], "cos") < 0 ||
                   wb_operand_parse(&sn, args[7], args[8], half, args[9], "sin") < 0;
    Py_DECREF(half);
    const int interleaved = rc ? -1 : PyObject_IsTrue(args[10]);
    if (rc || interleaved < 0 || wb_output_parse(&out, args[11], x.ndim, x.shape) < 0) return NULL;
    if (!wb_is_float(x.dtype) || cs.dtype != x.dtype || sn.dtype != x.dtype || out.dtype != x.dtype) {
        PyErr_SetString(PyExc_TypeError, "rope: x, cos, sin and out must share one float dtype");
        return NULL;
    }
    const Py_ssize_t numel = wb_numel(x.ndim, x.shape);
    if (numel == 0) Py_RETURN_NONE;
    rope_ctx c = {&x, &cs, &sn, interleaved, out.data};
    const int f64 = x.dtype == WB_F64;
    const size_t buf = (size_t)(f64 ? 8 : 4) * (size_t)(3 * D);
    return run_lines(f64 ? rope_lines_f64 : rope_lines_f32, &c, numel / D, numel, buf);
}

/* ---- backward passes ---------------------------------------------------------------------- */
typedef struct {
    const wb_operand *y, *g; /* the forward's output and the gradient, one shape */
    int dim, log;
    char *out; /* contiguous, y's dtype */
} softmax_bw_ctx;

/* Per line: softmax gx = y (g - Σ g y); log_softmax gx = g - exp(y) Σ g. */
static void softmax_bw_lines(const void *ctx, int t, Py_ssize_t l0, Py_ssize_t l1, void *vbuf) {
    const softmax_bw_ctx *c = ctx;
    const wb_operand *y = c->y, *g = c->g;
    const Py_ssize_t n = y->shape[c->dim];
    float *by = vbuf, *bg = by + n, *o = bg + n;
    Py_ssize_t ostride = 1;
    for (int d = c->dim + 1; d < y->ndim; d++) ostride *= y->shape[d];
    for (Py_ssize_t l = l0; l < l1; l++) {
        Py_ssize_t yin, gin, out;
        line_start(y, c->dim, l, &yin, &out);
        line_start(g, c->dim, l, &gin, &out);
        const float *yv = wb_load_f32(y->dtype, y->data, yin, y->strides[c->dim], n, by);
        const float *gv = wb_load_f32(g->dtype, g->data, gin, g->strides[c->dim], n, bg);
        if (c->log) {
            const float s = lane_sum_f32(gv, n);
            for (Py_ssize_t i = 0; i < n; i++) o[i] = gv[i] - wb_expf(yv[i]) * s;
        } else {
            for (Py_ssize_t i = 0; i < n; i++) o[i] = gv[i] * yv[i];
            const float s = lane_sum_f32(o, n);
            for (Py_ssize_t i = 0; i < n; i++) o[i] = yv[i] * (gv[i] - s);
        }
        store_line(y->dtype, c->out, out, ostride, o, n);
    }
}

/* The gradient operand g: the layout (offset, strides) of an array of ``x``'s shape and dtype. */
static int parse_grad(wb_operand *g, PyObject *const *args, PyObject *shape, const wb_operand *x,
                      const char *what) {
    if (wb_operand_parse(g, args[0], args[1], shape, args[2], "g") < 0) return -1;
    if (g->dtype != x->dtype) {
        PyErr_Format(PyExc_TypeError, "%s: g must have the input's dtype", what);
        return -1;
    }
    return 0;
}

/* softmax_backward(y, offset, shape, strides, g, g_offset, g_strides, dim, out, log) */
static PyObject *py_softmax_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "softmax_backward: expected 10 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand y, g, out;
    if (wb_operand_parse(&y, args[0], args[1], args[2], args[3], "y") < 0 ||
        parse_grad(&g, args + 4, args[2], &y, "softmax_backward") < 0)
        return NULL;
    const long dim = PyLong_AsLong(args[7]);
    const int log = PyObject_IsTrue(args[9]);
    if ((dim == -1 && PyErr_Occurred()) || log < 0) return NULL;
    if (dim < 0 || dim >= y.ndim) {
        PyErr_Format(PyExc_ValueError, "softmax_backward: dim %ld out of range for %d dims", dim,
                     y.ndim);
        return NULL;
    }
    if (wb_output_parse(&out, args[8], y.ndim, y.shape) < 0) return NULL;
    if (!wb_is_f32ish(y.dtype) || out.dtype != y.dtype) {
        PyErr_SetString(PyExc_TypeError, "softmax_backward: unsupported dtype combination");
        return NULL;
    }
    const Py_ssize_t numel = wb_numel(y.ndim, y.shape), n = y.shape[dim];
    if (numel == 0) Py_RETURN_NONE;
    softmax_bw_ctx c = {&y, &g, (int)dim, log, out.data};
    return run_lines(softmax_bw_lines, &c, numel / n, numel, sizeof(float) * 3 * (size_t)n);
}

typedef struct {
    const wb_operand *x, *g, *w; /* w: NULL or 1-d of the last dim */
    const float *mean, *rstd;    /* per row; mean NULL for rms_norm */
    char *out;
} norm_bw_ctx;

/* Per row, with x̂ = (x - mean) rstd and ĝ = g w:
 *   layer_norm gx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)),
 *   rms_norm   gx = rstd (ĝ - x̂ mean(ĝ x̂)). */
static void norm_bw_rows(const void *ctx, int t, Py_ssize_t r0, Py_ssize_t r1, void *vbuf) {
    const norm_bw_ctx *c = ctx;
    const wb_operand *x = c->x, *g = c->g;
    const int last = x->ndim - 1;
    const Py_ssize_t n = x->shape[last];
    float *bx = vbuf, *bg = bx + n, *bw = bg + n, *xh = bw + n, *bgh = xh + n;
    const wb_operand *cw = c->w;
    const float *wp = cw ? wb_load_f32(cw->dtype, cw->data, cw->offset, cw->strides[0], n, bw) : NULL;
    for (Py_ssize_t r = r0; r < r1; r++) {
        Py_ssize_t xin, gin, out;
        line_start(x, last, r, &xin, &out);
        line_start(g, last, r, &gin, &out);
        const float *xv = wb_load_f32(x->dtype, x->data, xin, x->strides[last], n, bx);
        const float *gv = wb_load_f32(g->dtype, g->data, gin, g->strides[last], n, bg);
        const float mean = c->mean ? c->mean[r] : 0.0f, rstd = c->rstd[r];
        for (Py_ssize_t i = 0; i < n; i++) xh[i] = (xv[i] - mean) * rstd;
        const float *gh = gv; /* ĝ = g without a weight: read in place, no copy */
        if (wp) {
            for (Py_ssize_t i = 0; i < n; i++) bgh[i] = gv[i] * wp[i];
            gh = bgh;
        }
        const float mg = c->mean ? lane_sum_f32(gh, n) / (float)n : 0.0f;
        for (Py_ssize_t i = 0; i < n; i++) bx[i] = gh[i] * xh[i]; /* (xv is read no more) */
        const float mgx = lane_sum_f32(bx, n) / (float)n;
        /* gx over x̂, elementwise in place (gh may be the caller's g, never written) */
        for (Py_ssize_t i = 0; i < n; i++) xh[i] = rstd * (gh[i] - mg - xh[i] * mgx);
        wb_store_line_f32(x->dtype, c->out, out, xh, n);
    }
}

/* norm_backward(x, offset, shape, strides, g, g_offset, g_strides, w, w_offset, w_strides,
 *               mean, rstd, out): the input gradient of layer_norm (mean an array) or rms_norm
 *               (mean None) over the last dim; mean and rstd are the forward's (f32, per row). */
static PyObject *py_norm_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "norm_backward: expected 13 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, g, w, mean, rstd, out;
    if (wb_operand_parse(&x, args[0], args[1], args[2], args[3], "x") < 0) return NULL;
    if (x.ndim < 1 || !wb_is_f32ish(x.dtype)) {
        PyErr_SetString(PyExc_ValueError, "norm_backward: expected x of f32, f16 or bf16 with at "
                                          "least 1 dim");
        return NULL;
    }
    const Py_ssize_t n = x.shape[x.ndim - 1], rows = wb_numel(x.ndim - 1, x.shape);
    const wb_operand *wp;
    if (parse_grad(&g, args + 4, args[2], &x, "norm_backward") < 0 ||
        optional_vector(args + 7, n, x.dtype, &w, &wp, "weight") < 0)
        return NULL;
    const int center = args[10] != Py_None;
    if ((center && wb_output_parse(&mean, args[10], x.ndim - 1, x.shape) < 0) ||
        wb_output_parse(&rstd, args[11], x.ndim - 1, x.shape) < 0 ||
        wb_output_parse(&out, args[12], x.ndim, x.shape) < 0)
        return NULL;
    if (out.dtype != x.dtype || rstd.dtype != WB_F32 || (center && mean.dtype != WB_F32)) {
        PyErr_SetString(PyExc_TypeError, "norm_backward: unsupported dtype combination");
        return NULL;
    }
    if (rows == 0 || n == 0) Py_RETURN_NONE;
    norm_bw_ctx c = {&x, &g, wp, center ? (const float *)mean.data : NULL,
                     (const float *)rstd.data, out.data};
    return run_lines(norm_bw_rows, &c, rows, rows * n, sizeof(float) * 5 * (size_t)n);
}

PyMethodDef wb_rows_methods[] = {
    {"softmax", (PyCFunction)(void (*)(void))py_softmax, METH_FASTCALL,
     "softmax(x, offset, shape, strides, dim, out, log): (log_)softmax along dim."},
    {"norm", (PyCFunction)(void (*)(void))py_norm, METH_FASTCALL,
     "norm(x, off, shape, strides, w, w_off, w_strides, b, b_off, b_strides, eps, out, mean, "
     "rstd): layer_norm (mean an array) or rms_norm (mean None) over the last dim."},
    {"softmax_backward", (PyCFunction)(void (*)(void))py_softmax_backward, METH_FASTCALL,
     "softmax_backward(y, off, shape, strides, g, g_off, g_strides, dim, out, log): the input "
     "gradient of (log_)softmax along dim from its output y and the output gradient g."},
    {"norm_backward", (PyCFunction)(void (*)(void))py_norm_backward, METH_FASTCALL,
     "norm_backward(x, off, shape, strides, g, g_off, g_strides, w, w_off, w_strides, mean, rstd, "
     "out): the input gradient of layer_norm (mean an array) or rms_norm (mean None)."},
    {"group_norm", (PyCFunction)(void (*)(void))py_group_norm, METH_FASTCALL,
     "group_norm(x, off, shape, strides, groups, w, w_off, w_strides, b, b_off, b_strides, eps, "
     "out, mean, rstd): x (N, C, S) normalised per (sample, group of C/groups channels)."},
    {"rope", (PyCFunction)(void (*)(void))py_rope, METH_FASTCALL,
     "rope(x, off, shape, strides, cos, c_off, c_strides, sin, s_off, s_strides, interleaved, "
     "out): pairs of x (..., D) rotated by cos/sin (..., D/2)."},
    {NULL, NULL, 0, NULL},
};
