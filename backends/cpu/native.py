"""The compiled CPU kernels (``kernels/cpu/``): the best ISA variant this CPU runs, or none.

``setup.py`` builds ``_native_<variant>`` once per variant from the same C sources; here the
flag-free ``_cpuid`` module reports the CPU's features and the first variant whose requirements
they meet is imported. ``WORKBENCH_NATIVE=0`` selects the numpy path (so does a platform without
the compiled extension); ``WORKBENCH_NATIVE_VARIANT=avx2`` picks a lesser variant;
``WORKBENCH_NATIVE_DIR=folder`` imports the modules from that folder instead (``make test-asan``:
a sanitizer build beside the normal one); ``WORKBENCH_AMX=0`` keeps quantized products off the
AMX tiles. ``NATIVE`` is the module or ``None``; ``info()`` says which and why.

Loading it also sets the C heap to keep large freed blocks mapped for reuse (glibc: blocks
under 32 MiB from the heap, 64 MiB of free top kept; ``kernels/cpu/core/heap.c`` says why);
``WORKBENCH_HEAP=system`` leaves the C library's defaults.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

# Most capable first: variant -> the CPU features it needs.
_X86 = (
    ("avx512", {"avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl", "avx512dq",
                "avx512vnni"}),
    ("avx2", {"avx2", "fma", "f16c", "bmi2"}),
    ("base", {"sse4.2", "popcnt"}),
)  # fmt: skip
_ARM = (("dotprod", {"neon", "dotprod"}), ("base", set()))


def _candidates() -> tuple[tuple[str, set[str]], ...]:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return _X86
    if machine in ("aarch64", "arm64"):
        return _ARM
    return (("base", set()),)


def _import(name: str) -> ModuleType:
    """``workbench.backends.cpu.<name>``, from ``WORKBENCH_NATIVE_DIR`` when that is set."""
    folder = os.environ.get("WORKBENCH_NATIVE_DIR")
    if not folder:
        return importlib.import_module(f"{__package__}.{name}")
    paths = (os.path.join(folder, name + s) for s in importlib.machinery.EXTENSION_SUFFIXES)
    path = next((p for p in paths if os.path.exists(p)), None)
    if path is None:
        raise ImportError(f"no {name} extension in WORKBENCH_NATIVE_DIR={folder}")
    spec = importlib.util.spec_from_file_location(f"{__package__}.{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load() -> tuple[ModuleType | None, str, frozenset[str]]:
    if os.environ.get("WORKBENCH_NATIVE", "1") == "0":
        return None, "disabled by WORKBENCH_NATIVE=0 (numpy path)", frozenset()
    try:
        cpuid = _import("_cpuid")
    except ImportError:
        return None, "the native extension is not built (numpy path)", frozenset()
    features = frozenset(cpuid.features())
    skipped = []
    # WORKBENCH_NATIVE_VARIANT=avx2 caps the choice (to test a lesser ISA's code on this CPU).
    forced = os.environ.get("WORKBENCH_NATIVE_VARIANT")
    for variant, needs in _candidates():
        if forced and variant != forced:
            skipped.append(f"{variant} not chosen (WORKBENCH_NATIVE_VARIANT={forced})")
            continue
        missing = needs - features
        if missing:
            skipped.append(f"{variant} needs {', '.join(sorted(missing))}")
            continue
        try:
            module = _import(f"_native_{variant}")
        except ImportError as exc:
            skipped.append(f"{variant} not importable ({exc})")
            continue
        why = f"the CPU has {', '.join(sorted(needs)) or 'the baseline ISA'}"
        if skipped:
            why += "; " + "; ".join(skipped)
        return module, why, features
    return None, "no variant runs here: " + "; ".join(skipped), features


NATIVE, _REASON, _FEATURES = _load()
if NATIVE is not None and os.environ.get("WORKBENCH_AMX", "1") == "0":
    NATIVE.set_amx(False)  # quantized products of many rows stay on the integer kernels

# Measured on the MNIST CNN's training step (2-core EPYC, batch 64): 22.5 ms with glibc's
# defaults, 13.6 ms keeping the blocks; a trim limit of 64 MiB was as fast as 1 GiB.
_HEAP_MMAP_FROM = 32 << 20
_HEAP_TRIM_ABOVE = 64 << 20


def _set_heap() -> str:
    if os.environ.get("WORKBENCH_HEAP") == "system":
        return "the C library's defaults (WORKBENCH_HEAP=system)"
    if NATIVE is None or not hasattr(NATIVE, "keep_large_blocks"):
        return "the C library's defaults (no native module)"
    if not NATIVE.keep_large_blocks(_HEAP_MMAP_FROM, _HEAP_TRIM_ABOVE):
        return "the C library's defaults (not glibc)"
    return "freed blocks under 32 MiB kept for reuse, up to 64 MiB of free top (glibc)"


_HEAP = _set_heap()


def info() -> dict:
    """Which native variant runs and why: ``{"variant", "reason", "cpu_features", ...}``;
    ``amx`` is "on" where quantized products of many rows use AMX tiles, else why not;
    ``heap`` is the C heap's policy for large blocks."""
    out = {
        "variant": NATIVE.variant() if NATIVE is not None else None,
        "reason": _REASON,
        "cpu_features": sorted(_FEATURES),
    }
    if NATIVE is not None:
        out["compiled_with"] = NATIVE.compiled_with()
        out["amx"] = NATIVE.amx_status()
    out["heap"] = _HEAP
    return out


@contextmanager
def integer_kernels(module: ModuleType | None = None) -> Iterator[None]:
    """Inside the block, quantized products of ``module`` (default: ``NATIVE``) stay on the
    integer kernels, AMX off: their results do not depend on how many rows one call takes.
    A no-op without a native module."""
    module = module or NATIVE
    if module is None:
        yield
        return
    allowed = module.set_amx(False)
    try:
        yield
    finally:
        module.set_amx(allowed)


def codes(kind: str) -> dict[str, int]:
    """Op name -> code for the native ``kind`` kernels ("unary", "binary", "cmp"): the names
    the C tables export, so the backend dispatches by the op table's names. Empty on the numpy
    path, so every lookup misses and numpy runs."""
    if NATIVE is None:
        return {}
    return {name: i for i, name in enumerate(getattr(NATIVE, f"{kind}_ops")())}
