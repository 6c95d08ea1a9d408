"""QMatMul: x @ W.T with a quantized W equals the f32 matmul with the dequantized W."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.errors import DTypeError, ShapeError
from workbench.quantized import GgmlDType, QMatMul, QTensor


@pytest.mark.parametrize("t", list(GgmlDType))
@pytest.mark.parametrize("tile_rows", [None, 7])
@pytest.mark.parametrize("batch", [1, 3])  # 1: the integer-levels path, 3: f32 tiles + BLAS
def test_matches_dequantized_matmul(t, tile_rows, batch):
    rng = np.random.default_rng(0)
    w = QTensor.quantize(rng.standard_normal((45, 512)).astype(np.float32), t)
    x = rng.standard_normal((batch, 512)).astype(np.float32)
    ref = x @ w.dequantize_numpy().T
    got = QMatMul(w, tile_rows=tile_rows)(x)
    assert got.shape == (batch, 45) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


def test_tensor_in_tensor_out_with_batch_dims():
    rng = np.random.default_rng(1)
    w = QTensor.quantize(rng.standard_normal((64, 256)).astype(np.float32), "Q4_K")
    mm = QMatMul(w, tile_rows=16)
    x = rng.standard_normal((2, 5, 256)).astype(np.float32)
    y = mm(wb.from_numpy(x))
    assert isinstance(y, wb.Tensor) and y.shape == (2, 5, 64) and y.dtype is wb.f32
    np.testing.assert_allclose(y.numpy(), x @ w.dequantize_numpy().T, rtol=1e-5, atol=1e-4)
    y16 = mm(wb.from_numpy(x).to_dtype(wb.f16))
    assert y16.dtype is wb.f16
    assert mm.shape == (64, 256) and "Q4_K" in repr(mm)


def test_single_vector():
    rng = np.random.default_rng(2)
    w = QTensor.quantize(rng.standard_normal((33, 64)).astype(np.float32), "Q8_0")
    x = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(QMatMul(w)(x), w.dequantize_numpy() @ x, rtol=1e-5, atol=1e-4)


def test_errors():
    w = QTensor.quantize(np.zeros((4, 64), np.float32), "Q8_0")
    with pytest.raises(ShapeError, match="expected last dimension 64"):
        QMatMul(w)(np.zeros((2, 32), np.float32))
    with pytest.raises(ShapeError, match="2-D"):
        QMatMul(QTensor.quantize(np.zeros(64, np.float32), "Q8_0"))
    with pytest.raises(TypeError):
        QMatMul(np.zeros((4, 64), np.float32))
    with pytest.raises(DTypeError):
        QMatMul(w)(wb.from_numpy(np.zeros((2, 64), np.int32)))
