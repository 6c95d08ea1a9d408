"""Threads of the CPU backend: one team for the native kernels and for BLAS.

Ops run one after the other, so the native kernels and BLAS never run at the same time, and
both get the same count ``n`` (threadpoolctl sets BLAS's). Two pools of ``n`` would still fight:
an idle OpenBLAS worker busy-waits about 0.1 s after each call, through the kernels that follow
(a small CNN's training step ran 3.5x slower). So OpenBLAS (>= 0.3.28, numpy's and scipy's
wheels) runs its parallel jobs on the kernels' OpenMP team (``adopt_blas``);
``WORKBENCH_BLAS_TEAM=0`` keeps OpenBLAS's own threads. The default count is the number of
physical cores this process may run on (hyper-threads share one core's vector units, which
these kernels saturate), unless ``OMP_NUM_THREADS`` says otherwise.

A forked child cannot use the parent's OpenMP threads (libgomp would wait on them forever): it
runs single-threaded, BLAS back on OpenBLAS's own (fork-aware) threads.
"""

from __future__ import annotations

import ctypes
import os

from ..errors import WorkbenchError
from .native import NATIVE

_SETTER_NAMES = (  # the name by build: plain, scipy-openblas (LP64), numpy's ILP64 one
    "openblas_set_threads_callback_function",
    "scipy_openblas_set_threads_callback_function",
    "scipy_openblas_set_threads_callback_function64_",
)


def physical_cores() -> int:
    """Physical cores among the CPUs this process may use (Linux: sysfs core ids; elsewhere the
    logical CPU count)."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{base}/physical_package_id") as pkg, open(f"{base}/core_id") as core:
                cores.add((pkg.read().strip(), core.read().strip()))
        except OSError:
            return len(cpus)
    return max(1, len(cores))


def _default() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(env) if env.isdigit() and int(env) > 0 else physical_cores()


def _openblas_setters() -> list[int]:
    """Addresses of ``openblas_set_threads_callback_function`` in the OpenBLAS libraries this
    process has loaded (none for OpenBLAS < 0.3.28, or another BLAS)."""
    from threadpoolctl import threadpool_info

    setters = []
    for lib in threadpool_info():
        if lib["internal_api"] != "openblas":
            continue
        library = ctypes.CDLL(lib["filepath"])
        for name in _SETTER_NAMES:
            if hasattr(library, name):
                setters.append(ctypes.cast(getattr(library, name), ctypes.c_void_p).value)
                break
    return setters


def _adopt_blas(adopt: bool) -> None:
    for setter in _BLAS_SETTERS:
        NATIVE.adopt_blas(setter, adopt)


def _after_fork_in_child() -> None:
    global _threads, _forked
    NATIVE.set_num_threads(1)
    _adopt_blas(False)
    _threads, _forked = 1, True


_threads = _default()
_forked = False
_BLAS_SETTERS: list[int] = []
if NATIVE is not None:
    NATIVE.set_num_threads(_threads)
    if hasattr(NATIVE, "adopt_blas") and os.environ.get("WORKBENCH_BLAS_TEAM", "1") != "0":
        _BLAS_SETTERS = _openblas_setters()
        _adopt_blas(True)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def blas_team() -> bool:
    """Whether OpenBLAS runs its parallel jobs on the native kernels' threads."""
    return bool(_BLAS_SETTERS) and not _forked


def set_num_threads(n: int) -> None:
    """Threads for the native CPU kernels and for BLAS (matmul, conv), ``n >= 1``."""
    global _threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise WorkbenchError(f"set_num_threads: expected an int >= 1, found {n!r}")
    if _forked and n > 1:
        raise WorkbenchError(
            f"set_num_threads({n}): this process was forked, and the OpenMP threads of the "
            "process it was forked from cannot run here; it stays at 1 thread (start workers "
            "with multiprocessing's 'spawn' or 'forkserver' method to use more)"
        )
    if NATIVE is not None:
        NATIVE.set_num_threads(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n, user_api="blas")
    _threads = n


def get_num_threads() -> int:
    """Threads the CPU kernels use (see ``set_num_threads``)."""
    return _threads
