"""The native convolution copies (kernels/cpu/core/conv.c: im2col, col2im, swap01), and the
native max pool on 2×2 tiles (core/pool.c, which now runs before the numpy tile path), against
PyTorch and against the numpy path: random geometries (stride, dilation, padding, groups,
strided inputs, kernels reaching past the border), the forward and all three gradients, blocks
of several images and row bands."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.backends.cpu import conv as cpu_conv
from workbench.backends.cpu import pool as cpu_pool

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not cpu_conv._NATIVE_CONV, reason="the native extension has no conv_im2col kernel"
)


def _taps(rng, kernel_below: int):
    """(kernel, stride, dilation, padding) pairs of a random 2-d convolution: kernels under
    ``kernel_below``, strides 1-3, dilations 1-2, padding up to past the dilated kernel."""
    kernel = tuple(int(k) for k in rng.integers(1, kernel_below, 2))
    stride = tuple(int(s) for s in rng.integers(1, 4, 2))
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    padding = tuple(
        int(rng.integers(0, d * (k - 1) + 2)) for k, d in zip(kernel, dilation, strict=True)
    )
    return kernel, stride, dilation, padding


def _geometry(rng):
    """(x shape, weight shape, conv kwargs) of a random 2-d convolution."""
    groups = int(rng.choice([1, 1, 2, 3]))
    cg, og = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kernel, stride, dilation, padding = _taps(rng, 5)
    n = int(rng.integers(1, 4))
    hw = tuple(
        int(rng.integers(max(1, d * (k - 1) + 1 - 2 * p), 12))
        for k, d, p in zip(kernel, dilation, padding, strict=True)
    )
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return (n, cg * groups, *hw), (og * groups, cg, *kernel), kwargs


def _torch_conv(x, w, b, g, kwargs):
    """(y, dx, dw, db) by PyTorch in f64."""
    xt, wt, bt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    y = torch.nn.functional.conv2d(xt, wt, bt, **kwargs)
    y.backward(torch.tensor(g, dtype=torch.float64))
    return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()


def _wb_conv(x, w, b, g, kwargs, dtype, strided: bool):
    """(y, dx, dw, db) by workbench, operands of ``dtype`` (x laid out transposed if
    ``strided``), results in f64."""
    xv = wb.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2)) if strided else x)
    xv = (xv.permute(0, 1, 3, 2) if strided else xv).to_dtype(dtype).detach().requires_grad_()
    wv, bv = (wb.tensor(a).to_dtype(dtype).detach().requires_grad_() for a in (w, b))
    y = wb.conv2d(xv, wv, bv, **kwargs)
    grads = (y * wb.tensor(g).to_dtype(dtype)).sum().backward()
    return [t.to_dtype(wb.f64).numpy() for t in (y, grads[xv], grads[wv], grads[bv])]


def _close(got, want, tol):
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("seed", range(12))
def test_conv2d_and_gradients_match_torch(seed, dtype, native, monkeypatch):
    monkeypatch.setattr(cpu_conv, "_NATIVE_CONV", native)
    rng = np.random.default_rng(seed)
    x_shape, w_shape, kwargs = _geometry(rng)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0])
    y = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), None, **kwargs)
    g = rng.standard_normal(y.shape)
    want = _torch_conv(x, w, b, g, kwargs)
    got = _wb_conv(x, w, b, g, kwargs, getattr(wb, dtype), strided=bool(seed % 2))
    _close(got, want, 1e-4 if dtype == "f32" else 1e-10)


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("seed", range(10))
def test_depthwise_conv2d_and_gradients_match_torch(seed, dtype, native, monkeypatch):
    """Depthwise convolutions (groups = C, multiplier 1-3; native: kernels/cpu/core/
    depthwise.c, all three directions) of kernels 1-7 at any stride, dilation and padding,
    rows of 1-40 (across the vector widths), against torch in f64."""
    monkeypatch.setattr(cpu_conv, "_NATIVE_CONV", native)
    rng = np.random.default_rng(300 + seed)
    c, m = int(rng.integers(2, 5)), int(rng.integers(1, 4))
    kernel, stride, dilation, padding = _taps(rng, 8)
    hw = tuple(
        int(rng.integers(max(1, d * (k - 1) + 1 - 2 * p), limit))
        for k, d, p, limit in zip(kernel, dilation, padding, (12, 41), strict=True)
    )
    x = rng.standard_normal((int(rng.integers(1, 4)), c, *hw))
    w, b = rng.standard_normal((c * m, 1, *kernel)), rng.standard_normal(c * m)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=c)
    y = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), None, **kwargs)
    g = rng.standard_normal(y.shape)
    want = _torch_conv(x, w, b, g, kwargs)
    got = _wb_conv(x, w, b, g, kwargs, getattr(wb, dtype), strided=bool(seed % 2))
    _close(got, want, 1e-4 if dtype == "f32" else 1e-10)


@pytest.mark.parametrize("width", [7, 15, 16, 17, 56])
@pytest.mark.parametrize("kernel", [3, 7])
def test_depthwise_at_stride_1_across_the_vector_widths(width, kernel):
    """f32 depthwise rows at stride 1 (the weight gradient's lane vectors, the forward's and
    input gradient's unit-stride rows) around 8 and 16 lanes, against torch in f64."""
    rng = np.random.default_rng(width * kernel)
    x = rng.standard_normal((2, 3, 9, width))
    w, b = rng.standard_normal((6, 1, kernel, kernel)), rng.standard_normal(6)
    kwargs = dict(stride=1, padding=kernel // 2, dilation=1, groups=3)
    g = rng.standard_normal((2, 6, 9, width))
    want = _torch_conv(x, w, b, g, kwargs)
    _close(_wb_conv(x, w, b, g, kwargs, wb.f32, strided=False), want, 1e-4)


def test_native_depthwise_rejects_bad_arguments():
    native = cpu_conv.NATIVE
    x, k, y = np.zeros((1, 2, 4, 4)), np.zeros((2, 1, 3, 3)), np.zeros((1, 2, 2, 2))
    geometry = (1, 2, 1, 4, 4, 2, 2, 3, 3, 1, 1, 1, 1, 0, 0)
    native.conv_depthwise(0, x, k, y, None, *geometry)
    with pytest.raises(ValueError, match="expected mode 0, 1 or 2"):
        native.conv_depthwise(3, x, k, y, None, *geometry)
    with pytest.raises(ValueError, match="do not match the geometry"):
        native.conv_depthwise(0, x, k, np.zeros((1, 2, 3, 3)), None, *geometry)
    with pytest.raises(ValueError, match="do not match the geometry"):
        native.conv_depthwise(1, y, k, x, np.zeros(2), *geometry)
    with pytest.raises(TypeError, match="share one dtype"):
        native.conv_depthwise(0, x.astype(np.float32), k, y, None, *geometry)
    with pytest.raises(ValueError, match="must be >= 1"):
        native.conv_depthwise(0, x, k, y, None, *geometry[:7], 0, *geometry[8:])


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_conv_matches_the_numpy_path(dtype, monkeypatch):
    """Halves are widened in the im2col; the result equals the numpy path's (f32 compute)."""
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 4, 9, 8)), rng.standard_normal((6, 2, 3, 3)), np.ones(6)
    kwargs = dict(stride=(2, 1), padding=1, groups=2)
    g = rng.standard_normal((2, 6, 5, 8))
    got = _wb_conv(x, w, b, g, kwargs, getattr(wb, dtype), strided=True)
    monkeypatch.setattr(cpu_conv, "_NATIVE_CONV", False)
    want = _wb_conv(x, w, b, g, kwargs, getattr(wb, dtype), strided=True)
    _close(got, want, 1e-2)


@pytest.mark.parametrize("cache_bytes", [64, 3000], ids=["row-bands", "image-blocks"])
def test_conv_in_blocks_matches_torch(cache_bytes, monkeypatch):
    """Blocks of a few images, or bands of rows of one, give the same result as one block."""
    monkeypatch.setattr(cpu_conv, "_CACHE_BYTES", cache_bytes)
    rng = np.random.default_rng(7)
    kwargs = dict(stride=(1, 2), padding=(2, 1), dilation=(2, 1))
    x, w, b = rng.standard_normal((5, 3, 11, 9)), rng.standard_normal((4, 3, 3, 3)), np.ones(4)
    g = rng.standard_normal((5, 4, 11, 5))
    _close(_wb_conv(x, w, b, g, kwargs, wb.f64, strided=False), _torch_conv(x, w, b, g, kwargs),
           1e-10)  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_conv_transpose2d_matches_torch(seed):
    """The native col2im path of the transposed convolution (any stride, output_padding)."""
    rng = np.random.default_rng(100 + seed)
    groups = int(rng.choice([1, 2]))
    c, og = 2 * groups, int(rng.integers(1, 4))
    kernel = tuple(int(k) for k in rng.integers(1, 5, 2))
    stride = tuple(int(s) for s in rng.integers(1, 4, 2))
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    padding = tuple(int(rng.integers(0, k)) for k in kernel)
    output_padding = tuple(int(rng.integers(0, s)) for s in stride)
    kwargs = dict(stride=stride, padding=padding, output_padding=output_padding,
                  groups=groups, dilation=dilation)  # fmt: skip
    x = rng.standard_normal((2, c, 5, 6))
    w, b = rng.standard_normal((c, og, *kernel)), rng.standard_normal(og * groups)
    want = torch.nn.functional.conv_transpose2d(
        torch.tensor(x), torch.tensor(w), torch.tensor(b), **kwargs
    )
    got = wb.conv_transpose2d(wb.tensor(x), wb.tensor(w), wb.tensor(b), **kwargs)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


def _im2col_reference(x, kernel, stride, dilation, top, left, out_hw):
    """cols (C·kh·kw, N, Ho·Wo) with zeros outside x, by a padded copy (numpy)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    pad = 3 * max(kh * dh, kw * dw, sh * ho, sw * wo) + abs(top) + abs(left)
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad))
    xp[:, :, pad : pad + h, pad : pad + w] = x
    cols = np.empty((c, kh, kw, n, ho, wo))
    for i in range(kh):
        for j in range(kw):
            r0, c0 = pad - top + i * dh, pad - left + j * dw
            win = xp[:, :, r0 : r0 + sh * ho : sh, c0 : c0 + sw * wo : sw]
            cols[:, i, j] = win.transpose(1, 0, 2, 3)
    return cols.reshape(c * kh * kw, n, ho * wo)


@pytest.mark.parametrize("seed", range(8))
def test_im2col_and_col2im_kernels(seed):
    """Direct calls, negative pads (crops) included; col2im is im2col's adjoint:
    <im2col(x), c> = <x, col2im(c)>."""
    native = cpu_conv.NATIVE
    rng = np.random.default_rng(200 + seed)
    n, c, h, w = (int(v) for v in rng.integers(1, 20, 4) // [6, 6, 1, 1] + 1)
    kernel = tuple(int(k) for k in rng.integers(1, 4, 2))
    stride = tuple(int(s) for s in rng.integers(1, 3, 2))
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    top, left = (int(p) for p in rng.integers(-2, 4, 2))
    ho, wo = (int(v) for v in rng.integers(1, 18, 2))
    x = rng.standard_normal((n, c, h, w))
    want = _im2col_reference(x, kernel, stride, dilation, top, left, (ho, wo))
    geometry = (*kernel, *stride, *dilation, wo, top, left, 0, n, 0, ho)
    cols = np.empty((c * kernel[0] * kernel[1], n * ho * wo))
    native.conv_im2col(x, cols, n, c, h, w, *geometry)
    np.testing.assert_array_equal(cols.reshape(want.shape), want)
    for dtype in (np.float32, np.float16):
        cols32 = np.empty(cols.shape, np.float32)
        native.conv_im2col(x.astype(dtype), cols32, n, c, h, w, *geometry)
        exact = x.astype(dtype).astype(np.float64)
        expected = _im2col_reference(exact, kernel, stride, dilation, top, left, (ho, wo))
        np.testing.assert_array_equal(cols32.reshape(want.shape), expected)
    probe = rng.standard_normal(cols.shape)
    back = np.zeros_like(x)
    native.conv_col2im(back, probe, n, c, h, w, *geometry)
    np.testing.assert_allclose(np.vdot(back, x), np.vdot(probe, cols), rtol=1e-10)


def _check_f32_columns(rng, width, kernel, stride, dilation, top, left, ho, wo, band):
    """f32 im2col and col2im against the index map of the numpy im2col: im2col reads each
    column element from the x element it names (or 0), col2im adds it there (np.add.at)."""
    native = cpu_conv.NATIVE
    n, c, h = 3, 2, int(rng.integers(1, 9))
    n0, m, r0, r1 = (1, 2, ho // 3, ho - ho // 3) if band else (0, n, 0, ho)
    index = np.arange(1, n * c * h * width + 1, dtype=np.float64).reshape(n, c, h, width)
    source = _im2col_reference(index, kernel, stride, dilation, top, left, (ho, wo))
    source = source.reshape(-1, n, ho, wo)[:, n0 : n0 + m, r0:r1].astype(np.int64)
    geometry = (*kernel, *stride, *dilation, wo, top, left, n0, m, r0, r1)
    x = rng.standard_normal(index.shape).astype(np.float32)
    cols = np.full((source.shape[0], source[0].size), np.nan, np.float32)
    native.conv_im2col(x, cols, n, c, h, width, *geometry)
    want_cols = np.where(source > 0, x.reshape(-1)[np.maximum(source, 1) - 1], 0)
    np.testing.assert_array_equal(cols, want_cols.reshape(cols.shape))
    probe = rng.standard_normal(source.shape).astype(np.float32)
    want = np.zeros(index.size)
    np.add.at(want, source[source > 0] - 1, probe[source > 0].astype(np.float64))
    got = np.zeros((n, c, h, width), np.float32)
    native.conv_col2im(got, probe.reshape(probe.shape[0], -1), n, c, h, width, *geometry)
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("width", [1, 7, 8, 9, 14, 15, 16, 17, 31, 33, 63, 65, 70])
@pytest.mark.parametrize("band", [False, True], ids=["whole", "band"])
def test_f32_columns_at_stride_1_around_the_vector_widths(width, band):
    """f32 im2col and col2im at stride 1 along W (by vectors of 8 or 16 lanes, rows of up to
    4 vectors): dilations, pads and crops, a block of the images and a band of the rows, a
    row stride of 1 or 2."""
    rng = np.random.default_rng(width + 100 * band)
    kernel = tuple(int(k) for k in rng.integers(1, 5, 2))
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    stride = (int(rng.integers(1, 3)), 1)
    top, left = (int(p) for p in rng.integers(-2, 4, 2))
    ho, wo = int(rng.integers(1, 9)), int(max(1, width + 2 * left - dilation[1] * (kernel[1] - 1)))
    _check_f32_columns(rng, width, kernel, stride, dilation, top, left, ho, wo, band)


def test_f32_columns_with_a_left_pad_past_the_first_vectors():
    """A left pad of 36 with 50 outputs a row: the first valid column lies in the third
    16-lane vector (lane masks from bounds past the vector, on either ISA)."""
    rng = np.random.default_rng(7)
    _check_f32_columns(rng, 20, (3, 3), (1, 1), (1, 1), 1, 36, 5, 50, band=False)


def test_native_kernels_reject_bad_arguments():
    native = cpu_conv.NATIVE
    x, cols = np.zeros((1, 2, 4, 4), np.float32), np.zeros((18, 16), np.float32)
    geometry = (3, 3, 1, 1, 1, 1, 4, 1, 1, 0, 1, 0, 4)
    native.conv_im2col(x, cols, 1, 2, 4, 4, *geometry)
    with pytest.raises(ValueError, match="sizes"):
        native.conv_im2col(x, cols[:17], 1, 2, 4, 4, *geometry)
    with pytest.raises(TypeError, match="cols"):
        native.conv_im2col(x, cols.astype(np.float64), 1, 2, 4, 4, *geometry)
    with pytest.raises(ValueError, match="sizes"):
        native.conv_swap01(cols, np.zeros(10, np.float32), None, 18, 1, 16, 0, 0, 16, 0)
    with pytest.raises(ValueError, match=r"act must be in \[0, 5\), found -1"):
        native.conv_swap01(cols, np.zeros(288, np.float32), None, 18, 1, 16, 0, 0, 16, -1)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_max_pool_2x2_tiles_match_torch(dtype):
    """The native pool on 2×2 tiles: values, first-maximum indices (many ties), NaN, odd
    sizes (the last row/column dropped), and the gradient."""
    rng = np.random.default_rng(9)
    x = rng.integers(0, 4, (3, 4, 9, 11)).astype(np.float64)
    x[0, 0, 2, 3] = np.nan
    x[1, 2, :2, :2] = -np.inf
    xt = torch.tensor(x, requires_grad=True)
    values, indices = torch.nn.functional.max_pool2d(xt, 2, return_indices=True)
    g = rng.standard_normal(values.shape)
    values.backward(torch.tensor(g))
    xv = wb.tensor(x).to_dtype(getattr(wb, dtype)).detach().requires_grad_()
    got, idx = wb.max_pool2d(xv, 2, return_indices=True)
    grad = (got * wb.tensor(g).to_dtype(got.dtype)).sum().backward()[xv]
    np.testing.assert_array_equal(got.to_dtype(wb.f64).numpy(), values.detach().numpy())
    np.testing.assert_array_equal(idx.numpy(), indices.numpy())
    np.testing.assert_allclose(grad.to_dtype(wb.f64).numpy(), xt.grad.numpy(), rtol=1e-6)
    assert cpu_pool._NATIVE_POOL
