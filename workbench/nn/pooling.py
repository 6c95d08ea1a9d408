"""Pooling and resizing layers over the core's pool ops (PyTorch's arguments).

x: (N, C, L) for the 1-d layers, (N, C, H, W) for the 2-d ones, (N, C, D, H, W) for the 3-d.
"""

from __future__ import annotations

from ..ops import pool
from ..tensor import Tensor
from .module import Module


class _MaxPoolNd(Module):
    _fn = staticmethod(pool.max_pool2d)

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        dilation=1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x: Tensor):
        """The pooled x, and the int64 argmax indices when ``return_indices``."""
        return self._fn(x, self.kernel_size, self.stride, self.padding, self.dilation,
                        self.ceil_mode, self.return_indices)  # fmt: skip

    def extra_repr(self) -> str:
        stride = self.kernel_size if self.stride is None else self.stride
        return (
            f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    _fn = staticmethod(pool.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    _fn = staticmethod(pool.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    _fn = staticmethod(pool.max_pool3d)


class _AvgPoolNd(Module):
    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        stride = self.kernel_size if self.stride is None else self.stride
        return f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True
    ):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def forward(self, x: Tensor) -> Tensor:
        return pool.avg_pool1d(
            x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad
        )


class AvgPool2d(_AvgPoolNd):
    def forward(self, x: Tensor) -> Tensor:
        return pool.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                               self.count_include_pad, self.divisor_override)  # fmt: skip


class AvgPool3d(_AvgPoolNd):
    def forward(self, x: Tensor) -> Tensor:
        return pool.avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                               self.count_include_pad, self.divisor_override)  # fmt: skip


class _AdaptiveAvgPoolNd(Module):
    _fn = staticmethod(pool.adaptive_avg_pool2d)

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return self._fn(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    _fn = staticmethod(pool.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    _fn = staticmethod(pool.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    _fn = staticmethod(pool.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    _fn = staticmethod(pool.adaptive_max_pool2d)

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor):
        """The pooled x, and the int64 argmax indices when ``return_indices``."""
        return self._fn(x, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    _fn = staticmethod(pool.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    _fn = staticmethod(pool.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    _fn = staticmethod(pool.adaptive_max_pool3d)


class Upsample(Module):
    """Resize by ``size`` or ``scale_factor``; ``mode`` as ``interpolate``'s ("nearest",
    "linear", "bilinear", "trilinear", "bicubic", "nearest-exact", "area")."""

    def __init__(
        self, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None
    ):
        super().__init__()
        self.size, self.scale_factor = size, scale_factor
        self.mode, self.align_corners = mode, align_corners

    def forward(self, x: Tensor) -> Tensor:
        return pool.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"
