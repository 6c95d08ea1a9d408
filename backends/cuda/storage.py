"""``CudaStorage``: one block of device memory from the caching pool; the ops are the GPU
base's (``gpu/storage.py``), run as CUDA kernels.

The hooks: a kernel argument is the block's address (``Ptr``), a launch packs the arguments
into one buffer (``gpu/params.py``) for the kernel of ``kernels/cuda`` (the prebuilt fatbin,
or compiled at first use, see ``compile.py``) on the device's stream, host transfers go
through a pinned staging buffer, and GEMMs through cuBLAS (column-major: the row-major
``C = A B`` is computed as ``Cᵀ = Bᵀ Aᵀ``, operands swapped).
"""

from __future__ import annotations

from ..dtypes import ITEMSIZE
from ..gpu import plan
from ..gpu.gemm import GemmOperand
from ..gpu.params import Ptr, pack_args
from ..gpu.storage import GpuStorage
from . import kernels as _kernels
from .runtime import runtime


class CudaStorage(GpuStorage):
    """``size`` elements of ``dtype`` (a name) on device ``index``; ``ptr`` is the address."""

    device_kind = "cuda"
    K = _kernels.NAMES
    __slots__ = ("block", "ptr", "dtype", "size", "index", "version")

    def __init__(self, block, dtype: str, size: int, index: int):
        self.block = block
        self.ptr = block.ptr if block is not None else 0
        self.dtype = dtype
        self.size = size
        self.index = index
        self.version = 0

    @classmethod
    def alloc(cls, size: int, dtype: str, index: int) -> CudaStorage:
        nbytes = size * ITEMSIZE[dtype]
        block = runtime().pool(index).allocate(nbytes) if nbytes else None
        return cls(block, dtype, size, index)

    def _at(self, offset: int = 0) -> Ptr:
        return Ptr(self.ptr + offset * ITEMSIZE[self.dtype])

    def _null(self) -> Ptr:
        return Ptr(0)

    def _launch(self, source: str, name: str, n: int, *args, grid=None, block=None,
                shared: int = 0) -> None:  # fmt: skip
        """Launch ``name`` from ``kernels/cuda/<source>.cu`` over ``n`` items (grid-stride)."""
        if n == 0:
            return
        rt = runtime()
        function = rt.function(self.index, source, name)
        rt.driver.launch(
            self.index,
            function,
            grid or (plan.blocks(n), 1, 1),
            block or (plan.THREADS, 1, 1),
            pack_args(*args),
            shared,
            rt.stream(self.index),
        )

    def _upload(self, data) -> None:
        runtime().upload(self.index, self.ptr, data)

    def _download(self, out, offset: int) -> None:
        runtime().download(self.index, out, self._at(offset))

    def _gemm(self, c: GemmOperand, a: GemmOperand, b: GemmOperand, m: int, n: int, k: int,
              batch: int, beta: float = 0.0) -> None:  # fmt: skip
        """Row-major ``C (m, n) = op(A) op(B) + beta C`` as cuBLAS's column-major
        ``Cᵀ (n x m) = op(B)ᵀ (n x k) op(A)ᵀ (k x m)``: B first."""
        runtime().gemm(self.index, self.dtype, b.transposed, a.transposed, n, m, k,
                       b.storage._at(b.offset), b.ld, b.batch_stride,
                       a.storage._at(a.offset), a.ld, a.batch_stride,
                       c.storage._at(c.offset), c.ld, c.batch_stride, batch,
                       beta=beta)  # fmt: skip

    def data_ptr(self) -> int:
        return self.ptr
