"""The SDXL command line, the prompt panel and the gallery entries, on the tiny folder."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from workbench import registry
from workbench.models import stable_diffusion as sd
from workbench.models.stable_diffusion.__main__ import main

pytest.importorskip("ipywidgets")


def _png(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def test_cli_writes_png(tiny_dir, tiny_pipe, tmp_path, capsys):
    out = tmp_path / "a" / "cat.png"
    argv = ["a photo of a cat", "--weights", str(tiny_dir), "--steps", "2", "--size", "32x32",
            "--seed", "5", "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert "seed 5, 2 steps" in capsys.readouterr().out
    image = np.asarray(Image.open(out))
    expected = tiny_pipe("a photo of a cat", num_inference_steps=2, height=32, width=32, seed=5,
                         progress=False).images[0]  # fmt: skip
    assert image.shape == (32, 32, 3) and np.array_equal(image, expected)


def test_cli_img2img_and_options(tiny_dir, tmp_path, capsys):
    init = tmp_path / "init.png"
    Image.fromarray(np.full((32, 48, 3), 120, np.uint8)).save(init)
    out = tmp_path / "out.png"
    argv = ["a red dog", "--weights", str(tiny_dir), "--image", str(init), "--strength", "0.5",
            "--steps", "2", "--scheduler", "euler_a", "--negative", "blurry", "--guidance", "3",
            "--turbo", "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert np.asarray(Image.open(out)).shape == (32, 48, 3)
    assert "1 steps" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["x", "--size", "30x32"], "multiples of 8"),
        (["x", "--size", "big"], "WxH"),
        (["x", "--steps", "0"], "--steps must be >= 1"),
        (["x", "--image", "a.png", "--strength", "1.5"], "strength"),
        (["x", "--scheduler", "heun"], "invalid choice"),
        (["x"], "--out"),
    ],
)
def test_cli_bad_arguments(argv, message, capsys, tmp_path):
    if "--out" not in argv and message != "--out":
        argv = [*argv, "--out", str(tmp_path / "x.png")]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_cli_offline(offline_hub, tmp_path, capsys):
    assert main(["a cat", "--turbo", "--out", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert "cannot load Stable Diffusion XL weights" in err and sd.SDXL_TURBO_REPO in err
    assert "hf download" in err and not (tmp_path / "x.png").exists()


def test_cli_missing_init_image(tiny_dir, tmp_path, capsys):
    argv = ["x", "--weights", str(tiny_dir), "--image", str(tmp_path / "none.png"),
            "--steps", "2", "--quiet", "--out", str(tmp_path / "x.png")]  # fmt: skip
    assert main(argv) == 2
    assert "none.png" in capsys.readouterr().err


def test_panel_generates_with_preview_and_history(tiny_dir, tiny_pipe):
    panel = sd.SdxlPanel(str(tiny_dir), size=32, preview_every=1, history=2,
                         load=lambda weights: tiny_pipe)  # fmt: skip
    assert panel.size.value == 32 and panel.steps.value == 30
    panel.steps.value, panel.guidance.value, panel.seed.value = 3, 4.0, 11
    previews = []
    panel._on_preview = lambda step, image: previews.append(step)
    panel.generate_button.click()
    panel.join(timeout=120)
    assert not panel.running and not panel.generate_button.disabled
    assert panel.progress.bar_style == "success", panel.status.value
    assert panel.progress.value == panel.progress.max == 3 and previews == [1, 2]
    first = panel.history[0]
    expected = tiny_pipe(panel.prompt.value, num_inference_steps=3, guidance_scale=4.0, seed=11,
                         height=32, width=32, progress=False).images[0]  # fmt: skip
    assert np.array_equal(first.image, expected) and np.array_equal(
        _png(panel.image.value), expected
    )
    assert "seed 11" in panel.status.value and len(panel.strip.children) == 1
    panel.prompt.value, panel.random_seed.value = "a blue horse", True
    panel.generate()
    panel.join(timeout=120)
    panel.generate()
    panel.join(timeout=120)
    assert len(panel.history) == 2 and len(panel.strip.children) == 2  # the last two
    assert panel.history[0].seed != 11 and panel.history[1].prompt == "a blue horse"
    panel.strip.children[1].children[1].click()  # "show" under the older one
    assert np.array_equal(_png(panel.image.value), panel.history[1].image)
    assert panel.history[1].caption() in panel.status.value.replace("&#x27;", "'")


def test_panel_loads_and_reports_missing_weights(tiny_dir, offline_hub):
    panel = sd.SdxlPanel(str(tiny_dir), size=32)
    panel.steps.value = 1
    panel.generate()
    panel.join(timeout=120)
    assert panel.progress.bar_style == "success" and len(panel.history) == 1
    offline = sd.SdxlPanel(sd.SDXL_TURBO_REPO)
    assert offline.steps.value == 1 and offline.guidance.value == 0 and offline.size.value == 512
    offline.generate()
    offline.join(timeout=60)
    assert "No weights" in offline.status.value and sd.SDXL_TURBO_REPO in offline.status.value
    assert offline.progress.bar_style == "" and offline.history == []  # no stuck bar


def test_gallery_shows_the_panel(monkeypatch):
    from workbench.notebook.gallery import Gallery

    assert {"sdxl-turbo", "sdxl-base"} <= set(registry.entries())
    plain = registry.Entry("Plain", "no panel", "org/plain", load=str, run=registry.Result)
    monkeypatch.setitem(registry._ENTRIES, "plain", plain)
    gallery = Gallery(model="sdxl-turbo")
    panel = gallery.panels["sdxl-turbo"]
    assert isinstance(panel, sd.SdxlPanel) and panel.weights.value == sd.SDXL_TURBO_REPO
    assert gallery.panel_box.children == (panel.box,)
    assert gallery.standard.layout.display == "none"
    gallery.model.value = "plain"
    assert gallery.panel_box.children == () and gallery.standard.layout.display is None
    gallery.model.value = "sdxl-base"
    assert gallery.panels["sdxl-base"].size.value == 1024
    gallery.model.value = "sdxl-turbo"
    assert gallery.panels["sdxl-turbo"] is panel  # built once


def test_registry_entry_runs(tiny_dir):
    entry = registry.get("sdxl-turbo")
    pipe = entry.load(str(tiny_dir))
    result = entry.run(pipe, None, num_inference_steps=1, height=32, width=32, **entry.options)
    assert result.images[0].shape == (32, 32, 3) and result.text == "seed 0"
    with pytest.raises(registry.WeightsNotFound):
        entry.load(str(tiny_dir / "missing"))
