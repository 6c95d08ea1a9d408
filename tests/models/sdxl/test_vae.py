"""The VAE against diffusers' AutoencoderKL: the tiny pipeline's ``vae`` weights and the goldens
of tests/fixtures/sdxl_goldens/vae.py, read without diffusers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench import nn
from workbench.io import load_safetensors
from workbench.models.stable_diffusion.vae import (
    SDXL_VAE,
    SDXL_VAE_FP16_FIX,
    AutoencoderKL,
    DiagonalGaussian,
    VaeConfig,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sdxl"
VAE_DIR = FIXTURES / "tiny" / "vae"
WEIGHTS = VAE_DIR / "diffusion_pytorch_model.safetensors"


@pytest.fixture(scope="module")
def cfg() -> VaeConfig:
    return VaeConfig.from_json(VAE_DIR)


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in load_safetensors(WEIGHTS).items()}


@pytest.fixture(scope="module")
def g() -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in load_safetensors(FIXTURES / "vae.safetensors").items()}


@pytest.fixture(scope="module")
def vae(cfg) -> AutoencoderKL:
    return AutoencoderKL(nn.VarBuilder.from_safetensors(WEIGHTS), cfg)


def _close(ours: np.ndarray, ref: np.ndarray, rtol: float = 1e-4) -> None:
    assert ours.shape == ref.shape, f"shape {ours.shape} vs {ref.shape}"
    err = np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-6)
    assert err < rtol, f"relative max error {err:.3g}"


def test_config(cfg):
    assert cfg.block_out_channels == (16, 32) and cfg.layers_per_block == 1
    assert cfg.scaling_factor == 0.13025 and cfg.force_upcast and cfg.downsample_factor == 2
    assert SDXL_VAE.scaling_factor == SDXL_VAE_FP16_FIX.scaling_factor == 0.13025
    assert SDXL_VAE.force_upcast and not SDXL_VAE_FP16_FIX.force_upcast
    assert SDXL_VAE.downsample_factor == 8


def test_goldens_are_input_dependent(g):
    for key in ("encode.square.mean", "decode.square.output"):
        a, b = g[key]
        assert np.abs(a - b).mean() > 0.1 * np.abs(a).mean()


def test_every_weight_is_used(weights, cfg):
    seen = set()

    class Spy(dict):
        def __getitem__(self, k):
            seen.add(k)
            return super().__getitem__(k)

    AutoencoderKL(nn.VarBuilder.from_dict(Spy(weights)), cfg)
    assert sorted(set(weights) - seen) == []


@pytest.mark.parametrize("case", ["square", "wide"])
def test_encode(vae, g, case):
    with wb.no_grad():
        post = vae.encode(wb.from_numpy(g[f"encode.{case}.input"]))
    _close(post.mean.numpy(), g[f"encode.{case}.mean"])
    _close(post.logvar.numpy(), g[f"encode.{case}.logvar"])
    assert post.mode() is post.mean
    np.testing.assert_allclose(post.std.numpy(), np.exp(0.5 * post.logvar.numpy()), rtol=1e-6)


@pytest.mark.parametrize("case", ["square", "wide"])
def test_decode(vae, g, case):
    with wb.no_grad():
        out = vae.decode(wb.from_numpy(g[f"decode.{case}.input"]))
    _close(out.numpy(), g[f"decode.{case}.output"])


def test_chunked_attention(vae, g, monkeypatch):
    """Large grids attend in query chunks (bounded memory); same result."""
    from workbench.models.stable_diffusion import vae as vae_module

    monkeypatch.setattr(vae_module, "_QUERY_CHUNK", 20)  # 8×12 latent tokens: 5 chunks
    with wb.no_grad():
        out = vae.decode(wb.from_numpy(g["decode.wide.input"]))
    _close(out.numpy(), g["decode.wide.output"])


def test_posterior_sample(vae, g):
    with wb.no_grad():
        post = vae.encode(wb.from_numpy(g["encode.square.input"]))
    eps = np.random.default_rng(0).standard_normal(post.mean.shape).astype(np.float32)
    mean, std = g["encode.square.mean"], np.exp(0.5 * g["encode.square.logvar"])
    _close(post.sample(noise=wb.from_numpy(eps)).numpy(), mean + std * eps)
    a = post.sample(np.random.default_rng(1)).numpy()
    b = post.sample(np.random.default_rng(1)).numpy()
    np.testing.assert_array_equal(a, b)


def test_logvar_is_clamped():
    moments = np.zeros((1, 8, 2, 2), np.float32)
    moments[:, 4:6] = 50.0
    moments[:, 6:] = -50.0
    post = DiagonalGaussian(wb.from_numpy(moments))
    assert post.logvar.numpy().max() == 20.0 and post.logvar.numpy().min() == -30.0


def test_f16_weights(weights, cfg, g):
    """fp16 checkpoints: computed in f16 as stored, or upcast to f32 by the builder."""
    half = {k: v.astype(np.float16) for k, v in weights.items()}
    z = wb.from_numpy(g["decode.square.input"])
    with wb.no_grad():
        vae16 = AutoencoderKL(nn.VarBuilder.from_dict(half), cfg)
        out16 = vae16.decode(z)
        assert vae16.dtype == wb.f16 and out16.dtype == wb.f16
        _close(out16.to_dtype(wb.f32).numpy(), g["decode.square.output"], 2e-2)
        vae32 = AutoencoderKL(nn.VarBuilder.from_dict(half, dtype=wb.f32), cfg)
        out32 = vae32.decode(z)
    assert out32.dtype == wb.f32
    _close(out32.numpy(), g["decode.square.output"], 5e-3)  # only the weights are rounded


def test_wrong_channels(vae):
    with pytest.raises(
        wb.ShapeError, match=r"encode: expected \(B, 3, H, W\), found \(1, 4, 8, 8\)"
    ):
        vae.encode(wb.zeros(1, 4, 8, 8))
    with pytest.raises(
        wb.ShapeError, match=r"decode: expected \(B, 4, H, W\), found \(1, 3, 8, 8\)"
    ):
        vae.decode(wb.zeros(1, 3, 8, 8))
    with pytest.raises(wb.ShapeError, match=r"decode: expected \(B, 4, H, W\), found \(4, 8, 8\)"):
        vae.decode(wb.zeros(4, 8, 8))


def test_missing_and_misshaped_weights(weights, cfg):
    missing = {k: v for k, v in weights.items() if k != "decoder.conv_out.weight"}
    with pytest.raises(KeyError, match="decoder.conv_out.weight"):
        AutoencoderKL(nn.VarBuilder.from_dict(missing), cfg)
    wrong = dict(weights, **{"quant_conv.weight": np.zeros((8, 8, 3, 3), np.float32)})
    with pytest.raises(wb.ShapeError, match=r"quant_conv.weight.*\(8, 8, 3, 3\).*\(8, 8, 1, 1\)"):
        AutoencoderKL(nn.VarBuilder.from_dict(wrong), cfg)


def test_unsupported_config(weights, cfg):
    from dataclasses import replace

    with pytest.raises(NotImplementedError, match="act_fn 'gelu'"):
        AutoencoderKL(nn.VarBuilder.from_dict(weights), replace(cfg, act_fn="gelu"))
    with pytest.raises(NotImplementedError, match="up_block_types must be 2"):
        AutoencoderKL(
            nn.VarBuilder.from_dict(weights), replace(cfg, up_block_types=("UpDecoderBlock2D",))
        )
    with pytest.raises(ValueError, match="expected an AutoencoderKL config"):
        VaeConfig.from_json({"_class_name": "AutoencoderTiny"})


def test_legacy_attention_names(weights, cfg, g):
    """Early diffusers checkpoints name the attention query/key/value/proj_attn."""
    renames = {"to_q": "query", "to_k": "key", "to_v": "value", "to_out.0": "proj_attn"}
    legacy = {}
    for k, v in weights.items():
        for new, old in renames.items():
            k = k.replace(f"attentions.0.{new}.", f"attentions.0.{old}.")
        legacy[k] = v
    with wb.no_grad():
        out = AutoencoderKL(nn.VarBuilder.from_dict(legacy), cfg).decode(
            wb.from_numpy(g["decode.wide.input"])
        )
    _close(out.numpy(), g["decode.wide.output"])
