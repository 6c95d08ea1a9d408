"""A fake of ``backends/cuda/driver.py``'s layer: device memory is a bytearray per device,
copies are real, and launches are recorded; ``copy_b*``/``fill_b*`` are emulated so the
storage's transfer and view logic runs end to end without a GPU."""

from __future__ import annotations

import struct
import sys
from contextlib import contextmanager

import numpy as np

from workbench.backends.cuda import compile as cuda_compile
from workbench.backends.cuda import driver as cuda_driver
from workbench.backends.cuda import runtime as cuda_runtime
from workbench.backends.cuda.driver import OutOfMemoryError
from workbench.backends.gpu.params import LAYOUT_FORMAT, LAYOUT_SIZE, MAX_DIMS

BASE = 1 << 32  # addresses start here (never 0)


class FakeHandle(int):
    """A device allocation: its int value is the address."""

    freed = False


class FakeDriver:
    def __init__(self, devices: int = 1, capacity: int = 1 << 30):
        self.devices = devices
        self.capacity = capacity
        self.used = 0
        self.memory: dict[int, bytearray] = {}  # base address -> bytes
        self.launches: list[tuple] = []
        self.loaded: list[tuple] = []  # ("ptx", path) or ("fatbin", image) per module load
        self.allocs = 0
        self.frees = 0
        self.synced: list[int] = []
        self.active = None
        self._next = BASE
        self.clock_ms = 0.0

    # devices
    def device_count(self) -> int:
        return self.devices

    def activate(self, index: int) -> None:
        self.active = index

    def compute_capability(self, index: int):
        return (9, 0)

    def synchronize(self, index: int) -> None:
        self.synced.append(index)

    def stream(self, index: int):
        return f"stream{index}"

    def stream_handle(self, stream) -> int:
        return 0

    def synchronize_stream(self, stream) -> None:
        pass

    # memory
    def mem_alloc(self, index: int, nbytes: int) -> FakeHandle:
        if self.used + nbytes > self.capacity:
            raise OutOfMemoryError(f"fake device full ({self.used} + {nbytes} > {self.capacity})")
        self.used += nbytes
        self.allocs += 1
        handle = FakeHandle(self._next)
        self.memory[int(handle)] = bytearray(nbytes)
        self._next += nbytes + 4096
        return handle

    def mem_free(self, handle: FakeHandle) -> None:
        buf = self.memory.pop(int(handle))
        self.used -= len(buf)
        self.frees += 1

    def pinned_empty(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, np.uint8)

    def _locate(self, address: int, nbytes: int) -> tuple[bytearray, int]:
        for base, buf in self.memory.items():
            if base <= address and address + nbytes <= base + len(buf):
                return buf, address - base
        raise AssertionError(f"address {address:#x} (+{nbytes}) is outside every allocation")

    def memcpy_htod(self, index, dst, host, stream=None) -> None:
        data = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        buf, off = self._locate(dst, data.size)
        buf[off : off + data.size] = data.tobytes()

    def memcpy_dtoh(self, index, host, src, stream=None) -> None:
        out = host.view(np.uint8).reshape(-1)
        buf, off = self._locate(src, out.size)
        out[:] = np.frombuffer(bytes(buf[off : off + out.size]), np.uint8)

    # modules and launches
    def load_module(self, index, path):
        self.loaded.append(("ptx", path))
        return ("module", path)

    def load_module_data(self, index, image: bytes):
        self.loaded.append(("fatbin", image))
        return ("module", image)

    def get_function(self, module, name: str) -> str:
        return name

    def launch(self, index, function, grid, block, args: bytes, shared=0, stream=None):
        self.launches.append((function, tuple(grid), tuple(block), args))
        if function.startswith(("copy_b", "fill_b")):
            self._emulate(function, args)

    def _emulate(self, name: str, args: bytes) -> None:
        size = int(name[6:])
        code = {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
        (dst,) = struct.unpack_from("<Q", args, 0)
        dst_layout = unpack_layout(args, 8)
        pos = 8 + LAYOUT_SIZE
        if name.startswith("copy"):
            (src,) = struct.unpack_from("<Q", args, pos)
            src_layout = unpack_layout(args, pos + 8)
            (n,) = struct.unpack_from("<q", args, pos + 8 + LAYOUT_SIZE)
            for i in range(n):
                value = self._read(src + element_offset(src_layout, i) * size, code, size)
                self._write(dst + element_offset(dst_layout, i) * size, code, size, value)
        else:
            (n,) = struct.unpack_from("<q", args, pos)
            pos += 8
            pos += -pos % size
            (value,) = struct.unpack_from("<" + code, args, pos)
            for i in range(n):
                self._write(dst + element_offset(dst_layout, i) * size, code, size, value)

    def _read(self, address, code, size):
        buf, off = self._locate(address, size)
        return struct.unpack_from("<" + code, buf, off)[0]

    def _write(self, address, code, size, value):
        buf, off = self._locate(address, size)
        struct.pack_into("<" + code, buf, off, value)

    # events
    def event(self, index):
        return {"index": index}

    def record(self, event, stream=None):
        self.clock_ms += 1.5
        event["t"] = self.clock_ms

    def elapsed_ms(self, start, end) -> float:
        return end["t"] - start["t"]


def unpack_layout(args: bytes, pos: int) -> dict:
    fields = struct.unpack_from(LAYOUT_FORMAT, args, pos)
    ndim, contiguous, offset = fields[:3]
    shape = fields[3 : 3 + MAX_DIMS][:ndim]
    strides = fields[3 + MAX_DIMS :][:ndim]
    return {"ndim": ndim, "contiguous": contiguous, "offset": offset, "shape": shape,
            "strides": strides}  # fmt: skip


def element_offset(layout: dict, i: int) -> int:
    """What ``wb_offset`` in ``kernels/cuda/common.cuh`` computes."""
    if layout["contiguous"]:
        return layout["offset"] + i
    off = layout["offset"]
    for size, stride in zip(reversed(layout["shape"]), reversed(layout["strides"]), strict=True):
        i, r = divmod(i, size)
        off += r * stride
    return off


@contextmanager
def installed(driver, monkeypatch):
    """``driver`` as the CUDA driver layer for the block: fresh runtime state, modules named
    ``"<arch>/<source>"`` instead of compiled PTX, no fatbin."""
    previous = cuda_driver.set_driver(driver)
    cuda_runtime.reset()
    monkeypatch.setattr(cuda_compile, "ptx_path", lambda name, arch, *a, **k: f"{arch}/{name}")
    monkeypatch.setattr(cuda_compile, "fatbin_image", lambda name, capability, *a: None)
    try:
        yield driver
    finally:
        cuda_driver.set_driver(previous)
        cuda_runtime.reset()
        # the cuda Devices used under the driver remember its backend (wb.device is the function)
        make_device = sys.modules["workbench.device"]._device
        for index in range(driver.devices):
            object.__setattr__(make_device("cuda", index), "_backend", None)
