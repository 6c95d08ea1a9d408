"""The native quantized kernels (kernels/cpu/quant) of every compiled ISA variant.

- ``dequantize`` equals gguf-py's decoder bit for bit, on random blocks (every bit pattern
  of the levels and scales, finite f16 scales).
- ``qmatmul`` runs two ways: up to 4 activation rows straight from the raw blocks (where the
  ISA has that kernel), more after decoding each weight row; the batches below take both.
- ``qmatmul`` with activations that Q8_0/Q8_K represent exactly (integers in [-127, 127]
  with 127 in every block, so d = 1 and the levels are x itself) equals the float64 product
  with gguf-py's decoded weight up to f32 rounding: no activation quantization is involved.
- ``qmatmul`` on Gaussian activations stays within the bound of ggml's activation
  quantization (``activation_error_bound`` states and derives it) of that float64 product,
  and the bound is tight enough to catch a wrong scale (checked).
- The activation quantizer writes the bytes of gguf-py's Q8_0 quantizer (ggml's reference).
- Bad input raises a clear error and never crashes.
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import quants
from quantized_helpers import (
    NATIVE_TYPES,
    activation_error_bound,
    integer_kernels_fixture,
    native_variants,
    random_blocks,
    reference_weights,
)

from workbench.backends.cpu import ggml

VARIANTS = native_variants()
pytestmark = pytest.mark.skipif(not VARIANTS, reason="the native extension is not built")
native = integer_kernels_fixture()
IDS = {name: ggml.BY_NAME[name].id for name in NATIVE_TYPES}


def _weights(name: str, n: int, k: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Raw blocks ``(n * k / block, type_size)`` from random bits and their f32 values."""
    raw = random_blocks(name, n * k // ggml.BY_NAME[name].block_size, rng)
    return raw, reference_weights(raw, name, (n, k)).astype(np.float32)


def _qmatmul(native, raw, name, n, k, x):
    out = np.full((x.shape[0], n), np.nan, np.float32)
    native.qmatmul(raw, IDS[name], n, k, x, out)
    return out


@pytest.mark.parametrize("name", NATIVE_TYPES)
def test_dequantize_matches_gguf_py_exactly(native, name):
    rng = np.random.default_rng(0)
    n, k = 5, 512
    raw, ref = _weights(name, n, k, rng)
    out = np.empty((n, k), np.float32)
    native.dequantize(raw, IDS[name], k, out)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("name", NATIVE_TYPES)
@pytest.mark.parametrize("batch", [1, 2, 3, 4, 7, 64])
@pytest.mark.parametrize("odd", [False, True])  # an odd number of blocks (32 or 256)
def test_exact_activations_match_float64(native, name, batch, odd):
    rng = np.random.default_rng(1)
    n = 37  # odd rows: threads and row groups end unevenly
    k = (1280 if ggml.BY_NAME[name].block_size == 256 else 544) if odd else 512
    raw, w = _weights(name, n, k, rng)
    x = rng.integers(-127, 128, (batch, k)).astype(np.float32)
    x[:, ::32] = 127  # every block's largest magnitude is 127: d = 1 exactly, q = x
    got = _qmatmul(native, raw, name, n, k, x)
    ref = x.astype(np.float64) @ w.T.astype(np.float64)
    scale = np.abs(x).astype(np.float64) @ np.abs(w.T).astype(np.float64)
    assert np.all(np.abs(got - ref) <= 1e-6 * scale + 1e-6)


@pytest.mark.parametrize("name", NATIVE_TYPES)
@pytest.mark.parametrize("batch", [1, 4, 7, 64])
def test_within_activation_quantization_bound(native, name, batch):
    rng = np.random.default_rng(2)
    n, k = 33, 768 + (32 if ggml.BY_NAME[name].block_size == 32 else 0)  # odd blocks of 32
    w = rng.standard_normal((n, k)).astype(np.float32)
    raw = ggml.quantize(w, name)
    wq = reference_weights(raw, name, (n, k)).astype(np.float32)
    x = rng.standard_normal((batch, k)).astype(np.float32)
    got = _qmatmul(native, raw, name, n, k, x)
    ref = x.astype(np.float64) @ wq.T.astype(np.float64)
    bound = activation_error_bound(x, wq, name)
    assert np.all(np.abs(got - ref) <= bound)
    # The worst case adds every rounding error up; they are independent, so the typical
    # error is ~0.7% of |y| (d / sqrt(12) per value): a broken kernel lands far above 2%.
    rel = np.sqrt(np.mean((got - ref) ** 2) / np.mean(ref**2))
    assert 1e-4 < rel < 0.02  # and above zero: x really was quantized


@pytest.mark.parametrize("name", ["Q4_0", "Q4_K"])
@pytest.mark.parametrize("batch", [1, 5])  # from the raw blocks / decoded rows
def test_threads_agree(native, name, batch):
    rng = np.random.default_rng(3)
    n, k = 301, 1024
    raw, _ = _weights(name, n, k, rng)
    x = rng.standard_normal((batch, k)).astype(np.float32)
    native.set_num_threads(1)
    one = _qmatmul(native, raw, name, n, k, x)
    native.set_num_threads(2)
    try:
        two = _qmatmul(native, raw, name, n, k, x)
    finally:
        native.set_num_threads(1)
    np.testing.assert_array_equal(one, two)


def test_variants_agree():
    """Integer sums are exact, so the variants differ only in float summation order."""
    rng = np.random.default_rng(4)
    raw, _ = _weights("Q6_K", 9, 2048, rng)
    x = rng.standard_normal((3, 2048)).astype(np.float32)
    outs = [_qmatmul(mod, raw, "Q6_K", 9, 2048, x) for mod in VARIANTS]
    for out in outs[1:]:
        np.testing.assert_allclose(out, outs[0], rtol=1e-5, atol=1e-5)


def test_activation_quantizer_matches_gguf_py(native):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(4096) * 3).astype(np.float32)
    x[64:96] = 0  # an all-zero block: d = 0
    out = np.empty(4096 // 32 * 34, np.uint8)
    native.quantize_activations(x, IDS["Q8_0"], out)
    ref = quants.quantize(x.reshape(-1, 32), gguf.GGMLQuantizationType.Q8_0).reshape(-1)
    np.testing.assert_array_equal(out, ref)
    out_k = np.empty(4096 // 256 * 292, np.uint8)
    native.quantize_activations(x, IDS["Q8_K"], out_k)
    np.testing.assert_array_equal(out_k, ggml.quantize(x, "Q8_K").reshape(-1))
    out_1 = np.empty(4096 // 32 * 36, np.uint8)
    native.quantize_activations(x, IDS["Q8_1"], out_1)
    np.testing.assert_array_equal(out_1, ggml.quantize(x, "Q8_1").reshape(-1))


def test_activation_quantizer_rounds_ties_away_from_zero(native):
    """ggml's roundf: a block whose largest |x| is 127 has d = 1, so x itself is the level;
    halves go away from zero (np.round, half to even, would differ) and the Q8_1 sum is exact."""
    half = np.arange(-127, 127, dtype=np.float32)[:64] + 0.5  # -126.5 ... -63.5
    x = np.concatenate([half, -half, np.tile([127.0, 0.5, -0.5, 2.5], 16)]).astype(np.float32)
    x[::32] = 127.0  # each block's maximum
    out = np.empty(x.size // 32 * 36, np.uint8)
    native.quantize_activations(x, IDS["Q8_1"], out)
    blocks = out.reshape(-1, 36)
    levels = blocks[:, 4:].view(np.int8).reshape(-1)
    want = np.sign(x) * np.floor(np.abs(x) + 0.5)
    np.testing.assert_array_equal(levels, want.astype(np.int8))
    d, s = blocks[:, :4].copy().view(np.float16).astype(np.float32).T
    np.testing.assert_array_equal(d, 1.0)
    np.testing.assert_array_equal(s, want.reshape(-1, 32).sum(1).astype(np.float16))


def test_non_finite_activations_give_nan(native):
    rng = np.random.default_rng(6)
    raw, _ = _weights("Q4_0", 4, 64, rng)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    x[0, 5] = np.nan
    x[1, 40] = np.inf
    assert np.isnan(_qmatmul(native, raw, "Q4_0", 4, 64, x)).all()


@pytest.mark.parametrize("name", ["Q4_0", "Q6_K"])
def test_empty_batch(native, name):
    rng = np.random.default_rng(8)
    k = ggml.BY_NAME[name].block_size
    raw, _ = _weights(name, 4, k, rng)
    out = np.zeros((0, 4), np.float32)
    native.qmatmul(raw, IDS[name], 4, k, np.zeros((0, k), np.float32), out)  # no rows, no reads


def test_bad_input_raises(native):
    rng = np.random.default_rng(7)
    raw, _ = _weights("Q4_0", 4, 64, rng)
    x = np.zeros((2, 64), np.float32)
    out = np.zeros((2, 4), np.float32)
    q = IDS["Q4_0"]
    with pytest.raises(ValueError, match="multiple of Q4_0's block size 32"):
        native.qmatmul(raw, q, 4, 48, x, out)
    with pytest.raises(ValueError, match="needs 144 bytes"):
        native.qmatmul(raw[:-1], q, 4, 64, x, out)
    with pytest.raises(ValueError, match="not a multiple of k"):
        native.qmatmul(raw, q, 4, 64, np.zeros(96, np.float32), out)
    with pytest.raises(ValueError, match="out must hold 2 x 4"):
        native.qmatmul(raw, q, 4, 64, x, np.zeros((2, 5), np.float32))
    with pytest.raises(TypeError, match="float32"):
        native.qmatmul(raw, q, 4, 64, x.astype(np.float64), out)
    with pytest.raises(TypeError, match="C-contiguous"):
        native.qmatmul(raw, q, 4, 64, np.zeros((64, 2), np.float32).T, out)
    with pytest.raises(TypeError, match="writable"):
        ro = out.copy()
        ro.flags.writeable = False
        native.qmatmul(raw, q, 4, 64, x, ro)
    with pytest.raises(ValueError, match="type id 1 has no native kernel"):
        native.qmatmul(raw, 1, 4, 64, x, out)
    with pytest.raises(TypeError, match="expected 6 arguments"):
        native.qmatmul(raw, q, 4, 64, x)
    with pytest.raises(ValueError, match="need a float32 out"):
        native.dequantize(raw, q, 64, np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="not Q8_0"):
        native.quantize_activations(x, q, np.zeros(10, np.uint8))
