/* The native kernels' thread count, shared by every kernel family (wb_get_num_threads()). */
#include "wb_native.h"

static int wb_threads = 0; /* 0: not set, use OpenMP's default */

int wb_get_num_threads(void) {
#ifdef _OPENMP
    return wb_threads > 0 ? wb_threads : omp_get_max_threads();
#else
    return 1;
#endif
}

static PyObject *set_num_threads(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) {
        PyErr_Format(PyExc_ValueError, "set_num_threads: expected n >= 1, found %ld", n);
        return NULL;
    }
    wb_threads = (int)n;
    Py_RETURN_NONE;
}

static PyObject *get_num_threads(PyObject *self, PyObject *unused) {
    return PyLong_FromLong(wb_get_num_threads());
}

PyMethodDef wb_thread_methods[] = {
    {"set_num_threads", set_num_threads, METH_O, "Threads the native kernels use (n >= 1)."},
    {"get_num_threads", get_num_threads, METH_NOARGS, "Threads the native kernels use."},
    {NULL, NULL, 0, NULL},
};
