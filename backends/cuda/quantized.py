"""GGUF dequantization and quantized matrix products on CUDA (``kernels/gpu/quantized.h``).

Raw blocks live in a ``u8`` CudaStorage exactly as in the GGUF file. ``dequantize`` expands
them to f32/f16/bf16; ``qmatvec`` computes ``W (rows, K) @ x (K,)`` for Q4_0 and Q8_0 weights
without expanding W (one warp per row); ``qmatmul`` is ``x (..., K) @ Wᵀ``: the matvec for one
vector, else W expanded on the device in x's dtype and one cuBLAS product.
"""

from __future__ import annotations

from ..errors import UnsupportedOnDevice
from ..layout import Layout, numel

# type name -> (values per block, bytes per block)
BLOCKS = {
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
    "Q4_K": (256, 144), "Q6_K": (256, 210),
}  # fmt: skip
MATVEC_TYPES = ("Q4_0", "Q8_0")
ROWS_PER_BLOCK = 8  # rows of the matvec a block serves, one 32-lane warp each


def _block(type_name: str) -> tuple[int, int]:
    try:
        return BLOCKS[type_name]
    except KeyError:
        raise UnsupportedOnDevice(
            f"dequantizing {type_name} is not implemented on cuda (supported: {', '.join(BLOCKS)})"
        ) from None


def dequantize(raw, type_name: str, dtype: str = "f32"):
    """``raw`` (u8 storage of whole blocks) -> a flat storage of ``dtype`` values."""
    qk, size = _block(type_name)
    if raw.size % size:
        raise ValueError(f"{raw.size} bytes is not a whole number of {type_name} blocks")
    if dtype not in ("f32", "f16", "bf16"):
        raise UnsupportedOnDevice(f"dequantizing to {dtype} is not implemented on cuda")
    n = raw.size // size * qk
    out = raw._new(n, dtype)
    raw._launch("quantized", f"dequantize_{type_name.lower()}_{dtype}", n, out._at(), raw._at(), n)
    return out


def qmatvec(raw, type_name: str, rows: int, k: int, x, x_layout):
    """``W (rows, k) @ x`` with W quantized row-major in ``raw``; x f32 (k,) -> f32 (rows,)."""
    if type_name not in MATVEC_TYPES:
        raise UnsupportedOnDevice(f"qmatvec is not implemented on cuda for {type_name}")
    qk, size = _block(type_name)
    if k % qk or raw.size != rows * (k // qk) * size:
        raise ValueError(f"{raw.size} bytes do not hold a ({rows}, {k}) {type_name} matrix")
    if numel(x_layout.shape) != k:
        raise ValueError(f"x has {numel(x_layout.shape)} elements, expected {k}")
    offset = x_layout.offset
    if x.dtype != "f32" or not x_layout.is_contiguous:
        x, offset = x.cast(x_layout, "f32"), 0
    out = raw._new(rows, "f32")
    grid = (max(1, -(-rows // ROWS_PER_BLOCK)), 1, 1)
    raw._launch("quantized", f"qmatvec_{type_name.lower()}_f32", rows, out._at(), raw._at(),
                x._at(offset), rows, k, grid=grid, block=(32 * ROWS_PER_BLOCK, 1, 1))  # fmt: skip
    return out


def qmatmul(x, x_layout, raw, type_name: str, n: int, k: int):
    """``x (..., k) @ Wᵀ`` for W ``(n, k)`` quantized row-major in ``raw``: a contiguous
    ``(..., n)`` storage in x's dtype (f16, bf16 or f32; others raise)."""
    dtype = x.dtype
    if dtype not in ("f32", "f16", "bf16"):
        raise UnsupportedOnDevice(f"qmatmul on cuda takes f32/f16/bf16 inputs, found {dtype}")
    m = numel(x_layout.shape) // k if k else 0
    if m == 1 and type_name in MATVEC_TYPES:
        out = qmatvec(raw, type_name, n, k, x, x_layout)
        return out if dtype == "f32" else out.cast(Layout.contiguous((n,)), dtype)
    weight = dequantize(raw, type_name, dtype)
    if weight.size != n * k:
        raise ValueError(f"{raw.size} bytes do not hold a ({n}, {k}) {type_name} matrix")
    lhs = Layout.of(x_layout)
    if not lhs.is_contiguous:
        x, lhs = x.contiguous(lhs), Layout.contiguous(lhs.shape)
    return x.matmul(Layout((m, k), (k, 1), lhs.offset), weight, Layout((k, n), (1, k)))
