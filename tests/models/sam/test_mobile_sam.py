"""MobileSAM (TinyViT image encoder) against the goldens of tests/fixtures/make_sam_goldens.py:
MobileSAM's structure at reduced size assembled from timm's TinyViT blocks, run through
segment-anything's Sam / SamPredictor (loaded here without timm, segment-anything or torch)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from devices import AVAILABILITY

from workbench import nn
from workbench.io import load_safetensors, save_safetensors
from workbench.models import sam
from workbench.models.sam.tiny_vit import TinyViT, TinyViTConfig, attention_bias_index

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sam"
# the reduced TinyViT of the goldens (TINY_VIT in the script); stage 0 has no attention, its
# heads and window are MobileSAM's placeholders (d0/32 heads, stage 1's window)
TINY = TinyViTConfig(
    embed_dims=(8, 16, 24, 32),
    depths=(1, 1, 2, 1),
    num_heads=(1, 2, 3, 4),
    window_sizes=(3, 3, 4, 3),
)


@pytest.fixture(scope="module")
def golden():
    tensors = {
        k: v.numpy() for k, v in load_safetensors(FIXTURES / "mobile_sam.safetensors").items()
    }
    g = {k[len("golden.") :]: v for k, v in tensors.items() if k.startswith("golden.")}
    w = {k: v for k, v in tensors.items() if not k.startswith("golden.")}
    return w, g


@pytest.fixture(scope="module")
def predictor(golden):
    return sam.SamPredictor(sam.load(golden[0], img_size=64, decoder_heads=2))


def _close(ours, ref, rtol=1e-4):
    err = np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-6)
    assert err < rtol, f"relative max error {err:.3g}"


def test_infer_config(golden):
    cfg = sam.infer_config({k: v.shape for k, v in golden[0].items()}, img_size=64)
    assert cfg.tiny_vit == TINY
    assert (cfg.prompt_embed_dim, cfg.embed_size, cfg.decoder_mlp_dim) == (32, 4, 64)


def test_every_weight_is_used(golden):
    seen = set()

    class Spy(dict):
        def __getitem__(self, k):
            seen.add(k)
            return super().__getitem__(k)

    sam.load(Spy(golden[0]), img_size=64, decoder_heads=2)
    assert sorted(set(golden[0]) - seen) == []
    assert "image_encoder.patch_embed.seq.0.c.weight" in seen
    assert "image_encoder.layers.1.blocks.0.attn.attention_biases" in seen
    assert "image_encoder.layers.2.downsample.conv2.bn.running_var" in seen


def test_goldens_are_input_dependent(golden):
    f0, f1 = golden[1]["features.0"], golden[1]["features.1"]
    assert np.abs(f0 - f1).mean() > 0.1 * np.abs(f0).mean()


@pytest.mark.parametrize("i", [0, 1])
def test_image_encoder(golden, predictor, i):
    g = golden[1]
    predictor.set_image(g[f"image.{i}"].astype(np.uint8))
    assert isinstance(predictor.model.image_encoder, TinyViT)
    _close(predictor.features.numpy(), g[f"features.{i}"])


def test_predict_point(golden, predictor):
    g = golden[1]
    predictor.set_image(g["image.0"].astype(np.uint8))
    masks, iou, low = predictor.predict(
        point_coords=g["point.points"],
        point_labels=g["point.labels"],
        multimask_output=True,
        return_logits=True,
    )
    assert masks.shape == g["point.masks"].shape == (3, 48, 64)
    _close(low, g["point.low_res"])
    _close(iou, g["point.iou"])
    _close(masks, g["point.masks"])


@pytest.mark.gpu
@pytest.mark.skipif(not AVAILABILITY["cuda"][0], reason=f"no CUDA: {AVAILABILITY['cuda'][1]}")
def test_cuda_features_and_masks(golden):
    """The same goldens with the model on "cuda" (GPU arithmetic: looser tolerance)."""
    g = golden[1]
    p = sam.SamPredictor(sam.load(golden[0], img_size=64, decoder_heads=2, device="cuda"))
    p.set_image(g["image.0"].astype(np.uint8))
    _close(p.features.numpy(), g["features.0"], 1e-3)
    masks, iou, _ = p.predict(g["point.points"], g["point.labels"], return_logits=True)
    _close(iou, g["point.iou"], 1e-3)
    _close(masks, g["point.masks"], 1e-3)


def test_load_file(tmp_path, golden):
    path = tmp_path / "mobile.safetensors"
    save_safetensors({k: np.ascontiguousarray(v) for k, v in golden[0].items()}, path)
    p = sam.SamPredictor(sam.load(path, img_size=64, decoder_heads=2))
    p.set_image(golden[1]["image.1"].astype(np.uint8))
    _close(p.features.numpy(), golden[1]["features.1"])


def test_gallery_entry(golden, monkeypatch, tmp_path):
    from workbench import registry

    real = sam.load
    monkeypatch.setattr(
        "workbench.models.sam.gallery.load",
        lambda w, which: real(w, which, img_size=64, decoder_heads=2),
    )
    path = tmp_path / "mobile.safetensors"
    save_safetensors({k: np.ascontiguousarray(v) for k, v in golden[0].items()}, path)
    entry = registry.get("mobile-sam-point")
    runner = entry.load(str(path))
    assert isinstance(runner.sam.image_encoder, TinyViT)
    res = entry.run(runner, golden[1]["image.0"].astype(np.uint8), **entry.options)
    assert len(res.images) == 3 and all(o.mask.shape == (48, 64) for _, o in res.overlays)


def test_folded_state_dict_loads(golden, predictor):
    """The model's own state dict (BatchNorms folded: ``.c.weight`` and ``.c.bias``) loads
    back to the same model."""
    state = predictor.model.state_dict()
    assert "image_encoder.patch_embed.seq.0.c.bias" in state
    assert not any(".bn." in k for k in state)
    p = sam.SamPredictor(sam.load(state, img_size=64, decoder_heads=2))
    p.set_image(golden[1]["image.0"].astype(np.uint8))
    _close(p.features.numpy(), golden[1]["features.0"])


def test_attention_bias_index():
    np.testing.assert_array_equal(
        attention_bias_index(2), [[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]]
    )
    idx = attention_bias_index(7)
    assert idx.shape == (49, 49) and idx.max() == 48
    np.testing.assert_array_equal(idx, idx.T)


def test_published_structure():
    """TinyViT-5M's names and shapes (MobileSAM's checkpoint), from a zero builder."""
    cfg = sam.SamConfig.variant("mobile_sam")
    assert cfg.tiny_vit == TinyViTConfig() and cfg.embed_size == 64
    model = sam.Sam(nn.VarBuilder.zeros(), cfg)
    enc = model.image_encoder
    assert enc.layers[2].blocks[5].attn.attention_biases.shape == (5, 196)
    assert enc.layers[3].blocks[1].attn.attention_biases.shape == (10, 49)
    assert enc.layers[3].downsample is None
    merges = [enc.layers[i].downsample.conv2.c.stride for i in range(3)]
    assert merges == [(2, 2), (2, 2), (1, 1)]
    assert enc.neck[0].weight.shape == (256, 320, 1, 1)


def test_loading_errors(golden):
    shapes = {k: v.shape for k, v in golden[0].items()}
    partial = {k: v for k, v in shapes.items() if "layers.1.blocks.0.attn" not in k}
    with pytest.raises(KeyError, match="TinyViT.*layers.1.blocks.0.attn"):
        sam.infer_config(partial)
    with pytest.raises(KeyError, match="TinyViT"):
        sam.infer_config({"image_encoder.layers.0.x": (1,)})
    wrong = dict(golden[0])
    wrong["image_encoder.layers.1.blocks.0.attn.attention_biases"] = np.zeros((2, 8), np.float32)
    with pytest.raises(Exception, match="attention_biases"):
        sam.load(wrong, img_size=64, decoder_heads=2)
    with pytest.raises(ValueError, match="mobile_sam"):
        sam.load("lmz/candle-sam", which="vit_x")
    assert sam.HUB_FILES["mobile_sam"] == "mobile_sam-tiny-vitt.safetensors"
