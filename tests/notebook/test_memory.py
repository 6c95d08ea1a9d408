"""The memory API (workbench.memory) on the CPU."""

from __future__ import annotations

import gc

import workbench as wb
from workbench.memory import clear_cache, memory_stats, reset_peak_memory_stats


def test_memory_stats_track_allocations():
    gc.collect()
    before = memory_stats()
    assert {"active_bytes", "peak_bytes", "cached_bytes"} <= set(before)
    x = wb.zeros(1000, dtype=wb.f32)
    during = memory_stats("cpu")
    assert during["active_bytes"] >= before["active_bytes"] + 4000
    assert during["peak_bytes"] >= during["active_bytes"]
    del x
    gc.collect()
    after = memory_stats(wb.Device.cpu())
    assert after["active_bytes"] == before["active_bytes"]
    assert after["peak_bytes"] >= during["active_bytes"]
    reset_peak_memory_stats()
    assert memory_stats()["peak_bytes"] == after["active_bytes"]
    clear_cache()
    assert memory_stats()["cached_bytes"] == 0


def test_from_numpy_is_not_counted():
    import numpy as np

    before = memory_stats()["active_bytes"]
    t = wb.from_numpy(np.zeros(1000, dtype=np.float32))
    assert memory_stats()["active_bytes"] == before
    del t
