"""The GGUF kernels of ``kernels/gpu/quantized.h`` run on the CPU: compiled by g++ with
``host_blocks.h`` (every GPU thread of the launch's grid a fiber, warp shuffles real) and
launched by the real CUDA host code (``backends/gpu/quantized.py``), against gguf-py's
dequantization (numpy) and float64 products.

Blocks are random bytes with finite random scales, so every bit of every field is read;
rows are odd (not a multiple of the rows a block serves) and K is not a multiple of the
values a warp covers per step."""

from __future__ import annotations

import shutil

import gguf
import ml_dtypes
import numpy as np
import pytest
from fakes import installed
from host_kernels import host_driver

import workbench as wb
from workbench.backends.cuda import compile as cuda_compile
from workbench.backends.cuda.storage import CudaStorage
from workbench.backends.gpu import quantized as cq
from workbench.backends.layout import Layout

NVCC = cuda_compile.find_nvcc()
pytestmark = pytest.mark.skipif(
    NVCC is None or shutil.which("g++") is None,
    reason="needs nvcc (the kernels' parameter lists) and g++ (the host build)",
)
TYPES = sorted(cq.MATVEC_TYPES)  # the block types and F16 / BF16
U = 2.0**-24  # f32 unit roundoff
# byte offsets of each type's f16 scale fields (Q8_K: its f32 scale at 0)
SCALES = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
          "Q8_1": (0, 2), "IQ4_NL": (0,), "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2),
          "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_XS": (0,), "Q8_K": ()}  # fmt: skip


@pytest.fixture(scope="module")
def built():
    return host_driver(cuda_compile.cache_root().parent / "host", NVCC, ("quantized",))


@pytest.fixture
def host(built, monkeypatch):
    built.launches.clear()
    with installed(built, monkeypatch):
        yield built


HALF = {"F16": np.float16, "BF16": ml_dtypes.bfloat16}


def random_blocks(name: str, rows: int, k: int, seed: int = 0) -> np.ndarray:
    """``(rows, bytes per row)`` random blocks whose scales are finite (|d| in [2^-8, 2));
    F16 / BF16: random normal values."""
    rng = np.random.default_rng(seed)
    if name in HALF:
        return rng.standard_normal((rows, k)).astype(HALF[name]).view(np.uint8)
    qk, size = cq.BLOCKS[name]
    raw = rng.integers(0, 256, (rows * (k // qk), size), dtype=np.uint8)
    for at in SCALES[name]:
        d = rng.uniform(2.0**-8, 2.0, raw.shape[0]) * rng.choice([-1, 1], raw.shape[0])
        raw[:, at : at + 2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    if name == "Q8_K":
        d = rng.uniform(2.0**-8, 2.0, raw.shape[0]).astype(np.float32)
        raw[:, :4] = d.view(np.uint8).reshape(-1, 4)
    return raw.reshape(rows, -1)


def reference(raw: np.ndarray, name: str) -> np.ndarray:
    """f32 values of the blocks: gguf-py's dequantization; Q8_1 / Q8_K (which gguf-py lacks)
    are ``d q`` with their d (f16 at 0 / f32 at 0) and int8 q (from byte 4)."""
    rows = raw.shape[0]
    if name in HALF:
        return raw.view(HALF[name]).astype(np.float32)
    qk, size = cq.BLOCKS[name]
    if name in ("Q8_1", "Q8_K"):
        blocks = raw.reshape(-1, size)
        d = blocks[:, :2].view(np.float16) if name == "Q8_1" else blocks[:, :4].view(np.float32)
        q = blocks[:, 4 : 4 + qk].view(np.int8).astype(np.float32)
        return (d.astype(np.float32) * q).reshape(rows, -1)
    return gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[name]).reshape(rows, -1)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", TYPES)
def test_dequantize(host, name, dtype):
    raw = random_blocks(name, 3, 2 * 256, seed=len(name))
    expected = reference(raw, name).reshape(-1)
    out = cq.dequantize(CudaStorage.from_numpy(raw.reshape(-1)), name, dtype)
    assert host.launches[-1][0] == f"dequantize_{name.lower()}_{dtype}"
    got = out.to_numpy(Layout.contiguous(expected.shape)).astype(np.float64)
    scale = np.abs(expected).max()
    if dtype == "f32":  # a few roundings of the terms d sc q and dmin m
        np.testing.assert_allclose(got, expected, rtol=4 * U, atol=4 * U * scale)
    else:  # the f32 value rounded once more (half an ulp of f16 / bf16)
        np_dtype = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
        rounded = expected.astype(np_dtype).astype(np.float64)
        ulp = 2.0**-10 if dtype == "f16" else 2.0**-7
        np.testing.assert_allclose(got, rounded, rtol=ulp, atol=4 * U * scale)


def _check_matvec(got: np.ndarray, w: np.ndarray, x: np.ndarray) -> None:
    """``got (m, rows)`` against ``x @ wᵀ`` in float64, within the kernel's f32 bound
    ``(K/32 + 8) u Σ|x w|`` plus the f32 decoding of w (a few u of the row's largest value)."""
    k = w.shape[1]
    expected = x @ w.T
    magnitude = np.abs(x) @ np.abs(w).T
    decode = 8 * U * np.abs(x).sum(axis=1, keepdims=True) * np.abs(w).max(axis=1)
    bound = (k / 32 + 8) * U * magnitude + decode
    err = np.abs(got - expected)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert (err <= bound).all(), (
        f"y{list(worst)} = {got[worst]!r}, expected {expected[worst]!r} (bound {bound[worst]:.3g})"
    )


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("batch", range(1, 9))
def test_matvec(host, name, batch):
    """Every batch size, the row shared by 4 warps (the default), 2 or 1 (by batch)."""
    split = (4, 2, 1)[batch % 3]
    qk = cq.BLOCKS.get(name, (8,))[0]
    # a warp step covers 256 values: 11 blocks of 32 (8 a step), 43 groups of 8 (32 a step)
    rows, k = 13, {32: 11 * 32, 256: 3 * 256, 8: 43 * 8}[qk]
    raw = random_blocks(name, rows, k, seed=batch)
    w = reference(raw, name).astype(np.float64)
    x = np.random.default_rng(100 + batch).standard_normal((batch, k)).astype(np.float32)
    y = cq.qmatvec(CudaStorage.from_numpy(raw.reshape(-1)), name, rows, k,
                   CudaStorage.from_numpy(x), Layout.contiguous(x.shape), split)  # fmt: skip
    kernel, grid, block, _ = host.launches[-1]
    assert kernel == cq.matvec_kernel(name, batch) and block == (128, 1, 1)
    assert grid == (-(-rows // (4 // split)), 1, 1)  # a partial last block
    _check_matvec(y.to_numpy(Layout.contiguous((batch, rows))).astype(np.float64), w,
                  x.astype(np.float64))  # fmt: skip


@pytest.mark.parametrize("split", [1, 4])
@pytest.mark.parametrize("name", ["Q4_0", "Q4_K", "Q6_K", "IQ4_XS"])
def test_matvec_a_short_row(host, name, split):
    """K of one block: most lanes of the warp (and 3 of the row's 4 warps) hold no block."""
    qk = cq.BLOCKS[name][0]
    raw = random_blocks(name, 5, qk, seed=7)
    x = np.random.default_rng(8).standard_normal((2, qk)).astype(np.float32)
    y = cq.qmatvec(CudaStorage.from_numpy(raw.reshape(-1)), name, 5, qk,
                   CudaStorage.from_numpy(x), Layout.contiguous(x.shape), split)  # fmt: skip
    _check_matvec(y.to_numpy(Layout.contiguous((2, 5))).astype(np.float64),
                  reference(raw, name).astype(np.float64), x.astype(np.float64))  # fmt: skip


@pytest.mark.parametrize("name", TYPES)
def test_qmatmul_layer(host, name):
    """``QMatMul`` on a cuda tensor of 3 tokens: the matvec path end to end (upload, launch,
    download), against the CPU codec's dequantization (realistic, quantized weights)."""
    from workbench.quantized import QMatMul, QTensor

    rng = np.random.default_rng(3)
    weight = QTensor.quantize(rng.standard_normal((9, 2 * 256)).astype(np.float32), name)
    x = rng.standard_normal((3, 2 * 256)).astype(np.float32)
    got = QMatMul(weight)(wb.tensor(x, device="cuda"))
    assert got.device == wb.Device("cuda") and tuple(got.shape) == (3, 9)
    assert host.launches[-1][0] == cq.matvec_kernel(name, 3)
    w = reference(weight.data.reshape(9, -1), name).astype(np.float64)
    _check_matvec(got.numpy().astype(np.float64), w, x.astype(np.float64))
