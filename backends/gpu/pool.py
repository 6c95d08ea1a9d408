"""A caching allocator per device: freed blocks go back to size-class bins for reuse.

The policy is the GPU backends' own; the memory comes from a driver layer's
``mem_alloc(index, nbytes)`` / ``mem_free(handle)`` (CUDA's, Metal's, or a test's fake), which
raises ``OutOfMemoryError`` when the device is full.

Sizes are rounded up to a size class (512-byte multiples below 1 MiB, 2 MiB multiples above), a
request reuses a cached block of exactly its class, and ``clear_cache`` gives every cached
block back to the driver. When the driver is out of memory the pool frees its cache and retries
once before raising ``OutOfMemory``. Stats: active (in use), peak (max active), cached (held
but unused).
"""

from __future__ import annotations

from ..errors import OutOfMemory

SMALL = 1 << 20
SMALL_STEP = 512
LARGE_STEP = 2 << 20


def size_class(nbytes: int) -> int:
    """The bytes actually allocated for a request of ``nbytes`` (at least one small step)."""
    if nbytes <= SMALL:
        return max(SMALL_STEP, -(-nbytes // SMALL_STEP) * SMALL_STEP)
    return -(-nbytes // LARGE_STEP) * LARGE_STEP


class OutOfMemoryError(Exception):
    """The driver could not allocate device memory (the pool retries once after freeing)."""


class Block:
    """One allocation handed out by the pool; ``ptr`` is its device address."""

    __slots__ = ("ptr", "size", "handle", "pool")

    def __init__(self, ptr: int, size: int, handle, pool: CachingPool):
        self.ptr = ptr
        self.size = size
        self.handle = handle
        self.pool = pool

    def __del__(self) -> None:
        pool = self.pool
        if pool is not None:
            self.pool = None
            pool.release(self)


class CachingPool:
    """Allocations for one device (``kind:index``) through ``driver.mem_alloc(index, nbytes)``."""

    def __init__(self, driver, index: int, kind: str = "cuda"):
        self.driver = driver
        self.index = index
        self.kind = kind
        self.bins: dict[int, list] = {}  # size class -> free driver handles
        self.active = 0
        self.peak = 0
        self.cached = 0
        self.allocations = 0
        self.driver_allocations = 0

    def allocate(self, nbytes: int) -> Block:
        size = size_class(nbytes)
        free = self.bins.get(size)
        if free:
            handle = free.pop()
            self.cached -= size
        else:
            handle = self._driver_alloc(size)
        self.active += size
        self.allocations += 1
        if self.active > self.peak:
            self.peak = self.active
        return Block(int(handle), size, handle, self)

    def _driver_alloc(self, size: int):
        try:
            handle = self.driver.mem_alloc(self.index, size)
        except OutOfMemoryError:
            self.clear_cache()
            try:
                handle = self.driver.mem_alloc(self.index, size)
            except OutOfMemoryError as err:
                raise OutOfMemory(
                    f"{self.kind}:{self.index} is out of memory allocating {size} bytes "
                    f"({self.active} bytes in use by workbench, cache already freed): {err}"
                ) from err
        self.driver_allocations += 1
        return handle

    def release(self, block: Block) -> None:
        """Return ``block`` to its bin (called when its storage is garbage collected)."""
        self.active -= block.size
        self.cached += block.size
        self.bins.setdefault(block.size, []).append(block.handle)

    def clear_cache(self) -> None:
        for handles in self.bins.values():
            for handle in handles:
                self.driver.mem_free(handle)
        self.bins.clear()
        self.cached = 0

    def stats(self) -> dict[str, int]:
        return {
            "active_bytes": self.active,
            "peak_bytes": self.peak,
            "cached_bytes": self.cached,
            "allocations": self.allocations,
            "driver_allocations": self.driver_allocations,
        }

    def reset_peak(self) -> None:
        self.peak = self.active
