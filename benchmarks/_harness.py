"""Timing harness: workloads, interleaved repetitions, medians, ratios, the table and JSON.

A workload builds one zero-argument callable per implementation ("workbench", "numpy",
"torch") over data prepared once. Every repetition times each implementation in turn
(round-robin, the starting implementation rotating), so that slow drifts of the machine
(thermal, other processes) hit all of them alike; the median of the repetitions is reported.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import machine

IMPLS = ("workbench", "numpy", "torch")


class Skip(Exception):
    """Raised by a workload's ``make`` when it cannot run here (an op is missing...)."""


@dataclass
class Workload:
    """``make()`` returns ``{impl: fn}``; each ``fn()`` runs the workload once and returns its
    result (compared across implementations before timing)."""

    name: str
    make: Callable[[], dict[str, Callable[[], Any]]]
    target: float | None = None  # workbench / torch ratio to meet
    note: str = ""
    tolerance: float = 1e-3  # for the cross-implementation result check


CLOCKS = {
    "wall": time.perf_counter,
    # CPU time of the whole process (all threads): immune to other processes on a busy
    # machine, but it adds up the threads' times, so only compare with --threads 1.
    "cpu": time.process_time,
}


@dataclass
class Settings:
    repeats: int = 15
    min_time: float = 0.05  # seconds per timed batch
    warmup: int = 2
    clock: str = "wall"


@dataclass
class Result:
    name: str
    times: dict[str, list[float]] = field(default_factory=dict)  # impl -> seconds per call
    numbers: dict[str, int] = field(default_factory=dict)  # impl -> calls per timed batch
    target: float | None = None
    note: str = ""
    skipped: str = ""
    mismatch: str = ""

    def median(self, impl: str) -> float | None:
        t = self.times.get(impl)
        return statistics.median(t) if t else None

    def ratio(self, impl: str, reference: str) -> float | None:
        a, b = self.median(impl), self.median(reference)
        return None if a is None or b is None else a / b

    def to_json(self) -> dict:
        stats = {}
        for impl, t in self.times.items():
            q = statistics.quantiles(t, n=4) if len(t) > 1 else [t[0]] * 3
            stats[impl] = {
                "median_s": statistics.median(t),
                "min_s": min(t),
                "q1_s": q[0],
                "q3_s": q[2],
                "repeats": len(t),
                "calls_per_repeat": self.numbers[impl],
            }
        out = {"name": self.name, "times": stats, "target_vs_torch": self.target}
        out["workbench_vs_torch"] = self.ratio("workbench", "torch")
        out["workbench_vs_numpy"] = self.ratio("workbench", "numpy")
        out["meets_target"] = self.meets_target()
        for key in ("note", "skipped", "mismatch"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out

    def meets_target(self) -> bool | None:
        r = self.ratio("workbench", "torch")
        return None if r is None or self.target is None else r <= self.target


# -- results check -------------------------------------------------------------------------
def as_numpy(value: Any) -> Any:
    """Workbench tensors, torch tensors, arrays and scalars as numpy (recursively)."""
    if isinstance(value, tuple | list):
        return [as_numpy(v) for v in value]
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # torch or workbench
        value = value.detach()
        if "bfloat16" in str(getattr(value, "dtype", "")) or "bf16" in str(value.dtype):
            value = value.float() if hasattr(value, "float") else value.to_dtype("f32")
        return np.asarray(value.numpy(), dtype=np.float64)
    return np.asarray(value, dtype=np.float64)


def compare(results: dict[str, Any], tolerance: float) -> str:
    """'' when every implementation agrees with torch's result, else what differs."""
    reference = results.get("torch")
    if reference is None:
        return ""
    ref = as_numpy(reference)
    problems = []
    for impl, value in results.items():
        if impl == "torch":
            continue
        got = as_numpy(value)
        pairs = zip(got, ref, strict=True) if isinstance(ref, list) else [(got, ref)]
        for g, r in pairs:
            if np.shape(g) != np.shape(r) or not np.allclose(g, r, rtol=tolerance, atol=tolerance):
                problems.append(impl)
                break
    return f"results differ from torch: {', '.join(problems)}" if problems else ""


# -- timing --------------------------------------------------------------------------------
def _batch(fn: Callable[[], Any], number: int, clock: Callable[[], float]) -> float:
    start = clock()
    for _ in range(number):
        fn()
    return (clock() - start) / number


def _calibrate(fn: Callable[[], Any], min_time: float) -> int:
    """Calls per timed batch so that a batch lasts at least ``min_time`` (wall clock)."""
    number = 1
    while True:
        elapsed = _batch(fn, number, time.perf_counter) * number
        if elapsed >= min_time or number >= 1 << 20:
            return number
        number = max(number * 2, int(number * min_time / max(elapsed, 1e-9) * 1.2))


def run(workload: Workload, settings: Settings) -> Result:
    result = Result(workload.name, target=workload.target, note=workload.note)
    try:
        fns = workload.make()
    except Skip as skip:
        result.skipped = str(skip)
        return result
    fns = {impl: fn for impl, fn in fns.items() if fn is not None}
    outputs = {impl: fn() for impl, fn in fns.items()}  # first call, also a warmup
    result.mismatch = compare(outputs, workload.tolerance)
    del outputs
    for fn in fns.values():
        for _ in range(settings.warmup):
            fn()
    result.numbers = {impl: _calibrate(fn, settings.min_time) for impl, fn in fns.items()}
    order = list(fns)
    result.times = {impl: [] for impl in order}
    clock = CLOCKS[settings.clock]
    gc.collect()
    for rep in range(settings.repeats):
        shift = rep % len(order)
        for impl in order[shift:] + order[:shift]:
            result.times[impl].append(_batch(fns[impl], result.numbers[impl], clock))
    del fns
    gc.collect()
    return result


# -- environment ---------------------------------------------------------------------------
ENV_VARS = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MKL_DEBUG_CPU_TYPE",
)
SLOWING_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def match_threads(requested: int | None) -> dict:
    """Give torch as many threads as numpy's BLAS has (or ``requested`` for both)."""
    import threadpoolctl
    import torch

    if requested:
        threadpoolctl.threadpool_limits(requested)
    blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    # scipy (workbench's CPU backend imports scipy.special) may bring its own OpenBLAS: the one
    # that matters is numpy's, which workbench's matmul uses.
    blas.sort(key=lambda p: "numpy" not in p.get("filepath", ""))
    numpy_threads = blas[0]["num_threads"] if blas else 1
    threads = requested or numpy_threads
    torch.set_num_threads(threads)
    import workbench as wb

    wb.set_num_threads(threads)  # the native CPU kernels (and BLAS again: the same count)
    return {
        "workbench_threads": wb.get_num_threads(),
        "numpy_blas": [
            f"{p['internal_api']} {p.get('version')} ({p.get('architecture')})" for p in blas
        ],
        "numpy_blas_threads": numpy_threads,
        "torch_threads": torch.get_num_threads(),
    }


def environment(threads: dict) -> dict:
    import torch

    import workbench

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": machine.cpu_model(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "workbench": workbench.__version__,
        **threads,
        "env": {name: os.environ.get(name) for name in ENV_VARS},
    }


# -- report --------------------------------------------------------------------------------
def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}×"


def table(results: list[Result]) -> str:
    header = ["workload", "workbench", "numpy", "torch", "wb/torch", "wb/numpy", "target", ""]
    rows = []
    for r in results:
        if r.skipped:
            rows.append([r.name, "skipped", "", "", "", "", "", r.skipped])
            continue
        status = {True: "ok", False: "MISSED", None: ""}[r.meets_target()]
        if r.mismatch:
            status = (status + " " + r.mismatch).strip()
        rows.append(
            [
                r.name,
                *(_fmt_time(r.median(i)) for i in IMPLS),
                _fmt_ratio(r.ratio("workbench", "torch")),
                _fmt_ratio(r.ratio("workbench", "numpy")),
                "" if r.target is None else f"<= {r.target:.2f}×",
                status,
            ]
        )
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        ]
        lines.append("  ".join(cells + [str(row[-1])]).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
