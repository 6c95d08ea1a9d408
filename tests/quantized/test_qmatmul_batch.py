"""The many-row path of the native quantized product (kernels/cpu/quant/qgemm.c: panels of
16 weight rows times tiles of 8 activation rows on AVX-512 VNNI, 8 times 4 on AVX2) for every
block type.

Activations Q8 represents exactly (integers with 127 in each block: d = 1, q = x) make the
result the float64 product with gguf-py's decoded weight up to f32 rounding, at every batch
(1..3 the raw small-batch kernels; 5, 6, 7, 11, 12, 13 around AVX2's crossovers from the row
loops to the tiles, which AVX-512 takes from 5; 64, 65 with and without a partial last tile),
with odd block counts and weight row counts that leave a partial panel. Each row of a batch
must also match that row alone (the batch-1 kernel) to f32 rounding. Blocks of every type's
largest levels against activations of 127 show that AVX2's int16 sums never saturate.
"""

from __future__ import annotations

import numpy as np
import pytest
from quantized_helpers import (
    F16_FIELDS,
    NATIVE_TYPES,
    assert_exact,
    exact_case,
    integer_kernels_fixture,
    native_qmatmul,
    native_variants,
    random_blocks,
    reference_weights,
)

from workbench.backends.cpu import ggml

VARIANTS = native_variants()
pytestmark = pytest.mark.skipif(not VARIANTS, reason="the native extension is not built")
native = integer_kernels_fixture()


def _shape(name: str, blocks: int) -> int:
    return ggml.BY_NAME[name].block_size * blocks


@pytest.mark.parametrize("name", NATIVE_TYPES)
@pytest.mark.parametrize("batch", [1, 2, 3, 5, 6, 7, 11, 12, 13, 64, 65])
def test_matches_float64_product(native, name, batch):
    n, k = 37, _shape(name, 3 if ggml.BY_NAME[name].block_size == 256 else 7)
    raw, x, ref, scale = exact_case(name, n, k, batch, seed=batch)
    assert_exact(native_qmatmul(native, raw, name, n, k, x), ref, scale)


@pytest.mark.parametrize("name", NATIVE_TYPES)
def test_rows_match_batch_one(native, name):
    n, k, batch = 21, _shape(name, 2 if ggml.BY_NAME[name].block_size == 256 else 5), 13
    rng = np.random.default_rng(5)
    raw = random_blocks(name, n * k // ggml.BY_NAME[name].block_size, rng)
    x = rng.standard_normal((batch, k)).astype(np.float32)
    got = native_qmatmul(native, raw, name, n, k, x)
    alone = np.concatenate(
        [native_qmatmul(native, raw, name, n, k, x[r : r + 1]) for r in range(batch)]
    )
    w = reference_weights(raw, name, (n, k)).astype(np.float64)
    scale = np.abs(x.astype(np.float64)) @ np.abs(w.T)
    assert_exact(got, alone, scale)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_K"])
def test_nan_activation_block_gives_nan(native, name):
    n, k = 18, _shape(name, 2 if ggml.BY_NAME[name].block_size == 256 else 4)
    raw, x, _, _ = exact_case(name, n, k, 9, seed=3)
    x[4, 40] = np.nan
    got = native_qmatmul(native, raw, name, n, k, x)
    assert np.isnan(got[4]).all()
    assert np.isfinite(np.delete(got, 4, axis=0)).all()


# The byte whose bits give each level its largest magnitude in the form the kernels multiply:
# all ones for offset levels (u = q + o at its top), -128 for Q8's, index 0 (-127) for IQ4's.
EXTREME_FILL = {"Q8_0": 0x80, "Q8_1": 0x80, "Q8_K": 0x80, "IQ4_NL": 0x00, "IQ4_XS": 0x00}


@pytest.mark.parametrize("name", NATIVE_TYPES)
def test_extreme_levels_do_not_saturate(native, name):
    info = ggml.BY_NAME[name]
    n, k, batch = 11, _shape(name, 2 if info.block_size == 256 else 8), 17
    fill = EXTREME_FILL.get(name, 0xFF)
    raw = np.full((n * k // info.block_size, info.type_size), fill, np.uint8)
    for start in F16_FIELDS.get(name, ()):
        raw[:, start : start + 2] = np.array([1.0], "<f2").view(np.uint8)
    if name == "Q8_K":
        raw[:, 0:4] = np.array([1.0], "<f4").view(np.uint8)
    w = reference_weights(raw, name, (n, k)).astype(np.float64)
    x = np.full((batch, k), 127.0, np.float32)
    assert_exact(native_qmatmul(native, raw, name, n, k, x), x @ w.T, np.abs(x) @ np.abs(w.T))
