"""A fake of the two PyObjC modules the Metal driver layer imports (``Metal`` and ``objc``).

It answers the selectors ``backends/metal/driver.py`` sends, with real bytes behind buffers
(``contents().as_buffer(n)`` is writable memory) and real blit copies, so transfers run end to
end; compute dispatches are recorded with their bound buffers, constants and sizes; libraries
"compile" by running the C preprocessor over the source (the dialect's kernels are macros) and
finding ``kernel void name(`` in what it expands to (``#error`` fails, with a log);
command buffers get GPU start/end times from a fake clock; autorelease pools are counted.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from types import SimpleNamespace

MTLResourceStorageModeShared = 0
MTLLanguageVersion3_0 = (3 << 16) + 0
MTLCommandBufferStatusCompleted = 4
MTLCommandBufferStatusError = 5


class FakeError:
    def __init__(self, text: str):
        self.text = text

    def localizedDescription(self) -> str:  # noqa: N802  (Objective-C selector)
        return self.text


class FakePointer:
    def __init__(self, memory: bytearray):
        self.memory = memory

    def as_buffer(self, nbytes: int) -> memoryview:
        return memoryview(self.memory)[:nbytes]


class FakeBuffer:
    def __init__(self, device, nbytes: int):
        self.device = device
        self.memory = bytearray(nbytes)

    def contents(self) -> FakePointer:
        return FakePointer(self.memory)

    def length(self) -> int:
        return len(self.memory)

    def __del__(self):
        self.device.allocated -= len(self.memory)


class FakeLibrary:
    def __init__(self, names: set[str], source: str = ""):
        self.names = names
        self.source = source

    def newFunctionWithName_(self, name):  # noqa: N802
        return SimpleNamespace(name=name, source=self.source) if name in self.names else None


class FakePipeline:
    def __init__(self, name: str, source: str = ""):
        self.name = name
        self.source = source

    def maxTotalThreadsPerThreadgroup(self) -> int:  # noqa: N802
        return 1024


class FakeComputeEncoder:
    def __init__(self, command_buffer):
        self.command_buffer = command_buffer
        self.state = {"buffers": {}, "bytes": {}, "shared": 0}
        self.ended = False

    def setComputePipelineState_(self, pipeline):  # noqa: N802
        self.state["pipeline"] = pipeline

    def setBuffer_offset_atIndex_(self, buffer, offset, slot):  # noqa: N802
        self.state["buffers"][slot] = (buffer, offset)

    def setBytes_length_atIndex_(self, data, length, slot):  # noqa: N802
        self.state["bytes"][slot] = bytes(data[:length])

    def setThreadgroupMemoryLength_atIndex_(self, length, slot):  # noqa: N802
        assert length % 16 == 0, "threadgroup memory lengths are multiples of 16"
        self.state["shared"] = length

    def dispatchThreadgroups_threadsPerThreadgroup_(self, groups, threads):  # noqa: N802
        assert not self.ended and not self.command_buffer.committed
        self.command_buffer.work.append(("dispatch", dict(self.state), groups, threads))
        self.state = {"buffers": dict(self.state["buffers"]), "bytes": {}, "shared": 0,
                      "pipeline": self.state.get("pipeline")}  # fmt: skip

    def endEncoding(self):  # noqa: N802
        assert not self.ended, "an encoder is ended once"
        self.ended = True


class FakeBlitEncoder:
    def __init__(self, command_buffer):
        self.command_buffer = command_buffer

    def copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(  # noqa: N802
        self, src, src_offset, dst, dst_offset, size
    ):
        self.command_buffer.work.append(("copy", src, src_offset, dst, dst_offset, size))

    def endEncoding(self):  # noqa: N802
        pass


class FakeCommandBuffer:
    def __init__(self, queue):
        self.queue = queue
        self.work: list[tuple] = []
        self.committed = False
        self.completed = False
        self.fail = None
        self.start = self.end = 0.0
        self._encoder = None

    def _check_no_open_encoder(self):
        assert self._encoder is None or self._encoder.ended, "the previous encoder is open"

    def computeCommandEncoder(self):  # noqa: N802
        self._check_no_open_encoder()
        self._encoder = FakeComputeEncoder(self)
        return self._encoder

    def blitCommandEncoder(self):  # noqa: N802
        self._check_no_open_encoder()
        self._encoder = None
        return FakeBlitEncoder(self)

    def commit(self):
        self._check_no_open_encoder()
        assert not self.committed, "a command buffer is committed once"
        self.committed = True
        self.queue.device.commits.append(self)

    def waitUntilCompleted(self):  # noqa: N802
        assert self.committed, "waiting on a buffer that was never committed hangs"
        if self.completed:
            return
        device = self.queue.device
        for item in self.work:  # the GPU runs the buffer: copies are real
            if item[0] == "copy":
                _, src, so, dst, do, size = item
                dst.memory[do : do + size] = src.memory[so : so + size]
            elif item[0] == "mps":
                item[1]()
            else:
                device.dispatched.append(item)
                if device.executor is not None:
                    _, state, groups, threads = item
                    device.executor(state, groups, threads)
        self.start = device.clock
        device.clock += 0.001 * max(1, len(self.work))  # 1 ms a command
        self.end = device.clock
        self.completed = True

    def status(self):
        return MTLCommandBufferStatusError if self.fail else MTLCommandBufferStatusCompleted

    def error(self):
        return FakeError(self.fail) if self.fail else None

    def GPUStartTime(self):  # noqa: N802
        return self.start

    def GPUEndTime(self):  # noqa: N802
        return self.end


class FakeQueue:
    def __init__(self, device):
        self.device = device

    def commandBuffer(self):  # noqa: N802
        buffer = FakeCommandBuffer(self)
        self.device.command_buffers.append(buffer)
        return buffer


class FakeDevice:
    def __init__(self, name: str, capacity: int = 1 << 30):
        self._name = name
        self.capacity = capacity
        self.allocated = 0
        self.commits: list[FakeCommandBuffer] = []
        self.command_buffers: list[FakeCommandBuffer] = []
        self.dispatched: list[tuple] = []
        self.compiled: list[str] = []
        self.clock = 100.0
        self.executor = None  # runs a dispatch: executor(state, groups, threads)
        self.mps_runs = 0

    def name(self):
        return self._name

    def hasUnifiedMemory(self):  # noqa: N802
        return True

    def recommendedMaxWorkingSetSize(self):  # noqa: N802
        return self.capacity

    def currentAllocatedSize(self):  # noqa: N802
        return self.allocated

    def newCommandQueue(self):  # noqa: N802
        return FakeQueue(self)

    def newBufferWithLength_options_(self, nbytes, options):  # noqa: N802
        assert options == MTLResourceStorageModeShared
        if self.allocated + nbytes > self.capacity:
            return None
        self.allocated += nbytes
        return FakeBuffer(self, nbytes)

    def newLibraryWithSource_options_error_(self, source, options, error):  # noqa: N802
        assert options.version == MTLLanguageVersion3_0 and error is None
        self.compiled.append(source)
        if "#error" in source:
            return None, FakeError("program_source:1:2: error: a deliberate error")
        return FakeLibrary(kernel_names(source), source), None

    def newComputePipelineStateWithFunction_error_(self, function, error):  # noqa: N802
        return FakePipeline(function.name, function.source), None


def kernel_names(source: str) -> set[str]:
    """The kernels a Metal source defines, after macro expansion (``metal_*`` headers left
    out: only Apple's compiler has them)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "the fake Metal compiler needs a C compiler's preprocessor"
    text = re.sub(r"^#include <metal_\w+>$", "", source, flags=re.MULTILINE)
    args = [gcc, "-E", "-P", "-x", "c++", "-"]
    expanded = subprocess.run(args, input=text, capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"kernel\s+void\s+(\w+)\s*\(", expanded))


class FakeCompileOptions:
    version = None

    @classmethod
    def alloc(cls):
        return cls()

    def init(self):
        return self

    def setLanguageVersion_(self, version):  # noqa: N802
        self.version = version


def fake_metal(devices: list[FakeDevice], default: bool = True) -> SimpleNamespace:
    """A ``Metal`` module over ``devices``; ``default=False`` is a headless runner's case
    (``MTLCreateSystemDefaultDevice()`` gives nil, ``MTLCopyAllDevices()`` lists them)."""
    return SimpleNamespace(
        MTLCreateSystemDefaultDevice=lambda: devices[0] if default and devices else None,
        MTLCopyAllDevices=lambda: list(devices),
        MTLResourceStorageModeShared=MTLResourceStorageModeShared,
        MTLLanguageVersion3_0=MTLLanguageVersion3_0,
        MTLCommandBufferStatusError=MTLCommandBufferStatusError,
        MTLCompileOptions=FakeCompileOptions,
        MTLSizeMake=lambda x, y, z: (x, y, z),
    )


class FakeObjc:
    """``objc``: only ``autorelease_pool()``, counting how many were entered and left."""

    def __init__(self):
        self.entered = 0
        self.depth = 0

    @contextlib.contextmanager
    def autorelease_pool(self):
        self.entered += 1
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


MPSDataTypeFloat32 = 0x10000020
MPSDataTypeFloat16 = 0x10000010


class FakeMatrixDescriptor:
    def __init__(self, rows, cols, matrices, row_bytes, matrix_bytes, data_type):
        self.rows, self.cols, self.matrices = rows, cols, matrices
        self.row_bytes, self.matrix_bytes, self.data_type = row_bytes, matrix_bytes, data_type

    @classmethod
    def matrixDescriptorWithRows_columns_matrices_rowBytes_matrixBytes_dataType_(  # noqa: N802
        cls, rows, cols, matrices, row_bytes, matrix_bytes, data_type
    ):
        return cls(rows, cols, matrices, row_bytes, matrix_bytes, data_type)


class FakeMatrix:
    @classmethod
    def alloc(cls):
        return cls()

    def initWithBuffer_offset_descriptor_(self, buffer, offset, descriptor):  # noqa: N802
        self.buffer, self.offset, self.descriptor = buffer, offset, descriptor
        return self

    def array(self, batch: int):
        """The matrices as a strided numpy view of the buffer's bytes."""
        import numpy as np

        d = self.descriptor
        dtype = np.dtype(np.float32 if d.data_type == MPSDataTypeFloat32 else np.float16)
        assert d.row_bytes % dtype.itemsize == 0 and d.matrix_bytes % dtype.itemsize == 0
        assert d.matrices >= batch and d.cols * dtype.itemsize <= d.row_bytes
        flat = np.frombuffer(self.buffer.memory, np.uint8)
        return np.lib.stride_tricks.as_strided(
            flat[self.offset :].view(dtype),
            (batch, d.rows, d.cols),
            (d.matrix_bytes, d.row_bytes, dtype.itemsize),
        )


class FakeMatrixMultiplication:
    """``MPSMatrixMultiplication``: C = op(A) op(B) · alpha + beta C, in f32, with numpy."""

    @classmethod
    def alloc(cls):
        return cls()

    def initWithDevice_transposeLeft_transposeRight_resultRows_resultColumns_interiorColumns_alpha_beta_(  # noqa: E501, N802
        self, device, ta, tb, m, n, k, alpha, beta
    ):
        self.device, self.ta, self.tb = device, ta, tb
        self.m, self.n, self.k, self.alpha, self.beta = m, n, k, alpha, beta
        self.batch = 1
        return self

    def setBatchSize_(self, batch):  # noqa: N802
        self.batch = batch

    def encodeToCommandBuffer_leftMatrix_rightMatrix_resultMatrix_(self, cb, a, b, c):  # noqa: N802
        assert not cb.committed

        def run():
            import numpy as np

            x, y = a.array(self.batch), b.array(self.batch)
            x = np.swapaxes(x, 1, 2) if self.ta else x
            y = np.swapaxes(y, 1, 2) if self.tb else y
            assert x.shape[1:] == (self.m, self.k) and y.shape[1:] == (self.k, self.n)
            out = c.array(self.batch)
            prod = self.alpha * np.matmul(x.astype(np.float32), y.astype(np.float32))
            if self.beta:
                prod += self.beta * out.astype(np.float32)
            writable = np.lib.stride_tricks.as_strided(
                np.frombuffer(c.buffer.memory, np.uint8)[c.offset :].view(out.dtype),
                out.shape,
                out.strides,
                writeable=True,
            )
            writable[...] = prod
            self.device.mps_runs += 1

        cb.work.append(("mps", run))


def fake_mps() -> SimpleNamespace:
    """A ``MetalPerformanceShaders`` module with the matrix product only."""
    return SimpleNamespace(
        MPSDataTypeFloat32=MPSDataTypeFloat32,
        MPSDataTypeFloat16=MPSDataTypeFloat16,
        MPSMatrixDescriptor=FakeMatrixDescriptor,
        MPSMatrix=FakeMatrix,
        MPSMatrixMultiplication=FakeMatrixMultiplication,
    )
