"""TinyViT (Wu et al., 2022) as MobileSAM's image encoder (Zhang et al., 2023): a small
conv + windowed-attention hierarchy distilled from SAM's ViT-H, with SAM's neck.

Shapes for an S×S input (S = 1024 published; dims d0..d3 = 64, 128, 160, 320 for TinyViT-5M):

- patch embed: conv 3×3 / 2 (3 -> d0/2), GELU, conv 3×3 / 2 (-> d0): (B, 3, S, S) ->
  (B, d0, S/4, S/4).
- stage 0: MBConv blocks ``x = gelu(x + bn(conv1×1(gelu(bn(dwconv3×3(gelu(bn(conv1×1(x)))))))))``
  (expand ×4), then a patch merging to d1.
- stages 1-3: TinyViT blocks on (B, H, W, C):
  ``x += attn(x)`` inside non-overlapping w×w windows (zero padded), where attn normalises
  (LayerNorm), projects to per-head [q, k, v] and adds a learnt bias per head and per
  |offset| between the two tokens (``attention_biases`` (heads, w²), gathered by the
  (w², w²) index of |Δrow|, |Δcol|); then ``x = bn(dwconv3×3(x))``; then
  ``x += fc2(gelu(fc1(LayerNorm(x))))``. Stages 1 and 2 end with a patch merging.
- patch merging: bn(conv1×1), GELU, bn(dwconv3×3 / s), GELU, bn(conv1×1). MobileSAM uses
  s = 1 when the output width is 320, 448 or 576 (the last merge of its three TinyViT
  sizes) so that the grid stays at S/16; here the last merge has stride 1: grids S/4, S/8,
  S/16, S/16.
- neck (as SAM's): conv1×1 (no bias), LayerNorm2d, conv3×3 (no bias), LayerNorm2d ->
  (B, 256, S/16, S/16).

Every conv is MobileSAM's ``Conv2d_BN`` (``.c.weight`` and ``.bn.{weight, bias,
running_mean, running_var}``); the BatchNorm is folded into the conv at load (inference
only), so the module's ``state_dict`` holds ``.c.weight`` and ``.c.bias`` (which load too).
Weight names are MobileSAM's (``image_encoder.patch_embed.seq.0.c.weight``,
``image_encoder.layers.1.blocks.0.attn.attention_biases``, ``image_encoder.neck.0.weight``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ... import nn
from ...ops import creation, elementwise, fused, shape
from ...tensor import Tensor
from .model import neck, window_partition, window_unpartition

BN_EPS = 1e-5


@dataclass(frozen=True)
class TinyViTConfig:
    """Sizes of a TinyViT; the defaults are MobileSAM's TinyViT-5M."""

    embed_dims: tuple[int, ...] = (64, 128, 160, 320)
    depths: tuple[int, ...] = (2, 2, 6, 2)
    num_heads: tuple[int, ...] = (2, 4, 5, 10)
    window_sizes: tuple[int, ...] = (7, 7, 14, 7)
    mlp_ratio: float = 4.0
    mbconv_expand_ratio: float = 4.0
    local_conv_size: int = 3

    def merge_strides(self) -> tuple[int, ...]:
        """Strides of the patch mergings after stages 0..n-2: 2, ..., 2, 1."""
        n = len(self.depths) - 1
        return (2,) * (n - 1) + (1,) if n else ()


def attention_bias_index(window: int) -> np.ndarray:
    """(w², w²) index into the per-offset biases: pairs of tokens of a w×w window share an
    entry when their (|Δrow|, |Δcol|) match; offsets are numbered in order of first
    appearance scanning (token i, token j) row-major, as MobileSAM (w² offsets in all)."""
    points = list(itertools.product(range(window), range(window)))
    offsets: dict[tuple[int, int], int] = {}
    idx = np.empty((len(points), len(points)), np.int64)
    for i, (r1, c1) in enumerate(points):
        for j, (r2, c2) in enumerate(points):
            idx[i, j] = offsets.setdefault((abs(r1 - r2), abs(c1 - c2)), len(offsets))
    return idx


class ConvBN(nn.Module):
    """Conv k×k (padding k//2, no bias) + BatchNorm, folded into one conv ``c`` at load:
    w' = w·γ/√(σ² + ε), b' = β - μ·γ/√(σ² + ε). Weights already folded (``c.weight`` and
    ``c.bias``, as this module's ``state_dict``) load as they are."""

    def __init__(self, vb, cin: int, cout: int, k: int = 1, stride: int = 1, groups: int = 1):
        super().__init__()
        weight = vb.get((cout, cin // groups, k, k), "c.weight")
        dtype = vb.dtype or weight.dtype  # the stored dtype unless the builder sets one
        if vb.contains("c.bias"):
            folded = {"weight": weight, "bias": vb.get((cout,), "c.bias")}
        else:
            bn = vb.pp("bn")
            gamma, beta, mean, var = (
                bn.get(cout, n).numpy().astype(np.float64)
                for n in ("weight", "bias", "running_mean", "running_var")
            )
            scale = gamma / np.sqrt(var + BN_EPS)
            w = weight.numpy().astype(np.float64) * scale[:, None, None, None]
            folded = {
                "weight": w.astype(np.float32),
                "bias": (beta - mean * scale).astype(np.float32),
            }
        self.c = nn.Conv2d(
            cin, cout, k, stride, k // 2, groups=groups,
            vb=nn.VarBuilder.from_dict(folded, dtype, vb.device),
        )  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        return self.c(x)


class PatchEmbed(nn.Module):
    """(B, 3, S, S) -> (B, d, S/4, S/4): ``seq.0`` conv 3×3/2, GELU, ``seq.2`` conv 3×3/2."""

    def __init__(self, vb, dim: int):
        super().__init__()
        seq = vb.pp("seq")
        self.seq = nn.Sequential(
            ConvBN(seq.pp(0), 3, dim // 2, 3, 2), nn.GELU(), ConvBN(seq.pp(2), dim // 2, dim, 3, 2)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.seq(x)


class MBConv(nn.Module):
    """Inverted residual: (B, C, H, W) -> (B, C, H, W)."""

    def __init__(self, vb, dim: int, expand: float):
        super().__init__()
        hidden = int(dim * expand)
        self.conv1 = ConvBN(vb.pp("conv1"), dim, hidden, 1)
        self.conv2 = ConvBN(vb.pp("conv2"), hidden, hidden, 3, groups=hidden)
        self.conv3 = ConvBN(vb.pp("conv3"), hidden, dim, 1)

    def forward(self, x: Tensor) -> Tensor:
        h = elementwise.gelu_erf(self.conv1(x))
        h = elementwise.gelu_erf(self.conv2(h))
        return elementwise.gelu_erf(self.conv3(h) + x)


class PatchMerging(nn.Module):
    """(B, C, H, W) -> (B, C', H/s, W/s)."""

    def __init__(self, vb, dim: int, out_dim: int, stride: int):
        super().__init__()
        self.conv1 = ConvBN(vb.pp("conv1"), dim, out_dim, 1)
        self.conv2 = ConvBN(vb.pp("conv2"), out_dim, out_dim, 3, stride, groups=out_dim)
        self.conv3 = ConvBN(vb.pp("conv3"), out_dim, out_dim, 1)

    def forward(self, x: Tensor) -> Tensor:
        x = elementwise.gelu_erf(self.conv1(x))
        x = elementwise.gelu_erf(self.conv2(x))
        return self.conv3(x)


class WindowAttention(nn.Module):
    """LayerNorm, per-head [q, k, v] projection, softmax(q·kᵀ/√d + bias) v, output projection:
    (N, w², C) -> (N, w², C)."""

    def __init__(self, vb, dim: int, num_heads: int, window: int):
        super().__init__()
        self.num_heads = num_heads
        self.norm = nn.LayerNorm(dim, vb=vb.pp("norm"))
        self.qkv = nn.Linear(dim, 3 * dim, vb=vb.pp("qkv"))
        self.proj = nn.Linear(dim, dim, vb=vb.pp("proj"))
        n = window * window
        self.register_parameter("attention_biases", vb.get((num_heads, n), "attention_biases"))
        idx = creation.from_numpy(attention_bias_index(window).reshape(-1), vb.device)
        bias = self.attention_biases.index_select(1, idx).reshape(1, num_heads, n, n)
        self.register_buffer("bias", bias.detach(), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        b, n, c = x.shape
        nh = self.num_heads
        hd = c // nh
        # per head the projection holds [q, k, v] (MobileSAM's layout)
        qkv = self.qkv(self.norm(x)).reshape(b, n, nh, 3, hd).permute(3, 0, 2, 1, 4)
        q, k, v = (t.reshape(b, nh, n, hd) for t in shape.split(qkv, 1, 0))
        out = fused.scaled_dot_product_attention(q, k, v, attn_mask=self.bias)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class NormMlp(nn.Module):
    """fc2(gelu(fc1(LayerNorm(x))))."""

    def __init__(self, vb, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, vb=vb.pp("norm"))
        self.fc1 = nn.Linear(dim, hidden, vb=vb.pp("fc1"))
        self.fc2 = nn.Linear(hidden, dim, vb=vb.pp("fc2"))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(elementwise.gelu_erf(self.fc1(self.norm(x))))


class TinyViTBlock(nn.Module):
    """Windowed attention, depthwise local conv, MLP: (B, H, W, C) -> (B, H, W, C)."""

    def __init__(self, vb, dim: int, num_heads: int, window: int, cfg: TinyViTConfig):
        super().__init__()
        self.window = window
        self.attn = WindowAttention(vb.pp("attn"), dim, num_heads, window)
        k = cfg.local_conv_size
        self.local_conv = ConvBN(vb.pp("local_conv"), dim, dim, k, groups=dim)
        self.mlp = NormMlp(vb.pp("mlp"), dim, int(dim * cfg.mlp_ratio))

    def forward(self, x: Tensor) -> Tensor:
        b, h, w, c = x.shape
        ws = self.window
        win, padded = window_partition(x, ws)
        att = self.attn(win.reshape(-1, ws * ws, c)).reshape(-1, ws, ws, c)
        x = x + window_unpartition(att, ws, padded, (h, w))
        x = self.local_conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        return x + self.mlp(x)


class Stage(nn.Module):
    """``blocks`` (MBConv on (B, C, H, W) in stage 0, else TinyViT blocks on (B, H, W, C)),
    then ``downsample`` (a patch merging, or None in the last stage)."""

    def __init__(self, blocks: list[nn.Module], downsample: PatchMerging | None):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.downsample = downsample
        self.channels_last = not isinstance(blocks[0], MBConv) if blocks else False

    def forward(self, x: Tensor) -> Tensor:
        """(B, C, H, W) -> (B, C', H', W')."""
        if self.channels_last:
            x = x.permute(0, 2, 3, 1)
        for blk in self.blocks:
            x = blk(x)
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return x if self.downsample is None else self.downsample(x)


class TinyViT(nn.Module):
    """(B, 3, S, S) normalised, padded image -> (B, out_chans, S/16, S/16) embedding."""

    def __init__(self, vb, cfg: TinyViTConfig, out_chans: int = 256):
        super().__init__()
        dims = cfg.embed_dims
        self.patch_embed = PatchEmbed(vb.pp("patch_embed"), dims[0])
        strides = cfg.merge_strides()
        layers = vb.pp("layers")
        self.layers = nn.ModuleList()
        for i, depth in enumerate(cfg.depths):
            lv, blocks = layers.pp(i), layers.pp(i).pp("blocks")
            if i == 0:
                mods = [
                    MBConv(blocks.pp(j), dims[0], cfg.mbconv_expand_ratio) for j in range(depth)
                ]
            else:
                mods = [
                    TinyViTBlock(blocks.pp(j), dims[i], cfg.num_heads[i], cfg.window_sizes[i], cfg)
                    for j in range(depth)
                ]
            down = (
                PatchMerging(lv.pp("downsample"), dims[i], dims[i + 1], strides[i])
                if i < len(cfg.depths) - 1
                else None
            )
            self.layers.append(Stage(mods, down))
        self.neck = neck(vb.pp("neck"), dims[-1], out_chans)

    def forward(self, x: Tensor) -> Tensor:
        x = self.patch_embed(x)
        for stage in self.layers:
            x = stage(x)
        return self.neck(x)
