"""Loading YOLOv8 weights and running it on images: ``load`` then ``detector(image)``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ... import nn
from ...ops.creation import from_numpy
from . import convert
from .draw import COCO_NAMES, draw_detections
from .model import YoloConfig, YoloV8
from .postprocess import Detections, letterbox, non_max_suppression, resize, to_detections, to_input

HUB_REPO = "lmz/candle-yolo-v8"


def hub_filename(which: str = "n", pose: bool = False) -> str:
    """candle's file for a size: ``yolov8{n,s,m,l,x}[-pose].safetensors``."""
    YoloConfig.variant(which)  # checks ``which``
    return f"yolov8{which}{'-pose' if pose else ''}.safetensors"


def _tensors(weights) -> Mapping[str, Any]:
    if isinstance(weights, Mapping):
        return weights
    path = Path(os.path.expanduser(str(weights)))
    if path.suffix == ".npz":
        return dict(np.load(path))
    from ...io.safetensors import load_safetensors

    return load_safetensors(path)


def load_weights(weights, which: str = "n", pose: bool = False) -> dict[str, Any]:
    """Our names -> tensors from a dict, a ``.safetensors``/``.npz`` file (candle's or
    Ultralytics' names, told apart by their prefix) or a hub repo id (candle's files)."""
    if (
        isinstance(weights, str | os.PathLike)
        and not Path(os.path.expanduser(str(weights))).exists()
    ):
        if str(weights).endswith((".safetensors", ".npz")) or str(weights).startswith(
            ("/", ".", "~")
        ):
            raise FileNotFoundError(f"YOLOv8 weights not found: {weights}")
        from ...io import hub

        weights = hub.file(str(weights), hub_filename(which, pose))
    tensors = _tensors(weights)
    if any(name.startswith("model.") for name in tensors):  # other entries are ignored
        return convert.from_ultralytics(
            {k: v for k, v in tensors.items() if k.startswith("model.")}
        )
    return dict(tensors)


class Detector:
    """A YOLOv8 with its pre- and post-processing; ``detector(image)`` -> ``Detections``."""

    def __init__(self, model: YoloV8, names=None, size: int = 640):
        self.model, self.size = model, size
        nc = model.cfg.num_classes
        if names is None:
            names = ("person",) if model.cfg.kpt_shape else COCO_NAMES[:nc]
        self.names = list(names) + [str(i) for i in range(len(names), nc)]

    @property
    def cfg(self) -> YoloConfig:
        return self.model.cfg

    def __call__(
        self,
        image,
        conf: float = 0.25,
        iou: float = 0.45,
        size: int | None = None,
        mode: str = "letterbox",
        max_det: int = 300,
    ) -> Detections:
        """Boxes (and keypoints) in ``image``'s pixels. ``mode`` "letterbox" keeps the aspect
        ratio and pads to multiples of 32; "resize" stretches to multiples of 32."""
        if mode not in ("letterbox", "resize"):
            raise ValueError(f"mode must be 'letterbox' or 'resize', found {mode!r}")
        prep = letterbox if mode == "letterbox" else resize
        picture, transform = prep(image, size or self.size)
        w = self.model.head.cv2[0][2].weight
        x = from_numpy(to_input([picture])).to(w.device).to_dtype(w.dtype)
        pred = self.model(x).numpy().astype(np.float32)
        det = non_max_suppression(pred, conf, iou, self.cfg.num_classes, max_det=max_det)[0]
        return to_detections(det, transform, self.cfg.kpt_shape, self.names)

    def annotate(self, image, **options) -> tuple[np.ndarray, Detections]:
        """The image with its detections drawn, and the detections."""
        det = self(image, **options)
        return draw_detections(np.asarray(image)[..., :3], det), det


def load(
    weights=HUB_REPO,
    which: str = "n",
    pose: bool = False,
    dtype=None,
    device=None,
    names=None,
    size: int = 640,
) -> Detector:
    """A ``Detector`` from weights (see ``load_weights``); sizes and classes are read from the
    weights. It computes in ``dtype`` (default f32, whatever the file stores). Weights of
    another model (or detection weights for ``pose=True``) raise ``nn.WeightsMismatch`` naming
    the missing and unexpected tensors."""
    from ... import dtype as dt
    from ...nn.var_builder import build_checked

    tensors = load_weights(weights, which, pose)
    shapes = {k: tuple(v.shape) for k, v in tensors.items()}
    model = f"YOLOv8{which}{' pose' if pose else ''}"
    try:
        cfg = convert.infer_config(shapes)
    except (KeyError, ValueError):  # not YOLOv8 names: compare with the published variant
        cfg = YoloConfig.variant(which, pose)
    if pose and cfg.kpt_shape is None:  # a detection file: ask for the keypoint head too
        cfg = replace(cfg, kpt_shape=(17, 3))
    vb = nn.VarBuilder.from_dict(tensors, dt.f32 if dtype is None else dtype, device)
    where = str(weights) if isinstance(weights, str | os.PathLike) else None
    return Detector(build_checked(model, lambda vb: YoloV8(vb, cfg), vb, where), names, size)
