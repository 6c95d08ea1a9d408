"""Start-up: ``import workbench`` in a fresh interpreter, against ``import numpy`` (its floor)
and ``import torch``; the target is 0.2 s for workbench.

In the suite (``python -m benchmarks``) each call starts one whole process, timed on the wall
clock. Run on its own, ``python -m benchmarks.bench_import [--repeats N]`` also reports the
child's CPU time (user + system, steadier on a loaded machine), what the deferred parts cost at
their first use, and the slowest imports of workbench (``python -X importtime``: cumulative and
self times, the smallest of a few runs), so a regression names its module.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from ._harness import Workload

TARGET_S = 0.2
STATEMENTS = {"workbench": "import workbench", "numpy": "import numpy", "torch": "import torch"}
# Standalone only: ``import workbench`` plus the first use of what it defers.
DEFERRED = {
    "workbench+bf16": "import workbench as wb; wb.zeros(1, dtype=wb.bf16)",  # ml_dtypes
    "workbench+nn": "import workbench as wb; wb.nn.Linear(2, 2)",
    "workbench+quantized": "import workbench, workbench.quantized",
}


def _run(statement: str) -> tuple[float, float]:
    """(wall, CPU) seconds of ``python -c statement``, interpreter start-up included."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", statement])
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"python -c {statement!r} exited with {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _process(statement: str):
    def run() -> int:
        _run(statement)
        return 0

    return run


def _imports():
    return {impl: _process(statement) for impl, statement in STATEMENTS.items()}


WORKLOADS = [
    Workload("startup/import", _imports, note="one whole process per call; target 0.2 s"),
]


def import_times(runs: int = 3) -> dict[str, tuple[float, float]]:
    """module -> (self, cumulative) seconds of ``import workbench`` under ``-X importtime``,
    each the smallest over ``runs`` fresh processes (the least disturbed by other work)."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import workbench"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        for line in out.stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].strip().isdigit():
                own, total = int(parts[0].split(":")[1]) / 1e6, int(parts[1]) / 1e6
                name = parts[2].strip()
                old = best.get(name, (own, total))
                best[name] = (min(own, old[0]), min(total, old[1]))
    return best


def _print_slowest(times: dict[str, tuple[float, float]], count: int = 12) -> None:
    for column, label in ((1, "cumulative"), (0, "self")):
        print(f"slowest imports ({label}, min of runs):")
        for name, value in sorted(times.items(), key=lambda kv: -kv[1][column])[:count]:
            print(f"  {value[column]:8.3f} s  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    statements = {**STATEMENTS, **DEFERRED}
    times: dict[str, list[tuple[float, float]]] = {impl: [] for impl in statements}
    impls = list(statements)
    for rep in range(args.repeats):  # round robin, rotating who goes first
        for impl in impls[rep % len(impls) :] + impls[: rep % len(impls)]:
            times[impl].append(_run(statements[impl]))
    print(f"{'import':<22}{'wall (median)':>15}{'CPU (median)':>15}")
    medians = {}
    for impl, runs in times.items():
        wall = statistics.median(t[0] for t in runs)
        cpu = statistics.median(t[1] for t in runs)
        medians[impl] = (wall, cpu)
        print(f"{impl:<22}{wall:>13.3f} s{cpu:>13.3f} s")
    wall, cpu = medians["workbench"]
    for peer in ("numpy", "torch"):
        print(f"workbench / {peer}: {wall / medians[peer][0]:.2f}x wall, "
              f"{cpu / medians[peer][1]:.2f}x CPU")  # fmt: skip
    # The target is wall time on a quiet machine; on a busy one CPU time is the fairer reading.
    print(
        f"target {TARGET_S} s: wall {'met' if wall <= TARGET_S else 'missed'}, "
        f"CPU {'met' if cpu <= TARGET_S else 'missed'} ({os.getloadavg()[0]:.1f} load)"
    )
    _print_slowest(import_times())
    return 0


if __name__ == "__main__":
    sys.exit(main())
