/* Work split over the native kernels' threads (core/threads.c): every parallel row, reduction
 * and scan kernel hands its units of work to wb_parallel_ranges. */
#ifndef WB_THREADS_H
#define WB_THREADS_H

#include "wb_native.h"

/* One thread's share of a job: units [u0, u1), ``t`` the thread's index in the team (for
 * per-thread results), ``buf`` its own scratch buffer. Must not touch Python objects. */
typedef void (*wb_range_fn)(const void *ctx, int t, Py_ssize_t u0, Py_ssize_t u1, void *buf);

/* ``fn`` over units [0, units) in contiguous ranges, one per thread of a team of at most
 * ``threads`` (and at most ``units``) threads, each with its own ``buf_bytes`` buffer. One
 * thread runs without an OpenMP region (a region, even a serial one, costs about 0.5 us).
 * Callable with or without the GIL. Returns 0, or -1 when a buffer could not be allocated. */
int wb_parallel_ranges(wb_range_fn fn, const void *ctx, Py_ssize_t units, int threads,
                       size_t buf_bytes);

/* Threads for a job of ``work`` elements: 1 below ``threshold``, else the configured count. */
static inline int wb_threads_for(Py_ssize_t work, Py_ssize_t threshold) {
    return work >= threshold ? wb_get_num_threads() : 1;
}

#endif /* WB_THREADS_H */
