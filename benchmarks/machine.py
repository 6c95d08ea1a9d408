"""What machine a test or benchmark log came from: ``python -m benchmarks.machine``.

One line each for the CPU (model, cores), numpy's SIMD dispatch, torch's CPU capability and
workbench's native kernel variant: tests must pass on AVX2 and AVX-512 machines alike, and a
failure log should say which one it came from. Everything is optional: a missing package is
reported, never raised.
"""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def physical_cores() -> int | None:
    """Distinct (physical id, core id) pairs in /proc/cpuinfo; None where it is not readable."""
    cores, current = set(), {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("physical id", "core id"):
                    current[key] = value.strip()
                elif not line.strip() and current:
                    cores.add((current.get("physical id"), current.get("core id")))
                    current = {}
    except OSError:
        return None
    if current:
        cores.add((current.get("physical id"), current.get("core id")))
    return len(cores) or None


def numpy_simd() -> str:
    try:
        import numpy as np
        from numpy._core._multiarray_umath import (
            __cpu_baseline__,
            __cpu_dispatch__,
            __cpu_features__,
        )
    except ImportError as exc:
        return f"unknown ({exc})"
    running = [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]
    return (
        f"numpy {np.__version__}: baseline {' '.join(__cpu_baseline__) or '-'}, "
        f"dispatched {' '.join(running) or '-'}"
    )


def torch_simd() -> str:
    try:
        import torch
    except ImportError:
        return "torch: not installed"
    return f"torch {torch.__version__}: CPU capability {torch.backends.cpu.get_cpu_capability()}"


def workbench_native() -> str:
    try:
        from workbench.backends.cpu import native
    except ImportError as exc:
        return f"workbench native kernels: unknown ({exc})"
    info = native.info()
    return f"workbench native kernels: {info['variant'] or 'none (numpy path)'}: {info['reason']}"


def describe() -> list[str]:
    """The lines ``python -m benchmarks.machine`` prints."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return [
        f"CPU: {cpu_model()} | {platform.machine()} | {os.cpu_count()} logical CPUs, "
        f"{physical_cores() or '?'} physical cores, {affinity or '?'} usable",
        f"SIMD: {numpy_simd()}",
        f"SIMD: {torch_simd()}",
        workbench_native(),
    ]


if __name__ == "__main__":
    print("\n".join(describe()))
