"""The native max pool (kernels/cpu/core/pool.c) against the numpy path it replaces: values
and argmax bit for bit over random geometries and every number dtype, NaN, -inf and windows of
padding only, and the gradient scatter."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.backends.cpu import pool as cpu_pool

pytestmark = pytest.mark.skipif(
    not cpu_pool._NATIVE_POOL, reason="the native extension has no max_pool2d kernel"
)

DTYPES = ["f32", "f64", "f16", "bf16", "i64", "i32", "i16", "u8"]


def _geometry(rng):
    kernel = tuple(int(k) for k in rng.integers(1, 5, 2))
    stride = tuple(int(s) for s in rng.integers(1, 4, 2))
    padding = tuple(int(rng.integers(0, k // 2 + 1)) for k in kernel)
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    return kernel, stride, padding, dilation


def _both(x: wb.Tensor, monkeypatch, *args, **kwargs):
    native = wb.max_pool2d(x, *args, return_indices=True, **kwargs)
    with monkeypatch.context() as m:
        m.setattr(cpu_pool, "_NATIVE_POOL", False)
        reference = wb.max_pool2d(x, *args, return_indices=True, **kwargs)
    return native, reference


def _same(a: wb.Tensor, b: wb.Tensor) -> None:
    assert a.dtype is b.dtype and a.shape == b.shape
    x = a.to_dtype(wb.f64).numpy() if a.dtype.is_floating_point else a.numpy()
    y = b.to_dtype(wb.f64).numpy() if b.dtype.is_floating_point else b.numpy()
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(6))
def test_native_max_pool_matches_the_numpy_path(dtype, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    kernel, stride, padding, dilation = _geometry(rng)
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)))
    shape += tuple(int(s) for s in rng.integers(7, 14, 2))  # every window fits
    values = rng.integers(0, 6, shape)  # few distinct values: many ties
    x = wb.tensor(values).to_dtype(getattr(wb, dtype))
    if dtype in ("f32", "f64", "f16", "bf16"):
        x = x.permute(0, 1, 3, 2)  # a strided layout, copied by the storage
    ceil_mode = bool(seed % 2)
    (v1, i1), (v2, i2) = _both(x, monkeypatch, kernel, stride, padding, dilation, ceil_mode)
    _same(v1, v2)
    _same(i1, i2)


def test_native_max_pool_special_values(monkeypatch):
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 8)).astype(np.float32)
    x[0, 0, 1, 1] = x[0, 0, 1, 2] = np.nan  # the last NaN wins
    x[1, 2] = -np.inf  # windows of -inf report their first real element
    x[0, 1, :3, :3] = 4.0  # ties: the first wins
    (v1, i1), (v2, i2) = _both(wb.tensor(x), monkeypatch, 3, 1, 1)
    _same(v1, v2)
    _same(i1, i2)
    # a dilated window of padding only: -inf and index -1
    (v1, i1), (v2, i2) = _both(wb.tensor(np.ones((1, 1, 2, 2), np.float32)), monkeypatch, 2, 1, 1,
                               3)  # fmt: skip
    _same(v1, v2)
    _same(i1, i2)
    assert int(i1.numpy().min()) == -1


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "bf16"])
def test_native_max_pool_gradient_matches_the_numpy_path(dtype, monkeypatch):
    rng = np.random.default_rng(1)
    x = wb.tensor(rng.standard_normal((2, 3, 9, 8))).to_dtype(getattr(wb, dtype))
    g = wb.tensor(rng.standard_normal((2, 3, 5, 5))).to_dtype(getattr(wb, dtype))

    def grad():
        xv = x.detach().requires_grad_()
        out = wb.max_pool2d(xv, 3, 2, 1, ceil_mode=True)  # overlapping windows: sums
        return (out * g).sum().backward()[xv]

    native = grad()
    with monkeypatch.context() as m:
        m.setattr(cpu_pool, "_NATIVE_POOL", False)
        reference = grad()
    tol = 1e-6 if dtype in ("f32", "f64") else 1e-2
    np.testing.assert_allclose(native.to_dtype(wb.f64).numpy(),
                               reference.to_dtype(wb.f64).numpy(), rtol=tol, atol=tol)  # fmt: skip


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
@pytest.mark.parametrize("width", [2, 3, 14, 15, 16, 17, 30, 32, 33, 34, 47, 64, 66, 67])
def test_native_2x2_tiles_around_the_vector_widths(dtype, width):
    """2×2 windows at stride 2 (the tile path: 16 or 8 outputs a vector for f32, scalar for the
    rest) against torch's max_pool2d: values and argmax, with ties, NaN, ±inf at random taps
    and an odd height (the last row left out)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(width)
    values = rng.integers(-2, 3, (2, 3, 7, width)).astype(np.float64)
    flat = values.reshape(-1)
    for special in (np.nan, np.inf, -np.inf):
        flat[rng.choice(flat.size, flat.size // 10, replace=False)] = special
    x = wb.tensor(values).to_dtype(getattr(wb, dtype))
    reference = torch.from_numpy(x.to_dtype(wb.f64).numpy())
    expected, expected_at = torch.nn.functional.max_pool2d(reference, 2, return_indices=True)
    got, got_at = wb.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(got.to_dtype(wb.f64).numpy(), expected.numpy())
    np.testing.assert_array_equal(got_at.numpy(), expected_at.numpy())
