"""In-process communicators: threads as ranks, for unit tests and notebooks.

    results = run_threads(2, lambda comm: comm.all_reduce(wb.ones(3)).numpy())

``FakeWorld(n)`` holds ``n`` communicators that meet at a barrier for each collective; each
rank combines the posted values itself, in rank order, so every rank gets the same bits. A
rank that stops calling (an exception, an early return) breaks the barrier: the others raise
``CommunicatorTimeout`` after ``timeout`` seconds, or at once when the rank failed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import Tensor
from ._host import as_tensor, host_array, narrow_back, widen
from .communicator import Communicator, ReduceOp, Work
from .errors import CommunicatorTimeout, DistributedError

_COMBINE = {ReduceOp.SUM: np.add, ReduceOp.MAX: np.maximum, ReduceOp.MIN: np.minimum}


class FakeWorld:
    """``world_size`` in-process ranks sharing one set of slots."""

    def __init__(self, world_size: int, timeout: float = 60.0):
        if world_size < 1:
            raise DistributedError(f"FakeWorld: world_size must be >= 1, found {world_size}")
        self.world_size = world_size
        self.timeout = timeout
        self._barrier = threading.Barrier(world_size, timeout=timeout)
        self._slots: list[Any] = [None] * world_size
        self._mail = {(s, d): queue.Queue() for s in range(world_size) for d in range(world_size)}
        self.communicators = [FakeCommunicator(self, r) for r in range(world_size)]

    def abort(self) -> None:
        """Wake every rank waiting in a collective with an error (a rank failed)."""
        self._barrier.abort()

    def _meet(self, rank: int, name: str) -> None:
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise CommunicatorTimeout(
                f"{name} on rank {rank}: another rank did not join within {self.timeout} s "
                "(it exited, failed or called a different collective)"
            ) from None

    def _exchange(self, rank: int, value: Any, name: str) -> list[Any]:
        """Post ``value``; return every rank's post (after all have posted)."""
        self._slots[rank] = value
        self._meet(rank, name)
        posts = list(self._slots)
        self._meet(rank, name)  # nobody posts the next value before all have read this one
        return posts


class FakeCommunicator(Communicator):
    """One rank of a :class:`FakeWorld` (CPU tensors)."""

    backend = "fake"

    def __init__(self, world: FakeWorld, rank: int):
        self.world = world
        self.rank = rank
        self.world_size = world.world_size
        self.local_rank = rank

    def _reduce(self, x: Tensor, op: ReduceOp, name: str) -> np.ndarray:
        posts = self.world._exchange(self.rank, host_array(widen(x)).copy(), name)
        out = posts[0].copy()
        for other in posts[1:]:
            _COMBINE[op](out, other, out=out)
        return out

    def _all_reduce(self, x, op, async_op, out):
        y = narrow_back(as_tensor(self._reduce(x, op, "all_reduce"), x.shape), x.dtype)
        if out is not None:
            host_array(out)[...] = host_array(y)
            y = out
        return Work.completed(y)

    def _reduce_scatter(self, x, op):
        k = x.numel // self.world_size
        full = self._reduce(x, op, "reduce_scatter")
        y = as_tensor(full[self.rank * k : (self.rank + 1) * k].copy(), (k,))
        return Work.completed(narrow_back(y, x.dtype))

    def _all_gather(self, x):
        posts = self.world._exchange(self.rank, host_array(x).copy(), "all_gather")
        shapes = {p.size for p in posts}
        if len(shapes) != 1:
            raise DistributedError(f"all_gather: the ranks' tensors differ in size: {shapes}")
        shape = (x.shape[0] * self.world_size, *x.shape[1:])
        return Work.completed(as_tensor(np.concatenate(posts), shape))

    def _broadcast(self, x, root):
        posts = self.world._exchange(self.rank, host_array(x).copy(), "broadcast")
        return Work.completed(as_tensor(posts[root].copy(), x.shape))

    def _barrier(self):
        self.world._meet(self.rank, "barrier")

    def _send(self, x, dst):
        self.world._mail[(self.rank, dst)].put(host_array(x).copy())

    def _recv(self, out, src):
        try:
            data = self.world._mail[(src, self.rank)].get(timeout=self.world.timeout)
        except queue.Empty:
            raise CommunicatorTimeout(
                f"recv on rank {self.rank}: nothing from rank {src} within {self.world.timeout} s"
            ) from None
        target = host_array(out)
        if data.size != target.size:
            raise DistributedError(
                f"recv on rank {self.rank}: rank {src} sent {data.size} elements, expected "
                f"{target.size} (shape {out.shape})"
            )
        target[...] = data


def run_threads(
    world_size: int, fn: Callable[[FakeCommunicator], Any], timeout: float = 60.0
) -> list[Any]:
    """Run ``fn(comm)`` on ``world_size`` thread ranks; return their results in rank order.

    An exception on any rank aborts the others' collectives and is raised here (the first
    failing rank's, naming it).
    """
    world = FakeWorld(world_size, timeout)
    results: list[Any] = [None] * world_size
    errors: list[tuple[int, BaseException]] = []

    def main(rank: int) -> None:
        try:
            results[rank] = fn(world.communicators[rank])
        except BaseException as e:  # noqa: BLE001  (re-raised in the caller's thread)
            errors.append((rank, e))
            world.abort()

    threads = [threading.Thread(target=main, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        # The root cause, not the others' "a rank did not join" that it triggered.
        rank, err = next(
            ((r, e) for r, e in errors if not isinstance(e, CommunicatorTimeout)), errors[0]
        )
        raise DistributedError(f"rank {rank} of {world_size} failed: {err!r}") from err
    return results
