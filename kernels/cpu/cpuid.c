/* The CPU's SIMD features, read without any ISA flags so that this module imports anywhere.
 * backends/cpu/native.py uses it to pick the _native_<variant> module the CPU can run. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

static PyObject *features(PyObject *self, PyObject *unused) {
    PyObject *out = PySet_New(NULL);
    if (!out) return NULL;
#define WB_ADD(name) do { PyObject *s = PyUnicode_FromString(name); \
        if (!s || PySet_Add(out, s) < 0) { Py_XDECREF(s); Py_DECREF(out); return NULL; } \
        Py_DECREF(s); } while (0)
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) WB_ADD("sse4.2");
    if (__builtin_cpu_supports("popcnt")) WB_ADD("popcnt");
    if (__builtin_cpu_supports("avx2")) WB_ADD("avx2");
    if (__builtin_cpu_supports("fma")) WB_ADD("fma");
    if (__builtin_cpu_supports("bmi2")) WB_ADD("bmi2");
    if (__builtin_cpu_supports("avx512f")) WB_ADD("avx512f");
    if (__builtin_cpu_supports("avx512bw")) WB_ADD("avx512bw");
    if (__builtin_cpu_supports("avx512vl")) WB_ADD("avx512vl");
    if (__builtin_cpu_supports("avx512dq")) WB_ADD("avx512dq");
    if (__builtin_cpu_supports("avx512vnni")) WB_ADD("avx512vnni");
    if (__builtin_cpu_supports("avx512bf16")) WB_ADD("avx512bf16");
    {
        /* F16C has no __builtin_cpu_supports name in older compilers: CPUID.1:ECX bit 29. */
        unsigned int a, b, c, d;
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
        if (c & (1u << 29)) WB_ADD("f16c");
    }
#elif defined(__aarch64__)
    WB_ADD("neon");
#if defined(__linux__)
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) WB_ADD("dotprod");
#elif defined(__APPLE__)
    WB_ADD("dotprod"); /* every Apple-silicon core has it */
#endif
#endif
#undef WB_ADD
    return out;
}

static PyMethodDef methods[] = {
    {"features", features, METH_NOARGS, "The SIMD features this CPU reports, as a set of names."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cpuid", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cpuid(void) { return PyModule_Create(&module); }
