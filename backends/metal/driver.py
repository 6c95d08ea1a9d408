"""The thin layer over PyObjC's ``Metal`` framework that the rest of the Metal backend uses.

Nothing else in ``backends/metal`` imports ``Metal`` or ``objc``: tests install a fake of those
two modules (``tests/metal/fake_metal.py``) and run this very code without a Mac. The modules
are imported on first use only.

Devices: ``MTLCreateSystemDefaultDevice()`` first, then ``MTLCopyAllDevices()`` (a headless
process on a hosted runner may get no default device but still list one). Buffers live in
shared storage: on unified memory the CPU reads and writes the same bytes the GPU does, so a
host copy is a ``memcpy`` through ``contents()``, valid once the GPU work touching the buffer
has completed (the command stream's ``wait``). Every call that makes Objective-C objects runs
inside an autorelease pool, so temporaries (command buffers, encoders, errors) are freed at
once rather than when the thread ends.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..gpu.driver_holder import DriverHolder
from ..gpu.pool import OutOfMemoryError


class MetalCompileError(RuntimeError):
    """``newLibraryWithSource`` refused a kernel source: the compiler's log is the message."""


class MetalBuffer:
    """A shared-storage ``MTLBuffer``; ``int(buffer)`` is a stable identity for the pool."""

    __slots__ = ("buffer", "nbytes", "index", "__weakref__")

    def __init__(self, buffer, nbytes: int, index: int):
        self.buffer = buffer
        self.nbytes = nbytes
        self.index = index

    def __int__(self) -> int:
        return id(self)


class MetalDriver:
    """Devices, shared buffers, libraries, pipelines and command buffers through PyObjC."""

    def __init__(self, metal=None, objc=None, mps=None) -> None:
        if metal is None:
            import Metal as metal  # noqa: N813  (PyObjC's framework module)
        if objc is None:
            import objc
        if mps is None:
            try:
                import MetalPerformanceShaders as mps  # noqa: N813
            except ImportError:
                mps = False
        self.metal = metal
        self.objc = objc
        self.mps = mps or None
        self.devices = self._discover()
        self._queues: dict[int, Any] = {}

    def _discover(self) -> list:
        default = self.metal.MTLCreateSystemDefaultDevice()
        if default is not None:
            others = [d for d in (self.metal.MTLCopyAllDevices() or []) if d != default]
            return [default, *others]
        return list(self.metal.MTLCopyAllDevices() or [])

    def pool(self):
        """An autorelease pool for one unit of Objective-C work (a context manager)."""
        return self.objc.autorelease_pool()

    # -- devices ------------------------------------------------------------------------
    def device_count(self) -> int:
        return len(self.devices)

    def device(self, index: int):
        if not 0 <= index < len(self.devices):
            raise IndexError(
                f"metal:{index} does not exist: this Mac has {len(self.devices)} Metal device(s)"
            )
        return self.devices[index]

    def device_name(self, index: int) -> str:
        return str(self.device(index).name())

    def has_unified_memory(self, index: int) -> bool:
        return bool(self.device(index).hasUnifiedMemory())

    def mem_get_info(self, index: int) -> tuple[int, int]:
        """``(free, total)`` bytes: the recommended working set less what is allocated."""
        device = self.device(index)
        total = int(device.recommendedMaxWorkingSetSize())
        return max(0, total - int(device.currentAllocatedSize())), total

    def queue(self, index: int):
        """The device's one command queue (work is ordered on it)."""
        queue = self._queues.get(index)
        if queue is None:
            queue = self._queues[index] = self.device(index).newCommandQueue()
        return queue

    # -- memory -------------------------------------------------------------------------
    def mem_alloc(self, index: int, nbytes: int) -> MetalBuffer:
        """A shared-storage buffer of ``nbytes``; raises ``OutOfMemoryError`` when refused."""
        options = self.metal.MTLResourceStorageModeShared
        with self.pool():
            buffer = self.device(index).newBufferWithLength_options_(nbytes, options)
        if buffer is None:
            free, total = self.mem_get_info(index)
            raise OutOfMemoryError(
                f"newBufferWithLength({nbytes}) failed ({free} of {total} bytes free)"
            )
        return MetalBuffer(buffer, nbytes, index)

    def mem_free(self, handle: MetalBuffer) -> None:
        handle.buffer = None  # the last reference: PyObjC releases the MTLBuffer

    def contents(self, handle: MetalBuffer) -> memoryview:
        """The buffer's bytes as the CPU sees them (read or write only between GPU work)."""
        return handle.buffer.contents().as_buffer(handle.nbytes)

    # -- kernels ------------------------------------------------------------------------
    def compile_library(self, index: int, source: str, label: str):
        """A library from Metal source (MSL 3.0); ``MetalCompileError`` with the log."""
        with self.pool():
            options = self.metal.MTLCompileOptions.alloc().init()
            options.setLanguageVersion_(self.metal.MTLLanguageVersion3_0)
            library, error = self.device(index).newLibraryWithSource_options_error_(
                source, options, None
            )
            if library is None:
                raise MetalCompileError(f"{label}.metal does not compile: {_describe(error)}")
            return library

    def pipeline(self, index: int, library, name: str):
        """The compute pipeline of kernel ``name``; its thread limits are in the result."""
        with self.pool():
            function = library.newFunctionWithName_(name)
            if function is None:
                raise MetalCompileError(f"no kernel named {name!r} in the library")
            state, error = self.device(index).newComputePipelineStateWithFunction_error_(
                function, None
            )
            if state is None:
                raise MetalCompileError(f"kernel {name!r}: {_describe(error)}")
            return state

    def max_threads(self, pipeline) -> int:
        return int(pipeline.maxTotalThreadsPerThreadgroup())

    # -- MPS matrix products -------------------------------------------------------------
    def has_mps(self) -> bool:
        """PyObjC's ``MetalPerformanceShaders`` imported (its own pyobjc framework package)."""
        return self.mps is not None

    def encode_mps_gemm(self, command_buffer, index: int, dtype: str, a, b, c, m: int, n: int,
                        k: int, batch: int, beta: float) -> None:  # fmt: skip
        """Encode row-major ``C (m, n) = op(A) op(B) + beta C`` for ``batch`` matrices with
        ``MPSMatrixMultiplication``. ``a``, ``b``, ``c`` are ``(MetalBuffer, byte offset,
        transposed, row bytes, matrix bytes)``; a transposed operand is described as the
        matrix it stores (``(k, m)`` for A) and flagged ``transposeLeft``/``Right``."""
        mps = self.mps
        data_type = {"f32": mps.MPSDataTypeFloat32, "f16": mps.MPSDataTypeFloat16}[dtype]

        def matrix(operand, rows: int, cols: int):
            handle, offset, transposed, row_bytes, matrix_bytes = operand
            if transposed:
                rows, cols = cols, rows
            matrix_bytes = matrix_bytes or rows * row_bytes
            desc = mps.MPSMatrixDescriptor.matrixDescriptorWithRows_columns_matrices_rowBytes_matrixBytes_dataType_(  # noqa: E501
                rows, cols, batch, row_bytes, matrix_bytes, data_type
            )
            return mps.MPSMatrix.alloc().initWithBuffer_offset_descriptor_(
                handle.buffer, offset, desc
            )

        kernel = mps.MPSMatrixMultiplication.alloc()
        kernel = kernel.initWithDevice_transposeLeft_transposeRight_resultRows_resultColumns_interiorColumns_alpha_beta_(  # noqa: E501
            self.device(index), bool(a[2]), bool(b[2]), m, n, k, 1.0, float(beta)
        )
        kernel.setBatchSize_(batch)
        kernel.encodeToCommandBuffer_leftMatrix_rightMatrix_resultMatrix_(
            command_buffer, matrix(a, m, k), matrix(b, k, n), matrix(c, m, n)
        )

    # -- command buffers ----------------------------------------------------------------
    def command_buffer(self, index: int):
        return self.queue(index).commandBuffer()

    def compute_encoder(self, command_buffer):
        return command_buffer.computeCommandEncoder()

    def encode_dispatch(self, encoder, pipeline, buffers, values, groups, threads, shared):
        """One dispatch: ``buffers`` are ``(slot, MetalBuffer, byte offset)``, ``values``
        ``(slot, bytes)`` (small constants), ``groups``/``threads`` 3-tuples, ``shared`` the
        threadgroup memory bytes (slot 0)."""
        encoder.setComputePipelineState_(pipeline)
        for slot, handle, offset in buffers:
            encoder.setBuffer_offset_atIndex_(handle.buffer, offset, slot)
        for slot, data in values:
            encoder.setBytes_length_atIndex_(data, len(data), slot)
        if shared:
            encoder.setThreadgroupMemoryLength_atIndex_(-(-shared // 16) * 16, 0)
        size = self.metal.MTLSizeMake
        encoder.dispatchThreadgroups_threadsPerThreadgroup_(size(*groups), size(*threads))

    def encode_copy(self, command_buffer, src: MetalBuffer, src_offset: int,
                    dst: MetalBuffer, dst_offset: int, nbytes: int) -> None:  # fmt: skip
        blit = command_buffer.blitCommandEncoder()
        blit.copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(
            src.buffer, src_offset, dst.buffer, dst_offset, nbytes
        )
        blit.endEncoding()

    def end_encoding(self, encoder) -> None:
        encoder.endEncoding()

    def commit(self, command_buffer) -> None:
        command_buffer.commit()

    def wait(self, command_buffer) -> None:
        """Block until ``command_buffer`` completes; its error (if any) is raised."""
        command_buffer.waitUntilCompleted()
        if command_buffer.status() == self.metal.MTLCommandBufferStatusError:
            raise RuntimeError(
                f"a Metal command buffer failed: {_describe(command_buffer.error())}"
            )

    def gpu_seconds(self, command_buffer) -> float:
        """The GPU time a completed command buffer took (``GPUEndTime - GPUStartTime``)."""
        return float(command_buffer.GPUEndTime()) - float(command_buffer.GPUStartTime())

    # -- events for ``gpu.timer.DeviceTimer`` (markers between command buffers) ------------
    def event(self, index: int) -> dict:
        return {"index": index}

    def record(self, event: dict, stream) -> None:
        event["stream"], event["position"] = stream, stream.mark()

    def elapsed_ms(self, start: dict, end: dict) -> float:
        return end["stream"].gpu_ms(start["position"], end["position"])


def _describe(error) -> str:
    if error is None:
        return "no error was reported"
    with contextlib.suppress(AttributeError):
        return str(error.localizedDescription())
    return str(error)


def _why_unusable(err: Exception) -> str | None:
    if isinstance(err, ImportError):
        return (
            f"PyObjC's Metal framework cannot be imported ({err}); "
            "install workbench[metal] on macOS"
        )
    return None


HOLDER = DriverHolder(MetalDriver, _why_unusable)
get_driver = HOLDER.get
set_driver = HOLDER.set
