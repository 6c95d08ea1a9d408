"""Resizing one spatial dim at a time, for the ``interpolate`` modes without a kernel of their
own: "nearest-exact", "area", "bicubic" and "trilinear" (and "linear"/"bilinear" of any rank).

Each mode is, along each dim, a linear map from the input's n samples to the output's m: an
(m, n) matrix built on the host from the sizes alone (the maths of PyTorch's kernels), applied
with a matmul. The gradient is the transposed map (the matmul's), and every device runs it.
"nearest-exact" picks samples with ``index_select`` instead (exact for every dtype).
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor

_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) bicubic convolution parameter


def _ratio(n: int, m: int, scale: float | None, align_corners: bool) -> float:
    """Input units per output step: (n - 1)/(m - 1) with ``align_corners``, else n/m (or
    1/scale_factor when one was given, as PyTorch)."""
    if align_corners:
        return (n - 1) / (m - 1) if m > 1 else 0.0
    return 1.0 / scale if scale else n / m


def _sources(n: int, m: int, scale: float | None, align_corners: bool) -> np.ndarray:
    """The (fractional) input position each output sample sits on."""
    i = np.arange(m, dtype=np.float64)
    r = _ratio(n, m, scale, align_corners)
    return i * r if align_corners else (i + 0.5) * r - 0.5


def nearest_exact_indices(n: int, m: int, scale: float | None) -> np.ndarray:
    """Output i takes input min(⌊(i + ½)·n/m⌋, n - 1)."""
    r = _ratio(n, m, scale, False)
    return np.minimum(np.floor((np.arange(m) + 0.5) * r), n - 1).astype(np.int64)


def _linear(n: int, m: int, scale: float | None, align_corners: bool) -> np.ndarray:
    """Output i mixes inputs ⌊s⌋ and ⌊s⌋ + 1 with weights 1 - λ, λ (s clamped at 0)."""
    s = np.maximum(_sources(n, m, scale, align_corners), 0.0)
    i0 = np.minimum(np.floor(s).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = np.clip(s - i0, 0.0, 1.0)
    w = np.zeros((m, n))
    rows = np.arange(m)
    np.add.at(w, (rows, i0), 1.0 - lam)
    np.add.at(w, (rows, i1), lam)
    return w


def _cubic_weights(t: np.ndarray) -> tuple[np.ndarray, ...]:
    """Keys' cubic convolution weights of the taps at offsets -1, 0, 1, 2 from ⌊s⌋."""
    a = _CUBIC_A

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _bicubic(n: int, m: int, scale: float | None, align_corners: bool) -> np.ndarray:
    """Four taps around s (not clamped, unlike linear), their indices clamped to the edge."""
    s = _sources(n, m, scale, align_corners)
    i0 = np.floor(s).astype(np.int64)
    w = np.zeros((m, n))
    rows = np.arange(m)
    for offset, weight in zip((-1, 0, 1, 2), _cubic_weights(s - i0), strict=True):
        np.add.at(w, (rows, np.clip(i0 + offset, 0, n - 1)), weight)
    return w


def _area(n: int, m: int, scale: float | None, align_corners: bool) -> np.ndarray:
    """Output i is the mean of inputs [⌊i·n/m⌋, ⌈(i+1)·n/m⌉) (adaptive average pooling)."""
    w = np.zeros((m, n))
    for i in range(m):
        start, end = (i * n) // m, -((-(i + 1) * n) // m)
        w[i, start:end] = 1.0 / (end - start)
    return w


_MATRICES = {"linear": _linear, "bicubic": _bicubic, "area": _area}


def resize(x: Tensor, out_size: tuple[int, ...], scales: tuple, mode: str,
           align_corners: bool) -> Tensor:  # fmt: skip
    """x (N, C, *spatial) resized to (N, C, *out_size), one spatial dim after the other."""
    from .creation import tensor

    for k, (m, scale) in enumerate(zip(out_size, scales, strict=True)):
        d = 2 + k
        n = x.shape[d]
        if mode == "nearest-exact":
            index = tensor(nearest_exact_indices(n, m, scale), device=x.device)
            x = x.index_select(d, index)
            continue
        if n == m and (not scale or scale == 1):
            continue  # every mode maps a dim onto itself as the identity
        w = _MATRICES[mode](n, m, scale, align_corners)
        weights = tensor(np.ascontiguousarray(w.T), dtype=x.dtype, device=x.device)  # (n, m)
        x = (x.movedim(d, -1) @ weights).movedim(-1, d)
    return x
