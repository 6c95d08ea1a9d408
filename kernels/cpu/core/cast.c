/* Casts between every dtype (bool, u8, u32, i8, i16, i32, i64, f16, bf16, f32, f64): a strided
 * input into a contiguous output, rounded as numpy rounds. A chunk is read into the widest type
 * of its kind (f32 for f32/f16/bf16, f64, or i64 for the integers and bool) and written from
 * there: floats round to nearest even (f64 -> f16/bf16 in one rounding, through round-to-odd),
 * NaN stays NaN, floats truncate toward zero into integers (out of range as x86 does: cast.h),
 * integers wrap as C's casts. */
#include "cast.h"
#include "convert.h"
#include "iter.h"

/* Elements above which a cast runs on several threads (memory-bound, as a copy). */
#define WB_CAST_PAR (1 << 16)

typedef struct {
    const char *in;
    int src;
    char *out;
    int dst;
} cast_ctx;

static int is_int(int dt) { return dt <= WB_I64 || dt == WB_I8; }

/* Elements of an integer or bool operand as i64 (unsigned zero-, signed sign-extended). */
static void load_i64(int dt, const char *base, Py_ssize_t off, Py_ssize_t s, Py_ssize_t n,
                     int64_t *restrict buf) {
#define WB_LOAD(T)                                                                            \
    do {                                                                                      \
        const T *p = (const T *)base + off;                                                   \
        for (Py_ssize_t i = 0; i < n; i++) buf[i] = (int64_t)p[i * s];                        \
    } while (0)
    switch (dt) {
    case WB_BOOL: case WB_U8: WB_LOAD(uint8_t); break;
    case WB_U32: WB_LOAD(uint32_t); break;
    case WB_I8: WB_LOAD(int8_t); break;
    case WB_I16: WB_LOAD(int16_t); break;
    case WB_I32: WB_LOAD(int32_t); break;
    default: WB_LOAD(int64_t); break;
    }
#undef WB_LOAD
}

/* ``n`` values of ``src`` converted to the integer/bool output at element ``o``: u32 and i64
 * by E64(v), u8 by EU8(v), i8/i16/i32 by E32(v), each then wrapped to its width. */
#define WB_STORE_INT(dst, out, o, src, n, E64, E32, EU8)                                      \
    do {                                                                                      \
        switch (dst) {                                                                        \
        case WB_BOOL: { uint8_t *q = (uint8_t *)(out) + (o);                                  \
            for (Py_ssize_t i = 0; i < (n); i++) q[i] = (src)[i] != 0; } break;               \
        case WB_U8: { uint8_t *q = (uint8_t *)(out) + (o);                                    \
            for (Py_ssize_t i = 0; i < (n); i++) q[i] = (uint8_t)EU8((src)[i]); } break;      \
        case WB_U32: { uint32_t *q = (uint32_t *)(out) + (o);                                 \
            for (Py_ssize_t i = 0; i < (n); i++) q[i] = (uint32_t)E64((src)[i]); } break;     \
        case WB_I8: { int8_t *q = (int8_t *)(out) + (o);                                      \
            for (Py_ssize_t i = 0; i < (n); i++) q[i] = (int8_t)E32((src)[i]); } break;       \
        case WB_I16: { int16_t *q = (int16_t *)(out) + (o);                                   \
            for (Py_ssize_t i = 0; i < (n); i++) q[i] = (int16_t)E32((src)[i]); } break;      \
        case WB_I32: { int32_t *q = (int32_t *)(out) + (o);                                   \
            for (Py_ssize_t i = 0; i < (n); i++) q[i] = (int32_t)E32((src)[i]); } break;      \
        default: { int64_t *q = (int64_t *)(out) + (o);                                       \
            for (Py_ssize_t i = 0; i < (n); i++) q[i] = E64((src)[i]); } break;               \
        }                                                                                     \
    } while (0)
#define WB_AS_IS(v) (v)

static void store_from_f32(int dst, char *out, Py_ssize_t o, const float *restrict v,
                           Py_ssize_t n) {
    switch (dst) {
    case WB_F32: memmove((float *)out + o, v, sizeof(float) * (size_t)n); return;
    case WB_F16: case WB_BF16: wb_store_f32(dst, out, o, v, n); return;
    case WB_F64: {
        double *q = (double *)out + o;
        for (Py_ssize_t i = 0; i < n; i++) q[i] = v[i];
        return;
    }
    default: WB_STORE_INT(dst, out, o, v, n, wb_f64_to_i64, wb_f64_to_i32, wb_f64_to_i32); return;
    }
}

static void store_from_f64(int dst, char *out, Py_ssize_t o, const double *restrict v,
                           Py_ssize_t n) {
    switch (dst) {
    case WB_F64: memmove((double *)out + o, v, sizeof(double) * (size_t)n); return;
    case WB_F32: {
        float *q = (float *)out + o;
        for (Py_ssize_t i = 0; i < n; i++) q[i] = (float)v[i];
        return;
    }
    case WB_F16: {
        uint16_t *q = (uint16_t *)out + o;
        for (Py_ssize_t i = 0; i < n; i++) q[i] = wb_f64_to_f16(v[i]);
        return;
    }
    case WB_BF16: {
        uint16_t *q = (uint16_t *)out + o;
        for (Py_ssize_t i = 0; i < n; i++) q[i] = wb_f64_to_bf16(v[i]);
        return;
    }
    /* f64 -> u8 as PyTorch (through i64); numpy goes through i32 (they differ beyond 2^31) */
    default: WB_STORE_INT(dst, out, o, v, n, wb_f64_to_i64, wb_f64_to_i32, wb_f64_to_i64); return;
    }
}

static void store_from_i64(int dst, char *out, Py_ssize_t o, const int64_t *restrict v,
                           Py_ssize_t n) {
    switch (dst) {
    case WB_F64: {
        double *q = (double *)out + o;
        for (Py_ssize_t i = 0; i < n; i++) q[i] = (double)v[i];
        return;
    }
    case WB_F32: {
        float *q = (float *)out + o;
        for (Py_ssize_t i = 0; i < n; i++) q[i] = (float)v[i]; /* one rounding */
        return;
    }
    case WB_F16: { /* |v| > 2^24 is inf in f16 anyway: the f32 step loses nothing */
        uint16_t *q = (uint16_t *)out + o;
        for (Py_ssize_t i = 0; i < n; i++) q[i] = wb_f32_to_f16((float)v[i]);
        return;
    }
    case WB_BF16: {
        uint16_t *q = (uint16_t *)out + o;
        for (Py_ssize_t i = 0; i < n; i++) q[i] = wb_f64_to_bf16((double)v[i]);
        return;
    }
    default: WB_STORE_INT(dst, out, o, v, n, WB_AS_IS, WB_AS_IS, WB_AS_IS); return;
    }
}

static void cast_chunk(const void *c, const Py_ssize_t *off, const Py_ssize_t *st, Py_ssize_t o,
                       Py_ssize_t n) {
    const cast_ctx *ctx = c;
    if (ctx->src == WB_F64) {
        double buf[WB_CHUNK];
        store_from_f64(ctx->dst, ctx->out, o, wb_load_f64(ctx->in, off[0], st[0], n, buf), n);
    } else if (is_int(ctx->src)) {
        int64_t buf[WB_CHUNK];
        load_i64(ctx->src, ctx->in, off[0], st[0], n, buf);
        store_from_i64(ctx->dst, ctx->out, o, buf, n);
    } else if (ctx->dst == WB_F32) { /* widen straight into the output */
        float *q = (float *)ctx->out + o;
        const float *v = wb_load_f32(ctx->src, ctx->in, off[0], st[0], n, q);
        if (v != q) memcpy(q, v, sizeof(float) * (size_t)n);
    } else {
        float buf[WB_CHUNK];
        store_from_f32(ctx->dst, ctx->out, o, wb_load_f32(ctx->src, ctx->in, off[0], st[0], n, buf),
                       n);
    }
}

/* cast(x, offset, shape, strides, out): out (contiguous, its own dtype) = x converted. */
static PyObject *py_cast(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "cast: expected 5 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, out;
    if (wb_operand_parse(&x, args[0], args[1], args[2], args[3], "x") < 0 ||
        wb_output_parse(&out, args[4], x.ndim, x.shape) < 0)
        return NULL;
    const wb_operand *in[1] = {&x};
    wb_iter it;
    if (wb_iter_init(&it, 1, in, x.ndim, x.shape) < 0) return NULL;
    cast_ctx ctx = {x.data, x.dtype, out.data, out.dtype};
    wb_iter_run(&it, cast_chunk, &ctx, WB_CAST_PAR);
    Py_RETURN_NONE;
}

PyMethodDef wb_cast_methods[] = {
    {"cast", (PyCFunction)(void (*)(void))py_cast, METH_FASTCALL,
     "cast(x, offset, shape, strides, out): out = x in out's dtype (contiguous out)."},
    {NULL, NULL, 0, NULL},
};
