"""The model gallery: ``gallery()`` or ``%wb_gallery [MODEL]``.

It lists the models in ``workbench.registry`` (without importing their code),
takes a weights source (hub repo id or local path), an uploaded image or a bundled sample, and a
Run button that loads and runs the model in a worker thread, with a progress bar, then shows the
result images with their overlays (boxes, labels, masks). Without weights, offline, it says so and
names the hub repo and the local path to put them. An entry with a ``panel`` shows that widget
instead (built once per gallery, kept in ``Gallery.panels``).
"""

from __future__ import annotations

import html
import io
import threading
import time
from pathlib import Path

import numpy as np

from .. import registry

_STEPS = ("loading weights", "running", "drawing", "done")


def _rgb(image) -> np.ndarray:
    """``(H, W, 3)`` uint8 from a PIL image or an array (gray, RGBA, float in [0, 1])."""
    array = np.asarray(image)
    if array.dtype.kind == "f":
        array = (np.clip(array, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
    array = array.astype(np.uint8, copy=False)
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=-1)
    if array.shape[-1] == 4:
        array = array[..., :3]
    if array.ndim != 3 or array.shape[-1] not in (1, 3):
        raise ValueError(f"expected an (H, W), (H, W, 3) or (H, W, 4) image, found {array.shape}")
    return np.ascontiguousarray(np.broadcast_to(array, (*array.shape[:2], 3)))


def _open(data: bytes | str | Path) -> np.ndarray:
    from PIL import Image

    source = io.BytesIO(bytes(data)) if isinstance(data, bytes | bytearray | memoryview) else data
    with Image.open(source) as image:
        return _rgb(image.convert("RGB"))


def draw(image: np.ndarray, overlays: list[registry.Overlay]) -> np.ndarray:
    """``image`` with its overlays drawn: masks tinted, boxes outlined with their labels."""
    from PIL import Image, ImageDraw

    out = _rgb(image).astype(np.float32)
    for overlay in overlays:
        if overlay.mask is not None:
            mask = np.asarray(overlay.mask, dtype=bool)
            out[mask] = 0.55 * out[mask] + 0.45 * np.asarray(overlay.color, np.float32)
    picture = Image.fromarray(out.astype(np.uint8))
    pen = ImageDraw.Draw(picture)
    for overlay in overlays:
        if overlay.box is not None:
            x0, y0, x1, y1 = (float(v) for v in overlay.box)
            pen.rectangle((x0, y0, x1, y1), outline=overlay.color, width=2)
            text = overlay.label + (f" {overlay.score:.2f}" if overlay.score is not None else "")
            if text.strip():
                pen.text((x0 + 2, max(0.0, y0 - 11)), text.strip(), fill=overlay.color)
    return np.asarray(picture)


def png(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(_rgb(image)).save(buffer, format="PNG")
    return buffer.getvalue()


def _looks_local(source: str) -> bool:
    return source.startswith(("/", ".", "~")) or Path(source).suffix != "" or Path(source).exists()


def code_spans(text: str) -> str:
    """HTML-escaped ``text`` with its `backticked` spans as ``<code>``."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def offline_message(
    entry: registry.Entry | registry.Spec, weights: str, error: BaseException
) -> str:
    """HTML: which weights are missing and where to put them, in two lines; the loader's own
    error folded away under "details"."""
    name = html.escape(entry.display_name)
    source = html.escape(weights)
    if _looks_local(weights):
        missing = f"nothing usable at <code>{source}</code>."
    else:
        missing = f"the hub repo <code>{source}</code> is not cached and cannot be downloaded here."
    if entry.local_path:
        where = (
            f"Put the weights at <code>{html.escape(str(entry.local_path))}</code>, type that path"
        )
    else:
        where = "Type the local path of the weights"
    return (
        f"<b>No weights for {name}</b>: {missing}<br>{where} in the weights box and press Run "
        f"again.<details><summary>details</summary>{code_spans(str(error))}</details>"
    )


class Gallery:
    """The gallery widget for the registered models; ``model`` picks the first one shown.

    Listing reads only the registry's descriptions; a model's code is imported when it is run
    (or, for an entry with its own panel, when it is picked)."""

    def __init__(self, model: str | None = None) -> None:
        import ipywidgets as w

        self._w = w
        self.entries = registry.entries()
        self.status = w.HTML()
        self._thread: threading.Thread | None = None
        self._runners: dict[tuple[str, str], object] = {}
        self.panels: dict[str, object] = {}
        if not self.entries:
            self.status.value = (
                "<b>No models are registered.</b> Models come from "
                "<code>workbench.models.catalog</code> and the <code>workbench.gallery</code> "
                "entry points, or <code>workbench.registry.register</code>."
            )
            self.box = w.VBox([self.status])
            return
        if model is not None and model not in self.entries:
            raise ValueError(
                f"no model {model!r} in the registry; known: {', '.join(self.entries)}"
            )
        options = [(e.display_name, name) for name, e in self.entries.items()]
        self.model = w.Dropdown(options=options, value=model or options[0][1], description="model")
        self.description = w.HTML()
        self.weights = w.Text(description="weights", placeholder="hub repo id or local path",
                              layout=w.Layout(width="480px"))  # fmt: skip
        self.sample = w.Dropdown(description="sample")
        self.upload = w.FileUpload(accept="image/*", multiple=False, description="upload")
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.progress = w.IntProgress(value=0, min=0, max=len(_STEPS), description="")
        self.results = w.HBox()
        self.standard = w.VBox([
            self.weights, w.HBox([self.sample, self.upload]),
            w.HBox([self.run_button, self.progress]), self.status, self.results,
        ])  # fmt: skip
        self.panel_box = w.VBox()
        self.model.observe(lambda change: self._select(change["new"]), names="value")
        self.run_button.on_click(lambda _: self.run())
        self._select(self.model.value)
        self.box = w.VBox([self.model, self.description, self.standard, self.panel_box])

    # -- UI state -----------------------------------------------------------------------------
    def _select(self, name: str) -> None:
        entry = self.entries[name]
        self.description.value = f"<b>{html.escape(entry.display_name)}</b>: " + html.escape(
            entry.description
        )
        self.weights.value = entry.weights
        self.sample.options = list(entry.samples)
        self.sample.value = next(iter(entry.samples), None)
        self.status.value = ""
        self.results.children = ()
        self.progress.value = 0
        if entry.has_panel:
            if name not in self.panels:
                full = registry.get(name)
                self.panels[name] = full.panel(full)
            panel = self.panels[name]
            self.panel_box.children = (getattr(panel, "box", panel),)
            self.standard.layout.display = "none"
        else:
            self.panel_box.children = ()
            self.standard.layout.display = None

    def _image(self, entry: registry.Entry) -> np.ndarray:
        uploaded = self.upload.value
        if uploaded:
            return _open(uploaded[0]["content"])
        if self.sample.value is None:
            raise ValueError("upload an image: this model has no sample images")
        sample = entry.samples[self.sample.value]
        return _rgb(sample()) if callable(sample) else _open(Path(sample).expanduser())

    # -- running -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run(self) -> threading.Thread | None:
        """What the Run button does: start the worker thread (one at a time)."""
        if self.running:
            return None
        name = self.model.value
        weights = self.weights.value.strip()
        self.run_button.disabled = True
        self.results.children = ()
        self._thread = threading.Thread(target=self._work, args=(name, weights),
                                        name="wb-gallery", daemon=True)  # fmt: skip
        self._thread.start()
        return self._thread

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker (tests, scripts)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _step(self, index: int) -> None:
        self.progress.value = index
        self.status.value = f"{_STEPS[index - 1] if index else ''}…" if index < len(_STEPS) else ""

    def _fail(self) -> None:
        """No half-filled bar is left behind: the status line says what happened."""
        self.progress.value = 0
        self.progress.bar_style = ""

    def _work(self, name: str, weights: str) -> None:
        start = time.perf_counter()
        try:
            entry = registry.get(name)  # imports the model's code the first time
            image = self._image(entry)
            self._step(1)
            key = (name, weights)
            if key not in self._runners:
                try:
                    self._runners[key] = entry.load(weights)
                except (registry.WeightsNotFound, OSError) as exc:
                    self._fail()
                    self.status.value = offline_message(entry, weights, exc)
                    return
            self._step(2)
            result = entry.run(self._runners[key], image, **entry.options)
            self._step(3)
            pictures = []
            for index, picture in enumerate(result.images):
                overlays = [o for i, o in result.overlays if i == index]
                pictures.append(self._w.Image(value=png(draw(picture, overlays)), format="png"))
            self.results.children = tuple(pictures)
            self._step(len(_STEPS))
            self.progress.bar_style = "success"
            caption = f" {html.escape(result.text)}" if result.text else ""
            self.status.value = f"done in {time.perf_counter() - start:.2f} s.{caption}"
        except Exception as exc:  # shown in the widget: a worker thread has nowhere else to raise
            self._fail()
            self.status.value = f"<b>{html.escape(type(exc).__name__)}</b>: {code_spans(str(exc))}"
        finally:
            self.run_button.disabled = False

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)


def gallery(model: str | None = None) -> Gallery:
    """The gallery of registered models (``wb.gallery()``)."""
    return Gallery(model)
