"""``python -m workbench.models.stable_diffusion "PROMPT" [--turbo] [--steps N] --out image.png``:
generate an image with Stable Diffusion XL (or SDXL-Turbo) and write it as a PNG.

    python -m workbench.models.stable_diffusion "an astronaut riding a horse" --turbo --steps 1 \\
        --out astronaut.png
    python -m workbench.models.stable_diffusion "a watercolor of the same" --image astronaut.png \\
        --strength 0.5 --turbo --steps 2 --out watercolor.png

Weights come from the Hugging Face cache (downloaded when online) or a local folder in the
diffusers layout (``--weights``). Exit status: 0 done, 1 weights missing (offline and not
cached), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time

SCHEDULERS = ("euler", "euler_a", "ddim", "dpm++2m", "dpm++2m_karras")


def _size(text: str) -> tuple[int, int]:
    """``WxH`` (or one number for a square) -> (width, height)."""
    parts = text.lower().split("x")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size: expected WxH, found {text!r}") from None
    if len(values) == 1:
        values *= 2
    if len(values) != 2 or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"--size: expected WxH, found {text!r}")
    if any(v % 8 for v in values):
        raise argparse.ArgumentTypeError(f"--size: width and height must be multiples of 8: {text}")
    return values[0], values[1]


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m workbench.models.stable_diffusion",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", help="what to draw")
    p.add_argument("--negative", default=None, help="negative prompt (what to avoid)")
    p.add_argument("--turbo", action="store_true", help="SDXL-Turbo (default 1 step, guidance 0)")
    p.add_argument("--steps", type=int, default=None, help="denoising steps (default 1 turbo, 30)")
    p.add_argument("--guidance", type=float, default=None, help="CFG scale (default 0 turbo, 5)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one)")
    p.add_argument("--size", type=_size, default=None, help="WxH (default: the model's, 512 turbo)")
    p.add_argument("--scheduler", choices=SCHEDULERS, default=None, help="default: the repo's")
    p.add_argument("--weights", default=None, help="hub repo id or local diffusers folder")
    p.add_argument("--variant", default=None, help="weights variant, e.g. fp16")
    p.add_argument("--vae", default=None, help="another VAE, e.g. madebyollin/sdxl-vae-fp16-fix")
    p.add_argument("--image", default=None, help="init image for img2img")
    p.add_argument("--strength", type=float, default=0.5, help="img2img strength in (0, 1]")
    p.add_argument("--device", default=None, help="cpu, cuda, metal")
    p.add_argument("--dtype", default=None, help="f32, f16, bf16 (default: f32 on cpu)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--out", required=True, help="PNG file to write")
    args = p.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        p.error(f"--steps must be >= 1, found {args.steps}")
    if args.image is not None and not 0.0 < args.strength <= 1.0:
        p.error(f"--strength must be in (0, 1], found {args.strength}")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    from pathlib import Path

    from PIL import Image

    from ... import registry
    from ...io.errors import HubError
    from .load import SDXL_BASE_REPO, SDXL_TURBO_REPO
    from .pipeline import StableDiffusionXL

    weights = args.weights or (SDXL_TURBO_REPO if args.turbo else SDXL_BASE_REPO)
    start = time.perf_counter()
    try:
        pipe = StableDiffusionXL.from_pretrained(
            weights, variant=args.variant, dtype=args.dtype, device=args.device, vae=args.vae,
            scheduler=args.scheduler, turbo=True if args.turbo else None,
        )  # fmt: skip
    except (registry.WeightsNotFound, HubError, OSError) as e:
        print(f"cannot load Stable Diffusion XL weights: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    loaded = time.perf_counter()
    width, height = args.size or (None, None)
    steps = args.steps or (None if pipe.turbo else 30)
    try:
        out = pipe(
            args.prompt, negative_prompt=args.negative, num_inference_steps=steps,
            guidance_scale=args.guidance, seed=args.seed, height=height, width=width,
            image=args.image, strength=args.strength, progress=not args.quiet,
        )  # fmt: skip
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(out.images[0]).save(path, format="PNG")
    h, w = out.images[0].shape[:2]
    print(
        f"{path}: {w}x{h}, seed {out.seed}, {len(out.timesteps)} steps, "
        f"load {loaded - start:.1f} s, generate {time.perf_counter() - loaded:.1f} s, "
        f"peak {out.peak_bytes / 2**20:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
