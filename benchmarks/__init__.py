"""Benchmarks: workbench next to numpy and PyTorch (CPU), timed in one process, interleaved.

Run ``python -m benchmarks`` (see ``benchmarks/README.md``). Each ``bench_*.py`` module lists
its workloads in ``WORKLOADS``; timings never go into the tests.
"""
