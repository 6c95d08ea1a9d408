"""The registry and the gallery, driven end to end with a tiny test model."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
import pytest
import tiny_model
from PIL import Image

from workbench import registry
from workbench.notebook.gallery import Gallery, draw

pytest.importorskip("ipywidgets")


@pytest.fixture
def model(monkeypatch):
    monkeypatch.setattr(registry, "_ENTRIES", {})
    tiny_model.register()
    return registry.get(tiny_model.NAME)


def _png(widget) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(widget.value)).convert("RGB"))


def test_registry(model):
    assert list(registry.entries()) == [tiny_model.NAME]
    assert registry.entries()[tiny_model.NAME] is model
    with pytest.raises(KeyError, match="no model 'nope'.*tiny-threshold"):
        registry.get("nope")
    with pytest.raises(TypeError, match="Entry"):
        registry.register("bad", {"load": None})
    registry.unregister(tiny_model.NAME)
    assert registry.entries() == {}


def test_empty_gallery_says_so(monkeypatch):
    monkeypatch.setattr(registry, "_ENTRIES", {})
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
