"""Helpers shared by the ggml block codecs: f16 fields, ggml's two roundings, nibble packing.

Every codec works on whole blocks at once: ``x`` is ``(n_blocks, block_size)`` float32 and
``raw`` is ``(n_blocks, type_size)`` uint8, so no Python loop ever runs over blocks.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32

# How every block type decodes: integer levels ``q`` (n, groups, group_size), a float32 scale
# per group (n, groups) and an optional float32 offset per group, x = scale * q + offset.
# ``dequantize`` is that product; QMatMul uses the parts directly (see ``affine``).
Levels = tuple[np.ndarray, np.ndarray, np.ndarray | None]

# ggml treats a group whose largest |x| is below this as all zeros (GROUP_MAX_EPS).
GROUP_MAX_EPS = F32(1e-15)


def f16_field(raw: np.ndarray, start: int) -> np.ndarray:
    """The little-endian f16 at bytes ``[start, start + 2)`` of each block, float32 ``(n, 1)``."""
    return np.ascontiguousarray(raw[:, start : start + 2]).view(np.float16).astype(F32)


def f32_field(raw: np.ndarray, start: int) -> np.ndarray:
    """The little-endian f32 at bytes ``[start, start + 4)`` of each block, as ``(n, 1)``."""
    return np.ascontiguousarray(raw[:, start : start + 4]).view("<f4").astype(F32)


def f16_bytes(values: np.ndarray) -> np.ndarray:
    """float32 ``(n,)`` or ``(n, 1)`` -> f16 bytes ``(n, 2)``, rounded to nearest even like ggml."""
    with np.errstate(over="ignore"):  # out-of-range values become inf, as in ggml
        half = np.ascontiguousarray(values, dtype=F32).reshape(-1).astype(np.float16)
    return half.view(np.uint8).reshape(-1, 2)


def nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's ``nearest_int``: the 1.5*2**23 trick rounds half to even, which is ``np.rint``."""
    return np.rint(v)


def roundf(v: np.ndarray) -> np.ndarray:
    """C ``roundf`` (half away from zero), exact for every float32.

    ``floor(a + 0.5)`` is not exact (0.49999997 + 0.5 rounds up to 1.0), so compare the
    fractional part instead; ``a - floor(a)`` is exact.
    """
    a = np.abs(v)
    fl = np.floor(a)
    return np.copysign(fl + (a - fl >= F32(0.5)), v)


def signed_absmax(x: np.ndarray) -> np.ndarray:
    """Per row, the element with the largest magnitude (the first one on ties), ``(n, 1)``."""
    idx = np.abs(x).argmax(axis=-1)[..., None]
    return np.take_along_axis(x, idx, axis=-1)


def split_nibbles(q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Bytes ``(n, m)`` -> ``(n, 2, m)`` uint8: low nibbles then high nibbles.

    This is ggml's usual order: byte ``j`` holds element ``j`` (low) and ``j + m`` (high).
    """
    if out is None:
        out = np.empty((q.shape[0], 2, q.shape[1]), np.uint8)
    np.bitwise_and(q, 0x0F, out=out[:, 0])
    np.right_shift(q, 4, out=out[:, 1])
    return out


def join_nibbles(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Inverse of :func:`split_nibbles`: ``lo | hi << 4`` as uint8 (inputs must be < 16)."""
    return (lo.astype(np.uint8) & 0x0F) | (hi.astype(np.uint8) << 4)


def pack_2bit(levels: np.ndarray) -> np.ndarray:
    """K-quant 2-bit packing of ``(n, 256)`` levels in 0..3 -> ``(n, 64)`` bytes.

    Byte ``32*h + l`` holds elements ``128*h + 32*j + l`` at bits ``2*j`` (j = 0..3).
    """
    n = levels.shape[0]
    q = levels.astype(np.uint8).reshape(n, 2, 4, 32)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(n, 64)


def unpack_2bit(qs: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_2bit`: ``(n, 64)`` bytes -> ``(n, 256)`` uint8 levels."""
    n = qs.shape[0]
    out = np.empty((n, 2, 4, 32), np.uint8)
    src = qs.reshape(n, 2, 32)
    for j in range(4):
        np.right_shift(src, 2 * j, out=out[:, :, j])
    out &= 3
    return out.reshape(n, 256)


def as_blocks(x: np.ndarray, block_size: int) -> np.ndarray:
    """A float32 array whose size is a multiple of ``block_size`` -> ``(n_blocks, block_size)``."""
    x = np.ascontiguousarray(x, dtype=F32)
    return x.reshape(-1, block_size)


def as_raw(raw: np.ndarray, type_size: int) -> np.ndarray:
    """Raw bytes (any shape, any dtype viewable as bytes) -> ``(n_blocks, type_size)`` uint8."""
    raw = np.ascontiguousarray(raw).view(np.uint8)
    return raw.reshape(-1, type_size)


def affine(levels: Levels, out: np.ndarray | None = None) -> np.ndarray:
    """``scale * q + offset`` in float32, shaped like ``q`` (``out`` may be any view of it).

    The multiply-then-add order is ggml's (and gguf-py's), so results match bit for bit.
    """
    q, scale, offset = levels
    dst = None if out is None else out.reshape(q.shape)
    res = np.multiply(scale[..., None], q, out=dst, dtype=F32)
    if offset is not None:
        res += offset[..., None]
    return res
