"""The memory API and device timer a GPU backend module exposes, over its runtime.

``memory_stats``, ``reset_peak_memory_stats`` and ``clear_cache`` read the runtime's caching
pool of device ``index`` (``runtime.pool(index)``); ``device_timer`` times on its stream.
A backend's ``__init__`` binds them: ``memory_stats = DeviceApi(runtime).memory_stats``.
"""

from __future__ import annotations

from collections.abc import Callable

from .timer import DeviceTimer


class DeviceApi:
    """The per-device functions of one backend; ``runtime()`` returns its (lazy) runtime."""

    __slots__ = ("runtime",)

    def __init__(self, runtime: Callable):
        self.runtime = runtime

    def memory_stats(self, index: int = 0) -> dict[str, int]:
        """The pool's active, peak and cached bytes (and allocation counts) on device ``index``."""
        return self.runtime().pool(index).stats()

    def reset_peak_memory_stats(self, index: int = 0) -> None:
        """Start the pool's peak counters again from what is active now."""
        self.runtime().pool(index).reset_peak()

    def clear_cache(self, index: int = 0) -> None:
        """Give the pool's unused blocks back to the device driver."""
        self.runtime().pool(index).clear_cache()

    def device_timer(self, index: int = 0) -> DeviceTimer:
        """A timer of device time on device ``index``'s stream (for the profiler)."""
        return DeviceTimer(self.runtime(), index)
