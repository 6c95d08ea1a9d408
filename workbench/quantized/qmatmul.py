"""``QMatMul``: ``y = x @ W.T`` with a quantized weight ``W`` of shape ``(N, K)``.

The whole f32 weight is never materialised: ``W`` is decoded ``tile_rows`` rows at a time
into one reused f32 buffer (sized to stay in cache) and each tile goes through BLAS::

    y[:, r0:r1] = x @ dequantize(W[r0:r1]).T

Measured here against the other classic approach, quantizing ``x`` to Q8 and taking
integer dot products per block (what ggml does in C), the tiled decode won clearly in numpy:
numpy has no int8 GEMM, so the integer path pays a full decode-like pass plus an unblocked
reduction (see ``benchmarks/bench_quantized.py`` for both numbers).

Inference only: the result carries no autograd history.
"""

from __future__ import annotations

import numpy as np

from .. import dtype as dt
from ..errors import ShapeError
from ..tensor import Tensor
from .qtensor import QTensor

# Bytes of f32 per decoded tile: big enough that BLAS sees a real matrix, small enough that
# the tile is still in L2/L3 when BLAS reads it (measured on the dev machine, K = 4096).
TILE_BYTES = 1 << 20


class QMatMul:
    """``x @ W.T`` for a quantized 2-D ``W`` (``(N, K)``, as in ``nn.Linear``).

    ``x`` may be a Tensor or a numpy array of shape ``(..., K)``; the result has the same
    kind and shape ``(..., N)``. Computation is in f32; f16/bf16 inputs get their dtype back.
    """

    def __init__(self, weight: QTensor, *, tile_rows: int | None = None):
        if not isinstance(weight, QTensor):
            raise TypeError(f"QMatMul: expected a QTensor weight, found {type(weight).__name__}")
        if weight.ndim != 2:
            raise ShapeError(f"QMatMul: weight must be 2-D (N, K), found {list(weight.shape)}")
        self.weight = weight
        n, k = weight.shape
        self.tile_rows = max(1, tile_rows or TILE_BYTES // (4 * max(k, 1)))
        self._dense: np.ndarray | None = None
        if weight.ggml_dtype.name == "F32":
            self._dense = weight.dequantize_numpy()  # a plain copy; nothing to decode per call

    @property
    def shape(self) -> tuple[int, int]:
        return self.weight.shape  # type: ignore[return-value]

    def matmul_numpy(self, x: np.ndarray) -> np.ndarray:
        """``x (..., K) @ W.T`` for a float32 numpy ``x``; returns float32 ``(..., N)``."""
        n, k = self.weight.shape
        if x.shape[-1:] != (k,):
            raise ShapeError(
                f"QMatMul: x of shape {list(x.shape)} does not match weight {list(self.shape)} "
                f"(expected last dimension {k})"
            )
        lead = x.shape[:-1]
        x2 = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, k)
        if self._dense is not None:
            return (x2 @ self._dense.T).reshape(*lead, n)
        m = x2.shape[0]
        out_t = np.empty((n, m), np.float32)  # y.T: each tile writes contiguous rows
        x_t = np.ascontiguousarray(x2.T)
        rows = min(self.tile_rows, n)
        buf = np.empty(rows * k, np.float32)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            tile = self.weight.dequantize_rows(r0, r1, out=buf)
            np.matmul(tile, x_t, out=out_t[r0:r1])
        return np.ascontiguousarray(out_t.T).reshape(*lead, n)

    def forward(self, x: Tensor | np.ndarray) -> Tensor | np.ndarray:
        if isinstance(x, Tensor):
            from ..ops.creation import from_numpy

            if not x.dtype.is_floating_point:
                raise ShapeError(f"QMatMul: expected a float input, found {x.dtype}")
            y = self.matmul_numpy(x.to_dtype(dt.f32).numpy())
            out = from_numpy(y)
            if x.dtype is not dt.f32:
                out = out.to_dtype(x.dtype)
            return out if x.device.kind == "cpu" else out.to(x.device)
        arr = np.asarray(x)
        y = self.matmul_numpy(arr)
        return y.astype(arr.dtype) if arr.dtype in (np.float16, np.float64) else y

    __call__ = forward

    def __repr__(self) -> str:
        return f"QMatMul({self.weight!r})"
