"""The code of the gallery entries (``wb.gallery()``, described in ``workbench.models.catalog``)
and click-to-segment.

Registered when imported: ``sam-vit-b`` (every automatic mask), ``sam-vit-b-point`` (the
masks for a point at the image centre) and ``mobile-sam-point`` (the same with MobileSAM's
TinyViT encoder); weights from candle's ``lmz/candle-sam`` or a local file. For mouse
prompts in a notebook::

    %matplotlib widget                      # ipympl: figures that receive clicks
    session = ClickSegmenter(predictor, image)
    session.show()        # left click: foreground point, right click: background point,
                          # drag: box; the best mask is redrawn after every click

The image embedding is computed once (``set_image``), each click only runs the decoder.
"""

from __future__ import annotations

import numpy as np

from ... import registry
from .automatic import SamAutomaticMaskGenerator
from .draw import color
from .load import load
from .predictor import SamPredictor


class ClickSegmenter:
    """Points and a box gathered from clicks, and the masks they give (embedding cached)."""

    def __init__(self, predictor: SamPredictor, image: np.ndarray, multimask: bool = True):
        self.predictor, self.image, self.multimask = predictor, np.asarray(image), multimask
        predictor.set_image(self.image)
        self.points: list[tuple[float, float]] = []
        self.labels: list[int] = []
        self.box: tuple[float, float, float, float] | None = None
        self.masks = np.zeros((0, *self.image.shape[:2]), bool)
        self.scores = np.zeros((0,), np.float32)
        self._low_res = None
        self._press = None
        self._fig = None

    def add_point(self, x: float, y: float, label: int = 1):
        self.points.append((float(x), float(y)))
        self.labels.append(int(label))
        return self.update()

    def set_box(self, x0: float, y0: float, x1: float, y1: float):
        self.box = (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
        return self.update()

    def clear(self) -> None:
        self.points, self.labels, self.box, self._low_res = [], [], None, None
        self.masks = self.masks[:0]
        self.scores = self.scores[:0]
        self._draw()

    def update(self):
        """Decode the current prompts (the previous best low-res mask feeds back in, as in
        SAM's interactive loop); -> (masks, scores), best first."""
        if not self.points and self.box is None:
            return self.masks, self.scores
        masks, scores, low = self.predictor.predict(
            self.points or None,
            self.labels or None,
            self.box,
            mask_input=self._low_res,
            multimask_output=self.multimask and len(self.points) <= 1 and self.box is None,
        )
        order = np.argsort(-scores)
        self.masks, self.scores = masks[order], scores[order]
        self._low_res = low[order[:1]]
        self._draw()
        return self.masks, self.scores

    # -- matplotlib (ipympl) front end -----------------------------------------------------
    def show(self):
        """An interactive figure: left click +, right click -, drag a box."""
        import matplotlib.pyplot as plt

        self._fig, self._ax = plt.subplots()
        self._fig.canvas.mpl_connect("button_press_event", self.on_press)
        self._fig.canvas.mpl_connect("button_release_event", self.on_release)
        self._draw()
        return self._fig

    def on_press(self, event) -> None:
        if event.xdata is not None:
            self._press = (event.xdata, event.ydata, event.button)

    def on_release(self, event) -> None:
        if self._press is None or event.xdata is None:
            return
        x0, y0, button = self._press
        self._press = None
        if abs(event.xdata - x0) + abs(event.ydata - y0) > 5:
            self.set_box(x0, y0, event.xdata, event.ydata)
        else:
            self.add_point(x0, y0, 0 if getattr(button, "value", button) == 3 else 1)

    def _draw(self) -> None:
        if self._fig is None:
            return
        ax = self._ax
        ax.clear()
        ax.imshow(self.image)
        if len(self.masks):
            rgba = np.zeros((*self.masks.shape[1:], 4), np.float32)
            rgba[self.masks[0]] = (*np.float32(color(0)) / 255, 0.5)
            ax.imshow(rgba)
            ax.set_title(f"score {self.scores[0]:.3f}")
        for (x, y), lab in zip(self.points, self.labels, strict=True):
            ax.plot(x, y, "*", color="lime" if lab else "red", markersize=12)
        if self.box is not None:
            x0, y0, x1, y1 = self.box
            ax.plot([x0, x1, x1, x0, x0], [y0, y0, y1, y1, y0], color="lime")
        ax.set_axis_off()
        self._fig.canvas.draw_idle()


# -- registry entries --------------------------------------------------------------------------
class _Runner:
    """A model with its predictor; the embedding is reused while the image is the same."""

    def __init__(self, sam):
        self.sam, self.predictor, self._key = sam, SamPredictor(sam), None

    def embed(self, image: np.ndarray) -> None:
        key = (image.shape, hash(image.tobytes()))
        if key != self._key:
            self.predictor.set_image(image)
            self._key = key


def _sample() -> np.ndarray:
    """A synthetic scene: sky, ground, a red block and a dark disc."""
    h, w = 384, 512
    y, x = np.mgrid[0:h, 0:w]
    image = np.where((y < h * 0.6)[..., None], np.array([120, 170, 225]), 95).astype(np.uint8)
    image[200:330, 60:250] = (200, 40, 40)
    image[(y - 180) ** 2 + (x - 380) ** 2 < 60**2] = (40, 40, 40)
    return image


def _load_runner(weights: str, which: str = "vit_b") -> _Runner:
    try:
        return _Runner(load(weights, which))
    except (FileNotFoundError, OSError) as e:
        raise registry.WeightsNotFound(str(e)) from e


def _load_mobile(weights: str) -> _Runner:
    return _load_runner(weights, "mobile_sam")


def run_auto(runner: _Runner, image, points_per_side: int = 16) -> registry.Result:
    image = np.asarray(image)
    anns = SamAutomaticMaskGenerator(runner.sam, points_per_side=points_per_side).generate(image)
    overlays = [
        (0, registry.Overlay(mask=a["segmentation"], score=a["predicted_iou"], color=color(i)))
        for i, a in enumerate(anns)
    ]
    return registry.Result([image], overlays, f"{len(anns)} masks")


def run_point(runner: _Runner, image, x: float = 0.5, y: float = 0.5) -> registry.Result:
    """Masks for one foreground point at (x, y) in fractions of the width and height."""
    image = np.asarray(image)
    runner.embed(image)
    h, w = image.shape[:2]
    masks, scores, _ = runner.predictor.predict([[x * w, y * h]], [1])
    overlays = [
        (i, registry.Overlay(mask=m, label=f"mask {i}", score=float(s), color=color(i)))
        for i, (m, s) in enumerate(zip(masks, scores, strict=True))
    ]
    return registry.Result([image] * len(masks), overlays, f"{len(masks)} masks for one point")


registry.register("sam-vit-b", registry.spec("sam-vit-b").entry(
    load=_load_runner, run=run_auto, samples={"synthetic": _sample},
    options={"points_per_side": 16},
))  # fmt: skip
registry.register("sam-vit-b-point", registry.spec("sam-vit-b-point").entry(
    load=_load_runner, run=run_point, samples={"synthetic": _sample}, options={"x": 0.5, "y": 0.5},
))  # fmt: skip
registry.register("mobile-sam-point", registry.spec("mobile-sam-point").entry(
    load=_load_mobile, run=run_point, samples={"synthetic": _sample}, options={"x": 0.5, "y": 0.5},
))  # fmt: skip
