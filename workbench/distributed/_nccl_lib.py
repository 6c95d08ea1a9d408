"""ctypes bindings of ``libnccl.so.2`` (the ``nvidia-nccl-cu12`` wheel's, or any NCCL >= 2.10).

Only the calls the communicator uses, with their C signatures from ``nccl.h``; every result
goes through ``check`` so a failure raises ``NcclError`` with NCCL's own message. A path to
another library (a fake one in the tests) can be passed or set in ``WORKBENCH_NCCL_LIBRARY``.
"""

from __future__ import annotations

import ctypes
import os
import site
import sys
from pathlib import Path

from .. import dtype as dt
from .errors import DistributedError

UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
SUCCESS, IN_PROGRESS = 0, 7
# ncclDataType_t (NCCL has no int16 and no bool: bool travels as uint8).
DATATYPES = {
    dt.bool_: 1, dt.i8: 0, dt.u8: 1, dt.i32: 2, dt.u32: 3, dt.i64: 4,
    dt.f16: 6, dt.f32: 7, dt.f64: 8, dt.bf16: 9,
}  # fmt: skip
REDUCE_OPS = {"sum": 0, "max": 2, "min": 3, "mean": 4}  # ncclSum, ncclMax, ncclMin, ncclAvg


class NcclError(DistributedError):
    """A call into NCCL that returned an error code."""


class UniqueId(ctypes.Structure):
    # c_ubyte, not c_char: a c_char array reads back as bytes cut at the first NUL.
    _fields_ = [("internal", ctypes.c_ubyte * UNIQUE_ID_BYTES)]


def find_library(environ=None) -> str | None:
    """``WORKBENCH_NCCL_LIBRARY``, else the nvidia-nccl wheel's ``nvidia/nccl/lib``, else the
    system's ``libnccl.so.2`` (None when the loader will have to search)."""
    env = os.environ if environ is None else environ
    if env.get("WORKBENCH_NCCL_LIBRARY"):
        return env["WORKBENCH_NCCL_LIBRARY"]
    for base in (*site.getsitepackages(), site.getusersitepackages(), *sys.path):
        candidate = Path(base) / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
        if candidate.is_file():
            return str(candidate)
    return None


class NcclLibrary:
    """The loaded library, with typed functions."""

    def __init__(self, path: str | None = None):
        path = path or find_library() or "libnccl.so.2"
        try:
            self.lib = lib = ctypes.CDLL(path)
        except OSError as e:
            raise DistributedError(
                f"NCCL library not found ({path}): pip install nvidia-nccl-cu12, or set "
                f"WORKBENCH_NCCL_LIBRARY to a libnccl.so.2 ({e})"
            ) from None
        self.path = path
        c_int, c_size, p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
        sig = {
            "ncclGetVersion": [ctypes.POINTER(c_int)],
            "ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
            "ncclCommInitRank": [ctypes.POINTER(p), c_int, UniqueId, c_int],
            "ncclCommDestroy": [p],
            "ncclCommAbort": [p],
            "ncclCommGetAsyncError": [p, ctypes.POINTER(c_int)],
            "ncclAllReduce": [p, p, c_size, c_int, c_int, p, p],
            "ncclAllGather": [p, p, c_size, c_int, p, p],
            "ncclReduceScatter": [p, p, c_size, c_int, c_int, p, p],
            "ncclBroadcast": [p, p, c_size, c_int, c_int, p, p],
            "ncclSend": [p, c_size, c_int, c_int, p, p],
            "ncclRecv": [p, c_size, c_int, c_int, p, p],
            "ncclGroupStart": [],
            "ncclGroupEnd": [],
        }
        for name, argtypes in sig.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, c_int
        lib.ncclGetErrorString.argtypes, lib.ncclGetErrorString.restype = [c_int], ctypes.c_char_p

    def check(self, result: int, call: str) -> None:
        if result not in (SUCCESS, IN_PROGRESS):
            text = self.lib.ncclGetErrorString(result) or b"?"
            raise NcclError(f"{call} failed: NCCL error {result}: {text.decode(errors='replace')}")

    def version(self) -> int:
        """E.g. 22703 for 2.27.3."""
        v = ctypes.c_int()
        self.check(self.lib.ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
        return v.value

    def unique_id(self) -> bytes:
        uid = UniqueId()
        self.check(self.lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        return bytes(uid.internal)

    def comm_init_rank(self, world_size: int, unique_id: bytes, rank: int) -> int:
        if len(unique_id) != UNIQUE_ID_BYTES:
            raise NcclError(
                f"NCCL unique id must be {UNIQUE_ID_BYTES} bytes, found {len(unique_id)}"
            )
        uid = UniqueId()
        ctypes.memmove(ctypes.addressof(uid), unique_id, UNIQUE_ID_BYTES)
        comm = ctypes.c_void_p()
        self.check(
            self.lib.ncclCommInitRank(ctypes.byref(comm), world_size, uid, rank),
            f"ncclCommInitRank(rank {rank} of {world_size})",
        )
        return comm.value

    def async_error(self, comm: int) -> int:
        err = ctypes.c_int()
        self.check(self.lib.ncclCommGetAsyncError(comm, ctypes.byref(err)), "ncclCommGetAsyncError")
        return err.value

    def call(self, name: str, *args) -> None:
        """``nccl<name>(*args)``, checked."""
        self.check(getattr(self.lib, name)(*args), name)


def datatype(d: dt.DType) -> int:
    try:
        return DATATYPES[d]
    except KeyError:
        raise DistributedError(f"NCCL has no {d.name} type (it has no int16)") from None
