"""``Linear`` (y = x Wᵀ + b), ``Identity``, ``Flatten`` and ``Unflatten``."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from . import init
from ._params import make_param
from .module import Module


class Linear(Module):
    """y = x Wᵀ + b.

    x: (..., in_features) -> (..., out_features); ``weight``: (out_features, in_features),
    ``bias``: (out_features,). PyTorch's default init: U(-1/√in, 1/√in) for both. With
    ``vb``, the weights are ``vb.get((out, in), "weight")`` and ``vb.get((out,), "bias")``.
    """

    weight: Tensor
    bias: Tensor | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        shape = (out_features, in_features)
        self.register_parameter(
            "weight", make_param(vb, shape, "weight", init.DEFAULT_WEIGHT, dtype, device)
        )
        b = None
        if bias:
            b = make_param(
                vb, (out_features,), "bias", init.default_bias(in_features), dtype, device
            )
        self.register_parameter("bias", b)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Identity(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x


class Flatten(Module):
    """Flatten dims ``start_dim``..``end_dim`` into one: (N, C, H, W) -> (N, C·H·W)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``sizes``."""

    def __init__(self, dim: int, sizes: tuple[int, ...]):
        super().__init__()
        self.dim, self.sizes = dim, tuple(sizes)

    def forward(self, x: Tensor) -> Tensor:
        dim = self.dim % x.ndim
        return x.reshape(*x.shape[:dim], *self.sizes, *x.shape[dim + 1 :])
