"""The NCCL ctypes layer against a fake libnccl (tests/distributed/fake_nccl.c, built here).

No GPU on the development machines: this checks signatures, the by-value unique id, the
argument values that cross into C and the error path; and the communicator's handles, with
the fake library standing in for the CUDA driver's stream calls too: async collectives poll
their stream (``is_completed``), ``wait`` synchronizes it once, the inputs stay alive until
then, blocking calls wait at once, a stream error surfaces. Real device memory, streams and
several GPUs are only exercised on a GPU machine.
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
    assert datatype(wb.i8) == 0  # ncclInt8
    assert wb.i16 not in DATATYPES and len(DATATYPES) == 10
    with pytest.raises(DistributedError, match="no i16"):
        datatype(wb.i16)
    with pytest.raises(DistributedError, match="pip install nvidia-nccl-cu12"):
        NcclLibrary("/nonexistent/libnccl.so.2")


# -- the communicator's async handles, on the fake library as NCCL and as the CUDA driver --------
def _set(lib, name, value, ctype=ctypes.c_int):
    ctype.in_dll(lib.lib, name).value = value


@pytest.fixture
def fake_comm(fake_nccl, monkeypatch):
    """An ``NCCLCommunicator`` of one rank on host memory: the fake library is both libnccl
    and libcuda (its streams), device pointers are host ones. No GPU: ``__init__`` (which
    makes the CUDA context current) is skipped and CPU tensors are accepted."""
    from workbench.distributed import nccl

    for name in ("fake_busy_queries", "fake_pending", "fake_query_error", "fake_syncs",
                 "fake_queries", "fake_streams_destroyed"):  # fmt: skip
        _set(fake_nccl, name, 0)
    monkeypatch.setattr(nccl, "_ptr", lambda x: x.numpy().ctypes.data)
    comm = object.__new__(nccl.NCCLCommunicator)
    comm.rank, comm.world_size, comm.local_rank = 0, 1, 0
    comm.device, comm.device_kind = "cpu", "cpu"
    comm.nccl = fake_nccl
    comm.streams = nccl._CudaStreams(fake_nccl.path)
    comm.stream = comm.streams.create()
    comm.comm = fake_nccl.comm_init_rank(1, fake_nccl.unique_id(), 0)
    assert _last(fake_nccl, "fake_stream_flags") == 1  # CU_STREAM_NON_BLOCKING
    return comm


def test_async_handle_polls_the_stream_then_waits(fake_nccl, fake_comm):
    import gc
    import weakref

    _set(fake_nccl, "fake_busy_queries", 2)
    x = wb.from_numpy(np.arange(10, dtype=np.float32))
    memory = weakref.ref(x.numpy().base if x.numpy().base is not None else x.numpy())
    work = fake_comm.all_reduce(x, async_op=True)
    assert _last(fake_nccl, "fake_last_stream", ctypes.c_void_p) == fake_comm.stream
    del x
    gc.collect()
    assert memory() is not None  # the handle keeps the input until the stream is done
    assert not work.is_completed() and not work.is_completed()  # two "not ready" queries
    assert _last(fake_nccl, "fake_syncs") == 0
    assert work.is_completed()  # ready: the handle waits (a synchronize) and holds the result
    assert _last(fake_nccl, "fake_queries") == 3 and _last(fake_nccl, "fake_syncs") == 1
    got = work.wait()
    assert _last(fake_nccl, "fake_syncs") == 1  # waited once
    np.testing.assert_array_equal(got.numpy(), np.arange(10, dtype=np.float32))
    del work
    gc.collect()
    assert memory() is None  # released once done


def test_async_wait_synchronizes_without_polling(fake_nccl, fake_comm):
    _set(fake_nccl, "fake_busy_queries", 5)
    x = wb.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    works = {
        "mean": fake_comm.all_reduce(x, "mean", async_op=True),  # a sum, then / world size
        "gather": fake_comm.all_gather(x, dim=1, async_op=True),  # gathered, then moved
        "scatter": fake_comm.reduce_scatter(x, "max", dim=1, async_op=True),
        "broadcast": fake_comm.broadcast(x, root=0, async_op=True),
    }
    assert _last(fake_nccl, "fake_syncs") == 0  # all four queued, none waited for
    assert not works["mean"].is_completed()
    for name, work in works.items():
        np.testing.assert_array_equal(work.wait().numpy(), x.numpy(), err_msg=name)
    assert _last(fake_nccl, "fake_syncs") >= 1
    assert all(work.is_completed() for work in works.values())


def test_blocking_calls_wait_and_errors_surface(fake_nccl, fake_comm):
    _set(fake_nccl, "fake_busy_queries", 3)
    y = fake_comm.all_reduce(wb.ones(4), "max")
    assert _last(fake_nccl, "fake_syncs") == 1 and _last(fake_nccl, "fake_last_op") == 2
    np.testing.assert_array_equal(y.numpy(), np.ones(4, np.float32))
    fake_comm.barrier()  # a one-element all-reduce, waited for
    assert _last(fake_nccl, "fake_syncs") == 2 and _last(fake_nccl, "fake_last_count") == 1
    work = fake_comm.all_reduce(wb.ones(4), async_op=True)
    _set(fake_nccl, "fake_query_error", 700)  # CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(DistributedError, match="cuStreamQuery failed with CUDA error 700"):
        work.is_completed()
    _set(fake_nccl, "fake_query_error", 0)
    work.wait()
    fake_comm.close()
    assert fake_comm.comm == 0 and _last(fake_nccl, "fake_streams_destroyed") == 1
    fake_comm.close()  # twice is harmless
    assert _last(fake_nccl, "fake_streams_destroyed") == 1
