"""The goldens of tests/fixtures/make_sam_goldens.py (segment-anything's SAM at reduced size,
seeded weights), loaded without segment-anything or torch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench import nn
from workbench.io import load_safetensors
from workbench.models.sam import Sam, SamConfig

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sam"
# the reduced ViT-B structure of the goldens (decoder heads do not show in the shapes)
CFG = SamConfig(
    embed_dim=32,
    depth=2,
    num_heads=2,
    global_attn_indexes=(1,),
    img_size=64,
    window_size=3,
    prompt_embed_dim=32,
    decoder_heads=2,
    decoder_mlp_dim=64,
    iou_head_hidden_dim=32,
)


@pytest.fixture(scope="session")
def sam_cfg() -> SamConfig:
    return CFG


@pytest.fixture(scope="session")
def sam_golden() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(official state dict, goldens by name without the ``golden.`` prefix)."""
    tensors = {k: v.numpy() for k, v in load_safetensors(FIXTURES / "sam.safetensors").items()}
    g = {k[len("golden.") :]: v for k, v in tensors.items() if k.startswith("golden.")}
    w = {k: v for k, v in tensors.items() if not k.startswith("golden.")}
    return w, g


@pytest.fixture(scope="session")
def sam_model(sam_golden) -> Sam:
    return Sam(nn.VarBuilder.from_dict(sam_golden[0]), CFG)
