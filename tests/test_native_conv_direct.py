"""The implicit-GEMM f32 convolution (kernels/cpu/core/conv_direct.c) against PyTorch in f64:
random geometries whose output channels end inside a register block, whose grids end inside
a micro-tile or a unit of work, with strides, dilations, pads and crops; and the errors of its
Python call. The op tables (test_native_conv.py and the nn tests) reach it through conv2d."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.backends.cpu import conv as cpu_conv
from workbench.backends.cpu.native import NATIVE

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not cpu_conv._DIRECT_CONV, reason="this variant of the native extension has no conv_direct"
)
F = torch.nn.functional


def _reference(x, w, b, stride, dilation, origin, out_hw):
    """y by torch in f64: x padded by ``origin`` (negative: cropped) before and far enough
    after, convolved without padding, cut to ``out_hw``."""
    (top, left), (ho, wo) = origin, out_hw
    xt = torch.tensor(x, dtype=torch.float64)
    xt = F.pad(xt, (left, 3 * w.shape[3] * dilation[1], top, 3 * w.shape[2] * dilation[0]))
    wt, bt = torch.tensor(w, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    y = F.conv2d(xt, wt, bt, stride=stride, dilation=dilation)
    return y[..., :ho, :wo].numpy()


def _random_case(rng):
    n, c, o = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(1, 20))
    kh, kw = (int(k) for k in rng.integers(1, 6, 2))
    stride = tuple(int(s) for s in rng.integers(1, 4, 2))
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    origin = tuple(int(p) for p in rng.integers(-2, 4, 2))
    h, w = (int(s) for s in rng.integers(1, 60, 2))
    # outputs whose taps start inside the padded input
    ho = max(1, (h + 2 * max(origin[0], 0) - dilation[0] * (kh - 1) - 1) // stride[0] + 1)
    wo = max(1, (w + 2 * max(origin[1], 0) - dilation[1] * (kw - 1) - 1) // stride[1] + 1)
    return (n, c, h, w), (o, c, kh, kw), stride, dilation, origin, (ho, wo)


def _run(x, w, b, stride, dilation, origin, out_hw):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    y = np.full((n, o, *out_hw), np.nan, np.float32)
    NATIVE.conv_direct(x, w, b, y, n, c, h, wd, o, kh, kw, *stride, *dilation, *out_hw, *origin)
    return y


@pytest.mark.parametrize("seed", range(24))
def test_random_geometries_match_torch(seed):
    rng = np.random.default_rng(seed)
    x_shape, w_shape, stride, dilation, origin, out_hw = _random_case(rng)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal(w_shape, dtype=np.float32)
    b = rng.standard_normal(w_shape[0], dtype=np.float32)
    got = _run(x, w, b, stride, dilation, origin, out_hw)
    want = _reference(x, w, b, stride, dilation, origin, out_hw)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(w[0].size))


@pytest.mark.parametrize("width", [1, 5, 15, 16, 17, 46, 47, 48, 49, 95, 97, 200])
@pytest.mark.parametrize("channels", [1, 3, 4, 5, 8, 9, 17])
def test_widths_and_channel_blocks_at_3x3(width, channels):
    """Grids of width + 2 ending on both sides of the micro-tiles (24 or 48 pixels) and units
    (96 or 192), output channels on both sides of the register blocks (4 or 8)."""
    rng = np.random.default_rng(width * 31 + channels)
    x = rng.standard_normal((2, 3, 5, width), dtype=np.float32)
    w = rng.standard_normal((channels, 3, 3, 3), dtype=np.float32)
    b = rng.standard_normal(channels, dtype=np.float32)
    got = _run(x, w, b, (1, 1), (1, 1), (1, 1), (5, width))
    want = _reference(x, w, b, (1, 1), (1, 1), (1, 1), (5, width))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * 27**0.5)


def test_conv2d_of_f32_takes_it_and_matches_torch(monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 33, 40), dtype=np.float32)
    w = rng.standard_normal((24, 16, 3, 3), dtype=np.float32)
    calls = []
    direct = cpu_conv._conv_direct

    def spy(*args):
        calls.append(args[3])
        return direct(*args)

    monkeypatch.setattr(cpu_conv, "_conv_direct", spy)
    y = wb.nn.functional.conv2d(wb.tensor(x), wb.tensor(w), stride=2, padding=1).numpy()
    want = F.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                    stride=2, padding=1).numpy()  # fmt: skip
    assert calls == [(2, 2)]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("channels, direct", [(3, True), (64, True), (65, False), (96, False)])
def test_pointwise_conv2d_takes_it_up_to_64_input_channels(monkeypatch, channels, direct):
    """A 1×1 stride-1 convolution runs as the implicit product from at most 64 input channels
    (measured faster than one BLAS product there), as a matrix product beyond."""
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((2, channels, 9, 13), dtype=np.float32)
    w = rng.standard_normal((20, channels, 1, 1), dtype=np.float32)
    b = rng.standard_normal(20, dtype=np.float32)
    calls = []
    original = cpu_conv._conv_direct
    monkeypatch.setattr(cpu_conv, "_conv_direct", lambda *a: calls.append(a) or original(*a))
    y = wb.nn.functional.conv2d(wb.tensor(x), wb.tensor(w), wb.tensor(b)).numpy()
    want = F.conv2d(*(torch.tensor(a, dtype=torch.float64) for a in (x, w, b))).numpy()
    assert len(calls) == int(direct)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


def test_bad_arguments_raise_clear_errors():
    x = np.zeros((1, 2, 5, 5), np.float32)
    w = np.zeros((3, 2, 3, 3), np.float32)
    y = np.zeros((1, 3, 3, 3), np.float32)
    geometry = (1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 3, 3, 0, 0)
    NATIVE.conv_direct(x, w, None, y, *geometry)
    with pytest.raises(ValueError, match=r"the geometry: expected 50, 54, 27 \(bias 3\)"):
        NATIVE.conv_direct(x, w, None, y[:, :2].copy(), *geometry)
    with pytest.raises(TypeError, match="expected f32 arrays"):
        NATIVE.conv_direct(x.astype(np.float64), w, None, y, *geometry)
    with pytest.raises(ValueError, match="must be >= 1"):
        NATIVE.conv_direct(x, w, None, y, *geometry[:7], 0, *geometry[8:])
    with pytest.raises(TypeError, match="expected 19 arguments, found 4"):
        NATIVE.conv_direct(x, w, None, y)
