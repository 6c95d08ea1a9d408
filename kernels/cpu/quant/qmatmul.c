/* Python entry points of the quantized family (METH_FASTCALL, buffers in, GIL released):
 *
 *   qmatmul(raw, type_id, n, k, x, out)    out (m, n) = x (m, k) @ W.T, W (n, k) in raw blocks
 *   qmatmul_glu(gate, up, type_id, f, k, x, gelu, out)
 *                                          out (m, f) = act(x @ G.T) * (x @ U.T) on AMX
 *                                          (True), or nothing done (False: no AMX, m < 32)
 *   dequantize(raw, type_id, k, out)       out (rows, k) f32 = the values of rows of blocks
 *   quantize_activations(x, type_id, out)  x (m, k) f32 -> ggml Q8_0 / Q8_1 / Q8_K blocks
 *
 * qmatmul quantizes x once (Q8_1 for Q4_1/Q5_1, Q8_K for 256-element types, else Q8_0),
 * then threads over weight rows. Up to WB_QDOT_ROWS activation rows, a weight row's blocks
 * are unpacked in registers and meet all of them at once (qdot_raw.c, where the ISA and type
 * have it). From WB_AMX_MIN_ROWS rows on a CPU with AMX, x stays f32 and meets bf16 weight
 * panels in tiles (qgemm_amx.c). More rows otherwise go to the panel micro-kernel (qgemm.c:
 * panels of decoded weight rows times tiles of activation rows, AVX-512 VNNI or AVX2); where
 * the ISA has none, or below its crossover, each thread decodes a row into its scratch
 * (quant.h) and takes its dot products with WB_QDOT_ROWS activation rows at a time. */
#include "quant.h"

#include <stdlib.h>

/* Below this many weight values the work stays on one thread (a guess, not yet measured). */
#define WB_QUANT_PARALLEL_MIN (1 << 16)
/* From this many activation rows the AMX kernel runs where it can (measured crossover with
 * the VNNI kernel: benchmarks/bench_quantized.py). */
#define WB_AMX_MIN_ROWS 32

typedef struct {
    Py_buffer view;
    int held;
} wb_buf;

static void release(wb_buf *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

/* A C-contiguous buffer; fmt "f": float32 items, NULL: any bytes. */
static int get_buffer(PyObject *obj, wb_buf *b, const char *op, const char *what, const char *fmt,
                      int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %s must be a C-contiguous%s %s buffer, found %s", op,
                     what, writable ? " writable" : "", fmt ? "float32" : "byte",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    b->held = 1;
    if (fmt) {
        const char *f = b->view.format ? b->view.format : "B";
        if (f[0] == '<' || f[0] == '=' || f[0] == '@') f++;
        if (strcmp(f, "f") != 0 || b->view.itemsize != 4) {
            PyErr_Format(PyExc_TypeError, "%s: %s must hold float32 values, found format '%s'",
                         op, what, b->view.format ? b->view.format : "B");
            release(b);
            return -1;
        }
    }
    return 0;
}

static const wb_qtype *get_type(PyObject *obj, const char *op) {
    long id = PyLong_AsLong(obj);
    if (id == -1 && PyErr_Occurred()) return NULL;
    const wb_qtype *t = wb_qtype_find((int)id);
    if (!t) PyErr_Format(PyExc_ValueError, "%s: ggml type id %ld has no native kernel", op, id);
    return t;
}

static int check_k(const wb_qtype *t, int64_t k, const char *op) {
    if (k <= 0 || k % t->block) {
        PyErr_Format(PyExc_ValueError, "%s: k = %lld must be a positive multiple of %s's block "
                     "size %d", op, (long long)k, t->name, t->block);
        return -1;
    }
    return 0;
}

static int get_i64(PyObject *obj, int64_t *v) {
    *v = PyLong_AsLongLong(obj);
    return (*v == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Quantized activations of m rows, in one allocation (base). */
typedef struct {
    void *base;
    int8_t *q;
    float *d, *s;
    int16_t *bsum;
    float *dv, *sv; /* the 8-lane forms (quant.h), when lanes */
    int32_t *nsum;
} wb_acts;

/* Carves a section of n bytes, 64-byte aligned, followed by 64 zero bytes (a SIMD step past
 * the last row's end reads zeros, never stale heap); with base NULL it only counts. The
 * first layout_acts call sizes and allocates, the second places the sections. */
static void *section(char *base, size_t *at, size_t n) {
    void *p = base ? base + *at : NULL;
    if (base) memset(base + *at + n, 0, 64);
    *at += (n + 64 + 63) / 64 * 64;
    return p;
}

static int layout_acts(const wb_qtype *t, int64_t m, int64_t k, int lanes, wb_acts *a) {
    const size_t mk = (size_t)(m * k), nb = mk / (size_t)t->scale_block;
    const int has_s = t->mins == WB_MINS_SUM;
    size_t at = 0;
    char *base = a->base;
    a->q = section(base, &at, mk);
    a->d = section(base, &at, 4 * nb);
    a->s = has_s ? section(base, &at, 4 * (mk / 32)) : NULL;
    a->bsum = section(base, &at, 2 * (mk / 16));
    a->dv = lanes ? section(base, &at, mk) : NULL; /* 8 f32 per 32 values: mk bytes */
    a->nsum = lanes ? section(base, &at, mk) : NULL;
    a->sv = lanes && has_s ? section(base, &at, mk) : NULL;
    if (!base) {
        a->base = aligned_alloc(64, at); /* at: a multiple of 64 */
        if (!a->base) return -1;
    }
    return 0;
}

/* lanes: also the 8-lane forms the small-batch kernels of 32-element types take. */
static int quantize_rows(const wb_qtype *t, const float *x, int64_t m, int64_t k, wb_acts *a,
                         int threads, int lanes) {
    const int B = t->scale_block;
    lanes = lanes && B == 32;
    a->base = NULL;
    if (layout_acts(t, m, k, lanes, a) < 0) return -1;
    layout_acts(t, m, k, lanes, a);
    const int offset = wb_level_offset(t->type_id);
    if (m < threads) threads = m > 1 ? (int)m : 1; /* one row per thread at most */
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t r = 0; r < m; r++) {
        if (B == 256) {
            wb_quantize_q8_k(x + r * k, k, a->q + r * k, a->d + r * k / 256, a->bsum + r * k / 16);
            continue;
        }
        float *s = a->s ? a->s + r * k / 32 : NULL;
        wb_quantize_q8_32(x + r * k, k, a->q + r * k, a->d + r * k / 32, s, a->bsum + r * k / 16);
        if (lanes)
            wb_act_lanes(a->bsum + r * k / 16, a->d + r * k / 32, s, k, offset, a->dv + r * k / 4,
                         a->nsum + r * k / 4, a->sv ? a->sv + r * k / 4 : NULL);
    }
    return 0;
}

static void free_acts(wb_acts *a) { free(a->base); }

static int threads_for(int64_t values) {
    return values < WB_QUANT_PARALLEL_MIN ? 1 : wb_get_num_threads();
}

/* Activation rows [r0, r0 + rows) as the dot kernels take them. */
static void act_rows(const wb_acts *acts, int B, int64_t k, int64_t r0, int rows, wb_arow *a) {
    for (int r = 0; r < rows; r++) {
        int64_t row = r0 + r;
        a[r].q = acts->q + row * k;
        a[r].d = acts->d + row * k / B;
        a[r].s = acts->s ? acts->s + row * k / 32 : NULL;
        a[r].bsum = acts->bsum + row * k / 16;
        a[r].dv = acts->dv ? acts->dv + row * k / 4 : NULL;
        a[r].nsum = acts->nsum ? acts->nsum + row * k / 4 : NULL;
        a[r].sv = acts->sv ? acts->sv + row * k / 4 : NULL;
    }
}

/* out (m, n) from the raw rows, m <= WB_QDOT_ROWS: no scratch, nothing to fail. */
static void qmatmul_raw(wb_qdot_raw_fn dot, const wb_acts *acts, int B, const uint8_t *raw,
                        int64_t row_bytes, int64_t n, int64_t k, int m, float *out, int threads) {
    wb_arow a[WB_QDOT_ROWS];
    act_rows(acts, B, k, 0, m, a);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t i = 0; i < n; i++) {
        float y[WB_QDOT_ROWS];
        dot(raw + i * row_bytes, a, m, k, y);
        for (int r = 0; r < m; r++) out[r * n + i] = y[r];
    }
}

/* Rows [0, n) of W times the m activation rows; returns -1 when out of memory. */
static int qmatmul_run(const wb_qtype *t, const uint8_t *raw, int64_t n, int64_t k,
                       const float *x, int64_t m, float *out) {
    int threads = threads_for(n * k);
    if (m >= WB_AMX_MIN_ROWS) {
        const int rc = wb_qgemm_amx(t, raw, n, k, x, m, out, threads);
        if (rc != 1) return rc; /* 1: no AMX here, the integer kernels below run */
    }
    wb_acts acts = {0};
    wb_qdot_raw_fn raw_dot = m > 0 && m <= WB_QDOT_ROWS ? wb_qdot_raw_find(t) : NULL;
    if (quantize_rows(t, x, m, k, &acts, threads, raw_dot != NULL) < 0) {
        free_acts(&acts);
        return -1;
    }
    const int64_t row_bytes = k / t->block * t->bytes;
    const int B = t->scale_block;
    if (raw_dot) {
        qmatmul_raw(raw_dot, &acts, B, raw, row_bytes, n, k, (int)m, out, threads);
        free_acts(&acts);
        return 0;
    }
    if (m > WB_QDOT_ROWS) {
        const int rc = wb_qgemm(t, raw, n, k, m, acts.q, acts.d, acts.s, acts.bsum, out, threads);
        if (rc != 1) { /* 1: no panel kernel here for m rows, the loops below run */
            free_acts(&acts);
            return rc;
        }
    }
    int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
    {
        wb_wrow w;
        void *scratch = wb_alloc_row(t, k, &w);
        if (!scratch) failed = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            if (!scratch) continue;
            wb_decode_row(t, raw + i * row_bytes, k, &w);
            for (int64_t r0 = 0; r0 < m; r0 += WB_QDOT_ROWS) {
                int rows = m - r0 < WB_QDOT_ROWS ? (int)(m - r0) : WB_QDOT_ROWS;
                wb_arow a[WB_QDOT_ROWS];
                float y[WB_QDOT_ROWS];
                act_rows(&acts, B, k, r0, rows, a);
                wb_qdot_rows(t, &w, a, rows, k, y);
                for (int r = 0; r < rows; r++) out[(r0 + r) * n + i] = y[r];
            }
        }
        free(scratch);
    }
    free_acts(&acts);
    return failed ? -1 : 0;
}

/* The sizes of a product: raw holds an (n, k) weight of type t, x (m, k) and out (m, n)
 * float32 values; sets m. -1 with an exception. */
static int check_sizes(const char *op, const wb_qtype *t, int64_t n, int64_t k, const wb_buf *raw,
                       const wb_buf *x, const wb_buf *out, int64_t *m) {
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "%s: n = %lld < 0", op, (long long)n);
        return -1;
    }
    const int64_t want = n * (k / t->block) * t->bytes, xs = x->view.len / 4;
    *m = xs / k;
    if (raw->view.len != want) {
        PyErr_Format(PyExc_ValueError, "%s: a (%lld, %lld) %s weight needs %lld bytes, found %zd",
                     op, (long long)n, (long long)k, t->name, (long long)want, raw->view.len);
        return -1;
    }
    if (xs % k) {
        PyErr_Format(PyExc_ValueError, "%s: x has %lld values, not a multiple of k = %lld", op,
                     (long long)xs, (long long)k);
        return -1;
    }
    if (out->view.len / 4 != *m * n) {
        PyErr_Format(PyExc_ValueError, "%s: out must hold %lld x %lld float32 values, found %zd",
                     op, (long long)*m, (long long)n, out->view.len / 4);
        return -1;
    }
    return 0;
}

static PyObject *qmatmul(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *op = "qmatmul";
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "qmatmul(raw, type_id, n, k, x, out): expected 6 "
                     "arguments, found %zd", nargs);
        return NULL;
    }
    const wb_qtype *t = get_type(args[1], op);
    int64_t n, k, m;
    if (!t || get_i64(args[2], &n) < 0 || get_i64(args[3], &k) < 0 || check_k(t, k, op) < 0)
        return NULL;
    wb_buf raw = {0}, x = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buffer(args[0], &raw, op, "raw", NULL, 0) < 0 ||
        get_buffer(args[4], &x, op, "x", "f", 0) < 0 ||
        get_buffer(args[5], &out, op, "out", "f", 1) < 0 ||
        check_sizes(op, t, n, k, &raw, &x, &out, &m) < 0)
        goto done;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = qmatmul_run(t, raw.view.buf, n, k, x.view.buf, m, out.view.buf);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    release(&raw);
    release(&x);
    release(&out);
    return result;
}

/* An LLM's gated unit in one product where the AMX kernel runs (else False: nothing done). */
static PyObject *qmatmul_glu(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *op = "qmatmul_glu";
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "qmatmul_glu(gate, up, type_id, f, k, x, gelu, out): "
                     "expected 8 arguments, found %zd", nargs);
        return NULL;
    }
    const wb_qtype *t = get_type(args[2], op);
    int64_t f, k, m;
    if (!t || get_i64(args[3], &f) < 0 || get_i64(args[4], &k) < 0 || check_k(t, k, op) < 0)
        return NULL;
    const int gelu = PyObject_IsTrue(args[6]);
    if (gelu < 0) return NULL;
    wb_buf gate = {0}, up = {0}, x = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buffer(args[0], &gate, op, "gate", NULL, 0) < 0 ||
        get_buffer(args[1], &up, op, "up", NULL, 0) < 0 ||
        get_buffer(args[5], &x, op, "x", "f", 0) < 0 ||
        get_buffer(args[7], &out, op, "out", "f", 1) < 0 ||
        check_sizes(op, t, f, k, &gate, &x, &out, &m) < 0 ||
        check_sizes(op, t, f, k, &up, &x, &out, &m) < 0)
        goto done;
    int rc = 1;
    if (m >= WB_AMX_MIN_ROWS) {
        Py_BEGIN_ALLOW_THREADS
        rc = wb_qgemm_amx_glu(t, gate.view.buf, up.view.buf, gelu, f, k, x.view.buf, m,
                              out.view.buf, threads_for(f * k));
        Py_END_ALLOW_THREADS
    }
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyBool_FromLong(rc == 0);
done:
    release(&gate);
    release(&up);
    release(&x);
    release(&out);
    return result;
}

/* out[e] = (d * sc) * q + dm * mn, in the order ggml and gguf-py use (bit-exact). */
static void expand_row(const wb_qtype *t, const wb_wrow *w, int64_t k, float *out) {
    const int B = t->scale_block;
    for (int64_t e = 0; e < k; e++) {
        int64_t b = e / B, j = e / 16;
        float scale = t->has_sc ? w->d[b] * (float)w->sc8[8 * j] : w->d[b];
        float v = scale * (float)w->q[e];
        if (t->mins == WB_MINS_SUM) v += w->dm[b];
        else if (t->mins == WB_MINS_SUB) v += w->dm[b] * (float)w->mn[j];
        out[e] = v;
    }
}

static PyObject *dequantize(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *op = "dequantize";
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "dequantize(raw, type_id, k, out): expected 4 arguments, "
                     "found %zd", nargs);
        return NULL;
    }
    const wb_qtype *t = get_type(args[1], op);
    int64_t k;
    if (!t || get_i64(args[2], &k) < 0 || check_k(t, k, op) < 0) return NULL;
    wb_buf raw = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buffer(args[0], &raw, op, "raw", NULL, 0) < 0 ||
        get_buffer(args[3], &out, op, "out", "f", 1) < 0)
        goto done;
    int64_t row_bytes = k / t->block * t->bytes, rows = raw.view.len / row_bytes;
    if (raw.view.len % row_bytes || out.view.len / 4 != rows * k) {
        PyErr_Format(PyExc_ValueError, "dequantize: %zd bytes of %s rows of %lld values need "
                     "a float32 out of %lld values, found %zd", raw.view.len, t->name,
                     (long long)k, (long long)(raw.view.len / row_bytes * k), out.view.len / 4);
        goto done;
    }
    int threads = threads_for(rows * k), failed = 0;
    const uint8_t *src = raw.view.buf;
    float *dst = out.view.buf;
    Py_BEGIN_ALLOW_THREADS
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
    {
        wb_wrow w;
        void *scratch = wb_alloc_row(t, k, &w);
        if (!scratch) failed = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < rows; i++) {
            if (!scratch) continue;
            wb_decode_row(t, src + i * row_bytes, k, &w);
            expand_row(t, &w, k, dst + i * k);
        }
        free(scratch);
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    release(&raw);
    release(&out);
    return result;
}

/* Activations in ggml's own block bytes, so tests can hold them against gguf-py. */
static PyObject *quantize_activations(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *op = "quantize_activations";
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "quantize_activations(x, type_id, out): expected 3 "
                     "arguments, found %zd", nargs);
        return NULL;
    }
    long id = PyLong_AsLong(args[1]);
    if (id == -1 && PyErr_Occurred()) return NULL;
    if (id != WB_Q8_0 && id != WB_Q8_1 && id != WB_Q8_K)
        return PyErr_Format(PyExc_ValueError, "%s: type id %ld is not Q8_0, Q8_1 or Q8_K", op, id);
    const int B = id == WB_Q8_K ? 256 : 32, bytes = id == WB_Q8_0 ? 34 : id == WB_Q8_1 ? 36 : 292;
    wb_buf x = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buffer(args[0], &x, op, "x", "f", 0) < 0 ||
        get_buffer(args[2], &out, op, "out", NULL, 1) < 0)
        goto done;
    int64_t k = x.view.len / 4, nb = k / B;
    if (k % B || out.view.len != nb * bytes) {
        PyErr_Format(PyExc_ValueError, "%s: x needs a multiple of %d values (found %lld) and "
                     "out %lld bytes (found %zd)", op, B, (long long)k, (long long)(nb * bytes),
                     out.view.len);
        goto done;
    }
    int8_t *q = malloc((size_t)k);
    float *d = malloc(sizeof(float) * (size_t)nb), *s = malloc(sizeof(float) * (size_t)nb);
    int16_t *bsum = malloc(sizeof(int16_t) * (size_t)(k / 16));
    if (q && d && s && bsum) {
        if (B == 256) wb_quantize_q8_k(x.view.buf, k, q, d, bsum);
        else wb_quantize_q8_32(x.view.buf, k, q, d, s, bsum);
        uint8_t *o = out.view.buf;
        for (int64_t b = 0; b < nb; b++, o += bytes) {
            if (B == 256) {
                memcpy(o, &d[b], 4);
                memcpy(o + 4, q + 256 * b, 256);
                memcpy(o + 260, bsum + 16 * b, 32);
                continue;
            }
            uint16_t h = wb_f32_to_f16(d[b]), hs = wb_f32_to_f16(s[b]);
            memcpy(o, &h, 2);
            if (id == WB_Q8_1) memcpy(o + 2, &hs, 2);
            memcpy(o + bytes - 32, q + 32 * b, 32);
        }
        result = Py_NewRef(Py_None);
    } else {
        PyErr_NoMemory();
    }
    free(q);
    free(d);
    free(s);
    free(bsum);
done:
    release(&x);
    release(&out);
    return result;
}

static PyObject *amx_status(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(wb_amx_status());
}

static PyObject *set_amx(PyObject *self, PyObject *on) {
    const int flag = PyObject_IsTrue(on);
    if (flag < 0) return NULL;
    return PyBool_FromLong(wb_amx_enable(flag));
}

PyMethodDef wb_quant_matmul_methods[] = {
    {"qmatmul", (PyCFunction)(void (*)(void))qmatmul, METH_FASTCALL,
     "qmatmul(raw, type_id, n, k, x, out): out (m, n) = x (m, k) @ W.T, W quantized."},
    {"qmatmul_glu", (PyCFunction)(void (*)(void))qmatmul_glu, METH_FASTCALL,
     "qmatmul_glu(gate, up, type_id, f, k, x, gelu, out): out (m, f) = act(x @ G.T) * "
     "(x @ U.T) in one product where AMX runs; whether it ran."},
    {"dequantize", (PyCFunction)(void (*)(void))dequantize, METH_FASTCALL,
     "dequantize(raw, type_id, k, out): rows of blocks -> float32 (rows, k)."},
    {"quantize_activations", (PyCFunction)(void (*)(void))quantize_activations, METH_FASTCALL,
     "quantize_activations(x, type_id, out): float32 -> Q8_0 / Q8_1 / Q8_K blocks."},
    {"amx_status", amx_status, METH_NOARGS,
     "'on', or why qmatmul's AMX kernel does not run."},
    {"set_amx", set_amx, METH_O,
     "set_amx(on): allow qmatmul's AMX kernel or not; whether it was allowed before."},
    {NULL, NULL, 0, NULL},
};
