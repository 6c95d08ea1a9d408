"""One SDXL UNet step on the CPU (forward, batch 2 as classifier-free guidance runs it):
workbench against diffusers' ``UNet2DConditionModel`` with the same (seeded random) weights.

Two configs of the SDXL layout (DownBlock2D, two CrossAttnDownBlock2D, linear projections,
``text_time`` micro-conditioning): the tiny one of the test fixtures (16×16 latents) and a
mid-size one (channels 64/128/256, transformer depths 1/1/2, head size 64, SDXL's 2048-wide
context and 2816-wide add embedding, 32×32 latents).

Needs ``diffusers`` (a benchmark/test reference only; workbench never imports it); the
workloads are skipped without it. PyPI's torchvision cannot load beside torch 2.13, so its
import is blocked while diffusers loads (diffusers runs without it).
"""

from __future__ import annotations

import sys
from functools import partial

import numpy as np

from ._harness import Skip, Workload

SDXL_LAYOUT = dict(
    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
    up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
    in_channels=4, out_channels=4, layers_per_block=2, use_linear_projection=True,
    addition_embed_type="text_time",
)  # fmt: skip
CONFIGS = {
    # name: (config, latent size, context tokens)
    "tiny": (
        dict(block_out_channels=(8, 16, 32), transformer_layers_per_block=(1, 1, 2),
             attention_head_dim=(2, 2, 4), cross_attention_dim=96, norm_num_groups=4,
             addition_time_embed_dim=8, projection_class_embeddings_input_dim=32 + 6 * 8),
        16, 77, 32,
    ),
    "mid": (
        dict(block_out_channels=(64, 128, 256), transformer_layers_per_block=(1, 1, 2),
             attention_head_dim=(1, 2, 4), cross_attention_dim=2048, norm_num_groups=32,
             addition_time_embed_dim=256, projection_class_embeddings_input_dim=1280 + 6 * 256),
        32, 77, 1280,
    ),
}  # fmt: skip


def _diffusers_unet_class():
    # its failed import makes diffusers skip torchvision (also over another module's stub)
    previous = sys.modules.get("torchvision")
    sys.modules["torchvision"] = None
    try:
        from diffusers.models.unets.unet_2d_condition import UNet2DConditionModel
    except ImportError as e:
        raise Skip(f"diffusers is not installed ({e})") from e
    finally:
        if previous is None:
            del sys.modules["torchvision"]
        else:
            sys.modules["torchvision"] = previous
    return UNet2DConditionModel


def build(name: str):
    """(workbench UNet, diffusers UNet, inputs as numpy) for config ``name``."""
    import torch

    from workbench import nn
    from workbench.models.stable_diffusion.unet import UNet2DConditionModel, UNetConfig

    cls = _diffusers_unet_class()
    config, size, tokens, pooled = CONFIGS[name]
    torch.manual_seed(0)
    ref = cls(**SDXL_LAYOUT, **config).eval()
    state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    ours = UNet2DConditionModel(nn.VarBuilder.from_dict(state), UNetConfig.from_json(ref.config))
    rng = np.random.default_rng(0)
    inputs = {
        "sample": rng.standard_normal((2, 4, size, size)).astype(np.float32),
        "timestep": np.asarray([757, 757], np.int64),
        "encoder_hidden_states": rng.standard_normal(
            (2, tokens, config["cross_attention_dim"])
        ).astype(np.float32),
        "text_embeds": rng.standard_normal((2, pooled)).astype(np.float32),
        "time_ids": np.tile(np.float32([8 * size, 8 * size, 0, 0, 8 * size, 8 * size]), (2, 1)),
    }
    return ours, ref, inputs


def _step(name: str):
    import torch

    import workbench as wb
    from workbench.autograd import no_grad

    ours, ref, x = build(name)
    wx = {k: wb.tensor(v) for k, v in x.items()}
    tx = {k: torch.from_numpy(v.copy()) for k, v in x.items()}

    def ours_run():
        with no_grad():
            return ours(wx["sample"], wx["timestep"], wx["encoder_hidden_states"],
                        wx["text_embeds"], wx["time_ids"])  # fmt: skip

    def torch_run():
        with torch.inference_mode():
            added = {"text_embeds": tx["text_embeds"], "time_ids": tx["time_ids"]}
            return ref(tx["sample"], tx["timestep"], tx["encoder_hidden_states"],
                       added_cond_kwargs=added).sample  # fmt: skip

    return {"workbench": ours_run, "torch": torch_run}


WORKLOADS = [
    Workload(
        "sdxl/unet-step/tiny",
        partial(_step, "tiny"),
        target=1.0,
        tolerance=1e-3,
        note="2x4x16x16, channels 8/16/32, 77 tokens of 96; torch column = diffusers",
    ),
    Workload(
        "sdxl/unet-step/mid",
        partial(_step, "mid"),
        target=1.0,
        tolerance=1e-3,
        note="2x4x32x32, channels 64/128/256, 77 tokens of 2048; torch column = diffusers",
    ),
]
