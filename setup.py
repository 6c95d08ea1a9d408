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
        return ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
    return []


def _extensions() -> list[Extension]:
    common = ["-O3", "-std=c11", "-fno-strict-aliasing", "-Wall", "-Wno-unused-function"]
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
                src.write_text("#include <omp.h>\nint main(void){return omp_get_max_threads()<1;}\n")
                try:
                    objs = self.compiler.compile([str(src)], output_dir=tmp, extra_postargs=["-fopenmp"])
                    self.compiler.link_executable(objs, str(Path(tmp) / "omp"), extra_postargs=["-fopenmp"])
                    self._openmp = True
                except Exception:  # noqa: BLE001 - any compiler failure means "no OpenMP"
                    self._openmp = False
        return self._openmp


if sys.platform == "emscripten":  # Pyodide: the numpy path only
    setup()
else:
    setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildNative})
