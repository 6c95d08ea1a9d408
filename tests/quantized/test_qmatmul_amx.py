"""The AMX path of the native quantized product (kernels/cpu/quant/qgemm_amx.c): from 32
activation rows, weights decoded to bf16 meet bf16 activations in tiles with f32 sums.

Against float64 products of gguf-py's decoded weights, for every block type, batches that
leave partial tiles (33, 47) and partial tile pairs, and weight row counts that leave a partial
panel (37, 70):

- with both factors rounded to bf16 first (ml_dtypes, round to nearest even), the result is
  that product up to f32 summation (``(k / 2 + 2) 2^-24`` of ``sum |x w|``): so the kernel
  really rounds each factor once, and only that;
- with the exact factors, within bf16's two roundings (``(2^-8 + 2^-16) sum |x w|``).

Runs only where AMX is on (Intel Sapphire Rapids and later, Linux); elsewhere it is skipped
with the reason the native module gives.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from quantized_helpers import (
    NATIVE_TYPES,
    native_qmatmul,
    native_variants,
    random_blocks,
    reference_weights,
)

from workbench.backends.cpu import ggml

AMX = [mod for mod in native_variants() if mod.amx_status() == "on"]
WHY = native_variants()[0].amx_status() if native_variants() else "no native extension"
pytestmark = pytest.mark.skipif(not AMX, reason=f"AMX: {WHY}")


@pytest.fixture(params=AMX, ids=lambda mod: mod.variant())
def native(request):
    return request.param


def _bf16(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def _case(name: str, n: int, batch: int, seed: int):
    info = ggml.BY_NAME[name]
    k = info.block_size * (3 if info.block_size == 256 else 7)
    rng = np.random.default_rng(seed)
    raw = random_blocks(name, n * k // info.block_size, rng)
    w = reference_weights(raw, name, (n, k)).astype(np.float64)
    x = rng.standard_normal((batch, k)).astype(np.float32)
    return raw, k, w, x


@pytest.mark.parametrize("name", NATIVE_TYPES)
@pytest.mark.parametrize(("n", "batch"), [(37, 32), (70, 33), (37, 47), (70, 64)])
def test_equals_bf16_factors_summed_in_f32(native, name, n, batch):
    raw, k, w, x = _case(name, n, batch, seed=batch + n)
    got = native_qmatmul(native, raw, name, n, k, x)
    ref = _bf16(x) @ _bf16(w).T
    scale = np.abs(x.astype(np.float64)) @ np.abs(w.T)
    err = np.abs(got - ref)
    bad = err > (k / 2 + 2) * 2.0**-24 * scale + 1e-30
    assert not bad.any(), f"{bad.sum()} of {bad.size} off: worst {err.max():.3g}"
    exact = np.abs(got - x.astype(np.float64) @ w.T)
    assert np.all(exact <= (2.0**-8 + 2.0**-16 + (k / 2 + 2) * 2.0**-24) * scale + 1e-30)


def test_rows_independent_of_batch(native):
    """Row r of a batch of 64 is row r of the batch of 40 it starts: the tiles' zero
    padding and group pairs never leak across rows."""
    raw, k, w, x = _case("Q4_K", 21, 64, seed=7)
    full = native_qmatmul(native, raw, "Q4_K", 21, k, x)
    part = native_qmatmul(native, raw, "Q4_K", 21, k, x[:40])
    np.testing.assert_array_equal(full[:40], part)


def test_nan_activation_row_gives_nan_row(native):
    raw, k, w, x = _case("Q8_0", 18, 40, seed=3)
    x[33, 5] = np.nan
    got = native_qmatmul(native, raw, "Q8_0", 18, k, x)
    assert np.isnan(got[33]).all()
    assert np.isfinite(np.delete(got, 33, axis=0)).all()


def test_turned_off_runs_the_integer_kernels(native):
    raw, k, w, x = _case("Q6_K", 20, 48, seed=11)
    amx = native_qmatmul(native, raw, "Q6_K", 20, k, x)
    assert native.set_amx(False) is True
    try:
        assert native.amx_status().startswith("off")
        integer = native_qmatmul(native, raw, "Q6_K", 20, k, x)
    finally:
        native.set_amx(True)
    assert native.amx_status() == "on"
    assert not np.array_equal(amx, integer)  # two kernels, two roundings
    np.testing.assert_allclose(amx, integer, rtol=0, atol=0.02 * np.abs(integer).max())


def _act(g: np.ndarray, gelu: bool) -> np.ndarray:
    if gelu:
        return 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g**3)))
    return g * 0.5 * (1 + np.tanh(g / 2))  # g sigma(g), without exp's overflow


@pytest.mark.parametrize("gelu", [False, True])
@pytest.mark.parametrize(("name", "f", "batch"), [("Q4_K", 37, 33), ("Q8_0", 70, 64)])
def test_gated_unit_in_one_product(native, name, f, batch, gelu):
    """qmatmul_glu: act(x @ G.T) (x @ U.T) with the panels holding gate over up rows equals
    the two products and llm_glu bit for bit, and float64 maths on the bf16 factors."""
    raw_g, k, wg, x = _case(name, f, batch, seed=f)
    raw_u, _, wu, _ = _case(name, f, batch, seed=f + 1)
    type_id = ggml.BY_NAME[name].id
    out = np.full((batch, f), np.nan, np.float32)
    assert native.qmatmul_glu(raw_g, raw_u, type_id, f, k, x, gelu, out) is True
    g = native_qmatmul(native, raw_g, name, f, k, x)
    u = native_qmatmul(native, raw_u, name, f, k, x)
    two = np.empty_like(out)
    native.llm_glu(g, u, gelu, two)
    np.testing.assert_array_equal(out, two)
    gr, ur = _bf16(x) @ _bf16(wg).T, _bf16(x) @ _bf16(wu).T
    np.testing.assert_allclose(out, _act(gr, gelu) * ur, rtol=1e-4, atol=1e-4 * np.abs(ur).max())


def test_gated_unit_declines_short_batches_and_amx_off(native):
    raw_g, k, _, x = _case("Q4_0", 20, 31, seed=1)
    out = np.full((31, 20), 7.0, np.float32)
    assert native.qmatmul_glu(raw_g, raw_g, 2, 20, k, x, False, out) is False
    allowed = native.set_amx(False)
    try:
        assert (
            native.qmatmul_glu(
                raw_g, raw_g, 2, 20, k, np.vstack([x, x]), False, np.empty((62, 20), np.float32)
            )
            is False
        )
    finally:
        native.set_amx(allowed)
    assert (out == 7.0).all()  # nothing written


def test_gated_unit_checks_sizes(native):
    raw_g, k, _, x = _case("Q4_0", 20, 32, seed=2)
    out = np.empty((32, 20), np.float32)
    with pytest.raises(ValueError, match="qmatmul_glu: a \\(20, 224\\) Q4_0 weight needs"):
        native.qmatmul_glu(raw_g, raw_g[:-1], 2, 20, k, x, False, out)
    with pytest.raises(ValueError, match="out must hold 32 x 20"):
        native.qmatmul_glu(raw_g, raw_g, 2, 20, k, x, False, out[:-1])
