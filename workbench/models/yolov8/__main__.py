"""``python -m workbench.models.yolov8 IMAGE [IMAGE ...] --which n [--weights PATH_OR_REPO]``:
detect objects (or poses with ``--pose``), print them and write ``<image>.yolov8.png``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m workbench.models.yolov8", description=__doc__)
    p.add_argument("images", nargs="+", help="image files")
    p.add_argument("--which", default="n", choices=list("nsmlx"), help="model size")
    p.add_argument("--pose", action="store_true", help="pose estimation (person keypoints)")
    p.add_argument(
        "--weights",
        default=None,
        help="a .safetensors file (candle or Ultralytics names) or a hub repo id "
        "(default lmz/candle-yolo-v8)",
    )
    p.add_argument("--conf", type=float, default=0.25, help="confidence threshold")
    p.add_argument("--iou", type=float, default=0.45, help="NMS IoU threshold")
    p.add_argument("--size", type=int, default=640, help="input size (a multiple of 32)")
    p.add_argument("--mode", default="letterbox", choices=["letterbox", "resize"])
    p.add_argument("--device", default=None, help="cpu, cuda, metal")
    p.add_argument("--output", default=None, help="output file (one image only)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    if args.output and len(args.images) > 1:
        print("--output needs a single image", file=sys.stderr)
        return 2
    if args.size % 32:
        print(f"--size must be a multiple of 32, found {args.size}", file=sys.stderr)
        return 2
    import numpy as np
    from PIL import Image

    from .detector import HUB_REPO, load

    try:
        detector = load(args.weights or HUB_REPO, args.which, args.pose, device=args.device)
    except (OSError, KeyError, ValueError) as e:
        print(f"cannot load YOLOv8 weights: {e}", file=sys.stderr)
        return 1
    for name in args.images:
        with Image.open(name) as im:
            image = np.asarray(im.convert("RGB"))
        picture, det = detector.annotate(
            image, conf=args.conf, iou=args.iou, size=args.size, mode=args.mode
        )
        out = Path(args.output) if args.output else Path(name).with_suffix(".yolov8.png")
        Image.fromarray(picture).save(out)
        print(f"{name}: {len(det)} detections -> {out}")
        for box, score, label in zip(
            det.boxes.tolist(), det.scores.tolist(), det.labels(), strict=True
        ):
            print(f"  {label:>14} {score:.3f}  " + " ".join(f"{v:7.1f}" for v in box))
    return 0


if __name__ == "__main__":
    sys.exit(main())
