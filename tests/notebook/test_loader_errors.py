"""Weights of the wrong model: every loader names the model it expected and the missing,
mis-shaped and unexpected tensors (a ``WeightsMismatch``), never a bare ``KeyError``. The
expected name sets come from building each model on its own ``VarMap``."""

from __future__ import annotations

import numpy as np
import pytest

from workbench import nn, registry, save_safetensors
from workbench.errors import WorkbenchError
from workbench.nn.var_builder import WeightsMismatch, build_checked


def _names(build) -> dict[str, np.ndarray]:
    """The tensors a model is made of, by name (a fresh ``VarMap`` build)."""
    varmap = nn.VarMap()
    build(nn.VarBuilder.from_varmap(varmap))
    return {name: var.numpy() for name, var in varmap.items()}


def _two_layers(vb):
    return nn.Linear(4, 3, vb=vb.pp("fc1")), nn.Linear(3, 2, vb=vb.pp("fc2"))


def test_build_checked_lists_every_problem():
    tensors = _names(_two_layers)
    assert sorted(tensors) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    tensors["fc1.weight"] = np.zeros((3, 5), np.float32)  # wrong shape
    del tensors["fc2.bias"]
    tensors["head.extra"] = np.zeros(2, np.float32)
    vb = nn.VarBuilder.from_dict(tensors)
    with pytest.raises(WeightsMismatch) as info:
        build_checked("two-layer net", _two_layers, vb, "weights.safetensors")
    error = info.value
    assert isinstance(error, WorkbenchError) and isinstance(error, KeyError)
    assert error.missing == ["fc2.bias"] and error.unexpected == ["head.extra"]
    assert error.mis_shaped == {"fc1.weight": ((3, 5), (3, 4))}
    text = str(error)
    assert text.startswith("these weights are not a two-layer net: in weights.safetensors")
    assert "1 missing (fc2.bias)" in text and "1 unexpected (head.extra)" in text
    assert "fc1.weight is (3, 5), expected (3, 4)" in text
    # Fitting weights build as before; errors that are not about weights pass through.
    good = build_checked("two-layer net", _two_layers, nn.VarBuilder.from_dict(_names(_two_layers)))
    assert good[0].weight.shape == (3, 4)

    def broken(vb):
        raise nn.VarBuilderError("not about the weights")

    with pytest.raises(nn.VarBuilderError, match="not about the weights"):
        build_checked("net", broken, vb)


@pytest.fixture(scope="module")
def yolo():
    from workbench.models.yolov8.model import YoloConfig, YoloV8

    detect = _names(lambda vb: YoloV8(vb, YoloConfig.variant("n")))
    pose = _names(lambda vb: YoloV8(vb, YoloConfig.variant("n", pose=True, num_classes=80)))
    return detect, pose


def test_pose_entry_given_a_detection_file(yolo, tmp_path):
    detect, pose = yolo
    path = tmp_path / "yolov8n.safetensors"
    save_safetensors(detect, path)
    entry = registry.get("yolov8n-pose")
    with pytest.raises(WeightsMismatch) as info:
        entry.load(str(path))
    error = info.value
    assert set(error.missing) == set(pose) - set(detect) and error.missing
    assert all(name.startswith("head.cv4.") for name in error.missing)
    assert error.unexpected == [] and error.mis_shaped == {}
    assert f"not a YOLOv8n pose: in {path}" in str(error) and "36 missing" in str(error)
    assert registry.get("yolov8n").load(str(path)).cfg.kpt_shape is None


def test_gallery_shows_the_mismatch(yolo, tmp_path):
    pytest.importorskip("ipywidgets")
    from workbench.notebook.gallery import Gallery

    path = tmp_path / "yolov8n.safetensors"
    save_safetensors(yolo[0], path)
    gallery = Gallery(model="yolov8n-pose")
    gallery.weights.value = str(path)
    gallery.run()
    gallery.join(timeout=120)
    status = gallery.status.value
    assert "WeightsMismatch" in status and "not a YOLOv8n pose" in status
    assert "head.cv4.0.0.conv.weight" in status and "KeyError" not in status


def test_other_models_weights(yolo):
    from workbench.models import sam, yolov8

    detect, _ = yolo
    with pytest.raises(WeightsMismatch) as info:
        sam.load(detect)
    assert "not a SAM vit_b" in str(info.value)
    assert "image_encoder.patch_embed.proj.weight" in info.value.missing
    assert set(info.value.unexpected) == set(detect)
    # The case: names YOLOv8 does not know at all.
    other = {"image_encoder.pos_embed": np.zeros((1, 4, 4, 8), np.float32)}
    with pytest.raises(WeightsMismatch) as info:
        yolov8.load(other)
    assert "not a YOLOv8n" in str(info.value) and "net.b1.0.conv.weight" in str(info.value)
    assert set(info.value.missing) == set(detect) and info.value.unexpected == list(other)


def test_loading_progress_counts_the_bytes(monkeypatch, tmp_path):
    """A ``tqdm.auto`` bar per weights file, advanced by each tensor's stored bytes."""
    import tqdm.auto

    bars = []

    class Recorder:
        def __init__(self, total, desc, **kwargs):
            self.total, self.desc, self.n, self.closed = total, desc, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    tensors = _names(_two_layers)
    path = tmp_path / "net.safetensors"
    save_safetensors(tensors, path)
    build_checked("net", _two_layers, nn.VarBuilder.from_safetensors(path), str(path), True)
    (bar,) = bars
    assert bar.total == bar.n == sum(a.nbytes for a in tensors.values()) == (12 + 3 + 6 + 2) * 4
    assert bar.closed and bar.desc == "loading net (net.safetensors)"
    # By default only large weights get a bar; progress=False never.
    build_checked("net", _two_layers, nn.VarBuilder.from_dict(tensors))
    build_checked("net", _two_layers, nn.VarBuilder.from_dict(tensors), progress=False)
    assert len(bars) == 1
