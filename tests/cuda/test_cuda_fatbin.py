"""Prebuilt fatbins: which devices a fatbin serves, building one with nvcc (a tiny kernel),
stale fatbins refused, and the runtime loading the fatbin (no nvcc) before compiling PTX."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from workbench.backends.cuda import compile as cuda_compile
from workbench.backends.cuda.storage import CudaStorage
from workbench.backends.layout import Layout

NVCC = cuda_compile.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (no CUDA toolkit here)")

KERNEL = """#include "common.cuh"
extern "C" __global__ void scale_f32(float* out, const float* a, long long n, Layout la) {
    WB_LOOP(i, n) { out[i] = 2.0f * a[wb_offset(la, i)]; }
}
"""


@pytest.mark.parametrize(
    ("targets", "capability", "runs"),
    [
        (("sm_80",), (8, 0), True),
        (("sm_80",), (8, 6), True),  # a cubin runs on later minors of its major
        (("sm_86",), (8, 0), False),
        (("sm_90",), (8, 9), False),
        (("sm_90",), (10, 0), False),
        (("sm_75", "compute_120"), (12, 1), True),  # the driver JITs the PTX
        (("sm_75", "compute_120"), (11, 0), False),
        (cuda_compile.ARCHS + (cuda_compile.PTX_ARCH,), (7, 0), False),  # Volta: compile
        (cuda_compile.ARCHS + (cuda_compile.PTX_ARCH,), (8, 7), True),
        (cuda_compile.ARCHS + (cuda_compile.PTX_ARCH,), (10, 3), True),
    ],
)
def test_runs_on(targets, capability, runs):
    assert cuda_compile.runs_on(targets, capability) is runs


def test_parse_targets():
    assert cuda_compile.parse_targets("compute_90, sm_80,sm_90") == ("sm_80", "sm_90", "compute_90")
    for bad in ("sm_9x", "compute_80,compute_90", "gfx90a"):
        with pytest.raises(ValueError, match="CUDA targets"):
            cuda_compile.parse_targets(bad)


def test_default_targets_are_what_nvcc_13_builds():
    assert "sm_70" not in cuda_compile.ARCHS  # dropped by nvcc 13 (no Volta target)
    assert cuda_compile.PTX_ARCH == "compute_" + cuda_compile.ARCHS[-1][3:]


@pytest.fixture
def kernel_dir(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(cuda_compile.kernel_dir() / "common.cuh", src / "common.cuh")
    shutil.copytree(cuda_compile.kernel_dir().parent / "gpu", tmp_path / "gpu")
    (src / "tiny.cu").write_text(KERNEL)
    return src


@needs_nvcc
def test_build_load_and_refuse_stale(kernel_dir, tmp_path):
    out = kernel_dir / cuda_compile.FATBIN_DIR
    manifest = cuda_compile.build_fatbins(out, ("sm_80", "compute_90"), kernel_dir,
                                          tmp_path / "cache", jobs=2)  # fmt: skip
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["targets"] == ["sm_80", "compute_90"]
    image = (out / "tiny.fatbin").read_bytes()
    assert image[:4] == bytes.fromhex("50ed55ba")  # the fatbin magic, little-endian
    cuda_compile._MANIFESTS.clear()
    assert cuda_compile.fatbin_image("tiny", (8, 6), kernel_dir) == image  # the sm_80 cubin
    assert cuda_compile.fatbin_image("tiny", (9, 0), kernel_dir) == image  # the PTX
    assert cuda_compile.fatbin_image("tiny", (7, 5), kernel_dir) is None  # compile instead
    assert cuda_compile.fatbin_image("other", (9, 0), kernel_dir) is None
    (kernel_dir / "tiny.cu").write_text(KERNEL.replace("2.0f", "3.0f"))
    assert cuda_compile.fatbin_image("tiny", (9, 0), kernel_dir) is None  # stale: never served
    cuda_compile._MANIFESTS.clear()


@needs_nvcc
def test_build_error_names_the_source(kernel_dir, tmp_path):
    (kernel_dir / "bad.cu").write_text('extern "C" __global__ void f() { undefined_thing(); }\n')
    with pytest.raises(cuda_compile.CompileError, match="bad.cu"):
        cuda_compile.build_fatbin("bad", ("sm_80",), tmp_path / "bad.fatbin", kernel_dir,
                                  tmp_path / "cache")  # fmt: skip


def _run_an_op():
    x = CudaStorage.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    x.unary("exp", Layout.contiguous((2, 3)))


def test_runtime_loads_the_fatbin_without_nvcc(fake, monkeypatch):
    images = {}

    def image(name, capability, *args):
        assert capability == (9, 0)
        return images.setdefault(name, f"fatbin of {name}".encode())

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled although a fatbin serves this GPU")

    monkeypatch.setattr(cuda_compile, "fatbin_image", image)
    monkeypatch.setattr(cuda_compile, "ptx_path", no_compile)
    monkeypatch.setattr(cuda_compile, "find_nvcc", lambda: None)
    _run_an_op()
    assert fake.loaded == [("fatbin", b"fatbin of elementwise")]
    assert fake.launches[-1][0] == "unary_exp_f32"


def test_runtime_compiles_when_no_fatbin_serves(fake):
    _run_an_op()  # the fixture's fatbin_image finds none and ptx_path names the PTX
    assert fake.loaded == [("ptx", "sm_90/elementwise")]
