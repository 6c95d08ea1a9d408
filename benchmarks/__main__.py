"""``python -m benchmarks``: time workbench, numpy and PyTorch (CPU) in one process.

    python -m benchmarks                      # everything, 15 interleaved repetitions
    python -m benchmarks --quick              # fewer, shorter repetitions
    python -m benchmarks --filter matmul --json results.json
    python -m benchmarks --list

Workloads come from every ``benchmarks/bench_*.py`` module (its ``WORKLOADS`` list).
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import re
import sys
import time

from . import _harness, machine
from ._harness import Result, Settings, Workload


def discover() -> tuple[list[Workload], list[Result]]:
    """Every module's workloads, and a skipped result for each module that fails to import."""
    import benchmarks

    workloads: list[Workload] = []
    broken: list[Result] = []
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        try:
            module = importlib.import_module(f"benchmarks.{info.name}")
        except Exception as exc:  # a broken module must not stop the others
            broken.append(Result(info.name, skipped=f"import failed: {type(exc).__name__}: {exc}"))
            continue
        workloads.extend(getattr(module, "WORKLOADS", []))
    return workloads, broken


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--filter",
        "-k",
        default="",
        help="regular expression selecting workloads by name (re.search)",
    )
    parser.add_argument("--quick", action="store_true", help="5 short repetitions per workload")
    parser.add_argument("--repeats", type=int, help="repetitions per workload (default 15)")
    parser.add_argument("--min-time", type=float, help="seconds per timed batch (default 0.05)")
    parser.add_argument("--threads", type=int, help="threads for numpy's BLAS and torch")
    parser.add_argument(
        "--clock",
        choices=sorted(_harness.CLOCKS),
        default="wall",
        help="wall (default) or cpu: process CPU time, steady on a busy machine (use with "
        "--threads 1)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads, broken = discover()
    pattern = re.compile(args.filter)
    workloads = [w for w in workloads if pattern.search(w.name)]
    if args.list:
        for w in workloads:
            target = f"  (target <= {w.target}× torch)" if w.target else ""
            print(f"{w.name}{target}")
        return 0
    settings = Settings(repeats=5, min_time=0.01, warmup=1) if args.quick else Settings()
    if args.repeats:
        settings.repeats = args.repeats
    if args.min_time:
        settings.min_time = args.min_time
    settings.clock = args.clock
    if args.clock == "cpu" and args.threads != 1:
        print("note: --clock cpu adds up the time of all threads; use it with --threads 1")

    env = _harness.environment(_harness.match_threads(args.threads))
    print("\n".join(machine.describe()))
    print(_header(env, settings))
    results = list(broken)
    started = time.perf_counter()
    for workload in workloads:
        print(f"  {workload.name} ...", end="", flush=True, file=sys.stderr)
        result = _harness.run(workload, settings)
        print(" skipped" if result.skipped else " done", file=sys.stderr)
        results.append(result)
    print(_harness.table(results))
    print(
        f"\n{len(results)} workloads in {time.perf_counter() - started:.0f} s; times are "
        "medians per call; ratios < 1 mean workbench is faster."
    )
    if args.json:
        payload = {
            "environment": env,
            "settings": vars(settings),
            "results": [r.to_json() for r in results],
        }
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
        print(f"wrote {args.json}")
    return 0


def _header(env: dict, settings: Settings) -> str:
    lines = [
        f"workbench {env['workbench']} | numpy {env['numpy']} | torch {env['torch']} | "
        f"Python {env['python']} | {env['processor']} ({env['cpu_count']} CPUs)",
        f"threads: numpy BLAS {env['numpy_blas_threads']} ({', '.join(env['numpy_blas'])}), "
        f"torch {env['torch_threads']}",
        "environment: " + ", ".join(f"{k}={v}" for k, v in env["env"].items() if v is not None)
        if any(v is not None for v in env["env"].values())
        else "environment: no BLAS/OpenMP variables set",
    ]
    slowing = [name for name in _harness.SLOWING_VARS if env["env"].get(name)]
    if slowing:
        lines.append(
            f"WARNING: {' and '.join(slowing)} set: OpenBLAS may run slower kernels than this "
            "CPU allows; for a fair run use `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "
            "python -m benchmarks` (see benchmarks/README.md)"
        )
    lines.append(
        f"{settings.repeats} interleaved repetitions, batches of >= "
        f"{settings.min_time * 1e3:.0f} ms, {settings.warmup} warmup calls, "
        f"{settings.clock} clock\n"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
