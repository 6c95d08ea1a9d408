/* The core kernel family's functions (threads, elementwise, reductions, fused row ops,
 * batch norm, attention, pooling, convolution copies, direct and depthwise convolutions, relu's
 * backward, optimizer steps, MPI's all_reduce call, the heap's policy): each file exports a
 * NULL-terminated PyMethodDef table, added here; storage.c adds CpuStorage's base type too. */
#include "wb_native.h"

#include "nd.h"

extern PyMethodDef wb_thread_methods[];
extern PyMethodDef wb_elementwise_methods[];
extern PyMethodDef wb_rows_methods[];
extern PyMethodDef wb_attention_methods[];
extern PyMethodDef wb_reduce_methods[], wb_cast_methods[];
extern PyMethodDef wb_llm_attention_methods[], wb_llm_rows_methods[];
extern PyMethodDef wb_pool_methods[], wb_conv_methods[], wb_depthwise_methods[];
extern PyMethodDef wb_conv_direct_methods[];
extern PyMethodDef wb_batchnorm_methods[];
extern PyMethodDef wb_relu_backward_methods[], wb_optim_methods[];
extern PyMethodDef wb_mpi_call_methods[], wb_heap_methods[];
int wb_register_storage(PyObject *module);

int wb_register_core(PyObject *module) {
    if (wb_nd_init() < 0 || wb_register_storage(module) < 0) return -1;
    if (PyModule_AddFunctions(module, wb_thread_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, wb_elementwise_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, wb_rows_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, wb_attention_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, wb_reduce_methods) < 0 ||
        PyModule_AddFunctions(module, wb_cast_methods) < 0)
        return -1;
    if (PyModule_AddFunctions(module, wb_pool_methods) < 0 ||
        PyModule_AddFunctions(module, wb_conv_methods) < 0 ||
        PyModule_AddFunctions(module, wb_depthwise_methods) < 0 ||
        PyModule_AddFunctions(module, wb_conv_direct_methods) < 0)
        return -1;
    if (PyModule_AddFunctions(module, wb_batchnorm_methods) < 0) return -1;
    if (PyModule_AddFunctions(module, wb_relu_backward_methods) < 0 ||
        PyModule_AddFunctions(module, wb_optim_methods) < 0)
        return -1;
    if (PyModule_AddFunctions(module, wb_mpi_call_methods) < 0 ||
        PyModule_AddFunctions(module, wb_heap_methods) < 0)
        return -1;
    if (PyModule_AddFunctions(module, wb_llm_attention_methods) < 0 ||
        PyModule_AddFunctions(module, wb_llm_rows_methods) < 0)
        return -1;
    return 0;
}
