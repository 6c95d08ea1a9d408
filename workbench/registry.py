"""The registry of runnable models, read by the notebook gallery (``wb.gallery()``).

Entries are lazy: a ``Spec`` describes a model (name, description, weights, sample names) and
names the module holding its code; the gallery lists specs without importing any model code,
and ``get(name)`` imports that module on first use, which registers the full ``Entry``::

    registry.register("yolov8n", registry.Spec(
        display_name="YOLOv8n", description="Object detection (80 COCO classes).",
        weights="lmz/candle-yolo-v8",                       # hub repo id or local path
        local_path="~/.cache/workbench/yolov8n.safetensors",   # where to put weights offline
        samples=("synthetic",), code="workbench.models.yolov8.gallery",
    ))

and in ``workbench/models/yolov8/gallery.py``::

    registry.register("yolov8n", registry.spec("yolov8n").entry(
        load=load_runner,                                   # load(weights) -> runner
        run=detect,                                         # run(runner, image, **options)
        samples={"synthetic": make_sample},                 # paths or () -> HxWx3 uint8
    ))

The models workbench ships are listed in ``workbench.models.catalog``. Other packages add
entries through the entry point group ``workbench.gallery``: each entry point is named after
the model and points at a ``Spec`` (keep the module it lives in light: it is imported to list
the gallery) or at a full ``Entry``::

    [project.entry-points."workbench.gallery"]
    my-model = "my_package.gallery_spec:SPEC"

An entry may bring its own widget: ``panel(entry)`` returns an ipywidget (or an object with a
``box`` widget), which the gallery shows in place of the image sample, upload and Run row
(e.g. a text-to-image model's prompt form).

``load`` raises ``WeightsNotFound`` (or any ``FileNotFoundError``/``OSError``) when the weights
are not there; the gallery turns that into a message naming the hub repo and the local path.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import WorkbenchError

ENTRY_POINT_GROUP = "workbench.gallery"
_CATALOG = "workbench.models.catalog"


class WeightsNotFound(WorkbenchError, FileNotFoundError):
    """The weights of a registered model are neither cached nor downloadable here."""


class RegistryError(WorkbenchError, KeyError):
    """A model the registry does not know, or whose code does not register it."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


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
    """A model the gallery can run: its description and its code."""

    display_name: str
    description: str
    weights: str
    load: Callable[[str], Any]
    run: Callable[..., Result]
    samples: dict[str, str | Callable[[], np.ndarray]] = field(default_factory=dict)
    local_path: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    panel: Callable[[Entry], Any] | None = None

    @property
    def has_panel(self) -> bool:
        return self.panel is not None


@dataclass(frozen=True)
class Spec:
    """A model described without its code: importing the module ``code`` registers the full
    ``Entry`` under the same name. ``samples`` are the sample names the entry will offer."""

    display_name: str
    description: str
    weights: str
    code: str
    local_path: str | None = None
    samples: tuple[str, ...] = ()
    has_panel: bool = False

    def entry(
        self,
        load: Callable[[str], Any],
        run: Callable[..., Result],
        samples: dict[str, str | Callable[[], np.ndarray]] | None = None,
        options: dict[str, Any] | None = None,
        panel: Callable[[Entry], Any] | None = None,
    ) -> Entry:
        """The full ``Entry`` with this description and the given code."""
        return Entry(self.display_name, self.description, self.weights, load, run,
                     dict(samples or {}), self.local_path, dict(options or {}), panel)  # fmt: skip


_ENTRIES: dict[str, Entry | Spec] = {}
_discovered = False


def register(name: str, entry: Entry | Spec) -> None:
    """Add (or replace) the model ``name``; a ``Spec`` never replaces a loaded ``Entry``."""
    if not isinstance(entry, Entry | Spec):
        raise TypeError(
            f"register({name!r}, ...) needs a workbench.registry.Entry or Spec, found {entry!r}"
        )
    if isinstance(entry, Spec) and isinstance(_ENTRIES.get(name), Entry):
        return
    _ENTRIES[name] = entry


def unregister(name: str) -> None:
    _ENTRIES.pop(name, None)


def _discover() -> None:
    """Register the shipped catalogue and the ``workbench.gallery`` entry points, once."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for name, spec in importlib.import_module(_CATALOG).SPECS.items():
        register(name, spec)
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found = point.load()
            register(point.name, found() if callable(found) else found)
        except Exception as exc:  # a broken plug-in must not hide the other models
            warnings.warn(
                f"workbench gallery: skipped the entry point {point.name} = {point.value} "
                f"of the group {ENTRY_POINT_GROUP}: {type(exc).__name__}: {exc}",
                stacklevel=2,
            )


def entries() -> dict[str, Entry | Spec]:
    """The models by name, in registration order (a copy); nothing is imported."""
    _discover()
    return dict(_ENTRIES)


def spec(name: str) -> Spec:
    """The description of ``name`` from the catalogue or an entry point."""
    found = _lookup(name)
    if isinstance(found, Spec):
        return found
    raise RegistryError(f"the model {name!r} is registered as a full Entry, not a Spec")


def _lookup(name: str) -> Entry | Spec:
    _discover()
    try:
        return _ENTRIES[name]
    except KeyError:
        known = ", ".join(_ENTRIES) or "none registered"
        raise RegistryError(f"no model {name!r} in the registry ({known})") from None


def get(name: str) -> Entry:
    """The full entry of ``name``, importing its code the first time."""
    found = _lookup(name)
    if isinstance(found, Entry):
        return found
    importlib.import_module(found.code)
    loaded = _ENTRIES.get(name)
    if not isinstance(loaded, Entry):
        raise RegistryError(
            f"importing {found.code} did not register the gallery entry {name!r} "
            "(it should call workbench.registry.register with a registry.Entry)"
        )
    return loaded
