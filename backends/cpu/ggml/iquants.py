"""Non-linear 4-bit types: IQ4_NL (32-element blocks) and IQ4_XS (256-element super-blocks).

Both store 4-bit indices into a fixed, non-uniform codebook (denser near zero, matching the
bell shape of weights): ``x = d * KVALUES[q]``.

- **IQ4_NL** (18 B, 4.5 bpw): ``d:f16``, ``qs[16]``; ``qs[j]`` holds element ``j`` (low
  nibble) and ``j + 16`` (high nibble).
- **IQ4_XS** (136 B, 4.25 bpw): ``d:f16``, ``scales_h:u16``, ``scales_l[4]``, ``qs[128]``.
  Sub-block ``i`` (32 elements) has the six-bit scale ``ls = scales_l[i//2] >> 4*(i%2) & 15
  | (scales_h >> 2*i & 3) << 4`` and ``x = d * (ls - 32) * KVALUES[q]``; its quants are
  ``qs[16i:16i+16]`` in the IQ4_NL nibble order.

Quantization follows ggml's ``quantize_row_iq4_nl_impl`` without an importance matrix:
weights ``w = x**2``, a first scale from the signed absmax, then 15 trial scales
``(k - 127)/max`` for k = -7..7, keeping the least-squares ``d = sum(w q x)/sum(w q^2)`` that
maximises ``sum(w q x)^2/sum(w q^2)``. Each element takes the nearest codebook entry.
"""

from __future__ import annotations

import numpy as np

from ._common import F32, GROUP_MAX_EPS, Levels, f16_bytes, f16_field, nearest_int, signed_absmax

KVALUES = np.array(
    [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int8
)
_KV_F32 = KVALUES.astype(F32)
NTRY = 7


# Twice the midpoints between neighbouring entries are integers, so the nearest entry of v
# (ties going to the upper one, as in ggml's best_index_int8) depends only on floor(2*v):
# a 1024-entry table replaces the binary search (16x faster than np.searchsorted here).
_MID2 = KVALUES[:-1].astype(np.int32) + KVALUES[1:]
_NEAREST = (_MID2[None, :] <= np.arange(-512, 512)[:, None]).sum(axis=1).astype(np.uint8)


def best_index(v: np.ndarray) -> np.ndarray:
    """Index (uint8) of the codebook entry nearest to each ``v``; ties go to the upper entry."""
    t = np.floor(v * F32(2))
    np.clip(t, -512, 511, out=t)
    t += 512
    return _NEAREST[t.astype(np.intp)]


def _search(x: np.ndarray) -> np.ndarray:
    """Signed per-group scale ``d`` (n,) for groups ``x`` (n, 32), zero for all-zero groups."""
    mx = signed_absmax(x)
    zero = np.abs(mx[:, 0]) < GROUP_MAX_EPS
    amax = np.where(zero[:, None], F32(1), np.abs(mx))
    x = x / amax  # scale-invariant search; keeps the float32 sums far from overflow
    mx = np.where(zero[:, None], F32(1), mx / amax)
    w = x * x

    def trial(inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = _KV_F32[best_index(inv * x)]
        wq = w * q
        return np.einsum("ij,ij->i", wq, x), np.einsum("ij,ij->i", wq, q)

    d0 = -mx / _KV_F32[0]
    sumqx, sumq2 = trial(F32(1) / d0)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (sumqx / sumq2).astype(F32)
    best = d * sumqx
    for k in range(-NTRY, NTRY + 1):
        sqx, sq2 = trial((F32(k) + _KV_F32[0]) / mx)
        better = (sq2 > 0) & (sqx * sqx > best * sq2)
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(better, sqx / sq2, d).astype(F32)
        best = np.where(better, d * sqx, best)
    d = np.where(zero | ~np.isfinite(d), F32(0), d * amax[:, 0])
    return d.astype(F32)


def _inverse(d: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(d != 0, F32(1) / d, F32(0)).astype(F32)


def _pack(idx: np.ndarray) -> np.ndarray:
    """Indices (m, 32) -> (m, 16) bytes: element j low nibble, j + 16 high nibble."""
    return idx[:, :16] | (idx[:, 16:] << 4)


def _codes(qs: np.ndarray) -> np.ndarray:
    """(m, 16) bytes -> (m, 32) int8 codebook values."""
    idx = np.empty((qs.shape[0], 2, 16), np.uint8)
    np.bitwise_and(qs, 0x0F, out=idx[:, 0])
    np.right_shift(qs, 4, out=idx[:, 1])
    return KVALUES[idx.reshape(qs.shape[0], 32)]


# ---------------------------------------------------------------- IQ4_NL
def quantize_iq4_nl(x: np.ndarray) -> np.ndarray:
    d = _search(x)
    idx = best_index(_inverse(d)[:, None] * x)
    return np.concatenate([f16_bytes(d), _pack(idx)], axis=1)


def levels_iq4_nl(raw: np.ndarray) -> Levels:
    return _codes(raw[:, 2:])[:, None, :], f16_field(raw, 0), None


# ---------------------------------------------------------------- IQ4_XS
def quantize_iq4_xs(x: np.ndarray) -> np.ndarray:
    n = x.shape[0]
    xs = x.reshape(n * 8, 32)
    scales = _search(xs).reshape(n, 8)
    d = -signed_absmax(scales)[:, 0] / F32(32)
    ls = np.clip(nearest_int(_inverse(d)[:, None] * scales), -32, 31)
    dl = (d[:, None] * ls).astype(F32)
    idx = best_index(_inverse(dl).reshape(n * 8, 1) * xs)
    ls = (ls + 32).astype(np.uint16)
    scales_l = (ls[:, 0::2] & 0x0F) | ((ls[:, 1::2] & 0x0F) << 4)
    scales_h = ((ls >> 4) << (2 * np.arange(8, dtype=np.uint16))).sum(axis=1, dtype=np.uint16)
    return np.concatenate(
        [
            f16_bytes(d),
            scales_h.astype("<u2").view(np.uint8).reshape(n, 2),
            scales_l.astype(np.uint8),
            _pack(idx).reshape(n, 128),
        ],
        axis=1,
    )


def levels_iq4_xs(raw: np.ndarray) -> Levels:
    n = raw.shape[0]
    sh = (np.ascontiguousarray(raw[:, 2:4]).view("<u2") >> (2 * np.arange(8, dtype=np.uint16))) & 3
    sl = np.empty((n, 4, 2), np.uint8)
    np.bitwise_and(raw[:, 4:8], 0x0F, out=sl[:, :, 0])
    np.right_shift(raw[:, 4:8], 4, out=sl[:, :, 1])
    ls = (sl.reshape(n, 8) | (sh.astype(np.uint8) << 4)).view(np.int8) - np.int8(32)
    q = _codes(raw[:, 8:].reshape(n * 8, 16)).reshape(n, 8, 32)
    return q, f16_field(raw, 0) * ls, None
