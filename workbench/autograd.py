"""Reverse-mode autograd, read like the chain rule.

Each op that sees an input requiring a gradient attaches a ``Node`` to its output: the inputs
and a ``backward(grad_out) -> grads`` closure built from ordinary ops. ``backward()`` sorts the
graph topologically and sums every path's contribution (a tensor used twice gets both).
Tensors a backward closure reads are saved with their storage's version, so a value that was
overwritten in place afterwards raises instead of giving a wrong gradient.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

from .errors import AutogradError

if TYPE_CHECKING:
    from .tensor import Tensor


# Per thread and per asyncio task, like PyTorch's thread-local grad mode: a thread starts with
# grad enabled whatever other threads do, and a task inherits its creator's mode.
GRAD_ENABLED: ContextVar[bool] = ContextVar("workbench_grad_enabled", default=True)


class no_grad:
    """Context manager (and decorator) that records no graph: ``with wb.no_grad(): ...``.

    The mode is per thread and per asyncio task (a ``ContextVar``): one thread's ``no_grad``
    never turns off another's graph."""

    _target = False

    def __init__(self) -> None:
        self._tokens: list[Token[bool]] = []

    def __enter__(self) -> None:
        self._tokens.append(GRAD_ENABLED.set(self._target))

    def __exit__(self, *exc: object) -> None:
        GRAD_ENABLED.reset(self._tokens.pop())

    def __call__(self, fn: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        wrapper.__name__ = getattr(fn, "__name__", "wrapper")
        wrapper.__doc__ = fn.__doc__
        return wrapper


class enable_grad(no_grad):
    """Re-enable graph recording inside a ``no_grad`` block."""

    _target = True


def is_grad_enabled() -> bool:
    """Whether ops record a graph in this thread / asyncio task."""
    return GRAD_ENABLED.get()


class Node:
    """How an op's output depends on its inputs."""

    __slots__ = ("name", "inputs", "backward", "saved")

    def __init__(
        self,
        name: str,
        inputs: tuple[Tensor, ...],
        backward: Callable,
        saved: tuple[Tensor, ...] = (),
    ):
        self.name = name
        self.inputs = inputs
        self.backward = backward
        # Storages, not tensors: a node holding its own output would make a reference cycle
        # and keep the graph alive until the cycle collector runs.
        # (plain loops: generator expressions cost more than the work on two-input ops)
        self.saved = (
            tuple([(t._storage, t._storage.version, t.shape) for t in saved]) if saved else ()
        )

    def check_saved(self) -> None:
        for storage, version, shape in self.saved:
            if storage.version != version:
                raise AutogradError(
                    f"a tensor of shape {shape} saved for the gradient of {self.name} was "
                    "modified in place after it was used; clone() it before modifying it"
                )


def record(out: Tensor, name: str, inputs: tuple, backward: Callable, saved: tuple = ()) -> Tensor:
    """Attach a Node to ``out`` when grad mode is on and an input requires a gradient.

    A ``backward`` that needs the output's values must capture ``out.detach()`` (same memory,
    no node), not ``out`` itself: that would be a reference cycle out -> node -> closure -> out.
    """
    if GRAD_ENABLED.get():
        tracked = []
        needed = False
        for t in inputs:
            if t is not None and t.requires_grad:
                tracked.append(t)
                needed = True
            else:
                tracked.append(None)
        if needed:
            out._node = Node(name, tuple(tracked), backward, saved)
            out.requires_grad = True
    return out


class GradStore:
    """Gradients by tensor, as returned by ``loss.backward()``: ``grads[w]``, ``grads.get(w)``."""

    def __init__(self) -> None:
        self._grads: dict[int, tuple[Tensor, Tensor]] = {}

    def get(self, tensor: Tensor) -> Tensor | None:
        entry = self._grads.get(id(tensor))
        return None if entry is None else entry[1]

    def __getitem__(self, tensor: Tensor) -> Tensor:
        grad = self.get(tensor)
        if grad is None:
            raise KeyError(f"no gradient for tensor of shape {tensor.shape}")
        return grad

    def __contains__(self, tensor: Tensor) -> bool:
        return id(tensor) in self._grads

    def insert(self, tensor: Tensor, grad: Tensor) -> None:
        self._grads[id(tensor)] = (tensor, grad)

    def remove(self, tensor: Tensor) -> Tensor | None:
        entry = self._grads.pop(id(tensor), None)
        return None if entry is None else entry[1]

    def items(self) -> Iterator[tuple[Tensor, Tensor]]:
        return iter(list(self._grads.values()))

    def __len__(self) -> int:
        return len(self._grads)

    def __repr__(self) -> str:
        return f"GradStore({len(self)} tensors)"


# Observers of every backward pass (DistributedDataParallel): ``hook.leaf(tensor, grad, store)``
# as soon as a leaf's gradient from this pass is complete (before it is stored), so its
# all-reduce can start while the rest of the graph runs; ``hook.finish(store)`` at the end.
BACKWARD_HOOKS: list = []


def _topological_order(root: Tensor) -> list[Tensor]:
    """Tensors reachable from ``root`` through nodes, each after every tensor it feeds."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        tensor, expanded = stack.pop()
        if expanded:
            order.append(tensor)
            continue
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        stack.append((tensor, True))
        node = tensor._node
        if node is not None:
            stack.extend((t, False) for t in node.inputs if t is not None and id(t) not in seen)
    order.reverse()
    return order


def backward(root: Tensor, grad: Tensor | None = None, *, into_leaves: bool = True) -> GradStore:
    """Gradients of ``root`` with respect to every tensor it depends on.

    Leaves (tensors without a node that require a gradient) also get ``.grad`` accumulated,
    as in PyTorch, and the ``BACKWARD_HOOKS`` see them. ``into_leaves=False`` only returns
    the store (a nested pass, e.g. a checkpointed block's recomputation inside its node).
    """
    from .ops.creation import ones_like

    if not root.requires_grad:
        raise AutogradError("backward() on a tensor that does not require grad (no graph)")
    if grad is None:
        if root.numel != 1:
            raise AutogradError(
                f"backward() needs a gradient for a non-scalar tensor of shape {root.shape}"
            )
        grad = ones_like(root)
    store = GradStore()
    pending: dict[int, Tensor] = {id(root): grad}
    with no_grad():
        for tensor in _topological_order(root):
            g = pending.pop(id(tensor), None)
            if g is None:
                continue
            node = tensor._node
            if node is None:
                if into_leaves:
                    for hook in BACKWARD_HOOKS:
                        hook.leaf(tensor, g, store)
                store.insert(tensor, g)
                if into_leaves:
                    tensor.grad = g if tensor.grad is None else tensor.grad + g
                continue
            store.insert(tensor, g)
            node.check_saved()
            grads = node.backward(g)
            for inp, gi in zip(node.inputs, grads, strict=True):
                if inp is None or gi is None:
                    continue
                if gi.shape != inp.shape:
                    raise AutogradError(
                        f"internal: gradient of {node.name} has shape {gi.shape}, "
                        f"input has {inp.shape}"
                    )
                prev = pending.get(id(inp))
                pending[id(inp)] = gi if prev is None else prev + gi
    if into_leaves:
        for hook in BACKWARD_HOOKS:
            hook.finish(store)
    return store
