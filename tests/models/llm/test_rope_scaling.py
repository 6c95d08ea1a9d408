"""Rope scaling (YaRN, LongRoPE) against transformers: the frequencies and magnitudes of
:mod:`workbench.models.llm.rope` against transformers' rope initialisers, then whole models
(converted from transformers checkpoints) against transformers' logits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import LONGROPE_ORIGINAL, hf_logits

from workbench.models import llm
from workbench.models.llm.config import LlmFileError, config_from_metadata
from workbench.models.llm.rope import Rope, RopeScaling
from workbench.quantized.convert_hf import HfConvertError, _rope_scaling

PROMPT = "The model reads: numbers 12345, café, 東京 🙂.\n\tTabs and  spaces repeat. " * 2

transformers = pytest.importorskip("transformers")


def _reference(config, seq_len=None):
    """transformers' (inverse frequencies, attention factor) for ``config``."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kind = config.rope_parameters["rope_type"]
    inv, factor = ROPE_INIT_FUNCTIONS[kind](config, "cpu", seq_len=seq_len)
    return inv.double().numpy(), float(factor)


@pytest.mark.parametrize(
    "params",
    [
        {"factor": 4.0, "original_max_position_embeddings": 64},
        {"factor": 8.0, "original_max_position_embeddings": 32, "attention_factor": 0.8},
        {"factor": 16.0, "original_max_position_embeddings": 4096, "rope_theta": 1e6},
    ],
)
def test_yarn_frequencies_match_transformers(params):
    theta = params.get("rope_theta", 10000.0)
    config = transformers.Qwen2Config(
        hidden_size=256,
        num_attention_heads=4,
        max_position_embeddings=8192,
        rope_scaling={"rope_type": "yarn", "rope_theta": theta, **params},
    )
    inv, attention = _reference(config)
    mscale = 1 + 0.1 * math.log(params["factor"])
    scaling = RopeScaling(
        "yarn",
        params["factor"],
        params["original_max_position_embeddings"],
        params.get("attention_factor", mscale) / mscale,
    )
    omega, m = Rope(64, theta, scaling).frequencies(8192)
    np.testing.assert_allclose(omega, inv, rtol=2e-6)
    assert m == pytest.approx(attention, rel=1e-12)
    plain = Rope(64, theta).frequencies(8192)[0]
    assert np.abs(omega / plain - 1).max() > 0.5  # the ramp moved the slow pairs


def test_longrope_frequencies_match_transformers_short_and_long():
    half = 8
    long, short = [1.0 + 1.5 * i for i in range(half)], [1.0 + 0.4 * i for i in range(half)]
    config = transformers.Phi3Config(
        hidden_size=64,
        num_attention_heads=4,
        max_position_embeddings=256,
        original_max_position_embeddings=16,
        rope_scaling={"rope_type": "longrope", "long_factor": long, "short_factor": short},
    )
    attention = math.sqrt(1 + math.log(256 / 16) / math.log(16))
    rope = Rope(
        16,
        10000.0,
        RopeScaling("longrope", original_context=16, attn_factor=attention),
        long_factors=np.array(long, np.float32),
        short_factors=np.array(short, np.float32),
    )
    for context in (16, 17, 200):
        inv, factor = _reference(config, seq_len=context)
        omega, m = rope.frequencies(context)
        np.testing.assert_allclose(omega, inv, rtol=2e-6)
        assert m == pytest.approx(factor, rel=1e-6)
    assert not np.allclose(rope.frequencies(16)[0], rope.frequencies(17)[0])


@pytest.mark.parametrize("family", ["phi3_longrope", "qwen2_yarn", "llama_yarn"])
def test_rope_scaled_logits_match_transformers(tiny, family):
    model, path = tiny(family, "F32")
    lm = llm.load(path)
    ids = lm.tokenizer.encode(PROMPT)
    assert len(ids) > 2 * LONGROPE_ORIGINAL
    ref = hf_logits(model, ids)
    got = lm.logits(ids)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    # a prompt inside the original context: LongRoPE's short factors, on both sides
    short = ids[:LONGROPE_ORIGINAL]
    ref_short = hf_logits(model, short)
    np.testing.assert_allclose(lm.logits(short), ref_short, rtol=0, atol=1e-5 * np.abs(ref).max())
    if family == "phi3_longrope":  # ... which differ from the long factors' logits
        assert np.abs(ref_short - ref[: len(short)]).max() > 0.05 * np.abs(ref).max()


@pytest.mark.parametrize(
    "extra, problem",
    [
        ({"beta_fast": 16}, "beta_fast"),
        ({"truncate": False}, "truncate"),
        ({"original_max_position_embeddings": None}, "without original_max_position_embeddings"),
    ],
)
def test_yarn_llama_cpp_cannot_express_is_refused(extra, problem):
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32} | extra
    with pytest.raises(HfConvertError, match=problem):
        _rope_scaling({"max_position_embeddings": 256}, rope, "qwen2.", "folder")


def _metadata(**rope):
    md = {
        "general.architecture": "qwen2",
        "qwen2.block_count": 1,
        "qwen2.embedding_length": 64,
        "qwen2.feed_forward_length": 96,
        "qwen2.attention.head_count": 4,
        "qwen2.context_length": 256,
    }
    return md | {f"qwen2.rope.scaling.{k}": v for k, v in rope.items()}


def test_rope_scaling_metadata_is_read_and_checked():
    c = config_from_metadata(_metadata(type="yarn", factor=4.0, original_context_length=32), 10)
    assert c.rope_scaling == RopeScaling("yarn", 4.0, 32)
    c = config_from_metadata(_metadata(factor=2.0), 10)  # llama.cpp's default type: linear
    assert c.rope_scaling.kind == "linear" and c.rope_scaling.factor == 2.0
    assert config_from_metadata(_metadata(), 10).rope_scaling == RopeScaling(original_context=256)
    with pytest.raises(LlmFileError, match="'qwen2.rope.scaling.type' = 'ntk'"):
        config_from_metadata(_metadata(type="ntk"), 10)
    with pytest.raises(LlmFileError, match="must be positive"):
        config_from_metadata(_metadata(type="yarn", factor=4.0, attn_factor=-1.0), 10)


def test_longrope_file_without_factors_is_refused():
    with pytest.raises(ValueError, match="long and short factors"):
        Rope(16, 10000.0, RopeScaling("longrope", original_context=16))


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "linear", "factor": 3.0},
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": LONGROPE_ORIGINAL},
    ],
    ids=["linear", "yarn"],
)
def test_gemma3_scales_only_its_global_layers(tiny, scaling):
    """gemma3's rope scaling stretches the full-attention layers only; the sliding layers (a
    window shorter than the prompt) keep unscaled rope at their own base."""
    rope = {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {**scaling, "rope_theta": 1e6},
    }
    model, path = tiny("gemma3", "F32", rope_parameters=rope)
    assert {"sliding_attention", "full_attention"} <= set(model.config.layer_types)
    lm = llm.load(path)
    ids = lm.tokenizer.encode(PROMPT)
    assert len(ids) > 2 * max(model.config.sliding_window, LONGROPE_ORIGINAL)
    ref = hf_logits(model, ids)
    np.testing.assert_allclose(lm.logits(ids), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
