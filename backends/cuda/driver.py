"""The thin layer over ``pycuda.driver`` that the rest of the CUDA backend uses.

Nothing else in ``backends/cuda`` imports pycuda: tests replace the driver with a fake
(``set_driver``) to exercise the pool, the storage's launch logic and the timers on a
machine without a GPU. pycuda is imported on first use only (it needs ``libcuda.so.1``).
"""

from __future__ import annotations

import threading
from typing import Any

from ..gpu.driver_holder import DriverHolder
from ..gpu.pool import OutOfMemoryError


class PycudaDriver:
    """Devices by ordinal (each with its primary context), memory, copies, modules, launches,
    streams and events through pycuda."""

    def __init__(self) -> None:
        import pycuda.driver as cuda

        cuda.init()
        self.cuda = cuda
        self.Error = cuda.Error
        self._contexts: dict[int, Any] = {}
        self._local = threading.local()  # each thread has its own context stack
        self._streams: dict[int, Any] = {}

    # -- devices and contexts -----------------------------------------------------------
    def device_count(self) -> int:
        return self.cuda.Device.count()

    def activate(self, index: int) -> None:
        """Make device ``index``'s primary context current on this thread."""
        current = getattr(self._local, "index", None)
        if current == index:
            return
        ctx = self._contexts.get(index)
        if ctx is None:
            ctx = self.cuda.Device(index).retain_primary_context()
            self._contexts[index] = ctx
        if current is not None:
            self.cuda.Context.pop()
        ctx.push()
        self._local.index = index

    def close(self) -> None:
        """Pop this thread's context (at exit: pycuda aborts if the stack is not empty)."""
        if getattr(self._local, "index", None) is not None:
            self.cuda.Context.pop()
            self._local.index = None

    def compute_capability(self, index: int) -> tuple[int, int]:
        return self.cuda.Device(index).compute_capability()

    def device_name(self, index: int) -> str:
        return self.cuda.Device(index).name()

    def mem_get_info(self, index: int) -> tuple[int, int]:
        self.activate(index)
        return self.cuda.mem_get_info()

    def synchronize(self, index: int) -> None:
        self.activate(index)
        self.cuda.Context.synchronize()

    def stream(self, index: int):
        """The device's one stream for workbench work (ops queue in order on it)."""
        stream = self._streams.get(index)
        if stream is None:
            self.activate(index)
            stream = self._streams[index] = self.cuda.Stream()
        return stream

    def stream_handle(self, stream) -> int:
        return stream.handle

    def synchronize_stream(self, stream) -> None:
        stream.synchronize()

    # -- memory -------------------------------------------------------------------------
    def mem_alloc(self, index: int, nbytes: int):
        """A device allocation (``int(handle)`` is its address); raises ``OutOfMemoryError``."""
        self.activate(index)
        try:
            return self.cuda.mem_alloc(nbytes)
        except self.cuda.MemoryError as err:
            raise OutOfMemoryError(str(err)) from err

    def mem_free(self, handle) -> None:
        handle.free()

    def pinned_empty(self, nbytes: int):
        """A page-locked host buffer of ``nbytes`` bytes (uint8 numpy array)."""
        import numpy as np

        return self.cuda.pagelocked_empty(nbytes, np.uint8)

    def memcpy_htod(self, index: int, dst: int, host, stream=None) -> None:
        self.activate(index)
        if stream is None:
            self.cuda.memcpy_htod(dst, host)
        else:
            self.cuda.memcpy_htod_async(dst, host, stream)

    def memcpy_dtoh(self, index: int, host, src: int, stream=None) -> None:
        self.activate(index)
        if stream is None:
            self.cuda.memcpy_dtoh(host, src)
        else:
            self.cuda.memcpy_dtoh_async(host, src, stream)

    def memcpy_dtod(self, index: int, dst: int, src: int, nbytes: int, stream=None) -> None:
        self.activate(index)
        if stream is None:
            self.cuda.memcpy_dtod(dst, src, nbytes)
        else:
            self.cuda.memcpy_dtod_async(dst, src, nbytes, stream)

    # -- modules and launches -----------------------------------------------------------
    def load_module(self, index: int, path: str):
        """A module from a PTX file (the driver JIT-compiles it)."""
        self.activate(index)
        return self.cuda.module_from_file(path)

    def load_module_data(self, index: int, image: bytes):
        """A module from a fatbin in memory (cubins and PTX: the driver picks the device's)."""
        self.activate(index)
        return self.cuda.module_from_buffer(image)

    def get_function(self, module, name: str):
        return module.get_function(name)

    def launch(self, index: int, function, grid, block, args: bytes, shared: int = 0, stream=None):
        """Launch ``function`` with a packed argument buffer (``params.pack_args``)."""
        self.activate(index)
        function._launch_kernel(tuple(grid), tuple(block), args, shared, stream)

    # -- events -------------------------------------------------------------------------
    def event(self, index: int):
        self.activate(index)
        return self.cuda.Event()

    def record(self, event, stream=None) -> None:
        event.record(stream)

    def elapsed_ms(self, start, end) -> float:
        end.synchronize()
        return end.time_since(start)


def _why_unusable(err: Exception) -> str:
    if isinstance(err, ImportError):
        return (
            f"pycuda cannot be imported ({err}); "
            "install workbench[cuda] on a machine with an NVIDIA driver"
        )
    return f"the CUDA driver failed to initialise: {err}"  # pycuda's driver.Error and the like


HOLDER = DriverHolder(PycudaDriver, _why_unusable)
get_driver = HOLDER.get
set_driver = HOLDER.set
