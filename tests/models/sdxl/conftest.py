"""The tiny SDXL pipeline (tests/fixtures/sdxl/tiny, seeded random weights in the diffusers
layout) and the pipeline goldens of tests/fixtures/sdxl_goldens/pipeline.py, read without
diffusers or torch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sdxl"
TINY = FIXTURES / "tiny"


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    return TINY


@pytest.fixture(scope="session")
def tiny_pipe():
    """The tiny pipeline in f32 on the CPU (shared: a pipeline keeps no state between calls)."""
    from workbench.models.stable_diffusion import StableDiffusionXL

    return StableDiffusionXL.from_pretrained(TINY)


@pytest.fixture(scope="session")
def pipeline_golden() -> tuple[dict, dict[str, np.ndarray]]:
    """(cases by name: the diffusers call's arguments, arrays by name)."""
    from safetensors import safe_open

    with safe_open(str(FIXTURES / "pipeline.safetensors"), "np") as f:
        cases = json.loads(f.metadata()["cases"])
        arrays = {k: f.get_tensor(k) for k in f.keys()}
    return cases, arrays


@pytest.fixture
def offline_hub(monkeypatch, tmp_path):
    """HF_HUB_OFFLINE=1 with an empty cache: no hub repo is available."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return tmp_path / "hf"
