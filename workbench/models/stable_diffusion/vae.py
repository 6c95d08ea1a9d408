"""The SDXL VAE: diffusers' ``AutoencoderKL`` (Rombach et al., 2022) with diffusers' tensor
names, so ``vae/diffusion_pytorch_model.safetensors`` loads as it is.

Shapes, for ``block_out_channels`` (c₀, ..., c_{L-1}) (SDXL: 128, 256, 512, 512) and a
downsampling factor f = 2^(L-1) (SDXL: 8):

- encoder: x (B, 3, H, W) in [-1, 1] -> conv_in -> L down blocks (``layers_per_block`` resnets,
  then a stride-2 conv after a (0, 1, 0, 1) zero pad, except the last block) -> mid block
  (resnet, single-head self-attention over the H/f·W/f positions, resnet) -> GroupNorm, SiLU,
  conv_out -> ``quant_conv`` (1×1) -> (B, 2·latent, H/f, W/f) = [mean, logvar].
- decoder: z (B, latent, h, w) -> ``post_quant_conv`` (1×1) -> conv_in -> mid block -> L up
  blocks (``layers_per_block`` + 1 resnets, then nearest ×2 and a 3×3 conv, except the last)
  -> GroupNorm, SiLU, conv_out -> (B, 3, f·h, f·w).

Every resnet is y = x' + conv2(SiLU(GN(conv1(SiLU(GN(x)))))) with x' = x, or a 1×1
``conv_shortcut`` of x when the channels change; GroupNorm has ``norm_num_groups`` groups and
ε = 1e-6. The posterior is the diagonal Gaussian N(mean, exp(logvar)) with logvar clamped to
[-30, 20]. The UNet works on z·``scaling_factor`` (SDXL 0.13025): divide by it before decoding.

The SDXL VAE overflows in f16 (``force_upcast=True``: decode in f32); the fp16-fix VAE
(``madebyollin/sdxl-vae-fp16-fix``, same shapes, finetuned to keep activations small) runs in
f16 (``force_upcast=False``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ... import nn
from ...errors import ShapeError
from ...ops import creation, elementwise, fused, pool, shape
from ...tensor import Tensor
from .load import config_dict

__all__ = [
    "SDXL_VAE", "SDXL_VAE_FP16_FIX", "AutoencoderKL", "DiagonalGaussian", "VaeConfig",
]  # fmt: skip

SDXL_VAE_REPO = "stabilityai/stable-diffusion-xl-base-1.0"  # subfolder "vae"
FP16_FIX_VAE_REPO = "madebyollin/sdxl-vae-fp16-fix"  # files at the root
# queries per attention call in the mid blocks: scores of at most 4096 × HW values at a time
_QUERY_CHUNK = 4096

# config lists kept as tuples (the config is frozen and hashable)
_TUPLE_KEYS = ("block_out_channels", "down_block_types", "up_block_types", "latents_mean",
               "latents_std")  # fmt: skip


@dataclass(frozen=True)
class VaeConfig:
    """diffusers' ``AutoencoderKL`` config keys (those the model reads; others are ignored)."""

    in_channels: int = 3
    out_channels: int = 3
    latent_channels: int = 4
    block_out_channels: tuple[int, ...] = (128, 256, 512, 512)
    layers_per_block: int = 2
    norm_num_groups: int = 32
    act_fn: str = "silu"
    down_block_types: tuple[str, ...] = ("DownEncoderBlock2D",) * 4
    up_block_types: tuple[str, ...] = ("UpDecoderBlock2D",) * 4
    sample_size: int = 1024
    scaling_factor: float = 0.13025
    shift_factor: float | None = None
    latents_mean: tuple[float, ...] | None = None  # per-channel latent statistics (not SDXL)
    latents_std: tuple[float, ...] | None = None
    force_upcast: bool = True
    use_quant_conv: bool = True
    use_post_quant_conv: bool = True
    mid_block_add_attention: bool = True

    @classmethod
    def from_json(cls, path_or_dict: str | os.PathLike | dict[str, Any]) -> VaeConfig:
        """From diffusers' ``config.json`` (a path, a folder holding it, or the dict)."""
        raw = config_dict(path_or_dict)
        if raw.get("_class_name", "AutoencoderKL") != "AutoencoderKL":
            raise ValueError(
                f"VaeConfig: expected an AutoencoderKL config, found {raw['_class_name']}"
            )
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in raw.items() if k in known and v is not None}
        for key in _TUPLE_KEYS:
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)

    @property
    def downsample_factor(self) -> int:
        """f: pixels per latent along each side (8 for SDXL)."""
        return 2 ** (len(self.block_out_channels) - 1)


# ``stabilityai/stable-diffusion-xl-base-1.0/vae/config.json`` (sdxl-turbo ships the same VAE)
SDXL_VAE = VaeConfig()
# ``madebyollin/sdxl-vae-fp16-fix``: same architecture and scale, safe to run in f16
SDXL_VAE_FP16_FIX = VaeConfig(force_upcast=False)


# -- blocks ------------------------------------------------------------------------------------
class ResnetBlock2D(nn.Module):
    """y = shortcut(x) + conv2(SiLU(GN₂(conv1(SiLU(GN₁(x)))))); x (B, C_in, H, W) ->
    (B, C_out, H, W). No time embedding (the VAE's resnets have none)."""

    def __init__(self, vb, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_channels, eps=1e-6, vb=vb.pp("norm1"))
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, vb=vb.pp("conv1"))
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=1e-6, vb=vb.pp("norm2"))
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, vb=vb.pp("conv2"))
        self.conv_shortcut = None
        if in_channels != out_channels:
            self.conv_shortcut = nn.Conv2d(in_channels, out_channels, 1, vb=vb.pp("conv_shortcut"))

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv1(elementwise.silu(self.norm1(x)))
        h = self.conv2(elementwise.silu(self.norm2(h)))
        return (x if self.conv_shortcut is None else self.conv_shortcut(x)) + h


class AttentionBlock(nn.Module):
    """Single-head self-attention over the H·W positions with a GroupNorm in front and a
    residual: y = x + W_o softmax(q kᵀ/√C) v, (q, k, v) = W_{q,k,v} GN(x) + b, per position.

    Names as diffusers (``group_norm``, ``to_q``, ``to_k``, ``to_v``, ``to_out.0``); the old
    ``query``/``key``/``value``/``proj_attn`` names of early diffusers checkpoints load too.
    """

    def __init__(self, vb, channels: int, groups: int):
        super().__init__()
        self.group_norm = nn.GroupNorm(groups, channels, eps=1e-6, vb=vb.pp("group_norm"))
        legacy = vb.contains("query.weight") and not vb.contains("to_q.weight")
        names = ("query", "key", "value") if legacy else ("to_q", "to_k", "to_v")
        self.to_q = nn.Linear(channels, channels, vb=vb.pp(names[0]))
        self.to_k = nn.Linear(channels, channels, vb=vb.pp(names[1]))
        self.to_v = nn.Linear(channels, channels, vb=vb.pp(names[2]))
        out = vb.pp("proj_attn") if legacy else vb.pp("to_out").pp(0)
        self.to_out = nn.Linear(channels, channels, vb=out)

    def forward(self, x: Tensor) -> Tensor:
        b, c, h, w = x.shape
        n = h * w
        tokens = self.group_norm(x).reshape(b, c, n).transpose(1, 2)  # (B, HW, C)
        q, k, v = self.to_q(tokens), self.to_k(tokens), self.to_v(tokens)
        if n <= _QUERY_CHUNK:
            attn = fused.scaled_dot_product_attention(q, k, v)
        else:  # a 1024² image has 128² tokens: bound the (chunk, HW) score matrix
            parts = [
                fused.scaled_dot_product_attention(q.narrow(1, i, min(_QUERY_CHUNK, n - i)), k, v)
                for i in range(0, n, _QUERY_CHUNK)
            ]
            attn = shape.cat(parts, 1)
        return x + self.to_out(attn).transpose(1, 2).reshape(b, c, h, w)


class MidBlock(nn.Module):
    """resnet -> attention (``mid_block_add_attention``) -> resnet, at constant channels."""

    def __init__(self, vb, channels: int, groups: int, attention: bool):
        super().__init__()
        rvb = vb.pp("resnets")
        self.resnets = nn.ModuleList(
            [ResnetBlock2D(rvb.pp(i), channels, channels, groups) for i in range(2)]
        )
        self.attentions = nn.ModuleList(
            [AttentionBlock(vb.pp("attentions").pp(0), channels, groups)] if attention else []
        )

    def forward(self, x: Tensor) -> Tensor:
        x = self.resnets[0](x)
        for attn in self.attentions:
            x = attn(x)
        return self.resnets[1](x)


class Downsample2D(nn.Module):
    """Zero pad (left 0, right 1, top 0, bottom 1), then a 3×3 stride-2 conv:
    (B, C, H, W) -> (B, C, ⌊H/2⌋, ⌊W/2⌋)."""

    def __init__(self, vb, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2, vb=vb.pp("conv"))

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(pool.pad(x, (0, 1, 0, 1)))


class Upsample2D(nn.Module):
    """Nearest ×2, then a 3×3 conv: (B, C, H, W) -> (B, C, 2H, 2W)."""

    def __init__(self, vb, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, vb=vb.pp("conv"))

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(pool.upsample_nearest2d(x, scale_factor=2))


class _ResnetStack(nn.Module):
    """``layers`` resnet blocks, then an optional resampler stored under ``SAMPLER``
    (diffusers' ``DownEncoderBlock2D`` / ``UpDecoderBlock2D``)."""

    SAMPLER: tuple[str, type]

    def __init__(self, vb, in_channels, out_channels, layers, groups, resample: bool):
        super().__init__()
        rvb = vb.pp("resnets")
        self.resnets = nn.ModuleList(
            [
                ResnetBlock2D(
                    rvb.pp(i), in_channels if i == 0 else out_channels, out_channels, groups
                )
                for i in range(layers)
            ]
        )
        name, sampler = self.SAMPLER
        setattr(self, name, nn.ModuleList(
            [sampler(vb.pp(name).pp(0), out_channels)] if resample else []
        ))  # fmt: skip
        self._stages = (*self.resnets, *getattr(self, name))

    def forward(self, x: Tensor) -> Tensor:
        for layer in self._stages:
            x = layer(x)
        return x


class DownEncoderBlock2D(_ResnetStack):
    SAMPLER = ("downsamplers", Downsample2D)


class UpDecoderBlock2D(_ResnetStack):
    SAMPLER = ("upsamplers", Upsample2D)


def _check_config(cfg: VaeConfig) -> None:
    n = len(cfg.block_out_channels)
    if cfg.act_fn != "silu":
        raise NotImplementedError(f"AutoencoderKL: act_fn {cfg.act_fn!r}; only 'silu' is supported")
    for what, types, kind in (
        ("down_block_types", cfg.down_block_types, "DownEncoderBlock2D"),
        ("up_block_types", cfg.up_block_types, "UpDecoderBlock2D"),
    ):
        if len(types) != n or any(t != kind for t in types):
            raise NotImplementedError(
                f"AutoencoderKL: {what} must be {n} × {kind!r} (one per block_out_channels), "
                f"found {list(types)}"
            )


class Encoder(nn.Module):
    """x (B, C_in, H, W) -> (B, 2·latent, H/f, W/f)."""

    def __init__(self, vb, cfg: VaeConfig):
        super().__init__()
        ch, g = cfg.block_out_channels, cfg.norm_num_groups
        self.conv_in = nn.Conv2d(cfg.in_channels, ch[0], 3, padding=1, vb=vb.pp("conv_in"))
        dvb = vb.pp("down_blocks")
        self.down_blocks = nn.ModuleList(
            [
                DownEncoderBlock2D(
                    dvb.pp(i), ch[max(i - 1, 0)], c, cfg.layers_per_block, g, i < len(ch) - 1
                )
                for i, c in enumerate(ch)
            ]
        )
        self.mid_block = MidBlock(vb.pp("mid_block"), ch[-1], g, cfg.mid_block_add_attention)
        self.conv_norm_out = nn.GroupNorm(g, ch[-1], eps=1e-6, vb=vb.pp("conv_norm_out"))
        self.conv_out = nn.Conv2d(
            ch[-1], 2 * cfg.latent_channels, 3, padding=1, vb=vb.pp("conv_out")
        )

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv_in(x)
        for block in self.down_blocks:
            x = block(x)
        x = self.mid_block(x)
        return self.conv_out(elementwise.silu(self.conv_norm_out(x)))


class Decoder(nn.Module):
    """z (B, latent, h, w) -> (B, C_out, f·h, f·w)."""

    def __init__(self, vb, cfg: VaeConfig):
        super().__init__()
        ch, g = cfg.block_out_channels[::-1], cfg.norm_num_groups
        self.conv_in = nn.Conv2d(cfg.latent_channels, ch[0], 3, padding=1, vb=vb.pp("conv_in"))
        self.mid_block = MidBlock(vb.pp("mid_block"), ch[0], g, cfg.mid_block_add_attention)
        uvb = vb.pp("up_blocks")
        self.up_blocks = nn.ModuleList(
            [
                UpDecoderBlock2D(
                    uvb.pp(i), ch[max(i - 1, 0)], c, cfg.layers_per_block + 1, g, i < len(ch) - 1
                )
                for i, c in enumerate(ch)
            ]
        )
        self.conv_norm_out = nn.GroupNorm(g, ch[-1], eps=1e-6, vb=vb.pp("conv_norm_out"))
        self.conv_out = nn.Conv2d(ch[-1], cfg.out_channels, 3, padding=1, vb=vb.pp("conv_out"))

    def forward(self, z: Tensor) -> Tensor:
        x = self.mid_block(self.conv_in(z))
        for block in self.up_blocks:
            x = block(x)
        return self.conv_out(elementwise.silu(self.conv_norm_out(x)))


# -- the posterior -----------------------------------------------------------------------------
class DiagonalGaussian:
    """N(mean, diag(exp(logvar))) over latents (B, latent, h, w); logvar clamped to [-30, 20]
    as diffusers does."""

    def __init__(self, moments: Tensor):
        if moments.ndim != 4 or moments.shape[1] % 2:
            raise ShapeError(
                f"DiagonalGaussian: expected moments (B, 2·latent, h, w), found {moments.shape}"
            )
        self.mean, logvar = moments.chunk(2, 1)
        self.logvar = logvar.clamp(-30.0, 20.0)

    @property
    def std(self) -> Tensor:
        """exp(logvar / 2)."""
        return elementwise.exp(self.logvar * 0.5)

    @property
    def var(self) -> Tensor:
        return elementwise.exp(self.logvar)

    def sample(self, rng: np.random.Generator | None = None, noise: Tensor | None = None) -> Tensor:
        """mean + std · ε with ε ~ N(0, 1) drawn from ``rng`` (a new default generator when
        None), or the given ``noise`` (same shape as the mean)."""
        if noise is None:
            rng = np.random.default_rng() if rng is None else rng
            eps = rng.standard_normal(self.mean.shape, dtype=np.float32)
            noise = creation.from_numpy(eps, self.mean.device).to_dtype(self.mean.dtype)
        elif noise.shape != self.mean.shape:
            raise ShapeError(
                f"DiagonalGaussian.sample: noise {noise.shape} must have the mean's shape "
                f"{self.mean.shape}"
            )
        return self.mean + self.std * noise.to_dtype(self.mean.dtype)

    def mode(self) -> Tensor:
        return self.mean

    def __repr__(self) -> str:
        return f"DiagonalGaussian(mean {self.mean.shape}, {self.mean.dtype})"


# -- the autoencoder ---------------------------------------------------------------------------
class AutoencoderKL(nn.Module):
    """``encode(x) -> DiagonalGaussian`` and ``decode(z) -> image`` (see the module docstring).

    ``vb`` is the root of the VAE checkpoint (``encoder.conv_in.weight``, ``quant_conv.weight``,
    ``decoder.up_blocks.0.resnets.0.norm1.weight``, ...). Inputs are cast to the weights' dtype;
    for f16 weights of a ``force_upcast`` VAE, build it with ``vb.to_dtype(wb.f32)``.
    """

    def __init__(self, vb, cfg: VaeConfig):
        super().__init__()
        _check_config(cfg)
        self.cfg = cfg
        lat = cfg.latent_channels
        self.encoder = Encoder(vb.pp("encoder"), cfg)
        self.decoder = Decoder(vb.pp("decoder"), cfg)
        self.quant_conv = None
        if cfg.use_quant_conv:
            self.quant_conv = nn.Conv2d(2 * lat, 2 * lat, 1, vb=vb.pp("quant_conv"))
        self.post_quant_conv = None
        if cfg.use_post_quant_conv:
            self.post_quant_conv = nn.Conv2d(lat, lat, 1, vb=vb.pp("post_quant_conv"))

    @property
    def dtype(self):
        return self.encoder.conv_in.weight.dtype

    def _input(self, what: str, x: Tensor, channels: int) -> Tensor:
        if x.ndim != 4 or x.shape[1] != channels:
            raise ShapeError(
                f"AutoencoderKL.{what}: expected (B, {channels}, H, W), found {tuple(x.shape)}"
            )
        weight = self.encoder.conv_in.weight
        return x.to(weight.device).to_dtype(weight.dtype)

    def encode(self, x: Tensor) -> DiagonalGaussian:
        """x (B, C_in, H, W) in [-1, 1] -> the posterior over (B, latent, H/f, W/f)."""
        moments = self.encoder(self._input("encode", x, self.cfg.in_channels))
        if self.quant_conv is not None:
            moments = self.quant_conv(moments)
        return DiagonalGaussian(moments)

    def decode(self, z: Tensor) -> Tensor:
        """z (B, latent, h, w) (unscaled: latents / scaling_factor) -> (B, C_out, f·h, f·w),
        about [-1, 1]."""
        z = self._input("decode", z, self.cfg.latent_channels)
        if self.post_quant_conv is not None:
            z = self.post_quant_conv(z)
        return self.decoder(z)

    def forward(self, x: Tensor) -> Tensor:
        """decode(encode(x).mode())."""
        return self.decode(self.encode(x).mode())
