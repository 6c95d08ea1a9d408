"""YOLOv8 against Ultralytics' goldens: raw head outputs, decoded predictions, NMS."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import nn
from workbench.models.yolov8 import convert
from workbench.models.yolov8.model import YoloConfig, YoloV8
from workbench.models.yolov8.postprocess import non_max_suppression


def _input(golden) -> wb.Tensor:
    return wb.from_numpy(golden["input"].astype(np.float32))


def _dependence(a: np.ndarray) -> float:
    return float(np.std(a[0] - a[1]) / np.std(a[0]))


@pytest.mark.parametrize("which", ["detect", "pose"])
def test_golden_is_input_dependent(which, detect_golden, pose_golden):
    _, golden = detect_golden if which == "detect" else pose_golden
    assert not np.allclose(golden["input"][0], golden["input"][1])
    for key in ("boxes", "scores"):
        assert _dependence(golden[key]) > 0.1, key
    kept = [golden["nms.0"], golden["nms.1"]]
    assert min(len(k) for k in kept) > 0  # NMS finds boxes
    assert len(kept[0]) != len(kept[1]) or not np.allclose(kept[0][:, :4], kept[1][:, :4])


def test_infer_config(detect_golden, pose_golden, detect_model, pose_model):
    assert detect_model.cfg == YoloConfig(0.33, 0.0625, 1024, 5, None)
    assert pose_model.cfg == YoloConfig(0.33, 0.0625, 1024, 1, (17, 3))


@pytest.mark.parametrize("which", ["detect", "pose"])
def test_raw_outputs_match(which, detect_golden, pose_golden, detect_model, pose_model):
    (_, golden), model = (
        (detect_golden, detect_model) if which == "detect" else (pose_golden, pose_model)
    )
    raw = model.forward_raw(_input(golden))
    keys = ("boxes", "scores") + (("kpts",) if which == "pose" else ())
    assert set(raw) == set(keys)
    for key in keys:
        ref = golden[key]
        assert raw[key].shape == ref.shape
        np.testing.assert_allclose(raw[key].numpy(), ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())


@pytest.mark.parametrize("which", ["detect", "pose"])
def test_decoded_match(which, detect_golden, pose_golden, detect_model, pose_model):
    (_, golden), model = (
        (detect_golden, detect_model) if which == "detect" else (pose_golden, pose_model)
    )
    out = model(_input(golden)).numpy()
    ref = golden["decoded"]
    assert out.shape == ref.shape
    # box coordinates in pixels (up to ~100), probabilities in [0, 1]
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=2e-2)


@pytest.mark.parametrize("which", ["detect", "pose"])
def test_nms_matches(which, detect_golden, pose_golden, detect_model, pose_model):
    (_, golden), model = (
        (detect_golden, detect_model) if which == "detect" else (pose_golden, pose_model)
    )
    nc = model.cfg.num_classes
    ours_on_golden = non_max_suppression(golden["decoded"], 0.25, 0.45, nc)
    ours = non_max_suppression(model(_input(golden)), 0.25, 0.45, nc)
    for b in range(2):
        ref = golden[f"nms.{b}"]
        np.testing.assert_allclose(ours_on_golden[b], ref, rtol=1e-5, atol=1e-4)
        assert ours[b].shape == ref.shape
        np.testing.assert_array_equal(ours[b][:, 5], ref[:, 5])  # classes
        np.testing.assert_allclose(ours[b], ref, rtol=1e-3, atol=2e-2)


def test_folded_state_dict_round_trip(detect_golden, detect_model):
    """``state_dict()`` holds BatchNorm-folded convs in candle's names and loads back."""
    state = detect_model.state_dict()
    assert "net.b1.0.conv.bias" in state and not any(".bn." in k for k in state)
    assert "fpn.n6.bottleneck.0.cv2.conv.weight" in state and "head.cv3.2.2.bias" in state
    again = YoloV8(nn.VarBuilder.from_dict(dict(state)), detect_model.cfg)
    x = _input(detect_golden[1])
    np.testing.assert_array_equal(again(x).numpy(), detect_model(x).numpy())
    half = YoloV8(nn.VarBuilder.from_dict(dict(state), wb.f16), detect_model.cfg)  # no dfl
    assert half(x.to_dtype(wb.f16)).dtype == wb.f16


def test_candle_names_load(detect_golden, detect_model):
    """candle's files use our names with unfolded BatchNorm: from_candle keeps them."""
    ours = convert.from_ultralytics(detect_golden[0])
    assert "net.b2.0.bottleneck.0.cv1.bn.running_var" in ours
    assert "head.dfl.conv.weight" in ours
    same = YoloV8(nn.VarBuilder.from_dict(convert.from_candle(ours), wb.f32), detect_model.cfg)
    x = _input(detect_golden[1])
    np.testing.assert_array_equal(same(x).numpy(), detect_model(x).numpy())
    stored = YoloV8(nn.VarBuilder.from_dict(ours), detect_model.cfg)  # keeps the file's f16
    assert stored(x.to_dtype(wb.f16)).dtype == wb.f16
    with pytest.raises(KeyError, match="not candle YOLOv8 names"):
        convert.from_candle({"model.0.conv.weight": np.zeros(1)})


def test_ultralytics_names():
    assert (
        convert.ultralytics_name("model.2.m.1.cv2.bn.bias") == "net.b2.0.bottleneck.1.cv2.bn.bias"
    )
    assert convert.ultralytics_name("model.model.21.cv1.conv.weight") == "fpn.n6.cv1.conv.weight"
    assert convert.ultralytics_name("model.22.dfl.conv.weight") == "head.dfl.conv.weight"
    assert convert.ultralytics_name("model.9.cv1.bn.num_batches_tracked") is None
    with pytest.raises(KeyError, match="no weights in layer 10"):
        convert.ultralytics_name("model.10.weight")
    with pytest.raises(KeyError, match="not a YOLOv8 state-dict name"):
        convert.ultralytics_name("backbone.0.weight")


@pytest.mark.parametrize("which", ["n", "s", "m", "l", "x"])
def test_published_sizes(which):
    """Channel counts of the published models (yolov8n: 3.15 M parameters)."""
    cfg = YoloConfig.variant(which)
    widths = {"n": 16, "s": 32, "m": 48, "l": 64, "x": 80}
    last = {"n": 256, "s": 512, "m": 576, "l": 512, "x": 640}
    assert cfg.ch(64) == widths[which] and cfg.ch(1024) == last[which]
    shapes = {
        "net.b1.0.conv.weight": (cfg.ch(64),),
        "net.b1.1.conv.weight": (cfg.ch(128),),
        "net.b2.1.conv.weight": (cfg.ch(256),),
        "net.b3.0.conv.weight": (cfg.ch(512),),
        "net.b5.0.cv2.conv.weight": (cfg.ch(1024),),
        "head.cv3.0.2.weight": (80,),
    }
    names = list(shapes)
    names += [f"net.b2.0.bottleneck.{i}.cv1.conv.weight" for i in range(cfg.n(3))]
    names += [f"net.b2.2.bottleneck.{i}.cv1.conv.weight" for i in range(cfg.n(6))]
    assert convert.infer_config({n: shapes.get(n, (1,)) for n in names}) == cfg


def test_yolov8n_parameter_count():
    model = YoloV8(nn.VarBuilder.zeros(), YoloConfig.variant("n"))
    assert model.num_parameters() == 3_151_904 - 16  # Ultralytics' count has the DFL's 16
    pose = YoloV8(nn.VarBuilder.zeros(), YoloConfig.variant("n", pose=True))
    x = wb.zeros((1, 3, 64, 96))
    assert pose(x).shape == (1, 4 + 1 + 51, 8 * 12 + 4 * 6 + 2 * 3)


def test_variant_errors():
    with pytest.raises(ValueError, match="must be one of n, s, m, l, x"):
        YoloConfig.variant("q")


def test_f16_weights(detect_golden, detect_model, build_model):
    half = build_model(detect_golden[0], dtype=wb.f16)
    x = _input(detect_golden[1]).to_dtype(wb.f16)
    out = half(x)
    assert out.dtype == wb.f16
    ref = detect_model(_input(detect_golden[1])).numpy()
    # probabilities; the random golden net has a high gain, so f16 rounding shows
    err = np.abs(out.numpy().astype(np.float32)[:, 4:] - ref[:, 4:])
    assert err.mean() < 0.01 and err.max() < 0.2
