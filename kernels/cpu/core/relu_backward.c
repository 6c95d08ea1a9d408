/* The input gradient of relu in one pass, as PyTorch's threshold_backward:
 *
 *     dL/dx = 0 where x <= 0, else g     (so NaN in x passes g through; 0 · inf is never formed)
 *
 * on strided/broadcast layouts of x and g (one dtype: f32, f64, f16, bf16) into a contiguous
 * output. f16/bf16 are widened to f32 and stored back, which is exact for a select. */
#include "convert.h" /* Python.h first: it sets feature macros math.h reads */
#include "iter.h"

typedef struct {
    const char *x, *g;
    char *out;
    int dtype;
} relu_ctx;

#define WB_RELU_GRAD(T, x, g, o, n)                                                            \
    for (Py_ssize_t i = 0; i < (n); i++) (o)[i] = (x)[i] <= (T)0 ? (T)0 : (g)[i]

static void relu_backward_chunk(const void *c, const Py_ssize_t *off, const Py_ssize_t *st,
                                Py_ssize_t o, Py_ssize_t n) {
    const relu_ctx *k = c;
    if (k->dtype == WB_F64) {
        double bx[WB_CHUNK], bg[WB_CHUNK];
        const double *x = wb_load_f64(k->x, off[0], st[0], n, bx);
        const double *g = wb_load_f64(k->g, off[1], st[1], n, bg);
        double *out = (double *)k->out + o;
        WB_RELU_GRAD(double, x, g, out, n);
        return;
    }
    float bx[WB_CHUNK], bg[WB_CHUNK], bo[WB_CHUNK];
    const float *x = wb_load_f32(k->dtype, k->x, off[0], st[0], n, bx);
    const float *g = wb_load_f32(k->dtype, k->g, off[1], st[1], n, bg);
    float *out = k->dtype == WB_F32 ? (float *)k->out + o : bo;
    WB_RELU_GRAD(float, x, g, out, n);
    if (out == bo) wb_store_f32(k->dtype, k->out, o, bo, n);
}

/* relu_backward(x, x_offset, x_strides, g, g_offset, g_strides, out, shape) */
static PyObject *py_relu_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "relu_backward: expected 8 arguments, found %zd", nargs);
        return NULL;
    }
    wb_operand x, g, out;
    if (wb_operand_parse(&x, args[0], args[1], args[7], args[2], "x") < 0 ||
        wb_operand_parse(&g, args[3], args[4], args[7], args[5], "grad") < 0 ||
        wb_output_parse(&out, args[6], x.ndim, x.shape) < 0)
        return NULL;
    if (!wb_is_float(x.dtype) || g.dtype != x.dtype || out.dtype != x.dtype) {
        PyErr_SetString(PyExc_TypeError,
                        "relu_backward: expected x, grad and out of one float dtype");
        return NULL;
    }
    const wb_operand *in[2] = {&x, &g};
    wb_iter it;
    if (wb_iter_init(&it, 2, in, x.ndim, x.shape) < 0) return NULL;
    relu_ctx ctx = {x.data, g.data, out.data, x.dtype};
    wb_iter_run(&it, relu_backward_chunk, &ctx, WB_PAR_CHEAP); /* memory-bound */
    Py_RETURN_NONE;
}

PyMethodDef wb_relu_backward_methods[] = {
    {"relu_backward", (PyCFunction)(void (*)(void))py_relu_backward, METH_FASTCALL,
     "relu_backward(x, x_offset, x_strides, g, g_offset, g_strides, out, shape): "
     "out = 0 where x <= 0 else g, contiguous out."},
    {NULL, NULL, 0, NULL},
};
