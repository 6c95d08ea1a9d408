"""``MetalStorage``: one shared-storage ``MTLBuffer`` from the caching pool; the ops are the
GPU base's (``gpu/storage.py``), run as the Metal kernels generated from ``kernels/gpu``.

The hooks:

- a kernel argument for a buffer is ``BufferArg(handle, byte offset)``, bound with
  ``setBuffer:offset:atIndex:``; every other argument is a constant bound with ``setBytes``
  at its slot (the slot is the parameter's position: ``WB_OUT``/``WB_IN``/``WB_ARG``'s slot
  numbers count the parameters in order). Python floats go as f32 (Metal has no double:
  ``wb_wide`` is float there), ints as 64-bit, layouts as the 144-byte ``Layout`` struct;
- a launch is one dispatch on the device's ``CommandStream`` (batched into command buffers,
  see ``stream.py``), ``grid`` threadgroups of ``block`` threads (CUDA's grid and block);
- host transfers go through the buffer's ``contents()`` (unified memory): a read waits for the
  stream first (the sync rule), ``host_view`` gives a zero-copy numpy view under that rule;
- GEMMs (f32, f16) go through MPS's ``MPSMatrixMultiplication`` when PyObjC's
  ``MetalPerformanceShaders`` is there, else (and for bf16) through the dialect's tiled
  ``gemm_<dtype>`` kernel (``kernels/gpu/matmul.h``).

f64 has no kernels on Metal: an f64 tensor raises ``UnsupportedOnDevice`` naming metal and f64.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

from ..dtypes import ITEMSIZE, NUMPY_BY_NAME
from ..gpu import plan
from ..gpu.gemm import GemmOperand
from ..gpu.kernels import KernelNames
from ..gpu.params import F32, Dims, Raw, geometry, pack_args
from ..gpu.storage import GpuStorage
from ..layout import numel
from .runtime import runtime

NAMES = KernelNames("metal", has_f64=False)
GEMM_TILE = 16
# families whose kernels loop by the threadgroup's size (any multiple of 32 computes the same)
BLOCK_STRIDED = ("elementwise", "reduce", "fused", "norm", "indexing", "conv", "pool",
                 "upsample", "pad")  # fmt: skip


class BufferArg:
    """A buffer bound at a byte offset (``setBuffer:offset:atIndex:``)."""

    __slots__ = ("handle", "offset")

    def __init__(self, handle, offset: int):
        self.handle = handle
        self.offset = offset


def constant_bytes(arg) -> bytes:
    """The bytes of one non-buffer kernel argument as Metal reads it from its slot."""
    if isinstance(arg, float) and not isinstance(arg, F32):
        return struct.pack("<f", arg)  # wb_wide is float on Metal
    if isinstance(arg, Raw | Dims) or hasattr(arg, "strides"):
        return pack_args(arg)
    if isinstance(arg, bool):
        return struct.pack("<i", int(arg))
    return pack_args(arg)


class MetalStorage(GpuStorage):
    """``size`` elements of ``dtype`` on Metal device ``index``; ``handle`` is the buffer."""

    device_kind = "metal"
    K = NAMES
    __slots__ = ("block", "handle", "dtype", "size", "index", "version")

    def __init__(self, block, dtype: str, size: int, index: int):
        self.block = block
        self.handle = block.handle if block is not None else None
        self.dtype = dtype
        self.size = size
        self.index = index
        self.version = 0

    @classmethod
    def alloc(cls, size: int, dtype: str, index: int) -> MetalStorage:
        cls._check_dtype(dtype)
        nbytes = size * ITEMSIZE[dtype]
        block = runtime().pool(index).allocate(nbytes) if nbytes else None
        return cls(block, dtype, size, index)

    def _at(self, offset: int = 0) -> BufferArg:
        if self.handle is None:
            return self._null()
        return BufferArg(self.handle, offset * ITEMSIZE[self.dtype])

    def _null(self) -> BufferArg:
        return BufferArg(runtime().placeholder(self.index), 0)

    def _launch(self, source: str, name: str, n: int, *args, grid=None, block=None,
                shared: int = 0) -> None:  # fmt: skip
        """Dispatch ``name`` of ``kernels/metal/<source>.metal`` over ``n`` items."""
        if n == 0:
            return
        rt = runtime()
        pipeline = rt.pipeline(self.index, source, name)
        threads = tuple(block or (plan.THREADS, 1, 1))
        limit = rt.driver.max_threads(pipeline)
        if threads[0] > limit and source in BLOCK_STRIDED:
            # Metal may allow fewer threads than the kernel's bound (register pressure): these
            # kernels stride by WB_THREADS, so fewer threads (a multiple of 32) do the same work
            threads = (max(32, limit // 32 * 32), *threads[1:])
        if threads[0] * threads[1] * threads[2] > limit:
            raise ValueError(
                f"kernel {name} takes at most {limit} threads per threadgroup on metal:"
                f"{self.index}, asked for {threads}"
            )
        buffers, values = [], []
        for slot, arg in enumerate(args):
            if isinstance(arg, BufferArg):
                buffers.append((slot, arg.handle, arg.offset))
            else:
                values.append((slot, constant_bytes(arg)))
        groups = tuple(grid or (plan.blocks(n), 1, 1))
        rt.stream(self.index).dispatch(pipeline, buffers, values, groups, threads, shared)

    def _upload(self, data) -> None:
        runtime().upload(self.handle, 0, data)

    def _download(self, out, offset: int) -> None:
        runtime().download(self.handle, offset * ITEMSIZE[self.dtype], out)

    def host_view(self, layout) -> np.ndarray:
        """A zero-copy, read-only numpy view of ``self[layout]`` in the shared buffer.

        The sync rule: this waits for all queued work on the device first, and the view stays
        valid while no later op writes this storage (it keeps the storage alive)."""
        runtime().synchronize(self.index)
        dtype = np.dtype(NUMPY_BY_NAME[self.dtype])
        shape = tuple(layout.shape)
        if self.handle is None or numel(shape) == 0:
            return np.empty(shape, dtype)
        return _view(self, layout, dtype)

    def _gemm(self, c: GemmOperand, a: GemmOperand, b: GemmOperand, m: int, n: int, k: int,
              batch: int, beta: float = 0.0) -> None:  # fmt: skip
        """Row-major ``C (m, n) = op(A) op(B) + beta C``, ``batch`` times."""
        rt = runtime()
        size = ITEMSIZE[self.dtype]
        aligned = all((op.offset * size) % 4 == 0 and (op.ld * size) % 4 == 0 for op in (a, b, c))
        if (
            self.dtype in ("f32", "f16")
            and rt.driver.has_mps()
            and aligned  # MPS wants 4-byte aligned rows; odd f16 strides take the kernel
            and (batch == 1 or (a.batch_stride and b.batch_stride))
        ):
            operands = [
                (op.storage.handle, op.offset * size, op.transposed, op.ld * size,
                 op.batch_stride * size) for op in (a, b, c)
            ]  # fmt: skip
            rt.stream(self.index).encode(
                lambda cb: rt.driver.encode_mps_gemm(
                    cb, self.index, self.dtype, *operands, m, n, k, batch, beta
                )
            )
            return
        tiles_m, tiles_n = -(-m // GEMM_TILE), -(-n // GEMM_TILE)
        geom = geometry(m, n, k, a.ld, b.ld, c.ld, a.batch_stride, b.batch_stride,
                        c.batch_stride, int(a.transposed), int(b.transposed), tiles_m, tiles_n,
                        batch)  # fmt: skip
        self._launch("matmul", f"gemm_{self.dtype}", m * n * batch,
                     c.storage._at(c.offset), a.storage._at(a.offset),
                     b.storage._at(b.offset), geom, F32(beta),
                     grid=(min(tiles_m * tiles_n * batch, plan.MAX_BLOCKS), 1, 1),
                     block=(GEMM_TILE * GEMM_TILE, 1, 1))  # fmt: skip

    def data_ptr(self) -> int:
        return int(self.handle) if self.handle is not None else 0


class _HostView:
    """``__array_interface__`` over a storage's shared bytes; holds the storage alive."""

    def __init__(self, storage: MetalStorage):
        memory = runtime().driver.contents(storage.handle)
        self._cells = (ctypes.c_char * len(memory)).from_buffer(memory)
        self._storage = storage
        self.__array_interface__ = {
            "version": 3,
            "shape": (len(memory),),
            "typestr": "|u1",
            "data": (ctypes.addressof(self._cells), False),
        }


def _view(storage: MetalStorage, layout, dtype: np.dtype) -> np.ndarray:
    """``storage[layout]`` as a read-only numpy view (its base chain holds the storage)."""
    flat = np.asarray(_HostView(storage))[: storage.nbytes].view(dtype)
    size = dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        flat[layout.offset :],
        shape=tuple(layout.shape),
        strides=tuple(s * size for s in layout.strides),
        writeable=False,
    )
    return view
