"""Neural-network kernels: conv2d 3×3 (dense, and depthwise with its backward), softmax and
the norms, rotary embeddings and scaled dot-product attention (forward)."""

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


def _depthwise_numpy(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Stride 1, padding 1: the sum of the 9 shifted planes, each scaled by its channel's tap."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, wd = x.shape[2:]
    out = np.zeros_like(x)
    for i in range(3):
        for j in range(3):
            out += xp[:, :, i : i + h, j : j + wd] * w[:, 0, i, j][:, None, None]
    return out


def _depthwise(backward: bool):
    def make():
        _need("conv2d")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((8, 64, 56, 56), dtype=np.float32)
        w = rng.standard_normal((64, 1, 3, 3), dtype=np.float32)
        a, wa = wb.tensor(x), wb.Var(wb.tensor(w)) if backward else wb.tensor(w)
        tx, tw = torch.from_numpy(x.copy()), torch.from_numpy(w.copy()).requires_grad_(backward)
        if not backward:
            return {
                "workbench": lambda: wb.conv2d(a, wa, padding=1, groups=64),
                "numpy": lambda: _depthwise_numpy(x, w),
                "torch": lambda: F.conv2d(tx, tw, padding=1, groups=64),
            }
        ax, tx = wb.Var(a), tx.requires_grad_()

        def wb_step():
            ax.grad = wa.grad = None  # as torch_step does: no adding to last step's gradients
            return wb.conv2d(ax, wa, padding=1, groups=64).sum().backward()[wa]

        def torch_step():
            tx.grad = tw.grad = None
            F.conv2d(tx, tw, padding=1, groups=64).sum().backward()
            return tw.grad

        return {"workbench": wb_step, "torch": torch_step}

    return make


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


def _group_norm(shape: tuple[int, ...]):
    def make():
        _need("group_norm")
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape, dtype=np.float32)
        w, b = rng.standard_normal((2, shape[1]), dtype=np.float32)
        a, wa, ba = wb.tensor(x), wb.tensor(w), wb.tensor(b)
        tx, tw, tb = (torch.from_numpy(v.copy()) for v in (x, w, b))
        return {
            "workbench": lambda: wb.group_norm(a, 32, wa, ba),
            "numpy": None,
            "torch": lambda: F.group_norm(tx, 32, tw, tb),
        }

    return make


def _rope_torch(x, cos, sin):
    """Half-split (GPT-NeoX / Llama) rotation from torch ops, as transformers writes it."""
    h = x.shape[-1] // 2
    rotated = torch.cat((-x[..., h:], x[..., :h]), -1)
    return x * torch.cat((cos, cos), -1) + rotated * torch.cat((sin, sin), -1)


def _rope():
    _need("rope")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 32, 2048, 128), dtype=np.float32)
    theta = rng.uniform(-np.pi, np.pi, (2048, 64)).astype(np.float32)
    cos, sin = np.cos(theta), np.sin(theta)
    a, ca, sa = wb.tensor(x), wb.tensor(cos), wb.tensor(sin)
    tx, tc, ts = (torch.from_numpy(v.copy()) for v in (x, cos, sin))
    return {
        "workbench": lambda: wb.rope(a, ca, sa),
        "numpy": None,
        "torch": lambda: _rope_torch(tx, tc, ts),
    }


def _attention(shape: tuple[int, ...], causal: bool, masked: bool):
    """q, k, v of ``shape`` (B, H, L, E); a random boolean (L, L) mask when ``masked``."""

    def make():
        _need("scaled_dot_product_attention")
        rng = np.random.default_rng(0)
        q, k, v = rng.standard_normal((3, *shape), dtype=np.float32)
        mask = rng.uniform(size=(shape[-2], shape[-2])) > 0.2
        a = [wb.tensor(t) for t in (q, k, v)]
        t = [torch.from_numpy(x.copy()) for x in (q, k, v)]
        am, tm = (wb.tensor(mask), torch.from_numpy(mask)) if masked else (None, None)
        return {
            "workbench": lambda: wb.scaled_dot_product_attention(*a, am, is_causal=causal),
            "numpy": None,
            "torch": lambda: F.scaled_dot_product_attention(*t, tm, is_causal=causal),
        }

    return make


WORKLOADS = [
    Workload(
        "conv2d/3x3_64x160x160",
        _conv2d,
        target=1.5,
        tolerance=1e-2,
        note="1x64x160x160 -> 64, pad 1",
    ),
    Workload(
        "conv2d/depthwise3x3_8x64x56x56",
        _depthwise(False),
        target=1.0,
        tolerance=1e-3,
        note="groups 64, pad 1 (MobileNet / TinyViT blocks)",
    ),
    Workload(
        "conv2d/depthwise3x3_8x64x56x56_grad",
        _depthwise(True),
        target=1.0,
        tolerance=1e-2,
        note="forward and backward: dx and dw",
    ),
    Workload("softmax/4096x4096", _softmax, target=1.0),
    Workload("layer_norm/4096x4096", _layer_norm, target=1.0),
    Workload("rms_norm/4096x4096", _rms_norm, target=1.0),
    Workload(
        "group_norm/1x4096x64x64_g32", _group_norm((1, 4096, 64, 64)), target=1.0, tolerance=1e-2
    ),  # fmt: skip
    # SDXL's UNet at 1024 px: 320 channels at 128², 640 at 64², 1280 at 32²
    Workload(
        "group_norm/1x320x128x128_g32", _group_norm((1, 320, 128, 128)), target=1.0, tolerance=1e-2
    ),  # fmt: skip
    Workload(
        "group_norm/1x640x64x64_g32", _group_norm((1, 640, 64, 64)), target=1.0, tolerance=1e-2
    ),  # fmt: skip
    Workload(
        "group_norm/1x1280x32x32_g32", _group_norm((1, 1280, 32, 32)), target=1.0, tolerance=1e-2
    ),  # fmt: skip
    Workload("rope/1x32x2048x128", _rope, target=1.0, note="half-split, (T, D/2) tables"),
    Workload(
        "sdpa/1x8x4096x64_causal",
        _attention((1, 8, 4096, 64), True, False),
        target=1.0,
        tolerance=1e-3,
    ),  # fmt: skip
    Workload(
        "sdpa/2x10x1024x64_mask",
        _attention((2, 10, 1024, 64), False, True),
        target=1.0,
        tolerance=1e-3,
        note="boolean (L, S) mask",
    ),  # fmt: skip
]
