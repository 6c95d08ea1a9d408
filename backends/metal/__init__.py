"""The Metal backend (PyObjC, kernels from ``workbench.kernels/metal``), macOS only.

Built so far: the driver layer over PyObjC (``driver``: device discovery, shared buffers,
libraries, pipelines, command buffers, autorelease pools), the command stream that batches
dispatches (``stream``) and the per-device runtime with the GPU base's caching pool
(``runtime``). The storage (the ops) is not written yet, so ``is_available()`` is false with
that reason even on a Mac; ``device_count()`` and the memory API already report the devices.
"""

from __future__ import annotations

import sys
from functools import lru_cache

from .driver import get_driver
from .runtime import runtime as _runtime


@lru_cache(maxsize=1)
def is_available() -> tuple[bool, str]:
    if sys.platform != "darwin":
        return False, f"Metal needs macOS; this machine runs {sys.platform}"
    try:
        count = get_driver().device_count()
    except RuntimeError as err:
        return False, str(err)
    if count == 0:
        return False, "macOS reports no Metal device"
    return False, "the Metal storage is not implemented yet in this version of workbench"


def device_count() -> int:
    try:
        return get_driver().device_count()
    except RuntimeError:
        return 0


def synchronize(index: int = 0) -> None:
    """Wait for all work queued on device ``index``."""
    _runtime().synchronize(index)


def memory_stats(index: int = 0) -> dict[str, int]:
    """The pool's active, peak and cached bytes (and allocation counts) on device ``index``."""
    return _runtime().pool(index).stats()
