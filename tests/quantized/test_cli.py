"""``python -m workbench.quantized convert``: safetensors written by the ``safetensors`` package
-> our CLI -> read back with gguf-py's ``GGUFReader``; types and values checked against the
originals within per-type error bounds."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import gguf
import numpy as np
import pytest
from gguf import quants
from safetensors.numpy import save_file

from workbench.quantized import GgmlDType, convert_safetensors
from workbench.quantized.__main__ import main

# rmse / std of the data, for Gaussian data (measured values are roughly half of these).
REL_RMSE = {
    "F32": 0.0, "F16": 1e-3, "BF16": 8e-3, "Q8_0": 0.01, "Q6_K": 0.02, "Q5_1": 0.04,
    "Q5_0": 0.05, "Q5_K": 0.04, "Q4_K": 0.08, "Q4_0": 0.11, "IQ4_NL": 0.1, "IQ4_XS": 0.1,
    "Q3_K": 0.16, "Q2_K": 0.4,
}  # fmt: skip


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.fixture
def model_file(tmp_path):
    tensors = {
        "blk.0.attn.weight": rand(64, 512),
        "blk.0.attn.bias": rand(64, seed=1),  # 1-D: F32
        "blk.0.norm.weight": rand(512, seed=2),  # 1-D: F32
        "blk.0.ffn.weight": rand(16, 96, seed=3),  # 96 columns: a 32-block fallback for K types
        "odd.weight": rand(4, 50, seed=4),  # 50 columns: F16
        "half.weight": rand(8, 256, seed=5, dtype=np.float16),
        "cube.weight": rand(2, 3, 256, seed=6),
        "head.weight": rand(10, 512, seed=7),  # matched by --skip-pattern below
        "steps": np.array(7, np.int64),  # not a float: not written
    }
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))
    return str(path), tensors


def expected_type(name: str, shape, target: str) -> str:
    fallback = {"Q2_K": "IQ4_NL", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
    if len(shape) == 1:
        return "F32"
    if name == "head.weight":
        return "F32"
    if name == "half.weight" and target in ("F16",):
        return "F16"
    block = GgmlDType[target].block_size
    if shape[-1] % block == 0:
        return target
    if shape[-1] % 32 == 0:
        return fallback.get(target, "Q8_0")
    return "F16"


@pytest.mark.parametrize(
    "target", ["Q8_0", "Q4_0", "Q5_1", "Q2_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "F16"]
)
def test_convert_round_trip_through_gguf_py(model_file, tmp_path, capsys, target):
    src, tensors = model_file
    dst = str(tmp_path / "out.gguf")
    assert main(["convert", src, dst, "--type", target.lower(), "--skip-pattern", "^head"]) == 0
    report = capsys.readouterr().out

    reader = gguf.GGUFReader(dst)
    found = {t.name: t for t in reader.tensors}
    assert "steps" not in found and re.search(
        r"steps\s+\[\]\s+-\s+0\s+0\s+i64: not written", report
    )
    assert set(found) == set(tensors) - {"steps"}
    for name, rt in found.items():
        x = tensors[name].astype(np.float32)
        assert [int(d) for d in rt.shape] == list(reversed(x.shape)), name  # ggml order
        want = expected_type(name, x.shape, target)
        assert rt.tensor_type.name == want, (name, rt.tensor_type.name, want)
        values = quants.dequantize(rt.data, rt.tensor_type).reshape(x.shape)
        rmse = float(np.sqrt(np.mean((values - x) ** 2)))
        assert rmse <= REL_RMSE[want] * x.std() + 1e-7, (name, want, rmse)
        assert rt.n_bytes == GgmlDType[want].row_bytes(x.shape[-1]) * (x.size // x.shape[-1])
        # The report's line for this tensor: name, shape, type, bytes, rmse.
        line = next(ln for ln in report.splitlines() if ln.split()[0] == name)
        cells = re.split(r"\s{2,}", line.strip())
        assert cells[1] == str(list(x.shape)) and cells[2] == want and str(rt.n_bytes) in cells
        assert float(cells[cells.index(str(rt.n_bytes)) + 1]) == pytest.approx(
            rmse, rel=1e-2, abs=1e-9
        )
    assert reader.fields["general.quantization_version"].parts[-1][0] == 2
    assert f"wrote {dst} ({target})" in report


def test_convert_api_rows(model_file, tmp_path):
    src, _ = model_file
    rows = {r.name: r for r in convert_safetensors(src, tmp_path / "o.gguf", "Q4_K", skip=["ffn"])}
    assert rows["blk.0.attn.weight"].ggml_dtype is GgmlDType.Q4_K
    assert rows["blk.0.ffn.weight"].ggml_dtype is GgmlDType.F32
    assert rows["blk.0.ffn.weight"].note == "skip pattern" and rows["blk.0.ffn.weight"].rmse == 0
    assert rows["half.weight"].ggml_dtype is GgmlDType.Q4_K
    assert (
        rows["odd.weight"].ggml_dtype is GgmlDType.F16
        and "not a multiple of 32" in rows["odd.weight"].note
    )
    assert rows["steps"].ggml_dtype is None


def test_python_dash_m_entry_point(model_file, tmp_path):
    src, _ = model_file
    dst = str(tmp_path / "m.gguf")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, "-m", "workbench.quantized", "convert", src, dst, "--type", "Q8_0", "-q"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "8 tensors" in done.stdout and "of tensor data" in done.stdout
    assert {t.name for t in gguf.GGUFReader(dst).tensors} >= {"blk.0.attn.weight", "cube.weight"}


def test_info_lists_tensors_in_row_major_order(model_file, tmp_path, capsys):
    src, _ = model_file
    dst = str(tmp_path / "i.gguf")
    assert main(["convert", src, dst, "--type", "Q4_0", "-q"]) == 0
    capsys.readouterr()
    assert main(["info", dst, "--metadata"]) == 0
    out = capsys.readouterr().out
    assert "8 tensors" in out and "general.quantization_version = 2" in out
    assert re.search(r"cube\.weight\s+\[2, 3, 256\]\s+Q4_0\s+864\b", out)
    assert main(["info", str(tmp_path / "none.gguf")]) == 1
    assert "error:" in capsys.readouterr().err


def test_bad_type_and_usage(model_file, tmp_path, capsys):
    src, _ = model_file
    assert main(["convert", src, str(tmp_path / "x.gguf"), "--type", "Q9_9"]) == 2
    assert "unknown ggml type 'Q9_9'" in capsys.readouterr().err
    assert not (tmp_path / "x.gguf").exists()
    assert main(["convert", str(tmp_path / "nope.safetensors"), str(tmp_path / "y.gguf")]) == 1
    assert "error:" in capsys.readouterr().err
    assert main(["convert", src, str(tmp_path / "y.gguf"), "--skip-pattern", "("]) == 1
    assert "error:" in capsys.readouterr().err and not (tmp_path / "y.gguf").exists()
    with pytest.raises(SystemExit):
        main([])
