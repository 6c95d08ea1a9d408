"""Reductions, scans and sorting on the CPU (f16/bf16 accumulate in f32).

Float sums, products, extrema, arg-extrema, cumsum and the fused statistics (mean, var, std,
logsumexp, p-norm: the optional tier of the backend protocol) run in the native kernels
(kernels/cpu/core/reduce.c) where they are built: strided and broadcast layouts are read in
place, f32 sums are blocked (accurate to a few ulp over millions of elements), cumsum
accumulates in f64. Integers and bool (sums to i64, any/all), sort, and every op under
``WORKBENCH_NATIVE=0`` take the numpy path.
"""

from __future__ import annotations

import numpy as np

from ..layout import reduced_shape
from ._arrays import F32, NUMPY_BY_NAME, contiguous, is_half, quiet, upcast, view
from .native import NATIVE, codes

# ufunc.reduce directly: np.sum & co. add a Python layer that costs more than a small sum.
_REDUCE = {"sum": np.add.reduce, "prod": np.multiply.reduce, "max": np.maximum.reduce,
           "min": np.minimum.reduce, "any": np.any, "all": np.all}  # fmt: skip
# The native reductions by name (empty on the numpy path); they take these dtypes (numpy type
# characters of f32, f64, f16 and bf16).
# (an extension built before the reductions existed has none: the numpy path runs)
_NATIVE_REDUCE = codes("reduce") if hasattr(NATIVE, "reduce_ops") else {}
_NATIVE_CUMSUM = getattr(NATIVE, "cumsum", None)
_NATIVE_FLOATS = "fdeE"
_ARRAY = np.ndarray
_I64 = np.dtype(np.int64)


def _numpy_statistic(op: str, x: np.ndarray, dims: tuple[int, ...], keepdim: bool, param):
    """The fused statistics on the numpy path (x already in its compute type)."""
    n = 1
    for d in dims:
        n *= x.shape[d]
    if op in ("mean", "var", "std"):
        mean = np.add.reduce(x, axis=dims, keepdims=True) / n
        if op == "mean":
            return mean if keepdim else np.squeeze(mean, dims)
        d = x - mean
        v = np.add.reduce(d * d, axis=dims, keepdims=keepdim) / (n - param if n > param else 0)
        return np.sqrt(v) if op == "std" else v
    if op == "logsumexp":
        if n == 0:
            return np.full(reduced_shape(x.shape, dims, keepdim), -np.inf, x.dtype)
        m = np.maximum.reduce(x, axis=dims, keepdims=True)
        m = np.where(np.isinf(m), 0, m)
        r = np.log(np.add.reduce(np.exp(x - m), axis=dims, keepdims=True)) + m
        return r if keepdim else np.squeeze(r, dims)
    a = np.abs(x)  # norm
    if param == 2:
        return np.sqrt(np.add.reduce(a * a, axis=dims, keepdims=keepdim))
    if np.isinf(param):
        return (np.maximum if param > 0 else np.minimum).reduce(a, axis=dims, keepdims=keepdim)
    return np.add.reduce(a**param, axis=dims, keepdims=keepdim) ** (1 / param)


class ReduceOps:
    __slots__ = ()

    def _native_reduce(self, op: str, layout, dims: tuple[int, ...], keepdim: bool, param=0.0):
        """``op`` (a reduction or fused statistic, ``param`` its parameter) over ``dims`` by the
        native kernel into a new contiguous array (x's dtype, i64 for argmax/argmin), or None
        where the numpy path computes it."""
        code = _NATIVE_REDUCE.get(op)
        a = self.array
        if code is None or type(a) is not _ARRAY or a.dtype.char not in _NATIVE_FLOATS:
            return None
        dtype = _I64 if op in ("argmax", "argmin") else a.dtype
        out = np.empty(reduced_shape(layout.shape, dims, keepdim), dtype)
        NATIVE.reduce(code, a, layout.offset, layout.shape, layout.strides, dims, out, param)
        return type(self)(out)

    def reduce(self, op: str, layout, dims: tuple[int, ...], keepdim: bool, dtype: str):
        """Reduce over ``dims``; the result has dtype ``dtype``.

        ``argmax``/``argmin`` take exactly one dim (the core flattens for a global arg-reduce).
        """
        out = NUMPY_BY_NAME[dtype]
        if out is self.array.dtype or op in ("argmax", "argmin"):
            native = self._native_reduce(op, layout, tuple(dims), keepdim)
            if native is not None:
                return native
        x = view(self.array, layout)
        if op in ("argmax", "argmin"):
            (dim,) = dims
            fn = np.argmax if op == "argmax" else np.argmin
            return type(self)(contiguous(fn(x, axis=dim, keepdims=keepdim), out))
        # inf - inf is NaN without a warning, as in PyTorch (quiet)
        if op in ("sum", "prod"):
            acc = F32 if is_half(out) else out  # (bf16's numpy kind is "V", not "f")
            r = quiet(_REDUCE[op], x, axis=dims, keepdims=keepdim, dtype=acc)
        else:
            r = quiet(_REDUCE[op], x, axis=dims, keepdims=keepdim)
        return type(self)(contiguous(r, out))

    # -- fused statistics: the optional tier (``supports(storage, "var")``) ------------------
    def mean(self, layout, dims: tuple[int, ...], keepdim: bool):
        """Σ x / N over ``dims`` (f16/bf16 accumulate in f32: a half sum cannot overflow)."""
        return self._statistic("mean", layout, dims, keepdim, 0.0)

    def var(self, layout, dims: tuple[int, ...], keepdim: bool, correction: float):
        """Σ (x - x̄)² / (N - correction), two passes (the mean, then the deviations)."""
        return self._statistic("var", layout, dims, keepdim, correction)

    def std(self, layout, dims: tuple[int, ...], keepdim: bool, correction: float):
        """√var"""
        return self._statistic("std", layout, dims, keepdim, correction)

    def logsumexp(self, layout, dims: tuple[int, ...], keepdim: bool):
        """m + log Σ exp(x - m), m the max over ``dims`` (0 where it is infinite)."""
        return self._statistic("logsumexp", layout, dims, keepdim, 0.0)

    def norm(self, layout, p: float, dims: tuple[int, ...], keepdim: bool):
        """(Σ |x|ᵖ)^(1/p) for p > 0; p = inf: max |x|, p = -inf: min |x|."""
        return self._statistic("norm", layout, dims, keepdim, p)

    def _statistic(self, op: str, layout, dims, keepdim: bool, param: float):
        dims = tuple(dims)
        native = self._native_reduce(op, layout, dims, keepdim, param)
        if native is not None:
            return native
        a = self.array
        x = view(a, layout)
        if a.dtype.char in "eE":  # f16, bf16: computed in f32
            x = x.astype(F32)
        r = quiet(_numpy_statistic, op, x, dims, keepdim, param)
        return type(self)(contiguous(np.asarray(r), a.dtype))

    def cumsum(self, layout, dim: int, dtype: str):
        a = self.array
        out = NUMPY_BY_NAME[dtype]
        native = _NATIVE_CUMSUM is not None and type(a) is _ARRAY
        if native and a.dtype.char in _NATIVE_FLOATS and out is a.dtype and layout.shape:
            r = np.empty(layout.shape, out)
            _NATIVE_CUMSUM(a, layout.offset, layout.shape, layout.strides, dim, r)
            return type(self)(r)
        x = view(a, layout)
        return type(self)(contiguous(np.cumsum(upcast(x), axis=dim), out))

    def sort(self, layout, dim: int, descending: bool):
        """Stable sort along ``dim``: returns (values, int64 indices). NaN sorts as largest."""
        x = view(self.array, layout)
        if descending:
            flipped = np.flip(x, axis=dim)
            idx = x.shape[dim] - 1 - np.flip(np.argsort(flipped, axis=dim, kind="stable"), dim)
        else:
            idx = np.argsort(x, axis=dim, kind="stable")
        values = np.take_along_axis(x, idx, axis=dim)
        return type(self)(contiguous(values)), type(self)(contiguous(idx.astype(np.int64)))
