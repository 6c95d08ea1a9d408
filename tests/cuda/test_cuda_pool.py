"""The caching pool with a fake driver: size classes, reuse, stats, clear_cache, OOM retry."""

from __future__ import annotations

import gc

import pytest
from fakes import FakeDriver

from workbench.backends.errors import OutOfMemory
from workbench.backends.gpu.pool import LARGE_STEP, SMALL, SMALL_STEP, CachingPool, size_class


@pytest.mark.parametrize(
    ("request_bytes", "expected"),
    [(0, SMALL_STEP), (1, SMALL_STEP), (512, 512), (513, 1024), (SMALL, SMALL),
     (SMALL + 1, LARGE_STEP), (LARGE_STEP + 1, 2 * LARGE_STEP)],
)  # fmt: skip
def test_size_class(request_bytes, expected):
    assert size_class(request_bytes) == expected


def test_reuse_and_stats():
    driver = FakeDriver()
    pool = CachingPool(driver, 0)
    a = pool.allocate(1000)
    assert a.size == 1024 and driver.allocs == 1
    assert pool.stats()["active_bytes"] == 1024
    ptr = a.ptr
    del a
    gc.collect()
    stats = pool.stats()
    assert stats["active_bytes"] == 0 and stats["cached_bytes"] == 1024
    assert stats["peak_bytes"] == 1024
    b = pool.allocate(700)  # same class: the cached block comes back, no driver call
    assert b.ptr == ptr and driver.allocs == 1
    assert pool.stats()["cached_bytes"] == 0
    c = pool.allocate(5000)  # another class
    assert c.ptr != ptr and driver.allocs == 2
    assert pool.stats()["peak_bytes"] == 1024 + 5120
    del b, c
    pool.reset_peak()
    assert pool.stats()["peak_bytes"] == 0


def test_clear_cache_frees_to_driver():
    driver = FakeDriver()
    pool = CachingPool(driver, 0)
    blocks = [pool.allocate(n) for n in (100, 100, 3 << 20)]
    del blocks
    assert pool.stats()["cached_bytes"] == 2 * 512 + (4 << 20)
    pool.clear_cache()
    assert pool.stats()["cached_bytes"] == 0
    assert driver.frees == 3 and driver.used == 0


def test_oom_frees_cache_and_retries():
    driver = FakeDriver(capacity=4 << 20)
    pool = CachingPool(driver, 0)
    held = pool.allocate(2 << 20)
    cached = pool.allocate(2 << 20)
    del cached  # 2 MiB cached, the device is full
    big = pool.allocate(2 << 20)  # same class: reused from the cache
    del big
    other = pool.allocate(SMALL)  # needs the driver: frees the cache first, then succeeds
    assert driver.frees == 1 and other.size == SMALL
    assert pool.stats()["cached_bytes"] == 0
    del held


def test_oom_raises_out_of_memory():
    pool = CachingPool(FakeDriver(capacity=1 << 20), 3)
    with pytest.raises(OutOfMemory, match=r"cuda:3 is out of memory allocating 4194304 bytes"):
        pool.allocate(4 << 20)
    assert isinstance(OutOfMemory("x"), MemoryError)
