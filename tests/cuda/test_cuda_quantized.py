"""GGUF kernels: block tables agree with the CPU codecs; launches and routing (fake driver);
on a GPU, dequantization and the matvec match the CPU codecs. The kernels' numerics without a
GPU: ``test_kernel_host_quant.py``."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from devices import AVAILABILITY

from workbench.backends.cpu import ggml
from workbench.backends.cpu.ggml.table import BY_NAME
from workbench.backends.cuda.storage import CudaStorage
from workbench.backends.errors import UnsupportedOnDevice
from workbench.backends.gpu import quantized as cq
from workbench.backends.layout import Layout

CUDA_OK, CUDA_REASON = AVAILABILITY["cuda"]


@pytest.mark.parametrize("name", sorted(cq.BLOCKS))
def test_block_table_matches_cpu(name):
    info = BY_NAME[name]
    assert cq.BLOCKS[name] == (info.block_size, info.type_size)


def test_launches(fake):
    raw = CudaStorage.from_numpy(np.zeros((4, 18), np.uint8))
    out = cq.dequantize(raw, "Q4_0", "f16")
    name, grid, block, args = fake.launches[-1]
    assert name == "dequantize_q4_0_f16" and out.size == 128 and out.dtype == "f16"
    assert struct.unpack_from("<QQq", args) == (out.ptr, raw.ptr, 128)
    x = CudaStorage.from_numpy(np.ones(64, np.float32))
    y = cq.qmatvec(raw, "Q4_0", 2, 64, x, Layout.contiguous((64,)))
    name, grid, block, args = fake.launches[-1]
    assert name == "qmatvec_q4_0_f32" and block == (128, 1, 1) and grid == (2, 1, 1)  # 4 warps
    assert struct.unpack_from("<QQQqqqq", args) == (y.ptr, raw.ptr, x.ptr, 2, 64, 1, 4)  # a row
    assert y.size == 2
    with pytest.raises(UnsupportedOnDevice, match="IQ2_XXS"):
        cq.dequantize(raw, "IQ2_XXS")
    with pytest.raises(ValueError, match="do not hold"):
        cq.qmatvec(raw, "Q4_0", 3, 64, x, Layout.contiguous((64,)))
    with pytest.raises(ValueError, match="1..8 vectors"):
        cq.qmatvec(raw, "Q4_0", 2, 64, x, Layout.contiguous((63,)))
    with pytest.raises(ValueError, match="split"):
        cq.qmatvec(raw, "Q4_0", 2, 64, x, Layout.contiguous((64,)), split=3)


def test_kernel_names_cover_every_type():
    names = cq.kernel_names()
    assert len(names) == len(set(names)) == 7 * len(cq.MATVEC_TYPES)
    assert [cq.matvec_kernel("Q4_K", m) for m in range(1, 9)] == [
        "qmatvec_q4_k_f32", "qmatvec_q4_k_f32_b2", *["qmatvec_q4_k_f32_b4"] * 2,
        *["qmatvec_q4_k_f32_b8"] * 4]  # fmt: skip


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_REASON}")
@pytest.mark.parametrize("name", sorted(cq.BLOCKS))
def test_dequantize_matches_cpu(name):
    x = np.random.default_rng(0).standard_normal(4 * 256).astype(np.float32)
    raw = ggml.quantize(x, name)
    expected = ggml.dequantize(raw, name)
    storage = CudaStorage.from_numpy(raw.reshape(-1))
    got = cq.dequantize(storage, name).to_numpy(Layout.contiguous(expected.shape))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    w = expected.reshape(4, 256)
    v = np.random.default_rng(1).standard_normal((3, 256)).astype(np.float32)
    xs = CudaStorage.from_numpy(v)
    y = cq.qmatvec(storage, name, 4, 256, xs, Layout.contiguous((3, 256)))
    np.testing.assert_allclose(y.to_numpy(Layout.contiguous((3, 4))), v @ w.T, rtol=1e-4,
                               atol=1e-4)  # fmt: skip


@pytest.mark.parametrize("name", sorted(cq.BLOCKS))
def test_qmatmul_routes(fake, name):
    """Up to 8 vectors of x: the matvec kernel (every block type); more: dequantize, then one
    GEMM; a misaligned or strided x is made a contiguous f32 copy first."""
    qk, size = cq.BLOCKS[name]
    k = 2 * 256
    raw = CudaStorage.from_numpy(np.zeros((2 * k // qk, size), np.uint8))  # W (2, k)
    for m in (1, 3, 8):
        x = CudaStorage.from_numpy(np.ones((m, k), np.float32))
        y = cq.qmatmul(x, Layout.contiguous((m, k)), raw, name, 2, k)
        assert fake.launches[-1][0] == cq.matvec_kernel(name, m) and y.size == 2 * m
        split = 4 if m <= 4 else 2
        assert struct.unpack_from("<qqqq", fake.launches[-1][3], 24) == (2, k, m, split)
        assert fake.launches[-1][1] == (2 // (4 // split), 1, 1)  # 4 / split rows a block
    x = CudaStorage.from_numpy(np.ones(k + 2, np.float32))
    cq.qmatmul(x, Layout((1, k), (k, 1), 2), raw, name, 2, k)  # 8-byte aligned: not a quad
    copied, launched = fake.launches[-2:]
    assert copied[0] == "copy_b4" and launched[0] == cq.matvec_kernel(name, 1)
    xs = CudaStorage.from_numpy(np.ones((9, k), np.float32))
    y = cq.qmatmul(xs, Layout.contiguous((9, k)), raw, name, 2, k)
    assert fake.launches[-1][0] == f"dequantize_{name.lower()}_f32" and y.size == 18
    (gemm,) = fake.gemms
    assert gemm[1:7] == ("f32", True, False, 2, 9, k)  # column-major Wᵀ-as-T times xᵀ
    with pytest.raises(UnsupportedOnDevice, match="i64"):
        cq.qmatmul(CudaStorage.from_numpy(np.ones(k, np.int64)), Layout.contiguous((k,)),
                   raw, name, 2, k)  # fmt: skip
    with pytest.raises(UnsupportedOnDevice, match="IQ2_XXS.*cuda"):
        cq.qmatmul(xs, Layout.contiguous((9, k)), raw, "IQ2_XXS", 2, k)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_REASON}")
@pytest.mark.parametrize("name", sorted(cq.MATVEC_TYPES))
@pytest.mark.parametrize("batch", [1, 5, 12])
def test_qmatmul_layer_on_cuda_matches_cpu(name, batch):
    """``QMatMul`` on a cuda input against x times the CPU codec's dequantized W in float64
    (the matvec for 1 and 5 tokens, dequantize + cuBLAS for 12): f32 inputs within a small
    multiple of the f32 summation error, f16 inputs within the f16 roundings of W and y."""
    import workbench as wb
    from workbench.quantized import QMatMul, QTensor

    rng = np.random.default_rng(0)
    w = QTensor.quantize(rng.standard_normal((48, 512)).astype(np.float32), name)
    dense = ggml.dequantize(w.data.reshape(48, -1), name).reshape(48, 512).astype(np.float64)
    x = rng.standard_normal((batch, 512)).astype(np.float32)
    layer = QMatMul(w)
    for dtype, np_dtype, tol in ((wb.f32, np.float32, 64 * 2.0**-24),
                                 (wb.f16, np.float16, 3 * 2.0**-11)):  # fmt: skip
        xd = x.astype(np_dtype).astype(np.float64)
        got = layer(wb.tensor(x.astype(np_dtype), device="cuda"))
        assert got.device == wb.Device("cuda") and got.dtype is dtype
        err = np.abs(got.to_dtype(wb.f32).numpy() - xd @ dense.T)
        assert (err <= tol * (np.abs(xd) @ np.abs(dense).T)).all(), err.max()


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_REASON}")
def test_qmatmul_without_a_cuda_kernel_says_so():
    """No silent fallback to the CPU: a block type the CUDA backend lacks raises, naming it."""
    import workbench as wb
    from workbench.quantized import QMatMul, QTensor

    w = QTensor(np.zeros(48 * 2 * 66, np.uint8), (48, 512), "IQ2_XXS")
    with pytest.raises(wb.UnsupportedOnDevice, match="IQ2_XXS.*cuda"):
        QMatMul(w)(wb.tensor(np.ones((1, 512), np.float32), device="cuda"))
