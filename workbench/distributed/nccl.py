"""``NCCLCommunicator``: collectives on CUDA tensors through NCCL (ctypes over libnccl.so.2).

Each communicator has its own CUDA stream. A collective first waits for the device's queued
work (so its inputs are ready), then queues on that stream and returns; the result tensor is
safe to use after ``work.wait()`` (a stream synchronize), which blocking calls do at once.
The handle keeps the input and output alive until then. The unique id that joins the ranks
travels through MPI when the job was started by an MPI launcher, else through the TCP
rendezvous on ``MASTER_ADDR:MASTER_PORT``.

Verified here only against a fake libnccl (no GPU on the development machines).
"""

from __future__ import annotations

import ctypes

from ..ops.creation import empty
from ..tensor import Tensor
from ._nccl_lib import REDUCE_OPS, NcclLibrary, datatype
from .communicator import Communicator, ReduceOp, Work
from .errors import DistributedError

_NOT_READY = 600  # CUDA_ERROR_NOT_READY


class _CudaStreams:
    """The few CUDA driver calls for a communicator's own stream."""

    def __init__(self, path: str = "libcuda.so.1") -> None:
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise DistributedError(f"NCCL needs the CUDA driver (libcuda.so.1): {e}") from None

    def _check(self, result: int, call: str) -> None:
        if result:
            raise DistributedError(f"{call} failed with CUDA error {result}")

    def create(self) -> int:
        stream = ctypes.c_void_p()
        self._check(self.lib.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")
        return stream.value or 0

    def synchronize(self, stream: int) -> None:
        self._check(self.lib.cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")

    def done(self, stream: int) -> bool:
        result = self.lib.cuStreamQuery(ctypes.c_void_p(stream))
        if result not in (0, _NOT_READY):
            self._check(result, "cuStreamQuery")
        return result == 0

    def destroy(self, stream: int) -> None:
        self.lib.cuStreamDestroy_v2(ctypes.c_void_p(stream))


def _ptr(x: Tensor) -> int:
    """Device address of a contiguous CUDA tensor's first element."""
    return x._storage.ptr + x.offset * x.dtype.itemsize


class NCCLCommunicator(Communicator):
    """``world_size`` ranks on CUDA devices, joined by ``unique_id`` (from rank 0's
    ``NcclLibrary().unique_id()``, shared by the caller: see :func:`init`)."""

    backend = "nccl"
    device_kind = "cuda"

    def __init__(
        self,
        rank: int,
        world_size: int,
        unique_id: bytes,
        local_rank: int = 0,
        library: NcclLibrary | None = None,
    ):
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.nccl = library or NcclLibrary()
        self.device = f"cuda:{local_rank}"
        empty(1, device=self.device)  # makes the device's context current for the stream
        self.streams = _CudaStreams()
        self.stream = self.streams.create()
        self.comm = self.nccl.comm_init_rank(world_size, unique_id, rank)

    def _queue(self, x: Tensor, out: Tensor, call: str, *args) -> Work:
        x.device.synchronize()  # the inputs were computed on workbench's stream
        self.nccl.call(call, *args, ctypes.c_void_p(self.comm), ctypes.c_void_p(self.stream))
        keep = [x]

        def wait() -> Tensor:
            self.streams.synchronize(self.stream)
            keep.clear()
            return out

        return Work(wait, lambda: self.streams.done(self.stream))

    def _all_reduce(self, x, op, async_op, out=None):
        out = empty(*x.shape, dtype=x.dtype, device=x.device) if out is None else out
        args = (_ptr(x), _ptr(out), x.numel, datatype(x.dtype), REDUCE_OPS[op.value])
        return self._queue(x, out, "ncclAllReduce", *args)

    def _reduce_scatter(self, x, op):
        k = x.numel // self.world_size
        out = empty(k, dtype=x.dtype, device=x.device)
        args = (_ptr(x), _ptr(out), k, datatype(x.dtype), REDUCE_OPS[op.value])
        return self._queue(x, out, "ncclReduceScatter", *args)

    def _all_gather(self, x):
        out = empty(x.shape[0] * self.world_size, *x.shape[1:], dtype=x.dtype, device=x.device)
        args = (_ptr(x), _ptr(out), x.numel, datatype(x.dtype))
        return self._queue(x, out, "ncclAllGather", *args)

    def _broadcast(self, x, root):
        out = empty(*x.shape, dtype=x.dtype, device=x.device)
        args = (_ptr(x), _ptr(out), x.numel, datatype(x.dtype), root)
        return self._queue(x, out, "ncclBroadcast", *args)

    def _barrier(self):
        # NCCL has no barrier: a one-element all-reduce that everyone waits for is one.
        self._all_reduce(empty(1, device=self.device).zero_(), ReduceOp.SUM, False, None).wait()

    def _send(self, x, dst):
        self._queue(x, x, "ncclSend", _ptr(x), x.numel, datatype(x.dtype), dst).wait()

    def _recv(self, out, src):
        self._queue(out, out, "ncclRecv", _ptr(out), out.numel, datatype(out.dtype), src).wait()

    def recv(self, shape, dtype="f32", src: int = 0, device=None) -> Tensor:
        return super().recv(shape, dtype, src, device or self.device)

    def close(self) -> None:
        if self.comm:
            self.nccl.call("ncclCommDestroy", ctypes.c_void_p(self.comm))
            self.streams.destroy(self.stream)
            self.comm = 0
