"""Special values against the mathematics, never against PyTorch's ISA-dependent fast paths.

PyTorch's vectorised CPU kernels differ between AVX2, AVX-512 and ARM at the extremes (its GELU
of +inf is NaN on an AVX-512 Xeon and +inf on an AVX2 EPYC), so every expectation here comes
from Python's ``math`` in float64, with the limits written out where a formula would give
0 * inf, then rounded to the dtype under test by numpy / ml_dtypes (IEEE round to nearest even).

Inputs: NaN, ±inf, ±0, the smallest subnormal, the largest finite value and ±1 of each dtype.
A NaN must stay NaN, an infinity must be the same infinity, the sign of a zero must match where
the function defines it (odd functions, sqrt, floor/ceil/round), and finite values must agree
to the dtype's tolerance.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from devices import OP_DEVICE_PARAMS

import workbench as wb

NUMPY_DTYPES = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
}
# (rtol, atol) of finite results; halves are computed in f32 and rounded once.
TOL = {"f64": (1e-12, 1e-300), "f32": (2e-6, 1e-6), "f16": (1e-3, 1e-6), "bf16": (8e-3, 1e-6)}


def special_inputs(dtype: str) -> np.ndarray:
    info = ml_dtypes.finfo(NUMPY_DTYPES[dtype])
    tiny = float(info.smallest_subnormal)
    big = float(info.max)
    return np.array([math.nan, math.inf, -math.inf, 0.0, -0.0, tiny, -tiny, big, -big, 1.0, -1.0])


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _sigmoid(x: float) -> float:
    if math.isnan(x):
        return x
    return 1.0 / (1.0 + _exp(-x)) if x >= 0 else _exp(x) / (1.0 + _exp(x))


def _phi(x: float) -> float:
    """Φ(x) = erfc(-x / √2) / 2 (erfc keeps the left tail accurate)."""
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _times_vanishing(x: float, factor: float) -> float:
    """x * factor where factor -> 0 as x -> -inf: the limit is 0 with x's sign."""
    if math.isinf(x) and x < 0:
        return -0.0
    return x * factor


def _gelu_tanh(x: float) -> float:
    if math.isnan(x):
        return x
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x) if math.isfinite(x) else x
    return _times_vanishing(x, 0.5 * (1.0 + math.tanh(inner)))


def _log(x: float) -> float:
    if math.isnan(x) or x < 0:
        return math.nan
    return -math.inf if x == 0 else math.log(x)


def _sqrt(x: float) -> float:
    return math.nan if x < 0 else math.sqrt(x)  # sqrt(-0) is -0, sqrt(nan) nan


def _rsqrt(x: float) -> float:
    if x == 0:
        return math.copysign(math.inf, x)
    return math.nan if x < 0 else 1.0 / math.sqrt(x)  # 1/sqrt(inf) = 0


def _recip(x: float) -> float:
    return math.copysign(math.inf, x) if x == 0 else 1.0 / x


def _log1p(x: float) -> float:
    if math.isnan(x) or x < -1:
        return math.nan
    return -math.inf if x == -1 else math.log1p(x)


def _expm1(x: float) -> float:
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf


def _on_finite(fn):
    """``fn`` for finite x; NaN and infinities pass through (floor, ceil, round). An integral
    result of zero keeps x's sign (IEEE: floor(-0) = ceil(-0.5) = -0)."""

    def reference(x: float) -> float:
        if not math.isfinite(x):
            return x
        out = float(fn(x))
        return math.copysign(out, x) if out == 0 else out

    return reference


def _round_half_even(x: float) -> float:
    out = float(round(x))  # Python's round() is half to even
    return math.copysign(out, x) if out == 0 else out


# name: (workbench function, float64 reference, whether the sign of a zero result is defined)
REFERENCES = {
    "exp": (wb.exp, _exp, False),
    "log": (wb.log, _log, False),
    "tanh": (wb.tanh, math.tanh, True),
    "sin": (wb.sin, lambda x: math.sin(x) if math.isfinite(x) else math.nan, True),
    "atan": (wb.atan, math.atan, True),
    "sigmoid": (wb.sigmoid, _sigmoid, False),
    "erf": (wb.erf, math.erf, True),
    "gelu_erf": (wb.gelu_erf, lambda x: x if math.isnan(x) else _times_vanishing(x, _phi(x)), True),
    "gelu": (wb.gelu, _gelu_tanh, True),
    "silu": (wb.silu, lambda x: x if math.isnan(x) else _times_vanishing(x, _sigmoid(x)), True),
    "relu": (wb.relu, lambda x: x if math.isnan(x) else max(x, 0.0), False),
    "abs": (wb.abs, abs, True),
    "neg": (wb.neg, lambda x: -x, True),
    "sqr": (wb.sqr, lambda x: x * x, True),
    "sqrt": (wb.sqrt, _sqrt, True),
    "rsqrt": (wb.rsqrt, _rsqrt, True),
    "recip": (wb.recip, _recip, True),
    "log1p": (wb.log1p, _log1p, True),
    "expm1": (wb.expm1, _expm1, True),
    "floor": (wb.floor, _on_finite(math.floor), True),
    "ceil": (wb.ceil, _on_finite(math.ceil), True),
    "round": (wb.round, _on_finite(_round_half_even), True),
}


def expected_values(reference, x: np.ndarray, dtype: str) -> np.ndarray:
    exact = np.array([reference(float(v)) for v in x], dtype=np.float64)
    with np.errstate(over="ignore"):
        return exact.astype(NUMPY_DTYPES[dtype])


def assert_special_equal(actual, expected, dtype: str, signed_zero: bool, what: str) -> None:
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(actual), nan), f"{what}: NaN at {np.isnan(actual)}, want {nan}"
    inf = np.isinf(expected)
    assert np.array_equal(actual[inf], expected[inf]), f"{what}: {actual} != {expected}"
    finite = ~nan & ~inf
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=rtol, atol=atol, err_msg=what)
    if signed_zero:
        zero = finite & (expected == 0) & (actual == 0)
        assert np.array_equal(np.signbit(actual[zero]), np.signbit(expected[zero])), (
            f"{what}: zero signs {np.signbit(actual[zero])}, want {np.signbit(expected[zero])}"
        )


@pytest.mark.parametrize("dtype", list(NUMPY_DTYPES))
@pytest.mark.parametrize("name", list(REFERENCES))
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_unary_special_values_follow_the_maths(name, dtype, device):
    fn, reference, signed_zero = REFERENCES[name]
    x = special_inputs(dtype).astype(NUMPY_DTYPES[dtype])
    out = fn(wb.tensor(x, dtype=getattr(wb, dtype), device=device)).numpy()
    expected = expected_values(reference, x.astype(np.float64), dtype)
    assert_special_equal(out, expected, dtype, signed_zero, f"{name}({x.tolist()}) in {dtype}")


@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_round_is_half_to_even(device):
    x = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4999999, 0.5000001])
    out = wb.round(wb.tensor(x, device=device)).numpy()
    assert out.tolist() == [_round_half_even(v) for v in x]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("source", ["f32", "f64"])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_half_casts_round_to_nearest_even_and_overflow_to_inf(dtype, source, device):
    """IEEE rounding of the f32/f64 value, ties to even, overflow to ±inf, NaN kept."""
    info = ml_dtypes.finfo(NUMPY_DTYPES[dtype])
    big, eps = float(info.max), float(info.eps)
    tiny = float(info.smallest_subnormal)
    x = np.array([big, -big, big * (1 + eps / 4), big * (1 + eps), 1e39 if source == "f64" else
                  3e38, 1 + eps / 2, 1 + eps * 1.5, tiny / 2, tiny * 0.75, -tiny * 1.5,
                  math.inf, -math.inf, math.nan, -0.0])  # fmt: skip
    x = x.astype(NUMPY_DTYPES[source])
    out = wb.tensor(x, device=device).to_dtype(getattr(wb, dtype)).numpy()
    with np.errstate(over="ignore"):
        expected = x.astype(np.float64).astype(NUMPY_DTYPES[dtype])
    actual = out.astype(np.float64)
    want = expected.astype(np.float64)
    assert np.array_equal(actual, want, equal_nan=True), f"{x} -> {actual}, want {want}"
    assert np.array_equal(np.signbit(actual), np.signbit(want))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dim", [None, 0, 1], ids=str)
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_argmax_argmin_ties_pick_the_first(name, dim, device):
    x = np.array([[1.0, 3.0, 3.0, 1.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, -1.0, 5.0]])
    out = getattr(wb, name)(wb.tensor(x, device=device), dim).numpy()
    expected = getattr(np, name)(x) if dim is None else getattr(np, name)(x, axis=dim)
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("device", OP_DEVICE_PARAMS)
def test_sort_places_nan_as_the_largest_value_stably(descending, device):
    """NaN sorts as larger than +inf (last ascending, first descending), as PyTorch documents;
    ties keep their order (stable)."""
    x = np.array([[2.0, 1.0, 2.0, math.nan, 1.0, -math.inf, math.inf, math.nan, 0.0]])
    values, indices = wb.sort(wb.tensor(x, device=device), -1, descending)
    # numpy's stable sort puts NaN last; negating the keys (NaN stays NaN) flips the order of
    # the numbers while keeping ties in their original order.
    keys = np.where(np.isnan(x), np.inf, x)
    rank = np.where(np.isnan(x), 1, 0)
    order = np.lexsort((-keys, -rank) if descending else (keys, rank), axis=-1)
    assert indices.numpy().tolist() == order.tolist()
    assert np.array_equal(values.numpy(), np.take_along_axis(x, order, -1), equal_nan=True)
