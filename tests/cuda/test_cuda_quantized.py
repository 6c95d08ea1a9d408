"""GGUF kernels: block tables agree with the CPU codecs; launches (fake driver); on a GPU,
dequantization and the Q4_0/Q8_0 matvec match the CPU codecs."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from devices import AVAILABILITY

from workbench.backends.cpu import ggml
from workbench.backends.cpu.ggml.table import BY_NAME
from workbench.backends.cuda import quantized as cq
from workbench.backends.cuda.storage import CudaStorage
from workbench.backends.errors import UnsupportedOnDevice
from workbench.backends.layout import Layout

CUDA_OK, CUDA_REASON = AVAILABILITY["cuda"]


@pytest.mark.parametrize("name", sorted(cq.BLOCKS))
def test_block_table_matches_cpu(name):
    info = BY_NAME[name]
    assert cq.BLOCKS[name] == (info.block_size, info.type_size)


def _half(b, at):
    return float(np.asarray(b[at : at + 2], np.uint8).view(np.float16)[0])


# Python transcriptions of the device functions in kernels/gpu/quantized.h (same index
# maths, one value k of one block b), checked against the CPU codecs: no GPU needed.
def _q4_0(b, k):
    q = (b[2 + k] & 0xF) if k < 16 else (b[2 + k - 16] >> 4)
    return (q - 8) * _half(b, 0)


def _q4_1(b, k):
    q = (b[4 + k] & 0xF) if k < 16 else (b[4 + k - 16] >> 4)
    return q * _half(b, 0) + _half(b, 2)


def _q5_int(qh4, qs, k):
    qh = int.from_bytes(bytes(np.asarray(qh4[:4], np.uint8)), "little")
    lo = (qs[k] & 0xF) if k < 16 else (qs[k - 16] >> 4)
    return lo | (((qh >> k) & 1) << 4)


def _q5_0(b, k):
    return (_q5_int(b[2:6], b[6:], k) - 16) * _half(b, 0)


def _q5_1(b, k):
    return _q5_int(b[4:8], b[8:], k) * _half(b, 0) + _half(b, 2)


def _q8_0(b, k):
    return int(np.uint8(b[2 + k]).view(np.int8)) * _half(b, 0)


def _k4_scale_min(j, s):
    if j < 4:
        return s[j] & 63, s[j + 4] & 63
    return (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)


def _q4_k(b, k):
    chunk, within = k // 64, k % 64
    sc, m = _k4_scale_min(2 * chunk + within // 32, b[4:16])
    q = b[16 + chunk * 32 + within % 32]
    v = (q & 0xF) if within < 32 else (q >> 4)
    return _half(b, 0) * sc * v - _half(b, 2) * m


def _q6_k(b, k):
    half, r = k // 128, k % 128
    quarter, lane = r // 32, r % 32
    ql, qh = b[64 * half : 64 * half + 64], b[128 + 32 * half :]
    sc = np.asarray(b[192 + 8 * half :], np.uint8).view(np.int8)
    low = ql[lane + 32] if quarter & 1 else ql[lane]
    low = (low & 0xF) if quarter < 2 else (low >> 4)
    q = (low | (((qh[lane] >> (2 * quarter)) & 3) << 4)) - 32
    return _half(b, 208) * int(sc[lane // 16 + 2 * quarter]) * q


TRANSCRIPTIONS = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0,
                  "Q4_K": _q4_k, "Q6_K": _q6_k}  # fmt: skip


@pytest.mark.parametrize("name", sorted(cq.BLOCKS))
def test_kernel_index_maths_matches_cpu_codec(name):
    qk, size = cq.BLOCKS[name]
    x = np.random.default_rng(2).standard_normal(2 * qk).astype(np.float32) * 3
    raw = ggml.quantize(x, name).reshape(-1, size)
    expected = ggml.dequantize(raw, name).reshape(-1, qk)
    fn = TRANSCRIPTIONS[name]
    blocks = raw.astype(np.int64)  # C int arithmetic: no uint8 wrap-around
    got = np.array([[fn(blocks[i], k) for k in range(qk)] for i in range(raw.shape[0])])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_launches(fake):
    raw = CudaStorage.from_numpy(np.zeros((4, 18), np.uint8))
    out = cq.dequantize(raw, "Q4_0", "f16")
    name, grid, block, args = fake.launches[-1]
    assert name == "dequantize_q4_0_f16" and out.size == 128 and out.dtype == "f16"
    assert struct.unpack_from("<QQq", args) == (out.ptr, raw.ptr, 128)
    x = CudaStorage.from_numpy(np.ones(64, np.float32))
    y = cq.qmatvec(raw, "Q4_0", 2, 64, x, Layout.contiguous((64,)))
    name, grid, block, _ = fake.launches[-1]
    assert name == "qmatvec_q4_0_f32" and block == (256, 1, 1) and grid == (1, 1, 1)  # 8 warps
    assert y.size == 2
    with pytest.raises(UnsupportedOnDevice, match="Q2_K"):
        cq.dequantize(raw, "Q2_K")
    with pytest.raises(ValueError, match="do not hold"):
        cq.qmatvec(raw, "Q4_0", 3, 64, x, Layout.contiguous((64,)))


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
    if name in cq.MATVEC_TYPES:
        w = expected.reshape(4, 256)
        v = np.random.default_rng(1).standard_normal(256).astype(np.float32)
        xs = CudaStorage.from_numpy(v)
        y = cq.qmatvec(storage, name, 4, 256, xs, Layout.contiguous((256,)))
        np.testing.assert_allclose(y.to_numpy(Layout.contiguous((4,))), w @ v, rtol=1e-4,
                                   atol=1e-4)  # fmt: skip


def test_qmatmul_routes(fake):
    """One f32 vector of a Q4_0 W: the matvec kernel; a batch: dequantize then one GEMM."""
    raw = CudaStorage.from_numpy(np.zeros((4, 18), np.uint8))  # W (2, 64) as Q4_0
    x = CudaStorage.from_numpy(np.ones(64, np.float32))
    y = cq.qmatmul(x, Layout.contiguous((1, 64)), raw, "Q4_0", 2, 64)
    assert fake.launches[-1][0] == "qmatvec_q4_0_f32" and y.size == 2
    xs = CudaStorage.from_numpy(np.ones((3, 64), np.float32))
    y = cq.qmatmul(xs, Layout.contiguous((3, 64)), raw, "Q4_0", 2, 64)
    assert fake.launches[-1][0] == "dequantize_q4_0_f32" and y.size == 6
    (gemm,) = fake.gemms
    assert gemm[1:7] == ("f32", True, False, 2, 3, 64)  # column-major Wᵀ-as-T times xᵀ
    with pytest.raises(UnsupportedOnDevice, match="i64"):
        cq.qmatmul(CudaStorage.from_numpy(np.ones(64, np.int64)), Layout.contiguous((64,)),
                   raw, "Q4_0", 2, 64)  # fmt: skip


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_REASON}")
@pytest.mark.parametrize("name", ["Q4_0", "Q8_0", "Q4_K", "Q6_K"])
@pytest.mark.parametrize("batch", [1, 5])
def test_qmatmul_layer_on_cuda_matches_cpu(name, batch):
    """``QMatMul`` on a cuda input agrees with the CPU path."""
    import workbench as wb
    from workbench.quantized import QMatMul, QTensor

    rng = np.random.default_rng(0)
    w = QTensor.quantize(rng.standard_normal((48, 512)).astype(np.float32), name)
    x = rng.standard_normal((batch, 512)).astype(np.float32)
    layer = QMatMul(w)
    expected = layer(wb.tensor(x)).numpy()
    for dtype, tol in ((wb.f32, 1e-3), (wb.f16, 3e-2)):
        got = layer(wb.tensor(x, device="cuda", dtype=dtype))
        assert got.device == wb.Device("cuda") and got.dtype is dtype
        np.testing.assert_allclose(got.to_dtype(wb.f32).numpy(), expected, rtol=tol, atol=tol * 10)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_REASON}")
@pytest.mark.parametrize("name", ["Q2_K", "F16"])
def test_qmatmul_without_a_cuda_kernel_says_so(name):
    """No silent fallback to the CPU: a block type the CUDA backend lacks raises, naming it."""
    import workbench as wb
    from workbench.quantized import QMatMul, QTensor

    w = QTensor.quantize(np.random.default_rng(0).standard_normal((48, 512)), name)
    with pytest.raises(wb.UnsupportedOnDevice, match=f"{name}.*cuda"):
        QMatMul(w)(wb.tensor(np.ones((1, 512), np.float32), device="cuda"))
