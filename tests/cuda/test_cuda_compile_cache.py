"""The on-disk PTX cache: keyed by source, header, flags and arch; reused; recompiled after an
edit. Compiles for real with nvcc (tiny kernels)."""

from __future__ import annotations

import shutil

import pytest

from workbench.backends.cuda import compile as cuda_compile

NVCC = cuda_compile.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (no CUDA toolkit here)")

KERNEL = """#include "common.cuh"
extern "C" __global__ void scale_f32(float* out, const float* a, long long n, Layout la) {
    WB_LOOP(i, n) { out[i] = 2.0f * a[wb_offset(la, i)]; }
}
"""


@pytest.fixture
def kernel_dir(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(cuda_compile.kernel_dir() / "common.cuh", src / "common.cuh")
    shutil.copytree(cuda_compile.kernel_dir().parent / "gpu", tmp_path / "gpu")
    (src / "tiny.cu").write_text(KERNEL)
    return src


def test_key_depends_on_source_header_and_arch(kernel_dir):
    k80 = cuda_compile.cache_key("tiny", "sm_80", kernel_dir)
    k90 = cuda_compile.cache_key("tiny", "sm_90", kernel_dir)
    assert k80 != k90 and len(k80) == 64
    assert cuda_compile.cache_key("tiny", "sm_80", kernel_dir) == k80  # deterministic
    (kernel_dir / "common.cuh").write_text((kernel_dir / "common.cuh").read_text() + "\n// x\n")
    assert cuda_compile.cache_key("tiny", "sm_80", kernel_dir) != k80
    edited = cuda_compile.cache_key("tiny", "sm_80", kernel_dir)
    prelude = kernel_dir.parent / "gpu" / "prelude_cuda.h"  # a portable-dialect header
    prelude.write_text(prelude.read_text() + "\n// x\n")
    assert cuda_compile.cache_key("tiny", "sm_80", kernel_dir) != edited


def test_arch_of():
    assert cuda_compile.arch_of((9, 0)) == "sm_90"
    assert cuda_compile.arch_of((8, 6)) == "sm_86"


def test_cache_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    assert cuda_compile.cache_root() == tmp_path / "cuda"
    monkeypatch.delenv("WORKBENCH_CACHE")
    assert cuda_compile.cache_root().parts[-3:] == (".cache", "workbench", "cuda")


@needs_nvcc
def test_compile_reuse_and_invalidate(kernel_dir, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    path = cuda_compile.ptx_path("tiny", "sm_80", kernel_dir, cache)
    key = cuda_compile.cache_key("tiny", "sm_80", kernel_dir)
    assert path == cache / "sm_80" / f"{key}.ptx"
    assert ".entry scale_f32" in path.read_text()

    def refuse(*args, **kwargs):
        raise AssertionError("compiled again although the cache holds this source")

    with monkeypatch.context() as m:
        m.setattr(cuda_compile, "compile_ptx", refuse)
        assert cuda_compile.ptx_path("tiny", "sm_80", kernel_dir, cache) == path

    (kernel_dir / "tiny.cu").write_text(KERNEL.replace("2.0f", "3.0f"))
    edited = cuda_compile.ptx_path("tiny", "sm_80", kernel_dir, cache)
    assert edited != path and edited.is_file() and path.is_file()
    assert "0f40400000" in edited.read_text()  # 3.0f in the new PTX
    other = cuda_compile.ptx_path("tiny", "sm_90", kernel_dir, cache)
    assert other.parent.name == "sm_90" and ".target sm_90" in other.read_text()
    assert not list(cache.rglob("*.tmp*")) and not list(cache.rglob("tmp*"))


@needs_nvcc
def test_compile_error_has_diagnostics(kernel_dir, tmp_path):
    (kernel_dir / "bad.cu").write_text('extern "C" __global__ void f() { undefined_thing(); }\n')
    with pytest.raises(cuda_compile.CompileError, match=r"nvcc failed on bad.cu for sm_80"):
        cuda_compile.ptx_path("bad", "sm_80", kernel_dir, tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("*.ptx"))


def test_missing_nvcc_is_a_clear_error(kernel_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_compile, "find_nvcc", lambda: None)
    with pytest.raises(cuda_compile.CompileError, match="nvcc not found"):
        cuda_compile.ptx_path("tiny", "sm_80", kernel_dir, tmp_path / "cache")
