"""The implicit-GEMM f32 convolution (kernels/cpu/core/conv_direct.c) and its weight gradient
against PyTorch in f64: random geometries whose output channels end inside a register block,
whose grids end inside a micro-tile or a unit of work, with strides, dilations, pads and crops;
and the errors of their Python calls. The op tables (test_native_conv.py and the nn tests)
reach them through conv2d and its backward."""

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
    NATIVE.conv_direct(x, w, b, y, n, c, h, wd, o, kh, kw, *stride, *dilation, *out_hw, *origin, 0)
    return y


def _spy(monkeypatch, name: str) -> list:
    """The calls (their arguments) of conv.py's function ``name`` from now on; it still runs."""
    calls = []
    original = getattr(cpu_conv, name)
    monkeypatch.setattr(cpu_conv, name, lambda *args: calls.append(args) or original(*args))
    return calls


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


@pytest.mark.parametrize("width", [6, 17, 30, 41, 45, 90])
@pytest.mark.parametrize(
    "kernel, stride, dilation",
    [(3, (1, 1), (1, 1)), (3, (2, 2), (1, 1)), (5, (1, 2), (2, 1)), (3, (2, 1), (1, 2)),
     (1, (2, 2), (1, 1))],
)  # fmt: skip
def test_column_shifted_and_phase_planes_at_strides_and_dilations(width, kernel, stride, dilation):
    """With 130 output channels (past the register blocks) narrow outputs take column-shifted
    planes, a grid exactly Wo wide (O · wasted / Wq columns >= 8: up to Wo = 30 at 3×3 and
    stride 1, 15 at stride 2); wider ones the phase planes. Both at strides and dilations,
    with tails of every length."""
    rng = np.random.default_rng(width * 7 + kernel)
    x = rng.standard_normal((2, 5, 7, width), dtype=np.float32)
    w = rng.standard_normal((130, 5, kernel, kernel), dtype=np.float32)
    b = rng.standard_normal(130, dtype=np.float32)
    out_hw = tuple(
        (size + 2 - d * (kernel - 1) - 1) // s + 1
        for size, s, d in zip((7, width), stride, dilation, strict=True)
    )
    got = _run(x, w, b, stride, dilation, (1, 1), out_hw)
    want = _reference(x, w, b, stride, dilation, (1, 1), out_hw)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(w[0].size))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 2, 9])
@pytest.mark.parametrize("width", [20, 61])
def test_images_prepared_one_by_one_or_all_first(threads, batch, width):
    """Past the threading threshold, 2 threads prepare all images first and share their units
    when the batch is small (1, 2), else each thread prepares and computes whole images (9),
    as one thread always does; on column-shifted planes (20 wide, 136 output channels) and
    phase planes (61)."""
    rng = np.random.default_rng(batch * 100 + width)
    x = rng.standard_normal((batch, 16, 12, width), dtype=np.float32)
    w = rng.standard_normal((136, 16, 3, 3), dtype=np.float32)
    b = rng.standard_normal(136, dtype=np.float32)
    before = wb.get_num_threads()
    wb.set_num_threads(threads)
    try:
        got = _run(x, w, b, (1, 1), (1, 1), (1, 1), (12, width))
    finally:
        wb.set_num_threads(before)
    want = _reference(x, w, b, (1, 1), (1, 1), (1, 1), (12, width))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(w[0].size))


def test_conv2d_of_f32_takes_it_and_matches_torch(monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 33, 40), dtype=np.float32)
    w = rng.standard_normal((24, 16, 3, 3), dtype=np.float32)
    calls = _spy(monkeypatch, "_conv_direct")
    y = wb.nn.functional.conv2d(wb.tensor(x), wb.tensor(w), stride=2, padding=1).numpy()
    want = F.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                    stride=2, padding=1).numpy()  # fmt: skip
    assert [args[3] for args in calls] == [(2, 2)]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("channels, direct", [(3, True), (64, True), (65, False), (96, False)])
def test_pointwise_conv2d_takes_it_up_to_64_input_channels(monkeypatch, channels, direct):
    """A 1×1 stride-1 convolution runs as the implicit product from at most 64 input channels
    (measured faster than one BLAS product there), as a matrix product beyond."""
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((2, channels, 9, 13), dtype=np.float32)
    w = rng.standard_normal((20, channels, 1, 1), dtype=np.float32)
    b = rng.standard_normal(20, dtype=np.float32)
    calls = _spy(monkeypatch, "_conv_direct")
    y = wb.nn.functional.conv2d(wb.tensor(x), wb.tensor(w), wb.tensor(b)).numpy()
    want = F.conv2d(*(torch.tensor(a, dtype=torch.float64) for a in (x, w, b))).numpy()
    assert len(calls) == int(direct)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "batch, channels, size, direct",
    [(2, 127, 8, True), (2, 128, 8, False), (2, 128, 15, True), (1, 300, 20, False)],
)
def test_few_pixels_of_many_channels_take_im2col_on_avx2(
    monkeypatch, batch, channels, size, direct
):
    """On AVX2, from 128 input channels a batch of at most 400 output pixels runs as im2col and
    BLAS (measured 1.05-1.6× faster than the implicit product at 8²-20²); AVX-512's implicit
    product takes them all."""
    rng = np.random.default_rng(channels + size)
    x = rng.standard_normal((batch, channels, size, size), dtype=np.float32)
    w = rng.standard_normal((8, channels, 3, 3), dtype=np.float32)
    calls = _spy(monkeypatch, "_conv_direct")
    y = wb.nn.functional.conv2d(wb.tensor(x), wb.tensor(w), padding=1).numpy()
    want = F.conv2d(*(torch.tensor(a, dtype=torch.float64) for a in (x, w)), padding=1).numpy()
    assert len(calls) == int(direct or NATIVE.variant() == "avx512")
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("hw", [(1, 1), (4, 4), (3, 5), (2, 20), (1, 45), (5, 7)])
@pytest.mark.parametrize("channels", [1, 15, 16, 17, 32, 33, 50])
def test_small_grids_by_channels(hw, channels):
    """Grids of fewer than 48 pixels (24 on AVX2; Ho · (Wo + 2) here) take the channel form:
    tiles of 12 (AVX2: 6) pixels ending inside and past the grid, output channels in one
    vector (up to 16, AVX2: 8) or blocks of two, ending inside a block."""
    rng = np.random.default_rng(hw[0] * 100 + hw[1] + channels)
    x = rng.standard_normal((3, 5, *hw), dtype=np.float32)
    w = rng.standard_normal((channels, 5, 3, 3), dtype=np.float32)
    b = rng.standard_normal(channels, dtype=np.float32)
    got = _run(x, w, b, (1, 1), (1, 1), (1, 1), hw)
    want = _reference(x, w, b, (1, 1), (1, 1), (1, 1), hw)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * 45**0.5)


def test_bad_arguments_raise_clear_errors():
    x = np.zeros((1, 2, 5, 5), np.float32)
    w = np.zeros((3, 2, 3, 3), np.float32)
    y = np.zeros((1, 3, 3, 3), np.float32)
    geometry = (1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 3, 3, 0, 0, 0)  # (the last: no activation)
    NATIVE.conv_direct(x, w, None, y, *geometry)
    with pytest.raises(ValueError, match="array 2 has 18 elements, the geometry expects 27"):
        NATIVE.conv_direct(x, w, None, y[:, :2].copy(), *geometry)
    with pytest.raises(TypeError, match="expected f32 arrays"):
        NATIVE.conv_direct(x.astype(np.float64), w, None, y, *geometry)
    with pytest.raises(ValueError, match="must be >= 1"):
        NATIVE.conv_direct(x, w, None, y, *geometry[:7], 0, *geometry[8:])
    with pytest.raises(ValueError, match=r"act must be in \[0, 5\), found 7"):
        NATIVE.conv_direct(x, w, None, y, *geometry[:-1], 7)
    with pytest.raises(TypeError, match="expected 20 arguments, found 4"):
        NATIVE.conv_direct(x, w, None, y)


def _weight_grad(x, g, kernel, stride, dilation, origin):
    n, c, h, wd = x.shape
    _, o, ho, wo = g.shape
    dk = np.full((o, c, *kernel), np.nan, np.float32)
    NATIVE.conv_direct_wgrad(x, g, dk, n, c, h, wd, o, *kernel, *stride, *dilation, ho, wo,
                             *origin)  # fmt: skip
    return dk


def _weight_grad_reference(x, g, kernel, stride, dilation, origin):
    """dk by torch's autograd in f64, over the forward of ``_reference``."""
    o = g.shape[1]
    wt = torch.zeros((o, x.shape[1], *kernel), dtype=torch.float64, requires_grad=True)
    (top, left), (ho, wo) = origin, g.shape[2:]
    xt = torch.tensor(x, dtype=torch.float64)
    xt = F.pad(xt, (left, 3 * kernel[1] * dilation[1], top, 3 * kernel[0] * dilation[0]))
    y = F.conv2d(xt, wt, stride=stride, dilation=dilation)[..., :ho, :wo]
    y.backward(torch.tensor(g, dtype=torch.float64))
    return wt.grad.numpy()


def _check_weight_grad(rng, x_shape, o, kernel, stride, dilation, origin, out_hw):
    x = rng.standard_normal(x_shape, dtype=np.float32)
    g = rng.standard_normal((x_shape[0], o, *out_hw), dtype=np.float32)
    got = _weight_grad(x, g, kernel, stride, dilation, origin)
    want = _weight_grad_reference(x, g, kernel, stride, dilation, origin)
    terms = x_shape[0] * out_hw[0] * out_hw[1]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(terms))


@pytest.mark.parametrize("seed", range(24))
def test_weight_gradient_of_random_geometries_matches_torch(seed):
    rng = np.random.default_rng(seed + 100)
    x_shape, (o, _, kh, kw), stride, dilation, origin, out_hw = _random_case(rng)
    _check_weight_grad(rng, x_shape, o, (kh, kw), stride, dilation, origin, out_hw)


@pytest.mark.parametrize(
    "n, c, o, size",
    [
        (1, 1, 1, 1),  # one output pixel: a single unit
        (5, 1, 7, 16),  # the row form (few taps, 16 wide), 7 channels: a part block of 3
        (3, 6, 33, 40),  # the row form at its 6-channel limit, images over 512 pixels in rows
        (3, 7, 33, 40),  # 7 channels: outer products, rows of one image per unit
        (7, 16, 17, 4),  # tiny images: runs of images (7 of them: runs of 7), 17 channels
        (64, 3, 5, 8),  # 8 wide: the row form's 8-lane bound on AVX2, outer products on AVX-512
        (1, 40, 40, 6),  # one pixel unit: the taps split into runs across threads
    ],
)
def test_weight_gradient_units_forms_and_blocks(n, c, o, size):
    """Both forms (rows for few taps on wide images, outer products else), output channels
    ending inside a block, units of whole images, of rows, and of runs of taps."""
    rng = np.random.default_rng(n * 1000 + c * 10 + o)
    _check_weight_grad(rng, (n, c, size, size), o, (3, 3), (1, 1), (1, 1), (1, 1), (size, size))


@pytest.mark.parametrize("width", [8, 21])
def test_weight_gradient_reads_nothing_past_the_outputs_columns(width):
    """An inf at the start of a row: the taps of real outputs that read it give inf, as in
    torch; a read past a row's last output (a vector's lanes beyond Wo, which run into the
    next row in the prepared planes) would add 0 · inf = NaN to other taps."""
    rng = np.random.default_rng(width)
    x = rng.standard_normal((2, 1, 9, width), dtype=np.float32)
    x[1, 0, 4, 0] = np.inf
    g = rng.uniform(0.5, 1.0, (2, 3, 7, width - 2)).astype(np.float32)
    got = _weight_grad(x, g, (3, 3), (1, 1), (1, 1), (0, 0))
    want = _weight_grad_reference(x, g, (3, 3), (1, 1), (1, 1), (0, 0))
    assert np.isinf(want).any() and not np.isnan(want).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_conv2d_weight_gradient_takes_it_and_matches_torch(monkeypatch):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 8, 15, 17), dtype=np.float32)
    w = rng.standard_normal((12, 8, 3, 3), dtype=np.float32)
    calls = _spy(monkeypatch, "_weight_grad_direct")
    wt = wb.tensor(w, requires_grad=True)
    wb.nn.functional.conv2d(wb.tensor(x), wt, stride=2, padding=1).sum().backward()
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    F.conv2d(torch.tensor(x, dtype=torch.float64), tw, stride=2, padding=1).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(wt.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-4)


def test_weight_gradient_bad_arguments_raise_clear_errors():
    x = np.zeros((1, 2, 5, 5), np.float32)
    g = np.zeros((1, 3, 3, 3), np.float32)
    dk = np.zeros((3, 2, 3, 3), np.float32)
    geometry = (1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 3, 3, 0, 0)
    NATIVE.conv_direct_wgrad(x, g, dk, *geometry)
    with pytest.raises(ValueError, match="array 1 has 18 elements, the geometry expects 27"):
        NATIVE.conv_direct_wgrad(x, g[:, :2].copy(), dk, *geometry)
    with pytest.raises(TypeError, match="expected f32 arrays"):
        NATIVE.conv_direct_wgrad(x, g.astype(np.float64), dk, *geometry)
    with pytest.raises(ValueError, match="must be >= 1"):
        NATIVE.conv_direct_wgrad(x, g, dk, *geometry[:4], 0, *geometry[5:])
    with pytest.raises(TypeError, match="expected 18 arguments, found 3"):
        NATIVE.conv_direct_wgrad(x, g, dk)


def test_weight_gradient_of_many_taps_is_left_to_blas_on_avx2_only():
    """From 576 taps the AVX2 variant declines (None, dk untouched): im2col and BLAS measured
    faster there; AVX-512 computes it."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 65, 6, 6), dtype=np.float32)
    g = rng.standard_normal((1, 4, 6, 6), dtype=np.float32)
    dk = np.full((4, 65, 3, 3), np.nan, np.float32)
    ran = NATIVE.conv_direct_wgrad(x, g, dk, 1, 65, 6, 6, 4, 3, 3, 1, 1, 1, 1, 6, 6, 1, 1)
    if NATIVE.variant() == "avx512":
        assert ran is True
        want = _weight_grad_reference(x, g, (3, 3), (1, 1), (1, 1), (1, 1))
        np.testing.assert_allclose(dk, want, rtol=1e-5, atol=1e-4)
    else:
        assert ran is None and np.isnan(dk).all()
    got = cpu_conv.conv2d_weight_grad_array(x, g, (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    np.testing.assert_allclose(got, _weight_grad_reference(x, g, (3, 3), (1, 1), (1, 1), (1, 1)),
                               rtol=1e-5, atol=1e-4)  # fmt: skip
