"""``QTensor``: a tensor stored in one of ggml's block types (host memory).

The bytes are ggml's exact layout, so a QTensor can come straight from a memory-mapped GGUF
file without a copy. Shapes are in workbench (numpy / PyTorch) order: the last dimension is
ggml's ``ne[0]``, the contiguous one that blocks run along, so it must be a multiple of the
block size. A ``(rows, cols)`` QTensor stores each row as ``cols / block_size`` blocks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtype as dt
from ..backends.cpu import ggml
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .dtype import GgmlDType


def format_bytes(n: int) -> str:
    """``9437184`` -> ``"9.0 MiB"`` (binary units, one decimal)."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError  # pragma: no cover


def _as_float_array(x: Any) -> np.ndarray:
    if isinstance(x, Tensor):
        if not x.dtype.is_floating_point:
            raise DTypeError(f"QTensor.quantize: expected a floating tensor, found {x.dtype}")
        x = x.to_dtype(dt.f32).numpy()
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu" and arr.dtype.name != "bfloat16":
        raise DTypeError(f"QTensor.quantize: expected float data, found numpy {arr.dtype}")
    return np.asarray(arr, dtype=np.float32, order="C")


class QTensor:
    """Quantized tensor: raw ggml blocks plus a shape and a :class:`GgmlDType`.

    ``QTensor.quantize(x, "Q4_K")`` builds one from float data; ``.dequantize()`` returns a
    float ``Tensor``. ``repr`` shows type, bits per weight and size:
    ``QTensor[4096, 4096] Q4_K 4.50 bpw 9.0 MiB``.
    """

    __slots__ = ("_data", "_shape", "_ggml_dtype")

    def __init__(self, data: np.ndarray, shape: tuple[int, ...], ggml_dtype: GgmlDType | str):
        """Wrap raw bytes (any shape; viewed as uint8, not copied) as a QTensor of ``shape``."""
        gd = GgmlDType.from_name(ggml_dtype)
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ShapeError(f"QTensor: negative dimension in shape {shape}")
        cols = shape[-1] if shape else 1
        if cols % gd.block_size:
            raise ShapeError(
                f"QTensor: last dimension {cols} of shape {list(shape)} is not a multiple of "
                f"{gd.name}'s block size {gd.block_size}"
            )
        raw = np.asarray(data)
        if not raw.flags.c_contiguous:
            raise ShapeError("QTensor: raw data must be C-contiguous")
        raw = raw.view(np.uint8).reshape(-1)
        rows = math.prod(shape[:-1]) if shape else 1
        expected = rows * gd.row_bytes(cols)
        if raw.size != expected:
            raise ShapeError(
                f"QTensor: {gd.name} {list(shape)} needs {expected} bytes, found {raw.size}"
            )
        self._data = raw.reshape(rows, gd.row_bytes(cols)) if rows else raw.reshape(0, 0)
        self._shape = shape
        self._ggml_dtype = gd

    # -- construction ------------------------------------------------------------------
    @classmethod
    def quantize(cls, x: Tensor | np.ndarray | Any, ggml_dtype: GgmlDType | str) -> QTensor:
        """Quantize float data (a Tensor, an array or nested lists) to ``ggml_dtype``.

        K-quants and IQ4 search each sub-block's scale as llama.cpp does; see
        ``workbench.backends.cpu.ggml`` for the layouts and searches.
        """
        gd = GgmlDType.from_name(ggml_dtype)
        arr = _as_float_array(x)
        if arr.ndim == 0:
            raise ShapeError("QTensor.quantize: expected at least one dimension, found a scalar")
        if arr.shape[-1] % gd.block_size:
            raise ShapeError(
                f"QTensor.quantize: last dimension {arr.shape[-1]} of shape {list(arr.shape)} "
                f"is not a multiple of {gd.name}'s block size {gd.block_size}"
            )
        return cls(ggml.quantize(arr, gd.name), arr.shape, gd)

    # -- metadata ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def numel(self) -> int:
        return math.prod(self._shape)

    @property
    def ggml_dtype(self) -> GgmlDType:
        return self._ggml_dtype

    @property
    def nbytes(self) -> int:
        """Bytes of quantized data."""
        return self._data.size

    @property
    def bits_per_weight(self) -> float:
        return self._ggml_dtype.bits_per_weight

    @property
    def data(self) -> np.ndarray:
        """The raw blocks, ``(rows, row_bytes)`` uint8 (a view, possibly of a mapped file)."""
        return self._data

    # -- decoding ----------------------------------------------------------------------
    def dequantize_numpy(self, out: np.ndarray | None = None) -> np.ndarray:
        """All values as a float32 numpy array of ``self.shape``."""
        flat = None if out is None else out.reshape(-1)
        return ggml.dequantize(self._data, self._ggml_dtype.name, out=flat).reshape(self._shape)

    def dequantize_rows(self, start: int, stop: int, out: np.ndarray | None = None) -> np.ndarray:
        """Rows ``[start, stop)`` of the 2-D view ``(rows, shape[-1])`` as float32 ``(n, cols)``.

        ``out`` (C-contiguous float32 with room for the rows) is filled and returned, so a
        caller can decode a big matrix tile by tile into one reused buffer.
        """
        cols = self._shape[-1] if self._shape else 1
        n = stop - start
        flat = None if out is None else out.reshape(-1)[: n * cols]
        vals = ggml.dequantize(self._data[start:stop], self._ggml_dtype.name, out=flat)
        return vals.reshape(n, cols)

    def dequantize(self, dtype: dt.DType | str = dt.f32) -> Tensor:
        """The values as a new CPU ``Tensor`` of ``dtype`` (f32, f16 or bf16)."""
        from ..ops.creation import from_numpy

        target = dt.dtype(dtype)
        if not target.is_floating_point:
            raise DTypeError(f"QTensor.dequantize: expected a float dtype, found {target}")
        values = self.dequantize_numpy()
        if target is not dt.f32:
            values = values.astype(target.numpy)
        return from_numpy(values)

    # -- display -----------------------------------------------------------------------
    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self._shape)
        gd = self._ggml_dtype
        return f"QTensor[{dims}] {gd.name} {gd.bits_per_weight:.2f} bpw {format_bytes(self.nbytes)}"
