"""``python -m workbench.models.sam IMAGE (--points x,y[,label] ... | --box x0,y0,x1,y1 |
--auto)``: segment, write each mask as ``<image>.sam.<i>.png`` and an overlay
``<image>.sam.png``, and print the scores."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _floats(text: str, n: tuple[int, ...], what: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: expected numbers, found {text!r}") from None
    if len(values) not in n:
        raise argparse.ArgumentTypeError(f"{what}: expected {' or '.join(map(str, n))} numbers")
    return values


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m workbench.models.sam", description=__doc__)
    p.add_argument("image", help="image file")
    p.add_argument(
        "--points",
        nargs="+",
        default=[],
        type=lambda s: _floats(s, (2, 3), "--points"),
        help="x,y[,label] in pixels; label 1 (default) foreground, 0 background",
    )
    p.add_argument("--box", type=lambda s: _floats(s, (4,), "--box"), help="x0,y0,x1,y1")
    p.add_argument("--auto", action="store_true", help="automatic masks for everything")
    p.add_argument("--single", action="store_true", help="one mask instead of three")
    p.add_argument("--weights", default=None, help="a .safetensors file or hub repo id")
    p.add_argument("--which", default="vit_b", help="hub file: vit_b, mobile_sam")
    p.add_argument("--points-per-side", type=int, default=32, help="grid for --auto")
    p.add_argument("--device", default=None, help="cpu, cuda, metal")
    p.add_argument("--output-dir", default=None, help="where to write (default: next to IMAGE)")
    args = p.parse_args(argv)
    if not (args.points or args.box or args.auto):
        p.error("give --points, --box or --auto")
    if args.auto and (args.points or args.box):
        p.error("--auto takes no prompts")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    import numpy as np
    from PIL import Image

    from .automatic import SamAutomaticMaskGenerator
    from .draw import overlay
    from .load import HUB_REPO, load
    from .predictor import SamPredictor

    try:
        sam = load(args.weights or HUB_REPO, args.which, device=args.device)
    except (OSError, KeyError, ValueError, NotImplementedError) as e:
        print(f"cannot load SAM weights: {e}", file=sys.stderr)
        return 1
    with Image.open(args.image) as im:
        image = np.asarray(im.convert("RGB"))
    if args.auto:
        anns = SamAutomaticMaskGenerator(sam, points_per_side=args.points_per_side).generate(image)
        masks = [a["segmentation"] for a in anns]
        scores = [a["predicted_iou"] for a in anns]
    else:
        predictor = SamPredictor(sam)
        predictor.set_image(image)
        coords = [p[:2] for p in args.points] or None
        labels = [int(p[2]) if len(p) == 3 else 1 for p in args.points] or None
        masks, scores, _ = predictor.predict(
            coords, labels, args.box, multimask_output=not args.single
        )
    src = Path(args.image)
    out_dir = Path(args.output_dir) if args.output_dir else src.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, (m, s) in enumerate(zip(masks, scores, strict=True)):
        path = out_dir / f"{src.stem}.sam.{i}.png"
        Image.fromarray(np.asarray(m, np.uint8) * 255).save(path)
        print(f"mask {i}: score {float(s):.3f}, area {int(np.sum(m))} -> {path}")
    Image.fromarray(overlay(image, masks)).save(out_dir / f"{src.stem}.sam.png")
    print(f"{len(masks)} masks; overlay -> {out_dir / f'{src.stem}.sam.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
