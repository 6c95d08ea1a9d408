"""The float "block" types: F32, F16, BF16 (block size 1).

BF16 is the top half of an f32; rounding is to nearest even, and NaNs stay NaN (quiet bit
forced) as in ggml's ``ggml_compute_fp32_to_bf16``.
"""

from __future__ import annotations

import numpy as np

from ._common import F32


def quantize_f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype="<f4").view(np.uint8).reshape(-1, 4)


def dequantize_f32(raw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    v = np.ascontiguousarray(raw).view("<f4").reshape(-1, 1)
    if out is None:
        return v.astype(F32)
    out[...] = v
    return out


def quantize_f16(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=F32).astype("<f2").view(np.uint8).reshape(-1, 2)


def dequantize_f16(raw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    v = np.ascontiguousarray(raw).view("<f2").reshape(-1, 1)
    if out is None:
        return v.astype(F32)
    out[...] = v
    return out


def quantize_bf16(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=F32).view(np.uint32).reshape(-1)
    is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    # Wrap-around for NaN inputs is harmless: np.where discards those lanes.
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1)))) >> 16
    quiet = ((bits & np.uint32(0xFFFF0000)) | np.uint32(0x00400000)) >> 16
    return np.where(is_nan, quiet, rounded).astype("<u2").view(np.uint8).reshape(-1, 2)


def dequantize_bf16(raw: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    hi = np.ascontiguousarray(raw).view("<u2").reshape(-1, 1).astype(np.uint32) << 16
    if out is None:
        return hi.view(F32)
    out[...] = hi.view(F32)
    return out
