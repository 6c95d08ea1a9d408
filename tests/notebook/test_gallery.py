"""The registry and the gallery, driven end to end with a tiny test model."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
import pytest
import tiny_model
from PIL import Image

from workbench import registry
from workbench.notebook.gallery import Gallery, draw, offline_message

pytest.importorskip("ipywidgets")


@pytest.fixture
def model(monkeypatch):
    monkeypatch.setattr(registry, "_ENTRIES", {})
    monkeypatch.setattr(registry, "_discovered", True)  # only the test model
    tiny_model.register()
    return registry.get(tiny_model.NAME)


def _png(widget) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(widget.value)).convert("RGB"))


def test_registry(model):
    assert list(registry.entries()) == [tiny_model.NAME]
    assert registry.entries()[tiny_model.NAME] is model
    with pytest.raises(registry.RegistryError, match="no model 'nope'.*tiny-threshold"):
        registry.get("nope")
    with pytest.raises(TypeError, match="Entry"):
        registry.register("bad", {"load": None})
    registry.unregister(tiny_model.NAME)
    assert registry.entries() == {}


def test_empty_gallery_says_so(monkeypatch):
    monkeypatch.setattr(registry, "_ENTRIES", {})
    monkeypatch.setattr(registry, "_discovered", True)
    gallery = Gallery()
    assert "No models are registered" in gallery.status.value


def test_run_end_to_end(model, tmp_path):
    gallery = Gallery(model=tiny_model.NAME)
    assert "&lt;b&gt;" in gallery.description.value  # escaped
    assert gallery.weights.value == tiny_model.HUB_REPO and gallery.sample.value == "gradient"
    gallery.weights.value = str(tiny_model.save_weights(tmp_path / "tiny.npz", threshold=0.5))
    gallery.run_button.click()
    gallery.join(timeout=30)
    assert not gallery.running and not gallery.run_button.disabled
    assert gallery.progress.value == gallery.progress.max, gallery.status.value
    assert "done in" in gallery.status.value and "pixels" in gallery.status.value
    overlay, mask = (_png(w) for w in gallery.results.children)
    assert overlay.shape == (32, 48, 3) and mask.shape == (32, 48, 3)
    assert (mask[:, :24] == 0).all() and (mask[:, 25:] == 255).all()
    assert overlay[16, 40, 2] > overlay[16, 40, 0]  # the bright half is tinted blue
    assert tuple(overlay[31, 47]) == (255, 64, 64)  # the box's corner


def test_offline_without_weights_names_repo_and_path(model):
    gallery = Gallery()
    gallery.run()
    gallery.join(timeout=30)
    status = gallery.status.value
    assert "No weights for Tiny threshold" in status
    assert tiny_model.HUB_REPO in status and tiny_model.LOCAL_PATH in status
    assert gallery.results.children == () and not gallery.run_button.disabled
    # Two short lines and the loader's own words folded away; no bar left half full.
    head, details = status.split("<details>")
    assert head.count("<br>") == 1 and head.count(tiny_model.HUB_REPO) == 1
    assert "no file" in details
    assert gallery.progress.value == 0 and gallery.progress.bar_style == ""


def test_offline_message_formats_the_loaders_backticks():
    spec = registry.Spec("M", "d", "org/m", code="m")
    error = OSError("not cached; run `hf download org/m w.bin` <elsewhere>")
    text = offline_message(spec, "org/m", error)
    assert "<code>hf download org/m w.bin</code>" in text and "`" not in text
    assert "&lt;elsewhere&gt;" in text and "not cached and cannot be downloaded" in text
    local = offline_message(spec, "/tmp/none.safetensors", error)
    assert "nothing usable at <code>/tmp/none.safetensors</code>" in local


def test_uploaded_image_is_used(model, tmp_path):
    gallery = Gallery()
    gallery.weights.value = str(tiny_model.save_weights(tmp_path / "tiny.npz", threshold=0.1))
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 10, 3), 200, np.uint8)).save(buffer, format="PNG")
    upload = {
        "name": "white.png",
        "type": "image/png",
        "size": buffer.tell(),
        "content": memoryview(buffer.getvalue()),
        "last_modified": datetime.now(UTC),
    }
    gallery.upload.value = (upload,)
    gallery.run()
    gallery.join(timeout=30)
    assert _png(gallery.results.children[1]).shape == (8, 10, 3)
    assert "80 pixels" in gallery.status.value


def test_model_errors_show_in_the_widget(model, tmp_path, monkeypatch):
    def broken(runner, image, **options):
        raise RuntimeError("<kaput>")

    monkeypatch.setitem(registry._ENTRIES, "broken", registry.Entry(
        "Broken", "fails", str(tiny_model.save_weights(tmp_path / "w.npz")), tiny_model.load,
        broken, {"gradient": tiny_model.gradient}))  # fmt: skip
    gallery = Gallery(model="broken")
    gallery.run()
    gallery.join(timeout=30)
    assert "RuntimeError" in gallery.status.value and "&lt;kaput&gt;" in gallery.status.value
    with pytest.raises(ValueError, match="no model 'nope'"):
        Gallery(model="nope")


def test_draw_boxes_and_masks():
    image = np.zeros((10, 10, 3), np.uint8)
    mask = np.zeros((10, 10), bool)
    mask[2:4, 2:4] = True
    out = draw(image, [registry.Overlay(mask=mask, color=(0, 200, 0)),
                       registry.Overlay(box=(5, 5, 9, 9), color=(255, 0, 0))])  # fmt: skip
    assert out[3, 3, 1] > 0 and out[0, 0].sum() == 0
    assert tuple(out[5, 7]) == (255, 0, 0)


def test_gallery_magic(shell, ext, model):
    gallery = shell.run_line_magic("wb_gallery", tiny_model.NAME)
    assert isinstance(gallery, Gallery) and gallery.model.value == tiny_model.NAME
    assert "application/vnd.jupyter.widget-view+json" in gallery._repr_mimebundle_()


def test_sdxl_panel_shows_no_empty_image():
    """An Image widget without a value draws as a broken image: hidden until there is one."""
    from workbench.models.stable_diffusion.gallery import GalleryResult, SdxlPanel

    def offline(weights):
        raise registry.WeightsNotFound(f"nothing cached for {weights}")

    panel = SdxlPanel("org/sdxl-turbo", load=offline)
    assert panel.image.layout.display == "none" and panel.image.value == b""
    panel.generate()
    panel.join(timeout=30)
    assert "No weights" in panel.status.value
    assert panel.image.layout.display == "none"  # still nothing to show
    picture = np.zeros((8, 8, 3), np.uint8)
    panel.history = [GalleryResult(picture, "p", "", 1, 0.0, 0, 0.1)]
    panel.show(0)
    assert panel.image.layout.display is None and _png(panel.image).shape == (8, 8, 3)
