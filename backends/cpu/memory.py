"""Memory accounting for CPU buffers that workbench allocated.

Each ``CpuStorage`` that owns its array adds its size on creation and subtracts it in
``__del__``. Arrays adopted from the user without a copy (``from_numpy``) are not counted:
workbench does not own them.
"""

from __future__ import annotations


class Counters:
    """Plain attributes: updated on every allocation, so cheaper than a dict."""

    __slots__ = ("active", "peak", "allocations")

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.allocations = 0


COUNTERS = Counters()


def memory_stats(index: int = 0) -> dict[str, int]:
    """Active, peak and cached bytes (the CPU keeps no cache: numpy frees at once)."""
    return {
        "active_bytes": COUNTERS.active,
        "peak_bytes": COUNTERS.peak,
        "cached_bytes": 0,
        "allocations": COUNTERS.allocations,
    }


def reset_peak_memory_stats(index: int = 0) -> None:
    COUNTERS.peak = COUNTERS.active


def clear_cache(index: int = 0) -> None:
    """Nothing is cached on the CPU."""
