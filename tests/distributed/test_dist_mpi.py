"""Across processes: ``mpiexec -n 2`` on the CPU (the ``mpich`` wheel of the dev extra).

Three launches, each running many checks (the workers print ``rank N: OK`` or the failures):
every collective against numpy (mpi_collectives.py, through ``workbench.distributed.run``),
DDP against one process and tensor parallelism against the float64 block (mpi_training.py),
and a rank that exits early (mpi_early_exit.py), which must fail the job with the watchdog's
message instead of hanging.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.distributed import run

HERE = Path(__file__).parent
HANG = 240  # seconds; a launch still running then has hung


@pytest.fixture(scope="module")
def mpi_env():
    try:
        import mpi4py  # noqa: F401

        mpiexec = run.find_mpiexec()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"MPI is part of the dev extra (mpi4py + mpich); not usable here: {e}")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    )
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("WORKBENCH_DIST_TIMEOUT", None)
    return mpiexec, env


def _launch(cmd, env):
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=HANG)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} hung for {HANG} s:\n{e.stdout}\n{e.stderr}")
    return done.returncode, done.stdout + done.stderr


def test_collectives_against_numpy(mpi_env):
    _, env = mpi_env
    cmd = [sys.executable, "-m", "workbench.distributed.run", "-n", "2",
           str(HERE / "mpi_collectives.py")]  # fmt: skip
    rc, out = _launch(cmd, env)
    assert rc == 0, out
    assert "rank 0: OK" in out and "rank 1: OK" in out, out


def test_ddp_and_tensor_parallel_across_processes(mpi_env, tmp_path):
    mpiexec, env = mpi_env
    cmd = [mpiexec, "-n", "2", sys.executable, "-m", "mpi4py", str(HERE / "mpi_training.py"),
           str(tmp_path)]  # fmt: skip
    rc, out = _launch(cmd, env)
    assert rc == 0, out
    assert "rank 0: OK ddp + tensor parallel" in out and "rank 1: OK" in out, out


def test_a_rank_exiting_early_fails_the_job(mpi_env):
    _, env = mpi_env
    cmd = [sys.executable, "-m", "workbench.distributed.run", "-n", "2", "--timeout", "3",
           str(HERE / "mpi_early_exit.py")]  # fmt: skip
    rc, out = _launch(cmd, env)
    assert rc != 0, out
    assert "rank 0 waited more than 3 s in all_reduce" in out, out
    assert "returned without rank 1" not in out
