/* Row kernels of a language model's layer, fused so that one call replaces several passes:
 *
 *   llm_residual_norm(x, a, post_w, w, eps, out)
 *       x (n, d) += a' with a' = rms(a)·post_w (post_w given) or a (a given), in place; then
 *       out = rms(x)·w (out given; w None: no weight), where rms(y) = y / sqrt(mean(y²) + eps).
 *   llm_glu(g, u, gelu, out)
 *       out (n, F) = act(g) · u with act(z) = z σ(z) (SiLU) or, gelu, the tanh form of GELU;
 *       u None: g is (n, 2F), each row the gate then the up half.
 *
 * All arrays C-contiguous f32; rows run on several threads when there are many. */
#include "nd.h"
#include "vmath.h"

#include <math.h>

#define ROWS_PAR (1 << 16) /* elements from which the rows run on several threads */

static int f32_array(PyObject *obj, const char *what, Py_ssize_t numel, int writable,
                     int optional, float **data) {
    *data = NULL;
    if (optional && obj == Py_None) return 0;
    char *p;
    int dtype;
    Py_ssize_t found;
    if (wb_array(obj, what, &p, &dtype, &found, writable) < 0) return -1;
    if (dtype != WB_F32) {
        PyErr_Format(PyExc_TypeError, "%s: expected float32 values", what);
        return -1;
    }
    if (numel >= 0 && found != numel) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd elements, found %zd", what, numel, found);
        return -1;
    }
    *data = (float *)p;
    return 0;
}

/* The last dimension of a numpy array (its shape attribute); -1 with an exception. */
static Py_ssize_t last_dim(PyObject *array) {
    PyObject *shape = PyObject_GetAttrString(array, "shape");
    if (!shape) return -1;
    Py_ssize_t n = -1;
    if (PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) > 0)
        n = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, PyTuple_GET_SIZE(shape) - 1));
    else
        PyErr_SetString(PyExc_ValueError, "expected an array of at least one dimension");
    Py_DECREF(shape);
    return n;
}

/* 1 / sqrt(mean(x²) + eps), the sum in 8 interleaved partial sums (vectorisable). */
static inline float inv_rms(const float *x, Py_ssize_t n, float eps) {
    float part[8] = {0};
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) part[l] += x[i + l] * x[i + l];
    float ss = 0.0f;
    for (; i < n; i++) ss += x[i] * x[i];
    for (int l = 0; l < 8; l++) ss += part[l];
    return 1.0f / sqrtf(ss / (float)n + eps);
}

static PyObject *py_residual_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *op = "llm_residual_norm";
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "%s: expected 6 arguments, found %zd", op, nargs);
        return NULL;
    }
    float *x, *a, *pw, *w, *out;
    char *xd;
    int dtype;
    Py_ssize_t numel;
    if (wb_array(args[0], "llm_residual_norm: x", &xd, &dtype, &numel, 1) < 0) return NULL;
    x = (float *)xd;
    const double eps = PyFloat_AsDouble(args[4]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    const Py_ssize_t d = last_dim(args[0]);
    if (d < 0) return NULL;
    if (dtype != WB_F32 || d == 0) {
        PyErr_Format(PyExc_ValueError, "%s: x must be non-empty float32 rows", op);
        return NULL;
    }
    if (f32_array(args[1], "llm_residual_norm: a", numel, 0, 1, &a) < 0 ||
        f32_array(args[2], "llm_residual_norm: post_w", d, 0, 1, &pw) < 0 ||
        f32_array(args[3], "llm_residual_norm: w", d, 0, 1, &w) < 0 ||
        f32_array(args[5], "llm_residual_norm: out", numel, 1, 1, &out) < 0)
        return NULL;
    const Py_ssize_t n = numel / d;
    const float e = (float)eps;
    const int threads = numel >= ROWS_PAR ? wb_get_num_threads() : 1;
    Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (Py_ssize_t r = 0; r < n; r++) {
        float *xr = x + r * d;
        if (a) {
            const float *ar = a + r * d;
            if (pw) {
                const float s = inv_rms(ar, d, e);
                for (Py_ssize_t i = 0; i < d; i++) xr[i] += ar[i] * s * pw[i];
            } else {
                for (Py_ssize_t i = 0; i < d; i++) xr[i] += ar[i];
            }
        }
        if (out) {
            float *o = out + r * d;
            const float s = inv_rms(xr, d, e);
            if (w)
                for (Py_ssize_t i = 0; i < d; i++) o[i] = xr[i] * s * w[i];
            else
                for (Py_ssize_t i = 0; i < d; i++) o[i] = xr[i] * s;
        }
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_glu(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *op = "llm_glu";
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "%s: expected 4 arguments, found %zd", op, nargs);
        return NULL;
    }
    float *g, *u, *out;
    char *od;
    int dtype;
    Py_ssize_t numel;
    if (wb_array(args[3], "llm_glu: out", &od, &dtype, &numel, 1) < 0) return NULL;
    const int gelu = PyObject_IsTrue(args[2]);
    if (gelu < 0) return NULL;
    const int stacked = args[1] == Py_None;
    if (dtype != WB_F32 ||
        f32_array(args[0], "llm_glu: g", stacked ? 2 * numel : numel, 0, 0, &g) < 0 ||
        f32_array(args[1], "llm_glu: u", numel, 0, 1, &u) < 0)
        return NULL;
    out = (float *)od;
    const Py_ssize_t F = last_dim(args[3]);
    if (F < 0) return NULL;
    if (F == 0 || numel % F) {
        PyErr_Format(PyExc_ValueError, "%s: out must be non-empty rows", op);
        return NULL;
    }
    const Py_ssize_t n = numel / F;
    const int threads = numel >= ROWS_PAR ? wb_get_num_threads() : 1;
    Py_BEGIN_ALLOW_THREADS
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (Py_ssize_t r = 0; r < n; r++) {
        const float *gr = stacked ? g + 2 * r * F : g + r * F;
        const float *ur = stacked ? gr + F : u + r * F;
        float *o = out + r * F;
        if (gelu)
            for (Py_ssize_t i = 0; i < F; i++) o[i] = wb_glu_f(gr[i], ur[i], 1);
        else
            for (Py_ssize_t i = 0; i < F; i++) o[i] = wb_glu_f(gr[i], ur[i], 0);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

PyMethodDef wb_llm_rows_methods[] = {
    {"llm_residual_norm", (PyCFunction)(void (*)(void))py_residual_norm, METH_FASTCALL,
     "llm_residual_norm(x, a, post_w, w, eps, out): x += rms(a)*post_w (or a), in place; "
     "out = rms(x)*w."},
    {"llm_glu", (PyCFunction)(void (*)(void))py_glu, METH_FASTCALL,
     "llm_glu(g, u, gelu, out): out = act(g) * u (SiLU or tanh GELU); u None: g holds gate "
     "and up halves per row."},
    {NULL, NULL, 0, NULL},
};
