"""The device timer the profiler reads: device time between ``start()`` and ``stop_ns()``.

It needs from a backend's runtime only ``runtime.stream(index)`` and a driver layer with
``event(index)``, ``record(event, stream)`` and ``elapsed_ms(start, end)``: CUDA events on
CUDA, command-buffer GPU start/end times on Metal.
"""

from __future__ import annotations


class DeviceTimer:
    """Device time between ``start()`` and ``stop_ns()`` from two events on the stream."""

    __slots__ = ("runtime", "index", "_start")

    def __init__(self, rt, index: int):
        self.runtime = rt
        self.index = index
        self._start = None

    def start(self) -> None:
        driver = self.runtime.driver
        self._start = driver.event(self.index)
        driver.record(self._start, self.runtime.stream(self.index))

    def stop_ns(self) -> int:
        driver = self.runtime.driver
        end = driver.event(self.index)
        driver.record(end, self.runtime.stream(self.index))
        return int(driver.elapsed_ms(self._start, end) * 1e6)
