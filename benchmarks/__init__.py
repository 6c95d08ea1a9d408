"""Benchmarks: workbench next to numpy and PyTorch (CPU), timed in one process, interleaved.

Run ``python -m benchmarks`` (see ``benchmarks/README.md``). Each ``bench_*.py`` module lists
its workloads in ``WORKLOADS``; timings never go into the tests.
"""

import sys
from pathlib import Path

# `python -m benchmarks` puts the repo root first on sys.path, where kernels/ (workbench.kernels'
# sources) hides the `kernels` package that transformers (>= 5.2x) imports: the root goes last.
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _ROOT] + [str(_ROOT)]
