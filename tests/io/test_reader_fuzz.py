"""A fixed-seed fuzz corpus for the safetensors and GGUF readers.

Each format gets CASES mutations of small valid files (bit flips, hostile integers at
aligned and unaligned offsets, insertions, deletions, truncations; for safetensors also JSON
tokens swapped for hostile ones: deep nesting, 5000-digit and out-of-u64 numbers, lists as
dtypes, lone surrogates, 65 dims, duplicate keys). ``reader_fuzz_worker.py`` reads them in
batches, one subprocess per batch, each limited in address space and CPU time with an alarm
per case. The test fails on any exception other than ``SafetensorsError`` / ``GgufError``, on
a crashed or hung worker, and on a peak allocation (tracemalloc) over
``MEMORY_PER_BYTE * file size + MEMORY_SLACK`` while reading a file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("reader_fuzz_worker.py")
CASES = 2500
BATCH = 500
BATCH_TIMEOUT = 300  # seconds of wall time; the worker's own alarm catches one hung case


def _run_batch(fmt: str, start: int, workdir: Path) -> dict:
    workdir.mkdir()
    proc = subprocess.run(
        [sys.executable, str(WORKER), fmt, str(start), str(start + BATCH), str(workdir)],
        capture_output=True,
        text=True,
        timeout=BATCH_TIMEOUT,
    )
    if proc.returncode != 0:
        progress = workdir / "progress"
        case = progress.read_text() if progress.exists() else "before the first case"
        pytest.fail(
            f"{fmt} fuzz worker died with status {proc.returncode} at case {case}:\n"
            f"{proc.stderr[-3000:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
def test_mutated_files_raise_only_the_readers_errors(fmt, tmp_path):
    starts = range(0, CASES, BATCH)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda s: _run_batch(fmt, s, tmp_path / f"b{s}"), starts))
    failures = [f for r in results for f in r["failures"]]
    assert not failures, "\n\n".join(f"case {f['case']}: {f['error']}\n{f['traceback']}"
                                     for f in failures[:5])  # fmt: skip
    rejected = sum(r["rejected"] for r in results)
    # The corpus must exercise both paths: most mutations break the file, some do not.
    assert CASES // 2 < rejected < CASES
