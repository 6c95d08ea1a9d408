"""Goldens written by tests/fixtures/make_yolov8_goldens.py (Ultralytics' model, random
weights): loaded here without Ultralytics or torch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench import nn
from workbench.io import load_safetensors
from workbench.models.yolov8 import convert
from workbench.models.yolov8.model import YoloV8

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "yolov8"


def _load(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    tensors = {k: v.numpy() for k, v in load_safetensors(FIXTURES / f"{name}.safetensors").items()}
    golden = {k[len("golden.") :]: v for k, v in tensors.items() if k.startswith("golden.")}
    weights = {k: v for k, v in tensors.items() if not k.startswith("golden.")}
    return weights, golden


@pytest.fixture(scope="session")
def detect_golden():
    """(Ultralytics state dict, goldens) of the tiny 5-class detector."""
    return _load("detect")


@pytest.fixture(scope="session")
def pose_golden(detect_golden):
    """The pose model shares the detector's weights except its cv3 / cv4 branches."""
    weights, golden = _load("pose")
    merged = dict(detect_golden[0])
    merged = {k: v for k, v in merged.items() if not k.startswith(("model.22.cv3", "model.22.cv4"))}
    merged.update(weights)
    return merged, golden


def build(ultralytics_state, dtype=wb.f32) -> YoloV8:
    ours = convert.from_ultralytics(ultralytics_state)
    cfg = convert.infer_config({k: v.shape for k, v in ours.items()})
    return YoloV8(nn.VarBuilder.from_dict(ours, dtype=dtype), cfg)


@pytest.fixture(scope="session")
def build_model():
    """``build_model(ultralytics_state, dtype)`` -> YoloV8."""
    return build


@pytest.fixture(scope="session")
def detect_model(detect_golden):
    return build(detect_golden[0])


@pytest.fixture(scope="session")
def pose_model(pose_golden):
    return build(pose_golden[0])
