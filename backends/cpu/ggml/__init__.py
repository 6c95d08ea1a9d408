"""ggml block codecs in vectorised numpy: quantize float32 to ggml's block types and back.

``quantize(x, "Q4_K")`` takes any float32 array whose size is a multiple of the block size
and returns ``(n_blocks, type_size)`` uint8 in ggml's exact byte layout; ``dequantize(raw,
"Q4_K")`` returns the float32 values, flat. Work runs in chunks of blocks so temporaries stay
cache-sized; no Python loop runs over individual blocks. Layouts are documented in
``legacy`` (Q4_0..Q8_1), ``kquants`` (Q2_K..Q8_K), ``iquants`` (IQ4_NL, IQ4_XS) and
``floats`` (F32, F16, BF16). Every block type decodes as ``scale * q + offset`` per group of
integer levels; ``levels(raw, name)`` returns those parts (QMatMul multiplies with them
directly for single-vector inputs).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import floats, iquants, kquants, legacy
from ._common import Levels, affine
from .table import BY_ID, BY_NAME, SUPPORTED, TYPES, GgmlTypeInfo

__all__ = [
    "BY_ID",
    "BY_NAME",
    "SUPPORTED",
    "TYPES",
    "GgmlTypeInfo",
    "Levels",
    "dequantize",
    "levels",
    "quantize",
    "row_bytes",
]

_Quantizer = Callable[[np.ndarray], np.ndarray]
_Dequantizer = Callable[..., np.ndarray]

_MODULES = {
    "F32": floats, "F16": floats, "BF16": floats,
    "Q4_0": legacy, "Q4_1": legacy, "Q5_0": legacy, "Q5_1": legacy, "Q8_0": legacy,
    "Q8_1": legacy,
    "Q2_K": kquants, "Q3_K": kquants, "Q4_K": kquants, "Q5_K": kquants, "Q6_K": kquants,
    "Q8_K": kquants,
    "IQ4_NL": iquants, "IQ4_XS": iquants,
}  # fmt: skip
_FLOATS = ("F32", "F16", "BF16")


def _decoder(name: str, mod) -> _Dequantizer:
    if name in _FLOATS:
        return getattr(mod, f"dequantize_{name.lower()}")
    levels_fn = getattr(mod, f"levels_{name.lower()}")
    return lambda raw, out=None: affine(levels_fn(raw), out)


_CODECS: dict[str, tuple[_Quantizer, _Dequantizer]] = {
    name: (getattr(mod, f"quantize_{name.lower()}"), _decoder(name, mod))
    for name, mod in _MODULES.items()
}
_LEVELS: dict[str, Callable[[np.ndarray], Levels]] = {
    name: getattr(mod, f"levels_{name.lower()}")
    for name, mod in _MODULES.items()
    if name not in _FLOATS
}
assert set(_CODECS) == set(SUPPORTED)

# Elements per chunk: small enough for the temporaries to stay in L2, big enough to
# amortise numpy's per-call overhead (measured on the dev machine).
_DEQUANT_CHUNK = 1 << 16
_QUANT_CHUNK = 1 << 18


def _info(type_name: str) -> GgmlTypeInfo:
    info = BY_NAME.get(type_name)
    if info is None or not info.supported:
        raise ValueError(f"ggml type {type_name!r} has no codec; supported: {', '.join(SUPPORTED)}")
    return info


def row_bytes(type_name: str, n: int) -> int:
    """Bytes taken by ``n`` consecutive elements (``n`` must be a multiple of the block)."""
    info = BY_NAME[type_name]
    if n % info.block_size:
        raise ValueError(
            f"{n} elements is not a multiple of {type_name}'s block size {info.block_size}"
        )
    return n // info.block_size * info.type_size


def quantize(x: np.ndarray, type_name: str) -> np.ndarray:
    """float values (any shape, size a multiple of the block) -> ``(n_blocks, type_size)`` uint8."""
    info = _info(type_name)
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if x.size % info.block_size:
        raise ValueError(
            f"{x.size} elements is not a multiple of {type_name}'s block size {info.block_size}"
        )
    blocks = x.reshape(-1, info.block_size)
    fn = _CODECS[type_name][0]
    if info.block_size == 1:
        return fn(blocks)
    out = np.empty((blocks.shape[0], info.type_size), np.uint8)
    step = max(1, _QUANT_CHUNK // info.block_size)
    for start in range(0, blocks.shape[0], step):
        out[start : start + step] = fn(blocks[start : start + step])
    return out


def dequantize(raw: np.ndarray, type_name: str, out: np.ndarray | None = None) -> np.ndarray:
    """Raw blocks (any shape, viewed as bytes) -> float32 values, flat.

    ``out``, when given, must be a C-contiguous float32 array with one slot per element.
    """
    info = _info(type_name)
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    if raw.size % info.type_size:
        raise ValueError(
            f"{raw.size} bytes is not a whole number of {type_name} blocks ({info.type_size} B)"
        )
    blocks = raw.reshape(-1, info.type_size)
    n = blocks.shape[0]
    if out is None:
        out = np.empty(n * info.block_size, np.float32)
    elif out.dtype != np.float32 or out.size != n * info.block_size or not out.flags.c_contiguous:
        raise ValueError(
            f"out must be a contiguous float32 array of {n * info.block_size} elements"
        )
    dst = out.reshape(n, info.block_size)
    fn = _CODECS[type_name][1]
    step = max(1, n if info.block_size == 1 else _DEQUANT_CHUNK // info.block_size)
    for start in range(0, n, step):
        fn(blocks[start : start + step], out=dst[start : start + step])
    return out.reshape(-1)


def levels(raw: np.ndarray, type_name: str) -> Levels | None:
    """Raw blocks ``(n_blocks, type_size)`` -> ``(q, scale, offset)`` with
    ``x = scale[..., None] * q + offset[..., None]``; q is ``(n_blocks, groups, group_size)``
    int8/uint8. ``None`` for the float types, which have no integer levels.
    """
    info = _info(type_name)
    fn = _LEVELS.get(type_name)
    return None if fn is None else fn(np.asarray(raw).view(np.uint8).reshape(-1, info.type_size))
