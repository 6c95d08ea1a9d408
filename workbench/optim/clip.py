"""Gradient clipping, on ``param.grad`` or on a ``GradStore``.

clip_grad_norm_: with ‖g‖ the ``norm_type``-norm of all gradients together, every gradient
is scaled by min(1, max_norm / (‖g‖ + 1e-6)) (as PyTorch). The gradients are replaced by
scaled copies, never written in place: autograd may hand one gradient tensor to several
parameters, or a broadcast view.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..autograd import GradStore, no_grad
from ..errors import WorkbenchError
from ..ops.creation import tensor
from ..ops.shape import stack
from ..tensor import Tensor
from .optimizer import _params_of


def _grads(params: list[Tensor], grads: GradStore | None) -> list[tuple[Tensor, Tensor]]:
    pairs = []
    for p in params:
        g = p.grad if grads is None else grads.get(p)
        if g is not None:
            pairs.append((p, g))
    return pairs


def _replace(p: Tensor, g: Tensor, grads: GradStore | None) -> None:
    if grads is None:
        p.grad = g
    else:
        grads.insert(p, g)
        if p.grad is not None:
            p.grad = g


def clip_grad_norm_(
    parameters: Iterable[Tensor] | Tensor,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    grads: GradStore | None = None,
) -> Tensor:
    """Scale the gradients so that their total norm is at most ``max_norm``; returns the total
    norm before clipping (a 0-d tensor)."""
    params = _params_of(parameters)
    with no_grad():
        pairs = _grads(params, grads)
        if not pairs:
            return tensor(0.0)
        norm_type = float(norm_type)
        norms = [g.detach().to_dtype("f32").norm(norm_type) for _, g in pairs]
        device = pairs[0][1].device
        norms = [n.to(device) for n in norms]
        total = stack(norms).norm(norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise WorkbenchError(
                f"clip_grad_norm_: the total {norm_type}-norm of the gradients is not finite"
            )
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for p, g in pairs:
            _replace(p, g * coef.to_dtype(g.dtype), grads)
    return total


def clip_grad_value_(
    parameters: Iterable[Tensor] | Tensor, clip_value: float, grads: GradStore | None = None
) -> None:
    """Clamp every gradient element to [-clip_value, clip_value]."""
    params = _params_of(parameters)
    with no_grad():
        for p, g in _grads(params, grads):
            _replace(p, g.clamp(-clip_value, clip_value), grads)
