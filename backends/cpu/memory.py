"""Memory accounting for CPU buffers that workbench allocated, and the base class that keeps it.

Each ``CpuStorage`` that owns its array adds its size on creation and subtracts it when it is
freed. Arrays adopted from the user without a copy (``from_numpy``) are not counted: workbench
does not own them. With the native extension, ``StorageBase`` is its C type (counting costs no
Python code per storage); without it, the Python class below does the same.
"""

from __future__ import annotations

from .native import NATIVE


class Counters:
    """Plain attributes: updated on every allocation, so cheaper than a dict."""

    __slots__ = ("active", "peak", "allocations")

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.allocations = 0


COUNTERS = Counters()


class PyStorageBase:
    """``array``, ``version`` and the owned bytes, counted in ``COUNTERS`` (numpy path)."""

    __slots__ = ("array", "version", "_owned_bytes")

    def __init__(self, array, owned: bool = True):
        nbytes = array.nbytes if owned else 0
        self.array = array
        self.version = 0
        counters = COUNTERS
        active = counters.active + nbytes - getattr(self, "_owned_bytes", 0)
        self._owned_bytes = nbytes
        counters.active = active
        counters.allocations += owned
        if active > counters.peak:
            counters.peak = active

    def __del__(self) -> None:
        COUNTERS.active -= self._owned_bytes

    def __reduce__(self):
        array = self.array  # a deferred storage computes its array (and changes class) here
        return type(self), (array,)


StorageBase = getattr(NATIVE, "StorageBase", None) or PyStorageBase


def _counters() -> tuple[int, int, int]:
    """(active, peak, allocations) in bytes, bytes and arrays."""
    if StorageBase is PyStorageBase:
        return COUNTERS.active, COUNTERS.peak, COUNTERS.allocations
    return NATIVE.memory_counters()


def active_bytes() -> int:
    return _counters()[0]


def memory_stats(index: int = 0) -> dict[str, int]:
    """Active, peak and cached bytes (the CPU keeps no cache: numpy frees at once)."""
    active, peak, allocations = _counters()
    return {
        "active_bytes": active,
        "peak_bytes": peak,
        "cached_bytes": 0,
        "allocations": allocations,
    }


def reset_peak_memory_stats(index: int = 0) -> None:
    if StorageBase is PyStorageBase:
        COUNTERS.peak = COUNTERS.active
    else:
        NATIVE.reset_peak_memory()


def clear_cache(index: int = 0) -> None:
    """Nothing is cached on the CPU."""
