"""``QMatMul``: ``y = x @ W.T`` with a quantized weight ``W`` of shape ``(N, K)``.

The whole f32 weight is never materialised: ``W`` is decoded a tile of rows at a time into
one reused f32 buffer and each tile goes through BLAS::

    y[:, r0:r1] = x @ dequantize(W[r0:r1]).T

A single input vector (batch 1, token-by-token decoding) skips even the f32 tile: each
block type decodes as ``scale * q + offset`` per group of integer levels, so

    y[n] = sum_g scale[n, g] * (q[n, g, :] . x[g, :]) + offset[n, g] * sum(x[g, :])

runs on the int8/uint8 levels directly (measured 10-35% faster than tiles at batch 1 on
4096 x 4096, e.g. Q6_K 55 vs 83 ms, Q8_0 17 vs 21 ms of CPU time; slower from batch 2 on,
where BLAS matrix products win).

Tile size: for a few rows of ``x`` (decoding, batch < 8) the product is a matrix-vector one
bound by decoding, and 1 MiB tiles that stay in L2 are fastest; for bigger batches BLAS's
per-call (thread start-up) cost dominates small tiles, so tiles grow to 16 MiB (measured on
the loaded 2-core dev machine, 4096 x 4096, batch 64: 2.5 s with 1 MiB tiles, 0.3 s with
16 MiB, 0.43 s for the f32 matmul).

The alternative design, quantizing ``x`` to Q8_0 and taking integer dot products per block
(ggml's CPU approach), was measured and rejected: numpy has no int8 GEMM, so it only ties at
batch 1 and falls far behind after. CPU ms for 4096 x 4096 with one BLAS thread (dev machine;
``benchmarks/bench_quantized.py`` re-measures both):

=========  =====================  =====================  ====================
batch      Q8_0 QMatMul / int8    Q4_0 QMatMul / int8    f32 matmul
=========  =====================  =====================  ====================
1          16.2 / 15.7            34.4 / 35.3            2.9
4          29.0 / 43.6            53.4 / 84.4            11.7
64         55.3 / 788             86.4 / 847             33.0
=========  =====================  =====================  ====================

Inference only: the result carries no autograd history. On another device, the raw blocks
are copied there once (kept per device) and the backend's ``qmatmul`` storage method runs the
product (CUDA: a quantized matvec for one Q4_0/Q8_0 vector, else W expanded on the device and
one cuBLAS product); a device or block type without one computes on the CPU and moves back.
"""

from __future__ import annotations

import numpy as np

from .. import dtype as dt
from ..backends.cpu import ggml
from ..errors import DTypeError, ShapeError, UnsupportedOnDevice
from ..ops._helpers import new
from ..tensor import Tensor
from .qtensor import QTensor

# Bytes of f32 per decoded tile, for matrix-vector (batch < 8) and matrix-matrix products.
TILE_BYTES_VECTOR = 1 << 20
TILE_BYTES_MATRIX = 1 << 24
_MATRIX_BATCH = 8
# Rows per step of the single-vector path (levels are 1 byte per weight).
LEVEL_TILE_ROWS = 1024


class QMatMul:
    """``x @ W.T`` for a quantized 2-D ``W`` (``(N, K)``, as in ``nn.Linear``).

    ``x`` may be a Tensor or a numpy array of shape ``(..., K)``; the result has the same
    kind and shape ``(..., N)``. Computation is in f32; f16/bf16 inputs get their dtype back.
    """

    def __init__(self, weight: QTensor, *, tile_rows: int | None = None):
        """``tile_rows`` fixes the rows decoded per tile (default: from the batch size)."""
        if not isinstance(weight, QTensor):
            raise TypeError(f"QMatMul: expected a QTensor weight, found {type(weight).__name__}")
        if weight.ndim != 2:
            raise ShapeError(f"QMatMul: weight must be 2-D (N, K), found {list(weight.shape)}")
        self.weight = weight
        self.tile_rows = tile_rows
        self._dense: np.ndarray | None = None
        self._on_device: dict = {}  # Device -> the raw blocks (or dense weight) there
        if weight.ggml_dtype.name == "F32":
            self._dense = weight.dequantize_numpy()  # a plain copy; nothing to decode per call

    @property
    def shape(self) -> tuple[int, int]:
        return self.weight.shape  # type: ignore[return-value]

    def matmul_numpy(self, x: np.ndarray) -> np.ndarray:
        """``x (..., K) @ W.T`` for a float32 numpy ``x``; returns float32 ``(..., N)``."""
        n, k = self.weight.shape
        self._check_input(x.shape)
        lead = x.shape[:-1]
        x2 = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, k)
        if self._dense is not None:
            return (x2 @ self._dense.T).reshape(*lead, n)
        m = x2.shape[0]
        if m == 1 and self.weight.ggml_dtype.is_quantized:
            return self._matvec(x2[0]).reshape(*lead, n)
        out_t = np.empty((n, m), np.float32)  # y.T: each tile writes contiguous rows
        x_t = np.ascontiguousarray(x2.T)
        rows = self.tile_rows
        if rows is None:
            tile_bytes = TILE_BYTES_VECTOR if m < _MATRIX_BATCH else TILE_BYTES_MATRIX
            rows = tile_bytes // (4 * max(k, 1))
        rows = max(1, min(rows, n))
        buf = np.empty(rows * k, np.float32)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            tile = self.weight.dequantize_rows(r0, r1, out=buf)
            np.matmul(tile, x_t, out=out_t[r0:r1])
        return np.ascontiguousarray(out_t.T).reshape(*lead, n)

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        """``W @ x`` for one vector, on the integer levels (see the module docstring)."""
        n, k = self.weight.shape
        name = self.weight.ggml_dtype.name
        out = np.empty(n, np.float32)
        rows = max(1, min(n, self.tile_rows or LEVEL_TILE_ROWS))
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            q, scale, offset = ggml.levels(self.weight.data[r0:r1], name)
            size = q.shape[-1]
            groups = k // size
            xg = x.reshape(groups, size)
            dots = np.einsum("ngi,gi->ng", q.reshape(r1 - r0, groups, size), xg)
            y = np.einsum("ng,ng->n", dots, scale.reshape(r1 - r0, groups))
            if offset is not None:
                y += offset.reshape(r1 - r0, groups) @ xg.sum(axis=1)
            out[r0:r1] = y
        return out

    def forward(self, x: Tensor | np.ndarray) -> Tensor | np.ndarray:
        if isinstance(x, Tensor):
            from ..ops.creation import from_numpy

            if not x.dtype.is_floating_point:
                raise DTypeError(f"QMatMul: expected a float input, found {x.dtype}")
            if x.device.kind != "cpu":
                try:
                    return self._forward_on_device(x)
                except UnsupportedOnDevice:
                    pass  # this device has no product for this block type: the CPU path
            y = self.matmul_numpy(x.to_dtype(dt.f32).numpy())
            out = from_numpy(y)
            if x.dtype is not dt.f32:
                out = out.to_dtype(x.dtype)
            return out if x.device.kind == "cpu" else out.to(x.device)
        arr = np.asarray(x)
        y = self.matmul_numpy(arr)
        return y.astype(arr.dtype) if arr.dtype in (np.float16, np.float64) else y

    __call__ = forward

    def _check_input(self, shape: tuple[int, ...]) -> None:
        k = self.weight.shape[1]
        if tuple(shape[-1:]) != (k,):
            raise ShapeError(
                f"QMatMul: x of shape {list(shape)} does not match weight {list(self.shape)} "
                f"(expected last dimension {k})"
            )

    def _forward_on_device(self, x: Tensor) -> Tensor:
        n, k = self.weight.shape
        self._check_input(x.shape)
        from ..ops.creation import from_numpy

        stored = self._on_device.get(x.device)
        if stored is None:
            host = self._dense if self._dense is not None else self.weight.data.reshape(-1)
            stored = self._on_device[x.device] = from_numpy(host).to(x.device)
        if self._dense is not None:
            return x @ stored.to_dtype(x.dtype).t()
        compute = x if x.dtype in (dt.f32, dt.f16, dt.bf16) else x.to_dtype(dt.f32)
        storage = compute._storage.qmatmul(
            compute._layout, stored._storage, self.weight.ggml_dtype.name, n, k
        )
        out = new(storage, (*x.shape[:-1], n), compute.dtype, x.device)
        return out if out.dtype is x.dtype else out.to_dtype(x.dtype)

    def __repr__(self) -> str:
        return f"QMatMul({self.weight!r})"
