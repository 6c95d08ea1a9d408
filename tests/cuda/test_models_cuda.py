"""The model goldens on the GPU: YOLOv8 and SAM built on device "cuda" give the outputs of
their reference packages (the same goldens as tests/models, tolerances for GPU arithmetic)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from devices import AVAILABILITY

import workbench as wb
from workbench import nn
from workbench.io import load_safetensors

CUDA_OK, CUDA_REASON = AVAILABILITY["cuda"]
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_REASON}"),
]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _golden(path: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(weights, goldens without the ``golden.`` prefix) of a golden file."""
    tensors = {k: v.numpy() for k, v in load_safetensors(path).items()}
    golden = {k[len("golden.") :]: v for k, v in tensors.items() if k.startswith("golden.")}
    return {k: v for k, v in tensors.items() if not k.startswith("golden.")}, golden


@pytest.mark.parametrize("dtype", [wb.f32, wb.f16])
def test_yolov8_raw_outputs(dtype):
    from workbench.models.yolov8 import YoloV8, convert

    weights, golden = _golden(FIXTURES / "yolov8" / "detect.safetensors")
    ours = convert.from_ultralytics(weights)
    cfg = convert.infer_config({k: v.shape for k, v in ours.items()})
    model = YoloV8(nn.VarBuilder.from_dict(ours, dtype=dtype, device="cuda"), cfg)
    x = wb.tensor(golden["input"].astype(np.float32), dtype=dtype, device="cuda")
    raw = model.forward_raw(x)
    for key in ("boxes", "scores"):
        assert raw[key].device == wb.Device("cuda")
        got, ref = raw[key].to_dtype(wb.f32).numpy(), golden[key]
        if dtype is wb.f32:
            np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())
        else:  # 20+ layers of f16 rounding: nearly every value close, none far off
            near = np.isclose(got, ref, rtol=3e-2, atol=3e-2 * np.abs(ref).max())
            assert near.mean() > 0.97 and np.abs(got - ref).max() < 0.1 * np.abs(ref).max()


def test_sam_features_and_masks():
    from models.sam.conftest import CFG  # the reduced structure of the goldens

    from workbench.models.sam import Sam, SamPredictor

    weights, golden = _golden(FIXTURES / "sam" / "sam.safetensors")
    model = Sam(nn.VarBuilder.from_dict(weights, device="cuda"), CFG)
    predictor = SamPredictor(model)
    predictor.set_image(golden["image.0"].astype(np.uint8))
    ref = golden["features.0"]
    np.testing.assert_allclose(predictor.features.numpy(), ref, rtol=1e-3,
                               atol=1e-3 * np.abs(ref).max())  # fmt: skip
    case = next(k[: -len(".masks")] for k in golden if k.endswith(".masks"))
    masks, iou, _ = predictor.predict(
        point_coords=golden.get(f"{case}.points"), point_labels=golden.get(f"{case}.labels"),
        box=golden.get(f"{case}.box"), mask_input=golden.get(f"{case}.mask_input"),
        multimask_output=golden[f"{case}.iou"].shape[0] == 3, return_logits=True,
    )  # fmt: skip
    np.testing.assert_allclose(np.asarray(iou), golden[f"{case}.iou"], rtol=1e-3, atol=1e-3)
    ref = golden[f"{case}.masks"]
    np.testing.assert_allclose(np.asarray(masks), ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())


@pytest.mark.parametrize("dtype", [wb.f32, wb.f16])
def test_sdxl_tiny_pipeline(dtype):
    """The tiny SDXL pipeline on the GPU against diffusers' final latents (f16: UNet and text
    encoders in f16, the VAE upcast as ``force_upcast`` asks)."""
    import json

    from models.sdxl.test_pipeline import CASES, _run_case
    from safetensors import safe_open

    from workbench.models.stable_diffusion import StableDiffusionXL

    with safe_open(str(FIXTURES / "sdxl" / "pipeline.safetensors"), "np") as f:
        cases = json.loads(f.metadata()["cases"])
        arrays = {k: f.get_tensor(k) for k in f.keys()}
    pipe = StableDiffusionXL.from_pretrained(FIXTURES / "sdxl" / "tiny", dtype=dtype, device="cuda")
    tol = 1e-3 if dtype is wb.f32 else 3e-2
    for name in CASES:
        ref = arrays[f"{name}.latents"]
        got = _run_case(pipe, cases, arrays, name).latents
        assert np.abs(got - ref).max() <= tol * np.abs(ref).max(), name
