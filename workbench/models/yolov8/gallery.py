"""The code of the gallery entries (``wb.gallery()``) YOLOv8n detection and pose, described in
``workbench.models.catalog``; weights from candle's hub repo ``lmz/candle-yolo-v8`` or a local
file. Registered when this module is imported."""

from __future__ import annotations

import numpy as np

from ... import registry
from .detector import Detector, load
from .draw import color, draw_detections


def _sample() -> np.ndarray:
    """A synthetic street-ish picture (no image files ship with workbench)."""
    h, w = 384, 512
    y, x = np.mgrid[0:h, 0:w]
    sky = np.stack([110 + 0 * x, 160 + 0 * x, 220 - y // 4], -1)
    image = np.where((y < h * 0.6)[..., None], sky, 90).astype(np.uint8)
    image[200:330, 60:250] = (200, 40, 40)  # a red block
    image[150:360, 330:380] = (40, 40, 40)  # a dark post
    return image


def _loader(pose: bool):
    def load_runner(weights: str) -> Detector:
        try:
            return load(weights, "n", pose)
        except (FileNotFoundError, OSError) as e:
            raise registry.WeightsNotFound(str(e)) from e

    return load_runner


def run_detect(runner: Detector, image, conf: float = 0.25, iou: float = 0.45) -> registry.Result:
    det = runner(image, conf=conf, iou=iou)
    overlays = [
        (0, registry.Overlay(box=tuple(b), label=label, score=s, color=color(c)))
        for b, s, c, label in zip(
            det.boxes.tolist(), det.scores.tolist(), det.classes.tolist(), det.labels(), strict=True
        )
    ]
    return registry.Result([np.asarray(image)], overlays, f"{len(det)} objects")


def run_pose(runner: Detector, image, conf: float = 0.25, iou: float = 0.45) -> registry.Result:
    det = runner(image, conf=conf, iou=iou)
    return registry.Result([draw_detections(np.asarray(image), det)], [], f"{len(det)} people")


registry.register("yolov8n", registry.spec("yolov8n").entry(
    load=_loader(False), run=run_detect, samples={"synthetic": _sample},
    options={"conf": 0.25, "iou": 0.45},
))  # fmt: skip
registry.register("yolov8n-pose", registry.spec("yolov8n-pose").entry(
    load=_loader(True), run=run_pose, samples={"synthetic": _sample},
    options={"conf": 0.25, "iou": 0.45},
))  # fmt: skip
