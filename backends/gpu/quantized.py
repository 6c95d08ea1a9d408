"""GGUF dequantization and quantized matrix products on the GPUs (``kernels/gpu/quantized.h``).

Raw blocks live in a ``u8`` storage exactly as in the GGUF file. ``dequantize`` expands them
to f32/f16/bf16; ``qmatvec`` computes ``y (m, rows) = x (m, K) @ Wᵀ`` for up to
``MAX_MATVEC_BATCH`` vectors without expanding W: the warps of a row decode its blocks in
registers and use each decoded value for every vector, in f32 (x is not quantized), so
``|y - x Wᵀ| <= (K/32 + 8) 2^-24 Σ_k |x_k w_k|`` beyond W's own f32 decoding. ``qmatmul`` is
``x (..., K) @ Wᵀ``: the matvec for at most ``MAX_MATVEC_BATCH`` rows of x, else W expanded
on the device in x's dtype and one ``matmul`` (cuBLAS, MPS or the GEMM kernel). Every block
type of ``BLOCKS`` has both, and so have unquantized F16 / BF16 weights (``HALVES``: read 8
values at a time, so their K must be a multiple of 8).

Device-neutral: it calls only ``GpuStorage`` hooks and ops (``_new``, ``_at``, ``_launch``,
``cast``, ``contiguous``, ``matmul``); its errors name the storage's ``device_kind``.
"""

from __future__ import annotations

from ..errors import UnsupportedOnDevice
from ..layout import Layout, numel

# type name -> (values per block, bytes per block)
BLOCKS = {
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
    "Q8_1": (32, 36), "IQ4_NL": (32, 18), "Q2_K": (256, 84), "Q3_K": (256, 110),
    "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210), "IQ4_XS": (256, 136),
    "Q8_K": (256, 292),
}  # fmt: skip
HALVES = ("F16", "BF16")  # weights the kernels take as "blocks" of 8 values (16 bytes)
_KERNEL_BLOCKS = {**BLOCKS, **{h: (8, 16) for h in HALVES}}
MATVEC_TYPES = tuple(_KERNEL_BLOCKS)
MAX_MATVEC_BATCH = 8  # x rows the matvec takes; more go through dequantize + matmul
_BATCH_KERNELS = (1, 2, 4, 8)  # the kernels' most vectors: qmatvec_<t>_f32 and ..._b<B>
WARPS = 4  # 32-lane warps in a block of the matvec (QMV_WARPS in the kernels)
_VALUES_PER_THREAD = 8  # a dequantize thread writes one slice of 8 values


def warps_per_row(m: int) -> int:
    """Warps sharing one row of W for ``m`` vectors, each summing every 4th (2nd) warp step:
    4 for up to 4 vectors, 2 beyond (where a warp has more work per block), as in ggml's
    NVIDIA table for its matvec. More warps per row keep more loads in flight on the short
    matrices (a few thousand rows) of batch-1 decoding."""
    return 4 if m <= 4 else 2


def _block(type_name: str, device: str) -> tuple[int, int]:
    """(values, bytes) of the kernels' block of ``type_name``."""
    try:
        return _KERNEL_BLOCKS[type_name]
    except KeyError:
        raise UnsupportedOnDevice(
            f"quantized type {type_name} is not implemented on {device} "
            f"(supported: {', '.join(_KERNEL_BLOCKS)})"
        ) from None


def matvec_kernel(type_name: str, m: int) -> str:
    """The kernel for ``m`` vectors (``1 <= m <= MAX_MATVEC_BATCH``): the one of fewest slots."""
    most = next(b for b in _BATCH_KERNELS if b >= m)
    return f"qmatvec_{type_name.lower()}_f32" + (f"_b{most}" if most > 1 else "")


def kernel_names() -> list[str]:
    """Every kernel name of the ``quantized`` family (``kernels/gpu/quantized.h``) launched here."""
    names = []
    for t in _KERNEL_BLOCKS:
        names += [f"dequantize_{t.lower()}_{d}" for d in ("f32", "f16", "bf16")]
        names += [matvec_kernel(t, b) for b in _BATCH_KERNELS]
    return names


def dequantize(raw, type_name: str, dtype: str = "f32"):
    """``raw`` (u8 storage of whole blocks) -> a flat storage of ``dtype`` values."""
    qk, size = _block(type_name, raw.device_kind)
    if raw.size % size:
        what = "groups of 8 values" if type_name in HALVES else "blocks"
        raise ValueError(f"{raw.size} bytes is not a whole number of {type_name} {what}")
    if dtype not in ("f32", "f16", "bf16"):
        raise UnsupportedOnDevice(
            f"dequantizing to {dtype} is not implemented on {raw.device_kind}"
        )
    n = raw.size // size * qk
    out = raw._new(n, dtype)
    raw._launch("quantized", f"dequantize_{type_name.lower()}_{dtype}", n // _VALUES_PER_THREAD,
                out._at(), raw._at(), n)  # fmt: skip
    return out


def qmatvec(raw, type_name: str, rows: int, k: int, x, x_layout, split: int | None = None):
    """``x (m, k) @ Wᵀ`` with W ``(rows, k)`` quantized row-major in ``raw``, for ``x`` of
    ``m * k`` elements (any float dtype and layout, read in C order; ``1 <= m <= 8``): a
    contiguous f32 ``(m, rows)`` storage. ``split`` (1, 2 or 4; default ``warps_per_row(m)``)
    warps share each row."""
    if split is not None and split not in (1, 2, 4):
        raise ValueError(f"qmatvec: split must be 1, 2 or 4 warps per row, found {split}")
    qk, size = _block(type_name, raw.device_kind)
    if type_name in HALVES and k % qk:
        raise UnsupportedOnDevice(
            f"qmatvec of {type_name} weights on {raw.device_kind} needs K a multiple of {qk}, "
            f"found {k}"
        )
    if k <= 0 or k % qk or raw.size != rows * (k // qk) * size:
        raise ValueError(f"{raw.size} bytes do not hold a ({rows}, {k}) {type_name} matrix")
    count = numel(x_layout.shape)
    m = count // k
    if m * k != count or not 1 <= m <= MAX_MATVEC_BATCH:
        raise ValueError(
            f"qmatvec takes 1..{MAX_MATVEC_BATCH} vectors of {k} elements, found {count} elements"
        )
    offset = x_layout.offset
    # the kernel reads x as f32 quads: contiguous, 16-byte aligned (k is a multiple of 32)
    if x.dtype != "f32" or not x_layout.is_contiguous or offset % 4:
        x, offset = x.cast(x_layout, "f32"), 0
    out = raw._new(m * rows, "f32")
    split = split or warps_per_row(m)
    per_block = WARPS // split
    grid, block = (max(1, -(-rows // per_block)), 1, 1), (32 * WARPS, 1, 1)
    raw._launch("quantized", matvec_kernel(type_name, m), rows, out._at(), raw._at(),
                x._at(offset), rows, k, m, split, grid=grid, block=block)  # fmt: skip
    return out


def qmatmul(x, x_layout, raw, type_name: str, n: int, k: int):
    """``x (..., k) @ Wᵀ`` for W ``(n, k)`` quantized row-major in ``raw``: a contiguous
    ``(..., n)`` storage in x's dtype (f16, bf16 or f32; others raise)."""
    dtype = x.dtype
    if dtype not in ("f32", "f16", "bf16"):
        raise UnsupportedOnDevice(
            f"qmatmul on {x.device_kind} takes f32/f16/bf16 inputs, found {dtype}"
        )
    _block(type_name, x.device_kind)
    m = numel(x_layout.shape) // k if k else 0
    if 1 <= m <= MAX_MATVEC_BATCH:
        out = qmatvec(raw, type_name, n, k, x, x_layout)
        return out if dtype == "f32" else out.cast(Layout.contiguous((m * n,)), dtype)
    weight = dequantize(raw, type_name, dtype)
    if weight.size != n * k:
        raise ValueError(f"{raw.size} bytes do not hold a ({n}, {k}) {type_name} matrix")
    lhs = Layout.of(x_layout)
    if not lhs.is_contiguous:
        x, lhs = x.contiguous(lhs), Layout.contiguous(lhs.shape)
    return x.matmul(Layout((m, k), (k, 1), lhs.offset), weight, Layout((k, n), (1, k)))
