"""Loading SAM weights: official names from a ``.safetensors`` / ``.npz`` file, a dict, or
candle's hub repo ``lmz/candle-sam``; the config is read off the tensor shapes.

    sam = load("lmz/candle-sam")                     # sam_vit_b_01ec64.safetensors
    sam = load("lmz/candle-sam", which="mobile_sam")  # mobile_sam-tiny-vitt.safetensors
    sam = load("~/sam_vit_h.safetensors")            # converted official checkpoint

MobileSAM weights (TinyViT names, ``image_encoder.layers.*``) build a ``Sam`` with the TinyViT
encoder.

An official ``.pth`` converts with ``convert_checkpoint(pth, out)`` (needs torch).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ... import nn
from .model import Sam, SamConfig

HUB_REPO = "lmz/candle-sam"
HUB_FILES = {
    "vit_b": "sam_vit_b_01ec64.safetensors",
    "mobile_sam": "mobile_sam-tiny-vitt.safetensors",
    "tiny_vit": "mobile_sam-tiny-vitt.safetensors",  # the same file, by its encoder's name
}


def _indices(shapes, pattern: str) -> list[int]:
    """Sorted distinct integers captured by ``pattern`` (one group) over the names."""
    return sorted({int(m.group(1)) for k in shapes if (m := re.match(pattern, k))})


def _infer_tiny_vit(shapes: Mapping[str, tuple[int, ...]]):
    """A ``TinyViTConfig`` from MobileSAM's encoder names (``image_encoder.layers.*``)."""
    from .tiny_vit import TinyViTConfig

    def need(name: str) -> tuple[int, ...]:
        if name not in shapes:
            raise KeyError(f"MobileSAM (TinyViT) weights without {name}")
        return shapes[name]

    pre = "image_encoder.layers"
    stages = _indices(shapes, rf"{pre}\.(\d+)\.")
    if stages != list(range(len(stages))) or len(stages) < 2:
        raise KeyError(f"MobileSAM (TinyViT) weights: stages {stages} under {pre}, need 0, 1, ...")
    need("image_encoder.patch_embed.seq.0.c.weight")
    depths = tuple(len(_indices(shapes, rf"{pre}\.{i}\.blocks\.(\d+)\.")) for i in stages)
    hidden, d0 = need(f"{pre}.0.blocks.0.conv1.c.weight")[:2]
    dims, heads, windows = [d0], [], []
    for i in stages[1:]:
        blk = f"{pre}.{i}.blocks.0"
        dims.append(need(f"{blk}.attn.qkv.weight")[1])
        nh, n_off = need(f"{blk}.attn.attention_biases")
        heads.append(nh)
        windows.append(round(n_off**0.5))
    # stage 0 (convolutions) has no attention: MobileSAM's values (d0/32 heads, stage 1's window)
    heads.insert(0, max(d0 // 32, 1))
    windows.insert(0, windows[0])
    blk = f"{pre}.1.blocks.0"
    return TinyViTConfig(
        embed_dims=tuple(dims),
        depths=depths,
        num_heads=tuple(heads),
        window_sizes=tuple(windows),
        mlp_ratio=need(f"{blk}.mlp.fc1.weight")[0] / dims[1],
        mbconv_expand_ratio=hidden / d0,
        local_conv_size=need(f"{blk}.local_conv.c.weight")[-1],
    )


def infer_config(shapes: Mapping[str, tuple[int, ...]], **overrides) -> SamConfig:
    """A ``SamConfig`` from tensor shapes (official names). Attention head counts do not show
    in the shapes: the encoder's come from ``rel_pos`` (head dim), the decoder's default to
    8 (pass ``decoder_heads=`` otherwise). MobileSAM's TinyViT names give ``tiny_vit`` (its
    head counts are the rows of ``attention_biases``); the image size does not show in
    them: 1024 unless ``img_size=`` is passed."""
    if "image_encoder.patch_embed.proj.weight" not in shapes:
        if any(k.startswith("image_encoder.layers.") for k in shapes):
            return replace(_infer_decoder(shapes, tiny_vit=_infer_tiny_vit(shapes)), **overrides)
        raise KeyError(
            "not SAM weights: no image_encoder.patch_embed.proj.weight (SAM's ViT) or "
            "image_encoder.patch_embed.seq.0.c.weight (MobileSAM's TinyViT)"
        )
    d, _, p, _ = shapes["image_encoder.patch_embed.proj.weight"]
    e = shapes["image_encoder.pos_embed"][1]
    blocks = {
        int(m.group(1)) for k in shapes if (m := re.match(r"image_encoder\.blocks\.(\d+)\.", k))
    }
    depth = max(blocks) + 1
    rel = [shapes[f"image_encoder.blocks.{i}.attn.rel_pos_h"] for i in range(depth)]
    global_idx = tuple(i for i, r in enumerate(rel) if r[0] == 2 * e - 1)
    windowed = [r[0] for r in rel if r[0] != 2 * e - 1]
    cfg = _infer_decoder(
        shapes,
        embed_dim=d,
        depth=depth,
        num_heads=d // rel[0][1],
        global_attn_indexes=global_idx,
        img_size=e * p,
        patch_size=p,
        window_size=(windowed[0] + 1) // 2 if windowed else 0,
        mlp_ratio=shapes["image_encoder.blocks.0.mlp.lin1.weight"][0] / d,
    )
    return replace(cfg, **overrides)


def _infer_decoder(shapes: Mapping[str, tuple[int, ...]], **encoder) -> SamConfig:
    """The neck, prompt encoder and mask decoder sizes, plus the given encoder fields."""
    layers = _indices(shapes, r"mask_decoder\.transformer\.layers\.(\d+)\.")
    return SamConfig(
        **encoder,
        prompt_embed_dim=shapes["image_encoder.neck.0.weight"][0],
        mask_in_chans=shapes["prompt_encoder.mask_downscaling.3.weight"][0],
        decoder_depth=max(layers) + 1,
        decoder_mlp_dim=shapes["mask_decoder.transformer.layers.0.mlp.lin1.weight"][0],
        iou_head_hidden_dim=shapes["mask_decoder.iou_prediction_head.layers.0.weight"][0],
    )


def load_weights(weights, which: str = "vit_b") -> Mapping[str, Any]:
    """Tensors by official name from a dict, a file or a hub repo id."""
    if isinstance(weights, Mapping):
        return weights
    path = Path(os.path.expanduser(str(weights)))
    if not path.exists():
        if path.suffix in (".safetensors", ".npz", ".pth") or str(weights).startswith(
            ("/", ".", "~")
        ):
            raise FileNotFoundError(f"SAM weights not found: {weights}")
        from ...io import hub

        if which not in HUB_FILES:
            raise ValueError(f"{HUB_REPO} has files for {', '.join(HUB_FILES)}, not {which!r}")
        path = hub.file(str(weights), HUB_FILES[which])
    if path.suffix == ".npz":
        return dict(np.load(path))
    from ...io.safetensors import load_safetensors

    return load_safetensors(path)


def load(weights=HUB_REPO, which: str = "vit_b", dtype=None, device=None, **overrides) -> Sam:
    """A ``Sam`` from ``weights`` (see ``load_weights``; ``which`` picks the hub file:
    ``vit_b`` or ``mobile_sam``); ``overrides`` go to the config. Weights of another model
    raise ``WeightsMismatch`` naming the missing and unexpected tensors."""
    from ...nn.var_builder import build_checked

    tensors = load_weights(weights, which)
    try:
        cfg = infer_config({k: tuple(v.shape) for k, v in tensors.items()}, **overrides)
    except (KeyError, ValueError):  # not SAM names: compare with the published variant
        cfg = replace(SamConfig.variant("mobile_sam" if which == "tiny_vit" else which),
                      **overrides)  # fmt: skip
    model = "MobileSAM" if cfg.tiny_vit is not None else f"SAM {which}"
    vb = nn.VarBuilder.from_dict(tensors, dtype=dtype, device=device)
    where = str(weights) if isinstance(weights, str | os.PathLike) else None
    return build_checked(model, lambda vb: Sam(vb, cfg), vb, where)


def convert_checkpoint(pth: str | os.PathLike, out: str | os.PathLike) -> None:
    """Official ``sam_vit_*.pth`` -> ``.safetensors`` with the same names (needs torch)."""
    import torch

    from ...io.safetensors import save_safetensors

    state = torch.load(os.path.expanduser(str(pth)), map_location="cpu", weights_only=True)
    save_safetensors({k: v.float().contiguous().numpy() for k, v in state.items()}, out)
