"""Per-process Metal state: the driver layer, and per device a caching pool, a command
stream, and the libraries and pipelines compiled at first use from ``kernels/metal``.

Libraries are compiled from the generated ``kernels/metal/<family>.metal`` sources (the
portable bodies of ``kernels/gpu`` through the Metal prelude) once per device and process;
pipelines once per kernel. Host copies go through the shared buffers' ``contents()``: an upload
is staged and blit-copied in stream order, a download first waits for the stream.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from ..gpu.pool import CachingPool
from .driver import get_driver
from .stream import CommandStream

METAL_SOURCES = Path(__file__).resolve().parent.parent.parent / "kernels" / "metal"


@cache
def kernel_source(family: str) -> str:
    path = METAL_SOURCES / f"{family}.metal"
    if not path.exists():
        raise FileNotFoundError(
            f"no Metal source for the {family!r} kernels ({path}): that family is not written "
            "in the portable dialect yet"
        )
    return path.read_text()


class Runtime:
    def __init__(self, driver):
        self.driver = driver
        self.pools: dict[int, CachingPool] = {}
        self.streams: dict[int, CommandStream] = {}
        self.libraries: dict[tuple[int, str], object] = {}
        self.pipelines: dict[tuple[int, str, str], object] = {}
        self.placeholders: dict[int, object] = {}

    def pool(self, index: int) -> CachingPool:
        pool = self.pools.get(index)
        if pool is None:
            self.driver.device(index)  # a clear error for a device that does not exist
            pool = self.pools[index] = CachingPool(self.driver, index, kind="metal")
        return pool

    def stream(self, index: int) -> CommandStream:
        stream = self.streams.get(index)
        if stream is None:
            stream = self.streams[index] = CommandStream(self.driver, index)
        return stream

    def pipeline(self, index: int, family: str, name: str):
        """Kernel ``name`` of ``kernels/metal/<family>.metal``, compiled at first use."""
        key = (index, family, name)
        state = self.pipelines.get(key)
        if state is None:
            library = self.libraries.get((index, family))
            if library is None:
                library = self.driver.compile_library(index, kernel_source(family), family)
                self.libraries[(index, family)] = library
            state = self.pipelines[key] = self.driver.pipeline(index, library, name)
        return state

    def placeholder(self, index: int):
        """A 16-byte buffer bound where a kernel's optional buffer is absent (the kernel
        reads a flag instead; Metal wants a buffer at every slot the function declares)."""
        handle = self.placeholders.get(index)
        if handle is None:
            handle = self.placeholders[index] = self.driver.mem_alloc(index, 16)
        return handle

    def synchronize(self, index: int) -> None:
        self.stream(index).wait()

    # -- host transfers through the shared buffers --------------------------------------
    def upload(self, handle, offset: int, data: np.ndarray) -> None:
        """Write the bytes ``data`` (uint8, contiguous) at ``offset``. With nothing queued on
        the device they are copied straight into the shared buffer; otherwise into a fresh
        staging buffer now, blit-copied in stream order, so work queued earlier that still
        uses the (possibly recycled) buffer sees its old contents."""
        stream = self.stream(handle.index)
        if stream.idle:
            view = np.frombuffer(self.driver.contents(handle), np.uint8)
            view[offset : offset + data.size] = data
            return
        staging = self.driver.mem_alloc(handle.index, data.size)
        np.frombuffer(self.driver.contents(staging), np.uint8)[:] = data
        stream.copy(staging, 0, handle, offset, data.size)

    def download(self, handle, offset: int, out: np.ndarray) -> None:
        """Copy ``out.size`` bytes from ``offset`` of the buffer, after all queued work."""
        self.synchronize(handle.index)
        view = np.frombuffer(self.driver.contents(handle), np.uint8)
        out[:] = view[offset : offset + out.size]


_RUNTIME: Runtime | None = None


def runtime() -> Runtime:
    global _RUNTIME
    rt = _RUNTIME
    if rt is None or rt.driver is not get_driver():
        rt = _RUNTIME = Runtime(get_driver())
    return rt


def reset() -> None:
    """Forget all state (tests call it after swapping the driver)."""
    global _RUNTIME
    _RUNTIME = None
