"""Threads of the CPU backend: the native kernels' OpenMP team and the BLAS pool, kept equal.

Ops run one after the other, so the native kernels and BLAS never run at the same time: giving
each the same count ``n`` (threadpoolctl sets BLAS's) uses ``n`` cores and never oversubscribes.
The default is the number of physical cores this process may run on (hyper-threads share one
core's vector units, which these kernels saturate), unless ``OMP_NUM_THREADS`` says otherwise.
"""

from __future__ import annotations

import os

from ..errors import WorkbenchError
from .native import NATIVE


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


_threads = _default()
if NATIVE is not None:
    NATIVE.set_num_threads(_threads)


def set_num_threads(n: int) -> None:
    """Threads for the native CPU kernels and for BLAS (matmul, conv), ``n >= 1``."""
    global _threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise WorkbenchError(f"set_num_threads: expected an int >= 1, found {n!r}")
    if NATIVE is not None:
        NATIVE.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its own count
        pass
    else:
        threadpool_limits(limits=n, user_api="blas")
    _threads = n


def get_num_threads() -> int:
    """Threads the CPU kernels use (see ``set_num_threads``)."""
    return _threads
