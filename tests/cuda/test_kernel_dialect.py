"""Kernels written once: the portable bodies in kernels/gpu compile for CUDA (the PTX tests)
and generate the Metal sources in kernels/metal. No Metal compiler runs here, so these check
what can be checked: the generated files are current, the C preprocessor expands them to one
Metal twin per CUDA kernel (f64 aside: Metal has no double) whose buffer slots match the CUDA
kernel's parameters one for one (the PTX's, where nvcc exists), and no CUDA word is left."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.backends.cuda import compile as cuda_compile
from workbench.backends.cuda import kernels as cuda_kernels
from workbench.backends.gpu import metal_sources

GPU = metal_sources.KERNELS / "gpu"
CPP = shutil.which("cpp")
# Words of one target's language that a portable body must not use (the preludes define them).
CUDA_WORDS = ("__global__", "__device__", "__restrict__", "__syncthreads", "blockIdx",
              "threadIdx", "blockDim", "gridDim", "long long", "__half", "__nv_bfloat16",
              'extern "C"', "__shared__", "__shfl", "atomicAdd", "atomicCAS", "__launch_bounds__",
              "__forceinline__", "floorf", "INT_MIN", "LLONG_MIN")  # fmt: skip
METAL_WORDS = ("kernel void", "device ", "threadgroup", "[[buffer", "metal::", "simd_",
               "atomic_", "as_type")  # fmt: skip
NVCC = cuda_compile.find_nvcc()


@pytest.mark.parametrize("name", metal_sources.PORTABLE)
def test_metal_sources_are_current(name):
    assert metal_sources.metal_path(name).read_text() == metal_sources.metal_source(name), (
        "stale: run python -m workbench.backends.gpu.metal_sources"
    )


@pytest.mark.parametrize("name", metal_sources.PORTABLE)
def test_cuda_source_is_the_portable_body(name):
    """A .cu file is comments and includes only, its own body last (every kernel, helper and
    type comes from kernels/gpu, so the Metal source holds them all too)."""
    lines = (cuda_compile.kernel_dir() / f"{name}.cu").read_text().splitlines()
    code = [line for line in lines if line.strip() and not line.startswith("//")]
    assert code[0] == '#include "common.cuh"'
    assert all(re.fullmatch(r'#include "\.\./gpu/\w+\.h"', line) for line in code[1:]), code
    assert code[-1] == f'#include "../gpu/{name}.h"'


def test_every_cuda_source_is_portable():
    assert sorted(cuda_compile.sources()) == sorted(metal_sources.PORTABLE)


@pytest.mark.parametrize("part", [*metal_sources.PORTABLE, "common", "block"])
def test_bodies_speak_only_the_dialect(part):
    text = (GPU / f"{part}.h").read_text()
    code = "\n".join(line.split("//")[0] for line in text.splitlines())
    for word in CUDA_WORDS + METAL_WORDS:  # as a word of its own (wb_atomic_add is ours)
        assert not re.search(r"(?<!\w)" + re.escape(word), code), f"{part}.h uses {word!r}"
    for line in code.splitlines():  # double only where f64 exists
        assert "double" not in line or "WB_IF_F64" in line, line


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


def _metal_slots(text: str) -> dict[str, int]:
    """``{kernel: number of buffer slots}`` of a preprocessed Metal source."""
    found = re.findall(r"kernel void (\w+)\(([^{]*)\)\s*\{", text)
    assert len(found) == len({name for name, _ in found}), "a kernel defined twice"
    return {name: len(re.findall(r"\[\[buffer\(\d+\)\]\]", sig)) for name, sig in found}


def _ptx_params(ptx: Path) -> dict[str, int]:
    """``{entry: number of parameters}`` of a PTX file."""
    entries = re.findall(r"\.entry\s+(\w+)\(([^)]*)\)", ptx.read_text())
    return {name: params.count(".param") for name, params in entries}


@pytest.mark.skipif(CPP is None, reason="no C preprocessor here")
@pytest.mark.parametrize("name", metal_sources.PORTABLE)
def test_every_cuda_kernel_has_a_metal_twin(name, tmp_path):
    metal = _metal_slots(_preprocess(name, tmp_path))
    cuda = set(cuda_kernels.all_names()[name])  # the PTX tests check these are the .cu's entries
    assert set(metal) == {k for k in cuda if "f64" not in k}
    assert len(metal) >= 3


@pytest.mark.skipif(CPP is None or NVCC is None, reason="needs a C preprocessor and nvcc")
@pytest.mark.parametrize("name", metal_sources.PORTABLE)
def test_metal_twins_match_the_ptx(name, tmp_path):
    """Every entry point of the compiled .cu (launched or not) has a Metal twin, f64 aside,
    and the twin has one buffer slot per CUDA parameter (sort's shared memory aside: a
    threadgroup argument on Metal)."""
    metal = _metal_slots(_preprocess(name, tmp_path))
    cuda = _ptx_params(cuda_compile.ptx_path(name, "sm_90", nvcc=NVCC))
    assert set(metal) == {k for k in cuda if "f64" not in k}
    wrong = {k: (metal[k], cuda[k]) for k in metal if metal[k] != cuda[k]}
    assert not wrong, f"buffer slots vs CUDA parameters: {wrong}"


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
