"""3-d convolutions and pools, adaptive max pooling, integer pooling and the conv/pool layers
against torch: values, dtypes (indices included), shapes and gradients through ``op_check``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from devices import OP_DEVICE_PARAMS
from op_check import check

import workbench as wb
import workbench.nn as nn
from workbench.errors import DTypeError, ShapeError


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _ids(cases) -> list[str]:
    return [f"{i}-{c[-1]}" for i, c in enumerate(cases)]


# -- conv3d / conv_transpose3d ---------------------------------------------------------------
# (x shape, weight shape, kwargs): odd sizes, groups, depthwise, dilation, strides, "same"
CONV3D = [
    ((1, 3, 5, 6, 7), (4, 3, 3, 3, 3), {}),
    ((2, 4, 5, 6, 7), (6, 2, 3, 2, 3), dict(stride=(2, 1, 2), padding=(1, 0, 1), groups=2)),
    ((2, 3, 7, 5, 6), (4, 3, 2, 3, 2), dict(dilation=(2, 1, 2), padding=(2, 1, 0))),
    ((2, 4, 5, 5, 5), (4, 1, 3, 3, 3), dict(padding=1, groups=4)),  # depthwise
    ((1, 4, 6, 5, 4), (8, 1, 3, 1, 3), dict(stride=2, groups=4)),  # depthwise, multiplier 2
    ((2, 3, 4, 5, 6), (5, 3, 1, 1, 1), {}),  # 1x1x1
    ((2, 3, 5, 6, 4), (4, 3, 2, 3, 4), dict(padding="same")),  # even kernels: uneven pads
    ((1, 2, 6, 5, 7), (3, 2, 3, 3, 2), dict(padding="valid", stride=3)),
    ((2, 3, 3, 4, 4), (2, 3, 3, 4, 4), {}),  # kernel as big as the input
]
# (x shape, weight shape (C, O/groups, k...), kwargs)
CONV_TRANSPOSE3D = [
    ((1, 3, 3, 4, 5), (3, 2, 3, 3, 3), {}),
    ((2, 4, 3, 4, 5), (4, 3, 3, 2, 3),
     dict(stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 0), groups=2)),
    ((2, 2, 3, 3, 4), (2, 3, 3, 3, 2), dict(stride=3, padding=2, output_padding=2, dilation=2)),
    ((1, 3, 4, 3, 3), (3, 2, 2, 2, 2), dict(stride=2)),  # kernel == stride
    ((2, 4, 3, 3, 3), (4, 1, 3, 3, 3), dict(stride=2, padding=1, groups=4)),  # depthwise
]  # fmt: skip


def _conv_check(fn_name, x_shape, w_shape, kwargs, bias, dtype, layout, device, **tol):
    inputs = [_rand(*x_shape), _rand(*w_shape, seed=1)]
    if bias:
        out = w_shape[0] if "transpose" not in fn_name else w_shape[1] * kwargs.get("groups", 1)
        inputs.append(_rand(out, seed=2))
    wb_fn, torch_fn = getattr(wb, fn_name), getattr(F, fn_name)
    check(lambda *a: wb_fn(*a, **kwargs), inputs, dtype=dtype,
          torch_fn=lambda *a: torch_fn(*a, **kwargs),
          layouts=[layout] + ["contiguous"] * (len(inputs) - 1), device=device, **tol)  # fmt: skip


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", [wb.f32, wb.f64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape, w_shape, kwargs", CONV3D, ids=_ids(CONV3D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv3d(x_shape, w_shape, kwargs, bias, dtype, layout, device):
    _conv_check("conv3d", x_shape, w_shape, kwargs, bias, dtype, layout, device)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", [wb.f32, wb.f64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape, w_shape, kwargs", CONV_TRANSPOSE3D, ids=_ids(CONV_TRANSPOSE3D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv_transpose3d(x_shape, w_shape, kwargs, bias, dtype, layout, device):
    _conv_check("conv_transpose3d", x_shape, w_shape, kwargs, bias, dtype, layout, device)


@pytest.mark.parametrize("dtype", [wb.f16, wb.bf16])
@pytest.mark.parametrize(
    "fn_name, case", [("conv3d", CONV3D[1]), ("conv_transpose3d", CONV_TRANSPOSE3D[1])]
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv3d_half(fn_name, case, dtype, device):
    x_shape, w_shape, kwargs = case
    _conv_check(fn_name, x_shape, w_shape, kwargs, True, dtype, "contiguous", device,
                atol=0.15, rtol=0.05)  # fmt: skip


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv3d_unbatched_and_empty_batch(device):
    w = _rand(4, 3, 2, 2, 2, seed=1)
    check(lambda x, w: wb.conv3d(x, w, padding=1), [_rand(3, 4, 3, 5), w],
          torch_fn=lambda x, w: F.conv3d(x, w, padding=1), device=device)  # fmt: skip
    check(lambda x, w: wb.conv3d(x, w), [_rand(0, 3, 4, 3, 5), w],
          torch_fn=lambda x, w: F.conv3d(x, w), device=device)  # fmt: skip


def test_conv3d_errors():
    x = wb.randn(2, 4, 5, 5, 5)
    with pytest.raises(ShapeError, match=r"conv3d: expected a 5-d input \(N, C, D, H, W\)"):
        wb.conv3d(wb.randn(4, 5, 5), wb.randn(2, 4, 3, 3, 3))
    with pytest.raises(ShapeError, match="conv3d: groups=3 does not divide"):
        wb.conv3d(x, wb.randn(6, 2, 3, 3, 3), groups=3)
    with pytest.raises(ShapeError, match="conv3d: the kernel .* is bigger than the padded input"):
        wb.conv3d(x, wb.randn(2, 4, 6, 3, 3))
    with pytest.raises(ShapeError, match="conv_transpose3d: output_padding"):
        wb.conv_transpose3d(x, wb.randn(4, 2, 3, 3, 3), stride=2, output_padding=(0, 0, 2))
    with pytest.raises(DTypeError, match="conv3d: expected a floating point input"):
        wb.conv3d(wb.zeros(1, 4, 3, 3, 3, dtype=wb.i64), wb.zeros(2, 4, 1, 1, 1, dtype=wb.i64))


# -- 3-d pools -------------------------------------------------------------------------------
MAX_POOL3D = [
    ((2, 3, 6, 7, 8), dict(kernel_size=2)),
    ((2, 3, 7, 7, 9), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 8, 9), dict(kernel_size=(2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0),
                           dilation=(2, 1, 1), ceil_mode=True)),
    ((2, 2, 5, 6, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((3, 5, 6, 7), dict(kernel_size=(3, 2, 2), stride=1)),  # unbatched
]  # fmt: skip


@pytest.mark.parametrize("dtype", [wb.f32, wb.f64])
@pytest.mark.parametrize("shape, kwargs", MAX_POOL3D, ids=_ids(MAX_POOL3D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_max_pool3d_with_indices(shape, kwargs, dtype, device):
    check(lambda x: wb.max_pool3d(x, return_indices=True, **kwargs), [_rand(*shape)],
          dtype=dtype, torch_fn=lambda x: F.max_pool3d(x, return_indices=True, **kwargs),
          layouts=["transposed"], device=device)  # fmt: skip
    m, t = nn.MaxPool3d(**kwargs), torch.nn.MaxPool3d(**kwargs)
    check(m, [_rand(*shape, seed=3)], dtype=dtype, torch_fn=t, device=device)


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_max_pool3d_ties_pick_the_first(device):
    x = np.zeros((1, 1, 4, 4, 4))
    x[0, 0, 1, 0, 1] = x[0, 0, 0, 1, 1] = x[0, 0, 1, 1, 0] = 5.0  # three maxima in one window
    check(lambda x: wb.max_pool3d(x, 2, return_indices=True), [x],
          torch_fn=lambda x: F.max_pool3d(x, 2, return_indices=True), grad=False,
          device=device)  # fmt: skip


AVG_POOL3D = [
    ((2, 3, 6, 7, 8), dict(kernel_size=2)),
    ((2, 3, 7, 7, 9), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 7, 7, 9), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ((1, 2, 7, 8, 9), dict(kernel_size=(2, 3, 4), stride=(1, 2, 3), padding=(1, 1, 2),
                           ceil_mode=True)),
    ((1, 2, 7, 8, 9), dict(kernel_size=(2, 3, 4), stride=(1, 2, 3), padding=(1, 1, 2),
                           ceil_mode=True, count_include_pad=False)),
    ((2, 2, 5, 6, 7), dict(kernel_size=3, padding=1, divisor_override=5)),
]  # fmt: skip


@pytest.mark.parametrize("dtype", [wb.f32, wb.f64])
@pytest.mark.parametrize("shape, kwargs", AVG_POOL3D, ids=_ids(AVG_POOL3D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_avg_pool3d(shape, kwargs, dtype, device):
    check(lambda x: wb.avg_pool3d(x, **kwargs), [_rand(*shape)], dtype=dtype,
          torch_fn=lambda x: F.avg_pool3d(x, **kwargs), layouts=["transposed"],
          device=device)  # fmt: skip
    m, t = nn.AvgPool3d(**kwargs), torch.nn.AvgPool3d(**kwargs)
    check(m, [_rand(*shape, seed=3)], dtype=dtype, torch_fn=t, device=device)


# (spatial dims, x shape, output size)
ADAPTIVE = [
    (3, (2, 3, 7, 8, 9), (3, 4, 5)),
    (3, (2, 3, 7, 8, 9), 1),
    (3, (2, 3, 5, 6, 7), (None, 4, 7)),
    (3, (3, 5, 4, 6), (7, 3, 2)),  # unbatched, a bigger D
    (1, (2, 3, 13), 5),
    (1, (2, 3, 13), 13),
    (2, (2, 3, 7, 10), (3, 4)),
    (2, (2, 3, 7, 10), (None, 1)),
]


@pytest.mark.parametrize("dtype", [wb.f32, wb.f64])
@pytest.mark.parametrize("nd, shape, size", ADAPTIVE, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_adaptive_max_pool(nd, shape, size, dtype, device):
    name = f"adaptive_max_pool{nd}d"
    wb_fn, torch_fn = getattr(wb, name), getattr(F, name)
    check(lambda x: wb_fn(x, size, return_indices=True), [_rand(*shape)], dtype=dtype,
          torch_fn=lambda x: torch_fn(x, size, return_indices=True), layouts=["transposed"],
          device=device)  # fmt: skip
    layer = f"AdaptiveMaxPool{nd}d"
    check(getattr(nn, layer)(size), [_rand(*shape, seed=3)], dtype=dtype,
          torch_fn=getattr(torch.nn, layer)(size), device=device)  # fmt: skip


@pytest.mark.parametrize("dtype", [wb.f32, wb.f64])
@pytest.mark.parametrize("shape, size", [c[1:] for c in ADAPTIVE if c[0] == 3], ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_adaptive_avg_pool3d(shape, size, dtype, device):
    check(lambda x: wb.adaptive_avg_pool3d(x, size), [_rand(*shape)], dtype=dtype,
          torch_fn=lambda x: F.adaptive_avg_pool3d(x, size), layouts=["transposed"],
          device=device)  # fmt: skip
    check(nn.AdaptiveAvgPool3d(size), [_rand(*shape, seed=3)], dtype=dtype,
          torch_fn=torch.nn.AdaptiveAvgPool3d(size), device=device)  # fmt: skip


@pytest.mark.parametrize("dtype", [wb.f16, wb.bf16])
@pytest.mark.parametrize(
    "wb_fn, torch_fn",
    [
        (lambda x: wb.max_pool3d(x, 3, 2, 1), lambda x: F.max_pool3d(x, 3, 2, 1)),
        # torch's CPU avg_pool3d has no f16 kernel: the reference computes in f32
        (
            lambda x: wb.avg_pool3d(x, 3, 2, 1),
            lambda x: F.avg_pool3d(x.float(), 3, 2, 1).to(x.dtype),
        ),
        (lambda x: wb.adaptive_avg_pool3d(x, 2), lambda x: F.adaptive_avg_pool3d(x, 2)),
        (lambda x: wb.adaptive_max_pool3d(x, 3), lambda x: F.adaptive_max_pool3d(x, 3)),
    ],
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_pool3d_half(wb_fn, torch_fn, dtype, device):
    check(wb_fn, [_rand(2, 3, 5, 7, 6)], dtype=dtype, torch_fn=torch_fn, atol=0.05, rtol=0.05,
          device=device)  # fmt: skip


# -- integer pooling (as torch: max pooling of every integer dtype, averages of int64) ------
@pytest.mark.parametrize("np_dtype", [np.int64, np.int32, np.int16, np.uint8])
@pytest.mark.parametrize(
    "wb_fn, torch_fn",
    [
        (lambda x: wb.max_pool2d(x[:, :, 0], 3, 2, 1, return_indices=True),
         lambda x: F.max_pool2d(x[:, :, 0], 3, 2, 1, return_indices=True)),
        (lambda x: wb.max_pool3d(x, 2, return_indices=True),
         lambda x: F.max_pool3d(x, 2, return_indices=True)),
        (lambda x: wb.max_pool3d(x, 3, 2, 1, ceil_mode=True),
         lambda x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True)),
    ],
)  # fmt: skip
def test_integer_max_pooling(wb_fn, torch_fn, np_dtype):
    x = np.random.default_rng(0).integers(0, 100, (2, 3, 5, 6, 7)).astype(np_dtype)
    check(wb_fn, [x], torch_fn=torch_fn)


@pytest.mark.parametrize(
    "wb_fn, torch_fn",
    [
        (lambda x: wb.avg_pool1d(x[:, :, 0, 0], 3, 2, 1),
         lambda x: F.avg_pool1d(x[:, :, 0, 0], 3, 2, 1)),
        (lambda x: wb.avg_pool2d(x[:, :, 0], 3, 2, 1, count_include_pad=False),
         lambda x: F.avg_pool2d(x[:, :, 0], 3, 2, 1, count_include_pad=False)),
        (lambda x: wb.avg_pool2d(x[:, :, 0], 2, ceil_mode=True, divisor_override=3),
         lambda x: F.avg_pool2d(x[:, :, 0], 2, ceil_mode=True, divisor_override=3)),
        (lambda x: wb.avg_pool3d(x, 3, 2, 1), lambda x: F.avg_pool3d(x, 3, 2, 1)),
        (lambda x: wb.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)),
    ],
)  # fmt: skip
def test_integer_avg_pooling_divides_toward_zero(wb_fn, torch_fn):
    x = np.random.default_rng(0).integers(-50, 50, (2, 3, 5, 6, 7))
    check(wb_fn, [x], torch_fn=torch_fn)


def test_pool_errors_3d():
    with pytest.raises(DTypeError, match="max_pool3d: expected a number tensor"):
        wb.max_pool3d(wb.zeros(1, 1, 2, 2, 2, dtype=wb.bool), 2)
    with pytest.raises(DTypeError, match="avg_pool2d: expected a number tensor"):
        wb.avg_pool2d(wb.zeros(1, 1, 2, 2, dtype=wb.bool), 2)
    with pytest.raises(ShapeError, match=r"max_pool3d: expected a 5-d input \(N, C, D, H, W\)"):
        wb.max_pool3d(wb.randn(4, 4), 2)
    with pytest.raises(ShapeError, match="avg_pool3d: padding .* at most half"):
        wb.avg_pool3d(wb.randn(1, 1, 4, 4, 4), 2, padding=(0, 0, 2))
    with pytest.raises(ShapeError, match="max_pool3d: the window"):
        wb.max_pool3d(wb.randn(1, 1, 2, 4, 4), (3, 2, 2))
    with pytest.raises(ShapeError, match="adaptive_max_pool3d: output_size must be"):
        wb.adaptive_max_pool3d(wb.randn(1, 1, 4, 4, 4), (2, 2))
    with pytest.raises(DTypeError, match="adaptive_max_pool2d: expected a floating point"):
        wb.adaptive_max_pool2d(wb.zeros(1, 1, 4, 4, dtype=wb.i64), 2)


# -- layers ------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "dims, kwargs",
    [(1, dict(kernel_size=3, padding=2)), (2, dict(kernel_size=(2, 3), padding="same")),
     (3, dict(kernel_size=3, padding=1, stride=2, groups=2)),
     (3, dict(kernel_size=(2, 3, 2), padding="same", dilation=(1, 1, 2)))],
)  # fmt: skip
def test_conv_layers_match_torch(dims, kwargs, padding_mode):
    cls, ref = getattr(nn, f"Conv{dims}d"), getattr(torch.nn, f"Conv{dims}d")
    m = cls(4, 6, padding_mode=padding_mode, **kwargs)
    t = ref(4, 6, padding_mode=padding_mode, dtype=torch.float64, **kwargs)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(m.weight.numpy()))
        t.bias.copy_(torch.tensor(m.bias.numpy()))
    x = _rand(2, 4, *(5, 6, 7)[:dims])
    check(lambda x: m(x.to_dtype(wb.f32)).to_dtype(wb.f64), [x], dtype=wb.f64,
          torch_fn=lambda x: t(x), atol=1e-5, rtol=1e-5)  # fmt: skip
    assert (f"padding_mode={padding_mode}" in repr(m)) == (padding_mode != "zeros")


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_conv_transpose_layers_match_torch(dims):
    kwargs = dict(kernel_size=3, stride=2, padding=1, output_padding=1, groups=2)
    m = getattr(nn, f"ConvTranspose{dims}d")(4, 6, **kwargs)
    t = getattr(torch.nn, f"ConvTranspose{dims}d")(4, 6, dtype=torch.float64, **kwargs)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(m.weight.numpy()))
        t.bias.copy_(torch.tensor(m.bias.numpy()))
    x = _rand(2, 4, *(4, 3, 5)[:dims])
    check(lambda x: m(x.to_dtype(wb.f32)).to_dtype(wb.f64), [x], dtype=wb.f64,
          torch_fn=lambda x: t(x), atol=1e-5, rtol=1e-5)  # fmt: skip


def test_layer_argument_errors():
    with pytest.raises(ShapeError, match="padding_mode must be one of"):
        nn.Conv3d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ShapeError, match=r"padding_mode must be one of \('zeros',\)"):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ShapeError, match="padding must be ints, 'same' or 'valid'"):
        nn.Conv2d(2, 2, 3, padding="full")


def test_max_pool_layers_return_indices_in_torch_order():
    x = _rand(2, 3, 6, 7)
    check(nn.MaxPool2d(3, 2, 1, 1, True, True), [x],
          torch_fn=torch.nn.MaxPool2d(3, 2, 1, 1, True, True))  # fmt: skip
    check(nn.MaxPool1d(2, return_indices=True), [x[:, :, 0]],
          torch_fn=torch.nn.MaxPool1d(2, return_indices=True))  # fmt: skip
    check(nn.AvgPool2d(3, 2, 1, True, False, None), [x],
          torch_fn=torch.nn.AvgPool2d(3, 2, 1, True, False, None))  # fmt: skip
