/* Strided elementwise iteration: up to WB_MAXIN inputs of one shape (broadcast dims have stride
 * 0) into a C-contiguous output. Dims are collapsed where every operand is contiguous across
 * them, then the iteration space is cut into chunks of at most WB_CHUNK elements along the last
 * dim; threads take contiguous ranges of chunks. A chunk callback sees, per input, the element
 * offset of its first element and its stride, and the output offset (stride 1). */
#ifndef WB_ITER_H
#define WB_ITER_H

#include "nd.h"

#define WB_MAXIN 3
#define WB_CHUNK 1024
/* Elements above which a memory-bound pass (add, a cast, a select) runs on several threads:
 * less work per thread does not repay the fork (measured on a 2-core Xeon: see
 * benchmarks/bench_elementwise.py). */
#define WB_PAR_CHEAP (1 << 16)
/* Elements from which wb_iter_run releases the GIL: below, the pass takes about as long as the
 * release and retake (keeping it took 40-60 ns off the 1k-element add's ~0.5 us native call,
 * measured on a 2-core AMD EPYC). */
#define WB_ITER_NOGIL_MIN (1 << 14)

typedef struct {
    int nin, ndim;
    Py_ssize_t shape[WB_MAXDIM];
    Py_ssize_t strides[WB_MAXIN][WB_MAXDIM];
    Py_ssize_t offset[WB_MAXIN];
} wb_iter;

typedef void (*wb_chunk_fn)(const void *ctx, const Py_ssize_t *off, const Py_ssize_t *stride,
                            Py_ssize_t out_off, Py_ssize_t n);

/* Fills ``it`` from the inputs (all of ``shape``); returns -1 with ValueError if one differs. */
int wb_iter_init(wb_iter *it, int nin, const wb_operand *const *in, int ndim,
                 const Py_ssize_t *shape);
/* Runs ``fn`` over every chunk, on several threads when there are at least ``min_parallel``
 * elements. Call with the GIL: it is released while the chunks run from WB_ITER_NOGIL_MIN
 * elements (below, releasing and retaking it costs more than the work). */
void wb_iter_run(const wb_iter *it, wb_chunk_fn fn, const void *ctx, Py_ssize_t min_parallel);

#endif /* WB_ITER_H */
