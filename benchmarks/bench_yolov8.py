"""YOLOv8n at 640×640 on the CPU: workbench against Ultralytics' PyTorch model with the same
weights (random, BatchNorm folded on both sides: ``model.fuse()`` there, at load here).

Needs ``ultralytics`` (a benchmark/test reference only; workbench never imports it). PyPI's
torchvision cannot load beside torch 2.13, so it is stubbed for the import.

Ultralytics without touching torch 2.13 (torchvision is stubbed here, not installed)::

    pip install -c constraints.txt --no-deps ultralytics ultralytics-thop
    pip install -c constraints.txt opencv-python-headless
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import tempfile
import types

import numpy as np

import workbench as wb

from ._harness import Skip, Workload


def _ultralytics_tasks():
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="yolo-config-"))
    stub = types.ModuleType("torchvision")
    stub.__version__ = "0.28.0"
    added = sys.modules.setdefault("torchvision", stub) is stub
    version = importlib.metadata.version
    importlib.metadata.version = lambda n: "0.28.0" if n == "torchvision" else version(n)
    try:
        import ultralytics.nn.tasks as tasks
    except ImportError as e:
        raise Skip(f"ultralytics is not installed ({e})") from e
    finally:
        importlib.metadata.version = version
        if added:
            del sys.modules["torchvision"]
    return tasks


def _yolov8n():
    import torch

    from workbench import nn
    from workbench.models.yolov8 import YoloConfig, YoloV8, from_ultralytics

    tasks = _ultralytics_tasks()
    torch.manual_seed(0)
    ref = tasks.DetectionModel("yolov8n.yaml", verbose=False).eval()
    state = from_ultralytics(ref.state_dict())
    ref = ref.fuse(verbose=False)
    model = YoloV8(nn.VarBuilder.from_dict(state, wb.f32), YoloConfig.variant("n"))
    x = np.random.default_rng(0).random((1, 3, 640, 640), dtype=np.float32)
    xa, tx = wb.tensor(x), torch.from_numpy(x.copy())

    def torch_run():
        with torch.inference_mode():
            return ref(tx)[0].numpy()

    return {"workbench": lambda: model(xa).numpy(), "torch": torch_run}


WORKLOADS = [
    Workload(
        "yolov8n/640x640",
        _yolov8n,
        target=0.8,
        tolerance=1e-2,
        note="1x3x640x640 -> 84x8400 decoded, BatchNorm folded on both sides",
    ),
]
