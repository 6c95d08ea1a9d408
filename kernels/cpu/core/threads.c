/* The native kernels' thread count, shared by every kernel family (wb_get_num_threads()), the
 * one way they split work over it (wb_parallel_ranges, threads.h), and OpenBLAS's parallel jobs
 * run on the same team (adopt_blas). */
#include "threads.h"

#include <stdio.h>
#include <stdlib.h>
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define WB_HAS_PTHREADS 1
#endif

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

#ifdef WB_HAS_PTHREADS
/* OpenBLAS (>= 0.3.28) hands its parallel jobs to a callback when one is installed
 * (openblas_set_threads_callback_function): run there, its jobs use the kernels' OpenMP team
 * instead of OpenBLAS's own pthreads, so the two pools never spin against each other for the
 * cores (with both, a worker of the idle one busy-waits ~0.1 s after each call). */
typedef void (*blas_job_fn)(int thread, void *job, int arg);
typedef void (*blas_jobs_fn)(int sync, blas_job_fn job, int jobs, size_t job_bytes, void *data,
                             int arg);

/* One callback at a time: the jobs of two concurrent calls would share OpenBLAS's per-thread
 * buffers (its own server hands each worker one job at a time). */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

struct blas_jobs {
    blas_job_fn job;
    char *data;
    size_t job_bytes;
    int arg;
};

static void run_job(const struct blas_jobs *jobs, int i) {
    jobs->job(i, jobs->data + (size_t)i * jobs->job_bytes, jobs->arg);
}

struct blas_thread {
    const struct blas_jobs *jobs;
    int i;
};

static void *blas_thread_main(void *arg) {
    struct blas_thread *t = arg;
    run_job(t->jobs, t->i);
    return NULL;
}

/* The jobs of a level-3 product wait on each other, so all must run at once: on a full OpenMP
 * team, else (inside another parallel region, a thread limit) on threads made for the call. */
static void run_blas_jobs(int sync, blas_job_fn job, int n, size_t job_bytes, void *data,
                          int arg) {
    (void)sync; /* OpenBLAS always waits; the jobs are done when this returns */
    struct blas_jobs jobs = {job, data, job_bytes, arg};
    pthread_mutex_lock(&blas_lock);
    int team = 0;
#ifdef _OPENMP
    if (n > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(n)
        {
            WB_TEAM(t, nt);
            if (nt == n) run_job(&jobs, t);
            if (t == 0) team = nt;
        }
    }
#endif
    if (team != n) {
        struct blas_thread threads[n > 1 ? n : 1];
        pthread_t ids[n > 1 ? n : 1];
        int started = 1;
        for (; started < n; started++) {
            threads[started] = (struct blas_thread){&jobs, started};
            if (pthread_create(&ids[started], NULL, blas_thread_main, &threads[started])) break;
        }
        if (started < n) { /* jobs that never run would leave the others waiting forever */
            fputs("workbench: cannot start a thread for OpenBLAS's jobs\n", stderr);
            abort();
        }
        run_job(&jobs, 0);
        for (int i = 1; i < n; i++) pthread_join(ids[i], NULL);
    }
    pthread_mutex_unlock(&blas_lock);
}

/* adopt_blas(setter, adopt): install run_blas_jobs (adopt true) or OpenBLAS's own threads
 * (false) through ``setter``, the address of openblas_set_threads_callback_function. */
static PyObject *adopt_blas(PyObject *self, PyObject *args) {
    PyObject *address;
    int adopt;
    if (!PyArg_ParseTuple(args, "Op:adopt_blas", &address, &adopt)) return NULL;
    void *setter = PyLong_AsVoidPtr(address);
    if (!setter && PyErr_Occurred()) return NULL;
    if (!setter) {
        PyErr_SetString(PyExc_ValueError,
                        "adopt_blas: expected the address of "
                        "openblas_set_threads_callback_function, found 0");
        return NULL;
    }
    ((void (*)(blas_jobs_fn))setter)(adopt ? run_blas_jobs : NULL);
    Py_RETURN_NONE;
}
#endif

PyMethodDef wb_thread_methods[] = {
    {"set_num_threads", set_num_threads, METH_O, "Threads the native kernels use (n >= 1)."},
    {"get_num_threads", get_num_threads, METH_NOARGS, "Threads the native kernels use."},
#ifdef WB_HAS_PTHREADS
    {"adopt_blas", adopt_blas, METH_VARARGS,
     "adopt_blas(setter, adopt): OpenBLAS's parallel jobs on the kernels' team (or back on "
     "its own threads); setter is the address of openblas_set_threads_callback_function."},
#endif
    {NULL, NULL, 0, NULL},
};
