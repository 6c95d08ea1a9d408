"""Kernel sources compiled at first use with nvcc and cached on disk.

``ptx_path("elementwise", "sm_90")`` returns ``<cache>/sm_90/<sha256>.ptx``, compiling
``kernels/cuda/elementwise.cu`` only when that file is missing. The key hashes the source, the
shared header ``common.cuh``, the nvcc flags and the architecture, so editing a kernel (or
changing the GPU) compiles again and old entries are simply never read. The cache lives in
``$WORKBENCH_CACHE/cuda`` or ``~/.cache/workbench/cuda``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent.parent.parent / "kernels" / "cuda"
HEADERS = ("common.cuh",)
FLAGS = ("--ptx", "-O3", "-std=c++17", "-diag-suppress", "186")


def kernel_dir() -> Path:
    """``kernels/cuda``: beside ``backends`` in the repository and in the installed wheel."""
    if KERNEL_DIR.is_dir():
        return KERNEL_DIR
    import importlib.resources

    return Path(str(importlib.resources.files("workbench.kernels") / "cuda"))


def cache_root() -> Path:
    root = os.environ.get("WORKBENCH_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "workbench"
    return base / "cuda"


def find_nvcc() -> str | None:
    """nvcc from ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin`` or ``PATH``."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    if Path("/usr/local/cuda/bin/nvcc").is_file():
        return "/usr/local/cuda/bin/nvcc"
    return shutil.which("nvcc")


def arch_of(capability: tuple[int, int]) -> str:
    """``(9, 0)`` -> ``"sm_90"``."""
    major, minor = capability
    return f"sm_{major}{minor}"


def cache_key(name: str, arch: str, directory: Path | None = None) -> str:
    directory = directory or kernel_dir()
    digest = hashlib.sha256()
    for part in (f"{name}.cu", *HEADERS):
        path = directory / part
        digest.update(part.encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
        digest.update(b"\0")
    digest.update(" ".join((*FLAGS, arch)).encode())
    return digest.hexdigest()


class CompileError(RuntimeError):
    """nvcc rejected a kernel source (the message holds its diagnostics)."""


def ptx_path(name: str, arch: str, directory: Path | None = None, cache: Path | None = None,
             nvcc: str | None = None) -> Path:  # fmt: skip
    """The cached PTX of ``<directory>/<name>.cu`` for ``arch``, compiled if missing."""
    directory = directory or kernel_dir()
    target = (cache or cache_root()) / arch / f"{cache_key(name, arch, directory)}.ptx"
    if target.is_file():
        return target
    compile_ptx(directory / f"{name}.cu", arch, target, nvcc)
    return target


def compile_ptx(source: Path, arch: str, target: Path, nvcc: str | None = None) -> None:
    """``nvcc --ptx -arch=<arch>`` into ``target`` (written atomically)."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise CompileError(
            f"cannot compile {source.name}: nvcc not found (set CUDA_HOME or install the CUDA "
            "toolkit)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".ptx", dir=target.parent)
    os.close(fd)
    try:
        cmd = [nvcc, *FLAGS, f"-arch={arch}", f"-I{source.parent}", "-o", tmp, str(source)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise CompileError(f"nvcc failed on {source.name} for {arch}:\n{result.stderr}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
