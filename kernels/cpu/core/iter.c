/* Strided elementwise iteration (see iter.h). */
#include "iter.h"
#include "threads.h"

int wb_iter_init(wb_iter *it, int nin, const wb_operand *const *in, int ndim,
                 const Py_ssize_t *shape) {
    it->nin = nin;
    for (int k = 0; k < nin; k++) {
        if (in[k]->ndim != ndim) {
            PyErr_Format(PyExc_ValueError, "operand %d has %d dims, expected %d", k,
                         in[k]->ndim, ndim);
            return -1;
        }
        for (int i = 0; i < ndim; i++)
            if (in[k]->shape[i] != shape[i]) {
                PyErr_Format(PyExc_ValueError, "operand %d: dim %d is %zd, expected %zd", k, i,
                             in[k]->shape[i], shape[i]);
                return -1;
            }
        it->offset[k] = in[k]->offset;
    }
    /* Drop size-1 dims, then merge a dim into the previous one where every operand steps
     * through both as through one (the output is contiguous, so it always can). */
    int d = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 1) continue;
        if (d > 0) {
            int merge = 1;
            for (int k = 0; k < nin; k++)
                if (it->strides[k][d - 1] != in[k]->strides[i] * shape[i]) merge = 0;
            if (merge) {
                it->shape[d - 1] *= shape[i];
                for (int k = 0; k < nin; k++) it->strides[k][d - 1] = in[k]->strides[i];
                continue;
            }
        }
        it->shape[d] = shape[i];
        for (int k = 0; k < nin; k++) it->strides[k][d] = in[k]->strides[i];
        d++;
    }
    if (d == 0) { /* a single element (or a 0-d tensor) */
        it->shape[0] = wb_numel(ndim, shape) == 0 ? 0 : 1;
        for (int k = 0; k < nin; k++) it->strides[k][0] = 1;
        d = 1;
    }
    it->ndim = d;
    return 0;
}

/* The input offsets of the first element of ``row`` (a multi-index over all but the last dim). */
static void row_offsets(const wb_iter *it, Py_ssize_t row, Py_ssize_t *off) {
    for (int k = 0; k < it->nin; k++) off[k] = it->offset[k];
    for (int i = it->ndim - 2; i >= 0 && row > 0; i--) {
        Py_ssize_t idx = row % it->shape[i];
        row /= it->shape[i];
        for (int k = 0; k < it->nin; k++) off[k] += idx * it->strides[k][i];
    }
}

/* Chunks [u0, u1): the offsets are found once per row, by division. */
static void run_range(const wb_iter *it, wb_chunk_fn fn, const void *ctx, Py_ssize_t u0,
                      Py_ssize_t u1) {
    const Py_ssize_t n = it->shape[it->ndim - 1];
    const Py_ssize_t per_row = (n + WB_CHUNK - 1) / WB_CHUNK;
    Py_ssize_t last[WB_MAXIN], row = -1, base[WB_MAXIN], off[WB_MAXIN];
    for (int k = 0; k < it->nin; k++) last[k] = it->strides[k][it->ndim - 1];
    for (Py_ssize_t u = u0; u < u1; u++) {
        const Py_ssize_t r = u / per_row, start = (u % per_row) * WB_CHUNK;
        if (r != row) {
            row = r;
            row_offsets(it, row, base);
        }
        for (int k = 0; k < it->nin; k++) off[k] = base[k] + start * last[k];
        const Py_ssize_t len = n - start < WB_CHUNK ? n - start : WB_CHUNK;
        fn(ctx, off, last, row * n + start, len);
    }
}

typedef struct {
    const wb_iter *it;
    wb_chunk_fn fn;
    const void *ctx;
} iter_job_ctx;

static void iter_job(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf) {
    const iter_job_ctx *c = ctx;
    run_range(c->it, c->fn, c->ctx, u0, u1);
}

void wb_iter_run(const wb_iter *it, wb_chunk_fn fn, const void *ctx, Py_ssize_t min_parallel) {
    const Py_ssize_t n = it->shape[it->ndim - 1];
    const Py_ssize_t numel = wb_numel(it->ndim, it->shape);
    if (numel == 0) return;
    const Py_ssize_t units = numel / n * ((n + WB_CHUNK - 1) / WB_CHUNK);
    const iter_job_ctx c = {it, fn, ctx};
    const int threads = wb_threads_for(numel, min_parallel);
    if (numel < WB_ITER_NOGIL_MIN) {
        (void)wb_parallel_ranges(iter_job, &c, units, threads, 0);
        return;
    }
    Py_BEGIN_ALLOW_THREADS
    (void)wb_parallel_ranges(iter_job, &c, units, threads, 0);
    Py_END_ALLOW_THREADS
}
