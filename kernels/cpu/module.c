/* The extension module workbench.backends.cpu._native_<variant>: one per ISA variant, built by
 * setup.py from the same sources. Each kernel family registers its functions from its folder:
 * core/ (elementwise, reductions, fused row ops, attention, threads) and quant/ (GGUF dot
 * products). */
#include "wb_native.h"

#define WB_STR_(x) #x
#define WB_STR(x) WB_STR_(x)
#define WB_CAT_(a, b) a##b
#define WB_CAT(a, b) WB_CAT_(a, b)
#define WB_MODULE_NAME WB_CAT(_native_, WB_VARIANT)

static PyObject *variant(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(WB_STR(WB_VARIANT));
}

static PyObject *compiled_with(PyObject *self, PyObject *unused) {
    /* The instruction sets this variant's code may use (the compiler's predefined macros). */
    return Py_BuildValue("{s:O,s:O,s:O,s:O,s:O,s:O}",
        "openmp", WB_HAS_OPENMP ? Py_True : Py_False,
        "avx2", WB_HAS_AVX2 ? Py_True : Py_False,
        "fma", WB_HAS_FMA ? Py_True : Py_False,
        "avx512", WB_HAS_AVX512 ? Py_True : Py_False,
        "avx512vnni", WB_HAS_AVX512VNNI ? Py_True : Py_False,
        "neon_dotprod", WB_HAS_DOTPROD ? Py_True : Py_False);
}

static PyMethodDef base_methods[] = {
    {"variant", variant, METH_NOARGS, "The ISA variant this module was compiled for."},
    {"compiled_with", compiled_with, METH_NOARGS, "Instruction sets and OpenMP, as compiled."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, WB_STR(WB_MODULE_NAME), "workbench's native CPU kernels", -1,
    base_methods,
};

PyMODINIT_FUNC WB_CAT(PyInit_, WB_MODULE_NAME)(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (wb_register_core(m) < 0 || wb_register_quant(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
