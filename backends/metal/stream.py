"""The order of a Metal device's work: dispatches batched into command buffers.

A chain of small ops must not pay one submission each, so dispatches are encoded into one open
command buffer (one compute encoder) and the buffer is committed when it holds
``MAX_DISPATCHES``, or at a sync point: ``wait()`` (a host read, ``.numpy()``, ``.item()``,
``synchronize``) or ``mark()`` (a profiler boundary). Committing does not wait; only ``wait``
blocks, and it surfaces a failed command buffer's error. Blit copies go into the same command
buffer between compute encoders, so they stay in order with the dispatches.

Device times: positions count committed command buffers; ``gpu_ms(a, b)`` waits for buffers
``a .. b-1`` and sums their ``GPUEndTime - GPUStartTime``. A mark flushes first, so work
before and after it never shares a buffer.
"""

from __future__ import annotations

MAX_DISPATCHES = 64  # dispatches per command buffer before it is committed


class CommandStream:
    """Device ``index``'s queue of work, through a driver layer (``driver.py`` or a fake's)."""

    def __init__(self, driver, index: int):
        self.driver = driver
        self.index = index
        self._buffer = None  # the open command buffer, if any
        self._encoder = None  # its open compute encoder, if any
        self._encoded = 0  # dispatches and copies in the open buffer
        self._committed: list = []  # committed buffers not yet waited for, in order
        self._waited = 0  # buffers known complete (positions below this one)
        self._prefix_s = [0.0]  # GPU seconds of buffers 0 .. i-1, for each waited i

    @property
    def position(self) -> int:
        """Command buffers committed so far."""
        return self._waited + len(self._committed)

    @property
    def idle(self) -> bool:
        """Nothing encoded or committed is still unfinished (host writes are safe)."""
        return self._buffer is None and not self._committed

    def _open(self):
        if self._buffer is None:
            self._buffer = self.driver.command_buffer(self.index)
        return self._buffer

    def _end_encoder(self) -> None:
        if self._encoder is not None:
            self.driver.end_encoding(self._encoder)
            self._encoder = None

    def _encoded_one(self) -> None:
        self._encoded += 1
        if self._encoded >= MAX_DISPATCHES:
            self.flush()

    def dispatch(self, pipeline, buffers=(), values=(), groups=(1, 1, 1), threads=(1, 1, 1),
                 shared: int = 0) -> None:  # fmt: skip
        """Encode one kernel dispatch (see ``MetalDriver.encode_dispatch``)."""
        with self.driver.pool():
            if self._encoder is None:
                self._encoder = self.driver.compute_encoder(self._open())
            self.driver.encode_dispatch(
                self._encoder, pipeline, buffers, values, groups, threads, shared
            )
        self._encoded_one()

    def copy(self, src, src_offset: int, dst, dst_offset: int, nbytes: int) -> None:
        """Encode a device-to-device copy of ``nbytes`` bytes, in order with the dispatches."""
        with self.driver.pool():
            self._end_encoder()
            self.driver.encode_copy(self._open(), src, src_offset, dst, dst_offset, nbytes)
        self._encoded_one()

    def encode(self, fn) -> None:
        """Let ``fn(command_buffer)`` encode its own work (a library's kernel: MPS), in order
        with the dispatches."""
        with self.driver.pool():
            self._end_encoder()
            fn(self._open())
        self._encoded_one()

    def flush(self) -> None:
        """Commit the open command buffer (if it holds anything); does not wait."""
        if self._buffer is None:
            return
        with self.driver.pool():
            self._end_encoder()
            self.driver.commit(self._buffer)
        self._committed.append(self._buffer)
        self._buffer = None
        self._encoded = 0

    def wait(self, position: int | None = None) -> None:
        """Flush, then block until the buffers before ``position`` (default: all) are done."""
        self.flush()
        end = self.position if position is None else position
        while self._waited < end:
            buffer = self._committed.pop(0)
            self._waited += 1
            seconds = 0.0
            try:
                self.driver.wait(buffer)  # raises a failed buffer's error
                seconds = self.driver.gpu_seconds(buffer)
            finally:
                self._prefix_s.append(self._prefix_s[-1] + seconds)

    def mark(self) -> int:
        """A profiler boundary: flush and return the position reached."""
        self.flush()
        return self.position

    def gpu_ms(self, start: int, end: int) -> float:
        """Milliseconds of GPU time of the command buffers ``start .. end-1``."""
        self.wait(end)
        return (self._prefix_s[end] - self._prefix_s[start]) * 1e3
