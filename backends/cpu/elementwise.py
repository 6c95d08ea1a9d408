"""Elementwise ops on the CPU: unary, binary (operands already broadcast), comparisons, where."""

from __future__ import annotations

import math

import numpy as np

from .. import optable
from ..lazy import lazy_module
from ._arrays import contiguous, is_half, quiet, upcast, view
from .native import NATIVE, codes

special = lazy_module("scipy.special")
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
_INV_SQRT_2 = float(1.0 / np.sqrt(2.0))


def _zero_at_neg_inf(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x f(x) with f -> 0 as x -> -inf (GELU, SiLU) is 0 * inf = NaN at -inf by the formula;
    the limit, -0, is the mathematically right value."""
    neg_inf = np.isneginf(x)
    if neg_inf.any():
        out[neg_inf] = -0.0
    return out


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"""
    out = 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    return _zero_at_neg_inf(x, out)


# Abramowitz & Stegun 7.1.26: erfc(z) = t (a1 + t (a2 + ... + t a5)) exp(-z²), t = 1/(1 + p z),
# z >= 0, |error| <= 1.5e-7: as accurate as f32 needs and ~5x faster than scipy's f32 erf.
_AS_P = np.float32(0.3275911)
_AS_A = tuple(np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736,
                                      0.254829592))  # fmt: skip
_GELU_CHUNK = 1 << 16  # elements per pass: the temporaries stay in cache


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    """x Φ(x) = 0.5 x (1 + erf(x / sqrt(2))); f32 through ``_gelu_erf_f32``. -0 below x = -13
    (f64: -37.5), where the result would soon be subnormal, as the native kernel (vmath.h):
    subnormals slow every product that reads them."""
    if x.dtype == np.float32:
        out = _gelu_erf_f32(x)
    else:
        out = 0.5 * x * special.erfc(-x * _INV_SQRT_2)
    np.copyto(out, -0.0, where=x < (-37.5 if x.dtype.itemsize > 4 else -13.0))
    return out


def _gelu_erf_f32(x: np.ndarray) -> np.ndarray:
    """x Φ(x) in f32, a chunk at a time: e = Φ(-|x|) = erfc(|x|/√2)/2 from A&S 7.1.26, then
    Φ(x) = 0.5 + copysign(0.5 - e, x)."""
    flat = x.reshape(-1)
    out = np.empty(flat.shape, np.float32)
    size = min(_GELU_CHUNK, flat.size)
    z_buf, t_buf = np.empty(size, np.float32), np.empty(size, np.float32)
    half = np.float32(0.5)
    for start in range(0, flat.size, _GELU_CHUNK):
        v = flat[start : start + _GELU_CHUNK]
        z, t, o = z_buf[: v.size], t_buf[: v.size], out[start : start + v.size]
        np.multiply(v, np.float32(_INV_SQRT_2), out=z)
        np.abs(z, out=z)
        np.multiply(z, _AS_P, out=t)
        t += 1
        np.reciprocal(t, out=t)
        np.multiply(t, _AS_A[0], out=o)
        for a in _AS_A[1:]:
            o += a
            o *= t
        np.square(z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)
        o *= z
        o *= half  # Φ(-|x|)
        np.subtract(half, o, out=o)
        np.copysign(o, v, out=o)
        o += half  # Φ(x)
        o *= v
    return out.reshape(x.shape)


def _silu(x: np.ndarray) -> np.ndarray:
    """x σ(x) = x / (1 + exp(-x)): about twice as fast as ``x * expit(x)`` (exp overflows to
    inf for x < -88 in f32, giving -0, as PyTorch)."""
    out = np.negative(x, out=np.empty(x.shape, x.dtype))  # (a 0-d x would give a scalar)
    np.exp(out, out=out)
    out += 1
    return _zero_at_neg_inf(x, np.divide(x, out, out=out))


def _relu(x: np.ndarray) -> np.ndarray:
    """max(x, 0), NaN kept. numpy's maximum has SIMD loops for two arrays but not for an array
    and a scalar: taking the maximum against a zero-filled output in place is ~4× faster."""
    out = np.empty(x.shape, x.dtype)
    out.fill(0)
    return np.maximum(x, out, out=out)


# The dispatch dicts come from the op table; the CPU swaps in its own implementation of the same
# maths where it has a faster or special-value-exact one (tests/test_optable.py checks them).
UNARY = optable.numpy_table("unary") | {
    "gelu": _gelu_tanh, "gelu_erf": _gelu_erf, "relu": _relu, "silu": _silu,
}  # fmt: skip
# Ops whose result keeps the input dtype exactly, so f16/bf16 need no f32 round trip.
_EXACT_IN_ANY_DTYPE = frozenset(optable.names("unary", exact=True))
_BOOL_RESULT = frozenset(optable.names("unary", result=optable.BOOL))

BINARY = optable.numpy_table("binary")
_LOGICAL = frozenset(optable.names("binary", result=optable.BOOL))
# Ops numpy has no precise half-precision loop for: computed in f32.
_UPCAST = frozenset(optable.names("binary", upcast=True))
CMP = optable.numpy_table("cmp")


# The native kernels (kernels/cpu/core/elementwise.c), by op name; they compute these dtypes
# (numpy type characters of f32, f64, f16 and bf16), other dtypes take the numpy path.
_NATIVE_UNARY = codes("unary")
_NATIVE_BINARY = codes("binary")
_NATIVE_CMP = codes("cmp")
# numpy ops may leave a numpy scalar rather than a 0-d array in a storage: the kernels take
# arrays only (checked by type: cheaper than isinstance).
_NATIVE_FLOATS = "fdeE"
_BOOL = np.dtype(np.bool_)
_ARRAY = np.ndarray
_AFFINE, _CLAMP, _POWF, _ELU = (_NATIVE_UNARY.get(k) for k in ("affine", "clamp", "powf", "elu"))


class ElementwiseOps:
    __slots__ = ()

    def _native_float(self) -> bool:
        """Whether the native kernels compute this storage's elements."""
        a = self.array
        return type(a) is _ARRAY and a.dtype.char in _NATIVE_FLOATS

    def _native_unary(self, code: int, layout, p0: float = 0.0, p1: float = 0.0):
        """``op(x)`` by the native kernel ``code`` into a new contiguous array, no copy of x
        (for a storage that ``_native_float`` accepts)."""
        return type(self)(NATIVE.unary(code, self.array, layout, p0, p1))

    def unary(self, op: str, layout):
        code = _NATIVE_UNARY.get(op)
        if code is not None:
            out = NATIVE.unary(code, self.array, layout, 0.0, 0.0)
            if out is not None:  # (None: not a float dtype)
                return type(self)(out)
        x = view(self.array, layout)
        if op in _BOOL_RESULT:
            return type(self)(contiguous(UNARY[op](x)))
        dtype = x.dtype
        if is_half(dtype) and op not in _EXACT_IN_ANY_DTYPE:
            x = x.astype(np.float32)
        return type(self)(contiguous(quiet(UNARY[op], x), dtype))

    def binary(self, op: str, lhs_layout, rhs, rhs_layout):
        code = _NATIVE_BINARY.get(op)
        a, b = self.array, rhs.array
        if code is not None:  # the dispatch benchmark's path: one call checks, allocates, runs
            out = NATIVE.binary(code, a, lhs_layout, b, rhs_layout)
            if out is not None:
                return type(self)(out)
        a = view(a, lhs_layout)
        b = view(b, rhs_layout)
        if op == "add":  # the hot path: a sum keeps the dtype; it warns only on overflow
            r = np.add(a, b)
            if lhs_layout.is_contiguous and rhs_layout.is_contiguous:  # so r is C-contiguous
                return type(self)(r)
            return type(self)(contiguous(r))
        if op in _LOGICAL:
            return type(self)(contiguous(BINARY[op](a, b)))
        if op in _UPCAST and is_half(a.dtype):
            return type(self)(contiguous(quiet(BINARY[op], upcast(a), upcast(b)), a.dtype))
        return type(self)(contiguous(quiet(BINARY[op], a, b), a.dtype))

    def binary_scalar(self, op: str, layout, scalar, reverse: bool = False):
        """``x op scalar`` (or ``scalar op x`` when ``reverse``); the result keeps x's dtype.

        The Python scalar goes to numpy as is (a "weak" scalar: it takes x's dtype; f16/bf16
        compute in f32, as PyTorch's half kernels do), no numpy scalar is built.
        """
        x = view(self.array, layout)
        fn = BINARY[op]
        try:
            r = quiet(fn, scalar, x) if reverse else quiet(fn, x, scalar)
        except OverflowError:  # u8 tensor + 300 or - 1: wrap around like PyTorch (C casts)
            scalar = np.array(scalar).astype(x.dtype)[()]
            r = quiet(fn, scalar, x) if reverse else quiet(fn, x, scalar)
        return type(self)(contiguous(r, None if op in _LOGICAL else x.dtype))

    def cmp(self, op: str, lhs_layout, rhs, rhs_layout):
        code = _NATIVE_CMP.get(op)
        if code is not None:
            out = NATIVE.cmp(code, self.array, lhs_layout, rhs.array, rhs_layout)
            if out is not None:
                return type(self)(out)
        r = quiet(CMP[op], view(self.array, lhs_layout), view(rhs.array, rhs_layout))
        return type(self)(contiguous(r))

    def cmp_scalar(self, op: str, layout, scalar):
        return type(self)(contiguous(quiet(CMP[op], view(self.array, layout), scalar)))

    def affine(self, layout, mul: float, add: float):
        """``x * mul + add``"""
        if _AFFINE is not None and self._native_float():
            return self._native_unary(_AFFINE, layout, mul, add)
        x = view(self.array, layout)
        return type(self)(contiguous(upcast(x) * mul + add, x.dtype))

    def powf(self, layout, exponent: float):
        if _POWF is not None and self._native_float():
            return self._native_unary(_POWF, layout, exponent)
        x = view(self.array, layout)
        return type(self)(contiguous(quiet(np.power, upcast(x), exponent), x.dtype))

    def elu(self, layout, alpha: float):
        """``x if x > 0 else alpha (e^x - 1)``"""
        if _ELU is not None and self._native_float():
            return self._native_unary(_ELU, layout, alpha)
        x = upcast(view(self.array, layout))
        r = np.where(x > 0, x, alpha * quiet(np.expm1, np.minimum(x, 0)))
        return type(self)(contiguous(r, self.array.dtype))

    def clamp(self, layout, lo, hi):
        if (
            _CLAMP is not None
            and self._native_float()
            and isinstance(lo, (int, float, type(None)))
            and isinstance(hi, (int, float, type(None)))
        ):
            lo = -math.inf if lo is None else lo
            hi = math.inf if hi is None else hi
            return self._native_unary(_CLAMP, layout, lo, hi)
        x = view(self.array, layout)
        return type(self)(contiguous(np.clip(x, lo, hi), x.dtype))

    def where(self, layout, on_true, true_layout, on_false, false_layout):
        """``self`` is the boolean condition; all three layouts share one shape."""
        dtype = on_true.array.dtype
        if (
            NATIVE is not None
            and type(self.array) is type(on_true.array) is type(on_false.array) is _ARRAY
            and on_false.array.dtype is dtype
            and self.array.dtype is _BOOL
        ):
            out = np.empty(layout.shape, dtype)
            NATIVE.where(self.array, layout.offset, layout.strides, on_true.array,
                         true_layout.offset, true_layout.strides, on_false.array,
                         false_layout.offset, false_layout.strides, out, layout.shape)  # fmt: skip
            return type(self)(out)
        r = np.where(
            view(self.array, layout),
            view(on_true.array, true_layout),
            view(on_false.array, false_layout),
        )
        return type(self)(contiguous(r, on_true.array.dtype))
