"""QMatMul: x @ W.T with a quantized W, through the storage's ``qmatmul`` method.

On the native path x is quantized as ggml does, so results are held to the activation
quantization bound of ``quantized_helpers.activation_error_bound``; the numpy path
(``WORKBENCH_NATIVE=0``, forced here by patching) equals the f32 matmul with the decoded W.
"""

from __future__ import annotations

import numpy as np
import pytest
from quantized_helpers import assert_qmatmul_close

import workbench as wb
from workbench.backends.base import BackendStorage
from workbench.backends.cpu import quantized as cpu_quantized
from workbench.errors import DTypeError, ShapeError, UnsupportedOnDevice
from workbench.quantized import GgmlDType, QMatMul, QTensor


@pytest.fixture(params=["native", "numpy"])
def path(request, monkeypatch):
    if request.param == "native" and cpu_quantized.NATIVE is None:
        pytest.skip("the native extension is not built")
    if request.param == "numpy":
        monkeypatch.setattr(cpu_quantized, "NATIVE", None)
    return request.param


def _check(got: np.ndarray, x: np.ndarray, w: QTensor, path: str) -> None:
    wd = w.dequantize_numpy().reshape(-1, x.shape[-1])
    ref = x.reshape(-1, wd.shape[1]).astype(np.float64) @ wd.T.astype(np.float64)
    assert_qmatmul_close(got, ref.reshape(got.shape), x, wd, w.ggml_dtype.name, path == "native")


@pytest.mark.parametrize("t", list(GgmlDType))
@pytest.mark.parametrize("batch", [1, 3])  # numpy path: 1 runs on the levels, 3 f32 tiles
def test_matches_dequantized_matmul(t, batch, path):
    rng = np.random.default_rng(0)
    w = QTensor.quantize(rng.standard_normal((45, 512)).astype(np.float32), t)
    x = rng.standard_normal((batch, 512)).astype(np.float32)
    got = QMatMul(w)(x)
    assert got.shape == (batch, 45) and got.dtype == np.float32
    _check(got, x, w, path)


def test_numpy_tiles_end_unevenly(monkeypatch):
    monkeypatch.setattr(cpu_quantized, "NATIVE", None)
    monkeypatch.setattr(cpu_quantized, "TILE_BYTES_VECTOR", 7 * 512 * 4)  # 7 rows a tile
    monkeypatch.setattr(cpu_quantized, "LEVEL_TILE_ROWS", 7)
    rng = np.random.default_rng(5)
    w = QTensor.quantize(rng.standard_normal((45, 512)).astype(np.float32), "Q5_K")
    for batch in (1, 3):
        x = rng.standard_normal((batch, 512)).astype(np.float32)
        _check(QMatMul(w)(x), x, w, "numpy")


def test_tensor_in_tensor_out_with_batch_dims(path):
    rng = np.random.default_rng(1)
    w = QTensor.quantize(rng.standard_normal((64, 256)).astype(np.float32), "Q4_K")
    mm = QMatMul(w)
    x = rng.standard_normal((2, 5, 256)).astype(np.float32)
    y = mm(wb.from_numpy(x))
    assert isinstance(y, wb.Tensor) and y.shape == (2, 5, 64) and y.dtype is wb.f32
    _check(y.numpy(), x, w, path)
    y16 = mm(wb.from_numpy(x).to_dtype(wb.f16))
    assert y16.dtype is wb.f16
    assert mm.shape == (64, 256) and "Q4_K" in repr(mm)


def test_strided_input(path):
    """A transposed view reaches the storage as a layout; the result is the same."""
    rng = np.random.default_rng(6)
    w = QTensor.quantize(rng.standard_normal((16, 256)).astype(np.float32), "Q8_0")
    xt = rng.standard_normal((256, 3)).astype(np.float32)
    y = QMatMul(w)(wb.from_numpy(xt).t())
    _check(y.numpy(), np.ascontiguousarray(xt.T), w, path)


def test_single_vector(path):
    rng = np.random.default_rng(2)
    w = QTensor.quantize(rng.standard_normal((33, 64)).astype(np.float32), "Q8_0")
    x = rng.standard_normal(64).astype(np.float32)
    got = QMatMul(w)(x)
    assert got.shape == (33,)
    _check(got[None], x[None], w, path)


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


def test_storage_method_errors():
    x = wb.from_numpy(np.zeros((2, 64), np.float32))
    raw = wb.from_numpy(np.zeros(4 * 34, np.uint8))
    store, layout = x._storage, x._layout
    with pytest.raises(ShapeError, match="do not hold a \\(5, 64\\) Q8_0 weight"):
        store.qmatmul(layout, raw._storage, "Q8_0", 5, 64)
    with pytest.raises(ShapeError, match="does not match k = 32"):
        store.qmatmul(layout, raw._storage, "Q8_0", 4, 32)
    with pytest.raises(UnsupportedOnDevice, match="IQ2_XXS weights is not implemented on cpu"):
        store.qmatmul(layout, raw._storage, "IQ2_XXS", 4, 64)
    ints = wb.from_numpy(np.zeros((2, 64), np.int32))
    with pytest.raises(UnsupportedOnDevice, match="float inputs, found int32"):
        ints._storage.qmatmul(ints._layout, raw._storage, "Q8_0", 4, 64)


def test_device_without_qmatmul_raises():
    """A backend without the method raises, naming op and device (QMatMul never falls back)."""

    class NoQuant(BackendStorage):
        device_kind = "metal"

    with pytest.raises(UnsupportedOnDevice, match="op qmatmul is not implemented on metal"):
        NoQuant().qmatmul(None, None, "Q4_0", 1, 32)
