"""Segment Anything (Kirillov et al., 2023): a ViT image encoder run once per image, a prompt
encoder for points / boxes / low-res masks and a light two-way-transformer mask decoder.

Shapes, for an image padded to S×S (S = 1024 published) and patch 16 (E = S/16 = 64):

- image encoder: (B, 3, S, S) -> (B, 256, E, E). Patch embedding (conv 16/16), absolute
  position embedding, ``depth`` blocks of pre-norm attention + MLP; most blocks attend inside
  non-overlapping 14×14 windows (zero padded), ``global_attn_indexes`` blocks attend over all
  tokens; every attention adds decomposed relative positions
  ``attn[i, j] += q_i·R^h[h_i - h_j] + q_i·R^w[w_i - w_j]`` (computed as extra dimensions
  of the query-key dot product, so no (hw)² bias is built). Neck: 1×1 conv, LayerNorm2d,
  3×3 conv, LayerNorm2d.
- prompt encoder: points (B, N, 2) in pixels of the S×S input with labels (B, N) (1 fg, 0 bg,
  -1 padding) and boxes (B, 4) -> sparse (B, T, 256) = random Fourier features
  ``[sin 2πGx, cos 2πGx]`` + a learnt embedding per kind; masks (B, 1, 4E, 4E) -> dense
  (B, 256, E, E) (or the learnt "no mask" embedding).
- mask decoder: [iou token, 4 mask tokens, sparse] attend two ways with the image tokens;
  masks = hypernetwork(mask token) · upscaled image features -> (B, 4, 4E, 4E) logits and
  IoU predictions (B, 4). ``multimask_output`` keeps masks 1..3, else mask 0.

Weight names are the official checkpoint's (``image_encoder.blocks.0.attn.rel_pos_h``,
``prompt_encoder.pe_layer.positional_encoding_gaussian_matrix``,
``mask_decoder.transformer.layers.0.cross_attn_token_to_image.q_proj.weight``, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ... import nn
from ...ops import creation, elementwise, fused, pool, shape
from ...tensor import Tensor

if TYPE_CHECKING:
    from .tiny_vit import TinyViTConfig

PIXEL_MEAN = (123.675, 116.28, 103.53)
PIXEL_STD = (58.395, 57.12, 57.375)
MASK_THRESHOLD = 0.0


@dataclass(frozen=True)
class SamConfig:
    """Sizes of a SAM; ``vit_b`` / ``vit_l`` / ``vit_h`` are the published ones,
    ``mobile_sam`` MobileSAM (a TinyViT image encoder, ``tiny_vit``, in place of the ViT,
    whose fields are then unused; the same prompt encoder and mask decoder)."""

    embed_dim: int = 768
    depth: int = 12
    num_heads: int = 12
    global_attn_indexes: tuple[int, ...] = (2, 5, 8, 11)
    img_size: int = 1024
    patch_size: int = 16
    window_size: int = 14
    mlp_ratio: float = 4.0
    prompt_embed_dim: int = 256
    mask_in_chans: int = 16
    decoder_depth: int = 2
    decoder_heads: int = 8
    decoder_mlp_dim: int = 2048
    iou_head_hidden_dim: int = 256
    tiny_vit: TinyViTConfig | None = None

    @classmethod
    def variant(cls, which: str) -> SamConfig:
        if which == "mobile_sam":
            from .tiny_vit import TinyViTConfig

            return cls(tiny_vit=TinyViTConfig())
        table = {
            "vit_b": cls(768, 12, 12, (2, 5, 8, 11)),
            "vit_l": cls(1024, 24, 16, (5, 11, 17, 23)),
            "vit_h": cls(1280, 32, 16, (7, 15, 23, 31)),
        }
        if which not in table:
            raise ValueError(
                f"SAM variant must be one of {', '.join(table)}, mobile_sam, found {which!r}"
            )
        return table[which]

    @property
    def embed_size(self) -> int:
        """E: side of the image embedding grid (TinyViT's stride is 16 too)."""
        return self.img_size // self.patch_size


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of (B, C, H, W) (ε = 1e-6)."""

    def __init__(self, channels: int, *, vb=None):
        super().__init__(channels, eps=1e-6, vb=vb)

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def neck(vb, in_channels: int, out_channels: int) -> nn.Sequential:
    """The encoders' neck to the prompt width: conv 1×1, LayerNorm2d, conv 3×3, LayerNorm2d
    (convs without bias), under ``neck.0`` .. ``neck.3``."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 1, bias=False, vb=vb.pp(0)),
        LayerNorm2d(out_channels, vb=vb.pp(1)),
        nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False, vb=vb.pp(2)),
        LayerNorm2d(out_channels, vb=vb.pp(3)),
    )


# -- image encoder -----------------------------------------------------------------------------
def _rel_index(n: int, h: int, w: int, axis: str) -> np.ndarray:
    """Gather index (n, h, w, h or w) into the 2L-1 relative offsets: i - k + L - 1 along
    ``axis`` ("h": rows, "w": columns)."""
    size = h if axis == "h" else w
    off = np.arange(size)[:, None] - np.arange(size)[None, :] + size - 1
    shaped = off[None, :, None, :] if axis == "h" else off[None, None, :, :]
    return np.ascontiguousarray(np.broadcast_to(shaped, (n, h, w, size)), dtype=np.int64)


class EncoderAttention(nn.Module):
    """Multi-head attention over a (B, H, W, C) grid with decomposed relative positions."""

    def __init__(self, vb, dim: int, num_heads: int, input_size: int):
        super().__init__()
        self.num_heads = num_heads
        hd = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, vb=vb.pp("qkv"))
        self.proj = nn.Linear(dim, dim, vb=vb.pp("proj"))
        for name in ("rel_pos_h", "rel_pos_w"):
            self.register_parameter(name, vb.get((2 * input_size - 1, hd), name))
        self._index_cache: dict = {}

    def _indices(self, n: int, h: int, w: int, device, dtype):
        """Gather indices of the relative offsets, and the (1, hw, h + w) one-hot rows and
        columns of the keys; cached per grid."""
        key = (n, h, w, device, dtype)
        if key not in self._index_cache:
            pos = np.arange(h * w)
            onehot = np.zeros((1, h * w, h + w), np.float32)
            onehot[0, pos, pos // w] = 1.0
            onehot[0, pos, h + pos % w] = 1.0
            self._index_cache[key] = (
                creation.from_numpy(_rel_index(n, h, w, "h"), device),
                creation.from_numpy(_rel_index(n, h, w, "w"), device),
                creation.from_numpy(onehot, device).to_dtype(dtype),
            )
        return self._index_cache[key]

    def forward(self, x: Tensor) -> Tensor:
        b, h, w, c = x.shape
        nh = self.num_heads
        hd = c // nh
        qkv = self.qkv(x).reshape(b, h * w, 3, nh, hd).permute(2, 0, 3, 1, 4)
        q, k, v = (t.reshape(b * nh, h * w, hd) for t in shape.split(qkv, 1, 0))
        # bias[n, (i, j), (k, l)] = q_ij · R^h[i - k + h - 1] + q_ij · R^w[j - l + w - 1]:
        # one GEMM against every offset, then a gather of the needed ones
        for name, size in (("rel_pos_h", h), ("rel_pos_w", w)):
            if getattr(self, name).shape[0] != 2 * size - 1:
                raise ValueError(
                    f"SAM attention: {name} of length {getattr(self, name).shape[0]} does not "
                    f"fit a {h}×{w} grid (resizing relative positions is not supported)"
                )
        rq = q.reshape(b * nh, h, w, hd)
        idx_h, idx_w, idx_onehot = self._indices(b * nh, h, w, q.device, q.dtype)
        rel_h = (rq @ self.rel_pos_h.t()).gather(3, idx_h)  # (n, h, w, kh)
        rel_w = (rq @ self.rel_pos_w.t()).gather(3, idx_w)  # (n, h, w, kw)
        # Rather than a (n, hw, hw) bias, extend the dot product: q' = [q/√d, rel_h, rel_w],
        # k' = [k, onehot(row of key), onehot(column of key)], so q'·k' = q·k/√d + bias.
        n = b * nh
        q_ext = shape.cat(
            [q * (hd**-0.5), rel_h.reshape(n, h * w, h), rel_w.reshape(n, h * w, w)], -1
        )
        k_ext = shape.cat([k, idx_onehot.broadcast_to(n, h * w, h + w)], -1)
        out = fused.scaled_dot_product_attention(q_ext, k_ext, v, scale=1.0)
        out = out.reshape(b, nh, h, w, hd).permute(0, 2, 3, 1, 4).reshape(b, h, w, c)
        return self.proj(out)


class MLPBlock(nn.Module):
    """lin2(act(lin1(x))); GELU (exact) in the encoder, ReLU in the decoder."""

    def __init__(self, vb, dim: int, hidden: int, act: str):
        super().__init__()
        self.lin1 = nn.Linear(dim, hidden, vb=vb.pp("lin1"))
        self.lin2 = nn.Linear(hidden, dim, vb=vb.pp("lin2"))
        self.act = act

    def forward(self, x: Tensor) -> Tensor:
        h = self.lin1(x)
        h = elementwise.gelu_erf(h) if self.act == "gelu" else elementwise.relu(h)
        return self.lin2(h)


def window_partition(x: Tensor, ws: int) -> tuple[Tensor, tuple[int, int]]:
    """(B, H, W, C) -> (B·nWin, ws, ws, C), zero padded to multiples of ws; (Hp, Wp)."""
    b, h, w, c = x.shape
    ph, pw = (-h) % ws, (-w) % ws
    if ph or pw:
        x = pool.pad(x, (0, 0, 0, pw, 0, ph))
    hp, wp = h + ph, w + pw
    x = x.reshape(b, hp // ws, ws, wp // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, ws, ws, c), (hp, wp)


def window_unpartition(x: Tensor, ws: int, padded: tuple[int, int], hw: tuple[int, int]) -> Tensor:
    """Inverse of ``window_partition``, cropping the padding: -> (B, H, W, C)."""
    hp, wp = padded
    h, w = hw
    c = x.shape[-1]
    b = x.shape[0] // (hp * wp // ws // ws)
    x = x.reshape(b, hp // ws, wp // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5)
    x = x.reshape(b, hp, wp, c)
    if hp > h or wp > w:
        x = x[:, :h, :w, :]
    return x


class EncoderBlock(nn.Module):
    """x + attn(norm1(x)) (windowed unless global), then x + mlp(norm2(x))."""

    def __init__(self, vb, cfg: SamConfig, window_size: int):
        super().__init__()
        d = cfg.embed_dim
        self.window_size = window_size
        self.norm1 = nn.LayerNorm(d, eps=1e-6, vb=vb.pp("norm1"))
        size = window_size if window_size > 0 else cfg.embed_size
        self.attn = EncoderAttention(vb.pp("attn"), d, cfg.num_heads, size)
        self.norm2 = nn.LayerNorm(d, eps=1e-6, vb=vb.pp("norm2"))
        self.mlp = MLPBlock(vb.pp("mlp"), d, int(d * cfg.mlp_ratio), "gelu")

    def forward(self, x: Tensor) -> Tensor:
        h = self.norm1(x)
        if self.window_size > 0:
            hw = (x.shape[1], x.shape[2])
            h, padded = window_partition(h, self.window_size)
            h = window_unpartition(self.attn(h), self.window_size, padded, hw)
        else:
            h = self.attn(h)
        x = x + h
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    """Conv p×p, stride p: (B, 3, S, S) -> (B, S/p, S/p, D) (channels last)."""

    def __init__(self, vb, dim: int, patch: int):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, patch, vb=vb.pp("proj"))

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x).permute(0, 2, 3, 1)


class ImageEncoderViT(nn.Module):
    """(B, 3, S, S) normalised, padded image -> (B, 256, S/16, S/16) embedding."""

    def __init__(self, vb, cfg: SamConfig):
        super().__init__()
        d, p, e = cfg.embed_dim, cfg.patch_size, cfg.embed_size
        self.patch_embed = PatchEmbed(vb.pp("patch_embed"), d, p)
        self.register_parameter("pos_embed", vb.get((1, e, e, d), "pos_embed"))
        blocks = vb.pp("blocks")
        self.blocks = nn.ModuleList(
            [
                EncoderBlock(
                    blocks.pp(i), cfg, 0 if i in cfg.global_attn_indexes else cfg.window_size
                )
                for i in range(cfg.depth)
            ]
        )
        self.neck = neck(vb.pp("neck"), d, cfg.prompt_embed_dim)

    def forward(self, x: Tensor) -> Tensor:
        x = self.patch_embed(x) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.neck(x.permute(0, 3, 1, 2))


# -- prompt encoder ----------------------------------------------------------------------------
class PositionEmbeddingRandom(nn.Module):
    """Random Fourier features of coordinates in [0, 1]²: [sin 2πG(2x-1), cos 2πG(2x-1)]."""

    def __init__(self, vb, num_feats: int):
        super().__init__()
        name = "positional_encoding_gaussian_matrix"
        self.register_buffer(name, vb.get((2, num_feats), name))

    def encode(self, coords: Tensor) -> Tensor:
        """(..., 2) in [0, 1] -> (..., 2·num_feats)."""
        proj = (coords * 2.0 - 1.0) @ self.positional_encoding_gaussian_matrix
        proj = proj * (2 * math.pi)
        return shape.cat([elementwise.sin(proj), elementwise.cos(proj)], -1)

    def grid(self, h: int, w: int) -> Tensor:
        """Encoding of the cell centres of an h×w grid: (C, h, w)."""
        ys = (np.arange(h, dtype=np.float32) + 0.5) / h
        xs = (np.arange(w, dtype=np.float32) + 0.5) / w
        xy = np.stack(np.meshgrid(xs, ys), -1).astype(np.float32)  # (h, w, 2) as (x, y)
        g = self.positional_encoding_gaussian_matrix
        coords = creation.from_numpy(xy, g.device).to_dtype(g.dtype)
        return self.encode(coords).permute(2, 0, 1)


class PromptEncoder(nn.Module):
    """Points / boxes -> sparse (B, T, C); low-res masks -> dense (B, C, E, E)."""

    def __init__(self, vb, cfg: SamConfig):
        super().__init__()
        c, e = cfg.prompt_embed_dim, cfg.embed_size
        self.embed_dim, self.embed_size, self.img_size = c, e, cfg.img_size
        self.pe_layer = PositionEmbeddingRandom(vb.pp("pe_layer"), c // 2)
        pe = vb.pp("point_embeddings")
        # rows: padding ("not a point"), background, foreground, box corner 1, box corner 2
        self.point_embeddings = nn.ModuleList([nn.Embedding(1, c, vb=pe.pp(i)) for i in range(4)])
        self.not_a_point_embed = nn.Embedding(1, c, vb=vb.pp("not_a_point_embed"))
        m, mc = vb.pp("mask_downscaling"), cfg.mask_in_chans
        self.mask_downscaling = nn.Sequential(
            nn.Conv2d(1, mc // 4, 2, 2, vb=m.pp(0)),
            LayerNorm2d(mc // 4, vb=m.pp(1)),
            nn.GELU(),
            nn.Conv2d(mc // 4, mc, 2, 2, vb=m.pp(3)),
            LayerNorm2d(mc, vb=m.pp(4)),
            nn.GELU(),
            nn.Conv2d(mc, c, 1, vb=m.pp(6)),
        )
        self.no_mask_embed = nn.Embedding(1, c, vb=vb.pp("no_mask_embed"))

    def dense_pe(self) -> Tensor:
        """Positional encoding of the image embedding grid: (1, C, E, E)."""
        return self.pe_layer.grid(self.embed_size, self.embed_size).unsqueeze(0)

    def _coords(self, xy: np.ndarray) -> Tensor:
        g = self.pe_layer.positional_encoding_gaussian_matrix
        t = creation.from_numpy(((xy + 0.5) / self.img_size).astype(np.float32), g.device)
        return self.pe_layer.encode(t.to_dtype(g.dtype))

    def embed_points(self, points: np.ndarray, labels: np.ndarray, pad: bool) -> Tensor:
        """points (B, N, 2) pixels, labels (B, N) in {1, 0, -1} -> (B, N [+1], C)."""
        points = np.asarray(points, np.float32)
        labels = np.asarray(labels, np.int64)
        if pad:
            b = points.shape[0]
            points = np.concatenate([points, np.zeros((b, 1, 2), np.float32)], 1)
            labels = np.concatenate([labels, -np.ones((b, 1), np.int64)], 1)
        pe = self._coords(points)
        keep = creation.from_numpy((labels != -1).astype(np.float32)[..., None], pe.device)
        pe_w = [e.weight for e in self.point_embeddings]
        table = shape.cat([self.not_a_point_embed.weight, *pe_w[:2]], 0)  # (3, C)
        idx = creation.from_numpy((labels + 1).reshape(-1), pe.device)
        learnt = table.index_select(0, idx).reshape(*labels.shape, self.embed_dim)
        return pe * keep.to_dtype(pe.dtype) + learnt

    def embed_boxes(self, boxes: np.ndarray) -> Tensor:
        """boxes (B, 4) as x0, y0, x1, y1 pixels -> (B, 2, C)."""
        corners = np.asarray(boxes, np.float32).reshape(-1, 2, 2)
        pe = self._coords(corners)
        return pe + shape.cat([e.weight for e in self.point_embeddings[2:]], 0)

    def embed_masks(self, masks: Tensor) -> Tensor:
        """(B, 1, 4E, 4E) mask logits -> (B, C, E, E)."""
        return self.mask_downscaling(masks)

    def forward(self, points=None, boxes=None, masks: Tensor | None = None):
        """points: (coords (B, N, 2), labels (B, N)) or None; boxes (B, 4) or None; masks
        (B, 1, 4E, 4E) or None -> sparse (B, T, C), dense (B, C, E, E)."""
        parts = []
        bs = 1
        if points is not None:
            coords, labels = points
            bs = np.asarray(coords).shape[0]
            parts.append(self.embed_points(coords, labels, pad=boxes is None))
        if boxes is not None:
            bs = np.asarray(boxes).reshape(-1, 4).shape[0]
            parts.append(self.embed_boxes(boxes))
        g = self.no_mask_embed.weight
        if parts:
            sparse = shape.cat(parts, 1) if len(parts) > 1 else parts[0]
        else:
            sparse = creation.zeros((bs, 0, self.embed_dim), dtype=g.dtype, device=g.device)
        if masks is not None:
            dense = self.embed_masks(masks)
        else:
            e = self.embed_size
            dense = g.reshape(1, self.embed_dim, 1, 1).broadcast_to(bs, self.embed_dim, e, e)
        return sparse, dense


# -- mask decoder ------------------------------------------------------------------------------
class DecoderAttention(nn.Module):
    """Attention with q/k/v projected down to dim / downsample_rate (split into heads)."""

    def __init__(self, vb, dim: int, num_heads: int, downsample_rate: int = 1):
        super().__init__()
        inner = dim // downsample_rate
        self.num_heads = num_heads
        self.q_proj = nn.Linear(dim, inner, vb=vb.pp("q_proj"))
        self.k_proj = nn.Linear(dim, inner, vb=vb.pp("k_proj"))
        self.v_proj = nn.Linear(dim, inner, vb=vb.pp("v_proj"))
        self.out_proj = nn.Linear(inner, dim, vb=vb.pp("out_proj"))

    def _heads(self, x: Tensor) -> Tensor:
        b, n, c = x.shape
        return x.reshape(b, n, self.num_heads, c // self.num_heads).transpose(1, 2)

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        q, k, v = (
            self._heads(self.q_proj(q)),
            self._heads(self.k_proj(k)),
            self._heads(self.v_proj(v)),
        )
        out = fused.scaled_dot_product_attention(q, k, v)
        b, h, n, d = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, n, h * d))


class TwoWayAttentionBlock(nn.Module):
    """Tokens self-attend, tokens attend to the image, token MLP, image attends to tokens."""

    def __init__(self, vb, dim: int, heads: int, mlp_dim: int, skip_first_layer_pe: bool):
        super().__init__()
        self.self_attn = DecoderAttention(vb.pp("self_attn"), dim, heads)
        self.norm1 = nn.LayerNorm(dim, vb=vb.pp("norm1"))
        self.cross_attn_token_to_image = DecoderAttention(
            vb.pp("cross_attn_token_to_image"), dim, heads, 2
        )
        self.norm2 = nn.LayerNorm(dim, vb=vb.pp("norm2"))
        self.mlp = MLPBlock(vb.pp("mlp"), dim, mlp_dim, "relu")
        self.norm3 = nn.LayerNorm(dim, vb=vb.pp("norm3"))
        self.norm4 = nn.LayerNorm(dim, vb=vb.pp("norm4"))
        self.cross_attn_image_to_token = DecoderAttention(
            vb.pp("cross_attn_image_to_token"), dim, heads, 2
        )
        self.skip_first_layer_pe = skip_first_layer_pe

    def forward(self, queries, keys, query_pe, key_pe):
        if self.skip_first_layer_pe:
            queries = self.self_attn(queries, queries, queries)
        else:
            q = queries + query_pe
            queries = queries + self.self_attn(q, q, queries)
        queries = self.norm1(queries)
        q, k = queries + query_pe, keys + key_pe
        queries = self.norm2(queries + self.cross_attn_token_to_image(q, k, keys))
        queries = self.norm3(queries + self.mlp(queries))
        q, k = queries + query_pe, keys + key_pe
        keys = self.norm4(keys + self.cross_attn_image_to_token(k, q, queries))
        return queries, keys


class TwoWayTransformer(nn.Module):
    """``depth`` TwoWayAttentionBlocks, then a final token-to-image attention and LayerNorm."""

    def __init__(self, vb, cfg: SamConfig):
        super().__init__()
        d = cfg.prompt_embed_dim
        layers = vb.pp("layers")
        self.layers = nn.ModuleList(
            [
                TwoWayAttentionBlock(
                    layers.pp(i), d, cfg.decoder_heads, cfg.decoder_mlp_dim, i == 0
                )
                for i in range(cfg.decoder_depth)
            ]
        )
        self.final_attn_token_to_image = DecoderAttention(
            vb.pp("final_attn_token_to_image"), d, cfg.decoder_heads, 2
        )
        self.norm_final_attn = nn.LayerNorm(d, vb=vb.pp("norm_final_attn"))

    def forward(self, image: Tensor, image_pe: Tensor, tokens: Tensor):
        """image, image_pe (B, C, h, w); tokens (B, T, C) -> tokens (B, T, C), keys (B, hw, C)."""
        keys = image.flatten(2).transpose(1, 2)
        key_pe = image_pe.flatten(2).transpose(1, 2)
        queries = tokens
        for layer in self.layers:
            queries, keys = layer(queries, keys, tokens, key_pe)
        q, k = queries + tokens, keys + key_pe
        queries = self.norm_final_attn(queries + self.final_attn_token_to_image(q, k, keys))
        return queries, keys


class MLP(nn.Module):
    """``num_layers`` Linear layers with ReLU between them (``layers.i``)."""

    def __init__(self, vb, dims: list[int]):
        super().__init__()
        lv = vb.pp("layers")
        self.layers = nn.ModuleList(
            [
                nn.Linear(a, b, vb=lv.pp(i))
                for i, (a, b) in enumerate(zip(dims[:-1], dims[1:], strict=True))
            ]
        )

    def forward(self, x: Tensor) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = elementwise.relu(x)
        return x


class MaskDecoder(nn.Module):
    """(image embedding, dense pe, sparse, dense prompts) -> mask logits, IoU predictions."""

    num_mask_tokens = 4

    def __init__(self, vb, cfg: SamConfig):
        super().__init__()
        d = cfg.prompt_embed_dim
        self.transformer = TwoWayTransformer(vb.pp("transformer"), cfg)
        self.iou_token = nn.Embedding(1, d, vb=vb.pp("iou_token"))
        self.mask_tokens = nn.Embedding(self.num_mask_tokens, d, vb=vb.pp("mask_tokens"))
        up = vb.pp("output_upscaling")
        self.output_upscaling = nn.Sequential(
            nn.ConvTranspose2d(d, d // 4, 2, 2, vb=up.pp(0)),
            LayerNorm2d(d // 4, vb=up.pp(1)),
            nn.GELU(),
            nn.ConvTranspose2d(d // 4, d // 8, 2, 2, vb=up.pp(3)),
            nn.GELU(),
        )
        hyper = vb.pp("output_hypernetworks_mlps")
        self.output_hypernetworks_mlps = nn.ModuleList(
            [MLP(hyper.pp(i), [d, d, d, d // 8]) for i in range(self.num_mask_tokens)]
        )
        h = cfg.iou_head_hidden_dim
        self.iou_prediction_head = MLP(
            vb.pp("iou_prediction_head"), [d, h, h, self.num_mask_tokens]
        )

    def forward(self, image_embeddings, image_pe, sparse, dense, multimask_output: bool = True):
        """image_embeddings (1, C, E, E), image_pe (1, C, E, E), sparse (B, T, C), dense
        (B, C, E, E) -> masks (B, 3 or 1, 4E, 4E) logits, iou (B, 3 or 1)."""
        b, _, c = sparse.shape
        out_tokens = shape.cat([self.iou_token.weight, self.mask_tokens.weight], 0)
        out_tokens = out_tokens.unsqueeze(0).broadcast_to(b, 1 + self.num_mask_tokens, c)
        tokens = shape.cat([out_tokens, sparse], 1)
        _, _, e1, e2 = dense.shape
        src = image_embeddings.broadcast_to(b, c, e1, e2) + dense
        pos = image_pe.broadcast_to(b, c, e1, e2)
        hs, src = self.transformer(src, pos, tokens)
        iou_out = hs[:, 0, :]
        src = src.transpose(1, 2).reshape(b, c, e1, e2)
        up = self.output_upscaling(src)  # (B, C/8, 4E, 4E)
        hyper = shape.stack(
            [mlp(hs[:, 1 + i, :]) for i, mlp in enumerate(self.output_hypernetworks_mlps)], 1
        )
        _, c8, h, w = up.shape
        masks = (hyper @ up.reshape(b, c8, h * w)).reshape(b, self.num_mask_tokens, h, w)
        iou = self.iou_prediction_head(iou_out)
        if multimask_output:
            return masks[:, 1:], iou[:, 1:]
        return masks[:, :1], iou[:, :1]


# -- the whole model ---------------------------------------------------------------------------
class Sam(nn.Module):
    """Image encoder (SAM's ViT, or MobileSAM's TinyViT when ``cfg.tiny_vit``) + prompt
    encoder + mask decoder (``image_encoder.*``, ``prompt_encoder.*``, ``mask_decoder.*``)."""

    def __init__(self, vb: nn.VarBuilder, cfg: SamConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or SamConfig()
        if cfg.tiny_vit is not None:
            from .tiny_vit import TinyViT

            self.image_encoder = TinyViT(vb.pp("image_encoder"), cfg.tiny_vit, cfg.prompt_embed_dim)
        else:
            self.image_encoder = ImageEncoderViT(vb.pp("image_encoder"), cfg)
        self.prompt_encoder = PromptEncoder(vb.pp("prompt_encoder"), cfg)
        self.mask_decoder = MaskDecoder(vb.pp("mask_decoder"), cfg)

    def preprocess(self, image: np.ndarray) -> Tensor:
        """(H, W, 3) RGB, long side already resized to S -> (1, 3, S, S) normalised, padded
        bottom-right with zeros."""
        s = self.cfg.img_size
        h, w = image.shape[:2]
        x = (image.astype(np.float32) - np.float32(PIXEL_MEAN)) / np.float32(PIXEL_STD)
        out = np.zeros((1, 3, s, s), np.float32)
        out[0, :, :h, :w] = x.transpose(2, 0, 1)
        g = self.prompt_encoder.no_mask_embed.weight
        return creation.from_numpy(out, g.device).to_dtype(g.dtype)

    def postprocess_masks(self, masks: Tensor, input_size, original_size) -> Tensor:
        """(B, M, 4E, 4E) logits -> upscale to S×S, crop the padding, resize to the original
        (H, W) (bilinear)."""
        s = self.cfg.img_size
        masks = pool.interpolate(masks, (s, s), mode="bilinear", align_corners=False)
        masks = masks[:, :, : input_size[0], : input_size[1]]
        return pool.interpolate(masks, tuple(original_size), mode="bilinear", align_corners=False)
