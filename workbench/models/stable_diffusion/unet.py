"""The Stable Diffusion XL UNet: diffusers' ``UNet2DConditionModel`` as SDXL configures it,
loading the diffusers checkpoint names as they are (also the fp16 variant).

    noise = unet(latents, t, context, text_embeds, time_ids)

- timestep t -> sinusoidal features (``time_proj``, C₀ = block_out_channels[0] wide, cos
  first with ``flip_sin_to_cos``) -> ``time_embedding`` (Linear, SiLU, Linear) = e_t (B, 4C₀);
- SDXL micro-conditioning (``addition_embed_type="text_time"``): every time id (original
  h, w, crop top, left, target h, w) gets its own sinusoidal features (``add_time_proj``,
  ``addition_time_embed_dim`` wide), concatenated after the pooled text embedding and mapped
  by ``add_embedding`` (Linear, SiLU, Linear); e = e_t + e_add;
- ``conv_in`` -> down blocks (resnets, spatial transformers that cross-attend to the text
  context (B, S, 2048), stride-2 downsamplers), keeping every block's output as a skip
  connection -> mid block -> up blocks (each resnet reads the input concatenated with a skip
  connection, nearest ×2 upsamplers) -> GroupNorm, SiLU, ``conv_out``.

The computation runs in the weights' dtype (the VarBuilder's); inputs are cast to it. The
sinusoidal features are computed in f32 on the host, as diffusers does. Load a diffusers
``unet/`` folder with ``UNet2DConditionModel.from_dir(path, dtype=..., variant="fp16")``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ... import nn
from ...errors import ShapeError
from ...ops import creation, elementwise, shape
from ...tensor import Tensor
from .load import config_dict
from .unet_blocks import DownBlock, Linear, MidBlock, UpBlock

__all__ = ["SDXL_BASE", "UNet2DConditionModel", "UNetConfig"]

_DOWN = ("DownBlock2D", "CrossAttnDownBlock2D")
_UP = ("UpBlock2D", "CrossAttnUpBlock2D")
# config keys whose non-default values this implementation does not cover
_UNSUPPORTED = {
    "act_fn": "silu",
    "center_input_sample": False,
    "class_embed_type": None,
    "num_class_embeds": None,
    "dual_cross_attention": False,
    "only_cross_attention": False,
    "encoder_hid_dim": None,
    "encoder_hid_dim_type": None,
    "time_cond_proj_dim": None,
    "time_embedding_type": "positional",
    "time_embedding_act_fn": None,
    "timestep_post_act": None,
    "resnet_time_scale_shift": "default",
    "resnet_skip_time_act": False,
    "resnet_out_scale_factor": 1.0,
    "mid_block_scale_factor": 1,
    "mid_block_type": "UNetMidBlock2DCrossAttn",
    "cross_attention_norm": None,
    "attention_type": "default",
    "downsample_padding": 1,
    "class_embeddings_concat": False,
}


def _per_block(value, n: int, what: str) -> tuple:
    if isinstance(value, list | tuple):
        if len(value) != n:
            raise ValueError(f"UNetConfig: {what} needs {n} values (one per block), found {value}")
        return tuple(value)
    return (value,) * n


@dataclass(frozen=True)
class UNetConfig:
    """The diffusers ``config.json`` keys the SDXL UNet needs (defaults: SDXL base 1.0).

    As in diffusers, ``attention_head_dim`` holds the NUMBER of attention heads per block
    (a historical misnomer; ``num_attention_heads`` wins when set); the head size is
    channels / heads. Per-block values may be given as one int; they are stored as tuples.
    """

    sample_size: int = 128
    in_channels: int = 4
    out_channels: int = 4
    block_out_channels: tuple[int, ...] = (320, 640, 1280)
    down_block_types: tuple[str, ...] = ("DownBlock2D", "CrossAttnDownBlock2D",
                                         "CrossAttnDownBlock2D")  # fmt: skip
    up_block_types: tuple[str, ...] = ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D")
    layers_per_block: tuple[int, ...] | int = 2
    transformer_layers_per_block: tuple[int, ...] | int = (1, 2, 10)
    reverse_transformer_layers_per_block: tuple[int, ...] | None = None
    attention_head_dim: tuple[int, ...] | int = (5, 10, 20)
    num_attention_heads: tuple[int, ...] | int | None = None
    cross_attention_dim: tuple[int, ...] | int = 2048
    norm_num_groups: int = 32
    norm_eps: float = 1e-5
    use_linear_projection: bool = True
    flip_sin_to_cos: bool = True
    freq_shift: float = 0
    time_embedding_dim: int | None = None
    conv_in_kernel: int = 3
    conv_out_kernel: int = 3
    addition_embed_type: str | None = "text_time"
    addition_time_embed_dim: int = 256
    projection_class_embeddings_input_dim: int = 2816
    upcast_attention: bool | None = False

    def __post_init__(self) -> None:
        n = len(self.block_out_channels)
        set_ = object.__setattr__
        set_(self, "block_out_channels", tuple(self.block_out_channels))
        set_(self, "down_block_types", tuple(self.down_block_types))
        set_(self, "up_block_types", tuple(self.up_block_types))
        for key in ("layers_per_block", "transformer_layers_per_block", "attention_head_dim",
                    "cross_attention_dim"):  # fmt: skip
            set_(self, key, _per_block(getattr(self, key), n, key))
            if any(isinstance(v, list | tuple) for v in getattr(self, key)):
                raise NotImplementedError(f"UNetConfig: per-resnet {key} is not supported")
        if self.num_attention_heads is not None:
            set_(self, "num_attention_heads", _per_block(self.num_attention_heads, n, "heads"))
        if self.reverse_transformer_layers_per_block is not None:
            value = self.reverse_transformer_layers_per_block
            if any(isinstance(v, list | tuple) for v in value):
                raise NotImplementedError(
                    "UNetConfig: per-resnet reverse_transformer_layers_per_block is not supported"
                )
            set_(self, "reverse_transformer_layers_per_block", _per_block(value, n, "reverse"))
        for what, types, allowed in (("down_block_types", self.down_block_types, _DOWN),
                                     ("up_block_types", self.up_block_types, _UP)):  # fmt: skip
            bad = [t for t in types if t not in allowed]
            if bad or len(types) != n:
                raise NotImplementedError(
                    f"UNetConfig: {what} must be {n} of {', '.join(allowed)}, found {types}"
                )
        if self.addition_embed_type not in (None, "text_time"):
            raise NotImplementedError(
                "UNetConfig: addition_embed_type must be 'text_time' or None, found "
                f"{self.addition_embed_type!r}"
            )

    @classmethod
    def from_json(cls, source: str | os.PathLike | dict[str, Any]) -> UNetConfig:
        """From diffusers' ``config.json`` (a path, a folder holding it, or the dict).
        Keys this class does not use are ignored unless they ask for something it does not
        implement (a class embedding, a different resnet time conditioning, ...)."""
        source = config_dict(source)
        for key, default in _UNSUPPORTED.items():
            value = source.get(key, default)
            values = value if isinstance(value, list | tuple) else [value]  # per block
            if any(v != default for v in values):
                raise NotImplementedError(
                    f"UNetConfig: {key}={value!r} is not supported (only {default!r})"
                )
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in source.items() if k in names})

    @property
    def heads(self) -> tuple[int, ...]:
        """Attention heads per down block (diffusers: num_attention_heads or
        attention_head_dim)."""
        return self.num_attention_heads or self.attention_head_dim

    @property
    def time_embed_dim(self) -> int:
        return self.time_embedding_dim or 4 * self.block_out_channels[0]


SDXL_BASE = UNetConfig()  # stabilityai/stable-diffusion-xl-base-1.0 (and sdxl-turbo) unet/


def timestep_features(t: np.ndarray, dim: int, flip_sin_to_cos: bool, shift: float) -> np.ndarray:
    """Sinusoidal features of timesteps t (N,) -> (N, dim), f32, as diffusers'
    ``get_timestep_embedding``: with half = dim / 2 and f_k = 10000^(-k / (half - shift)),
    [sin(t f), cos(t f)] (cos first when ``flip_sin_to_cos``), zero-padded to an odd dim."""
    half = dim // 2
    exponent = np.arange(half, dtype=np.float32) * np.float32(-math.log(10000))
    exponent = exponent / np.float32(half - shift)
    freqs = np.exp(exponent.astype(np.float64)).astype(np.float32)  # correctly rounded
    args = t.astype(np.float32)[:, None] * freqs[None, :]
    sin, cos = np.sin(args), np.cos(args)
    parts = [cos, sin] if flip_sin_to_cos else [sin, cos]
    if dim % 2:
        parts.append(np.zeros((len(t), 1), np.float32))
    return np.concatenate(parts, axis=1)


class TimestepEmbedding(nn.Module):
    """``linear_2(silu(linear_1(x)))``: (B, in) -> (B, out)."""

    def __init__(self, vb, in_dim: int, out_dim: int):
        super().__init__()
        self.linear_1 = Linear(in_dim, out_dim, vb=vb.pp("linear_1"))
        self.linear_2 = Linear(out_dim, out_dim, vb=vb.pp("linear_2"))

    def forward(self, x: Tensor) -> Tensor:
        return self.linear_2(elementwise.silu(self.linear_1(x)))


def _host(value) -> np.ndarray:
    """A timestep / time-id input (number, array or tensor) as a numpy array."""
    return value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)


class UNet2DConditionModel(nn.Module):
    """The SDXL denoiser: ε (or v) prediction for noisy latents (B, 4, h, w); see the module
    docstring for the maths and ``forward`` for the inputs."""

    def __init__(self, vb, cfg: UNetConfig = SDXL_BASE):
        super().__init__()
        self.cfg = cfg
        ch = cfg.block_out_channels
        n = len(ch)
        temb = cfg.time_embed_dim
        groups, eps, linear = cfg.norm_num_groups, cfg.norm_eps, cfg.use_linear_projection
        heads, tlayers = cfg.heads, cfg.transformer_layers_per_block
        self.conv_in = nn.Conv2d(
            cfg.in_channels, ch[0], cfg.conv_in_kernel, padding=(cfg.conv_in_kernel - 1) // 2,
            vb=vb.pp("conv_in"),
        )  # fmt: skip
        self.time_embedding = TimestepEmbedding(vb.pp("time_embedding"), ch[0], temb)
        self.add_embedding = None
        if cfg.addition_embed_type == "text_time":
            self.add_embedding = TimestepEmbedding(
                vb.pp("add_embedding"), cfg.projection_class_embeddings_input_dim, temb
            )
        downs, out = [], ch[0]
        for i, kind in enumerate(cfg.down_block_types):
            inp, out = out, ch[i]
            attn = dict(heads=heads[i], transformer_layers=tlayers[i],
                        cross_dim=cfg.cross_attention_dim[i], linear=linear)  # fmt: skip
            downs.append(
                DownBlock(
                    vb.pp("down_blocks").pp(i),
                    inp,
                    out,
                    temb,
                    cfg.layers_per_block[i],
                    groups=groups,
                    eps=eps,
                    downsample=i < n - 1,
                    **(attn if kind == "CrossAttnDownBlock2D" else {}),
                )
            )
        self.down_blocks = nn.ModuleList(downs)
        self.mid_block = MidBlock(
            vb.pp("mid_block"), ch[-1], temb, groups=groups, eps=eps, heads=heads[-1],
            transformer_layers=tlayers[-1], cross_dim=cfg.cross_attention_dim[-1], linear=linear,
        )  # fmt: skip
        rch, rheads = ch[::-1], heads[::-1]
        rlayers, rcross = cfg.layers_per_block[::-1], cfg.cross_attention_dim[::-1]
        rtl = cfg.reverse_transformer_layers_per_block or tlayers[::-1]
        ups, out = [], rch[0]
        for i, kind in enumerate(cfg.up_block_types):
            prev, out, inp = out, rch[i], rch[min(i + 1, n - 1)]
            attn = dict(heads=rheads[i], transformer_layers=rtl[i], cross_dim=rcross[i],
                        linear=linear)  # fmt: skip
            ups.append(
                UpBlock(
                    vb.pp("up_blocks").pp(i),
                    inp,
                    prev,
                    out,
                    temb,
                    rlayers[i] + 1,
                    groups=groups,
                    eps=eps,
                    upsample=i < n - 1,
                    **(attn if kind == "CrossAttnUpBlock2D" else {}),
                )
            )
        self.up_blocks = nn.ModuleList(ups)
        self.conv_norm_out = nn.GroupNorm(groups, ch[0], eps, vb=vb.pp("conv_norm_out"))
        self.conv_out = nn.Conv2d(
            ch[0], cfg.out_channels, cfg.conv_out_kernel, padding=(cfg.conv_out_kernel - 1) // 2,
            vb=vb.pp("conv_out"),
        )  # fmt: skip

    @property
    def dtype(self):
        return self.conv_in.weight.dtype

    @property
    def device(self):
        return self.conv_in.weight.device

    @classmethod
    def from_dir(cls, folder: str | os.PathLike, dtype=None, device=None,
                 variant: str | None = None) -> UNet2DConditionModel:  # fmt: skip
        """A diffusers ``unet/`` folder: ``config.json`` and
        ``diffusion_pytorch_model[.variant].safetensors`` (memory-mapped; or its sharded
        ``.index.json``). ``variant="fp16"`` reads the fp16 file; ``dtype`` converts the
        weights (None keeps the stored dtype, which then is the compute dtype)."""
        folder = Path(os.path.expanduser(str(folder)))
        name = "diffusion_pytorch_model" + (f".{variant}" if variant else "") + ".safetensors"
        path = folder / name
        if not path.exists() and path.with_name(name + ".index.json").exists():
            path = path.with_name(name + ".index.json")
        if not path.exists():
            found = ", ".join(sorted(p.name for p in folder.glob("*"))) if folder.is_dir() else ""
            raise FileNotFoundError(
                f"UNet2DConditionModel: no {name} in {folder} (found: {found or 'nothing'})"
            )
        vb = nn.VarBuilder.from_safetensors(path, dtype=dtype, device=device)
        return cls(vb, UNetConfig.from_json(folder / "config.json"))

    # -- inputs ----------------------------------------------------------------------------
    def _as_model(self, t, what: str, ndim: int) -> Tensor:
        """``t`` (a tensor or array) checked for ``ndim`` dims, in the model's dtype."""
        if not isinstance(t, Tensor):
            t = creation.tensor(np.asarray(t, np.float32), device=self.device)
        if t.ndim != ndim:
            raise ShapeError(f"UNet2DConditionModel: {what} must have {ndim} dims, found {t.shape}")
        return t.to_dtype(self.dtype) if t.dtype is not self.dtype else t

    def _embedding(self, timestep, batch: int, text_embeds, time_ids) -> Tensor:
        """e = time_embedding(features(t)) (+ add_embedding([text_embeds, features(ids)]))."""
        cfg = self.cfg
        t = _host(timestep).reshape(-1)
        if t.shape[0] not in (1, batch):
            raise ShapeError(
                f"UNet2DConditionModel: timestep must be a number or have 1 or B={batch} "
                f"values, found {t.shape[0]}"
            )
        t = np.broadcast_to(t, (batch,))
        feats = timestep_features(t, cfg.block_out_channels[0], cfg.flip_sin_to_cos,
                                  cfg.freq_shift)  # fmt: skip
        emb = self.time_embedding(self._as_model(feats, "time features", 2))
        if self.add_embedding is None:
            return emb
        if text_embeds is None or time_ids is None:
            raise ValueError(
                "UNet2DConditionModel: addition_embed_type='text_time' needs text_embeds "
                "(B, D) and time_ids (B, 6)"
            )
        text = self._as_model(text_embeds, "text_embeds", 2)
        ids = _host(time_ids)
        d = cfg.addition_time_embed_dim
        want = cfg.projection_class_embeddings_input_dim
        if ids.ndim != 2 or ids.shape[0] != batch or text.shape[0] != batch:
            raise ShapeError(
                f"UNet2DConditionModel: text_embeds and time_ids must be (B={batch}, D) and "
                f"(B={batch}, 6), found {text.shape} and {ids.shape}"
            )
        if text.shape[1] + ids.shape[1] * d != want:
            raise ShapeError(
                f"UNet2DConditionModel: add_embedding takes {want} features = text_embeds "
                f"dim + {d} per time id; found text_embeds {text.shape} and time_ids "
                f"{ids.shape} ({text.shape[1]} + {ids.shape[1]}·{d})"
            )
        id_feats = timestep_features(ids.reshape(-1), d, cfg.flip_sin_to_cos, cfg.freq_shift)
        id_feats = self._as_model(id_feats.reshape(batch, -1), "time id features", 2)
        return emb + self.add_embedding(shape.cat([text, id_feats], 1))

    # -- forward ---------------------------------------------------------------------------
    def forward(self, sample: Tensor, timestep, encoder_hidden_states: Tensor,
                text_embeds: Tensor | None = None, time_ids=None) -> Tensor:  # fmt: skip
        """The model output (B, out_channels, h, w) (ε for SDXL).

        sample: (B, 4, h, w) latents; timestep: a number or (B,) (or (1,)) values;
        encoder_hidden_states: (B, S, cross_attention_dim) text context; text_embeds:
        (B, 1280) pooled text embedding; time_ids: (B, 6) = original (h, w), crop top-left
        (y, x), target (h, w) in pixels.
        """
        cfg = self.cfg
        x = self._as_model(sample, "sample", 4)
        if x.shape[1] != cfg.in_channels:
            raise ShapeError(
                f"UNet2DConditionModel: sample must be (B, {cfg.in_channels}, h, w), found "
                f"{x.shape}"
            )
        batch = x.shape[0]
        context = self._as_model(encoder_hidden_states, "encoder_hidden_states", 3)
        cross = cfg.cross_attention_dim[0]
        if context.shape[0] != batch or context.shape[2] != cross:
            raise ShapeError(
                f"UNet2DConditionModel: encoder_hidden_states must be (B={batch}, S, {cross}), "
                f"found {context.shape}"
            )
        temb = elementwise.silu(self._embedding(timestep, batch, text_embeds, time_ids))
        context = context.reshape(-1, cross)
        x = self.conv_in(x)
        skips = [x]
        for block in self.down_blocks:
            x, more = block(x, temb, context)
            skips.extend(more)
        x = self.mid_block(x, temb, context)
        for block in self.up_blocks:
            # the size of the skip connection below this block's, for odd sizes (diffusers'
            # upsample_size)
            below = skips[-len(block.resnets) - 1] if len(skips) > len(block.resnets) else None
            x = block(x, skips, temb, context, None if below is None else below.shape[2:])
        x = elementwise.silu(self.conv_norm_out(x))
        return self.conv_out(x)
