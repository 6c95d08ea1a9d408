"""Building blocks of the diffusers ``UNet2DConditionModel``: resnets, spatial transformers
(self- and cross-attention with a GEGLU feed-forward), down/up samplers and the down, mid and
up blocks that stack them. Attribute names follow diffusers, so ``vb.pp(name)`` finds the
checkpoint's tensors (``resnets.0.conv1.weight``, ``attentions.0.proj_in.weight``, ...).

Shapes: feature maps x (B, C, H, W); time embedding temb (B, T) (already through SiLU, see
``ResnetBlock2D``); text context (B·S, D) (the B samples' tokens as rows, as the spatial
transformers keep their tokens: fewer reshapes).
"""

from __future__ import annotations

from ... import nn
from ...ops import elementwise, fused, pool, shape
from ...tensor import Tensor

# Attention scores (B, h, N, S) larger than this (in f32 bytes) are computed a block of
# queries at a time: SDXL at 1024² has 4096 tokens, 2·10·4096² scores = 1.3 GB at once.
ATTENTION_CHUNK_BYTES = 1 << 28


class ResnetBlock2D(nn.Module):
    """h = conv1(silu(norm1(x))) + W_t silu(temb); h = conv2(silu(norm2(h)));
    out = shortcut(x) + h, with a 1×1 ``conv_shortcut`` when the channels change.

    ``forward`` takes silu(temb) (B, T): the UNet applies the SiLU once for all resnets.
    """

    def __init__(self, vb, in_ch: int, out_ch: int, temb_ch: int, groups: int, eps: float):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_ch, eps, vb=vb.pp("norm1"))
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1, vb=vb.pp("conv1"))
        self.time_emb_proj = Linear(temb_ch, out_ch, vb=vb.pp("time_emb_proj"))
        self.norm2 = nn.GroupNorm(groups, out_ch, eps, vb=vb.pp("norm2"))
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, vb=vb.pp("conv2"))
        self.conv_shortcut = None
        if in_ch != out_ch:
            self.conv_shortcut = nn.Conv2d(in_ch, out_ch, 1, vb=vb.pp("conv_shortcut"))

    def forward(self, x: Tensor, temb_act: Tensor) -> Tensor:
        h = self.conv1(elementwise.silu(self.norm1(x)))
        t = self.time_emb_proj(temb_act)
        h = h + t.reshape(*t.shape, 1, 1)
        h = self.conv2(elementwise.silu(self.norm2(h)))
        skip = x if self.conv_shortcut is None else self.conv_shortcut(x)
        return skip + h


class Linear(nn.Linear):
    """``nn.Linear`` for 2-d inputs (N, in) -> (N, out): x Wᵀ (+ b) with Wᵀ kept as a view,
    so a call is one matmul (and one add). The view follows the weight if it is replaced."""

    def forward(self, x: Tensor) -> Tensor:
        wt = self.__dict__.get("_wt")
        if wt is None or wt._storage is not self.weight._storage:
            wt = self.__dict__["_wt"] = self.weight.t()
        y = x @ wt
        return y if self.bias is None else y + self.bias


class Attention(nn.Module):
    """Multi-head attention, softmax(q kᵀ / √d) v per head, q = x W_q, k = c W_k, v = c W_v
    (no biases), then ``to_out.0`` (with bias).

    x: (B·N, query_dim) tokens of B samples; context c: (B·S, cross_dim), or x itself
    (self-attention). Returns (B·N, query_dim).

    The projections that read the same input run as ONE matmul: the weights of q, k, v
    (self-attention) or k, v (cross-attention) are concatenated once and the layers keep
    views of the concatenation, so the checkpoint names and memory stay as they were.
    Trainable weights (that need their own gradients) are not fused.
    """

    def __init__(self, vb, query_dim: int, heads: int, dim_head: int, cross_dim: int | None):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.dim_head = heads, dim_head
        self.is_cross = cross_dim is not None
        kv_dim = cross_dim if self.is_cross else query_dim
        self.to_q = Linear(query_dim, inner, bias=False, vb=vb.pp("to_q"))
        self.to_k = Linear(kv_dim, inner, bias=False, vb=vb.pp("to_k"))
        self.to_v = Linear(kv_dim, inner, bias=False, vb=vb.pp("to_v"))
        self.to_out = nn.ModuleList([Linear(inner, query_dim, vb=vb.pp("to_out").pp(0))])

    def _fused_t(self) -> Tensor | None:
        """[W_q; W_k; W_v]ᵀ (or [W_k; W_v]ᵀ) as one (in, n·inner) view; None if trainable."""
        group = (self.to_k, self.to_v) if self.is_cross else (self.to_q, self.to_k, self.to_v)
        fused = self.__dict__.get("_w")
        if fused is not None and all(lin.weight._storage is fused._storage for lin in group):
            return self.__dict__["_w_t"]
        if any(lin.weight.requires_grad for lin in group):
            return None
        fused = shape.cat([lin.weight for lin in group], 0)
        rows = group[0].weight.shape[0]
        for i, lin in enumerate(group):
            lin.register_parameter("weight", fused.narrow(0, i * rows, rows))
        self.__dict__["_w"] = fused
        self.__dict__["_w_t"] = fused.t()
        return self.__dict__["_w_t"]

    def _split(self, t: Tensor, b: int, n: int) -> tuple[Tensor, ...]:
        """(B·L, n·h·d) -> n views (1, B, h, L, d)."""
        t = t.reshape(b, -1, n, self.heads, self.dim_head).permute(2, 0, 3, 1, 4)
        return tuple(t.narrow(0, i, 1) for i in range(n))

    def forward(self, x: Tensor, b: int, context: Tensor | None = None) -> Tensor:
        wt = self._fused_t()
        if wt is None:
            c = x if context is None else context
            q, k, v = (self._split(lin(t), b, 1)[0] for lin, t in (
                (self.to_q, x), (self.to_k, c), (self.to_v, c)))  # fmt: skip
        elif self.is_cross:
            (q,) = self._split(self.to_q(x), b, 1)
            k, v = self._split(context @ wt, b, 2)
        else:
            q, k, v = self._split(x @ wt, b, 3)
        o = _attention(q, k, v)  # (1, B, h, N, d)
        return self.to_out[0](o.permute(0, 1, 3, 2, 4).reshape(x.shape[0], -1))


def _attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(q kᵀ / √d) v over (..., N, d) queries, in blocks of queries when the scores
    would exceed ``ATTENTION_CHUNK_BYTES``."""
    n, s = q.shape[-2], k.shape[-2]
    matrices = q.numel // max(1, n * q.shape[-1])  # batch × heads
    rows = max(1, ATTENTION_CHUNK_BYTES // max(1, 4 * s * matrices))
    if rows >= n:
        return fused.scaled_dot_product_attention(q, k, v)
    parts = [fused.scaled_dot_product_attention(q.narrow(-2, i, min(rows, n - i)), k, v)
             for i in range(0, n, rows)]  # fmt: skip
    return shape.cat(parts, -2)


class GEGLU(nn.Module):
    """[a, g] = x W + b split in halves; a · gelu(g) (exact GELU). (N, dim) -> (N, inner)."""

    def __init__(self, vb, dim: int, inner: int):
        super().__init__()
        self.inner = inner
        self.proj = Linear(dim, 2 * inner, vb=vb.pp("proj"))

    def forward(self, x: Tensor) -> Tensor:
        h = self.proj(x)
        a, g = h.narrow(-1, 0, self.inner), h.narrow(-1, self.inner, self.inner)
        return a * elementwise.gelu_erf(g)


class FeedForward(nn.Module):
    """``net.0`` GEGLU (dim -> 4·dim), ``net.1`` dropout (identity here), ``net.2`` Linear."""

    def __init__(self, vb, dim: int, mult: int = 4):
        super().__init__()
        inner = dim * mult
        self.net = nn.ModuleList(
            [
                GEGLU(vb.pp("net").pp(0), dim, inner),
                nn.Identity(),
                Linear(inner, dim, vb=vb.pp("net").pp(2)),
            ]
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net[2](self.net[0](x))


class BasicTransformerBlock(nn.Module):
    """Pre-norm transformer layer on the tokens x (B·N, C) of B samples:
    x += attn1(norm1(x)); x += attn2(norm2(x), context); x += ff(norm3(x))."""

    def __init__(self, vb, dim: int, heads: int, dim_head: int, cross_dim: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, vb=vb.pp("norm1"))
        self.attn1 = Attention(vb.pp("attn1"), dim, heads, dim_head, None)
        self.norm2 = nn.LayerNorm(dim, vb=vb.pp("norm2"))
        self.attn2 = Attention(vb.pp("attn2"), dim, heads, dim_head, cross_dim)
        self.norm3 = nn.LayerNorm(dim, vb=vb.pp("norm3"))
        self.ff = FeedForward(vb.pp("ff"), dim)

    def forward(self, x: Tensor, b: int, context: Tensor) -> Tensor:
        x = self.attn1(self.norm1(x), b) + x
        x = self.attn2(self.norm2(x), b, context) + x
        return self.ff(self.norm3(x)) + x


class Transformer2DModel(nn.Module):
    """Spatial transformer: x (B, C, H, W) -> GroupNorm (ε 1e-6) -> tokens (B·HW, C) ->
    ``proj_in`` -> ``layers`` × BasicTransformerBlock (cross-attending to the context
    (B·S, D)) -> ``proj_out`` -> (B, C, H, W) + x. ``linear`` projections are Linear layers
    (SDXL), else 1×1 convolutions applied before / after the token reshape (SD 1.x)."""

    def __init__(self, vb, channels: int, heads: int, layers: int, cross_dim: int,
                 groups: int, linear: bool):  # fmt: skip
        super().__init__()
        self.linear = linear
        self.norm = nn.GroupNorm(groups, channels, 1e-6, vb=vb.pp("norm"))
        if linear:
            self.proj_in = Linear(channels, channels, vb=vb.pp("proj_in"))
            self.proj_out = Linear(channels, channels, vb=vb.pp("proj_out"))
        else:
            self.proj_in = nn.Conv2d(channels, channels, 1, vb=vb.pp("proj_in"))
            self.proj_out = nn.Conv2d(channels, channels, 1, vb=vb.pp("proj_out"))
        blocks = vb.pp("transformer_blocks")
        self.transformer_blocks = nn.ModuleList(
            BasicTransformerBlock(blocks.pp(i), channels, heads, channels // heads, cross_dim)
            for i in range(layers)
        )

    def forward(self, x: Tensor, context: Tensor) -> Tensor:
        b, c, h, w = x.shape
        t = self.norm(x)
        if not self.linear:
            t = self.proj_in(t)
        t = t.permute(0, 2, 3, 1).reshape(b * h * w, c)
        if self.linear:
            t = self.proj_in(t)
        for block in self.transformer_blocks:
            t = block(t, b, context)
        if self.linear:
            t = self.proj_out(t)
        t = t.reshape(b, h, w, c).permute(0, 3, 1, 2)
        if not self.linear:
            t = self.proj_out(t)
        return t + x


class Downsample2D(nn.Module):
    """3×3 convolution with stride 2 and padding 1: (B, C, H, W) -> (B, C, ⌈H/2⌉, ⌈W/2⌉)."""

    def __init__(self, vb, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2, padding=1, vb=vb.pp("conv"))

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x)


class Upsample2D(nn.Module):
    """Nearest-neighbour ×2 (or to ``size``, the skip connection's H, W) then a 3×3 conv."""

    def __init__(self, vb, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, vb=vb.pp("conv"))

    def forward(self, x: Tensor, size: tuple[int, int] | None = None) -> Tensor:
        if size is None or tuple(size) == (2 * x.shape[2], 2 * x.shape[3]):
            x = pool.upsample_nearest2d(x, scale_factor=2)
        else:
            x = pool.upsample_nearest2d(x, size=tuple(size))
        return self.conv(x)


class DownBlock(nn.Module):
    """``DownBlock2D`` (``heads`` = 0: resnets only) or ``CrossAttnDownBlock2D`` (a spatial
    transformer after each resnet), then an optional Downsample2D. ``forward`` returns the
    output and the skip connections (one per resnet, one after the downsampler)."""

    def __init__(self, vb, in_ch: int, out_ch: int, temb_ch: int, layers: int, *, groups: int,
                 eps: float, heads: int = 0, transformer_layers: int = 1, cross_dim: int = 0,
                 linear: bool = True, downsample: bool = False):  # fmt: skip
        super().__init__()
        res, att = vb.pp("resnets"), vb.pp("attentions")
        self.resnets = nn.ModuleList(
            ResnetBlock2D(res.pp(i), in_ch if i == 0 else out_ch, out_ch, temb_ch, groups, eps)
            for i in range(layers)
        )
        self.attentions = nn.ModuleList(
            Transformer2DModel(
                att.pp(i), out_ch, heads, transformer_layers, cross_dim, groups, linear
            )  # fmt: skip
            for i in range(layers if heads else 0)
        )
        self.downsamplers = nn.ModuleList(
            [Downsample2D(vb.pp("downsamplers").pp(0), out_ch)] if downsample else []
        )

    def forward(self, x: Tensor, temb: Tensor, context: Tensor) -> tuple[Tensor, list[Tensor]]:
        skips = []
        for i, resnet in enumerate(self.resnets):
            x = resnet(x, temb)
            if len(self.attentions):
                x = self.attentions[i](x, context)
            skips.append(x)
        for down in self.downsamplers:
            x = down(x)
            skips.append(x)
        return x, skips


class UpBlock(nn.Module):
    """``UpBlock2D`` / ``CrossAttnUpBlock2D``: each resnet takes the input concatenated (on
    channels) with the last remaining skip connection; an optional Upsample2D at the end.

    Resnet i reads ``prev_ch`` (i = 0) or ``out_ch`` channels plus the skip's: ``in_ch`` for
    the last resnet (the skip from the level below), ``out_ch`` otherwise.
    """

    def __init__(self, vb, in_ch: int, prev_ch: int, out_ch: int, temb_ch: int, layers: int, *,
                 groups: int, eps: float, heads: int = 0, transformer_layers: int = 1,
                 cross_dim: int = 0, linear: bool = True, upsample: bool = False):  # fmt: skip
        super().__init__()
        res, att = vb.pp("resnets"), vb.pp("attentions")
        resnets = []
        for i in range(layers):
            skip_ch = in_ch if i == layers - 1 else out_ch
            base = prev_ch if i == 0 else out_ch
            resnets.append(ResnetBlock2D(res.pp(i), base + skip_ch, out_ch, temb_ch, groups, eps))
        self.resnets = nn.ModuleList(resnets)
        self.attentions = nn.ModuleList(
            Transformer2DModel(
                att.pp(i), out_ch, heads, transformer_layers, cross_dim, groups, linear
            )  # fmt: skip
            for i in range(layers if heads else 0)
        )
        self.upsamplers = nn.ModuleList(
            [Upsample2D(vb.pp("upsamplers").pp(0), out_ch)] if upsample else []
        )

    def forward(self, x: Tensor, skips: list[Tensor], temb: Tensor, context: Tensor,
                size: tuple[int, int] | None = None) -> Tensor:  # fmt: skip
        """Pops ``len(resnets)`` skip connections off the end of ``skips``."""
        for i, resnet in enumerate(self.resnets):
            x = resnet(shape.cat([x, skips.pop()], 1), temb)
            if len(self.attentions):
                x = self.attentions[i](x, context)
        for up in self.upsamplers:
            x = up(x, size)
        return x


class MidBlock(nn.Module):
    """``UNetMidBlock2DCrossAttn``: resnet, spatial transformer, resnet."""

    def __init__(self, vb, channels: int, temb_ch: int, *, groups: int, eps: float, heads: int,
                 transformer_layers: int, cross_dim: int, linear: bool):  # fmt: skip
        super().__init__()
        res = vb.pp("resnets")
        self.resnets = nn.ModuleList(
            ResnetBlock2D(res.pp(i), channels, channels, temb_ch, groups, eps) for i in range(2)
        )
        self.attentions = nn.ModuleList(
            [
                Transformer2DModel(
                    vb.pp("attentions").pp(0),
                    channels,
                    heads,
                    transformer_layers,
                    cross_dim,
                    groups,
                    linear,
                )  # fmt: skip
            ]
        )

    def forward(self, x: Tensor, temb: Tensor, context: Tensor) -> Tensor:
        x = self.resnets[0](x, temb)
        x = self.attentions[0](x, context)
        return self.resnets[1](x, temb)
