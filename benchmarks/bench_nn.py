"""Neural-network kernels: conv2d 3×3, softmax and layer_norm over the last dim."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

import workbench as wb

from ._harness import Skip, Workload


def _need(*names: str) -> None:
    missing = [n for n in names if getattr(wb, n, None) is None]
    if missing:
        raise Skip(f"wb.{', wb.'.join(missing)} not available yet")


def _conv_numpy(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Stride 1, padding 1: im2col through a sliding-window view and one BLAS product."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    out = np.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3]))  # (N, H, W, O)
    return out.transpose(0, 3, 1, 2) + b[:, None, None]


def _conv2d():
    _need("conv2d")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64, 160, 160), dtype=np.float32)
    w = (rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05).astype(np.float32)
    b = rng.standard_normal(64, dtype=np.float32)
    a, wa, ba = wb.tensor(x), wb.tensor(w), wb.tensor(b)
    tx, tw, tb = (torch.from_numpy(v.copy()) for v in (x, w, b))
    return {
        "workbench": lambda: wb.conv2d(a, wa, ba, padding=1),
        "numpy": lambda: _conv_numpy(x, w, b),
        "torch": lambda: F.conv2d(tx, tw, tb, padding=1),
    }


def _rows():
    x = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)
    return x, wb.tensor(x), torch.from_numpy(x.copy())


def _softmax_numpy(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    e /= e.sum(-1, keepdims=True)
    return e


def _softmax():
    _need("softmax")
    x, a, tx = _rows()
    return {
        "workbench": lambda: wb.softmax(a, -1),
        "numpy": lambda: _softmax_numpy(x),
        "torch": lambda: torch.softmax(tx, -1),
    }


def _layer_norm_numpy(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    centered = x - mu
    var = np.mean(centered * centered, -1, keepdims=True)
    return centered / np.sqrt(var + 1e-5) * w + b


def _layer_norm():
    _need("layer_norm")
    x, a, tx = _rows()
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal(4096, dtype=np.float32), rng.standard_normal(4096, dtype=np.float32)
    wa, ba, tw, tb = wb.tensor(w), wb.tensor(b), torch.from_numpy(w), torch.from_numpy(b)
    return {
        "workbench": lambda: wb.layer_norm(a, (4096,), wa, ba),
        "numpy": lambda: _layer_norm_numpy(x, w, b),
        "torch": lambda: F.layer_norm(tx, (4096,), tw, tb),
    }


def _rms_norm():
    _need("rms_norm")
    x, a, tx = _rows()
    w = np.random.default_rng(1).standard_normal(4096, dtype=np.float32)
    wa, tw = wb.tensor(w), torch.from_numpy(w)
    return {
        "workbench": lambda: wb.rms_norm(a, wa, 1e-6),
        "numpy": lambda: x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6) * w,
        "torch": lambda: F.rms_norm(tx, (4096,), tw, 1e-6),
    }


def _group_norm():
    _need("group_norm")
    x = np.random.default_rng(0).standard_normal((1, 4096, 64, 64), dtype=np.float32)
    a, tx = wb.tensor(x), torch.from_numpy(x.copy())
    return {
        "workbench": lambda: wb.group_norm(a, 32),
        "numpy": None,
        "torch": lambda: F.group_norm(tx, 32),
    }


WORKLOADS = [
    Workload(
        "conv2d/3x3_64x160x160",
        _conv2d,
        target=1.5,
        tolerance=1e-2,
        note="1x64x160x160 -> 64, pad 1",
    ),
    Workload("softmax/4096x4096", _softmax, target=1.0),
    Workload("layer_norm/4096x4096", _layer_norm, target=1.0),
    Workload("rms_norm/4096x4096", _rms_norm, target=1.0),
    Workload("group_norm/1x4096x64x64_g32", _group_norm, target=1.0, tolerance=1e-2),
]
