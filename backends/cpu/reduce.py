"""Reductions, scans and sorting on the CPU (f16/bf16 accumulate in f32)."""

from __future__ import annotations

import numpy as np

from ._arrays import NUMPY_BY_NAME, contiguous, quiet, upcast, view

# ufunc.reduce directly: np.sum & co. add a Python layer that costs more than a small sum.
_REDUCE = {"sum": np.add.reduce, "prod": np.multiply.reduce, "max": np.maximum.reduce,
           "min": np.minimum.reduce, "any": np.any, "all": np.all}  # fmt: skip


class ReduceOps:
    __slots__ = ()

    def reduce(self, op: str, layout, dims: tuple[int, ...], keepdim: bool, dtype: str):
        """Reduce over ``dims``; the result has dtype ``dtype``.

        ``argmax``/``argmin`` take exactly one dim (the core flattens for a global arg-reduce).
        """
        x = view(self.array, layout)
        out = NUMPY_BY_NAME[dtype]
        if op in ("argmax", "argmin"):
            (dim,) = dims
            fn = np.argmax if op == "argmax" else np.argmin
            return type(self)(contiguous(fn(x, axis=dim, keepdims=keepdim), out))
        # inf - inf is NaN without a warning, as in PyTorch (quiet)
        if op in ("sum", "prod"):
            acc = np.float32 if out.kind == "f" and out.itemsize < 4 else out
            r = quiet(_REDUCE[op], x, axis=dims, keepdims=keepdim, dtype=acc)
        else:
            r = quiet(_REDUCE[op], x, axis=dims, keepdims=keepdim)
        return type(self)(contiguous(r, out))

    def cumsum(self, layout, dim: int, dtype: str):
        x = view(self.array, layout)
        out = NUMPY_BY_NAME[dtype]
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
