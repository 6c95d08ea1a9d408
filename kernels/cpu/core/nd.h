/* Arguments of the core kernels: numpy arrays read through their public struct (no numpy headers
 * at build time), dtypes, and (shape, strides, offset) layouts checked against the buffer, so a
 * bad layout raises ValueError instead of reading out of bounds. */
#ifndef WB_ND_H
#define WB_ND_H

#include "wb_native.h"

#define WB_MAXDIM 16

/* i8 came last: it is appended so that the kernels' existing codes keep their values. */
enum {
    WB_BOOL, WB_U8, WB_U32, WB_I16, WB_I32, WB_I64, WB_F16, WB_BF16, WB_F32, WB_F64, WB_I8,
    WB_NDTYPES
};

static const int wb_itemsize[WB_NDTYPES] = {1, 1, 4, 2, 4, 8, 2, 2, 4, 8, 1};

/* One operand: its buffer and the layout of the elements an op reads or writes. */
typedef struct {
    char *data;
    int dtype;
    int ndim;
    Py_ssize_t offset;
    Py_ssize_t shape[WB_MAXDIM];
    Py_ssize_t strides[WB_MAXDIM]; /* in elements */
} wb_operand;

/* numpy.ndarray and dtype(bool), set by wb_nd_init when the module is created. */
extern PyTypeObject *wb_ndarray_type;
extern PyObject *wb_bool_dtype;
int wb_nd_init(void);

/* Read a C-contiguous numpy array: data, dtype, and its element count. */
int wb_array(PyObject *obj, const char *what, char **data, int *dtype, Py_ssize_t *numel,
             int writable);
/* An array's nbytes (from its struct for the kernels' dtypes, else its ``nbytes``). */
int wb_array_nbytes(PyObject *obj, Py_ssize_t *nbytes);
/* A tuple of ints into dims[]; returns its length or -1. */
int wb_dims(PyObject *tuple, const char *what, Py_ssize_t *dims);
/* ``array`` viewed through (offset, shape, strides): checks every element is inside the buffer. */
int wb_operand_parse(wb_operand *op, PyObject *array, PyObject *offset, PyObject *shape,
                     PyObject *strides, const char *what);
/* As wb_operand_parse, with offset, shape and strides read from a ``Layout`` object. */
int wb_operand_of_layout(wb_operand *op, PyObject *array, PyObject *layout, const char *what);
/* A layout's shape tuple (a new reference). */
PyObject *wb_layout_shape(PyObject *layout);
/* A numpy array's dtype object (borrowed). */
PyObject *wb_array_dtype(PyObject *array);
/* numpy.empty(shape, dtype): a new C-contiguous array. */
PyObject *wb_empty(PyObject *shape, PyObject *dtype);
/* A contiguous output array of ``shape`` (its element count must match). */
int wb_output_parse(wb_operand *op, PyObject *array, const int ndim, const Py_ssize_t *shape);

/* The float dtypes computed in f32 registers (f32 and the halves), and all float dtypes. */
static inline int wb_is_f32ish(int dt) { return dt == WB_F32 || dt == WB_F16 || dt == WB_BF16; }
static inline int wb_is_float(int dt) { return wb_is_f32ish(dt) || dt == WB_F64; }

static inline Py_ssize_t wb_numel(int ndim, const Py_ssize_t *shape) {
    Py_ssize_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

#endif /* WB_ND_H */
