"""Start-up: ``import workbench`` in a fresh interpreter, against ``import numpy`` (its floor)
and ``import torch``; the target is 0.2 s for workbench.

In the suite (``python -m benchmarks``) each call starts one whole process, timed on the wall
clock. Run on its own, ``python -m benchmarks.bench_import [--repeats N]`` also reports the
child's CPU time (user + system, steadier on a loaded machine) and the slowest imports of
workbench (``python -X importtime``), so a regression names its module.
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
# Standalone only: what ``import workbench`` cost while it imported these eagerly.
EAGER = {"workbench+quantized": "import workbench, workbench.quantized"}


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


def slowest_imports(count: int = 8) -> list[tuple[float, str]]:
    """The modules with the largest cumulative import time under ``import workbench``."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import workbench"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    rows = []
    for line in out.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]) / 1e6, parts[2].rstrip()))
    return sorted(rows, reverse=True)[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    statements = {**STATEMENTS, **EAGER}
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
    verdict = "met" if cpu <= TARGET_S else "missed"
    print(f"workbench: {wall / medians['numpy'][0]:.1f}x numpy's wall time; target {TARGET_S} s "
          f"(CPU) {verdict}")  # fmt: skip
    print("slowest imports (cumulative):")
    for seconds, module in slowest_imports():
        print(f"  {seconds:8.3f} s  {module.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
