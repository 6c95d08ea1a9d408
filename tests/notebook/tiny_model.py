"""A tiny model for the gallery tests: marks the pixels brighter than a threshold read from its
weights file (``.npz`` with ``threshold``), with a box around them and a tinted mask."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workbench import registry

NAME = "tiny-threshold"
HUB_REPO = "workbench-tests/tiny-threshold"
LOCAL_PATH = "~/.cache/workbench/tiny-threshold.npz"


def save_weights(path: Path, threshold: float = 0.5) -> Path:
    np.savez(path, threshold=np.float32(threshold))
    return path


def load(weights: str) -> float:
    path = Path(weights).expanduser()
    if not path.is_file():
        raise registry.WeightsNotFound(f"no file {path}")
    with np.load(path) as data:
        return float(data["threshold"])


def run(threshold: float, image: np.ndarray, **options) -> registry.Result:
    gray = image.astype(np.float32).mean(axis=-1) / 255.0
    mask = gray > threshold
    ys, xs = np.nonzero(mask)
    overlays = [(0, registry.Overlay(mask=mask, color=(0, 0, 255)))]
    if xs.size:
        box = (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))
        overlays.append((0, registry.Overlay(box=box, label="bright", score=float(mask.mean()))))
    return registry.Result([image, mask.astype(np.float32)], overlays, text=f"{mask.sum()} pixels")


def gradient() -> np.ndarray:
    """A 32x48 left-to-right gray ramp: the right half is brighter than 0.5."""
    ramp = np.linspace(0, 255, 48, dtype=np.float32)
    return np.repeat(np.repeat(ramp[None, :, None], 32, axis=0), 3, axis=2).astype(np.uint8)


def register(weights: str = HUB_REPO) -> None:
    registry.register(
        NAME,
        registry.Entry(
            display_name="Tiny threshold",
            description="Marks bright pixels <b>(a test model)</b>.",
            weights=weights,
            load=load,
            run=run,
            samples={"gradient": gradient},
            local_path=LOCAL_PATH,
        ),
    )
