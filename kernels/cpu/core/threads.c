/* The native kernels' thread count, shared by every kernel family (wb_get_num_threads()), and
 * the one way they split work over it (wb_parallel_ranges, threads.h). */
#include "threads.h"

#include <stdlib.h>

static int wb_threads = 0; /* 0: not set, use OpenMP's default */

int wb_get_num_threads(void) {
#ifdef _OPENMP
    return wb_threads > 0 ? wb_threads : omp_get_max_threads();
#else
    return 1;
#endif
}

/* One thread's contiguous share of the units, with its buffer; nonzero when out of memory. */
static int run_share(wb_range_fn fn, const void *ctx, Py_ssize_t units, size_t buf_bytes, int t,
                     int nt) {
    void *buf = buf_bytes ? malloc(buf_bytes) : NULL;
    if (buf_bytes && !buf) return 1;
    fn(ctx, t, units * t / nt, units * (t + 1) / nt, buf);
    free(buf);
    return 0;
}

int wb_parallel_ranges(wb_range_fn fn, const void *ctx, Py_ssize_t units, int threads,
                       size_t buf_bytes) {
    if (units <= 0) return 0;
    if (threads > units) threads = (int)units;
    if (threads <= 1) return run_share(fn, ctx, units, buf_bytes, 0, 1) ? -1 : 0;
    int failed = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(| : failed)
#endif
    {
        WB_TEAM(t, nt);
        failed = run_share(fn, ctx, units, buf_bytes, t, nt);
    }
    return failed ? -1 : 0;
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
