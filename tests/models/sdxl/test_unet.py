"""The SDXL UNet against diffusers' goldens (tests/fixtures/sdxl/unet.safetensors, written by
tests/fixtures/sdxl_goldens/unet.py from the tiny ``unet/`` folder), the fp16 variant, the
SDXL base structure, and errors for bad weights, configs and inputs."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench import nn
from workbench.errors import ShapeError
from workbench.io import load_safetensors
from workbench.models.stable_diffusion.unet import SDXL_BASE, UNet2DConditionModel, UNetConfig
from workbench.nn.var_builder import VarBuilderError, _Backend

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sdxl"
UNET_DIR = FIXTURES / "tiny" / "unet"
CASES = ("square", "float", "wide", "odd")
INPUTS = ("sample", "timestep", "encoder_hidden_states", "text_embeds", "time_ids")


@pytest.fixture(scope="module")
def golden() -> dict[str, dict[str, np.ndarray]]:
    flat = {k: v.numpy() for k, v in load_safetensors(FIXTURES / "unet.safetensors").items()}
    return {c: {k.split(".", 1)[1]: v for k, v in flat.items() if k.startswith(c + ".")}
            for c in CASES}  # fmt: skip


@pytest.fixture(scope="module")
def unet() -> UNet2DConditionModel:
    return UNet2DConditionModel.from_dir(UNET_DIR)


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    path = UNET_DIR / "diffusion_pytorch_model.safetensors"
    return {k: v.numpy() for k, v in load_safetensors(path).items()}


def run(model: UNet2DConditionModel, x: dict[str, np.ndarray], **change) -> np.ndarray:
    x = {**x, **change}
    t = x["timestep"]
    timestep = float(t) if isinstance(t, np.ndarray) and t.ndim == 0 else t
    with wb.no_grad():
        out = model(wb.tensor(x["sample"]), timestep, wb.tensor(x["encoder_hidden_states"]),
                    wb.tensor(x["text_embeds"]), x["time_ids"])  # fmt: skip
    return out.to_dtype(wb.f32).numpy()


def assert_close(got: np.ndarray, want: np.ndarray, rel: float) -> None:
    scale = float(np.abs(want).max())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rel, atol=rel * scale)


# -- parity --------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES)
def test_matches_diffusers(unet, golden, case):
    x = golden[case]
    assert_close(run(unet, x), x["output"], 1e-4)


def test_timestep_forms_agree(unet, golden):
    """A number, a (B,) int tensor, a numpy array and a (1,) tensor give the same output."""
    x = golden["square"]
    want = run(unet, x, timestep=np.array([500, 500]))
    for t in (500, 500.0, wb.tensor(np.array([500, 500])), wb.tensor([500.0]), np.int64(500)):
        np.testing.assert_allclose(run(unet, x, timestep=t), want, rtol=1e-6, atol=1e-6)


def test_time_ids_as_tensor(unet, golden):
    x = golden["square"]
    got = run(unet, x, time_ids=wb.tensor(x["time_ids"]))
    assert_close(got, x["output"], 1e-4)


def test_attention_in_query_blocks(unet, golden, monkeypatch):
    """Large score matrices are computed a block of queries at a time, with the same result."""
    from workbench.models.stable_diffusion import unet_blocks

    monkeypatch.setattr(unet_blocks, "ATTENTION_CHUNK_BYTES", 4 * 77 * 2 * 2 * 5)  # 5 rows
    x = golden["square"]
    assert_close(run(unet, x), x["output"], 1e-4)


def test_trainable_weights_keep_their_gradients(weights, golden):
    """With trainable weights the attention projections are not fused (each weight keeps its
    own gradient); the output is the same."""
    params = {k: wb.Var(wb.tensor(v)) for k, v in weights.items()}
    model = UNet2DConditionModel(nn.VarBuilder.from_dict(params), UNetConfig.from_json(UNET_DIR))
    x = golden["odd"]
    out = model(wb.tensor(x["sample"]), x["timestep"], wb.tensor(x["encoder_hidden_states"]),
                wb.tensor(x["text_embeds"]), x["time_ids"])  # fmt: skip
    assert_close(out.detach().numpy(), x["output"], 1e-4)
    grads = out.sum().backward()
    for name in ("down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q.weight",
                 "mid_block.attentions.0.transformer_blocks.1.attn2.to_v.weight",
                 "add_embedding.linear_1.weight", "conv_in.weight"):  # fmt: skip
        g = grads[params[name]]
        assert g is not None and g.shape == params[name].shape and np.abs(g.numpy()).sum() > 0


# -- dtypes --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("variant", "dtype", "rel"),
    [("fp16", None, 1e-2), ("fp16", wb.f32, 2e-3), (None, wb.bf16, 5e-2)],
    ids=["fp16-file-f16", "fp16-file-f32", "f32-file-bf16"],
)
def test_half_weights(golden, variant, dtype, rel):
    """The fp16 variant (computed in f16, or converted to f32) and bf16 weights match the f32
    reference within the half type's precision; the output comes in the compute dtype."""
    model = UNet2DConditionModel.from_dir(UNET_DIR, dtype=dtype, variant=variant)
    expected = dtype or wb.f16
    assert model.dtype is expected
    x = golden["square"]
    with wb.no_grad():
        out = model(wb.tensor(x["sample"]), x["timestep"], wb.tensor(x["encoder_hidden_states"]),
                    wb.tensor(x["text_embeds"]), x["time_ids"])  # fmt: skip
    assert out.dtype is expected
    assert_close(out.to_dtype(wb.f32).numpy(), x["output"], rel)


# -- structure -----------------------------------------------------------------------------
def test_loads_diffusers_names_as_they_are(unet, weights):
    params = dict(unet.named_parameters())
    assert set(params) == set(weights)
    for name, value in weights.items():
        assert params[name].shape == value.shape, name


def test_tiny_config_heads_and_depths(unet):
    """diffusers' ``attention_head_dim`` is the number of heads; head size = channels / heads;
    up blocks take the transformer depths reversed."""
    cfg = UNetConfig.from_json(UNET_DIR)
    assert cfg.heads == (2, 2, 4) and cfg.transformer_layers_per_block == (1, 1, 2)
    assert len(unet.down_blocks[0].attentions) == 0
    attn1 = unet.down_blocks[1].attentions[0].transformer_blocks[0].attn1
    assert (attn1.heads, attn1.dim_head) == (2, 8)
    deep = unet.down_blocks[2].attentions[0]
    assert len(deep.transformer_blocks) == 2
    assert deep.transformer_blocks[0].attn2.heads == 4
    assert len(unet.up_blocks[0].attentions[0].transformer_blocks) == 2
    assert len(unet.up_blocks[2].attentions) == 0 and len(unet.up_blocks[0].resnets) == 3


class _ShapesOnly(_Backend):
    """Every name exists; records the shapes asked for and returns broadcast zeros (no
    memory), to build the full-size model's structure."""

    where = "shapes"

    def __init__(self):
        self.seen: dict[str, tuple[int, ...]] = {}

    def names(self):
        return list(self.seen)

    def contains(self, name):
        return True

    def get(self, name, shape, init, dtype, device):
        self.seen[name] = shape
        return wb.zeros(1).reshape(*([1] * len(shape))).broadcast_to(shape)


def test_sdxl_base_structure():
    """SDXL_BASE builds diffusers' SDXL UNet: 1680 tensors, 2 567 463 684 parameters (as
    diffusers' ``UNet2DConditionModel`` with the published config), 10/20 heads of 64."""
    shapes = _ShapesOnly()
    model = UNet2DConditionModel(nn.VarBuilder(shapes), SDXL_BASE)
    assert len(shapes.seen) == 1680
    assert sum(math.prod(s) for s in shapes.seen.values()) == 2_567_463_684
    assert shapes.seen["add_embedding.linear_1.weight"] == (1280, 2816)
    to_k = "down_blocks.2.attentions.1.transformer_blocks.9.attn2.to_k.weight"
    assert shapes.seen[to_k] == (1280, 2048)
    block = model.mid_block.attentions[0].transformer_blocks
    assert len(block) == 10 and (block[0].attn1.heads, block[0].attn1.dim_head) == (20, 64)
    up = model.up_blocks[1].attentions[2].transformer_blocks
    assert len(up) == 2 and (up[0].attn1.heads, up[0].attn1.dim_head) == (10, 64)


def test_config_from_json_forms(tmp_path):
    raw = json.loads((UNET_DIR / "config.json").read_text())
    from_dict = UNetConfig.from_json(raw)
    assert from_dict == UNetConfig.from_json(UNET_DIR / "config.json")
    assert from_dict == UNetConfig.from_json(UNET_DIR)
    assert (
        from_dict.block_out_channels == (8, 16, 32) and from_dict.cross_attention_dim == (96,) * 3
    )
    assert UNetConfig(transformer_layers_per_block=3).transformer_layers_per_block == (3, 3, 3)
    per_block = {**raw, "only_cross_attention": [False] * 3, "mid_block_scale_factor": 1.0}
    assert UNetConfig.from_json(per_block) == from_dict
    assert SDXL_BASE.time_embed_dim == 1280 and SDXL_BASE.heads == (5, 10, 20)


@pytest.mark.parametrize(
    ("key", "value"),
    [("class_embed_type", "projection"), ("resnet_time_scale_shift", "scale_shift"),
     ("addition_embed_type", "text"), ("time_cond_proj_dim", 256)],
)  # fmt: skip
def test_unsupported_config_is_refused(key, value):
    raw = json.loads((UNET_DIR / "config.json").read_text())
    with pytest.raises(NotImplementedError, match=key):
        UNetConfig.from_json({**raw, key: value})


def test_bad_block_types():
    with pytest.raises(NotImplementedError, match="down_block_types"):
        UNetConfig(down_block_types=("DownBlock2D", "AttnDownBlock2D", "CrossAttnDownBlock2D"))
    with pytest.raises(ValueError, match="transformer_layers_per_block needs 3 values"):
        UNetConfig(transformer_layers_per_block=(1, 2))


# -- errors --------------------------------------------------------------------------------
def test_missing_weight(weights):
    cfg = UNetConfig.from_json(UNET_DIR)
    name = "down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight"
    partial = {k: v for k, v in weights.items() if k != name}
    with pytest.raises(VarBuilderError, match=name.replace(".", r"\.")):
        UNet2DConditionModel(nn.VarBuilder.from_dict(partial), cfg)


def test_misshaped_weight(weights):
    """A checkpoint for another context width (96 expected) is refused, naming the tensor."""
    cfg = UNetConfig.from_json(UNET_DIR)
    name = "mid_block.attentions.0.transformer_blocks.0.attn2.to_v.weight"
    bad = {**weights, name: np.zeros((32, 64), np.float32)}
    with pytest.raises(ShapeError, match=r"to_v\.weight.*\(32, 64\).*expected \(32, 96\)"):
        UNet2DConditionModel(nn.VarBuilder.from_dict(bad), cfg)
    narrower = replace(cfg, cross_attention_dim=64)
    with pytest.raises(ShapeError, match="attn2.to_k.weight"):
        UNet2DConditionModel(nn.VarBuilder.from_dict(weights), narrower)


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"diffusion_pytorch_model\.bf16\.safetensors"):
        UNet2DConditionModel.from_dir(UNET_DIR, variant="bf16")
    with pytest.raises(FileNotFoundError, match="nothing"):
        UNet2DConditionModel.from_dir(tmp_path)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"sample": np.zeros((2, 3, 16, 16), np.float32)}, r"sample must be \(B, 4, h, w\)"),
        ({"sample": np.zeros((4, 16, 16), np.float32)}, "sample must have 4 dims"),
        ({"encoder_hidden_states": np.zeros((2, 77, 64), np.float32)},
         r"encoder_hidden_states must be \(B=2, S, 96\), found \(2, 77, 64\)"),
        ({"encoder_hidden_states": np.zeros((1, 77, 96), np.float32)}, "encoder_hidden_states"),
        ({"time_ids": np.zeros((2, 5), np.float32)},
         r"add_embedding takes 80 features.*time_ids \(2, 5\)"),
        ({"text_embeds": np.zeros((2, 16), np.float32)}, r"text_embeds \(2, 16\)"),
        ({"time_ids": np.zeros((1, 6), np.float32)}, r"time_ids must be .*\(B=2, 6\)"),
        ({"timestep": np.array([1, 2, 3])}, "timestep must be a number or have 1 or B=2"),
    ],
    ids=["channels", "ndim", "context-dim", "context-batch", "ids-length", "text-dim",
         "ids-batch", "timesteps"],
)  # fmt: skip
def test_bad_inputs(unet, golden, change, match):
    with pytest.raises(ShapeError, match=match):
        run(unet, golden["square"], **change)


def test_text_time_inputs_required(unet, golden):
    x = golden["square"]
    with pytest.raises(ValueError, match="text_embeds"), wb.no_grad():
        unet(wb.tensor(x["sample"]), 10, wb.tensor(x["encoder_hidden_states"]))
