"""Every kernels/cuda/*.cu compiles with nvcc --ptx for sm_80 and sm_90, and every kernel name
the storage can launch is an entry point of the PTX (no GPU needed, only nvcc)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from workbench.backends.cuda import compile as cuda_compile
from workbench.backends.cuda import kernels as cuda_kernels

SOURCES = sorted(p.stem for p in cuda_compile.kernel_dir().glob("*.cu"))
ARCHS = ("sm_80", "sm_90")
NVCC = cuda_compile.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (no CUDA toolkit here)")


@pytest.fixture(scope="module")
def compiled(request):
    """``{(source, arch): ptx path or CompileError}``, compiled in parallel into pytest's cache
    (or, without pytest's cache provider, the backend's own ``$WORKBENCH_CACHE``), keyed by
    source hash and arch, so unchanged sources are not compiled again."""
    provider = getattr(request.config, "cache", None)
    cache = provider.mkdir("workbench-cuda-ptx") if provider is not None else None

    def build(job):
        name, arch = job
        try:
            return job, cuda_compile.ptx_path(name, arch, cache=cache, nvcc=NVCC)
        except cuda_compile.CompileError as err:
            return job, err

    jobs = [(name, arch) for name in SOURCES for arch in ARCHS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(build, jobs))


def test_sources_exist():
    for name in ("elementwise", "reduce"):
        assert name in SOURCES


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", SOURCES)
def test_kernel_compiles(compiled, name, arch):
    result = compiled[(name, arch)]
    if isinstance(result, Exception):
        pytest.fail(str(result))
    assert f".target {arch}" in result.read_text()


@needs_nvcc
@pytest.mark.parametrize("name", sorted(cuda_kernels.all_names()))
def test_every_launched_kernel_exists(compiled, name):
    result = compiled[(name, "sm_90")]
    if isinstance(result, Exception):
        pytest.fail(str(result))
    entries = set(re.findall(r"\.entry\s+(\w+)\(", result.read_text()))
    missing = [k for k in cuda_kernels.all_names()[name] if k not in entries]
    assert not missing, f"{len(missing)} kernels missing from {name}.cu: {missing[:10]}"
