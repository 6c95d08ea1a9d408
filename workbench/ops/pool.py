"""Pooling, upsampling and padding, with PyTorch's arguments and gradients.

Shapes: x (N, C, L), (N, C, H, W) or (N, C, D, H, W) (an unbatched (C, ...) input works too).
1-d ops run the 2-d storage methods on a unit-height view (no copy); 3-d max/avg pooling is
separable, a 2-d pool of each (H, W) plane then a (kd, 1) one along D; adaptive 3-d averages
are ``resample``'s "area" maps; adaptive max pooling gathers its windows with
``index_select`` (so every device with those ops runs them). Gradients: max pooling routes each
output gradient to the argmax kept from the forward pass; average pooling spreads it over the
window; nearest upsampling sums over each replicated block; bilinear upsampling is the
transposed interpolation; a constant pad's gradient is a narrow (a view) of the output gradient.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtype as dt
from .._oprecord import op
from ..autograd import record
from ..backends.conv_params import ConvParams
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from . import resample
from ._helpers import describe, new
from .conv import _as2d, _ints, _layout2d
from .creation import arange, tensor
from .elementwise import div, where
from .indexing import gather

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _stride(name: str, stride, kernel: tuple[int, ...]) -> tuple[int, ...]:
    """PyTorch's pooling stride: None (or empty) means the kernel size."""
    if stride is None or (not isinstance(stride, int) and len(stride) == 0):
        return kernel
    return _ints(name, "stride", stride, len(kernel), 1)


def _spatial(name: str, nd: int, x: Tensor, float_only: bool = True) -> tuple[Tensor, bool]:
    """``x`` with a batch dim (and whether one was added) after checking its rank and dtype."""
    if x.ndim not in (nd + 1, nd + 2):
        raise ShapeError(
            f"{name}: expected a {nd + 2}-d input (N, C, {('L', 'H, W', 'D, H, W')[nd - 1]}) or an "
            f"unbatched {nd + 1}-d one, found {describe(x)}"
        )
    if float_only and not x.dtype.is_floating_point:
        raise DTypeError(f"{name}: expected a floating point input, found {describe(x)}")
    if x.ndim == nd + 1:
        return x.unsqueeze(0), True
    return x, False


def _shape_nd(nd: int, lead: tuple[int, ...], size2: tuple[int, int]) -> tuple[int, ...]:
    return (*lead, *size2[2 - nd :])


def _done(out: Tensor, unbatched: bool) -> Tensor:
    return out.squeeze(0) if unbatched else out


def _pool_output(name, x, kernel, stride, padding, dilation, ceil_mode) -> tuple[int, ...]:
    """PyTorch's pooling output size; with ceil_mode the last window must start inside the
    input or its left padding."""
    if any(p > k // 2 for k, p in zip(kernel, padding, strict=True)):
        raise ShapeError(f"{name}: padding {padding} must be at most half the kernel size {kernel}")
    params = ConvParams.symmetric(stride, padding, dilation)
    sizes = params.pool_out_size(x.shape[2:], kernel, ceil_mode)
    if any(o < 1 for o in sizes):
        raise ShapeError(
            f"{name}: the window (kernel {kernel}, dilation {dilation}) is bigger than the "
            f"padded input (padding {padding}): input {describe(x)} gives output size "
            f"{tuple(sizes)}"
        )
    return tuple(sizes)


# -- max pooling -----------------------------------------------------------------------
def _no_bool(name: str, x: Tensor) -> None:
    if x.dtype.is_bool:
        raise DTypeError(f"{name}: expected a number tensor, found {describe(x)}")


def _max_pool(name, nd, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, unbatched = _spatial(name, nd, x, float_only=False)  # integers pool too, as PyTorch
    _no_bool(name, x)
    kernel = _ints(name, "kernel_size", kernel_size, nd, 1)
    stride = _stride(name, stride, kernel)
    padding = _ints(name, "padding", padding, nd, 0)
    dilation = _ints(name, "dilation", dilation, nd, 1)
    size = _pool_output(name, x, kernel, stride, padding, dilation, ceil_mode)
    size2 = _as2d(nd, size, 1)
    values, indices = x._storage.max_pool2d(
        _layout2d(nd, x),
        _as2d(nd, kernel, 1),
        _as2d(nd, stride, 1),
        _as2d(nd, padding, 0),
        _as2d(nd, dilation, 1),
        size2,
    )
    shape = _shape_nd(nd, x.shape[:2], size2)
    out = new(values, shape, x.dtype, x.device)
    idx = new(indices, shape, dt.i64, x.device)
    in2 = _as2d(nd, x.shape[2:], 1)

    def backward(g: Tensor):
        storage = g._storage.max_pool2d_backward(
            _layout2d(nd, g), idx._storage, _layout2d(nd, idx), in2
        )
        return (new(storage, x.shape, g.dtype, g.device),)

    out = record(out, name, (x,), backward)
    if return_indices:
        return _done(out, unbatched), _done(idx, unbatched)
    return _done(out, unbatched)


@op
def max_pool1d(
    x: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    """Maximum over sliding windows, as ``torch.nn.functional.max_pool1d``.

    x: (N, C, L) -> (N, C, Lo), Lo = ⌊(L + 2p - d·(k-1) - 1) / s⌋ + 1 (⌈⌉ with ceil_mode);
    padding is -∞, stride defaults to kernel_size. ``return_indices`` also gives the argmax
    positions (int64, into L). The gradient goes to the argmax (the first one on ties).
    """
    return _max_pool(
        "max_pool1d", 1, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


@op
def max_pool2d(
    x: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    """Maximum over sliding windows, as ``torch.nn.functional.max_pool2d``.

    x: (N, C, H, W) -> (N, C, Ho, Wo), Ho = ⌊(H + 2p - d·(k-1) - 1) / s⌋ + 1 (⌈⌉ with
    ceil_mode); padding is -∞, stride defaults to kernel_size. ``return_indices`` also gives
    the argmax positions (int64, flat into H·W). The gradient goes to the argmax.
    """
    return _max_pool(
        "max_pool2d", 2, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


@op
def max_pool3d(
    x: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    """Maximum over sliding windows, as ``torch.nn.functional.max_pool3d``.

    x: (N, C, D, H, W) -> (N, C, Do, Ho, Wo), each size as in ``max_pool2d``; indices (int64)
    are flat into D·H·W. A box's maximum is the maximum over D of the (H, W) windows' maxima:
    a 2-d pool of every plane, then a (kd, 1) pool of the (D, Ho·Wo) result, whose argmax
    names the plane and the first pool's argmax the element in it (the first maximum in
    (d, h, w) order wins, as PyTorch). The gradient goes to the argmax.
    """
    name = "max_pool3d"
    x, unbatched = _spatial(name, 3, x, float_only=False)
    _no_bool(name, x)
    kernel = _ints(name, "kernel_size", kernel_size, 3, 1)
    stride = _stride(name, stride, kernel)
    padding = _ints(name, "padding", padding, 3, 0)
    dilation = _ints(name, "dilation", dilation, 3, 1)
    _pool_output(name, x, kernel, stride, padding, dilation, ceil_mode)  # the checks, as 3-d
    n, c, d, h, w = x.shape
    hw = (kernel[1:], stride[1:], padding[1:], dilation[1:])
    planes, inner = _max_pool(name, 2, x.reshape(n, c * d, h, w), *hw, ceil_mode, True)
    ho, wo = planes.shape[2:]
    depth = ((kernel[0], 1), (stride[0], 1), (padding[0], 0), (dilation[0], 1))
    out, outer = _max_pool(name, 2, planes.reshape(n, c, d, ho * wo), *depth, ceil_mode, True)
    shape = (n, c, out.shape[2], ho, wo)
    out = _done(out.reshape(*shape), unbatched)
    if not return_indices:
        return out
    plane = outer // (ho * wo)  # -1 (a window of padding only) stays -1
    within = gather(inner.reshape(n, c, d, ho * wo), 2, plane.clamp(min=0))
    idx = where(outer < 0, outer, plane * (h * w) + within).reshape(*shape)
    return out, _done(idx, unbatched)


# -- average pooling -------------------------------------------------------------------
def _avg_pool(
    name, nd, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
) -> Tensor:
    x, unbatched = _spatial(name, nd, x, float_only=False)  # integers average too, as PyTorch
    _no_bool(name, x)
    kernel = _ints(name, "kernel_size", kernel_size, nd, 1)
    stride = _stride(name, stride, kernel)
    padding = _ints(name, "padding", padding, nd, 0)
    if divisor_override is not None and divisor_override == 0:
        raise ShapeError(f"{name}: divisor_override must be non-zero")
    size = _pool_output(name, x, kernel, stride, padding, (1,) * nd, ceil_mode)
    args = (_as2d(nd, kernel, 1), _as2d(nd, stride, 1), _as2d(nd, padding, 0))
    size2 = _as2d(nd, size, 1)
    storage = x._storage.avg_pool2d(
        _layout2d(nd, x), *args, size2, count_include_pad, divisor_override
    )
    out = new(storage, _shape_nd(nd, x.shape[:2], size2), x.dtype, x.device)
    in2 = _as2d(nd, x.shape[2:], 1)

    def backward(g: Tensor):
        grad = g._storage.avg_pool2d_backward(
            _layout2d(nd, g), in2, *args, count_include_pad, divisor_override
        )
        return (new(grad, x.shape, g.dtype, g.device),)

    return _done(record(out, name, (x,), backward), unbatched)


@op
def avg_pool1d(
    x: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Mean over sliding windows, as ``torch.nn.functional.avg_pool1d``.

    x: (N, C, L) -> (N, C, Lo). The divisor counts the zero padding when
    ``count_include_pad`` (but never the part of a ceil_mode window past the padding).
    """
    return _avg_pool(
        "avg_pool1d", 1, x, kernel_size, stride, padding, ceil_mode, count_include_pad, None
    )


@op
def avg_pool2d(
    x: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over sliding windows, as ``torch.nn.functional.avg_pool2d``.

    x: (N, C, H, W) -> (N, C, Ho, Wo). The divisor is the window size (counting zero padding
    when ``count_include_pad``), or ``divisor_override``.
    """
    return _avg_pool(
        "avg_pool2d",
        2,
        x,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


@op
def avg_pool3d(
    x: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over sliding windows, as ``torch.nn.functional.avg_pool3d``.

    x: (N, C, D, H, W) -> (N, C, Do, Ho, Wo). The window sums are separable (a 2-d sum pool
    of every (H, W) plane, then a (kd, 1) one along D) and so is PyTorch's divisor (the box
    clipped to the padded input, or to the input without ``count_include_pad``: a product of
    per-dim counts), or ``divisor_override``. Integer inputs divide toward zero, as PyTorch.
    """
    name = "avg_pool3d"
    x, unbatched = _spatial(name, 3, x, float_only=False)
    _no_bool(name, x)
    kernel = _ints(name, "kernel_size", kernel_size, 3, 1)
    stride = _stride(name, stride, kernel)
    padding = _ints(name, "padding", padding, 3, 0)
    if divisor_override is not None and divisor_override == 0:
        raise ShapeError(f"{name}: divisor_override must be non-zero")
    size = _pool_output(name, x, kernel, stride, padding, (1, 1, 1), ceil_mode)
    n, c, d, h, w = x.shape
    src = x if x.dtype.is_floating_point else x.to_dtype(dt.i64)  # exact integer sums
    hw = (kernel[1:], stride[1:], padding[1:])
    planes = _avg_pool(name, 2, src.reshape(n, c * d, h, w), *hw, ceil_mode, True, 1)
    ho, wo = planes.shape[2:]
    depth = ((kernel[0], 1), (stride[0], 1), (padding[0], 0))
    sums = _avg_pool(name, 2, planes.reshape(n, c, d, ho * wo), *depth, ceil_mode, True, 1)
    sums = sums.reshape(n, c, *size)
    if divisor_override:
        divisor = np.full(size, divisor_override)
    else:
        params = ConvParams.symmetric(stride, padding, (1, 1, 1))
        rows = params.avg_divisors(x.shape[2:], kernel, size, count_include_pad)
        divisor = np.einsum("i,j,k->ijk", *(np.array(r) for r in rows))
    if x.dtype.is_floating_point:
        out = sums / tensor(divisor, dtype=x.dtype, device=x.device)
    else:
        out = div(sums, tensor(divisor, dtype=dt.i64, device=x.device), rounding_mode="trunc")
        out = out.to_dtype(x.dtype)
    return _done(out, unbatched)


# -- adaptive pooling ------------------------------------------------------------------
def _adaptive_size(name: str, nd: int, x: Tensor, output_size) -> tuple[int, ...]:
    """``output_size`` (an int, or ints with ``None`` for "keep that size") as ``nd`` ints."""
    values = (
        (output_size,) * nd
        if isinstance(output_size, int) or output_size is None
        else (tuple(output_size))
    )
    if len(values) != nd:
        raise ShapeError(f"{name}: output_size must be an int or {nd} ints, found {output_size!r}")
    size = tuple(n if o is None else o for n, o in zip(x.shape[2:], values, strict=True))
    if any(not isinstance(o, int) or o < 1 for o in size):
        raise ShapeError(f"{name}: output_size must be positive ints, found {output_size!r}")
    if any(n < 1 for n in x.shape[2:]):
        raise ShapeError(f"{name}: input {describe(x)} has an empty spatial dim")
    return size


def _adaptive_avg_pool(name: str, nd: int, x: Tensor, output_size) -> Tensor:
    x, unbatched = _spatial(name, nd, x)
    size = _adaptive_size(name, nd, x, output_size)
    size2 = _as2d(nd, size, 1)
    storage = x._storage.adaptive_avg_pool2d(_layout2d(nd, x), size2)
    out = new(storage, _shape_nd(nd, x.shape[:2], size2), x.dtype, x.device)
    in2 = _as2d(nd, x.shape[2:], 1)

    def backward(g: Tensor):
        grad = g._storage.adaptive_avg_pool2d_backward(_layout2d(nd, g), in2)
        return (new(grad, x.shape, g.dtype, g.device),)

    return _done(record(out, name, (x,), backward), unbatched)


@op
def adaptive_avg_pool1d(x: Tensor, output_size) -> Tensor:
    """Mean over Lo windows covering L: window i = [⌊i·L/Lo⌋, ⌈(i+1)·L/Lo⌉).

    x: (N, C, L) -> (N, C, Lo), as ``torch.nn.functional.adaptive_avg_pool1d``.
    """
    return _adaptive_avg_pool("adaptive_avg_pool1d", 1, x, output_size)


@op
def adaptive_avg_pool2d(x: Tensor, output_size) -> Tensor:
    """Mean over Ho×Wo windows covering the input: window i = [⌊i·H/Ho⌋, ⌈(i+1)·H/Ho⌉) (and
    the same along W); ``None`` in ``output_size`` keeps that size.

    x: (N, C, H, W) -> (N, C, Ho, Wo), as ``torch.nn.functional.adaptive_avg_pool2d``.
    """
    return _adaptive_avg_pool("adaptive_avg_pool2d", 2, x, output_size)


@op
def adaptive_avg_pool3d(x: Tensor, output_size) -> Tensor:
    """Mean over Do×Ho×Wo windows covering the input, window i = [⌊i·D/Do⌋, ⌈(i+1)·D/Do⌉)
    along D (and the same along H, W); ``None`` keeps a size. x: (N, C, D, H, W), as
    ``torch.nn.functional.adaptive_avg_pool3d``: separable, one averaging matrix per dim
    (``resample``'s "area" maps).
    """
    name = "adaptive_avg_pool3d"
    x, unbatched = _spatial(name, 3, x)
    size = _adaptive_size(name, 3, x, output_size)
    return _done(resample.resize(x, size, (None,) * 3, "area", False), unbatched)


def _adaptive_windows(n: int, m: int) -> np.ndarray:
    """(m, k) input positions of the adaptive windows [⌊i·n/m⌋, ⌈(i+1)·n/m⌉), k the longest
    one; a shorter window repeats its last position (which changes neither its maximum nor
    where that maximum first occurs)."""
    i = np.arange(m)
    starts = (i * n) // m
    ends = -((-(i + 1) * n) // m)
    k = int((ends - starts).max())
    return np.minimum(starts[:, None] + np.arange(k), ends[:, None] - 1)


def _split_windows(t: Tensor, dim: int, index: Tensor, table_shape) -> Tensor:
    """``t`` with dim ``dim`` replaced by the (windows, taps) of the flat window ``index``."""
    t = t.index_select(dim, index)
    return t.reshape(*t.shape[:dim], *table_shape, *t.shape[dim + 1 :])


def _adaptive_max_pool(name: str, nd: int, x: Tensor, output_size, return_indices: bool):
    """Gather every window's elements (one ``index_select`` per dim) into a last dim of
    K = k_1·…·k_nd taps in (d, h, w) order, take the max over it; the same gathers of the
    flat positions give the indices. The gradient goes to the argmax."""
    x, unbatched = _spatial(name, nd, x)
    size = _adaptive_size(name, nd, x, output_size)
    spatial = x.shape[2:]
    values = x
    positions = arange(math.prod(spatial), device=x.device).reshape(1, 1, *spatial)
    taps = []
    for k, (n, m) in enumerate(zip(spatial, size, strict=True)):
        table = _adaptive_windows(n, m)
        taps.append(table.shape[1])
        index = tensor(table.reshape(-1), device=x.device)
        dim = 2 + 2 * k  # the dims before are already split into (windows, taps) pairs
        values = _split_windows(values, dim, index, table.shape)
        positions = _split_windows(positions, dim, index, table.shape)
    order = (0, 1, *range(2, 2 + 2 * nd, 2), *range(3, 3 + 2 * nd, 2))
    flat = (*x.shape[:2], *size, math.prod(taps))
    best = values.permute(*order).reshape(*flat).max(-1)
    out = _done(best.values, unbatched)
    if not return_indices:
        return out
    positions = positions.permute(*order).reshape(1, 1, *flat[2:]).expand(*flat)
    idx = gather(positions, -1, best.indices.unsqueeze(-1)).squeeze(-1)
    return out, _done(idx, unbatched)


@op
def adaptive_max_pool1d(x: Tensor, output_size, return_indices: bool = False) -> Tensor:
    """Maximum over Lo windows covering L, window i = [⌊i·L/Lo⌋, ⌈(i+1)·L/Lo⌉), as
    ``torch.nn.functional.adaptive_max_pool1d``. x: (N, C, L) -> (N, C, Lo) (and int64
    indices into L)."""
    return _adaptive_max_pool("adaptive_max_pool1d", 1, x, output_size, return_indices)


@op
def adaptive_max_pool2d(x: Tensor, output_size, return_indices: bool = False) -> Tensor:
    """Maximum over Ho×Wo adaptive windows (as ``adaptive_avg_pool2d``'s), as
    ``torch.nn.functional.adaptive_max_pool2d``; indices flat into H·W."""
    return _adaptive_max_pool("adaptive_max_pool2d", 2, x, output_size, return_indices)


@op
def adaptive_max_pool3d(x: Tensor, output_size, return_indices: bool = False) -> Tensor:
    """Maximum over Do×Ho×Wo adaptive windows, as ``torch.nn.functional.adaptive_max_pool3d``;
    indices flat into D·H·W."""
    return _adaptive_max_pool("adaptive_max_pool3d", 3, x, output_size, return_indices)


# -- upsampling ------------------------------------------------------------------------
def _resample_size(name, nd, x, size, scale_factor):
    """(output size, scales handed to the kernel), as ``torch.nn.functional.interpolate``."""
    if (size is None) == (scale_factor is None):
        raise ShapeError(f"{name}: give exactly one of size and scale_factor")
    if size is not None:
        out = _ints(name, "size", size, nd, 1)
        return out, (None,) * nd
    scales = (scale_factor,) * nd if isinstance(scale_factor, int | float) else tuple(scale_factor)
    if len(scales) != nd or any(not isinstance(s, int | float) or s <= 0 for s in scales):
        raise ShapeError(
            f"{name}: scale_factor must be a positive number or {nd} of them, found "
            f"{scale_factor!r}"
        )
    out = tuple(math.floor(float(n) * s) for n, s in zip(x.shape[2:], scales, strict=True))
    if any(o < 1 for o in out):
        raise ShapeError(
            f"{name}: scale_factor {scale_factor!r} gives an empty output {out} for {describe(x)}"
        )
    return out, tuple(float(s) for s in scales)


def _upsample(name, nd, x, size, scale_factor, mode, align_corners=False) -> Tensor:
    x, unbatched = _spatial(name, nd, x, float_only=mode != "nearest")
    if any(n < 1 for n in x.shape[2:]):
        raise ShapeError(f"{name}: input {describe(x)} has an empty spatial dim")
    out_size, scales = _resample_size(name, nd, x, size, scale_factor)
    size2 = _as2d(nd, out_size, 1)
    scales2 = _as2d(nd, scales, None)
    in2 = _as2d(nd, x.shape[2:], 1)
    if mode == "nearest":
        storage = x._storage.upsample_nearest2d(_layout2d(nd, x), size2, scales2)
    else:
        storage = x._storage.upsample_bilinear2d(_layout2d(nd, x), size2, align_corners, scales2)
    out = new(storage, _shape_nd(nd, x.shape[:2], size2), x.dtype, x.device)

    def backward(g: Tensor):
        if mode == "nearest":
            grad = g._storage.upsample_nearest2d_backward(_layout2d(nd, g), in2, scales2)
        else:
            grad = g._storage.upsample_bilinear2d_backward(
                _layout2d(nd, g), in2, align_corners, scales2
            )
        return (new(grad, x.shape, g.dtype, g.device),)

    return _done(record(out, name, (x,), backward), unbatched)


@op
def upsample_nearest2d(x: Tensor, size=None, scale_factor=None) -> Tensor:
    """Nearest-neighbour resize, as ``interpolate(mode="nearest")``.

    x: (N, C, H, W) -> (N, C, Ho, Wo) with Ho = size or ⌊H·scale_factor⌋ and
    out[.., i, j] = x[.., ⌊i·H/Ho⌋, ⌊j·W/Wo⌋] (1/scale_factor for H/Ho when a scale is given).
    The gradient sums over each replicated block.
    """
    return _upsample("upsample_nearest2d", 2, x, size, scale_factor, "nearest")


@op
def upsample_bilinear2d(
    x: Tensor, size=None, scale_factor=None, align_corners: bool = False
) -> Tensor:
    """Bilinear resize, as ``interpolate(mode="bilinear")``.

    x: (N, C, H, W) -> (N, C, Ho, Wo). Source row of output row i: i·(H-1)/(Ho-1) with
    ``align_corners``, else max((i + ½)·H/Ho - ½, 0) (1/scale_factor for H/Ho when a scale
    is given); the two nearest rows (and columns) are mixed linearly.
    """
    return _upsample(
        "upsample_bilinear2d", 2, x, size, scale_factor, "bilinear", bool(align_corners)
    )


@op
def interpolate(
    x: Tensor,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """Resize as ``torch.nn.functional.interpolate``: ``mode`` "nearest" (3-d or 4-d input),
    "linear" (3-d), "bilinear" (4-d), "trilinear" (5-d), "bicubic" (4-d), "nearest-exact"
    or "area" (3-d to 5-d; see ``workbench.ops.resample``). ``align_corners`` is for the
    linear and cubic modes only.

    One rule for 1-d and 2-d "nearest": an output size equal to (or twice) the input's maps
    i -> i (or i // 2) whatever the scale_factor. PyTorch's 2-d kernels and its 1-d backward
    do so; its 1-d forward kernel does not (it differs there, e.g. L=5, scale_factor=1.13).
    """
    modes = {"nearest": (3, 4), "linear": (3,), "bilinear": (4,), "trilinear": (5,),
             "bicubic": (4,), "nearest-exact": (3, 4, 5), "area": (3, 4, 5)}  # fmt: skip
    if mode not in modes:
        raise ShapeError(f"interpolate: mode must be one of {tuple(modes)}, found {mode!r}")
    if x.ndim not in modes[mode]:
        raise ShapeError(
            f"interpolate: mode {mode!r} needs a {' or '.join(f'{n}-d' for n in modes[mode])} "
            f"input, found {describe(x)}"
        )
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ShapeError("interpolate: align_corners is only for the linear and cubic modes")
    nd = x.ndim - 2
    name = f"interpolate({mode})"
    if mode in ("trilinear", "bicubic", "nearest-exact", "area"):
        return _resize(name, nd, x, size, scale_factor, mode, bool(align_corners))
    if mode == "nearest":
        return _upsample(name, nd, x, size, scale_factor, "nearest")
    return _upsample(name, nd, x, size, scale_factor, "bilinear", bool(align_corners))


def _resize(name, nd, x, size, scale_factor, mode, align_corners) -> Tensor:
    """The modes resized one dim at a time by ``resample.resize``."""
    x, unbatched = _spatial(name, nd, x, float_only=mode != "nearest-exact")
    if any(n < 1 for n in x.shape[2:]):
        raise ShapeError(f"{name}: input {describe(x)} has an empty spatial dim")
    out_size, scales = _resample_size(name, nd, x, size, scale_factor)
    if mode == "area":
        scales = (None,) * nd  # adaptive average pooling: the sizes alone decide
    kind = "linear" if mode == "trilinear" else mode
    return _done(resample.resize(x, out_size, scales, kind, align_corners), unbatched)


# -- padding ---------------------------------------------------------------------------
def _repad(x: Tensor, amounts: tuple[int, ...], mode: str = "constant") -> Tensor:
    return pad(x, amounts, mode)  # (inside ``pad`` its argument hides the function)


@op
def pad(x: Tensor, pad, mode: str = "constant", value=0) -> Tensor:
    """Pad the last ``len(pad) // 2`` dims, as ``torch.nn.functional.pad``: ``pad`` is
    (last_before, last_after, second_last_before, ...).

    A negative pad crops, in every mode. ``constant`` fills with ``value``; ``reflect``
    mirrors without repeating the edge (pad < size); ``replicate`` repeats the edge;
    ``circular`` wraps (pad <= size). Unlike PyTorch, the non-constant modes take any number
    of leading dims.
    """
    if mode not in _PAD_MODES:
        raise ShapeError(f"pad: mode must be one of {_PAD_MODES}, found {mode!r}")
    amounts = tuple(pad)
    if (
        len(amounts) % 2
        or len(amounts) > 2 * x.ndim
        or not all(isinstance(p, int) and not isinstance(p, bool) for p in amounts)
    ):
        raise ShapeError(
            f"pad: the pad {pad!r} must hold an even number of ints, at most 2 per dim "
            f"({2 * x.ndim} for {describe(x)})"
        )
    pairs = [(0, 0)] * x.ndim
    for i in range(len(amounts) // 2):
        pairs[x.ndim - 1 - i] = (amounts[2 * i], amounts[2 * i + 1])
    pairs = tuple(pairs)
    for dim, ((lo, hi), size) in enumerate(zip(pairs, x.shape, strict=True)):
        if size + lo + hi < 0:
            raise ShapeError(f"pad: pad {pad!r} crops dim {dim} of {describe(x)} below 0")
    if mode != "constant" and any(p < 0 for p in amounts):
        # Negative pads crop in every mode, as PyTorch: reflect and replicate mirror the
        # original edges (pad, then crop), circular wraps the cropped tensor (crop, then pad).
        grow = tuple(p if p > 0 else 0 for p in amounts)
        crop = tuple(p if p < 0 else 0 for p in amounts)
        if mode == "circular":
            return _repad(_repad(x, crop), grow, mode)
        return _repad(_repad(x, grow, mode), crop)
    for dim, ((lo, hi), size) in enumerate(zip(pairs, x.shape, strict=True)):
        if mode == "constant" or not (lo or hi):
            continue
        limit = {"reflect": size - 1, "replicate": None, "circular": size}[mode]
        if size == 0 or (limit is not None and max(lo, hi) > limit):
            raise ShapeError(
                f"pad: mode {mode!r} needs pads {'<' if mode == 'reflect' else '<='} the dim "
                f"size, found ({lo}, {hi}) for dim {dim} of {describe(x)}"
            )
    shape = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, pairs, strict=True))
    out = new(x._storage.pad(x._layout, pairs, mode, value), shape, x.dtype, x.device)

    def backward(g: Tensor):
        if mode != "constant":
            grad = g._storage.pad_backward(g._layout, pairs, mode)
            return (new(grad, x.shape, g.dtype, g.device),)
        if all(lo >= 0 and hi >= 0 for lo, hi in pairs):
            for dim, (lo, _) in enumerate(pairs):
                g = g.narrow(dim, lo, x.shape[dim])
            return (g,)
        # cropped dims get zeros back: the gradient of a pad is the opposite pad
        back = tuple(-v for lo, hi in reversed(pairs) for v in (lo, hi))
        return (_repad(g, back),)

    return record(out, "pad", (x,), backward)
