"""The Metal backend (PyObjC, kernels generated into ``workbench.kernels/metal``), macOS.

``driver`` is the layer over PyObjC (device discovery, shared buffers, libraries, pipelines,
command buffers, MPS, autorelease pools); ``stream`` batches dispatches into command buffers;
``runtime`` holds per device the GPU base's caching pool and the pipelines compiled at first
use; ``storage`` is ``MetalStorage``, the GPU base's ops over those hooks.

``is_available()`` -> ``(ok, reason)``; ``device_count()``; ``synchronize(index)``; the memory
API (``memory_stats``, ``reset_peak_memory_stats``, ``clear_cache``); ``device_timer(index)``
gives the profiler device times from the command buffers' ``GPUStartTime``/``GPUEndTime``.
"""

from __future__ import annotations

import sys

from ..gpu.device_api import DeviceApi
from .driver import HOLDER, get_driver
from .runtime import runtime as _runtime
from .storage import MetalStorage as Storage


def is_available() -> tuple[bool, str]:
    """PyObjC's Metal imports on macOS (or a driver layer was installed, as tests do) and it
    lists at least one device."""
    if HOLDER.driver is None and sys.platform != "darwin":
        return False, f"Metal needs macOS; this machine runs {sys.platform}"
    try:
        count = get_driver().device_count()
    except RuntimeError as err:
        return False, str(err)
    if count == 0:
        return False, "macOS reports no Metal device"
    return True, ""


def device_count() -> int:
    try:
        return get_driver().device_count()
    except RuntimeError:
        return 0


def device_name(index: int = 0) -> str:
    return get_driver().device_name(index)


def total_memory(index: int = 0) -> int:
    """The device's recommended working set (what ``%wb_devices`` shows as its memory)."""
    return get_driver().mem_get_info(index)[1]


def synchronize(index: int = 0) -> None:
    """Wait for all work queued on device ``index``."""
    _runtime().synchronize(index)


_API = DeviceApi(_runtime)
memory_stats = _API.memory_stats
reset_peak_memory_stats = _API.reset_peak_memory_stats
clear_cache = _API.clear_cache
device_timer = _API.device_timer


__all__ = ["Storage", "is_available", "device_count", "device_name", "total_memory",
           "synchronize",
           "memory_stats", "reset_peak_memory_stats", "clear_cache", "device_timer"]  # fmt: skip
