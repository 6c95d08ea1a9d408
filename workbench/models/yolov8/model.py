"""YOLOv8 (Ultralytics, 2023): a CSP-Darknet backbone with C2f blocks and SPPF, a PAN neck
(upsample + concat top-down, strided conv + concat bottom-up) and a decoupled, anchor-free head
whose box branch predicts a distribution over 16 distances per side (DFL).

Shapes for an input ``x`` (B, 3, H, W), H and W multiples of 32: the backbone gives P3, P4, P5
at strides 8, 16, 32; the head returns, over the A = HW/64 + HW/256 + HW/1024 anchors,

- raw: boxes (B, 4·16, A), scores (B, nc, A) (logits), keypoints (B, K·3, A) for pose;
- decoded (``forward``): (B, 4 + nc [+ K·3], A) = box centre x, y and width, height in input
  pixels, class probabilities (sigmoid), keypoints (x, y, visibility) in input pixels.

Every Conv is conv + BatchNorm + SiLU; the BatchNorm is folded into the convolution when the
weights are loaded: ``w' = w·γ/√(σ²+ε)``, ``b' = β - μ·γ/√(σ²+ε)`` (ε = 1e-3).

Weight names follow candle's ``lmz/candle-yolo-v8`` files (``net.b1.0.conv.weight``,
``fpn.n1.cv1.bn.running_mean``, ``head.cv2.0.2.bias``, ...); ``convert.py`` maps Ultralytics'
state-dict names onto them. A folded checkpoint (``model.state_dict()``: ``conv.weight`` and
``conv.bias``, no ``bn``) loads as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import nn
from ...ops import conv, creation, elementwise, fused, pool, reduce, shape
from ...tensor import Tensor

BN_EPS = 1e-3
REG_MAX = 16
STRIDES = (8, 16, 32)
# depth, width, max channels: Ultralytics' yolov8.yaml scales.
SCALES = {
    "n": (0.33, 0.25, 1024),
    "s": (0.33, 0.50, 1024),
    "m": (0.67, 0.75, 768),
    "l": (1.00, 1.00, 512),
    "x": (1.00, 1.25, 512),
}


@dataclass(frozen=True)
class YoloConfig:
    """Size of a YOLOv8: depth/width multiples, channel cap, classes, keypoints (pose)."""

    depth: float = 0.33
    width: float = 0.25
    max_channels: int = 1024
    num_classes: int = 80
    kpt_shape: tuple[int, int] | None = None  # (17, 3) for COCO pose

    @classmethod
    def variant(cls, which: str, pose: bool = False, num_classes: int | None = None):
        """``which`` in n, s, m, l, x; pose models have one class (person) and 17 keypoints."""
        if which not in SCALES:
            raise ValueError(f"YOLOv8 size must be one of {', '.join(SCALES)}, found {which!r}")
        d, w, mc = SCALES[which]
        nc = num_classes if num_classes is not None else (1 if pose else 80)
        return cls(d, w, mc, nc, (17, 3) if pose else None)

    def ch(self, c: int) -> int:
        """Channels of a layer with ``c`` at width 1: ``⌈min(c, max)·width / 8⌉·8``."""
        return int(math.ceil(min(c, self.max_channels) * self.width / 8) * 8)

    def n(self, repeats: int) -> int:
        return max(round(repeats * self.depth), 1)


def _numpy(t: Tensor) -> np.ndarray:
    return t.numpy().astype(np.float64)


class ConvBlock(nn.Module):
    """Conv(k, s, pad k//2) + BatchNorm (folded) + SiLU: (B, c1, H, W) -> (B, c2, H/s, W/s)."""

    def __init__(self, vb: nn.VarBuilder, c1: int, c2: int, k: int = 1, s: int = 1):
        super().__init__()
        weight = vb.get((c2, c1, k, k), "conv.weight")
        dtype = vb.dtype or weight.dtype  # the stored dtype unless the builder sets one
        if vb.contains("conv.bias"):  # already folded
            tensors = {"weight": weight, "bias": vb.get((c2,), "conv.bias")}
        else:
            w = _numpy(weight)
            bn = vb.pp("bn")
            gamma, beta = _numpy(bn.get(c2, "weight")), _numpy(bn.get(c2, "bias"))
            mean, var = _numpy(bn.get(c2, "running_mean")), _numpy(bn.get(c2, "running_var"))
            scale = gamma / np.sqrt(var + BN_EPS)
            tensors = {
                "weight": (w * scale[:, None, None, None]).astype(np.float32),
                "bias": (beta - mean * scale).astype(np.float32),
            }
        folded = nn.VarBuilder.from_dict(tensors, dtype, vb.device)
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, vb=folded)

    def forward(self, x: Tensor) -> Tensor:
        c = self.conv  # the SiLU applied as the convolution stores its outputs
        return conv.conv2d(x, c.weight, c.bias, c.stride, c.padding, activation="silu")


class Bottleneck(nn.Module):
    """Two 3×3 ConvBlocks, plus the input when ``shortcut``."""

    def __init__(self, vb, c: int, shortcut: bool):
        super().__init__()
        self.cv1 = ConvBlock(vb.pp("cv1"), c, c, 3)
        self.cv2 = ConvBlock(vb.pp("cv2"), c, c, 3)
        self.shortcut = shortcut

    def forward(self, x: Tensor) -> Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.shortcut else y


class C2f(nn.Module):
    """CSP block with two convolutions: split cv1's output in halves (a, b), run n bottlenecks
    in a chain from b, concat [a, b, y1, ..., yn] ((2 + n)·c channels) and project with cv2."""

    def __init__(self, vb, c1: int, c2: int, n: int, shortcut: bool):
        super().__init__()
        self.c = c = c2 // 2
        self.cv1 = ConvBlock(vb.pp("cv1"), c1, 2 * c)
        self.cv2 = ConvBlock(vb.pp("cv2"), (2 + n) * c, c2)
        m = vb.pp("bottleneck")
        self.bottleneck = nn.ModuleList([Bottleneck(m.pp(i), c, shortcut) for i in range(n)])

    def forward(self, x: Tensor) -> Tensor:
        ys = list(shape.split(self.cv1(x), self.c, 1))
        for m in self.bottleneck:
            ys.append(m(ys[-1]))
        return self.cv2(shape.cat(ys, 1))


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast: three chained 5×5 stride-1 max pools (receptive fields
    5, 9, 13) concatenated with their input: c1 -> c1/2 -> 4·c1/2 -> c2."""

    def __init__(self, vb, c1: int, c2: int, k: int = 5):
        super().__init__()
        self.k = k
        self.cv1 = ConvBlock(vb.pp("cv1"), c1, c1 // 2)
        self.cv2 = ConvBlock(vb.pp("cv2"), c1 // 2 * 4, c2)

    def forward(self, x: Tensor) -> Tensor:
        ys = [self.cv1(x)]
        for _ in range(3):
            ys.append(pool.max_pool2d(ys[-1], self.k, 1, self.k // 2))
        return self.cv2(shape.cat(ys, 1))


class DarkNet(nn.Module):
    """Backbone: stem (two stride-2 convs), then three stages of [stride-2 conv, C2f], SPPF.
    Returns P3 (stride 8), P4 (16), P5 (32)."""

    def __init__(self, vb, cfg: YoloConfig):
        super().__init__()
        c, n = cfg.ch, cfg.n
        self.b1 = nn.Sequential(
            ConvBlock(vb.pp("b1.0"), 3, c(64), 3, 2), ConvBlock(vb.pp("b1.1"), c(64), c(128), 3, 2)
        )
        self.b2 = nn.Sequential(
            C2f(vb.pp("b2.0"), c(128), c(128), n(3), True),
            ConvBlock(vb.pp("b2.1"), c(128), c(256), 3, 2),
            C2f(vb.pp("b2.2"), c(256), c(256), n(6), True),
        )
        self.b3 = nn.Sequential(
            ConvBlock(vb.pp("b3.0"), c(256), c(512), 3, 2),
            C2f(vb.pp("b3.1"), c(512), c(512), n(6), True),
        )
        self.b4 = nn.Sequential(
            ConvBlock(vb.pp("b4.0"), c(512), c(1024), 3, 2),
            C2f(vb.pp("b4.1"), c(1024), c(1024), n(3), True),
        )
        self.b5 = nn.Sequential(SPPF(vb.pp("b5.0"), c(1024), c(1024)))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        p3 = self.b2(self.b1(x))
        p4 = self.b3(p3)
        return p3, p4, self.b5(self.b4(p4))


def _up(x: Tensor) -> Tensor:
    return pool.upsample_nearest2d(x, scale_factor=2)


class Neck(nn.Module):
    """PAN: top-down (upsample ×2, concat, C2f) to stride 8, then bottom-up (stride-2 conv,
    concat, C2f) back to 32. C2f here has no shortcut."""

    def __init__(self, vb, cfg: YoloConfig):
        super().__init__()
        c, n = cfg.ch, cfg.n(3)
        self.n1 = C2f(vb.pp("n1"), c(1024) + c(512), c(512), n, False)
        self.n2 = C2f(vb.pp("n2"), c(512) + c(256), c(256), n, False)
        self.n3 = ConvBlock(vb.pp("n3"), c(256), c(256), 3, 2)
        self.n4 = C2f(vb.pp("n4"), c(256) + c(512), c(512), n, False)
        self.n5 = ConvBlock(vb.pp("n5"), c(512), c(512), 3, 2)
        self.n6 = C2f(vb.pp("n6"), c(512) + c(1024), c(1024), n, False)

    def forward(self, p3: Tensor, p4: Tensor, p5: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x = self.n1(shape.cat([_up(p5), p4], 1))
        h1 = self.n2(shape.cat([_up(x), p3], 1))
        h2 = self.n4(shape.cat([self.n3(h1), x], 1))
        h3 = self.n6(shape.cat([self.n5(h2), p5], 1))
        return h1, h2, h3


def _branch(vb, c_in: int, c_mid: int, c_out: int) -> nn.Sequential:
    """Two 3×3 ConvBlocks and a 1×1 conv with bias (names 0, 1, 2)."""
    return nn.Sequential(
        ConvBlock(vb.pp(0), c_in, c_mid, 3),
        ConvBlock(vb.pp(1), c_mid, c_mid, 3),
        nn.Conv2d(c_mid, c_out, 1, vb=vb.pp(2)),
    )


def anchors_for(sizes: list[tuple[int, int]], strides=STRIDES) -> tuple[np.ndarray, np.ndarray]:
    """Anchor centres (2, A) in grid units (cell centre: +0.5) and their strides (1, A)."""
    points, steps = [], []
    for (h, w), s in zip(sizes, strides, strict=True):
        sy, sx = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        points.append(np.stack([sx.ravel(), sy.ravel()]))
        steps.append(np.full(h * w, s))
    return (
        np.concatenate(points, 1).astype(np.float32),
        np.concatenate(steps)[None].astype(np.float32),
    )


class DetectHead(nn.Module):
    """Decoupled head per level: cv2 regresses 4×16 distance bins, cv3 the class logits."""

    def __init__(self, vb, cfg: YoloConfig):
        super().__init__()
        chs = (cfg.ch(256), cfg.ch(512), cfg.ch(1024))
        nc = self.nc = cfg.num_classes
        c2, c3 = max(16, chs[0] // 4, REG_MAX * 4), max(chs[0], min(nc, 100))
        self.cv2 = nn.ModuleList(
            [_branch(vb.pp(f"cv2.{i}"), c, c2, 4 * REG_MAX) for i, c in enumerate(chs)]
        )
        self.cv3 = nn.ModuleList([_branch(vb.pp(f"cv3.{i}"), c, c3, nc) for i, c in enumerate(chs)])
        if vb.contains("dfl.conv.weight"):
            bins = vb.get((1, REG_MAX, 1, 1), "dfl.conv.weight").reshape(1, 1, REG_MAX, 1)
        else:
            bins = creation.from_numpy(np.arange(REG_MAX, dtype=np.float32).reshape(1, 1, -1, 1))
        dtype = self.cv2[0][2].weight.dtype  # the head's dtype, whatever the file stored
        self.register_buffer("bins", bins.to(vb.device).to_dtype(dtype), persistent=False)
        self._anchors: dict = {}

    @staticmethod
    def _flat(xs: list[Tensor]) -> Tensor:
        return shape.cat([x.reshape(x.shape[0], x.shape[1], -1) for x in xs], 2)

    def raw(self, feats) -> dict[str, Tensor]:
        """boxes (B, 64, A) and class logits (B, nc, A)."""
        return {
            "boxes": self._flat([m(x) for m, x in zip(self.cv2, feats, strict=True)]),
            "scores": self._flat([m(x) for m, x in zip(self.cv3, feats, strict=True)]),
        }

    def anchors(self, feats) -> tuple[Tensor, Tensor]:
        sizes = tuple(tuple(f.shape[2:]) for f in feats)
        key = (sizes, feats[0].device, feats[0].dtype)
        if key not in self._anchors:
            points, steps = anchors_for(list(sizes))
            dev, dtype = feats[0].device, feats[0].dtype
            self._anchors[key] = tuple(
                creation.from_numpy(a).to(dev).to_dtype(dtype) for a in (points, steps)
            )
        return self._anchors[key]

    def decode(self, raw: dict[str, Tensor], feats) -> Tensor:
        """(B, 4 + nc, A): DFL expectation ``d = Σ_i softmax(logits)_i · i`` per side, then
        box = (anchor - d_lt, anchor + d_rb) · stride as centre x, y, width, height."""
        points, steps = self.anchors(feats)
        b, _, a = raw["boxes"].shape
        prob = fused.softmax(raw["boxes"].reshape(b, 4, REG_MAX, a), 2)
        dist = reduce.sum(prob * self.bins, 2)  # (B, 4, A)
        lt, rb = shape.split(dist, 2, 1)
        x1y1, x2y2 = points - lt, points + rb
        xywh = shape.cat([(x1y1 + x2y2) * 0.5, x2y2 - x1y1], 1) * steps
        return shape.cat([xywh, elementwise.sigmoid(raw["scores"])], 1)


class PoseHead(DetectHead):
    """DetectHead plus cv4: K×3 keypoint values per anchor, decoded as
    ``x = (2·x̂ + anchor - 0.5)·stride``, visibility ``σ(v̂)``."""

    def __init__(self, vb, cfg: YoloConfig):
        super().__init__(vb, cfg)
        self.kpt_shape = cfg.kpt_shape
        nk = cfg.kpt_shape[0] * cfg.kpt_shape[1]
        chs = (cfg.ch(256), cfg.ch(512), cfg.ch(1024))
        c4 = max(chs[0] // 4, nk)
        self.cv4 = nn.ModuleList([_branch(vb.pp(f"cv4.{i}"), c, c4, nk) for i, c in enumerate(chs)])

    def raw(self, feats) -> dict[str, Tensor]:
        out = super().raw(feats)
        out["kpts"] = self._flat([m(x) for m, x in zip(self.cv4, feats, strict=True)])
        return out

    def decode(self, raw: dict[str, Tensor], feats) -> Tensor:
        det = super().decode(raw, feats)
        points, steps = self.anchors(feats)
        k, nd = self.kpt_shape
        b, _, a = raw["kpts"].shape
        kp = raw["kpts"].reshape(b, k, nd, a)
        xy = (kp[:, :, :2] * 2.0 + (points - 0.5)) * steps
        parts = [xy] + ([elementwise.sigmoid(kp[:, :, 2:])] if nd == 3 else [])
        return shape.cat([det, shape.cat(parts, 2).reshape(b, k * nd, a)], 1)


class YoloV8(nn.Module):
    """Backbone, neck and head; ``forward(x)`` gives decoded predictions (see module doc)."""

    def __init__(self, vb: nn.VarBuilder, cfg: YoloConfig):
        super().__init__()
        self.cfg = cfg
        self.net = DarkNet(vb.pp("net"), cfg)
        self.fpn = Neck(vb.pp("fpn"), cfg)
        head = PoseHead if cfg.kpt_shape else DetectHead
        self.head = head(vb.pp("head"), cfg)

    def features(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.fpn(*self.net(x))

    def forward_raw(self, x: Tensor) -> dict[str, Tensor]:
        """The head's raw outputs: boxes (B, 64, A), scores (B, nc, A) [, kpts (B, K·3, A)]."""
        return self.head.raw(self.features(x))

    def forward(self, x: Tensor) -> Tensor:
        feats = self.features(x)
        return self.head.decode(self.head.raw(feats), feats)
