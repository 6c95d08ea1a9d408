/* Scaled dot-product attention, flash style: out = softmax(q kᵀ · scale + mask) v without the
 * (L, S) score matrix. Each work item is one batch index and a block of WB_BQ queries; it
 * walks the keys in blocks of WB_BK, keeping per query the running maximum m, the running sum
 * l of exp(z - m) and the unnormalised output o (online softmax):
 *     m' = max(m, max_j z_j),  o' = o·e^(m-m') + Σ_j e^(z_j-m') v_j,  l' = l·e^(m-m') + Σ_j e^(z_j-m')
 * and writes o / l at the end (0 for a query whose keys are all masked, as PyTorch). Scores are
 * held transposed, (keys × queries), so the softmax statistics are plain vertical vector ops
 * and the two products are register-tiled broadcast-FMA loops. f16 / bf16 are computed in f32
 * and rounded once on store, f64 in f64. Items are spread over the threads. */
#include "convert.h" /* Python.h first: it sets feature macros math.h reads */
#include "vmath.h"

#include <math.h>
#include <stdlib.h>

#define WB_BQ 64 /* queries per block */
#define WB_BK 128 /* keys per block */
#define WB_MR 6  /* rows of a register tile (x 2 vectors): 12 accumulators */
/* Multiply-adds above which attention runs on several threads. */
#define WB_ATTN_PAR (1 << 18)

#if defined(__AVX512F__)
#define WB_VBYTES 64
#elif defined(__AVX__)
#define WB_VBYTES 32
#else
#define WB_VBYTES 16
#endif

typedef float wb_vf __attribute__((vector_size(WB_VBYTES)));
typedef double wb_vd __attribute__((vector_size(WB_VBYTES)));

/* a * b + c, fused where the ISA has it (gcc does not contract vector expressions under
 * -std=c11). */
static inline wb_vf wb_vf_fma(wb_vf a, wb_vf b, wb_vf c) {
#if defined(__AVX512F__)
    return (wb_vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__AVX__) && defined(__FMA__)
    return (wb_vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#elif defined(__aarch64__)
    return (wb_vf)vfmaq_f32((float32x4_t)c, (float32x4_t)a, (float32x4_t)b);
#else
    return a * b + c;
#endif
}

static inline wb_vd wb_vd_fma(wb_vd a, wb_vd b, wb_vd c) {
#if defined(__AVX512F__)
    return (wb_vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
#elif defined(__AVX__) && defined(__FMA__)
    return (wb_vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
#elif defined(__aarch64__)
    return (wb_vd)vfmaq_f64((float64x2_t)c, (float64x2_t)a, (float64x2_t)b);
#else
    return a * b + c;
#endif
}

static inline Py_ssize_t round_up(Py_ssize_t n, Py_ssize_t m) { return (n + m - 1) / m * m; }

/* The element offset of batch item ``b`` (C order over the leading ``nb`` dims). */
static Py_ssize_t batch_offset(const wb_operand *x, int nb, Py_ssize_t b) {
    Py_ssize_t off = x->offset;
    for (int d = nb - 1; d >= 0; d--) {
        off += (b % x->shape[d]) * x->strides[d];
        b /= x->shape[d];
    }
    return off;
}

typedef struct {
    const wb_operand *q, *k, *v, *mask; /* q (*B, L, E), k (*B, S, E), v (*B, S, Ev), mask NULL
                                           or (*B, L, S) bool (True = attend) or float (added) */
    char *out;                          /* contiguous (*B, L, Ev), q's dtype */
    void *lse;                          /* NULL or contiguous (*B, L), the compute type:
                                           log Σ_j exp(z_ij), -inf where every key is masked */
    int nb, causal;                     /* batch dims; keep key j for query i when j <= i */
    double scale;
    Py_ssize_t L, S, E, Ev;
} attn_ctx;

/* Keys per run when a mask block is transposed element by element. */
#define WB_MASK_RUN 16

#if WB_HAS_AVX2
/* The columns of the 8 × 8 block r[0..8) (rows), in place. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);     /* a0 b0 a1 b1 | a4 b4 a5 b5 */
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); /* a2 b2 a3 b3 | a6 b6 a7 b7 */
    }
    for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; h++) {
            u[i + 2 * h] = _mm256_shuffle_ps(t[i + h], t[i + 2 + h], _MM_SHUFFLE(1, 0, 1, 0));
            u[i + 2 * h + 1] = _mm256_shuffle_ps(t[i + h], t[i + 2 + h], _MM_SHUFFLE(3, 2, 3, 2));
        }
    for (int i = 0; i < 4; i++) { /* u[i]: column i | column i + 4 of rows 0-3; u[i + 4]: 4-7 */
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* mt[j][i] = the mask at (query i, key j) for i < bq8, j < bk8 (multiples of 8; keys
 * contiguous), a bool as 1 = attend or 0, by 8 × 8 register transposes. */
static void mask_tiles(const wb_operand *mk, Py_ssize_t off, Py_ssize_t msl, Py_ssize_t bq8,
                       Py_ssize_t bk8, float *mt, Py_ssize_t ps) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (Py_ssize_t i0 = 0; i0 < bq8; i0 += 8)
        for (Py_ssize_t j0 = 0; j0 < bk8; j0 += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++) {
                const Py_ssize_t o = off + (i0 + i) * msl + j0;
                if (mk->dtype == WB_BOOL) {
                    const uint8_t *keep = (const uint8_t *)mk->data + o;
                    const __m256i k32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)keep));
                    const __m256i zero = _mm256_cmpeq_epi32(k32, _mm256_setzero_si256());
                    r[i] = _mm256_andnot_ps(_mm256_castsi256_ps(zero), one);
                } else {
                    r[i] = _mm256_loadu_ps((const float *)mk->data + o);
                }
            }
            transpose8(r);
            for (int j = 0; j < 8; j++) _mm256_storeu_ps(mt + (j0 + j) * ps + i0, r[j]);
        }
}
#endif

/* ---- the kernel, once per compute type --------------------------------------------------- */
#define WB_T float
#define WB_V wb_vf
#define WB_VFMA wb_vf_fma
#define WB_EXP wb_expf
#define WB_LOG logf
#define WB_EXP_MIN (-87.0f) /* e^-87 = 1.6e-38 > FLT_MIN */
#define WB_MASK_TILES WB_HAS_AVX2
#define WB_DT WB_F32
#define WB_SUFFIX(name) name##_f32
#define WB_LOAD(dt, base, off, stride, n, buf) wb_load_f32(dt, base, off, stride, n, buf)
#define WB_STORE wb_store_line_f32
#include "attention_impl.h"

#define WB_T double
#define WB_V wb_vd
#define WB_VFMA wb_vd_fma
#define WB_EXP exp
#define WB_LOG log
#define WB_EXP_MIN (-708.0) /* e^-708 = 3.3e-308 > DBL_MIN */
#define WB_MASK_TILES 0
#define WB_DT WB_F64
#define WB_SUFFIX(name) name##_f64
#define WB_LOAD(dt, base, off, stride, n, buf) wb_load_f64(base, off, stride, n, buf)
#define WB_STORE wb_store_line_f64
#include "attention_impl.h"

/* ---- Python entry point ------------------------------------------------------------------ */
static int check_dims(const wb_operand *x, int nb, const wb_operand *q, const char *what) {
    if (x->ndim != nb + 2) {
        PyErr_Format(PyExc_ValueError, "attention: %s has %d dims, expected %d", what, x->ndim,
                     nb + 2);
        return -1;
    }
    for (int d = 0; d < nb; d++)
        if (x->shape[d] != q->shape[d]) {
            PyErr_Format(PyExc_ValueError,
                         "attention: %s batch dim %d is %zd, expected %zd (q's)", what, d,
                         x->shape[d], q->shape[d]);
            return -1;
        }
    return 0;
}

static int check_size(Py_ssize_t found, Py_ssize_t want, const char *what) {
    if (found == want) return 0;
    PyErr_Format(PyExc_ValueError, "attention: %s is %zd, expected %zd", what, found, want);
    return -1;
}

/* attention(q, q_off, q_shape, q_strides, k, k_off, k_shape, k_strides, v, v_off, v_shape,
 *           v_strides, mask, m_off, m_strides, causal, scale, out[, lse]) */
static PyObject *py_attention(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 18 && nargs != 19) {
        PyErr_Format(PyExc_TypeError, "attention: expected 18 or 19 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand q, k, v, mask, out;
    if (wb_operand_parse(&q, args[0], args[1], args[2], args[3], "q") < 0 ||
        wb_operand_parse(&k, args[4], args[5], args[6], args[7], "k") < 0 ||
        wb_operand_parse(&v, args[8], args[9], args[10], args[11], "v") < 0)
        return NULL;
    if (q.ndim < 2) {
        PyErr_Format(PyExc_ValueError, "attention: q needs at least 2 dims, found %d", q.ndim);
        return NULL;
    }
    const int nb = q.ndim - 2;
    if (check_dims(&k, nb, &q, "k") < 0 || check_dims(&v, nb, &q, "v") < 0) return NULL;
    const Py_ssize_t L = q.shape[nb], E = q.shape[nb + 1], S = k.shape[nb], Ev = v.shape[nb + 1];
    if (check_size(k.shape[nb + 1], E, "k's last dim (E)") < 0 ||
        check_size(v.shape[nb], S, "v's dim -2 (S)") < 0)
        return NULL;
    if (!wb_is_float(q.dtype) || k.dtype != q.dtype || v.dtype != q.dtype) {
        PyErr_SetString(PyExc_TypeError, "attention: q, k and v must share one float dtype");
        return NULL;
    }
    Py_ssize_t mshape[WB_MAXDIM];
    for (int d = 0; d < nb; d++) mshape[d] = q.shape[d];
    mshape[nb] = L;
    mshape[nb + 1] = S;
    const wb_operand *mp = NULL;
    if (args[12] != Py_None) {
        PyObject *shape = PyTuple_New(nb + 2);
        if (!shape) return NULL;
        for (int d = 0; d < nb + 2; d++) {
            PyObject *n = PyLong_FromSsize_t(mshape[d]);
            if (!n) { Py_DECREF(shape); return NULL; }
            PyTuple_SET_ITEM(shape, d, n);
        }
        int rc = wb_operand_parse(&mask, args[12], args[13], shape, args[14], "mask");
        Py_DECREF(shape);
        if (rc < 0) return NULL;
        if (mask.dtype != WB_BOOL && mask.dtype != q.dtype) {
            PyErr_SetString(PyExc_TypeError, "attention: mask must be bool or q's dtype");
            return NULL;
        }
        mp = &mask;
    }
    const int causal = PyObject_IsTrue(args[15]);
    const double scale = PyFloat_AsDouble(args[16]);
    if (causal < 0 || (scale == -1.0 && PyErr_Occurred())) return NULL;
    mshape[nb + 1] = Ev;
    if (wb_output_parse(&out, args[17], nb + 2, mshape) < 0) return NULL;
    if (out.dtype != q.dtype) {
        PyErr_SetString(PyExc_TypeError, "attention: out must have q's dtype");
        return NULL;
    }
    wb_operand lse;
    void *lse_data = NULL;
    if (nargs == 19 && args[18] != Py_None) {
        if (wb_output_parse(&lse, args[18], nb + 1, mshape) < 0) return NULL;
        if (lse.dtype != (q.dtype == WB_F64 ? WB_F64 : WB_F32)) {
            PyErr_SetString(PyExc_TypeError, "attention: lse must be f64 for f64 inputs, else "
                                             "f32 (the compute type)");
            return NULL;
        }
        lse_data = lse.data;
    }
    const Py_ssize_t batch = wb_numel(nb, q.shape);
    if (batch == 0 || L == 0 || (Ev == 0 && !lse_data)) Py_RETURN_NONE;
    attn_ctx c = {&q, &k, &v, mp, out.data, lse_data, nb, causal, scale, L, S, E, Ev};
    const Py_ssize_t items = batch * ((L + WB_BQ - 1) / WB_BQ);
    int threads = batch * L * S * (E + Ev) >= WB_ATTN_PAR ? wb_get_num_threads() : 1;
    if (threads > items) threads = (int)items;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = q.dtype == WB_F64 ? attend_f64(&c, items, threads) : attend_f32(&c, items, threads);
    Py_END_ALLOW_THREADS
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyMethodDef wb_attention_methods[] = {
    {"attention", (PyCFunction)(void (*)(void))py_attention, METH_FASTCALL,
     "attention(q, q_off, q_shape, q_strides, k, k_off, k_shape, k_strides, v, v_off, v_shape, "
     "v_strides, mask, m_off, m_strides, causal, scale, out[, lse]): out = softmax(z) v with z = "
     "q kT scale + mask (mask None, bool: True = attend, or float: added; causal keeps j <= i); "
     "lse (None or (*B, L) in the compute type) = log sum_j exp(z_j), -inf for a fully masked "
     "query."},
    {NULL, NULL, 0, NULL},
};
