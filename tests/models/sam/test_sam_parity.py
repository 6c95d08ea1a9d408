"""Goldens written by tests/fixtures/make_sam_goldens.py (segment-anything's own SAM at reduced
size, seeded weights): loaded here without segment-anything."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import nn
from workbench.models.sam import Sam, SamConfig, SamPredictor, preprocess_shape

CASES = ["point", "points", "box", "point_box_mask"]


@pytest.fixture(scope="module")
def golden(sam_golden):
    return sam_golden


@pytest.fixture(scope="module")
def predictor(golden, sam_cfg):
    sam = Sam(nn.VarBuilder.from_dict(golden[0]), sam_cfg)
    return SamPredictor(sam)


def _close(ours, ref, rtol=1e-4):
    err = np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-6)
    assert err < rtol, f"relative max error {err:.3g}"


def test_goldens_are_input_dependent(golden):
    g = golden[1]
    f0, f1 = g["features.0"], g["features.1"]
    assert np.abs(f0 - f1).mean() > 0.1 * np.abs(f0).mean()


def test_every_weight_is_used(golden, sam_cfg):
    """The official names cover the model exactly: every tensor of the state dict is read."""
    seen = set()

    class Spy(dict):
        def __getitem__(self, k):
            seen.add(k)
            return super().__getitem__(k)

    Sam(nn.VarBuilder.from_dict(Spy(golden[0])), sam_cfg)
    assert sorted(set(golden[0]) - seen) == []
    assert "image_encoder.blocks.0.attn.rel_pos_h" in seen
    assert "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix" in seen
    assert "mask_decoder.transformer.layers.0.cross_attn_token_to_image.q_proj.weight" in seen


@pytest.mark.parametrize("i", [0, 1])
def test_image_encoder(golden, predictor, i):
    g = golden[1]
    predictor.set_image(g[f"image.{i}"].astype(np.uint8))
    _close(predictor.features.numpy(), g[f"features.{i}"])


@pytest.mark.parametrize("case", CASES)
def test_predict(golden, predictor, case):
    g = golden[1]
    predictor.set_image(g["image.0"].astype(np.uint8))
    masks, iou, low = predictor.predict(
        point_coords=g.get(f"{case}.points"),
        point_labels=g.get(f"{case}.labels"),
        box=g.get(f"{case}.box"),
        mask_input=g.get(f"{case}.mask_input"),
        multimask_output=g[f"{case}.iou"].shape[0] == 3,
        return_logits=True,
    )
    assert masks.shape == g[f"{case}.masks"].shape == (iou.shape[0], 48, 64)
    _close(low, g[f"{case}.low_res"])
    _close(iou, g[f"{case}.iou"])
    _close(masks, g[f"{case}.masks"])
    binary, scores, _ = predictor.predict(
        point_coords=g.get(f"{case}.points"),
        point_labels=g.get(f"{case}.labels"),
        box=g.get(f"{case}.box"),
        mask_input=g.get(f"{case}.mask_input"),
        multimask_output=g[f"{case}.iou"].shape[0] == 3,
    )
    assert binary.dtype == np.bool_
    np.testing.assert_array_equal(binary, masks > 0)
    np.testing.assert_allclose(scores, iou)


def test_f16_runs(golden, sam_cfg):
    sam = Sam(nn.VarBuilder.from_dict(golden[0], dtype=wb.f16), sam_cfg)
    p = SamPredictor(sam)
    g = golden[1]
    p.set_image(g["image.0"].astype(np.uint8))
    masks, iou, _ = p.predict([[20.0, 30.0]], [1], return_logits=True)
    ref = g["point.masks"]
    assert np.abs(masks.astype(np.float32) - ref).max() < 0.05 * np.abs(ref).max() + 1e-2


def test_predict_before_set_image(golden, sam_cfg):
    p = SamPredictor(Sam(nn.VarBuilder.from_dict(golden[0]), sam_cfg))
    with pytest.raises(RuntimeError, match="set_image"):
        p.predict([[1.0, 2.0]], [1])


def test_bad_image_shape(predictor):
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        predictor.set_image(np.zeros((8, 8)))


def test_resize_and_coords(predictor, golden):
    """A smaller image is resized to the long side; prompts scale with it; masks come back
    at the original size."""
    img = golden[1]["image.0"][::2, ::2].astype(np.uint8)  # (24, 32)
    assert preprocess_shape(24, 32, 64) == (48, 64)
    predictor.set_image(img)
    assert predictor.input_size == (48, 64) and predictor.original_size == (24, 32)
    masks, iou, low = predictor.predict(box=[4, 3, 20, 22])
    assert masks.shape == (3, 24, 32) and iou.shape == (3,) and low.shape == (3, 16, 16)


def test_variants():
    assert SamConfig.variant("vit_h").embed_dim == 1280
    assert SamConfig.variant("vit_b").global_attn_indexes == (2, 5, 8, 11)
    with pytest.raises(ValueError, match="vit_b"):
        SamConfig.variant("vit_x")


def test_state_dict_names_are_official(golden, sam_model):
    """``state_dict()`` round-trips the official checkpoint: same names, same values."""
    ours = sam_model.state_dict()
    assert set(ours) == set(golden[0])
    for k, v in ours.items():
        np.testing.assert_array_equal(v.numpy(), golden[0][k])
