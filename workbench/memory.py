"""Memory per device: active, peak and cached bytes, like ``torch.cuda.memory_stats`` or MLX's
``get_active_memory``.

    wb.memory_stats()          # {"active_bytes": ..., "peak_bytes": ..., "cached_bytes": ...}
    wb.memory_stats("cuda:0")
    wb.reset_peak_memory_stats()
    wb.clear_cache("cuda")

The CPU counts the buffers workbench allocated (arrays adopted with ``from_numpy`` are the
user's); CUDA and Metal report their pools (``cached_bytes`` is pool memory not in use).
"""

from __future__ import annotations

from .device import Device

STAT_KEYS = ("active_bytes", "peak_bytes", "cached_bytes")


def _device(device: Device | str | None) -> Device:
    return Device.cpu() if device is None else Device(device)


def memory_stats(device: Device | str | None = None) -> dict[str, int]:
    """``{"active_bytes", "peak_bytes", "cached_bytes", ...}`` for ``device`` (default: cpu).

    Backends may add keys (the CPU adds ``allocations``); the three above are always there.
    """
    dev = _device(device)
    stats = dict(dev.backend.memory_stats(dev.index))
    for key in STAT_KEYS:
        stats.setdefault(key, 0)
    return stats


def reset_peak_memory_stats(device: Device | str | None = None) -> None:
    """Set the peak to the bytes active now."""
    dev = _device(device)
    dev.backend.reset_peak_memory_stats(dev.index)


def clear_cache(device: Device | str | None = None) -> None:
    """Give the pool's unused memory back to the driver (a no-op on the CPU)."""
    dev = _device(device)
    dev.backend.clear_cache(dev.index)
