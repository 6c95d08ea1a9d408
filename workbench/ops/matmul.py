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
        ga = _product_like(a2, g, b2.transpose(-1, -2)) if a2.requires_grad else None
        gb = _product_like(b2, a2.transpose(-1, -2), g) if b2.requires_grad else None
        return ga, gb

    if a.ndim == 1 or b.ndim == 1:
        out2 = record(out, "matmul", (a2, b2), backward, saved=(a2, b2))
        if a.ndim == 1:
            out2 = out2.squeeze(-2)
        if b.ndim == 1:
            out2 = out2.squeeze(-1)
        return out2
    return record(out, "matmul", (a2, b2), backward, saved=(a2, b2))


def _transposed_matrix(t: Tensor) -> bool:
    """Whether ``t`` is the transpose of a contiguous matrix (``W.t()`` of a linear layer)."""
    layout = t._layout
    return t.ndim == 2 and not layout.is_contiguous and layout.permute((1, 0)).is_contiguous


def _product_like(x: Tensor, left: Tensor, right: Tensor) -> Tensor:
    """The gradient of operand ``x``, ``left @ right`` summed to x's shape. Where x is a
    transposed contiguous matrix it is computed as (rightᵀ @ leftᵀ)ᵀ, in x's layout, so the
    gradient that reaches the matrix itself (a linear layer's weight) is contiguous, as the
    optimizers' fused steps need, with no copy."""
    if _transposed_matrix(x) and left.ndim == 2 and right.ndim == 2:
        return (right.transpose(0, 1) @ left.transpose(0, 1)).transpose(0, 1)
    return sum_to_shape(left @ right, x.shape)


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
