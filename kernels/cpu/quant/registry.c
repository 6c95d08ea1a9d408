/* The quantized kernel family's functions (GGUF block dot products). */
#include "wb_native.h"

static PyMethodDef quant_methods[] = {
    {NULL, NULL, 0, NULL},
};

int wb_register_quant(PyObject *module) { return PyModule_AddFunctions(module, quant_methods); }
