"""The SDXL prompt panel and its gallery entries (``wb.gallery()``).

    panel = SdxlPanel("stabilityai/sdxl-turbo")   # or a local diffusers folder
    panel                                        # prompt, negative prompt, steps, guidance,
                                                 # seed, size, Generate; live preview; history

Generate runs in a worker thread: the progress bar moves every step, the preview shows the
VAE decoding of the current latents every ``preview_every`` steps, and each result joins a
strip of the last ``history`` images (click "show" under one to see it large with its
settings). Registered entries: ``sdxl-turbo`` and ``sdxl-base``; without weights (offline,
not cached) the panel says which repo and files are missing and how to fetch them.
"""

from __future__ import annotations

import html
import io
import threading
import time
from dataclasses import dataclass

import numpy as np

from ... import registry
from ...io.errors import HubError
from .load import SDXL_TURBO_REPO, is_turbo

__all__ = ["GalleryResult", "SdxlPanel"]

SIZES = (256, 384, 512, 768, 1024)


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _no_weights(weights: str, error: BaseException) -> str:
    """Two short lines; the loader's full advice folded under "details"."""
    from ...notebook.gallery import code_spans

    return (
        f"<b>No weights</b> for <code>{html.escape(weights)}</code>: not cached and not "
        "downloadable here.<br>Type the path of a local diffusers folder in the weights box."
        f"<details><summary>details</summary>{code_spans(str(error))}</details>"
    )


@dataclass
class GalleryResult:
    """One generated image with the settings that made it."""

    image: np.ndarray
    prompt: str
    negative: str
    steps: int
    guidance: float
    seed: int
    seconds: float

    def caption(self) -> str:
        neg = f", negative {self.negative!r}" if self.negative else ""
        return (
            f"{self.prompt!r}{neg}: {self.steps} steps, guidance {self.guidance:g}, seed "
            f"{self.seed}, {self.image.shape[1]}x{self.image.shape[0]}, {self.seconds:.1f} s"
        )


class SdxlPanel:
    """A prompt form for a Stable Diffusion XL pipeline (see the module docstring).

    ``weights`` is a hub repo id or a local folder; ``load`` (default
    ``StableDiffusionXL.from_pretrained``) makes the pipeline, once per weights source.
    """

    def __init__(self, weights: str = SDXL_TURBO_REPO, history: int = 6, preview_every: int = 2,
                 size: int | None = None, load=None):  # fmt: skip
        import ipywidgets as w

        self._w = w
        self.history_size = history
        self.preview_every = preview_every
        self._load = load
        self._pipes: dict[str, object] = {}
        self._thread: threading.Thread | None = None
        self.history: list[GalleryResult] = []
        turbo = is_turbo(weights)
        wide = w.Layout(width="520px")
        self.weights = w.Text(value=weights, description="weights", layout=wide)
        self.prompt = w.Textarea(value="a photo of an astronaut riding a horse on mars",
                                 description="prompt", layout=wide)  # fmt: skip
        self.negative = w.Text(value="", description="negative", layout=wide)
        self.steps = w.BoundedIntText(value=1 if turbo else 30, min=1, max=200,
                                      description="steps")  # fmt: skip
        self.guidance = w.BoundedFloatText(value=0.0 if turbo else 5.0, min=0.0, max=30.0,
                                           step=0.5, description="guidance")  # fmt: skip
        self.seed = w.IntText(value=0, description="seed")
        self.random_seed = w.Checkbox(value=False, description="new seed each time")
        size = size or (512 if turbo else 1024)
        options = sorted({*SIZES, size})
        self.size = w.Dropdown(options=[(f"{s}x{s}", s) for s in options], value=size,
                               description="size")  # fmt: skip
        self.generate_button = w.Button(description="Generate", button_style="primary",
                                        icon="paint-brush")  # fmt: skip
        self.progress = w.IntProgress(value=0, min=0, max=1)
        self.status = w.HTML()
        # Hidden until there is a picture: an empty Image widget draws as a broken image.
        self.image = w.Image(format="png", layout=w.Layout(width="384px", display="none"))
        self.strip = w.HBox()
        self.generate_button.on_click(lambda _: self.generate())
        self.box = w.VBox([
            self.weights, self.prompt, self.negative,
            w.HBox([self.steps, self.guidance]), w.HBox([self.seed, self.random_seed]),
            self.size, w.HBox([self.generate_button, self.progress]), self.status,
            self.image, self.strip,
        ])  # fmt: skip

    # -- running ----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def generate(self) -> threading.Thread | None:
        """What the Generate button does: start the worker thread (one at a time)."""
        if self.running:
            return None
        if self.random_seed.value:
            self.seed.value = int(np.random.SeedSequence().entropy % (2**31))
        settings = dict(
            weights=self.weights.value.strip(), prompt=self.prompt.value,
            negative=self.negative.value, steps=int(self.steps.value),
            guidance=float(self.guidance.value), seed=int(self.seed.value),
            size=int(self.size.value),
        )  # fmt: skip
        self.generate_button.disabled = True
        self.progress.bar_style = ""
        self._thread = threading.Thread(target=self._work, kwargs=settings, name="wb-sdxl",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        return self._thread

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker (tests, scripts)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def pipeline(self, weights: str):
        """The pipeline for ``weights`` (loaded once)."""
        if weights not in self._pipes:
            if self._load is not None:
                self._pipes[weights] = self._load(weights)
            else:
                from .pipeline import StableDiffusionXL

                self._pipes[weights] = StableDiffusionXL.from_pretrained(weights)
        return self._pipes[weights]

    def _on_step(self, step: int, total: int) -> None:
        self.progress.max, self.progress.value = total, step
        self.status.value = f"step {step}/{total}…"

    def _picture(self, image: np.ndarray) -> None:
        self.image.value = _png(image)
        self.image.layout.display = None

    def _on_preview(self, step: int, image: np.ndarray) -> None:
        self._picture(image)

    def _work(self, weights, prompt, negative, steps, guidance, seed, size) -> None:
        start = time.perf_counter()
        try:
            self.status.value = f"loading <code>{html.escape(weights)}</code>…"
            try:
                pipe = self.pipeline(weights)
            except (registry.WeightsNotFound, HubError, OSError) as e:
                self.progress.value, self.progress.bar_style = 0, ""
                self.status.value = _no_weights(weights, e)
                return
            start = time.perf_counter()
            out = pipe(
                prompt, negative_prompt=negative or None, num_inference_steps=steps,
                guidance_scale=guidance, seed=seed, height=size, width=size,
                preview=self._on_preview, preview_every=self.preview_every,
                callback=self._on_step, progress=False,
            )  # fmt: skip
            result = GalleryResult(out.images[0], prompt, negative, steps, guidance, out.seed,
                                   time.perf_counter() - start)  # fmt: skip
            self.history = [result, *self.history][: self.history_size]
            self.show(0)
            self._draw_strip()
            self.progress.bar_style = "success"
        except Exception as exc:  # shown in the widget: a worker thread has nowhere else to raise
            self.progress.bar_style = "danger"
            self.status.value = f"<b>{html.escape(type(exc).__name__)}</b>: {html.escape(str(exc))}"
        finally:
            self.generate_button.disabled = False

    # -- history ------------------------------------------------------------------------------
    def show(self, index: int) -> None:
        """Show history item ``index`` (0 = newest) large, with its settings."""
        result = self.history[index]
        self._picture(result.image)
        self.status.value = html.escape(result.caption())

    def _draw_strip(self) -> None:
        w = self._w
        items = []
        for i, result in enumerate(self.history):
            thumb = w.Image(value=_png(result.image), format="png",
                            layout=w.Layout(width="72px", height="72px"))  # fmt: skip
            button = w.Button(description="show", tooltip=result.caption(),
                              layout=w.Layout(width="72px"))  # fmt: skip
            button.on_click(lambda _, i=i: self.show(i))
            items.append(w.VBox([thumb, button]))
        self.strip.children = tuple(items)

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)


# -- registry entries ---------------------------------------------------------------------------
def _load_pipeline(weights: str):
    from .pipeline import StableDiffusionXL

    try:
        return StableDiffusionXL.from_pretrained(weights)
    except HubError as e:
        raise registry.WeightsNotFound(str(e)) from e


def run(pipe, image=None, prompt: str = "a photo of an astronaut riding a horse on mars",
        **options) -> registry.Result:  # fmt: skip
    """One generation for the generic gallery (an image, when given, is the img2img start)."""
    out = pipe(prompt, image=image, progress=False, **options)
    return registry.Result([out.images[0]], text=f"seed {out.seed}")


def _panel(entry: registry.Entry) -> SdxlPanel:
    return SdxlPanel(entry.weights)


registry.register("sdxl-turbo", registry.spec("sdxl-turbo").entry(
    load=_load_pipeline, run=run, options={"seed": 0}, panel=_panel,
))  # fmt: skip
registry.register("sdxl-base", registry.spec("sdxl-base").entry(
    load=_load_pipeline, run=run, options={"seed": 0, "num_inference_steps": 30}, panel=_panel,
))  # fmt: skip
