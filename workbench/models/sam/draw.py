"""Masks over an image, for the CLI, the gallery and the notebook."""

from __future__ import annotations

import numpy as np


def color(i: int) -> tuple[int, int, int]:
    """A distinct colour per index (golden-ratio hue steps, full saturation)."""
    h = (i * 0.618033988749895) % 1.0
    k = np.array([5.0, 3.0, 1.0]) + h * 6
    rgb = 1 - np.clip(np.minimum(k % 6, 4 - k % 6), 0, 1)
    return tuple(int(v) for v in (rgb * 200 + 55))


def overlay(image: np.ndarray, masks, alpha: float = 0.5) -> np.ndarray:
    """(H, W, 3) uint8 with each (H, W) bool mask blended in its colour, in order."""
    out = np.asarray(image, np.float32).copy()
    for i, m in enumerate(masks):
        m = np.asarray(m, bool)
        out[m] = (1 - alpha) * out[m] + alpha * np.float32(color(i))
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)
