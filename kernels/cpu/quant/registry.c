/* The quantized kernel family's functions (GGUF block dot products): each file exports a
 * NULL-terminated PyMethodDef table, added here. */
#include "wb_native.h"

extern PyMethodDef wb_quant_matmul_methods[];

int wb_register_quant(PyObject *module) {
    return PyModule_AddFunctions(module, wb_quant_matmul_methods);
}
