"""The memory API (workbench.memory) on the CPU."""

from __future__ import annotations

import copy
import gc

import numpy as np

import workbench as wb
from workbench.backends.cpu.fused import _deferred_class
from workbench.backends.cpu.storage import CpuStorage
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
    before = memory_stats()["active_bytes"]
    t = wb.from_numpy(np.zeros(1000, dtype=np.float32))
    assert memory_stats()["active_bytes"] == before
    del t


def test_copies_are_counted_and_freed():
    x = wb.arange(1000, dtype=wb.f32)
    gc.collect()
    before = memory_stats()
    y = copy.deepcopy(x)
    during = memory_stats()
    assert during["active_bytes"] == before["active_bytes"] + 4000
    assert during["allocations"] == before["allocations"] + 1
    assert y._storage is not x._storage
    np.testing.assert_array_equal(y.numpy(), np.arange(1000, dtype=np.float32))
    del y
    gc.collect()
    assert memory_stats()["active_bytes"] == before["active_bytes"]


def test_deferred_storage_is_counted_once_computed():
    gc.collect()
    before = memory_stats()["active_bytes"]
    deferred = _deferred_class(CpuStorage)(lambda: np.ones(250, np.float32))
    assert memory_stats()["active_bytes"] == before
    assert deferred.array.sum() == 250 and type(deferred) is CpuStorage
    assert memory_stats()["active_bytes"] == before + 1000
    del deferred
    gc.collect()
    assert memory_stats()["active_bytes"] == before


def test_adopted_arrays_are_not_counted():
    gc.collect()
    before = memory_stats()
    storage = CpuStorage(np.zeros(100, np.float64), owned=False)
    assert memory_stats()["active_bytes"] == before["active_bytes"]
    assert memory_stats()["allocations"] == before["allocations"]
    assert storage.version == 0 and storage._owned_bytes == 0
    del storage
    gc.collect()
    assert memory_stats()["active_bytes"] == before["active_bytes"]
