"""Convolutions: ``Conv1d``/``2d``/``3d`` and ``ConvTranspose1d``/``2d``/``3d``.

Weights as PyTorch (and candle): conv (out, in / groups, *kernel), transposed conv
(in, out / groups, *kernel); bias (out,). Default init as PyTorch: weight
U(-1/√fan_in, 1/√fan_in) (kaiming_uniform with a = √5), bias U(-1/√fan_in, 1/√fan_in), where
fan_in = weight.shape[1] · prod(kernel).

Shapes (2d; 1d drops H, 3d adds D before H): x (N, C_in, H, W) -> (N, C_out, H_out, W_out) with
H_out = ⌊(H + 2p - d (k - 1) - 1) / s⌋ + 1 for a conv and
H_out = (H - 1) s - 2p + d (k - 1) + output_padding + 1 for a transposed conv.
``padding`` may be "same" or "valid"; ``padding_mode`` "zeros", "reflect", "replicate" or
"circular" pads the input with ``pad`` first, as PyTorch (transposed convs: zeros only).
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..ops import conv as conv_ops
from ..ops import pool as pool_ops
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


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    _dims = 2
    _transposed = False
    weight: Tensor
    bias: Tensor | None

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
        padding_mode: str = "zeros",
        *,
        output_padding=0,
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
        if padding_mode not in _PADDING_MODES or (self._transposed and padding_mode != "zeros"):
            modes = ("zeros",) if self._transposed else _PADDING_MODES
            raise ShapeError(f"{name}: padding_mode must be one of {modes}, found {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, n, f"{name} kernel_size")
        self.stride = _tuple(stride, n, f"{name} stride")
        if isinstance(padding, str):
            if padding not in ("same", "valid") or self._transposed:
                raise ShapeError(f"{name}: padding must be ints, 'same' or 'valid', found "
                                 f"{padding!r}")  # fmt: skip
            self.padding = padding
        else:
            self.padding = _tuple(padding, n, f"{name} padding")
        self.dilation = _tuple(dilation, n, f"{name} dilation")
        self.output_padding = _tuple(output_padding, n, f"{name} output_padding")
        self.padding_mode = padding_mode
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

    def _input_pads(self) -> tuple[int, ...]:
        """``pad``'s amounts (last dim first) that ``padding`` means: "same" puts an odd
        total pad's extra element after, as PyTorch."""
        if self.padding == "valid":
            return (0,) * (2 * self._dims)
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size, strict=True)]
            pairs = [(t // 2, t - t // 2) for t in totals]
        else:
            pairs = [(p, p) for p in self.padding]
        return tuple(v for pair in reversed(pairs) for v in pair)

    def forward(self, x: Tensor) -> Tensor:
        """x (N, C_in, *spatial) -> (N, C_out, *spatial_out)."""
        fn = (conv_ops.conv1d, conv_ops.conv2d, conv_ops.conv3d)[self._dims - 1]
        if self.padding_mode == "zeros":
            padding = self.padding
        else:
            x = pool_ops.pad(x, self._input_pads(), self.padding_mode)
            padding = 0
        return fn(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if isinstance(self.padding, str) or any(self.padding):
            s += f", padding={self.padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if any(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s + ("" if self.bias is not None else ", bias=False")


class Conv1d(_ConvNd):
    """x (N, C_in, L) -> (N, C_out, L_out); weight (C_out, C_in / groups, k)."""

    _dims = 1


class Conv2d(_ConvNd):
    """x (N, C_in, H, W) -> (N, C_out, H_out, W_out); weight (C_out, C_in / groups, kh, kw)."""

    _dims = 2


class Conv3d(_ConvNd):
    """x (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out); weight
    (C_out, C_in / groups, kd, kh, kw)."""

    _dims = 3


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
        padding_mode="zeros",
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
            padding_mode,
            output_padding=output_padding,
            vb=vb,
            dtype=dtype,
            device=device,
        )

    def forward(self, x: Tensor) -> Tensor:
        """x (N, C_in, *spatial) -> (N, C_out, *spatial_out)."""
        fn = (conv_ops.conv_transpose1d, conv_ops.conv_transpose2d, conv_ops.conv_transpose3d)
        return fn[self._dims - 1](
            x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
            self.groups, self.dilation,
        )  # fmt: skip


class ConvTranspose1d(_ConvTransposeNd):
    """x (N, C_in, L) -> (N, C_out, L_out); weight (C_in, C_out / groups, k)."""

    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """x (N, C_in, H, W) -> (N, C_out, H_out, W_out); weight (C_in, C_out / groups, kh, kw)."""

    _dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    """x (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out); weight
    (C_in, C_out / groups, kd, kh, kw)."""

    _dims = 3
