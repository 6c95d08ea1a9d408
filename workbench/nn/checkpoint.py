"""Gradient checkpointing: keep a block's input, not its activations; recompute in backward.

``y = checkpoint(block, x)`` (a module, or any function of ``x`` with the ``parameters`` it
reads) runs ``block(x)`` without recording a graph, so the block's
intermediate activations are freed at once. When the gradient reaches ``y``, the block runs
again (with the random stream as it was, so dropout draws the same masks) under grad mode,
and its gradient is pulled back to ``x`` and to the block's trainable parameters:
memory O(one block) instead of O(all blocks), for about one more forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..autograd import backward, enable_grad, is_grad_enabled, no_grad, record
from ..random import default_generator
from ..tensor import Tensor
from .module import Module


def checkpoint(
    block: Module | Callable[[Tensor], Tensor],
    x: Tensor,
    parameters: Iterable[Tensor] | None = None,
) -> Tensor:
    """``block(x)``, recomputed in the backward pass instead of stored (see module docs).
    ``parameters`` defaults to the module's own."""
    if not is_grad_enabled():
        return block(x)
    if parameters is None:
        parameters = block.parameters() if isinstance(block, Module) else ()
    params = tuple(p for p in parameters if p.requires_grad)
    if not x.requires_grad and not params:
        return block(x)
    state = default_generator.rng.bit_generator.state
    with no_grad():
        y = block(x)

    def recompute(g: Tensor):
        after = default_generator.rng.bit_generator.state
        default_generator.rng.bit_generator.state = state
        try:
            with enable_grad():
                x_again = x.detach()
                x_again.requires_grad = x.requires_grad
                y_again = block(x_again)
            store = backward(y_again, g, into_leaves=False)
        finally:
            default_generator.rng.bit_generator.state = after
        gx = store.get(x_again) if x.requires_grad else None
        return (gx, *(store.get(p) for p in params))

    return record(y, "checkpoint", (x, *params), recompute)
