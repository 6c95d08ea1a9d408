"""``CpuStorage``: one numpy buffer; op families come from the mixins beside this module."""

from __future__ import annotations

import math

import numpy as np

from ..base import BackendStorage
from ..errors import OutOfMemory
from ._arrays import NUMPY_BY_NAME, view
from .batchnorm import BatchNormOps
from .conv import ConvOps
from .elementwise import ElementwiseOps
from .fused import FusedOps
from .indexing import IndexingOps
from .matmul import MatmulOps
from .memory import StorageBase, active_bytes
from .native import NATIVE
from .optim import OptimOps
from .pool import PoolOps
from .quantized import QuantizedOps
from .reduce import ReduceOps
from .relu_grad import ReluGradOps

# kernels/cpu/core/cast.c (None on the numpy path, or in an extension built before it existed)
_NATIVE_CAST = getattr(NATIVE, "cast", None)
# Elements from which ``copy_strided`` and ``contiguous`` take the native copy rather than
# numpy's: below, both take about the same time (f32, 2 threads: 1.5 µs for 16k contiguous);
# from 64k the threads pay.
_NATIVE_COPY_MIN = 1 << 16


def _allocation_error(shape: tuple[int, ...], dtype: str, err: Exception) -> Exception:
    """numpy's MemoryError (and its ValueError for sizes past the address space) as
    ``OutOfMemory`` with the size asked for, as CUDA's pool reports it; other errors as is."""
    if isinstance(err, ValueError) and not any(
        m in str(err) for m in ("too big", "Maximum allowed dimension")
    ):
        return err
    nbytes = math.prod(shape) * NUMPY_BY_NAME[dtype].itemsize
    return OutOfMemory(
        f"cpu is out of memory allocating {nbytes} bytes ({nbytes / 2**30:.1f} GiB) for shape "
        f"{shape} {dtype} ({active_bytes()} bytes in use by workbench)"
    )


def _native_copy(a: np.ndarray, layout, dtype) -> np.ndarray:
    """``a``'s elements at ``layout`` as a new C-contiguous array of ``dtype``, by the native
    cast (strided input read in place, threaded)."""
    out = np.empty(layout.shape, dtype)
    _NATIVE_CAST(a, layout.offset, layout.shape, layout.strides, out)
    return out


class CpuStorage(
    ElementwiseOps,
    ReduceOps,
    MatmulOps,
    ConvOps,
    PoolOps,
    IndexingOps,
    FusedOps,
    BatchNormOps,
    ReluGradOps,
    OptimOps,
    QuantizedOps,
    BackendStorage,
    StorageBase,
):
    """A C-contiguous numpy array holding a tensor's elements (any shape; views use layouts).

    ``CpuStorage(array, owned=True)``: an owned array counts in ``memory_stats``. ``version``
    counts in-place writes; autograd uses it to refuse gradients computed from values that were
    overwritten after they were saved.
    """

    device_kind = "cpu"
    __slots__ = ()  # array, version and _owned_bytes are StorageBase's

    # -- allocation and host transfers -------------------------------------------------
    @classmethod
    def from_numpy(cls, array: np.ndarray, index: int = 0, copy: bool = False) -> CpuStorage:
        """Adopt ``array`` without a copy when it is C-contiguous (and ``copy`` is False)."""
        if copy or not array.flags.c_contiguous:
            return cls(np.array(array, order="C", copy=True))
        return cls(array, owned=False)

    @classmethod
    def full(cls, shape: tuple[int, ...], value, dtype: str, index: int = 0) -> CpuStorage:
        try:
            array = np.full(shape, value, dtype=NUMPY_BY_NAME[dtype])
        except (MemoryError, ValueError) as err:
            raise _allocation_error(shape, dtype, err) from None
        return cls(array)

    @classmethod
    def empty(cls, shape: tuple[int, ...], dtype: str, index: int = 0) -> CpuStorage:
        try:
            array = np.empty(shape, dtype=NUMPY_BY_NAME[dtype])
        except (MemoryError, ValueError) as err:
            raise _allocation_error(shape, dtype, err) from None
        return cls(array)

    def to_numpy(self, layout) -> np.ndarray:
        """The elements as a numpy array sharing this storage's memory."""
        return view(self.array, layout)

    @property
    def nbytes(self) -> int:
        return self.array.nbytes

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    # -- copies ------------------------------------------------------------------------
    def cast(self, layout, dtype: str) -> CpuStorage:
        """A contiguous copy in ``dtype``, rounded as numpy's ``astype`` (native where built:
        strided input read in place, one pass)."""
        out = NUMPY_BY_NAME[dtype]
        a = self.array
        if _NATIVE_CAST is not None and type(a) is np.ndarray:
            return CpuStorage(_native_copy(a, layout, out))
        src = view(a, layout)
        if out.kind in "iu" and src.dtype.char == "E":
            # ml_dtypes casts bf16 out of an integer's range to 0; through f32 (exact) it
            # truncates and wraps as numpy's and torch's float casts do (300.0 -> i8 is 44)
            src = src.astype(np.float32)
        return CpuStorage(src.astype(out, order="C"))

    def copy_strided(self, src_layout, dst: CpuStorage, dst_layout) -> None:
        """``dst[dst_layout] = self[src_layout]`` (shapes equal or broadcastable). Into a
        contiguous region of another buffer, in one dtype (``cat`` of a batch of one,
        ``x[a:b] = y``), the native cast copies on the kernels' threads: half the time of
        numpy's copy for YOLOv8's concatenations (0.21 vs 0.41 ms at 3 × 16×160², 2 threads)."""
        src, out = self.array, view(dst.array, dst_layout)
        if (
            _NATIVE_CAST is not None
            and out.size >= _NATIVE_COPY_MIN
            and type(src) is np.ndarray
            and src.dtype is out.dtype
            and tuple(src_layout.shape) == out.shape
            and out.flags.c_contiguous
            and not np.may_share_memory(src, out)
        ):
            _NATIVE_CAST(src, src_layout.offset, src_layout.shape, src_layout.strides, out)
            return
        out[...] = view(src, src_layout)

    def const_set(self, layout, value) -> None:
        view(self.array, layout)[...] = value

    def contiguous(self, layout) -> CpuStorage:
        """A C-contiguous copy; from 64k elements by the native cast on the kernels' threads
        (permuted copies of 64k-4M f32 in 0.45-0.6 of numpy's time, 2 threads)."""
        a = self.array
        if _NATIVE_CAST is not None and type(a) is np.ndarray and layout.numel >= _NATIVE_COPY_MIN:
            return CpuStorage(_native_copy(a, layout, a.dtype))
        return CpuStorage(view(a, layout).copy(order="C"))
