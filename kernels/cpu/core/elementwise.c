/* Elementwise kernels: unary (with the parametric affine/clamp/powf/elu), binary, comparisons
 * and where, on strided/broadcast layouts, in f32, f64, f16 and bf16. f16/bf16 are computed in
 * f32 and rounded once on store, one vector at a time (widen, compute, round without leaving
 * the registers); f64 in f64 (libm). Ops are named; Python maps the names (unary_ops() & co.)
 * to the codes the calls take. */
#include "convert.h" /* Python.h first: it sets feature macros math.h reads */
#include "activation.h"
#include "iter.h"
#include "vmath.h"

#include <math.h>

/* Elements above which a transcendental op runs on several threads (memory-bound ones:
 * WB_PAR_CHEAP, iter.h). */
#define WB_PAR_COSTLY (1 << 13)

typedef void (*wb_unary_f32)(const float *restrict x, float *restrict o, Py_ssize_t n, float p0,
                             float p1);
typedef void (*wb_unary_f64)(const double *restrict x, double *restrict o, Py_ssize_t n,
                             double p0, double p1);
/* x: n elements of half dtype dt (f16 or bf16) at stride sx; o: contiguous, of dtype dt */
typedef void (*wb_unary_half)(int dt, const uint16_t *x, Py_ssize_t sx, uint16_t *restrict o,
                              Py_ssize_t n, float p0, float p1);
typedef struct {
    const char *name;
    wb_unary_f32 f32;
    wb_unary_f64 f64;
    wb_unary_half half;
    Py_ssize_t min_parallel;
} wb_unary_op;

#define WB_INLINE static inline __attribute__((always_inline))
/* Before a loop over the WB_HLANES lanes: not unrolled, so that the loop vectoriser (which
 * if-converts the selects of vmath.h) turns it into one vector iteration. */
#define WB_LANES_LOOP _Pragma("GCC unroll 1")

typedef void (*wb_lanes_store)(int dt, uint16_t *p, const float *restrict t);

/* The fused half-precision loop of one unary op ``f`` (inlined: gcc vectorises f over the
 * WB_HLANES lanes), rounding through ``store`` (inlined too). Two vectors a step, so that two
 * chains of f's arithmetic interleave (f16 exp 4% faster than one). The tail goes through a
 * zero-padded copy, so every element takes the same conversions. */
WB_INLINE void half_unary(float (*f)(float, float, float), wb_lanes_store store, int dt,
                          const uint16_t *x, Py_ssize_t sx, uint16_t *restrict o, Py_ssize_t n,
                          float p0, float p1) {
    float t[WB_HLANES];
    Py_ssize_t i = 0;
    for (; i + 2 * WB_HLANES <= n; i += 2 * WB_HLANES) {
        float u[WB_HLANES];
        wb_half_lanes_load(dt, x + i * sx, sx, t);
        wb_half_lanes_load(dt, x + (i + WB_HLANES) * sx, sx, u);
        WB_LANES_LOOP
        for (int j = 0; j < WB_HLANES; j++) t[j] = f(t[j], p0, p1);
        WB_LANES_LOOP
        for (int j = 0; j < WB_HLANES; j++) u[j] = f(u[j], p0, p1);
        store(dt, o + i, t);
        store(dt, o + i + WB_HLANES, u);
    }
    for (; i + WB_HLANES <= n; i += WB_HLANES) {
        wb_half_lanes_load(dt, x + i * sx, sx, t);
        WB_LANES_LOOP
        for (int j = 0; j < WB_HLANES; j++) t[j] = f(t[j], p0, p1);
        store(dt, o + i, t);
    }
    if (i == n) return;
    uint16_t xt[WB_HLANES] = {0}, ot[WB_HLANES];
    for (Py_ssize_t j = 0; j < n - i; j++) xt[j] = x[(i + j) * sx];
    wb_half_lanes_load(dt, xt, 1, t);
    WB_LANES_LOOP
    for (int j = 0; j < WB_HLANES; j++) t[j] = f(t[j], p0, p1);
    store(dt, ot, t);
    memcpy(o + i, ot, sizeof(uint16_t) * (size_t)(n - i));
}

#define WB_UNARY(name, expr32, expr64)                                                         \
    static inline float u_##name##_1(float x, float p0, float p1) {                           \
        (void)p0, (void)p1;                                                                   \
        return (expr32);                                                                      \
    }                                                                                         \
    static void u_##name##_f32(const float *restrict xs, float *restrict o, Py_ssize_t n,       \
                               float p0, float p1) {                                          \
        for (Py_ssize_t i = 0; i < n; i++) o[i] = u_##name##_1(xs[i], p0, p1);                \
    }                                                                                         \
    WB_BF16NI_FN static void u_##name##_bf16ni(const uint16_t *x, Py_ssize_t sx,              \
                                               uint16_t *restrict o, Py_ssize_t n, float p0,  \
                                               float p1) {                                    \
        half_unary(u_##name##_1, wb_bf16ni_lanes_store, WB_BF16, x, sx, o, n, p0, p1);        \
    }                                                                                         \
    static void u_##name##_half(int dt, const uint16_t *x, Py_ssize_t sx, uint16_t *restrict o, \
                                Py_ssize_t n, float p0, float p1) {                           \
        if (dt == WB_BF16 && wb_bf16ni_usable()) u_##name##_bf16ni(x, sx, o, n, p0, p1);       \
        else if (dt == WB_BF16)                                                               \
            half_unary(u_##name##_1, wb_half_lanes_store, WB_BF16, x, sx, o, n, p0, p1);      \
        else half_unary(u_##name##_1, wb_half_lanes_store, WB_F16, x, sx, o, n, p0, p1);      \
    }                                                                                         \
    static void u_##name##_f64(const double *restrict xs, double *restrict o, Py_ssize_t n,     \
                               double p0, double p1) {                                        \
        (void)p0, (void)p1;                                                                   \
        for (Py_ssize_t i = 0; i < n; i++) {                                                  \
            const double x = xs[i];                                                           \
            o[i] = (expr64);                                                                  \
        }                                                                                     \
    }

/* min(max(x, lo), hi) as numpy's clip and PyTorch's clamp (hi wins when lo > hi; NaN stays) */
static inline float clamp32(float x, float lo, float hi) {
    const float t = x < lo ? lo : x;
    return t > hi ? hi : t;
}
static inline double clamp64(double x, double lo, double hi) {
    const double t = x < lo ? lo : x;
    return t > hi ? hi : t;
}

WB_UNARY(exp, wb_expf(x), exp(x))
WB_UNARY(log, wb_logf(x), log(x))
WB_UNARY(tanh, wb_tanhf(x), tanh(x))
WB_UNARY(sigmoid, 1.0f / (1.0f + wb_expf(-x)), 1.0 / (1.0 + exp(-x)))
WB_UNARY(silu, wb_silu32(x), wb_silu64(x))
WB_UNARY(gelu, wb_gelu_tanhf(x), wb_gelu_tanh64(x))
WB_UNARY(gelu_erf, wb_gelu_erff(x), wb_gelu_erf64(x))
WB_UNARY(erf, wb_erff(x), erf(x))
WB_UNARY(relu, wb_relu32(x), wb_relu64(x))
WB_UNARY(neg, -x, -x)
WB_UNARY(abs, fabsf(x), fabs(x))
WB_UNARY(sqr, x * x, x * x)
WB_UNARY(sqrt, sqrtf(x), sqrt(x))
WB_UNARY(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
WB_UNARY(recip, 1.0f / x, 1.0 / x)
WB_UNARY(ceil, ceilf(x), ceil(x))
WB_UNARY(floor, floorf(x), floor(x))
WB_UNARY(round, rintf(x), rint(x)) /* half to even, as numpy and PyTorch */
WB_UNARY(sign, x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x), x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x))
/* parametric: affine (x p0 + p1, two roundings as the numpy path), clamp to [p0, p1], x^p0,
 * elu with alpha p0 */
WB_UNARY(affine, x * p0 + p1, x * p0 + p1)
WB_UNARY(clamp, clamp32(x, p0, p1), clamp64(x, p0, p1))
WB_UNARY(powf, p0 == 2.0f ? x * x : powf(x, p0), p0 == 2.0 ? x * x : pow(x, p0))
WB_UNARY(elu, x > 0.0f ? x : p0 * expm1f(x), x > 0.0 ? x : p0 * expm1(x))

#define WB_U(name, cost) {#name, u_##name##_f32, u_##name##_f64, u_##name##_half, cost}
static const wb_unary_op unary_ops[] = {
    WB_U(exp, WB_PAR_COSTLY), WB_U(log, WB_PAR_COSTLY), WB_U(tanh, WB_PAR_COSTLY),
    WB_U(sigmoid, WB_PAR_COSTLY), WB_U(silu, WB_PAR_COSTLY), WB_U(gelu, WB_PAR_COSTLY),
    WB_U(gelu_erf, WB_PAR_COSTLY), WB_U(erf, WB_PAR_COSTLY), WB_U(relu, WB_PAR_CHEAP),
    WB_U(neg, WB_PAR_CHEAP), WB_U(abs, WB_PAR_CHEAP), WB_U(sqr, WB_PAR_CHEAP),
    WB_U(sqrt, WB_PAR_CHEAP), WB_U(rsqrt, WB_PAR_CHEAP), WB_U(recip, WB_PAR_CHEAP),
    WB_U(ceil, WB_PAR_CHEAP), WB_U(floor, WB_PAR_CHEAP), WB_U(round, WB_PAR_CHEAP),
    WB_U(sign, WB_PAR_CHEAP), WB_U(affine, WB_PAR_CHEAP), WB_U(clamp, WB_PAR_CHEAP),
    WB_U(powf, WB_PAR_COSTLY), WB_U(elu, WB_PAR_COSTLY),
};
#define WB_NUNARY ((int)(sizeof(unary_ops) / sizeof(unary_ops[0])))

typedef void (*wb_binary_f32)(const float *restrict a, const float *restrict b,
                              float *restrict o, Py_ssize_t n);
typedef void (*wb_binary_f64)(const double *restrict a, const double *restrict b,
                              double *restrict o, Py_ssize_t n);
typedef void (*wb_binary_half)(int dt, const uint16_t *a, Py_ssize_t sa, const uint16_t *b,
                               Py_ssize_t sb, uint16_t *restrict o, Py_ssize_t n);
typedef void (*wb_cmp_f32)(const float *restrict a, const float *restrict b,
                           uint8_t *restrict o, Py_ssize_t n);
typedef void (*wb_cmp_f64)(const double *restrict a, const double *restrict b,
                           uint8_t *restrict o, Py_ssize_t n);

/* The fused half-precision loop of one binary op ``f``, as half_unary (stride 0 broadcasts). */
WB_INLINE void half_binary(float (*f)(float, float), wb_lanes_store store, int dt,
                           const uint16_t *a, Py_ssize_t sa, const uint16_t *b, Py_ssize_t sb,
                           uint16_t *restrict o, Py_ssize_t n) {
    float ta[WB_HLANES], tb[WB_HLANES];
    Py_ssize_t i = 0;
    for (; i + WB_HLANES <= n; i += WB_HLANES) {
        wb_half_lanes_load(dt, a + i * sa, sa, ta);
        wb_half_lanes_load(dt, b + i * sb, sb, tb);
        WB_LANES_LOOP
        for (int j = 0; j < WB_HLANES; j++) ta[j] = f(ta[j], tb[j]);
        store(dt, o + i, ta);
    }
    if (i == n) return;
    uint16_t at[WB_HLANES] = {0}, bt[WB_HLANES] = {0}, ot[WB_HLANES];
    for (Py_ssize_t j = 0; j < n - i; j++) at[j] = a[(i + j) * sa], bt[j] = b[(i + j) * sb];
    wb_half_lanes_load(dt, at, 1, ta);
    wb_half_lanes_load(dt, bt, 1, tb);
    WB_LANES_LOOP
    for (int j = 0; j < WB_HLANES; j++) ta[j] = f(ta[j], tb[j]);
    store(dt, ot, ta);
    memcpy(o + i, ot, sizeof(uint16_t) * (size_t)(n - i));
}

#define WB_BINARY(name, expr)                                                                  \
    static inline float b_##name##_1(float a, float b) { return (expr); }                     \
    static void b_##name##_f32(const float *restrict as, const float *restrict bs,             \
                               float *restrict o, Py_ssize_t n) {                             \
        for (Py_ssize_t i = 0; i < n; i++) o[i] = b_##name##_1(as[i], bs[i]);                 \
    }                                                                                         \
    WB_BF16NI_FN static void b_##name##_bf16ni(const uint16_t *a, Py_ssize_t sa,              \
                                               const uint16_t *b, Py_ssize_t sb,              \
                                               uint16_t *restrict o, Py_ssize_t n) {          \
        half_binary(b_##name##_1, wb_bf16ni_lanes_store, WB_BF16, a, sa, b, sb, o, n);        \
    }                                                                                         \
    static void b_##name##_half(int dt, const uint16_t *a, Py_ssize_t sa, const uint16_t *b,   \
                                Py_ssize_t sb, uint16_t *restrict o, Py_ssize_t n) {          \
        if (dt == WB_BF16 && wb_bf16ni_usable()) b_##name##_bf16ni(a, sa, b, sb, o, n);        \
        else if (dt == WB_BF16)                                                               \
            half_binary(b_##name##_1, wb_half_lanes_store, WB_BF16, a, sa, b, sb, o, n);      \
        else half_binary(b_##name##_1, wb_half_lanes_store, WB_F16, a, sa, b, sb, o, n);      \
    }                                                                                         \
    static void b_##name##_f64(const double *restrict as, const double *restrict bs,           \
                               double *restrict o, Py_ssize_t n) {                            \
        for (Py_ssize_t i = 0; i < n; i++) {                                                  \
            const double a = as[i], b = bs[i];                                                \
            o[i] = (expr);                                                                    \
        }                                                                                     \
    }

WB_BINARY(add, a + b)
WB_BINARY(sub, a - b)
WB_BINARY(mul, a * b)
WB_BINARY(div, a / b)
WB_BINARY(maximum, (a > b || a != a) ? a : b) /* NaN propagates, as numpy and PyTorch */
WB_BINARY(minimum, (a < b || a != a) ? a : b)

#define WB_CMP(name, expr)                                                                     \
    static void c_##name##_f32(const float *restrict as, const float *restrict bs,             \
                               uint8_t *restrict o, Py_ssize_t n) {                           \
        for (Py_ssize_t i = 0; i < n; i++) {                                                  \
            const float a = as[i], b = bs[i];                                                 \
            o[i] = (expr);                                                                    \
        }                                                                                     \
    }                                                                                         \
    static void c_##name##_f64(const double *restrict as, const double *restrict bs,           \
                               uint8_t *restrict o, Py_ssize_t n) {                           \
        for (Py_ssize_t i = 0; i < n; i++) {                                                  \
            const double a = as[i], b = bs[i];                                                \
            o[i] = (expr);                                                                    \
        }                                                                                     \
    }

WB_CMP(eq, a == b)
WB_CMP(ne, a != b)
WB_CMP(lt, a < b)
WB_CMP(le, a <= b)
WB_CMP(gt, a > b)
WB_CMP(ge, a >= b)

typedef struct {
    const char *name;
    wb_binary_f32 f32;
    wb_binary_f64 f64;
    wb_binary_half half;
} wb_binary_op;
typedef struct {
    const char *name;
    wb_cmp_f32 f32;
    wb_cmp_f64 f64;
} wb_cmp_op;

#define WB_B(name) {#name, b_##name##_f32, b_##name##_f64, b_##name##_half}
static const wb_binary_op binary_ops[] = {
    WB_B(add), WB_B(sub), WB_B(mul), WB_B(div), WB_B(maximum), WB_B(minimum),
};
#define WB_NBINARY ((int)(sizeof(binary_ops) / sizeof(binary_ops[0])))
#define WB_C(name) {#name, c_##name##_f32, c_##name##_f64}
static const wb_cmp_op cmp_ops[] = {WB_C(eq), WB_C(ne), WB_C(lt), WB_C(le), WB_C(gt), WB_C(ge)};
#define WB_NCMP ((int)(sizeof(cmp_ops) / sizeof(cmp_ops[0])))

/* ---- chunk callbacks ------------------------------------------------------------------- */
typedef struct {
    const void *fn;
    char *in[WB_MAXIN];
    int dtype[WB_MAXIN];
    char *out;
    int out_dtype;
    double p0, p1;
} ew_ctx;

static void unary_chunk(const void *c, const Py_ssize_t *off, const Py_ssize_t *st,
                        Py_ssize_t o, Py_ssize_t n) {
    const ew_ctx *ctx = c;
    const wb_unary_op *op = ctx->fn;
    if (ctx->dtype[0] == WB_F64) {
        double bx[WB_CHUNK];
        op->f64(wb_load_f64(ctx->in[0], off[0], st[0], n, bx), (double *)ctx->out + o, n,
                ctx->p0, ctx->p1);
        return;
    }
    const float p0 = (float)ctx->p0, p1 = (float)ctx->p1;
    if (ctx->dtype[0] != WB_F32) {
        op->half(ctx->dtype[0], (const uint16_t *)ctx->in[0] + off[0], st[0],
                 (uint16_t *)ctx->out + o, n, p0, p1);
        return;
    }
    float bx[WB_CHUNK];
    op->f32(wb_load_f32(WB_F32, ctx->in[0], off[0], st[0], n, bx), (float *)ctx->out + o, n, p0,
            p1);
}

static void binary_chunk(const void *c, const Py_ssize_t *off, const Py_ssize_t *st,
                         Py_ssize_t o, Py_ssize_t n) {
    const ew_ctx *ctx = c;
    const wb_binary_op *op = ctx->fn;
    if (ctx->dtype[0] == WB_F64) {
        double ba[WB_CHUNK], bb[WB_CHUNK];
        op->f64(wb_load_f64(ctx->in[0], off[0], st[0], n, ba),
                wb_load_f64(ctx->in[1], off[1], st[1], n, bb), (double *)ctx->out + o, n);
        return;
    }
    if (ctx->dtype[0] != WB_F32) {
        op->half(ctx->dtype[0], (const uint16_t *)ctx->in[0] + off[0], st[0],
                 (const uint16_t *)ctx->in[1] + off[1], st[1], (uint16_t *)ctx->out + o, n);
        return;
    }
    float ba[WB_CHUNK], bb[WB_CHUNK];
    op->f32(wb_load_f32(WB_F32, ctx->in[0], off[0], st[0], n, ba),
            wb_load_f32(WB_F32, ctx->in[1], off[1], st[1], n, bb), (float *)ctx->out + o, n);
}

static void cmp_chunk(const void *c, const Py_ssize_t *off, const Py_ssize_t *st, Py_ssize_t o,
                      Py_ssize_t n) {
    const ew_ctx *ctx = c;
    const wb_cmp_op *op = ctx->fn;
    if (ctx->dtype[0] == WB_F64) {
        double ba[WB_CHUNK], bb[WB_CHUNK];
        op->f64(wb_load_f64(ctx->in[0], off[0], st[0], n, ba),
                wb_load_f64(ctx->in[1], off[1], st[1], n, bb), (uint8_t *)ctx->out + o, n);
        return;
    }
    float ba[WB_CHUNK], bb[WB_CHUNK];
    op->f32(wb_load_f32(ctx->dtype[0], ctx->in[0], off[0], st[0], n, ba),
            wb_load_f32(ctx->dtype[1], ctx->in[1], off[1], st[1], n, bb),
            (uint8_t *)ctx->out + o, n);
}

#define WB_WHERE_LOOP(T)                                                                       \
    do {                                                                                      \
        const T *a = (const T *)ctx->in[1] + off[1], *b = (const T *)ctx->in[2] + off[2];      \
        T *out = (T *)ctx->out + o;                                                           \
        for (Py_ssize_t i = 0; i < n; i++) out[i] = cond[i * st[0]] ? a[i * st[1]] : b[i * st[2]]; \
    } while (0)

static void where_chunk(const void *c, const Py_ssize_t *off, const Py_ssize_t *st, Py_ssize_t o,
                        Py_ssize_t n) {
    const ew_ctx *ctx = c;
    const uint8_t *cond = (const uint8_t *)ctx->in[0] + off[0];
    switch (wb_itemsize[ctx->out_dtype]) {
    case 1: WB_WHERE_LOOP(uint8_t); break;
    case 2: WB_WHERE_LOOP(uint16_t); break;
    case 4: WB_WHERE_LOOP(uint32_t); break;
    default: WB_WHERE_LOOP(uint64_t); break;
    }
}

/* ---- Python entry points ----------------------------------------------------------------- */
static int op_code(PyObject *arg, int count, const char *what) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return -1;
    if (code < 0 || code >= count) {
        PyErr_Format(PyExc_ValueError, "%s: no op with code %ld", what, code);
        return -1;
    }
    return (int)code;
}

static int check_nargs(Py_ssize_t nargs, Py_ssize_t want, const char *what) {
    if (nargs == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s: expected %zd arguments, found %zd", what, want, nargs);
    return -1;
}

static int check_dtype(int ok, const char *what) {
    if (ok) return 0;
    PyErr_Format(PyExc_TypeError, "%s: unsupported dtype combination", what);
    return -1;
}

/* A new C-contiguous array of ``layout``'s shape and ``dtype`` (numpy.empty), parsed into
 * ``out`` as the output of operands of ``x``'s shape; NULL on error. */
static PyObject *new_output(wb_operand *out, PyObject *layout, PyObject *dtype,
                            const wb_operand *x) {
    PyObject *shape = wb_layout_shape(layout);
    PyObject *result = shape ? wb_empty(shape, dtype) : NULL;
    Py_XDECREF(shape);
    if (result && wb_output_parse(out, result, x->ndim, x->shape) < 0) Py_CLEAR(result);
    return result;
}

/* unary(code, x, layout, p0, p1) -> a new C-contiguous array of x's dtype, or None where the
 * kernels do not apply (x not exactly a numpy array, or not of a float dtype): the caller takes
 * numpy's path then. ``layout`` is a ``Layout`` object, read here. */
static PyObject *py_unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (check_nargs(nargs, 5, "unary") < 0) return NULL;
    int code = op_code(args[0], WB_NUNARY, "unary");
    if (code < 0) return NULL;
    double p0 = PyFloat_AsDouble(args[3]), p1 = PyFloat_AsDouble(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (Py_TYPE(args[1]) != wb_ndarray_type) Py_RETURN_NONE;
    wb_operand x, out;
    if (wb_operand_of_layout(&x, args[1], args[2], "x") < 0) return NULL;
    if (!wb_is_float(x.dtype)) Py_RETURN_NONE;
    PyObject *result = new_output(&out, args[2], wb_array_dtype(args[1]), &x);
    const wb_operand *in[1] = {&x};
    wb_iter it;
    if (!result || wb_iter_init(&it, 1, in, x.ndim, x.shape) < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    ew_ctx ctx = {&unary_ops[code], {x.data}, {x.dtype}, out.data, out.dtype, p0, p1};
    wb_iter_run(&it, unary_chunk, &ctx, unary_ops[code].min_parallel);
    return result;
}

/* binary/cmp(code, a, a_layout, b, b_layout) -> a new C-contiguous array of a's dtype (bool for
 * cmp), or None where the kernels do not apply (an operand not exactly a numpy array, dtypes not
 * one float type): the caller takes numpy's path then. The layouts are ``Layout`` objects of
 * one shape (broadcast already), read here: the dispatch of ``a + b`` is this one call. */
static PyObject *two_operands(PyObject *const *args, Py_ssize_t nargs, int count, int is_cmp) {
    const char *what = is_cmp ? "cmp" : "binary";
    if (check_nargs(nargs, 5, what) < 0) return NULL;
    int code = op_code(args[0], count, what);
    if (code < 0) return NULL;
    PyObject *a_array = args[1], *b_array = args[3];
    if (Py_TYPE(a_array) != wb_ndarray_type || Py_TYPE(b_array) != wb_ndarray_type)
        Py_RETURN_NONE;
    wb_operand a, b, out;
    if (wb_operand_of_layout(&a, a_array, args[2], "a") < 0 ||
        wb_operand_of_layout(&b, b_array, args[4], "b") < 0)
        return NULL;
    if (b.ndim != a.ndim || memcmp(a.shape, b.shape, a.ndim * sizeof(Py_ssize_t))) {
        PyErr_Format(PyExc_ValueError, "%s: the layouts' shapes differ", what);
        return NULL;
    }
    if (!wb_is_float(a.dtype) || a.dtype != b.dtype) Py_RETURN_NONE;
    PyObject *dtype = is_cmp ? wb_bool_dtype : wb_array_dtype(a_array);
    PyObject *result = new_output(&out, args[2], dtype, &a);
    const wb_operand *in[2] = {&a, &b};
    wb_iter it;
    if (!result || wb_iter_init(&it, 2, in, a.ndim, a.shape) < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    ew_ctx ctx = {is_cmp ? (const void *)&cmp_ops[code] : (const void *)&binary_ops[code],
                  {a.data, b.data}, {a.dtype, b.dtype}, out.data, out.dtype, 0, 0};
    wb_iter_run(&it, is_cmp ? cmp_chunk : binary_chunk, &ctx, WB_PAR_CHEAP);
    return result;
}

static PyObject *py_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return two_operands(args, nargs, WB_NBINARY, 0);
}

static PyObject *py_cmp(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return two_operands(args, nargs, WB_NCMP, 1);
}

/* where(c, c_offset, c_strides, a, a_offset, a_strides, b, b_offset, b_strides, out, shape) */
static PyObject *py_where(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (check_nargs(nargs, 11, "where") < 0) return NULL;
    wb_operand c, a, b, out;
    if (wb_operand_parse(&c, args[0], args[1], args[10], args[2], "condition") < 0 ||
        wb_operand_parse(&a, args[3], args[4], args[10], args[5], "on_true") < 0 ||
        wb_operand_parse(&b, args[6], args[7], args[10], args[8], "on_false") < 0 ||
        wb_output_parse(&out, args[9], a.ndim, a.shape) < 0)
        return NULL;
    int ok = c.dtype == WB_BOOL && a.dtype == b.dtype && a.dtype == out.dtype;
    if (check_dtype(ok, "where") < 0) return NULL;
    const wb_operand *in[3] = {&c, &a, &b};
    wb_iter it;
    if (wb_iter_init(&it, 3, in, a.ndim, a.shape) < 0) return NULL;
    ew_ctx ctx = {NULL, {c.data, a.data, b.data}, {c.dtype, a.dtype, b.dtype}, out.data,
                  out.dtype, 0, 0};
    wb_iter_run(&it, where_chunk, &ctx, WB_PAR_CHEAP);
    Py_RETURN_NONE;
}

#define WB_NAMES(fn, table, count)                                                             \
    static PyObject *fn(PyObject *self, PyObject *unused) {                                   \
        PyObject *t = PyTuple_New(count);                                                     \
        if (!t) return NULL;                                                                  \
        for (int i = 0; i < count; i++) {                                                     \
            PyObject *s = PyUnicode_FromString(table[i].name);                                \
            if (!s) { Py_DECREF(t); return NULL; }                                            \
            PyTuple_SET_ITEM(t, i, s);                                                        \
        }                                                                                     \
        return t;                                                                             \
    }
WB_NAMES(py_unary_ops, unary_ops, WB_NUNARY)
WB_NAMES(py_binary_ops, binary_ops, WB_NBINARY)
WB_NAMES(py_cmp_ops, cmp_ops, WB_NCMP)

PyMethodDef wb_elementwise_methods[] = {
    {"unary", (PyCFunction)(void (*)(void))py_unary, METH_FASTCALL,
     "unary(code, x, layout, p0, p1) -> new array op(x), or None where numpy's path runs"},
    {"binary", (PyCFunction)(void (*)(void))py_binary, METH_FASTCALL,
     "binary(code, a, a_layout, b, b_layout) -> new array, or None where numpy's path runs"},
    {"cmp", (PyCFunction)(void (*)(void))py_cmp, METH_FASTCALL,
     "cmp(code, a, a_layout, b, b_layout) -> new bool array, or None where numpy's runs"},
    {"where", (PyCFunction)(void (*)(void))py_where, METH_FASTCALL,
     "where(c, c_off, c_strides, a, a_off, a_strides, b, b_off, b_strides, out, shape)"},
    {"unary_ops", py_unary_ops, METH_NOARGS, "Names of the unary ops, in code order."},
    {"binary_ops", py_binary_ops, METH_NOARGS, "Names of the binary ops, in code order."},
    {"cmp_ops", py_cmp_ops, METH_NOARGS, "Names of the comparisons, in code order."},
    {NULL, NULL, 0, NULL},
};
