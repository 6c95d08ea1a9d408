/* Geometry helpers shared by the convolution and pooling kernels (conv.c, depthwise.c,
 * pool.c): which outputs of a row (or taps of a window) read inside the input, and the size
 * arguments of their Python calls. */
#ifndef WB_CONV_GEOMETRY_H
#define WB_CONV_GEOMETRY_H

#include "wb_native.h"

/* The outputs q in [*lo, *hi) whose input column s·q + off lies in [0, n). */
static inline void valid_range(Py_ssize_t off, Py_ssize_t s, Py_ssize_t n, Py_ssize_t count,
                               Py_ssize_t *lo, Py_ssize_t *hi) {
    Py_ssize_t a = off < 0 ? (-off + s - 1) / s : 0;
    Py_ssize_t b = off >= n ? 0 : (n - off + s - 1) / s;
    if (b > count) b = count;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* ``n`` Python ints into ``dst``; ``positive`` of them (from the start) must be >= 1. */
static inline int sizes(PyObject *const *args, Py_ssize_t n, Py_ssize_t positive,
                        Py_ssize_t *dst, const char *what) {
    for (Py_ssize_t i = 0; i < n; i++) {
        dst[i] = PyLong_AsSsize_t(args[i]);
        if (dst[i] == -1 && PyErr_Occurred()) return -1;
        if (i < positive && dst[i] < 1) {
            PyErr_Format(PyExc_ValueError, "%s: size argument %zd must be >= 1 (found %zd)",
                         what, i, dst[i]);
            return -1;
        }
    }
    return 0;
}

#endif /* WB_CONV_GEOMETRY_H */
