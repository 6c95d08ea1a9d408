"""The high-level API, the CLI and the gallery entries, on the tiny golden weights."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from workbench import registry
from workbench.io import save_safetensors
from workbench.models import yolov8
from workbench.models.yolov8.__main__ import main


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory, detect_golden):
    """The golden detector's weights, in Ultralytics' names, as a safetensors file."""
    path = tmp_path_factory.mktemp("yolo") / "tiny.safetensors"
    save_safetensors({k: np.ascontiguousarray(v) for k, v in detect_golden[0].items()}, path)
    return path


@pytest.fixture(scope="module")
def pose_file(tmp_path_factory, pose_golden):
    """The golden pose model in our (candle's) names."""
    path = tmp_path_factory.mktemp("yolo") / "tiny-pose.safetensors"
    ours = yolov8.from_ultralytics(pose_golden[0])
    save_safetensors({k: np.ascontiguousarray(v) for k, v in ours.items()}, path)
    return path


def _picture(golden) -> np.ndarray:
    return (golden["input"][0].astype(np.float32).transpose(1, 2, 0) * 255 + 0.5).astype(np.uint8)


def test_detector_on_original_pixels(weights_file, detect_golden):
    detector = yolov8.load(weights_file)
    assert detector.cfg.num_classes == 5 and detector.names == list(yolov8.COCO_NAMES[:5])
    image = _picture(detect_golden[1])  # 64×96: letterboxed to 64×96 at size 96
    det = detector(image, conf=0.25, iou=0.45, size=96)
    assert len(det) > 0
    ref = detect_golden[1]["nms.0"]  # the same picture up to uint8 rounding
    assert abs(len(det) - len(ref)) <= 2
    assert (det.boxes[:, 0::2] >= 0).all() and (det.boxes[:, 0::2] <= 96).all()
    big = np.asarray(Image.fromarray(image).resize((192, 128), Image.NEAREST))
    det2 = detector(big, size=96)  # boxes come back in the big picture's pixels
    assert (det2.boxes[:, 2] <= 192).all() and det2.boxes[:, 2].max() > 96
    with pytest.raises(ValueError, match="mode must be"):
        detector(image, mode="crop")


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        yolov8.load(tmp_path / "missing.safetensors")
    with pytest.raises(ValueError, match="must be one of"):
        yolov8.hub_filename("z")
    assert yolov8.hub_filename("s", pose=True) == "yolov8s-pose.safetensors"


def test_cli_writes_annotated_image(tmp_path, weights_file, detect_golden, capsys):
    src = tmp_path / "pic.png"
    Image.fromarray(_picture(detect_golden[1])).save(src)
    assert main([str(src), "--which", "n", "--weights", str(weights_file), "--size", "96"]) == 0
    out = tmp_path / "pic.yolov8.png"
    assert out.exists()
    printed = capsys.readouterr().out
    assert "detections ->" in printed and "bicycle" in printed  # a class of the 5
    with Image.open(out) as im:
        assert im.size == (96, 64)
    other = tmp_path / "x.png"
    assert (
        main([str(src), "--weights", str(weights_file), "--size", "96", "--output", str(other)])
        == 0
    )
    assert other.exists()


def test_cli_errors(tmp_path, capsys):
    src = tmp_path / "pic.png"
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(src)
    assert main([str(src), "--weights", str(tmp_path / "nope.safetensors")]) == 1
    assert "cannot load YOLOv8 weights" in capsys.readouterr().err
    assert main([str(src), "--size", "100"]) == 2
    with pytest.raises(SystemExit):
        main([str(src), "--which", "q"])


def test_gallery_entries(weights_file, pose_file, detect_golden, tmp_path):
    entries = registry.entries()
    assert {"yolov8n", "yolov8n-pose"} <= set(entries)
    entry = entries["yolov8n"]
    assert entry.weights == "lmz/candle-yolo-v8"
    assert entry.local_path.endswith("yolov8n.safetensors")
    with pytest.raises((registry.WeightsNotFound, OSError)):
        entry.load(str(tmp_path / "missing.safetensors"))
    runner = entry.load(str(weights_file))
    runner.size = 128  # a small input keeps the test quick
    sample = entry.samples["synthetic"]()
    assert sample.shape == (384, 512, 3) and sample.dtype == np.uint8
    result = entry.run(runner, _picture(detect_golden[1]), **entry.options)
    assert isinstance(result, registry.Result) and result.overlays
    index, overlay = result.overlays[0]
    assert index == 0 and overlay.box is not None and overlay.label in yolov8.COCO_NAMES
    pose = entries["yolov8n-pose"]
    pose_runner = pose.load(str(pose_file))
    pose_runner.size = 128
    assert pose_runner.cfg.kpt_shape == (17, 3)
    out = pose.run(pose_runner, sample, **pose.options)
    assert out.images[0].shape == sample.shape and "people" in out.text


def test_imports_stay_light():
    """workbench.models imports nothing; yolov8 needs neither torch, ultralytics, PIL nor the hub
    client until used."""
    import subprocess
    import sys

    code = (
        "import sys, workbench.models as m; assert not [k for k in sys.modules "
        "if k.startswith('workbench.models.')]; import workbench.models.yolov8; "
        "bad = {'torch', 'ultralytics', 'PIL', 'huggingface_hub'} & set(sys.modules); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
