"""CPU threads and the native kernels: ``wb.set_num_threads``, ``wb.get_num_threads``,
``wb.native_info``."""

from __future__ import annotations

from .backends.cpu import native as _native
from .backends.cpu import threads as _threads

set_num_threads = _threads.set_num_threads
get_num_threads = _threads.get_num_threads


def native_info() -> dict:
    """Which compiled CPU kernel variant runs and why, the CPU's SIMD features, what the variant
    was compiled with, the thread count, and whether OpenBLAS runs its jobs on the kernels'
    threads: ``{"variant": "avx512" | "avx2" | "base" | "dotprod" | None, "reason": str,
    "cpu_features": [...], "compiled_with": {...}, "num_threads": int, "blas_team": bool}``.
    ``variant`` is None on the numpy path (``WORKBENCH_NATIVE=0`` or no compiled extension)."""
    return {**_native.info(), "num_threads": get_num_threads(), "blas_team": _threads.blas_team()}


__all__ = ["set_num_threads", "get_num_threads", "native_info"]
