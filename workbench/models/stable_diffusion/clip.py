"""CLIP text transformer (Radford et al., 2021) as SDXL uses it: ViT-L/14's (``text_encoder``)
and OpenCLIP ViT-bigG/14's (``text_encoder_2``, with a projection), with transformers'
``CLIPTextModel`` / ``CLIPTextModelWithProjection`` semantics and tensor names.

For ids (B, T), T <= 77, width H, heads n, head size d = H / n:

    h_0 = token_embedding[ids] + position_embedding[0:T]                      (B, T, H)
    h_l = h_{l-1} + attn(ln1(h_{l-1})),  h_l = h_l + fc2(act(fc1(ln2(h_l))))  l = 1..L
    attn(x) = out_proj(softmax(q kᵀ / √d + causal) v), q, k, v = x W_{q,k,v}ᵀ + b per head
    last_hidden_state = final_layer_norm(h_L)
    pooled[b] = last_hidden_state[b, eos position of ids[b]]                   (B, H)
    text_embeds = pooled W_projᵀ                                               (B, P)

``hidden_states`` is (h_0, ..., h_L): h_L is *before* the final layer norm, as transformers'
``output_hidden_states``; SDXL conditions on h_{L-1} (``hidden_states[-2]``) of both encoders.
The eos position is the first ``argmax(ids)`` when the config has the legacy
``eos_token_id == 2`` (the eos has the largest id in CLIP's vocab), else the first position
holding ``eos_token_id``; act is quick_gelu ``x σ(1.702 x)`` (ViT-L) or exact GELU (bigG).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ... import dtype as dt
from ... import nn
from ...errors import DTypeError, ShapeError
from ...ops import creation, elementwise, fused
from ...tensor import Tensor
from .load import config_dict

ACTIVATIONS = ("quick_gelu", "gelu", "gelu_new", "gelu_pytorch_tanh")
_ID_DTYPES = (dt.i64, dt.i32, dt.u32, dt.i16)


@dataclass(frozen=True)
class ClipTextConfig:
    """Sizes of a CLIP text transformer (transformers' ``CLIPTextConfig`` keys).

    ``projection_dim`` is the width of ``text_projection`` (used with ``with_projection``);
    ``eos_token_id == 2`` selects the legacy argmax pooling (see the module docstring)."""

    vocab_size: int = 49408
    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    max_position_embeddings: int = 77
    hidden_act: str = "quick_gelu"
    layer_norm_eps: float = 1e-5
    projection_dim: int | None = 768
    eos_token_id: int = 2

    def __post_init__(self):
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"ClipTextConfig: hidden_act must be one of {', '.join(ACTIVATIONS)}, "
                f"found {self.hidden_act!r}"
            )
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"ClipTextConfig: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_json(cls, source: str | os.PathLike | dict) -> ClipTextConfig:
        """From transformers' ``config.json`` (a path, its folder, or the parsed dict; a full
        ``CLIPConfig``'s ``text_config`` too). Missing keys take transformers' defaults;
        unknown keys are ignored."""
        raw = config_dict(source)
        raw = raw.get("text_config", raw)
        values = {**_TRANSFORMERS_DEFAULTS}
        values.update({f.name: raw[f.name] for f in fields(cls) if f.name in raw})
        if isinstance(values["eos_token_id"], list):  # some configs list several
            values["eos_token_id"] = values["eos_token_id"][0]
        return cls(**values)


# transformers' CLIPTextConfig defaults (openai/clip-vit-base-patch32), for keys a file omits
_TRANSFORMERS_DEFAULTS = dict(
    vocab_size=49408,
    hidden_size=512,
    intermediate_size=2048,
    num_hidden_layers=12,
    num_attention_heads=8,
    max_position_embeddings=77,
    hidden_act="quick_gelu",
    layer_norm_eps=1e-5,
    projection_dim=512,
    eos_token_id=49407,
)

# SDXL's ``text_encoder`` (OpenAI CLIP ViT-L/14) and ``text_encoder_2`` (OpenCLIP ViT-bigG/14),
# as in stabilityai/stable-diffusion-xl-base-1.0's config.json files.
VIT_L14 = ClipTextConfig()
VIT_BIGG14 = ClipTextConfig(
    hidden_size=1280,
    intermediate_size=5120,
    num_hidden_layers=32,
    num_attention_heads=20,
    hidden_act="gelu",
    projection_dim=1280,
)


class ClipTextOutput(NamedTuple):
    """last_hidden_state (B, T, H); hidden_states: L + 1 tensors (B, T, H), embeddings
    first, the last before the final layer norm; pooled (B, H); text_embeds (B, P) or None."""

    last_hidden_state: Tensor
    hidden_states: tuple[Tensor, ...]
    pooled: Tensor
    text_embeds: Tensor | None


class ClipAttention(nn.Module):
    """Causal multi-head self-attention: (B, T, H) -> (B, T, H)."""

    def __init__(self, vb, cfg: ClipTextConfig):
        super().__init__()
        h = cfg.hidden_size
        self.num_heads = cfg.num_attention_heads
        self.q_proj = nn.Linear(h, h, vb=vb.pp("q_proj"))
        self.k_proj = nn.Linear(h, h, vb=vb.pp("k_proj"))
        self.v_proj = nn.Linear(h, h, vb=vb.pp("v_proj"))
        self.out_proj = nn.Linear(h, h, vb=vb.pp("out_proj"))

    def forward(self, x: Tensor) -> Tensor:
        b, t, h = x.shape
        n = self.num_heads

        def heads(y: Tensor) -> Tensor:  # (B, T, H) -> (B, n, T, d), a view
            return y.reshape(b, t, n, h // n).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        out = fused.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(out.transpose(1, 2).reshape(b, t, h))


class ClipMlp(nn.Module):
    """fc2(act(fc1(x))): (B, T, H) -> (B, T, I) -> (B, T, H)."""

    def __init__(self, vb, cfg: ClipTextConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size, vb=vb.pp("fc1"))
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size, vb=vb.pp("fc2"))
        self.act = cfg.hidden_act

    def forward(self, x: Tensor) -> Tensor:
        x = self.fc1(x)
        if self.act == "quick_gelu":
            x = x * elementwise.sigmoid(x * 1.702)
        elif self.act == "gelu":
            x = elementwise.gelu_erf(x)
        else:  # gelu_new / gelu_pytorch_tanh
            x = elementwise.gelu(x)
        return self.fc2(x)


class ClipEncoderLayer(nn.Module):
    """Pre-LN block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, vb, cfg: ClipTextConfig):
        super().__init__()
        eps = cfg.layer_norm_eps
        self.self_attn = ClipAttention(vb.pp("self_attn"), cfg)
        self.layer_norm1 = nn.LayerNorm(cfg.hidden_size, eps=eps, vb=vb.pp("layer_norm1"))
        self.mlp = ClipMlp(vb.pp("mlp"), cfg)
        self.layer_norm2 = nn.LayerNorm(cfg.hidden_size, eps=eps, vb=vb.pp("layer_norm2"))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


def _text_model_root(vb):
    """Where the transformer's tensors are: under ``text_model.`` (transformers 4 files, the
    published SDXL ones) or at the root (``CLIPTextModel`` saved by transformers 5)."""
    if not vb.contains("text_model.embeddings.token_embedding.weight") and vb.contains(
        "embeddings.token_embedding.weight"
    ):
        return vb
    return vb.pp("text_model")


class ClipTextModel(nn.Module):
    """CLIP's text transformer; ``vb`` is the checkpoint's root: ``text_model.embeddings.…``,
    ``text_model.encoder.layers.<i>.…``, ``text_model.final_layer_norm.…`` (or the same
    without ``text_model.``, as transformers 5 saves a ``CLIPTextModel``) and, with
    ``with_projection``, ``text_projection.weight``. ``forward(ids)`` -> ``ClipTextOutput``.

    ids: (B, T) integer tensor or numpy array (e.g. ``ClipTokenizer``'s output), T <= 77.
    """

    def __init__(self, vb, cfg: ClipTextConfig, with_projection: bool = False):
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        tm = _text_model_root(vb)
        emb = tm.pp("embeddings")
        self.token_embedding = nn.Embedding(cfg.vocab_size, h, vb=emb.pp("token_embedding"))
        self.position_embedding = nn.Embedding(
            cfg.max_position_embeddings, h, vb=emb.pp("position_embedding")
        )
        layers = tm.pp("encoder").pp("layers")
        self.layers = nn.ModuleList(
            [ClipEncoderLayer(layers.pp(i), cfg) for i in range(cfg.num_hidden_layers)]
        )
        self.final_layer_norm = nn.LayerNorm(
            h, eps=cfg.layer_norm_eps, vb=tm.pp("final_layer_norm")
        )
        self.text_projection = None
        if with_projection:
            if cfg.projection_dim is None:
                raise ValueError("ClipTextModel: with_projection needs cfg.projection_dim")
            self.text_projection = nn.Linear(
                h, cfg.projection_dim, bias=False, vb=vb.pp("text_projection")
            )

    @classmethod
    def from_dir(
        cls,
        path: str | os.PathLike,
        with_projection: bool | None = None,
        dtype=None,
        device=None,
        variant: str | None = None,
    ) -> ClipTextModel:
        """A diffusers ``text_encoder*`` folder: ``config.json`` + ``model.safetensors``
        (``model.<variant>.safetensors`` with ``variant="fp16"``). ``with_projection``
        defaults to what ``config.json``'s ``architectures`` says."""
        path = Path(os.path.expanduser(str(path)))
        raw = json.loads((path / "config.json").read_text(encoding="utf-8"))
        if with_projection is None:
            with_projection = "CLIPTextModelWithProjection" in raw.get("architectures", ())
        weights = path / (
            "model.safetensors" if variant is None else f"model.{variant}.safetensors"
        )
        if not weights.is_file():
            raise FileNotFoundError(f"ClipTextModel: no {weights.name} in {path}")
        vb = nn.VarBuilder.from_safetensors(weights, dtype=dtype, device=device)
        return cls(vb, ClipTextConfig.from_json(raw), with_projection)

    def _ids(self, input_ids) -> Tensor:
        """Checked (B, T) integer ids on the model's device."""
        name = "ClipTextModel"
        if isinstance(input_ids, np.ndarray):
            if input_ids.dtype.kind not in "iu":
                raise DTypeError(f"{name}: input_ids must be integers, found {input_ids.dtype}")
            input_ids = creation.from_numpy(
                np.ascontiguousarray(input_ids, dtype=np.int64),
                self.token_embedding.weight.device,
            )
        if not isinstance(input_ids, Tensor):
            raise DTypeError(
                f"{name}: input_ids must be a (B, T) integer tensor or numpy array, found "
                f"{type(input_ids).__name__}"
            )
        if input_ids.dtype not in _ID_DTYPES:
            raise DTypeError(
                f"{name}: input_ids must be an integer tensor (i64, i32, u32 or i16), found "
                f"{input_ids.dtype.name} of shape {input_ids.shape}"
            )
        if input_ids.device != self.token_embedding.weight.device:
            input_ids = input_ids.to(self.token_embedding.weight.device)
        if input_ids.ndim != 2:
            raise ShapeError(f"{name}: input_ids must be (B, T), found shape {input_ids.shape}")
        t = input_ids.shape[1]
        if not 1 <= t <= self.cfg.max_position_embeddings:
            raise ShapeError(
                f"{name}: sequence length T must be in 1..{self.cfg.max_position_embeddings} "
                f"(max_position_embeddings), found input_ids of shape {input_ids.shape}"
            )
        return input_ids

    def eos_positions(self, input_ids: Tensor) -> Tensor:
        """(B,) i64: where each row is pooled (first argmax of the ids for the legacy
        ``eos_token_id == 2``, else the first ``eos_token_id``; 0 when a row has none)."""
        if self.cfg.eos_token_id == 2:
            return input_ids.argmax(-1)
        return (input_ids == self.cfg.eos_token_id).to_dtype(dt.i32).argmax(-1)

    def forward(self, input_ids) -> ClipTextOutput:
        ids = self._ids(input_ids)
        b, t = ids.shape
        x = self.token_embedding(ids) + self.position_embedding.weight[:t]
        hidden = [x]
        for layer in self.layers:
            x = layer(x)
            hidden.append(x)
        last = self.final_layer_norm(x)
        rows = self.eos_positions(ids) + creation.arange(0, b * t, t, device=ids.device)
        pooled = last.reshape(b * t, -1).index_select(0, rows)
        embeds = None if self.text_projection is None else self.text_projection(pooled)
        return ClipTextOutput(last, tuple(hidden), pooled, embeds)
