"""Batched matmul on the CPU through numpy's BLAS (f16/bf16 computed in f32)."""

from __future__ import annotations

import numpy as np

from ._arrays import contiguous, upcast, view


class MatmulOps:
    __slots__ = ()

    def matmul(self, lhs_layout, rhs, rhs_layout):
        """``(..., m, k) @ (..., k, n)``; batch dims already broadcast to one shape."""
        a = view(self.array, lhs_layout)
        b = view(rhs.array, rhs_layout)
        return type(self)(contiguous(np.matmul(upcast(a), upcast(b)), a.dtype))
