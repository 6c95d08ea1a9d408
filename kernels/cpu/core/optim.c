/* One Adam / AdamW step of a parameter in place, in one pass over its elements, with the
 * arithmetic of torch.optim.Adam's single-tensor path (the scalars rounded to the parameter's
 * dtype, each operation in that dtype):
 *
 *     g = -g if maximize;  p = p (1 - lr λ) (decoupled)  or  g = g + λ p (coupled)
 *     m = lerp(m, g, 1 - β₁);  v = v β₂ + (1 - β₂) g g;  (amsgrad: v̂ = max(v̂, v), used for v)
 *     p = p + (-lr / (1 - β₁ᵗ)) m / (√v / √(1 - β₂ᵗ) + ε)
 *
 * p, g, m, v (and v̂) are contiguous arrays of one dtype, f32 or f64; blocks of elements are
 * spread over the threads above WB_ADAM_PAR elements. */
#include "threads.h"
#include "nd.h"

#include <math.h>

/* Elements per unit of work, and the count above which a step runs on several threads (a
 * memory-bound pass, as the cheap elementwise ops). */
#define WB_ADAM_BLOCK 4096
#define WB_ADAM_PAR (1 << 16)

typedef struct {
    char *p, *m, *v, *vmax; /* vmax: NULL unless amsgrad */
    const char *g;
    int dtype;
    Py_ssize_t n;
    /* per-step scalars, in double: decay = 1 - lr λ, w1 = 1 - β₁, w2 = 1 - β₂,
     * step = -lr / (1 - β₁ᵗ), bc2 = √(1 - β₂ᵗ) */
    double wd, decay, w1, beta2, w2, eps, step, bc2;
    int decoupled, maximize;
} adam_ctx;

/* torch's lerp: a + w (b - a) for w < 0.5, else b - (b - a) (1 - w) (exact at w = 1).
 * AMSGRAD is a constant, so that the loop without v̂ has no v̂ access at all: if-converted
 * into masked loads of a NULL v̂, the vectorised loop ran 5x slower than torch on an EPYC
 * (a masked load of an unmapped page is a microcode assist there, even with no lane on). */
#define WB_ADAM_RANGE(T, NAME, SQRT, AMSGRAD)                                                      \
    static void NAME(const adam_ctx *k, Py_ssize_t i0, Py_ssize_t i1) {                            \
        T *restrict p = (T *)k->p, *restrict m = (T *)k->m, *restrict v = (T *)k->v;               \
        T *restrict vmax = (T *)k->vmax;                                                           \
        const T *restrict g = (const T *)k->g;                                                     \
        const T wd = (T)k->wd, decay = (T)k->decay, w1 = (T)k->w1, w1c = (T)1 - w1;                \
        const T beta2 = (T)k->beta2, w2 = (T)k->w2, eps = (T)k->eps, step = (T)k->step;            \
        const T bc2 = (T)k->bc2;                                                                   \
        const int coupled = wd != 0 && !k->decoupled, decoupled = wd != 0 && k->decoupled;         \
        const int small_w1 = k->w1 < 0.5, maximize = k->maximize;                                  \
        for (Py_ssize_t i = i0; i < i1; i++) {                                                     \
            T gi = maximize ? -g[i] : g[i];                                                        \
            T pi = p[i];                                                                           \
            if (decoupled) pi = pi * decay;                                                        \
            if (coupled) gi = gi + wd * pi;                                                        \
            const T mi = small_w1 ? m[i] + w1 * (gi - m[i]) : gi - (gi - m[i]) * w1c;              \
            T vi = v[i] * beta2 + w2 * gi * gi;                                                    \
            m[i] = mi;                                                                             \
            v[i] = vi;                                                                             \
            if (AMSGRAD) { /* NaN propagates, as torch.maximum */                                  \
                const T a = vmax[i];                                                               \
                vi = vmax[i] = (a > vi || a != a) ? a : vi;                                        \
            }                                                                                      \
            p[i] = pi + step * mi / (SQRT(vi) / bc2 + eps);                                        \
        }                                                                                          \
    }

WB_ADAM_RANGE(float, adam_f32, sqrtf, 0)
WB_ADAM_RANGE(double, adam_f64, sqrt, 0)
WB_ADAM_RANGE(float, amsgrad_f32, sqrtf, 1)
WB_ADAM_RANGE(double, amsgrad_f64, sqrt, 1)

static void adam_blocks(const void *ctx, int t, Py_ssize_t b0, Py_ssize_t b1, void *buf) {
    (void)t, (void)buf;
    const adam_ctx *k = ctx;
    const Py_ssize_t i0 = b0 * WB_ADAM_BLOCK;
    const Py_ssize_t i1 = b1 * WB_ADAM_BLOCK < k->n ? b1 * WB_ADAM_BLOCK : k->n;
    if (k->dtype == WB_F64) (k->vmax ? amsgrad_f64 : adam_f64)(k, i0, i1);
    else (k->vmax ? amsgrad_f32 : adam_f32)(k, i0, i1);
}

/* A contiguous array of ``dtype`` (-1: any float dtype the kernel takes) and ``n`` elements
 * (-1: any); returns its element count. */
static Py_ssize_t state_array(PyObject *obj, const char *what, int writable, int *dtype,
                              Py_ssize_t n, char **data) {
    int dt;
    Py_ssize_t numel;
    if (wb_array(obj, what, data, &dt, &numel, writable) < 0) return -1;
    if (*dtype < 0 ? (dt != WB_F32 && dt != WB_F64) : dt != *dtype) {
        PyErr_Format(PyExc_TypeError, "adam_step: %s must be f32 or f64, as the parameter", what);
        return -1;
    }
    if (n >= 0 && numel != n) {
        PyErr_Format(PyExc_ValueError, "adam_step: %s has %zd elements, expected %zd", what,
                     numel, n);
        return -1;
    }
    *dtype = dt;
    return numel;
}

/* adam_step(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq or None, lr, beta1, beta2, eps,
 *           weight_decay, decoupled, maximize, step) */
static PyObject *py_adam_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "adam_step: expected 13 arguments, found %zd", nargs);
        return NULL;
    }
    adam_ctx k = {0};
    int dtype = -1;
    char *g;
    k.n = state_array(args[0], "param", 1, &dtype, -1, &k.p);
    if (k.n < 0 || state_array(args[1], "grad", 0, &dtype, k.n, &g) < 0 ||
        state_array(args[2], "exp_avg", 1, &dtype, k.n, &k.m) < 0 ||
        state_array(args[3], "exp_avg_sq", 1, &dtype, k.n, &k.v) < 0 ||
        (args[4] != Py_None && state_array(args[4], "max_exp_avg_sq", 1, &dtype, k.n, &k.vmax) < 0))
        return NULL;
    k.g = g;
    k.dtype = dtype;
    double h[6]; /* lr, beta1, beta2, eps, weight_decay, step */
    for (int i = 0; i < 5; i++) h[i] = PyFloat_AsDouble(args[5 + i]);
    h[5] = PyFloat_AsDouble(args[12]);
    k.decoupled = PyObject_IsTrue(args[10]);
    k.maximize = PyObject_IsTrue(args[11]);
    if (PyErr_Occurred()) return NULL;
    const double lr = h[0], beta1 = h[1], t = h[5];
    k.beta2 = h[2], k.eps = h[3], k.wd = h[4];
    k.decay = 1.0 - lr * k.wd;
    k.w1 = 1.0 - beta1;
    k.w2 = 1.0 - k.beta2;
    k.step = -(lr / (1.0 - pow(beta1, t)));
    k.bc2 = pow(1.0 - pow(k.beta2, t), 0.5); /* torch's ``bias_correction2 ** 0.5`` */
    const Py_ssize_t blocks = (k.n + WB_ADAM_BLOCK - 1) / WB_ADAM_BLOCK;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(adam_blocks, &k, blocks, wb_threads_for(k.n, WB_ADAM_PAR), 0);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_optim_methods[] = {
    {"adam_step", (PyCFunction)(void (*)(void))py_adam_step, METH_FASTCALL,
     "adam_step(p, g, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps, "
     "weight_decay, decoupled, maximize, step): one Adam/AdamW step of p, m, v in place."},
    {NULL, NULL, 0, NULL},
};
