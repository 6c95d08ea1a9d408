/* numpy arrays and layouts as kernel arguments (see nd.h). */
#include "nd.h"

PyTypeObject *wb_ndarray_type = NULL;
PyObject *wb_bool_dtype = NULL;
static PyObject *numpy_empty; /* numpy.empty, for wb_empty */

/* The attribute names of a layout, interned once (wb_nd_init). */
static PyObject *name_offset, *name_shape, *name_strides;

int wb_nd_init(void) {
    if (wb_ndarray_type) return 0;
    PyObject *numpy = PyImport_ImportModule("numpy");
    if (!numpy) return -1;
    wb_ndarray_type = (PyTypeObject *)PyObject_GetAttrString(numpy, "ndarray");
    numpy_empty = PyObject_GetAttrString(numpy, "empty");
    PyObject *bool_type = PyObject_GetAttrString(numpy, "bool_");
    wb_bool_dtype = bool_type ? PyObject_CallMethod(numpy, "dtype", "O", bool_type) : NULL;
    Py_XDECREF(bool_type);
    Py_DECREF(numpy);
    name_offset = PyUnicode_InternFromString("offset");
    name_shape = PyUnicode_InternFromString("shape");
    name_strides = PyUnicode_InternFromString("strides");
    return wb_ndarray_type && numpy_empty && wb_bool_dtype && name_offset && name_shape &&
                   name_strides
               ? 0
               : -1;
}

/* The leading fields of numpy's PyArrayObject_fields and PyArray_Descr: public, and unchanged
 * from numpy 1.x to 2.x. Reading them directly avoids a build-time dependency on numpy and the
 * buffer protocol, which refuses ml_dtypes' bfloat16. */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} wb_ndarray_fields;

typedef struct {
    PyObject_HEAD
    PyTypeObject *typeobj;
    char kind;
    char type;
    char byteorder;
} wb_descr_fields;

#define WB_NPY_C_CONTIGUOUS 0x0001
#define WB_NPY_WRITEABLE 0x0400

static int dtype_of(const wb_descr_fields *d) {
    if (d->byteorder == '>') return -1;
    switch (d->type) {
    case '?': return WB_BOOL;
    case 'B': return WB_U8;
    case 'b': return WB_I8;
    case 'I': return WB_U32;
    case 'h': return WB_I16;
    case 'i': return WB_I32;
    case 'l': return sizeof(long) == 8 ? WB_I64 : -1;
    case 'q': return WB_I64;
    case 'e': return WB_F16;
    case 'E': return WB_BF16; /* ml_dtypes.bfloat16 */
    case 'f': return WB_F32;
    case 'd': return WB_F64;
    default: return -1;
    }
}

int wb_array(PyObject *obj, const char *what, char **data, int *dtype, Py_ssize_t *numel,
             int writable) {
    if (!PyObject_TypeCheck(obj, wb_ndarray_type)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a numpy array, found %s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const wb_ndarray_fields *a = (const wb_ndarray_fields *)obj;
    if (!(a->flags & WB_NPY_C_CONTIGUOUS) || (writable && !(a->flags & WB_NPY_WRITEABLE))) {
        PyErr_Format(PyExc_ValueError, "%s: expected a C-contiguous%s array", what,
                     writable ? " writable" : "");
        return -1;
    }
    *dtype = dtype_of((const wb_descr_fields *)a->descr);
    if (*dtype < 0) {
        PyErr_Format(PyExc_TypeError, "%s: unsupported dtype (type code '%c')", what,
                     ((const wb_descr_fields *)a->descr)->type);
        return -1;
    }
    *data = a->data;
    *numel = wb_numel(a->nd, a->dimensions);
    return 0;
}

int wb_array_nbytes(PyObject *obj, Py_ssize_t *nbytes) {
    if (PyObject_TypeCheck(obj, wb_ndarray_type)) {
        const wb_ndarray_fields *a = (const wb_ndarray_fields *)obj;
        const int dtype = dtype_of((const wb_descr_fields *)a->descr);
        if (dtype >= 0) {
            *nbytes = wb_numel(a->nd, a->dimensions) * wb_itemsize[dtype];
            return 0;
        }
    }
    PyObject *n = PyObject_GetAttrString(obj, "nbytes"); /* other dtypes, other objects */
    if (!n) return -1;
    *nbytes = PyLong_AsSsize_t(n);
    Py_DECREF(n);
    return *nbytes == -1 && PyErr_Occurred() ? -1 : 0;
}

int wb_dims(PyObject *tuple, const char *what, Py_ssize_t *dims) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) > WB_MAXDIM) {
        PyErr_Format(PyExc_ValueError, "%s: expected a tuple of at most %d ints", what, WB_MAXDIM);
        return -1;
    }
    int n = (int)PyTuple_GET_SIZE(tuple);
    for (int i = 0; i < n; i++) {
        dims[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(tuple, i));
        if (dims[i] == -1 && PyErr_Occurred()) return -1;
    }
    return n;
}

int wb_operand_parse(wb_operand *op, PyObject *array, PyObject *offset, PyObject *shape,
                     PyObject *strides, const char *what) {
    Py_ssize_t numel;
    if (wb_array(array, what, &op->data, &op->dtype, &numel, 0) < 0) return -1;
    op->offset = PyLong_AsSsize_t(offset);
    if (op->offset == -1 && PyErr_Occurred()) return -1;
    op->ndim = wb_dims(shape, what, op->shape);
    if (op->ndim < 0 || wb_dims(strides, what, op->strides) != op->ndim) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: shape and strides differ in length", what);
        return -1;
    }
    Py_ssize_t lo = op->offset, hi = op->offset;
    for (int i = 0; i < op->ndim; i++) {
        if (op->shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative dimension", what);
            return -1;
        }
        if (op->shape[i] == 0) return 0; /* nothing is addressed */
        Py_ssize_t reach = (op->shape[i] - 1) * op->strides[i];
        if (reach < 0) lo += reach; else hi += reach;
    }
    if (lo < 0 || hi >= numel) {
        PyErr_Format(PyExc_ValueError,
                     "%s: layout addresses elements %zd..%zd of a buffer of %zd", what, lo, hi,
                     numel);
        return -1;
    }
    return 0;
}

int wb_operand_of_layout(wb_operand *op, PyObject *array, PyObject *layout, const char *what) {
    PyObject *offset = PyObject_GetAttr(layout, name_offset);
    PyObject *shape = offset ? PyObject_GetAttr(layout, name_shape) : NULL;
    PyObject *strides = shape ? PyObject_GetAttr(layout, name_strides) : NULL;
    const int rc = strides ? wb_operand_parse(op, array, offset, shape, strides, what) : -1;
    Py_XDECREF(offset);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return rc;
}

PyObject *wb_layout_shape(PyObject *layout) { return PyObject_GetAttr(layout, name_shape); }

PyObject *wb_array_dtype(PyObject *array) { return ((const wb_ndarray_fields *)array)->descr; }

PyObject *wb_empty(PyObject *shape, PyObject *dtype) {
    PyObject *args[2] = {shape, dtype};
    return PyObject_Vectorcall(numpy_empty, args, 2, NULL);
}

int wb_output_parse(wb_operand *op, PyObject *array, const int ndim, const Py_ssize_t *shape) {
    Py_ssize_t numel;
    if (wb_array(array, "out", &op->data, &op->dtype, &numel, 1) < 0) return -1;
    if (numel != wb_numel(ndim, shape)) {
        PyErr_Format(PyExc_ValueError, "out: expected %zd elements, found %zd",
                     wb_numel(ndim, shape), numel);
        return -1;
    }
    op->ndim = ndim;
    op->offset = 0;
    Py_ssize_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        op->shape[i] = shape[i];
        op->strides[i] = s;
        s *= shape[i];
    }
    return 0;
}
