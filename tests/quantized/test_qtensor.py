"""QTensor: quantize from Tensors and arrays, dequantize to f32/f16, metadata and repr."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.errors import DTypeError, ShapeError
from workbench.quantized import GgmlDType, GgmlTypeError, QTensor


@pytest.fixture
def x():
    return np.random.default_rng(0).standard_normal((4, 512)).astype(np.float32)


@pytest.mark.parametrize("t", list(GgmlDType))
def test_quantize_every_type(t, x):
    q = QTensor.quantize(x, t)
    assert q.shape == (4, 512) and q.ggml_dtype is t and q.ndim == 2 and q.numel == 2048
    assert q.nbytes == 4 * t.row_bytes(512) == q.data.size
    y = q.dequantize()
    assert isinstance(y, wb.Tensor) and y.dtype is wb.f32 and y.shape == (4, 512)
    tol = {"Q2_K": 1.2, "Q3_K": 0.7}.get(t.name, 0.45)
    assert np.abs(y.numpy() - x).max() < tol


def test_quantize_from_tensor_and_lists(x):
    a = QTensor.quantize(wb.from_numpy(x), "Q8_0")
    b = QTensor.quantize(x, GgmlDType.Q8_0)
    c = QTensor.quantize(x.tolist(), "q8_0")
    np.testing.assert_array_equal(a.data, b.data)
    np.testing.assert_array_equal(b.data, c.data)
    bf = QTensor.quantize(wb.from_numpy(x).to_dtype(wb.bf16), "Q4_0")
    assert bf.shape == (4, 512)


def test_dequantize_dtypes(x):
    q = QTensor.quantize(x, "Q6_K")
    f32 = q.dequantize()
    f16 = q.dequantize(wb.f16)
    bf16 = q.dequantize("bf16")
    assert (f16.dtype, bf16.dtype) == (wb.f16, wb.bf16)
    np.testing.assert_array_equal(f16.numpy(), f32.numpy().astype(np.float16))
    with pytest.raises(DTypeError):
        q.dequantize(wb.i32)


def test_dequantize_rows_into_a_buffer(x):
    q = QTensor.quantize(x, "Q4_K")
    full = q.dequantize_numpy()
    buf = np.empty(3 * 512, np.float32)
    rows = q.dequantize_rows(1, 3, out=buf)
    np.testing.assert_array_equal(rows, full[1:3])
    assert np.shares_memory(rows, buf)


def test_other_shapes():
    rng = np.random.default_rng(1)
    v = QTensor.quantize(rng.standard_normal(256).astype(np.float32), "Q4_K")
    assert v.shape == (256,) and v.dequantize_numpy().shape == (256,)
    t3 = QTensor.quantize(rng.standard_normal((2, 3, 64)).astype(np.float32), "Q8_0")
    assert t3.dequantize().shape == (2, 3, 64)
    empty = QTensor.quantize(np.zeros((0, 32), np.float32), "Q4_0")
    assert empty.nbytes == 0 and empty.dequantize_numpy().shape == (0, 32)


def test_repr():
    q = QTensor(np.zeros(4096 * 4096 * 9 // 16, np.uint8), (4096, 4096), "Q4_K")
    assert repr(q) == "QTensor[4096, 4096] Q4_K 4.50 bpw 9.0 MiB"
    small = QTensor.quantize(np.zeros((2, 64), np.float32), "Q8_0")
    assert repr(small) == "QTensor[2, 64] Q8_0 8.50 bpw 136 B"
    assert repr(QTensor.quantize(np.zeros((1, 256), np.float32), "IQ4_XS")).endswith(
        "IQ4_XS 4.25 bpw 136 B"
    )


def test_errors(x):
    with pytest.raises(ShapeError, match="not a multiple of Q4_K's block size 256"):
        QTensor.quantize(x[:, :100], "Q4_K")
    with pytest.raises(ShapeError, match="scalar"):
        QTensor.quantize(np.float32(1), "F32")
    with pytest.raises(GgmlTypeError):
        QTensor.quantize(x, "Q7_K")
    with pytest.raises(DTypeError):
        QTensor.quantize(wb.from_numpy(np.ones((2, 32), np.int32)), "Q8_0")
    with pytest.raises(ShapeError, match="needs 68 bytes, found 35"):
        QTensor(np.zeros(35, np.uint8), (1, 64), "Q8_0")
