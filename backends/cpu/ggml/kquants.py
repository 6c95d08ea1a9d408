"""K-quants: 256-element super-blocks with quantized per-sub-block scales (Q2_K..Q6_K, Q8_K).

Layouts (bytes in order). Element ``e`` of a super-block belongs to sub-block ``e // 16``
(Q2_K, Q3_K, Q6_K) or ``e // 32`` (Q4_K, Q5_K).

- **Q2_K** (84 B, 2.625 bpw): ``scales[16]`` (low nibble: scale, high nibble: min),
  ``qs[64]``, ``d:f16``, ``dmin:f16``. x = d*sc*q - dmin*m, q in 0..3. Element
  ``128*h + 32*j + l`` is bits ``2j..2j+1`` of ``qs[32*h + l]``.
- **Q3_K** (110 B, 3.4375 bpw): ``hmask[32]``, ``qs[64]``, ``scales[12]``, ``d:f16``.
  x = d*(s - 32)*(q - 4), q = low2 | high<<2 with the low 2 bits packed as in Q2_K and the
  high bit of element ``32*b + m`` at bit ``b`` of ``hmask[m]``. The 16 six-bit scales
  ``s``: low nibbles in ``scales[0:8]`` (s[j] low, s[j+8] high nibble), top 2 bits of
  ``s[j]`` at bits ``2*(j//4)`` of ``scales[8 + j%4]``.
- **Q4_K** (144 B, 4.5 bpw): ``d:f16``, ``dmin:f16``, ``scales[12]``, ``qs[128]``.
  x = d*sc*q - dmin*m, q in 0..15. Sub-block ``2c`` is the low nibbles of
  ``qs[32c:32c+32]``, ``2c+1`` the high nibbles. Six-bit (sc, m) pairs: for j < 4,
  ``sc = s[j] & 63``, ``m = s[j+4] & 63``; for j >= 4, ``sc = s[j+4] & 15 | (s[j-4] >> 6) << 4``
  and ``m = s[j+4] >> 4 | (s[j] >> 6) << 4``.
- **Q5_K** (176 B, 5.5 bpw): ``d``, ``dmin``, ``scales[12]``, ``qh[32]``, ``qs[128]``; as
  Q4_K plus bit 4 of element ``32*s + l`` at bit ``s`` of ``qh[l]``.
- **Q6_K** (210 B, 6.5625 bpw): ``ql[128]``, ``qh[64]``, ``scales:i8[16]``, ``d:f16``.
  x = d*sc*(q - 32). In half ``h``, element ``128h + 32r + l`` takes its low nibble from
  ``ql[64h + 32*(r%2) + l]`` (low nibble for r < 2, high for r >= 2) and its top 2 bits
  from bits ``2r`` of ``qh[32h + l]``.
- **Q8_K** (292 B): ``d:f32``, ``qs:i8[256]``, ``bsums:i16[16]`` (sums of 16 quants), x = d*q.
  Only used for activations.

Quantizers follow ggml's reference ones (no importance matrix): per sub-block scale search
(``make_qkx2_quants`` for Q2_K/Q4_K/Q5_K, ``make_q3_quants`` for Q3_K, ``make_qx_quants`` for
Q6_K), scales quantized against the super-block maximum, then every element re-quantized
with the final (rounded) scales.
"""

from __future__ import annotations

import numpy as np

from ._common import (
    F32,
    GROUP_MAX_EPS,
    Levels,
    f16_bytes,
    f16_field,
    f32_field,
    nearest_int,
    pack_2bit,
    signed_absmax,
    split_nibbles,
    unpack_2bit,
)
from ._search import make_q3_quants, make_qkx2_quants, make_qx_quants

QK_K = 256


def _requantize(
    x: np.ndarray, d: np.ndarray, m: np.ndarray | None, lo: int, hi: int, fallback: np.ndarray
) -> np.ndarray:
    """Levels for ``x`` (n, sub, size) with final scales ``d`` (n, sub): round((x + m) / d) - lo.

    Sub-blocks whose scale rounded to zero keep the search's levels, as ggml does.
    """
    dd = d[..., None]
    num = x if m is None else x + m[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        lv = np.clip(nearest_int(num / dd), lo, hi) - lo
    return np.where(dd != 0, lv, fallback).astype(np.uint8)


def _super_scale(values: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Quantize non-negative sub-block values against their maximum: levels and f16 d."""
    mx = np.maximum(values.max(axis=1), F32(0))
    inv = np.where(mx > 0, F32(top) / np.where(mx > 0, mx, F32(1)), F32(0))
    levels = np.clip(nearest_int(inv[:, None] * values), 0, top).astype(np.uint8)
    return levels, f16_bytes(mx / F32(top))


# ---------------------------------------------------------------- Q2_K
def quantize_q2_k(x: np.ndarray) -> np.ndarray:
    n = x.shape[0]
    xs = x.reshape(n * 16, 16)
    scale, neg_min, L = make_qkx2_quants(xs, np.abs(xs), 3, -0.5, 0.1, 15, use_mad=True)
    ls, d = _super_scale(scale.reshape(n, 16), 15)
    lm, dmin = _super_scale(neg_min.reshape(n, 16), 15)
    df = d.copy().view(np.float16).astype(F32)
    mf = dmin.copy().view(np.float16).astype(F32)
    levels = _requantize(
        x.reshape(n, 16, 16), df * ls, mf * lm, 0, 3, L.reshape(n, 16, 16)
    ).reshape(n, QK_K)
    return np.concatenate([ls | (lm << 4), pack_2bit(levels), d, dmin], axis=1)


def levels_q2_k(raw: np.ndarray) -> Levels:
    n = raw.shape[0]
    sc = raw[:, :16]
    d, dmin = f16_field(raw, 80), f16_field(raw, 82)
    q = unpack_2bit(raw[:, 16:80]).reshape(n, 16, 16)
    return q, d * (sc & 0x0F), -(dmin * (sc >> 4))


# ---------------------------------------------------------------- Q3_K
def _pack_scales_q3(s: np.ndarray) -> np.ndarray:
    """16 six-bit values (n, 16) -> 12 bytes."""
    n = s.shape[0]
    low = (s[:, :8] & 0x0F) | ((s[:, 8:] & 0x0F) << 4)
    top = ((s >> 4) & 3).reshape(n, 4, 4)  # [group g = j // 4, k = j % 4]
    high = top[:, 0] | (top[:, 1] << 2) | (top[:, 2] << 4) | (top[:, 3] << 6)
    return np.concatenate([low, high], axis=1).astype(np.uint8)


def _unpack_scales_q3(b: np.ndarray) -> np.ndarray:
    """12 bytes -> 16 six-bit values (n, 16) as int8 minus 32."""
    n = b.shape[0]
    low = split_nibbles(b[:, :8]).reshape(n, 16)
    shifts = np.array([0, 2, 4, 6], np.uint8)[None, :, None]
    top = ((b[:, None, 8:12] >> shifts) & 3).reshape(n, 16)
    return (low | (top << 4)).view(np.int8) - np.int8(32)


def quantize_q3_k(x: np.ndarray) -> np.ndarray:
    n = x.shape[0]
    scales, L = make_q3_quants(x.reshape(n * 16, 16), 4)
    scales = scales.reshape(n, 16)
    mx = signed_absmax(scales)[:, 0]
    has = mx != 0
    iscale = np.where(has, F32(-32) / np.where(has, mx, F32(1)), F32(0))
    ls = (np.clip(nearest_int(iscale[:, None] * scales), -32, 31) + 32).astype(np.uint8)
    packed = np.where(has[:, None], _pack_scales_q3(ls), np.uint8(0))
    with np.errstate(divide="ignore"):
        d = f16_bytes(np.where(has, F32(1) / iscale, F32(0)))
    df = d.copy().view(np.float16).astype(F32)
    sc = np.where(has[:, None], ls.astype(F32) - 32, F32(0))
    levels = _requantize(x.reshape(n, 16, 16), df * sc, None, -4, 3, L.reshape(n, 16, 16))
    levels = levels.reshape(n, QK_K)
    high = levels > 3
    hmask = np.packbits(high.reshape(n, 8, 32), axis=1, bitorder="little").reshape(n, 32)
    return np.concatenate([hmask, pack_2bit(levels & 3), packed, d], axis=1)


def levels_q3_k(raw: np.ndarray) -> Levels:
    n = raw.shape[0]
    hbit = np.unpackbits(raw[:, None, :32], axis=1, count=8, bitorder="little").reshape(n, QK_K)
    q = unpack_2bit(raw[:, 32:96]).view(np.int8)
    q -= (hbit ^ 1).view(np.int8) << 2
    return q.reshape(n, 16, 16), f16_field(raw, 108) * _unpack_scales_q3(raw[:, 96:108]), None


# ---------------------------------------------------------------- Q4_K / Q5_K
def _pack_scales_k4(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """Eight six-bit (scale, min) pairs (n, 8) each -> 12 bytes."""
    a = ls[:, :4] | ((ls[:, 4:] >> 4) << 6)
    b = lm[:, :4] | ((lm[:, 4:] >> 4) << 6)
    c = (ls[:, 4:] & 0x0F) | ((lm[:, 4:] & 0x0F) << 4)
    return np.concatenate([a, b, c], axis=1).astype(np.uint8)


def _unpack_scales_k4(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """12 bytes -> (scales (n, 8), mins (n, 8)) uint8."""
    a, b, c = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = np.concatenate([a & 63, (c & 0x0F) | ((a >> 6) << 4)], axis=1)
    mn = np.concatenate([b & 63, (c >> 4) | ((b >> 6) << 4)], axis=1)
    return sc, mn


def _quantize_k4(x: np.ndarray, nmax: int, rmin: float, nstep: int):
    n = x.shape[0]
    xs = x.reshape(n * 8, 32)
    av = np.sqrt((xs * xs).sum(axis=1, keepdims=True) / F32(32))
    scale, neg_min, L = make_qkx2_quants(xs, av + np.abs(xs), nmax, rmin, 0.1, nstep, False)
    ls, d = _super_scale(scale.reshape(n, 8), 63)
    lm, dmin = _super_scale(neg_min.reshape(n, 8), 63)
    df = d.copy().view(np.float16).astype(F32)
    mf = dmin.copy().view(np.float16).astype(F32)
    levels = _requantize(x.reshape(n, 8, 32), df * ls, mf * lm, 0, nmax, L.reshape(n, 8, 32))
    return d, dmin, _pack_scales_k4(ls, lm), levels


def _low_nibbles_k(levels: np.ndarray) -> np.ndarray:
    """(n, 8, 32) levels -> (n, 128): byte 32c + l = L[64c + l] | L[64c + 32 + l] << 4."""
    n = levels.shape[0]
    pairs = levels.reshape(n, 4, 2, 32) & 0x0F
    return (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(n, 128)


def _levels_k4(raw: np.ndarray, q: np.ndarray) -> Levels:
    sc, mn = _unpack_scales_k4(raw[:, 4:16])
    return q.reshape(raw.shape[0], 8, 32), f16_field(raw, 0) * sc, -(f16_field(raw, 2) * mn)


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    d, dmin, scales, levels = _quantize_k4(x, 15, -1.0, 20)
    return np.concatenate([d, dmin, scales, _low_nibbles_k(levels)], axis=1)


def levels_q4_k(raw: np.ndarray) -> Levels:
    return _levels_k4(raw, split_nibbles(raw[:, 16:144].reshape(-1, 32)))


def quantize_q5_k(x: np.ndarray) -> np.ndarray:
    n = x.shape[0]
    d, dmin, scales, levels = _quantize_k4(x, 31, -0.5, 15)
    qh = np.packbits((levels >> 4).reshape(n, 8, 32), axis=1, bitorder="little").reshape(n, 32)
    return np.concatenate([d, dmin, scales, qh, _low_nibbles_k(levels)], axis=1)


def levels_q5_k(raw: np.ndarray) -> Levels:
    n = raw.shape[0]
    q = split_nibbles(raw[:, 48:176].reshape(-1, 32)).reshape(n, 8, 32)
    q |= np.unpackbits(raw[:, None, 16:48], axis=1, count=8, bitorder="little") << 4
    return _levels_k4(raw, q)


# ---------------------------------------------------------------- Q6_K
def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    n = x.shape[0]
    scales, L = make_qx_quants(x.reshape(n * 16, 16), 32)
    scales = scales.reshape(n, 16)
    mx = signed_absmax(scales)[:, 0]
    live = np.abs(mx) >= GROUP_MAX_EPS
    iscale = F32(-128) / np.where(live, mx, F32(1))
    d = f16_bytes(np.where(live, F32(1) / iscale, F32(0)))
    sc = np.minimum(nearest_int(iscale[:, None] * scales), 127).astype(np.int8)
    sc[~live] = 0
    df = d.copy().view(np.float16).astype(F32)
    levels = _requantize(x.reshape(n, 16, 16), df * sc, None, -32, 31, L.reshape(n, 16, 16))
    levels = np.where(live[:, None, None], levels, np.uint8(0))
    q = levels.reshape(n, 2, 4, 32)  # [half, r, l]
    lo = q & 0x0F
    ql = (lo[:, :, 0:2] | (lo[:, :, 2:4] << 4)).reshape(n, 128)
    hi = q >> 4
    qh = (hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)).reshape(n, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), d], axis=1)


def levels_q6_k(raw: np.ndarray) -> Levels:
    n = raw.shape[0]
    q = np.empty((n, 2, 4, 32), np.uint8)
    ql = raw[:, :128].reshape(n, 2, 2, 32)
    np.bitwise_and(ql, 0x0F, out=q[:, :, 0:2])
    np.right_shift(ql, 4, out=q[:, :, 2:4])
    qh = raw[:, 128:192].reshape(n, 2, 1, 32)
    shifts = np.array([0, 2, 4, 6], np.uint8)[None, None, :, None]
    q |= ((qh >> shifts) & 3) << 4
    qi = q.view(np.int8)
    qi -= 32
    return qi.reshape(n, 16, 16), f16_field(raw, 208) * raw[:, 192:208].view(np.int8), None


# ---------------------------------------------------------------- Q8_K
def quantize_q8_k(x: np.ndarray) -> np.ndarray:
    """d = absmax_signed / -127 (f32), q = min(127, round(x / d)), bsums per 16."""
    n = x.shape[0]
    mx = signed_absmax(x)
    live = mx != 0
    iscale = F32(-127) / np.where(live, mx, F32(1))
    q = np.minimum(nearest_int(iscale * x), 127).astype(np.int8)
    q[~live[:, 0]] = 0
    bsums = q.reshape(n, 16, 16).sum(axis=2, dtype=np.int16).astype("<i2")
    d = np.where(live, F32(1) / iscale, F32(0)).astype("<f4")
    return np.concatenate([d.view(np.uint8), q.view(np.uint8), bsums.view(np.uint8)], axis=1)


def levels_q8_k(raw: np.ndarray) -> Levels:
    return raw[:, None, 4:260].view(np.int8), f32_field(raw, 0), None
