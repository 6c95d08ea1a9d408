"""YOLOv8 object detection and pose estimation (sizes n, s, m, l, x).

    from workbench.models import yolov8
    detector = yolov8.load("lmz/candle-yolo-v8", which="n")   # or a local .safetensors
    det = detector(image, conf=0.25, iou=0.45)                # boxes in image pixels
    picture = yolov8.draw_detections(image, det)

From the shell: ``python -m workbench.models.yolov8 IMAGE --which n [--weights PATH_OR_REPO]``.
Importing this package registers gallery entries (``wb.gallery()``).
"""

from . import gallery as _gallery  # noqa: F401  (registers the gallery entries)
from .convert import from_candle, from_ultralytics, infer_config
from .detector import HUB_REPO, Detector, hub_filename, load, load_weights
from .draw import COCO_NAMES, COCO_SKELETON, draw_detections
from .model import YoloConfig, YoloV8
from .postprocess import Detections, letterbox, non_max_suppression, resize

__all__ = [
    "COCO_NAMES", "COCO_SKELETON", "Detections", "Detector", "HUB_REPO", "YoloConfig", "YoloV8",
    "draw_detections", "from_candle", "from_ultralytics", "hub_filename", "infer_config",
    "letterbox", "load", "load_weights", "non_max_suppression", "resize",
]  # fmt: skip
