"""Drawing detections with PIL: boxes with COCO labels, pose skeletons."""

from __future__ import annotations

import numpy as np

from .postprocess import Detections

COCO_NAMES = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich",
    "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote",
    "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book",
    "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip

# COCO keypoints: nose, eyes, ears, shoulders, elbows, wrists, hips, knees, ankles (0-based
# pairs joined by the skeleton).
COCO_SKELETON = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
    (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip


def color(index: int) -> tuple[int, int, int]:
    """A distinct, stable colour per class (golden-ratio hue steps)."""
    import colorsys

    r, g, b = colorsys.hsv_to_rgb((index * 0.618034) % 1.0, 0.75, 1.0)
    return int(r * 255), int(g * 255), int(b * 255)


def draw_detections(
    image: np.ndarray, det: Detections, kpt_threshold: float = 0.5, width: int = 2
) -> np.ndarray:
    """``image`` (H, W, 3) uint8 with each box outlined and labelled ``name score``, and for
    pose models the keypoints (visibility > ``kpt_threshold``) joined by the COCO skeleton."""
    from PIL import Image, ImageDraw

    picture = Image.fromarray(np.ascontiguousarray(np.asarray(image, dtype=np.uint8)))
    pen = ImageDraw.Draw(picture)
    for box, score, cls, label in zip(
        det.boxes.tolist(), det.scores.tolist(), det.classes.tolist(), det.labels(), strict=True
    ):
        c = color(cls)
        pen.rectangle(box, outline=c, width=width)
        text = f"{label} {score:.2f}"
        x0, y0 = box[0], max(0.0, box[1] - 12)
        left, top, right, bottom = pen.textbbox((x0, y0), text)
        pen.rectangle((left - 1, top - 1, right + 1, bottom + 1), fill=c)
        pen.text((x0, y0), text, fill=(0, 0, 0))
    if det.keypoints is not None:
        for points in det.keypoints:
            seen = (
                points[:, 2] > kpt_threshold if points.shape[1] == 3 else np.ones(len(points), bool)
            )
            for a, b in COCO_SKELETON:
                if a < len(points) and b < len(points) and seen[a] and seen[b]:
                    pen.line(
                        [tuple(points[a, :2]), tuple(points[b, :2])],
                        fill=(255, 160, 0),
                        width=width,
                    )
            for (x, y), ok in zip(points[:, :2].tolist(), seen.tolist(), strict=True):
                if ok:
                    pen.ellipse((x - 3, y - 3, x + 3, y + 3), fill=(0, 255, 128))
    return np.asarray(picture)
