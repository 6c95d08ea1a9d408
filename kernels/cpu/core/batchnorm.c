/* Batch normalisation in training mode over x (N, C, S) (f32, f16 and bf16 storage, in f32
 * registers): the statistics of each channel run over its N lines of S elements. A channel is
 * one unit of work, so the channels are spread over the threads and every line is read in
 * place when it already is contiguous f32 (else through a per-thread buffer).
 *
 * Forward, per channel: μ = Σx / M (M = N S), σ² = Σ(x - μ)² / M (a second pass, not
 * Σx² - μ²), r = 1 / √(σ² + ε), then y = a x + (β - a μ) with a = γ r: three reads, one write.
 * Backward, per channel: Σg and Σg (x - μ) in one pass, then in a second
 * ∂x = a g + B x + (-a Σg / M - B μ) with B = -a r² Σg (x - μ) / M, which is
 * γ r (g - mean(g) - x̂ mean(g x̂)); ∂γ = r Σg (x - μ), ∂β = Σg.
 * Sums run per element of a line in f32, moved into doubles every WB_BN_FLUSH samples. */
#include "convert.h"
#include "threads.h"

#include <math.h>

/* Samples summed in f32 per element before the sums move into a double. */
#define WB_BN_FLUSH 64
/* Elements above which a batch norm runs on several threads. */
#define WB_BN_PAR (1 << 15)

typedef struct {
    const wb_operand *x, *w, *b; /* x (N, C, S); w, b: NULL or (C,), x's dtype */
    const wb_operand *g;         /* backward: dL/dy (N, C, S), x's dtype */
    char *out;                   /* forward: y; backward: dL/dx or NULL. Contiguous, x's dtype */
    float *mean, *rstd;          /* (C,): written by the forward, read by the backward */
    float *gw, *gb;              /* backward: (C,) */
    float eps;
} bn_ctx;

/* Σ acc (S partial sums) in double; acc is zeroed for the next samples. */
static double flush(float *restrict acc, Py_ssize_t n) {
    double s = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        s += acc[i];
        acc[i] = 0.0f;
    }
    return s;
}

/* Element c of an optional (C,) operand as f32, ``fallback`` when absent. */
static float channel_value(const wb_operand *v, Py_ssize_t c, float fallback) {
    if (!v) return fallback;
    float tmp;
    return *wb_load_f32(v->dtype, v->data, v->offset + c * v->strides[0], 1, 1, &tmp);
}

/* Offset of line (n, c) of an (N, C, S) operand. */
static inline Py_ssize_t line_offset(const wb_operand *t, Py_ssize_t n, Py_ssize_t c) {
    return t->offset + n * t->strides[0] + c * t->strides[1];
}

/* y = a v + s into line ``row`` of the contiguous output (through ``tmp`` unless f32). */
static void store_affine(const bn_ctx *k, Py_ssize_t row, const float *restrict v, float a,
                         float s, float *restrict tmp, Py_ssize_t n) {
    const int dt = k->x->dtype;
    float *dst = dt == WB_F32 ? (float *)k->out + row * n : tmp;
    for (Py_ssize_t i = 0; i < n; i++) dst[i] = a * v[i] + s;
    if (dst == tmp) wb_store_f32(dt, k->out, row * n, tmp, n);
}

/* Each thread's buffer: WB_BN_LINES lines of S floats. A channel's sums run per element of a
 * line (acc[i] += v[i]: vectorised with no reassociation), reduced once per WB_BN_FLUSH
 * samples; the outputs are then written in memory order, sample by sample (channel by channel,
 * a small S would write a line per page). */
#define WB_BN_LINES 4

static void forward_channels(const void *ctx, int t, Py_ssize_t c0, Py_ssize_t c1, void *buf) {
    (void)t;
    const bn_ctx *k = ctx;
    const wb_operand *x = k->x;
    const Py_ssize_t N = x->shape[0], C = x->shape[1], S = x->shape[2], st = x->strides[2];
    float *line = buf, *tmp = line + S, *acc = tmp + S;
    const double count = (double)N * (double)S;
    for (Py_ssize_t c = c0; c < c1; c++) {
        double sum = 0.0, ss = 0.0;
        for (Py_ssize_t i = 0; i < S; i++) acc[i] = 0.0f;
        for (Py_ssize_t n = 0; n < N; n++) {
            const float *v = wb_load_f32(x->dtype, x->data, line_offset(x, n, c), st, S, line);
            for (Py_ssize_t i = 0; i < S; i++) acc[i] += v[i];
            if ((n + 1) % WB_BN_FLUSH == 0) sum += flush(acc, S);
        }
        const float mean = (float)((sum + flush(acc, S)) / count);
        for (Py_ssize_t n = 0; n < N; n++) {
            const float *v = wb_load_f32(x->dtype, x->data, line_offset(x, n, c), st, S, line);
            for (Py_ssize_t i = 0; i < S; i++) acc[i] += (v[i] - mean) * (v[i] - mean);
            if ((n + 1) % WB_BN_FLUSH == 0) ss += flush(acc, S);
        }
        const float rstd = (float)(1.0 / sqrt((ss + flush(acc, S)) / count + k->eps));
        k->mean[c] = mean;
        k->rstd[c] = rstd;
    }
    for (Py_ssize_t n = 0; n < N; n++)
        for (Py_ssize_t c = c0; c < c1; c++) {
            const float a = k->rstd[c] * channel_value(k->w, c, 1.0f);
            const float shift = channel_value(k->b, c, 0.0f) - a * k->mean[c];
            const float *v = wb_load_f32(x->dtype, x->data, line_offset(x, n, c), st, S, line);
            store_affine(k, n * C + c, v, a, shift, tmp, S);
        }
}

static void backward_channels(const void *ctx, int t, Py_ssize_t c0, Py_ssize_t c1, void *buf) {
    (void)t;
    const bn_ctx *k = ctx;
    const wb_operand *x = k->x, *g = k->g;
    const Py_ssize_t N = x->shape[0], C = x->shape[1], S = x->shape[2];
    float *xl = buf, *gl = xl + S, *ag = gl + S, *ax = ag + S;
    const double count = (double)N * (double)S;
    for (Py_ssize_t c = c0; c < c1; c++) {
        const float mean = k->mean[c], rstd = k->rstd[c];
        double sg = 0.0, sgx = 0.0;
        for (Py_ssize_t i = 0; i < S; i++) ag[i] = ax[i] = 0.0f;
        for (Py_ssize_t n = 0; n < N; n++) {
            const float *v = wb_load_f32(x->dtype, x->data, line_offset(x, n, c), x->strides[2],
                                         S, xl);
            const float *d = wb_load_f32(g->dtype, g->data, line_offset(g, n, c), g->strides[2],
                                         S, gl);
            for (Py_ssize_t i = 0; i < S; i++) {
                ag[i] += d[i];
                ax[i] += d[i] * (v[i] - mean);
            }
            if ((n + 1) % WB_BN_FLUSH == 0) {
                sg += flush(ag, S);
                sgx += flush(ax, S);
            }
        }
        sg += flush(ag, S);
        sgx += flush(ax, S);
        k->gb[c] = (float)sg;
        k->gw[c] = (float)(sgx * rstd);
    }
    if (!k->out) return;
    for (Py_ssize_t n = 0; n < N; n++)
        for (Py_ssize_t c = c0; c < c1; c++) {
            const Py_ssize_t row = n * C + c;
            const double mean = k->mean[c], rstd = k->rstd[c];
            const double a = rstd * channel_value(k->w, c, 1.0f);
            const double bx = -a * rstd * k->gw[c] / count;
            const float af = (float)a, bxf = (float)bx;
            const float shift = (float)(-a * k->gb[c] / count - bx * mean);
            const float *v = wb_load_f32(x->dtype, x->data, line_offset(x, n, c), x->strides[2],
                                         S, xl);
            const float *d = wb_load_f32(g->dtype, g->data, line_offset(g, n, c), g->strides[2],
                                         S, gl);
            float *dst = x->dtype == WB_F32 ? (float *)k->out + row * S : ag;
            for (Py_ssize_t i = 0; i < S; i++) dst[i] = af * d[i] + bxf * v[i] + shift;
            if (dst == ag) wb_store_f32(x->dtype, k->out, row * S, ag, S);
        }
}


/* x (N, C, S) of a float dtype the kernels take, with at least one element per channel. */
static int parse_input(wb_operand *x, PyObject *const *args, const char *name) {
    if (wb_operand_parse(x, args[0], args[1], args[2], args[3], "x") < 0) return -1;
    if (x->ndim != 3) {
        PyErr_Format(PyExc_ValueError, "%s: expected x (N, C, S)", name);
        return -1;
    }
    if (!wb_is_f32ish(x->dtype)) {
        PyErr_Format(PyExc_TypeError, "%s: unsupported dtype", name);
        return -1;
    }
    if (x->shape[0] * x->shape[2] == 0) {
        PyErr_Format(PyExc_ValueError, "%s: empty channels", name);
        return -1;
    }
    return 0;
}

/* An optional (C,) operand of x's dtype (args: array or None, offset, strides). */
static int optional_channel(PyObject *const *args, const wb_operand *x, wb_operand *v,
                            const wb_operand **p, const char *what) {
    *p = NULL;
    if (args[0] == Py_None) return 0;
    PyObject *shape = Py_BuildValue("(n)", x->shape[1]);
    if (!shape) return -1;
    const int rc = wb_operand_parse(v, args[0], args[1], shape, args[2], what);
    Py_DECREF(shape);
    if (rc < 0) return -1;
    if (v->dtype != x->dtype) {
        PyErr_Format(PyExc_TypeError, "%s: expected the input's dtype", what);
        return -1;
    }
    *p = v;
    return 0;
}

/* A contiguous f32 (C,) array, written (``writable``) or read. */
static float *channel_array(PyObject *obj, Py_ssize_t C, const char *what, int writable) {
    char *data;
    int dtype;
    Py_ssize_t numel;
    if (wb_array(obj, what, &data, &dtype, &numel, writable) < 0) return NULL;
    if (dtype != WB_F32 || numel != C) {
        PyErr_Format(PyExc_TypeError, "%s: expected %zd f32 values", what, C);
        return NULL;
    }
    return (float *)data;
}

static PyObject *run_channels(wb_range_fn fn, const bn_ctx *k) {
    const wb_operand *x = k->x;
    const int threads = wb_threads_for(wb_numel(3, x->shape), WB_BN_PAR);
    const size_t buf = WB_BN_LINES * sizeof(float) * (size_t)x->shape[2];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(fn, k, x->shape[1], threads, buf);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* batch_norm(x, offset, shape, strides, w, w_offset, w_strides, b, b_offset, b_strides, eps,
 *            out, mean, rstd): x (N, C, S); out contiguous (N, C, S); mean, rstd (C,) f32. */
static PyObject *py_batch_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 14) {
        PyErr_Format(PyExc_TypeError, "batch_norm: expected 14 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, w, b, out;
    const wb_operand *wp, *bp;
    if (parse_input(&x, args, "batch_norm") < 0 ||
        optional_channel(args + 4, &x, &w, &wp, "weight") < 0 ||
        optional_channel(args + 7, &x, &b, &bp, "bias") < 0)
        return NULL;
    const double eps = PyFloat_AsDouble(args[10]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    if (wb_output_parse(&out, args[11], 3, x.shape) < 0) return NULL;
    if (out.dtype != x.dtype) {
        PyErr_SetString(PyExc_TypeError, "batch_norm: expected out of the input's dtype");
        return NULL;
    }
    float *mean = channel_array(args[12], x.shape[1], "mean", 1);
    float *rstd = mean ? channel_array(args[13], x.shape[1], "rstd", 1) : NULL;
    if (!rstd) return NULL;
    bn_ctx k = {&x, wp, bp, NULL, out.data, mean, rstd, NULL, NULL, (float)eps};
    return run_channels(forward_channels, &k);
}

/* batch_norm_backward(x, offset, shape, strides, g, g_offset, g_strides, w, w_offset, w_strides,
 *                     mean, rstd, gx, gw, gb): g of x's shape and dtype; gx contiguous
 *                     (N, C, S) or None; mean, rstd, gw, gb (C,) f32. */
static PyObject *py_batch_norm_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 15) {
        PyErr_Format(PyExc_TypeError, "batch_norm_backward: expected 15 arguments, found %zd",
                     nargs);
        return NULL;
    }
    wb_operand x, g, w, gx;
    const wb_operand *wp;
    if (parse_input(&x, args, "batch_norm_backward") < 0 ||
        wb_operand_parse(&g, args[4], args[5], args[2], args[6], "grad") < 0 ||
        optional_channel(args + 7, &x, &w, &wp, "weight") < 0)
        return NULL;
    if (g.dtype != x.dtype) {
        PyErr_SetString(PyExc_TypeError, "batch_norm_backward: expected grad of x's dtype");
        return NULL;
    }
    const Py_ssize_t C = x.shape[1];
    float *mean = channel_array(args[10], C, "mean", 0);
    float *rstd = mean ? channel_array(args[11], C, "rstd", 0) : NULL;
    float *gw = rstd ? channel_array(args[13], C, "gw", 1) : NULL;
    float *gb = gw ? channel_array(args[14], C, "gb", 1) : NULL;
    if (!gb) return NULL;
    char *gx_data = NULL;
    if (args[12] != Py_None) {
        if (wb_output_parse(&gx, args[12], 3, x.shape) < 0) return NULL;
        if (gx.dtype != x.dtype) {
            PyErr_SetString(PyExc_TypeError, "batch_norm_backward: expected gx of x's dtype");
            return NULL;
        }
        gx_data = gx.data;
    }
    bn_ctx k = {&x, wp, NULL, &g, gx_data, mean, rstd, gw, gb, 0.0f};
    return run_channels(backward_channels, &k);
}

PyMethodDef wb_batchnorm_methods[] = {
    {"batch_norm", (PyCFunction)(void (*)(void))py_batch_norm, METH_FASTCALL,
     "Training-mode batch norm of x (N, C, S): y, and each channel's mean and rstd."},
    {"batch_norm_backward", (PyCFunction)(void (*)(void))py_batch_norm_backward, METH_FASTCALL,
     "dL/dx (optional), dL/dweight and dL/dbias of a training-mode batch norm."},
    {NULL, NULL, 0, NULL},
};
