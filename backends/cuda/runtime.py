"""Per-process CUDA state: the driver layer, a pool, a stream and loaded modules per device,
pinned staging for host copies and cuBLAS (the pool and the event timer are the GPU base's)."""

from __future__ import annotations

import atexit

import numpy as np

from ..gpu.pool import CachingPool
from ..gpu.timer import DeviceTimer  # noqa: F401  (the backend exposes it)
from . import compile as _compile
from .driver import get_driver

STAGING_BYTES = 32 << 20  # one pinned buffer per device; larger copies go through it in chunks


class Runtime:
    def __init__(self, driver):
        self.driver = driver
        self.pools: dict[int, CachingPool] = {}
        self.modules: dict[tuple[int, str], object] = {}
        self.functions: dict[tuple[int, str, str], object] = {}
        self.staging: dict[int, np.ndarray] = {}
        self.cublas = None
        self.allow_tf32 = False

    def pool(self, index: int) -> CachingPool:
        pool = self.pools.get(index)
        if pool is None:
            pool = self.pools[index] = CachingPool(self.driver, index)
        return pool

    def stream(self, index: int):
        return self.driver.stream(index)

    def arch(self, index: int) -> str:
        return _compile.arch_of(self.driver.compute_capability(index))

    def function(self, index: int, source: str, name: str):
        key = (index, source, name)
        function = self.functions.get(key)
        if function is None:
            module = self.modules.get((index, source))
            if module is None:
                module = self.modules[(index, source)] = self._load(index, source)
            function = self.functions[key] = self.driver.get_function(module, name)
        return function

    def _load(self, index: int, source: str):
        """The prebuilt fatbin of ``source`` when it holds code for this GPU (no nvcc needed),
        else its PTX compiled now (nvcc, cached on disk) for the driver to JIT."""
        image = _compile.fatbin_image(source, self.driver.compute_capability(index))
        if image is not None:
            return self.driver.load_module_data(index, image)
        return self.driver.load_module(index, str(_compile.ptx_path(source, self.arch(index))))

    # -- host transfers through pinned staging --------------------------------------------
    def _staging(self, index: int) -> np.ndarray:
        buf = self.staging.get(index)
        if buf is None:
            buf = self.staging[index] = self.driver.pinned_empty(STAGING_BYTES)
        return buf

    def upload(self, index: int, dst: int, data: np.ndarray) -> None:
        """Copy the bytes ``data`` (uint8, contiguous) to device address ``dst``."""
        stream = self.stream(index)
        staging = self._staging(index)
        for start in range(0, data.size, STAGING_BYTES):
            chunk = data[start : start + STAGING_BYTES]
            staging[: chunk.size] = chunk
            self.driver.memcpy_htod(index, dst + start, staging[: chunk.size], stream)
            self.driver.synchronize_stream(stream)  # the staging buffer is reused next

    def download(self, index: int, out: np.ndarray, src: int) -> None:
        """Copy ``out.size`` bytes from device address ``src`` into ``out`` (uint8)."""
        stream = self.stream(index)
        staging = self._staging(index)
        for start in range(0, out.size, STAGING_BYTES):
            size = min(STAGING_BYTES, out.size - start)
            self.driver.memcpy_dtoh(index, staging[:size], src + start, stream)
            self.driver.synchronize_stream(stream)
            out[start : start + size] = staging[:size]

    # -- cuBLAS ---------------------------------------------------------------------------
    def gemm(self, index: int, dtype: str, trans_a: bool, trans_b: bool, m: int, n: int, k: int,
             a: int, lda: int, stride_a: int, b: int, ldb: int, stride_b: int,
             c: int, ldc: int, stride_c: int, batch: int, beta: float = 0.0) -> None:  # fmt: skip
        if self.cublas is None:
            from .cublas import Cublas

            self.cublas = Cublas()
        self.cublas.allow_tf32 = self.allow_tf32
        self.driver.activate(index)
        handle = self.cublas.handle(index, self.driver.stream_handle(self.stream(index)))
        self.cublas.gemm_strided_batched(
            handle, dtype, trans_a, trans_b, m, n, k, a, lda, stride_a, b, ldb, stride_b,
            c, ldc, stride_c, batch, beta,
        )  # fmt: skip


_RUNTIME: Runtime | None = None


def runtime() -> Runtime:
    global _RUNTIME
    rt = _RUNTIME
    if rt is None or rt.driver is not get_driver():
        if rt is None:
            atexit.register(_shutdown)
        rt = _RUNTIME = Runtime(get_driver())
    return rt


def _shutdown() -> None:
    """At exit: give cached blocks back while the contexts are still alive, then leave the
    context stack empty."""
    rt = _RUNTIME
    if rt is None:
        return
    for pool in rt.pools.values():
        try:
            pool.clear_cache()
        except Exception:  # a dead context at interpreter exit: nothing left to free
            pass
    close = getattr(rt.driver, "close", None)
    if close is not None:
        close()


def reset() -> None:
    """Forget all state (tests call it after swapping the driver)."""
    global _RUNTIME
    _RUNTIME = None
