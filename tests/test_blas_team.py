"""OpenBLAS's parallel jobs on the native kernels' OpenMP team (``backends/cpu/threads.py``).

Products are checked against float64 at sizes on both sides of OpenBLAS's threading
thresholds: a job that never ran, ran twice or ran on another call's buffer shows in the
result. A forked child must neither hang on the parent's OpenMP threads nor lose BLAS.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading

import numpy as np
import pytest

import workbench as wb
from workbench.backends.cpu import threads

pytestmark = pytest.mark.skipif(
    not threads.blas_team(),
    reason="OpenBLAS >= 0.3.28 with the native kernels' threads is not what runs here",
)

SHAPES = [(8, 8, 8), (64, 200, 48), (257, 129, 300), (700, 650, 520)]


def _check_products(rng: np.random.Generator) -> None:
    for m, k, n in SHAPES:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        ref = a.astype(np.float64) @ b
        np.testing.assert_allclose(a @ b, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))
        np.testing.assert_allclose(a @ b[:, 0], ref[:, 0], rtol=1e-4, atol=1e-4 * np.sqrt(k))
        d = a.astype(np.float64)
        np.testing.assert_allclose(d @ b.astype(np.float64), ref, rtol=1e-12, atol=1e-10)


def test_products_on_the_kernels_team_match_float64():
    old = wb.get_num_threads()
    try:
        for n in (1, 2, 3):
            wb.set_num_threads(n)
            _check_products(np.random.default_rng(n))
    finally:
        wb.set_num_threads(old)
    assert wb.native_info()["blas_team"]


def test_products_from_several_python_threads_at_once():
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for _ in range(3):
                _check_products(np.random.default_rng(seed))
        except BaseException as e:  # noqa: BLE001  (re-raised in the test's thread)
            errors.append(e)

    workers = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert not any(w.is_alive() for w in workers)
    if errors:
        raise errors[0]


def test_products_without_a_full_openmp_team_run_on_threads_of_their_own():
    """``OMP_THREAD_LIMIT=1``: OpenMP gives a team of one, the jobs still run side by side."""
    code = (
        "import numpy as np, workbench as wb\n"
        "from workbench.backends.cpu import threads\n"
        "assert threads.blas_team()\n"
        "wb.set_num_threads(2)\n"
        "rng = np.random.default_rng(0)\n"
        "a, b = rng.standard_normal((2, 600, 600), dtype=np.float32)\n"
        "print(float(np.abs(a @ b - a.astype(np.float64) @ b).max()))\n"
    )
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 1e-3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_runs_single_threaded_and_blas_on_its_own_threads():
    x = wb.tensor(np.ones(1 << 21, np.float32))
    assert float((x + x).sum().item()) == 2 * (1 << 21)  # the parent's team has run
    a = np.random.default_rng(0).standard_normal((600, 600), dtype=np.float32)
    ref = a.astype(np.float64) @ a
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never raise
        try:
            report = {
                "sum": float((x * x).sum().item()),
                "matmul": float(np.abs(a @ a - ref).max()),
                "threads": wb.get_num_threads(),
                "blas_team": wb.native_info()["blas_team"],
            }
            try:
                wb.set_num_threads(2)
                report["set"] = "accepted"
            except wb.WorkbenchError as e:
                report["set"] = str(e)
            os.write(write, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 60)
    if not ready:
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    assert ready, "the forked child hung"
    report = json.loads(os.read(read, 1 << 16))
    os.close(read)
    assert report["sum"] == 1 << 21
    assert report["matmul"] < 1e-3
    assert report["threads"] == 1 and report["blas_team"] is False
    assert "forked" in report["set"] and "spawn" in report["set"]
