"""Convolutions, plain and transposed, 1-d, 2-d and 3-d, with PyTorch's arguments and gradients.

Shapes: x (N, C, L) or (N, C, H, W) (an unbatched (C, ...) input works too); a convolution's
weight is (O, C/groups, k...), a transposed convolution's (C, O/groups, k...).

The gradients close the loop on three storage methods: the input gradient of a convolution is
a transposed convolution of the output gradient, the input gradient of a transposed
convolution is a convolution, and both weight gradients come from ``conv2d_backward_weight``.
1-d ops run the 2-d storage methods on a unit-height view (no copy); 3-d ops are sums of
2-d ones over the kernel's depth taps (so every device with conv2d runs them, gradients
included).
"""

from __future__ import annotations

from .._oprecord import op
from ..autograd import GRAD_ENABLED, record
from ..backends.base import supports
from ..backends.conv_params import ConvParams
from ..errors import ArgumentError, DTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise
from ._helpers import describe, new, same_device
from .creation import zeros_like
from .shape import pad_with_zeros, stack


# -- argument normalisation ------------------------------------------------------------
def _ints(name: str, what: str, value, nd: int, minimum: int) -> tuple[int, ...]:
    """An int or a sequence of ``nd`` ints (a 1-sequence is repeated), each >= ``minimum``."""
    values = (value,) * nd if isinstance(value, int) else tuple(value)
    if len(values) == 1:
        values = values * nd
    if len(values) != nd or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ShapeError(f"{name}: {what} must be an int or {nd} ints, found {value!r}")
    if any(v < minimum for v in values):
        raise ShapeError(f"{name}: {what} must be >= {minimum}, found {value!r}")
    return values


def _as2d(nd: int, seq, fill):
    """Spatial parameters of a 1-d op as the 2-d op's, with ``fill`` for the unit height."""
    return tuple(seq) if nd == 2 else (fill, *seq)


def _layout2d(nd: int, t: Tensor):
    return t._layout if nd == 2 else t._layout.unsqueeze(2)


def _check_operands(name: str, nd: int, x: Tensor, weight: Tensor, bias: Tensor | None) -> None:
    kind = "(O, C/groups, k...)" if "transpose" not in name else "(C, O/groups, k...)"
    if x.ndim not in (nd + 1, nd + 2):
        raise ShapeError(
            f"{name}: expected a {nd + 2}-d input (N, C, {('L', 'H, W', 'D, H, W')[nd - 1]}) or an "
            f"unbatched {nd + 1}-d one, found {describe(x)}"
        )
    if weight.ndim != nd + 2:
        raise ShapeError(
            f"{name}: weight must have {nd + 2} dims {kind}, found {describe(weight)} "
            f"for input {describe(x)}"
        )
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{name}: expected a floating point input, found {describe(x)}")
    operands = (x, weight) if bias is None else (x, weight, bias)
    same_device(name, *operands)
    if any(t.dtype is not x.dtype for t in operands):
        raise DTypeError(
            f"{name}: input, weight and bias need one dtype, found "
            + ", ".join(describe(t) for t in operands)
        )


def _check_groups(name: str, groups: int, x: Tensor, weight: Tensor) -> None:
    if not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"{name}: groups must be a positive int, found {groups!r}")
    for what, t, n in (
        ("input channels", x, x.shape[1]),
        ("weight dim 0", weight, weight.shape[0]),
    ):
        if n % groups:
            raise ShapeError(
                f"{name}: groups={groups} does not divide the {what} ({n}) of {describe(t)}"
            )


def _check_bias(name: str, bias: Tensor | None, channels: int, weight: Tensor) -> None:
    if bias is not None and bias.shape != (channels,):
        raise ShapeError(
            f"{name}: bias must have shape ({channels},) for weight {describe(weight)}, "
            f"found {describe(bias)}"
        )


def _conv_padding(name, padding, nd, kernel, dilation, stride) -> tuple[tuple[int, int], ...]:
    """(before, after) per spatial dim; "same" puts the odd pad after, as PyTorch."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ShapeError(f"{name}: padding='same' needs stride 1, found stride {stride}")
            total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
            return tuple((t // 2, t - t // 2) for t in total)
        raise ShapeError(
            f"{name}: padding must be 'same', 'valid', an int or ints, found {padding!r}"
        )
    return tuple((p, p) for p in _ints(name, "padding", padding, nd, 0))


def _unbatch(nd: int, x: Tensor) -> tuple[Tensor, bool]:
    if x.ndim == nd + 1:
        return x.unsqueeze(0), True
    return x, False


# The activations conv2d can apply to its outputs (one call on devices with
# ``conv2d_activated``), as the elementwise ops.
ACTIVATIONS = {
    "silu": elementwise.silu,
    "relu": elementwise.relu,
    "gelu": elementwise.gelu,
    "gelu_erf": elementwise.gelu_erf,
}


# -- the three storage calls (no autograd) ---------------------------------------------
def _conv_raw(nd, x, weight, bias, stride, pads, dilation, groups, activation=None) -> Tensor:
    """``conv2d`` storage call with 2-d parameters: pads ((top, bottom), (left, right));
    with ``activation``, the storage's ``conv2d_activated``."""
    k2 = _as2d(nd, weight.shape[2:], 1)
    out2 = ConvParams(stride, pads, dilation).out_size(_as2d(nd, x.shape[2:], 1), k2)
    args = (
        _layout2d(nd, x),
        weight._storage,
        _layout2d(nd, weight),
        None if bias is None else bias._storage,
        None if bias is None else bias._layout,
        stride,
        pads,
        dilation,
        groups,
    )
    if activation is None:
        storage = x._storage.conv2d(*args)
    else:
        storage = x._storage.conv2d_activated(*args, activation)
    shape = (x.shape[0], weight.shape[0], *out2[2 - nd :])
    return new(storage, shape, x.dtype, x.device)


def _conv_transpose_raw(nd, x, weight, bias, stride, padding, dilation, groups, out2) -> Tensor:
    """``conv_transpose2d`` storage call: padding (top, left), output size ``out2`` (2-d)."""
    storage = x._storage.conv_transpose2d(
        _layout2d(nd, x),
        weight._storage,
        _layout2d(nd, weight),
        None if bias is None else bias._storage,
        None if bias is None else bias._layout,
        stride,
        padding,
        dilation,
        groups,
        out2,
    )
    shape = (x.shape[0], weight.shape[1] * groups, *out2[2 - nd :])
    return new(storage, shape, x.dtype, x.device)


def _weight_grad_raw(nd, x, g, weight_shape, stride, pads, dilation, groups) -> Tensor:
    """dL/dweight of ``conv(x) -> g``, shaped ``weight_shape`` (O, C/groups, k...)."""
    storage = x._storage.conv2d_backward_weight(
        _layout2d(nd, x),
        g._storage,
        _layout2d(nd, g),
        _as2d(nd, weight_shape[2:], 1),
        stride,
        pads,
        dilation,
        groups,
    )
    return new(storage, tuple(weight_shape), x.dtype, x.device)


def _bias_grad(g: Tensor) -> Tensor:
    return g.sum((0, *range(2, g.ndim)))


# -- convolution -----------------------------------------------------------------------
def _conv(
    name: str, nd: int, x, weight, bias, stride, padding, dilation, groups, activation=None
) -> Tensor:
    if activation is not None and activation not in ACTIVATIONS:
        raise ArgumentError(
            f"{name}: activation must be None or one of {', '.join(map(repr, ACTIVATIONS))}, "
            f"found {activation!r}"
        )
    _check_operands(name, nd, x, weight, bias)
    x, unbatched = _unbatch(nd, x)
    _check_groups(name, groups, x, weight)
    if weight.shape[1] * groups != x.shape[1]:
        raise ShapeError(
            f"{name}: weight {describe(weight)} with groups={groups} expects "
            f"{weight.shape[1] * groups} input channels, found {describe(x)}"
        )
    _check_bias(name, bias, weight.shape[0], weight)
    stride = _ints(name, "stride", stride, nd, 1)
    dilation = _ints(name, "dilation", dilation, nd, 1)
    kernel = weight.shape[2:]
    pads = _conv_padding(name, padding, nd, kernel, dilation, stride)
    for size, (lo, hi), k, d in zip(x.shape[2:], pads, kernel, dilation, strict=True):
        if size + lo + hi < d * (k - 1) + 1:
            raise ShapeError(
                f"{name}: the kernel (size {tuple(kernel)}, dilation {dilation}) is bigger "
                f"than the padded input (padding {padding!r}): input {describe(x)}, "
                f"weight {describe(weight)}"
            )
    if nd == 3:
        out = _conv3d_by_planes(x, weight, bias, stride, pads, dilation, groups)
    elif activation is not None and _fuses(x, weight, bias):
        out = _conv_raw(nd, x, weight, bias, stride, pads, dilation, groups, activation)
    else:
        out = _conv_checked(name, nd, x, weight, bias, stride, pads, dilation, groups)
        out = out if activation is None else ACTIVATIONS[activation](out)
    return out.squeeze(0) if unbatched else out


def _fuses(x: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    """Whether a 2-d convolution's activation goes into the storage call: the device has
    ``conv2d_activated`` and no gradient is recorded (the backward needs the convolution's
    own output)."""
    if not supports(x._storage, "conv2d_activated"):
        return False
    return not GRAD_ENABLED.get() or not any(
        t is not None and t.requires_grad for t in (x, weight, bias)
    )


def _conv_checked(name, nd, x, weight, bias, stride, pads, dilation, groups) -> Tensor:
    """The 1-d/2-d convolution of checked operands (x batched, ``pads`` (before, after) per
    dim), with its gradients."""
    stride2 = _as2d(nd, stride, 1)
    dilation2 = _as2d(nd, dilation, 1)
    pads2 = _as2d(nd, pads, (0, 0))
    out = _conv_raw(nd, x, weight, bias, stride2, pads2, dilation2, groups)
    in2 = _as2d(nd, x.shape[2:], 1)

    def backward(g: Tensor):
        gx = gw = gb = None
        if x.requires_grad:
            tops = tuple(lo for lo, _ in pads2)
            gx = _conv_transpose_raw(nd, g, weight, None, stride2, tops, dilation2, groups, in2)
        if weight.requires_grad:
            gw = _weight_grad_raw(nd, x, g, weight.shape, stride2, pads2, dilation2, groups)
        if bias is not None and bias.requires_grad:
            gb = _bias_grad(g)
        return gx, gw, gb

    return record(out, name, (x, weight, bias), backward, saved=(x, weight))


@op
def conv1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
    """1-d convolution (cross-correlation), as ``torch.nn.functional.conv1d``.

    x: (N, C, L), weight: (O, C/groups, k), bias: (O,) -> (N, O, Lo) with
    y[n, o, l] = b[o] + Σ_{c, j} w[o, c, j] · x_pad[n, g(o)·C/groups + c, s·l + d·j] and
    Lo = ⌊(L + 2p - d·(k-1) - 1) / s⌋ + 1. ``padding`` is an int or "same" / "valid".
    """
    return _conv("conv1d", 1, x, weight, bias, stride, padding, dilation, groups)


@op
def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
    *,
    activation: str | None = None,
) -> Tensor:
    """2-d convolution (cross-correlation), as ``torch.nn.functional.conv2d``.

    x: (N, C, H, W), weight: (O, C/groups, kh, kw), bias: (O,) -> (N, O, Ho, Wo) with
    y[n, o, h, w] = b[o] + Σ_{c, i, j} w[o, c, i, j] · x_pad[n, g(o)·C/groups + c, s·h + d·i,
    s·w + d·j] and Ho = ⌊(H + 2p - d·(kh-1) - 1) / s⌋ + 1. ``padding``: int, (ph, pw), "same"
    (stride 1; an odd total pad puts the extra one after) or "valid". ``activation`` ("silu",
    "relu", "gelu", "gelu_erf") is act(y), applied as the outputs are stored where the device
    can (the CPU's native kernels, when no gradient is recorded): no pass of its own.
    """
    return _conv("conv2d", 2, x, weight, bias, stride, padding, dilation, groups, activation)


@op
def conv3d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
) -> Tensor:
    """3-d convolution (cross-correlation), as ``torch.nn.functional.conv3d``.

    x: (N, C, D, H, W), weight: (O, C/groups, kd, kh, kw), bias: (O,) -> (N, O, Do, Ho, Wo),
    y[n, o, t, h, w] = b[o] + Σ_{c, a, i, j} w[o, c, a, i, j] · x_pad[n, g(o)·C/groups + c,
    s·t + d·a, s·h + d·i, s·w + d·j], sizes as ``conv2d``'s. ``padding``: int, 3 ints, "same"
    or "valid". Computed as Σ_a conv2d(planes s·t + d·a of x, w[:, :, a]) (see
    ``_conv3d_by_planes``), so the gradients are conv2d's.
    """
    return _conv("conv3d", 3, x, weight, bias, stride, padding, dilation, groups)


def _conv3d_by_planes(x, weight, bias, stride, pads, dilation, groups) -> Tensor:
    """conv3d as kd 2-d convolutions: y[:, :, t] = Σ_a conv2d(x_pad[:, :, s·t + d·a], w[:, :, a]).

    The depth dim moves next to the batch (one copy, padded along D there), so the planes of
    every tap a are one strided slice, batched as N·Do images of one conv2d call.
    """
    (lo, hi), sd, dd = pads[0], stride[0], dilation[0]
    n, c, d, h, w = x.shape
    kd = weight.shape[2]
    do = (d + lo + hi - dd * (kd - 1) - 1) // sd + 1
    depth_major = x.permute(0, 2, 1, 3, 4)  # (N, D, C, H, W)
    if lo or hi:
        depth_major = _pad_dim1(depth_major, lo, hi)
    total = None
    for a in range(kd):
        start = a * dd
        planes = depth_major[:, start : start + sd * (do - 1) + 1 : sd].reshape(n * do, c, h, w)
        y = _conv_checked("conv3d", 2, planes, weight[:, :, a], None, stride[1:], pads[1:],
                          dilation[1:], groups)  # fmt: skip
        total = y if total is None else total + y
    o, ho, wo = total.shape[1:]
    out = total.reshape(n, do, o, ho, wo).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(o, 1, 1, 1)
    return out.contiguous()


def _pad_dim1(x: Tensor, before: int, after: int) -> Tensor:
    """Zeros before/after along dim 1 (a negative amount crops)."""
    if before < 0:
        x, before = x.narrow(1, -before, x.shape[1] + before), 0
    if after < 0:
        x, after = x.narrow(1, 0, x.shape[1] + after), 0
    return pad_with_zeros(x, 1, before, after)


# -- transposed convolution ------------------------------------------------------------
def _conv_transpose(
    name, nd, x, weight, bias, stride, padding, output_padding, groups, dilation
) -> Tensor:
    _check_operands(name, nd, x, weight, bias)
    x, unbatched = _unbatch(nd, x)
    _check_groups(name, groups, x, weight)
    if weight.shape[0] != x.shape[1]:
        raise ShapeError(
            f"{name}: weight {describe(weight)} expects {weight.shape[0]} input channels, "
            f"found {describe(x)}"
        )
    out_channels = weight.shape[1] * groups
    _check_bias(name, bias, out_channels, weight)
    stride = _ints(name, "stride", stride, nd, 1)
    dilation = _ints(name, "dilation", dilation, nd, 1)
    padding = _ints(name, "padding", padding, nd, 0)
    output_padding = _ints(name, "output_padding", output_padding, nd, 0)
    kernel = weight.shape[2:]
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation, strict=True)):
        raise ShapeError(
            f"{name}: output_padding {output_padding} must be smaller than either the stride "
            f"{stride} or the dilation {dilation}"
        )
    size = ConvParams.symmetric(stride, padding, dilation).transposed_out_size(
        x.shape[2:], kernel, output_padding
    )
    if any(n < 1 for n in size):
        raise ShapeError(
            f"{name}: the output size {size} is not positive for input {describe(x)}, weight "
            f"{describe(weight)}, stride {stride}, padding {padding}, dilation {dilation}"
        )
    if nd == 3:
        out = _conv_transpose3d_by_planes(
            x, weight, bias, stride, padding, output_padding, groups, dilation, size
        )
        return out.squeeze(0) if unbatched else out
    stride2 = _as2d(nd, stride, 1)
    dilation2 = _as2d(nd, dilation, 1)
    padding2 = _as2d(nd, padding, 0)
    out2 = _as2d(nd, size, 1)
    out = _conv_transpose_raw(nd, x, weight, bias, stride2, padding2, dilation2, groups, out2)
    # As a convolution mapping the output back onto the input: the same top pad and the
    # bottom pad that makes its output exactly the input's size (negative: rows never reached).
    pads2 = tuple(
        (p, (n - 1) * s + d * (k - 1) + 1 - p - o)
        for n, s, p, d, k, o in zip(
            _as2d(nd, x.shape[2:], 1),
            stride2,
            padding2,
            dilation2,
            _as2d(nd, kernel, 1),
            out2,
            strict=True,
        )
    )

    def backward(g: Tensor):
        gx = gw = gb = None
        if x.requires_grad:
            gx = _conv_raw(nd, g, weight, None, stride2, pads2, dilation2, groups)
        if weight.requires_grad:
            gw = _weight_grad_raw(nd, g, x, weight.shape, stride2, pads2, dilation2, groups)
        if bias is not None and bias.requires_grad:
            gb = _bias_grad(g)
        return gx, gw, gb

    out = record(out, name, (x, weight, bias), backward, saved=(x, weight))
    return out.squeeze(0) if unbatched else out


@op
def conv_transpose1d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """1-d transposed convolution, as ``torch.nn.functional.conv_transpose1d``: the gradient
    of ``conv1d`` with respect to its input.

    x: (N, C, L), weight: (C, O/groups, k) -> (N, O, Lo),
    Lo = (L - 1)·s - 2p + d·(k-1) + output_padding + 1.
    """
    return _conv_transpose(
        "conv_transpose1d", 1, x, weight, bias, stride, padding, output_padding, groups, dilation
    )


@op
def conv_transpose2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """2-d transposed convolution, as ``torch.nn.functional.conv_transpose2d``: the gradient
    of ``conv2d`` with respect to its input.

    x: (N, C, H, W), weight: (C, O/groups, kh, kw) -> (N, O, Ho, Wo),
    Ho = (H - 1)·s - 2p + d·(kh-1) + output_padding + 1.
    """
    return _conv_transpose(
        "conv_transpose2d", 2, x, weight, bias, stride, padding, output_padding, groups, dilation
    )


@op
def conv_transpose3d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """3-d transposed convolution, as ``torch.nn.functional.conv_transpose3d``: the gradient
    of ``conv3d`` with respect to its input.

    x: (N, C, D, H, W), weight: (C, O/groups, kd, kh, kw) -> (N, O, Do, Ho, Wo),
    Do = (D - 1)·s - 2p + d·(kd-1) + output_padding + 1 (and the same for H, W).
    """
    return _conv_transpose(
        "conv_transpose3d", 3, x, weight, bias, stride, padding, output_padding, groups, dilation
    )


def _conv_transpose3d_by_planes(
    x, weight, bias, stride, padding, output_padding, groups, dilation, size
) -> Tensor:
    """Each input plane t, through tap a, lands on output plane s·t + d·a - p:
    y[:, :, s·t + d·a - p] += conv_transpose2d(x[:, :, t], w[:, :, a]). Per tap, one batched
    conv_transpose2d of all N·D planes; its result is spread s apart along D (zeros between)
    and shifted into place by a pad (negative: a crop)."""
    n, c, d, h, w = x.shape
    kd = weight.shape[2]
    sd, pd, dd = stride[0], padding[0], dilation[0]
    depth = size[0]
    planes = x.permute(0, 2, 1, 3, 4).reshape(n * d, c, h, w)
    span = sd * (d - 1) + 1
    total = None
    for a in range(kd):
        y = _conv_transpose("conv_transpose3d", 2, planes, weight[:, :, a], None, stride[1:],
                            padding[1:], output_padding[1:], groups, dilation[1:])  # fmt: skip
        o, ho, wo = y.shape[1:]
        y = y.reshape(n, d, o, ho, wo)
        if sd > 1:  # interleave sd - 1 zero planes
            zeros = zeros_like(y)
            y = stack([y] + [zeros] * (sd - 1), 2).reshape(n, d * sd, o, ho, wo)
            y = y[:, :span]
        shift = a * dd - pd
        y = _pad_dim1(y, shift, depth - shift - span)
        total = y if total is None else total + y
    out = total.permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(-1, 1, 1, 1)
    return out.contiguous()
