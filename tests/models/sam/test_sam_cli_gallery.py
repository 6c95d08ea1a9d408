"""Loading, the CLI, the gallery entries and click-to-segment, on the tiny golden weights."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from PIL import Image

from workbench import registry
from workbench.io import save_safetensors
from workbench.models import sam
from workbench.models.sam.__main__ import main


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory, sam_golden):
    path = tmp_path_factory.mktemp("sam") / "tiny.safetensors"
    save_safetensors({k: np.ascontiguousarray(v) for k, v in sam_golden[0].items()}, path)
    return path


@pytest.fixture(scope="module")
def image_file(tmp_path_factory, sam_golden):
    path = tmp_path_factory.mktemp("sam") / "img.png"
    Image.fromarray(sam_golden[1]["image.0"].astype(np.uint8)).save(path)
    return path


def test_infer_config(sam_golden, sam_cfg):
    shapes = {k: v.shape for k, v in sam_golden[0].items()}
    assert sam.infer_config(shapes, decoder_heads=2) == sam_cfg


def test_infer_config_errors():
    with pytest.raises(KeyError, match="TinyViT"):  # TinyViT names, but not all of them
        sam.infer_config({"image_encoder.layers.0.x": (1,)})
    with pytest.raises(KeyError, match="not SAM"):
        sam.infer_config({"foo": (1,)})


def test_load_file_matches_golden(weights_file, sam_golden):
    model = sam.load(weights_file, decoder_heads=2)
    p = sam.SamPredictor(model)
    p.set_image(sam_golden[1]["image.0"].astype(np.uint8))
    ref = sam_golden[1]["features.0"]
    assert np.abs(p.features.numpy() - ref).max() < 1e-4 * np.abs(ref).max()


def test_load_missing_file():
    with pytest.raises(FileNotFoundError, match="not found"):
        sam.load("./nope.safetensors")


def _run_cli(monkeypatch, weights_file, argv):
    real = sam.load
    monkeypatch.setattr(
        sys.modules["workbench.models.sam.load"],
        "load",
        lambda w, which="vit_b", **kw: real(weights_file, which, decoder_heads=2, **kw),
    )
    return main(argv)


def test_cli_points(monkeypatch, weights_file, image_file, tmp_path, capsys):
    argv = [str(image_file), "--points", "20,30", "50,10,0", "--output-dir", str(tmp_path)]
    assert _run_cli(monkeypatch, weights_file, argv) == 0
    out = capsys.readouterr().out
    assert "mask 0: score" in out
    mask = np.asarray(Image.open(tmp_path / "img.sam.0.png"))
    assert mask.shape == (48, 64) and set(np.unique(mask)) <= {0, 255}
    assert (tmp_path / "img.sam.png").exists()


def test_cli_box_and_auto(monkeypatch, weights_file, image_file, tmp_path, capsys):
    argv = [str(image_file), "--box", "8,6,40,44", "--single", "--output-dir", str(tmp_path)]
    assert _run_cli(monkeypatch, weights_file, argv) == 0
    assert "1 masks" in capsys.readouterr().out
    argv = [str(image_file), "--auto", "--points-per-side", "2", "--output-dir", str(tmp_path)]
    assert _run_cli(monkeypatch, weights_file, argv) == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["x.png"], "give --points"),
        (["x.png", "--auto", "--box", "1,2,3,4"], "no prompts"),
        (["x.png", "--box", "1,2,3"], "4 numbers"),
        (["x.png", "--points", "a,b"], "numbers"),
    ],
)
def test_cli_errors(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err


def test_cli_missing_weights(image_file, capsys):
    assert main([str(image_file), "--auto", "--weights", "./missing.safetensors"]) == 1
    assert "cannot load SAM weights" in capsys.readouterr().err


def test_gallery_entries(weights_file, sam_golden, monkeypatch):
    assert {"sam-vit-b", "sam-vit-b-point"} <= set(registry.entries())
    real = sam.load
    monkeypatch.setattr(
        "workbench.models.sam.gallery.load",
        lambda w, which: real(w, which, decoder_heads=2),
    )
    entry = registry.get("sam-vit-b-point")
    runner = entry.load(str(weights_file))
    image = sam_golden[1]["image.0"].astype(np.uint8)
    res = entry.run(runner, image, **entry.options)
    assert len(res.images) == 3 and all(o.mask.shape == (48, 64) for _, o in res.overlays)
    features = runner.predictor.features
    entry.run(runner, image, x=0.2, y=0.3)
    assert runner.predictor.features is features  # same image: embedding reused
    auto = registry.get("sam-vit-b")
    res = auto.run(runner, image, points_per_side=2)
    assert res.text.endswith("masks")
    with pytest.raises(registry.WeightsNotFound):
        entry.load("./missing.safetensors")
    assert sam.gallery._sample().shape == (384, 512, 3)


def test_click_segmenter(sam_model, sam_golden):
    image = sam_golden[1]["image.0"].astype(np.uint8)
    s = sam.ClickSegmenter(sam.SamPredictor(sam_model), image)
    masks, scores = s.add_point(20, 30)
    assert masks.shape == (3, 48, 64) and np.all(np.diff(scores) <= 0)
    # a press and release at the same place is a background point (right button)
    s.on_press(types.SimpleNamespace(xdata=50.0, ydata=10.0, button=3))
    s.on_release(types.SimpleNamespace(xdata=50.0, ydata=10.0, button=3))
    assert s.labels == [1, 0] and s.masks.shape == (1, 48, 64)
    # a drag is a box
    s.on_press(types.SimpleNamespace(xdata=40.0, ydata=44.0, button=1))
    s.on_release(types.SimpleNamespace(xdata=8.0, ydata=6.0, button=1))
    assert s.box == (8.0, 6.0, 40.0, 44.0)
    s.clear()
    assert s.points == [] and len(s.masks) == 0


def test_click_segmenter_figure(sam_model, sam_golden):
    import matplotlib

    matplotlib.use("Agg")
    image = sam_golden[1]["image.0"].astype(np.uint8)
    s = sam.ClickSegmenter(sam.SamPredictor(sam_model), image)
    fig = s.show()
    s.add_point(20, 30)
    s.set_box(8, 6, 40, 44)
    assert fig.axes[0].get_title().startswith("score")
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_overlay():
    img = np.zeros((4, 5, 3), np.uint8)
    m = np.zeros((4, 5), bool)
    m[1, 2] = True
    out = sam.overlay(img, [m])
    assert out[0, 0].tolist() == [0, 0, 0] and out[1, 2].sum() > 0
