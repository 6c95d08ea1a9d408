"""Normalisation layers: ``LayerNorm``, ``RmsNorm``, ``GroupNorm``, ``BatchNorm1d/2d``.

- layer_norm: y = (x - E[x]) / √(Var[x] + ε) γ + β over the last dims (``normalized_shape``)
- rms_norm:   y = x / √(E[x²] + ε) γ over the last dims
- group_norm: layer_norm over each group of C / G channels (and the spatial dims), then a
  per-channel γ, β
- batch_norm: per channel, over the batch (and spatial) dims. Training normalises with the
  batch statistics (biased variance) and updates running_mean / running_var (unbiased) by
  ``momentum`` (r ← (1 - m) r + m s; ``momentum=None`` is the cumulative average); eval uses
  the running statistics.
"""

from __future__ import annotations

from ..autograd import no_grad
from ..errors import ShapeError
from ..ops import fused
from ..ops.creation import ones, tensor, zeros
from ..tensor import Tensor
from . import functional as F
from . import init
from ._params import make_param
from .module import Module


class LayerNorm(Module):
    """Normalise over the last ``len(normalized_shape)`` dims; γ (``weight``) and β (``bias``)
    have that shape (ones and zeros)."""

    weight: Tensor | None  # None without elementwise_affine
    bias: Tensor | None

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.normalized_shape = shape
        self.eps = eps
        w = b = None
        if elementwise_affine:
            w = make_param(vb, shape, "weight", init.ONES, dtype, device)
            if bias:
                b = make_param(vb, shape, "bias", init.ZEROS, dtype, device)
        self.register_parameter("weight", w)
        self.register_parameter("bias", b)

    def forward(self, x: Tensor) -> Tensor:
        return fused.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class RmsNorm(Module):
    """y = x / √(mean(x²) + ε) γ over the last dims; γ (``weight``) starts at ones."""

    weight: Tensor | None  # None without elementwise_affine

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-6,
        elementwise_affine: bool = True,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.normalized_shape = shape
        self.eps = eps
        w = (
            make_param(vb, shape, "weight", init.ONES, dtype, device)
            if elementwise_affine
            else None
        )
        self.register_parameter("weight", w)

    def forward(self, x: Tensor) -> Tensor:
        shape = self.normalized_shape
        if len(shape) == 1:
            return fused.rms_norm(x, self.weight, self.eps)
        k = len(shape)
        if x.shape[x.ndim - k :] != shape:
            raise ShapeError(
                f"RmsNorm{shape}: the input's trailing dims must be {shape}, found {x.shape}"
            )
        flat = x.reshape(*x.shape[: x.ndim - k], -1)
        w = None if self.weight is None else self.weight.reshape(-1)
        return fused.rms_norm(flat, w, self.eps).reshape(x.shape)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


RMSNorm = RmsNorm


class GroupNorm(Module):
    """x (N, C, *) normalised per group of C / G channels; γ, β: (C,)."""

    weight: Tensor | None  # None without affine
    bias: Tensor | None

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        if num_channels % num_groups:
            raise ShapeError(
                f"GroupNorm: num_channels={num_channels} is not divisible by "
                f"num_groups={num_groups}"
            )
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        w = b = None
        if affine:
            w = make_param(vb, (num_channels,), "weight", init.ONES, dtype, device)
            b = make_param(vb, (num_channels,), "bias", init.ZEROS, dtype, device)
        self.register_parameter("weight", w)
        self.register_parameter("bias", b)

    def forward(self, x: Tensor) -> Tensor:
        return fused.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}"


class _BatchNorm(Module):
    _ndims: tuple[int, ...] = (2, 3)
    weight: Tensor | None  # None without affine
    bias: Tensor | None

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        w = b = None
        if affine:
            w = make_param(vb, (num_features,), "weight", init.ONES, dtype, device)
            b = make_param(vb, (num_features,), "bias", init.ZEROS, dtype, device)
        self.register_parameter("weight", w)
        self.register_parameter("bias", b)
        if track_running_stats:
            if vb is not None and vb.contains("running_mean"):
                mean = vb.get((num_features,), "running_mean").detach()
                var = vb.get((num_features,), "running_var").detach()
            else:
                mean = zeros(num_features, dtype=dtype or "f32", device=device)
                var = ones(num_features, dtype=dtype or "f32", device=device)
            self.register_buffer("running_mean", mean)
            self.register_buffer("running_var", var)
            self.register_buffer("num_batches_tracked", tensor(0, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def _check(self, x: Tensor) -> None:
        if x.ndim not in self._ndims or x.shape[1] != self.num_features:
            raise ShapeError(
                f"{type(self).__name__}({self.num_features}): expected an input of "
                f"{' or '.join(map(str, self._ndims))} dims with {self.num_features} channels in "
                f"dim 1, found shape {x.shape}"
            )

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        use_batch = self.training or not self.track_running_stats
        update = self.training and self.track_running_stats
        momentum = self.momentum
        if update:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if momentum is None:  # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        return F.batch_norm(
            x,
            self.running_mean if update or not use_batch else None,
            self.running_var if update or not use_batch else None,
            self.weight,
            self.bias,
            use_batch,
            momentum or 0.0,
            self.eps,
        )

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """x (N, C) or (N, C, L); statistics per channel C."""

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """x (N, C, H, W); statistics per channel C."""

    _ndims = (4,)
