"""Builds the native CPU kernels (kernels/cpu/) into extension modules of workbench.backends.cpu.

Every ``.c`` file under ``kernels/cpu/core`` and ``kernels/cpu/quant`` is compiled once per ISA
variant into ``workbench.backends.cpu._native_<variant>``; ``backends/cpu/native.py`` imports the
best variant the CPU runs (cpuid, through the flag-free ``_cpuid`` module). The extensions are
optional: without a compiler the install still succeeds and the numpy path runs.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
KERNELS = Path("kernels") / "cpu"
PACKAGE = "workbench.backends.cpu"

# variant -> compiler flags. The loader's requirements for each live in backends/cpu/native.py.
X86_VARIANTS = {
    "base": ["-msse4.2", "-mpopcnt"],
    "avx2": ["-mavx2", "-mfma", "-mf16c", "-mbmi2"],
    "avx512": ["-mavx2", "-mfma", "-mf16c", "-mbmi2", "-mavx512f", "-mavx512bw", "-mavx512vl",
               "-mavx512dq", "-mavx512vnni"],
}  # fmt: skip
ARM_VARIANTS = {"base": [], "dotprod": ["-march=armv8.2-a+dotprod+fp16"]}


def _variants() -> dict[str, list[str]]:
    """The variants for this machine; ``WORKBENCH_NATIVE_VARIANTS=avx2,base`` builds only those
    (faster development builds, sanitizer builds)."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        variants = X86_VARIANTS
    elif machine in ("aarch64", "arm64"):
        variants = ARM_VARIANTS
    else:
        variants = {"base": []}
    wanted = os.environ.get("WORKBENCH_NATIVE_VARIANTS")
    if wanted:
        variants = {k: v for k, v in variants.items() if k in wanted.split(",")}
    return variants


def _sources() -> list[str]:
    found = sorted(KERNELS.glob("core/*.c")) + sorted(KERNELS.glob("quant/*.c"))
    return [str(KERNELS / "module.c")] + [str(p) for p in found]


def _sanitize_flags() -> list[str]:
    """``WORKBENCH_SANITIZE=1`` (make test-asan) builds with AddressSanitizer and UBSan."""
    if os.environ.get("WORKBENCH_SANITIZE") == "1":
        return [
            "-fsanitize=address,undefined",
            "-fno-omit-frame-pointer",
            "-fno-sanitize-recover=all",
        ]
    return []


def _extensions() -> list[Extension]:
    # No errno and no FP traps (nothing reads them): lets gcc vectorise sqrt, rounding and the
    # selects of the branch-free math in kernels/cpu/core/vmath.h.
    common = [
        "-O3",
        "-std=c11",
        "-fno-strict-aliasing",
        "-fno-math-errno",
        "-fno-trapping-math",
        "-Wall",
        "-Wno-unused-function",
        # 64-byte vectors pass between the static functions of one file (reduce.c's lanes);
        # gcc's note that their ABI differs without AVX-512 concerns no caller
        "-Wno-psabi",
    ]
    common += _sanitize_flags()
    include = [str(KERNELS)]
    exts = [Extension(f"{PACKAGE}._cpuid", [str(KERNELS / "cpuid.c")], optional=True,
                      extra_compile_args=["-O2"])]  # fmt: skip
    for variant, flags in _variants().items():
        exts.append(
            Extension(
                f"{PACKAGE}._native_{variant}",
                _sources(),
                include_dirs=include,
                define_macros=[("WB_VARIANT", variant)],
                extra_compile_args=common + flags,
                extra_link_args=_sanitize_flags(),
                depends=[str(p) for p in KERNELS.rglob("*.h")],
                optional=True,
            )
        )
    return exts


class BuildNative(build_ext):
    """One object folder per extension (the variants compile the same sources with other
    flags), and OpenMP where the compiler has it (``#ifdef _OPENMP`` guards the code)."""

    def build_extension(self, ext: Extension) -> None:
        if "_native_" in ext.name and self._has_openmp():
            ext.extra_compile_args = [*ext.extra_compile_args, "-fopenmp"]
            ext.extra_link_args = [*ext.extra_link_args, "-fopenmp"]
        base_temp = self.build_temp
        self.build_temp = os.path.join(base_temp, ext.name)
        try:
            super().build_extension(ext)
        finally:
            self.build_temp = base_temp

    def _has_openmp(self) -> bool:
        if not hasattr(self, "_openmp"):
            with tempfile.TemporaryDirectory() as tmp:
                src = Path(tmp) / "omp.c"
                src.write_text(
                    "#include <omp.h>\nint main(void){return omp_get_max_threads()<1;}\n"
                )
                try:
                    objs = self.compiler.compile(
                        [str(src)], output_dir=tmp, extra_postargs=["-fopenmp"]
                    )
                    self.compiler.link_executable(
                        objs, str(Path(tmp) / "omp"), extra_postargs=["-fopenmp"]
                    )
                    self._openmp = True
                except Exception:  # noqa: BLE001 - any compiler failure means "no OpenMP"
                    self._openmp = False
        return self._openmp


def _cuda_compile_module():
    """backends/cuda/compile.py, loaded by path (standard library only: nothing is installed)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_wb_cuda_compile", ROOT / "backends" / "cuda" / "compile.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _local_gpu_arch() -> str | None:
    """``sm_XY`` of this machine's first NVIDIA GPU (nvidia-smi), or None."""
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = done.stdout.strip().splitlines()[:1]
    return "sm_" + first[0].strip().replace(".", "") if done.returncode == 0 and first else None


class BuildPyWithFatbins(build_py):
    """Also compiles the CUDA kernels into fatbins (kernels/cuda/fatbin/, package data) where nvcc
    exists, so the CUDA backend needs only the NVIDIA driver at run time.

    Targets: ``WORKBENCH_CUDA_ARCHS`` (e.g. ``sm_90`` or ``sm_80,sm_90,compute_90``), else every
    arch of ``compile.ARCHS`` plus PTX for the newest in a wheel, and only this machine's GPU in an
    editable install (none there: skipped, the kernels compile at first use; ``WORKBENCH_FATBIN=1``
    builds all). ``WORKBENCH_FATBIN=0`` skips. Compiled PTX and fatbins are cached in
    ``$WORKBENCH_CACHE/cuda`` (``~/.cache/workbench/cuda``): unchanged kernels build at once.
    """

    def run(self) -> None:
        super().run()
        import time

        compile_mod = _cuda_compile_module()
        nvcc = compile_mod.find_nvcc()
        editable = bool(getattr(self, "editable_mode", False))
        flag = os.environ.get("WORKBENCH_FATBIN")
        spec = os.environ.get("WORKBENCH_CUDA_ARCHS")
        if flag == "0" or nvcc is None:
            self.announce(
                "CUDA fatbins skipped ("
                + ("WORKBENCH_FATBIN=0" if nvcc else "no nvcc")
                + "): the CUDA backend compiles its kernels at first use",
                level=2,
            )
            return
        if spec:
            targets = compile_mod.parse_targets(spec)
        elif editable and flag != "1":
            arch = _local_gpu_arch()
            if arch is None:
                self.announce(
                    "CUDA fatbins skipped in this editable install (no GPU here; "
                    "WORKBENCH_FATBIN=1 builds them)",
                    level=2,
                )
                return
            targets = (arch,)
        else:
            targets = compile_mod.ARCHS + (compile_mod.PTX_ARCH,)
        base = ROOT if editable else Path(self.build_lib) / "workbench"
        out = base / "kernels" / "cuda" / compile_mod.FATBIN_DIR
        start = time.perf_counter()
        compile_mod.build_fatbins(out, targets, ROOT / "kernels" / "cuda", nvcc=nvcc)
        self.announce(
            f"CUDA fatbins for {', '.join(targets)} in {time.perf_counter() - start:.0f} s "
            f"-> {out}",
            level=2,
        )


if sys.platform == "emscripten":  # Pyodide: the numpy path only
    setup()
else:
    setup(
        ext_modules=_extensions(),
        cmdclass={"build_ext": BuildNative, "build_py": BuildPyWithFatbins},
    )
