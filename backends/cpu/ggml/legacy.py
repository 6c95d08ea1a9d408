"""The 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.

Layouts (little-endian, bytes in order; element ``j`` of a block is ``x[j]``):

==========  =====  ==========================================================
type        bytes  fields
==========  =====  ==========================================================
Q4_0        18     d:f16, qs[16]           x = d * (q - 8),      q in 0..15
Q4_1        20     d:f16, m:f16, qs[16]    x = d * q + m,        q in 0..15
Q5_0        22     d:f16, qh:u32, qs[16]   x = d * (q - 16),     q in 0..31
Q5_1        24     d:f16, m:f16, qh:u32, qs[16]   x = d * q + m, q in 0..31
Q8_0        34     d:f16, qs:i8[32]        x = d * q
Q8_1        36     d:f16, s:f16, qs:i8[32] x = d * q,  s = d * sum(q)
==========  =====  ==========================================================

``qs[j]`` holds the low 4 bits of element ``j`` in its low nibble and of element ``j + 16``
in its high nibble; bit ``j`` of ``qh`` is bit 4 of element ``j``. (gguf-py's constants list
Q8_1 as 40 bytes, from before ggml stored d and s as f16; ggml's static_assert says 36.)

Quantizers follow ggml's reference ones exactly (symmetric types map the signed absmax to
the most negative level; affine types span [min, max]; Q8 rounds half away from zero).
"""

from __future__ import annotations

import numpy as np

from ._common import (
    F32,
    Levels,
    f16_bytes,
    f16_field,
    join_nibbles,
    roundf,
    signed_absmax,
    split_nibbles,
)


def _inverse(d: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(d == 0, F32(0), F32(1) / d).astype(F32)


def _truncate(v: np.ndarray, hi: int) -> np.ndarray:
    """C's ``MIN(hi, (int8_t)v)`` for v >= 0: truncation toward zero, clamped."""
    return np.minimum(np.trunc(v), hi).astype(np.uint8)


def _pack_qh(q: np.ndarray) -> np.ndarray:
    """Bit 4 of 32 levels -> 4 bytes (u32 little-endian, bit j = element j)."""
    return np.packbits((q >> 4) & 1, axis=-1, bitorder="little")


def _low_nibbles(q: np.ndarray) -> np.ndarray:
    return join_nibbles(q[:, :16] & 0x0F, q[:, 16:] & 0x0F)


def _levels_4bit(qs: np.ndarray) -> np.ndarray:
    return split_nibbles(qs).reshape(qs.shape[0], 32)


def _levels_5bit(qh: np.ndarray, qs: np.ndarray) -> np.ndarray:
    q = _levels_4bit(qs)
    q |= np.unpackbits(qh, axis=-1, bitorder="little") << 4
    return q


def _one_group(q: np.ndarray, *fields: np.ndarray | None) -> Levels:
    """A 32-element block is one group: levels (n, 1, 32), scale and offset (n, 1)."""
    return (q[:, None, :], *fields)


# ---------------------------------------------------------------- Q4_0
def quantize_q4_0(x: np.ndarray) -> np.ndarray:
    """``(n, 32)`` float32 -> ``(n, 18)`` bytes; d = absmax_signed / -8."""
    d = signed_absmax(x) / F32(-8)
    q = _truncate(x * _inverse(d) + F32(8.5), 15)
    return np.concatenate([f16_bytes(d), _low_nibbles(q)], axis=1)


def levels_q4_0(raw: np.ndarray) -> Levels:
    q = _levels_4bit(raw[:, 2:]).view(np.int8)
    q -= 8
    return _one_group(q, f16_field(raw, 0), None)


# ---------------------------------------------------------------- Q4_1
def quantize_q4_1(x: np.ndarray) -> np.ndarray:
    """``(n, 32)`` -> ``(n, 20)``; d = (max - min) / 15, m = min."""
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    d = (hi - lo) / F32(15)
    q = _truncate((x - lo) * _inverse(d) + F32(0.5), 15)
    return np.concatenate([f16_bytes(d), f16_bytes(lo), _low_nibbles(q)], axis=1)


def levels_q4_1(raw: np.ndarray) -> Levels:
    return _one_group(_levels_4bit(raw[:, 4:]), f16_field(raw, 0), f16_field(raw, 2))


# ---------------------------------------------------------------- Q5_0
def quantize_q5_0(x: np.ndarray) -> np.ndarray:
    """``(n, 32)`` -> ``(n, 22)``; d = absmax_signed / -16."""
    d = signed_absmax(x) / F32(-16)
    q = _truncate(x * _inverse(d) + F32(16.5), 31)
    return np.concatenate([f16_bytes(d), _pack_qh(q), _low_nibbles(q)], axis=1)


def levels_q5_0(raw: np.ndarray) -> Levels:
    q = _levels_5bit(raw[:, 2:6], raw[:, 6:]).view(np.int8)
    q -= 16
    return _one_group(q, f16_field(raw, 0), None)


# ---------------------------------------------------------------- Q5_1
def quantize_q5_1(x: np.ndarray) -> np.ndarray:
    """``(n, 32)`` -> ``(n, 24)``; d = (max - min) / 31, m = min."""
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    d = (hi - lo) / F32(31)
    q = _truncate((x - lo) * _inverse(d) + F32(0.5), 31)
    return np.concatenate([f16_bytes(d), f16_bytes(lo), _pack_qh(q), _low_nibbles(q)], axis=1)


def levels_q5_1(raw: np.ndarray) -> Levels:
    q = _levels_5bit(raw[:, 4:8], raw[:, 8:])
    return _one_group(q, f16_field(raw, 0), f16_field(raw, 2))


# ---------------------------------------------------------------- Q8_0 / Q8_1
def _q8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.abs(x).max(axis=1, keepdims=True) / F32(127)
    return d, roundf(x * _inverse(d)).astype(np.int8)


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """``(n, 32)`` -> ``(n, 34)``; d = absmax / 127, q = round_half_away(x / d)."""
    d, q = _q8(x)
    return np.concatenate([f16_bytes(d), q.view(np.uint8)], axis=1)


def levels_q8_0(raw: np.ndarray) -> Levels:
    return _one_group(raw[:, 2:].view(np.int8), f16_field(raw, 0), None)


def quantize_q8_1(x: np.ndarray) -> np.ndarray:
    """``(n, 32)`` -> ``(n, 36)``; as Q8_0 plus s = f16(sum(q) * d) with the unrounded d."""
    d, q = _q8(x)
    s = q.sum(axis=1, dtype=np.int32, keepdims=True).astype(F32) * d
    return np.concatenate([f16_bytes(d), f16_bytes(s), q.view(np.uint8)], axis=1)


def levels_q8_1(raw: np.ndarray) -> Levels:
    return _one_group(raw[:, 4:].view(np.int8), f16_field(raw, 0), None)
