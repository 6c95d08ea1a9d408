/* StorageBase, the C base class of CpuStorage: its slots (array, version, _owned_bytes) and the
 * counters of the CPU memory workbench owns. Creating and freeing a storage then runs no Python
 * code: the Python __init__ / __del__ pair it replaces cost ~250 ns of the ~1.6 us that
 * ``a + b`` of 1k floats took.
 *
 * Not garbage-collected: the array slot holds a numpy array of numbers, or, in the attention's
 * deferred storages, a closure over other storages, and neither can refer back to a storage's
 * owner (a tensor), so no cycle passes through one. */
#include "wb_native.h"

#include <structmember.h>

#include "nd.h"

typedef struct {
    PyObject_HEAD
    PyObject *array;
    Py_ssize_t version;     /* in-place writes, for autograd's check of saved values */
    Py_ssize_t owned_bytes; /* the array's bytes when workbench allocated it, else 0 */
} wb_storage;

/* Bytes in owned arrays now, their maximum since the last reset, and owned arrays created
 * (the GIL serialises every update). */
static Py_ssize_t active_bytes, peak_bytes, allocations;

/* StorageBase(array, owned=True): ``owned`` arrays count towards the memory statistics. A second
 * __init__ (the deferred storages' conversion) replaces the first one's count. */
static int storage_init(PyObject *op, PyObject *args, PyObject *kwds) {
    static char *names[] = {"array", "owned", NULL};
    wb_storage *self = (wb_storage *)op;
    PyObject *array;
    int owned = 1;
    if (!kwds && PyTuple_GET_SIZE(args) == 1) /* the common call, parsed by hand */
        array = PyTuple_GET_ITEM(args, 0);
    else if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|p:CpuStorage", names, &array, &owned))
        return -1;
    Py_ssize_t nbytes = 0;
    if (owned && wb_array_nbytes(array, &nbytes) < 0) return -1;
    Py_INCREF(array);
    Py_XSETREF(self->array, array);
    self->version = 0;
    active_bytes += nbytes - self->owned_bytes;
    self->owned_bytes = nbytes;
    allocations += owned;
    if (active_bytes > peak_bytes) peak_bytes = active_bytes;
    return 0;
}

static void storage_dealloc(PyObject *op) {
    wb_storage *self = (wb_storage *)op;
    PyTypeObject *type = Py_TYPE(op);
    active_bytes -= self->owned_bytes;
    Py_CLEAR(self->array);
    type->tp_free(op);
    Py_DECREF(type); /* a heap type's instances own a reference to it */
}

/* copy and pickle: the class and (array,). The copy holds a new array (deepcopy's, pickle's),
 * which it owns. ``array`` is read as an attribute so that a deferred storage is computed (and
 * has become its plain class) first. */
static PyObject *storage_reduce(PyObject *op, PyObject *unused) {
    PyObject *array = PyObject_GetAttrString(op, "array");
    if (!array) return NULL;
    return Py_BuildValue("O(N)", (PyObject *)Py_TYPE(op), array);
}

static PyMemberDef storage_members[] = {
    {"array", T_OBJECT_EX, offsetof(wb_storage, array), 0, "the numpy array"},
    {"version", T_PYSSIZET, offsetof(wb_storage, version), 0, "in-place writes so far"},
    {"_owned_bytes", T_PYSSIZET, offsetof(wb_storage, owned_bytes), 0,
     "bytes counted as workbench's (0 for adopted arrays)"},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef storage_methods[] = {
    {"__reduce__", storage_reduce, METH_NOARGS, "(class, (array,)) for copy and pickle."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot storage_slots[] = {
    {Py_tp_doc, "A numpy array and its memory accounting (the base of CpuStorage)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, storage_init},
    {Py_tp_dealloc, storage_dealloc},
    {Py_tp_members, storage_members},
    {Py_tp_methods, storage_methods},
    {0, NULL},
};

static PyType_Spec storage_spec = {
    "workbench.backends.cpu.StorageBase", sizeof(wb_storage), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, storage_slots,
};

/* memory_counters() -> (active_bytes, peak_bytes, allocations) */
static PyObject *memory_counters(PyObject *self, PyObject *unused) {
    return Py_BuildValue("(nnn)", active_bytes, peak_bytes, allocations);
}

/* reset_peak_memory(): the peak restarts from the bytes in use now. */
static PyObject *reset_peak_memory(PyObject *self, PyObject *unused) {
    peak_bytes = active_bytes;
    Py_RETURN_NONE;
}

PyMethodDef wb_storage_methods[] = {
    {"memory_counters", memory_counters, METH_NOARGS,
     "(active_bytes, peak_bytes, allocations) of the arrays StorageBase owns."},
    {"reset_peak_memory", reset_peak_memory, METH_NOARGS, "Set the peak to the active bytes."},
    {NULL, NULL, 0, NULL},
};

int wb_register_storage(PyObject *module) {
    PyObject *type = PyType_FromSpec(&storage_spec);
    if (!type) return -1;
    if (PyModule_AddObject(module, "StorageBase", type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return PyModule_AddFunctions(module, wb_storage_methods);
}
