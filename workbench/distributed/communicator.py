"""``Communicator``: the collectives every backend (MPI, NCCL, in-process threads) provides.

Ops are functional, as in MLX: ``comm.all_reduce(x)`` returns a new tensor and leaves ``x``
alone. With ``async_op=True`` they return a :class:`Work` handle instead; ``work.wait()`` gives
the tensor. Every rank must call the same collectives in the same order with tensors of the
same shape and dtype (the MPI rule); the arguments are checked locally and named in errors.

A backend implements the underscored primitives on contiguous tensors; this class does the
checks, the ``mean`` (a sum divided by the world size), the ``dim`` arguments and the dtypes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from .. import dtype as dt
from ..autograd import no_grad
from ..errors import DTypeError, ShapeError
from ..ops.creation import empty
from ..ops.shape import cat, stack
from ..tensor import Tensor
from .errors import DistributedError


class ReduceOp(str, enum.Enum):
    """How ``all_reduce`` and ``reduce_scatter`` combine the ranks' values."""

    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    MIN = "min"


def reduce_op(op: ReduceOp | str) -> ReduceOp:
    try:
        return ReduceOp(op.value if isinstance(op, ReduceOp) else str(op).lower())
    except ValueError:
        names = ", ".join(o.value for o in ReduceOp)
        raise DistributedError(f"unknown reduce op {op!r}; expected one of {names}") from None


class Work:
    """The handle of a collective started with ``async_op=True``.

    ``wait()`` blocks until it is done and returns its tensor (None for ``barrier``/``send``);
    ``is_completed()`` asks without blocking.
    """

    __slots__ = ("_wait", "_test", "_done", "_result")

    def __init__(self, wait: Callable[[], Any], test: Callable[[], bool] | None = None):
        self._wait, self._test = wait, test
        self._done, self._result = False, None

    @classmethod
    def completed(cls, result: Any) -> Work:
        work = cls(lambda: result)
        work._done, work._result = True, result
        return work

    def wait(self) -> Any:
        if not self._done:
            self._result = self._wait()
            self._done = True
            self._wait = self._test = None  # drop the buffers the closures hold
        return self._result

    def is_completed(self) -> bool:
        if not self._done and self._test is not None and self._test():
            self.wait()
        return self._done

    def then(self, fn: Callable[[Any], Any]) -> Work:
        """A handle whose result is ``fn(this handle's result)``."""
        return Work(lambda: fn(self.wait()), self.is_completed)


class Communicator:
    """A group of ``world_size`` processes (ranks) that run collectives together.

    ``rank`` is this process's index in the group, ``local_rank`` its index among the ranks on
    the same host (the GPU it should use). ``device_kind`` is where the tensors may live.
    """

    backend = "?"
    device_kind = "cpu"
    rank: int
    world_size: int
    local_rank: int

    # -- collectives ------------------------------------------------------------------------
    def all_reduce(
        self,
        x: Tensor,
        op: ReduceOp | str = "sum",
        *,
        out: Tensor | None = None,
        async_op: bool = False,
    ):
        """Every rank gets op(x_0, ..., x_{W-1}), elementwise; same shape and dtype as ``x``.

        ``mean`` is the sum divided by ``world_size`` (floating point dtypes only); ``sum`` of
        bool tensors is refused (use ``max`` for a logical or, ``min`` for an and). ``out``
        (a contiguous tensor like ``x``, or ``x`` itself for PyTorch's in-place style)
        receives the result instead of a new tensor.
        """
        op = reduce_op(op)
        if out is not None:
            self._check_out(out, x, "all_reduce")
        x = self._check(x, "all_reduce", op)
        work = self._all_reduce(x, ReduceOp.SUM if op is ReduceOp.MEAN else op, async_op, out)
        if out is not None:
            work = work.then(self._bump)
        if op is ReduceOp.MEAN:
            work = work.then(self._mean if out is None else self._mean_into)
        return self._finish(work, async_op)

    def all_gather(self, x: Tensor, dim: int = 0, *, async_op: bool = False):
        """The ranks' tensors concatenated along ``dim`` in rank order: (..., W·n, ...)."""
        x = self._check(x, "all_gather")
        dim = _dim(dim, x, "all_gather")
        work = self._all_gather(x)
        if dim:
            world = self.world_size

            def move(g: Tensor) -> Tensor:
                return cat([g.narrow(0, r * x.shape[0], x.shape[0]) for r in range(world)], dim)

            work = work.then(move)
        return self._finish(work, async_op)

    def reduce_scatter(
        self, x: Tensor, op: ReduceOp | str = "sum", dim: int = 0, *, async_op: bool = False
    ):
        """Reduce over ranks, then rank r keeps the r-th of ``world_size`` chunks along ``dim``.

        x: (..., W·m, ...) -> (..., m, ...).
        """
        op = reduce_op(op)
        x = self._check(x, "reduce_scatter", op)
        dim = _dim(dim, x, "reduce_scatter")
        world = self.world_size
        if x.shape[dim] % world:
            raise ShapeError(
                f"reduce_scatter: dim {dim} of shape {x.shape} is not a multiple of the world "
                f"size {world}"
            )
        chunk = (*x.shape[:dim], x.shape[dim] // world, *x.shape[dim + 1 :])
        # Rank r's chunk must be the r-th contiguous block of the flat buffer.
        blocks = x if dim == 0 else stack(x.chunk(world, dim), 0)
        work = self._reduce_scatter(blocks.reshape(-1), ReduceOp.SUM if op is ReduceOp.MEAN else op)
        work = work.then(lambda y: y.reshape(*chunk))
        return self._finish(work.then(self._mean) if op is ReduceOp.MEAN else work, async_op)

    def broadcast(self, x: Tensor, root: int = 0, *, async_op: bool = False):
        """Every rank gets rank ``root``'s ``x`` (the others' ``x`` gives shape and dtype)."""
        x = self._check(x, "broadcast")
        return self._finish(self._broadcast(x, self._peer(root, "broadcast root")), async_op)

    def barrier(self) -> None:
        """Return once every rank has called ``barrier``."""
        self._barrier()

    def send(self, x: Tensor, dst: int) -> None:
        """Send ``x`` to rank ``dst``, which must ``recv`` a tensor of its shape and dtype."""
        x = self._check(x, "send")
        self._send(x, self._peer(dst, "send destination"))

    def recv(self, shape, dtype: dt.DType | str = dt.f32, src: int = 0, device=None) -> Tensor:
        """Receive a tensor of ``shape`` and ``dtype`` sent by rank ``src``."""
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        out = empty(*shape, dtype=dt.dtype(dtype), device=device or self.device_kind)
        self._recv(out, self._peer(src, "recv source"))
        return out

    def close(self) -> None:
        """Release the communicator's resources (its library handle, threads)."""

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size}, "
            f"local_rank={self.local_rank})"
        )

    # -- what a backend implements (contiguous tensors, ops sum/max/min) --------------------
    def _all_reduce(self, x: Tensor, op: ReduceOp, async_op: bool, out: Tensor | None) -> Work:
        """``async_op``: the caller will not wait at once, so start a non-blocking request.
        ``out``: None (allocate) or a contiguous tensor like ``x`` to write (may be ``x``)."""
        raise NotImplementedError

    def _all_gather(self, x: Tensor) -> Work:
        """(n, ...) -> (W·n, ...)."""
        raise NotImplementedError

    def _reduce_scatter(self, x: Tensor, op: ReduceOp) -> Work:
        """Flat (W·k,) -> (k,): the rank's block of the reduction."""
        raise NotImplementedError

    def _broadcast(self, x: Tensor, root: int) -> Work:
        raise NotImplementedError

    def _barrier(self) -> None:
        raise NotImplementedError

    def _send(self, x: Tensor, dst: int) -> None:
        raise NotImplementedError

    def _recv(self, out: Tensor, src: int) -> None:
        raise NotImplementedError

    # -- shared checks ----------------------------------------------------------------------
    def _check(self, x: Tensor, name: str, op: ReduceOp | None = None) -> Tensor:
        if not isinstance(x, Tensor):
            raise DistributedError(f"{name}: expected a Tensor, found {type(x).__name__}")
        if op is ReduceOp.MEAN and not x.dtype.is_floating_point:
            raise DTypeError(f"{name}: mean needs a floating point tensor, found {x.dtype}")
        if op is ReduceOp.SUM and x.dtype.is_bool:
            raise DTypeError(
                f"{name}: sum of a bool tensor; use max (logical or) or min (logical and)"
            )
        if x.device.kind != self.device_kind:
            raise DistributedError(
                f"{name}: the {self.backend} communicator works on {self.device_kind} tensors, "
                f"found one on {x.device}"
            )
        return x.detach().contiguous()

    def _check_out(self, out: Tensor, x: Tensor, name: str) -> None:
        if not isinstance(out, Tensor) or not isinstance(x, Tensor):
            raise DistributedError(f"{name}: x and out must be Tensors")
        if out.shape != x.shape or out.dtype is not x.dtype or out.device != x.device:
            raise DistributedError(
                f"{name}: out must match x: found {out.dtype}{list(out.shape)} on {out.device} "
                f"for x {x.dtype}{list(x.shape)} on {x.device}"
            )
        if not out.is_contiguous:
            raise DistributedError(f"{name}: out must be contiguous")

    @staticmethod
    def _bump(out: Tensor) -> Tensor:
        # Written behind the op layer's back: tensors saved for a backward see the change.
        out._storage.version += 1
        return out

    def _mean(self, y: Tensor) -> Tensor:
        return y / self.world_size

    def _mean_into(self, y: Tensor) -> Tensor:
        with no_grad():
            return y.div_(self.world_size)

    def _peer(self, rank: int, what: str) -> int:
        if not 0 <= int(rank) < self.world_size:
            raise DistributedError(
                f"{what} {rank} is not a rank of this communicator (world size {self.world_size})"
            )
        return int(rank)

    @staticmethod
    def _finish(work: Work, async_op: bool):
        return work if async_op else work.wait()


def same_memory(a: Tensor, b: Tensor) -> bool:
    """Whether two contiguous tensors are the same memory (an in-place ``out``)."""
    return a._storage is b._storage and a.offset == b.offset


def _dim(dim: int, x: Tensor, name: str) -> int:
    if not -x.ndim <= dim < max(x.ndim, 1):
        raise ShapeError(f"{name}: dim {dim} is out of range for shape {x.shape}")
    if not x.ndim:
        raise ShapeError(f"{name}: needs a tensor with at least one dim, found a 0-d tensor")
    return dim % x.ndim
