/* Fused row ops in f32 registers (f32, f16 and bf16 storage): softmax / log_softmax along any
 * dim, layer_norm and rms_norm over the last dim. One line is read into an f32 buffer (or used
 * in place when it already is contiguous f32), reduced with 16 independent partial sums (so the
 * compiler vectorises it without reassociating a single sum), and written back once. Lines are
 * spread over the threads. */
#include "convert.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>

#define WB_LANES 16
/* Elements above which a row op runs on several threads. */
#define WB_ROWS_PAR (1 << 15)

static float lane_sum(const float *restrict x, Py_ssize_t n) {
    float acc[WB_LANES] = {0};
    Py_ssize_t i = 0;
    for (; i + WB_LANES <= n; i += WB_LANES)
        for (int j = 0; j < WB_LANES; j++) acc[j] += x[i + j];
    float s = 0.0f;
    for (int j = 0; j < WB_LANES; j++) s += acc[j];
    for (; i < n; i++) s += x[i];
    return s;
}

static float lane_max(const float *restrict x, Py_ssize_t n) {
    float acc[WB_LANES];
    for (int j = 0; j < WB_LANES; j++) acc[j] = -__builtin_inff();
    Py_ssize_t i = 0;
    for (; i + WB_LANES <= n; i += WB_LANES)
        for (int j = 0; j < WB_LANES; j++) {
            const float v = x[i + j];
            acc[j] = (v > acc[j] || v != v) ? v : acc[j]; /* NaN wins, as numpy's max */
        }
    float m = -__builtin_inff();
    for (int j = 0; j < WB_LANES; j++) m = (acc[j] > m || acc[j] != acc[j]) ? acc[j] : m;
    for (; i < n; i++) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;
    return m;
}

/* Centred sum of squares sum((x - c)^2). */
static float lane_ss(const float *restrict x, Py_ssize_t n, float c) {
    float acc[WB_LANES] = {0};
    Py_ssize_t i = 0;
    for (; i + WB_LANES <= n; i += WB_LANES)
        for (int j = 0; j < WB_LANES; j++) {
            const float d = x[i + j] - c;
            acc[j] += d * d;
        }
    float s = 0.0f;
    for (int j = 0; j < WB_LANES; j++) s += acc[j];
    for (; i < n; i++) s += (x[i] - c) * (x[i] - c);
    return s;
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
} softmax_ctx;

static void softmax_lines(const softmax_ctx *c, Py_ssize_t l0, Py_ssize_t l1, float *buf) {
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
        const float sum = lane_sum(r, n);
        if (c->log) {
            const float shift = m + wb_logf(sum);
            for (Py_ssize_t i = 0; i < n; i++) r[i] = v[i] - shift;
        } else {
            const float inv = 1.0f / sum;
            for (Py_ssize_t i = 0; i < n; i++) r[i] *= inv;
        }
        if (r == e) {
            if (ostride == 1) {
                wb_store_f32(c->out_dtype, c->out, o, r, n);
            } else {
                for (Py_ssize_t i = 0; i < n; i++) {
                    if (c->out_dtype == WB_F32) ((float *)c->out)[o + i * ostride] = r[i];
                    else if (c->out_dtype == WB_BF16)
                        ((uint16_t *)c->out)[o + i * ostride] = wb_f32_to_bf16(r[i]);
                    else ((uint16_t *)c->out)[o + i * ostride] = wb_f32_to_f16(r[i]);
                }
            }
        }
    }
}

static int is_f32ish(int dt) { return dt == WB_F32 || dt == WB_F16 || dt == WB_BF16; }

static int thread_count(Py_ssize_t work, Py_ssize_t lines) {
    int t = work >= WB_ROWS_PAR ? wb_get_num_threads() : 1;
    return t > lines ? (int)(lines > 0 ? lines : 1) : t;
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
    if (!is_f32ish(x.dtype) || out.dtype != x.dtype) {
        PyErr_SetString(PyExc_TypeError, "softmax: unsupported dtype combination");
        return NULL;
    }
    const Py_ssize_t numel = wb_numel(x.ndim, x.shape), n = x.shape[dim];
    if (numel == 0) Py_RETURN_NONE;
    const Py_ssize_t lines = numel / n;
    softmax_ctx c = {&x, (int)dim, log, out.data, out.dtype};
    const int threads = thread_count(numel, lines);
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
#endif
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        float *buf = malloc(sizeof(float) * 2 * (size_t)n);
        if (buf) softmax_lines(&c, lines * t / nt, lines * (t + 1) / nt, buf);
        else failed = 1;
        free(buf);
    }
    Py_END_ALLOW_THREADS
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

typedef struct {
    const wb_operand *x, *w, *b; /* w, b: NULL or 1-d of the last dim */
    char *out;
    float *mean, *rstd; /* per row; mean NULL for rms_norm */
    float eps;
} norm_ctx;

static void norm_rows(const norm_ctx *c, Py_ssize_t r0, Py_ssize_t r1, float *buf) {
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
        const float mean = c->mean ? lane_sum(v, n) / (float)n : 0.0f;
        const float rstd = 1.0f / sqrtf(lane_ss(v, n, mean) / (float)n + c->eps);
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

static int optional_vector(PyObject *const *args, Py_ssize_t n, wb_operand *v, const wb_operand **p,
                           const char *what) {
    *p = NULL;
    if (args[0] == Py_None) return 0;
    PyObject *shape = Py_BuildValue("(n)", n);
    if (!shape) return -1;
    int rc = wb_operand_parse(v, args[0], args[1], shape, args[2], what);
    Py_DECREF(shape);
    if (rc < 0) return -1;
    if (!is_f32ish(v->dtype)) {
        PyErr_Format(PyExc_TypeError, "%s: unsupported dtype", what);
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
    if (optional_vector(args + 4, n, &w, &wp, "weight") < 0 ||
        optional_vector(args + 7, n, &b, &bp, "bias") < 0)
        return NULL;
    double eps = PyFloat_AsDouble(args[10]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    if (wb_output_parse(&out, args[11], x.ndim, x.shape) < 0 ||
        wb_output_parse(&rstd, args[13], x.ndim - 1, x.shape) < 0)
        return NULL;
    const int center = args[12] != Py_None;
    if (center && wb_output_parse(&mean, args[12], x.ndim - 1, x.shape) < 0) return NULL;
    if (!is_f32ish(x.dtype) || out.dtype != x.dtype || rstd.dtype != WB_F32 ||
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
    const int threads = thread_count(rows * n, rows);
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
#endif
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        float *buf = malloc(sizeof(float) * 4 * (size_t)n);
        if (buf) norm_rows(&c, rows * t / nt, rows * (t + 1) / nt, buf);
        else failed = 1;
        free(buf);
    }
    Py_END_ALLOW_THREADS
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_rows_methods[] = {
    {"softmax", (PyCFunction)(void (*)(void))py_softmax, METH_FASTCALL,
     "softmax(x, offset, shape, strides, dim, out, log): (log_)softmax along dim."},
    {"norm", (PyCFunction)(void (*)(void))py_norm, METH_FASTCALL,
     "norm(x, off, shape, strides, w, w_off, w_strides, b, b_off, b_strides, eps, out, mean, "
     "rstd): layer_norm (mean an array) or rms_norm (mean None) over the last dim."},
    {NULL, NULL, 0, NULL},
};
