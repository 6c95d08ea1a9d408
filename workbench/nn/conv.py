"""Convolutions: ``Conv1d``, ``Conv2d``, ``ConvTranspose1d``, ``ConvTranspose2d``.

Weights as PyTorch (and candle): conv (out, in / groups, *kernel), transposed conv
(in, out / groups, *kernel); bias (out,). Default init as PyTorch: weight
U(-1/√fan_in, 1/√fan_in) (kaiming_uniform with a = √5), bias U(-1/√fan_in, 1/√fan_in), where
fan_in = weight.shape[1] · prod(kernel).

Shapes (2d; 1d drops H): x (N, C_in, H, W) -> (N, C_out, H_out, W_out) with
H_out = ⌊(H + 2p - d (k - 1) - 1) / s⌋ + 1 for a conv and
H_out = (H - 1) s - 2p + d (k - 1) + output_padding + 1 for a transposed conv.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..ops import conv as conv_ops
from ..tensor import Tensor
from . import init
from ._params import make_param
from .module import Module


def _tuple(value, n: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ShapeError(f"{what} needs {n} values, found {value}")
    return value


class _ConvNd(Module):
    _dims = 2
    _transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        output_padding=0,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__()
        n = self._dims
        name = type(self).__name__
        if in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"{name}: in_channels={in_channels} and out_channels={out_channels} "
                f"must be divisible by groups={groups}"
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, n, f"{name} kernel_size")
        self.stride = _tuple(stride, n, f"{name} stride")
        self.padding = _tuple(padding, n, f"{name} padding")
        self.dilation = _tuple(dilation, n, f"{name} dilation")
        self.output_padding = _tuple(output_padding, n, f"{name} output_padding")
        if self._transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        fan_in = shape[1] * math.prod(self.kernel_size)
        self.register_parameter(
            "weight", make_param(vb, shape, "weight", init.DEFAULT_WEIGHT, dtype, device)
        )
        b = None
        if bias:
            b = make_param(vb, (out_channels,), "bias", init.default_bias(fan_in), dtype, device)
        self.register_parameter("bias", b)

    def _args(self, n: int):
        one = lambda t: t[0] if n == 1 else t  # noqa: E731
        return one(self.stride), one(self.padding), one(self.dilation)

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if any(self.padding):
            s += f", padding={self.padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if any(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


class Conv1d(_ConvNd):
    """x (N, C_in, L) -> (N, C_out, L_out)."""

    _dims = 1

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            vb=vb,
            dtype=dtype,
            device=device,
        )

    def forward(self, x: Tensor) -> Tensor:
        s, p, d = self._args(1)
        return conv_ops.conv1d(x, self.weight, self.bias, s, p, d, self.groups)


class Conv2d(_ConvNd):
    """x (N, C_in, H, W) -> (N, C_out, H_out, W_out)."""

    _dims = 2

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            vb=vb,
            dtype=dtype,
            device=device,
        )

    def forward(self, x: Tensor) -> Tensor:
        s, p, d = self._args(2)
        return conv_ops.conv2d(x, self.weight, self.bias, s, p, d, self.groups)


class _ConvTransposeNd(_ConvNd):
    """PyTorch's argument order for transposed convs: output_padding before groups."""

    _transposed = True

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        *,
        vb=None,
        dtype=None,
        device=None,
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            output_padding,
            vb=vb,
            dtype=dtype,
            device=device,
        )


class ConvTranspose1d(_ConvTransposeNd):
    """x (N, C_in, L) -> (N, C_out, L_out); weight (C_in, C_out / groups, k)."""

    _dims = 1

    def forward(self, x: Tensor) -> Tensor:
        s, p, d = self._args(1)
        return conv_ops.conv_transpose1d(
            x, self.weight, self.bias, s, p, self.output_padding[0], self.groups, d
        )


class ConvTranspose2d(_ConvTransposeNd):
    """x (N, C_in, H, W) -> (N, C_out, H_out, W_out); weight (C_in, C_out / groups, kh, kw)."""

    _dims = 2

    def forward(self, x: Tensor) -> Tensor:
        s, p, d = self._args(2)
        return conv_ops.conv_transpose2d(
            x, self.weight, self.bias, s, p, self.output_padding, self.groups, d
        )
