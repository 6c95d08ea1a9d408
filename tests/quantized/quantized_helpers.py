"""Shared test data for the quantized tests: random raw blocks with valid scale fields, and
exact cases for the native products."""

from __future__ import annotations

import numpy as np

from workbench.backends.cpu import ggml

# Byte offsets of each type's f16 scale fields (everything else in a block is free bits).
F16_FIELDS = {
    "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q8_1": (0, 2),
    "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
    "IQ4_NL": (0,), "IQ4_XS": (0,),
}  # fmt: skip


def random_blocks(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` blocks of type ``name``: random bits, finite scales (f16 fields and Q8_K's f32 d)."""
    info = ggml.BY_NAME[name]
    if name == "F32":
        return rng.standard_normal(n).astype("<f4").view(np.uint8).reshape(n, 4)
    if name == "F16":
        return (rng.standard_normal(n) * 10).astype("<f2").view(np.uint8).reshape(n, 2)
    if name == "BF16":
        top = rng.standard_normal(n).astype("<f4").view("<u2")[1::2].copy()
        return top.view(np.uint8).reshape(n, 2)
    raw = rng.integers(0, 256, (n, info.type_size), dtype=np.uint8)
    for start in F16_FIELDS.get(name, ()):
        scale = (rng.standard_normal(n) * 0.05).astype("<f2")
        raw[:, start : start + 2] = scale.view(np.uint8).reshape(n, 2)
    if name == "Q8_K":
        raw[:, 0:4] = (rng.standard_normal(n) * 0.01).astype("<f4").view(np.uint8).reshape(n, 4)
    return raw


# ---------------------------------------------------------------- native kernels
NATIVE_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K",
                "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS")  # fmt: skip
# Activation blocks ggml pairs with each weight type (vec_dot_type).
ACTIVATION_BLOCK = {t: 256 if t.endswith("_K") or t == "IQ4_XS" else 32 for t in NATIVE_TYPES}
PAIRS_WITH_Q8_1 = ("Q4_1", "Q5_1")


def native_variants() -> list:
    """Every compiled ``_native_<variant>`` module this CPU can run (each one is tested),
    from ``WORKBENCH_NATIVE_DIR`` when that is set (as the backend loads them)."""
    from workbench.backends.cpu import native

    try:
        features = set(native._import("_cpuid").features())
    except ImportError:
        return []
    found = []
    for variant, needs in native._candidates():
        if needs <= features:
            try:
                found.append(native._import(f"_native_{variant}"))
            except ImportError:
                pass
    return found


def integer_kernels_fixture():
    """The ``native`` fixture of the integer kernels' tests: each compiled ISA variant with its
    integer kernels (qdot_raw.c, qdot.c, qgemm.c), AMX's bf16 tiles (qgemm_amx.c, tested in
    test_qmatmul_amx.py) turned off while a test runs. (A fixture factory, not a conftest.py:
    tests/models/llm imports its own conftest by that name.)"""
    import pytest

    from workbench.backends.cpu.native import integer_kernels

    @pytest.fixture(params=native_variants(), ids=lambda mod: mod.variant())
    def native(request):
        with integer_kernels(request.param):
            yield request.param

    return native


def reference_weights(raw: np.ndarray, name: str, shape: tuple[int, int]) -> np.ndarray:
    """The f32 weight, decoded by gguf-py where it has a decoder (all but Q8_1 and Q8_K,
    which are ``d * q`` and decoded by workbench's numpy codec)."""
    import gguf
    from gguf import quants

    if name in ("Q8_1", "Q8_K"):
        return ggml.dequantize(raw, name).reshape(shape)
    return quants.dequantize(raw.reshape(-1), gguf.GGMLQuantizationType[name]).reshape(shape)


def activation_error_bound(x: np.ndarray, w: np.ndarray, name: str) -> np.ndarray:
    """A bound on ``|x @ w.T - native|`` (m, n) when x is quantized as ggml does.

    Per activation block of B values with largest magnitude ``amax``, ``d = amax / 127``:
    rounding to the nearest level is off by at most ``d / 2`` per value. Q8_0/Q8_1 also store
    ``d`` as f16 (relative error <= 2^-11, times |q| <= 127), and Q8_1's ``s = d * sum(q)``
    as f16 (used with the weight's offset ``m``: |m| * 2^-10 * 32 * 127 * d more per block).
    So ``|error| <= sum_b e_b * sum_{i in b} |w_i| (+ the s term)``, plus float rounding of
    the sums (1e-5 relative to ``|w| @ |x|``, far above the f32 accumulation error).
    """
    B = ACTIVATION_BLOCK[name]
    m, k = x.shape
    amax = np.abs(x.reshape(m, k // B, B)).max(axis=2).astype(np.float64)  # (m, nb)
    per_value = amax / 127 * (0.5 + (0 if B == 256 else 127 * 2.0**-11))
    wabs = np.abs(w.astype(np.float64)).reshape(w.shape[0], k // B, B).sum(axis=2)  # (n, nb)
    bound = per_value @ wabs.T
    if name in PAIRS_WITH_Q8_1:
        offset = np.abs(w.reshape(w.shape[0], k // 32, 32).min(axis=2))  # |m| <= |min value|
        bound += (amax / 127 * 2.0**-10 * 32 * 127) @ offset.T.astype(np.float64)
    return bound + 1e-5 * (np.abs(x.astype(np.float64)) @ np.abs(w.T.astype(np.float64))) + 1e-6


def assert_qmatmul_close(
    got: np.ndarray,
    ref: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    name: str,
    native: bool | None = None,
) -> None:
    """``got`` (QMatMul's ``x @ w.T`` plus anything exact, e.g. a bias) against ``ref``:
    within the activation quantization bound on the native path, to f32 rounding otherwise."""
    from workbench.backends.cpu import quantized

    if native is None:
        native = quantized.NATIVE is not None
    if native and name in quantized.NATIVE_TYPES:
        k = x.shape[-1]
        bound = activation_error_bound(x.reshape(-1, k), w.reshape(-1, k), name)
        assert np.all(np.abs(got - ref) <= bound.reshape(got.shape) + 1e-5 * np.abs(ref))
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


def exact_case(name: str, n: int, k: int, batch: int, seed: int):
    """Raw blocks of a random (n, k) weight, activations Q8 represents exactly (integers with
    127 in each block: d = 1, q = x), the float64 product with gguf-py's decoded weight and
    the scale of its rounding (sum of |x| |w|)."""
    rng = np.random.default_rng(seed)
    raw = random_blocks(name, n * k // ggml.BY_NAME[name].block_size, rng)
    w = reference_weights(raw, name, (n, k)).astype(np.float64)
    x = rng.integers(-127, 128, (batch, k)).astype(np.float32)
    x[:, ::32] = 127
    return raw, x, x @ w.T, np.abs(x) @ np.abs(w.T)


def native_qmatmul(native, raw, name: str, n: int, k: int, x: np.ndarray) -> np.ndarray:
    """x (batch, k) @ W.T through ``native.qmatmul`` (a NaN-filled output, so unwritten
    entries show)."""
    out = np.full((x.shape[0], n), np.nan, np.float32)
    native.qmatmul(raw, ggml.BY_NAME[name].id, n, k, x, out)
    return out


def assert_exact(got: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> None:
    """``got`` is ``ref`` up to f32 rounding of a sum of |x| |w| ``scale``."""
    err = np.abs(got - ref)
    bad = err > 1e-6 * scale + 1e-6
    assert not bad.any(), f"{bad.sum()} of {bad.size} outputs off: worst {err.max():.3g}"
