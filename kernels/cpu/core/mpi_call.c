/* A blocking MPI_Allreduce through its address, for workbench.distributed's hot all_reduce.
 *
 * mpi4py's Comm.Allreduce parses its buffer arguments on every call (about 0.4 us of a
 * 1 KiB all_reduce's 1.2 us on COMM_SELF). The communicator resolves everything once per
 * (x, out) pair instead: the library's MPI_Allreduce, the buffers' addresses, the count and
 * the handles of the type, op and communicator, and this call only converts eight integers
 * and calls the function with the GIL released (a watchdog thread and other Python threads
 * keep running while a rank waits).
 *
 * Handles are integers in MPICH's ABI (MPI_Comm, MPI_Datatype and MPI_Op are int) and
 * pointers in Open MPI's; ``handle_size`` (4 or 8, mpi4py's MPI._sizeof(MPI.Comm)) says which
 * prototype to call. The library's own MPI_IN_PLACE value arrives as ``send`` unchanged.
 * This module never links MPI: the address comes from the process's loaded libmpi. */
#include "wb_native.h"

#include <limits.h>
#include <stdint.h>

typedef int (*allreduce_int_handles)(const void *, void *, int, int, int, int);
typedef int (*allreduce_pointer_handles)(const void *, void *, int, void *, void *, void *);

static int as_address(PyObject *value, void **out, const char *name) {
    *out = PyLong_AsVoidPtr(value);
    if (*out == NULL && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "mpi_allreduce: expected an address for %s", name);
        return -1;
    }
    return 0;
}

/* mpi_allreduce(function, handle_size, send, recv, count, datatype, op, comm) -> MPI's return
 * code (0: MPI_SUCCESS). */
static PyObject *py_mpi_allreduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "mpi_allreduce: expected 8 arguments, found %zd", nargs);
        return NULL;
    }
    void *function, *send, *recv, *datatype, *op, *comm;
    if (as_address(args[0], &function, "the function") < 0 ||
        as_address(args[2], &send, "send") < 0 || as_address(args[3], &recv, "recv") < 0 ||
        as_address(args[5], &datatype, "the datatype") < 0 ||
        as_address(args[6], &op, "the op") < 0 || as_address(args[7], &comm, "the comm") < 0)
        return NULL;
    long handle_size = PyLong_AsLong(args[1]);
    long count = PyLong_AsLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (function == NULL || (handle_size != 4 && handle_size != 8) || count < 0 ||
        count > INT_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "mpi_allreduce: expected a function address, a handle size of 4 or 8 and a "
                     "count in [0, %d]; found handle size %ld, count %ld",
                     INT_MAX, handle_size, count);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    if (handle_size == 4)
        rc = ((allreduce_int_handles)function)(send, recv, (int)count, (int)(intptr_t)datatype,
                                               (int)(intptr_t)op, (int)(intptr_t)comm);
    else
        rc = ((allreduce_pointer_handles)function)(send, recv, (int)count, datatype, op, comm);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

PyMethodDef wb_mpi_call_methods[] = {
    {"mpi_allreduce", (PyCFunction)(void (*)(void))py_mpi_allreduce, METH_FASTCALL,
     "mpi_allreduce(function, handle_size, send, recv, count, datatype, op, comm): call the "
     "MPI library's MPI_Allreduce at address `function` with the GIL released; returns its "
     "error code."},
    {NULL, NULL, 0, NULL},
};
