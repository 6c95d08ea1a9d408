"""The fake Metal device with its kernels run on the CPU: each generated
``kernels/metal/<family>.metal`` is compiled by g++ with its Metal prelude replaced by
``host_metal.h`` (Metal's types over the fiber block runtime ``tests/cuda/host_blocks.h``), and
every dispatch
the fake command buffer runs calls the kernel with one pointer per bound slot (buffers at their
offsets, constants as the bytes ``setBytes`` was given).

So the real Metal host code (slot binding, f32 scalars, grids, the batching stream) and the
real generated sources run end to end on Linux. What it cannot show: Apple's compiler's
verdict on the source, and timing.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
from pathlib import Path

import numpy as np

from workbench.backends.gpu import metal_sources

HOST_METAL = Path(__file__).with_name("host_metal.h")
HOST_CUDA = Path(__file__).parent.parent / "cuda"
HOST_HEADERS = (HOST_METAL, HOST_CUDA / "host_blocks.h", HOST_CUDA / "host_prelude.h")
FLAGS = ("-O1", "-std=c++17", "-shared", "-fPIC", "-w")
SLOTS = 24  # WB_HOST_ARGS of host_blocks.h


def cache_dir() -> Path:
    root = os.environ.get("WORKBENCH_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "workbench") / "metal-host"


def host_source(metal_source: str) -> str:
    """The generated Metal source with its prelude swapped for the host one."""
    prelude = (metal_sources.KERNELS / "gpu" / "prelude_metal.h").read_text()
    if prelude not in metal_source:
        raise AssertionError("the Metal source does not start with prelude_metal.h")
    return metal_source.replace(prelude, f'#include "{HOST_METAL}"\n')


def build(metal_source: str, cache: Path | None = None) -> Path:
    """The shared library of one Metal source, compiled unless cached."""
    source = host_source(metal_source)
    digest = hashlib.sha256(source.encode() + " ".join(FLAGS).encode())
    for header in HOST_HEADERS:
        digest.update(header.read_bytes())
    cache = cache or cache_dir()
    lib = cache / f"{digest.hexdigest()[:20]}.so"
    if not lib.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        done = subprocess.run(["g++", *FLAGS, "-x", "c++", "-o", str(tmp), "-"], input=source,
                              text=True, capture_output=True)  # fmt: skip
        if done.returncode:
            raise AssertionError(f"the Metal source does not compile for the host:\n{done.stderr}")
        tmp.replace(lib)
    return lib


class HostExecutor:
    """``executor(state, groups, threads)`` for ``FakeDevice``: runs one recorded dispatch."""

    def __init__(self):
        self.libraries: dict[int, ctypes.CDLL] = {}  # by hash of the source
        self.runs: list[str] = []

    def library(self, source: str) -> ctypes.CDLL:
        key = hash(source)
        lib = self.libraries.get(key)
        if lib is None:
            lib = self.libraries[key] = ctypes.CDLL(str(build(source)))
            lib.wb_host_launch.restype = ctypes.c_int
            lib.wb_host_error.restype = ctypes.c_char_p
            lib.wb_host_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                                           ctypes.c_uint, ctypes.c_ulonglong]  # fmt: skip
        return lib

    def __call__(self, state: dict, groups, threads) -> None:
        pipeline = state["pipeline"]
        lib = self.library(pipeline.source)
        keep = []  # the cells and constants must outlive the call
        args = (ctypes.c_void_p * SLOTS)()
        slots = {**state["bytes"], **state["buffers"]}
        if slots and max(slots) >= SLOTS:
            raise AssertionError(f"{pipeline.name} binds slot {max(slots)} (at most {SLOTS - 1})")
        for slot, value in state["buffers"].items():
            buffer, offset = value
            cells = (ctypes.c_char * len(buffer.memory)).from_buffer(buffer.memory)
            cell = ctypes.c_void_p(ctypes.addressof(cells) + offset)
            keep += [cells, cell]
            args[slot] = ctypes.addressof(cell)
        for slot, data in state["bytes"].items():
            aligned = np.zeros(len(data) // 8 + 2, np.uint64)
            aligned.view(np.uint8)[: len(data)] = np.frombuffer(data, np.uint8)
            keep.append(aligned)
            args[slot] = aligned.ctypes.data
        fn = ctypes.cast(getattr(lib, pipeline.name), ctypes.c_void_p)
        count = groups[0] * groups[1] * groups[2]
        size = threads[0] * threads[1] * threads[2]
        status = lib.wb_host_launch(fn, args, count, size, state["shared"])
        if status:
            raise AssertionError(f"{pipeline.name} {groups} x {threads}: the host block runtime "
                                 f"says {lib.wb_host_error(status).decode()}")  # fmt: skip
        self.runs.append(pipeline.name)


def install_host_device(mps: bool = True):
    """Install a ``MetalDriver`` over one fake device whose dispatches run on the CPU, with the
    fake MPS matrix product (``mps``) or the tiled GEMM kernel; returns ``(driver, device,
    previous driver)``."""
    from fake_metal import FakeDevice, FakeObjc, fake_metal, fake_mps

    from workbench.backends.metal import driver as metal_driver
    from workbench.backends.metal import runtime as metal_runtime

    device = FakeDevice("Apple M3 (fake, kernels on the host)")
    device.executor = HostExecutor()
    d = metal_driver.MetalDriver(fake_metal([device]), FakeObjc(), fake_mps() if mps else False)
    previous = metal_driver.set_driver(d)
    metal_runtime.reset()
    return d, device, previous
