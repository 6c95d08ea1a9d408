/* The C heap's policy for large blocks, which every numpy array's data comes from.
 *
 * glibc serves a block of 128 KiB or more (a threshold that rises with use, up to 32 MiB) with
 * its own mmap() and unmaps it on free. A training step allocates and frees the same
 * multi-MiB activations, gradients and column buffers every time, so each of them costs a
 * page fault per page it touches, the kernel zeroing the pages (2 MiB ones: numpy asks for
 * huge pages from 4 MiB), and, when it is unmapped, a TLB shootdown on every core that ran a
 * kernel thread over it. On the MNIST CNN's step (2-core EPYC) that was a third of the time.
 *
 * keep_large_blocks(mmap_from, trim_above) asks glibc to serve blocks under ``mmap_from``
 * bytes from its heaps (up to 32 MiB: glibc's limit) and to return free memory at a heap's top
 * to the system only beyond ``trim_above`` bytes, so freed blocks are reused already mapped
 * (what jemalloc or tcmalloc do by default). Returns False, and changes nothing, where the C
 * library is not glibc. */
#include "wb_native.h"

#include <limits.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

static PyObject *py_keep_large_blocks(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "keep_large_blocks: expected 2 arguments, found %zd",
                     nargs);
        return NULL;
    }
    const long mmap_from = PyLong_AsLong(args[0]), trim_above = PyLong_AsLong(args[1]);
    if ((mmap_from == -1 || trim_above == -1) && PyErr_Occurred()) return NULL;
    if (mmap_from <= 0 || mmap_from > (32L << 20) || trim_above < 0 || trim_above > INT_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "keep_large_blocks: expected 0 < mmap_from <= 32 MiB and 0 <= trim_above "
                     "< 2 GiB, found %ld and %ld",
                     mmap_from, trim_above);
        return NULL;
    }
#if defined(__GLIBC__)
    if (mallopt(M_MMAP_THRESHOLD, (int)mmap_from) && mallopt(M_TRIM_THRESHOLD, (int)trim_above))
        Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

PyMethodDef wb_heap_methods[] = {
    {"keep_large_blocks", (PyCFunction)(void (*)(void))py_keep_large_blocks, METH_FASTCALL,
     "keep_large_blocks(mmap_from, trim_above) -> bool: glibc serves blocks under mmap_from "
     "bytes from its heap and keeps up to trim_above free bytes mapped (False: not glibc)."},
    {NULL, NULL, 0, NULL},
};
