"""SDXL's CLIP text encoders against transformers' goldens (tests/fixtures/sdxl/clip.safetensors,
written by tests/fixtures/sdxl_goldens/clip.py), plus loading and input errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench import nn
from workbench.errors import DTypeError, IndexingError, ShapeError
from workbench.io import load_safetensors
from workbench.models.stable_diffusion.clip import (
    VIT_BIGG14,
    VIT_L14,
    ClipTextConfig,
    ClipTextModel,
)
from workbench.nn.var_builder import VarBuilderError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sdxl"
TINY = FIXTURES / "tiny"
ENCODERS = ("text_encoder", "text_encoder_2")
OUTPUTS = ("last_hidden_state", "penultimate", "pre_norm", "pooled", "text_embeds")


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in load_safetensors(FIXTURES / "clip.safetensors").items()}


@pytest.fixture(scope="module")
def models() -> dict[str, ClipTextModel]:
    return {name: ClipTextModel.from_dir(TINY / name) for name in ENCODERS}


def weights(name: str) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in load_safetensors(TINY / name / "model.safetensors").items()}


def config(name: str) -> ClipTextConfig:
    return ClipTextConfig.from_json(TINY / name / "config.json")


def run(model: ClipTextModel, ids) -> dict[str, np.ndarray]:
    with wb.no_grad():
        out = model(ids)
    got = {
        "last_hidden_state": out.last_hidden_state,
        "penultimate": out.hidden_states[-2],
        "pre_norm": out.hidden_states[-1],
        "pooled": out.pooled,
        "text_embeds": out.text_embeds,
    }
    return {k: v.numpy().astype(np.float32) for k, v in got.items() if v is not None}


def assert_close(got: np.ndarray, ref: np.ndarray, what: str, rtol: float = 1e-4) -> None:
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * np.abs(ref).max(), err_msg=what)


# -- parity ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ENCODERS)
@pytest.mark.parametrize("case", ["prompts", "noeos"])
def test_matches_transformers(golden, models, name, case):
    key = f"{name}.{case}"
    got = run(models[name], golden[f"{key}.ids"])
    compared = [w for w in OUTPUTS if f"{key}.{w}" in golden]
    assert {"last_hidden_state", "penultimate", "pooled"} <= set(compared)
    for what in compared:
        assert_close(got[what], golden[f"{key}.{what}"], f"{key}.{what}")
    assert ("text_embeds" in got) == (name == "text_encoder_2")


@pytest.mark.parametrize("name", ENCODERS)
def test_batch_of_two_and_rows_independent(golden, models, name):
    key = f"{name}.prompts"
    ids = golden[f"{key}.ids"]
    pair = run(models[name], ids[1:3])
    for what in ("last_hidden_state", "penultimate", "pooled"):
        assert pair[what].shape[0] == 2
        assert_close(pair[what], golden[f"{key}.{what}"][1:3], what)
    single = run(models[name], ids[:1])
    assert_close(single["pooled"], golden[f"{key}.pooled"][:1], "pooled, batch of 1")


@pytest.mark.parametrize("name", ENCODERS)
def test_hidden_states_layout(golden, models, name):
    """L + 1 states, the first the embeddings, all (B, T, H); the pooled row comes from
    last_hidden_state at the eos position."""
    model, cfg = models[name], config(name)
    ids = golden[f"{name}.prompts.ids"]
    with wb.no_grad():
        out = model(wb.from_numpy(ids))
    assert len(out.hidden_states) == cfg.num_hidden_layers + 1
    assert all(h.shape == (3, 77, cfg.hidden_size) for h in out.hidden_states)
    w = weights(name)
    prefix = "text_model." if "text_model.embeddings.token_embedding.weight" in w else ""
    emb = w[f"{prefix}embeddings.token_embedding.weight"][ids]
    emb = emb + w[f"{prefix}embeddings.position_embedding.weight"][:77]
    assert_close(out.hidden_states[0].numpy(), emb, "embeddings")
    pos = model.eos_positions(wb.from_numpy(ids)).numpy()
    np.testing.assert_array_equal(pos, (ids == 568).argmax(-1))  # the first eos in each row
    last = out.last_hidden_state.numpy()
    np.testing.assert_array_equal(out.pooled.numpy(), last[np.arange(3), pos])


def test_pooling_rules_differ_without_eos(golden, models):
    """Without an eos the legacy rule pools at the largest id, the other at position 0."""
    ids = golden["text_encoder.noeos.ids"]
    legacy = models["text_encoder"].eos_positions(wb.from_numpy(ids)).numpy()
    first = models["text_encoder_2"].eos_positions(wb.from_numpy(ids)).numpy()
    np.testing.assert_array_equal(legacy, ids.argmax(-1))
    np.testing.assert_array_equal(first, [0, 0])
    assert (legacy != 0).all()


@pytest.mark.parametrize("dtype", [wb.i64, wb.i32])
def test_tensor_ids_of_other_int_dtypes(golden, models, dtype):
    ids = golden["text_encoder_2.noeos.ids"]
    got = run(models["text_encoder_2"], wb.from_numpy(ids).to_dtype(dtype))
    assert_close(got["pooled"], golden["text_encoder_2.noeos.pooled"], "pooled")


def test_transformers4_names_load(golden):
    """The published checkpoints keep the transformer under ``text_model.``; the tiny
    text_encoder (saved by transformers 5) does not: both load."""
    w = weights("text_encoder")
    assert "embeddings.token_embedding.weight" in w
    prefixed = {f"text_model.{k}": v for k, v in w.items()}
    model = ClipTextModel(nn.VarBuilder.from_dict(prefixed), config("text_encoder"))
    got = run(model, golden["text_encoder.prompts.ids"])
    assert_close(got["penultimate"], golden["text_encoder.prompts.penultimate"], "penultimate")


@pytest.mark.parametrize(("dtype", "rtol"), [("f16", 1e-2), ("bf16", 5e-2)])
def test_half_precision_weights(golden, dtype, rtol):
    model = ClipTextModel.from_dir(TINY / "text_encoder_2", dtype=dtype)
    got = run(model, golden["text_encoder_2.prompts.ids"])
    for what in ("penultimate", "text_embeds"):
        assert_close(got[what], golden[f"text_encoder_2.prompts.{what}"], what, rtol=rtol)


def test_no_grad_inference_records_nothing(golden, models):
    with wb.no_grad():
        out = models["text_encoder_2"](golden["text_encoder_2.noeos.ids"])
    assert not out.last_hidden_state.requires_grad


# -- config ------------------------------------------------------------------------------------
def test_config_from_json_forms(tmp_path):
    raw = json.loads((TINY / "text_encoder_2" / "config.json").read_text())
    from_file = ClipTextConfig.from_json(TINY / "text_encoder_2" / "config.json")
    assert from_file == ClipTextConfig.from_json(TINY / "text_encoder_2")
    assert from_file == ClipTextConfig.from_json(raw)
    assert from_file == ClipTextConfig.from_json({"text_config": raw, "projection_dim": 7})
    assert (from_file.hidden_size, from_file.hidden_act, from_file.eos_token_id) == (
        64,
        "gelu",
        568,
    )
    assert from_file.projection_dim == 32 and from_file.head_dim == 16
    assert ClipTextConfig.from_json({**raw, "eos_token_id": [568, 2]}).eos_token_id == 568
    defaults = ClipTextConfig.from_json({})  # transformers' defaults (clip-vit-base-patch32)
    assert (defaults.hidden_size, defaults.eos_token_id, defaults.projection_dim) == (
        512,
        49407,
        512,
    )


def test_published_configs():
    assert (VIT_L14.hidden_size, VIT_L14.num_hidden_layers, VIT_L14.num_attention_heads) == (
        768,
        12,
        12,
    )
    assert (VIT_L14.intermediate_size, VIT_L14.hidden_act, VIT_L14.vocab_size) == (
        3072,
        "quick_gelu",
        49408,
    )
    assert (VIT_BIGG14.hidden_size, VIT_BIGG14.num_hidden_layers) == (1280, 32)
    assert (VIT_BIGG14.num_attention_heads, VIT_BIGG14.intermediate_size) == (20, 5120)
    assert (VIT_BIGG14.hidden_act, VIT_BIGG14.projection_dim) == ("gelu", 1280)
    assert VIT_L14.max_position_embeddings == VIT_BIGG14.max_position_embeddings == 77


class ShapeRecorder:
    """A stand-in ``VarBuilder`` that records every (name, shape) asked for and hands out
    zero-memory broadcast zeros, so a published size builds without its 0.5-3 GB."""

    def __init__(self, seen: dict, prefix: str = ""):
        self.seen, self.prefix = seen, prefix

    def pp(self, name) -> ShapeRecorder:
        return ShapeRecorder(self.seen, f"{self.prefix}{name}.")

    def contains(self, name: str) -> bool:
        return True

    def get(self, shape, name, init=None, dtype=None):
        self.seen[self.prefix + name] = tuple(shape)
        return wb.zeros((1,)).broadcast_to(tuple(shape))


@pytest.mark.parametrize(
    ("cfg", "with_projection", "count"), [(VIT_L14, False, 4 + 12 * 16), (VIT_BIGG14, True, 517)]
)
def test_published_shapes_build(cfg, with_projection, count):
    """Every published name resolves with the published shape."""
    seen: dict = {}
    model = ClipTextModel(ShapeRecorder(seen), cfg, with_projection)
    h, i = cfg.hidden_size, cfg.intermediate_size
    assert len(seen) == count
    assert seen["text_model.embeddings.token_embedding.weight"] == (49408, h)
    assert seen["text_model.embeddings.position_embedding.weight"] == (77, h)
    last = cfg.num_hidden_layers - 1
    assert seen[f"text_model.encoder.layers.{last}.mlp.fc1.weight"] == (i, h)
    assert seen[f"text_model.encoder.layers.{last}.self_attn.out_proj.bias"] == (h,)
    assert seen["text_model.final_layer_norm.weight"] == (h,)
    assert ("text_projection.weight" in seen) == with_projection
    assert len(model.layers) == cfg.num_hidden_layers


def test_config_errors():
    with pytest.raises(ValueError, match="hidden_act must be one of .*found 'swish'"):
        ClipTextConfig(hidden_act="swish")
    with pytest.raises(ValueError, match="hidden_size 100 is not a multiple of.*12"):
        ClipTextConfig(hidden_size=100)


# -- loading errors ----------------------------------------------------------------------------
def test_missing_weight_is_named():
    w = weights("text_encoder_2")
    del w["text_model.encoder.layers.1.mlp.fc2.bias"]
    with pytest.raises(VarBuilderError, match=r"text_model\.encoder\.layers\.1\.mlp\.fc2\.bias"):
        ClipTextModel(nn.VarBuilder.from_dict(w), config("text_encoder_2"), with_projection=True)


def test_missing_projection_is_named():
    with pytest.raises(VarBuilderError, match=r"text_projection\.weight"):
        ClipTextModel(
            nn.VarBuilder.from_dict(weights("text_encoder")),
            config("text_encoder"),
            with_projection=True,
        )


def test_wrong_config_gives_shape_error():
    cfg = ClipTextConfig.from_json({**vars(config("text_encoder_2")), "intermediate_size": 128})
    with pytest.raises(ShapeError, match=r"fc1\.weight.*\(96, 64\).*expected \(128, 64\)"):
        ClipTextModel(
            nn.VarBuilder.from_safetensors(TINY / "text_encoder_2" / "model.safetensors"), cfg
        )


def test_missing_variant_file():
    with pytest.raises(FileNotFoundError, match=r"no model\.fp16\.safetensors"):
        ClipTextModel.from_dir(TINY / "text_encoder", variant="fp16")


# -- input errors ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ids", "error", "match"),
    [
        (np.zeros((1, 5), np.float32), DTypeError, "input_ids must be integers, found float32"),
        (wb.zeros((1, 5)), DTypeError, r"integer tensor .*found f32 of shape \(1, 5\)"),
        (np.zeros(5, np.int64), ShapeError, r"must be \(B, T\), found shape \(5,\)"),
        (np.zeros((1, 2, 5), np.int64), ShapeError, r"must be \(B, T\), found shape \(1, 2, 5\)"),
        (np.zeros((1, 78), np.int64), ShapeError, r"T must be in 1\.\.77.*\(1, 78\)"),
        ([[1, 2, 3]], DTypeError, "integer tensor or numpy array, found list"),
        (np.array([[1, 600]]), IndexingError, r"index out of range.*\[1, 600\].*size 569"),
    ],
)
def test_bad_input_ids(models, ids, error, match):
    with pytest.raises(error, match=match):
        models["text_encoder"](ids)
