"""Matrix products."""

from __future__ import annotations

import numpy as np

from .._oprecord import op
from ..autograd import record
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from ._helpers import broadcast_shapes, describe, new, promote, sum_to_shape


@op
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` as PyTorch: 1-d operands are promoted to matrices and the added dim removed
    again; leading (batch) dims broadcast.

    Shapes: (..., m, k) @ (..., k, n) -> (..., m, n).
    """
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        a, b = _tensor_operands(a, b)
    if a.dtype is not b.dtype or a.device is not b.device:
        a, b, _ = promote("matmul", a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"matmul: both operands need at least 1 dim: {describe(a)} @ {describe(b)}"
        )
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    m, k = a2.shape[-2:]
    k2, n = b2.shape[-2:]
    if k != k2:
        raise ShapeError(f"matmul: inner dims differ: {describe(a)} @ {describe(b)} ({k} vs {k2})")
    try:
        batch = broadcast_shapes("matmul", a2.shape[:-2], b2.shape[:-2])
    except ShapeError:
        raise ShapeError(
            f"matmul: batch dims {a2.shape[:-2]} and {b2.shape[:-2]} cannot be broadcast: "
            f"{describe(a)} @ {describe(b)}"
        ) from None
    la = a2._layout.broadcast_to((*batch, m, k))
    lb = b2._layout.broadcast_to((*batch, k, n))
    out = new(a._storage.matmul(la, b._storage, lb), (*batch, m, n), a.dtype, a.device)

    def backward(g: Tensor):
        ga = sum_to_shape(g @ b2.transpose(-1, -2), a2.shape) if a2.requires_grad else None
        gb = sum_to_shape(a2.transpose(-1, -2) @ g, b2.shape) if b2.requires_grad else None
        return ga, gb

    if a.ndim == 1 or b.ndim == 1:
        out2 = record(out, "matmul", (a2, b2), backward, saved=(a2, b2))
        if a.ndim == 1:
            out2 = out2.squeeze(-2)
        if b.ndim == 1:
            out2 = out2.squeeze(-1)
        return out2
    return record(out, "matmul", (a2, b2), backward, saved=(a2, b2))


def _tensor_operands(a, b) -> tuple[Tensor, Tensor]:
    """numpy operands (``ndarray @ tensor``) become tensors on the other operand's device."""
    from .creation import tensor

    for x in (a, b):
        if not isinstance(x, Tensor | np.ndarray):
            raise DTypeError(f"matmul: expected tensors, found {type(x).__name__}")
    device = a.device if isinstance(a, Tensor) else b.device
    return (
        a if isinstance(a, Tensor) else tensor(a, device=device),
        b if isinstance(b, Tensor) else tensor(b, device=device),
    )
