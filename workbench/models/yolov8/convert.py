"""Weight names: Ultralytics' state dict -> ours (candle's ``lmz/candle-yolo-v8`` scheme).

Ultralytics numbers its layers (``model.<i>.…``) from yolov8.yaml; ours name them by role::

    model.0 / 1              -> net.b1.0 / net.b1.1       stem convs
    model.2, 3, 4            -> net.b2.0, b2.1, b2.2      C2f, conv, C2f (-> P3)
    model.5, 6 / 7, 8        -> net.b3.0, b3.1 / b4.0, b4.1
    model.9                  -> net.b5.0                  SPPF
    model.12, 15, 16, 18, 19, 21 -> fpn.n1 … fpn.n6  neck (10, 11, 13, 14, 17, 20: no weights)
    model.22                 -> head                      Detect / Pose (cv2, cv3, cv4, dfl)

and a C2f's bottlenecks ``m.<j>`` become ``bottleneck.<j>``. BatchNorm's ``num_batches_tracked``
is dropped. Any number of classes (and keypoints) works: ``infer_config`` reads the sizes back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .model import SCALES, YoloConfig

ULTRALYTICS_LAYERS = {
    0: "net.b1.0",
    1: "net.b1.1",
    2: "net.b2.0",
    3: "net.b2.1",
    4: "net.b2.2",
    5: "net.b3.0",
    6: "net.b3.1",
    7: "net.b4.0",
    8: "net.b4.1",
    9: "net.b5.0",
    12: "fpn.n1",
    15: "fpn.n2",
    16: "fpn.n3",
    18: "fpn.n4",
    19: "fpn.n5",
    21: "fpn.n6",
    22: "head",
}
_LAYER = re.compile(r"^(?:model\.)?model\.(\d+)\.(.+)$")


def _array(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.numpy()
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        return value.numpy()
    return np.asarray(value)


def ultralytics_name(name: str) -> str | None:
    """Our name for an Ultralytics state-dict name (None: a name with no weights for us)."""
    if name.endswith("num_batches_tracked"):
        return None
    match = _LAYER.match(name)
    if match is None:
        raise KeyError(f"not a YOLOv8 state-dict name from Ultralytics: {name!r}")
    index, rest = int(match.group(1)), match.group(2)
    if index not in ULTRALYTICS_LAYERS:
        raise KeyError(f"{name!r}: YOLOv8 has no weights in layer {index}")
    rest = re.sub(r"(^|\.)m\.(\d+)\.", r"\1bottleneck.\2.", rest)
    return f"{ULTRALYTICS_LAYERS[index]}.{rest}"


def from_ultralytics(state: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Rename an Ultralytics ``DetectionModel``/``PoseModel`` state dict (torch tensors or
    arrays; ``model.`` or ``model.model.`` prefixes) to ours, as numpy arrays."""
    out = {}
    for name, value in state.items():
        ours = ultralytics_name(name)
        if ours is not None:
            out[ours] = _array(value)
    return out


def from_candle(state: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """candle's names are ours: check them and return numpy arrays."""
    bad = [n for n in state if not n.startswith(("net.", "fpn.", "head."))]
    if bad:
        raise KeyError(f"not candle YOLOv8 names: {', '.join(bad[:5])}")
    return {name: _array(value) for name, value in state.items()}


# Channels at width 1 -> a layer with that many output channels.
_WIDTH_PROBES = {
    64: "net.b1.0.conv.weight",
    128: "net.b1.1.conv.weight",
    256: "net.b2.1.conv.weight",
    512: "net.b3.0.conv.weight",
    1024: "net.b5.0.cv2.conv.weight",
}


def _count(names, prefix: str) -> int:
    pattern = re.compile(re.escape(prefix) + r"\.bottleneck\.(\d+)\.")
    return len({m.group(1) for n in names if (m := pattern.match(n))})


def infer_config(shapes: Mapping[str, tuple[int, ...]]) -> YoloConfig:
    """The ``YoloConfig`` of weights in our names, from ``{name: shape}``: classes from the
    class branch, keypoints from cv4, depth from the bottleneck counts, width from channels."""
    names = list(shapes)
    nc = shapes["head.cv3.0.2.weight"][0]
    kpt = None
    if "head.cv4.0.2.weight" in shapes:
        nk = shapes["head.cv4.0.2.weight"][0]
        kpt = (nk // 3, 3) if nk % 3 == 0 else (nk // 2, 2)
    widths = {c: shapes[n][0] for c, n in _WIDTH_PROBES.items()}
    n3, n6 = _count(names, "net.b2.0"), _count(names, "net.b2.2")

    def fits(cfg: YoloConfig) -> bool:
        return all(cfg.ch(c) == w for c, w in widths.items()) and (cfg.n(3), cfg.n(6)) == (n3, n6)

    for d, w, mc in SCALES.values():  # a published size
        if fits(cfg := YoloConfig(d, w, mc, nc, kpt)):
            return cfg
    width = widths[512] / 512
    c1024 = widths[1024]
    max_channels = 1024 if c1024 >= 1024 * width else int(round(c1024 / width))
    for depth in (0.33, 0.67, 1.0, n3 / 3, n6 / 6):
        if fits(cfg := YoloConfig(depth, width, max_channels, nc, kpt)):
            return cfg
    raise ValueError(f"cannot infer the YOLOv8 sizes: channels {widths}, C2f repeats {n3}/{n6}")
