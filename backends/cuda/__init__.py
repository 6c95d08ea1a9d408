"""The CUDA backend: pycuda's driver API, kernels from ``kernels/cuda`` (prebuilt fatbins, or
compiled at first use where none serves the GPU), matmul through cuBLAS.

``is_available()`` -> ``(ok, reason)``; ``device_count()``; ``synchronize(index)``; the memory
API (``memory_stats``, ``reset_peak_memory_stats``, ``clear_cache``) reports each device's
caching pool; ``device_timer(index)`` gives the profiler per-op device times from CUDA events;
``set_allow_tf32(True)`` lets f32 matmuls use TF32 tensor cores.
"""

from __future__ import annotations

from ..gpu.device_api import DeviceApi
from . import driver as _driver
from .runtime import runtime as _runtime
from .storage import CudaStorage as Storage


def is_available() -> tuple[bool, str]:
    """pycuda imports, the driver initialises and reports at least one device."""
    try:
        count = _driver.get_driver().device_count()
    except RuntimeError as err:
        return False, str(err)
    if count == 0:
        return False, "the NVIDIA driver reports no CUDA device"
    return True, ""


def device_count() -> int:
    try:
        return _driver.get_driver().device_count()
    except RuntimeError:
        return 0


def synchronize(index: int = 0) -> None:
    """Wait for all work queued on device ``index``."""
    _runtime().driver.synchronize(index)


_API = DeviceApi(_runtime)
memory_stats = _API.memory_stats
reset_peak_memory_stats = _API.reset_peak_memory_stats
clear_cache = _API.clear_cache
device_timer = _API.device_timer


def set_allow_tf32(allow: bool) -> None:
    """Let f32 matmuls round their inputs to TF32 on tensor cores (faster, ~1e-3 relative)."""
    _runtime().allow_tf32 = bool(allow)


__all__ = ["Storage", "is_available", "device_count", "synchronize", "memory_stats",
           "reset_peak_memory_stats", "clear_cache", "device_timer", "set_allow_tf32"]  # fmt: skip
