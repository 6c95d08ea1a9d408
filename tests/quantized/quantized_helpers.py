"""Shared test data for the quantized tests: random raw blocks with valid scale fields."""

from __future__ import annotations

import numpy as np

from workbench.backends.cpu import ggml

# Byte offsets of each type's f16 scale fields (everything else in a block is free bits).
F16_FIELDS = {
    "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q8_1": (0, 2),
    "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
    "IQ4_NL": (0,), "IQ4_XS": (0,),
}  # fmt: skip


def random_blocks(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` blocks of type ``name``: random bits, finite scales (f16 fields and Q8_K's f32 d)."""
    info = ggml.BY_NAME[name]
    if name == "F32":
        return rng.standard_normal(n).astype("<f4").view(np.uint8).reshape(n, 4)
    if name == "F16":
        return (rng.standard_normal(n) * 10).astype("<f2").view(np.uint8).reshape(n, 2)
    if name == "BF16":
        top = rng.standard_normal(n).astype("<f4").view("<u2")[1::2].copy()
        return top.view(np.uint8).reshape(n, 2)
    raw = rng.integers(0, 256, (n, info.type_size), dtype=np.uint8)
    for start in F16_FIELDS.get(name, ()):
        scale = (rng.standard_normal(n) * 0.05).astype("<f2")
        raw[:, start : start + 2] = scale.view(np.uint8).reshape(n, 2)
    if name == "Q8_K":
        raw[:, 0:4] = (rng.standard_normal(n) * 0.01).astype("<f4").view(np.uint8).reshape(n, 4)
    return raw
