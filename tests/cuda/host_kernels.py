"""The CUDA backend with its kernels run on the CPU: a fake driver whose device memory is host
memory and whose launches call the kernel families compiled by g++ through ``host_prelude.h``.

So the real host code (argument packing, dim merging, grids) and the real kernel bodies of
``kernels/gpu`` run end to end without a GPU. Grid-stride families (``HOST_FAMILIES``) run as
one host thread; families whose threads cooperate in a block (``BLOCK_FAMILIES``: shuffles,
shared memory, barriers) compile with ``host_blocks.h`` and run every GPU thread of the
launch's grid as a fiber. ``copy_b*`` / ``fill_b*`` stay the fake driver's Python emulation
and any other kernel raises. The parameter offsets come from the kernel's PTX (nvcc), so the
packed argument buffer is read exactly as the GPU reads it.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from fakes import FakeDriver

from workbench.backends.cuda import compile as cuda_compile
from workbench.backends.gpu import metal_sources

HOST_FAMILIES = ("conv", "indexing", "pad", "pool", "upsample")
BLOCK_FAMILIES = ("quantized",)
PRELUDE = Path(__file__).with_name("host_prelude.h")
BLOCK_PRELUDE = Path(__file__).with_name("host_blocks.h")
FLAGS = ("-O0", "-std=c++17", "-shared", "-fPIC", "-w")
_SCALAR = {"8": 1, "16": 2, "32": 4, "64": 8}
ARGS = 24  # WB_HOST_ARGS: the pointers host_blocks.h's wb_host_launch passes a kernel


def host_source(family: str) -> str:
    """The translation unit: the host prelude, then the headers the family's .cu includes."""
    gpu = metal_sources.KERNELS / "gpu"
    prelude = BLOCK_PRELUDE if family in BLOCK_FAMILIES else PRELUDE
    parts = [prelude, *(gpu / p for p in metal_sources.parts(family))]
    return "".join(f'#include "{p}"\n' for p in parts)


def build(family: str, cache: Path, cxx: str = "g++") -> Path:
    """The family's shared library, compiled unless one of the same sources is cached."""
    source = host_source(family)
    digest = hashlib.sha256(source.encode() + " ".join(FLAGS).encode())
    for line in source.splitlines():
        digest.update(Path(line.split('"')[1]).read_bytes())
    digest.update(PRELUDE.read_bytes())  # host_blocks.h includes it
    lib = cache / f"{family}-{digest.hexdigest()[:16]}.so"
    if not lib.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(".tmp")
        subprocess.run([cxx, *FLAGS, "-x", "c++", "-o", str(tmp), "-"], input=source, text=True,
                       check=True, capture_output=True)  # fmt: skip
        tmp.replace(lib)
    return lib


def param_offsets(ptx: str) -> dict[str, list[int]]:
    """``{entry: byte offset of each parameter}`` in the packed buffer (each parameter at the
    next multiple of its alignment, as ``params.pack_args`` places them)."""
    found = {}
    for name, params in re.findall(r"\.entry\s+(\w+)\(([^)]*)\)", ptx):
        offsets, at = [], 0
        for param in params.split(","):
            array = re.search(r"\.align (\d+) \.b8 \w+\[(\d+)\]", param)
            if array:
                align, size = int(array.group(1)), int(array.group(2))
            else:
                align = size = _SCALAR[re.search(r"\.[usbf](\d+)", param).group(1)]
            at += -at % align
            offsets.append(at)
            at += size
        found[name] = offsets
    return found


class HostDriver(FakeDriver):
    """``FakeDriver`` with real host addresses as device pointers and host-run kernels."""

    def __init__(self, libraries: dict[str, Path], offsets: dict[str, list[int]]):
        super().__init__(devices=1)
        self.libraries = {family: ctypes.CDLL(str(path)) for family, path in libraries.items()}
        self.offsets = offsets
        self.views: dict[int, ctypes.Array] = {}  # keeps each allocation's address valid

    def mem_alloc(self, index: int, nbytes: int):
        fake = super().mem_alloc(index, nbytes)
        buf = self.memory.pop(int(fake))
        view = (ctypes.c_char * nbytes).from_buffer(buf)
        address = ctypes.addressof(view)
        self.memory[address] = buf
        self.views[address] = view
        handle = type(fake)(address)
        return handle

    def mem_free(self, handle) -> None:
        self.views.pop(int(handle))
        super().mem_free(handle)

    def load_module(self, index, path):
        super().load_module(index, path)
        return Path(path).name  # the fixture's ptx_path names "<arch>/<family>"

    def get_function(self, module, name: str):
        return (module, name)

    def launch(self, index, function, grid, block, args: bytes, shared=0, stream=None):
        family, name = function
        self.launches.append((name, tuple(grid), tuple(block), args))
        if name.startswith(("copy_b", "fill_b")):
            self._emulate(name, args)
            return
        if family not in self.libraries:
            raise AssertionError(f"{name} ({family}) does not run on the host")
        packed = np.frombuffer(args + b"\0" * 8, np.uint8).copy()  # owned, aligned
        base = packed.ctypes.data
        pointers = [ctypes.c_void_p(base + at) for at in self.offsets[name]]
        library = self.libraries[family]
        if family not in BLOCK_FAMILIES:
            getattr(library, name)(*pointers)
            return
        if tuple(grid[1:]) != (1, 1) or tuple(block[1:]) != (1, 1):
            raise AssertionError(f"{name}: host_blocks.h runs 1-D launches, got {grid} x {block}")
        if len(pointers) > ARGS:
            raise AssertionError(f"{name} has {len(pointers)} parameters (at most {ARGS})")
        kernel = ctypes.cast(getattr(library, name), ctypes.c_void_p)
        argv = (ctypes.c_void_p * ARGS)(*pointers)
        c = ctypes
        library.wb_host_launch.argtypes = [c.c_void_p, c.c_void_p, c.c_longlong, c.c_uint,
                                           c.c_ulonglong]  # fmt: skip
        status = library.wb_host_launch(kernel, argv, grid[0], block[0], shared)
        if status:
            library.wb_host_error.restype = c.c_char_p
            raise AssertionError(f"{name} {grid} x {block}: the host block runtime says "
                                 f"{library.wb_host_error(status).decode()}")  # fmt: skip


def host_driver(cache: Path, nvcc: str, families: tuple[str, ...] = HOST_FAMILIES) -> HostDriver:
    """Build the host families (in parallel) and read their PTX parameter lists."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = pool.map(lambda family: build(family, cache), families)
        libraries = dict(zip(families, built, strict=True))
    offsets = {}
    for family in families:
        ptx = cuda_compile.ptx_path(family, "sm_90", nvcc=nvcc)
        offsets.update(param_offsets(ptx.read_text()))
    return HostDriver(libraries, offsets)
