"""Kernel sources to device code with nvcc: a fatbin per source ahead of time, PTX at first use.

Ahead of time (``setup.py``'s ``build_py``, where nvcc exists): ``build_fatbins`` compiles each
``kernels/cuda/<name>.cu`` into ``kernels/cuda/fatbin/<name>.fatbin`` holding cubins for
``ARCHS`` and PTX for the newest (``PTX_ARCH``), and writes ``manifest.json`` with the targets
and each source's key. At run time ``fatbin_image(name, capability)`` returns that fatbin when
its key matches the sources beside it (an edited kernel is never served stale) and it holds
code the device runs; the driver loads it with no nvcc. Otherwise the runtime falls back to
``ptx_path``, which compiles at first use.

``ptx_path("elementwise", "sm_90")`` returns ``<cache>/sm_90/<sha256>.ptx``, compiling only
when that file is missing. The key hashes the source, the shared headers, the nvcc flags and
the architecture, so editing a kernel (or changing the GPU) compiles again and old entries are
never read. The cache lives in ``$WORKBENCH_CACHE/cuda`` or ``~/.cache/workbench/cuda``.

This module uses the standard library only: ``setup.py`` loads it by path before anything is
installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent.parent.parent / "kernels" / "cuda"
FLAGS = ("--ptx", "-O3", "-std=c++17", "-diag-suppress", "186")
# The list (Volta to Blackwell) less sm_70, which nvcc 13 no longer targets. A cubin
# runs on its major version's later minors (sm_80 on sm_86/87/89); the PTX is JIT-compiled by
# the driver for any newer GPU.
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
PTX_ARCH = "compute_120"
FATBIN_DIR = "fatbin"
MANIFEST = "manifest.json"


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


def headers(directory: Path | None = None) -> list[str]:
    """The headers a source may include, relative to its folder: ``*.cuh`` beside it and the
    portable dialect's ``../gpu/*.h`` (kernel bodies, preludes, the op table's lists)."""
    directory = directory or kernel_dir()
    found = sorted(p.name for p in directory.glob("*.cuh"))
    return found + sorted(f"../gpu/{p.name}" for p in (directory.parent / "gpu").glob("*.h"))


def cache_key(name: str, arch: str, directory: Path | None = None) -> str:
    directory = directory or kernel_dir()
    digest = hashlib.sha256()
    for part in (f"{name}.cu", *headers(directory)):
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


# -- ahead of time: fatbins ---------------------------------------------------------------------
def sources(directory: Path | None = None) -> list[str]:
    """The kernel sources' names (``kernels/cuda/*.cu`` stems), largest first (the slowest to
    compile starts first when building in parallel)."""
    directory = directory or kernel_dir()
    found = sorted(directory.glob("*.cu"), key=lambda p: (-p.stat().st_size, p.name))
    return [p.stem for p in found]


def source_key(name: str, directory: Path | None = None) -> str:
    """Hash of a source, its headers and the flags (the architecture left out)."""
    return cache_key(name, "", directory)


def parse_targets(spec: str) -> tuple[str, ...]:
    """``"sm_80,sm_90,compute_90"`` -> the cubin archs then the PTX arch (at most one)."""
    targets = tuple(t.strip() for t in spec.split(",") if t.strip())
    bad = [t for t in targets if not (t.startswith(("sm_", "compute_")) and t[-2:].isdigit())]
    ptx = [t for t in targets if t.startswith("compute_")]
    if bad or len(ptx) > 1:
        raise ValueError(
            f"CUDA targets must be sm_XY cubins and at most one compute_XY PTX, found {spec!r}"
        )
    return tuple(t for t in targets if t.startswith("sm_")) + tuple(ptx)


def _tool(nvcc: str, name: str) -> str:
    """ptxas / fatbinary from nvcc's own bin folder (the same toolkit)."""
    path = Path(nvcc).resolve().parent / name
    return str(path) if path.is_file() else (shutil.which(name) or name)


def _run(cmd: list[str], what: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise CompileError(f"{what} failed:\n{' '.join(cmd)}\n{result.stderr}")


def build_fatbin(name: str, targets: tuple[str, ...], out: Path, directory: Path | None = None,
                 cache: Path | None = None, nvcc: str | None = None) -> Path:  # fmt: skip
    """``out`` = a fatbin of ``<directory>/<name>.cu`` with a cubin per ``sm_XY`` target and PTX
    for a ``compute_XY`` one. Each arch's PTX comes from ``ptx_path`` (the run-time cache, so a
    machine that compiled it once does not again), cubins from ptxas; the fatbin itself is
    cached too, keyed by the source key and the targets."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise CompileError(f"cannot build {name}.fatbin: nvcc not found")
    directory = directory or kernel_dir()
    root = cache or cache_root()
    key = hashlib.sha256(f"{source_key(name, directory)} {','.join(targets)}".encode())
    cached = root / "fatbin" / f"{key.hexdigest()}.fatbin"
    if not cached.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            images = []
            for target in targets:
                arch = "sm_" + target.split("_")[1]
                ptx = ptx_path(name, arch, directory, root, nvcc)
                if target.startswith("compute_"):
                    images.append(f"--image3=kind=ptx,sm={arch[3:]},file={ptx}")
                    continue
                cubin = Path(tmp) / f"{name}.{arch}.cubin"
                _run([_tool(nvcc, "ptxas"), "-O3", f"-arch={arch}", "-m64", str(ptx), "-o",
                      str(cubin)], f"ptxas on {name}.cu for {arch}")  # fmt: skip
                images.append(f"--image3=kind=elf,sm={arch[3:]},file={cubin}")
            part = Path(tmp) / "out.fatbin"
            _run([_tool(nvcc, "fatbinary"), f"--create={part}", "-64", *images],
                 f"fatbinary for {name}.cu")  # fmt: skip
            cached.parent.mkdir(parents=True, exist_ok=True)
            staged = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
            shutil.copyfile(part, staged)
            os.replace(staged, cached)  # atomic: a parallel build never reads half a file
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, out)
    return out


def build_fatbins(out_dir: Path, targets: tuple[str, ...], directory: Path | None = None,
                  cache: Path | None = None, nvcc: str | None = None,
                  jobs: int | None = None, log=None) -> dict:  # fmt: skip
    """Every source's fatbin into ``out_dir`` plus ``manifest.json``; returns the manifest.

    Sources and architectures compile in parallel (``jobs`` processes, default the CPU count):
    the PTX of all archs first, then the cubins."""
    directory = directory or kernel_dir()
    names = sources(directory)
    nvcc = nvcc or find_nvcc()
    jobs = jobs or os.cpu_count() or 1
    root = cache or cache_root()
    archs = sorted({"sm_" + t.split("_")[1] for t in targets})
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # PTX for every (source, arch) first
        list(pool.map(lambda job: ptx_path(*job, directory, root, nvcc),
                      [(n, a) for n in names for a in archs]))  # fmt: skip
        list(pool.map(lambda n: build_fatbin(n, targets, out_dir / f"{n}.fatbin", directory,
                                             root, nvcc), names))  # fmt: skip
    manifest = {
        "targets": list(targets),
        "kernels": {n: source_key(n, directory) for n in names},
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if log is not None:
        log(f"built {len(names)} CUDA fatbins for {', '.join(targets)} into {out_dir}")
    return manifest


# -- run time: which fatbin serves a device ----------------------------------------------------
def runs_on(targets, capability: tuple[int, int]) -> bool:
    """Whether a fatbin of ``targets`` holds code for a device of ``capability``: a cubin of
    the same major version and a minor at most the device's, or PTX of an arch at most the
    device's (the driver JIT-compiles it)."""
    major, minor = capability
    for target in targets:
        kind, digits = target.split("_")
        t_major, t_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and t_major == major and t_minor <= minor:
            return True
        if kind == "compute" and (t_major, t_minor) <= (major, minor):
            return True
    return False


_MANIFESTS: dict[Path, dict | None] = {}


def _manifest(directory: Path) -> dict | None:
    path = directory / FATBIN_DIR / MANIFEST
    if path not in _MANIFESTS:
        try:
            _MANIFESTS[path] = json.loads(path.read_text())
        except (OSError, ValueError):
            _MANIFESTS[path] = None
    return _MANIFESTS[path]


def fatbin_image(name: str, capability: tuple[int, int],
                 directory: Path | None = None) -> bytes | None:  # fmt: skip
    """The prebuilt fatbin of ``name`` when it matches the sources and runs on the device;
    None when the caller must compile (no fatbin, stale, or no code for this GPU)."""
    directory = directory or kernel_dir()
    manifest = _manifest(directory)
    if manifest is None or not runs_on(manifest.get("targets", ()), capability):
        return None
    if manifest.get("kernels", {}).get(name) != source_key(name, directory):
        return None
    try:
        return (directory / FATBIN_DIR / f"{name}.fatbin").read_bytes()
    except OSError:
        return None
