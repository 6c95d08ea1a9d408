"""Pre- and post-processing for YOLOv8, in numpy (a few hundred boxes: no device work).

- ``letterbox``: scale an (H, W, 3) image by ``r = min(size/H, size/W)`` and pad it with gray
  (114) to a multiple of 32 (``auto``) or to ``size × size``; ``resize``: scale each side to a
  multiple of 32 without padding (candle's way). Both return the image and a ``Transform``
  that maps boxes back: ``x_orig = (x - pad_x) / r_x``.
- ``non_max_suppression``: best class per anchor, confidence filter, greedy class-aware NMS
  (boxes of different classes never suppress each other), as Ultralytics does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_WH = 7680.0  # class offset for class-aware NMS: boxes of different classes never overlap


@dataclass(frozen=True)
class Transform:
    """How an original image of ``shape`` (H, W) became the network input."""

    shape: tuple[int, int]
    ratio: tuple[float, float]  # (r_x, r_y)
    pad: tuple[float, float]  # (left, top)

    def boxes_back(self, boxes: np.ndarray) -> np.ndarray:
        """(n, 4) x0, y0, x1, y1 in input pixels -> original pixels, clipped to the image."""
        out = np.array(boxes, dtype=np.float32, copy=True).reshape(-1, 4)
        out[:, 0::2] = ((out[:, 0::2] - self.pad[0]) / self.ratio[0]).clip(0, self.shape[1])
        out[:, 1::2] = ((out[:, 1::2] - self.pad[1]) / self.ratio[1]).clip(0, self.shape[0])
        return out

    def points_back(self, points: np.ndarray) -> np.ndarray:
        """(..., K, 2 or 3) keypoints x, y [, visibility] -> original pixels (not clipped)."""
        out = np.array(points, dtype=np.float32, copy=True)
        out[..., 0] = (out[..., 0] - self.pad[0]) / self.ratio[0]
        out[..., 1] = (out[..., 1] - self.pad[1]) / self.ratio[1]
        return out


def _rgb(image) -> np.ndarray:
    array = np.asarray(image)
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, -1)
    if array.ndim != 3 or array.shape[-1] not in (3, 4):
        raise ValueError(f"YOLOv8 needs an (H, W, 3) RGB image, found shape {array.shape}")
    array = array[..., :3]
    if array.dtype.kind == "f":
        array = (np.clip(array, 0, 1) * 255 + 0.5).astype(np.uint8)
    return np.ascontiguousarray(array, dtype=np.uint8)


def _resized(image: np.ndarray, width: int, height: int) -> np.ndarray:
    if (height, width) == image.shape[:2]:
        return image
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize((width, height), Image.BILINEAR))


def letterbox(
    image, size: int = 640, auto: bool = True, stride: int = 32, color: int = 114
) -> tuple[np.ndarray, Transform]:
    """Keep the aspect ratio: scale so the long side is ``size``, pad (centred) to multiples
    of ``stride`` (``auto``) or to ``size × size``."""
    image = _rgb(image)
    h, w = image.shape[:2]
    r = min(size / h, size / w)
    nw, nh = int(round(w * r)), int(round(h * r))
    dw, dh = size - nw, size - nh
    if auto:
        dw, dh = dw % stride, dh % stride
    left, top = dw // 2, dh // 2
    out = np.full((nh + dh, nw + dw, 3), color, np.uint8)
    out[top : top + nh, left : left + nw] = _resized(image, nw, nh)
    return out, Transform((h, w), (nw / w, nh / h), (float(left), float(top)))


def resize(image, size: int = 640, stride: int = 32) -> tuple[np.ndarray, Transform]:
    """Scale so the long side is ``size``, each side rounded to a multiple of ``stride``
    (the aspect ratio changes slightly; nothing is padded)."""
    image = _rgb(image)
    h, w = image.shape[:2]
    r = size / max(h, w)
    nw = max(stride, int(round(w * r / stride)) * stride)
    nh = max(stride, int(round(h * r / stride)) * stride)
    return _resized(image, nw, nh), Transform((h, w), (nw / w, nh / h), (0.0, 0.0))


def to_input(images: list[np.ndarray]) -> np.ndarray:
    """(H, W, 3) uint8 images of one size -> (B, 3, H, W) float32 in [0, 1]."""
    batch = np.stack([np.asarray(im) for im in images]).astype(np.float32) / 255.0
    return np.ascontiguousarray(batch.transpose(0, 3, 1, 2))


def xywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    xy, wh = boxes[..., :2], boxes[..., 2:4] / 2
    return np.concatenate([xy - wh, xy + wh], -1)


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one x0, y0, x1, y1 box with (n, 4) boxes."""
    w = (np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0])).clip(0)
    h = (np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1])).clip(0)
    inter = w * h
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / (area + areas - inter)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """Greedy NMS: indices kept, by decreasing score; a box goes when its IoU with a kept,
    higher-scoring box exceeds ``iou``."""
    order = np.argsort(-scores, kind="stable")
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        order = rest[box_iou(boxes[i], boxes[rest]) <= iou]
    return np.asarray(keep, dtype=np.int64)


def non_max_suppression(
    pred,
    conf: float = 0.25,
    iou: float = 0.45,
    num_classes: int | None = None,
    agnostic: bool = False,
    max_det: int = 300,
    max_nms: int = 30000,
) -> list[np.ndarray]:
    """Decoded predictions (B, 4 + nc + extra, A) (centre x, y, w, h, class probabilities,
    keypoints...) -> per image (n, 6 + extra): x0, y0, x1, y1, score, class, extra."""
    pred = np.asarray(pred.numpy() if hasattr(pred, "numpy") else pred, dtype=np.float32)
    nc = pred.shape[1] - 4 if num_classes is None else num_classes
    out = []
    for x in pred.transpose(0, 2, 1):  # (A, C)
        cls = x[:, 4 : 4 + nc]
        best = cls.argmax(1)
        score = cls[np.arange(len(x)), best] if len(x) else cls.max(1)
        keep = score > conf
        x, score, best = x[keep], score[keep], best[keep]
        if len(x) > max_nms:
            top = np.argsort(-score, kind="stable")[:max_nms]
            x, score, best = x[top], score[top], best[top]
        boxes = xywh_to_xyxy(x[:, :4])
        offset = 0.0 if agnostic else best[:, None] * MAX_WH
        kept = nms(boxes + offset, score, iou)[:max_det]
        det = np.concatenate(
            [boxes, score[:, None], best[:, None].astype(np.float32), x[:, 4 + nc :]], 1
        )
        out.append(det[kept])
    return out


@dataclass
class Detections:
    """Detections on one original image: ``boxes`` (n, 4) x0, y0, x1, y1 in pixels,
    ``scores`` (n,), ``classes`` (n,) int, ``keypoints`` (n, K, 3) x, y, visibility (pose)."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray
    keypoints: np.ndarray | None = None
    names: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.scores)

    def labels(self) -> list[str]:
        return [self.names[c] if c < len(self.names) else str(c) for c in self.classes.tolist()]


def to_detections(det: np.ndarray, transform: Transform, kpt_shape=None, names=()) -> Detections:
    """One image's NMS output -> ``Detections`` in the original image's pixels."""
    keypoints = None
    if kpt_shape is not None:
        k, nd = kpt_shape
        keypoints = transform.points_back(det[:, 6:].reshape(-1, k, nd))
    return Detections(
        transform.boxes_back(det[:, :4]),
        det[:, 4].copy(),
        det[:, 5].astype(np.int64),
        keypoints,
        list(names),
    )
