"""The NCCL ctypes layer against a fake libnccl (tests/distributed/fake_nccl.c, built here).

No GPU on the development machines: this checks signatures, the by-value unique id, the
argument values that cross into C and the error path. The NCCL communicator itself (CUDA
streams, device pointers) is only exercised on a GPU machine.
"""

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.distributed._nccl_lib import DATATYPES, NcclError, NcclLibrary, datatype
from workbench.distributed.errors import DistributedError

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def fake_nccl(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake libnccl")
    out = tmp_path_factory.mktemp("nccl") / "libnccl.so.2"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "fake_nccl.c")],
                   check=True)  # fmt: skip
    return NcclLibrary(str(out))


def _last(lib, name, ctype=ctypes.c_int):
    return ctype.in_dll(lib.lib, name).value


def test_version_and_unique_id_cross_by_value(fake_nccl):
    assert fake_nccl.version() == 22703
    uid = fake_nccl.unique_id()
    assert uid == bytes((i * 7 + 1) % 256 for i in range(128))  # has a NUL at 73
    comm = fake_nccl.comm_init_rank(1, uid, 0)
    assert comm
    fake_nccl.lib.fake_comm_id.restype = ctypes.POINTER(ctypes.c_char * 128)
    assert bytes(fake_nccl.lib.fake_comm_id().contents) == uid  # the struct passed by value
    fake_nccl.call("ncclCommDestroy", ctypes.c_void_p(comm))


def test_all_reduce_arguments_and_data(fake_nccl):
    comm = ctypes.c_void_p(fake_nccl.comm_init_rank(1, fake_nccl.unique_id(), 0))
    src = np.arange(7, dtype=np.float32)
    dst = np.zeros(7, np.float32)
    stream = ctypes.c_void_p(0x1234)
    fake_nccl.call("ncclAllReduce", src.ctypes.data, dst.ctypes.data, 7, datatype(wb.f32), 2,
                   comm, stream)  # fmt: skip
    np.testing.assert_array_equal(dst, src)
    assert _last(fake_nccl, "fake_last_count", ctypes.c_size_t) == 7
    assert _last(fake_nccl, "fake_last_datatype") == 7  # ncclFloat32
    assert _last(fake_nccl, "fake_last_op") == 2  # ncclMax
    assert _last(fake_nccl, "fake_last_stream", ctypes.c_void_p) == 0x1234


def test_errors_carry_nccls_message(fake_nccl):
    comm = ctypes.c_void_p(fake_nccl.comm_init_rank(1, fake_nccl.unique_id(), 0))
    buf = np.zeros(4, np.float32)
    with pytest.raises(NcclError, match="ncclAllReduce failed: NCCL error 4: invalid argument"):
        fake_nccl.call("ncclAllReduce", buf.ctypes.data, buf.ctypes.data, 4, 99, 0, comm, None)
    with pytest.raises(NcclError, match=r"ncclCommInitRank\(rank 1 of 2\).*invalid usage"):
        fake_nccl.comm_init_rank(2, fake_nccl.unique_id(), 1)
    with pytest.raises(NcclError, match="128 bytes"):
        fake_nccl.comm_init_rank(1, b"short", 0)


def test_dtype_table_and_missing_library():
    assert datatype(wb.bf16) == 9 and datatype(wb.f16) == 6 and datatype(wb.i64) == 4
    assert wb.i16 not in DATATYPES and len(DATATYPES) == 9
    with pytest.raises(DistributedError, match="no i16"):
        datatype(wb.i16)
    with pytest.raises(DistributedError, match="pip install nvidia-nccl-cu12"):
        NcclLibrary("/nonexistent/libnccl.so.2")
