"""The CPU backend: numpy arrays, BLAS matmul through numpy, bf16 through ml_dtypes."""

from .memory import clear_cache, memory_stats, reset_peak_memory_stats
from .storage import CpuStorage as Storage


def is_available() -> tuple[bool, str]:
    return True, ""


def device_count() -> int:
    return 1


def synchronize(index: int = 0) -> None:
    """The CPU runs ops eagerly: nothing is ever queued."""


__all__ = ["Storage", "is_available", "device_count", "synchronize", "memory_stats",
           "reset_peak_memory_stats", "clear_cache"]  # fmt: skip
