/* Max pooling over (H, W) planes, with the argmax, in one pass per output (the numpy path
 * needs a pass per window tap for the values and another for the indices), and its gradient,
 * a scatter of each output gradient onto its argmax. Planes are spread over the threads.
 *
 * Semantics (PyTorch's): the window's taps are visited in (i, j) order, padding skipped; the
 * first maximum wins, NaN wins over everything (the last NaN); a window of -inf reports its
 * first real element, a window of padding only (dilation) -inf with index -1. Every dtype but
 * bool: halves are compared in f32 and their bits copied, so values are exact. */
#include "nd.h"
#include "threads.h"

/* Outputs above which the pools run on several threads. */
#define WB_POOL_PAR (1 << 14)

typedef struct {
    const char *x;  /* (P, H, W) contiguous */
    char *out;      /* (P, Ho, Wo) contiguous, x's dtype */
    int64_t *idx;   /* (P, Ho, Wo), flat into H·W */
    Py_ssize_t h, w, ho, wo;
    Py_ssize_t kh, kw, sh, sw, ph, pw, dh, dw;
} pool_ctx;

/* The taps [lo, hi) of a window starting at ``start`` (stride ``d``) inside [0, n). */
static inline void tap_range(Py_ssize_t start, Py_ssize_t k, Py_ssize_t d, Py_ssize_t n,
                             Py_ssize_t *lo, Py_ssize_t *hi) {
    Py_ssize_t a = start < 0 ? (-start + d - 1) / d : 0;
    Py_ssize_t b = start >= n ? 0 : (n - start + d - 1) / d;
    if (b > k) b = k;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* WB_POOL_FN(name, T, V, TO_V, LOWEST): max pool of storage type T compared as V; LOWEST
 * (-inf, or the smallest integer) is the value of a window of padding only. The first real tap
 * starts the running maximum, the others replace it branch-free when greater or NaN. */
#define WB_POOL_FN(name, T, V, TO_V, LOWEST)                                                  \
    static void name(const void *ctx, int t, Py_ssize_t p0, Py_ssize_t p1, void *buf) {       \
        (void)t;                                                                              \
        const pool_ctx *c = (const pool_ctx *)ctx;                                            \
        const Py_ssize_t h = c->h, w = c->w, ho = c->ho, wo = c->wo, kh = c->kh, kw = c->kw;  \
        const Py_ssize_t sh = c->sh, sw = c->sw, ph = c->ph, pw = c->pw, dh = c->dh;          \
        const Py_ssize_t dw = c->dw;                                                          \
        Py_ssize_t *restrict jr = (Py_ssize_t *)buf; /* per output column: its tap range */   \
        for (Py_ssize_t q = 0; q < wo; q++)                                                   \
            tap_range(q * sw - pw, kw, dw, w, jr + 2 * q, jr + 2 * q + 1);                    \
        for (Py_ssize_t p = p0; p < p1; p++) {                                                \
            const T *restrict x = (const T *)c->x + p * h * w;                                \
            T *restrict out = (T *)c->out + p * ho * wo;                                      \
            int64_t *restrict idx = c->idx + p * ho * wo;                                     \
            for (Py_ssize_t r = 0; r < ho; r++) {                                             \
                const Py_ssize_t r0 = r * sh - ph;                                            \
                Py_ssize_t i0, i1;                                                            \
                tap_range(r0, kh, dh, h, &i0, &i1);                                           \
                for (Py_ssize_t q = 0; q < wo; q++) {                                         \
                    const Py_ssize_t q0 = q * sw - pw, j0 = jr[2 * q], j1 = jr[2 * q + 1];    \
                    if (i0 == i1 || j0 == j1) {                                               \
                        out[r * wo + q] = LOWEST;                                             \
                        idx[r * wo + q] = -1;                                                 \
                        continue;                                                             \
                    }                                                                         \
                    Py_ssize_t best_at = (r0 + i0 * dh) * w + q0 + j0 * dw;                   \
                    V best = TO_V(x[best_at]);                                                \
                    for (Py_ssize_t i = i0; i < i1; i++) {                                    \
                        const Py_ssize_t row = (r0 + i * dh) * w + q0;                        \
                        for (Py_ssize_t j = (i == i0 ? j0 + 1 : j0); j < j1; j++) {           \
                            const Py_ssize_t at = row + j * dw;                               \
                            const V v = TO_V(x[at]);                                          \
                            const int take = (v > best) | (v != v);                           \
                            best = take ? v : best;                                           \
                            best_at = take ? at : best_at;                                    \
                        }                                                                     \
                    }                                                                         \
                    out[r * wo + q] = x[best_at];                                             \
                    idx[r * wo + q] = best_at;                                                \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
    }

#define WB_ID(v) (v)
WB_POOL_FN(pool_f32, float, float, WB_ID, -__builtin_inff())
WB_POOL_FN(pool_f64, double, double, WB_ID, -__builtin_inf())
WB_POOL_FN(pool_f16, uint16_t, float, wb_f16_to_f32, 0xFC00u)
WB_POOL_FN(pool_bf16, uint16_t, float, wb_bf16_to_f32, 0xFF80u)
WB_POOL_FN(pool_i64, int64_t, int64_t, WB_ID, INT64_MIN)
WB_POOL_FN(pool_i32, int32_t, int32_t, WB_ID, INT32_MIN)
WB_POOL_FN(pool_u32, uint32_t, uint32_t, WB_ID, 0)
WB_POOL_FN(pool_i16, int16_t, int16_t, WB_ID, INT16_MIN)
WB_POOL_FN(pool_i8, int8_t, int8_t, WB_ID, INT8_MIN)
WB_POOL_FN(pool_u8, uint8_t, uint8_t, WB_ID, 0)

static wb_range_fn pool_fn(int dtype) {
    switch (dtype) {
    case WB_F32: return pool_f32;
    case WB_F64: return pool_f64;
    case WB_F16: return pool_f16;
    case WB_BF16: return pool_bf16;
    case WB_I64: return pool_i64;
    case WB_I32: return pool_i32;
    case WB_U32: return pool_u32;
    case WB_I16: return pool_i16;
    case WB_I8: return pool_i8;
    case WB_U8: return pool_u8;
    default: return NULL;
    }
}

static int ints(PyObject *const *args, Py_ssize_t n, Py_ssize_t *dst, const char *what) {
    for (Py_ssize_t i = 0; i < n; i++) {
        dst[i] = PyLong_AsSsize_t(args[i]);
        if (dst[i] == -1 && PyErr_Occurred()) return -1;
        if (dst[i] < 0 || (i >= 5 && i < 9 && dst[i] < 1) || (i >= 11 && dst[i] < 1)) {
            PyErr_Format(PyExc_ValueError, "%s: argument %zd out of range (%zd)", what, i + 3,
                         dst[i]);
            return -1;
        }
    }
    return 0;
}

/* max_pool2d(x, out, idx, P, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw) */
static PyObject *py_max_pool2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 16) {
        PyErr_Format(PyExc_TypeError, "max_pool2d: expected 16 arguments, found %zd", nargs);
        return NULL;
    }
    Py_ssize_t v[13]; /* P, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw */
    if (ints(args + 3, 13, v, "max_pool2d") < 0) return NULL;
    char *x, *out, *idx;
    int xt, ot, it;
    Py_ssize_t nx, no, ni;
    if (wb_array(args[0], "max_pool2d x", &x, &xt, &nx, 0) < 0 ||
        wb_array(args[1], "max_pool2d out", &out, &ot, &no, 1) < 0 ||
        wb_array(args[2], "max_pool2d idx", &idx, &it, &ni, 1) < 0)
        return NULL;
    const wb_range_fn fn = pool_fn(xt);
    if (!fn || ot != xt || it != WB_I64) {
        PyErr_SetString(PyExc_TypeError, "max_pool2d: x must be a number array (not bool), out "
                                         "of x's dtype, idx int64");
        return NULL;
    }
    const Py_ssize_t planes = v[0], outputs = v[0] * v[3] * v[4];
    if (nx != planes * v[1] * v[2] || no != outputs || ni != outputs) {
        PyErr_SetString(PyExc_ValueError, "max_pool2d: array sizes do not match (P, H, W) and "
                                          "(P, Ho, Wo)");
        return NULL;
    }
    pool_ctx c = {x, out, (int64_t *)idx, v[1], v[2], v[3], v[4],
                  v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]};
    const int threads = wb_threads_for(outputs * v[5] * v[6], WB_POOL_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(fn, &c, planes, threads, sizeof(Py_ssize_t) * 2 * (size_t)(v[4] + 1));
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

typedef struct {
    const char *g;      /* (P, L) contiguous, f32 or f64 */
    const int64_t *idx; /* (P, L), into the plane; -1: nowhere */
    char *out;          /* (P, S) contiguous, g's dtype */
    Py_ssize_t l, s;
} scatter_ctx;

#define WB_SCATTER_FN(name, T)                                                                \
    static void name(const void *ctx, int t, Py_ssize_t p0, Py_ssize_t p1, void *buf) {       \
        (void)t;                                                                              \
        (void)buf;                                                                            \
        const scatter_ctx *c = (const scatter_ctx *)ctx;                                      \
        for (Py_ssize_t p = p0; p < p1; p++) {                                                \
            const T *g = (const T *)c->g + p * c->l;                                          \
            const int64_t *idx = c->idx + p * c->l;                                           \
            T *out = (T *)c->out + p * c->s;                                                  \
            memset(out, 0, sizeof(T) * (size_t)c->s);                                         \
            for (Py_ssize_t k = 0; k < c->l; k++)                                             \
                if (idx[k] >= 0 && idx[k] < c->s) out[idx[k]] += g[k];                        \
        }                                                                                     \
    }

WB_SCATTER_FN(scatter_f32, float)
WB_SCATTER_FN(scatter_f64, double)

/* max_pool2d_backward(g, idx, out, P, L, S): out[p, idx[p, k]] += g[p, k], out zeroed first. */
static PyObject *py_max_pool2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "max_pool2d_backward: expected 6 arguments, found %zd",
                     nargs);
        return NULL;
    }
    Py_ssize_t v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = PyLong_AsSsize_t(args[3 + i]);
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
        if (v[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "max_pool2d_backward: negative size");
            return NULL;
        }
    }
    char *g, *idx, *out;
    int gt, it, ot;
    Py_ssize_t ng, ni, no;
    if (wb_array(args[0], "max_pool2d_backward g", &g, &gt, &ng, 0) < 0 ||
        wb_array(args[1], "max_pool2d_backward idx", &idx, &it, &ni, 0) < 0 ||
        wb_array(args[2], "max_pool2d_backward out", &out, &ot, &no, 1) < 0)
        return NULL;
    if ((gt != WB_F32 && gt != WB_F64) || ot != gt || it != WB_I64) {
        PyErr_SetString(PyExc_TypeError, "max_pool2d_backward: g and out must be one of f32, "
                                         "f64; idx int64");
        return NULL;
    }
    if (ng != v[0] * v[1] || ni != ng || no != v[0] * v[2]) {
        PyErr_SetString(PyExc_ValueError, "max_pool2d_backward: array sizes do not match "
                                          "(P, L) and (P, S)");
        return NULL;
    }
    scatter_ctx c = {g, (const int64_t *)idx, out, v[1], v[2]};
    const int threads = wb_threads_for(v[0] * (v[1] + v[2]), WB_POOL_PAR);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = wb_parallel_ranges(gt == WB_F32 ? scatter_f32 : scatter_f64, &c, v[0], threads, 1);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_pool_methods[] = {
    {"max_pool2d", (PyCFunction)(void (*)(void))py_max_pool2d, METH_FASTCALL,
     "max_pool2d(x, out, idx, P, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw): max pooling of "
     "the contiguous (P, H, W) planes of x into out (P, Ho, Wo) and the argmax idx (int64, flat "
     "into H*W; the first maximum, the last NaN, -1 for a window of padding only)."},
    {"max_pool2d_backward", (PyCFunction)(void (*)(void))py_max_pool2d_backward, METH_FASTCALL,
     "max_pool2d_backward(g, idx, out, P, L, S): out (P, S) = 0, then out[p, idx[p, k]] += "
     "g[p, k] for idx >= 0 (f32 or f64)."},
    {NULL, NULL, 0, NULL},
};
