"""Quantized matrix products on the CPU: ``CpuStorage.qmatmul``, ``x (..., K) @ W.T`` for a
weight ``W (N, K)`` held as raw GGUF blocks in a ``u8`` storage (row-major, as in the file).

Native path (the compiled ``qmatmul``, every block type in ``NATIVE_TYPES``): ``x`` is
quantized once per call as ggml does (Q8_1 for Q4_1/Q5_1, Q8_K for the 256-element types,
Q8_0 for the rest), then the threads share the weight rows. Up to 4 rows of ``x`` (token by
token generation), each weight block is unpacked in SIMD registers and meets every activation
row at once, so the weights stream from memory once and are never stored (AVX2 / AVX-512;
every block type but Q8_K); otherwise each thread decodes its weight rows to int8 levels and
takes integer dot products with every activation row (several rows per loaded weight chunk).

numpy path (``WORKBENCH_NATIVE=0``, no extension, the F16/BF16 weight types): ``W`` is
decoded a tile of rows at a time into one reused f32 buffer, each tile through BLAS::

    y[:, r0:r1] = x @ dequantize(W[r0:r1]).T

and a single vector skips the f32 tile: each block type decodes as ``scale * q + offset``
per group of integer levels, so

    y[n] = sum_g scale[n, g] * (q[n, g, :] . x[g, :]) + offset[n, g] * sum(x[g, :])

runs on the int8/uint8 levels directly (10-35% faster than tiles at batch 1 on 4096 x 4096).
Tile size: 1 MiB tiles (L2) for a few rows of ``x``; 16 MiB from batch 8 on, where BLAS's
per-call cost dominates small tiles (measured on the 2-core dev machine).
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedOnDevice
from ..lazy import lazy_module
from ._arrays import F32, is_half, view
from .native import NATIVE

ggml = lazy_module(f"{__package__}.ggml")  # the block-type codecs, at the first quantized op

NATIVE_TYPES = frozenset(("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
                          "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS"))  # fmt: skip

# numpy path: bytes of f32 per decoded tile for matrix-vector (batch < 8) and matrix-matrix
# products, and rows per step of the single-vector path (levels are 1 byte per weight).
TILE_BYTES_VECTOR = 1 << 20
TILE_BYTES_MATRIX = 1 << 24
MATRIX_BATCH = 8
LEVEL_TILE_ROWS = 1024


class QuantizedOps:
    __slots__ = ()

    def qmatmul(self, layout, raw, type_name: str, n: int, k: int):
        """``x (..., k) @ W.T`` for ``W (n, k)`` of ggml type ``type_name`` whose blocks are
        the bytes of ``raw``: a contiguous ``(..., n)`` storage of x's (float) dtype."""
        x = view(self.array, layout)
        dtype = x.dtype
        if dtype is not F32 and dtype.kind != "f" and not is_half(dtype):
            raise UnsupportedOnDevice(f"qmatmul on cpu takes float inputs, found {dtype}")
        info = _INFO.get(type_name) or _type_info(type_name)
        if x.shape[-1:] != (k,):
            raise ShapeError(f"qmatmul: x of shape {list(x.shape)} does not match k = {k}")
        w = raw.array
        if w.ndim != 1:
            w = w.reshape(-1)
        if k % info.block_size or w.size != n * (k // info.block_size) * info.type_size:
            raise ShapeError(f"qmatmul: {w.size} bytes do not hold a ({n}, {k}) {type_name} weight")
        lead = x.shape[:-1]
        if dtype is not F32 or not x.flags.c_contiguous:
            x = np.ascontiguousarray(x, dtype=F32)
        out = np.empty((*lead, n), F32)
        if out.size and k:
            if NATIVE is not None and type_name in NATIVE_TYPES:
                NATIVE.qmatmul(w, info.id, n, k, x, out)  # any C-contiguous (m * k) x
            else:
                _numpy_qmatmul(w.reshape(n, -1), info, x.reshape(-1, k), out.reshape(-1, n))
        elif out.size:
            out.fill(0.0)  # k == 0: empty sums
        return type(self)(out if dtype is F32 else out.astype(dtype))


_INFO: dict[str, ggml.GgmlTypeInfo] = {}  # type name -> its row of the ggml table, once looked up


def _type_info(type_name: str) -> ggml.GgmlTypeInfo:
    info = ggml.BY_NAME.get(type_name)
    if info is None or not info.supported:
        raise UnsupportedOnDevice(f"qmatmul of {type_name} weights is not implemented on cpu")
    _INFO[type_name] = info
    return info


def _numpy_qmatmul(w: np.ndarray, info: ggml.GgmlTypeInfo, x: np.ndarray, out: np.ndarray):
    """``out (m, n) = x (m, k) @ W.T`` with numpy, ``w`` the ``(n, row_bytes)`` raw rows."""
    n, m, k = w.shape[0], x.shape[0], x.shape[1]
    if m == 1 and info.block_size > 1:
        out[0] = _numpy_matvec(w, info.name, x[0])
        return
    out_t = np.empty((n, m), F32)  # y.T: each tile writes contiguous rows
    x_t = np.ascontiguousarray(x.T)
    tile_bytes = TILE_BYTES_VECTOR if m < MATRIX_BATCH else TILE_BYTES_MATRIX
    rows = max(1, min(n, tile_bytes // (4 * k)))
    buf = np.empty(rows * k, F32)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        tile = ggml.dequantize(w[r0:r1], info.name, out=buf[: (r1 - r0) * k]).reshape(-1, k)
        np.matmul(tile, x_t, out=out_t[r0:r1])
    out[...] = out_t.T


def _numpy_matvec(w: np.ndarray, type_name: str, x: np.ndarray) -> np.ndarray:
    """``W @ x`` for one vector, on the integer levels (see the module docstring)."""
    n, k = w.shape[0], x.shape[0]
    out = np.empty(n, F32)
    for r0 in range(0, n, LEVEL_TILE_ROWS):
        r1 = min(n, r0 + LEVEL_TILE_ROWS)
        q, scale, offset = ggml.levels(w[r0:r1], type_name)
        size = q.shape[-1]
        groups = k // size
        xg = x.reshape(groups, size)
        dots = np.einsum("ngi,gi->ng", q.reshape(r1 - r0, groups, size), xg)
        y = np.einsum("ng,ng->n", dots, scale.reshape(r1 - r0, groups))
        if offset is not None:
            y += offset.reshape(r1 - r0, groups) @ xg.sum(axis=1)
        out[r0:r1] = y
    return out
