/* The core kernel family's functions (threads, elementwise, reductions, fused row ops,
 * attention): each file exports a NULL-terminated PyMethodDef table, added here. */
#include "wb_native.h"

extern PyMethodDef wb_thread_methods[];

int wb_register_core(PyObject *module) {
    if (PyModule_AddFunctions(module, wb_thread_methods) < 0) return -1;
    return 0;
}
