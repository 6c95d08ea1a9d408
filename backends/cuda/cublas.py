"""cuBLAS through ctypes: strided batched GEMM in f32 (optionally TF32), f16, bf16 and f64.

The library is found in ``$CUDA_HOME/lib64``, ``$CUDA_PATH/lib64``, ``/usr/local/cuda/lib64``,
the ``nvidia-cublas`` wheels (``site-packages/nvidia/cublas/lib`` or ``nvidia/cu13/lib``), then
the loader's own search (``libcublas.so``).

cuBLAS is column-major; a row-major ``C (m, n) = A (m, k) @ B (k, n)`` is computed as the
column-major ``Cᵀ (n, m) = Bᵀ (n, k) Aᵀ (k, m)``, i.e. the operands swapped, no transposes.
A row-major operand whose last two strides are swapped (a transposed view) is passed with the
``T`` flag instead of being copied.
"""

from __future__ import annotations

import ctypes
import glob
import os
import site
import sys
from pathlib import Path

from ..gpu.plan import batch_stride, gemm_operand  # noqa: F401  (re-exported)

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
# cudaDataType and cublasComputeType values (cuBLAS headers).
CUDA_R_16F, CUDA_R_32F, CUDA_R_64F, CUDA_R_16BF = 2, 0, 1, 14
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_64F = 68, 77, 70
CUBLAS_GEMM_DEFAULT = -1
DATA_TYPES = {"f16": CUDA_R_16F, "bf16": CUDA_R_16BF, "f32": CUDA_R_32F, "f64": CUDA_R_64F}


def candidate_dirs(env=None, site_dirs=None) -> list[Path]:
    """Folders that may hold ``libcublas.so*``, in search order."""
    env = os.environ if env is None else env
    dirs: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            home = Path(env[var])
            dirs += [home / "lib64", home / "lib", home / "targets" / "x86_64-linux" / "lib"]
    dirs += [Path("/usr/local/cuda/lib64"), Path("/usr/local/cuda/targets/x86_64-linux/lib")]
    if site_dirs is None:
        site_dirs = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for base in site_dirs:
        for sub in ("nvidia/cublas/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"):
            dirs.append(Path(base) / sub)
    seen, unique = set(), []
    for d in dirs:
        if d not in seen:
            seen.add(d)
            unique.append(d)
    return unique


def find_library(env=None, site_dirs=None) -> str | None:
    """The first ``libcublas.so[.N]`` in ``candidate_dirs`` (newest version first), or None."""
    for d in candidate_dirs(env, site_dirs):
        if not d.is_dir():
            continue
        plain = d / "libcublas.so"
        if plain.is_file():
            return str(plain)
        versioned = sorted(glob.glob(str(d / "libcublas.so.*")), key=_version_key, reverse=True)
        if versioned:
            return versioned[0]
    return None


def _version_key(path: str) -> tuple[int, ...]:
    tail = path.rsplit("libcublas.so.", 1)[-1]
    return tuple(int(p) if p.isdigit() else 0 for p in tail.split("."))


class Cublas:
    """One cuBLAS handle per device (created lazily with that device's context current)."""

    def __init__(self, path: str | None = None):
        path = path or find_library()
        if path is None:
            raise OSError(
                "libcublas not found: set CUDA_HOME, install the CUDA toolkit or "
                "pip install nvidia-cublas"
            )
        self.lib = ctypes.CDLL(path)
        self.path = path
        self.handles: dict[int, ctypes.c_void_p] = {}
        self.allow_tf32 = False
        lib = self.lib
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cublasSetStream_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.cublasGemmStridedBatchedEx.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int,  # handle, transa, transb
            ctypes.c_int, ctypes.c_int, ctypes.c_int,  # m, n, k
            ctypes.c_void_p,  # alpha
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,  # A, type, lda, sA
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,  # B, type, ldb, sB
            ctypes.c_void_p,  # beta
            ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,  # C, type, ldc, sC
            ctypes.c_int, ctypes.c_int, ctypes.c_int,  # batch, compute type, algo
        ]  # fmt: skip

    def handle(self, index: int, stream_handle: int | None = None) -> ctypes.c_void_p:
        handle = self.handles.get(index)
        if handle is None:
            handle = ctypes.c_void_p()
            _check(self.lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
            if stream_handle:
                _check(self.lib.cublasSetStream_v2(handle, stream_handle), "cublasSetStream")
            self.handles[index] = handle
        return handle

    def gemm_strided_batched(self, handle, dtype: str, trans_a: bool, trans_b: bool,
                             m: int, n: int, k: int, a: int, lda: int, stride_a: int,
                             b: int, ldb: int, stride_b: int, c: int, ldc: int, stride_c: int,
                             batch: int, beta: float = 0.0) -> None:  # fmt: skip
        """Column-major ``C = op(A) op(B) + beta C`` for ``batch`` matrices (alpha 1)."""
        dt = DATA_TYPES[dtype]
        if dtype == "f64":
            compute, scalar = CUBLAS_COMPUTE_64F, ctypes.c_double
        else:
            tf32 = dtype == "f32" and self.allow_tf32
            compute = CUBLAS_COMPUTE_32F_FAST_TF32 if tf32 else CUBLAS_COMPUTE_32F
            scalar = ctypes.c_float
        alpha, beta = scalar(1.0), scalar(beta)
        status = self.lib.cublasGemmStridedBatchedEx(
            handle, CUBLAS_OP_T if trans_a else CUBLAS_OP_N,
            CUBLAS_OP_T if trans_b else CUBLAS_OP_N, m, n, k, ctypes.byref(alpha),
            a, dt, lda, stride_a, b, dt, ldb, stride_b, ctypes.byref(beta),
            c, dt, ldc, stride_c, batch, compute, CUBLAS_GEMM_DEFAULT,
        )  # fmt: skip
        _check(status, "cublasGemmStridedBatchedEx")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with cuBLAS status {status}")
