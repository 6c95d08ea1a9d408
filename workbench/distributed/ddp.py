"""``DistributedDataParallel``: the same model on every rank, gradients averaged in buckets.

    model = DistributedDataParallel(MLP(), comm)      # rank 0's weights are broadcast
    for xb, yb in DistributedBatcher(x, y, batch_size=32, comm=comm):
        loss = loss_fn(model(xb), yb)
        opt.backward_step(loss)                       # or loss.backward(); opt.step()

Each rank runs forward and backward on its part of the batch. The parameters are grouped, in
reverse order (the order backward produces their gradients), into buckets of about
``bucket_cap_mb``. During backward, as soon as every gradient of a bucket is complete, the
bucket is flattened and its mean over the ranks starts as an asynchronous all-reduce while the
rest of the graph runs; at the end of backward every bucket is waited for and the averaged
gradients replace the local ones in ``param.grad`` and in the ``GradStore``. With the loss a
mean over equal-sized local batches, that is the gradient of one process on the concatenated
batch. Buckets start in the same order on every rank (a bucket waits for the ones before it),
as the collectives' ordering rule requires.

A parameter that gets no gradient on a rank in a pass counts as zeros there; a pass that
touches none of the model's parameters is left alone. ``with model.no_sync():`` accumulates
local gradients without communicating (gradient accumulation); the next synced pass averages
the sum.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

from ..autograd import BACKWARD_HOOKS, GradStore, no_grad
from ..nn.module import Module
from ..ops.creation import zeros
from ..ops.shape import cat
from ..tensor import Tensor, Var
from .communicator import Communicator, Work
from .world import get_communicator


class _Hook:
    """The autograd hook of one wrapper, holding it weakly: the global list must not keep
    every wrapped model alive. Once the wrapper is gone the hook does nothing; the wrapper's
    finalizer unregisters it (outside any backward pass that iterates the list)."""

    __slots__ = ("ref", "__weakref__")

    def __init__(self, ddp: DistributedDataParallel):
        self.ref = weakref.ref(ddp)

    def leaf(self, tensor: Tensor, grad: Tensor, store: GradStore) -> None:
        ddp = self.ref()
        if ddp is not None:
            ddp._leaf(tensor, grad, store)

    def finish(self, store: GradStore) -> None:
        ddp = self.ref()
        if ddp is not None:
            ddp._finish(store)


def _unregister(hook: _Hook) -> None:
    if hook in BACKWARD_HOOKS:
        BACKWARD_HOOKS.remove(hook)


class _Bucket:
    __slots__ = ("params", "sizes")

    def __init__(self, params: list[Var]):
        self.params = params
        self.sizes = [p.numel for p in params]


class _Pass:
    """What one backward pass has produced so far."""

    def __init__(self, n_buckets: int):
        self.grads: dict[int, Tensor] = {}  # id(param) -> this pass's local gradient
        self.previous: dict[int, Tensor | None] = {}  # id(param) -> .grad before the pass
        self.works: list[Work | None] = [None] * n_buckets
        self.next_bucket = 0


class DistributedDataParallel(Module):
    """Wrap ``module`` so its gradients are averaged over ``comm``'s ranks during backward.

    The wrapped model is ``.module`` (so ``state_dict`` names start with ``module.``, as in
    PyTorch); calling the wrapper calls it. ``broadcast_parameters`` copies rank 0's
    parameters and buffers to every rank first, so all ranks start equal.
    """

    def __init__(
        self,
        module: Module,
        comm: Communicator | None = None,
        bucket_cap_mb: float = 25.0,
        broadcast_parameters: bool = True,
    ):
        super().__init__()
        self.module = module
        self.comm = comm or get_communicator()
        params = [p for p in module.parameters() if isinstance(p, Var) and p.requires_grad]
        self._bucket_of: dict[int, int] = {}
        self.buckets = self._make_buckets(params, bucket_cap_mb * 2**20)
        self._passes: dict[int, _Pass] = {}  # by id of the pass's GradStore
        self._sync = True
        if broadcast_parameters:
            self.broadcast_parameters()
        self._hook = _Hook(self)
        BACKWARD_HOOKS.append(self._hook)
        weakref.finalize(self, _unregister, self._hook)

    def _make_buckets(self, params: list[Var], cap_bytes: float) -> list[_Bucket]:
        buckets: list[_Bucket] = []
        current: list[Var] = []
        size = 0
        for p in reversed(params):
            if current and (size + p.nbytes > cap_bytes or p.dtype is not current[0].dtype
                            or p.device != current[0].device):  # fmt: skip
                buckets.append(_Bucket(current))
                current, size = [], 0
            current.append(p)
            size += p.nbytes
        if current:
            buckets.append(_Bucket(current))
        for i, bucket in enumerate(buckets):
            for p in bucket.params:
                self._bucket_of[id(p)] = i
        return buckets

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def broadcast_parameters(self, root: int = 0) -> None:
        """Overwrite every parameter and buffer with rank ``root``'s values."""
        with no_grad():
            for t in [*self.module.parameters(), *self.module.buffers()]:
                t.copy_(self.comm.broadcast(t, root))

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside accumulate local gradients without communicating."""
        self._sync = False
        try:
            yield
        finally:
            self._sync = True

    def close(self) -> None:
        """Stop observing backward passes (the wrapper no longer averages gradients)."""
        _unregister(self._hook)

    # -- backward hooks (workbench.autograd.BACKWARD_HOOKS) -----------------------------
    def _leaf(self, tensor: Tensor, grad: Tensor, store: GradStore) -> None:
        index = self._bucket_of.get(id(tensor))
        if index is None or not self._sync:
            return
        state = self._passes.get(id(store))
        if state is None:
            state = self._passes[id(store)] = _Pass(len(self.buckets))
        state.grads[id(tensor)] = grad
        state.previous[id(tensor)] = tensor.grad
        self._start_ready(state)

    def _start_ready(self, state: _Pass, flush: bool = False) -> None:
        """Start the next buckets in order while they are complete (all of them: ``flush``)."""
        while state.next_bucket < len(self.buckets):
            bucket = self.buckets[state.next_bucket]
            if not flush and any(id(p) not in state.grads for p in bucket.params):
                return
            flat = cat([self._local(state, p).reshape(-1) for p in bucket.params])
            state.works[state.next_bucket] = self.comm.all_reduce(flat, "mean", async_op=True)
            state.next_bucket += 1

    @staticmethod
    def _local(state: _Pass, p: Var) -> Tensor:
        g = state.grads.get(id(p))
        if g is None:  # no gradient on this rank in this pass: it contributes zeros
            state.previous[id(p)] = p.grad
            g = zeros(*p.shape, dtype=p.dtype, device=p.device)
        return g

    def _finish(self, store: GradStore) -> None:
        state = self._passes.pop(id(store), None)
        if state is None:
            return
        with no_grad():
            self._start_ready(state, flush=True)
            for bucket, work in zip(self.buckets, state.works, strict=True):
                flat = work.wait()
                offset = 0
                for p, n in zip(bucket.params, bucket.sizes, strict=True):
                    g = flat.narrow(0, offset, n).reshape(*p.shape)
                    offset += n
                    prev = state.previous.get(id(p))
                    store.insert(p, g)
                    p.grad = g if prev is None else prev + g

    def extra_repr(self) -> str:
        return (
            f"{self.comm.backend}, rank {self.comm.rank} of {self.comm.world_size}, "
            f"{len(self.buckets)} buckets"
        )
