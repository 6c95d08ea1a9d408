"""A plain registry of runnable models, read by the notebook gallery (``wb.gallery()``).

A model module registers itself when imported::

    from workbench import registry

    registry.register("yolov8n", registry.Entry(
        display_name="YOLOv8n", description="Object detection (80 COCO classes).",
        weights="lmz/candle-yolo-v8",                      # hub repo id or local path
        local_path="~/.cache/workbench/yolov8n.safetensors",  # where to put weights offline
        samples={"bus": "path/to/bus.jpg"},               # paths or () -> HxWx3 uint8 arrays
        load=load_runner,                                  # load(weights) -> runner
        run=detect,                                        # run(runner, image, **options) -> Result
    ))

An entry may bring its own widget instead: ``panel(entry)`` returns an ipywidget (or an object
with a ``box`` widget), which the gallery shows in place of the image sample, upload and Run
row (e.g. a text-to-image model's prompt form).

``load`` raises ``WeightsNotFound`` (or any ``FileNotFoundError``/``OSError``) when the weights
are not there; the gallery turns that into a message naming the hub repo and the local path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import WorkbenchError


class WeightsNotFound(WorkbenchError, FileNotFoundError):
    """The weights of a registered model are neither cached nor downloadable here."""


@dataclass
class Overlay:
    """Something drawn over a result image: a box ``(x0, y0, x1, y1)`` in pixels, with an
    optional label and score, or a boolean ``mask`` of the image's ``(H, W)``."""

    box: tuple[float, float, float, float] | None = None
    mask: np.ndarray | None = None
    label: str = ""
    score: float | None = None
    color: tuple[int, int, int] = (255, 64, 64)


@dataclass
class Result:
    """What ``run`` returns: images ``(H, W, 3)`` uint8 (or float in [0, 1]), overlays drawn on
    ``images[index]``, and an optional caption."""

    images: list[np.ndarray]
    overlays: list[tuple[int, Overlay]] = field(default_factory=list)
    text: str = ""


@dataclass(frozen=True)
class Entry:
    display_name: str
    description: str
    weights: str
    load: Callable[[str], Any]
    run: Callable[..., Result]
    samples: dict[str, str | Callable[[], np.ndarray]] = field(default_factory=dict)
    local_path: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    panel: Callable[[Entry], Any] | None = None


_ENTRIES: dict[str, Entry] = {}


def register(name: str, entry: Entry) -> None:
    """Add (or replace) the model ``name``."""
    if not isinstance(entry, Entry):
        raise TypeError(
            f"register({name!r}, ...) needs a workbench.registry.Entry, found {entry!r}"
        )
    _ENTRIES[name] = entry


def unregister(name: str) -> None:
    _ENTRIES.pop(name, None)


def entries() -> dict[str, Entry]:
    """The registered models by name, in registration order (a copy)."""
    return dict(_ENTRIES)


def get(name: str) -> Entry:
    try:
        return _ENTRIES[name]
    except KeyError:
        known = ", ".join(_ENTRIES) or "none registered"
        raise KeyError(f"no model {name!r} in the registry ({known})") from None
