"""Training-mode batch norm as one backend call each way, where the device has the kernels.

``nn.functional.batch_norm`` uses it when ``has_batch_norm(x)``; other devices build the same
maths from ordinary ops. x (N, C, *) is seen as (N, C, S); the per-channel statistics come back
with y and are reused by the backward (one ``batch_norm_backward`` call for dL/dx, dL/dw, dL/db).
"""

from __future__ import annotations

import math

from .. import dtype as dt
from .._oprecord import op
from ..autograd import record
from ..backends.base import supports
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from ._helpers import cast, describe, new, same_device
from .shape import contiguous


def has_batch_norm(x: Tensor) -> bool:
    """Whether x's device has the fused training-mode batch norm kernels."""
    return supports(x._storage, "batch_norm") and supports(x._storage, "batch_norm_backward")


def _as_shape(t: Tensor, shape: tuple[int, ...]):
    """``t`` and a layout of it with ``shape`` (``t`` copied first if it must be)."""
    layout = t._layout.reshape(shape)
    if layout is None:
        t = contiguous(t)
        layout = t._layout.reshape(shape)
    return t, layout


def _channel_operand(what: str, t: Tensor | None, x: Tensor, c: int):
    """weight or bias: None, or (C,) cast to x's dtype, with its layout."""
    if t is None:
        return None, None
    same_device("batch_norm", x, t)
    if not t.dtype.is_floating_point or t.shape != (c,):
        raise ShapeError(f"batch_norm: {what} must be a float ({c},), found {describe(t)}")
    return _as_shape(cast(t, x.dtype), (c,))


@op
def batch_norm_training(
    x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> tuple[Tensor, Tensor, Tensor]:
    """x (N, C, *) -> (y, mean (C,), rstd (C,)): per channel over N and ``*``,
    y = (x - μ) / √(σ² + ε) · weight + bias with the biased batch variance σ².
    mean and rstd are in f32 for f16/bf16 and carry no gradient."""
    if not x.dtype.is_floating_point:
        raise DTypeError(f"batch_norm: expected a floating point tensor, found {describe(x)}")
    n, c = x.shape[:2]
    shape = (n, c, math.prod(x.shape[2:]))
    x3, layout = _as_shape(x, shape)
    w, w_layout = _channel_operand("weight", weight, x, c)
    b, b_layout = _channel_operand("bias", bias, x, c)
    out_s, mean_s, rstd_s = x3._storage.batch_norm(
        layout,
        None if w is None else w._storage,
        w_layout,
        None if b is None else b._storage,
        b_layout,
        float(eps),
    )
    cdt = dt.f32 if x.dtype.itemsize < 4 else x.dtype
    y = new(out_s, x.shape, x.dtype, x.device)
    mean = new(mean_s, (c,), cdt, x.device)
    rstd = new(rstd_s, (c,), cdt, x.device)

    def backward(g: Tensor):
        g3, g_layout = _as_shape(cast(g, x.dtype), shape)
        gx_s, gw_s, gb_s = x3._storage.batch_norm_backward(
            layout,
            g3._storage,
            g_layout,
            None if w is None else w._storage,
            w_layout,
            mean_s,
            rstd_s,
            x.requires_grad,
        )
        gx = None if gx_s is None else new(gx_s, x.shape, x.dtype, x.device)
        gw = gb = None
        if weight is not None and weight.requires_grad:
            gw = cast(new(gw_s, (c,), cdt, x.device), weight.dtype)
        if bias is not None and bias.requires_grad:
            gb = cast(new(gb_s, (c,), cdt, x.device), bias.dtype)
        return gx, gw, gb

    saved = (x,) if weight is None else (x, weight)
    return record(y, "batch_norm", (x, weight, bias), backward, saved=saved), mean, rstd
