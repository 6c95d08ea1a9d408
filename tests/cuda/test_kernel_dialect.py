"""Kernels written once: the portable bodies in kernels/gpu compile for CUDA (the PTX tests)
and generate the Metal sources in kernels/metal. No Metal compiler runs here, so these check
what can be checked: the generated files are current, the C preprocessor expands them to one
Metal twin per CUDA kernel (f64 aside: Metal has no double), and no CUDA word is left."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from workbench.backends.cuda import compile as cuda_compile
from workbench.backends.cuda import kernels as cuda_kernels
from workbench.backends.gpu import metal_sources

GPU = metal_sources.KERNELS / "gpu"
CPP = shutil.which("cpp")
# Words of one target's language that a portable body must not use (the preludes define them).
CUDA_WORDS = ("__global__", "__device__", "__restrict__", "__syncthreads", "blockIdx",
              "threadIdx", "blockDim", "gridDim", "long long", "__half", "__nv_bfloat16",
              'extern "C"')  # fmt: skip
METAL_WORDS = ("kernel void", "device ", "threadgroup", "[[buffer", "metal::")


@pytest.mark.parametrize("name", metal_sources.PORTABLE)
def test_metal_sources_are_current(name):
    assert metal_sources.metal_path(name).read_text() == metal_sources.metal_source(name), (
        "stale: run python -m workbench.backends.gpu.metal_sources"
    )


@pytest.mark.parametrize("name", metal_sources.PORTABLE)
def test_cuda_source_is_the_portable_body(name):
    cu = (cuda_compile.kernel_dir() / f"{name}.cu").read_text()
    assert f'#include "../gpu/{name}.h"' in cu
    assert "__global__" not in cu  # every kernel comes from the body


@pytest.mark.parametrize("part", [*metal_sources.PORTABLE, "common"])
def test_bodies_speak_only_the_dialect(part):
    text = (GPU / f"{part}.h").read_text()
    code = "\n".join(line.split("//")[0] for line in text.splitlines())
    for word in CUDA_WORDS + METAL_WORDS:
        assert word not in code, f"kernels/gpu/{part}.h uses {word!r}"
    for line in code.splitlines():  # double only where f64 exists
        assert "double" not in line or "WB_IF_F64" in line, line


def test_the_cuda_only_families_are_known():
    """The sources not yet written in the dialect (Metal twins still to come)."""
    cuda_only = sorted(set(cuda_compile.sources()) - set(metal_sources.PORTABLE))
    assert cuda_only == ["conv", "fused", "indexing", "pad", "pool", "quantized", "reduce",
                         "upsample"]  # fmt: skip


def _preprocess(name: str, tmp_path) -> str:
    """The generated Metal source after the C preprocessor (``<metal_stdlib>`` stubbed)."""
    (tmp_path / "metal_stdlib").write_text("")
    done = subprocess.run(
        [CPP, "-E", "-P", "-x", "c++", f"-I{tmp_path}", str(metal_sources.metal_path(name))],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.mark.skipif(CPP is None, reason="no C preprocessor here")
@pytest.mark.parametrize("name", metal_sources.PORTABLE)
def test_every_cuda_kernel_has_a_metal_twin(name, tmp_path):
    text = _preprocess(name, tmp_path)
    metal = re.findall(r"kernel void (\w+)\(", text)
    assert len(metal) == len(set(metal))
    cuda = set(cuda_kernels.all_names()[name])  # the PTX tests check these are the .cu's entries
    assert set(metal) == {k for k in cuda if "f64" not in k}
    assert len(metal) >= 3


@pytest.mark.skipif(CPP is None, reason="no C preprocessor here")
@pytest.mark.parametrize("name", metal_sources.PORTABLE)
def test_generated_metal_is_well_formed(name, tmp_path):
    text = _preprocess(name, tmp_path)
    for a, b in ("{}", "()", "[]"):
        assert text.count(a) == text.count(b), f"unbalanced {a}{b}"
    for word in CUDA_WORDS + ("double", "WB_"):
        assert word not in text, f"{word!r} left in the Metal source"
    signatures = re.findall(r"kernel void \w+\(([^{]*)\)\s*\{", text)
    assert signatures and all(s.endswith("uint wb_gsize [[threads_per_grid]]") for s in signatures)
    for sig in signatures:  # every buffer slot used once, in order
        slots = [int(n) for n in re.findall(r"\[\[buffer\((\d+)\)\]\]", sig)]
        assert slots == list(range(len(slots))), sig
