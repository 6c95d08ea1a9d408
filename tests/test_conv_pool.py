"""Convolutions, pooling, upsampling and padding against torch.nn.functional: forward and
gradients, over strides, paddings, dilations, groups, dtypes, layouts and batch sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from devices import OP_DEVICE_PARAMS
from op_check import check

import workbench as wb
from workbench.errors import DTypeError, ShapeError


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


DTYPES = [wb.f32, wb.f64]
LAYOUTS = ["contiguous", "transposed"]

# -- convolutions ------------------------------------------------------------------------
# (x shape, weight shape, kwargs)
CONV2D = [
    ((1, 4, 9, 7), (6, 4, 3, 3), {}),
    ((3, 4, 9, 7), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    ((2, 3, 8, 8), (5, 3, 2, 3), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    ((2, 3, 11, 10), (4, 3, 3, 3), dict(stride=3, padding=2, dilation=2)),
    ((2, 4, 7, 9), (4, 1, 3, 3), dict(padding=1, groups=4)),  # depthwise
    ((1, 4, 7, 9), (8, 1, 3, 3), dict(stride=2, groups=4)),  # depthwise, multiplier 2
    ((2, 4, 9, 8), (8, 1, 3, 3), dict(padding=(2, 1), dilation=2, groups=4)),
    ((2, 3, 9, 8), (3, 1, 5, 5), dict(padding=2, groups=3)),  # a big depthwise kernel
    ((3, 6, 5, 7), (6, 3, 1, 1), dict(groups=2)),  # 1x1
    ((2, 3, 6, 5), (4, 3, 1, 1), dict(stride=2)),
    ((3, 2, 5, 5), (3, 2, 5, 5), {}),  # kernel as big as the input
    ((2, 3, 7, 6), (4, 3, 3, 3), dict(padding="same", dilation=2)),
    ((2, 3, 7, 6), (4, 3, 2, 4), dict(padding="same")),  # even kernel: uneven padding
    ((1, 3, 7, 6), (4, 3, 2, 3), dict(padding="valid", dilation=(2, 1))),
    ((1, 48, 16, 14), (48, 24, 3, 3), dict(padding=1, groups=2)),  # the rows path (+ bias)
]

CONV1D = [
    ((1, 4, 11), (6, 4, 3), {}),
    ((3, 4, 12), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    ((2, 3, 13), (5, 3, 4), dict(stride=3, padding=2, dilation=2)),
    ((2, 4, 9), (8, 1, 3), dict(padding=1, groups=4)),
    ((2, 3, 9), (4, 3, 1), {}),
    ((2, 3, 10), (4, 3, 4), dict(padding="same", dilation=3)),
    ((1, 3, 10), (4, 3, 3), dict(padding="valid")),
]

# (x shape, weight shape (C, O/groups, k...), kwargs)
CONV_TRANSPOSE2D = [
    ((1, 4, 5, 6), (4, 3, 3, 3), {}),
    ((3, 4, 5, 6), (4, 2, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ((2, 3, 4, 5), (3, 5, 2, 3), dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 2))),
    ((2, 3, 4, 5), (3, 2, 3, 3), dict(padding=2, output_padding=1, dilation=2)),
    ((2, 3, 5, 4), (3, 2, 3, 2), dict(stride=3, padding=1, dilation=(2, 1))),
    ((2, 4, 5, 5), (4, 1, 3, 3), dict(stride=2, groups=4)),  # depthwise
    ((2, 4, 5, 5), (4, 2, 2, 2), dict(stride=2, groups=4)),
    ((3, 6, 4, 5), (6, 2, 1, 1), dict(groups=3)),  # 1x1
    ((2, 3, 4, 4), (3, 4, 2, 2), dict(stride=2)),  # kernel == stride: no overlap
    ((2, 3, 4, 4), (3, 4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
]

CONV_TRANSPOSE1D = [
    ((1, 4, 7), (4, 3, 3), {}),
    ((3, 4, 6), (4, 2, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ((2, 3, 5), (3, 5, 4), dict(stride=3, padding=2, output_padding=2, dilation=2)),
    ((2, 4, 6), (4, 1, 3), dict(stride=2, groups=4)),
    ((2, 3, 5), (3, 4, 1), {}),
]


def _conv_case(fn_name, x_shape, w_shape, kwargs, bias, dtype, layout, seed=0, device="cpu",
               **tol):  # fmt: skip
    inputs = [_rand(*x_shape, seed=seed), _rand(*w_shape, seed=seed + 1)]
    out_channels = (
        w_shape[0] if "transpose" not in fn_name else w_shape[1] * kwargs.get("groups", 1)
    )
    if bias:
        inputs.append(_rand(out_channels, seed=seed + 2))
    wb_fn = getattr(wb, fn_name)
    torch_fn = getattr(F, fn_name)
    check(
        lambda *a: wb_fn(*a, **kwargs),
        inputs,
        dtype=dtype,
        torch_fn=lambda *a: torch_fn(*a, **kwargs),
        layouts=[layout] + ["contiguous"] * (len(inputs) - 1),
        device=device,
        **tol,
    )


def _table(cases):
    return [
        pytest.param(
            *case, bias, dtype, layout, id=f"{i}-{'b' if bias else 'nob'}-{dtype}-{layout}"
        )
        for i, case in enumerate(cases)
        for bias in (True, False)
        for dtype in DTYPES
        for layout in LAYOUTS
    ]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("x_shape, w_shape, kwargs, bias, dtype, layout", _table(CONV2D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv2d(x_shape, w_shape, kwargs, bias, dtype, layout, device):
    _conv_case("conv2d", x_shape, w_shape, kwargs, bias, dtype, layout, device=device)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("x_shape, w_shape, kwargs, bias, dtype, layout", _table(CONV1D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv1d(x_shape, w_shape, kwargs, bias, dtype, layout, device):
    _conv_case("conv1d", x_shape, w_shape, kwargs, bias, dtype, layout, device=device)


@pytest.mark.parametrize("x_shape, w_shape, kwargs, bias, dtype, layout", _table(CONV_TRANSPOSE2D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv_transpose2d(x_shape, w_shape, kwargs, bias, dtype, layout, device):
    _conv_case("conv_transpose2d", x_shape, w_shape, kwargs, bias, dtype, layout, device=device)


@pytest.mark.parametrize("x_shape, w_shape, kwargs, bias, dtype, layout", _table(CONV_TRANSPOSE1D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv_transpose1d(x_shape, w_shape, kwargs, bias, dtype, layout, device):
    _conv_case("conv_transpose1d", x_shape, w_shape, kwargs, bias, dtype, layout, device=device)


@pytest.mark.parametrize("dtype", [wb.f16, wb.bf16])
@pytest.mark.parametrize(
    "fn_name, x_shape, w_shape, kwargs",
    [
        ("conv2d", (2, 4, 6, 5), (4, 2, 3, 3), dict(padding=1, groups=2)),
        ("conv_transpose2d", (2, 4, 4, 5), (4, 3, 3, 3), dict(stride=2, padding=1)),
        ("conv1d", (2, 4, 9), (3, 4, 3), dict(stride=2)),
        ("conv_transpose1d", (2, 4, 6), (4, 3, 3), dict(stride=2, output_padding=1)),
    ],
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv_half(fn_name, x_shape, w_shape, kwargs, dtype, device):
    # inputs of a few exact bits keep the reference's own rounding out of the comparison
    _conv_case(
        fn_name,
        x_shape,
        w_shape,
        kwargs,
        True,
        dtype,
        "contiguous",
        atol=0.1,
        rtol=0.05,
        device=device,
    )


@pytest.mark.parametrize(
    "fn_name, x_shape, w_shape, kwargs",
    [
        ("conv2d", (3, 4, 9, 7), (6, 2, 3, 3), dict(padding=1, groups=2)),  # row-stacked columns
        ("conv2d", (3, 4, 9, 7), (6, 4, 3, 2), dict(stride=2, padding=1, dilation=(2, 1))),
        ("conv_transpose2d", (3, 4, 5, 6), (4, 3, 3, 3), dict(stride=2, padding=1)),  # col2im
    ],
)
def test_conv_in_row_bands(monkeypatch, fn_name, x_shape, w_shape, kwargs):
    """Inputs too big for one column buffer are convolved a band of rows at a time."""
    from workbench.backends.cpu import conv as cpu_conv

    monkeypatch.setattr(cpu_conv, "_CHUNK_BYTES", 1024)
    _conv_case(fn_name, x_shape, w_shape, kwargs, True, wb.f64, "transposed")
    monkeypatch.setattr(cpu_conv, "_CHUNK_BYTES", 14000)  # wider bands, or a few whole images
    _conv_case(fn_name, x_shape, w_shape, kwargs, True, wb.f64, "contiguous")


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_conv_sliced_weight_and_unbatched_input(device):
    x, w = _rand(3, 8, 7), _rand(4, 3, 3, 3, seed=1)
    check(
        lambda x, w: wb.conv2d(x, w, padding=1),
        [x, w],
        layouts=["sliced", "transposed"],
        torch_fn=lambda x, w: F.conv2d(x, w, padding=1),
        device=device,
    )
    check(
        lambda x, w: wb.conv_transpose1d(x, w, stride=2),
        [_rand(3, 5), _rand(3, 2, 3, seed=1)],
        torch_fn=lambda x, w: F.conv_transpose1d(x, w, stride=2),
        device=device,
    )


def test_conv_methods_and_single_gradients():
    x = wb.randn(2, 3, 6, 6)
    w = wb.randn(4, 3, 3, 3).requires_grad_()
    out = x.conv2d(w, padding=1)  # bound as a Tensor method too
    grads = out.sum().backward()
    assert x not in grads  # only the weight asked for a gradient
    tw = torch.tensor(w.numpy()).requires_grad_()
    expected = F.conv2d(torch.tensor(x.numpy()), tw, padding=1)
    expected.sum().backward()
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[w].numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)


# -- max pooling -------------------------------------------------------------------------
MAX_POOL2D = [
    ((2, 3, 9, 11), dict(kernel_size=3)),
    ((2, 3, 9, 11), dict(kernel_size=2, stride=2, ceil_mode=True)),
    ((1, 3, 9, 11), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((3, 2, 10, 9), dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), dilation=(2, 1))),
    ((2, 2, 8, 8), dict(kernel_size=3, stride=1, padding=1)),
    ((2, 2, 7, 8), dict(kernel_size=3, stride=2, dilation=2, ceil_mode=True)),
    ((2, 2, 5, 5), dict(kernel_size=5)),
]
MAX_POOL1D = [
    ((2, 3, 13), dict(kernel_size=3)),
    ((2, 3, 13), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((3, 2, 12), dict(kernel_size=2, stride=3, dilation=3)),
]


def _pool_table(cases):
    return [
        pytest.param(shape, kwargs, dtype, layout, id=f"{i}-{dtype}-{layout}")
        for i, (shape, kwargs) in enumerate(cases)
        for dtype in DTYPES
        for layout in LAYOUTS
    ]


@pytest.mark.parametrize("shape, kwargs, dtype, layout", _pool_table(MAX_POOL2D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_max_pool2d(shape, kwargs, dtype, layout, device):
    check(
        lambda x: wb.max_pool2d(x, return_indices=True, **kwargs),
        [_rand(*shape)],
        dtype=dtype,
        torch_fn=lambda x: F.max_pool2d(x, return_indices=True, **kwargs),
        layouts=[layout],
        device=device,
    )


@pytest.mark.parametrize("shape, kwargs, dtype, layout", _pool_table(MAX_POOL1D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_max_pool1d(shape, kwargs, dtype, layout, device):
    check(
        lambda x: wb.max_pool1d(x, return_indices=True, **kwargs),
        [_rand(*shape)],
        dtype=dtype,
        torch_fn=lambda x: F.max_pool1d(x, return_indices=True, **kwargs),
        layouts=[layout],
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_max_pool_ties_pick_the_first_and_nan_wins(device):
    ties = np.random.default_rng(0).integers(0, 3, (2, 3, 8, 8)).astype(np.float64)
    check(
        lambda x: wb.max_pool2d(x, 3, 2, 1, return_indices=True),
        [ties],
        torch_fn=lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
        device=device,
    )
    with_nan = _rand(1, 1, 4, 4)
    with_nan[0, 0, 1, 2] = np.nan
    check(
        lambda x: wb.max_pool2d(x, 2),
        [with_nan],
        torch_fn=lambda x: F.max_pool2d(x, 2),
        device=device,
    )
    # a window of -inf (padding included) reports its first real element
    neg_inf = _rand(1, 2, 5, 5)
    neg_inf[0, 0, :2, :2] = -np.inf
    check(
        lambda x: wb.max_pool2d(x, 3, 2, 1, return_indices=True),
        [neg_inf],
        torch_fn=lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
        grad=False,
        device=device,
    )


# -- average pooling ---------------------------------------------------------------------
AVG_POOL2D = [
    ((2, 3, 9, 11), dict(kernel_size=3)),
    ((2, 3, 9, 11), dict(kernel_size=2, stride=2, ceil_mode=True)),
    ((1, 3, 9, 11), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (
        (1, 3, 9, 11),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    ),
    (
        (3, 2, 10, 9),
        dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), count_include_pad=False),
    ),
    ((2, 2, 8, 8), dict(kernel_size=3, stride=1, padding=1, divisor_override=4)),
    ((2, 2, 7, 7), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
]
AVG_POOL1D = [
    ((2, 3, 13), dict(kernel_size=3)),
    ((2, 3, 13), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((3, 2, 12), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
]


@pytest.mark.parametrize("shape, kwargs, dtype, layout", _pool_table(AVG_POOL2D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_avg_pool2d(shape, kwargs, dtype, layout, device):
    check(
        lambda x: wb.avg_pool2d(x, **kwargs),
        [_rand(*shape)],
        dtype=dtype,
        torch_fn=lambda x: F.avg_pool2d(x, **kwargs),
        layouts=[layout],
        device=device,
    )


@pytest.mark.parametrize("shape, kwargs, dtype, layout", _pool_table(AVG_POOL1D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_avg_pool1d(shape, kwargs, dtype, layout, device):
    check(
        lambda x: wb.avg_pool1d(x, **kwargs),
        [_rand(*shape)],
        dtype=dtype,
        torch_fn=lambda x: F.avg_pool1d(x, **kwargs),
        layouts=[layout],
        device=device,
    )


# -- adaptive pooling --------------------------------------------------------------------
ADAPTIVE2D = [
    ((2, 3, 9, 11), 1),
    ((2, 3, 9, 11), 4),
    ((2, 3, 9, 11), (3, 5)),
    ((2, 3, 9, 11), (7, 13)),  # more outputs than inputs along W
    ((1, 3, 8, 12), (4, 6)),  # divisible
    ((2, 3, 9, 11), (None, 4)),
]
ADAPTIVE1D = [((2, 3, 13), 1), ((2, 3, 13), 5), ((2, 3, 12), 4), ((2, 3, 5), 8)]


@pytest.mark.parametrize("shape, size, dtype, layout", _pool_table(ADAPTIVE2D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_adaptive_avg_pool2d(shape, size, dtype, layout, device):
    check(
        lambda x: wb.adaptive_avg_pool2d(x, size),
        [_rand(*shape)],
        dtype=dtype,
        torch_fn=lambda x: F.adaptive_avg_pool2d(x, size),
        layouts=[layout],
        device=device,
    )


@pytest.mark.parametrize("shape, size, dtype, layout", _pool_table(ADAPTIVE1D))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_adaptive_avg_pool1d(shape, size, dtype, layout, device):
    check(
        lambda x: wb.adaptive_avg_pool1d(x, size),
        [_rand(*shape)],
        dtype=dtype,
        torch_fn=lambda x: F.adaptive_avg_pool1d(x, size),
        layouts=[layout],
        device=device,
    )


# -- upsampling --------------------------------------------------------------------------
RESIZE = [
    dict(size=(18, 22)),
    dict(size=(5, 7)),  # downsampling
    dict(size=(13, 30)),
    dict(size=9),
    dict(scale_factor=2),
    dict(scale_factor=1.7),
    dict(scale_factor=(0.5, 2.3)),
    dict(scale_factor=3),
    dict(scale_factor=(1.05, 2.06)),  # sizes kept / doubled by an odd scale
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", RESIZE, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_upsample_nearest2d(kwargs, dtype, layout, device):
    check(
        lambda x: wb.upsample_nearest2d(x, **kwargs),
        [_rand(2, 3, 9, 11)],
        dtype=dtype,
        torch_fn=lambda x: F.interpolate(x, mode="nearest", **kwargs),
        layouts=[layout],
        device=device,
    )


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", RESIZE, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_upsample_bilinear2d(kwargs, dtype, align_corners, device):
    check(
        lambda x: wb.upsample_bilinear2d(x, align_corners=align_corners, **kwargs),
        [_rand(2, 3, 9, 11)],
        dtype=dtype,
        torch_fn=lambda x: F.interpolate(x, mode="bilinear", align_corners=align_corners, **kwargs),
        layouts=["transposed"],
        device=device,
    )


@pytest.mark.parametrize(
    "shape, kwargs",
    [
        ((2, 3, 9, 11), dict(scale_factor=2, mode="bilinear")),
        ((2, 3, 9, 11), dict(size=(4, 20), mode="bilinear", align_corners=True)),
        ((2, 3, 9, 11), dict(scale_factor=1.5)),
        ((2, 3, 13), dict(size=20)),
        ((2, 3, 13), dict(scale_factor=0.6, mode="nearest")),
        ((2, 3, 13), dict(scale_factor=1.5, mode="linear")),
        ((1, 3, 13), dict(size=4, mode="linear", align_corners=True)),
        ((1, 3, 13), dict(scale_factor=1.05, mode="linear")),
    ],
    ids=str,
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_interpolate(shape, kwargs, device):
    check(
        lambda x: wb.interpolate(x, **kwargs),
        [_rand(*shape)],
        torch_fn=lambda x: F.interpolate(x, **kwargs),
        device=device,
    )


# -- padding -----------------------------------------------------------------------------
PAD = [
    ((2, 3, 9, 11), (1, 2), "constant"),
    ((2, 3, 9, 11), (2, 1, 0, 3), "constant"),
    ((2, 3, 9, 11), (1, 1, 1, 1, 2, 0), "constant"),
    ((2, 3, 9, 11), (-1, 2, 3, -2), "constant"),  # negative pads crop
    ((2, 3, 9, 11), (2, 1, 0, 3), "reflect"),
    ((2, 3, 9, 11), (8, 10, 8, 7), "reflect"),
    ((2, 3, 9), (2, 5), "reflect"),
    ((2, 3, 9, 11), (2, 1, 0, 3), "replicate"),
    ((2, 3, 9, 11), (12, 10, 8, 13), "replicate"),
    ((2, 3, 9), (4, 0), "replicate"),
    ((2, 3, 9, 11), (2, 1, 0, 3), "circular"),
    ((2, 3, 9, 11), (11, 3, 9, 9), "circular"),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, amounts, mode", PAD, ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_pad(shape, amounts, mode, dtype, layout, device):
    value = 0.5 if mode == "constant" else None
    extra = {} if value is None else dict(value=value)
    check(
        lambda x: wb.pad(x, amounts, mode, **extra),
        [_rand(*shape)],
        dtype=dtype,
        torch_fn=lambda x: F.pad(x, amounts, mode, **extra),
        layouts=[layout],
        device=device,
    )


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_pad_integer_tensor(device):
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    check(
        lambda x: wb.pad(x, (1, 2, 0, 1), value=-1),
        [x],
        torch_fn=lambda x: F.pad(x, (1, 2, 0, 1), value=-1),
        device=device,
    )


# -- half precision pools ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [wb.f16, wb.bf16])
@pytest.mark.parametrize(
    "wb_fn, torch_fn",
    [
        (lambda x: wb.max_pool2d(x, 3, 2, 1), lambda x: F.max_pool2d(x, 3, 2, 1)),
        (lambda x: wb.avg_pool2d(x, 3, 2, 1), lambda x: F.avg_pool2d(x, 3, 2, 1)),
        (lambda x: wb.adaptive_avg_pool2d(x, 3), lambda x: F.adaptive_avg_pool2d(x, 3)),
        (
            lambda x: wb.upsample_bilinear2d(x, scale_factor=2),
            lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        ),
        (lambda x: wb.upsample_nearest2d(x, size=(9, 7)), lambda x: F.interpolate(x, size=(9, 7))),
        (lambda x: wb.pad(x, (1, 2, 2, 1), "reflect"), lambda x: F.pad(x, (1, 2, 2, 1), "reflect")),
    ],
)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_pool_half(wb_fn, torch_fn, dtype, device):
    check(
        wb_fn,
        [_rand(2, 3, 7, 8)],
        dtype=dtype,
        torch_fn=torch_fn,
        atol=0.05,
        rtol=0.05,
        device=device,
    )


# -- empty and size-1 inputs ------------------------------------------------------------
EDGE = [
    (lambda x, w: wb.conv2d(x, w, padding=1), lambda x, w: F.conv2d(x, w, padding=1), (3, 3, 3, 3)),
    (lambda x, w: wb.conv2d(x, w, stride=2), lambda x, w: F.conv2d(x, w, stride=2), (4, 3, 1, 1)),
    (lambda x, w: wb.conv2d(x, w, padding=1, groups=3),
     lambda x, w: F.conv2d(x, w, padding=1, groups=3), (3, 1, 3, 3)),
    (lambda x, w: wb.conv_transpose2d(x, w, stride=2),
     lambda x, w: F.conv_transpose2d(x, w, stride=2), (3, 2, 3, 3)),
    (lambda x: wb.max_pool2d(x, (2, 1), 1), lambda x: F.max_pool2d(x, (2, 1), 1), None),
    (lambda x: wb.avg_pool2d(x, 3, 1, 1), lambda x: F.avg_pool2d(x, 3, 1, 1), None),
    (lambda x: wb.adaptive_avg_pool2d(x, 2), lambda x: F.adaptive_avg_pool2d(x, 2), None),
    (lambda x: wb.interpolate(x, scale_factor=2, mode="bilinear"),
     lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), None),
    (lambda x: wb.interpolate(x, size=(3, 5)), lambda x: F.interpolate(x, size=(3, 5)), None),
    (lambda x: wb.pad(x, (1, 1, 0, 1), "replicate"),
     lambda x: F.pad(x, (1, 1, 0, 1), "replicate"), None),
]  # fmt: skip


@pytest.mark.parametrize("x_shape", [(0, 3, 6, 5), (1, 3, 2, 1)], ids=str)
@pytest.mark.parametrize("wb_fn, torch_fn, w_shape", EDGE)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_empty_batch_and_size_one(wb_fn, torch_fn, w_shape, x_shape, device):
    inputs = [_rand(*x_shape)] + ([] if w_shape is None else [_rand(*w_shape, seed=1)])
    check(wb_fn, inputs, torch_fn=torch_fn, device=device)


@pytest.mark.parametrize("groups", [4, 1], ids=["depthwise", "dense"])
def test_empty_image_padded_gives_the_bias(groups):
    """An image of no rows, padded, convolved by a 1×1 kernel: every output is its channel's
    bias (the sum over the padding's zeros plus b). PyTorch refuses such inputs; the depthwise
    kernel and the dense paths agree with the maths."""
    x = wb.zeros(1, 4, 0, 3)
    bias = wb.tensor(np.arange(1, 5, dtype=np.float32))
    y = wb.conv2d(x, wb.ones(4, 4 // groups, 1, 1), bias, padding=1, groups=groups)
    assert y.shape == (1, 4, 2, 5)
    np.testing.assert_array_equal(
        y.numpy(), np.broadcast_to(bias.numpy()[:, None, None], (1, 4, 2, 5))
    )


# -- errors ------------------------------------------------------------------------------
def test_conv_errors():
    x = wb.randn(2, 4, 8, 8)
    with pytest.raises(
        ShapeError, match=r"conv2d: .*expects 3 input channels.*Tensor\[2, 4, 8, 8\]"
    ):
        wb.conv2d(x, wb.randn(5, 3, 3, 3))
    with pytest.raises(ShapeError, match=r"conv2d: weight must have 4 dims.*Tensor\[5, 4, 3\]"):
        wb.conv2d(x, wb.randn(5, 4, 3))
    with pytest.raises(ShapeError, match=r"conv2d: expected a 4-d input.*Tensor\[8, 8\]"):
        wb.conv2d(wb.randn(8, 8), wb.randn(5, 4, 3, 3))
    with pytest.raises(
        ShapeError, match=r"conv2d: groups=3 does not divide the input channels \(4\)"
    ):
        wb.conv2d(x, wb.randn(6, 1, 3, 3), groups=3)
    with pytest.raises(
        ShapeError, match=r"conv2d: groups=2 does not divide the weight dim 0 \(5\)"
    ):
        wb.conv2d(x, wb.randn(5, 2, 3, 3), groups=2)
    with pytest.raises(
        ShapeError,
        match=r"conv2d: the kernel .* bigger than the padded input.*Tensor\[2, 4, 8, 8\]",
    ):
        wb.conv2d(x, wb.randn(5, 4, 9, 3), padding=0)
    with pytest.raises(ShapeError, match=r"conv1d: the kernel .* bigger than the padded input"):
        wb.conv1d(wb.randn(1, 2, 4), wb.randn(3, 2, 3), dilation=2)
    with pytest.raises(ShapeError, match=r"conv2d: bias must have shape \(5,\)"):
        wb.conv2d(x, wb.randn(5, 4, 3, 3), wb.randn(4))
    with pytest.raises(ShapeError, match=r"padding='same' needs stride 1"):
        wb.conv2d(x, wb.randn(5, 4, 3, 3), padding="same", stride=2)
    with pytest.raises(ShapeError, match=r"conv2d: padding must be"):
        wb.conv2d(x, wb.randn(5, 4, 3, 3), padding="full")
    with pytest.raises(ShapeError, match=r"conv2d: stride must be >= 1"):
        wb.conv2d(x, wb.randn(5, 4, 3, 3), stride=0)
    with pytest.raises(DTypeError, match=r"conv2d: input, weight and bias need one dtype"):
        wb.conv2d(x, wb.randn(5, 4, 3, 3, dtype=wb.f64))
    with pytest.raises(DTypeError, match=r"conv2d: expected a floating point input"):
        wb.conv2d(wb.zeros(1, 4, 5, 5, dtype=wb.i64), wb.zeros(2, 4, 3, 3, dtype=wb.i64))


def test_conv_transpose_errors():
    x = wb.randn(2, 4, 5, 5)
    with pytest.raises(
        ShapeError, match=r"conv_transpose2d: .*expects 3 input channels.*Tensor\[2, 4, 5, 5\]"
    ):
        wb.conv_transpose2d(x, wb.randn(3, 2, 3, 3))
    with pytest.raises(
        ShapeError, match=r"conv_transpose2d: output_padding \(2, 2\) must be smaller"
    ):
        wb.conv_transpose2d(x, wb.randn(4, 2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(ShapeError, match=r"conv_transpose2d: the output size .* is not positive"):
        wb.conv_transpose2d(x, wb.randn(4, 2, 1, 1), padding=3)
    with pytest.raises(ShapeError, match=r"conv_transpose1d: weight must have 3 dims"):
        wb.conv_transpose1d(wb.randn(2, 4, 5), wb.randn(4, 2, 3, 3))
    with pytest.raises(ShapeError, match=r"conv_transpose2d: groups=3 does not divide"):
        wb.conv_transpose2d(x, wb.randn(4, 2, 3, 3), groups=3)


def test_pool_errors():
    x = wb.randn(2, 3, 6, 6)
    with pytest.raises(ShapeError, match=r"max_pool2d: padding \(2, 2\) must be at most half"):
        wb.max_pool2d(x, 3, padding=2)
    with pytest.raises(
        ShapeError,
        match=r"max_pool2d: the window .* bigger than the padded input.*Tensor\[2, 3, 6, 6\]",
    ):
        wb.max_pool2d(x, 7)
    with pytest.raises(ShapeError, match=r"avg_pool1d: expected a 3-d input"):
        wb.avg_pool1d(x, 2)
    with pytest.raises(DTypeError, match=r"avg_pool2d: expected a number tensor"):
        wb.avg_pool2d(wb.zeros(1, 1, 4, 4, dtype=wb.bool), 2)  # integers average (as torch)
    with pytest.raises(DTypeError, match=r"adaptive_avg_pool2d: expected a floating point"):
        wb.adaptive_avg_pool2d(wb.zeros(1, 1, 4, 4, dtype=wb.i32), 2)
    with pytest.raises(ShapeError, match=r"adaptive_avg_pool2d: output_size must be"):
        wb.adaptive_avg_pool2d(x, (2, 3, 4))
    with pytest.raises(
        ShapeError, match=r"upsample_nearest2d: give exactly one of size and scale_factor"
    ):
        wb.upsample_nearest2d(x, size=4, scale_factor=2)
    with pytest.raises(ShapeError, match=r"interpolate: mode 'bilinear' needs a 4-d input"):
        wb.interpolate(wb.randn(2, 3, 5), scale_factor=2, mode="bilinear")
    with pytest.raises(
        ShapeError, match=r"interpolate: align_corners is only for the linear and cubic modes"
    ):
        wb.interpolate(x, scale_factor=2, align_corners=True)


def test_pad_errors():
    x = wb.randn(2, 3, 4)
    with pytest.raises(ShapeError, match=r"pad: the pad \(1, 2, 3\) must hold an even number"):
        wb.pad(x, (1, 2, 3))
    with pytest.raises(ShapeError, match=r"pad: .* at most 2 per dim \(6 for Tensor\[2, 3, 4\]"):
        wb.pad(x, (1,) * 8)
    with pytest.raises(
        ShapeError, match=r"pad: mode 'reflect' needs pads < the dim size, found \(4, 0\) for dim 2"
    ):
        wb.pad(x, (4, 0), "reflect")
    with pytest.raises(ShapeError, match=r"pad: mode 'circular' needs pads <= the dim size"):
        wb.pad(x, (0, 0, 4, 0), "circular")
    with pytest.raises(ShapeError, match=r"pad: pad \(-6, 1\) crops dim 2"):
        wb.pad(x, (-6, 1), "replicate")
    with pytest.raises(ShapeError, match=r"pad: mode must be one of"):
        wb.pad(x, (1, 1), "symmetric")
    with pytest.raises(ShapeError, match=r"pad: pad \(-3, -2\) crops dim 2"):
        wb.pad(x, (-3, -2))
